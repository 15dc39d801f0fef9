#include "tunnel_command.h"

#include <cerrno>
#include <cstdlib>
#include <optional>

#include "cluster_bringup.h"
#include "console.h"
#include "error.h"
#include "interrupt.h"
#include "spec.h"
#include "ssh_client.h"
#include "ssh_tunnel.h"
#include "state_store.h"
#include "vm_commands.h"

namespace gpuprov {

int ParseLocalPort(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long port = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || port < 1 || port > 65535) {
    throw UsageError("--local-port must be a port number from 1 to 65535, not '" + text + "'",
                     "e.g. --local-port 16444");
  }
  return static_cast<int>(port);
}

int RunTunnel(const AppContext& app, const std::string& name, int local_port) {
  Console& console = Console::Get();
  const VmRecord rec = LoadVmRecord(StateStore(app.paths), name);
  if (!rec.kubernetes) {
    throw UsageError("VM '" + name + "' has Kubernetes off: there is no API to forward",
                     "reach it with `gpuprov ssh " + name +
                         "`; for a cluster, provision a VM with Kubernetes on (the default, or "
                         "--k8s)");
  }
  const SshTarget target = SshTargetOf(app, rec);

  PortForwardOptions options;
  options.listen_host = "127.0.0.1";
  options.listen_port = local_port;
  options.remote_host = "127.0.0.1";
  options.remote_port = kApiPort;
  options.reconnect_deadline = std::chrono::minutes(5);

  const std::string ssh_where = SshHostPort(target.host, target.port);
  const std::string kubeconfig = app.paths.kubeconfig(name).string();
  std::string forwarding;  // set once the port is bound
  const auto on_event = [&](const PortForwardEvent& event) {
    switch (event.kind) {
      case PortForwardEvent::Kind::kConnecting:
        console.Progress("connecting to SSH on " + ssh_where, event.elapsed);
        break;
      case PortForwardEvent::Kind::kConnected:
        console.Step(forwarding + "; KUBECONFIG=" + kubeconfig + "; Ctrl-C to stop");
        if (local_port != kTunnelLocalPort) {
          console.Note("the kubeconfig names port " + std::to_string(kTunnelLocalPort) +
                       "; through this port use kubectl --server https://127.0.0.1:" +
                       std::to_string(local_port));
        }
        if (rec.access_mode == "direct") {
          console.Note("VM " + name +
                       " is reachable directly: its kubeconfig does not need this tunnel");
        }
        break;
      case PortForwardEvent::Kind::kDropped:
        console.Note(
            "the SSH connection to " + ssh_where + " dropped (" + event.message + ")" +
            (event.open_connections > 0
                 ? "; closed " + std::to_string(event.open_connections) + " forwarded connection(s)"
                 : std::string()) +
            "; reconnecting");
        break;
      case PortForwardEvent::Kind::kReconnected:
        console.Note("reconnected: " + forwarding + " again");
        break;
      case PortForwardEvent::Kind::kChannelFailed:
        console.Warning(event.message + " (is the Kubernetes API up? `gpuprov ssh " + name +
                        " -- systemctl status k3s` shows)");
        break;
    }
  };

  SshPortForward forward(target, options, on_event);
  forwarding =
      "forwarding " + forward.local_address() + " -> " + name + ":" + std::to_string(kApiPort);
  InstallInterruptHandler();
  forward.Run([] { return Interrupted(); });
  console.Info("tunnel stopped");
  return 0;
}

}  // namespace gpuprov
