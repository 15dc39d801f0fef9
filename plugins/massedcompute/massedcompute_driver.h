// SPDX-License-Identifier: Apache-2.0
//
// The "massedcompute" driver: Massed Compute on-demand GPU VMs over the Massed Compute VM API
// v1 (REFERENCE.md).
//
// Capabilities: VM lifecycle, hosting Kubernetes and spot (the `_spot` products, README.md
// "Spot instances"). No boot script (the launch's startup
// `command` has an unconfirmed size limit, run-once semantics and log location, so the host
// takes the SSH route) and no firewall API (tunnel access: kubeconfig on 127.0.0.1,
// `gpuprov tunnel NAME`). See README.md.
//
// Settings (docs/driver-protocol.md, init): "endpoint" (default
// https://vm.massedcompute.com/api/v1; GPUPROV_MASSEDCOMPUTE_ENDPOINT; http:// only for a
// loopback emulator); config keys: region, image, delete_wait_seconds, and the kit's "retry"
// table (tests compress it). Credentials: $MASSED_API_KEY, else $MASSED_COMPUTE_API_TOKEN.
// What it makes per VM: the instance "gpuprov-<name>", and at most one account SSH key
// "gpuprov <hash>" per public key, shared by every gpuprov VM and removed with the last one.
#pragma once

#include <Poco/JSON/Object.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api_client.h"
#include "credentials.h"
#include "gpuprov/sdk.hpp"
#include "massedcompute_rules.h"

namespace gpuprov::massedcompute {

class MassedComputeDriver {
 public:
  static constexpr const char* kName = "massedcompute";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "Massed Compute GPU VMs, on demand and spot (VM API v1); SSH route, tunnel access";
  /// Clusters (README.md "Clusters"): no private network and no firewall API; the nodes reach
  /// each other at their public addresses and the node firewall admits the peers.
  static constexpr uint64_t kCapabilities = GPUPROV_CAP_VM_LIFECYCLE |
                                            GPUPROV_CAP_HOSTS_KUBERNETES | GPUPROV_CAP_CLUSTER |
                                            GPUPROV_CAP_SPOT;
  /// How a VM learns its public address: no metadata service; the address on the interface when not NATed (unconfirmed); REFERENCE.md §6.
  static constexpr const char* kNodeAddress = GPUPROV_NODE_ADDRESS_INTERFACE;

  explicit MassedComputeDriver(const gpuprov::sdk::InitContext& ctx);

  std::string Check(const std::string& request_json);
  std::string Offers(const std::string& request_json);
  std::string Create(const std::string& request_json);
  std::string Get(const std::string& request_json);
  std::string List(const std::string& request_json);
  std::string Delete(const std::string& request_json);
  // `gpuprov gc` (ABI 1.2): instances named gpuprov-<vm> and the SSH keys named "gpuprov <hash>"
  // (shared by every gpuprov instance).
  std::string ListResources(const std::string& request_json);
  std::string DeleteResource(const std::string& request_json);
  /// open_peer_ports (ABI 1.5): no firewall API (REFERENCE.md §5), so nothing to set on the
  /// cloud; the node firewall the installer sets up (--peer) admits exactly the peers. Checks
  /// the request.
  std::string OpenPeerPorts(const std::string& request_json);

 private:
  using ObjectPtr = Poco::JSON::Object::Ptr;

  std::vector<Product> Inventory();
  /// Every instance GET /instance lists that has not ended.
  std::vector<ObjectPtr> Instances();
  /// Every instance GET /instance lists, ended ones too.
  std::vector<ObjectPtr> AllInstances();
  /// The spot instance of a VM name that Massed Compute ended (IsPreempted), or nullptr.
  ObjectPtr FindPreemptedByName(const std::string& vm_name);
  /// The live gpuprov instance of a VM name, or nullptr.
  ObjectPtr FindByName(const std::string& vm_name);
  /// GET /instance/{uuid} in either documented shape; nullptr on 404 or when terminated (a
  /// spot instance Massed Compute ended is returned).
  ObjectPtr InstanceById(const std::string& uuid);
  /// The gpuprov instance a get/delete request names by "id" or "name", or nullptr.
  ObjectPtr Resolve(const ObjectPtr& request);

  /// The product and region for a request: a GPU request or an instance_type (a product
  /// name); INVALID_INPUT listing the products when none matches, CAPACITY when those that
  /// match have no capacity (in the region). \a spot: spot products only (an on-demand
  /// instance_type stands for its SpotTwin), else on-demand ones only.
  struct Placement {
    Product product;
    std::string region;
  };
  Placement Place(const std::optional<std::string>& gpu_type, int gpu_count,
                  const std::string& instance_type, const std::string& region, bool spot);
  /// The image id for a name or id ("" = config image, else kDefaultImages).
  /// An image of GET /images: its vm_image_id and vm_image_name.
  struct Image {
    int64_t id = 0;
    std::string name;
  };
  Image ImageFor(const std::string& requested);
  /// Puts the image in a launch body: imageId, or os_image_name once the API asked for it.
  void SetImage(ObjectPtr body, const Image& image) const;

  struct SshKey {
    std::string id;
    std::string name;
    bool created = false;
  };
  SshKey EnsureSshKey(const std::string& public_key);
  /// Deletes every key gpuprov registered once no live gpuprov instance other than
  /// `except_uuid` remains (instances do not say which keys they hold).
  void DeleteKeysIfUnused(const std::string& except_uuid);

  /// POST /instance/launch without ever making two: after a 5xx or a lost answer it looks
  /// for the name before trying again. Returns the instance uuid.
  std::string Launch(const std::string& vm_name, const ObjectPtr& body);
  /// Waits (cancellable, bounded) until the instance is gone from the API.
  void WaitGone(const std::string& uuid, const std::string& vm_name);

  ObjectPtr VmJson(const ObjectPtr& instance) const;

  gpuprov::sdk::Host host_;
  std::string endpoint_;
  std::string default_region_;
  std::string default_image_;
  std::string ssh_user_;        ///< ssh_user in [clouds.massedcompute] ("" = the API's)
  bool image_by_name_ = false;  ///< launch takes os_image_name (learnt from a refusal)
  std::chrono::seconds delete_wait_{600};
  ObjectPtr config_;
  std::unique_ptr<drivers::ApiClient> api_;
};

}  // namespace gpuprov::massedcompute
