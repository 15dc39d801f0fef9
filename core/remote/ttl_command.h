// `gpuprov ttl NAME [DURATION] [--idle-ttl DURATION] [--off]`: shows, changes or removes the TTL
// on a VM's node (ttl.h). Part of libgpuprov-remote.so (remote.h): call it through Remote().ttl.
#pragma once

#include <optional>
#include <string>

#include "app_context.h"

namespace gpuprov {

struct TtlCommandOptions {
  std::optional<long> ttl_seconds;       // DURATION: the new deadline is now + this; 0: none
  std::optional<long> idle_ttl_seconds;  // --idle-ttl; 0: none
  bool off = false;                      // --off: remove the timer and both TTLs
};

/// With nothing to change it shows the recorded TTL (no SSH); otherwise it writes the new
/// settings on the node over SSH (the timer installed if it was not), then in the record.
int RunTtl(const AppContext& app, const std::string& name, const TtlCommandOptions& options);

}  // namespace gpuprov
