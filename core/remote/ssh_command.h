// `gpuprov ssh NAME [-L ...] [-N] [-- COMMAND...]`: one command over gpuprov's own SSH client
// (its exit status), or OpenSSH for a shell and for -L forwards. Part of libgpuprov-remote.so
// (remote.h): call it through Remote().ssh.
#pragma once

#include <string>

#include "app_context.h"
#include "openssh.h"

namespace gpuprov {

int RunSsh(const AppContext& app, const std::string& name, const SshCommandOptions& options);

}  // namespace gpuprov
