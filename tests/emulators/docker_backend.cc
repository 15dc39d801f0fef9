// SPDX-License-Identifier: Apache-2.0
//
// Instances as real test VMs: one container of the test image per instance,
// systemd as PID 1, the container parameters and NoCloud seed the docker
// driver uses too (plugins/docker/test_vm.h, tests/fixtures/testvm/README.md);
// a container instance (RunPod-like) runs sshd as PID 1 instead (ContainerPod),
// each on its own loopback address in 127.90.0.0/16 (the docker
// driver uses 127.77/16). Docker work runs on a few worker threads, so
// Create/State/Delete never block an API request on Docker.
//
// No container port is published: Docker cannot change a running container's
// bindings, and a cloud's firewall changes all the time. A PortGate forwards
// the ports the cloud's rules allow (SetReachablePorts) from the instance's
// address to its container. Ranges of at most kForwardEachUpTo ports are
// forwarded port by port; in wider ones (a droplet without a firewall, "all
// ports" rules) the ports the container listens on, read from
// /proc/<pid>/net/tcp{,6} at every check.
//
// Reboot and power-off from inside: the VM's container has CAP_SYS_BOOT, so systemd's final
// reboot(2) ends the container's PID namespace the way the kernel ends one: its init is killed
// with SIGHUP for a restart, SIGINT for a power-off or halt (man 2 reboot), which Docker reports
// as exit codes 129 and 130. A restart is started again at once on the same container (same disk,
// same loopback address; the gate follows its bridge address) and stays running in the cloud's
// API, as a rebooted VM does; a power-off (or a systemd exiting with 0, as it does without the
// capability) is a stopped VM. Each boot has its own boot_id (kBootIdUnit): a container would
// otherwise read the host kernel's.
// Private networks (InstanceSpec::private_network): one internal Docker bridge network per key,
// "gpuprov-emu-<session>-<cloud>-<key>", on a /24 of 10.64.0.0/10 (another when Docker says it
// overlaps a network of its own); the container is attached before it starts and its address
// there is its private_ip. The cloud's firewall between private addresses (SetPrivateIngress)
// is an nft table in the container's network namespace, set from outside with
// `nsenter --target <pid> --net nft -f -`: the VM's own nft tables (the node firewall) are
// others, and a packet any table drops is dropped.
// Public networks (InstanceSpec::public_network, a cloud whose VMs reach each other at their
// public addresses): the cloud's such containers share one internal Docker network,
// "gpuprov-emu-<session>-<cloud>-public", the wire under their public addresses. Inside each
// VM's network namespace (set from outside, as the cloud firewall) a route per peer's public
// address leads to the peer's wire address, and a table of its own translates the two 1:1 on
// that interface (PublicNetworkScript): a VM sends to a peer's 127.90 address from its own, the
// peer sees that source, and nothing else crosses the wire.
//
// SSH delay (fault ssh_delay, DockerBackendOptions::ssh_delay_seconds): the instance is
// running and its boot runs from the start, but the gate leaves its SSH port out until the
// delay has passed, so a connection there is refused, as before a real VM's sshd listens.
#include <Poco/InflatingStream.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <queue>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "docker_engine.h"
#include "emulator_http.h"
#include "instance_backend.h"
#include "port_gate.h"
#include "tar_writer.h"
#include "test_vm.h"

namespace gpuprov::emulator {
namespace {

using Clock = std::chrono::steady_clock;
using docker::ContainerSpec;
using docker::Engine;
using docker::EngineError;
using docker::TestVmHostname;
using docker::TestVmSeed;
using docker::TestVmSpec;

// How long a gpu_after_boot GPU waits for the boot install to pass its GPU check.
constexpr std::chrono::seconds kGpuWaitForInstall{120};
constexpr const char* kLabelEmulator = "io.gpuprov.emulator";
constexpr const char* kLabelCloud = "io.gpuprov.emulator.cloud";
constexpr const char* kLabelSession = "io.gpuprov.emulator.session";
constexpr const char* kLabelAddress = "io.gpuprov.emulator.address";
constexpr const char* kLabelName = "io.gpuprov.emulator.name";
constexpr const char* kLabelNetwork = "io.gpuprov.emulator.network";
// The nft table (family ip) that holds the cloud's firewall on the private network.
constexpr const char* kCloudFirewallTable = "gpuprov_emulator_cloud_firewall";
// The nft table (family inet) that translates public and wire addresses on a public network,
// and the routing protocol number that marks its routes (unassigned in iproute2's rt_protos).
constexpr const char* kPublicNetworkTable = "gpuprov_emulator_public_network";
constexpr int kPublicRouteProto = 77;
constexpr int kSubnetTries = 32;
constexpr int kAddressSlots = 256 * 254;
constexpr int kWorkers = 3;
constexpr std::chrono::seconds kCheckEvery{2};
constexpr std::chrono::seconds kEngineTimeout{30};
constexpr int kForwardEachUpTo = 32;

// The TCP ports a container's processes accept connections on from outside it
// (bound to any address, not to loopback), read from /proc/<pid>/net/tcp{,6}.
std::set<int> ListeningPorts(int pid) {
  std::set<int> ports;
  for (const char* file : {"tcp", "tcp6"}) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/net/" + file);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      // "  0: 00000000:1A0B 00000000:0000 0A ..." (local address:port, remote, state)
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      if (!(fields >> slot >> local >> remote >> state) || state != "0A") continue;  // LISTEN
      const size_t colon = local.rfind(':');
      if (colon == std::string::npos) continue;
      const std::string address = local.substr(0, colon);  // hex, 8 (IPv4) or 32 (IPv6) digits
      const bool loopback = address == "0100007F" ||                          // 127.0.0.1
                            address == "00000000000000000000000001000000" ||  // ::1
                            address == "0000000000000000FFFF00000100007F";    // ::ffff:127.0.0.1
      if (loopback || (address.size() != 8 && address.size() != 32)) continue;
      try {
        ports.insert(std::stoi(local.substr(colon + 1), nullptr, 16));
      } catch (const std::exception&) {
      }
    }
  }
  return ports;
}

std::string AddressOfSlot(int slot) {
  return "127.90." + std::to_string(slot / 254) + "." + std::to_string(slot % 254 + 1);
}

