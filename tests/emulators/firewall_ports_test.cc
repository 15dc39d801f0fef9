// SPDX-License-Identifier: Apache-2.0
//
// The per-cloud "which ports can the test host reach" functions and the
// request-shape checker the Lambda and Hyperstack emulators share.
#include <gtest/gtest.h>

#include "firewall_ports.h"
#include "request_shape.h"

namespace gpuprov::emulator {
namespace {

JsonArray Rules(const std::string& json) {
  JsonObject o = ParseObject("{\"r\":" + json + "}");
  return GetArray(o, "r");
}

TEST(CidrContains, MatchesPrefixesAndRejectsGarbage) {
  EXPECT_TRUE(CidrContains("0.0.0.0/0", "127.0.0.1"));
  EXPECT_TRUE(CidrContains("127.0.0.0/8", "127.0.0.1"));
  EXPECT_TRUE(CidrContains("127.0.0.1/32", "127.0.0.1"));
  EXPECT_TRUE(CidrContains("127.0.0.1", "127.0.0.1"));
  EXPECT_FALSE(CidrContains("10.0.0.0/8", "127.0.0.1"));
  EXPECT_FALSE(CidrContains("127.0.0.2/32", "127.0.0.1"));
  EXPECT_FALSE(CidrContains("127.0.0.0/33", "127.0.0.1"));
  EXPECT_FALSE(CidrContains("127.0.0.0/x", "127.0.0.1"));
  EXPECT_FALSE(CidrContains("not-an-address/8", "127.0.0.1"));
  EXPECT_FALSE(CidrContains("::/0", "127.0.0.1"));
}

TEST(AddPortRange, ExpandsSmallRangesAndKeepsOnlyKnownPortsOfWideOnes) {
  std::set<int> p;
  AddPortRange(p, 8000, 8003);
  EXPECT_EQ(p, (std::set<int>{8000, 8001, 8002, 8003}));
  p.clear();
  AddPortRange(p, 1, 65535);
  EXPECT_EQ(p, (std::set<int>{22, 80, 443, 6443}));
  p.clear();
  AddPortRange(p, 400, 7000);
  EXPECT_EQ(p, (std::set<int>{443, 6443}));
  p.clear();
  AddPortRange(p, 10, 5);
  EXPECT_TRUE(p.empty());
}

TEST(LambdaAllowedPorts, DefaultAccountRulesOpenOnlySsh) {
  JsonArray defaults = Rules(R"([
    {"protocol":"tcp","port_range":[22,22],"source_network":"0.0.0.0/0","description":"Allow SSH"},
    {"protocol":"icmp","source_network":"0.0.0.0/0","description":"Allow ICMP"}])");
  EXPECT_EQ(LambdaAllowedPorts("us-east-1", defaults, {}), (std::set<int>{22}));
}

TEST(LambdaAllowedPorts, CountsTcpAndAllFromSourcesThatIncludeTheTestHost) {
  JsonArray rules = Rules(R"([
    {"protocol":"tcp","port_range":[6443,6443],"source_network":"0.0.0.0/0","description":"a"},
    {"protocol":"udp","port_range":[80,80],"source_network":"0.0.0.0/0","description":"udp only"},
    {"protocol":"tcp","port_range":[443,443],"source_network":"10.0.0.0/8","description":"other net"},
    {"protocol":"tcp","port_range":[8000,8002],"source_network":"127.0.0.1/32","description":"b"}])");
  EXPECT_EQ(LambdaAllowedPorts("us-west-1", rules, {}), (std::set<int>{6443, 8000, 8001, 8002}));
  JsonArray all = Rules(R"([{"protocol":"all","source_network":"0.0.0.0/0","description":"x"}])");
  EXPECT_EQ(LambdaAllowedPorts("us-west-1", all, {}), (std::set<int>{22, 80, 443, 6443}));
}

TEST(LambdaAllowedPorts, RulesetsAddToTheAccountRulesWhichDoNotApplyInUsSouth1) {
  JsonArray account = Rules(
      R"([{"protocol":"tcp","port_range":[22,22],"source_network":"0.0.0.0/0","description":"s"}])");
  JsonArray set = Rules(
      R"([{"protocol":"tcp","port_range":[80,80],"source_network":"0.0.0.0/0","description":"w"}])");
  EXPECT_EQ(LambdaAllowedPorts("us-east-1", account, {set}), (std::set<int>{22, 80}));
  // us-south-1: the account-wide rules do not apply there (Lambda's OpenAPI spec v1.8.3,
  // firewallRulesList). Default reading: only the rulesets open ports; the other reading
  // (nothing filtered) on request.
  EXPECT_EQ(LambdaAllowedPorts("us-south-1", account, {set}), (std::set<int>{80}));
  EXPECT_EQ(LambdaAllowedPorts("us-south-1", account, {}), (std::set<int>{}));
  EXPECT_EQ(LambdaAllowedPorts("us-south-1", Rules("[]"), {}, /*us_south_1_unfiltered=*/true),
            (std::set<int>{22, 80, 443, 6443}));
}

