// SPDX-License-Identifier: Apache-2.0
//
// The config.toml loader (core/config.cc) on arbitrary text, then the per-cloud settings JSON
// it hands a driver for every [clouds.NAME] table it accepted. Contract: a Config, or
// gpuprov::Error. Anything else escaping, a crash or a sanitizer report is a finding.
#include <cstdint>

#include "config.h"
#include "error.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    gpuprov::Config config = gpuprov::ParseConfig(gpuprov::fuzz::Text(data, size), "config.toml");
    for (const char* cloud : {"docker", "digitalocean", "aws", "gcp", "lambda", "nebius"}) {
      (void)gpuprov::CloudSettingsJson(config, cloud);
    }
  } catch (const gpuprov::Error&) {
  }
  return 0;
}
