// SPDX-License-Identifier: Apache-2.0
//
// The Massed Compute rules without the network: product descriptions, GPU matching, the
// inventory, names, key names and the states.
#include <Poco/JSON/Parser.h>
#include <gtest/gtest.h>

#include "gpuprov/sdk.hpp"
#include "massedcompute_rules.h"

namespace gpuprov::massedcompute {
namespace {

constexpr const char* kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF test@gpuprov";

Product Of(const std::string& description, const std::string& name = "p") {
  Product p;
  p.name = name;
  auto d = ParseDescription(description);
  EXPECT_TRUE(d) << description;
  if (d) {
    p.model = d->model;
    p.gpu_count = d->count;
    p.memory_gb = d->memory_gb;
    p.spot = d->spot;
  }
  return p;
}

TEST(MassedComputeRules, DescriptionsReadAsModelCountMemoryAndSpot) {
  struct Case {
    std::string text, model;
    int count, memory;
    bool spot;
  };
  for (const Case& c : std::vector<Case>{{"1x RTX A6000 (48GB)", "RTX-A6000", 1, 48, false},
                                         {"8x RTX A6000", "RTX-A6000", 8, 0, false},
                                         {"1x L40", "L40", 1, 0, false},
                                         {"1x H100 NVL (94GB)", "H100-NVL", 1, 94, false},
                                         {"8x H100 (80GB) SXM5", "H100", 8, 80, false},
                                         {"8x H100 SXM5", "H100", 8, 0, false},
                                         {"1x RTX A6000 (48GB) [spot]", "RTX-A6000", 1, 48, true},
                                         {"2X NVIDIA A100 (80GB)", "A100", 2, 80, false}}) {
    auto d = ParseDescription(c.text);
    ASSERT_TRUE(d) << c.text;
    EXPECT_EQ(d->model, c.model) << c.text;
    EXPECT_EQ(d->count, c.count) << c.text;
    EXPECT_EQ(d->memory_gb, c.memory) << c.text;
    EXPECT_EQ(d->spot, c.spot) << c.text;
  }
  for (const std::string bad : {"", "RTX A6000", "x A100", "0x A100"}) {
    EXPECT_FALSE(ParseDescription(bad)) << bad;
  }
}

TEST(MassedComputeRules, GpuRequestsMatchTheModelWithOrWithoutRtxAndWithTheirMemory) {
  const Product a6000 = Of("1x RTX A6000 (48GB)");
  for (const std::string want : {"RTX-A6000", "rtx_a6000", "A6000", "RTX A6000", "A6000-48GB"}) {
    EXPECT_TRUE(GpuMatches(want, a6000)) << want;
  }
  for (const std::string other : {"A100", "A6000-24GB", "RTX-6000", "", "L40"}) {
    EXPECT_FALSE(GpuMatches(other, a6000)) << other;
  }
  const Product a100 = Of("1x A100 (80GB)");
  EXPECT_TRUE(GpuMatches("A100", a100));
  EXPECT_TRUE(GpuMatches("A100-80GB", a100));
  EXPECT_FALSE(GpuMatches("A100-40GB", a100));
  EXPECT_FALSE(GpuMatches("H100", Of("1x H100 NVL (94GB)")));
  EXPECT_TRUE(GpuMatches("H100-NVL", Of("1x H100 NVL (94GB)")));
  EXPECT_FALSE(GpuMatches("L40S", Of("1x L40")));
}

TEST(MassedComputeRules, InventoryIsReadIntoProductsAndListedWithoutSpot) {
  Poco::JSON::Parser parser;
  auto doc = parser.parse(R"json({"gpu_inventory":{
    "gpu_1x_h100":{"instance_type":{"name":"gpu_1x_h100","description":"1x H100 (80GB)",
      "price_cents_per_hour":239,"specs":{"vcpu_count":20}},
      "regions_with_capacity_available":[{"name":"us-central-3","description":"Des Moines, IA"}],
      "capacity_available":3},
    "gpu_1x_a6000_spot":{"instance_type":{"name":"gpu_1x_a6000_spot","description":"1x RTX A6000 (48GB)",
      "price_cents_per_hour":39},"regions_with_capacity_available":[],"capacity_available":0}}})json")
                 .extract<Poco::JSON::Object::Ptr>();
  std::vector<Product> products = ParseInventory(doc);
  ASSERT_EQ(products.size(), 2u);
  EXPECT_EQ(products[0].name, "gpu_1x_a6000_spot");
  EXPECT_TRUE(products[0].spot);  // by its name, the description says nothing
  EXPECT_EQ(products[1].model, "H100");
  EXPECT_DOUBLE_EQ(products[1].price_per_hour, 2.39);
  EXPECT_EQ(products[1].capacity, 3);
  EXPECT_EQ(products[1].regions, std::vector<std::string>{"us-central-3"});
  EXPECT_EQ(OfferedText(products), "H100:1 (gpu_1x_h100)");
  EXPECT_THROW(ParseInventory(parser.parse("{}").extract<Poco::JSON::Object::Ptr>()),
               gpuprov::sdk::DriverError);
}

TEST(MassedComputeRules, InstanceNamesCarryGpuprovsMark) {
  EXPECT_EQ(InstanceNameFor("demo"), "gpuprov-demo");
  EXPECT_EQ(VmNameOf("gpuprov-demo"), "demo");
  EXPECT_FALSE(VmNameOf("demo"));
  EXPECT_FALSE(VmNameOf("gpuprov-"));
  EXPECT_FALSE(VmNameOf("my-gpuprov-demo"));
}

