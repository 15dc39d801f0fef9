// SPDX-License-Identifier: Apache-2.0
#include "cloud_api.h"

#include <Poco/MD5Engine.h>

#include <exception>
#include <thread>

namespace gpuprov::emulator {

std::string Md5Fingerprint(const std::string& blob) {
  Poco::MD5Engine md5;
  md5.update(blob);
  const auto& d = md5.digest();
  static const char* hex = "0123456789abcdef";
  std::string fp;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) fp += ':';
    fp += hex[d[i] >> 4];
    fp += hex[d[i] & 15];
  }
  return fp;
}

HttpResponse CloudApi::Serve(const HttpRequest& req) {
  HttpResponse resp;
  try {
    if (auto denied = Authenticate(req)) {
      resp = *denied;
    } else if (auto f = faults_.Take("throttle", req.method, req.path)) {
      resp = Throttled(req, *f);
    } else if (auto f5 = faults_.Take("server_error", req.method, req.path)) {
      resp = ServerError(req, *f5);
    } else {
      resp = Route(req);
    }
    Decorate(req, resp);
  } catch (const std::exception& e) {
    resp = InternalError(e.what());
  } catch (...) {
    resp = InternalError("unknown exception");
  }
  return resp;
}

bool CloudApi::Preempt(const std::string& name) {
  JsonArray rows = Instances();
  for (size_t i = 0; i < rows->size(); ++i) {
    JsonObject row = rows->getObject(static_cast<unsigned>(i));
    if (GetString(row, "name").value_or("") != name) continue;
    const std::string state = GetString(row, "state").value_or("");
    if (state != "running" && state != "provisioning") continue;
    backend_->Preempt(GetString(row, "backend_id").value_or(""));
    return true;
  }
  return false;
}

std::string CloudApi::Configure(const JsonObject& settings) {
  if (auto e = GetBool(settings, "enforce_rate_limits")) options_.enforce_rate_limits = *e;
  if (settings->has("api_latency_ms")) {
    auto ms = GetDouble(settings, "api_latency_ms");
    if (!ms || *ms < 0) return "\"api_latency_ms\" must be a number of milliseconds >= 0";
    latency_us_ = static_cast<int64_t>(*ms * 1000);
  }
  return "";
}

void CloudApi::DelayRequest() {
  const int64_t us = latency_us_.load();
  if (us <= 0) return;
  ++delayed_;
  std::this_thread::sleep_for(std::chrono::microseconds(us));
}

bool CloudApi::TokenAccepted(const std::string& token) const {
  if (token.empty()) return false;
  for (const auto& t : options_.tokens) {
    if (t == token) return true;
  }
  return false;
}

bool CloudApi::WaitWhileStalled() {
  std::unique_lock<std::mutex> lock(stall_mu_);
  if (!stalled_) return true;
  const uint64_t generation = stall_generation_;
  ++held_;
  stall_cv_.wait_for(lock, std::chrono::minutes(10),
                     [&] { return stall_generation_ != generation; });
  --held_;
  return false;
}

void CloudApi::StallIfMatched(const std::string& method, const std::string& path,
                              const std::string& body, int status) {
  if (status < 200 || status > 299) return;
  if (!faults_.Take("stall_after", method, path, body)) return;
  std::lock_guard<std::mutex> lock(stall_mu_);
  stalled_ = true;
  stalled_after_ = method + " " + path;
}

JsonObject CloudApi::StallState() {
  std::lock_guard<std::mutex> lock(stall_mu_);
  JsonObject o = NewObject();
  o->set("stalled", stalled_);
  o->set("request", stalled_after_);
  o->set("held", held_);
  return o;
}

void CloudApi::ReleaseStall() {
  {
    std::lock_guard<std::mutex> lock(stall_mu_);
    stalled_ = false;
    stalled_after_.clear();
    ++stall_generation_;
  }
  stall_cv_.notify_all();
}

JsonObject CloudApi::InstanceRow(const std::string& id, const std::string& name,
                                 const std::string& backend_id) {
  InstanceStatus s = backend_->State(backend_id);
  JsonObject o = NewObject();
  o->set("id", id);
  o->set("name", name);
  o->set("backend_id", backend_id);
  o->set("state", std::string(ToString(s.state)));
  o->set("public_ip", s.public_ip);
  o->set("ssh_port", s.ssh_port);
  o->set("gpu_present", s.gpu_present);
  o->set("boot_script_fails", s.boot_script_fails);
  o->set("ssh_open", s.ssh_open);
  o->set("message", s.message);
  o->set("reachable_ports", backend_->ReachablePorts(backend_id).ToString());
  o->set("private_ip", s.private_ip);
  // The cloud's firewall on the private address: null when nothing filters it, else
  // [{"protocol", "ports": "6443" or "1-65535", "sources": [...]}].
  if (const PrivateIngress ingress = backend_->GetPrivateIngress(backend_id)) {
    JsonArray rules = NewArray();
    for (const PrivateRule& r : *ingress) {
      JsonObject rule = NewObject();
      rule->set("protocol", r.protocol);
      PortSet ports;
      ports.Add(r.ports.first, r.ports.last);
      rule->set("ports", ports.ToString());
      JsonArray sources = NewArray();
      for (const auto& src : r.sources) sources->add(src);
      rule->set("sources", sources);
      rules->add(rule);
    }
    o->set("private_ingress", rules);
  } else {
    o->set("private_ingress", Poco::Dynamic::Var());
  }
  return o;
}

}  // namespace gpuprov::emulator
