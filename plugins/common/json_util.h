// SPDX-License-Identifier: Apache-2.0
//
// Small helpers over Poco::JSON for driver requests (errors are INVALID_INPUT) and cloud
// responses (errors are FAILED, naming what was expected).
#pragma once

#include <Poco/Dynamic/Var.h>
#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <optional>
#include <sstream>
#include <string>

#include "gpuprov/sdk.hpp"

namespace gpuprov::drivers::json {

using Poco::JSON::Array;
using Poco::JSON::Object;

inline std::string Stringify(const Object& o) {
  std::ostringstream s;
  o.stringify(s);
  return s.str();
}
inline std::string Stringify(const Object::Ptr& o) { return Stringify(*o); }

/// Parses a JSON object; throws DriverError(`status`) naming `what` when it is not one.
inline Object::Ptr ParseObject(const std::string& text, const std::string& what,
                               gpuprov_type_status status = GPUPROV_STATUS_INVALID_INPUT) {
  try {
    Poco::JSON::Parser parser;
    Poco::Dynamic::Var v = parser.parse(text.empty() ? std::string("{}") : text);
    if (v.type() == typeid(Object::Ptr)) {
      if (Object::Ptr o = v.extract<Object::Ptr>()) return o;
    }
  } catch (const Poco::Exception&) {
  } catch (const std::exception&) {
  }
  throw gpuprov::sdk::DriverError(status, what + " is not a JSON object");
}

/// Like ParseObject but returns nullptr instead of throwing.
inline Object::Ptr TryParseObject(const std::string& text) {
  try {
    Poco::JSON::Parser parser;
    Poco::Dynamic::Var v = parser.parse(text);
    if (v.type() == typeid(Object::Ptr)) return v.extract<Object::Ptr>();
  } catch (...) {
  }
  return nullptr;
}

inline bool Has(const Object::Ptr& o, const std::string& key) {
  return o && o->has(key) && !o->isNull(key);
}

/// A string member; "" when absent or null. Numbers are converted; other types throw.
inline std::string Str(const Object::Ptr& o, const std::string& key) {
  if (!Has(o, key)) return "";
  Poco::Dynamic::Var v = o->get(key);
  if (v.isString() || v.isNumeric()) return v.convert<std::string>();
  throw gpuprov::sdk::DriverError(GPUPROV_STATUS_INVALID_INPUT,
                                  "field \"" + key + "\" must be a string");
}

/// An integer member, or `fallback` when absent or null.
inline long long Int(const Object::Ptr& o, const std::string& key, long long fallback = 0) {
  if (!Has(o, key)) return fallback;
  try {
    return o->get(key).convert<long long>();
  } catch (const Poco::Exception&) {
    throw gpuprov::sdk::DriverError(GPUPROV_STATUS_INVALID_INPUT,
                                    "field \"" + key + "\" must be a number");
  }
}

/// A boolean member, or `fallback` when absent or null; throws when it is another type.
inline bool Bool(const Object::Ptr& o, const std::string& key, bool fallback = false) {
  if (!Has(o, key)) return fallback;
  Poco::Dynamic::Var v = o->get(key);
  if (v.type() == typeid(bool)) return v.extract<bool>();
  throw gpuprov::sdk::DriverError(GPUPROV_STATUS_INVALID_INPUT,
                                  "field \"" + key + "\" must be true or false");
}

/// An object member, or nullptr when absent or null; throws when it is another type.
inline Object::Ptr Obj(const Object::Ptr& o, const std::string& key) {
  if (!Has(o, key)) return nullptr;
  Poco::Dynamic::Var v = o->get(key);
  if (v.type() == typeid(Object::Ptr)) return v.extract<Object::Ptr>();
  throw gpuprov::sdk::DriverError(GPUPROV_STATUS_INVALID_INPUT,
                                  "field \"" + key + "\" must be an object");
}

/// An array member, or nullptr when absent or null; throws when it is another type.
inline Array::Ptr Arr(const Object::Ptr& o, const std::string& key) {
  if (!Has(o, key)) return nullptr;
  Poco::Dynamic::Var v = o->get(key);
  if (v.type() == typeid(Array::Ptr)) return v.extract<Array::Ptr>();
  throw gpuprov::sdk::DriverError(GPUPROV_STATUS_INVALID_INPUT,
                                  "field \"" + key + "\" must be an array");
}

/// Element i of an array as an object, or nullptr when it is not one.
inline Object::Ptr ObjAt(const Array::Ptr& a, size_t i) {
  if (!a || i >= a->size()) return nullptr;
  Poco::Dynamic::Var v = a->get(static_cast<unsigned>(i));
  if (v.type() == typeid(Object::Ptr)) return v.extract<Object::Ptr>();
  return nullptr;
}

}  // namespace gpuprov::drivers::json
