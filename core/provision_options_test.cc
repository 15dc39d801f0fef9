#include "provision_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error.h"
#include "installer_text.h"

namespace gpuprov {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

EnvLookup MapEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

ProvisionFlags Named(const std::string& name = "box") {
  ProvisionFlags flags;
  flags.name = name;
  return flags;
}

Spec SpecNamed(const std::string& display_name = "spec.yaml") {
  Spec spec;
  spec.display_name = display_name;
  return spec;
}

Config ConfigFrom(std::string_view text) { return ParseConfig(text, "config.toml"); }

TEST(ProvisionOptionsTest, BuiltInDefaults) {
  const ProvisionOptions o = ResolveProvisionOptions(Named(), Spec{}, MapEnv({}), Config{});
  EXPECT_EQ(o.name.value, "box");
  EXPECT_EQ(o.name.source, Source::kFlag);
  // No built-in cloud: provision picks the only one with credentials (check_command.h).
  EXPECT_EQ(o.cloud.value, "");
  EXPECT_EQ(o.cloud.source, Source::kDefault);
  EXPECT_FALSE(o.gpus.value.has_value());
  EXPECT_EQ(o.gpus.source, Source::kDefault);
  EXPECT_TRUE(o.kubernetes.value);
  EXPECT_EQ(o.kubernetes.source, Source::kDefault);
  EXPECT_FALSE(o.region.value.has_value());
  EXPECT_FALSE(o.image.value.has_value());
  EXPECT_FALSE(o.ssh_key.value.has_value());
  EXPECT_FALSE(o.disk_gb.value.has_value());
  EXPECT_EQ(o.ssh_wait_seconds.value, kDefaultSshWaitSeconds);
  EXPECT_EQ(o.boot_install_wait_seconds.value, 900);
  EXPECT_EQ(o.api_wait_seconds.value, 600);
}

TEST(ProvisionOptionsTest, MissingNameIsAUsageError) {
  try {
    ResolveProvisionOptions(ProvisionFlags{}, SpecNamed(), MapEnv({}), Config{});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_THAT(e.what(), HasSubstr("missing --name"));
  }
}

TEST(ProvisionOptionsTest, NameFromSpecOrFlag) {
  Spec spec = SpecNamed();
  spec.name = "from-spec";
  ProvisionOptions o = ResolveProvisionOptions(ProvisionFlags{}, spec, MapEnv({}), Config{});
  EXPECT_EQ(o.name.value, "from-spec");
  EXPECT_EQ(o.name.source, Source::kSpec);
  EXPECT_EQ(o.name.origin, "spec.yaml");
  o = ResolveProvisionOptions(Named("from-flag"), spec, MapEnv({}), Config{});
  EXPECT_EQ(o.name.value, "from-flag");
  EXPECT_EQ(o.name.source, Source::kFlag);
}

TEST(ProvisionOptionsTest, FlagNameIsValidated) {
  EXPECT_THROW(ResolveProvisionOptions(Named("Bad_Name"), Spec{}, MapEnv({}), Config{}), Error);
}

/// One layer per source for each field that all five sources can set.
TEST(ProvisionOptionsTest, PrecedenceFlagsSpecEnvConfigDefault) {
  const Config config = ConfigFrom(
      "[defaults]\ncloud = \"c-config\"\nregion = \"r-config\"\ngpus = \"L4:1\"\n"
      "kubernetes = false\n");
  const EnvLookup env = MapEnv({{"GPUPROV_CLOUD", "c-env"},
                                {"GPUPROV_REGION", "r-env"},
                                {"GPUPROV_GPUS", "L4:2"},
                                {"GPUPROV_KUBERNETES", "yes"},
                                {"GPUPROV_IMAGE", "i-env"}});
  Spec spec = SpecNamed();
  spec.cloud = "c-spec";
  spec.region = "r-spec";
  spec.gpus = GpuRequest{"L4", 3};
  spec.kubernetes = false;
  spec.image = "i-spec";
  ProvisionFlags flags = Named();
  flags.cloud = "c-flag";
  flags.region = "r-flag";
  flags.gpus = GpuRequest{"L4", 4};
  flags.kubernetes = true;
  flags.image = "i-flag";

  ProvisionOptions o = ResolveProvisionOptions(flags, spec, env, config);
  EXPECT_EQ(o.cloud.value, "c-flag");
  EXPECT_EQ(o.region.value, "r-flag");
  EXPECT_EQ(o.gpus.value, (GpuRequest{"L4", 4}));
  EXPECT_EQ(o.kubernetes.value, true);
  EXPECT_EQ(o.kubernetes.origin, "--k8s");
  EXPECT_EQ(o.image.value, "i-flag");
  EXPECT_EQ(o.cloud.source, Source::kFlag);

  o = ResolveProvisionOptions(Named(), spec, env, config);
  EXPECT_EQ(o.cloud.value, "c-spec");
  EXPECT_EQ(o.region.value, "r-spec");
  EXPECT_EQ(o.gpus.value, (GpuRequest{"L4", 3}));
  EXPECT_EQ(o.kubernetes.value, false);
  EXPECT_EQ(o.image.value, "i-spec");
  EXPECT_EQ(o.kubernetes.source, Source::kSpec);

  o = ResolveProvisionOptions(Named(), SpecNamed(), env, config);
  EXPECT_EQ(o.cloud.value, "c-env");
  EXPECT_EQ(o.region.value, "r-env");
  EXPECT_EQ(o.gpus.value, (GpuRequest{"L4", 2}));
  EXPECT_EQ(o.kubernetes.value, true);
  EXPECT_EQ(o.image.value, "i-env");
  EXPECT_EQ(o.kubernetes.source, Source::kEnv);
  EXPECT_EQ(o.kubernetes.origin, "GPUPROV_KUBERNETES");

  o = ResolveProvisionOptions(Named(), SpecNamed(), MapEnv({}), config);
  EXPECT_EQ(o.cloud.value, "c-config");
  EXPECT_EQ(o.region.value, "r-config");
  EXPECT_EQ(o.gpus.value, (GpuRequest{"L4", 1}));
  EXPECT_EQ(o.kubernetes.value, false);
  EXPECT_EQ(o.kubernetes.source, Source::kConfig);
  EXPECT_EQ(o.kubernetes.origin, "config.toml [defaults]");
  EXPECT_FALSE(o.image.value.has_value());
}

TEST(ProvisionOptionsTest, EmptyEnvValuesCountAsUnset) {
  const ProvisionOptions o = ResolveProvisionOptions(
      Named(), Spec{}, MapEnv({{"GPUPROV_CLOUD", ""}, {"GPUPROV_KUBERNETES", ""}}), Config{});
  EXPECT_EQ(o.cloud.value, "");
  EXPECT_EQ(o.cloud.source, Source::kDefault);
  EXPECT_EQ(o.kubernetes.source, Source::kDefault);
}

struct EnvBoolCase {
  const char* text;
  bool value;
};

class EnvKubernetesTest : public ::testing::TestWithParam<EnvBoolCase> {};

TEST_P(EnvKubernetesTest, ParsesBooleanWords) {
  const ProvisionOptions o = ResolveProvisionOptions(
      Named(), Spec{}, MapEnv({{"GPUPROV_KUBERNETES", GetParam().text}}), Config{});
  EXPECT_EQ(o.kubernetes.value, GetParam().value);
  EXPECT_EQ(o.kubernetes.source, Source::kEnv);
}

INSTANTIATE_TEST_SUITE_P(ProvisionOptions, EnvKubernetesTest,
                         ::testing::Values(EnvBoolCase{"true", true}, EnvBoolCase{"1", true},
                                           EnvBoolCase{"yes", true}, EnvBoolCase{"TRUE", true},
                                           EnvBoolCase{"false", false}, EnvBoolCase{"0", false},
                                           EnvBoolCase{"no", false}, EnvBoolCase{"No", false}));

TEST(ProvisionOptionsTest, BadEnvValuesNameTheVariable) {
  auto error_for = [](std::map<std::string, std::string> vars) -> std::string {
    try {
      ResolveProvisionOptions(Named(), Spec{}, MapEnv(std::move(vars)), Config{});
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), kExitUsage);
      return e.what();
    }
    return "";
  };
  EXPECT_THAT(error_for({{"GPUPROV_KUBERNETES", "maybe"}}),
              HasSubstr("GPUPROV_KUBERNETES: \"maybe\" is not a boolean; use true/false, 1/0 or "
                        "yes/no"));
  EXPECT_THAT(error_for({{"GPUPROV_GPUS", "L4"}}),
              HasSubstr("GPUPROV_GPUS: \"L4\" is not TYPE:COUNT"));
  EXPECT_THAT(error_for({{"GPUPROV_CLOUD", "AWS"}}),
              HasSubstr("GPUPROV_CLOUD: \"AWS\" is not a cloud name"));
}

