// `gpuprov ttl NAME [DURATION] [--idle-ttl DURATION] [--off]`: shows, changes or removes the TTL
// on a VM's node (ttl.h). Part of libgpuprov-remote.so (remote.h): call it through Remote().ttl.
#pragma once

#include <optional>
#include <string>

#include "app_context.h"
#include "ttl.h"

namespace gpuprov {

/// With nothing to change it shows the recorded TTL (no SSH); otherwise it writes the new
/// settings on the node over SSH (the timer installed if it was not), then in the record.
int RunTtl(const AppContext& app, const std::string& name, const TtlCommandOptions& options);

}  // namespace gpuprov
