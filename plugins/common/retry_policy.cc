// SPDX-License-Identifier: Apache-2.0
#include "retry_policy.h"

#include <Poco/DateTime.h>
#include <Poco/DateTimeFormat.h>
#include <Poco/DateTimeParser.h>
#include <Poco/Exception.h>
#include <Poco/Timestamp.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>

namespace gpuprov::drivers {

using std::chrono::milliseconds;

bool IsRetryableStatus(int http_status) {
  if (http_status == 429) return true;
  if (http_status == 501 || http_status == 505) return false;
  return http_status >= 500 && http_status <= 599;
}

std::optional<milliseconds> ParseRetryAfter(std::string_view value) {
  size_t b = 0, e = value.size();
  while (b < e && std::isspace(static_cast<unsigned char>(value[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(value[e - 1]))) --e;
  value = value.substr(b, e - b);
  if (value.empty()) return std::nullopt;
  bool digits = std::all_of(value.begin(), value.end(),
                            [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  if (digits) {
    if (value.size() > 9) return milliseconds(std::numeric_limits<int32_t>::max());
    int64_t seconds = 0;
    for (char c : value) seconds = seconds * 10 + (c - '0');
    return milliseconds(seconds * 1000);
  }
  if (value.front() == '-') return milliseconds(0);
  // An HTTP-date ("Wed, 21 Oct 2015 07:28:00 GMT") is long and full of digits; Poco's parser
  // alone is lenient enough to accept words.
  const auto digit_count = std::count_if(value.begin(), value.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
  if (value.size() < 16 || digit_count < 6) return std::nullopt;
  try {
    int tzd = 0;
    Poco::DateTime when;
    if (!Poco::DateTimeParser::tryParse(Poco::DateTimeFormat::HTTP_FORMAT, std::string(value),
                                        when, tzd)) {
      return std::nullopt;
    }
    when.makeUTC(tzd);
    Poco::Timestamp::TimeDiff diff_us = when.timestamp() - Poco::Timestamp();
    if (diff_us <= 0) return milliseconds(0);
    return milliseconds(diff_us / 1000);
  } catch (const Poco::Exception&) {
    return std::nullopt;
  }
}

milliseconds BackoffCeiling(const RetryPolicy& policy, int failures) {
  const int64_t cap = std::max<int64_t>(0, policy.max_delay.count());
  int64_t d = std::max<int64_t>(0, policy.base_delay.count());
  for (int i = 1; i < failures && d < cap; ++i) {
    d = d > cap / 2 ? cap : d * 2;
  }
  return milliseconds(std::min(d, cap));
}

milliseconds NextDelay(const RetryPolicy& policy, int failures,
                       std::optional<milliseconds> retry_after, double uniform01) {
  uniform01 = std::clamp(uniform01, 0.0, 1.0);
  const auto ceiling = BackoffCeiling(policy, failures);
  const auto jittered =
      milliseconds(static_cast<int64_t>(static_cast<double>(ceiling.count()) * uniform01));
  if (retry_after) {
    const auto honoured =
        std::clamp(*retry_after, milliseconds(0), std::max(milliseconds(0), policy.max_retry_after));
    return std::max(honoured, jittered);
  }
  return jittered;
}

Jitter::Jitter() : rng_(std::random_device{}()) {}
Jitter::Jitter(uint64_t seed) : rng_(seed) {}

double Jitter::Next() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

}  // namespace gpuprov::drivers
