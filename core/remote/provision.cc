#include "provision.h"

#include <Poco/JSON/Object.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include "candidates.h"
#include "check_command.h"
#include "cloud.h"
#include "cluster_bringup.h"
#include "console.h"
#include "crash_point.h"
#include "driver_host.h"
#include "elapsed.h"
#include "error.h"
#include "file_util.h"
#include "interrupt.h"
#include "installer_bundle.h"
#include "k8s_policy.h"
#include "kubeconfig.h"
#include "kubeconfig_merge.h"
#include "node_shell.h"
#include "offer_cache.h"
#include "prompt.h"
#include "spec.h"
#include "ssh_client.h"
#include "ssh_keys.h"
#include "state_store.h"
#include "ttl.h"
#include "tunnel_command.h"
#include "vm_records.h"
#include "vm_ports.h"

namespace gpuprov {
namespace {

using Clock = std::chrono::steady_clock;

std::string ExpandHome(const std::string& path) {
  if (path.rfind("~/", 0) == 0) {
    if (const char* home = std::getenv("HOME")) return std::string(home) + path.substr(1);
  }
  return path;
}

std::string OffersSummary(const std::vector<CloudOffer>& offers) {
  std::string out;
  for (const auto& o : offers) {
    if (!out.empty()) out += ", ";
    out += o.instance_type;
  }
  return out;
}

/// Chooses the offer: the named instance type, else the cheapest.
CloudOffer ChooseOffer(const std::vector<CloudOffer>& offers, const ProvisionOptions& opt,
                       const std::string& cloud) {
  const std::string gpu_text = opt.gpus.value ? ToString(*opt.gpus.value) : "no GPU";
  const std::string region_text = opt.region.value ? " in region " + *opt.region.value : "";
  if (offers.empty()) {
    throw UsageError("the " + cloud + " cloud does not offer " + gpu_text + region_text +
                         " (GPUs " + DescribeOrigin(opt.gpus) + ")",
                     "choose another GPU type, count or region, or another --cloud; " +
                         DriverReadme(cloud) + " lists what it offers");
  }
  if (opt.instance_type.value) {
    for (const auto& o : offers) {
      if (o.instance_type == *opt.instance_type.value) return o;
    }
    throw UsageError("instance type '" + *opt.instance_type.value + "' does not match " +
                         gpu_text + region_text + " on " + cloud,
                     "matching instance types: " + OffersSummary(offers));
  }
  return *std::min_element(offers.begin(), offers.end(), [](const auto& a, const auto& b) {
    return a.price_per_hour < b.price_per_hour;
  });
}

/// "create 1.0 s, ssh 2.1 s, install 3.6 s, ..." in the order the phases run.
std::string PhaseTimes(const std::map<std::string, double>& seconds) {
  std::string out;
  for (const char* phase : {"create", "ssh", "install", "api", "validate", "access"}) {
    auto it = seconds.find(phase);
    if (it == seconds.end()) continue;
    std::ostringstream one;
    one.precision(1);
    one << std::fixed << it->second;
    out += (out.empty() ? "" : ", ") + std::string(phase) + " " + one.str() + " s";
  }
  return out;
}

std::string NowRfc3339() { return FormatRfc3339Utc(std::chrono::system_clock::now()); }

/// Polls the driver until the VM is running; bounded, with progress. \a vm holds the last state
/// seen when it throws ("gone" when the VM disappeared).
void WaitRunning(Cloud& cloud, CloudVm& vm, std::chrono::seconds limit) {
  Console& console = Console::Get();
  const auto start = Clock::now();
  auto last_progress = start;
  // The first polls come sooner (0.25 s, then 0.5 s, then every second): a VM that runs
  // within a second of its create is seen then, and a slow one costs at most two more calls.
  std::chrono::milliseconds pause(250);
  while (vm.state != "running") {
    if (vm.state == "error" || vm.state == "terminated" || vm.state == "stopped") {
      throw Error("VM " + vm.name + " went to state '" + vm.state + "'" +
                      (vm.message.empty() ? "" : ": " + vm.message),
                  "inspect it in the cloud console, then `gpuprov down " + vm.name + "`");
    }
    auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start);
    if (elapsed >= limit) {
      throw Error("VM " + vm.name + " is still '" + vm.state + "' after " +
                      std::to_string(limit.count()) + "s (boot_wait_seconds)",
                  "re-run the same `gpuprov provision` to keep waiting, or `gpuprov down " +
                      vm.name + "`");
    }
    if (Clock::now() - last_progress >= std::chrono::seconds(5)) {
      console.Progress("waiting for VM " + vm.name + " to run (state " + vm.state + ")", elapsed);
      last_progress = Clock::now();
    }
    ThrowIfInterrupted("waiting for the VM");
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::milliseconds>(pause * 2, std::chrono::seconds(1));
    std::optional<CloudVm> now = cloud.Get(vm.id, vm.name);
    if (!now) {
      vm.state = "gone";
      throw Error("VM " + vm.name + " disappeared while booting",
                  "re-run the same `gpuprov provision` to create it again");
    }
    vm = *now;
  }
}

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

/// One `gpuprov provision`: the steps of design.md section 3, each a method, sharing the
/// options, the driver (loaded once) and the record they keep up to date. Nothing is created
/// before CreateOrFind; every transition after it is saved.
class Provision {
 public:
  Provision(const AppContext& app, const ProvisionFlags& flags,
            const std::optional<std::string>& spec_file)
      : app_(app), flags_(flags), spec_file_(spec_file), console_(Console::Get()) {}

  int Run() {
    ResolveInputs();
    if (failover_) {
      RunCandidates();
    } else {
      LoadDriver();
      LockAndReadRecord();
      CheckAccountAndPlan();
      ChooseOfferAndKey();
      RecordIntent();
      CreateOrFind();
    }
    try {
      if (!failover_) WaitForRunning();
      OpenNeededPorts();
      SshSession session = WaitForSsh();
      InstallTtlIfAsked(session);
      ChooseTunnelPortIfTunnel();
      BringUpClusterIfOn(session);
      MergeKubeconfigIfAsked();
      rec_.phase = "ready";
      Save();
    } catch (const Error& e) {
      KeepVmAndRethrow(e);
    }
    Report();
    return 0;
  }

