// The candidate loop of `gpuprov provision` (candidates.h): several clouds or regions, or
// any cloud whose credentials work, asked for offers side by side and tried cheapest first; a
// create that fails for lack of capacity or quota is cleaned up and the next candidate is tried
// (DecideAfterAttempt, candidates.h). It takes Provision's steps (provision.h) in its own order.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "candidates.h"
#include "cloud.h"
#include "driver_host.h"
#include "k8s_policy.h"

namespace gpuprov {

class Provision;

class Failover {
 public:
  explicit Failover(Provision& provision) : p_(provision) {}

  /// Candidates: the clouds given (or every cloud whose credentials work) x the regions given,
  /// tried cheapest first; a record of this name on a candidate cloud resumes that candidate.
  /// Ends with the VM running (or throws), like the single path's CreateOrFind and
  /// WaitForRunning.
  void Run();

 private:
  /// A candidate cloud's driver, opened once for offers and, when its turn comes, for create.
  struct CandidateCloud {
    std::string name;
    std::optional<LoadedDriver> driver;
    std::unique_ptr<Cloud> cloud;
    K8sDecision k8s;
    std::string error;  // why it cannot be a candidate ("" when it can)
  };

  /// `any`: every cloud whose check passes, the test cloud not counted; the others are named
  /// with the reason they are skipped.
  std::vector<std::string> UsableClouds();

  static std::string WithoutLastNewline(std::string text);

  static std::string JoinNames(const std::vector<std::string>& names);

  /// Each cloud's driver loaded and opened (here, one after the other: opening reads files, no
  /// network), with its Kubernetes decision; a cloud that fails is kept with its reason.
  std::vector<CandidateCloud> PrepareClouds(const std::vector<std::string>& clouds);

  /// Offers of every cloud x region, asked side by side (kParallelOffers clouds at a time; the
  /// regions of one cloud one after the other, as a driver handle serves one call at a time).
  std::vector<Candidate> GatherCandidates(std::vector<CandidateCloud>& prepared,
                                          const std::vector<std::string>& regions);

  /// Makes \a c's cloud the one in use (its driver, opened cloud and Kubernetes decision).
  void UseCloud(CandidateCloud& c);

  /// One attempt: check, plan, record the candidate, create, wait for it to run. true: the VM
  /// runs; false: cleaned up, try the next. Throws when the decision is to stop.
  bool TryCandidate(Candidate& c, std::vector<CandidateCloud>& prepared, bool has_next);

  /// After a failed attempt: false when the failure stands (the caller rethrows it as a single
  /// cloud would); true when the attempt was cleaned up and the next candidate comes. Throws
  /// when the attempt was cleaned up and none is left, or when clean-up failed.
  bool Settle(Candidate& c, AttemptOutcome outcome, const std::string& message, bool has_next);

  /// Deletes what the attempt on \a c made (the driver's delete_vm also removes its firewall,
  /// key and the like) and forgets the record; a delete that fails stops everything, so two
  /// candidates never hold a VM at once.
  void CleanUpAttempt(const Candidate& c);

  /// A record of this name on a candidate cloud: a killed run's candidate. Continue with it
  /// (create is idempotent by name) instead of starting over.
  void ResumeCandidate();

  Provision& p_;
};

}  // namespace gpuprov
