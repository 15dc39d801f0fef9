// SPDX-License-Identifier: Apache-2.0
#include "faults.h"

#include <algorithm>
#include <sstream>

namespace gpuprov::emulator {

JsonObject Fault::ToJson() const {
  JsonObject o = NewObject();
  o->set("fault", name);
  o->set("times", times);
  if (seconds != 0) o->set("seconds", seconds);
  if (status != 0) o->set("status", status);
  if (name == "throttle") o->set("retry_after", retry_after);
  if (!method.empty()) o->set("method", method);
  if (!path.empty()) o->set("path", path);
  if (!body.empty()) o->set("body", body);
  if (nth != 1) o->set("nth", nth);
  if (!value.empty()) o->set("value", value);
  return o;
}

const std::vector<std::string>& FaultBook::Names() {
  static const std::vector<std::string> names = {
      "capacity",          "throttle",          "server_error",      "slow_boot",
      "vanish_during_boot", "error_during_boot", "boot_script_fails", "gpu_after_boot",
      "quota",             "payment_required",  "no_metadata",       "k3s_faults",
      "port_blocked",      "auth_failure",      "ip_after_boot",     "stall_after",
      "ssh_delay",         "gpu_state",         "apt_busy",
      // Lambda only (tests/emulators/README.md, Lambda Cloud).
      "concurrent",        "invalid_address"};
  return names;
}

std::optional<Fault> FaultBook::Parse(const JsonObject& body, std::string* error) {
  Fault f;
  std::optional<std::string> name = GetString(body, "fault");
  if (!name) {
    *error = "\"fault\" (string) is required; one of capacity, throttle, server_error, "
             "slow_boot, vanish_during_boot, error_during_boot, boot_script_fails, "
             "gpu_after_boot, quota, payment_required, no_metadata, k3s_faults, port_blocked, "
             "auth_failure, ip_after_boot, stall_after, ssh_delay, gpu_state, apt_busy, concurrent, "
             "invalid_address";
    return std::nullopt;
  }
  const auto& names = Names();
  if (std::find(names.begin(), names.end(), *name) == names.end()) {
    *error = "unknown fault \"" + *name + "\"";
    return std::nullopt;
  }
  f.name = *name;
  if (auto t = GetInt(body, "times")) f.times = static_cast<int>(*t);
  if (f.times == 0 || f.times < -1) {
    *error = "\"times\" must be a positive count, or -1 for until reset";
    return std::nullopt;
  }
  if (auto s = GetDouble(body, "seconds")) f.seconds = *s;
  if (f.seconds < 0) {
    *error = "\"seconds\" must not be negative";
    return std::nullopt;
  }
  if ((f.name == "slow_boot" || f.name == "gpu_after_boot" || f.name == "ip_after_boot" ||
       f.name == "ssh_delay" || f.name == "apt_busy") &&
      !GetDouble(body, "seconds")) {
    *error = "fault " + f.name + " needs \"seconds\"";
    return std::nullopt;
  }
  if (auto s = GetInt(body, "status")) f.status = static_cast<int>(*s);
  if (f.name == "server_error") {
    if (f.status == 0) f.status = 500;
    if (f.status < 500 || f.status > 599) {
      *error = "server_error \"status\" must be 5xx";
      return std::nullopt;
    }
  }
  if (auto r = GetInt(body, "retry_after")) f.retry_after = static_cast<int>(*r);
  if (auto m = GetString(body, "method")) f.method = *m;
  if (auto p = GetString(body, "path")) f.path = *p;
  if (auto b = GetString(body, "body")) f.body = *b;
  if (auto v = GetString(body, "value")) f.value = *v;
  if (auto n = GetInt(body, "nth")) f.nth = static_cast<int>(*n);
  if (f.nth < 1) {
    *error = "\"nth\" must be 1 or more (the nth matching request fires)";
    return std::nullopt;
  }
  if (f.name == "port_blocked" && (f.value.empty() ||
                                   f.value.find_first_not_of("0123456789,") != std::string::npos)) {
    *error = "fault port_blocked needs \"value\": comma-separated port numbers, e.g. \"6443\"";
    return std::nullopt;
  }
  if (f.name == "gpu_state" && f.value.empty()) {
    *error = "fault gpu_state needs \"value\": the fake GPU's state lines, e.g. \"driver=absent\"";
    return std::nullopt;
  }
  if (f.name == "k3s_faults" && f.value.empty()) {
    *error = "fault k3s_faults needs \"value\": the fault file's lines, e.g. \"node-not-ready\"";
    return std::nullopt;
  }
  return f;
}

void FaultBook::Add(const Fault& f) {
  std::lock_guard<std::mutex> lock(mu_);
  faults_.push_back(f);
}

std::optional<Fault> FaultBook::Take(const std::string& name, const std::string& method,
                                     const std::string& path, const std::string& body) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if (it->name != name) continue;
    if (!it->method.empty() && !method.empty() && it->method != method) continue;
    if (!it->path.empty() && path.compare(0, it->path.size(), it->path) != 0) continue;
    if (!it->body.empty() && body.find(it->body) == std::string::npos) continue;
    if (it->nth > 1) {  // an earlier match than the one asked for: it passes, counted
      --it->nth;
      return std::nullopt;
    }
    Fault f = *it;
    if (it->times > 0 && --it->times == 0) faults_.erase(it);
    return f;
  }
  return std::nullopt;
}

bool FaultBook::Armed(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& f : faults_) {
    if (f.name == name) return true;
  }
  return false;
}

BootFaults FaultBook::TakeBootFaults() {
  BootFaults b;
  if (auto f = Take("slow_boot")) b.slow_boot_seconds = f->seconds;
  if (Take("vanish_during_boot")) b.vanish = true;
  if (Take("error_during_boot")) b.error = true;
  if (Take("boot_script_fails")) b.script_fails = true;
  if (auto f = Take("gpu_after_boot")) b.gpu_after_seconds = f->seconds;
  if (Take("no_metadata")) b.no_metadata = true;
  if (auto f = Take("k3s_faults")) b.k3s_faults = f->value;
  if (auto f = Take("gpu_state")) b.gpu_state = f->value;
  if (auto f = Take("apt_busy")) b.apt_busy_seconds = static_cast<int>(f->seconds);
  if (auto f = Take("ssh_delay")) b.ssh_delay_seconds = f->seconds;
  if (auto f = Take("port_blocked")) {
    std::stringstream ports(f->value);
    for (std::string p; std::getline(ports, p, ',');) {
      if (!p.empty()) b.blocked_ports.push_back(std::stoi(p));
    }
  }
  return b;
}

JsonArray FaultBook::ToJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  JsonArray a = NewArray();
  for (const auto& f : faults_) a->add(f.ToJson());
  return a;
}

void FaultBook::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  faults_.clear();
}

}  // namespace gpuprov::emulator
