// SPDX-License-Identifier: Apache-2.0
//
// One emulated cloud API. Serve() is the whole request path, in the order a
// real API gateway works: authentication, then injected throttling and 5xx
// faults, then the route. Each cloud supplies its own error shapes. Adding a
// cloud = one subclass + one line in MakeCloudApi (emulator.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "emulator_http.h"
#include "faults.h"
#include "instance_backend.h"

namespace gpuprov::emulator {

/// What a cloud is started with.
struct CloudOptions {
  /// Credentials accepted (from the cloud's usual environment variables).
  std::vector<std::string> tokens;
  /// Whether the cloud's own rate limits are enforced (429) or only reported.
  bool enforce_rate_limits = true;
  /// Milliseconds every API request waits before it is carried out (0 = none).
  double api_latency_ms = 0;
};

class CloudApi {
 public:
  CloudApi(std::string name, InstanceBackend* backend, CloudOptions options)
      : name_(std::move(name)), backend_(backend), options_(std::move(options)),
        latency_us_(static_cast<int64_t>(options_.api_latency_ms * 1000)) {}
  virtual ~CloudApi() = default;
  CloudApi(const CloudApi&) = delete;
  CloudApi& operator=(const CloudApi&) = delete;

  const std::string& name() const { return name_; }
  /// The real API's base path, printed after the host ("/v2", "/api/v1").
  virtual std::string BasePath() const = 0;

  /// Handles one request completely. Never throws.
  HttpResponse Serve(const HttpRequest& req);

  FaultBook& faults() { return faults_; }
  /// Takes the live instance called \a name back, as the cloud does a spot VM
  /// (InstanceBackend::Preempt); false when there is none.
  bool Preempt(const std::string& name);
  /// {"instances": n, "firewalls": n, "ssh_keys": n, "backend_instances": n}.
  virtual JsonObject Counts() = 0;
  /// Every live instance: {"id" (the cloud's), "name", "backend_id", "state",
  /// "public_ip", "ssh_port", "gpu_present", "boot_script_fails", "message",
  /// "reachable_ports" (PortSet::ToString of what this machine can reach)}.
  virtual JsonArray Instances() = 0;
  /// Deletes everything (instances through the backend), faults included.
  virtual void Reset() = 0;
  /// Applies POST /settings fields; returns an error text or "".
  virtual std::string Configure(const JsonObject& settings);

  // --- api_latency_ms: every request answered that much later, as a distant real API is ---
  /// Called before a request is carried out: sleeps the cloud's API latency (flag
  /// --api-latency-ms, setting api_latency_ms) and counts the request when it is not 0.
  void DelayRequest();
  /// The latency now, in milliseconds.
  double api_latency_ms() const { return static_cast<double>(latency_us_.load()) / 1000; }
  /// Requests delayed by DelayRequest since the start or the last ResetDelayedCount.
  int64_t delayed_requests() const { return delayed_.load(); }
  void ResetDelayedCount() { delayed_ = 0; }

  // --- stall_after: a client stopped right after one request (tests' crash points) ---
  /// Called before a request is carried out. While the cloud is stalled, holds the request
  /// until ReleaseStall (or 10 minutes) and then returns false: the request must be answered
  /// 503 (gRPC UNAVAILABLE) without being carried out, as if it had never arrived. True at
  /// once when the cloud is not stalled.
  bool WaitWhileStalled();
  /// Called after a request was answered with \a status (HTTP, or the gRPC code's
  /// equivalent): a 2xx answer to a request that an armed stall_after fault matches (method,
  /// path prefix, body substring) stalls the cloud from now on.
  void StallIfMatched(const std::string& method, const std::string& path,
                      const std::string& body, int status);
  /// {"stalled": bool, "request": "METHOD PATH" of the request it stalled after, "held": n}.
  JsonObject StallState();
  /// Ends the stall: every held request is answered 503 and later ones are served.
  void ReleaseStall();

 protected:
  /// nullopt when the request carries an accepted credential.
  virtual std::optional<HttpResponse> Authenticate(const HttpRequest& req) = 0;
  virtual HttpResponse Throttled(const HttpRequest& req, const Fault& f) = 0;
  virtual HttpResponse ServerError(const HttpRequest& req, const Fault& f) = 0;
  /// The cloud's answer to an exception escaping Route (a bug): a 500.
  virtual HttpResponse InternalError(const std::string& what) = 0;
  virtual HttpResponse Route(const HttpRequest& req) = 0;
  /// Adds headers every response carries (rate-limit headers and the like).
  virtual void Decorate(const HttpRequest& /*req*/, HttpResponse& /*resp*/) {}

  bool TokenAccepted(const std::string& token) const;
  /// Drops from \a instances (id -> record with `backend_id`) those whose deletion has
  /// finished (`ends_at(record)` reached) and those whose backend instance is gone without a
  /// deletion (vanished), removing that backend record too; with \a keep_preempted, one the
  /// cloud took back (InstanceBackend::Preempt) stays until it is deleted.
  template <typename Map, typename EndsAt>
  void ForgetEnded(Map& instances, EndsAt ends_at, bool keep_preempted = false) {
    const auto now = std::chrono::steady_clock::now();
    for (auto it = instances.begin(); it != instances.end();) {
      const std::optional<std::chrono::steady_clock::time_point>& ends = ends_at(it->second);
      if (ends && now >= *ends) {
        it = instances.erase(it);
        continue;
      }
      const InstanceStatus s = ends ? InstanceStatus{} : backend_->State(it->second.backend_id);
      if (!ends && s.state == InstanceState::kGone && !(keep_preempted && s.preempted)) {
        backend_->Delete(it->second.backend_id);
        it = instances.erase(it);
      } else {
        ++it;
      }
    }
  }

  /// One Instances() row from the backend's view.
  JsonObject InstanceRow(const std::string& id, const std::string& name,
                         const std::string& backend_id);

  std::string name_;
  InstanceBackend* backend_;
  CloudOptions options_;
  FaultBook faults_;

 private:
  std::atomic<int64_t> latency_us_;
  std::atomic<int64_t> delayed_{0};
  std::mutex stall_mu_;
  std::condition_variable stall_cv_;
  bool stalled_ = false;
  uint64_t stall_generation_ = 0;  // +1 per release: a held request waits for its own
  std::string stalled_after_;      // "METHOD PATH"
  int held_ = 0;
};

/// MD5 of a decoded SSH key blob in lower-case colon hex ("aa:bb:..."), the fingerprint
/// DigitalOcean and OpenStack clouds show.
std::string Md5Fingerprint(const std::string& blob);

std::unique_ptr<CloudApi> MakeDigitalOceanApi(InstanceBackend* backend, CloudOptions options);
std::unique_ptr<CloudApi> MakePrimeIntellectApi(InstanceBackend* backend, CloudOptions options);
std::unique_ptr<CloudApi> MakeEc2Api(InstanceBackend* backend, CloudOptions options);
std::unique_ptr<CloudApi> MakeGceApi(InstanceBackend* backend, CloudOptions options);
std::unique_ptr<CloudApi> MakeLambdaApi(InstanceBackend* backend, CloudOptions options);
std::unique_ptr<CloudApi> MakeHyperstackApi(InstanceBackend* backend, CloudOptions options);
std::unique_ptr<CloudApi> MakeVerdaApi(InstanceBackend* backend, CloudOptions options);
std::unique_ptr<CloudApi> MakeMassedComputeApi(InstanceBackend* backend, CloudOptions options);

}  // namespace gpuprov::emulator
