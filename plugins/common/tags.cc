// SPDX-License-Identifier: Apache-2.0
#include "tags.h"

#include <cctype>

#include "json_util.h"

namespace gpuprov::drivers {

std::map<std::string, std::string> ManagedTags(const std::string& vm_name) {
  return {{kManagedTag, "1"}, {kNameTag, vm_name}};
}

std::map<std::string, std::string> UserTags(const Poco::JSON::Object::Ptr& request,
                                            const std::vector<std::string>& reserved_prefixes) {
  std::map<std::string, std::string> out;
  Poco::JSON::Object::Ptr tags = json::Obj(request, "tags");
  if (!tags) return out;
  for (const auto& [key, value] : *tags) {
    if (key.empty() || key == kManagedTag || key == kNameTag) continue;
    bool reserved = false;
    for (const auto& prefix : reserved_prefixes) reserved = reserved || key.rfind(prefix, 0) == 0;
    if (reserved) continue;
    out[key] = value.isEmpty() ? std::string() : value.convert<std::string>();
  }
  return out;
}

std::string FitTag(std::string_view text, std::string_view punctuation, size_t max_length,
                   bool lower_case, char replacement) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      out += lower_case ? static_cast<char>(std::tolower(u)) : c;
    } else {
      out += punctuation.find(c) != std::string_view::npos ? c : replacement;
    }
    if (out.size() >= max_length) break;
  }
  return out;
}

}  // namespace gpuprov::drivers
