// SPDX-License-Identifier: Apache-2.0
//
// The Prime Intellect driver's reading of API answers: availability pages (offers.cc), the
// sshConnection field (ssh_connection.cc), provider lists, and pods into the protocol's VM JSON
// (state, SSH address and port, region, GPUs), which live in the driver's translation unit
// (anonymous namespace): this target compiles that source so it calls them as they are.
#include "../../plugins/primeintellect/primeintellect_driver.cc"  // NOLINT(bugprone-suspicious-include)

#include "driver_fuzz.h"
#include "fuzz_input.h"

using gpuprov::drivers::json::Object;
namespace json = gpuprov::drivers::json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace f = gpuprov::fuzz;
  namespace p = gpuprov::primeintellect;
  const std::string text = f::Text(data, size);
  f::Try([&] {
    p::AvailabilityPage page = p::ParseAvailability(text);
    for (const p::Offer& o : page.offers) (void)o.DisplayRegion();
  });
  f::Try([&] { (void)p::ParseProviderList(text); });
  f::Try([&] {
    std::string error;
    (void)p::ParseSshConnection(text, &error);
  });
  f::Try([&] { (void)p::ReadSshField(Poco::Dynamic::Var(text)); });
  for (const Object::Ptr& pod : f::Resources(f::JsonObject(text), "pod", "data")) {
    f::Try([&] { (void)p::VmResult(pod); });
    f::Try([&] { (void)p::IsGone(pod); });
  }
  return 0;
}
