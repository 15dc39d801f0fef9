#include "provision.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "check_command.h"
#include "cluster_join.h"
#include "cluster_provision.h"
#include "cluster_nodes.h"
#include "crash_point.h"
#include "elapsed.h"
#include "failover.h"
#include "interrupt.h"
#include "kubeconfig.h"
#include "kubeconfig_merge.h"
#include "node_shell.h"
#include "offer_cache.h"
#include "prompt.h"
#include "provision_report.h"
#include "spec.h"
#include "spot.h"
#include "ssh_keys.h"
#include "ttl.h"
#include "tunnel_command.h"
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
  // The rules a candidate list uses (RankCandidates), so one cloud chooses as `--cloud any` and
  // `gpuprov offers` do: cheapest known price first, spot requests by their spot price.
  CloudOffers asked;
  asked.cloud = cloud;
  asked.region = opt.region.value.value_or("");
  asked.offers = offers;
  CandidateRules rules;
  rules.instance_type = opt.instance_type.value;
  rules.spot = opt.spot.value;
  const std::vector<Candidate> ranked = RankCandidates({asked}, rules);
  if (!ranked.empty() && ranked.front().skipped.empty()) {
    return opt.spot.value ? PricedAsSpot(ranked.front().offer) : ranked.front().offer;
  }
  const std::string spot_text = opt.spot.value ? " as a spot VM" : "";
  if (opt.instance_type.value) {
    throw UsageError("instance type '" + *opt.instance_type.value + "' does not match " + gpu_text +
                         region_text + spot_text + " on " + cloud,
                     "matching instance types: " + OffersSummary(offers));
  }
  throw UsageError("the " + cloud + " cloud offers " + gpu_text + region_text +
                       " on demand only, not as a spot VM (spot " + DescribeOrigin(opt.spot) + ")",
                   "drop --spot, or see who sells it as spot: `gpuprov offers --spot" +
                       (opt.gpus.value ? " --gpus " + ToString(*opt.gpus.value) : std::string()) +
                       "`");
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
      throw Error(
          "VM " + vm.name + " is still '" + vm.state + "' after " + std::to_string(limit.count()) +
              "s (boot_wait_seconds)",
          "re-run the same `gpuprov provision` to keep waiting, or `gpuprov down " + vm.name + "`");
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

}  // namespace

Provision::Provision(const AppContext& app, const ProvisionFlags& flags,
                     const std::optional<std::string>& spec_file, ClusterMember member)
    : app_(app), flags_(flags), spec_file_(spec_file), console_(Console::Get()),
      member_(std::move(member)) {}

