// SPDX-License-Identifier: Apache-2.0
//
// Google OAuth2 for the gcp driver (reference: clouds/gcp.md §1):
// - a service-account JSON key -> an RS256-signed JWT (RFC 7519, RSASSA-PKCS1-v1_5 with
//   SHA-256) exchanged at the key's token_uri with the jwt-bearer grant;
// - the user credentials `gcloud auth application-default login` writes (type
//   authorized_user) -> the refresh_token grant.
// The access token is cached until five minutes before it expires. Secrets (private key,
// client secret, refresh token, access token) are never logged or put in an error message;
// only the file they came from is.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gpuprov/sdk.hpp"
#include "http_client.h"
#include "retry_policy.h"

namespace gpuprov::gcp {

inline constexpr const char* kDefaultTokenUri = "https://oauth2.googleapis.com/token";
/// The scope asked for: IAM does the real authorisation (reference §1.1).
inline constexpr const char* kCloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform";
/// How long a signed assertion is valid (Google's maximum, reference §1.1).
inline constexpr int kAssertionLifetimeSeconds = 3600;
/// A cached token is replaced this long before it expires.
inline constexpr std::chrono::seconds kTokenRefreshMargin{300};

/// One credentials file, parsed.
struct GoogleCredentials {
  enum class Type { kServiceAccount, kAuthorizedUser };
  Type type = Type::kServiceAccount;
  std::string origin;           ///< the file it came from; safe to show
  std::string project_id;       ///< service_account: project_id; authorized_user: quota_project_id
  std::string client_email;     ///< service_account; safe to show
  std::string private_key_id;   ///< service_account; the JWT header's kid
  std::string private_key_pem;  ///< service_account; secret
  std::string client_id;        ///< authorized_user
  std::string client_secret;    ///< authorized_user; secret
  std::string refresh_token;    ///< authorized_user; secret
  std::string token_uri;        ///< where tokens are fetched (default kDefaultTokenUri)
};

/// Parses the text of a key file (type service_account) or an ADC file (type
/// authorized_user). Throws DriverError(AUTH) naming `origin` and the missing or wrong field.
GoogleCredentials ParseCredentials(const std::string& json_text, const std::string& origin);

/// The ADC file `gcloud auth application-default login` writes:
/// $CLOUDSDK_CONFIG/application_default_credentials.json, else
/// $HOME/.config/gcloud/application_default_credentials.json ("" when neither is set).
std::string AdcFilePath();

/// The credentials: `configured_path` (config.credentials_file) when given, else
/// $GOOGLE_APPLICATION_CREDENTIALS, else the ADC file. nullopt when none of them names a
/// file; throws DriverError(AUTH) when a named file cannot be read or parsed.
std::optional<GoogleCredentials> FindCredentials(const std::string& configured_path);

/// What to tell a user who has no usable credentials.
std::string CredentialsHint();

/// The project of gcloud's active configuration ([core] project in
/// $CLOUDSDK_CONFIG|~/.config/gcloud/configurations/config_<active>), or "".
std::string GcloudConfigProject();

/// base64url without padding (RFC 7515 §2), as JWTs use.
std::string Base64UrlEncode(std::string_view bytes);
/// Decodes base64url or base64, with or without padding; nullopt on a bad character.
std::optional<std::string> Base64UrlDecode(std::string_view text);

/// The RS256 signature (RSASSA-PKCS1-v1_5, SHA-256) of `data` with a PEM private key
/// (PKCS#8 "PRIVATE KEY" or PKCS#1 "RSA PRIVATE KEY"). Throws DriverError(AUTH) naming
/// `origin` when the key cannot be read.
std::string SignRs256(const std::string& private_key_pem, std::string_view data,
                      const std::string& origin);

/// The signed JWT assertion of a service account: header {"alg":"RS256","typ":"JWT","kid"},
/// claims {"iss": client_email, "scope", "aud": token_uri, "iat": now, "exp": now + lifetime}.
std::string MakeJwtAssertion(const GoogleCredentials& sa, const std::string& scope,
                             int64_t now_unix_seconds,
                             int lifetime_seconds = kAssertionLifetimeSeconds);

/// The form body of the token request for these credentials (URL-encoded).
std::string TokenRequestBody(const GoogleCredentials& creds, int64_t now_unix_seconds);

/// A token endpoint's JSON answer: access_token and expires_in (seconds).
struct TokenResponse {
  std::string access_token;
  int64_t expires_in_seconds = 0;
};
/// Parses a 200 answer; throws DriverError(AUTH) when access_token is missing.
TokenResponse ParseTokenResponse(const std::string& body);

/// Fetches and caches access tokens for one set of credentials.
class TokenSource {
 public:
  /// Throws DriverError(INVALID_INPUT) when the token_uri breaks the http client's rules
  /// (plain http only to loopback).
  TokenSource(GoogleCredentials creds, drivers::RetryPolicy policy, const sdk::Host& host);
  ~TokenSource();
  TokenSource(const TokenSource&) = delete;
  TokenSource& operator=(const TokenSource&) = delete;

  /// A token valid for at least kTokenRefreshMargin: the cached one, or a new one
  /// (always a new one with force_refresh, e.g. after a 401).
  /// Throws DriverError: AUTH when the endpoint refuses the credentials, TRANSIENT when
  /// it keeps failing, CANCELLED.
  std::string Token(bool force_refresh = false);

  const GoogleCredentials& credentials() const { return creds_; }
  /// How many tokens were fetched (tests).
  int fetches() const { return fetches_; }

 private:
  GoogleCredentials creds_;
  sdk::Host host_;
  std::unique_ptr<drivers::HttpClient> http_;
  std::string token_path_;
  std::string token_;
  std::chrono::steady_clock::time_point expires_{};
  int fetches_ = 0;
};

}  // namespace gpuprov::gcp
