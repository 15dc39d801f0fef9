// Merges the inputs of `gpuprov provision` into one set of options, remembering where each
// value came from. Precedence (docs/design.md §5): command-line flags > spec file >
// environment (GPUPROV_*) > config.toml [defaults] > built-in defaults.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config.h"
#include "gpu_request.h"
#include "paths.h"
#include "spec.h"

namespace gpuprov {

enum class Source { kFlag, kSpec, kEnv, kConfig, kDefault };

/// "flag", "spec", "env", "config", "default".
const char* SourceName(Source source);

/// A resolved value and where it came from.
template <typename T>
struct Resolved {
  T value{};
  Source source = Source::kDefault;
  /// kFlag: the flag as typed ("--k8s", "--no-k8s", "--cloud"); kSpec: the spec's display
  /// name; kEnv: the variable's name; kConfig: the config's display name and table, e.g.
  /// "config.toml [defaults]"; kDefault: empty.
  std::string origin;
};

/// Where a value came from, as a phrase for messages: "--k8s from the command line",
/// "from spec.yaml", "from GPUPROV_CLOUD", "from config.toml [defaults]", "built-in default".
std::string DescribeOrigin(Source source, const std::string& origin);

template <typename T>
std::string DescribeOrigin(const Resolved<T>& resolved) {
  return DescribeOrigin(resolved.source, resolved.origin);
}

/// How the k3s installer reaches the node (--install-route): kAuto follows the cloud's
/// capabilities (boot script where the cloud runs one and the installer fits, else SSH); kBoot
/// insists on the boot script; kSsh pushes the installer over SSH even where a boot script would
/// run (e.g. to compare the two, or when the image's cloud-init is not to be trusted).
enum class InstallRoute { kAuto, kBoot, kSsh };

/// --install-route auto|boot|ssh. Throws UsageError naming the flag and the three values.
InstallRoute ParseInstallRoute(const std::string& text);

/// Command-line flags of `provision`; unset fields were not given.
struct ProvisionFlags {
  std::optional<std::string> name;
  std::optional<std::string> cloud;
  std::optional<std::string> region;
  std::optional<GpuRequest> gpus;
  std::optional<bool> kubernetes;  // --k8s: true, --no-k8s: false.
  std::optional<std::string> image;
  std::optional<std::string> instance_type;
  std::optional<std::string> ssh_key;
  std::optional<int> disk_gb;
  std::optional<double> max_price_per_hour;  // --max-price: refuse a dearer offer
  bool yes = false;                          // --yes: no question before an expensive VM
  std::map<std::string, std::string> tags;  // Overlay the spec's tags key by key.
  std::optional<std::string> k3s_version;
  std::optional<std::string> k3s_sha256;
  std::optional<std::string> k3s_download_url;
  std::optional<std::string> nvidia_driver;  // --nvidia-driver
  std::optional<std::string> nvidia_repo_url;          // --nvidia-repo-url
  std::optional<std::string> nvidia_key_fingerprint;   // --nvidia-key-fingerprint
  std::vector<std::string> allow_from;  // --allow-from, canonical (CanonicalCidr)
  std::optional<bool> allow_from_ssh;   // --allow-from-ssh: true
  /// --merge-kubeconfig: true (else [defaults] merge_kubeconfig, else false).
  std::optional<bool> merge_kubeconfig;
  std::optional<long> ttl_seconds;       // --ttl (ttl.h); 0: "off"
  std::optional<long> idle_ttl_seconds;  // --idle-ttl; 0: "off"
  std::optional<bool> smoke_test;        // --no-smoke-test: false
  InstallRoute install_route = InstallRoute::kAuto;  // --install-route
  std::optional<bool> spot;                          // --spot: true
  std::optional<int> nodes;                          // --nodes N (cluster_nodes.h)
};

inline constexpr int kDefaultBootWaitSeconds = 600;
inline constexpr int kDefaultSshWaitSeconds = 600;
inline constexpr int kDefaultBootInstallWaitSeconds = 900;  // docs/design.md §3: up to 15 minutes.
inline constexpr int kDefaultApiWaitSeconds = 600;          // docs/design.md §3: up to 10 minutes.
inline constexpr int kDefaultTtlCheckSeconds = 60;          // the node's TTL timer
/// NVIDIA's vectorAdd sample (log ends "Test PASSED"), as the NVIDIA device plugin and GPU
/// Operator documentation run it. Its NVIDIA_REQUIRE_CUDA is cuda>=11.7, so it runs on every
/// driver from R515 on.
inline constexpr const char* kDefaultSmokeTestImage =
    "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda11.7.1-ubuntu20.04";

struct ProvisionOptions {
  Resolved<std::string> name;
  Resolved<std::string> cloud;
  Resolved<std::optional<std::string>> region;  // nullopt: the driver's default.
  Resolved<std::optional<GpuRequest>> gpus;     // nullopt: no GPUs.
  /// kDefault means nobody asked (value true: on where the cloud can host it); see
  /// DecideKubernetes in k8s_policy.h for what each source means.
  Resolved<bool> kubernetes;
  Resolved<std::optional<std::string>> image;
  Resolved<std::optional<std::string>> instance_type;
  Resolved<std::optional<std::string>> ssh_key;  // nullopt: gpuprov's generated key.
  Resolved<std::optional<int>> disk_gb;          // nullopt: the driver's default.
  std::map<std::string, std::string> tags;       // Spec tags overlaid by flag tags.
  Resolved<int> boot_wait_seconds;  // the VM running
  Resolved<int> ssh_wait_seconds;   // SSH answering once it runs
  Resolved<int> boot_install_wait_seconds;
  Resolved<int> api_wait_seconds;
  /// The k3s release the installer installs (flag > spec > config.toml [defaults]); nullopt:
  /// the installer's pin, its pinned hash, GitHub's downloads.
  Resolved<std::optional<std::string>> k3s_version;
  Resolved<std::optional<std::string>> k3s_sha256;  // lower-case hex
  Resolved<std::optional<std::string>> k3s_download_url;
  /// A GPU without a working driver (flag > spec > config.toml [defaults]): "image" (the
  /// default: fail saying what to do) or "install" (the installer adds the distribution's
  /// server driver, gpuprov reboots the VM once).
  Resolved<std::string> nvidia_driver;
  /// The NVIDIA container toolkit's apt repository (flag > spec > config.toml [defaults]) and
  /// the v4 fingerprint of the key that signs it (40 upper-case hex digits); nullopt: NVIDIA's
  /// repository and key (the installer's pins). The URL is https:// (http:// only to a
  /// loopback host: the test VM's own repo), with no trailing '/'.
  Resolved<std::optional<std::string>> nvidia_repo_url;
  Resolved<std::optional<std::string>> nvidia_key_fingerprint;
  /// The sources direct-access ports are opened to (flag > spec > config.toml [defaults]),
  /// canonical CIDRs; nullopt: nobody said, so an existing VM keeps what its record says and a
  /// new one is open to 0.0.0.0/0.
  Resolved<std::optional<std::vector<std::string>>> allow_from;
  /// SSH (22) narrowed to allow_from too; nullopt as above (a new VM: false).
  Resolved<std::optional<bool>> allow_from_ssh;
  /// TTL on the node (flag > spec > config.toml [defaults]), seconds; nullopt or 0: none.
  Resolved<std::optional<long>> ttl_seconds;
  Resolved<std::optional<long>> idle_ttl_seconds;
  Resolved<int> ttl_check_seconds;  // [defaults.timeouts] ttl_check_seconds
  /// The CUDA check after a GPU node validates (flag > spec > config.toml [defaults]; default
  /// on) and the image it runs (spec > config; default kDefaultSmokeTestImage).
  Resolved<bool> smoke_test;
  Resolved<std::string> smoke_test_image;
  /// A spot (preemptible) VM (flag > spec > config.toml [defaults]; default false); refused
  /// before anything is made on a cloud whose driver lacks GPUPROV_CAP_SPOT.
  Resolved<bool> spot;
  /// The VMs of the k3s cluster (flag > spec; default 1): node 0 the server, the rest agents
  /// (cluster_nodes.h). Checked by DecideNodes, which knows the cloud.
  Resolved<int> nodes;
};

/// Merges the inputs. \a spec is a default Spec when no spec file was given; \a env is only
/// asked for GPUPROV_CLOUD, GPUPROV_REGION, GPUPROV_GPUS, GPUPROV_KUBERNETES (true/false,
/// 1/0, yes/no), GPUPROV_IMAGE (empty values count as unset) and HOME (to expand a leading
/// "~/" in ssh_key). Throws UsageError for a missing name and for invalid flag or
/// environment values, naming the flag or variable; also for a k3s version other than the
/// installer's pin without a k3s sha256 (naming --k3s-version or where the version came from).
ProvisionOptions ResolveProvisionOptions(const ProvisionFlags& flags, const Spec& spec,
                                         const EnvLookup& env, const Config& config);

/// \a text as a canonical CIDR: an IPv4 or IPv6 network with its prefix length ("10.0.0.0/8",
/// "2001:db8::/32"); a bare address is a /32 or /128. Throws UsageError naming \a field (e.g.
/// "--allow-from") for anything else, and for an address with bits set past the prefix (naming
/// the network meant).
std::string CanonicalCidr(const std::string& text, const std::string& field);

/// --disk-gb N: a whole number of GB from kMinDiskGb to kMaxDiskGb. Throws UsageError naming
/// the flag.
int ParseDiskGbFlag(const std::string& text);

/// --tag KEY=VALUE (repeatable) into \a tags. KEY: 1-128 of A-Z a-z 0-9 _ . : / + - @, not
/// one of gpuprov's own tags (gpuprov, gpuprov-name), not given twice; VALUE: up to 256
/// printable characters, may be empty. Throws UsageError naming the flag.
void AddTagFlag(const std::string& text, std::map<std::string, std::string>& tags);

/// True for the tags gpuprov sets on every VM itself.
bool IsReservedTag(const std::string& key);

/// One line per option for `-v`, e.g. "kubernetes=false (from config.toml [defaults])".
std::vector<std::string> DescribeProvisionOptions(const ProvisionOptions& options);

}  // namespace gpuprov