// The nft script that makes the cloud's firewall on private_ip (replacing the table): what is
// not for private_ip, loopback and answers pass; then each rule's sources and ports; the rest
// is dropped. nullopt ingress: the table is removed (everything passes).
std::string CloudFirewallScript(const std::string& private_ip, const PrivateIngress& ingress) {
  std::string s = std::string("table ip ") + kCloudFirewallTable + "\n" + "delete table ip " +
                  kCloudFirewallTable + "\n";
  if (!ingress) return s;
  s += std::string("table ip ") + kCloudFirewallTable + " {\n chain input {\n" +
       "  type filter hook input priority -10; policy accept;\n" +
       "  ip daddr != " + private_ip + " accept\n" +
       "  iifname \"lo\" accept\n" +
       "  ct state established,related accept\n";
  for (const PrivateRule& r : *ingress) {
    if ((r.protocol != "tcp" && r.protocol != "udp") || r.sources.empty()) continue;
    const std::string ports = r.ports.first == r.ports.last
                                  ? std::to_string(r.ports.first)
                                  : std::to_string(r.ports.first) + "-" + std::to_string(r.ports.last);
    // One rule per source: an anonymous set refuses overlapping prefixes (0.0.0.0/0 and a peer).
    for (const auto& src : r.sources) {
      s += "  ip saddr " + src + " " + r.protocol + " dport " + ports + " accept\n";
    }
  }
  s += "  drop\n }\n}\n";
  return s;
}

// An instance on a public network: its public (127.90) address and its address on the wire.
struct PublicEndpoint {
  std::string address;
  std::string wire_ip;
  bool operator==(const PublicEndpoint&) const = default;
};

// The shell script, run in the network namespace of self (nsenter, host tools), that makes its
// peers reachable at their public addresses as across the internet, and nothing else over the
// wire:
//  - per peer, a route for its public address in table local (more specific than the
//    127.0.0.0/8 there that makes every 127.x address the VM's own) via the peer's wire address,
//    from self's public address; routes of peers no longer listed are removed;
//  - route_localnet on the wire interface: the kernel otherwise drops 127.x addresses on a
//    non-loopback interface as martians (https://docs.kernel.org/networking/ip-sysctl.html);
//  - a stateless 1:1 translation between public and wire addresses on that interface (Docker
//    drops a bridged packet whose source is outside the network's subnet): before conntrack and
//    every table of the VM on the way in, after them on the way out, so the VM's node firewall
//    and its processes see the peers' public addresses, as behind a cloud's 1:1 NAT.
std::string PublicNetworkScript(const PublicEndpoint& self,
                                const std::vector<PublicEndpoint>& peers) {
  const std::string proto = " table local proto " + std::to_string(kPublicRouteProto);
  std::string listed, routes, in, out;
  for (const PublicEndpoint& p : peers) {
    listed += " " + p.address;
    routes += "ip route replace " + p.address + "/32 via " + p.wire_ip + " dev \"$dev\" src " +
              self.address + proto + "\n";
    in += "  iifname \"$dev\" ip saddr " + p.wire_ip + " ip daddr " + self.wire_ip +
          " ip saddr set " + p.address + " ip daddr set " + self.address + " accept\n";
    out += "  oifname \"$dev\" ip saddr " + self.address + " ip daddr " + p.address +
           " ip saddr set " + self.wire_ip + " ip daddr set " + p.wire_ip + " accept\n";
  }
  const std::string table = std::string("inet ") + kPublicNetworkTable;
  return "set -e\n"
         "dev=$(ip -o -4 addr show to " + self.wire_ip + "/32 | awk '{print $2; exit}')\n"
         "[ -n \"$dev\" ] || { echo 'no interface has " + self.wire_ip + "' >&2; exit 1; }\n"
         "echo 1 >\"/proc/sys/net/ipv4/conf/$dev/route_localnet\"\n"
         "nft -f - <<EOF\n"
         "table " + table + "\ndelete table " + table + "\ntable " + table + " {\n"
         " chain from_wire {\n  type filter hook prerouting priority -310; policy accept;\n" + in +
         "  iifname \"$dev\" drop\n }\n"
         " chain to_wire {\n  type filter hook postrouting priority 310; policy accept;\n" + out +
         "  oifname \"$dev\" drop\n }\n}\nEOF\n"
         "for d in $(ip route show" + proto + " | awk '{print $1}'); do\n"
         "  case \"" + listed + " \" in *\" $d \"*) ;;\n"
         "    *) ip route del \"$d\"" + proto + " ;;\n  esac\n"
         "done\n" + routes;
}

// Runs `nsenter --target pid --net PROGRAM FILE` with script in FILE (PROGRAM "nft -f" or
// "sh"); "" on success, else what went wrong.
std::string RunInNetns(int pid, const std::string& program, const std::string& script) {
  char path[] = "/tmp/gpuprov-emulator-netns-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "cannot make a temporary file";
  FILE* f = fdopen(fd, "w");
  std::fputs(script.c_str(), f);
  std::fclose(f);
  const std::string cmd = "nsenter --target " + std::to_string(pid) + " --net " + program + " " +
                          path + " 2>&1";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    const int rc = pclose(p);
    std::remove(path);
    if (rc == 0) return "";
    return "nsenter " + program + " failed (" + std::to_string(rc) + "): " + out;
  }
  std::remove(path);
  return "cannot run nsenter";
}

// The user data with a failing step added (fault boot_script_fails): a shell
// script fails at its first line (an "exit 1" right after the #! line: a script
// that ends in `exec` would never reach an appended one); anything else becomes a MIME multipart with
// the original part and a failing shell-script part.
std::string FailingUserData(const std::string& sent) {
  // Gzipped user data (as the AWS driver sends it) is unpacked first, as cloud-init does.
  std::string user_data = sent;
  if (sent.rfind("\x1f\x8b", 0) == 0) {
    std::istringstream packed(sent);
    Poco::InflatingInputStream inflate(packed, Poco::InflatingStreamBuf::STREAM_GZIP);
    user_data.assign(std::istreambuf_iterator<char>(inflate), std::istreambuf_iterator<char>());
  }
  const std::string fail =
      "echo 'gpuprov-emulator: injected boot script failure (fault boot_script_fails)' >&2\n"
      "exit 1\n";
  if (user_data.empty()) return "#!/bin/sh\n" + fail;
  if (user_data.rfind("#!", 0) == 0) {
    const size_t eol = user_data.find('\n');
    if (eol == std::string::npos) return user_data + "\n" + fail;
    return user_data.substr(0, eol + 1) + fail + user_data.substr(eol + 1);
  }
  const std::string b = "===gpuprov-emulator-boundary===";
  std::string type = "text/plain";
  if (user_data.rfind("#cloud-config", 0) == 0) type = "text/cloud-config";
  if (user_data.rfind("#include", 0) == 0) type = "text/x-include-url";
  std::string s = "Content-Type: multipart/mixed; boundary=\"" + b + "\"\nMIME-Version: 1.0\n\n";
  s += "--" + b + "\nContent-Type: " + type + "; charset=\"utf-8\"\nMIME-Version: 1.0\n\n";
  s += user_data;
  if (user_data.back() != '\n') s += '\n';
  s += "--" + b + "\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\nMIME-Version: 1.0\n\n";
  s += "#!/bin/sh\n" + fail;
  s += "--" + b + "--\n";
  return s;
}

