// SPDX-License-Identifier: Apache-2.0
#include "credentials.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "driver_test_util.h"

namespace gpuprov::drivers {
namespace {

using testing::ScopedEnv;
using testing::ScopedTempDir;

TEST(Credentials, ReadSmallFileReadsOnlyARegularFileWithinItsBound) {
  ScopedTempDir dir;
  const std::filesystem::path root = dir.path();
  std::ofstream(root / "token") << "tok\n";
  EXPECT_EQ(ReadSmallFile((root / "token").string()), "tok\n");
  EXPECT_FALSE(ReadSmallFile((root / "missing").string()));
  // A FIFO would block a read until a writer came; /dev/zero would never end: both refused at
  // once, naming the file.
  ASSERT_EQ(mkfifo((root / "fifo").c_str(), 0600), 0);
  std::filesystem::create_symlink("/dev/zero", root / "zero");
  for (const char* name : {"fifo", "zero"}) {
    try {
      ReadSmallFile((root / name).string());
      ADD_FAILURE() << name << " was read";
    } catch (const sdk::DriverError& e) {
      EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
      EXPECT_NE(std::string(e.what()).find((root / name).string() + "': it is not a regular file"),
                std::string::npos) << e.what();
    }
  }
  std::ofstream(root / "big") << std::string((1u << 20) + 1, 'x');
  EXPECT_THROW(ReadSmallFile((root / "big").string()), sdk::DriverError);
}

TEST(Credentials, FirstNonBlankVariableWins) {
  ScopedEnv a("GPUPROV_T_A", "  ");
  ScopedEnv b("GPUPROV_T_B", " tok-b\n");
  ScopedEnv c("GPUPROV_T_C", "tok-c");
  auto cred = CredentialFromEnv({"GPUPROV_T_UNSET", "GPUPROV_T_A", "GPUPROV_T_B", "GPUPROV_T_C"});
  ASSERT_TRUE(cred);
  EXPECT_EQ(cred->value, "tok-b");
  EXPECT_EQ(cred->origin, "$GPUPROV_T_B");
  EXPECT_FALSE(CredentialFromEnv({"GPUPROV_T_UNSET", "GPUPROV_T_A"}));
}

constexpr const char* kDoctlYaml = R"(# doctl config
access-token: dop_v1_default
auth-contexts:
  work: "dop_v1_work"   # quoted
  play: 'dop_v1_play'
context: work
output: text
)";

TEST(Credentials, DoctlYamlContexts) {
  EXPECT_EQ(DoctlTokenFromYaml(kDoctlYaml), "dop_v1_work");  // the file's context
  EXPECT_EQ(DoctlTokenFromYaml(kDoctlYaml, "play"), "dop_v1_play");
  EXPECT_EQ(DoctlTokenFromYaml(kDoctlYaml, "default"), "dop_v1_default");
  EXPECT_EQ(DoctlTokenFromYaml(kDoctlYaml, "missing"), std::nullopt);
  EXPECT_EQ(DoctlTokenFromYaml("access-token: abc\r\n"), "abc");
  EXPECT_EQ(DoctlTokenFromYaml("access-token: \"\"\nauth-contexts: {}\n"), std::nullopt);
  EXPECT_EQ(DoctlTokenFromYaml(""), std::nullopt);
}

TEST(Credentials, DoctlPathHonoursXdg) {
  ScopedEnv xdg("XDG_CONFIG_HOME", "/tmp/xdg-test");
  EXPECT_EQ(DoctlConfigPath(), "/tmp/xdg-test/doctl/config.yaml");
  ScopedEnv no_xdg("XDG_CONFIG_HOME", nullptr);
  ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(DoctlConfigPath(), "/home/someone/.config/doctl/config.yaml");
}

TEST(Credentials, DoctlFileIsRead) {
  ScopedTempDir tmp("gpuprov-cred");
  const std::filesystem::path& dir = tmp.path();
  std::filesystem::create_directories(dir / "doctl");
  std::ofstream(dir / "doctl" / "config.yaml") << "access-token: from-file\n";
  ScopedEnv xdg("XDG_CONFIG_HOME", dir.c_str());
  auto cred = CredentialFromDoctlConfig();
  ASSERT_TRUE(cred);
  EXPECT_EQ(cred->value, "from-file");
  EXPECT_NE(cred->origin.find("doctl/config.yaml"), std::string::npos);
  EXPECT_EQ(cred->origin.find("from-file"), std::string::npos);
  tmp.Remove();
  EXPECT_FALSE(CredentialFromDoctlConfig());
}

// F11 (plugins/digitalocean/REFERENCE.md §F11): on macOS doctl keeps its file under
// ~/Library/Application Support/doctl (doctl README, "Configuring default values").
TEST(Credentials, DoctlFileOnMacOsIsRead) {
  ScopedTempDir tmp("gpuprov-cred-mac");
  const std::filesystem::path& home = tmp.path();
  std::filesystem::create_directories(home / "Library" / "Application Support" / "doctl");
  std::ofstream(home / "Library" / "Application Support" / "doctl" / "config.yaml")
      << "access-token: from-mac\n";
  ScopedEnv no_xdg("XDG_CONFIG_HOME", nullptr);
  ScopedEnv env_home("HOME", home.c_str());
  auto cred = CredentialFromDoctlConfig();
  ASSERT_TRUE(cred);
  EXPECT_EQ(cred->value, "from-mac");
  EXPECT_NE(cred->origin.find("Library/Application Support/doctl/config.yaml"),
            std::string::npos);
  // The Linux file, when both exist, is read first.
  std::filesystem::create_directories(home / ".config" / "doctl");
  std::ofstream(home / ".config" / "doctl" / "config.yaml") << "access-token: from-linux\n";
  cred = CredentialFromDoctlConfig();
  ASSERT_TRUE(cred);
  EXPECT_EQ(cred->value, "from-linux");
}

}  // namespace
}  // namespace gpuprov::drivers