 private:
  /// Flags, spec, environment and config.toml merged; nothing is created.
  void ResolveInputs() {
    config_ = app_.LoadUserConfig();
    Spec spec;
    if (spec_file_) spec = LoadSpec(*spec_file_);
    opt_ = ResolveProvisionOptions(flags_, spec, ProcessEnv(), config_);
    for (const auto& line : DescribeProvisionOptions(opt_)) console_.Debug(line);
    name_ = opt_.name.value;
    cloud_name_ = opt_.cloud.value;
    // A list of clouds or regions, or any: candidates (RunCandidates); else one cloud as ever.
    failover_ = IsCandidateList(cloud_name_) ||
                (opt_.region.value && IsCandidateList(*opt_.region.value));
    if (failover_) return;
    if (cloud_name_.empty()) {
      // No --cloud, spec, GPUPROV_CLOUD or [defaults] cloud: the only cloud whose check passes.
      console_.Step("no cloud given: checking which clouds' credentials work");
      cloud_name_ = ChooseDefaultCloud(
          CheckClouds(app_.MakeDriverHost(), config_, std::nullopt, /*with_test_cloud=*/false));
      opt_.cloud.value = cloud_name_;
      console_.Info("cloud: " + cloud_name_ + ", the only one whose credentials work");
    }
  }

  // ---- Candidates (issue 19): several clouds or regions, tried cheapest first ----------------

  /// A candidate cloud's driver, opened once for offers and, when its turn comes, for create.
  struct CandidateCloud {
    std::string name;
    std::optional<LoadedDriver> driver;
    std::unique_ptr<Cloud> cloud;
    K8sDecision k8s;
    std::string error;  // why it cannot be a candidate ("" when it can)
  };

  /// Candidates: the clouds given (or every cloud whose credentials work) x the regions given,
  /// offers asked side by side, tried cheapest first; a create that fails for lack of capacity
  /// or quota is cleaned up and the next one is tried (DecideAfterAttempt). Ends with the VM
  /// running (or throws), like the single path's CreateOrFind and WaitForRunning.
  void RunCandidates() {
    const CloudSelection selection = ParseCloudList(
        opt_.cloud.value.empty() ? std::string("any") : opt_.cloud.value, "--cloud");
    const std::vector<std::string> regions =
        opt_.region.value ? ParseRegionList(*opt_.region.value, "--region")
                          : std::vector<std::string>{};
    host_.emplace(app_.MakeDriverHost());
    ChooseKeyPath();
    std::vector<std::string> clouds = selection.clouds;
    if (selection.any) clouds = UsableClouds();
    LockVmAndLoadRecord();
    if (existing_) {
      if (std::find(clouds.begin(), clouds.end(), existing_->cloud) == clouds.end()) {
        throw UsageError("a VM named '" + name_ + "' already exists on " + existing_->cloud +
                             ", which is not among the candidate clouds",
                         "choose another --name, or remove it with `gpuprov down " + name_ + "`");
      }
      ResumeCandidate();
      return;
    }
    std::vector<CandidateCloud> prepared = PrepareClouds(clouds);
    candidates_ = GatherCandidates(prepared, regions);
    console_.Step("offers", "candidates, cheapest first:");
    std::istringstream table(CandidateTable(candidates_));
    for (std::string line; std::getline(table, line);) console_.Info(line);
    const auto tried = [](const Candidate& c) { return c.skipped.empty(); };
    if (std::none_of(candidates_.begin(), candidates_.end(), tried)) {
      throw UsageError("no candidate to try for " +
                           (opt_.gpus.value ? ToString(*opt_.gpus.value) : std::string("no GPU")) +
                           " on " + JoinNames(clouds),
                       "the table above says why each was skipped; raise --max-price, or name "
                       "other clouds (--cloud) or regions (--region); nothing was created");
    }
    public_key_ = EnsureEd25519Key(key_path_);
    for (size_t i = 0; i < candidates_.size(); ++i) {
      if (!tried(candidates_[i])) continue;
      const bool has_next = std::any_of(candidates_.begin() + i + 1, candidates_.end(), tried);
      if (TryCandidate(candidates_[i], prepared, has_next)) return;
    }
    throw Error("no candidate could be created; tried:\n" + WithoutLastNewline(TriedReport(candidates_)),
                "try again later, or name other clouds (--cloud) or regions (--region); nothing "
                "was left on the clouds tried");
  }

  /// `any`: every cloud whose check passes, the test cloud not counted; the others are named
  /// with the reason they are skipped.
  std::vector<std::string> UsableClouds() {
    console_.Step("check", "--cloud any: checking which clouds' credentials work");
    std::vector<std::string> usable;
    for (const CloudCheckReport& r : CheckClouds(*host_, config_, std::nullopt, false)) {
      if (r.usable) {
        usable.push_back(r.cloud);
      } else {
        console_.Info("skipping " + r.cloud + ": " + r.credentials + (r.result.empty() ? "" : ", " + r.result));
      }
    }
    if (usable.empty()) {
      throw UsageError("--cloud any: no cloud's credentials work",
                       "`gpuprov check` says what each cloud needs; nothing was created");
    }
    console_.Info("clouds with working credentials: " + JoinNames(usable));
    return usable;
  }

  static std::string WithoutLastNewline(std::string text) {
    if (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  }

  static std::string JoinNames(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  }

  /// Each cloud's driver loaded and opened (here, one after the other: opening reads files, no
  /// network), with its Kubernetes decision; a cloud that fails is kept with its reason.
  std::vector<CandidateCloud> PrepareClouds(const std::vector<std::string>& clouds) {
    std::vector<CandidateCloud> out(clouds.size());
    for (size_t i = 0; i < clouds.size(); ++i) {
      CandidateCloud& c = out[i];
      c.name = clouds[i];
      try {
        c.driver.emplace(host_->Load(c.name));
        c.k8s = DecideKubernetes(opt_.kubernetes, c.name,
                                 c.driver->info().has(GPUPROV_CAP_HOSTS_KUBERNETES));
        if (c.k8s.refused) {
          c.error = c.k8s.note;
          continue;
        }
        c.cloud = Cloud::Open(*c.driver, config_);
      } catch (const Error& e) {
        if (e.exit_code() == kExitInterrupted) throw;
        c.error = e.what();
      }
    }
    return out;
  }

  /// Offers of every cloud x region, asked side by side (kParallelOffers clouds at a time; the
  /// regions of one cloud one after the other, as a driver handle serves one call at a time).
  std::vector<Candidate> GatherCandidates(std::vector<CandidateCloud>& prepared,
                                          const std::vector<std::string>& regions) {
    const std::vector<std::string> asked_regions =
        regions.empty() ? std::vector<std::string>{""} : regions;
    std::vector<std::vector<CloudOffers>> per_cloud(prepared.size());
    console_.Step("offers", "asking " + std::to_string(prepared.size()) + " cloud(s) for offers");
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
            o.offers = c.cloud->Offers(opt_.gpus.value, o.region, c.k8s.enabled);
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
        if (o.error.empty()) RememberOffers(o.cloud, o.offers);
        asked.push_back(std::move(o));
      }
    }
    std::vector<Candidate> out = CandidatesFromOffers(asked, opt_.instance_type.value);
    SortCandidates(out);
    SkipAbovePrice(out, flags_.max_price_per_hour);
    SortCandidates(out);
    return out;
  }

