// SPDX-License-Identifier: Apache-2.0
#include "wait.h"

#include <algorithm>
#include <thread>

namespace gpuprov::drivers {

using gpuprov::sdk::DriverError;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

bool SleepUnlessCancelled(const gpuprov::sdk::Host& host, milliseconds how_long) {
  const auto until = steady_clock::now() + how_long;
  for (;;) {
    if (host.Cancelled()) return false;
    const auto now = steady_clock::now();
    if (now >= until) return true;
    std::this_thread::sleep_for(std::min<steady_clock::duration>(until - now, kCancelCheckInterval));
  }
}

void SleepOrCancel(const gpuprov::sdk::Host& host, milliseconds how_long,
                   const std::string& what) {
  if (!SleepUnlessCancelled(host, how_long)) {
    throw DriverError(GPUPROV_STATUS_CANCELLED, what + ": cancelled");
  }
}

bool PollUntil(const gpuprov::sdk::Host& host, const PollOptions& options,
               const std::function<bool(std::string* status)>& check) {
  const auto start = steady_clock::now();
  auto last_progress = start;
  for (;;) {
    if (host.Cancelled()) throw DriverError(GPUPROV_STATUS_CANCELLED, options.what + ": cancelled");
    std::string status;
    if (check(&status)) return true;
    const auto now = steady_clock::now();
    if (now - start >= options.timeout) return false;
    if (now - last_progress >= options.progress_every) {
      const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(now - start).count();
      host.Progress(options.what + " (" + (status.empty() ? "" : status + ", ") +
                    std::to_string(seconds) + " s)");
      last_progress = now;
    }
    const auto left = std::chrono::duration_cast<milliseconds>(start + options.timeout - now);
    SleepOrCancel(host, std::clamp(left, milliseconds(1), options.interval), options.what);
  }
}

Backoff::Backoff(const gpuprov::sdk::Host& host, RetryPolicy policy, std::string what)
    : host_(host), policy_(policy), what_(std::move(what)), start_(steady_clock::now()) {}

bool Backoff::Wait(const std::string& reason, std::optional<milliseconds> retry_after) {
  ++failures_;
  if (failures_ >= policy_.max_attempts) return false;
  const milliseconds delay = NextDelay(policy_, failures_, retry_after, jitter_.Next());
  const auto elapsed = std::chrono::duration_cast<milliseconds>(steady_clock::now() - start_);
  if (elapsed + delay > policy_.total_budget) return false;
  host_.Debug(what_ + ": " + reason + "; retrying in " + std::to_string(delay.count()) +
              " ms (attempt " + std::to_string(failures_ + 1) + " of " +
              std::to_string(policy_.max_attempts) + ")");
  if (delay >= milliseconds(1000)) {
    host_.Progress(what_ + ": " + reason + "; retrying in " +
                   std::to_string((delay.count() + 999) / 1000) + " s");
  }
  SleepOrCancel(host_, delay, what_);
  return true;
}

}  // namespace gpuprov::drivers
