// SPDX-License-Identifier: Apache-2.0
//
// A client for a cloud's JSON REST API, over HttpClient: the base URL, how the credential
// goes into each request (and where it came from, for the messages), the cloud's error
// envelope and its code table, the words that mean "no capacity", the hints a refused call
// carries, and idempotent vs not. A driver states these as data (ApiDialect) and calls
// ApiClient::Call; what differs between clouds is in its dialect, not in plumbing. ApiError,
// ErrorHint and ReadCodeAndText are the kit's shared ones (api_transport.h), which the EC2
// Query/XML client of the AWS driver uses too.
//
// A refused call (a non-2xx status not in ApiCall::allow) throws DriverError with
//   "<what>: <cloud> answered HTTP <status> (<error text>)<hint>"   (QuoteForm::kParentheses)
//   "<what>: <cloud> answered HTTP <status>: <error text><hint>"     (QuoteForm::kColon)
//   "<what>: <cloud> answered HTTP <status> <code>: <error text><hint>" (QuoteForm::kCodeAndText)
// and a call that could not complete (HttpError) throws as ThrowHttpError does, with
//   "<what>: <cloud> API at <endpoint>: ...".
// No message the client makes carries the credential sent: a cloud that echoes it back in an
// error body has it replaced by "<redacted>".
#pragma once

#include <Poco/Dynamic/Var.h>
#include <Poco/JSON/Object.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api_transport.h"
#include "credentials.h"
#include "driver_status.h"
#include "gpuprov/sdk.hpp"
#include "http_client.h"
#include "retry_policy.h"

namespace gpuprov::drivers {

/// A credential found on first use and kept for the driver's life.
class CredentialMemo {
 public:
  using Resolver = std::function<std::optional<Credential>()>;
  /// `missing` is the whole AUTH message when `resolve` finds nothing; `label` names the
  /// credential in the debug line "<label> from <origin>".
  CredentialMemo(Resolver resolve, std::string missing, std::string label,
                 const gpuprov::sdk::Host& host);
  /// The credential; throws DriverError(AUTH, missing) when there is none.
  const Credential& Get();
  /// The credential when Get has found it, else nullptr (never resolves).
  const Credential* IfFound() const { return found_ ? &*found_ : nullptr; }

