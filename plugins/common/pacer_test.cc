// SPDX-License-Identifier: Apache-2.0
#include "pacer.h"

#include <gtest/gtest.h>

#include <algorithm>
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

}  // namespace
}  // namespace gpuprov::drivers
