// SPDX-License-Identifier: Apache-2.0
//
// The Lambda Cloud emulator over HTTP with the memory backend: both auth forms,
// the catalogue, launch/list/get/terminate with its states over time, request
// shapes, SSH keys, the account-wide firewall rules (PUT replaces) and rulesets
// and the reachability they give, the documented pacing (429s counted), and the
// fault knobs as Lambda shows them.
#include <Poco/Base64Encoder.h>
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>

#include "emulator.h"
#include "emulator_test_util.h"

namespace gpuprov::emulator {
namespace {

using testing::Call;
using testing::Reply;
using testing::WaitFor;
using namespace std::chrono_literals;

constexpr const char* kKey = "secret_lambda_test_key";
constexpr const char* kOtherKey = "secret_lambda_other_key";  // a second key of the account
constexpr const char* kPublicKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPtlieUdwvU3Yi8XHX36t5VZpca1by3GqjV+S0aD87Tm emu-test";

std::string Base64(const std::string& s) {
  std::ostringstream out;
  Poco::Base64Encoder enc(out);
  enc << s;
  enc.close();
  return out.str();
}

std::string ErrorCode(const Reply& r) {
  JsonObject e = GetObject(r.Json(), "error");
  return e ? e->getValue<std::string>("code") : "(no error object: " + r.body + ")";
}

class LambdaApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EmulatorOptions o;
    o.backend = "memory";
    o.boot_seconds = 0.3;
    o.clouds = {"lambda"};
    o.tokens["lambda"] = {kKey, kOtherKey};
    o.enforce_rate_limits = false;  // the pacing test turns them on
    emu_ = std::make_unique<Emulator>(o);
    emu_->Start();
    base_ = emu_->BaseUrl("lambda");
    control_ = emu_->ControlUrl();
  }
  void TearDown() override { emu_.reset(); }

  Reply L(const std::string& method, const std::string& path, const std::string& body = "") {
    return Call(base_, method, path, body, kKey);
  }
  Reply Control(const std::string& method, const std::string& path, const std::string& body = "") {
    return Call(control_, method, path, body);
  }
  void Fault(const std::string& json) {
    Reply r = Control("POST", "/faults", json);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  void Settings(const std::string& json) {
    Reply r = Control("POST", "/settings", json);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  int64_t Count(const std::string& what) {
    return Control("GET", "/counts?cloud=lambda").Json()->getValue<int64_t>(what);
  }

  void AddKey(const std::string& name = "gpuprov") {
    Reply r = L("POST", "/ssh-keys",
                R"({"name":")" + name + R"(","public_key":")" + kPublicKey + "\"}");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  static std::string LaunchBody(const std::string& name, const std::string& extra = "",
                                const std::string& type = "gpu_1x_a100_sxm4",
                                const std::string& region = "us-east-1") {
    return R"({"region_name":")" + region + R"(","instance_type_name":")" + type +
           R"(","ssh_key_names":["gpuprov"],"name":")" + name + R"(","quantity":1)" + extra + "}";
  }
  std::string Launch(const std::string& name, const std::string& extra = "",
                     const std::string& type = "gpu_1x_a100_sxm4",
                     const std::string& region = "us-east-1") {
    Reply r = L("POST", "/instance-operations/launch", LaunchBody(name, extra, type, region));
    EXPECT_EQ(r.status, 200) << r.body;
    JsonArray ids = GetArray(GetObject(r.Json(), "data"), "instance_ids");
    return ids && ids->size() == 1 ? ids->get(0).convert<std::string>() : "";
  }
  JsonObject Instance(const std::string& id) {
    Reply r = L("GET", "/instances/" + id);
    return r.status == 200 ? GetObject(r.Json(), "data") : nullptr;
  }
  std::string Status(const std::string& id) {
    JsonObject i = Instance(id);
    return i ? i->getValue<std::string>("status") : "404";
  }
  // The control API's allowed_ports of instance id.
  std::set<int> AllowedPorts(const std::string& id) {
    JsonArray rows = GetArray(Control("GET", "/instances?cloud=lambda").Json(), "instances");
    for (unsigned i = 0; i < rows->size(); ++i) {
      JsonObject row = rows->getObject(i);
      if (row->getValue<std::string>("id") != id) continue;
      std::set<int> out;
      JsonArray p = GetArray(row, "allowed_ports");
      for (unsigned j = 0; j < p->size(); ++j) out.insert(p->get(j).convert<int>());
      return out;
    }
    return {-1};
  }

  std::unique_ptr<Emulator> emu_;
  std::string base_, control_;
};

TEST_F(LambdaApiTest, AcceptsBearerAndBasicWithTheKeyAsUserAndAnEmptyPassword) {
  EXPECT_EQ(L("GET", "/instances").status, 200);
  auto basic = [&](const std::string& userpass) {
    return Call(base_, "GET", "/instances", "", "",
                {{"Authorization", "Basic " + Base64(userpass)}});
  };
  EXPECT_EQ(basic(std::string(kKey) + ":").status, 200);
  for (const Reply& r : {basic(std::string(kKey) + ":password"), basic("other:"),
                         Call(base_, "GET", "/instances", "", "wrong"),
                         Call(base_, "GET", "/instances")}) {
    EXPECT_EQ(r.status, 401);
    EXPECT_EQ(ErrorCode(r), "global/invalid-api-key");
    EXPECT_EQ(GetObject(r.Json(), "error")->getValue<std::string>("message"),
              "API key was invalid, expired, or deleted.");
  }
}

