#include "file_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "error.h"
#include "test_support.h"

namespace gpuprov {
namespace {

using gpuprov::testing::ScopedTempDir;
using gpuprov::testing::ModeOf;

using ::testing::HasSubstr;

std::vector<std::string> Entries(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

/// Runs \a body in a forked child and returns its exit status (-1 if it did not exit).
template <typename Body>
int RunInChild(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 99;
    try {
      code = body();
    } catch (...) {
      code = 98;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(WriteFileAtomicTest, WritesContentsWithMode0600EvenWithUmask0) {
  ScopedTempDir tmp;
  const std::filesystem::path path = tmp.path() / "f.json";
  const mode_t old_umask = ::umask(0);
  WriteFileAtomic(path, "hello");
  ::umask(old_umask);
  EXPECT_EQ(ReadFile(path), "hello");
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(Entries(tmp.path()), std::vector<std::string>{"f.json"});
}

TEST(WriteFileAtomicTest, ModeIsExactEvenWithARestrictiveUmask) {
  ScopedTempDir tmp;
  const std::filesystem::path path = tmp.path() / "f";
  const mode_t old_umask = ::umask(077);
  WriteFileAtomic(path, "x", 0644);
  ::umask(old_umask);
  EXPECT_EQ(ModeOf(path), 0644u);
}

TEST(WriteFileAtomicTest, ReplacesAnExistingFileAndItsMode) {
  ScopedTempDir tmp;
  const std::filesystem::path path = tmp.path() / "f";
  WriteFileAtomic(path, "old contents", 0644);
  WriteFileAtomic(path, "new");
  EXPECT_EQ(ReadFile(path), "new");
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(Entries(tmp.path()), std::vector<std::string>{"f"});
}

TEST(WriteFileAtomicTest, EmptyAndLargeContents) {
  ScopedTempDir tmp;
  WriteFileAtomic(tmp.path() / "empty", "");
  EXPECT_EQ(ReadFile(tmp.path() / "empty"), "");
  const std::string big(3 * 1024 * 1024 + 17, 'z');
  WriteFileAtomic(tmp.path() / "big", big);
  EXPECT_EQ(ReadFile(tmp.path() / "big"), big);
}

TEST(WriteFileAtomicTest, MissingDirectoryThrowsNamingThePath) {
  ScopedTempDir tmp;
  const std::filesystem::path path = tmp.path() / "nope" / "f";
  try {
    WriteFileAtomic(path, "x");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string()));
    EXPECT_THAT(e.what(), HasSubstr(std::strerror(ENOENT)));
  }
}

TEST(WriteFileAtomicTest, UnwritableDirectoryThrowsAndKeepsTheOriginal) {
  ScopedTempDir tmp;
  const std::filesystem::path dir = tmp.path() / "ro";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  WriteFileAtomic(dir / "f", "original");
  // Root ignores directory permissions, so the attempt runs in a child as user "nobody".
  const uid_t nobody = 65534;
  const bool as_root = ::geteuid() == 0;
  if (as_root) {
    ASSERT_EQ(::chown(tmp.path().c_str(), nobody, nobody), 0);
    ASSERT_EQ(::chown(dir.c_str(), nobody, nobody), 0);
    ASSERT_EQ(::chown((dir / "f").c_str(), nobody, nobody), 0);
  }
  ASSERT_EQ(::chmod(dir.c_str(), 0500), 0);
  const int code = RunInChild([&] {
    if (as_root && (::setgid(nobody) != 0 || ::setuid(nobody) != 0)) return 2;
    try {
      WriteFileAtomic(dir / "f", "replacement");
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.find((dir / "f").string()) == std::string::npos) return 3;
      if (what.find(std::strerror(EACCES)) == std::string::npos) return 4;
      return 0;
    }
    return 1;
  });
  EXPECT_EQ(code, 0);
  ::chmod(dir.c_str(), 0700);
  EXPECT_EQ(ReadFile(dir / "f"), "original");
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"f"});
}

TEST(WriteFileAtomicTest, FailedRenameRemovesTheTempFile) {
  ScopedTempDir tmp;
  // A non-empty directory at the target makes rename(2) fail after the temp is written.
  const std::filesystem::path target = tmp.path() / "target";
  ASSERT_EQ(::mkdir(target.c_str(), 0700), 0);
  WriteFileAtomic(target / "inside", "keep");
  try {
    WriteFileAtomic(target, "data");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(target.string()));
  }
  EXPECT_EQ(Entries(tmp.path()), std::vector<std::string>{"target"});
  EXPECT_EQ(ReadFile(target / "inside"), "keep");
}

TEST(WriteFileAtomicTest, FailedWriteKeepsTheOriginalAndLeavesNoTemp) {
  ScopedTempDir tmp;
  const std::filesystem::path path = tmp.path() / "f";
  WriteFileAtomic(path, "original");
  // In a child, a file size limit makes write(2) fail with EFBIG part way through.
  const int code = RunInChild([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit {
      1024, 1024
    };
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 2;
    try {
      WriteFileAtomic(path, std::string(64 * 1024, 'n'));
    } catch (const Error& e) {
      return std::string(e.what()).find(std::strerror(EFBIG)) != std::string::npos ? 0 : 3;
    }
    return 1;
  });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(ReadFile(path), "original");
  EXPECT_EQ(Entries(tmp.path()), std::vector<std::string>{"f"});
}

