// `gpuprov list`, `gpuprov ssh` and `gpuprov down`: the commands that act on recorded VMs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app_context.h"
#include "ssh_client.h"
#include "state_store.h"

namespace gpuprov {

int RunList(const AppContext& app, bool refresh);
int RunSsh(const AppContext& app, const std::string& name, const std::vector<std::string>& command);
int RunDown(const AppContext& app, const std::string& name, const std::optional<std::string>& cloud);

/// The record of \a name; UsageError naming `gpuprov list` when there is none.
VmRecord LoadVmRecord(const StateStore& store, const std::string& name);

/// How gpuprov reaches the VM over SSH: its address and port, login user, key and gpuprov's
/// known_hosts. Error when the VM has no address yet.
SshTarget SshTargetOf(const AppContext& app, const VmRecord& rec);

/// The record as the JSON `list --output json` and `provision --output json` print.
std::string VmRecordJson(const VmRecord& record);

}  // namespace gpuprov
