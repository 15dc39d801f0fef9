// SPDX-License-Identifier: Apache-2.0
#include "text.h"

namespace gpuprov::drivers {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

std::string Squash(std::string_view s) {
  std::string out;
  for (char c : Upper(s)) {
    if (c != ' ' && c != '-' && c != '_') out += c;
  }
  return out;
}

std::string NoFullStop(std::string_view s) {
  while (!s.empty() && (s.back() == '.' || s.back() == ' ')) s.remove_suffix(1);
  return std::string(s);
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool ContainsNoCase(std::string_view s, std::string_view word) {
  return Lower(s).find(Lower(word)) != std::string::npos;
}

}  // namespace gpuprov::drivers
