// SPDX-License-Identifier: Apache-2.0
#include "gpu_sizes.h"

#include <cctype>
#include <map>

#include "gpu_names.h"

namespace gpuprov::digitalocean {
namespace {

const std::vector<std::string> kNvidiaRegions = {"nyc2", "tor1"};
const std::vector<std::string> kAmdRegions = {"atl1"};

// The GPU models DigitalOcean sells (the kit's canonical names, gpu_names.h).
constexpr std::string_view kDigitalOceanGpus[] = {"H100",       "H200",   "L40S",  "RTX6000ADA",
                                                  "RTX4000ADA", "MI300X", "MI325X"};

}  // namespace

const std::vector<GpuSize>& KnownSizes() {
  // clang-format off
  static const std::vector<GpuSize> kSizes = {
      // type          n  slug                   image              $/h    regions        image confirmed
      {"H100",        1, "gpu-h100x1-80gb",     "gpu-h100x1-base",  3.39,  kNvidiaRegions, true},
      {"H100",        8, "gpu-h100x8-640gb",    "gpu-h100x8-base", 23.92,  kNvidiaRegions, true},
      {"H200",        1, "gpu-h200x1-141gb",    "gpu-h100x1-base",  3.44,  kNvidiaRegions, false},
      {"H200",        8, "gpu-h200x8-1128gb",   "gpu-h100x8-base", 27.52,  kNvidiaRegions, false},
      {"L40S",        1, "gpu-l40sx1-48gb",     "gpu-h100x1-base",  1.57,  kNvidiaRegions, false},
      {"RTX6000ADA",  1, "gpu-6000adax1-48gb",  "gpu-h100x1-base",  1.57,  kNvidiaRegions, false},
      {"RTX4000ADA",  1, "gpu-4000adax1-20gb",  "gpu-h100x1-base",  0.76,  kNvidiaRegions, false},
      {"MI300X",      1, "gpu-mi300x1-192gb",   "gpu-amd-base",     1.99,  kAmdRegions,    true},
      {"MI300X",      8, "gpu-mi300x8-1536gb",  "gpu-amd-base",    15.92,  kAmdRegions,    true},
      {"MI325X",      1, "gpu-mi325x1-256gb",   "gpu-amd-base",     1.69,  kAmdRegions,    false},
      {"MI325X",      8, "gpu-mi325x8-2048gb",  "gpu-amd-base",    13.52,  kAmdRegions,    false},
      // No GPU: a general-purpose Droplet (not in the reference).
      {"",            0, "s-2vcpu-4gb",         "ubuntu-24-04-x64", 0.03571,
       {"nyc1", "nyc3", "sfo3", "ams3", "fra1", "lon1", "sgp1", "tor1", "blr1", "syd1", "atl1"}, true},
  };
  // clang-format on
  return kSizes;
}

const GpuSize& CpuSize() { return KnownSizes().back(); }

std::optional<std::string> CanonicalGpuType(const std::string& requested) {
  return drivers::CanonicalGpuAmong(requested, kDigitalOceanGpus);
}

const drivers::Catalogue& SizeCatalogue() {
  static const drivers::Catalogue catalogue = [] {
    drivers::Catalogue c;
    c.cloud = "DigitalOcean";
    c.type_word = "size";
    for (const GpuSize& s : KnownSizes()) c.rows.push_back({s.slug, s.gpu_type, s.gpu_count, true});
    c.cpu_default = c.rows.back();
    c.canonical_gpu = CanonicalGpuType;
    c.gpu_hint = [](const std::string&) {
      return std::string("it has no L4, A100, A10G or T4 GPU Droplets");
    };
    return c;
  }();
  return catalogue;
}

std::optional<GpuSize> SizeForGpu(const std::string& type, int count) {
  return drivers::EntryForGpu(SizeCatalogue(), KnownSizes(), type, count);
}

std::optional<GpuSize> SizeForSlug(const std::string& slug) {
  for (const GpuSize& s : KnownSizes()) {
    if (s.slug == slug) return s;
  }
  return std::nullopt;
}

std::string GpusOfSlug(const std::string& slug) {
  std::optional<GpuSize> s = SizeForSlug(slug);
  if (!s || s->gpu_count == 0) return "";
  return s->gpu_type + ":" + std::to_string(s->gpu_count);
}

std::string NotOfferedMessage(const std::string& type, int count) {
  return drivers::NotOfferedMessage(SizeCatalogue(), type, count);
}

}  // namespace gpuprov::digitalocean
