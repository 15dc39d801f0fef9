#include "cluster_join.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <map>

#include "error.h"
#include "node_shell.h"

namespace gpuprov {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

/// A node whose commands answer by purpose; polls answer from a queue (the last one repeats).
class ScriptedNode : public NodeShell {
 public:
  SshRunResult RunAsRoot(const std::string& purpose, const std::string& command,
                         const std::string& stdin_data, std::chrono::milliseconds) override {
    calls.push_back(purpose);
    commands.push_back(command);
    stdins.push_back(stdin_data);
    if (purpose == "overlay check: echo ready") {
      return {0, R"({"kind":"Deployment","status":{"readyReplicas":1}})", ""};
    }
    if (purpose == "overlay check: poll") {
      std::string out = polls.front();
      if (polls.size() > 1) polls.pop_front();
      return {0, out, ""};
    }
    auto it = answers.find(purpose);
    return it == answers.end() ? SshRunResult{0, "", ""} : it->second;
  }
  std::map<std::string, SshRunResult> answers;
  std::deque<std::string> polls = {"{}"};
  std::vector<std::string> calls, commands, stdins;
};

const char* const kToken =
    "K10f00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeed::server:s3cr3t";

TEST(ReadJoinTokenTest, ReadsTheServersNodeTokenOverSsh) {
  ScriptedNode server;
  server.answers["read the join token"] = {0, std::string(kToken) + "\n", ""};
  EXPECT_EQ(ReadJoinToken(server, "train"), kToken);
  EXPECT_THAT(server.commands, ElementsAre("cat /var/lib/rancher/k3s/server/node-token"));
}

TEST(ReadJoinTokenTest, AMissingTokenIsAnErrorThatQuotesNothingOfTheFile) {
  ScriptedNode server;
  server.answers["read the join token"] = {1, "", "cat: No such file or directory"};
  try {
    ReadJoinToken(server, "train");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("the server of cluster train has no join token"));
    EXPECT_THAT(e.hint(), HasSubstr("gpuprov ssh train"));
  }
  server.answers["read the join token"] = {0, "two words\n", ""};
  try {
    ReadJoinToken(server, "train");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), Not(HasSubstr("two words")));
  }
}

std::string NodeJson(const std::string& name, const std::string& ip, bool ready, int gpus) {
  return R"({"metadata":{"name":")" + name + R"("},"status":{"addresses":[{"type":"InternalIP",)"
         R"("address":")" + ip + R"("}],"conditions":[{"type":"Ready","status":")" +
         (ready ? "True" : "False") + R"(","message":")" + (ready ? "" : "kubelet stopped") +
         R"("}],"allocatable":{"nvidia.com/gpu":")" + std::to_string(gpus) + R"("}}})";
}

TEST(MatchClusterNodesTest, MatchesByNameOrAddressAndSaysWhatIsMissing) {
  const std::string list = R"({"kind":"NodeList","items":[)" +
                           NodeJson("train", "10.0.0.2", true, 8) + "," +
                           NodeJson("ip-10-0-0-3", "10.0.0.3", false, 0) + "]}";
  const std::vector<ClusterNodeStatus> nodes =
      MatchClusterNodes(list, {{"train", {"10.0.0.2"}},
                               {"train-agent-1", {"10.0.0.3", "203.0.113.3"}},
                               {"train-agent-2", {"10.0.0.4"}}});
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].node_name, "train");
  EXPECT_TRUE(nodes[0].ready);
  EXPECT_EQ(nodes[0].gpus_allocatable, 8);
  EXPECT_EQ(nodes[1].node_name, "ip-10-0-0-3");
  EXPECT_FALSE(nodes[1].ready);
  EXPECT_EQ(nodes[2].node_name, "");
  EXPECT_EQ(ClusterNodesShortfall(nodes, 8),
            "train-agent-1: node ip-10-0-0-3 is not Ready (kubelet stopped); train-agent-2: not "
            "in the cluster");
}

TEST(MatchClusterNodesTest, EveryNodeReadyWithItsGpusHasNoShortfall) {
  const std::string list = R"({"items":[)" + NodeJson("a", "10.0.0.2", true, 2) + "," +
                           NodeJson("b", "10.0.0.3", true, 2) + "]}";
  const auto nodes = MatchClusterNodes(list, {{"a", {}}, {"b", {}}});
  EXPECT_EQ(ClusterNodesShortfall(nodes, 2), "");
  EXPECT_EQ(ClusterNodesShortfall(nodes, 4), "a: 2 of 4 nvidia.com/gpu allocatable; b: 2 of 4 "
                                             "nvidia.com/gpu allocatable");
  EXPECT_THAT(ClusterNodesShortfall(MatchClusterNodes("garbage", {{"a", {}}}), 0),
              HasSubstr("a: no node list from the API"));
}

