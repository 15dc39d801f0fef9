#include "command_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "down_command.h"
#include "state_store.h"
#include "vm_records.h"

namespace gpuprov {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

int Noop(const AppContext&, const ParsedArgs&) { return 0; }

const std::vector<OptionSpec> kGlobals = {
    {"verbose", 'v', nullptr, "debug logs on stderr"},
    {"output", 'o', "FORMAT", "text or json"},
};

const std::vector<Command> kCommands = {
    {"provision",
     "provision [--name NAME]",
     "create a GPU VM",
     {{"name", 'n', "NAME", "the VM's name: [a-z][a-z0-9-]*"},
      {"k3s-download-url", 0, "URL", "a mirror of https://github.com/k3s-io/k3s"}},
     &Noop,
     Completion::kNone,
     true},
    {"down", "down NAME", ".deletes the VM \\ and more", {}, &Noop},
    {"__man", "__man", "hidden", {}, &Noop, Completion::kNone, false, true},
};

TEST(MainHelp, ListsVisibleCommandsAndGlobalOptions) {
  const std::string help = MainHelp(kCommands, kGlobals, "1.2.3");
  EXPECT_THAT(help, HasSubstr("gpuprov 1.2.3"));
  EXPECT_THAT(help, HasSubstr("  provision   create a GPU VM\n"));
  EXPECT_THAT(help, HasSubstr("  -o, --output FORMAT"));
  EXPECT_THAT(help, HasSubstr("gpuprov help COMMAND"));
  EXPECT_THAT(help, Not(HasSubstr("__man")));
}

TEST(CommandHelp, ShowsUsageOptionsAndStreaming) {
  const std::string help = CommandHelp(kCommands[0], kGlobals);
  EXPECT_THAT(help, HasSubstr("usage: gpuprov provision [--name NAME]\n"));
  EXPECT_THAT(help, HasSubstr("  -n, --name NAME"));
  EXPECT_THAT(help, HasSubstr("--output ndjson streams"));
  EXPECT_THAT(CommandHelp(kCommands[1], kGlobals), Not(HasSubstr("ndjson")));
}

TEST(ManPage, HasEveryVisibleCommandAndOptionInManMarkup) {
  const std::string man = ManPage(kCommands, kGlobals, "1.2.3");
  EXPECT_THAT(man, HasSubstr(".TH GPUPROV 1 \"\" \"gpuprov 1.2.3\""));
  EXPECT_THAT(man, HasSubstr(".SS \"gpuprov provision [\\-\\-name NAME]\"\n"));
  EXPECT_THAT(man, HasSubstr("\\fB\\-n\\fR, \\fB\\-\\-name\\fR \\fINAME\\fR\n"));
  EXPECT_THAT(man, HasSubstr("\\fB\\-\\-k3s\\-download\\-url\\fR"));
  EXPECT_THAT(man, HasSubstr("\\fB\\-o\\fR, \\fB\\-\\-output\\fR \\fIFORMAT\\fR"));
  EXPECT_THAT(man, Not(HasSubstr("__man")));
  // Text never starts a line with a control character, and backslashes are escaped.
  EXPECT_THAT(man, HasSubstr("\\&.deletes the VM \\e and more."));
  std::istringstream lines(man);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '.') continue;
    EXPECT_THAT(line, ::testing::MatchesRegex("^\\.(\\\\\"|TH|SH|SS|TP|PP|RS|RE|B) ?.*")) << line;
  }
}

TEST(ListTable, TtlColumnShowsTimeLeftAndExpired) {
  VmRecord a;
  a.name = "a";
  a.cloud = "docker";
  a.ttl_deadline = "2026-12-04T12:00:00Z";
  VmRecord b = a;
  b.name = "b";
  b.ttl_deadline = "2026-12-04T10:00:00Z";
  b.idle_ttl_seconds = 1800;
  const auto now = std::chrono::system_clock::from_time_t(1796385600 - 7200);  // 10:00Z
  const std::string table = ListTable({a, b}, {"running", "off"}, {30, 60}, now);
  std::istringstream lines(table);
  std::string header, row_a, row_b;
  std::getline(lines, header);
  std::getline(lines, row_a);
  std::getline(lines, row_b);
  EXPECT_EQ(row_a.substr(header.find("TTL")), "2h");
  EXPECT_EQ(row_b.substr(header.find("TTL")), "EXPIRED idle 30m");
  const std::vector<VmRecord> expired = ExpiredRecords({a, b}, now);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].name, "b");
  EXPECT_TRUE(ExpiredRecords({a, b}, now, std::string("aws")).empty());
  EXPECT_EQ(ExpiredRecords({a, b}, now + std::chrono::hours(3)).size(), 2u);
}