TEST(ProvisionOptionsTest, BadFlagsNameTheFlag) {
  ProvisionFlags flags = Named();
  flags.cloud = "Amazon Web Services";
  EXPECT_THROW(ResolveProvisionOptions(flags, Spec{}, MapEnv({}), Config{}), Error);
  flags = Named();
  flags.disk_gb = 5;
  try {
    ResolveProvisionOptions(flags, Spec{}, MapEnv({}), Config{});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("--disk-gb"));
  }
}

TEST(ProvisionOptionsTest, FlagAndSpecOnlyFields) {
  Spec spec = SpecNamed();
  spec.instance_type = "g6.xlarge";
  spec.disk_gb = 200;
  spec.ssh_key = "/keys/spec";
  spec.tags = std::map<std::string, std::string>{{"team", "ml"}, {"owner", "alice"}};
  ProvisionFlags flags = Named();
  flags.disk_gb = 300;
  flags.tags = {{"owner", "bob"}, {"env", "dev"}};
  const ProvisionOptions o = ResolveProvisionOptions(flags, spec, MapEnv({}), Config{});
  EXPECT_EQ(o.instance_type.value, "g6.xlarge");
  EXPECT_EQ(o.instance_type.source, Source::kSpec);
  EXPECT_EQ(o.disk_gb.value, 300);
  EXPECT_EQ(o.disk_gb.source, Source::kFlag);
  EXPECT_EQ(o.ssh_key.value, "/keys/spec");
  const std::map<std::string, std::string> tags{{"team", "ml"}, {"owner", "bob"}, {"env", "dev"}};
  EXPECT_EQ(o.tags, tags);
}

