// SPDX-License-Identifier: Apache-2.0
#include "pacer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "driver_test_util.h"

namespace gpuprov::drivers {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

TEST(PaceCall, SpacesCallsWithOneKeyAndLeavesOtherKeysAlone) {
  testing::RecordingHost recording;
  const auto host = recording.Host();
  const auto start = Clock::now();
  for (int i = 0; i < 3; ++i) PaceCall(host, "pacer-test-a", milliseconds(100), "call");
  PaceCall(host, "pacer-test-b", milliseconds(100), "call");  // another key: no wait
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  EXPECT_GE(took.count(), 195);  // slots at 0, 100, 200 ms (sleeps end to the millisecond)
  EXPECT_LT(took.count(), 290);
}

// Four threads pace `key` (60 ms apart, in `shared_dir` when given) at once: each returns at
// least one interval after the one before.
void ExpectFourThreadsTakeSuccessiveSlots(const std::string& key, const std::string& shared_dir) {
  testing::RecordingHost recording;
  const auto host = recording.Host();
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  std::vector<long long> done_ms(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      PaceCall(host, key, milliseconds(60), "call", shared_dir);
      done_ms[i] =
          std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
    });
  }
  for (auto& t : threads) t.join();
  std::sort(done_ms.begin(), done_ms.end());
  for (int i = 1; i < 4; ++i) EXPECT_GE(done_ms[i] - done_ms[0], 60 * i - 15) << i;
}

TEST(PaceCall, ConcurrentCallersGetSuccessiveSlots) {
  ExpectFourThreadsTakeSuccessiveSlots("pacer-test-threads", "");
}

TEST(PaceCall, ACancelledWaitThrowsCancelled) {
  testing::RecordingHost recording;
  PaceCall(recording.Host(), "pacer-test-cancel", milliseconds(5000), "launch");
  recording.cancel = true;
  const auto start = Clock::now();
  try {
    PaceCall(recording.Host(), "pacer-test-cancel", milliseconds(5000), "launch");
    FAIL() << "no exception";
  } catch (const gpuprov::sdk::DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_CANCELLED);
    EXPECT_NE(std::string(e.what()).find("launch"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration_cast<milliseconds>(Clock::now() - start).count(), 1000);
}

TEST(PaceCall, ZeroIntervalNeverWaits) {
  testing::RecordingHost recording;
  const auto start = Clock::now();
  for (int i = 0; i < 100; ++i) PaceCall(recording.Host(), "pacer-test-zero", milliseconds(0), "x");
  EXPECT_LT(std::chrono::duration_cast<milliseconds>(Clock::now() - start).count(), 50);
}

// Issue 30: a cloud counts per API key, not per process: two processes pacing one key through
// the shared folder get successive slots (each alone would finish in 200 ms).
TEST(PaceCall, TwoProcessesWithOneKeyShareTheSlots) {
  testing::ScopedTempDir dir;
  const std::string shared = (dir.path() / "pace").string();
  const auto start = Clock::now();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    testing::RecordingHost recording;
    for (int i = 0; i < 3; ++i) {
      PaceCall(recording.Host(), "pacer-test-processes", milliseconds(100), "call", shared);
    }
    _exit(0);
  }
  testing::RecordingHost recording;
  for (int i = 0; i < 3; ++i) {
    PaceCall(recording.Host(), "pacer-test-processes", milliseconds(100), "call", shared);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  EXPECT_GE(took.count(), 490) << "six slots 100 ms apart";  // 0, 100, ..., 500 ms
  // One small file named by a hash of the key; the key itself is nowhere.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(shared)) {
    ++files;
    EXPECT_EQ(e.path().filename().string().size(), 64u);  // hex SHA-256 (PacerFileName)
  }
  EXPECT_EQ(files, 1);
}

TEST(PaceCall, WithoutAUsableFolderItPacesWithinTheProcess) {
  testing::RecordingHost recording;
  const auto start = Clock::now();
  for (int i = 0; i < 3; ++i) {
    PaceCall(recording.Host(), "pacer-test-nodir", milliseconds(100), "call", "/proc/no/such/dir");
  }
  EXPECT_GE(std::chrono::duration_cast<milliseconds>(Clock::now() - start).count(), 195);
}

// --- across processes: the shared folder (issue 30: a second gpuprov started right after the
// first met Lambda's limit on its first request) ------------------------------------------

long long MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int Mode(const std::filesystem::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 0777) : -1;
}

