// SPDX-License-Identifier: Apache-2.0
//
// What stands behind an emulated cloud's instances. The cloud APIs keep their
// own records (names, tags, ids in the cloud's format) and ask a backend to
// make, report and remove the machine itself:
//   - MemoryBackend: nothing runs; states change with time (fast unit, fault and
//     scale tests).
//   - DockerBackend: each instance is a real test VM container (systemd, sshd,
//     cloud-init reading a NoCloud seed) on its own loopback address; a
//     container instance (InstanceSpec::container) runs sshd as PID 1 instead.
// Backends are thread-safe. Create never blocks on the machine booting.
//
// Reachability follows the cloud's firewall: a cloud tells the backend which TCP
// ports of an instance its rules let this machine (127.0.0.1) reach, at create
// and whenever rules or attachments change (SetReachablePorts); the docker
// backend then forwards exactly those ports (port_gate.h).
#pragma once

#include <chrono>
#include <initializer_list>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "faults.h"

namespace gpuprov::emulator {

/// TCP ports [first, last] of an instance.
struct PortRange {
  int first = 0;
  int last = 0;
  bool operator==(const PortRange&) const = default;
};

/// A set of TCP ports as sorted, disjoint, non-adjacent ranges within 1..65535.
class PortSet {
 public:
  PortSet() = default;
  PortSet(std::initializer_list<int> ports);
  /// Every port (a cloud without a firewall, or a rule for all ports).
  static PortSet All();
  /// Adds [first, last], clamped to 1..65535; an empty range adds nothing.
  void Add(int first, int last);
  void Add(int port) { Add(port, port); }
  void Add(const PortSet& other);
  /// Removes [first, last].
  void Remove(int first, int last);
  bool Contains(int port) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<PortRange>& ranges() const { return ranges_; }
  /// "22,80,443,6443" or "1-65535" ("" when empty).
  std::string ToString() const;
  bool operator==(const PortSet&) const = default;

