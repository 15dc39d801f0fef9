#include "installer_bundle.h"

#include <Poco/DeflatingStream.h>
#include <Poco/InflatingStream.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

#include "file_util.h"
#include "gzip.h"
#include "test_support.h"

namespace gpuprov {
namespace {

using testing::ModeOf;
using testing::ScopedTempDir;

/// EC2's user data: 16 KB, which the AWS driver sends gzipped (check's user_data_gzip).
const UserDataLimit kEc2(16384, /*gzipped=*/true);

/// A raw limit the compressed boot script fits and the plain one does not.
std::size_t CompressedOnlyLimit() { return Gzip(InstallerScript()).size() * 4 / 3 + 2048; }

std::string SourceInstaller() {
  return ReadFile(std::string(GPUPROV_SOURCE_DIR) + "/installer/gpuprov-install.sh");
}

/// Runs boot script \a script with its folder moved into \a dir and its final `exec bash
/// <installer>` replaced by `true`. Returns bash's exit status.
int RunBootScript(const std::string& script, const std::filesystem::path& dir) {
  std::string text = script;
  const std::string dir_line = "\ndir=/var/lib/gpuprov\n";
  const size_t d = text.find(dir_line);
  if (d == std::string::npos) return -1;
  text.replace(d, dir_line.size(), "\ndir=" + (dir / "node/var/lib/gpuprov").string() + "\n");
  const std::string exec_line = "exec bash \"$dir/gpuprov-install.sh\"";
  const size_t at = text.rfind(exec_line);
  if (at == std::string::npos) return -1;
  text.replace(at, exec_line.size(), "true");
  WriteFileAtomic(dir / "boot.sh", text, 0700);
  const std::string cmd = "bash " + (dir / "boot.sh").string() + " > " + (dir / "out").string() +
                          " 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/// `shfmt -mn` of \a path: what core/CMakeLists.txt embeds.
std::string Minified(const std::string& path) {
  std::string out;
  FILE* p = popen(("shfmt -mn " + path).c_str(), "r");
  if (!p) return out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  return pclose(p) == 0 ? out : std::string();
}

TEST(InstallerBundle, CarriesTheInstallerMinifiedByShfmt) {
  const std::string source = std::string(GPUPROV_SOURCE_DIR) + "/installer/gpuprov-install.sh";
  EXPECT_EQ(InstallerScript(), Minified(source));
  EXPECT_EQ(InstallerScript().rfind("#!/usr/bin/env bash\nset -euo pipefail\n", 0), 0u);
  EXPECT_LT(InstallerScript().size(), SourceInstaller().size() * 9 / 10)
      << "comments and indentation are gone";
  EXPECT_EQ(InstallerVersion(), "0.1.0");
  EXPECT_EQ(TtlScript(), Minified(std::string(GPUPROV_SOURCE_DIR) + "/installer/gpuprov-ttl.sh"));
}

/// The value of `readonly NAME="..."` in the installer source ("" when absent).
std::string ScriptPin(const std::string& name) {
  std::smatch m;
  const std::string text = SourceInstaller();
  if (!std::regex_search(text, m, std::regex("\nreadonly " + name + "=\"([^\"\n]*)\"\n"))) return "";
  return m[1].str();
}

TEST(InstallerBundle, PinnedK3sIsReadFromTheInstaller) {
  const PinnedK3s& pinned = PinnedK3sRelease();
  EXPECT_EQ(pinned.version, ScriptPin("K3S_PINNED_VERSION"));
  EXPECT_EQ(pinned.sha256_amd64, ScriptPin("K3S_SHA256_AMD64"));
  EXPECT_EQ(pinned.sha256_arm64, ScriptPin("K3S_SHA256_ARM64"));
  EXPECT_THAT(pinned.sha256_amd64, ::testing::MatchesRegex("[0-9a-f]{64}"));
  EXPECT_THAT(pinned.sha256_arm64, ::testing::MatchesRegex("[0-9a-f]{64}"));
}

// The pinned release and both hashes equal the table of docs/k3s-pin.md, which names their
// public sources; a typo in any of the three places fails here.
TEST(InstallerBundle, PinnedK3sMatchesTheReferenceTable) {
  const std::string path = std::string(GPUPROV_SOURCE_DIR) + "/docs/k3s-pin.md";
  std::optional<std::string> reference = ReadFileIfExists(path);
  ASSERT_TRUE(reference) << path << " is missing";
  const size_t section = reference->find("\n## Pinned release: ");
  ASSERT_NE(section, std::string::npos) << "no '## Pinned release' section in " << path;
  const std::string table = reference->substr(section);
  std::smatch version, amd64, arm64;
  ASSERT_TRUE(std::regex_search(table, version, std::regex(R"(\*\*k3s (v[^*\s]+)\*\*)")));
  ASSERT_TRUE(std::regex_search(table, amd64,
                                std::regex(R"(\n\| `k3s` \(amd64\) \| `([0-9a-f]{64})` \|)")));
  ASSERT_TRUE(std::regex_search(table, arm64, std::regex(R"(\n\| `k3s-arm64` \| `([0-9a-f]{64})` \|)")));
  EXPECT_EQ(ScriptPin("K3S_PINNED_VERSION"), version[1].str());
  EXPECT_EQ(ScriptPin("K3S_SHA256_AMD64"), amd64[1].str());
  EXPECT_EQ(ScriptPin("K3S_SHA256_ARM64"), arm64[1].str());
  EXPECT_EQ(PinnedK3sRelease().version, version[1].str());
  EXPECT_EQ(PinnedK3sRelease().sha256_amd64, amd64[1].str());
  EXPECT_EQ(PinnedK3sRelease().sha256_arm64, arm64[1].str());
}

TEST(InstallerBundle, K3sChoiceBecomesInstallerFlags) {
  InstallerArgs args;
  args.public_ip = "203.0.113.7";
  args.k3s_version = "v1.30.2+k3s1";
  args.k3s_sha256 = std::string(64, 'a');
  args.k3s_download_url = "http://127.0.0.1:8089";
  EXPECT_EQ(InstallerArgWords(args),
            (std::vector<std::string>{"--public-ip", "203.0.113.7", "--k3s-version", "v1.30.2+k3s1",
                                      "--k3s-sha256", std::string(64, 'a'), "--k3s-download-url",
                                      "http://127.0.0.1:8089"}));
  // Both routes pass them: the boot script's exec line and the SSH push command.
  auto boot = MakeBootScript(args, kEc2);
  ASSERT_TRUE(boot);
  EXPECT_EQ(boot->form, BootScriptForm::kPlain);  // gzipped by the driver
  EXPECT_LE(kEc2.SizeOf(boot->text), 16384u);
  EXPECT_THAT(boot->text, ::testing::EndsWith(
                              "exec bash \"$dir/gpuprov-install.sh\" '--public-ip' '203.0.113.7' "
                              "'--k3s-version' 'v1.30.2+k3s1' '--k3s-sha256' '" +
                              std::string(64, 'a') +
                              "' '--k3s-download-url' 'http://127.0.0.1:8089'\n"));
  EXPECT_THAT(InstallerPushCommand(args),
              ::testing::EndsWith("'--k3s-download-url' 'http://127.0.0.1:8089'"));
}

TEST(InstallerBundle, NvidiaRepoChoiceBecomesInstallerFlagsOnBothRoutes) {
  InstallerArgs args;
  args.nvidia_repo_url = "https://mirror.example/nvidia";
  args.nvidia_key_fingerprint = std::string(40, 'C');
  EXPECT_EQ(InstallerArgWords(args),
            (std::vector<std::string>{"--nvidia-repo-url", "https://mirror.example/nvidia",
                                      "--nvidia-key-fingerprint", std::string(40, 'C')}));
  const std::string tail = "'--nvidia-repo-url' 'https://mirror.example/nvidia' "
                           "'--nvidia-key-fingerprint' '" + std::string(40, 'C') + "'";
  auto boot = MakeBootScript(args, kEc2);
  ASSERT_TRUE(boot);
  EXPECT_THAT(boot->text, ::testing::EndsWith(tail + "\n"));
  EXPECT_THAT(InstallerPushCommand(args), ::testing::EndsWith(tail));
  EXPECT_EQ(InstallerArgWords(InstallerArgs{}), std::vector<std::string>{});  // NVIDIA's by default
}

TEST(InstallerBundle, TheDriversPublicIpSourceBecomesAFlagOfBothRoutes) {
  InstallerArgs args;
  args.public_ip_source = "openstack";
  EXPECT_EQ(InstallerArgWords(args),
            (std::vector<std::string>{"--public-ip-source", "openstack"}));
  auto boot = MakeBootScript(args, 1 << 20);
  ASSERT_TRUE(boot);
  EXPECT_THAT(boot->text, ::testing::EndsWith("'--public-ip-source' 'openstack'\n"));
  EXPECT_THAT(InstallerPushCommand(args), ::testing::EndsWith("'--public-ip-source' 'openstack'"));
  // A driver that names none: no flag, the installer's auto.
  EXPECT_TRUE(InstallerArgWords(InstallerArgs{}).empty());
}

TEST(InstallerBundle, TheReRunReasonSaysWhyTheVmDidNotLearnItsAddress) {
  EXPECT_EQ(PublicIpSourceShortfall("none"),
            "the cloud tells a VM its public address neither by a metadata service nor on an "
            "interface");
  EXPECT_EQ(PublicIpSourceShortfall("interface"),
            "no public address on the VM's interfaces (the cloud puts none there: NAT)");
  EXPECT_EQ(PublicIpSourceShortfall("nebius"),
            "the nebius metadata service did not give the installer the address");
  EXPECT_EQ(PublicIpSourceShortfall(""), "no metadata service gave the installer the address");
}

TEST(InstallerBundle, ArgumentsAreWordsInOrder) {
  InstallerArgs args;
  args.public_ip = "203.0.113.7";
  args.tls_sans = {"gpu.example.com"};
  EXPECT_EQ(InstallerArgWords(args),
            (std::vector<std::string>{"--public-ip", "203.0.113.7", "--tls-san", "gpu.example.com"}));
  EXPECT_TRUE(InstallerArgWords(InstallerArgs{}).empty());
}

TEST(InstallerBundle, NvidiaDriverInstallIsPassedOnlyWhenAsked) {
  InstallerArgs args;
  args.nvidia_driver = "install";
  EXPECT_EQ(InstallerArgWords(args), (std::vector<std::string>{"--nvidia-driver", "install"}));
  EXPECT_THAT(InstallerPushCommand(args), ::testing::EndsWith("'--nvidia-driver' 'install'"));
}

TEST(InstallerBundle, PlainBootScriptWhenItFits) {
  auto s = MakeBootScript(InstallerArgs{}, 64 * 1024);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->form, BootScriptForm::kPlain);
  EXPECT_EQ(s->text.rfind("#!/bin/bash\n", 0), 0u);
  EXPECT_NE(s->text.find(InstallerScript()), std::string::npos);
  EXPECT_LE(s->text.size(), 64u * 1024);
}

TEST(InstallerBundle, CompressedBootScriptWhenOnlyThatFits) {
  ASSERT_GT(InstallerScript().size(), 16384u);
  const size_t limit = Gzip(InstallerScript()).size() * 4 / 3 + 1024;  // base64 and the wrapper
  auto s = MakeBootScript(InstallerArgs{}, limit);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->form, BootScriptForm::kCompressed);
  EXPECT_LE(s->text.size(), limit);
  EXPECT_EQ(s->text.find("readonly INSTALLER_VERSION"), std::string::npos)
      << "the installer must not be in clear";
}

TEST(InstallerBundle, GzipIsStandardGzipDeterministicAndSmallerThanZlibLevel9) {
  // Zopfli (plugins/common/zopfli_gzip.h): gzip that zlib (cloud-init, gunzip) inflates back,
  // the same bytes each time (the host measures what the driver sends), smaller than zlib -9.
  const std::string script = InstallerScript();
  const std::string packed = Gzip(script);
  ASSERT_GE(packed.size(), 10u);
  EXPECT_EQ(packed.substr(0, 3), std::string("\x1f\x8b\x08", 3));  // gzip magic, deflate
  EXPECT_EQ(Gzip(script), packed);
  std::istringstream in(packed);
  Poco::InflatingInputStream inflate(in, Poco::InflatingStreamBuf::STREAM_GZIP);
  const std::string unpacked((std::istreambuf_iterator<char>(inflate)), std::istreambuf_iterator<char>());
  EXPECT_EQ(unpacked, script);
  std::ostringstream zlib;
  Poco::DeflatingOutputStream deflate(zlib, Poco::DeflatingStreamBuf::STREAM_GZIP, 9);
  deflate << script;
  deflate.close();
  EXPECT_LT(packed.size() + 300, zlib.str().size()) << "zopfli saves about 430 bytes on the installer";
}

TEST(InstallerBundle, Ec2GzippedUserDataTakesThePlainScriptWithRoom) {
  // EC2: 16 KB of user data, which the AWS driver sends gzipped (check's user_data_gzip).
  ASSERT_GT(InstallerScript().size(), 16384u);
  auto s = MakeBootScript(InstallerArgs{}, kEc2);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->form, BootScriptForm::kPlain);
  EXPECT_EQ(kEc2.SizeOf(s->text), Gzip(s->text).size());
  EXPECT_EQ(s->size, Gzip(s->text).size());
  // Room for the flags: every one gpuprov passes, at its longest, still leaves 512 bytes. (The TTL
  // timer, about 2.8 KB gzipped, does not fit beside the installer on EC2: gpuprov sets it over
  // SSH there, AddTtlToBootScript.)
  InstallerArgs every;
  every.public_ip = "203.0.113.255";
  every.tls_sans = {"gpu-box-1.example.org"};
  every.k3s_version = "v1.36.14-rc12+k3s12";
  every.k3s_sha256 = std::string(64, 'e');
  every.k3s_download_url = "https://artifacts.mirror.example.org/k3s-io/k3s/releases/download";
  every.node_firewall = "ssh-only";
  every.nvidia_driver = "install";
  every.nvidia_repo_url = "https://artifacts.mirror.example.org/nvidia/libnvidia-container";
  every.nvidia_key_fingerprint = std::string(40, 'F');
  every.public_ip_source = "digitalocean";
  every.cluster_nodes = 16;  // a cluster's server, which learns its k3s addresses at boot
  every.node_ip = "metadata";
  auto with = MakeBootScript(every, kEc2);
  ASSERT_TRUE(with);
  EXPECT_EQ(with->form, BootScriptForm::kPlain);
  EXPECT_LE(with->size + 512, 16384u)
      << "the installer is close to EC2's limit: see installer/README.md, 'Size'";
}

