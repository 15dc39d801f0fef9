// Joining the agents of a multi-node cluster to its server, and validating the cluster
// (docs/multi-node.md). The join token is made by k3s on the server (real k3s writes
// /var/lib/rancher/k3s/server/node-token, https://docs.k3s.io/cli/token); gpuprov reads it over
// SSH and hands it to each agent over SSH on stdin (AgentJoinCommand, installer_bundle.h), so it
// is never on a command line, in a file on this machine, in a log, in user data or in the
// cloud's metadata.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "cloud.h"
#include "state_store.h"

namespace gpuprov {

class NodeShell;

inline constexpr const char* kJoinTokenPath = "/var/lib/rancher/k3s/server/node-token";
/// Between the nodes of a cluster, only what k3s needs (https://docs.k3s.io/installation/
/// requirements#networking): the API, the kubelet and flannel's wireguard-native backend.
const std::vector<PeerPort>& ClusterPeerPorts();

/// The address the other nodes reach a node at: its private one where the cloud has one.
std::string PeerAddress(const VmRecord& rec);

/// Sets the node firewall of node \a name (tunnel access: it admits the peers) to admit exactly
/// \a peers (the installer's --peers-only; a no-op when they are the ones it admits). Throws
/// Error naming \a name, with \a again (the command to run again) in the hint.
void SetNodeFirewallPeers(NodeShell& node, const std::string& name,
                          const std::vector<std::string>& peers, const std::string& again);

/// The shell command (run as root) that makes the node whose private address is \a node_ip
/// admit, from its private network (the network of the interface holding \a node_ip), only
/// answers, ICMP and \a peers on k3s's ports (ClusterPeerPorts), now and at every boot: an
/// nft table gpuprov_peers of its own beside the installer's (a prerouting chain at priority
/// mangle: a packet any table drops is dropped), applied atomically, and a boot unit ordered
/// before k3s. For a cloud whose firewall leaves the private network between its VMs unfiltered
/// (check's private_network_unfiltered: Lambda); other sources stay the cloud firewall's. It is
/// the host's and not the installer's because the installer must fit EC2's user data with the
/// room installer/README.md ("Size") keeps, and this runs over SSH only, once the address is
/// known. Without nft it installs Debian's nftables; exits 3 with a message when no interface
/// holds \a node_ip or nft cannot be had.
std::string PrivatePeersCommand(const std::string& node_ip, const std::vector<std::string>& peers);

/// Runs PrivatePeersCommand on node \a name. Throws Error naming \a name, with \a again (the
/// command to run again) in the hint.
void SetPrivatePeersFirewall(NodeShell& node, const std::string& name, const std::string& node_ip,
                             const std::vector<std::string>& peers, const std::string& again);

/// The server's join token, read over SSH. Throws Error (never quoting what the file holds)
/// when it is missing or not one line in k3s's form (K10<hex>::server:<secret>, or a bare
/// secret as older servers wrote).
std::string ReadJoinToken(NodeShell& server, const std::string& cluster);

/// One node as the cluster's API shows it, matched to a VM by name or address.
struct ClusterNodeStatus {
  std::string vm;         // the VM it belongs to
  std::string node_name;  // the Kubernetes node ("" when the VM has none in the API)
  bool ready = false;
  std::string message;    // the Ready condition's message when not Ready, or why absent
  int gpus_allocatable = 0;
};

/// A VM expected in the cluster: its name and the addresses a node of it may report
/// (InternalIP / ExternalIP).
struct ExpectedNode {
  std::string vm;
  std::vector<std::string> addresses;
};

/// Every VM of \a expected with what /api/v1/nodes (\a nodes_json) says of it: a node whose name
/// is the VM's, else whose addresses include one of the VM's.
std::vector<ClusterNodeStatus> MatchClusterNodes(const std::string& nodes_json,
                                                 const std::vector<ExpectedNode>& expected);

/// "" when every node is Ready with \a gpus_per_node allocatable GPUs (0: none asked), else what
/// is missing, node by node ("train-agent-2: not in the cluster; train-agent-1: not Ready: ...").
std::string ClusterNodesShortfall(const std::vector<ClusterNodeStatus>& nodes, int gpus_per_node);

/// The overlay check (docs/multi-node.md): an echo server pinned to node B behind a Service, a
/// probe pod pinned to node A that connects to it by the Service's DNS name. Their objects as the
/// API takes them (namespace, deployment, service, pod), JSON.
inline constexpr const char* kOverlayNamespace = "gpuprov-system";
inline constexpr const char* kOverlayEcho = "gpuprov-overlay-echo";
inline constexpr const char* kOverlayProbe = "gpuprov-overlay-probe";
inline constexpr const char* kOverlayImage = "registry.k8s.io/e2e-test-images/agnhost:2.47";
std::string OverlayNamespaceJson();
std::string OverlayEchoDeploymentJson(const std::string& node_b);
std::string OverlayEchoServiceJson();
std::string OverlayProbePodJson(const std::string& node_a);

/// The echo Deployment (its JSON) has a ready replica.
bool EchoReady(const std::string& deployment_json);

/// The probe pod's verdict from its JSON: "" while it runs, "ok" when Succeeded, else why it
/// failed (its message, or its container's termination message).
std::string OverlayProbeVerdict(const std::string& pod_json);

/// Runs the overlay check through the server's API (the node's `api` function): applies the
/// echo Deployment and Service, waits for the echo server to be ready, makes the probe pod,
/// waits for its verdict (all within \a wait), deletes the probe pod. Throws Error
/// naming the two nodes and what did not answer.
void RunOverlayCheck(NodeShell& server, const std::string& node_a, const std::string& node_b,
                     std::chrono::seconds wait,
                     std::chrono::milliseconds poll_interval = std::chrono::seconds(1));

}  // namespace gpuprov