TEST_F(LambdaApiTest, InstanceTypesAreAMapKeyedByNameWithLiveCapacity) {
  Reply r = L("GET", "/instance-types");
  ASSERT_EQ(r.status, 200);
  JsonObject data = GetObject(r.Json(), "data");
  ASSERT_TRUE(data);
  JsonObject h100 = GetObject(data, "gpu_1x_h100_pcie");
  ASSERT_TRUE(h100);
  JsonObject type = GetObject(h100, "instance_type");
  EXPECT_EQ(type->getValue<std::string>("gpu_description"), "H100 (80 GB PCIe)");
  EXPECT_EQ(GetObject(type, "specs")->getValue<int>("gpus"), 1);
  EXPECT_GT(type->getValue<int>("price_cents_per_hour"), 0);
  JsonArray regions = GetArray(h100, "regions_with_capacity_available");
  ASSERT_GT(regions->size(), 0u);
  EXPECT_EQ(regions->getObject(0)->getValue<std::string>("name"), "us-east-1");
  EXPECT_EQ(regions->getObject(0)->getValue<std::string>("description"), "Virginia, USA");
  EXPECT_TRUE(GetObject(data, "gpu_8x_h100_sxm5"));
  EXPECT_TRUE(GetObject(data, "gpu_1x_gh200"));
  EXPECT_FALSE(GetObject(data, "gpu_1x_l4"));  // not a Lambda type
  Settings(R"({"cloud":"lambda","sold_out":["gpu_1x_h100_pcie"]})");
  data = GetObject(L("GET", "/instance-types").Json(), "data");
  EXPECT_EQ(GetArray(GetObject(data, "gpu_1x_h100_pcie"), "regions_with_capacity_available")->size(),
            0u);
  AddKey();
  Reply sold = L("POST", "/instance-operations/launch", LaunchBody("x", "", "gpu_1x_h100_pcie"));
  EXPECT_EQ(sold.status, 400);
  EXPECT_EQ(ErrorCode(sold), "instance-operations/launch/insufficient-capacity");
}

// L-SPEC (Lambda's OpenAPI spec v1.8.3) has listImages and no regions operation: GET /regions
// is not served (the regions are in each instance type's regions_with_capacity_available).
TEST_F(LambdaApiTest, ImagesAreServedAndRegionsAreNoOperationOfTheSpec) {
  EXPECT_EQ(L("GET", "/regions").status, 404);
  JsonArray images = GetArray(L("GET", "/images").Json(), "data");
  ASSERT_GT(images->size(), 0u);
  JsonObject i = images->getObject(0);
  for (const char* k : {"id", "name", "family", "version", "architecture"}) {
    EXPECT_TRUE(i->has(k)) << k;
  }
  EXPECT_EQ(GetObject(i, "region")->getValue<std::string>("name"), "us-east-1");
}

TEST_F(LambdaApiTest, LaunchedInstanceBootsThenIsActiveWithAnIpThenTerminatesAndIsGone) {
  AddKey();
  const std::string id = Launch(
      "gpuprov-a", R"(,"user_data":"#cloud-config\nruncmd: [touch /x]\n","tags":[{"key":"gpuprov","value":"a"}],"image":{"family":"lambda-stack-22-04"})");
  ASSERT_TRUE(std::regex_match(id, std::regex("[0-9a-f]{32}"))) << id;
  JsonObject i = Instance(id);
  ASSERT_TRUE(i);
  EXPECT_EQ(i->getValue<std::string>("status"), "booting");
  // L-SPEC Instance: ip is a string, absent until known (never null); no image field; the
  // required actions object.
  EXPECT_FALSE(i->has("ip"));
  EXPECT_FALSE(i->has("image"));
  JsonObject actions = GetObject(i, "actions");
  ASSERT_TRUE(actions);
  for (const char* a : {"migrate", "rebuild", "restart", "cold_reboot", "terminate"}) {
    ASSERT_TRUE(GetObject(actions, a)) << a;
    EXPECT_TRUE(GetObject(actions, a)->has("available")) << a;
  }
  EXPECT_EQ(GetObject(actions, "restart")->getValue<std::string>("reason_code"),
            "vm-has-not-launched");
  EXPECT_EQ(i->getValue<std::string>("name"), "gpuprov-a");
  EXPECT_EQ(GetObject(i, "region")->getValue<std::string>("name"), "us-east-1");
  EXPECT_EQ(GetObject(i, "instance_type")->getValue<std::string>("name"), "gpu_1x_a100_sxm4");
  EXPECT_EQ(GetArray(i, "ssh_key_names")->get(0).convert<std::string>(), "gpuprov");
  EXPECT_EQ(GetArray(i, "tags")->getObject(0)->getValue<std::string>("value"), "a");
  EXPECT_TRUE(std::regex_match(i->getValue<std::string>("hostname"),
                               std::regex(R"(10-110-\d+-\d+\.cloud\.lambdalabs\.com)")))
      << i->getValue<std::string>("hostname");
  ASSERT_TRUE(WaitFor([&] { return Status(id) == "active"; }, 5s));
  i = Instance(id);
  EXPECT_TRUE(std::regex_match(i->getValue<std::string>("ip"), std::regex(R"(127\.91\.\d+\.\d+)")));
  JsonArray list = GetArray(L("GET", "/instances").Json(), "data");
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->getObject(0)->getValue<std::string>("id"), id);
  // The default account rules: SSH only.
  EXPECT_EQ(AllowedPorts(id), (std::set<int>{22}));
  EXPECT_EQ(Count("instances"), 1);

  Reply t = L("POST", "/instance-operations/terminate", R"({"instance_ids":[")" + id + "\"]}");
  ASSERT_EQ(t.status, 200) << t.body;
  JsonArray gone = GetArray(GetObject(t.Json(), "data"), "terminated_instances");
  ASSERT_EQ(gone->size(), 1u);
  EXPECT_EQ(gone->getObject(0)->getValue<std::string>("status"), "terminating");
  EXPECT_EQ(Status(id), "terminating");
  ASSERT_TRUE(WaitFor([&] { return Status(id) == "404"; }, 5s));
  Reply missing = L("GET", "/instances/" + id);
  EXPECT_EQ(ErrorCode(missing), "global/object-does-not-exist");
  EXPECT_EQ(GetArray(L("GET", "/instances").Json(), "data")->size(), 0u);
  Reply again = L("POST", "/instance-operations/terminate", R"({"instance_ids":[")" + id + "\"]}");
  EXPECT_EQ(again.status, 404);
  EXPECT_EQ(ErrorCode(again), "global/object-does-not-exist");
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("backend_instances"), 0);
}

