// Guards the driver ABI: the header's declarations (comments and white space removed) must hash
// to the value recorded for the ABI version it declares. Changing a declaration without moving
// GPUPROV_ABI_VERSION_MAJOR/MINOR fails here; moving the version means adding its hash below.
#include <Poco/DigestEngine.h>
#include <Poco/SHA2Engine.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>

#include "gpuprov/driver_abi.h"

namespace {

/// The header without comments, with each run of white space folded to one space.
std::string Declarations(const std::string& text) {
  std::string out;
  bool space = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "/*") == 0) {
      size_t end = text.find("*/", i + 2);
      i = (end == std::string::npos ? text.size() : end + 2) - 1;
      space = true;
      continue;
    }
    if (text.compare(i, 2, "//") == 0) {
      size_t end = text.find('\n', i);
      i = (end == std::string::npos ? text.size() : end) - 1;
      space = true;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(text[i]))) {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += text[i];
  }
  return out;
}

std::string Sha256(const std::string& s) {
  Poco::SHA2Engine engine(Poco::SHA2Engine::SHA_256);
  engine.update(s);
  return Poco::DigestEngine::digestToHex(engine.digest());
}

// ABI version -> hash of its declarations. Append a line when the ABI version moves.
const std::map<std::string, std::string> kKnownAbi = {
    {"1.0", "ed1e4e63b037e98c6488b8499496a7aa1a34b442f50af103eaeee7cc599fadc6"},
    {"1.1", "973b1857a0806f2e97ccee40d5085e8b3ec641dc6cb6e445a247c55dafe88b1a"},
    {"1.2", "28d36bb7a001dc82707d9d819fb64c32d2b2569262f3060bf81230db8075814e"},
    {"1.3", "0b296e44246bccb6535d8bc25d2ec20a9535a82b32516f1beedccc188c229b8d"},
    {"1.4", "4319d4d4ee3dc9fdc27ff51cc82de91eb0e0e9fc848afa0cc04b1b3861de1e93"},
    {"1.5", "c4bf238b2b734fad2ad5ec66f544d0b547521e44a99acae8d383c77ac2a6ca91"},
};

TEST(AbiGuard, HeaderMatchesTheHashRecordedForItsVersion) {
  std::ifstream in(GPUPROV_ABI_HEADER);
  ASSERT_TRUE(in) << GPUPROV_ABI_HEADER;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string version = std::to_string(GPUPROV_ABI_VERSION_MAJOR) + "." +
                              std::to_string(GPUPROV_ABI_VERSION_MINOR);
  const std::string hash = Sha256(Declarations(ss.str()));
  auto it = kKnownAbi.find(version);
  ASSERT_NE(it, kKnownAbi.end()) << "ABI " << version << " has no recorded hash; add {\""
                                 << version << "\", \"" << hash << "\"} to kKnownAbi";
  EXPECT_EQ(it->second, hash) << "driver_abi.h changed but GPUPROV_ABI_VERSION is still "
                              << version << ": move the version (minor for additions at the "
                              << "end of structs, major for anything else) and record the hash";
}

TEST(AbiGuard, TheFixtureHeadersAreTheReleasedOnes) {
  // The abi10, abi11 and abi12 fixture drivers are built with these copies; each must be its
  // ABI as released.
  const std::pair<std::string, std::string> kCopies[] = {
      {"1.0", "abi_1_0"}, {"1.1", "abi_1_1"}, {"1.2", "abi_1_2"}};
  for (const auto& [version, folder] : kCopies) {
    std::ifstream in(std::string(GPUPROV_SOURCE_DIR) + "/tests/fixtures/drivers/" + folder +
                     "/gpuprov/driver_abi.h");
    ASSERT_TRUE(in) << folder;
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(Sha256(Declarations(ss.str())), kKnownAbi.at(version)) << folder;
  }
}

TEST(AbiGuard, CommentsAndSpacingDoNotCount) {
  EXPECT_EQ(Declarations("int  a; /* x */\n// y\nint b;"), "int a; int b;");
  EXPECT_NE(Declarations("int a;"), Declarations("long a;"));
}

}  // namespace
