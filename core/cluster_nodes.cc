#include "cluster_nodes.h"

#include <algorithm>

#include "error.h"

namespace gpuprov {
namespace {

constexpr std::size_t kMaxVmNameLength = 39;  // ValidateVmName (spec.h)
constexpr std::string_view kAgentInfix = "-agent-";

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += names[i];
  }
  return out;
}

NodesDecision Refuse(std::string reason, std::string hint) {
  return NodesDecision{true, std::move(reason), std::move(hint)};
}

}  // namespace

int ParseNodeCount(const std::string& text, const std::string& field) {
  const bool digits = !text.empty() && text.size() <= 6 &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    throw UsageError(field + ": \"" + text + "\" is not a whole number of nodes",
                     "give the number of VMs in the cluster, e.g. 3 (1: one VM)");
  }
  return std::stoi(text);
}

std::string ClusterNodeName(const std::string& cluster, int index) {
  if (index == 0) return cluster;
  return cluster + std::string(kAgentInfix) + std::to_string(index);
}

std::size_t MaxClusterNameLength(int nodes) {
  if (nodes <= 1) return kMaxVmNameLength;
  const std::size_t digits = std::to_string(nodes - 1).size();
  return kMaxVmNameLength - kAgentInfix.size() - digits;
}

NodesDecision DecideNodes(const NodesQuestion& q) {
  const std::string asked = q.origin.empty() ? std::to_string(q.nodes) + " nodes" : q.origin;
  if (q.nodes < 1) {
    return Refuse("a cluster has at least one node (" + asked + ")",
                  "give --nodes 1 or more; nothing was created");
  }
  if (q.nodes == 1) return {};
  if (q.nodes > kMaxClusterNodes) {
    return Refuse("gpuprov makes at most " + std::to_string(kMaxClusterNodes) +
                      " nodes per cluster (" + asked + ")",
                  "give fewer nodes; nothing was created");
  }
  if (q.cluster.size() > MaxClusterNameLength(q.nodes)) {
    return Refuse("the cluster name '" + q.cluster + "' is too long for " +
                      std::to_string(q.nodes) + " nodes: its agents are named " +
                      ClusterNodeName(q.cluster, q.nodes - 1) + ", above 39 characters",
                  "choose a name of at most " + std::to_string(MaxClusterNameLength(q.nodes)) +
                      " characters; nothing was created");
  }
  if (q.several_candidates) {
    return Refuse("the nodes of a cluster share one cloud and region, and several candidates "
                  "were given (" + asked + ")",
                  "name one cloud and one region for a cluster; nothing was created");
  }
  const std::string can = q.clouds_that_can.empty()
                              ? std::string("no driver found here can")
                              : "clouds that can: " + JoinNames(q.clouds_that_can);
  if (q.cloud == "docker") {
    return Refuse("the docker cloud is a test cloud of single VMs: it makes no clusters (" +
                      asked + ")",
                  can + "; nothing was created");
  }
  if (!q.driver_can_cluster) {
    return Refuse("the " + q.cloud + " driver cannot make multi-node clusters (" + asked + ")",
                  can + "; or drop --nodes for one VM; nothing was created");
  }
  if (!q.kubernetes) {
    return Refuse("several nodes make one k3s cluster, and Kubernetes is off (" + asked + ")",
                  "drop --no-k8s (or kubernetes: false), or make separate VMs with --nodes 1; "
                  "nothing was created");
  }
  if (q.driver_max_nodes && q.nodes > *q.driver_max_nodes) {
    return Refuse("the " + q.cloud + " driver makes at most " +
                      std::to_string(*q.driver_max_nodes) + " nodes per cluster (" + asked + ")",
                  "give --nodes " + std::to_string(*q.driver_max_nodes) +
                      " or fewer; nothing was created");
  }
  return {};
}

std::vector<VmRecord> ClusterAgents(const std::vector<VmRecord>& records,
                                    const std::string& cluster) {
  std::vector<VmRecord> agents;
  for (const VmRecord& r : records) {
    if (!cluster.empty() && r.cluster == cluster && r.role == "agent") agents.push_back(r);
  }
  std::sort(agents.begin(), agents.end(),
            [](const VmRecord& a, const VmRecord& b) { return a.node_index < b.node_index; });
  return agents;
}

std::vector<std::string> ClusterLines(const std::vector<VmRecord>& records) {
  std::vector<std::string> lines;
  for (const VmRecord& r : records) {
    if (r.role != "server" || r.cluster.empty()) continue;
    const std::vector<VmRecord> agents = ClusterAgents(records, r.cluster);
    std::string names = r.name + " server";
    for (const VmRecord& a : agents) names += ", " + a.name;
    std::string line = "cluster " + r.cluster + ": " + std::to_string(agents.size() + 1) + " of " +
                       std::to_string(std::max(r.cluster_nodes, 1)) + " nodes (" + names + ")";
    lines.push_back(line);
  }
  return lines;
}

std::vector<std::string> CloudsThatCanCluster(const std::vector<DriverInfo>& drivers) {
  std::vector<std::string> names;
  for (const DriverInfo& d : drivers) {
    if (d.ok() && d.has(GPUPROV_CAP_CLUSTER)) names.push_back(d.name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace gpuprov