TEST(MassedComputeRules, KeyNamesAreLettersDigitsAndASpace) {
  const std::string name = KeyName(kKey);
  EXPECT_TRUE(IsGpuprovKeyName(name)) << name;
  EXPECT_EQ(name.size(), std::string("gpuprov ").size() + 16);
  EXPECT_EQ(KeyName(std::string(kKey) + "  other comment"), name);  // the comment does not count
  EXPECT_FALSE(IsGpuprovKeyName("gpuprov-0123456789abcdef"));
  EXPECT_FALSE(IsGpuprovKeyName("my key"));
  EXPECT_THROW(KeyName("not a key"), gpuprov::sdk::DriverError);
}

TEST(MassedComputeRules, StatusesMapToTheFiveStates) {
  EXPECT_EQ(StateOf("rented", true, true).state, "running");
  EXPECT_EQ(StateOf("Running", true, true).state, "running");
  EXPECT_EQ(StateOf("active", true, true).state, "running");
  EXPECT_EQ(StateOf("rented", false, true).state, "pending");
  EXPECT_NE(StateOf("rented", false, true).message.find("os_booted"), std::string::npos);
  EXPECT_EQ(StateOf("rented", true, false).state, "pending");
  EXPECT_EQ(StateOf("booting", false, false).state, "pending");
  EXPECT_EQ(StateOf("provisioning", false, false).state, "pending");
  EXPECT_EQ(StateOf("", false, false).state, "pending");
  EXPECT_EQ(StateOf("stopped", false, false).state, "stopped");
  EXPECT_EQ(StateOf("stopping", false, false).state, "stopped");
  for (const char* s : {"terminating", "deleting", "terminated", "deleted"}) {
    EXPECT_EQ(StateOf(s, true, true).state, "terminated") << s;
  }
  EXPECT_EQ(StateOf("failed", false, false).state, "error");
  EXPECT_EQ(StateOf("error", false, false).state, "error");
}

// M2: without os_booted (the vendor's own instance fixture has none) the status and the ip
// decide; with it, 0 still means booting.
TEST(MassedComputeRules, OsBootedGatesOnlyWhenTheInstanceCarriesIt) {
  EXPECT_EQ(StateOf("Running", std::nullopt, true).state, "running");
  EXPECT_EQ(StateOf("rented", std::nullopt, true).state, "running");
  EXPECT_EQ(StateOf("Running", std::nullopt, false).state, "pending");
  EXPECT_EQ(StateOf("pending", std::nullopt, false).state, "pending");
  EXPECT_EQ(StateOf("Running", false, true).state, "pending");
}

// M1: a product listed at $0/h (or less) is internal-only, never an offer.
TEST(MassedComputeRules, ProductsAtZeroDollarsAreNotOffered) {
  Product p;
  p.price_per_hour = 0;
  EXPECT_FALSE(IsOffered(p));
  p.price_per_hour = -1;
  EXPECT_FALSE(IsOffered(p));
  p.price_per_hour = 0.57;
  EXPECT_TRUE(IsOffered(p));
}

TEST(MassedComputeRules, TheSpotTwinIsTheSpotNameElseTheSameGpusAndPricedAboveZero) {
  EXPECT_TRUE(IsSpotProduct("gpu_1x_a6000_spot", ""));
  EXPECT_TRUE(IsSpotProduct("gpu_1x_a6000", "1x RTX A6000 [spot]"));
  EXPECT_FALSE(IsSpotProduct("gpu_1x_a6000", "1x RTX A6000 (48GB)"));
  Product on_demand = Of("1x RTX A6000 (48GB)", "gpu_1x_a6000");
  Product by_gpus = Of("1x RTX A6000 (48GB) [spot]", "a6000_cheap_spot");
  by_gpus.price_per_hour = 0.30;
  Product by_name = Of("1x RTX A6000 (48GB) [spot]", "gpu_1x_a6000_spot");
  by_name.price_per_hour = 0.39;
  Product other = Of("1x L40 (48GB) [spot]", "gpu_1x_l40_spot");
  other.price_per_hour = 0.50;
  EXPECT_EQ(SpotTwin({on_demand, by_gpus, by_name, other}, on_demand)->name, "gpu_1x_a6000_spot");
  EXPECT_EQ(SpotTwin({on_demand, by_gpus, other}, on_demand)->name, "a6000_cheap_spot");
  by_gpus.price_per_hour = 0;  // an internal-only listing
  EXPECT_EQ(SpotTwin({on_demand, by_gpus, other}, on_demand), nullptr);
  by_name.capacity = 2;
  by_name.regions = {"us-central-2"};
  EXPECT_TRUE(HasCapacityIn(by_name, "us-central-2"));
  EXPECT_TRUE(HasCapacityIn(by_name, ""));
  EXPECT_FALSE(HasCapacityIn(by_name, "us-central-3"));
  by_name.capacity = 0;
  EXPECT_FALSE(HasCapacityIn(by_name, "us-central-2"));
}

TEST(MassedComputeRules, ASpotInstanceThatEndedUnaskedIsPreemptedWithItsStatus) {
  for (const std::string status : {"terminated", "Deleted", "stopped", "preempted", "reclaimed"}) {
    const VmState s = SpotStateOf(status, false, false, "gpu_1x_a6000_spot");
    EXPECT_EQ(s.state, "preempted") << status;
    EXPECT_NE(s.message.find("product gpu_1x_a6000_spot"), std::string::npos) << s.message;
  }
  // Asked for: its own delete, not a preemption.
  EXPECT_EQ(SpotStateOf("terminating", false, false, "x_spot").state, "terminated");
  EXPECT_EQ(SpotStateOf("stopping", false, false, "x_spot").state, "stopped");
  EXPECT_EQ(SpotStateOf("rented", true, true, "x_spot").state, "running");
  EXPECT_EQ(SpotStateOf("booting", std::nullopt, false, "x_spot").state, "pending");
}

}  // namespace
}  // namespace gpuprov::massedcompute
