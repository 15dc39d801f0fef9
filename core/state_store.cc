#include "state_store.h"

#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <sstream>

#include "error.h"
#include "spec.h"

#ifndef GPUPROV_VERSION
#define GPUPROV_VERSION "unknown"
#endif

namespace gpuprov {
namespace {

constexpr const char* kPhases[] = {"intent", "creating", "running", "installing",
                                   "ready",  "failed",   "deleting"};
constexpr const char* kAccessModes[] = {"none", "direct", "tunnel"};
constexpr const char* kRoutes[] = {"none", "boot", "ssh"};
constexpr const char* kRoles[] = {"", "server", "agent"};

template <std::size_t N>
bool OneOf(const std::string& value, const char* const (&allowed)[N]) {
  return std::find(std::begin(allowed), std::end(allowed), value) != std::end(allowed);
}

template <std::size_t N>
std::string Joined(const char* const (&allowed)[N]) {
  std::string out;
  for (const char* s : allowed) {
    if (!out.empty()) out += "|";
    out += s;
  }
  return out;
}

/// Keeps messages printable: parser errors may quote raw bytes of the file.
std::string Printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  return out;
}

class RecordReader {
 public:
  RecordReader(const std::filesystem::path& path, Poco::JSON::Object::Ptr object)
      : path_(path), object_(std::move(object)) {}

  std::string String(const std::string& key) {
    const Poco::Dynamic::Var v = object_->get(key);
    if (v.isEmpty()) return "";
    if (!v.isString()) throw Corrupt("field '" + key + "' is not a string");
    return v.extract<std::string>();
  }

  int Int(const std::string& key, int fallback, int min, int max) {
    const Poco::Dynamic::Var v = object_->get(key);
    if (v.isEmpty()) return fallback;
    if (!v.isInteger() || v.isBoolean()) throw Corrupt("field '" + key + "' is not an integer");
    const Poco::Int64 n = v.convert<Poco::Int64>();
    if (n < min || n > max) throw Corrupt("field '" + key + "' is out of range");
    return static_cast<int>(n);
  }

  bool Bool(const std::string& key) {
    const Poco::Dynamic::Var v = object_->get(key);
    if (v.isEmpty()) return false;
    if (!v.isBoolean()) throw Corrupt("field '" + key + "' is not true or false");
    return v.extract<bool>();
  }

  std::map<std::string, std::string> StringMap(const std::string& key) {
    std::map<std::string, std::string> out;
    const Poco::Dynamic::Var v = object_->get(key);
    if (v.isEmpty()) return out;
    if (v.type() != typeid(Poco::JSON::Object::Ptr)) {
      throw Corrupt("field '" + key + "' is not an object");
    }
    const Poco::JSON::Object::Ptr map = v.extract<Poco::JSON::Object::Ptr>();
    for (const auto& [k, value] : *map) {
      if (!value.isString()) throw Corrupt("field '" + key + "." + k + "' is not a string");
      out[k] = value.extract<std::string>();
    }
    return out;
  }

  std::vector<int> PortList(const std::string& key) {
    std::vector<int> out;
    const Poco::Dynamic::Var v = object_->get(key);
    if (v.isEmpty()) return out;
    if (v.type() != typeid(Poco::JSON::Array::Ptr)) throw Corrupt("field '" + key + "' is not a list");
    const Poco::JSON::Array::Ptr list = v.extract<Poco::JSON::Array::Ptr>();
    for (size_t i = 0; i < list->size(); ++i) {
      const Poco::Dynamic::Var port = list->get(static_cast<unsigned>(i));
      if (!port.isInteger() || port.isBoolean() || port.convert<Poco::Int64>() < 1 ||
          port.convert<Poco::Int64>() > 65535) {
        throw Corrupt("field '" + key + "' holds something that is not a port");
      }
      out.push_back(port.convert<int>());
    }
    return out;
  }

  std::vector<std::string> StringList(const std::string& key) {
    std::vector<std::string> out;
    const Poco::Dynamic::Var v = object_->get(key);
    if (v.isEmpty()) return out;
    if (v.type() != typeid(Poco::JSON::Array::Ptr)) throw Corrupt("field '" + key + "' is not a list");
    const Poco::JSON::Array::Ptr list = v.extract<Poco::JSON::Array::Ptr>();
    for (size_t i = 0; i < list->size(); ++i) {
      const Poco::Dynamic::Var item = list->get(static_cast<unsigned>(i));
      if (!item.isString()) throw Corrupt("field '" + key + "' holds something that is not a string");
      out.push_back(item.extract<std::string>());
    }
    return out;
  }

