// SPDX-License-Identifier: Apache-2.0
#include "cluster_request.h"

#include <gtest/gtest.h>

#include <string>

#include "driver_request.h"
#include "gpuprov/sdk.hpp"
#include "json_util.h"

namespace gpuprov::drivers {
namespace {

using gpuprov::sdk::DriverError;

Poco::JSON::Object::Ptr Request(const std::string& text) {
  return json::ParseObject(text, "the request");
}

std::string ErrorOf(const std::string& create_json) {
  try {
    ParseCluster(Request(create_json));
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
    return e.what();
  }
  ADD_FAILURE() << "no DriverError for " << create_json;
  return "";
}

TEST(ClusterRequest, APlainVmHasNoCluster) {
  EXPECT_FALSE(ParseCluster(Request("{}")));
  EXPECT_FALSE(ParseCluster(Request(R"({"cluster": null})")));
}

TEST(ClusterRequest, TheClusterOfACreateIsRead) {
  auto c = ParseCluster(Request(
      R"({"cluster": {"name": "train", "role": "agent", "peer_ports": [
          {"port": 6443, "protocol": "tcp"}, {"port": 10250, "protocol": "tcp"},
          {"port": 51820, "protocol": "udp"}, {"port": 6443, "protocol": "tcp"}]}})"));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->name, "train");
  EXPECT_EQ(c->role, "agent");
  ASSERT_EQ(c->peer_ports.size(), 3u);  // the repeated one once
  EXPECT_EQ(c->peer_ports[2], (PeerPort{51820, "udp"}));
  EXPECT_EQ(PeerPortsText(c->peer_ports), "tcp 6443, 10250; udp 51820");
  EXPECT_EQ(ClusterResourceName(c->name), "gpuprov-train");
}

TEST(ClusterRequest, BadFieldsAreRefusedNamingThem) {
  const std::string ports = R"("peer_ports": [{"port": 6443, "protocol": "tcp"}])";
  EXPECT_NE(ErrorOf(R"({"cluster": {"name": "Train", "role": "server", )" + ports + "}}")
                .find("cluster.name 'Train'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"cluster": {"name": "t", "role": "boss", )" + ports + "}}")
                .find("cluster.role"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"cluster": {"name": "t", "role": "server", "peer_ports": []}})")
                .find("cluster.peer_ports"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"cluster": {"name": "t", "role": "server", "peer_ports": [
                        {"port": 51820, "protocol": "sctp"}]}})")
                .find("cluster.peer_ports[0].protocol"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"cluster": {"name": "t", "role": "server", "peer_ports": [
                        {"port": 0, "protocol": "tcp"}]}})")
                .find("cluster.peer_ports[0].port 0"),
            std::string::npos);
}

TEST(ClusterRequest, OpenPeerPortsListsEveryPeerWithItsAddress) {
  const PeerPortsRequest r = ParsePeerPortsRequest(
      R"({"cluster": "train", "peer_ports": [{"port": 10250, "protocol": "tcp"}],
          "peers": [{"id": "1", "name": "train", "private_ip": "10.0.0.2", "public_ip": "203.0.113.2"},
                    {"id": "2", "name": "train-agent-1", "private_ip": "", "public_ip": "203.0.113.3"}]})");
  EXPECT_EQ(r.cluster, "train");
  ASSERT_EQ(r.peers.size(), 2u);
  EXPECT_EQ(r.peers[0].address(), "10.0.0.2");
  EXPECT_EQ(r.peers[1].address(), "203.0.113.3");
}

TEST(ClusterRequest, PeerPortsLeftToTheNodeFirewallCheckTheRequestAndChangeNothing) {
  EXPECT_EQ(PeerPortsLeftToNodeFirewall(
                R"({"cluster": "train", "peer_ports": [{"port": 6443, "protocol": "tcp"}],
                    "peers": [{"id": "1", "name": "train", "private_ip": "", "public_ip": "203.0.113.2"}]})"),
            "{}");
  try {
    PeerPortsLeftToNodeFirewall(R"({"cluster": "train", "peer_ports": [], "peers": []})");
    FAIL() << "empty peer_ports accepted";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
    EXPECT_NE(std::string(e.what()).find("peer_ports"), std::string::npos) << e.what();
  }
}

TEST(ClusterRequest, TheVmObjectCarriesThePrivateAddressClusterAndRole) {
  VmFields vm;
  vm.id = "1";
  vm.private_ip = "10.0.0.2";
  vm.cluster = "train";
  vm.role = "server";
  const auto o = VmJson(vm);
  EXPECT_EQ(json::Str(o, "private_ip"), "10.0.0.2");
  EXPECT_EQ(json::Str(o, "cluster"), "train");
  EXPECT_EQ(json::Str(o, "role"), "server");
  EXPECT_FALSE(json::Has(VmJson(VmFields{}), "private_ip"));  // a driver without the bit
}

}  // namespace
}  // namespace gpuprov::drivers
