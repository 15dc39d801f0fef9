#include "offer_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>

#include "test_support.h"

namespace gpuprov {
namespace {

using gpuprov::testing::ScopedTempDir;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

CloudOffer Gpu(const std::string& type, int count) {
  CloudOffer o;
  o.instance_type = "t-" + type;
  o.gpu_type = type;
  o.gpu_count = count;
  return o;
}

TEST(OfferCache, RemembersGpuOffersPerCloudSortedWithoutRepeats) {
  ScopedTempDir dir;
  CloudOffer cpu;
  cpu.instance_type = "cpu-only";
  RememberGpuOffers(dir.path(), "aws", {Gpu("L4", 1), cpu, Gpu("A100", 8)});
  RememberGpuOffers(dir.path(), "aws", {Gpu("L4", 1), Gpu("H100", 8)});
  RememberGpuOffers(dir.path(), "gcp", {Gpu("T4", 1)});
  EXPECT_THAT(RememberedGpuTypes(dir.path(), "aws"), ElementsAre("A100:8", "H100:8", "L4:1"));
  EXPECT_THAT(RememberedGpuTypes(dir.path(), "gcp"), ElementsAre("T4:1"));
  EXPECT_THAT(RememberedGpuTypes(dir.path(), ""),
              ElementsAre("A100:8", "H100:8", "L4:1", "T4:1"));
  EXPECT_THAT(RememberedGpuTypes(dir.path(), "lambda"), IsEmpty());
  struct stat st {};
  ASSERT_EQ(stat((dir.path() / "gpus-aws.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(OfferCache, KeepsTheNewestUpToTheLimit) {
  ScopedTempDir dir;
  std::vector<CloudOffer> many;
  for (int i = 1; i <= static_cast<int>(kMaxCachedGpuTypes) + 10; ++i) {
    many.push_back(Gpu("OLD", i % 64 + 1));
    many.push_back(Gpu("OLD" + std::to_string(i), 1));
  }
  RememberGpuOffers(dir.path(), "aws", many);
  RememberGpuOffers(dir.path(), "aws", {Gpu("NEW", 2)});
  const auto types = RememberedGpuTypes(dir.path(), "aws");
  EXPECT_EQ(types.size(), kMaxCachedGpuTypes);
  EXPECT_NE(std::find(types.begin(), types.end(), "NEW:2"), types.end());
}

TEST(OfferCache, NoGpuOffersWriteNothingAndAMissingFolderGivesNone) {
  ScopedTempDir dir;
  RememberGpuOffers(dir.path(), "aws", {});
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "gpus-aws.txt"));
  EXPECT_THAT(RememberedGpuTypes(dir.path() / "missing", ""), IsEmpty());
}

}  // namespace
}  // namespace gpuprov
