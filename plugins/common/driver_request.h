// SPDX-License-Identifier: Apache-2.0
//
// Parts of the driver protocol (docs/driver-protocol.md) that every HTTP cloud driver reads or
// writes the same way: the ports and the "gpu" object of a request, the "retry" table of the
// driver settings, and the "vm" result with its port map. Errors in a request are
// DriverError(INVALID_INPUT) naming the field.
#pragma once

#include <Poco/Dynamic/Var.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "retry_policy.h"
#include "vm_rules.h"

namespace gpuprov::drivers {

/// The request member `key` as TCP ports, in request order; empty when absent or null.
/// Throws when it is not an array of numbers in 1..65535.
std::vector<int> PortsOf(const Poco::JSON::Object::Ptr& request, const std::string& key);

/// Who may reach each port of a VM (docs/driver-protocol.md, "allow_from"): the request's
/// "allow_from" CIDRs for the ports in "allow_from_ports", everyone for the others.
struct PortSources {
  std::vector<std::string> allow_from;  // empty: every port open to everyone
  std::set<int> narrowed;               // the ports allow_from applies to

  bool Narrows() const { return !allow_from.empty() && !narrowed.empty(); }
  bool IsNarrowed(int port) const { return Narrows() && narrowed.count(port) > 0; }
  /// The CIDRs `port` is opened to: allow_from for a narrowed port, else "0.0.0.0/0" (and
  /// "::/0" when `with_ipv6`). A narrowed port gets only the IPv4 CIDRs of allow_from when
  /// not `with_ipv6`.
  std::vector<std::string> Of(int port, bool with_ipv6) const;
};

/// The request's "allow_from" and "allow_from_ports". Throws INVALID_INPUT naming the field
/// for something not a canonical CIDR ("10.0.0.0/8", "2001:db8::/32") or a port outside
/// 1..65535, and for IPv6 CIDRs when not `ipv6_allowed` (clouds whose rules take IPv4 only).
PortSources SourcesOf(const Poco::JSON::Object::Ptr& request, bool ipv6_allowed = true);

/// `result_json` (an object) with "allow_from": the sources, as the confirmation the host
/// requires of a create or open_ports that narrowed; unchanged when `sources` narrows nothing.
std::string ConfirmSources(const std::string& result_json, const PortSources& sources);

/// true for "0.0.0.0/0" and "::/0".
bool IsEveryone(const std::string& cidr);

/// `ports` with 22 added, sorted, without repeats.
std::vector<int> WithSsh(std::vector<int> ports);

/// The request's "gpu" object: {"type": "L4", "count": 1} (count defaults to 1).
struct GpuRequest {
  std::string type;
  int count = 1;
};

/// The request's "gpu"; nullopt when absent or null (a CPU VM). Throws when gpu.type is
/// empty or gpu.count is below 1.
std::optional<GpuRequest> ParseGpu(const Poco::JSON::Object::Ptr& request);

/// The request member "ssh_public_key" as given. Throws "ssh_public_key is required: <why>"
/// when it is absent or blank.
std::string RequiredSshPublicKey(const Poco::JSON::Object::Ptr& request, const std::string& why);

/// "named <name>" when the request has a name, else "with id <id>": how messages name the VM
/// a get request asked for.
std::string VmReference(const Poco::JSON::Object::Ptr& request);

/// The RetryPolicy defaults overridden by the "retry" table of the driver's config
/// (max_attempts, base_delay_ms, max_delay_ms, max_retry_after_ms, total_budget_ms,
/// attempt_timeout_ms); the defaults when there is none.
RetryPolicy RetryPolicyFrom(const Poco::JSON::Object::Ptr& config);

/// The "ports" member of a vm object: {"<port>": <port>, ...} in the order given.
Poco::JSON::Object::Ptr PortMap(const std::vector<int>& ports);

/// The tcp ports of firewall rule specs as clouds write them: "22", "8000-8100", "all" or
/// "0" (every port: 1-65535). Malformed specs are skipped.
std::set<int> PortsOfRanges(const std::vector<std::string>& specs);

/// One offer of the `offers` result (docs/driver-protocol.md).
struct OfferFields {
  std::string instance_type;
  std::string gpu_type;  ///< "" for none (written as null)
  int gpu_count = 0;
  std::string region;
  double price_per_hour = 0;
  std::string image;  ///< written only when not empty
  /// The cloud says the offer is in stock now (a live capacity list); nullopt: it does not say.
  std::optional<bool> in_stock{};
  /// Where the price comes from: "live" (the cloud's API now) or "table" (the driver's own
  /// list); "" (not written) when there is no price.
  std::string price_source{};
  /// With "table": the day the driver's prices were written down (YYYY-MM-DD), so a user can
  /// judge how stale they may be; written only then.
  std::string price_date{};
  /// The spot (preemptible) price per hour in USD where the cloud sells the offer as spot
  /// (GPUPROV_CAP_SPOT); 0: sold as spot at a price the driver does not know; nullopt (not
  /// written): not sold as spot, or the driver cannot tell.
  std::optional<double> spot_price_per_hour{};
};
Poco::JSON::Object::Ptr OfferJson(const OfferFields& offer);

/// One VM of the get, list and create results (docs/driver-protocol.md, "vm"): the typed
/// fields every driver fills, written by VmJson in the protocol's order.
struct VmFields {
  std::string id;
  std::string name;
  std::string state;      ///< "pending", "running", "stopped", "error", ...
  std::string public_ip;  ///< "" while there is none
  int ssh_port = 22;
  std::string ssh_user;
  std::string region;
  std::string instance_type;
  std::string image;
  std::string gpus;        ///< "L4:1", "" for none
  std::string created_at;  ///< RFC 3339 or ""
  std::string message;     ///< why the state is what it is; "" when nothing to say
  /// A spot (preemptible) VM (GPUPROV_CAP_SPOT): written as "spot": true, else not written.
  /// A spot VM the cloud took back has state "preempted" and the cloud's reason in message.
  bool spot = false;
  std::vector<int> ports{22};
  /// (port, the port it is reached at) for a cloud that publishes ports elsewhere (a
  /// container's published ports): written as "ports" instead of `ports` when set.
  std::optional<std::vector<std::pair<int, int>>> published_ports;
  /// Written as the "tags" object in this order when set; a cloud without tags leaves it.
  std::optional<std::vector<std::pair<std::string, std::string>>> tags;
  /// ABI 1.5 (GPUPROV_CAP_CLUSTER): written with "cluster" and "role" after "ports" when set
  /// ("" when the cloud gives the VM no private address).
  std::optional<std::string> private_ip;
  std::string cluster;  ///< the gpuprov-cluster tag; "" for none
  std::string role;     ///< the gpuprov-role tag; "" for none
  /// The cloud's own members, written after the protocol's in this order.
  std::vector<std::pair<std::string, Poco::Dynamic::Var>> extra;
};
Poco::JSON::Object::Ptr VmJson(const VmFields& vm);

/// The tags of a [{"key": k, "value": v}, ...] array (nullptr: none), in order.
std::vector<std::pair<std::string, std::string>> KeyValueTags(const Poco::JSON::Array::Ptr& tags);

/// The init settings (docs/driver-protocol.md, init): "endpoint", trimmed, without trailing
/// '/' and without `api_suffix` when it ends with it ("https://host/api/v1" and "https://host"
/// are the same), `default_endpoint` when empty; "config", an empty object when absent;
/// "pacer_dir", the folder PaceCall shares its slots in across processes ("" from a host that
/// does not send it: pacing is then process-wide only).
struct DriverSettings {
  std::string endpoint;
  Poco::JSON::Object::Ptr config;
  std::string pacer_dir;
};
DriverSettings ParseSettings(const std::string& settings_json,
                             const std::string& default_endpoint = "",
                             const std::string& api_suffix = "");

/// A create request whose name follows `rules` and whose user data fits `user_data_limit`
/// (vm_rules.h: CheckUserData with `cloud` and `form`).
struct CreateBasics {
  Poco::JSON::Object::Ptr request;
  std::string name;
  std::string user_data;
};
CreateBasics ParseCreateRequest(const std::string& request_json, const VmNameRules& rules,
                                size_t user_data_limit, const std::string& cloud,
                                const std::string& form = "raw user data");
/// The same for a cloud that takes no user data through its API (the driver passes it on
/// another way, or the host pushes the installer over SSH): user_data as given, unchecked.
CreateBasics ParseCreateRequest(const std::string& request_json, const VmNameRules& rules);

/// The create request asks for a spot (preemptible) VM: "spot": true (ABI 1.5, sent only to a
/// driver with GPUPROV_CAP_SPOT); INVALID_INPUT when "spot" is not a boolean.
bool SpotRequested(const Poco::JSON::Object::Ptr& request);

/// An offers request: its GPU and region ("" in the request: `default_region`).
struct OffersQuery {
  std::optional<GpuRequest> gpu;
  std::string region;
};
OffersQuery ParseOffersRequest(const std::string& request_json, const std::string& default_region);

/// The "id" and "name" of a get/delete/open_ports request; throws INVALID_INPUT "the request
/// needs "id" or "name"" when both are empty.
struct VmRef {
  std::string id;
  std::string name;
};
VmRef RequireIdOrName(const Poco::JSON::Object::Ptr& request);

/// The results {"offers": [...]}, {"vms": [...]} and {"deleted": bool} as JSON text.
std::string OffersResult(const Poco::JSON::Array::Ptr& offers);

/// What a VM powered off from inside (`systemctl poweroff`, gpuprov's TTL on the node) still
/// costs on the cloud, as the cloud's reference states it: nothing, its disk only, or the full
/// price. The offers result carries it as "powered_off_cost" (docs/driver-protocol.md).
enum class PoweredOffCost { kNone, kDisk, kFull };
/// "none", "disk", "full".
const char* PoweredOffCostName(PoweredOffCost cost);
/// {"offers": [...], "powered_off_cost": "none"|"disk"|"full"} as JSON text.
std::string OffersResult(const Poco::JSON::Array::Ptr& offers, PoweredOffCost powered_off);
std::string VmsResult(const Poco::JSON::Array::Ptr& vms);
std::string DeletedResult(bool deleted);

/// One entry of the list_resources result (ABI 1.2): something on the cloud that carries
/// gpuprov's marks.
struct ResourceFields {
  std::string kind;  // "vm", "ssh_key", "firewall", "security_group", "disk", ...
  std::string id;    // what delete_resource takes back with the kind
  std::string name;
  std::vector<std::string> vm_names;  // the gpuprov VMs it belongs to; empty when none
  std::string region;
  std::string created_at;                // RFC 3339 or ""
  std::optional<double> price_per_hour;  // when the cloud says
  /// ABI 1.5: what belongs to a cluster (its nodes' VMs, its cluster_network and
  /// cluster_firewall) names it, and a node's VM its role (its gpuprov-cluster and
  /// gpuprov-role tags); written as "cluster" and "role" when set, so gc knows an agent or a
  /// network whose cluster's server is gone.
  std::string cluster;
  std::string role;
};
/// A resource with its kind, id and name; the other fields are set by the caller.
ResourceFields Resource(std::string kind, std::string id, std::string name);
/// {"resources": [...]} as JSON text, in the given order (the order gc deletes in).
std::string ResourcesResult(const std::vector<ResourceFields>& resources);

/// The delete_resource request {"kind", "id"}: INVALID_INPUT naming the field when either is
/// missing or the kind is not one of \a kinds.
struct ResourceRef {
  std::string kind;
  std::string id;
};
ResourceRef ParseResourceRequest(const std::string& request_json,
                                 const std::set<std::string>& kinds);

/// The get result {"vm": ...}: parses `request_json` (INVALID_INPUT when it is not an object),
/// `find_vm` turns the request into the VM's object, or nullptr when there is no such VM; then
/// NOT_FOUND "no <missing> <VmReference(request)><where>" (e.g. "no gpuprov instance named a
/// on Lambda").
std::string GetVmResult(
    const std::string& request_json, const std::string& missing, const std::string& where,
    const std::function<Poco::JSON::Object::Ptr(const Poco::JSON::Object::Ptr& request)>& find_vm);

/// {"vm": <vm>} or, when `existing` is set, {"vm": <vm>, "existing": <existing>} as JSON text.
std::string VmResult(const Poco::JSON::Object::Ptr& vm,
                     std::optional<bool> existing = std::nullopt);

}  // namespace gpuprov::drivers
