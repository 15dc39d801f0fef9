// SPDX-License-Identifier: Apache-2.0
//
// The cluster probe's sectioned node output (core/remote/cluster_probe.cc: "@@name@@" sections, the
// installer's status marker JSON, cloud-init status, nvidia-smi lines, key=value init facts),
// then what gpuprov does with a parsed probe: the state-record map and the decision table on
// both boot routes. Contract: ParseNodeProbe returns or throws gpuprov::Error.
#include <chrono>
#include <cstdint>

#include "cluster_probe.h"
#include "error.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuprov;
  try {
    NodeProbe probe = ParseNodeProbe(fuzz::Text(data, size));
    (void)DescribeNodeProbe(probe);
    (void)CannotHostK3s(probe);
    for (BootRoute route : {BootRoute::kCloudInit, BootRoute::kStartupScript, BootRoute::kNone}) {
      ClusterDecision d = DecideClusterAction(probe, route, std::chrono::seconds(30),
                                              std::chrono::seconds(900), "0.1.0");
      (void)ToString(d.action);
    }
  } catch (const Error&) {
  }
  return 0;
}
