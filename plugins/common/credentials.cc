// SPDX-License-Identifier: Apache-2.0
#include "credentials.h"

#include "config_files.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace gpuprov::drivers {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

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
  std::string want = context;
  if (want.empty()) want = YamlString(yaml_text, {"context"}).value_or("");
  if (want.empty()) want = "default";
  std::optional<std::string> token;
  if (want == "default") token = YamlString(yaml_text, {"access-token"});
  if (!token || TrimSpace(*token).empty()) token = YamlString(yaml_text, {"auth-contexts", want});
  if (!token || TrimSpace(*token).empty()) return std::nullopt;
  return TrimSpace(*token);
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
