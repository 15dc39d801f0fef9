#include "cluster_probe.h"

#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <algorithm>
#include <sstream>

#include "error.h"
#include "installer_bundle.h"
#include "node_shell.h"

namespace gpuprov {
namespace {

// The first section the probe prints: its name says which probe output this is.
constexpr const char* kHeaderSection = "gpuprov-probe 1";

// Sections are delimited by lines "@@<name>@@"; nothing the probe prints starts with "@@".
// Order matters: what says a boot install ended (cloud-init's status, which takes most of a
// second to start, and the startup script's trace) is read before the lock, and the lock just
// before the marker. Read the other way round, a boot install that ends between the two reads
// looks like cloud-init "error" with no marker (a run that never started).
const std::string kProbeScript = std::string("echo '@@") + kHeaderSection + "@@'\n" + R"PROBE(
echo '@@cloud-init@@'
if command -v cloud-init >/dev/null 2>&1; then
  out=$(timeout 20 cloud-init status --format json 2>/dev/null)
  case "$out" in
    '{'*) printf '%s\n' "$out" ;;
    *) timeout 20 cloud-init status 2>/dev/null ;;
  esac
else
  echo absent
fi
echo '@@boot-trace@@'
cat /var/lib/gpuprov/boot-script.status 2>/dev/null
echo
echo '@@lock@@'
if [ -e /run/lock/gpuprov-install.lock ] && command -v flock >/dev/null 2>&1 &&
   ! flock -n /run/lock/gpuprov-install.lock true 2>/dev/null; then echo held; else echo free; fi
echo '@@marker@@'
cat /var/lib/gpuprov/install-status.json 2>/dev/null
echo
echo '@@k3s@@'
if command -v systemctl >/dev/null 2>&1; then systemctl is-active k3s.service 2>/dev/null; fi
echo '@@gpu@@'
if command -v nvidia-smi >/dev/null 2>&1 &&
   gpus=$(timeout 30 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null); then
  printf '%s\n' "$gpus"
else
  gpus=
