#include "offers_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprov {
namespace {

using ::testing::HasSubstr;

CloudOffer Offer(const std::string& type, const std::string& region, double price,
                 const std::string& gpu = "H100") {
  CloudOffer o;
  o.instance_type = type;
  o.gpu_type = gpu;
  o.gpu_count = 1;
  o.region = region;
  o.price_per_hour = price;
  o.price_source = "live";
  return o;
}

CloudOfferAnswer Answered(const std::string& cloud, size_t index,
                          std::vector<CloudOffer> offers) {
  CloudOfferAnswer a;
  a.cloud = cloud;
  a.index = index;
  a.check.cloud = cloud;
  a.check.usable = true;
  a.check.credentials = "found";
  a.offers.push_back({cloud, "", 0, std::move(offers), ""});
  return a;
}

CloudOfferAnswer NoCredentials(const std::string& cloud, size_t index) {
  CloudOfferAnswer a;
  a.cloud = cloud;
  a.index = index;
  a.check.cloud = cloud;
  a.check.credentials = "missing or rejected";
  a.check.result = cloud + ": no API key: set $HYPERSTACK_API_KEY";
  a.check.fix = "set the credentials the message names";
  return a;
}

CloudOfferAnswer Failed(const std::string& cloud, size_t index, const std::string& error) {
  CloudOfferAnswer a;
  a.cloud = cloud;
  a.index = index;
  a.error = error;
  return a;
}

std::vector<CloudOfferAnswer> World() {
  return {
      Answered("aws", 0, {Offer("p5.1", "us-east-1", 6.0), Offer("p5.1", "us-west-2", 5.5)}),
      NoCredentials("hyperstack", 1),
      Answered("lambda", 2, {Offer("gpu_1x_h100", "us-south-1", 2.49)}),
      Failed("verda", 3, "no answer within 10 s ([defaults.timeouts] offers_wait_seconds)"),
      Answered("gcp", 4, {}),
  };
}

TEST(OfferRows, CheapestFirstFailuresOneLineEachCloudsWithoutCredentialsLeftOut) {
  const std::vector<Candidate> rows = OfferRows(World(), {}, CandidateRules{});
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0].cloud, "lambda");
  EXPECT_EQ(rows[1].cloud, "aws");
  EXPECT_EQ(rows[1].region, "us-west-2");
  EXPECT_EQ(rows[2].region, "us-east-1");
  EXPECT_EQ(rows[3].cloud, "verda");
  EXPECT_THAT(rows[3].skipped, HasSubstr("no answer within 10 s"));
  EXPECT_EQ(rows[4].cloud, "gcp");
  EXPECT_EQ(rows[4].skipped, "no offer for this request");
}

// What `offers` shows is what `provision --cloud any` tries: OfferRows hands the answers to
// RankCandidates, the function provision's candidate loop (core/remote/failover.cc) calls, in
// the form that loop builds them (one CloudOffers per cloud and region, ordered as given).
TEST(OfferRows, AreTheCandidatesProvisionWouldTry) {
  const std::vector<std::string> regions = {"us-east-1", "us-south-1"};
  std::vector<CloudOfferAnswer> answers = {
      Answered("aws", 0, {Offer("p5.1", "us-east-1", 6.0)}),
      Answered("lambda", 1, {Offer("gpu_1x_h100", "us-south-1", 2.49)}),
  };
  answers[0].offers = {{"aws", "us-east-1", 0, {Offer("p5.1", "us-east-1", 6.0)}, ""},
                       {"aws", "us-south-1", 0, {}, ""}};
  answers[1].offers = {{"lambda", "us-east-1", 0, {}, "offers failed: HTTP 500"},
                       {"lambda", "us-south-1", 0, {Offer("gpu_1x_h100", "us-south-1", 2.49)}, ""}};
  const std::vector<CloudOffers> as_provision_asks = {
      {"aws", "us-east-1", 0, {Offer("p5.1", "us-east-1", 6.0)}, ""},
      {"aws", "us-south-1", 1, {}, ""},
      {"lambda", "us-east-1", 2, {}, "offers failed: HTTP 500"},
      {"lambda", "us-south-1", 3, {Offer("gpu_1x_h100", "us-south-1", 2.49)}, ""},
  };
  for (const CandidateRules& rules :
       {CandidateRules{}, CandidateRules{std::nullopt, 3.0, false},
        CandidateRules{std::string("p5.1"), std::nullopt, false}}) {
    const std::vector<Candidate> shown = OfferRows(answers, regions, rules);
    const std::vector<Candidate> tried = RankCandidates(as_provision_asks, rules);
    ASSERT_EQ(shown.size(), tried.size());
    for (size_t i = 0; i < shown.size(); ++i) {
      EXPECT_EQ(shown[i].cloud, tried[i].cloud) << i;
      EXPECT_EQ(shown[i].region, tried[i].region) << i;
      EXPECT_EQ(shown[i].offer.instance_type, tried[i].offer.instance_type) << i;
      EXPECT_EQ(shown[i].skipped, tried[i].skipped) << i;
    }
    EXPECT_EQ(CandidateTable(shown), CandidateTable(tried));
  }
}

