// SPDX-License-Identifier: Apache-2.0
#include "uri.h"

#include <gtest/gtest.h>

namespace gpuprov::drivers {
namespace {

TEST(Uri, UnreservedStayEverythingElseIsEncoded) {
  EXPECT_EQ(EncodeComponent("abc-XYZ_0.9~"), "abc-XYZ_0.9~");
  EXPECT_EQ(EncodeComponent("a b/c?d#e&f=g+h"), "a%20b%2Fc%3Fd%23e%26f%3Dg%2Bh");
  EXPECT_EQ(EncodeComponent("name = \"x\""), "name%20%3D%20%22x%22");
  EXPECT_EQ(EncodeComponent(":@;,!$'()*[]%"), "%3A%40%3B%2C%21%24%27%28%29%2A%5B%5D%25");
  EXPECT_EQ(EncodeComponent("\xc3\xa9"), "%C3%A9");
}

TEST(Uri, QueryString) {
  EXPECT_EQ(QueryString({}), "");
  EXPECT_EQ(QueryString({{"filter", "labels.gpuprov = \"1\""}, {"pageToken", ""}}),
            "?filter=labels.gpuprov%20%3D%20%221%22&pageToken=");
}

}  // namespace
}  // namespace gpuprov::drivers
