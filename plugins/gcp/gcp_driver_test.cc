// SPDX-License-Identifier: Apache-2.0
//
// Loads the BUILT driver .so with dlopen, as the host does, and drives it through the C
// vtable against the GCE emulator (tests/emulators, `gpuprov-emulator --backend memory
// --clouds gcp`) started as a child process, with the service-account key the emulator
// issues. Talks only to 127.0.0.1.
#include <Poco/Crypto/EVPPKey.h>
#include <Poco/Crypto/RSAKey.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "credentials.h"
#include "driver_test_util.h"
#include "gcp_auth.h"
#include "gcp_rules.h"
#include "gpuprov/driver_abi.h"

namespace gpuprov::gcp {
namespace {

using namespace drivers::testing;  // the shared driver test helpers (driver_test_util.h)
using Poco::JSON::Array;
using Poco::JSON::Object;

constexpr const char* kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF test@gpuprov";

constexpr char kDriverPath[] = GPUPROV_GCP_DRIVER_PATH;
using Driver = DriverAt<kDriverPath>;

const gpuprov_type_driver_descriptor* Descriptor() { return Driver::Descriptor(); }

// --- no emulator needed -----------------------------------------------------

TEST(GcpDescriptor, IdentityAndCapabilities) {
  const gpuprov_type_driver_descriptor* d = Descriptor();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->magic, GPUPROV_DRIVER_MAGIC);
  EXPECT_STREQ(d->name, "gcp");
  // How its VM learns its public address: REFERENCE.md section 6.
  EXPECT_STREQ(d->node_address, GPUPROV_NODE_ADDRESS_GCE);
  EXPECT_EQ(d->capabilities,
            static_cast<uint64_t>(GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_BOOT_CLOUD_INIT |
                                  GPUPROV_CAP_OPEN_PORTS | GPUPROV_CAP_HOSTS_KUBERNETES |
                                  GPUPROV_CAP_SPOT | GPUPROV_CAP_CLUSTER));
  drivers::testing::ExpectEveryOperation(*d->vtable);
}

TEST(GcpDescriptor, RefusesPlainHttpToANonLoopbackEndpoint) {
  Driver driver(R"({"endpoint":"http://compute.googleapis.com","config":{}})");
  EXPECT_EQ(driver.init_status(), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_TRUE(Contains(driver.init_error(), "loopback")) << driver.init_error();
}

TEST(GcpDescriptor, NoCredentialsIsAuthBeforeAnyNetworkCall) {
  ScopedTempDir dir("gcp-nocreds");
  ScopedEnv no_gac("GOOGLE_APPLICATION_CREDENTIALS", nullptr);
  ScopedEnv no_gcloud("CLOUDSDK_CONFIG", dir.path().c_str());
  // No metadata server either (a closed loopback port, so no test asks a real one).
  ScopedEnv no_metadata("GCE_METADATA_HOST", "127.0.0.1:9");
  Driver driver(R"({"endpoint":"","config":{}})");
  ASSERT_EQ(driver.init_status(), GPUPROV_STATUS_OK) << driver.init_error();
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "GOOGLE_APPLICATION_CREDENTIALS")) << r.error;
  EXPECT_TRUE(Contains(r.error, "application-default login")) << r.error;
}

TEST(GcpDescriptor, InvalidNamesAndOversizedUserDataAreRefusedFirst) {
  Driver driver(R"({"endpoint":"http://127.0.0.1:9","config":{}})");
  OpResult bad = driver.Create(R"({"name":"Bad_Name","ssh_public_key":"ssh-ed25519 AAAA x"})");
  EXPECT_EQ(bad.status, GPUPROV_STATUS_INVALID_INPUT) << bad;
  Object::Ptr req = new Object();
  req->set("name", "big");
  req->set("ssh_public_key", kKey);
  req->set("user_data", std::string(262145, 'x'));
  OpResult big = driver.Create(Stringify(req));
  EXPECT_EQ(big.status, GPUPROV_STATUS_INVALID_INPUT) << big;
  EXPECT_TRUE(Contains(big.error, "262144")) << big.error;
}

// --- the emulator -----------------------------------------------------------

// The emulator as a child process (memory backend, gcp only); it writes its service-account
// key to key_path at start.
class GceEmulator {
 public:
  static std::optional<std::string> Problem() {
    return EmulatorProcess::Problem(GPUPROV_EMULATOR_PATH);
  }
  bool Start(std::string* problem) {
    key_path_ = (dir_.path() / "key.json").string();
    return process_.Start(GPUPROV_EMULATOR_PATH,
                          {"--backend", "memory", "--clouds", "gcp", "--boot-seconds", "1"},
                          {{"GOOGLE_APPLICATION_CREDENTIALS", key_path_}}, {"gcp"}, problem);
  }
  const std::string& key_path() const { return key_path_; }
  std::string url() const { return process_.Url("gcp"); }
  const std::filesystem::path& dir() const { return dir_.path(); }

  void Reset() { process_.Reset("gcp"); }
  void Fault(const std::string& json_fields) {
    process_.Fault(R"({"cloud":"gcp",)" + json_fields + "}");
  }
  void Preempt(const std::string& name) {
    auto [status, body] =
        process_.Control("POST", "/preempt", R"({"cloud":"gcp","name":")" + name + R"("})");
    EXPECT_EQ(status, 200) << body;
  }
  void Settings(const std::string& json_fields) {
    auto [status, body] =
        process_.Control("POST", "/settings", R"({"cloud":"gcp",)" + json_fields + "}");
    EXPECT_EQ(status, 200) << body;
  }
  long long Count(const std::string& what) { return process_.Count("gcp", what); }
  // "METHOD path -> status" of every request so far.
  std::vector<std::string> Requests() { return process_.Requests("gcp"); }
  void ClearRequests() { process_.ClearRequests("gcp"); }
  // The sources the emulator's rules admit to the instance's internal address on
  // protocol/ports ("6443", "1-65535"), sorted and joined by commas ("" when none).
  std::string PrivateSources(const std::string& name, const std::string& protocol,
                             const std::string& ports) {
    HttpReply r = process_.Control("GET", "/instances?cloud=gcp");
    std::vector<std::string> out;
    Array::Ptr list = r.Doc()->getArray("instances");
    for (size_t i = 0; list && i < list->size(); ++i) {
      Object::Ptr o = list->getObject(static_cast<unsigned>(i));
      if (o->getValue<std::string>("name") != name) continue;
      Array::Ptr rules = o->getArray("private_ingress");
      for (size_t j = 0; rules && j < rules->size(); ++j) {
        Object::Ptr rule = rules->getObject(static_cast<unsigned>(j));
        if (rule->getValue<std::string>("protocol") != protocol ||
            rule->getValue<std::string>("ports") != ports) {
          continue;
        }
        Array::Ptr src = rule->getArray("sources");
        for (size_t k = 0; k < src->size(); ++k) out.push_back(src->get(k).toString());
      }
    }
    std::sort(out.begin(), out.end());
    std::string joined;
    for (const auto& a : out) joined += (joined.empty() ? "" : ",") + a;
    return joined;
  }
  std::string Reachable(const std::string& name) { return process_.ReachablePorts("gcp", name); }

 private:
  ScopedTempDir dir_{"gcp-emu"};
  std::string key_path_;
  EmulatorProcess process_;
};

int CountMatching(const std::vector<std::string>& lines, const std::string& needle) {
  int n = 0;
  for (const auto& l : lines) n += Contains(l, needle) ? 1 : 0;
  return n;
}

class GcpEmulatorTest : public SharedEmulatorTest<GceEmulator> {
 protected:
  void SetUp() override {
    SharedEmulatorTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    emulator_->Reset();
    creds_ = std::make_unique<ScopedEnv>("GOOGLE_APPLICATION_CREDENTIALS",
                                         emulator_->key_path().c_str());
    project_ = std::make_unique<ScopedEnv>("GOOGLE_CLOUD_PROJECT", nullptr);
  }
  void TearDown() override {
    creds_.reset();
    project_.reset();
  }

  static std::string Config(const std::string& extra_config = "") {
    return R"({"endpoint":")" + emulator_->url() +
           R"(","config":{"poll_interval_ms":100,"retry":{"max_attempts":5,"base_delay_ms":5,)"
           R"("max_delay_ms":50,"max_retry_after_ms":100,"total_budget_ms":20000,)"
           R"("attempt_timeout_ms":10000})" +
           extra_config + "}}";
  }

  static std::string CreateRequest(const std::string& name, const std::string& gpu = "L4",
                                   std::vector<int> ports = {22, 6443, 80, 443},
                                   const std::string& region = "") {
    Object::Ptr req = new Object();
    req->set("name", name);
    req->set("region", region);
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

  static Object::Ptr WaitRunning(Driver& driver, const std::string& id) {
    return drivers::testing::WaitRunning(driver, id, std::chrono::seconds(30), "instance");
  }

  // The firewall rule as the API shows it (with a token of the emulator's key).
  static Object::Ptr Firewall(const std::string& name) {
    std::optional<GoogleCredentials> creds = FindCredentials(emulator_->key_path());
    TokenSource tokens(*creds, drivers::RetryPolicy::Fast(), gpuprov::sdk::Host());
    HttpReply r =
        drivers::testing::LoopbackHttp("GET",
                                       emulator_->url() + "/compute/v1/projects/" +
                                           creds->project_id + "/global/firewalls/" + name,
                                       "", {{"Authorization", "Bearer " + tokens.Token()}});
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? r.Doc() : nullptr;
  }

  // The ports of every tcp entry of the rule's `allowed`, in numeric order.
  static std::vector<std::string> FirewallPorts(const std::string& name) {
    std::vector<std::string> out;
    Object::Ptr fw = Firewall(name);
    if (!fw) return out;
    Array::Ptr allowed = fw->getArray("allowed");
    for (size_t a = 0; a < allowed->size(); ++a) {
      Array::Ptr ports = allowed->getObject(a)->getArray("ports");
      for (size_t i = 0; ports && i < ports->size(); ++i) out.push_back(ports->get(i).toString());
    }
    std::sort(out.begin(), out.end(), [](const std::string& x, const std::string& y) {
      return std::stoi(x) < std::stoi(y);
    });
    return out;
  }

  // PATCHes the rule as a user would (with a token of the emulator's key).
  static void PatchFirewall(const std::string& name, const std::string& body) {
    std::optional<GoogleCredentials> creds = FindCredentials(emulator_->key_path());
    TokenSource tokens(*creds, drivers::RetryPolicy::Fast(), gpuprov::sdk::Host());
    HttpReply r = drivers::testing::LoopbackHttp(
        "PATCH",
        emulator_->url() + "/compute/v1/projects/" + creds->project_id + "/global/firewalls/" +
            name,
        body, {{"Authorization", "Bearer " + tokens.Token()}, {"Content-Type", "application/json"}});
    EXPECT_EQ(r.status, 200) << r.body;
  }

  std::unique_ptr<ScopedEnv> creds_, project_;
};

TEST_F(GcpEmulatorTest, CheckNamesTheProjectAndTheUserDataLimit) {
  Driver driver(Config());
  OpResult r = driver.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r << "\n" << driver.host().All();
  EXPECT_EQ(r.Doc()->getValue<std::string>("account"),
            "gpuprov-emulator / gpuprov-emulator@gpuprov-emulator.iam.gserviceaccount.com");
  EXPECT_EQ(r.Doc()->getValue<int>("user_data_limit"), 262144);
  EXPECT_FALSE(Contains(r.json, "PRIVATE KEY"));
  EXPECT_FALSE(Contains(driver.host().All(), "PRIVATE KEY"));
  EXPECT_FALSE(Contains(driver.host().All(), "ya29."));
}

TEST_F(GcpEmulatorTest, OffersAreTheZonesOfTheRegionThatHaveTheGpu) {
  Driver driver(Config());
  OpResult r = driver.Offers(R"({"gpu":{"type":"L4","count":1},"region":"us-central1"})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  Array::Ptr offers = r.Doc()->getArray("offers");
  ASSERT_EQ(offers->size(), 1u) << r.json;
  Object::Ptr o = offers->getObject(0);
  EXPECT_EQ(o->getValue<std::string>("instance_type"), "g2-standard-4");
  EXPECT_EQ(o->getValue<std::string>("region"), "us-central1");
  EXPECT_EQ(o->getArray("zones")->size(), 3u) << r.json;
  // Sold as Spot too, at a price the table does not have (0: unknown), so --spot can choose it.
  ASSERT_TRUE(o->has("spot_price_per_hour")) << r.json;
  EXPECT_EQ(o->getValue<double>("spot_price_per_hour"), 0.0);
  OpResult f = driver.Offers(R"({"gpu":{"type":"L4","count":1},"region":"us-central1-f"})");
  ASSERT_EQ(f.status, GPUPROV_STATUS_OK) << f;
  EXPECT_EQ(f.Doc()->getArray("offers")->size(), 0u);
  OpResult amd = driver.Offers(R"({"gpu":{"type":"MI300X","count":1},"region":""})");
  ASSERT_EQ(amd.status, GPUPROV_STATUS_OK) << amd;
  EXPECT_EQ(amd.Doc()->getArray("offers")->size(), 0u);
  EXPECT_TRUE(Contains(driver.host().All(), "MI300X:1")) << driver.host().All();
}

TEST_F(GcpEmulatorTest, Lifecycle) {
  Driver driver(Config());
  OpResult created = driver.Create(CreateRequest("gcp-life"));
  ASSERT_EQ(created.status, GPUPROV_STATUS_OK) << created << "\n" << driver.host().All();
  EXPECT_FALSE(created.Doc()->getValue<bool>("existing"));
  Object::Ptr vm = created.Vm();
  const std::string id = vm->getValue<std::string>("id");
  EXPECT_EQ(id, "us-central1-a/gcp-life");
  EXPECT_EQ(vm->getValue<std::string>("instance_type"), "g2-standard-4");
  EXPECT_EQ(vm->getValue<std::string>("ssh_user"), "ubuntu");
  EXPECT_EQ(vm->getValue<std::string>("gpus"), "L4:1");
  EXPECT_EQ(vm->getObject("tags")->getValue<std::string>("gpuprov-name"), "gcp-life");
  EXPECT_EQ(vm->getObject("tags")->getValue<std::string>("team"), "ml");
  EXPECT_TRUE(vm->getObject("ports")->has("6443"));
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("firewalls"), 1);
  EXPECT_EQ(FirewallPorts("gpuprov-gcp-life"),
            (std::vector<std::string>{"22", "80", "443", "6443"}));
  EXPECT_EQ(Firewall("gpuprov-gcp-life")->getArray("targetTags")->get(0).toString(),
            "gpuprov-gcp-life");

  Object::Ptr running = WaitRunning(driver, id);
  ASSERT_TRUE(running);
  EXPECT_EQ(running->getValue<std::string>("public_ip").rfind("127.", 0), 0u);

  OpResult by_name = driver.Get(R"({"name":"gcp-life"})");
  ASSERT_EQ(by_name.status, GPUPROV_STATUS_OK) << by_name;
  EXPECT_EQ(by_name.Vm()->getValue<std::string>("id"), id);
  OpResult list = driver.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list;
  ASSERT_EQ(list.Doc()->getArray("vms")->size(), 1u) << list.json;

  // A second create of the name (a re-run after gpuprov was killed) finds it.
  Driver rerun(Config());
  OpResult again = rerun.Create(CreateRequest("gcp-life"));
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_TRUE(again.Doc()->getValue<bool>("existing"));
  EXPECT_EQ(again.Vm()->getValue<std::string>("id"), id);
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("firewalls"), 1);

  OpResult del = driver.Delete(R"({"id":")" + id + R"(","name":"gcp-life"})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del;
  EXPECT_TRUE(del.Doc()->getValue<bool>("deleted"));
  EXPECT_EQ(emulator_->Count("instances"), 0);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
  EXPECT_EQ(emulator_->Count("backend_instances"), 0);
  EXPECT_EQ(driver.Get(R"({"id":")" + id + R"("})").status, GPUPROV_STATUS_NOT_FOUND);
  OpResult del2 = driver.Delete(R"({"id":")" + id + R"(","name":"gcp-life"})");
  ASSERT_EQ(del2.status, GPUPROV_STATUS_OK) << del2;
  EXPECT_FALSE(del2.Doc()->getValue<bool>("deleted"));
}

// Spot (REFERENCE.md §3.8): provisioningModel SPOT stopped on preemption; a preempted instance
// (TERMINATED, with a compute.instances.preempted operation) is "preempted" in get and list,
// a stopped one that was not preempted stays "stopped"; delete removes it.
TEST_F(GcpEmulatorTest, SpotIsStoppedOnPreemptionAndReportedAsPreempted) {
  Driver driver(Config());
  OpResult created = driver.Create(R"({"spot":true,)" + CreateRequest("gcp-spot").substr(1));
  ASSERT_EQ(created.status, GPUPROV_STATUS_OK) << created << "\n" << driver.host().All();
  EXPECT_TRUE(created.Vm()->getValue<bool>("spot"));
  const std::string id = created.Vm()->getValue<std::string>("id");
  ASSERT_TRUE(WaitRunning(driver, id));

  emulator_->Preempt("gcp-spot");
  OpResult got = driver.Get(R"({"id":")" + id + R"("})");
  ASSERT_EQ(got.status, GPUPROV_STATUS_OK) << got;
  EXPECT_EQ(got.Vm()->getValue<std::string>("state"), "preempted");
  EXPECT_EQ(got.Vm()->getValue<std::string>("message"),
            "compute.instances.preempted: Instance was preempted.");
  OpResult list = driver.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list;
  ASSERT_EQ(list.Doc()->getArray("vms")->size(), 1u) << list.json;
  EXPECT_EQ(list.Doc()->getArray("vms")->getObject(0)->getValue<std::string>("state"),
            "preempted");

  OpResult del = driver.Delete(R"({"id":")" + id + R"(","name":"gcp-spot"})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del;
  EXPECT_EQ(emulator_->Count("instances"), 0);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
}

TEST_F(GcpEmulatorTest, TheTokenIsCachedAndRenewedAfterA401) {
  Driver driver(Config());
  emulator_->ClearRequests();
  ASSERT_EQ(driver.Check().status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Check().status, GPUPROV_STATUS_OK);
  EXPECT_EQ(CountMatching(emulator_->Requests(), "POST /token -> 200"), 1);
  emulator_->Settings(R"("expire_tokens":true)");
  OpResult r = driver.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  std::vector<std::string> log = emulator_->Requests();
  EXPECT_EQ(CountMatching(log, "POST /token -> 200"), 2);
  EXPECT_EQ(CountMatching(log, "-> 401"), 1);
}

TEST_F(GcpEmulatorTest, CapacityInOneZoneMovesOnToTheNext) {
  Driver driver(Config());
  emulator_->Fault(R"("fault":"capacity","times":1)");
  OpResult r = driver.Create(CreateRequest("gcp-move"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r << "\n" << driver.host().All();
  EXPECT_EQ(r.Vm()->getValue<std::string>("region"), "us-central1-b");
  EXPECT_TRUE(Contains(driver.host().All(), "us-central1-a has no capacity"))
      << driver.host().All();
  EXPECT_EQ(emulator_->Count("instances"), 1);
}

TEST_F(GcpEmulatorTest, CapacityEverywhereIsCapacityAndLeavesNothing) {
  Driver driver(Config());
  emulator_->Fault(R"("fault":"capacity","times":-1)");
  OpResult r = driver.Create(CreateRequest("gcp-cap"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_CAPACITY) << r;
  EXPECT_TRUE(Contains(r.error, "ZONE_RESOURCE_POOL_EXHAUSTED")) << r.error;
  EXPECT_TRUE(Contains(r.error, "us-central1-a, us-central1-b, us-central1-c")) << r.error;
  EXPECT_TRUE(Contains(r.error, "--region")) << r.error;
  EXPECT_FALSE(Contains(r.error, "suggests")) << "every suggested zone was tried: " << r.error;
  EXPECT_FALSE(Contains(r.error, "..")) << r.error;
  // A zone given as the region: only it is tried, and GCE's zonesAvailable is passed on.
  OpResult zone = driver.Create(CreateRequest("gcp-cap", "L4", {22}, "us-central1-a"));
  EXPECT_EQ(zone.status, GPUPROV_STATUS_CAPACITY) << zone;
  EXPECT_TRUE(Contains(zone.error, "in us-central1-a (")) << zone.error;
  EXPECT_TRUE(Contains(zone.error, "Compute Engine suggests us-central1-b, us-central1-c"))
      << zone.error;
  EXPECT_EQ(emulator_->Count("instances"), 0);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
  EXPECT_EQ(emulator_->Count("backend_instances"), 0);
}

TEST_F(GcpEmulatorTest, QuotaFromTheOperationOrTheCallIsQuota) {
  Driver driver(Config());
  emulator_->Fault(R"("fault":"quota")");
  OpResult op = driver.Create(CreateRequest("gcp-quota"));
  EXPECT_EQ(op.status, GPUPROV_STATUS_QUOTA) << op;
  EXPECT_TRUE(Contains(op.error, "NVIDIA_L4_GPUS")) << op.error;
  emulator_->Fault(R"("fault":"quota","status":403)");
  OpResult sync = driver.Create(CreateRequest("gcp-quota"));
  EXPECT_EQ(sync.status, GPUPROV_STATUS_QUOTA) << sync;
  EXPECT_TRUE(Contains(sync.error, "quotaExceeded")) << sync.error;
  EXPECT_EQ(emulator_->Count("instances"), 0);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
}

TEST_F(GcpEmulatorTest, ThrottlingIsRetriedWithRetryAfterOrBackoff) {
  Driver driver(Config());
  ASSERT_EQ(driver.Check().status, GPUPROV_STATUS_OK);  // the token first: faults hit Compute
  emulator_->Fault(R"("fault":"throttle","times":2,"retry_after":1)");
  emulator_->Fault(R"("fault":"throttle","times":2,"status":403)");
  OpResult r = driver.Create(CreateRequest("gcp-throttle", ""));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r << "\n" << driver.host().All();
  EXPECT_TRUE(Contains(driver.host().All(), "-> 429")) << driver.host().All();
  EXPECT_TRUE(Contains(driver.host().All(), "HTTP 403 rateLimitExceeded")) << driver.host().All();
  EXPECT_EQ(emulator_->Count("instances"), 1);
}

TEST_F(GcpEmulatorTest, EndlessServerErrorsBecomeTransient) {
  Driver driver(Config());
  emulator_->Fault(R"("fault":"server_error","times":50,"status":503)");
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_TRANSIENT) << r;
  EXPECT_TRUE(Contains(r.error, "5 attempt")) << r.error;
}

TEST_F(GcpEmulatorTest, AKeyTheEmulatorDidNotIssueIsAuth) {
  // Same account and token_uri, another private key.
  std::optional<std::string> text = drivers::ReadSmallFile(emulator_->key_path());
  ASSERT_TRUE(text);
  Object::Ptr key = ParseJson(*text);
  Poco::Crypto::RSAKey other(Poco::Crypto::RSAKey::KL_2048, Poco::Crypto::RSAKey::EXP_LARGE);
  Poco::Crypto::EVPPKey evp(&other);
  std::ostringstream pub, priv;
  evp.save(&pub, &priv);
  key->set("private_key", priv.str());
  const std::string path = (emulator_->dir() / "other-key.json").string();
  std::ofstream(path) << Stringify(key);
  Driver driver(Config(R"(,"credentials_file":")" + path + R"(")"));
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "Invalid JWT Signature")) << r.error;
  EXPECT_TRUE(Contains(r.error, path)) << r.error;
  EXPECT_FALSE(Contains(r.error, "PRIVATE KEY")) << r.error;
  EXPECT_EQ(driver.Create(CreateRequest("gcp-auth")).status, GPUPROV_STATUS_AUTH);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
}

// REFERENCE.md §F5: an insert that ends with RESOURCE_NOT_FOUND (the instance gone) is the
// zone out of capacity (SkyPilot's _gcp_handler, skypilot#1797): the next zone is tried. This
// test expected FAILED before, from our own notes; SkyPilot's long use says otherwise.
TEST_F(GcpEmulatorTest, AnInstanceVanishingDuringCreateMovesOnToTheNextZone) {
  Driver driver(Config());
  emulator_->Fault(R"("fault":"vanish_during_boot")");
  OpResult r = driver.Create(CreateRequest("gcp-gone"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r << "\n" << driver.host().All();
  EXPECT_EQ(r.Vm()->getValue<std::string>("region"), "us-central1-b");
  EXPECT_TRUE(Contains(driver.host().All(), "RESOURCE_NOT_FOUND")) << driver.host().All();
  EXPECT_EQ(emulator_->Count("instances"), 1);
}

TEST_F(GcpEmulatorTest, AnInstanceVanishingInEveryZoneIsCapacityAndLeavesNothing) {
  Driver driver(Config());
  emulator_->Fault(R"("fault":"vanish_during_boot","times":-1)");
  OpResult r = driver.Create(CreateRequest("gcp-gone"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_CAPACITY) << r;
  EXPECT_TRUE(Contains(r.error, "RESOURCE_NOT_FOUND")) << r.error;
  EXPECT_TRUE(Contains(r.error, "us-central1-a, us-central1-b, us-central1-c")) << r.error;
  EXPECT_EQ(emulator_->Count("instances"), 0);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
  EXPECT_EQ(emulator_->Count("backend_instances"), 0);
}

// REFERENCE.md §F5: insufficientCapacity moves on like a stockout; an operation refused for
// its rate moves on too, and when every zone refuses it the create is TRANSIENT.
TEST_F(GcpEmulatorTest, InsufficientCapacityAndOperationRateMoveOnToTheNextZone) {
  Driver driver(Config());
  for (const auto& [code, name] : {std::pair<std::string, std::string>{"insufficientCapacity", "gcp-ic"},
                                   {"RESOURCE_OPERATION_RATE_EXCEEDED", "gcp-rate"}}) {
    emulator_->Fault(R"("fault":"capacity","value":")" + code + R"(")");
    OpResult r = driver.Create(CreateRequest(name));
    ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << code << ": " << r << "\n" << driver.host().All();
    EXPECT_EQ(r.Vm()->getValue<std::string>("region"), "us-central1-b") << code;
  }
  emulator_->Fault(R"("fault":"capacity","value":"RESOURCE_OPERATION_RATE_EXCEEDED","times":-1)");
  OpResult all = driver.Create(CreateRequest("gcp-rate2"));
  EXPECT_EQ(all.status, GPUPROV_STATUS_TRANSIENT) << all;
  EXPECT_TRUE(Contains(all.error, "RESOURCE_OPERATION_RATE_EXCEEDED")) << all.error;
  EXPECT_EQ(emulator_->Count("instances"), 2);
  EXPECT_EQ(emulator_->Count("firewalls"), 2);
}

// REFERENCE.md §F1: H200 (a3-ultragpu-8g) and B200 (a4-highgpu-8g) boot from
// hyperdisk-balanced; the emulator refuses Persistent Disk for them as Compute Engine does.
TEST_F(GcpEmulatorTest, H200AndB200BootFromHyperdisk) {
  Driver driver(Config());
  struct Row {
    std::string gpu, machine, name;
  };
  for (const Row& row : {Row{"H200", "a3-ultragpu-8g", "gcp-h200"},
                         Row{"B200", "a4-highgpu-8g", "gcp-b200"}}) {
    const std::string& gpu = row.gpu;
    const std::string& machine = row.machine;
    std::string req = CreateRequest(row.name, gpu);
    req.replace(req.find(R"("count":1)"), 9, R"("count":8)");
    OpResult r = driver.Create(req);
    ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r << "\n" << driver.host().All();
    EXPECT_EQ(r.Vm()->getValue<std::string>("instance_type"), machine);
    EXPECT_EQ(r.Vm()->getValue<std::string>("gpus"), gpu + ":8");
  }
}

// REFERENCE.md §F8: OS Login enforced by organization policy is named with what to do, in
// either form: the insert refused, or OS Login on although gpuprov turned it off.
TEST_F(GcpEmulatorTest, OsLoginEnforcedByPolicyIsExplained) {
  Driver driver(Config());
  emulator_->Settings(R"("os_login_policy":"refuse")");
  OpResult refused = driver.Create(CreateRequest("gcp-osl"));
  EXPECT_NE(refused.status, GPUPROV_STATUS_OK) << refused;
  EXPECT_TRUE(Contains(refused.error, "constraints/compute.requireOsLogin")) << refused.error;
  EXPECT_TRUE(Contains(refused.error, "exempt the project")) << refused.error;
  EXPECT_EQ(emulator_->Count("instances"), 0);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
  emulator_->Settings(R"("os_login_policy":"override")");
  OpResult forced = driver.Create(CreateRequest("gcp-osl"));
  ASSERT_EQ(forced.status, GPUPROV_STATUS_OK) << forced;
  EXPECT_TRUE(Contains(driver.host().All(), "has OS Login on")) << driver.host().All();
  EXPECT_TRUE(Contains(driver.host().All(), "constraints/compute.requireOsLogin"));
  emulator_->Settings(R"("os_login_policy":"")");
}

// Compute Engine returns guestAccelerators with full URLs, also for machine types that carry
// their GPUs: the driver reads the GPUs and the list price from them.
TEST_F(GcpEmulatorTest, GpusAreReadFromTheFormsComputeEngineReturns) {
  Driver driver(Config());
  OpResult t4 = driver.Create(CreateRequest("gcp-t4", "T4", {22}));
  ASSERT_EQ(t4.status, GPUPROV_STATUS_OK) << t4;
  EXPECT_EQ(t4.Vm()->getValue<std::string>("gpus"), "T4:1");
  EXPECT_EQ(t4.Vm()->getValue<std::string>("instance_type"), "n1-standard-4");
  OpResult a100 = driver.Create(CreateRequest("gcp-a100", "A100", {22}));
  ASSERT_EQ(a100.status, GPUPROV_STATUS_OK) << a100;
  EXPECT_EQ(a100.Vm()->getValue<std::string>("gpus"), "A100:1");
  OpResult list = driver.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list;
  EXPECT_TRUE(Contains(list.json, R"("gpus":"T4:1")")) << list.json;
  EXPECT_TRUE(Contains(list.json, R"("gpus":"A100:1")")) << list.json;
}

TEST_F(GcpEmulatorTest, TerminatedIsReportedAsStopped) {
  Driver driver(Config());
  emulator_->Fault(R"("fault":"error_during_boot")");
  OpResult r = driver.Create(CreateRequest("gcp-term"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  OpResult g = driver.Get(R"({"name":"gcp-term"})");
  ASSERT_EQ(g.status, GPUPROV_STATUS_OK) << g;
  EXPECT_EQ(g.Vm()->getValue<std::string>("state"), "stopped");
  EXPECT_TRUE(Contains(g.Vm()->getValue<std::string>("message"), "TERMINATED"));
  ASSERT_EQ(driver.Delete(R"({"name":"gcp-term"})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("instances"), 0);
}

TEST_F(GcpEmulatorTest, OpenPortsWidensTheFirewallRule) {
  Driver driver(Config());
  OpResult c = driver.Create(CreateRequest("gcp-ports", "", {22}));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_EQ(FirewallPorts("gpuprov-gcp-ports"), (std::vector<std::string>{"22"}));
  const std::string id = c.Vm()->getValue<std::string>("id");
  OpResult r = driver.OpenPorts(R"({"id":")" + id + R"(","ports":[6443,443]})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(FirewallPorts("gpuprov-gcp-ports"), (std::vector<std::string>{"22", "443", "6443"}));
  EXPECT_EQ(emulator_->Count("firewalls"), 1);
}

// Create of an existing instance widens nothing; open_ports adds an entry with only the
// missing ports, keeps what the user put in the rule, and a repeat changes nothing.
TEST_F(GcpEmulatorTest, PortsOfAnExistingInstanceOpenOnlyThroughOpenPorts) {
  Driver driver(Config());
  OpResult c = driver.Create(CreateRequest("gcp-again", "", {22}));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  const std::string id = c.Vm()->getValue<std::string>("id");
  EXPECT_EQ(emulator_->Reachable("gcp-again"), "22");

  Driver rerun(Config());
  OpResult again = rerun.Create(CreateRequest("gcp-again", ""));  // 22, 6443, 80, 443
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_TRUE(again.Doc()->getValue<bool>("existing"));
  EXPECT_FALSE(again.Vm()->getObject("ports")->has("6443"));
  EXPECT_EQ(FirewallPorts("gpuprov-gcp-again"), (std::vector<std::string>{"22"}));
  // Only reads: no rule made, changed or deleted ("/global/firewalls?" is the insert's query).
  for (const char* change : {"PATCH /", "PUT /", "DELETE /", "/global/firewalls?", "opening tcp"}) {
    EXPECT_FALSE(Contains(rerun.host().All(), change)) << change << "\n" << rerun.host().All();
  }
  EXPECT_EQ(emulator_->Reachable("gcp-again"), "22");

  // The user adds 9000-9001 to the rule.
  PatchFirewall("gpuprov-gcp-again",
                R"({"allowed":[{"IPProtocol":"tcp","ports":["22"]},)"
                R"({"IPProtocol":"tcp","ports":["9000-9001"]}]})");
  EXPECT_EQ(emulator_->Reachable("gcp-again"), "22,9000-9001");

  OpResult r = driver.OpenPorts(R"({"id":")" + id + R"(","ports":[22,6443,80,443]})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(FirewallPorts("gpuprov-gcp-again"),
            (std::vector<std::string>{"22", "80", "443", "6443", "9000-9001"}));
  EXPECT_EQ(emulator_->Reachable("gcp-again"), "22,80,443,6443,9000-9001");
  emulator_->ClearRequests();
  r = driver.OpenPorts(R"({"id":")" + id + R"(","ports":[22,6443,80,443]})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(CountMatching(emulator_->Requests(), "PATCH"), 0);
}

// allow_from (docs/driver-protocol.md): the narrowed ports go in a second rule
// (SourcesFirewallName) whose sourceRanges are the sources; open_ports replaces them, moves
// ports between the two rules, and down deletes both.
TEST_F(GcpEmulatorTest, AllowFromPutsTheNarrowedPortsInASecondRuleThatOpenPortsUpdates) {
  Driver driver(Config());
  OpResult check = driver.Check();
  ASSERT_EQ(check.status, GPUPROV_STATUS_OK) << check;
  EXPECT_TRUE(check.Doc()->getValue<bool>("allow_from"));
  Object::Ptr req = ParseJson(CreateRequest("gcp-narrow", ""));
  req->set("allow_from", ParseJson(R"({"a":["127.0.0.1/32","192.0.2.0/24"]})")->getArray("a"));
  req->set("allow_from_ports", ParseJson(R"({"a":[80,443,6443]})")->getArray("a"));
  OpResult c = driver.Create(Stringify(req));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c << "\n" << driver.host().All();
  EXPECT_TRUE(Contains(c.json, R"("allow_from":["127.0.0.1/32","192.0.2.0/24"])")) << c.json;
  const std::string id = c.Vm()->getValue<std::string>("id");
  const std::string src = SourcesFirewallName("gcp-narrow");
  EXPECT_EQ(src.rfind("gpuprov-src-", 0), 0u) << src;
  EXPECT_EQ(emulator_->Count("firewalls"), 2);
  EXPECT_EQ(FirewallPorts("gpuprov-gcp-narrow"), (std::vector<std::string>{"22"}));
  EXPECT_EQ(FirewallPorts(src), (std::vector<std::string>{"80", "443", "6443"}));
  auto ranges = [&](const std::string& name) {
    std::ostringstream out;
    Firewall(name)->getArray("sourceRanges")->stringify(out);
    return out.str();
  };
  EXPECT_EQ(ranges(src), R"(["127.0.0.1/32","192.0.2.0/24"])");
  EXPECT_EQ(Firewall(src)->getArray("targetTags")->get(0).toString(), "gpuprov-gcp-narrow");
  EXPECT_EQ(emulator_->Reachable("gcp-narrow"), "22,80,443,6443");

  // Another list: the sources rule takes it; this machine no longer reaches 6443.
  const std::string narrower = R"({"id":")" + id +
                               R"(","ports":[22,80,443,6443],)"
                               R"("allow_from":["10.0.0.0/8"],"allow_from_ports":[80,443,6443]})";
  OpResult r = driver.OpenPorts(narrower);
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(r.json, R"({"allow_from":["10.0.0.0/8"]})");
  EXPECT_EQ(ranges(src), R"(["10.0.0.0/8"])");
  EXPECT_EQ(emulator_->Reachable("gcp-narrow"), "22");
  emulator_->ClearRequests();
  ASSERT_EQ(driver.OpenPorts(narrower).status, GPUPROV_STATUS_OK);  // a repeat: reads only
  EXPECT_EQ(CountMatching(emulator_->Requests(), "PATCH"), 0);
  EXPECT_EQ(CountMatching(emulator_->Requests(), "POST"), 0);

  // SSH narrowed too: 22 leaves the 0.0.0.0/0 rule, which then has nothing and goes.
  r = driver.OpenPorts(R"({"id":")" + id +
                       R"(","ports":[22,80,443,6443],)"
                       R"("allow_from":["10.0.0.0/8"],"allow_from_ports":[22,80,443,6443]})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(emulator_->Reachable("gcp-narrow"), "");
  EXPECT_EQ(emulator_->Count("firewalls"), 1);
  EXPECT_EQ(FirewallPorts(src), (std::vector<std::string>{"22", "80", "443", "6443"}));

  // No narrowing: every port back in the 0.0.0.0/0 rule, the sources rule deleted.
  r = driver.OpenPorts(R"({"id":")" + id + R"(","ports":[22,80,443,6443]})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(r.json, "{}");
  EXPECT_EQ(emulator_->Reachable("gcp-narrow"), "22,80,443,6443");
  EXPECT_EQ(emulator_->Count("firewalls"), 1);

  // Narrowed again, then down: both rules go.
  ASSERT_EQ(driver.OpenPorts(narrower).status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("firewalls"), 2);
  EXPECT_EQ(emulator_->Reachable("gcp-narrow"), "22");
  ASSERT_EQ(driver.Delete(R"({"id":")" + id + R"(","name":"gcp-narrow"})").status,
            GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
  EXPECT_EQ(emulator_->Count("instances"), 0);
}

// gc sees the sources rule as the VM's and deletes it alone.
TEST_F(GcpEmulatorTest, GcListsTheSourcesRuleWithItsVmAndDeletesIt) {
  Driver driver(Config());
  Object::Ptr req = ParseJson(CreateRequest("gcp-gc", "", {22, 6443}));
  req->set("allow_from", ParseJson(R"({"a":["10.0.0.0/8"]})")->getArray("a"));
  req->set("allow_from_ports", ParseJson(R"({"a":[6443]})")->getArray("a"));
  OpResult c = driver.Create(Stringify(req));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  const std::string src = SourcesFirewallName("gcp-gc");
  OpResult listed = driver.Call(driver.vtable().list_resources, "{}");
  ASSERT_EQ(listed.status, GPUPROV_STATUS_OK) << listed.error;
  Array::Ptr resources = listed.Doc()->getArray("resources");
  int firewalls = 0;
  for (size_t i = 0; i < resources->size(); ++i) {
    Object::Ptr r = resources->getObject(static_cast<unsigned>(i));
    if (r->getValue<std::string>("kind") != "firewall") continue;
    ++firewalls;
    EXPECT_EQ(r->getArray("vm_names")->getElement<std::string>(0), "gcp-gc") << listed.json;
  }
  EXPECT_EQ(firewalls, 2) << listed.json;
  OpResult del =
      driver.Call(driver.vtable().delete_resource, R"({"kind":"firewall","id":")" + src + R"("})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del;
  EXPECT_TRUE(del.Doc()->getValue<bool>("deleted"));
  EXPECT_EQ(emulator_->Count("firewalls"), 1);
  EXPECT_EQ(FirewallPorts("gpuprov-gcp-gc"), (std::vector<std::string>{"22"}));
}

TEST_F(GcpEmulatorTest, AllowFromRefusesIpv6AndTheEmulatorRefusesMixedFamilies) {
  Driver driver(Config());
  Object::Ptr req = ParseJson(CreateRequest("gcp-v6", ""));
  req->set("allow_from", ParseJson(R"({"a":["2001:db8::/32"]})")->getArray("a"));
  req->set("allow_from_ports", ParseJson(R"({"a":[6443]})")->getArray("a"));
  OpResult c = driver.Create(Stringify(req));
  EXPECT_EQ(c.status, GPUPROV_STATUS_INVALID_INPUT) << c;
  EXPECT_TRUE(Contains(c.error, "allow_from")) << c.error;
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
  EXPECT_EQ(emulator_->Count("instances"), 0);

  // GCE: "A firewall rule can contain either IPv4 or IPv6 ranges, but not both".
  std::optional<GoogleCredentials> creds = FindCredentials(emulator_->key_path());
  TokenSource tokens(*creds, drivers::RetryPolicy::Fast(), gpuprov::sdk::Host());
  HttpReply r = drivers::testing::LoopbackHttp(
      "POST", emulator_->url() + "/compute/v1/projects/" + creds->project_id + "/global/firewalls",
      R"({"name":"mixed","sourceRanges":["10.0.0.0/8","2001:db8::/32"],)"
      R"("allowed":[{"IPProtocol":"tcp","ports":["22"]}]})",
      {{"Authorization", "Bearer " + tokens.Token()}, {"Content-Type", "application/json"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_TRUE(Contains(r.body, "sourceRanges")) << r.body;
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
}

TEST_F(GcpEmulatorTest, ACpuVmInAGivenZone) {
  Driver driver(Config());
  OpResult c = driver.Create(CreateRequest("gcp-cpu", "", {22}, "europe-west4-b"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_EQ(c.Vm()->getValue<std::string>("region"), "europe-west4-b");
  EXPECT_EQ(c.Vm()->getValue<std::string>("instance_type"), "e2-standard-4");
  EXPECT_EQ(c.Vm()->getValue<std::string>("gpus"), "");
}

// --- clusters (ABI 1.5) ------------------------------------------------------

constexpr const char* kPeerPorts =
    R"([{"port":6443,"protocol":"tcp"},{"port":10250,"protocol":"tcp"},)"
    R"({"port":51820,"protocol":"udp"}])";

std::string PeersRequest(const std::string& cluster) {
  return R"({"cluster":")" + cluster + R"(","peer_ports":)" + kPeerPorts + R"(,"peers":[]})";
}

std::vector<std::string> StringList(const Object::Ptr& o, const std::string& key) {
  std::vector<std::string> out;
  Array::Ptr a = o ? o->getArray(key) : nullptr;
  for (size_t i = 0; a && i < a->size(); ++i) out.push_back(a->get(i).toString());
  return out;
}

// "kind name" -> "cluster/role [vm names]" of every resource list_resources gives.
std::map<std::string, std::string> ResourcesByName(const OpResult& listed) {
  std::map<std::string, std::string> out;
  Array::Ptr list = listed.Doc()->getArray("resources");
  for (size_t i = 0; list && i < list->size(); ++i) {
    Object::Ptr r = list->getObject(static_cast<unsigned>(i));
    std::vector<std::string> vms = StringList(r, "vm_names");
    std::sort(vms.begin(), vms.end());
    std::string names;
    for (const auto& v : vms) names += (names.empty() ? "" : ",") + v;
    out[r->getValue<std::string>("kind") + " " + r->getValue<std::string>("name")] =
        r->optValue<std::string>("cluster", "") + "/" + r->optValue<std::string>("role", "") +
        " [" + names + "]";
  }
  return out;
}

TEST_F(GcpEmulatorTest, AClusterSharesOneFirewallRuleByTagThatGoesWithItsLastNode) {
  Driver driver(Config());
  const std::vector<std::string> names = {"train", "train-agent-1", "train-agent-2"};
  std::vector<std::string> ids;
  for (size_t i = 0; i < names.size(); ++i) {
    OpResult r = driver.Create(
        WithCluster(CreateRequest(names[i], "L4", {22}), "train", i == 0 ? "server" : "agent"));
    ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r << "\n" << driver.host().All();
    ids.push_back(r.Vm()->getValue<std::string>("id"));
  }
  EXPECT_EQ(emulator_->Count("firewalls"), 4);  // one per instance and the cluster's

  // The VM objects carry the cluster, the role and the internal address (networkIP).
  std::vector<std::string> ips;
  for (size_t i = 0; i < ids.size(); ++i) {
    Object::Ptr vm = WaitRunning(driver, ids[i]);
    ASSERT_TRUE(vm) << names[i];
    EXPECT_EQ(vm->getValue<std::string>("cluster"), "train");
    EXPECT_EQ(vm->getValue<std::string>("role"), i == 0 ? "server" : "agent");
    ips.push_back(vm->getValue<std::string>("private_ip"));
    EXPECT_EQ(ips.back().rfind("10.", 0), 0u) << Stringify(vm);
  }

  // The rule: from the cluster's tag to the cluster's tag, the peer ports, no sourceRanges.
  Object::Ptr rule = Firewall("gpuprov-train-peers");
  ASSERT_TRUE(rule);
  EXPECT_EQ(StringList(rule, "sourceTags"), std::vector<std::string>{"gpuprov-cluster-train"});
  EXPECT_EQ(StringList(rule, "targetTags"), std::vector<std::string>{"gpuprov-cluster-train"});
  EXPECT_FALSE(rule->has("sourceRanges")) << Stringify(rule);
  std::ostringstream allowed;
  rule->getArray("allowed")->stringify(allowed);
  EXPECT_EQ(allowed.str(),
            R"([{"IPProtocol":"tcp","ports":["6443","10250"]},)"
            R"({"IPProtocol":"udp","ports":["51820"]}])");
  // Nothing new from the internet; between the nodes, the peer ports from each other only.
  EXPECT_EQ(emulator_->Reachable("train-agent-1"), "22");
  std::vector<std::string> sorted = ips;
  std::sort(sorted.begin(), sorted.end());
  const std::string all = sorted[0] + "," + sorted[1] + "," + sorted[2];
  EXPECT_EQ(emulator_->PrivateSources("train", "tcp", "10250"), all);
  EXPECT_EQ(emulator_->PrivateSources("train-agent-1", "udp", "51820"), all);
  EXPECT_EQ(emulator_->PrivateSources("train-agent-1", "tcp", "6443"), all);
  EXPECT_EQ(emulator_->PrivateSources("train", "tcp", "8080"), "");

  // open_peer_ports: checked, nothing to change, idempotent.
  emulator_->ClearRequests();
  for (int i = 0; i < 2; ++i) {
    OpResult opened = driver.OpenPeerPorts(PeersRequest("train"));
    ASSERT_EQ(opened.status, GPUPROV_STATUS_OK) << opened;
    EXPECT_EQ(opened.json, "{}");
  }
  EXPECT_EQ(CountMatching(emulator_->Requests(), "POST"), 0);
  EXPECT_EQ(CountMatching(emulator_->Requests(), "PATCH"), 0);
  // A rule that lost a port is repaired.
  PatchFirewall("gpuprov-train-peers", R"({"allowed":[{"IPProtocol":"tcp","ports":["6443"]}]})");
  EXPECT_EQ(emulator_->PrivateSources("train", "udp", "51820"), "");
  ASSERT_EQ(driver.OpenPeerPorts(PeersRequest("train")).status, GPUPROV_STATUS_OK);
  EXPECT_EQ(FirewallPorts("gpuprov-train-peers"),
            (std::vector<std::string>{"6443", "10250", "51820"}));
  EXPECT_EQ(emulator_->PrivateSources("train", "udp", "51820"), all);

  // gc sees the rule as the cluster's and each instance's cluster and role.
  OpResult listed = driver.ListResources();
  ASSERT_EQ(listed.status, GPUPROV_STATUS_OK) << listed;
  std::map<std::string, std::string> res = ResourcesByName(listed);
  EXPECT_EQ(res["cluster_firewall gpuprov-train-peers"],
            "train/ [train,train-agent-1,train-agent-2]")
      << listed.json;
  EXPECT_EQ(res["vm train"], "train/server [train]") << listed.json;
  EXPECT_EQ(res["vm train-agent-2"], "train/agent [train-agent-2]") << listed.json;
  EXPECT_EQ(res["firewall gpuprov-train-agent-1"], "/ [train-agent-1]") << listed.json;

  // A node that goes loses the peers' access (it no longer carries the tag); the rule stays
  // while a node is left and goes with the last.
  ASSERT_EQ(driver.Delete(R"({"id":")" + ids[2] + R"(","name":"train-agent-2"})").status,
            GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->PrivateSources("train", "tcp", "10250"),
            std::min(ips[0], ips[1]) + "," + std::max(ips[0], ips[1]));
  ASSERT_EQ(driver.Delete(R"({"id":")" + ids[0] + R"(","name":"train"})").status,
            GPUPROV_STATUS_OK);
  EXPECT_TRUE(Firewall("gpuprov-train-peers"));
  EXPECT_EQ(emulator_->Count("firewalls"), 2);
  ASSERT_EQ(driver.Delete(R"({"id":")" + ids[1] + R"(","name":"train-agent-1"})").status,
            GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
  EXPECT_EQ(emulator_->Count("instances"), 0);
}

TEST_F(GcpEmulatorTest, ABadClusterIsRefusedBeforeAnyCall) {
  Driver driver(Config());
  emulator_->ClearRequests();
  OpResult bad = driver.Create(WithCluster(CreateRequest("bad"), "Bad_Name", "server"));
  EXPECT_EQ(bad.status, GPUPROV_STATUS_INVALID_INPUT) << bad;
  EXPECT_TRUE(Contains(bad.error, "cluster.name")) << bad.error;
  // gpuprov-cluster-<name> must stay a 63-character GCE tag.
  const std::string long_name(48, 'c');
  OpResult tag = driver.Create(WithCluster(CreateRequest("c"), long_name, "server"));
  EXPECT_EQ(tag.status, GPUPROV_STATUS_INVALID_INPUT) << tag;
  EXPECT_TRUE(Contains(tag.error, "63 characters")) << tag.error;
  EXPECT_TRUE(emulator_->Requests().empty());
}

// The nodes of one cluster created at once (one driver handle each, as the ABI asks) race to
// insert the rule: GCE refuses a second rule of that name (409 alreadyExists) and the nodes
// that lost check the one the winner made. One rule, no create fails.
TEST_F(GcpEmulatorTest, NodesOfAClusterCreatedAtOnceShareOneRule) {
  const std::vector<std::string> names = {"race", "race-agent-1", "race-agent-2", "race-agent-3"};
  std::vector<std::unique_ptr<Driver>> drivers;
  for (size_t i = 0; i < names.size(); ++i) drivers.push_back(std::make_unique<Driver>(Config()));
  std::vector<OpResult> results(names.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < names.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = drivers[i]->Create(WithCluster(CreateRequest(names[i], "L4", {22}), "race",
                                                    i == 0 ? "server" : "agent"));
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_EQ(results[i].status, GPUPROV_STATUS_OK) << names[i] << ": " << results[i] << "\n"
                                                    << drivers[i]->host().All();
  }
  EXPECT_EQ(emulator_->Count("firewalls"), static_cast<long long>(names.size()) + 1);
  EXPECT_EQ(FirewallPorts("gpuprov-race-peers"),
            (std::vector<std::string>{"6443", "10250", "51820"}));
}

// No capacity for the third node in any zone: the others and the cluster's rule stay.
TEST_F(GcpEmulatorTest, CapacityOnTheThirdNodeOfAClusterLeavesTheOthers) {
  Driver driver(Config());
  emulator_->Fault(R"("fault":"capacity","times":20,"body":"train-agent-2")");
  for (const char* n : {"train", "train-agent-1"}) {
    OpResult r = driver.Create(WithCluster(CreateRequest(n, "L4", {22}), "train",
                                             std::string(n) == "train" ? "server" : "agent"));
    ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << n << ": " << r;
  }
  OpResult third =
      driver.Create(WithCluster(CreateRequest("train-agent-2", "L4", {22}), "train", "agent"));
  EXPECT_EQ(third.status, GPUPROV_STATUS_CAPACITY) << third;
  EXPECT_EQ(emulator_->Count("instances"), 2);
  EXPECT_TRUE(Firewall("gpuprov-train-peers"));
  EXPECT_EQ(emulator_->Count("firewalls"), 3);  // the two nodes' and the cluster's
}

TEST_F(GcpEmulatorTest, GcRemovesALeftoverClusterRuleAndNoOtherRule) {
  Driver driver(Config());
  // A rule left by a cluster whose nodes are gone (open_peer_ports makes it when missing).
  ASSERT_EQ(driver.OpenPeerPorts(PeersRequest("gone")).status, GPUPROV_STATUS_OK);
  // A user's rule of a gpuprov-like name that does not admit the cluster's tag only.
  std::optional<GoogleCredentials> creds = FindCredentials(emulator_->key_path());
  TokenSource tokens(*creds, drivers::RetryPolicy::Fast(), gpuprov::sdk::Host());
  HttpReply made = drivers::testing::LoopbackHttp(
      "POST", emulator_->url() + "/compute/v1/projects/" + creds->project_id + "/global/firewalls",
      R"({"name":"gpuprov-mine-peers","sourceRanges":["10.0.0.0/8"],)"
      R"("sourceTags":["gpuprov-cluster-mine"],"targetTags":["gpuprov-cluster-mine"],)"
      R"("allowed":[{"IPProtocol":"tcp","ports":["6443"]}]})",
      {{"Authorization", "Bearer " + tokens.Token()}, {"Content-Type", "application/json"}});
  ASSERT_EQ(made.status, 200) << made.body;

  OpResult listed = driver.ListResources();
  ASSERT_EQ(listed.status, GPUPROV_STATUS_OK) << listed;
  std::map<std::string, std::string> res = ResourcesByName(listed);
  EXPECT_EQ(res["cluster_firewall gpuprov-gone-peers"], "gone/ []") << listed.json;
  EXPECT_EQ(res.count("cluster_firewall gpuprov-mine-peers"), 0u) << listed.json;

  OpResult mine =
      driver.DeleteResource(R"({"kind":"cluster_firewall","id":"gpuprov-mine-peers"})");
  EXPECT_EQ(mine.status, GPUPROV_STATUS_INVALID_INPUT) << mine;
  // The cluster's create refuses to take over a rule of its name that is not its own.
  OpResult taken = driver.OpenPeerPorts(PeersRequest("mine"));
  EXPECT_EQ(taken.status, GPUPROV_STATUS_INVALID_INPUT) << taken;
  EXPECT_TRUE(Contains(taken.error, "gpuprov-mine-peers")) << taken.error;

  OpResult gone = driver.DeleteResource(R"({"kind":"cluster_firewall","id":"gpuprov-gone-peers"})");
  ASSERT_EQ(gone.status, GPUPROV_STATUS_OK) << gone;
  EXPECT_TRUE(Contains(gone.json, "true")) << gone.json;
  EXPECT_EQ(emulator_->Count("firewalls"), 1);  // the user's rule
}

}  // namespace
}  // namespace gpuprov::gcp
