// SPDX-License-Identifier: Apache-2.0
//
// The Massed Compute emulator over HTTP with the memory backend: bearer auth (full-access and
// read-only keys), token validation, the GPU inventory and its capacity, images, account SSH
// keys, launch/list/get/terminate/restart with the states over time, the request checks, and
// every fault knob of the emulator notes of plugins/massedcompute/REFERENCE.md.
#include <gtest/gtest.h>

#include <regex>

#include "emulator.h"
#include "emulator_test_util.h"

namespace gpuprov::emulator {
namespace {

using testing::Call;
using testing::Reply;
using testing::WaitFor;
using namespace std::chrono_literals;

constexpr const char* kToken = "mc_full_access_test_token";
constexpr const char* kOtherToken = "mc_second_name_test_token";
constexpr const char* kPublicKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPtlieUdwvU3Yi8XHX36t5VZpca1by3GqjV+S0aD87Tm emu-test";

std::string MessageOf(const Reply& r) {
  JsonObject o = r.Json();
  return GetString(o, "message").value_or("(no message: " + r.body + ")");
}

class MassedComputeApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EmulatorOptions o;
    o.backend = "memory";
    o.boot_seconds = 0.3;
    o.clouds = {"massedcompute"};
    o.tokens["massedcompute"] = {kToken, kOtherToken};
    emu_ = std::make_unique<Emulator>(o);
    emu_->Start();
    base_ = emu_->BaseUrl("massedcompute");
    control_ = emu_->ControlUrl();
  }
  void TearDown() override { emu_.reset(); }

  Reply M(const std::string& method, const std::string& path, const std::string& body = "",
          const std::string& token = kToken) {
    return Call(base_, method, path, body, token);
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
    return Control("GET", "/counts?cloud=massedcompute").Json()->getValue<int64_t>(what);
  }
  void AddKey(const std::string& name = "gpuprov abc") {
    Reply r = M("POST", "/ssh-keys",
                R"({"name":")" + name + R"(","publicKey":")" + kPublicKey + "\"}");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  static std::string LaunchBody(const std::string& name, const std::string& product = "gpu_1x_a6000",
                                const std::string& region = "us-central-2",
                                const std::string& extra = "") {
    return R"({"imageId":184,"productName":")" + product + R"(","regionName":")" + region +
           R"(","instanceName":")" + name + R"(","sshKeys":["gpuprov abc"])" + extra + "}";
  }
  std::string Launch(const std::string& name, const std::string& product = "gpu_1x_a6000",
                     const std::string& region = "us-central-2", const std::string& extra = "") {
    Reply r = M("POST", "/instance/launch", LaunchBody(name, product, region, extra));
    EXPECT_EQ(r.status, 202) << r.body;
    return GetString(r.Json(), "response").value_or("");
  }
  JsonObject Instance(const std::string& uuid) {
    Reply r = M("GET", "/instance/" + uuid);
    if (r.status != 200) return nullptr;
    JsonArray a = GetArray(r.Json(), "runningInstances");
    return a && a->size() == 1 ? a->getObject(0) : nullptr;
  }
  std::string Status(const std::string& uuid) {
    JsonObject i = Instance(uuid);
    return i ? i->getValue<std::string>("status") : "404";
  }
  JsonArray List() { return GetArray(M("GET", "/instance").Json(), "runningInstances"); }
  JsonObject Inventory(const std::string& product) {
    return GetObject(GetObject(M("GET", "/gpu-inventory").Json(), "gpu_inventory"), product);
  }

  std::unique_ptr<Emulator> emu_;
  std::string base_, control_;
};

TEST_F(MassedComputeApiTest, BearerTokensOfEitherVariableAreAcceptedOthersGet401) {
  EXPECT_EQ(M("GET", "/instance").status, 200);
  EXPECT_EQ(M("GET", "/instance", "", kOtherToken).status, 200);
  for (const Reply& r : {M("GET", "/instance", "", "wrong"), Call(base_, "GET", "/instance")}) {
    EXPECT_EQ(r.status, 401);
    EXPECT_EQ(MessageOf(r), "Unauthenticated.");
  }
  Reply v = M("POST", "/account/token/validation");
  EXPECT_EQ(v.status, 200);
  EXPECT_EQ(MessageOf(v), "Valid Token");
  EXPECT_EQ(M("POST", "/account/token/validation", "", "wrong").status, 401);
  EXPECT_EQ(Emulator::TokenEnvVars("massedcompute"),
            (std::vector<std::string>{"MASSED_API_KEY", "MASSED_COMPUTE_API_TOKEN"}));
}

