#include "cluster_bringup.h"

#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <sstream>
#include <thread>

#include "cluster_probe.h"
#include "console.h"
#include "elapsed.h"
#include "gpuprov/driver_abi.h"
#include "error.h"
#include "interrupt.h"
#include "kube_api_client.h"
#include "kubeconfig.h"
#include "node_shell.h"
#include "ssh_tunnel.h"

namespace gpuprov {
namespace {

using Clock = std::chrono::steady_clock;

/// Sleeps \a d in small steps so Ctrl-C is noticed.
void Pause(std::chrono::milliseconds d, const std::string& doing) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
    ThrowIfInterrupted(doing);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::string LastLines(const std::string& text, int n) {
  std::string t = TrimSpace(text);
  size_t pos = t.size();
  for (int i = 0; i < n && pos != std::string::npos && pos > 0; ++i) pos = t.rfind('\n', pos - 1);
  return pos == std::string::npos || pos == 0 ? t : t.substr(pos + 1);
}

/// The hint every cluster failure carries: how to look, how to retry, how to remove.
std::string LookHint(const std::string& vm) {
  return "the VM is kept. Look: `gpuprov ssh " + vm + " -- sudo tail -n 50 " + kNodeInstallLog +
         "` (boot log: " + kNodeBootLog + "); retry: the same `gpuprov provision`; remove: "
         "`gpuprov down " + vm + "`";
}

// ---- Node checks: one round trip reads /readyz, the nodes and the CoreDNS deployment. ----

constexpr const char* kNodeChecksCommand = R"CHECKS(
T=/var/lib/rancher/k3s/server/tls
api() { curl -sS --max-time 10 --cacert "$T/server-ca.crt" --cert "$T/client-admin.crt" --key "$T/client-admin.key" "$@"; }
echo '@@readyz@@'
code=$(api -o /dev/null -w '%{http_code}' https://127.0.0.1:6443/readyz 2>/dev/null)
echo "${code:-000}"
echo '@@nodes@@'
api https://127.0.0.1:6443/api/v1/nodes 2>/dev/null
echo
echo '@@coredns@@'
api https://127.0.0.1:6443/apis/apps/v1/namespaces/kube-system/deployments/coredns 2>/dev/null
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
};

Poco::JSON::Object::Ptr ParseJsonObject(const std::string& text) {
  try {
    Poco::JSON::Parser parser;
    return parser.parse(TrimSpace(text)).extract<Poco::JSON::Object::Ptr>();
  } catch (const Poco::Exception&) {
    return nullptr;
  } catch (const std::exception&) {
    return nullptr;
  }
}

int ToInt(const Poco::Dynamic::Var& v) {
  try {
    return v.isString() ? std::stoi(v.extract<std::string>()) : v.convert<int>();
  } catch (...) {
    return 0;
  }
}

NodeChecks ParseNodeChecks(const std::string& output) {
  std::map<std::string, std::string> s = NodeOutputSections(output);
  NodeChecks c;
  c.readyz_code = TrimSpace(s["readyz"]);
  c.api_ready = c.readyz_code == "200";
  if (auto nodes = ParseJsonObject(s["nodes"]); nodes && nodes->isArray("items")) {
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
  if (auto dep = ParseJsonObject(s["coredns"]); dep && dep->has("status")) {
    auto st = dep->getObject("status");
    const int want = dep->has("spec") ? dep->getObject("spec")->optValue<int>("replicas", 1) : 1;
    const int ready = st ? st->optValue<int>("readyReplicas", 0) : 0;
    c.coredns_ready = ready >= 1 && ready >= want;
    c.coredns_text = std::to_string(ready) + "/" + std::to_string(want) + " replicas ready";
  } else {
    c.coredns_text = "deployment not found";
  }
  return c;
}

NodeChecks RunNodeChecks(NodeShell& shell) {
  SshRunResult r = shell.RunAsRoot("cluster checks", kNodeChecksCommand, "", std::chrono::seconds(60));
  return ParseNodeChecks(r.stdout_text);
}

/// The first check that does not pass, as "what: detail"; "" when all pass.
std::string FirstFailingCheck(const NodeChecks& c, int expected_gpus) {
  if (!c.api_ready) return "the Kubernetes API /readyz answers " + c.readyz_code;
  if (!c.node_ready) {
    return "node " + (c.node_name.empty() ? std::string("(none registered)") : c.node_name) +
           " is not Ready" + (c.node_message.empty() ? "" : ": " + c.node_message);
  }
  if (!c.coredns_ready) return "CoreDNS is not ready (" + c.coredns_text + ")";
  if (expected_gpus > 0 && c.gpus_allocatable < expected_gpus) {
    return "nvidia.com/gpu is not allocatable on node " + c.node_name + " (" +
           std::to_string(c.gpus_allocatable) + " of " + std::to_string(expected_gpus) +
           "): the NVIDIA device plugin has not registered the GPUs";
  }
  return "";
}

std::string FixFor(const std::string& failing, const std::string& vm) {
  if (failing.rfind("nvidia.com/gpu", 0) == 0) {
    return "look at the device plugin: `gpuprov ssh " + vm +
           " -- sudo k3s kubectl -n kube-system logs ds/nvidia-device-plugin-daemonset`; " +
           LookHint(vm);
  }
  if (failing.rfind("CoreDNS", 0) == 0) {
    return "look: `gpuprov ssh " + vm + " -- sudo k3s kubectl -n kube-system get pods`; " +
           LookHint(vm);
  }
  if (failing.rfind("node", 0) == 0) {
    return "look: `gpuprov ssh " + vm + " -- sudo journalctl -u k3s -n 50`; " + LookHint(vm);
  }
  return "look: `gpuprov ssh " + vm + " -- sudo journalctl -u k3s -n 50`; " + LookHint(vm);
}

}  // namespace

ClusterPlan PlanCluster(std::uint64_t capabilities, std::size_t user_data_limit) {
  ClusterPlan plan;
  plan.direct = (capabilities & GPUPROV_CAP_OPEN_PORTS) != 0;
  const bool boot = (capabilities & (GPUPROV_CAP_BOOT_CLOUD_INIT | GPUPROV_CAP_BOOT_STARTUP_SCRIPT)) != 0;
  if (!boot) return plan;
  std::optional<BootScript> script = MakeBootScript(InstallerArgs{}, user_data_limit);
  if (!script) {
    plan.note = "the installer does not fit in this cloud's " + std::to_string(user_data_limit) +
                "-byte boot script, even compressed: installing over SSH instead";
    return plan;
  }
  plan.boot_route = true;
  plan.boot_script = script->text;
  return plan;
}

std::vector<int> PortsToOpen(bool kubernetes, const ClusterPlan& plan) {
  if (kubernetes && plan.direct) return {22, kApiPort, 80, 443};
  return {22};
}

ClusterResult BringUpCluster(NodeShell& shell, const ClusterInputs& in, VmRecord& rec) {
  Console& console = Console::Get();
  const std::string& vm = in.vm_name;
  rec.route = in.plan.boot_route ? "boot" : "ssh";
  rec.access_mode = in.plan.direct ? "direct" : "tunnel";
  rec.probe.clear();
  in.save(rec);

  // 1. Probe and decide until the install is done (the decision table, design.md section 3).
  const auto install_start = Clock::now();
  InstallerArgs args;
  if (!in.plan.boot_route) args.public_ip = in.public_ip;  // the boot run asks the metadata service
  bool pushed = false;
  console.Step(in.plan.boot_route ? "checking the k3s install that ran at boot"
                                  : "installing k3s over SSH");
  for (;;) {
    NodeProbe probe = RunNodeProbe(shell);
    ClusterDecision d = DecideClusterAction(probe, in.plan.boot_route && !pushed,
                                            Since(install_start), in.boot_install_wait,
                                            InstallerVersion());
    rec.probe = DescribeNodeProbe(probe);
    rec.probe["decision"] = std::string(ToString(d.action)) + ": " + d.reason;
    if (pushed) rec.probe["pushed_over_ssh"] = "yes";
    in.save(rec);
    console.Debug("probe: " + rec.probe["decision"]);
    if (d.action == ClusterAction::kCheckApi) break;
    if (d.action == ClusterAction::kWait) {
      console.Progress("waiting for the boot install (" + d.reason + ")", Since(install_start));
      Pause(std::chrono::seconds(3), "waiting for the boot install");
      continue;
    }
    if (pushed) {
      throw Error("k3s is not running on " + vm + " after the installer ran over SSH: " + d.reason,
                  LookHint(vm));
    }
    if (in.plan.boot_route) console.Note(d.reason + ": installing over SSH");
    console.Info("running the installer on " + vm + " (log on the node: " + kNodeInstallLog + ")");
    SshRunResult r = shell.RunAsRoot("push installer", InstallerPushCommand(args), InstallerScript(),
                                     std::chrono::minutes(30));
    pushed = true;
    if (r.exit_status != 0) {
      rec.probe["pushed_over_ssh"] = "failed";
      in.save(rec);
      throw Error("the k3s installer failed on " + vm + " (exit " + std::to_string(r.exit_status) +
                      "): " + LastLines(r.stderr_text, 1),
                  LookHint(vm));
    }
  }
  rec.phase_seconds["install"] = SecondsSince(install_start);
  in.save(rec);

  // 2. Wait for the API and validate on the node (bounded, with progress).
  auto wait_and_validate = [&]() -> NodeChecks {
    const auto start = Clock::now();
    bool api_seen = false;
    std::string failing;
    NodeChecks checks;
    for (;;) {
      checks = RunNodeChecks(shell);
      failing = FirstFailingCheck(checks, in.expected_gpus);
      if (failing.empty()) break;
      if (checks.api_ready && !api_seen) {
        api_seen = true;
        rec.phase_seconds["api"] = SecondsSince(start);
        console.Info("Kubernetes API ready; validating the node");
      }
      if (Since(start) >= in.api_wait) {
        throw Error("cluster check failed on " + vm + " after " +
                        std::to_string(in.api_wait.count()) + "s: " + failing,
                    FixFor(failing, vm));
      }
      console.Progress(api_seen ? "validating: " + failing : "waiting for the Kubernetes API /readyz",
                       Since(start));
      Pause(std::chrono::seconds(2), "waiting for the Kubernetes API");
    }
    if (!api_seen) rec.phase_seconds["api"] = SecondsSince(start);
    rec.phase_seconds["validate"] = SecondsSince(start);
    return checks;
  };
  console.Step("waiting for the Kubernetes API and validating the node");
  NodeChecks checks = wait_and_validate();

  // 3. The access endpoint, checked from this machine; the SAN fallback re-runs the installer once.
  const auto access_start = Clock::now();
  auto read_credentials = [&]() {
    SshRunResult r = shell.RunAsRoot("read kubeconfig", "cat /etc/rancher/k3s/k3s.yaml", "",
                                     std::chrono::seconds(30));
    if (r.exit_status != 0) {
      throw Error("cannot read /etc/rancher/k3s/k3s.yaml on " + vm + ": " + TrimSpace(r.stderr_text),
                  LookHint(vm));
    }
    return ParseKubeconfig(r.stdout_text);
  };
  KubeCredentials creds = read_credentials();
  ClusterResult result;
  result.gpus_allocatable = checks.gpus_allocatable;
  if (in.plan.direct) {
    const std::string& host = in.public_ip;
    const std::string where = host + ":" + std::to_string(in.api_port);
    console.Step("checking the API at " + where + " from this machine");
    if (std::string err = TcpConnectError(host, in.api_port, std::chrono::seconds(5)); !err.empty()) {
      throw Error("the Kubernetes API port " + std::to_string(kApiPort) + " of " + vm +
                      " is not reachable from this machine at " + where + " (" + err +
                      "): a firewall or security group blocks it",
                  "open TCP " + std::to_string(kApiPort) + " to this machine in the cloud's "
                  "firewall for " + vm + " (gpuprov asks the driver to open 22, 6443, 80 and 443), "
                  "then re-run the same `gpuprov provision`; or `gpuprov down " + vm +
                  "` and provision with --no-k8s");
    }
    bool reran = false;
    for (;;) {
      std::vector<std::string> names =
          ServedCertificateNames(host, in.api_port, creds.ca_pem, std::chrono::seconds(10));
      if (CertificateCovers(names, host)) break;
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      if (reran) {
        throw Error("the API certificate of " + vm + " still does not cover " + host +
                        " after re-running the installer with --public-ip " + host +
                        " (it covers " + list + ")",
                    LookHint(vm));
      }
      console.Note("the API certificate does not cover " + host + " (it covers " + list +
                   "; the installer could not learn the public address): re-running the "
                   "installer with --public-ip " + host);
      InstallerArgs rerun;
      rerun.public_ip = host;
      SshRunResult r = shell.RunAsRoot("re-run installer with the public IP",
                                       InstallerPushCommand(rerun), InstallerScript(),
                                       std::chrono::minutes(30));
      reran = true;
      rec.probe["san_rerun"] = "yes";
      in.save(rec);
      if (r.exit_status != 0) {
        throw Error("the k3s installer failed on " + vm + " when re-run with --public-ip " + host +
                        " (exit " + std::to_string(r.exit_status) + "): " + LastLines(r.stderr_text, 1),
                    LookHint(vm));
      }
      checks = wait_and_validate();
      creds = read_credentials();
    }
    KubeResponse ready = KubeGet(host, in.api_port, creds, "/readyz", std::chrono::seconds(10));
    if (ready.status != 200) {
      throw Error("the Kubernetes API at " + where + " answers /readyz with HTTP " +
                      std::to_string(ready.status) + " to gpuprov's client certificate",
                  LookHint(vm));
    }
    result.server = "https://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                    ":" + std::to_string(in.api_port);
  } else {
    console.Step("checking the API through an SSH tunnel");
    PortForwardOptions fwd;
    fwd.remote_port = kApiPort;  // listen on an ephemeral 127.0.0.1 port
    SshPortForward forward(in.ssh, fwd);
    forward.Start();
    KubeResponse ready = KubeGet("127.0.0.1", forward.port(), creds, "/readyz", std::chrono::seconds(10));
    forward.Stop();
    if (ready.status != 200) {
      throw Error("the Kubernetes API through an SSH tunnel answers /readyz with HTTP " +
                      std::to_string(ready.status),
                  LookHint(vm));
    }
    result.server = "https://127.0.0.1:" + std::to_string(kTunnelLocalPort);
  }
  rec.phase_seconds["access"] = SecondsSince(access_start);

  // 4. The user's kubeconfig: renamed, pointed at the access endpoint, 0600, atomic.
  WriteKubeconfig(in.kubeconfig_path, RenderKubeconfig(vm, result.server, creds));
  rec.kubeconfig = in.kubeconfig_path.string();
  in.save(rec);
  return result;
}

}  // namespace gpuprov
