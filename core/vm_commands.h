// `gpuprov list`, `gpuprov ssh` and `gpuprov down`: the commands that act on recorded VMs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app_context.h"
#include "state_store.h"

namespace gpuprov {

int RunList(const AppContext& app, bool refresh);
int RunSsh(const AppContext& app, const std::string& name, const std::vector<std::string>& command);
int RunDown(const AppContext& app, const std::string& name, const std::optional<std::string>& cloud);

/// The record as the JSON `list --output json` and `provision --output json` print.
std::string VmRecordJson(const VmRecord& record);

}  // namespace gpuprov
