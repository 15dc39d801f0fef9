#include "gpu_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error.h"

namespace gpuprov {
namespace {

using ::testing::HasSubstr;

struct GoodCase {
  const char* text;
  const char* type;
  int count;
};

class GpuRequestGoodTest : public ::testing::TestWithParam<GoodCase> {};

TEST_P(GpuRequestGoodTest, Parses) {
  const GoodCase& c = GetParam();
  const GpuRequest request = ParseGpuRequest(c.text, "--gpus");
  EXPECT_EQ(request.type, c.type);
  EXPECT_EQ(request.count, c.count);
}

INSTANTIATE_TEST_SUITE_P(GpuRequestAccepted, GpuRequestGoodTest,
                         ::testing::Values(GoodCase{"L4:1", "L4", 1}, GoodCase{"A100:8", "A100", 8},
                                           GoodCase{"H100-80GB:8", "H100-80GB", 8},
                                           GoodCase{"a100:2", "A100", 2},
                                           GoodCase{"rtx-a6000:64", "RTX-A6000", 64},
                                           GoodCase{"4090:1", "4090", 1},
                                           GoodCase{" L4:01 ", "L4", 1}));

class GpuRequestBadTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GpuRequestBadTest, ThrowsUsageErrorNamingTheField) {
  try {
    ParseGpuRequest(GetParam(), "spec.yaml:4: field 'gpus'");
    FAIL() << "accepted " << GetParam();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_THAT(e.what(), HasSubstr("spec.yaml:4: field 'gpus': \""));
    EXPECT_THAT(e.what(), HasSubstr(GetParam()));
    EXPECT_THAT(e.what(), HasSubstr("write e.g. L4:1 or H100-80GB:8"));
  }
}

INSTANTIATE_TEST_SUITE_P(GpuRequestRejected, GpuRequestBadTest,
                         ::testing::Values("L4:0", "L4:x", ":1", "L4", "L4:1:2", "L4:-1", "L4:999",
                                           "L4:", "", "-L4:1", "L_4:1", "L4 :1", "L4:+1", "L4:1.5",
                                           "L4:65", "L4:99999999999999999999"));

TEST(GpuRequestTest, FormatMessageMatchesTheDocumentedExample) {
  try {
    ParseGpuRequest("L4:x", "spec.yaml:4: field 'gpus'");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "spec.yaml:4: field 'gpus': \"L4:x\" is not TYPE:COUNT; write e.g. L4:1 or "
                 "H100-80GB:8");
  }
}

TEST(GpuRequestTest, CountOutOfRangeSaysTheRange) {
  try {
    ParseGpuRequest("L4:999", "--gpus");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("1 to 64"));
  }
}

TEST(GpuRequestTest, TypeTooLongIsRejected) {
  EXPECT_THROW(ParseGpuRequest(std::string(41, 'A') + ":1", "--gpus"), Error);
  EXPECT_NO_THROW(ParseGpuRequest(std::string(40, 'A') + ":1", "--gpus"));
}

TEST(GpuRequestTest, ToStringRoundTrips) {
  const GpuRequest request = ParseGpuRequest("h100-80gb:8", "--gpus");
  EXPECT_EQ(ToString(request), "H100-80GB:8");
  EXPECT_EQ(ParseGpuRequest(ToString(request), "--gpus"), request);
}

}  // namespace
}  // namespace gpuprov
