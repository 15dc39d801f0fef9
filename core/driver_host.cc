#include "driver_host.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "console.h"
#include "file_util.h"
#include "paths.h"

#ifndef GPUPROV_INSTALL_LIBDIR
#define GPUPROV_INSTALL_LIBDIR "lib"
#endif
#ifndef GPUPROV_INSTALL_DRIVER_DIR
#define GPUPROV_INSTALL_DRIVER_DIR "/usr/local/lib/gpuprov/drivers"
#endif

namespace fs = std::filesystem;

namespace gpuprov {
namespace {

/// \a json for a debug line: string values longer than 160 bytes (the boot script in a create
/// request) become "<N bytes>". Text that is not a JSON object is returned as is.
std::string ElideLongStrings(const std::string& json) {
  constexpr size_t kMax = 160;
  if (json.size() <= kMax) return json;
  try {
    Poco::JSON::Parser parser;
    Poco::JSON::Object::Ptr o = parser.parse(json).extract<Poco::JSON::Object::Ptr>();
    std::vector<std::pair<std::string, size_t>> long_values;
    for (const auto& [key, value] : *o) {
      if (value.isString() && value.extract<std::string>().size() > kMax) {
        long_values.emplace_back(key, value.extract<std::string>().size());
      }
    }
    if (long_values.empty()) return json;
    for (const auto& [key, size] : long_values) o->set(key, "<" + std::to_string(size) + " bytes>");
    std::ostringstream out;
    o->stringify(out);
    return out.str();
  } catch (const Poco::Exception&) {
    return json;
  }
}

constexpr char kFilePrefix[] = "libgpuprov-driver-";
constexpr char kFileSuffix[] = ".so";

std::string AbiString(unsigned major, unsigned minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

bool ValidDriverName(const char* name) {
  if (name == nullptr || *name == '\0') return false;
  for (const char* p = name; *p; ++p) {
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-')) {
      return false;
    }
  }
  return std::strlen(name) <= 64;
}

/// The name part of libgpuprov-driver-<name>.so, or "" when the file is not named like a driver.
std::string NameFromFile(const std::string& file_name) {
  const size_t prefix = sizeof(kFilePrefix) - 1, suffix = sizeof(kFileSuffix) - 1;
  if (file_name.size() <= prefix + suffix) return "";
  if (file_name.compare(0, prefix, kFilePrefix) != 0) return "";
  if (file_name.compare(file_name.size() - suffix, suffix, kFileSuffix) != 0) return "";
  return file_name.substr(prefix, file_name.size() - prefix - suffix);
}

struct LoadedFile {
  DriverInfo info;
  std::shared_ptr<boost::dll::shared_library> library;
  gpuprov_drv_vtable vtable{};
  const gpuprov_type_driver_descriptor* descriptor = nullptr;
};

/// Loads one file and reads its descriptor. Never throws: problems land in info.problem.
LoadedFile LoadFile(const std::string& path, const std::string& origin) {
  LoadedFile out;
  out.info.path = path;
  out.info.origin = origin;
  out.info.name = NameFromFile(fs::path(path).filename().string());
  try {
    out.library = std::make_shared<boost::dll::shared_library>(
        path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    out.info.problem = "cannot load: " + LoaderReason(path, e.what());
    return out;
  }
  if (!out.library->has(GPUPROV_DRIVER_ENTRY_SYMBOL)) {
    out.info.problem = std::string("missing entry symbol ") + GPUPROV_DRIVER_ENTRY_SYMBOL +
                       ": not a gpuprov driver";
    return out;
  }
  auto entry = out.library->get<const gpuprov_type_driver_descriptor*()>(
      GPUPROV_DRIVER_ENTRY_SYMBOL);
  const gpuprov_type_driver_descriptor* descriptor = entry();
  if (descriptor == nullptr) {
    out.info.problem = "entry returned no descriptor";
    return out;
  }
  const std::string file_name = out.info.name;
  if (ValidateDescriptor(descriptor, &out.info, &out.vtable) == nullptr) return out;
  if (!file_name.empty() && out.info.name != file_name) {
    out.info.problem = "file is named for '" + file_name + "' but the driver calls itself '" +
                       out.info.name + "'; rename the file to " + DriverFileName(out.info.name);
    return out;
  }
  out.descriptor = descriptor;
  return out;
}

void HostLog(void* ctx, gpuprov_type_log_level level, const char* msg, size_t len) {
  auto* cb = static_cast<DriverCallbacks*>(ctx);
  std::string text(msg == nullptr ? "" : std::string(msg, len));
  if (cb->log) cb->log(level, text);
}

void HostProgress(void* ctx, const char* msg, size_t len) {
  auto* cb = static_cast<DriverCallbacks*>(ctx);
  std::string text(msg == nullptr ? "" : std::string(msg, len));
  if (cb->progress) cb->progress(text);
}

bool HostCancelled(void* ctx) {
  auto* cb = static_cast<DriverCallbacks*>(ctx);
  return cb->cancelled ? cb->cancelled() : false;
}

// The descriptor's size at each minor: a 1.0 descriptor ends before config_keys, a 1.1 to 1.3
// one before node_address.
constexpr size_t kDescriptorSize10 = offsetof(gpuprov_type_driver_descriptor, config_keys);
constexpr size_t kDescriptorSize11 = offsetof(gpuprov_type_driver_descriptor, node_address);

bool ValidConfigKeyName(const char* name) {
  if (name == nullptr || *name == '\0' || std::strlen(name) > 64) return false;
  for (const char* p = name; *p; ++p) {
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) return false;
  }
  return true;
}

/// One declared key read by its own struct_size (members and replaced_by only when it reaches
/// them: a key of ABI 1.1 or 1.2 has neither); "" or the problem, naming \a where.
std::string ReadConfigKey(const gpuprov_type_config_key* raw, const std::string& where,
                          bool is_member, DriverConfigKey* key) {
  if (raw == nullptr ||
      raw->struct_size < offsetof(gpuprov_type_config_key, help) + sizeof(raw->help)) {
    return where + " is missing or smaller than ABI 1.1's";
  }
  if (!ValidConfigKeyName(raw->name)) {
    return where + ": the name is missing or not [a-z0-9_]+ (at most 64 bytes)";
  }
  key->name = raw->name;
  const auto reaches = [raw](size_t offset, size_t width) {
    return offset + width <= raw->struct_size;
  };
  const char* replaced_by =
      reaches(offsetof(gpuprov_type_config_key, replaced_by), sizeof(raw->replaced_by))
          ? raw->replaced_by
          : nullptr;
  if (replaced_by != nullptr) {
    if (is_member) return where + " is a former name, which a table member cannot be";
    const std::string target = replaced_by;
    const size_t dot = target.find('.');
    if (!ValidConfigKeyName(target.substr(0, dot).c_str()) ||
        (dot != std::string::npos && !ValidConfigKeyName(target.substr(dot + 1).c_str()))) {
      return "config key '" + key->name +
             "' is replaced by a name that is not [a-z0-9_]+ or [a-z0-9_]+.[a-z0-9_]+";
    }
    key->replaced_by = replaced_by;
    return "";
  }
  key->type = raw->type;
  key->help = raw->help != nullptr ? raw->help : "";
  if (key->type < GPUPROV_CONFIG_STRING || key->type > GPUPROV_CONFIG_TABLE) {
    return "config key '" + key->name + "' has unknown type " + std::to_string(key->type);
  }
  if (key->type != GPUPROV_CONFIG_TABLE) return "";
  if (is_member) return where + " is a table, which a table member cannot be";
  const bool has_members =
      reaches(offsetof(gpuprov_type_config_key, member_count), sizeof(raw->member_count)) &&
      raw->members != nullptr && raw->member_count > 0;
  if (!has_members) return "config key '" + key->name + "' is a table without members";
  constexpr size_t kMaxMembers = 64;
  if (raw->member_count > kMaxMembers) {
    return "config key '" + key->name + "' has more than " + std::to_string(kMaxMembers) +
           " members";
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < raw->member_count; ++i) {
    DriverConfigKey member;
    std::string problem = ReadConfigKey(
        raw->members[i], "config key '" + key->name + "' member #" + std::to_string(i + 1), true,
        &member);
    if (!problem.empty()) return problem;
    if (!seen.insert(member.name).second) {
      return "config key '" + key->name + "' has member '" + member.name + "' twice";
    }
    key->members.push_back(std::move(member));
  }
  return "";
}

/// The declared config keys, each read by its own struct_size; \a problem names the first bad
/// one (the SDK checks the same rules at compile time, a C driver only here).
std::vector<DriverConfigKey> ReadConfigKeys(const gpuprov_type_config_key* const* keys,
                                            size_t count, std::string* problem) {
  constexpr size_t kMaxKeys = 256;
  std::vector<DriverConfigKey> out;
  if (count > kMaxKeys) {
    *problem = "declares " + std::to_string(count) + " config keys, more than " +
               std::to_string(kMaxKeys);
    return out;
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < count; ++i) {
    DriverConfigKey key;
    *problem = ReadConfigKey(keys[i], "config key #" + std::to_string(i + 1), false, &key);
    if (!problem->empty()) return out;
    if (key.name == "endpoint") {
      *problem = "declares config key 'endpoint', which is the host's own";
      return out;
    }
    if (!seen.insert(key.name).second) {
      *problem = "declares config key '" + key.name + "' twice";
      return out;
    }
    out.push_back(std::move(key));
  }
  for (const auto& key : out) {
    if (key.replaced_by.empty()) continue;
    const size_t dot = key.replaced_by.find('.');
    const std::string table = key.replaced_by.substr(0, dot);
    const auto target = std::find_if(out.begin(), out.end(), [&](const DriverConfigKey& k) {
      return k.name == table;
    });
    const std::string member = dot == std::string::npos ? "" : key.replaced_by.substr(dot + 1);
    const bool member_found =
        dot == std::string::npos ||
        (target != out.end() &&
         std::any_of(target->members.begin(), target->members.end(),
                     [&](const DriverConfigKey& m) { return m.name == member; }));
    if (target == out.end() || !target->replaced_by.empty() || !member_found) {
      *problem = "config key '" + key.name + "' is replaced by '" + key.replaced_by +
                 "', which the driver does not declare as a key of its own";
      return out;
    }
  }
  return out;
}

}  // namespace

std::string DriverReadme(const std::string& cloud) {
  const std::string package = "gpuprov-driver-" + cloud;
  std::vector<fs::path> candidates;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path().parent_path() / "share" / "doc" / package / "README.md");
  }
  // Not the configured install prefix: a build tree's gpuprov must not name whatever another
  // install put there (the README of that install's version).
  candidates.push_back(fs::path(GPUPROV_SOURCE_DIR) / "plugins" / cloud / "README.md");
  for (const auto& c : candidates) {
    if (fs::is_regular_file(c, ec)) return c.lexically_normal().string();
  }
  return "the README.md of the " + package + " package";
}

