#include "cluster_bringup.h"

#include <Poco/JSON/Object.h>

#include <sstream>

#include "cluster_probe.h"
#include "console.h"
#include "elapsed.h"
#include "gpuprov/driver_abi.h"
#include "error.h"
#include "interrupt.h"
#include "kube_api_client.h"
#include "crash_point.h"
#include "cuda_check.h"
#include "driver_host.h"
#include "kubeconfig.h"
#include "node_shell.h"
#include "ssh_tunnel.h"

namespace gpuprov {
namespace {

using Clock = std::chrono::steady_clock;

/// How long a bring-up that pushed the installer waits for another run holding the lock (a
/// boot run that took it after ours): one install, apt included, fits well within it.
constexpr std::chrono::minutes kAfterPushRunWait{15};

/// While the GPUs are not allocatable, validation probes the node again this often: a GPU
/// without a driver fails at once, a driver that loaded late gets the installer re-run.
constexpr std::chrono::seconds kValidateReprobeEvery{10};

/// Reboots the node in two seconds, from a transient timer, so the command returns before the
/// connection drops (NodeShell may repeat a command after a reconnect; a reboot must not be).
constexpr const char* kRebootCommand =
    "systemd-run --quiet --on-active=2 /bin/systemctl reboot 2>/dev/null || "
    "{ nohup sh -c 'sleep 2; systemctl reboot' >/dev/null 2>&1 </dev/null & }";

/// The last line of \a text, trimmed: what a failed installer printed last.
std::string LastLine(const std::string& text) {
  const std::string t = TrimSpace(text);
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

/// The hint every cluster failure carries: how to look, how to retry, how to remove.
std::string LookHint(const std::string& vm, const std::string& boot_log) {
  return "the VM is kept. Look: `gpuprov ssh " + vm + " -- sudo tail -n 50 " + kNodeInstallLog +
         "` (boot log: " + boot_log + "); retry: the same `gpuprov provision`; remove: "
         "`gpuprov down " + vm + "`";
}

// ---- Node checks: one round trip reads /readyz, the nodes and the CoreDNS deployment. ----

constexpr const char* kNodeChecksCommand = R"CHECKS(
echo '@@readyz@@'
code=$(api -o /dev/null -w '%{http_code}' https://127.0.0.1:6443/readyz 2>/dev/null)
echo "${code:-000}"
echo '@@nodes@@'
api https://127.0.0.1:6443/api/v1/nodes 2>/dev/null
echo
echo '@@coredns@@'
api https://127.0.0.1:6443/apis/apps/v1/namespaces/kube-system/deployments/coredns 2>/dev/null
echo
echo '@@sandbox@@'
api 'https://127.0.0.1:6443/api/v1/namespaces/kube-system/events?fieldSelector=reason%3DFailedCreatePodSandBox' 2>/dev/null
echo
echo '@@end@@'
)CHECKS";

struct NodeChecks {
  bool api_ready = false;
  std::string readyz_code;
  bool node_ready = false;
  std::string node_name;
  std::string node_message;  // the Ready condition's message when not ready
  bool coredns_ready = false;
  std::string coredns_text;  // "0/1 ready"
  int gpus_allocatable = 0;
  /// A kube-system pod's FailedCreatePodSandBox event naming a runtime handler containerd does
  /// not have ("no runtime for \"nvidia\" is configured"): no pod can start.
  std::string sandbox_error;
};

int ToInt(const Poco::Dynamic::Var& v) {
  try {
    return v.isString() ? std::stoi(v.extract<std::string>()) : v.convert<int>();
  } catch (...) {
    return 0;
  }
}

/// The CoreDNS deployment as the API answered for it: "1/1 replicas ready", or, when the answer
/// is a Status (its "status" is the string "Failure"), what it says: "deployment not found"
/// (404), "the API refused gpuprov's client certificate (HTTP 401: ...)" (401/403).
std::string DescribeCoreDns(const Poco::JSON::Object::Ptr& dep, bool& ready_out) {
  ready_out = false;
  if (!dep) return "no answer from the API";
  if (dep->optValue<std::string>("kind", "") == "Status") {
    const int code = dep->optValue<int>("code", 0);
    const std::string message = dep->optValue<std::string>("message", "");
    if (code == 404) return "deployment not found";
    const std::string why = "HTTP " + std::to_string(code) + (message.empty() ? "" : ": " + message);
    if (code == 401 || code == 403) return "the API refused gpuprov's client certificate (" + why + ")";
    return "the API answered " + why;
  }
  Poco::JSON::Object::Ptr spec = dep->isObject("spec") ? dep->getObject("spec") : nullptr;
  Poco::JSON::Object::Ptr st = dep->isObject("status") ? dep->getObject("status") : nullptr;
  const int want = spec ? spec->optValue<int>("replicas", 1) : 1;
  const int ready = st ? st->optValue<int>("readyReplicas", 0) : 0;
  ready_out = ready >= 1 && ready >= want;
  return std::to_string(ready) + "/" + std::to_string(want) + " replicas ready";
}

NodeChecks ParseNodeChecks(const std::string& output) {
  std::map<std::string, std::string> s = NodeOutputSections(output);
  NodeChecks c;
  c.readyz_code = TrimSpace(s["readyz"]);
  c.api_ready = c.readyz_code == "200";
  if (auto nodes = ParseKubeObject(TrimSpace(s["nodes"])); nodes && nodes->isArray("items")) {
    auto items = nodes->getArray("items");
    if (items->size() > 0) {
      auto node = items->getObject(0);
      c.node_name = node->getObject("metadata")->optValue<std::string>("name", "");
      auto status = node->getObject("status");
      if (status && status->isArray("conditions")) {
        auto conds = status->getArray("conditions");
        for (size_t i = 0; i < conds->size(); ++i) {
          auto cond = conds->getObject(static_cast<unsigned>(i));
          if (cond->optValue<std::string>("type", "") == "Ready") {
            c.node_ready = cond->optValue<std::string>("status", "") == "True";
            c.node_message = cond->optValue<std::string>("message", "");
          }
        }
      }
      if (status && status->has("allocatable")) {
        auto alloc = status->getObject("allocatable");
        if (alloc && alloc->has("nvidia.com/gpu")) c.gpus_allocatable = ToInt(alloc->get("nvidia.com/gpu"));
      }
    }
  }
  c.coredns_text = DescribeCoreDns(ParseKubeObject(TrimSpace(s["coredns"])), c.coredns_ready);
  if (auto events = ParseKubeObject(TrimSpace(s["sandbox"])); events && events->isArray("items")) {
    auto items = events->getArray("items");
    for (size_t i = 0; i < items->size() && c.sandbox_error.empty(); ++i) {
      auto ev = items->getObject(static_cast<unsigned>(i));
      const std::string message = ev ? ev->optValue<std::string>("message", "") : "";
      if (message.find("no runtime for") != std::string::npos) c.sandbox_error = message;
    }
  }
  return c;
}

NodeChecks RunNodeChecks(NodeShell& shell) {
  SshRunResult r = shell.RunAsRoot("cluster checks", std::string(kNodeApiFunction) + kNodeChecksCommand,
                                    "", std::chrono::seconds(60));
  return ParseNodeChecks(r.stdout_text);
}

/// The first check that does not pass, as "what: detail"; "" when all pass.
std::string FirstFailingCheck(const NodeChecks& c, int expected_gpus) {
  if (!c.api_ready) return "the Kubernetes API /readyz answers " + c.readyz_code;
  if (!c.node_ready) {
    return "node " + (c.node_name.empty() ? std::string("(none registered)") : c.node_name) +
           " is not Ready" + (c.node_message.empty() ? "" : ": " + c.node_message);
  }
  if (!c.sandbox_error.empty() && (!c.coredns_ready || c.gpus_allocatable < expected_gpus)) {
    return "pods cannot start on node " + c.node_name + ": " + c.sandbox_error;
  }
  if (!c.coredns_ready) return "CoreDNS is not ready (" + c.coredns_text + ")";
  if (expected_gpus > 0 && c.gpus_allocatable < expected_gpus) {
    return "nvidia.com/gpu is not allocatable on node " + c.node_name + " (" +
           std::to_string(c.gpus_allocatable) + " of " + std::to_string(expected_gpus) +
           "): the NVIDIA device plugin has not registered the GPUs";
  }
  return "";
}

/// The hint for a node that cannot host k3s (a container where systemd is not PID 1).
std::string CannotHostFix(const std::string& vm) {
  return "k3s needs a VM. The machine is kept: `gpuprov ssh " + vm + "` works; remove it with "
         "`gpuprov down " + vm + "`. Then provision with --no-k8s for a plain machine, or pick an "
         "offer from a provider that gives VMs (Prime Intellect: vm_providers in "
         "[clouds.primeintellect] lists them; see " + DriverReadme("primeintellect") + ")";
}

std::string FixFor(const std::string& failing, const std::string& vm,
                   const std::string& boot_log) {
  if (failing.rfind("pods cannot start", 0) == 0) {
    return CudaFailureIn(failing, vm, "").hint + "; " + LookHint(vm, boot_log);
  }
  if (failing.rfind("nvidia.com/gpu", 0) == 0) {
    return "look at the device plugin: `gpuprov ssh " + vm +
           " -- sudo k3s kubectl -n kube-system logs ds/nvidia-device-plugin-daemonset`; " +
           LookHint(vm, boot_log);
  }
  if (failing.rfind("CoreDNS", 0) == 0) {
    return "look: `gpuprov ssh " + vm + " -- sudo k3s kubectl -n kube-system get pods`; " +
           LookHint(vm, boot_log);
  }
  return "look: `gpuprov ssh " + vm + " -- sudo journalctl -u k3s -n 50`; " +
         LookHint(vm, boot_log);
}

}  // namespace

ClusterPlan PlanCluster(std::uint64_t capabilities, const UserDataLimit& user_data_limit,
                        const InstallerArgs& boot_args, InstallRoute asked) {
  ClusterPlan plan;
  plan.direct = (capabilities & GPUPROV_CAP_OPEN_PORTS) != 0;
  const bool boot = (capabilities & (GPUPROV_CAP_BOOT_CLOUD_INIT | GPUPROV_CAP_BOOT_STARTUP_SCRIPT)) != 0;
  if (asked == InstallRoute::kSsh) {
    plan.ssh_asked = true;
    return plan;
  }
  if (!boot) {
    if (asked == InstallRoute::kBoot) {
      plan.refusal = "the driver declares no boot script (neither cloud-init user data nor a "
                     "startup script), so the installer cannot ride in one";
    }
    return plan;
  }
  InstallerArgs args = boot_args;
  args.node_firewall = NodeFirewallFor(plan);
  // A cluster's server learns k3s's addresses at boot where the metadata service gives them
  // (the VM has none yet when its script is written), so its install needs no second run.
  if (args.cluster_nodes > 1 && args.node_ip.empty() &&
      PrivateAddressFromMetadata(args.public_ip_source)) {
    args.node_ip = kNodeIpFromMetadata;
  }
  // A cloud that runs user data through cloud-init is asked through cloud-init; a startup
  // script alone leaves its own trace.
  plan.startup_script = (capabilities & GPUPROV_CAP_BOOT_CLOUD_INIT) == 0;
  std::optional<BootScript> script = MakeBootScript(args, user_data_limit, plan.startup_script);
  if (!script) {
    if (asked == InstallRoute::kBoot) {
      plan.refusal = "the installer does not fit in the cloud's " +
                     user_data_limit.Describe() + " boot script, even compressed";
      return plan;
    }
    plan.note = "the installer does not fit in this cloud's " + user_data_limit.Describe() +
                " boot script, even compressed: installing over SSH instead";
    return plan;
  }
  plan.boot_route = true;
  plan.boot_args = args;
  plan.boot_script = script->text;
  plan.boot_script_size = script->size;
  return plan;
}

std::string NodeFirewallFor(const ClusterPlan& plan) { return plan.direct ? "" : "ssh-only"; }

std::vector<int> PortsToOpen(bool kubernetes, const ClusterPlan& plan) {
  if (kubernetes && plan.direct) return {22, kApiPort, 80, 443};
  return {22};
}

namespace {

/// One bring-up: the steps of BringUpCluster, each a method, sharing the node shell, the inputs
/// and the record they keep up to date.
class ClusterBringUp {
 public:
  ClusterBringUp(NodeShell& shell, const ClusterInputs& in, VmRecord& rec)
      : shell_(shell),
        in_(in),
        rec_(rec),
        vm_(in.vm_name),
        boot_log_(BootLogOf(in.plan)),
        console_(Console::Get()) {}

