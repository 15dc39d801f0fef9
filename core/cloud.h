// Cloud: a typed C++ face over one initialised driver. It builds the JSON requests of
// docs/driver-protocol.md, parses the results into structs, and leaves transport (the C ABI) to
// Driver.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "driver_host.h"
#include "gpu_request.h"

namespace gpuprov {

struct Config;

struct CloudVm {
  std::string id;
  std::string name;
  std::string state;  // pending | running | stopped | terminated | error | preempted
  std::string public_ip;
  int ssh_port = 22;
  std::string ssh_user;
  std::string region;
  std::string instance_type;
  std::string message;  // with "preempted": the cloud's reason
  bool spot = false;    // a spot (preemptible) VM (GPUPROV_CAP_SPOT)
  std::map<int, int> ports;  // node port -> reachable port at public_ip
  /// ABI 1.5 (GPUPROV_CAP_CLUSTER): the address on the cluster's private network ("" when the
  /// cloud gives none), and the cluster and role the VM is tagged with ("" when none).
  std::string private_ip;
  std::string cluster;
  std::string role;
};

/// A port the nodes of a cluster open to each other (docs/driver-protocol.md, "cluster").
struct PeerPort {
  int port = 0;
  std::string protocol;  // "tcp" | "udp"
};

/// What create is told of a cluster node: the cluster, the node's role, the peer ports.
struct ClusterCreateFields {
  std::string name;
  std::string role;  // "server" | "agent"
  std::vector<PeerPort> peer_ports;
};

/// A node of a cluster as open_peer_ports is told of it.
struct ClusterPeer {
  std::string id;
  std::string name;
  std::string private_ip;
  std::string public_ip;
};

struct CloudOffer {
  std::string instance_type;
  std::string gpu_type;
  int gpu_count = 0;
  std::string region;
  double price_per_hour = 0;
  /// "live" (the cloud's API said it now) or "table" (the driver's own list); "" unknown.
  std::string price_source;
  /// With "table": the day the driver's table was written (YYYY-MM-DD); "" when not said.
  std::string price_date;
  /// The cloud says it is in stock now (true) or not (false); nullopt: it does not say.
  std::optional<bool> in_stock;
  /// USD per hour of the same offer as a spot (preemptible) VM; nullopt when the cloud sells
  /// it only on demand or the driver does not say.
  std::optional<double> spot_price_per_hour;
  /// Memory of one GPU in GB, as the driver says; nullopt when it does not.
  std::optional<int> gpu_memory_gb;
  /// The offers result's powered_off_cost: "none", "disk", "full"; "" when the driver does
  /// not say (ttl.h).
  std::string powered_off_cost;
  /// Set by PricedAsSpot (spot.h): the on-demand price, price_per_hour being the spot one.
  double on_demand_price_per_hour = 0;
};

/// Something on the cloud that carries gpuprov's marks (ABI 1.2 list_resources).
struct CloudResource {
  std::string kind;  // "vm", "ssh_key", "firewall", "security_group", "disk", ...
  std::string id;    // what delete_resource takes with the kind
  std::string name;
  /// The gpuprov VMs it belongs to: one for most; the users of a shared one (an SSH key);
  /// empty when it belongs to none any more. Sorted.
  std::vector<std::string> vm_names;
  std::string region;
  std::string created_at;                // RFC 3339; "" when the cloud does not say
  std::optional<double> price_per_hour;  // USD; nullopt when the cloud does not say
  /// What belongs to a cluster (ABI 1.5: its nodes' VMs, cluster_network, cluster_firewall):
  /// the cluster (its server's VM name), and for a VM its role ("server", "agent"); "" for
  /// anything else or a driver that does not say.
  std::string cluster;
  std::string role;
};

/// How much boot script (user data) a cloud takes: check's "user_data_limit" bytes, counted after
/// gzip when check says "user_data_gzip": true (the driver sends the script gzipped and
/// cloud-init unpacks it: "Content found to be gzip compressed will be uncompressed",
/// https://cloudinit.readthedocs.io/en/latest/explanation/format.html). Drivers that do not say
/// get the smallest limit among the clouds (EC2's 16 KB), counted raw.
struct UserDataLimit {
  std::size_t bytes = 16384;
  bool gzip = false;
  UserDataLimit() = default;
  UserDataLimit(std::size_t raw_bytes) : bytes(raw_bytes) {}  // NOLINT: a raw limit converts
  UserDataLimit(std::size_t limit_bytes, bool gzipped) : bytes(limit_bytes), gzip(gzipped) {}
  /// The size the cloud counts for \a script: its bytes, or its gzip's.
  std::size_t SizeOf(const std::string& script) const;
  bool Fits(const std::string& script) const { return SizeOf(script) <= bytes; }
  /// "16384-byte" or "16384-byte (gzipped)", for messages.
  std::string Describe() const;
};

struct CloudCheck {
  std::string account;
  /// Where the driver found the credentials (an environment variable's name, a file, a
  /// profile; never the secret): check's "credentials_from" (or the older names drivers used:
  /// token_from, key_from, key_source). "" when the driver does not say.
  std::string credentials_from;
  /// The boot script (user data) the cloud accepts.
  UserDataLimit user_data_limit;
  /// The driver narrows sources by "allow_from" in create and open_ports (check's
  /// "allow_from": true); a driver that does not say is never sent a narrowing.
  bool honours_allow_from = false;
  /// The most nodes one cluster may have on this cloud (check's "max_cluster_nodes", ABI 1.5);
  /// nullopt when the driver does not say (no limit known).
  std::optional<int> max_cluster_nodes;
  /// The cloud's firewall leaves the private network between its VMs unfiltered, so a
  /// cluster's node firewall admits the peers there (check's "private_network_unfiltered",
  /// ABI 1.5; docs/driver-protocol.md, "Clusters").
  bool private_network_unfiltered = false;
};

/// Who may reach which port (docs/driver-protocol.md, "allow_from"): the ports in
/// \a narrowed_ports are opened to \a allow_from only, the others to 0.0.0.0/0. Empty
/// allow_from: every port open to 0.0.0.0/0, as before the field existed.
struct PortSources {
  std::vector<std::string> allow_from;  // canonical CIDRs
  std::vector<int> narrowed_ports;      // ascending
  bool narrows() const { return !allow_from.empty() && !narrowed_ports.empty(); }
};

struct CreateRequest {
  std::string name;
  std::string region;
  std::string instance_type;
  std::optional<GpuRequest> gpu;
  std::string image;
  std::string ssh_public_key;
  std::string user_data;
  std::map<std::string, std::string> tags;
  std::vector<int> open_ports;
  std::optional<int> disk_gb;
  /// The VM becomes a k3s node (a driver may then pick only offers that can host it).
  bool kubernetes = false;
  /// A spot (preemptible) VM: sent as "spot": true only then (GPUPROV_CAP_SPOT drivers).
  bool spot = false;
  /// Sent only when it narrows; the driver then confirms it in the result.
  PortSources sources;
  /// A node of a multi-node cluster (GPUPROV_CAP_CLUSTER); nullopt: a VM of its own.
  std::optional<ClusterCreateFields> cluster;
};

class Cloud {
 public:
  /// Opens the driver for `cloud` with its settings from config.toml and the environment
  /// (GPUPROV_<CLOUD>_ENDPOINT overrides `endpoint`). The settings are checked against the
  /// keys the driver declares first (UsageError naming file:line).
  static std::unique_ptr<Cloud> Open(const DriverHost& host, const std::string& cloud,
                                     const Config& config);
  /// The same for a driver already loaded (provision loads it once to read its capabilities).
  static std::unique_ptr<Cloud> Open(const LoadedDriver& driver, const Config& config);
  /// The same, with \a stop asked besides Ctrl-C by the driver's waits (the host API's
  /// `cancelled`): a caller that stops waiting for the driver (a time budget) sets it.
  static std::unique_ptr<Cloud> Open(const LoadedDriver& driver, const Config& config,
                                     std::function<bool()> stop);
  explicit Cloud(std::unique_ptr<Driver> driver);

