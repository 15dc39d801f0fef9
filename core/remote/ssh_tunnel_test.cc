#include "ssh_tunnel.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "error.h"
#include "ssh_keys.h"
#include "test_support.h"
#include "testvm_fixture_test_util.h"

namespace gpuprov {
namespace {

using TempDir = gpuprov::testing::ScopedTempDir;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Loopback addresses of these tests (127.89.0.x is this file's range).
constexpr char kVmAddress[] = "127.89.0.2";       // the VM of SshPortForwardVmTest
constexpr char kNothingListens[] = "127.89.0.9";  // no container, no listener
/// The echo server the suite starts inside the VM.
constexpr int kEchoPort = 7777;

/// Connects to 127.0.0.1:port; -1 on failure.
int ConnectLocal(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

/// What a read loop saw: the bytes, and whether the connection ended (EOF or reset) before
/// the deadline.
struct ReadResult {
  std::string data;
  bool ended = false;
};

/// Reads until \a want bytes arrived (0: until the connection ends) or \a timeout passed.
ReadResult ReadFor(int fd, size_t want, milliseconds timeout) {
  ReadResult result;
  const auto end = Clock::now() + timeout;
  while (want == 0 || result.data.size() < want) {
    const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now());
    if (left.count() <= 0) break;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[65536];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      result.ended = true;
      break;
    }
    result.data.append(buf, static_cast<size_t>(n));
  }
  return result;
}

std::string RandomBytes(size_t size, unsigned seed) {
  std::mt19937 random(seed);
  std::string out(size, '\0');
  for (char& c : out) c = static_cast<char>(random() & 0xff);
  return out;
}

/// Records the forward's events (they arrive on the pump thread).
class EventLog {
 public:
  SshPortForward::EventCallback Callback() {
    return [this](const PortForwardEvent& event) {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(event);
    };
  }
  std::vector<PortForwardEvent> Of(PortForwardEvent::Kind kind) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<PortForwardEvent> out;
    for (const auto& e : events_) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<PortForwardEvent> events_;
};

// ---------------------------------------------------------------------------------------
// Without a VM.

TEST(SshPortForwardTest, TakenPortIsAClearErrorWithHowToFindTheHolder) {
  TempDir dir;
  int holder = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(::listen(holder, 4), 0);
  socklen_t len = sizeof(sa);
  ::getsockname(holder, reinterpret_cast<sockaddr*>(&sa), &len);
  const int port = ntohs(sa.sin_port);

  PortForwardOptions options;
  options.listen_port = port;
  options.remote_port = 6443;
  try {
    SshPortForward forward(testing::KeyedSshTarget(dir.path(), kNothingListens), options);
    FAIL() << "bound a port that another socket listens on";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "127.0.0.1:" + std::to_string(port) + " is already in use");
    EXPECT_NE(e.hint().find("ss -ltnp 'sport = :" + std::to_string(port) + "'"), std::string::npos)
        << e.hint();
    EXPECT_NE(e.hint().find("--local-port"), std::string::npos) << e.hint();
  }
  ::close(holder);
}

TEST(SshPortForwardTest, PortZeroBindsAFreePortAndFreesItAtDestruction) {
  TempDir dir;
  PortForwardOptions options;
  options.remote_port = 6443;
  int port = 0;
  {
    SshPortForward forward(testing::KeyedSshTarget(dir.path(), kNothingListens), options);
    port = forward.port();
    ASSERT_GT(port, 0);
    EXPECT_EQ(forward.local_address(), "127.0.0.1:" + std::to_string(port));
    // The listener takes connections into its backlog before any SSH session exists.
    const int fd = ConnectLocal(port);
    EXPECT_GE(fd, 0);
    if (fd >= 0) ::close(fd);
  }
  options.listen_port = port;
  EXPECT_NO_THROW(SshPortForward(testing::KeyedSshTarget(dir.path(), kNothingListens), options));
}

TEST(SshPortForwardTest, InvalidOptionsAreRefused) {
  TempDir dir;
  PortForwardOptions options;
  options.remote_port = 0;
  EXPECT_THROW(SshPortForward(testing::KeyedSshTarget(dir.path(), kNothingListens), options), Error);
  options.remote_port = 6443;
  options.listen_host = "localhost";  // not numeric
  EXPECT_THROW(SshPortForward(testing::KeyedSshTarget(dir.path(), kNothingListens), options), Error);
  options.listen_host = "127.0.0.1";
  options.listen_port = 70000;
  EXPECT_THROW(SshPortForward(testing::KeyedSshTarget(dir.path(), kNothingListens), options), Error);
}

TEST(SshPortForwardTest, StartThrowsWhenTheVmStaysUnreachableAndReportsProgress) {
  TempDir dir;
  EventLog log;
  PortForwardOptions options;
  options.remote_port = 6443;
  options.connect_deadline = milliseconds(1500);
  SshPortForward forward(testing::KeyedSshTarget(dir.path(), kNothingListens), options, log.Callback());
  const auto start = Clock::now();
  try {
    forward.Start();
    FAIL() << "connected to " << kNothingListens;
  } catch (const SshError& e) {
    EXPECT_EQ(e.failure(), SshFailure::kUnreachable);
    EXPECT_NE(std::string(e.what()).find("[127.89.0.9]:22 did not become reachable within 2s"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(Clock::now() - start, seconds(4));
  ASSERT_FALSE(log.Of(PortForwardEvent::Kind::kConnecting).empty());
  EXPECT_NE(log.Of(PortForwardEvent::Kind::kConnecting)[0].message.find("refused"),
            std::string::npos);
  EXPECT_TRUE(log.Of(PortForwardEvent::Kind::kConnected).empty());
}

TEST(SshPortForwardTest, RunReturnsWhenToldToStopWhileConnecting) {
  TempDir dir;
  PortForwardOptions options;
  options.remote_port = 6443;
  options.connect_deadline = seconds(60);
  SshPortForward forward(testing::KeyedSshTarget(dir.path(), kNothingListens), options);
  const auto start = Clock::now();
  forward.Run([&] { return Clock::now() - start > milliseconds(500); });
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(500));
  EXPECT_LT(elapsed, milliseconds(2000));
}

// ---------------------------------------------------------------------------------------
// Against a test VM (sshd and a python3 echo server inside it).

const char kEchoServer[] = R"(import socket, threading
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", 7777))
server.listen(16)
def serve(conn):
    with conn:
        while True:
            data = conn.recv(65536)
            if not data:
                return
            conn.sendall(data)
while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
)";

/// What the echo server sends back for \a text through the forward on \a port, trying new
/// connections for up to 30 s (while the forward reconnects); "" when none was served.
std::string EchoOnceServed(int port, const std::string& text) {
  std::string echoed;
  const auto end = Clock::now() + seconds(30);
  while (echoed != text && Clock::now() < end) {
    const int fd = ConnectLocal(port);
    EXPECT_GE(fd, 0) << "the listening socket was closed";
    if (fd < 0) return "";
    if (SendAll(fd, text)) echoed = ReadFor(fd, text.size(), seconds(5)).data;
    ::close(fd);
  }
  return echoed;
}

class SshPortForwardVmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    skip_reason_ = testvm::UnavailableReason();
    if (!skip_reason_.empty()) return;
    keys_ = std::make_unique<TempDir>();
    key_path_ = (keys_->path() / "id_ed25519").string();
    const std::string public_key = EnsureEd25519Key(key_path_);
    testvm::TestVmOptions options;
    options.public_keys = {public_key};
    options.wait_for_cloud_init = false;
    try {
      vm_ = std::make_unique<testvm::TestVm>(kVmAddress, options);
      testvm::ShellResult started =
          vm_->Exec("printf '%s' " + testvm::Quote(kEchoServer) +
                    " > /root/echo.py && systemd-run --unit=gpuprov-echo python3 /root/echo.py");
      if (started.exit_status != 0) {
        setup_error_ = "cannot start the echo server: " + started.output;
        return;
      }
      const auto end = Clock::now() + seconds(20);
      while (vm_->Exec("ss -ltn 'sport = :7777' | grep -q LISTEN").exit_status != 0) {
        if (Clock::now() > end) {
          setup_error_ = "the echo server did not listen within 20s: " +
                         vm_->Exec("systemctl status gpuprov-echo").output;
          return;
        }
        std::this_thread::sleep_for(milliseconds(200));
      }
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

  SshTarget Target() const {
    SshTarget target;
    target.host = kVmAddress;
    target.port = 22;
    target.user = "root";
    target.private_key_path = key_path_;
    target.known_hosts_path = (dir_.path() / "known_hosts").string();
    return target;
  }

  static PortForwardOptions To(int remote_port) {
    PortForwardOptions options;
    options.remote_port = remote_port;
    options.reconnect_deadline = seconds(30);
    return options;
  }

  static std::string skip_reason_;
  static std::string setup_error_;
  static std::unique_ptr<TempDir> keys_;
  static std::string key_path_;
  static std::unique_ptr<testvm::TestVm> vm_;
  TempDir dir_;
};

std::string SshPortForwardVmTest::skip_reason_;
std::string SshPortForwardVmTest::setup_error_;
std::unique_ptr<TempDir> SshPortForwardVmTest::keys_;
std::string SshPortForwardVmTest::key_path_;
std::unique_ptr<testvm::TestVm> SshPortForwardVmTest::vm_;

TEST_F(SshPortForwardVmTest, ReadsTheNodesSshBannerThroughTheForward) {
  EventLog log;
  SshPortForward forward(Target(), To(22), log.Callback());
  forward.Start();
  EXPECT_EQ(log.Of(PortForwardEvent::Kind::kConnected).size(), 1u);
  const int fd = ConnectLocal(forward.port());
  ASSERT_GE(fd, 0);
  const ReadResult banner = ReadFor(fd, 8, seconds(10));
  ::close(fd);
  EXPECT_EQ(banner.data.rfind("SSH-2.0-", 0), 0u) << banner.data;
  EXPECT_EQ(forward.failure(), nullptr);
}

TEST_F(SshPortForwardVmTest, ThreeConcurrentConnectionsKeepTheirOwnBytes) {
  SshPortForward forward(Target(), To(kEchoPort));
  forward.Start();
  constexpr int kCount = 3;
  int fds[kCount];
  std::string payloads[kCount];
  for (int i = 0; i < kCount; ++i) {
    fds[i] = ConnectLocal(forward.port());
    ASSERT_GE(fds[i], 0);
    payloads[i] = RandomBytes(200 * 1024, 100 + i);
  }
  // Interleaved: every connection is open and in flight at once.
  for (int part = 0; part < 4; ++part) {
    for (int i = 0; i < kCount; ++i) {
      const size_t quarter = payloads[i].size() / 4;
      ASSERT_TRUE(SendAll(fds[i], payloads[i].substr(part * quarter, quarter)));
    }
  }
  for (int i = 0; i < kCount; ++i) {
    const ReadResult echoed = ReadFor(fds[i], payloads[i].size(), seconds(20));
    EXPECT_EQ(echoed.data.size(), payloads[i].size()) << "connection " << i;
    EXPECT_TRUE(echoed.data == payloads[i]) << "connection " << i << " got other bytes";
    ::close(fds[i]);
  }
}

TEST_F(SshPortForwardVmTest, LargeTransferBothWaysArrivesIntactAndEndsWithTheStream) {
  SshPortForward forward(Target(), To(kEchoPort));
  forward.Start();
  const std::string payload = RandomBytes(16 * 1024 * 1024, 7);
  const int fd = ConnectLocal(forward.port());
  ASSERT_GE(fd, 0);
  const auto start = Clock::now();
  std::atomic<bool> sent{false};
  std::thread writer([&] {
    sent = SendAll(fd, payload);
    ::shutdown(fd, SHUT_WR);  // the echo server then closes, which must reach us as EOF
  });
  const ReadResult echoed = ReadFor(fd, 0, seconds(60));
  writer.join();
  ::close(fd);
  EXPECT_TRUE(sent);
  EXPECT_TRUE(echoed.ended) << "the connection did not end after the echo server closed";
  ASSERT_EQ(echoed.data.size(), payload.size());
  EXPECT_TRUE(echoed.data == payload) << "the echoed bytes differ";
  EXPECT_LT(Clock::now() - start, seconds(30));
}

TEST_F(SshPortForwardVmTest, ARefusedDestinationEndsOnlyThatConnection) {
  EventLog log;
  SshPortForward forward(Target(), To(1), log.Callback());  // nothing listens on the VM's port 1
  forward.Start();
  const int fd = ConnectLocal(forward.port());
  ASSERT_GE(fd, 0);
  const ReadResult result = ReadFor(fd, 0, seconds(10));
  ::close(fd);
  EXPECT_TRUE(result.ended);
  EXPECT_TRUE(result.data.empty());
  const auto failed = log.Of(PortForwardEvent::Kind::kChannelFailed);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_NE(failed[0].message.find("127.0.0.1:1"), std::string::npos) << failed[0].message;
  EXPECT_EQ(forward.failure(), nullptr);
  EXPECT_TRUE(log.Of(PortForwardEvent::Kind::kDropped).empty());
}

TEST_F(SshPortForwardVmTest, ReconnectsAfterTheSshConnectionDrops) {
  EventLog log;
  SshPortForward forward(Target(), To(kEchoPort), log.Callback());
  forward.Start();
  const int in_flight = ConnectLocal(forward.port());
  ASSERT_GE(in_flight, 0);
  ASSERT_TRUE(SendAll(in_flight, "before"));
  ASSERT_EQ(ReadFor(in_flight, 6, seconds(10)).data, "before");

  // Kills the sshd processes of the forward's session ("sshd: root [priv]" and its child), not
  // the listening sshd. The bracket keeps the pattern from matching the `sh -c` running it.
  testvm::ShellResult killed = vm_->Exec("pkill -f 'sshd: roo[t]'");
  ASSERT_EQ(killed.exit_status, 0) << killed.output;

  const ReadResult closed = ReadFor(in_flight, 0, seconds(15));
  ::close(in_flight);
  EXPECT_TRUE(closed.ended) << "the in-flight connection stayed open after the drop";

  // A later connection works again once the forward has reconnected.
  EXPECT_EQ(EchoOnceServed(forward.port(), "after"), "after");
  const auto dropped = log.Of(PortForwardEvent::Kind::kDropped);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].open_connections, 1);
  EXPECT_FALSE(dropped[0].message.empty());
  EXPECT_EQ(log.Of(PortForwardEvent::Kind::kReconnected).size(), 1u);
  EXPECT_EQ(forward.failure(), nullptr);
}

