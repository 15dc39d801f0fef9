// `gpuprov tunnel NAME [--local-port N]`: holds an SSH local forward from 127.0.0.1:N (default
// 16443, the port tunnel-mode kubeconfigs name) to the node's Kubernetes API on its own
// 127.0.0.1:6443, until Ctrl-C, reconnecting when the SSH connection drops.
#pragma once

#include <string>

#include "app_context.h"

namespace gpuprov {

/// Runs the tunnel for the VM \a name (local_port: kTunnelLocalPort of cluster_bringup.h
/// without --local-port) until Ctrl-C (then returns 0). Throws UsageError for an
/// unknown VM or one with Kubernetes off, Error when the port is taken or SSH fails.
int RunTunnel(const AppContext& app, const std::string& name, int local_port);

/// Parses the value of --local-port: a port number 1-65535, else UsageError.
int ParseLocalPort(const std::string& text);

}  // namespace gpuprov
