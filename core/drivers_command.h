// `gpuprov drivers`: every driver file found, with version, ABI, capabilities and origin, and
// the reason for each broken one. `gpuprov drivers NAME`: one driver in full, with the keys it
// accepts in its [clouds.NAME] table of config.toml. Reads descriptors only; initialises no
// driver.
#pragma once

#include <string>

#include "app_context.h"

namespace gpuprov {

int RunDriversCommand(const AppContext& app);

/// `gpuprov drivers NAME`. Exit 1 when the driver file is broken (and says why).
int RunDriverDetailCommand(const AppContext& app, const std::string& name);

}  // namespace gpuprov