TEST(InstallerBundle, RawLimitCountsBytesGzipLimitCountsCompressedBytes) {
  const std::string text(20000, 'a');
  EXPECT_FALSE(UserDataLimit(16384).Fits(text));
  EXPECT_TRUE(UserDataLimit(16384, true).Fits(text));
  EXPECT_EQ(UserDataLimit(16384).Describe(), "16384-byte");
  EXPECT_EQ(UserDataLimit(16384, true).Describe(), "16384-byte (gzipped)");
}

TEST(InstallerBundle, NoBootScriptWhenEvenCompressedDoesNotFit) {
  EXPECT_FALSE(MakeBootScript(InstallerArgs{}, 2048));
}

TEST(InstallerBundle, BothFormsWriteTheSameInstallerOnTheNode) {
  for (std::size_t limit : {std::size_t{64 * 1024}, CompressedOnlyLimit()}) {
    ScopedTempDir dir;
    auto s = MakeBootScript(InstallerArgs{}, limit);
    ASSERT_TRUE(s);
    ASSERT_EQ(RunBootScript(s->text, dir.path()), 0) << ReadFile(dir.path() / "out");
    EXPECT_EQ(ReadFile(dir.path() / "node/var/lib/gpuprov/gpuprov-install.sh"), InstallerScript())
        << "limit " << limit;
    EXPECT_EQ(ModeOf(dir.path() / "node/var/lib/gpuprov/gpuprov-install.sh") & 0077, 0u);
  }
}