TEST_F(MassedComputeApiTest, AReadOnlyKeyListsAndGetsButEveryWriteIs403) {
  Settings(R"({"cloud":"massedcompute","read_only_tokens":["mc_read_only"]})");
  EXPECT_EQ(M("GET", "/instance", "", "mc_read_only").status, 200);
  EXPECT_EQ(M("GET", "/gpu-inventory", "", "mc_read_only").status, 200);
  EXPECT_EQ(M("POST", "/account/token/validation", "", "mc_read_only").status, 200);
  AddKey();
  for (const auto& [method, path, body] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"POST", "/instance/launch", LaunchBody("ro")},
           {"POST", "/instance/terminate", R"({"instanceUuids":["x"]})"},
           {"POST", "/ssh-keys", R"({"name":"x","publicKey":"ssh-ed25519 AAAA x"})"},
           {"DELETE", "/ssh-keys/x", ""}}) {
    Reply r = M(method, path, body, "mc_read_only");
    EXPECT_EQ(r.status, 403) << method << " " << path;
    EXPECT_NE(MessageOf(r).find("read-only"), std::string::npos) << r.body;
  }
  EXPECT_EQ(Count("instances"), 0);
}

TEST_F(MassedComputeApiTest, InventoryIsAMapKeyedByProductWithLiveCapacity) {
  JsonObject a6000 = Inventory("gpu_1x_a6000");
  ASSERT_TRUE(a6000);
  JsonObject type = GetObject(a6000, "instance_type");
  EXPECT_EQ(type->getValue<std::string>("name"), "gpu_1x_a6000");
  EXPECT_EQ(type->getValue<std::string>("description"), "1x RTX A6000 (48GB)");
  EXPECT_GT(type->getValue<int>("price_cents_per_hour"), 0);
  for (const char* k : {"vcpu_count", "memory_gib", "storage_gb"}) {
    EXPECT_TRUE(GetObject(type, "specs")->has(k)) << k;
  }
  const int capacity = a6000->getValue<int>("capacity_available");
  EXPECT_GT(capacity, 0);
  JsonArray regions = GetArray(a6000, "regions_with_capacity_available");
  ASSERT_EQ(regions->size(), 2u);
  EXPECT_EQ(regions->getObject(0)->getValue<std::string>("name"), "us-central-2");
  EXPECT_EQ(regions->getObject(0)->getValue<std::string>("description"), "Kansas City, MO");
  EXPECT_TRUE(Inventory("gpu_1x_h100"));
  EXPECT_TRUE(Inventory("gpu_1x_a6000_spot"));
  EXPECT_NE(GetObject(Inventory("gpu_1x_a6000_spot"), "instance_type")
                ->getValue<std::string>("description")
                .find("[spot]"),
            std::string::npos);
  // A launch takes one unit of capacity; terminated, it comes back.
  AddKey();
  const std::string id = Launch("cap");
  EXPECT_EQ(Inventory("gpu_1x_a6000")->getValue<int>("capacity_available"), capacity - 1);
  ASSERT_EQ(M("POST", "/instance/terminate", R"({"instanceUuids":[")" + id + "\"]}").status, 202);
  EXPECT_EQ(Inventory("gpu_1x_a6000")->getValue<int>("capacity_available"), capacity);
  // Sold out: capacity 0, no regions, and a launch is refused with a capacity message.
  Settings(R"({"cloud":"massedcompute","capacity":{"gpu_1x_h100":0}})");
  JsonObject h100 = Inventory("gpu_1x_h100");
  EXPECT_EQ(h100->getValue<int>("capacity_available"), 0);
  EXPECT_EQ(GetArray(h100, "regions_with_capacity_available")->size(), 0u);
  Reply sold = M("POST", "/instance/launch", LaunchBody("x", "gpu_1x_h100", "any"));
  EXPECT_EQ(sold.status, 400);
  EXPECT_NE(MessageOf(sold).find("No capacity available for gpu_1x_h100"), std::string::npos);
  // A product not in the region is refused the same way.
  Reply elsewhere = M("POST", "/instance/launch", LaunchBody("x", "gpu_1x_a100", "us-central-2"));
  EXPECT_EQ(elsewhere.status, 400);
  EXPECT_NE(MessageOf(elsewhere).find("capacity"), std::string::npos);
  Settings(R"({"cloud":"massedcompute","capacity":{"*":0}})");
  EXPECT_EQ(Inventory("gpu_1x_a6000")->getValue<int>("capacity_available"), 0);
  EXPECT_EQ(Control("POST", "/settings", R"({"cloud":"massedcompute","capacity":{"gpu_9x_x":1}})")
                .status,
            400);
}

