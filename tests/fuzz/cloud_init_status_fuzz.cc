// SPDX-License-Identifier: Apache-2.0
//
// `cloud-init status --format json` (and its text form) as the probe reads it: the input is
// the cloud-init section of an otherwise well-formed probe output, so every execution reaches
// the cloud-init parser in core/remote/cluster_probe.cc. Contract as for the probe: a NodeProbe or
// gpuprov::Error.
#include <chrono>
#include <cstdint>
#include <string>

#include "cluster_probe.h"
#include "error.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuprov;
  std::string body = fuzz::Text(data, size);
  // A line starting with "@@" would open another section: keep the input inside this one.
  for (size_t at = body.find("\n@@"); at != std::string::npos; at = body.find("\n@@", at)) {
    body[at + 1] = '#';
  }
  if (body.rfind("@@", 0) == 0) body[0] = '#';
  const std::string output = "@@gpuprov-probe 1@@\n@@marker@@\n\n@@lock@@\nfree\n@@boot-trace@@\n\n"
                             "@@cloud-init@@\n" + body + "\n@@k3s@@\ninactive\n@@gpu@@\n"
                             "@@init@@\npid1=systemd\nsystemd_booted=yes\ncontainer=none\n";
  try {
    NodeProbe probe = ParseNodeProbe(output);
    (void)DescribeNodeProbe(probe);
    ClusterDecision d = DecideClusterAction(probe, BootRoute::kCloudInit, std::chrono::seconds(30),
                                            std::chrono::seconds(900), "0.1.0");
    (void)ToString(d.action);
  } catch (const Error&) {
  }
  return 0;
}
