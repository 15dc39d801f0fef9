// SPDX-License-Identifier: Apache-2.0
#include "instance_types.h"

#include <gtest/gtest.h>

#include "gpuprov/sdk.hpp"

namespace gpuprov::lambda {
namespace {

TEST(LambdaInstanceTypes, GpuRequestsMapToTheReferenceTable) {
  auto type_for = [](const std::string& gpu, int count) {
    return drivers::ChooseInstanceType(TypeCatalogue(), drivers::GpuRequest{gpu, count}, "")
        .row.instance_type;
  };
  EXPECT_EQ(type_for("A10", 1), "gpu_1x_a10");
  EXPECT_EQ(type_for("A100", 1), "gpu_1x_a100");
  EXPECT_EQ(type_for("a100-80gb", 8), "gpu_8x_a100");
  EXPECT_EQ(type_for("H100", 1), "gpu_1x_h100_pcie");
  EXPECT_EQ(type_for("H100", 8), "gpu_8x_h100_sxm5");
  EXPECT_EQ(type_for("GH200", 1), "gpu_1x_gh200");
  EXPECT_EQ(type_for("B200", 8), "gpu_8x_b200_sxm6");
}

TEST(LambdaInstanceTypes, L4IsRefusedWithWhatLambdaOffers) {
  try {
    drivers::ChooseInstanceType(TypeCatalogue(), drivers::GpuRequest{"L4", 1}, "");
    FAIL() << "L4 accepted";
  } catch (const gpuprov::sdk::DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
    const std::string m = e.what();
    EXPECT_NE(m.find("Lambda does not offer L4:1"), std::string::npos) << m;
    EXPECT_NE(m.find("Lambda has no L4 instances"), std::string::npos) << m;
    EXPECT_NE(m.find("H100"), std::string::npos) << m;
    EXPECT_NE(m.find("A100"), std::string::npos) << m;
  }
}

TEST(LambdaInstanceTypes, AnOfferedGpuInAnotherCountListsItsCounts) {
  const std::string m = drivers::NotOfferedMessage(TypeCatalogue(), "H100", 3);
  EXPECT_NE(m.find("H100:8 (gpu_8x_h100_sxm5)"), std::string::npos) << m;
}

TEST(LambdaInstanceTypes, TypeNamesReadAsGpus) {
  EXPECT_EQ(GpusText("gpu_8x_h100_sxm5"), "H100:8");
  EXPECT_EQ(GpusText("gpu_1x_a100_sxm4"), "A100:1");
  EXPECT_EQ(GpusText("gpu_2x_h100_sxm5"), "H100:2");
  // Not in the table, but named by the pattern (the set changes; section 7).
  EXPECT_EQ(GpusText("gpu_2x_b200_sxm6"), "B200:2");
  EXPECT_EQ(GpusText("gpu_4x_gh200"), "GH200:4");
  EXPECT_EQ(GpusText("cpu_4x_general"), "");
  EXPECT_EQ(GpusText("gpu_1x_l4"), "");
  EXPECT_EQ(GpusText("gpu_x_a10"), "");
}

}  // namespace
}  // namespace gpuprov::lambda
