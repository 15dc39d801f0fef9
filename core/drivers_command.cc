#include "drivers_command.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <sstream>

#include "console.h"

namespace gpuprov {

int RunDriversCommand(const AppContext& app) {
  DriverHost host = app.MakeDriverHost();
  host.set_list_cache((app.paths.home() / "cache" / "drivers.json").string());
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
    std::ostringstream out;
    arr->stringify(out, 2);
    console.Result(out.str() + "\n");
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

}  // namespace gpuprov