// A container instance (InstanceSpec::container) as RunPod gives one: the test image with sshd
// as PID 1 (the shell execs it), no systemd, no cloud-init, Docker's default capabilities. The
// shell authorizes the keys for root and the instance's SSH user and makes the host keys that
// the image leaves out.
constexpr const char* kContainerPodStart = R"SH(
for user in root "${GPUPROV_EMU_SSH_USER:-root}"; do
  home=$(getent passwd "$user" | cut -d: -f6)
  [ -n "$home" ] || continue
  mkdir -p "$home/.ssh"
  printf '%s\n' "$GPUPROV_EMU_SSH_KEYS" >"$home/.ssh/authorized_keys"
  chmod 700 "$home/.ssh"
  chmod 600 "$home/.ssh/authorized_keys"
  chown -R "$user:" "$home/.ssh"
done
mkdir -p /run/sshd
ssh-keygen -A >/dev/null
exec /usr/sbin/sshd -D -e
)SH";

ContainerSpec ContainerPod(const TestVmSpec& vm, const InstanceSpec& instance) {
  std::string keys;
  for (const auto& k : instance.ssh_public_keys) keys += (keys.empty() ? "" : "\n") + k;
  ContainerSpec spec;
  spec.name = vm.name;
  spec.image = vm.image;
  spec.hostname = vm.hostname;
  spec.cmd = {"/bin/sh", "-c", kContainerPodStart};
  spec.env = {"GPUPROV_EMU_SSH_USER=" + instance.ssh_user, "GPUPROV_EMU_SSH_KEYS=" + keys};
  spec.ports = vm.ports;
  spec.labels = vm.labels;
  return spec;
}

// The systemd unit that runs a startup script (InstanceSpec::startup_script) the way a cloud's
// own agent does, not through cloud-init: at the first boot, as root, output appended to the
// log. Type=simple and KillMode=process: nothing waits for it (an installer that waits for
// cloud-init or for other units cannot deadlock the boot), and what it leaves running stays.
// "started" is written before the script runs, so no later boot runs it again (run-once is
// this emulator's choice; the Verda reference leaves it UNCONFIRMED).
constexpr const char* kStartupUnit = "gpuprov-emulator-startup-script.service";

std::map<std::string, std::string> StartupScriptFiles(const InstanceSpec& s) {
  const std::string dir = StartupScriptDir(s.cloud);
  const std::string log = StartupScriptLog(s.cloud);
  std::map<std::string, std::string> files;
  const std::string rel = dir.substr(1) + "/";
  // boot_script_fails: "exit 1" after the #! line (a script without one is run by sh).
  const std::string& script = s.startup_script;
  files[rel + "script"] =
      !s.faults.script_fails     ? script
      : script.rfind("#!", 0) == 0 ? FailingUserData(script)
                                   : FailingUserData("#!/bin/sh\n" + script);
  files[rel + "run"] =
      "#!/bin/sh\n"
      "# The cloud's startup script runner (gpuprov emulator): once, as root, output to the log.\n"
      "umask 077\n"
      "dir=" + dir + "\n"
      ": >\"$dir/started\"\n"
      "chmod 0700 \"$dir/script\"\n"
      "cd /root || cd /\n"
      "\"$dir/script\" >>" + log + " 2>&1 </dev/null\n"
      "rc=$?\n"
      "echo \"$rc\" >\"$dir/exit-status\"\n"
      "exit \"$rc\"\n";
  files["etc/systemd/system/" + std::string(kStartupUnit)] =
      "[Unit]\n"
      "Description=The cloud's startup script (gpuprov emulator)\n"
      "Wants=network-online.target\n"
      "After=network-online.target\n"
      "ConditionPathExists=!" + dir + "/started\n"
      "\n"
      "[Service]\n"
      "Type=simple\n"
      "KillMode=process\n"
      "ExecStart=/bin/sh " + dir + "/run\n";
  // A drop-in instead of a .wants symlink: the seed archive holds plain files only.
  files["etc/systemd/system/multi-user.target.d/gpuprov-emulator-startup-script.conf"] =
      std::string("[Unit]\nWants=") + kStartupUnit + "\n";
  return files;
}

// Docker's exit code of a container whose init was killed by signal N: 128 + N.
constexpr int kExitRebooted = 128 + 1;     // SIGHUP: reboot(2) RESTART in a PID namespace
constexpr int kExitPoweredOff = 128 + 2;   // SIGINT: reboot(2) POWER_OFF or HALT

// A boot_id of each boot: a fresh UUID bound over /proc/sys/kernel/random/boot_id before
// sysinit (the host kernel's boot_id never changes across a container's restarts). /run is a
// tmpfs, empty at each start.
constexpr const char* kBootIdUnit = "gpuprov-emulator-boot-id.service";

std::map<std::string, std::string> BootIdFiles() {
  return {
      {"etc/systemd/system/" + std::string(kBootIdUnit),
       "[Unit]\n"
       "Description=A boot_id of this boot (gpuprov emulator)\n"
       "DefaultDependencies=no\n"
       "Before=sysinit.target\n"
       "\n"
       "[Service]\n"
       "Type=oneshot\n"
       "RemainAfterExit=yes\n"
       "ExecStart=/bin/sh -c 'cat /proc/sys/kernel/random/uuid >/run/gpuprov-emulator-boot_id && "
       "mount --bind /run/gpuprov-emulator-boot_id /proc/sys/kernel/random/boot_id'\n"},
      // A drop-in instead of a .wants symlink: the seed archive holds plain files only.
      {"etc/systemd/system/sysinit.target.d/gpuprov-emulator-boot-id.conf",
       std::string("[Unit]\nWants=") + kBootIdUnit + "\n"},
  };
}

class DockerBackend : public InstanceBackend {
 public:
  explicit DockerBackend(DockerBackendOptions options) : options_(std::move(options)) {
    std::random_device rd;
    next_slot_ = static_cast<int>(rd() % kAddressSlots);
    for (int i = 0; i < kWorkers; ++i) workers_.emplace_back([this] { Work(); });
  }

