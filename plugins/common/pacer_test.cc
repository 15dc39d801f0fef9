// SPDX-License-Identifier: Apache-2.0
#include "pacer.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>
#include <vector>

#include "driver_test_util.h"

namespace gpuprov::drivers {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

TEST(PaceCall, SpacesCallsWithOneKeyAndLeavesOtherKeysAlone) {
  testing::RecordingHost recording;
  const auto host = recording.Host();
  const auto start = Clock::now();
  for (int i = 0; i < 3; ++i) PaceCall(host, "pacer-test-a", milliseconds(100), "call");
  PaceCall(host, "pacer-test-b", milliseconds(100), "call");  // another key: no wait
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  EXPECT_GE(took.count(), 195);  // slots at 0, 100, 200 ms (sleeps end to the millisecond)
  EXPECT_LT(took.count(), 290);
}

TEST(PaceCall, ConcurrentCallersGetSuccessiveSlots) {
  testing::RecordingHost recording;
  const auto host = recording.Host();
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  std::vector<long long> done_ms(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      PaceCall(host, "pacer-test-threads", milliseconds(60), "call");
      done_ms[i] =
          std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
    });
  }
  for (auto& t : threads) t.join();
  std::sort(done_ms.begin(), done_ms.end());
  for (int i = 1; i < 4; ++i) EXPECT_GE(done_ms[i] - done_ms[0], 60 * i - 15) << i;
}

TEST(PaceCall, ACancelledWaitThrowsCancelled) {
  testing::RecordingHost recording;
  PaceCall(recording.Host(), "pacer-test-cancel", milliseconds(5000), "launch");
  recording.cancel = true;
  const auto start = Clock::now();
  try {
    PaceCall(recording.Host(), "pacer-test-cancel", milliseconds(5000), "launch");
    FAIL() << "no exception";
  } catch (const gpuprov::sdk::DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_CANCELLED);
    EXPECT_NE(std::string(e.what()).find("launch"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration_cast<milliseconds>(Clock::now() - start).count(), 1000);
}

TEST(PaceCall, ZeroIntervalNeverWaits) {
  testing::RecordingHost recording;
  const auto start = Clock::now();
  for (int i = 0; i < 100; ++i) PaceCall(recording.Host(), "pacer-test-zero", milliseconds(0), "x");
  EXPECT_LT(std::chrono::duration_cast<milliseconds>(Clock::now() - start).count(), 50);
}

// Issue 30: a cloud counts per API key, not per process: two processes pacing one key through
// the shared folder get successive slots (each alone would finish in 200 ms).
TEST(PaceCall, TwoProcessesWithOneKeyShareTheSlots) {
  testing::ScopedTempDir dir;
  const std::string shared = (dir.path() / "pace").string();
  const auto start = Clock::now();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    testing::RecordingHost recording;
    for (int i = 0; i < 3; ++i) {
      PaceCall(recording.Host(), "pacer-test-processes", milliseconds(100), "call", shared);
    }
    _exit(0);
  }
  testing::RecordingHost recording;
  for (int i = 0; i < 3; ++i) {
    PaceCall(recording.Host(), "pacer-test-processes", milliseconds(100), "call", shared);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  EXPECT_GE(took.count(), 490) << "six slots 100 ms apart";  // 0, 100, ..., 500 ms
  // One small file named by a hash of the key; the key itself is nowhere.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(shared)) {
    ++files;
    EXPECT_EQ(e.path().filename().string().size(), 16u);
  }
  EXPECT_EQ(files, 1);
}

TEST(PaceCall, WithoutAUsableFolderItPacesWithinTheProcess) {
  testing::RecordingHost recording;
  const auto start = Clock::now();
  for (int i = 0; i < 3; ++i) {
    PaceCall(recording.Host(), "pacer-test-nodir", milliseconds(100), "call", "/proc/no/such/dir");
  }
  EXPECT_GE(std::chrono::duration_cast<milliseconds>(Clock::now() - start).count(), 195);
}

}  // namespace
}  // namespace gpuprov::drivers
