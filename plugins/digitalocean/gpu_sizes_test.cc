// SPDX-License-Identifier: Apache-2.0
#include "gpu_sizes.h"

#include <gtest/gtest.h>

namespace gpuprov::digitalocean {
namespace {

struct Case {
  const char* type;
  int count;
  const char* slug;   // "" = not offered
  const char* image;
};

class GpuSizeTable : public ::testing::TestWithParam<Case> {};

TEST_P(GpuSizeTable, MapsAsTheReference) {
  const Case& c = GetParam();
  std::optional<GpuSize> s = SizeForGpu(c.type, c.count);
  if (std::string(c.slug).empty()) {
    EXPECT_FALSE(s) << c.type << ":" << c.count << " -> " << (s ? s->slug : "");
    return;
  }
  ASSERT_TRUE(s) << c.type << ":" << c.count;
  EXPECT_EQ(s->slug, c.slug);
  EXPECT_EQ(s->image, c.image);
  EXPECT_EQ(s->gpu_count, c.count);
  EXPECT_GT(s->price_per_hour, 0);
  EXPECT_FALSE(s->regions.empty());
}

// Reference: REFERENCE.md §7 (table) and §9 (images).
INSTANTIATE_TEST_SUITE_P(
    Reference, GpuSizeTable,
    ::testing::Values(Case{"H100", 1, "gpu-h100x1-80gb", "gpu-h100x1-base"},
                      Case{"h100", 8, "gpu-h100x8-640gb", "gpu-h100x8-base"},
                      Case{"H100-80GB", 1, "gpu-h100x1-80gb", "gpu-h100x1-base"},
                      Case{"H200", 1, "gpu-h200x1-141gb", "gpu-h100x1-base"},
                      Case{"H200", 8, "gpu-h200x8-1128gb", "gpu-h100x8-base"},
                      Case{"L40S", 1, "gpu-l40sx1-48gb", "gpu-h100x1-base"},
                      Case{"RTX 6000 Ada", 1, "gpu-6000adax1-48gb", "gpu-h100x1-base"},
                      Case{"rtx4000ada", 1, "gpu-4000adax1-20gb", "gpu-h100x1-base"},
                      Case{"MI300X", 1, "gpu-mi300x1-192gb", "gpu-amd-base"},
                      Case{"MI300X", 8, "gpu-mi300x8-1536gb", "gpu-amd-base"},
                      Case{"MI325X", 8, "gpu-mi325x8-2048gb", "gpu-amd-base"},
                      Case{"L4", 1, "", ""}, Case{"A100", 8, "", ""}, Case{"A100", 1, "", ""},
                      Case{"A10G", 1, "", ""}, Case{"T4", 1, "", ""}, Case{"H100", 2, "", ""},
                      Case{"H100", 4, "", ""}, Case{"L40S", 8, "", ""},
                      Case{"RTX6000", 1, "", ""}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string n = std::string(info.param.type) + "x" + std::to_string(info.param.count);
      for (char& ch : n) {
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return n;
    });

TEST(GpuSizes, SlugRoundTrip) {
  EXPECT_EQ(GpusOfSlug("gpu-h100x8-640gb"), "H100:8");
  EXPECT_EQ(GpusOfSlug("gpu-mi300x1-192gb"), "MI300X:1");
  EXPECT_EQ(GpusOfSlug(CpuSize().slug), "");
  EXPECT_EQ(GpusOfSlug("s-1vcpu-1gb"), "");
  EXPECT_EQ(CpuSize().gpu_count, 0);
}

TEST(GpuSizes, NotOfferedSaysSo) {
  const std::string l4 = NotOfferedMessage("L4", 1);
  EXPECT_NE(l4.find("does not offer L4"), std::string::npos) << l4;
  EXPECT_NE(l4.find("H100 x1/x8"), std::string::npos) << l4;
  const std::string h100x2 = NotOfferedMessage("h100", 2);
  EXPECT_NE(h100x2.find("does not offer H100:2; it offers H100 as H100:1 (gpu-h100x1-80gb), "
                        "H100:8 (gpu-h100x8-640gb)"),
            std::string::npos)
      << h100x2;
}

}  // namespace
}  // namespace gpuprov::digitalocean
