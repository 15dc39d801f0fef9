// Small POSIX file helpers: atomic writes, whole-file reads and advisory locks.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace gpuprov {

/// Replaces \a path with \a contents so that readers see either the old or the new file,
/// never a mix: a temp file in the same directory is created with O_CREAT|O_EXCL and \a mode
/// (so it is never visible with a wider mode), set to exactly \a mode, written, fsync'ed and
/// renamed over \a path; then the directory is fsync'ed. On failure the temp file is removed,
/// \a path is left as it was, and Error names the path and the system error.
void WriteFileAtomic(const std::filesystem::path& path, std::string_view contents,
                     mode_t mode = 0600);

/// The whole file. Throws Error naming the path when it is missing or unreadable.
std::string ReadFile(const std::filesystem::path& path);

/// The whole file, or nullopt when it does not exist. Throws Error on other failures.
std::optional<std::string> ReadFileIfExists(const std::filesystem::path& path);

/// An exclusive flock(2) on a lock file, held for the object's lifetime and released by the
/// destructor (and by the kernel when the process dies, so a crash leaves no stale lock).
/// The lock file is created with mode 0600 if missing; its directory must exist. Lock files
/// are never deleted: deleting one while another process waits on it would let two
/// processes each hold a lock on a different file of the same name.
/// Locks exclude each other between processes and between FileLock objects in one process.
class FileLock {
 public:
  /// Waits up to \a timeout_ms for the lock (0: one attempt; negative: no limit), retrying
  /// every few milliseconds. Throws Error "another gpuprov is working on '<name>' ..." on
  /// timeout, and Error naming the path when the lock file cannot be opened.
  FileLock(const std::filesystem::path& lock_file, std::string name, int timeout_ms);

  /// One attempt: the lock, or nullopt when another holder has it.
  static std::optional<FileLock> TryLock(const std::filesystem::path& lock_file, std::string name);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  const std::filesystem::path& path() const { return path_; }
  const std::string& name() const { return name_; }

 private:
  struct AdoptFd {
    int fd;
  };
  FileLock(std::filesystem::path path, std::string name, AdoptFd locked)
      : path_(std::move(path)), name_(std::move(name)), fd_(locked.fd) {}

  void Release();

  std::filesystem::path path_;
  std::string name_;
  int fd_ = -1;
};

}  // namespace gpuprov
