// SPDX-License-Identifier: Apache-2.0
//
// Lambda and Hyperstack on the docker backend: an instance is a real test VM
// whose cloud-init runs the user data as sent (plain text), whose default user
// ubuntu gets the key, whose GPU file matches the type or flavor, and whose
// published ports are exactly what the cloud's firewall rules allow at launch
// (Lambda: the account-wide rules; Hyperstack: the VM's security rules).
// Deleting removes the container. Skipped when Docker or the test image is not there.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "docker_engine.h"
#include "emulator.h"
#include "emulator_test_util.h"

namespace gpuprov::emulator {
namespace {

using testing::Call;
using testing::Reply;
using testing::WaitFor;
using namespace std::chrono_literals;

constexpr const char* kLambdaKey = "secret_docker_lambda";
constexpr const char* kHyperstackKey = "docker-hyperstack";
constexpr const char* kPublicKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPtlieUdwvU3Yi8XHX36t5VZpca1by3GqjV+S0aD87Tm emu-test";

std::string Image() {
  const char* env = std::getenv("GPUPROV_TESTVM_IMAGE");
  return env && *env ? env : GPUPROV_TESTVM_IMAGE;
}

class LambdaHyperstackDockerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      engine_.Ping();
    } catch (const std::exception& e) {
      GTEST_SKIP() << "no Docker daemon: " << e.what();
    }
    if (!engine_.ImageExists(Image())) {
      GTEST_SKIP() << "image " << Image()
                   << " is not built; run: bash tests/fixtures/testvm/build-image.sh";
    }
    EmulatorOptions o;
    o.backend = "docker";
    o.image = Image();
    o.clouds = {"lambda", "hyperstack"};
    o.tokens["lambda"] = {kLambdaKey};
    o.tokens["hyperstack"] = {kHyperstackKey};
    o.enforce_rate_limits = false;
    emu_ = std::make_unique<Emulator>(o);
    emu_->Start();
    control_ = emu_->ControlUrl();
  }
  void TearDown() override { emu_.reset(); }

  std::string ContainerOf(const std::string& cloud, const std::string& name) {
    for (const auto& c : engine_.ListContainers({"io.gpuprov.emulator=1",
                                                 "io.gpuprov.emulator.cloud=" + cloud,
                                                 "io.gpuprov.emulator.name=" + name})) {
      return c.id;
    }
    return "";
  }
  std::string Exec(const std::string& id, const std::string& cmd) {
    return engine_.Exec(id, {"/bin/sh", "-c", cmd}).out;
  }
  std::string WaitCloudInit(const std::string& id) {
    std::string out;
    WaitFor(
        [&] {
          try {
            out = Exec(id, "cloud-init status 2>&1 || true");
            return out.find("status: done") != std::string::npos ||
                   out.find("status: error") != std::string::npos;
          } catch (const std::exception&) {
            return false;
          }
        },
        240s);
    return out;
  }
  // The container ports Docker was asked to publish on ip.
  std::set<int> Published(const std::string& cid, const std::string& ip) {
    std::set<int> ports;
    auto info = engine_.InspectContainer(cid);
    if (!info) return {-1};
    for (const auto& b : info->port_bindings) {
      if (b.host_ip == ip) ports.insert(b.container_port);
    }
    return ports;
  }

  docker::Engine engine_ = docker::Engine::FromEnvironment(std::chrono::seconds(60));
  std::unique_ptr<Emulator> emu_;
  std::string control_;
};

