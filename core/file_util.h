// Small POSIX file helpers: atomic writes, whole-file reads and advisory locks.
#pragma once

#include <sys/types.h>

#include <cstddef>

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

/// What a file read by gpuprov may be: its kind (for messages) and the most bytes it may hold.
/// Every file gpuprov reads is opened only if it is a regular file within such a bound, so a
/// symlink to /dev/zero or a FIFO in a file's place is refused at once, never read forever.
struct FileKind {
  const char* name;
  std::size_t max_bytes;
};
inline constexpr FileKind kConfigFileKind{"config file", 1u << 20};
inline constexpr FileKind kSpecFileKind{"spec file", 1u << 20};
inline constexpr FileKind kStateRecordKind{"state record", 1u << 20};
inline constexpr FileKind kKubeconfigKind{"kubeconfig", 16u << 20};
inline constexpr FileKind kKnownHostsKind{"known_hosts file", 16u << 20};
inline constexpr FileKind kPrivateKeyKind{"private key", 64u << 10};
inline constexpr FileKind kCacheFileKind{"cache file", 16u << 20};
inline constexpr FileKind kDriverFileKind{"driver file", 1u << 30};
/// Any other text file (test fixtures, scripts): 64 MiB.
inline constexpr FileKind kTextFileKind{"file", 64u << 20};

/// Why \a path may not be read as \a kind ("is a FIFO, not a regular file", "is 2 GiB, more
/// than a config file may be (1 MiB)"), or "" when it is a regular file within the bound.
/// Follows symlinks; a missing file gives "".
std::string UnreadableFileReason(const std::filesystem::path& path, FileKind kind);

/// The whole file. Throws Error naming the path when it is missing or unreadable, and
/// UsageError (exit 2) naming the path and the reason when it is not a regular file or is
/// larger than \a kind allows.
std::string ReadFile(const std::filesystem::path& path, FileKind kind = kTextFileKind);

/// The whole file, or nullopt when it does not exist. Throws as ReadFile does otherwise.
std::optional<std::string> ReadFileIfExists(const std::filesystem::path& path,
                                            FileKind kind = kTextFileKind);

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
