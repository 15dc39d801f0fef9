// SPDX-License-Identifier: Apache-2.0
#include "driver_request.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "json_util.h"

namespace gpuprov::drivers {
namespace {

using gpuprov::sdk::DriverError;
using Poco::JSON::Object;
using std::chrono::milliseconds;

Object::Ptr Request(const std::string& text) { return json::ParseObject(text, "the request"); }

// The status and message of the DriverError `fn` throws; fails the test when it throws none.
template <typename Fn>
std::pair<gpuprov_type_status, std::string> ErrorOf(Fn&& fn) {
  try {
    fn();
  } catch (const DriverError& e) {
    return {e.status(), e.what()};
  }
  ADD_FAILURE() << "no DriverError";
  return {GPUPROV_STATUS_OK, ""};
}

TEST(DriverRequest, PortsAreReadInRequestOrder) {
  EXPECT_EQ(PortsOf(Request(R"({"open_ports":[6443,22,80]})"), "open_ports"),
            (std::vector<int>{6443, 22, 80}));
  EXPECT_TRUE(PortsOf(Request(R"({"open_ports":null})"), "open_ports").empty());
  EXPECT_TRUE(PortsOf(Request("{}"), "ports").empty());
}

TEST(DriverRequest, PortsOutOfRangeOrNotNumbersAreRefusedNamingTheField) {
  auto [status, message] = ErrorOf([] { PortsOf(Request(R"({"ports":[80,65536]})"), "ports"); });
  EXPECT_EQ(status, GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(message, "ports: 65536 is not a TCP port");
  auto [status0, message0] = ErrorOf([] { PortsOf(Request(R"({"ports":[0]})"), "ports"); });
  EXPECT_EQ(status0, GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(message0, "ports: 0 is not a TCP port");
  auto [status1, message1] =
      ErrorOf([] { PortsOf(Request(R"({"open_ports":["http"]})"), "open_ports"); });
  EXPECT_EQ(status1, GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(message1, "open_ports must be a list of port numbers");
  auto [status2, message2] = ErrorOf([] { PortsOf(Request(R"({"ports":80})"), "ports"); });
  EXPECT_EQ(status2, GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_NE(message2.find("\"ports\" must be an array"), std::string::npos) << message2;
}

TEST(DriverRequest, WithSshAddsPort22SortedWithoutRepeats) {
  EXPECT_EQ(WithSsh({6443, 80, 6443}), (std::vector<int>{22, 80, 6443}));
  EXPECT_EQ(WithSsh({22, 443}), (std::vector<int>{22, 443}));
  EXPECT_EQ(WithSsh({}), (std::vector<int>{22}));
}

TEST(DriverRequest, GpuCountDefaultsToOneAndNoGpuIsACpuVm) {
  std::optional<GpuRequest> g = ParseGpu(Request(R"({"gpu":{"type":"L4"}})"));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->type, "L4");
  EXPECT_EQ(g->count, 1);
  g = ParseGpu(Request(R"({"gpu":{"type":"H100","count":8}})"));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->type, "H100");
  EXPECT_EQ(g->count, 8);
  EXPECT_FALSE(ParseGpu(Request(R"({"gpu":null})")));
  EXPECT_FALSE(ParseGpu(Request("{}")));
}

TEST(DriverRequest, GpuWithoutTypeOrCountBelowOneIsRefused) {
  auto [status, message] = ErrorOf([] { ParseGpu(Request(R"({"gpu":{"count":1}})")); });
  EXPECT_EQ(status, GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(message, "gpu.type is empty");
  auto [status0, message0] =
      ErrorOf([] { ParseGpu(Request(R"({"gpu":{"type":"L4","count":0}})")); });
  EXPECT_EQ(status0, GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(message0, "gpu.count must be >= 1");
  auto [status1, message1] = ErrorOf([] { ParseGpu(Request(R"({"gpu":"L4"})")); });
  EXPECT_EQ(status1, GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_NE(message1.find("\"gpu\" must be an object"), std::string::npos) << message1;
}

TEST(DriverRequest, SshPublicKeyIsRequiredWithTheCloudsReason) {
  EXPECT_EQ(RequiredSshPublicKey(Request(R"({"ssh_public_key":"ssh-ed25519 AAAA x\n"})"), "w"),
            "ssh-ed25519 AAAA x\n");
  for (const char* text : {"{}", R"({"ssh_public_key":" \n"})"}) {
    auto [status, message] =
        ErrorOf([&] { RequiredSshPublicKey(Request(text), "the cloud logs in with it"); });
    EXPECT_EQ(status, GPUPROV_STATUS_INVALID_INPUT) << text;
    EXPECT_EQ(message, "ssh_public_key is required: the cloud logs in with it") << text;
  }
}

TEST(DriverRequest, VmReferencePrefersTheName) {
  EXPECT_EQ(VmReference(Request(R"({"id":"i-1","name":"web"})")), "named web");
  EXPECT_EQ(VmReference(Request(R"({"id":"i-1","name":""})")), "with id i-1");
  EXPECT_EQ(VmReference(Request(R"({"id":"i-1"})")), "with id i-1");
}

TEST(DriverRequest, RetryTableOverridesOnlyWhatItNames) {
  const RetryPolicy defaults;
  RetryPolicy none = RetryPolicyFrom(Request("{}"));
  EXPECT_EQ(none.max_attempts, defaults.max_attempts);
  EXPECT_EQ(none.total_budget, defaults.total_budget);
  RetryPolicy p = RetryPolicyFrom(Request(
      R"({"retry":{"max_attempts":2,"base_delay_ms":5,"max_delay_ms":50,"max_retry_after_ms":70,)"
      R"("total_budget_ms":900,"attempt_timeout_ms":300}})"));
  EXPECT_EQ(p.max_attempts, 2);
  EXPECT_EQ(p.base_delay, milliseconds(5));
  EXPECT_EQ(p.max_delay, milliseconds(50));
  EXPECT_EQ(p.max_retry_after, milliseconds(70));
  EXPECT_EQ(p.total_budget, milliseconds(900));
  EXPECT_EQ(p.attempt_timeout, milliseconds(300));
  RetryPolicy some = RetryPolicyFrom(Request(R"({"retry":{"max_attempts":1}})"));
  EXPECT_EQ(some.max_attempts, 1);
  EXPECT_EQ(some.base_delay, defaults.base_delay);
  EXPECT_EQ(some.attempt_timeout, defaults.attempt_timeout);
  auto [status, message] =
      ErrorOf([] { RetryPolicyFrom(Request(R"({"retry":{"max_attempts":"x"}})")); });
  EXPECT_EQ(status, GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_NE(message.find("max_attempts"), std::string::npos) << message;
}

TEST(DriverRequest, VmResultKeepsTheOrderOfVmAndExisting) {
  Object::Ptr vm = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  vm->set("id", "i-1");
  vm->set("ports", PortMap({22, 6443, 80}));
  EXPECT_EQ(VmResult(vm), R"({"vm":{"id":"i-1","ports":{"22":22,"6443":6443,"80":80}}})");
  EXPECT_EQ(VmResult(vm, true),
            R"({"vm":{"id":"i-1","ports":{"22":22,"6443":6443,"80":80}},"existing":true})");
  EXPECT_EQ(VmResult(vm, false),
            R"({"vm":{"id":"i-1","ports":{"22":22,"6443":6443,"80":80}},"existing":false})");
}

}  // namespace
}  // namespace gpuprov::drivers

namespace gpuprov::drivers {
namespace {

TEST(DriverRequest, PortsOfRangesExpandsFirewallSpecs) {
  EXPECT_EQ(PortsOfRanges({"22", "6443-6445", "bad", "80"}),
            (std::set<int>{22, 80, 6443, 6444, 6445}));
  EXPECT_EQ(PortsOfRanges({"all"}).size(), 65535u);
  EXPECT_EQ(PortsOfRanges({"0"}).size(), 65535u);
}

TEST(DriverRequest, OfferJsonWritesNullForNoGpu) {
  EXPECT_EQ(json::Stringify(OfferJson({"e2-standard-4", "", 0, "us-central1", 0.13, ""})),
            R"({"instance_type":"e2-standard-4","gpu_type":null,"gpu_count":0,)"
            R"("region":"us-central1","price_per_hour":0.13})");
  EXPECT_EQ(json::Stringify(OfferJson({"g6.xlarge", "L4", 1, "us-east-1", 0.8, "ami-1"})),
            R"({"instance_type":"g6.xlarge","gpu_type":"L4","gpu_count":1,)"
            R"("region":"us-east-1","price_per_hour":0.8,"image":"ami-1"})");
}

TEST(DriverRequest, OfferJsonWritesStockAndPriceSourceOnlyWhenKnown) {
  EXPECT_EQ(json::Stringify(OfferJson({"gpu_1x_h100", "H100", 1, "us-east-1", 2.49, "", true, "live"})),
            R"({"instance_type":"gpu_1x_h100","gpu_type":"H100","gpu_count":1,)"
            R"("region":"us-east-1","price_per_hour":2.49,"in_stock":true,"price_source":"live"})");
  EXPECT_EQ(json::Stringify(OfferJson({"n3-H100x1", "H100", 1, "CANADA-1", 0, "", false, "live"})),
            R"({"instance_type":"n3-H100x1","gpu_type":"H100","gpu_count":1,)"
            R"("region":"CANADA-1","price_per_hour":0,"in_stock":false})");
  // A table price says the day its table was written; a live price has no such day.
  EXPECT_EQ(json::Stringify(OfferJson({"g6.xlarge", "L4", 1, "us-east-1", 0.8, "", std::nullopt,
                                       "table", "2026-12-02"})),
            R"({"instance_type":"g6.xlarge","gpu_type":"L4","gpu_count":1,)"
            R"("region":"us-east-1","price_per_hour":0.8,"price_source":"table","price_date":"2026-12-02"})");
  EXPECT_EQ(json::Stringify(OfferJson({"x", "L4", 1, "r", 0.8, "", std::nullopt, "live", "2026-12-02"})),
            R"({"instance_type":"x","gpu_type":"L4","gpu_count":1,"region":"r","price_per_hour":0.8,)"
            R"("price_source":"live"})");
}

}  // namespace
}  // namespace gpuprov::drivers

namespace gpuprov::drivers {
namespace {

TEST(DriverRequest, SpotIsAskedOnlyByTrueAndItsPriceAndTheVmsSpotAreWrittenOnlyWhenSet) {
  EXPECT_TRUE(SpotRequested(json::ParseObject(R"({"spot": true})", "t")));
  EXPECT_FALSE(SpotRequested(json::ParseObject(R"({"spot": false})", "t")));
  EXPECT_FALSE(SpotRequested(json::ParseObject(R"({})", "t")));
  EXPECT_THROW(SpotRequested(json::ParseObject(R"({"spot": "yes"})", "t")), DriverError);
  OfferFields offer;
  offer.instance_type = "g6.xlarge";
  offer.price_per_hour = 0.8;
  EXPECT_FALSE(OfferJson(offer)->has("spot_price_per_hour"));
  offer.spot_price_per_hour = 0.3;
  EXPECT_DOUBLE_EQ(OfferJson(offer)->getValue<double>("spot_price_per_hour"), 0.3);
  VmFields vm;
  vm.state = "preempted";
  EXPECT_FALSE(VmJson(vm)->has("spot"));
  vm.spot = true;
  EXPECT_TRUE(VmJson(vm)->getValue<bool>("spot"));
}

TEST(DriverRequest, OffersRequestFallsBackToTheDefaultRegion) {
  OffersQuery q = ParseOffersRequest(R"({"gpu": {"type": "L4"}})", "nyc2");
  ASSERT_TRUE(q.gpu.has_value());
  EXPECT_EQ(q.gpu->type, "L4");
  EXPECT_EQ(q.region, "nyc2");
  EXPECT_EQ(ParseOffersRequest(R"({"gpu": null, "region": "ams3"})", "nyc2").region, "ams3");
}

TEST(DriverRequest, IdOrNameIsRequired) {
  EXPECT_EQ(RequireIdOrName(json::ParseObject(R"({"name": "x"})", "r")).name, "x");
  EXPECT_THROW(RequireIdOrName(json::ParseObject("{}", "r")), gpuprov::sdk::DriverError);
}

TEST(DriverRequest, Results) {
  EXPECT_EQ(DeletedResult(true), R"({"deleted":true})");
  EXPECT_EQ(VmsResult(new Poco::JSON::Array()), R"({"vms":[]})");
  EXPECT_EQ(OffersResult(new Poco::JSON::Array()), R"({"offers":[]})");
  EXPECT_EQ(OffersResult(new Poco::JSON::Array(), PoweredOffCost::kDisk),
            R"({"offers":[],"powered_off_cost":"disk"})");
  EXPECT_STREQ(PoweredOffCostName(PoweredOffCost::kNone), "none");
  EXPECT_STREQ(PoweredOffCostName(PoweredOffCost::kFull), "full");
}

}  // namespace
}  // namespace gpuprov::drivers

namespace gpuprov::drivers {
namespace {

TEST(DriverRequest, ResourcesResultKeepsOrderAndLeavesOutAnUnknownPrice) {
  ResourceFields vm = Resource("vm", "42", "demo");
  vm.vm_names = {"demo"};
  vm.price_per_hour = 0.5;
  ResourceFields key = Resource("ssh_key", "7", "gpuprov-ab");
  const std::string text = ResourcesResult({vm, key});
  EXPECT_EQ(text,
            R"({"resources":[{"kind":"vm","id":"42","name":"demo","vm_names":["demo"],"region":"",)"
            R"("created_at":"","price_per_hour":0.5},{"kind":"ssh_key","id":"7","name":"gpuprov-ab",)"
            R"("vm_names":[],"region":"","created_at":""}]})");
}

TEST(DriverRequest, ResourcesResultNamesAClusterNodesClusterAndRole) {
  ResourceFields vm = Resource("vm", "42", "train-agent-1");
  vm.vm_names = {"train-agent-1"};
  vm.cluster = "train";
  vm.role = "agent";
  ResourceFields net = Resource("cluster_network", "v1", "gpuprov-train");
  net.cluster = "train";
  EXPECT_EQ(ResourcesResult({vm, net}),
            R"({"resources":[{"kind":"vm","id":"42","name":"train-agent-1",)"
            R"("vm_names":["train-agent-1"],"region":"","created_at":"","cluster":"train",)"
            R"("role":"agent"},{"kind":"cluster_network","id":"v1","name":"gpuprov-train",)"
            R"("vm_names":[],"region":"","created_at":"","cluster":"train"}]})");
}

TEST(DriverRequest, ResourceRequestNamesAnUnknownKindOrAMissingId) {
  const ResourceRef ref = ParseResourceRequest(R"({"kind":"vm","id":"42"})", {"vm", "ssh_key"});
  EXPECT_EQ(ref.kind, "vm");
  EXPECT_EQ(ref.id, "42");
  auto [status, message] =
      ErrorOf([] { ParseResourceRequest(R"({"kind":"disk","id":"1"})", {"vm", "ssh_key"}); });
  EXPECT_EQ(status, GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_NE(message.find("kind 'disk' is not one this driver lists (ssh_key, vm)"),
            std::string::npos)
      << message;
  std::tie(status, message) = ErrorOf([] { ParseResourceRequest(R"({"kind":"vm"})", {"vm"}); });
  EXPECT_EQ(status, GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_NE(message.find("id is missing"), std::string::npos) << message;
}

TEST(DriverRequest, SettingsNormaliseTheEndpoint) {
  DriverSettings s = ParseSettings(R"({"endpoint": " https://h.example/api/v1/ ", "config": {"a": 1}})",
                                   "https://default.example", "/api/v1");
  EXPECT_EQ(s.endpoint, "https://h.example");
  EXPECT_EQ(json::Int(s.config, "a"), 1);
  DriverSettings d = ParseSettings("{}", "https://default.example");
  EXPECT_EQ(d.endpoint, "https://default.example");
  ASSERT_TRUE(d.config);
  EXPECT_EQ(d.config->size(), 0u);
  EXPECT_EQ(d.pacer_dir, "");  // an older host sends none: pacing stays process-wide
  DriverSettings p = ParseSettings(R"({"endpoint": "", "config": {}, "pacer_dir": "/h/pacer"})");
  EXPECT_EQ(p.pacer_dir, "/h/pacer");
}

}  // namespace
}  // namespace gpuprov::drivers

namespace gpuprov::drivers {
namespace {

TEST(DriverRequest, CreateRequestChecksNameAndUserData) {
  const VmNameRules rules{.what = "a test name", .max_length = 10};
  CreateBasics c = ParseCreateRequest(R"({"name": "vm-1", "user_data": "#!/bin/sh"})", rules, 20,
                                      "TestCloud");
  EXPECT_EQ(c.name, "vm-1");
  EXPECT_EQ(c.user_data, "#!/bin/sh");
  EXPECT_THROW(ParseCreateRequest(R"({"name": "-bad"})", rules, 20, "TestCloud"),
               gpuprov::sdk::DriverError);
  EXPECT_THROW(ParseCreateRequest(R"({"name": "ok", "user_data": "0123456789012345678901"})",
                                  rules, 20, "TestCloud"),
               gpuprov::sdk::DriverError);
}

TEST(SourcesOf, ReadsAllowFromAndTheNarrowedPorts) {
  PortSources none = SourcesOf(json::ParseObject(R"({"open_ports":[22,6443]})", "req"));
  EXPECT_FALSE(none.Narrows());
  EXPECT_EQ(none.Of(6443, true), (std::vector<std::string>{"0.0.0.0/0", "::/0"}));
  EXPECT_EQ(none.Of(6443, false), std::vector<std::string>{"0.0.0.0/0"});

  PortSources s = SourcesOf(json::ParseObject(
      R"({"allow_from":["10.0.0.0/8","2001:db8::/32"],"allow_from_ports":[6443,443]})", "req"));
  EXPECT_TRUE(s.Narrows());
  EXPECT_TRUE(s.IsNarrowed(6443));
  EXPECT_FALSE(s.IsNarrowed(22));
  EXPECT_EQ(s.Of(6443, true), (std::vector<std::string>{"10.0.0.0/8", "2001:db8::/32"}));
  EXPECT_EQ(s.Of(6443, false), std::vector<std::string>{"10.0.0.0/8"});
  EXPECT_EQ(s.Of(22, true), (std::vector<std::string>{"0.0.0.0/0", "::/0"}));
}

TEST(SourcesOf, RefusesWhatIsNotACidrAndIpv6WhereTheCloudTakesIpv4Only) {
  for (const char* bad : {R"(["10.0.0.0"])", R"(["10.0.0.0/40"])", R"([7])", R"(["any"])"}) {
    try {
      SourcesOf(json::ParseObject(std::string(R"({"allow_from":)") + bad +
                                      R"(,"allow_from_ports":[6443]})",
                                  "req"));
      ADD_FAILURE() << bad;
    } catch (const DriverError& e) {
      EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
      EXPECT_NE(std::string(e.what()).find("allow_from[0]"), std::string::npos) << e.what();
    }
  }
  try {
    SourcesOf(json::ParseObject(R"({"allow_from":["2001:db8::/32"],"allow_from_ports":[6443]})",
                                "req"),
              /*ipv6_allowed=*/false);
    ADD_FAILURE() << "IPv6 passed";
  } catch (const DriverError& e) {
    EXPECT_NE(std::string(e.what()).find("IPv4 sources only"), std::string::npos) << e.what();
  }
}

TEST(ConfirmSources, EchoesTheListOnlyWhenItNarrows) {
  PortSources s;
  EXPECT_EQ(ConfirmSources("{}", s), "{}");
  s.allow_from = {"10.0.0.0/8"};
  s.narrowed = {6443};
  EXPECT_EQ(ConfirmSources("{}", s), R"({"allow_from":["10.0.0.0/8"]})");
}

}  // namespace
}  // namespace gpuprov::drivers

namespace gpuprov::drivers {
namespace {

TEST(VmJson, WritesTheProtocolFieldsInOrderThenTheCloudsOwn) {
  VmFields f;
  f.id = "i-1";
  f.name = "vm1";
  f.state = "running";
  f.public_ip = "203.0.113.7";
  f.ssh_user = "ubuntu";
  f.region = "us-east-1";
  f.instance_type = "gpu_1x_a10";
  f.image = "ubuntu-22.04";
  f.gpus = "A10:1";
  f.ports = {22, 6443};
  f.tags = std::vector<std::pair<std::string, std::string>>{{"gpuprov", "1"}, {"team", "ml"}};
  f.extra = {{"cloud_status", Poco::Dynamic::Var(std::string("active"))}};
  EXPECT_EQ(json::Stringify(VmJson(f)),
            R"({"id":"i-1","name":"vm1","state":"running","public_ip":"203.0.113.7",)"
            R"("ssh_port":22,"ssh_user":"ubuntu","region":"us-east-1",)"
            R"("instance_type":"gpu_1x_a10","image":"ubuntu-22.04","gpus":"A10:1",)"
            R"("created_at":"","message":"","ports":{"22":22,"6443":6443},)"
            R"("tags":{"gpuprov":"1","team":"ml"},"cloud_status":"active"})");
}

TEST(VmJson, PublishedPortsAreWrittenWhereTheyAreReached) {
  VmFields f;
  f.published_ports = std::vector<std::pair<int, int>>{{22, 32768}, {6443, 32769}};
  EXPECT_EQ(json::Stringify(json::Obj(VmJson(f), "ports")), R"({"22":32768,"6443":32769})");
  f.published_ports.emplace();
  EXPECT_EQ(json::Stringify(json::Obj(VmJson(f), "ports")), "{}");
}

TEST(VmJson, NoTagsWithoutTags) {
  VmFields f;
  EXPECT_FALSE(VmJson(f)->has("tags"));
}

TEST(KeyValueTags, ReadsKeyValueObjectsInOrder) {
  Poco::JSON::Object::Ptr in = json::ParseObject(
      R"({"tags": [{"key": "b", "value": "2"}, 7, {"key": "a", "value": "1"}]})", "test");
  EXPECT_EQ(KeyValueTags(json::Arr(in, "tags")),
            (std::vector<std::pair<std::string, std::string>>{{"b", "2"}, {"a", "1"}}));
  EXPECT_TRUE(KeyValueTags(nullptr).empty());
}

}  // namespace
}  // namespace gpuprov::drivers

namespace gpuprov::drivers {
namespace {

TEST(ParseCreateRequest, WithoutAUserDataLimitTheNameIsStillChecked) {
  const VmNameRules rules{.what = "a test VM name", .max_length = 10};
  const CreateBasics c =
      ParseCreateRequest(R"({"name": "vm-1", "user_data": "anything at all, any size"})", rules);
  EXPECT_EQ(c.name, "vm-1");
  EXPECT_EQ(c.user_data, "anything at all, any size");
  EXPECT_THROW(ParseCreateRequest(R"({"name": "-bad"})", rules), sdk::DriverError);
  EXPECT_THROW(ParseCreateRequest("not json", rules), sdk::DriverError);
}

}  // namespace
}  // namespace gpuprov::drivers

namespace gpuprov::drivers {
namespace {

TEST(GetVmResult, TheFoundVmOrNotFoundNamingTheRequest) {
  const auto find = [](const Poco::JSON::Object::Ptr& request) -> Poco::JSON::Object::Ptr {
    if (json::Str(request, "name") != "a") return nullptr;
    VmFields f;
    f.name = "a";
    return VmJson(f);
  };
  EXPECT_NE(GetVmResult(R"({"name": "a"})", "gpuprov VM", " on Test", find).find(R"("name":"a")"),
            std::string::npos);
  try {
    GetVmResult(R"({"id": "i-9"})", "gpuprov VM", " on Test", find);
    FAIL() << "no error";
  } catch (const sdk::DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_NOT_FOUND);
    EXPECT_STREQ(e.what(), "no gpuprov VM with id i-9 on Test");
  }
}

}  // namespace
}  // namespace gpuprov::drivers
