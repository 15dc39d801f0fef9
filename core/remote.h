// The commands that reach a VM over SSH or TLS (provision, ssh, tunnel, ttl, and the host-key
// removal of down) live in libgpuprov-remote.so (core/remote/, whose headers the executable's
// own code cannot include), with libssh, Poco Net/NetSSL/Crypto and OpenSSL. The gpuprov
// executable loads it on first use, so `--help`, `list --no-refresh`, `completion` and the other
// local commands start without mapping those libraries (BENCHMARKS.md, start-up). The module
// resolves the rest of core from the executable (which exports gpuprov::* symbols,
// gpuprov.dynamic-list): one copy of Console, the crash points and the state code. This header
// and the option structs it names (provision_options.h, openssh.h, ttl.h) are base code.
#pragma once

#include <optional>
#include <string>

#include "app_context.h"
#include "provision_options.h"
#include "state_store.h"
#include "openssh.h"
#include "ttl.h"
#include "watch_options.h"

namespace gpuprov {

/// What the module provides. The executable and the module come from the same build;
/// `version` is checked against the executable's when the module is loaded.
struct RemoteCommands {
  const char* version;
  int (*provision)(const AppContext& app, const ProvisionFlags& flags,
                   const std::optional<std::string>& spec_file);
  int (*ssh)(const AppContext& app, const std::string& name, const SshCommandOptions& options);
  int (*tunnel)(const AppContext& app, const std::string& name, std::optional<int> local_port);
  void (*forget_host_key)(const std::string& known_hosts_path, const std::string& host, int port);
  int (*ttl)(const AppContext& app, const std::string& name, const TtlCommandOptions& options);
  /// FollowVmAddress (core/remote/address_follow.h): the record, its address followed.
  VmRecord (*follow_address)(const AppContext& app, const std::string& name);
  int (*watch)(const AppContext& app, const std::string& name, const WatchOptions& options);
  int (*scale)(const AppContext& app, const std::string& name, int nodes, bool yes);
};

/// The remote commands: in the gpuprov executable, libgpuprov-remote.so loaded on the first
/// call (Error naming the file when it is missing or from another build); in a binary that
/// links them in (gpuprov_test), those.
const RemoteCommands& Remote();

}  // namespace gpuprov

/// The module's one exported entry point (remote_commands.cc).
extern "C" const gpuprov::RemoteCommands* gpuprov_remote_commands();
