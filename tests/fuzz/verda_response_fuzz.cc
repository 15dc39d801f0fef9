// SPDX-License-Identifier: Apache-2.0
//
// The Verda driver's reading of Verda Cloud API answers (plugins/verda/verda_rules.cc): token
// answers, error bodies, availability and instance-type lists, create and action answers,
// instances' tags and volumes.
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
  f::Try([&] { (void)v::IsNoCapacityAnswer(503, v::ParseApiError(text)); });
  f::Try([&] {
    Poco::JSON::Parser parser;
    Poco::Dynamic::Var var = parser.parse(text);
    if (var.type() == typeid(Poco::JSON::Array::Ptr)) {
      (void)v::ParseAvailability(var.extract<Poco::JSON::Array::Ptr>());
    }
  });
  f::Try([&] {
    Poco::JSON::Parser parser;
    Poco::Dynamic::Var var = parser.parse(text);
    if (var.type() == typeid(Poco::JSON::Array::Ptr)) {
      const auto live = v::ParseInstanceTypes(var.extract<Poco::JSON::Array::Ptr>());
      for (const auto& [name, t] : live) {
        (void)v::ChooseImage("ubuntu-24.04-cuda-12.8-open-docker", false, t.supported_os, {});
      }
      (void)v::CandidateTypes("H100", 8, live);
    }
  });
  for (const auto& in : f::Resources(f::JsonObject(text), "instance", "instances")) {
    f::Try([&] { (void)v::IsManaged(in); });
    f::Try([&] { (void)v::TagValue(in, "gpuprov-name"); });
    f::Try([&] { (void)v::DeleteActionBody("i", v::VolumesToDelete(in)); });
  }
  return 0;
}