TEST(ProvisionOptionsTest, SshKeyFromConfigWithTildeIsExpanded) {
  const Config config = ConfigFrom("[defaults]\nssh_key = \"~/.ssh/id_ed25519\"\n");
  const ProvisionOptions o =
      ResolveProvisionOptions(Named(), Spec{}, MapEnv({{"HOME", "/home/u"}}), config);
  EXPECT_EQ(o.ssh_key.value, "/home/u/.ssh/id_ed25519");
  EXPECT_EQ(o.ssh_key.source, Source::kConfig);
}

TEST(ProvisionOptionsTest, TimeoutsComeFromConfig) {
  const Config config =
      ConfigFrom("[defaults.timeouts]\nssh_wait_seconds = 5\napi_wait_seconds = 7\n");
  const ProvisionOptions o = ResolveProvisionOptions(Named(), Spec{}, MapEnv({}), config);
  EXPECT_EQ(o.ssh_wait_seconds.value, 5);
  EXPECT_EQ(o.ssh_wait_seconds.source, Source::kConfig);
  EXPECT_EQ(o.ssh_wait_seconds.origin, "config.toml [defaults.timeouts]");
  EXPECT_EQ(o.boot_install_wait_seconds.value, 900);
  EXPECT_EQ(o.boot_install_wait_seconds.source, Source::kDefault);
  EXPECT_EQ(o.api_wait_seconds.value, 7);
}

TEST(ProvisionOptionsTest, DescribeSaysWhereEachValueCameFrom) {
  const Config config = ConfigFrom("[defaults]\nkubernetes = false\n");
  ProvisionFlags flags = Named();
  flags.cloud = "aws";
  const std::vector<std::string> lines =
      DescribeProvisionOptions(ResolveProvisionOptions(flags, Spec{}, MapEnv({}), config));
  EXPECT_THAT(lines, Contains("kubernetes=false (from config.toml [defaults])"));
  EXPECT_THAT(lines, Contains("cloud=aws (--cloud from the command line)"));
  EXPECT_THAT(lines, Contains("name=box (--name from the command line)"));
  EXPECT_THAT(lines, Contains("gpus=none (built-in default)"));
}

TEST(ProvisionOptionsTest, DescribeOrigin) {
  EXPECT_EQ(DescribeOrigin(Source::kFlag, "--no-k8s"), "--no-k8s from the command line");
  EXPECT_EQ(DescribeOrigin(Source::kSpec, "spec.yaml"), "from spec.yaml");
  EXPECT_EQ(DescribeOrigin(Source::kEnv, "GPUPROV_CLOUD"), "from GPUPROV_CLOUD");
  EXPECT_EQ(DescribeOrigin(Source::kConfig, "config.toml [defaults]"),
            "from config.toml [defaults]");
  EXPECT_EQ(DescribeOrigin(Source::kDefault, ""), "built-in default");
  EXPECT_STREQ(SourceName(Source::kEnv), "env");
}

TEST(ProvisionOptionsTest, BootWaitIsSeparateFromSshWait) {
  const Config config = ConfigFrom(
      "[defaults.timeouts]\nboot_wait_seconds = 45\nssh_wait_seconds = 12\n");
  ProvisionOptions o = ResolveProvisionOptions(Named(), Spec{}, MapEnv({}), config);
  EXPECT_EQ(o.boot_wait_seconds.value, 45);
  EXPECT_EQ(o.boot_wait_seconds.origin, "config.toml [defaults.timeouts]");
  EXPECT_EQ(o.ssh_wait_seconds.value, 12);
  o = ResolveProvisionOptions(Named(), Spec{}, MapEnv({}), ConfigFrom(""));
  EXPECT_EQ(o.boot_wait_seconds.value, kDefaultBootWaitSeconds);
  EXPECT_EQ(o.boot_wait_seconds.source, Source::kDefault);
}

