#include "spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include "error.h"
#include "file_util.h"

namespace gpuprov {
namespace {

using ::testing::HasSubstr;

std::string ErrorFor(std::string_view text) {
  try {
    ParseSpec(text, "spec.yaml");
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return "";
}

TEST(SpecTest, EmptyDocumentSetsNothing) {
  for (const char* text : {"", "# only a comment\n", "---\n"}) {
    const Spec spec = ParseSpec(text, "spec.yaml");
    EXPECT_EQ(spec.display_name, "spec.yaml");
    EXPECT_FALSE(spec.name.has_value());
    EXPECT_FALSE(spec.kubernetes.has_value());
    EXPECT_FALSE(spec.tags.has_value());
  }
}

TEST(SpecTest, ParsesEveryField) {
  const Spec spec = ParseSpec(R"(
name: gpu-box-1
cloud: aws
region: us-east-1
gpus: h100-80gb:8
kubernetes: false
image: ubuntu-22.04
instance_type: p5.48xlarge
ssh_key: ~/.ssh/id_ed25519
disk_gb: 500
tags:
  team: ml
  owner: "alice"
  empty: ""
)",
                              "spec.yaml");
  EXPECT_EQ(spec.name, "gpu-box-1");
  EXPECT_EQ(spec.cloud, "aws");
  EXPECT_EQ(spec.region, "us-east-1");
  EXPECT_EQ(spec.gpus, (GpuRequest{"H100-80GB", 8}));
  EXPECT_EQ(spec.kubernetes, false);
  EXPECT_EQ(spec.image, "ubuntu-22.04");
  EXPECT_EQ(spec.instance_type, "p5.48xlarge");
  EXPECT_EQ(spec.ssh_key, "~/.ssh/id_ed25519");
  EXPECT_EQ(spec.disk_gb, 500);
  const std::map<std::string, std::string> tags{{"team", "ml"}, {"owner", "alice"}, {"empty", ""}};
  EXPECT_EQ(spec.tags, tags);
}

TEST(SpecTest, KubernetesAcceptsYamlBooleanWords) {
  EXPECT_EQ(ParseSpec("kubernetes: yes", "s").kubernetes, true);
  EXPECT_EQ(ParseSpec("kubernetes: True", "s").kubernetes, true);
  EXPECT_EQ(ParseSpec("kubernetes: off", "s").kubernetes, false);
  EXPECT_THAT(ErrorFor("kubernetes: maybe\n"),
              HasSubstr("spec.yaml:1: field 'kubernetes' must be true or false, not \"maybe\""));
}

TEST(SpecTest, UnknownFieldNamesFileLineAndAllowedFields) {
  const std::string error = ErrorFor("name: a\ncloud: aws\ngpu: L4:1\n");
  EXPECT_THAT(error, HasSubstr("spec.yaml:3: unknown field 'gpu'; allowed: name, cloud, region, "
                               "gpus, kubernetes, image, instance_type, ssh_key, disk_gb, tags"));
}

TEST(SpecTest, RepeatedFieldIsAnError) {
  EXPECT_THAT(ErrorFor("name: a\ncloud: aws\nname: b\n"),
              HasSubstr("spec.yaml:3: field 'name' is given twice (first on line 1)"));
}

TEST(SpecTest, GpusErrorMatchesTheDocumentedForm) {
  EXPECT_THAT(ErrorFor("name: a\ncloud: aws\nregion: x\ngpus: L4:x\n"),
              HasSubstr("spec.yaml:4: field 'gpus': \"L4:x\" is not TYPE:COUNT; write e.g. L4:1 "
                        "or H100-80GB:8"));
}

TEST(SpecTest, CloudAndRegionTakeListsOfCandidates) {
  const Spec spec = ParseSpec("cloud: [aws, gcp, lambda]\nregion: [us-central1, us-east1]\n",
                              "spec.yaml");
  EXPECT_EQ(spec.cloud, "aws,gcp,lambda");
  EXPECT_EQ(spec.region, "us-central1,us-east1");
  EXPECT_EQ(ParseSpec("cloud: any\n", "spec.yaml").cloud, "any");
  EXPECT_THAT(ErrorFor("cloud: [aws, AWS]\n"),
              HasSubstr("spec.yaml:1: field 'cloud': \"AWS\" is not a cloud name"));
  EXPECT_THAT(ErrorFor("cloud: [aws, aws]\n"), HasSubstr("cloud \"aws\" is given twice"));
  EXPECT_THAT(ErrorFor("cloud: []\n"),
              HasSubstr("spec.yaml:1: field 'cloud' must not be an empty list"));
  EXPECT_THAT(ErrorFor("region: [a, [b]]\n"),
              HasSubstr("spec.yaml:1: field 'region': each entry must be one non-empty name"));
  EXPECT_THAT(ErrorFor("region: [a, 'b,c']\n"), HasSubstr("not \"b,c\""));
}

TEST(SpecTest, WrongTypesNameTheField) {
  EXPECT_THAT(ErrorFor("region:\n  a: b\n"),
              HasSubstr("spec.yaml:1: field 'region' must be a string, not a mapping"));
  EXPECT_THAT(ErrorFor("\nimage:\n  a: b\n"),
              HasSubstr("spec.yaml:2: field 'image' must be a string, not a mapping"));
  EXPECT_THAT(ErrorFor("image:\n"), HasSubstr("spec.yaml:1: field 'image' has no value"));
  EXPECT_THAT(ErrorFor("image: ''\n"), HasSubstr("spec.yaml:1: field 'image' must not be empty"));
  EXPECT_THAT(ErrorFor("tags: [a]\n"),
              HasSubstr("spec.yaml:1: field 'tags' must be a mapping of names to strings, not a "
                        "list"));
  EXPECT_THAT(ErrorFor("tags:\n  team: [a]\n"),
              HasSubstr("spec.yaml:2: field 'tags.team' must be a string, not a list"));
  EXPECT_THAT(ErrorFor("tags:\n  team:\n"),
              HasSubstr("spec.yaml:2: field 'tags.team' has no value"));
}

TEST(SpecTest, DiskGbRange) {
  EXPECT_EQ(ParseSpec("disk_gb: 10", "s").disk_gb, 10);
  EXPECT_EQ(ParseSpec("disk_gb: 10000", "s").disk_gb, 10000);
  for (const char* bad : {"disk_gb: 9", "disk_gb: 10001", "disk_gb: -5", "disk_gb: 1.5",
                          "disk_gb: lots", "disk_gb: 99999999999"}) {
    EXPECT_THAT(ErrorFor(bad),
                HasSubstr("spec.yaml:1: field 'disk_gb' must be a whole number of GB from 10 "
                          "to 10000"));
  }
}

TEST(SpecTest, CloudNameIsChecked) {
  EXPECT_THAT(ErrorFor("cloud: AWS\n"),
              HasSubstr("spec.yaml:1: field 'cloud': \"AWS\" is not a cloud name"));
}

TEST(SpecTest, TopLevelMustBeAMapping) {
  EXPECT_THAT(ErrorFor("- name: a\n"),
              HasSubstr("spec.yaml:1: a spec file must be a mapping of fields, not a list"));
  EXPECT_THAT(ErrorFor("just words\n"), HasSubstr("must be a mapping of fields, not a scalar"));
}

TEST(SpecTest, SyntaxErrorNamesTheLine) {
  EXPECT_THAT(ErrorFor("name: a\ncloud: [aws\n"), HasSubstr("YAML syntax error"));
  EXPECT_THAT(ErrorFor("name: a\n  cloud: aws\n"), HasSubstr("spec.yaml:2: YAML syntax error"));
}

TEST(SpecTest, InvalidNameIsRejectedWithTheRule) {
  EXPECT_THAT(ErrorFor("\nname: My_VM\n"),
              HasSubstr("spec.yaml:2: field 'name': \"My_VM\" is not a valid VM name; use 1 to 39 "
                        "characters"));
}

struct NameCase {
  const char* name;
  bool valid;
};

class VmNameTest : public ::testing::TestWithParam<NameCase> {};

TEST_P(VmNameTest, FollowsTheRule) {
  const NameCase& c = GetParam();
  if (c.valid) {
    EXPECT_NO_THROW(ValidateVmName(c.name, "--name"));
  } else {
    try {
      ValidateVmName(c.name, "--name");
      ADD_FAILURE() << "accepted " << c.name;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), kExitUsage);
      EXPECT_THAT(e.what(), HasSubstr("--name: \"" + std::string(c.name) + "\""));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    VmNames, VmNameTest,
    ::testing::Values(NameCase{"a", true}, NameCase{"gpu-box-1", true},
                      NameCase{"a23456789012345678901234567890123456789", true},    // 39
                      NameCase{"a234567890123456789012345678901234567890", false},  // 40
                      NameCase{"", false}, NameCase{"1box", false}, NameCase{"-box", false},
                      NameCase{"box-", false}, NameCase{"Box", false}, NameCase{"b_x", false},
                      NameCase{"b.x", false}, NameCase{"../etc", false}, NameCase{"b x", false}));

TEST(SpecTest, LoadSpecReadsAFileAndNamesItsPath) {
  std::string dir = (std::filesystem::temp_directory_path() / "gpuprov-spec-XXXXXX");
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::filesystem::path path = std::filesystem::path(dir) / "spec.yaml";
  WriteFileAtomic(path, "name: box\n");
  EXPECT_EQ(LoadSpec(path).name, "box");
  EXPECT_EQ(LoadSpec(path).display_name, path.string());
  WriteFileAtomic(path, "name: box\nbogus: 1\n");
  try {
    LoadSpec(path);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string() + ":2: unknown field 'bogus'"));
  }
  try {
    LoadSpec(std::filesystem::path(dir) / "missing.yaml");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_THAT(e.what(), HasSubstr("missing.yaml' does not exist"));
  }
  std::filesystem::remove_all(dir);
}

