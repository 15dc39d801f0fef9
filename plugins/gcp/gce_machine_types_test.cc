// SPDX-License-Identifier: Apache-2.0
#include "gce_machine_types.h"

#include <gtest/gtest.h>

#include <set>

namespace gpuprov::gcp {
namespace {

TEST(GceMachineTypes, AcceleratorOptimisedTypesFromTheReferenceTable) {
  struct Row {
    const char* gpu;
    int count;
    const char* machine;
    const char* accelerator;
  };
  // REFERENCE.md §7.
  for (const Row& r :
       {Row{"L4", 1, "g2-standard-4", "nvidia-l4"}, Row{"L4", 2, "g2-standard-24", "nvidia-l4"},
        Row{"L4", 4, "g2-standard-48", "nvidia-l4"}, Row{"L4", 8, "g2-standard-96", "nvidia-l4"},
        Row{"A100", 8, "a2-highgpu-8g", "nvidia-tesla-a100"},
        Row{"A100-80GB", 4, "a2-ultragpu-4g", "nvidia-a100-80gb"},
        Row{"H100", 8, "a3-highgpu-8g", "nvidia-h100-80gb"},
        Row{"H100-MEGA", 8, "a3-megagpu-8g", "nvidia-h100-mega-80gb"},
        Row{"B200", 8, "a4-highgpu-8g", "nvidia-b200"}}) {
    auto m = MachineTypeForGpu(r.gpu, r.count);
    ASSERT_TRUE(m) << r.gpu << ":" << r.count;
    EXPECT_EQ(m->machine_type, r.machine) << r.gpu << ":" << r.count;
    EXPECT_EQ(m->accelerator, r.accelerator);
    EXPECT_FALSE(m->guest_accelerator) << "G2/A2/A3/A4 come with their GPUs";
    EXPECT_GT(m->price_per_hour, 0);
  }
}

TEST(GceMachineTypes, N1GpusAreAttachedAsGuestAccelerators) {
  auto t4 = MachineTypeForGpu("T4", 2);
  ASSERT_TRUE(t4);
  EXPECT_TRUE(t4->guest_accelerator);
  EXPECT_EQ(t4->accelerator, "nvidia-tesla-t4");
  EXPECT_EQ(t4->machine_type.rfind("n1-", 0), 0u);
  auto v100 = MachineTypeForGpu("V100", 8);
  ASSERT_TRUE(v100);
  EXPECT_TRUE(v100->guest_accelerator);
}

TEST(GceMachineTypes, AliasesAndCaseAreAccepted) {
  EXPECT_EQ(MachineTypeForGpu("a100-40gb", 1)->machine_type, "a2-highgpu-1g");
  EXPECT_EQ(MachineTypeForGpu("H100-80GB", 8)->machine_type, "a3-highgpu-8g");
  EXPECT_EQ(MachineTypeForGpu("l4", 1)->machine_type, "g2-standard-4");
}

TEST(GceMachineTypes, UnknownRequestsAreNotGuessed) {
  EXPECT_FALSE(MachineTypeForGpu("L4", 3));
  EXPECT_FALSE(MachineTypeForGpu("MI300X", 1));
  const std::string msg = NotOfferedMessage("mi300x", 1);
  EXPECT_NE(msg.find("MI300X:1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("L4 x1/x2/x4/x8"), std::string::npos) << msg;
}

TEST(GceMachineTypes, ReverseLookupTellsTheGpusOfAnInstance) {
  EXPECT_EQ(MachineTypeByName("a2-ultragpu-8g")->gpu_type, "A100-80GB");
  EXPECT_EQ(MachineTypeByName("n1-standard-8", "nvidia-tesla-v100")->gpu_type, "V100");
  EXPECT_EQ(MachineTypeByName("n1-standard-8", "nvidia-tesla-t4")->gpu_type, "T4");
  EXPECT_FALSE(MachineTypeByName("n1-standard-8"));  // no accelerator: not a GPU row
  EXPECT_EQ(MachineTypeByName(CpuMachineType().machine_type)->gpu_count, 0);
}

TEST(GceMachineTypes, EveryRowIsUnique) {
  std::set<std::string> seen;
  for (const auto& m : GpuMachineTypes()) {
    EXPECT_TRUE(seen.insert(m.gpu_type + ":" + std::to_string(m.gpu_count)).second)
        << m.gpu_type << ":" << m.gpu_count;
  }
}

}  // namespace
}  // namespace gpuprov::gcp
