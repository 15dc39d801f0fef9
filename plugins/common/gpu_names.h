// SPDX-License-Identifier: Apache-2.0
//
// gpuprov's one table of GPU model names: the canonical name `--gpus` takes and the results
// carry ("H100", "A6000", "RTX6000ADA"), with the other spellings users and clouds write for
// the same model ("NVIDIA H100", "h100-80gb", "RTX A6000"). Names are compared Squash'ed
// (text.h: case, ' ', '-' and '_' do not count).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace gpuprov::drivers {

/// The canonical name of the GPU model `name` denotes, or nullopt when the table has no
/// such spelling.
std::optional<std::string> CanonicalGpuName(std::string_view name);

/// CanonicalGpuName narrowed to the models a cloud sells (`offered`, canonical names):
/// nullopt for a model not among them.
std::optional<std::string> CanonicalGpuAmong(std::string_view name,
                                             std::span<const std::string_view> offered);

}  // namespace gpuprov::drivers
