// SPDX-License-Identifier: Apache-2.0
//
// The DigitalOcean driver's reading of API answers: droplets into the protocol's VM JSON (state,
// public address, size, image, tags), firewalls (open ports, attached droplets), and error
// bodies (message, 422 classification). The response readers live in the driver's translation
// unit (anonymous namespace); this target compiles that source so it calls them as they are,
// without a network.
#include "../../plugins/digitalocean/digitalocean_driver.cc"  // NOLINT(bugprone-suspicious-include)

#include "driver_fuzz.h"
#include "fuzz_input.h"

using gpuprov::drivers::json::Object;
namespace json = gpuprov::drivers::json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace f = gpuprov::fuzz;
  namespace d = gpuprov::digitalocean;
  const std::string text = f::Text(data, size);
  f::Try([&] { (void)d::Classify422(d::ApiMessage(text), {"fuzz capacity"}); });
  Object::Ptr doc = f::JsonObject(text);
  for (const Object::Ptr& droplet : f::Resources(doc, "droplet", "droplets")) {
    f::Try([&] { (void)json::Stringify(d::VmJson(droplet, {22, 6443, 443})); });
    f::Try([&] { (void)d::TagsWithPrefix(droplet, d::kVmTagPrefix); });
    f::Try([&] { (void)d::HasTag(droplet, d::kManagedTag); });
  }
  for (const Object::Ptr& fw : f::Resources(doc, "firewall", "firewalls")) {
    f::Try([&] { (void)d::OpenToAll(fw, 6443); });
    f::Try([&] { (void)d::DropletIdsOf(fw); });
  }
  return 0;
}