  ClusterResult Run() {
    // The route as planned; Install and a SAN re-run change it to what actually ran.
    previous_route_ = rec_.route;
    previous_route_reason_ = rec_.route_reason;
    rec_.route = in_.plan.boot_route ? "boot" : "ssh";
    rec_.route_reason = in_.plan.boot_route ? "" : PlannedSshRouteReason(in_.plan);
    rec_.access_mode = in_.plan.direct ? "direct" : "tunnel";
    rec_.probe.clear();
    in_.save(rec_);

    Install();
    if (in_.after_install) in_.after_install(shell_);
    console_.Step("validate", "waiting for the Kubernetes API and validating the node");
    NodeChecks checks = WaitAndValidate();

    const auto access_start = Clock::now();
    KubeCredentials creds = ReadCredentials();
    ClusterResult result;
    result.server = in_.plan.direct ? CheckDirectAccess(creds, checks) : CheckTunnelAccess(creds);
    if (!in_.plan.direct && !in_.public_ip.empty()) {
      console_.Step("access", "checking that the API is closed at " + in_.public_ip + ":" +
                    std::to_string(in_.api_port) + " from this machine");
      ApiReach& reach = in_.reach != nullptr ? *in_.reach : ApiFromThisMachine();
      rec_.probe["api_at_public_address"] = CheckApiClosedAtPublicAddress(
          reach, vm_, in_.public_ip, in_.api_port, creds.ca_pem);
    }
    result.gpus_allocatable = checks.gpus_allocatable;
    rec_.phase_seconds["access"] = SecondsSince(access_start);

    // The user's kubeconfig: renamed, pointed at the access endpoint, 0600, atomic.
    WriteKubeconfig(in_.kubeconfig_path, RenderKubeconfig(vm_, result.server, creds));
    rec_.kubeconfig = in_.kubeconfig_path.string();
    in_.save(rec_);
    CrashPoint("kubeconfig-written");
    result.cuda_check_passed = CheckCuda(checks.gpus_allocatable);
    return result;
  }

