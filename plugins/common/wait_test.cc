// SPDX-License-Identifier: Apache-2.0
#include "wait.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "driver_test_util.h"

namespace gpuprov::drivers {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using testing::RecordingHost;

TEST(Wait, SleepRunsItsTimeWhenNotCancelled) {
  RecordingHost host;
  const auto start = steady_clock::now();
  EXPECT_TRUE(SleepUnlessCancelled(host.Host(), milliseconds(120)));
  EXPECT_GE(steady_clock::now() - start, milliseconds(120));
}

TEST(Wait, CancelEndsALongSleepWithinTheCheckInterval) {
  RecordingHost host;
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(100));
    host.cancel = true;
  });
  const auto start = steady_clock::now();
  try {
    SleepOrCancel(host.Host(), std::chrono::seconds(60), "waiting for the droplet");
    FAIL() << "no throw";
  } catch (const gpuprov::sdk::DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_CANCELLED);
    EXPECT_STREQ(e.what(), "waiting for the droplet: cancelled");
  }
  canceller.join();
  EXPECT_LT(steady_clock::now() - start, milliseconds(1000));
}

TEST(Wait, PollStopsWhenDoneAndReportsProgress) {
  RecordingHost host;
  int calls = 0;
  PollOptions o{"waiting for operation op-1", milliseconds(10), milliseconds(5000), milliseconds(0)};
  EXPECT_TRUE(PollUntil(host.Host(), o, [&](std::string* status) {
    *status = "RUNNING";
    return ++calls == 3;
  }));
  EXPECT_EQ(calls, 3);
  ASSERT_FALSE(host.progress.empty());
  EXPECT_NE(host.progress.front().find("waiting for operation op-1 (RUNNING, "), std::string::npos);
}

TEST(Wait, PollIsBounded) {
  RecordingHost host;
  PollOptions o{"waiting", milliseconds(10), milliseconds(60), milliseconds(10'000)};
  const auto start = steady_clock::now();
  EXPECT_FALSE(PollUntil(host.Host(), o, [](std::string*) { return false; }));
  EXPECT_LT(steady_clock::now() - start, milliseconds(1000));
}

TEST(Wait, PollHonoursCancel) {
  RecordingHost host;
  PollOptions o{"waiting for instance x", milliseconds(10'000), milliseconds(900'000)};
  int calls = 0;
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(100));
    host.cancel = true;
  });
  const auto start = steady_clock::now();
  EXPECT_THROW(PollUntil(host.Host(), o, [&](std::string*) { return ++calls < 0; }),
               gpuprov::sdk::DriverError);
  canceller.join();
  EXPECT_EQ(calls, 1);
  EXPECT_LT(steady_clock::now() - start, milliseconds(1000));
}

TEST(Wait, BackoffGivesUpAfterMaxAttempts) {
  RecordingHost host;
  RetryPolicy p = RetryPolicy::Fast();
  p.max_attempts = 3;
  Backoff backoff(host.Host(), p, "create pod x");
  EXPECT_TRUE(backoff.Wait("HTTP 500"));
  EXPECT_TRUE(backoff.Wait("HTTP 500"));
  EXPECT_FALSE(backoff.Wait("HTTP 500"));
  EXPECT_EQ(backoff.failures(), 3);
}

TEST(Wait, BackoffHonoursRetryAfterAndCancel) {
  RecordingHost host;
  RetryPolicy p;
  p.max_retry_after = std::chrono::seconds(30);
  Backoff backoff(host.Host(), p, "create droplet x");
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(200));
    host.cancel = true;
  });
  const auto start = steady_clock::now();
  EXPECT_THROW(backoff.Wait("HTTP 429", std::chrono::seconds(20)), gpuprov::sdk::DriverError);
  canceller.join();
  EXPECT_LT(steady_clock::now() - start, milliseconds(1000));
  ASSERT_EQ(host.progress.size(), 1u);
  EXPECT_EQ(host.progress[0], "create droplet x: HTTP 429; retrying in 20 s");
}

}  // namespace
}  // namespace gpuprov::drivers
