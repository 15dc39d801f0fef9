// SPDX-License-Identifier: Apache-2.0
//
// The "digitalocean" driver: GPU Droplets over the DigitalOcean API v2.
//
// Settings (docs/driver-protocol.md, init): "endpoint" (default
// https://api.digitalocean.com/v2; http:// only for a loopback emulator); config keys:
//   region          default region when the request names none
//   token_env       name of an environment variable holding the token (checked first)
//   token           the token itself (discouraged; environment or doctl config preferred)
//   doctl_config    path of doctl's config.yaml; doctl_context: its context to use
//   capacity_messages  extra 422 message substrings that mean "no capacity"
//   retry           {max_attempts, base_delay_ms, max_delay_ms, max_retry_after_ms,
//                    total_budget_ms, attempt_timeout_ms} (tests compress them)
// What it creates per VM: the droplet (tags gpuprov, gpuprov-vm:<name>, and
// gpuprov-key:<id> when the SSH key is one gpuprov registered), a cloud firewall
// "gpuprov-<name>" attached by droplet id, and at most one SSH key "gpuprov-<fp>" shared by
// every VM using the same public key. A cluster node (create's "cluster", ABI 1.5) also carries
// the tags gpuprov-cluster:<cluster> and gpuprov-role:<role> and joins the cluster's VPC
// "gpuprov-<cluster>" (made on first use); the firewall "gpuprov-<cluster>-peers", applied to
// the cluster tag, admits the peer ports from droplets of that tag only. Both go with the
// cluster's last droplet. See README.md.
#pragma once

#include <Poco/JSON/Object.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api_client.h"
#include "cluster_request.h"
#include "credentials.h"
#include "driver_request.h"
#include "gpuprov/sdk.hpp"

namespace gpuprov::digitalocean {

namespace kit = gpuprov::drivers;

/// One inbound firewall rule: tcp `port` from its sources (both families for everyone).
Poco::JSON::Object::Ptr InboundRule(int port, const kit::PortSources& sources);

/// `rules` (a firewall's inbound_rules) with each of `ports` open to its sources: for a
/// narrowed port exactly (its single-port tcp rules with other addresses removed, the rule
/// added when missing); for another a rule from everyone added when none opens it to
/// 0.0.0.0/0; every other rule kept as it is.
Poco::JSON::Array::Ptr RewriteInbound(const Poco::JSON::Array::Ptr& rules,
                                      const std::vector<int>& ports,
                                      const kit::PortSources& sources);

class DigitalOceanDriver {
 public:
  static constexpr const char* kName = "digitalocean";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "DigitalOcean GPU Droplets (API v2): droplets, cloud firewalls, SSH keys";
  static constexpr uint64_t kCapabilities = GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_BOOT_CLOUD_INIT |
                                            GPUPROV_CAP_OPEN_PORTS | GPUPROV_CAP_HOSTS_KUBERNETES |
                                            GPUPROV_CAP_CLUSTER;
  /// How a VM learns its public address: droplet metadata interfaces/public/0/ipv4/address; REFERENCE.md §6.
  static constexpr const char* kNodeAddress = GPUPROV_NODE_ADDRESS_DIGITALOCEAN;

  explicit DigitalOceanDriver(const gpuprov::sdk::InitContext& ctx);

  std::string Check(const std::string& request_json);
  std::string Offers(const std::string& request_json);
  std::string Create(const std::string& request_json);
  std::string Get(const std::string& request_json);
  std::string List(const std::string& request_json);
  std::string Delete(const std::string& request_json);
  std::string OpenPorts(const std::string& request_json);
  // `gpuprov gc` (ABI 1.2): gpuprov's droplets, its firewalls and SSH keys (named gpuprov-*).
  std::string ListResources(const std::string& request_json);
  std::string DeleteResource(const std::string& request_json);
  // ABI 1.5: the cluster's firewall admits the peer ports from the cluster's tag; checked and
  // repaired here (a droplet that loses the tag, deleted, loses the access with it).
  std::string OpenPeerPorts(const std::string& request_json);

 private:
  using ObjectPtr = Poco::JSON::Object::Ptr;

