#include "ssh_keys.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "error.h"
#include "test_support.h"

namespace gpuprov {
namespace {

using TempDir = gpuprov::testing::ScopedTempDir;
using gpuprov::testing::ModeOf;

namespace fs = std::filesystem;

/// A fresh directory (mode 0700) removed with its contents at scope exit.
struct CommandResult {
  int exit_status;
  std::string output;  // stdout and stderr
};

CommandResult RunCommand(const std::string& command) {
  CommandResult result{-1, ""};
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  int status = ::pclose(pipe);
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// The fingerprint field (second word) of `ssh-keygen -l` output.
std::string SshKeygenFingerprint(const fs::path& file, const std::string& hash) {
  CommandResult r = RunCommand("ssh-keygen -l -E " + hash + " -f '" + file.string() + "'");
  EXPECT_EQ(r.exit_status, 0) << r.output;
  std::istringstream in(r.output);
  std::string bits;
  std::string fingerprint;
  in >> bits >> fingerprint;
  return fingerprint;
}

/// The key part (`<type> <base64>`) of a public key line.
std::string KeyPart(const std::string& line) {
  std::istringstream in(line);
  std::string type;
  std::string base64;
  in >> type >> base64;
  return type + " " + base64;
}

TEST(SshKeysTest, GeneratesEd25519KeyWithPrivateModesAndPubFile) {
  TempDir dir;
  const fs::path key = dir.path() / "home" / "keys" / "id_ed25519";
  const std::string line = EnsureEd25519Key(key.string());

  EXPECT_EQ(line.rfind("ssh-ed25519 AAAA", 0), 0u) << line;
  EXPECT_TRUE(line.ends_with(" gpuprov")) << line;
  EXPECT_EQ(ModeOf(key), 0600u);
  EXPECT_EQ(ModeOf(key.parent_path()), 0700u);
  EXPECT_EQ(ModeOf(key.parent_path().parent_path()), 0700u);
  EXPECT_EQ(ReadFile(key.string() + ".pub"), line + "\n");
  EXPECT_EQ(ReadFile(key).rfind("-----BEGIN OPENSSH PRIVATE KEY-----", 0), 0u);
  // No temporary file is left behind.
  size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(key.parent_path())) ++entries;
  EXPECT_EQ(entries, 2u);
}

TEST(SshKeysTest, SecondCallLoadsTheSameKey) {
  TempDir dir;
  const fs::path key = dir.path() / "id_ed25519";
  const std::string first = EnsureEd25519Key(key.string());
  const std::string private_text = ReadFile(key);
  EXPECT_EQ(EnsureEd25519Key(key.string()), first);
  EXPECT_EQ(ReadFile(key), private_text);
}

TEST(SshKeysTest, OpenSshReadsTheGeneratedKeyAndAgreesOnFingerprints) {
  TempDir dir;
  const fs::path key = dir.path() / "id_ed25519";
  const std::string line = EnsureEd25519Key(key.string());

  CommandResult derived = RunCommand("ssh-keygen -y -f '" + key.string() + "'");
  ASSERT_EQ(derived.exit_status, 0) << derived.output;
  EXPECT_EQ(KeyPart(derived.output), KeyPart(line));

  const fs::path pub = key.string() + ".pub";
  EXPECT_EQ(PublicKeyFingerprintSha256(line), SshKeygenFingerprint(pub, "sha256"));
  EXPECT_EQ("MD5:" + PublicKeyFingerprintMd5(line), SshKeygenFingerprint(pub, "md5"));
}

TEST(SshKeysTest, FingerprintsOfSshKeygenKeysMatchOpenSsh) {
  TempDir dir;
  for (const std::string type : {"ed25519", "rsa", "ecdsa"}) {
    const fs::path key = dir.path() / ("id_" + type);
    CommandResult made = RunCommand("ssh-keygen -q -t " + type + (type == "rsa" ? " -b 2048" : "") +
                                    " -N '' -C 'user@laptop' -f '" + key.string() + "'");
    ASSERT_EQ(made.exit_status, 0) << made.output;
    const fs::path pub = key.string() + ".pub";
    const std::string line = ReadFile(pub);
    SCOPED_TRACE(line);
    EXPECT_EQ(PublicKeyFingerprintSha256(line), SshKeygenFingerprint(pub, "sha256"));
    const std::string md5 = PublicKeyFingerprintMd5(line);
    EXPECT_EQ("MD5:" + md5, SshKeygenFingerprint(pub, "md5"));
    EXPECT_EQ(md5.size(), 16u * 3 - 1);
  }
}

TEST(SshKeysTest, UserKeyMadeBySshKeygenLoadsAndIsNotRewritten) {
  TempDir dir;
  for (const std::string type : {"ed25519", "ecdsa"}) {
    const fs::path key = dir.path() / ("user_" + type);
    CommandResult made = RunCommand("ssh-keygen -q -t " + type + " -N '' -C 'user@laptop' -f '" +
                                    key.string() + "'");
    ASSERT_EQ(made.exit_status, 0) << made.output;
    const std::string pub_before = ReadFile(key.string() + ".pub");
    const std::string private_before = ReadFile(key);

    const std::string line = EnsureEd25519Key(key.string());
    EXPECT_EQ(KeyPart(line), KeyPart(pub_before));
    EXPECT_EQ(ReadFile(key.string() + ".pub"), pub_before);
    EXPECT_EQ(ReadFile(key), private_before);
  }
}

TEST(SshKeysTest, KeyReadableByOthersIsRefusedWithChmodHint) {
  TempDir dir;
  const fs::path key = dir.path() / "id_ed25519";
  EnsureEd25519Key(key.string());
  for (mode_t mode : {0640, 0604, 0660}) {
    ASSERT_EQ(::chmod(key.c_str(), mode), 0);
    try {
      EnsureEd25519Key(key.string());
      FAIL() << "mode " << std::oct << mode << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key.string()), std::string::npos) << e.what();
      EXPECT_NE(e.hint().find("chmod 600 '" + key.string() + "'"), std::string::npos) << e.hint();
    }
  }
  ASSERT_EQ(::chmod(key.c_str(), 0400), 0);
  EXPECT_NO_THROW(EnsureEd25519Key(key.string()));
}

