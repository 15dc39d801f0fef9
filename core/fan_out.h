// Asking several clouds at once: every job on its own thread, waited for up to a time budget.
// A job still running when the budget ends is left to finish on its own, so one slow or hung
// cloud costs the command no more than the budget (`gpuprov offers`, `list`).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <vector>

namespace gpuprov {

/// One job: runs on its own thread; \a stop turns true when the caller stopped waiting for it
/// (pass it to the driver's waits: Cloud::Open's `stop`).
using FanOutJob = std::function<void(const std::atomic<bool>& stop)>;

/// Runs every job at once and waits until all have returned, or until \a budget has passed
/// (nullopt: no limit), or Ctrl-C. Returns, per job, whether it returned in time. A job that
/// did not is left running with its stop flag set: it must own (shared_ptr, copies) everything
/// it touches, since the caller's frame may be gone when it ends. Throws as ThrowIfInterrupted
/// on Ctrl-C, after setting every stop flag.
std::vector<bool> RunAllWithin(std::vector<FanOutJob> jobs,
                               std::optional<std::chrono::milliseconds> budget);

/// True while a job RunAllWithin stopped waiting for is still running: the process then ends
/// with std::_Exit after flushing its output (main.cc), so no static destructor runs under it.
bool AbandonedJobsRunning();

}  // namespace gpuprov
