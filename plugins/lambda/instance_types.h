// SPDX-License-Identifier: Apache-2.0
//
// Lambda instance types: GPU request -> instance type name.
//
// Source: REFERENCE.md §7 (from the pypi lambdacloud README, SkyPilot's
// defaults and field reports). Names follow gpu_<count>x_<model>[_<variant>]. The set changes,
// so the driver takes prices and capacity from the live GET /instance-types and also accepts a
// listed type this table lacks when its name reads as the requested GPU and count. Lambda has
// no instance without a GPU, and no L4 or T4.
#pragma once

#include <Poco/JSON/Object.h>

#include <optional>
#include <string>
#include <vector>

#include "catalogue.h"

namespace gpuprov::lambda {

/// The reference's table as the kit's catalogue. Rows with the same GPUs (A100 PCIe and SXM4,
/// H100 PCIe and SXM5) are all offered; the host takes the cheapest with capacity.
const drivers::Catalogue& TypeCatalogue();

/// "A100", "a100-80gb", "H100_SXM5", "gh200" -> canonical GPU name; nullopt when Lambda has no
/// such GPU.
std::optional<std::string> CanonicalGpu(const std::string& requested);

/// The GPUs an instance type name says: "gpu_8x_h100_sxm5" -> {"H100", 8}; nullopt when the
/// name does not follow gpu_<count>x_<model>[_<variant>] or names an unknown model.
struct TypeGpus {
  std::string gpu_type;
  int gpu_count = 0;
};
std::optional<TypeGpus> GpusOfTypeName(const std::string& type_name);

/// "H100:8" for a type name, "" when it names no GPU.
std::string GpusText(const std::string& type_name);

/// What create launches, chosen from the live GET /instance-types map (L-SPEC
/// listInstanceTypes: type name -> {instance_type{price_cents_per_hour}, regions_with_capacity_available}).
struct LiveChoice {
  std::string type;                   ///< "" when no candidate has capacity
  std::string region;                 ///< where it has capacity
  std::vector<std::string> candidates;  ///< the listed types that were considered, by name
};

/// The candidates are `requested` alone when it is not "" (a type the request named), else
/// every listed type whose name reads as gpu_type x count (canonical GPU name). Of those with
/// capacity in `region` (in any region when ""), the cheapest; equal prices: the table's
/// preferred row first, then by name. The region is `region`, or the chosen type's first
/// region with capacity.
LiveChoice ChooseLiveType(const Poco::JSON::Object::Ptr& types, const std::string& gpu_type,
                          int count, const std::string& region, const std::string& requested);

}  // namespace gpuprov::lambda
