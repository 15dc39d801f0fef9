// SPDX-License-Identifier: Apache-2.0
//
// The Hyperstack-specific rules of the driver that need no network, kept apart so they are
// unit-tested directly: where the API key comes from, the flavor catalogue (reference section
// 7), names and labels of what the driver makes, status words, security rules, and how an API
// error becomes a gpuprov status. Reference: REFERENCE.md.
#pragma once

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api_client.h"
#include "catalogue.h"
#include "cluster_request.h"
#include "credentials.h"
#include "driver_request.h"
#include "gpuprov/driver_abi.h"
#include "vm_rules.h"

namespace gpuprov::hyperstack {

inline constexpr const char* kDefaultEndpoint = "https://infrahub-api.nexgencloud.com/v1";
/// The region used when neither the request nor config.toml names one (most flavors,
/// REFERENCE.md §7).
inline constexpr const char* kDefaultRegion = "CANADA-1";
/// SkyPilot's default image, with the NVIDIA driver and CUDA (REFERENCE.md §9); CPU VMs get plain
/// Ubuntu.
inline constexpr const char* kDefaultGpuImage = "Ubuntu Server 22.04 LTS R535 CUDA 12.2";
inline constexpr const char* kDefaultCpuImage = "Ubuntu Server 22.04 LTS";
inline constexpr const char* kSshUser = "ubuntu";
/// Labels on every VM the driver makes: "gpuprov" and "gpuprov-name=<name>".
inline constexpr const char* kManagedLabel = "gpuprov";
inline constexpr const char* kNameLabelPrefix = "gpuprov-name=";
/// Raw user data accepted. The reference has no confirmed limit; OpenStack caps the base64
/// form at 64 KiB (49152 raw bytes): half of that keeps "well below", as REFERENCE.md §3.1 advises.
inline constexpr size_t kMaxUserDataBytes = 32 * 1024;

/// VM names: at most 50 characters (REFERENCE.md §3.1); letters, digits and '-' so they also make
/// readable labels and environment-free host names.
inline const drivers::VmNameRules kVmNameRules{.what = "a Hyperstack VM name",
                                               .max_length = 50,
                                               .punctuation = "-",
                                               .note = "Hyperstack allows 50 characters"};

/// The API key: the variable named by config.token_env, then $HYPERSTACK_API_KEY, then
/// config.token (config.toml), then the file config.api_key_file, else ~/.hyperstack/api_key
/// (SkyPilot's file: the key on one line).
std::optional<drivers::Credential> ResolveApiKey(const Poco::JSON::Object::Ptr& config);

/// What to tell a user whose key is missing or refused.
std::string ApiKeyHint();

/// "gpuprov-<region>": the environment the driver uses (or creates once) in a region.
std::string EnvironmentName(const std::string& region);

/// "gpuprov-<first 16 hex digits of the key's MD5 fingerprint>": the key pair imported for a
/// public key. Throws DriverError(INVALID_INPUT) when the line is not an OpenSSH public key.
std::string KeyPairName(const std::string& public_key_line);

/// "<type> <base64>" of an OpenSSH public key line (the comment dropped): how key pairs are
/// compared (SkyPilot's rule, REFERENCE.md §3.6).
std::string KeyIdentity(const std::string& public_key_line);

/// The labels of a VM: gpuprov's two, then the user's tags as "key=value" (or "key").
std::vector<std::string> VmLabels(const std::string& vm_name,
                                  const Poco::JSON::Object::Ptr& request);

/// The labels of a cluster node besides VmLabels': "gpuprov-cluster=<cluster>" and
/// "gpuprov-role=<role>" (the key=value form of the user's tags), which TagsOf reads back.
std::vector<std::string> ClusterLabels(const drivers::ClusterRequest& cluster);

/// True when a VM object carries the "gpuprov" label.
bool IsManaged(const Poco::JSON::Object::Ptr& vm);

/// A VM object's labels as tags ({"gpuprov": "1", "gpuprov-name": name, user tags}).
std::vector<std::pair<std::string, std::string>> TagsOf(const Poco::JSON::Object::Ptr& vm);

/// gpuprov's state for a VM object, and the message that goes with it.
struct VmState {
  std::string state;    ///< pending|running|stopped|terminated|error
  std::string message;  ///< why, in Hyperstack's words ("" when running)
};
/// Upper-case status words (REFERENCE.md §3.2.1):
/// CREATING/BUILD/STARTING/REBOOTING/HARD_REBOOT/RESTORING and unknown words -> pending; ACTIVE ->
/// running once the floating IP is ATTACHED (pending before: the window where a VM is ACTIVE
/// without its address); STOPPING/SHUTOFF/ HIBERNATING/HIBERNATED -> stopped; DELETING/DELETED ->
/// terminated; ERROR -> error with what the VM object says about it.
VmState StateOf(const Poco::JSON::Object::Ptr& vm);

/// The public address of a VM object: floating_ip once floating_ip_status is ATTACHED.
std::string PublicIp(const Poco::JSON::Object::Ptr& vm);

/// Whether a VM object says its floating IP's ports are randomized: `port_randomization`
/// true, or `port_randomization_status` "ENABLED" (H-SDK InstanceFields has both; which one the
/// API fills, and what randomization changes, is unconfirmed:
/// REFERENCE.md §H3). The driver creates with it off; when a VM reports it
/// on anyway, SSH may not be on port 22 and the VM's message says so.
bool PortRandomized(const Poco::JSON::Object::Ptr& vm);

/// One ingress rule for a tcp port from `cidr` (IPv4), everywhere by default (REFERENCE.md §5).
Poco::JSON::Object::Ptr IngressRule(int port, const std::string& cidr = "0.0.0.0/0");

/// The rules that open each of `ports` to its sources (IPv4: Hyperstack's rules here are
/// ethertype IPv4): one per port and source.
Poco::JSON::Array::Ptr IngressRules(const std::vector<int>& ports,
                                    const drivers::PortSources& sources);

// --- a cluster's peer rules (open_peer_ports) ----------------------------------------------

/// A cluster node admits each peer port from each other node's address with a rule of its
/// own: ingress, IPv4, one port, remote_ip_prefix "<address>/32" (REFERENCE.md §5; a new VM
/// admits no incoming traffic at all, from its environment's private network neither, until a
/// rule allows it).
Poco::JSON::Object::Ptr PeerRule(const drivers::PeerPort& port, const std::string& address);

/// Whether a security rule is one open_peer_ports manages: ingress, IPv4, one port, from a
/// single private (RFC 1918) address "/32" — a peer's fixed_ip — on a port and protocol of
/// `ports`, or on any tcp or udp port when `ports` is empty. A user's --allow-from of 6443
/// from a private /32 would look the same; gpuprov's own rules from the internet never do.
bool IsPeerRule(const Poco::JSON::Object::Ptr& rule,
                const std::vector<drivers::PeerPort>& ports = {});

/// What to change on one node so it admits exactly `ports` from each of `addresses` (the other
/// nodes'): the rules to add, and the ids of its peer rules (IsPeerRule) for anything else.
struct PeerRuleChange {
  std::vector<Poco::JSON::Object::Ptr> add;
  std::vector<std::string> remove_ids;
};
PeerRuleChange PlanPeerRules(const Poco::JSON::Object::Ptr& vm,
                             const std::vector<drivers::PeerPort>& ports,
                             const std::vector<std::string>& addresses);

/// The tcp ports that a VM object's security_rules open from 0.0.0.0/0 (ingress, IPv4, tcp or
/// any protocol; ranges port by port, capped at 1-65535); from any source when not
/// `world_only` (peer rules, IsPeerRule, aside: they open nothing to the user).
std::set<int> OpenTcpPorts(const Poco::JSON::Object::Ptr& vm, bool world_only = true);

/// What to change so narrowed `port` is open to exactly its sources: the CIDRs to add, and the
/// ids of the VM's single-port ingress tcp IPv4 rules of that port from other sources (peer
/// rules, IsPeerRule, are open_peer_ports' and left alone).
struct RuleChange {
  std::vector<std::string> add;
  std::vector<std::string> remove_ids;
};
RuleChange PlanRules(const Poco::JSON::Object::Ptr& vm, int port,
                     const drivers::PortSources& sources);

/// Hyperstack's error envelope {"status":false,"message","error_reason"} -> "message
/// (error_reason)"; the legacy {"message"} body or raw text cut short otherwise.
std::string ApiMessage(const std::string& body);
/// The error_reason of an error body, or "".
std::string ErrorReason(const std::string& body);

/// Hyperstack's API as the kit's client reads it (api_client.h): the envelope (ApiMessage),
/// StatusOfError, the hints a refused call ends with, the "api_key" header.
drivers::ApiDialect HyperstackApi();
drivers::ApiAuth HyperstackAuth(const Poco::JSON::Object::Ptr& config);

/// The status of a failed answer: by error_reason (the table in hyperstack_rules.cc), then
/// by HTTP status; a 400/409 whose message speaks of stock or capacity is CAPACITY, one about
/// balance or payment QUOTA.
gpuprov_type_status StatusOfError(int http_status, const std::string& body);

/// True for the 400/409 a delete gets while the VM is still being created (REFERENCE.md §3.4).
bool IsStillBeingCreated(const std::string& body);

// --- flavors (REFERENCE.md §7) -------------------------------------------------------------------

/// One flavor as the driver knows it: from the live `GET /core/flavors` list or the built-in
/// table of the reference.
struct Flavor {
  std::string name;  ///< "n3-H100x1"
  std::string gpu;   ///< the flavor's gpu field, "H100-80G-PCIe"; "" for a CPU flavor
  int gpu_count = 0;
  std::string region;  ///< "CANADA-1"
  bool stock_available = true;
};

/// The flavors of the table of REFERENCE.md (§7) with the regions it saw them in: the fallback
/// when the live list cannot be read.
const std::vector<Flavor>& KnownFlavors();

/// A GPU name as gpuprov writes it ("H100", "A100", "L40", "RTX-A6000", "RTX-A4000"), from a
/// request ("h100", "rtx_a6000", "A6000", "NVIDIA H100") or a flavor's gpu field
/// ("H100-80G-PCIe", "A100-80G-PCIe-NVLink"): the memory and form suffixes are dropped.
/// nullopt for "" and for L40S, which Hyperstack does not have (its L40 is another GPU).
std::optional<std::string> CanonicalGpu(const std::string& name);

/// The flavor names gpuprov picks first for a GPU count when several have it (the PCIe
/// "n3-<GPU>x<n>" form before the NVLink and SXM5 variants).
bool IsPreferredFlavor(const std::string& flavor_name);

/// Flavors as the kit's catalogue (rows in the same order), with `cpu_flavor` as the default
/// without a GPU. Messages name what these flavors offer.
drivers::Catalogue FlavorCatalogue(const std::vector<Flavor>& flavors,
                                   const std::string& cpu_flavor);

/// The name of a CPU flavor among `flavors` (the first without a GPU), or "n1-cpu-small".
std::string CpuFlavor(const std::vector<Flavor>& flavors);

/// The flavors of a `GET /core/flavors` answer ({"data":[{"flavors":[...]}]}).
std::vector<Flavor> ParseFlavors(const Poco::JSON::Object::Ptr& doc);

/// "H100:1" for a flavor with GPUs, "" otherwise.
std::string GpusOf(const Flavor& flavor);

// --- prices ----------------------------------------------------------------------------------

/// GET /pricebook (H-SDK PricebookApi.get_pricebook: a JSON array of PricebookModel {id, name,
/// value, original_value, discount_applied, start_time, end_time}; the API reference's example
/// names a GPU model, "RTX-A4000", with `value` "price value for the GPU per hour") as name ->
/// USD per GPU-hour. `value` may be a number or a numeric string (SkyPilot's
/// fetch_hyperstack.py converts it with float()); entries without a usable value are skipped.
std::map<std::string, double> ParsePricebook(const std::string& body);

/// A flavor's price per hour: its GPU model's pricebook value times its GPU count (as
/// SkyPilot's catalogue fetcher computes it); nullopt for a CPU flavor or a GPU the pricebook
/// does not name.
std::optional<double> FlavorPrice(const std::map<std::string, double>& pricebook,
                                  const Flavor& flavor);

}  // namespace gpuprov::hyperstack
