// SPDX-License-Identifier: Apache-2.0
//
// Waits that end on Ctrl-C: every sleep, poll and back-off of a driver goes through these, so
// the host's `cancelled` callback (Host::Cancelled) is polled at least every 50 ms and a
// cancelled wait ends with DriverError(CANCELLED) instead of running to its end.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "gpuprov/sdk.hpp"
#include "retry_policy.h"

namespace gpuprov::drivers {

/// How often a wait looks at Host::Cancelled().
inline constexpr std::chrono::milliseconds kCancelCheckInterval{50};

/// Sleeps `how_long` in slices; false as soon as the host cancels (true when the time ran out).
bool SleepUnlessCancelled(const gpuprov::sdk::Host& host, std::chrono::milliseconds how_long);

/// Sleeps `how_long`; throws DriverError(CANCELLED, "<what>: cancelled") when the host cancels.
void SleepOrCancel(const gpuprov::sdk::Host& host, std::chrono::milliseconds how_long,
                   const std::string& what);

/// A bounded poll: `check` runs at once and then every `interval` until it returns true or
/// `timeout` has passed. Every `progress_every` the host is shown "<what> (<status>, N s)"
/// (status from the last check's *status argument, when it set one).
struct PollOptions {
  std::string what;  ///< e.g. "waiting for instance demo to terminate"
  std::chrono::milliseconds interval{2000};
  std::chrono::milliseconds timeout{600'000};
  std::chrono::milliseconds progress_every{15'000};
};

/// Runs the poll above. Returns true when `check` returned true, false when the timeout
/// passed first. Throws DriverError(CANCELLED) when the host cancels; exceptions of `check`
/// pass through. `check` may set *status to a short word for the progress line.
bool PollUntil(const gpuprov::sdk::Host& host, const PollOptions& options,
               const std::function<bool(std::string* status)>& check);

/// Retries of one logical call made by a driver itself (beyond HttpClient's own), with the
/// RetryPolicy's exponential back-off, full jitter, Retry-After and total budget.
class Backoff {
 public:
  Backoff(const gpuprov::sdk::Host& host, RetryPolicy policy, std::string what);

  /// After a failed attempt: waits the next delay (cancellable; a "retrying in N s" progress
  /// line when it is 1 s or more, naming `reason`) and returns true, or returns false at
  /// once when attempts or the time budget are used up. Throws DriverError(CANCELLED).
  bool Wait(const std::string& reason,
            std::optional<std::chrono::milliseconds> retry_after = std::nullopt);

  /// Failed attempts so far.
  int failures() const { return failures_; }

 private:
  gpuprov::sdk::Host host_;
  RetryPolicy policy_;
  std::string what_;
  std::chrono::steady_clock::time_point start_;
  int failures_ = 0;
  Jitter jitter_;
};

}  // namespace gpuprov::drivers
