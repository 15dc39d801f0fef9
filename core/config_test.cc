#include "config.h"

#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include "cloud.h"
#include "error.h"
#include "file_util.h"

namespace gpuprov {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

/// The UsageError message ParseConfig throws for \a text ("" if it does not throw).
std::string ErrorFor(std::string_view text) {
  try {
    ParseConfig(text, "config.toml");
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return "";
}

TEST(ConfigTest, EmptyTextGivesDefaults) {
  const Config config = ParseConfig("", "config.toml");
  EXPECT_TRUE(config.loaded);
  EXPECT_FALSE(config.defaults.kubernetes.has_value());
  EXPECT_FALSE(config.defaults.cloud.has_value());
  EXPECT_FALSE(config.defaults.gpus.has_value());
  EXPECT_TRUE(config.clouds.empty());
}

TEST(ConfigTest, ParsesEverySupportedKey) {
  const Config config = ParseConfig(R"(
# comment
[defaults]
kubernetes = false
cloud = "aws"
region = "us-east-1"
gpus = "l4:2"
ssh_key = "~/.ssh/id_ed25519"

[defaults.timeouts]
ssh_wait_seconds = 30
boot_install_wait_seconds = 60
api_wait_seconds = 90

[clouds.aws]
region = "eu-west-1"
max_retries = 3
spot = true

[clouds.lambda-labs_2]
endpoint = "http://127.0.0.1:9000"
)",
                                    "config.toml");
  EXPECT_EQ(config.display_name, "config.toml");
  EXPECT_EQ(config.defaults.kubernetes, false);
  EXPECT_EQ(config.defaults.cloud, "aws");
  EXPECT_EQ(config.defaults.region, "us-east-1");
  EXPECT_EQ(config.defaults.gpus, (GpuRequest{"L4", 2}));
  EXPECT_EQ(config.defaults.ssh_key, "~/.ssh/id_ed25519");
  EXPECT_EQ(config.defaults.timeouts.ssh_wait_seconds, 30);
  EXPECT_EQ(config.defaults.timeouts.boot_install_wait_seconds, 60);
  EXPECT_EQ(config.defaults.timeouts.api_wait_seconds, 90);
  ASSERT_EQ(config.clouds.size(), 2u);
  const CloudSettings& aws = config.clouds.at("aws");
  EXPECT_EQ(std::get<std::string>(aws.at("region")), "eu-west-1");
  EXPECT_EQ(std::get<std::int64_t>(aws.at("max_retries")), 3);
  EXPECT_EQ(std::get<bool>(aws.at("spot")), true);
  EXPECT_EQ(std::get<std::string>(config.clouds.at("lambda-labs_2").at("endpoint")),
            "http://127.0.0.1:9000");
}

TEST(ConfigTest, InlineTimeoutsTableWorksToo) {
  const Config config =
      ParseConfig("[defaults]\ntimeouts = { api_wait_seconds = 5 }\n", "config.toml");
  EXPECT_EQ(config.defaults.timeouts.api_wait_seconds, 5);
}

TEST(ConfigTest, TtlDefaultsAndCheckInterval) {
  const Config config = ParseConfig(
      "[defaults]\nttl = \"8h\"\nidle_ttl = \"off\"\n[defaults.timeouts]\nttl_check_seconds = 2\n"
      "offers_wait_seconds = 3\n",
      "config.toml");
  EXPECT_EQ(config.defaults.ttl_seconds, 28800);
  EXPECT_EQ(config.defaults.idle_ttl_seconds, 0);
  EXPECT_EQ(config.defaults.timeouts.ttl_check_seconds, 2);
  EXPECT_EQ(config.defaults.timeouts.offers_wait_seconds, 3);
  EXPECT_THAT(ErrorFor("[defaults]\nttl = \"soon\"\n"),
              HasSubstr("config.toml:2: key 'defaults.ttl': 'soon' is not a duration"));
}

TEST(ConfigTest, CloudSettingsJson) {
  const Config config = ParseConfig(
      "[clouds.aws]\nregion = \"eu-west-1\"\nmax_retries = 3\nspot = true\nnote = \"a "
      "\\\"q\\\"\"\n",
      "config.toml");
  EXPECT_EQ(CloudSettingsJson(config, "aws"),
            R"({"max_retries":3,"note":"a \"q\"","region":"eu-west-1","spot":true})");
  EXPECT_EQ(CloudSettingsJson(config, "gcp"), "{}");
}

