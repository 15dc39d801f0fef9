#include "ttl.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error.h"

namespace gpuprov {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::system_clock;

Clock::time_point At(std::time_t epoch) { return Clock::from_time_t(epoch); }

// 2026-12-04T12:00:00Z
constexpr std::time_t kNoon = 1796385600;

VmRecord WithDeadline(const std::string& deadline) {
  VmRecord r;
  r.name = "demo";
  r.ttl_deadline = deadline;
  return r;
}

TEST(ParseDurationSeconds, TakesUnitsAndSums) {
  EXPECT_EQ(ParseDurationSeconds("30s", "--ttl"), 30);
  EXPECT_EQ(ParseDurationSeconds("90m", "--ttl"), 5400);
  EXPECT_EQ(ParseDurationSeconds("8h", "--ttl"), 28800);
  EXPECT_EQ(ParseDurationSeconds("2d", "--ttl"), 172800);
  EXPECT_EQ(ParseDurationSeconds("1h30m", "--ttl"), 5400);
  EXPECT_EQ(ParseDurationSeconds("1d2h3m4s", "--ttl"), 86400 + 7200 + 180 + 4);
  EXPECT_EQ(ParseDurationSeconds("365d", "--ttl"), 365L * 86400);
  EXPECT_EQ(ParseDurationSeconds("off", "--ttl"), 0);
}

TEST(ParseDurationSeconds, RefusesOthersNamingTheFlag) {
  for (const char* bad : {"", "8", "h", "8x", "-1h", "1.5h", "0s", "0h0m", "8 h", "366d",
                          "99999999999999999999s", "1h30", "OFF", "8H"}) {
    try {
      ParseDurationSeconds(bad, "--idle-ttl");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("--idle-ttl")) << bad;
      EXPECT_EQ(e.exit_code(), kExitUsage) << bad;
      EXPECT_THAT(e.hint(), HasSubstr("units s, m, h, d")) << bad;
    }
  }
  try {
    ParseDurationSeconds("8", "--ttl");
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("without a unit"));
  }
}

TEST(FormatDuration, TwoLargestUnits) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(-5), "0s");
  EXPECT_EQ(FormatDuration(45), "45s");
  EXPECT_EQ(FormatDuration(60), "1m");
  EXPECT_EQ(FormatDuration(61), "1m1s");
  EXPECT_EQ(FormatDuration(5400), "1h30m");
  EXPECT_EQ(FormatDuration(7201), "2h");
  EXPECT_EQ(FormatDuration(86400 + 3 * 3600 + 59), "1d3h");
}

TEST(TtlTimeLeft, FromTheRecordsDeadline) {
  const VmRecord r = WithDeadline("2026-12-04T12:00:00Z");
  ASSERT_TRUE(TtlDeadline(r).has_value());
  EXPECT_EQ(Clock::to_time_t(*TtlDeadline(r)), kNoon);
  EXPECT_EQ(TtlSecondsLeft(r, At(kNoon - 3600)), 3600);
  EXPECT_FALSE(TtlExpired(r, At(kNoon - 1)));
  EXPECT_TRUE(TtlExpired(r, At(kNoon)));
  EXPECT_TRUE(TtlExpired(r, At(kNoon + 10)));
  EXPECT_EQ(TtlSecondsLeft(r, At(kNoon + 10)), -10);
}

TEST(TtlTimeLeft, NoneWithoutOrWithAnUnreadableDeadline) {
  for (const char* d : {"", "tomorrow"}) {
    const VmRecord r = WithDeadline(d);
    EXPECT_FALSE(TtlSecondsLeft(r, At(kNoon)).has_value()) << d;
    EXPECT_FALSE(TtlExpired(r, At(kNoon))) << d;
  }
}