namespace {

std::string HintFor(gpuprov_type_status status, const std::string& driver) {
  switch (status) {
    case GPUPROV_STATUS_AUTH:
      return "check the " + driver + " credentials (environment variables or the cloud CLI's "
             "files; where the driver looks: " + DriverReadme(driver) + ")";
    case GPUPROV_STATUS_CAPACITY:
      return "try another region or GPU type, or try again later";
    case GPUPROV_STATUS_QUOTA:
      return "ask the cloud provider to raise the quota, or request fewer GPUs";
    case GPUPROV_STATUS_TRANSIENT:
      return "the cloud kept failing; try again in a few minutes";
    default:
      return "";
  }
}

}  // namespace

std::string DriverFileName(const std::string& name) {
  return std::string(kFilePrefix) + name + kFileSuffix;
}

const char* DriverOpName(DriverOp op) {
  switch (op) {
    case DriverOp::kCheck: return "check";
    case DriverOp::kOffers: return "offers";
    case DriverOp::kCreate: return "create";
    case DriverOp::kGet: return "get";
    case DriverOp::kList: return "list";
    case DriverOp::kDelete: return "delete_vm";
    case DriverOp::kOpenPorts: return "open_ports";
    case DriverOp::kListResources: return "list_resources";
    case DriverOp::kDeleteResource: return "delete_resource";
    case DriverOp::kOpenPeerPorts: return "open_peer_ports";
  }
  return "?";
}