TEST(ProvisionOptionsTest, InstallRouteFlagTakesAutoBootOrSsh) {
  EXPECT_EQ(ParseInstallRoute("auto"), InstallRoute::kAuto);
  EXPECT_EQ(ParseInstallRoute("boot"), InstallRoute::kBoot);
  EXPECT_EQ(ParseInstallRoute("ssh"), InstallRoute::kSsh);
  EXPECT_EQ(ProvisionFlags{}.install_route, InstallRoute::kAuto);
  for (const char* bad : {"", "SSH", "cloud-init", "boot "}) {
    try {
      ParseInstallRoute(bad);
      ADD_FAILURE() << "accepted --install-route " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), kExitUsage);
      EXPECT_THAT(e.what(), HasSubstr("--install-route"));
      EXPECT_THAT(e.hint(), HasSubstr("auto"));
    }
  }
}

TEST(ProvisionOptionsTest, DiskGbFlagIsAWholeNumberInRange) {
  EXPECT_EQ(ParseDiskGbFlag("200"), 200);
  EXPECT_EQ(ParseDiskGbFlag("10"), 10);
  for (const char* bad : {"", "abc", "-5", "12.5", "9", "10001", "99999999999", "1e3"}) {
    try {
      ParseDiskGbFlag(bad);
      ADD_FAILURE() << "accepted --disk-gb " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), kExitUsage);
      EXPECT_THAT(e.what(), HasSubstr("--disk-gb"));
      EXPECT_THAT(e.hint(), HasSubstr("from 10 to 10000"));
    }
  }
}

TEST(ProvisionOptionsTest, TagFlagsAreKeyValuePairs) {
  std::map<std::string, std::string> tags;
  AddTagFlag("team=ml", tags);
  AddTagFlag("owner=", tags);
  AddTagFlag("cost-center=a=b", tags);  // the first '=' separates
  EXPECT_EQ(tags, (std::map<std::string, std::string>{
                      {"team", "ml"}, {"owner", ""}, {"cost-center", "a=b"}}));
  auto error = [&](const std::string& text) {
    try {
      AddTagFlag(text, tags);
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), kExitUsage);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(error("team"), HasSubstr("--tag 'team': no '='"));
  EXPECT_THAT(error("=ml"), HasSubstr("the key must be"));
  EXPECT_THAT(error("bad key=x"), HasSubstr("the key must be"));
  EXPECT_THAT(error("team=other"), HasSubstr("--tag team is given twice"));
  EXPECT_THAT(error("gpuprov=0"), HasSubstr("is a tag gpuprov sets itself"));
  EXPECT_THAT(error("gpuprov-name=x"), HasSubstr("is a tag gpuprov sets itself"));
  EXPECT_THAT(error("note=a\nb"), HasSubstr("printable"));
}

TEST(ProvisionOptionsTest, FlagTagsOverlayTheSpecsAndReservedOnesAreRefused) {
  Spec spec = SpecNamed();
  spec.tags = std::map<std::string, std::string>{{"team", "ml"}, {"owner", "alice"}};
  ProvisionFlags flags = Named();
  flags.tags = {{"team", "infra"}};
  ProvisionOptions o = ResolveProvisionOptions(flags, spec, MapEnv({}), ConfigFrom(""));
  EXPECT_EQ(o.tags, (std::map<std::string, std::string>{{"owner", "alice"}, {"team", "infra"}}));
  spec.tags = std::map<std::string, std::string>{{"gpuprov-name", "other"}};
  try {
    ResolveProvisionOptions(Named(), spec, MapEnv({}), ConfigFrom(""));
    ADD_FAILURE() << "a spec tag named gpuprov-name was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tags in spec.yaml: 'gpuprov-name' is a tag gpuprov sets"));
  }
}

constexpr const char* kOtherSha = "ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789";

/// The UsageError message of resolving \a flags with \a spec and \a config ("" when none).
std::string RefusalOf(const ProvisionFlags& flags, const Spec& spec = Spec{},
                      const Config& config = Config{}) {
  try {
    ResolveProvisionOptions(flags, spec, MapEnv({}), config);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    return std::string(e.what()) + " | " + e.hint();
  }
  return "";
}

TEST(ProvisionOptionsTest, K3sDefaultsToTheInstallersPin) {
  const ProvisionOptions o = ResolveProvisionOptions(Named(), Spec{}, MapEnv({}), Config{});
  EXPECT_FALSE(o.k3s_version.value);
  EXPECT_FALSE(o.k3s_sha256.value);
  EXPECT_FALSE(o.k3s_download_url.value);
  EXPECT_THAT(DescribeProvisionOptions(o),
              Contains("k3s_version=" + PinnedK3sRelease().version + " (pinned) (built-in default)"));
}

