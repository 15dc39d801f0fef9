// SPDX-License-Identifier: Apache-2.0
//
// The emulator over HTTP with the memory backend: each cloud's paths, auth,
// status codes, error bodies, pagination, every fault knob, counts and the
// control API; and the gpuprov-emulator binary's start-up contract.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "emulator.h"
#include "emulator_test_util.h"

namespace gpuprov::emulator {
namespace {

using testing::Call;
using testing::ReachablePorts;
using testing::Reply;
using testing::WaitFor;
using namespace std::chrono_literals;

constexpr const char* kDoToken = "dop_v1_test_token";
constexpr const char* kPiKey = "pit_test_key";
// ssh-keygen -l -E md5 says MD5:0c:89:58:97:3e:72:09:3a:d9:94:9c:9c:fa:12:ee:25.
constexpr const char* kPublicKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPtlieUdwvU3Yi8XHX36t5VZpca1by3GqjV+S0aD87Tm emu-test";
constexpr const char* kFingerprint = "0c:89:58:97:3e:72:09:3a:d9:94:9c:9c:fa:12:ee:25";

class EmulatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EmulatorOptions o;
    o.backend = "memory";
    o.boot_seconds = 0.3;
    o.tokens["digitalocean"] = {kDoToken};
    o.tokens["primeintellect"] = {kPiKey};
    emu_ = std::make_unique<Emulator>(o);
    emu_->Start();
    do_ = emu_->BaseUrl("digitalocean");
    pi_ = emu_->BaseUrl("primeintellect");
    control_ = emu_->ControlUrl();
  }
  void TearDown() override { emu_.reset(); }

  Reply Do(const std::string& method, const std::string& path, const std::string& body = "") {
    return Call(do_, method, path, body, kDoToken);
  }
  Reply Pi(const std::string& method, const std::string& path, const std::string& body = "") {
    return Call(pi_, method, path, body, kPiKey);
  }
  Reply Control(const std::string& method, const std::string& path,
                const std::string& body = "") {
    return Call(control_, method, path, body);
  }
  void Fault(const std::string& json) {
    Reply r = Control("POST", "/faults", json);
    ASSERT_EQ(r.status, 200) << r.body;
  }

  // A droplet create body.
  static std::string DropletBody(const std::string& name,
                                 const std::string& size = "s-1vcpu-1gb",
                                 const std::string& region = "nyc2",
                                 const std::string& extra = "") {
    return R"({"name":")" + name + R"(","region":")" + region + R"(","size":")" + size +
           R"(","image":"ubuntu-22-04-x64")" + extra + "}";
  }
  int64_t CreateDroplet(const std::string& name, const std::string& size = "s-1vcpu-1gb",
                        const std::string& extra = "") {
    Reply r = Do("POST", "/droplets", DropletBody(name, size, "nyc2", extra));
    EXPECT_EQ(r.status, 202) << r.body;
    return GetObject(r.Json(), "droplet")->getValue<int64_t>("id");
  }
  std::string DropletStatus(int64_t id) {
    Reply r = Do("GET", "/droplets/" + std::to_string(id));
    if (r.status != 200) return std::to_string(r.status);
    return GetObject(r.Json(), "droplet")->getValue<std::string>("status");
  }

  static std::string PodBody(const std::string& name, const std::string& cloud_id = "n3-A100x1",
                             const std::string& gpu = "A100_80GB", int count = 1,
                             const std::string& provider = "hyperstack") {
    return R"({"pod":{"name":")" + name + R"(","cloudId":")" + cloud_id + R"(","gpuType":")" +
           gpu + R"(","gpuCount":)" + std::to_string(count) +
           R"(,"diskSize":100,"image":"ubuntu_22_cuda_12"},"provider":{"type":")" + provider +
           R"("}})";
  }
  std::string CreatePod(const std::string& name) {
    Reply r = Pi("POST", "/pods/", PodBody(name));
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json()->getValue<std::string>("id");
  }

  int64_t Count(const std::string& cloud, const std::string& what) {
    return Control("GET", "/counts?cloud=" + cloud).Json()->getValue<int64_t>(what);
  }

  std::unique_ptr<Emulator> emu_;
  std::string do_, pi_, control_;
};

// --- DigitalOcean -----------------------------------------------------------------

// A droplet's row of the control API's /instances.
JsonObject InstanceRowOf(const Reply& instances, const std::string& name) {
  JsonArray list = GetArray(instances.Json(), "instances");
  for (size_t i = 0; list && i < list->size(); ++i) {
    JsonObject o = list->getObject(static_cast<unsigned>(i));
    if (GetString(o, "name").value_or("") == name) return o;
  }
  return NewObject();
}

// The sources of the private-ingress rule of `row` for protocol/port ("" when none).
std::string PrivateSources(const JsonObject& row, const std::string& protocol,
                           const std::string& ports) {
  JsonArray rules = GetArray(row, "private_ingress");
  std::string out;
  for (size_t i = 0; rules && i < rules->size(); ++i) {
    JsonObject r = rules->getObject(static_cast<unsigned>(i));
    if (GetString(r, "protocol") != protocol || GetString(r, "ports") != ports) continue;
    JsonArray src = GetArray(r, "sources");
    for (size_t j = 0; src && j < src->size(); ++j) {
      out += (out.empty() ? "" : ",") + src->get(static_cast<unsigned>(j)).toString();
    }
  }
  return out;
}

TEST_F(EmulatorTest, DigitalOceanVpcsHaveTheSpecShapeAndKeepTheirMembers) {
  Reply made = Do("POST", "/vpcs", R"({"name":"gpuprov-train","region":"nyc2"})");
  ASSERT_EQ(made.status, 201) << made.body;
  JsonObject vpc = GetObject(made.Json(), "vpc");
  const std::string id = vpc->getValue<std::string>("id");
  for (const char* field : {"id", "urn", "name", "description", "region", "ip_range", "default",
                            "created_at"}) {
    EXPECT_TRUE(vpc->has(field)) << field;
  }
  EXPECT_FALSE(vpc->getValue<bool>("default"));
  EXPECT_EQ(Do("POST", "/vpcs", R"({"name":"gpuprov-train","region":"nyc2"})").status, 422);
  EXPECT_EQ(Do("POST", "/vpcs", R"({"name":"bad name","region":"nyc2"})").status, 422);
  EXPECT_EQ(Do("POST", "/vpcs", R"({"name":"x","region":"nyc2","colour":"red"})").status, 422);
  EXPECT_EQ(Do("GET", "/vpcs/" + id).status, 200);

  // A droplet in it: vpc_uuid, and the VPC refuses to go while it has a member.
  const int64_t d = CreateDroplet("member", "s-1vcpu-1gb", R"(,"vpc_uuid":")" + id + "\"");
  EXPECT_EQ(Do("POST", "/droplets",
               DropletBody("elsewhere", "s-1vcpu-1gb", "sfo3", R"(,"vpc_uuid":")" + id + "\""))
                .status,
            422);  // vpc_uuid of another region
  EXPECT_EQ(GetObject(Do("GET", "/droplets/" + std::to_string(d)).Json(), "droplet")
                ->getValue<std::string>("vpc_uuid"),
            id);
  EXPECT_EQ(Count("digitalocean", "vpcs"), 1);
  EXPECT_EQ(Do("DELETE", "/vpcs/" + id).status, 403);
  EXPECT_EQ(Do("DELETE", "/droplets/" + std::to_string(d)).status, 204);
  EXPECT_EQ(Do("DELETE", "/vpcs/" + id).status, 204);
  EXPECT_EQ(Do("GET", "/vpcs/" + id).status, 404);
  // The region's default VPC (made with its first droplet) is listed and cannot be deleted.
  JsonArray all = GetArray(Do("GET", "/vpcs").Json(), "vpcs");
  std::string default_id;
  for (unsigned i = 0; i < all->size(); ++i) {
    JsonObject v = all->getObject(i);
    EXPECT_TRUE(v->getValue<bool>("default")) << ToJson(v);
    if (v->getValue<std::string>("region") == "nyc2") default_id = v->getValue<std::string>("id");
  }
  ASSERT_FALSE(default_id.empty());
  EXPECT_EQ(Do("DELETE", "/vpcs/" + default_id).status, 403);
}

