// SPDX-License-Identifier: Apache-2.0
//
// The "verda" driver: Verda Cloud (formerly DataCrunch) GPU instances over the Verda Cloud
// Public API v1 (OAuth2 client credentials).
//
// Settings (docs/driver-protocol.md, init): "endpoint" (default https://api.verda.com/v1;
// GPUPROV_VERDA_ENDPOINT; http:// only for a loopback emulator); config keys are listed in
// kVerdaConfigKeys at the end of verda_driver.cc and in README.md.
// What it makes per VM: the instance (hostname = VM name, description and tags gpuprov=1 /
// gpuprov-name), a startup script "gpuprov-<name>" carrying the installer, and at most one SSH
// key "gpuprov-<hash>" shared by every VM with the same public key; per cluster, its private
// network "gpuprov-<cluster>" (a node's tags also gpuprov-cluster / gpuprov-role). See README.md.
#pragma once

#include <Poco/Dynamic/Var.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api_client.h"
#include "gpuprov/sdk.hpp"
#include "verda_rules.h"

namespace gpuprov::verda {

class VerdaDriver {
 public:
  static constexpr const char* kName = "verda";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "Verda Cloud (formerly DataCrunch) GPU instances: instances, startup scripts, SSH keys";
  /// A startup-script cloud without a firewall API (section 5): the host puts the installer in
  /// the startup script and reaches the API through an SSH tunnel. Spot instances (`is_spot`,
  /// README.md "Spot"). Clusters (README.md "Clusters"): nodes tagged gpuprov-cluster and
  /// gpuprov-role on the cluster's private network gpuprov-<cluster>; the node firewall admits
  /// the peers.
  static constexpr uint64_t kCapabilities =
      GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_BOOT_STARTUP_SCRIPT | GPUPROV_CAP_HOSTS_KUBERNETES |
      GPUPROV_CAP_CLUSTER | GPUPROV_CAP_SPOT;
  /// How a VM learns its public address: no metadata service; the address on the interface when not NATed (unconfirmed); REFERENCE.md §6.
  static constexpr const char* kNodeAddress = GPUPROV_NODE_ADDRESS_INTERFACE;

  explicit VerdaDriver(const gpuprov::sdk::InitContext& ctx);

  std::string Check(const std::string& request_json);
  std::string Offers(const std::string& request_json);
  std::string Create(const std::string& request_json);
  std::string Get(const std::string& request_json);
  std::string List(const std::string& request_json);
  std::string Delete(const std::string& request_json);
  // `gpuprov gc` (ABI 1.2): instances tagged gpuprov=1, startup scripts gpuprov-<vm>, SSH keys
  // gpuprov-<hash> and clusters' private networks gpuprov-<cluster>.
  std::string ListResources(const std::string& request_json);
  std::string DeleteResource(const std::string& request_json);
  // No OpenPorts: Verda has no firewall API (section 5), so no GPUPROV_CAP_OPEN_PORTS.
  /// open_peer_ports (ABI 1.5): no firewall API, so nothing to set on the cloud; the node
  /// firewall the installer sets up (--peer) admits exactly the peers. Checks the request.
  std::string OpenPeerPorts(const std::string& request_json);

 private:
  using ObjectPtr = Poco::JSON::Object::Ptr;
  using ArrayPtr = Poco::JSON::Array::Ptr;

  /// The OAuth access token (fetched once, cached until shortly before it expires; again
  /// with `renew`, which the client asks after a 401).
  const std::string& Token(bool renew);
  const ClientCredentials& Credentials();
  static ArrayPtr ArrayOf(const drivers::ApiAnswer& a, const std::string& what);

  /// Every instance GET /instances lists (one call).
  std::vector<ObjectPtr> Listed();
  /// Every instance of the account that is not gone.
  std::vector<ObjectPtr> Instances();
  /// The newest live gpuprov instance with that hostname, or nullptr; a live same-named
  /// instance gpuprov did not make is reported in *foreign.
  ObjectPtr FindByName(const std::string& name, bool* foreign = nullptr);
  /// The gpuprov spot instances Verda took back (IsPreempted) among \a listed, newest first,
  /// whose hostname no live gpuprov instance there has (those a replacement took over).
  static std::vector<ObjectPtr> PreemptedAmong(const std::vector<ObjectPtr>& listed);
  /// GET /instances/{id}, or nullptr when Verda says it does not exist.
  ObjectPtr InstanceById(const std::string& id);
  ObjectPtr Resolve(const ObjectPtr& request);