// A VM replaced while the forward runs: after the drop, options.follow names the new address
// (here the same node on its container address, as a new VM at another address), the forward
// says so (kFollowed), pins that address's key on first contact and serves through it.
TEST_F(SshPortForwardVmTest, FollowsTheTargetFollowNamesAfterADrop) {
  testvm::ShellResult ip = vm_->Exec("hostname -I | cut -d' ' -f1");
  ASSERT_EQ(ip.exit_status, 0) << ip.output;
  std::string new_host = ip.output;
  while (!new_host.empty() && std::isspace(static_cast<unsigned char>(new_host.back()))) {
    new_host.pop_back();
  }
  ASSERT_FALSE(new_host.empty());
  SshTarget replaced = Target();
  replaced.host = new_host;
  std::atomic<bool> was_replaced{false};
  std::atomic<int> asked{0};
  EventLog log;
  PortForwardOptions options = To(kEchoPort);
  options.follow = [&]() -> std::optional<SshTarget> {
    ++asked;
    return was_replaced ? std::optional<SshTarget>(replaced) : std::nullopt;
  };
  SshPortForward forward(Target(), options, log.Callback());
  forward.Start();
  EXPECT_EQ(asked, 0);  // only after a drop

  was_replaced = true;
  testvm::ShellResult killed = vm_->Exec("pkill -f 'sshd: roo[t]'");
  ASSERT_EQ(killed.exit_status, 0) << killed.output;
  EXPECT_EQ(EchoOnceServed(forward.port(), "after"), "after");
  const auto followed = log.Of(PortForwardEvent::Kind::kFollowed);
  ASSERT_EQ(followed.size(), 1u);
  EXPECT_EQ(followed[0].message, "root@[" + new_host + "]:22");
  EXPECT_EQ(log.Of(PortForwardEvent::Kind::kReconnected).size(), 1u);
  EXPECT_GE(asked, 1);
  EXPECT_EQ(forward.failure(), nullptr);
}

