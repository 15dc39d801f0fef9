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
//     std::string ListResources(const std::string& request_json);  // optional, both or neither:
//     std::string DeleteResource(const std::string& request_json); // `gpuprov gc` (ABI 1.2)
//     std::string OpenPeerPorts(const std::string& request_json);  // GPUPROV_CAP_CLUSTER (1.5)
//   };
//   GPUPROV_DRIVER(MyCloud)
//
// The keys the driver reads from its [clouds.mycloud] table of config.toml (ABI 1.1): a static
// table given to the macro; gpuprov then refuses unknown or mistyped keys before init, and
// `gpuprov drivers mycloud` prints the table.
//
//   constexpr gpuprov_type_config_key kMyCloudConfigKeys[] = {
//       gpuprov::sdk::StringKey("region", "the region used when provision names none"),
//       gpuprov::sdk::IntegerKey("poll_interval_ms", "how often to poll a pending VM"),
//   };
//   GPUPROV_DRIVER(MyCloud, kMyCloudConfigKeys)
//
// ABI 1.3 adds a list of strings, a table of such keys, and former names (accepted by the host
// with a warning and passed under the current name); a table with one of them makes the driver
// require ABI 1.3 by itself:
//
//   constexpr gpuprov_type_config_key kLimits[] = {
//       gpuprov::sdk::IntegerKey("max_attempts", "HTTP attempts per call"),
//   };
//   constexpr gpuprov_type_config_key kMyCloudConfigKeys[] = {
//       gpuprov::sdk::StringListKey("regions", "the regions list searches"),
//       gpuprov::sdk::TableKey<kLimits>("limits", "request limits"),   // limits = {max_attempts = 3}
//       gpuprov::sdk::IntegerKey("delete_wait_seconds", "how long delete waits"),
//       gpuprov::sdk::RenamedKey("delete_timeout_s", "delete_wait_seconds"),
//   };
//
// The driver states the minimum driver ABI minor it needs from the host as a third argument
// (default 0: any ABI 1.x host, or 3 when its key table uses a 1.3 key; the SDK's own minor
// only when the driver relies on a member added in it):
// GPUPROV_DRIVER(MyCloud, kMyCloudConfigKeys, 1), or without keys
// GPUPROV_DRIVER(MyCloud, gpuprov::sdk::kNoConfigKeys, 1).
//
// How a VM of the cloud learns its public address (ABI 1.4; the node installer's source for the
// API certificate, docs/driver-protocol.md): an optional member, absent = unknown.
//
//     static constexpr const char* kNodeAddress = GPUPROV_NODE_ADDRESS_EC2;
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

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
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

/// True when a struct of \a struct_size bytes reaches the member at \a offset of \a width
/// bytes: the header's rule for reading a member.
constexpr bool Reaches(uint32_t struct_size, size_t offset, size_t width) {
  return offset + width <= struct_size;
}
#define GPUPROV_SDK_REACHES(ptr, type, member) \
  ::gpuprov::sdk::Reaches((ptr)->struct_size, offsetof(type, member), sizeof(((type*)nullptr)->member))

