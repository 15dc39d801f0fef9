// What every subcommand needs: the user's gpuprov folder, the driver search path, how to
// print results and how to ask the user.
#pragma once

#include <Poco/Dynamic/Var.h>

#include <memory>
#include <string>
#include <vector>

#include "config.h"
#include "console.h"
#include "driver_host.h"
#include "output.h"
#include "paths.h"
#include "prompt.h"

namespace gpuprov {

struct AppContext {
  Paths paths;
  std::string driver_path_flag;  // --driver-path
  bool json_output = false;      // a structured --output (json, yaml or ndjson): see Print
  OutputFormat output = OutputFormat::kText;
  /// Questions on the terminal (prompt.h); never null in a running command.
  std::shared_ptr<Prompter> prompter;
  /// Drivers every host of this run finds before its search path (DriverHost::AddInMemory):
  /// tests drive commands with an in-memory cloud through them.
  std::vector<const gpuprov_type_driver_descriptor*> in_memory_drivers = {};

  /// The driver host of this run, with its descriptor cache in $GPUPROV_HOME/cache.
  DriverHost MakeDriverHost() const {
    DriverHost host(DriverHost::DefaultSearchPath(driver_path_flag, paths.home().string()));
    host.set_list_cache((paths.home() / "cache" / "drivers.json").string());
    for (const gpuprov_type_driver_descriptor* d : in_memory_drivers) host.AddInMemory(d);
    return host;
  }
  /// config.toml from the gpuprov folder (defaults when it does not exist), with the folder's
  /// pacer_dir for the drivers.
  Config LoadUserConfig() const {
    Config config = LoadConfig(paths.config_file());
    config.pacer_dir = paths.pacer_dir().string();
    return config;
  }
  /// Prints a result in the structured format asked for (json_output is true): pretty JSON,
  /// YAML, or one JSON line for ndjson.
  void Print(const Poco::Dynamic::Var& value) const {
    Console::Get().Result(RenderStructured(value, output));
  }
};

}  // namespace gpuprov
