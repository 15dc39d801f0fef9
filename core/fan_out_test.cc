#include "fan_out.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

namespace gpuprov {
namespace {

using std::chrono::milliseconds;

TEST(RunAllWithin, RunsTheJobsAtOnceAndSaysWhichReturned) {
  auto ran = std::make_shared<std::atomic<int>>(0);
  std::vector<FanOutJob> jobs;
  for (int i = 0; i < 10; ++i) {
    jobs.push_back([ran](const std::atomic<bool>&) {
      std::this_thread::sleep_for(milliseconds(200));
      ++*ran;
    });
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<bool> done = RunAllWithin(std::move(jobs), std::nullopt);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(done, std::vector<bool>(10, true));
  EXPECT_EQ(ran->load(), 10);
  // Ten jobs of 200 ms one after the other would take 2 s.
  EXPECT_LT(took, milliseconds(1500));
}

TEST(RunAllWithin, AJobPastTheBudgetIsLeftRunningWithItsStopFlagSet) {
  auto saw_stop = std::make_shared<std::atomic<bool>>(false);
  auto finished = std::make_shared<std::atomic<bool>>(false);
  std::vector<FanOutJob> jobs;
  jobs.push_back([](const std::atomic<bool>&) {});
  jobs.push_back([saw_stop, finished](const std::atomic<bool>& stop) {
    // A driver's cancellable wait: polls the flag.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!stop && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    *saw_stop = stop.load();
    *finished = true;
  });
  const auto start = std::chrono::steady_clock::now();
  const std::vector<bool> done = RunAllWithin(std::move(jobs), milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(done, (std::vector<bool>{true, false}));
  EXPECT_GE(took, milliseconds(300));
  EXPECT_LT(took, milliseconds(2000));
  EXPECT_TRUE(AbandonedJobsRunning() || finished->load());
  for (int i = 0; i < 200 && !finished->load(); ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(saw_stop->load());
  for (int i = 0; i < 200 && AbandonedJobsRunning(); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_FALSE(AbandonedJobsRunning());
}

TEST(RunAllWithin, NoJobsReturnsAtOnce) {
  EXPECT_TRUE(RunAllWithin({}, milliseconds(1000)).empty());
}

}  // namespace
}  // namespace gpuprov
