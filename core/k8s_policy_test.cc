#include "k8s_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <tuple>

namespace gpuprov {
namespace {

using ::testing::HasSubstr;

enum class Flag { kNone, kK8s, kNoK8s };
enum class Setting { kAbsent, kTrue, kFalse };

using Combo = std::tuple<Flag, Setting, Setting, bool>;  // flag, spec, config, cloud hosts k8s

struct Expected {
  bool enabled;
  bool refused;
  /// Text the note must hold; empty means the note must be empty.
  std::vector<std::string> note_has;
};

/// The rule, restated independently of the code under test: the first explicit setting among
/// flag and spec decides (true on an incapable cloud is refused); otherwise config.toml and
/// the default only prefer, and an incapable cloud skips Kubernetes with a note.
Expected ExpectedFor(Flag flag, Setting spec, Setting config, bool hosts) {
  const std::string cloud_note = "Kubernetes skipped: the docker cloud cannot host k3s";
  if (flag == Flag::kK8s) {
    if (hosts) return {true, false, {}};
    return {false,
            true,
            {"the docker cloud cannot host Kubernetes (--k8s from the command line)", "--no-k8s"}};
  }
  if (flag == Flag::kNoK8s) {
    return {false, false, {"Kubernetes off (--no-k8s from the command line)"}};
  }
  if (spec == Setting::kTrue) {
    if (hosts) return {true, false, {}};
    return {
        false, true, {"the docker cloud cannot host Kubernetes (kubernetes: true in spec.yaml)"}};
  }
  if (spec == Setting::kFalse) return {false, false, {"Kubernetes off (from spec.yaml)"}};
  if (config == Setting::kFalse) {
    return {false, false, {"Kubernetes off (from config.toml [defaults])"}};
  }
  if (hosts) return {true, false, {}};
  if (config == Setting::kTrue) return {false, false, {cloud_note, "config.toml [defaults]"}};
  return {false,
          false,
          {"Kubernetes skipped: the docker cloud cannot host k3s (it is a test cloud); the VM is "
           "plain"}};
}

std::optional<bool> AsOptional(Setting s) {
  if (s == Setting::kAbsent) return std::nullopt;
  return s == Setting::kTrue;
}

class K8sPolicyMatrixTest : public ::testing::TestWithParam<Combo> {};

TEST_P(K8sPolicyMatrixTest, MatchesTheRule) {
  const auto [flag, spec_setting, config_setting, hosts] = GetParam();

  ProvisionFlags flags;
  flags.name = "box";
  if (flag != Flag::kNone) flags.kubernetes = flag == Flag::kK8s;
  Spec spec;
  spec.display_name = "spec.yaml";
  spec.kubernetes = AsOptional(spec_setting);
  Config config;
  config.display_name = "config.toml";
  config.defaults.kubernetes = AsOptional(config_setting);
  const std::string cloud = hosts ? "aws" : "docker";
  flags.cloud = cloud;
  auto no_env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };

  const ProvisionOptions options = ResolveProvisionOptions(flags, spec, no_env, config);
  const K8sDecision decision = DecideKubernetes(options.kubernetes, cloud, hosts);
  const Expected expected = ExpectedFor(flag, spec_setting, config_setting, hosts);

  EXPECT_EQ(decision.enabled, expected.enabled);
  EXPECT_EQ(decision.refused, expected.refused);
  if (expected.note_has.empty()) {
    EXPECT_EQ(decision.note, "");
  }
  for (const std::string& text : expected.note_has) {
    EXPECT_THAT(decision.note, HasSubstr(text));
  }
  EXPECT_FALSE(decision.enabled && decision.refused);
}

std::string ComboName(const ::testing::TestParamInfo<Combo>& info) {
  const auto [flag, spec, config, hosts] = info.param;
  auto setting = [](Setting s) {
    return s == Setting::kAbsent ? "absent" : s == Setting::kTrue ? "true" : "false";
  };
  std::string name = flag == Flag::kNone ? "NoFlag" : flag == Flag::kK8s ? "K8s" : "NoK8s";
  name += std::string("_Spec_") + setting(spec) + "_Config_" + setting(config);
  name += hosts ? "_Hosts" : "_Cannot";
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    K8sPolicy, K8sPolicyMatrixTest,
    ::testing::Combine(::testing::Values(Flag::kNone, Flag::kK8s, Flag::kNoK8s),
                       ::testing::Values(Setting::kAbsent, Setting::kTrue, Setting::kFalse),
                       ::testing::Values(Setting::kAbsent, Setting::kTrue, Setting::kFalse),
                       ::testing::Bool()),
    ComboName);

Resolved<bool> From(bool value, Source source, std::string origin) {
  return Resolved<bool>{value, source, std::move(origin)};
}

TEST(K8sPolicyTest, FlagRefusalMessageIsExact) {
  const K8sDecision d = DecideKubernetes(From(true, Source::kFlag, "--k8s"), "docker", false);
  EXPECT_TRUE(d.refused);
  EXPECT_EQ(d.note,
            "the docker cloud cannot host Kubernetes (--k8s from the command line); drop --k8s "
            "or pass --no-k8s, or choose a cloud that can");
}

TEST(K8sPolicyTest, EnvTrueOnAnIncapableCloudIsRefused) {
  const K8sDecision d =
      DecideKubernetes(From(true, Source::kEnv, "GPUPROV_KUBERNETES"), "docker", false);
  EXPECT_TRUE(d.refused);
  EXPECT_FALSE(d.enabled);
  EXPECT_THAT(d.note, HasSubstr("(GPUPROV_KUBERNETES=true in the environment)"));
  EXPECT_THAT(d.note, HasSubstr("unset GPUPROV_KUBERNETES or pass --no-k8s"));
}

TEST(K8sPolicyTest, EnvFalseIsOffWithItsOrigin) {
  const K8sDecision d =
      DecideKubernetes(From(false, Source::kEnv, "GPUPROV_KUBERNETES"), "aws", true);
  EXPECT_FALSE(d.enabled);
  EXPECT_FALSE(d.refused);
  EXPECT_EQ(d.note, "Kubernetes off (from GPUPROV_KUBERNETES); the VM is plain");
}

TEST(K8sPolicyTest, DefaultOnDockerSkipsWithTheDocumentedNote) {
  const K8sDecision d = DecideKubernetes(From(true, Source::kDefault, ""), "docker", false);
  EXPECT_FALSE(d.enabled);
  EXPECT_FALSE(d.refused);
  EXPECT_EQ(d.note,
            "Kubernetes skipped: the docker cloud cannot host k3s (it is a test cloud); the VM "
            "is plain");
}

TEST(K8sPolicyTest, OtherIncapableCloudsAreNotCalledTestClouds) {
  const K8sDecision d = DecideKubernetes(From(true, Source::kDefault, ""), "tiny", false);
  EXPECT_EQ(d.note, "Kubernetes skipped: the tiny cloud cannot host k3s; the VM is plain");
}

TEST(K8sPolicyTest, DefaultOnACapableCloudIsOn) {
  const K8sDecision d = DecideKubernetes(From(true, Source::kDefault, ""), "aws", true);
  EXPECT_TRUE(d.enabled);
  EXPECT_FALSE(d.refused);
  EXPECT_EQ(d.note, "");
}

}  // namespace
}  // namespace gpuprov