/// The host's callbacks. Cheap to copy; valid while the driver handle lives.
class Host {
 public:
  Host() = default;
  /// Keeps each callback the host's struct reaches (by its struct_size); the others stay null,
  /// so an older host's smaller struct and a newer host's larger one both work.
  explicit Host(const gpuprov_type_host_api* api) {
    if (api == nullptr || api->struct_size < sizeof(uint32_t)) return;
    if (GPUPROV_SDK_REACHES(api, gpuprov_type_host_api, host_ctx)) api_.host_ctx = api->host_ctx;
    if (GPUPROV_SDK_REACHES(api, gpuprov_type_host_api, log)) api_.log = api->log;
    if (GPUPROV_SDK_REACHES(api, gpuprov_type_host_api, progress)) api_.progress = api->progress;
    if (GPUPROV_SDK_REACHES(api, gpuprov_type_host_api, cancelled)) api_.cancelled = api->cancelled;
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

/// A [clouds.NAME] key of type string, integer, boolean or (ABI 1.3) string list, for a
/// driver's config key table.
constexpr gpuprov_type_config_key StringKey(const char* name, const char* help) {
  return {sizeof(gpuprov_type_config_key), GPUPROV_CONFIG_STRING, name, help, nullptr, nullptr, 0};
}
constexpr gpuprov_type_config_key IntegerKey(const char* name, const char* help) {
  return {sizeof(gpuprov_type_config_key), GPUPROV_CONFIG_INTEGER, name, help, nullptr, nullptr, 0};
}
constexpr gpuprov_type_config_key BooleanKey(const char* name, const char* help) {
  return {sizeof(gpuprov_type_config_key), GPUPROV_CONFIG_BOOLEAN, name, help, nullptr, nullptr, 0};
}
constexpr gpuprov_type_config_key StringListKey(const char* name, const char* help) {
  return {sizeof(gpuprov_type_config_key), GPUPROV_CONFIG_STRING_LIST, name, help, nullptr,
          nullptr, 0};
}

/// ABI 1.3: \a former_name, an older name of the key \a current_name (declared in the same
/// table), or of a member of a declared table ("retry.max_attempts"). The host accepts it with
/// a warning naming the current name and passes its value under that name, so the driver reads
/// only \a current_name.
constexpr gpuprov_type_config_key RenamedKey(const char* former_name, const char* current_name) {
  return {sizeof(gpuprov_type_config_key), 0, former_name, "", current_name, nullptr, 0};
}

namespace internal {
template <const auto& Keys, size_t... I>
constexpr std::array<const gpuprov_type_config_key*, sizeof...(I)> KeyPointers(
    std::index_sequence<I...>) {
  return {&Keys[I]...};
}
template <const auto& Keys>
inline constexpr auto kKeyPointersOf = KeyPointers<Keys>(
    std::make_index_sequence<std::extent_v<std::remove_cvref_t<decltype(Keys)>>>());
}  // namespace internal

/// ABI 1.3: a table key whose members are the keys of \a Members, a namespace-scope
/// `constexpr gpuprov_type_config_key kMembers[]` of string, integer, boolean or string list
/// keys; in config.toml `name = {member = value, ...}` or a [clouds.NAME.name] section.
template <const auto& Members>
constexpr gpuprov_type_config_key TableKey(const char* name, const char* help) {
  return {sizeof(gpuprov_type_config_key), GPUPROV_CONFIG_TABLE, name, help, nullptr,
          internal::kKeyPointersOf<Members>.data(), internal::kKeyPointersOf<Members>.size()};
}

/// Passed as the macro's key table by a driver that declares no keys but states a minor.
struct NoConfigKeys {};
inline constexpr NoConfigKeys kNoConfigKeys{};

namespace internal {

template <class T>
concept HasIdentity = requires {
  { T::kName } -> std::convertible_to<const char*>;
  { T::kVersion } -> std::convertible_to<const char*>;
  { T::kDescription } -> std::convertible_to<const char*>;
  { T::kCapabilities } -> std::convertible_to<uint64_t>;
};

template <class T>
concept HasNodeAddress = requires {
  { T::kNodeAddress } -> std::convertible_to<const char*>;
};

/// T::kNodeAddress, or nullptr when the class does not say (ABI 1.4).
template <class T>
constexpr const char* NodeAddressOf() {
  if constexpr (HasNodeAddress<T>) {
    return T::kNodeAddress;
  } else {
    return nullptr;
  }
}

/// The one signature an operation method may have.
template <class T>
using OpMethod = std::string (T::*)(const std::string&);

// For each operation: Declares<Op> when the class has a single member of that name, Has<Op>
// when it has exactly the signature the SDK calls, and a check that turns any other signature
// (a const method, a std::string_view or by-value parameter, another return type) into one
// readable error instead of a template error deep in the SDK.
#define GPUPROV_SDK_OP_CONCEPT(Method)                                                    \
  template <class T>                                                                      \
  concept Declares##Method = requires { &T::Method; };                                    \
  template <class T>                                                                      \
  concept Has##Method = Declares##Method<T> && std::is_same_v<decltype(&T::Method), OpMethod<T>>; \
  template <class T>                                                                      \
  constexpr bool Check##Method##Signature() {                                             \
    static_assert(!Declares##Method<T> || Has##Method<T>,                                 \
                  "gpuprov SDK: the driver's " #Method " has the wrong signature; it must be "  \
                  "exactly `std::string " #Method "(const std::string& request_json)`: not a " \
                  "const method (the SDK calls it on the driver object it owns) and not a "  \
                  "std::string_view parameter (the request is copied into a std::string)"); \
    return true;                                                                          \
  }
GPUPROV_SDK_OP_CONCEPT(Check)
GPUPROV_SDK_OP_CONCEPT(Offers)
GPUPROV_SDK_OP_CONCEPT(Create)
GPUPROV_SDK_OP_CONCEPT(Get)
GPUPROV_SDK_OP_CONCEPT(List)
GPUPROV_SDK_OP_CONCEPT(Delete)
GPUPROV_SDK_OP_CONCEPT(OpenPorts)
GPUPROV_SDK_OP_CONCEPT(ListResources)
GPUPROV_SDK_OP_CONCEPT(DeleteResource)
GPUPROV_SDK_OP_CONCEPT(OpenPeerPorts)
#undef GPUPROV_SDK_OP_CONCEPT

template <class T>
constexpr bool CheckOpSignatures() {
  return CheckCheckSignature<T>() && CheckOffersSignature<T>() && CheckCreateSignature<T>() &&
         CheckGetSignature<T>() && CheckListSignature<T>() && CheckDeleteSignature<T>() &&
         CheckOpenPortsSignature<T>() && CheckListResourcesSignature<T>() &&
         CheckDeleteResourceSignature<T>() && CheckOpenPeerPortsSignature<T>();
}

/// The name rule of a config key: [a-z0-9_]+, at most 64 bytes.
constexpr bool ValidConfigKeyName(const char* name) {
  if (name == nullptr || *name == '\0') return false;
  size_t n = 0;
  for (const char* p = name; *p; ++p, ++n) {
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) return false;
  }
  return n <= 64;
}

constexpr bool SameName(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}

/// Facts about a config key table, each checked at compile time with its own message.
enum class KeyRule {
  kMadeByHelpers,
  kNameValid,
  kNotEndpoint,
  kHasHelp,
  kTypeKnown,
  kUnique,
  kMembersPlain,    // a table's members: not tables, not former names, valid, unique, with help
  kRenamesDeclared  // a former name names a declared key that is not a former name itself
};

constexpr bool IsRenamed(const gpuprov_type_config_key& k) { return k.replaced_by != nullptr; }

constexpr bool MembersArePlain(const gpuprov_type_config_key& k) {
  if (k.type != GPUPROV_CONFIG_TABLE) return k.members == nullptr && k.member_count == 0;
  if (k.members == nullptr || k.member_count == 0) return false;
  for (size_t i = 0; i < k.member_count; ++i) {
    const gpuprov_type_config_key* m = k.members[i];
    if (m == nullptr || m->struct_size != sizeof(gpuprov_type_config_key) || IsRenamed(*m) ||
        m->type < GPUPROV_CONFIG_STRING || m->type > GPUPROV_CONFIG_STRING_LIST ||
        !ValidConfigKeyName(m->name) || m->help == nullptr || *m->help == '\0') {
      return false;
    }
    for (size_t j = 0; j < i; ++j) {
      if (SameName(k.members[j]->name, m->name)) return false;
    }
  }
  return true;
}

/// True when \a a up to its first '.' (or its end) is \a b; *rest is what follows the dot.
constexpr bool SameHead(const char* a, const char* b, const char** rest) {
  while (*a && *a != '.' && *a == *b) ++a, ++b;
  *rest = *a == '.' ? a + 1 : nullptr;
  return (*a == '\0' || *a == '.') && *b == '\0';
}

/// True when \a target names a key of \a keys that is not a former name, or "table.member" a
/// member of one of its tables.
template <size_t N>
constexpr bool DeclaresTarget(const gpuprov_type_config_key (&keys)[N], const char* target) {
  for (size_t j = 0; j < N; ++j) {
    const char* member = nullptr;
    if (IsRenamed(keys[j]) || !SameHead(target, keys[j].name, &member)) continue;
    if (member == nullptr) return true;
    if (keys[j].type != GPUPROV_CONFIG_TABLE || keys[j].members == nullptr) return false;
    for (size_t m = 0; m < keys[j].member_count; ++m) {
      if (SameName(keys[j].members[m]->name, member)) return true;
    }
    return false;
  }
  return false;
}

template <size_t N>
constexpr bool KeysFollow(const gpuprov_type_config_key (&keys)[N], KeyRule rule) {
  for (size_t i = 0; i < N; ++i) {
    const gpuprov_type_config_key& k = keys[i];
    switch (rule) {
      case KeyRule::kMadeByHelpers:
        if (k.struct_size != sizeof(gpuprov_type_config_key)) return false;
        break;
      case KeyRule::kNameValid:
        if (!ValidConfigKeyName(k.name)) return false;
        break;
      case KeyRule::kNotEndpoint:
        if (SameName(k.name, "endpoint")) return false;
        break;
      case KeyRule::kHasHelp:
        if (!IsRenamed(k) && (k.help == nullptr || *k.help == '\0')) return false;
        break;
      case KeyRule::kTypeKnown:
        if (!IsRenamed(k) && (k.type < GPUPROV_CONFIG_STRING || k.type > GPUPROV_CONFIG_TABLE)) {
          return false;
        }
        break;
      case KeyRule::kUnique:
        for (size_t j = 0; j < i; ++j) {
          if (SameName(keys[j].name, k.name)) return false;
        }
        break;
      case KeyRule::kMembersPlain:
        if (!IsRenamed(k) && !MembersArePlain(k)) return false;
        break;
      case KeyRule::kRenamesDeclared:
        if (IsRenamed(k) && !DeclaresTarget(keys, k.replaced_by)) return false;
        break;
    }
  }
  return true;
}
constexpr bool KeysFollow(const NoConfigKeys&, KeyRule) { return true; }

/// The ABI minor a key table needs of the host: 3 with a string list, a table or a former
/// name (an older host refuses their types), else 0.
template <size_t N>
constexpr int MinorNeededBy(const gpuprov_type_config_key (&keys)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (IsRenamed(keys[i]) || keys[i].type > GPUPROV_CONFIG_BOOLEAN) return 3;
  }
  return 0;
}
constexpr int MinorNeededBy(const NoConfigKeys&) { return 0; }