// A driver's init settings carry the pacer folder of the gpuprov home (issue 30: pacing per
// API key across processes), and none when the Config has none.
TEST(ConfigTest, DriverConfigJsonCarriesThePacerFolder) {
  Config config = ParseConfig("[clouds.lambda]\nregion = \"us-east-1\"\n", "config.toml");
  EXPECT_THAT(DriverConfigJson("lambda", config), Not(HasSubstr("pacer_dir")));
  config.pacer_dir = "/home/u/.gpu-provisioner/pacer";
  Poco::JSON::Object::Ptr json = Poco::JSON::Parser()
                                     .parse(DriverConfigJson("lambda", config))
                                     .extract<Poco::JSON::Object::Ptr>();
  EXPECT_EQ(json->getValue<std::string>("pacer_dir"), "/home/u/.gpu-provisioner/pacer");
  EXPECT_EQ(json->getObject("config")->getValue<std::string>("region"), "us-east-1");
}

TEST(ConfigTest, UnknownDefaultsKeyNamesKeyLineAndAllowedKeys) {
  const std::string error = ErrorFor("[defaults]\ncloud = \"aws\"\nregoin = \"x\"\n");
  EXPECT_THAT(error, HasSubstr("config.toml:3: unknown key 'regoin' in [defaults]"));
  EXPECT_THAT(error, HasSubstr("allowed: kubernetes, cloud, region, gpus, ssh_key"));
}

TEST(ConfigTest, UnknownTopLevelTableIsAnError) {
  const std::string error = ErrorFor("[defaults]\n\n[default]\ncloud = \"aws\"\n");
  EXPECT_THAT(error, HasSubstr("config.toml:3: unknown table [default]"));
  EXPECT_THAT(error, HasSubstr("allowed: [defaults], [clouds.<name>]"));
}

TEST(ConfigTest, UnknownTopLevelKeyIsAnError) {
  const std::string error = ErrorFor("cloud = \"aws\"\n");
  EXPECT_THAT(error, HasSubstr("config.toml:1: unknown key 'cloud' at the top level"));
}

TEST(ConfigTest, UnknownTimeoutKeyIsAnError) {
  const std::string error = ErrorFor("[defaults.timeouts]\nssh_wait = 3\n");
  EXPECT_THAT(error, HasSubstr("config.toml:2: unknown key 'ssh_wait' in [defaults.timeouts]"));
  EXPECT_THAT(error, HasSubstr("ssh_wait_seconds, boot_install_wait_seconds, api_wait_seconds"));
}

TEST(ConfigTest, TypeErrorsNameFileLineKeyAndExpectedType) {
  EXPECT_THAT(ErrorFor("[defaults]\n\nkubernetes = \"yes\"\n"),
              HasSubstr("config.toml:3: key 'defaults.kubernetes' must be a boolean (true or "
                        "false), not a string"));
  EXPECT_THAT(ErrorFor("[defaults]\ncloud = 5\n"),
              HasSubstr("config.toml:2: key 'defaults.cloud' must be a string, not an integer"));
  EXPECT_THAT(ErrorFor("[defaults]\nregion = [\"a\"]\n"),
              HasSubstr("config.toml:2: key 'defaults.region' must be a string, not an array"));
  EXPECT_THAT(ErrorFor("[defaults.timeouts]\napi_wait_seconds = 1.5\n"),
              HasSubstr("config.toml:2: key 'defaults.timeouts.api_wait_seconds' must be a "
                        "positive integer (seconds), not a float"));
  EXPECT_THAT(ErrorFor("[defaults]\ntimeouts = 5\n"),
              HasSubstr("config.toml:2: key 'defaults.timeouts' must be a table"));
  EXPECT_THAT(ErrorFor("defaults = 1\n"), HasSubstr("key 'defaults' must be a table"));
  EXPECT_THAT(ErrorFor("clouds = 1\n"), HasSubstr("key 'clouds' must be a table"));
}

TEST(ConfigTest, TimeoutsMustBePositive) {
  EXPECT_THAT(ErrorFor("[defaults.timeouts]\nssh_wait_seconds = 0\n"),
              HasSubstr("config.toml:2: key 'defaults.timeouts.ssh_wait_seconds' must be a "
                        "positive integer (seconds), not 0"));
  EXPECT_THAT(ErrorFor("[defaults.timeouts]\nssh_wait_seconds = 99999999999\n"),
              HasSubstr("must be a positive integer"));
}