const char* ConfigTypeName(gpuprov_type_config_type type) {
  switch (type) {
    case GPUPROV_CONFIG_STRING: return "string";
    case GPUPROV_CONFIG_INTEGER: return "integer";
    case GPUPROV_CONFIG_BOOLEAN: return "boolean";
    case GPUPROV_CONFIG_STRING_LIST: return "string list";
    case GPUPROV_CONFIG_TABLE: return "table";
  }
  return "unknown";
}

std::string CapabilitiesToString(uint64_t caps) {
  std::vector<std::string> words;
  if (caps & GPUPROV_CAP_BOOT_CLOUD_INIT) words.push_back("boot:cloud-init");
  if (caps & GPUPROV_CAP_BOOT_STARTUP_SCRIPT) words.push_back("boot:startup-script");
  if (!(caps & (GPUPROV_CAP_BOOT_CLOUD_INIT | GPUPROV_CAP_BOOT_STARTUP_SCRIPT))) {
    words.push_back("boot:none");
  }
  words.push_back(caps & GPUPROV_CAP_OPEN_PORTS ? "open-ports" : "no-open-ports");
  words.push_back(caps & GPUPROV_CAP_HOSTS_KUBERNETES ? "kubernetes" : "no-kubernetes");
  if (caps & GPUPROV_CAP_VM_LIFECYCLE) words.push_back("vm-lifecycle");
  if (caps & GPUPROV_CAP_SPOT) words.push_back("spot");
  if (caps & GPUPROV_CAP_CLUSTER) words.push_back("cluster");
  if (const uint64_t unknown = caps & ~kKnownCapabilities; unknown != 0) {
    std::ostringstream hex;
    hex << std::hex << unknown;
    words.push_back("unknown:0x" + hex.str());
  }
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ",") + w;
  return out;
}

bool KnownNodeAddress(std::string_view value) {
  for (const char* known :
       {GPUPROV_NODE_ADDRESS_EC2, GPUPROV_NODE_ADDRESS_OPENSTACK, GPUPROV_NODE_ADDRESS_GCE,
        GPUPROV_NODE_ADDRESS_DIGITALOCEAN, GPUPROV_NODE_ADDRESS_NEBIUS,
        GPUPROV_NODE_ADDRESS_INTERFACE, GPUPROV_NODE_ADDRESS_NONE}) {
    if (value == known) return true;
  }
  return false;
}