  /// Location -> instance types in stock (GET /instance-availability, section 3.6), as spot
  /// instances with `spot` (is_spot=true), else on demand.
  std::map<std::string, std::vector<std::string>> Availability(const std::string& location,
                                                               bool spot = false);

  struct SshKey {
    std::string id;
    std::string name;
  };
  SshKey EnsureSshKey(const std::string& public_key);
  /// Deletes gpuprov's keys (named gpuprov-...) among `key_ids` (every gpuprov key when
  /// empty) that no live gpuprov instance other than `except_id` uses.
  void DeleteUnusedKeys(const std::vector<std::string>& key_ids, const std::string& except_id);

  /// Every startup script whose name contains `name_filter`, page by page (V-SPEC GET
  /// /v1/scripts: page, pageSize default 10 maximum 100, name "match by a partial name";
  /// X-Total-Count). A server that ignores the page parameters ends the walk by repeating ids.
  std::vector<ObjectPtr> Scripts(const std::string& name_filter);
  /// The ids of the startup scripts named ScriptName(vm).
  std::vector<std::string> ScriptIds(const std::string& vm_name);
  /// GET /instance-types: name -> price and supported OS images.
  std::map<std::string, LiveType> LiveTypes();
  /// The image for `type` (ChooseImage; GET /images?instance_type= only when the wanted image
  /// is not among the type's supported_os).
  std::string ImageFor(const std::string& type, const std::string& wanted, bool user_chose,
                       const LiveType& live);
  std::string CreateScript(const std::string& vm_name, const std::string& text);
  void DeleteScripts(const std::string& vm_name);

  /// POST /instances without ever making two: after a 5xx or a lost answer it looks for the
  /// name before trying again. Returns the instance id.
  std::string Launch(const std::string& name, const std::string& body);
  /// Waits (bounded) while the new instance is unplaced (new/ordered); returns it, or nullptr
  /// when it vanished. Throws CAPACITY (after deleting it) when it ends in no_capacity.
  ObjectPtr WaitPlaced(const std::string& id, const std::string& name);
  /// The delete action with the instance's OS volume deleted for good (VolumesToDelete),
  /// waiting out "Can't discontinue a provisioning instance". False when the instance was
  /// already gone.
  bool DeleteInstance(const ObjectPtr& instance);

  /// The private networks named ClusterResourceName(cluster) (every gpuprov- one for ""),
  /// oldest first.
  std::vector<ObjectPtr> ClusterNetworks(const std::string& cluster);
  /// The id of the cluster's private network, made on first use in mode "auto" (its subnet in
  /// a location is made with the first instance there). Two nodes that each made one at once
  /// both take the oldest; the other goes with the cluster's last node.
  std::string EnsureClusterNetwork(const std::string& cluster);
  /// Deletes the cluster's private networks once no live gpuprov instance but `except_id`
  /// carries its gpuprov-cluster tag; one Verda still refuses after delete_wait_seconds (a
  /// node being deleted is still on it) is left, with a warning, for `gpuprov gc`.
  void RemoveClusterNetworks(const std::string& cluster, const std::string& except_id);
  /// DELETE /private-networks/{id}, retried while Verda refuses it (an instance still on it)
  /// up to delete_wait_seconds, then TRANSIENT. False when it was already gone.
  bool DeleteNetwork(const ObjectPtr& network);

  ObjectPtr VmJson(const ObjectPtr& instance) const;

  gpuprov::sdk::Host host_;
  std::string endpoint_;
  ObjectPtr config_;
  std::string default_location_;
  std::string default_image_;
  bool image_configured_ = false;  ///< [clouds.verda] image was set (the user's choice)
  size_t script_limit_;
  int os_volume_gb_;
  std::chrono::seconds delete_wait_;
  std::chrono::seconds placement_wait_;
  std::chrono::milliseconds poll_interval_;
  std::unique_ptr<drivers::ApiClient> api_;
  std::optional<ClientCredentials> credentials_;
  std::string token_;
  std::chrono::steady_clock::time_point token_expiry_{};
};

}  // namespace gpuprov::verda
