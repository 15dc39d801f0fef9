// SPDX-License-Identifier: Apache-2.0
//
// The Lambda driver's reading of Lambda Cloud API answers (plugins/lambda/lambda_rules.cc,
// instance_types.cc): error bodies, instances' tags, firewall rulesets' rules (open ports,
// adding and removing gpuprov's rules), instance type names, and the ~/.lambda_cloud keys file.
#include "driver_fuzz.h"
#include "fuzz_input.h"
#include "instance_types.h"
#include "lambda_rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace f = gpuprov::fuzz;
  namespace l = gpuprov::lambda;
  const std::string text = f::Text(data, size);
  f::Try([&] {
    l::ApiError e = l::ParseApiError(text);
    (void)e.Text();
    (void)l::StatusOf(400, e.code);
  });
  f::Try([&] { (void)l::ApiKeyFromKeysText(text); });
  f::Try([&] { (void)l::GpusText(text); });
  for (const auto& o : f::Resources(f::JsonObject(text), "data", "data")) {
    f::Try([&] { (void)l::TagValue(o, "gpuprov-name"); });
    f::Try([&] {
      if (o->has("status")) (void)l::StateOf(o->getValue<std::string>("status"), o->has("ip"));
    });
    f::Try([&] {
      if (!o->isArray("rules")) return;
      Poco::JSON::Array::Ptr rules = o->getArray("rules");
      (void)l::OpenTcpPorts(rules);
      bool changed = false;
      Poco::JSON::Array::Ptr added = l::AddToAccountRules(rules, "fuzz-vm", {22, 6443}, &changed);
      (void)l::RemoveFromAccountRules(added, "fuzz-vm", {"other-vm"}, &changed);
    });
  }
  return 0;
}