TEST(ProvisionOptionsTest, AnotherK3sVersionWithoutSha256IsRefusedNamingTheFlag) {
  ProvisionFlags flags = Named();
  flags.k3s_version = "v1.30.2+k3s1";
  const std::string refusal = RefusalOf(flags);
  EXPECT_THAT(refusal, HasSubstr("--k3s-version v1.30.2+k3s1 (--k3s-version from the command line) "
                                 "has no known sha256"));
  EXPECT_THAT(refusal, HasSubstr("add --k3s-sha256 HEX"));
  EXPECT_THAT(refusal, HasSubstr("or drop --k3s-version to install " + PinnedK3sRelease().version));
  // From the config file or the spec: the message says where it came from.
  EXPECT_THAT(RefusalOf(Named(), Spec{}, ConfigFrom("[defaults]\nk3s_version = \"v1.30.2+k3s1\"\n")),
              HasSubstr("k3s_version v1.30.2+k3s1 (from config.toml [defaults]) has no known sha256"));
  Spec spec = SpecNamed();
  spec.k3s_version = "v1.30.2+k3s1";
  EXPECT_THAT(RefusalOf(Named(), spec), HasSubstr("(from spec.yaml) has no known sha256"));
}

TEST(ProvisionOptionsTest, AnotherK3sVersionWithSha256IsKept) {
  ProvisionFlags flags = Named();
  flags.k3s_version = "v1.30.2+k3s1";
  flags.k3s_sha256 = kOtherSha;
  flags.k3s_download_url = "http://127.0.0.1:8089/k3s/";
  const ProvisionOptions o = ResolveProvisionOptions(flags, Spec{}, MapEnv({}), Config{});
  EXPECT_EQ(o.k3s_version.value, "v1.30.2+k3s1");
  EXPECT_EQ(o.k3s_sha256.value, "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
  EXPECT_EQ(o.k3s_download_url.value, "http://127.0.0.1:8089/k3s");  // trailing '/' dropped
  EXPECT_EQ(o.k3s_download_url.source, Source::kFlag);
  // The pinned version needs no hash; a hash alone overrides the pinned one.
  ProvisionFlags pinned = Named();
  pinned.k3s_version = PinnedK3sRelease().version;
  EXPECT_EQ(RefusalOf(pinned), "");
  ProvisionFlags hash_only = Named();
  hash_only.k3s_sha256 = kOtherSha;
  EXPECT_EQ(RefusalOf(hash_only), "");
}

TEST(ProvisionOptionsTest, K3sChoiceComesFromFlagThenSpecThenConfig) {
  const Config config = ConfigFrom(
      "[defaults]\nk3s_version = \"v1.30.2+k3s1\"\nk3s_sha256 = \"" + std::string(kOtherSha) +
      "\"\nk3s_download_url = \"https://mirror.example/k3s\"\n");
  Spec spec = SpecNamed();
  spec.k3s_download_url = "https://spec.example/k3s";
  ProvisionFlags flags = Named();
  flags.k3s_version = "v1.30.3+k3s1";
  const ProvisionOptions o = ResolveProvisionOptions(flags, spec, MapEnv({}), config);
  EXPECT_EQ(o.k3s_version.value, "v1.30.3+k3s1");
  EXPECT_EQ(o.k3s_version.source, Source::kFlag);
  EXPECT_EQ(o.k3s_sha256.source, Source::kConfig);
  EXPECT_EQ(o.k3s_download_url.value, "https://spec.example/k3s");
  EXPECT_EQ(o.k3s_download_url.source, Source::kSpec);
}

TEST(ProvisionOptionsTest, MalformedK3sValuesAreRefusedNamingTheField) {
  ProvisionFlags flags = Named();
  flags.k3s_version = "1.36.4";
  EXPECT_THAT(RefusalOf(flags), HasSubstr("--k3s-version: \"1.36.4\" (--k3s-version from the "
                                          "command line) is not a k3s release tag like v"));
  flags = Named();
  flags.k3s_sha256 = "abc";
  EXPECT_THAT(RefusalOf(flags), HasSubstr("--k3s-sha256 (--k3s-sha256 from the command line) "
                                          "must be 64 hex digits"));
  flags = Named();
  flags.k3s_download_url = "file:///srv/k3s";
  EXPECT_THAT(RefusalOf(flags), HasSubstr("--k3s-download-url: \"file:///srv/k3s\""));
  flags.k3s_download_url = "https://user:hunter2@mirror.example/k3s";
  const std::string refusal = RefusalOf(flags);
  EXPECT_THAT(refusal, HasSubstr("--k3s-download-url (--k3s-download-url from the command line) "
                                 "holds a user name or password"));
  EXPECT_THAT(refusal, ::testing::Not(HasSubstr("hunter2")));
  EXPECT_THAT(RefusalOf(Named(), Spec{}, ConfigFrom("[defaults]\nk3s_sha256 = \"zz\"\n")),
              HasSubstr("k3s_sha256 (from config.toml [defaults]) must be 64 hex digits"));
}

TEST(ProvisionOptionsTest, NvidiaDriverIsImageByDefaultThenFlagSpecConfig) {
  ProvisionOptions o = ResolveProvisionOptions(Named(), Spec{}, MapEnv({}), Config{});
  EXPECT_EQ(o.nvidia_driver.value, "image");
  EXPECT_THAT(DescribeProvisionOptions(o), Contains("nvidia_driver=image (built-in default)"));
  o = ResolveProvisionOptions(Named(), Spec{}, MapEnv({}),
                              ConfigFrom("[defaults]\nnvidia_driver = \"install\"\n"));
  EXPECT_EQ(o.nvidia_driver.value, "install");
  EXPECT_EQ(o.nvidia_driver.source, Source::kConfig);
  Spec spec = SpecNamed();
  spec.nvidia_driver = "image";
  o = ResolveProvisionOptions(Named(), spec, MapEnv({}),
                              ConfigFrom("[defaults]\nnvidia_driver = \"install\"\n"));
  EXPECT_EQ(o.nvidia_driver.value, "image");
  EXPECT_EQ(o.nvidia_driver.source, Source::kSpec);
  ProvisionFlags flags = Named();
  flags.nvidia_driver = "install";
  o = ResolveProvisionOptions(flags, spec, MapEnv({}), Config{});
  EXPECT_EQ(o.nvidia_driver.value, "install");
  EXPECT_EQ(o.nvidia_driver.source, Source::kFlag);
}

TEST(ProvisionOptionsTest, NvidiaDriverOtherThanImageOrInstallIsRefusedNamingTheField) {
  ProvisionFlags flags = Named();
  flags.nvidia_driver = "latest";
  EXPECT_THAT(RefusalOf(flags), HasSubstr("--nvidia-driver: \"latest\" is not a choice"));
  EXPECT_THAT(RefusalOf(Named(), Spec{}, ConfigFrom("[defaults]\nnvidia_driver = \"yes\"\n")),
              HasSubstr("nvidia_driver: \"yes\" is not a choice (from config.toml [defaults])"));
}

TEST(ProvisionOptionsTest, NvidiaRepoIsNvidiasByDefaultThenFlagSpecConfig) {
  ProvisionOptions o = ResolveProvisionOptions(Named(), Spec{}, MapEnv({}), Config{});
  EXPECT_FALSE(o.nvidia_repo_url.value);
  EXPECT_FALSE(o.nvidia_key_fingerprint.value);
  EXPECT_THAT(DescribeProvisionOptions(o), Contains("nvidia_repo_url=(NVIDIA's) (built-in default)"));
  EXPECT_THAT(DescribeProvisionOptions(o),
              Contains("nvidia_key_fingerprint=(NVIDIA's, pinned) (built-in default)"));
  const Config config = ConfigFrom("[defaults]\nnvidia_repo_url = \"https://mirror.example/nvidia/\"\n"
                                   "nvidia_key_fingerprint = \"" + std::string(40, 'a') + "\"\n");
  o = ResolveProvisionOptions(Named(), Spec{}, MapEnv({}), config);
  EXPECT_EQ(o.nvidia_repo_url.value, "https://mirror.example/nvidia");  // trailing '/' dropped
  EXPECT_EQ(o.nvidia_repo_url.source, Source::kConfig);
  EXPECT_EQ(o.nvidia_key_fingerprint.value, std::string(40, 'A'));  // upper case, as gpg prints it
  Spec spec = SpecNamed();
  spec.nvidia_repo_url = "https://spec.example/nvidia";
  ProvisionFlags flags = Named();
  flags.nvidia_key_fingerprint = "C95B 321B 61E8 8C18 09C4  F759 DDCA E044 F796 ECB0";
  o = ResolveProvisionOptions(flags, spec, MapEnv({}), config);
  EXPECT_EQ(o.nvidia_repo_url.value, "https://spec.example/nvidia");
  EXPECT_EQ(o.nvidia_repo_url.source, Source::kSpec);
  EXPECT_EQ(o.nvidia_key_fingerprint.value, "C95B321B61E88C1809C4F759DDCAE044F796ECB0");
  EXPECT_EQ(o.nvidia_key_fingerprint.source, Source::kFlag);
}

TEST(ProvisionOptionsTest, NvidiaRepoUrlIsHttpsUnlessLoopbackAndRefusalsNameTheField) {
  const auto refusal_for_url = [](const std::string& url) {
    ProvisionFlags flags = Named();
    flags.nvidia_repo_url = url;
    return RefusalOf(flags);
  };
  for (const char* good : {"https://mirror.example/nvidia", "http://127.0.0.1:8090",
                           "http://127.3.4.5/repo", "http://localhost:8090", "http://[::1]:8090/"}) {
    EXPECT_EQ(refusal_for_url(good), "") << good;
  }
  for (const char* bad : {"http://mirror.example/nvidia", "http://10.0.0.1:8090",
                          "http://128.0.0.1", "http://127.0.0.1.example/"}) {
    EXPECT_THAT(refusal_for_url(bad), HasSubstr("--nvidia-repo-url: \"" + std::string(bad) +
                                                "\" (--nvidia-repo-url from the command line) is "
                                                "plain http")) << bad;
  }
  for (const char* bad : {"https://", "ftp://mirror.example", "mirror.example/nvidia",
                          "https://mirror.example/a b"}) {
    EXPECT_THAT(refusal_for_url(bad), HasSubstr("is not an https:// URL")) << bad;
  }
  const std::string creds = refusal_for_url("https://user:hunter2@mirror.example/nvidia");
  EXPECT_THAT(creds, HasSubstr("--nvidia-repo-url (--nvidia-repo-url from the command line) holds "
                               "a user name or password"));
  EXPECT_THAT(creds, Not(HasSubstr("hunter2")));
  EXPECT_THAT(RefusalOf(Named(), Spec{}, ConfigFrom("[defaults]\nnvidia_repo_url = \"http://mirror.example\"\n")),
              HasSubstr("nvidia_repo_url: \"http://mirror.example\" (from config.toml [defaults]) is plain http"));
  Spec spec = SpecNamed();
  spec.nvidia_key_fingerprint = "C95B321B";
  EXPECT_THAT(RefusalOf(Named(), spec),
              HasSubstr("nvidia_key_fingerprint (from spec.yaml) must be 40 hex digits"));
  ProvisionFlags flags = Named();
  flags.nvidia_key_fingerprint = std::string(39, 'a') + "g";
  EXPECT_THAT(RefusalOf(flags), HasSubstr("--nvidia-key-fingerprint (--nvidia-key-fingerprint "
                                          "from the command line) must be 40 hex digits"));
}

TEST(ProvisionOptionsTest, K3sTagAndUrlShapesAreCheckedCharacterByCharacter) {
  const auto refusal_for_version = [](const std::string& version) {
    ProvisionFlags flags = Named();
    flags.k3s_version = version;
    return RefusalOf(flags);
  };
  for (const char* good : {"v1.31.4+k3s1", "v1.31.4-rc1+k3s2", "v10.0.123+k3s10"}) {
    EXPECT_THAT(refusal_for_version(good), Not(HasSubstr("is not a k3s release tag"))) << good;
  }
  for (const char* bad : {"v1.31+k3s1", "v1.31.4", "v1.31.4+k3s", "v1.31.4-rc+k3s1", "v1.31.4-beta1+k3s1",
                          "1.31.4+k3s1", "v1.31.4+k3s1 ", "v1.31.4+k3s1x"}) {
    EXPECT_THAT(refusal_for_version(bad), HasSubstr("is not a k3s release tag")) << bad;
  }
  // std::regex recursed per character; a long value is now refused like any other.
  EXPECT_THAT(refusal_for_version("v1.31." + std::string(200000, '4')), HasSubstr("is not a k3s release tag"));
  const auto refusal_for_url = [](const std::string& url) {
    ProvisionFlags flags = Named();
    flags.k3s_download_url = url;
    return RefusalOf(flags);
  };
  for (const char* bad : {"https://", "http://", "ftp://mirror.example", "https://mirror.example/k 3s"}) {
    EXPECT_THAT(refusal_for_url(bad), HasSubstr("is not an http:// or https:// URL")) << bad;
  }
  EXPECT_THAT(refusal_for_url("http://u@mirror.example"), HasSubstr("holds a user name or password"));
  // An @ after the host is a path, not credentials.
  EXPECT_THAT(refusal_for_url("https://mirror.example/k3s@v1"), Not(HasSubstr("user name or password")));
  EXPECT_THAT(refusal_for_url("https://mirror.example/" + std::string(200000, 'a')),
              Not(HasSubstr("is not an http")));
}

// ---- --allow-from ----

std::string CidrError(const std::string& text) {
  try {
    CanonicalCidr(text, "--allow-from");
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage) << e.what();
    return e.what() + std::string(" / ") + e.hint();
  }
  ADD_FAILURE() << "no error for " << text;
  return "";
}

