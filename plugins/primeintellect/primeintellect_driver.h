// SPDX-License-Identifier: Apache-2.0
//
// The "primeintellect" driver: GPU pods on Prime Intellect's aggregator API
// (REFERENCE.md). A pod is placed on an upstream provider chosen by the offer, so
// the SSH user and port are read from the pod's sshConnection, never assumed.
//
// Capabilities: VM lifecycle, hosting Kubernetes, clusters and spot pods (isSpot offers,
// README.md "Spot pods"). Prime Intellect has no boot script (no user-data field) and no API to
// open ports, so the host takes the SSH route and tunnel mode (kubeconfig on
// https://127.0.0.1:16443).
//
// Settings (docs/driver-protocol.md, init): "endpoint" (default https://api.primeintellect.ai;
// a trailing /api/v1 is accepted); config keys: the table at the end of
// primeintellect_driver.cc, listed in README.md, "Settings" (vm_providers: comma-separated,
// default kDefaultVmProviders).
//
// With Kubernetes on ("kubernetes" in the offers and create requests; absent means on, gpuprov's
// default) only offers of providers on vm_providers are used: the others give containers, where
// systemd is not PID 1 and k3s cannot run. The skipped offers are reported through progress.
//
// Credentials: $PRIME_API_KEY, else "api_key" in ~/.prime/config.json (the prime CLI's file);
// team: $PRIME_TEAM_ID, else config team_id, else "team_id" in that file. Never logged.
#pragma once

#include <Poco/JSON/Object.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api_client.h"
#include "credentials.h"
#include "gpuprov/sdk.hpp"
#include "offers.h"
#include "retry_policy.h"

namespace gpuprov::primeintellect {

class PrimeIntellectDriver {
 public:
  static constexpr const char* kName = "primeintellect";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "Prime Intellect GPU pods (aggregated providers); SSH route, tunnel mode";
  static constexpr uint64_t kCapabilities =
      GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_HOSTS_KUBERNETES | GPUPROV_CAP_CLUSTER |
      GPUPROV_CAP_SPOT;
  /// How a VM learns its public address: no metadata service, and the upstream provider's network is unknown; REFERENCE.md §6.
  static constexpr const char* kNodeAddress = GPUPROV_NODE_ADDRESS_NONE;

  explicit PrimeIntellectDriver(const gpuprov::sdk::InitContext& ctx);
  ~PrimeIntellectDriver();

  std::string Check(const std::string& request_json);
  std::string Offers(const std::string& request_json);
  std::string Create(const std::string& request_json);
  std::string Get(const std::string& request_json);
  std::string List(const std::string& request_json);
  std::string Delete(const std::string& request_json);
  /// gpuprov's live pods (named gpuprov-<VM name>) with their price, then gpuprov's account
  /// SSH keys (gpuprov-<hash>): `gpuprov gc` (ABI 1.2).
  std::string ListResources(const std::string& request_json);
  /// One of those by kind ("vm", "ssh_key") and id, read again first; refused when its name
  /// does not start with gpuprov-.
  std::string DeleteResource(const std::string& request_json);
  /// ABI 1.5. Prime Intellect has no private network and no firewall API (REFERENCE.md): a
  /// cluster's pods reach each other on their public addresses, and the node firewall the
  /// installer sets up (--peer) admits exactly the peers. Checks the request, changes nothing.
  std::string OpenPeerPorts(const std::string& request_json);

 private:
  using ObjectPtr = Poco::JSON::Object::Ptr;

  /// $PRIME_TEAM_ID, else config team_id, else team_id in ~/.prime/config.json; "" if none.
  std::string TeamId() const;

  /// Every availability item for the query's GPU (all pages).
  std::vector<Offer> FetchAvailability(const OfferQuery& query);
  /// Every pod of the account (all pages), TERMINATED ones included.
  std::vector<ObjectPtr> ListPods();
  /// The live pod (not TERMINATED/DELETING) named gpuprov-<name>, or nullptr.
  ObjectPtr FindPodByName(const std::string& name);
  /// GET /pods/{id}; nullptr on 404.
  ObjectPtr GetPod(const std::string& id);
  /// The pod a get/delete request names by "id" or, failing that, "name"; nullptr if none.
  ObjectPtr Resolve(const ObjectPtr& request);
  /// Every SSH key of the account (all pages).
  std::vector<ObjectPtr> ListKeys();
  /// DELETE /pods/{id}, then waits (bounded) until it is gone or TERMINATED. False when it was
  /// already gone (404); `finished` tells whether the deletion ended within the wait.
  bool DeletePod(const ObjectPtr& pod, bool* finished);
  /// Makes sure the public key is registered on the account.
  /// Registers the key on the account unless it is there; returns its id ("" if unknown).
  std::string EnsureSshKey(const std::string& public_key);
  /// Deletes the account keys gpuprov registered (named gpuprov-<hash>) once the account has no
  /// live pod left: pods carry no tags, so no pod left is the only sure sign that none needs it.
  void DeleteOwnKeysIfNoPods();
  /// POST /pods/ without blind retries: 429 waits and retries; a 5xx or lost connection looks
  /// for the pod by name first, since the create may have happened, then tries again.
  ObjectPtr CreatePod(const std::string& body, const std::string& name);
  /// With Kubernetes on: the in-stock matching offers from VM providers, the others reported
  /// as skipped through progress. Throws INVALID_INPUT naming the skipped offers and the fix
  /// when none is left (CAPACITY when VM offers exist but are out of stock).
  std::vector<Offer> VmOffersOnly(const std::vector<Offer>& available,
                                  const std::vector<Offer>& in_stock, const OfferQuery& query);

  gpuprov::sdk::Host host_;
  std::string endpoint_;
  std::string endpoint_origin_;  ///< where endpoint_ came from, for messages
  std::string config_team_id_;
  std::string default_image_;
  std::vector<std::string> vm_providers_;
  gpuprov::drivers::RetryPolicy policy_;
  std::chrono::milliseconds poll_interval_{5000};
  std::chrono::seconds delete_timeout_{600};
  /// The API (401/403 AUTH, 402 QUOTA, 404 NOT_FOUND, capacity words CAPACITY, 400/409/422
  /// INVALID_INPUT); the key, found on first use, never appears in a message.
  std::unique_ptr<gpuprov::drivers::ApiClient> api_;
};

}  // namespace gpuprov::primeintellect
