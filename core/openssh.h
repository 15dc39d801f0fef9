// What `gpuprov ssh` and `gpuprov ssh-config` share with OpenSSH's client: the remote command
// line built from the words after `--` (joined with spaces, as ssh(1) does, so the remote shell
// parses them), -L forward specs, the argv gpuprov runs /usr/bin/ssh with, and the `Host` block
// of ssh_config(5) that reaches a VM with gpuprov's key and pinned known_hosts.
#pragma once

#include <string>
#include <vector>

#include "ssh_target.h"

namespace gpuprov {

/// The words after `--` joined with single spaces, unquoted: `exit 7` stays `exit 7` and
/// `nvidia-smi | head` a pipeline, as `ssh host 'nvidia-smi | head'` gives the remote shell.
std::string RemoteCommandLine(const std::vector<std::string>& words);

/// One -L forward: [BIND:]PORT:HOST:HOSTPORT, HOST may be a bracketed IPv6 address.
struct LocalForward {
  std::string bind_address;  // "" when not given (OpenSSH then listens on loopback only)
  int port = 0;
  std::string host;
  int host_port = 0;

  /// The spec as OpenSSH's -L takes it.
  std::string ToSpec() const;
};

/// What `gpuprov ssh NAME` was asked for besides the name.
struct SshCommandOptions {
  std::vector<std::string> command;     // the words after `--`, joined as OpenSSH does
  std::vector<LocalForward> forwards;   // -L
  bool no_command = false;              // -N: forward only
};

/// Parses the value of `gpuprov tunnel --local-port`: a port number 1-65535, else UsageError.
int ParseLocalPort(const std::string& text);

/// Parses the value of -L. Throws UsageError naming -L and the expected form.
LocalForward ParseLocalForward(const std::string& spec);

/// The argv for /usr/bin/ssh reaching \a target with gpuprov's key and pinned known_hosts
/// (StrictHostKeyChecking yes), with \a forwards, -N when \a no_command, then \a command_line
/// (omitted when empty: a login shell).
std::vector<std::string> OpenSshArgv(const SshTarget& target,
                                     const std::vector<LocalForward>& forwards, bool no_command,
                                     const std::string& command_line);

/// The `Host <alias>` block of ssh_config(5) for \a target: HostName, Port, User, IdentityFile,
/// IdentitiesOnly, UserKnownHostsFile (gpuprov's pinned known_hosts), StrictHostKeyChecking yes.
/// Paths are double-quoted when they hold a space. Throws Error for a value ssh_config cannot
/// carry (a double quote or a line break).
std::string SshConfigBlock(const std::string& alias, const SshTarget& target);

/// "gpuprov-<name>": the Host alias `gpuprov ssh-config` writes (the kube context's name too).
std::string SshHostAlias(const std::string& vm_name);

}  // namespace gpuprov
