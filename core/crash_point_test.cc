#include "crash_point.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "error.h"

namespace gpuprov {
namespace {

TEST(CrashPointTest, UnarmedPointsReturn) {
  DisarmCrashPoint();
  for (const auto& name : CrashPointNames()) CrashPoint(name.c_str());
  SUCCEED();
}

TEST(CrashPointTest, ArmedPointKillsWithSigkillAndOthersReturn) {
  EXPECT_EXIT(
      {
        ArmCrashPoint("vm-running");
        CrashPoint("intent-recorded");  // another point: returns
        CrashPoint("vm-running");
        _exit(0);  // not reached
      },
      testing::KilledBySignal(SIGKILL), "test crash point vm-running: SIGKILL");
  DisarmCrashPoint();
}

const char* g_reached = nullptr;
void RecordReached(const char* point) { g_reached = point; }

TEST(CrashPointTest, ACrashActionRunsAtTheArmedPointInsteadOfTheKill) {
  g_reached = nullptr;
  ArmCrashPoint("vm-created");
  SetCrashAction(&RecordReached);
  CrashPoint("intent-recorded");  // another point: nothing
  EXPECT_EQ(g_reached, nullptr);
  CrashPoint("vm-created");  // this process lives on
  ASSERT_NE(g_reached, nullptr);
  EXPECT_STREQ(g_reached, "vm-created");
  SetCrashAction(nullptr);
  DisarmCrashPoint();
}

TEST(CrashPointTest, UnknownPointIsAUsageErrorNamingThePoints) {
  try {
    ArmCrashPoint("vm-runing");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_NE(std::string(e.what()).find("GPUPROV_TEST_CRASH_AT=vm-runing"), std::string::npos);
    EXPECT_NE(e.hint().find("vm-running"), std::string::npos);
    EXPECT_NE(e.hint().find("down-vm-deleted"), std::string::npos);
  }
  DisarmCrashPoint();
}

// The core library never reads GPUPROV_TEST_CRASH_AT itself: only a gpuprov main() built with
// GPUPROV_TEST_HOOKS arms a point, so this test binary (no such main) ignores the variable.
TEST(CrashPointTest, TheCoreLibraryIgnoresTheEnvironmentVariable) {
  DisarmCrashPoint();
  setenv(kCrashAtEnv, "vm-running", 1);
  CrashPoint("vm-running");
  unsetenv(kCrashAtEnv);
  SUCCEED();
}

}  // namespace
}  // namespace gpuprov
