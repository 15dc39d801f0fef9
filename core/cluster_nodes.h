// Multi-node clusters (`--nodes N`, spec `nodes:`; docs/multi-node.md): the names of a
// cluster's nodes and the decision whether a cloud can make N of them. Node 0 is the k3s
// server, the VM named after the cluster (its record is a single-node cluster's record); agent k
// (k = 1..N-1) is the VM NAME-agent-k with its own record.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "driver_host.h"
#include "state_store.h"

namespace gpuprov {

inline constexpr int kDefaultClusterNodes = 1;
/// The most nodes gpuprov makes for one cluster whatever the driver says (names stay within
/// the 39-character VM name limit: "-agent-" and three digits).
inline constexpr int kMaxClusterNodes = 999;

/// --nodes N / nodes: N as text: a whole number (leading '+' or '-' and spaces refused). Throws
/// UsageError naming \a field for anything else. Range is DecideNodes's business.
int ParseNodeCount(const std::string& text, const std::string& field);

/// The VM name of node \a index of cluster \a cluster: the cluster's own name for 0 (the
/// server), "<cluster>-agent-<index>" for an agent.
std::string ClusterNodeName(const std::string& cluster, int index);

/// The longest cluster name whose agent names stay valid VM names for \a nodes nodes.
std::size_t MaxClusterNameLength(int nodes);

/// What DecideNodes is asked.
struct NodesQuestion {
  int nodes = kDefaultClusterNodes;
  /// Where the count came from, as a phrase ("--nodes 3 from the command line", "nodes: 3 in
  /// spec.yaml"), for messages.
  std::string origin;
  std::string cluster;  // the cluster (server VM) name
  std::string cloud;
  bool kubernetes = true;             // the cluster gets k3s (a multi-node plain VM set is not one)
  bool several_candidates = false;    // --cloud a,b / --region x,y / any
  bool driver_can_cluster = false;    // GPUPROV_CAP_CLUSTER
  std::optional<int> driver_max_nodes;  // check's "max_cluster_nodes"; nullopt: not known (yet)
  std::vector<std::string> clouds_that_can;  // drivers found with GPUPROV_CAP_CLUSTER, sorted
};

struct NodesDecision {
  bool refused = false;
  /// The refusal (exit 2, before anything is made) and its hint; empty when accepted.
  std::string reason;
  std::string hint;
};

/// The rule, first match wins:
///   nodes < 1                                   -> refused
///   nodes == 1                                  -> accepted (a single VM, as without --nodes)
///   nodes > kMaxClusterNodes                    -> refused
///   agent names too long for the cluster name   -> refused
///   candidates (several clouds or regions)      -> refused (one cloud and region for all nodes)
///   the docker test cloud                       -> refused (it is a test cloud of single VMs)
///   driver without GPUPROV_CAP_CLUSTER          -> refused, naming the clouds that can
///   Kubernetes off                              -> refused (a cluster is k3s)
///   driver's max_cluster_nodes known, exceeded  -> refused, naming the limit
///   otherwise                                   -> accepted
NodesDecision DecideNodes(const NodesQuestion& question);

/// The agents' records of cluster \a cluster among \a records, by node index.
std::vector<VmRecord> ClusterAgents(const std::vector<VmRecord>& records,
                                    const std::string& cluster);

/// "cluster train: 3 nodes (train server, train-agent-1, train-agent-2)" for each cluster
/// server among \a records; empty when there is none.
std::vector<std::string> ClusterLines(const std::vector<VmRecord>& records);

/// The names of the drivers in \a drivers that load and carry GPUPROV_CAP_CLUSTER, sorted.
std::vector<std::string> CloudsThatCanCluster(const std::vector<DriverInfo>& drivers);

}  // namespace gpuprov
