// SPDX-License-Identifier: Apache-2.0
#include "ec2_instance_types.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace gpuprov::aws {
namespace {

TEST(Ec2InstanceTypes, SmallestTypePerGpuRequest) {
  const std::map<std::pair<std::string, int>, std::string> want = {
      {{"L4", 1}, "g6.xlarge"},
      {{"L4", 4}, "g6.12xlarge"},
      {{"L4", 8}, "g6.48xlarge"},
      {{"T4", 1}, "g4dn.xlarge"},
      {{"t4", 8}, "g4dn.metal"},
      {{"A10G", 1}, "g5.xlarge"},
      {{"A10G", 4}, "g5.12xlarge"},
      {{"L40S", 1}, "g6e.xlarge"},
      {{"A100", 8}, "p4d.24xlarge"},
      {{"A100-40GB", 8}, "p4d.24xlarge"},
      {{"A100-80GB", 8}, "p4de.24xlarge"},
      {{"H100", 1}, "p5.4xlarge"},
      {{"H100-80GB", 8}, "p5.48xlarge"},
      {{"H200", 8}, "p5e.48xlarge"},
      {{"B200", 8}, "p6-b200.48xlarge"},
      {{"V100", 4}, "p3.8xlarge"},
  };
  for (const auto& [req, type] : want) {
    auto t = TypeForGpu(req.first, req.second);
    ASSERT_TRUE(t) << req.first << ":" << req.second;
    EXPECT_EQ(t->name, type) << req.first << ":" << req.second;
  }
}

TEST(Ec2InstanceTypes, UnofferedCountsAndTypesAreNamed) {
  EXPECT_FALSE(TypeForGpu("L4", 2));
  EXPECT_FALSE(TypeForGpu("A100", 1));
  EXPECT_FALSE(TypeForGpu("MI300X", 1));
  const std::string m = NotOfferedMessage("L4", 2);
  EXPECT_NE(m.find("L4:1 (g6.xlarge)"), std::string::npos) << m;
  EXPECT_NE(m.find("L4:8 (g6.48xlarge)"), std::string::npos) << m;
  const std::string a10 = NotOfferedMessage("A10", 1);
  EXPECT_NE(a10.find("A10G"), std::string::npos) << a10;
}

TEST(Ec2InstanceTypes, OneSmallestTypePerGpuAndCount) {
  std::set<std::pair<std::string, int>> seen;
  for (const auto& t : InstanceTypes()) {
    if (!t.smallest) continue;
    EXPECT_TRUE(seen.insert({t.gpu_type, t.gpu_count}).second) << t.name;
  }
}

TEST(Ec2InstanceTypes, GpusOfEverySize) {
  EXPECT_EQ(GpusOfType("g6.2xlarge"), "L4:1");
  EXPECT_EQ(GpusOfType("g5.24xlarge"), "A10G:4");
  EXPECT_EQ(GpusOfType("p5en.48xlarge"), "H200:8");
  EXPECT_EQ(GpusOfType("t3.medium"), "");
  EXPECT_EQ(GpusOfType("x9.unknown"), "");
}

TEST(Ec2InstanceTypes, ImagesAreSsmParameters) {
  EXPECT_EQ(DefaultImage(*TypeForGpu("L4", 1)).value_or(""),
            "resolve:ssm:/aws/service/deeplearning/ami/x86_64/"
            "base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id");
  EXPECT_EQ(DefaultImage(CpuType()).value_or("").rfind("resolve:ssm:/aws/service/canonical/ubuntu/", 0), 0u);
}

// The OSS-driver DLAMI's release notes list the instances it supports, and no P3: V100 has
// no default image (and the refusal says what to do); every other GPU type keeps the DLAMI.
TEST(Ec2InstanceTypes, VoltaHasNoDefaultImage) {
  for (const InstanceType& t : InstanceTypes()) {
    SCOPED_TRACE(t.name);
    EXPECT_EQ(DefaultImage(t).has_value(), std::string(t.gpu_type) != "V100");
  }
  const std::string why = NoDefaultImageMessage(*TypeForGpu("V100", 1));
  EXPECT_NE(why.find("p3.2xlarge"), std::string::npos) << why;
  EXPECT_NE(why.find("--image"), std::string::npos) << why;
}

}  // namespace
}  // namespace gpuprov::aws
