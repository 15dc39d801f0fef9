// SPDX-License-Identifier: Apache-2.0
//
// The emulator process's core: one HTTP server per cloud on 127.0.0.1, each at
// the real API's paths, plus a control server for tests (faults, counts,
// request log, reset). Used by gpuprov-emulator (emulator_main.cc) and, in
// process, by emulator_test.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cloud_api.h"
#include "instance_backend.h"

namespace Poco::Net {
class HTTPServer;
}

namespace gpuprov::emulator {

struct EmulatorOptions {
  std::string backend = "memory";      // memory | docker
  std::vector<std::string> clouds;     // empty: every cloud in KnownClouds()
  std::map<std::string, int> ports;    // cloud (or "control") -> port; 0/absent = ephemeral
  std::string image;                   // docker backend: test VM image
  double boot_seconds = 3;             // memory backend: create -> running
  bool enforce_rate_limits = true;     // clouds' own documented rate limits
  double api_latency_ms = 0;           // every cloud API request waits this long first
  double ssh_delay_seconds = 0;        // docker backend: SSH refused this long after running
  /// Accepted credentials per cloud; a cloud absent here reads its
  /// environment variables (TokenEnvVars).
  std::map<std::string, std::vector<std::string>> tokens;
  std::string session;  // docker labels; "" = generated
};

/// One logged request (never a credential).
struct LoggedRequest {
  std::string cloud;
  std::string method;
  std::string path;   // with the query string
  std::string action; // a form body's Action (EC2's Query API: every call is POST /), else ""
  int status = 0;
  double duration_ms = 0;
  std::string time;   // RFC 3339
};

class Emulator {
 public:
  explicit Emulator(EmulatorOptions options);
  ~Emulator();
  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;

  /// Every cloud this build emulates, in print order.
  static std::vector<std::string> KnownClouds();
  /// The environment variables a cloud's credentials are read from.
  static std::vector<std::string> TokenEnvVars(const std::string& cloud);
  /// The credential accepted when none of a cloud's variables is set.
  static std::string DefaultToken(const std::string& cloud);

  /// Binds every server and starts serving. Throws std::runtime_error.
  void Start();
  /// Stops the servers, then removes every instance (docker: containers).
  void Stop();

  /// (cloud, base URL) in print order; the last entry is ("control", URL).
  std::vector<std::pair<std::string, std::string>> Endpoints() const;
  std::string BaseUrl(const std::string& cloud) const;
  std::string ControlUrl() const;
  /// Notes for stderr (e.g. which clouds fell back to the default token).
  const std::vector<std::string>& notes() const { return notes_; }

  /// For the HTTP handlers.
  HttpResponse HandleCloud(CloudApi* api, const HttpRequest& req);
  HttpResponse HandleControl(const HttpRequest& req);

 private:
  struct Server;
  CloudApi* Find(const std::string& cloud) const;
  void Log(LoggedRequest r);

  EmulatorOptions options_;
  std::unique_ptr<InstanceBackend> backend_;
  std::vector<std::unique_ptr<CloudApi>> apis_;
  std::vector<std::unique_ptr<Server>> servers_;  // one per api, then control
  std::vector<std::string> notes_;
  mutable std::mutex log_mu_;
  std::map<std::string, std::vector<LoggedRequest>> log_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace gpuprov::emulator