TEST(HyperstackAllowedPorts, OnlyIngressIpv4TcpRulesFromTheTestHostCount) {
  JsonArray rules = Rules(R"([
    {"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"0.0.0.0/0",
     "port_range_min":22,"port_range_max":22},
    {"direction":"egress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"0.0.0.0/0",
     "port_range_min":80,"port_range_max":80},
    {"direction":"ingress","protocol":"tcp","ethertype":"IPv6","remote_ip_prefix":"::/0",
     "port_range_min":443,"port_range_max":443},
    {"direction":"ingress","protocol":"udp","ethertype":"IPv4","remote_ip_prefix":"0.0.0.0/0",
     "port_range_min":6443,"port_range_max":6443},
    {"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"192.168.0.0/16",
     "port_range_min":8080,"port_range_max":8080},
    {"direction":"ingress","protocol":"tcp","ethertype":"IPv4","remote_ip_prefix":"0.0.0.0/0",
     "port_range_min":9000,"port_range_max":9001}])");
  EXPECT_EQ(HyperstackAllowedPorts(rules), (std::set<int>{22, 9000, 9001}));
  JsonArray any = Rules(
      R"([{"direction":"ingress","protocol":"any","ethertype":"IPv4","remote_ip_prefix":"0.0.0.0/0"}])");
  EXPECT_EQ(HyperstackAllowedPorts(any), (std::set<int>{22, 80, 443, 6443}));
  EXPECT_TRUE(HyperstackAllowedPorts(Rules("[]")).empty());
}

TEST(CheckShape, NamesUnknownMissingAndWronglyTypedFields) {
  const std::vector<FieldShape> shape = {{"name", JsonType::kString, true},
                                         {"count", JsonType::kInteger},
                                         {"flag", JsonType::kBool},
                                         {"list", JsonType::kArray},
                                         {"obj", JsonType::kObject},
                                         {"ratio", JsonType::kNumber}};
  EXPECT_EQ(CheckShape(ParseObject(R"({"name":"a","count":1,"flag":true,"list":[],"obj":{},"ratio":1.5})"),
                       shape),
            "");
  EXPECT_EQ(CheckShape(ParseObject(R"({"name":"a","count":null})"), shape), "");
  EXPECT_EQ(CheckShape(ParseObject(R"({"name":"a","usr_data":"x"})"), shape),
            "unknown field \"usr_data\"");
  EXPECT_EQ(CheckShape(ParseObject(R"({"count":1})"), shape), "\"name\" is required");
  EXPECT_EQ(CheckShape(ParseObject(R"({"name":5})"), shape), "\"name\" must be a string");
  EXPECT_EQ(CheckShape(ParseObject(R"({"name":"a","count":"1"})"), shape),
            "\"count\" must be an integer");
  EXPECT_EQ(CheckShape(ParseObject(R"({"name":"a","count":1.5})"), shape),
            "\"count\" must be an integer");
  EXPECT_EQ(CheckShape(ParseObject(R"({"name":"a","flag":"true"})"), shape),
            "\"flag\" must be a boolean");
  EXPECT_EQ(CheckShape(ParseObject(R"({"name":"a","flag":1})"), shape), "\"flag\" must be a boolean");
  EXPECT_EQ(CheckShape(ParseObject(R"({"name":"a","list":{}})"), shape), "\"list\" must be an array");
  EXPECT_EQ(CheckShape(ParseObject(R"({"name":"a","obj":[]})"), shape), "\"obj\" must be an object");
  EXPECT_EQ(CheckShape(ParseObject(R"({"name":"a","x":1})"), shape, "tags[0]"),
            "unknown field \"tags[0].x\"");
  EXPECT_EQ(CheckItems(GetArray(ParseObject(R"({"a":["x",1]})"), "a"), JsonType::kString, "a"),
            "\"a[1]\" must be a string");
}

}  // namespace
}  // namespace gpuprov::emulator