const gpuprov_drv_vtable* ValidateDescriptor(const gpuprov_type_driver_descriptor* raw,
                                             DriverInfo* info, gpuprov_drv_vtable* vtable_copy) {
  const std::string host_abi = AbiString(GPUPROV_ABI_VERSION_MAJOR, GPUPROV_ABI_VERSION_MINOR);
  if (raw->struct_size < offsetof(gpuprov_type_driver_descriptor, abi_minor_required) +
                             sizeof(raw->abi_minor_required)) {
    info->problem = "descriptor of " + std::to_string(raw->struct_size) + " bytes is too small";
    return nullptr;
  }
  if (raw->magic != GPUPROV_DRIVER_MAGIC) {
    info->problem = "descriptor has the wrong magic number: not a gpuprov driver";
    return nullptr;
  }
  info->abi_major = raw->abi_major;
  info->abi_minor_required = raw->abi_minor_required;
  const std::string wanted = AbiString(raw->abi_major, raw->abi_minor_required);
  if (raw->abi_major != GPUPROV_ABI_VERSION_MAJOR) {
    info->problem = "needs driver ABI " + wanted + " but this gpuprov has ABI " + host_abi +
                    " (the major versions must be equal); install a driver built for ABI " +
                    std::to_string(GPUPROV_ABI_VERSION_MAJOR) + ".x";
    return nullptr;
  }
  if (raw->abi_minor_required > GPUPROV_ABI_VERSION_MINOR) {
    info->problem = "needs driver ABI " + wanted + " or newer but this gpuprov has ABI " +
                    host_abi + " (the driver's required minor must be <= the host's); upgrade "
                    "gpuprov";
    return nullptr;
  }
  // A larger descriptor comes from a newer minor whose additions this host need not read (the
  // driver would have required that minor otherwise): the members this host knows are read.
  if (raw->struct_size < kDescriptorSize10) {
    info->problem = "descriptor of " + std::to_string(raw->struct_size) +
                    " bytes is smaller than ABI 1.0's " + std::to_string(kDescriptorSize10);
    return nullptr;
  }
  if (raw->abi_minor_required >= 1 && raw->struct_size < kDescriptorSize11) {
    info->problem = "needs driver ABI " + wanted + " but its descriptor of " +
                    std::to_string(raw->struct_size) + " bytes is smaller than ABI 1.1's " +
                    std::to_string(kDescriptorSize11) + ": rebuild it with the SDK it requires";
    return nullptr;
  }
  gpuprov_type_driver_descriptor d{};
  std::memcpy(&d, raw, std::min<size_t>(raw->struct_size, sizeof(d)));
  if (!ValidDriverName(d.name)) {
    info->problem = "driver name is missing or not [a-z0-9_-]+";
    return nullptr;
  }
  info->name = d.name;
  info->version = d.version != nullptr ? d.version : "";
  info->description = d.description != nullptr ? d.description : "";
  info->capabilities = d.capabilities;
  // Bits this host does not know come from a newer minor: listed (CapabilitiesToString) and
  // ignored, since this host never calls what they promise (driver_abi.h, COMPATIBILITY).
  if (d.vtable == nullptr) {
    info->problem = "descriptor has no function table";
    return nullptr;
  }
  // A larger function table holds functions of a newer minor; this host never calls them.
  if (d.vtable->struct_size < offsetof(gpuprov_drv_vtable, last_error) + sizeof(void*)) {
    info->problem = "function table is too small";
    return nullptr;
  }
  gpuprov_drv_vtable vt{};
  std::memcpy(&vt, d.vtable, std::min<size_t>(d.vtable->struct_size, sizeof(vt)));
  std::vector<std::string> missing;
  if (!vt.init) missing.push_back("init");
  if (!vt.destroy) missing.push_back("destroy");
  if (!vt.last_error) missing.push_back("last_error");
  if (d.capabilities & GPUPROV_CAP_VM_LIFECYCLE) {
    if (!vt.check) missing.push_back("check");
    if (!vt.offers) missing.push_back("offers");
    if (!vt.create) missing.push_back("create");
    if (!vt.get) missing.push_back("get");
    if (!vt.list) missing.push_back("list");
    if (!vt.delete_vm) missing.push_back("delete_vm");
  }
  if ((d.capabilities & GPUPROV_CAP_OPEN_PORTS) && !vt.open_ports) {
    missing.push_back("open_ports");
  }
  // vt is zeroed past the table's struct_size, so a 1.4 or older table has no open_peer_ports.
  if ((d.capabilities & GPUPROV_CAP_CLUSTER) && !vt.open_peer_ports) {
    missing.push_back("open_peer_ports");
  }
  // vt is zeroed past the table's struct_size, so a 1.0 or 1.1 table has neither function.
  if ((vt.list_resources == nullptr) != (vt.delete_resource == nullptr)) {
    missing.push_back(vt.list_resources ? "delete_resource (it has list_resources)"
                                        : "list_resources (it has delete_resource)");
  }
  if (!missing.empty()) {
    std::string names;
    for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
    info->problem = "declares capabilities [" + CapabilitiesToString(d.capabilities) +
                    "] but does not implement: " + names;
    return nullptr;
  }
  // d is zeroed past raw->struct_size, so a 1.0 descriptor reads as declaring no keys.
  if (d.config_keys != nullptr) {
    std::string problem;
    info->config_keys = ReadConfigKeys(d.config_keys, d.config_key_count, &problem);
    if (!problem.empty()) {
      info->config_keys.reset();
      info->problem = problem;
      return nullptr;
    }
  }
  // d is zeroed past raw->struct_size, so a 1.3 or older descriptor names no source; a value
  // this host does not know comes from a newer minor and is ignored like an unknown bit.
  if (d.node_address != nullptr) {
    const std::string_view value(d.node_address, strnlen(d.node_address, 32));
    if (KnownNodeAddress(value)) info->node_address = value;
  }
  info->lists_resources = vt.list_resources != nullptr;
  *vtable_copy = vt;
  return d.vtable;
}

Driver::~Driver() {
  if (handle_ != nullptr && vtable_.destroy != nullptr) vtable_.destroy(handle_);
}

