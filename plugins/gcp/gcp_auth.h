// SPDX-License-Identifier: Apache-2.0
//
// Google OAuth2 for the gcp driver: Application Default Credentials
// (REFERENCE.md §1; the file shapes of the kinds below follow Google's published ADC formats):
// - service_account: an RS256-signed JWT (RFC 7519, RSASSA-PKCS1-v1_5 with SHA-256, made
//   with Poco::JWT) exchanged at the key's token_uri with the jwt-bearer grant;
// - authorized_user (what `gcloud auth application-default login` writes): the
//   refresh_token grant at token_uri;
// - external_account (workload identity federation): a subject token read from a file or a
//   URL, exchanged at the Security Token Service (token_url, RFC 8693 token exchange), then,
//   with service_account_impersonation_url, traded for a service account's token
//   (IAM Credentials generateAccessToken);
// - impersonated_service_account (`gcloud auth application-default login
//   --impersonate-service-account`): a token of the source_credentials traded for the
//   service account's token (generateAccessToken);
// - the metadata server (GCE, GKE Workload Identity, Cloud Build):
//   instance/service-accounts/default/token with `Metadata-Flavor: Google`.
// The access token is cached until five minutes before it expires. Secrets (private key,
// client secret, refresh token, subject token, access tokens) are never logged or put in an
// error message; only the file or server they came from is.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpuprov/sdk.hpp"
#include "http_client.h"
#include "retry_policy.h"

namespace gpuprov::gcp {

inline constexpr const char* kDefaultTokenUri = "https://oauth2.googleapis.com/token";
/// The scope asked for: IAM does the real authorisation (REFERENCE.md §1.1).
inline constexpr const char* kCloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform";
/// How long a signed assertion is valid (Google's maximum, REFERENCE.md §1.1).
inline constexpr int kAssertionLifetimeSeconds = 3600;
/// A cached token is replaced this long before it expires.
inline constexpr std::chrono::seconds kTokenRefreshMargin{300};

/// One set of Application Default Credentials, parsed.
struct GoogleCredentials {
  enum class Type {
    kServiceAccount,
    kAuthorizedUser,
    kExternalAccount,
    kImpersonatedServiceAccount,
    kMetadataServer,
  };
  Type type = Type::kServiceAccount;
  std::string origin;            ///< the file (or metadata server) it came from; safe to show
  std::string project_id;        ///< service_account: project_id (the project to create in)
  std::string quota_project_id;  ///< billing/quota project only; never the project to create in
  std::string client_email;      ///< service_account, or the impersonated account; safe to show
  std::string private_key_id;    ///< service_account; the JWT header's kid
  std::string private_key_pem;   ///< service_account; secret
  std::string client_id;         ///< authorized_user
  std::string client_secret;     ///< authorized_user; secret
  std::string refresh_token;     ///< authorized_user; secret
  std::string token_uri;  ///< where tokens are fetched (service_account, authorized_user:
                          ///< default kDefaultTokenUri; external_account: its token_url)
  // external_account
  std::string audience;            ///< the workload identity pool provider
  std::string subject_token_type;  ///< e.g. urn:ietf:params:oauth:token-type:jwt
  std::string subject_token_file;  ///< credential_source.file
  std::string subject_token_url;   ///< credential_source.url
  std::map<std::string, std::string> subject_token_headers;  ///< credential_source.headers
  std::string subject_token_field;  ///< format json: the field holding the token ("" = text)
  std::string workforce_pool_user_project;  ///< workforce pools: sent as options.userProject
  // external_account (optional) and impersonated_service_account
  std::string impersonation_url;  ///< ...:generateAccessToken of the account to act as
  std::vector<std::string> delegates;                  ///< impersonated_service_account
  std::shared_ptr<const GoogleCredentials> source;     ///< impersonated_service_account
  // metadata server
  std::string metadata_host;  ///< host:port of the metadata server