TEST_F(EmulatorTest, DigitalOceanAFirewallByTagAdmitsOnlyTheTaggedPeersOnThePrivateNetwork) {
  const std::string vpc =
      GetObject(Do("POST", "/vpcs", R"({"name":"gpuprov-train","region":"nyc2"})").Json(), "vpc")
          ->getValue<std::string>("id");
  const std::string in_vpc = R"(,"vpc_uuid":")" + vpc + "\"";
  CreateDroplet("train", "s-1vcpu-1gb", in_vpc + R"(,"tags":["gpuprov-cluster:train"])");
  CreateDroplet("train-agent-1", "s-1vcpu-1gb", in_vpc + R"(,"tags":["gpuprov-cluster:train"])");
  CreateDroplet("stranger", "s-1vcpu-1gb", in_vpc);
  Reply fw = Do("POST", "/firewalls", R"({"name":"gpuprov-train-peers",
      "inbound_rules":[{"protocol":"tcp","ports":"6443","sources":{"tags":["gpuprov-cluster:train"]}},
                       {"protocol":"udp","ports":"51820","sources":{"tags":["gpuprov-cluster:train"]}}],
      "outbound_rules":[{"protocol":"tcp","ports":"all","destinations":{"addresses":["0.0.0.0/0"]}}],
      "tags":["gpuprov-cluster:train"]})");
  ASSERT_EQ(fw.status, 202) << fw.body;
  // Once both run, each member admits the other's (and its own) private address, and only on
  // the peer ports; the stranger is in no firewall: nothing filters it.
  ASSERT_TRUE(WaitFor(
      [&] {
        Do("GET", "/droplets");
        return PrivateSources(
                   InstanceRowOf(Control("GET", "/instances?cloud=digitalocean"), "train"), "udp",
                   "51820")
                   .find(',') != std::string::npos;
      },
      std::chrono::seconds(5)));
  Reply rows = Control("GET", "/instances?cloud=digitalocean");
  JsonObject server = InstanceRowOf(rows, "train");
  JsonObject agent = InstanceRowOf(rows, "train-agent-1");
  JsonObject stranger = InstanceRowOf(rows, "stranger");
  const std::string agent_ip = GetString(agent, "private_ip").value_or("");
  const std::string stranger_ip = GetString(stranger, "private_ip").value_or("");
  ASSERT_EQ(agent_ip.rfind("10.", 0), 0u) << agent_ip;
  EXPECT_NE(PrivateSources(server, "tcp", "6443").find(agent_ip), std::string::npos);
  EXPECT_EQ(PrivateSources(server, "tcp", "6443").find(stranger_ip), std::string::npos);
  EXPECT_EQ(PrivateSources(server, "tcp", "10250"), "");
  EXPECT_EQ(GetArray(server, "private_ingress")->size(), 2u);
  EXPECT_TRUE(stranger->isNull("private_ingress"));
}

TEST_F(EmulatorTest, DigitalOceanCapacityCanHitOneNodeOfACluster) {
  Fault(R"({"cloud":"digitalocean","fault":"capacity","body":"gpuprov-cluster:train","nth":3})");
  const std::string tagged = R"(,"tags":["gpuprov-cluster:train"])";
  EXPECT_EQ(Do("POST", "/droplets", DropletBody("other", "s-1vcpu-1gb", "nyc2")).status, 202);
  for (const char* n : {"train", "train-agent-1"}) {
    EXPECT_EQ(Do("POST", "/droplets", DropletBody(n, "s-1vcpu-1gb", "nyc2", tagged)).status, 202);
  }
  EXPECT_EQ(Do("POST", "/droplets", DropletBody("train-agent-2", "s-1vcpu-1gb", "nyc2", tagged))
                .status,
            422);
}

TEST_F(EmulatorTest, DigitalOceanRejectsMissingAndWrongTokensWithTheReal401Body) {
  for (const std::string& token : {std::string(), std::string("wrong")}) {
    Reply r = Call(do_, "GET", "/droplets", "", token);
    EXPECT_EQ(r.status, 401);
    JsonObject o = r.Json();
    EXPECT_EQ(o->getValue<std::string>("id"), "unauthorized");
    EXPECT_EQ(o->getValue<std::string>("message"), "Unable to authenticate you");
  }
  EXPECT_EQ(Do("GET", "/droplets").status, 200);
}

TEST_F(EmulatorTest, DigitalOceanSendsRateLimitHeadersOnEveryResponse) {
  Reply a = Do("GET", "/droplets");
  Reply b = Do("GET", "/nonexistent");
  EXPECT_EQ(b.status, 404);
  EXPECT_EQ(b.Json()->getValue<std::string>("id"), "not_found");
  for (const Reply& r : {a, b}) {
    EXPECT_EQ(r.Header("ratelimit-limit"), "5000");
    EXPECT_FALSE(r.Header("ratelimit-remaining").empty());
    EXPECT_GT(std::stoll(r.Header("ratelimit-reset")), std::time(nullptr));
  }
  EXPECT_LT(std::stoi(b.Header("ratelimit-remaining")), std::stoi(a.Header("ratelimit-remaining")));
}

TEST_F(EmulatorTest, DigitalOceanDropletGoesFromNewToActiveWithAPublicAddress) {
  Reply r = Do("POST", "/droplets", DropletBody("vm1"));
  ASSERT_EQ(r.status, 202) << r.body;
  JsonObject d = GetObject(r.Json(), "droplet");
  EXPECT_EQ(d->getValue<std::string>("status"), "new");
  EXPECT_EQ(GetArray(GetObject(d, "networks"), "v4")->size(), 0u);
  JsonObject link = GetArray(GetObject(r.Json(), "links"), "actions")->getObject(0);
  EXPECT_EQ(link->getValue<std::string>("rel"), "create");
  const int64_t id = d->getValue<int64_t>("id");
  const std::string action = "/actions/" + std::to_string(link->getValue<int64_t>("id"));
  EXPECT_EQ(GetObject(Do("GET", action).Json(), "action")->getValue<std::string>("status"),
            "in-progress");

  ASSERT_TRUE(WaitFor([&] { return DropletStatus(id) == "active"; }, 5s));
  JsonObject got = GetObject(Do("GET", "/droplets/" + std::to_string(id)).Json(), "droplet");
  JsonArray v4 = GetArray(GetObject(got, "networks"), "v4");
  ASSERT_EQ(v4->size(), 2u);
  std::string pub;
  for (unsigned i = 0; i < v4->size(); ++i) {
    if (v4->getObject(i)->getValue<std::string>("type") == "public") {
      pub = v4->getObject(i)->getValue<std::string>("ip_address");
    }
  }
  EXPECT_EQ(pub.rfind("127.", 0), 0u) << pub;
  EXPECT_EQ(GetObject(got, "region")->getValue<std::string>("slug"), "nyc2");
  EXPECT_EQ(got->getValue<std::string>("size_slug"), "s-1vcpu-1gb");
  EXPECT_EQ(GetObject(Do("GET", action).Json(), "action")->getValue<std::string>("status"),
            "completed");
}

TEST_F(EmulatorTest, DigitalOceanHidesGpuDropletsFromThePlainList) {
  CreateDroplet("cpu-vm", "s-1vcpu-1gb", R"(,"tags":["gpuprov"])");
  CreateDroplet("gpu-vm", "gpu-h100x1-80gb", R"(,"tags":["gpuprov"])");
  auto names = [&](const std::string& query) {
    std::set<std::string> out;
    JsonArray a = GetArray(Do("GET", "/droplets" + query).Json(), "droplets");
    for (unsigned i = 0; a && i < a->size(); ++i) {
      out.insert(a->getObject(i)->getValue<std::string>("name"));
    }
    return out;
  };
  EXPECT_EQ(names(""), std::set<std::string>{"cpu-vm"});
  EXPECT_EQ(names("?type=droplets"), std::set<std::string>{"cpu-vm"});
  EXPECT_EQ(names("?type=gpus"), std::set<std::string>{"gpu-vm"});
  EXPECT_EQ(names("?name=GPU-VM"), std::set<std::string>{});
  EXPECT_EQ(names("?name=GPU-VM&type=gpus"), std::set<std::string>{"gpu-vm"});
  EXPECT_EQ(names("?tag_name=gpuprov"), (std::set<std::string>{"cpu-vm", "gpu-vm"}));
  EXPECT_EQ(Do("GET", "/droplets?tag_name=gpuprov&name=x").status, 422);
  JsonObject g = GetArray(Do("GET", "/droplets?type=gpus").Json(), "droplets")->getObject(0);
  EXPECT_EQ(GetObject(g, "gpu_info")->getValue<int>("count"), 1);
}