TEST_F(MassedComputeApiTest, ImagesHaveIntegerIds) {
  JsonArray images = GetArray(M("GET", "/images").Json(), "images");
  ASSERT_GT(images->size(), 1u);
  JsonObject i = images->getObject(0);
  EXPECT_EQ(i->getValue<int>("vm_image_id"), 184);
  EXPECT_EQ(i->getValue<std::string>("vm_image_name"), "Ubuntu Server 24.04");
  EXPECT_TRUE(i->has("vm_image_description"));
}

TEST_F(MassedComputeApiTest, AccountSshKeysAreAddedListedAndDeletedByIdWithNameRules) {
  Reply r = M("POST", "/ssh-keys",
              R"({"name":"gpuprov 0a1b","publicKey":")" + std::string(kPublicKey) + "\\n\"}");
  ASSERT_EQ(r.status, 200) << r.body;
  JsonObject key = GetObject(r.Json(), "sshKey");
  const std::string id = key->getValue<std::string>("id");
  EXPECT_EQ(key->getValue<std::string>("name"), "gpuprov 0a1b");
  JsonArray keys = GetArray(M("GET", "/ssh-keys").Json(), "sshKeys");
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ(keys->getObject(0)->getValue<std::string>("public_key"), kPublicKey);  // trimmed
  EXPECT_EQ(keys->getObject(0)->getValue<std::string>("id"), id);
  for (const std::string name : {"gpuprov-key", "a_b", "x.y", ""}) {
    Reply bad = M("POST", "/ssh-keys",
                  R"({"name":")" + name + R"(","publicKey":")" + kPublicKey + "\"}");
    EXPECT_EQ(bad.status, 400) << name;
  }
  EXPECT_EQ(M("POST", "/ssh-keys", R"({"name":"gpuprov 0a1b","publicKey":")" +
                                       std::string(kPublicKey) + "\"}")
                .status,
            400);  // duplicate name
  EXPECT_EQ(M("POST", "/ssh-keys", R"({"name":"k","publicKey":"not a key"})").status, 400);
  EXPECT_EQ(M("POST", "/ssh-keys", R"({"name":"k","public_key":"ssh-ed25519 AAAA"})").status, 400);
  EXPECT_EQ(Count("ssh_keys"), 1);
  Reply del = M("DELETE", "/ssh-keys/" + id);
  EXPECT_EQ(del.status, 200);
  EXPECT_TRUE(GetObject(del.Json(), "result"));
  EXPECT_EQ(M("DELETE", "/ssh-keys/" + id).status, 404);
  EXPECT_EQ(Count("ssh_keys"), 0);
}