TEST(CanonicalCidr, AcceptsIpv4AndIpv6NetworksAndBareAddresses) {
  EXPECT_EQ(CanonicalCidr("10.0.0.0/8", "--allow-from"), "10.0.0.0/8");
  EXPECT_EQ(CanonicalCidr("0.0.0.0/0", "--allow-from"), "0.0.0.0/0");
  EXPECT_EQ(CanonicalCidr("203.0.113.7", "--allow-from"), "203.0.113.7/32");
  EXPECT_EQ(CanonicalCidr("2001:DB8:0:0::/32", "--allow-from"), "2001:db8::/32");
  EXPECT_EQ(CanonicalCidr("::1", "--allow-from"), "::1/128");
  EXPECT_EQ(CanonicalCidr("::/0", "--allow-from"), "::/0");
}

TEST(CanonicalCidr, RefusesWhatIsNotANetworkNamingTheFlag) {
  for (const char* bad : {"", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/-1", "300.1.1.1/32",
                          "10.0.0/8", "example.com", "fe80::1/129", "10.0.0.0/8x", "1.2.3.4/ 8"}) {
    EXPECT_THAT(CidrError(bad), HasSubstr("--allow-from")) << bad;
  }
  EXPECT_THAT(CidrError("10.0.0.1/8"), HasSubstr("address bits set past its /8 prefix"));
  EXPECT_THAT(CidrError("10.0.0.1/8"), HasSubstr("write the network 10.0.0.0/8"));
  EXPECT_THAT(CidrError("2001:db8::1/32"), HasSubstr("write the network 2001:db8::/32"));
}

