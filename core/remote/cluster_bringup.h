// Cluster bring-up on a VM that answers SSH (docs/design.md §3, second state machine): route
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

#include "cluster_probe.h"
#include "cuda_check.h"
#include "installer_bundle.h"
#include "provision_options.h"
#include "ssh_client.h"
#include "state_store.h"

namespace gpuprov {

class NodeShell;

/// The first local port a tunnel-mode VM gets (`[defaults] tunnel_first_port` overrides); each
/// VM has its own (ChooseTunnelPort, tunnel_command.h), which its kubeconfig names and
/// `gpuprov tunnel` listens on.
inline constexpr int kTunnelLocalPort = 16443;
/// The API server port on the node.
inline constexpr int kApiPort = 6443;

/// How the cluster is reached and installed, chosen before the VM is created.
struct ClusterPlan {
  bool boot_route = false;   // the installer rides in the boot script (user data)
  bool startup_script = false;  // ... run as the cloud's startup script, not by cloud-init
  bool direct = false;       // API at https://<public-ip>:6443; else an SSH tunnel
  std::string boot_script;   // the user data ("" on the SSH route)
  InstallerArgs boot_args;   // what the boot script runs the installer with (boot route)
  std::size_t boot_script_size = 0;  // what the cloud counts of it (BootScript::size)
  std::string note;          // why the SSH route was taken although the cloud runs boot scripts
  bool ssh_asked = false;    // --install-route ssh chose the SSH route
  /// A node of a cluster on a cloud whose firewall leaves the private network between its VMs
  /// unfiltered (check's private_network_unfiltered): the host sets the node's private-peers
  /// firewall over SSH once its private address is known (SetPrivatePeersFirewall).
  bool private_peers = false;
  /// Non-empty: the route asked for cannot be taken on this cloud (--install-route boot where
  /// no boot script runs or the installer does not fit); provision refuses before making
  /// anything.
  std::string refusal;
};

/// The plan for a driver with \a capabilities (GPUPROV_CAP_* bits) and a cloud that accepts
/// \a user_data_limit of boot script; a boot script runs the installer with \a boot_args.
/// \a asked is --install-route: kAuto takes the boot route where the cloud runs a boot script
/// and the installer fits, kSsh never does, kBoot sets refusal where it cannot.
ClusterPlan PlanCluster(std::uint64_t capabilities, const UserDataLimit& user_data_limit,
                        const InstallerArgs& boot_args = {},
                        InstallRoute asked = InstallRoute::kAuto);

/// The node firewall the installer sets up (--node-firewall): "ssh-only" on tunnel access (the
/// cloud has no firewall API, so the node itself closes every inbound port but SSH), "" on direct
/// access (the cloud's firewall is in front, and the installer leaves the node's alone).
std::string NodeFirewallFor(const ClusterPlan& plan);

/// The ports the driver opens: 22 alone, or 22, 6443, 80, 443 for a direct-mode cluster.
std::vector<int> PortsToOpen(bool kubernetes, const ClusterPlan& plan);

/// The ports of a direct-mode cluster as a message says them: "22, 6443, 80 and 443".
std::string DirectModePortsText();

struct KubeCredentials;

/// How bring-up reaches the node's API from this machine in direct mode. The real one
/// (ApiFromThisMachine) opens TCP and TLS connections; tests use a fake.
class ApiReach {
 public:
  virtual ~ApiReach() = default;
  /// "" when host:port accepts a TCP connection, else why not.
  virtual std::string ConnectError(const std::string& host, int port) = 0;
  /// The subjectAltName entries of the certificate served at host:port (chain checked).
  virtual std::vector<std::string> CertificateNames(const std::string& host, int port,
                                                    const std::string& ca_pem) = 0;
  /// The HTTP status of GET /readyz with the kubeconfig's client certificate.
  virtual int ReadyzStatus(const std::string& host, int port, const KubeCredentials& creds) = 0;
  /// "" when a server with a certificate from the cluster CA completes a TLS handshake at
  /// host:port within a few seconds, else why not (refused, timed out, reset).
  virtual std::string HandshakeError(const std::string& host, int port,
                                     const std::string& ca_pem) = 0;
};

/// ApiReach over the network (kube_api_client.h).
ApiReach& ApiFromThisMachine();

/// Tunnel access, from this machine: the node's API must not answer at host:port (its public
/// address). Returns what the record keeps ("closed: connection refused"); throws Error naming
/// the open address, the node firewall to look at and how to fix or remove the VM when a TLS
/// handshake with the cluster's certificate completes there.
std::string CheckApiClosedAtPublicAddress(ApiReach& reach, const std::string& vm,
                                          const std::string& host, int port,
                                          const std::string& ca_pem);

/// The route the probe's decision table follows for \a plan before anything was pushed.
BootRoute BootRouteOf(const ClusterPlan& plan);

/// Where a boot install's own output is on the node: cloud-init's output log, or on the
/// startup-script route the script's trace (the cloud keeps the output where it does).
std::string BootLogOf(const ClusterPlan& plan);

/// What the record's route_reason says for the SSH route chosen by the plan.
std::string PlannedSshRouteReason(const ClusterPlan& plan);

struct ClusterInputs {
  std::string vm_name;
  std::string cloud;              // the driver's name, for hints naming its README
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
  /// Tunnel access: the local port the kubeconfig names (the VM's own, from ChooseTunnelPort).
  int tunnel_local_port = kTunnelLocalPort;
  /// Saves the record after each transition (VmRecord fields route, route_reason,
  /// access_mode, probe, phase_seconds, kubeconfig are kept up to date).
  std::function<void(VmRecord&)> save;
  /// How the API is reached in direct mode; null: ApiFromThisMachine().
  ApiReach* reach = nullptr;
  /// Pause between probes and checks; tests shorten it.
  std::chrono::milliseconds poll_interval{1000};
  /// The CUDA check (cuda_check.h), the last phase on a node with expected_gpus > 0: a pod
  /// requesting the node's GPUs runs cuda_check_image; false (--no-smoke-test): skipped.
  bool cuda_check = true;
  /// The server of a multi-node cluster: the cluster's validation runs the check on every
  /// node at once, once the agents have joined (cluster_provision.h), so bring-up does not.
  bool cuda_check_by_cluster = false;
  std::string cuda_check_image = kDefaultSmokeTestImage;
  std::chrono::seconds cuda_check_wait{300};
  /// Runs once the install is done and k3s runs, before the node is validated; what it throws
  /// fails the bring-up. A cluster's server is re-run there with the cluster's addresses, and
  /// its agents start joining, so the joins overlap the server's validation.
  std::function<void(NodeShell&)> after_install;
};

struct ClusterResult {
  std::string server;  // the kubeconfig's server URL
  int gpus_allocatable = 0;
  bool cuda_check_passed = false;
};

/// The hint for a GPU without a working driver on \a vm of \a cloud: a GPU image of that cloud
/// (its driver's README says which image GPU offers boot), or --nvidia-driver install.
std::string GpuWithoutDriverFix(const std::string& vm, const std::string& cloud);

/// Runs the cluster state machine on the node behind \a shell. Throws Error naming the failed
/// check (the caller keeps the VM). \a record is updated and saved through inputs.save.
ClusterResult BringUpCluster(NodeShell& shell, const ClusterInputs& inputs, VmRecord& record);

}  // namespace gpuprov