TEST_F(LambdaHyperstackDockerTest, LambdaInstanceRunsItsUserDataBehindTheAccountRules) {
  const std::string base = emu_->BaseUrl("lambda");
  auto L = [&](const std::string& m, const std::string& p, const std::string& b = "") {
    return Call(base, m, p, b, kLambdaKey);
  };
  ASSERT_EQ(L("POST", "/ssh-keys", R"({"name":"k","public_key":")" + std::string(kPublicKey) + "\"}")
                .status,
            200);
  ASSERT_EQ(L("PUT", "/firewall-rules", R"({"data":[
    {"protocol":"tcp","port_range":[22,22],"source_network":"0.0.0.0/0","description":"ssh"},
    {"protocol":"tcp","port_range":[6443,6443],"source_network":"0.0.0.0/0","description":"k8s"}]})")
                .status,
            200);
  Reply r = L("POST", "/instance-operations/launch",
              R"({"region_name":"us-east-1","instance_type_name":"gpu_1x_h100_pcie","ssh_key_names":["k"],"name":"emu-lambda-vm","user_data":"#!/bin/bash\necho ran-by-cloud-init > /root/lambda-user-data\n"})");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string id = GetArray(GetObject(r.Json(), "data"), "instance_ids")->get(0).toString();
  std::string ip;
  ASSERT_TRUE(WaitFor(
      [&] {
        JsonObject i = GetObject(L("GET", "/instances/" + id).Json(), "data");
        if (!i || i->getValue<std::string>("status") != "active" || i->isNull("ip")) return false;
        ip = i->getValue<std::string>("ip");
        return true;
      },
      90s));
  EXPECT_EQ(ip.rfind("127.90.", 0), 0u) << ip;
  const std::string cid = ContainerOf("lambda", "emu-lambda-vm");
  ASSERT_FALSE(cid.empty());
  EXPECT_EQ(Published(cid, ip), (std::set<int>{22, 6443}));
  const std::string status = WaitCloudInit(cid);
  EXPECT_NE(status.find("status: done"), std::string::npos) << status;
  EXPECT_EQ(Exec(cid, "cat /root/lambda-user-data"), "ran-by-cloud-init\n");
  EXPECT_NE(Exec(cid, "cat /home/ubuntu/.ssh/authorized_keys").find(kPublicKey), std::string::npos);
  EXPECT_EQ(Exec(cid, "cat /etc/gpuprov-testvm/gpu"), "H100-80GB:1\n");
  ASSERT_EQ(L("POST", "/instance-operations/terminate", R"({"instance_ids":[")" + id + "\"]}").status,
            200);
  EXPECT_TRUE(WaitFor([&] { return !engine_.InspectContainer(cid); }, 60s));
  EXPECT_TRUE(WaitFor(
      [&] {
        return Call(control_, "GET", "/counts").Json()->getValue<int>("backend_instances") == 0;
      },
      30s));
}

TEST_F(LambdaHyperstackDockerTest, HyperstackVmRunsItsUserDataBehindItsSecurityRules) {
  const std::string base = emu_->BaseUrl("hyperstack");
  auto H = [&](const std::string& m, const std::string& p, const std::string& b = "") {
    return Call(base, m, p, b, "", {{"api_key", kHyperstackKey}});
  };
  ASSERT_EQ(H("POST", "/core/keypairs",
              R"({"name":"k","environment_name":"default-CANADA-1","public_key":")" +
                  std::string(kPublicKey) + "\"}")
                .status,
            200);
  Reply r = H("POST", "/core/virtual-machines",
              R"({"name":"emu-hyperstack-vm","environment_name":"default-CANADA-1","image_name":"Ubuntu Server 22.04 LTS R535 CUDA 12.2","flavor_name":"n3-A100x1","key_name":"k","count":1,"assign_floating_ip":true,"enable_port_randomization":false,"user_data":"#!/bin/bash\necho ran-by-cloud-init > /root/hyperstack-user-data\n","security_rules":[
      {"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"0.0.0.0/0","port_range_min":22,"port_range_max":22},
      {"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"0.0.0.0/0","port_range_min":443,"port_range_max":443}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  const int64_t id = GetArray(r.Json(), "instances")->getObject(0)->getValue<int64_t>("id");
  std::string ip;
  ASSERT_TRUE(WaitFor(
      [&] {
        JsonObject v = GetObject(H("GET", "/core/virtual-machines/" + std::to_string(id)).Json(),
                                 "instance");
        if (!v || v->getValue<std::string>("floating_ip_status") != "ATTACHED") return false;
        ip = v->getValue<std::string>("floating_ip");
        return true;
      },
      90s));
  const std::string cid = ContainerOf("hyperstack", "emu-hyperstack-vm");
  ASSERT_FALSE(cid.empty());
  EXPECT_EQ(Published(cid, ip), (std::set<int>{22, 443}));
  const std::string status = WaitCloudInit(cid);
  EXPECT_NE(status.find("status: done"), std::string::npos) << status;
  EXPECT_EQ(Exec(cid, "cat /root/hyperstack-user-data"), "ran-by-cloud-init\n");
  EXPECT_NE(Exec(cid, "cat /home/ubuntu/.ssh/authorized_keys").find(kPublicKey), std::string::npos);
  EXPECT_EQ(Exec(cid, "cat /etc/gpuprov-testvm/gpu"), "A100-80GB:1\n");
  ASSERT_EQ(H("DELETE", "/core/virtual-machines/" + std::to_string(id)).status, 200);
  EXPECT_TRUE(WaitFor([&] { return !engine_.InspectContainer(cid); }, 60s));
}

}  // namespace
}  // namespace gpuprov::emulator
