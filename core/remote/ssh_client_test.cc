#include "ssh_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "error.h"
#include "ssh_keys.h"
#include "testvm_fixture_test_util.h"
#include "test_support.h"

namespace gpuprov {
namespace {

using TempDir = gpuprov::testing::ScopedTempDir;
using gpuprov::testing::ModeOf;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Loopback addresses of these tests (127.88.x.y is this file's range).
constexpr char kVmAddress[] = "127.88.0.2";        // shared VM of SshClientVmTest
constexpr char kRecreateAddress[] = "127.88.0.3";  // VM that SshClientRecreateTest recreates
constexpr char kNothingListens[] = "127.88.0.9";   // no container, no listener
constexpr char kFakeServerAddress[] = "127.88.0.10";

/// A fresh directory (mode 0700) removed with its contents at scope exit.
std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void WriteFile(const fs::path& path, const std::string& text, mode_t mode = 0600) {
  std::ofstream(path, std::ios::binary) << text;
  ::chmod(path.c_str(), mode);
}

std::vector<std::string> NonEmptyLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

/// A TCP server on kFakeServerAddress that accepts connections and either keeps them open
/// without a word (an SSH server that hangs before its banner) or closes them at once (a
/// port forwarder whose backend is not up yet, or sshd dropping a connection at start).
class FakeServer {
 public:
  enum class Mode { kSilent, kCloseAtOnce };

  explicit FakeServer(Mode mode) : mode_(mode) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    ::inet_pton(AF_INET, kFakeServerAddress, &sa.sin_addr);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
        ::listen(listen_fd_, 16) != 0) {
      std::abort();
    }
    socklen_t len = sizeof(sa);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeServer() {
    stop_ = true;
    thread_.join();
    for (int fd : held_) ::close(fd);
    ::close(listen_fd_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  void Serve() {
    while (!stop_) {
      pollfd pfd{listen_fd_, POLLIN, 0};
      if (::poll(&pfd, 1, 50) <= 0) continue;
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      ++accepted_;
      if (mode_ == Mode::kCloseAtOnce) {
        ::close(fd);
      } else {
        held_.push_back(fd);
      }
    }
  }

  Mode mode_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::vector<int> held_;
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------
// Without a VM.

TEST(SshClientTest, ShellQuoteSurvivesTheShell) {
  EXPECT_EQ(ShellQuote("plain"), "'plain'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  const std::string nasty = "a b'c\"d$e`f\\g\nh;i";
  testvm::ShellResult echoed = testvm::Shell("printf %s " + ShellQuote(nasty), false);
  EXPECT_EQ(echoed.output, nasty);
}

TEST(SshClientTest, HostPortFormIsBracketed) {
  EXPECT_EQ(SshHostPort("127.0.0.5", 22), "[127.0.0.5]:22");
  EXPECT_EQ(SshHostPort("10.0.0.1", 2222), "[10.0.0.1]:2222");
}

// Two host keys as known_hosts lines carry them (type and base64 blob).
constexpr const char* kKnownKeyA =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHNvbWUga2V5IGJ5dGVzIGZvciB0ZXN0aW5nIG9ubHk=";
constexpr const char* kKnownKeyB =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG90aGVyIGtleSBieXRlcyBmb3IgdGVzdGluZyBvbmx5";

TEST(SshClientTest, ForgetHostKeyRemovesOnlyThatHostsLines) {
  TempDir dir;
  const fs::path file = dir.path() / "known_hosts";
  const std::string key_a = kKnownKeyA, key_b = kKnownKeyB;
  WriteFile(file,
            "# gpuprov pins\n"
            "127.88.0.2 " +
                key_a +
                "\n"
                "[127.88.0.2]:22 " +
                key_b +
                "\n"
                "[127.88.0.2]:2222 " +
                key_a +
                "\n"
                "127.88.0.20 " +
                key_a +
                "\n"
                "other.example,127.88.0.2 " +
                key_b +
                "\n"
                "@cert-authority 127.88.0.2 " +
                key_a + "\n",
            0644);
  // A hashed line as OpenSSH writes with HashKnownHosts.
  const fs::path plain = dir.path() / "plain";
  WriteFile(plain, "127.88.0.2 " + key_b + "\n127.88.0.21 " + key_b + "\n");
  testvm::ShellResult hashed = testvm::Shell("ssh-keygen -H -f '" + plain.string() + "'");
  ASSERT_EQ(hashed.exit_status, 0) << hashed.output;
  const std::string hashed_text = ReadFile(plain);
  ASSERT_EQ(hashed_text.rfind("|1|", 0), 0u) << hashed_text;
  std::ofstream(file, std::ios::app) << hashed_text;

  ForgetHostKey(file.string(), "127.88.0.2", 22);

  const std::vector<std::string> lines = NonEmptyLines(ReadFile(file));
  ASSERT_EQ(lines.size(), 5u) << ReadFile(file);
  EXPECT_EQ(lines[0], "# gpuprov pins");
  EXPECT_EQ(lines[1], "[127.88.0.2]:2222 " + key_a);
  EXPECT_EQ(lines[2], "127.88.0.20 " + key_a);
  EXPECT_EQ(lines[3], "@cert-authority 127.88.0.2 " + key_a);
  EXPECT_EQ(lines[4].rfind("|1|", 0), 0u);  // the hashed 127.88.0.21
  EXPECT_EQ(ModeOf(file), 0600u);
  EXPECT_FALSE(fs::exists(dir.path() / "known_hosts.tmp"));

  ForgetHostKey(file.string(), "127.88.0.2", 2222);
  EXPECT_EQ(NonEmptyLines(ReadFile(file)).size(), 4u);
}

TEST(SshClientTest, MoveHostKeyPinsTheSameKeyAtTheNewAddressOnly) {
  TempDir dir;
  const fs::path file = dir.path() / "known_hosts";
  const std::string key_a = kKnownKeyA, key_b = kKnownKeyB;
  WriteFile(file,
            "127.88.0.2 " + key_a + "\n[127.88.0.9]:2222 " + key_b + "\n127.88.0.20 " + key_b +
                "\n",
            0644);

  // The VM moved from 127.88.0.2:22 to 127.88.0.9:2222, where another VM's key was pinned.
  MoveHostKey(file.string(), "127.88.0.2", 22, "127.88.0.9", 2222);

  const std::vector<std::string> lines = NonEmptyLines(ReadFile(file));
  ASSERT_EQ(lines.size(), 2u) << ReadFile(file);
  EXPECT_EQ(lines[0], "[127.88.0.9]:2222 " + key_a);
  EXPECT_EQ(lines[1], "127.88.0.20 " + key_b);
  EXPECT_EQ(ModeOf(file), 0600u);

  // Moved already: a second move from the old address keeps the pin at the new one.
  MoveHostKey(file.string(), "127.88.0.2", 22, "127.88.0.9", 2222);
  EXPECT_EQ(NonEmptyLines(ReadFile(file)), lines);
}

TEST(SshClientTest, ForgetHostKeyOnMissingFileDoesNothing) {
  TempDir dir;
  ForgetHostKey((dir.path() / "known_hosts").string(), "127.88.0.2", 22);
  EXPECT_FALSE(fs::exists(dir.path() / "known_hosts"));
}

TEST(SshClientTest, MissingKeyIsALocalErrorNotRetried) {
  TempDir dir;
  SshTarget target = testing::KeyedSshTarget(dir.path(), kNothingListens, 22);
  target.private_key_path = (dir.path() / "missing").string();
  const auto start = Clock::now();
  try {
    WaitForSsh(target, seconds(20), nullptr);
    FAIL() << "connected without a key";
  } catch (const SshError& e) {
    FAIL() << "a local problem was reported as an SSH failure: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(target.private_key_path), std::string::npos);
  }
  EXPECT_LT(Clock::now() - start, seconds(2));
}

TEST(SshClientTest, InvalidTargetIsRefused) {
  TempDir dir;
  SshTarget target = testing::KeyedSshTarget(dir.path(), kNothingListens, 22);
  target.port = 0;
  EXPECT_THROW(SshSession::Connect(target, seconds(1)), Error);
  target.port = 22;
  target.user = "";
  EXPECT_THROW(SshSession::Connect(target, seconds(1)), Error);
  target.user = "root";
  target.host = "root@127.88.0.9";
  EXPECT_THROW(SshSession::Connect(target, seconds(1)), Error);
}

TEST(SshClientTest, WaitForSshWhereNothingListensTimesOutWithProgress) {
  TempDir dir;
  const SshTarget target = testing::KeyedSshTarget(dir.path(), kNothingListens, 22);
  std::vector<seconds> calls;
  const auto start = Clock::now();
  try {
    WaitForSsh(target, milliseconds(4500), [&](seconds elapsed) { calls.push_back(elapsed); });
    FAIL() << "connected to " << kNothingListens;
  } catch (const SshError& e) {
    EXPECT_EQ(e.failure(), SshFailure::kUnreachable);
    const std::string message = e.what();
    EXPECT_NE(message.find("[127.88.0.9]:22"), std::string::npos) << message;
    EXPECT_NE(message.find("within 5s"), std::string::npos) << message;
    EXPECT_NE(message.find("refused"), std::string::npos) << message;
    EXPECT_FALSE(e.hint().empty());
  }
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(4500));
  EXPECT_LT(elapsed, milliseconds(6500));
  // After the first failure (0s), then about every 3 seconds.
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls[0], seconds(0));
  EXPECT_GE(calls[1], seconds(3));
  // Nothing was pinned: no known_hosts file appears.
  EXPECT_FALSE(fs::exists(target.known_hosts_path));
}

TEST(SshClientTest, ServerSilentBeforeBannerTimesOutAndIsRetried) {
  TempDir dir;
  FakeServer server(FakeServer::Mode::kSilent);
  const SshTarget target = testing::KeyedSshTarget(dir.path(), kFakeServerAddress, server.port());
  const auto start = Clock::now();
  try {
    SshSession::Connect(target, milliseconds(700));
    FAIL() << "connected to a silent server";
  } catch (const SshError& e) {
    EXPECT_EQ(e.failure(), SshFailure::kUnreachable) << e.what();
  }
  EXPECT_LT(Clock::now() - start, seconds(3));

  EXPECT_THROW(WaitForSsh(target, milliseconds(2500), nullptr), SshError);
  EXPECT_GE(server.accepted(), 2);  // one Connect, then at least two attempts
}

TEST(SshClientTest, ConnectionClosedBeforeKeyExchangeIsRetried) {
  TempDir dir;
  FakeServer server(FakeServer::Mode::kCloseAtOnce);
  const SshTarget target = testing::KeyedSshTarget(dir.path(), kFakeServerAddress, server.port());
  try {
    WaitForSsh(target, milliseconds(2500), nullptr);
    FAIL() << "connected to a server that closes";
  } catch (const SshError& e) {
    EXPECT_EQ(e.failure(), SshFailure::kUnreachable) << e.what();
  }
  EXPECT_GE(server.accepted(), 2);
}

// ---------------------------------------------------------------------------------------
// Against real OpenSSH servers in test VMs.

/// VM settings of these tests: \a public_key installed; ready once sshd answers (cloud-init
/// has installed the keys by then).
testvm::TestVmOptions VmOptions(const std::string& public_key) {
  testvm::TestVmOptions options;
  options.public_keys = {public_key};
  options.wait_for_cloud_init = false;
  return options;
}

/// Keys shared by the VM suites: `key` is installed in the VMs, `other_key` is not.
struct SuiteKeys {
  TempDir dir;
  std::string key_path;
  std::string public_key;
  std::string other_key_path;

  SuiteKeys() {
    key_path = (dir.path() / "keys" / "id_ed25519").string();
    public_key = EnsureEd25519Key(key_path);
    other_key_path = (dir.path() / "keys" / "not_installed").string();
    EnsureEd25519Key(other_key_path);
  }
};

class SshClientVmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    skip_reason_ = testvm::UnavailableReason();
    if (!skip_reason_.empty()) return;
    keys_ = std::make_unique<SuiteKeys>();
    try {
      vm_ = std::make_unique<testvm::TestVm>(kVmAddress, VmOptions(keys_->public_key));
    } catch (const std::exception& e) {
      setup_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    vm_.reset();
    keys_.reset();
  }
  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << "no test VM: " << skip_reason_;
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
  }

  /// A target for the shared VM with a known_hosts file of this test only (in a folder that
  /// does not exist yet).
  SshTarget Target(const std::string& user = "root") {
    SshTarget target;
    target.host = kVmAddress;
    target.port = 22;
    target.user = user;
    target.private_key_path = keys_->key_path;
    target.known_hosts_path = (dir_.path() / "home" / "known_hosts").string();
    return target;
  }

  /// The VM's ed25519 host key fingerprint, read inside the VM (not over SSH).
  std::string VmHostKeyFingerprint() {
    testvm::ShellResult pub = vm_->Exec("cat /etc/ssh/ssh_host_ed25519_key.pub");
    EXPECT_EQ(pub.exit_status, 0) << pub.output;
    return PublicKeyFingerprintSha256(pub.output);
  }

  static std::string skip_reason_;
  static std::string setup_error_;
  static std::unique_ptr<SuiteKeys> keys_;
  static std::unique_ptr<testvm::TestVm> vm_;
  TempDir dir_;
};

std::string SshClientVmTest::skip_reason_;
std::string SshClientVmTest::setup_error_;
std::unique_ptr<SuiteKeys> SshClientVmTest::keys_;
std::unique_ptr<testvm::TestVm> SshClientVmTest::vm_;

/// Runs OpenSSH's client the way `gpuprov ssh` will, with an isolated config.
testvm::ShellResult OpenSsh(const std::string& key, const std::string& known_hosts,
                            const std::string& user, const std::string& host) {
  return testvm::Shell("/usr/bin/ssh -F /dev/null -i " + ShellQuote(key) +
                       " -o UserKnownHostsFile=" + ShellQuote(known_hosts) +
                       " -o GlobalKnownHostsFile=/dev/null"
                       " -o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=10"
                       " -p 22 " +
                       user + "@" + host + " true");
}

TEST_F(SshClientVmTest, FirstConnectPinsHostKeyAndSecondConnectPasses) {
  const SshTarget target = Target();
  { SshSession session = SshSession::Connect(target, seconds(10)); }

  ASSERT_TRUE(fs::exists(target.known_hosts_path));
  EXPECT_EQ(ModeOf(target.known_hosts_path), 0600u);
  EXPECT_EQ(ModeOf(fs::path(target.known_hosts_path).parent_path()), 0700u);
  const std::string pinned = ReadFile(target.known_hosts_path);
  const std::vector<std::string> lines = NonEmptyLines(pinned);
  ASSERT_EQ(lines.size(), 1u) << pinned;
  // libssh writes the plain host for port 22 (OpenSSH's form too), `[host]:port` otherwise.
  EXPECT_EQ(lines[0].rfind("127.88.0.2 ssh-ed25519 AAAA", 0), 0u) << lines[0];
  std::istringstream fields(lines[0]);
  std::string host, type, base64;
  fields >> host >> type >> base64;
  EXPECT_EQ(PublicKeyFingerprintSha256(type + " " + base64), VmHostKeyFingerprint());

  SshSession again = SshSession::Connect(target, seconds(10));
  EXPECT_NE(again.native(), nullptr);
  EXPECT_EQ(ReadFile(target.known_hosts_path), pinned);
}

TEST_F(SshClientVmTest, OpenSshAcceptsTheKnownHostsFileLibsshWrote) {
  const SshTarget target = Target();
  // Without a pin, strict OpenSSH refuses: the check below is meaningful.
  fs::create_directories(fs::path(target.known_hosts_path).parent_path());
  WriteFile(target.known_hosts_path, "");
  testvm::ShellResult refused =
      OpenSsh(target.private_key_path, target.known_hosts_path, "root", kVmAddress);
  EXPECT_NE(refused.exit_status, 0) << refused.output;

  { SshSession session = SshSession::Connect(target, seconds(10)); }
  testvm::ShellResult accepted =
      OpenSsh(target.private_key_path, target.known_hosts_path, "root", kVmAddress);
  EXPECT_EQ(accepted.exit_status, 0) << accepted.output;
  accepted = OpenSsh(target.private_key_path, target.known_hosts_path, "ubuntu", kVmAddress);
  EXPECT_EQ(accepted.exit_status, 0) << accepted.output;
}

TEST_F(SshClientVmTest, RunReturnsExitStatusAndBothStreams) {
  SshSession session = SshSession::Connect(Target(), seconds(10));
  SshRunResult r = session.Run("sh -c 'echo out; echo err >&2; exit 3'");
  EXPECT_EQ(r.exit_status, 3);
  EXPECT_EQ(r.stdout_text, "out\n");
  EXPECT_EQ(r.stderr_text, "err\n");

  r = session.Run("true");
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_EQ(r.stdout_text, "");
  EXPECT_EQ(r.stderr_text, "");

  r = session.Run("kill -TERM $$");
  EXPECT_EQ(r.exit_status, 128 + 15);
}

TEST_F(SshClientVmTest, RunPassesStdin) {
  SshSession session = SshSession::Connect(Target(), seconds(10));
  SshRunResult r = session.Run("cat", "line one\nline two\n");
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_EQ(r.stdout_text, "line one\nline two\n");

  // Megabytes in and out at once on both streams: flow control never deadlocks.
  std::string big;
  for (int i = 0; big.size() < 3 * 1024 * 1024; ++i) big += "row " + std::to_string(i) + "\n";
  r = session.Run("tee /dev/stderr", big, seconds(60));
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_EQ(r.stdout_text.size(), big.size());
  EXPECT_TRUE(r.stdout_text == big);
  EXPECT_TRUE(r.stderr_text == big);

  // A command that does not read its stdin still finishes.
  r = session.Run("echo done", big);
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_EQ(r.stdout_text, "done\n");
}

TEST_F(SshClientVmTest, RunTimesOutAndTheSessionStaysUsable) {
  SshSession session = SshSession::Connect(Target(), seconds(10));
  const auto start = Clock::now();
  try {
    session.Run("sleep 30", {}, milliseconds(1500));
    FAIL() << "sleep 30 finished within 1.5s";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did not finish within 2s"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(Clock::now() - start, seconds(5));
  EXPECT_EQ(session.Run("echo still here").stdout_text, "still here\n");
}

TEST_F(SshClientVmTest, RunStreamingForwardsOutputToDescriptors) {
  SshSession session = SshSession::Connect(Target(), seconds(10));
  int out_pipe[2];
  int err_pipe[2];
  ASSERT_EQ(::pipe(out_pipe), 0);
  ASSERT_EQ(::pipe(err_pipe), 0);
  const int status = session.RunStreaming("sh -c 'echo one; echo warn >&2; echo two; exit 5'",
                                          out_pipe[1], err_pipe[1]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  const auto drain = [](int fd) {
    std::string text;
    char buf[256];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return text;
  };
  EXPECT_EQ(status, 5);
  EXPECT_EQ(drain(out_pipe[0]), "one\ntwo\n");
  EXPECT_EQ(drain(err_pipe[0]), "warn\n");
  EXPECT_EQ(session.RunStreaming("echo discarded", -1, -1), 0);
}

TEST_F(SshClientVmTest, UploadWritesTheFileWithItsModeAtomically) {
  SshSession session = SshSession::Connect(Target(), seconds(10));
  ASSERT_EQ(session.Run("mkdir -p '/root/gpuprov test'").exit_status, 0);
  std::string contents = "#!/bin/sh\necho 'quoted' \"double\" $HOME\n";
  contents += std::string("\0binary\xff\n", 9);
  const std::string path = "/root/gpuprov test/installer.sh";
  session.Upload(path, contents, 0750);

  SshRunResult r = session.Run("stat -c '%a %U' " + ShellQuote(path) + "; ls -A " +
                               ShellQuote("/root/gpuprov test"));
  EXPECT_EQ(r.stdout_text, "750 root\ninstaller.sh\n");  // no temporary file left
  EXPECT_TRUE(session.Run("cat " + ShellQuote(path)).stdout_text == contents);

  // Replacing keeps readers safe: the new file is a new inode renamed over the old one.
  const std::string inode_before = session.Run("stat -c %i " + ShellQuote(path)).stdout_text;
  session.Upload(path, "second\n", 0600);
  r = session.Run("stat -c '%a' " + ShellQuote(path) + "; cat " + ShellQuote(path));
  EXPECT_EQ(r.stdout_text, "600\nsecond\n");
  EXPECT_NE(session.Run("stat -c %i " + ShellQuote(path)).stdout_text, inode_before);
}

TEST_F(SshClientVmTest, UploadIntoAMissingOrForbiddenDirectoryFailsClearly) {
  SshSession session = SshSession::Connect(Target("ubuntu"), seconds(10));
  try {
    session.Upload("/no/such/dir/file", "x", 0644);
    FAIL() << "upload into a missing directory succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/dir/file"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("'/no/such/dir'"), std::string::npos) << e.hint();
  }
  EXPECT_THROW(session.Upload("/etc/gpuprov-forbidden", "x", 0644), Error);
  session.Upload("notes.txt", "relative to the home\n", 0644);
  EXPECT_EQ(session.Run("cat ~/notes.txt").stdout_text, "relative to the home\n");
}

TEST_F(SshClientVmTest, UbuntuUserLogsInWithPasswordlessSudo) {
  SshSession session = SshSession::Connect(Target("ubuntu"), seconds(10));
  SshRunResult r = session.Run("id -un; sudo -n id -un");
  EXPECT_EQ(r.exit_status, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "ubuntu\nroot\n");
}

TEST_F(SshClientVmTest, SessionsMove) {
  SshSession first = SshSession::Connect(Target(), seconds(10));
  ssh_session native = first.native();
  SshSession second = std::move(first);
  EXPECT_EQ(second.native(), native);
  EXPECT_EQ(second.Run("echo moved").stdout_text, "moved\n");
  SshSession third = SshSession::Connect(Target(), seconds(10));
  third = std::move(second);
  EXPECT_EQ(third.native(), native);
  EXPECT_EQ(third.Run("echo again").stdout_text, "again\n");
}

TEST_F(SshClientVmTest, WrongKeyIsAnAuthErrorAndNotRetried) {
  SshTarget target = Target();
  target.private_key_path = keys_->other_key_path;
  int progress_calls = 0;
  const auto start = Clock::now();
  try {
    WaitForSsh(target, seconds(60), [&](seconds) { ++progress_calls; });
    FAIL() << "a key the VM does not have was accepted";
  } catch (const SshError& e) {
    EXPECT_EQ(e.failure(), SshFailure::kAuthRejected);
    EXPECT_EQ(std::string(e.what()),
              "SSH to root@127.88.0.2:22 refused the key '" + target.private_key_path + "'");
    EXPECT_NE(e.hint().find(target.private_key_path + ".pub"), std::string::npos) << e.hint();
  }
  EXPECT_LT(Clock::now() - start, seconds(5));
  EXPECT_EQ(progress_calls, 0);
}

TEST_F(SshClientVmTest, PinnedKeyOfAnotherHostKeyIsRefusedAndNotRetried) {
  SshTarget target = Target();
  const std::string forged = EnsureEd25519Key((dir_.path() / "forged").string());
  std::istringstream fields(forged);
  std::string type, base64;
  fields >> type >> base64;
  fs::create_directories(fs::path(target.known_hosts_path).parent_path());
  WriteFile(target.known_hosts_path, "127.88.0.2 " + type + " " + base64 + "\n");
  const std::string before = ReadFile(target.known_hosts_path);

  const auto start = Clock::now();
  try {
    WaitForSsh(target, seconds(60), nullptr);
    FAIL() << "a host key other than the pinned one was accepted";
  } catch (const SshError& e) {
    EXPECT_EQ(e.failure(), SshFailure::kHostKeyChanged);
    const std::string expected = "host key for [127.88.0.2]:22 changed (was " +
                                 PublicKeyFingerprintSha256(forged) + ", now " +
                                 VmHostKeyFingerprint() + ")";
    EXPECT_EQ(std::string(e.what()).rfind(expected, 0), 0u) << e.what();
    EXPECT_NE(e.hint().find("attack"), std::string::npos) << e.hint();
    EXPECT_NE(e.hint().find("gpuprov down"), std::string::npos) << e.hint();
    EXPECT_NE(e.hint().find(target.known_hosts_path), std::string::npos) << e.hint();
  }
  EXPECT_LT(Clock::now() - start, seconds(5));
  EXPECT_EQ(ReadFile(target.known_hosts_path), before);
}

TEST_F(SshClientVmTest, UnreadablePinForTheHostIsNotBypassed) {
  // libssh reports a host as unknown when a line for it cannot be parsed; gpuprov must not
  // pin a second key next to it.
  SshTarget target = Target();
  fs::create_directories(fs::path(target.known_hosts_path).parent_path());
  WriteFile(target.known_hosts_path, "127.88.0.2 ssh-ed25519 AAAAbroken\n");
  try {
    SshSession::Connect(target, seconds(10));
    FAIL() << "connected past an unreadable pin";
  } catch (const SshError& e) {
    EXPECT_EQ(e.failure(), SshFailure::kHostKeyChanged) << e.what();
  }
  EXPECT_EQ(ReadFile(target.known_hosts_path), "127.88.0.2 ssh-ed25519 AAAAbroken\n");
}

TEST_F(SshClientVmTest, PinsOfOtherHostsDoNotMatter) {
  SshTarget target = Target();
  fs::create_directories(fs::path(target.known_hosts_path).parent_path());
  const std::string other = EnsureEd25519Key((dir_.path() / "other_host").string());
  const std::string line = "[127.88.0.2]:2222 " + other.substr(0, other.rfind(' ')) + "\n";
  WriteFile(target.known_hosts_path, line);
  { SshSession session = SshSession::Connect(target, seconds(10)); }
  const std::vector<std::string> lines = NonEmptyLines(ReadFile(target.known_hosts_path));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0] + "\n", line);
}

TEST_F(SshClientVmTest, WaitForSshConnectsOnceSshdComesBack) {
  const SshTarget target = Target();
  { SshSession pin = SshSession::Connect(target, seconds(10)); }
  ASSERT_EQ(vm_->Exec("systemctl stop ssh.socket ssh.service").exit_status, 0);
  std::thread restart([&] {
    std::this_thread::sleep_for(seconds(4));
    vm_->Exec("systemctl start ssh.service");
  });
  std::vector<seconds> calls;
  const auto start = Clock::now();
  try {
    SshSession session =
        WaitForSsh(target, seconds(60), [&](seconds elapsed) { calls.push_back(elapsed); });
    EXPECT_EQ(session.Run("echo up").stdout_text, "up\n");
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  restart.join();
  EXPECT_GE(Clock::now() - start, seconds(4));
  EXPECT_LT(Clock::now() - start, seconds(20));
  EXPECT_GE(calls.size(), 1u);
}

/// A VM of its own, recreated by the test (new host key on the same address).
class SshClientRecreateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = testvm::UnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << "no test VM: " << reason;
  }
  TempDir dir_;
};

