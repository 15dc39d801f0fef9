// SPDX-License-Identifier: Apache-2.0
#include "pacer.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "wait.h"

namespace gpuprov::drivers {

void PaceCall(const gpuprov::sdk::Host& host, const std::string& key,
              std::chrono::milliseconds interval, const std::string& what) {
  if (interval.count() <= 0) return;
  using Clock = std::chrono::steady_clock;
  static std::mutex mu;
  static std::map<std::string, Clock::time_point> next_slot;
  Clock::time_point slot;
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto now = Clock::now();
    auto [it, added] = next_slot.try_emplace(key, now);
    slot = std::max(now, it->second);
    it->second = slot + interval;
  }
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(slot - Clock::now());
  if (wait.count() > 0) SleepOrCancel(host, wait, what);
}

}  // namespace gpuprov::drivers
