// SPDX-License-Identifier: Apache-2.0
#include "gpu_names.h"

#include <gtest/gtest.h>

#include <array>

namespace gpuprov::drivers {
namespace {

TEST(GpuNames, SpellingsOfOneModelMeetInItsCanonicalName) {
  for (const char* n : {"H100", "h100", "H100-80GB", "h100 sxm5", "NVIDIA H100", "H100_PCIe"}) {
    EXPECT_EQ(CanonicalGpuName(n), "H100") << n;
  }
  EXPECT_EQ(CanonicalGpuName("RTX A6000"), "A6000");
  EXPECT_EQ(CanonicalGpuName("Quadro RTX 6000"), "RTX6000");
  EXPECT_EQ(CanonicalGpuName("RTX 6000 Ada Generation"), "RTX6000ADA");
  EXPECT_EQ(CanonicalGpuName("AMD MI300X"), "MI300X");
  EXPECT_EQ(CanonicalGpuName("tesla-v100"), "V100");
}

TEST(GpuNames, UnknownNamesHaveNone) {
  EXPECT_EQ(CanonicalGpuName("K80"), std::nullopt);
  EXPECT_EQ(CanonicalGpuName(""), std::nullopt);
}

TEST(GpuNames, AmongKeepsOnlyWhatTheCloudSells) {
  constexpr std::array<std::string_view, 2> kOffered = {"H100", "A10"};
  EXPECT_EQ(CanonicalGpuAmong("h100-80gb", kOffered), "H100");
  EXPECT_EQ(CanonicalGpuAmong("H200", kOffered), std::nullopt);
  EXPECT_EQ(CanonicalGpuAmong("K80", kOffered), std::nullopt);
}

}  // namespace
}  // namespace gpuprov::drivers