TEST(SpecTest, K3sReleaseFields) {
  const Spec spec = ParseSpec(
      "k3s_version: v1.30.2+k3s1\nk3s_sha256: " + std::string(64, 'b') +
          "\nk3s_download_url: http://127.0.0.1:8089\n",
      "spec.yaml");
  EXPECT_EQ(spec.k3s_version, "v1.30.2+k3s1");
  EXPECT_EQ(spec.k3s_sha256, std::string(64, 'b'));
  EXPECT_EQ(spec.k3s_download_url, "http://127.0.0.1:8089");
  EXPECT_THAT(ErrorFor("k3s_version:\n"), HasSubstr("spec.yaml:1: field 'k3s_version' has no value"));
  EXPECT_THAT(ErrorFor("k3s_sha256: [a]\n"), HasSubstr("field 'k3s_sha256' must be a string"));
}

TEST(SpecTest, NvidiaRepoFields) {
  const Spec spec = ParseSpec("nvidia_repo_url: http://127.0.0.1:8090\nnvidia_key_fingerprint: " +
                                  std::string(40, 'b') + "\n",
                              "spec.yaml");
  EXPECT_EQ(spec.nvidia_repo_url, "http://127.0.0.1:8090");
  EXPECT_EQ(spec.nvidia_key_fingerprint, std::string(40, 'b'));
  EXPECT_THAT(ErrorFor("nvidia_repo_url:\n"), HasSubstr("spec.yaml:1: field 'nvidia_repo_url' has no value"));
}

