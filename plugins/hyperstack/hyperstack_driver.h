// SPDX-License-Identifier: Apache-2.0
//
// The "hyperstack" driver: GPU VMs on Hyperstack (NexGen Cloud's Infrahub API v1), written on
// the driver kit (plugins/common).
//
// Settings (docs/driver-protocol.md, init): "endpoint" (default
// https://infrahub-api.nexgencloud.com/v1; GPUPROV_HYPERSTACK_ENDPOINT; http:// only for a
// loopback emulator); config keys ([clouds.hyperstack] of config.toml): the table at the end of
// hyperstack_driver.cc, listed in README.md, "Settings".
// What it creates per VM: the VM (labels gpuprov, gpuprov-name=<name>, the user's tags) with
// its security rules; per environment: the environment gpuprov-<region> and one key pair
// gpuprov-<fingerprint> per public key, shared by the VMs there. A cluster's nodes (ABI 1.5)
// are VMs of that same environment, labelled gpuprov-cluster=<cluster> and gpuprov-role=<role>,
// reaching each other on its private network through per-VM security rules from each peer's
// fixed_ip (open_peer_ports); the cluster has nothing of its own. See README.md, "Clusters".
#pragma once

#include <Poco/JSON/Object.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api_client.h"
#include "credentials.h"
#include "gpuprov/sdk.hpp"
#include "hyperstack_rules.h"

namespace gpuprov::hyperstack {

class HyperstackDriver {
 public:
  static constexpr const char* kName = "hyperstack";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "Hyperstack GPU VMs (Infrahub API v1): environments, key pairs, VMs with security rules, "
      "clusters on an environment's private network";
  static constexpr uint64_t kCapabilities =
      GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_BOOT_CLOUD_INIT | GPUPROV_CAP_OPEN_PORTS |
      GPUPROV_CAP_HOSTS_KUBERNETES | GPUPROV_CAP_CLUSTER;
  /// How a VM learns its public address: OpenStack's EC2-compatible public-ipv4 (the floating IP; unconfirmed); REFERENCE.md §6.
  static constexpr const char* kNodeAddress = GPUPROV_NODE_ADDRESS_OPENSTACK;

  explicit HyperstackDriver(const gpuprov::sdk::InitContext& ctx);

  std::string Check(const std::string& request_json);
  std::string Offers(const std::string& request_json);
  std::string Create(const std::string& request_json);
  std::string Get(const std::string& request_json);
  std::string List(const std::string& request_json);
  std::string Delete(const std::string& request_json);
  std::string OpenPorts(const std::string& request_json);
  /// ABI 1.5: each listed node admits the peer ports from every other node's address (its
  /// fixed_ip) and from no former peer: per-VM security rules added and deleted.
  std::string OpenPeerPorts(const std::string& request_json);
  // `gpuprov gc` (ABI 1.2): VMs labelled gpuprov, key pairs gpuprov-<fingerprint> and
  // environments gpuprov-<region> that no VM or key pair without gpuprov's mark uses.
  std::string ListResources(const std::string& request_json);
  std::string DeleteResource(const std::string& request_json);

 private:
  using ObjectPtr = Poco::JSON::Object::Ptr;

  /// Every item of a paged list (page, page_size; until a short page).
  std::vector<ObjectPtr> ListAll(const std::string& path, const std::string& key,
                                 const std::string& what);

  std::string RegionOf(const ObjectPtr& request) const;
  /// The live flavor list of a region ("" = all regions).
  std::vector<Flavor> ListFlavors(const std::string& region);

  /// Every VM of the account; those labelled gpuprov.
  std::vector<ObjectPtr> AllVms();
  std::vector<ObjectPtr> ManagedVms();
  /// Every environment of the account (paged, ListAll).
  std::vector<ObjectPtr> Environments();
  /// GET /pricebook as GPU model -> USD per GPU-hour; empty when it cannot be read (prices
  /// then stay unknown; an authentication failure still throws).
  std::map<std::string, double> Pricebook();
  /// The VM called `name` that gpuprov made, or nullptr; a same-named VM without the label
  /// is reported in *foreign.
  ObjectPtr FindByName(const std::string& name, bool* foreign = nullptr);
  /// GET /core/virtual-machines/{id}, or nullptr on 404.
  ObjectPtr GetVm(const std::string& id);
  /// The gpuprov VM a request names by "id" or "name", or nullptr.
  ObjectPtr Resolve(const ObjectPtr& request);
  ObjectPtr VmJson(const ObjectPtr& vm) const;

  struct Made {
    bool environment = false;  // created by this call
    std::string environment_id;
    bool key_pair = false;
    std::string key_pair_id;
  };
  /// The environment to create in: the configured one, or gpuprov-<region> (created now).
  std::string EnsureEnvironment(const std::string& region, Made* made);
  /// The key pair for `public_key` in `environment`: one with the same key, or imported.
  std::string EnsureKeyPair(const std::string& environment, const std::string& public_key,
                            Made* made);
  /// Checks the image exists in the region; INVALID_INPUT listing the images otherwise.
  void CheckImage(const std::string& region, const std::string& image);
  /// POST /core/virtual-machines without ever making two: a 5xx or a lost answer is
  /// followed by a look-up by name before the next try; a 409 returns the VM of that name.
  ObjectPtr CreateVm(const std::string& name, const ObjectPtr& body);
  /// Removes what this call made when the create failed.
  void Undo(const Made& made, const std::string& environment);
  /// After a VM is gone: every key pair gpuprov imported (in its environments, `environment`
  /// and the configured one) that no VM uses, then every gpuprov environment with no VM and
  /// no other key pair left. Also what a vanished VM or a cut-short create left.
  void CleanUpEnvironment(const std::string& environment);
  /// Waits (cancellable) until GET answers 404.
  /// Deletes the VM (retrying while Hyperstack says it is still being created) and waits
  /// until it is gone. False when it was gone already.
  bool DeleteVmAndWait(const std::string& id, const std::string& name);
  void WaitGone(const std::string& id, const std::string& name);

  gpuprov::sdk::Host host_;
  std::string endpoint_;
  std::string default_region_;
  std::string configured_environment_;
  std::string default_image_;
  ObjectPtr config_;
  std::chrono::milliseconds poll_interval_{5000};
  std::chrono::milliseconds delete_timeout_{600'000};
  std::chrono::milliseconds delete_retry_{10'000};
  std::unique_ptr<drivers::ApiClient> api_;
};

}  // namespace gpuprov::hyperstack