  /// A non-negative number; 0 when absent.
  double Number(const std::string& key) {
    const Poco::Dynamic::Var v = object_->get(key);
    if (v.isEmpty()) return 0;
    if (!v.isNumeric() || v.isBoolean() || v.convert<double>() < 0) {
      throw Corrupt("field '" + key + "' is not a number of 0 or more");
    }
    return v.convert<double>();
  }

  std::map<std::string, double> NumberMap(const std::string& key) {
    std::map<std::string, double> out;
    const Poco::Dynamic::Var v = object_->get(key);
    if (v.isEmpty()) return out;
    if (v.type() != typeid(Poco::JSON::Object::Ptr)) {
      throw Corrupt("field '" + key + "' is not an object");
    }
    const Poco::JSON::Object::Ptr map = v.extract<Poco::JSON::Object::Ptr>();
    for (const auto& [k, value] : *map) {
      if (!value.isNumeric() || value.isBoolean()) {
        throw Corrupt("field '" + key + "." + k + "' is not a number");
      }
      out[k] = value.convert<double>();
    }
    return out;
  }

  Error Corrupt(const std::string& why) const { return CorruptRecord(path_, why); }

  static Error CorruptRecord(const std::filesystem::path& path, const std::string& why) {
    return Error("state file '" + path.string() + "' is corrupt: " + why,
                 "gpuprov leaves it as is; look at it, fix or move it away, then run the "
                 "command again");
  }

