#include "offer_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>

#include "file_util.h"
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


CachedOfferAnswer Answer(long asked_at) {
  CachedOfferAnswer a;
  a.asked_at = asked_at;
  a.usable = true;
  a.credentials = "found";
  a.result = "ok";
  CloudOffer o = Gpu("H100", 1);
  o.region = "us-east-1";
  o.price_per_hour = 2.5;
  o.price_source = "table";
  o.price_date = "2026-12-02";
  o.in_stock = true;
  o.spot_price_per_hour = 1.25;
  o.gpu_memory_gb = 80;
  o.powered_off_cost = "none";
  a.regions.push_back({"", {o}});
  return a;
}

TEST(OfferAnswerCache, KeepsAnAnswerPerQuestionUntilItIsTooOld) {
  ScopedTempDir dir;
  const std::string key = OfferQuestionKey("H100:1", {}, true);
  WriteCachedOfferAnswer(dir.path(), "aws", key, Answer(1000));
  std::string problem;
  auto got = ReadCachedOfferAnswer(dir.path(), "aws", key, 1100, 300, &problem);
  ASSERT_TRUE(got.has_value()) << problem;
  EXPECT_EQ(got->asked_at, 1000);
  ASSERT_EQ(got->regions.size(), 1u);
  const CloudOffer& o = got->regions[0].offers.at(0);
  EXPECT_EQ(o.instance_type, "t-H100");
  EXPECT_EQ(o.region, "us-east-1");
  EXPECT_DOUBLE_EQ(o.price_per_hour, 2.5);
  EXPECT_EQ(o.price_date, "2026-12-02");
  EXPECT_EQ(o.in_stock, std::optional<bool>(true));
  EXPECT_EQ(o.spot_price_per_hour, std::optional<double>(1.25));
  EXPECT_EQ(o.gpu_memory_gb, std::optional<int>(80));
  EXPECT_EQ(o.powered_off_cost, "none");
  // Too old, from the future, another question or another cloud: none.
  EXPECT_FALSE(ReadCachedOfferAnswer(dir.path(), "aws", key, 1301, 300).has_value());
  EXPECT_FALSE(ReadCachedOfferAnswer(dir.path(), "aws", key, 999, 300).has_value());
  EXPECT_FALSE(ReadCachedOfferAnswer(dir.path(), "aws", OfferQuestionKey("H100:1", {}, false),
                                     1100, 300)
                   .has_value());
  EXPECT_FALSE(ReadCachedOfferAnswer(dir.path(), "gcp", key, 1100, 300).has_value());
  // Private: the folder 0700, the file 0600.
  struct stat st {};
  ASSERT_EQ(stat((dir.path() / "offers").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((dir.path() / "offers" / "aws.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(OfferAnswerCache, AnotherQuestionKeepsTheFreshAnswersAndDropsTheOldOnes) {
  ScopedTempDir dir;
  const std::string a = OfferQuestionKey("H100:1", {"us-east-1", "us-west-2"}, true);
  const std::string b = OfferQuestionKey("L4:1", {}, true);
  const std::string c = OfferQuestionKey("-", {}, true);
  EXPECT_NE(a, b);
  WriteCachedOfferAnswer(dir.path(), "aws", a, Answer(1000));
  WriteCachedOfferAnswer(dir.path(), "aws", b, Answer(1200));
  EXPECT_TRUE(ReadCachedOfferAnswer(dir.path(), "aws", a, 1250, 300).has_value());
  WriteCachedOfferAnswer(dir.path(), "aws", c, Answer(1400));  // a is 400 s old then: dropped
  EXPECT_FALSE(ReadCachedOfferAnswer(dir.path(), "aws", a, 1250, 1000).has_value());
  EXPECT_TRUE(ReadCachedOfferAnswer(dir.path(), "aws", b, 1400, 300).has_value());
  EXPECT_TRUE(ReadCachedOfferAnswer(dir.path(), "aws", c, 1400, 300).has_value());
}

TEST(OfferAnswerCache, ACorruptFileIsIgnoredWithTheReasonAndReplaced) {
  ScopedTempDir dir;
  const std::string key = OfferQuestionKey("H100:1", {}, true);
  std::filesystem::create_directories(dir.path() / "offers");
  for (const char* text : {"{not json", "[]", R"({"version": 99, "answers": {}})",
                           R"({"version": 1, "answers": {"x": 3}})",
                           R"({"version": 1, "answers": {"H100:1 regions= k8s": {"asked_at": "soon"}}})"}) {
    WriteFileAtomic(dir.path() / "offers" / "aws.json", text, 0600);
    std::string problem;
    EXPECT_FALSE(ReadCachedOfferAnswer(dir.path(), "aws", key, 1000, 300, &problem).has_value());
    EXPECT_THAT(problem, ::testing::HasSubstr("aws.json is ignored: ")) << text;
  }
  WriteCachedOfferAnswer(dir.path(), "aws", key, Answer(1000));
  EXPECT_TRUE(ReadCachedOfferAnswer(dir.path(), "aws", key, 1000, 300).has_value());
}

}  // namespace
}  // namespace gpuprov
