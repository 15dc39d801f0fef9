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

#include "docker_backend_fixture.h"

namespace gpuprov::emulator {
namespace {

using testing::Call;
using testing::DockerBackendTest;
using testing::Reply;
using testing::WaitFor;
using namespace std::chrono_literals;

constexpr const char* kLambdaKey = "secret_docker_lambda";
constexpr const char* kHyperstackKey = "docker-hyperstack";
constexpr const char* kPublicKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPtlieUdwvU3Yi8XHX36t5VZpca1by3GqjV+S0aD87Tm emu-test";

class LambdaHyperstackDockerTest : public DockerBackendTest {
 protected:
  void SetUp() override {
    EmulatorOptions o;
    o.clouds = {"lambda", "hyperstack"};
    o.tokens["lambda"] = {kLambdaKey};
    o.tokens["hyperstack"] = {kHyperstackKey};
    o.enforce_rate_limits = false;
    StartDockerEmulator(o);
  }
  std::string ExecOut(const std::string& id, const std::string& cmd) { return Exec(id, cmd).out; }
  // The ports of instance name that this machine can reach now, as the control API shows
  // them (the emulator's port gate follows the cloud's rules).
  std::string Reachable(const std::string& cloud, const std::string& name) {
    JsonArray rows = GetArray(Call(control_, "GET", "/instances?cloud=" + cloud).Json(), "instances");
    for (size_t i = 0; rows && i < rows->size(); ++i) {
      JsonObject row = rows->getObject(static_cast<unsigned>(i));
      if (row->getValue<std::string>("name") == name) {
        return row->getValue<std::string>("reachable_ports");
      }
    }
    return "(no instance " + name + ")";
  }

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
  EXPECT_EQ(Reachable("lambda", "emu-lambda-vm"), "22,6443");
  const std::string status = WaitCloudInit(cid);
  EXPECT_NE(status.find("status: done"), std::string::npos) << status;
  EXPECT_EQ(ExecOut(cid, "cat /root/lambda-user-data"), "ran-by-cloud-init\n");
  EXPECT_NE(ExecOut(cid, "cat /home/ubuntu/.ssh/authorized_keys").find(kPublicKey), std::string::npos);
  EXPECT_EQ(ExecOut(cid, "cat /etc/gpuprov-testvm/gpu"), "H100-80GB:1\n");
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
  EXPECT_EQ(Reachable("hyperstack", "emu-hyperstack-vm"), "22,443");
  const std::string status = WaitCloudInit(cid);
  EXPECT_NE(status.find("status: done"), std::string::npos) << status;
  EXPECT_EQ(ExecOut(cid, "cat /root/hyperstack-user-data"), "ran-by-cloud-init\n");
  EXPECT_NE(ExecOut(cid, "cat /home/ubuntu/.ssh/authorized_keys").find(kPublicKey), std::string::npos);
  EXPECT_EQ(ExecOut(cid, "cat /etc/gpuprov-testvm/gpu"), "A100-80GB:1\n");
  ASSERT_EQ(H("DELETE", "/core/virtual-machines/" + std::to_string(id)).status, 200);
  EXPECT_TRUE(WaitFor([&] { return !engine_.InspectContainer(cid); }, 60s));
}

}  // namespace
}  // namespace gpuprov::emulator