TEST(OfferRows, SpotOrdersBySpotPriceAndMaxPriceSkips) {
  std::vector<CloudOfferAnswer> answers = World();
  CloudOffer spot = Offer("p5.1", "us-east-1", 6.0);
  spot.spot_price_per_hour = 1.9;
  answers[0] = Answered("aws", 0, {spot});
  CandidateRules rules;
  rules.spot = true;
  const std::vector<Candidate> rows = OfferRows(answers, {}, rules);
  EXPECT_EQ(rows[0].cloud, "aws");
  EXPECT_TRUE(rows[0].skipped.empty());
  EXPECT_EQ(rows[1].cloud, "lambda");
  EXPECT_EQ(rows[1].skipped, "no spot offer for this request");
  rules.spot = false;
  rules.max_price = 3.0;
  const std::vector<Candidate> capped = OfferRows(answers, {}, rules);
  EXPECT_EQ(capped[0].cloud, "lambda");
  EXPECT_EQ(capped[1].skipped, "above --max-price $3.00/h");
}

TEST(OffersTable, ColumnsSkippedRowsAndCloudsWithoutCredentialsWithTheFix) {
  std::vector<CloudOfferAnswer> answers = World();
  answers[0].cached = true;
  answers[0].age_seconds = 42;
  answers[2].offers[0].offers[0].in_stock = true;
  answers[2].offers[0].offers[0].spot_price_per_hour = 1.2;
  const std::string table = OffersTable(OfferRows(answers, {}, CandidateRules{}), answers);
  EXPECT_THAT(table, HasSubstr("GPUS    GPU MEM  CLOUD   REGION      INSTANCE TYPE  $/H      "
                               "SPOT $/H  IN STOCK  PRICE FROM  ASKED\n"));
  EXPECT_THAT(table, HasSubstr("H100:1  80 GB    lambda  us-south-1  gpu_1x_h100    $2.49/h  "
                               "$1.20/h   yes       live        now\n"));
  EXPECT_THAT(table, HasSubstr("H100:1  80 GB    aws     us-west-2   p5.1           $5.50/h  "
                               "-         -         live        42s ago\n"));
  EXPECT_THAT(table, HasSubstr("\nnot offered:\n  verda: no answer within 10 s"));
  EXPECT_THAT(table, HasSubstr("  gcp: no offer for this request\n"));
  EXPECT_THAT(table, HasSubstr("\nwithout credentials:\n  hyperstack: no API key: set "
                               "$HYPERSTACK_API_KEY\n    fix: set the credentials the message "
                               "names\n"));
  EXPECT_EQ(OffersTable({}, {}), "no offers\n");
}

TEST(KnownGpuMemoryGb, OneSizeModelsOnly) {
  EXPECT_EQ(KnownGpuMemoryGb("H100"), 80);
  EXPECT_EQ(KnownGpuMemoryGb("L4"), 24);
  EXPECT_EQ(KnownGpuMemoryGb("A100"), std::nullopt);  // 40 or 80 GB
  EXPECT_EQ(KnownGpuMemoryGb("NOPE"), std::nullopt);
}

}  // namespace
}  // namespace gpuprov
