// Elapsed time of a phase, as progress lines and the state record's phase_seconds show it.
#pragma once

#include <chrono>

namespace gpuprov {

/// Whole seconds since \a start.
inline std::chrono::seconds Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() -
                                                          start);
}

/// Seconds since \a start, to a tenth.
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  return static_cast<double>(ms.count() / 100) / 10.0;
}

}  // namespace gpuprov
