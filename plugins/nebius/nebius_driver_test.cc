// SPDX-License-Identifier: Apache-2.0
//
// Loads the BUILT nebius driver .so with dlopen, as the host does, and drives it through the C
// vtable against the nebius gRPC emulator (tests/emulators, `gpuprov-emulator --backend memory
// --clouds nebius`) started as a child process. Authentication goes the service-account way:
// the emulator writes the credentials file named by NEBIUS_CREDENTIALS_FILE and the driver
// exchanges JWTs signed with it for access tokens. Talks only to 127.0.0.1.
//
// This binary does not link the generated protobuf messages (the driver .so carries them).
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "driver_test_util.h"
#include "gpuprov/driver_abi.h"

namespace gpuprov::nebius {
namespace {

using namespace drivers::testing;  // the shared driver test helpers (driver_test_util.h)
using Poco::JSON::Array;
using Poco::JSON::Object;

constexpr const char* kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF test@gpuprov";
constexpr const char* kProject = "project-e00test";

constexpr char kDriverPath[] = GPUPROV_NEBIUS_DRIVER_PATH;
using Driver = DriverAt<kDriverPath>;

std::string CreateRequest(const std::string& name, const std::string& gpu = "H100",
                          std::vector<int> ports = {22, 6443, 80, 443}) {
  Object::Ptr req = new Object();
  req->set("name", name);
  req->set("region", "");
  req->set("instance_type", "");
  if (!gpu.empty()) {
    Object::Ptr g = new Object();
    g->set("type", gpu);
    g->set("count", 1);
    req->set("gpu", g);
  }
  req->set("image", "");
  req->set("ssh_public_key", kKey);
  req->set("user_data", "#!/bin/bash\necho hi\n");
  Object::Ptr tags = new Object();
  tags->set("gpuprov", "1");
  tags->set("gpuprov-name", name);
  tags->set("Team", "ML");
  req->set("tags", tags);
  Array::Ptr p = new Array();
  for (int port : ports) p->add(port);
  req->set("open_ports", p);
  return Stringify(req);
}

// --- no emulator needed -----------------------------------------------------

TEST(NebiusDescriptor, IdentityCapabilitiesAndKeys) {
  const gpuprov_type_driver_descriptor* d = Driver::Descriptor();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->magic, GPUPROV_DRIVER_MAGIC);
  EXPECT_STREQ(d->name, "nebius");
  // How its VM learns its public address: REFERENCE.md section 6.
  EXPECT_STREQ(d->node_address, GPUPROV_NODE_ADDRESS_NEBIUS);
  EXPECT_EQ(d->capabilities,
            static_cast<uint64_t>(GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_BOOT_CLOUD_INIT |
                                  GPUPROV_CAP_OPEN_PORTS | GPUPROV_CAP_HOSTS_KUBERNETES |
                                  GPUPROV_CAP_SPOT | GPUPROV_CAP_CLUSTER));
  ExpectEveryOperation(*d->vtable);
  std::vector<std::string> keys;
  for (size_t i = 0; i < d->config_key_count; ++i) keys.push_back(d->config_keys[i]->name);
  for (const char* k : {"project_id", "credentials_file", "region", "subnet_id", "image_family"}) {
    EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
  }
}

TEST(NebiusDescriptor, RefusesPlaintextToANonLoopbackEndpoint) {
  Driver driver(R"({"endpoint":"http://compute.api.nebius.cloud:443","config":{}})");
  EXPECT_EQ(driver.init_status(), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_TRUE(Contains(driver.init_error(), "loopback")) << driver.init_error();
}

TEST(NebiusDescriptor, NoCredentialsIsAuthBeforeAnyNetworkCall) {
  ScopedTempDir home("nebius-home");
  ScopedEnv h("HOME", home.path().c_str());
  ScopedEnv t("NEBIUS_IAM_TOKEN", nullptr);
  ScopedEnv f("NEBIUS_CREDENTIALS_FILE", nullptr);
  ScopedEnv p("NEBIUS_PROJECT_ID", kProject);
  // Port 9 (discard) on loopback: a call that got through would fail differently.
  Driver driver(R"({"endpoint":"127.0.0.1:9","config":{}})");
  ASSERT_EQ(driver.init_status(), GPUPROV_STATUS_OK) << driver.init_error();
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "NEBIUS_IAM_TOKEN")) << r.error;
  EXPECT_TRUE(Contains(r.error, "credentials_file")) << r.error;
}

TEST(NebiusDescriptor, NoCredentialsNorProjectIsAuthForGc) {
  ScopedTempDir home("nebius-home");
  ScopedEnv h("HOME", home.path().c_str());
  ScopedEnv t("NEBIUS_IAM_TOKEN", nullptr);
  ScopedEnv f("NEBIUS_CREDENTIALS_FILE", nullptr);
  ScopedEnv p("NEBIUS_PROJECT_ID", nullptr);
  Driver driver(R"({"endpoint":"127.0.0.1:9","config":{}})");
  // AUTH: `gpuprov gc` skips a cloud without credentials instead of failing on it.
  OpResult r = driver.Call(driver.vtable().list_resources, "{}");
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
}

TEST(NebiusDescriptor, NoProjectNamesWhereToSetIt) {
  ScopedTempDir home("nebius-home");
  ScopedEnv h("HOME", home.path().c_str());
  ScopedEnv p("NEBIUS_PROJECT_ID", nullptr);
  ScopedEnv t("NEBIUS_IAM_TOKEN", "some-token");
  Driver driver(R"({"endpoint":"127.0.0.1:9","config":{}})");
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  EXPECT_TRUE(Contains(r.error, "project_id")) << r.error;
}

TEST(NebiusDescriptor, BadInputIsRefusedBeforeAnyCall) {
  ScopedEnv t("NEBIUS_IAM_TOKEN", "some-token");
  ScopedEnv p("NEBIUS_PROJECT_ID", kProject);
  Driver driver(R"({"endpoint":"127.0.0.1:9","config":{}})");
  OpResult bad = driver.Create(CreateRequest("Bad_Name"));
  EXPECT_EQ(bad.status, GPUPROV_STATUS_INVALID_INPUT) << bad;
  OpResult gpu = driver.Create(CreateRequest("demo", "A100"));
  EXPECT_EQ(gpu.status, GPUPROV_STATUS_INVALID_INPUT) << gpu;
  EXPECT_TRUE(Contains(gpu.error, "H100")) << gpu.error;
  Object::Ptr req = ParseJson(CreateRequest("big"));
  req->set("user_data", std::string(32768, 'x'));
  OpResult big = driver.Create(Stringify(req));
  EXPECT_EQ(big.status, GPUPROV_STATUS_INVALID_INPUT) << big;
  req = ParseJson(CreateRequest("key"));
  req->set("ssh_public_key", "not a key");
  OpResult key = driver.Create(Stringify(req));
  EXPECT_EQ(key.status, GPUPROV_STATUS_INVALID_INPUT) << key;
  EXPECT_TRUE(Contains(key.error, "ssh_public_key")) << key.error;
}

// --- the emulator -----------------------------------------------------------

class NebiusEmulator {
 public:
  static std::optional<std::string> Problem() {
    return EmulatorProcess::Problem(GPUPROV_EMULATOR_PATH);
  }
  bool Start(std::string* problem) {
    creds_ = (dir_.path() / "credentials.json").string();
    return process_.Start(GPUPROV_EMULATOR_PATH,
                          {"--backend", "memory", "--clouds", "nebius", "--boot-seconds", "1"},
                          {{"NEBIUS_CREDENTIALS_FILE", creds_}, {"NEBIUS_IAM_TOKEN", "emu-token"}},
                          {"nebius"}, problem);
  }
  const std::string& creds() const { return creds_; }
  std::string url() const { return process_.Url("nebius"); }
  void Reset() { process_.Reset("nebius"); }
  void Fault(const std::string& json_fields) {
    process_.Fault(R"({"cloud":"nebius",)" + json_fields + "}");
  }
  long long Count(const std::string& what) { return process_.Count("nebius", what); }
  std::vector<std::string> Requests() { return process_.Requests("nebius"); }
  void Settings(const std::string& json_fields) {
    HttpReply r = process_.Control("POST", "/settings", R"({"cloud":"nebius",)" + json_fields + "}");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  void Preempt(const std::string& name) {
    HttpReply r =
        process_.Control("POST", "/preempt", R"({"cloud":"nebius","name":")" + name + R"("})");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  std::string Reachable(const std::string& name) {
    return process_.ReachablePorts("nebius", name);
  }
  std::string UserData(const std::string& name) { return InstanceField(name, "user_data"); }
  /// The emulator's firewall on that instance's private address, one "protocol ports from
  /// sources" a rule (sources sorted), sorted; {"null"} when nothing filters it.
  std::vector<std::string> PrivateIngress(const std::string& name) {
    HttpReply r = process_.Control("GET", "/instances?cloud=nebius");
    Array::Ptr list = r.Doc()->getArray("instances");
    for (size_t i = 0; list && i < list->size(); ++i) {
      Object::Ptr o = list->getObject(static_cast<unsigned>(i));
      if (o->getValue<std::string>("name") != name) continue;
      Array::Ptr rules = o->getArray("private_ingress");
      if (!rules) return {"null"};
      std::vector<std::string> out;
      for (size_t k = 0; k < rules->size(); ++k) {
        Object::Ptr rule = rules->getObject(static_cast<unsigned>(k));
        std::vector<std::string> sources;
        Array::Ptr src = rule->getArray("sources");
        for (size_t j = 0; j < src->size(); ++j) sources.push_back(src->getElement<std::string>(j));
        std::sort(sources.begin(), sources.end());
        std::string line = rule->getValue<std::string>("protocol") + " " +
                           rule->getValue<std::string>("ports") + " from";
        for (const auto& a : sources) line += " " + a;
        out.push_back(line);
      }
      std::sort(out.begin(), out.end());
      return out;
    }
    return {};
  }
  /// A field of the emulator's /instances row of that instance name ("" when none).
  std::string InstanceField(const std::string& name, const std::string& field) {
    HttpReply r = process_.Control("GET", "/instances?cloud=nebius");
    Array::Ptr list = r.Doc()->getArray("instances");
    for (size_t i = 0; list && i < list->size(); ++i) {
      Object::Ptr o = list->getObject(static_cast<unsigned>(i));
      if (o->getValue<std::string>("name") == name) return o->optValue<std::string>(field, "");
    }
    return "";
  }

 private:
  ScopedTempDir dir_{"nebius-emu"};
  std::string creds_;
  EmulatorProcess process_;
};

class NebiusEmulatorTest : public SharedEmulatorTest<NebiusEmulator> {
 protected:
  void SetUp() override {
    SharedEmulatorTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    emulator_->Reset();
    token_ = std::make_unique<ScopedEnv>("NEBIUS_IAM_TOKEN", nullptr);
    creds_ = std::make_unique<ScopedEnv>("NEBIUS_CREDENTIALS_FILE", emulator_->creds().c_str());
    project_ = std::make_unique<ScopedEnv>("NEBIUS_PROJECT_ID", kProject);
  }
  void TearDown() override {
    token_.reset();
    creds_.reset();
    project_.reset();
  }

  static std::string Config(const std::string& extra = "") {
    return R"({"endpoint":")" + emulator_->url() +
           R"(","config":{"poll_interval_ms":100,"call_timeout_seconds":10,)"
           R"("retry":{"max_attempts":6,"base_delay_ms":5,"max_delay_ms":50,)"
           R"("max_retry_after_ms":100,"total_budget_ms":20000,"attempt_timeout_ms":10000})" +
           extra + "}}";
  }

  static Object::Ptr WaitRunning(Driver& driver, const std::string& id) {
    return drivers::testing::WaitRunning(driver, id, std::chrono::seconds(30), "instance");
  }

  void ExpectNothingLeft() {
    EXPECT_EQ(emulator_->Count("instances"), 0);
    EXPECT_EQ(emulator_->Count("disks"), 0);
    EXPECT_EQ(emulator_->Count("security_groups"), 0);
    EXPECT_EQ(emulator_->Count("security_rules"), 0);
  }

  std::unique_ptr<ScopedEnv> token_, creds_, project_;
};

TEST_F(NebiusEmulatorTest, CheckExchangesTheServiceAccountKey) {
  Driver driver(Config());
  ASSERT_EQ(driver.init_status(), GPUPROV_STATUS_OK) << driver.init_error();
  OpResult r = driver.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  Object::Ptr doc = ParseJson(r.json);
  EXPECT_TRUE(Contains(doc->getValue<std::string>("account"), kProject)) << r.json;
  EXPECT_TRUE(Contains(doc->getValue<std::string>("account"), emulator_->creds())) << r.json;
  EXPECT_LT(doc->getValue<int>("user_data_limit"), 32768);
  EXPECT_FALSE(Contains(r.json, "v1.emu"));  // no token in the result
}

TEST_F(NebiusEmulatorTest, ReadyTokenFromTheEnvironment) {
  ScopedEnv t("NEBIUS_IAM_TOKEN", "emu-token");
  Driver driver(Config());
  EXPECT_EQ(driver.Check().status, GPUPROV_STATUS_OK);
  ScopedEnv wrong("NEBIUS_IAM_TOKEN", "wrong-token");
  Driver refused(Config());
  OpResult r = refused.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "$NEBIUS_IAM_TOKEN")) << r.error;
  EXPECT_FALSE(Contains(r.error, "wrong-token")) << r.error;
}