  /// Makes \a c's cloud the one in use (its driver, opened cloud and Kubernetes decision).
  void UseCloud(CandidateCloud& c) {
    cloud_name_ = c.name;
    opt_.cloud.value = c.name;
    driver_.emplace(*c.driver);
    k8s_ = c.k8s;
    cloud_ = std::move(c.cloud);
  }

  /// One attempt: check, plan, record the candidate, create, wait for it to run. true: the VM
  /// runs; false: cleaned up, try the next. Throws when the decision is to stop.
  bool TryCandidate(Candidate& c, std::vector<CandidateCloud>& prepared, bool has_next) {
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
    console_.Step("create", "trying " + c.cloud + (c.region.empty() ? "" : " " + c.region) + ": " +
                                c.offer.instance_type);
    try {
      CheckAccountAndPlan();
      offer_ = c.offer;
      region_ = c.region;
      AnnounceOfferAndConfirm();
      PlanTtl();
    } catch (const Error& e) {
      if (Interrupted() || e.exit_code() == kExitInterrupted) throw;
      GiveBack back{this, &*it};
      c.failed = std::string("before create: ") + e.what();
      console_.Note(c.cloud + " " + c.region + ": " + c.failed + "; next candidate");
      return false;
    }
    rec_ = VmRecord{};
    RecordIntent();
    AttemptOutcome outcome = AttemptOutcome::kCreated;
    std::string message;
    try {
      CreateOrFind();
    } catch (const DriverCallError& e) {
      outcome = Interrupted()                               ? AttemptOutcome::kInterrupted
                : e.status() == GPUPROV_STATUS_CAPACITY ? AttemptOutcome::kCapacity
                : e.status() == GPUPROV_STATUS_QUOTA    ? AttemptOutcome::kQuota
                                                        : AttemptOutcome::kFailed;
      message = e.what();
      if (!Settle(c, outcome, message, has_next)) throw;
      GiveBack back{this, &*it};
      return false;
    }
    try {
      WaitForRunning();
    } catch (const Error& e) {
      outcome = Interrupted() ? AttemptOutcome::kInterrupted
                : BootFailureIsCapacity(vm_.state, vm_.message) || vm_.state == "gone"
                    ? AttemptOutcome::kBootCapacity
                    : AttemptOutcome::kBootFailed;
      if (!Settle(c, outcome, e.what(), has_next)) KeepVmAndRethrow(e);
      GiveBack back{this, &*it};
      return false;
    }
    if (!TriedReport(candidates_).empty()) {
      console_.Note("running on " + c.cloud + (c.region.empty() ? "" : " " + c.region) +
                    "; the candidates tried before it and why they failed:\n" +
                    WithoutLastNewline(TriedReport(candidates_)));
    }
    return true;
  }

  /// After a failed attempt: false when the failure stands (the caller rethrows it as a single
  /// cloud would); true when the attempt was cleaned up and the next candidate comes. Throws
  /// when the attempt was cleaned up and none is left, or when clean-up failed.
  bool Settle(Candidate& c, AttemptOutcome outcome, const std::string& message, bool has_next) {
    const AttemptDecision d = DecideAfterAttempt(outcome, /*failover=*/true, has_next);
    if (d.action == AttemptAction::kStop || d.action == AttemptAction::kProceed) return false;
    c.failed = d.reason + " (" + message + ")";
    CleanUpAttempt(c);
    if (d.action == AttemptAction::kCleanUpAndStop) {
      throw Error("no candidate could be created; tried:\n" + WithoutLastNewline(TriedReport(candidates_)),
                  "try again later, or name other clouds (--cloud) or regions (--region); "
                  "nothing was left on the clouds tried");
    }
    console_.Note(c.cloud + " " + c.region + ": " + d.reason + "; trying the next candidate");
    return true;
  }

  /// Deletes what the attempt on \a c made (the driver's delete_vm also removes its firewall,
  /// key and the like) and forgets the record; a delete that fails stops everything, so two
  /// candidates never hold a VM at once.
  void CleanUpAttempt(const Candidate& c) {
    try {
      if (cloud_->Delete(vm_.id, name_)) console_.Info("deleted the VM made on " + c.cloud);
    } catch (const Error& e) {
      rec_.phase = "failed";
      rec_.last_error = c.failed + "; deleting it failed: " + e.what();
      store_->Save(rec_);
      throw Error("the attempt on " + c.cloud + " failed (" + c.failed +
                      ") and deleting what it made failed: " + e.what(),
                  "`gpuprov down " + name_ + "` removes it; then re-run the provision");
    }
    store_->Remove(name_);
    existing_.reset();
    vm_ = CloudVm{};
    vm_existed_ = false;
  }

  /// A record of this name on a candidate cloud: a killed run's candidate. Continue with it
  /// (create is idempotent by name) instead of starting over.
  void ResumeCandidate() {
    cloud_name_ = existing_->cloud;
    opt_.cloud.value = cloud_name_;
    if (!existing_->region.empty()) opt_.region.value = existing_->region;
    if (!opt_.instance_type.value && !existing_->instance_type.empty()) {
      opt_.instance_type.value = existing_->instance_type;
    }
    console_.Info("resuming with " + cloud_name_ +
                  (existing_->region.empty() ? "" : " " + existing_->region) +
                  ", the candidate the record of '" + name_ + "' names");
    LoadDriver();
    CheckAccountAndPlan();
    ChooseOfferAndKey();
    RecordIntent();
    CreateOrFind();
    try {
      WaitForRunning();
    } catch (const Error& e) {
      KeepVmAndRethrow(e);
    }
  }

  /// The driver file, loaded once: its capabilities decide Kubernetes and the plan, and the
  /// same load is initialised by CheckAccountAndPlan.
  void LoadDriver() {
    host_.emplace(app_.MakeDriverHost());
    driver_.emplace(host_->Load(cloud_name_));
    const DriverInfo& info = driver_->info();
    k8s_ = DecideKubernetes(opt_.kubernetes, cloud_name_, info.has(GPUPROV_CAP_HOSTS_KUBERNETES));
    if (k8s_.refused) throw UsageError(k8s_.note, "nothing was created");
    ChooseKeyPath();
  }

