// SPDX-License-Identifier: Apache-2.0
//
// Loads the BUILT driver .so with dlopen, as the host does, and drives it through the C
// vtable against the Hyperstack emulator (tests/emulators, `gpuprov-emulator --backend
// memory`) started as a child process. Talks only to 127.0.0.1.
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "driver_test_util.h"
#include "gpuprov/driver_abi.h"

namespace gpuprov::hyperstack {
namespace {

using namespace drivers::testing;  // the shared driver test helpers (driver_test_util.h)
using Poco::JSON::Array;
using Poco::JSON::Object;
using namespace std::chrono_literals;

constexpr const char* kApiKey = "hs_gpuprov_emulator_test_key";
constexpr const char* kKeyA =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF test@gpuprov";
constexpr const char* kKeyB =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGLNOSpIazn8gOTMOnUEqrXgF/uRfTEfARnXqkdhuaOj "
    "other@gpuprov";

constexpr char kDriverPath[] = GPUPROV_HYPERSTACK_DRIVER_PATH;
using Driver = DriverAt<kDriverPath>;

// --- no emulator needed -----------------------------------------------------

TEST(HyperstackDescriptor, IdentityAndCapabilities) {
  const gpuprov_type_driver_descriptor* d = Driver::Descriptor();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->magic, GPUPROV_DRIVER_MAGIC);
  EXPECT_STREQ(d->name, "hyperstack");
  // How its VM learns its public address: REFERENCE.md section 6.
  EXPECT_STREQ(d->node_address, GPUPROV_NODE_ADDRESS_OPENSTACK);
  EXPECT_EQ(d->capabilities,
            static_cast<uint64_t>(GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_BOOT_CLOUD_INIT |
                                  GPUPROV_CAP_OPEN_PORTS | GPUPROV_CAP_HOSTS_KUBERNETES |
                                  GPUPROV_CAP_CLUSTER));
  ExpectEveryOperation(*d->vtable);
}

TEST(HyperstackDescriptor, RefusesPlainHttpToANonLoopbackEndpoint) {
  Driver driver(R"({"endpoint":"http://infrahub-api.nexgencloud.com/v1","config":{}})");
  EXPECT_EQ(driver.init_status(), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_TRUE(Contains(driver.init_error(), "loopback")) << driver.init_error();
}

TEST(HyperstackDescriptor, NoKeyAnywhereIsAuthBeforeAnyCall) {
  ScopedTempDir home;
  ScopedEnv h("HOME", home.path().c_str());
  ScopedEnv none("HYPERSTACK_API_KEY", nullptr);
  Driver driver(R"({"endpoint":"","config":{}})");
  ASSERT_EQ(driver.init_status(), GPUPROV_STATUS_OK) << driver.init_error();
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "HYPERSTACK_API_KEY")) << r.error;
  EXPECT_TRUE(Contains(r.error, "~/.hyperstack/api_key")) << r.error;
}

// --- the emulator -----------------------------------------------------------

class Emulator : public OneCloudEmulator {
 public:
  Emulator() : OneCloudEmulator("hyperstack") {}
  bool Start(std::string* problem) {
    // Fast boots; the 500/min limit is not enforced so the suite runs in seconds (429s come
    // from the throttle fault). The emulator accepts the key in HYPERSTACK_API_KEY at start.
    return StartMemory({"--boot-seconds", "1", "--no-rate-limits"},
                       {{"HYPERSTACK_API_KEY", kApiKey}}, problem);
  }
  HttpReply Api(const std::string& method, const std::string& path, const std::string& body = "") {
    return LoopbackHttp(method, url() + path, body, {{"api_key", kApiKey}});
  }
  /// Forgets everything and sets short attach and delete times.
  void Reset() {
    OneCloudEmulator::Reset();
    Settings(
        R"({"cloud":"hyperstack","floating_ip_delay_seconds":0.3,"deleting_seconds":0.3,)"
        R"("out_of_stock":[]})");
  }
  void Settings(const std::string& json) {
    HttpReply r = Control("POST", "/settings", json);
    EXPECT_EQ(r.status, 200) << r.body;
  }
  void Fault(const std::string& fault, int times, const std::string& extra = "") {
    EmulatorProcess::Fault(R"({"cloud":"hyperstack","fault":")" + fault + R"(","times":)" +
                           std::to_string(times) + extra + "}");
  }
  /// The emulator's row for the VM called name (user_data as stored, allowed_ports).
  Object::Ptr Instance(const std::string& name) {
    HttpReply r = Control("GET", "/instances?cloud=hyperstack");
    Array::Ptr rows = r.Doc()->getArray("instances");
    for (size_t i = 0; rows && i < rows->size(); ++i) {
      if (rows->getObject(i)->getValue<std::string>("name") == name) return rows->getObject(i);
    }
    return nullptr;
  }
  void ClearRequests() { EmulatorProcess::ClearRequests("hyperstack"); }
};

class HyperstackEmulatorTest : public SharedEmulatorTest<Emulator> {
 protected:
  void SetUp() override {
    SharedEmulatorTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    emulator_->Reset();
    key_ = std::make_unique<ScopedEnv>("HYPERSTACK_API_KEY", kApiKey);
  }
  void TearDown() override { key_.reset(); }

  static std::string Config(const std::string& extra = "") {
    return R"({"endpoint":")" + emulator_->url() +
           R"(","config":{"poll_interval_ms":100,"delete_retry_ms":200,"delete_wait_seconds":20,)"
           R"("retry":{"max_attempts":5,"base_delay_ms":5,"max_delay_ms":50,"max_retry_after_ms":100,)"
           R"("total_budget_ms":20000,"attempt_timeout_ms":10000})" +
           extra + "}}";
  }

