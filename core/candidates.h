// Candidates of a `provision` over several clouds and regions (issue 19): `--cloud aws,gcp` or
// `any`, `--region r1,r2`. Every candidate is one cloud, one region and the offer chosen there;
// they are tried cheapest first, one at a time, and a create that fails for lack of capacity or
// quota moves on to the next (the decision is DecideAfterAttempt, a pure function).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cloud.h"

namespace gpuprov {

/// The clouds asked for: a list in the order given, or `any` (every cloud whose credentials
/// work, found by the clouds' checks).
struct CloudSelection {
  bool any = false;
  std::vector<std::string> clouds;  // empty when any
};

/// "aws,gcp,lambda" (spaces around names allowed), one name, or "any". Throws UsageError naming
/// \a field for an empty entry, a name given twice, an invalid cloud name, or "any" in a list.
CloudSelection ParseCloudList(const std::string& text, const std::string& field);

/// "us-central1,us-east1" in the order given; empty entries and repeats refused (UsageError
/// naming \a field). "any" stands for no region: the driver's choice.
std::vector<std::string> ParseRegionList(const std::string& text, const std::string& field);

/// True when \a text names more than one cloud or region, or `any`: provision then gathers
/// candidates; one cloud and at most one region runs as a single candidate.
bool IsCandidateList(const std::string& text);

struct Candidate {
  std::string cloud;
  std::string region;  // the offer's region ("" when the cloud does not say)
  CloudOffer offer;
  size_t order = 0;     // position in the order given (clouds, then regions): breaks price ties
  std::string skipped;  // why it is not tried ("" when it is): no offer, offers failed, price
  std::string failed;   // why its attempt failed ("" until then)
  bool spot = false;    // a spot (preemptible) VM: its spot price is the one compared

  /// USD per hour compared and shown: the spot price for a spot candidate, else on demand;
  /// 0 when unknown.
  double Price() const {
    return spot ? offer.spot_price_per_hour.value_or(0) : offer.price_per_hour;
  }
};

/// The offers of one cloud for one region request, or why they could not be had.
struct CloudOffers {
  std::string cloud;
  std::string region;  // as asked ("" for the driver's choice)
  size_t order = 0;
  std::vector<CloudOffer> offers;
  /// Why there are no offers: "offers failed: ..." for a failed offers call, or why the cloud
  /// cannot be used (its driver did not load, Kubernetes asked of a cloud that cannot host it).
  std::string error;
};

/// One candidate per (cloud, region) pair: the offer of \a instance_type when given, else the
/// cheapest in that region; a request with no region gives one candidate per region the offers
/// name. A failed offers call or no matching offer gives a skipped candidate saying why. With
/// \a spot only offers with a spot price count, compared by it.
std::vector<Candidate> CandidatesFromOffers(const std::vector<CloudOffers>& asked,
                                            const std::optional<std::string>& instance_type,
                                            bool spot = false);

/// What picks the candidates among the offers and orders them: the flags `provision` and
/// `gpuprov offers` share.
struct CandidateRules {
  std::optional<std::string> instance_type;  // --instance-type
  std::optional<double> max_price;           // --max-price
  bool spot = false;                         // --spot
};

/// The candidates of \a asked under \a rules in the order provision tries them: cheapest
/// first, the skipped ones (and why) last. provision (core/remote/failover.cc) and `gpuprov
/// offers` both call this one function, so what `offers` shows is what `provision --cloud any`
/// would try.
std::vector<Candidate> RankCandidates(const std::vector<CloudOffers>& asked,
                                      const CandidateRules& rules);

/// Orders by Price() ascending (an unknown price, 0, after every known one), ties by order given;
/// skipped candidates last, in the order given.
void SortCandidates(std::vector<Candidate>& candidates);

/// Marks candidates above \a max_price (--max-price) as skipped, with the reason; with a
/// maximum, an offer whose price is unknown is skipped too (it cannot be shown to be within it).
void SkipAbovePrice(std::vector<Candidate>& candidates, std::optional<double> max_price);

/// Where an offer's price comes from: "live", "table 2026-12-02" (the day the driver's table
/// was written), "table", or "-" when there is no price.
std::string PriceSourceText(const CloudOffer& offer);

/// The table printed before anything is created: cloud, region, instance type, GPUs, $/h, where
/// the price comes from (live or the driver's table), in stock (where the cloud says) and the
/// note (skipped or failed, with the reason), one row per candidate in order.
std::string CandidateTable(const std::vector<Candidate>& candidates);

/// How one attempt on a candidate ended.
enum class AttemptOutcome {
  kCreated,       // the VM runs
  kCapacity,      // create: GPUPROV_STATUS_CAPACITY
  kQuota,         // create: GPUPROV_STATUS_QUOTA
  kBootCapacity,  // created, then went to error (or vanished) while booting for lack of capacity
  kBootFailed,    // created, then went to error while booting for another reason
  kFailed,        // any other error
  kInterrupted,   // Ctrl-C
};

enum class AttemptAction {
  kProceed,         // go on with this VM
  kNext,            // delete what this attempt made, forget its record, try the next candidate
  kCleanUpAndStop,  // delete what this attempt made, forget its record, fail: none left
  kStop,            // fail as a single-cloud provision does (the VM and record stay as they are)
};

struct AttemptDecision {
  AttemptAction action = AttemptAction::kStop;
  std::string reason;  // in words for the report
};

/// What follows an attempt. \a failover: more than one candidate was given (a single candidate
/// behaves as provision always did); \a has_next: a later candidate is left to try.
AttemptDecision DecideAfterAttempt(AttemptOutcome outcome, bool failover, bool has_next);

/// True when a VM that went to \a state while booting, with the cloud's \a message, failed for
/// lack of capacity ("InsufficientInstanceCapacity", "not enough resources", "out of stock",
/// "no capacity", "no_capacity").
bool BootFailureIsCapacity(const std::string& state, const std::string& message);

/// The report line of every candidate tried: "gcp us-central1 g2-standard-4 $0.85/h: no
/// capacity (...)", one per line.
std::string TriedReport(const std::vector<Candidate>& candidates);

}  // namespace gpuprov
