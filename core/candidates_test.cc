#include "candidates.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error.h"

namespace gpuprov {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string UsageMessage(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    return e.what();
  }
  ADD_FAILURE() << "no UsageError";
  return "";
}

TEST(ParseCloudList, OneNameAListOrAny) {
  EXPECT_THAT(ParseCloudList("aws", "--cloud").clouds, ElementsAre("aws"));
  EXPECT_FALSE(ParseCloudList("aws", "--cloud").any);
  EXPECT_THAT(ParseCloudList("aws,gcp, lambda", "--cloud").clouds,
              ElementsAre("aws", "gcp", "lambda"));
  const CloudSelection any = ParseCloudList("any", "--cloud");
  EXPECT_TRUE(any.any);
  EXPECT_TRUE(any.clouds.empty());
}

TEST(ParseCloudList, RefusesEmptyEntriesRepeatsBadNamesAndAnyInAList) {
  EXPECT_THAT(UsageMessage([] { ParseCloudList("aws,,gcp", "--cloud"); }),
              HasSubstr("--cloud: \"aws,,gcp\" has an empty cloud"));
  EXPECT_THAT(UsageMessage([] { ParseCloudList("aws,", "--cloud"); }), HasSubstr("empty cloud"));
  EXPECT_THAT(UsageMessage([] { ParseCloudList("aws,gcp,aws", "--cloud"); }),
              HasSubstr("cloud \"aws\" is given twice"));
  EXPECT_THAT(UsageMessage([] { ParseCloudList("aws,G CP", "--cloud"); }),
              HasSubstr("\"G CP\" is not a cloud name"));
  EXPECT_THAT(UsageMessage([] { ParseCloudList("aws,any", "GPUPROV_CLOUD"); }),
              HasSubstr("GPUPROV_CLOUD: \"any\" stands alone"));
}

TEST(ParseRegionList, ListInOrderAnyIsTheDriversChoice) {
  EXPECT_THAT(ParseRegionList("us-central1", "--region"), ElementsAre("us-central1"));
  EXPECT_THAT(ParseRegionList("us-central1, us-east1", "--region"),
              ElementsAre("us-central1", "us-east1"));
  EXPECT_TRUE(ParseRegionList("any", "--region").empty());
  EXPECT_THAT(UsageMessage([] { ParseRegionList("a,a", "--region"); }),
              HasSubstr("region \"a\" is given twice"));
  EXPECT_THAT(UsageMessage([] { ParseRegionList("a,any", "--region"); }),
              HasSubstr("\"any\" stands alone"));
}

TEST(IsCandidateList, ListsAndAnyOnly) {
  EXPECT_FALSE(IsCandidateList(""));
  EXPECT_FALSE(IsCandidateList("aws"));
  EXPECT_TRUE(IsCandidateList("aws,gcp"));
  EXPECT_TRUE(IsCandidateList("any"));
}

CloudOffer Offer(const std::string& type, const std::string& region, double price) {
  CloudOffer o;
  o.instance_type = type;
  o.gpu_type = "H100";
  o.gpu_count = 1;
  o.region = region;
  o.price_per_hour = price;
  return o;
}

CloudOffers Asked(const std::string& cloud, const std::string& region, size_t order,
                  std::vector<CloudOffer> offers, const std::string& error = "") {
  CloudOffers a;
  a.cloud = cloud;
  a.region = region;
  a.order = order;
  a.offers = std::move(offers);
  a.error = error;
  return a;
}

TEST(CandidatesFromOffers, CheapestPerRegionNamedTypeFailuresAndNothingOffered) {
  const std::vector<CloudOffers> asked = {
      Asked("aws", "", 0,
            {Offer("p5.big", "us-east-1", 9), Offer("p5.small", "us-east-1", 4),
             Offer("p5.small", "us-west-2", 5)}),
      Asked("gcp", "us-central1", 1, {}),
      Asked("lambda", "", 2, {}, "offers failed: HTTP 500"),
  };
  const std::vector<Candidate> c = CandidatesFromOffers(asked, std::nullopt);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].cloud, "aws");
  EXPECT_EQ(c[0].region, "us-east-1");
  EXPECT_EQ(c[0].offer.instance_type, "p5.small");
  EXPECT_EQ(c[1].region, "us-west-2");
  EXPECT_EQ(c[2].cloud, "gcp");
  EXPECT_EQ(c[2].region, "us-central1");
  EXPECT_EQ(c[2].skipped, "no offer for this request");
  EXPECT_EQ(c[3].skipped, "offers failed: HTTP 500");

  const std::vector<Candidate> named = CandidatesFromOffers(asked, std::string("p5.big"));
  EXPECT_EQ(named[0].offer.instance_type, "p5.big");
  EXPECT_EQ(named[1].skipped, "no offer of instance type p5.big");  // gcp offered nothing
}

