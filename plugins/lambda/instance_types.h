// SPDX-License-Identifier: Apache-2.0
//
// Lambda instance types: GPU request -> instance type name.
//
// Source: /work/shared/clouds/lambda.md section 7 (from the pypi lambdacloud README, SkyPilot's
// defaults and field reports). Names follow gpu_<count>x_<model>[_<variant>]. The set changes,
// so the driver takes prices and capacity from the live GET /instance-types and also accepts a
// listed type this table lacks when its name reads as the requested GPU and count. Lambda has
// no instance without a GPU, and no L4 or T4.
#pragma once

#include <optional>
#include <string>

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

}  // namespace gpuprov::lambda
