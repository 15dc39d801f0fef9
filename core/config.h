// The user's config.toml (docs/design.md §5): defaults for provisioning and one settings
// table per cloud.
//
//   [defaults]
//   kubernetes = true           # bool
//   cloud = "aws"               # cloud name, [a-z0-9_-]
//   region = "us-east-1"
//   gpus = "L4:1"               # TYPE:COUNT
//   ssh_key = "~/.ssh/id_ed25519"
//   k3s_version = "v1.36.4+k3s1"  # another than the installer's pin needs k3s_sha256
//   k3s_sha256 = "<64 hex>"
//   k3s_download_url = "https://mirror.example/k3s"
//   nvidia_driver = "install"   # a GPU without a driver: "image" (fail, the default) or "install"
//   nvidia_repo_url = "https://mirror.example/libnvidia-container"  # NVIDIA's toolkit apt repo
//   nvidia_key_fingerprint = "<40 hex>"  # the key that signs it (default: NVIDIA's, pinned)
//   allow_from = ["203.0.113.0/24"]  # sources of 6443/80/443 with direct access (CIDRs)
//   allow_from_ssh = false      # true: 22 too
//   merge_kubeconfig = true     # provision merges the VM's context into ~/.kube/config
//   tunnel_first_port = 16443   # tunnel-mode VMs get the first free local port from here
//   smoke_test = true           # false: no CUDA check after a GPU node validates
//   smoke_test_image = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda11.7.1-ubuntu20.04"
//
//   [defaults.timeouts]         # positive integers, seconds
//   boot_wait_seconds = 600     # the VM running
//   ssh_wait_seconds = 600      # SSH answering once it runs
//   boot_install_wait_seconds = 900
//   api_wait_seconds = 600
//   offers_wait_seconds = 10    # `gpuprov offers`: how long it waits for each cloud's answer
//
//   [clouds.aws]                # the keys the driver declares (`gpuprov drivers aws`); values
//   region = "eu-west-1"        # are strings, integers, booleans, arrays of strings, or one
//   regions = ["us-east-1"]     # level of table holding those
//   retry = {max_attempts = 6}
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gpu_request.h"

namespace gpuprov {

struct ConfigTimeouts {
  std::optional<int> boot_wait_seconds;
  std::optional<int> ssh_wait_seconds;
  std::optional<int> boot_install_wait_seconds;
  std::optional<int> api_wait_seconds;
  std::optional<int> ttl_check_seconds;  // how often the node's TTL timer checks
  std::optional<int> offers_wait_seconds;  // `gpuprov offers`: the budget of the clouds' answers
};

struct ConfigDefaults {
  std::optional<bool> kubernetes;
  std::optional<std::string> cloud;
  std::optional<std::string> region;
  std::optional<GpuRequest> gpus;
  std::optional<std::string> ssh_key;  // As written; "~" is not expanded here.
  std::optional<std::string> k3s_version;
  std::optional<std::string> k3s_sha256;
  std::optional<std::string> k3s_download_url;
  std::optional<std::string> nvidia_driver;  // As written; checked with the flag's.
  std::optional<std::string> nvidia_repo_url;         // As written; checked with the flag's.
  std::optional<std::string> nvidia_key_fingerprint;  // As written; checked with the flag's.
  std::optional<std::vector<std::string>> allow_from;  // As written; checked with the flag's.
  std::optional<bool> allow_from_ssh;
  std::optional<bool> merge_kubeconfig;
  std::optional<int> tunnel_first_port;
  std::optional<bool> smoke_test;              // the CUDA check after validation
  std::optional<std::string> smoke_test_image;  // the image it runs
  std::optional<bool> spot;                     // spot (preemptible) VMs (provision --spot)
  /// provision asks (on a terminal) before making a VM dearer than this, in dollars per hour.
  std::optional<double> confirm_above_per_hour;
  std::optional<long> ttl_seconds;       // ttl = "8h" (ttl.h); 0: "off"
  std::optional<long> idle_ttl_seconds;  // idle_ttl = "1h"
  ConfigTimeouts timeouts;
};

/// A value in a [clouds.<name>] table that is not a table: a string, an integer, a boolean or
/// an array of strings.
using CloudSettingScalar = std::variant<std::string, std::int64_t, bool, std::vector<std::string>>;
/// A table in a [clouds.<name>] table (`retry = {max_attempts = 6}` or [clouds.<name>.retry]):
/// key -> value, one level deep.
using CloudSettingTable = std::map<std::string, CloudSettingScalar>;
/// A value in a [clouds.<name>] table.
using CloudSettingValue =
    std::variant<std::string, std::int64_t, bool, std::vector<std::string>, CloudSettingTable>;
using CloudSettings = std::map<std::string, CloudSettingValue>;

struct Config {
  /// How messages name the file, e.g. "config.toml" or its path.
  std::string display_name;
  /// false when the file did not exist and everything is a default.
  bool loaded = false;
  ConfigDefaults defaults;
  /// Cloud name -> its settings, passed to that cloud's driver as JSON.
  std::map<std::string, CloudSettings> clouds;
  /// Cloud name -> key -> the line it is on, so a driver's key check can name file:line; a
  /// member of a table as "<table>.<member>".
  std::map<std::string, std::map<std::string, int>> cloud_key_lines;
  /// Not from the file: the folder drivers pace their API calls in across processes
  /// (Paths::pacer_dir, set by AppContext::LoadUserConfig), passed to each driver at init as
  /// "pacer_dir" (docs/driver-protocol.md); "" sends none.
  std::string pacer_dir;
};

/// Parses config.toml text. Throws UsageError naming \a display_name, the line, the key and
/// what is allowed for syntax errors, unknown keys or tables and wrong types. Values of keys
/// whose names contain token, secret, key or password are never quoted in messages.
Config ParseConfig(std::string_view text, const std::string& display_name);

/// Loads \a path; a missing file gives a default Config (loaded = false). Throws Error when
/// the file exists but cannot be read, UsageError when it is invalid.
Config LoadConfig(const std::filesystem::path& path);

/// \a value as a CloudSettingScalar; nullopt when it is a table.
std::optional<CloudSettingScalar> AsScalar(const CloudSettingValue& value);

/// The settings of \a cloud as a JSON object text ("{}" when the config has none), the form
/// a driver receives them in.
std::string CloudSettingsJson(const Config& config, const std::string& cloud);

/// true for key names whose values must never be shown (token, secret, key, password).
bool IsSecretKeyName(std::string_view key);

/// true for names made of [a-z0-9_-], 1 to 64 characters.
bool IsValidCloudName(std::string_view name);

}  // namespace gpuprov
