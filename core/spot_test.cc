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

// The chosen offer of a spot request is shown and recorded at what is paid, the on-demand price
// kept beside it (choosing compares spot prices already: candidates.h).
TEST(PricedAsSpot, TheSpotPriceIsWhatIsPaidTheOnDemandOneIsKept) {
  const CloudOffer priced = PricedAsSpot(Offer("both", 1.29, 0.52));
  EXPECT_DOUBLE_EQ(priced.price_per_hour, 0.52);
  EXPECT_DOUBLE_EQ(priced.on_demand_price_per_hour, 1.29);
  EXPECT_EQ(SpotPriceNote(priced), " spot (on demand $1.29/h)");
}

// Sold as spot at a price the driver cannot say (0): unknown, the on-demand one still shown.
TEST(PricedAsSpot, AnUnknownSpotPriceIsZero) {
  const CloudOffer priced = PricedAsSpot(Offer("unknown", 2.0, 0.0));
  EXPECT_DOUBLE_EQ(priced.price_per_hour, 0);
  EXPECT_DOUBLE_EQ(priced.on_demand_price_per_hour, 2.0);
}

}  // namespace
}  // namespace gpuprov
