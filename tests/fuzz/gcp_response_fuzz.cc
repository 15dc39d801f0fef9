// SPDX-License-Identifier: Apache-2.0
//
// The gcp driver's reading of Compute API and OAuth answers (plugins/gcp/gcp_rules.cc,
// gcp_auth.cc): error bodies, finished operations' errors, token answers, credential files, and
// the small readers of instance fields (state, zone/region, ssh-keys metadata).
#include "driver_fuzz.h"
#include "fuzz_input.h"
#include "gcp_auth.h"
#include "gcp_rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace f = gpuprov::fuzz;
  namespace g = gpuprov::gcp;
  const std::string text = f::Text(data, size);
  f::Try([&] {
    g::ApiError e = g::ParseApiError(409, text);
    (void)g::ClassifyApiError(e);
    (void)g::IsRateLimit(e);
  });
  f::Try([&] { (void)g::ParseTokenResponse(text); });
  f::Try([&] { (void)g::ParseCredentials(text, "credentials.json"); });
  f::Try([&] { (void)g::SshUserOf(text); });
  f::Try([&] { (void)g::RegionOf(text); });
  f::Try([&] { (void)g::LastSegment(text); });
  for (const auto& op : f::Resources(f::JsonObject(text), "operation", "items")) {
    f::Try([&] {
      g::OperationError e = g::ParseOperationError(op);
      (void)g::ClassifyOperationError(e.code);
    });
    f::Try([&] {
      if (op->has("status")) (void)g::StateOf(op->getValue<std::string>("status"));
    });
  }
  return 0;
}
