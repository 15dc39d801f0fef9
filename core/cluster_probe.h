// The cluster probe: one SSH round trip that reads, on the node, the installer's status marker,
// `cloud-init status --format json`, the k3s unit state and GPU presence; and the decision table
// of design.md section 3 that turns what it found into the next action.
#pragma once

#include <chrono>
#include <map>
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
  /// An installer run holds the host-wide lock right now.
  bool installer_running = false;

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
};

/// The probe's shell command (run as root): prints the sections ParseNodeProbe reads.
const std::string& NodeProbeCommand();

/// Parses the probe's output. Throws Error when it is not the probe's output.
NodeProbe ParseNodeProbe(const std::string& output);

/// Runs the probe: exactly one NodeShell round trip.
NodeProbe RunNodeProbe(NodeShell& shell);

/// The probe as a flat map for the state record and `gpuprov list --output json`.
std::map<std::string, std::string> DescribeNodeProbe(const NodeProbe& probe);

enum class ClusterAction {
  kCheckApi,       // installed and k3s running: go to the API check
  kWait,           // the boot install is still running: probe again later
  kPushInstaller,  // push the installer over SSH and run it
};

struct ClusterDecision {
  ClusterAction action;
  std::string reason;  // one line for the user and the record
};

/// The decision table. \a boot_route: the installer was in the boot script. \a waited: how long
/// gpuprov has been waiting for the boot install; \a wait_limit: how long it may.
/// \a installer_version: the version gpuprov carries (an older marker means re-run it).
ClusterDecision DecideClusterAction(const NodeProbe& probe, bool boot_route,
                                    std::chrono::seconds waited, std::chrono::seconds wait_limit,
                                    const std::string& installer_version);

const char* ToString(ClusterAction action);

}  // namespace gpuprov