// ExpiryReason: one test per row.
TEST(ExpiryReason, ADeadlinePassedIsExpiredWhateverTheCloudSays) {
  VmRecord r;
  r.ttl_deadline = "2026-12-04T12:00:00Z";
  EXPECT_EQ(ExpiryReason(r, At(kNoon), std::nullopt), "TTL passed at 2026-12-04T12:00:00Z");
  EXPECT_EQ(ExpiryReason(r, At(kNoon), std::string("running")), "TTL passed at 2026-12-04T12:00:00Z");
}
TEST(ExpiryReason, AnIdleTtlVmTheCloudSaysIsOffIsExpired) {
  VmRecord r;
  r.idle_ttl_seconds = 3600;
  for (const char* off : {"stopped", "terminated", "missing"}) {
    EXPECT_EQ(ExpiryReason(r, At(kNoon), std::string(off)),
              std::string("powered off by its idle TTL (") + off + ")");
  }
}
TEST(ExpiryReason, AnIdleTtlVmStillRunningOrNotAskedIsNot) {
  VmRecord r;
  r.idle_ttl_seconds = 3600;
  EXPECT_EQ(ExpiryReason(r, At(kNoon), std::string("running")), "");
  EXPECT_EQ(ExpiryReason(r, At(kNoon), std::nullopt), "");
}
TEST(ExpiryReason, AStoppedVmWithoutAnyTtlIsNot) {
  VmRecord r;  // stopped by hand: no TTL of gpuprov's did it
  EXPECT_EQ(ExpiryReason(r, At(kNoon), std::string("stopped")), "");
  r.ttl_deadline = "2026-12-04T13:00:00Z";  // a deadline not yet passed
  EXPECT_EQ(ExpiryReason(r, At(kNoon), std::string("stopped")), "");
}

TEST(TtlCell, LeftExpiredIdleOrDash) {
  VmRecord r = WithDeadline("2026-12-04T12:00:00Z");
  EXPECT_EQ(TtlCell(r, At(kNoon - 5400)), "1h30m");
  EXPECT_EQ(TtlCell(r, At(kNoon)), "EXPIRED");
  r.idle_ttl_seconds = 3600;
  EXPECT_EQ(TtlCell(r, At(kNoon - 30)), "30s idle 1h");
  r.ttl_deadline.clear();
  EXPECT_EQ(TtlCell(r, At(kNoon)), "idle 1h");
  r.idle_ttl_seconds = 0;
  EXPECT_EQ(TtlCell(r, At(kNoon)), "-");
}

TEST(SetRecordTtl, WritesRfc3339AndClears) {
  VmRecord r;
  NodeTtl ttl;
  ttl.deadline_epoch = kNoon;
  ttl.idle_seconds = 600;
  SetRecordTtl(r, ttl);
  EXPECT_EQ(r.ttl_deadline, "2026-12-04T12:00:00Z");
  EXPECT_EQ(r.idle_ttl_seconds, 600);
  SetRecordTtl(r, NodeTtl{});
  EXPECT_EQ(r.ttl_deadline, "");
  EXPECT_EQ(r.idle_ttl_seconds, 0);
}

TEST(PoweredOffNote, SaysWhatThePoweredOffVmCosts) {
  EXPECT_THAT(PoweredOffNote("lambda", "full", "box"),
              HasSubstr("on lambda a powered-off VM is still billed in full: use `gpuprov down box`"));
  EXPECT_THAT(PoweredOffNote("gcp", "disk", "box"), HasSubstr("still bills its disk"));
  EXPECT_THAT(PoweredOffNote("aws", "none", "box"), HasSubstr("no longer billed"));
  EXPECT_THAT(PoweredOffNote("acme", "", "box"), HasSubstr("the acme driver does not say"));
}

TEST(TtlInstallCommand, SavesTheScriptThenSetsAndInstalls) {
  NodeTtl ttl;
  ttl.deadline_epoch = kNoon;
  ttl.check_seconds = 5;
  const std::string cmd = TtlInstallCommand(ttl);
  EXPECT_THAT(cmd, HasSubstr("cat >'/usr/local/sbin/gpuprov-ttl'.tmp.$$ && chmod 0755 "
                             "'/usr/local/sbin/gpuprov-ttl'.tmp.$$ && mv -f "
                             "'/usr/local/sbin/gpuprov-ttl'.tmp.$$ '/usr/local/sbin/gpuprov-ttl' && "));
  EXPECT_THAT(cmd, HasSubstr("/usr/local/sbin/gpuprov-ttl set --deadline 1796385600 "
                             "--idle-seconds none"));
  EXPECT_THAT(cmd, HasSubstr("/usr/local/sbin/gpuprov-ttl install --check-seconds 5"));
  ttl.deadline_epoch.reset();
  ttl.idle_seconds = 90;
  EXPECT_THAT(TtlInstallCommand(ttl), HasSubstr("set --deadline none --idle-seconds 90"));
  EXPECT_THAT(TtlOffCommand(), HasSubstr("/usr/local/sbin/gpuprov-ttl off"));
  EXPECT_THAT(TtlScript(), HasSubstr("systemctl poweroff"));
}

}  // namespace
}  // namespace gpuprov
