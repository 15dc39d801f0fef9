// SPDX-License-Identifier: Apache-2.0
//
// AWS credentials and region found the way the AWS SDKs and CLI find them (clouds/aws.md §1.1),
// for static keys and session tokens:
//   1. AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
//   2. the profile (config "profile", else AWS_PROFILE, else "default") in the shared
//      credentials file (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials), section [name];
//   3. the same profile in the shared config file (AWS_CONFIG_FILE, else ~/.aws/config),
//      section [default] or [profile name].
// Region: the request's, else config "region", else AWS_REGION, AWS_DEFAULT_REGION, else the
// profile's `region` in the config file, else us-east-1.
// Secrets are never logged: only `origin` (where they came from) may be shown.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "config_files.h"

namespace gpuprov::aws {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;  ///< never log
  std::string session_token;      ///< never log; "" for long-term keys
  std::string origin;             ///< e.g. "$AWS_ACCESS_KEY_ID", "~/.aws/credentials [dev]"
};

/// Reads an environment variable; returns nullopt when unset. Injected so tests need not
/// touch the process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
/// The process environment (empty values count as unset).
EnvLookup ProcessEnv();

/// INI files as the AWS CLI reads them (the kit's reader: nested "s3 =" blocks become
/// "s3.<key>").
using drivers::IniFile;
using drivers::ParseIni;

/// Where the files are (AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE, else under $HOME/.aws).
std::string CredentialsFilePath(const EnvLookup& env);
std::string ConfigFilePath(const EnvLookup& env);

/// The profile name: `configured` (config.toml) when set, else AWS_PROFILE, else "default".
std::string ProfileName(const EnvLookup& env, const std::string& configured = "");

/// What was found, or why not.
struct CredentialLookup {
  std::optional<AwsCredentials> credentials;
  /// When no credentials: what the user can do (names the places looked at; for profiles
  /// that use SSO, roles or credential_process, the export-credentials command).
  std::string problem;
};
CredentialLookup ResolveCredentials(const EnvLookup& env, const std::string& profile = "");

/// The region as described above; `requested` (from the request) and `configured`
/// (config.toml) win.
std::string ResolveRegion(const EnvLookup& env, const std::string& requested,
                          const std::string& configured, const std::string& profile = "");

/// "AKIA…WXYZ": enough to tell keys apart, never the whole id.
std::string MaskKeyId(const std::string& access_key_id);

}  // namespace gpuprov::aws
