#include "tunnel_command.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <optional>

#include "address_follow.h"
#include "cluster_bringup.h"
#include "console.h"
#include "error.h"
#include "interrupt.h"
#include "spec.h"
#include "ssh_client.h"
#include "ssh_tunnel.h"
#include "state_store.h"
#include "vm_records.h"

namespace gpuprov {

std::optional<int> RecordedTunnelPort(const VmRecord& record) {
  auto it = record.extra.find(kTunnelPortKey);
  if (it == record.extra.end()) return std::nullopt;
  char* end = nullptr;
  const long port = std::strtol(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || port < 1 || port > 65535) return std::nullopt;
  return static_cast<int>(port);
}

int ChooseTunnelPort(int first, const std::set<int>& taken,
                     const std::function<bool(int)>& free_now) {
  for (int port = first; port <= 65535; ++port) {
    if (taken.count(port) == 0 && free_now(port)) return port;
  }
  throw Error("no free local port from " + std::to_string(first) + " to 65535 for the tunnel",
              "remove VMs you no longer need (`gpuprov down NAME`), or set tunnel_first_port "
              "in [defaults] of config.toml to a lower port");
}

bool LocalPortFree(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // No SO_REUSEADDR: a port in TIME_WAIT counts as taken, as the tunnel would see it.
  const bool ok = bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

std::optional<SshTarget> RecordedSshTarget(const AppContext& app, const std::string& name) {
  try {
    const VmRecord rec = LoadVmRecord(StateStore(app.paths), name);
    if (rec.public_ip.empty()) return std::nullopt;  // being replaced: no address yet
    return SshTargetOf(app, rec);
  } catch (const Error&) {
    return std::nullopt;  // removed or unreadable now: the current target stays
  }
}

int RunTunnel(const AppContext& app, const std::string& name, std::optional<int> local_port_flag) {
  Console& console = Console::Get();
  const VmRecord rec = LoadVmRecord(StateStore(app.paths), name);
  const int kubeconfig_port = RecordedTunnelPort(rec).value_or(kTunnelLocalPort);
  const int local_port = local_port_flag.value_or(kubeconfig_port);
  if (!rec.kubernetes) {
    throw UsageError("VM '" + name + "' has Kubernetes off: there is no API to forward",
                     "reach it with `gpuprov ssh " + name +
                         "`; for a cluster, provision a VM with Kubernetes on (the default, or "
                         "--k8s)");
  }
  const SshTarget target = SshTargetOf(app, FollowVmAddress(app, name));

  PortForwardOptions options;
  options.listen_host = "127.0.0.1";
  options.listen_port = local_port;
  options.remote_host = "127.0.0.1";
  options.remote_port = kApiPort;
  options.reconnect_deadline = std::chrono::minutes(5);
  // A VM replaced while the tunnel runs (a preempted spot VM that `gpuprov watch` or a
  // provision re-run brought back: a new address, its host key pinned by that run) is
  // followed when the connection drops: the record says where it is now.
  options.follow = [&app, name]() -> std::optional<SshTarget> {
    return RecordedSshTarget(app, name);
  };

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
        if (local_port != kubeconfig_port && rec.access_mode != "direct") {
          console.Note("the kubeconfig names port " + std::to_string(kubeconfig_port) +
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
      case PortForwardEvent::Kind::kFollowed:
        console.Note("VM " + name + " was replaced (its record names SSH on " + event.message +
                     " now): reconnecting the tunnel to the new VM");
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
