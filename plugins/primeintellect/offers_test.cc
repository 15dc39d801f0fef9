// SPDX-License-Identifier: Apache-2.0
#include "offers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpuprov::primeintellect {
namespace {

// One availability item in the documented shape (REFERENCE.md §3.1).
std::string Item(const std::string& cloud_id, const std::string& gpu_type, int count,
                 const std::string& provider, const std::string& data_center,
                 const std::string& country, const std::string& stock, const std::string& price,
                 const std::string& extra = "") {
  return R"({"cloudId":")" + cloud_id + R"(","gpuType":")" + gpu_type +
         R"(","socket":"PCIe","provider":")" + provider + R"(","dataCenter":")" + data_center +
         R"(","country":")" + country + R"(","gpuCount":)" + std::to_string(count) +
         R"(,"gpuMemory":80,"disk":{"minCount":50,"defaultCount":100,"maxCount":1000},)" +
         R"("stockStatus":)" + stock + R"(,"prices":{"onDemand":)" + price +
         R"(,"currency":"USD"},"images":["ubuntu_22_cuda_12","cuda_12_4_pytorch_2_5"],)" +
         R"("security":"secure_cloud")" + extra + "}";
}

std::string Response(const std::vector<std::string>& items, int total = -1) {
  std::string s = R"({"items":[)";
  for (size_t i = 0; i < items.size(); ++i) s += (i ? "," : "") + items[i];
  s += "],\"totalCount\":" + std::to_string(total < 0 ? static_cast<int>(items.size()) : total) +
       "}";
  return s;
}

const std::vector<Offer>& Sample() {
  static const std::vector<Offer> offers =
      ParseAvailability(Response({
                            Item("n3-A100x1", "A100_80GB", 1, "hyperstack", "CANADA-1", "CA",
                                 "\"High\"", "1.35"),
                            Item("1A100.22V", "A100_80GB", 1, "datacrunch", "FIN-01", "FI",
                                 "\"Low\"", "1.29"),
                            Item("cheap-but-gone", "A100_80GB", 1, "runpod", "US-1", "US",
                                 "\"Unavailable\"", "0.99"),
                            Item("a100-40", "A100_40GB", 1, "lambdalabs", "US-2", "US",
                                 "\"Medium\"", "1.10"),
                            Item("gpu_8x_h100_sxm5", "H100_80GB", 8, "lambdalabs", "US-2", "US",
                                 "\"High\"", "23.92"),
                            Item("n3-H100x8", "H100_80GB", 8, "hyperstack", "CANADA-1", "CA",
                                 "\"Medium\"", "19.00"),
                            Item("n3-H100x1", "H100_80GB", 1, "hyperstack", "CANADA-1", "CA",
                                 "\"\"", "1.90"),
                            Item("1L40S.20V", "L40S_48GB", 1, "datacrunch", "FIN-01", "FI",
                                 "null", "0.90"),
                            Item("a6000", "RTX_A6000_48GB", 1, "runpod", "EU-RO-1", "RO",
                                 "\"High\"", "0.49"),
                            Item("cpu-4", "CPU_NODE", 0, "primecompute", "US-3", "US", "\"High\"",
                                 "0.10"),
                        }))
          .offers;
  return offers;
}

TEST(ParseAvailability, ReadsEveryDocumentedField) {
  AvailabilityPage page = ParseAvailability(Response(
      {Item("n3-A100x1", "A100_80GB", 1, "hyperstack", "CANADA-1", "CA", "\"High\"", "1.35",
            R"(,"isSpot":true,"region":"canada")")},
      7));
  ASSERT_EQ(page.offers.size(), 1u);
  ASSERT_TRUE(page.total_count.has_value());
  EXPECT_EQ(*page.total_count, 7);
  const Offer& o = page.offers[0];
  EXPECT_EQ(o.cloud_id, "n3-A100x1");
  EXPECT_EQ(o.gpu_type, "A100_80GB");
  EXPECT_EQ(o.socket, "PCIe");
  EXPECT_EQ(o.provider, "hyperstack");
  EXPECT_EQ(o.data_center, "CANADA-1");
  EXPECT_EQ(o.region, "canada");
  EXPECT_EQ(o.country, "CA");
  EXPECT_EQ(o.gpu_count, 1);
  EXPECT_EQ(o.stock_status, "High");
  ASSERT_TRUE(o.price_per_hour.has_value());
  EXPECT_DOUBLE_EQ(*o.price_per_hour, 1.35);
  EXPECT_EQ(o.currency, "USD");
  EXPECT_EQ(o.disk_min_gb, 50);
  EXPECT_EQ(o.disk_default_gb, 100);
  EXPECT_EQ(o.disk_max_gb, 1000);
  EXPECT_EQ(o.images.size(), 2u);
  EXPECT_EQ(o.security, "secure_cloud");
  EXPECT_TRUE(o.is_spot);
  EXPECT_EQ(o.DisplayRegion(), "CANADA-1");
}

