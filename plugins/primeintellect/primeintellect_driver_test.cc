// SPDX-License-Identifier: Apache-2.0
//
// Loads the BUILT driver .so with dlopen, as the host does, and drives it through the C
// vtable against the Prime Intellect emulator (gpuprov-emulator, started as a child process
// on 127.0.0.1 and stopped at the end). Tests that need the emulator skip with a reason when
// it is not built.
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "driver_test_util.h"
#include "gpuprov/driver_abi.h"

namespace gpuprov::primeintellect {
namespace {

using namespace drivers::testing;  // the shared driver test helpers (driver_test_util.h)
using Poco::JSON::Array;
using Poco::JSON::Object;

constexpr const char* kKey = "pit_test_key_0123456789abcdef";
constexpr const char* kWrongKey = "pit_wrong_key_fedcba9876543210";
constexpr const char* kPublicKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtcGktdGVzdC1rZXktMDAwMDAw test@gpuprov";

// --- the driver through its C ABI ----------------------------------------------

constexpr char kDriverPath[] = GPUPROV_PRIMEINTELLECT_DRIVER_PATH;
using Driver = DriverAt<kDriverPath>;

const gpuprov_type_driver_descriptor* Descriptor() { return Driver::Descriptor(); }

// A temporary HOME, optionally with ~/.prime/config.json.
class TempHome {
 public:
  TempHome() : dir_("gpuprov-pi-home"), env_("HOME", dir_.path().c_str()) {}
  void WriteConfig(const std::string& json) {
    std::filesystem::create_directories(dir_.path() / ".prime");
    std::ofstream(dir_.path() / ".prime" / "config.json") << json;
  }

 private:
  ScopedTempDir dir_;
  ScopedEnv env_;
};

// --- the emulator as a child process -------------------------------------------

class Emulator : public OneCloudEmulator {
 public:
  Emulator() : OneCloudEmulator("primeintellect") {}
  // Starts it with PRIME_API_KEY=kKey; waits for its endpoint lines.
  bool Start(std::string* problem) {
    return StartMemory({"--boot-seconds", "0.3"}, {{"PRIME_API_KEY", kKey}}, problem);
  }
  std::string prime() const { return url(); }
  void Settings(const std::string& members) const {
    HttpReply r = Control("POST", "/settings", R"({"cloud":"primeintellect",)" + members + "}");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  HttpReply Api(const std::string& method, const std::string& path,
                const std::string& body = "") const {
    return LoopbackHttp(method, url() + path, body,
                        {{"Authorization", std::string("Bearer ") + kKey},
                         {"Content-Type", "application/json"}});
  }
  void Preempt(const std::string& pod_name) const {
    HttpReply r =
        Control("POST", "/preempt", R"({"cloud":"primeintellect","name":")" + pod_name + R"("})");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  // The emulator's row of the live pod named `pod_name` (control GET /instances).
  Object::Ptr Row(const std::string& pod_name) const {
    HttpReply r = Control("GET", "/instances?cloud=primeintellect");
    Poco::JSON::Array::Ptr list = r.Doc()->getArray("instances");
    for (size_t i = 0; list && i < list->size(); ++i) {
      Object::Ptr o = list->getObject(static_cast<unsigned>(i));
      if (o->getValue<std::string>("name") == pod_name) return o;
    }
    return nullptr;
  }
};

std::string Config(const std::string& endpoint, const std::string& vm_providers = "") {
  Object::Ptr config = new Object();
  if (!vm_providers.empty()) config->set("vm_providers", vm_providers);
  Object::Ptr retry = new Object();
  retry->set("max_attempts", 5);
  retry->set("base_delay_ms", 5);
  retry->set("max_delay_ms", 50);
  retry->set("max_retry_after_ms", 50);
  retry->set("total_budget_ms", 10000);
  retry->set("attempt_timeout_ms", 5000);
  config->set("retry", retry);
  config->set("poll_interval_ms", 100);
  config->set("delete_wait_seconds", 20);
  Object root;
  root.set("endpoint", endpoint);
  root.set("config", config);
  std::ostringstream s;
  root.stringify(s);
  return s.str();
}

std::string CreateRequest(const std::string& name, const std::string& gpu_type, int count,
                          const std::string& region = "", const std::string& instance_type = "",
                          bool kubernetes = true) {
  Object req;
  req.set("kubernetes", kubernetes);
  req.set("name", name);
  req.set("region", region);
  req.set("instance_type", instance_type);
  Object::Ptr gpu = new Object();
  gpu->set("type", gpu_type);
  gpu->set("count", count);
  req.set("gpu", gpu);
  req.set("image", "");
  req.set("ssh_public_key", kPublicKey);
  req.set("user_data", "");
  Object::Ptr tags = new Object();
  tags->set("gpuprov", "1");
  tags->set("gpuprov-name", name);
  req.set("tags", tags);
  Array::Ptr ports = new Array();
  ports->add(22);
  req.set("open_ports", ports);
  std::ostringstream s;
  req.stringify(s);
  return s.str();
}

// --- no emulator needed ----------------------------------------------------------

TEST(PrimeIntellectDescriptor, NameAndCapabilities) {
  const gpuprov_type_driver_descriptor* d = Descriptor();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->magic, GPUPROV_DRIVER_MAGIC);
  EXPECT_STREQ(d->name, "primeintellect");
  // How its VM learns its public address: REFERENCE.md section 6.
  EXPECT_STREQ(d->node_address, GPUPROV_NODE_ADDRESS_NONE);
  EXPECT_EQ(d->capabilities,
            GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_HOSTS_KUBERNETES | GPUPROV_CAP_CLUSTER |
                GPUPROV_CAP_SPOT);
  EXPECT_EQ(d->capabilities & (GPUPROV_CAP_BOOT_CLOUD_INIT | GPUPROV_CAP_BOOT_STARTUP_SCRIPT |
                               GPUPROV_CAP_OPEN_PORTS),
            0u);
  const gpuprov_drv_vtable* v = d->vtable;
  drivers::testing::ExpectEveryOperation(*v, /*open_ports=*/false);
  EXPECT_NE(v->open_peer_ports, nullptr);
}

TEST(PrimeIntellectInit, PlainHttpToARemoteHostIsRefused) {
  Driver d(R"({"endpoint":"http://api.primeintellect.ai","config":{}})");
  EXPECT_EQ(d.init_status(), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_TRUE(Contains(d.init_error(), "GPUPROV_PRIMEINTELLECT_ENDPOINT")) << d.init_error();
}

TEST(PrimeIntellectInit, BadSettingIsInvalidInput) {
  Driver d(R"({"endpoint":"","config":{"retry":{"max_attempts":"many"}}})");
  EXPECT_EQ(d.init_status(), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_TRUE(Contains(d.init_error(), "max_attempts")) << d.init_error();
}

TEST(PrimeIntellectCredentials, NoKeyAnywhereIsAuthWithHint) {
  TempHome home;
  ScopedEnv no_key("PRIME_API_KEY", nullptr);
  // Loopback endpoint with nothing listening: no request may be needed to fail.
  Driver d(Config("http://127.0.0.1:9"));
  ASSERT_EQ(d.init_status(), GPUPROV_STATUS_OK) << d.init_error();
  OpResult r = d.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH);
  EXPECT_TRUE(Contains(r.error, "PRIME_API_KEY")) << r.error;
  EXPECT_TRUE(Contains(r.error, "~/.prime/config.json")) << r.error;
}

TEST(PrimeIntellectCredentials, BrokenConfigFileIsAuth) {
  TempHome home;
  home.WriteConfig("{not json");
  ScopedEnv no_key("PRIME_API_KEY", nullptr);
  Driver d(Config("http://127.0.0.1:9"));
  OpResult r = d.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH);
  EXPECT_TRUE(Contains(r.error, "config.json")) << r.error;
}

// --- against the emulator ----------------------------------------------------------

class PrimeIntellectEmulator : public SharedEmulatorTest<Emulator> {
 protected:
  void SetUp() override {
    SharedEmulatorTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    emulator_->Reset();
    home_ = std::make_unique<TempHome>();
    key_ = std::make_unique<ScopedEnv>("PRIME_API_KEY", kKey);
  }
  void TearDown() override {
    key_.reset();
    home_.reset();
  }

  Emulator& emu() { return *emulator_; }
  std::string config() const { return Config(emulator_->prime()); }

  // Polls get until the state is `want` (or an end state); returns the last VM.
  Object::Ptr WaitFor(Driver& d, const std::string& id, const std::string& want) {
    return drivers::testing::PollVm(
        d, R"({"id":")" + id + R"("})",
        [&](const Object::Ptr& vm) {
          const std::string state = vm->getValue<std::string>("state");
          return state == want || state == "error" || state == "terminated";
        },
        std::chrono::seconds(30));
  }

  std::unique_ptr<TempHome> home_;
  std::unique_ptr<ScopedEnv> key_;
};

TEST_F(PrimeIntellectEmulator, CheckNamesWhereTheKeyCameFrom) {
  Driver d(config());
  OpResult r = d.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  EXPECT_EQ(r.Doc()->getValue<std::string>("key_source"), "$PRIME_API_KEY");
  EXPECT_FALSE(Contains(r.json, kKey));
}

// The prime CLI's settings (issue 17): base_url, ssh_key_path, and PRIME_TEAM_ID="".

TEST_F(PrimeIntellectEmulator, TheCliBaseUrlIsTheEndpointWhenGpuprovSetsNone) {
  // The emulator's URL ends in /api/v1 (a trailing "/api/v1/" is accepted, as from gpuprov).
  std::string host = emu().prime();
  host.erase(host.size() - std::string("/api/v1").size());
  home_->WriteConfig(R"({"base_url":")" + emu().prime() +
                     R"(/","ssh_key_path":"~/.ssh/prime_key"})");
  Driver d(Config(""));
  ASSERT_EQ(d.init_status(), GPUPROV_STATUS_OK) << d.init_error();
  OpResult r = d.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  EXPECT_EQ(r.Doc()->getValue<std::string>("endpoint"), host);
  EXPECT_EQ(r.Doc()->getValue<std::string>("endpoint_from"), "base_url in ~/.prime/config.json");
  const std::string ssh_key = r.Doc()->getValue<std::string>("cli_ssh_key_path");
  EXPECT_EQ(ssh_key, std::string(getenv("HOME")) + "/.ssh/prime_key");