TEST(SpecTest, AllowFromIsAListOfCidrs) {
  const Spec spec = ParseSpec("allow_from: [10.0.0.0/8, \"2001:db8::/32\"]\nallow_from_ssh: true\n",
                              "spec.yaml");
  ASSERT_TRUE(spec.allow_from);
  EXPECT_EQ(*spec.allow_from, (std::vector<std::string>{"10.0.0.0/8", "2001:db8::/32"}));
  EXPECT_EQ(spec.allow_from_ssh, true);
  EXPECT_THAT(ErrorFor("allow_from: 10.0.0.0/8\n"), HasSubstr("must be a list of CIDRs"));
  EXPECT_THAT(ErrorFor("allow_from: [[1]]\n"), HasSubstr("must be a list of CIDRs"));
  EXPECT_THAT(ErrorFor("allow_from_ssh: maybe\n"), HasSubstr("must be true or false"));
}

TEST(SpecTest, TtlAndIdleTtlAreDurations) {
  const Spec spec = ParseSpec("ttl: 8h\nidle_ttl: 90m\n", "spec.yaml");
  EXPECT_EQ(spec.ttl_seconds, 28800);
  EXPECT_EQ(spec.idle_ttl_seconds, 5400);
  EXPECT_EQ(ParseSpec("ttl: off\n", "spec.yaml").ttl_seconds, 0);
  EXPECT_THAT(ErrorFor("ttl: 8\n"), HasSubstr("spec.yaml:1: field 'ttl': '8' has a number without a unit"));
  EXPECT_THAT(ErrorFor("idle_ttl: [1h]\n"), HasSubstr("field 'idle_ttl'"));
}

TEST(SpecTest, SmokeTestIsABooleanAndItsImageAString) {
  const Spec spec = ParseSpec("smoke_test: false\nsmoke_test_image: reg.example/cuda:1\n", "spec.yaml");
  EXPECT_EQ(spec.smoke_test, false);
  EXPECT_EQ(spec.smoke_test_image, "reg.example/cuda:1");
  EXPECT_THAT(ErrorFor("smoke_test: maybe\n"), HasSubstr("must be true or false"));
  EXPECT_THAT(ErrorFor("smoke_test_image:\n"), HasSubstr("has no value"));
}

TEST(SpecTest, NodesIsAWholeNumber) {
  EXPECT_EQ(ParseSpec("nodes: 4\n", "spec.yaml").nodes, 4);
  EXPECT_FALSE(ParseSpec("name: a\n", "spec.yaml").nodes.has_value());
  EXPECT_THAT(ErrorFor("nodes: two\n"),
              HasSubstr("spec.yaml:1: field 'nodes': \"two\" is not a whole number of nodes"));
  EXPECT_THAT(ErrorFor("nodes: [1]\n"), HasSubstr("must be a whole number of VMs"));
}

}  // namespace
}  // namespace gpuprov
