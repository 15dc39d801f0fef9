#include "crash_point.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "error.h"

namespace gpuprov {
namespace {

// Which point is armed: an index into CrashPointNames(), -1 for none. Atomic because driver
// threads and the interrupt handler may run while a point is reached.
std::atomic<int> armed_index{-1};
std::atomic<CrashAction> crash_action{nullptr};

}  // namespace

const std::vector<std::string>& CrashPointNames() {
  static const std::vector<std::string> names = {
      // provision
      "intent-recorded",     // the record says what is about to be made (phase intent)
      "preempted-vm-deleted",  // a preempted spot VM is deleted; the record has no VM id
      "vm-created",          // the driver's create returned; the VM id is recorded
      "vm-running",          // the VM runs with an address; recorded
      "ports-opened",        // open_ports widened an existing VM's firewall; recorded
      "host-key-pinned",     // SSH answered and the host key is in known_hosts
      "installer-pushed",    // the k3s installer ran over SSH; recorded
      "san-rerun",           // the installer re-ran with --public-ip for the API certificate
      "kubeconfig-written",  // the user's kubeconfig is written; recorded
      // provision --nodes N (cluster_provision.h)
      "cluster-vms-made",    // every node's create, running, SSH and TTL are done
      "peer-ports-opened",   // the driver's open_peer_ports returned
      "agent-prepared",      // an agent's installer ran over SSH
      "agent-joined",        // an agent's join ran over SSH
      // down
      "down-deleting-recorded",   // the record's phase is deleting
      "down-vm-deleted",          // the driver's delete_vm returned
      "down-host-key-forgotten",  // the VM's host key is out of known_hosts
      "down-kubeconfig-removed",  // the kubeconfig file is gone (the record is next)
  };
  return names;
}

void ArmCrashPoint(const std::string& point) {
  const auto& names = CrashPointNames();
  auto it = std::find(names.begin(), names.end(), point);
  if (it == names.end()) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw UsageError(std::string(kCrashAtEnv) + "=" + point + " is not a crash point",
                     "use one of " + list);
  }
  armed_index = static_cast<int>(it - names.begin());
}

void DisarmCrashPoint() { armed_index = -1; }

void SetCrashAction(CrashAction action) { crash_action = action; }

void CrashPoint(const char* point) {
  const int armed = armed_index.load();
  if (armed < 0 || CrashPointNames()[static_cast<size_t>(armed)] != point) return;
  if (const CrashAction action = crash_action.load()) {
    action(point);
    return;
  }
  // write(2), not the console: nothing buffered, nothing allocated, right before the kill.
  const std::string line = std::string("gpuprov: test crash point ") + point + ": SIGKILL\n";
  ssize_t unused = write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
  kill(getpid(), SIGKILL);
  pause();  // SIGKILL cannot be caught; this only waits for it to land
}

}  // namespace gpuprov
