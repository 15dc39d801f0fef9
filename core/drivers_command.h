// `gpuprov drivers`: every driver file found, with version, ABI, capabilities and origin, and
// the reason for each broken one. Reads descriptors only; initialises no driver.
#pragma once

#include "app_context.h"

namespace gpuprov {

int RunDriversCommand(const AppContext& app);

}  // namespace gpuprov