  const DriverInfo& info() const { return driver_->info(); }
  const std::string& name() const { return driver_->info().name; }

  /// The driver's check: a non-secret account description and the cloud's user-data limit.
  CloudCheck Check();
  /// \a kubernetes: the VM will be a k3s node, so only offers that can host it count.
  std::vector<CloudOffer> Offers(const std::optional<GpuRequest>& gpu, const std::string& region,
                                 bool kubernetes);
  /// Returns the VM and whether it already existed. A VM created with a narrowing the driver
  /// did not confirm (no "allow_from" equal to the request's in the result) is an Error.
  std::pair<CloudVm, bool> Create(const CreateRequest& request);
  /// nullopt when the VM is gone.
  std::optional<CloudVm> Get(const std::string& id, const std::string& name);
  std::vector<CloudVm> List();
  /// false when it was already gone.
  bool Delete(const std::string& id, const std::string& name);
  /// Opens \a ports of the VM to their \a sources (GPUPROV_CAP_OPEN_PORTS): 0.0.0.0/0, or
  /// allow_from for the narrowed ports. Throws Error when a narrowing is not confirmed.
  void OpenPorts(const std::string& id, const std::string& name, const std::vector<int>& ports,
                 const PortSources& sources = {});
  /// Lets every node of \a cluster in \a peers reach \a ports of every other, and no node not
  /// listed (ABI 1.5 open_peer_ports; idempotent; called after each create or delete of a node).
  void OpenPeerPorts(const std::string& cluster, const std::vector<PeerPort>& ports,
                     const std::vector<ClusterPeer>& peers);
  /// Everything carrying gpuprov's marks, in an order it can be deleted in (ABI 1.2;
  /// DriverCallError UNSUPPORTED when the driver lacks it: check info().lists_resources).
  std::vector<CloudResource> ListResources();
  /// false when it was already gone.
  bool DeleteResource(const std::string& kind, const std::string& id);

 private:
  std::unique_ptr<Driver> driver_;
};

/// "GPUPROV_<CLOUD>_ENDPOINT" ('-' as '_'): the variable that overrides a cloud's endpoint.
std::string EndpointEnvVar(const std::string& cloud);

/// The JSON given to a driver's init: {"endpoint": ..., "config": {...}}, and "pacer_dir" when
/// \a config has one (docs/driver-protocol.md).
std::string DriverConfigJson(const std::string& cloud, const Config& config);

}  // namespace gpuprov
