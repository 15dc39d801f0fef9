// SPDX-License-Identifier: Apache-2.0
#include "aws_credentials.h"

#include <cctype>
#include <cstdlib>
#include <sstream>

#include "credentials.h"

namespace gpuprov::aws {
namespace {

std::string Get(const EnvLookup& env, const std::string& name) {
  std::optional<std::string> v = env(name);
  return v ? drivers::TrimSpace(*v) : "";
}

std::string HomeFile(const EnvLookup& env, const std::string& override_var,
                     const std::string& leaf) {
  std::string path = Get(env, override_var);
  if (!path.empty()) {
    if (path.rfind("~/", 0) == 0) path = Get(env, "HOME") + path.substr(1);
    return path;
  }
  const std::string home = Get(env, "HOME");
  return home.empty() ? "" : home + "/.aws/" + leaf;
}

const std::map<std::string, std::string>* Section(const IniFile& ini, const std::string& name) {
  auto it = ini.find(name);
  return it == ini.end() ? nullptr : &it->second;
}

std::string Value(const std::map<std::string, std::string>* section, const std::string& key) {
  if (!section) return "";
  auto it = section->find(key);
  return it == section->end() ? "" : it->second;
}

// The config file names profiles "[profile NAME]", except "[default]".
const std::map<std::string, std::string>* ConfigSection(const IniFile& ini,
                                                        const std::string& profile) {
  if (profile == "default") {
    if (auto* s = Section(ini, "default")) return s;
  }
  return Section(ini, "profile " + profile);
}

std::optional<AwsCredentials> FromSection(const std::map<std::string, std::string>* s,
                                          const std::string& origin) {
  const std::string id = Value(s, "aws_access_key_id");
  const std::string secret = Value(s, "aws_secret_access_key");
  if (id.empty() || secret.empty()) return std::nullopt;
  AwsCredentials c;
  c.access_key_id = id;
  c.secret_access_key = secret;
  c.session_token = Value(s, "aws_session_token");
  c.origin = origin;
  return c;
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
}

std::string CredentialsFilePath(const EnvLookup& env) {
  return HomeFile(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
}

std::string ConfigFilePath(const EnvLookup& env) {
  return HomeFile(env, "AWS_CONFIG_FILE", "config");
}

std::string ProfileName(const EnvLookup& env, const std::string& configured) {
  if (!configured.empty()) return configured;
  std::string p = Get(env, "AWS_PROFILE");
  return p.empty() ? "default" : p;
}

CredentialLookup ResolveCredentials(const EnvLookup& env, const std::string& configured_profile) {
  CredentialLookup out;
  const std::string id = Get(env, "AWS_ACCESS_KEY_ID");
  const std::string secret = Get(env, "AWS_SECRET_ACCESS_KEY");
  if (!id.empty() && !secret.empty()) {
    AwsCredentials c;
    c.access_key_id = id;
    c.secret_access_key = secret;
    c.session_token = Get(env, "AWS_SESSION_TOKEN");
    c.origin = "$AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY";
    out.credentials = c;
    return out;
  }
  std::string half;
  if (!id.empty() || !secret.empty()) {
    half = std::string(id.empty() ? "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not"
                                  : "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not") +
           "; ";
  }
  const std::string profile = ProfileName(env, configured_profile);
  const std::string cred_path = CredentialsFilePath(env);
  const std::string conf_path = ConfigFilePath(env);
  IniFile creds, conf;
  if (!cred_path.empty()) {
    if (auto text = drivers::ReadSmallFile(cred_path)) creds = ParseIni(*text);
  }
  if (!conf_path.empty()) {
    if (auto text = drivers::ReadSmallFile(conf_path)) conf = ParseIni(*text);
  }
  if (auto c = FromSection(Section(creds, profile), cred_path + " [" + profile + "]")) {
    out.credentials = c;
    return out;
  }
  const auto* conf_section = ConfigSection(conf, profile);
  if (auto c = FromSection(
          conf_section,
          conf_path + " [" + (profile == "default" ? profile : "profile " + profile) + "]")) {
    out.credentials = c;
    return out;
  }
  std::string problem = half +
                        "no AWS credentials found: set AWS_ACCESS_KEY_ID and "
                        "AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary keys), "
                        "or put aws_access_key_id/aws_secret_access_key for profile \"" +
                        profile + "\" in " +
                        (cred_path.empty() ? "~/.aws/credentials" : cred_path) +
                        " (`aws configure`; AWS_PROFILE picks the profile)";
  for (const char* key : {"sso_session", "sso_start_url", "credential_process", "role_arn"}) {
    if (!Value(conf_section, key).empty()) {
      problem += ". Profile \"" + profile + "\" uses " + key +
                 ", which gpuprov does not run itself: export temporary keys with `eval "
                 "\"$(aws configure export-credentials --profile " +
                 profile + " --format env)\"` and retry";
      break;
    }
  }
  out.problem = problem;
  return out;
}

std::string ResolveRegion(const EnvLookup& env, const std::string& requested,
                          const std::string& configured, const std::string& configured_profile) {
  if (!requested.empty()) return requested;
  if (!configured.empty()) return configured;
  for (const char* var : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    std::string v = Get(env, var);
    if (!v.empty()) return v;
  }
  const std::string conf_path = ConfigFilePath(env);
  if (!conf_path.empty()) {
    if (auto text = drivers::ReadSmallFile(conf_path)) {
      IniFile conf = ParseIni(*text);
      std::string r = Value(ConfigSection(conf, ProfileName(env, configured_profile)), "region");
      if (!r.empty()) return r;
    }
  }
  return "us-east-1";
}

std::string MaskKeyId(const std::string& id) {
  if (id.size() <= 8) return std::string(id.size(), '*');
  return id.substr(0, 4) + "..." + id.substr(id.size() - 4);
}

}  // namespace gpuprov::aws