TEST_F(EmulatorTest, DigitalOceanPaginatesWithLinksAndMeta) {
  for (int i = 0; i < 5; ++i) CreateDroplet("vm" + std::to_string(i));
  Reply p1 = Do("GET", "/droplets?per_page=2");
  JsonObject pages = GetObject(GetObject(p1.Json(), "links"), "pages");
  EXPECT_EQ(GetObject(p1.Json(), "meta")->getValue<int>("total"), 5);
  EXPECT_EQ(GetArray(p1.Json(), "droplets")->size(), 2u);
  EXPECT_FALSE(pages->has("prev"));
  ASSERT_TRUE(pages->has("next"));
  EXPECT_NE(pages->getValue<std::string>("next").find("page=2"), std::string::npos);
  EXPECT_NE(pages->getValue<std::string>("last").find("page=3"), std::string::npos);
  EXPECT_EQ(pages->getValue<std::string>("next").rfind("http://127.0.0.1:", 0), 0u);
  Reply p3 = Do("GET", "/droplets?per_page=2&page=3");
  JsonObject pages3 = GetObject(GetObject(p3.Json(), "links"), "pages");
  EXPECT_EQ(GetArray(p3.Json(), "droplets")->size(), 1u);
  EXPECT_TRUE(pages3->has("first"));
  EXPECT_TRUE(pages3->has("prev"));
  EXPECT_FALSE(pages3->has("next"));
  // Default page size 20, max 200.
  EXPECT_EQ(GetArray(Do("GET", "/sizes").Json(), "sizes")->size(), 14u);
  for (int i = 5; i < 25; ++i) CreateDroplet("vm" + std::to_string(i));
  EXPECT_EQ(GetArray(Do("GET", "/droplets").Json(), "droplets")->size(), 20u);
  EXPECT_EQ(GetArray(Do("GET", "/droplets?per_page=500").Json(), "droplets")->size(), 25u);
}

TEST_F(EmulatorTest, DigitalOceanDeleteIs204ThenGetIs404) {
  int64_t id = CreateDroplet("vm1");
  Reply del = Do("DELETE", "/droplets/" + std::to_string(id));
  EXPECT_EQ(del.status, 204);
  EXPECT_TRUE(del.body.empty());
  Reply get = Do("GET", "/droplets/" + std::to_string(id));
  EXPECT_EQ(get.status, 404);
  EXPECT_EQ(get.Json()->getValue<std::string>("id"), "not_found");
  EXPECT_EQ(Do("DELETE", "/droplets/" + std::to_string(id)).status, 404);
  EXPECT_EQ(Count("digitalocean", "instances"), 0);
  EXPECT_EQ(Count("digitalocean", "backend_instances"), 0);
}

TEST_F(EmulatorTest, DigitalOceanDeletesByTag) {
  CreateDroplet("a", "s-1vcpu-1gb", R"(,"tags":["t1"])");
  CreateDroplet("b", "gpu-h100x1-80gb", R"(,"tags":["t1"])");
  CreateDroplet("c", "s-1vcpu-1gb", R"(,"tags":["t2"])");
  EXPECT_EQ(Do("DELETE", "/droplets?tag_name=t1").status, 204);
  EXPECT_EQ(Count("digitalocean", "instances"), 1);
}

TEST_F(EmulatorTest, DigitalOceanValidatesCreateWithItsOwn422Messages) {
  auto message = [&](const std::string& body) {
    Reply r = Do("POST", "/droplets", body);
    EXPECT_EQ(r.status, 422) << body;
    EXPECT_EQ(r.Json()->getValue<std::string>("id"), "unprocessable_entity");
    return r.Json()->getValue<std::string>("message");
  };
  EXPECT_EQ(message(DropletBody("vm", "nope")),
            "You specified an invalid size for Droplet creation.");
  EXPECT_EQ(message(DropletBody("vm", "s-1vcpu-1gb", "mars1")),
            "You specified an invalid region for Droplet creation.");
  EXPECT_EQ(message(R"({"name":"vm","region":"nyc2","size":"s-1vcpu-1gb","image":"nope"})"),
            "You specified an invalid image for Droplet creation.");
  EXPECT_EQ(message(DropletBody("vm", "gpu-h100x1-80gb", "sfo3")),
            "Size is not available in this region.");
  EXPECT_NE(message(DropletBody("bad_name!")).find("hostname"), std::string::npos);
  std::string big(64 * 1024 + 1, 'x');
  message(DropletBody("vm", "s-1vcpu-1gb", "nyc2", R"(,"user_data":")" + big + "\""));
  message(DropletBody("vm", "s-1vcpu-1gb", "nyc2", R"(,"ssh_keys":[12345])"));
  std::string ok(64 * 1024, 'x');
  EXPECT_EQ(Do("POST", "/droplets", DropletBody("vm", "s-1vcpu-1gb", "nyc2",
                                                R"(,"user_data":")" + ok + "\""))
                .status,
            202);
  EXPECT_EQ(Do("POST", "/droplets", "{not json").status, 400);
}

// digitalocean/openapi droplets/models/droplet_create.yml: the fields of POST /v2/droplets and
// their types, size and image required, region optional ("may deploy in any region").
TEST_F(EmulatorTest, DigitalOceanChecksCreateBodiesAgainstTheSpec) {
  auto message = [&](const std::string& body) {
    Reply r = Do("POST", "/droplets", body);
    EXPECT_EQ(r.status, 422) << body << " -> " << r.body;
    EXPECT_EQ(r.Json()->getValue<std::string>("id"), "unprocessable_entity");
    return r.Json()->getValue<std::string>("message");
  };
  EXPECT_NE(message(DropletBody("vm", "s-1vcpu-1gb", "nyc2", R"(,"usr_data":"x")"))
                .find("usr_data"),
            std::string::npos);
  EXPECT_NE(message(DropletBody("vm", "s-1vcpu-1gb", "nyc2", R"(,"ipv6":"yes")")).find("ipv6"),
            std::string::npos);
  EXPECT_NE(message(R"({"name":"vm","region":"nyc2","image":"ubuntu-24-04-x64"})").find("size"),
            std::string::npos);
  EXPECT_NE(message(R"({"name":"vm","region":"nyc2","size":"s-1vcpu-1gb"})").find("image"),
            std::string::npos);
  // No region: the first open region that sells the size.
  Reply any = Do("POST", "/droplets",
                 R"({"name":"anywhere","size":"gpu-mi300x1-192gb","image":"gpu-amd-base"})");
  ASSERT_EQ(any.status, 202) << any.body;
  EXPECT_EQ(any.Json()->getObject("droplet")->getObject("region")->getValue<std::string>("slug"),
            "atl1");
  // Optional fields may be null (python-digitalocean sends them so).
  EXPECT_EQ(Do("POST", "/droplets",
               DropletBody("nulls", "s-1vcpu-1gb", "nyc2", R"(,"vpc_uuid":null,"tags":null)"))
                .status,
            202);
  // Sizes and regions as sold now (settings), in the lists and at create.
  Reply set = Control("POST", "/settings",
                      R"({"cloud":"digitalocean","size_regions":{"gpu-h100x1-80gb":["tor1"]},)"
                      R"("unavailable_regions":["sfo3"]})");
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(message(DropletBody("h", "gpu-h100x1-80gb", "nyc2")),
            "Size is not available in this region.");
  EXPECT_EQ(message(DropletBody("s", "s-1vcpu-1gb", "sfo3")), "Region is not available");
  Reply sizes = Do("GET", "/sizes?per_page=200");
  bool seen = false;
  JsonArray list = GetArray(sizes.Json(), "sizes");
  for (unsigned i = 0; list && i < list->size(); ++i) {
    JsonObject sz = list->getObject(i);
    if (sz->getValue<std::string>("slug") != "gpu-h100x1-80gb") continue;
    seen = true;
    EXPECT_EQ(sz->getArray("regions")->size(), 1u);
  }
  EXPECT_TRUE(seen) << sizes.body;
}

