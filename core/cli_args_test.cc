#include "cli_args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error.h"

namespace gpuprov {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<OptionSpec> kOptions = {
    {"output", 'o', "FORMAT", "format"},         {"cloud", 'c', "CLOUD", "cloud"},
    {"verbose", 'v', nullptr, "logs"},           {"yes", 'y', nullptr, "no question"},
    {"no-refresh", 0, nullptr, "recorded only"},
};

std::string UsageMessage(const std::vector<std::string>& args) {
  try {
    ParseArgs(args, kOptions, "list");
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    return e.what();
  }
  return "";
}

TEST(ParseArgs, OutputIsAcceptedInEveryUsualSpelling) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"-o", "json"}, {"-ojson"}, {"--output=json"}, {"--output", "json"}}) {
    ParsedArgs parsed = ParseArgs(args, kOptions, "list");
    EXPECT_EQ(parsed.value("output"), "json") << args[0];
    EXPECT_TRUE(parsed.positional.empty()) << args[0];
  }
}

TEST(ParseArgs, BundledSwitchesAreEachSet) {
  ParsedArgs parsed = ParseArgs({"-vy", "demo"}, kOptions, "down");
  EXPECT_THAT(parsed.switches, ElementsAre("verbose", "yes"));
  EXPECT_THAT(parsed.positional, ElementsAre("demo"));
}

TEST(ParseArgs, AValueOptionCannotBeBundledBehindASwitch) {
  EXPECT_THAT(UsageMessage({"-vo"}), HasSubstr("option -o takes a value (FORMAT)"));
}

TEST(ParseArgs, AnUnknownLongOptionSuggestsTheClosest) {
  EXPECT_THAT(UsageMessage({"--clod", "aws"}),
              HasSubstr("unknown option --clod for `gpuprov list` (did you mean --cloud?)"));
  EXPECT_THAT(UsageMessage({"--no-refesh"}), HasSubstr("(did you mean --no-refresh?)"));
  EXPECT_THAT(UsageMessage({"--outptu=json"}), HasSubstr("(did you mean --output?)"));
}

TEST(ParseArgs, AnOptionFarFromEveryKnownOneSuggestsNothing) {
  const std::string message = UsageMessage({"--bogus"});
  EXPECT_THAT(message, HasSubstr("unknown option --bogus"));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("did you mean")));
}

TEST(ParseArgs, AnUnknownShortOptionIsNamed) {
  EXPECT_THAT(UsageMessage({"-x"}), HasSubstr("unknown option -x for `gpuprov list`"));
  EXPECT_THAT(UsageMessage({"-vx"}), HasSubstr("unknown option -x"));
}

TEST(ParseArgs, EverythingAfterDashDashIsKeptVerbatim) {
  ParsedArgs parsed = ParseArgs({"demo", "--", "-ojson", "--bogus"}, kOptions, "ssh");
  EXPECT_TRUE(parsed.has_dashdash);
  EXPECT_THAT(parsed.after_dashdash, ElementsAre("-ojson", "--bogus"));
  EXPECT_FALSE(parsed.has("output"));
}

TEST(EditDistance, CountsEditsAndSwapsAsOne) {
  EXPECT_EQ(EditDistance("list", "list"), 0u);
  EXPECT_EQ(EditDistance("lsit", "list"), 1u);  // swap
  EXPECT_EQ(EditDistance("lst", "list"), 1u);   // insertion
  EXPECT_EQ(EditDistance("provison", "provision"), 1u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(ClosestMatch, PicksTheNearestAndRefusesFarWords) {
  const std::vector<std::string> commands = {"provision", "ssh",     "list",
                                             "down",      "drivers", "version"};
  EXPECT_EQ(ClosestMatch("provison", commands), "provision");
  EXPECT_EQ(ClosestMatch("lsit", commands), "list");
  EXPECT_EQ(ClosestMatch("dwn", commands), "down");
  EXPECT_EQ(ClosestMatch("drive", commands), "drivers");  // a prefix
  EXPECT_EQ(ClosestMatch("frobnicate", commands), std::nullopt);
  EXPECT_EQ(ClosestMatch("x", commands), std::nullopt);
  EXPECT_EQ(DidYouMean("verison", commands), " (did you mean version?)");
  EXPECT_EQ(DidYouMean("zzz", commands), "");
}

}  // namespace
}  // namespace gpuprov
