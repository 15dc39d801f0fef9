// SPDX-License-Identifier: Apache-2.0
//
// The "lambda" driver: Lambda Cloud on-demand GPU instances over the Lambda Cloud API v1.
//
// Settings (docs/driver-protocol.md, init): "endpoint" (default https://cloud.lambda.ai/api/v1;
// GPUPROV_LAMBDA_ENDPOINT; http:// only for a loopback emulator); config keys:
//   region              default region when the request names none
//   api_key_env         name of an environment variable holding the API key (checked first)
//   api_key_file        the SkyPilot-style keys file (default ~/.lambda_cloud/lambda_keys)
//   firewall            "ruleset" (default: a firewall ruleset per VM, attached at launch) or
//                       "account" (gpuprov's rules in the account-wide list)
//   pacing              {request_interval_ms (1000), launch_interval_ms (12000)}
//   delete_wait_seconds how long delete waits for the instance to go (default 600)
//   retry               {max_attempts, base_delay_ms, ...} (tests compress them)
// What it makes per VM: the instance (name = VM name, tags gpuprov=1 and gpuprov-name), a
// firewall ruleset "gpuprov-<name>" (or its name in gpuprov's account-wide rules), and at most
// one SSH key "gpuprov-<hash>" shared by every VM with the same public key. A cluster node
// (ABI 1.5) is an instance tagged gpuprov-cluster / gpuprov-role; Lambda's firewall filters only
// what comes from public addresses, so its peers reach it on its private_ip unfiltered and the
// node firewall admits only them there (README.md, "Clusters").
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
#include "driver_request.h"
#include "gpuprov/sdk.hpp"

namespace gpuprov::lambda {

class LambdaDriver {
 public:
  static constexpr const char* kName = "lambda";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "Lambda Cloud on-demand GPU instances (API v1): instances, firewall rulesets, SSH keys";
  static constexpr uint64_t kCapabilities = GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_BOOT_CLOUD_INIT |
                                            GPUPROV_CAP_OPEN_PORTS | GPUPROV_CAP_HOSTS_KUBERNETES |
                                            GPUPROV_CAP_CLUSTER;
  /// How a VM learns its public address: no metadata service; the address on the interface when not NATed (unconfirmed); REFERENCE.md §6.
  static constexpr const char* kNodeAddress = GPUPROV_NODE_ADDRESS_INTERFACE;

  explicit LambdaDriver(const gpuprov::sdk::InitContext& ctx);

  std::string Check(const std::string& request_json);
  std::string Offers(const std::string& request_json);
  std::string Create(const std::string& request_json);
  std::string Get(const std::string& request_json);
  std::string List(const std::string& request_json);
  std::string Delete(const std::string& request_json);
  std::string OpenPorts(const std::string& request_json);
  /// ABI 1.5: checks the request; nothing to set on Lambda (README.md, "Clusters").
  std::string OpenPeerPorts(const std::string& request_json);
  // `gpuprov gc` (ABI 1.2): gpuprov's instances, rulesets, account-wide rules (per VM name) and
  // SSH keys.
  std::string ListResources(const std::string& request_json);
  std::string DeleteResource(const std::string& request_json);

 private:
  using ObjectPtr = Poco::JSON::Object::Ptr;

  /// The "data" member of a call's answer as an object / array (FAILED when missing).
  static ObjectPtr DataObject(const drivers::ApiAnswer& a, const std::string& what);
  static Poco::JSON::Array::Ptr DataArray(const drivers::ApiAnswer& a, const std::string& what);

  /// Every non-terminated instance of the account.
  std::vector<ObjectPtr> Instances();
  /// The live gpuprov instance called name, or nullptr; a live same-named instance without
  /// gpuprov's tag is reported in *foreign.
  ObjectPtr FindByName(const std::string& name, bool* foreign = nullptr);
  /// GET /instances/{id}, or nullptr when Lambda says it does not exist.
  ObjectPtr InstanceById(const std::string& id);
  /// The gpuprov instance a get/delete/open_ports request names by "id" or "name", or nullptr.
  ObjectPtr Resolve(const ObjectPtr& request);

  /// POST /instance-operations/launch without ever making two: after a 5xx or a lost answer
  /// it looks for the name before trying again. Drops fields an older API refuses
  /// (user_data, image, firewall_rulesets), saying so. Returns the instance id.
  std::string Launch(const std::string& name, ObjectPtr body, bool* rulesets_refused);

  struct SshKey {
    std::string id;
    std::string name;
    bool created = false;  // registered by this call
  };
  SshKey EnsureSshKey(const std::string& public_key);
  /// Deletes gpuprov's key `key_name` unless a live gpuprov instance other than `except_id`
  /// still uses it.
  void DeleteKeyIfUnused(const std::string& key_name, const std::string& except_id);
  /// DELETE /ssh-keys/{id}: true when deleted, false when it was already gone.
  bool DeleteSshKey(const std::string& id, const std::string& key_name);

  /// The ruleset "gpuprov-<vm>" in region (any region when ""), or nullptr.
  ObjectPtr FindRuleset(const std::string& vm_name, const std::string& region);
  /// The VM's ruleset with at least `ports` open to their `sources` (created, or changed as
  /// lambda::OpenInRuleset says with `exact`). Returns its id.
  std::string EnsureRuleset(const std::string& vm_name, const std::string& region,
                            const std::vector<int>& ports, const drivers::PortSources& sources,
                            bool exact, bool* created);
  void DeleteRuleset(const ObjectPtr& ruleset);
  /// Throws INVALID_INPUT naming allow_from: the account-wide rules cannot narrow one VM.
  [[noreturn]] void RefuseAccountNarrowing(const std::string& vm_name);
  /// Warns when the account-wide rules (applied to every instance beside its ruleset) open a
  /// port `sources` narrows to a source outside allow_from (Lambda's default opens 22).
  void WarnAccountWideSources(const std::string& vm_name, const std::string& region,
                              const drivers::PortSources& sources);
  /// Throws INVALID_INPUT: only the account-wide rules could open `ports` for the VM, and they
  /// do not apply in `region` (lambda::AccountRulesApply).
  [[noreturn]] void RefuseWithoutAccountRules(const std::string& vm_name,
                                              const std::string& region,
                                              const std::vector<int>& ports);
  /// Read, add this VM's ports to gpuprov's rules, write (the user's rules kept).
  void AddAccountRules(const std::string& vm_name, const std::vector<int>& ports);
  /// Read, remove this VM (and VMs that no longer exist) from gpuprov's rules, write.
  void RemoveAccountRules(const std::string& vm_name);
  /// Opens ports for an existing instance the way it was made (its ruleset, else the
  /// account-wide rules, which cannot narrow sources: INVALID_INPUT when `sources` narrows).
  void OpenFor(const ObjectPtr& instance, const std::vector<int>& ports,
               const drivers::PortSources& sources, bool exact);
  /// Waits (cancellable, bounded) until the instance is gone from the API.
  void WaitGone(const std::string& id, const std::string& name);

  /// The protocol's vm object; `image` is what create asked for (Lambda's Instance has no
  /// image field).
  ObjectPtr VmJson(const ObjectPtr& instance, const std::vector<int>& ports = {22},
                   const std::string& image = "") const;

  gpuprov::sdk::Host host_;
  std::string endpoint_;
  std::string default_region_;
  bool account_firewall_ = false;
  std::chrono::milliseconds request_interval_;
  std::chrono::milliseconds launch_interval_;
  std::chrono::seconds delete_wait_;
  ObjectPtr config_;
  std::unique_ptr<drivers::ApiClient> api_;
};

}  // namespace gpuprov::lambda
