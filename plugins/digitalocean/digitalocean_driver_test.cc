// SPDX-License-Identifier: Apache-2.0
//
// Loads the BUILT driver .so with dlopen, as the host does, and drives it through the C
// vtable against the DigitalOcean emulator (tests/emulators, `gpuprov-emulator --backend
// memory`) started as a child process. Talks only to 127.0.0.1.
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "driver_test_util.h"
#include "gpuprov/driver_abi.h"

namespace gpuprov::digitalocean {
namespace {

using namespace drivers::testing;  // the shared driver test helpers (driver_test_util.h)
using Poco::JSON::Array;
using Poco::JSON::Object;

constexpr const char* kToken = "dop_v1_gpuprov_emulator_test_token";
constexpr const char* kKeyA =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF test@gpuprov";
constexpr const char* kKeyB =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGLNOSpIazn8gOTMOnUEqrXgF/uRfTEfARnXqkdhuaOj other@gpuprov";

// --- the driver, loaded once ------------------------------------------------

constexpr char kDriverPath[] = GPUPROV_DIGITALOCEAN_DRIVER_PATH;
using Driver = DriverAt<kDriverPath>;

const gpuprov_type_driver_descriptor* Descriptor() { return Driver::Descriptor(); }

// --- no emulator needed -----------------------------------------------------

TEST(DigitalOceanDescriptor, IdentityAndCapabilities) {
  const gpuprov_type_driver_descriptor* d = Descriptor();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->magic, GPUPROV_DRIVER_MAGIC);
  EXPECT_STREQ(d->name, "digitalocean");
  // How its VM learns its public address: REFERENCE.md section 6.
  EXPECT_STREQ(d->node_address, GPUPROV_NODE_ADDRESS_DIGITALOCEAN);
  EXPECT_EQ(d->capabilities, static_cast<uint64_t>(GPUPROV_CAP_VM_LIFECYCLE |
                                                   GPUPROV_CAP_BOOT_CLOUD_INIT |
                                                   GPUPROV_CAP_OPEN_PORTS |
                                                   GPUPROV_CAP_HOSTS_KUBERNETES |
                                                   GPUPROV_CAP_CLUSTER));
  drivers::testing::ExpectEveryOperation(*d->vtable);
  EXPECT_NE(d->vtable->open_peer_ports, nullptr);
}

TEST(DigitalOceanDescriptor, RefusesPlainHttpToANonLoopbackEndpoint) {
  Driver driver(R"({"endpoint":"http://api.digitalocean.com/v2","config":{}})");
  EXPECT_EQ(driver.init_status(), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_TRUE(Contains(driver.init_error(), "loopback")) << driver.init_error();
}

TEST(DigitalOceanDescriptor, DefaultsToTheRealHttpsEndpoint) {
  ScopedEnv no_token("DIGITALOCEAN_TOKEN", nullptr);
  ScopedEnv no_token2("DIGITALOCEAN_ACCESS_TOKEN", nullptr);
  ScopedEnv no_token3("DO_API_TOKEN", nullptr);
  ScopedEnv no_doctl("XDG_CONFIG_HOME", "/nonexistent-gpuprov-test");
  Driver driver(R"({"endpoint":"","config":{}})");
  ASSERT_EQ(driver.init_status(), GPUPROV_STATUS_OK) << driver.init_error();
  // No token anywhere: AUTH before any network call, naming the variables.
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "DIGITALOCEAN_TOKEN")) << r.error;
}

TEST(DigitalOceanDescriptor, OffersWithoutTheNetworkSayWhenAGpuIsNotOffered) {
  ScopedEnv token("DIGITALOCEAN_TOKEN", kToken);
  // The sizes list is unreachable here (closed loopback port): the built-in table answers.
  Driver driver(R"({"endpoint":"http://127.0.0.1:9/v2","config":{"retry":{"max_attempts":1}}})");
  OpResult l4 = driver.Offers(R"({"gpu":{"type":"L4","count":1},"region":""})");
  ASSERT_EQ(l4.status, GPUPROV_STATUS_OK) << l4;
  EXPECT_EQ(l4.Doc()->getArray("offers")->size(), 0u);
  EXPECT_TRUE(Contains(driver.host().All(), "does not offer L4")) << driver.host().All();
  OpResult h100 = driver.Offers(R"({"gpu":{"type":"H100","count":8},"region":"tor1"})");
  ASSERT_EQ(h100.status, GPUPROV_STATUS_OK) << h100;
  Array::Ptr offers = h100.Doc()->getArray("offers");
  // REFERENCE.md: a powered-off droplet is kept and billed.
  EXPECT_EQ(h100.Doc()->getValue<std::string>("powered_off_cost"), "full");
  ASSERT_EQ(offers->size(), 1u) << h100.json;
  EXPECT_EQ(offers->getObject(0)->getValue<std::string>("instance_type"), "gpu-h100x8-640gb");
  EXPECT_GT(offers->getObject(0)->getValue<double>("price_per_hour"), 0.0);
}

// --- the emulator -----------------------------------------------------------

// The emulator as a child process (memory backend, DigitalOcean only).
class Emulator : public OneCloudEmulator {
 public:
  Emulator() : OneCloudEmulator("digitalocean") {}
  bool Start(std::string* problem) {
    // Fast boots; the real rate limits (250/min) are not enforced so the whole suite can run
    // within a minute (throttling is tested with the throttle fault). The emulator accepts
    // the token found in DIGITALOCEAN_TOKEN at start.
    return StartMemory({"--boot-seconds", "1", "--no-rate-limits"},
                       {{"DIGITALOCEAN_TOKEN", kToken}}, problem);
  }

  std::string do_url() const { return url(); }

  // One call to the control API (or to the DigitalOcean API with the token).
  HttpReply Http(const std::string& method, const std::string& url, const std::string& body = "",
                 bool with_token = false) {
    if (!with_token) return LoopbackHttp(method, url, body);
    return LoopbackHttp(method, url, body, {{"Authorization", std::string("Bearer ") + kToken}});
  }
  void Fault(const std::string& fault, int times, const std::string& extra = "") {
    EmulatorProcess::Fault(R"({"cloud":"digitalocean","fault":")" + fault + R"(","times":)" +
                           std::to_string(times) + extra + "}");
  }
};

class DigitalOceanEmulatorTest : public SharedEmulatorTest<Emulator> {
 protected:
  void SetUp() override {
    SharedEmulatorTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    emulator_->Reset();
    token_ = std::make_unique<ScopedEnv>("DIGITALOCEAN_TOKEN", kToken);
  }
  void TearDown() override { token_.reset(); }

  // Settings with compressed retries, for the emulator's endpoint.
  static std::string Config(const std::string& extra_config = "") {
    return R"({"endpoint":")" + emulator_->do_url() +
           R"(","config":{"retry":{"max_attempts":5,"base_delay_ms":5,"max_delay_ms":50,)"
           R"("max_retry_after_ms":100,"total_budget_ms":20000,"attempt_timeout_ms":10000})" +
           extra_config + "}}";
  }

  static std::string CreateRequest(const std::string& name, const std::string& key = kKeyA,
                                   const std::string& user_data = "#!/bin/bash\necho hi\n") {
    Object::Ptr req = new Object();
    req->set("name", name);
    req->set("region", "");
    req->set("instance_type", "");
    Object::Ptr gpu = new Object();
    gpu->set("type", "H100");
    gpu->set("count", 1);
    req->set("gpu", gpu);
    req->set("image", "");
    req->set("ssh_public_key", key);
    req->set("user_data", user_data);
    Object::Ptr tags = new Object();
    tags->set("gpuprov", "1");
    tags->set("gpuprov-name", name);
    tags->set("team", "ml");
    req->set("tags", tags);
    Array::Ptr ports = new Array();
    for (int p : {22, 6443, 80, 443}) ports->add(p);
    req->set("open_ports", ports);
    return Stringify(req);
  }

  static Object::Ptr WaitRunning(Driver& driver, const std::string& id) {
    return drivers::testing::WaitRunning(driver, id, std::chrono::seconds(60), "droplet");
  }

  std::unique_ptr<ScopedEnv> token_;
};

TEST_F(DigitalOceanEmulatorTest, CheckReadsTheAccount) {
  Driver driver(Config());
  OpResult r = driver.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_FALSE(r.Doc()->getValue<std::string>("account").empty());
  EXPECT_EQ(r.Doc()->getValue<std::string>("token_from"), "$DIGITALOCEAN_TOKEN");
  EXPECT_FALSE(Contains(r.json, kToken));
  EXPECT_FALSE(Contains(driver.host().All(), kToken));
}

TEST_F(DigitalOceanEmulatorTest, OffersComeFromTheSizesList) {
  Driver driver(Config());
  OpResult r = driver.Offers(R"({"gpu":{"type":"H100","count":1},"region":""})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  Array::Ptr offers = r.Doc()->getArray("offers");
  ASSERT_GT(offers->size(), 0u) << r.json;
  for (size_t i = 0; i < offers->size(); ++i) {
    EXPECT_EQ(offers->getObject(i)->getValue<std::string>("instance_type"), "gpu-h100x1-80gb");
  }
  OpResult l4 = driver.Offers(R"({"gpu":{"type":"L4","count":1},"region":""})");
  ASSERT_EQ(l4.status, GPUPROV_STATUS_OK) << l4;
  EXPECT_EQ(l4.Doc()->getArray("offers")->size(), 0u);
}

TEST_F(DigitalOceanEmulatorTest, Lifecycle) {
  Driver driver(Config());
  OpResult created = driver.Create(CreateRequest("do-life"));
  ASSERT_EQ(created.status, GPUPROV_STATUS_OK) << created << "\n" << driver.host().All();
  EXPECT_FALSE(created.Doc()->getValue<bool>("existing"));
  Object::Ptr vm = created.Vm();
  const std::string id = vm->getValue<std::string>("id");
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(vm->getValue<std::string>("name"), "do-life");
  EXPECT_EQ(vm->getValue<std::string>("instance_type"), "gpu-h100x1-80gb");
  EXPECT_EQ(vm->getValue<std::string>("ssh_user"), "root");
  EXPECT_EQ(vm->getValue<std::string>("gpus"), "H100:1");
  EXPECT_TRUE(vm->getObject("ports")->has("6443"));
  const std::string state = vm->getValue<std::string>("state");
  EXPECT_TRUE(state == "pending" || state == "running") << state;
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("firewalls"), 1);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);

  Object::Ptr running = WaitRunning(driver, id);
  ASSERT_TRUE(running);
  EXPECT_TRUE(running->getValue<std::string>("public_ip").rfind("127.", 0) == 0)
      << running->getValue<std::string>("public_ip");

  // The firewall opens the requested ports and lets everything out.
  auto [fw_status, fw_body] = emulator_->Http("GET", emulator_->do_url() + "/firewalls", "", true);
  ASSERT_EQ(fw_status, 200) << fw_body;
  Object::Ptr fw = ParseJson(fw_body)->getArray("firewalls")->getObject(0);
  EXPECT_EQ(fw->getValue<std::string>("name"), "gpuprov-do-life");
  EXPECT_EQ(fw->getArray("inbound_rules")->size(), 4u) << fw_body;
  EXPECT_EQ(fw->getArray("outbound_rules")->size(), 3u) << fw_body;
  EXPECT_TRUE(Contains(fw_body, id)) << fw_body;

  OpResult by_name = driver.Get(R"({"name":"do-life"})");
  ASSERT_EQ(by_name.status, GPUPROV_STATUS_OK) << by_name;
  EXPECT_EQ(by_name.Vm()->getValue<std::string>("id"), id);

  OpResult list = driver.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list;
  Array::Ptr vms = list.Doc()->getArray("vms");
  ASSERT_EQ(vms->size(), 1u) << list.json;  // a GPU droplet: found with type=gpus
  EXPECT_EQ(vms->getObject(0)->getValue<std::string>("name"), "do-life");

  OpResult again = driver.Create(CreateRequest("do-life"));
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_TRUE(again.Doc()->getValue<bool>("existing"));
  EXPECT_EQ(again.Vm()->getValue<std::string>("id"), id);
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("firewalls"), 1);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);

  OpResult del = driver.Delete(R"({"id":")" + id + R"(","name":"do-life"})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del;
  EXPECT_TRUE(del.Doc()->getValue<bool>("deleted"));
  EXPECT_EQ(emulator_->Count("instances"), 0);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 0);

  OpResult gone = driver.Get(R"({"id":")" + id + R"("})");
  EXPECT_EQ(gone.status, GPUPROV_STATUS_NOT_FOUND) << gone;
  OpResult del2 = driver.Delete(R"({"id":")" + id + R"(","name":"do-life"})");
  ASSERT_EQ(del2.status, GPUPROV_STATUS_OK) << del2;
  EXPECT_FALSE(del2.Doc()->getValue<bool>("deleted"));
  EXPECT_FALSE(Contains(driver.host().All(), kToken));
}