template <const auto& Keys>
constexpr bool CheckConfigKeys() {
  static_assert(KeysFollow(Keys, KeyRule::kMadeByHelpers),
                "gpuprov SDK: make config keys with gpuprov::sdk::StringKey, IntegerKey, "
                "BooleanKey, StringListKey, TableKey or RenamedKey (they set struct_size and the "
                "type)");
  static_assert(KeysFollow(Keys, KeyRule::kNameValid),
                "gpuprov SDK: a config key name must be [a-z0-9_]+, at most 64 bytes");
  static_assert(KeysFollow(Keys, KeyRule::kNotEndpoint),
                "gpuprov SDK: `endpoint` is the host's own key (it arrives as the settings' "
                "\"endpoint\"): do not declare it");
  static_assert(KeysFollow(Keys, KeyRule::kHasHelp),
                "gpuprov SDK: every config key needs one line of help");
  static_assert(KeysFollow(Keys, KeyRule::kTypeKnown),
                "gpuprov SDK: a config key's type must be GPUPROV_CONFIG_STRING, _INTEGER, "
                "_BOOLEAN, _STRING_LIST or _TABLE");
  static_assert(KeysFollow(Keys, KeyRule::kUnique),
                "gpuprov SDK: a config key is declared twice");
  static_assert(KeysFollow(Keys, KeyRule::kMembersPlain),
                "gpuprov SDK: a table key (TableKey) needs members, each a StringKey, "
                "IntegerKey, BooleanKey or StringListKey with a valid name, help and no twin");
  static_assert(KeysFollow(Keys, KeyRule::kRenamesDeclared),
                "gpuprov SDK: RenamedKey(former, current) needs `current` declared in the same "
                "table (or \"table.member\" a member of a declared table), and not as a former "
                "name itself");
  return true;
}

