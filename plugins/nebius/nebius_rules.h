// SPDX-License-Identifier: Apache-2.0
//
// The parts of the nebius driver that need neither the network nor gRPC (reference:
// REFERENCE.md): the platform/preset table, endpoints, the service-account
// credentials file and its JWT, the nebius CLI's profile file, gRPC code + ServiceError detail
// -> driver status, instance state -> VM state, the cloud-init user data, names and labels.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "catalogue.h"
#include "driver_request.h"
#include "gpuprov/sdk.hpp"
#include "vm_rules.h"

namespace gpuprov::nebius {

/// The real services' addresses (REFERENCE.md §0, endpoints.md).
inline constexpr const char* kComputeEndpoint = "compute.api.nebius.cloud:443";
inline constexpr const char* kVpcEndpoint = "vpc.api.nebius.cloud:443";
inline constexpr const char* kTokensEndpoint = "tokens.iam.api.nebius.cloud:443";

/// Image families (REFERENCE.md §9): NVIDIA driver + CUDA for GPU platforms, plain for CPU.
inline constexpr const char* kGpuImageFamily = "ubuntu24.04-cuda13.0";
inline constexpr const char* kCpuImageFamily = "ubuntu24.04-driverless";
inline constexpr const char* kDefaultSshUser = "ubuntu";
inline constexpr const char* kDefaultRegion = "eu-north1";
/// spec.cloud_init_user_data holds at most 32768 characters (REFERENCE.md §4).
inline constexpr size_t kMaxCloudInitBytes = 32768;
/// What the host's boot script may take: the limit less the cloud-config part with the SSH
/// key and the MIME framing that MakeUserData wraps around it (a key line is < 2 KiB).
inline constexpr size_t kUserDataLimit = kMaxCloudInitBytes - 3072;

/// Instance names: Nebius allows up to 1024 bytes; gpuprov keeps to hostname-like names so the
/// security group ("gpuprov-<name>") and disk ("<name>-boot") names stay valid too.
inline const drivers::VmNameRules kVmNameRules{
    .what = "a Nebius instance name",
    .max_length = 63,
    .lower_case_only = true,
    .letter_first = true,
    .punctuation = "-",
};

/// One platform + preset of the table of REFERENCE.md (§7).
struct PlatformPreset {
  std::string platform;  ///< "gpu-h100-sxm"
  std::string preset;    ///< "1gpu-16vcpu-200gb"
  std::string gpu_type;  ///< gpuprov's GPU name ("H100"); "" for a CPU platform
  int gpu_count = 0;
  bool preferred = false;
  /// "<platform>/<preset>", gpuprov's instance_type for it.
  std::string InstanceType() const { return platform + "/" + preset; }
};

/// The GPU rows of the table, then nothing else (the CPU default is CpuPreset()).
const std::vector<PlatformPreset>& GpuPresets();
/// The VM without a GPU: cpu-d3 / 8vcpu-32gb.
const PlatformPreset& CpuPreset();
/// The kit's catalogue over GpuPresets() (rows in the same order).
const drivers::Catalogue& PresetCatalogue();

/// "gpu-h100-sxm/1gpu-16vcpu-200gb" -> {platform, preset}; nullopt when it is not of that
/// form (one '/', both sides non-empty).
std::optional<PlatformPreset> ParseInstanceType(const std::string& instance_type);
/// The table's row of platform + preset, or a row with no GPU when the table lacks it.
PlatformPreset PresetOf(const std::string& platform, const std::string& preset);

/// The platform/preset for a create or offers request: a GPU (the table), an instance_type
/// ("<platform>/<preset>"), or the CPU default. Throws INVALID_INPUT naming what exists.
PlatformPreset ChoosePreset(const std::optional<drivers::GpuRequest>& gpu,
                            const std::string& instance_type);

/// Where one address serves (GPUPROV_NEBIUS_ENDPOINT / endpoint in [clouds.nebius]) or the
/// real per-service endpoints.
struct Endpoints {
  std::string compute;
  std::string vpc;
  std::string tokens;
  bool plaintext = false;  ///< h2c: only to a loopback address
};

/// The endpoints for an override ("" = the real ones): "host:port", "http://host:port" or
/// "https://host:port" (a trailing '/' is dropped). Plaintext for http:// and for a
/// scheme-less loopback address; TLS otherwise. Throws INVALID_INPUT for http:// to a
/// non-loopback host or a malformed address.
Endpoints ParseEndpoint(const std::string& override_address);
/// True for 127.0.0.0/8, ::1 and localhost.
bool IsLoopbackHost(const std::string& host);

/// The "subject-credentials" of a service-account credentials file (REFERENCE.md §1).
struct ServiceAccountKey {
  std::string private_key_pem;  ///< secret: never log it
  std::string kid;              ///< public key id ("publickey-...")
  std::string iss;              ///< service account id
  std::string sub;
  std::string origin;  ///< the file's path, safe to show
};
/// Parses the JSON text of a credentials file; throws AUTH naming `origin` and the missing
/// field (never quoting the key).
ServiceAccountKey ParseCredentialsFile(const std::string& text, const std::string& origin);

/// The signed JWT (RS256, header kid) the token exchange takes: iss, sub, iat, exp =
/// iat + lifetime. Throws AUTH when the key is not an RSA private key.
std::string MakeJwt(const ServiceAccountKey& key, int64_t now_unix_seconds,
                    int lifetime_seconds = 300);

/// The parent-id (project) of a nebius CLI profile in the text of ~/.nebius/config.yaml:
/// `profile` ("" = the file's `default`) under `profiles`. nullopt when absent.
std::optional<std::string> ProfileParentId(const std::string& yaml_text,
                                           const std::string& profile = "");

/// The ServiceError detail kinds that change the status (REFERENCE.md §8).
enum class Detail {
  kNone,
  kQuotaFailure,
  kNotEnoughResources,
  kTooManyRequests,
  kOperationConflict,
  kOperationAborted,
  kOther,
};

/// A gRPC status code (grpc::StatusCode numbers) with its detail and message -> driver status.
/// RESOURCE_EXHAUSTED: QUOTA for QuotaFailure or "Quota limit exceeded", TRANSIENT for
/// TooManyRequests, else CAPACITY; UNAUTHENTICATED and PERMISSION_DENIED AUTH; NOT_FOUND
/// NOT_FOUND; INVALID_ARGUMENT, ALREADY_EXISTS, OUT_OF_RANGE INVALID_INPUT; UNAVAILABLE,
/// DEADLINE_EXCEEDED, ABORTED, INTERNAL TRANSIENT; CANCELLED CANCELLED; others FAILED.
gpuprov_type_status StatusOfGrpc(int code, Detail detail, const std::string& message);
/// Whether a call that failed so may be sent again (after back-off): UNAVAILABLE,
/// DEADLINE_EXCEEDED, INTERNAL, ABORTED, and RESOURCE_EXHAUSTED with TooManyRequests or an
/// OperationConflict.
bool RetryableGrpc(int code, Detail detail);
/// "RESOURCE_EXHAUSTED" for 8, ... ("code N" for unknown numbers).
std::string GrpcCodeName(int code);

/// InstanceStatus.state (the enum's numbers) + reconciling -> "pending", "running",
/// "stopped", "terminated" or "error". A new instance is STOPPED while reconciling: pending.
std::string VmStateOf(int instance_state, bool reconciling);
/// Whether an instance reads as a preemptible VM that Compute took back: spec.preemptible set,
/// STOPPED, no operation in progress, and not stopped on request (spec.stopped false). Nebius
/// stops a preemptible VM on preemption (PreemptibleSpec.on_preemption STOP, "stops the VM
/// without deleting or restarting it", nebius/api compute/v1/instance.proto); InstanceStatus
/// has no field saying why, so this reading is the driver's (REFERENCE.md §3.7).
bool PreemptedByCompute(bool preemptible, int instance_state, bool reconciling,
                        bool stopped_in_spec);
/// The reason a preempted VM's message gives (the API has none of its own).
inline constexpr const char* kPreemptedReason =
    "STOPPED by Compute: a preemptible VM (on_preemption STOP) stopped to free capacity; its "
    "dynamic public IP is released";

/// The InstanceState enum name of a number ("RUNNING"), "STATE N" when unknown.
std::string InstanceStateName(int instance_state);

/// "203.0.113.7/32" -> "203.0.113.7" (status addresses are in CIDR form).
std::string StripPrefixLength(const std::string& cidr);

/// spec.cloud_init_user_data: a MIME multipart of a cloud-config part that creates
/// `ssh_user` with `ssh_public_key` authorized (cloud-init `users`) and, when `user_data` is
/// not empty, the host's boot script (text/x-shellscript, or text/cloud-config when it is one).
std::string MakeUserData(const std::string& ssh_user, const std::string& ssh_public_key,
                         const std::string& user_data);

/// Names of what the driver makes for VM `name`.
std::string SecurityGroupName(const std::string& vm_name);  ///< "gpuprov-<name>"
std::string BootDiskName(const std::string& vm_name);       ///< "<name>-boot"

/// The labels of everything made for `vm_name`: the user's tags fitted to label rules, then
/// gpuprov=1 and gpuprov-name=<name>.
std::map<std::string, std::string> LabelsFor(const std::string& vm_name,
                                             const std::map<std::string, std::string>& user_tags);
/// Whether labels mark a resource gpuprov made for `vm_name` ("" = for any VM).
bool OwnedBy(const std::map<std::string, std::string>& labels, const std::string& vm_name = "");

/// The ports of `ports` in groups of at most 8 (a security rule's limit), in order.
std::vector<std::vector<int>> PortGroups(const std::vector<int>& ports);

/// An ALLOW ingress rule (TCP or ANY) of a security group, as far as sources go.
/// Whether a security rule's CIDR list admits any address: empty (when it names no security
/// group) means any address (nebius/api vpc/v1/security_rule.proto, RuleIngress.source_cidrs
/// and RuleEgress.destination_cidrs: "Optional. Empty list means any address."), as does
/// 0.0.0.0/0.
bool AnyAddress(const std::vector<std::string>& cidrs, const std::string& security_group_id);

struct IngressRule {
  std::string id;
  std::string name;
  std::vector<int> ports;          ///< empty: every port
  std::vector<std::string> cidrs;  ///< empty: every source
};

/// What makes a group's rules open each narrowed port of `ports` to exactly allow_from
/// (security rules are immutable: replaced, not edited; reference "security groups").
struct SourcesPlan {
  /// Rules that admit a narrowed port from a source allow_from lacks.
  std::vector<std::string> remove_ids;
  /// Rules to create first: the narrowed ports from the sources they lack, and the other
  /// ports of a removed rule from its own sources again. At most 8 ports and 8 CIDRs each;
  /// named "ingress-tcp-<ports>-src-<8 hex of the CIDRs>".
  std::vector<IngressRule> add;
  /// Set when a rule to remove opens every port (it cannot be kept for the others): the
  /// driver refuses, naming it.
  std::string problem;
};
SourcesPlan PlanSources(const std::vector<IngressRule>& rules, const std::vector<int>& ports,
                        const drivers::PortSources& sources);

}  // namespace gpuprov::nebius
