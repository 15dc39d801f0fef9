// SPDX-License-Identifier: Apache-2.0
//
// The "nebius" driver: Nebius AI Cloud VMs over its gRPC API (REFERENCE.md), the only API
// the cloud has. gRPC lives in this .so only; the host sees the same JSON ABI as ever.
//
// Settings (docs/driver-protocol.md, init): "endpoint" (GPUPROV_NEBIUS_ENDPOINT or endpoint in
// [clouds.nebius]): one host:port serving every service (tests; plaintext only to loopback),
// else the real per-service endpoints over TLS. Config keys: see kNebiusConfigKeys at the end
// of nebius_driver.cc and README.md.
//
// What it makes per VM <name>, each labelled gpuprov=1 and gpuprov-name=<name>: the boot disk
// <name>-boot (DiskService, from an image family), the security group gpuprov-<name> with one
// ingress rule per 8 ports (TCP from 0.0.0.0/0) and one egress allow-all rule, and the
// instance (platform/preset, one interface with a public IP and that group, cloud-init user
// data with the SSH key and the host's boot script). Every mutating call is an Operation,
// polled to its end on the service that made it.
//
// Clusters (GPUPROV_CAP_CLUSTER): a node is labelled gpuprov-cluster and gpuprov-role, sits on
// the project's subnet like every VM (its private address is status.network_interfaces[0].
// ip_address), and its interface also lists the cluster's security group
// gpuprov-<cluster>-peers, whose ingress rules on the peer ports name the group itself as
// their source (RuleIngress.source_security_group_id, nebius/api vpc/v1/security_rule.proto):
// the nodes reach each other there and nothing else does. The group goes with the last node.
#pragma once

#include <Poco/JSON/Object.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster_request.h"
#include "gpuprov/sdk.hpp"
#include "nebius_client.h"

namespace gpuprov::nebius {

class NebiusDriver {
 public:
  static constexpr const char* kName = "nebius";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "Nebius AI Cloud (gRPC): instances, boot disks, VPC security groups, service-account "
      "token exchange";
  static constexpr uint64_t kCapabilities = GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_BOOT_CLOUD_INIT |
                                            GPUPROV_CAP_OPEN_PORTS | GPUPROV_CAP_HOSTS_KUBERNETES |
                                            GPUPROV_CAP_SPOT | GPUPROV_CAP_CLUSTER;
  /// How a VM learns its public address: IMDS network-data (its public address there unconfirmed); REFERENCE.md §6.
  static constexpr const char* kNodeAddress = GPUPROV_NODE_ADDRESS_NEBIUS;

  explicit NebiusDriver(const gpuprov::sdk::InitContext& ctx);

  std::string Check(const std::string& request_json);
  std::string Offers(const std::string& request_json);
  std::string Create(const std::string& request_json);
  std::string Get(const std::string& request_json);
  std::string List(const std::string& request_json);
  std::string Delete(const std::string& request_json);
  std::string OpenPorts(const std::string& request_json);
  /// The cluster's group with exactly the peer ports' self-referencing rules (a rule that
  /// differs is replaced: rules are immutable), and every listed peer's interface in it.
  std::string OpenPeerPorts(const std::string& request_json);
  /// Instances, boot disks and security groups labelled gpuprov=1 (`gpuprov gc`, ABI 1.2), in
  /// that order; a group's rules go with it; a cluster's group is a cluster_firewall naming
  /// its nodes. No price: the API reports none.
  std::string ListResources(const std::string& request_json);
  /// One of those by kind ("vm", "disk", "security_group", "cluster_firewall") and id, read again first; refused
  /// when it does not carry the gpuprov=1 label.
  std::string DeleteResource(const std::string& request_json);

 private:
  using Instance = ::nebius::compute::v1::Instance;
  using Operation = ::nebius::common::v1::Operation;

  const std::string& Project();
  std::unique_ptr<TokenSource> MakeTokens(std::shared_ptr<grpc::Channel> channel) const;

  std::optional<Instance> InstanceByName(const std::string& name);
  std::optional<Instance> InstanceById(const std::string& id);
  /// The gpuprov instance a get/delete/open_ports request names by "id" or "name".
  std::optional<Instance> Resolve(const Poco::JSON::Object::Ptr& request);
  std::vector<Instance> Instances();

  /// The project's platforms (PlatformService.List, every page).
  std::vector<::nebius::compute::v1::Platform> Platforms();
  /// Refuses (INVALID_INPUT, before anything is made) a preemptible VM of a platform whose
  /// status.allowed_for_preemptibles is false, naming the platforms that allow one.
  void RequireAllowedForPreemptibles(const PlatformPreset& pp);

  /// The subnet for new interfaces: config subnet_id, else the project's "default-subnet*",
  /// else its first. Returns {subnet id, network id}.
  std::pair<std::string, std::string> Subnet();