TEST(ProvisionOptionsTest, AllowFromFlagOverSpecOverConfig) {
  Config config = ConfigFrom("[defaults]\nallow_from = [\"192.0.2.0/24\"]\nallow_from_ssh = true\n");
  ProvisionOptions o = ResolveProvisionOptions(Named(), SpecNamed(), MapEnv({}), config);
  ASSERT_TRUE(o.allow_from.value);
  EXPECT_EQ(*o.allow_from.value, std::vector<std::string>{"192.0.2.0/24"});
  EXPECT_EQ(o.allow_from.source, Source::kConfig);
  EXPECT_TRUE(o.allow_from_ssh.value.value_or(false));

  Spec spec = SpecNamed();
  spec.allow_from = std::vector<std::string>{"198.51.100.0/24", "198.51.100.0/24"};
  o = ResolveProvisionOptions(Named(), spec, MapEnv({}), config);
  EXPECT_EQ(*o.allow_from.value, std::vector<std::string>{"198.51.100.0/24"});  // one of each
  EXPECT_EQ(o.allow_from.source, Source::kSpec);

  ProvisionFlags flags = Named();
  flags.allow_from = {"10.0.0.0/8", "2001:db8::/32"};
  o = ResolveProvisionOptions(flags, spec, MapEnv({}), config);
  EXPECT_EQ(*o.allow_from.value, (std::vector<std::string>{"10.0.0.0/8", "2001:db8::/32"}));
  EXPECT_EQ(o.allow_from.source, Source::kFlag);
  EXPECT_THAT(DescribeProvisionOptions(o),
              Contains("allow_from=10.0.0.0/8,2001:db8::/32 (--allow-from from the command line)"));

  o = ResolveProvisionOptions(Named(), SpecNamed(), MapEnv({}), Config{});
  EXPECT_FALSE(o.allow_from.value);  // nobody said: the record's, or everyone
  EXPECT_FALSE(o.allow_from_ssh.value);
}

