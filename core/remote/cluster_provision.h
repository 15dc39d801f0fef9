// `gpuprov provision --nodes N` (docs/multi-node.md): one k3s server and N-1 agents on one cloud
// and region. Each node is its own Provision (provision.h) with its own record, lock and driver
// handle; the VMs are made side by side (one thread per node, each using only its own handle, as
// the driver ABI asks), then the peers are let in, the server is brought up, the agents join
// over SSH and the cluster is validated. A node that cannot be had leaves the cluster with the
// nodes it got, reported node by node (exit 1); a re-run makes only what is missing.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster_bringup.h"
#include "cluster_join.h"
#include "installer_bundle.h"
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

/// What the server of a cluster needs once its install is done. A boot install ran with the
/// boot script's arguments (ClusterPlan::boot_args), before the VM had its addresses and peers.
enum class ServerRerun {
  kNone,       // the install ran with every argument the cluster needs
  kPeersOnly,  // only the node firewall's peers are missing: `--peers-only` (k3s untouched)
  kInstaller,  // k3s's own settings differ (--node-ip ...): the installer again (k3s restarts)
};
struct ServerRerunDecision {
  ServerRerun action = ServerRerun::kNone;
  std::string reason;
};
/// k3s's node addresses in force on a node: what its config.yaml says.
struct K3sNodeAddresses {
  std::string node_ip;           // node-ip ("" when k3s chooses)
  std::string node_external_ip;  // node-external-ip
};
inline constexpr const char* kK3sConfigPath = "/etc/rancher/k3s/config.yaml";
/// The shell command that prints the node address lines of kK3sConfigPath (none: nothing).
std::string K3sNodeAddressesCommand();
/// The addresses in \a config_lines (K3sNodeAddressesCommand's output: `node-ip: "10.0.0.5"`).
K3sNodeAddresses ParseK3sNodeAddresses(const std::string& config_lines);

/// The server's rerun for \a plan when its installer's arguments are now \a now (the
/// addresses and peers known after create) and its k3s config has \a in_force (none after a
/// boot run, whose script was written before the VM had addresses; an earlier run's on a
/// re-run or a scale-up), first match wins: this
/// bring-up \a pushed the installer with \a now, nothing; on the boot route a setting of k3s's
/// other than the peers differs, the installer; the node firewall admits peers (tunnel access),
/// `--peers-only` with them (an install found done, at boot or by an earlier run, may have
/// fewer); else nothing.
ServerRerunDecision DecideServerRerun(const ClusterPlan& plan, bool pushed,
                                      const InstallerArgs& now, const K3sNodeAddresses& in_force);
/// The arguments of the server's ServerRerun::kInstaller run: \a now with the plan's node
/// firewall (NodeFirewallFor), as an agent's join run has, since the installer applies --peer
/// only with it (a boot-route tunnel cluster: Verda).
InstallerArgs ServerRerunArgs(const ClusterPlan& plan, InstallerArgs now);

/// An agent on a cloud-init boot route waits for its boot install (cloud-init status --wait), so
/// the boot run never runs after the join and undoes its settings; the installer is then on the
/// node when this exits 0, and the join needs no push before it.
std::string AgentBootInstallWaitCommand();

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
  /// Create, running and ports: each node on its own thread. SSH waits for no other node:
  /// each node's own thread reaches it (ReachOverSsh) in BringUpServerAndJoinAgents.
  void MakeVms();
  /// The driver's open_peer_ports with every node that has a VM, and on clouds whose node
  /// firewall admits peers, each running node's peer set (their addresses are known once they
  /// run, long before SSH answers).
  void LetPeersIn();
  /// The server's SSH and bring-up on this thread while each agent, on its own thread, is
  /// reached over SSH, prepared (PrepareAgent) and then joins (JoinAgent) as soon as the
  /// server's k3s runs: the server waits for no agent's boot, and the joins overlap the
  /// server's validation.
  void BringUpServerAndJoinAgents();
  /// SSH to the node (its wait bounded by ssh_wait_seconds), its TTL, its shell.
  void ReachOverSsh(Node& node);
  /// The server's install and validation (cluster_bringup.h); its kubeconfig is the cluster's.
  /// \a on_token gets the join token once k3s runs there with the cluster's settings
  /// (OnServerInstalled).
  void BringUpServer(const std::function<void(const std::string&)>& on_token);
  /// On the server once its install is done: the rerun DecideServerRerun says, then the token.
  std::string OnServerInstalled(NodeShell& shell);
  /// An agent's install without the join (GPU runtime, k3s binary, node firewall), which needs
  /// no server: pushed over SSH, or on a cloud-init boot route the boot install waited for.
  void PrepareAgent(Node& agent);
  /// An agent's installer arguments: on tunnel access its node firewall too admits SSH and,
  /// from the peers only, k3s's ports (its kubelet would otherwise answer the internet).
  static InstallerArgs AgentArgs(const Provision& agent);
  /// An agent joins with the server's token, over SSH.
  void JoinAgent(Node& agent, const std::string& token, const std::string& url);
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