TEST_F(LambdaApiTest, LaunchBodiesAreCheckedAgainstTheDocumentedShape) {
  AddKey();
  AddKey("second");
  auto launch = [&](const std::string& body) {
    return L("POST", "/instance-operations/launch", body);
  };
  struct Case {
    std::string body;
    int status;
    std::string code;
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {LaunchBody("a", R"(,"usr_data":"#!/bin/sh")"), 400, "global/invalid-parameters", "usr_data"},
      {LaunchBody("a", R"(,"user_data":42)"), 400, "global/invalid-parameters", "user_data"},
      {R"({"region_name":"us-east-1","instance_type_name":"gpu_1x_a10","ssh_key_names":["gpuprov"],"quantity":"1"})",
       400, "global/invalid-parameters", "quantity"},
      {R"({"region_name":"us-east-1","instance_type_name":"gpu_1x_a10","ssh_key_names":"gpuprov"})",
       400, "global/invalid-parameters", "ssh_key_names"},
      {R"({"region_name":"us-east-1","instance_type_name":"gpu_1x_a10"})", 400,
       "global/invalid-parameters", "ssh_key_names"},
      {R"({"region_name":"us-east-1","instance_type_name":"gpu_1x_a10","ssh_key_names":["gpuprov","second"]})",
       400, "global/invalid-parameters", "exactly one"},
      {R"({"region_name":"us-east-1","instance_type_name":"gpu_1x_a10","ssh_key_names":["nokey"]})",
       404, "global/object-does-not-exist", "nokey"},
      {LaunchBody("a", "", "gpu_1x_l4"), 400, "global/invalid-parameters", "gpu_1x_l4"},
      {LaunchBody("a", "", "gpu_1x_a10", "mars-1"), 400, "global/invalid-parameters", "mars-1"},
      {LaunchBody("a", R"(,"tags":[{"key":"Bad Key","value":"v"}])"), 400,
       "global/invalid-parameters", "tags[0].key"},
      {LaunchBody("a", R"(,"tags":[{"key":"k","value":"v","extra":1}])"), 400,
       "global/invalid-parameters", "tags[0].extra"},
      {LaunchBody("a", R"(,"tags":{"k":"v"})"), 400, "global/invalid-parameters", "tags"},
      {LaunchBody("a", R"(,"image":{"family":"lambda-stack-22-04","id":"x"})"), 400,
       "global/invalid-parameters", "exactly one"},
      {LaunchBody("a", R"(,"image":{"family":"windows"})"), 404, "global/object-does-not-exist",
       "windows"},
      {LaunchBody("a", R"(,"image":{"id":"0d1f4a0e3e6c4c0a8c2b7a5e9f1d2c3b"})", "gpu_1x_gh200"),
       400, "global/invalid-parameters", "arm64"},
      {LaunchBody("a", R"(,"hostname":"Not_Valid")"), 400, "global/invalid-parameters", "hostname"},
      {LaunchBody(std::string(65, 'n')), 400, "global/invalid-parameters", "name"},
      {LaunchBody("a", R"(,"firewall_rulesets":[{"id":"nope"}])"), 404,
       "global/object-does-not-exist", "nope"},
      {LaunchBody("a", R"(,"file_system_names":["fs"])"), 404, "global/object-does-not-exist",
       "fs"},
      // A type without capacity in that region.
      {LaunchBody("a", "", "gpu_1x_b200_sxm6", "us-east-1"), 400,
       "instance-operations/launch/insufficient-capacity", "capacity"},
      {"not json", 400, "global/invalid-parameters", "JSON"},
  };
  for (const auto& c : cases) {
    Reply r = launch(c.body);
    EXPECT_EQ(r.status, c.status) << c.body << " -> " << r.body;
    EXPECT_EQ(ErrorCode(r), c.code) << c.body;
    EXPECT_NE(r.body.find(c.mentions), std::string::npos) << c.body << " -> " << r.body;
  }
  // More than 1 MB of user data.
  // L-SPEC: "cannot exceed 1MB"; the emulator takes the stricter reading, 10^6 bytes.
  Reply big = launch(LaunchBody("a", R"(,"user_data":")" + std::string(1000 * 1000 + 1, 'x') + "\""));
  EXPECT_EQ(big.status, 400);
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("backend_instances"), 0);
  // Any string is accepted as user data (it is run by cloud-init, not decoded).
  EXPECT_FALSE(Launch("b64", R"(,"user_data":"IyEvYmluL3NoCg==")").empty());
}

