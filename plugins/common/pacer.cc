// SPDX-License-Identifier: Apache-2.0
#include "pacer.h"

#include <Poco/DigestEngine.h>
#include <Poco/SHA2Engine.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "wait.h"

namespace gpuprov::drivers {
namespace {

using std::chrono::milliseconds;

// The salt of PacerFileName: names the use, so the hash of a key here matches no other hash of
// it, and the version of the file format below.
constexpr const char* kSalt = "gpuprov pacer v1\n";
// The file holds one line: the magic, then the next free slot in Unix milliseconds.
constexpr const char* kMagic = "gpuprov-pacer-1 ";

long long WallMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Errno(const std::string& what, int err) { return what + ": " + std::strerror(err); }

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// `dir` as a folder only this user reaches: made 0700 when missing, tightened to 0700 when it
// is ours and wider. Empty on success, else why it cannot be used.
std::string PrivateDir(const std::string& dir) {
  int made = ::mkdir(dir.c_str(), 0700);
  if (made != 0 && errno == ENOENT) {
    // A gpuprov home not made yet (a first `gpuprov check`): made as the host makes it, 0700.
    const std::string parent = std::filesystem::path(dir).parent_path().string();
    if (!parent.empty() && ::mkdir(parent.c_str(), 0700) == 0) made = ::mkdir(dir.c_str(), 0700);
  }
  if (made != 0 && errno != EEXIST) {
    return Errno("cannot create " + dir, errno);
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return Errno("cannot read " + dir, errno);
  if (!S_ISDIR(st.st_mode)) return dir + " is not a folder";
  if (st.st_uid != ::geteuid()) return dir + " belongs to another user";
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0) {
    return Errno("cannot restrict " + dir + " to mode 0700", errno);
  }
  return "";
}

// The slot a file's text names; nullopt for anything but "<magic><digits>\n".
std::optional<long long> ParseSlot(const std::string& text) {
  const size_t magic = std::strlen(kMagic);
  if (text.size() < magic + 2 || text.compare(0, magic, kMagic) != 0 || text.back() != '\n') {
    return std::nullopt;
  }
  long long value = 0;
  const char* first = text.data() + magic;
  const char* last = text.data() + text.size() - 1;
  auto [end, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || end != last || value < 0) return std::nullopt;
  return value;
}

// Takes an exclusive flock on `fd`. Holders keep it only to read and write a line, so a lock
// that stays taken for seconds is a file system that does not do flock: give up then.
bool LockExclusive(int fd) {
  for (int i = 0; i < 400; ++i) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
    if (errno != EWOULDBLOCK && errno != EINTR) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return false;
}

// Reserves the next slot of `digest` in `dir` (Unix ms): the file's slot, or now when it names
// none that can be true, and moves the file's slot one interval on. Sets `why` and returns
// nullopt when the folder or file cannot be used.
std::optional<long long> ReserveShared(const std::string& dir, const std::string& digest,
                                       long long interval_ms, std::string& why) {
  why = PrivateDir(dir);
  if (!why.empty()) return std::nullopt;
  const std::string path = dir + "/" + digest;
  Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0) {
    why = Errno("cannot open " + path, errno);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    why = path + " is not a file of this user";
    return std::nullopt;
  }
  if ((st.st_mode & 077) != 0 && ::fchmod(fd.get(), 0600) != 0) {
    why = Errno("cannot restrict " + path + " to mode 0600", errno);
    return std::nullopt;
  }
  if (!LockExclusive(fd.get())) {
    why = "cannot lock " + path;
    return std::nullopt;
  }
  char buf[64];
  const ssize_t n = ::pread(fd.get(), buf, sizeof buf, 0);
  const long long now = WallMs();
  std::optional<long long> next =
      n > 0 && static_cast<size_t>(n) < sizeof buf ? ParseSlot(std::string(buf, n)) : std::nullopt;
  // A slot further ahead than a full queue of callers could have reserved is stale: a clock
  // set back, or a file written by something else.
  if (next && *next > now + kPacerMaxQueued * interval_ms) next.reset();
  const long long slot = std::max(now, next.value_or(now));
  const std::string line = kMagic + std::to_string(slot + interval_ms) + "\n";
  if (::pwrite(fd.get(), line.data(), line.size(), 0) != static_cast<ssize_t>(line.size()) ||
      ::ftruncate(fd.get(), static_cast<off_t>(line.size())) != 0) {
    why = Errno("cannot write " + path, errno);
    return std::nullopt;
  }
  return slot;  // the lock ends with the descriptor
}

// Process-wide slots, when there is no shared folder or it cannot be used.
std::chrono::steady_clock::time_point ReserveInProcess(const std::string& digest,
                                                       milliseconds interval) {
  using Clock = std::chrono::steady_clock;
  static std::mutex mu;
  static std::map<std::string, Clock::time_point> next_slot;
  std::lock_guard<std::mutex> lock(mu);
  const auto now = Clock::now();
  auto [it, added] = next_slot.try_emplace(digest, now);
  const auto slot = std::max(now, it->second);
  it->second = slot + interval;
  return slot;
}

}  // namespace

std::string PacerFileName(const std::string& key) {
  Poco::SHA2Engine engine(Poco::SHA2Engine::SHA_256);
  engine.update(kSalt);
  engine.update(key);
  return Poco::DigestEngine::digestToHex(engine.digest());
}

void PaceCall(const gpuprov::sdk::Host& host, const std::string& key, milliseconds interval,
              const std::string& what, const std::string& shared_dir) {
  if (interval.count() <= 0) return;
  const std::string digest = PacerFileName(key);
  milliseconds wait{0};
  std::string why;
  std::optional<long long> shared;
  if (!shared_dir.empty()) shared = ReserveShared(shared_dir, digest, interval.count(), why);
  if (shared) {
    wait = milliseconds(*shared - WallMs());
  } else {
    if (!why.empty()) {
      static std::atomic<bool> said{false};
      if (!said.exchange(true)) host.Debug("pacing within this process only: " + why);
    }
    wait = std::chrono::ceil<milliseconds>(ReserveInProcess(digest, interval) -
                                           std::chrono::steady_clock::now());
  }
  if (wait.count() > 0) SleepOrCancel(host, wait, what);
}

}  // namespace gpuprov::drivers
