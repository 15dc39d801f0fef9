// SPDX-License-Identifier: Apache-2.0
#include "text.h"

#include <gtest/gtest.h>

namespace gpuprov::drivers {
namespace {

TEST(Text, CaseIsAsciiOnly) {
  EXPECT_EQ(Lower("RTX A6000-Ü"), "rtx a6000-Ü");
  EXPECT_EQ(Upper("h100 sxm5"), "H100 SXM5");
}

TEST(Text, SquashDropsSeparators) {
  EXPECT_EQ(Squash("rtx a6000"), "RTXA6000");
  EXPECT_EQ(Squash("RTX_A6000"), "RTXA6000");
  EXPECT_EQ(Squash("h100-80gb"), "H10080GB");
}

TEST(Text, PrefixesAndWords) {
  EXPECT_TRUE(StartsWith("gpuprov-vm1", "gpuprov-"));
  EXPECT_FALSE(StartsWith("gpu", "gpuprov-"));
  EXPECT_TRUE(ContainsNoCase("Sold OUT in region", "sold out"));
  EXPECT_FALSE(ContainsNoCase("available", "sold out"));
}

TEST(Text, NoFullStopDropsTrailingStopsAndSpaces) {
  EXPECT_EQ(NoFullStop("Quota exceeded. "), "Quota exceeded");
  EXPECT_EQ(NoFullStop("v1.2 done..."), "v1.2 done");
  EXPECT_EQ(NoFullStop("..."), "");
  EXPECT_EQ(NoFullStop("no stop"), "no stop");
}

}  // namespace
}  // namespace gpuprov::drivers
