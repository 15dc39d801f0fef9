// SPDX-License-Identifier: Apache-2.0
//
// The Compute Engine rules of the gcp driver that need no network, unit-tested directly:
// names, labels and network tags, metadata limits, instance states, zones, and how an API
// error (HTTP body or a finished operation's error) becomes a gpuprov status.
// Reference: REFERENCE.md.
#pragma once

#include <Poco/JSON/Object.h>

#include <map>
#include <string>
#include <vector>

#include "api_client.h"
#include "gpuprov/driver_abi.h"
#include "tags.h"
#include "vm_rules.h"

namespace gpuprov::gcp {

inline constexpr const char* kDefaultEndpoint = "https://compute.googleapis.com";
inline constexpr const char* kApiPath = "/compute/v1";
inline constexpr const char* kDefaultRegion = "us-central1";
inline constexpr const char* kDefaultSshUser = "ubuntu";
/// The labels every instance gpuprov makes carries (gpuprov=1, gpuprov-name=<name>), and the
/// prefix of the firewall rule and network tag made per VM ("gpuprov-<name>"): the kit's.
using drivers::kResourcePrefix;
inline constexpr const char* kManagedLabel = drivers::kManagedTag;
inline constexpr const char* kNameLabel = drivers::kNameTag;
/// The longest VM name: "gpuprov-<name>" must stay a valid 63-character GCE name.
inline constexpr size_t kMaxVmNameLength = 55;
/// Metadata value limit (REFERENCE.md §4): 256 KiB per value.
inline constexpr size_t kMaxMetadataValueBytes = 262144;

/// VM names: GCE names ([a-z]([-a-z0-9]*[a-z0-9])?) of at most kMaxVmNameLength characters.
inline const drivers::VmNameRules kVmNameRules{
    .what = "a Compute Engine instance name",
    .max_length = kMaxVmNameLength,
    .lower_case_only = true,
    .letter_first = true,
    .note = "gpuprov adds \"gpuprov-\" for its firewall rule, and GCE names stop at 63"};

/// "gpuprov-<name>": the firewall rule name and the network tag it targets.
std::string FirewallName(const std::string& vm_name);

/// "gpuprov-src-<first 16 hex of sha256(vm name)>": the VM's second firewall rule, which opens
/// the ports --allow-from narrows to those sources only (GCE takes one sourceRanges list per
/// rule); it targets the VM's tag FirewallName(vm_name). Fits 63 characters for any VM name.
std::string SourcesFirewallName(const std::string& vm_name);

inline constexpr const char* kClusterNetworkTagPrefix = "gpuprov-cluster-";
/// "gpuprov-cluster-<cluster>": the network tag every node of a cluster carries, the source and
/// the target of the cluster's firewall rule ClusterFirewallName. Throws
/// DriverError(INVALID_INPUT) when it would pass 63 characters (a GCE name).
std::string ClusterNetworkTag(const std::string& cluster);
/// "gpuprov-<cluster>-peers": the VPC firewall rule that admits the peer ports between the
/// instances tagged ClusterNetworkTag(cluster).
std::string ClusterFirewallName(const std::string& cluster);

/// A label key: lower case, [a-z0-9_-], starting with a letter (prefixed "k-" otherwise),
/// at most 63 characters; "" for an empty input.
std::string LabelKey(const std::string& s);
/// A label value: lower case, [a-z0-9_-] (others become '_'), at most 63 characters.
std::string LabelValue(const std::string& s);

/// GCE status -> gpuprov state: PROVISIONING/STAGING/REPAIRING -> pending, RUNNING ->
/// running, STOPPING/STOPPED/SUSPENDING/SUSPENDED/TERMINATED -> stopped (TERMINATED is a
/// stopped instance, not a deleted one: REFERENCE.md §3.2), anything else -> error.
std::string StateOf(const std::string& gce_status);

/// True for a zone name ("us-central1-a"), false for a region ("us-central1").
bool IsZone(const std::string& location);
/// The region of a zone ("us-central1-a" -> "us-central1"); a region is returned as is.
std::string RegionOf(const std::string& location);
/// The last path segment of a URL or partial URL ("zones/us-central1-a" -> "us-central1-a").
std::string LastSegment(const std::string& url);

/// "user:<key line>" for the ssh-keys metadata item (REFERENCE.md §3.6); throws
/// DriverError(INVALID_INPUT) when the key is not one OpenSSH public key line.
std::string SshKeysEntry(const std::string& user, const std::string& public_key);
/// The user of the first "user:key" line of an ssh-keys value, or "".
std::string SshUserOf(const std::string& ssh_keys_value);

/// One API error: the HTTP status, the first reason, the message.
struct ApiError {
  int http_status = 0;
  std::string reason;   ///< errors[0].reason, e.g. "quotaExceeded", "alreadyExists"
  std::string message;  ///< error.message
};
/// Parses {"error": {"code", "message", "errors": [{"reason", "message"}], "status"}};
/// unparseable bodies give the raw text, cut short.
ApiError ParseApiError(int http_status, const std::string& body);

/// The status for a synchronous API error (REFERENCE.md §8): 400 INVALID_INPUT, 401 AUTH,
/// 403 quotaExceeded QUOTA, 403 rateLimitExceeded/userRateLimitExceeded TRANSIENT, other
/// 403 AUTH, 404 NOT_FOUND, 429 and 5xx TRANSIENT, else FAILED.
gpuprov_type_status ClassifyApiError(const ApiError& e);
/// True for 403 rate-limit reasons, which are retried with backoff like 429.
bool IsRateLimit(const ApiError& e);

/// The Compute API as the kit's API client speaks it: errors read by ParseApiError ("HTTP 403
/// quotaExceeded: <message>"), classified by ClassifyApiError, 403 rate limits retried
/// (IsRateLimit), and the hints of a refused call. The driver adds the base path
/// (/compute/v1/projects/<project>) and the hint fields {project}, {account} (the service
/// account, else where the credentials came from) and {origin}.
drivers::ApiDialect ComputeApi();

/// A finished operation's error: every errors[] entry.
struct OperationError {
  std::string code;     ///< first errors[].code, e.g. "ZONE_RESOURCE_POOL_EXHAUSTED"
  std::string message;  ///< the messages joined with "; "
  std::vector<std::string> zones_available;  ///< errorDetails[].errorInfo.metadatas.zonesAvailable
};
/// nullopt-like: an empty code when the operation has no error.
OperationError ParseOperationError(const Poco::JSON::Object::Ptr& operation);
/// CAPACITY for ZONE_/REGION_RESOURCE_POOL_EXHAUSTED(_WITH_DETAILS), RESOURCE_POOL_EXHAUSTED,
/// GPU_STOCKOUT, UNSUPPORTED_OPERATION and insufficientCapacity; QUOTA for QUOTA_EXCEEDED;
/// TRANSIENT for RESOURCE_NOT_READY, INTERNAL_ERROR and RESOURCE_OPERATION_RATE_EXCEEDED;
/// else FAILED.
gpuprov_type_status ClassifyOperationError(const std::string& code);

/// The pseudo-code the driver gives an insert whose operation finished without error but
/// whose instance is gone (404) right after.
inline constexpr const char* kGoneAfterCreate = "INSTANCE_GONE_AFTER_CREATE";

/// What a create does when the insert in one zone failed with an operation error `code`
/// (or kGoneAfterCreate): try the next zone of the region, or stop with `status`.
struct ZoneFailure {
  bool next_zone = false;
  gpuprov_type_status status = GPUPROV_STATUS_FAILED;  ///< CAPACITY, TRANSIENT, QUOTA, ...
  std::string reason;  ///< why, for the progress line and the final error
};
/// The decision table (one test per row in gcp_rules_test.cc). From SkyPilot's GCP failover
/// (skypilot-org/skypilot sky/backends/cloud_vm_ray_backend.py `_gcp_handler`), which moves
/// on to the next zone for ZONE_RESOURCE_POOL_EXHAUSTED(_WITH_DETAILS), UNSUPPORTED_OPERATION
/// and insufficientCapacity (capacity), for RESOURCE_NOT_FOUND after an insert ("this zone is
/// most likely out of capacity", skypilot#1797) and blocks the zone on
/// RESOURCE_OPERATION_RATE_EXCEEDED. Every other code stops the create.
ZoneFailure ClassifyZoneFailure(const std::string& code);

/// True when an API error's message names the organization policy that enforces OS Login
/// (constraints/compute.requireOsLogin).
bool IsOsLoginPolicyError(const std::string& message);
/// What to do when OS Login is enforced on a project: Compute Engine then ignores the
/// ssh-keys metadata gpuprov logs in with.
std::string OsLoginPolicyHint(const std::string& project);
/// The boot disk type a machine type takes: "hyperdisk-balanced" for the series that support
/// only Hyperdisk (A3 Ultra a3-ultragpu-*, A4 a4-*, N4 n4-*), else "pd-balanced".
std::string BootDiskType(const std::string& machine_type);

}  // namespace gpuprov::gcp