TEST_F(MassedComputeApiTest, LaunchedInstanceBootsThenIsRentedWithAnIpThenTerminatesAndIsGone) {
  AddKey();
  const std::string id = Launch("gpuprov-a", "gpu_1x_a6000", "us-central-2",
                                R"(,"command":"echo hello")");
  ASSERT_TRUE(std::regex_match(id, std::regex("[0-9a-f-]{36}"))) << id;
  JsonObject i = Instance(id);
  ASSERT_TRUE(i);
  EXPECT_EQ(i->getValue<std::string>("status"), "booting");
  EXPECT_EQ(i->getValue<int>("os_booted"), 0);
  EXPECT_EQ(i->getValue<std::string>("ip"), "");
  EXPECT_EQ(i->getValue<std::string>("name"), "gpuprov-a");
  EXPECT_EQ(i->getValue<std::string>("username"), "Ubuntu");
  EXPECT_FALSE(i->getValue<std::string>("password").empty());
  EXPECT_EQ(i->getValue<std::string>("command_startup"), "echo hello");
  EXPECT_EQ(i->getValue<int>("active"), 1);
  EXPECT_EQ(GetObject(i, "image")->getValue<int>("id"), 184);
  JsonObject product = GetObject(i, "product");
  EXPECT_EQ(product->getValue<std::string>("name"), "gpu_1x_a6000");
  EXPECT_EQ(product->getValue<int>("gpu_count"), 1);
  EXPECT_EQ(product->getValue<std::string>("price_hr"), "0.57");  // prices are strings
  EXPECT_EQ(GetObject(i, "region")->getValue<std::string>("name"), "us-central-2");
  // Rented first with the OS still booting, then booted with its address.
  ASSERT_TRUE(WaitFor([&] { return Status(id) == "rented"; }, 5s));
  ASSERT_TRUE(WaitFor([&] { return Instance(id)->getValue<int>("os_booted") == 1; }, 5s));
  i = Instance(id);
  EXPECT_TRUE(std::regex_match(i->getValue<std::string>("ip"), std::regex(R"(127\.91\.\d+\.\d+)")));
  ASSERT_EQ(List()->size(), 1u);
  EXPECT_EQ(List()->getObject(0)->getValue<std::string>("uuid"), id);
  EXPECT_EQ(testing::ReachablePorts(control_, "massedcompute", "gpuprov-a"), "1-65535");
  EXPECT_EQ(Count("instances"), 1);
  EXPECT_EQ(Count("backend_instances"), 1);

  Reply restart = M("POST", "/instance/restart", R"({"instanceUuids":[")" + id + "\"]}");
  EXPECT_EQ(restart.status, 202);
  EXPECT_EQ(GetArray(restart.Json(), "response")->getObject(0)->getValue<std::string>("status"),
            "booting");

  Reply t = M("POST", "/instance/terminate", R"({"instanceUuids":[")" + id + "\"]}");
  ASSERT_EQ(t.status, 202) << t.body;
  JsonArray done = GetArray(GetObject(GetObject(t.Json(), "response"), "data"),
                            "terminated_instances");
  ASSERT_EQ(done->size(), 1u);
  JsonObject term = done->getObject(0);
  EXPECT_EQ(term->getValue<std::string>("id"), id);
  EXPECT_EQ(term->getValue<std::string>("status"), "terminated");
  EXPECT_EQ(GetObject(term, "instance_type")->getValue<std::string>("name"), "gpu_1x_a6000");
  EXPECT_EQ(GetArray(term, "ssh_key_names")->get(0).toString(), "gpuprov abc");
  EXPECT_EQ(Status(id), "terminating");
  EXPECT_EQ(M("POST", "/instance/terminate", R"({"instanceUuids":[")" + id + "\"]}").status, 404);
  ASSERT_TRUE(WaitFor([&] { return Status(id) == "404"; }, 5s));
  EXPECT_EQ(List()->size(), 0u);
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("backend_instances"), 0);
  EXPECT_EQ(M("GET", "/instance/" + id).status, 404);
  EXPECT_EQ(MessageOf(M("GET", "/instance/" + id)), "Instance not found.");
}

// POST /preempt (tests/emulators/README.md): the reference documents no preemption status, so
// an instance taken back stays listed as "terminated" (active 0, no ip) until it is terminated.
TEST_F(MassedComputeApiTest, APreemptedInstanceIsListedAsTerminatedUntilItIsTerminated) {
  AddKey();
  const std::string id = Launch("gpuprov-spot", "gpu_1x_a6000_spot", "us-central-2");
  ASSERT_TRUE(WaitFor([&] { return Status(id) == "rented"; }, 5s));
  Reply p = Control("POST", "/preempt", R"({"cloud":"massedcompute","name":"gpuprov-spot"})");
  ASSERT_EQ(p.status, 200) << p.body;
  JsonObject i = Instance(id);
  ASSERT_TRUE(i);
  EXPECT_EQ(i->getValue<std::string>("status"), "terminated");
  EXPECT_EQ(i->getValue<int>("active"), 0);
  EXPECT_EQ(i->getValue<std::string>("ip"), "");
  EXPECT_EQ(GetObject(i, "product")->getValue<std::string>("name"), "gpu_1x_a6000_spot");
  ASSERT_EQ(List()->size(), 1u);
  EXPECT_EQ(Control("POST", "/preempt", R"({"cloud":"massedcompute","name":"gpuprov-spot"})").status,
            404);  // no live instance of that name
  ASSERT_EQ(M("POST", "/instance/terminate", R"({"instanceUuids":[")" + id + "\"]}").status, 202);
  ASSERT_TRUE(WaitFor([&] { return Status(id) == "404"; }, 5s));
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("backend_instances"), 0);
}