  /// The private key: --ssh-key (which must exist), else gpuprov's own.
  void ChooseKeyPath() {
    key_path_ = opt_.ssh_key.value ? ExpandHome(*opt_.ssh_key.value)
                                   : (app_.paths.keys_dir() / "id_ed25519").string();
    if (opt_.ssh_key.value && !std::filesystem::exists(key_path_)) {
      throw UsageError("ssh key " + key_path_ + " does not exist (--ssh-key " +
                           DescribeOrigin(opt_.ssh_key) + ")",
                       "name an existing private key, or drop --ssh-key to use gpuprov's own");
    }
  }

  /// The per-VM lock (another gpuprov on the same name waits), and the record of an earlier run.
  void LockAndReadRecord() {
    LockVmAndLoadRecord();
    if (existing_ && existing_->cloud != cloud_name_) {
      throw UsageError("a VM named '" + name_ + "' already exists on " + existing_->cloud,
                       "choose another --name, or remove it with `gpuprov down " + name_ + "`");
    }
  }

  /// The per-VM lock (held to the end) and the record of an earlier run, if any.
  void LockVmAndLoadRecord() {
    EnsureDir(app_.paths.home());
    EnsureDir(app_.paths.state_dir());
    EnsureDir(app_.paths.keys_dir());
    store_.emplace(app_.paths);
    lock_ = store_->TryLockVm(name_);
    if (!lock_) {
      console_.Note("another gpuprov is working on '" + name_ + "'; waiting for it");
      lock_.emplace(store_->LockVm(name_, 30 * 60 * 1000));
    }
    existing_ = store_->Load(name_);
  }


  /// The k3s release choice, for the boot script and SSH runs alike.
  InstallerArgs K3sArgs() const {
    InstallerArgs args;
    args.k3s_version = opt_.k3s_version.value.value_or("");
    args.k3s_sha256 = opt_.k3s_sha256.value.value_or("");
    args.k3s_download_url = opt_.k3s_download_url.value.value_or("");
    return args;
  }

  /// Initialises the driver (config.toml keys checked first), checks the credentials and
  /// plans the cluster route and access.
  void CheckAccountAndPlan() {
    if (!cloud_) cloud_ = Cloud::Open(*driver_, config_);
    console_.Step("check", "checking " + cloud_name_ + " credentials");
    const CloudCheck account = cloud_->Check();
    console_.Debug(cloud_name_ + " account: " + account.account);
    user_data_limit_ = account.user_data_limit;
    if (k8s_.enabled) {
      plan_ = PlanCluster(driver_->info().capabilities, account.user_data_limit, K3sArgs(),
                          flags_.install_route);
      if (!plan_.refusal.empty()) {
        throw UsageError("--install-route boot on " + cloud_name_ + ": " + plan_.refusal,
                         "use --install-route auto (or ssh) on " + cloud_name_ +
                             "; nothing was created");
      }
    } else if (flags_.install_route != InstallRoute::kAuto) {
      // Kubernetes is off by the spec, config.toml or the cloud, not by --no-k8s (cli.cc
      // refuses that pair): the route asked for would install nothing.
      throw UsageError("--install-route " + std::string(flags_.install_route == InstallRoute::kSsh ? "ssh" : "boot") +
                           ": Kubernetes is off for this VM (" + k8s_.note + ")",
                       "add --k8s to install it, or drop --install-route; nothing was created");
    }
    DecideSources(account);
    if (!k8s_.enabled) return;
    if (!plan_.note.empty()) console_.Note(plan_.note);
    console_.Debug(std::string("cluster plan: route ") + (plan_.boot_route ? "boot" : "ssh") +
                   ", access " + (plan_.direct ? "direct" : "tunnel") + ", boot script " +
                   std::to_string(plan_.boot_script.size()) + " of " +
                   std::to_string(account.user_data_limit) + " bytes");
  }

  /// Who may reach the ports (--allow-from): this run's choice, else what the record of an
  /// earlier run says, else everyone. Refused before anything is made when the driver has not
  /// said it narrows sources (check's "allow_from": true).
  void DecideSources(const CloudCheck& account) {
    std::vector<std::string> allow_from;
    bool ssh = false;
    if (existing_) {
      allow_from = existing_->allow_from;
      const auto& narrowed = existing_->allow_from_ports;
      ssh = std::find(narrowed.begin(), narrowed.end(), 22) != narrowed.end();
    }
    if (opt_.allow_from.value) allow_from = *opt_.allow_from.value;
    if (opt_.allow_from_ssh.value) ssh = *opt_.allow_from_ssh.value;
    std::set<int> ports;
    for (int p : PortsToOpen(k8s_.enabled, plan_)) ports.insert(p);
    if (existing_) ports.insert(existing_->open_ports.begin(), existing_->open_ports.end());
    wanted_sources_ = WantedSources(allow_from, ssh, std::vector<int>(ports.begin(), ports.end()));
    const std::string origin = opt_.allow_from.value
                                   ? (opt_.allow_from.source == Source::kFlag
                                          ? std::string("--allow-from")
                                          : "allow_from " + DescribeOrigin(opt_.allow_from))
                                   : std::string("allow_from of the VM's record");
    if (!allow_from.empty() && !wanted_sources_.narrows()) {
      console_.Note(origin + " narrows nothing here: this run opens only SSH (22), and "
                    "--allow-from-ssh is not given");
      return;
    }
    if (wanted_sources_.narrows()) {
      if (!account.honours_allow_from) {
        throw UsageError("the " + cloud_name_ + " driver cannot restrict who reaches a VM's ports "
                         "(" + origin + ")",
                         "drop --allow-from (and allow_from in the spec or config.toml) for " +
                             cloud_name_ + "; nothing was created");
      }
      console_.Info("ports " + SourcesText(wanted_sources_) + " (" + origin + ")");
    }
  }

  void ChooseOfferAndKey() {
    std::vector<CloudOffer> offers =
        cloud_->Offers(opt_.gpus.value, opt_.region.value.value_or(""), k8s_.enabled);
    RememberOffers(offers);
    offer_ = ChooseOffer(offers, opt_, cloud_name_);
    region_ = opt_.region.value.value_or(offer_.region);
    AnnounceOfferAndConfirm();
    PlanTtl();
    public_key_ = EnsureEd25519Key(key_path_);
  }

