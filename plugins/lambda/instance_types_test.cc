// SPDX-License-Identifier: Apache-2.0
#include "instance_types.h"

#include <Poco/JSON/Parser.h>
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

// L7: create chooses among the live list's types with the GPUs asked (L-SPEC
// listInstanceTypes), the cheapest with capacity in the region; a named type alone.
TEST(LambdaInstanceTypes, TheLiveListGivesTheCheapestVariantWithCapacity) {
  Poco::JSON::Object::Ptr types = Poco::JSON::Parser().parse(R"({
    "gpu_1x_h100_pcie": {"instance_type": {"name": "gpu_1x_h100_pcie", "price_cents_per_hour": 249},
                         "regions_with_capacity_available": [{"name": "us-west-1"}]},
    "gpu_1x_h100_sxm5": {"instance_type": {"name": "gpu_1x_h100_sxm5", "price_cents_per_hour": 329},
                         "regions_with_capacity_available": [{"name": "us-east-1"}, {"name": "us-west-1"}]},
    "gpu_1x_h100_newvariant": {"instance_type": {"name": "gpu_1x_h100_newvariant", "price_cents_per_hour": 199},
                         "regions_with_capacity_available": []},
    "gpu_8x_h100_sxm5": {"instance_type": {"name": "gpu_8x_h100_sxm5", "price_cents_per_hour": 2392},
                         "regions_with_capacity_available": [{"name": "us-east-1"}]}
  })").extract<Poco::JSON::Object::Ptr>();
  LiveChoice any = ChooseLiveType(types, "H100", 1, "", "");
  EXPECT_EQ(any.type, "gpu_1x_h100_pcie");
  EXPECT_EQ(any.region, "us-west-1");
  EXPECT_EQ(any.candidates.size(), 3u);
  LiveChoice east = ChooseLiveType(types, "H100", 1, "us-east-1", "");
  EXPECT_EQ(east.type, "gpu_1x_h100_sxm5");
  EXPECT_EQ(east.region, "us-east-1");
  LiveChoice none = ChooseLiveType(types, "H100", 1, "us-south-1", "");
  EXPECT_EQ(none.type, "");
  EXPECT_EQ(none.candidates.size(), 3u);
  LiveChoice named = ChooseLiveType(types, "", 0, "", "gpu_1x_h100_sxm5");
  EXPECT_EQ(named.type, "gpu_1x_h100_sxm5");
  EXPECT_EQ(named.region, "us-east-1");
  EXPECT_TRUE(ChooseLiveType(types, "", 0, "", "gpu_1x_nope").candidates.empty());
  EXPECT_TRUE(ChooseLiveType(types, "A10", 1, "", "").candidates.empty());
}

}  // namespace
}  // namespace gpuprov::lambda
