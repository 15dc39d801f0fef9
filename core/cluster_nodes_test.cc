#include "cluster_nodes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error.h"

namespace gpuprov {
namespace {

using ::testing::HasSubstr;

/// A question every row accepts: 3 nodes of "train" on a cluster-capable aws.
NodesQuestion Capable() {
  NodesQuestion q;
  q.nodes = 3;
  q.origin = "--nodes 3 from the command line";
  q.cluster = "train";
  q.cloud = "aws";
  q.driver_can_cluster = true;
  q.clouds_that_can = {"aws", "digitalocean", "primeintellect"};
  return q;
}

TEST(DecideNodesTest, ZeroNodesIsRefused) {
  NodesQuestion q = Capable();
  q.nodes = 0;
  q.origin = "--nodes 0 from the command line";
  const NodesDecision d = DecideNodes(q);
  EXPECT_TRUE(d.refused);
  EXPECT_THAT(d.reason, HasSubstr("at least one node (--nodes 0 from the command line)"));
  EXPECT_THAT(d.hint, HasSubstr("nothing was created"));
}

TEST(DecideNodesTest, OneNodeIsAcceptedOnAnyCloud) {
  NodesQuestion q;
  q.nodes = 1;
  q.cluster = "box";
  q.cloud = "docker";
  q.kubernetes = false;
  q.several_candidates = true;
  EXPECT_FALSE(DecideNodes(q).refused);
}

TEST(DecideNodesTest, AboveGpuprovsOwnLimitIsRefused) {
  NodesQuestion q = Capable();
  q.nodes = kMaxClusterNodes + 1;
  const NodesDecision d = DecideNodes(q);
  EXPECT_TRUE(d.refused);
  EXPECT_THAT(d.reason, HasSubstr("at most 999 nodes"));
}

TEST(DecideNodesTest, ANameTooLongForItsAgentsIsRefused) {
  NodesQuestion q = Capable();
  q.cluster = std::string(32, 'a');  // + "-agent-2" is 40 characters
  const NodesDecision d = DecideNodes(q);
  EXPECT_TRUE(d.refused);
  EXPECT_THAT(d.reason, HasSubstr(q.cluster + "-agent-2"));
  EXPECT_THAT(d.hint, HasSubstr("at most 31 characters"));
  q.cluster = std::string(31, 'a');
  EXPECT_FALSE(DecideNodes(q).refused);
}

TEST(DecideNodesTest, KubernetesOffIsRefused) {
  NodesQuestion q = Capable();
  q.kubernetes = false;
  const NodesDecision d = DecideNodes(q);
  EXPECT_TRUE(d.refused);
  EXPECT_THAT(d.reason, HasSubstr("Kubernetes is off"));
}

TEST(DecideNodesTest, SeveralCandidatesAreRefused) {
  NodesQuestion q = Capable();
  q.several_candidates = true;
  const NodesDecision d = DecideNodes(q);
  EXPECT_TRUE(d.refused);
  EXPECT_THAT(d.reason, HasSubstr("one cloud and region"));
}

TEST(DecideNodesTest, TheDockerTestCloudIsRefusedNamingTheCloudsThatCan) {
  NodesQuestion q = Capable();
  q.cloud = "docker";
  q.driver_can_cluster = false;
  const NodesDecision d = DecideNodes(q);
  EXPECT_TRUE(d.refused);
  EXPECT_THAT(d.reason, HasSubstr("docker cloud is a test cloud"));
  EXPECT_THAT(d.hint, HasSubstr("clouds that can: aws, digitalocean and primeintellect"));
}

TEST(DecideNodesTest, ADriverWithoutTheClusterCapabilityIsRefusedNamingTheCloudsThatCan) {
  NodesQuestion q = Capable();
  q.cloud = "lambda";
  q.driver_can_cluster = false;
  const NodesDecision d = DecideNodes(q);
  EXPECT_TRUE(d.refused);
  EXPECT_THAT(d.reason, HasSubstr("the lambda driver cannot make multi-node clusters"));
  EXPECT_THAT(d.hint, HasSubstr("clouds that can: aws, digitalocean and primeintellect"));
  q.clouds_that_can.clear();
  EXPECT_THAT(DecideNodes(q).hint, HasSubstr("no driver found here can"));
}

TEST(DecideNodesTest, AboveTheDriversLimitIsRefused) {
  NodesQuestion q = Capable();
  q.driver_max_nodes = 2;
  const NodesDecision d = DecideNodes(q);
  EXPECT_TRUE(d.refused);
  EXPECT_THAT(d.reason, HasSubstr("the aws driver makes at most 2 nodes"));
  EXPECT_THAT(d.hint, HasSubstr("--nodes 2 or fewer"));
}

TEST(DecideNodesTest, ACapableDriverWithinItsLimitIsAccepted) {
  NodesQuestion q = Capable();
  EXPECT_FALSE(DecideNodes(q).refused);
  q.driver_max_nodes = 3;
  const NodesDecision d = DecideNodes(q);
  EXPECT_FALSE(d.refused);
  EXPECT_TRUE(d.reason.empty());
}

TEST(ParseNodeCountTest, TakesAWholeNumber) {
  EXPECT_EQ(ParseNodeCount("3", "--nodes"), 3);
  EXPECT_EQ(ParseNodeCount("0", "--nodes"), 0);  // the range is DecideNodes's
}

TEST(ParseNodeCountTest, RefusesWhatIsNotAWholeNumber) {
  for (const char* text : {"", "two", "1.5", "-1", "+2", " 2", "1e3", "9999999"}) {
    try {
      ParseNodeCount(text, "--nodes");
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("--nodes: \"" + std::string(text) + "\" is not a whole"));
    }
  }
}

TEST(ClusterNodeNameTest, TheServerIsTheClusterAndAgentsAreNumbered) {
  EXPECT_EQ(ClusterNodeName("train", 0), "train");
  EXPECT_EQ(ClusterNodeName("train", 1), "train-agent-1");
  EXPECT_EQ(ClusterNodeName("train", 12), "train-agent-12");
}

TEST(CloudsThatCanClusterTest, ListsUsableDriversWithTheBitSorted) {
  DriverInfo aws{}, lambda{}, broken{}, digitalocean{};
  aws.name = "aws";
  aws.capabilities = GPUPROV_CAP_CLUSTER | GPUPROV_CAP_VM_LIFECYCLE;
  lambda.name = "lambda";
  lambda.capabilities = GPUPROV_CAP_VM_LIFECYCLE;
  broken.name = "gcp";
  broken.capabilities = GPUPROV_CAP_CLUSTER;
  broken.problem = "needs ABI 9.0";
  digitalocean.name = "digitalocean";
  digitalocean.capabilities = GPUPROV_CAP_CLUSTER;
  EXPECT_THAT(CloudsThatCanCluster({lambda, digitalocean, broken, aws}),
              ::testing::ElementsAre("aws", "digitalocean"));
}

VmRecord Node(const std::string& name, const std::string& cluster, const std::string& role,
              int index, int nodes = 0) {
  VmRecord r;
  r.name = name;
  r.cluster = cluster;
  r.role = role;
  r.node_index = index;
  r.cluster_nodes = nodes;
  return r;
}

TEST(ClusterAgentsTest, TheAgentsOfOneClusterByIndex) {
  const std::vector<VmRecord> records = {
      Node("box", "", "", 0),          Node("train", "train", "server", 0, 3),
      Node("train-agent-2", "train", "agent", 2), Node("train-agent-1", "train", "agent", 1),
      Node("other-agent-1", "other", "agent", 1)};
  std::vector<std::string> names;
  for (const auto& r : ClusterAgents(records, "train")) names.push_back(r.name);
  EXPECT_THAT(names, ::testing::ElementsAre("train-agent-1", "train-agent-2"));
  EXPECT_TRUE(ClusterAgents(records, "").empty());
  EXPECT_THAT(ClusterLines(records),
              ::testing::ElementsAre(
                  "cluster train: 3 of 3 nodes (train server, train-agent-1, train-agent-2)"));
}

}  // namespace
}  // namespace gpuprov