/// Number of keys in a table given to GPUPROV_DRIVER.
template <class Table>
inline constexpr size_t kKeyCount = std::extent_v<std::remove_cvref_t<Table>>;

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
    // Every member this SDK reads is one of ABI 1.0's; a smaller struct is refused, a larger
    // one (a newer host) is read up to what this SDK knows.
    if (input == nullptr || input->struct_size < sizeof(uint32_t) ||
        !GPUPROV_SDK_REACHES(input, gpuprov_type_init_input, config_host_owned)) {
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
  if constexpr (HasListResources<T>) v.list_resources = &Op<T, &T::ListResources>;
  if constexpr (HasDeleteResource<T>) v.delete_resource = &Op<T, &T::DeleteResource>;
  if constexpr (HasOpenPeerPorts<T>) v.open_peer_ports = &Op<T, &T::OpenPeerPorts>;
  return v;
}

template <class T, const auto& Keys, int MinorRequired>
const gpuprov_type_driver_descriptor* Descriptor() noexcept {
  static_assert(MinorRequired >= 0 && MinorRequired <= GPUPROV_ABI_VERSION_MINOR,
                "gpuprov SDK: the ABI minor a driver requires (GPUPROV_DRIVER's third argument) "
                "must be from 0 to this SDK's GPUPROV_ABI_VERSION_MINOR");
  static_assert(CheckConfigKeys<Keys>());
  static_assert(CheckOpSignatures<T>());
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
  static_assert(!(T::kCapabilities & GPUPROV_CAP_CLUSTER) || HasOpenPeerPorts<T>,
                "GPUPROV_CAP_CLUSTER needs: std::string OpenPeerPorts(const std::string& "
                "request_json)");
  static_assert(HasListResources<T> == HasDeleteResource<T>,
                "gpuprov SDK: ListResources and DeleteResource come together (`gpuprov gc` lists "
                "with one and deletes with the other)");
  static constexpr gpuprov_drv_vtable kVtable = MakeVtable<T>();
  constexpr size_t kCount = kKeyCount<decltype(Keys)>;
  static constexpr std::array<const gpuprov_type_config_key*, kCount> kKeyPointers =
      KeyPointers<Keys>(std::make_index_sequence<kCount>());
  // A host of ABI 1.2 or older refuses a capability bit it does not know (the 1.5 bits).
  constexpr int kMinorOfCapabilities =
      (T::kCapabilities & (GPUPROV_CAP_SPOT | GPUPROV_CAP_CLUSTER)) ? 3 : 0;
  constexpr int kMinor =
      std::max({MinorRequired, MinorNeededBy(Keys), kMinorOfCapabilities});
  static constexpr gpuprov_type_driver_descriptor kDescriptor = {
      sizeof(gpuprov_type_driver_descriptor),
      GPUPROV_DRIVER_MAGIC,
      GPUPROV_ABI_VERSION_MAJOR,
      static_cast<uint16_t>(kMinor),
      T::kName,
      T::kVersion,
      T::kDescription,
      T::kCapabilities,
      &kVtable,
      kCount == 0 ? nullptr : kKeyPointers.data(),
      kCount,
      NodeAddressOf<T>(),
  };
  return &kDescriptor;
}

}  // namespace internal
}  // namespace gpuprov::sdk

