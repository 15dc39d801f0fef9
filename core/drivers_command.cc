#include "drivers_command.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "cloud.h"
#include "console.h"
#include "driver_settings.h"
#include "error.h"

namespace gpuprov {
namespace {

Poco::JSON::Array::Ptr KeysJson(const std::vector<DriverConfigKey>& keys) {
  Poco::JSON::Array::Ptr out = new Poco::JSON::Array;
  for (const auto& k : keys) {
    Poco::JSON::Object::Ptr key = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
    key->set("name", k.name);
    if (!k.replaced_by.empty()) {
      key->set("replaced_by", k.replaced_by);
    } else {
      key->set("type", ConfigTypeName(k.type));
      key->set("help", k.help);
      if (!k.members.empty()) key->set("members", KeysJson(k.members));
    }
    out->add(key);
  }
  return out;
}

int RunDriverList(const AppContext& app) {
  DriverHost host = app.MakeDriverHost();
  std::vector<DriverInfo> drivers = host.ListAll();
  Console& console = Console::Get();
  int broken = 0;
  for (const auto& d : drivers) broken += d.ok() || !d.shadowed_by.empty() ? 0 : 1;
  if (app.json_output) {
    Poco::JSON::Array::Ptr arr = new Poco::JSON::Array;
    for (const auto& d : drivers) {
      Poco::JSON::Object::Ptr o = new Poco::JSON::Object;
      o->set("name", d.name);
      o->set("version", d.version);
      o->set("abi", std::to_string(d.abi_major) + "." + std::to_string(d.abi_minor_required));
      o->set("capabilities", CapabilitiesToString(d.capabilities));
      o->set("path", d.path);
      o->set("origin", d.origin);
      o->set("ok", d.ok());
      o->set("problem", d.problem);
      o->set("shadowed_by", d.shadowed_by);
      arr->add(o);
    }
    app.Print(arr);
    return 0;
  }
  std::ostringstream out;
  for (const auto& d : drivers) {
    if (!d.problem.empty()) {
      out << d.name << "  BROKEN: " << d.problem << "\n    file: " << d.path << " (" << d.origin
          << ")\n";
    } else if (!d.shadowed_by.empty()) {
      out << d.name << "  shadowed by " << d.shadowed_by << "\n    file: " << d.path << " ("
          << d.origin << ")\n";
    } else {
      out << d.name << "  " << d.version << "  ABI " << d.abi_major << "." << d.abi_minor_required
          << "  " << CapabilitiesToString(d.capabilities) << "\n    file: " << d.path << " ("
          << d.origin << ")\n";
    }
  }
  if (drivers.empty()) {
    out << "no drivers found; searched:\n";
    for (const auto& dir : host.search_path()) out << "  " << dir.path << " (" << dir.origin << ")\n";
  }
  console.Result(out.str());
  if (broken > 0) {
    console.Warning(std::to_string(broken) + " driver file(s) are broken; the others work");
  }
  return 0;
}

int RunDriverDetail(const AppContext& app, const std::string& name) {
  if (!IsValidCloudName(name)) {
    throw UsageError("'" + name + "' is not a driver name: [a-z0-9_-]+",
                     "`gpuprov drivers` lists the drivers");
  }
  DriverHost host = app.MakeDriverHost();
  const DriverInfo d = host.Find(name);  // throws naming the search path when there is none
  Console& console = Console::Get();
  const std::string abi = std::to_string(d.abi_major) + "." + std::to_string(d.abi_minor_required);
  if (app.json_output) {
    Poco::JSON::Object::Ptr o = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
    o->set("name", d.name);
    o->set("version", d.version);
    o->set("description", d.description);
    o->set("abi", abi);
    o->set("capabilities", CapabilitiesToString(d.capabilities));
    o->set("node_address",
           d.node_address.empty() ? Poco::Dynamic::Var() : Poco::Dynamic::Var(d.node_address));
    o->set("path", d.path);
    o->set("origin", d.origin);
    o->set("ok", d.problem.empty());
    o->set("problem", d.problem);
    if (d.config_keys) {
      o->set("config_keys", KeysJson(*d.config_keys));
    } else {
      o->set("config_keys", Poco::Dynamic::Var());
    }
    app.Print(o);
    return d.problem.empty() ? 0 : kExitFailure;
  }
  std::ostringstream out;
  if (!d.problem.empty()) {
    out << d.name << "  BROKEN: " << d.problem << "\n    file: " << d.path << " (" << d.origin
        << ")\n";
    console.Result(out.str());
    return kExitFailure;
  }
  out << d.name << " " << d.version << ": " << d.description << "\n"
      << "  driver ABI:    " << abi << " or newer (this gpuprov: " << GPUPROV_ABI_VERSION_MAJOR
      << "." << GPUPROV_ABI_VERSION_MINOR << ")\n"
      << "  capabilities:  " << CapabilitiesToString(d.capabilities) << "\n"
      << "  node address:  "
      << (d.node_address.empty() ? "unknown (the installer tries the EC2, GCE and DigitalOcean "
                                   "metadata services)"
                                 : d.node_address)
      << "\n"
      << "  file:          " << d.path << " (" << d.origin << ")\n";
  if (!d.config_keys) {
    out << "  settings: the driver declares none (ABI " << abi << "), so its [clouds." << d.name
        << "] table in config.toml is passed to it unchecked\n";
  } else {
    out << "  settings: [clouds." << d.name << "] in config.toml accepts\n";
    // Rows: each key, a table's members as "table.member" below it; former names last.
    std::vector<DriverConfigKey> rows{{"endpoint", GPUPROV_CONFIG_STRING,
                                       "the API base URL (gpuprov's own key; " +
                                           EndpointEnvVar(d.name) + " overrides it)"}};
    std::vector<const DriverConfigKey*> former;
    for (const auto& k : *d.config_keys) {
      if (!k.replaced_by.empty()) {
        former.push_back(&k);
        continue;
      }
      rows.push_back(k);
      for (const auto& m : k.members) rows.push_back({k.name + "." + m.name, m.type, m.help});
    }
    size_t width = 0, type_width = 8;
    for (const auto& k : rows) {
      width = std::max(width, k.name.size());
      type_width = std::max(type_width, std::string(ConfigTypeName(k.type)).size());
    }
    for (const auto& k : rows) {
      std::string name = k.name;
      name.resize(width, ' ');
      std::string type = ConfigTypeName(k.type);
      type.resize(type_width, ' ');
      out << "    " << name << "  " << type << "  " << k.help << "\n";
    }
    if (!former.empty()) {
      out << "  former names, read with a warning in this release:\n";
      for (const auto* k : former) out << "    " << k->name << " -> " << k->replaced_by << "\n";
    }
  }
  console.Result(out.str());
  return 0;
}

}  // namespace

int RunDrivers(const AppContext& app, const std::optional<std::string>& name) {
  return name ? RunDriverDetail(app, *name) : RunDriverList(app);
}

}  // namespace gpuprov