std::string Driver::Call(DriverOp op, const std::string& request_json) {
  gpuprov_drv_op_fn fn = nullptr;
  switch (op) {
    case DriverOp::kCheck: fn = vtable_.check; break;
    case DriverOp::kOffers: fn = vtable_.offers; break;
    case DriverOp::kCreate: fn = vtable_.create; break;
    case DriverOp::kGet: fn = vtable_.get; break;
    case DriverOp::kList: fn = vtable_.list; break;
    case DriverOp::kDelete: fn = vtable_.delete_vm; break;
    case DriverOp::kOpenPorts: fn = vtable_.open_ports; break;
    case DriverOp::kListResources: fn = vtable_.list_resources; break;
    case DriverOp::kDeleteResource: fn = vtable_.delete_resource; break;
    case DriverOp::kOpenPeerPorts: fn = vtable_.open_peer_ports; break;
  }
  if (fn == nullptr) {
    throw DriverCallError(GPUPROV_STATUS_UNSUPPORTED,
                          "the " + info_.name + " driver does not implement " + DriverOpName(op),
                          "");
  }
  Console::Get().Debug("driver " + info_.name + ": " + DriverOpName(op) + " " +
                       ElideLongStrings(request_json));
  gpuprov_type_json result{nullptr, 0};
  gpuprov_type_status status =
      fn(handle_, gpuprov_type_json{request_json.data(), request_json.size()}, &result);
  if (status != GPUPROV_STATUS_OK) {
    const char* err = vtable_.last_error(handle_);
    std::string message = (err != nullptr && *err) ? err : "failed without a message";
    throw DriverCallError(status, info_.name + ": " + message, HintFor(status, info_.name));
  }
  std::string out = result.data != nullptr ? std::string(result.data, result.len) : "{}";
  Console::Get().Debug("driver " + info_.name + ": " + DriverOpName(op) + " -> " + out);
  return out;
}

DriverHost::DriverHost(std::vector<DriverSearchDir> search_path)
    : search_path_(std::move(search_path)) {}

std::vector<DriverSearchDir> DriverHost::DefaultSearchPath(const std::string& driver_path_flag,
                                                           const std::string& home_dir) {
  std::vector<DriverSearchDir> dirs;
  auto add_list = [&](const std::string& list, const std::string& origin) {
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ':')) {
      if (!item.empty()) dirs.push_back({item, origin});
    }
  };
  add_list(driver_path_flag, "--driver-path");
  if (const char* env = std::getenv("GPUPROV_DRIVER_PATH")) add_list(env, "GPUPROV_DRIVER_PATH");
  if (!home_dir.empty()) dirs.push_back({(fs::path(home_dir) / "drivers").string(), "user"});
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // <prefix>/bin/gpuprov finds <prefix>/<libdir>/gpuprov/drivers wherever the prefix was
    // installed to (cmake --install --prefix, an unpacked .deb); the build tree uses lib/.
    for (const char* libdir : {GPUPROV_INSTALL_LIBDIR, "lib"}) {
      if (fs::path(libdir).is_absolute()) continue;
      dirs.push_back({(exe.parent_path().parent_path() / libdir / "gpuprov" / "drivers")
                          .lexically_normal().string(),
                      "next to gpuprov"});
    }
  }
  dirs.push_back({GPUPROV_INSTALL_DRIVER_DIR, "install prefix"});
  // The same folder twice is searched once, at its first place.
  std::vector<DriverSearchDir> unique;
  std::set<std::string> seen;
  for (auto& d : dirs) {
    std::string key = fs::weakly_canonical(d.path, ec).string();
    if (ec) key = d.path;
    if (seen.insert(key).second) unique.push_back(std::move(d));
  }
  return unique;
}

namespace {

// 2: config keys (ABI 1.1); 3: lists_resources (1.2); 4: key members and former names (1.3)
constexpr int kListCacheVersion = 5;

/// The identity of a driver file for the list cache: its size and mtime in nanoseconds.
std::string FileStamp(const fs::path& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ino);
}

Poco::JSON::Array::Ptr ConfigKeysToJson(const std::vector<DriverConfigKey>& keys) {
  Poco::JSON::Array::Ptr out = new Poco::JSON::Array;
  for (const auto& k : keys) {
    Poco::JSON::Object::Ptr key = new Poco::JSON::Object;
    key->set("name", k.name);
    key->set("type", static_cast<int>(k.type));
    key->set("help", k.help);
    if (!k.replaced_by.empty()) key->set("replaced_by", k.replaced_by);
    if (!k.members.empty()) key->set("members", ConfigKeysToJson(k.members));
    out->add(key);
  }
  return out;
}

std::vector<DriverConfigKey> ConfigKeysFromJson(const Poco::JSON::Array::Ptr& keys) {
  std::vector<DriverConfigKey> out;
  for (size_t i = 0; i < keys->size(); ++i) {
    auto key = keys->getObject(static_cast<unsigned>(i));
    DriverConfigKey k{key->getValue<std::string>("name"), key->getValue<int>("type"),
                      key->getValue<std::string>("help"),
                      key->optValue<std::string>("replaced_by", "")};
    if (auto members = key->getArray("members"); !members.isNull()) {
      k.members = ConfigKeysFromJson(members);
    }
    out.push_back(std::move(k));
  }
  return out;
}

