// SPDX-License-Identifier: Apache-2.0
//
// GPU request -> EC2 instance type. AWS encodes the GPU model and count in the instance type;
// the driver picks the smallest type with the requested count (REFERENCE.md §7).
// Sources: the table of REFERENCE.md §7 (AWS instance-type pages as tabulated in
// github.com/rapidsai/deployment source/cloud/aws/index.md; porter-dev/docs PR #251 for
// p5.4xlarge, p5e/p5en). vCPU and memory figures are AWS's published specs (general
// knowledge); prices are us-east-1 on-demand list prices (general knowledge, may be stale;
// 0 where not known). See README.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "catalogue.h"

namespace gpuprov::aws {

/// The day the prices below were written down (offers say it next to a table price).
inline constexpr const char* kPriceTableDate = "2026-12-02";

struct InstanceType {
  const char* name;      ///< "g6.xlarge"
  const char* gpu_type;  ///< gpuprov's GPU name ("L4", "A10G", "H100"); "" for none
  int gpu_count;
  int vcpus;
  int memory_gib;
  double price_per_hour;  ///< 0 = unknown
  bool smallest;          ///< the type chosen for gpu_type:gpu_count
};

/// Every type the driver knows, smallest-first within each GPU type.
const std::vector<InstanceType>& InstanceTypes();

/// The smallest type with exactly `count` GPUs of `gpu_type` (case-insensitive; "A100-40GB"
/// and "H100-80GB" are accepted for A100 and H100), or nullopt.
std::optional<InstanceType> TypeForGpu(const std::string& gpu_type, int count);

/// The type called `name`, when the table knows it.
std::optional<InstanceType> TypeByName(const std::string& name);

/// The default type for a VM without a GPU (t3.medium).
InstanceType CpuType();

/// "L4:1" for a GPU type, "" otherwise (or when unknown).
std::string GpusOfType(const std::string& instance_type);

/// InstanceTypes() as the kit's catalogue (same order; the smallest type per GPU count is the
/// preferred row).
const drivers::Catalogue& InstanceTypeCatalogue();

/// "AWS does not offer L4:2; it offers L4 as L4:1 (g6.xlarge), L4:4 (...), ..." or, for an
/// unknown GPU, the GPU types with their counts.
std::string NotOfferedMessage(const std::string& gpu_type, int count);

/// The AMI of a type: the Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) for GPU
/// types, Ubuntu 22.04 otherwise, both as resolve:ssm: parameters EC2 resolves at launch.
/// nullopt for V100 (p3): the OSS-driver DLAMIs do not support Volta (see the .cc).
std::optional<std::string> DefaultImage(const InstanceType& type);

/// Why `type` has no default image and what to do instead (refusals and offers' warnings).
std::string NoDefaultImageMessage(const InstanceType& type);

}  // namespace gpuprov::aws