 private:
  Resolver resolve_;
  std::string missing_;
  std::string label_;
  gpuprov::sdk::Host host_;
  std::optional<Credential> found_;
};

/// How a refused call quotes the error text (see the header comment).
enum class QuoteForm {
  kParentheses,      ///< " (<text>)"
  kColon,            ///< ": <text>"
  kColonUnlessHint,  ///< ": <text>" without a hint, " (<text>)" before one
  kCodeAndText,      ///< " <code>: <text>", each part left out when empty
};

/// What the client knows of one cloud's API.
struct ApiDialect {
  std::string cloud;   ///< as messages name it: "Lambda", "Massed Compute"
  std::string driver;  ///< the driver name: "lambda" (GPUPROV_LAMBDA_ENDPOINT, [clouds.lambda])
  /// Reads an error body (any text, empty included) into code and text.
  std::function<ApiError(const std::string& body)> read_error;
  /// The cloud's codes (driver_status.h), matched against ApiError::code.
  std::span<const CloudCode> codes;
  /// A 4xx answer read as INVALID_INPUT whose text mentions one of these (lower case) is
  /// CAPACITY: clouds that say "no capacity" only in prose.
  std::span<const std::string_view> capacity_words;
  /// When set, the status of a refused call instead of codes and capacity_words.
  std::function<gpuprov_type_status(int http_status, const ApiError& error,
                                    const std::string& body)>
      status_of;
  QuoteForm quote = QuoteForm::kParentheses;
  std::vector<ErrorHint> hints;
  /// Values of the "{<name>}" fields in hints, read when a message uses them (GCE: the
  /// project, the service account).
  std::map<std::string, std::function<std::string()>, std::less<>> hint_fields;
  /// A path that does not start with '/' is sent as base_path() + "/" + path (GCE:
  /// /compute/v1/projects/<project>); read on each such call. Unset: every path as it is.
  std::function<std::string()> base_path;
  /// A refused answer this says is a rate limit, though its status is not 429 (GCE: 403
  /// rateLimitExceeded), is sent again after the retry policy's backoff ("retrying in N s
  /// (<cloud> rate limit (HTTP <status> <code>))"), as the HTTP client does with a 429.
  std::function<bool(int http_status, const ApiError& error)> rate_limited;
  /// Where the endpoint was set, for the message when it breaks HttpClient's rules; "":
  /// "GPUPROV_<DRIVER>_ENDPOINT or endpoint in [clouds.<driver>]".
  std::string endpoint_origin;
  /// Sent with every request (e.g. Accept: application/json).
  HttpHeaders headers;
  /// Content-Type: application/json on every request, not only those with a body.
  bool always_content_type = false;
  /// A call that could not complete quotes the cloud's last answer even when it was empty.
  bool quote_empty_answer = false;
  /// A 2xx body may be any JSON (a list): never refused for not being an object.
  bool any_json = false;
};

/// How each request carries the credential: "<header>: <scheme><value>". With `token` set,
/// `resolve` may be empty when no hint uses "{origin}" (the token source finds its own
/// credential and says where from).
struct ApiAuth {
  std::string header = "Authorization";
  std::string scheme = "Bearer ";
  CredentialMemo::Resolver resolve;
  std::string missing;  ///< CredentialMemo's AUTH message
  std::string label;    ///< CredentialMemo's debug label ("API key", "token")
  /// When set, the value sent is token(renew) instead of the credential (an OAuth access
  /// token got with it); after a 401 the call is sent once more with token(true).
  std::function<std::string(bool renew)> token;
};

/// One call.
struct ApiCall {
  std::string method = "GET";
  std::string path{};      ///< after the endpoint, query included
  std::string what{};      ///< how messages name the call: "list instances"
  std::string body{};      ///< JSON text; "" sends none
  std::set<int> allow{};   ///< non-2xx statuses returned as an answer instead of thrown
  bool idempotent = true;  ///< false: HttpRequest::idempotent (a create without a key)
  bool raw = false;        ///< a 2xx body need not be a JSON object (the caller reads it)
};

/// The answer of a call that succeeded or whose status was allowed.
struct ApiAnswer {
  int status = 0;
  HttpHeaders headers;
  std::string body;
  Poco::JSON::Object::Ptr doc;  ///< the body as a JSON object; nullptr when empty or not one
  ApiError error;               ///< for a non-2xx answer
  bool ok() const { return status >= 200 && status < 300; }
  /// The body as any JSON value (object, list, ...); empty when it is not JSON.
  Poco::Dynamic::Var Parsed() const;
};

class ApiClient {
 public:
  /// Throws DriverError naming "the <cloud> endpoint (GPUPROV_<DRIVER>_ENDPOINT or endpoint
  /// in [clouds.<driver>])" when `endpoint` breaks HttpClient's rules.
  ApiClient(std::string endpoint, RetryPolicy policy, const gpuprov::sdk::Host& host,
            ApiDialect dialect, ApiAuth auth);

  /// Sends the call, throwing as the header comment says.
  ApiAnswer Send(const ApiCall& call);
  /// Send with a JSON object body (nullptr: none).
  ApiAnswer Call(const std::string& method, const std::string& path, const std::string& what,
                 const Poco::JSON::Object::Ptr& body = nullptr, const std::set<int>& allow = {},
                 bool idempotent = true);

  /// The credential (resolved on first use; AUTH when there is none).
  const Credential& credential() { return credential_.Get(); }
  const Credential* credential_if_found() const { return credential_.IfFound(); }
  const std::string& endpoint() const { return endpoint_; }
  const ApiDialect& dialect() const { return dialect_; }
  HttpClient& http() { return *http_; }

  /// The DriverError a refused answer throws (exposed for callers that allow a status and
  /// decide later).
  gpuprov::sdk::DriverError Refusal(const std::string& what, int http_status,
                                    const std::string& body);
  /// The driver status of a refused answer under the dialect.
  gpuprov_type_status StatusOfAnswer(int http_status, const ApiError& error,
                                     const std::string& body) const;
  /// `text` with the credential last sent (4 characters or more) replaced by "<redacted>".
  std::string Scrub(std::string text) const;

 private:
  ApiError ReadError(const std::string& body) const;

  std::string endpoint_;
  gpuprov::sdk::Host host_;
  ApiDialect dialect_;
  ApiAuth auth_;
  CredentialMemo credential_;
  std::unique_ptr<HttpClient> http_;
  std::string sent_;  ///< the credential or token last sent, only to scrub it from messages
};

}  // namespace gpuprov::drivers
