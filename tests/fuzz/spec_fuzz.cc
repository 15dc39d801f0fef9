// SPDX-License-Identifier: Apache-2.0
//
// The spec YAML loader (core/spec.cc) on arbitrary text. Its contract: a Spec, or
// gpuprov::Error (a usage error naming the field). Any other exception escaping, a crash or a
// sanitizer report is a finding.
#include <cstdint>

#include "error.h"
#include "fuzz_input.h"
#include "spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    gpuprov::Spec spec = gpuprov::ParseSpec(gpuprov::fuzz::Text(data, size), "spec.yaml");
    if (spec.name) gpuprov::ValidateVmName(*spec.name, "name");
  } catch (const gpuprov::Error&) {
  }
  return 0;
}
