// SPDX-License-Identifier: Apache-2.0
//
// The Massed Compute driver's reading of VM API answers (plugins/massedcompute/
// massedcompute_rules.cc): the GPU inventory (products from descriptions like
// "1x RTX A6000 (48GB)"), product descriptions alone, and instance names.
#include "driver_fuzz.h"
#include "fuzz_input.h"
#include "massedcompute_rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace f = gpuprov::fuzz;
  namespace m = gpuprov::massedcompute;
  const std::string text = f::Text(data, size);
  f::Try([&] { (void)m::ParseDescription(text); });
  f::Try([&] { (void)m::CanonicalModel(text); });
  f::Try([&] { (void)m::VmNameOf(text); });
  f::Try([&] {
    Poco::JSON::Object::Ptr doc = f::JsonObject(text);
    if (!doc) return;
    std::vector<m::Product> products = m::ParseInventory(doc);
    (void)m::OfferedText(products);
    for (const m::Product& p : products) (void)m::GpuMatches("A6000", p);
  });
  return 0;
}
