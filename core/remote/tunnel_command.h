// `gpuprov tunnel NAME [--local-port N]`: holds an SSH local forward from 127.0.0.1:N (default
// the VM's own port, recorded when it was provisioned and named by its kubeconfig) to the
// node's Kubernetes API on its own 127.0.0.1:6443, until Ctrl-C, reconnecting when the SSH
// connection drops. Also the choice of that per-VM port.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>

#include "app_context.h"
#include "ssh_target.h"
#include "state_store.h"

namespace gpuprov {

/// The VM's recorded local tunnel port; nullopt for a record without one (made before ports
/// were per VM: such a VM's kubeconfig names 16443).
std::optional<int> RecordedTunnelPort(const VmRecord& record);

/// The local port for a new tunnel-mode VM: the first from \a first up to 65535 that no other
/// VM's record holds (\a taken) and that \a free_now says can be bound on 127.0.0.1 now.
/// Throws Error when there is none.
int ChooseTunnelPort(int first, const std::set<int>& taken,
                     const std::function<bool(int)>& free_now);

/// true when 127.0.0.1:\a port can be bound now (nothing listens there).
bool LocalPortFree(int port);

/// The SSH target VM \a name's state record names now; nullopt when the record is missing or
/// unreadable, or has no address (a replacement under way). What a running tunnel follows
/// after a drop (PortForwardOptions::follow).
std::optional<SshTarget> RecordedSshTarget(const AppContext& app, const std::string& name);

/// Runs the tunnel for the VM \a name (local_port: nullopt without --local-port, then the
/// VM's recorded port, else kTunnelLocalPort) until Ctrl-C (then returns 0). Throws UsageError for an
/// unknown VM or one with Kubernetes off, Error when the port is taken or SSH fails.
int RunTunnel(const AppContext& app, const std::string& name, std::optional<int> local_port);


}  // namespace gpuprov
