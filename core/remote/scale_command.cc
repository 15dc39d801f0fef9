#include "scale_command.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "cloud.h"
#include "cluster_join.h"
#include "cluster_nodes.h"
#include "console.h"
#include "down_command.h"
#include "error.h"
#include "gpu_request.h"
#include "interrupt.h"
#include "kube_api_client.h"
#include "node_shell.h"
#include "provision.h"
#include "ssh_client.h"
#include "state_store.h"
#include "vm_records.h"

namespace gpuprov {
namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;

const std::string kApi = "https://127.0.0.1:6443";

/// The k8s node of VM \a rec as the server's API shows it ("" when it has none).
std::string NodeOf(NodeShell& server, const VmRecord& rec) {
  const SshRunResult r = server.RunAsRoot(
      "cluster nodes", std::string(kNodeApiFunction) + "api " + kApi + "/api/v1/nodes\n", "",
      std::chrono::seconds(60));
  const auto nodes = MatchClusterNodes(r.stdout_text, {{rec.name, {rec.private_ip, rec.public_ip}}});
  return nodes.empty() ? "" : nodes[0].node_name;
}

/// Scale up: the cluster flow of `provision` with the server's recorded choices and M nodes.
int ScaleUp(const AppContext& app, const VmRecord& server, const ScaleOptions& options) {
  ProvisionFlags flags;
  flags.name = server.name;
  flags.cloud = server.cloud;
  if (!server.region.empty()) flags.region = server.region;
  if (!server.gpus.empty()) flags.gpus = ParseGpuRequest(server.gpus, "the record's gpus");
  if (!server.instance_type.empty()) flags.instance_type = server.instance_type;
  flags.kubernetes = true;
  flags.nodes = options.nodes;
  flags.yes = options.yes;
  const std::optional<std::string> no_spec;
  return RunProvision(app, flags, no_spec);
}

}  // namespace

std::vector<std::string> PodsToEvict(const std::string& pods_json) {
  std::vector<std::string> out;
  Object::Ptr list = ParseKubeObject(TrimSpace(pods_json));
  if (!list || !list->isArray("items")) return out;
  Array::Ptr items = list->getArray("items");
  for (std::size_t i = 0; i < items->size(); ++i) {
    Object::Ptr meta = items->getObject(static_cast<unsigned>(i))->getObject("metadata");
    if (!meta) continue;
    bool daemon = false;
    if (meta->isArray("ownerReferences")) {
      Array::Ptr owners = meta->getArray("ownerReferences");
      for (std::size_t j = 0; j < owners->size(); ++j) {
        if (owners->getObject(static_cast<unsigned>(j))->optValue<std::string>("kind", "") ==
            "DaemonSet") {
          daemon = true;
        }
      }
    }
    Object::Ptr annotations = meta->isObject("annotations") ? meta->getObject("annotations") : nullptr;
    if (annotations && annotations->has("kubernetes.io/config.mirror")) daemon = true;
    if (!daemon) {
      out.push_back(meta->optValue<std::string>("namespace", "default") + "/" +
                    meta->optValue<std::string>("name", ""));
    }
  }
  return out;
}

void RemoveNodeFromCluster(NodeShell& server, const std::string& node,
                           std::chrono::seconds drain_wait) {
  const std::string api = kNodeApiFunction;
  const std::string node_path = kApi + "/api/v1/nodes/" + node;
  // Cordon: no new pod lands on the node (what `kubectl cordon` sends).
  server.RunAsRoot("cordon " + node,
                   api + "api -o /dev/null -X PATCH -H 'Content-Type: "
                         "application/strategic-merge-patch+json' --data-binary "
                         "'{\"spec\":{\"unschedulable\":true}}' '" + node_path + "'\n",
                   "", std::chrono::seconds(60));
  const std::string list = api + "api '" + kApi + "/api/v1/pods?fieldSelector=spec.nodeName%3D" +
                           node + "' 2>/dev/null\n";
  std::vector<std::string> pods =
      PodsToEvict(server.RunAsRoot("pods on " + node, list, "", std::chrono::seconds(60)).stdout_text);
  // Drain: the Eviction API for each pod (what `kubectl drain` uses), then a bounded wait.
  std::string evict = api;
  for (const std::string& p : pods) {
    const std::string ns = p.substr(0, p.find('/')), name = p.substr(p.find('/') + 1);
    evict += "printf '%s' '{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":"
             "{\"name\":\"" + name + "\",\"namespace\":\"" + ns + "\"}}' | api -o /dev/null -X "
             "POST -H 'Content-Type: application/json' --data-binary @- '" + kApi +
             "/api/v1/namespaces/" + ns + "/pods/" + name + "/eviction' || true\n";
  }
  if (!pods.empty()) server.RunAsRoot("drain " + node, evict, "", std::chrono::seconds(120));
  const auto start = std::chrono::steady_clock::now();
  while (!pods.empty() && std::chrono::steady_clock::now() - start < drain_wait) {
    ThrowIfInterrupted("draining " + node);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    pods = PodsToEvict(
        server.RunAsRoot("pods on " + node, list, "", std::chrono::seconds(60)).stdout_text);
  }
  if (!pods.empty()) {
    Console::Get().Note(std::to_string(pods.size()) + " pod(s) still on " + node + " after " +
                        std::to_string(drain_wait.count()) + "s of draining; they go with the node");
  }
  // `kubectl delete node`.
  server.RunAsRoot("delete node " + node,
                   api + "api -o /dev/null -X DELETE '" + node_path + "'\n", "",
                   std::chrono::seconds(60));
}