 private:
  /// Probes and decides until the install is done (the decision table, docs/design.md §3):
  /// waits for a boot install, or pushes the installer over SSH once.
  void Install() {
    const auto start = Clock::now();
    InstallerArgs args = in_.k3s;
    args.node_firewall = NodeFirewallFor(in_.plan);
    if (!in_.plan.boot_route) args.public_ip = in_.public_ip;  // a boot run asks the metadata service
    bool pushed = false;
    bool rebooted = false;
    Clock::time_point pushed_at;
    console_.Step("install", in_.plan.boot_route ? "checking the k3s install that ran at boot"
                                                 : "installing k3s over SSH");
    for (;;) {
      NodeProbe probe = RunNodeProbe(shell_);
      const BootRoute route = pushed ? BootRoute::kNone : BootRouteOf(in_.plan);
      ClusterDecision d = DecideClusterAction(probe, route, Since(start), in_.boot_install_wait,
                                              InstallerVersion(), DriverInstall());
      rec_.probe = DescribeNodeProbe(probe);
      rec_.probe["decision"] = std::string(ToString(d.action)) + ": " + d.reason;
      if (pushed) rec_.probe["pushed_over_ssh"] = "yes";
      if (rebooted) rec_.probe["rebooted"] = "yes";
      in_.save(rec_);
      std::string seen;
      for (const auto& [key, value] : rec_.probe) {
        if (key != "decision") seen += (seen.empty() ? "" : ", ") + key + "=" + value;
      }
      console_.Debug("probe: " + seen);
      console_.Debug("probe: " + rec_.probe["decision"]);
      if (d.action == ClusterAction::kCheckApi) {
        if (!probe.marker_fabric_manager.empty()) {
          console_.Info("NVSwitch machine: nvidia-fabricmanager " + probe.marker_fabric_manager);
        }
        break;
      }
      if (d.action == ClusterAction::kFail) {
        if (d.cause == ClusterDecision::Cause::kGpuWithoutDriver) {
          throw Error(vm_ + ": " + d.reason, GpuWithoutDriverFix(vm_, in_.cloud));
        }
        throw Error(vm_ + ": " + d.reason, CannotHostFix(vm_));
      }
      if (d.action == ClusterAction::kReboot) {
        if (rebooted) {
          throw Error(vm_ + ": the NVIDIA driver the installer added did not load after a reboot",
                      LookHint(vm_, boot_log_));
        }
        console_.Note(d.reason + ": rebooting " + vm_);
        Reboot();
        rebooted = true;
        pushed = false;  // after the reboot the installer runs again where needed
        continue;
      }
      if (d.action == ClusterAction::kWait) {
        // A wait the install reports itself (apt's lock held by another apt run) is a progress
        // line of its own, not folded into the boot install's.
        console_.Progress(probe.installer_running && !probe.marker_message.empty()
                              ? "the boot install is " + probe.marker_message
                              : "waiting for the boot install (" + d.reason + ")",
                          Since(start));
        PauseUnlessInterrupted(in_.poll_interval + in_.poll_interval / 2, "waiting for the boot install");
        continue;
      }
      if (pushed && probe.installer_running && Since(pushed_at) < kAfterPushRunWait) {
        // Our run finished, so another one holds the lock: a boot run that reached its lock
        // only after ours (cloud-init was still in its early stages when we pushed). It
        // installs the same thing; wait for it rather than fail.
        console_.Progress("waiting for another installer run on " + vm_ + " to finish",
                          Since(pushed_at));
        PauseUnlessInterrupted(in_.poll_interval + in_.poll_interval / 2, "waiting for another installer run");
        continue;
      }
      if (pushed) {
        throw Error("k3s is not running on " + vm_ + " after the installer ran over SSH: " +
                        d.reason,
                    LookHint(vm_, boot_log_));
      }
      if (in_.plan.boot_route) {
        console_.Note(d.reason + ": installing over SSH");
        rec_.route = "ssh";
        rec_.route_reason = d.reason;
      }
      console_.Info("running the installer on " + vm_ + " (log on the node: " + kNodeInstallLog +
                    ")");
      pushed = true;
      RunInstaller("push installer", args, "pushed_over_ssh");
      pushed_at = Clock::now();
    }
    if (!pushed && in_.plan.boot_route && previous_route_ == "ssh") {
      // Nothing ran now: the install found is the one an earlier run pushed over SSH.
      rec_.route = previous_route_;
      rec_.route_reason = previous_route_reason_;
    }
    rec_.phase_seconds["install"] = SecondsSince(start);
    in_.save(rec_);
  }

