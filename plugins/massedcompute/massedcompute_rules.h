// SPDX-License-Identifier: Apache-2.0
//
// What the Massed Compute driver knows without the network (REFERENCE.md): the
// token's environment variables, the products of GET /gpu-inventory read from their
// descriptions, GPU request -> product, the instance name that stands in for tags, the SSH
// key name, and the API's statuses as the protocol's five states.
#pragma once

#include <Poco/JSON/Object.h>

#include <optional>
#include <string>
#include <vector>

#include "vm_rules.h"

namespace gpuprov::massedcompute {

inline constexpr const char* kDefaultEndpoint = "https://vm.massedcompute.com/api/v1";
/// Third-party tools use both; no official name exists (REFERENCE.md §1). First set wins.
inline const std::vector<std::string> kTokenEnvVars = {"MASSED_API_KEY",
                                                       "MASSED_COMPUTE_API_TOKEN"};
/// The SSH user when an instance names none (REFERENCE.md §9: use `username`, else root).
inline constexpr const char* kFallbackSshUser = "root";
/// Instances have no tags or labels: gpuprov's instances are named "gpuprov-<vm name>", which
/// carries both gpuprov=1 (the prefix) and gpuprov-name (the rest).
inline constexpr const char* kInstancePrefix = "gpuprov-";
/// Images tried in order when neither the request nor the config names one (REFERENCE.md §9).
inline const std::vector<std::string> kDefaultImages = {"Ubuntu Server 22.04 w/ drivers",
                                                        "Ubuntu Server 24.04"};

/// VM names: the instance name adds kInstancePrefix; the API documents no rule, so letters,
/// digits and '-' (what every other gpuprov cloud takes) up to 55 characters.
extern const drivers::VmNameRules kVmNameRules;

/// One product of GET /gpu-inventory.
struct Product {
  std::string name;         ///< "gpu_1x_a6000"
  std::string description;  ///< "1x RTX A6000 (48GB)"
  std::string model;        ///< "RTX-A6000" (CanonicalModel of the description's model)
  int gpu_count = 0;
  int memory_gb = 0;  ///< from "(48GB)"; 0 when not given
  bool spot = false;  ///< "[spot]" in the description or a "_spot" name
  double price_per_hour = 0;
  int capacity = 0;                  ///< capacity_available
  std::vector<std::string> regions;  ///< regions_with_capacity_available, by name
};

/// "<N>x <model> [(<mem>GB)] [interconnect] [annotation]" -> its parts (model canonical);
/// nullopt when the description does not start with "<N>x ".
struct DescribedGpus {
  std::string model;
  int count = 0;
  int memory_gb = 0;
  bool spot = false;
};
std::optional<DescribedGpus> ParseDescription(const std::string& description);

/// A GPU model as gpuprov writes it: upper case, blanks and '_' as '-', without "NVIDIA-"
/// ("RTX A6000" -> "RTX-A6000", "h100_nvl" -> "H100-NVL").
std::string CanonicalModel(const std::string& model);

/// Whether a requested GPU type names the product's GPU: the same canonical model; or the same
/// without "RTX-" ("A6000" is the RTX A6000); or the model with "-<mem>GB" of the product's
/// memory ("A100-80GB").
bool GpuMatches(const std::string& requested, const Product& product);

/// The products of a GET /gpu-inventory answer, sorted by name; throws DriverError(FAILED)
/// when it has no "gpu_inventory" object.
std::vector<Product> ParseInventory(const Poco::JSON::Object::Ptr& doc);

/// "RTX-A6000:1 (gpu_1x_a6000), H100:1 (gpu_1x_h100), ...": what the inventory offers, spot
/// products left out (\a spot false) or only they (\a spot true).
std::string OfferedText(const std::vector<Product>& products, bool spot = false);

/// Whether a product name or description marks a spot product: "_spot" at the end of the name
/// or "[spot]" in the description (REFERENCE.md §7).
bool IsSpotProduct(const std::string& name, const std::string& description);

/// The spot product sold for the same GPUs as \a on_demand: "<name>_spot" when listed, else
/// a spot product of the same model, count and memory; nullptr when there is none.
const Product* SpotTwin(const std::vector<Product>& products, const Product& on_demand);

/// Whether \a product has capacity in \a region (any region when "").
bool HasCapacityIn(const Product& product, const std::string& region);

/// "gpuprov-<vm name>".
std::string InstanceNameFor(const std::string& vm_name);
/// The VM name of a gpuprov instance name; nullopt for an instance gpuprov did not make.
std::optional<std::string> VmNameOf(const std::string& instance_name);

/// The account key name for a public key line: "gpuprov " and 16 hex digits of the SHA-256 of
/// its blob (key names take letters, digits and spaces only, REFERENCE.md §3.5). Throws
/// DriverError(INVALID_INPUT) naming ssh_public_key for a malformed line.
std::string KeyName(const std::string& public_key_line);
/// True for a name KeyName makes.
bool IsGpuprovKeyName(const std::string& name);

/// The protocol's state of an instance: rented/running/active is running with an ip, else
/// pending with what it waits for; booting, pending and unknown words pending;
/// stopping/stopped stopped; terminating/deleting/terminated/deleted terminated; failed/error
/// error. `os_booted` gates running only when the instance carries it (nullopt: absent): the
/// vendor's own instance fixture (massed-compute-mcp bafb889
/// packages/node/tests/forward.test.ts) has no such field and its agent plugin waits for
/// `status: running` only (massed-compute-agent-plugin skills/mc-launch-vms/SKILL.md), while
/// REFERENCE.md says the spec lists it: both forms are handled (UNCONFIRMED).
struct VmState {
  std::string state;
  std::string message;
};
VmState StateOf(const std::string& status, std::optional<bool> os_booted, bool has_ip);

/// The state of an instance of a spot product (IsSpotProduct): an instance gpuprov did not
/// terminate that the API lists as ended (terminated, deleted, stopped, or words of a
/// take-back: preempted, reclaimed, interrupted; not terminating, deleting or stopping, which
/// someone asked for) is "preempted", with its status as the
/// reason; else StateOf. The API reference documents no preemption status (README.md, "Spot
/// instances").
VmState SpotStateOf(const std::string& status, std::optional<bool> os_booted, bool has_ip,
                    const std::string& product_name);

/// Whether a product is a real offer: priced above $0/h. The vendor's agent plugin warns that
/// internal-only SKUs ("1x H100 SXM5", "L40 8x") may be listed at $0/hr and must not be used
/// (massed-compute-agent-plugin skills/mc-pick-gpu/SKILL.md).
bool IsOffered(const Product& product);

}  // namespace gpuprov::massedcompute