TEST(InstallerBundle, TtlInTheBootScriptWritesTheScriptSettingsAndTimerFirst) {
  ScopedTempDir dir;
  auto s = MakeBootScript(InstallerArgs{}, 64 * 1024);
  ASSERT_TRUE(s);
  NodeTtl ttl;
  ttl.deadline_epoch = 1796385600;
  ttl.check_seconds = 7;
  std::optional<std::string> with = AddTtlToBootScript(s->text, ttl, 64 * 1024);
  ASSERT_TRUE(with);
  EXPECT_EQ(with->rfind("#!/bin/bash\n# gpuprov TTL", 0), 0u);
  EXPECT_LT(with->find("gpuprov-ttl install"), with->find("gpuprov-install.sh"));
  // Too big for the limit: nothing, gpuprov sets the TTL over SSH.
  EXPECT_FALSE(AddTtlToBootScript(s->text, ttl, s->text.size() + 100));
  // Run it in a sandbox: the script's folder and root moved, a fake systemctl first on PATH.
  // Only the TTL block's paths: the installer after it is compared byte for byte below.
  const size_t installer_at = with->find("GPUPROV_INSTALLER_EOF");
  ASSERT_NE(installer_at, std::string::npos);
  std::string text = with->substr(0, installer_at);
  const std::string sbin = "/usr/local/sbin";
  for (size_t at = text.find(sbin); at != std::string::npos; at = text.find(sbin, at)) {
    text.replace(at, sbin.size(), (dir.path() / "sbin").string());
    at += (dir.path() / "sbin").string().size();
  }
  text += with->substr(installer_at);
  std::filesystem::create_directories(dir.path() / "bin");
  WriteFileAtomic(dir.path() / "bin/systemctl",
                  "#!/bin/sh\necho \"$*\" >>" + (dir.path() / "systemctl.log").string() + "\n",
                  0755);
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
  setenv("PATH", ((dir.path() / "bin").string() + ":" + old_path).c_str(), 1);
  setenv("GPUPROV_TTL_ROOT", (dir.path() / "root").string().c_str(), 1);
  const int rc = RunBootScript(text, dir.path());
  setenv("PATH", old_path.c_str(), 1);
  unsetenv("GPUPROV_TTL_ROOT");
  ASSERT_EQ(rc, 0) << ReadFile(dir.path() / "out");
  EXPECT_THAT(ReadFile(dir.path() / "out"), ::testing::HasSubstr("timer installed at boot"));
  EXPECT_EQ(ReadFile(dir.path() / "sbin/gpuprov-ttl"), TtlScript());
  EXPECT_THAT(ReadFile(dir.path() / "root/etc/gpuprov/ttl.conf"),
              ::testing::HasSubstr("deadline=1796385600\n"));
  EXPECT_THAT(ReadFile(dir.path() / "root/etc/systemd/system/gpuprov-ttl.timer"),
              ::testing::HasSubstr("OnUnitActiveSec=7s"));
  EXPECT_THAT(ReadFile(dir.path() / "systemctl.log"),
              ::testing::HasSubstr("enable gpuprov-ttl.timer"));
  EXPECT_EQ(ReadFile(dir.path() / "node/var/lib/gpuprov/gpuprov-install.sh"), InstallerScript());
}

