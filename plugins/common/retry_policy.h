// SPDX-License-Identifier: Apache-2.0
//
// Retry policy shared by the HTTP cloud drivers: which responses are retried, and how long to
// wait before the next attempt (exponential backoff with full jitter, Retry-After honoured and
// capped). Pure computation, no I/O, so it is unit-tested directly.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>

namespace gpuprov::drivers {

/// Limits for one logical request. Defaults suit real clouds; tests shrink them.
struct RetryPolicy {
  /// Total attempts including the first (1 = never retry).
  int max_attempts = 6;
  /// Backoff base: attempt n (1-based, after the n-th failure) waits up to base * 2^(n-1).
  std::chrono::milliseconds base_delay{500};
  /// No single wait is longer than this (also caps exponential growth).
  std::chrono::milliseconds max_delay{20'000};
  /// A server's Retry-After is honoured up to this.
  std::chrono::milliseconds max_retry_after{60'000};
  /// Wall-clock budget for all attempts and waits of one request. Once the next wait would
  /// exceed it, the request fails with the last error.
  std::chrono::milliseconds total_budget{120'000};
  /// Per-attempt socket timeout (connect, send, receive).
  std::chrono::milliseconds attempt_timeout{30'000};

  /// A policy for tests: tiny waits, same attempt count.
  static RetryPolicy Fast() {
    RetryPolicy p;
    p.base_delay = std::chrono::milliseconds(5);
    p.max_delay = std::chrono::milliseconds(50);
    p.max_retry_after = std::chrono::milliseconds(50);
    p.total_budget = std::chrono::milliseconds(10'000);
    p.attempt_timeout = std::chrono::milliseconds(5'000);
    return p;
  }
};

/// True for statuses worth retrying: 429 and every 5xx except 501 (Not Implemented) and
/// 505 (HTTP Version Not Supported), which never change on retry.
bool IsRetryableStatus(int http_status);

/// Parses a Retry-After header: delta-seconds ("7") or an HTTP-date. Returns nullopt when
/// absent or unparseable. Negative/past values become 0.
std::optional<std::chrono::milliseconds> ParseRetryAfter(std::string_view header_value);

/// The upper bound of the backoff window after the `failures`-th failure (1-based):
/// min(max_delay, base_delay * 2^(failures-1)). Saturates instead of overflowing.
std::chrono::milliseconds BackoffCeiling(const RetryPolicy& policy, int failures);

/// The wait before the next attempt after the `failures`-th failure.
/// - With a Retry-After: max(retry_after capped at max_retry_after, a full-jitter draw) —
///   the server's minimum is respected, never shortened by jitter.
/// - Otherwise: full jitter, uniform in [0, BackoffCeiling(policy, failures)].
/// `uniform01` is a draw in [0, 1) (injected so tests are deterministic).
std::chrono::milliseconds NextDelay(const RetryPolicy& policy, int failures,
                                    std::optional<std::chrono::milliseconds> retry_after,
                                    double uniform01);

/// A thread-unsafe source of uniform draws in [0,1), seeded from std::random_device.
class Jitter {
 public:
  Jitter();
  explicit Jitter(uint64_t seed);
  double Next();

 private:
  std::mt19937_64 rng_;
};

}  // namespace gpuprov::drivers