TEST_F(EmulatorTest, DigitalOceanSshKeysUseMd5FingerprintsAndRefuseDuplicates) {
  Reply r = Do("POST", "/account/keys",
               R"({"name":"gpuprov","public_key":")" + std::string(kPublicKey) + "\"}");
  ASSERT_EQ(r.status, 201) << r.body;
  JsonObject k = GetObject(r.Json(), "ssh_key");
  EXPECT_EQ(k->getValue<std::string>("fingerprint"), kFingerprint);
  const int64_t id = k->getValue<int64_t>("id");
  Reply dup = Do("POST", "/account/keys",
                 R"({"name":"again","public_key":")" + std::string(kPublicKey) + "\"}");
  EXPECT_EQ(dup.status, 422);
  EXPECT_EQ(dup.Json()->getValue<std::string>("message"),
            "SSH Key is already in use on your account");
  EXPECT_EQ(Do("POST", "/account/keys", R"({"name":"x","public_key":"not a key"})").status, 422);
  EXPECT_EQ(Do("GET", "/account/keys/" + std::string(kFingerprint)).status, 200);
  EXPECT_EQ(Do("GET", "/account/keys/" + std::to_string(id)).status, 200);
  EXPECT_EQ(GetArray(Do("GET", "/account/keys").Json(), "ssh_keys")->size(), 1u);
  // A droplet takes keys by id or fingerprint.
  CreateDroplet("k1", "s-1vcpu-1gb", R"(,"ssh_keys":[)" + std::to_string(id) + "]");
  CreateDroplet("k2", "s-1vcpu-1gb", R"(,"ssh_keys":[")" + std::string(kFingerprint) + "\"]");
  EXPECT_EQ(Count("digitalocean", "ssh_keys"), 1);
  EXPECT_EQ(Do("DELETE", "/account/keys/" + std::to_string(id)).status, 204);
  EXPECT_EQ(Do("GET", "/account/keys/" + std::to_string(id)).status, 404);
  EXPECT_EQ(Count("digitalocean", "ssh_keys"), 0);
}

TEST_F(EmulatorTest, DigitalOceanLimitsKeyListsToTenPerMinute) {
  for (int i = 0; i < 10; ++i) ASSERT_EQ(Do("GET", "/account/keys").status, 200);
  Reply r = Do("GET", "/account/keys");
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.Json()->getValue<std::string>("id"), "too_many_requests");
  EXPECT_FALSE(r.Header("retry-after").empty());
  // Tests that do not want it can switch enforcement off.
  ASSERT_EQ(Control("POST", "/settings",
                    R"({"cloud":"digitalocean","enforce_rate_limits":false})")
                .status,
            200);
  EXPECT_EQ(Do("GET", "/account/keys").status, 200);
}

TEST_F(EmulatorTest, DigitalOceanEnforces250RequestsPerMinute) {
  int first_429 = -1;
  for (int i = 0; i < 260 && first_429 < 0; ++i) {
    if (Do("GET", "/regions").status == 429) first_429 = i;
  }
  EXPECT_EQ(first_429, 250);
}

TEST_F(EmulatorTest, DigitalOceanFirewallsCreateGetListUpdateDelete) {
  int64_t droplet = CreateDroplet("fw-vm");
  const std::string body =
      R"({"name":"gpuprov-fw","inbound_rules":[{"protocol":"tcp","ports":"22","sources":{"addresses":["0.0.0.0/0","::/0"]}},{"protocol":"tcp","ports":"6443","sources":{"addresses":["0.0.0.0/0"]}}],"outbound_rules":[{"protocol":"tcp","ports":"0","destinations":{"addresses":["0.0.0.0/0","::/0"]}},{"protocol":"icmp","destinations":{"addresses":["0.0.0.0/0"]}}],"droplet_ids":[)" +
      std::to_string(droplet) + R"(],"tags":["gpuprov"]})";
  Reply c = Do("POST", "/firewalls", body);
  ASSERT_EQ(c.status, 202) << c.body;
  JsonObject fw = GetObject(c.Json(), "firewall");
  const std::string id = fw->getValue<std::string>("id");
  EXPECT_EQ(fw->getValue<std::string>("status"), "waiting");
  EXPECT_EQ(GetArray(fw, "inbound_rules")->size(), 2u);
  EXPECT_EQ(GetArray(fw, "droplet_ids")->getElement<int64_t>(0), droplet);
  EXPECT_EQ(Count("digitalocean", "firewalls"), 1);
  EXPECT_EQ(GetArray(Do("GET", "/firewalls").Json(), "firewalls")->size(), 1u);
  EXPECT_TRUE(WaitFor(
      [&] {
        return GetObject(Do("GET", "/firewalls/" + id).Json(), "firewall")
                   ->getValue<std::string>("status") == "succeeded";
      },
      3s));
  EXPECT_EQ(Do("POST", "/firewalls/" + id + "/rules",
               R"({"inbound_rules":[{"protocol":"tcp","ports":"443","sources":{"addresses":["0.0.0.0/0"]}}]})")
                .status,
            204);
  EXPECT_EQ(GetArray(GetObject(Do("GET", "/firewalls/" + id).Json(), "firewall"),
                     "inbound_rules")
                ->size(),
            3u);
  // Deleting the droplet drops it from the firewall.
  Do("DELETE", "/droplets/" + std::to_string(droplet));
  EXPECT_EQ(GetArray(GetObject(Do("GET", "/firewalls/" + id).Json(), "firewall"), "droplet_ids")
                ->size(),
            0u);
  EXPECT_EQ(Do("POST", "/firewalls", R"({"name":"-bad","inbound_rules":[]})").status, 422);
  EXPECT_EQ(Do("POST", "/firewalls",
               R"({"name":"fw2","inbound_rules":[{"protocol":"tcp","ports":"22"}]})")
                .status,
            422);
  EXPECT_EQ(Do("DELETE", "/firewalls/" + id).status, 204);
  EXPECT_EQ(Do("GET", "/firewalls/" + id).status, 404);
  EXPECT_EQ(Count("digitalocean", "firewalls"), 0);
}

TEST(PortSetTest, MergesSplitsAndPrints) {
  PortSet s = {443, 22, 80};
  EXPECT_EQ(s.ToString(), "22,80,443");
  s.Add(81, 442);  // adjacent on both sides: one range
  EXPECT_EQ(s.ToString(), "22,80-443");
  s.Remove(100, 200);
  EXPECT_EQ(s.ToString(), "22,80-99,201-443");
  EXPECT_TRUE(s.Contains(99));
  EXPECT_FALSE(s.Contains(100));
  s.Add(0, 70000);  // clamped to 1..65535
  EXPECT_EQ(s, PortSet::All());
  EXPECT_EQ(WithoutBlocked(PortSet::All(), {1, 65535}).ToString(), "2-65534");
  EXPECT_TRUE(PortSet().empty());
  EXPECT_EQ(PortSet().ToString(), "");
}

TEST(PortSetTest, ThisMachineIsCoveredByCidrsHolding127001) {
  for (const char* yes : {"0.0.0.0/0", "127.0.0.0/8", "127.0.0.1", "127.0.0.1/32", "96.0.0.0/3"}) {
    EXPECT_TRUE(CoversThisMachine(yes)) << yes;
  }
  for (const char* no : {"10.0.0.0/8", "127.0.0.2/32", "::/0", "127.0.0.1/33", "x/8", ""}) {
    EXPECT_FALSE(CoversThisMachine(no)) << no;
  }
}