Poco::JSON::Object::Ptr InfoToJson(const DriverInfo& info, const std::string& stamp) {
  Poco::JSON::Object::Ptr o = new Poco::JSON::Object;
  o->set("stamp", stamp);
  o->set("name", info.name);
  o->set("version", info.version);
  o->set("description", info.description);
  o->set("abi_major", static_cast<int>(info.abi_major));
  o->set("abi_minor_required", static_cast<int>(info.abi_minor_required));
  o->set("capabilities", static_cast<Poco::UInt64>(info.capabilities));
  o->set("problem", info.problem);
  o->set("lists_resources", info.lists_resources);
  o->set("node_address", info.node_address);
  if (info.config_keys) o->set("config_keys", ConfigKeysToJson(*info.config_keys));
  return o;
}

/// A DriverInfo from InfoToJson's object (path and origin are not in it).
DriverInfo InfoFromJson(const Poco::JSON::Object::Ptr& o) {
  DriverInfo info;
  info.name = o->getValue<std::string>("name");
  info.version = o->getValue<std::string>("version");
  info.description = o->getValue<std::string>("description");
  info.abi_major = static_cast<uint16_t>(o->getValue<int>("abi_major"));
  info.abi_minor_required = static_cast<uint16_t>(o->getValue<int>("abi_minor_required"));
  info.capabilities = o->getValue<Poco::UInt64>("capabilities");
  info.problem = o->getValue<std::string>("problem");
  info.lists_resources = o->optValue<bool>("lists_resources", false);
  info.node_address = o->optValue<std::string>("node_address", "");
  if (auto keys = o->getArray("config_keys"); !keys.isNull()) {
    info.config_keys = ConfigKeysFromJson(keys);
  }
  return info;
}

/// The list cache: absolute path -> (stamp, info).
using ListCache = std::map<std::string, std::pair<std::string, DriverInfo>>;

/// The list cache from its file; empty when it is missing, unreadable or of another version.
ListCache ReadListCache(const std::string& path) {
  ListCache out;
  if (path.empty()) return out;
  try {
    std::optional<std::string> text = ReadFileIfExists(path, kCacheFileKind);
    if (!text) return out;
    Poco::JSON::Parser parser;
    auto root = parser.parse(*text).extract<Poco::JSON::Object::Ptr>();
    if (root->optValue<int>("version", 0) != kListCacheVersion) return out;
    auto files = root->getObject("files");
    if (files.isNull()) return out;
    for (const auto& [file, value] : *files) {
      auto o = value.extract<Poco::JSON::Object::Ptr>();
      DriverInfo info = InfoFromJson(o);
      info.path = file;
      out[file] = {o->getValue<std::string>("stamp"), info};
    }
  } catch (const std::exception&) {
    out.clear();  // a damaged (or refused) cache is rebuilt
  }
  return out;
}

void WriteListCache(const std::string& path,
                    const std::map<std::string, std::pair<std::string, DriverInfo>>& entries) {
  Poco::JSON::Object::Ptr files = new Poco::JSON::Object;
  for (const auto& [file, entry] : entries) files->set(file, InfoToJson(entry.second, entry.first));
  Poco::JSON::Object::Ptr root = new Poco::JSON::Object;
  root->set("version", kListCacheVersion);
  root->set("files", files);
  std::ostringstream text;
  root->stringify(text);
  try {
    EnsureDir(fs::path(path).parent_path());  // 0700, as every folder of $GPUPROV_HOME
    WriteFileAtomic(path, text.str(), 0600);
  } catch (const std::exception& e) {
    Console::Get().Debug(std::string("driver list cache not written: ") + e.what());
  }
}

