// The driver host: finds driver files, reads their descriptors without initialising them, checks
// ABI compatibility and promised capabilities, and opens one driver for use.
//
// Discovery order (docs/design.md §5; the first file of a name wins):
//   1. --driver-path DIRS        (colon separated)
//   2. GPUPROV_DRIVER_PATH DIRS  (colon separated)
//   3. $GPUPROV_HOME/drivers     (user-installed drivers)
//   4. <exe>/../lib/gpuprov/drivers  (build tree, or a relocated install)
//   5. <install prefix>/lib/gpuprov/drivers
// A driver file is named libgpuprov-driver-<name>.so and its descriptor's name must be <name>.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "error.h"
#include "gpuprov/driver_abi.h"

namespace boost::dll {
class shared_library;
}

namespace gpuprov {

/// Where the README of \a cloud's driver is on this machine, for error hints: its package's doc
/// folder next to this gpuprov (<prefix>/share/doc/gpuprov-driver-CLOUD/README.md, as the
/// .debs and `cmake --install` put it), else the source tree's plugins/CLOUD/README.md (a build
/// tree), else a sentence naming the package.
std::string DriverReadme(const std::string& cloud);

struct DriverSearchDir {
  std::string path;
  std::string origin;  // "--driver-path", "GPUPROV_DRIVER_PATH", "user", "next to gpuprov", "install prefix"
};

/// One key a driver accepts in its [clouds.NAME] table (ABI 1.1; lists, tables and former
/// names since 1.3).
struct DriverConfigKey {
  std::string name;
  gpuprov_type_config_type type = GPUPROV_CONFIG_STRING;
  std::string help;
  /// Not empty: \a name is a former name of this key, accepted with a warning.
  std::string replaced_by{};
  /// The keys of a GPUPROV_CONFIG_TABLE.
  std::vector<DriverConfigKey> members{};
};

/// "string", "integer", "boolean", "string list", "table".
const char* ConfigTypeName(gpuprov_type_config_type type);

/// Every bit of the capability mask this host knows.
inline constexpr uint64_t kKnownCapabilities =
    GPUPROV_CAP_BOOT_CLOUD_INIT | GPUPROV_CAP_BOOT_STARTUP_SCRIPT | GPUPROV_CAP_OPEN_PORTS |
    GPUPROV_CAP_HOSTS_KUBERNETES | GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_SPOT |
    GPUPROV_CAP_CLUSTER;

/// What `gpuprov drivers` shows for one file: descriptor facts, or why the file is broken.
struct DriverInfo {
  std::string name;  // from the file name until the descriptor is read
  std::string version;
  std::string description;
  std::string path;
  std::string origin;
  uint16_t abi_major = 0;
  uint16_t abi_minor_required = 0;
  uint64_t capabilities = 0;
  /// The [clouds.NAME] keys the driver declares; nullopt when it declares none (every ABI 1.0
  /// driver), and then its table is passed unchecked.
  std::optional<std::vector<DriverConfigKey>> config_keys;
  /// The driver has list_resources and delete_resource (ABI 1.2), so `gpuprov gc` can use it.
  bool lists_resources = false;
  /// How a VM of the cloud learns its public address (ABI 1.4): a GPUPROV_NODE_ADDRESS_* value
  /// (the installer's --public-ip-source); "" when the driver names none this host knows.
  std::string node_address;
  std::string problem;       // empty when the driver is usable
  std::string shadowed_by;   // path of the earlier file of the same name, if any

  bool ok() const { return problem.empty() && shadowed_by.empty(); }
  bool has(uint64_t cap) const { return (capabilities & cap) == cap; }
};

/// Checks a descriptor as read from a driver (copied with its struct_size), filling info or
/// info->problem. Works on in-memory descriptors, so the rules are testable without a .so.
/// Returns the driver's vtable when the driver is usable.
const gpuprov_drv_vtable* ValidateDescriptor(const gpuprov_type_driver_descriptor* raw,
                                             DriverInfo* info, gpuprov_drv_vtable* vtable_copy);

/// True for the GPUPROV_NODE_ADDRESS_* values this host knows.
bool KnownNodeAddress(std::string_view value);

/// "boot:cloud-init,open-ports,kubernetes,vm-lifecycle,cluster": capability bits in words; bits this
/// host does not know (a newer driver's, ignored) as "unknown:0x...".
std::string CapabilitiesToString(uint64_t capabilities);

/// The operations of the vtable, by name.
enum class DriverOp {
  kCheck,
  kOffers,
  kCreate,
  kGet,
  kList,
  kDelete,
  kOpenPorts,
  kListResources,   // ABI 1.2
  kDeleteResource,  // ABI 1.2
  kOpenPeerPorts,   // ABI 1.5, GPUPROV_CAP_CLUSTER
};
const char* DriverOpName(DriverOp op);

/// A failed driver call: the driver's status and message.
class DriverCallError : public Error {
 public:
  DriverCallError(gpuprov_type_status status, std::string message, std::string hint)
      : Error(std::move(message), std::move(hint),
              status == GPUPROV_STATUS_INVALID_INPUT ? kExitUsage
              : status == GPUPROV_STATUS_CANCELLED   ? kExitInterrupted
                                                      : kExitFailure),
        status_(status) {}
  gpuprov_type_status status() const { return status_; }