// A droplet in no firewall takes every port; in firewalls (by id or tag), the union of their
// inbound tcp rules from sources that hold 127.0.0.1; every change is applied at once.
TEST_F(EmulatorTest, DigitalOceanReachabilityFollowsTheFirewalls) {
  int64_t droplet = CreateDroplet("reach-vm", "s-1vcpu-1gb", R"(,"tags":["team-a"])");
  auto reachable = [&] { return ReachablePorts(control_, "digitalocean", "reach-vm"); };
  EXPECT_EQ(reachable(), "1-65535");
  const std::string rules =
      R"("inbound_rules":[{"protocol":"tcp","ports":"22","sources":{"addresses":["0.0.0.0/0"]}},)"
      R"({"protocol":"tcp","ports":"8000-8010","sources":{"addresses":["127.0.0.0/8"]}},)"
      R"({"protocol":"tcp","ports":"6443","sources":{"addresses":["10.0.0.0/8"]}},)"
      R"({"protocol":"udp","ports":"53","sources":{"addresses":["0.0.0.0/0"]}}])";
  Reply c = Do("POST", "/firewalls",
               R"({"name":"fw-a",)" + rules + R"(,"droplet_ids":[)" + std::to_string(droplet) + "]}");
  ASSERT_EQ(c.status, 202) << c.body;
  const std::string id = GetObject(c.Json(), "firewall")->getValue<std::string>("id");
  EXPECT_EQ(reachable(), "22,8000-8010");
  const std::string k8s =
      R"({"inbound_rules":[{"protocol":"tcp","ports":"6443","sources":{"addresses":["0.0.0.0/0"]}}]})";
  ASSERT_EQ(Do("POST", "/firewalls/" + id + "/rules", k8s).status, 204);
  EXPECT_EQ(reachable(), "22,6443,8000-8010");
  ASSERT_EQ(Do("DELETE", "/firewalls/" + id + "/rules", k8s).status, 204);
  EXPECT_EQ(reachable(), "22,8000-8010");
  // A second firewall by tag adds its rules; "0" is every port.
  Reply t = Do("POST", "/firewalls",
               R"({"name":"fw-b","inbound_rules":[{"protocol":"tcp","ports":"443","sources":{"addresses":["0.0.0.0/0"]}}],"tags":["team-a"]})");
  ASSERT_EQ(t.status, 202) << t.body;
  EXPECT_EQ(reachable(), "22,443,8000-8010");
  ASSERT_EQ(Do("DELETE", "/firewalls/" + id + "/droplets",
               R"({"droplet_ids":[)" + std::to_string(droplet) + "]}")
                .status,
            204);
  EXPECT_EQ(reachable(), "443");
  const std::string tag_fw = GetObject(t.Json(), "firewall")->getValue<std::string>("id");
  ASSERT_EQ(Do("DELETE", "/firewalls/" + tag_fw).status, 204);
  EXPECT_EQ(reachable(), "1-65535");  // in no firewall again
  // The port_blocked fault drops a port the rules open.
  Fault(R"({"cloud":"digitalocean","fault":"port_blocked","value":"6443"})");
  CreateDroplet("reach-blocked");
  EXPECT_EQ(ReachablePorts(control_, "digitalocean", "reach-blocked"), "1-6442,6444-65535");
}

// Prime Intellect has no firewall API: every port.
TEST_F(EmulatorTest, PrimeIntellectPodsTakeEveryPort) {
  CreatePod("reach-pod");
  EXPECT_EQ(ReachablePorts(control_, "primeintellect", "reach-pod"), "1-65535");
}

TEST_F(EmulatorTest, DigitalOceanServesSizesRegionsImagesAndAccount) {
  JsonArray sizes = GetArray(Do("GET", "/sizes?per_page=200").Json(), "sizes");
  std::set<std::string> slugs;
  for (unsigned i = 0; i < sizes->size(); ++i) {
    slugs.insert(sizes->getObject(i)->getValue<std::string>("slug"));
  }
  for (const char* s : {"gpu-h100x1-80gb", "gpu-h100x8-640gb", "gpu-h200x1-141gb",
                        "gpu-h200x8-1128gb", "gpu-l40sx1-48gb", "gpu-6000adax1-48gb",
                        "gpu-4000adax1-20gb", "gpu-mi300x1-192gb", "gpu-mi300x8-1536gb"}) {
    EXPECT_EQ(slugs.count(s), 1u) << s;
  }
  EXPECT_GT(GetArray(Do("GET", "/regions").Json(), "regions")->size(), 3u);
  EXPECT_EQ(GetObject(Do("GET", "/images/gpu-h100x1-base").Json(), "image")
                ->getValue<std::string>("slug"),
            "gpu-h100x1-base");
  EXPECT_GT(GetObject(Do("GET", "/account").Json(), "account")->getValue<int>("droplet_limit"),
            0);
}

TEST_F(EmulatorTest, DigitalOceanCapacityFaultGivesThe422Message) {
  Fault(R"({"cloud":"digitalocean","fault":"capacity","times":1})");
  Reply r = Do("POST", "/droplets", DropletBody("vm"));
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.Json()->getValue<std::string>("message"), "Size is not available in this region.");
  EXPECT_EQ(Do("POST", "/droplets", DropletBody("vm")).status, 202);
  Fault(R"({"cloud":"digitalocean","fault":"quota"})");
  EXPECT_NE(Do("POST", "/droplets", DropletBody("vm")).body.find("droplet limit"),
            std::string::npos);
}

TEST_F(EmulatorTest, DigitalOceanThrottleFaultGives429WithRetryAfter) {
  Fault(R"({"cloud":"digitalocean","fault":"throttle","times":2,"retry_after":7,"method":"GET"})");
  EXPECT_EQ(Do("POST", "/droplets", DropletBody("vm")).status, 202);  // only GETs
  for (int i = 0; i < 2; ++i) {
    Reply r = Do("GET", "/droplets");
    EXPECT_EQ(r.status, 429);
    EXPECT_EQ(r.Header("retry-after"), "7");
    EXPECT_EQ(r.Header("ratelimit-remaining"), "0");
    EXPECT_GE(std::stoll(r.Header("ratelimit-reset")), std::time(nullptr) + 6);
    EXPECT_EQ(r.Json()->getValue<std::string>("message"), "API Rate limit exceeded.");
  }
  EXPECT_EQ(Do("GET", "/droplets").status, 200);
}

TEST_F(EmulatorTest, DigitalOceanServerErrorFaultGivesA5xxBurst) {
  Fault(R"({"cloud":"digitalocean","fault":"server_error","times":3,"status":503})");
  for (int i = 0; i < 3; ++i) {
    Reply r = Do("GET", "/droplets");
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(r.Json()->getValue<std::string>("id"), "server_error");
  }
  EXPECT_EQ(Do("GET", "/droplets").status, 200);
}

TEST_F(EmulatorTest, DigitalOceanSlowBootKeepsTheDropletNew) {
  Fault(R"({"cloud":"digitalocean","fault":"slow_boot","seconds":1.5})");
  int64_t slow = CreateDroplet("slow");
  int64_t fast = CreateDroplet("fast");
  ASSERT_TRUE(WaitFor([&] { return DropletStatus(fast) == "active"; }, 3s));
  EXPECT_EQ(DropletStatus(slow), "new");
  EXPECT_TRUE(WaitFor([&] { return DropletStatus(slow) == "active"; }, 5s));
}

TEST_F(EmulatorTest, DigitalOceanVanishingDropletBecomes404AndItsActionErrors) {
  Fault(R"({"cloud":"digitalocean","fault":"vanish_during_boot"})");
  Reply r = Do("POST", "/droplets", DropletBody("ghost"));
  const int64_t id = GetObject(r.Json(), "droplet")->getValue<int64_t>("id");
  const int64_t action =
      GetArray(GetObject(r.Json(), "links"), "actions")->getObject(0)->getValue<int64_t>("id");
  EXPECT_TRUE(WaitFor([&] { return DropletStatus(id) == "404"; }, 3s));
  EXPECT_EQ(GetObject(Do("GET", "/actions/" + std::to_string(action)).Json(), "action")
                ->getValue<std::string>("status"),
            "errored");
  EXPECT_EQ(Count("digitalocean", "backend_instances"), 0);
}

