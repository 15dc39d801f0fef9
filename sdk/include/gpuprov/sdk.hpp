// SPDX-License-Identifier: Apache-2.0
//
// gpuprov driver SDK: write a plain C++ class, add one macro, get a driver.
//
//   class MyCloud {
//    public:
//     static constexpr const char* kName = "mycloud";        // [a-z0-9_-]+, matches the file
//     static constexpr const char* kVersion = "0.1.0";
//     static constexpr const char* kDescription = "My Cloud GPU VMs";
//     static constexpr uint64_t kCapabilities =
//         GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_BOOT_CLOUD_INIT | GPUPROV_CAP_HOSTS_KUBERNETES;
//     explicit MyCloud(const gpuprov::sdk::InitContext& ctx);
//     std::string Check(const std::string& request_json);    // each returns a JSON document
//     std::string Offers(const std::string& request_json);
//     std::string Create(const std::string& request_json);
//     std::string Get(const std::string& request_json);
//     std::string List(const std::string& request_json);
//     std::string Delete(const std::string& request_json);
//     std::string OpenPorts(const std::string& request_json); // only with GPUPROV_CAP_OPEN_PORTS
//   };
//   GPUPROV_DRIVER(MyCloud)
//
// Build it with gpuprov_add_driver(mycloud SOURCES mycloud.cc) from find_package(gpuprov-sdk):
// the file becomes libgpuprov-driver-mycloud.so with only gpuprov_driver_entry exported.
//
// Errors: throw gpuprov::sdk::DriverError(GPUPROV_STATUS_..., "message") to choose the status;
// any other std::exception becomes GPUPROV_STATUS_FAILED with what() as the message. Nothing
// throws across the C boundary: every thunk is noexcept.
//
// The request and result schemas are in docs/driver-protocol.md. The SDK has no dependencies
// beyond the C++ standard library, so drivers pick their own JSON and HTTP libraries.
#pragma once

#include <cstdint>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "gpuprov/driver_abi.h"

namespace gpuprov::sdk {

/// An error with the status the host should see.
class DriverError : public std::runtime_error {
 public:
  DriverError(gpuprov_type_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  gpuprov_type_status status() const { return status_; }

 private:
  gpuprov_type_status status_;
};

/// The host's callbacks. Cheap to copy; valid while the driver handle lives.
class Host {
 public:
  Host() = default;
  explicit Host(const gpuprov_type_host_api* api) {
    // Copy what this ABI version knows; a smaller (older) struct leaves the rest zeroed.
    if (api != nullptr) {
      size_t n = api->struct_size < sizeof(api_) ? api->struct_size : sizeof(api_);
      std::char_traits<char>::copy(reinterpret_cast<char*>(&api_),
                                   reinterpret_cast<const char*>(api), n);
    }
  }
  void Log(gpuprov_type_log_level level, std::string_view msg) const {
    if (api_.log) api_.log(api_.host_ctx, level, msg.data(), msg.size());
  }
  void Debug(std::string_view msg) const { Log(GPUPROV_LOG_DEBUG, msg); }
  void Info(std::string_view msg) const { Log(GPUPROV_LOG_INFO, msg); }
  void Warning(std::string_view msg) const { Log(GPUPROV_LOG_WARNING, msg); }
  void Progress(std::string_view msg) const {
    if (api_.progress) api_.progress(api_.host_ctx, msg.data(), msg.size());
  }
  bool Cancelled() const { return api_.cancelled != nullptr && api_.cancelled(api_.host_ctx); }

