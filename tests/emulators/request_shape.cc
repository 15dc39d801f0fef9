// SPDX-License-Identifier: Apache-2.0
#include "request_shape.h"

#include <set>

namespace gpuprov::emulator {
namespace {

const char* Describe(JsonType t) {
  switch (t) {
    case JsonType::kString:
      return "a string";
    case JsonType::kInteger:
      return "an integer";
    case JsonType::kNumber:
      return "a number";
    case JsonType::kBool:
      return "a boolean";
    case JsonType::kArray:
      return "an array";
    case JsonType::kObject:
      return "an object";
  }
  return "?";
}

bool IsType(const Poco::Dynamic::Var& v, JsonType t) {
  switch (t) {
    case JsonType::kString:
      return v.isString();
    case JsonType::kInteger:
      return v.isInteger() && !v.isBoolean();
    case JsonType::kNumber:
      return v.isNumeric() && !v.isBoolean();
    case JsonType::kBool:
      return v.isBoolean();
    case JsonType::kArray:
      return v.type() == typeid(Poco::JSON::Array::Ptr);
    case JsonType::kObject:
      return v.type() == typeid(Poco::JSON::Object::Ptr);
  }
  return false;
}

}  // namespace

std::string CheckShape(const JsonObject& body, const std::vector<FieldShape>& fields,
                       const std::string& where) {
  const std::string prefix = where.empty() ? "" : where + ".";
  std::set<std::string> known;
  for (const auto& f : fields) known.insert(f.name);
  for (const auto& [key, value] : *body) {
    if (known.count(key) == 0) return "unknown field \"" + prefix + key + "\"";
  }
  for (const auto& f : fields) {
    if (!body->has(f.name) || body->isNull(f.name)) {
      if (f.required) return "\"" + prefix + f.name + "\" is required";
      continue;
    }
    if (!IsType(body->get(f.name), f.type)) {
      return "\"" + prefix + f.name + "\" must be " + Describe(f.type);
    }
  }
  return "";
}

std::string CheckItems(const JsonArray& a, JsonType type, const std::string& field) {
  if (!a) return "";
  for (size_t i = 0; i < a->size(); ++i) {
    if (!IsType(a->get(static_cast<unsigned>(i)), type)) {
      return "\"" + field + "[" + std::to_string(i) + "]\" must be " + Describe(type);
    }
  }
  return "";
}

}  // namespace gpuprov::emulator
