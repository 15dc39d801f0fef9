#include "interrupt.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <thread>

#include "error.h"

namespace gpuprov {
namespace {

std::atomic<bool> g_interrupted{false};

void OnSignal(int) { g_interrupted.store(true); }

}  // namespace

void InstallInterruptHandler() {
  struct sigaction sa {};
  sa.sa_handler = &OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool Interrupted() { return g_interrupted.load(); }

void ThrowIfInterrupted(const std::string& doing) {
  if (Interrupted()) {
    throw Error("interrupted while " + doing,
                "what exists is kept and recorded; re-run the same command to continue, or "
                "`gpuprov down NAME` to remove it",
                kExitInterrupted);
  }
}

void PauseUnlessInterrupted(std::chrono::milliseconds pause, const std::string& doing) {
  const auto until = std::chrono::steady_clock::now() + pause;
  for (;;) {
    ThrowIfInterrupted(doing);
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        until - now, std::chrono::milliseconds(100)));
  }
}

}  // namespace gpuprov
