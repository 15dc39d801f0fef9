// Test-only helper: runs gpuprov's test VM (tests/fixtures/testvm: Debian with systemd,
// OpenSSH and cloud-init) as a Docker container whose SSH port is published on one loopback
// address, so a test reaches "a VM at 127.A.B.C:22" as it would reach a cloud VM.
//
//   class MySuite : public ::testing::Test {
//    protected:
//     static void SetUpTestSuite() {
//       skip_reason_ = testvm::UnavailableReason();
//       if (skip_reason_.empty()) vm_ = std::make_unique<testvm::TestVm>("127.88.0.2", keys);
//     }
//     static void TearDownTestSuite() { vm_.reset(); }
//     void SetUp() override { if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_; }
//   };
//
// Tests are skipped (not failed) when Docker does not answer or the image cannot be built.
// The image comes from tests/fixtures/testvm/build-image.sh (cached by recipe hash; a build,
// after any change to that folder, takes 2-4 minutes and happens inside the first test that
// needs a VM), or from $GPUPROV_TESTVM_IMAGE when set. A VM is ready 10-25 s after start.
// One address is used by one TestVm at a time, across processes too (ctest runs tests in
// parallel processes): the constructor waits for a lock file per address. A container left by
// a crashed run is removed when the next TestVm on that address starts.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifndef GPUPROV_SOURCE_DIR
#error "testvm_fixture_test_util.h is for gpuprov_test, which defines GPUPROV_SOURCE_DIR"
#endif