TEST(ConfigTest, GpusAreValidated) {
  EXPECT_THAT(ErrorFor("[defaults]\ngpus = \"L4:x\"\n"),
              HasSubstr("config.toml:2: key 'defaults.gpus': \"L4:x\" is not TYPE:COUNT; write "
                        "e.g. L4:1 or H100-80GB:8"));
}

TEST(ConfigTest, CloudNamesAreValidated) {
  EXPECT_THAT(ErrorFor("[defaults]\ncloud = \"AWS\"\n"),
              HasSubstr("config.toml:2: key 'defaults.cloud': \"AWS\" is not a cloud name"));
  EXPECT_THAT(ErrorFor("[clouds.AWS]\nregion = \"x\"\n"),
              HasSubstr("table [clouds.AWS]: 'AWS' is not a cloud name"));
  EXPECT_THAT(ErrorFor("[clouds]\naws = 1\n"),
              HasSubstr("config.toml:2: key 'clouds.aws' must be a table"));
}

TEST(ConfigTest, EmptyStringsAreRejected) {
  EXPECT_THAT(ErrorFor("[defaults]\nregion = \"\"\n"),
              HasSubstr("config.toml:2: key 'defaults.region' must not be empty"));
}

TEST(ConfigTest, CloudValuesAreScalarsStringListsOrOneLevelOfTable) {
  const Config config = ParseConfig(
      "[clouds.aws]\nregions = [\"us-east-1\", \"eu-west-1\"]\n"
      "retry = {max_attempts = 6, base_delay_ms = 500}\nnone = []\n\n"
      "[clouds.gcp.retry]\nmax_attempts = 2\nflags = [\"x\"]\n",
      "config.toml");
  const CloudSettings& aws = config.clouds.at("aws");
  EXPECT_EQ(std::get<std::vector<std::string>>(aws.at("regions")),
            (std::vector<std::string>{"us-east-1", "eu-west-1"}));
  EXPECT_TRUE(std::get<std::vector<std::string>>(aws.at("none")).empty());
  const auto& retry = std::get<CloudSettingTable>(aws.at("retry"));
  EXPECT_EQ(std::get<std::int64_t>(retry.at("max_attempts")), 6);
  // Each member's line, for the driver's key check.
  EXPECT_EQ(config.cloud_key_lines.at("aws").at("retry"), 3);
  EXPECT_EQ(config.cloud_key_lines.at("aws").at("retry.base_delay_ms"), 3);
  EXPECT_EQ(config.cloud_key_lines.at("gcp").at("retry.max_attempts"), 7);
  EXPECT_EQ(CloudSettingsJson(config, "aws"),
            R"({"none":[],"regions":["us-east-1","eu-west-1"],)"
            R"("retry":{"base_delay_ms":500,"max_attempts":6}})");
  EXPECT_EQ(CloudSettingsJson(config, "gcp"), R"({"retry":{"flags":["x"],"max_attempts":2}})");
}

TEST(ConfigTest, CloudValuesOfOtherShapesAreRefusedWithTheirLine) {
  EXPECT_THAT(ErrorFor("[clouds.aws]\nzones = [\"a\", 2]\n"),
              HasSubstr("config.toml:2: key 'clouds.aws.zones' must hold only strings, not an "
                        "integer"));
  EXPECT_THAT(ErrorFor("[clouds.aws]\nprice = 1.5\n"),
              HasSubstr("config.toml:2: key 'clouds.aws.price' must be a string, an integer, a "
                        "boolean, an array of strings or a table, not a float"));
  EXPECT_THAT(ErrorFor("[clouds.aws.sub]\nx = 1\n\n[clouds.aws.sub.deeper]\ny = 2\n"),
              HasSubstr("key 'clouds.aws.sub.deeper' must be a string, an integer, a boolean or "
                        "an array of strings, not a table"));
  EXPECT_THAT(ErrorFor("[clouds.aws]\nretry = {max_attempts = [1]}\n"),
              HasSubstr("config.toml:2: key 'clouds.aws.retry.max_attempts' must hold only "
                        "strings, not an integer"));
}

