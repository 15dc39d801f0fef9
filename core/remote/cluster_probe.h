// The cluster probe: one SSH round trip that reads, on the node, the installer's status marker,
// the startup script's trace, `cloud-init status --format json`, the k3s unit state, GPU
// presence and whether the node can host k3s at all (systemd as PID 1, not an unprivileged
// container); and the decision table of docs/design.md §3 that turns what it found into the
// next action.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

namespace gpuprov {

class NodeShell;

/// What one probe found.
struct NodeProbe {
  // The installer's status marker (/var/lib/gpuprov/install-status.json).
  bool marker_present = false;
  std::string marker_version;      // installer_version
  std::string marker_phase;        // the step it was in or failed at
  std::string marker_result;       // running | ok | failed
  std::string marker_failed_step;  // "" unless failed
  std::string marker_message;      // "" or why it failed
  bool marker_gpu_configured = false;  // the run set up the NVIDIA runtime and device plugin
  std::string marker_public_ip;
  /// gpu_seen.driver: ok | missing | failing | reboot-needed | none ("" from older installers).
  std::string marker_gpu_driver;
  bool marker_reboot_required = false;  // a driver was installed; it loads at the next boot
  std::string marker_fabric_manager;    // NVSwitch machines: active | started; "" otherwise
  /// An installer run holds the host-wide lock right now.
  bool installer_running = false;

  // The startup script's own trace (kNodeBootTracePath; only startup-script boot scripts
  // write it): "" absent, "started" (running, or killed before its end), "exited".
  std::string boot_trace;
  int boot_trace_exit = 0;  // the exit status when boot_trace is "exited"

  // cloud-init: "absent" (not installed), or its status word: "not started" (older releases:
  // "not run"), "running", "done", "error", "disabled".
  std::string cloud_init = "absent";
  std::string cloud_init_detail;  // errors, or the boot_status_code, for messages

  // systemctl is-active k3s: active | activating | inactive | failed | ... ("" when unknown).
  std::string k3s_unit;

  // nvidia-smi on the node.
  bool gpu_present = false;
  std::string gpu_name;
  int gpu_count = 0;
  /// NVIDIA GPUs on the PCI bus (${GPUPROV_SYSFS_ROOT:-/sys}), driver or not; nullopt when the
  /// probe did not say.
  std::optional<int> pci_nvidia;
  std::string gpu_error;  // why nvidia-smi gave no GPU: its first line, or "not installed"

  // What runs the node ("" / nullopt: the probe did not say, as older probes did not).
  std::string pid1;                    // /proc/1/comm: "systemd" on a VM, "sshd" in a RunPod-like container
  std::optional<bool> systemd_booted;  // /run/systemd/system exists (systemd's own sd_booted test)
  std::string container;               // "none" on a VM, else "docker", "lxc", "podman", ...
  std::optional<bool> cap_sys_admin;   // root on the node holds CAP_SYS_ADMIN (CapEff bit 21)
  /// Seconds since PID 1 started: since boot on a VM, since the container started in a test VM
  /// (where /proc/uptime would be the host's). nullopt when the probe could not tell.
  std::optional<long> booted_seconds;
};

/// The probe's shell command (run as root): prints the sections ParseNodeProbe reads.
const std::string& NodeProbeCommand();

/// Parses the probe's output. Throws Error when it is not the probe's output.
NodeProbe ParseNodeProbe(const std::string& output);

/// Runs the probe: exactly one NodeShell round trip.
NodeProbe RunNodeProbe(NodeShell& shell);

/// The probe as a flat map for the state record and `gpuprov list --output json`.
std::map<std::string, std::string> DescribeNodeProbe(const NodeProbe& probe);

/// How the installer was meant to reach the node, which decides what tells a boot install
/// that is still to come from one that never ran.
enum class BootRoute {
  kNone,           // SSH route: nothing ran at boot; the installer is pushed
  kCloudInit,      // cloud-init user data: `cloud-init status` says whether the boot ran
  kStartupScript,  // the cloud's startup script: no cloud-init run to ask; the script's trace
                   // (kNodeBootTracePath) and the time since boot tell
};

/// On the startup-script route, a boot script that has left no trace this long after boot
/// never ran: clouds start it in the first moments of the first boot, and its first line
/// writes the trace. Capped by the boot install wait (boot_install_wait_seconds).
inline constexpr std::chrono::seconds kStartupScriptStartWindow{300};

enum class ClusterAction {
  kCheckApi,       // installed and k3s running: go to the API check
  kWait,           // the boot install is still running: probe again later
  kPushInstaller,  // push the installer over SSH and run it
  kFail,           // the node cannot host k3s (no systemd as PID 1, an unprivileged container),
                   // or has a GPU without a working driver
  kReboot,         // reboot the node: a driver the installer added loads at boot
};

struct ClusterDecision {
  ClusterAction action;
  std::string reason;  // one line for the user and the record
  /// kFail: what the failure is about, so the caller gives the matching hint.
  enum class Cause { kCannotHostK3s, kGpuWithoutDriver } cause = Cause::kCannotHostK3s;
};

/// "" when the probe found no NVIDIA GPU on the PCI bus without a working driver; else that
/// fact in one line ("2 NVIDIA GPU(s) on the PCI bus but no working NVIDIA driver (nvidia-smi:
/// ...)"). A GPU a run configured before (its driver loading late) does not count.
std::string GpuWithoutDriver(const NodeProbe& probe);

/// Why the node cannot host k3s ("" when it can, or the probe did not say): systemd is not
/// PID 1, or it is a container without CAP_SYS_ADMIN. The installer runs k3s as a systemd unit.
std::string CannotHostK3s(const NodeProbe& probe);

/// The decision table. A node that cannot host k3s fails at once, whatever else was found.
/// \a route: how the installer was meant to arrive (kNone once it was pushed). \a waited: how
/// long gpuprov has been waiting for the boot install; \a wait_limit: how long it may.
/// \a installer_version: the version gpuprov carries (an older marker means re-run it).
/// \a driver_install: --nvidia-driver install (a GPU without a driver gets one, then a reboot);
/// without it such a GPU fails at once, once the install (or, on a boot route, the boot
/// install's marker) has spoken.
ClusterDecision DecideClusterAction(const NodeProbe& probe, BootRoute route,
                                    std::chrono::seconds waited, std::chrono::seconds wait_limit,
                                    const std::string& installer_version,
                                    bool driver_install = false);

const char* ToString(ClusterAction action);

}  // namespace gpuprov
