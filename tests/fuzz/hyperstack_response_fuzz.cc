// SPDX-License-Identifier: Apache-2.0
//
// The Hyperstack driver's reading of Infrahub API answers (plugins/hyperstack/hyperstack_rules.cc):
// error bodies, VMs (managed, labels, state, public address, open ports), and flavor lists.
#include "driver_fuzz.h"
#include "fuzz_input.h"
#include "hyperstack_rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace f = gpuprov::fuzz;
  namespace h = gpuprov::hyperstack;
  const std::string text = f::Text(data, size);
  f::Try([&] { (void)h::ApiMessage(text); });
  f::Try([&] { (void)h::ErrorReason(text); });
  f::Try([&] { (void)h::StatusOfError(400, text); });
  f::Try([&] { (void)h::IsStillBeingCreated(text); });
  Poco::JSON::Object::Ptr doc = f::JsonObject(text);
  f::Try([&] {
    if (!doc) return;
    std::vector<h::Flavor> flavors = h::ParseFlavors(doc);
    (void)h::FlavorCatalogue(flavors, "CANADA-1");
    (void)h::CpuFlavor(flavors);
    for (const h::Flavor& fl : flavors) (void)h::GpusOf(fl);
  });
  for (const auto& vm : f::Resources(doc, "instance", "instances")) {
    f::Try([&] { (void)h::IsManaged(vm); });
    f::Try([&] { (void)h::TagsOf(vm); });
    f::Try([&] { (void)h::StateOf(vm); });
    f::Try([&] { (void)h::PublicIp(vm); });
    f::Try([&] { (void)h::OpenTcpPorts(vm); });
  }
  return 0;
}