TEST(ConfigTest, SyntaxErrorNamesFileAndLine) {
  const std::string error = ErrorFor("[defaults]\ncloud = \"aws\"\nregion =\n");
  EXPECT_THAT(error, HasSubstr("config.toml:3: TOML syntax error:"));
  EXPECT_THAT(error, Not(HasSubstr("\n")));
}

// toml11 3.7.1 read outside its buffer while reporting invalid UTF-8 in a literal string
// (fuzzing found it: tests/fuzz/corpus/config/crash-toml11-invalid-utf8-in-literal-string), so
// text that is not UTF-8 is refused before toml11 sees it, naming the line and the byte.
TEST(ConfigTest, TextThatIsNotUtf8IsRefusedNamingLineAndByte) {
  EXPECT_THAT(ErrorFor("[defaults]\n'\xfd<o' = 1\n"),
              HasSubstr("config.toml:2: not UTF-8 text (byte 0xFD); a TOML file must be UTF-8"));
  // Overlong form, surrogate, above U+10FFFF, cut short at the end.
  for (const char* bad : {"a = '\xc0\xaf'\n", "a = '\xed\xa0\x80'\n", "a = '\xf4\x90\x80\x80'\n",
                          "a = '\xe2\x82"}) {
    EXPECT_THAT(ErrorFor(bad), HasSubstr("config.toml:1: not UTF-8 text")) << bad;
  }
  // Well-formed UTF-8 of every length still parses.
  EXPECT_NO_THROW(ParseConfig("# caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80\n[defaults]\n", "config.toml"));
}

