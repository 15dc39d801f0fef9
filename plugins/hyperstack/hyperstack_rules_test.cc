// SPDX-License-Identifier: Apache-2.0
#include "hyperstack_rules.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "driver_test_util.h"
#include "gpuprov/sdk.hpp"

namespace gpuprov::hyperstack {
namespace {

using drivers::testing::ParseJson;
using drivers::testing::ScopedEnv;
using drivers::testing::ScopedTempDir;

constexpr const char* kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF test@gpuprov";

TEST(HyperstackApiKey, EnvironmentFirstThenConfigThenSkyPilotsFile) {
  ScopedTempDir home;
  std::filesystem::create_directories(home.path() / ".hyperstack");
  std::ofstream(home.path() / ".hyperstack" / "api_key") << "file-key\n";
  ScopedEnv h("HOME", home.path().c_str());
  ScopedEnv none("HYPERSTACK_API_KEY", nullptr);
  auto from_file = ResolveApiKey(ParseJson("{}"));
  ASSERT_TRUE(from_file);
  EXPECT_EQ(from_file->value, "file-key");
  EXPECT_EQ(from_file->origin, (home.path() / ".hyperstack" / "api_key").string());
  auto from_config = ResolveApiKey(ParseJson(R"({"token":" cfg-key "})"));
  ASSERT_TRUE(from_config);
  EXPECT_EQ(from_config->value, "cfg-key");
  ScopedEnv env("HYPERSTACK_API_KEY", "env-key");
  auto from_env = ResolveApiKey(ParseJson(R"({"token":"cfg-key"})"));
  ASSERT_TRUE(from_env);
  EXPECT_EQ(from_env->value, "env-key");
  EXPECT_EQ(from_env->origin, "$HYPERSTACK_API_KEY");
  ScopedEnv mine("MY_HS_KEY", "named-key");
  EXPECT_EQ(ResolveApiKey(ParseJson(R"({"token_env":"MY_HS_KEY"})"))->value, "named-key");
}

TEST(HyperstackApiKey, NoneAnywhere) {
  ScopedTempDir home;
  ScopedEnv h("HOME", home.path().c_str());
  ScopedEnv none("HYPERSTACK_API_KEY", nullptr);
  EXPECT_FALSE(ResolveApiKey(ParseJson("{}")));
  EXPECT_NE(ApiKeyHint().find("HYPERSTACK_API_KEY"), std::string::npos);
}

TEST(HyperstackGpus, RequestsAndFlavorFieldsMeetOnOneName) {
  EXPECT_EQ(CanonicalGpu("h100"), "H100");
  EXPECT_EQ(CanonicalGpu("H100-80G-PCIe"), "H100");
  EXPECT_EQ(CanonicalGpu("H100-80G-PCIe-NVLink"), "H100");
  EXPECT_EQ(CanonicalGpu("A100-80G-PCIe"), "A100");
  EXPECT_EQ(CanonicalGpu("NVIDIA A100"), "A100");
  EXPECT_EQ(CanonicalGpu("rtx_a6000"), "RTX-A6000");
  EXPECT_EQ(CanonicalGpu("A6000"), "RTX-A6000");
  EXPECT_EQ(CanonicalGpu("RTX-A4000"), "RTX-A4000");
  EXPECT_EQ(CanonicalGpu("L40"), "L40");
  EXPECT_EQ(CanonicalGpu("L40S"), std::nullopt);
  EXPECT_EQ(CanonicalGpu(""), std::nullopt);
}

TEST(HyperstackGpus, PlainPcieFlavorsArePreferred) {
  EXPECT_TRUE(IsPreferredFlavor("n3-H100x8"));
  EXPECT_TRUE(IsPreferredFlavor("n3-RTX-A6000x1"));
  EXPECT_FALSE(IsPreferredFlavor("n3-H100x8-NVLink"));
  EXPECT_FALSE(IsPreferredFlavor("n3-H100-SXM5x8"));
}

TEST(HyperstackGpus, CatalogueChoosesAndExplains) {
  const drivers::Catalogue c = FlavorCatalogue(KnownFlavors(), "n1-cpu-small");
  auto h100x8 = drivers::ChooseInstanceType(c, drivers::GpuRequest{"H100", 8}, "");
  EXPECT_EQ(h100x8.row.instance_type, "n3-H100x8");
  auto sxm = drivers::ChooseInstanceType(c, drivers::GpuRequest{"H100", 8}, "n3-H100-SXM5x8");
  EXPECT_EQ(sxm.row.instance_type, "n3-H100-SXM5x8");
  EXPECT_EQ(drivers::ChooseInstanceType(c, std::nullopt, "").row.instance_type, "n1-cpu-small");
  try {
    drivers::ChooseInstanceType(c, drivers::GpuRequest{"L40S", 1}, "");
    ADD_FAILURE() << "L40S chosen";
  } catch (const gpuprov::sdk::DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
    const std::string m = e.what();
    EXPECT_NE(m.find("Hyperstack does not offer L40S:1"), std::string::npos) << m;
    EXPECT_NE(m.find("ask for L40:1"), std::string::npos) << m;
    EXPECT_NE(m.find("H100 x1/x2/x4/x8"), std::string::npos) << m;
  }
  try {
    drivers::ChooseInstanceType(c, drivers::GpuRequest{"A100", 3}, "");
    ADD_FAILURE() << "A100:3 chosen";
  } catch (const gpuprov::sdk::DriverError& e) {
    EXPECT_NE(std::string(e.what()).find("A100:1 (n3-A100x1)"), std::string::npos) << e.what();
  }
}

TEST(HyperstackFlavors, ParsedFromTheGroupedList) {
  auto doc = ParseJson(R"({"status":true,"data":[{"gpu":"H100-80G-PCIe","region_name":"CANADA-1",
    "flavors":[{"name":"n3-H100x1","gpu":"H100-80G-PCIe","gpu_count":1,"region_name":"CANADA-1",
    "stock_available":false}]},{"gpu":"","region_name":"CANADA-1","flavors":[{"name":"n1-cpu-small",
    "gpu":"","gpu_count":0,"region_name":"CANADA-1","stock_available":true}]}]})");
  std::vector<Flavor> f = ParseFlavors(doc);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].name, "n3-H100x1");
  EXPECT_FALSE(f[0].stock_available);
  EXPECT_EQ(GpusOf(f[0]), "H100:1");
  EXPECT_EQ(GpusOf(f[1]), "");
  EXPECT_EQ(CpuFlavor(f), "n1-cpu-small");
}