  /// The chosen offer and its price, said before anything is made; then the price consent.
  void AnnounceOfferAndConfirm() {
    console_.Info("offer: " + offer_.instance_type +
                  (offer_.region.empty() ? "" : " in " + offer_.region) +
                  (offer_.price_per_hour > 0
                       ? " at " + FormatPricePerHour(offer_.price_per_hour) +
                             (offer_.price_source == "table"
                                  ? " (the driver's price table" +
                                        (offer_.price_date.empty() ? "" : " of " + offer_.price_date) + ")"
                                  : "")
                       : " (price unknown)"));
    ConfirmPrice();
  }

  /// With a TTL: says what the powered-off VM still costs on this cloud, and fixes the
  /// deadline, counted from now, before anything is made.
  void PlanTtl() {
    if (opt_.ttl_seconds.value.value_or(0) > 0 || opt_.idle_ttl_seconds.value.value_or(0) > 0) {
      console_.Note(PoweredOffNote(cloud_name_, offer_.powered_off_cost, name_));
    }
    // One deadline, counted from now, for the boot script and the SSH set-up alike.
    if (opt_.ttl_seconds.value.value_or(0) > 0) {
      planned_deadline_ = static_cast<long long>(std::chrono::system_clock::to_time_t(
                              std::chrono::system_clock::now())) +
                          *opt_.ttl_seconds.value;
    }
  }

  /// Keeps the GPU types offered for shell completion (offer_cache.h); a cache that cannot be
  /// written costs only the completion, so it is a debug line, not a failure.
  void RememberOffers(const std::vector<CloudOffer>& offers) { RememberOffers(cloud_name_, offers); }
  void RememberOffers(const std::string& cloud, const std::vector<CloudOffer>& offers) {
    try {
      EnsureDir(app_.paths.home() / "cache");
      RememberGpuOffers(app_.paths.home() / "cache", cloud, offers);
    } catch (const std::exception& e) {
      console_.Debug(std::string("offer cache not written: ") + e.what());
    }
  }

  /// Before a new VM is made: --max-price refuses a dearer offer; above
  /// confirm_above_per_hour the user is asked on a terminal (prompt.h).
  void ConfirmPrice() {
    if (existing_ && !existing_->vm_id.empty()) return;  // the VM exists: nothing new is made
    const double confirm_above =
        config_.defaults.confirm_above_per_hour.value_or(kDefaultConfirmAbovePerHour);
    const ConsentDecision d =
        DecideCreateConsent(offer_.price_per_hour, flags_.max_price_per_hour, confirm_above,
                            flags_.yes, app_.prompter && app_.prompter->CanAsk());
    switch (d.consent) {
      case Consent::kRefuse:
        if (offer_.price_per_hour <= 0) {
          throw UsageError(
              "the price of " + cloud_name_ + " " + offer_.instance_type +
                  (region_.empty() ? "" : " in " + region_) + " is unknown (the " + cloud_name_ +
                  " driver does not know it), so --max-price " +
                  FormatPricePerHour(*flags_.max_price_per_hour) + " cannot be checked",
              "look the price up on " + cloud_name_ +
                  "'s own price list and run again without --max-price if it suits you, or "
                  "name several clouds (--cloud a,b,c: the candidates table shows each "
                  "offer's price and tries only those within --max-price); nothing was "
                  "created");
        }
        throw UsageError(d.reason + " (" + offer_.instance_type + ")",
                         "raise --max-price, or choose fewer or smaller GPUs; nothing was "
                         "created");
      case Consent::kAsk:
        if (!app_.prompter->Confirm("create " + offer_.instance_type + " at " +
                                    FormatPricePerHour(offer_.price_per_hour) + "?")) {
          throw Error("not confirmed: nothing was created",
                      "--yes skips the question; [defaults] confirm_above_per_hour in "
                      "config.toml sets the price above which gpuprov asks");
        }
        return;
      case Consent::kProceed:
        if (!d.reason.empty()) console_.Note(d.reason);
        return;
    }
  }

  /// The record says what is about to be made before any call that creates something.
  void RecordIntent() {
    rec_ = existing_.value_or(VmRecord{});
    rec_.name = name_;
    rec_.cloud = cloud_name_;
    rec_.region = region_;
    rec_.instance_type = offer_.instance_type;
    if (offer_.price_per_hour > 0) rec_.price_per_hour = offer_.price_per_hour;
    rec_.gpus = opt_.gpus.value ? ToString(*opt_.gpus.value) : "";
    rec_.image = opt_.image.value.value_or("");
    rec_.driver_file = driver_->info().path;
    rec_.kubernetes = k8s_.enabled;
    if (!k8s_.enabled) {
      rec_.access_mode = "none";
      rec_.route = "none";
      rec_.route_reason.clear();
    }
    rec_.extra["ssh_key"] = key_path_;
    rec_.powered_off_cost = offer_.powered_off_cost;
    // A VM about to be made: its TTL is recorded with it (the boot script may carry it before
    // this run reaches SSH).
    if (!existing_ || existing_->vm_id.empty()) SetRecordTtl(rec_, PlannedTtl());
    if (rec_.created_at.empty()) rec_.created_at = NowRfc3339();
    rec_.phase = existing_ ? rec_.phase : "intent";
    rec_.last_error.clear();
    Save();
    CrashPoint("intent-recorded");
  }