/// Stops the VM's sshd (listener and sessions) for one test; starts it again at scope exit.
class SshdDown {
 public:
  explicit SshdDown(testvm::TestVm& vm) : vm_(vm) {
    result_ = vm_.Exec("systemctl stop ssh.service && pkill -f 'sshd: roo[t]'");
  }
  ~SshdDown() {
    vm_.Exec("systemctl start ssh.service");
    const auto end = Clock::now() + seconds(20);
    while (!testvm::SshBannerAnswers(vm_.address(), 22, seconds(1)) && Clock::now() < end) {
      std::this_thread::sleep_for(milliseconds(100));
    }
  }
  const testvm::ShellResult& result() const { return result_; }

 private:
  testvm::TestVm& vm_;
  testvm::ShellResult result_;
};

/// Waits until \a log has an event of \a kind.
bool WaitForEvent(const EventLog& log, PortForwardEvent::Kind kind, milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (log.Of(kind).empty()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return true;
}

TEST_F(SshPortForwardVmTest, GivesUpWhenSshDoesNotComeBackAndRefusesLocalConnections) {
  EventLog log;
  PortForwardOptions options = To(kEchoPort);
  options.reconnect_deadline = milliseconds(2000);
  SshPortForward forward(Target(), options, log.Callback());
  forward.Start();
  SshdDown down(*vm_);
  ASSERT_EQ(down.result().exit_status, 0) << down.result().output;

  const auto end = Clock::now() + seconds(15);
  while (forward.failure() == nullptr && Clock::now() < end) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_NE(forward.failure(), nullptr) << "the forward did not give up";
  try {
    std::rethrow_exception(forward.failure());
  } catch (const SshError& e) {
    EXPECT_EQ(e.failure(), SshFailure::kUnreachable);
    EXPECT_NE(std::string(e.what()).find("did not come back within 2s"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(log.Of(PortForwardEvent::Kind::kDropped).size(), 1u);
  EXPECT_TRUE(log.Of(PortForwardEvent::Kind::kReconnected).empty());
  EXPECT_EQ(ConnectLocal(forward.port()), -1) << "the listening socket is still open";
}

TEST_F(SshPortForwardVmTest, StopEndsAReconnectInProgress) {
  EventLog log;
  PortForwardOptions options = To(kEchoPort);
  options.reconnect_deadline = seconds(60);
  SshPortForward forward(Target(), options, log.Callback());
  forward.Start();
  SshdDown down(*vm_);
  ASSERT_EQ(down.result().exit_status, 0) << down.result().output;
  ASSERT_TRUE(WaitForEvent(log, PortForwardEvent::Kind::kDropped, seconds(10)));
  std::this_thread::sleep_for(milliseconds(1500));  // inside the retry loop
  const auto start = Clock::now();
  forward.Stop();
  EXPECT_LT(Clock::now() - start, seconds(2));
  EXPECT_EQ(forward.failure(), nullptr);
  EXPECT_TRUE(log.Of(PortForwardEvent::Kind::kReconnected).empty());
}

TEST_F(SshPortForwardVmTest, StopClosesOpenConnectionsAndReturnsPromptly) {
  SshPortForward forward(Target(), To(kEchoPort));
  forward.Start();
  const int fd = ConnectLocal(forward.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "ping"));
  ASSERT_EQ(ReadFor(fd, 4, seconds(10)).data, "ping");
  const auto start = Clock::now();
  forward.Stop();
  EXPECT_LT(Clock::now() - start, seconds(2));
  EXPECT_TRUE(ReadFor(fd, 0, seconds(5)).ended);
  ::close(fd);
  EXPECT_EQ(forward.failure(), nullptr);
}

TEST_F(SshPortForwardVmTest, RunServesUntilTheStopPredicateSaysSo) {
  SshPortForward forward(Target(), To(kEchoPort));
  std::atomic<bool> stop{false};
  std::string echoed;
  std::thread client([&] {
    const auto end = Clock::now() + seconds(20);
    while (echoed != "run" && Clock::now() < end) {
      const int fd = ConnectLocal(forward.port());
      if (fd >= 0 && SendAll(fd, "run")) echoed = ReadFor(fd, 3, seconds(5)).data;
      if (fd >= 0) ::close(fd);
    }
    stop = true;
  });
  forward.Run([&] { return stop.load(); });
  client.join();
  EXPECT_EQ(echoed, "run");
}

}  // namespace
}  // namespace gpuprov