TEST(ReadFileTest, MissingFileThrowsNamingThePath) {
  ScopedTempDir tmp;
  const std::filesystem::path path = tmp.path() / "missing.toml";
  try {
    ReadFile(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string()));
  }
  EXPECT_EQ(ReadFileIfExists(path), std::nullopt);
}

TEST(ReadFileTest, ReadingADirectoryThrows) {
  ScopedTempDir tmp;
  EXPECT_THROW(ReadFileIfExists(tmp.path()), Error);
}

/// The exit code and message of reading \a path as \a kind ("" and 0 when it was read).
std::pair<int, std::string> ReadRefusal(const std::filesystem::path& path, FileKind kind) {
  try {
    ReadFileIfExists(path, kind);
    return {0, ""};
  } catch (const Error& e) {
    return {e.exit_code(), e.what()};
  }
}

TEST(ReadFileTest, OnlyARegularFileWithinItsKindsBoundIsRead) {
  ScopedTempDir tmp;
  const std::filesystem::path fifo = tmp.path() / "config.toml";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const auto started = std::chrono::steady_clock::now();
  // A FIFO: refused at once (no writer is waited for), exit 2, naming the path and why.
  auto [code, what] = ReadRefusal(fifo, kConfigFileKind);
  EXPECT_EQ(code, kExitUsage);
  EXPECT_THAT(what, HasSubstr("refusing to read the config file '" + fifo.string() +
                              "': it is a FIFO (named pipe), not a regular file"));
  // A symlink to /dev/zero: never read (it would never end).
  const std::filesystem::path zero = tmp.path() / "zero";
  std::filesystem::create_symlink("/dev/zero", zero);
  std::tie(code, what) = ReadRefusal(zero, kSpecFileKind);
  EXPECT_EQ(code, kExitUsage);
  EXPECT_THAT(what, HasSubstr("it is a character device, not a regular file"));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  // Larger than the kind allows, by one byte.
  const std::filesystem::path big = tmp.path() / "big";
  WriteFileAtomic(big, std::string(kPrivateKeyKind.max_bytes + 1, 'k'));
  std::tie(code, what) = ReadRefusal(big, kPrivateKeyKind);
  EXPECT_EQ(code, kExitUsage);
  EXPECT_THAT(what, HasSubstr("is 65537 bytes, more than a private key may be (64 KiB)"));
  // At the bound: read.
  WriteFileAtomic(big, std::string(kPrivateKeyKind.max_bytes, 'k'));
  EXPECT_EQ(ReadFile(big, kPrivateKeyKind).size(), kPrivateKeyKind.max_bytes);
  EXPECT_EQ(UnreadableFileReason(big, kPrivateKeyKind), "");
  EXPECT_EQ(UnreadableFileReason(fifo, kPrivateKeyKind), "is a FIFO (named pipe), not a regular file");
}

TEST(FileLockTest, LockFileIsCreatedWithMode0600) {
  ScopedTempDir tmp;
  const mode_t old_umask = ::umask(0);
  FileLock lock(tmp.path() / "vm.lock", "vm", 0);
  ::umask(old_umask);
  EXPECT_EQ(ModeOf(tmp.path() / "vm.lock"), 0600u);
  EXPECT_EQ(lock.name(), "vm");
}

TEST(FileLockTest, ExcludesAnotherProcessUntilReleased) {
  ScopedTempDir tmp;
  const std::filesystem::path path = tmp.path() / "vm.lock";
  {
    FileLock lock(path, "vm1", 0);
    const int code = RunInChild([&] {
      if (FileLock::TryLock(path, "vm1").has_value()) return 1;
      try {
        FileLock second(path, "vm1", 150);
        return 2;
      } catch (const Error& e) {
        const std::string what = e.what();
        if (what.find("another gpuprov is working on 'vm1'") == std::string::npos) return 3;
        if (what.find(path.string()) == std::string::npos) return 4;
        return 0;
      }
    });
    EXPECT_EQ(code, 0);
  }
  const int code = RunInChild([&] { return FileLock::TryLock(path, "vm1").has_value() ? 0 : 1; });
  EXPECT_EQ(code, 0);
}

TEST(FileLockTest, WaitsForAHolderThatLetsGo) {
  ScopedTempDir tmp;
  const std::filesystem::path path = tmp.path() / "vm.lock";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    {
      FileLock lock(path, "vm", 0);
      (void)!::write(ready[1], "x", 1);
      ::usleep(300 * 1000);
    }
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  EXPECT_FALSE(FileLock::TryLock(path, "vm").has_value());
  const auto start = std::chrono::steady_clock::now();
  FileLock lock(path, "vm", 10000);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
  int status = 0;
  ::waitpid(pid, &status, 0);
}

TEST(FileLockTest, TwoLocksInOneProcessExcludeEachOther) {
  ScopedTempDir tmp;
  const std::filesystem::path path = tmp.path() / "vm.lock";
  std::optional<FileLock> first = FileLock::TryLock(path, "vm");
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(FileLock::TryLock(path, "vm").has_value());
  FileLock moved = std::move(*first);
  first.reset();
  EXPECT_FALSE(FileLock::TryLock(path, "vm").has_value());
}

TEST(FileLockTest, MissingDirectoryThrowsNamingThePath) {
  ScopedTempDir tmp;
  const std::filesystem::path path = tmp.path() / "no" / "vm.lock";
  try {
    FileLock lock(path, "vm", 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string()));
  }
}

}  // namespace
}  // namespace gpuprov