  /// The CUDA check (cuda_check.h) on a node that was asked for GPUs: a pod requesting all
  /// \a gpus runs a CUDA program; the record keeps the outcome and the phase's time. Returns
  /// whether it ran and passed; throws Error naming the cause when it failed.
  bool CheckCuda(int gpus) {
    if (in_.expected_gpus <= 0) return false;
    if (!in_.cuda_check) {
      rec_.probe["cuda_check"] = "skipped (smoke test off)";
      in_.save(rec_);
      return false;
    }
    if (in_.cuda_check_by_cluster) {
      rec_.probe["cuda_check"] = "after the agents join, on every node at once";
      in_.save(rec_);
      return false;
    }
    const auto start = Clock::now();
    console_.Step("cuda", "running a CUDA program in a pod requesting " + std::to_string(gpus) +
                              " GPU(s), under the default runtime (" + in_.cuda_check_image + ")");
    CudaCheckInputs check;
    check.vm_name = vm_;
    check.image = in_.cuda_check_image;
    check.gpus = gpus;
    check.wait = in_.cuda_check_wait;
    check.poll_interval = in_.poll_interval;
    try {
      const std::string last = RunCudaCheck(shell_, check);
      rec_.probe["cuda_check"] = "passed" + (last.empty() ? "" : ": " + last);
    } catch (const Error& e) {
      rec_.probe["cuda_check"] = std::string("failed: ") + e.what();
      rec_.phase_seconds["cuda"] = SecondsSince(start);
      in_.save(rec_);
      throw;
    }
    rec_.phase_seconds["cuda"] = SecondsSince(start);
    in_.save(rec_);
    return true;
  }

