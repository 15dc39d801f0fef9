// SPDX-License-Identifier: Apache-2.0
#include "pacer.h"

#include <Poco/DigestEngine.h>
#include <Poco/SHA2Engine.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>

#include "wait.h"

namespace gpuprov::drivers {

void PaceCall(const gpuprov::sdk::Host& host, const std::string& key,
              std::chrono::milliseconds interval, const std::string& what) {
  if (interval.count() <= 0) return;
  using Clock = std::chrono::steady_clock;
  static std::mutex mu;
  static std::map<std::string, Clock::time_point> next_slot;
  Clock::time_point slot;
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto now = Clock::now();
    auto [it, added] = next_slot.try_emplace(key, now);
    slot = std::max(now, it->second);
    it->second = slot + interval;
  }
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(slot - Clock::now());
  if (wait.count() > 0) SleepOrCancel(host, wait, what);
}

namespace {

// Reserves the next slot of `key` in its file under `dir`; the slot as milliseconds of the
// system clock, or nullopt (with *why) when the file cannot be used.
std::optional<long long> ReserveSharedSlot(const std::string& dir, const std::string& key,
                                           std::chrono::milliseconds interval, std::string* why) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    *why = "cannot create " + dir + ": " + ec.message();
    return std::nullopt;
  }
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace, ec);
  Poco::SHA2Engine sha(Poco::SHA2Engine::SHA_256);
  sha.update(key);
  const std::string path =
      dir + "/" + Poco::DigestEngine::digestToHex(sha.digest()).substr(0, 16);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = "cannot open " + path;
    return std::nullopt;
  }
  std::optional<long long> slot;
  if (::flock(fd, LOCK_EX) == 0) {
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    const long long now = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    long long stored = n > 0 ? std::atoll(buf) : 0;
    // A slot far ahead is a clock that moved back (or a broken file): start afresh.
    if (stored > now + 10 * interval.count() + 60'000) stored = 0;
    slot = std::max(now, stored);
    const std::string next = std::to_string(*slot + interval.count()) + "\n";
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, next.data(), next.size(), 0) != static_cast<ssize_t>(next.size())) {
      *why = "cannot write " + path;
      slot.reset();
    }
    ::flock(fd, LOCK_UN);
  } else {
    *why = "cannot lock " + path;
  }
  ::close(fd);
  return slot;
}

}  // namespace

void PaceCall(const gpuprov::sdk::Host& host, const std::string& key,
              std::chrono::milliseconds interval, const std::string& what,
              const std::string& shared_dir) {
  if (interval.count() <= 0) return;
  if (shared_dir.empty()) return PaceCall(host, key, interval, what);
  std::string why;
  const std::optional<long long> slot = ReserveSharedSlot(shared_dir, key, interval, &why);
  if (!slot) {
    host.Debug("pacing within this process only: " + why);
    return PaceCall(host, key, interval, what);
  }
  const long long now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  if (*slot > now) SleepOrCancel(host, std::chrono::milliseconds(*slot - now), what);
}

std::string DefaultPaceDir() {
  const char* home = std::getenv("GPUPROV_HOME");
  if (home && *home) return std::string(home) + "/pace";
  const char* user = std::getenv("HOME");
  if (user && *user) return std::string(user) + "/.gpu-provisioner/pace";
  return "";
}

}  // namespace gpuprov::drivers