TEST(HyperstackStates, UpperCaseWordsBecomeTheProtocolsFive) {
  auto state = [](const std::string& json) { return StateOf(ParseJson(json)); };
  EXPECT_EQ(state(R"({"status":"CREATING"})").state, "pending");
  EXPECT_EQ(state(R"({"status":"BUILD"})").state, "pending");
  EXPECT_EQ(state(R"({"status":"SOMETHING_NEW"})").state, "pending");
  VmState no_ip =
      state(R"({"status":"ACTIVE","floating_ip":null,"floating_ip_status":"ATTACHING"})");
  EXPECT_EQ(no_ip.state, "pending");
  EXPECT_NE(no_ip.message.find("floating IP (ATTACHING)"), std::string::npos) << no_ip.message;
  auto up =
      ParseJson(R"({"status":"ACTIVE","floating_ip":"127.9.0.1","floating_ip_status":"ATTACHED"})");
  EXPECT_EQ(StateOf(up).state, "running");
  EXPECT_EQ(PublicIp(up), "127.9.0.1");
  EXPECT_EQ(state(R"({"status":"SHUTOFF"})").state, "stopped");
  EXPECT_EQ(state(R"({"status":"HIBERNATED"})").state, "stopped");
  EXPECT_EQ(state(R"({"status":"DELETING"})").state, "terminated");
  VmState err =
      state(R"({"status":"ERROR","vm_state":"error","fault":{"message":"No valid host"}})");
  EXPECT_EQ(err.state, "error");
  EXPECT_NE(err.message.find("ERROR (vm_state error, No valid host)"), std::string::npos)
      << err.message;
}

