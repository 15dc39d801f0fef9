#include "provision_report.h"

#include <algorithm>
#include <sstream>

#include "console.h"
#include "kubeconfig.h"
#include "ttl.h"
#include "vm_ports.h"
#include "vm_records.h"

namespace gpuprov {

std::string PhaseTimes(const std::map<std::string, double>& seconds) {
  std::string out;
  for (const char* phase : {"create", "ssh", "install", "api", "validate", "access", "cuda"}) {
    auto it = seconds.find(phase);
    if (it == seconds.end()) continue;
    std::ostringstream one;
    one.precision(1);
    one << std::fixed << it->second;
    out += (out.empty() ? "" : ", ") + std::string(phase) + " " + one.str() + " s";
  }
  return out;
}

std::string ReadySummary(const ProvisionOutcome& o) {
  std::ostringstream out;
  out << "VM " << o.record.name << " is ready on " << o.record.cloud << " at " << o.record.public_ip
      << " (ssh port " << o.record.ssh_port << ", user " << o.record.ssh_user << ").\n"
      << "  shell:   gpuprov ssh " << o.record.name << "\n"
      << "  command: gpuprov ssh " << o.record.name
      << (o.record.gpus.empty() ? " -- uname -a\n" : " -- nvidia-smi\n")
      << "  remove:  gpuprov down " << o.record.name << "\n";
  if (const auto left = TtlSecondsLeft(o.record, std::chrono::system_clock::now())) {
    out << "  ttl:     the VM powers itself off at " << o.record.ttl_deadline << " (in "
        << FormatDuration(*left) << "); `gpuprov ttl " << o.record.name << " 2h` extends\n";
  }
  if (o.record.idle_ttl_seconds > 0) {
    out << "  idle:    the VM powers itself off after " << FormatDuration(o.record.idle_ttl_seconds)
        << " idle (no SSH session, no GPU pod, GPUs below 5%)\n";
  }
  if (o.k8s.enabled) {
    const std::string route = o.record.route + " route" +
                              (o.record.route_reason.empty() ? "" : ": " + o.record.route_reason);
    out << "Kubernetes (k3s) is ready on " << o.record.name << ": node Ready, CoreDNS ready"
        << (o.cluster.gpus_allocatable > 0
                ? ", nvidia.com/gpu: " + std::to_string(o.cluster.gpus_allocatable)
                : std::string())
        << (o.cluster.cuda_check_passed ? ", CUDA check passed" : "")
        << " (" << route << (o.record.route_reason.empty() ? ", " : "; ") << o.record.access_mode
        << " access; " << PhaseTimes(o.record.phase_seconds) << ").\n"
        << "  kubeconfig: " << o.record.kubeconfig << " (context " << KubeContextName(o.record.name)
        << ")\n";
    if (!o.merged_into.empty()) {
      out << "  merged:     into " << o.merged_into << "; kubectl --context "
          << KubeContextName(o.record.name) << " get nodes\n";
    } else {
      out << "  use:        export KUBECONFIG=" << o.record.kubeconfig
          << ":${KUBECONFIG:-~/.kube/config}; kubectl get nodes\n"
          << "  or merge:   gpuprov kubeconfig " << o.record.name << " --merge [--switch]\n";
    }
    if (o.record.access_mode == "tunnel") {
      out << "  tunnel:     gpuprov tunnel " << o.record.name
          << "   (keep it running: kubectl reaches " << o.cluster.server << " through SSH)\n";
    }
  }
  return out.str();
}

void ReportProvision(const AppContext& app, const ProvisionOutcome& o) {
  Console& console = Console::Get();
  if (!o.k8s.note.empty()) console.Note(o.k8s.note);
  if (!o.tried.empty()) {
    std::string tried = o.tried;
    if (tried.back() == '\n') tried.pop_back();
    console.Note("candidates tried before " + o.record.cloud + " and why they failed:\n" + tried);
  }
  if (app.json_output) {
    // The cloud's word for the VM, as `gpuprov list` (which asks the cloud) shows it.
    app.Print(VmRecordObject(o.record, o.vm_state.empty() ? o.record.phase : o.vm_state));
    return;
  }
  console.Result(ReadySummary(o));
  if (o.k8s.enabled && o.record.access_mode == "direct") {
    PortSources sources;
    sources.allow_from = o.record.allow_from;
    sources.narrowed_ports = o.record.allow_from_ports;
    std::vector<int> world;
    for (int p : o.record.open_ports) {
      if (!sources.narrows() ||
          std::find(sources.narrowed_ports.begin(), sources.narrowed_ports.end(), p) ==
              sources.narrowed_ports.end()) {
        world.push_back(p);
      }
    }
    const bool api_narrowed =
        sources.narrows() && std::find(sources.narrowed_ports.begin(), sources.narrowed_ports.end(),
                                       kApiPort) != sources.narrowed_ports.end();
    if (!api_narrowed) {
      console.Warning("the Kubernetes API of " + o.record.name + " is exposed to the internet at " +
                      o.cluster.server + " (ports " + PortsText(world) +
                      " are open to 0.0.0.0/0); the kubeconfig is a secret: whoever holds it "
                      "controls the cluster. --allow-from CIDR (or allow_from in config.toml) "
                      "narrows 6443, 80 and 443 to your networks; --no-k8s gives a plain VM "
                      "with only SSH open");
    } else {
      console.Note(
          "the Kubernetes API of " + o.record.name + " at " + o.cluster.server + ": ports " +
          SourcesText(sources) +
          (world.empty() ? std::string() : "; " + PortsText(world) + " open to 0.0.0.0/0") +
          "; the kubeconfig is a secret: whoever holds it controls the cluster");
    }
  }
}

}  // namespace gpuprov