namespace gpuprov::testvm {

struct ShellResult {
  int exit_status;     // -1 when the command could not run or was killed
  std::string output;  // stdout, then stderr when merge_stderr
};

/// Runs \a command with /bin/sh.
inline ShellResult Shell(const std::string& command, bool merge_stderr = true) {
  ShellResult result{-1, ""};
  FILE* pipe = ::popen((merge_stderr ? "(" + command + ") 2>&1" : command).c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  const int status = ::pclose(pipe);
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

/// Single-quotes \a text for /bin/sh.
inline std::string Quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline std::string LastLines(const std::string& text, size_t count) {
  size_t pos = text.size();
  while (pos > 0 && count > 0) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
    --count;
  }
  return text.substr(pos + 1);
}

/// Image tag, built on first use in this process; empty with *why_not set when unavailable.
inline std::string ImageTag(std::string* why_not) {
  static const std::pair<std::string, std::string> kTagOrError = [] {
    if (const char* forced = std::getenv("GPUPROV_TESTVM_IMAGE"); forced && *forced) {
      ShellResult inspect = Shell("docker image inspect " + Quote(forced) + " >/dev/null");
      if (inspect.exit_status != 0) {
        return std::make_pair(std::string(), "GPUPROV_TESTVM_IMAGE=" + std::string(forced) +
                                                 " is not a local image: " + inspect.output);
      }
      return std::make_pair(std::string(forced), std::string());
    }
    const std::string script =
        std::string(GPUPROV_SOURCE_DIR) + "/tests/fixtures/testvm/build-image.sh";
    if (!std::filesystem::exists(script)) {
      return std::make_pair(std::string(), "the test VM recipe " + script + " is missing");
    }
    const std::string log = (std::filesystem::temp_directory_path() /
                             ("gpuprov-testvm-build-" + std::to_string(::getpid()) + ".log"))
                                .string();
    ShellResult built = Shell("bash " + Quote(script) + " 2>" + Quote(log), false);
    std::string tag = built.output;
    while (!tag.empty() && (tag.back() == '\n' || tag.back() == ' ')) tag.pop_back();
    if (const size_t nl = tag.rfind('\n'); nl != std::string::npos) tag = tag.substr(nl + 1);
    std::string build_log;
    {
      std::ifstream in(log);
      build_log.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    std::filesystem::remove(log);
    if (built.exit_status != 0 || tag.empty()) {
      return std::make_pair(std::string(), "the test VM image could not be built (" + script +
                                               "): " + LastLines(build_log, 5));
    }
    return std::make_pair(tag, std::string());
  }();
  if (why_not != nullptr) *why_not = kTagOrError.second;
  return kTagOrError.first;
}

/// Empty when test VMs can run here; otherwise the reason, for GTEST_SKIP.
inline std::string UnavailableReason() {
  static const std::string kReason = [] {
    ShellResult info = Shell("docker info --format '{{.ServerVersion}}'");
    if (info.exit_status != 0) {
      return "docker does not answer (start dockerd, see docs/design.md §7): " +
             LastLines(info.output, 2);
    }
    std::string why_not;
    ImageTag(&why_not);
    return why_not;
  }();
  return kReason;
}

/// Reads the SSH banner at address:port; true when it starts with "SSH-".
inline bool SshBannerAnswers(const std::string& address, int port,
                             std::chrono::milliseconds timeout) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::inet_pton(AF_INET, address.c_str(), &sa.sin_addr) == 1 &&
            ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
  std::string banner;
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (ok && banner.size() < 4) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    pollfd pfd{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[64];
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    banner.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return banner.rfind("SSH-", 0) == 0;
}

struct TestVmOptions {
  /// Public key lines put in the NoCloud meta-data; cloud-init installs them for root and
  /// ubuntu.
  std::vector<std::string> public_keys;
  /// NoCloud user-data (e.g. a #!/bin/bash script); "#cloud-config" when empty.
  std::string user_data;
  /// More ports to publish on the address besides 22 (e.g. 6443).
  std::vector<int> extra_ports;
  /// Wait until cloud-init has finished (user-data scripts included). When false, the
  /// constructor returns as soon as sshd answers: the image starts ssh.service after
  /// cloud-init.service, which has installed the public keys by then.
  bool wait_for_cloud_init = true;
  /// Bound of docker start until the VM is ready.
  std::chrono::seconds boot_timeout{180};
};

/// One running test VM. The constructor returns when sshd answers on address:22 and (unless
/// told otherwise) cloud-init has finished; the destructor removes the container (also on test
/// failure). Throws std::runtime_error, with the container's log, when the VM does not come up.
class TestVm {
 public:
  TestVm(std::string address, TestVmOptions options)
      : address_(std::move(address)), options_(std::move(options)) {
    name_ = "gpuprov-test-" + address_;
    for (char& c : name_) c = c == '.' ? '-' : c;
    const std::string lock_path =
        (std::filesystem::temp_directory_path() / ("gpuprov-testvm-" + address_ + ".lock"))
            .string();
    lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_fd_ < 0 || ::flock(lock_fd_, LOCK_EX) != 0) {
      throw std::runtime_error("cannot lock " + lock_path);
    }
    try {
      Start();
    } catch (...) {
      Remove();
      ::close(lock_fd_);
      throw;
    }
  }
  TestVm(std::string address, std::vector<std::string> public_keys)
      : TestVm(std::move(address), OptionsWithKeys(std::move(public_keys))) {}

  ~TestVm() {
    Remove();
    if (lock_fd_ >= 0) ::close(lock_fd_);
  }
  TestVm(const TestVm&) = delete;
  TestVm& operator=(const TestVm&) = delete;

  const std::string& address() const { return address_; }
  int ssh_port() const { return 22; }
  /// The container's name (also usable with docker exec).
  const std::string& container() const { return name_; }

  /// Replaces the container with a new one on the same address: a new instance-id, so
  /// cloud-init makes new SSH host keys, as when a cloud VM is deleted and created again.
  void Recreate() {
    Remove();
    Start();
  }

  /// Runs \a command as root inside the VM (docker exec, not SSH).
  ShellResult Exec(const std::string& command) const {
    return Shell("docker exec " + Quote(name_) + " sh -c " + Quote(command));
  }

 private:
  static TestVmOptions OptionsWithKeys(std::vector<std::string> public_keys) {
    TestVmOptions options;
    options.public_keys = std::move(public_keys);
    return options;
  }

  void Start() {
    std::string why_not;
    const std::string image = ImageTag(&why_not);
    if (image.empty()) throw std::runtime_error(why_not);
    Shell("docker rm -f -v " + Quote(name_) + " >/dev/null 2>&1");

    std::random_device random;
    const std::string instance_id = name_ + "-" + std::to_string(random());
    std::string meta_data =
        "instance-id: " + instance_id + "\nlocal-hostname: " + name_ + "\npublic-keys:\n";
    for (const std::string& key : options_.public_keys) meta_data += "  - \"" + key + "\"\n";
    const std::string user_data =
        options_.user_data.empty() ? std::string("#cloud-config\n{}\n") : options_.user_data;

    const std::filesystem::path seed = MakeTempDir();
    const std::filesystem::path nocloud = seed / "var/lib/cloud/seed/nocloud";
    std::filesystem::create_directories(nocloud);
    std::ofstream(nocloud / "meta-data") << meta_data;
    std::ofstream(nocloud / "user-data") << user_data;

    std::string publish = " -p " + address_ + ":22:22";
    for (int port : options_.extra_ports) {
      publish += " -p " + address_ + ":" + std::to_string(port) + ":" + std::to_string(port);
    }
    // The parameters of tests/fixtures/testvm/README.md ("Creating a test VM").
    std::string create = "docker create --name " + Quote(name_) + " --hostname " + Quote(name_);
    create += " --label org.gpuprov.test=testvm-fixture";
    create += " --cap-add SYS_ADMIN --cgroupns host -v /sys/fs/cgroup:/sys/fs/cgroup:ro";
    create +=
        " --tmpfs /run:rw,nosuid,nodev,exec,mode=755 --tmpfs /run/lock:rw,nosuid,nodev,noexec";
    create += " --stop-signal SIGRTMIN+3" + publish + " " + Quote(image) + " /lib/systemd/systemd";
    ShellResult created = Shell(create);
    if (created.exit_status != 0) {
      std::filesystem::remove_all(seed);
      throw std::runtime_error("docker create failed: " + created.output);
    }
    // `docker cp -` extracts a tar stream; the nocloud folder does not exist in the image.
    ShellResult copied =
        Shell("tar -C " + Quote(seed.string()) +
              " --owner=0 --group=0 --numeric-owner --mode=u=rwX,go=rX -cf - var | docker cp - " +
              Quote(name_ + ":/"));
    std::filesystem::remove_all(seed);
    if (copied.exit_status != 0) throw std::runtime_error("docker cp failed: " + copied.output);
    ShellResult started = Shell("docker start " + Quote(name_));
    if (started.exit_status != 0) {
      throw std::runtime_error("docker start failed: " + started.output);
    }
    WaitReady();
  }

  void WaitReady() {
    const auto start = std::chrono::steady_clock::now();
    const auto end = start + options_.boot_timeout;
    const std::string seconds = std::to_string(options_.boot_timeout.count());
    ShellResult status{0, "not waited for"};
    if (options_.wait_for_cloud_init) {
      // cloud-init status --wait also waits while cloud-init has not started yet.
      status = Shell("timeout " + seconds + " docker exec " + Quote(name_) +
                     " cloud-init status --wait");
    }
    while (std::chrono::steady_clock::now() < end) {
      if (SshBannerAnswers(address_, 22, std::chrono::seconds(2))) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    throw std::runtime_error("test VM " + name_ + " on " + address_ +
                             ":22 did not answer SSH within " + seconds +
                             "s; cloud-init status: " + status.output + "\ncontainer log:\n" +
                             LastLines(Shell("docker logs " + Quote(name_)).output, 30));
  }

  void Remove() { Shell("docker rm -f -v " + Quote(name_) + " >/dev/null 2>&1"); }

  static std::filesystem::path MakeTempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpuprov-testvm.XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    return buf.data();
  }

  std::string address_;
  TestVmOptions options_;
  std::string name_;
  int lock_fd_ = -1;
};

}  // namespace gpuprov::testvm
