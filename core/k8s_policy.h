// Whether a VM gets Kubernetes (k3s), from the resolved `kubernetes` option and whether the
// cloud's driver can host Kubernetes (docs/design.md §2, "hosts kubernetes").
//
// The rule:
//   - Nobody asked (Source::kDefault): on where the cloud can host it; elsewhere off, with a
//     note saying it was skipped.
//   - config.toml `kubernetes = true` (Source::kConfig) counts like the default: config.toml
//     applies to every provision on every cloud, so it states a preference, not a demand
//     about this VM. On a cloud that cannot host Kubernetes it is skipped with a note, not
//     refused.
//   - true from a flag (--k8s), the spec file or GPUPROV_KUBERNETES is a demand about this
//     VM: on a cloud that cannot host Kubernetes it is refused (refused = true, and the note
//     is the error message to show, with exit code 2, before anything is created).
//   - false from any source: off, with a note naming where it came from.
#pragma once

#include <string>
#include <string_view>

#include "provision_options.h"

namespace gpuprov {

struct K8sDecision {
  bool enabled = false;
  /// The request cannot be met; nothing may be created. note holds the error message.
  bool refused = false;
  /// For the user: why Kubernetes is off, or the refusal. Empty when enabled.
  std::string note;
};

K8sDecision DecideKubernetes(const Resolved<bool>& kubernetes, std::string_view cloud,
                             bool cloud_hosts_kubernetes);

}  // namespace gpuprov