/// Runs traced boot script \a script (MakeBootScript with trace) as RunBootScript does, its
/// installer run replaced by \a installer (a shell command). Returns bash's exit status.
int RunTracedBootScript(const std::string& script, const std::filesystem::path& dir,
                        const std::string& installer) {
  std::string text = script;
  const std::string dir_line = "\ndir=/var/lib/gpuprov\n";
  const size_t d = text.find(dir_line);
  if (d == std::string::npos) return -1;
  text.replace(d, dir_line.size(), "\ndir=" + (dir / "node/var/lib/gpuprov").string() + "\n");
  const std::string run_line = "\nbash \"$dir/gpuprov-install.sh\"";
  const size_t at = text.rfind(run_line);
  if (at == std::string::npos) return -1;
  text.replace(at + 1, run_line.size() - 1, installer);
  WriteFileAtomic(dir / "boot.sh", text, 0700);
  const std::string cmd = "bash " + (dir / "boot.sh").string() + " > " + (dir / "out").string() +
                          " 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// A startup script has no cloud-init run to record whether it ran: in both forms it writes
// "started" first and its exit status last (kNodeBootTracePath), and runs the installer as a
// child so the exit trap sees its status.
TEST(InstallerBundle, TracedBootScriptsRecordStartAndExitInBothForms) {
  EXPECT_EQ(std::string(kNodeBootTracePath), std::string(kNodeInstallerDir) + "/boot-script.status");
  for (std::size_t limit : {std::size_t{64 * 1024}, CompressedOnlyLimit()}) {
    auto s = MakeBootScript(InstallerArgs{}, limit, /*trace=*/true);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->form, limit == CompressedOnlyLimit() ? BootScriptForm::kCompressed : BootScriptForm::kPlain);
    EXPECT_EQ(s->text.find("exec bash"), std::string::npos);
    const std::filesystem::path trace = "node/var/lib/gpuprov/boot-script.status";
    {
      ScopedTempDir dir;
      ASSERT_EQ(RunTracedBootScript(s->text, dir.path(), "true"), 0) << ReadFile(dir.path() / "out");
      EXPECT_THAT(ReadFile(dir.path() / trace),
                  ::testing::MatchesRegex("started [0-9T:-]+Z\nexit 0\n"));
      EXPECT_EQ(ReadFile(dir.path() / "node/var/lib/gpuprov/gpuprov-install.sh"), InstallerScript());
    }
    {
      ScopedTempDir dir;
      EXPECT_EQ(RunTracedBootScript(s->text, dir.path(), "exit 7"), 7);
      EXPECT_THAT(ReadFile(dir.path() / trace), ::testing::EndsWith("\nexit 7\n"));
    }
  }
  // cloud-init user data goes without: EC2's limit keeps its margin.
  EXPECT_EQ(MakeBootScript(InstallerArgs{}, kEc2)->text.find("boot-script.status"),
            std::string::npos);
}