TEST_F(EmulatorTest, DigitalOceanErrorDuringBootErrorsTheAction) {
  Fault(R"({"cloud":"digitalocean","fault":"error_during_boot"})");
  Reply r = Do("POST", "/droplets", DropletBody("broken"));
  const int64_t id = GetObject(r.Json(), "droplet")->getValue<int64_t>("id");
  const int64_t action =
      GetArray(GetObject(r.Json(), "links"), "actions")->getObject(0)->getValue<int64_t>("id");
  EXPECT_TRUE(WaitFor([&] { return DropletStatus(id) == "404"; }, 3s));
  EXPECT_EQ(GetObject(Do("GET", "/actions/" + std::to_string(action)).Json(), "action")
                ->getValue<std::string>("status"),
            "errored");
}

TEST_F(EmulatorTest, BootScriptAndLateGpuFaultsAreVisibleToTests) {
  Fault(R"({"cloud":"digitalocean","fault":"boot_script_fails"})");
  Fault(R"({"cloud":"digitalocean","fault":"gpu_after_boot","seconds":1})");
  int64_t id = CreateDroplet("late-gpu", "gpu-h100x1-80gb", R"(,"user_data":"#!/bin/bash\ntrue")");
  ASSERT_TRUE(WaitFor([&] { return DropletStatus(id) == "active"; }, 3s));
  auto row = [&] {
    return GetArray(Control("GET", "/instances?cloud=digitalocean").Json(), "instances")
        ->getObject(0);
  };
  EXPECT_TRUE(row()->getValue<bool>("boot_script_fails"));
  EXPECT_FALSE(row()->getValue<bool>("gpu_present"));
  EXPECT_TRUE(WaitFor([&] { return row()->getValue<bool>("gpu_present"); }, 3s));
  EXPECT_EQ(row()->getValue<std::string>("id"), std::to_string(id));
}

// --- Prime Intellect ----------------------------------------------------------------

TEST_F(EmulatorTest, PrimeIntellectRejectsBadKeysWith401) {
  Reply r = Call(pi_, "GET", "/pods/", "", "wrong");
  EXPECT_EQ(r.status, 401);
  EXPECT_TRUE(r.body.empty());
  EXPECT_EQ(Call(pi_, "GET", "/pods/").status, 401);
  EXPECT_EQ(Pi("GET", "/pods/").status, 200);
  EXPECT_EQ(Pi("GET", "/pods").status, 200);  // both slash forms
}

TEST_F(EmulatorTest, PrimeIntellectAvailabilityFiltersAndPages) {
  JsonObject all = Pi("GET", "/availability/gpus").Json();
  const int total = all->getValue<int>("totalCount");
  EXPECT_GT(total, 5);
  JsonObject h100x8 = Pi("GET", "/availability/gpus?gpu_type=H100_80GB&gpu_count=8").Json();
  JsonArray items = GetArray(h100x8, "items");
  ASSERT_GT(items->size(), 1u);
  for (unsigned i = 0; i < items->size(); ++i) {
    JsonObject o = items->getObject(i);
    EXPECT_EQ(o->getValue<std::string>("gpuType"), "H100_80GB");
    EXPECT_EQ(o->getValue<int>("gpuCount"), 8);
    for (const char* f : {"cloudId", "socket", "provider", "dataCenter", "stockStatus", "prices",
                          "disk", "images", "security"}) {
      EXPECT_TRUE(o->has(f)) << f;
    }
  }
  JsonObject page = Pi("GET", "/availability/gpus?page=2&page_size=3").Json();
  EXPECT_EQ(GetArray(page, "items")->size(), 3u);
  EXPECT_EQ(page->getValue<int>("totalCount"), total);
}

// Spot items (isSpot) and POST /preempt: a pod of a spot item says isSpot and, taken back,
// stays TERMINATED until it is deleted; an on-demand pod taken back vanishes (404).
TEST_F(EmulatorTest, PrimeIntellectSpotPodsArePreemptedAsTerminatedUntilDeleted) {
  JsonArray items = GetArray(Pi("GET", "/availability/gpus?gpu_type=A100_80GB&gpu_count=1").Json(),
                             "items");
  int spot_items = 0;
  for (unsigned i = 0; i < items->size(); ++i) {
    JsonObject o = items->getObject(i);
    const bool spot = o->getValue<bool>("isSpot");
    spot_items += spot;
    EXPECT_EQ(spot, o->getValue<std::string>("cloudId") == "1A100.22V.spot");
  }
  EXPECT_EQ(spot_items, 1);
  Reply made =
      Pi("POST", "/pods/", PodBody("gpuprov-spot", "1A100.22V.spot", "A100_80GB", 1, "datacrunch"));
  ASSERT_EQ(made.status, 200) << made.body;
  const std::string spot = made.Json()->getValue<std::string>("id");
  EXPECT_TRUE(made.Json()->getValue<bool>("isSpot"));
  const std::string plain = CreatePod("gpuprov-plain");
  auto status = [&](const std::string& id) {
    Reply r = Pi("GET", "/pods/" + id);
    return r.status == 200 ? r.Json()->getValue<std::string>("status") : std::to_string(r.status);
  };
  ASSERT_TRUE(WaitFor([&] { return status(spot) == "ACTIVE" && status(plain) == "ACTIVE"; }, 6s));
  for (const char* name : {"gpuprov-spot", "gpuprov-plain"}) {
    Reply p = Control("POST", "/preempt",
                      std::string(R"({"cloud":"primeintellect","name":")") + name + "\"}");
    ASSERT_EQ(p.status, 200) << p.body;
  }
  EXPECT_EQ(status(spot), "TERMINATED");
  EXPECT_EQ(status(plain), "404");
  EXPECT_EQ(Pi("GET", "/pods/").Json()->getValue<int>("total_count"), 1);
  ASSERT_EQ(Pi("DELETE", "/pods/" + spot).status, 200);
  EXPECT_EQ(status(spot), "DELETING");
  ASSERT_TRUE(WaitFor([&] { return status(spot) == "404"; }, 5s));
  EXPECT_EQ(Count("primeintellect", "instances"), 0);
  EXPECT_EQ(Count("primeintellect", "backend_instances"), 0);
}

TEST_F(EmulatorTest, PrimeIntellectPodBecomesActiveWithSshConnection) {
  // Shapes rotate per pod: string, one-element list, string.
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(CreatePod("pod" + std::to_string(i)));
  JsonObject first = Pi("GET", "/pods/" + ids[0]).Json();
  EXPECT_EQ(first->getValue<std::string>("status"), "PROVISIONING");
  EXPECT_TRUE(first->isNull("sshConnection"));
  JsonObject second = Pi("GET", "/pods/" + ids[1]).Json();
  ASSERT_TRUE(GetArray(second, "sshConnection"));  // [null]
  EXPECT_TRUE(GetArray(second, "sshConnection")->isNull(0));

  auto ready = [&](const std::string& id) {
    JsonObject p = Pi("GET", "/pods/" + id).Json();
    return p->getValue<std::string>("status") == "ACTIVE" &&
           p->getValue<std::string>("installationStatus") == "FINISHED";
  };
  ASSERT_TRUE(WaitFor([&] { return ready(ids[0]) && ready(ids[1]) && ready(ids[2]); }, 6s));
  const std::regex ssh_re(R"(^(root|ubuntu)@(127\.[0-9.]+) -p ([0-9]+)$)");
  for (int i = 0; i < 3; ++i) {
    JsonObject p = Pi("GET", "/pods/" + ids[i]).Json();
    std::string conn;
    if (i == 1) {
      conn = GetArray(p, "sshConnection")->getElement<std::string>(0);
    } else {
      conn = p->getValue<std::string>("sshConnection");
    }
    std::smatch m;
    ASSERT_TRUE(std::regex_match(conn, m, ssh_re)) << conn;
    EXPECT_NE(m[3].str(), "22");  // remapped, as container providers do
    JsonObject map = GetArray(p, "primePortMapping")->getObject(0);
    EXPECT_EQ(map->getValue<std::string>("usedBy"), "SSH");
    EXPECT_EQ(map->getValue<std::string>("external"), m[3].str());
    EXPECT_EQ(p->getValue<int>("installationProgress"), 100);
  }
  // The status endpoint, several pods at once.
  Reply st = Pi("GET", "/pods/status/?pod_ids=" + ids[0] + "&pod_ids=" + ids[2]);
  ASSERT_EQ(st.status, 200);
  EXPECT_EQ(GetArray(st.Json(), "data")->size(), 2u);
  // List with offset/limit.
  JsonObject list = Pi("GET", "/pods/?offset=1&limit=1").Json();
  EXPECT_EQ(list->getValue<int>("total_count"), 3);
  EXPECT_EQ(GetArray(list, "data")->size(), 1u);
}

TEST_F(EmulatorTest, PrimeIntellectDeleteGoesThroughDeletingTo404) {
  std::string id = CreatePod("gone");
  EXPECT_EQ(Pi("DELETE", "/pods/" + id).status, 200);
  EXPECT_EQ(Pi("GET", "/pods/" + id).Json()->getValue<std::string>("status"), "DELETING");
  EXPECT_EQ(Count("primeintellect", "instances"), 0);
  EXPECT_TRUE(WaitFor([&] { return Pi("GET", "/pods/" + id).status == 404; }, 3s));
  Reply r = Pi("GET", "/pods/" + id);
  EXPECT_EQ(r.Json()->getValue<std::string>("detail"), "Pod not found");
  EXPECT_EQ(Pi("DELETE", "/pods/" + id).status, 404);
  EXPECT_EQ(GetArray(Pi("GET", "/pods/history").Json(), "data")->size(), 1u);
}

TEST_F(EmulatorTest, PrimeIntellectValidatesCreateFastApiStyle) {
  Reply r = Pi("POST", "/pods/", R"({"pod":{"name":"x","gpuType":"A100_80GB","gpuCount":1},"provider":{"type":"hyperstack"}})");
  EXPECT_EQ(r.status, 422);
  JsonObject d = GetArray(r.Json(), "detail")->getObject(0);
  EXPECT_EQ(GetArray(d, "loc")->getElement<std::string>(2), "cloudId");
  EXPECT_EQ(Pi("POST", "/pods/", PodBody("x", "nope")).status, 400);
}

TEST_F(EmulatorTest, PrimeIntellectFaults) {
  Fault(R"({"cloud":"primeintellect","fault":"capacity"})");
  JsonObject offer = GetArray(Pi("GET", "/availability/gpus").Json(), "items")->getObject(0);
  EXPECT_EQ(offer->getValue<std::string>("stockStatus"), "");
  Reply cap = Pi("POST", "/pods/", PodBody("x"));
  EXPECT_EQ(cap.status, 400);
  EXPECT_NE(cap.Json()->getValue<std::string>("detail").find("No capacity available"),
            std::string::npos);
  Fault(R"({"cloud":"primeintellect","fault":"payment_required"})");
  EXPECT_EQ(Pi("POST", "/pods/", PodBody("x")).status, 402);
  Fault(R"({"cloud":"primeintellect","fault":"throttle","retry_after":3})");
  Reply t = Pi("GET", "/pods/");
  EXPECT_EQ(t.status, 429);
  EXPECT_EQ(t.Header("retry-after"), "3");
  Fault(R"({"cloud":"primeintellect","fault":"server_error"})");
  EXPECT_EQ(Pi("GET", "/pods/").status, 500);

  Fault(R"({"cloud":"primeintellect","fault":"error_during_boot"})");
  std::string broken = CreatePod("broken");
  EXPECT_TRUE(WaitFor(
      [&] { return Pi("GET", "/pods/" + broken).Json()->getValue<std::string>("status") == "ERROR"; },
      3s));
  EXPECT_FALSE(Pi("GET", "/pods/" + broken).Json()->isNull("installationFailure"));
  Fault(R"({"cloud":"primeintellect","fault":"vanish_during_boot"})");
  std::string ghost = CreatePod("ghost");
  EXPECT_TRUE(WaitFor([&] { return Pi("GET", "/pods/" + ghost).status == 404; }, 3s));
}

TEST_F(EmulatorTest, PrimeIntellectSshKeys) {
  Reply c = Pi("POST", "/ssh_keys/", R"({"name":"gpuprov","publicKey":")" +
                                         std::string(kPublicKey) + "\"}");
  ASSERT_EQ(c.status, 200) << c.body;
  std::string id = c.Json()->getValue<std::string>("id");
  EXPECT_TRUE(c.Json()->getValue<bool>("isPrimary"));
  JsonObject list = Pi("GET", "/ssh_keys/?offset=0&limit=100").Json();
  EXPECT_EQ(list->getValue<int>("total_count"), 1);
  EXPECT_EQ(GetArray(list, "data")->getObject(0)->getValue<std::string>("publicKey"), kPublicKey);
  EXPECT_EQ(Count("primeintellect", "ssh_keys"), 1);
  EXPECT_EQ(Pi("DELETE", "/ssh_keys/" + id).status, 200);
  EXPECT_EQ(Pi("DELETE", "/ssh_keys/" + id).status, 404);
  EXPECT_EQ(Pi("POST", "/ssh_keys/", R"({"name":"x"})").status, 422);
}

