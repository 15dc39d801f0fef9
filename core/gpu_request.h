// GPU requests as users write them: TYPE:COUNT, e.g. L4:1, A100:8, H100-80GB:8.
#pragma once

#include <string>
#include <string_view>

namespace gpuprov {

inline constexpr int kMaxGpuCount = 64;
inline constexpr std::size_t kMaxGpuTypeLength = 40;

struct GpuRequest {
  std::string type;  // Upper case, [A-Z0-9-], starts with a letter or digit.
  int count = 0;     // 1..kMaxGpuCount.

  friend bool operator==(const GpuRequest&, const GpuRequest&) = default;
};

/// Parses TYPE:COUNT. Surrounding blanks are ignored and the type is upper-cased.
/// \a field_name says where the text came from and starts every error message verbatim,
/// e.g. "spec.yaml:4: field 'gpus'", "--gpus" or "GPUPROV_GPUS".
/// Throws UsageError (exit code 2) when the text is not TYPE:COUNT with a valid type and
/// a count of 1..64.
GpuRequest ParseGpuRequest(std::string_view text, std::string_view field_name);

/// "L4:1".
std::string ToString(const GpuRequest& request);

}  // namespace gpuprov