TEST(SshKeysTest, PassphraseProtectedKeyIsRefused) {
  TempDir dir;
  const fs::path key = dir.path() / "locked";
  CommandResult made =
      RunCommand("ssh-keygen -q -t ed25519 -N 'secret words' -f '" + key.string() + "'");
  ASSERT_EQ(made.exit_status, 0) << made.output;
  try {
    EnsureEd25519Key(key.string());
    FAIL() << "an encrypted key was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("passphrase"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("ssh-keygen"), std::string::npos) << e.hint();
  }
}

TEST(SshKeysTest, FileThatIsNotAKeyIsRefused) {
  TempDir dir;
  const fs::path key = dir.path() / "not_a_key";
  {
    std::ofstream out(key);
    out << "hello\n";
  }
  ASSERT_EQ(::chmod(key.c_str(), 0600), 0);
  EXPECT_THROW(EnsureEd25519Key(key.string()), Error);
  EXPECT_THROW(LoadPrivateKey((dir.path() / "missing").string()), Error);
}

TEST(SshKeysTest, MalformedPublicKeyLinesAreRefused) {
  EXPECT_THROW(PublicKeyFingerprintSha256(""), Error);
  EXPECT_THROW(PublicKeyFingerprintSha256("ssh-ed25519"), Error);
  EXPECT_THROW(PublicKeyFingerprintSha256("ssh-foo AAAAC3NzaC1lZDI1NTE5"), Error);
  EXPECT_THROW(PublicKeyFingerprintMd5("ssh-ed25519 !!!notbase64!!!"), Error);
}

}  // namespace
}  // namespace gpuprov