 private:
  std::filesystem::path path_;
  Poco::JSON::Object::Ptr object_;
};

VmRecord ParseRecord(const std::filesystem::path& path, const std::string& text,
                     const std::string& expected_name) {
  Poco::JSON::Object::Ptr object;
  try {
    Poco::JSON::Parser parser;
    const Poco::Dynamic::Var root = parser.parse(text);
    if (root.type() != typeid(Poco::JSON::Object::Ptr)) {
      throw RecordReader::CorruptRecord(path, "it is not a JSON object");
    }
    object = root.extract<Poco::JSON::Object::Ptr>();
  } catch (const Poco::Exception& e) {
    throw RecordReader::CorruptRecord(path, "not valid JSON (" + Printable(e.displayText()) + ")");
  }
  RecordReader r(path, object);

  const Poco::Dynamic::Var version = object->get("version");
  if (version.isEmpty() || !version.isInteger() || version.isBoolean()) {
    throw r.Corrupt("it has no integer 'version'");
  }
  const Poco::Int64 v = version.convert<Poco::Int64>();
  if (v < 1) throw r.Corrupt("'version' must be 1 or more");
  if (v > kStateRecordVersion) {
    std::string writer;
    try {
      writer = r.String("gpuprov_version");
    } catch (const Error&) {
    }
    const std::string needed = writer.empty()
                                   ? "a gpuprov that reads record version " + std::to_string(v)
                                   : "gpuprov " + writer + " or newer";
    throw Error("state file '" + path.string() + "' has record version " + std::to_string(v) +
                    (writer.empty() ? "" : " (written by gpuprov " + Printable(writer) + ")") +
                    "; this gpuprov (" GPUPROV_VERSION ") reads up to version " +
                    std::to_string(kStateRecordVersion) + ", so " + Printable(needed) +
                    " is needed",
                "upgrade to " + Printable(needed) + "; gpuprov leaves the file as is");
  }

  VmRecord record;
  record.version = static_cast<int>(v);
  record.name = r.String("name");
  if (record.name != expected_name) {
    throw r.Corrupt("it names VM '" + Printable(record.name) + "', not '" + expected_name + "'");
  }
  record.cloud = r.String("cloud");
  record.region = r.String("region");
  record.phase = r.String("phase");
  record.vm_id = r.String("vm_id");
  record.public_ip = r.String("public_ip");
  record.ssh_user = r.String("ssh_user");
  record.image = r.String("image");
  record.instance_type = r.String("instance_type");
  record.gpus = r.String("gpus");
  record.driver_file = r.String("driver_file");
  record.ssh_port = r.Int("ssh_port", 22, 0, 65535);
  record.kubernetes = r.Bool("kubernetes");
  record.access_mode = r.String("access_mode");
  record.route = r.String("route");
  if (record.route.empty()) record.route = "none";
  record.route_reason = r.String("route_reason");
  record.disk_gb = r.Int("disk_gb", 0, 0, 1000000);
  record.price_per_hour = r.Number("price_per_hour");
  record.spot = r.Bool("spot");
  record.tags = r.StringMap("tags");
  record.open_ports = r.PortList("open_ports");
  record.allow_from = r.StringList("allow_from");
  record.allow_from_ports = r.PortList("allow_from_ports");
  record.kubeconfig = r.String("kubeconfig");
  record.probe = r.StringMap("probe");
  record.phase_seconds = r.NumberMap("phase_seconds");
  record.created_at = r.String("created_at");
  record.updated_at = r.String("updated_at");
  record.last_error = r.String("last_error");
  record.extra = r.StringMap("extra");
  record.ttl_deadline = r.String("ttl_deadline");
  record.idle_ttl_seconds = r.Int("idle_ttl_seconds", 0, 0, 365 * 86400);
  record.powered_off_cost = r.String("powered_off_cost");
  record.cluster = r.String("cluster");
  record.role = r.String("role");
  record.node_index = r.Int("node_index", 0, 0, 1000000);
  record.private_ip = r.String("private_ip");
  record.cluster_nodes = r.Int("cluster_nodes", 0, 0, 1000000);
  return record;
}

std::string SerializeRecord(const VmRecord& record) {
  Poco::JSON::Object object(Poco::JSON_PRESERVE_KEY_ORDER);
  object.set("version", record.version);
  object.set("gpuprov_version", std::string(GPUPROV_VERSION));
  object.set("name", record.name);
  object.set("cloud", record.cloud);
  object.set("region", record.region);
  object.set("phase", record.phase);
  object.set("vm_id", record.vm_id);
  object.set("public_ip", record.public_ip);
  object.set("ssh_user", record.ssh_user);
  object.set("ssh_port", record.ssh_port);
  object.set("image", record.image);
  object.set("instance_type", record.instance_type);
  object.set("gpus", record.gpus);
  object.set("driver_file", record.driver_file);
  object.set("kubernetes", record.kubernetes);
  object.set("access_mode", record.access_mode);
  object.set("route", record.route);
  object.set("route_reason", record.route_reason);
  object.set("disk_gb", record.disk_gb);
  if (record.price_per_hour > 0) object.set("price_per_hour", record.price_per_hour);
  if (record.spot) object.set("spot", true);
  Poco::JSON::Object tags(Poco::JSON_PRESERVE_KEY_ORDER);
  for (const auto& [key, value] : record.tags) tags.set(key, value);
  object.set("tags", tags);
  Poco::JSON::Array open_ports;
  for (int port : record.open_ports) open_ports.add(port);
  object.set("open_ports", open_ports);
  Poco::JSON::Array allow_from, allow_from_ports;
  for (const auto& cidr : record.allow_from) allow_from.add(cidr);
  for (int port : record.allow_from_ports) allow_from_ports.add(port);
  object.set("allow_from", allow_from);
  object.set("allow_from_ports", allow_from_ports);
  object.set("kubeconfig", record.kubeconfig);
  Poco::JSON::Object probe(Poco::JSON_PRESERVE_KEY_ORDER);
  for (const auto& [key, value] : record.probe) probe.set(key, value);
  object.set("probe", probe);
  Poco::JSON::Object phase_seconds(Poco::JSON_PRESERVE_KEY_ORDER);
  for (const auto& [key, value] : record.phase_seconds) phase_seconds.set(key, value);
  object.set("phase_seconds", phase_seconds);
  object.set("created_at", record.created_at);
  object.set("updated_at", record.updated_at);
  object.set("last_error", record.last_error);
  Poco::JSON::Object extra(Poco::JSON_PRESERVE_KEY_ORDER);
  for (const auto& [key, value] : record.extra) extra.set(key, value);
  object.set("extra", extra);
  if (!record.ttl_deadline.empty()) object.set("ttl_deadline", record.ttl_deadline);
  if (record.idle_ttl_seconds > 0) object.set("idle_ttl_seconds", record.idle_ttl_seconds);
  if (!record.powered_off_cost.empty()) object.set("powered_off_cost", record.powered_off_cost);
  // Cluster fields only on cluster nodes, so a single VM's record reads as before.
  if (!record.cluster.empty()) {
    object.set("cluster", record.cluster);
    object.set("role", record.role);
    object.set("node_index", record.node_index);
    object.set("private_ip", record.private_ip);
    if (record.cluster_nodes > 0) object.set("cluster_nodes", record.cluster_nodes);
  }
  std::ostringstream out;
  object.stringify(out, 2);
  out << "\n";
  return out.str();
}

/// The record at \a path, nullopt when the file does not exist. Throws Error naming the file
/// when it cannot be used.
std::optional<VmRecord> ReadRecord(const std::filesystem::path& path, const std::string& name) {
  std::optional<std::string> text = ReadFileIfExists(path, kStateRecordKind);
  if (!text) return std::nullopt;
  return ParseRecord(path, *text, name);
}

}  // namespace