TEST(InstallerBundle, PushCommandQuotesArgumentsAndReadsStdin) {
  InstallerArgs args;
  args.public_ip = "1.2.3.4";
  args.tls_sans = {"it's"};
  const std::string cmd = InstallerPushCommand(args);
  EXPECT_NE(cmd.find("cat > /var/lib/gpuprov/gpuprov-install.sh.new"), std::string::npos);
  EXPECT_NE(cmd.find("exec bash /var/lib/gpuprov/gpuprov-install.sh '--public-ip' '1.2.3.4' "
                     "'--tls-san' 'it'\\''s'"),
            std::string::npos)
      << cmd;
}

TEST(InstallerBundle, ClusterNodeFlagsBecomeInstallerWords) {
  InstallerArgs server;
  server.cluster_nodes = 3;
  server.node_ip = "10.0.0.2";
  server.node_external_ip = "203.0.113.2";
  server.peers = {"10.0.0.3", "fd00::4"};
  EXPECT_EQ(InstallerArgWords(server),
            (std::vector<std::string>{"--node-ip", "10.0.0.2", "--node-external-ip", "203.0.113.2",
                                      "--cluster-nodes", "3", "--peer", "10.0.0.3", "--peer",
                                      "fd00::4"}));
  InstallerArgs single;
  single.cluster_nodes = 1;  // a single node: no --cluster-nodes, the installer's default
  EXPECT_TRUE(InstallerArgWords(single).empty());
  InstallerArgs agent;
  agent.role = "agent";
  EXPECT_EQ(InstallerArgWords(agent), (std::vector<std::string>{"--role", "agent"}));
}

