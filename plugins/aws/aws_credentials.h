// SPDX-License-Identifier: Apache-2.0
//
// AWS credentials and region found the way the AWS SDKs and CLI find them (REFERENCE.md §1.1),
// in this order, the first source that is configured wins:
//   1. AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
//   2. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (+ AWS_ROLE_SESSION_NAME) ->
//      STS AssumeRoleWithWebIdentity (unsigned);
//   3. the profile (config "profile", else AWS_PROFILE, else "default"), in the shared config
//      file (AWS_CONFIG_FILE, else ~/.aws/config, sections [default] / [profile NAME]) and the
//      shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials, [NAME]):
//      a. role_arn + source_profile (the source profile resolved the same way) or
//         credential_source (Environment, Ec2InstanceMetadata, EcsContainer) -> STS AssumeRole
//         signed with SigV4; role_arn + web_identity_token_file -> AssumeRoleWithWebIdentity;
//         mfa_serial is refused (gpuprov cannot prompt for a code);
//      b. sso_session (+ [sso-session NAME]) or legacy sso_start_url/sso_region, with
//         sso_account_id and sso_role_name: the AWS CLI's cached token under
//         ~/.aws/sso/cache/<sha1>.json -> the SSO portal's GET /federation/credentials;
//      c. static keys in the credentials file;
//      d. credential_process: run with /bin/sh -c, its stdout JSON (Version 1) read;
//      e. static keys in the config file;
//   4. container credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI (on
//      169.254.170.2), with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE / _TOKEN as Authorization;
//   5. the EC2 instance profile through IMDSv2 (AWS_EC2_METADATA_SERVICE_ENDPOINT, else
//      169.254.169.254; skipped with AWS_EC2_METADATA_DISABLED=true, and skipped when this
//      machine's DMI data does not say "Amazon EC2" unless that endpoint variable is set, so a
//      workstation never waits on an address that does not answer).
// Temporary credentials carry their expiry; those from STS, SSO, containers and IMDS are
// cached in the process until 10 minutes before it.
// STS is https://sts.<region>.amazonaws.com unless AWS_ENDPOINT_URL_STS / AWS_ENDPOINT_URL is
// set; the SSO portal is https://portal.sso.<sso_region>.amazonaws.com unless
// AWS_ENDPOINT_URL_SSO / AWS_ENDPOINT_URL is set. AWS_CA_BUNDLE replaces the system CA store.
// Region: the request's, else config "region", else AWS_REGION, AWS_DEFAULT_REGION, else the
// profile's `region` in the config file; none is "" (the driver says so; never a default).
// Secrets are never logged: only `origin` (where they came from) may be shown.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "config_files.h"
#include "gpuprov/sdk.hpp"
#include "retry_policy.h"

namespace gpuprov::aws {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;  ///< never log
  std::string session_token;      ///< never log; "" for long-term keys
  std::string origin;             ///< e.g. "$AWS_ACCESS_KEY_ID", "profile dev (role_arn ...)"
  long long expiration = 0;       ///< Unix seconds; 0 = does not expire
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

/// What the network sources need besides the environment.
struct CredentialOptions {
  /// The region STS is called in (the driver's region); "" -> a role source fails saying so.
  std::string region;
  /// Base URL AWS_CONTAINER_CREDENTIALS_RELATIVE_URI is appended to (tests: the emulator).
  std::string container_host = "http://169.254.170.2";
  /// The IMDS base URL when AWS_EC2_METADATA_SERVICE_ENDPOINT is unset.
  std::string imds_endpoint = "http://169.254.169.254";
  /// Whether this machine is an EC2 instance (null: its DMI data says "Amazon EC2").
  std::function<bool()> on_ec2;
  /// Unix seconds now (null: the system clock).
  std::function<long long()> clock;
  /// Retries of STS and SSO calls (IMDS and containers use short timeouts of their own).
  drivers::RetryPolicy policy;
  gpuprov::sdk::Host host;
};

/// What was found, or why not.
struct CredentialLookup {
  std::optional<AwsCredentials> credentials;
  /// When no credentials: what went wrong or what the user can do (names the places looked
  /// at, the failing source and its fix).
  std::string problem;
};
CredentialLookup ResolveCredentials(const EnvLookup& env, const std::string& profile = "",
                                    const CredentialOptions& options = {});

/// Forgets the temporary credentials cached by ResolveCredentials (tests).
void ClearCredentialCache();

/// The region as described above; `requested` (from the request) and `configured`
/// (config.toml) win. "" when there is none.
std::string ResolveRegion(const EnvLookup& env, const std::string& requested,
                          const std::string& configured, const std::string& profile = "");

/// The error text for "no region anywhere" (names every place a region can be set).
std::string NoRegionProblem(const std::string& profile);

/// An endpoint override for an AWS service from AWS_ENDPOINT_URL_<SERVICE_ID> (e.g. "EC2",
/// "STS", "SSO"), else AWS_ENDPOINT_URL; "" when neither is set.
std::string EndpointOverride(const EnvLookup& env, const std::string& service_id);

/// "AKIA…WXYZ": enough to tell keys apart, never the whole id.
std::string MaskKeyId(const std::string& access_key_id);

/// Unix seconds of an ISO 8601 UTC time ("2026-01-02T03:04:05Z", fractions and "+00:00" or
/// "UTC" suffixes allowed); nullopt when it is not one.
std::optional<long long> ParseIsoTime(const std::string& text);

}  // namespace gpuprov::aws