  // PRIME_API_BASE_URL wins over the file; gpuprov's own endpoint wins over both.
  home_->WriteConfig(R"({"base_url":"http://127.0.0.1:9"})");
  {
    ScopedEnv env("PRIME_API_BASE_URL", host.c_str());
    Driver d2(Config(""));
    OpResult r2 = d2.Check();
    ASSERT_EQ(r2.status, GPUPROV_STATUS_OK) << r2.error;
    EXPECT_EQ(r2.Doc()->getValue<std::string>("endpoint_from"), "$PRIME_API_BASE_URL");
  }
  ScopedEnv env("PRIME_API_BASE_URL", "http://127.0.0.1:9");
  Driver d3(config());
  OpResult r3 = d3.Check();
  ASSERT_EQ(r3.status, GPUPROV_STATUS_OK) << r3.error;
  EXPECT_EQ(r3.Doc()->getValue<std::string>("endpoint"), host);
}

TEST(PrimeIntellectInit, APlainHttpCliBaseUrlToARemoteHostIsRefusedNamingIt) {
  TempHome home;
  home.WriteConfig(R"({"base_url":"http://api.primeintellect.ai"})");
  ScopedEnv no_env("PRIME_API_BASE_URL", nullptr);
  Driver d(R"({"endpoint":"","config":{}})");
  EXPECT_EQ(d.init_status(), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_TRUE(Contains(d.init_error(), "base_url in ~/.prime/config.json")) << d.init_error();
}

TEST_F(PrimeIntellectEmulator, AnEmptyPrimeTeamIdIsThePersonalAccount) {
  home_->WriteConfig(R"({"team_id":"team-from-cli"})");
  auto team_of_new_pod = [&](const std::string& name) {
    Driver d(config());
    OpResult offers = d.Offers(R"({"gpu":{"type":"A100","count":1},"region":""})");
    EXPECT_EQ(offers.status, GPUPROV_STATUS_OK) << offers.error;
    Object::Ptr offer = offers.Doc()->getArray("offers")->getObject(0);
    OpResult c = d.Create(CreateRequest(name, "A100", 1, offer->getValue<std::string>("region"),
                                        offer->getValue<std::string>("instance_type")));
    EXPECT_EQ(c.status, GPUPROV_STATUS_OK) << c.error;
    if (c.status != GPUPROV_STATUS_OK) return std::string("?");
    const std::string id = c.Vm()->getValue<std::string>("id");
    HttpReply pod = LoopbackHttp("GET", emu().prime() + "/pods/" + id, "",
                                 {{"Authorization", std::string("Bearer ") + kKey}});
    EXPECT_EQ(pod.status, 200) << pod.body;
    Object::Ptr doc = pod.Doc();
    return doc->isNull("teamId") ? std::string("<none>") : doc->getValue<std::string>("teamId");
  };
  EXPECT_EQ(team_of_new_pod("pi-team"), "team-from-cli");
  ScopedEnv personal("PRIME_TEAM_ID", "");
  EXPECT_EQ(team_of_new_pod("pi-personal"), "<none>");
  Driver d(config());
  OpResult r = d.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  EXPECT_TRUE(Contains(r.Doc()->getValue<std::string>("account"), "personal account")) << r.json;
}

TEST_F(PrimeIntellectEmulator, EnvironmentKeyWinsOverConfigFile) {
  home_->WriteConfig(std::string(R"({"api_key":")") + kWrongKey + R"(","team_id":null})");
  Driver d(config());
  OpResult r = d.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  EXPECT_EQ(r.Doc()->getValue<std::string>("key_source"), "$PRIME_API_KEY");
}

TEST_F(PrimeIntellectEmulator, ConfigFileKeyWhenNoEnvironment) {
  home_->WriteConfig(std::string(R"({"api_key":")") + kKey +
                     R"(","base_url":"https://api.primeintellect.ai"})");
  ScopedEnv no_key("PRIME_API_KEY", nullptr);
  Driver d(config());
  OpResult r = d.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  EXPECT_EQ(r.Doc()->getValue<std::string>("key_source"), "~/.prime/config.json");
}

TEST_F(PrimeIntellectEmulator, BlankEnvironmentKeyFallsBackToConfigFile) {
  home_->WriteConfig(std::string(R"({"api_key":")") + kKey + R"("})");
  ScopedEnv blank("PRIME_API_KEY", "  ");
  Driver d(config());
  OpResult r = d.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  EXPECT_EQ(r.Doc()->getValue<std::string>("key_source"), "~/.prime/config.json");
}

TEST_F(PrimeIntellectEmulator, WrongKeyIsAuthAndNeverShown) {
  ScopedEnv wrong("PRIME_API_KEY", kWrongKey);
  Driver d(config());
  for (const OpResult& r : {d.Check(), d.List(), d.Create(CreateRequest("pi-auth", "A100", 1))}) {
    EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r.error;
    EXPECT_TRUE(Contains(r.error, "PRIME_API_KEY")) << r.error;
    EXPECT_TRUE(Contains(r.error, "~/.prime/config.json")) << r.error;
    EXPECT_FALSE(Contains(r.error, kWrongKey)) << r.error;
  }
  EXPECT_FALSE(Contains(d.host().All(), kWrongKey));
  EXPECT_EQ(emu().Count("instances"), 0);
}

TEST_F(PrimeIntellectEmulator, WrongKeyInConfigFileIsAuth) {
  home_->WriteConfig(std::string(R"({"api_key":")") + kWrongKey + R"("})");
  ScopedEnv no_key("PRIME_API_KEY", nullptr);
  Driver d(config());
  OpResult r = d.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r.error;
  EXPECT_FALSE(Contains(r.error, kWrongKey)) << r.error;
}

TEST_F(PrimeIntellectEmulator, OffersAreCheapestInStockFirstWithPrices) {
  Driver d(config());
  OpResult r = d.Offers(R"({"gpu":{"type":"A100","count":1},"region":""})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  Array::Ptr offers = r.Doc()->getArray("offers");
  ASSERT_GE(offers->size(), 2u) << r.json;
  double last = 0;
  for (size_t i = 0; i < offers->size(); ++i) {
    Object::Ptr o = offers->getObject(static_cast<unsigned>(i));
    EXPECT_EQ(o->getValue<std::string>("gpu_type"), "A100_80GB");
    EXPECT_EQ(o->getValue<int>("gpu_count"), 1);
    double price = o->getValue<double>("price_per_hour");
    EXPECT_GE(price, last);
    last = price;
  }
  Object::Ptr first = offers->getObject(0);
  EXPECT_FALSE(first->getValue<std::string>("instance_type").empty());
  EXPECT_FALSE(first->getValue<std::string>("region").empty());

  // A region narrows it: data center or country.
  r = d.Offers(R"({"gpu":{"type":"A100-80GB","count":1},"region":"CANADA-1"})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  offers = r.Doc()->getArray("offers");
  ASSERT_EQ(offers->size(), 1u) << r.json;
  EXPECT_EQ(offers->getObject(0)->getValue<std::string>("instance_type"), "n3-A100x1");

  r = d.Offers(R"({"gpu":{"type":"H100","count":3},"region":""})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  EXPECT_EQ(r.Doc()->getArray("offers")->size(), 0u);
}

// --- spot (README.md, "Spot pods") ------------------------------------------------------

// A spot offer (isSpot) is the spot price of the on-demand row of the same GPUs in the same
// region, never a row of its own; an on-demand create never takes one, however cheap.
TEST_F(PrimeIntellectEmulator, SpotOffersAreTheSpotPriceOfTheOnDemandRowOfTheirGpusAndRegion) {
  Driver d(config());
  OpResult r = d.Offers(R"({"gpu":{"type":"A100","count":1},"region":""})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  Array::Ptr offers = r.Doc()->getArray("offers");
  ASSERT_EQ(offers->size(), 2u) << r.json;  // datacrunch FIN-01 and hyperstack CANADA-1
  for (size_t i = 0; i < offers->size(); ++i) {
    Object::Ptr o = offers->getObject(static_cast<unsigned>(i));
    if (o->getValue<std::string>("region") == "FIN-01") {
      EXPECT_EQ(o->getValue<std::string>("instance_type"), "1A100.22V");
      EXPECT_DOUBLE_EQ(o->getValue<double>("price_per_hour"), 1.29);
      EXPECT_DOUBLE_EQ(o->getValue<double>("spot_price_per_hour"), 0.52);
    } else {
      EXPECT_EQ(o->getValue<std::string>("instance_type"), "n3-A100x1");
      EXPECT_FALSE(o->has("spot_price_per_hour")) << r.json;
    }
  }
  OpResult c = d.Create(CreateRequest("pi-ondemand", "A100", 1));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c.error;
  EXPECT_EQ(c.Vm()->getValue<std::string>("instance_type"), "1A100.22V");
  EXPECT_FALSE(c.Vm()->has("spot")) << c.json;
  ASSERT_EQ(d.Delete(R"({"name":"pi-ondemand"})").status, GPUPROV_STATUS_OK);
}

// A spot create takes the spot offer of the row's GPUs and region; Prime Intellect documents no
// preemption status, so a spot pod it ended (POST /preempt: TERMINATED) is "preempted", in get
// and list, until delete removes it.
TEST_F(PrimeIntellectEmulator, ASpotPodTakenBackIsPreemptedUntilItIsDeleted) {
  Driver d(config());
  Object::Ptr req = ParseJson(CreateRequest("pi-spot", "A100", 1, "FIN-01", "1A100.22V"));
  req->set("spot", true);
  OpResult c = d.Create(Stringify(req));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c.error << "\n" << d.host().All();
  EXPECT_EQ(c.Vm()->getValue<std::string>("instance_type"), "1A100.22V.spot");
  EXPECT_TRUE(c.Vm()->getValue<bool>("spot"));
  const std::string id = c.Vm()->getValue<std::string>("id");
  Object::Ptr vm = WaitFor(d, id, "running");
  ASSERT_TRUE(vm);
  ASSERT_EQ(vm->getValue<std::string>("state"), "running");

  emu().Preempt("gpuprov-pi-spot");
  const std::string reason = "Prime Intellect ended the spot pod (status TERMINATED)";
  ExpectPreempted(d, R"({"id":")" + id + R"(","name":"pi-spot"})", reason);
  ExpectPreempted(d, R"({"name":"pi-spot"})", reason);

  OpResult del = d.Delete(R"({"id":")" + id + R"(","name":"pi-spot"})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del.error;
  EXPECT_TRUE(del.Doc()->getValue<bool>("deleted"));
  EXPECT_EQ(emu().Count("instances"), 0);
  EXPECT_EQ(emu().Count("ssh_keys"), 0);
  EXPECT_EQ(d.Get(R"({"id":")" + id + R"(","name":"pi-spot"})").status, GPUPROV_STATUS_NOT_FOUND);

  // No spot offer of these GPUs: refused, nothing made.
  Object::Ptr l40s = ParseJson(CreateRequest("pi-spot-l40s", "L40S", 1));
  l40s->set("spot", true);
  OpResult none = d.Create(Stringify(l40s));
  EXPECT_EQ(none.status, GPUPROV_STATUS_INVALID_INPUT) << none.json;
  EXPECT_TRUE(Contains(none.error, "offers no spot")) << none.error;
  EXPECT_EQ(emu().Count("instances"), 0);
}

// --- Kubernetes on: only offers of providers that give a VM --------------------------

TEST(PrimeIntellectInit, BadVmProvidersIsInvalidInputNamingTheKey) {
  for (const char* bad : {R"("run;pod")", R"(" , ")", R"("")"}) {
    Driver d(std::string(R"({"endpoint":"","config":{"vm_providers":)") + bad + "}}");
    EXPECT_EQ(d.init_status(), GPUPROV_STATUS_INVALID_INPUT) << bad;
    EXPECT_TRUE(Contains(d.init_error(), "vm_providers")) << d.init_error();
  }
}

// The emulator's cheapest A100:1 is a RunPod container offer (REFERENCE.md §7 lists
// "NVIDIA A100 80GB PCIe"@runpod): skipped with Kubernetes on, and the skip is reported.
TEST_F(PrimeIntellectEmulator, KubernetesOffersSkipContainerOffersAndSaySo) {
  Driver d(config());
  for (const char* request : {R"({"gpu":{"type":"A100","count":1},"region":"","kubernetes":true})",
                              R"({"gpu":{"type":"A100","count":1},"region":""})"}) {
    OpResult r = d.Offers(request);
    ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
    Array::Ptr offers = r.Doc()->getArray("offers");
    ASSERT_GE(offers->size(), 2u) << r.json;
    for (size_t i = 0; i < offers->size(); ++i) {
      const std::string provider = offers->getObject(static_cast<unsigned>(i))
                                       ->getValue<std::string>("provider");
      EXPECT_TRUE(provider == "hyperstack" || provider == "datacrunch") << r.json;
    }
    EXPECT_EQ(offers->getObject(0)->getValue<std::string>("instance_type"), "1A100.22V");
  }
  const std::string said = d.host().All();
  EXPECT_TRUE(Contains(said, "skipping 1 offer not from a VM provider")) << said;
  EXPECT_TRUE(Contains(said, "NVIDIA A100 80GB PCIe@runpod in US-KS-2 $1.19/h (container)"))
      << said;
  EXPECT_TRUE(Contains(said, "--no-k8s")) << said;
}

TEST_F(PrimeIntellectEmulator, PlainMachineOffersIncludeContainers) {
  Driver d(config());
  OpResult r = d.Offers(R"({"gpu":{"type":"A100","count":1},"region":"","kubernetes":false})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  Object::Ptr first = r.Doc()->getArray("offers")->getObject(0);
  EXPECT_EQ(first->getValue<std::string>("instance_type"), "NVIDIA A100 80GB PCIe");
  EXPECT_EQ(first->getValue<std::string>("provider"), "runpod");
  EXPECT_FALSE(Contains(d.host().All(), "skipping")) << d.host().All();
}

TEST_F(PrimeIntellectEmulator, KubernetesRefusesAGpuOnlyContainersOfferNamingThemAndTheFix) {
  Driver d(config());
  for (const OpResult& r :
       {d.Offers(R"({"gpu":{"type":"RTX-A6000","count":1},"region":"","kubernetes":true})"),
        d.Create(CreateRequest("pi-a6000", "RTX-A6000", 1))}) {
    EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r.json;
    EXPECT_TRUE(Contains(r.error, "only from providers that are not VM providers")) << r.error;
    EXPECT_TRUE(Contains(r.error, "NVIDIA RTX A6000@runpod in EU-RO-1 $0.49/h (container)"))
        << r.error;
    EXPECT_TRUE(Contains(r.error, "--no-k8s")) << r.error;
    EXPECT_TRUE(Contains(r.error, "vm_providers in [clouds.primeintellect]")) << r.error;
  }
  EXPECT_EQ(emu().Count("instances"), 0);
  EXPECT_EQ(emu().Count("ssh_keys"), 0);  // refused before anything was registered
}

// Create re-reads availability and applies the same rule: the pod lands on the cheapest VM
// offer with Kubernetes on, on the cheapest offer of all without.
TEST_F(PrimeIntellectEmulator, CreateLandsOnAVmProviderOnlyWithKubernetes) {
  Driver d(config());
  OpResult k8s = d.Create(CreateRequest("pi-k8s", "A100", 1));
  ASSERT_EQ(k8s.status, GPUPROV_STATUS_OK) << k8s.error;
  // datacrunch has one A100:1 offer, 1A100.22V (the pod does not echo its cloudId).
  EXPECT_EQ(k8s.Doc()->getObject("vm")->getValue<std::string>("provider"), "datacrunch");
  OpResult plain = d.Create(CreateRequest("pi-plain", "A100", 1, "", "", false));
  ASSERT_EQ(plain.status, GPUPROV_STATUS_OK) << plain.error;
  EXPECT_EQ(plain.Doc()->getObject("vm")->getValue<std::string>("provider"), "runpod");
  // A container offer named as the instance type is refused with Kubernetes on.
  OpResult named = d.Create(CreateRequest("pi-named", "A100", 1, "", "NVIDIA A100 80GB PCIe"));
  EXPECT_EQ(named.status, GPUPROV_STATUS_INVALID_INPUT) << named.json;
  EXPECT_TRUE(Contains(named.error, "@runpod")) << named.error;
  EXPECT_EQ(emu().Count("instances"), 2);
  for (const char* name : {"pi-k8s", "pi-plain"}) {
    OpResult del = d.Delete(std::string(R"({"name":")") + name + R"("})");
    EXPECT_EQ(del.status, GPUPROV_STATUS_OK) << del.error;
  }
  EXPECT_EQ(emu().Count("instances"), 0);
}

// A cluster (ABI 1.5) on a cloud without a private network or a firewall API: the pods are
// plain pods with public addresses; open_peer_ports checks its request and changes nothing
// (the node firewall admits the peers).
TEST_F(PrimeIntellectEmulator, AClusterNodeIsAPodWithNoPrivateAddress) {
  Driver d(config());
  std::string create = CreateRequest("pi-train", "A100", 1);
  create.insert(create.size() - 1,
                R"(,"cluster":{"name":"pi-train","role":"server","peer_ports":[)"
                R"({"port":6443,"protocol":"tcp"},{"port":51820,"protocol":"udp"}]})");
  OpResult c = d.Create(create);
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c.error;
  Object::Ptr vm = c.Doc()->getObject("vm");
  EXPECT_EQ(vm->getValue<std::string>("private_ip"), "");
  OpResult peers = d.OpenPeerPorts(
      R"({"cluster":"pi-train","peer_ports":[{"port":6443,"protocol":"tcp"}],"peers":[)"
      R"({"id":")" + vm->getValue<std::string>("id") + R"(","name":"pi-train","private_ip":"",)"
      R"("public_ip":"203.0.113.7"}]})");
  EXPECT_EQ(peers.status, GPUPROV_STATUS_OK) << peers.error;
  EXPECT_EQ(peers.json, "{}");
  OpResult bad = d.OpenPeerPorts(R"({"cluster":"pi-train","peer_ports":[],"peers":[]})");
  EXPECT_EQ(bad.status, GPUPROV_STATUS_INVALID_INPUT) << bad.json;
  EXPECT_EQ(d.Delete(R"({"name":"pi-train"})").status, GPUPROV_STATUS_OK);
}

// vm_providers in [clouds.primeintellect] replaces the default list: admitting runpod lets
// Kubernetes land on its container (the probe then names it, see core/remote/cluster_probe.h), and
// leaving out datacrunch skips its VM offers.
TEST_F(PrimeIntellectEmulator, VmProvidersOverrideTheDefaultList) {
  Driver d(Config(emu().prime(), "runpod, hyperstack"));
  OpResult r = d.Offers(R"({"gpu":{"type":"A100","count":1},"region":"","kubernetes":true})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  Array::Ptr offers = r.Doc()->getArray("offers");
  ASSERT_EQ(offers->size(), 2u) << r.json;
  EXPECT_EQ(offers->getObject(0)->getValue<std::string>("provider"), "runpod");
  EXPECT_EQ(offers->getObject(1)->getValue<std::string>("provider"), "hyperstack");
  EXPECT_TRUE(Contains(d.host().All(), "1A100.22V@datacrunch")) << d.host().All();
}

TEST_F(PrimeIntellectEmulator, KubernetesMustBeABoolean) {
  Driver d(config());
  OpResult r = d.Offers(R"({"gpu":{"type":"A100","count":1},"region":"","kubernetes":"yes"})");
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r.json;
  EXPECT_TRUE(Contains(r.error, "kubernetes")) << r.error;
}

TEST_F(PrimeIntellectEmulator, CreateWaitRunningSecondCreateReturnsItDelete) {
  Driver d(config());
  OpResult offers = d.Offers(R"({"gpu":{"type":"A100","count":1},"region":""})");
  ASSERT_EQ(offers.status, GPUPROV_STATUS_OK) << offers.error;
  Object::Ptr offer = offers.Doc()->getArray("offers")->getObject(0);

  const std::string name = "pi-life";
  OpResult c = d.Create(CreateRequest(name, "A100", 1, offer->getValue<std::string>("region"),
                                      offer->getValue<std::string>("instance_type")));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c.error;
  EXPECT_FALSE(c.Doc()->getValue<bool>("existing"));
  Object::Ptr vm = c.Doc()->getObject("vm");
  const std::string id = vm->getValue<std::string>("id");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(vm->getValue<std::string>("name"), name);
  EXPECT_EQ(vm->getValue<std::string>("state"), "pending");
  EXPECT_EQ(emu().Count("instances"), 1);
  EXPECT_EQ(emu().Count("ssh_keys"), 1);  // registered at account level

  vm = WaitFor(d, id, "running");
  ASSERT_TRUE(vm);
  ASSERT_EQ(vm->getValue<std::string>("state"), "running") << vm->getValue<std::string>("message");
  // The emulator's container offers remap SSH: whatever port sshConnection names is used.
  const int port = vm->getValue<int>("ssh_port");
  EXPECT_GT(port, 0);
  EXPECT_EQ(vm->getObject("ports")->getValue<int>("22"), port);
  EXPECT_FALSE(vm->getValue<std::string>("ssh_user").empty());
  EXPECT_EQ(vm->getValue<std::string>("public_ip").rfind("127.", 0), 0u)
      << vm->getValue<std::string>("public_ip");

  // Idempotent: the same name returns the same pod, and registers no second key.
  OpResult again = d.Create(CreateRequest(name, "A100", 1));
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again.error;
  EXPECT_TRUE(again.Doc()->getValue<bool>("existing"));
  EXPECT_EQ(again.Doc()->getObject("vm")->getValue<std::string>("id"), id);
  EXPECT_EQ(emu().Count("instances"), 1);
  EXPECT_EQ(emu().Count("ssh_keys"), 1);

  // Get by name, and list.
  OpResult by_name = d.Get(R"({"name":"pi-life"})");
  ASSERT_EQ(by_name.status, GPUPROV_STATUS_OK) << by_name.error;
  EXPECT_EQ(by_name.Doc()->getObject("vm")->getValue<std::string>("id"), id);
  OpResult list = d.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list.error;
  EXPECT_EQ(list.Doc()->getArray("vms")->size(), 1u);

  OpResult del = d.Delete(R"({"id":")" + id + R"(","name":"pi-life"})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del.error;
  EXPECT_TRUE(del.Doc()->getValue<bool>("deleted"));
  EXPECT_EQ(emu().Count("instances"), 0);
  EXPECT_EQ(emu().Count("ssh_keys"), 0);  // no pod left: gpuprov's key went with the last

  OpResult gone = d.Get(R"({"id":")" + id + R"(","name":"pi-life"})");
  EXPECT_EQ(gone.status, GPUPROV_STATUS_NOT_FOUND) << gone.json;
  OpResult del2 = d.Delete(R"({"id":")" + id + R"(","name":"pi-life"})");
  ASSERT_EQ(del2.status, GPUPROV_STATUS_OK) << del2.error;
  EXPECT_FALSE(del2.Doc()->getValue<bool>("deleted"));
  EXPECT_FALSE(Contains(d.host().All(), kKey));
}

// The account key is shared: it stays while another pod is live, goes with the last one, and a
// delete of a pod that never came (a create that stopped after registering the key) removes it.
TEST_F(PrimeIntellectEmulator, SharedKeyGoesWithTheLastPodOnly) {
  Driver d(config());
  ASSERT_EQ(d.Create(CreateRequest("pi-key-a", "A100", 1)).status, GPUPROV_STATUS_OK);
  ASSERT_EQ(d.Create(CreateRequest("pi-key-b", "A100", 1)).status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emu().Count("ssh_keys"), 1);
  ASSERT_EQ(d.Delete(R"({"name":"pi-key-a"})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emu().Count("ssh_keys"), 1);  // pi-key-b is still live
  ASSERT_EQ(d.Delete(R"({"name":"pi-key-b"})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emu().Count("instances"), 0);
  EXPECT_EQ(emu().Count("ssh_keys"), 0);
  // Only the key: the pod create is refused (402) after the key was registered.
  emu().Fault(R"({"cloud":"primeintellect","fault":"payment_required","times":1})");
  EXPECT_NE(d.Create(CreateRequest("pi-key-c", "A100", 1)).status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emu().Count("ssh_keys"), 1);
  OpResult del = d.Delete(R"({"name":"pi-key-c"})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del.error;
  EXPECT_FALSE(del.Doc()->getValue<bool>("deleted"));
  EXPECT_EQ(emu().Count("ssh_keys"), 0);
}

// Every pod shape the emulator varies (string, one-element list; [null] before ready) and
// every offer's user (root, ubuntu) parses to a running VM with its remapped port.
TEST_F(PrimeIntellectEmulator, SshConnectionShapesAcrossPods) {
  Driver d(config());
  struct Want {
    const char* name;
    const char* gpu;
    int count;
    const char* region;
    const char* user;
  };
  const Want wants[] = {{"pi-shape-0", "A100-80GB", 1, "CANADA-1", "ubuntu"},
                        {"pi-shape-1", "A100-80GB", 1, "FIN-01", "root"},
                        {"pi-shape-2", "RTX-A6000", 1, "", "root"}};
  std::vector<std::string> ids;
  for (const Want& w : wants) {
    // RTX A6000 comes only from RunPod containers: a plain machine (no Kubernetes).
    const bool kubernetes = std::string(w.gpu) != "RTX-A6000";
    OpResult c = d.Create(CreateRequest(w.name, w.gpu, w.count, w.region, "", kubernetes));
    ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << w.name << ": " << c.error;
    ids.push_back(c.Doc()->getObject("vm")->getValue<std::string>("id"));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    Object::Ptr vm = WaitFor(d, ids[i], "running");
    ASSERT_TRUE(vm);
    EXPECT_EQ(vm->getValue<std::string>("state"), "running") << wants[i].name;
    EXPECT_EQ(vm->getValue<std::string>("ssh_user"), wants[i].user) << wants[i].name;
    EXPECT_NE(vm->getValue<int>("ssh_port"), 22) << wants[i].name;
    EXPECT_FALSE(vm->getValue<std::string>("public_ip").empty()) << wants[i].name;
  }
  EXPECT_EQ(emu().Count("instances"), 3);
  for (const std::string& id : ids) {
    OpResult del = d.Delete(R"({"id":")" + id + R"("})");
    EXPECT_EQ(del.status, GPUPROV_STATUS_OK) << del.error;
  }
  EXPECT_EQ(emu().Count("instances"), 0);
}

// Out of stock (the availability shows no stock): CAPACITY, nothing created.
TEST_F(PrimeIntellectEmulator, OutOfStockIsCapacityAndNothingLeaks) {
  emu().Fault(R"({"cloud":"primeintellect","fault":"capacity","times":1})");
  Driver d(config());
  OpResult c = d.Create(CreateRequest("pi-nostock", "H100", 8));
  EXPECT_EQ(c.status, GPUPROV_STATUS_CAPACITY) << c.error;
  EXPECT_TRUE(Contains(c.error, "in stock")) << c.error;
  EXPECT_EQ(emu().Count("instances"), 0);
  OpResult g = d.Get(R"({"name":"pi-nostock"})");
  EXPECT_EQ(g.status, GPUPROV_STATUS_NOT_FOUND);
}

// The create itself refused for capacity: CAPACITY with the cloud's own message.
TEST_F(PrimeIntellectEmulator, CreateRefusedForCapacityCarriesTheCloudsMessage) {
  emu().Fault(R"({"cloud":"primeintellect","fault":"quota","times":1})");
  Driver d(config());
  OpResult c = d.Create(CreateRequest("pi-nocap", "A100", 1));
  EXPECT_EQ(c.status, GPUPROV_STATUS_CAPACITY) << c.error;
  EXPECT_TRUE(Contains(c.error, "No capacity available")) << c.error;
  EXPECT_EQ(emu().Count("instances"), 0);
  // The next try goes through.
  OpResult again = d.Create(CreateRequest("pi-nocap", "A100", 1));
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again.error;
  EXPECT_EQ(emu().Count("instances"), 1);
}

TEST_F(PrimeIntellectEmulator, ThrottleIsRetried) {
  emu().Fault(R"({"cloud":"primeintellect","fault":"throttle","times":3,"retry_after":0})");
  Driver d(config());
  OpResult r = d.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  std::vector<std::string> reqs = emu().Requests();
  int throttled = 0, ok = 0;
  for (const auto& line : reqs) {
    if (Contains(line, " 429")) ++throttled;
    if (Contains(line, " 200")) ++ok;
  }
  EXPECT_EQ(throttled, 3);
  EXPECT_EQ(ok, 1);
}

TEST_F(PrimeIntellectEmulator, ThrottleOnCreateIsRetriedWithoutDuplicates) {
  emu().Fault(
      R"({"cloud":"primeintellect","fault":"throttle","times":2,"retry_after":0,"method":"POST","path":"/api/v1/pods"})");
  Driver d(config());
  OpResult c = d.Create(CreateRequest("pi-throttle", "A100", 1));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c.error;
  EXPECT_EQ(emu().Count("instances"), 1);
  int throttled = 0, created = 0;
  for (const auto& line : emu().Requests()) {
    if (line.rfind("POST /api/v1/pods", 0) == 0 && Contains(line, " 429")) ++throttled;
    if (line.rfind("POST /api/v1/pods", 0) == 0 && Contains(line, " 200")) ++created;
  }
  EXPECT_EQ(throttled, 2);
  EXPECT_EQ(created, 1);
}

// A 5xx on create: the pod is looked up by name before another POST, and exactly one exists.
TEST_F(PrimeIntellectEmulator, ServerErrorOnCreateIsRetriedSafely) {
  emu().Fault(
      R"({"cloud":"primeintellect","fault":"server_error","times":2,"method":"POST","path":"/api/v1/pods"})");
  Driver d(config());
  OpResult c = d.Create(CreateRequest("pi-5xx", "A100", 1));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c.error;
  EXPECT_EQ(emu().Count("instances"), 1);
  // Each failed POST is followed by a look-up by name before the next POST.
  std::vector<std::string> posts;
  bool listed_between = true;
  std::string previous;
  for (const auto& line : emu().Requests()) {
    if (line.rfind("POST /api/v1/pods", 0) == 0) {
      if (!posts.empty() && previous.rfind("GET /api/v1/pods", 0) != 0) listed_between = false;
      posts.push_back(line);
    }
    previous = line;
  }
  ASSERT_EQ(posts.size(), 3u);
  EXPECT_TRUE(Contains(posts[0], " 500"));
  EXPECT_TRUE(Contains(posts[1], " 500"));
  EXPECT_TRUE(Contains(posts[2], " 200"));
  EXPECT_TRUE(listed_between);
}

TEST_F(PrimeIntellectEmulator, ServerErrorsThatNeverStopAreTransient) {
  emu().Fault(R"({"cloud":"primeintellect","fault":"server_error","times":-1})");
  Driver d(config());
  OpResult r = d.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_TRANSIENT) << r.error;
}

TEST_F(PrimeIntellectEmulator, PaymentRequiredIsQuota) {
  emu().Fault(R"({"cloud":"primeintellect","fault":"payment_required","times":1})");
  Driver d(config());
  OpResult c = d.Create(CreateRequest("pi-broke", "A100", 1));
  EXPECT_EQ(c.status, GPUPROV_STATUS_QUOTA) << c.error;
  EXPECT_TRUE(Contains(c.error, "funds")) << c.error;
  EXPECT_EQ(emu().Count("instances"), 0);
}

TEST_F(PrimeIntellectEmulator, UnknownGpuIsInvalidInput) {
  Driver d(config());
  OpResult c = d.Create(CreateRequest("pi-nogpu", "B300", 1));
  EXPECT_EQ(c.status, GPUPROV_STATUS_INVALID_INPUT) << c.error;
  OpResult disk = d.Create(
      R"({"name":"pi-disk","gpu":{"type":"A100","count":1},"region":"","disk_gb":5})");
  EXPECT_EQ(disk.status, GPUPROV_STATUS_INVALID_INPUT) << disk.error;
  EXPECT_EQ(emu().Count("instances"), 0);
}

// P1: a pod whose installationStatus stays PENDING (every P-DOC example shows PENDING), or
// that sends neither installationStatus nor installationProgress (both Optional in the prime
// CLI's Pod model), is running once ACTIVE with an sshConnection: what the CLI waits for.
TEST_F(PrimeIntellectEmulator, ReadinessDoesNotWaitOnInstallationStatus) {
  for (const std::string mode : {"status_stays_pending", "none"}) {
    SCOPED_TRACE(mode);
    emu().Reset();
    emu().Settings(R"("installation_fields":")" + mode + R"(")");
    Driver d(config());
    OpResult c = d.Create(CreateRequest("pi-ready", "A100", 1));
    ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c.error;
    const std::string id = c.Doc()->getObject("vm")->getValue<std::string>("id");
    Object::Ptr vm = WaitFor(d, id, "running");
    ASSERT_TRUE(vm);
    EXPECT_EQ(vm->getValue<std::string>("state"), "running")
        << vm->getValue<std::string>("message");
    EXPECT_FALSE(vm->getValue<std::string>("public_ip").empty());
    ASSERT_EQ(d.Delete(R"({"id":")" + id + R"("})").status, GPUPROV_STATUS_OK);
  }
  emu().Settings(R"("installation_fields":"all")");
}

// P2: the prime CLI takes only letters, digits and '-' in pod names; other characters are
// refused before any call (exit 2, nothing made).
TEST_F(PrimeIntellectEmulator, PodNamesTakeOnlyLettersDigitsAndDashes) {
  Driver d(config());
  for (const std::string name : {"pi_under", "pi.dot", "pi:colon"}) {
    OpResult c = d.Create(CreateRequest(name, "A100", 1));
    EXPECT_EQ(c.status, GPUPROV_STATUS_INVALID_INPUT) << name << ": " << c.json;
    EXPECT_TRUE(Contains(c.error, "letters, digits")) << c.error;
  }
  EXPECT_TRUE(emu().Requests().empty());
  EXPECT_EQ(emu().Count("instances"), 0);
  EXPECT_EQ(emu().Count("ssh_keys"), 0);
}

// P3, P4, P6: create sends the offer's vcpu and memory defaults (as the prime CLI does) and
// names its key (pod.sshKeyId), so a pod gets it even where only the primary key would be put
// on pods; the create result has the offer's cloudId and data center, which a Pod lacks.
TEST_F(PrimeIntellectEmulator, CreateSendsTheOffersResourcesAndNamesItsKey) {
  // The user's own key, registered first, is the account's primary key.
  HttpReply own = emu().Api(
      "POST", "/ssh_keys/",
      R"({"name":"laptop","publicKey":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHVzZXJzLW93bi1rZXktMDAwMDAwMDAwMDAw me@laptop"})");
  ASSERT_EQ(own.status, 200) << own.body;
  emu().Settings(R"("primary_key_only":true)");
  Driver d(config());
  OpResult c = d.Create(CreateRequest("pi-res", "A100", 1));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c.error;
  Object::Ptr vm = c.Doc()->getObject("vm");
  EXPECT_EQ(vm->getValue<std::string>("instance_type"), "1A100.22V");  // the cheapest VM offer
  EXPECT_EQ(vm->getValue<std::string>("region"), "FIN-01");
  Object::Ptr row = emu().Row("gpuprov-pi-res");
  ASSERT_TRUE(row);
  EXPECT_EQ(row->getValue<int>("vcpus"), 22);
  EXPECT_EQ(row->getValue<int>("memory"), 120);
  Poco::JSON::Array::Ptr keys = row->getArray("ssh_key_names");
  bool ours = false;
  for (size_t i = 0; keys && i < keys->size(); ++i) {
    ours = ours || keys->getElement<std::string>(static_cast<unsigned>(i)).rfind("gpuprov-", 0) == 0;
  }
  EXPECT_TRUE(ours) << "the pod did not get gpuprov's (not primary) key";
  emu().Settings(R"("primary_key_only":false)");
  ASSERT_EQ(d.Delete(R"({"name":"pi-res"})").status, GPUPROV_STATUS_OK);
}

// P5: massedcompute, a VM cloud in the project's references and a provider of P-DOC's enum,
// is a default VM provider: its offers serve a Kubernetes node.
TEST_F(PrimeIntellectEmulator, KubernetesTakesMassedComputeOffers) {
  Driver d(config());
  OpResult c = d.Create(CreateRequest("pi-l40", "L40", 1));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c.error;
  EXPECT_EQ(c.Doc()->getObject("vm")->getValue<std::string>("provider"), "massedcompute");
  ASSERT_EQ(d.Delete(R"({"name":"pi-l40"})").status, GPUPROV_STATUS_OK);
}

// Part 2 of issue 30: the operations of Prime Intellect's API reference (P-DOC,
// docs.primeintellect.ai/api-reference: availability, pods create/get/list/status/delete,
// ssh-keys) and of the official CLI (PrimeIntellect-ai/prime 66fb4b7,
// packages/prime/src/prime_cli/api/{pods,availability}.py: /pods/history,
// /availability/multi-node), transcribed. Every call the driver makes in a whole lifecycle
// (check, offers, create, get, list, gc, delete) is one of them.
const std::vector<VendorOperation> kPrimeIntellectOperations = {
    {"GET", "/api/v1/availability/gpus"},      {"GET", "/api/v1/availability/multi-node"},
    {"GET", "/api/v1/pods/"},                  {"POST", "/api/v1/pods/"},
    {"GET", "/api/v1/pods/status"},            {"GET", "/api/v1/pods/history"},
    {"GET", "/api/v1/pods/{podId}"},           {"DELETE", "/api/v1/pods/{podId}"},
    {"GET", "/api/v1/ssh_keys/"},              {"POST", "/api/v1/ssh_keys/"},
    {"DELETE", "/api/v1/ssh_keys/{keyId}"},
};

TEST_F(PrimeIntellectEmulator, EveryOperationTheDriverUsesIsOneThePrimeIntellectReferenceDescribes) {
  Driver d(config());
  ASSERT_EQ(d.Check().status, GPUPROV_STATUS_OK);
  ASSERT_EQ(d.Offers(R"({"gpu":{"type":"A100","count":1},"region":""})").status, GPUPROV_STATUS_OK);
  OpResult c = d.Create(CreateRequest("pi-ops", "A100", 1));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c.error;
  const std::string id = c.Doc()->getObject("vm")->getValue<std::string>("id");
  ASSERT_TRUE(WaitFor(d, id, "running"));
  ASSERT_EQ(d.Get(R"({"name":"pi-ops"})").status, GPUPROV_STATUS_OK);
  ASSERT_EQ(d.List().status, GPUPROV_STATUS_OK);
  ASSERT_EQ(d.Call(d.vtable().list_resources, "{}").status, GPUPROV_STATUS_OK);
  ASSERT_EQ(d.Delete(R"({"id":")" + id + R"(","name":"pi-ops"})").status, GPUPROV_STATUS_OK);
  const std::vector<std::string> logged = emu().Requests();
  ASSERT_FALSE(logged.empty());
  const std::vector<std::string> outside = OutsideOperations(logged, kPrimeIntellectOperations);
  EXPECT_TRUE(outside.empty()) << "not in the Prime Intellect reference: " << outside.front();
}

// Part 2: the emulator holds create-pod and ssh-key bodies to P-DOC's request model as FastAPI
// does: a declared field of another type is 422 {"detail":[{loc, msg, type}]}; a missing
// required one too; a field the model does not declare is ignored.
TEST_F(PrimeIntellectEmulator, TheEmulatorChecksRequestFieldsAsTheReferenceModelsThem) {
  const std::string offer =
      R"("cloudId":"n3-A100x1","gpuType":"A100_80GB","socket":"PCIe","dataCenterId":"CANADA-1")";
  HttpReply mistyped = emu().Api(
      "POST", "/pods/", R"({"pod":{)" + offer + R"(,"gpuCount":"1"},"provider":{"type":"hyperstack"}})");
  EXPECT_EQ(mistyped.status, 422) << mistyped.body;
  EXPECT_TRUE(Contains(mistyped.body, R"("loc":["body","pod","gpuCount"])")) << mistyped.body;
  HttpReply missing =
      emu().Api("POST", "/pods/", R"({"pod":{)" + offer + R"(},"provider":{"type":"hyperstack"}})");
  EXPECT_EQ(missing.status, 422) << missing.body;
  EXPECT_TRUE(Contains(missing.body, "gpuCount")) << missing.body;
  HttpReply extra = emu().Api(
      "POST", "/pods/",
      R"({"pod":{)" + offer + R"(,"gpuCount":1,"notAField":true},"provider":{"type":"hyperstack"}})");
  EXPECT_EQ(extra.status, 200) << extra.body;
  HttpReply key = emu().Api("POST", "/ssh_keys/", R"({"name":7,"publicKey":"ssh-ed25519 AAAA x"})");
  EXPECT_EQ(key.status, 422) << key.body;
}

TEST_F(PrimeIntellectEmulator, BootErrorIsErrorState) {
  emu().Fault(R"({"cloud":"primeintellect","fault":"error_during_boot","times":1,"seconds":0.1})");
  Driver d(config());
  OpResult c = d.Create(CreateRequest("pi-booterr", "A100", 1));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c.error;
  std::string id = c.Doc()->getObject("vm")->getValue<std::string>("id");
  Object::Ptr vm = WaitFor(d, id, "running");
  ASSERT_TRUE(vm);
  EXPECT_EQ(vm->getValue<std::string>("state"), "error");
  EXPECT_FALSE(vm->getValue<std::string>("message").empty());
  OpResult del = d.Delete(R"({"id":")" + id + R"("})");
  EXPECT_EQ(del.status, GPUPROV_STATUS_OK) << del.error;
  EXPECT_EQ(emu().Count("instances"), 0);
}

// `gpuprov gc` (ABI 1.2): pods carry no tags, so gpuprov names them gpuprov-<VM name>; those and
// gpuprov's account key are listed (the key for every live gpuprov pod), with price and age. A
// pod and a key the user made by hand are never listed, and refused by delete_resource.
TEST_F(PrimeIntellectEmulator, ListResourcesAndDeleteResourceTouchOnlyGpuprovNamedOnes) {
  Driver d(config());
  ASSERT_NE(d.vtable().list_resources, nullptr);
  ASSERT_NE(d.vtable().delete_resource, nullptr);
  OpResult c = d.Create(CreateRequest("pi-gc", "A100", 1));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c.error;
  EXPECT_EQ(c.Vm()->getValue<std::string>("name"), "pi-gc");
  EXPECT_EQ(c.Vm()->getValue<std::string>("pod_name"), "gpuprov-pi-gc");
  const std::string pod_id = c.Vm()->getValue<std::string>("id");
  // The user's own pod and key, made through the API as the prime CLI would.
  const std::vector<std::pair<std::string, std::string>> auth = {
      {"Authorization", std::string("Bearer ") + kKey}};
  HttpReply users_pod = LoopbackHttp(
      "POST", emu().prime() + "/pods/",
      R"({"pod":{"name":"users-pod","cloudId":"n3-A100x1","gpuType":"A100_80GB","gpuCount":1,)"
      R"("socket":"PCIe","dataCenterId":"CANADA-1"},"provider":{"type":"hyperstack"}})",
      auth);
  ASSERT_EQ(users_pod.status, 200) << users_pod.body;
  const std::string users_pod_id = users_pod.Doc()->getValue<std::string>("id");
  HttpReply users_key = LoopbackHttp(
      "POST", emu().prime() + "/ssh_keys/",
      R"({"name":"users-key","publicKey":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHVzZXJzLW93bi1rZXktMDAwMDAwMDAwMDAwMA user@host"})",
      auth);
  ASSERT_EQ(users_key.status, 200) << users_key.body;
  const std::string users_key_id = users_key.Doc()->getValue<std::string>("id");
  EXPECT_EQ(emu().Count("instances"), 2);
  EXPECT_EQ(emu().Count("ssh_keys"), 2);
  // list (gpuprov's VMs) no longer shows the user's pod.
  OpResult list = d.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list.error;
  EXPECT_EQ(list.Doc()->getArray("vms")->size(), 1u) << list.json;

  OpResult listed = d.Call(d.vtable().list_resources, "{}");
  ASSERT_EQ(listed.status, GPUPROV_STATUS_OK) << listed.error;
  Array::Ptr resources = listed.Doc()->getArray("resources");
  ASSERT_EQ(resources->size(), 2u) << listed.json;
  Object::Ptr pod = resources->getObject(0);
  EXPECT_EQ(pod->getValue<std::string>("kind"), "vm");
  EXPECT_EQ(pod->getValue<std::string>("id"), pod_id);
  EXPECT_EQ(pod->getValue<std::string>("name"), "gpuprov-pi-gc");
  EXPECT_EQ(pod->getArray("vm_names")->getElement<std::string>(0), "pi-gc");
  EXPECT_EQ(pod->getValue<double>("price_per_hour"), 1.29);  // 1A100.22V@datacrunch's priceHr
  EXPECT_EQ(pod->getValue<std::string>("created_at").rfind("20", 0), 0u) << listed.json;
  Object::Ptr key = resources->getObject(1);
  EXPECT_EQ(key->getValue<std::string>("kind"), "ssh_key");
  EXPECT_EQ(key->getValue<std::string>("name").rfind("gpuprov-", 0), 0u) << listed.json;
  ASSERT_EQ(key->getArray("vm_names")->size(), 1u) << listed.json;
  EXPECT_EQ(key->getArray("vm_names")->getElement<std::string>(0), "pi-gc");
  EXPECT_FALSE(key->has("price_per_hour"));
  const std::string key_id = key->getValue<std::string>("id");

  for (const auto& [kind, id] : {std::pair<std::string, std::string>{"vm", users_pod_id},
                                 {"ssh_key", users_key_id}}) {
    OpResult refused =
        d.Call(d.vtable().delete_resource, R"({"kind":")" + kind + R"(","id":")" + id + R"("})");
    EXPECT_EQ(refused.status, GPUPROV_STATUS_INVALID_INPUT) << kind << ": " << refused.json;
    EXPECT_TRUE(Contains(refused.error, "gpuprov leaves it alone")) << refused.error;
  }
  OpResult kind = d.Call(d.vtable().delete_resource, R"({"kind":"disk","id":"x"})");
  EXPECT_EQ(kind.status, GPUPROV_STATUS_INVALID_INPUT) << kind.json;

  for (const auto& [k, id] : {std::pair<std::string, std::string>{"vm", pod_id},
                              {"ssh_key", key_id}}) {
    OpResult del =
        d.Call(d.vtable().delete_resource, R"({"kind":")" + k + R"(","id":")" + id + R"("})");
    ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << k << ": " << del.error;
    EXPECT_TRUE(del.Doc()->getValue<bool>("deleted")) << k;
    OpResult again =
        d.Call(d.vtable().delete_resource, R"({"kind":")" + k + R"(","id":")" + id + R"("})");
    ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << k << ": " << again.error;
    EXPECT_FALSE(again.Doc()->getValue<bool>("deleted")) << k;
  }
  EXPECT_EQ(emu().Count("instances"), 1);  // the user's pod
  EXPECT_EQ(emu().Count("ssh_keys"), 1);   // the user's key
  OpResult empty = d.Call(d.vtable().list_resources, "{}");
  ASSERT_EQ(empty.status, GPUPROV_STATUS_OK) << empty.error;
  EXPECT_EQ(empty.Doc()->getArray("resources")->size(), 0u) << empty.json;
}

}  // namespace
}  // namespace gpuprov::primeintellect
