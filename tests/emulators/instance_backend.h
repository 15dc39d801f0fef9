// SPDX-License-Identifier: Apache-2.0
//
// What stands behind an emulated cloud's instances. The cloud APIs keep their
// own records (names, tags, ids in the cloud's format) and ask a backend to
// make, report and remove the machine itself:
//   - MemoryBackend: nothing runs; states change with time (fast unit, fault and
//     scale tests).
//   - DockerBackend: each instance is a real test VM container (systemd, sshd,
//     cloud-init reading a NoCloud seed) on its own loopback address.
// Backends are thread-safe. Create never blocks on the machine booting.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "faults.h"

namespace gpuprov::emulator {

/// What a cloud asks for.
struct InstanceSpec {
  std::string cloud;     // "digitalocean"; labels and logs
  std::string name;      // hostname
  std::string image;     // cloud image slug (informational; docker uses its test image)
  std::string gpu_type;  // "" for none; test VM GPU file type, e.g. "H100-80GB"
  int gpu_count = 0;
  std::string user_data;                     // boot script for cloud-init ("" = none)
  std::vector<std::string> ssh_public_keys;  // authorized for root and the default user
  std::string ssh_user = "root";
  std::vector<int> ports = {22};  // ports published on the instance's address
  bool remap_ssh = false;         // SSH published on a random high port instead of 22
  BootFaults faults;
};

enum class InstanceState { kProvisioning, kRunning, kGone, kError };

const char* ToString(InstanceState s);

/// What a cloud reports about an instance.
struct InstanceStatus {
  InstanceState state = InstanceState::kProvisioning;
  std::string public_ip;   // 127.x.y.z once known ("" before)
  std::string private_ip;  // a 10.x address for VPC fields
  int ssh_port = 22;
  std::string message;        // why it is in error / gone
  bool gpu_present = false;   // the GPU the spec asked for is visible now
  bool boot_script_fails = false;  // boot_script_fails was applied
  /// How long it has been running (0 unless kRunning).
  std::chrono::milliseconds running_for{0};
  /// The tcp ports last given to SetAllowedPorts (nullopt: never; the spec's ports apply).
  std::optional<std::set<int>> allowed_ports;
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
  /// Machines that still exist in the backend (deleted-but-not-yet-removed
  /// containers included), so tests can assert nothing leaked. cloud "" = all.
  virtual size_t LiveCount(const std::string& cloud = "") = 0;
  /// Removes every instance this backend made and waits for it.
  virtual void RemoveAll() = 0;
  /// The cloud's firewall now lets exactly these tcp ports of instance id through
  /// (its rules changed after create). Default: ignored (the spec's ports stay).
  virtual void SetAllowedPorts(const std::string& /*id*/, const std::set<int>& /*ports*/) {}
};

/// How many records of a backend (id -> record with an InstanceSpec spec) are of
/// cloud; cloud "" = all. What LiveCount counts.
template <class Records>
size_t CountOfCloud(const Records& records, const std::string& cloud) {
  size_t n = 0;
  for (const auto& [id, r] : records) n += cloud.empty() || r.spec.cloud == cloud;
  return n;
}

/// time to running for the memory backend.
std::unique_ptr<InstanceBackend> MakeMemoryBackend(std::chrono::milliseconds boot_time);

/// Options of the docker backend.
struct DockerBackendOptions {
  std::string image;              // test VM image tag
  std::string socket_path;        // "" = $DOCKER_HOST or /var/run/docker.sock
  std::string session;            // label value telling this emulator's containers apart
};
std::unique_ptr<InstanceBackend> MakeDockerBackend(const DockerBackendOptions& options);

}  // namespace gpuprov::emulator