// --- control API -------------------------------------------------------------------

TEST_F(EmulatorTest, ControlRejectsUnknownFaultsAndClouds) {
  EXPECT_EQ(Control("POST", "/faults", R"({"cloud":"digitalocean","fault":"meteor"})").status,
            400);
  EXPECT_EQ(Control("POST", "/faults", R"({"cloud":"nowhere","fault":"capacity"})").status, 404);
  EXPECT_EQ(Control("POST", "/faults", R"({"fault":"capacity"})").status, 400);
  EXPECT_EQ(Control("POST", "/faults", R"({"cloud":"digitalocean","fault":"slow_boot"})").status,
            400);
  EXPECT_EQ(Control("GET", "/health").status, 200);
}

TEST_F(EmulatorTest, ControlLogsRequestsWithoutCredentials) {
  Do("GET", "/droplets?type=gpus");
  Call(do_, "GET", "/droplets", "", "wrong-token");
  Reply log = Control("GET", "/requests?cloud=digitalocean");
  JsonArray reqs = GetArray(log.Json(), "requests");
  ASSERT_EQ(reqs->size(), 2u);
  EXPECT_EQ(reqs->getObject(0)->getValue<std::string>("path"), "/v2/droplets?type=gpus");
  EXPECT_EQ(reqs->getObject(1)->getValue<int>("status"), 401);
  EXPECT_EQ(log.body.find(kDoToken), std::string::npos);
  EXPECT_EQ(log.body.find("wrong-token"), std::string::npos);
}

TEST_F(EmulatorTest, ControlResetRemovesEverything) {
  CreateDroplet("a");
  Do("POST", "/account/keys", R"({"name":"k","public_key":")" + std::string(kPublicKey) + "\"}");
  CreatePod("p");
  Fault(R"({"cloud":"digitalocean","fault":"capacity","times":-1})");
  JsonObject all = Control("GET", "/counts").Json();
  EXPECT_EQ(all->getValue<int>("instances"), 2);
  EXPECT_EQ(all->getValue<int>("ssh_keys"), 1);
  ASSERT_EQ(Control("POST", "/reset").status, 200);
  all = Control("GET", "/counts").Json();
  EXPECT_EQ(all->getValue<int>("instances"), 0);
  EXPECT_EQ(all->getValue<int>("ssh_keys"), 0);
  EXPECT_EQ(all->getValue<int>("backend_instances"), 0);
  EXPECT_EQ(Do("POST", "/droplets", DropletBody("after")).status, 202);  // fault cleared
}