TEST_F(NebiusEmulatorTest, ProjectAndKeyFromTheNebiusCliFiles) {
  // No variables: the project from the CLI profile's parent-id, the key from
  // ~/.nebius/credentials.json.
  ScopedTempDir home("nebius-home");
  std::filesystem::create_directories(home.path() / ".nebius");
  {
    std::ofstream cfg(home.path() / ".nebius" / "config.yaml");
    cfg << "default: other\nprofiles:\n  other:\n    parent-id: project-e00nope\n"
           "  work:\n    parent-id: " << kProject << "\n";
  }
  std::filesystem::copy_file(emulator_->creds(), home.path() / ".nebius" / "credentials.json");
  ScopedEnv h("HOME", home.path().c_str());
  ScopedEnv f("NEBIUS_CREDENTIALS_FILE", nullptr);
  ScopedEnv p("NEBIUS_PROJECT_ID", nullptr);
  ScopedEnv profile("NEBIUS_PROFILE", "work");
  Driver driver(Config());
  OpResult r = driver.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  const std::string account = r.Doc()->getValue<std::string>("account");
  EXPECT_TRUE(Contains(account, kProject)) << account;
  EXPECT_TRUE(Contains(account, ".nebius/credentials.json")) << account;
}

TEST_F(NebiusEmulatorTest, CreateGetListOpenPortsDeleteLeaveNothing) {
  Driver driver(Config());
  OpResult c = driver.Create(CreateRequest("nb-one"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  Object::Ptr vm = ParseJson(c.json)->getObject("vm");
  EXPECT_FALSE(ParseJson(c.json)->getValue<bool>("existing"));
  const std::string id = vm->getValue<std::string>("id");
  EXPECT_EQ(id.rfind("computeinstance-", 0), 0u) << id;
  EXPECT_EQ(vm->getValue<std::string>("instance_type"), "gpu-h100-sxm/1gpu-16vcpu-200gb");
  EXPECT_EQ(vm->getValue<std::string>("gpus"), "H100:1");
  EXPECT_EQ(vm->getObject("tags")->getValue<std::string>("gpuprov"), "1");
  EXPECT_EQ(vm->getObject("tags")->getValue<std::string>("gpuprov-name"), "nb-one");
  EXPECT_EQ(vm->getObject("tags")->getValue<std::string>("team"), "ml");
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("disks"), 1);
  EXPECT_EQ(emulator_->Count("security_groups"), 1);

  Object::Ptr running = WaitRunning(driver, id);
  ASSERT_TRUE(running);
  EXPECT_EQ(running->getValue<std::string>("public_ip").find('/'), std::string::npos);
  EXPECT_EQ(running->getValue<std::string>("public_ip").rfind("127.", 0), 0u);
  EXPECT_EQ(running->getValue<std::string>("ssh_user"), "ubuntu");
  EXPECT_EQ(emulator_->Reachable("nb-one"), "22,80,443,6443");

  // The user data: cloud-config with the key for ubuntu, then the boot script.
  const std::string ud = emulator_->UserData("nb-one");
  EXPECT_TRUE(Contains(ud, "text/cloud-config")) << ud;
  EXPECT_TRUE(Contains(ud, kKey)) << ud;
  EXPECT_TRUE(Contains(ud, "#!/bin/bash\necho hi")) << ud;

  // By name: the same VM, not a second one.
  OpResult again = driver.Create(CreateRequest("nb-one"));
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_TRUE(ParseJson(again.json)->getValue<bool>("existing"));
  EXPECT_EQ(ParseJson(again.json)->getObject("vm")->getValue<std::string>("id"), id);
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("disks"), 1);

  OpResult byname = driver.Get(R"({"name":"nb-one"})");
  ASSERT_EQ(byname.status, GPUPROV_STATUS_OK) << byname;
  OpResult list = driver.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list;
  EXPECT_EQ(ParseJson(list.json)->getArray("vms")->size(), 1u);

  OpResult open = driver.OpenPorts(R"({"id":")" + id + R"(","name":"nb-one","ports":[22,8080]})");
  ASSERT_EQ(open.status, GPUPROV_STATUS_OK) << open;
  EXPECT_EQ(emulator_->Reachable("nb-one"), "22,80,443,6443,8080");

  OpResult del = driver.Delete(R"({"id":")" + id + R"(","name":"nb-one"})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del;
  EXPECT_TRUE(ParseJson(del.json)->getValue<bool>("deleted"));
  ExpectNothingLeft();
  OpResult gone = driver.Get(R"({"id":")" + id + R"("})");
  EXPECT_EQ(gone.status, GPUPROV_STATUS_NOT_FOUND) << gone;
  OpResult twice = driver.Delete(R"({"id":")" + id + R"(","name":"nb-one"})");
  ASSERT_EQ(twice.status, GPUPROV_STATUS_OK) << twice;
  EXPECT_FALSE(ParseJson(twice.json)->getValue<bool>("deleted"));
}

// allow_from (docs/driver-protocol.md): the narrowed ports get rules with those source_cidrs;
// open_ports replaces the rules that admit other sources (rules are immutable).
TEST_F(NebiusEmulatorTest, AllowFromNarrowsTheSecurityRulesAndOpenPortsReplacesThem) {
  Driver driver(Config());
  OpResult check = driver.Check();
  ASSERT_EQ(check.status, GPUPROV_STATUS_OK) << check;
  EXPECT_TRUE(ParseJson(check.json)->getValue<bool>("allow_from"));
  Object::Ptr req = ParseJson(CreateRequest("nb-narrow"));
  req->set("allow_from", ParseJson(R"({"a":["127.0.0.1/32","192.0.2.0/24"]})")->getArray("a"));
  req->set("allow_from_ports", ParseJson(R"({"a":[80,443,6443]})")->getArray("a"));
  OpResult c = driver.Create(Stringify(req));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c << "\n" << driver.host().All();
  EXPECT_TRUE(Contains(c.json, R"("allow_from":["127.0.0.1/32","192.0.2.0/24"])")) << c.json;
  const std::string id = ParseJson(c.json)->getObject("vm")->getValue<std::string>("id");
  ASSERT_TRUE(WaitRunning(driver, id));
  EXPECT_EQ(emulator_->Reachable("nb-narrow"), "22,80,443,6443");

  const std::string narrower = R"({"id":")" + id +
                               R"(","name":"nb-narrow","ports":[22,80,443,6443],)"
                               R"("allow_from":["10.0.0.0/8"],"allow_from_ports":[80,443,6443]})";
  OpResult r = driver.OpenPorts(narrower);
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r << "\n" << driver.host().All();
  EXPECT_EQ(r.json, R"({"allow_from":["10.0.0.0/8"]})");
  EXPECT_EQ(emulator_->Reachable("nb-narrow"), "22");
  // A repeat makes and deletes nothing.
  const long long rules = emulator_->Count("security_rules");
  Driver repeat(Config());
  ASSERT_EQ(repeat.OpenPorts(narrower).status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("security_rules"), rules);
  EXPECT_FALSE(Contains(repeat.host().All(), "opening tcp")) << repeat.host().All();
  EXPECT_FALSE(Contains(repeat.host().All(), "delete security rule")) << repeat.host().All();

  // SSH too: the 0.0.0.0/0 rule of 22 is replaced.
  r = driver.OpenPorts(R"({"id":")" + id +
                       R"(","name":"nb-narrow","ports":[22,80,443,6443],)"
                       R"("allow_from":["10.0.0.0/8"],"allow_from_ports":[22,80,443,6443]})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r << "\n" << driver.host().All();
  EXPECT_EQ(emulator_->Reachable("nb-narrow"), "");

  // Everyone again.
  r = driver.OpenPorts(R"({"id":")" + id +
                       R"(","name":"nb-narrow","ports":[22,80,443,6443],)"
                       R"("allow_from":["0.0.0.0/0"],"allow_from_ports":[22,80,443,6443]})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(emulator_->Reachable("nb-narrow"), "22,80,443,6443");

  req = ParseJson(CreateRequest("nb-v6"));
  req->set("allow_from", ParseJson(R"({"a":["2001:db8::/32"]})")->getArray("a"));
  req->set("allow_from_ports", ParseJson(R"({"a":[6443]})")->getArray("a"));
  OpResult v6 = driver.Create(Stringify(req));
  EXPECT_EQ(v6.status, GPUPROV_STATUS_INVALID_INPUT) << v6;
  EXPECT_TRUE(Contains(v6.error, "allow_from")) << v6.error;

  ASSERT_EQ(driver.Delete(R"({"id":")" + id + R"(","name":"nb-narrow"})").status,
            GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(NebiusEmulatorTest, CapacityAndQuotaAreTheirStatusesAndLeaveNothing) {
  Driver driver(Config());
  emulator_->Fault(R"("fault":"capacity")");
  OpResult cap = driver.Create(CreateRequest("nb-cap"));
  EXPECT_EQ(cap.status, GPUPROV_STATUS_CAPACITY) << cap;
  ExpectNothingLeft();
  emulator_->Fault(R"("fault":"quota")");
  OpResult quota = driver.Create(CreateRequest("nb-quota"));
  EXPECT_EQ(quota.status, GPUPROV_STATUS_QUOTA) << quota;
  ExpectNothingLeft();
  // The same, reported by the create operation instead of the call.
  emulator_->Fault(R"("fault":"capacity","value":"operation")");
  OpResult cap_op = driver.Create(CreateRequest("nb-capop"));
  EXPECT_EQ(cap_op.status, GPUPROV_STATUS_CAPACITY) << cap_op;
  ExpectNothingLeft();
}

// U5: the create operation succeeds, then the start fails for want of capacity: the instance
// shows STOPPED without reconciling and its newest operation carries the error (what SkyPilot's
// Nebius provisioner watches for). That is CAPACITY with the operation's reason, cleaned up, so
// failover moves on; not a "stopped" VM for the host to wait on.
TEST_F(NebiusEmulatorTest, AStartThatFailsAfterTheCreateIsCapacityWithItsReason) {
  Driver driver(Config());
  emulator_->Fault(R"("fault":"capacity","value":"after_start")");
  OpResult r = driver.Create(CreateRequest("nb-nostart"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_CAPACITY) << r;
  EXPECT_TRUE(Contains(r.error, "not enough resources")) << r.error;
  EXPECT_TRUE(Contains(r.error, "Start instance nb-nostart")) << r.error;
  ExpectNothingLeft();
}

// Spot (REFERENCE.md §3.7): "spot": true makes a preemptible instance (on_preemption STOP,
// recovery_policy FAIL); one Compute stopped is "preempted" with the reason in get and list; a
// platform that takes no preemptibles is refused before anything is made; offers of a platform
// allowed_for_preemptibles are sold as spot at an unknown price (0: none in the API, no table).
TEST_F(NebiusEmulatorTest, SpotIsAPreemptibleInstanceReadAsPreemptedOnceStopped) {
  Driver driver(Config());
  OpResult offers = driver.Offers(R"({"gpu":{"type":"H100","count":1},"region":""})");
  ASSERT_EQ(offers.status, GPUPROV_STATUS_OK) << offers;
  ASSERT_EQ(offers.Doc()->getArray("offers")->size(), 1u) << offers.json;
  Object::Ptr h100 = offers.Doc()->getArray("offers")->getObject(0);
  ASSERT_TRUE(h100->has("spot_price_per_hour")) << offers.json;
  EXPECT_EQ(h100->getValue<double>("spot_price_per_hour"), 0.0) << offers.json;
  OpResult cpu_offers = driver.Offers(R"({"gpu":null,"region":""})");
  ASSERT_EQ(cpu_offers.status, GPUPROV_STATUS_OK) << cpu_offers;
  ASSERT_EQ(cpu_offers.Doc()->getArray("offers")->size(), 1u) << cpu_offers.json;
  EXPECT_FALSE(cpu_offers.Doc()->getArray("offers")->getObject(0)->has("spot_price_per_hour"))
      << cpu_offers.json;

  Object::Ptr cpu = ParseJson(CreateRequest("nb-spot-cpu", ""));
  cpu->set("spot", true);
  OpResult refused = driver.Create(Stringify(cpu));
  EXPECT_EQ(refused.status, GPUPROV_STATUS_INVALID_INPUT) << refused;
  EXPECT_TRUE(Contains(refused.error, "cpu-d3")) << refused.error;
  EXPECT_TRUE(Contains(refused.error, "allowed_for_preemptibles")) << refused.error;
  EXPECT_TRUE(Contains(refused.error, "gpu-h100-sxm")) << refused.error;
  ExpectNothingLeft();

  Object::Ptr req = ParseJson(CreateRequest("nb-spot"));
  req->set("spot", true);
  OpResult c = driver.Create(Stringify(req));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  const std::string id = c.Vm()->getValue<std::string>("id");
  EXPECT_TRUE(c.Vm()->optValue<bool>("spot", false)) << c.json;
  EXPECT_EQ(emulator_->InstanceField("nb-spot", "on_preemption"), "STOP");
  EXPECT_EQ(emulator_->InstanceField("nb-spot", "recovery_policy"), "FAIL");
  Object::Ptr running = WaitRunning(driver, id);
  ASSERT_TRUE(running);
  EXPECT_TRUE(running->optValue<bool>("spot", false));

  emulator_->Preempt("nb-spot");
  OpResult g = driver.Get(R"({"id":")" + id + R"(","name":"nb-spot"})");
  ASSERT_EQ(g.status, GPUPROV_STATUS_OK) << g;
  EXPECT_EQ(g.Vm()->getValue<std::string>("state"), "preempted") << g.json;
  EXPECT_TRUE(Contains(g.Vm()->getValue<std::string>("message"), "preemptible")) << g.json;
  EXPECT_EQ(g.Vm()->optValue<std::string>("public_ip", ""), "") << g.json;
  OpResult list = driver.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list;
  Object::Ptr listed = list.Doc()->getArray("vms")->getObject(0);
  EXPECT_EQ(listed->getValue<std::string>("state"), "preempted") << list.json;
  EXPECT_TRUE(listed->optValue<bool>("spot", false)) << list.json;

  // The host replaces it: delete (its disk and group go too), then a new one of the name.
  ASSERT_EQ(driver.Delete(R"({"id":")" + id + R"(","name":"nb-spot"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
  OpResult again = driver.Create(Stringify(req));
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_NE(again.Vm()->getValue<std::string>("id"), id);
  EXPECT_FALSE(again.Doc()->getValue<bool>("existing"));
}

// A regular VM keeps its on-demand spec and is never read as preempted.
TEST_F(NebiusEmulatorTest, ARegularVmHasNoPreemptibleSpec) {
  Driver driver(Config());
  OpResult c = driver.Create(CreateRequest("nb-regular"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_FALSE(c.Vm()->has("spot")) << c.json;
  EXPECT_EQ(emulator_->InstanceField("nb-regular", "on_preemption"), "");
  EXPECT_EQ(emulator_->InstanceField("nb-regular", "recovery_policy"), "RECOVER");
}

// Part 2 of issue 30: the gRPC methods of the nebius/api protos (snapshot 5101002) for the
// services the driver uses, transcribed. Every call the driver makes in a whole lifecycle
// (check, offers, create, get, list, open_ports, gc, delete) is one of them.
const std::vector<VendorOperation> kNebiusMethods = [] {
  std::vector<VendorOperation> out;
  static const std::vector<std::pair<const char*, std::vector<const char*>>> services = {
      {"/nebius.compute.v1.InstanceService/",
       {"Get", "GetByName", "BatchGet", "List", "ListInstancesByNVLInstanceGroup", "Create",
        "Update", "Delete", "Start", "Stop", "ListOperationsByParent"}},
      {"/nebius.compute.v1.DiskService/",
       {"Get", "GetByName", "List", "Create", "Update", "Delete", "ListOperationsByParent"}},
      {"/nebius.compute.v1.PlatformService/", {"GetByName", "List"}},
      {"/nebius.common.v1.OperationService/", {"Get", "List"}},
      {"/nebius.vpc.v1.SubnetService/",
       {"Get", "GetByName", "List", "ListByNetwork", "Create", "Update", "Delete"}},
      {"/nebius.vpc.v1.SecurityGroupService/",
       {"Get", "GetByName", "List", "ListByNetwork", "Create", "Update", "Delete"}},
      {"/nebius.vpc.v1.SecurityRuleService/",
       {"Get", "GetByName", "List", "Create", "Update", "Delete"}},
      {"/nebius.iam.v1.TokenExchangeService/", {"Exchange"}},
  };
  static std::vector<std::string> paths;
  for (const auto& [service, methods] : services) {
    for (const char* m : methods) paths.push_back(std::string(service) + m);
  }
  for (const std::string& p : paths) out.push_back({"POST", p.c_str()});
  return out;
}();

TEST_F(NebiusEmulatorTest, EveryMethodTheDriverCallsIsOneOfTheNebiusProtos) {
  Driver driver(Config());
  ASSERT_EQ(driver.Check().status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Offers(R"({"gpu":{"type":"H100","count":1},"region":""})").status,
            GPUPROV_STATUS_OK);
  OpResult c = driver.Create(CreateRequest("nb-ops"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  const std::string id = ParseJson(c.json)->getObject("vm")->getValue<std::string>("id");
  ASSERT_TRUE(WaitRunning(driver, id));
  ASSERT_EQ(driver.Get(R"({"name":"nb-ops"})").status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.List().status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.OpenPorts(R"({"id":")" + id + R"(","name":"nb-ops","ports":[22,8080]})").status,
            GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Call(driver.vtable().list_resources, "{}").status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Delete(R"({"id":")" + id + R"(","name":"nb-ops"})").status, GPUPROV_STATUS_OK);
  const std::vector<std::string> logged = emulator_->Requests();
  ASSERT_FALSE(logged.empty());
  const std::vector<std::string> outside = OutsideOperations(logged, kNebiusMethods);
  EXPECT_TRUE(outside.empty()) << "not in the nebius/api protos: " << outside.front();
}

TEST_F(NebiusEmulatorTest, ThrottlingAndUnavailableAreRetried) {
  Driver driver(Config());
  emulator_->Fault(R"("fault":"throttle","times":2)");
  emulator_->Fault(R"("fault":"server_error","times":2)");
  OpResult c = driver.Create(CreateRequest("nb-retry", ""));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(ParseJson(c.json)->getObject("vm")->getValue<std::string>("instance_type"),
            "cpu-d3/8vcpu-32gb");
  OpResult del = driver.Delete(R"({"name":"nb-retry"})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del;
  ExpectNothingLeft();
}

TEST_F(NebiusEmulatorTest, ALostCreateAnswerIsRetriedWithTheSameIdempotencyKey) {
  Driver driver(Config());
  // The create happens, then its answer is lost (UNAVAILABLE): the retry carries the same
  // x-idempotency-key and gets the same operation, not a second instance.
  emulator_->Fault(
      R"("fault":"server_error","value":"after_create","path":"/nebius.compute.v1.InstanceService/Create")");
  OpResult c = driver.Create(CreateRequest("nb-lost", ""));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_FALSE(c.Doc()->getValue<bool>("existing"));
  EXPECT_EQ(emulator_->Count("instances"), 1);
  ASSERT_EQ(driver.Delete(R"({"name":"nb-lost"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(NebiusEmulatorTest, DeleteOfAHalfDoneCreateRemovesItsDiskAndGroup) {
  Driver driver(Config());
  std::thread t([&] { driver.Create(CreateRequest("nb-half")); });
  // Cancelled once the boot disk is being made (the group exists by then).
  for (int i = 0; i < 300 && emulator_->Count("disks") == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const_cast<drivers::testing::RecordingHost&>(driver.host()).cancel = true;
  t.join();
  if (emulator_->Count("instances") != 0) GTEST_SKIP() << "the instance was made before the cancel";
  EXPECT_EQ(emulator_->Count("security_groups"), 1);
  Driver down(Config());
  OpResult d = down.Delete(R"({"name":"nb-half"})");
  ASSERT_EQ(d.status, GPUPROV_STATUS_OK) << d;
  EXPECT_FALSE(d.Doc()->getValue<bool>("deleted"));  // no instance was there
  ExpectNothingLeft();
}

TEST_F(NebiusEmulatorTest, AVanishedInstanceIsNotFoundAndDeleteRemovesTheRest) {
  Driver driver(Config());
  OpResult c = driver.Create(CreateRequest("nb-vanish", ""));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  const std::string id = c.Vm()->getValue<std::string>("id");
  emulator_->Settings(R"("vanish_instance":"nb-vanish")");
  OpResult g = driver.Get(R"({"id":")" + id + R"(","name":"nb-vanish"})");
  EXPECT_EQ(g.status, GPUPROV_STATUS_NOT_FOUND) << g;
  OpResult d = driver.Delete(R"({"id":")" + id + R"(","name":"nb-vanish"})");
  ASSERT_EQ(d.status, GPUPROV_STATUS_OK) << d;
  EXPECT_FALSE(d.Doc()->getValue<bool>("deleted"));
  ExpectNothingLeft();
}

TEST_F(NebiusEmulatorTest, RevokedTokenIsExchangedAgainOnce) {
  Driver driver(Config());
  ASSERT_EQ(driver.Check().status, GPUPROV_STATUS_OK);
  emulator_->Fault(R"("fault":"auth_failure")");
  EXPECT_EQ(driver.List().status, GPUPROV_STATUS_OK);
  emulator_->Fault(R"("fault":"auth_failure","times":2)");
  OpResult r = driver.List();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
}

TEST_F(NebiusEmulatorTest, CancelStopsAWaitAndARerunFinishesWithoutDuplicates) {
  Driver driver(Config());
  std::atomic<bool> done{false};
  OpResult first;
  std::thread t([&] {
    first = driver.Create(CreateRequest("nb-cancel"));
    done = true;
  });
  // Cancel once the security group exists (the create is under way).
  for (int i = 0; i < 200 && emulator_->Count("security_groups") == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const_cast<drivers::testing::RecordingHost&>(driver.host()).cancel = true;
  const auto start = std::chrono::steady_clock::now();
  t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(done);
  if (first.status == GPUPROV_STATUS_OK) GTEST_SKIP() << "the create finished before the cancel";
  EXPECT_EQ(first.status, GPUPROV_STATUS_CANCELLED) << first;

  Driver rerun(Config());
  OpResult c = rerun.Create(CreateRequest("nb-cancel"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("disks"), 1);
  EXPECT_EQ(emulator_->Count("security_groups"), 1);
  ASSERT_EQ(rerun.Delete(R"({"name":"nb-cancel"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

// `gpuprov gc` (ABI 1.2): an instance, its boot disk and its security group, each labelled
// gpuprov=1 and gpuprov-name, listed VMs first with age; resources that lost their labels (the
// user's own) are neither listed nor deleted.
TEST_F(NebiusEmulatorTest, ListResourcesAndDeleteResourceTouchOnlyLabelledOnes) {
  Driver driver(Config());
  ASSERT_NE(driver.vtable().list_resources, nullptr);
  ASSERT_NE(driver.vtable().delete_resource, nullptr);
  ASSERT_EQ(driver.Create(CreateRequest("nb-gc", "")).status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Create(CreateRequest("nb-users", "")).status, GPUPROV_STATUS_OK);
  for (const char* name : {"nb-users", "nb-users-boot", "gpuprov-nb-users"}) {
    emulator_->Settings(std::string(R"("unlabel":")") + name + R"(")");
  }
  OpResult listed = driver.Call(driver.vtable().list_resources, "{}");
  ASSERT_EQ(listed.status, GPUPROV_STATUS_OK) << listed;
  Array::Ptr resources = listed.Doc()->getArray("resources");
  ASSERT_EQ(resources->size(), 3u) << listed.json;
  const std::vector<std::pair<std::string, std::string>> want = {
      {"vm", "nb-gc"}, {"disk", "nb-gc-boot"}, {"security_group", "gpuprov-nb-gc"}};
  std::vector<std::pair<std::string, std::string>> ids;
  for (size_t i = 0; i < resources->size(); ++i) {
    Object::Ptr r = resources->getObject(static_cast<unsigned>(i));
    EXPECT_EQ(r->getValue<std::string>("kind"), want[i].first) << listed.json;
    EXPECT_EQ(r->getValue<std::string>("name"), want[i].second) << listed.json;
    ASSERT_EQ(r->getArray("vm_names")->size(), 1u) << listed.json;
    EXPECT_EQ(r->getArray("vm_names")->getElement<std::string>(0), "nb-gc");
    EXPECT_EQ(r->getValue<std::string>("created_at").rfind("20", 0), 0u) << listed.json;
    EXPECT_FALSE(r->has("price_per_hour")) << listed.json;  // the API reports no price
    ids.emplace_back(r->getValue<std::string>("kind"), r->getValue<std::string>("id"));
  }

  // The user's own resources are refused by id, whatever kind is claimed.
  OpResult users = driver.List();
  ASSERT_EQ(users.status, GPUPROV_STATUS_OK) << users;
  EXPECT_EQ(users.Doc()->getArray("vms")->size(), 1u) << users.json;
  const std::string users_instance = emulator_->InstanceField("nb-users", "id");
  ASSERT_FALSE(users_instance.empty());
  OpResult refused = driver.Call(driver.vtable().delete_resource,
                                 R"({"kind":"vm","id":")" + users_instance + R"("})");
  EXPECT_EQ(refused.status, GPUPROV_STATUS_INVALID_INPUT) << refused;
  EXPECT_TRUE(Contains(refused.error, "does not carry gpuprov's label")) << refused.error;
  OpResult bad_kind = driver.Call(driver.vtable().delete_resource, R"({"kind":"ssh_key","id":"x"})");
  EXPECT_EQ(bad_kind.status, GPUPROV_STATUS_INVALID_INPUT) << bad_kind;

  // Deleted in the listed order: instance, disk, group (with its rules).
  for (const auto& [kind, id] : ids) {
    OpResult d = driver.Call(driver.vtable().delete_resource,
                             R"({"kind":")" + kind + R"(","id":")" + id + R"("})");
    ASSERT_EQ(d.status, GPUPROV_STATUS_OK) << kind << ": " << d;
    EXPECT_TRUE(d.Doc()->getValue<bool>("deleted")) << kind;
  }
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("disks"), 1);
  EXPECT_EQ(emulator_->Count("security_groups"), 1);
  OpResult again = driver.Call(driver.vtable().delete_resource,
                               R"({"kind":"disk","id":")" + ids[1].second + R"("})");
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_FALSE(again.Doc()->getValue<bool>("deleted"));
  OpResult empty = driver.Call(driver.vtable().list_resources, "{}");
  ASSERT_EQ(empty.status, GPUPROV_STATUS_OK) << empty;
  EXPECT_EQ(empty.Doc()->getArray("resources")->size(), 0u) << empty.json;
}

// --- clusters (ABI 1.5) ----------------------------------------------------

constexpr const char* kPeerPorts =
    R"([{"port":6443,"protocol":"tcp"},{"port":10250,"protocol":"tcp"},)"
    R"({"port":51820,"protocol":"udp"}])";

std::string ClusterCreate(const std::string& name, const std::string& role,
                          std::vector<int> ports = {22}) {
  Object::Ptr req = ParseJson(CreateRequest(name, "H100", std::move(ports)));
  req->set("cluster", ParseJson(R"({"name":"train","role":")" + role +
                                R"(","peer_ports":)" + kPeerPorts + "}"));
  return Stringify(req);
}

std::string PeersRequest(const std::vector<OpResult*>& nodes,
                         const std::string& peer_ports = kPeerPorts) {
  std::string peers;
  for (const OpResult* n : nodes) {
    peers += std::string(peers.empty() ? "" : ",") + R"({"id":")" +
             n->Vm()->getValue<std::string>("id") + R"(","name":")" +
             n->Vm()->getValue<std::string>("name") + R"(","private_ip":"","public_ip":""})";
  }
  return R"({"cluster":"train","peer_ports":)" + peer_ports + R"(,"peers":[)" + peers + "]}";
}

// A cluster: every node's interface lists the group gpuprov-train-peers besides its own, whose
// rules on the peer ports have the group itself as their source; so each node reaches the
// others' private addresses on exactly those ports, and nothing opens to this machine.
// open_peer_ports checks the group, replaces a rule that differs, and is idempotent; a node
// that goes loses access with its membership; the group goes with the last node.
TEST_F(NebiusEmulatorTest, AClusterSharesASelfReferencingGroupThatGoesWithItsLastNode) {
  Driver driver(Config());
  OpResult server = driver.Create(ClusterCreate("train", "server", {22, 6443, 80, 443}));
  ASSERT_EQ(server.status, GPUPROV_STATUS_OK) << server << "\n" << driver.host().All();
  OpResult agent = driver.Create(ClusterCreate("train-agent-1", "agent"));
  ASSERT_EQ(agent.status, GPUPROV_STATUS_OK) << agent;
  EXPECT_EQ(agent.Vm()->getValue<std::string>("cluster"), "train");
  EXPECT_EQ(agent.Vm()->getValue<std::string>("role"), "agent");
  EXPECT_EQ(server.Vm()->getValue<std::string>("role"), "server");
  EXPECT_EQ(agent.Vm()->getObject("tags")->getValue<std::string>("gpuprov-cluster"), "train");
  // Each node's own group and the cluster's; each own group 2 rules (ingress, egress), the
  // cluster's one a protocol.
  EXPECT_EQ(emulator_->Count("security_groups"), 3);
  EXPECT_EQ(emulator_->Count("security_rules"), 6);

  Object::Ptr s = WaitRunning(driver, server.Vm()->getValue<std::string>("id"));
  Object::Ptr a = WaitRunning(driver, agent.Vm()->getValue<std::string>("id"));
  ASSERT_TRUE(s && a);
  const std::string sip = s->getValue<std::string>("private_ip");
  const std::string aip = a->getValue<std::string>("private_ip");
  EXPECT_EQ(sip.rfind("10.", 0), 0u) << sip;  // status.network_interfaces[0].ip_address, no /32
  EXPECT_EQ(sip.find('/'), std::string::npos) << sip;
  EXPECT_NE(sip, aip);
  // Nothing new to this machine: the agent's public side stays 22.
  EXPECT_EQ(emulator_->Reachable("train-agent-1"), "22");
  const std::string both = " from " + std::min(sip, aip) + " " + std::max(sip, aip);
  const std::vector<std::string> agent_rules = {"tcp 10250" + both, "tcp 22 from 0.0.0.0/0",
                                                "tcp 6443" + both, "udp 51820" + both};
  EXPECT_EQ(emulator_->PrivateIngress("train-agent-1"), agent_rules);

  // open_peer_ports: the group covers its members already; twice changes nothing.
  for (int i = 0; i < 2; ++i) {
    OpResult opened = driver.OpenPeerPorts(PeersRequest({&server, &agent}));
    ASSERT_EQ(opened.status, GPUPROV_STATUS_OK) << opened;
    EXPECT_EQ(opened.json, "{}");
    EXPECT_EQ(emulator_->Count("security_rules"), 6);
    EXPECT_EQ(emulator_->PrivateIngress("train-agent-1"), agent_rules);
  }
  // A rule that differs is replaced (rules are immutable): fewer peer ports, then all again.
  OpResult narrowed = driver.OpenPeerPorts(PeersRequest(
      {&server, &agent}, R"([{"port":6443,"protocol":"tcp"},{"port":51820,"protocol":"udp"}])"));
  ASSERT_EQ(narrowed.status, GPUPROV_STATUS_OK) << narrowed;
  EXPECT_EQ(emulator_->PrivateIngress("train-agent-1"),
            (std::vector<std::string>{"tcp 22 from 0.0.0.0/0", "tcp 6443" + both,
                                      "udp 51820" + both}));
  ASSERT_EQ(driver.OpenPeerPorts(PeersRequest({&server, &agent})).status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->PrivateIngress("train-agent-1"), agent_rules);
  EXPECT_EQ(emulator_->Count("security_rules"), 6);

  // A third node is admitted as it joins the group; once deleted it is no source any more.
  OpResult third = driver.Create(ClusterCreate("train-agent-2", "agent"));
  ASSERT_EQ(third.status, GPUPROV_STATUS_OK) << third;
  Object::Ptr t = WaitRunning(driver, third.Vm()->getValue<std::string>("id"));
  ASSERT_TRUE(t);
  ASSERT_EQ(driver.OpenPeerPorts(PeersRequest({&server, &agent, &third})).status,
            GPUPROV_STATUS_OK);
  const std::vector<std::string> with_third = emulator_->PrivateIngress("train");
  ASSERT_FALSE(with_third.empty());
  EXPECT_TRUE(Contains(with_third.back(), t->getValue<std::string>("private_ip")))
      << with_third.back();

  // list_resources: the nodes with cluster and role, the group as the cluster's firewall.
  OpResult listed = driver.ListResources();
  ASSERT_EQ(listed.status, GPUPROV_STATUS_OK) << listed;
  EXPECT_TRUE(Contains(listed.json, R"("cluster":"train","role":"server")")) << listed.json;
  EXPECT_TRUE(Contains(listed.json, R"("cluster":"train","role":"agent")")) << listed.json;
  bool firewall = false;
  Array::Ptr resources = listed.Doc()->getArray("resources");
  for (size_t i = 0; i < resources->size(); ++i) {
    Object::Ptr r = resources->getObject(static_cast<unsigned>(i));
    if (r->getValue<std::string>("kind") != "cluster_firewall") continue;
    firewall = true;
    EXPECT_EQ(r->getValue<std::string>("name"), "gpuprov-train-peers");
    EXPECT_EQ(r->getValue<std::string>("cluster"), "train");
    EXPECT_EQ(r->getArray("vm_names")->size(), 3u) << listed.json;
  }
  EXPECT_TRUE(firewall) << listed.json;

  ASSERT_EQ(driver.Delete(R"({"name":"train-agent-2"})").status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.OpenPeerPorts(PeersRequest({&server, &agent})).status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->PrivateIngress("train-agent-1"), agent_rules);
  ASSERT_EQ(driver.Delete(R"({"name":"train"})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("security_groups"), 2);  // the agent's own and the cluster's
  ASSERT_EQ(driver.Delete(R"({"name":"train-agent-1"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

// A cluster's group whose last node vanished (its delete cannot tell the cluster) is a
// cluster_firewall with no VM names, which gc deletes with its rules.
TEST_F(NebiusEmulatorTest, GcRemovesALeftoverClusterGroup) {
  Driver driver(Config());
  OpResult c = driver.Create(ClusterCreate("train", "server"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  emulator_->Settings(R"("vanish_instance":"train")");
  ASSERT_EQ(driver.Delete(R"({"name":"train"})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("security_groups"), 1);
  OpResult listed = driver.ListResources();
  ASSERT_EQ(listed.status, GPUPROV_STATUS_OK) << listed;
  Array::Ptr resources = listed.Doc()->getArray("resources");
  ASSERT_EQ(resources->size(), 1u) << listed.json;
  Object::Ptr r = resources->getObject(0);
  EXPECT_EQ(r->getValue<std::string>("kind"), "cluster_firewall");
  EXPECT_EQ(r->getValue<std::string>("cluster"), "train");
  EXPECT_EQ(r->getArray("vm_names")->size(), 0u);
  OpResult d = driver.Call(driver.vtable().delete_resource,
                           R"({"kind":"cluster_firewall","id":")" +
                               r->getValue<std::string>("id") + R"("})");
  ASSERT_EQ(d.status, GPUPROV_STATUS_OK) << d;
  EXPECT_TRUE(d.Doc()->getValue<bool>("deleted"));
  ExpectNothingLeft();
}

// A group of that name that is not gpuprov's for the cluster is refused, not taken over.
TEST_F(NebiusEmulatorTest, AClusterGroupNameTakenByAnotherGroupIsRefused) {
  Driver driver(Config());
  ASSERT_EQ(driver.Create(CreateRequest("train-peers", "")).status, GPUPROV_STATUS_OK);
  OpResult c = driver.Create(ClusterCreate("train", "server"));
  EXPECT_EQ(c.status, GPUPROV_STATUS_INVALID_INPUT) << c;
  EXPECT_TRUE(Contains(c.error, "gpuprov-train-peers")) << c.error;
  EXPECT_EQ(emulator_->Count("instances"), 1);
  ASSERT_EQ(driver.Delete(R"({"name":"train-peers"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

}  // namespace
}  // namespace gpuprov::nebius
