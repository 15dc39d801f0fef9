// SPDX-License-Identifier: Apache-2.0
//
// The cluster parts of the driver protocol (ABI 1.5, GPUPROV_CAP_CLUSTER; docs/driver-protocol.md,
// "Clusters"): create's "cluster" object, the open_peer_ports request, and the names and tags
// every cluster-capable driver gives a cluster's members and what it makes for them. Errors in
// a request are DriverError(INVALID_INPUT) naming the field.
#pragma once

#include <Poco/JSON/Object.h>

#include <optional>
#include <string>
#include <vector>

namespace gpuprov::drivers {

/// The tag (label, key) naming a VM's cluster, and the one naming its role in it.
inline constexpr const char* kClusterTag = "gpuprov-cluster";
inline constexpr const char* kRoleTag = "gpuprov-role";

/// One port the nodes of a cluster reach each other on.
struct PeerPort {
  int port = 0;
  std::string protocol;  ///< "tcp" or "udp"
  bool operator==(const PeerPort&) const = default;
};

/// create's "cluster": {"name", "role": "server"|"agent", "peer_ports": [...]}.
struct ClusterRequest {
  std::string name;
  std::string role;
  std::vector<PeerPort> peer_ports;
};

/// The request's "cluster"; nullopt when absent or null (a plain VM). Throws INVALID_INPUT
/// naming the field for a name that is not [a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?, a role other
/// than server or agent, or peer_ports that are not {port 1..65535, protocol tcp|udp} objects.
std::optional<ClusterRequest> ParseCluster(const Poco::JSON::Object::Ptr& request);

/// One node of a cluster as open_peer_ports lists it.
struct Peer {
  std::string id;
  std::string name;
  std::string private_ip;  ///< "" when the cloud gives none
  std::string public_ip;
  /// The address the other peers reach this one at: private where set, else public.
  const std::string& address() const { return private_ip.empty() ? public_ip : private_ip; }
};

/// open_peer_ports: {"cluster", "peer_ports", "peers": [{"id", "name", "private_ip",
/// "public_ip"}]}.
struct PeerPortsRequest {
  std::string cluster;
  std::vector<PeerPort> peer_ports;
  std::vector<Peer> peers;
};
PeerPortsRequest ParsePeerPortsRequest(const std::string& request_json);

/// open_peer_ports on a cloud with no firewall API (primeintellect, verda, massedcompute): checks
/// the request (INVALID_INPUT naming the field) and returns "{}", changing nothing on the cloud.
/// The nodes reach each other at their addresses on every port, and the node firewall the
/// installer sets up (--peer, core/remote/cluster_join.h) admits exactly the peers there.
std::string PeerPortsLeftToNodeFirewall(const std::string& request_json);

/// "gpuprov-<cluster>": the name of what a driver makes for a whole cluster (its private
/// network, its firewall or security group), so gc finds it by the gpuprov- prefix.
std::string ClusterResourceName(const std::string& cluster);

/// "tcp 6443, 10250; udp 51820": peer ports for progress lines.
std::string PeerPortsText(const std::vector<PeerPort>& ports);

}  // namespace gpuprov::drivers
