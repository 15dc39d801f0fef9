// `gpuprov scale NAME --nodes M` (docs/multi-node.md): a multi-node cluster grows by the agents
// it lacks (the cluster flow of `provision`, from the server's record) or shrinks by its newest
// agents: each is cordoned, drained (evictions, bounded), deleted from Kubernetes, then its VM is
// deleted, and the remaining nodes' peer ports are set to the new list.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "app_context.h"

namespace gpuprov {

class NodeShell;

struct ScaleOptions {
  std::string name;
  int nodes = 1;
  bool yes = false;
};

int RunScale(const AppContext& app, const ScaleOptions& options);

/// The pods of \a pods_json (a PodList) that a drain evicts: every pod but those a DaemonSet
/// owns and mirror pods, as "namespace/name".
std::vector<std::string> PodsToEvict(const std::string& pods_json);

/// Cordons, drains (evictions; waits up to \a drain_wait for the pods to go) and deletes the
/// Kubernetes node \a node through the server's API. Pods still there after the wait are
/// deleted with the node, as `kubectl drain --timeout` then `kubectl delete node` leave them.
void RemoveNodeFromCluster(NodeShell& server, const std::string& node,
                           std::chrono::seconds drain_wait);

}  // namespace gpuprov