TEST(InstallerBundle, AgentServerUrlIsTheServersApiPort) {
  EXPECT_EQ(AgentServerUrl("10.0.0.2"), "https://10.0.0.2:6443");
  EXPECT_EQ(AgentServerUrl("fd00::2"), "https://[fd00::2]:6443");
}

TEST(InstallerBundle, AgentJoinCommandTakesTheTokenOnStdinIntoA0600FileOnly) {
  ScopedTempDir dir;
  InstallerArgs args;
  args.node_ip = "10.0.0.3";
  std::string cmd = AgentJoinCommand(args, "https://10.0.0.2:6443");
  EXPECT_EQ(cmd.find("K10"), std::string::npos);
  // The node's paths moved into the temp dir; the installer replaced by one that reports what it
  // was given.
  const std::string run = (dir.path() / "run").string();
  const std::string installer = (dir.path() / "installer.sh").string();
  for (const auto& [from, to] : {std::pair<std::string, std::string>{kNodeInstallerPath, installer},
                                 std::pair<std::string, std::string>{"/run/gpuprov", run}}) {
    for (size_t at; (at = cmd.find(from)) != std::string::npos;) cmd.replace(at, from.size(), to);
  }
  const std::string token_path = run + "/join-token";
  WriteFileAtomic(installer,
                  "printf '%s\\n' \"$@\" > " + (dir.path() / "args").string() + "; stat -c %a " +
                      token_path + " > " + (dir.path() / "mode").string() + "; cat " +
                      token_path + " > " + (dir.path() / "token").string() + "\n",
                  0700);
  WriteFileAtomic(dir.path() / "run.sh", cmd + "\n", 0700);
  const std::string shell = "printf 'K10abc::server:secret\\nnot read\\n' | bash " +
                            (dir.path() / "run.sh").string();
  ASSERT_EQ(std::system(shell.c_str()), 0) << cmd;
  EXPECT_EQ(ReadFile(dir.path() / "token"), "K10abc::server:secret\n");
  EXPECT_EQ(ReadFile(dir.path() / "mode"), "600\n");
  EXPECT_EQ(ReadFile(dir.path() / "args"),
            "--role\nagent\n--node-ip\n10.0.0.3\n--server-url\nhttps://10.0.0.2:6443\n"
            "--token-file\n" + token_path + "\n");
  EXPECT_NE(AgentJoinCommand(args, "https://10.0.0.2:6443").find("'--token-file' '/run/gpuprov/join-token'"),
            std::string::npos);
}

TEST(InstallerBundle, PeersOnlyCommandSetsOnlyThePeerSet) {
  EXPECT_EQ(PeersOnlyCommand({"10.0.0.3", "fd00::4"}),
            "exec bash /var/lib/gpuprov/gpuprov-install.sh --peers-only --peer '10.0.0.3' "
            "--peer 'fd00::4'");
  EXPECT_EQ(PeersOnlyCommand({}), "exec bash /var/lib/gpuprov/gpuprov-install.sh --peers-only");
}

TEST(InstallerBundle, AsRootUsesSudoForOtherUsers) {
  EXPECT_EQ(AsRoot("id -u", "root"), "id -u");
  EXPECT_EQ(AsRoot("id -u", "ubuntu"), "sudo -n sh -c 'id -u'");
}

}  // namespace
}  // namespace gpuprov