// The launch image field the vendor's sources disagree on (imageId in massed-compute-mcp
// tools.json, os_image_name per the agent plugin's mc-launch-vms skill), and the internal-only
// product listed at $0/hr (mc-pick-gpu) that cannot be launched.
TEST_F(MassedComputeApiTest, LaunchTakesTheImageFieldItIsSetToAndRefusesTheZeroDollarProduct) {
  AddKey();
  const std::string by_id = R"({"imageId":184,"productName":"gpu_1x_a6000","regionName":"any"})";
  const std::string by_name =
      R"({"os_image_name":"Ubuntu Server 24.04","productName":"gpu_1x_a6000","regionName":"any"})";
  EXPECT_EQ(M("POST", "/instance/launch", by_id).status, 202);
  Settings(R"({"cloud":"massedcompute","launch_image_field":"os_image_name"})");
  Reply refused = M("POST", "/instance/launch", by_id);
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_TRUE(refused.Json()->getObject("errors")->has("os_image_name")) << refused.body;
  EXPECT_EQ(M("POST", "/instance/launch", by_name).status, 202);
  Settings(R"({"cloud":"massedcompute","launch_image_field":"imageId"})");
  Reply free = M("POST", "/instance/launch",
                 R"({"imageId":184,"productName":"gpu_1x_h100_sxm5","regionName":"any"})");
  EXPECT_EQ(free.status, 400) << free.body;
  Settings(R"({"cloud":"massedcompute","omit_os_booted":true})");
  Poco::JSON::Object::Ptr one = M("GET", "/instance").Json()->getArray("runningInstances")->getObject(0);
  EXPECT_FALSE(one->has("os_booted"));
}

TEST_F(MassedComputeApiTest, LaunchChecksItsBody) {
  AddKey();
  auto status = [&](const std::string& body) { return M("POST", "/instance/launch", body); };
  for (const std::string& body :
       {std::string(R"({"productName":"gpu_1x_a6000","regionName":"any"})"),           // no imageId
        std::string(R"({"imageId":"184","productName":"gpu_1x_a6000","regionName":"any"})"),
        std::string(R"({"imageId":1,"productName":"gpu_1x_a6000","regionName":"any"})"),
        std::string(R"({"imageId":184,"productName":"gpu_1x_z9","regionName":"any"})"),
        std::string(R"({"imageId":184,"productName":"gpu_1x_a6000","regionName":"eu-1"})"),
        std::string(R"({"imageId":184,"productName":"gpu_1x_a6000","regionName":"any","sshKeys":["nope"]})"),
        std::string(R"({"imageId":184,"productName":"gpu_1x_a6000","regionName":"any","ssh_keys":[]})"),
        std::string("not json")}) {
    Reply r = status(body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    EXPECT_FALSE(MessageOf(r).empty());
  }
  EXPECT_EQ(Count("instances"), 0);
  // regionName "any" takes a region with capacity; the older single sshKey field works.
  Reply r = status(R"({"imageId":142,"productName":"gpu_1x_h100","regionName":"any","sshKey":"gpuprov abc"})");
  ASSERT_EQ(r.status, 202) << r.body;
  JsonObject i = Instance(r.Json()->getValue<std::string>("response"));
  EXPECT_EQ(GetObject(i, "region")->getValue<std::string>("name"), "us-central-3");
  EXPECT_EQ(i->getValue<std::string>("name"), "");
  JsonArray rows = GetArray(Control("GET", "/instances?cloud=massedcompute").Json(), "instances");
  EXPECT_EQ(GetArray(rows->getObject(0), "ssh_key_names")->get(0).toString(), "gpuprov abc");
}

TEST_F(MassedComputeApiTest, GetCanAnswerWithTheSingleObjectShape) {
  AddKey();
  const std::string id = Launch("shape");
  Settings(R"({"cloud":"massedcompute","single_instance_shape":true})");
  Reply r = M("GET", "/instance/" + id);
  ASSERT_EQ(r.status, 200);
  EXPECT_FALSE(r.Json()->has("runningInstances"));
  EXPECT_EQ(GetObject(r.Json(), "runningInstance")->getValue<std::string>("uuid"), id);
  // The list keeps its shape.
  EXPECT_EQ(List()->size(), 1u);
}

TEST_F(MassedComputeApiTest, ThrottleServerErrorAndAuthFailureFaults) {
  Fault(R"({"cloud":"massedcompute","fault":"throttle","times":2,"retry_after":3})");
  for (int n = 0; n < 2; ++n) {
    Reply r = M("GET", "/instance");
    EXPECT_EQ(r.status, 429);
    EXPECT_EQ(r.Header("retry-after"), "3");
    EXPECT_EQ(MessageOf(r), "Too Many Attempts.");
  }
  EXPECT_EQ(M("GET", "/instance").status, 200);
  Fault(R"({"cloud":"massedcompute","fault":"server_error","status":503})");
  Reply e = M("GET", "/images");
  EXPECT_EQ(e.status, 503);
  EXPECT_EQ(MessageOf(e), "Server Error");
  Fault(R"({"cloud":"massedcompute","fault":"auth_failure"})");
  EXPECT_EQ(M("GET", "/images").status, 401);
  EXPECT_EQ(M("GET", "/images").status, 200);
}

TEST_F(MassedComputeApiTest, AServerErrorAfterCreateLeavesTheInstanceToBeFoundByName) {
  AddKey();
  Fault(R"({"cloud":"massedcompute","fault":"server_error","value":"after_create","path":"/api/v1/instance/launch"})");
  Reply r = M("POST", "/instance/launch", LaunchBody("ambiguous"));
  EXPECT_EQ(r.status, 500);
  JsonArray list = List();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->getObject(0)->getValue<std::string>("name"), "ambiguous");
  EXPECT_EQ(Count("launches"), 1);
}

