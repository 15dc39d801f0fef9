#include "spot.h"

#include <gtest/gtest.h>

namespace gpuprov {
namespace {

CloudOffer Offer(const std::string& type, double price, std::optional<double> spot) {
  CloudOffer o;
  o.instance_type = type;
  o.price_per_hour = price;
  o.spot_price_per_hour = spot;
  return o;
}

// Massed Compute and Prime Intellect give a spot price on some rows only: those rows alone are
// spot offers, so the cheapest spot row is chosen, not a row whose spot price is unknown (0).
TEST(PricedAsSpot, RowsWithoutASpotPriceGoWhenOthersHaveOne) {
  const std::vector<CloudOffer> priced =
      PricedAsSpot({Offer("on-demand-only", 1.35, std::nullopt), Offer("both", 1.29, 0.52),
                    Offer("zero", 1.10, 0.0)});
  ASSERT_EQ(priced.size(), 1u);
  EXPECT_EQ(priced[0].instance_type, "both");
  EXPECT_DOUBLE_EQ(priced[0].price_per_hour, 0.52);
  EXPECT_DOUBLE_EQ(priced[0].on_demand_price_per_hour, 1.29);
}

// A driver that makes spot VMs but cannot say their price now (AWS without
// DescribeSpotPriceHistory): every offer stays, at an unknown spot price.
TEST(PricedAsSpot, EveryRowStaysWhenNoneHasASpotPrice) {
  const std::vector<CloudOffer> priced =
      PricedAsSpot({Offer("a", 1.0, std::nullopt), Offer("b", 2.0, std::nullopt)});
  ASSERT_EQ(priced.size(), 2u);
  EXPECT_DOUBLE_EQ(priced[0].price_per_hour, 0);
  EXPECT_DOUBLE_EQ(priced[1].on_demand_price_per_hour, 2.0);
}

}  // namespace
}  // namespace gpuprov