  ~DockerBackend() override { RemoveAll(); }

  std::string Name() const override { return "docker"; }

  std::string Create(const InstanceSpec& spec) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) throw BackendError("the emulator is stopping");
    Record r;
    r.spec = spec;
    r.id = "ctr-" + std::to_string(++counter_);
    // The session too: two emulators (parallel test files) making the same VM name in the same
    // order would otherwise ask Docker for the same container name.
    r.container_name = "gpuprov-emu-" + spec.cloud + "-" + TestVmHostname(spec.name) + "-" +
                       std::to_string(counter_) + "-" + options_.session;
    r.address = PickAddressLocked();
    std::random_device rd;
    r.ssh_port = spec.remap_ssh ? 20000 + static_cast<int>(rd() % 30000) : 22;
    r.reachable = spec.reachable;
    if (!spec.private_network.empty()) {
      r.network_name = "gpuprov-emu-" + options_.session + "-" + spec.cloud + "-" +
                       spec.private_network;
    }
    if (spec.public_network) {
      r.public_network_name = "gpuprov-emu-" + options_.session + "-" + spec.cloud + "-public";
    }
    const std::string id = r.id;
    records_[id] = r;
    ScheduleLocked(Clock::now(), id, Task::kCreate);
    return id;
  }

  InstanceStatus State(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    InstanceStatus s;
    auto it = records_.find(id);
    if (it == records_.end() || it->second.phase == Phase::kDeleted) {
      s.state = InstanceState::kGone;
      s.message = "no such instance";
      return s;
    }
    const Record& r = it->second;
    s.public_ip = r.address;
    s.private_ip = r.network_name.empty() ? "10.120." + r.address.substr(7) : r.private_ip;
    s.private_ip_on_network = !r.network_name.empty();
    s.ssh_port = r.ssh_port;
    s.boot_script_fails = r.spec.faults.script_fails;
    s.message = r.message;
    s.ssh_open = r.ssh_open;
    switch (r.phase) {
      case Phase::kCreating:
      case Phase::kWaitStart:
        s.state = InstanceState::kProvisioning;
        break;
      case Phase::kRunning:
        s.state = InstanceState::kRunning;
        s.running_for =
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - r.running_since);
        s.gpu_present = r.spec.gpu_count > 0 && r.gpu_written;
        break;
      case Phase::kGone:
      case Phase::kDeleted:
        s.state = InstanceState::kGone;
        s.preempted = r.preempted;
        break;
      case Phase::kError:
        s.state = InstanceState::kError;
        break;
      case Phase::kStopped:
        s.state = InstanceState::kStopped;
        break;
    }
    return s;
  }

  void Delete(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(id);
    if (it == records_.end() || it->second.phase == Phase::kDeleted) return;
    it->second.phase = Phase::kDeleted;
    ScheduleLocked(Clock::now(), id, Task::kRemove);
  }

  bool Stop(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(id);
    if (it == records_.end() || it->second.phase != Phase::kRunning) return false;
    if (!it->second.stop_requested) {
      it->second.stop_requested = true;
      ScheduleLocked(Clock::now(), id, Task::kPowerOff);
    }
    return true;
  }

  bool Start(const std::string& id, bool new_address) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(id);
    if (it == records_.end() || it->second.phase != Phase::kStopped) return false;
    Record& r = it->second;
    // The container's address label keeps the first address: another session may take the
    // old one, never this one (PickAddressLocked skips the records of this session).
    if (new_address) r.address = PickAddressLocked();
    r.phase = Phase::kWaitStart;
    r.message.clear();
    ScheduleLocked(Clock::now(), id, Task::kStart);
    return true;
  }

  void Preempt(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(id);
    if (it == records_.end() || it->second.phase == Phase::kDeleted) return;
    ScheduleLocked(Clock::now(), id, Task::kPreempt);
  }

  void SetReachablePorts(const std::string& id, const PortSet& ports) override {
    if (!Update(id, [&](Record& x) { x.reachable = ports; })) return;
    ApplyGate(id);
  }

  PortSet ReachablePorts(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(id);
    if (it == records_.end() || it->second.phase == Phase::kDeleted) return {};
    PortSet ports = WithoutBlocked(it->second.reachable, it->second.spec.faults.blocked_ports);
    if (!it->second.ssh_open) ports.Remove(22, 22);
    return ports;
  }

  size_t LiveCount(const std::string& cloud) override {
    std::lock_guard<std::mutex> lock(mu_);
    return CountOfCloud(records_, cloud);
  }

  void SetPrivateIngress(const std::string& id, const PrivateIngress& ingress) override {
    if (!Update(id, [&](Record& x) { x.ingress = ingress; })) return;
    ApplyIngress(id);
  }

  PrivateIngress GetPrivateIngress(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(id);
    return it == records_.end() ? PrivateIngress() : it->second.ingress;
  }

  void RemoveAll() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (removed_all_) return;
      removed_all_ = true;
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) {
      if (t.joinable()) t.join();
    }
    // Every container of this session, whatever state the workers left it in.
    try {
      Engine engine = MakeEngine();
      for (const auto& c : engine.ListContainers(
               {std::string(kLabelEmulator) + "=1",
                std::string(kLabelSession) + "=" + options_.session})) {
        try {
          engine.RemoveContainer(c.id);
        } catch (const std::exception&) {
        }
      }
      for (const auto& n : engine.ListNetworks(
               {std::string(kLabelEmulator) + "=1",
                std::string(kLabelSession) + "=" + options_.session})) {
        try {
          engine.RemoveNetwork(n);
        } catch (const std::exception&) {
        }
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gpuprov-emulator: could not list containers to remove: %s\n",
                   e.what());
    }
    std::lock_guard<std::mutex> gate_lock(gate_mu_);
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, r] : records_) gate_.Close(r.address);
    records_.clear();
  }

 private:
  enum class Phase { kCreating, kWaitStart, kRunning, kGone, kError, kStopped, kDeleted };
  enum class Task { kCreate, kStart, kVanish, kFail, kGpu, kCheck, kRemove, kOpenSsh, kPowerOff, kPreempt };
  struct Record {
    std::string id;
    InstanceSpec spec;
    std::string container_name;
    std::string container_id;
    std::string address;
    int ssh_port = 22;
    Phase phase = Phase::kCreating;
    std::string message;
    Clock::time_point running_since;
    bool gpu_written = false;
    PortSet reachable;          // what the cloud's rules allow now
    std::string bridge_ip;      // the container's address, once started
    int pid = 0;                // its first process, once started
    std::set<int> listening;    // ports it listens on (read only for wide ranges)
    bool ssh_open = true;       // false while the SSH delay runs: the gate leaves SSH out
    bool booted = false;        // it has run once: a later start is a power-on, not a create
    bool stop_requested = false;  // Stop was called; it powers off
    bool preempted = false;     // Preempt took it back
    std::string network_name;   // its private Docker network ("" = none)
    std::string private_ip;     // its address there, once started
    std::string public_network_name;  // the wire of its public address ("" = none)
    std::string public_wire_ip;       // its address there, once started
    PrivateIngress ingress;     // the cloud's firewall on that address
  };
  struct Job {
    Clock::time_point at;
    std::string id;
    Task task;
    bool operator>(const Job& o) const { return at > o.at; }
  };

  Engine MakeEngine() const {
    if (!options_.socket_path.empty()) return Engine(options_.socket_path, kEngineTimeout);
    return Engine::FromEnvironment(kEngineTimeout);
  }

  // Whether some allowed range is too wide to forward port by port.
  static bool HasWideRange(const PortSet& ports) {
    for (const PortRange& r : ports.ranges()) {
      if (r.last - r.first + 1 > kForwardEachUpTo) return true;
    }
    return false;
  }

  // What the gate should forward for r: instance port -> (address port, container port).
  static std::map<int, int> ForwardsOf(const Record& r) {
    std::map<int, int> out;
    const PortSet allowed = WithoutBlocked(r.reachable, r.spec.faults.blocked_ports);
    auto add = [&](int port) { out[port == 22 ? r.ssh_port : port] = port; };
    for (const PortRange& range : allowed.ranges()) {
      if (range.last - range.first + 1 <= kForwardEachUpTo) {
        for (int p = range.first; p <= range.last; ++p) add(p);
      } else {
        for (int p : r.listening) {
          if (range.first <= p && p <= range.last) add(p);
        }
      }
    }
    if (allowed.Contains(22)) out[r.ssh_port] = 22;  // a remapped SSH port wins a clash
    // The gate, not sshd, holds SSH back: the boot runs from t=0, and no unit inside is touched.
    if (!r.ssh_open) out.erase(r.ssh_port);
    return out;
  }

  // Sets the gate of record id from its current rules (after start, a rule change, or a
  // change of the ports it listens on). Serialized by gate_mu_, so the last call wins.
  void ApplyGate(const std::string& id) {
    std::lock_guard<std::mutex> gate_lock(gate_mu_);
    std::string address, bridge_ip;
    std::map<int, int> forwards;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = records_.find(id);
      if (it == records_.end() || it->second.phase != Phase::kRunning ||
          it->second.bridge_ip.empty()) {
        return;
      }
      address = it->second.address;
      bridge_ip = it->second.bridge_ip;
      forwards = ForwardsOf(it->second);
    }
    try {
      for (const auto& line : gate_.Set(address, bridge_ip, forwards)) {
        std::fprintf(stderr, "gpuprov-emulator: cannot forward %s\n", line.c_str());
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gpuprov-emulator: cannot forward %s: %s\n", address.c_str(), e.what());
    }
  }

  // Sets the cloud's firewall on the private address of record id (after start or a rule
  // change). Serialized by gate_mu_, so the last call wins.
  void ApplyIngress(const std::string& id) {
    std::lock_guard<std::mutex> gate_lock(gate_mu_);
    int pid = 0;
    std::string private_ip;
    PrivateIngress ingress;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = records_.find(id);
      if (it == records_.end() || it->second.phase != Phase::kRunning ||
          it->second.private_ip.empty() || it->second.pid == 0) {
        return;
      }
      pid = it->second.pid;
      private_ip = it->second.private_ip;
      ingress = it->second.ingress;
    }
    if (const std::string problem =
            RunInNetns(pid, "nft -f", CloudFirewallScript(private_ip, ingress));
        !problem.empty()) {
      std::fprintf(stderr, "gpuprov-emulator: cannot set the cloud firewall of %s: %s\n",
                   private_ip.c_str(), problem.c_str());
    }
  }

  // The Docker network name of a private network key (or of the cloud's public network, key
  // "public"), made on first use on a free /24 of 10.64.0.0/10 (internal: the VMs reach the
  // outside through their bridge address only).
  void EnsureNetwork(Engine& engine, const std::string& name, const std::string& key) {
    std::lock_guard<std::mutex> lock(network_mu_);
    if (networks_.count(name)) return;
    std::random_device rd;
    std::string last;
    for (int i = 0; i < kSubnetTries; ++i) {
      const unsigned n = rd() % (64 * 256);
      const std::string subnet =
          "10." + std::to_string(64 + n / 256) + "." + std::to_string(n % 256) + ".0/24";
      try {
        engine.CreateNetwork(name, subnet,
                             {{kLabelEmulator, "1"},
                              {kLabelSession, options_.session},
                              {kLabelNetwork, key}},
                             true);
        networks_.insert(name);
        network_subnets_[name] = subnet;
        return;
      } catch (const EngineError& e) {
        if (e.http_status() == 409) {  // made by this session before (a restart): use it
          networks_.insert(name);
          return;
        }
        last = e.what();  // the subnet overlaps another network: try another
      }
    }
    throw BackendError("cannot make the network " + name + ": " + last);
  }

  // Makes every running instance on public network `name` reach the others at their public
  // addresses (PublicNetworkScript), when its members changed since the last time it was set
  // (each task of a member may start, stop, restart or remove one). A member that cannot be
  // set is logged, and tried again after the next task.
  void ApplyPublicNetwork(const std::string& name) {
    std::lock_guard<std::mutex> public_lock(public_mu_);
    std::vector<std::pair<int, PublicEndpoint>> members;  // (pid, endpoint)
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [id, r] : records_) {
        if (r.public_network_name == name && r.phase == Phase::kRunning && r.pid != 0 &&
            !r.public_wire_ip.empty()) {
          members.emplace_back(r.pid, PublicEndpoint{r.address, r.public_wire_ip});
        }
      }
    }
    auto applied = public_applied_.find(name);
    if (applied != public_applied_.end() && applied->second == members) return;
    bool all_set = true;
    for (const auto& [pid, self] : members) {
      std::vector<PublicEndpoint> peers;
      for (const auto& [other_pid, peer] : members) {
        if (other_pid != pid) peers.push_back(peer);
      }
      if (const std::string problem = RunInNetns(pid, "sh", PublicNetworkScript(self, peers));
          !problem.empty()) {
        std::fprintf(stderr, "gpuprov-emulator: cannot route the public network of %s: %s\n",
                     self.address.c_str(), problem.c_str());
        all_set = false;
      }
    }
    if (all_set) {
      public_applied_[name] = members;
    } else {
      public_applied_.erase(name);
    }
  }

  void CloseGate(const std::string& address) {
    std::lock_guard<std::mutex> gate_lock(gate_mu_);
    gate_.Close(address);
  }

  // Addresses held by this process plus those of other emulator sessions.
  std::string PickAddressLocked() {
    std::set<std::string> used;
    for (const auto& [id, r] : records_) used.insert(r.address);
    for (int i = 0; i < kAddressSlots; ++i) {
      std::string a = AddressOfSlot((next_slot_ + i) % kAddressSlots);
      if (used.count(a) == 0 && foreign_.count(a) == 0) {
        next_slot_ = (next_slot_ + i + 1) % kAddressSlots;
        return a;
      }
    }
    throw BackendError("every address of 127.90.0.0/16 is in use");
  }

  void ScheduleLocked(Clock::time_point at, const std::string& id, Task t) {
    jobs_.push(Job{at, id, t});
    cv_.notify_one();
  }

  void Schedule(Clock::time_point at, const std::string& id, Task t) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) ScheduleLocked(at, id, t);
  }

  void Work() {
    Engine engine = MakeEngine();
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      if (stopping_) return;
      if (jobs_.empty()) {
        cv_.wait(lock);
        continue;
      }
      Job j = jobs_.top();
      if (j.at > Clock::now()) {
        cv_.wait_until(lock, j.at);
        continue;
      }
      jobs_.pop();
      auto it = records_.find(j.id);
      if (it == records_.end()) continue;
      Record copy = it->second;
      lock.unlock();
      try {
        Run(engine, copy, j.task);
      } catch (const std::exception& e) {
        Fail(j.id, std::string("docker: ") + e.what());
      }
      if (!copy.public_network_name.empty()) ApplyPublicNetwork(copy.public_network_name);
      lock.lock();
    }
  }

  // Sets phase error (unless deleted) and removes the container later.
  void Fail(const std::string& id, const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(id);
    if (it == records_.end() || it->second.phase == Phase::kDeleted) return;
    it->second.phase = Phase::kError;
    it->second.message = message;
  }

  // Applies f to the record when it still exists and is not deleted; false otherwise.
  template <class F>
  bool Update(const std::string& id, F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(id);
    if (it == records_.end() || it->second.phase == Phase::kDeleted) return false;
    f(it->second);
    return true;
  }

  // What the test image's metadata service fixture serves for this instance. Its private
  // address is the one State reports: on a private network Docker gives it at start, so the
  // fixture serves the VM's address within that network's subnet (local_ipv4_network).
  std::string MetadataDocument(const Record& r, const std::string& hostname) {
    JsonObject doc = NewObject();
    doc->set("cloud", r.spec.cloud);
    doc->set("instance_id", r.id);
    doc->set("hostname", hostname);
    doc->set("public_ipv4", r.address);
    doc->set("local_ipv4", r.network_name.empty() ? "10.120." + r.address.substr(7) : r.private_ip);
    if (!r.network_name.empty()) {
      std::lock_guard<std::mutex> lock(network_mu_);
      auto subnet = network_subnets_.find(r.network_name);
      // A network made by an earlier run of this session: somewhere in EnsureNetwork's range.
      doc->set("local_ipv4_network", subnet != network_subnets_.end() ? subnet->second : "10.64.0.0/10");
    }
    return ToJson(doc) + "\n";
  }

  std::string SeedArchive(const Record& r) {
    const InstanceSpec& s = r.spec;
    TestVmSeed seed;
    seed.instance_id = "i-" + RandomHex(8);
    seed.hostname = TestVmHostname(s.name);
    seed.public_keys = s.ssh_public_keys;
    // boot_script_fails goes to the startup script when there is one (StartupScriptFiles).
    const bool user_data_fails = s.faults.script_fails && s.startup_script.empty();
    seed.user_data = user_data_fails ? FailingUserData(s.user_data) : s.user_data;
    if (s.faults.gpu_after_seconds < 0) {  // else written later (Task::kGpu)
      seed.gpu_type = s.gpu_type;
      seed.gpu_count = s.gpu_count;
    }
    if (!s.faults.no_metadata) seed.metadata_json = MetadataDocument(r, seed.hostname);
    if (!s.faults.k3s_faults.empty()) {
      seed.files["etc/gpuprov-testvm/k3s-faults"] = s.faults.k3s_faults + "\n";
    }
    if (!s.faults.gpu_state.empty()) {
      seed.files["etc/gpuprov-testvm/gpu-state"] = s.faults.gpu_state + "\n";
    }
    if (s.faults.apt_busy_seconds > 0) {
      seed.files["etc/gpuprov-testvm/apt-busy-seconds"] = std::to_string(s.faults.apt_busy_seconds) + "\n";
    }
    if (!s.startup_script.empty()) seed.files.merge(StartupScriptFiles(s));
    if (!s.container) seed.files.merge(BootIdFiles());
    return docker::NoCloudSeedTar(seed);
  }

  void Run(Engine& engine, const Record& r, Task task) {
    switch (task) {
      case Task::kCreate: {
        {
          // Addresses of other emulator sessions, so two emulators never collide.
          std::set<std::string> foreign;
          for (const auto& c : engine.ListContainers({std::string(kLabelEmulator) + "=1"})) {
            auto a = c.labels.find(kLabelAddress);
            auto s = c.labels.find(kLabelSession);
            if (a != c.labels.end() && s != c.labels.end() && s->second != options_.session) {
              foreign.insert(a->second);
            }
          }
          std::lock_guard<std::mutex> lock(mu_);
          foreign_ = foreign;
          auto it = records_.find(r.id);
          if (it == records_.end()) return;
          if (foreign_.count(it->second.address)) it->second.address = PickAddressLocked();
        }
        Record cur;
        if (!Update(r.id, [&](Record& x) { cur = x; })) {
          Finish(r.id);
          return;
        }
        if (!engine.ImageExists(options_.image)) {
          Fail(r.id, "image " + options_.image +
                         " is not built; run: bash tests/fixtures/testvm/build-image.sh");
          return;
        }
        TestVmSpec vm;
        vm.name = cur.container_name;
        vm.image = options_.image;
        vm.hostname = TestVmHostname(cur.spec.name);
        vm.labels = {{kLabelEmulator, "1"},
                     {kLabelCloud, cur.spec.cloud},
                     {kLabelSession, options_.session},
                     {kLabelAddress, cur.address},
                     {kLabelName, cur.spec.name}};
        ContainerSpec spec =
            cur.spec.container ? ContainerPod(vm, cur.spec) : docker::TestVmContainer(vm);
        if (!cur.spec.container) spec.cap_add.push_back("SYS_BOOT");  // reboot vs power-off
        if (!cur.network_name.empty()) {
          EnsureNetwork(engine, cur.network_name, cur.spec.private_network);
        }
        if (!cur.public_network_name.empty()) {
          EnsureNetwork(engine, cur.public_network_name, "public");
        }
        std::string cid = engine.CreateContainer(spec);
        if (!cur.network_name.empty()) engine.ConnectNetwork(cur.network_name, cid);
        if (!cur.public_network_name.empty()) engine.ConnectNetwork(cur.public_network_name, cid);
        bool keep = Update(r.id, [&](Record& x) {
          x.container_id = cid;
          x.phase = Phase::kWaitStart;
        });
        if (!keep) {  // deleted while we created it
          engine.RemoveContainer(cid);
          Finish(r.id);
          return;
        }
        cur.container_id = cid;
        engine.PutArchive(cid, "/", SeedArchive(cur));
        Schedule(Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(
                                    cur.spec.faults.slow_boot_seconds * 1000)),
                 r.id, Task::kStart);
        return;
      }
      case Task::kStart: {
        if (r.phase != Phase::kWaitStart) return;
        if (r.booted) {  // started again after a stop: no boot fault applies twice
          // The metadata service answers with the address of this start.
          if (!r.spec.faults.no_metadata) {
            docker::TarWriter tar;
            tar.AddFile(docker::kTestVmMetadataFile, MetadataDocument(r, TestVmHostname(r.spec.name)), 0644);
            engine.PutArchive(r.container_id, "/", tar.Finish());
          }
          engine.StartContainer(r.container_id);
          if (!Boot(engine, r.id, /*ssh_delay=*/0)) return;
          Update(r.id, [&](Record& x) { x.running_since = Clock::now(); });
          Schedule(Clock::now() + kCheckEvery, r.id, Task::kCheck);
          return;
        }
        engine.StartContainer(r.container_id);
        if (r.spec.faults.vanish) {
          Schedule(Clock::now() + std::chrono::seconds(1), r.id, Task::kVanish);
          return;
        }
        if (r.spec.faults.error) {
          Schedule(Clock::now() + std::chrono::seconds(1), r.id, Task::kFail);
          return;
        }
        const double ssh_delay = r.spec.faults.ssh_delay_seconds >= 0
                                     ? r.spec.faults.ssh_delay_seconds
                                     : options_.ssh_delay_seconds;
        if (!Boot(engine, r.id, ssh_delay)) return;
        Update(r.id, [&](Record& x) {
          x.running_since = Clock::now();
          x.booted = true;
        });
        if (ssh_delay > 0) {
          Schedule(Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(ssh_delay * 1000)),
                   r.id, Task::kOpenSsh);
        }
        if (r.spec.gpu_count > 0) {
          if (r.spec.faults.gpu_after_seconds >= 0) {
            Schedule(Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(
                                        r.spec.faults.gpu_after_seconds * 1000)),
                     r.id, Task::kGpu);
          } else {
            Update(r.id, [&](Record& x) { x.gpu_written = true; });
          }
        }
        Schedule(Clock::now() + kCheckEvery, r.id, Task::kCheck);
        return;
      }
      case Task::kVanish: {
        CloseGate(r.address);
        engine.RemoveContainer(r.container_id);
        Update(r.id, [&](Record& x) {
          x.phase = Phase::kGone;
          x.message = "the instance vanished while booting (fault vanish_during_boot)";
        });
        return;
      }
      case Task::kPreempt: {
        // The machine stops at once, as a spot VM does when its cloud takes it back. Marked
        // before the kill, so a check that sees the container die reads it as preempted.
        CloseGate(r.address);
        Update(r.id, [&](Record& x) {
          x.phase = Phase::kGone;
          x.preempted = true;
          x.message = "the cloud took the instance back (POST /preempt)";
        });
        try {
          engine.KillContainer(r.container_id);
        } catch (const EngineError&) {
        }
        return;
      }
      case Task::kFail: {
        CloseGate(r.address);
        try {
          engine.KillContainer(r.container_id);
        } catch (const EngineError&) {
        }
        Update(r.id, [&](Record& x) {
          x.phase = Phase::kError;
          x.message = "the instance failed while booting (fault error_during_boot)";
        });
        return;
      }
      case Task::kGpu: {
        if (r.phase != Phase::kRunning) return;
        // A GPU "the boot run did not see": with a boot script, not before the boot has looked
        // for it, however slow the boot is: gpuprov's installer has passed its GPU check (its
        // status marker reached k3s-start or done), or cloud-init has finished the boot script,
        // or the startup script has ended (its exit-status marker).
        // Bounded, so an instance whose boot never gets there still gets its GPU.
        const bool has_boot_script = !r.spec.user_data.empty() || !r.spec.startup_script.empty();
        const std::string boot_ended =
            r.spec.startup_script.empty()
                ? "cloud-init status 2>/dev/null | "
                  "grep -qE 'status: (done|error|disabled|degraded)'"
                : "test -e " + StartupScriptDir(r.spec.cloud) + "/exit-status";
        if (has_boot_script && Clock::now() - r.running_since < kGpuWaitForInstall &&
            engine
                    .Exec(r.container_id,
                          {"sh", "-c",
                           "grep -qE '\"phase\": *\"(k3s-start|done)\"' "
                           "/var/lib/gpuprov/install-status.json 2>/dev/null || " +
                               boot_ended})
                    .exit_code != 0) {
          Schedule(Clock::now() + std::chrono::milliseconds(500), r.id, Task::kGpu);
          return;
        }
        engine.PutArchive(r.container_id, "/",
                          docker::GpuFileTar(r.spec.gpu_type, r.spec.gpu_count));
        Update(r.id, [&](Record& x) { x.gpu_written = true; });
        return;
      }
      case Task::kCheck: {
        if (r.phase != Phase::kRunning) return;
        auto info = engine.InspectContainer(r.container_id);
        // r is the record as this task began: each change below applies only while the record
        // is still running (a preemption, stop or delete since then wins).
        if (!info) {
          CloseGate(r.address);
          Update(r.id, [&](Record& x) {
            if (x.phase != Phase::kRunning) return;
            x.phase = Phase::kGone;
            x.message = "the container was removed";
          });
        } else if (!info->running && info->status == "exited" &&
                   info->exit_code == kExitRebooted) {
          // Rebooted from inside: the same container boots again; the cloud still says running.
          engine.StartContainer(r.container_id);
          if (Boot(engine, r.id, /*ssh_delay=*/0)) {
            Schedule(Clock::now() + kCheckEvery, r.id, Task::kCheck);
          }
        } else if (!info->running && info->status == "exited" &&
                   (info->exit_code == kExitPoweredOff || info->exit_code == 0)) {
          // Powered off from inside (`systemctl poweroff`), or stopped through the API.
          CloseGate(r.address);
          Update(r.id, [&](Record& x) {
            if (x.phase != Phase::kRunning) return;
            x.phase = Phase::kStopped;
            x.message = x.stop_requested ? "stopped through the cloud's API"
                                         : "the VM powered itself off (its container exited "
                                           "with code " + std::to_string(info->exit_code) + ")";
          });
        } else if (!info->running) {
          Update(r.id, [&](Record& x) {
            if (x.phase != Phase::kRunning) return;
            x.phase = Phase::kError;
            x.message = "the container is " + info->status + " (exit code " +
                        std::to_string(info->exit_code) + ")";
          });
        } else {
          if (HasWideRange(r.reachable)) {
            const std::set<int> listening = ListeningPorts(r.pid);
            bool changed = false;
            Update(r.id, [&](Record& x) {
              changed = x.listening != listening;
              x.listening = listening;
            });
            if (changed) ApplyGate(r.id);
          }
          Schedule(Clock::now() + kCheckEvery, r.id, Task::kCheck);
        }
        return;
      }
      case Task::kPowerOff: {
        if (r.phase != Phase::kRunning) return;
        // As a cloud's stop does: the power button (systemd halts on SIGRTMIN+3, Docker's stop
        // signal for the test VM), then the power after a while.
        try {
          engine.KillContainer(r.container_id, "SIGRTMIN+3");
        } catch (const EngineError&) {
        }
        for (int i = 0; i < 60; ++i) {
          auto info = engine.InspectContainer(r.container_id);
          if (!info || !info->running) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
        try {
          engine.KillContainer(r.container_id);
        } catch (const EngineError&) {  // not running: the usual case
        }
        CloseGate(r.address);
        Update(r.id, [&](Record& x) {
          x.phase = Phase::kStopped;
          x.message = "stopped through the cloud's API";
        });
        return;
      }
      case Task::kOpenSsh: {
        if (r.phase != Phase::kRunning) return;
        Update(r.id, [&](Record& x) { x.ssh_open = true; });
        ApplyGate(r.id);
        return;
      }
      case Task::kRemove: {
        CloseGate(r.address);
        if (!r.container_id.empty()) engine.RemoveContainer(r.container_id);
        // A create still running for this record removes its container itself.
        if (!r.container_id.empty() || r.phase == Phase::kDeleted) Finish(r.id);
        return;
      }
    }
  }

  // After the container of record id (re)started: reads its bridge address and process, marks
  // it running and sets its gate (SSH held back for ssh_delay seconds). False (and the record
  // in error) when the container has no network address.
  bool Boot(Engine& engine, const std::string& id, double ssh_delay) {
    std::string cid, network_name, public_network_name;
    PortSet reachable;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = records_.find(id);
      if (it == records_.end()) return false;
      cid = it->second.container_id;
      reachable = it->second.reachable;
      network_name = it->second.network_name;
      public_network_name = it->second.public_network_name;
    }
    auto info = engine.InspectContainer(cid);
    if (!info || info->ip_address.empty()) {
      Fail(id, "docker: the container has no network address");
      return false;
    }
    // The container's address on each network it was attached to ("" for none).
    std::string private_ip, public_wire_ip;
    for (const auto& [name, address] : {std::pair{network_name, &private_ip},
                                        std::pair{public_network_name, &public_wire_ip}}) {
      if (name.empty()) continue;
      auto a = info->network_addresses.find(name);
      if (a == info->network_addresses.end()) {
        Fail(id, "docker: the container has no address on " + name);
        return false;
      }
      *address = a->second;
    }
    const std::set<int> listening =
        HasWideRange(reachable) ? ListeningPorts(info->pid) : std::set<int>{};
    if (!Update(id, [&](Record& x) {
          x.phase = Phase::kRunning;
          x.bridge_ip = info->ip_address;
          x.pid = info->pid;
          x.listening = listening;
          x.ssh_open = ssh_delay <= 0;
          x.stop_requested = false;
          x.private_ip = private_ip;
          x.public_wire_ip = public_wire_ip;
        })) {
      return false;
    }
    ApplyGate(id);
    ApplyIngress(id);
    return true;
  }

  // Forgets a deleted record once its container is gone.
  void Finish(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(id);
    if (it != records_.end() && it->second.phase == Phase::kDeleted) records_.erase(it);
  }

  DockerBackendOptions options_;
  std::mutex gate_mu_;  // taken before mu_, never while holding it
  std::mutex network_mu_;
  std::set<std::string> networks_;  // Docker networks this session made
  std::map<std::string, std::string> network_subnets_;  // ... their subnets, when made by this run
  std::mutex public_mu_;            // taken before mu_, never while holding it
  // The members of each public network as last set: (pid, endpoint), in records_ order.
  std::map<std::string, std::vector<std::pair<int, PublicEndpoint>>> public_applied_;
  PortGate gate_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Job, std::vector<Job>, std::greater<Job>> jobs_;
  std::map<std::string, Record> records_;
  std::set<std::string> foreign_;
  std::vector<std::thread> workers_;
  int next_slot_ = 0;
  uint64_t counter_ = 0;
  bool stopping_ = false;
  bool removed_all_ = false;
};

}  // namespace

std::unique_ptr<InstanceBackend> MakeDockerBackend(const DockerBackendOptions& options) {
  // Fail at start, not on the first create: the daemon answers and the image is built.
  Engine engine = options.socket_path.empty() ? Engine::FromEnvironment(kEngineTimeout)
                                              : Engine(options.socket_path, kEngineTimeout);
  try {
    engine.Ping();
  } catch (const std::exception& e) {
    throw BackendError(std::string("the docker backend needs a Docker daemon: ") + e.what());
  }
  if (!engine.ImageExists(options.image)) {
    throw BackendError("the docker backend's image " + options.image +
                       " is not built; run: bash tests/fixtures/testvm/build-image.sh "
                       "(or pass --image TAG)");
  }
  return std::make_unique<DockerBackend>(options);
}

}  // namespace gpuprov::emulator
