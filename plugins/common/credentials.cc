// SPDX-License-Identifier: Apache-2.0
#include "credentials.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace gpuprov::drivers {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// A YAML scalar as written after "key:": quotes removed, trailing comment dropped.
std::string Scalar(std::string v) {
  v = TrimSpace(v);
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'')) {
    size_t close = v.find(v.front(), 1);
    if (close != std::string::npos) return v.substr(1, close - 1);
  }
  size_t hash = v.find(" #");
  if (hash != std::string::npos) v = v.substr(0, hash);
  if (!v.empty() && v.front() == '#') return "";
  return TrimSpace(v);
}

}  // namespace

std::string TrimSpace(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && IsSpace(s[b])) ++b;
  while (e > b && IsSpace(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::optional<Credential> CredentialFromEnv(const std::vector<std::string>& names) {
  for (const auto& name : names) {
    if (name.empty()) continue;
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) continue;
    std::string value = TrimSpace(v);
    if (!value.empty()) return Credential{value, "$" + name};
  }
  return std::nullopt;
}

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string data;
  char buf[8192];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    data.append(buf, static_cast<size_t>(in.gcount()));
    if (data.size() > (1u << 20)) return std::nullopt;
  }
  return data;
}

std::string DoctlConfigPath() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/doctl/config.yaml";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.config/doctl/config.yaml";
  }
  return "";
}

std::optional<std::string> DoctlTokenFromYaml(const std::string& yaml_text,
                                              const std::string& context) {
  std::string access_token, file_context;
  std::map<std::string, std::string> contexts;
  bool in_contexts = false;
  std::istringstream lines(yaml_text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string trimmed = TrimSpace(line);
    if (trimmed.empty() || trimmed.front() == '#') continue;
    const bool indented = IsSpace(line.front());
    size_t colon = trimmed.find(':');
    if (colon == std::string::npos) continue;
    std::string key = Scalar(trimmed.substr(0, colon));
    std::string value = Scalar(trimmed.substr(colon + 1));
    if (!indented) {
      in_contexts = key == "auth-contexts";
      if (key == "access-token") access_token = value;
      if (key == "context") file_context = value;
    } else if (in_contexts && !key.empty()) {
      contexts[key] = value;
    }
  }
  std::string want = !context.empty() ? context : (!file_context.empty() ? file_context : "default");
  std::string token;
  if (want == "default") {
    token = access_token;
    if (token.empty()) {
      if (auto it = contexts.find("default"); it != contexts.end()) token = it->second;
    }
  } else if (auto it = contexts.find(want); it != contexts.end()) {
    token = it->second;
  }
  if (token.empty()) return std::nullopt;
  return token;
}

std::optional<Credential> CredentialFromDoctlConfig(const std::string& path_in,
                                                    const std::string& context) {
  const std::string path = path_in.empty() ? DoctlConfigPath() : path_in;
  if (path.empty()) return std::nullopt;
  std::optional<std::string> text = ReadSmallFile(path);
  if (!text) return std::nullopt;
  std::optional<std::string> token = DoctlTokenFromYaml(*text, context);
  if (!token) return std::nullopt;
  return Credential{*token, path + (context.empty() ? "" : " (context " + context + ")")};
}

}  // namespace gpuprov::drivers