TEST(OverlayCheckTest, ObjectsFollowTheContract) {
  const std::string deployment = OverlayEchoDeploymentJson("node-b");
  EXPECT_THAT(deployment, HasSubstr(R"("nodeName":"node-b")"));
  EXPECT_THAT(deployment, HasSubstr("registry.k8s.io/e2e-test-images/agnhost:2.47"));
  EXPECT_THAT(deployment, HasSubstr(R"(["netexec","--http-port=8080"])"));
  EXPECT_THAT(deployment, HasSubstr(R"("namespace":"gpuprov-system")"));
  const std::string service = OverlayEchoServiceJson();
  EXPECT_THAT(service, HasSubstr(R"("port":80)"));
  EXPECT_THAT(service, HasSubstr(R"("targetPort":8080)"));
  const std::string probe = OverlayProbePodJson("node-a");
  EXPECT_THAT(probe, HasSubstr(R"("nodeName":"node-a")"));
  EXPECT_THAT(probe, HasSubstr(R"("restartPolicy":"Never")"));
  EXPECT_THAT(probe, HasSubstr(
                         R"(["connect","gpuprov-overlay-echo.gpuprov-system.svc.cluster.local:80","--timeout=5s"])"));
  EXPECT_THAT(OverlayNamespaceJson(), HasSubstr(R"("name":"gpuprov-system")"));
}

TEST(OverlayCheckTest, VerdictOfTheProbePod) {
  EXPECT_EQ(OverlayProbeVerdict(R"({"kind":"Pod","status":{"phase":"Running"}})"), "");
  EXPECT_EQ(OverlayProbeVerdict(R"({"kind":"Pod","status":{"phase":"Succeeded"}})"), "ok");
  EXPECT_EQ(OverlayProbeVerdict(
                R"({"kind":"Pod","status":{"phase":"Failed","message":"51820/udp: no answer"}})"),
            "51820/udp: no answer");
  EXPECT_EQ(OverlayProbeVerdict(R"({"kind":"Pod","status":{"phase":"Failed","containerStatuses":)"
                                R"([{"state":{"terminated":{"reason":"Error","message":"timeout"}}}]}})"),
            "timeout");
  EXPECT_EQ(OverlayProbeVerdict("not json"), "");
}

TEST(OverlayCheckTest, RunPassesWhenTheProbeSucceedsAndCleansUp) {
  ScriptedNode server;
  server.polls = {R"({"kind":"Pod","status":{"phase":"Pending"}})",
                  R"({"kind":"Pod","status":{"phase":"Succeeded"}})"};
  RunOverlayCheck(server, "a", "b", std::chrono::seconds(10), std::chrono::milliseconds(1));
  EXPECT_THAT(server.calls,
              ElementsAre("overlay check: apply", "overlay check: echo ready",
                          "overlay check: probe", "overlay check: poll", "overlay check: poll",
                          "overlay check: clean up"));
}

TEST(OverlayCheckTest, RunFailsNamingTheNodesAndWhatDidNotAnswer) {
  ScriptedNode server;
  server.polls = {
      R"({"kind":"Pod","status":{"phase":"Failed","message":"node b: 51820/udp did not answer"}})"};
  try {
    RunOverlayCheck(server, "a", "b", std::chrono::seconds(10), std::chrono::milliseconds(1));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("between nodes a and b: node b: 51820/udp did not answer"));
  }
  EXPECT_EQ(server.calls.back(), "overlay check: clean up");
}

}  // namespace
}  // namespace gpuprov

namespace gpuprov {
namespace {

TEST(PrivatePeersCommand, AdmitsExactlyThePeersOnK3sPortsFromThePrivateNetworkOnly) {
  const std::string c = PrivatePeersCommand("10.64.3.7", {"10.64.3.9", "10.64.3.12", "fd00::5"});
  // The network of the interface that holds the node's private address.
  EXPECT_NE(c.find("net=$(ip -o -4 addr show to '10.64.3.7' | awk '{print $4}')"), std::string::npos) << c;
  EXPECT_NE(c.find("    ip saddr != $net accept\n"), std::string::npos) << c;
  EXPECT_NE(c.find("    ip saddr { 10.64.3.9, 10.64.3.12 } tcp dport { 6443, 10250 } accept\n"),
            std::string::npos) << c;
  EXPECT_NE(c.find("    ip saddr { 10.64.3.9, 10.64.3.12 } udp dport { 51820 } accept\n"),
            std::string::npos) << c;
  EXPECT_EQ(c.find("fd00::5"), std::string::npos) << c;  // the private network is IPv4
  // Atomic (one nft -f of delete-and-define), its own table, a boot unit before k3s.
  EXPECT_NE(c.find("delete table inet gpuprov_peers\n"), std::string::npos);
  EXPECT_NE(c.find("Before=network-pre.target k3s.service k3s-agent.service\n"), std::string::npos);
  EXPECT_LT(c.find("ip saddr { 10.64.3.9"), c.find("    counter drop\n"));
  // No peers: nothing of k3s's is admitted from the private network.
  EXPECT_EQ(PrivatePeersCommand("10.64.3.7", {}).find("saddr {"), std::string::npos);
}

}  // namespace
}  // namespace gpuprov
