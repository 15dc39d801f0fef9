// SPDX-License-Identifier: Apache-2.0
#include "test_vm.h"

#include <cctype>
#include <cstdio>

#include "tar_writer.h"

namespace gpuprov::docker {

std::string YamlQuote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string TestVmHostname(const std::string& name) {
  std::string h;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-') h += c;
    else if (c == '.' || c == '_') h += '-';
  }
  while (!h.empty() && h.front() == '-') h.erase(h.begin());
  if (h.size() > 63) h.resize(63);
  while (!h.empty() && h.back() == '-') h.pop_back();
  return h.empty() ? "vm" : h;
}

std::string TestVmMetaData(const TestVmSeed& seed) {
  std::string m = "instance-id: " + YamlQuote(seed.instance_id) + "\n";
  m += "local-hostname: " + YamlQuote(seed.hostname) + "\n";
  if (!seed.public_keys.empty()) {
    m += "public-keys:\n";
    for (const auto& k : seed.public_keys) m += "  - " + YamlQuote(k) + "\n";
  }
  return m;
}

namespace {
void AddGpuFile(TarWriter& tar, const std::string& gpu_type, int gpu_count) {
  tar.AddFile(kTestVmGpuFile, gpu_type + ":" + std::to_string(gpu_count) + "\n", 0644);
}
}  // namespace

std::string NoCloudSeedTar(const TestVmSeed& seed) {
  TarWriter tar;
  tar.AddFile(std::string(kTestVmSeedDir) + "/meta-data", TestVmMetaData(seed), 0644);
  tar.AddFile(std::string(kTestVmSeedDir) + "/user-data", seed.user_data, 0600);
  if (seed.gpu_count > 0) AddGpuFile(tar, seed.gpu_type, seed.gpu_count);
  if (!seed.metadata_json.empty()) tar.AddFile(kTestVmMetadataFile, seed.metadata_json, 0644);
  for (const auto& [path, contents] : seed.files) tar.AddFile(path, contents, 0644);
  return tar.Finish();
}

std::string GpuFileTar(const std::string& gpu_type, int gpu_count) {
  TarWriter tar;
  AddGpuFile(tar, gpu_type, gpu_count);
  return tar.Finish();
}

ContainerSpec TestVmContainer(const TestVmSpec& vm) {
  ContainerSpec spec;
  spec.name = vm.name;
  spec.image = vm.image;
  spec.hostname = vm.hostname;
  spec.cmd = {"/lib/systemd/systemd"};
  spec.cgroupns_mode = "host";
  spec.binds = {"/sys/fs/cgroup:/sys/fs/cgroup:ro"};
  spec.cap_add = {"SYS_ADMIN", "NET_ADMIN"};
  spec.tmpfs = {{"/run", "rw,nosuid,nodev,exec,mode=755"},
                {"/run/lock", "rw,nosuid,nodev,noexec"}};
  spec.stop_signal = "SIGRTMIN+3";
  spec.ports = vm.ports;
  spec.labels = vm.labels;
  return spec;
}

}  // namespace gpuprov::docker
