// SPDX-License-Identifier: Apache-2.0
//
// What the driver response targets share. A driver turns every std::exception into a FAILED
// status with its message (the SDK's thunks in gpuprov/sdk.hpp catch them), so an exception is
// a handled outcome here; a crash, a hang, an out-of-memory or a sanitizer report is a finding.
#pragma once

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace gpuprov::fuzz {

/// Runs \a step; an exception is the driver's error path, not a finding.
inline void Try(const std::function<void()>& step) {
  try {
    step();
  } catch (const std::exception&) {
  }
}

/// The input as a JSON object (nullptr when it is not one).
inline Poco::JSON::Object::Ptr JsonObject(const std::string& text) {
  try {
    Poco::JSON::Parser parser;
    Poco::Dynamic::Var v = parser.parse(text);
    if (v.type() == typeid(Poco::JSON::Object::Ptr)) return v.extract<Poco::JSON::Object::Ptr>();
  } catch (const std::exception&) {
  }
  return nullptr;
}

/// The objects a response holds under \a single (one resource) or \a plural (a list), and the
/// response itself: every way a driver reaches a resource object.
inline std::vector<Poco::JSON::Object::Ptr> Resources(const Poco::JSON::Object::Ptr& doc,
                                                       const std::string& single,
                                                       const std::string& plural) {
  std::vector<Poco::JSON::Object::Ptr> out;
  if (!doc) return out;
  out.push_back(doc);
  try {
    if (doc->isObject(single)) out.push_back(doc->getObject(single));
    if (doc->isArray(plural)) {
      Poco::JSON::Array::Ptr a = doc->getArray(plural);
      for (unsigned i = 0; i < a->size(); ++i) {
        if (a->isObject(i)) out.push_back(a->getObject(i));
      }
    }
  } catch (const std::exception&) {
  }
  return out;
}

}  // namespace gpuprov::fuzz