 private:
  gpuprov_type_status status_;
};

/// Host-side callbacks handed to a driver.
struct DriverCallbacks {
  std::function<void(gpuprov_type_log_level, const std::string&)> log;
  std::function<void(const std::string&)> progress;
  std::function<bool()> cancelled;
};

/// An initialised driver handle. Keeps its library loaded while it lives.
class Driver {
 public:
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  const DriverInfo& info() const { return info_; }
  /// Calls one operation with a JSON request; returns the JSON result or throws
  /// DriverCallError. UNSUPPORTED when the driver has no such function.
  std::string Call(DriverOp op, const std::string& request_json);

 private:
  friend class DriverHost;
  Driver() = default;

  std::shared_ptr<boost::dll::shared_library> library_;  // null for in-memory drivers
  DriverInfo info_;
  gpuprov_drv_vtable vtable_{};
  gpuprov_type_driver* handle_ = nullptr;
  DriverCallbacks callbacks_;
  gpuprov_type_host_api host_api_{};
};

/// A driver file loaded and its descriptor checked, not initialised yet: what a command needs
/// to decide (capabilities, config keys) before DriverHost::Open initialises it, so the file is
/// loaded once. Keeps the library loaded while it lives.
class LoadedDriver {
 public:
  const DriverInfo& info() const { return info_; }

 private:
  friend class DriverHost;
  std::shared_ptr<boost::dll::shared_library> library_;
  const gpuprov_type_driver_descriptor* descriptor_ = nullptr;
  DriverInfo info_;
};

class DriverHost {
 public:
  explicit DriverHost(std::vector<DriverSearchDir> search_path);

  /// The search path of docs/design.md §5 from the flag, the environment and the layout.
  static std::vector<DriverSearchDir> DefaultSearchPath(const std::string& driver_path_flag,
                                                        const std::string& home_dir);

  const std::vector<DriverSearchDir>& search_path() const { return search_path_; }

  /// Every driver file on the search path with its descriptor or problem. Each file's
  /// descriptor is read in a child process (nothing is loaded into this one), calling no driver
  /// function but the entry; a later file of a name already found is shadowed and reported
  /// from its path alone, never loaded. With a cache file, a file whose path, size and mtime
  /// match its cached entry is not loaded at all (GStreamer's registry idea); Load() still
  /// loads and checks for real.
  std::vector<DriverInfo> ListAll() const;

  /// Where ListAll, Find and Load keep descriptor facts between runs
  /// ($GPUPROV_HOME/cache/drivers.json; AppContext::MakeDriverHost sets it).
  void set_list_cache(std::string path) { list_cache_path_ = std::move(path); }

  /// Finds the first file named for `name` and reads its descriptor as ListAll does (cache or
  /// child process); loads nothing into this process. Throws Error naming the search path when
  /// there is none.
  DriverInfo Find(const std::string& name) const;

  /// Finds the file for `name`, reads its descriptor as Find does, and only when that shows no
  /// problem loads it into this process and checks it again. Throws Error naming the search
  /// path when there is none, and naming the file and its problem when it is broken.
  LoadedDriver Load(const std::string& name) const;

  /// A driver given as an in-memory descriptor (tests; a statically linked driver): Load and
  /// Open(name, ...) find it by its descriptor's name before any file on the search path, and
  /// check it as a file's descriptor is checked. ListAll and Find list files only. The
  /// descriptor must outlive the host and what it loads.
  void AddInMemory(const gpuprov_type_driver_descriptor* descriptor);
  /// The names of the drivers added by AddInMemory, in the order added.
  std::vector<std::string> InMemoryNames() const;

  /// Initialises a loaded driver; the file is not searched or loaded again.
  static std::unique_ptr<Driver> Open(const LoadedDriver& loaded, const std::string& config_json,
                                      DriverCallbacks callbacks);

  /// Finds, loads and initialises one driver: Load, then Open.
  std::unique_ptr<Driver> Open(const std::string& name, const std::string& config_json,
                               DriverCallbacks callbacks) const;

  /// Initialises a driver from an in-memory descriptor (tests, statically linked drivers).
  static std::unique_ptr<Driver> OpenDescriptor(const gpuprov_type_driver_descriptor* descriptor,
                                                const std::string& config_json,
                                                DriverCallbacks callbacks);

 private:
  /// One file's descriptor facts: its cache entry when path, size and mtime match, else read
  /// in a child process (and the cache updated).
  DriverInfo Describe(const std::string& path, const std::string& origin) const;

  std::vector<DriverSearchDir> search_path_;
  std::string list_cache_path_;
  std::vector<const gpuprov_type_driver_descriptor*> in_memory_;
};

/// "libgpuprov-driver-<name>.so"
std::string DriverFileName(const std::string& name);

/// Why dlopen refuses \a path, in the loader's own words ("file too short", "undefined symbol:
/// ..."): Boost.DLL resets dlerror() and reports only a generic code, so dlopen is asked once
/// more. \a fallback when it now succeeds.
std::string LoaderReason(const std::string& path, const std::string& fallback);

}  // namespace gpuprov