  /// POST /droplets without ever making two: a 5xx or a lost answer is followed by a look-up
  /// by name before the next try.
  ObjectPtr CreateDroplet(const std::string& name, const ObjectPtr& body);
  /// Every item of a paginated collection.
  std::vector<ObjectPtr> ListAll(const std::string& path, const std::string& key,
                                 const std::string& what);
  /// A size as DigitalOcean sells it now: GET /v2/sizes (`available`, `regions`,
  /// `price_hourly`), its regions narrowed to those GET /v2/regions lists as `available` with
  /// the size among their `sizes` (digitalocean/openapi sizes/models/size.yml,
  /// regions/models/region.yml). Throws DriverError when a list cannot be read (the regions
  /// list only narrows: when it cannot be read, the size's own list stands).
  struct LiveSize {
    bool listed = false;     ///< the sizes list has the slug
    bool available = false;  ///< its `available`
    std::vector<std::string> regions;
    std::optional<double> price_per_hour;
  };
  LiveSize ReadLiveSize(const std::string& slug);
  /// The region for a create that names none: the first region DigitalOcean sells the size
  /// in now (ReadLiveSize), CAPACITY when it sells it nowhere; the built-in table's first only
  /// when the sizes list cannot be read.
  std::string DefaultRegionFor(const std::string& slug,
                               const std::vector<std::string>& table_regions);

  /// Droplets tagged gpuprov: the regular list by tag plus GPU droplets (type=gpus).
  std::vector<ObjectPtr> ManagedDroplets();
  /// The gpuprov droplet called name (regular and GPU lists), or nullptr.
  /// With `foreign` set, a same-named droplet gpuprov did not tag is reported there.
  ObjectPtr FindByName(const std::string& name, bool* foreign = nullptr);
  /// The gpuprov droplet a get/delete request names by "id" or "name", or nullptr.
  ObjectPtr Resolve(const ObjectPtr& request);

  struct SshKey {
    std::string id;
    bool ours = false;     // registered by gpuprov (name gpuprov-...)
    bool created = false;  // registered by this call
  };
  SshKey EnsureSshKey(const std::string& public_key);
  void DeleteSshKey(const std::string& id);
  /// Makes the firewall of a VM with `ports` open to their sources (0.0.0.0/0 and ::/0, or
  /// allow_from for the narrowed ones), the droplet attached.
  void CreateFirewall(const std::string& vm_name, const std::string& droplet_id,
                      const std::vector<int>& ports, const kit::PortSources& sources);
  /// Opens `ports` of the VM to their sources: creates its firewall; else without a narrowing
  /// adds only the missing rules (AddFirewallRules), with one rewrites the firewall by
  /// RewriteInbound (one PUT). Attaches the droplet. Returns the ports whose rules changed.
  std::vector<int> OpenFirewallPorts(const std::string& vm_name, const std::string& droplet_id,
                                     const std::vector<int>& ports,
                                     const kit::PortSources& sources);
  /// Adds a rule from everyone for each of `ports` no rule opens to 0.0.0.0/0, never removes
  /// one (the user's stay), and attaches the droplet. Returns the ports it opened.
  std::vector<int> AddFirewallRules(const std::string& vm_name, const std::string& droplet_id,
                                    const ObjectPtr& fw, const std::vector<int>& ports);
  /// Which of `ports` the VM's firewall opens to some source (all without a firewall).
  std::vector<int> OpenPortsOf(const std::string& vm_name, const std::vector<int>& ports);
  ObjectPtr FindFirewall(const std::string& vm_name);

  /// The id of the cluster's VPC "gpuprov-<cluster>" in region; "" when there is none. A VPC
  /// of that name in another region is INVALID_INPUT (a leftover: gc removes it).
  std::string FindClusterVpc(const std::string& cluster, const std::string& region);
  /// The cluster's VPC, made when missing; its id. Nodes of one cluster created at once agree
  /// on one VPC: a create refused for the name (another node made it) takes that one.
  std::string EnsureClusterVpc(const std::string& cluster, const std::string& region);
  /// The cluster's firewall: applied to the droplets tagged gpuprov-cluster:<cluster>,
  /// admitting `ports` from droplets of that tag only; made when missing, its inbound rules
  /// rewritten when they differ.
  void EnsureClusterFirewall(const std::string& cluster,
                             const std::vector<kit::PeerPort>& ports);
  /// Firewall names are not unique on DigitalOcean: when nodes of one cluster made the
  /// cluster's firewall at once, all but the one of the smallest id are deleted.
  void KeepOneClusterFirewall(const std::string& cluster);
  /// Removes the cluster's firewall and VPC once no droplet but `leaving_id` carries its tag.
  void RemoveClusterLeftovers(const std::string& cluster, const std::string& leaving_id);

  gpuprov::sdk::Host host_;
  std::string endpoint_;
  std::string default_region_;
  ObjectPtr config_;
  std::vector<std::string> capacity_messages_;
  std::unique_ptr<drivers::ApiClient> api_;
};

}  // namespace gpuprov::digitalocean