std::string FormatRfc3339Utc(std::chrono::system_clock::time_point time) {
  const std::time_t t = std::chrono::system_clock::to_time_t(time);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

StateStore::StateStore(Paths paths) : paths_(std::move(paths)) {}

std::filesystem::path StateStore::RecordPath(const std::string& name) const {
  ValidateVmName(name, "VM name");
  return paths_.state_dir() / (name + ".json");
}

std::optional<VmRecord> StateStore::Load(const std::string& name) const {
  return ReadRecord(RecordPath(name), name);
}

VmRecord StateStore::Save(const VmRecord& record) {
  const std::filesystem::path path = RecordPath(record.name);
  if (!OneOf(record.phase, kPhases)) {
    throw Error("cannot save VM '" + record.name + "': phase '" + record.phase +
                "' is not one of " + Joined(kPhases));
  }
  if (!OneOf(record.access_mode, kAccessModes)) {
    throw Error("cannot save VM '" + record.name + "': access_mode '" + record.access_mode +
                "' is not one of " + Joined(kAccessModes));
  }
  if (!OneOf(record.route, kRoutes)) {
    throw Error("cannot save VM '" + record.name + "': route '" + record.route +
                "' is not one of " + Joined(kRoutes));
  }
  if (!OneOf(record.role, kRoles)) {
    throw Error("cannot save VM '" + record.name + "': role '" + record.role +
                "' is not one of " + Joined(kRoles));
  }
  // Reading the current file first means a corrupt or newer file is reported, not replaced.
  const std::optional<VmRecord> existing = ReadRecord(path, record.name);

  VmRecord stored = record;
  stored.version = kStateRecordVersion;
  const std::string now = FormatRfc3339Utc(std::chrono::system_clock::now());
  if (stored.created_at.empty()) {
    stored.created_at = existing && !existing->created_at.empty() ? existing->created_at : now;
  }
  stored.updated_at = now;

  EnsureDir(paths_.home());
  EnsureDir(paths_.state_dir());
  WriteFileAtomic(path, SerializeRecord(stored), 0600);
  return stored;
}

void StateStore::Remove(const std::string& name) {
  const std::filesystem::path path = RecordPath(name);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    const int err = errno;
    throw Error("cannot remove state file '" + path.string() + "': " + std::strerror(err));
  }
}

std::vector<VmRecord> StateStore::List(std::vector<std::string>* problems) const {
  std::vector<VmRecord> records;
  const std::filesystem::path dir = paths_.state_dir();
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) return records;
    throw Error("cannot list state directory '" + dir.string() + "': " + ec.message());
  }
  for (const std::filesystem::directory_entry& entry : it) {
    const std::string file = entry.path().filename().string();
    // Dot files are WriteFileAtomic's temp files (or not ours); other names are not records.
    if (file.empty() || file.front() == '.' || entry.path().extension() != ".json") continue;
    const std::string name = entry.path().stem().string();
    try {
      ValidateVmName(name, "VM name");
    } catch (const Error&) {
      if (problems) {
        problems->push_back("state file '" + entry.path().string() +
                            "' does not belong to a VM (the name is not a valid VM name); "
                            "gpuprov ignores it");
      }
      continue;
    }
    try {
      if (std::optional<VmRecord> record = ReadRecord(entry.path(), name)) {
        records.push_back(std::move(*record));
      }
    } catch (const Error& e) {
      if (problems) problems->push_back(e.what());
    }
  }
  std::sort(records.begin(), records.end(),
            [](const VmRecord& a, const VmRecord& b) { return a.name < b.name; });
  if (problems) std::sort(problems->begin(), problems->end());
  return records;
}

FileLock StateStore::LockVm(const std::string& name, int timeout_ms) {
  ValidateVmName(name, "VM name");
  EnsureDir(paths_.home());
  EnsureDir(paths_.lock_dir());
  return FileLock(paths_.lock_dir() / (name + ".lock"), name, timeout_ms);
}

std::optional<FileLock> StateStore::TryLockVm(const std::string& name) {
  ValidateVmName(name, "VM name");
  EnsureDir(paths_.home());
  EnsureDir(paths_.lock_dir());
  return FileLock::TryLock(paths_.lock_dir() / (name + ".lock"), name);
}

}  // namespace gpuprov
