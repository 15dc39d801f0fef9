// SPDX-License-Identifier: Apache-2.0
#include "gpu_names.h"

#include <algorithm>
#include <vector>

#include "text.h"

namespace gpuprov::drivers {
namespace {

struct GpuModel {
  std::string_view canonical;
  std::vector<std::string_view> spellings;  // Squash'ed, besides the canonical
};

// Spellings from the clouds' catalogues and APIs: DigitalOcean's size descriptions
// (plugins/digitalocean/gpu_sizes.cc), Lambda's instance type descriptions and Verda's
// instance type names, and the forms users type for them.
// clang-format off
const GpuModel kModels[] = {
    {"A10",         {"A1024GB"}},
    {"A100",        {"A10040GB", "A10080GB", "A100SXM", "A100SXM4", "A100PCIE"}},
    {"A6000",       {"RTXA6000"}},
    {"B200",        {"B200SXM6"}},
    {"B300",        {}},
    {"GH200",       {"GH20096GB"}},
    {"H100",        {"H10080GB", "H100SXM", "H100SXM5", "H100PCIE", "NVIDIAH100"}},
    {"H200",        {"H200141GB", "NVIDIAH200"}},
    {"L40S",        {"L40S48GB", "NVIDIAL40S"}},
    {"MI300X",      {"AMDMI300X"}},
    {"MI325X",      {"AMDMI325X"}},
    {"RTX4000ADA",  {"4000ADA", "NVIDIARTX4000ADA"}},
    {"RTX6000",     {"QUADRORTX6000"}},
    {"RTX6000ADA",  {"6000ADA", "NVIDIARTX6000ADA", "RTX6000ADAGENERATION"}},
    {"RTXPRO6000",  {}},
    {"V100",        {"TESLAV100"}},
};
// clang-format on

}  // namespace

std::optional<std::string> CanonicalGpuName(std::string_view name) {
  const std::string key = Squash(name);
  for (const GpuModel& m : kModels) {
    if (key == m.canonical ||
        std::find(m.spellings.begin(), m.spellings.end(), key) != m.spellings.end()) {
      return std::string(m.canonical);
    }
  }
  return std::nullopt;
}

std::optional<std::string> CanonicalGpuAmong(std::string_view name,
                                             std::span<const std::string_view> offered) {
  std::optional<std::string> canonical = CanonicalGpuName(name);
  if (!canonical || std::find(offered.begin(), offered.end(), *canonical) == offered.end()) {
    return std::nullopt;
  }
  return canonical;
}

}  // namespace gpuprov::drivers
