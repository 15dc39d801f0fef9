// SPDX-License-Identifier: Apache-2.0
//
// The "gcp" driver: Compute Engine VMs over the Compute REST API v1 (REFERENCE.md).
//
// Settings (docs/driver-protocol.md, init): "endpoint" (default
// https://compute.googleapis.com, from GPUPROV_GCP_ENDPOINT; "/compute/v1" is appended;
// http:// only for a loopback emulator); config keys:
//   project           project id (else $GOOGLE_CLOUD_PROJECT, $CLOUDSDK_CORE_PROJECT, the
//                     key's project_id, gcloud's active configuration)
//   region            region (or zone) when the request names none (default us-central1)
//   credentials_file  a service-account key or ADC file (else
//                     $GOOGLE_APPLICATION_CREDENTIALS, else gcloud's ADC file)
//   network           VPC network (default "default"); subnetwork: optional
//   ssh_user          the user named in the ssh-keys metadata (default ubuntu)
//   image             boot image when the request names none
//   poll_interval_ms  operation polling interval (default 2000)
//   operation_timeout_seconds  longest wait for one operation (default 900)
//   retry             {max_attempts, base_delay_ms, max_delay_ms, max_retry_after_ms,
//                      total_budget_ms, attempt_timeout_ms}
// What it creates per VM: the instance (labels gpuprov=1, gpuprov-name=<name>, network tag
// gpuprov-<name>) and the firewall rule gpuprov-<name> targeting that tag; per cluster (ABI
// 1.5): labels gpuprov-cluster and gpuprov-role and the network tag gpuprov-cluster-<cluster> on
// each node, and the firewall rule gpuprov-<cluster>-peers from that tag to that tag. See
// README.md.
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
#include "cluster_request.h"
#include "driver_request.h"
#include "gce_machine_types.h"
#include "gcp_auth.h"
#include "gpuprov/sdk.hpp"

namespace gpuprov::gcp {

class GcpDriver {
 public:
  static constexpr const char* kName = "gcp";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "Google Compute Engine (REST v1): instances, firewall rules, OAuth2 service accounts";
  static constexpr uint64_t kCapabilities = GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_BOOT_CLOUD_INIT |
                                            GPUPROV_CAP_OPEN_PORTS | GPUPROV_CAP_HOSTS_KUBERNETES |
                                            GPUPROV_CAP_SPOT | GPUPROV_CAP_CLUSTER;
  /// How a VM learns its public address: the metadata server's access-configs/0/external-ip; REFERENCE.md §6.
  static constexpr const char* kNodeAddress = GPUPROV_NODE_ADDRESS_GCE;

  explicit GcpDriver(const gpuprov::sdk::InitContext& ctx);

  std::string Check(const std::string& request_json);
  std::string Offers(const std::string& request_json);
  std::string Create(const std::string& request_json);
  std::string Get(const std::string& request_json);
  std::string List(const std::string& request_json);
  std::string Delete(const std::string& request_json);
  std::string OpenPorts(const std::string& request_json);
  // `gpuprov gc` (ABI 1.2): instances labelled gpuprov=1 and the firewall rules gpuprov-<vm>
  // that target their own tag.
  std::string ListResources(const std::string& request_json);
  std::string DeleteResource(const std::string& request_json);
  // Clusters (ABI 1.5): the cluster's firewall rule admits its tag, so the peers follow the
  // nodes that carry it; this makes the rule match the peer ports (created or patched).
  std::string OpenPeerPorts(const std::string& request_json);

 private:
  using ObjectPtr = Poco::JSON::Object::Ptr;

  /// Polls an operation until DONE (bounded); returns the finished operation.
  ObjectPtr WaitOperation(const ObjectPtr& op, const std::string& what);
  /// WaitOperation, then throws DriverError (classified by its code, "WHAT: CODE: message")
  /// when the finished operation carries an error other than `tolerated_code`.
  void AwaitOperation(const ObjectPtr& op, const std::string& what,
                      const std::string& tolerated_code = "");

  TokenSource& Tokens();
  const std::string& Project();

  /// The gpuprov instance called name (any zone), or nullptr; with `foreign`, reports a
  /// same-named instance without the gpuprov label there.
  ObjectPtr FindByName(const std::string& name, bool* foreign = nullptr);
  /// The instance a get/delete/open_ports request names by "id" (zone/name) or "name".
  ObjectPtr Resolve(const ObjectPtr& request);
  /// Every instance matching `filter` over all zones (aggregated list, paginated).
  std::vector<ObjectPtr> AggregatedInstances(const std::string& filter);

  /// The zones of a region that have `accelerator` ("" = every zone of the region, UP).
  std::vector<std::string> ZonesFor(const std::string& region, const std::string& accelerator);