  bool DriverInstall() const { return in_.k3s.nvidia_driver == "install"; }

  /// Reboots the node and waits (bounded by boot_install_wait) until it answers SSH again from
  /// a fresh boot.
  void Reboot() {
    const auto start = Clock::now();
    try {
      shell_.RunAsRoot("reboot", kRebootCommand, "", std::chrono::seconds(30));
    } catch (const Error& e) {
      // The connection may drop as the node goes down; the probes below tell.
      console_.Debug("reboot: " + std::string(e.what()));
    }
    rec_.probe["rebooted"] = "yes";
    in_.save(rec_);
    for (;;) {
      PauseUnlessInterrupted(in_.poll_interval * 2, "waiting for " + vm_ + " to reboot");
      try {
        NodeProbe probe = RunNodeProbe(shell_);
        if (!probe.booted_seconds || std::chrono::seconds(*probe.booted_seconds) <= Since(start)) {
          console_.Info(vm_ + " is back after its reboot");
          rec_.phase_seconds["reboot"] = SecondsSince(start);
          return;
        }
      } catch (const Error& e) {
        console_.Debug("waiting for the reboot: " + std::string(e.what()));
      }
      if (Since(start) >= in_.boot_install_wait) {
        throw Error(vm_ + " did not answer SSH within " +
                        std::to_string(in_.boot_install_wait.count()) + "s of its reboot",
                    "look at the VM in the cloud's console; " + LookHint(vm_, boot_log_));
      }
      console_.Progress("waiting for " + vm_ + " to reboot", Since(start));
    }
  }

