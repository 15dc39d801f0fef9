// SPDX-License-Identifier: Apache-2.0
//
// Loads the BUILT driver .so with dlopen, as the host does, and drives it through the C
// vtable against the Massed Compute emulator (tests/emulators, `gpuprov-emulator --backend
// memory`) started as a child process. Talks only to 127.0.0.1.
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "driver_test_util.h"
#include "gpuprov/driver_abi.h"

namespace gpuprov::massedcompute {
namespace {

using drivers::testing::Contains;
using drivers::testing::HttpReply;
using drivers::testing::LoopbackHttp;
using drivers::testing::OpResult;
using drivers::testing::ParseJson;
using drivers::testing::ScopedEnv;
using drivers::testing::SharedEmulatorTest;
using drivers::testing::Stringify;
using Poco::JSON::Array;
using Poco::JSON::Object;

constexpr const char* kToken = "mc_secret_gpuprov_driver_test_token_0123456789";
constexpr const char* kKeyA =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF test@gpuprov";

constexpr char kDriverPath[] = GPUPROV_MASSEDCOMPUTE_DRIVER_PATH;
using Driver = drivers::testing::DriverAt<kDriverPath>;

// --- no emulator needed -----------------------------------------------------

TEST(MassedComputeDescriptor, SshRouteTunnelAccessAndItsConfigKeys) {
  const gpuprov_type_driver_descriptor* d = Driver::Descriptor();
  ASSERT_NE(d, nullptr);
  EXPECT_STREQ(d->name, "massedcompute");
  // How its VM learns its public address: REFERENCE.md section 6.
  EXPECT_STREQ(d->node_address, GPUPROV_NODE_ADDRESS_INTERFACE);
  // No boot script capability (SSH route) and no open_ports (tunnel access); clusters (the
  // node firewall admits the peers) and spot products.
  EXPECT_EQ(d->capabilities,
            static_cast<uint64_t>(GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_HOSTS_KUBERNETES |
                                  GPUPROV_CAP_CLUSTER | GPUPROV_CAP_SPOT));
  drivers::testing::ExpectEveryOperation(*d->vtable, /*open_ports=*/false);
  EXPECT_NE(d->vtable->open_peer_ports, nullptr);
  // The kit's standard keys first (retry, a table; delete_wait_seconds), then its own.
  ASSERT_EQ(d->config_key_count, 5u);
  EXPECT_STREQ(d->config_keys[0]->name, "retry");
  EXPECT_EQ(d->config_keys[0]->type, GPUPROV_CONFIG_TABLE);
  EXPECT_EQ(d->config_keys[0]->member_count, 6u);
  EXPECT_STREQ(d->config_keys[1]->name, "delete_wait_seconds");
  EXPECT_STREQ(d->config_keys[2]->name, "region");
  EXPECT_STREQ(d->config_keys[3]->name, "image");
  EXPECT_STREQ(d->config_keys[4]->name, "ssh_user");
  // A table key needs a 1.3 host; the SDK requires it by itself.
  EXPECT_EQ(d->abi_minor_required, 3);
}

TEST(MassedComputeDescriptor, RefusesPlainHttpToANonLoopbackEndpoint) {
  Driver driver(R"({"endpoint":"http://vm.massedcompute.com/api/v1","config":{}})");
  EXPECT_EQ(driver.init_status(), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_TRUE(Contains(driver.init_error(), "loopback")) << driver.init_error();
}

TEST(MassedComputeDescriptor, NoTokenIsAuthNamingBothVariablesBeforeAnyCall) {
  ScopedEnv a("MASSED_API_KEY", nullptr);
  ScopedEnv b("MASSED_COMPUTE_API_TOKEN", nullptr);
  Driver driver(R"({"endpoint":"","config":{}})");
  ASSERT_EQ(driver.init_status(), GPUPROV_STATUS_OK) << driver.init_error();
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "MASSED_API_KEY")) << r.error;
  EXPECT_TRUE(Contains(r.error, "MASSED_COMPUTE_API_TOKEN")) << r.error;
}

// --- the emulator -----------------------------------------------------------

class Emulator : public drivers::testing::OneCloudEmulator {
 public:
  Emulator() : OneCloudEmulator("massedcompute") {}
  bool Start(std::string* problem) {
    return StartMemory({"--boot-seconds", "0.5"}, {{"MASSED_API_KEY", kToken}}, problem);
  }
  void Fault(const std::string& fault, const std::string& extra = "") {
    EmulatorProcess::Fault(R"({"cloud":"massedcompute","fault":")" + fault + "\"" + extra + "}");
  }
  void Settings(const std::string& members) {
    HttpReply r = Control("POST", "/settings", R"({"cloud":"massedcompute",)" + members + "}");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  void Preempt(const std::string& instance_name) {
    HttpReply r = Control("POST", "/preempt",
                          R"({"cloud":"massedcompute","name":")" + instance_name + R"("})");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  HttpReply Api(const std::string& method, const std::string& path, const std::string& body = "") {
    return LoopbackHttp(method, url() + path, body,
                        {{"Authorization", std::string("Bearer ") + kToken}});
  }
};

class MassedComputeEmulatorTest : public SharedEmulatorTest<Emulator> {
 protected:
  void SetUp() override {
    SharedEmulatorTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    emulator_->Reset();
    token_ = std::make_unique<ScopedEnv>("MASSED_API_KEY", kToken);
    other_ = std::make_unique<ScopedEnv>("MASSED_COMPUTE_API_TOKEN", nullptr);
  }
  void TearDown() override {
    other_.reset();
    token_.reset();
  }

  // Settings with compressed retries, for the emulator's endpoint.
  static std::string Config(const std::string& extra = "") {
    return R"({"endpoint":")" + emulator_->url() +
           R"(","config":{"retry":{"max_attempts":5,"base_delay_ms":5,"max_delay_ms":50,)"
           R"("max_retry_after_ms":200,"total_budget_ms":20000,"attempt_timeout_ms":10000},)"
           R"("delete_wait_seconds":30)" +
           extra + "}}";
  }

  static std::string CreateRequest(const std::string& name, const std::string& gpu = "RTX-A6000",
                                   int count = 1, const std::string& region = "") {
    Object::Ptr req = new Object();
    req->set("name", name);
    req->set("region", region);
    req->set("instance_type", "");
    Object::Ptr g = new Object();
    g->set("type", gpu);
    g->set("count", count);
    req->set("gpu", g);
    req->set("image", "");
    req->set("ssh_public_key", kKeyA);
    req->set("user_data", "");
    Object::Ptr tags = new Object();
    tags->set("gpuprov", "1");
    tags->set("gpuprov-name", name);
    req->set("tags", tags);
    Array::Ptr p = new Array();
    p->add(22);
    req->set("open_ports", p);
    req->set("kubernetes", true);
    return Stringify(req);
  }

  static Object::Ptr WaitRunning(Driver& driver, const std::string& id) {
    return drivers::testing::WaitRunning(driver, id, std::chrono::seconds(20), "instance");
  }

  static long long Launches() {
    long long n = 0;
    for (const auto& r : emulator_->Requests()) n += Contains(r, "POST /api/v1/instance/launch");
    return n;
  }

  // Nothing of gpuprov's left: no instance (API or behind it), no SSH key.
  static void ExpectNothingLeft() {
    for (int i = 0; i < 50 && emulator_->Count("instances") != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(emulator_->Count("instances"), 0);
    EXPECT_EQ(emulator_->Count("backend_instances"), 0);
    EXPECT_EQ(emulator_->Count("ssh_keys"), 0);
  }

  std::unique_ptr<ScopedEnv> token_;
  std::unique_ptr<ScopedEnv> other_;
};

TEST_F(MassedComputeEmulatorTest, CheckValidatesTheTokenAndNamesWhereItCameFrom) {
  Driver driver(Config());
  OpResult r = driver.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(r.Doc()->getValue<std::string>("key_from"), "$MASSED_API_KEY");
  EXPECT_TRUE(Contains(r.Doc()->getValue<std::string>("account"), "Valid Token"));
  EXPECT_FALSE(Contains(r.json, kToken));
  // The other variable the reference names works too.
  ScopedEnv none("MASSED_API_KEY", nullptr);
  ScopedEnv other("MASSED_COMPUTE_API_TOKEN", kToken);
  Driver second(Config());
  OpResult s = second.Check();
  ASSERT_EQ(s.status, GPUPROV_STATUS_OK) << s;
  EXPECT_EQ(s.Doc()->getValue<std::string>("key_from"), "$MASSED_COMPUTE_API_TOKEN");
  // A wrong token: AUTH, naming the variable and never the token.
  ScopedEnv wrong("MASSED_COMPUTE_API_TOKEN", "mc_wrong_token_value");
  Driver third(Config());
  OpResult w = third.Check();
  EXPECT_EQ(w.status, GPUPROV_STATUS_AUTH) << w;
  EXPECT_TRUE(Contains(w.error, "$MASSED_COMPUTE_API_TOKEN")) << w.error;
  EXPECT_FALSE(Contains(w.error, "mc_wrong_token_value")) << w.error;
}

TEST_F(MassedComputeEmulatorTest, OffersComeFromTheInventoryWithCapacityPerRegion) {
  Driver driver(Config());
  OpResult r = driver.Offers(R"({"gpu":{"type":"RTX-A6000","count":1},"region":""})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  Array::Ptr offers = r.Doc()->getArray("offers");
  ASSERT_EQ(offers->size(), 2u) << r.json;  // gpu_1x_a6000 in two regions; spot left out
  for (size_t i = 0; i < offers->size(); ++i) {
    Object::Ptr o = offers->getObject(static_cast<unsigned>(i));
    EXPECT_EQ(o->getValue<std::string>("instance_type"), "gpu_1x_a6000");
    EXPECT_EQ(o->getValue<std::string>("gpu_type"), "RTX-A6000");
    EXPECT_DOUBLE_EQ(o->getValue<double>("price_per_hour"), 0.57);
  }
  OpResult region = driver.Offers(R"({"gpu":{"type":"A6000","count":1},"region":"us-central-3"})");
  ASSERT_EQ(region.Doc()->getArray("offers")->size(), 1u) << region.json;
  OpResult eight = driver.Offers(R"({"gpu":{"type":"H100","count":8},"region":""})");
  ASSERT_EQ(eight.Doc()->getArray("offers")->size(), 1u) << eight.json;
  EXPECT_EQ(eight.Doc()->getArray("offers")->getObject(0)->getValue<std::string>("instance_type"),
            "gpu_8x_h100_sxm5");

  OpResult l4 = driver.Offers(R"({"gpu":{"type":"L4","count":1},"region":""})");
  ASSERT_EQ(l4.status, GPUPROV_STATUS_OK) << l4;
  EXPECT_EQ(l4.Doc()->getArray("offers")->size(), 0u);
  EXPECT_TRUE(Contains(driver.host().All(), "Massed Compute does not offer L4:1"))
      << driver.host().All();
  EXPECT_TRUE(Contains(driver.host().All(), "RTX-A6000:1 (gpu_1x_a6000)")) << driver.host().All();

  emulator_->Settings(R"("capacity":{"gpu_1x_h100":0})");
  OpResult sold = driver.Offers(R"({"gpu":{"type":"H100","count":1},"region":""})");
  EXPECT_EQ(sold.Doc()->getArray("offers")->size(), 0u);
  EXPECT_TRUE(Contains(driver.host().All(), "no capacity now for H100:1")) << driver.host().All();
}

// Spot products (README.md, "Spot instances"): gpu_1x_a6000_spot (us-central-2 only) is sold
// on gpu_1x_a6000's row as its spot price, where it has capacity; never as a row of its own.
TEST_F(MassedComputeEmulatorTest, TheSpotProductsPriceIsTheOnDemandRowsSpotPriceWhereItHasCapacity) {
  Driver driver(Config());
  OpResult r = driver.Offers(R"({"gpu":{"type":"RTX-A6000","count":1},"region":""})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  Array::Ptr offers = r.Doc()->getArray("offers");
  ASSERT_EQ(offers->size(), 2u) << r.json;
  for (size_t i = 0; i < offers->size(); ++i) {
    Object::Ptr o = offers->getObject(static_cast<unsigned>(i));
    EXPECT_EQ(o->getValue<std::string>("instance_type"), "gpu_1x_a6000");
    if (o->getValue<std::string>("region") == "us-central-2") {
      EXPECT_DOUBLE_EQ(o->getValue<double>("spot_price_per_hour"), 0.39) << r.json;
    } else {
      EXPECT_FALSE(o->has("spot_price_per_hour")) << r.json;
    }
  }
  // No spot product of these GPUs has capacity: no spot price.
  emulator_->Settings(R"("capacity":{"gpu_1x_a6000_spot":0})");
  OpResult sold = driver.Offers(R"({"gpu":{"type":"RTX-A6000","count":1},"region":""})");
  ASSERT_EQ(sold.status, GPUPROV_STATUS_OK) << sold;
  EXPECT_FALSE(Contains(sold.json, "spot_price_per_hour")) << sold.json;
}

// A spot create launches the spot twin of the offer's product; Massed Compute documents no
// preemption status, so a spot instance it ended (POST /preempt: listed as "terminated") is
// "preempted" with its status as the reason, in get and list, until down terminates it.
TEST_F(MassedComputeEmulatorTest, ASpotInstanceTakenBackIsPreemptedUntilItIsTerminated) {
  Driver driver(Config());
  Object::Ptr req = ParseJson(CreateRequest("mc-spot", "RTX-A6000", 1, "us-central-2"));
  req->set("instance_type", "gpu_1x_a6000");  // the row the host took
  req->set("spot", true);
  OpResult created = driver.Create(Stringify(req));
  ASSERT_EQ(created.status, GPUPROV_STATUS_OK) << created << "\n" << driver.host().All();
  EXPECT_EQ(created.Vm()->getValue<std::string>("instance_type"), "gpu_1x_a6000_spot");
  EXPECT_TRUE(created.Vm()->getValue<bool>("spot"));
  const std::string id = created.Vm()->getValue<std::string>("id");
  Object::Ptr running = WaitRunning(driver, id);
  ASSERT_TRUE(running);
  EXPECT_TRUE(running->getValue<bool>("spot"));

  emulator_->Preempt("gpuprov-mc-spot");
  const std::string reason =
      "Massed Compute ended the spot instance (status terminated, product gpu_1x_a6000_spot)";
  drivers::testing::ExpectPreempted(driver, R"({"id":")" + id + R"(","name":"mc-spot"})",
                                    reason);
  drivers::testing::ExpectPreempted(driver, R"({"name":"mc-spot"})", reason);

  // The host's replacement: delete (the instance and, with no gpuprov VM left, the key), then a
  // new one of the same name.
  OpResult del = driver.Delete(R"({"id":")" + id + R"(","name":"mc-spot"})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del << "\n" << driver.host().All();
  EXPECT_TRUE(del.Doc()->getValue<bool>("deleted"));
  OpResult again = driver.Create(Stringify(req));
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_FALSE(again.Doc()->getValue<bool>("existing"));
  EXPECT_NE(again.Vm()->getValue<std::string>("id"), id);
  ASSERT_EQ(driver.Delete(R"({"name":"mc-spot"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(MassedComputeEmulatorTest, SpotWithoutASpotProductAndASpotProductWithoutSpotAreRefused) {
  Driver driver(Config());
  Object::Ptr req = ParseJson(CreateRequest("mc-nospot", "H100", 1));
  req->set("spot", true);
  OpResult h100 = driver.Create(Stringify(req));
  EXPECT_EQ(h100.status, GPUPROV_STATUS_INVALID_INPUT) << h100;
  EXPECT_TRUE(Contains(h100.error, "does not offer spot H100:1")) << h100.error;
  EXPECT_TRUE(Contains(h100.error, "RTX-A6000:1 (gpu_1x_a6000_spot)")) << h100.error;
  req->set("instance_type", "gpu_1x_h100");
  OpResult named = driver.Create(Stringify(req));
  EXPECT_EQ(named.status, GPUPROV_STATUS_INVALID_INPUT) << named;
  EXPECT_TRUE(Contains(named.error, "no spot product for gpu_1x_h100")) << named.error;

  Object::Ptr on_demand = ParseJson(CreateRequest("mc-nospot"));
  on_demand->set("instance_type", "gpu_1x_a6000_spot");
  OpResult plain = driver.Create(Stringify(on_demand));
  EXPECT_EQ(plain.status, GPUPROV_STATUS_INVALID_INPUT) << plain;
  EXPECT_TRUE(Contains(plain.error, "a spot product; ask for a spot VM (--spot)")) << plain.error;
  EXPECT_EQ(Launches(), 0);
  ExpectNothingLeft();
}

TEST_F(MassedComputeEmulatorTest, LifecycleWithTheKeyImportedOnceAndReused) {
  Driver driver(Config());
  OpResult created = driver.Create(CreateRequest("mc-life"));
  ASSERT_EQ(created.status, GPUPROV_STATUS_OK) << created << "\n" << driver.host().All();
  EXPECT_FALSE(created.Doc()->getValue<bool>("existing"));
  Object::Ptr vm = created.Vm();
  const std::string id = vm->getValue<std::string>("id");
  EXPECT_EQ(id.size(), 36u);
  EXPECT_EQ(vm->getValue<std::string>("name"), "mc-life");
  EXPECT_EQ(vm->getValue<std::string>("state"), "pending");
  EXPECT_EQ(vm->getValue<std::string>("public_ip"), "");
  EXPECT_EQ(vm->getValue<std::string>("instance_type"), "gpu_1x_a6000");
  EXPECT_EQ(vm->getValue<std::string>("region"), "us-central-2");
  EXPECT_EQ(vm->getValue<std::string>("image"), "Ubuntu Server 22.04 w/ drivers");
  EXPECT_EQ(vm->getValue<std::string>("gpus"), "RTX-A6000:1");
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  // gpuprov's mark is the instance name; the key is the one registered, by name.
  HttpReply rows = emulator_->Control("GET", "/instances?cloud=massedcompute");
  EXPECT_TRUE(Contains(rows.body, "\"name\":\"gpuprov-mc-life\"")) << rows.body;
  EXPECT_TRUE(Contains(rows.body, "\"ssh_key_names\":[\"gpuprov ")) << rows.body;
  EXPECT_TRUE(Contains(rows.body, "\"command_startup\":\"\"")) << rows.body;  // SSH route

  Object::Ptr running = WaitRunning(driver, id);
  ASSERT_TRUE(running);
  EXPECT_EQ(running->getValue<std::string>("public_ip").rfind("127.91.", 0), 0u);
  EXPECT_EQ(running->getValue<std::string>("ssh_user"), "Ubuntu");  // the API's username
  EXPECT_EQ(running->getValue<int>("ssh_port"), 22);

  OpResult by_name = driver.Get(R"({"name":"mc-life"})");
  ASSERT_EQ(by_name.status, GPUPROV_STATUS_OK) << by_name;
  EXPECT_EQ(by_name.Vm()->getValue<std::string>("id"), id);
  // An instance the user made (no gpuprov- prefix) is never listed nor found.
  HttpReply own = emulator_->Api("POST", "/instance/launch",
                                 R"({"imageId":184,"productName":"gpu_1x_a6000","regionName":"any","instanceName":"mc-life"})");
  ASSERT_EQ(own.status, 202) << own.body;
  OpResult list = driver.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list;
  ASSERT_EQ(list.Doc()->getArray("vms")->size(), 1u) << list.json;
  const std::string own_id = own.Doc()->getValue<std::string>("response");
  EXPECT_EQ(driver.Get(R"({"id":")" + own_id + R"("})").status, GPUPROV_STATUS_NOT_FOUND);

  // A re-run finds it by name and launches nothing.
  const long long launches = Launches();
  OpResult again = driver.Create(CreateRequest("mc-life"));
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_TRUE(again.Doc()->getValue<bool>("existing"));
  EXPECT_EQ(again.Vm()->getValue<std::string>("id"), id);
  EXPECT_EQ(Launches(), launches);

  // A second VM reuses the key; it stays while one gpuprov VM is left.
  OpResult second = driver.Create(CreateRequest("mc-two", "H100", 1, "us-central-3"));
  ASSERT_EQ(second.status, GPUPROV_STATUS_OK) << second;
  EXPECT_EQ(second.Vm()->getValue<std::string>("instance_type"), "gpu_1x_h100");
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  OpResult del = driver.Delete(R"({"id":")" + id + R"(","name":"mc-life"})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del << "\n" << driver.host().All();
  EXPECT_TRUE(del.Doc()->getValue<bool>("deleted"));
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  EXPECT_EQ(driver.Get(R"({"id":")" + id + R"("})").status, GPUPROV_STATUS_NOT_FOUND);
  OpResult del2 = driver.Delete(R"({"name":"mc-two"})");
  ASSERT_EQ(del2.status, GPUPROV_STATUS_OK) << del2;
  EXPECT_EQ(emulator_->Count("ssh_keys"), 0);
  // Deleting again: already gone.
  OpResult del3 = driver.Delete(R"({"id":")" + id + R"(","name":"mc-life"})");
  ASSERT_EQ(del3.status, GPUPROV_STATUS_OK) << del3;
  EXPECT_FALSE(del3.Doc()->getValue<bool>("deleted"));
  // The user's own instance is untouched.
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_FALSE(Contains(driver.host().All(), kToken));
}

// A cluster (ABI 1.5) on a cloud with no private network, no firewall API and no tags
// (README.md "Clusters"): each node is a plain instance named gpuprov-<VM name> with no
// private address (its peers use the public one); open_peer_ports checks its request and
// calls nothing (the node firewall admits the peers), however often and whichever peers it
// lists; gc lists the nodes as VMs; the last node's delete leaves nothing.
TEST_F(MassedComputeEmulatorTest, AClusterNodeIsAPlainInstanceWithNoPrivateAddress) {
  Driver driver(Config());
  auto node = [](const std::string& name, const std::string& role,
                 const std::string& cluster = "mc-train") {
    return drivers::testing::WithCluster(CreateRequest(name), cluster, role);
  };
  emulator_->ClearRequests("massedcompute");
  OpResult bad = driver.Create(node("mc-bad", "leader"));
  EXPECT_EQ(bad.status, GPUPROV_STATUS_INVALID_INPUT) << bad;
  EXPECT_TRUE(Contains(bad.error, "cluster.role")) << bad.error;
  EXPECT_TRUE(emulator_->Requests().empty());  // refused before any call

  OpResult server = driver.Create(node("mc-train", "server"));
  ASSERT_EQ(server.status, GPUPROV_STATUS_OK) << server << "\n" << driver.host().All();
  OpResult agent = driver.Create(node("mc-train-agent-1", "agent"));
  ASSERT_EQ(agent.status, GPUPROV_STATUS_OK) << agent;
  Object::Ptr s = WaitRunning(driver, server.Vm()->getValue<std::string>("id"));
  Object::Ptr a = WaitRunning(driver, agent.Vm()->getValue<std::string>("id"));
  ASSERT_TRUE(s && a);
  EXPECT_EQ(s->getValue<std::string>("private_ip"), "");
  EXPECT_EQ(a->getValue<std::string>("private_ip"), "");
  // The instance name is the only mark: the host remembers cluster and role.
  EXPECT_EQ(a->getValue<std::string>("cluster"), "");
  EXPECT_EQ(a->getValue<std::string>("role"), "");
  HttpReply rows = emulator_->Control("GET", "/instances?cloud=massedcompute");
  EXPECT_TRUE(Contains(rows.body, "\"name\":\"gpuprov-mc-train-agent-1\"")) << rows.body;

  auto peers = [&](bool with_agent) {
    return drivers::testing::PeerPortsRequestFor(
        "mc-train", with_agent ? std::vector<Object::Ptr>{s, a} : std::vector<Object::Ptr>{s});
  };
  emulator_->ClearRequests("massedcompute");
  for (bool with_agent : {true, true, false}) {  // add, again (idempotent), remove the agent
    OpResult p = driver.OpenPeerPorts(peers(with_agent));
    EXPECT_EQ(p.status, GPUPROV_STATUS_OK) << p;
    EXPECT_EQ(p.json, "{}");
  }
  EXPECT_TRUE(emulator_->Requests().empty());  // nothing to set on the cloud
  OpResult bad_peers = driver.OpenPeerPorts(R"({"cluster":"mc-train","peer_ports":[],"peers":[]})");
  EXPECT_EQ(bad_peers.status, GPUPROV_STATUS_INVALID_INPUT) << bad_peers;

  // gc: the two nodes as VMs, and nothing of the cluster's own.
  OpResult res = driver.Call(driver.vtable().list_resources, "{}");
  ASSERT_EQ(res.status, GPUPROV_STATUS_OK) << res;
  Array::Ptr rs = res.Doc()->getArray("resources");
  int vms = 0;
  for (size_t i = 0; i < rs->size(); ++i) {
    const std::string kind = rs->getObject(static_cast<unsigned>(i))->getValue<std::string>("kind");
    EXPECT_TRUE(kind == "vm" || kind == "ssh_key") << kind;
    vms += kind == "vm";
  }
  EXPECT_EQ(vms, 2);

  for (const char* name : {"mc-train-agent-1", "mc-train"}) {
    OpResult d = driver.Delete(std::string(R"({"name":")") + name + "\"}");
    ASSERT_EQ(d.status, GPUPROV_STATUS_OK) << d;
  }
  ExpectNothingLeft();
}

TEST_F(MassedComputeEmulatorTest, AnUnknownGpuIsRefusedListingWhatExistsAndNothingIsMade) {
  Driver driver(Config());
  OpResult r = driver.Create(CreateRequest("mc-l4", "L4"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  EXPECT_TRUE(Contains(r.error, "Massed Compute does not offer L4:1")) << r.error;
  EXPECT_TRUE(Contains(r.error, "RTX-A6000:1 (gpu_1x_a6000)")) << r.error;
  EXPECT_TRUE(Contains(r.error, "H100:8 (gpu_8x_h100_sxm5)")) << r.error;
  EXPECT_FALSE(Contains(r.error, "spot")) << r.error;
  OpResult count = driver.Create(CreateRequest("mc-a3", "A6000", 3));
  EXPECT_EQ(count.status, GPUPROV_STATUS_INVALID_INPUT) << count;
  ExpectNothingLeft();
  EXPECT_EQ(Launches(), 0);
}

TEST_F(MassedComputeEmulatorTest, BadInputIsRefusedBeforeAnyCall) {
  Driver driver(Config());
  emulator_->ClearRequests("massedcompute");
  Object::Ptr req = ParseJson(CreateRequest("mc-bad"));
  req->set("user_data", "#!/bin/bash\necho boot\n");
  OpResult ud = driver.Create(Stringify(req));
  EXPECT_EQ(ud.status, GPUPROV_STATUS_INVALID_INPUT) << ud;
  EXPECT_TRUE(Contains(ud.error, "user_data")) << ud.error;
  req = ParseJson(CreateRequest("mc_bad!"));
  EXPECT_EQ(driver.Create(Stringify(req)).status, GPUPROV_STATUS_INVALID_INPUT);
  req = ParseJson(CreateRequest("mc-bad"));
  req->set("ssh_public_key", "ssh-ed25519 not-base64!");
  OpResult key = driver.Create(Stringify(req));
  EXPECT_EQ(key.status, GPUPROV_STATUS_INVALID_INPUT) << key;
  EXPECT_TRUE(Contains(key.error, "ssh_public_key")) << key.error;
  req = ParseJson(CreateRequest("mc-bad"));
  req->set("gpu", Poco::Dynamic::Var());
  OpResult cpu = driver.Create(Stringify(req));
  EXPECT_EQ(cpu.status, GPUPROV_STATUS_INVALID_INPUT) << cpu;
  EXPECT_TRUE(Contains(cpu.error, "only GPU VMs")) << cpu.error;
  EXPECT_TRUE(emulator_->Requests().empty());
  // An unknown image names the ones there are; nothing is made.
  req = ParseJson(CreateRequest("mc-bad"));
  req->set("image", "Windows 11");
  OpResult image = driver.Create(Stringify(req));
  EXPECT_EQ(image.status, GPUPROV_STATUS_INVALID_INPUT) << image;
  EXPECT_TRUE(Contains(image.error, "\"Ubuntu Server 24.04\"")) << image.error;
  ExpectNothingLeft();
}

TEST_F(MassedComputeEmulatorTest, ConfigImageAndRegionAreUsed) {
  Driver driver(Config(R"(,"image":"Ubuntu Server 24.04","region":"us-central-3")"));
  OpResult r = driver.Create(CreateRequest("mc-cfg"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(r.Vm()->getValue<std::string>("image"), "Ubuntu Server 24.04");
  EXPECT_EQ(r.Vm()->getValue<std::string>("region"), "us-central-3");
  ASSERT_EQ(driver.Delete(R"({"name":"mc-cfg"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(MassedComputeEmulatorTest, NoCapacityIsCapacityAndTheKeyGoesAgain) {
  Driver driver(Config());
  emulator_->Settings(R"("capacity":{"gpu_1x_a6000":0})");
  OpResult before = driver.Create(CreateRequest("mc-cap"));
  EXPECT_EQ(before.status, GPUPROV_STATUS_CAPACITY) << before;
  EXPECT_TRUE(Contains(before.error, "no capacity now for gpu_1x_a6000")) << before.error;
  EXPECT_EQ(Launches(), 0);
  emulator_->Reset();
  // The inventory said yes, the launch says no (the race the reference's fault (a) models).
  emulator_->Fault("capacity");
  OpResult at_launch = driver.Create(CreateRequest("mc-cap"));
  EXPECT_EQ(at_launch.status, GPUPROV_STATUS_CAPACITY) << at_launch;
  EXPECT_TRUE(Contains(at_launch.error, "No capacity available")) << at_launch.error;
  ExpectNothingLeft();
}

TEST_F(MassedComputeEmulatorTest, AServerErrorAfterTheLaunchHappenedMakesNoSecondInstance) {
  Driver driver(Config());
  emulator_->Fault("server_error", R"(,"value":"after_create","path":"/api/v1/instance/launch")");
  OpResult r = driver.Create(CreateRequest("mc-5xx"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r << "\n" << driver.host().All();
  EXPECT_TRUE(Contains(driver.host().All(), "was launched although")) << driver.host().All();
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("launches"), 1);
  EXPECT_EQ(Launches(), 1);
  ASSERT_EQ(driver.Delete(R"({"name":"mc-5xx"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(MassedComputeEmulatorTest, ThrottlingAndPlainServerErrorsAreRetried) {
  Driver driver(Config());
  emulator_->Fault("throttle", R"(,"times":3,"retry_after":0)");
  emulator_->Fault("server_error", R"(,"status":503,"path":"/api/v1/gpu-inventory")");
  OpResult r = driver.Create(CreateRequest("mc-429"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r << "\n" << driver.host().All();
  EXPECT_EQ(emulator_->Count("instances"), 1);
  // A 5xx on the launch itself that did not launch: looked up by name, then launched once.
  emulator_->Fault("server_error", R"(,"path":"/api/v1/instance/launch")");
  OpResult second = driver.Create(CreateRequest("mc-503"));
  ASSERT_EQ(second.status, GPUPROV_STATUS_OK) << second;
  EXPECT_EQ(emulator_->Count("instances"), 2);
  ASSERT_EQ(driver.Delete(R"({"name":"mc-429"})").status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Delete(R"({"name":"mc-503"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(MassedComputeEmulatorTest, TheSingleObjectGetShapeIsRead) {
  Driver driver(Config());
  emulator_->Settings(R"("single_instance_shape":true)");
  OpResult r = driver.Create(CreateRequest("mc-shape"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  ASSERT_TRUE(WaitRunning(driver, r.Vm()->getValue<std::string>("id")));
  ASSERT_EQ(driver.Delete(R"({"name":"mc-shape"})").status, GPUPROV_STATUS_OK);
  emulator_->Settings(R"("single_instance_shape":false)");
  ExpectNothingLeft();
}

TEST_F(MassedComputeEmulatorTest, BootingAndANotYetBootedOsArePendingAFailedOneIsError) {
  Driver driver(Config());
  emulator_->Fault("ip_after_boot", R"(,"seconds":2)");
  OpResult r = driver.Create(CreateRequest("mc-ip"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  const std::string get = R"({"id":")" + r.Vm()->getValue<std::string>("id") + R"("})";
  Object::Ptr waiting = drivers::testing::PollVm(
      driver, get,
      [](const Object::Ptr& vm) { return Contains(vm->getValue<std::string>("message"), "IP"); },
      std::chrono::seconds(10));
  ASSERT_TRUE(waiting);
  EXPECT_EQ(waiting->getValue<std::string>("state"), "pending") << Stringify(waiting);
  EXPECT_EQ(waiting->getValue<std::string>("public_ip"), "");
  ASSERT_TRUE(WaitRunning(driver, r.Vm()->getValue<std::string>("id")));

  emulator_->Fault("error_during_boot");
  OpResult e = driver.Create(CreateRequest("mc-err"));
  ASSERT_EQ(e.status, GPUPROV_STATUS_OK) << e;
  Object::Ptr failed = drivers::testing::PollVm(
      driver, R"({"name":"mc-err"})",
      [](const Object::Ptr& vm) { return vm->getValue<std::string>("state") != "pending"; },
      std::chrono::seconds(10));
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->getValue<std::string>("state"), "error");
  EXPECT_TRUE(Contains(failed->getValue<std::string>("message"), "failed"));
  ASSERT_EQ(driver.Delete(R"({"name":"mc-err"})").status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Delete(R"({"name":"mc-ip"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

// M1: the internal-only "1x H100 SXM5" listed at $0/hr (the vendor's agent plugin warns of it)
// is neither offered nor launched; H100:1 takes the priced product.
TEST_F(MassedComputeEmulatorTest, ProductsListedAtZeroDollarsAreNeverOfferedOrLaunched) {
  Driver driver(Config());
  OpResult offers = driver.Offers(R"({"gpu":{"type":"H100","count":1},"region":""})");
  ASSERT_EQ(offers.status, GPUPROV_STATUS_OK) << offers;
  Array::Ptr list = offers.Doc()->getArray("offers");
  ASSERT_GT(list->size(), 0u) << offers.json;
  for (size_t i = 0; i < list->size(); ++i) {
    Object::Ptr o = list->getObject(static_cast<unsigned>(i));
    EXPECT_EQ(o->getValue<std::string>("instance_type"), "gpu_1x_h100") << offers.json;
    EXPECT_GT(o->getValue<double>("price_per_hour"), 0) << offers.json;
  }
  OpResult r = driver.Create(CreateRequest("mc-h100", "H100", 1));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(r.Vm()->getValue<std::string>("instance_type"), "gpu_1x_h100");
  ASSERT_EQ(driver.Delete(R"({"name":"mc-h100"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

// M2: instances without os_booted (as the vendor's fixture shows them: status "pending", then
// "Running") reach running; the driver does not wait for a field that never comes.
TEST_F(MassedComputeEmulatorTest, AnInstanceWithoutOsBootedRunsOnItsStatus) {
  emulator_->Settings(R"("omit_os_booted":true)");
  Driver driver(Config());
  OpResult r = driver.Create(CreateRequest("mc-noboot"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  Object::Ptr vm = WaitRunning(driver, r.Vm()->getValue<std::string>("id"));
  ASSERT_TRUE(vm);
  EXPECT_FALSE(vm->getValue<std::string>("public_ip").empty());
  ASSERT_EQ(driver.Delete(R"({"name":"mc-noboot"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

// M3: where launch takes os_image_name (what the vendor's agent plugin says of the REST API)
// rather than imageId (what its MCP build forwarded), the refusal naming os_image_name is
// answered once with the image's name, and later launches send that form at once.
TEST_F(MassedComputeEmulatorTest, ALaunchThatAsksForOsImageNameGetsIt) {
  emulator_->Settings(R"("launch_image_field":"os_image_name")");
  Driver driver(Config());
  OpResult r = driver.Create(CreateRequest("mc-img-a"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(Launches(), 2);
  EXPECT_EQ(emulator_->Count("instances"), 1);
  OpResult again = driver.Create(CreateRequest("mc-img-b"));
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_EQ(Launches(), 3);
  ASSERT_EQ(driver.Delete(R"({"name":"mc-img-a"})").status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Delete(R"({"name":"mc-img-b"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

// M4: which user gets the launch's keys is unconfirmed ("Ubuntu" in the vendor's fixture):
// ssh_user in [clouds.massedcompute] replaces the API's username.
TEST_F(MassedComputeEmulatorTest, TheSshUserSettingReplacesTheApisUsername) {
  Driver plain(Config());
  OpResult r = plain.Create(CreateRequest("mc-user"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(r.Vm()->getValue<std::string>("ssh_user"), "Ubuntu");
  Driver root(Config(R"(,"ssh_user":"root")"));
  OpResult g = root.Get(R"({"name":"mc-user"})");
  ASSERT_EQ(g.status, GPUPROV_STATUS_OK) << g;
  EXPECT_EQ(g.Vm()->getValue<std::string>("ssh_user"), "root");
  ASSERT_EQ(plain.Delete(R"({"name":"mc-user"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

// Part 2 of issue 30: the REST operations of Massed Compute's MCP map (massed-compute-mcp
// d11c49a tools.json, each tool's "upstream" method and path), transcribed. Every call the
// driver makes in a whole lifecycle (check, offers, create, get, list, gc, delete) is one.
const std::vector<drivers::testing::VendorOperation> kMassedComputeOperations = {
    {"GET", "/api/v1/gpu-inventory"},         {"GET", "/api/v1/images"},
    {"GET", "/api/v1/instance"},              {"GET", "/api/v1/instance/{id}"},
    {"POST", "/api/v1/instance/launch"},      {"POST", "/api/v1/instance/restart"},
    {"POST", "/api/v1/instance/terminate"},   {"POST", "/api/v1/coupon/information"},
    {"POST", "/api/v1/coupon/accepted-products"},
    {"POST", "/api/v1/account/token/validation"},
    {"GET", "/api/v1/account/billing"},       {"GET", "/api/v1/ssh-keys"},
    {"POST", "/api/v1/ssh-keys"},             {"DELETE", "/api/v1/ssh-keys/{id}"},
    {"GET", "/api/v1/recipes"},               {"GET", "/api/v1/recipes/search"},
    {"GET", "/api/v1/recipes/{slug}"},
};

TEST_F(MassedComputeEmulatorTest, EveryOperationTheDriverUsesIsOneTheMassedComputeMcpMapDescribes) {
  Driver driver(Config());
  ASSERT_EQ(driver.Check().status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Offers(R"({"gpu":{"type":"RTX-A6000","count":1},"region":""})").status,
            GPUPROV_STATUS_OK);
  OpResult r = driver.Create(CreateRequest("mc-ops"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  ASSERT_TRUE(WaitRunning(driver, r.Vm()->getValue<std::string>("id")));
  ASSERT_EQ(driver.Get(R"({"name":"mc-ops"})").status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.List().status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Call(driver.vtable().list_resources, "{}").status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Delete(R"({"name":"mc-ops"})").status, GPUPROV_STATUS_OK);
  const std::vector<std::string> logged = emulator_->Requests();
  ASSERT_FALSE(logged.empty());
  const std::vector<std::string> outside =
      drivers::testing::OutsideOperations(logged, kMassedComputeOperations);
  EXPECT_TRUE(outside.empty()) << "not in the MCP map: " << outside.front();
}

TEST_F(MassedComputeEmulatorTest, AnInstanceThatVanishesIsNotFoundAndDownRemovesTheKey) {
  Driver driver(Config());
  emulator_->Fault("vanish_during_boot");
  OpResult r = driver.Create(CreateRequest("mc-gone"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  const std::string id = r.Vm()->getValue<std::string>("id");
  OpResult g;
  for (int i = 0; i < 50; ++i) {
    g = driver.Get(R"({"id":")" + id + R"("})");
    if (g.status == GPUPROV_STATUS_NOT_FOUND) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(g.status, GPUPROV_STATUS_NOT_FOUND) << g;
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  OpResult del = driver.Delete(R"({"id":")" + id + R"(","name":"mc-gone"})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del;
  EXPECT_FALSE(del.Doc()->getValue<bool>("deleted"));
  ExpectNothingLeft();
}

TEST_F(MassedComputeEmulatorTest, AReadOnlyKeyIsAuthWithTheFixAndLeavesNothing) {
  emulator_->Settings(R"("read_only_tokens":["mc_read_only_key"])");
  ScopedEnv ro("MASSED_API_KEY", "mc_read_only_key");
  Driver driver(Config());
  OpResult r = driver.Create(CreateRequest("mc-ro"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "read-only")) << r.error;
  EXPECT_TRUE(Contains(r.error, "full-access key")) << r.error;
  EXPECT_FALSE(Contains(r.error, "mc_read_only_key")) << r.error;
  ExpectNothingLeft();
}

TEST_F(MassedComputeEmulatorTest, ACancelledDeleteWaitReturnsCancelledAtOnce) {
  Driver driver(Config());
  emulator_->Settings(R"("terminating_seconds":30)");
  ASSERT_EQ(driver.Create(CreateRequest("mc-cancel")).status, GPUPROV_STATUS_OK);
  std::thread cancel([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    // The driver's host is handed out read-only; its cancel flag is what Ctrl-C sets.
    const_cast<drivers::testing::RecordingHost&>(driver.host()).cancel = true;
  });
  const auto start = std::chrono::steady_clock::now();
  OpResult r = driver.Delete(R"({"name":"mc-cancel"})");
  cancel.join();
  EXPECT_EQ(r.status, GPUPROV_STATUS_CANCELLED) << r;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  emulator_->Settings(R"("terminating_seconds":1)");
}

}  // namespace
}  // namespace gpuprov::massedcompute