TEST(ParseAvailability, AcceptsOtherShapesAndRejectsJunk) {
  std::string item = Item("x", "H100_80GB", 1, "p", "D", "C", "\"High\"", "2");
  EXPECT_EQ(ParseAvailability("[" + item + "]").offers.size(), 1u);
  EXPECT_EQ(ParseAvailability(R"({"H100_80GB":[)" + item + "," + item + "]}").offers.size(), 2u);
  EXPECT_EQ(ParseAvailability(R"({"items":[1,"x",)" + item + "]}").offers.size(), 1u);
  EXPECT_TRUE(ParseAvailability(R"({"items":[],"totalCount":0})").offers.empty());
  EXPECT_THROW(ParseAvailability("not json"), std::runtime_error);
  EXPECT_THROW(ParseAvailability("42"), std::runtime_error);
  EXPECT_THROW(ParseAvailability(R"({"items":"x"})"), std::runtime_error);
}

TEST(ParseAvailability, CommunityPriceWhenNoOnDemand) {
  AvailabilityPage p = ParseAvailability(
      R"({"items":[{"cloudId":"c","gpuType":"H100_80GB","gpuCount":1,"stockStatus":"High",)"
      R"("prices":{"onDemand":null,"communityPrice":0.75}}]})");
  ASSERT_EQ(p.offers.size(), 1u);
  EXPECT_DOUBLE_EQ(p.offers[0].price_per_hour.value(), 0.75);
  EXPECT_FALSE(p.total_count.has_value());
}

TEST(GpuType, MatchesGpuprovNamesToPrimeNames) {
  EXPECT_TRUE(GpuTypeMatches("H100_80GB", "H100"));
  EXPECT_TRUE(GpuTypeMatches("H100_80GB", "H100-80GB"));
  EXPECT_TRUE(GpuTypeMatches("H100_80GB", "h100_80gb"));
  EXPECT_TRUE(GpuTypeMatches("A100_40GB", "A100"));
  EXPECT_FALSE(GpuTypeMatches("A100_40GB", "A100-80GB"));
  EXPECT_TRUE(GpuTypeMatches("RTX_A6000_48GB", "RTX-A6000"));
  EXPECT_TRUE(GpuTypeMatches("L40S_48GB", "L40S"));
  EXPECT_FALSE(GpuTypeMatches("L40S_48GB", "L40"));  // L40 is another GPU
  EXPECT_FALSE(GpuTypeMatches("H100_NVL_94GB", "H100"));
  EXPECT_FALSE(GpuTypeMatches("H200_141GB", "H20"));
  EXPECT_TRUE(GpuTypeMatches("CPU_NODE", ""));
  EXPECT_FALSE(GpuTypeMatches("H100_80GB", ""));
  EXPECT_FALSE(GpuTypeMatches("", "H100"));
}

TEST(GpuType, ParameterOnlyForFullNames) {
  EXPECT_EQ(GpuTypeParameter("A100-80GB"), "A100_80GB");
  EXPECT_EQ(GpuTypeParameter("H100_80GB"), "H100_80GB");
  EXPECT_EQ(GpuTypeParameter("RTX-A6000-48GB"), "RTX_A6000_48GB");
  EXPECT_EQ(GpuTypeParameter(""), "CPU_NODE");
  EXPECT_EQ(GpuTypeParameter("H100"), std::nullopt);
  EXPECT_EQ(GpuTypeParameter("A100"), std::nullopt);
  EXPECT_EQ(GpuTypeParameter("RTX-A6000"), std::nullopt);
}