TEST_F(EmulatorTest, StallAfterAnswersTheMatchingRequestThenHoldsTheCloudUntilReleased) {
  // Only a 2xx answer to POST /v2/droplets with "name":"s1" in the body stalls the cloud.
  Fault(R"({"cloud":"digitalocean","fault":"stall_after","method":"POST",)"
        R"("path":"/v2/droplets","body":"\"name\":\"s1\""})");
  EXPECT_EQ(Do("POST", "/droplets", DropletBody("other")).status, 202);
  EXPECT_EQ(Do("POST", "/droplets", R"({"name":"s1"})").status, 422);  // not a 2xx: no stall
  EXPECT_FALSE(Control("GET", "/stalled?cloud=digitalocean").Json()->getValue<bool>("stalled"));
  const int64_t id = CreateDroplet("s1");
  JsonObject st = Control("GET", "/stalled?cloud=digitalocean").Json();
  EXPECT_TRUE(st->getValue<bool>("stalled"));
  EXPECT_EQ(st->getValue<std::string>("request"), "POST /v2/droplets");
  // The next request is held, not carried out, until the stall is released; then it is a 503.
  Reply held;
  std::thread client([&] { held = Do("DELETE", "/droplets/" + std::to_string(id)); });
  EXPECT_TRUE(WaitFor(
      [&] {
        return Control("GET", "/stalled?cloud=digitalocean").Json()->getValue<int>("held") == 1;
      },
      5s));
  EXPECT_EQ(Pi("GET", "/pods/").status, 200);  // other clouds are not stalled
  EXPECT_EQ(Count("digitalocean", "instances"), 2);
  ASSERT_EQ(Control("DELETE", "/stalled?cloud=digitalocean").status, 204);
  client.join();
  EXPECT_EQ(held.status, 503);
  EXPECT_EQ(Count("digitalocean", "instances"), 2);  // the held delete never ran
  EXPECT_FALSE(Control("GET", "/stalled?cloud=digitalocean").Json()->getValue<bool>("stalled"));
  EXPECT_EQ(Do("DELETE", "/droplets/" + std::to_string(id)).status, 204);
  EXPECT_EQ(Count("digitalocean", "instances"), 1);
}

TEST_F(EmulatorTest, StallIsReleasedByDeleteFaultsAndReset) {
  Fault(R"({"cloud":"digitalocean","fault":"stall_after","path":"/v2/account"})");
  EXPECT_EQ(Do("GET", "/account").status, 200);
  EXPECT_TRUE(Control("GET", "/stalled").Json()->getObject("digitalocean")->getValue<bool>(
      "stalled"));
  ASSERT_EQ(Control("DELETE", "/faults").status, 204);
  EXPECT_EQ(Do("GET", "/account").status, 200);
  Fault(R"({"cloud":"digitalocean","fault":"stall_after"})");
  EXPECT_EQ(Do("GET", "/account").status, 200);
  ASSERT_EQ(Control("POST", "/reset").status, 200);
  EXPECT_EQ(Do("GET", "/account").status, 200);
}

TEST_F(EmulatorTest, ApiLatencySettingDelaysEveryRequestOfThatCloudAndCountsIt) {
  ASSERT_EQ(Control("POST", "/settings", R"({"cloud":"digitalocean","api_latency_ms":-1})").status,
            400);
  ASSERT_EQ(Control("POST", "/settings", R"({"cloud":"digitalocean","api_latency_ms":150})").status,
            200);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Do("GET", "/account").status, 200);
  EXPECT_EQ(Call(do_, "GET", "/account", "", "wrong").status, 401);  // before auth too
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);
  EXPECT_EQ(Pi("GET", "/pods/").status, 200);  // another cloud: not delayed
  EXPECT_EQ(Count("digitalocean", "delayed_requests"), 2);
  EXPECT_EQ(Count("primeintellect", "delayed_requests"), 0);
  EXPECT_EQ(GetObject(GetObject(Control("GET", "/counts").Json(), "clouds"), "digitalocean")
                ->getValue<double>("api_latency_ms"),
            150);
  JsonArray reqs = GetArray(Control("GET", "/requests?cloud=digitalocean").Json(), "requests");
  ASSERT_EQ(reqs->size(), 2u);
  EXPECT_GE(reqs->getObject(0)->getValue<double>("duration_ms"), 150);
  ASSERT_EQ(Control("POST", "/settings", R"({"cloud":"digitalocean","api_latency_ms":0})").status,
            200);
  EXPECT_EQ(Do("GET", "/account").status, 200);
  EXPECT_EQ(Count("digitalocean", "delayed_requests"), 2);
  ASSERT_EQ(Control("POST", "/reset").status, 200);
  EXPECT_EQ(Count("digitalocean", "delayed_requests"), 0);
}

// --- the binary ---------------------------------------------------------------------

// Runs the emulator binary with args; its "<cloud> <url>" lines by cloud ("control" included),
// once it printed the control line. *pid is the process, *out its stdout.
std::map<std::string, std::string> StartBinary(const std::vector<std::string>& args, pid_t* pid,
                                               FILE** out) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  *pid = fork();
  if (*pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv = {const_cast<char*>(GPUPROV_EMULATOR_PATH)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(GPUPROV_EMULATOR_PATH, argv.data());
    _exit(127);
  }
  close(fds[1]);
  *out = fdopen(fds[0], "r");
  std::map<std::string, std::string> urls;
  char buf[512];
  while (urls.count("control") == 0 && fgets(buf, sizeof buf, *out)) {
    std::string l = buf;
    if (!l.empty() && l.back() == '\n') l.pop_back();
    urls[l.substr(0, l.find(' '))] = l.substr(l.find(' ') + 1);
  }
  return urls;
}

TEST(EmulatorBinary, ApiLatencyFlagDelaysRequestsAndSshDelayNeedsTheDockerBackend) {
  pid_t pid = 0;
  FILE* out = nullptr;
  auto urls = StartBinary({"--clouds", "digitalocean", "--api-latency-ms", "120"}, &pid, &out);
  ASSERT_EQ(urls.count("control"), 1u);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Call(urls["digitalocean"], "GET", "/account", "", "wrong").status, 401);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 120ms);
  EXPECT_EQ(Call(urls["control"], "GET", "/counts", "").Json()->getValue<int>("delayed_requests"),
            1);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  fclose(out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"--api-latency-ms", "-5"}, {"--ssh-delay-seconds", "x"}, {"--ssh-delay-seconds", "3"}}) {
    urls = StartBinary(bad, &pid, &out);
    EXPECT_EQ(urls.count("control"), 0u) << bad[0] << " " << bad[1];
    waitpid(pid, &status, 0);
    fclose(out);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << bad[0] << " " << bad[1];
  }
}


TEST(EmulatorBinary, PrintsOneLinePerCloudThenControlAndStopsOnSigterm) {
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    setenv("DIGITALOCEAN_TOKEN", "env-token", 1);
    execl(GPUPROV_EMULATOR_PATH, GPUPROV_EMULATOR_PATH, "--boot-seconds", "0", nullptr);
    _exit(127);
  }
  close(out[1]);
  FILE* f = fdopen(out[0], "r");
  std::vector<std::string> lines;
  char buf[512];
  // One "<cloud> <url>" line per cloud it serves, then "control <url>" last.
  while ((lines.empty() || lines.back().rfind("control ", 0) != 0) && fgets(buf, sizeof buf, f)) {
    std::string l = buf;
    if (!l.empty() && l.back() == '\n') l.pop_back();
    lines.push_back(l);
  }
  ASSERT_EQ(lines.size(), Emulator::KnownClouds().size() + 1);
  std::map<std::string, std::string> urls;
  for (const auto& l : lines) urls[l.substr(0, l.find(' '))] = l.substr(l.find(' ') + 1);
  for (const auto& cloud : Emulator::KnownClouds()) EXPECT_EQ(urls.count(cloud), 1u) << cloud;
  EXPECT_TRUE(std::regex_match(urls["digitalocean"], std::regex(R"(http://127\.0\.0\.1:\d+/v2)")))
      << urls["digitalocean"];
  EXPECT_TRUE(std::regex_match(urls["primeintellect"],
                               std::regex(R"(http://127\.0\.0\.1:\d+/api/v1)")))
      << urls["primeintellect"];
  EXPECT_TRUE(std::regex_match(lines.back(), std::regex(R"(control http://127\.0\.0\.1:\d+)")))
      << lines.back();
  // The token comes from the environment.
  const std::string base = urls["digitalocean"];
  EXPECT_EQ(Call(base, "GET", "/droplets", "", "env-token").status, 200);
  EXPECT_EQ(Call(base, "GET", "/droplets", "", "other").status, 401);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  fclose(f);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace gpuprov::emulator
