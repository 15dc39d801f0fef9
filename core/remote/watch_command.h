// `gpuprov watch NAME`: stays in the foreground (like `tunnel`; Ctrl-C stops it), asks the VM's
// cloud every --interval seconds how the VM is, and when the cloud took a spot VM back
// (state "preempted", docs/driver-protocol.md "Spot VMs") runs provision again for it, which
// makes a new VM of the same name and spec and rewrites the same kubeconfig file and context.
// Attempts are bounded (--max-attempts); after the first, --fallback on-demand asks for an
// on-demand VM instead, --fallback candidates tries the --cloud/--region lists given to watch.
// Each preemption and recovery is a line on stderr and, with --output ndjson, an event on
// stdout: {"event": "preempted"|"recovered"|"recovery_failed", "name", "cloud", ...}.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "app_context.h"
#include "provision_options.h"
#include "state_store.h"
#include "watch_options.h"

namespace gpuprov {

/// The provision flags of attempt \a attempt (1 = the first) to bring back the VM of \a record:
/// its name, cloud, region, instance type, GPUs, Kubernetes and spot as recorded, --yes (watch
/// asks nothing); from the second attempt on, the fallback's change (spot off, or the
/// candidate lists with the instance type left to each cloud).
ProvisionFlags RecoveryFlags(const VmRecord& record, const WatchOptions& options, int attempt);

/// Runs the watch until Ctrl-C (then returns 0). Throws UsageError for an unknown VM, Error
/// when every attempt to bring it back failed (the last attempt's error in the message).
int RunWatch(const AppContext& app, const std::string& name, const WatchOptions& options);

}  // namespace gpuprov