TEST_F(MassedComputeApiTest, CapacityQuotaAndBootFaults) {
  AddKey();
  Fault(R"({"cloud":"massedcompute","fault":"capacity"})");
  Reply c = M("POST", "/instance/launch", LaunchBody("c"));
  EXPECT_EQ(c.status, 400);
  EXPECT_NE(MessageOf(c).find("No capacity available"), std::string::npos);
  Fault(R"({"cloud":"massedcompute","fault":"payment_required"})");
  EXPECT_EQ(M("POST", "/instance/launch", LaunchBody("p")).status, 402);
  EXPECT_EQ(Count("instances"), 0);

  Fault(R"({"cloud":"massedcompute","fault":"slow_boot","seconds":2})");
  const std::string slow = Launch("slow");
  Fault(R"({"cloud":"massedcompute","fault":"vanish_during_boot"})");
  const std::string vanish = Launch("vanish");
  Fault(R"({"cloud":"massedcompute","fault":"error_during_boot"})");
  const std::string error = Launch("error");
  Fault(R"({"cloud":"massedcompute","fault":"ip_after_boot","seconds":3})");
  const std::string noip = Launch("noip");
  ASSERT_TRUE(WaitFor([&] { return Status(vanish) == "404"; }, 5s));
  ASSERT_TRUE(WaitFor([&] { return Status(error) == "failed"; }, 5s));
  ASSERT_TRUE(WaitFor([&] { return Instance(noip)->getValue<int>("os_booted") == 1; }, 5s));
  EXPECT_EQ(Status(noip), "rented");
  EXPECT_EQ(Instance(noip)->getValue<std::string>("ip"), "");
  EXPECT_EQ(Status(slow), "booting");
  EXPECT_EQ(Instance(slow)->getValue<std::string>("ip"), "");
  ASSERT_TRUE(WaitFor([&] { return !Instance(noip)->getValue<std::string>("ip").empty(); }, 5s));
  ASSERT_TRUE(WaitFor([&] { return Status(slow) == "rented"; }, 5s));
}

TEST_F(MassedComputeApiTest, ResetForgetsInstancesKeysFaultsAndSettings) {
  AddKey();
  Launch("r");
  Settings(R"({"cloud":"massedcompute","single_instance_shape":true,"capacity":{"*":0}})");
  Fault(R"({"cloud":"massedcompute","fault":"capacity","times":-1})");
  ASSERT_EQ(Control("POST", "/reset", R"({"cloud":"massedcompute"})").status, 200);
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("ssh_keys"), 0);
  EXPECT_EQ(Count("backend_instances"), 0);
  EXPECT_GT(Inventory("gpu_1x_a6000")->getValue<int>("capacity_available"), 0);
  AddKey();
  const std::string id = Launch("after-reset");
  EXPECT_TRUE(Instance(id));  // the array shape again
}

}  // namespace
}  // namespace gpuprov::emulator