TEST_F(LambdaApiTest, LegacyServerRejectsUserDataImageAndRulesets) {
  AddKey();
  Settings(R"({"cloud":"lambda","legacy_api":true})");
  for (const std::string& extra : {std::string(R"(,"user_data":"#!/bin/sh")"),
                                   std::string(R"(,"image":{"family":"lambda-stack-22-04"})"),
                                   std::string(R"(,"firewall_rulesets":[])")}) {
    Reply r = L("POST", "/instance-operations/launch", LaunchBody("a", extra));
    EXPECT_EQ(r.status, 400) << extra;
    EXPECT_EQ(ErrorCode(r), "global/invalid-parameters");
  }
  EXPECT_FALSE(Launch("plain").empty());
}

TEST_F(LambdaApiTest, SshKeysAddListDeleteAndGenerate) {
  AddKey("mine");
  JsonArray keys = GetArray(L("GET", "/ssh-keys").Json(), "data");
  ASSERT_EQ(keys->size(), 1u);
  const std::string id = keys->getObject(0)->getValue<std::string>("id");
  EXPECT_EQ(keys->getObject(0)->getValue<std::string>("public_key"), kPublicKey);
  // L-SPEC addSSHKey documents only 400 global/invalid-parameters (no global/duplicate).
  Reply dup = L("POST", "/ssh-keys", R"({"name":"mine","public_key":")" + std::string(kPublicKey) + "\"}");
  EXPECT_EQ(dup.status, 400);
  EXPECT_EQ(ErrorCode(dup), "global/invalid-parameters");
  Reply bad = L("POST", "/ssh-keys", R"({"name":"x","public_key":"not a key"})");
  EXPECT_EQ(ErrorCode(bad), "global/invalid-parameters");
  Reply extra = L("POST", "/ssh-keys", R"({"name":"x","public_key":")" + std::string(kPublicKey) +
                                           R"(","comment":"c"})");
  EXPECT_EQ(ErrorCode(extra), "global/invalid-parameters");
  Reply gen = L("POST", "/ssh-keys", R"({"name":"generated"})");
  ASSERT_EQ(gen.status, 200) << gen.body;
  JsonObject g = GetObject(gen.Json(), "data");
  EXPECT_EQ(g->getValue<std::string>("public_key").rfind("ssh-rsa AAAAB3NzaC1yc2E", 0), 0u);
  EXPECT_NE(g->getValue<std::string>("private_key").find("PRIVATE KEY-----"), std::string::npos);
  EXPECT_EQ(Count("ssh_keys"), 2);
  EXPECT_EQ(L("DELETE", "/ssh-keys/" + id).status, 200);
  // L-SPEC deleteSSHKey lists 200, 400 (ApiErrorInvalidParameters), 401, 403: no 404.
  Reply again = L("DELETE", "/ssh-keys/" + id);
  EXPECT_EQ(again.status, 400);
  EXPECT_EQ(ErrorCode(again), "global/invalid-parameters");
  EXPECT_EQ(Count("ssh_keys"), 1);
}

TEST_F(LambdaApiTest, FirewallRulesStartAtSshAndIcmpAndPutReplacesTheWholeList) {
  JsonArray rules = GetArray(L("GET", "/firewall-rules").Json(), "data");
  ASSERT_EQ(rules->size(), 2u);
  EXPECT_EQ(rules->getObject(0)->getValue<std::string>("protocol"), "tcp");
  EXPECT_EQ(rules->getObject(1)->getValue<std::string>("protocol"), "icmp");
  EXPECT_EQ(Count("firewall_rules"), 0);
  AddKey();
  const std::string id = Launch("fw");
  EXPECT_EQ(AllowedPorts(id), (std::set<int>{22}));

  // The user's own rule and ours; whatever is not in the PUT is gone.
  const std::string put = R"({"data":[
    {"protocol":"tcp","port_range":[22,22],"source_network":"0.0.0.0/0","description":"Allow SSH"},
    {"protocol":"tcp","port_range":[8888,8888],"source_network":"203.0.113.0/24","description":"user jupyter"},
    {"protocol":"tcp","port_range":[6443,6443],"source_network":"0.0.0.0/0","description":"gpuprov fw"}]})";
  Reply r = L("PUT", "/firewall-rules", put);
  ASSERT_EQ(r.status, 200) << r.body;
  rules = GetArray(L("GET", "/firewall-rules").Json(), "data");
  ASSERT_EQ(rules->size(), 3u);
  EXPECT_EQ(rules->getObject(1)->getValue<std::string>("description"), "user jupyter");
  EXPECT_EQ(Count("firewall_rules"), 2);  // the two not in the starting list
  // 8888 is open only to 203.0.113.0/24, not to the test host.
  EXPECT_EQ(AllowedPorts(id), (std::set<int>{22, 6443}));
  // The global ruleset is the same list.
  JsonObject global = GetObject(L("GET", "/firewall-rulesets/global").Json(), "data");
  EXPECT_EQ(GetArray(global, "rules")->size(), 3u);

  // Invalid lists change nothing.
  for (const std::string& body : {
           std::string(R"({"data":[{"protocol":"tcp","source_network":"0.0.0.0/0","description":"no range"}]})"),
           std::string(R"({"data":[{"protocol":"icmp","port_range":[1,1],"source_network":"0.0.0.0/0","description":"x"}]})"),
           std::string(R"({"data":[{"protocol":"tcp","port_range":[1,2],"source_network":"nowhere","description":"x"}]})"),
           std::string(R"({"data":[{"protocol":"tcp","port_range":[5,1],"source_network":"0.0.0.0/0","description":"x"}]})"),
           std::string(R"({"data":[{"protocol":"tcp","port_range":[1,1],"source_network":"0.0.0.0/0"}]})"),
           std::string(R"({"data":[{"protocol":"sctp","source_network":"0.0.0.0/0","description":"x"}]})"),
           std::string(R"({"rules":[]})"), std::string(R"([])")}) {
    Reply bad = L("PUT", "/firewall-rules", body);
    EXPECT_EQ(bad.status, 400) << body;
    EXPECT_EQ(ErrorCode(bad), "global/invalid-parameters") << body;
  }
  std::string many = R"({"data":[)";
  for (int i = 0; i < 21; ++i) {
    many += std::string(i ? "," : "") + R"({"protocol":"tcp","port_range":[)" +
            std::to_string(1000 + i) + "," + std::to_string(1000 + i) +
            R"(],"source_network":"0.0.0.0/0","description":"r"})";
  }
  EXPECT_EQ(L("PUT", "/firewall-rules", many + "]}").status, 400);
  EXPECT_EQ(GetArray(L("GET", "/firewall-rules").Json(), "data")->size(), 3u);
  // Removing SSH locks the instance out.
  ASSERT_EQ(L("PUT", "/firewall-rules", R"({"data":[]})").status, 200);
  EXPECT_EQ(AllowedPorts(id), (std::set<int>{}));
}

