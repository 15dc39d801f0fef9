// SPDX-License-Identifier: Apache-2.0
#include "ec2_instance_types.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "text.h"

namespace gpuprov::aws {
namespace {

using gpuprov::drivers::Upper;

std::string CanonicalGpu(const std::string& gpu) {
  std::string g = Upper(gpu);
  if (g == "A100-40GB") return "A100";
  if (g == "H100-80GB") return "H100";
  return g;
}

}  // namespace

const std::vector<InstanceType>& InstanceTypes() {
  // name, gpu, count, vCPUs, GiB, $/h, smallest-for-count
  static const std::vector<InstanceType> types = {
      {"g4dn.xlarge", "T4", 1, 4, 16, 0.526, true},
      {"g4dn.2xlarge", "T4", 1, 8, 32, 0.752, false},
      {"g4dn.4xlarge", "T4", 1, 16, 64, 1.204, false},
      {"g4dn.8xlarge", "T4", 1, 32, 128, 2.176, false},
      {"g4dn.16xlarge", "T4", 1, 64, 256, 4.352, false},
      {"g4dn.12xlarge", "T4", 4, 48, 192, 3.912, true},
      {"g4dn.metal", "T4", 8, 96, 384, 7.824, true},
      {"g5.xlarge", "A10G", 1, 4, 16, 1.006, true},
      {"g5.2xlarge", "A10G", 1, 8, 32, 1.212, false},
      {"g5.4xlarge", "A10G", 1, 16, 64, 1.624, false},
      {"g5.8xlarge", "A10G", 1, 32, 128, 2.448, false},
      {"g5.16xlarge", "A10G", 1, 64, 256, 4.096, false},
      {"g5.12xlarge", "A10G", 4, 48, 192, 5.672, true},
      {"g5.24xlarge", "A10G", 4, 96, 384, 8.144, false},
      {"g5.48xlarge", "A10G", 8, 192, 768, 16.288, true},
      {"g6.xlarge", "L4", 1, 4, 16, 0.8048, true},
      {"g6.2xlarge", "L4", 1, 8, 32, 0.9776, false},
      {"g6.4xlarge", "L4", 1, 16, 64, 1.3232, false},
      {"g6.8xlarge", "L4", 1, 32, 128, 2.0144, false},
      {"g6.16xlarge", "L4", 1, 64, 256, 3.3968, false},
      {"g6.12xlarge", "L4", 4, 48, 192, 4.6016, true},
      {"g6.24xlarge", "L4", 4, 96, 384, 6.6752, false},
      {"g6.48xlarge", "L4", 8, 192, 768, 13.3504, true},
      {"g6e.xlarge", "L40S", 1, 4, 32, 1.861, true},
      {"g6e.2xlarge", "L40S", 1, 8, 64, 2.24208, false},
      {"g6e.4xlarge", "L40S", 1, 16, 128, 3.00424, false},
      {"g6e.8xlarge", "L40S", 1, 32, 256, 4.52856, false},
      {"g6e.16xlarge", "L40S", 1, 64, 512, 7.57719, false},
      {"g6e.12xlarge", "L40S", 4, 48, 384, 10.49264, true},
      {"g6e.24xlarge", "L40S", 4, 96, 768, 15.06559, false},
      {"g6e.48xlarge", "L40S", 8, 192, 1536, 30.13118, true},
      {"p4d.24xlarge", "A100", 8, 96, 1152, 32.7726, true},
      {"p4de.24xlarge", "A100-80GB", 8, 96, 1152, 40.9657, true},
      {"p5.4xlarge", "H100", 1, 16, 256, 0, true},
      {"p5.48xlarge", "H100", 8, 192, 2048, 98.32, true},
      {"p5e.48xlarge", "H200", 8, 192, 2048, 0, true},
      {"p5en.48xlarge", "H200", 8, 192, 2048, 0, false},
      {"p6-b200.48xlarge", "B200", 8, 192, 2048, 0, true},
      {"p3.2xlarge", "V100", 1, 8, 61, 3.06, true},
      {"p3.8xlarge", "V100", 4, 32, 244, 12.24, true},
      {"p3.16xlarge", "V100", 8, 64, 488, 24.48, true},
      {"t3.medium", "", 0, 2, 4, 0.0416, true},
  };
  return types;
}

const drivers::Catalogue& InstanceTypeCatalogue() {
  static const drivers::Catalogue catalogue = [] {
    drivers::Catalogue c;
    c.cloud = "AWS";
    for (const auto& t : InstanceTypes()) c.rows.push_back({t.name, t.gpu_type, t.gpu_count, t.smallest});
    c.cpu_default = {CpuType().name, "", 0, true};
    c.canonical_gpu = [](const std::string& g) -> std::optional<std::string> { return CanonicalGpu(g); };
    c.gpu_hint = [](const std::string& g) {
      return CanonicalGpu(g) == "A10" ? std::string("AWS's A10 GPU is called A10G") : std::string();
    };
    return c;
  }();
  return catalogue;
}

std::optional<InstanceType> TypeForGpu(const std::string& gpu_type, int count) {
  std::optional<InstanceType> t =
      drivers::EntryForGpu(InstanceTypeCatalogue(), InstanceTypes(), gpu_type, count);
  if (t && !t->smallest) return std::nullopt;
  return t;
}

std::optional<InstanceType> TypeByName(const std::string& name) {
  for (const auto& t : InstanceTypes()) {
    if (name == t.name) return t;
  }
  return std::nullopt;
}

InstanceType CpuType() { return *TypeByName("t3.medium"); }

std::string GpusOfType(const std::string& instance_type) {
  auto t = TypeByName(instance_type);
  if (!t || t->gpu_count == 0) return "";
  return std::string(t->gpu_type) + ":" + std::to_string(t->gpu_count);
}

std::string NotOfferedMessage(const std::string& gpu_type, int count) {
  return drivers::NotOfferedMessage(InstanceTypeCatalogue(), gpu_type, count);
}

// The Deep Learning Base OSS Nvidia Driver AMIs ship NVIDIA's open kernel modules, which drive
// Turing and newer GPUs only. Their release notes list the instances they support, e.g.
// https://docs.amazonaws.cn/dlami/latest/devguide/aws-deep-learning-ami-gpupt210oss-al2023-2026-09-21.html
// ("supported_ec2_instances: G4dn, G5, G6, Gr6, Gr6f, G6e, G6f, P4, P4de, P5, P5e, P5en,
// P6-B200") and the single-CUDA Ubuntu 24.04 DLAMI
// (aws-deep-learning-ami-gpubasesinglecuda-ul2404-2026-07-17) the same set plus G7 and P6-B300:
// no P3 (Volta V100). The one DLAMI that still lists P3, "Deep Learning Base Proprietary Nvidia
// Driver AMI (Amazon Linux 2)" (aws-deep-learning-ami-base-aml2-2026-01-02), is Amazon Linux 2
// (user ec2-user, root /dev/xvda, yum), which this driver's Ubuntu assumptions do not fit. So a
// Volta type has no default image.
namespace {
bool OssDriverImageFits(const InstanceType& type) { return std::string(type.gpu_type) != "V100"; }
}  // namespace

std::optional<std::string> DefaultImage(const InstanceType& type) {
  if (type.gpu_count > 0) {
    if (!OssDriverImageFits(type)) return std::nullopt;
    return "resolve:ssm:/aws/service/deeplearning/ami/x86_64/"
           "base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id";
  }
  return "resolve:ssm:/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/"
         "ebs-gp2/ami-id";
}

std::string NoDefaultImageMessage(const InstanceType& type) {
  return std::string(type.gpu_type) + " (" + type.name +
         ") has no default image: AWS's Deep Learning AMIs for Ubuntu ship NVIDIA's open kernel "
         "modules, which do not drive Volta GPUs (their release notes list no P3). Choose another "
         "GPU (T4, A10G, L4, L40S, A100, H100 ...), or give an Ubuntu AMI with NVIDIA's "
         "proprietary driver for Volta with --image ami-... (or `image` in [clouds.aws])";
}

}  // namespace gpuprov::aws
