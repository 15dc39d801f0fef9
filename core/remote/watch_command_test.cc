#include "watch_command.h"

#include <gtest/gtest.h>

#include "error.h"

namespace gpuprov {
namespace {

VmRecord SpotRecord() {
  VmRecord r;
  r.name = "demo";
  r.cloud = "aws";
  r.region = "us-east-1";
  r.instance_type = "g6.xlarge";
  r.gpus = "L4:1";
  r.kubernetes = true;
  r.spot = true;
  return r;
}

TEST(RecoveryFlags, TheFirstAttemptAsksForTheVmAsRecorded) {
  const ProvisionFlags f = RecoveryFlags(SpotRecord(), WatchOptions{}, 1);
  EXPECT_EQ(f.name, "demo");
  EXPECT_EQ(f.cloud, "aws");
  EXPECT_EQ(f.region, "us-east-1");
  EXPECT_EQ(f.instance_type, "g6.xlarge");
  ASSERT_TRUE(f.gpus);
  EXPECT_EQ(f.gpus->count, 1);
  EXPECT_EQ(f.kubernetes, true);
  EXPECT_EQ(f.spot, true);
  EXPECT_TRUE(f.yes) << "watch asks nothing";
}

TEST(RecoveryFlags, WithoutAFallbackEveryAttemptIsTheSame) {
  const ProvisionFlags f = RecoveryFlags(SpotRecord(), WatchOptions{}, 3);
  EXPECT_EQ(f.spot, true);
  EXPECT_EQ(f.cloud, "aws");
}

TEST(RecoveryFlags, FallbackOnDemandTurnsSpotOffAfterTheFirstAttempt) {
  WatchOptions o;
  o.fallback = WatchFallback::kOnDemand;
  EXPECT_EQ(RecoveryFlags(SpotRecord(), o, 1).spot, true);
  EXPECT_EQ(RecoveryFlags(SpotRecord(), o, 2).spot, false);
}

TEST(RecoveryFlags, FallbackCandidatesTriesTheListsWithEachCloudsOwnInstanceType) {
  WatchOptions o;
  o.fallback = WatchFallback::kCandidates;
  o.cloud = "aws,gcp";
  const ProvisionFlags f = RecoveryFlags(SpotRecord(), o, 2);
  EXPECT_EQ(f.cloud, "aws,gcp");
  EXPECT_FALSE(f.region);
  EXPECT_FALSE(f.instance_type);
  EXPECT_EQ(f.spot, true);
  EXPECT_EQ(RecoveryFlags(SpotRecord(), WatchOptions{o.interval, 3, o.fallback, {}, {}}, 2).cloud,
            "any");
}

TEST(WatchOptions, FallbackAndNumbersAreCheckedWhereTheyEnter) {
  EXPECT_EQ(ParseWatchFallback("on-demand"), WatchFallback::kOnDemand);
  EXPECT_EQ(ParseWatchFallback("candidates"), WatchFallback::kCandidates);
  EXPECT_THROW(ParseWatchFallback("spot"), Error);
  EXPECT_EQ(ParseWatchNumber("30", "--interval", 1, 86400), 30);
  EXPECT_THROW(ParseWatchNumber("0", "--interval", 1, 86400), Error);
  EXPECT_THROW(ParseWatchNumber("3x", "--max-attempts", 1, 100), Error);
}

}  // namespace
}  // namespace gpuprov