  /// create: idempotent by name, so a re-run finds the VM of the first. When create fails and
  /// the cloud has no VM of that name, the intent is forgotten: nothing is left behind.
  void CreateOrFind() {
    console_.Step("create", (existing_ ? "checking VM " : "creating VM ") + name_ + " on " + cloud_name_);
    CreateRequest req;
    req.name = name_;
    req.region = region_;
    req.instance_type = offer_.instance_type;
    req.gpu = opt_.gpus.value;
    req.image = rec_.image;
    req.ssh_public_key = public_key_;
    req.tags = opt_.tags;
    req.tags["gpuprov"] = "1";
    req.tags["gpuprov-name"] = name_;
    req.open_ports = PortsToOpen(k8s_.enabled, plan_);
    req.user_data = plan_.boot_script;
    AddTtlToUserData(req.user_data);
    req.disk_gb = opt_.disk_gb.value;
    req.kubernetes = k8s_.enabled;
    req.sources = wanted_sources_;
    create_start_ = Clock::now();
    try {
      rec_.phase = "creating";
      Save();
      std::tie(vm_, vm_existed_) = cloud_->Create(req);
    } catch (const Error& e) {
      if (Interrupted()) {
        // Ctrl-C: the driver stopped where it was; the record says so and a re-run continues.
        rec_.last_error = "interrupted while creating the VM: " + std::string(e.what());
        store_->Save(rec_);
        throw Error(e.what(),
                    "re-run the same `gpuprov provision` to continue, or `gpuprov down " + name_ +
                        "` to remove what was made",
                    kExitInterrupted);
      }
      // Nothing may be left behind: when the cloud has no VM of that name, forget the intent.
      std::optional<CloudVm> left;
      try {
        left = cloud_->Get("", name_);
      } catch (const Error&) {
        left = CloudVm{};  // unknown: keep the record so `gpuprov down` can clean up
      }
      if (!left) {
        store_->Remove(name_);
      } else {
        rec_.phase = "failed";
        rec_.last_error = e.what();
        store_->Save(rec_);
      }
      throw;
    }
    if (vm_existed_) console_.Info("reusing existing VM " + name_ + " (id " + vm_.id + ")");
    rec_.vm_id = vm_.id;
    // Disk size and tags are set when the VM is made; an existing VM keeps its own.
    if (!vm_existed_) {
      rec_.disk_gb = opt_.disk_gb.value.value_or(0);
      rec_.tags = opt_.tags;
    } else if ((opt_.disk_gb.value && *opt_.disk_gb.value != rec_.disk_gb) ||
               (!opt_.tags.empty() && opt_.tags != rec_.tags)) {
      console_.Note("VM " + name_ + " already exists: its disk size and tags stay as they were "
                    "made; `gpuprov down " + name_ + "` and provision again to change them");
    }
    if (!vm_existed_) {
      const PortsPlan made = PlanPorts(false, {}, {}, req.open_ports, req.sources, false);
      rec_.open_ports = made.open_after;
      rec_.allow_from = made.sources_after.allow_from;
      rec_.allow_from_ports = made.sources_after.narrowed_ports;
    }
    Save();
    CrashPoint("vm-created");
  }

  /// This run's TTL for a VM made now: --ttl's deadline and the idle TTL (flag, spec or config).
  NodeTtl PlannedTtl() const {
    NodeTtl ttl;
    ttl.check_seconds = opt_.ttl_check_seconds.value;
    ttl.deadline_epoch = planned_deadline_;
    if (opt_.idle_ttl_seconds.value.value_or(0) > 0) ttl.idle_seconds = *opt_.idle_ttl_seconds.value;
    return ttl;
  }

  /// A new VM on the boot route gets the TTL timer in its boot script too (before the
  /// installer), so it is in place even if this run never reaches SSH; when it does not fit the
  /// cloud's limit, the SSH set-up alone does it.
  void AddTtlToUserData(std::string& user_data) {
    if (user_data.empty() || (existing_ && !existing_->vm_id.empty())) return;
    const NodeTtl ttl = PlannedTtl();
    if (!ttl.deadline_epoch && !ttl.idle_seconds) return;
    if (std::optional<std::string> with = AddTtlToBootScript(user_data, ttl, user_data_limit_)) {
      user_data = *with;
      console_.Debug("boot script: the TTL timer first, " + std::to_string(user_data.size()) +
                     " bytes");
    } else {
      console_.Debug("the TTL timer does not fit in the boot script; it is set over SSH only");
    }
  }

  /// The VM running, with a public address; bounded by boot_wait_seconds.
  void WaitForRunning() {
    WaitRunning(*cloud_, vm_, std::chrono::seconds(opt_.boot_wait_seconds.value));
    rec_.public_ip = vm_.public_ip;
    rec_.ssh_port = vm_.ports.count(22) ? vm_.ports.at(22) : vm_.ssh_port;
    rec_.ssh_user = vm_.ssh_user.empty() ? "root" : vm_.ssh_user;
    rec_.phase = "running";
    rec_.phase_seconds["create"] = SecondsSince(create_start_);
    Save();
    CrashPoint("vm-running");
    if (rec_.public_ip.empty()) {
      throw Error("the " + cloud_name_ + " driver reported no public address for " + name_,
                  "the VM is kept; `gpuprov down " + name_ + "` removes it");
    }
  }

  /// A VM that existed keeps the ports it had: when this run needs more (Kubernetes turned on
  /// with direct access), the driver's open_ports opens them (vm_ports.h).
  void OpenNeededPorts() {
    if (!vm_existed_) return;
    PortSources recorded;
    recorded.allow_from = rec_.allow_from;
    recorded.narrowed_ports = rec_.allow_from_ports;
    const PortsPlan ports = EnsurePortsOpen(*cloud_, vm_, true, rec_.open_ports,
                                            PortsToOpen(k8s_.enabled, plan_), recorded,
                                            wanted_sources_);
    rec_.open_ports = ports.open_after;
    rec_.allow_from = ports.sources_after.allow_from;
    rec_.allow_from_ports = ports.sources_after.narrowed_ports;
    Save();
    if (ports.call_open_ports) {
      CrashPoint("ports-opened");
      // The ports map (node port -> reachable port) may change with the firewall.
      if (std::optional<CloudVm> now = cloud_->Get(vm_.id, name_)) vm_ = *now;
    }
  }

  /// SSH answering, bounded by ssh_wait_seconds; the host key is pinned on first contact.
  SshSession WaitForSsh() {
    target_ = SshTarget{rec_.public_ip, rec_.ssh_port, rec_.ssh_user, key_path_,
                        app_.paths.known_hosts().string()};
    if (!vm_existed_) ForgetHostKey(target_.known_hosts_path, target_.host, target_.port);
    console_.Step("ssh", "waiting for SSH on " + SshHostPort(target_.host, target_.port));
    const auto ssh_start = Clock::now();
    SshSession session = gpuprov::WaitForSsh(
        target_, std::chrono::seconds(opt_.ssh_wait_seconds.value), [&](std::chrono::seconds s) {
          console_.Progress("waiting for SSH on " + SshHostPort(target_.host, target_.port), s);
          ThrowIfInterrupted("waiting for SSH");
        });
    CrashPoint("host-key-pinned");
    if (!k8s_.enabled) {
      // A plain VM: one command shows the login runs commands. With Kubernetes on, the
      // cluster's probe is the first command and shows the same, so no round trip is spent.
      SshRunResult hello = session.Run("uname -sr");
      console_.Debug("node: " + hello.stdout_text);
    }
    rec_.phase_seconds["ssh"] = SecondsSince(ssh_start);
    return session;
  }