Candidate Cand(const std::string& cloud, double price, size_t order,
               const std::string& skipped = "") {
  Candidate c;
  c.cloud = cloud;
  c.region = "r";
  c.offer = Offer("t", "r", price);
  c.order = order;
  c.skipped = skipped;
  return c;
}

std::vector<std::string> Clouds(const std::vector<Candidate>& c) {
  std::vector<std::string> out;
  for (const auto& x : c) out.push_back(x.cloud);
  return out;
}

TEST(SortCandidates, ByPriceTiesByOrderGivenUnknownPriceThenSkippedLast) {
  std::vector<Candidate> c = {Cand("skipped", 0.1, 0, "no offer"), Cand("dear", 3, 1),
                              Cand("unknown", 0, 2), Cand("tie-b", 2, 4), Cand("tie-a", 2, 3),
                              Cand("cheap", 1, 5)};
  SortCandidates(c);
  EXPECT_THAT(Clouds(c), ElementsAre("cheap", "tie-a", "tie-b", "dear", "unknown", "skipped"));
}

TEST(SkipAbovePrice, SkipsOnlyDearerOffersWithTheReason) {
  std::vector<Candidate> c = {Cand("a", 1, 0), Cand("b", 2.5, 1), Cand("c", 2, 2),
                              Cand("d", 0, 3), Cand("e", 9, 4, "no offer for this request")};
  SkipAbovePrice(c, std::nullopt);
  EXPECT_TRUE(c[1].skipped.empty());
  EXPECT_TRUE(c[3].skipped.empty());
  SkipAbovePrice(c, 2.0);
  EXPECT_TRUE(c[0].skipped.empty());
  EXPECT_EQ(c[1].skipped, "above --max-price $2.00/h");
  EXPECT_TRUE(c[2].skipped.empty());  // at the limit is allowed, as DecideCreateConsent does
  EXPECT_EQ(c[3].skipped, "price unknown, so not known to be within --max-price");
  EXPECT_EQ(c[4].skipped, "no offer for this request");  // the first reason stays
}

TEST(CandidateTable, NumbersTriedRowsAndSaysWhyOthersAreSkipped) {
  std::vector<Candidate> c = {Cand("aws", 1.5, 0), Cand("gcp", 0, 1, "no offer for this request"),
                              Cand("lambda", 2, 2)};
  c[0].failed = "no capacity";
  c[0].offer.price_source = "table";
  c[1].offer.price_source = "live";  // no price: nothing to say where it came from
  c[2].offer.price_source = "live";
  c[2].offer.in_stock = true;
  const std::string t = CandidateTable(c);
  EXPECT_THAT(t, HasSubstr("#  CLOUD   REGION  INSTANCE TYPE  GPUS    $/H      PRICE FROM  IN STOCK  NOTE\n"));
  EXPECT_THAT(t, HasSubstr("1  aws     r       t              H100:1  $1.50/h  table       -         failed: no capacity\n"));
  EXPECT_THAT(t, HasSubstr("-  gcp     r       t              H100:1  -        -           -         skipped: no offer"));
  EXPECT_THAT(t, HasSubstr("2  lambda  r       t              H100:1  $2.00/h  live        yes\n"));
}

TEST(CandidateTable, ATablePriceSaysTheDayItsTableWasWritten) {
  std::vector<Candidate> c = {Cand("aws", 1.5, 0)};
  c[0].offer.price_source = "table";
  c[0].offer.price_date = "2026-12-02";
  EXPECT_THAT(CandidateTable(c), HasSubstr("$1.50/h  table 2026-12-02  -"));
}