TEST_F(LambdaApiTest, RulesetsAttachAtLaunchAndCannotBeDeletedWhileAttached) {
  AddKey();
  Reply c = L("POST", "/firewall-rulesets", R"({"name":"gpuprov-a","region":"us-east-1","rules":[
      {"protocol":"tcp","port_range":[6443,6443],"source_network":"0.0.0.0/0","description":"k8s"},
      {"protocol":"tcp","port_range":[80,80],"source_network":"0.0.0.0/0","description":"http"}]})");
  ASSERT_EQ(c.status, 200) << c.body;
  const std::string rs = GetObject(c.Json(), "data")->getValue<std::string>("id");
  EXPECT_EQ(Count("rulesets"), 1);
  // L-SPEC createFirewallRuleset: 400 is invalid-parameters or quota-exceeded (no duplicate).
  Reply dup = L("POST", "/firewall-rulesets", R"({"name":"gpuprov-a","region":"us-east-1","rules":[]})");
  EXPECT_EQ(ErrorCode(dup), "global/invalid-parameters");
  // Same region only.
  Reply wrong = L("POST", "/instance-operations/launch",
                  LaunchBody("w", R"(,"firewall_rulesets":[{"id":")" + rs + "\"}]", "gpu_1x_a10",
                             "us-west-1"));
  EXPECT_EQ(wrong.status, 400) << wrong.body;
  const std::string id = Launch("rs", R"(,"firewall_rulesets":[{"id":")" + rs + "\"}]");
  EXPECT_EQ(AllowedPorts(id), (std::set<int>{22, 80, 6443}));
  JsonObject got = GetObject(L("GET", "/firewall-rulesets/" + rs).Json(), "data");
  EXPECT_EQ(GetArray(got, "instance_ids")->get(0).convert<std::string>(), id);
  EXPECT_EQ(GetArray(Instance(id), "firewall_rulesets")->getObject(0)->getValue<std::string>("id"),
            rs);
  // PATCH rules replaces them.
  Reply p = L("PATCH", "/firewall-rulesets/" + rs, R"({"rules":[
      {"protocol":"tcp","port_range":[443,443],"source_network":"0.0.0.0/0","description":"https"}]})");
  ASSERT_EQ(p.status, 200) << p.body;
  EXPECT_EQ(AllowedPorts(id), (std::set<int>{22, 443}));
  // L-SPEC deleteFirewallRuleset: 400 ApiErrorFirewallRulesetInUse (409 is an internal error).
  Reply busy = L("DELETE", "/firewall-rulesets/" + rs);
  EXPECT_EQ(busy.status, 400);
  EXPECT_EQ(ErrorCode(busy), "firewall-rulesets/firewall-ruleset-in-use");
  // In use while the instance terminates, and (ruleset_release_seconds) a while after.
  Settings(R"({"cloud":"lambda","ruleset_release_seconds":1.5})");
  ASSERT_EQ(L("POST", "/instance-operations/terminate", R"({"instance_ids":[")" + id + "\"]}").status,
            200);
  EXPECT_EQ(ErrorCode(L("DELETE", "/firewall-rulesets/" + rs)),
            "firewall-rulesets/firewall-ruleset-in-use");
  ASSERT_TRUE(WaitFor([&] { return Status(id) == "404"; }, 5s));
  EXPECT_EQ(ErrorCode(L("DELETE", "/firewall-rulesets/" + rs)),
            "firewall-rulesets/firewall-ruleset-in-use");
  ASSERT_TRUE(WaitFor([&] { return L("DELETE", "/firewall-rulesets/" + rs).status == 200; }, 5s));
  Settings(R"({"cloud":"lambda","ruleset_release_seconds":0})");
  EXPECT_EQ(L("GET", "/firewall-rulesets/" + rs).status, 404);
  EXPECT_EQ(Count("rulesets"), 0);
  EXPECT_EQ(GetArray(L("GET", "/firewall-rulesets").Json(), "data")->size(), 0u);
}

// One request to the Lambda API served in-process, with the key.
HttpResponse ServeWithKey(CloudApi& api, const std::string& method, const std::string& path,
                          const std::string& body) {
  HttpRequest r;
  r.method = method;
  r.path = "/api/v1" + path;
  r.body = body;
  r.headers["authorization"] = std::string("Bearer ") + kKey;
  return api.Serve(r);
}