TEST(ListTable, APreemptedSpotVmShowsPreemptedWithTheCloudsReasonUnderTheTable) {
  VmRecord a;
  a.name = "a";
  a.cloud = "aws";
  a.price_per_hour = 0.31;
  a.spot = true;
  VmRecord b;
  b.name = "b";
  b.cloud = "docker";
  const std::vector<std::string> states = {"preempted", "running"};
  const std::string table = ListTable({a, b}, states, {30, 60});
  std::istringstream lines(table);
  std::string header, row_a;
  std::getline(lines, header);
  std::getline(lines, row_a);
  EXPECT_EQ(row_a.substr(header.find("STATE"), 9), "PREEMPTED");
  EXPECT_EQ(row_a.substr(header.find("$/H"), 10), "$0.31 spot");
  const std::string notes = PreemptedNotes(
      {a, b}, states, {"Server.SpotInstanceTermination: Spot instance termination", ""});
  EXPECT_EQ(notes,
            "a: preempted by aws (Server.SpotInstanceTermination: Spot instance termination); "
            "`gpuprov provision --name a --cloud aws` makes it anew, `gpuprov watch a` does so "
            "whenever it happens\n");
  EXPECT_EQ(PreemptedNotes({b}, {"running"}, {""}), "");
}

TEST(ListTable, SizesColumnsToTheirContent) {
  VmRecord a;
  a.name = "a-very-long-vm-name-indeed";
  a.cloud = "aws";
  a.region = "us-east-1";
  a.public_ip = "203.0.113.7";
  a.gpus = "L4:1";
  a.price_per_hour = 1.25;
  a.kubernetes = true;
  a.access_mode = "direct";
  VmRecord b;
  b.name = "b";
  b.cloud = "docker";
  b.region = "local";
  b.public_ip = "127.77.0.2";
  b.ssh_port = 2222;
  const std::string table = ListTable({a, b}, {"running", "ready"}, {30, 7300});
  std::istringstream lines(table);
  std::string header, row_a, row_b;
  std::getline(lines, header);
  std::getline(lines, row_a);
  std::getline(lines, row_b);
  EXPECT_EQ(header.find("CLOUD"), a.name.size() + 2);
  EXPECT_EQ(row_b.find("docker"), a.name.size() + 2);
  EXPECT_THAT(header, HasSubstr("GPUS"));
  EXPECT_THAT(header, HasSubstr("$/H"));
  EXPECT_EQ(row_a.find("L4:1"), header.find("GPUS"));
  EXPECT_EQ(row_a.find("$1.25"), header.find("$/H"));
  EXPECT_EQ(row_b.find("127.77.0.2:2222"), header.find("ADDRESS"));
  EXPECT_THAT(row_a, HasSubstr("direct"));
  EXPECT_EQ(header.find("TTL"), header.size() - 3);  // the last column
  EXPECT_EQ(row_a.substr(row_a.size() - 1), "-");    // no TTL
  EXPECT_THAT(row_b, HasSubstr("off"));
  EXPECT_EQ(row_a.substr(header.find("AGE"), 3), "30s");
  EXPECT_EQ(row_b.substr(header.find("AGE"), 2), "2h");
  // No trailing blanks and "-" where nothing is known.
  EXPECT_EQ(header.back(), 'L');
  EXPECT_EQ(row_b.back(), '-');
  EXPECT_EQ(row_b.substr(header.find("GPUS"), 1), "-");
  EXPECT_EQ(row_b.substr(header.find("$/H"), 1), "-");
  EXPECT_EQ(row_b.substr(header.find("COST"), 1), "-");
}

TEST(ListTable, CostIsHoursSinceCreatedTimesPrice) {
  VmRecord a;
  a.name = "a";
  a.cloud = "lambda";
  a.price_per_hour = 2.0;
  VmRecord b = a;
  b.name = "b";
  b.price_per_hour = 0.5;
  const std::string table = ListTable({a, b}, {"running", "running"}, {5400, 36});
  std::istringstream lines(table);
  std::string header, row_a, row_b;
  std::getline(lines, header);
  std::getline(lines, row_a);
  std::getline(lines, row_b);
  EXPECT_EQ(row_a.find("$2.00"), header.find("$/H"));
  EXPECT_EQ(row_a.find("$3.00"), header.find("COST"));  // 1.5 h x $2/h
  EXPECT_EQ(row_b.find("$0.0050"), header.find("COST"));  // 0.01 h x $0.50/h: below a cent
}

}  // namespace
}  // namespace gpuprov