TEST(ConfigTest, NestingDeeperThan32IsRefusedBeforeToml11NamingTheLine) {
  // toml11 recurses per level: thousands of `[` overflowed the stack (found by fuzzing).
  const std::string deep = "[defaults]\ncloud = " + std::string(5000, '[') + "\n";
  EXPECT_THAT(ErrorFor(deep), HasSubstr("config.toml:2: arrays or inline tables nested more than 32 deep"));
  EXPECT_THAT(ErrorFor("x = " + std::string(33, '{') + "\n"), HasSubstr("nested more than 32 deep"));
  // 32 levels reach toml11, which judges the rest.
  EXPECT_THAT(ErrorFor("x = " + std::string(32, '[') + std::string(32, ']') + "\n"),
              Not(HasSubstr("nested")));
  // Brackets inside comments and the four string forms are not nesting.
  const auto message_or_empty = [](const std::string& text) -> std::string {
    try {
      ParseConfig(text, "config.toml");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const std::string many(100, '[');
  for (const std::string& text :
       {"# " + many + "\n[defaults]\n", "[defaults]\ncloud = \"" + many + "\\\"\"\n",
        "[defaults]\ncloud = '" + many + "'\n", "[defaults]\ncloud = \"\"\"\n" + many + "\"\"\"\n",
        "[defaults]\ncloud = '''" + many + "\n'''\n"}) {
    EXPECT_THAT(message_or_empty(text), Not(HasSubstr("nested"))) << text;
  }
}

TEST(ConfigTest, BinaryIntegerOf63DigitsOrMoreIsRefusedBeforeToml11NamingTheLine) {
  // toml11 doubles a signed 64-bit place value per binary digit: the 63rd overflowed (found by
  // fuzzing), even with leading zeros.
  EXPECT_THAT(ErrorFor("[defaults]\nttl = 0b" + std::string(63, '0') + "\n"),
              HasSubstr("config.toml:2: a binary integer (0b...) of 63 or more digits"));
  EXPECT_THAT(ErrorFor("x = [1, 0b1_" + std::string(70, '1') + "]\n"), HasSubstr("config.toml:1: a binary integer"));
  // 62 digits (underscores not counted) reach toml11, which reads them.
  const std::string ok = "0b" + std::string(31, '1') + "_" + std::string(31, '1');
  EXPECT_THAT(ErrorFor("x = " + ok + "\n"), Not(HasSubstr("binary integer")));
  // Inside strings, comments and words it is not an integer.
  // (Each is refused for its unknown key instead.)
  for (const std::string& text : {"# 0b" + std::string(80, '1') + "\nx = 1\n", "x = \"0b" + std::string(80, '1') + "\"\n",
                                  "a0b" + std::string(80, '1') + " = 1\n"}) {
    EXPECT_THAT(ErrorFor(text), Not(HasSubstr("binary integer"))) << text;
  }
}

TEST(ConfigTest, DuplicateKeyIsASyntaxError) {
  EXPECT_THAT(ErrorFor("[defaults]\ncloud = \"aws\"\ncloud = \"gcp\"\n"),
              HasSubstr("config.toml:3: TOML syntax error:"));
}

TEST(ConfigTest, SecretValuesAreNeverEchoed) {
  // A syntax error on a line with a secret-looking key.
  std::string error = ErrorFor("[clouds.aws]\napi_token = \"hunter2-very-secret\" trailing\n");
  EXPECT_THAT(error, HasSubstr("config.toml:2:"));
  EXPECT_THAT(error, Not(HasSubstr("hunter2")));
  EXPECT_THAT(error, Not(HasSubstr("trailing")));
  // An unterminated string holding a secret.
  error = ErrorFor("[clouds.aws]\npassword = \"hunter2\n");
  EXPECT_THAT(error, Not(HasSubstr("hunter2")));
  // A type error on a secret-looking key.
  error = ErrorFor("[defaults]\nssh_key = [\"hunter2\"]\n");
  EXPECT_THAT(error, HasSubstr("key 'defaults.ssh_key' must be a string"));
  EXPECT_THAT(error, Not(HasSubstr("hunter2")));
}

TEST(ConfigTest, IsSecretKeyName) {
  EXPECT_TRUE(IsSecretKeyName("token"));
  EXPECT_TRUE(IsSecretKeyName("API_TOKEN"));
  EXPECT_TRUE(IsSecretKeyName("client_secret"));
  EXPECT_TRUE(IsSecretKeyName("ssh_key"));
  EXPECT_TRUE(IsSecretKeyName("Password"));
  EXPECT_FALSE(IsSecretKeyName("region"));
  EXPECT_FALSE(IsSecretKeyName("kubernetes"));
}

TEST(ConfigTest, LoadMissingFileGivesDefaults) {
  const Config config = LoadConfig("/nonexistent/gpuprov/config.toml");
  EXPECT_FALSE(config.loaded);
  EXPECT_EQ(config.display_name, "/nonexistent/gpuprov/config.toml");
  EXPECT_FALSE(config.defaults.cloud.has_value());
}

TEST(ConfigTest, LoadUsesThePathInMessages) {
  std::string dir = (std::filesystem::temp_directory_path() / "gpuprov-config-XXXXXX");
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::filesystem::path path = std::filesystem::path(dir) / "config.toml";
  WriteFileAtomic(path, "[defaults]\ncloud = \"gcp\"\n");
  EXPECT_EQ(LoadConfig(path).defaults.cloud, "gcp");
  EXPECT_TRUE(LoadConfig(path).loaded);
  WriteFileAtomic(path, "[defaults]\nclod = \"gcp\"\n");
  try {
    LoadConfig(path);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string() + ":2: unknown key 'clod'"));
  }
  std::filesystem::remove_all(dir);
}

TEST(ConfigTest, K3sReleaseDefaults) {
  const Config config = ParseConfig(
      "[defaults]\nk3s_version = \"v1.30.2+k3s1\"\nk3s_sha256 = \"" + std::string(64, 'c') +
          "\"\nk3s_download_url = \"https://mirror.example/k3s\"\n",
      "config.toml");
  EXPECT_EQ(config.defaults.k3s_version, "v1.30.2+k3s1");
  EXPECT_EQ(config.defaults.k3s_sha256, std::string(64, 'c'));
  EXPECT_EQ(config.defaults.k3s_download_url, "https://mirror.example/k3s");
  EXPECT_THAT(ErrorFor("[defaults]\nk3s_version = 136\n"),
              HasSubstr("key 'defaults.k3s_version' must be a string"));
  EXPECT_THAT(ErrorFor("[defaults]\nk3s_download_url = \"\"\n"),
              HasSubstr("key 'defaults.k3s_download_url' must not be empty"));
}