  /// TTL on the node (ttl.h), right after the host key is pinned, for every route and for
  /// --no-k8s VMs too: the script, its settings and its timer, over SSH. This run's --ttl (or
  /// the spec's or config's for a VM made now) sets a new deadline; a VM that exists keeps its
  /// recorded one otherwise. Nothing runs when neither this run nor the record has a TTL.
  void InstallTtlIfAsked(SshSession& session) {
    NodeTtl ttl;
    ttl.check_seconds = opt_.ttl_check_seconds.value;
    const bool set_deadline =
        opt_.ttl_seconds.value && (opt_.ttl_seconds.source == Source::kFlag || !vm_existed_ ||
                                   rec_.ttl_deadline.empty());
    if (set_deadline) {
      ttl.deadline_epoch = planned_deadline_;
    } else if (const auto deadline = TtlDeadline(rec_)) {
      ttl.deadline_epoch = static_cast<long long>(std::chrono::system_clock::to_time_t(*deadline));
    }
    const bool set_idle = opt_.idle_ttl_seconds.value &&
                          (opt_.idle_ttl_seconds.source == Source::kFlag || !vm_existed_ ||
                           rec_.idle_ttl_seconds == 0);
    if (set_idle) {
      if (*opt_.idle_ttl_seconds.value > 0) ttl.idle_seconds = *opt_.idle_ttl_seconds.value;
    } else if (rec_.idle_ttl_seconds > 0) {
      ttl.idle_seconds = rec_.idle_ttl_seconds;
    }
    SshNodeShell shell(&session);
    if (!ttl.deadline_epoch && !ttl.idle_seconds) {
      if (rec_.ttl_deadline.empty() && rec_.idle_ttl_seconds == 0) return;
      // A recorded TTL this run turns off ("--ttl off").
      SshRunResult r = shell.RunAsRoot("ttl off", TtlOffCommand(), "", std::chrono::seconds(60));
      if (r.exit_status != 0) {
        throw Error("could not remove the TTL timer on " + name_ + ": " + TrimSpace(r.stderr_text),
                    "retry with `gpuprov ttl " + name_ + " --off`");
      }
      SetRecordTtl(rec_, ttl);
      Save();
      return;
    }
    SshRunResult r =
        shell.RunAsRoot("ttl install", TtlInstallCommand(ttl), TtlScript(), std::chrono::seconds(60));
    if (r.exit_status != 0) {
      throw Error("could not install the TTL timer on " + name_ + " (exit " +
                      std::to_string(r.exit_status) + "): " + TrimSpace(r.stderr_text),
                  "the node needs systemd; re-run the same `gpuprov provision`, or `gpuprov down " +
                      name_ + "`");
    }
    SetRecordTtl(rec_, ttl);
    Save();
  }

  /// Tunnel access: the VM's own local port, kept from an earlier run, else the first one from
  /// tunnel_first_port that no other VM holds and nothing listens on (under a lock, so two
  /// provisions never take the same).
  void ChooseTunnelPortIfTunnel() {
    if (!k8s_.enabled || plan_.direct) return;
    if (std::optional<int> recorded = RecordedTunnelPort(rec_)) {
      tunnel_port_ = *recorded;
      return;
    }
    EnsureDir(app_.paths.lock_dir());
    FileLock ports(app_.paths.lock_dir() / "tunnel-ports.lock", "the tunnel ports", 60 * 1000);
    std::set<int> taken;
    for (const VmRecord& other : store_->List()) {
      if (other.name == name_) continue;
      if (std::optional<int> port = RecordedTunnelPort(other)) taken.insert(*port);
    }
    tunnel_port_ = ChooseTunnelPort(config_.defaults.tunnel_first_port.value_or(kTunnelLocalPort),
                                    taken, LocalPortFree);
    rec_.extra[kTunnelPortKey] = std::to_string(tunnel_port_);
    Save();
    console_.Debug("tunnel local port " + std::to_string(tunnel_port_));
  }

  /// --merge-kubeconfig (or [defaults] merge_kubeconfig): the VM's cluster, user and context
  /// in the user's kubeconfig, recorded so `gpuprov down` takes exactly them out again.
  void MergeKubeconfigIfAsked() {
    merged_into_.clear();
    const bool merge =
        flags_.merge_kubeconfig.value_or(config_.defaults.merge_kubeconfig.value_or(false));
    if (!k8s_.enabled || !merge) return;
    const std::filesystem::path file = UserKubeconfigFile(ProcessEnv());
    const KubeconfigEdit edit =
        MergeKubeconfigFile(file, ReadFile(rec_.kubeconfig, kKubeconfigKind),
                            KubeContextName(name_), false,
                            app_.paths.lock_dir() / "kubeconfig.lock");
    rec_.extra[kKubeconfigMergedKey] = edit.file.string();
    merged_into_ = edit.file.string();
    Save();
  }

  /// The cluster state machine (cluster_bringup.h) when Kubernetes is on.
  void BringUpClusterIfOn(SshSession& session) {
    if (!k8s_.enabled) return;
    rec_.phase = "installing";
    Save();
    ClusterInputs in;
    in.vm_name = name_;
    in.plan = plan_;
    in.public_ip = rec_.public_ip;
    in.api_port = vm_.ports.count(kApiPort) ? vm_.ports.at(kApiPort) : kApiPort;
    in.expected_gpus = opt_.gpus.value ? opt_.gpus.value->count : 0;
    in.k3s = K3sArgs();
    in.ssh = target_;
    in.boot_install_wait = std::chrono::seconds(opt_.boot_install_wait_seconds.value);
    in.api_wait = std::chrono::seconds(opt_.api_wait_seconds.value);
    in.kubeconfig_path = app_.paths.kubeconfig(name_);
    in.tunnel_local_port = tunnel_port_;
    in.save = [this](VmRecord& r) { r = store_->Save(r); };
    SshNodeShell shell(&session);
    cluster_ = BringUpCluster(shell, in, rec_);
  }

  /// A failure after create keeps the VM, records why, and says how to look.
  [[noreturn]] void KeepVmAndRethrow(const Error& e) {
    const bool interrupted = Interrupted();
    // Interrupted: the phase stays where it stopped, so a re-run continues from there.
    if (!interrupted) rec_.phase = "failed";
    rec_.last_error =
        (interrupted ? "interrupted while " + rec_.phase + ": " : std::string()) + e.what();
    store_->Save(rec_);
    throw Error(e.what(),
                e.hint().empty()
                    ? "the VM is kept: look with `gpuprov ssh " + name_ + "`" +
                          (k8s_.enabled ? " (boot log " + BootLogOf(plan_) + ")"
                                        : std::string()) +
                          ", retry with the same `gpuprov provision`, or remove it with "
                          "`gpuprov down " + name_ + "`"
                    : e.hint(),
                interrupted ? static_cast<int>(kExitInterrupted) : e.exit_code());
  }

