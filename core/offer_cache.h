// The GPU types a cloud offered before, kept so that shell completion of --gpus never calls a
// cloud: a Tab runs gpuprov, and an offers call is a network round trip (most drivers list the
// cloud's instance types live). provision remembers every offer it was shown.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cloud.h"

namespace gpuprov {

/// At most this many TYPE:COUNT lines are kept per cloud (the newest offers win).
inline constexpr size_t kMaxCachedGpuTypes = 200;

/// Adds the GPU offers' "TYPE:COUNT" (offers without a GPU are skipped) to
/// \a cache_dir/gpus-<cloud>.txt, written atomically with mode 0600. \a cache_dir must exist.
/// Throws Error when the file cannot be written.
void RememberGpuOffers(const std::filesystem::path& cache_dir, const std::string& cloud,
                       const std::vector<CloudOffer>& offers);

/// The remembered "TYPE:COUNT" of \a cloud, or of every cloud when \a cloud is empty; sorted,
/// without repeats. A missing or unreadable cache gives none.
std::vector<std::string> RememberedGpuTypes(const std::filesystem::path& cache_dir,
                                            const std::string& cloud);

}  // namespace gpuprov
