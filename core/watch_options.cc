#include "watch_options.h"

#include <stdexcept>

#include "error.h"

namespace gpuprov {

WatchFallback ParseWatchFallback(const std::string& text) {
  if (text == "none") return WatchFallback::kNone;
  if (text == "on-demand") return WatchFallback::kOnDemand;
  if (text == "candidates") return WatchFallback::kCandidates;
  throw UsageError("--fallback " + text + ": not one of none, on-demand, candidates",
                   "--fallback on-demand makes an on-demand VM when a spot one cannot be had; "
                   "--fallback candidates tries the --cloud and --region lists");
}

long ParseWatchNumber(const std::string& text, const std::string& flag, long min, long max) {
  long value = 0;
  size_t used = 0;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || value < min || value > max) {
    throw UsageError(flag + " " + text + ": not a whole number from " + std::to_string(min) +
                         " to " + std::to_string(max),
                     "e.g. " + flag + " " + std::to_string(min));
  }
  return value;
}

}  // namespace gpuprov
