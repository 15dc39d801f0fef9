// What the clouds offered before, kept in the gpuprov folder's cache/ so that a Tab and a
// repeated `gpuprov offers` call no cloud (an offers call is a network round trip: most drivers
// list the cloud's instance types live):
// - the GPU types each cloud offered, for shell completion of --gpus; provision and `offers`
//   remember every offer they were shown;
// - each cloud's whole answer to one `gpuprov offers` question (credentials usable or not, and
//   its offers per region), for kOfferAnswerMaxAgeSeconds.
#pragma once

#include <filesystem>
#include <optional>
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

/// How long a cloud's answer to `gpuprov offers` is used again: prices and stock move, so a few
/// minutes; `--refresh` asks at once.
inline constexpr long kOfferAnswerMaxAgeSeconds = 300;

/// One cloud's answer to one offers question: whether its credentials work (as `gpuprov check`
/// says it) and, when they do, its offers for each region asked.
struct CachedOfferAnswer {
  long asked_at = 0;  // Unix seconds
  bool usable = false;
  std::string credentials;  // check_command.h CloudCheckReport's words
  std::string result;
  std::string fix;
  struct Region {
    std::string region;  // as asked; "" for the driver's choice
    std::vector<CloudOffer> offers;
  };
  std::vector<Region> regions;
};

/// The cache key of one offers question: the GPU request ("H100:1", "-"), the regions asked
/// ("" for the driver's choice) and whether the VM would be a k3s node.
std::string OfferQuestionKey(const std::string& gpus, const std::vector<std::string>& regions,
                             bool kubernetes);

/// \a cloud's cached answer to \a key when one at most \a max_age_seconds old (at \a now,
/// Unix seconds) is in \a cache_dir/offers/<cloud>.json; nullopt otherwise. A file that cannot
/// be read or parsed is ignored: \a problem (when given) then says why.
std::optional<CachedOfferAnswer> ReadCachedOfferAnswer(const std::filesystem::path& cache_dir,
                                                       const std::string& cloud,
                                                       const std::string& key, long now,
                                                       long max_age_seconds,
                                                       std::string* problem = nullptr);

/// Keeps \a answer under \a key in \a cache_dir/offers/<cloud>.json (folder 0700, file 0600,
/// written atomically), with the other keys' answers that are still fresh at answer.asked_at.
/// Throws Error when it cannot be written.
void WriteCachedOfferAnswer(const std::filesystem::path& cache_dir, const std::string& cloud,
                            const std::string& key, const CachedOfferAnswer& answer);

}  // namespace gpuprov