  /// The VM's security group (made now, or gpuprov's from before) with `ports` open; its id.
  std::string EnsureSecurityGroup(const std::string& vm_name, const std::vector<int>& ports,
                                  const drivers::PortSources& sources,
                                  const std::string& network_id,
                                  const std::map<std::string, std::string>& labels, bool* created);
  /// Adds ingress rules for those of `ports` not narrowed that the group does not open to
  /// 0.0.0.0/0 yet, makes the narrowed ones open to exactly allow_from (PlanSources) and,
  /// with_egress, adds the rule allowing all outbound traffic when the group has none.
  void AddMissingRules(const std::string& group_id, const std::string& vm_name,
                       const std::vector<int>& ports, const drivers::PortSources& sources,
                       bool with_egress);
  /// One rule in the group, through its operation.
  void CreateRule(const std::string& group_id, const std::string& rule_name,
                  const std::map<std::string, std::string>& labels,
                  ::nebius::vpc::v1::SecurityRuleSpec spec);
  /// One rule by id, through its operation (`what` names it); gone already is fine.
  void DeleteRule(const std::string& rule_id, const std::string& what);
  /// Every rule of the group (all pages).
  std::vector<::nebius::vpc::v1::SecurityRule> Rules(const std::string& group_id);
  std::optional<::nebius::vpc::v1::SecurityGroup> GroupByName(const std::string& sg_name);
  /// The group's ALLOW ingress TCP/ANY rules.
  std::vector<IngressRule> IngressRules(const std::string& group_id);
  /// Which of \a ports the group's rules open to 0.0.0.0/0; with \a egress_to_all, whether a
  /// rule allows all outbound traffic.
  std::vector<int> OpenPortsOf(const std::string& group_id, const std::vector<int>& ports,
                               bool* egress_to_all = nullptr);
  /// The cluster's security group gpuprov-<cluster>-peers in network_id (made now, or the one
  /// of an earlier node) with an ALLOW rule per protocol of `ports` whose source is the group
  /// itself; its id. With `exact`, rules of the group that are not those are deleted.
  std::string EnsureClusterGroup(const std::string& cluster,
                                 const std::vector<drivers::PeerPort>& ports,
                                 const std::string& network_id, bool exact);
  /// Deletes the cluster's group when no instance of the cluster but leaving_id is left;
  /// a group the API keeps (still in use) is left for `gpuprov gc` with a warning.
  void RemoveClusterGroupIfLast(const std::string& cluster, const std::string& leaving_id);
  /// The boot disk (made now, or gpuprov's from before) once READY; its id.
  std::string EnsureBootDisk(const std::string& vm_name, const std::string& image_family,
                             int64_t size_gib, const std::map<std::string, std::string>& labels,
                             bool* created);

  /// Deletes, each through its operation; false when it was not there (or not gpuprov's).
  bool DeleteInstance(const Instance& inst);
  bool DeleteBootDisk(const std::string& vm_name);
  bool DeleteSecurityGroup(const std::string& vm_name);
  bool DeleteDisk(const ::nebius::compute::v1::Disk& disk);
  /// The group's rules, then the group.
  bool DeleteGroup(const ::nebius::vpc::v1::SecurityGroup& group);
  std::vector<::nebius::compute::v1::Disk> Disks();
  std::vector<::nebius::vpc::v1::SecurityGroup> Groups();
  /// The clean-up of a create that failed: what it made now goes, errors only warned.
  void CleanUp(const std::string& vm_name, bool disk, bool group);

  /// Why an instance that is STOPPED without reconciling did not start: the newest of its
  /// operations (InstanceService.ListOperationsByParent, as SkyPilot's Nebius provisioner
  /// reads it). `failed` is false when that operation reports no error (or none is listed).
  struct StartFailure {
    bool failed = false;
    gpuprov_type_status status = GPUPROV_STATUS_FAILED;  ///< CAPACITY, QUOTA, FAILED, ...
    std::string text;                                     ///< "<description>: <error>"
  };
  StartFailure StartFailureOf(const Instance& inst);
  /// After the create operation: polls the instance until it starts (STARTING, RUNNING) or
  /// stops without reconciling (a failed start, thrown with its reason after CleanUp), bounded
  /// by the operation timeout. Returns the instance as last seen.
  Instance AwaitStart(Instance inst, const std::string& vm_name, bool disk_created,
                      bool group_created);

  Poco::JSON::Object::Ptr VmJson(const Instance& inst, const std::vector<int>& ports) const;

  gpuprov::sdk::Host host_;
  Poco::JSON::Object::Ptr config_;
  Endpoints endpoints_;
  std::string region_;
  std::string ssh_user_;
  std::string project_;
  std::unique_ptr<NebiusClient> client_;
};

}  // namespace gpuprov::nebius