// The failover decision table: one test per row.
TEST(DecideAfterAttempt, CreatedProceeds) {
  EXPECT_EQ(DecideAfterAttempt(AttemptOutcome::kCreated, true, true).action,
            AttemptAction::kProceed);
}
TEST(DecideAfterAttempt, CapacityWithANextCandidateMovesOn) {
  const AttemptDecision d = DecideAfterAttempt(AttemptOutcome::kCapacity, true, true);
  EXPECT_EQ(d.action, AttemptAction::kNext);
  EXPECT_EQ(d.reason, "no capacity");
}
TEST(DecideAfterAttempt, QuotaWithANextCandidateMovesOn) {
  const AttemptDecision d = DecideAfterAttempt(AttemptOutcome::kQuota, true, true);
  EXPECT_EQ(d.action, AttemptAction::kNext);
  EXPECT_EQ(d.reason, "quota");
}
TEST(DecideAfterAttempt, BootCapacityWithANextCandidateMovesOn) {
  const AttemptDecision d = DecideAfterAttempt(AttemptOutcome::kBootCapacity, true, true);
  EXPECT_EQ(d.action, AttemptAction::kNext);
  EXPECT_EQ(d.reason, "no capacity while booting");
}
TEST(DecideAfterAttempt, CapacityOnTheLastCandidateCleansUpAndStops) {
  const AttemptDecision d = DecideAfterAttempt(AttemptOutcome::kCapacity, true, false);
  EXPECT_EQ(d.action, AttemptAction::kCleanUpAndStop);
  EXPECT_EQ(d.reason, "no capacity; no candidate left");
}
TEST(DecideAfterAttempt, BootCapacityOnTheLastCandidateCleansUpAndStops) {
  EXPECT_EQ(DecideAfterAttempt(AttemptOutcome::kBootCapacity, true, false).action,
            AttemptAction::kCleanUpAndStop);
}
TEST(DecideAfterAttempt, SingleCandidateCapacityStopsAsBefore) {
  EXPECT_EQ(DecideAfterAttempt(AttemptOutcome::kCapacity, false, false).action,
            AttemptAction::kStop);
  EXPECT_EQ(DecideAfterAttempt(AttemptOutcome::kBootCapacity, false, false).action,
            AttemptAction::kStop);
}
TEST(DecideAfterAttempt, OtherFailuresStopWithTheVmKept) {
  EXPECT_EQ(DecideAfterAttempt(AttemptOutcome::kFailed, true, true).action, AttemptAction::kStop);
  EXPECT_EQ(DecideAfterAttempt(AttemptOutcome::kBootFailed, true, true).action,
            AttemptAction::kStop);
}
TEST(DecideAfterAttempt, InterruptedStops) {
  const AttemptDecision d = DecideAfterAttempt(AttemptOutcome::kInterrupted, true, true);
  EXPECT_EQ(d.action, AttemptAction::kStop);
  EXPECT_EQ(d.reason, "interrupted");
}

TEST(BootFailureIsCapacity, CapacityWordsOnlyAndNeverARunningVm) {
  EXPECT_TRUE(BootFailureIsCapacity("terminated", "Server.InsufficientInstanceCapacity"));
  EXPECT_TRUE(BootFailureIsCapacity("error", "no_capacity"));
  EXPECT_TRUE(BootFailureIsCapacity("error", "Not enough stock available for flavor"));
  EXPECT_TRUE(BootFailureIsCapacity("stopped", "ZONE_RESOURCE_POOL_EXHAUSTED"));
  EXPECT_FALSE(BootFailureIsCapacity("error", "Server.InternalError"));
  EXPECT_FALSE(BootFailureIsCapacity("error", ""));
  EXPECT_FALSE(BootFailureIsCapacity("running", "capacity"));
}

TEST(TriedReport, OneLinePerFailedCandidate) {
  std::vector<Candidate> c = {Cand("aws", 1.5, 0), Cand("gcp", 2, 1), Cand("lambda", 3, 2)};
  c[0].failed = "no capacity (sold out)";
  c[1].failed = "quota (limit 0)";
  EXPECT_EQ(TriedReport(c),
            "  aws r t $1.50/h: no capacity (sold out)\n  gcp r t $2.00/h: quota (limit 0)\n");
}


TEST(RankCandidates, SpotComparesSpotPricesAndLeavesOutOffersWithout) {
  CloudOffer cheap_on_demand = Offer("a.small", "r1", 1.0);  // no spot price
  CloudOffer spot_dear = Offer("a.big", "r1", 4.0);
  spot_dear.spot_price_per_hour = 1.5;
  CloudOffer spot_cheap = Offer("b.big", "r2", 5.0);
  spot_cheap.spot_price_per_hour = 0.9;
  const std::vector<CloudOffers> asked = {
      Asked("a", "", 0, {cheap_on_demand, spot_dear}),
      Asked("b", "", 1, {spot_cheap}),
      Asked("c", "", 2, {Offer("c.only", "r3", 0.5)}),
  };
  CandidateRules rules;
  const std::vector<Candidate> on_demand = RankCandidates(asked, rules);
  EXPECT_EQ(Clouds(on_demand), (std::vector<std::string>{"c", "a", "b"}));
  EXPECT_EQ(on_demand[1].offer.instance_type, "a.small");

  rules.spot = true;
  const std::vector<Candidate> spot = RankCandidates(asked, rules);
  ASSERT_EQ(spot.size(), 3u);
  EXPECT_EQ(Clouds(spot), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(spot[1].offer.instance_type, "a.big");
  EXPECT_DOUBLE_EQ(spot[0].Price(), 0.9);
  EXPECT_EQ(spot[2].skipped, "no spot offer for this request");

  rules.max_price = 1.0;
  const std::vector<Candidate> capped = RankCandidates(asked, rules);
  EXPECT_EQ(capped[0].cloud, "b");
  EXPECT_TRUE(capped[0].skipped.empty());
  EXPECT_EQ(capped[1].skipped, "above --max-price $1.00/h");
}

}  // namespace
}  // namespace gpuprov
