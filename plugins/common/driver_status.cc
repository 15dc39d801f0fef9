// SPDX-License-Identifier: Apache-2.0
#include "driver_status.h"

#include <algorithm>
#include <cctype>

#include "gpuprov/sdk.hpp"
#include "retry_policy.h"

namespace gpuprov::drivers {

gpuprov_type_status StatusOfHttp(int http_status) {
  if (http_status >= 200 && http_status < 300) return GPUPROV_STATUS_OK;
  switch (http_status) {
    case 401:
    case 403:
      return GPUPROV_STATUS_AUTH;
    case 402:
      return GPUPROV_STATUS_QUOTA;
    case 404:
    case 410:
      return GPUPROV_STATUS_NOT_FOUND;
    case 408:
    case 425:
    case 429:
      return GPUPROV_STATUS_TRANSIENT;
    default:
      break;
  }
  if (http_status >= 400 && http_status < 500) return GPUPROV_STATUS_INVALID_INPUT;
  if (IsRetryableStatus(http_status)) return GPUPROV_STATUS_TRANSIENT;
  return GPUPROV_STATUS_FAILED;
}

std::optional<gpuprov_type_status> StatusOfCode(std::span<const CloudCode> codes,
                                                std::string_view code) {
  if (code.empty()) return std::nullopt;
  for (const CloudCode& row : codes) {
    if (row.code == code) return row.status;
    if (!row.code.empty() && row.code.front() == '.' && code.size() > row.code.size() &&
        code.substr(code.size() - row.code.size()) == row.code) {
      return row.status;
    }
  }
  return std::nullopt;
}

gpuprov_type_status StatusOf(int http_status, std::string_view code,
                             std::span<const CloudCode> codes) {
  if (std::optional<gpuprov_type_status> s = StatusOfCode(codes, code)) return *s;
  if (http_status == 0) return GPUPROV_STATUS_TRANSIENT;
  return StatusOfHttp(http_status);
}

gpuprov_type_status StatusOf(const HttpError& e) {
  switch (e.kind()) {
    case HttpError::Kind::kCancelled:
      return GPUPROV_STATUS_CANCELLED;
    case HttpError::Kind::kInvalidUrl:
      return GPUPROV_STATUS_INVALID_INPUT;
    case HttpError::Kind::kTls:
      return GPUPROV_STATUS_FAILED;
    case HttpError::Kind::kRetriesExhausted:
      return GPUPROV_STATUS_TRANSIENT;
  }
  return GPUPROV_STATUS_FAILED;
}

void ThrowHttpError(const HttpError& e, const std::string& what, const std::string& cloud_said) {
  const gpuprov_type_status status = StatusOf(e);
  if (status == GPUPROV_STATUS_CANCELLED) {
    throw gpuprov::sdk::DriverError(status, what + ": cancelled");
  }
  std::string message = what + ": " + e.what();
  if (e.kind() == HttpError::Kind::kRetriesExhausted && e.last_response().status != 0 &&
      !cloud_said.empty()) {
    message += "; the cloud said: " + cloud_said;
  }
  if (status == GPUPROV_STATUS_TRANSIENT) message += ". Try again in a few minutes";
  throw gpuprov::sdk::DriverError(status, message);
}

bool MentionsAny(std::string_view message, std::span<const std::string_view> words) {
  std::string lower(message);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::any_of(words.begin(), words.end(), [&](std::string_view w) {
    return lower.find(w) != std::string::npos;
  });
}

}  // namespace gpuprov::drivers
