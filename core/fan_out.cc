#include "fan_out.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "interrupt.h"

namespace gpuprov {
namespace {

std::atomic<int> g_abandoned_running{0};

/// What the caller and the job threads share; each thread holds it until it ends.
struct Shared {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<bool> done;
  std::vector<bool> abandoned;
  size_t remaining = 0;
  std::unique_ptr<std::atomic<bool>[]> stop;
};

}  // namespace

std::vector<bool> RunAllWithin(std::vector<FanOutJob> jobs,
                               std::optional<std::chrono::milliseconds> budget) {
  const size_t n = jobs.size();
  auto shared = std::make_shared<Shared>();
  shared->done.assign(n, false);
  shared->abandoned.assign(n, false);
  shared->remaining = n;
  shared->stop = std::make_unique<std::atomic<bool>[]>(n);
  for (size_t i = 0; i < n; ++i) shared->stop[i] = false;
  for (size_t i = 0; i < n; ++i) {
    std::thread([shared, i, job = std::move(jobs[i])] {
      try {
        job(shared->stop[i]);
      } catch (...) {
        // A job reports its own failures; nothing may escape a thread.
      }
      std::lock_guard<std::mutex> lock(shared->mutex);
      shared->done[i] = true;
      --shared->remaining;
      if (shared->abandoned[i]) --g_abandoned_running;
      shared->changed.notify_all();
    }).detach();
  }
  const auto deadline = budget ? std::chrono::steady_clock::now() + *budget
                               : std::chrono::steady_clock::time_point::max();
  std::unique_lock<std::mutex> lock(shared->mutex);
  while (shared->remaining > 0 && !Interrupted()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    // Wakes at least every 100 ms to see Ctrl-C.
    shared->changed.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)));
  }
  for (size_t i = 0; i < n; ++i) {
    if (shared->done[i]) continue;
    shared->abandoned[i] = true;
    shared->stop[i] = true;
    ++g_abandoned_running;
  }
  std::vector<bool> done = shared->done;
  lock.unlock();
  ThrowIfInterrupted("asking the clouds");
  return done;
}

bool AbandonedJobsRunning() { return g_abandoned_running.load() > 0; }

}  // namespace gpuprov