TEST(ProvisionOptionsTest, AllowFromFromConfigOrSpecIsCheckedNamingWhereItCameFrom) {
  try {
    ResolveProvisionOptions(Named(), SpecNamed(), MapEnv({}),
                            ConfigFrom("[defaults]\nallow_from = [\"10.1.2.3/8\"]\n"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("allow_from (from config.toml [defaults])"));
    EXPECT_EQ(e.exit_code(), kExitUsage);
  }
  Spec spec = SpecNamed();
  spec.allow_from = std::vector<std::string>{};
  try {
    ResolveProvisionOptions(Named(), spec, MapEnv({}), Config{});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("allow_from (from spec.yaml) is an empty list"));
  }
  ProvisionFlags flags = Named();
  flags.allow_from_ssh = true;
  try {
    ResolveProvisionOptions(flags, SpecNamed(), MapEnv({}), Config{});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("--allow-from-ssh needs sources"));
  }
}

TEST(ProvisionOptionsTest, SmokeTestIsOnUnlessTheFlagSpecOrConfigTurnsItOff) {
  ProvisionOptions o = ResolveProvisionOptions(Named(), SpecNamed(), MapEnv({}), Config{});
  EXPECT_TRUE(o.smoke_test.value);
  EXPECT_EQ(o.smoke_test.source, Source::kDefault);
  EXPECT_EQ(o.smoke_test_image.value, kDefaultSmokeTestImage);

  Config config = ConfigFrom("[defaults]\nsmoke_test = false\nsmoke_test_image = \"reg.example/cuda:1\"\n");
  o = ResolveProvisionOptions(Named(), SpecNamed(), MapEnv({}), config);
  EXPECT_FALSE(o.smoke_test.value);
  EXPECT_EQ(o.smoke_test.source, Source::kConfig);
  EXPECT_EQ(o.smoke_test_image.value, "reg.example/cuda:1");

  Spec spec = SpecNamed();
  spec.smoke_test = true;
  spec.smoke_test_image = "reg.example/cuda:2";
  o = ResolveProvisionOptions(Named(), spec, MapEnv({}), config);
  EXPECT_TRUE(o.smoke_test.value);
  EXPECT_EQ(o.smoke_test.source, Source::kSpec);
  EXPECT_EQ(o.smoke_test_image.value, "reg.example/cuda:2");

  ProvisionFlags flags = Named();
  flags.smoke_test = false;
  o = ResolveProvisionOptions(flags, spec, MapEnv({}), config);
  EXPECT_FALSE(o.smoke_test.value);
  EXPECT_THAT(DescribeProvisionOptions(o),
              Contains("smoke_test=false (--no-smoke-test from the command line)"));
}

}  // namespace
}  // namespace gpuprov
