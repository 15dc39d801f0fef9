// SPDX-License-Identifier: Apache-2.0
//
// The one table from HTTP statuses and cloud error codes to driver statuses
// (gpuprov_type_status), used by every driver so that the same failure reads the same on
// every cloud. A cloud adds its own error codes as data (CloudCode rows); what it does not
// list falls back to the HTTP status.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "gpuprov/driver_abi.h"
#include "http_client.h"

namespace gpuprov::drivers {

/// The status for an HTTP answer when nothing more specific is known:
/// 2xx OK; 400, 405-413, 415-418, 422 and other 4xx INVALID_INPUT; 401 and 403 AUTH;
/// 402 QUOTA; 404 and 410 NOT_FOUND; 409 INVALID_INPUT; 408, 425, 429 and retryable 5xx
/// (IsRetryableStatus) TRANSIENT; 501, 505 and anything else FAILED.
gpuprov_type_status StatusOfHttp(int http_status);

/// One cloud error code and what it means, e.g. {"InsufficientInstanceCapacity", CAPACITY}.
/// `code` is matched exactly, or as a suffix when it starts with '.' (".NotFound").
struct CloudCode {
  std::string_view code;
  gpuprov_type_status status;
};

/// The row of `codes` for `code`, or nullopt.
std::optional<gpuprov_type_status> StatusOfCode(std::span<const CloudCode> codes,
                                                std::string_view code);

/// The cloud's own code when `codes` knows it, else StatusOfHttp(http_status). A network
/// failure (http_status 0) with no known code is TRANSIENT.
gpuprov_type_status StatusOf(int http_status, std::string_view code = {},
                             std::span<const CloudCode> codes = {});

/// The status of a request that could not complete: kCancelled CANCELLED, kInvalidUrl
/// INVALID_INPUT, kTls FAILED, kRetriesExhausted TRANSIENT.
gpuprov_type_status StatusOf(const HttpError& e);

/// Throws DriverError(StatusOf(e)) with "<what>: <e.what()>", and for kRetriesExhausted
/// after an answer "; <cloud> said: <cloud_said>" when cloud_said is not empty.
[[noreturn]] void ThrowHttpError(const HttpError& e, const std::string& what,
                                 const std::string& cloud_said = "");

/// True when `message` contains one of `words` (lower-case; the message is lower-cased): clouds that report
/// capacity or quota only in prose are classified with word lists kept as data.
bool MentionsAny(std::string_view message, std::span<const std::string_view> words);

}  // namespace gpuprov::drivers