 private:
  gpuprov_type_host_api api_{};
};

/// What a driver's constructor receives.
struct InitContext {
  Host host;
  /// {"endpoint": "...", "config": {...}}: the driver's settings (docs/driver-protocol.md).
  std::string config_json;
};

namespace internal {

template <class T>
concept HasIdentity = requires {
  { T::kName } -> std::convertible_to<const char*>;
  { T::kVersion } -> std::convertible_to<const char*>;
  { T::kDescription } -> std::convertible_to<const char*>;
  { T::kCapabilities } -> std::convertible_to<uint64_t>;
};

#define GPUPROV_SDK_OP_CONCEPT(Concept, Method) \
  template <class T>                            \
  concept Concept = requires(T t, const std::string& s) { \
    { t.Method(s) } -> std::convertible_to<std::string>;  \
  };
GPUPROV_SDK_OP_CONCEPT(HasCheck, Check)
GPUPROV_SDK_OP_CONCEPT(HasOffers, Offers)
GPUPROV_SDK_OP_CONCEPT(HasCreate, Create)
GPUPROV_SDK_OP_CONCEPT(HasGet, Get)
GPUPROV_SDK_OP_CONCEPT(HasList, List)
GPUPROV_SDK_OP_CONCEPT(HasDelete, Delete)
GPUPROV_SDK_OP_CONCEPT(HasOpenPorts, OpenPorts)
#undef GPUPROV_SDK_OP_CONCEPT

/// What gpuprov_type_driver* points to for a driver class T.
template <class T>
struct Handle {
  T* impl = nullptr;
  std::string last_error;
  std::string result;  // the driver-owned result of the last call
};

template <class T>
Handle<T>* FromC(gpuprov_type_driver* d) {
  return reinterpret_cast<Handle<T>*>(d);
}

/// Runs fn(), turning exceptions into a status and the handle's last error.
template <class T, class Fn>
gpuprov_type_status Guard(Handle<T>* h, Fn&& fn) noexcept {
  try {
    h->last_error.clear();
    fn();
    return GPUPROV_STATUS_OK;
  } catch (const DriverError& e) {
    h->last_error = e.what();
    return e.status() == GPUPROV_STATUS_OK ? GPUPROV_STATUS_FAILED : e.status();
  } catch (const std::bad_alloc&) {
    h->last_error = "out of memory";
  } catch (const std::exception& e) {
    h->last_error = e.what();
  } catch (...) {
    h->last_error = "unknown error in driver";
  }
  return GPUPROV_STATUS_FAILED;
}

template <class T>
gpuprov_type_driver* Init(const gpuprov_type_init_input* input, gpuprov_type_status* status) noexcept {
  auto* h = new (std::nothrow) Handle<T>();
  if (h == nullptr) {
    if (status) *status = GPUPROV_STATUS_FAILED;
    return nullptr;
  }
  gpuprov_type_status rc = Guard(h, [&] {
    if (input == nullptr || input->struct_size < sizeof(uint32_t) + sizeof(void*)) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT, "init input missing or too small");
    }
    InitContext ctx;
    ctx.host = Host(input->host);
    if (input->config_host_owned.data != nullptr) {
      ctx.config_json.assign(input->config_host_owned.data, input->config_host_owned.len);
    }
    h->impl = new T(ctx);
  });
  if (status) *status = rc;
  return reinterpret_cast<gpuprov_type_driver*>(h);
}

template <class T>
void Destroy(gpuprov_type_driver* d) noexcept {
  auto* h = FromC<T>(d);
  if (h == nullptr) return;
  try {
    delete h->impl;
  } catch (...) {
  }
  delete h;
}

template <class T>
const char* LastError(gpuprov_type_driver* d) noexcept {
  auto* h = FromC<T>(d);
  return h == nullptr ? "no driver handle" : h->last_error.c_str();
}

/// One thunk per operation: JSON in, JSON out, exceptions caught.
template <class T, std::string (T::*Method)(const std::string&)>
gpuprov_type_status Op(gpuprov_type_driver* d, gpuprov_type_json request,
                       gpuprov_type_json* result) noexcept {
  auto* h = FromC<T>(d);
  if (h == nullptr) return GPUPROV_STATUS_FAILED;
  return Guard(h, [&] {
    if (h->impl == nullptr) throw DriverError(GPUPROV_STATUS_FAILED, "driver was not initialised");
    std::string req = request.data ? std::string(request.data, request.len) : std::string("{}");
    h->result = (h->impl->*Method)(req);
    if (result) *result = gpuprov_type_json{h->result.data(), h->result.size()};
  });
}

template <class T>
constexpr gpuprov_drv_vtable MakeVtable() {
  gpuprov_drv_vtable v{};
  v.struct_size = sizeof(gpuprov_drv_vtable);
  v.init = &Init<T>;
  v.destroy = &Destroy<T>;
  v.last_error = &LastError<T>;
  if constexpr (HasCheck<T>) v.check = &Op<T, &T::Check>;
  if constexpr (HasOffers<T>) v.offers = &Op<T, &T::Offers>;
  if constexpr (HasCreate<T>) v.create = &Op<T, &T::Create>;
  if constexpr (HasGet<T>) v.get = &Op<T, &T::Get>;
  if constexpr (HasList<T>) v.list = &Op<T, &T::List>;
  if constexpr (HasDelete<T>) v.delete_vm = &Op<T, &T::Delete>;
  if constexpr (HasOpenPorts<T>) v.open_ports = &Op<T, &T::OpenPorts>;
  return v;
}

template <class T>
const gpuprov_type_driver_descriptor* Descriptor() noexcept {
  static_assert(HasIdentity<T>,
                "a gpuprov driver class needs: static constexpr const char* kName, kVersion, "
                "kDescription; static constexpr uint64_t kCapabilities");
  static_assert(std::is_constructible_v<T, const InitContext&>,
                "a gpuprov driver class needs the constructor: explicit T(const "
                "gpuprov::sdk::InitContext& ctx)");
  static_assert(!(T::kCapabilities & GPUPROV_CAP_VM_LIFECYCLE) ||
                    (HasCheck<T> && HasOffers<T> && HasCreate<T> && HasGet<T> && HasList<T> &&
                     HasDelete<T>),
                "GPUPROV_CAP_VM_LIFECYCLE needs: std::string Check/Offers/Create/Get/List/"
                "Delete(const std::string& request_json)");
  static_assert(!(T::kCapabilities & GPUPROV_CAP_OPEN_PORTS) || HasOpenPorts<T>,
                "GPUPROV_CAP_OPEN_PORTS needs: std::string OpenPorts(const std::string& "
                "request_json)");
  static constexpr gpuprov_drv_vtable kVtable = MakeVtable<T>();
  static constexpr gpuprov_type_driver_descriptor kDescriptor = {
      sizeof(gpuprov_type_driver_descriptor),
      GPUPROV_DRIVER_MAGIC,
      GPUPROV_ABI_VERSION_MAJOR,
      GPUPROV_ABI_VERSION_MINOR,
      T::kName,
      T::kVersion,
      T::kDescription,
      T::kCapabilities,
      &kVtable,
  };
  return &kDescriptor;
}

}  // namespace internal
}  // namespace gpuprov::sdk

/// Exports gpuprov_driver_entry for the driver class T. Use once per driver, at namespace scope.
#define GPUPROV_DRIVER(T)                                                             \
  extern "C" __attribute__((visibility("default"))) const gpuprov_type_driver_descriptor* \
  gpuprov_driver_entry(void) {                                                        \
    return ::gpuprov::sdk::internal::Descriptor<T>();                                 \
  }
