#include "provision.h"

#include <Poco/JSON/Object.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "cloud.h"
#include "cluster_bringup.h"
#include "console.h"
#include "elapsed.h"
#include "error.h"
#include "interrupt.h"
#include "installer_bundle.h"
#include "k8s_policy.h"
#include "kubeconfig.h"
#include "node_shell.h"
#include "spec.h"
#include "ssh_client.h"
#include "ssh_keys.h"
#include "state_store.h"
#include "vm_commands.h"

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
                     "choose another GPU type, count or region, or another --cloud; the "
                     "driver's README lists what it offers");
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

/// Polls the driver until the VM is running; bounded, with progress.
CloudVm WaitRunning(Cloud& cloud, CloudVm vm, std::chrono::seconds limit) {
  Console& console = Console::Get();
  const auto start = Clock::now();
  auto last_progress = start;
  while (vm.state != "running") {
    if (vm.state == "error" || vm.state == "terminated" || vm.state == "stopped") {
      throw Error("VM " + vm.name + " went to state '" + vm.state + "'" +
                      (vm.message.empty() ? "" : ": " + vm.message),
                  "inspect it in the cloud console, then `gpuprov down " + vm.name + "`");
    }
    auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start);
    if (elapsed >= limit) {
      throw Error("VM " + vm.name + " is still '" + vm.state + "' after " +
                      std::to_string(limit.count()) + "s",
                  "re-run the same `gpuprov provision` to keep waiting, or `gpuprov down " +
                      vm.name + "`");
    }
    if (Clock::now() - last_progress >= std::chrono::seconds(5)) {
      console.Progress("waiting for VM " + vm.name + " to run (state " + vm.state + ")", elapsed);
      last_progress = Clock::now();
    }
    ThrowIfInterrupted("waiting for the VM");
    std::this_thread::sleep_for(std::chrono::seconds(1));
    std::optional<CloudVm> now = cloud.Get(vm.id, vm.name);
    if (!now) {
      throw Error("VM " + vm.name + " disappeared while booting",
                  "re-run the same `gpuprov provision` to create it again");
    }
    vm = *now;
  }
  return vm;
}

}  // namespace

