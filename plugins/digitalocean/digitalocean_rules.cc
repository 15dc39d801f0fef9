// SPDX-License-Identifier: Apache-2.0
#include "digitalocean_rules.h"

#include "tags.h"


#include <cctype>
#include <cstdlib>

#include "gpuprov/sdk.hpp"
#include "json_util.h"
#include "standard_settings.h"

namespace gpuprov::digitalocean {
namespace {

using gpuprov::sdk::DriverError;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

const std::vector<std::string>& TokenEnvVars() {
  static const std::vector<std::string> kVars = {"DIGITALOCEAN_TOKEN", "DIGITALOCEAN_ACCESS_TOKEN",
                                                 "DO_API_TOKEN"};
  return kVars;
}

std::optional<drivers::Credential> ResolveToken(const Poco::JSON::Object::Ptr& config) {
  namespace json = drivers::json;
  const std::string token_env = drivers::TokenEnvSetting(config);
  if (!token_env.empty()) {
    if (auto c = drivers::CredentialFromEnv({token_env})) return c;
  }
  if (auto c = drivers::CredentialFromEnv(TokenEnvVars())) return c;
  if (config) {
    std::string literal = drivers::TrimSpace(json::Str(config, "token"));
    if (!literal.empty()) return drivers::Credential{literal, "config.toml [clouds.digitalocean] token"};
  }
  std::string context = config ? json::Str(config, "doctl_context") : "";
  if (context.empty()) {
    if (const char* env = std::getenv("DIGITALOCEAN_CONTEXT"); env != nullptr) context = env;
  }
  const std::string path = config ? json::Str(config, "doctl_config") : "";
  return drivers::CredentialFromDoctlConfig(path, context);
}

std::string TokenHint() {
  return "set DIGITALOCEAN_TOKEN (or DIGITALOCEAN_ACCESS_TOKEN, as doctl uses) to a personal "
         "access token with droplet, ssh_key, firewall and tag scopes (control panel: API -> "
         "Tokens), run `doctl auth init`, or name the variable with token_env in "
         "[clouds.digitalocean] of config.toml";
}

std::string TagSafe(const std::string& s) { return drivers::FitTag(s, ":-_", 255); }

std::string VmTag(const std::string& vm_name) { return TagSafe(kVmTagPrefix + vm_name); }
std::string KeyTag(const std::string& key_id) { return TagSafe(kKeyTagPrefix + key_id); }
std::string FirewallName(const std::string& vm_name) { return kResourcePrefix + vm_name; }

std::string StateOf(const std::string& status) {
  if (status == "new") return "pending";
  if (status == "active") return "running";
  if (status == "off") return "stopped";
  if (status == "archive") return "terminated";
  return "error";
}

std::string ApiMessage(const std::string& body) {
  if (Poco::JSON::Object::Ptr o = drivers::json::TryParseObject(body)) {
    std::string message, id;
    try {
      message = drivers::json::Str(o, "message");
      id = drivers::json::Str(o, "id");
    } catch (...) {
    }
    if (!message.empty()) return id.empty() ? message : message + " (" + id + ")";
    if (!id.empty()) return id;
  }
  std::string text = drivers::TrimSpace(body);
  if (text.size() > 300) text = text.substr(0, 300) + "...";
  return text.empty() ? "no error message" : text;
}

gpuprov_type_status Classify422(const std::string& message,
                                const std::vector<std::string>& extra_capacity) {
  const std::string m = Lower(message);
  static const std::vector<std::string> kCapacity = {
      "not available in this region", "region is not available", "size is not available",
      "capacity", "currently unavailable", "sold out", "out of stock", "no availability"};
  for (const auto& s : kCapacity) {
    if (Contains(m, s)) return GPUPROV_STATUS_CAPACITY;
  }
  for (const auto& s : extra_capacity) {
    if (!s.empty() && Contains(m, Lower(s))) return GPUPROV_STATUS_CAPACITY;
  }
  // Only the account's limits: DigitalOcean's 422 "creating this/these droplet(s) will exceed
  // your droplet limit" (seen in public client logs, e.g. pry0cc/axiom#422, OpenRouterLabs/
  // spawn#3059) and "... not enough available droplet limit" (digitalocean/doctl#1619). A
  // message that merely mentions a limit or "exceeds" (a field length) is the request's fault.
  static const std::vector<std::string> kQuota = {"droplet limit", "exceed your", "quota"};
  for (const auto& s : kQuota) {
    if (Contains(m, s)) return GPUPROV_STATUS_QUOTA;
  }
  return GPUPROV_STATUS_INVALID_INPUT;
}

}  // namespace gpuprov::digitalocean
