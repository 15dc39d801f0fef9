// SPDX-License-Identifier: Apache-2.0
//
// Checks a JSON request body against a documented shape: which fields exist,
// their JSON types, which are required. Clouds whose schemas reject unknown
// fields and wrong types (Lambda, Hyperstack) answer 400 with the text it gives.
#pragma once

#include <string>
#include <vector>

#include "emulator_http.h"

namespace gpuprov::emulator {

enum class JsonType { kString, kInteger, kNumber, kBool, kArray, kObject };

struct FieldShape {
  std::string name;
  JsonType type;
  bool required = false;
};

/// "" when body has only the listed fields, each of its type (an optional field
/// may be null); else one sentence naming the first offending field, e.g.
/// `unknown field "usr_data"`, `"quantity" must be an integer`, `"name" is required`.
std::string CheckShape(const JsonObject& body, const std::vector<FieldShape>& fields,
                       const std::string& where = "");

/// "" when every item of a is of type; else `"<field>[i]" must be a string` and the like.
std::string CheckItems(const JsonArray& a, JsonType type, const std::string& field);

}  // namespace gpuprov::emulator
