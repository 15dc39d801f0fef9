// `gpuprov ssh-config NAME`: the OpenSSH Host block (ssh_config(5)) that reaches the VM with
// gpuprov's key and pinned known_hosts, so ssh, scp and rsync can use it.
#pragma once

#include <string>

#include "app_context.h"

namespace gpuprov {

int RunSshConfig(const AppContext& app, const std::string& name);

}  // namespace gpuprov