int Provision::Run() {
  ResolveInputs();
  if (opt_.nodes.value > 1 && !failover_) return ClusterProvision(*this).Run();
  if (failover_) {
    Failover(*this).Run();
  } else {
    LoadDriver();
    LockAndReadRecord();
    CheckAccountAndPlan();
    ReplacePreemptedVm();
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

void Provision::ResolveInputs() {
  config_ = app_.LoadUserConfig();
  Spec spec;
  if (spec_file_) spec = LoadSpec(*spec_file_);
  opt_ = ResolveProvisionOptions(flags_, spec, ProcessEnv(), config_);
  for (const auto& line : DescribeProvisionOptions(opt_)) console_.Debug(line);
  name_ = opt_.name.value;
  cloud_name_ = opt_.cloud.value;
  // A list of clouds or regions, or any: candidates (Failover, failover.h); else one cloud as ever.
  failover_ =
      IsCandidateList(cloud_name_) || (opt_.region.value && IsCandidateList(*opt_.region.value));
  if (failover_) {
    RefuseNodesIfCannot(std::nullopt);
    return;
  }
  if (cloud_name_.empty()) {
    // No --cloud, spec, GPUPROV_CLOUD or [defaults] cloud: the only cloud whose check passes.
    console_.Step("no cloud given: checking which clouds' credentials work");
    cloud_name_ = ChooseDefaultCloud(
        CheckClouds(app_.MakeDriverHost(), config_, std::nullopt, /*with_test_cloud=*/false));
    opt_.cloud.value = cloud_name_;
    console_.Info("cloud: " + cloud_name_ + ", the only one whose credentials work");
  }
}

void Provision::LoadDriver() {
  host_.emplace(app_.MakeDriverHost());
  driver_.emplace(host_->Load(cloud_name_));
  const DriverInfo& info = driver_->info();
  k8s_ = DecideKubernetes(opt_.kubernetes, cloud_name_, info.has(GPUPROV_CAP_HOSTS_KUBERNETES));
  if (k8s_.refused) throw UsageError(k8s_.note, "nothing was created");
  if (opt_.spot.value && !info.has(GPUPROV_CAP_SPOT)) {
    throw SpotRefusal(cloud_name_,
                      opt_.spot.source == Source::kFlag ? DescribeOrigin(opt_.spot)
                                                        : "spot " + DescribeOrigin(opt_.spot),
                      SpotClouds(*host_));
  }
  RefuseNodesIfCannot(std::nullopt);
  ChooseKeyPath();
}

void Provision::RefuseNodesIfCannot(std::optional<int> driver_max_nodes) {
  if (opt_.nodes.value == 1) return;
  NodesQuestion q;
  q.nodes = opt_.nodes.value;
  q.origin = opt_.nodes.source == Source::kFlag
                 ? "--nodes " + std::to_string(q.nodes) + " from the command line"
                 : "nodes: " + std::to_string(q.nodes) + " in " + opt_.nodes.origin;
  q.cluster = name_;
  q.cloud = cloud_name_;
  q.several_candidates = failover_;
  q.kubernetes = failover_ ? opt_.kubernetes.value : k8s_.enabled;
  if (driver_) q.driver_can_cluster = driver_->info().has(GPUPROV_CAP_CLUSTER);
  q.driver_max_nodes = driver_max_nodes;
  q.clouds_that_can =
      CloudsThatCanCluster(host_ ? host_->ListAll() : app_.MakeDriverHost().ListAll());
  const NodesDecision d = DecideNodes(q);
  if (d.refused) throw UsageError(d.reason, d.hint);
}

void Provision::ChooseKeyPath() {
  key_path_ = opt_.ssh_key.value ? ExpandHome(*opt_.ssh_key.value)
                                 : (app_.paths.keys_dir() / "id_ed25519").string();
  if (opt_.ssh_key.value && !std::filesystem::exists(key_path_)) {
    throw UsageError(
        "ssh key " + key_path_ + " does not exist (--ssh-key " + DescribeOrigin(opt_.ssh_key) + ")",
        "name an existing private key, or drop --ssh-key to use gpuprov's own");
  }
}

void Provision::LockAndReadRecord() {
  LockVmAndLoadRecord();
  if (existing_ && existing_->cloud != cloud_name_) {
    throw UsageError("a VM named '" + name_ + "' already exists on " + existing_->cloud,
                     "choose another --name, or remove it with `gpuprov down " + name_ + "`");
  }
}

void Provision::LockVmAndLoadRecord() {
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

InstallerArgs Provision::K3sArgs() const {
  InstallerArgs args;
  args.k3s_version = opt_.k3s_version.value.value_or("");
  args.k3s_sha256 = opt_.k3s_sha256.value.value_or("");
  args.k3s_download_url = opt_.k3s_download_url.value.value_or("");
  if (opt_.nvidia_driver.value == "install") args.nvidia_driver = "install";
  args.nvidia_repo_url = opt_.nvidia_repo_url.value.value_or("");
  args.nvidia_key_fingerprint = opt_.nvidia_key_fingerprint.value.value_or("");
  args.public_ip_source = driver_->info().node_address;
  if (member_.nodes > 1) {
    args.role = member_.role == "agent" ? "agent" : "";
    if (member_.role != "agent") args.cluster_nodes = member_.nodes;
    args.node_ip = !rec_.private_ip.empty() ? rec_.private_ip : rec_.public_ip;
    if (!rec_.private_ip.empty()) args.node_external_ip = rec_.public_ip;
    args.peers = peers_;
  }
  return args;
}

void Provision::CheckAccountAndPlan() {
  if (!cloud_) cloud_ = Cloud::Open(*driver_, config_);
  console_.Step("check", "checking " + cloud_name_ + " credentials");
  const CloudCheck account = cloud_->Check();
  console_.Debug(cloud_name_ + " account: " + account.account);
  RefuseNodesIfCannot(account.max_cluster_nodes);
  user_data_limit_ = account.user_data_limit;
  if (k8s_.enabled) {
    plan_ = PlanCluster(driver_->info().capabilities, account.user_data_limit, K3sArgs(),
                        flags_.install_route);
    // A boot script runs before the node's private address is known: the private-peers
    // firewall is set over SSH once it is (cluster_provision.cc).
    plan_.private_peers = member_.nodes > 1 && account.private_network_unfiltered;
    if (!plan_.refusal.empty()) {
      throw UsageError(
          "--install-route boot on " + cloud_name_ + ": " + plan_.refusal,
          "use --install-route auto (or ssh) on " + cloud_name_ + "; nothing was created");
    }
  } else if (flags_.install_route != InstallRoute::kAuto) {
    // Kubernetes is off by the spec, config.toml or the cloud, not by --no-k8s (cli.cc
    // refuses that pair): the route asked for would install nothing.
    throw UsageError("--install-route " +
                         std::string(flags_.install_route == InstallRoute::kSsh ? "ssh" : "boot") +
                         ": Kubernetes is off for this VM (" + k8s_.note + ")",
                     "add --k8s to install it, or drop --install-route; nothing was created");
  }
  DecideSources(account);
  if (!k8s_.enabled) return;
  if (!plan_.note.empty()) console_.Note(plan_.note);
  console_.Debug(std::string("cluster plan: route ") + (plan_.boot_route ? "boot" : "ssh") +
                 ", access " + (plan_.direct ? "direct" : "tunnel") + ", boot script " +
                 std::to_string(plan_.boot_script_size) + " of " +
                 account.user_data_limit.Describe() + " limit");
}

void Provision::DecideSources(const CloudCheck& account) {
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
    console_.Note(origin +
                  " narrows nothing here: this run opens only SSH (22), and "
                  "--allow-from-ssh is not given");
    return;
  }
  if (wanted_sources_.narrows()) {
    if (!account.honours_allow_from) {
      throw UsageError("the " + cloud_name_ +
                           " driver cannot restrict who reaches a VM's ports "
                           "(" +
                           origin + ")",
                       "drop --allow-from (and allow_from in the spec or config.toml) for " +
                           cloud_name_ + "; nothing was created");
    }
    console_.Info("ports " + SourcesText(wanted_sources_) + " (" + origin + ")");
  }
}

void Provision::ReplacePreemptedVm() {
  // A re-run makes the recorded VM's spec: spot as recorded unless this run says otherwise.
  if (existing_ && opt_.spot.source == Source::kDefault) opt_.spot.value = existing_->spot;
  if (!existing_ || existing_->vm_id.empty()) return;
  std::optional<CloudVm> now = cloud_->Get(existing_->vm_id, name_);
  if (!now || now->state != kPreemptedState) return;
  if (StateWithTtl(*existing_, now->state, std::chrono::system_clock::now()) != kPreemptedState) {
    throw Error("VM " + name_ + " is off: its TTL passed at " + existing_->ttl_deadline + " (" +
                    cloud_name_ + " reports it preempted, as it reports a VM that powered "
                    "itself off)",
                "`gpuprov down " + name_ + "` deletes it (`gpuprov down --expired` every expired "
                "VM); provision after that makes a new one");
  }
  replaced_preempted_ = now->message.empty() ? std::string("no reason given") : now->message;
  console_.Step("replace", "VM " + name_ + " was preempted by " + cloud_name_ + " (" +
                               replaced_preempted_ +
                               "): replacing it with a new one of the same name and spec");
  if (cloud_->Delete(now->id, name_)) console_.Info("deleted the preempted VM " + now->id);
  // The new VM is made as if none had been: its own address, host key and boot script; the
  // record keeps its name, spec, ports' sources, tunnel port and kubeconfig path.
  ForgetHostKey(app_.paths.known_hosts().string(), existing_->public_ip, existing_->ssh_port);
  existing_->vm_id.clear();
  existing_->public_ip.clear();
  existing_->open_ports.clear();
  existing_->probe.clear();
  existing_->phase = "intent";
  existing_->extra["replaced_preempted"] = replaced_preempted_;
  store_->Save(*existing_);
  CrashPoint("preempted-vm-deleted");
}

void Provision::ChooseOfferAndKey() {
  std::vector<CloudOffer> offers =
      cloud_->Offers(opt_.gpus.value, opt_.region.value.value_or(""), k8s_.enabled);
  RememberOffers(offers);
  offer_ = ChooseOffer(offers, opt_, cloud_name_);
  region_ = opt_.region.value.value_or(offer_.region);
  AnnounceOfferAndConfirm();
  PlanTtl();
  public_key_ = EnsureEd25519Key(key_path_);
}

void Provision::AnnounceOfferAndConfirm() {
  console_.Info(
      "offer: " + offer_.instance_type + (offer_.region.empty() ? "" : " in " + offer_.region) +
      (offer_.price_per_hour > 0
           ? " at " + FormatPricePerHour(offer_.price_per_hour) +
                 (opt_.spot.value ? SpotPriceNote(offer_)
                  : offer_.price_source == "table"
                      ? " (the driver's price table" +
                            (offer_.price_date.empty() ? "" : " of " + offer_.price_date) + ")"
                      : "")
           : (opt_.spot.value ? " spot (price unknown)" : " (price unknown)")));
  ConfirmPrice();
}

void Provision::PlanTtl() {
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

void Provision::RememberOffers(const std::vector<CloudOffer>& offers) {
  RememberOffers(cloud_name_, offers);
}

void Provision::RememberOffers(const std::string& cloud, const std::vector<CloudOffer>& offers) {
  try {
    EnsureDir(app_.paths.home() / "cache");
    RememberGpuOffers(app_.paths.home() / "cache", cloud, offers);
  } catch (const std::exception& e) {
    console_.Debug(std::string("offer cache not written: ") + e.what());
  }
}

void Provision::ConfirmPrice() {
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

void Provision::RecordIntent() {
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
  // A VM about to be made is spot as asked; an existing one stays what it was made as.
  if (!existing_ || existing_->vm_id.empty()) rec_.spot = opt_.spot.value;
  if (!k8s_.enabled) {
    rec_.access_mode = "none";
    rec_.route = "none";
    rec_.route_reason.clear();
  }
  rec_.extra["ssh_key"] = key_path_;
  rec_.powered_off_cost = offer_.powered_off_cost;
  if (member_.nodes > 1) {
    rec_.cluster = member_.cluster;
    rec_.role = member_.role;
    rec_.node_index = member_.index;
    rec_.cluster_nodes = member_.role == "server" ? member_.nodes : 0;
  }
  // A VM about to be made: its TTL is recorded with it (the boot script may carry it before
  // this run reaches SSH).
  // A replacement of a preempted VM keeps the recorded TTL unless this run names one.
  if (!existing_ || existing_->vm_id.empty()) {
    const NodeTtl planned = PlannedTtl();
    if (replaced_preempted_.empty() || planned.deadline_epoch || planned.idle_seconds) {
      SetRecordTtl(rec_, planned);
    }
  }
  if (rec_.created_at.empty()) rec_.created_at = NowRfc3339();
  rec_.phase = existing_ ? rec_.phase : "intent";
  rec_.last_error.clear();
  Save();
  CrashPoint("intent-recorded");
}

void Provision::CreateOrFind() {
  console_.Step("create",
                (existing_ ? "checking VM " : "creating VM ") + name_ + " on " + cloud_name_);
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
  // A cluster node: the driver tags it gpuprov-cluster and gpuprov-role and puts it on the
  // cluster's network (docs/driver-protocol.md, "cluster").
  if (member_.nodes > 1) {
    req.cluster = ClusterCreateFields{member_.cluster, member_.role, ClusterPeerPorts()};
  }
  req.open_ports = PortsToOpen(k8s_.enabled, plan_);
  req.user_data = plan_.boot_script;
  AddTtlToUserData(req.user_data);
  req.disk_gb = opt_.disk_gb.value;
  req.kubernetes = k8s_.enabled;
  req.spot = rec_.spot;
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
    console_.Note("VM " + name_ +
                  " already exists: its disk size and tags stay as they were "
                  "made; `gpuprov down " +
                  name_ + "` and provision again to change them");
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

NodeTtl Provision::PlannedTtl() const {
  NodeTtl ttl;
  ttl.check_seconds = opt_.ttl_check_seconds.value;
  ttl.deadline_epoch = planned_deadline_;
  if (opt_.idle_ttl_seconds.value.value_or(0) > 0) ttl.idle_seconds = *opt_.idle_ttl_seconds.value;
  return ttl;
}

void Provision::AddTtlToUserData(std::string& user_data) {
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

void Provision::WaitForRunning() {
  const std::string recorded_address = rec_.public_ip;
  const int recorded_ssh_port = rec_.ssh_port;
  WaitRunning(*cloud_, vm_, std::chrono::seconds(opt_.boot_wait_seconds.value));
  rec_.public_ip = vm_.public_ip;
  if (member_.nodes > 1) rec_.private_ip = vm_.private_ip;
  rec_.ssh_port = vm_.ports.count(22) ? vm_.ports.at(22) : vm_.ssh_port;
  rec_.ssh_user = vm_.ssh_user.empty() ? "root" : vm_.ssh_user;
  rec_.phase = "running";
  rec_.phase_seconds["create"] = SecondsSince(create_start_);
  Save();
  CrashPoint("vm-running");
  if (vm_existed_ && !recorded_address.empty() && !rec_.public_ip.empty() &&
      recorded_address != rec_.public_ip) {
    // A stop and start on a cloud without a static address. The host key pinned at the old
    // address goes (another VM may get it); the new one is pinned at first contact, and in direct
    // mode the API certificate check re-runs the installer with the new address.
    ForgetHostKey(app_.paths.known_hosts().string(), recorded_address, recorded_ssh_port);
    console_.Note("the address of " + name_ + " changed from " + recorded_address + " to " +
                  rec_.public_ip + " (stopped and started on a cloud without a static address): " +
                  (k8s_.enabled ? "the record, SSH, the API certificate and the kubeconfig follow"
                                : "the record and SSH follow"));
  }
  if (rec_.public_ip.empty()) {
    throw Error("the " + cloud_name_ + " driver reported no public address for " + name_,
                "the VM is kept; `gpuprov down " + name_ + "` removes it");
  }
}

void Provision::OpenNeededPorts() {
  if (!vm_existed_) return;
  PortSources recorded;
  recorded.allow_from = rec_.allow_from;
  recorded.narrowed_ports = rec_.allow_from_ports;
  const PortsPlan ports =
      EnsurePortsOpen(*cloud_, vm_, true, rec_.open_ports, PortsToOpen(k8s_.enabled, plan_),
                      recorded, wanted_sources_);
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

SshSession Provision::WaitForSsh() {
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

void Provision::InstallTtlIfAsked(SshSession& session) {
  NodeTtl ttl;
  ttl.check_seconds = opt_.ttl_check_seconds.value;
  const bool set_deadline = opt_.ttl_seconds.value && (opt_.ttl_seconds.source == Source::kFlag ||
                                                       !vm_existed_ || rec_.ttl_deadline.empty());
  if (set_deadline) {
    ttl.deadline_epoch = planned_deadline_;
  } else if (const auto deadline = TtlDeadline(rec_)) {
    ttl.deadline_epoch = static_cast<long long>(std::chrono::system_clock::to_time_t(*deadline));
  }
  const bool set_idle =
      opt_.idle_ttl_seconds.value &&
      (opt_.idle_ttl_seconds.source == Source::kFlag || !vm_existed_ || rec_.idle_ttl_seconds == 0);
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

void Provision::ChooseTunnelPortIfTunnel() {
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

void Provision::MergeKubeconfigIfAsked() {
  merged_into_.clear();
  const bool merge =
      flags_.merge_kubeconfig.value_or(config_.defaults.merge_kubeconfig.value_or(false));
  if (!k8s_.enabled || !merge) return;
  const std::filesystem::path file = UserKubeconfigFile(ProcessEnv());
  const KubeconfigEdit edit =
      MergeKubeconfigFile(file, ReadFile(rec_.kubeconfig, kKubeconfigKind), KubeContextName(name_),
                          false, app_.paths.lock_dir() / "kubeconfig.lock");
  rec_.extra[kKubeconfigMergedKey] = edit.file.string();
  merged_into_ = edit.file.string();
  Save();
}

void Provision::BringUpClusterIfOn(SshSession& session,
                                   std::function<void(NodeShell&)> after_install) {
  if (!k8s_.enabled) return;
  rec_.phase = "installing";
  Save();
  ClusterInputs in;
  in.vm_name = name_;
  in.cloud = cloud_name_;
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
  in.cuda_check = opt_.smoke_test.value;
  in.cuda_check_by_cluster = member_.nodes > 1;
  in.cuda_check_image = opt_.smoke_test_image.value;
  in.save = [this](VmRecord& r) { r = store_->Save(r); };
  in.after_install = std::move(after_install);
  SshNodeShell shell(&session);
  cluster_ = BringUpCluster(shell, in, rec_);
}

void Provision::KeepVmAndRethrow(const Error& e) {
  const bool interrupted = Interrupted();
  // Interrupted: the phase stays where it stopped, so a re-run continues from there.
  if (!interrupted) rec_.phase = "failed";
  rec_.last_error =
      (interrupted ? "interrupted while " + rec_.phase + ": " : std::string()) + e.what();
  store_->Save(rec_);
  throw Error(e.what(),
              e.hint().empty()
                  ? "the VM is kept: look with `gpuprov ssh " + name_ + "`" +
                        (k8s_.enabled ? " (boot log " + BootLogOf(plan_) + ")" : std::string()) +
                        ", retry with the same `gpuprov provision`, or remove it with "
                        "`gpuprov down " +
                        name_ + "`"
                  : e.hint(),
              interrupted ? static_cast<int>(kExitInterrupted) : e.exit_code());
}

void Provision::Report() {
  ProvisionOutcome outcome;
  outcome.record = rec_;
  outcome.vm_state = vm_.state;
  outcome.k8s = k8s_;
  outcome.cluster = cluster_;
  outcome.merged_into = merged_into_;
  if (failover_) outcome.tried = TriedReport(candidates_);
  ReportProvision(app_, outcome);
}

void Provision::Save() { rec_ = store_->Save(rec_); }

int RunProvision(const AppContext& app, const ProvisionFlags& flags,
                 const std::optional<std::string>& spec_file) {
  InstallInterruptHandler();
  return Provision(app, flags, spec_file).Run();
}

}  // namespace gpuprov