// Runs PaceCall(key, interval, shared) in a child process, returns when the child's call has
// returned (its slot is taken) and reaps it at the end of the scope.
class PacedChild {
 public:
  PacedChild(const std::string& key, milliseconds interval, const std::string& shared) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(fds[0]);
      testing::RecordingHost recording;
      PaceCall(recording.Host(), key, interval, "child", shared);
      const char done = 'x';
      _exit(::write(fds[1], &done, 1) == 1 ? 0 : 3);
    }
    ::close(fds[1]);
    char done = 0;
    const ssize_t n = ::read(fds[0], &done, 1);
    ::close(fds[0]);
    if (n != 1) ADD_FAILURE() << "the child did not pace";
  }
  ~PacedChild() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }

 private:
  pid_t pid_ = -1;
};

TEST(PaceCallShared, ASecondProcessWithTheSameKeyWaitsForTheFirstsSlot) {
  testing::ScopedTempDir home;
  const std::string shared = (home.path() / "pacer").string();  // made on first use
  const std::string key = "lambda http://127.0.0.1:9 Bearer secret_two_processes";
  testing::RecordingHost recording;
  {
    PacedChild first(key, milliseconds(400), shared);  // takes the slot "now" in another process
    const auto start = Clock::now();
    PaceCall(recording.Host(), key, milliseconds(400), "second", shared);
    const long long took = MsSince(start);
    EXPECT_GE(took, 300) << "the second process did not wait for the first's slot";
    EXPECT_LT(took, 1000);
  }
  // Another key (another API key, another cloud) is not held up by it.
  {
    PacedChild first(key + "-other", milliseconds(400), shared);
    const auto start = Clock::now();
    PaceCall(recording.Host(), key + "-another", milliseconds(400), "other key", shared);
    EXPECT_LT(MsSince(start), 150);
  }
}

TEST(PaceCallShared, TheKeyIsNeverWrittenOnlyItsSaltedHashWithPrivateModes) {
  testing::ScopedTempDir home;
  const std::filesystem::path shared = home.path() / "pacer";
  const std::string secret = "secret_never_on_disk_1234";
  const std::string key = "lambda http://127.0.0.1:9 Bearer " + secret;
  testing::RecordingHost recording;
  PaceCall(recording.Host(), key, milliseconds(50), "call", shared.string());
  EXPECT_EQ(Mode(shared), 0700);
  const std::string name = PacerFileName(key);
  EXPECT_EQ(name.size(), 64u);  // hex SHA-256
  EXPECT_EQ(name.find(secret), std::string::npos);
  EXPECT_NE(name, PacerFileName(key + "x"));
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(shared)) {
    files.push_back(e.path().filename().string());
  }
  ASSERT_EQ(files, std::vector<std::string>{name});
  EXPECT_EQ(Mode(shared / name), 0600);
  const std::string text = ReadFile(shared / name);
  EXPECT_EQ(text.find(secret), std::string::npos) << text;
  EXPECT_EQ(text.rfind("gpuprov-pacer-1 ", 0), 0u) << text;
}

TEST(PaceCallShared, ACorruptOrStaleFileCountsAsNoSlotAndIsRewritten) {
  testing::ScopedTempDir home;
  const std::filesystem::path shared = home.path() / "pacer";
  testing::RecordingHost recording;
  const auto now_ms = [] {
    return std::chrono::duration_cast<milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const auto write = [&](const std::string& key, const std::string& text) {
    std::filesystem::create_directories(shared);
    std::ofstream(shared / PacerFileName(key)) << text;
  };
  // Garbage, an empty file, a negative slot, a slot hours ahead (a clock set back): no wait.
  const std::vector<std::string> bad = {
      "garbage", "", "gpuprov-pacer-1 -5\n", "gpuprov-pacer-1 12ab\n",
      "gpuprov-pacer-1 " + std::to_string(now_ms() + 3'600'000) + "\n",
      std::string(200, '9')};
  for (size_t i = 0; i < bad.size(); ++i) {
    const std::string key = "corrupt-" + std::to_string(i);
    write(key, bad[i]);
    const auto start = Clock::now();
    PaceCall(recording.Host(), key, milliseconds(200), "call", shared.string());
    EXPECT_LT(MsSince(start), 100) << i;
    EXPECT_EQ(ReadFile(shared / PacerFileName(key)).rfind("gpuprov-pacer-1 ", 0), 0u) << i;
  }
  // A slot another process reserved a moment ahead is honoured.
  write("ahead", "gpuprov-pacer-1 " + std::to_string(now_ms() + 300) + "\n");
  const auto start = Clock::now();
  PaceCall(recording.Host(), "ahead", milliseconds(200), "call", shared.string());
  EXPECT_GE(MsSince(start), 250);
}

TEST(PaceCallShared, ThreadsSharingTheFolderGetSuccessiveSlots) {
  testing::ScopedTempDir home;
  ExpectFourThreadsTakeSuccessiveSlots("shared-threads", (home.path() / "pacer").string());
}

}  // namespace
}  // namespace gpuprov::drivers