int RunScale(const AppContext& app, const ScaleOptions& options) {
  Console& console = Console::Get();
  StateStore store(app.paths);
  std::optional<VmRecord> server = store.Load(options.name);
  if (!server) {
    throw UsageError("gpuprov has no cluster named '" + options.name + "'",
                     "`gpuprov list` shows the clusters; make one with `gpuprov provision --name " +
                         options.name + " --nodes N`");
  }
  if (server->role != "server") {
    throw UsageError("'" + options.name + "' is not the server of a multi-node cluster",
                     "a cluster is made with `gpuprov provision --nodes N`; scale names its "
                     "server");
  }
  NodesQuestion q;
  q.nodes = options.nodes;
  q.origin = "--nodes " + std::to_string(options.nodes) + " from the command line";
  q.cluster = server->cluster;
  q.cloud = server->cloud;
  q.driver_can_cluster = true;  // it made this cluster
  if (q.nodes < 1) {
    const NodesDecision d = DecideNodes(q);
    throw UsageError(d.reason, d.hint);
  }
  std::vector<VmRecord> agents = ClusterAgents(store.List(), server->cluster);
  std::vector<VmRecord> going;
  for (const VmRecord& a : agents) {
    if (a.node_index >= options.nodes) going.push_back(a);
  }
  if (going.empty()) return ScaleUp(app, *server, options);

  std::reverse(going.begin(), going.end());  // the newest first
  console.Step("scale", options.name + ": removing " + std::to_string(going.size()) +
                            " agent(s), newest first");
  SshSession session = SshSession::Connect(SshTargetOf(app, *server), std::chrono::seconds(30));
  SshNodeShell shell(&session);
  for (const VmRecord& listed : going) {
    FileLock lock = store.LockVm(listed.name, 60 * 1000);
    std::optional<VmRecord> agent = store.Load(listed.name);
    if (!agent) continue;
    const std::string node = NodeOf(shell, *agent);
    if (!node.empty()) RemoveNodeFromCluster(shell, node, std::chrono::seconds(120));
    const DownOutcome outcome = DeleteVmAndFiles(app, store, agent, listed.name, listed.cloud);
    console.Result(outcome.text);
  }
  {
    FileLock lock = store.LockVm(options.name, 60 * 1000);
    if (std::optional<VmRecord> now = store.Load(options.name)) {
      now->cluster_nodes = options.nodes;
      store.Save(*now);
    }
  }
  // The peers that stay: the driver takes the removed ones out of the cluster's rules.
  std::vector<VmRecord> staying = {*server};
  for (const VmRecord& a : ClusterAgents(store.List(), server->cluster)) staying.push_back(a);
  std::vector<ClusterPeer> peers;
  for (const VmRecord& n : staying) {
    peers.push_back(ClusterPeer{n.vm_id, n.name, n.private_ip, n.public_ip});
  }
  DriverHost host = app.MakeDriverHost();
  const auto cloud = Cloud::Open(host, server->cloud, app.LoadUserConfig());
  cloud->OpenPeerPorts(server->cluster, ClusterPeerPorts(), peers);
  // Tunnel access (no cloud firewall in front), or a private network the cloud leaves
  // unfiltered: each node's own firewall admits its peers (docs/multi-node.md); every node that
  // stays is told the ones there are now.
  const bool tunnel = server->access_mode == "tunnel";
  if (tunnel || cloud->Check().private_network_unfiltered) {
    for (const VmRecord& n : staying) {
      std::vector<std::string> others;
      for (const VmRecord& o : staying) {
        if (o.name != n.name) others.push_back(PeerAddress(o));
      }
      SshSession node_session =
          SshSession::Connect(SshTargetOf(app, n), std::chrono::seconds(30));
      SshNodeShell node_shell(&node_session);
      if (tunnel) {
        SetNodeFirewallPeers(node_shell, n.name, others, "gpuprov scale");
      } else {
        SetPrivatePeersFirewall(node_shell, n.name, n.private_ip, others, "gpuprov scale");
      }
    }
  }
  console.Result(options.name + ": " + std::to_string(peers.size()) + " node(s)\n");
  return 0;
}

}  // namespace gpuprov
