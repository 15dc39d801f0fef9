// SPDX-License-Identifier: Apache-2.0
//
// Loads the BUILT driver .so with dlopen, as the host does, and drives it through the C
// vtable against the Verda emulator (tests/emulators/verda_api.cc, memory backend) started as
// a child process. Talks only to 127.0.0.1.
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../../tests/emulators/verda_spec_operations.h"
#include "driver_test_util.h"
#include "gpuprov/driver_abi.h"

namespace gpuprov::verda {
namespace {

using drivers::testing::Contains;
using drivers::testing::HttpReply;
using drivers::testing::LoopbackHttp;
using drivers::testing::OpResult;
using drivers::testing::ParseJson;
using drivers::testing::ScopedEnv;
using drivers::testing::ScopedTempDir;
using drivers::testing::SharedEmulatorTest;
using drivers::testing::Stringify;
using Poco::JSON::Array;
using Poco::JSON::Object;

constexpr const char* kClientId = "gpuprov-test-client";
constexpr const char* kClientSecret = "secret_gpuprov_verda_client_0123456789";
constexpr const char* kKeyA =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF test@gpuprov";
constexpr const char* kScript = "#!/bin/bash\necho installing k3s\n";

constexpr char kDriverPath[] = GPUPROV_VERDA_DRIVER_PATH;
using Driver = drivers::testing::DriverAt<kDriverPath>;

// --- no emulator needed -----------------------------------------------------

TEST(VerdaDescriptor, IdentityCapabilitiesAndKeys) {
  const gpuprov_type_driver_descriptor* d = Driver::Descriptor();
  ASSERT_NE(d, nullptr);
  EXPECT_STREQ(d->name, "verda");
  // How its VM learns its public address: REFERENCE.md section 6.
  EXPECT_STREQ(d->node_address, GPUPROV_NODE_ADDRESS_INTERFACE);
  // A startup-script cloud without a firewall API: no OPEN_PORTS, no cloud-init; clusters
  // (the node firewall admits the peers) and spot instances.
  EXPECT_EQ(d->capabilities,
            static_cast<uint64_t>(GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_BOOT_STARTUP_SCRIPT |
                                  GPUPROV_CAP_HOSTS_KUBERNETES | GPUPROV_CAP_CLUSTER |
                                  GPUPROV_CAP_SPOT));
  drivers::testing::ExpectEveryOperation(*d->vtable, /*open_ports=*/false);
  EXPECT_NE(d->vtable->open_peer_ports, nullptr);
}

TEST(VerdaDescriptor, RefusesPlainHttpToANonLoopbackEndpoint) {
  Driver driver(R"({"endpoint":"http://api.verda.com/v1","config":{}})");
  EXPECT_EQ(driver.init_status(), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_TRUE(Contains(driver.init_error(), "loopback")) << driver.init_error();
}

TEST(VerdaDescriptor, NoCredentialsAnywhereIsAuthBeforeAnyCall) {
  ScopedTempDir home;
  ScopedEnv h("HOME", home.path().c_str());
  ScopedEnv a("VERDA_CLIENT_ID", nullptr);
  ScopedEnv b("VERDA_CLIENT_SECRET", nullptr);
  ScopedEnv c("DATACRUNCH_CLIENT_ID", nullptr);
  ScopedEnv d("DATACRUNCH_CLIENT_SECRET", nullptr);
  ScopedEnv e("VERDA_SHARED_CREDENTIALS_FILE", nullptr);
  ScopedEnv f("VERDA_HOME", nullptr);
  // Nothing is sent (the discard port would refuse it anyway): the credentials are missing first.
  Driver driver(R"({"endpoint":"http://127.0.0.1:9/v1","config":{}})");
  ASSERT_EQ(driver.init_status(), GPUPROV_STATUS_OK) << driver.init_error();
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "VERDA_CLIENT_ID")) << r.error;
  EXPECT_TRUE(Contains(r.error, "~/.verda/credentials")) << r.error;
}

TEST(VerdaDescriptor, ATinyScriptLimitIsRefused) {
  Driver driver(R"({"endpoint":"","config":{"startup_script_limit":10}})");
  EXPECT_EQ(driver.init_status(), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_TRUE(Contains(driver.init_error(), "startup_script_limit")) << driver.init_error();
}

// --- the emulator -----------------------------------------------------------

class Emulator : public drivers::testing::OneCloudEmulator {
 public:
  Emulator() : OneCloudEmulator("verda") {}
  bool Start(std::string* problem) {
    return StartMemory({"--boot-seconds", "1"},
                       {{"VERDA_CLIENT_ID", kClientId}, {"VERDA_CLIENT_SECRET", kClientSecret}},
                       problem);
  }
  void Fault(const std::string& fault, const std::string& extra = "") {
    EmulatorProcess::Fault(R"({"cloud":"verda","fault":")" + fault + "\"" + extra + "}");
  }
  void Settings(const std::string& members) {
    HttpReply r = Control("POST", "/settings", R"({"cloud":"verda",)" + members + "}");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  void ClearRequests() { EmulatorProcess::ClearRequests("verda"); }
  // Verda takes the instance back as it does a spot instance (POST /preempt).
  void Preempt(const std::string& name) {
    HttpReply r = Control("POST", "/preempt", R"({"cloud":"verda","name":")" + name + R"("})");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  // The emulator's rows (status, startup_script text) of instances called name.
  std::vector<Object::Ptr> Rows(const std::string& name) {
    std::vector<Object::Ptr> out;
    HttpReply r = Control("GET", "/instances?cloud=verda");
    Array::Ptr rows = r.Doc()->getArray("instances");
    for (size_t i = 0; rows && i < rows->size(); ++i) {
      Object::Ptr row = rows->getObject(static_cast<unsigned>(i));
      if (row->getValue<std::string>("name") == name) out.push_back(row);
    }
    return out;
  }
  // How many logged requests start with "METHOD path".
  int CountRequests(const std::string& prefix) {
    int n = 0;
    for (const auto& r : Requests()) n += r.rfind(prefix, 0) == 0 ? 1 : 0;
    return n;
  }
  // The Verda API with a token of its own (as a user's other tool would).
  HttpReply Api(const std::string& method, const std::string& path, const std::string& body = "") {
    HttpReply t = LoopbackHttp("POST", url() + "/oauth2/token",
                               std::string(R"({"grant_type":"client_credentials","client_id":")") +
                                   kClientId + R"(","client_secret":")" + kClientSecret + "\"}");
    const std::string token = t.Doc()->getValue<std::string>("access_token");
    return LoopbackHttp(method, url() + path, body, {{"Authorization", "Bearer " + token}});
  }
};

class VerdaEmulatorTest : public SharedEmulatorTest<Emulator> {
 protected:
  void SetUp() override {
    SharedEmulatorTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    emulator_->Reset();
    emulator_->Settings(R"("ordered_seconds":0.5,"deleting_seconds":0.5,"out_of_stock":[],)"
                        R"("spot_out_of_stock":[],)"
                        R"("token_lifetime_seconds":3600)");
    home_ = std::make_unique<ScopedTempDir>();
    home_env_ = std::make_unique<ScopedEnv>("HOME", home_->path().c_str());
    id_ = std::make_unique<ScopedEnv>("VERDA_CLIENT_ID", kClientId);
    secret_ = std::make_unique<ScopedEnv>("VERDA_CLIENT_SECRET", kClientSecret);
  }
  void TearDown() override {
    secret_.reset();
    id_.reset();
    home_env_.reset();
    home_.reset();
  }

  static std::string Config(const std::string& extra_config = "") {
    return R"({"endpoint":")" + emulator_->url() +
           R"(","config":{"retry":{"max_attempts":5,"base_delay_ms":5,"max_delay_ms":50,)"
           R"("max_retry_after_ms":1500,"total_budget_ms":20000,"attempt_timeout_ms":10000},)"
           R"("poll_interval_ms":200,"placement_wait_seconds":20,"delete_wait_seconds":20)" +
           extra_config + "}}";
  }

  static std::string CreateRequest(const std::string& name, const std::string& gpu = "H100",
                                   const std::string& user_data = kScript,
                                   const std::string& region = "FIN-01") {
    Object::Ptr req = new Object();
    req->set("name", name);
    req->set("region", region);
    req->set("instance_type", "");
    Object::Ptr g = new Object();
    g->set("type", gpu);
    g->set("count", 1);
    req->set("gpu", g);
    req->set("image", "");
    req->set("ssh_public_key", kKeyA);
    req->set("user_data", user_data);
    Object::Ptr tags = new Object();
    tags->set("gpuprov", "1");
    tags->set("gpuprov-name", name);
    tags->set("team", "ml");
    req->set("tags", tags);
    Array::Ptr p = new Array();
    p->add(22);
    req->set("open_ports", p);
    return Stringify(req);
  }

  static Object::Ptr WaitRunning(Driver& driver, const std::string& id) {
    return drivers::testing::WaitRunning(driver, id, std::chrono::seconds(30), "instance");
  }

  static void ExpectNothingLeft() {
    for (int i = 0; i < 50 && emulator_->Count("instances") != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(emulator_->Count("instances"), 0);
    EXPECT_EQ(emulator_->Count("scripts"), 0);
    EXPECT_EQ(emulator_->Count("ssh_keys"), 0);
    // V4: no OS volume in the trash (96 h, counted in the quota) nor left detached.
    EXPECT_EQ(emulator_->Count("volumes_in_trash"), 0);
    EXPECT_EQ(emulator_->Count("detached_volumes"), 0);
    EXPECT_EQ(emulator_->Count("private_networks"), 0);
  }

  std::unique_ptr<ScopedTempDir> home_;
  std::unique_ptr<ScopedEnv> home_env_;
  std::unique_ptr<ScopedEnv> id_;
  std::unique_ptr<ScopedEnv> secret_;
};

TEST_F(VerdaEmulatorTest, CheckNamesWhereTheCredentialsCameFromAndNeverTheSecret) {
  Driver driver(Config());
  OpResult r = driver.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(r.Doc()->getValue<std::string>("key_from"), "$VERDA_CLIENT_ID/$VERDA_CLIENT_SECRET");
  EXPECT_EQ(r.Doc()->getValue<int>("user_data_limit"), 64 * 1024);
  EXPECT_FALSE(Contains(r.json, kClientSecret));
  EXPECT_FALSE(Contains(driver.host().All(), kClientSecret));
}

TEST_F(VerdaEmulatorTest, TheCliCredentialsFileIsUsedWithoutTheVariables) {
  ScopedEnv a("VERDA_CLIENT_ID", nullptr);
  ScopedEnv b("VERDA_CLIENT_SECRET", nullptr);
  std::filesystem::create_directories(home_->path() / ".verda");
  std::ofstream(home_->path() / ".verda" / "credentials")
      << "[default]\nverda_client_id = " << kClientId << "\nverda_client_secret = " << kClientSecret
      << "\n";
  Driver driver(Config());
  OpResult r = driver.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_TRUE(Contains(r.Doc()->getValue<std::string>("key_from"), ".verda/credentials [default]"));
}

TEST_F(VerdaEmulatorTest, WrongCredentialsAreAuthNamingWhereTheyCameFrom) {
  ScopedEnv b("VERDA_CLIENT_SECRET", "secret_wrong_one");
  Driver driver(Config());
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "$VERDA_CLIENT_ID/$VERDA_CLIENT_SECRET")) << r.error;
  EXPECT_TRUE(Contains(r.error, "Invalid client id or client secret")) << r.error;
  EXPECT_FALSE(Contains(r.error + driver.host().All(), "secret_wrong_one"));
}

TEST_F(VerdaEmulatorTest, TheTokenIsCachedAndRenewedOnceWhenItExpires) {
  Driver driver(Config());
  emulator_->ClearRequests();
  ASSERT_EQ(driver.Check().status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.List().status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Offers(R"({"gpu":{"type":"H100","count":1},"region":""})").status,
            GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->CountRequests("POST /v1/oauth2/token"), 1);
  // The emulator expires every issued token: the next call gets a 401, one new token, and
  // succeeds.
  emulator_->Settings(R"("expire_tokens":true)");
  OpResult r = driver.List();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(emulator_->CountRequests("POST /v1/oauth2/token"), 2);
  EXPECT_EQ(emulator_->CountRequests("GET /v1/instances -> 401"), 1);
  // A 401 that persists after the new token is AUTH, not a loop.
  emulator_->Fault("auth_failure", R"(,"times":2)");
  r = driver.List();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_EQ(emulator_->CountRequests("POST /v1/oauth2/token"), 3);
  // A token is renewed before its end, not after a refused call: a lifetime of 30 s is within
  // the 60 s margin, so it is used for about a second.
  emulator_->Settings(R"("token_lifetime_seconds":30)");
  Driver short_lived(Config());
  ASSERT_EQ(short_lived.Check().status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->CountRequests("POST /v1/oauth2/token"), 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  ASSERT_EQ(short_lived.List().status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->CountRequests("POST /v1/oauth2/token"), 5);
  EXPECT_EQ(emulator_->CountRequests("GET /v1/instances -> 401"), 3);  // none new
  EXPECT_FALSE(Contains(driver.host().All(), kClientSecret));
}

TEST_F(VerdaEmulatorTest, OffersComeFromAvailabilityPerLocation) {
  Driver driver(Config());
  OpResult r = driver.Offers(R"({"gpu":{"type":"H100","count":1},"region":""})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  Array::Ptr offers = r.Doc()->getArray("offers");
  ASSERT_EQ(offers->size(), 4u) << r.json;  // 1H100.80S.30V in four locations
  Object::Ptr o = offers->getObject(0);
  EXPECT_EQ(o->getValue<std::string>("instance_type"), "1H100.80S.30V");
  EXPECT_EQ(o->getValue<std::string>("gpu_type"), "H100");
  EXPECT_DOUBLE_EQ(o->getValue<double>("price_per_hour"), 2.19);
  r = driver.Offers(R"({"gpu":{"type":"A100","count":1},"region":"FIN-02"})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(r.Doc()->getArray("offers")->size(), 2u) << r.json;  // 80 GB and 40 GB
  emulator_->Settings(R"("out_of_stock":["1L40S.20V"])");
  r = driver.Offers(R"({"gpu":{"type":"L40S","count":1},"region":""})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(r.Doc()->getArray("offers")->size(), 0u) << r.json;
  EXPECT_TRUE(Contains(driver.host().All(), "no capacity now for 1L40S.20V"))
      << driver.host().All();
  r = driver.Offers(R"({"gpu":null,"region":"ICE-01"})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  ASSERT_EQ(r.Doc()->getArray("offers")->size(), 1u) << r.json;
  EXPECT_EQ(r.Doc()->getArray("offers")->getObject(0)->getValue<std::string>("instance_type"),
            "CPU.4V.16G");
}

// Spot (README.md "Spot"): an offer carries the type's spot_price where GET
// /instance-availability?is_spot=true lists it there, none where spot is sold out.
TEST_F(VerdaEmulatorTest, OffersCarryTheSpotPriceWhereTheTypeIsInSpotStock) {
  Driver driver(Config());
  emulator_->ClearRequests();
  OpResult r = driver.Offers(R"({"gpu":{"type":"H100","count":1},"region":"FIN-01"})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  Array::Ptr offers = r.Doc()->getArray("offers");
  ASSERT_EQ(offers->size(), 1u) << r.json;
  EXPECT_DOUBLE_EQ(offers->getObject(0)->getValue<double>("price_per_hour"), 2.19);
  EXPECT_DOUBLE_EQ(offers->getObject(0)->getValue<double>("spot_price_per_hour"), 0.99);
  EXPECT_EQ(emulator_->CountRequests("GET /v1/instance-availability?is_spot=true"), 1);
  emulator_->Settings(R"("spot_out_of_stock":["1H100.80S.30V"])");
  r = driver.Offers(R"({"gpu":{"type":"H100","count":1},"region":"FIN-01"})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  offers = r.Doc()->getArray("offers");
  ASSERT_EQ(offers->size(), 1u) << r.json;  // still sold on demand
  EXPECT_FALSE(offers->getObject(0)->has("spot_price_per_hour")) << r.json;
  // A spot create of a type sold out as spot is CAPACITY before anything is made.
  OpResult c = driver.Create(R"({"spot":true,)" + CreateRequest("vd-nospot").substr(1));
  EXPECT_EQ(c.status, GPUPROV_STATUS_CAPACITY) << c;
  EXPECT_TRUE(Contains(c.error, "no spot capacity now for")) << c.error;
  ExpectNothingLeft();
}

// Spot (README.md "Spot"): the create says is_spot, contract SPOT and the OS volume's
// on_spot_discontinue; the instance Verda discontinues is "preempted" in get and list (by id
// and by name) until deleted, and its OS volume does not stay behind.
TEST_F(VerdaEmulatorTest, ASpotInstanceVerdaDiscontinuesIsPreemptedUntilDeleted) {
  Driver driver(Config());
  OpResult c = driver.Create(R"({"spot":true,)" + CreateRequest("vd-spot").substr(1));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c << "\n" << driver.host().All();
  EXPECT_TRUE(c.Vm()->getValue<bool>("spot"));
  const std::string id = c.Vm()->getValue<std::string>("id");
  HttpReply got = emulator_->Api("GET", "/instances/" + id);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_TRUE(got.Doc()->getValue<bool>("is_spot"));
  EXPECT_EQ(got.Doc()->getValue<std::string>("contract"), "SPOT");
  EXPECT_DOUBLE_EQ(got.Doc()->getValue<double>("price_per_hour"), 0.99);
  ASSERT_TRUE(WaitRunning(driver, id));

  emulator_->Preempt("vd-spot");
  for (const std::string& request : {R"({"id":")" + id + R"("})", std::string(R"({"name":"vd-spot"})")}) {
    OpResult g = driver.Get(request);
    ASSERT_EQ(g.status, GPUPROV_STATUS_OK) << g;
    EXPECT_EQ(g.Vm()->getValue<std::string>("state"), "preempted") << request;
    EXPECT_EQ(g.Vm()->getValue<std::string>("message"),
              "spot instance discontinued by Verda (status discontinued)");
    EXPECT_EQ(g.Vm()->getValue<std::string>("id"), id);
  }
  emulator_->ClearRequests();
  OpResult list = driver.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list;
  ASSERT_EQ(list.Doc()->getArray("vms")->size(), 1u) << list.json;
  EXPECT_EQ(list.Doc()->getArray("vms")->getObject(0)->getValue<std::string>("state"),
            "preempted");
  EXPECT_EQ(emulator_->CountRequests("GET /v1/instances"), 1);  // one list call
  // on_spot_discontinue delete_permanently: no volume detached (keep_detached, Verda's
  // default) nor in the trash.
  EXPECT_EQ(emulator_->Count("detached_volumes"), 0);
  EXPECT_EQ(emulator_->Count("volumes_in_trash"), 0);

  // A new VM of the name is made (the preempted one is not "existing"), and list then shows
  // only the live one.
  OpResult again = driver.Create(R"({"spot":true,)" + CreateRequest("vd-spot").substr(1));
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_FALSE(again.Doc()->getValue<bool>("existing"));
  const std::string new_id = again.Vm()->getValue<std::string>("id");
  EXPECT_NE(new_id, id);
  list = driver.List();
  ASSERT_EQ(list.Doc()->getArray("vms")->size(), 1u) << list.json;
  EXPECT_EQ(list.Doc()->getArray("vms")->getObject(0)->getValue<std::string>("id"), new_id);
  OpResult d = driver.Delete(R"({"id":")" + id + R"(","name":"vd-spot"})");
  ASSERT_EQ(d.status, GPUPROV_STATUS_OK) << d;
  EXPECT_TRUE(d.Doc()->getValue<bool>("deleted"));
  ASSERT_TRUE(WaitRunning(driver, new_id));
  d = driver.Delete(R"({"id":")" + new_id + R"(","name":"vd-spot"})");
  ASSERT_EQ(d.status, GPUPROV_STATUS_OK) << d;
  ExpectNothingLeft();
}

TEST_F(VerdaEmulatorTest, AGpuVerdaDoesNotRentIsRefusedBeforeAnyCreate) {
  Driver driver(Config());
  OpResult offers = driver.Offers(R"({"gpu":{"type":"L4","count":1},"region":""})");
  ASSERT_EQ(offers.status, GPUPROV_STATUS_OK) << offers;
  EXPECT_EQ(offers.Doc()->getArray("offers")->size(), 0u);
  EXPECT_TRUE(Contains(driver.host().All(), "Verda does not offer L4:1")) << driver.host().All();
  emulator_->ClearRequests();
  OpResult c = driver.Create(CreateRequest("vd-l4", "L4"));
  EXPECT_EQ(c.status, GPUPROV_STATUS_INVALID_INPUT) << c;
  EXPECT_TRUE(Contains(c.error, "H100")) << c.error;
  EXPECT_TRUE(emulator_->Requests().empty());
  ExpectNothingLeft();
}

TEST_F(VerdaEmulatorTest, AnUnknownLocationIsRefusedNamingTheLocations) {
  Driver driver(Config());
  OpResult o = driver.Offers(R"({"gpu":{"type":"H100","count":1},"region":"FIN-99"})");
  EXPECT_EQ(o.status, GPUPROV_STATUS_INVALID_INPUT) << o;
  EXPECT_TRUE(Contains(o.error, "no location FIN-99")) << o.error;
  EXPECT_TRUE(Contains(o.error, "FIN-01, FIN-02, FIN-03, ICE-01")) << o.error;
  emulator_->ClearRequests();
  OpResult c = driver.Create(CreateRequest("vd-loc", "H100", kScript, "FIN-99"));
  EXPECT_EQ(c.status, GPUPROV_STATUS_INVALID_INPUT) << c;
  EXPECT_EQ(emulator_->CountRequests("POST"), 0);  // no key, script or instance made
  ExpectNothingLeft();
}

TEST_F(VerdaEmulatorTest, LifecycleWithTheStartupScriptObject) {
  Driver driver(Config());
  OpResult c = driver.Create(CreateRequest("vd-life"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c << "\n" << driver.host().All();
  EXPECT_FALSE(c.Doc()->getValue<bool>("existing"));
  const std::string id = c.Vm()->getValue<std::string>("id");
  EXPECT_EQ(c.Vm()->getValue<std::string>("instance_type"), "1H100.80S.30V");
  EXPECT_EQ(c.Vm()->getValue<std::string>("gpus"), "H100:1");
  EXPECT_EQ(c.Vm()->getValue<std::string>("ssh_user"), "root");
  EXPECT_EQ(c.Vm()->getValue<std::string>("region"), "FIN-01");
  // The installer travelled as the startup script object gpuprov-<name>, text unchanged.
  EXPECT_EQ(emulator_->Count("scripts"), 1);
  HttpReply scripts = emulator_->Api("GET", "/scripts");
  EXPECT_TRUE(Contains(scripts.body, "\"gpuprov-vd-life\"")) << scripts.body;
  std::vector<Object::Ptr> rows = emulator_->Rows("vd-life");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]->getValue<std::string>("startup_script"), kScript);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);

  Object::Ptr vm = WaitRunning(driver, id);
  ASSERT_TRUE(vm);
  EXPECT_FALSE(vm->getValue<std::string>("public_ip").empty());
  EXPECT_EQ(vm->getObject("tags")->getValue<std::string>("team"), "ml");
  OpResult by_name = driver.Get(R"({"name":"vd-life"})");
  ASSERT_EQ(by_name.status, GPUPROV_STATUS_OK) << by_name;
  EXPECT_EQ(by_name.Vm()->getValue<std::string>("id"), id);
  OpResult list = driver.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK);
  EXPECT_EQ(list.Doc()->getArray("vms")->size(), 1u);

  // A re-run finds it by name: nothing new is made.
  OpResult again = driver.Create(CreateRequest("vd-life"));
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_TRUE(again.Doc()->getValue<bool>("existing"));
  EXPECT_EQ(again.Vm()->getValue<std::string>("id"), id);
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("scripts"), 1);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);

  OpResult d = driver.Delete(R"({"id":")" + id + R"(","name":"vd-life"})");
  ASSERT_EQ(d.status, GPUPROV_STATUS_OK) << d;
  EXPECT_TRUE(d.Doc()->getValue<bool>("deleted"));
  ExpectNothingLeft();
  OpResult gone = driver.Get(R"({"id":")" + id + R"("})");
  EXPECT_EQ(gone.status, GPUPROV_STATUS_NOT_FOUND) << gone;
  OpResult twice = driver.Delete(R"({"id":")" + id + R"(","name":"vd-life"})");
  ASSERT_EQ(twice.status, GPUPROV_STATUS_OK) << twice;
  EXPECT_FALSE(twice.Doc()->getValue<bool>("deleted"));
  // V7: the current operations and query parameters only (V-SPEC marks /v1/sshkeys and
  // isSpot / locationCode deprecated).
  ASSERT_EQ(driver.Check().status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Offers(R"({"gpu":{"type":"H100","count":1},"region":"FIN-01"})").status,
            GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Call(driver.vtable().list_resources, "{}").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("deprecated_calls"), 0);
  EXPECT_EQ(emulator_->CountRequests("GET /v1/sshkeys"), 0);
  EXPECT_GE(emulator_->CountRequests("GET /v1/ssh-keys"), 1);
}

// Part 2 of issue 30: every operation the driver calls through create, get, list, offers,
// check, gc and down is one the Verda OpenAPI spec describes and does not mark deprecated
// (the table in tests/emulators/verda_spec_operations.h, transcribed from it).
TEST_F(VerdaEmulatorTest, EveryCallIsAnOperationOfTheVendorSpecNotDeprecated) {
  Driver driver(Config());
  emulator_->ClearRequests();
  ASSERT_EQ(driver.Check().status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Offers(R"({"gpu":{"type":"A6000","count":1},"region":""})").status,
            GPUPROV_STATUS_OK);
  OpResult c = driver.Create(CreateRequest("vd-ops", "A6000"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  const std::string id = c.Vm()->getValue<std::string>("id");
  WaitRunning(driver, id);
  ASSERT_EQ(driver.List().status, GPUPROV_STATUS_OK);
  OpResult gc = driver.Call(driver.vtable().list_resources, "{}");
  ASSERT_EQ(gc.status, GPUPROV_STATUS_OK) << gc;
  ASSERT_EQ(driver.Call(driver.vtable().delete_resource,
                        R"({"kind":"vm","id":")" + id + R"("})")
                .status,
            GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Delete(R"({"name":"vd-ops"})").status, GPUPROV_STATUS_OK);
  std::set<std::string> used;
  for (const std::string& line : emulator_->Requests()) {
    const size_t space = line.find(' ');
    const size_t arrow = line.find(" -> ");
    const std::string method = line.substr(0, space);
    const std::string target = line.substr(space + 1, arrow - space - 1);
    const size_t q = target.find('?');
    const std::string path = target.substr(0, q);
    const emulator::VerdaSpecOperation* op = emulator::FindVerdaSpecOperation(method, path);
    ASSERT_TRUE(op) << line << " is not an operation of the Verda spec";
    EXPECT_FALSE(op->deprecated) << line << " (" << op->operation_id << ") is deprecated";
    // Each query parameter is one the operation documents, and not a deprecated alias.
    std::string query = q == std::string::npos ? "" : target.substr(q + 1);
    while (!query.empty()) {
      const std::string pair = query.substr(0, query.find('&'));
      query = pair.size() < query.size() ? query.substr(pair.size() + 1) : "";
      const std::string name = pair.substr(0, pair.find('='));
      EXPECT_TRUE(emulator::VerdaSpecListHas(op->query, name))
          << line << ": " << name << " is not a query parameter of " << op->operation_id;
      EXPECT_FALSE(emulator::VerdaSpecListHas(op->deprecated_query, name))
          << line << ": " << name << " is deprecated";
    }
    used.insert(std::string(op->operation_id));
  }
  for (const char* want :
       {"Oauth2Controller_getAccessToken", "InstancesController_getInstances",
        "InstancesController_deployInstance", "InstancesController_performActions",
        "InstancesController_getInstanceById", "InstanceTypesController_getInstanceTypes",
        "InstanceAvailabilityController_getAllAvailabilities", "ImagesController_getImageTypes",
        "SshkeysController_getKeys", "SshkeysController_addKey", "SshkeysController_deleteKey",
        "ScriptsController_getScripts", "ScriptsController_addScript",
        "ScriptsController_deleteKey"}) {
    EXPECT_TRUE(used.count(want)) << want << " was not called";
  }
  ExpectNothingLeft();
}

TEST_F(VerdaEmulatorTest, ASharedKeyStaysUntilTheLastVmAndAUsersKeyIsNeverDeleted) {
  Driver driver(Config());
  OpResult a = driver.Create(CreateRequest("vd-ka", "H100", ""));
  OpResult b = driver.Create(CreateRequest("vd-kb", "H100", ""));
  ASSERT_EQ(a.status, GPUPROV_STATUS_OK) << a;
  ASSERT_EQ(b.status, GPUPROV_STATUS_OK) << b;
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  EXPECT_EQ(emulator_->Count("scripts"), 0);  // no boot script, no script object
  WaitRunning(driver, a.Vm()->getValue<std::string>("id"));
  WaitRunning(driver, b.Vm()->getValue<std::string>("id"));
  ASSERT_EQ(driver.Delete(R"({"name":"vd-ka"})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);  // vd-kb still uses it
  ASSERT_EQ(driver.Delete(R"({"name":"vd-kb"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
  // The user registered the same key under a name of their own: reused, never deleted.
  HttpReply own = emulator_->Api("POST", "/ssh-keys",
                                 std::string(R"({"name":"my laptop","key":")") + kKeyA + "\"}");
  ASSERT_LT(own.status, 300) << own.body;
  OpResult c = driver.Create(CreateRequest("vd-kc", "H100", ""));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  WaitRunning(driver, c.Vm()->getValue<std::string>("id"));
  ASSERT_EQ(driver.Delete(R"({"name":"vd-kc"})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  EXPECT_TRUE(Contains(emulator_->Api("GET", "/ssh-keys").body, "my laptop"));
}

TEST_F(VerdaEmulatorTest, DeleteWaitsOutAProvisioningInstance) {
  Driver driver(Config());
  OpResult c = driver.Create(CreateRequest("vd-prov"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  emulator_->ClearRequests();
  OpResult d = driver.Delete(R"({"name":"vd-prov"})");
  ASSERT_EQ(d.status, GPUPROV_STATUS_OK) << d << "\n" << driver.host().All();
  EXPECT_TRUE(d.Doc()->getValue<bool>("deleted"));
  EXPECT_GE(emulator_->CountRequests("PUT /v1/instances -> 400"), 1)
      << "the emulator did not refuse the delete while provisioning";
  EXPECT_TRUE(Contains(driver.host().All(), "Can't discontinue a provisioning instance"));
  ExpectNothingLeft();
}

TEST_F(VerdaEmulatorTest, NotEnoughResourcesIsCapacityAndLeavesNothing) {
  Driver driver(Config());
  // V1: V-SPEC POST /v1/instances answers no capacity as 503 service_unavailable (the old
  // assertion, a 400 "Not enough resources", followed our notes, which the spec corrects).
  emulator_->Fault("capacity", R"(,"times":1)");
  emulator_->ClearRequests();
  OpResult c = driver.Create(CreateRequest("vd-cap"));
  EXPECT_EQ(c.status, GPUPROV_STATUS_CAPACITY) << c << "\n" << driver.host().All();
  EXPECT_TRUE(Contains(c.error, "service_unavailable")) << c.error;
  EXPECT_TRUE(Contains(c.error, "another location or GPU")) << c.error;
  EXPECT_EQ(emulator_->CountRequests("POST /v1/instances"), 1);  // never retried
  ExpectNothingLeft();
  // Out of stock per /instance-availability: refused before anything is made.
  emulator_->Settings(R"("out_of_stock":["1H100.80S.30V"])");
  emulator_->ClearRequests();
  c = driver.Create(CreateRequest("vd-cap"));
  EXPECT_EQ(c.status, GPUPROV_STATUS_CAPACITY) << c;
  EXPECT_TRUE(Contains(c.error, "no capacity now for 1H100.80S.30V")) << c.error;
  EXPECT_EQ(emulator_->CountRequests("POST /v1/instances"), 0);
  EXPECT_EQ(emulator_->CountRequests("POST /v1/scripts"), 0);
  ExpectNothingLeft();
}

TEST_F(VerdaEmulatorTest, PlacedAsNoCapacityIsDeletedAndCapacity) {
  Driver driver(Config());
  emulator_->Settings(R"("ordered_seconds":3)");
  emulator_->Fault("error_during_boot", R"(,"value":"no_capacity")");
  OpResult c = driver.Create(CreateRequest("vd-nocap"));
  EXPECT_EQ(c.status, GPUPROV_STATUS_CAPACITY) << c << "\n" << driver.host().All();
  EXPECT_TRUE(Contains(c.error, "no_capacity")) << c.error;
  ExpectNothingLeft();
}

TEST_F(VerdaEmulatorTest, QuotaAndFundsAreQuota) {
  Driver driver(Config());
  emulator_->Fault("quota", R"(,"times":1)");
  OpResult c = driver.Create(CreateRequest("vd-q"));
  EXPECT_EQ(c.status, GPUPROV_STATUS_QUOTA) << c;
  ExpectNothingLeft();
  emulator_->Fault("payment_required", R"(,"times":1)");
  c = driver.Create(CreateRequest("vd-q"));
  EXPECT_EQ(c.status, GPUPROV_STATUS_QUOTA) << c;
  EXPECT_TRUE(Contains(c.error, "insufficient_funds")) << c.error;
  ExpectNothingLeft();
}

TEST_F(VerdaEmulatorTest, A5xxAfterTheCreateHappenedFindsItByName) {
  Driver driver(Config());
  emulator_->Fault(
      "server_error",
      R"(,"status":503,"value":"after_create","method":"POST","path":"/v1/instances")");
  OpResult c = driver.Create(CreateRequest("vd-5xx"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c << "\n" << driver.host().All();
  EXPECT_TRUE(Contains(driver.host().All(), "created although Verda's answer failed"));
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("scripts"), 1);
  ASSERT_EQ(driver.Delete(R"({"name":"vd-5xx"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(VerdaEmulatorTest, ThrottlingAnd503BurstsAreRetried) {
  Driver driver(Config());
  emulator_->Fault("throttle", R"(,"times":3,"retry_after":1)");
  emulator_->Fault("server_error", R"(,"status":503,"times":2,"method":"GET")");
  OpResult c = driver.Create(CreateRequest("vd-thr"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_EQ(emulator_->Count("instances"), 1);
  ASSERT_EQ(driver.Delete(R"({"name":"vd-thr"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(VerdaEmulatorTest, ASameNamedInstanceGpuprovDidNotMakeIsNeverAdopted) {
  emulator_->Settings(R"("seed_instances":[{"hostname":"vd-foreign","description":"my own box"}])");
  Driver driver(Config());
  OpResult c = driver.Create(CreateRequest("vd-foreign"));
  EXPECT_EQ(c.status, GPUPROV_STATUS_INVALID_INPUT) << c;
  EXPECT_TRUE(Contains(c.error, "choose another VM name")) << c.error;
  OpResult d = driver.Delete(R"({"name":"vd-foreign"})");
  ASSERT_EQ(d.status, GPUPROV_STATUS_OK) << d;
  EXPECT_FALSE(d.Doc()->getValue<bool>("deleted"));
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("scripts"), 0);
}

TEST_F(VerdaEmulatorTest, AnEarlierRunsInstanceIsFoundByItsDescription) {
  // Hostnames are not unique; an instance an earlier gpuprov run made (the emulator's seed
  // keeps no tags, so only the description says it) and a discontinued one of that name.
  emulator_->Settings(
      R"J("seed_instances":[{"hostname":"vd-old","description":"gpuprov-managed VM vd-old (gpuprov-name=vd-old)"},)J"
      R"J({"hostname":"vd-old","description":"gpuprov-managed VM vd-old (gpuprov-name=vd-old)","status":"discontinued"}])J");
  Driver driver(Config());
  OpResult c = driver.Create(CreateRequest("vd-old"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_TRUE(c.Doc()->getValue<bool>("existing"));
  EXPECT_NE(c.Vm()->getValue<std::string>("state"), "terminated");
  EXPECT_EQ(emulator_->Count("instances"), 2);  // the two seeded, nothing new
  EXPECT_EQ(emulator_->Count("scripts"), 0);
}

TEST_F(VerdaEmulatorTest, AScriptAKilledRunLeftIsReplacedAndDownRemovesItWithoutAnInstance) {
  HttpReply left = emulator_->Api(
      "POST", "/scripts", R"({"name":"gpuprov-vd-stale","script":"#!/bin/bash\necho old\n"})");
  ASSERT_LT(left.status, 300) << left.body;
  Driver driver(Config());
  // down of a VM whose create died before the instance: the script goes.
  OpResult d = driver.Delete(R"({"name":"vd-stale"})");
  ASSERT_EQ(d.status, GPUPROV_STATUS_OK) << d;
  EXPECT_FALSE(d.Doc()->getValue<bool>("deleted"));
  EXPECT_EQ(emulator_->Count("scripts"), 0);
  // A create after such a run carries the new text, in one script.
  left = emulator_->Api("POST", "/scripts",
                        R"({"name":"gpuprov-vd-stale","script":"#!/bin/bash\necho old\n"})");
  OpResult c = driver.Create(CreateRequest("vd-stale"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_EQ(emulator_->Count("scripts"), 1);
  EXPECT_EQ(emulator_->Rows("vd-stale").at(0)->getValue<std::string>("startup_script"), kScript);
  ASSERT_EQ(driver.Delete(R"({"name":"vd-stale"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(VerdaEmulatorTest, AScriptOverTheLimitIsRefusedBeforeAnyCall) {
  Driver driver(Config(R"(,"startup_script_limit":2048)"));
  emulator_->ClearRequests();
  OpResult c =
      driver.Create(CreateRequest("vd-big", "H100", "#!/bin/bash\n" + std::string(3000, '#')));
  EXPECT_EQ(c.status, GPUPROV_STATUS_INVALID_INPUT) << c;
  EXPECT_TRUE(Contains(c.error, "startup script")) << c.error;
  EXPECT_TRUE(emulator_->Requests().empty());
}

// V2: GET /v1/scripts is paged (V-SPEC: pageSize default 10, newest first): a VM's script is
// found by name however many scripts the project has, by down and by gc.
TEST_F(VerdaEmulatorTest, AnOldVmsScriptIsFoundPastTheFirstPageByDownAndGc) {
  emulator_->Settings(R"("script_quota":200)");
  Driver driver(Config());
  OpResult c = driver.Create(CreateRequest("vd-paged"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  // Newer scripts push gpuprov-vd-paged off the first pages: other tools' and other VMs'.
  for (int i = 0; i < 120; ++i) {
    const std::string name = (i % 4 ? "gpuprov-other-" : "user-script-") + std::to_string(i);
    HttpReply r = emulator_->Api("POST", "/scripts",
                                 R"({"name":")" + name + R"(","script":"#!/bin/sh\ntrue\n"})");
    ASSERT_EQ(r.status, 201) << r.body;
  }
  // gc sees every gpuprov script (90 others and this VM's), over two pages of 100.
  OpResult gc = driver.Call(driver.vtable().list_resources, "{}");
  ASSERT_EQ(gc.status, GPUPROV_STATUS_OK) << gc;
  int scripts = 0;
  bool mine = false;
  Array::Ptr resources = gc.Doc()->getArray("resources");
  for (size_t i = 0; i < resources->size(); ++i) {
    Object::Ptr r = resources->getObject(static_cast<unsigned>(i));
    if (r->getValue<std::string>("kind") != "script") continue;
    ++scripts;
    mine = mine || r->getValue<std::string>("name") == "gpuprov-vd-paged";
  }
  EXPECT_EQ(scripts, 91) << gc.json;
  EXPECT_TRUE(mine) << gc.json;
  ASSERT_EQ(driver.Delete(R"({"name":"vd-paged"})").status, GPUPROV_STATUS_OK);
  HttpReply left = emulator_->Api("GET", "/scripts?name=gpuprov-vd-paged");
  EXPECT_EQ(left.body, "[]") << "down left the VM's startup script behind";
  EXPECT_EQ(emulator_->Count("scripts"), 120);
}

// V2: the project's startup-script quota (V-SPEC: 100 by default) refuses the create as QUOTA,
// leaving nothing.
TEST_F(VerdaEmulatorTest, TheScriptQuotaIsQuotaAndLeavesNothing) {
  emulator_->Settings(R"("script_quota":1)");
  HttpReply r = emulator_->Api("POST", "/scripts", R"({"name":"mine","script":"#!/bin/sh\n"})");
  ASSERT_EQ(r.status, 201) << r.body;
  Driver driver(Config());
  OpResult c = driver.Create(CreateRequest("vd-quota"));
  EXPECT_EQ(c.status, GPUPROV_STATUS_QUOTA) << c;
  EXPECT_TRUE(Contains(c.error, "quota")) << c.error;
  EXPECT_EQ(emulator_->Count("instances"), 0);
  EXPECT_EQ(emulator_->Count("scripts"), 1);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 0);
}

// V3: at most 10 tags (gpuprov's 2 and 8 of the user's), values up to 127 characters, checked
// before anything is made, naming the tag.
TEST_F(VerdaEmulatorTest, TagsBeyondVerdasLimitsAreRefusedBeforeAnythingIsMade) {
  Driver driver(Config());
  auto with_tags = [](const std::string& name, int count, size_t value_length) {
    Object::Ptr req = ParseJson(CreateRequest(name));
    Object::Ptr tags = req->getObject("tags");
    tags->remove("team");
    for (int i = 0; i < count; ++i) {
      tags->set("tag" + std::to_string(i), std::string(i == 0 ? value_length : 2, 'v'));
    }
    return Stringify(req);
  };
  emulator_->ClearRequests();
  OpResult many = driver.Create(with_tags("vd-tags", 9, 2));
  EXPECT_EQ(many.status, GPUPROV_STATUS_INVALID_INPUT) << many;
  EXPECT_TRUE(Contains(many.error, "tag8")) << many.error;
  EXPECT_TRUE(Contains(many.error, "10 tags")) << many.error;
  OpResult longer = driver.Create(with_tags("vd-tags", 1, 128));
  EXPECT_EQ(longer.status, GPUPROV_STATUS_INVALID_INPUT) << longer;
  EXPECT_TRUE(Contains(longer.error, "tag0")) << longer.error;
  EXPECT_TRUE(Contains(longer.error, "128 characters")) << longer.error;
  EXPECT_TRUE(emulator_->Requests().empty());
  // At the limits: accepted, every tag on the instance.
  OpResult ok = driver.Create(with_tags("vd-tags", 8, 127));
  ASSERT_EQ(ok.status, GPUPROV_STATUS_OK) << ok;
  Object::Ptr vm = WaitRunning(driver, ok.Vm()->getValue<std::string>("id"));
  ASSERT_TRUE(vm);
  EXPECT_EQ(vm->getObject("tags")->size(), 10u);
  EXPECT_EQ(vm->getObject("tags")->getValue<std::string>("tag0"), std::string(127, 'v'));
  ASSERT_EQ(driver.Delete(R"({"name":"vd-tags"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

// A cluster (ABI 1.5): Verda has private networks (V-GO-PN: verda-cloud/verdacloud-sdk-go
// pkg/verda/private_networks.go) but no firewall API (README.md "Clusters"). Each node is an
// instance tagged gpuprov-cluster and gpuprov-role on the cluster's network gpuprov-<cluster>
// (made by the first node), with its address there as private_ip; open_peer_ports checks its
// request and calls nothing (the node firewall admits the peers), however often and whichever
// peers it lists; gc sees each node's cluster and role and the network with the nodes' names;
// the network goes with the last node.
TEST_F(VerdaEmulatorTest, AClusterNodeIsATaggedInstanceOnTheClustersPrivateNetwork) {
  Driver driver(Config());
  auto node = [](const std::string& name, const std::string& role,
                 const std::string& cluster = "vd-train") {
    return drivers::testing::WithCluster(CreateRequest(name), cluster, role);
  };
  OpResult bad_name = driver.Create(node("vd-bad", "server", "Vd_Train"));
  EXPECT_EQ(bad_name.status, GPUPROV_STATUS_INVALID_INPUT) << bad_name;
  EXPECT_TRUE(Contains(bad_name.error, "cluster.name")) << bad_name.error;
  EXPECT_TRUE(emulator_->Requests().empty());  // refused before any call

  OpResult server = driver.Create(node("vd-train", "server"));
  ASSERT_EQ(server.status, GPUPROV_STATUS_OK) << server << "\n" << driver.host().All();
  EXPECT_TRUE(Contains(driver.host().All(), "creating private network gpuprov-vd-train"));
  OpResult agent = driver.Create(node("vd-train-agent-1", "agent"));
  ASSERT_EQ(agent.status, GPUPROV_STATUS_OK) << agent;
  EXPECT_EQ(emulator_->Count("private_networks"), 1);  // the agent joined the server's
  Object::Ptr s = WaitRunning(driver, server.Vm()->getValue<std::string>("id"));
  Object::Ptr a = WaitRunning(driver, agent.Vm()->getValue<std::string>("id"));
  ASSERT_TRUE(s && a);
  EXPECT_EQ(s->getValue<std::string>("private_ip").rfind("10.", 0), 0u) << Stringify(s);
  EXPECT_EQ(a->getValue<std::string>("private_ip").rfind("10.", 0), 0u) << Stringify(a);
  EXPECT_FALSE(s->getValue<std::string>("public_ip").empty());
  EXPECT_EQ(s->getValue<std::string>("cluster"), "vd-train");
  EXPECT_EQ(s->getValue<std::string>("role"), "server");
  EXPECT_EQ(a->getValue<std::string>("cluster"), "vd-train");
  EXPECT_EQ(a->getValue<std::string>("role"), "agent");
  // On Verda: the tags (V-SPEC TagDto) and the network (V-GO-PN Instance.PrivateNetworkID).
  HttpReply nets = emulator_->Api("GET", "/private-networks");
  Array::Ptr net_list = Poco::JSON::Parser().parse(nets.body).extract<Array::Ptr>();
  ASSERT_TRUE(net_list && net_list->size() == 1) << nets.body;
  const std::string net = net_list->getObject(0)->getValue<std::string>("id");
  EXPECT_EQ(net_list->getObject(0)->getValue<std::string>("name"), "gpuprov-vd-train");
  EXPECT_EQ(net_list->getObject(0)->getValue<std::string>("mode"), "auto");
  HttpReply got = emulator_->Api("GET", "/instances/" + a->getValue<std::string>("id"));
  EXPECT_TRUE(Contains(got.body, R"("key":"gpuprov-cluster","value":"vd-train")")) << got.body;
  EXPECT_TRUE(Contains(got.body, R"("key":"gpuprov-role","value":"agent")")) << got.body;
  EXPECT_EQ(got.Doc()->getValue<std::string>("private_network_id"), net);
  // A plain VM is a classic instance: no network, cluster or role.
  OpResult plain = driver.Create(CreateRequest("vd-plain"));
  ASSERT_EQ(plain.status, GPUPROV_STATUS_OK) << plain;
  Object::Ptr p = WaitRunning(driver, plain.Vm()->getValue<std::string>("id"));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->getValue<std::string>("private_ip"), "");
  EXPECT_EQ(p->getValue<std::string>("cluster"), "");
  EXPECT_EQ(p->getValue<std::string>("role"), "");

  auto peers = [&](bool with_agent) {
    return drivers::testing::PeerPortsRequestFor(
        "vd-train", with_agent ? std::vector<Object::Ptr>{s, a} : std::vector<Object::Ptr>{s});
  };
  emulator_->ClearRequests();
  for (bool with_agent : {true, true, false}) {  // add, again (idempotent), remove the agent
    OpResult pp = driver.OpenPeerPorts(peers(with_agent));
    EXPECT_EQ(pp.status, GPUPROV_STATUS_OK) << pp;
    EXPECT_EQ(pp.json, "{}");
  }
  EXPECT_TRUE(emulator_->Requests().empty());  // nothing to set on the cloud
  OpResult bad = driver.OpenPeerPorts(R"({"cluster":"vd-train","peer_ports":[],"peers":[]})");
  EXPECT_EQ(bad.status, GPUPROV_STATUS_INVALID_INPUT) << bad;

  // gc: each node names its cluster and role; the network names the cluster and its nodes.
  OpResult res = driver.Call(driver.vtable().list_resources, "{}");
  ASSERT_EQ(res.status, GPUPROV_STATUS_OK) << res;
  Array::Ptr rs = res.Doc()->getArray("resources");
  int nodes = 0, networks = 0;
  for (size_t i = 0; i < rs->size(); ++i) {
    Object::Ptr r = rs->getObject(static_cast<unsigned>(i));
    const std::string kind = r->getValue<std::string>("kind");
    EXPECT_NE(kind, "cluster_firewall");
    if (kind == "cluster_network") {
      ++networks;
      EXPECT_EQ(r->getValue<std::string>("id"), net);
      EXPECT_EQ(r->getValue<std::string>("name"), "gpuprov-vd-train");
      EXPECT_EQ(r->getValue<std::string>("cluster"), "vd-train");
      std::set<std::string> names;
      for (const auto& v : *r->getArray("vm_names")) names.insert(v.toString());
      EXPECT_EQ(names, (std::set<std::string>{"vd-train", "vd-train-agent-1"}));
    }
    if (kind != "vm" || r->getValue<std::string>("name") == "vd-plain") continue;
    ++nodes;
    EXPECT_EQ(r->getValue<std::string>("cluster"), "vd-train");
    EXPECT_EQ(r->getValue<std::string>("role"),
              r->getValue<std::string>("name") == "vd-train" ? "server" : "agent");
  }
  EXPECT_EQ(nodes, 2);
  EXPECT_EQ(networks, 1);

  // The network stays while a node is on it, and goes with the last (once Verda let the
  // deleted node go).
  ASSERT_EQ(driver.Delete(R"({"name":"vd-train-agent-1"})").status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Delete(R"({"name":"vd-plain"})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("private_networks"), 1);
  OpResult last = driver.Delete(R"({"name":"vd-train"})");
  ASSERT_EQ(last.status, GPUPROV_STATUS_OK) << last;
  EXPECT_TRUE(Contains(driver.host().All(), "deleting private network gpuprov-vd-train"));
  ExpectNothingLeft();
}

// A server whose create fails (no capacity) leaves no network behind; a network left over
// (a killed run) is gc's: listed with no VM names, deleted by delete_resource, which refuses a
// network not named gpuprov-.
TEST_F(VerdaEmulatorTest, ALeftoverClusterNetworkIsGcsAndAFailedCreateLeavesNone) {
  Driver driver(Config());
  emulator_->Fault("capacity", R"(,"times":1)");
  OpResult c = driver.Create(drivers::testing::WithCluster(CreateRequest("vd-cap"), "vd-cap", "server"));
  EXPECT_EQ(c.status, GPUPROV_STATUS_CAPACITY) << c;
  EXPECT_EQ(emulator_->Count("private_networks"), 0);

  HttpReply left = emulator_->Api("POST", "/private-networks", R"({"name":"gpuprov-vd-left"})");
  ASSERT_EQ(left.status, 201) << left.body;
  HttpReply users = emulator_->Api("POST", "/private-networks", R"({"name":"users-net"})");
  ASSERT_EQ(users.status, 201) << users.body;
  OpResult res = driver.Call(driver.vtable().list_resources, "{}");
  ASSERT_EQ(res.status, GPUPROV_STATUS_OK) << res;
  Array::Ptr rs = res.Doc()->getArray("resources");
  ASSERT_EQ(rs->size(), 1u) << res.json;  // not the user's network
  Object::Ptr r = rs->getObject(0);
  EXPECT_EQ(r->getValue<std::string>("kind"), "cluster_network");
  EXPECT_EQ(r->getValue<std::string>("cluster"), "vd-left");
  EXPECT_EQ(r->getArray("vm_names")->size(), 0u);
  const std::string del = R"({"kind":"cluster_network","id":")" +
                          left.Doc()->getValue<std::string>("id") + "\"}";
  OpResult d = driver.Call(driver.vtable().delete_resource, del);
  ASSERT_EQ(d.status, GPUPROV_STATUS_OK) << d;
  EXPECT_TRUE(d.Doc()->getValue<bool>("deleted"));
  OpResult again = driver.Call(driver.vtable().delete_resource, del);
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_FALSE(again.Doc()->getValue<bool>("deleted"));
  OpResult refused = driver.Call(driver.vtable().delete_resource,
                                 R"({"kind":"cluster_network","id":")" +
                                     users.Doc()->getValue<std::string>("id") + "\"}");
  EXPECT_EQ(refused.status, GPUPROV_STATUS_INVALID_INPUT) << refused;
  EXPECT_EQ(emulator_->Count("private_networks"), 1);  // the user's
}

// A cluster node's two tags count against Verda's 10: six user tags fit, seven do not.
TEST_F(VerdaEmulatorTest, AClusterNodeLeavesSixTagsToTheUser) {
  Driver driver(Config());
  auto node = [](int user_tags) {
    Object::Ptr req = ParseJson(CreateRequest("vd-tagged"));
    Object::Ptr tags = req->getObject("tags");
    tags->remove("team");
    for (int i = 0; i < user_tags; ++i) tags->set("tag" + std::to_string(i), "v");
    return drivers::testing::WithCluster(Stringify(req), "vd-tagged", "server");
  };
  emulator_->ClearRequests();
  OpResult many = driver.Create(node(7));
  EXPECT_EQ(many.status, GPUPROV_STATUS_INVALID_INPUT) << many;
  EXPECT_TRUE(Contains(many.error, "gpuprov uses 4")) << many.error;
  EXPECT_TRUE(emulator_->Requests().empty());
  OpResult ok = driver.Create(node(6));
  ASSERT_EQ(ok.status, GPUPROV_STATUS_OK) << ok;
  ASSERT_EQ(driver.Delete(R"({"name":"vd-tagged"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

// V5: a type whose supported_os lacks gpuprov's default image (A6000, V100) gets one it lists.
TEST_F(VerdaEmulatorTest, AnA6000GetsAnImageItsTypeSupports) {
  Driver driver(Config());
  OpResult c = driver.Create(CreateRequest("vd-a6000", "A6000"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c << "\n" << driver.host().All();
  EXPECT_EQ(c.Vm()->getValue<std::string>("instance_type"), "1A6000.10V");
  EXPECT_EQ(c.Vm()->getValue<std::string>("image"), "ubuntu-22.04-cuda-12.0-docker");
  EXPECT_EQ(emulator_->CountRequests("GET /v1/images"), 1);
  ASSERT_EQ(driver.Delete(R"({"name":"vd-a6000"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
  // The default image where the type supports it: no image list asked.
  emulator_->ClearRequests();
  c = driver.Create(CreateRequest("vd-h100"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_EQ(c.Vm()->getValue<std::string>("image"), "ubuntu-24.04-cuda-12.8-open-docker");
  EXPECT_EQ(emulator_->CountRequests("GET /v1/images"), 0);
  ASSERT_EQ(driver.Delete(R"({"name":"vd-h100"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

// V6: instance types come from the live list: a type the built-in table lacks is offered and
// created; a count no live type has is refused naming the counts there are.
TEST_F(VerdaEmulatorTest, ATypeOnlyTheLiveListHasIsOfferedAndCreated) {
  Driver driver(Config());
  OpResult o = driver.Offers(R"({"gpu":{"type":"B300","count":8},"region":""})");
  ASSERT_EQ(o.status, GPUPROV_STATUS_OK) << o;
  ASSERT_EQ(o.Doc()->getArray("offers")->size(), 1u) << o.json << driver.host().All();
  EXPECT_EQ(o.Doc()->getArray("offers")->getObject(0)->getValue<std::string>("instance_type"),
            "8B300.640S.176V");
  Object::Ptr req = ParseJson(CreateRequest("vd-b300", "B300", kScript, "FIN-02"));
  req->getObject("gpu")->set("count", 8);
  OpResult c = driver.Create(Stringify(req));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c << "\n" << driver.host().All();
  EXPECT_EQ(c.Vm()->getValue<std::string>("instance_type"), "8B300.640S.176V");
  EXPECT_EQ(c.Vm()->getValue<std::string>("gpus"), "B300:8");
  ASSERT_EQ(driver.Delete(R"({"name":"vd-b300"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
  req->getObject("gpu")->set("count", 3);
  req->set("name", "vd-h100x3");
  req->getObject("gpu")->set("type", "H100");
  emulator_->ClearRequests();
  c = driver.Create(Stringify(req));
  EXPECT_EQ(c.status, GPUPROV_STATUS_INVALID_INPUT) << c;
  EXPECT_TRUE(Contains(c.error, "H100 with 1, 2, 4, 8 GPUs")) << c.error;
  EXPECT_EQ(emulator_->CountRequests("POST"), 0);
}

}  // namespace
}  // namespace gpuprov::verda
