// SPDX-License-Identifier: Apache-2.0
//
// A "test VM": one container of the test image (tests/fixtures/testvm) with
// systemd as PID 1 and cloud-init reading a NoCloud seed. The docker driver and
// the cloud emulator's docker backend both make them with what is here; each
// keeps its own names, labels, addresses and ports.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "docker_engine.h"

namespace gpuprov::docker {

/// Where the NoCloud seed goes (relative to /).
inline constexpr const char* kTestVmSeedDir = "var/lib/cloud/seed/nocloud";
/// The fake GPU file the test image reads ("<type>:<count>\n").
inline constexpr const char* kTestVmGpuFile = "etc/gpuprov-testvm/gpu";
/// The document the image's metadata service fixture serves (gpuprov-testvm-metadata).
inline constexpr const char* kTestVmMetadataFile = "etc/gpuprov-testvm/metadata.json";

/// A YAML double-quoted scalar (JSON string syntax, which YAML accepts);
/// control characters become \xNN.
std::string YamlQuote(const std::string& s);

/// A hostname from any name: letters, digits and '-' kept, '.' and '_' become
/// '-', the rest dropped; no leading or trailing '-', at most 63 characters;
/// "vm" when nothing is left.
std::string TestVmHostname(const std::string& name);

/// The NoCloud seed of one test VM.
struct TestVmSeed {
  std::string instance_id;
  std::string hostname;
  std::vector<std::string> public_keys;  // "public-keys" left out when empty
  std::string user_data;                 // written as is
  std::string gpu_type;
  int gpu_count = 0;  // > 0 adds the GPU file
  /// JSON for the metadata service fixture ({"cloud", "instance_id", "hostname",
  /// "public_ipv4", "local_ipv4"}); empty = no metadata service in the VM.
  std::string metadata_json;
  /// More files to put in the VM (path relative to / -> contents), written 0644.
  std::map<std::string, std::string> files;
};

/// The meta-data file: instance-id, local-hostname, public-keys.
std::string TestVmMetaData(const TestVmSeed& seed);

/// The archive to put at / before the first start: meta-data (0644),
/// user-data (0600), with a GPU the GPU file (0644), and with metadata_json the
/// metadata service document (0644).
std::string NoCloudSeedTar(const TestVmSeed& seed);

/// An archive with only the GPU file, to put at / of a running test VM.
std::string GpuFileTar(const std::string& gpu_type, int gpu_count);

/// What differs between test VM containers.
struct TestVmSpec {
  std::string name;  // container name
  std::string image;
  std::string hostname;
  std::vector<PortBinding> ports;
  std::map<std::string, std::string> labels;
};

/// The container create parameters of a test VM: the spec's fields plus what
/// systemd as PID 1 needs on a cgroup-v1 host (tests/fixtures/testvm/README.md):
/// the host cgroup namespace with /sys/fs/cgroup bound (its controller mounts stay
/// writable), SYS_ADMIN, NET_ADMIN (the metadata fixture adds 169.254.169.254 to lo), tmpfs
/// /run and /run/lock, and SIGRTMIN+3 to halt it.
ContainerSpec TestVmContainer(const TestVmSpec& vm);

}  // namespace gpuprov::docker
