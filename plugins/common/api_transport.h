// SPDX-License-Identifier: Apache-2.0
//
// What a cloud API client does whatever its wire form: reading a refused answer through the
// cloud's error envelope, classifying it with the cloud's code table and capacity words, the
// hint a refusal ends with, keeping secrets out of error text, and (ApiTransport) sending a
// request with the retry policy, signed anew on every attempt. How a request is encoded and
// signed and how an error body is read belong to the form (ApiWireForm): the JSON form is
// ApiClient (api_client.h); the EC2 Query/XML form, signed with SigV4, is the AWS driver's
// Ec2Client (plugins/aws/ec2_client.h).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "driver_status.h"
#include "gpuprov/sdk.hpp"
#include "http_client.h"
#include "retry_policy.h"

namespace gpuprov::drivers {

/// A cloud's error answer as its envelope reader found it.
struct ApiError {
  std::string code{};      ///< the cloud's error code; "" when the envelope has none
  std::string text{};      ///< what a message quotes of it
  std::string request_id{};  ///< the cloud's id of the request, when the envelope has one
};

/// An ApiDialect::read_error from a cloud's own envelope parser whose result has `code` and
/// `Text()`: read_error = ReadCodeAndText<ParseApiError>.
template <auto Parse>
ApiError ReadCodeAndText(const std::string& body) {
  const auto e = Parse(body);
  return ApiError{e.code, e.Text()};
}

/// What a cloud's refused answers mean.
struct ErrorTable {
  /// The cloud's codes (driver_status.h), matched against ApiError::code.
  std::span<const CloudCode> codes;
  /// A 4xx answer read as INVALID_INPUT whose text mentions one of these (lower case) is
  /// CAPACITY: clouds that say "no capacity" only in prose.
  std::span<const std::string_view> capacity_words;
  /// When set, the status of a refused answer instead of codes and capacity_words.
  std::function<gpuprov_type_status(int http_status, const ApiError& error,
                                    const std::string& body)>
      status_of;

  /// status_of when set, else StatusOfRefusal with codes and capacity_words.
  gpuprov_type_status StatusOf(int http_status, const ApiError& error,
                               const std::string& body) const;
};

/// The status of a refused answer: the cloud's code when `codes` knows it, else the HTTP
/// status (StatusOf in driver_status.h); a 4xx read as INVALID_INPUT whose text mentions one
/// of `capacity_words` is CAPACITY.
gpuprov_type_status StatusOfRefusal(int http_status, const ApiError& error,
                                    std::span<const CloudCode> codes,
                                    std::span<const std::string_view> capacity_words);

/// One hint a refused call's message ends with. The first row whose set fields all match
/// wins. In `text`, "{name}" is filled in by the caller (HintFor's `fill`); ApiClient fills it
/// from ApiDialect::hint_fields, and "{origin}", unless hint_fields names it, with the
/// credential's origin.
struct ErrorHint {
  int http_status = 0;                          ///< 0: any status
  std::optional<gpuprov_type_status> status{};  ///< the call's driver status; nullopt: any
  std::string_view code{};                      ///< the cloud's code; "": any
  std::string text{};                           ///< appended as it is, its separator included
};

/// Fills a "{name}" of a hint; nullopt leaves it as written.
using HintFill = std::function<std::optional<std::string>(std::string_view name)>;

/// The text of the first row of `hints` matching the refusal, its placeholders filled ("" when
/// no row matches). `fill` is called only for placeholders of that row.
std::string HintFor(std::span<const ErrorHint> hints, int http_status, gpuprov_type_status status,
                    std::string_view code, const HintFill& fill = nullptr);

/// `text` with every occurrence of each secret of 4 characters or more replaced by
/// "<redacted>": an API may echo a credential back in an error body, and error text reaches
/// the user.
std::string ScrubSecrets(std::string text, const std::vector<std::string>& secrets);

/// How one API puts a request on the wire and reads its error answers.
struct ApiWireForm {
  /// As messages name the API: "EC2".
  std::string name;
  /// Runs before every attempt, retries included, on a copy of the request: adds what the
  /// attempt needs (a signature over the attempt's time and body, a credential header).
  std::function<void(HttpRequest&)> sign;
  /// Reads a non-2xx body (any text, empty included) into code, text and request id.
  std::function<ApiError(const std::string& body)> read_error;
  /// How a debug line and a failure message describe a non-2xx answer; unset:
  /// "<code>: <text> (HTTP <n>[, request id <id>])", or "HTTP <n>[: <text>]" without a code.
  std::function<std::string(int http_status, const ApiError& error)> describe;
  /// Credentials no error text may carry (ScrubSecrets), asked for after a failure.
  std::function<std::vector<std::string>()> secrets;
};

/// What ApiTransport::Send ends with: a 2xx answer, or the last failure.
struct ApiOutcome {
  HttpResponse response;        ///< the last answer; status 0 when none came
  ApiError error;               ///< a non-2xx answer read by ApiWireForm::read_error
  std::string described;        ///< the failure (the network problem when no answer came)
  gpuprov_type_status status = GPUPROV_STATUS_OK;  ///< ErrorTable::StatusOf of the failure
  bool retried_out = false;     ///< a failure the policy retries, attempts or time used up
  int attempts = 0;
  std::chrono::milliseconds elapsed{0};

  bool ok() const { return response.status >= 200 && response.status < 300; }
  /// "<what>: <described>", and " (still failing after <n> attempt(s) over <s> s)" when
  /// retried_out.
  std::string Failure(const std::string& what) const;
};

/// Sends requests under one RetryPolicy: each attempt signed anew (ApiWireForm::sign), and an
/// attempt whose failure the cloud's ErrorTable calls TRANSIENT (throttling and server codes,
/// 429, retryable 5xx, no answer at all) retried with exponential backoff and full jitter,
/// Retry-After honoured, within max_attempts and total_budget; a request with idempotent =
/// false only after a 429. Never retried: what the table calls anything else (capacity, quota,
/// auth, request errors). Waits poll host.Cancelled(). Debug lines name the call, the attempt
/// and the failure, never headers or bodies.
class ApiTransport {
 public:
  ApiTransport(RetryPolicy policy, const gpuprov::sdk::Host& host,
               HttpClientOptions options = {});
  ~ApiTransport();
  ApiTransport(const ApiTransport&) = delete;
  ApiTransport& operator=(const ApiTransport&) = delete;

  /// The client of a base URL, made on first use (one attempt per HttpClient::Send: this class
  /// retries). Throws HttpError(kInvalidUrl) when the URL breaks HttpClient's rules.
  HttpClient& ClientFor(const std::string& base_url);

  /// Sends `request` to `base_url` as the class comment says and returns the 2xx answer or the
  /// last failure. Throws DriverError(CANCELLED) "<what>: cancelled" when the host cancels
  /// between attempts, and as ThrowHttpError(e, what) when the URL is refused, TLS fails or the
  /// host cancels during a wait.
  ApiOutcome Send(const std::string& base_url, const HttpRequest& request,
                  const std::string& what, const ApiWireForm& wire, const ErrorTable& errors);

  const RetryPolicy& policy() const { return policy_; }
  const HttpClientOptions& options() const { return options_; }

 private:
  RetryPolicy policy_;
  gpuprov::sdk::Host host_;
  HttpClientOptions options_;
  std::map<std::string, std::unique_ptr<HttpClient>> clients_;
};

}  // namespace gpuprov::drivers
