// SPDX-License-Identifier: Apache-2.0
//
// Fault knobs of one emulated cloud, armed by tests through the control API
// (POST /faults) and consumed by the cloud's API as requests arrive.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "emulator_http.h"

namespace gpuprov::emulator {

/// One armed fault. Request faults (throttle, server_error, capacity, quota,
/// payment_required, auth_failure) fire on matching requests; boot faults (slow_boot,
/// vanish_during_boot, error_during_boot, boot_script_fails, gpu_after_boot,
/// ip_after_boot, ssh_delay, apt_busy) are taken by the next instance creates. stall_after (a test's crash point)
/// fires after a matching request was answered with a 2xx: CloudApi::StallIfMatched.
struct Fault {
  std::string name;
  int times = 1;         // how many more times it fires; -1: until reset
  double seconds = 0;    // slow_boot / gpu_after_boot / ssh_delay / vanish/error delay
  int status = 0;        // server_error: the 5xx to send (default 500)
  int retry_after = 1;   // throttle: Retry-After seconds
  std::string method;    // request faults: only this method ("" = any)
  std::string path;      // request faults: only paths starting with this ("" = any)
  std::string body;      // stall_after: only requests whose body contains this ("" = any)
  int nth = 1;           // request faults: the first nth-1 matching requests pass untouched
  std::string value;     // k3s_faults, gpu_state: the lines of the file the VM starts with

  JsonObject ToJson() const;
};

/// Everything a create takes from the fault book, for the instance backend.
struct BootFaults {
  double slow_boot_seconds = 0;  // extra time in provisioning
  bool vanish = false;           // the instance disappears while booting
  bool error = false;            // the instance ends in an error state while booting
  bool script_fails = false;     // the boot script (user data) exits non-zero
  double gpu_after_seconds = -1; // >= 0: the GPU appears this long after running (absent before)
  bool no_metadata = false;      // the VM has no metadata service (169.254.169.254 unreachable)
  std::string k3s_faults;        // the k3s simulator's fault file in the VM ("" = none)
  std::string gpu_state;         // the test VM's /etc/gpuprov-testvm/gpu-state ("" = none)
  int apt_busy_seconds = 0;      // > 0: the apt variant's boot-time apt run holds apt's locks this long
  std::vector<int> blocked_ports; // ports the cloud's firewall drops although rules open them
  double ssh_delay_seconds = -1;  // >= 0: SSH refused this long after running (-1: the default)
};

class FaultBook {
 public:
  /// The fault names this emulator knows (every cloud accepts all of them;
  /// a cloud ignores the ones that have no meaning for it, e.g.
  /// payment_required on DigitalOcean).
  static const std::vector<std::string>& Names();

  /// Parses a POST /faults body (without "cloud"); error text on failure.
  static std::optional<Fault> Parse(const JsonObject& body, std::string* error);

  void Add(const Fault& f);
  /// Consumes one firing of the first armed fault called name that matches
  /// the request (method/path); nullopt when none.
  std::optional<Fault> Take(const std::string& name, const std::string& method = "",
                            const std::string& path = "", const std::string& body = "");
  /// True when a fault called name is armed (without consuming it).
  bool Armed(const std::string& name) const;
  /// Takes every boot fault for one new instance.
  BootFaults TakeBootFaults();
  JsonArray ToJson() const;
  void Clear();

 private:
  mutable std::mutex mu_;
  std::vector<Fault> faults_;
};

}  // namespace gpuprov::emulator