// The Lambda API on \a backend, unpaced, served in-process, with the SSH key "gpuprov".
std::unique_ptr<CloudApi> DirectApiWithKey(InstanceBackend* backend) {
  CloudOptions co;
  co.tokens = {kKey};
  co.enforce_rate_limits = false;
  auto api = MakeLambdaApi(backend, co);
  const HttpResponse key = ServeWithKey(
      *api, "POST", "/ssh-keys",
      R"({"name":"gpuprov","public_key":")" + std::string(kPublicKey) + "\"}");
  EXPECT_EQ(key.status, 200) << key.body;
  return api;
}

TEST_F(LambdaApiTest, RuleChangesReachTheBackendThroughSetReachablePorts) {
  // The API driven directly on a memory backend, to read what the backend was told.
  auto backend = MakeMemoryBackend(0ms);
  auto api = DirectApiWithKey(backend.get());
  auto call = [&](const std::string& method, const std::string& path, const std::string& body) {
    return ServeWithKey(*api, method, path, body);
  };
  ASSERT_EQ(call("POST", "/instance-operations/launch", LaunchBody("direct")).status, 200);
  JsonArray rows = api->Instances();
  ASSERT_EQ(rows->size(), 1u);
  const std::string backend_id = rows->getObject(0)->getValue<std::string>("backend_id");
  const PortSet before = backend->ReachablePorts(backend_id);
  HttpResponse put = call("PUT", "/firewall-rules", R"({"data":[
    {"protocol":"tcp","port_range":[22,22],"source_network":"0.0.0.0/0","description":"ssh"},
    {"protocol":"tcp","port_range":[6443,6443],"source_network":"0.0.0.0/0","description":"k8s"}]})");
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(backend->ReachablePorts(backend_id), (PortSet{22, 6443}));
  EXPECT_NE(backend->ReachablePorts(backend_id), before);
}

// A memory backend that keeps what the cloud asked of it: each spec, and each private ingress set.
class RecordingBackend : public InstanceBackend {
 public:
  std::string Name() const override { return inner_->Name(); }
  std::string Create(const InstanceSpec& spec) override {
    const std::string id = inner_->Create(spec);
    specs[id] = spec;
    return id;
  }
  InstanceStatus State(const std::string& id) override { return inner_->State(id); }
  void Delete(const std::string& id) override { inner_->Delete(id); }
  void Preempt(const std::string& id) override { inner_->Preempt(id); }
  size_t LiveCount(const std::string& cloud) override { return inner_->LiveCount(cloud); }
  void RemoveAll() override { inner_->RemoveAll(); }
  bool Stop(const std::string& id) override { return inner_->Stop(id); }
  bool Start(const std::string& id, bool new_address) override { return inner_->Start(id, new_address); }
  void SetReachablePorts(const std::string& id, const PortSet& ports) override {
    inner_->SetReachablePorts(id, ports);
  }
  PortSet ReachablePorts(const std::string& id) override { return inner_->ReachablePorts(id); }
  void SetPrivateIngress(const std::string& id, const PrivateIngress& ingress) override {
    ingress_set.insert(id);
    inner_->SetPrivateIngress(id, ingress);
  }
  PrivateIngress GetPrivateIngress(const std::string& id) override {
    return inner_->GetPrivateIngress(id);
  }
  std::map<std::string, InstanceSpec> specs;
  std::set<std::string> ingress_set;

 private:
  std::unique_ptr<InstanceBackend> inner_ = MakeMemoryBackend(0ms);
};