  /// While the GPUs are not allocatable: a probe of the node. A GPU without a working driver
  /// fails at once; a GPU whose driver loaded after the install gets the installer re-run.
  void ReprobeGpus() {
    NodeProbe probe = RunNodeProbe(shell_);
    if (std::string what = GpuWithoutDriver(probe); !what.empty()) {
      rec_.probe = DescribeNodeProbe(probe);
      in_.save(rec_);
      throw Error(vm_ + ": " + what, GpuWithoutDriverFix(vm_, in_.cloud));
    }
    if (probe.gpu_present && !probe.marker_gpu_configured && !probe.installer_running) {
      console_.Note("a GPU (" + probe.gpu_name + ") appeared that the install did not see: "
                    "running the installer again");
      InstallerArgs args = in_.k3s;
      args.node_firewall = NodeFirewallFor(in_.plan);
      if (!in_.plan.boot_route) args.public_ip = in_.public_ip;
      RunInstaller("push installer for a late GPU", args, "late_gpu_rerun");
    }
  }

  /// Sends the installer over SSH and runs it with \a args; \a record_key in the record's probe
  /// map says it ran. Throws naming the exit status and the installer's last line on failure.
  void RunInstaller(const std::string& purpose, const InstallerArgs& args,
                    const std::string& record_key) {
    SshRunResult r = shell_.RunAsRoot(purpose, InstallerPushCommand(args), InstallerScript(),
                                      std::chrono::minutes(30));
    rec_.probe[record_key] = r.exit_status == 0 ? "yes" : "failed";
    in_.save(rec_);
    if (r.exit_status == 0) {
      CrashPoint(record_key == "san_rerun" ? "san-rerun" : "installer-pushed");
    }
    if (r.exit_status != 0) {
      const std::string with = args.public_ip.empty() ? "" : " with --public-ip " + args.public_ip;
      throw Error("the k3s installer failed on " + vm_ + with + " (exit " +
                      std::to_string(r.exit_status) + "): " + LastLine(r.stderr_text),
                  LookHint(vm_, boot_log_));
    }
  }

  /// Waits (bounded by api_wait, with progress) until /readyz answers and the node checks pass.
  NodeChecks WaitAndValidate() {
    const auto start = Clock::now();
    bool api_seen = false;
    auto reprobed = start;
    for (;;) {
      NodeChecks checks = RunNodeChecks(shell_);
      const std::string failing = FirstFailingCheck(checks, in_.expected_gpus);
      if (checks.api_ready && !api_seen) {
        api_seen = true;
        rec_.phase_seconds["api"] = SecondsSince(start);
        if (!failing.empty()) console_.Info("Kubernetes API ready; validating the node");
      }
      if (failing.empty()) {
        rec_.phase_seconds["validate"] = SecondsSince(start);
        return checks;
      }
      if (failing.rfind("nvidia.com/gpu", 0) == 0 && Clock::now() - reprobed >= kValidateReprobeEvery) {
        reprobed = Clock::now();
        ReprobeGpus();
      }
      if (Since(start) >= in_.api_wait) {
        throw Error("cluster check failed on " + vm_ + " after " +
                        std::to_string(in_.api_wait.count()) + "s: " + failing,
                    FixFor(failing, vm_, boot_log_));
      }
      console_.Progress(api_seen ? "validating: " + failing
                                 : "waiting for the Kubernetes API /readyz",
                        Since(start));
      PauseUnlessInterrupted(in_.poll_interval, "waiting for the Kubernetes API");
    }
  }

