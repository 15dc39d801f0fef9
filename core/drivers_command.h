// `gpuprov drivers`: every driver file found, with version, ABI, capabilities and origin, and
// the reason for each broken one. `gpuprov drivers NAME`: one driver in full, with the keys it
// accepts in its [clouds.NAME] table of config.toml. Reads descriptors only; initialises no
// driver.
#pragma once

#include <optional>
#include <string>

#include "app_context.h"

namespace gpuprov {

/// `gpuprov drivers` without \a name, else `gpuprov drivers NAME` (exit 1 when that driver
/// file is broken, and says why).
int RunDrivers(const AppContext& app, const std::optional<std::string>& name);

}  // namespace gpuprov