 private:
  std::vector<PortRange> ranges_;
};

/// One rule of a cloud's firewall as it applies to an instance's address on its private
/// network: what may reach it there, from where. protocol "tcp" or "udp"; sources are IPv4
/// addresses or CIDRs ("10.64.3.2", "0.0.0.0/0").
struct PrivateRule {
  std::string protocol;
  PortRange ports;
  std::vector<std::string> sources;
  bool operator==(const PrivateRule&) const = default;
};

/// What reaches an instance on its private network: nullopt admits everything (no cloud
/// firewall in front of it, or one that filters only the public side), else exactly the
/// rules (and answers to what the instance itself sent).
using PrivateIngress = std::optional<std::vector<PrivateRule>>;

/// What a cloud asks for.
struct InstanceSpec {
  std::string cloud;     // "digitalocean"; labels and logs
  std::string name;      // hostname
  std::string image;     // cloud image slug (informational; docker uses its test image)
  std::string gpu_type;  // "" for none; test VM GPU file type, e.g. "H100-80GB"
  int gpu_count = 0;
  std::string user_data;                     // boot script for cloud-init ("" = none)
  /// A boot script the cloud itself runs (Verda's startup script), not cloud-init: the docker
  /// backend runs it once, as root, at the first boot, output appended to
  /// /var/log/<cloud>-startup-script.log (StartupScriptLog); the memory backend keeps it in
  /// the spec. "" = none.
  std::string startup_script;
  std::vector<std::string> ssh_public_keys;  // authorized for root and the default user
  std::string ssh_user = "root";
  /// The TCP ports the cloud's rules let this machine reach when the instance starts.
  PortSet reachable = {22};
  bool remap_ssh = false;  // SSH reachable on a random high port instead of 22
  /// A container, not a VM (RunPod-like offers): the docker backend runs sshd as PID 1, with no
  /// systemd, no cloud-init and Docker's default capabilities. The memory backend ignores it.
  bool container = false;
  /// The private network the instance joins besides its public address (the cloud's VPC,
  /// subnet or cluster network), a key unique within the cloud ("" = none): instances of one
  /// key share it. The docker backend attaches the container to a Docker network of that key
  /// (a subnet of 10.0.0.0/8) and reports its address there as private_ip.
  std::string private_network;
  /// The instance's public address is reachable from the cloud's other instances with
  /// public_network, on every port (the internet between the VMs of a cloud with no private
  /// network and no firewall in front of them, as Prime Intellect's pods: the node firewall
  /// filters). The docker backend puts them on one Docker network of the cloud and routes each
  /// peer's public address over it inside each VM's network namespace; the memory backend
  /// ignores it.
  bool public_network = false;
  BootFaults faults;
};

/// kStopped: the VM powered itself off from inside (docker: its container's init ended by a
/// power-off, docker_backend.cc) or was stopped through the API (InstanceBackend::Stop); each
/// cloud's API reports it as its reference says a powered-off VM looks.
enum class InstanceState { kProvisioning, kRunning, kGone, kError, kStopped };

const char* ToString(InstanceState s);

/// Where the docker backend's test VM of cloud appends the output of its startup script
/// ("/var/log/verda-startup-script.log").
std::string StartupScriptLog(const std::string& cloud);
/// The directory of the startup script's runner, the script ("script"), and its markers:
/// "started" (written before the script runs: it never runs again) and "exit-status" (the
/// script's exit code, written when it ends) ("/var/lib/verda-startup-script").
std::string StartupScriptDir(const std::string& cloud);

/// What a cloud reports about an instance.
struct InstanceStatus {
  InstanceState state = InstanceState::kProvisioning;
  std::string public_ip;   // 127.x.y.z once known ("" before)
  std::string private_ip;  // a 10.x address for VPC fields (docker: on its private network)
  /// private_ip is the instance's address on its InstanceSpec::private_network, where its
  /// peers reach it (docker); false: a made-up address a cloud may replace with its own.
  bool private_ip_on_network = false;
  int ssh_port = 22;
  std::string message;        // why it is in error / gone
  bool gpu_present = false;   // the GPU the spec asked for is visible now
  bool boot_script_fails = false;  // boot_script_fails was applied
  bool ssh_open = true;  // docker: false while the SSH delay keeps SSH refused
  /// How long it has been running (0 unless kRunning).
  std::chrono::milliseconds running_for{0};
  /// With kGone: the cloud took the instance back (Preempt, the control API's POST /preempt);
  /// each cloud's API reports it as its reference says a preempted spot VM looks.
  bool preempted = false;
};

class BackendError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InstanceBackend {
 public:
  virtual ~InstanceBackend() = default;
  /// "memory" or "docker".
  virtual std::string Name() const = 0;
  /// Starts making the instance; returns its backend id at once. Throws
  /// BackendError when the request cannot be met at all (e.g. no address left).
  virtual std::string Create(const InstanceSpec& spec) = 0;
  /// The current state; kGone for an unknown or deleted id.
  virtual InstanceStatus State(const std::string& id) = 0;
  /// Removes the instance (asynchronously for docker); unknown ids are fine.
  virtual void Delete(const std::string& id) = 0;
  /// The cloud takes the instance back, as it does a spot VM: the machine stops at once (docker:
  /// the container is killed) and State says kGone with preempted set until Delete. Unknown
  /// ids are ignored.
  virtual void Preempt(const std::string& id) = 0;
  /// Machines that still exist in the backend (deleted-but-not-yet-removed
  /// containers included), so tests can assert nothing leaked. cloud "" = all.
  virtual size_t LiveCount(const std::string& cloud = "") = 0;
  /// Removes every instance this backend made and waits for it.
  virtual void RemoveAll() = 0;
  /// Powers a running instance off, as the cloud's stop call does: State turns kStopped once
  /// it is off (docker: its systemd halts first). False unless it is running.
  virtual bool Stop(const std::string& id) = 0;
  /// Powers a stopped instance on again (kProvisioning, then kRunning), same disk; with
  /// new_address on a new public address, as a cloud gives a VM without a static address
  /// after a stop. False unless it is stopped.
  virtual bool Start(const std::string& id, bool new_address) = 0;
  /// Sets the TCP ports of the instance this machine can reach from now on (the cloud's
  /// rules after a change); the instance's port_blocked fault still drops its ports.
  /// Unknown ids are ignored.
  virtual void SetReachablePorts(const std::string& id, const PortSet& ports) = 0;
  /// The ports reachable from this machine now: the last set minus port_blocked
  /// (for docker: forwarded when something listens there). Empty for unknown ids.
  virtual PortSet ReachablePorts(const std::string& id) = 0;
  /// Sets what reaches the instance on its private network from now on (the cloud's rules
  /// after a change); docker enforces it with nft in the container's network namespace, a
  /// table of its own the VM's processes never see or touch. Unknown ids are ignored.
  virtual void SetPrivateIngress(const std::string& id, const PrivateIngress& ingress) = 0;
  /// The last one set (nullopt for unknown ids and before any).
  virtual PrivateIngress GetPrivateIngress(const std::string& id) = 0;
};

/// How many records of a backend (id -> record with an InstanceSpec spec) are of
/// cloud; cloud "" = all. What LiveCount counts.
template <class Records>
size_t CountOfCloud(const Records& records, const std::string& cloud) {
  size_t n = 0;
  for (const auto& [id, r] : records) n += cloud.empty() || r.spec.cloud == cloud;
  return n;
}

/// Whether an IPv4 CIDR ("0.0.0.0/0", "127.0.0.0/8", "127.0.0.1") holds 127.0.0.1,
/// the address this machine's connections to an instance come from.
bool CoversThisMachine(const std::string& cidr);

/// ports without the ports of a port_blocked fault.
PortSet WithoutBlocked(PortSet ports, const std::vector<int>& blocked);

/// time to running for the memory backend.
std::unique_ptr<InstanceBackend> MakeMemoryBackend(std::chrono::milliseconds boot_time);

/// Options of the docker backend.
struct DockerBackendOptions {
  std::string image;              // test VM image tag
  std::string socket_path;        // "" = $DOCKER_HOST or /var/run/docker.sock
  std::string session;            // label value telling this emulator's containers apart
  /// Seconds SSH stays refused after an instance is running (its boot runs meanwhile), unless
  /// its ssh_delay fault says otherwise; 0 = none.
  double ssh_delay_seconds = 0;
};
std::unique_ptr<InstanceBackend> MakeDockerBackend(const DockerBackendOptions& options);

}  // namespace gpuprov::emulator
