#include "failover.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <sstream>
#include <thread>

#include "check_command.h"
#include "interrupt.h"
#include "provision.h"
#include "spot.h"
#include "ssh_keys.h"

namespace gpuprov {
namespace {

/// At most this many clouds are asked for offers at once.
constexpr size_t kParallelOffers = 4;

/// Runs \a job(i) for i in [0, n), at most \a width at a time.
void RunBounded(size_t n, size_t width, const std::function<void(size_t)>& job) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (size_t t = 0; t < std::min(n, width); ++t) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) job(i);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace

void Failover::Run() {
  const CloudSelection selection = ParseCloudList(
      p_.opt_.cloud.value.empty() ? std::string("any") : p_.opt_.cloud.value, "--cloud");
  const std::vector<std::string> regions = p_.opt_.region.value
                                               ? ParseRegionList(*p_.opt_.region.value, "--region")
                                               : std::vector<std::string>{};
  p_.host_.emplace(p_.app_.MakeDriverHost());
  p_.ChooseKeyPath();
  std::vector<std::string> clouds = selection.clouds;
  if (selection.any) clouds = UsableClouds();
  p_.LockVmAndLoadRecord();
  if (p_.existing_) {
    if (std::find(clouds.begin(), clouds.end(), p_.existing_->cloud) == clouds.end()) {
      throw UsageError("a VM named '" + p_.name_ + "' already exists on " + p_.existing_->cloud +
                           ", which is not among the candidate clouds",
                       "choose another --name, or remove it with `gpuprov down " + p_.name_ + "`");
    }
    ResumeCandidate();
    return;
  }
  std::vector<CandidateCloud> prepared = PrepareClouds(clouds);
  p_.candidates_ = GatherCandidates(prepared, regions);
  p_.console_.Step("offers", "candidates, cheapest first:");
  std::istringstream table(CandidateTable(p_.candidates_));
  for (std::string line; std::getline(table, line);) p_.console_.Info(line);
  const auto tried = [](const Candidate& c) { return c.skipped.empty(); };
  if (std::none_of(p_.candidates_.begin(), p_.candidates_.end(), tried)) {
    throw UsageError(
        "no candidate to try for " +
            (p_.opt_.gpus.value ? ToString(*p_.opt_.gpus.value) : std::string("no GPU")) + " on " +
            JoinNames(clouds),
        "the table above says why each was skipped; raise --max-price, or name "
        "other clouds (--cloud) or regions (--region); nothing was created");
  }
  p_.public_key_ = EnsureEd25519Key(p_.key_path_);
  for (size_t i = 0; i < p_.candidates_.size(); ++i) {
    if (!tried(p_.candidates_[i])) continue;
    const bool has_next = std::any_of(p_.candidates_.begin() + i + 1, p_.candidates_.end(), tried);
    if (TryCandidate(p_.candidates_[i], prepared, has_next)) return;
  }
  throw Error(
      "no candidate could be created; tried:\n" + WithoutLastNewline(TriedReport(p_.candidates_)),
      "try again later, or name other clouds (--cloud) or regions (--region); nothing "
      "was left on the clouds tried");
}

std::vector<std::string> Failover::UsableClouds() {
  p_.console_.Step("check", "--cloud any: checking which clouds' credentials work");
  std::vector<std::string> usable;
  for (const CloudCheckReport& r : CheckClouds(*p_.host_, p_.config_, std::nullopt, false)) {
    if (r.usable) {
      usable.push_back(r.cloud);
    } else {
      p_.console_.Info("skipping " + r.cloud + ": " + r.credentials +
                       (r.result.empty() ? "" : ", " + r.result));
    }
  }
  if (usable.empty()) {
    throw UsageError("--cloud any: no cloud's credentials work",
                     "`gpuprov check` says what each cloud needs; nothing was created");
  }
  p_.console_.Info("clouds with working credentials: " + JoinNames(usable));
  return usable;
}

std::string Failover::WithoutLastNewline(std::string text) {
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

std::string Failover::JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::vector<Failover::CandidateCloud> Failover::PrepareClouds(const std::vector<std::string>& clouds) {
  std::vector<CandidateCloud> out(clouds.size());
  for (size_t i = 0; i < clouds.size(); ++i) {
    CandidateCloud& c = out[i];
    c.name = clouds[i];
    try {
      c.driver.emplace(p_.host_->Load(c.name));
      c.k8s = DecideKubernetes(p_.opt_.kubernetes, c.name,
                               c.driver->info().has(GPUPROV_CAP_HOSTS_KUBERNETES));
      if (c.k8s.refused) {
        c.error = c.k8s.note;
        continue;
      }
      if (p_.opt_.spot.value && !c.driver->info().has(GPUPROV_CAP_SPOT)) {
        c.error = "the " + c.name + " driver does not make spot VMs";
        continue;
      }
      c.cloud = Cloud::Open(*c.driver, p_.config_);
    } catch (const Error& e) {
      if (e.exit_code() == kExitInterrupted) throw;
      c.error = e.what();
    }
  }
  return out;
}

std::vector<Candidate> Failover::GatherCandidates(std::vector<CandidateCloud>& prepared,
                                                  const std::vector<std::string>& regions) {
  const std::vector<std::string> asked_regions =
      regions.empty() ? std::vector<std::string>{""} : regions;
  std::vector<std::vector<CloudOffers>> per_cloud(prepared.size());
  p_.console_.Step("offers", "asking " + std::to_string(prepared.size()) + " cloud(s) for offers");
  RunBounded(prepared.size(), kParallelOffers, [&](size_t i) {
    CandidateCloud& c = prepared[i];
    for (size_t j = 0; j < asked_regions.size(); ++j) {
      CloudOffers o;
      o.cloud = c.name;
      o.region = asked_regions[j];
      o.order = i * asked_regions.size() + j;
      if (!c.error.empty()) {
        o.error = c.error;
      } else {
        try {
          o.offers = c.cloud->Offers(p_.opt_.gpus.value, o.region, c.k8s.enabled);
        } catch (const std::exception& e) {
          o.error = std::string("offers failed: ") + e.what();
        }
      }
      per_cloud[i].push_back(std::move(o));
    }
  });
  ThrowIfInterrupted("asking for offers");
  std::vector<CloudOffers> asked;
  for (auto& list : per_cloud) {
    for (auto& o : list) {
      if (o.error.empty()) {
        p_.RememberOffers(o.cloud, o.offers);
      }
      asked.push_back(std::move(o));
    }
  }
  CandidateRules rules;
  rules.instance_type = p_.opt_.instance_type.value;
  rules.max_price = p_.flags_.max_price_per_hour;
  rules.spot = p_.opt_.spot.value;  // as `offers --spot`: only offers with a spot price
  return RankCandidates(asked, rules);
}

void Failover::UseCloud(CandidateCloud& c) {
  p_.cloud_name_ = c.name;
  p_.opt_.cloud.value = c.name;
  p_.driver_.emplace(*c.driver);
  p_.k8s_ = c.k8s;
  p_.cloud_ = std::move(c.cloud);
}

bool Failover::TryCandidate(Candidate& c, std::vector<CandidateCloud>& prepared, bool has_next) {
  auto it = std::find_if(prepared.begin(), prepared.end(),
                         [&](const CandidateCloud& p) { return p.name == c.cloud; });
  UseCloud(*it);
  // The cloud goes back for a later candidate of the same cloud (another region).
  struct GiveBack {
    Provision* self;
    CandidateCloud* to;
    ~GiveBack() {
      if (self->cloud_) to->cloud = std::move(self->cloud_);
    }
  };
  p_.console_.Step("create", "trying " + c.cloud + (c.region.empty() ? "" : " " + c.region) + ": " +
                                 c.offer.instance_type);
  try {
    p_.CheckAccountAndPlan();
    p_.offer_ = c.spot ? PricedAsSpot(c.offer) : c.offer;
    p_.region_ = c.region;
    p_.AnnounceOfferAndConfirm();
    p_.PlanTtl();
  } catch (const Error& e) {
    if (Interrupted() || e.exit_code() == kExitInterrupted) throw;
    GiveBack back{&p_, &*it};
    c.failed = std::string("before create: ") + e.what();
    p_.console_.Note(c.cloud + " " + c.region + ": " + c.failed + "; next candidate");
    return false;
  }
  p_.rec_ = VmRecord{};
  p_.RecordIntent();
  AttemptOutcome outcome = AttemptOutcome::kCreated;
  std::string message;
  try {
    p_.CreateOrFind();
  } catch (const DriverCallError& e) {
    outcome = Interrupted()                           ? AttemptOutcome::kInterrupted
              : e.status() == GPUPROV_STATUS_CAPACITY ? AttemptOutcome::kCapacity
              : e.status() == GPUPROV_STATUS_QUOTA    ? AttemptOutcome::kQuota
                                                      : AttemptOutcome::kFailed;
    message = e.what();
    if (!Settle(c, outcome, message, has_next)) throw;
    GiveBack back{&p_, &*it};
    return false;
  }
  try {
    p_.WaitForRunning();
  } catch (const Error& e) {
    outcome = Interrupted() ? AttemptOutcome::kInterrupted
              : BootFailureIsCapacity(p_.vm_.state, p_.vm_.message) || p_.vm_.state == "gone"
                  ? AttemptOutcome::kBootCapacity
                  : AttemptOutcome::kBootFailed;
    if (!Settle(c, outcome, e.what(), has_next)) p_.KeepVmAndRethrow(e);
    GiveBack back{&p_, &*it};
    return false;
  }
  if (!TriedReport(p_.candidates_).empty()) {
    p_.console_.Note("running on " + c.cloud + (c.region.empty() ? "" : " " + c.region) +
                     "; the candidates tried before it and why they failed:\n" +
                     WithoutLastNewline(TriedReport(p_.candidates_)));
  }
  return true;
}

bool Failover::Settle(Candidate& c, AttemptOutcome outcome, const std::string& message,
                      bool has_next) {
  const AttemptDecision d = DecideAfterAttempt(outcome, /*failover=*/true, has_next);
  if (d.action == AttemptAction::kStop || d.action == AttemptAction::kProceed) return false;
  c.failed = d.reason + " (" + message + ")";
  CleanUpAttempt(c);
  if (d.action == AttemptAction::kCleanUpAndStop) {
    throw Error(
        "no candidate could be created; tried:\n" + WithoutLastNewline(TriedReport(p_.candidates_)),
        "try again later, or name other clouds (--cloud) or regions (--region); "
        "nothing was left on the clouds tried");
  }
  p_.console_.Note(c.cloud + " " + c.region + ": " + d.reason + "; trying the next candidate");
  return true;
}

void Failover::CleanUpAttempt(const Candidate& c) {
  try {
    if (p_.cloud_->Delete(p_.vm_.id, p_.name_))
      p_.console_.Info("deleted the VM made on " + c.cloud);
  } catch (const Error& e) {
    p_.rec_.phase = "failed";
    p_.rec_.last_error = c.failed + "; deleting it failed: " + e.what();
    p_.store_->Save(p_.rec_);
    throw Error("the attempt on " + c.cloud + " failed (" + c.failed +
                    ") and deleting what it made failed: " + e.what(),
                "`gpuprov down " + p_.name_ + "` removes it; then re-run the provision");
  }
  p_.store_->Remove(p_.name_);
  p_.existing_.reset();
  p_.vm_ = CloudVm{};
  p_.vm_existed_ = false;
}

void Failover::ResumeCandidate() {
  p_.cloud_name_ = p_.existing_->cloud;
  p_.opt_.cloud.value = p_.cloud_name_;
  if (!p_.existing_->region.empty()) p_.opt_.region.value = p_.existing_->region;
  if (!p_.opt_.instance_type.value && !p_.existing_->instance_type.empty()) {
    p_.opt_.instance_type.value = p_.existing_->instance_type;
  }
  p_.console_.Info("resuming with " + p_.cloud_name_ +
                   (p_.existing_->region.empty() ? "" : " " + p_.existing_->region) +
                   ", the candidate the record of '" + p_.name_ + "' names");
  p_.LoadDriver();
  p_.CheckAccountAndPlan();
  p_.ReplacePreemptedVm();
  p_.ChooseOfferAndKey();
  p_.RecordIntent();
  p_.CreateOrFind();
  try {
    p_.WaitForRunning();
  } catch (const Error& e) {
    p_.KeepVmAndRethrow(e);
  }
}

}  // namespace gpuprov
