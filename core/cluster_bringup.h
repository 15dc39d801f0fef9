// Cluster bring-up on a VM that answers SSH (design.md section 3, second state machine): route
// by capability, probe, decide, push the installer when needed, wait for the API, validate the
// node, check the access endpoint from this machine, and write the user's kubeconfig.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "installer_bundle.h"
#include "ssh_client.h"
#include "state_store.h"

namespace gpuprov {

class NodeShell;

/// The local port `gpuprov tunnel` listens on, and tunnel-mode kubeconfigs point at.
inline constexpr int kTunnelLocalPort = 16443;
/// The API server port on the node.
inline constexpr int kApiPort = 6443;

/// How the cluster is reached and installed, chosen before the VM is created.
struct ClusterPlan {
  bool boot_route = false;   // the installer rides in the boot script (user data)
  bool direct = false;       // API at https://<public-ip>:6443; else an SSH tunnel
  std::string boot_script;   // the user data ("" on the SSH route)
  std::string note;          // why the SSH route was taken although the cloud runs boot scripts
};

/// The plan for a driver with \a capabilities (GPUPROV_CAP_* bits) and a cloud that accepts
/// \a user_data_limit bytes of boot script; a boot script runs the installer with \a boot_args.
ClusterPlan PlanCluster(std::uint64_t capabilities, std::size_t user_data_limit,
                        const InstallerArgs& boot_args = {});

/// The ports the driver opens: 22 alone, or 22, 6443, 80, 443 for a direct-mode cluster.
std::vector<int> PortsToOpen(bool kubernetes, const ClusterPlan& plan);

/// The ports of a direct-mode cluster as a message says them: "22, 6443, 80 and 443".
std::string DirectModePortsText();

struct ClusterInputs {
  std::string vm_name;
  ClusterPlan plan;
  std::string public_ip;
  int api_port = kApiPort;        // where the node's 6443 is reachable at public_ip
  int expected_gpus = 0;          // GPUs the VM was asked for
  /// The k3s release choice (k3s_* fields) every installer run over SSH passes on, as the boot
  /// script does.
  InstallerArgs k3s;
  SshTarget ssh;                  // for tunnel-mode checks through an SSH forward
  std::chrono::seconds boot_install_wait{900};
  std::chrono::seconds api_wait{600};
  std::filesystem::path kubeconfig_path;
  /// Saves the record after each transition (VmRecord fields route, access_mode, probe,
  /// phase_seconds, kubeconfig are kept up to date).
  std::function<void(VmRecord&)> save;
};

struct ClusterResult {
  std::string server;  // the kubeconfig's server URL
  int gpus_allocatable = 0;
};

/// Runs the cluster state machine on the node behind \a shell. Throws Error naming the failed
/// check (the caller keeps the VM). \a record is updated and saved through inputs.save.
ClusterResult BringUpCluster(NodeShell& shell, const ClusterInputs& inputs, VmRecord& record);

}  // namespace gpuprov
