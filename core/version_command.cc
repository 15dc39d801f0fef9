#include "version_command.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <string>
#include <vector>

#include "console.h"
#include "driver_host.h"

#ifndef GPUPROV_VERSION
#define GPUPROV_VERSION "0.0.0"
#endif
#ifndef GPUPROV_BUILD_TYPE
#define GPUPROV_BUILD_TYPE ""
#endif

namespace gpuprov {
namespace {

#ifdef __VERSION__
constexpr const char* kCompiler = "compiler " __VERSION__;
#else
constexpr const char* kCompiler = "compiler unknown";
#endif

}  // namespace

int RunVersion(const AppContext& app) {
  const std::string abi =
      std::to_string(GPUPROV_ABI_VERSION_MAJOR) + "." + std::to_string(GPUPROV_ABI_VERSION_MINOR);
  const std::vector<DriverSearchDir> search =
      DriverHost::DefaultSearchPath(app.driver_path_flag, app.paths.home().string());
  if (app.json_output) {
    Poco::JSON::Object::Ptr o = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
    o->set("version", std::string(GPUPROV_VERSION));
    o->set("abi", abi);
    o->set("abi_major", GPUPROV_ABI_VERSION_MAJOR);
    o->set("abi_minor", GPUPROV_ABI_VERSION_MINOR);
    Poco::JSON::Object::Ptr build = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
    build->set("type", std::string(GPUPROV_BUILD_TYPE));
    build->set("compiler", std::string(kCompiler));
    build->set("cplusplus", static_cast<Poco::Int64>(__cplusplus));
    o->set("build", build);
    Poco::JSON::Array::Ptr dirs = new Poco::JSON::Array;
    for (const auto& d : search) {
      Poco::JSON::Object::Ptr dir = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
      dir->set("path", d.path);
      dir->set("origin", d.origin);
      dirs->add(dir);
    }
    o->set("drivers_dirs", dirs);
    app.Print(o);
    return 0;
  }
  std::string out = "gpuprov " GPUPROV_VERSION " (driver ABI " + abi + ")\n";
  out += std::string("  build:   ") + (*GPUPROV_BUILD_TYPE ? GPUPROV_BUILD_TYPE ", " : "") +
         kCompiler + "\n";
  out += "  drivers: searched in\n";
  for (const auto& d : search) out += "    " + d.path + " (" + d.origin + ")\n";
  Console::Get().Result(out);
  return 0;
}

}  // namespace gpuprov
