// `gpuprov list`, `gpuprov ssh` and `gpuprov down`: the commands that act on recorded VMs.
#pragma once

#include <Poco/JSON/Object.h>

#include <optional>
#include <string>
#include <vector>

#include "app_context.h"
#include "ssh_client.h"
#include "state_store.h"

namespace gpuprov {

int RunList(const AppContext& app, bool refresh);
int RunSsh(const AppContext& app, const std::string& name, const std::vector<std::string>& command);
/// Deletes the VM; on a terminal asks first unless \a yes (prompt.h).
int RunDown(const AppContext& app, const std::string& name, const std::optional<std::string>& cloud,
            bool yes = false);

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
/// ADDRESS, GPUS, $/H, K8S, AGE. \a states holds each record's shown state.
std::string ListTable(const std::vector<VmRecord>& records, const std::vector<std::string>& states,
                      const std::vector<long>& age_seconds);

}  // namespace gpuprov
