// SPDX-License-Identifier: Apache-2.0
//
// gpuprov driver SDK, for a driver's own tests: a fake host that records what the driver
// reports, and the driver called through its C function table as gpuprov calls it.
//
//   #include "gpuprov/testing.hpp"
//   namespace gt = gpuprov::sdk::testing;
//
//   gt::LoadedDriver driver("build/libgpuprov-driver-mycloud.so",      // dlopen'ed once
//                           R"({"endpoint": "", "config": {"region": "r1"}})");
//   // (or LoadedDriver(gpuprov_driver_entry(), config) with the driver's sources linked in)
//   gt::CallResult r = driver.Offers(R"({"gpu": {"type": "L4", "count": 1}})");
//   // r.status (GPUPROV_STATUS_*), r.json (the result on OK), r.error (last_error otherwise)
//   driver.host().cancel = true;      // the host's cancelled() now says yes
//   driver.host().All();              // every log line ("<level> <message>") and progress line
//
// The config JSON is what gpuprov passes to init (docs/driver-protocol.md, "init"). A
// RecordingHost on its own gives a gpuprov::sdk::Host for unit tests of code below the driver
// class (RecordingHost::Host()). BasicLoadedDriver<R> returns R, a type derived from
// CallResult, for a test that adds accessors in its JSON library of choice.
//
// Framework-free (any test framework; failures are std::runtime_error), header-only, and like
// sdk.hpp it needs only the C++ standard library and POSIX dlopen (link ${CMAKE_DL_LIBS} on
// glibc before 2.34).
#pragma once

#include <dlfcn.h>

#include <atomic>
#include <map>
#include <mutex>
#include <ostream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "gpuprov/driver_abi.h"
#include "gpuprov/sdk.hpp"

namespace gpuprov::sdk::testing {

/// Host callbacks that record what the driver reports: log lines as "<level> <message>",
/// progress messages as they came. Set `cancel` to make cancelled() report true (Ctrl-C).
/// Thread-safe: a driver may report from several threads.
struct RecordingHost {
  std::vector<std::string> logs;
  std::vector<std::string> progress;
  std::atomic<bool> cancel{false};
  gpuprov_type_host_api api{};

  RecordingHost() {
    api.struct_size = sizeof(api);
    api.host_ctx = this;
    api.log = [](void* ctx, gpuprov_type_log_level level, const char* msg, size_t len) {
      auto* self = static_cast<RecordingHost*>(ctx);
      std::lock_guard<std::mutex> lock(self->mu_);
      self->logs.push_back(std::to_string(level) + " " + std::string(msg, len));
    };
    api.progress = [](void* ctx, const char* msg, size_t len) {
      auto* self = static_cast<RecordingHost*>(ctx);
      std::lock_guard<std::mutex> lock(self->mu_);
      self->progress.emplace_back(msg, len);
    };
    api.cancelled = [](void* ctx) { return static_cast<RecordingHost*>(ctx)->cancel.load(); };
  }
  RecordingHost(const RecordingHost&) = delete;
  RecordingHost& operator=(const RecordingHost&) = delete;

  /// The SDK's view of this host, as a driver's constructor gets it in InitContext.
  gpuprov::sdk::Host Host() const { return gpuprov::sdk::Host(&api); }

  /// Every log line, then every progress message, one a line.
  std::string All() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string s;
    for (const auto& l : logs) s += l + "\n";
    for (const auto& p : progress) s += p + "\n";
    return s;
  }

 private:
  mutable std::mutex mu_;
};

/// The descriptor of the driver .so at \a path: loaded with dlopen (RTLD_NOW | RTLD_LOCAL, as
/// gpuprov loads it) once per path and never unloaded. Throws std::runtime_error naming the
/// file when it cannot be loaded or exports no gpuprov_driver_entry.
inline const gpuprov_type_driver_descriptor* LoadDriverDescriptor(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, const gpuprov_type_driver_descriptor*> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(path); it != loaded.end()) return it->second;
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) throw std::runtime_error("dlopen " + path + ": " + dlerror());
  auto entry =
      reinterpret_cast<gpuprov_driver_entry_fn>(dlsym(lib, GPUPROV_DRIVER_ENTRY_SYMBOL));
  if (entry == nullptr) {
    throw std::runtime_error(std::string("no ") + GPUPROV_DRIVER_ENTRY_SYMBOL + " in " + path);
  }
  const gpuprov_type_driver_descriptor* descriptor = entry();
  if (descriptor == nullptr || descriptor->vtable == nullptr) {
    throw std::runtime_error(path + ": the entry returned no descriptor or no function table");
  }
  loaded[path] = descriptor;
  return descriptor;
}