  static std::string CreateRequest(const std::string& name, const std::string& key = kKeyA,
                                   const std::string& gpu = "A100",
                                   std::vector<int> ports = {22, 6443, 80, 443}) {
    Object::Ptr req = new Object();
    req->set("name", name);
    req->set("region", "");
    req->set("instance_type", "");
    if (gpu.empty()) {
      req->set("gpu", Poco::Dynamic::Var());
    } else {
      Object::Ptr g = new Object();
      g->set("type", gpu);
      g->set("count", 1);
      req->set("gpu", g);
    }
    req->set("image", "");
    req->set("ssh_public_key", key);
    req->set("user_data", "#!/bin/bash\necho \"hi from gpuprov\"\n");
    Object::Ptr tags = new Object();
    tags->set("gpuprov", "1");
    tags->set("gpuprov-name", name);
    tags->set("team", "ml");
    req->set("tags", tags);
    Array::Ptr p = new Array();
    for (int port : ports) p->add(port);
    req->set("open_ports", p);
    return Stringify(req);
  }

  static Object::Ptr WaitRunning(Driver& driver, const std::string& id) {
    return drivers::testing::WaitRunning(driver, id, 30s, "virtual machine");
  }

  static void ExpectNothingLeft() {
    EXPECT_EQ(emulator_->Count("instances"), 0);
    EXPECT_EQ(emulator_->Count("backend_instances"), 0);
    EXPECT_EQ(emulator_->Count("ssh_keys"), 0);
    EXPECT_EQ(emulator_->Count("environments"), 0);
    EXPECT_EQ(emulator_->Count("security_rules"), 0);
  }

  std::unique_ptr<ScopedEnv> key_;
};

TEST_F(HyperstackEmulatorTest, CheckNamesWhereTheKeyCameFromNeverTheKey) {
  Driver driver(Config());
  OpResult r = driver.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(r.Doc()->getValue<std::string>("key_from"), "$HYPERSTACK_API_KEY");
  EXPECT_EQ(r.Doc()->getValue<int>("user_data_limit"), 32768);
  EXPECT_FALSE(Contains(r.json, kApiKey));
  EXPECT_FALSE(Contains(driver.host().All(), kApiKey));
}

TEST_F(HyperstackEmulatorTest, OffersComeFromTheFlavorList) {
  Driver driver(Config());
  OpResult h100 = driver.Offers(R"({"gpu":{"type":"H100","count":8},"region":""})");
  ASSERT_EQ(h100.status, GPUPROV_STATUS_OK) << h100;
  Array::Ptr offers = h100.Doc()->getArray("offers");
  ASSERT_EQ(offers->size(), 4u) << h100.json;  // three in CANADA-1, SXM5 in US-1
  EXPECT_EQ(offers->getObject(0)->getValue<std::string>("instance_type"), "n3-H100x8");
  EXPECT_EQ(offers->getObject(0)->getValue<std::string>("region"), "CANADA-1");
  EXPECT_EQ(offers->getObject(0)->getValue<std::string>("gpu_type"), "H100");
  EXPECT_EQ(offers->getObject(3)->getValue<std::string>("region"), "US-1");

  OpResult a4000 = driver.Offers(R"({"gpu":{"type":"RTX_A4000","count":1},"region":"NORWAY-1"})");
  ASSERT_EQ(a4000.status, GPUPROV_STATUS_OK) << a4000;
  ASSERT_EQ(a4000.Doc()->getArray("offers")->size(), 1u) << a4000.json;

  OpResult l40s = driver.Offers(R"({"gpu":{"type":"L40S","count":1},"region":""})");
  ASSERT_EQ(l40s.status, GPUPROV_STATUS_OK) << l40s;
  EXPECT_EQ(l40s.Doc()->getArray("offers")->size(), 0u);
  EXPECT_TRUE(Contains(driver.host().All(), "Hyperstack does not offer L40S:1"))
      << driver.host().All();
  EXPECT_TRUE(Contains(driver.host().All(), "ask for L40:1")) << driver.host().All();

  emulator_->Settings(R"({"cloud":"hyperstack","out_of_stock":["n3-A100x1"]})");
  OpResult sold = driver.Offers(R"({"gpu":{"type":"A100","count":1},"region":""})");
  ASSERT_EQ(sold.status, GPUPROV_STATUS_OK) << sold;
  EXPECT_EQ(sold.Doc()->getArray("offers")->size(), 0u);
  EXPECT_TRUE(Contains(driver.host().All(), "none is in stock")) << driver.host().All();
}

// H2 (REFERENCE.md §H2): prices from GET /pricebook, a GPU model's price per
// GPU-hour times the flavor's GPU count (SkyPilot's fetch_hyperstack.py computes it so).
TEST_F(HyperstackEmulatorTest, OffersArePricedFromThePricebook) {
  Driver driver(Config());
  OpResult h100 = driver.Offers(R"({"gpu":{"type":"H100","count":1},"region":"CANADA-1"})");
  ASSERT_EQ(h100.status, GPUPROV_STATUS_OK) << h100;
  Object::Ptr one = h100.Doc()->getArray("offers")->getObject(0);
  EXPECT_DOUBLE_EQ(one->getValue<double>("price_per_hour"), 1.90) << h100.json;
  EXPECT_EQ(one->getValue<std::string>("price_source"), "live") << h100.json;
  OpResult eight = driver.Offers(R"({"gpu":{"type":"H100","count":8},"region":""})");
  ASSERT_EQ(eight.status, GPUPROV_STATUS_OK) << eight;
  Object::Ptr x8 = eight.Doc()->getArray("offers")->getObject(0);
  EXPECT_EQ(x8->getValue<std::string>("instance_type"), "n3-H100x8");
  EXPECT_DOUBLE_EQ(x8->getValue<double>("price_per_hour"), 8 * 1.90) << eight.json;
  // A CPU flavor has no pricebook entry: its price stays unknown (no source), never $0 "live".
  OpResult cpu = driver.Offers(R"({"gpu":null,"region":"CANADA-1"})");
  ASSERT_EQ(cpu.status, GPUPROV_STATUS_OK) << cpu;
  Object::Ptr c = cpu.Doc()->getArray("offers")->getObject(0);
  EXPECT_EQ(c->getValue<double>("price_per_hour"), 0.0) << cpu.json;
  EXPECT_FALSE(c->has("price_source")) << cpu.json;
}

