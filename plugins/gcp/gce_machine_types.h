// SPDX-License-Identifier: Apache-2.0
//
// GPU request -> Compute Engine machine type (REFERENCE.md §7, itself from SkyPilot's
// fetch_gcp.py `_ACC_INSTANCE_TYPE_DICTS`). Accelerator-optimised families (G2, A2, A3, A4)
// come with their GPUs; N1 types get them attached with guestAccelerators.
// Prices are approximate on-demand us-central1 list prices in USD per hour: they are NOT in
// the reference, may be stale, and only order the offers of this driver.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "catalogue.h"

namespace gpuprov::gcp {

/// The day the prices below were written down (offers say it next to a table price).
inline constexpr const char* kPriceTableDate = "2026-12-02";

struct GceMachineType {
  std::string gpu_type;  ///< gpuprov's name, e.g. "L4", "A100-80GB"; "" for CPU only
  int gpu_count = 0;
  std::string machine_type;        ///< e.g. "g2-standard-4"
  std::string accelerator;         ///< GCE accelerator type, e.g. "nvidia-l4"; "" for CPU only
  bool guest_accelerator = false;  ///< N1: attach with guestAccelerators
  double price_per_hour = 0;       ///< approximate, see above
};

/// Default images (REFERENCE.md §9): Deep Learning VM (Ubuntu, NVIDIA driver preinstalled,
/// cloud-init runs `user-data`) for GPU types, Ubuntu LTS for CPU only.
inline constexpr const char* kGpuImage =
    "projects/deeplearning-platform-release/global/images/family/"
    "common-cu128-ubuntu-2204-nvidia-570";
inline constexpr const char* kCpuImage =
    "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts";

/// Every GPU row of the table.
const std::vector<GceMachineType>& GpuMachineTypes();

/// The machine type for TYPE:COUNT (case-insensitive; aliases A100-40GB = A100, H100-80GB =
/// H100, H100-MEGA-80GB = H100-MEGA, H200-141GB = H200), or nullopt.
std::optional<GceMachineType> MachineTypeForGpu(const std::string& gpu_type, int count);

/// The row of a machine type name (for N1, the first row with that machine type and
/// `accelerator`, when given). nullopt when the table does not know it.
std::optional<GceMachineType> MachineTypeByName(const std::string& machine_type,
                                                const std::string& accelerator = "");

/// The machine type used without a GPU.
GceMachineType CpuMachineType();

/// GpuMachineTypes() as the kit's catalogue (same order; CpuMachineType() the CPU default).
const drivers::Catalogue& MachineTypeCatalogue();

/// "Compute Engine does not offer X:N; GPUs it offers: L4 x1/x2/x4/x8, ..." for a request the
/// table does not have.
std::string NotOfferedMessage(const std::string& gpu_type, int count);

}  // namespace gpuprov::gcp