TEST_F(DigitalOceanEmulatorTest, SharedKeyIsDeletedWithItsLastDroplet) {
  Driver driver(Config());
  OpResult a = driver.Create(CreateRequest("do-share-a"));
  ASSERT_EQ(a.status, GPUPROV_STATUS_OK) << a;
  OpResult b = driver.Create(CreateRequest("do-share-b"));
  ASSERT_EQ(b.status, GPUPROV_STATUS_OK) << b;
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  EXPECT_EQ(emulator_->Count("firewalls"), 2);
  ASSERT_EQ(driver.Delete(R"({"name":"do-share-a"})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  EXPECT_EQ(emulator_->Count("firewalls"), 1);
  ASSERT_EQ(driver.Delete(R"({"name":"do-share-b"})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 0);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
  EXPECT_EQ(emulator_->Count("instances"), 0);
}

TEST_F(DigitalOceanEmulatorTest, ReusesAKeyTheUserRegisteredAndNeverDeletesIt) {
  // The user's own key, registered outside gpuprov.
  auto [status, body] = emulator_->Http(
      "POST", emulator_->do_url() + "/account/keys",
      std::string(R"({"name":"laptop","public_key":")") + kKeyB + R"("})", true);
  ASSERT_EQ(status, 201) << body;
  Driver driver(Config());
  OpResult a = driver.Create(CreateRequest("do-userkey", kKeyB));
  ASSERT_EQ(a.status, GPUPROV_STATUS_OK) << a;
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  ASSERT_EQ(driver.Delete(R"({"name":"do-userkey"})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  EXPECT_EQ(emulator_->Count("instances"), 0);
}

TEST_F(DigitalOceanEmulatorTest, CapacityIsReportedWithDigitalOceansMessageAndNothingLeaks) {
  Driver driver(Config());
  emulator_->Fault("capacity", 1);
  OpResult r = driver.Create(CreateRequest("do-cap"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_CAPACITY) << r;
  EXPECT_TRUE(Contains(r.error, "Size is not available in this region.")) << r.error;
  EXPECT_EQ(emulator_->Count("instances"), 0);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 0);
}

// F6 (REFERENCE.md §F6): with no region named, the droplet goes to a region
// DigitalOcean sells the size in now (the size's `regions` in GET /v2/sizes, narrowed by the
// regions `available` in GET /v2/regions), not the first of the built-in table (nyc2 for H100).
TEST_F(DigitalOceanEmulatorTest, NoRegionTakesOneWhereTheSizeIsSoldNow) {
  auto settings = [&](const std::string& json) {
    HttpReply r = emulator_->Control("POST", "/settings", json);
    ASSERT_EQ(r.status, 200) << r.body;
  };
  settings(R"({"cloud":"digitalocean","size_regions":{"gpu-h100x1-80gb":["nyc2","ams3","tor1"]},)"
           R"("unavailable_regions":["nyc2"]})");
  Driver driver(Config());
  OpResult offers = driver.Offers(R"({"gpu":{"type":"H100","count":1},"region":""})");
  ASSERT_EQ(offers.status, GPUPROV_STATUS_OK) << offers;
  std::vector<std::string> offered;
  Array::Ptr list = offers.Doc()->getArray("offers");
  for (size_t i = 0; i < list->size(); ++i) {
    offered.push_back(list->getObject(i)->getValue<std::string>("region"));
  }
  EXPECT_EQ(offered, (std::vector<std::string>{"ams3", "tor1"})) << offers.json;

  OpResult created = driver.Create(CreateRequest("do-region"));
  ASSERT_EQ(created.status, GPUPROV_STATUS_OK) << created << "\n" << driver.host().All();
  EXPECT_EQ(created.Vm()->getValue<std::string>("region"), "ams3");
  ASSERT_EQ(driver.Delete(R"({"name":"do-region"})").status, GPUPROV_STATUS_OK);

  // Sold nowhere now: CAPACITY before anything is made.
  settings(R"({"cloud":"digitalocean","unavailable_sizes":["gpu-h100x1-80gb"]})");
  OpResult none = driver.Create(CreateRequest("do-region-none"));
  EXPECT_EQ(none.status, GPUPROV_STATUS_CAPACITY) << none;
  EXPECT_TRUE(Contains(none.error, "in no region")) << none.error;
  EXPECT_EQ(emulator_->Count("instances"), 0);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 0);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
}

// The operations of DigitalOcean's API the driver may call, transcribed from digitalocean/openapi
// (commit 7c1300c479fe, specification/DigitalOcean-public.v2.yaml paths and the files they
// reference: account_get, sshKeys_{list,create,get,delete}, droplets_{list,create,get,destroy},
// firewalls_{list,create,get,update,delete,assign_droplets,add_rules}, sizes_list,
// regions_list, vpcs_{list,create,get,delete}; query parameters from shared/parameters.yml (page, per_page) and
// droplets/parameters.yml (tag_name, name, type)).
const std::vector<drivers::testing::VendorOperation>& DigitalOceanOperations() {
  static const std::vector<drivers::testing::VendorOperation> ops = {
      {"GET", "/v2/account", {}},
      {"GET", "/v2/account/keys", {"page", "per_page"}},
      {"POST", "/v2/account/keys", {}},
      {"GET", "/v2/account/keys/{ssh_key_identifier}", {}},
      {"DELETE", "/v2/account/keys/{ssh_key_identifier}", {}},
      {"GET", "/v2/droplets", {"page", "per_page", "tag_name", "name", "type"}},
      {"POST", "/v2/droplets", {}},
      {"GET", "/v2/droplets/{droplet_id}", {}},
      {"DELETE", "/v2/droplets/{droplet_id}", {}},
      {"GET", "/v2/firewalls", {"page", "per_page"}},
      {"POST", "/v2/firewalls", {}},
      {"GET", "/v2/firewalls/{firewall_id}", {}},
      {"PUT", "/v2/firewalls/{firewall_id}", {}},
      {"DELETE", "/v2/firewalls/{firewall_id}", {}},
      {"POST", "/v2/firewalls/{firewall_id}/droplets", {}},
      {"POST", "/v2/firewalls/{firewall_id}/rules", {}},
      {"GET", "/v2/sizes", {"page", "per_page"}},
      {"GET", "/v2/regions", {"page", "per_page"}},
      {"GET", "/v2/vpcs", {"page", "per_page"}},
      {"POST", "/v2/vpcs", {}},
      {"GET", "/v2/vpcs/{vpc_id}", {}},
      {"DELETE", "/v2/vpcs/{vpc_id}", {}},
  };
  return ops;
}

// Part 2 of issue 30: every request the driver makes, through every operation (check, offers,
// create, get, list, open_ports narrowed and widened, gc, delete), is an operation of
// DigitalOcean's published spec with only its documented query parameters.
TEST_F(DigitalOceanEmulatorTest, EveryCallIsAnOperationOfDigitalOceansSpec) {
  emulator_->ClearRequests("digitalocean");
  Driver driver(Config());
  drivers::testing::CallEveryOperation(driver, R"({"gpu":{"type":"H100","count":1},"region":""})",
                                       CreateRequest("do-ops"), "do-ops");
  if (HasFatalFailure()) return;
  drivers::testing::ExpectOnlyOperations(emulator_->Requests(), DigitalOceanOperations());
}

TEST_F(DigitalOceanEmulatorTest, AClusterSharesAVpcAndAFirewallByTagThatGoWithItsLastNode) {
  Driver driver(Config());
  OpResult server = driver.Create(WithCluster(CreateRequest("train"), "train", "server"));
  ASSERT_EQ(server.status, GPUPROV_STATUS_OK) << server << "\n" << driver.host().All();
  OpResult agent =
      driver.Create(WithCluster(CreateRequest("train-agent-1"), "train", "agent"));
  ASSERT_EQ(agent.status, GPUPROV_STATUS_OK) << agent;
  EXPECT_EQ(emulator_->Count("vpcs"), 1);
  EXPECT_EQ(emulator_->Count("firewalls"), 3);  // one per droplet and the cluster's

  // The VM objects carry the cluster, the role and (once running) the VPC address.
  Object::Ptr running = WaitRunning(driver, agent.Vm()->getValue<std::string>("id"));
  ASSERT_TRUE(running);
  EXPECT_EQ(running->getValue<std::string>("cluster"), "train");
  EXPECT_EQ(running->getValue<std::string>("role"), "agent");
  EXPECT_EQ(running->getValue<std::string>("private_ip").rfind("10.", 0), 0u) << Stringify(running);

  // The droplets are in the VPC gpuprov-train, and the firewall admits the peer ports from
  // the cluster tag only.
  Object::Ptr vpcs = emulator_->Http("GET", emulator_->do_url() + "/vpcs", "", true).Doc();
  std::string vpc_id;
  for (size_t i = 0; i < vpcs->getArray("vpcs")->size(); ++i) {
    Object::Ptr v = vpcs->getArray("vpcs")->getObject(i);
    if (v->getValue<std::string>("name") == "gpuprov-train") vpc_id = v->getValue<std::string>("id");
  }
  ASSERT_FALSE(vpc_id.empty()) << Stringify(vpcs);
  Object::Ptr droplet =
      emulator_->Http("GET", emulator_->do_url() + "/droplets/" +
                                 agent.Vm()->getValue<std::string>("id"), "", true)
          .Doc()
          ->getObject("droplet");
  EXPECT_EQ(droplet->getValue<std::string>("vpc_uuid"), vpc_id);
  Object::Ptr fws = emulator_->Http("GET", emulator_->do_url() + "/firewalls", "", true).Doc();
  Object::Ptr peers;
  for (size_t i = 0; i < fws->getArray("firewalls")->size(); ++i) {
    Object::Ptr f = fws->getArray("firewalls")->getObject(i);
    if (f->getValue<std::string>("name") == "gpuprov-train-peers") peers = f;
  }
  ASSERT_TRUE(peers) << Stringify(fws);
  ASSERT_EQ(peers->getArray("tags")->size(), 1u);
  EXPECT_EQ(peers->getArray("tags")->getElement<std::string>(0), "gpuprov-cluster:train");
  Array::Ptr inbound = peers->getArray("inbound_rules");
  ASSERT_EQ(inbound->size(), 3u);
  EXPECT_EQ(Stringify(inbound->getObject(2)->getObject("sources")),
            R"({"tags":["gpuprov-cluster:train"]})");
  EXPECT_EQ(inbound->getObject(2)->getValue<std::string>("protocol"), "udp");

  // open_peer_ports: checked, nothing to change; idempotent.
  const std::string peers_request =
      R"({"cluster":"train","peer_ports":[{"port":6443,"protocol":"tcp"},)"
      R"({"port":10250,"protocol":"tcp"},{"port":51820,"protocol":"udp"}],"peers":[]})";
  OpResult opened = driver.OpenPeerPorts(peers_request);
  ASSERT_EQ(opened.status, GPUPROV_STATUS_OK) << opened;
  EXPECT_EQ(opened.json, "{}");
  EXPECT_EQ(emulator_->Count("firewalls"), 3);

  // gc sees the cluster's firewall and VPC as the cluster's.
  OpResult listed = driver.ListResources();
  ASSERT_EQ(listed.status, GPUPROV_STATUS_OK) << listed;
  EXPECT_TRUE(Contains(listed.json, R"("kind":"cluster_firewall")")) << listed.json;
  EXPECT_TRUE(Contains(listed.json, R"("kind":"cluster_network")")) << listed.json;
  // ... and each droplet and the cluster's things as the cluster's, so gc knows an agent (and
  // a network) whose server is gone.
  Object::Ptr doc = Poco::JSON::Parser().parse(listed.json).extract<Object::Ptr>();
  std::map<std::string, std::string> cluster_role;  // "kind name" -> "cluster/role"
  for (size_t i = 0; i < doc->getArray("resources")->size(); ++i) {
    Object::Ptr r = doc->getArray("resources")->getObject(i);
    cluster_role[r->getValue<std::string>("kind") + " " + r->getValue<std::string>("name")] =
        r->optValue<std::string>("cluster", "") + "/" + r->optValue<std::string>("role", "");
  }
  EXPECT_EQ(cluster_role["vm train"], "train/server") << listed.json;
  EXPECT_EQ(cluster_role["vm train-agent-1"], "train/agent") << listed.json;
  EXPECT_EQ(cluster_role["cluster_network gpuprov-train"], "train/") << listed.json;
  EXPECT_EQ(cluster_role["cluster_firewall gpuprov-train-peers"], "train/") << listed.json;

  // The server goes: the cluster's things stay for the agent; the agent goes: they go too.
  ASSERT_EQ(driver.Delete(R"({"id":")" + server.Vm()->getValue<std::string>("id") +
                          R"(","name":"train"})").status,
            GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("vpcs"), 1);
  EXPECT_EQ(emulator_->Count("firewalls"), 2);
  ASSERT_EQ(driver.Delete(R"({"id":")" + agent.Vm()->getValue<std::string>("id") +
                          R"(","name":"train-agent-1"})").status,
            GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("vpcs"), 0);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
  EXPECT_EQ(emulator_->Count("instances"), 0);
}

TEST_F(DigitalOceanEmulatorTest, ABadClusterIsRefusedBeforeAnyCall) {
  Driver driver(Config());
  emulator_->ClearRequests("digitalocean");
  OpResult r = driver.Create(WithCluster(CreateRequest("bad"), "Bad_Name", "server"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  EXPECT_TRUE(Contains(r.error, "cluster.name")) << r.error;
  EXPECT_TRUE(emulator_->Requests().empty());
}

TEST_F(DigitalOceanEmulatorTest, CapacityOnTheThirdNodeOfAClusterLeavesTheOthers) {
  Driver driver(Config());
  emulator_->Fault("capacity", 1, R"(,"body":"train-agent-2")");
  ASSERT_EQ(driver.Create(WithCluster(CreateRequest("train"), "train", "server")).status,
            GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Create(WithCluster(CreateRequest("train-agent-1"), "train", "agent")).status,
            GPUPROV_STATUS_OK);
  OpResult third = driver.Create(WithCluster(CreateRequest("train-agent-2"), "train", "agent"));
  EXPECT_EQ(third.status, GPUPROV_STATUS_CAPACITY) << third;
  EXPECT_EQ(emulator_->Count("instances"), 2);
}

// The nodes of one cluster created at once (one driver handle each, as the ABI asks) race to
// make the VPC gpuprov-<cluster>: DigitalOcean refuses a second VPC of that name, and the
// node that lost takes the VPC the other made. One VPC, every droplet in it, no create fails.
TEST_F(DigitalOceanEmulatorTest, NodesOfAClusterCreatedAtOnceShareOneVpc) {
  // Every request answered later, as a distant API is: the nodes' VPC lookups all come back
  // empty before any VPC is made, so their creates race.
  ASSERT_EQ(emulator_->Control("POST", "/settings",
                               R"({"cloud":"digitalocean","api_latency_ms":150})")
                .status,
            200);
  struct NoLatencyAfter {
    ~NoLatencyAfter() {
      emulator_->Control("POST", "/settings", R"({"cloud":"digitalocean","api_latency_ms":0})");
    }
  } no_latency_after;
  const std::vector<std::string> names = {"race", "race-agent-1", "race-agent-2", "race-agent-3"};
  std::vector<std::unique_ptr<Driver>> drivers;
  for (size_t i = 0; i < names.size(); ++i) drivers.push_back(std::make_unique<Driver>(Config()));
  std::vector<OpResult> results(names.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < names.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = drivers[i]->Create(
          WithCluster(CreateRequest(names[i]), "race", i == 0 ? "server" : "agent"));
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_EQ(results[i].status, GPUPROV_STATUS_OK) << names[i] << ": " << results[i] << "\n"
                                                    << drivers[i]->host().All();
  }
  EXPECT_EQ(emulator_->Count("vpcs"), 1);
  EXPECT_EQ(emulator_->Count("instances"), static_cast<long long>(names.size()));
  std::set<std::string> vpc_of_droplets;
  for (const auto& r : results) {
    Object::Ptr droplet = emulator_->Http("GET", emulator_->do_url() + "/droplets/" +
                                                     r.Vm()->getValue<std::string>("id"),
                                          "", true)
                              .Doc()
                              ->getObject("droplet");
    vpc_of_droplets.insert(droplet->getValue<std::string>("vpc_uuid"));
  }
  EXPECT_EQ(vpc_of_droplets.size(), 1u);
  // One firewall per droplet and the cluster's one.
  EXPECT_EQ(emulator_->Count("firewalls"), static_cast<long long>(names.size()) + 1);
}

TEST_F(DigitalOceanEmulatorTest, QuotaIsReported) {
  Driver driver(Config());
  emulator_->Fault("quota", 1);
  OpResult r = driver.Create(CreateRequest("do-quota"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_QUOTA) << r;
  EXPECT_TRUE(Contains(r.error, "droplet limit")) << r.error;
  EXPECT_EQ(emulator_->Count("ssh_keys"), 0);
}

TEST_F(DigitalOceanEmulatorTest, ThrottlingIsRetried) {
  Driver driver(Config());
  emulator_->Fault("throttle", 2);
  OpResult r = driver.Create(CreateRequest("do-throttle"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r << "\n" << driver.host().All();
  EXPECT_TRUE(Contains(driver.host().All(), "-> 429")) << driver.host().All();
  EXPECT_EQ(emulator_->Count("instances"), 1);
}

TEST_F(DigitalOceanEmulatorTest, ServerErrorBurstIsRetried) {
  Driver driver(Config());
  emulator_->Fault("server_error", 3);
  OpResult r = driver.Create(CreateRequest("do-5xx"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r << "\n" << driver.host().All();
  EXPECT_TRUE(Contains(driver.host().All(), "-> 500")) << driver.host().All();
  OpResult list = driver.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list;
  EXPECT_EQ(list.Doc()->getArray("vms")->size(), 1u);
}

TEST_F(DigitalOceanEmulatorTest, EndlessServerErrorsBecomeTransient) {
  Driver driver(Config());
  emulator_->Fault("server_error", 50);
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_TRANSIENT) << r;
  EXPECT_TRUE(Contains(r.error, "5 attempt")) << r.error;
}

TEST_F(DigitalOceanEmulatorTest, WrongTokenIsAuth) {
  ScopedEnv wrong("GPUPROV_TEST_WRONG_DO_TOKEN", "dop_v1_wrong_token_value");
  Driver driver(Config(R"(,"token_env":"GPUPROV_TEST_WRONG_DO_TOKEN")"));
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "DIGITALOCEAN_TOKEN")) << r.error;
  EXPECT_TRUE(Contains(r.error, "$GPUPROV_TEST_WRONG_DO_TOKEN")) << r.error;
  EXPECT_FALSE(Contains(r.error, "dop_v1_wrong_token_value")) << r.error;
  EXPECT_FALSE(Contains(driver.host().All(), "dop_v1_wrong_token_value"));
  OpResult c = driver.Create(CreateRequest("do-auth"));
  EXPECT_EQ(c.status, GPUPROV_STATUS_AUTH) << c;
}

TEST_F(DigitalOceanEmulatorTest, OpenPortsAddsToTheFirewall) {
  Driver driver(Config());
  Object::Ptr req = ParseJson(CreateRequest("do-ports"));
  Array::Ptr only_ssh = new Array();
  only_ssh->add(22);
  req->set("open_ports", only_ssh);
  OpResult c = driver.Create(Stringify(req));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  const std::string id = c.Vm()->getValue<std::string>("id");
  OpResult r = driver.OpenPorts(R"({"id":")" + id + R"(","ports":[6443,443]})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  auto [status, body] = emulator_->Http("GET", emulator_->do_url() + "/firewalls", "", true);
  ASSERT_EQ(status, 200) << body;
  Object::Ptr fw = ParseJson(body)->getArray("firewalls")->getObject(0);
  EXPECT_EQ(fw->getArray("inbound_rules")->size(), 3u) << body;
  EXPECT_EQ(emulator_->Count("firewalls"), 1);
}

// Create of an existing droplet returns it as it is; widening is open_ports' job.
TEST_F(DigitalOceanEmulatorTest, CreateOfAnExistingDropletWidensNothing) {
  Driver driver(Config());
  Object::Ptr req = ParseJson(CreateRequest("do-again"));
  Array::Ptr only_ssh = new Array();
  only_ssh->add(22);
  req->set("open_ports", only_ssh);
  OpResult first = driver.Create(Stringify(req));
  ASSERT_EQ(first.status, GPUPROV_STATUS_OK) << first;
  EXPECT_EQ(emulator_->Reachable("do-again"), "22");

  Driver rerun(Config());
  OpResult again = rerun.Create(CreateRequest("do-again"));  // asks for 22, 6443, 80, 443
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_TRUE(again.Doc()->getValue<bool>("existing"));
  Object::Ptr ports = again.Vm()->getObject("ports");
  EXPECT_TRUE(ports->has("22"));
  EXPECT_FALSE(ports->has("6443")) << Stringify(ports);  // reported: what is really open
  EXPECT_EQ(emulator_->Reachable("do-again"), "22");
  for (const char* change : {"POST /firewalls", "PUT /firewalls", "DELETE /firewalls",
                             "updating firewall", "creating firewall", "opening tcp"}) {
    EXPECT_FALSE(Contains(rerun.host().All(), change)) << change << "\n" << rerun.host().All();
  }
  auto [status, body] = emulator_->Http("GET", emulator_->do_url() + "/firewalls", "", true);
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(ParseJson(body)->getArray("firewalls")->getObject(0)->getArray("inbound_rules")->size(),
            1u)
      << body;
}

// open_ports adds only what is missing, keeps what the user added, and a repeat changes nothing.
TEST_F(DigitalOceanEmulatorTest, OpenPortsKeepsUserRulesAndIsIdempotent) {
  Driver driver(Config());
  Object::Ptr req = ParseJson(CreateRequest("do-user"));
  Array::Ptr only_ssh = new Array();
  only_ssh->add(22);
  req->set("open_ports", only_ssh);
  OpResult c = driver.Create(Stringify(req));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  const std::string id = c.Vm()->getValue<std::string>("id");
  auto firewall = [&] {
    auto [status, body] = emulator_->Http("GET", emulator_->do_url() + "/firewalls", "", true);
    EXPECT_EQ(status, 200) << body;
    return ParseJson(body)->getArray("firewalls")->getObject(0);
  };
  const std::string fw_id = firewall()->getValue<std::string>("id");
  // The user's own rules: 9000 from everywhere, 8080 (and 6443) from a private range only.
  auto [added, added_body] = emulator_->Http(
      "POST", emulator_->do_url() + "/firewalls/" + fw_id + "/rules",
      R"({"inbound_rules":[{"protocol":"tcp","ports":"9000","sources":{"addresses":["0.0.0.0/0"]}},)"
      R"({"protocol":"tcp","ports":"8080","sources":{"addresses":["10.0.0.0/8"]}},)"
      R"({"protocol":"tcp","ports":"6443","sources":{"addresses":["10.0.0.0/8"]}}]})",
      true);
  ASSERT_EQ(added, 204) << added_body;
  EXPECT_EQ(emulator_->Reachable("do-user"), "22,9000");

  OpResult r = driver.OpenPorts(R"({"id":")" + id + R"(","ports":[22,6443,80,443]})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(emulator_->Reachable("do-user"), "22,80,443,6443,9000");
  Object::Ptr fw = firewall();
  std::ostringstream rules_text;
  fw->getArray("inbound_rules")->stringify(rules_text);
  const std::string rules = rules_text.str();
  EXPECT_EQ(fw->getArray("inbound_rules")->size(), 7u) << rules;  // 22, 3 user rules, 3 new
  EXPECT_TRUE(Contains(rules, "10.0.0.0/8")) << rules;
  EXPECT_TRUE(Contains(driver.host().All(), "opening tcp 80,443,6443")) << driver.host().All();

  const size_t before = emulator_->Requests().size();
  OpResult repeat = driver.OpenPorts(R"({"id":")" + id + R"(","ports":[22,6443,80,443]})");
  ASSERT_EQ(repeat.status, GPUPROV_STATUS_OK) << repeat;
  const std::vector<std::string> log = emulator_->Requests();
  for (size_t i = before; i < log.size(); ++i) {
    EXPECT_EQ(log[i].rfind("GET ", 0), 0u) << "a repeat changed something: " << log[i];
  }
  EXPECT_EQ(firewall()->getArray("inbound_rules")->size(), 7u);
}

// allow_from (docs/driver-protocol.md): the firewall's rules of 6443/80/443 take the given sources,
// open_ports replaces them with another list (the user's own rules of other ports stay), and
// both results confirm it.
TEST_F(DigitalOceanEmulatorTest, AllowFromNarrowsTheFirewallAndOpenPortsUpdatesIt) {
  Driver driver(Config());
  OpResult check = driver.Check();
  ASSERT_EQ(check.status, GPUPROV_STATUS_OK) << check;
  EXPECT_TRUE(check.Doc()->getValue<bool>("allow_from"));
  Object::Ptr req = ParseJson(CreateRequest("do-narrow"));
  req->set("allow_from", ParseJson(R"({"a":["127.0.0.1/32"]})")->getArray("a"));
  req->set("allow_from_ports", ParseJson(R"({"a":[80,443,6443]})")->getArray("a"));
  OpResult c = driver.Create(Stringify(req));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_TRUE(Contains(c.json, R"("allow_from":["127.0.0.1/32"])")) << c.json;
  const std::string id = c.Vm()->getValue<std::string>("id");
  EXPECT_EQ(emulator_->Reachable("do-narrow"), "22,80,443,6443");
  auto rules = [&] {
    auto [status, body] = emulator_->Http("GET", emulator_->do_url() + "/firewalls", "", true);
    EXPECT_EQ(status, 200) << body;
    std::ostringstream out;
    ParseJson(body)->getArray("firewalls")->getObject(0)->getArray("inbound_rules")->stringify(out);
    return out.str();
  };
  EXPECT_TRUE(Contains(rules(), R"({"ports":"6443","protocol":"tcp","sources":{"addresses":["127.0.0.1/32"]}})"))
      << rules();
  EXPECT_TRUE(Contains(rules(), R"({"ports":"22","protocol":"tcp","sources":{"addresses":["0.0.0.0/0","::/0"]}})"))
      << rules();

  OpResult r = driver.OpenPorts(R"({"id":")" + id + R"(","ports":[22,80,443,6443],)"
                                R"("allow_from":["10.0.0.0/8"],"allow_from_ports":[80,443,6443]})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(r.json, R"({"allow_from":["10.0.0.0/8"]})");
  EXPECT_EQ(emulator_->Reachable("do-narrow"), "22");
  EXPECT_FALSE(Contains(rules(), "127.0.0.1/32")) << rules();
  EXPECT_TRUE(Contains(rules(), R"("ports":"443","protocol":"tcp","sources":{"addresses":["10.0.0.0/8"]})")) << rules();

  // A repeat changes nothing.
  const size_t before = emulator_->Requests().size();
  r = driver.OpenPorts(R"({"id":")" + id + R"(","ports":[22,80,443,6443],)"
                       R"("allow_from":["10.0.0.0/8"],"allow_from_ports":[80,443,6443]})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  const std::vector<std::string> log = emulator_->Requests();
  for (size_t i = before; i < log.size(); ++i) {
    EXPECT_EQ(log[i].rfind("GET ", 0), 0u) << "a repeat changed something: " << log[i];
  }
  ASSERT_EQ(driver.Delete(R"({"id":")" + id + R"(","name":"do-narrow"})").status, GPUPROV_STATUS_OK);
}

TEST_F(DigitalOceanEmulatorTest, OversizedUserDataIsRefusedBeforeAnyCall) {
  Driver driver(Config());
  OpResult r = driver.Create(CreateRequest("do-big", kKeyA, std::string(64 * 1024 + 1, 'x')));
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  EXPECT_TRUE(Contains(r.error, "64 KiB")) << r.error;
  EXPECT_EQ(emulator_->Count("ssh_keys"), 0);
  EXPECT_EQ(emulator_->Count("instances"), 0);
}

TEST_F(DigitalOceanEmulatorTest, UnofferedGpuIsInvalidInput) {
  Driver driver(Config());
  Object::Ptr req = ParseJson(CreateRequest("do-l4"));
  req->getObject("gpu")->set("type", "L4");
  OpResult r = driver.Create(Stringify(req));
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  EXPECT_TRUE(Contains(r.error, "does not offer L4")) << r.error;
  EXPECT_EQ(emulator_->Count("instances"), 0);
}

}  // namespace
}  // namespace gpuprov::digitalocean