// H1 (REFERENCE.md §H1): every list call pages with the API's own `page` and
// `pageSize` (H-SDK list_vms, list_key_pairs, list_environments), environments included, and
// reads past the first page.
TEST_F(HyperstackEmulatorTest, ListsAreAskedWithPageAndPageSizeAndReadToTheEnd) {
  for (int i = 0; i < 101; ++i) {
    HttpReply r = emulator_->Api(
        "POST", "/core/environments",
        R"({"name":"other-)" + std::to_string(i) + R"(","region":"NORWAY-1"})");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  emulator_->ClearRequests();
  Driver driver(Config());
  OpResult created = driver.Create(CreateRequest("hs-pages"));
  ASSERT_EQ(created.status, GPUPROV_STATUS_OK) << created << "\n" << driver.host().All();
  ASSERT_EQ(driver.List().status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Delete(R"({"name":"hs-pages"})").status, GPUPROV_STATUS_OK);
  // gpuprov-CANADA-1 is the 103rd environment (page 2 of 100): found and removed.
  EXPECT_EQ(emulator_->Count("environments"), 101);
  int lists = 0;
  for (const std::string& r : emulator_->Requests()) {
    if (r.rfind("GET /v1/core/virtual-machines?", 0) != 0 && r.rfind("GET /v1/core/keypairs", 0) != 0 &&
        r.rfind("GET /v1/core/environments", 0) != 0) {
      continue;
    }
    ++lists;
    EXPECT_TRUE(Contains(r, "pageSize=")) << r;
    EXPECT_TRUE(Contains(r, "page=")) << r;
    EXPECT_FALSE(Contains(r, "page_size")) << r;
  }
  EXPECT_GT(lists, 5);
}

// H3 (unconfirmed, REFERENCE.md §H3): the driver asks for no port
// randomization; a VM that reports it anyway says SSH may not be on port 22.
TEST_F(HyperstackEmulatorTest, AVmReportingPortRandomizationSaysSo) {
  emulator_->Settings(R"({"cloud":"hyperstack","force_port_randomization":true})");
  Driver driver(Config());
  OpResult created = driver.Create(CreateRequest("hs-random"));
  ASSERT_EQ(created.status, GPUPROV_STATUS_OK) << created;
  const std::string id = created.Vm()->getValue<std::string>("id");
  Object::Ptr running = WaitRunning(driver, id);
  ASSERT_TRUE(running);
  EXPECT_TRUE(Contains(running->getValue<std::string>("message"), "port randomization"))
      << Stringify(running);
  ASSERT_EQ(driver.Delete(R"({"name":"hs-random"})").status, GPUPROV_STATUS_OK);
  emulator_->Settings(R"({"cloud":"hyperstack","force_port_randomization":false})");
  OpResult plain = driver.Create(CreateRequest("hs-plain"));
  ASSERT_EQ(plain.status, GPUPROV_STATUS_OK) << plain;
  EXPECT_FALSE(Contains(plain.Vm()->getValue<std::string>("message"), "randomization"));
  ASSERT_EQ(driver.Delete(R"({"name":"hs-plain"})").status, GPUPROV_STATUS_OK);
}

// The operations of Hyperstack's API the driver may call, transcribed from the official SDK
// generated from its OpenAPI definition (NexGenCloud/hyperstack-sdk-python f130f57,
// hyperstack/api/: flavor_api.py list_flavors; image_api.py list_images; environment_api.py
// list_environments, create_environment, delete_environment; keypair_api.py list_key_pairs,
// import_key_pair, delete_key_pair; virtual_machine_api.py list_vms, create_virtual_machines,
// get_vm, delete_vm, add_firewall_rule_to_vm, delete_security_rule; pricebook_api.py
// get_pricebook), with the query parameters each serializer appends.
const std::vector<drivers::testing::VendorOperation>& HyperstackOperations() {
  // Statuses: each operation's _response_types_map in the same files.
  static const std::vector<drivers::testing::VendorOperation> ops = {
      {"GET", "/v1/core/flavors", {"region"}, {200, 400, 401, 404, 500}},
      {"GET", "/v1/core/images",
       {"region", "include_public", "search", "page", "per_page"},
       {200, 400, 401, 404, 406, 500}},
      {"GET", "/v1/core/environments", {"page", "pageSize", "search"}, {200, 400, 401, 500}},
      {"POST", "/v1/core/environments", {}, {200, 400, 401, 404, 409, 500}},
      {"DELETE", "/v1/core/environments/{id}", {}, {200, 400, 401, 404, 500}},
      {"GET", "/v1/core/keypairs", {"page", "pageSize", "search"}, {200, 400, 401, 500}},
      {"POST", "/v1/core/keypairs", {}, {200, 400, 401, 404, 409, 500}},
      {"DELETE", "/v1/core/keypair/{id}", {}, {200, 400, 401, 404, 500}},
      {"GET", "/v1/core/virtual-machines",
       {"page", "pageSize", "search", "environment", "exclude_firewalls",
        "exact_environment_match"},
       {200, 400, 401, 500}},
      {"POST", "/v1/core/virtual-machines", {}, {200, 400, 401, 404, 405, 409, 500}},
      {"GET", "/v1/core/virtual-machines/{vm_id}", {}, {200, 400, 401, 404, 500}},
      {"DELETE", "/v1/core/virtual-machines/{vm_id}", {}, {200, 400, 401, 404, 409, 500}},
      {"POST", "/v1/core/virtual-machines/{vm_id}/sg-rules", {}, {200, 400, 401, 404, 409, 500}},
      {"DELETE", "/v1/core/virtual-machines/{vm_id}/sg-rules/{sg_rule_id}", {},
       {200, 400, 401, 404, 500}},
      {"GET", "/v1/pricebook", {}, {200, 400, 401, 405, 500}},
  };
  return ops;
}

// Part 2 of issue 30: every request the driver makes through every operation is one of the
// SDK's operations with only its documented query parameters, answered with a status the SDK
// lists for it.
TEST_F(HyperstackEmulatorTest, EveryCallIsAnOperationOfHyperstacksSdk) {
  emulator_->ClearRequests();
  Driver driver(Config());
  drivers::testing::CallEveryOperation(driver, R"({"gpu":{"type":"A100","count":1},"region":""})",
                                       CreateRequest("hs-ops"), "hs-ops");
  if (HasFatalFailure()) return;
  drivers::testing::ExpectOnlyOperations(emulator_->Requests(), HyperstackOperations());
}

TEST_F(HyperstackEmulatorTest, LifecycleSendsTheDocumentedShapeAndLeavesNothing) {
  Driver driver(Config());
  OpResult created = driver.Create(CreateRequest("hs-life"));
  ASSERT_EQ(created.status, GPUPROV_STATUS_OK) << created << "\n" << driver.host().All();
  EXPECT_FALSE(created.Doc()->getValue<bool>("existing"));
  Object::Ptr vm = created.Vm();
  const std::string id = vm->getValue<std::string>("id");
  EXPECT_EQ(vm->getValue<std::string>("instance_type"), "n3-A100x1");
  EXPECT_EQ(vm->getValue<std::string>("gpus"), "A100:1");
  EXPECT_EQ(vm->getValue<std::string>("ssh_user"), "ubuntu");
  EXPECT_EQ(vm->getValue<std::string>("region"), "CANADA-1");
  EXPECT_EQ(vm->getValue<std::string>("environment"), "gpuprov-CANADA-1");
  EXPECT_EQ(vm->getObject("tags")->getValue<std::string>("team"), "ml");
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  EXPECT_EQ(emulator_->Count("environments"), 1);
  EXPECT_EQ(emulator_->Count("security_rules"), 4);

  // What Hyperstack received: raw user data, four rules, labels, a floating IP.
  Object::Ptr row = emulator_->Instance("hs-life");
  ASSERT_TRUE(row);
  EXPECT_EQ(row->getValue<std::string>("user_data"), "#!/bin/bash\necho \"hi from gpuprov\"\n");
  HttpReply got = emulator_->Api("GET", "/core/virtual-machines/" + id);
  ASSERT_EQ(got.status, 200) << got.body;
  Object::Ptr inst = got.Doc()->getObject("instance");
  EXPECT_EQ(inst->getArray("security_rules")->size(), 4u);
  EXPECT_TRUE(Contains(got.body, R"("gpuprov-name=hs-life")")) << got.body;
  EXPECT_EQ(inst->getValue<std::string>("floating_ip_status") != "UNATTACHED", true) << got.body;
  EXPECT_FALSE(inst->getValue<bool>("port_randomization"));

  Object::Ptr running = WaitRunning(driver, id);
  ASSERT_TRUE(running);
  EXPECT_EQ(running->getValue<std::string>("public_ip").rfind("127.", 0), 0u);
  EXPECT_TRUE(running->getObject("ports")->has("6443"));
  Object::Ptr allowed_row = emulator_->Instance("hs-life");
  EXPECT_EQ(allowed_row->getArray("allowed_ports")->size(), 4u);

  OpResult by_name = driver.Get(R"({"name":"hs-life"})");
  ASSERT_EQ(by_name.status, GPUPROV_STATUS_OK) << by_name;
  EXPECT_EQ(by_name.Vm()->getValue<std::string>("id"), id);
  OpResult list = driver.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list;
  ASSERT_EQ(list.Doc()->getArray("vms")->size(), 1u);

  // A re-run reuses: same VM, nothing new.
  OpResult again = driver.Create(CreateRequest("hs-life"));
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_TRUE(again.Doc()->getValue<bool>("existing"));
  EXPECT_EQ(again.Vm()->getValue<std::string>("id"), id);
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  EXPECT_EQ(emulator_->Count("environments"), 1);

  OpResult del = driver.Delete(R"({"id":")" + id + R"(","name":"hs-life"})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del << "\n" << driver.host().All();
  EXPECT_TRUE(del.Doc()->getValue<bool>("deleted"));
  ExpectNothingLeft();
  EXPECT_EQ(driver.Get(R"({"id":")" + id + R"("})").status, GPUPROV_STATUS_NOT_FOUND);
  OpResult del2 = driver.Delete(R"({"id":")" + id + R"(","name":"hs-life"})");
  ASSERT_EQ(del2.status, GPUPROV_STATUS_OK) << del2;
  EXPECT_FALSE(del2.Doc()->getValue<bool>("deleted"));
  EXPECT_FALSE(Contains(driver.host().All(), kApiKey));
}

TEST_F(HyperstackEmulatorTest, KeyPairAndEnvironmentAreSharedAndGoWithTheLastVm) {
  Driver driver(Config());
  ASSERT_EQ(driver.Create(CreateRequest("hs-share-a")).status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Create(CreateRequest("hs-share-b")).status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Create(CreateRequest("hs-share-c", kKeyB)).status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 2);
  EXPECT_EQ(emulator_->Count("environments"), 1);
  // Deleting while still being created waits until Hyperstack accepts it.
  OpResult a = driver.Delete(R"({"name":"hs-share-a"})");
  ASSERT_EQ(a.status, GPUPROV_STATUS_OK) << a;
  EXPECT_EQ(emulator_->Count("ssh_keys"), 2);
  ASSERT_EQ(driver.Delete(R"({"name":"hs-share-c"})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  EXPECT_EQ(emulator_->Count("environments"), 1);
  ASSERT_EQ(driver.Delete(R"({"name":"hs-share-b"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(HyperstackEmulatorTest, ADeleteRefusedWhileCreatingIsTriedAgainUntilAccepted) {
  Driver driver(Config());
  emulator_->Fault("slow_boot", 1, R"(,"seconds":1)");
  OpResult c = driver.Create(CreateRequest("hs-early"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  emulator_->ClearRequests();
  OpResult d = driver.Delete(R"({"name":"hs-early"})");
  ASSERT_EQ(d.status, GPUPROV_STATUS_OK) << d << "\n" << driver.host().All();
  EXPECT_TRUE(d.Doc()->getValue<bool>("deleted"));
  int refused = 0, accepted = 0;
  for (const auto& line : emulator_->Requests()) {
    if (line.rfind("DELETE /v1/core/virtual-machines/", 0) != 0) continue;
    refused += Contains(line, "-> 400");
    accepted += Contains(line, "-> 200");
  }
  EXPECT_GE(refused, 1);
  EXPECT_EQ(accepted, 1);
  ExpectNothingLeft();
}

TEST_F(HyperstackEmulatorTest, AConfiguredEnvironmentAndTheUsersKeyPairAreUsedAndKept) {
  HttpReply k = emulator_->Api(
      "POST", "/core/keypairs",
      std::string(R"({"name":"laptop","environment_name":"default-CANADA-1","public_key":")") +
          kKeyB + R"("})");
  ASSERT_EQ(k.status, 200) << k.body;
  Driver driver(Config(R"(,"environment":"default-CANADA-1")"));
  OpResult c = driver.Create(CreateRequest("hs-own-env", kKeyB));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_EQ(c.Vm()->getValue<std::string>("environment"), "default-CANADA-1");
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  EXPECT_EQ(emulator_->Count("environments"), 0);
  ASSERT_EQ(driver.Delete(R"({"name":"hs-own-env"})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);  // the user's
  EXPECT_EQ(emulator_->Count("instances"), 0);
}

TEST_F(HyperstackEmulatorTest, PlainVmOpensSshAloneAndOpenPortsWidensIt) {
  Driver driver(Config());
  OpResult c = driver.Create(CreateRequest("hs-ports", kKeyA, "", {22}));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_EQ(c.Vm()->getValue<std::string>("instance_type"), "n1-cpu-small");
  EXPECT_EQ(emulator_->Count("security_rules"), 1);
  const std::string id = c.Vm()->getValue<std::string>("id");
  OpResult r = driver.OpenPorts(R"({"id":")" + id + R"(","ports":[6443,443,22]})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(emulator_->Count("security_rules"), 3);
  Object::Ptr row = emulator_->Instance("hs-ports");
  EXPECT_EQ(row->getArray("allowed_ports")->size(), 3u);
  ASSERT_EQ(driver.OpenPorts(R"({"id":")" + id + R"(","ports":[6443]})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("security_rules"), 3);
  ASSERT_EQ(driver.Delete(R"({"id":")" + id + R"(","name":"hs-ports"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

// --- clusters (ABI 1.5) ----------------------------------------------------------------------

constexpr const char* kPeerPorts =
    R"([{"port":6443,"protocol":"tcp"},{"port":10250,"protocol":"tcp"},)"
    R"({"port":51820,"protocol":"udp"}])";

// One node as open_peer_ports lists it, from the driver's VM object.
std::string PeerJson(const Object::Ptr& vm) {
  return R"({"id":")" + vm->getValue<std::string>("id") + R"(","name":")" +
         vm->getValue<std::string>("name") + R"(","private_ip":")" +
         vm->getValue<std::string>("private_ip") + R"(","public_ip":")" +
         vm->optValue<std::string>("public_ip", "") + R"("})";
}

std::string PeersRequest(const std::vector<Object::Ptr>& vms) {
  std::string peers;
  for (const auto& vm : vms) peers += (peers.empty() ? "" : ",") + PeerJson(vm);
  return R"({"cluster":"train","peer_ports":)" + std::string(kPeerPorts) + R"(,"peers":[)" +
         peers + "]}";
}

class HyperstackClusterTest : public HyperstackEmulatorTest {
 protected:
  // A VM's rules from other sources than 0.0.0.0/0 as Hyperstack holds them:
  // "tcp 6443 10.110.0.2/32", sorted.
  static std::set<std::string> PeerRulesOf(const std::string& id);
};

std::set<std::string> HyperstackClusterTest::PeerRulesOf(const std::string& id) {
  HttpReply got = emulator_->Api("GET", "/core/virtual-machines/" + id);
  EXPECT_EQ(got.status, 200) << got.body;
  std::set<std::string> out;
  Array::Ptr rules = got.Doc()->getObject("instance")->getArray("security_rules");
  for (size_t i = 0; rules && i < rules->size(); ++i) {
    Object::Ptr r = rules->getObject(i);
    const std::string prefix = r->getValue<std::string>("remote_ip_prefix");
    if (prefix == "0.0.0.0/0") continue;
    EXPECT_EQ(r->getValue<std::string>("direction"), "ingress");
    EXPECT_EQ(r->getValue<std::string>("ethertype"), "IPv4");
    EXPECT_EQ(r->getValue<int>("port_range_min"), r->getValue<int>("port_range_max"));
    out.insert(r->getValue<std::string>("protocol") + " " +
               std::to_string(r->getValue<int>("port_range_min")) + " " + prefix);
  }
  return out;
}

std::set<std::string> RulesFrom(const std::vector<std::string>& addresses) {
  std::set<std::string> out;
  for (const auto& a : addresses) {
    out.insert("tcp 6443 " + a + "/32");
    out.insert("tcp 10250 " + a + "/32");
    out.insert("udp 51820 " + a + "/32");
  }
  return out;
}

TEST_F(HyperstackClusterTest, AClusterNodeIsLabelledInTheSharedEnvironmentWithItsFixedIp) {
  Driver driver(Config());
  OpResult server = driver.Create(WithCluster(CreateRequest("train"), "train", "server"));
  ASSERT_EQ(server.status, GPUPROV_STATUS_OK) << server << "\n" << driver.host().All();
  OpResult agent = driver.Create(WithCluster(CreateRequest("train-agent-1"), "train", "agent"));
  ASSERT_EQ(agent.status, GPUPROV_STATUS_OK) << agent;
  // Both in the region's one environment (its private network), with one key pair; the
  // cluster has nothing of its own on Hyperstack.
  EXPECT_EQ(emulator_->Count("environments"), 1);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  EXPECT_EQ(agent.Vm()->getValue<std::string>("environment"), "gpuprov-CANADA-1");
  // The labels, in the form of the user's tags; no peer rule yet (open_peer_ports sets them).
  const std::string id = agent.Vm()->getValue<std::string>("id");
  HttpReply got = emulator_->Api("GET", "/core/virtual-machines/" + id);
  EXPECT_TRUE(Contains(got.body, R"("gpuprov-cluster=train")")) << got.body;
  EXPECT_TRUE(Contains(got.body, R"("gpuprov-role=agent")")) << got.body;
  EXPECT_TRUE(PeerRulesOf(id).empty());
  Object::Ptr running = WaitRunning(driver, id);
  ASSERT_TRUE(running);
  EXPECT_EQ(running->getValue<std::string>("cluster"), "train");
  EXPECT_EQ(running->getValue<std::string>("role"), "agent");
  // private_ip is fixed_ip, the address on the environment's network.
  got = emulator_->Api("GET", "/core/virtual-machines/" + id);
  EXPECT_EQ(running->getValue<std::string>("private_ip"),
            got.Doc()->getObject("instance")->getValue<std::string>("fixed_ip"));
  EXPECT_EQ(running->getValue<std::string>("private_ip").rfind("10.", 0), 0u)
      << Stringify(running);
  OpResult server_vm = driver.Get(R"({"name":"train"})");
  ASSERT_EQ(server_vm.status, GPUPROV_STATUS_OK);
  EXPECT_EQ(server_vm.Vm()->getValue<std::string>("role"), "server");
  ASSERT_EQ(driver.Delete(R"({"name":"train-agent-1"})").status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Delete(R"({"name":"train"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(HyperstackClusterTest, OpenPeerPortsAdmitsExactlyThePeersOnEveryNode) {
  Driver driver(Config());
  std::vector<Object::Ptr> vms;
  for (const char* name : {"train", "train-agent-1", "train-agent-2"}) {
    OpResult c = driver.Create(
        WithCluster(CreateRequest(name), "train", vms.empty() ? "server" : "agent"));
    ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c << "\n" << driver.host().All();
    vms.push_back(WaitRunning(driver, c.Vm()->getValue<std::string>("id")));
    ASSERT_TRUE(vms.back());
  }
  auto id = [&](int k) { return vms[k]->getValue<std::string>("id"); };
  auto ip = [&](int k) { return vms[k]->getValue<std::string>("private_ip"); };

  // Every node admits the peer ports from the two others' fixed_ip, and the emulator enforces
  // it on the private network (the memory backend records it).
  OpResult opened = driver.OpenPeerPorts(PeersRequest(vms));
  ASSERT_EQ(opened.status, GPUPROV_STATUS_OK) << opened << "\n" << driver.host().All();
  EXPECT_EQ(opened.json, "{}");
  EXPECT_EQ(PeerRulesOf(id(0)), RulesFrom({ip(1), ip(2)}));
  EXPECT_EQ(PeerRulesOf(id(1)), RulesFrom({ip(0), ip(2)}));
  EXPECT_EQ(PeerRulesOf(id(2)), RulesFrom({ip(0), ip(1)}));
  EXPECT_EQ(emulator_->Count("security_rules"), 3 * 4 + 3 * 6);
  Object::Ptr row = emulator_->Instance("train");
  ASSERT_TRUE(row);
  ASSERT_TRUE(row->isArray("private_ingress")) << Stringify(row);
  EXPECT_TRUE(Contains(Stringify(row), R"("sources":[")" + ip(1) + R"(/32"])"))
      << Stringify(row);
  // The peer rules open nothing to the user: the VM's ports are its public ones.
  OpResult server = driver.Get(R"({"name":"train"})");
  EXPECT_FALSE(server.Vm()->getObject("ports")->has("10250")) << server.json;

  // Idempotent: the same list changes nothing.
  emulator_->ClearRequests();
  ASSERT_EQ(driver.OpenPeerPorts(PeersRequest(vms)).status, GPUPROV_STATUS_OK);
  for (const std::string& r : emulator_->Requests()) {
    EXPECT_EQ(r.rfind("GET ", 0), 0u) << r;
  }
  EXPECT_EQ(emulator_->Count("security_rules"), 3 * 4 + 3 * 6);

  // agent-2 leaves: the others no longer admit it; its own rules go with it.
  ASSERT_EQ(driver.Delete(R"({"name":"train-agent-2"})").status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.OpenPeerPorts(PeersRequest({vms[0], vms[1]})).status, GPUPROV_STATUS_OK);
  EXPECT_EQ(PeerRulesOf(id(0)), RulesFrom({ip(1)}));
  EXPECT_EQ(PeerRulesOf(id(1)), RulesFrom({ip(0)}));
  EXPECT_EQ(emulator_->Count("security_rules"), 2 * 4 + 2 * 3);

  // gc knows each node's cluster and role; the cluster has no network or firewall to list.
  OpResult listed = driver.ListResources();
  ASSERT_EQ(listed.status, GPUPROV_STATUS_OK) << listed;
  EXPECT_FALSE(Contains(listed.json, "cluster_network")) << listed.json;
  EXPECT_FALSE(Contains(listed.json, "cluster_firewall")) << listed.json;
  // Exactly the two nodes name a cluster: "kind name cluster/role".
  std::set<std::string> of_a_cluster;
  Array::Ptr resources = listed.Doc()->getArray("resources");
  for (size_t i = 0; resources && i < resources->size(); ++i) {
    Object::Ptr r = resources->getObject(i);
    if (!r->has("cluster") && !r->has("role")) continue;
    of_a_cluster.insert(r->getValue<std::string>("kind") + " " +
                        r->getValue<std::string>("name") + " " +
                        r->optValue<std::string>("cluster", "") + "/" +
                        r->optValue<std::string>("role", ""));
  }
  EXPECT_EQ(of_a_cluster, (std::set<std::string>{"vm train train/server",
                                                 "vm train-agent-1 train/agent"}))
      << listed.json;

  // The last nodes go: their rules with them, then the key pair and the environment.
  ASSERT_EQ(driver.Delete(R"({"name":"train"})").status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.OpenPeerPorts(PeersRequest({vms[1]})).status, GPUPROV_STATUS_OK);
  EXPECT_TRUE(PeerRulesOf(id(1)).empty());
  ASSERT_EQ(driver.Delete(R"({"name":"train-agent-1"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

// A user's own rules (from the internet, or of other ports) are never taken for a peer's.
TEST_F(HyperstackClusterTest, OpenPeerPortsLeavesTheUsersRulesAlone) {
  Driver driver(Config());
  OpResult c = driver.Create(WithCluster(CreateRequest("solo"), "train", "server"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  Object::Ptr vm = WaitRunning(driver, c.Vm()->getValue<std::string>("id"));
  ASSERT_TRUE(vm);
  const std::string id = vm->getValue<std::string>("id");
  for (const char* body :
       {R"({"direction":"ingress","protocol":"tcp","ethertype":"IPv4",)"
        R"("remote_ip_prefix":"203.0.113.7/32","port_range_min":10250,"port_range_max":10250})",
        R"({"direction":"ingress","protocol":"tcp","ethertype":"IPv4",)"
        R"("remote_ip_prefix":"10.9.9.9/32","port_range_min":5432,"port_range_max":5432})"}) {
    ASSERT_EQ(emulator_->Api("POST", "/core/virtual-machines/" + id + "/sg-rules", body).status,
              200);
  }
  ASSERT_EQ(driver.OpenPeerPorts(PeersRequest({vm})).status, GPUPROV_STATUS_OK);
  EXPECT_EQ(PeerRulesOf(id), (std::set<std::string>{"tcp 10250 203.0.113.7/32",
                                                     "tcp 5432 10.9.9.9/32"}));
  ASSERT_EQ(driver.Delete(R"({"name":"solo"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(HyperstackClusterTest, ABadClusterIsRefusedBeforeAnyCall) {
  Driver driver(Config());
  emulator_->ClearRequests();
  OpResult r = driver.Create(WithCluster(CreateRequest("bad"), "Bad_Name", "server"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  EXPECT_TRUE(Contains(r.error, "cluster.name")) << r.error;
  EXPECT_TRUE(emulator_->Requests().empty());
}

TEST_F(HyperstackEmulatorTest, CapacityOnCreateIsCapacityAndUndoesKeyAndEnvironment) {
  Driver driver(Config());
  emulator_->Fault("capacity", 1);
  OpResult r = driver.Create(CreateRequest("hs-cap"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_CAPACITY) << r;
  EXPECT_TRUE(Contains(r.error, "Not enough stock available")) << r.error;
  EXPECT_TRUE(Contains(r.error, "another flavor or region")) << r.error;
  ExpectNothingLeft();
}

TEST_F(HyperstackEmulatorTest, OutOfStockFlavorIsRefusedBeforeAnythingIsMade) {
  Driver driver(Config());
  emulator_->Settings(R"({"cloud":"hyperstack","out_of_stock":["n3-A100x1"]})");
  OpResult r = driver.Create(CreateRequest("hs-stock"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_CAPACITY) << r;
  EXPECT_TRUE(Contains(r.error, "n3-A100x1 is out of stock")) << r.error;
  ExpectNothingLeft();
}

TEST_F(HyperstackEmulatorTest, ThrottlingWithoutRetryAfterIsRetried) {
  Driver driver(Config());
  emulator_->Fault("throttle", 3, R"(,"retry_after":0)");
  OpResult r = driver.Create(CreateRequest("hs-429"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r << "\n" << driver.host().All();
  EXPECT_TRUE(Contains(driver.host().All(), "-> 429")) << driver.host().All();
  EXPECT_EQ(emulator_->Count("instances"), 1);
}

TEST_F(HyperstackEmulatorTest, AServerErrorAfterTheVmWasMadeFindsItInsteadOfMakingTwo) {
  Driver driver(Config());
  emulator_->Fault("server_error", 1,
                   R"(,"value":"after_create","method":"POST","path":"/v1/core/virtual-machines")");
  OpResult r = driver.Create(CreateRequest("hs-ambiguous"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r << "\n" << driver.host().All();
  EXPECT_EQ(r.Vm()->getValue<std::string>("name"), "hs-ambiguous");
  EXPECT_EQ(emulator_->Count("instances"), 1);
  int posts = 0;
  for (const auto& line : emulator_->Requests()) {
    if (line.rfind("POST /v1/core/virtual-machines ", 0) == 0) ++posts;
  }
  EXPECT_EQ(posts, 1);
}

TEST_F(HyperstackEmulatorTest, EndlessLegacyServerErrorsBecomeTransientWithTheMessage) {
  Driver driver(Config());
  emulator_->Fault("server_error", 50, R"(,"value":"legacy")");
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_TRANSIENT) << r;
  EXPECT_TRUE(Contains(r.error, "Internal Server Error")) << r.error;
  EXPECT_TRUE(Contains(r.error, "5 attempt")) << r.error;
}

TEST_F(HyperstackEmulatorTest, AWrongKeyIsAuthWithAHintAndNoSecret) {
  ScopedEnv wrong("GPUPROV_TEST_WRONG_HS_KEY", "hs-wrong-key-value");
  Driver driver(Config(R"(,"token_env":"GPUPROV_TEST_WRONG_HS_KEY")"));
  OpResult r = driver.Create(CreateRequest("hs-auth"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "HYPERSTACK_API_KEY")) << r.error;
  EXPECT_TRUE(Contains(r.error, "$GPUPROV_TEST_WRONG_HS_KEY")) << r.error;
  EXPECT_FALSE(Contains(r.error, "hs-wrong-key-value"));
  EXPECT_FALSE(Contains(driver.host().All(), "hs-wrong-key-value"));
  ExpectNothingLeft();
}

TEST_F(HyperstackEmulatorTest, AKeyRevokedMidCreateUndoesWhatWasMade) {
  Driver driver(Config());
  emulator_->Fault("auth_failure", 1, R"(,"method":"POST","path":"/v1/core/virtual-machines")");
  OpResult r = driver.Create(CreateRequest("hs-revoked"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  ExpectNothingLeft();
}

TEST_F(HyperstackEmulatorTest, ActiveWithoutAnAddressStaysPendingUntilTheIpIsAttached) {
  Driver driver(Config());
  emulator_->Fault("ip_after_boot", 1, R"(,"seconds":2)");
  OpResult c = driver.Create(CreateRequest("hs-noip"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  const std::string id = c.Vm()->getValue<std::string>("id");
  bool saw_window = false;
  Object::Ptr vm = PollVm(
      driver, R"({"id":")" + id + R"("})",
      [&](const Object::Ptr& v) {
        if (Contains(v->getValue<std::string>("message"), "ACTIVE, waiting for the floating IP")) {
          saw_window = true;
          EXPECT_EQ(v->getValue<std::string>("state"), "pending");
          EXPECT_EQ(v->getValue<std::string>("public_ip"), "");
        }
        return v->getValue<std::string>("state") == "running";
      },
      30s);
  ASSERT_TRUE(vm);
  EXPECT_TRUE(saw_window);
  EXPECT_FALSE(vm->getValue<std::string>("public_ip").empty());
  ASSERT_EQ(driver.Delete(R"({"name":"hs-noip"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(HyperstackEmulatorTest, ErrorStateCarriesHyperstacksWordsAndDownCleansUp) {
  Driver driver(Config());
  emulator_->Fault("error_during_boot", 1);
  OpResult c = driver.Create(CreateRequest("hs-error"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  Object::Ptr vm = PollVm(
      driver, R"({"name":"hs-error"})",
      [](const Object::Ptr& v) { return v->getValue<std::string>("state") == "error"; }, 30s);
  ASSERT_TRUE(vm);
  EXPECT_TRUE(Contains(vm->getValue<std::string>("message"), "Hyperstack status ERROR"))
      << vm->getValue<std::string>("message");
  ASSERT_EQ(driver.Delete(R"({"name":"hs-error"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(HyperstackEmulatorTest, AVmThatVanishesIsNotFoundAndDownRemovesItsKeyAndEnvironment) {
  Driver driver(Config());
  emulator_->Fault("vanish_during_boot", 1);
  OpResult c = driver.Create(CreateRequest("hs-gone"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  const std::string id = c.Vm()->getValue<std::string>("id");
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  OpResult g;
  do {
    std::this_thread::sleep_for(100ms);
    g = driver.Get(R"({"id":")" + id + R"("})");
  } while (g.status == GPUPROV_STATUS_OK && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(g.status, GPUPROV_STATUS_NOT_FOUND) << g;
  EXPECT_EQ(emulator_->Count("environments"), 1);
  OpResult d = driver.Delete(R"({"id":")" + id + R"(","name":"hs-gone"})");
  ASSERT_EQ(d.status, GPUPROV_STATUS_OK) << d;
  EXPECT_FALSE(d.Doc()->getValue<bool>("deleted"));
  ExpectNothingLeft();
}

TEST_F(HyperstackEmulatorTest, WaitingForADeleteEndsOnCancel) {
  Driver driver(Config(R"(,"delete_wait_seconds":60)"));
  emulator_->Settings(R"({"cloud":"hyperstack","deleting_seconds":30})");
  OpResult c = driver.Create(CreateRequest("hs-cancel"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  ASSERT_TRUE(WaitRunning(driver, c.Vm()->getValue<std::string>("id")));
  std::thread canceller([&] {
    std::this_thread::sleep_for(700ms);
    const_cast<RecordingHost&>(driver.host()).cancel = true;
  });
  const auto start = std::chrono::steady_clock::now();
  OpResult d = driver.Delete(R"({"name":"hs-cancel"})");
  canceller.join();
  EXPECT_EQ(d.status, GPUPROV_STATUS_CANCELLED) << d;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST_F(HyperstackEmulatorTest, BadInputIsRefusedBeforeAnyCallThatMakesSomething) {
  Driver driver(Config());
  Object::Ptr l4 = ParseJson(CreateRequest("hs-l4"));
  l4->getObject("gpu")->set("type", "L4");
  OpResult r = driver.Create(Stringify(l4));
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  EXPECT_TRUE(Contains(r.error, "Hyperstack does not offer L4:1")) << r.error;
  EXPECT_TRUE(Contains(r.error, "A100 x1")) << r.error;

  Object::Ptr big = ParseJson(CreateRequest("hs-big"));
  big->set("user_data", std::string(40000, 'x'));
  r = driver.Create(Stringify(big));
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  EXPECT_TRUE(Contains(r.error, "32 KiB")) << r.error;

  r = driver.Create(CreateRequest("this-name-is-far-too-long-for-hyperstack-fifty-chars-max"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;

  Object::Ptr image = ParseJson(CreateRequest("hs-image"));
  image->set("image", "Windows 95");
  r = driver.Create(Stringify(image));
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  EXPECT_TRUE(Contains(r.error, "Ubuntu Server 22.04 LTS R535 CUDA 12.2")) << r.error;

  Object::Ptr key = ParseJson(CreateRequest("hs-key"));
  key->set("ssh_public_key", "not a key");
  r = driver.Create(Stringify(key));
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  ExpectNothingLeft();
}

}  // namespace
}  // namespace gpuprov::hyperstack