/// Reads one driver file's descriptor in a child process, so nothing of the file is loaded into
/// this one: a file that aborts or crashes while loading (a second copy of a gRPC driver, whose
/// protobuf registry aborts with "File already exists in database") or hangs is reported
/// broken, and this process never holds two copies of one driver. The child sets
/// GPUPROV_DRIVER_PROBE=1 before it loads the file.
DriverInfo ProbeFile(const std::string& path, const std::string& origin) {
  DriverInfo failed;
  failed.path = path;
  failed.origin = origin;
  failed.name = NameFromFile(fs::path(path).filename().string());
  if (const std::string reason = UnreadableFileReason(path, kDriverFileKind); !reason.empty()) {
    failed.problem = "not loaded: the file " + reason;
    return failed;
  }
  int result_pipe[2], stderr_pipe[2];
  if (pipe2(result_pipe, O_CLOEXEC) != 0) {
    failed.problem = std::string("cannot read its descriptor: pipe: ") + std::strerror(errno);
    return failed;
  }
  if (pipe2(stderr_pipe, O_CLOEXEC) != 0) {
    failed.problem = std::string("cannot read its descriptor: pipe: ") + std::strerror(errno);
    close(result_pipe[0]);
    close(result_pipe[1]);
    return failed;
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    // The child: load, describe, write the JSON, and leave without running any destructor.
    dup2(stderr_pipe[1], STDERR_FILENO);
    setenv("GPUPROV_DRIVER_PROBE", "1", 1);
    std::ostringstream text;
    InfoToJson(LoadFile(path, origin).info, "")->stringify(text);
    const std::string out = text.str();
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = write(result_pipe[1], out.data() + done, out.size() - done);
      if (n <= 0) _exit(3);
      done += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(result_pipe[1]);
  close(stderr_pipe[1]);
  if (pid < 0) {
    close(result_pipe[0]);
    close(stderr_pipe[0]);
    failed.problem = std::string("cannot read its descriptor: fork: ") + std::strerror(errno);
    return failed;
  }
  // Both pipes are drained together (a chatty constructor cannot fill one and block), each
  // kept to 1 MiB, for at most 20 s.
  constexpr size_t kMaxOutput = 1u << 20;
  constexpr auto kTimeout = std::chrono::seconds(20);
  const auto deadline = std::chrono::steady_clock::now() + kTimeout;
  std::string result, errors;
  pollfd fds[2] = {{result_pipe[0], POLLIN, 0}, {stderr_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result, &errors};
  bool timed_out = false;
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    const int ready = poll(fds, 2, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[8192];
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        continue;
      }
      if (sinks[i]->size() < kMaxOutput) sinks[i]->append(buf, static_cast<size_t>(n));
    }
  }
  for (const pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // The last line the file wrote to stderr, if any, says why it died.
  while (!errors.empty() && (errors.back() == '\n' || errors.back() == '\r')) errors.pop_back();
  const std::string last_words =
      errors.empty() ? "" : ": " + errors.substr(errors.find_last_of('\n') + 1, 300);
  if (timed_out) {
    failed.problem = "did not finish loading within " + std::to_string(kTimeout.count()) +
                     " s (its initialisation hangs)" + last_words;
    return failed;
  }
  if (WIFSIGNALED(status)) {
    failed.problem = "crashed while loading (signal " + std::to_string(WTERMSIG(status)) + ", " +
                     strsignal(WTERMSIG(status)) + ")" + last_words +
                     "; a second copy of a driver in one process does this (is another copy of "
                     "it installed under another name?)";
    return failed;
  }
  try {
    Poco::JSON::Parser parser;
    DriverInfo info = InfoFromJson(parser.parse(result).extract<Poco::JSON::Object::Ptr>());
    info.path = path;
    info.origin = origin;
    return info;
  } catch (const std::exception&) {
    failed.problem = "ended while loading (exit status " +
                     std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")" +
                     last_words;
    return failed;
  }
}

/// A driver file described: from the cache when its stamp still matches (`use_cache`), else by
/// reading it in a child process (`probed`). Path and origin are the caller's.
struct Described {
  std::string key;    // the absolute path, the cache's key
  std::string stamp;  // FileStamp(path); empty when the file cannot be stat'ed
  DriverInfo info;
  bool probed = false;
};

Described DescribeFile(const ListCache& cache, bool use_cache, const std::string& path,
                       const std::string& origin) {
  Described d;
  std::error_code ec;
  d.key = fs::absolute(path, ec).lexically_normal().string();
  d.stamp = FileStamp(path);
  auto hit = cache.find(d.key);
  if (use_cache && !d.stamp.empty() && hit != cache.end() && hit->second.first == d.stamp) {
    d.info = hit->second.second;
  } else {
    d.info = ProbeFile(path, origin);
    d.probed = true;
  }
  d.info.path = path;
  d.info.origin = origin;
  return d;
}

}  // namespace

DriverInfo DriverHost::Describe(const std::string& path, const std::string& origin) const {
  ListCache cache = ReadListCache(list_cache_path_);
  const bool use_cache = !list_cache_path_.empty();
  Described d = DescribeFile(cache, use_cache, path, origin);
  if (use_cache && d.probed && !d.stamp.empty()) {
    cache[d.key] = {d.stamp, d.info};
    WriteListCache(list_cache_path_, cache);
  }
  return d.info;
}

std::vector<DriverInfo> DriverHost::ListAll() const {
  std::vector<DriverInfo> out;
  std::map<std::string, std::string> first_path;
  const ListCache cache = ReadListCache(list_cache_path_);
  ListCache fresh;
  bool cache_changed = false;
  for (const auto& dir : search_path_) {
    std::error_code ec;
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(dir.path, ec)) {
      std::string file = entry.path().filename().string();
      if (!NameFromFile(file).empty()) files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    for (const auto& path : files) {
      const std::string file_name = NameFromFile(fs::path(path).filename().string());
      auto [first, inserted] = first_path.emplace(file_name, path);
      if (!inserted) {
        // A later file of a name already found: reported from its path alone, never loaded
        // (a second copy of a gRPC driver aborts the process that loads it).
        DriverInfo shadowed;
        shadowed.name = file_name;
        shadowed.path = path;
        shadowed.origin = dir.origin;
        shadowed.shadowed_by = first->second;
        out.push_back(std::move(shadowed));
        continue;
      }
      Described d = DescribeFile(cache, !list_cache_path_.empty(), path, dir.origin);
      cache_changed |= d.probed;
      if (!d.stamp.empty()) fresh[d.key] = {d.stamp, d.info};
      out.push_back(std::move(d.info));
    }
  }
  if (!list_cache_path_.empty() && (cache_changed || fresh.size() != cache.size())) {
    WriteListCache(list_cache_path_, fresh);
  }
  return out;
}