  KubeCredentials ReadCredentials() {
    SshRunResult r = shell_.RunAsRoot("read kubeconfig", "cat /etc/rancher/k3s/k3s.yaml", "",
                                      std::chrono::seconds(30));
    if (r.exit_status != 0) {
      throw Error("cannot read /etc/rancher/k3s/k3s.yaml on " + vm_ + ": " +
                      TrimSpace(r.stderr_text),
                  LookHint(vm_, boot_log_));
    }
    return ParseKubeconfig(r.stdout_text);
  }

  /// Direct mode, from this machine: the API port answers, the served certificate covers the
  /// public host (else the installer is re-run once with --public-ip, and the node re-checked),
  /// and /readyz accepts gpuprov's client certificate. Returns the kubeconfig's server URL.
  std::string CheckDirectAccess(KubeCredentials& creds, NodeChecks& checks) {
    const std::string& host = in_.public_ip;
    const std::string where = host + ":" + std::to_string(in_.api_port);
    console_.Step("access", "checking the API at " + where + " from this machine");
    ApiReach& reach = in_.reach != nullptr ? *in_.reach : ApiFromThisMachine();
    if (std::string err = reach.ConnectError(host, in_.api_port); !err.empty()) {
      throw Error("the Kubernetes API port " + std::to_string(kApiPort) + " of " + vm_ +
                      " is not reachable from this machine at " + where + " (" + err +
                      "): a firewall or security group blocks it",
                  "open TCP " + std::to_string(kApiPort) + " to this machine in the cloud's "
                  "firewall for " + vm_ + " (gpuprov asks the driver to open " +
                  DirectModePortsText() + "), then re-run the same `gpuprov provision`; or `gpuprov down " + vm_ +
                  "` and provision with --no-k8s");
    }
    for (bool reran = false;; reran = true) {
      std::vector<std::string> names = reach.CertificateNames(host, in_.api_port, creds.ca_pem);
      if (CertificateCovers(names, host)) break;
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      if (reran) {
        throw Error("the API certificate of " + vm_ + " still does not cover " + host +
                        " after re-running the installer with --public-ip " + host +
                        " (it covers " + list + ")",
                    LookHint(vm_, boot_log_));
      }
      console_.Note("the API certificate does not cover " + host + " (it covers " + list +
                    "; the installer could not learn the public address): re-running the "
                    "installer with --public-ip " + host);
      InstallerArgs rerun = in_.k3s;
      rerun.node_firewall = NodeFirewallFor(in_.plan);
      rerun.public_ip = host;
      rec_.route = "ssh";
      rec_.route_reason = "the installer re-ran with --public-ip: the API certificate did not "
                          "cover " + host + " (" +
                          PublicIpSourceShortfall(in_.k3s.public_ip_source) + ")";
      RunInstaller("re-run installer with the public IP", rerun, "san_rerun");
      checks = WaitAndValidate();
      creds = ReadCredentials();
    }
    const int ready = reach.ReadyzStatus(host, in_.api_port, creds);
    if (ready != 200) {
      throw Error("the Kubernetes API at " + where + " answers /readyz with HTTP " +
                      std::to_string(ready) + " to gpuprov's client certificate",
                  LookHint(vm_, boot_log_));
    }
    return "https://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
           std::to_string(in_.api_port);
  }

  /// Tunnel mode: /readyz through a temporary SSH forward on an ephemeral local port, with the
  /// kubeconfig's credentials. Returns the kubeconfig's server URL (gpuprov tunnel's port).
  std::string CheckTunnelAccess(const KubeCredentials& creds) {
    console_.Step("access", "checking the API through an SSH tunnel");
    PortForwardOptions options;
    options.remote_port = kApiPort;  // listen_port 0: an ephemeral 127.0.0.1 port
    SshPortForward forward(in_.ssh, options);
    forward.Start();
    KubeResponse ready =
        KubeGet("127.0.0.1", forward.port(), creds, "/readyz", std::chrono::seconds(10));
    forward.Stop();
    if (ready.status != 200) {
      throw Error("the Kubernetes API through an SSH tunnel answers /readyz with HTTP " +
                      std::to_string(ready.status),
                  LookHint(vm_, boot_log_));
    }
    return "https://127.0.0.1:" + std::to_string(in_.tunnel_local_port);
  }

