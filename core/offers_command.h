// `gpuprov offers` (like `sky show-gpus`, `dstack offer`): the offers of every cloud whose
// credentials work, in one table, cheapest first. Each row is a candidate exactly as
// `provision --cloud any` (or --cloud LIST) would try it: the same offers calls, the same
// matching and order (RankCandidates, candidates.h). Clouds are asked at once, within a time
// budget (`[defaults.timeouts] offers_wait_seconds`); their answers are kept for a few minutes
// (offer_cache.h) and shown with their age.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app_context.h"
#include "candidates.h"
#include "check_command.h"
#include "gpu_request.h"

namespace gpuprov {

/// The budget when config.toml sets none.
inline constexpr int kDefaultOffersWaitSeconds = 10;

struct OffersOptions {
  std::optional<GpuRequest> gpus;  // --gpus; nullopt: what provision without --gpus would make
  CloudSelection clouds{true, {}};  // --cloud; default any
  std::vector<std::string> regions;  // --region; empty: the driver's choice
  bool spot = false;                 // --spot
  std::optional<double> max_price;   // --max-price
  bool refresh = false;              // --refresh: ask even when the cache is fresh
};

/// One cloud's answer (asked now, or from the cache).
struct CloudOfferAnswer {
  std::string cloud;
  size_t index = 0;  // the cloud's position (the order given; `any`: the drivers' order)
  /// The check's report; usable false with credentials "missing or rejected": the cloud is
  /// listed at the end with its fix.
  CloudCheckReport check;
  /// Why nothing came: the driver did not load, no answer within the budget, check failed for
  /// another reason than credentials. "" when the cloud answered.
  std::string error;
  std::vector<CloudOffers> offers;  // one per region asked, when usable
  long age_seconds = 0;             // how old the answer is (0: asked now)
  bool cached = false;
};

/// The rows of `gpuprov offers` from the clouds' answers: the clouds that answered give their
/// offers (RankCandidates with \a rules), a cloud that failed one skipped row saying why; the
/// clouds without credentials are left out (listed apart). \a regions as asked (empty: the
/// driver's choice).
std::vector<Candidate> OfferRows(const std::vector<CloudOfferAnswer>& answers,
                                 const std::vector<std::string>& regions,
                                 const CandidateRules& rules);

/// Memory of one \a gpu_type (gpuprov's canonical names) in GB, from the vendor's data sheet,
/// for the types sold in one size only; nullopt otherwise (A100 comes with 40 or 80 GB).
std::optional<int> KnownGpuMemoryGb(const std::string& gpu_type);

/// The text table: GPUS, GPU MEM, CLOUD, REGION, INSTANCE TYPE, $/H, SPOT $/H, IN STOCK,
/// PRICE FROM, ASKED; then the skipped rows and the clouds without credentials with their fix.
std::string OffersTable(const std::vector<Candidate>& rows,
                        const std::vector<CloudOfferAnswer>& answers);

int RunOffers(const AppContext& app, const OffersOptions& options);

}  // namespace gpuprov
