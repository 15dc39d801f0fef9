// SPDX-License-Identifier: Apache-2.0
//
// DigitalOcean GPU Droplet sizes: GPU request -> size slug, default image, regions, price.
//
// Source: REFERENCE.md §7 and §9 (itself from SkyPilot
// sky/provision/do/constants.py and alchemy-run's Slugs.ts): slugs follow
// gpu-<model>x<count>-<total VRAM>gb; NVIDIA sizes boot the AI/ML-ready images
// gpu-h100x1-base / gpu-h100x8-base, AMD sizes gpu-amd-base. The reference has NO prices and
// marks regions as changing: the prices here are DigitalOcean's public list prices (per
// Droplet-hour, on-demand) and only a fallback — the driver replaces prices and regions with
// the live `GET /v2/sizes` answer whenever it can read it.
// DigitalOcean has no L4, A100, A10G or T4: those requests get no offer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "catalogue.h"

namespace gpuprov::digitalocean {

/// The day the fallback prices below were written down (said next to a table price).
inline constexpr const char* kPriceTableDate = "2026-12-02";

struct GpuSize {
  std::string gpu_type;  ///< canonical: "H100", "H200", "L40S", "RTX6000ADA", "RTX4000ADA", "MI300X", "MI325X"
  int gpu_count = 0;     ///< 0 for the CPU size
  std::string slug;      ///< size slug, e.g. "gpu-h100x1-80gb"
  std::string image;     ///< default image slug
  double price_per_hour = 0;         ///< list-price fallback (USD per Droplet-hour)
  std::vector<std::string> regions;  ///< fallback regions (REFERENCE.md §7, UNCONFIRMED there)
  bool image_confirmed = true;       ///< false where the reference marks the image UNCONFIRMED
};

/// Every size this driver knows, GPU sizes first, the CPU size last.
const std::vector<GpuSize>& KnownSizes();

/// The size used when no GPU is requested (not from the reference: a small general-purpose
/// Droplet with the stock Ubuntu LTS image).
const GpuSize& CpuSize();

/// "h100", "H100-80GB", "rtx 6000 ada", "6000ADA" -> canonical type; nullopt when DigitalOcean
/// has no such GPU.
std::optional<std::string> CanonicalGpuType(const std::string& requested);

/// The size for a GPU request; nullopt when the type or count is not offered.
std::optional<GpuSize> SizeForGpu(const std::string& type, int count);

/// The known size with this slug (GPU or CPU); nullopt when unknown.
std::optional<GpuSize> SizeForSlug(const std::string& slug);

/// The "TYPE:count" string for a size slug, "" for the CPU size or an unknown slug.
std::string GpusOfSlug(const std::string& slug);

/// KnownSizes() as the kit's catalogue (same order), for the instance-type choice.
const drivers::Catalogue& SizeCatalogue();

/// One line for users: why a request cannot be met and what DigitalOcean does offer, e.g.
/// "DigitalOcean does not offer L4:1 (it has no L4, ...); GPUs it offers: H100 x1/x8, ...".
std::string NotOfferedMessage(const std::string& type, int count);

}  // namespace gpuprov::digitalocean