TEST(Stock, EmptyAndNoneWordsAreOutOfStock) {
  auto with = [](const std::string& s) {
    Offer o;
    o.stock_status = s;
    return InStock(o);
  };
  EXPECT_TRUE(with("High"));
  EXPECT_TRUE(with("Medium"));
  EXPECT_TRUE(with("Low"));  // still launchable (REFERENCE.md §7)
  EXPECT_TRUE(with("Available"));
  EXPECT_FALSE(with(""));
  EXPECT_FALSE(with("  "));
  EXPECT_FALSE(with("Unavailable"));
  EXPECT_FALSE(with("Out of stock"));
  EXPECT_FALSE(with("OUT_OF_STOCK"));
  EXPECT_FALSE(with("None"));
}

TEST(Region, MatchesDataCenterRegionOrCountry) {
  Offer o;
  o.data_center = "CANADA-1";
  o.region = "north_america";
  o.country = "CA";
  EXPECT_TRUE(RegionMatches(o, ""));
  EXPECT_TRUE(RegionMatches(o, "canada-1"));
  EXPECT_TRUE(RegionMatches(o, "CANADA_1"));
  EXPECT_TRUE(RegionMatches(o, "north-america"));
  EXPECT_TRUE(RegionMatches(o, "ca"));
  EXPECT_FALSE(RegionMatches(o, "canada"));
  EXPECT_FALSE(RegionMatches(o, "US"));
}

struct ChoiceCase {
  const char* label;
  OfferQuery query;
  const char* want;  // cloudId, or "" for none
};

void PrintTo(const ChoiceCase& c, std::ostream* os) { *os << c.label; }

class Choose : public ::testing::TestWithParam<ChoiceCase> {};

TEST_P(Choose, CheapestInStock) {
  const ChoiceCase& c = GetParam();
  std::optional<Offer> got = ChooseOffer(Sample(), c.query);
  if (std::string(c.want).empty()) {
    EXPECT_FALSE(got.has_value()) << got->cloud_id;
  } else {
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->cloud_id, c.want);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, Choose,
    ::testing::Values(
        // "Unavailable" at 0.99 is skipped; Low at 1.29 wins over High at 1.35; A100 matches
        // the 40GB card too, which is cheaper still.
        ChoiceCase{"A100AnyMemory", {"A100", 1, "", ""}, "a100-40"},
        ChoiceCase{"A100With80GB", {"A100-80GB", 1, "", ""}, "1A100.22V"},
        ChoiceCase{"A100InCanada", {"A100-80GB", 1, "CANADA-1", ""}, "n3-A100x1"},
        ChoiceCase{"A100ByCountry", {"A100-80GB", 1, "fi", ""}, "1A100.22V"},
        ChoiceCase{"A100NamedType", {"A100", 1, "", "n3-A100x1"}, "n3-A100x1"},
        ChoiceCase{"OutOfStockNamed", {"A100", 1, "", "cheap-but-gone"}, ""},
        ChoiceCase{"H100x8", {"H100", 8, "", ""}, "n3-H100x8"},
        ChoiceCase{"H100x8InUS", {"H100", 8, "US-2", ""}, "gpu_8x_h100_sxm5"},
        ChoiceCase{"H100x1EmptyStock", {"H100", 1, "", ""}, ""},
        ChoiceCase{"H100x2None", {"H100", 2, "", ""}, ""},
        ChoiceCase{"L40SNullStock", {"L40S", 1, "", ""}, ""},
        ChoiceCase{"RtxA6000", {"RTX-A6000", 1, "", ""}, "a6000"},
        ChoiceCase{"CpuOnly", {"", 0, "", ""}, "cpu-4"},
        ChoiceCase{"UnknownGpu", {"B300", 1, "", ""}, ""},
        ChoiceCase{"UnknownRegion", {"A100", 1, "mars", ""}, ""}),
    [](const ::testing::TestParamInfo<ChoiceCase>& info) { return std::string(info.param.label); });

TEST(MatchingOffers, SortedCheapestFirstUnknownPriceLast) {
  std::vector<Offer> offers = ParseAvailability(Response({
                                                    Item("b", "H100_80GB", 1, "p", "D", "C",
                                                         "\"High\"", "null"),
                                                    Item("c", "H100_80GB", 1, "p", "D", "C",
                                                         "\"Low\"", "2.0"),
                                                    Item("a", "H100_80GB", 1, "p", "D", "C",
                                                         "\"High\"", "2.0"),
                                                    Item("d", "H100_80GB", 1, "p", "D", "C",
                                                         "\"Medium\"", "1.5"),
                                                }))
                                  .offers;
  std::vector<Offer> m = MatchingOffers(offers, {"H100", 1, "", ""});
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].cloud_id, "d");
  EXPECT_EQ(m[1].cloud_id, "a");  // same price as c, more stock
  EXPECT_EQ(m[2].cloud_id, "c");
  EXPECT_EQ(m[3].cloud_id, "b");  // no price
  EXPECT_TRUE(Matches(Sample()[2], {"A100", 1, "", ""}));  // matches, though not in stock
}

