// SPDX-License-Identifier: Apache-2.0
#include "config_files.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <sstream>

#include "credentials.h"
#include "text.h"

namespace gpuprov::drivers {
namespace {

std::string CollapseSpaces(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  return TrimSpace(out);
}

}  // namespace

IniFile ParseIni(const std::string& text) {
  IniFile ini;
  std::istringstream in(text);
  std::string section;
  std::string parent;  // a key with an empty value: indented lines below are its sub-keys
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    const std::string t = TrimSpace(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[') {
      const size_t close = t.find(']');
      if (close == std::string::npos) continue;
      section = CollapseSpaces(t.substr(1, close - 1));
      ini[section];
      in_section = true;
      parent.clear();
      continue;
    }
    const size_t eq = t.find('=');
    if (!in_section || eq == std::string::npos) continue;
    const std::string key = Lower(TrimSpace(t.substr(0, eq)));
    const std::string value = TrimSpace(t.substr(eq + 1));
    if (key.empty()) continue;
    const bool indented = std::isspace(static_cast<unsigned char>(line[0])) != 0;
    if (indented) {
      if (!parent.empty()) ini[section][parent + "." + key] = value;
      continue;
    }
    parent = value.empty() ? key : "";
    if (!value.empty()) ini[section][key] = value;
  }
  return ini;
}

std::optional<std::string> IniValue(const IniFile& ini, const std::string& section,
                                    const std::string& key) {
  auto s = ini.find(section);
  if (s == ini.end()) return std::nullopt;
  auto k = s->second.find(Lower(key));
  if (k == s->second.end()) return std::nullopt;
  return k->second;
}

std::optional<std::string> YamlString(const std::string& yaml_text,
                                      const std::vector<std::string>& path) {
  try {
    YAML::Node node = YAML::Load(yaml_text);
    for (const std::string& key : path) {
      if (!node.IsMap()) return std::nullopt;
      const YAML::Node& parent = node;
      YAML::Node child = parent[key];
      if (!child.IsDefined()) return std::nullopt;
      node.reset(child);  // Node's operator= would write into the document
    }
    if (!node.IsScalar()) return std::nullopt;
    return node.as<std::string>();
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
}

}  // namespace gpuprov::drivers
