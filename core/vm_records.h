// What the commands that act on recorded VMs (list, down, ssh-config, ssh, tunnel, ttl,
// kubeconfig, gc) share: loading a record, its SSH target, its JSON and table forms, and what
// each cloud says of its VMs now.
#pragma once

#include <Poco/JSON/Object.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "app_context.h"
#include "ssh_target.h"
#include "state_store.h"

namespace gpuprov {

/// What each cloud says of its VMs now: cloud -> VM name -> state (CloudVm::state).
struct LiveStates {
  std::map<std::string, std::map<std::string, std::string>> by_cloud;
  /// cloud -> VM name -> the cloud's reason, for the VMs whose state is "preempted".
  std::map<std::string, std::map<std::string, std::string>> preempted_reason;
  /// The record's VM's state; "missing" when its cloud answered without it; nullopt when its
  /// cloud was not asked or did not answer.
  std::optional<std::string> StateOf(const VmRecord& record) const;
  /// Why the cloud took the record's VM back ("" when it did not, or did not say).
  std::string PreemptedReasonOf(const VmRecord& record) const;
};

/// The STATE cell of `gpuprov list` for a VM's \a state: "PREEMPTED" for "preempted" (the
/// cloud took a spot VM back: a re-run of provision or `gpuprov watch` makes it anew), else
/// the state as it is.
std::string ListedState(const std::string& state);

/// The lines `gpuprov list` prints under its table for the preempted VMs of \a records
/// (\a states as in ListTable, \a reasons the clouds' reasons): what happened and how to bring
/// each back; "" when none is preempted.
std::string PreemptedNotes(const std::vector<VmRecord>& records,
                           const std::vector<std::string>& states,
                           const std::vector<std::string>& reasons);

/// One list call per cloud that \a records name; a cloud that cannot be asked is a warning
/// and left out.
LiveStates AskLiveStates(const AppContext& app, const std::vector<VmRecord>& records);

/// Seconds since \a rfc3339 (a record's created_at); 0 when empty or unreadable.
long RecordAgeSeconds(const std::string& rfc3339);

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
