// The options of `gpuprov watch` (core/remote/watch_command.h runs it), base code so the CLI
// can parse them without the remote module.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace gpuprov {

/// What to do after an attempt to bring a preempted VM back failed.
enum class WatchFallback { kNone, kOnDemand, kCandidates };

/// --fallback none|on-demand|candidates. Throws UsageError naming the flag and the values.
WatchFallback ParseWatchFallback(const std::string& text);

/// --interval N, --max-attempts N: a whole number from \a min to \a max. Throws UsageError
/// naming \a flag and the range.
long ParseWatchNumber(const std::string& text, const std::string& flag, long min, long max);

struct WatchOptions {
  std::chrono::seconds interval{30};  // --interval: how often the cloud is asked
  int max_attempts = 3;               // --max-attempts: per preemption
  WatchFallback fallback = WatchFallback::kNone;
  std::optional<std::string> cloud;   // --cloud LIST: the candidates of --fallback candidates
  std::optional<std::string> region;  // --region LIST: the same
};

}  // namespace gpuprov