TEST_F(SshClientRecreateTest, RecreatedVmIsRefusedUntilItsKeyIsForgotten) {
  SuiteKeys keys;
  testvm::TestVm vm(kRecreateAddress, VmOptions(keys.public_key));
  SshTarget target;
  target.host = kRecreateAddress;
  target.user = "root";
  target.private_key_path = keys.key_path;
  target.known_hosts_path = (dir_.path() / "known_hosts").string();

  { SshSession first = WaitForSsh(target, seconds(30), nullptr); }
  const std::string first_pin = ReadFile(target.known_hosts_path);
  const std::string old_fingerprint =
      PublicKeyFingerprintSha256(vm.Exec("cat /etc/ssh/ssh_host_ed25519_key.pub").output);

  vm.Recreate();
  const std::string new_fingerprint =
      PublicKeyFingerprintSha256(vm.Exec("cat /etc/ssh/ssh_host_ed25519_key.pub").output);
  ASSERT_NE(new_fingerprint, old_fingerprint);

  const auto start = Clock::now();
  try {
    WaitForSsh(target, seconds(60), nullptr);
    FAIL() << "the recreated VM's new host key was accepted";
  } catch (const SshError& e) {
    EXPECT_EQ(e.failure(), SshFailure::kHostKeyChanged);
    EXPECT_EQ(std::string(e.what()).rfind("host key for [127.88.0.3]:22 changed (was " +
                                              old_fingerprint + ", now " + new_fingerprint + ")",
                                          0),
              0u)
        << e.what();
  }
  EXPECT_LT(Clock::now() - start, seconds(5));
  EXPECT_EQ(ReadFile(target.known_hosts_path), first_pin);
  // OpenSSH refuses the changed host too.
  EXPECT_NE(OpenSsh(target.private_key_path, target.known_hosts_path, "root", kRecreateAddress)
                .exit_status,
            0);

  ForgetHostKey(target.known_hosts_path, kRecreateAddress, 22);
  EXPECT_TRUE(NonEmptyLines(ReadFile(target.known_hosts_path)).empty());
  { SshSession repinned = SshSession::Connect(target, seconds(10)); }
  const std::vector<std::string> lines = NonEmptyLines(ReadFile(target.known_hosts_path));
  ASSERT_EQ(lines.size(), 1u);
  std::istringstream fields(lines[0]);
  std::string host, type, base64;
  fields >> host >> type >> base64;
  EXPECT_EQ(host, kRecreateAddress);
  EXPECT_EQ(PublicKeyFingerprintSha256(type + " " + base64), new_fingerprint);
  EXPECT_EQ(ModeOf(target.known_hosts_path), 0600u);
  testvm::ShellResult ssh =
      OpenSsh(target.private_key_path, target.known_hosts_path, "root", kRecreateAddress);
  EXPECT_EQ(ssh.exit_status, 0) << ssh.output;
}

}  // namespace
}  // namespace gpuprov
