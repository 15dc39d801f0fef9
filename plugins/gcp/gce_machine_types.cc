// SPDX-License-Identifier: Apache-2.0
#include "gce_machine_types.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "text.h"

namespace gpuprov::gcp {
namespace {

using gpuprov::drivers::Upper;

std::string Canonical(const std::string& gpu_type) {
  static const std::map<std::string, std::string> aliases = {
      {"A100-40GB", "A100"},
      {"H100-80GB", "H100"},
      {"H100-MEGA-80GB", "H100-MEGA"},
      {"H200-141GB", "H200"},
  };
  std::string t = Upper(gpu_type);
  auto it = aliases.find(t);
  return it == aliases.end() ? t : it->second;
}

}  // namespace

const std::vector<GceMachineType>& GpuMachineTypes() {
  // REFERENCE.md §7. G2 types with 1 GPU also come in -8/-12/-16/-32 sizes; the smallest is used.
  static const std::vector<GceMachineType> table = {
      {"L4", 1, "g2-standard-4", "nvidia-l4", false, 0.71},
      {"L4", 2, "g2-standard-24", "nvidia-l4", false, 2.00},
      {"L4", 4, "g2-standard-48", "nvidia-l4", false, 4.00},
      {"L4", 8, "g2-standard-96", "nvidia-l4", false, 8.00},
      {"A100", 1, "a2-highgpu-1g", "nvidia-tesla-a100", false, 3.67},
      {"A100", 2, "a2-highgpu-2g", "nvidia-tesla-a100", false, 7.35},
      {"A100", 4, "a2-highgpu-4g", "nvidia-tesla-a100", false, 14.69},
      {"A100", 8, "a2-highgpu-8g", "nvidia-tesla-a100", false, 29.39},
      {"A100", 16, "a2-megagpu-16g", "nvidia-tesla-a100", false, 55.74},
      {"A100-80GB", 1, "a2-ultragpu-1g", "nvidia-a100-80gb", false, 5.07},
      {"A100-80GB", 2, "a2-ultragpu-2g", "nvidia-a100-80gb", false, 10.14},
      {"A100-80GB", 4, "a2-ultragpu-4g", "nvidia-a100-80gb", false, 20.28},
      {"A100-80GB", 8, "a2-ultragpu-8g", "nvidia-a100-80gb", false, 40.55},
      // a3-highgpu-1g/2g/4g: mostly Spot or Flex-start only (REFERENCE.md §7 notes).
      {"H100", 1, "a3-highgpu-1g", "nvidia-h100-80gb", false, 11.06},
      {"H100", 2, "a3-highgpu-2g", "nvidia-h100-80gb", false, 22.12},
      {"H100", 4, "a3-highgpu-4g", "nvidia-h100-80gb", false, 44.25},
      {"H100", 8, "a3-highgpu-8g", "nvidia-h100-80gb", false, 88.49},
      {"H100-MEGA", 8, "a3-megagpu-8g", "nvidia-h100-mega-80gb", false, 92.00},
      {"H200", 8, "a3-ultragpu-8g", "nvidia-h200-141gb", false, 84.81},
      {"B200", 8, "a4-highgpu-8g", "nvidia-b200", false, 91.00},
      // N1 + guestAccelerators (REFERENCE.md §7): vCPUs chosen by GPU count.
      {"T4", 1, "n1-standard-4", "nvidia-tesla-t4", true, 0.54},
      {"T4", 2, "n1-standard-8", "nvidia-tesla-t4", true, 1.08},
      {"T4", 4, "n1-standard-16", "nvidia-tesla-t4", true, 2.16},
      {"V100", 1, "n1-standard-8", "nvidia-tesla-v100", true, 2.86},
      {"V100", 2, "n1-standard-16", "nvidia-tesla-v100", true, 5.72},
      {"V100", 4, "n1-standard-32", "nvidia-tesla-v100", true, 11.44},
      {"V100", 8, "n1-standard-64", "nvidia-tesla-v100", true, 22.88},
  };
  return table;
}

std::optional<GceMachineType> MachineTypeByName(const std::string& machine_type,
                                                const std::string& accelerator) {
  for (const auto& m : GpuMachineTypes()) {
    if (m.machine_type != machine_type) continue;
    if (m.guest_accelerator && m.accelerator != accelerator) continue;
    return m;
  }
  GceMachineType cpu = CpuMachineType();
  if (cpu.machine_type == machine_type) return cpu;
  return std::nullopt;
}

GceMachineType CpuMachineType() { return {"", 0, "e2-standard-4", "", false, 0.13}; }

const drivers::Catalogue& MachineTypeCatalogue() {
  static const drivers::Catalogue catalogue = [] {
    drivers::Catalogue c;
    c.cloud = "Compute Engine";
    c.type_word = "machine type";
    for (const auto& m : GpuMachineTypes()) c.rows.push_back({m.machine_type, m.gpu_type, m.gpu_count, true});
    const GceMachineType cpu = CpuMachineType();
    c.cpu_default = {cpu.machine_type, "", 0, true};
    c.canonical_gpu = [](const std::string& g) -> std::optional<std::string> { return Canonical(g); };
    return c;
  }();
  return catalogue;
}

std::optional<GceMachineType> MachineTypeForGpu(const std::string& gpu_type, int count) {
  return drivers::EntryForGpu(MachineTypeCatalogue(), GpuMachineTypes(), gpu_type, count);
}

std::string NotOfferedMessage(const std::string& gpu_type, int count) {
  return drivers::NotOfferedMessage(MachineTypeCatalogue(), gpu_type, count);
}

}  // namespace gpuprov::gcp
