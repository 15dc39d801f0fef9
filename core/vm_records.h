// `gpuprov list`, `gpuprov ssh` and `gpuprov down`: the commands that act on recorded VMs.
#pragma once

#include <Poco/JSON/Object.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "app_context.h"
#include "openssh.h"
#include "ssh_target.h"
#include "state_store.h"

namespace gpuprov {

int RunList(const AppContext& app, bool refresh);
/// `gpuprov ssh-config NAME`: the OpenSSH Host block for the VM on stdout.
int RunSshConfig(const AppContext& app, const std::string& name);
/// Deletes the VM; on a terminal asks first unless \a yes (prompt.h).
int RunDown(const AppContext& app, const std::string& name, const std::optional<std::string>& cloud,
            bool yes = false);

/// What deleting one VM came to: "removed", "already_gone" or "nothing", and the line saying so.
struct DownOutcome {
  std::string result;
  std::string text;
};

/// The deletion part of `down` (no question): the VM on \a cloud_name through its driver, its
/// pinned host key, kubeconfig and merged entries, and its record. The caller holds the VM's
/// lock and has loaded \a rec (nullopt: no record, look the name up on the cloud).
DownOutcome DeleteVmAndFiles(const AppContext& app, StateStore& store,
                             std::optional<VmRecord>& rec, const std::string& name,
                             const std::string& cloud_name);

/// What each cloud says of its VMs now: cloud -> VM name -> state (CloudVm::state).
struct LiveStates {
  std::map<std::string, std::map<std::string, std::string>> by_cloud;
  /// The record's VM's state; "missing" when its cloud answered without it; nullopt when its
  /// cloud was not asked or did not answer.
  std::optional<std::string> StateOf(const VmRecord& record) const;
};

/// One list call per cloud that \a records name; a cloud that cannot be asked is a warning
/// and left out.
LiveStates AskLiveStates(const AppContext& app, const std::vector<VmRecord>& records);

/// The records that count as expired at \a now (ExpiryReason, ttl.h: the deadline passed, or,
/// with \a live, an idle TTL and a VM its cloud says is off), in the order given; only those on
/// \a cloud when it is given.
std::vector<VmRecord> ExpiredRecords(const std::vector<VmRecord>& records,
                                     std::chrono::system_clock::time_point now,
                                     const std::optional<std::string>& cloud = std::nullopt,
                                     const LiveStates* live = nullptr);

/// `gpuprov down --expired`: deletes every VM whose TTL deadline has passed, or that its idle
/// TTL powered off (its cloud is asked), as `down NAME` does; asks first on a terminal unless \a yes, and needs \a yes when it cannot ask.
int RunDownExpired(const AppContext& app, bool yes);

/// `down`: takes the VM's cluster, user and context out of the user's kubeconfig when a merge
/// put them there (the record names the file); a file that cannot be edited is a warning
/// naming the kubectl commands that remove them.
void RemoveMergedKubeconfigEntries(const AppContext& app, const VmRecord& rec);

/// The record of \a name; UsageError naming `gpuprov list` when there is none.
VmRecord LoadVmRecord(const StateStore& store, const std::string& name);

/// How gpuprov reaches the VM over SSH: its address and port, login user, key and gpuprov's
/// known_hosts. Error when the VM has no address yet.
SshTarget SshTargetOf(const AppContext& app, const VmRecord& rec);

/// The record as the JSON `list --output json` and `provision --output json` print.
std::string VmRecordJson(const VmRecord& record);

/// The object `list --output json` prints for one VM, \a state being the cloud's word (or the
/// record's phase when the cloud was not asked).
Poco::JSON::Object::Ptr VmRecordObject(const VmRecord& record, const std::string& state);

/// The columns of `gpuprov list`, each as wide as its widest cell: NAME, CLOUD, REGION, STATE,
/// ADDRESS, GPUS, $/H, K8S, AGE, TTL (ttl.h TtlCell at \a now). \a states holds each
/// record's shown state.
std::string ListTable(const std::vector<VmRecord>& records, const std::vector<std::string>& states,
                      const std::vector<long>& age_seconds,
                      std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

}  // namespace gpuprov
