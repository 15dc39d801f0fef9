#include "k8s_policy.h"

namespace gpuprov {
namespace {

std::string SkippedNote(std::string_view cloud) {
  std::string note = "Kubernetes skipped: the " + std::string(cloud) + " cloud cannot host k3s";
  if (cloud == "docker") note += " (it is a test cloud)";
  note += "; the VM is plain";
  return note;
}

/// What the user did to ask for Kubernetes, and how to take it back.
struct Demand {
  std::string what;
  std::string undo;
};

Demand DemandOf(const Resolved<bool>& kubernetes) {
  switch (kubernetes.source) {
    case Source::kFlag:
      return {kubernetes.origin + " from the command line",
              "drop " + kubernetes.origin + " or pass --no-k8s"};
    case Source::kSpec:
      return {"kubernetes: true in " + kubernetes.origin,
              "set kubernetes: false in " + kubernetes.origin + " or pass --no-k8s"};
    case Source::kEnv:
      return {kubernetes.origin + "=true in the environment",
              "unset " + kubernetes.origin + " or pass --no-k8s"};
    case Source::kConfig:
    case Source::kDefault:
      break;
  }
  return {"", ""};
}

}  // namespace

K8sDecision DecideKubernetes(const Resolved<bool>& kubernetes, std::string_view cloud,
                             bool cloud_hosts_kubernetes) {
  K8sDecision decision;
  if (!kubernetes.value) {
    decision.note = "Kubernetes off (" + DescribeOrigin(kubernetes) + "); the VM is plain";
    return decision;
  }
  if (cloud_hosts_kubernetes) {
    decision.enabled = true;
    return decision;
  }
  switch (kubernetes.source) {
    case Source::kDefault:
      decision.note = SkippedNote(cloud);
      return decision;
    case Source::kConfig:
      decision.note = SkippedNote(cloud) + " (kubernetes = true " + DescribeOrigin(kubernetes) +
                      " applies only to clouds that can host it)";
      return decision;
    case Source::kFlag:
    case Source::kSpec:
    case Source::kEnv:
      break;
  }
  const Demand demand = DemandOf(kubernetes);
  decision.refused = true;
  decision.note = "the " + std::string(cloud) + " cloud cannot host Kubernetes (" + demand.what +
                  "); " + demand.undo + ", or choose a cloud that can";
  return decision;
}

}  // namespace gpuprov