TEST_F(LambdaApiTest, EachRegionsInstancesShareAnUnfilteredPrivateNetworkAndTagsNameTheCluster) {
  // Lambda's firewall admits public sources only (L-SPEC FirewallRule.source_network): the
  // instances of a region reach each other on private_ip, which the backend is told.
  RecordingBackend backend;
  auto api = DirectApiWithKey(&backend);
  auto call = [&](const std::string& method, const std::string& path, const std::string& body) {
    return ServeWithKey(*api, method, path, body);
  };
  const std::string tags =
      R"(,"tags":[{"key":"gpuprov-cluster","value":"train"},{"key":"gpuprov-role","value":"agent"}])";
  for (const auto& [name, region] : {std::pair{"a", "us-east-1"}, std::pair{"b", "us-east-1"},
                                     std::pair{"c", "us-west-2"}}) {
    HttpResponse r = call("POST", "/instance-operations/launch",
                          LaunchBody(name, tags, "gpu_1x_a100_sxm4", region));
    ASSERT_EQ(r.status, 200) << r.body;
  }
  ASSERT_EQ(backend.specs.size(), 3u);
  std::map<std::string, std::string> network;  // name -> private network
  for (const auto& [id, spec] : backend.specs) {
    network[spec.name] = spec.private_network;
    EXPECT_EQ(backend.ingress_set.count(id), 1u) << spec.name;
    EXPECT_FALSE(backend.GetPrivateIngress(id).has_value()) << spec.name;  // nothing filtered
  }
  EXPECT_EQ(network["a"], "us-east-1");
  EXPECT_EQ(network["b"], "us-east-1");
  EXPECT_EQ(network["c"], "us-west-2");
  // The instance carries its tags and, once active, its private_ip (L-SPEC Instance).
  std::this_thread::sleep_for(50ms);
  HttpResponse listed = call("GET", "/instances", "");
  EXPECT_NE(listed.body.find(R"({"key":"gpuprov-role","value":"agent"})"), std::string::npos)
      << listed.body;
  EXPECT_NE(listed.body.find(R"("private_ip":"10.)"), std::string::npos) << listed.body;
}

TEST_F(LambdaApiTest, DocumentedPacingIsEnforcedAndEvery429Counted) {
  Settings(R"({"cloud":"lambda","enforce_rate_limits":true,"launch_interval_seconds":2})");
  EXPECT_EQ(L("GET", "/instances").status, 200);
  Reply fast = L("GET", "/instances");
  EXPECT_EQ(fast.status, 429);
  EXPECT_TRUE(GetObject(fast.Json(), "error"));
  EXPECT_EQ(Count("rate_limited"), 1);
  std::this_thread::sleep_for(1200ms);
  AddKey();
  std::this_thread::sleep_for(1200ms);
  EXPECT_FALSE(Launch("one").empty());
  std::this_thread::sleep_for(1200ms);
  Reply second = L("POST", "/instance-operations/launch", LaunchBody("two"));
  EXPECT_EQ(second.status, 429) << second.body;
  EXPECT_EQ(Count("rate_limited"), 2);
  std::this_thread::sleep_for(1200ms);
  EXPECT_FALSE(Launch("two").empty());
  // A wrong key is refused before pacing and not counted.
  EXPECT_EQ(Call(base_, "GET", "/instances", "", "wrong").status, 401);
  EXPECT_EQ(Count("rate_limited"), 2);
  Settings(R"({"cloud":"lambda","enforce_rate_limits":false})");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(L("GET", "/instances").status, 200);
}

// The limit is counted per API key (the spec's unit of authentication; lambda_api.cc Paced):
// a second request with the same key at once is refused, one with another key is not.
TEST_F(LambdaApiTest, PacingIsCountedPerApiKey) {
  Settings(R"({"cloud":"lambda","enforce_rate_limits":true})");
  EXPECT_EQ(L("GET", "/instances").status, 200);
  EXPECT_EQ(Call(base_, "GET", "/instances", "", kOtherKey).status, 200);
  EXPECT_EQ(L("GET", "/instances").status, 429);
  EXPECT_EQ(Call(base_, "GET", "/instances", "", kOtherKey).status, 429);
  EXPECT_EQ(Count("rate_limited"), 2);
}

TEST_F(LambdaApiTest, FaultsLookLikeLambda) {
  AddKey();
  Fault(R"({"cloud":"lambda","fault":"capacity"})");
  Reply cap = L("POST", "/instance-operations/launch", LaunchBody("c"));
  EXPECT_EQ(cap.status, 400);
  EXPECT_EQ(ErrorCode(cap), "instance-operations/launch/insufficient-capacity");
  EXPECT_EQ(GetObject(cap.Json(), "error")->getValue<std::string>("message"),
            "Not enough capacity to fulfill launch request.");

  Fault(R"({"cloud":"lambda","fault":"throttle","retry_after":3})");
  Reply t = L("GET", "/instances");
  EXPECT_EQ(t.status, 429);
  EXPECT_EQ(t.Header("retry-after"), "3");
  Fault(R"({"cloud":"lambda","fault":"throttle","retry_after":0})");
  Reply t0 = L("GET", "/instances");
  EXPECT_EQ(t0.status, 429);
  EXPECT_EQ(t0.Header("retry-after"), "");
  EXPECT_EQ(Count("rate_limited"), 2);

  Fault(R"({"cloud":"lambda","fault":"server_error","status":503})");
  Reply s = L("GET", "/instances");
  EXPECT_EQ(s.status, 503);
  EXPECT_EQ(ErrorCode(s), "provider/internal-unavailable");
  EXPECT_TRUE(GetObject(s.Json(), "error")->has("suggestion"));

  Fault(R"({"cloud":"lambda","fault":"server_error","value":"after_create","path":"/api/v1/instance-operations/launch"})");
  Reply ambiguous = L("POST", "/instance-operations/launch", LaunchBody("ambiguous"));
  EXPECT_EQ(ambiguous.status, 500);
  JsonArray list = GetArray(L("GET", "/instances").Json(), "data");
  ASSERT_EQ(list->size(), 1u);  // it was made all the same: find it by name
  EXPECT_EQ(list->getObject(0)->getValue<std::string>("name"), "ambiguous");

  Fault(R"({"cloud":"lambda","fault":"auth_failure"})");
  EXPECT_EQ(ErrorCode(L("GET", "/instances")), "global/invalid-api-key");
  EXPECT_EQ(L("GET", "/instances").status, 200);

  Fault(R"({"cloud":"lambda","fault":"quota"})");
  EXPECT_EQ(ErrorCode(L("POST", "/instance-operations/launch", LaunchBody("q"))),
            "global/quota-exceeded");
}

TEST_F(LambdaApiTest, BootFaultsVanishUnhealthyAndActiveWithoutAnIp) {
  AddKey();
  Fault(R"({"cloud":"lambda","fault":"vanish_during_boot"})");
  const std::string vanish = Launch("vanish");
  ASSERT_TRUE(WaitFor([&] { return Status(vanish) == "404"; }, 5s));
  Fault(R"({"cloud":"lambda","fault":"error_during_boot"})");
  const std::string sick = Launch("sick");
  ASSERT_TRUE(WaitFor([&] { return Status(sick) == "unhealthy"; }, 5s));
  Fault(R"({"cloud":"lambda","fault":"ip_after_boot","seconds":1})");
  const std::string late = Launch("late");
  ASSERT_TRUE(WaitFor([&] { return Status(late) == "active"; }, 5s));
  EXPECT_FALSE(Instance(late)->has("ip"));
  ASSERT_TRUE(WaitFor([&] { return Instance(late)->has("ip"); }, 5s));
  Fault(R"({"cloud":"lambda","fault":"slow_boot","seconds":1})");
  const std::string slow = Launch("slow");
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(Status(slow), "booting");
  ASSERT_TRUE(WaitFor([&] { return Status(slow) == "active"; }, 5s));
  ASSERT_EQ(Control("POST", "/reset", R"({"cloud":"lambda"})").status, 200);
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("ssh_keys"), 0);
  EXPECT_EQ(Count("backend_instances"), 0);
}

