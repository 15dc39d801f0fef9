// `gpuprov list [--no-refresh]`: the recorded VMs, with each cloud's word for their state.
#pragma once

#include "app_context.h"

namespace gpuprov {

/// The table (or JSON) of every record; with \a refresh each cloud that holds one is asked
/// for its VMs' states (a cloud that cannot be asked is a warning).
int RunList(const AppContext& app, bool refresh);

}  // namespace gpuprov