// An offer at $0/h or less is not a real offer (an internal or placeholder SKU, as Massed
// Compute's own agent plugin warns of for its catalogue; the same rule here): never chosen,
// never listed, wherever it would sort.
TEST(MatchingOffers, OffersPricedAtOrBelowZeroAreSkipped) {
  std::vector<Offer> offers = ParseAvailability(Response({
                                                    Item("free", "H100_80GB", 1, "p", "D", "C",
                                                         "\"High\"", "0"),
                                                    Item("negative", "H100_80GB", 1, "p", "D",
                                                         "C", "\"High\"", "-1.5"),
                                                    Item("paid", "H100_80GB", 1, "p", "D", "C",
                                                         "\"High\"", "2.5"),
                                                }))
                                  .offers;
  std::vector<Offer> m = MatchingOffers(offers, {"H100", 1, "", ""});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].cloud_id, "paid");
  std::optional<Offer> chosen = ChooseOffer(offers, {"H100", 1, "", ""});
  ASSERT_TRUE(chosen);
  EXPECT_EQ(chosen->cloud_id, "paid");
}

// vcpu.defaultCount and memory.defaultCount (P-DOC provision-gpu guide's offer example) are
// what pod create's vcpus and memory take, as the prime CLI sends them (pods.py create).
TEST(ParseAvailability, ReadsTheVcpuAndMemoryDefaults) {
  AvailabilityPage page = ParseAvailability(Response(
      {Item("n3-H100x1", "H100_80GB", 1, "hyperstack", "CANADA-1", "CA", "\"Available\"", "1.9",
            R"(,"vcpu":{"minCount":null,"defaultCount":180,"maxCount":null},)"
            R"("memory":{"minCount":null,"defaultCount":180,"maxCount":null})")}));
  ASSERT_EQ(page.offers.size(), 1u);
  EXPECT_EQ(page.offers[0].vcpus_default, 180);
  EXPECT_EQ(page.offers[0].memory_default_gb, 180);
  AvailabilityPage bare = ParseAvailability(
      Response({Item("x", "H100_80GB", 1, "p", "D", "C", "\"High\"", "2")}));
  ASSERT_EQ(bare.offers.size(), 1u);
  EXPECT_FALSE(bare.offers[0].vcpus_default.has_value());
  EXPECT_FALSE(bare.offers[0].memory_default_gb.has_value());
}

// --- the Kubernetes rule: only offers of providers that give a VM ---

TEST(ProviderList, DefaultNamesTheVmCloudsOfTheReferences) {
  EXPECT_EQ(ParseProviderList(kDefaultVmProviders),
            (std::vector<std::string>{"hyperstack", "lambdalabs", "datacrunch", "nebius",
                                      "massedcompute"}));
  // RunPod gives containers (REFERENCE.md): never a default VM provider.
  std::vector<std::string> def = ParseProviderList(kDefaultVmProviders);
  EXPECT_EQ(std::find(def.begin(), def.end(), "runpod"), def.end());
}

TEST(ProviderList, CommasBlanksCaseAndRepeats) {
  EXPECT_EQ(ParseProviderList(" Hyperstack, crusoecloud  nebius,,hyperstack "),
            (std::vector<std::string>{"hyperstack", "crusoecloud", "nebius"}));
  EXPECT_EQ(ParseProviderList("lambdalabs"), std::vector<std::string>{"lambdalabs"});
}

TEST(ProviderList, EmptyOrBadNamesAreRefusedWithTheEntry) {
  EXPECT_THROW(ParseProviderList(""), std::invalid_argument);
  EXPECT_THROW(ParseProviderList(" , "), std::invalid_argument);
  try {
    ParseProviderList("hyperstack, run;pod");
    ADD_FAILURE() << "accepted run;pod";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("\"run;pod\""), std::string::npos) << e.what();
  }
}

