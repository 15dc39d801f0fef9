// SPDX-License-Identifier: Apache-2.0
#include "test_vm.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace gpuprov::docker {
namespace {

struct TarEntry {
  unsigned mode = 0;
  std::string contents;
};

// The regular files of a ustar archive: path -> mode and contents.
std::map<std::string, TarEntry> Files(const std::string& tar) {
  std::map<std::string, TarEntry> files;
  size_t at = 0;
  while (at + 512 <= tar.size() && tar[at] != '\0') {
    auto field = [&](size_t off, size_t len) {
      std::string f = tar.substr(at + off, len);
      return f.substr(0, f.find('\0'));
    };
    std::string name = field(0, 100);
    const std::string prefix = field(345, 155);
    if (!prefix.empty()) name = prefix + "/" + name;
    const unsigned mode = static_cast<unsigned>(std::stoul(field(100, 8), nullptr, 8));
    const size_t size = std::stoul(field(124, 12), nullptr, 8);
    const char type = tar[at + 156];
    if (type == '0' || type == '\0') files[name] = TarEntry{mode, tar.substr(at + 512, size)};
    at += 512 + (size + 511) / 512 * 512;
  }
  return files;
}

TEST(TestVm, YamlQuoteEscapes) {
  EXPECT_EQ(YamlQuote("plain"), "\"plain\"");
  EXPECT_EQ(YamlQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(YamlQuote(std::string("x\ny\x7f", 4)), "\"x\\x0ay\\x7f\"");
}

TEST(TestVm, HostnameIsSanitised) {
  EXPECT_EQ(TestVmHostname("web-1"), "web-1");
  EXPECT_EQ(TestVmHostname("-my_vm.example-"), "my-vm-example");
  EXPECT_EQ(TestVmHostname("a b!c"), "abc");
  EXPECT_EQ(TestVmHostname("!!!"), "vm");
  EXPECT_EQ(TestVmHostname(std::string(70, 'x')), std::string(63, 'x'));
  EXPECT_EQ(TestVmHostname(std::string(62, 'x') + "-yz"), std::string(62, 'x'));
}

TEST(TestVm, SeedHasMetaDataUserDataAndGpu) {
  TestVmSeed seed;
  seed.instance_id = "gpuprov-a-0123abcd";
  seed.hostname = "a";
  seed.public_keys = {"ssh-ed25519 AAAA one", "ssh-rsa BBBB \"two\""};
  seed.user_data = "#!/bin/sh\necho hi\n";
  seed.gpu_type = "H100";
  seed.gpu_count = 8;
  auto files = Files(NoCloudSeedTar(seed));
  ASSERT_EQ(files.size(), 3u);
  const TarEntry& meta = files.at("var/lib/cloud/seed/nocloud/meta-data");
  EXPECT_EQ(meta.mode, 0644u);
  EXPECT_EQ(meta.contents,
            "instance-id: \"gpuprov-a-0123abcd\"\n"
            "local-hostname: \"a\"\n"
            "public-keys:\n"
            "  - \"ssh-ed25519 AAAA one\"\n"
            "  - \"ssh-rsa BBBB \\\"two\\\"\"\n");
  const TarEntry& user = files.at("var/lib/cloud/seed/nocloud/user-data");
  EXPECT_EQ(user.mode, 0600u);
  EXPECT_EQ(user.contents, "#!/bin/sh\necho hi\n");
  const TarEntry& gpu = files.at("etc/gpuprov-testvm/gpu");
  EXPECT_EQ(gpu.mode, 0644u);
  EXPECT_EQ(gpu.contents, "H100:8\n");
}

TEST(TestVm, SeedWithoutKeysOrGpu) {
  TestVmSeed seed;
  seed.instance_id = "i-1";
  seed.hostname = "h";
  auto files = Files(NoCloudSeedTar(seed));
  EXPECT_EQ(files.size(), 2u);
  EXPECT_EQ(files.count("etc/gpuprov-testvm/gpu"), 0u);
  EXPECT_EQ(files.at("var/lib/cloud/seed/nocloud/meta-data").contents,
            "instance-id: \"i-1\"\nlocal-hostname: \"h\"\n");
  EXPECT_EQ(files.at("var/lib/cloud/seed/nocloud/user-data").contents, "");
}

TEST(TestVm, SeedCarriesTheMetadataDocumentAndFilesWhenGiven) {
  TestVmSeed seed;
  seed.instance_id = "i-1";
  seed.hostname = "h";
  seed.metadata_json = R"({"cloud":"aws","public_ipv4":"127.90.0.7"})";
  seed.files["etc/gpuprov-testvm/k3s-faults"] = "node-not-ready\n";
  auto files = Files(NoCloudSeedTar(seed));
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files.at("etc/gpuprov-testvm/k3s-faults").contents, "node-not-ready\n");
  const TarEntry& doc = files.at("etc/gpuprov-testvm/metadata.json");
  EXPECT_EQ(doc.mode, 0644u);
  EXPECT_EQ(doc.contents, seed.metadata_json);
}

TEST(TestVm, GpuFileTarHasOnlyTheGpuFile) {
  auto files = Files(GpuFileTar("A100-80GB", 2));
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files.at("etc/gpuprov-testvm/gpu").contents, "A100-80GB:2\n");
  EXPECT_EQ(files.at("etc/gpuprov-testvm/gpu").mode, 0644u);
}

TEST(TestVm, ContainerRunsSystemdWithCallerFields) {
  TestVmSpec vm;
  vm.name = "gpuprov-a";
  vm.image = "gpuprov-testvm:abc";
  vm.hostname = "a";
  vm.ports = {PortBinding{22, "tcp", "127.77.0.1", "22"}};
  vm.labels = {{"io.gpuprov.managed", "1"}};
  ContainerSpec spec = TestVmContainer(vm);
  EXPECT_EQ(spec.name, "gpuprov-a");
  EXPECT_EQ(spec.image, "gpuprov-testvm:abc");
  EXPECT_EQ(spec.hostname, "a");
  EXPECT_EQ(spec.cmd, std::vector<std::string>{"/lib/systemd/systemd"});
  EXPECT_EQ(spec.cgroupns_mode, "host");
  EXPECT_EQ(spec.binds, std::vector<std::string>{"/sys/fs/cgroup:/sys/fs/cgroup:ro"});
  EXPECT_EQ(spec.cap_add, (std::vector<std::string>{"SYS_ADMIN", "NET_ADMIN"}));
  EXPECT_EQ(spec.tmpfs, (std::map<std::string, std::string>{
                            {"/run", "rw,nosuid,nodev,exec,mode=755"},
                            {"/run/lock", "rw,nosuid,nodev,noexec"}}));
  EXPECT_EQ(spec.stop_signal, "SIGRTMIN+3");
  EXPECT_FALSE(spec.privileged);
  EXPECT_TRUE(spec.env.empty());
  EXPECT_TRUE(spec.security_opt.empty());
  ASSERT_EQ(spec.ports.size(), 1u);
  EXPECT_EQ(spec.ports[0].host_ip, "127.77.0.1");
  EXPECT_EQ(spec.ports[0].host_port, "22");
  EXPECT_EQ(spec.labels, vm.labels);
}

}  // namespace
}  // namespace gpuprov::docker
