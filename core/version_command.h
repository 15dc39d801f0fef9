// `gpuprov version`: gpuprov's version, the driver ABI it hosts, how it was built and where it
// looks for drivers.
#pragma once

#include "app_context.h"

namespace gpuprov {

int RunVersion(const AppContext& app);

}  // namespace gpuprov