TEST(ConfigTest, NvidiaRepoDefaults) {
  const Config config = ParseConfig(
      "[defaults]\nnvidia_repo_url = \"https://mirror.example/nvidia\"\n"
      "nvidia_key_fingerprint = \"" + std::string(40, 'a') + "\"\n",
      "config.toml");
  EXPECT_EQ(config.defaults.nvidia_repo_url, "https://mirror.example/nvidia");
  EXPECT_EQ(config.defaults.nvidia_key_fingerprint, std::string(40, 'a'));
  EXPECT_THAT(ErrorFor("[defaults]\nnvidia_repo_url = 1\n"),
              HasSubstr("key 'defaults.nvidia_repo_url' must be a string"));
  EXPECT_THAT(ErrorFor("[defaults]\nnvidia_key_fingerprint = \"\"\n"),
              HasSubstr("key 'defaults.nvidia_key_fingerprint' must not be empty"));
}

TEST(ConfigTest, AllowFromIsAListOfStringsAndAllowFromSshABoolean) {
  const Config config = ParseConfig(
      "[defaults]\nallow_from = [\"10.0.0.0/8\", \"2001:db8::/32\"]\nallow_from_ssh = true\n",
      "config.toml");
  ASSERT_TRUE(config.defaults.allow_from);
  EXPECT_EQ(*config.defaults.allow_from,
            (std::vector<std::string>{"10.0.0.0/8", "2001:db8::/32"}));
  EXPECT_EQ(config.defaults.allow_from_ssh, true);
  EXPECT_THAT(ErrorFor("[defaults]\nallow_from = \"10.0.0.0/8\"\n"),
              HasSubstr("key 'defaults.allow_from' must be an array of CIDR strings"));
  EXPECT_THAT(ErrorFor("[defaults]\nallow_from = [1]\n"),
              HasSubstr("must be an array of CIDR strings"));
  EXPECT_THAT(ErrorFor("[defaults]\nallow_from_ssh = \"yes\"\n"),
              HasSubstr("key 'defaults.allow_from_ssh' must be a boolean"));
}

TEST(ConfigTest, MergeKubeconfigIsABooleanAndTunnelFirstPortAPort) {
  const Config config =
      ParseConfig("[defaults]\nmerge_kubeconfig = true\ntunnel_first_port = 20000\n", "config.toml");
  EXPECT_EQ(config.defaults.merge_kubeconfig, true);
  EXPECT_EQ(config.defaults.tunnel_first_port, 20000);
  EXPECT_THAT(ErrorFor("[defaults]\nmerge_kubeconfig = 1\n"),
              HasSubstr("key 'defaults.merge_kubeconfig' must be a boolean"));
  EXPECT_THAT(ErrorFor("[defaults]\ntunnel_first_port = 80\n"),
              HasSubstr("key 'defaults.tunnel_first_port' must be a port number from 1024 to 65535"));
  EXPECT_THAT(ErrorFor("[defaults]\ntunnel_first_port = \"16443\"\n"),
              HasSubstr("must be a port number"));
}

TEST(ConfigTest, ConfirmAbovePerHourIsANonNegativePrice) {
  EXPECT_EQ(ParseConfig("[defaults]\nconfirm_above_per_hour = 2.5\n", "config.toml")
                .defaults.confirm_above_per_hour,
            2.5);
  EXPECT_EQ(ParseConfig("[defaults]\nconfirm_above_per_hour = 10\n", "config.toml")
                .defaults.confirm_above_per_hour,
            10.0);
  EXPECT_FALSE(ParseConfig("", "config.toml").defaults.confirm_above_per_hour);
  EXPECT_THAT(ErrorFor("[defaults]\nconfirm_above_per_hour = \"5\"\n"),
              HasSubstr("key 'defaults.confirm_above_per_hour' must be a price in dollars"));
  EXPECT_THAT(ErrorFor("[defaults]\nconfirm_above_per_hour = -1.0\n"),
              HasSubstr("must be a price in dollars per hour of 0 or more"));
}

TEST(ConfigTest, SmokeTestIsABooleanAndItsImageAString) {
  const Config config = ParseConfig(
      "[defaults]\nsmoke_test = false\nsmoke_test_image = \"reg.example/cuda:1\"\n", "config.toml");
  EXPECT_EQ(config.defaults.smoke_test, false);
  EXPECT_EQ(config.defaults.smoke_test_image, "reg.example/cuda:1");
  EXPECT_THAT(ErrorFor("[defaults]\nsmoke_test = \"no\"\n"),
              HasSubstr("key 'defaults.smoke_test' must be a boolean"));
}

}  // namespace
}  // namespace gpuprov
