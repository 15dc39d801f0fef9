// `gpuprov provision`: the VM launch state machine of design.md section 3. Every input is
// validated and the driver chosen before anything is created; the intent is recorded before
// the create call; each transition is persisted; a failure keeps the VM and says how to look.
#pragma once

#include <optional>
#include <string>

#include "app_context.h"
#include "provision_options.h"

namespace gpuprov {

int RunProvision(const AppContext& app, const ProvisionFlags& flags,
                 const std::optional<std::string>& spec_file);

}  // namespace gpuprov
