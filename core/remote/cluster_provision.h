// `gpuprov provision --nodes N` (docs/multi-node.md): one k3s server and N-1 agents on one cloud
// and region. Each node is its own Provision (provision.h) with its own record, lock and driver
// handle; the VMs are made side by side (one thread per node, each using only its own handle, as
// the driver ABI asks), then the peers are let in, the server is brought up, the agents join
// over SSH and the cluster is validated. A node that cannot be had leaves the cluster with the
// nodes it got, reported node by node (exit 1); a re-run makes only what is missing.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster_join.h"
#include "provision_options.h"
#include "ssh_client.h"

namespace gpuprov {

class Provision;

/// How one node of the cluster ended.
struct NodeOutcome {
  std::string name;
  std::string role;
  bool ok = false;
  std::string error;  // why it is not in the cluster ("" when it is)
  std::string hint;
};

/// The report's node-by-node lines, e.g. "  train-agent-2  agent  failed: no capacity ...".
std::vector<std::string> NodeReportLines(const std::vector<NodeOutcome>& nodes);

class ClusterProvision {
 public:
  /// \a server has resolved its inputs (Provision::ResolveInputs) and asks for nodes > 1.
  explicit ClusterProvision(Provision& server);
  ~ClusterProvision();

  /// The whole flow; 0 when every node is in the validated cluster, 1 when some are not (each
  /// named with why). Refusals before anything is made throw UsageError (exit 2).
  int Run();

 private:
  struct Node;

  /// Every node's driver, lock, record and plan; the offer chosen and consented to once, for
  /// the cluster. Nothing is made.
  void PrepareNodes();
  /// Every node's intent recorded before any create.
  void RecordIntents();
  /// Create, running, ports, SSH and TTL: each node on its own thread.
  void MakeVms();
  /// The driver's open_peer_ports with every node that has a VM, and on clouds whose node
  /// firewall admits peers, each node's peer set.
  void LetPeersIn();
  /// The server's install and validation (cluster_bringup.h); its kubeconfig is the cluster's.
  void BringUpServer();
  /// The server's bring-up (BringUpServer) on this thread while each agent's installer
  /// (prepare: everything but the join) runs on its own.
  void BringUpServerWhileAgentsPrepare();
  /// Each prepared agent joins with the server's token, over SSH.
  void JoinAgents();
  /// Every node Ready with its GPUs, the overlay check between the server and an agent, the
  /// CUDA check on every node.
  void ValidateCluster();
  /// The CUDA check (cuda_check.h) on each node still in, at once: one pod per node bound to
  /// it (\a status[i] is \a members[i]'s node), through the server's API; a node whose check
  /// fails is out of the cluster with the cause. Skipped with --no-smoke-test or no GPUs.
  void CheckCudaOnEveryNode(const std::vector<Node*>& members,
                            const std::vector<ClusterNodeStatus>& status);
  /// The server's report, then each node's line; the exit status.
  int Report();

  /// The nodes whose VM is made and whose SSH answers, in index order.
  std::vector<Node*> Reachable();

  Provision& server_;
  std::vector<std::unique_ptr<Node>> nodes_;  // [0] the server, then the agents by index
  std::vector<std::unique_ptr<ProvisionFlags>> agent_flags_;  // kept for the agents' Provisions
};

}  // namespace gpuprov