/// Exports gpuprov_driver_entry for the driver class T. Use once per driver, at namespace scope:
///   GPUPROV_DRIVER(T)                      declares no config keys; needs any ABI 1.x host
///   GPUPROV_DRIVER(T, kKeys)               declares its [clouds.NAME] keys (a static table)
///   GPUPROV_DRIVER(T, kKeys, MINOR)        and needs a host of ABI 1.MINOR or newer
/// kKeys is a namespace-scope `constexpr gpuprov_type_config_key kKeys[]`, or
/// gpuprov::sdk::kNoConfigKeys.
#define GPUPROV_DRIVER(...)                                                                   \
  GPUPROV_SDK_DRIVER_PICK(__VA_ARGS__, GPUPROV_SDK_DRIVER_3, GPUPROV_SDK_DRIVER_2,            \
                          GPUPROV_SDK_DRIVER_1, )                                             \
  (__VA_ARGS__)
#define GPUPROV_SDK_DRIVER_PICK(_1, _2, _3, NAME, ...) NAME
#define GPUPROV_SDK_DRIVER_1(T) GPUPROV_SDK_DRIVER_3(T, ::gpuprov::sdk::kNoConfigKeys, 0)
#define GPUPROV_SDK_DRIVER_2(T, KEYS) GPUPROV_SDK_DRIVER_3(T, KEYS, 0)
#define GPUPROV_SDK_DRIVER_3(T, KEYS, MINOR)                                                  \
  extern "C" __attribute__((visibility("default"))) const gpuprov_type_driver_descriptor*     \
  gpuprov_driver_entry(void) {                                                                \
    return ::gpuprov::sdk::internal::Descriptor<T, KEYS, MINOR>();                            \
  }