  /// The start of a firewall rule's insert body: name, description, the network, INGRESS,
  /// priority 1000 (the caller adds sources, targets and allowed).
  ObjectPtr NewIngressRule(const std::string& fw_name, const std::string& description) const;
  ObjectPtr GetFirewall(const std::string& vm_name);
  /// The firewall rule of that name, or nullptr.
  ObjectPtr GetFirewallNamed(const std::string& fw_name);
  /// POST (body), PATCH (body) or DELETE of a firewall rule and its global operation; a DELETE
  /// of a rule already gone is fine.
  void FirewallOperation(const std::string& method, const std::string& fw_name,
                         const ObjectPtr& body, const std::string& what);
  /// Opens `ports` of a VM to their sources: the ports `sources` narrows in the sources rule
  /// (SetSourcesFirewall; it is deleted when none is narrowed), the others in the 0.0.0.0/0
  /// rule (EnsureFirewall). `exact`: the narrowed ports also leave the 0.0.0.0/0 rule.
  void SetPortRules(const std::string& vm_name, const std::vector<int>& ports,
                    const drivers::PortSources& sources, bool exact);
  /// Makes the rule SourcesFirewallName(vm) allow exactly tcp `ports` from `allow_from`
  /// (created, patched, or deleted when `ports` is empty).
  void SetSourcesFirewall(const std::string& vm_name, const std::vector<int>& ports,
                          const std::vector<std::string>& allow_from);
  /// Takes the single tcp ports `ports` out of a rule's allowed list (ranges stay); deletes
  /// the rule when nothing is left.
  void RemoveFromFirewall(const ObjectPtr& fw, const std::set<int>& ports);
  /// Creates the firewall rule of a VM with `ports` open (tcp, 0.0.0.0/0), or adds to it
  /// those it lacks (AddToFirewall); nothing for no ports.
  void EnsureFirewall(const std::string& vm_name, const std::vector<int>& ports);
  /// Deletes the VM's firewall rules (the 0.0.0.0/0 one and the sources one) where gpuprov
  /// made them; true when one was deleted.
  bool DeleteFirewall(const std::string& vm_name);
  /// Adds to the VM's firewall rule one tcp entry with those of `ports` it does not allow
  /// yet (nothing else of the rule changes); fails when the rule no longer admits 0.0.0.0/0.
  void AddToFirewall(const ObjectPtr& fw, const std::vector<int>& ports);
  /// Which of `ports` the VM's firewall rule opens to 0.0.0.0/0.
  std::vector<int> OpenPortsOf(const std::string& vm_name, const std::vector<int>& ports);
  /// Makes the firewall rule ClusterFirewallName(cluster) admit exactly `ports` from the
  /// instances tagged ClusterNetworkTag(cluster) to them: created (a 409 from a node made at
  /// the same time is fine), patched when its ports or tags differ.
  void EnsureClusterFirewall(const std::string& cluster,
                             const std::vector<drivers::PeerPort>& ports);
  /// Deletes the cluster's firewall rule when no gpuprov instance but `leaving` (being deleted)
  /// carries the cluster's label.
  void RemoveClusterLeftovers(const std::string& cluster, const std::string& leaving);
  /// Deletes an instance and waits; false when it was already gone.
  bool DeleteInstance(const std::string& zone, const std::string& name);

  ObjectPtr VmJson(const ObjectPtr& instance, const std::vector<int>& ports) const;
  /// VmJson, and for a stopped Spot VM that Compute Engine preempted (a zone operation
  /// compute.instances.preempted targets it) state "preempted" with the operation's message.
  ObjectPtr VmJsonWithPreemption(const ObjectPtr& instance, const std::vector<int>& ports);
  /// Warns, naming constraints/compute.requireOsLogin, when the instance's effective metadata
  /// says OS Login is on (then its ssh-keys metadata is ignored and SSH is refused).
  void WarnIfOsLogin(const ObjectPtr& instance);

  gpuprov::sdk::Host host_;
  std::string endpoint_;
  ObjectPtr config_;
  std::string default_region_;
  std::string ssh_user_;
  std::string network_;
  std::string subnetwork_;
  std::chrono::milliseconds poll_interval_{2000};
  std::chrono::seconds operation_timeout_{900};
  drivers::RetryPolicy policy_;
  /// The Compute API (gcp_rules.h ComputeApi): a path not starting with "/" is under
  /// /compute/v1/projects/<project>; the token is renewed once after a 401.
  std::unique_ptr<drivers::ApiClient> api_;
  std::unique_ptr<TokenSource> tokens_;
  std::string project_;
};

}  // namespace gpuprov::gcp
