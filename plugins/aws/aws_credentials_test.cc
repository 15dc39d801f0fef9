// SPDX-License-Identifier: Apache-2.0
#include "aws_credentials.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include <Poco/DigestEngine.h>
#include <Poco/SHA1Engine.h>

#include <ctime>

#include "driver_test_util.h"
#include "ec2_client.h"

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

TEST(AwsCredentials, SsoProfileWithoutACachedLoginSaysSsoLogin) {
  ScopedTempDir home;
  Write(home.path() / ".aws/config",
        "[profile work]\nsso_session = corp\nsso_account_id = 111122223333\n"
        "sso_role_name = Dev\nregion = us-west-2\n[sso-session corp]\n"
        "sso_start_url = https://corp.awsapps.com/start\nsso_region = us-east-1\n");
  auto r = ResolveCredentials(Env({{"HOME", home.path().string()}, {"AWS_PROFILE", "work"}}));
  EXPECT_FALSE(r.credentials);
  EXPECT_NE(r.problem.find("aws sso login --profile work"), std::string::npos) << r.problem;
  EXPECT_NE(r.problem.find("no cached SSO login"), std::string::npos) << r.problem;
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
  // No region anywhere: none, never a silent us-east-1 (the driver says where to set one).
  EXPECT_EQ(ResolveRegion(Env({{"HOME", "/nonexistent"}}), "", ""), "");
  EXPECT_NE(NoRegionProblem("dev").find("[profile dev]"), std::string::npos);
  EXPECT_NE(NoRegionProblem("").find("AWS_REGION"), std::string::npos);
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


// --- each source against the emulator (STS, SSO portal, container endpoint, IMDSv2) -------

#ifdef GPUPROV_EMULATOR_PATH
constexpr char kBaseKey[] = "AKIAEMULATORBASE0001";
constexpr char kBaseSecret[] = "base-secret-never-shown";

class CredEmulator : public drivers::testing::OneCloudEmulator {
 public:
  CredEmulator() : OneCloudEmulator("aws") {}
  bool Start(std::string* problem) {
    return StartMemory({}, {{"AWS_ACCESS_KEY_ID", kBaseKey}, {"AWS_SECRET_ACCESS_KEY", kBaseSecret}},
                       problem);
  }
};

class AwsCredentialSources : public drivers::testing::SharedEmulatorTest<CredEmulator> {
 protected:
  void SetUp() override {
    SharedEmulatorTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    emulator_->Reset();
    ClearCredentialCache();
    vars_ = {{"HOME", home_.path().string()}, {"AWS_ENDPOINT_URL", emulator_->url()}};
    options_.region = "eu-west-1";
    options_.policy = drivers::RetryPolicy::Fast();
    options_.on_ec2 = [] { return false; };
    options_.host = host_.Host();
  }

  CredentialLookup Resolve(const std::string& profile = "") {
    return ResolveCredentials(Env(vars_), profile, options_);
  }
  long long Issued() const { return emulator_->Count("credentials_issued"); }

  // A signed EC2 call with `c`: the emulator accepts temporary keys only with their token.
  std::string Ec2Works(const AwsCredentials& c) {
    Ec2Client ec2(emulator_->url(), drivers::RetryPolicy::Fast(), host_.Host(),
                  [c] { return c; });
    try {
      XmlNode doc = ec2.Call("eu-west-1", "DescribeRegions", {});
      return doc.Items("regionInfo").empty() ? "no regions" : "";
    } catch (const std::exception& e) {
      return e.what();
    }
  }

  void WriteBaseProfile() {
    Write(home_.path() / ".aws/credentials", std::string("[base]\naws_access_key_id = ") +
                                                 kBaseKey + "\naws_secret_access_key = " +
                                                 kBaseSecret + "\n");
  }

  ScopedTempDir home_;
  std::map<std::string, std::string> vars_;
  CredentialOptions options_;
  drivers::testing::RecordingHost host_;
};

TEST_F(AwsCredentialSources, RoleArnViaSourceProfileIsAssumedSignedAndCachedUntilExpiry) {
  WriteBaseProfile();
  Write(home_.path() / ".aws/config",
        "[profile dev]\nrole_arn = arn:aws:iam::123456789012:role/gpuprov-dev\n"
        "source_profile = base\nrole_session_name = ci-run\n");
  long long now = static_cast<long long>(std::time(nullptr));
  options_.clock = [&now] { return now; };
  auto r = Resolve("dev");
  ASSERT_TRUE(r.credentials) << r.problem;
  EXPECT_EQ(r.credentials->origin, "profile dev (role_arn via source_profile base)");
  EXPECT_EQ(r.credentials->access_key_id.rfind("ASIA", 0), 0u);
  EXPECT_FALSE(r.credentials->session_token.empty());
  EXPECT_GT(r.credentials->expiration, now + 3000);
  EXPECT_EQ(Ec2Works(*r.credentials), "");
  EXPECT_EQ(Issued(), 1);
  // Cached: the same keys, no second AssumeRole.
  auto again = Resolve("dev");
  ASSERT_TRUE(again.credentials) << again.problem;
  EXPECT_EQ(again.credentials->access_key_id, r.credentials->access_key_id);
  EXPECT_EQ(Issued(), 1);
  // Within 10 minutes of expiry: assumed again.
  now = r.credentials->expiration - 300;
  auto later = Resolve("dev");
  ASSERT_TRUE(later.credentials) << later.problem;
  EXPECT_NE(later.credentials->access_key_id, r.credentials->access_key_id);
  EXPECT_EQ(Issued(), 2);
  // The temporary keys without their session token are refused by EC2.
  AwsCredentials no_token = *r.credentials;
  no_token.session_token.clear();
  EXPECT_NE(Ec2Works(no_token), "");
}

TEST_F(AwsCredentialSources, RoleRefusalsNameTheCauseNeverTheSecret) {
  Write(home_.path() / ".aws/credentials",
        std::string("[base]\naws_access_key_id = ") + kBaseKey +
            "\naws_secret_access_key = wrong-secret-value\n");
  Write(home_.path() / ".aws/config",
        "[profile dev]\nrole_arn = arn:aws:iam::123456789012:role/gpuprov-dev\n"
        "source_profile = base\n"
        "[profile mfa]\nrole_arn = arn:aws:iam::123456789012:role/x\nsource_profile = base\n"
        "mfa_serial = arn:aws:iam::123456789012:mfa/me\n"
        "[profile lonely]\nrole_arn = arn:aws:iam::123456789012:role/x\n");
  auto r = Resolve("dev");
  EXPECT_FALSE(r.credentials);
  EXPECT_NE(r.problem.find("SignatureDoesNotMatch"), std::string::npos) << r.problem;
  EXPECT_NE(r.problem.find("AssumeRole"), std::string::npos) << r.problem;
  EXPECT_EQ(r.problem.find("wrong-secret-value"), std::string::npos);
  auto m = Resolve("mfa");
  EXPECT_FALSE(m.credentials);
  EXPECT_NE(m.problem.find("mfa_serial"), std::string::npos) << m.problem;
  auto l = Resolve("lonely");
  EXPECT_NE(l.problem.find("source_profile"), std::string::npos) << l.problem;
  EXPECT_EQ(Issued(), 0);

  WriteBaseProfile();
  Write(home_.path() / ".aws/config",
        "[profile dev]\nrole_arn = arn:aws:iam::123456789012:role/denied-role\n"
        "source_profile = base\n");
  auto d = Resolve("dev");
  EXPECT_NE(d.problem.find("AccessDenied"), std::string::npos) << d.problem;
  // No region for STS: said so.
  options_.region.clear();
  vars_.erase("AWS_ENDPOINT_URL");
  auto nr = Resolve("dev");
  EXPECT_NE(nr.problem.find("no AWS region"), std::string::npos) << nr.problem;
}

TEST_F(AwsCredentialSources, WebIdentityFromTheEnvironment) {
  Write(home_.path() / "token", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJjaSJ9.c2ln\n");
  vars_["AWS_WEB_IDENTITY_TOKEN_FILE"] = (home_.path() / "token").string();
  vars_["AWS_ROLE_ARN"] = "arn:aws:iam::123456789012:role/ci";
  WriteBaseProfile();  // the environment's web identity comes before profiles
  vars_["AWS_PROFILE"] = "base";
  auto r = Resolve();
  ASSERT_TRUE(r.credentials) << r.problem;
  EXPECT_EQ(r.credentials->origin,
            "web identity ($AWS_WEB_IDENTITY_TOKEN_FILE, role arn:aws:iam::123456789012:role/ci)");
  EXPECT_EQ(Ec2Works(*r.credentials), "");
  ClearCredentialCache();
  Write(home_.path() / "token", "not-a-jwt");
  auto bad = Resolve();
  EXPECT_NE(bad.problem.find("InvalidIdentityToken"), std::string::npos) << bad.problem;
  // Environment keys come first of all.
  vars_["AWS_ACCESS_KEY_ID"] = kBaseKey;
  vars_["AWS_SECRET_ACCESS_KEY"] = kBaseSecret;
  auto env = Resolve();
  ASSERT_TRUE(env.credentials);
  EXPECT_EQ(env.credentials->access_key_id, kBaseKey);
}

TEST_F(AwsCredentialSources, ProfileWebIdentityAndCredentialSource) {
  Write(home_.path() / "token", "aGVhZA.Ym9keQ.c2ln");
  Write(home_.path() / ".aws/config",
        "[profile wi]\nrole_arn = arn:aws:iam::123456789012:role/ci\nweb_identity_token_file = " +
            (home_.path() / "token").string() +
            "\n[profile ecs]\nrole_arn = arn:aws:iam::123456789012:role/deploy\n"
            "credential_source = EcsContainer\n"
            "[profile odd]\nrole_arn = arn:aws:iam::123456789012:role/x\n"
            "credential_source = Somewhere\n");
  auto wi = Resolve("wi");
  ASSERT_TRUE(wi.credentials) << wi.problem;
  EXPECT_EQ(wi.credentials->origin, "profile wi (role_arn via web_identity_token_file)");
  EXPECT_EQ(Ec2Works(*wi.credentials), "");
  // The container's credentials sign the AssumeRole: two issued, the role's keys work.
  vars_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = emulator_->url() + "/container-credentials/t";
  vars_["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "emulator-aws-container-token";
  auto ecs = Resolve("ecs");
  ASSERT_TRUE(ecs.credentials) << ecs.problem;
  EXPECT_EQ(ecs.credentials->origin, "profile ecs (role_arn via credential_source EcsContainer)");
  EXPECT_EQ(Ec2Works(*ecs.credentials), "");
  EXPECT_EQ(Issued(), 3);
  EXPECT_NE(Resolve("odd").problem.find("Ec2InstanceMetadata"), std::string::npos);
}

TEST_F(AwsCredentialSources, CredentialProcessJsonIsRead) {
  const auto script = home_.path() / "creds.sh";
  Write(script, std::string("#!/bin/sh\ncat <<EOF\n{\"Version\": 1, \"AccessKeyId\": \"") +
                    kBaseKey + "\", \"SecretAccessKey\": \"" + kBaseSecret +
                    "\", \"Expiration\": \"2999-01-01T00:00:00Z\"}\nEOF\n");
  Write(home_.path() / ".aws/config",
        "[profile proc]\ncredential_process = /bin/sh " + script.string() + "\n"
        "[profile v2]\ncredential_process = echo '{\"Version\": 2}'\n"
        "[profile fails]\ncredential_process = sh -c 'echo secret-output; exit 3'\n");
  auto r = Resolve("proc");
  ASSERT_TRUE(r.credentials) << r.problem;
  EXPECT_EQ(r.credentials->origin, "profile proc (credential_process)");
  EXPECT_EQ(r.credentials->expiration, 32472144000LL);
  EXPECT_EQ(Ec2Works(*r.credentials), "");
  EXPECT_NE(Resolve("v2").problem.find("\"Version\": 1"), std::string::npos);
  auto f = Resolve("fails");
  EXPECT_NE(f.problem.find("exit status 3"), std::string::npos) << f.problem;
  EXPECT_EQ(f.problem.find("secret-output"), std::string::npos);
}

std::string Sha1Hex(const std::string& s) {
  Poco::SHA1Engine e;
  e.update(s);
  return Poco::DigestEngine::digestToHex(e.digest());
}

TEST_F(AwsCredentialSources, SsoSessionProfileUsesTheCachedTokenAndThePortal) {
  Write(home_.path() / ".aws/config",
        "[profile work]\nsso_session = corp\nsso_account_id = 111122223333\n"
        "sso_role_name = Dev\n[sso-session corp]\n"
        "sso_start_url = https://corp.awsapps.com/start\nsso_region = us-east-1\n"
        "[profile legacy]\nsso_start_url = https://old.awsapps.com/start\nsso_region = eu-west-1\n"
        "sso_account_id = 111122223333\nsso_role_name = Ops\n");
  const auto cache = home_.path() / ".aws/sso/cache";
  Write(cache / (Sha1Hex("corp") + ".json"),
        R"({"startUrl":"https://corp.awsapps.com/start","region":"us-east-1",)"
        R"("accessToken":"emulator-aws-sso-token","expiresAt":"2999-01-01T00:00:00Z"})");
  auto r = Resolve("work");
  ASSERT_TRUE(r.credentials) << r.problem;
  EXPECT_EQ(r.credentials->origin, "profile work (sso_session corp, account 111122223333, role Dev)");
  EXPECT_EQ(Ec2Works(*r.credentials), "");
  // Legacy profile: the cache file is named by the start URL's SHA-1; a token the portal does
  // not know, and an expired one, both end in `aws sso login`.
  Write(cache / (Sha1Hex("https://old.awsapps.com/start") + ".json"),
        R"({"accessToken":"revoked-token","expiresAt":"2999-01-01T00:00:00UTC"})");
  auto revoked = Resolve("legacy");
  EXPECT_NE(revoked.problem.find("aws sso login --profile legacy"), std::string::npos)
      << revoked.problem;
  EXPECT_NE(revoked.problem.find("HTTP 401"), std::string::npos) << revoked.problem;
  Write(cache / (Sha1Hex("https://old.awsapps.com/start") + ".json"),
        R"({"accessToken":"emulator-aws-sso-token","expiresAt":"2020-01-01T00:00:00Z"})");
  auto stale = Resolve("legacy");
  EXPECT_NE(stale.problem.find("expired: run `aws sso login --profile legacy`"), std::string::npos)
      << stale.problem;
}

TEST_F(AwsCredentialSources, ContainerCredentialsFullAndRelativeUri) {
  Write(home_.path() / "pod-token", "emulator-aws-container-token\n");
  vars_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = emulator_->url() + "/container-credentials/pod";
  vars_["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] = (home_.path() / "pod-token").string();
  auto r = Resolve();
  ASSERT_TRUE(r.credentials) << r.problem;
  EXPECT_EQ(r.credentials->origin, "container credentials ($AWS_CONTAINER_CREDENTIALS_FULL_URI)");
  EXPECT_EQ(Ec2Works(*r.credentials), "");
  ClearCredentialCache();
  vars_.erase("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  vars_["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "wrong";
  auto wrong = Resolve();
  EXPECT_NE(wrong.problem.find("HTTP 401"), std::string::npos) << wrong.problem;
  EXPECT_NE(wrong.problem.find("AWS_CONTAINER_AUTHORIZATION_TOKEN"), std::string::npos);
  // http:// elsewhere than loopback / the ECS addresses is refused before any request.
  vars_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = "http://10.1.2.3/creds";
  EXPECT_NE(Resolve().problem.find("use https://"), std::string::npos);
  // The relative form is appended to the container host (169.254.170.2 for real).
  vars_.erase("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  vars_["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"] = "/container-credentials/task";
  vars_["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "emulator-aws-container-token";
  options_.container_host = emulator_->url();
  auto rel = Resolve();
  ASSERT_TRUE(rel.credentials) << rel.problem;
  EXPECT_EQ(rel.credentials->origin,
            "container credentials ($AWS_CONTAINER_CREDENTIALS_RELATIVE_URI)");
}

TEST_F(AwsCredentialSources, InstanceProfileThroughImdsV2) {
  // Not on EC2 and no endpoint variable: IMDS is not asked at all.
  auto none = Resolve();
  EXPECT_FALSE(none.credentials);
  EXPECT_NE(none.problem.find("no AWS credentials found"), std::string::npos) << none.problem;
  vars_["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = emulator_->url() + "/";
  auto r = Resolve();
  ASSERT_TRUE(r.credentials) << r.problem;
  EXPECT_EQ(r.credentials->origin, "EC2 instance profile emulator-instance-role (IMDSv2)");
  EXPECT_EQ(Ec2Works(*r.credentials), "");
  std::vector<std::string> requests = emulator_->Requests();
  ASSERT_GE(requests.size(), 3u);
  EXPECT_EQ(requests[0], "PUT /latest/api/token -> 200");
  // Disabled: skipped.
  ClearCredentialCache();
  vars_["AWS_EC2_METADATA_DISABLED"] = "true";
  EXPECT_FALSE(Resolve().credentials);
  // An instance without a role says so.
  vars_.erase("AWS_EC2_METADATA_DISABLED");
  ASSERT_EQ(emulator_->Control("POST", "/settings", R"({"cloud":"aws","instance_role":""})").status,
            200);
  auto norole = Resolve();
  EXPECT_NE(norole.problem.find("no instance profile"), std::string::npos) << norole.problem;
}
#endif  // GPUPROV_EMULATOR_PATH

}  // namespace
}  // namespace gpuprov::aws
