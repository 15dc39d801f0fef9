// What `gpuprov provision` says once the VM is ready: the record as JSON, or how to get in (the
// shell, the kubeconfig, the tunnel), with the candidates tried before it and a warning when the
// Kubernetes API is open to the internet. It names the route that ran and only the ports the
// record says are open.
#pragma once

#include <map>
#include <string>

#include "app_context.h"
#include "cluster_bringup.h"
#include "k8s_policy.h"
#include "state_store.h"

namespace gpuprov {

/// A finished provision, as the report needs it.
struct ProvisionOutcome {
  VmRecord record;
  std::string vm_state;  // the cloud's word for the VM ("" when not known: the phase is shown)
  K8sDecision k8s;
  ClusterResult cluster;    // with Kubernetes on
  std::string merged_into;  // the user's kubeconfig this run merged into ("" when none)
  std::string tried;        // TriedReport of the candidates that failed before ("" when none)
};

/// "create 1.0 s, ssh 2.1 s, install 3.6 s, ..." in the order the phases run.
std::string PhaseTimes(const std::map<std::string, double>& seconds);

/// The text summary: where the VM is, how to reach it, its TTL, and with Kubernetes its
/// kubeconfig and how to use it.
std::string ReadySummary(const ProvisionOutcome& outcome);

/// Prints the outcome: notes, then the record as JSON (structured output) or ReadySummary and,
/// for direct access, what is open to whom.
void ReportProvision(const AppContext& app, const ProvisionOutcome& outcome);

}  // namespace gpuprov