DriverInfo DriverHost::Find(const std::string& name) const {
  std::string searched;
  for (const auto& dir : search_path_) {
    fs::path path = fs::path(dir.path) / DriverFileName(name);
    std::error_code ec;
    if (fs::exists(path, ec)) return Describe(path.string(), dir.origin);
    searched += "\n  " + dir.path + " (" + dir.origin + ")";
  }
  throw UsageError("no driver for cloud '" + name + "': " + DriverFileName(name) +
                       " is not in any of:" + searched,
                   "run `gpuprov drivers` to see the installed drivers, or install the "
                   "gpuprov-driver-" + name + " package");
}

void DriverHost::AddInMemory(const gpuprov_type_driver_descriptor* descriptor) {
  in_memory_.push_back(descriptor);
}

std::vector<std::string> DriverHost::InMemoryNames() const {
  std::vector<std::string> names;
  for (const gpuprov_type_driver_descriptor* descriptor : in_memory_) {
    if (descriptor->name != nullptr) names.emplace_back(descriptor->name);
  }
  return names;
}

LoadedDriver DriverHost::Load(const std::string& name) const {
  for (const gpuprov_type_driver_descriptor* descriptor : in_memory_) {
    if (descriptor->name == nullptr || name != descriptor->name) continue;
    LoadedDriver loaded;
    gpuprov_drv_vtable vtable{};
    if (ValidateDescriptor(descriptor, &loaded.info_, &vtable) == nullptr) {
      throw Error("the in-memory " + name + " driver is broken: " + loaded.info_.problem, "");
    }
    loaded.descriptor_ = descriptor;
    loaded.info_.path = "(in memory)";
    loaded.info_.origin = "in memory";
    return loaded;
  }
  for (const auto& dir : search_path_) {
    fs::path path = fs::path(dir.path) / DriverFileName(name);
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    // Described first (from the cache, or in a child process): a file that is broken, or that
    // would abort this process while loading, is refused without being loaded here.
    const DriverInfo described = Describe(path.string(), dir.origin);
    LoadedFile file;
    if (described.problem.empty()) file = LoadFile(path.string(), dir.origin);
    const DriverInfo& info = described.problem.empty() ? file.info : described;
    if (!info.problem.empty()) {
      throw Error("the " + name + " driver at " + info.path + " is broken: " + info.problem,
                  "run `gpuprov drivers` for details; reinstall gpuprov-driver-" + name);
    }
    LoadedDriver loaded;
    loaded.library_ = file.library;
    loaded.descriptor_ = file.descriptor;
    loaded.info_ = file.info;
    return loaded;
  }
  Find(name);  // throws the "no driver" error with the search path
  throw Error("no driver for cloud '" + name + "'");
}

std::unique_ptr<Driver> DriverHost::Open(const LoadedDriver& loaded,
                                         const std::string& config_json,
                                         DriverCallbacks callbacks) {
  std::unique_ptr<Driver> driver =
      OpenDescriptor(loaded.descriptor_, config_json, std::move(callbacks));
  driver->library_ = loaded.library_;
  driver->info_ = loaded.info_;
  return driver;
}

std::unique_ptr<Driver> DriverHost::Open(const std::string& name, const std::string& config_json,
                                         DriverCallbacks callbacks) const {
  return Open(Load(name), config_json, std::move(callbacks));
}

std::unique_ptr<Driver> DriverHost::OpenDescriptor(const gpuprov_type_driver_descriptor* descriptor,
                                                   const std::string& config_json,
                                                   DriverCallbacks callbacks) {
  std::unique_ptr<Driver> driver(new Driver());
  if (ValidateDescriptor(descriptor, &driver->info_, &driver->vtable_) == nullptr) {
    throw Error("driver '" + driver->info_.name + "' is broken: " + driver->info_.problem, "");
  }
  driver->callbacks_ = std::move(callbacks);
  driver->host_api_.struct_size = sizeof(gpuprov_type_host_api);
  driver->host_api_.host_ctx = &driver->callbacks_;
  driver->host_api_.log = &HostLog;
  driver->host_api_.progress = &HostProgress;
  driver->host_api_.cancelled = &HostCancelled;
  gpuprov_type_init_input input{};
  input.struct_size = sizeof(input);
  input.host = &driver->host_api_;
  input.config_host_owned = gpuprov_type_json{config_json.data(), config_json.size()};
  gpuprov_type_status status = GPUPROV_STATUS_FAILED;
  driver->handle_ = driver->vtable_.init(&input, &status);
  if (driver->handle_ == nullptr) {
    throw Error("the " + driver->info_.name + " driver failed to initialise (out of memory)", "");
  }
  if (status != GPUPROV_STATUS_OK) {
    const char* err = driver->vtable_.last_error(driver->handle_);
    std::string message = err != nullptr ? err : "";
    throw DriverCallError(status, "the " + driver->info_.name + " driver failed to start: " + message,
                          HintFor(status, driver->info_.name));
  }
  return driver;
}

std::string LoaderReason(const std::string& path, const std::string& fallback) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) {
    dlclose(handle);
    return fallback;
  }
  const char* err = dlerror();
  return err != nullptr ? err : fallback;
}

}  // namespace gpuprov
