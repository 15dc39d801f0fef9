// What every subcommand needs: the user's gpuprov folder, the driver search path and how to
// print results.
#pragma once

#include <string>

#include "config.h"
#include "driver_host.h"
#include "paths.h"

namespace gpuprov {

struct AppContext {
  Paths paths;
  std::string driver_path_flag;  // --driver-path
  bool json_output = false;      // --output json

  DriverHost MakeDriverHost() const {
    return DriverHost(DriverHost::DefaultSearchPath(driver_path_flag, paths.home().string()));
  }
  /// config.toml from the gpuprov folder (defaults when it does not exist).
  Config LoadUserConfig() const { return LoadConfig(paths.config_file()); }
};

}  // namespace gpuprov