  /// How to get in: the record as JSON, or the summary. It names the route that ran and only
  /// the ports the record says are open.
  void Report() {
    if (!k8s_.note.empty()) console_.Note(k8s_.note);
    if (failover_ && !TriedReport(candidates_).empty()) {
      console_.Note("candidates tried before " + cloud_name_ + " and why they failed:\n" +
                    WithoutLastNewline(TriedReport(candidates_)));
    }
    if (app_.json_output) {
      // The cloud's word for the VM, as `gpuprov list` (which asks the cloud) shows it.
      app_.Print(VmRecordObject(rec_, vm_.state.empty() ? rec_.phase : vm_.state));
      return;
    }
    std::ostringstream out;
    out << "VM " << name_ << " is ready on " << cloud_name_ << " at " << rec_.public_ip
        << " (ssh port " << rec_.ssh_port << ", user " << rec_.ssh_user << ").\n"
        << "  shell:   gpuprov ssh " << name_ << "\n"
        << "  command: gpuprov ssh " << name_
        << (rec_.gpus.empty() ? " -- uname -a\n" : " -- nvidia-smi\n")
        << "  remove:  gpuprov down " << name_ << "\n";
    if (const auto left = TtlSecondsLeft(rec_, std::chrono::system_clock::now())) {
      out << "  ttl:     the VM powers itself off at " << rec_.ttl_deadline << " (in "
          << FormatDuration(*left) << "); `gpuprov ttl " << name_ << " 2h` extends\n";
    }
    if (rec_.idle_ttl_seconds > 0) {
      out << "  idle:    the VM powers itself off after " << FormatDuration(rec_.idle_ttl_seconds)
          << " idle (no SSH session, no GPU pod, GPUs below 5%)\n";
    }
    if (k8s_.enabled) {
      const std::string route =
          rec_.route + " route" + (rec_.route_reason.empty() ? "" : ": " + rec_.route_reason);
      out << "Kubernetes (k3s) is ready on " << name_ << ": node Ready, CoreDNS ready"
          << (cluster_.gpus_allocatable > 0
                  ? ", nvidia.com/gpu: " + std::to_string(cluster_.gpus_allocatable)
                  : std::string())
          << " (" << route << (rec_.route_reason.empty() ? ", " : "; ") << rec_.access_mode
          << " access; "
          << PhaseTimes(rec_.phase_seconds) << ").\n"
          << "  kubeconfig: " << rec_.kubeconfig << " (context " << KubeContextName(name_)
          << ")\n";
      if (!merged_into_.empty()) {
        out << "  merged:     into " << merged_into_ << "; kubectl --context "
            << KubeContextName(name_) << " get nodes\n";
      } else {
        out << "  use:        export KUBECONFIG=" << rec_.kubeconfig
            << ":${KUBECONFIG:-~/.kube/config}; kubectl get nodes\n"
            << "  or merge:   gpuprov kubeconfig " << name_ << " --merge [--switch]\n";
      }
      if (rec_.access_mode == "tunnel") {
        out << "  tunnel:     gpuprov tunnel " << name_
            << "   (keep it running: kubectl reaches " << cluster_.server << " through SSH)\n";
      }
    }
    console_.Result(out.str());
    if (k8s_.enabled && rec_.access_mode == "direct") {
      PortSources sources;
      sources.allow_from = rec_.allow_from;
      sources.narrowed_ports = rec_.allow_from_ports;
      std::vector<int> world;
      for (int p : rec_.open_ports) {
        if (!sources.narrows() ||
            std::find(sources.narrowed_ports.begin(), sources.narrowed_ports.end(), p) ==
                sources.narrowed_ports.end()) {
          world.push_back(p);
        }
      }
      const bool api_narrowed =
          sources.narrows() && std::find(sources.narrowed_ports.begin(),
                                         sources.narrowed_ports.end(),
                                         kApiPort) != sources.narrowed_ports.end();
      if (!api_narrowed) {
        console_.Warning("the Kubernetes API of " + name_ + " is exposed to the internet at " +
                         cluster_.server + " (ports " + PortsText(world) +
                         " are open to 0.0.0.0/0); the kubeconfig is a secret: whoever holds it "
                         "controls the cluster. --allow-from CIDR (or allow_from in config.toml) "
                         "narrows 6443, 80 and 443 to your networks; --no-k8s gives a plain VM "
                         "with only SSH open");
      } else {
        console_.Note("the Kubernetes API of " + name_ + " at " + cluster_.server + ": ports " +
                      SourcesText(sources) +
                      (world.empty() ? std::string()
                                     : "; " + PortsText(world) + " open to 0.0.0.0/0") +
                      "; the kubeconfig is a secret: whoever holds it controls the cluster");
      }
    }
  }

  void Save() { rec_ = store_->Save(rec_); }

  const AppContext& app_;
  const ProvisionFlags& flags_;
  const std::optional<std::string>& spec_file_;
  Console& console_;

  Config config_;
  ProvisionOptions opt_;
  std::string name_, cloud_name_;
  std::optional<DriverHost> host_;
  std::optional<LoadedDriver> driver_;
  K8sDecision k8s_;
  PortSources wanted_sources_;  // who may reach the ports this run opens (DecideSources)
  std::string key_path_;
  std::optional<StateStore> store_;
  std::optional<FileLock> lock_;
  std::optional<VmRecord> existing_;
  std::unique_ptr<Cloud> cloud_;
  ClusterPlan plan_;
  CloudOffer offer_;
  std::string region_;
  std::string public_key_;
  VmRecord rec_;
  Clock::time_point create_start_;
  CloudVm vm_;
  bool vm_existed_ = false;
  SshTarget target_;
  ClusterResult cluster_;
  int tunnel_port_ = kTunnelLocalPort;
  std::string merged_into_;  // the user's kubeconfig this run merged into ("" when none)
  bool failover_ = false;    // several clouds or regions, or any: RunCandidates
  std::vector<Candidate> candidates_;  // in the order tried, with why each failed
  std::size_t user_data_limit_ = 0;            // the cloud's boot script limit (check)
  std::optional<long long> planned_deadline_;  // --ttl's deadline, epoch seconds
};

}  // namespace

int RunProvision(const AppContext& app, const ProvisionFlags& flags,
                 const std::optional<std::string>& spec_file) {
  InstallInterruptHandler();
  return Provision(app, flags, spec_file).Run();
}

}  // namespace gpuprov