TEST(HyperstackErrors, StatusFromReasonHttpAndWords) {
  EXPECT_EQ(StatusOfError(401, R"({"status":false,"message":"x","error_reason":"unauthorized"})"),
            GPUPROV_STATUS_AUTH);
  EXPECT_EQ(
      StatusOfError(
          400,
          R"({"status":false,"message":"Not enough stock available for flavor n3-H100x1","error_reason":"bad_request"})"),
      GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(StatusOfError(
                400, R"({"status":false,"message":"Insufficient balance to create the resource"})"),
            GPUPROV_STATUS_QUOTA);
  EXPECT_EQ(
      StatusOfError(
          400,
          R"({"status":false,"message":"\"count\" must be between 1 and 20","error_reason":"bad_request"})"),
      GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(StatusOfError(404, R"({"status":false,"message":"gone","error_reason":"not_found"})"),
            GPUPROV_STATUS_NOT_FOUND);
  EXPECT_EQ(StatusOfError(500, R"({"message":"Internal Server Error"})"), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(ApiMessage(R"({"status":false,"message":"Nope","error_reason":"forbidden"})"),
            "Nope (forbidden)");
  EXPECT_EQ(ApiMessage(R"({"message":"Internal Server Error"})"), "Internal Server Error");
  EXPECT_EQ(ApiMessage("<html>bad gateway</html>"), "<html>bad gateway</html>");
  EXPECT_TRUE(IsStillBeingCreated(
      R"({"status":false,"message":"VM x is currently being created and cannot be deleted yet."})"));
  EXPECT_FALSE(IsStillBeingCreated(R"({"status":false,"message":"Method not allowed"})"));
}

TEST(HyperstackNames, EnvironmentKeyPairAndLabels) {
  EXPECT_EQ(EnvironmentName("CANADA-1"), "gpuprov-CANADA-1");
  // ec:7a:06:74:b7:97:7b:30:... is ssh-keygen -E md5's fingerprint of kKey.
  EXPECT_EQ(KeyPairName(kKey), "gpuprov-ec7a0674b7977b30");
  EXPECT_EQ(KeyIdentity(kKey), KeyIdentity(std::string(kKey).substr(0, 80)));
  EXPECT_THROW(KeyPairName("not a key"), gpuprov::sdk::DriverError);
  auto req = ParseJson(R"({"tags":{"gpuprov":"1","gpuprov-name":"a","team":"ml","flag":""}})");
  std::vector<std::string> labels = VmLabels("demo", req);
  ASSERT_EQ(labels.size(), 4u);
  EXPECT_EQ(labels[0], "gpuprov");
  EXPECT_EQ(labels[1], "gpuprov-name=demo");
  auto vm = ParseJson(R"({"labels":["gpuprov","gpuprov-name=demo","team=ml"]})");
  EXPECT_TRUE(IsManaged(vm));
  const auto tags = TagsOf(vm);
  const std::map<std::string, std::string> by_key(tags.begin(), tags.end());
  EXPECT_EQ(by_key.at("gpuprov-name"), "demo");
  EXPECT_EQ(by_key.at("team"), "ml");
  EXPECT_FALSE(IsManaged(ParseJson(R"({"labels":["gpuprov-name=demo"]})")));
}

TEST(HyperstackRules, OpenPortsFromSecurityRules) {
  auto vm = ParseJson(R"({"security_rules":[
    {"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"0.0.0.0/0","port_range_min":22,"port_range_max":22},
    {"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"10.0.0.0/8","port_range_min":6443,"port_range_max":6443},
    {"direction":"egress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"0.0.0.0/0","port_range_min":80,"port_range_max":80},
    {"direction":"ingress","protocol":"udp","ethertype":"IPv4","remote_ip_prefix":"0.0.0.0/0","port_range_min":443,"port_range_max":443},
    {"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"0.0.0.0/0","port_range_min":8000,"port_range_max":8002}]})");
  EXPECT_EQ(OpenTcpPorts(vm), (std::set<int>{22, 8000, 8001, 8002}));
  auto rule = IngressRule(6443);
  EXPECT_EQ(
      drivers::testing::Stringify(rule),
      R"({"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"0.0.0.0/0","port_range_min":6443,"port_range_max":6443})");
}

TEST(HyperstackRules, IngressRulesCarryEachSourceAndPlanRulesSetsExactlyThem) {
  drivers::PortSources s;
  s.allow_from = {"10.0.0.0/8", "192.0.2.0/24"};
  s.narrowed = {6443};
  Poco::JSON::Array::Ptr rules = IngressRules({22, 6443}, s);
  ASSERT_EQ(rules->size(), 3u);  // 22 from everyone, 6443 from each source
  EXPECT_EQ(rules->getObject(0)->getValue<std::string>("remote_ip_prefix"), "0.0.0.0/0");
  EXPECT_EQ(rules->getObject(1)->getValue<std::string>("remote_ip_prefix"), "10.0.0.0/8");
  EXPECT_EQ(rules->getObject(2)->getValue<int>("port_range_min"), 6443);

  Poco::JSON::Object::Ptr vm = ParseJson(R"({"security_rules":[
    {"id":1,"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"0.0.0.0/0","port_range_min":6443,"port_range_max":6443},
    {"id":2,"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"10.0.0.0/8","port_range_min":6443,"port_range_max":6443},
    {"id":3,"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"0.0.0.0/0","port_range_min":22,"port_range_max":22},
    {"id":4,"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"0.0.0.0/0","port_range_min":6000,"port_range_max":7000}]})");
  RuleChange change = PlanRules(vm, 6443, s);
  EXPECT_EQ(change.add, std::vector<std::string>{"192.0.2.0/24"});
  EXPECT_EQ(change.remove_ids, std::vector<std::string>{"1"});  // the range rule 4 is not ours
  EXPECT_EQ(OpenTcpPorts(vm).count(6443), 1u);                   // through rule 1 (and 4)
}

// A cluster's peer rules: one per peer port from each other node's fixed_ip /32; a peer rule
// is told from the user's by its shape (one peer port, a private /32), and the other rule
// planners leave it alone.
TEST(HyperstackRules, PeerRulesAddTheMissingAndDropFormerPeersOnly) {
  const std::vector<drivers::PeerPort> ports = {{6443, "tcp"}, {10250, "tcp"}, {51820, "udp"}};
  EXPECT_EQ(drivers::testing::Stringify(PeerRule({51820, "udp"}, "10.64.0.3")),
            R"({"direction":"ingress","protocol":"udp","ethertype":"IPv4",)"
            R"("remote_ip_prefix":"10.64.0.3/32","port_range_min":51820,"port_range_max":51820})");
  Poco::JSON::Object::Ptr vm = ParseJson(R"({"security_rules":[
    {"id":1,"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"0.0.0.0/0","port_range_min":6443,"port_range_max":6443},
    {"id":2,"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"10.64.0.3/32","port_range_min":6443,"port_range_max":6443},
    {"id":3,"direction":"ingress","protocol":"udp","ethertype":"IPv4","remote_ip_prefix":"10.64.0.9/32","port_range_min":51820,"port_range_max":51820},
    {"id":4,"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"203.0.113.5/32","port_range_min":10250,"port_range_max":10250},
    {"id":5,"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"10.64.0.9/32","port_range_min":5432,"port_range_max":5432},
    {"id":6,"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"10.64.0.0/24","port_range_min":10250,"port_range_max":10250},
    {"id":7,"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"10.64.0.3/32","port_range_min":6443,"port_range_max":6443}]})");
  const PeerRuleChange change = PlanPeerRules(vm, ports, {"10.64.0.3"});
  // 3 is a former peer's, 7 a second copy of 2; 1, 4, 5 and 6 are not peer rules.
  EXPECT_EQ(change.remove_ids, (std::vector<std::string>{"3", "7"}));
  ASSERT_EQ(change.add.size(), 2u);
  EXPECT_EQ(change.add[0]->getValue<int>("port_range_min"), 10250);
  EXPECT_EQ(change.add[1]->getValue<std::string>("protocol"), "udp");
  // Nothing to do once there.
  EXPECT_TRUE(PlanPeerRules(vm, ports, {}).add.empty());
  // The user-facing planners do not see peer rules: 6443 is open to the internet through rule
  // 1 only, and narrowing 6443 to 198.51.100.0/24 keeps the peers' rules 2 and 7.
  drivers::PortSources s;
  s.allow_from = {"198.51.100.0/24"};
  s.narrowed = {6443};
  EXPECT_EQ(PlanRules(vm, 6443, s).remove_ids, std::vector<std::string>{"1"});
  EXPECT_EQ(OpenTcpPorts(vm, /*world_only=*/false).count(10250), 1u);  // rules 4 and 6
  Poco::JSON::Object::Ptr only_peers = ParseJson(R"({"security_rules":[
    {"id":2,"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"10.64.0.3/32","port_range_min":6443,"port_range_max":6443}]})");
  EXPECT_TRUE(OpenTcpPorts(only_peers, /*world_only=*/false).empty());
}

// H2: the pricebook (H-SDK PricebookModel; the API reference's example entry) and a flavor's
// price from it (SkyPilot's fetch_hyperstack.py: the GPU's value times gpu_count).
TEST(HyperstackRules, PricebookPricesAFlavorPerGpu) {
  const auto book = ParsePricebook(R"([
    {"id":10,"name":"RTX-A4000","value":0.58,"original_value":0.58,"discount_applied":false,"start_time":null,"end_time":null},
    {"id":11,"name":"H100-80G-PCIe","value":"1.90","original_value":"1.90"},
    {"id":12,"name":"broken","value":"n/a"},
    {"id":13,"name":"free","value":0}])");
  EXPECT_EQ(book.size(), 2u);
  Flavor h100{"n3-H100x2", "H100-80G-PCIe", 2, "CANADA-1", true};
  EXPECT_DOUBLE_EQ(FlavorPrice(book, h100).value_or(-1), 3.80);
  Flavor a4000{"n3-RTX-A4000x1", "RTX-A4000", 1, "NORWAY-1", true};
  EXPECT_DOUBLE_EQ(FlavorPrice(book, a4000).value_or(-1), 0.58);
  EXPECT_FALSE(FlavorPrice(book, Flavor{"n3-L40x1", "L40", 1, "CANADA-1", true}));
  EXPECT_FALSE(FlavorPrice(book, Flavor{"n1-cpu-small", "", 0, "CANADA-1", true}));
  EXPECT_TRUE(ParsePricebook("{\"status\":false}").empty());
  EXPECT_TRUE(ParsePricebook("not json").empty());
}

// H3 (unconfirmed): both fields H-SDK InstanceFields has for it are read.
TEST(HyperstackRules, PortRandomizationIsReadFromEitherField) {
  EXPECT_FALSE(PortRandomized(ParseJson(R"({"port_randomization":false,"port_randomization_status":"DISABLED"})")));
  EXPECT_FALSE(PortRandomized(ParseJson(R"({})")));
  EXPECT_TRUE(PortRandomized(ParseJson(R"({"port_randomization":true})")));
  EXPECT_TRUE(PortRandomized(ParseJson(R"({"port_randomization_status":"enabled"})")));
}

}  // namespace
}  // namespace gpuprov::hyperstack