/// What one operation returned.
struct CallResult {
  gpuprov_type_status status = GPUPROV_STATUS_FAILED;
  std::string json;   ///< the result document on GPUPROV_STATUS_OK
  std::string error;  ///< the driver's last_error otherwise
};

inline std::ostream& operator<<(std::ostream& os, const CallResult& r) {
  return os << "status " << r.status << " " << (r.status == GPUPROV_STATUS_OK ? r.json : r.error);
}

/// One driver handle made by init() with a RecordingHost, destroyed at the end. The handle is
/// kept when init fails, so init_status() and init_error() tell why. Each operation takes the
/// request JSON and returns \a Result (CallResult or a type derived from it).
template <class Result = CallResult>
class BasicLoadedDriver {
  static_assert(std::is_base_of_v<CallResult, Result>, "Result must derive from CallResult");

 public:
  /// A driver whose descriptor is at hand (its gpuprov_driver_entry() when the test links the
  /// driver's sources).
  BasicLoadedDriver(const gpuprov_type_driver_descriptor* descriptor, const std::string& config) {
    if (descriptor == nullptr || descriptor->vtable == nullptr) {
      throw std::runtime_error("no driver descriptor or function table");
    }
    vtable_ = descriptor->vtable;
    gpuprov_type_init_input input{};
    input.struct_size = sizeof(input);
    input.host = &host_.api;
    input.config_host_owned = {config.data(), config.size()};
    handle_ = vtable_->init(&input, &init_status_);
    if (handle_ == nullptr) throw std::runtime_error("the driver's init returned NULL");
    if (init_status_ != GPUPROV_STATUS_OK) init_error_ = vtable_->last_error(handle_);
  }
  /// The driver .so at \a so_path (LoadDriverDescriptor).
  BasicLoadedDriver(const std::string& so_path, const std::string& config)
      : BasicLoadedDriver(LoadDriverDescriptor(so_path), config) {}
  virtual ~BasicLoadedDriver() { vtable_->destroy(handle_); }
  BasicLoadedDriver(const BasicLoadedDriver&) = delete;
  BasicLoadedDriver& operator=(const BasicLoadedDriver&) = delete;

  gpuprov_type_status init_status() const { return init_status_; }
  const std::string& init_error() const { return init_error_; }
  const gpuprov_drv_vtable& vtable() const { return *vtable_; }
  RecordingHost& host() { return host_; }
  const RecordingHost& host() const { return host_; }

  /// Calls \a fn (a member of vtable()) with \a request; a null \a fn (an operation the driver
  /// does not have) is GPUPROV_STATUS_FAILED saying so.
  Result Call(gpuprov_drv_op_fn fn, const std::string& request) {
    Result r;
    if (fn == nullptr) {
      r.error = "the driver does not have this operation";
      return r;
    }
    gpuprov_type_json result{};
    r.status = fn(handle_, gpuprov_type_json{request.data(), request.size()}, &result);
    if (r.status == GPUPROV_STATUS_OK) {
      r.json.assign(result.data, result.len);
    } else {
      r.error = vtable_->last_error(handle_);
    }
    return r;
  }
  Result Check() { return Call(vtable_->check, "{}"); }
  Result Offers(const std::string& request) { return Call(vtable_->offers, request); }
  Result Create(const std::string& request) { return Call(vtable_->create, request); }
  Result Get(const std::string& request) { return Call(vtable_->get, request); }
  Result List() { return Call(vtable_->list, "{}"); }
  Result Delete(const std::string& request) { return Call(vtable_->delete_vm, request); }
  Result OpenPorts(const std::string& request) { return Call(vtable_->open_ports, request); }
  /// ABI 1.2's two: FAILED (no such operation) for a driver whose table ends before them.
  Result ListResources() {
    return Call(GPUPROV_SDK_REACHES(vtable_, gpuprov_drv_vtable, list_resources)
                    ? vtable_->list_resources
                    : nullptr,
                "{}");
  }
  Result DeleteResource(const std::string& request) {
    return Call(GPUPROV_SDK_REACHES(vtable_, gpuprov_drv_vtable, delete_resource)
                    ? vtable_->delete_resource
                    : nullptr,
                request);
  }
  /// ABI 1.5: FAILED (no such operation) for a driver whose table ends before it.
  Result OpenPeerPorts(const std::string& request) {
    return Call(GPUPROV_SDK_REACHES(vtable_, gpuprov_drv_vtable, open_peer_ports)
                    ? vtable_->open_peer_ports
                    : nullptr,
                request);
  }

 private:
  RecordingHost host_;
  const gpuprov_drv_vtable* vtable_ = nullptr;
  gpuprov_type_driver* handle_ = nullptr;
  gpuprov_type_status init_status_ = GPUPROV_STATUS_FAILED;
  std::string init_error_;
};

using LoadedDriver = BasicLoadedDriver<>;

}  // namespace gpuprov::sdk::testing
