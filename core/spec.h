// A VM spec file, as given to `gpuprov provision -f spec.yaml`. Every field is optional:
//
//   name: gpu-box-1          # [a-z][a-z0-9-]{0,38}, not ending in '-'
//   cloud: aws              # or a list of candidates, [aws, gcp, lambda], or any
//   region: us-east-1       # or a list, [us-central1, us-east1]
//   gpus: L4:1               # TYPE:COUNT
//   kubernetes: true
//   image: ubuntu-22.04
//   instance_type: g6.xlarge
//   ssh_key: ~/.ssh/id_ed25519
//   disk_gb: 100             # 10..10000
//   tags: {team: ml}         # string -> string
//   k3s_version: v1.36.4+k3s1  # k3s release; another than the installer's pin needs k3s_sha256
//   k3s_sha256: <64 hex>     # sha256 of that release's k3s binary for the VM's architecture
//   k3s_download_url: https://mirror.example/k3s  # a mirror of GitHub's release downloads
//   nvidia_driver: install   # a GPU without a driver: image (fail, the default) or install
//   nvidia_repo_url: https://mirror.example/libnvidia-container  # NVIDIA's toolkit apt repo
//   nvidia_key_fingerprint: <40 hex>  # the key that signs it (default: NVIDIA's, pinned)
//   allow_from: [203.0.113.0/24]  # sources of 6443/80/443 with direct access (CIDRs)
//   allow_from_ssh: false    # true: 22 too
//   ttl: 8h                  # the node powers itself off then (ttl.h); "off": none
//   idle_ttl: 1h             # ... or after being idle that long
//   smoke_test: true         # false: no CUDA check after the node validates (cuda_check.h)
//   spot: true               # a spot (preemptible) VM, on clouds whose driver sells them
//   smoke_test_image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda11.7.1-ubuntu20.04
//   nodes: 4                 # VMs in the k3s cluster (cluster_nodes.h); default 1
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu_request.h"

namespace gpuprov {

inline constexpr int kMinDiskGb = 10;
inline constexpr int kMaxDiskGb = 10000;

struct Spec {
  /// How messages name the file, e.g. "spec.yaml" or its path.
  std::string display_name;
  std::optional<std::string> name;
  std::optional<std::string> cloud;   // a list is kept joined with commas ("aws,gcp")
  std::optional<std::string> region;  // likewise
  std::optional<GpuRequest> gpus;
  std::optional<bool> kubernetes;
  std::optional<std::string> image;
  std::optional<std::string> instance_type;
  std::optional<std::string> ssh_key;  // As written; "~" is not expanded here.
  std::optional<int> disk_gb;
  std::optional<std::map<std::string, std::string>> tags;
  std::optional<std::string> k3s_version;
  std::optional<std::string> k3s_sha256;
  std::optional<std::string> k3s_download_url;
  std::optional<std::string> nvidia_driver;  // As written; checked with the flag's.
  std::optional<std::string> nvidia_repo_url;         // As written; checked with the flag's.
  std::optional<std::string> nvidia_key_fingerprint;  // As written; checked with the flag's.
  std::optional<std::vector<std::string>> allow_from;  // As written; checked with the flag's.
  std::optional<bool> allow_from_ssh;
  std::optional<long> ttl_seconds;       // 0: "off"
  std::optional<long> idle_ttl_seconds;  // 0: "off"
  std::optional<bool> smoke_test;
  std::optional<std::string> smoke_test_image;
  std::optional<bool> spot;
  std::optional<int> nodes;  // checked with the flag's (DecideNodes)
};

/// Parses spec YAML. Throws UsageError naming \a display_name, the line, the field and what
/// is allowed for syntax errors, unknown or repeated fields, wrong types and invalid values.
/// An empty document gives a Spec with no fields set.
Spec ParseSpec(std::string_view text, const std::string& display_name);

/// Reads and parses \a path (named by its path in messages). Throws UsageError when the
/// file is missing or invalid.
Spec LoadSpec(const std::filesystem::path& path);

/// Throws UsageError unless \a name is a valid VM name: 1 to 39 characters from a-z, 0-9
/// and '-', starting with a letter and not ending with '-'. \a field_name starts the message
/// verbatim, e.g. "--name" or "spec.yaml:2: field 'name'".
void ValidateVmName(std::string_view name, std::string_view field_name);

}  // namespace gpuprov