TEST_F(LambdaApiTest, UnknownPathsAndMethodsUseTheErrorEnvelope) {
  Reply r = L("GET", "/nothing-here");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(ErrorCode(r), "global/object-does-not-exist");
  // Not an operation of L-SPEC: 404 like any path it does not describe.
  Reply m = L("DELETE", "/instances");
  EXPECT_EQ(m.status, 404);
  EXPECT_TRUE(GetObject(m.Json(), "error"));
}

// Issue 30 part 2: the emulator serves only operations of Lambda's OpenAPI spec v1.8.3
// (paths transcribed here on their own); what the spec does not describe is 404.
TEST_F(LambdaApiTest, OnlyTheOperationsOfLambdasSpecAreServed) {
  AddKey();
  for (const auto& [m, p] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/regions"}, {"DELETE", "/instances"}, {"DELETE", "/instances/x"},
           {"POST", "/firewall-rules"}, {"DELETE", "/firewall-rules"}, {"PUT", "/ssh-keys"},
           {"GET", "/ssh-keys/x"}, {"POST", "/instance-types"}, {"GET", "/instance-operations/launch"},
           {"PUT", "/firewall-rulesets/x"}}) {
    Reply r = L(m, p, "{}");
    EXPECT_EQ(r.status, 404) << m << " " << p << " -> " << r.body;
    EXPECT_EQ(ErrorCode(r), "global/object-does-not-exist") << m << " " << p;
  }
  // The spec's operations the driver uses are served (not the 404 of an unknown path).
  for (const auto& [m, p] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/instances"}, {"GET", "/instance-types"}, {"GET", "/ssh-keys"},
           {"GET", "/firewall-rules"}, {"GET", "/firewall-rulesets"},
           {"GET", "/firewall-rulesets/global"}, {"GET", "/images"}}) {
    EXPECT_EQ(L(m, p).status, 200) << m << " " << p;
  }
  // postInstance renames; listFilesystems lists none.
  const std::string id = Launch("renamed");
  Reply renamed = L("POST", "/instances/" + id, R"({"name":"new-name"})");
  ASSERT_EQ(renamed.status, 200) << renamed.body;
  EXPECT_EQ(GetObject(renamed.Json(), "data")->getValue<std::string>("name"), "new-name");
  EXPECT_EQ(ErrorCode(L("POST", "/instances/" + id, R"({"nme":"x"})")), "global/invalid-parameters");
  EXPECT_EQ(GetArray(L("GET", "/file-systems").Json(), "data")->size(), 0u);
  // The spec's billing-address refusal (launchInstance 403) and a concurrent twin request.
  Fault(R"({"cloud":"lambda","fault":"invalid_address"})");
  Reply bill = L("POST", "/instance-operations/launch", LaunchBody("a"));
  EXPECT_EQ(bill.status, 403);
  EXPECT_EQ(ErrorCode(bill), "global/invalid-address");
  Fault(R"({"cloud":"lambda","fault":"concurrent","method":"POST","path":"/api/v1/ssh-keys"})");
  Reply twin = L("POST", "/ssh-keys", R"({"name":"twin","public_key":")" + std::string(kPublicKey) + "\"}");
  EXPECT_EQ(twin.status, 400);
  EXPECT_EQ(ErrorCode(twin), "global/invalid-parameters");
  EXPECT_EQ(Count("ssh_keys"), 2);
}

// The binary prints "lambda <url>" and "hyperstack <url>" and takes the keys from
// LAMBDA_API_KEY and HYPERSTACK_API_KEY.
TEST(LambdaHyperstackBinary, PrintsBothCloudsAndReadsTheirKeysFromTheEnvironment) {
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    setenv("LAMBDA_API_KEY", "env-lambda-key", 1);
    setenv("HYPERSTACK_API_KEY", "env-hyperstack-key", 1);
    execl(GPUPROV_EMULATOR_PATH, GPUPROV_EMULATOR_PATH, "--clouds", "lambda,hyperstack", nullptr);
    _exit(127);
  }
  close(out[1]);
  FILE* f = fdopen(out[0], "r");
  std::map<std::string, std::string> urls;
  char buf[512];
  while (urls.count("control") == 0 && fgets(buf, sizeof buf, f)) {
    std::string l = buf;
    if (!l.empty() && l.back() == '\n') l.pop_back();
    urls[l.substr(0, l.find(' '))] = l.substr(l.find(' ') + 1);
  }
  EXPECT_TRUE(std::regex_match(urls["lambda"], std::regex(R"(http://127\.0\.0\.1:\d+/api/v1)")))
      << urls["lambda"];
  EXPECT_TRUE(std::regex_match(urls["hyperstack"], std::regex(R"(http://127\.0\.0\.1:\d+/v1)")))
      << urls["hyperstack"];
  EXPECT_EQ(Call(urls["lambda"], "GET", "/instances", "", "env-lambda-key").status, 200);
  EXPECT_EQ(Call(urls["lambda"], "GET", "/instances", "", "emulator-lambda-token").status, 401);
  EXPECT_EQ(Call(urls["hyperstack"], "GET", "/core/environments", "", "",
                 {{"api_key", "env-hyperstack-key"}})
                .status,
            200);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  fclose(f);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace gpuprov::emulator
