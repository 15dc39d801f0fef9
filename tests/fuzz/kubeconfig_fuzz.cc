// SPDX-License-Identifier: Apache-2.0
//
// Reading k3s's kubeconfig (core/kubeconfig.cc: YAML, current context, base64 *-data fields),
// then rendering the user's kubeconfig from what was read. Contract: KubeCredentials or
// gpuprov::Error naming what is missing.
#include <cstdint>

#include "error.h"
#include "fuzz_input.h"
#include "kubeconfig.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    gpuprov::KubeCredentials c = gpuprov::ParseKubeconfig(gpuprov::fuzz::Text(data, size));
    (void)gpuprov::RenderKubeconfig("fuzz-vm", "https://127.0.0.1:16443", c);
  } catch (const gpuprov::Error&) {
  }
  return 0;
}
