// SPDX-License-Identifier: Apache-2.0
//
// A small HTTPS client for cloud REST APIs, shared by the drivers in plugins/.
//
// Security rules (not configurable):
// - https:// always verifies the server certificate and host name against the system CA store
//   (Poco::Net::Context with VERIFY_RELAXED + loadDefaultCAs; never disabled).
// - http:// is accepted only for loopback hosts (127.0.0.0/8, localhost, ::1) so local
//   emulators work; any other http:// URL is refused when the client is constructed.
// - Nothing secret is logged: debug lines carry method, path, status and attempt only — never
//   headers or bodies.
//
// Proxies (HttpClientOptions::env, the process environment by default), as curl reads them:
// https:// URLs go through https_proxy / HTTPS_PROXY with a CONNECT tunnel (TLS stays end to
// end); http:// (loopback) URLs go through http_proxy / HTTP_PROXY only when that proxy is on
// loopback too, so nothing leaves the machine in clear text. no_proxy / NO_PROXY (comma list of
// host names, domain suffixes such as ".corp" or "corp", IP addresses, "*") bypasses the proxy.
// The link-local credential endpoints (EC2 instance metadata, container credentials) are
// never proxied: a proxy would answer them with its own machine's credentials.
//
// Retries: 429 (Retry-After honoured, capped), retryable 5xx (IsRetryableStatus) and
// connection/timeout errors, with exponential backoff and full jitter, bounded by
// RetryPolicy::max_attempts and total_budget. Waits poll host.Cancelled(). Requests marked
// idempotent = false are retried only when they surely did not reach the server.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <stdexcept>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuprov/sdk.hpp"

namespace Poco::Net {
class HTTPClientSession;
}
#include "retry_policy.h"

namespace gpuprov::drivers {

/// Case-insensitive header map (HTTP header names are case-insensitive).
struct HeaderLess {
  bool operator()(const std::string& a, const std::string& b) const;
};
using HttpHeaders = std::map<std::string, std::string, HeaderLess>;

struct HttpRequest {
  std::string method = "GET";  ///< GET, POST, PUT, PATCH, DELETE
  std::string path_and_query;  ///< appended to the base URL's path, e.g. "/droplets?page=2"
  HttpHeaders headers;         ///< e.g. Authorization, Content-Type
  std::string body;            ///< sent when non-empty (or when method is POST/PUT/PATCH)
  /// False for requests that must not run twice (e.g. "create a VM" on an API without
  /// idempotency keys): then only 429 and failures to connect are retried; a 5xx response is
  /// returned as-is and a network error after sending is kRetriesExhausted at once, so the
  /// caller can look for what the first attempt made before trying again.
  bool idempotent = true;
};

struct HttpResponse {
  int status = 0;
  HttpHeaders headers;
  std::string body;
};

/// Thrown by HttpClient::Send when the request could not complete:
/// kind says why, so a driver maps it to a status.
class HttpError : public std::runtime_error {
 public:
  enum class Kind {
    kInvalidUrl,       ///< bad base URL or refused scheme (http:// to a non-loopback host)
    kCancelled,        ///< host.Cancelled() became true while waiting
    kRetriesExhausted, ///< every attempt failed with a retryable status or network error
    kTls,              ///< certificate verification or TLS setup failed (never retried)
  };
  HttpError(Kind kind, const std::string& message, HttpResponse last_response = {})
      : std::runtime_error(message), kind_(kind), last_response_(std::move(last_response)) {}
  Kind kind() const { return kind_; }
  /// For kRetriesExhausted after an HTTP response: the last one (status 0 if network error).
  const HttpResponse& last_response() const { return last_response_; }

