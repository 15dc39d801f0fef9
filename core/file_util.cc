#include "file_util.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <utility>

#include "error.h"

namespace gpuprov {
namespace {

std::string Quoted(const std::filesystem::path& path) { return "'" + path.string() + "'"; }

Error SystemError(const std::string& what, const std::filesystem::path& path, int err) {
  return Error(what + " " + Quoted(path) + ": " + std::strerror(err));
}

/// Closes a descriptor unless released.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  /// Gives up ownership without closing.
  int Release() { return std::exchange(fd_, -1); }
  /// Closes now and reports close(2)'s result (errno is set on failure).
  int Close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd);
  }

 private:
  int fd_;
};

std::string TempSuffix() {
  static thread_local std::mt19937_64 generator(std::random_device{}());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string suffix = ".tmp.";
  suffix += std::to_string(::getpid());
  suffix += '.';
  std::uint64_t bits = generator();
  for (int i = 0; i < 12; ++i, bits >>= 4) suffix += kHex[bits & 0xf];
  return suffix;
}

}  // namespace

void WriteFileAtomic(const std::filesystem::path& path, std::string_view contents, mode_t mode) {
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  // The leading dot keeps temp files out of listings that look for "*.json" and the like.
  const std::filesystem::path temp = dir / ("." + path.filename().string() + TempSuffix());

  ScopedFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (fd.get() < 0) {
    throw SystemError("cannot write", path, errno);
  }
  // From here on, any failure removes the temp file.
  auto fail = [&](const std::string& what, int err) -> Error {
    ::unlink(temp.c_str());
    return SystemError(what, path, err);
  };
  // The umask may have narrowed the mode at open; set it exactly (never wider than asked).
  if (::fchmod(fd.get(), mode) != 0) throw fail("cannot set the mode of", errno);
  const char* data = contents.data();
  std::size_t left = contents.size();
  while (left > 0) {
    const ssize_t n = ::write(fd.get(), data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw fail("cannot write", errno);
    }
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0) throw fail("cannot flush", errno);
  if (fd.Close() != 0) throw fail("cannot write", errno);
  if (::rename(temp.c_str(), path.c_str()) != 0) throw fail("cannot replace", errno);

  ScopedFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0) throw SystemError("cannot open the directory of", path, errno);
  // EINVAL: the file system does not support fsync on directories; nothing more to do.
  if (::fsync(dir_fd.get()) != 0 && errno != EINVAL) {
    throw SystemError("cannot flush the directory of", path, errno);
  }
}

namespace {

/// "a FIFO", "a directory", ... for a file type that is not a regular file.
std::string FileTypeWords(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string ByteCount(std::uintmax_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

/// The reason a file of this stat may not be read as \a kind, or "".
std::string ReasonFromStat(const struct stat& st, FileKind kind) {
  if (!S_ISREG(st.st_mode)) {
    const std::string type = FileTypeWords(st.st_mode);
    return "is " + type + (type == "not a regular file" ? "" : ", not a regular file");
  }
  if (static_cast<std::uintmax_t>(st.st_size) > kind.max_bytes) {
    return "is " + std::to_string(st.st_size) + " bytes, more than a " + std::string(kind.name) +
           " may be (" + ByteCount(kind.max_bytes) + ")";
  }
  return "";
}

Error RefusedFile(const std::filesystem::path& path, FileKind kind, const std::string& reason) {
  return UsageError("refusing to read the " + std::string(kind.name) + " " + Quoted(path) + ": it " +
                        reason,
                    "gpuprov reads a " + std::string(kind.name) + " only from a regular file of at "
                    "most " + ByteCount(kind.max_bytes) + "; put one there, or name another");
}

}  // namespace

std::string UnreadableFileReason(const std::filesystem::path& path, FileKind kind) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return ReasonFromStat(st, kind);
}

std::optional<std::string> ReadFileIfExists(const std::filesystem::path& path, FileKind kind) {
  // O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer; the
  // descriptor's own fstat then decides (no window between a check and the open).
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw SystemError("cannot read", path, errno);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw SystemError("cannot read", path, errno);
  if (const std::string reason = ReasonFromStat(st, kind); !reason.empty()) {
    throw RefusedFile(path, kind, reason);
  }
  std::string contents;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SystemError("cannot read", path, errno);
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<std::size_t>(n));
    // A file that grows while it is read is held to the same bound.
    if (contents.size() > kind.max_bytes) {
      throw RefusedFile(path, kind, "grew past " + ByteCount(kind.max_bytes) + " while read");
    }
  }
  return contents;
}

std::string ReadFile(const std::filesystem::path& path, FileKind kind) {
  std::optional<std::string> contents = ReadFileIfExists(path, kind);
  if (!contents) throw SystemError("cannot read", path, ENOENT);
  return std::move(*contents);
}

namespace {

int OpenLockFile(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw SystemError("cannot open lock file", path, errno);
  return fd;
}

/// true: locked; false: someone else holds it. Throws on other errors.
bool TryFlock(int fd, const std::filesystem::path& path) {
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) return false;
    throw SystemError("cannot lock", path, errno);
  }
}

}  // namespace

FileLock::FileLock(const std::filesystem::path& lock_file, std::string name, int timeout_ms)
    : path_(lock_file), name_(std::move(name)) {
  ScopedFd fd(OpenLockFile(path_));
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  auto sleep = std::chrono::milliseconds(5);
  while (!TryFlock(fd.get(), path_)) {
    const auto now = std::chrono::steady_clock::now();
    if (timeout_ms >= 0 && now >= deadline) {
      throw Error("another gpuprov is working on '" + name_ + "' (lock " + path_.string() +
                      "); wait for it to finish, or stop that process, then run this again",
                  "`fuser -v " + path_.string() + "` shows the process holding the lock");
    }
    auto step = sleep;
    if (timeout_ms >= 0) {
      step = std::min(step, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) +
                                std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(step);
    sleep = std::min(sleep * 2, std::chrono::milliseconds(100));
  }
  fd_ = fd.Release();
}

std::optional<FileLock> FileLock::TryLock(const std::filesystem::path& lock_file,
                                          std::string name) {
  ScopedFd fd(OpenLockFile(lock_file));
  if (!TryFlock(fd.get(), lock_file)) return std::nullopt;
  return FileLock(lock_file, std::move(name), AdoptFd{fd.Release()});
}

FileLock::FileLock(FileLock&& other) noexcept
    : path_(std::move(other.path_)), name_(std::move(other.name_)), fd_(other.fd_) {
  other.fd_ = -1;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    Release();
    path_ = std::move(other.path_);
    name_ = std::move(other.name_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() { Release(); }

void FileLock::Release() {
  if (fd_ >= 0) {
    // Closing the only descriptor of the open file description drops the flock.
    ::close(fd_);
    fd_ = -1;
  }
}

}  // namespace gpuprov
