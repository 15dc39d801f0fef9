// SPDX-License-Identifier: Apache-2.0
#include "lambda_rules.h"

#include <gtest/gtest.h>

#include <fstream>

#include "driver_test_util.h"
#include "gpuprov/sdk.hpp"
#include "json_util.h"

namespace gpuprov::lambda {
namespace {

using drivers::testing::ParseJson;
using drivers::testing::ScopedEnv;
using drivers::testing::ScopedTempDir;
using Poco::JSON::Array;
using Poco::JSON::Object;

constexpr const char* kKeyA =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF test@gpuprov";

Array::Ptr Rules(const std::string& text) {
  return ParseJson(R"({"r":)" + text + "}")->getArray("r");
}

std::string Text(const Array::Ptr& a) {
  std::ostringstream s;
  a->stringify(s);
  return s.str();
}

TEST(LambdaApiKey, EnvironmentThenTheSkyPilotFile) {
  ScopedTempDir home;
  ScopedEnv h("HOME", home.path().c_str());
  ScopedEnv none("LAMBDA_API_KEY", nullptr);
  EXPECT_FALSE(ResolveApiKey(nullptr));
  std::filesystem::create_directories(home.path() / ".lambda_cloud");
  std::ofstream(home.path() / ".lambda_cloud" / "lambda_keys") << "# mine\napi_key = secret_from_file\n";
  auto from_file = ResolveApiKey(nullptr);
  ASSERT_TRUE(from_file);
  EXPECT_EQ(from_file->value, "secret_from_file");
  EXPECT_EQ(from_file->origin, (home.path() / ".lambda_cloud" / "lambda_keys").string());
  ScopedEnv env("LAMBDA_API_KEY", " secret_from_env\n");
  auto from_env = ResolveApiKey(nullptr);
  ASSERT_TRUE(from_env);
  EXPECT_EQ(from_env->value, "secret_from_env");
  EXPECT_EQ(from_env->origin, "$LAMBDA_API_KEY");
  ScopedEnv named("MY_LAMBDA_KEY", "secret_named");
  auto from_named = ResolveApiKey(ParseJson(R"({"token_env":"MY_LAMBDA_KEY"})"));
  ASSERT_TRUE(from_named);
  EXPECT_EQ(from_named->value, "secret_named");
}

TEST(LambdaApiKey, KeysFileText) {
  EXPECT_EQ(ApiKeyFromKeysText("api_key = abc\n"), "abc");
  EXPECT_EQ(ApiKeyFromKeysText("api_key=abc"), "abc");
  EXPECT_FALSE(ApiKeyFromKeysText("token = abc\n"));
  EXPECT_FALSE(ApiKeyFromKeysText("api_key =   \n"));
}

TEST(LambdaErrors, CodesDecideTheStatus) {
  EXPECT_EQ(StatusOf(400, kCapacityCode), GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(StatusOf(401, "global/invalid-api-key"), GPUPROV_STATUS_AUTH);
  EXPECT_EQ(StatusOf(403, "global/account-inactive"), GPUPROV_STATUS_AUTH);
  EXPECT_EQ(StatusOf(400, "global/invalid-parameters"), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(StatusOf(404, "global/object-does-not-exist"), GPUPROV_STATUS_NOT_FOUND);
  EXPECT_EQ(StatusOf(400, "global/quota-exceeded"), GPUPROV_STATUS_QUOTA);
  EXPECT_EQ(StatusOf(503, "provider/internal-unavailable"), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(StatusOf(409, "provider/other"), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(StatusOf(429, ""), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(StatusOf(418, "something/new"), GPUPROV_STATUS_INVALID_INPUT);
  // L-SPEC deleteFirewallRuleset 400 and launchInstance 403 (L1, L6).
  EXPECT_EQ(StatusOf(400, "firewall-rulesets/firewall-ruleset-in-use"), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(StatusOf(403, "global/invalid-address"), GPUPROV_STATUS_FAILED);
  // L-SPEC firewallRulesList: the account-wide rules do not apply in us-south-1 (L2).
  EXPECT_FALSE(AccountRulesApply("us-south-1"));
  EXPECT_TRUE(AccountRulesApply("us-east-1"));
}

TEST(LambdaErrors, ErrorObjectText) {
  ApiError e = ParseApiError(
      R"({"error":{"code":"global/invalid-api-key","message":"API key was invalid.","suggestion":"Check it."}})");
  EXPECT_EQ(e.code, "global/invalid-api-key");
  EXPECT_EQ(e.Text(), "global/invalid-api-key: API key was invalid. (Check it.)");
  EXPECT_EQ(ParseApiError("<html>bad gateway</html>").Text(), "<html>bad gateway</html>");
  EXPECT_EQ(ParseApiError("").Text(), "no error message");
}

TEST(LambdaStates, MapToTheProtocolsFiveWords) {
  EXPECT_EQ(StateOf("booting", false).state, "pending");
  EXPECT_EQ(StateOf("active", true).state, "running");
  EXPECT_EQ(StateOf("active", false).state, "pending");
  EXPECT_EQ(StateOf("active", false).message, "active, waiting for its IP");
  EXPECT_EQ(StateOf("unhealthy", true).state, "error");
  EXPECT_EQ(StateOf("terminating", true).state, "terminated");
  EXPECT_EQ(StateOf("terminated", false).state, "terminated");
  EXPECT_EQ(StateOf("preempted", false).state, "terminated");
  EXPECT_EQ(StateOf("weird", false).state, "error");
  EXPECT_TRUE(IsGoneStatus("terminating"));
  EXPECT_FALSE(IsGoneStatus("booting"));
}

TEST(LambdaNames, KeyNameIsStableAndIgnoresTheComment) {
  const std::string a = KeyName(kKeyA);
  EXPECT_EQ(a.rfind("gpuprov-", 0), 0u);
  EXPECT_EQ(a.size(), 8u + 16u);
  std::string other_comment = kKeyA;
  other_comment.replace(other_comment.find("test@gpuprov"), 12, "laptop");
  EXPECT_EQ(KeyName(other_comment), a);
  EXPECT_TRUE(SameKey(kKeyA, other_comment + "\n"));
  EXPECT_THROW(KeyName("not a key"), gpuprov::sdk::DriverError);
  EXPECT_THROW(KeyName("ssh-ed25519 AAAAB3NzaC1yc2E="), gpuprov::sdk::DriverError);
}

TEST(LambdaTags, GpuprovsTagsFirstAndUserKeysFitted) {
  Array::Ptr tags = LaunchTags("demo", {{"Team Name", "ml"}, {"9lives", "x"},
                                        {"lambda-ai-x", "no"}, {"Cost/Center", std::string(200, 'v')}});
  const std::string t = Text(tags);
  EXPECT_EQ(t.find(R"({"key":"gpuprov","value":"1"})"), 1u) << t;
  EXPECT_NE(t.find(R"({"key":"gpuprov-name","value":"demo"})"), std::string::npos) << t;
  EXPECT_NE(t.find(R"({"key":"team-name","value":"ml"})"), std::string::npos) << t;
  EXPECT_NE(t.find(R"({"key":"t-9lives","value":"x"})"), std::string::npos) << t;
  EXPECT_EQ(t.find("lambda-ai-x"), std::string::npos) << t;
  EXPECT_NE(t.find(R"("key":"cost-center","value":")" + std::string(128, 'v') + "\""),
            std::string::npos) << t;
  Object::Ptr instance = new Object();
  instance->set("tags", tags);
  EXPECT_EQ(TagValue(instance, "gpuprov-name"), "demo");
  EXPECT_EQ(TagValue(instance, "absent"), "");
}

TEST(LambdaTags, AClusterNodeIsTaggedWithItsClusterAndRoleBeforeTheUsersTags) {
  drivers::ClusterRequest cluster{"train", "agent", {}};
  Array::Ptr tags = LaunchTags("train-agent-1",
                               {{"gpuprov-cluster", "other"}, {"team", "ml"}}, cluster);
  const std::string t = Text(tags);
  EXPECT_EQ(t.find(R"({"key":"gpuprov-cluster","value":"train"},{"key":"gpuprov-role","value":"agent"})"),
            t.find(R"({"key":"gpuprov-cluster")")) << t;
  EXPECT_EQ(t.find("other"), std::string::npos) << t;  // the user's same key is dropped
  EXPECT_NE(t.find(R"({"key":"team","value":"ml"})"), std::string::npos) << t;
  Object::Ptr instance = new Object();
  instance->set("tags", tags);
  EXPECT_EQ(TagValue(instance, "gpuprov-cluster"), "train");
  EXPECT_EQ(TagValue(instance, "gpuprov-role"), "agent");
  // A plain VM has neither.
  EXPECT_EQ(Text(LaunchTags("plain", {})).find("gpuprov-cluster"), std::string::npos);
}

const char* kUserRules = R"([
  {"protocol":"tcp","port_range":[22,22],"source_network":"0.0.0.0/0","description":"Allow SSH"},
  {"protocol":"icmp","source_network":"0.0.0.0/0","description":"Allow ICMP"},
  {"protocol":"tcp","port_range":[8888,8888],"source_network":"10.0.0.0/8","description":"my jupyter"}])";

TEST(LambdaAccountRules, AddingKeepsTheUsersRulesAndSharesOneRulePerPort) {
  bool changed = false;
  Array::Ptr one = AddToAccountRules(Rules(kUserRules), "a", {22, 6443}, &changed);
  EXPECT_TRUE(changed);
  ASSERT_EQ(one->size(), 5u) << Text(one);
  const std::string t1 = Text(one);
  EXPECT_NE(t1.find("my jupyter"), std::string::npos);
  EXPECT_NE(t1.find("Allow ICMP"), std::string::npos);
  EXPECT_NE(t1.find(R"("port_range":[6443,6443],"source_network":"0.0.0.0/0","description":"gpuprov:a")"),
            std::string::npos) << t1;
  Array::Ptr two = AddToAccountRules(one, "b", {22, 6443, 443}, &changed);
  EXPECT_TRUE(changed);
  ASSERT_EQ(two->size(), 6u) << Text(two);
  EXPECT_NE(Text(two).find(R"("description":"gpuprov:a,b")"), std::string::npos) << Text(two);
  Array::Ptr again = AddToAccountRules(two, "b", {22, 6443}, &changed);
  EXPECT_FALSE(changed);
  EXPECT_EQ(Text(again), Text(two));
  EXPECT_EQ(OpenTcpPorts(two), (std::set<int>{22, 443, 6443}));
}

// L-SPEC FirewallRule.description is at most 128 characters: a port whose gpuprov rule is
// full gets a second rule, and removal still finds every VM.
TEST(LambdaAccountRules, ADescriptionNeverPassesTheSpecs128Characters) {
  bool changed = false;
  Array::Ptr rules = Rules(kUserRules);
  std::vector<std::string> vms;
  for (char c : std::string("abcd")) {
    vms.push_back(std::string(50, c));
    rules = AddToAccountRules(rules, vms.back(), {6443}, &changed);
    EXPECT_TRUE(changed);
  }
  int ours = 0;
  for (size_t i = 0; i < rules->size(); ++i) {
    const std::string d = rules->getObject(static_cast<unsigned>(i))->getValue<std::string>("description");
    EXPECT_LE(d.size(), 128u) << d;
    ours += d.rfind("gpuprov:", 0) == 0;
  }
  EXPECT_EQ(ours, 2) << Text(rules);
  EXPECT_EQ(AccountRuleVms(rules), vms);
  AddToAccountRules(rules, vms[2], {6443}, &changed);
  EXPECT_FALSE(changed);
  Array::Ptr left = RemoveFromAccountRules(rules, vms[0], {vms[1], vms[2], vms[3]}, &changed);
  EXPECT_EQ(AccountRuleVms(left), (std::vector<std::string>{vms[1], vms[2], vms[3]}));
}

TEST(LambdaAccountRules, RemovingDropsOnlyWhatNoOtherVmNeeds) {
  bool changed = false;
  Array::Ptr rules = AddToAccountRules(Rules(kUserRules), "a", {22, 6443, 80}, &changed);
  rules = AddToAccountRules(rules, "b", {22, 6443}, &changed);
  rules = AddToAccountRules(rules, "ghost", {9000}, &changed);
  Array::Ptr without_a = RemoveFromAccountRules(rules, "a", {"b"}, &changed);
  EXPECT_TRUE(changed);
  const std::string t = Text(without_a);
  EXPECT_EQ(t.find("[80,80]"), std::string::npos) << t;    // only a needed it
  EXPECT_EQ(t.find("[9000,9000]"), std::string::npos) << t;  // its VM is gone
  EXPECT_NE(t.find(R"([6443,6443],"source_network":"0.0.0.0/0","description":"gpuprov:b")"),
            std::string::npos) << t;
  Array::Ptr none = RemoveFromAccountRules(without_a, "b", {}, &changed);
  bool unchanged = true;
  EXPECT_EQ(Text(none), Text(RemoveFromAccountRules(Rules(kUserRules), "b", {}, &unchanged)));
  EXPECT_FALSE(unchanged);
  EXPECT_EQ(none->size(), 3u);
  RemoveFromAccountRules(none, "b", {}, &changed);
  EXPECT_FALSE(changed);
}

TEST(LambdaRulesets, OneRulePerPortNamedForTheVm) {
  Array::Ptr r = RulesetRules("demo", {22, 6443});
  EXPECT_EQ(Text(r), R"([{"protocol":"tcp","port_range":[22,22],"source_network":"0.0.0.0/0",)"
                     R"("description":"gpuprov demo: tcp 22"},{"protocol":"tcp","port_range":[6443,6443],)"
                     R"("source_network":"0.0.0.0/0","description":"gpuprov demo: tcp 6443"}])");
  EXPECT_EQ(OpenTcpPorts(Rules(R"([{"protocol":"all","source_network":"0.0.0.0/0","description":""}])")),
            (std::set<int>{0}));
}

TEST(LambdaRulesets, NarrowedPortsGetOneRulePerSourceAndOpenPortsReplacesThem) {
  drivers::PortSources s;
  s.allow_from = {"10.0.0.0/8", "192.0.2.0/24"};
  s.narrowed = {6443};
  Array::Ptr made = RulesetRules("demo", {22, 6443}, s);
  ASSERT_EQ(made->size(), 3u);
  EXPECT_EQ(Text(made),
            R"([{"protocol":"tcp","port_range":[22,22],"source_network":"0.0.0.0/0",)"
            R"("description":"gpuprov demo: tcp 22"},{"protocol":"tcp","port_range":[6443,6443],)"
            R"("source_network":"10.0.0.0/8","description":"gpuprov demo: tcp 6443"},)"
            R"({"protocol":"tcp","port_range":[6443,6443],"source_network":"192.0.2.0/24",)"
            R"("description":"gpuprov demo: tcp 6443"}])");
  EXPECT_EQ(OpenTcpPorts(made), (std::set<int>{22}));

  // Another list: the dropped source goes, the new one comes, 22 and other rules stay.
  drivers::PortSources next;
  next.allow_from = {"192.0.2.0/24", "198.51.100.0/24"};
  next.narrowed = {6443};
  made->add(TcpRule(8888, "mine"));
  bool changed = false;
  Array::Ptr after = OpenInRuleset(made, "demo", {22, 6443}, next, /*exact=*/true, &changed);
  EXPECT_TRUE(changed);
  const std::string t = Text(after);
  EXPECT_EQ(t.find("10.0.0.0/8"), std::string::npos) << t;
  EXPECT_NE(t.find("198.51.100.0/24"), std::string::npos) << t;
  EXPECT_NE(t.find("[8888,8888]"), std::string::npos) << t;
  EXPECT_EQ(after->size(), 4u) << t;
  OpenInRuleset(after, "demo", {22, 6443}, next, /*exact=*/true, &changed);
  EXPECT_FALSE(changed);

  // A create that finds the VM: a port with a rule from any source is left as it is; one
  // without gets rules; nothing is removed.
  Array::Ptr kept = OpenInRuleset(after, "demo", {22, 80, 6443}, {}, /*exact=*/false, &changed);
  EXPECT_TRUE(changed);
  EXPECT_EQ(kept->size(), 5u) << Text(kept);
  EXPECT_EQ(OpenTcpPorts(kept), (std::set<int>{22, 80, 8888}));

  // Widening to everyone: the narrowed port's sources are replaced by 0.0.0.0/0.
  drivers::PortSources everyone;
  everyone.allow_from = {"0.0.0.0/0"};
  everyone.narrowed = {6443};
  Array::Ptr wide = OpenInRuleset(after, "demo", {22, 6443}, everyone, /*exact=*/true, &changed);
  EXPECT_EQ(OpenTcpPorts(wide), (std::set<int>{22, 6443, 8888}));
  EXPECT_EQ(wide->size(), 3u) << Text(wide);
}

TEST(LambdaRulesets, RuleCountAndWiderAccountRules) {
  drivers::PortSources s;
  s.allow_from = {"10.0.0.0/8"};
  s.narrowed = {22, 6443};
  EXPECT_NO_THROW(CheckRuleCount(RulesetRules("demo", {22, 6443}, s), s));
  Array::Ptr many = new Array();
  for (int i = 0; i < 21; ++i) many->add(TcpRule(1000 + i, "x"));
  try {
    CheckRuleCount(many, s);
    ADD_FAILURE() << "21 rules passed";
  } catch (const sdk::DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
    EXPECT_NE(std::string(e.what()).find("allow_from"), std::string::npos) << e.what();
  }
  // Lambda's default account rules open 22 to everyone; a rule from an allowed source does not
  // count, nor one of a port not narrowed.
  Array::Ptr account = Rules(
      R"([{"protocol":"tcp","port_range":[22,22],"source_network":"0.0.0.0/0","description":"Allow SSH"},)"
      R"({"protocol":"icmp","source_network":"0.0.0.0/0","description":"Allow ICMP"},)"
      R"({"protocol":"tcp","port_range":[6443,6443],"source_network":"10.0.0.0/8","description":""},)"
      R"({"protocol":"tcp","port_range":[80,80],"source_network":"0.0.0.0/0","description":""}])");
  EXPECT_EQ(PortsWiderThan(account, s), (std::vector<int>{22}));
  s.narrowed = {6443};
  EXPECT_TRUE(PortsWiderThan(account, s).empty());
}

}  // namespace
}  // namespace gpuprov::lambda
