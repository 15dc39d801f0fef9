// SPDX-License-Identifier: Apache-2.0
//
// Instances that exist only as records whose state is a function of time:
//   provisioning for boot_time + slow_boot, then running (or error);
//   vanish_during_boot: gone halfway through provisioning;
//   gpu_after_boot: gpu_present turns true that long after running.
// Addresses are fake but inside 127.91.0.0/16 (never bound by anything).
// Reachable ports and private ingress rules are only recorded, for tests to assert.
#include <map>
#include <mutex>

#include "instance_backend.h"

namespace gpuprov::emulator {

const char* ToString(InstanceState s) {
  switch (s) {
    case InstanceState::kProvisioning:
      return "provisioning";
    case InstanceState::kRunning:
      return "running";
    case InstanceState::kGone:
      return "gone";
    case InstanceState::kError:
      return "error";
    case InstanceState::kStopped:
      return "stopped";
  }
  return "?";
}

namespace {

using Clock = std::chrono::steady_clock;

class MemoryBackend : public InstanceBackend {
 public:
  explicit MemoryBackend(std::chrono::milliseconds boot_time) : boot_time_(boot_time) {}

  std::string Name() const override { return "memory"; }

  std::string Create(const InstanceSpec& spec) override {
    std::lock_guard<std::mutex> lock(mu_);
    Record r;
    r.spec = spec;
    r.created = Clock::now();
    r.reachable = spec.reachable;
    r.slot = next_slot_++;
    r.ssh_port = spec.remap_ssh ? 20000 + static_cast<int>((r.slot * 7919) % 40000) : 22;
    std::string id = "mem-" + std::to_string(r.slot);
    records_[id] = r;
    return id;
  }

  InstanceStatus State(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    InstanceStatus s;
    auto it = records_.find(id);
    if (it == records_.end()) {
      s.state = InstanceState::kGone;
      s.message = "no such instance";
      return s;
    }
    const Record& r = it->second;
    const auto now = Clock::now();
    const auto boot = boot_time_ + std::chrono::milliseconds(
                                       static_cast<int64_t>(r.spec.faults.slow_boot_seconds * 1000));
    const auto elapsed = now - r.created;
    s.public_ip = "127.91." + std::to_string((r.slot / 254) % 256) + "." +
                  std::to_string(r.slot % 254 + 1);
    s.private_ip = "10.110." + std::to_string((r.slot / 254) % 256) + "." +
                   std::to_string(r.slot % 254 + 1);
    s.ssh_port = r.ssh_port;
    s.boot_script_fails = r.spec.faults.script_fails;
    if (r.preempted) {
      s.state = InstanceState::kGone;
      s.preempted = true;
      s.message = "the cloud took the instance back (POST /preempt)";
      return s;
    }
    if (r.spec.faults.vanish && elapsed >= boot / 2) {
      s.state = InstanceState::kGone;
      s.message = "the instance vanished while booting (fault vanish_during_boot)";
      return s;
    }
    if (r.stopped) {
      s.state = InstanceState::kStopped;
      return s;
    }
    if (elapsed < boot) {
      s.state = InstanceState::kProvisioning;
      return s;
    }
    if (r.spec.faults.error) {
      s.state = InstanceState::kError;
      s.message = "the instance failed while booting (fault error_during_boot)";
      return s;
    }
    s.state = InstanceState::kRunning;
    s.running_for = std::chrono::duration_cast<std::chrono::milliseconds>(elapsed - boot);
    if (r.spec.gpu_count > 0) {
      double after = r.spec.faults.gpu_after_seconds;
      s.gpu_present = after < 0 || s.running_for.count() >= after * 1000;
    }
    return s;
  }

  void Delete(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    records_.erase(id);
  }

  void Preempt(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = records_.find(id); it != records_.end()) it->second.preempted = true;
  }

  size_t LiveCount(const std::string& cloud) override {
    std::lock_guard<std::mutex> lock(mu_);
    return CountOfCloud(records_, cloud);
  }

  void RemoveAll() override {
    std::lock_guard<std::mutex> lock(mu_);
    records_.clear();
  }

  bool Stop(const std::string& id) override {
    if (State(id).state != InstanceState::kRunning) return false;
    std::lock_guard<std::mutex> lock(mu_);
    records_[id].stopped = true;
    return true;
  }

  // Started again: provisioning for the boot time, then running (no boot fault applies twice).
  bool Start(const std::string& id, bool new_address) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(id);
    if (it == records_.end() || !it->second.stopped) return false;
    Record& r = it->second;
    r.stopped = false;
    r.created = Clock::now();
    r.spec.faults.vanish = r.spec.faults.error = false;
    r.spec.faults.slow_boot_seconds = 0;
    r.spec.faults.gpu_after_seconds = -1;
    if (new_address) r.slot = next_slot_++;
    return true;
  }

  void SetReachablePorts(const std::string& id, const PortSet& ports) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = records_.find(id); it != records_.end()) it->second.reachable = ports;
  }

  PortSet ReachablePorts(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(id);
    if (it == records_.end()) return {};
    return WithoutBlocked(it->second.reachable, it->second.spec.faults.blocked_ports);
  }

  void SetPrivateIngress(const std::string& id, const PrivateIngress& ingress) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = records_.find(id); it != records_.end()) it->second.ingress = ingress;
  }

  PrivateIngress GetPrivateIngress(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(id);
    return it == records_.end() ? PrivateIngress() : it->second.ingress;
  }

 private:
  struct Record {
    InstanceSpec spec;
    Clock::time_point created;
    uint64_t slot = 0;
    int ssh_port = 22;
    PortSet reachable;
    bool stopped = false;  // Stop was called and no Start since
    bool preempted = false;
    PrivateIngress ingress;
  };
  std::chrono::milliseconds boot_time_;
  std::mutex mu_;
  std::map<std::string, Record> records_;
  uint64_t next_slot_ = 0;
};

}  // namespace

std::unique_ptr<InstanceBackend> MakeMemoryBackend(std::chrono::milliseconds boot_time) {
  return std::make_unique<MemoryBackend>(boot_time);
}

}  // namespace gpuprov::emulator