  NodeShell& shell_;
  const ClusterInputs& in_;
  VmRecord& rec_;
  std::string previous_route_, previous_route_reason_;  // the record's, before this run
  const std::string& vm_;
  const std::string boot_log_;
  Console& console_;
};

}  // namespace

namespace {

class NetworkApiReach : public ApiReach {
 public:
  std::string ConnectError(const std::string& host, int port) override {
    return TcpConnectError(host, port, std::chrono::seconds(5));
  }
  std::vector<std::string> CertificateNames(const std::string& host, int port,
                                            const std::string& ca_pem) override {
    return ServedCertificateNames(host, port, ca_pem, std::chrono::seconds(10));
  }
  int ReadyzStatus(const std::string& host, int port, const KubeCredentials& creds) override {
    return KubeGet(host, port, creds, "/readyz", std::chrono::seconds(10)).status;
  }
  std::string HandshakeError(const std::string& host, int port,
                             const std::string& ca_pem) override {
    return TlsHandshakeError(host, port, ca_pem, std::chrono::seconds(3));
  }
};

}  // namespace

ApiReach& ApiFromThisMachine() {
  static NetworkApiReach reach;
  return reach;
}

std::string CheckApiClosedAtPublicAddress(ApiReach& reach, const std::string& vm,
                                          const std::string& host, int port,
                                          const std::string& ca_pem) {
  const std::string why = reach.HandshakeError(host, port, ca_pem);
  if (!why.empty()) return "closed: " + why;
  const std::string where = host + ":" + std::to_string(port);
  throw Error("the Kubernetes API of " + vm + " is open to the internet at " + where +
                  " although " + vm + " uses tunnel access (its cloud has no firewall API, so "
                  "the node's own firewall must close every inbound port but SSH)",
              "look at the node firewall: `gpuprov ssh " + vm +
                  " -- sudo systemctl status gpuprov-firewall` and `sudo nft list table inet "
                  "gpuprov`; apply it with `gpuprov ssh " + vm + " -- sudo bash " +
                  kNodeInstallerPath + " --node-firewall ssh-only`, then re-run the same "
                  "`gpuprov provision`. The VM is kept and its API is exposed: `gpuprov down " +
                  vm + "` removes it");
}

std::string GpuWithoutDriverFix(const std::string& vm, const std::string& cloud) {
  const std::string readme = cloud.empty() ? std::string("the driver's README") : DriverReadme(cloud);
  return "use a GPU image of " + (cloud.empty() ? std::string("the cloud") : cloud) +
         ", one with the NVIDIA driver (" + readme + " says which image GPU offers boot; drop "
         "--image or pick such an image), or provision with --nvidia-driver install: the "
         "installer adds the distribution's server driver and gpuprov reboots the VM once. "
         "The VM is kept: `gpuprov down " + vm + "` removes it";
}

BootRoute BootRouteOf(const ClusterPlan& plan) {
  if (!plan.boot_route) return BootRoute::kNone;
  return plan.startup_script ? BootRoute::kStartupScript : BootRoute::kCloudInit;
}

std::string BootLogOf(const ClusterPlan& plan) {
  if (BootRouteOf(plan) != BootRoute::kStartupScript) return kNodeBootLog;
  return std::string(kNodeBootTracePath) + " and the cloud's startup-script log";
}

std::string PlannedSshRouteReason(const ClusterPlan& plan) {
  if (plan.ssh_asked) return "--install-route ssh";
  if (!plan.note.empty()) return "the installer does not fit in the cloud's boot script";
  return "the cloud runs no boot script";
}

std::string DirectModePortsText() {
  ClusterPlan direct;
  direct.direct = true;
  const std::vector<int> ports = PortsToOpen(true, direct);
  std::string out;
  for (size_t i = 0; i < ports.size(); ++i) {
    if (i > 0) out += i + 1 == ports.size() ? " and " : ", ";
    out += std::to_string(ports[i]);
  }
  return out;
}

ClusterResult BringUpCluster(NodeShell& shell, const ClusterInputs& in, VmRecord& rec) {
  return ClusterBringUp(shell, in, rec).Run();
}

}  // namespace gpuprov
