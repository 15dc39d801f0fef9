// `gpuprov ssh NAME`: in libgpuprov-remote.so (remote.h), as it connects with libssh.
#include "ssh_command.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "address_follow.h"
#include "error.h"
#include "openssh.h"
#include "spec.h"
#include "ssh_client.h"
#include "state_store.h"
#include "vm_records.h"

namespace gpuprov {

int RunSsh(const AppContext& app, const std::string& name, const SshCommandOptions& options) {
  ValidateVmName(name, "VM name");
  const VmRecord rec = FollowVmAddress(app, name);
  SshTarget target = SshTargetOf(app, rec);
  const std::string command_line = RemoteCommandLine(options.command);
  if (!command_line.empty() && options.forwards.empty()) {
    SshSession session = SshSession::Connect(target, std::chrono::seconds(30));
    return session.RunStreaming(command_line, STDOUT_FILENO, STDERR_FILENO);
  }
  // A shell, or forwards: OpenSSH handles the terminal and -L; the host key must already be
  // pinned (gpuprov's own connection checks it first, pinning on first contact).
  if (access("/usr/bin/ssh", X_OK) != 0) {
    throw Error(std::string(options.forwards.empty() ? "an interactive shell" : "-L") +
                    " needs OpenSSH's ssh client at /usr/bin/ssh",
                "install openssh-client, or run one command: gpuprov ssh " + name + " -- CMD");
  }
  { SshSession pin_check = SshSession::Connect(target, std::chrono::seconds(30)); }
  std::vector<std::string> argv =
      OpenSshArgv(target, options.forwards, options.no_command, command_line);
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  execv("/usr/bin/ssh", cargv.data());
  throw Error(std::string("cannot run /usr/bin/ssh: ") + std::strerror(errno));
}

}  // namespace gpuprov