int RunProvision(const AppContext& app, const ProvisionFlags& flags,
                 const std::optional<std::string>& spec_file) {
  Console& console = Console::Get();
  InstallInterruptHandler();

  // 1. Validate everything; nothing is created in this block.
  Config config = app.LoadUserConfig();
  Spec spec;
  if (spec_file) spec = LoadSpec(*spec_file);
  ProvisionOptions opt = ResolveProvisionOptions(flags, spec, ProcessEnv(), config);
  for (const auto& line : DescribeProvisionOptions(opt)) console.Debug(line);
  const std::string& name = opt.name.value;
  const std::string& cloud_name = opt.cloud.value;

  DriverHost host = app.MakeDriverHost();
  DriverInfo info = host.Find(cloud_name);
  if (!info.problem.empty()) {
    throw Error("the " + cloud_name + " driver at " + info.path + " is broken: " + info.problem,
                "run `gpuprov drivers`; reinstall gpuprov-driver-" + cloud_name);
  }
  K8sDecision k8s =
      DecideKubernetes(opt.kubernetes, cloud_name, info.has(GPUPROV_CAP_HOSTS_KUBERNETES));
  if (k8s.refused) {
    throw UsageError(k8s.note, "nothing was created");
  }

  const std::string key_path = opt.ssh_key.value
                                   ? ExpandHome(*opt.ssh_key.value)
                                   : (app.paths.keys_dir() / "id_ed25519").string();
  if (opt.ssh_key.value && !std::filesystem::exists(key_path)) {
    throw UsageError("ssh key " + key_path + " does not exist (--ssh-key " +
                         DescribeOrigin(opt.ssh_key) + ")",
                     "name an existing private key, or drop --ssh-key to use gpuprov's own");
  }

  EnsureDir(app.paths.home());
  EnsureDir(app.paths.state_dir());
  EnsureDir(app.paths.keys_dir());
  StateStore store(app.paths);
  std::optional<FileLock> lock = store.TryLockVm(name);
  if (!lock) {
    console.Note("another gpuprov is working on '" + name + "'; waiting for it");
    lock.emplace(store.LockVm(name, 30 * 60 * 1000));
  }
  std::optional<VmRecord> existing = store.Load(name);
  if (existing && existing->cloud != cloud_name) {
    throw UsageError("a VM named '" + name + "' already exists on " + existing->cloud,
                     "choose another --name, or remove it with `gpuprov down " + name + "`");
  }

  std::unique_ptr<Cloud> cloud = Cloud::Open(host, cloud_name, config);
  console.Step("checking " + cloud_name + " credentials");
  const CloudCheck account = cloud->Check();
  console.Debug(cloud_name + " account: " + account.account);
  ClusterPlan plan;
  if (k8s.enabled) {
    plan = PlanCluster(info.capabilities, account.user_data_limit);
    if (!plan.note.empty()) console.Note(plan.note);
    console.Debug(std::string("cluster plan: route ") + (plan.boot_route ? "boot" : "ssh") +
                  ", access " + (plan.direct ? "direct" : "tunnel") + ", boot script " +
                  std::to_string(plan.boot_script.size()) + " of " +
                  std::to_string(account.user_data_limit) + " bytes");
  }
  std::vector<CloudOffer> offers = cloud->Offers(opt.gpus.value, opt.region.value.value_or(""));
  CloudOffer offer = ChooseOffer(offers, opt, cloud_name);
  const std::string region = opt.region.value.value_or(offer.region);
  console.Info("offer: " + offer.instance_type + (offer.region.empty() ? "" : " in " + offer.region) +
               (offer.price_per_hour > 0 ? " at $" + std::to_string(offer.price_per_hour) + "/h"
                                         : ""));
  const std::string public_key = EnsureEd25519Key(key_path);

  // 2. Record the intent before any call that creates something.
  VmRecord rec = existing.value_or(VmRecord{});
  rec.name = name;
  rec.cloud = cloud_name;
  rec.region = region;
  rec.instance_type = offer.instance_type;
  rec.gpus = opt.gpus.value ? ToString(*opt.gpus.value) : "";
  rec.image = opt.image.value.value_or("");
  rec.driver_file = info.path;
  rec.kubernetes = k8s.enabled;
  if (!k8s.enabled) {
    rec.access_mode = "none";
    rec.route = "none";
  }
  rec.extra["ssh_key"] = key_path;
  if (rec.created_at.empty()) rec.created_at = NowRfc3339();
  rec.phase = existing ? rec.phase : "intent";
  rec.last_error.clear();
  rec = store.Save(rec);

  // 3. Create, or find the VM of that name.
  console.Step((existing ? "checking VM " : "creating VM ") + name + " on " + cloud_name);
  CreateRequest req;
  req.name = name;
  req.region = region;
  req.instance_type = offer.instance_type;
  req.gpu = opt.gpus.value;
  req.image = rec.image;
  req.ssh_public_key = public_key;
  req.tags = opt.tags;
  req.tags["gpuprov"] = "1";
  req.tags["gpuprov-name"] = name;
  req.open_ports = PortsToOpen(k8s.enabled, plan);
  req.user_data = plan.boot_script;
  req.disk_gb = opt.disk_gb.value;
  CloudVm vm;
  bool reused = false;
  ClusterResult cluster;
  const auto create_start = Clock::now();
  try {
    rec.phase = "creating";
    rec = store.Save(rec);
    std::tie(vm, reused) = cloud->Create(req);
  } catch (const Error& e) {
    // Nothing may be left behind: when the cloud has no VM of that name, forget the intent.
    std::optional<CloudVm> left;
    try {
      left = cloud->Get("", name);
    } catch (const Error&) {
      left = CloudVm{};  // unknown: keep the record so `gpuprov down` can clean up
    }
    if (!left) {
      store.Remove(name);
    } else {
      rec.phase = "failed";
      rec.last_error = e.what();
      store.Save(rec);
    }
    throw;
  }
  if (reused) console.Info("reusing existing VM " + name + " (id " + vm.id + ")");
  // --- ports of a reused VM (branch ports; the lead reconciles this with abi-host's host
  // call). create returns an existing VM as it is, with the ports it really has open; the
  // ones this run needs beyond those are opened by the driver's open_ports.
  if (reused && info.has(GPUPROV_CAP_OPEN_PORTS)) {
    std::vector<int> missing;
    for (int p : req.open_ports) {
      if (vm.ports.count(p) == 0) missing.push_back(p);
    }
    if (!missing.empty()) {
      std::string list;
      for (int p : missing) list += (list.empty() ? "" : ", ") + std::to_string(p);
      console.Step("opening TCP " + list + " of " + name + " on " + cloud_name);
      cloud->OpenPorts(vm.id, req.open_ports);
      for (int p : missing) vm.ports[p] = p;
    }
  }
  // --- end of the ports branch's host call.
  rec.vm_id = vm.id;
  rec = store.Save(rec);

  try {
    vm = WaitRunning(*cloud, vm, std::chrono::seconds(opt.ssh_wait_seconds.value));
    rec.public_ip = vm.public_ip;
    rec.ssh_port = vm.ports.count(22) ? vm.ports.at(22) : vm.ssh_port;
    rec.ssh_user = vm.ssh_user.empty() ? "root" : vm.ssh_user;
    rec.phase = "running";
    rec.phase_seconds["create"] = SecondsSince(create_start);
    rec = store.Save(rec);
    if (rec.public_ip.empty()) {
      throw Error("the " + cloud_name + " driver reported no public address for " + name,
                  "the VM is kept; `gpuprov down " + name + "` removes it");
    }

    // 4. SSH: bounded wait, host key pinned on first contact.
    SshTarget target{rec.public_ip, rec.ssh_port, rec.ssh_user, key_path,
                     app.paths.known_hosts().string()};
    if (!reused) ForgetHostKey(target.known_hosts_path, target.host, target.port);
    console.Step("waiting for SSH on " + SshHostPort(target.host, target.port));
    const auto ssh_start = Clock::now();
    SshSession session = WaitForSsh(
        target, std::chrono::seconds(opt.ssh_wait_seconds.value), [&](std::chrono::seconds s) {
          console.Progress("waiting for SSH on " + SshHostPort(target.host, target.port), s);
          ThrowIfInterrupted("waiting for SSH");
        });
    SshRunResult hello = session.Run("uname -sr");
    console.Debug("node: " + hello.stdout_text);
    rec.phase_seconds["ssh"] = SecondsSince(ssh_start);

    // 5. The cluster, when Kubernetes is on.
    if (k8s.enabled) {
      rec.phase = "installing";
      rec = store.Save(rec);
      ClusterInputs in;
      in.vm_name = name;
      in.plan = plan;
      in.public_ip = rec.public_ip;
      in.api_port = vm.ports.count(kApiPort) ? vm.ports.at(kApiPort) : kApiPort;
      in.expected_gpus = opt.gpus.value ? opt.gpus.value->count : 0;
      in.ssh = target;
      in.boot_install_wait = std::chrono::seconds(opt.boot_install_wait_seconds.value);
      in.api_wait = std::chrono::seconds(opt.api_wait_seconds.value);
      in.kubeconfig_path = app.paths.kubeconfig(name);
      in.save = [&store](VmRecord& r) { r = store.Save(r); };
      SshNodeShell shell(&session);
      cluster = BringUpCluster(shell, in, rec);
    }
    rec.phase = "ready";
    rec = store.Save(rec);
  } catch (const Error& e) {
    rec.phase = "failed";
    rec.last_error = e.what();
    store.Save(rec);
    throw Error(e.what(), e.hint().empty()
                              ? "the VM is kept: look with `gpuprov ssh " + name + "`" +
                                    (k8s.enabled ? std::string(" (boot log ") + kNodeBootLog + ")"
                                                 : std::string()) +
                                    ", retry with the same `gpuprov provision`, or remove it "
                                    "with `gpuprov down " + name + "`"
                              : e.hint(),
                e.exit_code());
  }

  // 5. Tell the user how to get in.
  if (!k8s.note.empty()) console.Note(k8s.note);
  if (app.json_output) {
    console.Result(VmRecordJson(rec) + "\n");
  } else {
    std::ostringstream out;
    out << "VM " << name << " is ready on " << cloud_name << " at " << rec.public_ip
        << " (ssh port " << rec.ssh_port << ", user " << rec.ssh_user << ").\n"
        << "  shell:   gpuprov ssh " << name << "\n"
        << "  command: gpuprov ssh " << name << (rec.gpus.empty() ? " -- uname -a\n" : " -- nvidia-smi\n")
        << "  remove:  gpuprov down " << name << "\n";
    if (k8s.enabled) {
      out << "Kubernetes (k3s) is ready on " << name << ": node Ready, CoreDNS ready"
          << (cluster.gpus_allocatable > 0
                  ? ", nvidia.com/gpu: " + std::to_string(cluster.gpus_allocatable)
                  : std::string())
          << " (" << rec.route << " route, " << rec.access_mode << " access; "
          << PhaseTimes(rec.phase_seconds) << ").\n"
          << "  kubeconfig: " << rec.kubeconfig << " (context " << KubeContextName(name) << ")\n"
          << "  use:        export KUBECONFIG=" << rec.kubeconfig << "; kubectl get nodes\n";
      if (rec.access_mode == "tunnel") {
        out << "  tunnel:     gpuprov tunnel " << name << "   (keep it running: kubectl reaches "
            << cluster.server << " through SSH)\n";
      }
    }
    console.Result(out.str());
    if (k8s.enabled && rec.access_mode == "direct") {
      console.Warning("the Kubernetes API of " + name + " is exposed to the internet at " +
                      cluster.server + " (ports " + DirectModePortsText() + " are open to 0.0.0.0/0); "
                      "the kubeconfig is a secret: whoever holds it controls the cluster. "
                      "--no-k8s gives a plain VM with only SSH open");
    }
  }
  return 0;
}

}  // namespace gpuprov
