// SPDX-License-Identifier: Apache-2.0
#include "tags.h"

#include <gtest/gtest.h>

#include "json_util.h"

namespace gpuprov::drivers {
namespace {

TEST(Tags, UserTagsLeaveOutGpuprovsOwnAndReservedPrefixes) {
  auto request = json::ParseObject(
      R"({"tags": {"team": "ml", "gpuprov": "1", "gpuprov-name": "x", "aws:cloudformation": "y",
                   "": "empty", "flag": null}})",
      "request");
  auto tags = UserTags(request, {"aws:"});
  EXPECT_EQ(tags, (std::map<std::string, std::string>{{"team", "ml"}, {"flag", ""}}));
  EXPECT_TRUE(UserTags(json::ParseObject("{}", "request")).empty());
  EXPECT_EQ(ManagedTags("demo"),
            (std::map<std::string, std::string>{{"gpuprov", "1"}, {"gpuprov-name", "demo"}}));
}

TEST(Tags, FitTag) {
  EXPECT_EQ(FitTag("Team Name/ML", ":-_", 255), "Team_Name_ML");
  EXPECT_EQ(FitTag("Team Name/ML", "-_", 63, true), "team_name_ml");
  EXPECT_EQ(FitTag("abcdef", "", 3), "abc");
}

}  // namespace
}  // namespace gpuprov::drivers