TEST(SplitByProvider, KeepsVmProvidersInOrderAndSkipsTheRest) {
  const std::vector<std::string> vm = ParseProviderList(kDefaultVmProviders);
  // Cheapest first: the RunPod container offer is the cheapest A100, and is skipped.
  std::vector<Offer> offers = ParseAvailability(
                                  Response({
                                      Item("ctr", "A100_80GB", 1, "runpod", "US-KS-2", "US",
                                           "\"High\"", "1.19"),
                                      Item("1A100.22V", "A100_80GB", 1, "DataCrunch", "FIN-01",
                                           "FI", "\"Low\"", "1.29"),
                                      Item("pc", "A100_80GB", 1, "primecompute", "US-TX-1",
                                           "US", "\"High\"", "1.30"),
                                      Item("n3-A100x1", "A100_80GB", 1, "hyperstack",
                                           "CANADA-1", "CA", "\"High\"", "1.35"),
                                      Item("noprov", "A100_80GB", 1, "", "X", "US", "\"High\"",
                                           "1.40"),
                                  }))
                                  .offers;
  std::vector<Offer> in_stock = MatchingOffers(offers, {"A100", 1, "", ""});
  ASSERT_EQ(in_stock.front().cloud_id, "ctr");
  ProviderSplit split = SplitByProvider(in_stock, vm);
  ASSERT_EQ(split.kept.size(), 2u);
  EXPECT_EQ(split.kept[0].cloud_id, "1A100.22V");  // provider compared case-insensitively
  EXPECT_EQ(split.kept[1].cloud_id, "n3-A100x1");
  ASSERT_EQ(split.skipped.size(), 3u);
  EXPECT_EQ(split.skipped[0].cloud_id, "ctr");
  EXPECT_EQ(split.skipped[1].cloud_id, "pc");  // unknown providers count as containers
  EXPECT_EQ(split.skipped[2].cloud_id, "noprov");
  EXPECT_EQ(DescribeSkipped(split.skipped),
            "ctr@runpod in US-KS-2 $1.19/h (container); pc@primecompute in US-TX-1 $1.30/h "
            "(not in vm_providers); noprov@(no provider) in X $1.40/h (not in vm_providers)");
  // An override that admits a provider keeps its offers.
  ProviderSplit admitted = SplitByProvider(in_stock, ParseProviderList("runpod"));
  ASSERT_EQ(admitted.kept.size(), 1u);
  EXPECT_EQ(admitted.kept[0].cloud_id, "ctr");
  EXPECT_EQ(admitted.skipped.size(), 4u);
}

TEST(Disk, WithinOfferLimits) {
  Offer o = Sample()[0];  // 50..1000, default 100
  std::string error;
  EXPECT_EQ(DiskSizeFor(o, std::nullopt, &error), 100);
  EXPECT_TRUE(error.empty());
  EXPECT_EQ(DiskSizeFor(o, 200, &error), 200);
  EXPECT_EQ(DiskSizeFor(o, 20, &error), std::nullopt);
  EXPECT_NE(error.find("50..1000"), std::string::npos) << error;
  EXPECT_EQ(DiskSizeFor(o, 5000, &error), std::nullopt);
  EXPECT_FALSE(error.empty());
  Offer bare;
  EXPECT_EQ(DiskSizeFor(bare, std::nullopt, &error), std::nullopt);
  EXPECT_TRUE(error.empty());
  EXPECT_EQ(DiskSizeFor(bare, 80, &error), 80);
}

TEST(Image, DefaultAndRequested) {
  Offer o = Sample()[0];
  std::string error;
  EXPECT_EQ(ImageFor(o, "", &error), "ubuntu_22_cuda_12");
  EXPECT_EQ(ImageFor(o, "cuda_12_4_pytorch_2_5", &error), "cuda_12_4_pytorch_2_5");
  EXPECT_EQ(ImageFor(o, "windows", &error), "");
  EXPECT_NE(error.find("not offered"), std::string::npos);
  Offer other;
  other.images = {"prime_rl"};
  EXPECT_EQ(ImageFor(other, "", &error), "prime_rl");
  Offer none;
  EXPECT_EQ(ImageFor(none, "", &error), "ubuntu_22_cuda_12");
  EXPECT_EQ(ImageFor(none, "anything", &error), "anything");
}

}  // namespace
}  // namespace gpuprov::primeintellect
