// `gpuprov down NAME [--cloud CLOUD] [--yes]` and `gpuprov down --expired [--yes]`: deletes a
// VM through its driver with its pinned host key, kubeconfig, merged kubeconfig entries and
// record; with --expired, every VM whose TTL has passed or whose idle TTL powered it off.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "app_context.h"
#include "state_store.h"
#include "vm_records.h"

namespace gpuprov {

/// What `gpuprov down` was asked: one VM by name (its --cloud when it has no record), or every
/// expired one.
struct DownOptions {
  std::string name;                  // without expired
  std::optional<std::string> cloud;  // --cloud: look the VM up there when no record exists
  bool expired = false;              // --expired
  bool yes = false;                  // --yes: do not ask (asked only on a terminal)
};

/// Deletes the VM named in \a options, asking first on a terminal unless yes (prompt.h); with
/// expired, every VM whose TTL deadline has passed or that its idle TTL powered off (its cloud is
/// asked), as `down NAME` does, needing yes when it cannot ask.
int RunDown(const AppContext& app, const DownOptions& options);

/// What deleting one VM came to: "removed", "already_gone" or "nothing", and the line saying so.
struct DownOutcome {
  std::string result;
  std::string text;
};

/// The deletion part of `down` (no question): the VM on \a cloud_name through its driver, its
/// pinned host key, kubeconfig and merged entries, and its record. The caller holds the VM's
/// lock and has loaded \a rec (nullopt: no record, look the name up on the cloud).
DownOutcome DeleteVmAndFiles(const AppContext& app, StateStore& store, std::optional<VmRecord>& rec,
                             const std::string& name, const std::string& cloud_name);

/// Takes the VM's cluster, user and context out of the user's kubeconfig when a merge put them
/// there (the record names the file); a file that cannot be edited is a warning naming the
/// kubectl commands that remove them.
void RemoveMergedKubeconfigEntries(const AppContext& app, const VmRecord& rec);

/// The records that count as expired at \a now (ExpiryReason, ttl.h: the deadline passed, or,
/// with \a live, an idle TTL and a VM its cloud says is off), in the order given; only those on
/// \a cloud when it is given.
std::vector<VmRecord> ExpiredRecords(const std::vector<VmRecord>& records,
                                     std::chrono::system_clock::time_point now,
                                     const std::optional<std::string>& cloud = std::nullopt,
                                     const LiveStates* live = nullptr);

}  // namespace gpuprov