  /// "service_account", "authorized_user", ... as in the file's "type".
  std::string TypeName() const;
  /// Where the credentials came from and their kind, e.g. "/x/adc.json (authorized_user)";
  /// safe to show (`gpuprov check`'s credentials_from).
  std::string Describe() const;
};

inline constexpr const char* kDefaultStsTokenUrl = "https://sts.googleapis.com/v1/token";
/// The metadata server's address (169.254.169.254, also metadata.google.internal).
inline constexpr const char* kDefaultMetadataHost = "169.254.169.254";

/// Parses the text of a credentials file of any type above but the metadata server.
/// Throws DriverError(AUTH) naming `origin` and the missing or wrong field.
GoogleCredentials ParseCredentials(const std::string& json_text, const std::string& origin);

/// The ADC file `gcloud auth application-default login` writes:
/// $CLOUDSDK_CONFIG/application_default_credentials.json, else
/// $HOME/.config/gcloud/application_default_credentials.json ("" when neither is set).
std::string AdcFilePath();

/// The metadata server to ask: $GCE_METADATA_HOST (host[:port]; a loopback address for tests,
/// or exactly 169.254.169.254 / metadata.google.internal) when set, else kDefaultMetadataHost when this machine says it is a Google VM
/// (/sys/class/dmi/id/product_name starts with "Google"), else "" (not on Google Cloud: the
/// link-local address is not tried). Throws DriverError(INVALID_INPUT) for any other
/// $GCE_METADATA_HOST.
std::string MetadataHost();

/// GET http://<host>/computeMetadata/v1/<path> with `Metadata-Flavor: Google`: the body of a
/// 200 answer that carries `Metadata-Flavor: Google`, else nullopt (no server, other status,
/// or not Google's). Timeout `timeout` for connecting and for the answer.
std::optional<std::string> MetadataGet(const std::string& host, const std::string& path,
                                       std::chrono::milliseconds timeout);

/// The credentials, in the ADC order: `configured_path` (config.credentials_file) when given,
/// else $GOOGLE_APPLICATION_CREDENTIALS, else the ADC file, else the metadata server (when
/// MetadataHost() names one and it answers). nullopt when none applies; throws
/// DriverError(AUTH) when a named file cannot be read or parsed.
std::optional<GoogleCredentials> FindCredentials(const std::string& configured_path);

/// What to tell a user who has no usable credentials.
std::string CredentialsHint();

/// The project of gcloud's active configuration ([core] project in
/// $CLOUDSDK_CONFIG|~/.config/gcloud/configurations/config_<active>, where <active> is
/// $CLOUDSDK_ACTIVE_CONFIG_NAME, else the active_config file, else "default"), or "".
std::string GcloudConfigProject();

/// The signed JWT assertion of a service account (RS256: RSASSA-PKCS1-v1_5 with SHA-256, signed
/// with Poco::JWT as the nebius driver does): header {"alg":"RS256","typ":"JWT","kid"}, claims
/// {"iss": client_email, "scope", "aud": token_uri, "iat": now, "exp": now + lifetime}. Throws
/// DriverError(AUTH) naming the key's origin (never quoting the key) when the private key
/// (PKCS#8 "PRIVATE KEY" or PKCS#1 "RSA PRIVATE KEY") cannot be read.
std::string MakeJwtAssertion(const GoogleCredentials& sa, const std::string& scope,
                             int64_t now_unix_seconds,
                             int lifetime_seconds = kAssertionLifetimeSeconds);

/// The form body of the token request for service_account or authorized_user credentials
/// (URL-encoded).
std::string TokenRequestBody(const GoogleCredentials& creds, int64_t now_unix_seconds);

/// The form body of the STS token exchange (RFC 8693) of external_account credentials.
std::string StsRequestBody(const GoogleCredentials& creds, const std::string& subject_token);

/// The JSON body of an IAM Credentials generateAccessToken request.
std::string GenerateAccessTokenBody(const std::vector<std::string>& delegates);

/// The subject token of external_account credentials given the raw file or URL answer:
/// the text trimmed, or (format json) the named field. Throws DriverError(AUTH) naming
/// `origin` when the field is missing.
std::string SubjectTokenFrom(const GoogleCredentials& creds, const std::string& raw);

/// Seconds from `now_unix_seconds` to an RFC 3339 time ("2026-12-03T18:00:00Z"), or nullopt
/// when the text is not one.
std::optional<int64_t> SecondsUntil(const std::string& rfc3339, int64_t now_unix_seconds);

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
  /// Throws DriverError(INVALID_INPUT) when a URL of the credentials (token_uri, STS,
  /// impersonation, subject token) breaks the http client's rules (plain http only to
  /// loopback).
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
  TokenResponse FetchOAuthToken();      // service_account, authorized_user
  TokenResponse FetchExternalToken();   // external_account
  TokenResponse FetchImpersonated(const std::string& source_token);
  TokenResponse FetchMetadataToken();
  std::string ReadSubjectToken();
  /// Sends `req` to `url` (path and query taken from it) and returns the answer; a 4xx/5xx
  /// other than retried ones is an AUTH/FAILED DriverError naming `what` with the server's
  /// error words. `req.path_and_query` is set here.
  drivers::HttpResponse Send(const std::string& url, drivers::HttpRequest req,
                             const std::string& what);
  drivers::HttpClient& ClientFor(const std::string& url);

  GoogleCredentials creds_;
  drivers::RetryPolicy policy_;
  sdk::Host host_;
  std::map<std::string, std::unique_ptr<drivers::HttpClient>> clients_;  // by scheme://authority
  std::unique_ptr<TokenSource> source_;  // impersonated_service_account: the source's tokens
  std::string token_;
  std::chrono::steady_clock::time_point expires_{};
  int fetches_ = 0;
};

}  // namespace gpuprov::gcp