 private:
  Kind kind_;
  HttpResponse last_response_;
};

/// The parts of a base URL the client uses.
struct ParsedUrl {
  std::string scheme;  ///< "https" or "http"
  std::string host;    ///< without brackets for IPv6
  int port = 0;
  std::string path;    ///< no trailing slash; "" for the root
};

/// Parses and validates a base URL under the security rules above; throws HttpError
/// (kInvalidUrl) with a message naming the URL and the rule. With allow_link_local_http,
/// http:// is also accepted for the cloud metadata/credential hosts (IsLinkLocalCredentialHost),
/// which serve only plain HTTP and only to the machine itself.
ParsedUrl ParseBaseUrl(const std::string& base_url, bool allow_link_local_http = false);

/// True for "localhost", 127.0.0.0/8 and ::1 (with or without brackets).
bool IsLoopbackHost(const std::string& host);

/// True for the link-local addresses clouds serve instance metadata and container credentials
/// on: 169.254.169.254, 169.254.170.2, 169.254.170.23, fd00:ec2::254, fd00:ec2::23.
bool IsLinkLocalCredentialHost(const std::string& host);

/// Reads an environment variable (nullopt when unset or empty).
using EnvReader = std::function<std::optional<std::string>(const std::string&)>;

/// A forward proxy to use.
struct ProxySetting {
  std::string host;
  int port = 0;
  std::string username;  ///< from http://user:password@host:port; never logged
  std::string password;  ///< never logged
  std::string origin;    ///< the variable it came from, e.g. "$HTTPS_PROXY"
};

/// True when `host` matches a no_proxy list (see the header comment).
bool NoProxyMatches(const std::string& no_proxy, const std::string& host);

/// The proxy for a request to `url` under the rules above, or nullopt for a direct connection.
/// Throws HttpError(kInvalidUrl) naming the variable when its value is not an http:// proxy URL.
std::optional<ProxySetting> ProxyFor(const ParsedUrl& url, const EnvReader& env);

/// The process environment as an EnvReader.
EnvReader ProcessEnvReader();

/// Optional client settings.
struct HttpClientOptions {
  /// A PEM file of CA certificates that replaces the system CA store (AWS_CA_BUNDLE); "" = the
  /// system store.
  std::string ca_file;
  /// Accept http:// to IsLinkLocalCredentialHost hosts (credential providers only).
  bool allow_link_local_http = false;
  /// Where proxy variables are read; null = the process environment.
  EnvReader env;
};

class HttpClient {
 public:
  /// Throws HttpError(kInvalidUrl) when base_url breaks the rules above.
  HttpClient(std::string base_url, RetryPolicy policy, const gpuprov::sdk::Host& host,
             HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  /// Sends the request, retrying as described above. Returns the final response whatever its
  /// status (including 4xx and non-retryable 5xx); a 429/5xx is returned only as an
  /// HttpError(kRetriesExhausted) once attempts or budget run out.
  /// Throws HttpError(kCancelled) when the host cancels, kRetriesExhausted as said.
  HttpResponse Send(const HttpRequest& request);

  const std::string& base_url() const { return base_url_; }
  const RetryPolicy& policy() const { return policy_; }
  /// The proxy requests go through (nullopt: direct).
  const std::optional<ProxySetting>& proxy() const { return proxy_; }

  /// Runs `hook` before every attempt of every request, retries included (e.g. PaceCall for
  /// an API with a published rate). Exceptions it throws (DriverError CANCELLED) pass through.
  void set_before_attempt(std::function<void(const HttpRequest&)> hook) {
    before_attempt_ = std::move(hook);
  }

 private:
  HttpResponse SendOnce(const HttpRequest& request, std::chrono::milliseconds timeout);

  std::string base_url_;
  ParsedUrl url_;
  RetryPolicy policy_;
  gpuprov::sdk::Host host_;
  Jitter jitter_;
  std::optional<ProxySetting> proxy_;
  std::string ca_file_;
  std::unique_ptr<Poco::Net::HTTPClientSession> session_;  // kept alive between requests
  std::function<void(const HttpRequest&)> before_attempt_;
};

}  // namespace gpuprov::drivers