fi
echo '@@gpu-bus@@'
n=0
for d in "${GPUPROV_SYSFS_ROOT:-/sys}"/bus/pci/devices/*; do
  case "$(cat "$d/vendor" 2>/dev/null):$(cat "$d/class" 2>/dev/null)" in 0x10de:0x03*) n=$((n + 1)) ;; esac
done
echo "pci_nvidia=$n"
if [ -z "$gpus" ]; then
  if ! command -v nvidia-smi >/dev/null 2>&1; then echo "smi_error=nvidia-smi is not installed"
  else echo "smi_error=$(timeout 30 nvidia-smi -L 2>&1 | grep -m 1 .)"; fi
fi
echo '@@init@@'
echo "pid1=$(cat /proc/1/comm 2>/dev/null)"
if [ -d /run/systemd/system ]; then echo systemd_booted=yes; else echo systemd_booted=no; fi
virt=
if command -v systemd-detect-virt >/dev/null 2>&1; then
  virt=$(timeout 10 systemd-detect-virt --container 2>/dev/null)
fi
if [ -z "$virt" ] || [ "$virt" = none ]; then
  if [ -e /.dockerenv ]; then virt=docker
  elif [ -e /run/.containerenv ]; then virt=podman
  else
    virt=$(tr '\0' '\n' </proc/1/environ 2>/dev/null | sed -n 's/^container=//p' | head -n 1)
  fi
fi
echo "container=${virt:-none}"
echo "capeff=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status 2>/dev/null)"
echo "pid1_seconds=$(ps -o etimes= -p 1 2>/dev/null | tr -d ' ')"
echo '@@end@@'
)PROBE";

std::map<std::string, std::string> Sections(const std::string& output) {
  std::map<std::string, std::string> out = NodeOutputSections(output);
  if (!out.count(kHeaderSection) || !out.count("end")) {
    throw Error("the cluster probe's output is incomplete (" + std::to_string(output.size()) +
                    " bytes)",
                "check that the node's shell works: `gpuprov ssh <name> -- true`");
  }
  return out;
}

std::string StringField(const Poco::JSON::Object::Ptr& o, const std::string& key) {
  if (!o || !o->has(key) || o->isNull(key)) return "";
  Poco::Dynamic::Var v = o->get(key);
  return v.isString() ? v.extract<std::string>() : v.toString();
}

void ParseMarker(const std::string& text, NodeProbe& p) {
  const std::string body = TrimSpace(text);
  if (body.empty()) return;
  try {
    Poco::JSON::Parser parser;
    auto o = parser.parse(body).extract<Poco::JSON::Object::Ptr>();
    p.marker_present = true;
    p.marker_version = StringField(o, "installer_version");
    p.marker_phase = StringField(o, "phase");
    p.marker_result = StringField(o, "result");
    p.marker_failed_step = StringField(o, "failed_step");
    p.marker_message = StringField(o, "message");
    p.marker_public_ip = StringField(o, "public_ip");
    p.marker_gpu_configured = o->has("gpu_configured") && o->get("gpu_configured").isBoolean() &&
                              o->getValue<bool>("gpu_configured");
    p.marker_reboot_required = o->has("reboot_required") &&
                               o->get("reboot_required").isBoolean() &&
                               o->getValue<bool>("reboot_required");
    p.marker_fabric_manager = StringField(o, "fabric_manager");
    if (o->has("gpu_seen") && o->isObject("gpu_seen")) {
      p.marker_gpu_driver = StringField(o->getObject("gpu_seen"), "driver");
    }
  } catch (const Poco::Exception&) {
    // A marker being rewritten or damaged: treat it as unreadable (the installer rewrites it).
    p.marker_present = true;
    p.marker_result = "unreadable";
  }
}

// The startup script's trace: "started <time>" and, once it ended, "exit <status>" (the last
// of each kind counts: a script run again at a later boot writes "started" anew).
void ParseBootTrace(const std::string& text, NodeProbe& p) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    line = TrimSpace(line);
    if (line.rfind("started", 0) == 0) {
      p.boot_trace = "started";
    } else if (line.rfind("exit ", 0) == 0 && !p.boot_trace.empty()) {
      try {
        p.boot_trace_exit = std::stoi(line.substr(5));
        p.boot_trace = "exited";
      } catch (const std::exception&) {
      }
    }
  }
}

void ParseCloudInit(const std::string& text, NodeProbe& p) {
  const std::string body = TrimSpace(text);
  if (body.empty() || body == "absent") {
    p.cloud_init = "absent";
    return;
  }
  if (body[0] == '{') {
    try {
      Poco::JSON::Parser parser;
      auto o = parser.parse(body).extract<Poco::JSON::Object::Ptr>();
      p.cloud_init = StringField(o, "status");
      std::string detail;
      if (o->has("errors") && o->isArray("errors")) {
        for (const auto& e : *o->getArray("errors")) {
          if (!detail.empty()) detail += "; ";
          detail += e.toString();
        }
      }
      if (detail.empty()) detail = StringField(o, "boot_status_code");
      p.cloud_init_detail = detail;
      if (!p.cloud_init.empty()) return;
    } catch (const Poco::Exception&) {
    }
  }
  // Text form: "status: done".
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("status:", 0) == 0) {
      p.cloud_init = TrimSpace(line.substr(7));
      return;
    }
  }
  p.cloud_init = "unknown";
}

// The "gpu-bus" section: pci_nvidia=N and, when nvidia-smi gave no GPU, smi_error=<line>.
void ParseGpuBus(const std::string& text, NodeProbe& p) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("pci_nvidia=", 0) == 0) {
      try {
        p.pci_nvidia = std::stoi(line.substr(11));
      } catch (const std::exception&) {
        // Not a number: leave it unknown.
      }
    } else if (line.rfind("smi_error=", 0) == 0) {
      p.gpu_error = TrimSpace(line.substr(10));
    }
  }
}

// The "init" section: key=value lines (pid1, systemd_booted, container, capeff).
void ParseInit(const std::string& text, NodeProbe& p) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = TrimSpace(line.substr(0, eq));
    const std::string value = TrimSpace(line.substr(eq + 1));
    if (key == "pid1") {
      p.pid1 = value;
    } else if (key == "systemd_booted" && (value == "yes" || value == "no")) {
      p.systemd_booted = value == "yes";
    } else if (key == "container") {
      p.container = value;
    } else if (key == "pid1_seconds" && !value.empty()) {
      try {
        size_t used = 0;
        const long secs = std::stol(value, &used);
        if (used == value.size() && secs >= 0) p.booted_seconds = secs;
      } catch (const std::exception&) {
        // Not a number: leave it unknown.
      }
    } else if (key == "capeff" && !value.empty()) {
      try {
        size_t used = 0;
        const unsigned long long caps = std::stoull(value, &used, 16);
        constexpr unsigned long long kCapSysAdmin = 1ULL << 21;
        if (used == value.size()) p.cap_sys_admin = (caps & kCapSysAdmin) != 0;
      } catch (const std::exception&) {
        // Not hex: leave it unknown.
      }
    }
  }
}

}  // namespace

const std::string& NodeProbeCommand() { return kProbeScript; }

NodeProbe ParseNodeProbe(const std::string& output) {
  std::map<std::string, std::string> s = Sections(output);
  NodeProbe p;
  ParseMarker(s["marker"], p);
  p.installer_running = TrimSpace(s["lock"]) == "held";
  ParseBootTrace(s["boot-trace"], p);
  ParseCloudInit(s["cloud-init"], p);
  p.k3s_unit = TrimSpace(s["k3s"]);
  std::istringstream gpus(s["gpu"]);
  std::string line;
  while (std::getline(gpus, line)) {
    line = TrimSpace(line);
    if (line.empty()) continue;
    if (p.gpu_name.empty()) p.gpu_name = line;
    ++p.gpu_count;
  }
  p.gpu_present = p.gpu_count > 0;
  ParseGpuBus(s["gpu-bus"], p);
  ParseInit(s["init"], p);
  return p;
}

NodeProbe RunNodeProbe(NodeShell& shell) {
  SshRunResult r = shell.RunAsRoot("probe", kProbeScript, "", std::chrono::seconds(90));
  if (r.exit_status != 0 && r.stdout_text.find("@@end@@") == std::string::npos) {
    throw Error("the cluster probe failed on the node (exit " + std::to_string(r.exit_status) +
                    "): " + TrimSpace(r.stderr_text),
                "the SSH user needs root or passwordless sudo on the node");
  }
  return ParseNodeProbe(r.stdout_text);
}

std::map<std::string, std::string> DescribeNodeProbe(const NodeProbe& p) {
  std::map<std::string, std::string> m;
  m["marker"] = p.marker_present ? p.marker_result + " (installer " + p.marker_version +
                                       ", phase " + p.marker_phase + ")"
                                 : "absent";
  m["installer_running"] = p.installer_running ? "yes" : "no";
  m["cloud_init"] = p.cloud_init;
  if (!p.boot_trace.empty()) {
    m["boot_script"] = p.boot_trace == "exited" ? "exit " + std::to_string(p.boot_trace_exit)
                                                : p.boot_trace;
  }
  m["k3s_unit"] = p.k3s_unit.empty() ? "unknown" : p.k3s_unit;
  m["gpu"] = p.gpu_present ? p.gpu_name + " x" + std::to_string(p.gpu_count) : "none";
  if (p.pci_nvidia) m["gpu_pci"] = std::to_string(*p.pci_nvidia);
  if (!p.gpu_present && !p.gpu_error.empty()) m["gpu_error"] = p.gpu_error;
  if (!p.marker_gpu_driver.empty()) m["gpu_driver"] = p.marker_gpu_driver;
  if (!p.marker_fabric_manager.empty()) m["fabric_manager"] = p.marker_fabric_manager;
  if (p.marker_reboot_required) m["reboot_required"] = "yes";
  if (!p.pid1.empty()) m["pid1"] = p.pid1;
  if (!p.container.empty()) m["container"] = p.container;
  return m;
}

const char* ToString(ClusterAction action) {
  switch (action) {
    case ClusterAction::kCheckApi: return "check-api";
    case ClusterAction::kWait: return "wait";
    case ClusterAction::kPushInstaller: return "push-installer";
    case ClusterAction::kFail: return "fail";
    case ClusterAction::kReboot: return "reboot";
  }
  return "?";
}

std::string CannotHostK3s(const NodeProbe& p) {
  const bool in_container = !p.container.empty() && p.container != "none";
  const std::string what = in_container ? "a " + p.container + " container, not a VM" : "";
  const bool pid1_not_systemd = !p.pid1.empty() && p.pid1 != "systemd" && p.pid1 != "init";
  if (p.systemd_booted == false || pid1_not_systemd) {
    std::string why = "systemd is not PID 1";
    if (!p.pid1.empty()) why += " (PID 1 is " + p.pid1 + (what.empty() ? "" : "; " + what) + ")";
    else if (!what.empty()) why += " (" + what + ")";
    return why + ", and k3s runs as a systemd service";
  }
  if (in_container && p.cap_sys_admin == false) {
    return "it is an unprivileged " + p.container +
           " container (no CAP_SYS_ADMIN), where k3s cannot run containers";
  }
  return "";
}

namespace {

std::string Seconds(std::chrono::seconds s) { return std::to_string(s.count()) + "s"; }

/// A GPU without a working driver (GpuWithoutDriver), once there is something to go by: not
/// while an installer runs, and on a boot route not before the boot install wrote its marker
/// (the image's own first-boot services may still load a driver). Without --nvidia-driver
/// install: fail. With it: reboot when the installer added a driver this boot, fail when the
/// installer says its driver did not load after the reboot, else let the installer run.
std::optional<ClusterDecision> DecideGpuWithoutDriver(const NodeProbe& p, BootRoute route,
                                                      bool driver_install) {
  const std::string what = GpuWithoutDriver(p);
  if (what.empty() || p.installer_running) return std::nullopt;
  if (route != BootRoute::kNone && !p.marker_present) return std::nullopt;
  const ClusterDecision fail = {ClusterAction::kFail, what,
                                ClusterDecision::Cause::kGpuWithoutDriver};
  if (p.marker_reboot_required) {
    return ClusterDecision{ClusterAction::kReboot,
                           "the NVIDIA driver the installer added loads after a reboot"};
  }
  if (!driver_install) return fail;
  if (p.marker_result == "failed" && p.marker_failed_step == "gpu-detect") {
    return ClusterDecision{fail.action, what + ": " + p.marker_message, fail.cause};
  }
  return std::nullopt;
}

/// A boot install that failed by its own marker, on either boot route: the marker says
/// failed, or "running" with the lock free (the run died), or cannot be read with the lock
/// free. nullopt otherwise.
/// "the boot install is running (<phase>)", with what it waits for when its marker says so (the
/// installer's message while it waits for apt's lock).
std::string BootInstallRunning(const NodeProbe& p) {
  return "the boot install is running (" + p.marker_phase +
         (p.marker_message.empty() ? "" : ": " + p.marker_message) + ")";
}

std::optional<ClusterDecision> FailedBootInstall(const NodeProbe& p) {
  if (!p.marker_present) return std::nullopt;
  if (p.marker_result == "failed") {
    std::string why = "the boot install failed";
    if (!p.marker_failed_step.empty()) why += " at step " + p.marker_failed_step;
    if (!p.marker_message.empty()) why += ": " + p.marker_message;
    return ClusterDecision{ClusterAction::kPushInstaller, why};
  }
  if (p.installer_running) return std::nullopt;
  if (p.marker_result == "running") {
    return ClusterDecision{ClusterAction::kPushInstaller,
                           "the boot install stopped in step " + p.marker_phase};
  }
  if (p.marker_result == "unreadable") {
    return ClusterDecision{ClusterAction::kPushInstaller, "the install status marker is unreadable"};
  }
  return std::nullopt;
}

/// The startup-script route once nothing is installed (docs/design.md §3's rows without
/// cloud-init; `cloud-init status` is not read: the startup script is not cloud-init's run).
/// What tells, in order:
///   - the installer holds its lock: still running (wait, up to the limit);
///   - the marker says failed, or "running" with the lock free (the run died): failed (push);
///   - the trace says the script ended with a non-zero status before any marker: failed
///     (push), naming the status; ended with 0 and no marker: it ran, but not the installer;
///   - the trace says started and not ended, no marker: the script is still writing the
///     installer (wait, up to the limit);
///   - no trace, no marker, no lock: not started yet while the node has been up less than
///     the start window (kStartupScriptStartWindow, capped by the wait limit) and the wait
///     is not over; after that it never ran (push). A script that fails before its first
///     line is indistinguishable from one that never ran, and is said so.
ClusterDecision DecideStartupScript(const NodeProbe& p, std::chrono::seconds waited,
                                    std::chrono::seconds wait_limit) {
  if (std::optional<ClusterDecision> failed = FailedBootInstall(p)) return *failed;
  const bool over = waited >= wait_limit;
  const ClusterDecision still_running = {
      ClusterAction::kPushInstaller, "the boot install is still running after " + Seconds(wait_limit)};
  if (p.installer_running) {
    if (over) return still_running;
    return {ClusterAction::kWait, BootInstallRunning(p)};
  }
  if (p.boot_trace == "exited") {
    if (p.boot_trace_exit != 0) {
      return {ClusterAction::kPushInstaller,
              "the startup script failed (exit " + std::to_string(p.boot_trace_exit) +
                  ") before the installer wrote its status"};
    }
    return {ClusterAction::kPushInstaller,
            "the startup script ended without installing (no status marker)"};
  }
  if (p.boot_trace == "started") {
    if (over) return still_running;
    return {ClusterAction::kWait, "the startup script is running"};
  }
  const std::chrono::seconds window = std::min(kStartupScriptStartWindow, wait_limit);
  const bool young = p.booted_seconds && std::chrono::seconds(*p.booted_seconds) < window;
  if (!over && (young || (!p.booted_seconds && waited < window))) {
    return {ClusterAction::kWait, "the startup script has not started yet"};
  }
  const std::string after = p.booted_seconds ? std::to_string(*p.booted_seconds) + "s after boot"
                                             : "after " + Seconds(waited);
  return {ClusterAction::kPushInstaller,
          "the boot install never ran (no trace of the startup script " + after +
              ": it did not run, or failed before its first line)"};
}

}  // namespace

std::string GpuWithoutDriver(const NodeProbe& p) {
  if (p.gpu_present || p.marker_gpu_configured || !p.pci_nvidia || *p.pci_nvidia <= 0) return "";
  return std::to_string(*p.pci_nvidia) +
         " NVIDIA GPU(s) on the PCI bus but no working NVIDIA driver (nvidia-smi: " +
         (p.gpu_error.empty() ? std::string("no GPU listed") : p.gpu_error) + ")";
}

ClusterDecision DecideClusterAction(const NodeProbe& p, BootRoute route,
                                    std::chrono::seconds waited, std::chrono::seconds wait_limit,
                                    const std::string& installer_version, bool driver_install) {
  // Nothing to wait for and nothing to push on a node that cannot run k3s at all.
  if (std::string why = CannotHostK3s(p); !why.empty()) {
    return {ClusterAction::kFail, "this node cannot host k3s: " + why};
  }
  if (auto d = DecideGpuWithoutDriver(p, route, driver_install)) return *d;
  const bool installed = p.marker_present && p.marker_result == "ok";
  // The installer writes its marker only while it holds the lock: a "running" marker with the
  // lock free is a run that died.
  const bool running = p.installer_running;
  // A GPU the last run did not set up: re-run to add the runtime and the device plugin.
  if (installed && !running && p.gpu_present && !p.marker_gpu_configured) {
    return {ClusterAction::kPushInstaller,
            "a GPU (" + p.gpu_name + ") appeared that the last install did not see"};
  }
  if (installed && !running && p.marker_version != installer_version) {
    return {ClusterAction::kPushInstaller, "the node's installer is version " + p.marker_version +
                                               ", this gpuprov carries " + installer_version};
  }
  if (installed && !running && p.k3s_unit == "active") {
    return {ClusterAction::kCheckApi, "installed, k3s running"};
  }
  if (installed && !running) {
    return {ClusterAction::kPushInstaller,
            "installed, but k3s is " + (p.k3s_unit.empty() ? "not running" : p.k3s_unit)};
  }
  if (route == BootRoute::kNone) {
    // SSH route: the installer waits for any run in progress (host-wide lock) and is idempotent.
    return {ClusterAction::kPushInstaller,
            running ? "an install is running; the pushed run waits for it" : "not installed yet"};
  }
  if (route == BootRoute::kStartupScript) return DecideStartupScript(p, waited, wait_limit);
  // Boot route through cloud-init.
  const bool boot_pending = running || p.cloud_init == "running" ||
                            p.cloud_init == "not started" || p.cloud_init == "not run";
  if (std::optional<ClusterDecision> failed = FailedBootInstall(p)) return *failed;
  if (boot_pending) {
    if (waited < wait_limit) {
      return {ClusterAction::kWait, running ? BootInstallRunning(p)
                                            : "cloud-init is " + p.cloud_init};
    }
    return {ClusterAction::kPushInstaller, "the boot install is still running after " +
                                               std::to_string(wait_limit.count()) + "s"};
  }
  if (p.cloud_init == "absent" || p.cloud_init == "disabled") {
    return {ClusterAction::kPushInstaller, "the boot install never ran (cloud-init " +
                                               p.cloud_init + ")"};
  }
  if (p.cloud_init == "error") {
    return {ClusterAction::kPushInstaller,
            "the boot script failed (cloud-init error" +
                (p.cloud_init_detail.empty() ? std::string(")") : ": " + p.cloud_init_detail + ")")};
  }
  return {ClusterAction::kPushInstaller,
          "the boot install never ran (cloud-init " + p.cloud_init + ", no status marker)"};
}

}  // namespace gpuprov
