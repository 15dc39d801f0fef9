// SPDX-License-Identifier: Apache-2.0
//
// The Verda driver's reading of Verda Cloud API answers (plugins/verda/verda_rules.cc): token
// answers, error bodies, availability lists, create and action answers, instances' tags.
#include "driver_fuzz.h"
#include "fuzz_input.h"
#include "verda_rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace f = gpuprov::fuzz;
  namespace v = gpuprov::verda;
  const std::string text = f::Text(data, size);
  f::Try([&] { (void)v::ParseTokenAnswer(text); });
  f::Try([&] {
    v::ApiError e = v::ParseApiError(text);
    (void)e.Text();
    (void)v::StatusOf(400, e);
  });
  f::Try([&] { (void)v::IdOfCreateAnswer(text); });
  f::Try([&] { (void)v::ClassifyActionMessage(text); });
  f::Try([&] { (void)v::GpusText(text); });
  f::Try([&] {
    Poco::JSON::Parser parser;
    Poco::Dynamic::Var var = parser.parse(text);
    if (var.type() == typeid(Poco::JSON::Array::Ptr)) {
      (void)v::ParseAvailability(var.extract<Poco::JSON::Array::Ptr>());
    }
  });
  for (const auto& in : f::Resources(f::JsonObject(text), "instance", "instances")) {
    f::Try([&] { (void)v::IsManaged(in); });
    f::Try([&] { (void)v::TagValue(in, "gpuprov-name"); });
  }
  return 0;
}
