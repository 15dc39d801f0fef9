// SPDX-License-Identifier: Apache-2.0
#include "aws_credentials.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "driver_test_util.h"

namespace gpuprov::aws {
namespace {

using drivers::testing::ScopedTempDir;

// An environment made of a map.
EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

void Write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(AwsCredentials, EnvironmentKeysWinWithSessionToken) {
  ScopedTempDir home;
  Write(home.path() / ".aws/credentials",
        "[default]\naws_access_key_id=AKIAFILE\n"
        "aws_secret_access_key=filesecret\n");
  auto r = ResolveCredentials(Env({{"HOME", home.path().string()},
                                   {"AWS_ACCESS_KEY_ID", "ASIAENVKEY"},
                                   {"AWS_SECRET_ACCESS_KEY", "envsecret"},
                                   {"AWS_SESSION_TOKEN", "tok"}}));
  ASSERT_TRUE(r.credentials) << r.problem;
  EXPECT_EQ(r.credentials->access_key_id, "ASIAENVKEY");
  EXPECT_EQ(r.credentials->secret_access_key, "envsecret");
  EXPECT_EQ(r.credentials->session_token, "tok");
  EXPECT_EQ(r.credentials->origin, "$AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY");
}

TEST(AwsCredentials, ProfileFromTheCredentialsFile) {
  ScopedTempDir home;
  Write(home.path() / ".aws/credentials",
        "# comment\n[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = d\n"
        "\n[dev]\naws_access_key_id = AKIADEV\naws_secret_access_key = devsecret  \n"
        "aws_session_token = devtoken\n");
  auto env = Env({{"HOME", home.path().string()}, {"AWS_PROFILE", "dev"}});
  auto r = ResolveCredentials(env);
  ASSERT_TRUE(r.credentials) << r.problem;
  EXPECT_EQ(r.credentials->access_key_id, "AKIADEV");
  EXPECT_EQ(r.credentials->secret_access_key, "devsecret");
  EXPECT_EQ(r.credentials->session_token, "devtoken");
  EXPECT_NE(r.credentials->origin.find("[dev]"), std::string::npos);
  // config.toml's profile wins over AWS_PROFILE.
  auto d = ResolveCredentials(env, "default");
  ASSERT_TRUE(d.credentials);
  EXPECT_EQ(d.credentials->access_key_id, "AKIADEFAULT");
}

TEST(AwsCredentials, KeysInTheConfigFileUseTheProfilePrefix) {
  ScopedTempDir home;
  Write(home.path() / "conf",
        "[profile ci]\nregion = eu-central-1\naws_access_key_id = AKIACI\n"
        "aws_secret_access_key = cisecret\n[ci]\naws_access_key_id = WRONG\n"
        "aws_secret_access_key = wrong\n");
  auto env = Env({{"HOME", home.path().string()},
                  {"AWS_CONFIG_FILE", (home.path() / "conf").string()},
                  {"AWS_PROFILE", "ci"}});
  auto r = ResolveCredentials(env);
  ASSERT_TRUE(r.credentials) << r.problem;
  EXPECT_EQ(r.credentials->access_key_id, "AKIACI");
  EXPECT_EQ(ResolveRegion(env, "", ""), "eu-central-1");
}

TEST(AwsCredentials, SsoProfilesGetTheExportCommand) {
  ScopedTempDir home;
  Write(home.path() / ".aws/config", "[profile work]\nsso_session = corp\nregion = us-west-2\n");
  auto r = ResolveCredentials(Env({{"HOME", home.path().string()}, {"AWS_PROFILE", "work"}}));
  EXPECT_FALSE(r.credentials);
  EXPECT_NE(r.problem.find("aws configure export-credentials --profile work"), std::string::npos)
      << r.problem;
  EXPECT_NE(r.problem.find("AWS_ACCESS_KEY_ID"), std::string::npos);
}

TEST(AwsCredentials, HalfSetEnvironmentIsNamed) {
  ScopedTempDir home;
  auto r =
      ResolveCredentials(Env({{"HOME", home.path().string()}, {"AWS_ACCESS_KEY_ID", "AKIAX"}}));
  EXPECT_FALSE(r.credentials);
  EXPECT_NE(r.problem.find("AWS_SECRET_ACCESS_KEY is not"), std::string::npos) << r.problem;
}

TEST(AwsCredentials, RegionOrder) {
  ScopedTempDir home;
  Write(home.path() / ".aws/config", "[default]\nregion = ap-south-1\n");
  auto base = std::map<std::string, std::string>{{"HOME", home.path().string()}};
  EXPECT_EQ(ResolveRegion(Env(base), "", ""), "ap-south-1");
  auto with_default = base;
  with_default["AWS_DEFAULT_REGION"] = "us-west-1";
  EXPECT_EQ(ResolveRegion(Env(with_default), "", ""), "us-west-1");
  auto with_region = with_default;
  with_region["AWS_REGION"] = "eu-west-3";
  EXPECT_EQ(ResolveRegion(Env(with_region), "", ""), "eu-west-3");
  EXPECT_EQ(ResolveRegion(Env(with_region), "", "sa-east-1"), "sa-east-1");
  EXPECT_EQ(ResolveRegion(Env(with_region), "us-east-2", "sa-east-1"), "us-east-2");
  EXPECT_EQ(ResolveRegion(Env({{"HOME", "/nonexistent"}}), "", ""), "us-east-1");
}

TEST(AwsCredentials, IniParserSkipsNestedBlocksAndComments) {
  IniFile ini = ParseIni(
      "[default]\nregion=us-east-1\ns3 =\n  max_concurrent_requests = 20\n"
      "; c\n[profile   x ]\nKEY = v = w\n");
  EXPECT_EQ(ini["default"]["region"], "us-east-1");
  EXPECT_EQ(ini["default"].count("max_concurrent_requests"), 0u);
  EXPECT_EQ(ini["profile x"]["key"], "v = w");
}

TEST(AwsCredentials, MaskKeyIdShowsOnlyTheEnds) {
  EXPECT_EQ(MaskKeyId("AKIAIOSFODNN7EXAMPLE"), "AKIA...MPLE");
  EXPECT_EQ(MaskKeyId("short"), "*****");
}

}  // namespace
}  // namespace gpuprov::aws
