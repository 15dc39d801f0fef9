#include "cluster_provision.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cluster_bringup.h"
#include "installer_bundle.h"

namespace gpuprov {
namespace {

/// A boot-route plan whose boot script ran the installer as a multi-node server's boot script
/// does: before the VM had addresses or peers.
ClusterPlan BootPlan(bool direct) {
  ClusterPlan plan;
  plan.boot_route = true;
  plan.direct = direct;
  plan.boot_args.cluster_nodes = 4;
  plan.boot_args.public_ip_source = "digitalocean";
  plan.boot_args.node_firewall = direct ? "" : "ssh-only";
  return plan;
}

/// The arguments the host has once the VMs are made.
InstallerArgs Now(const ClusterPlan& plan) {
  InstallerArgs now = plan.boot_args;
  now.node_firewall.clear();
  now.node_ip = "10.1.0.2";
  now.node_external_ip = "203.0.113.2";
  return now;
}

const K3sNodeAddresses kInForce{"10.1.0.2", "203.0.113.2"};

TEST(DecideServerRerun, AnInstallerPushedByThisBringUpRanWithEverySettingAlready) {
  ClusterPlan plan = BootPlan(false);
  InstallerArgs now = Now(plan);
  now.peers = {"10.1.0.3"};
  const ServerRerunDecision d = DecideServerRerun(plan, /*pushed=*/true, now, {});
  EXPECT_EQ(d.action, ServerRerun::kNone);
  EXPECT_EQ(d.reason, "the installer ran over SSH with them");
  plan.boot_route = false;
  EXPECT_EQ(DecideServerRerun(plan, true, now, {}).action, ServerRerun::kNone);
}

TEST(DecideServerRerun, AnSshRouteInstallFoundDoneIsNotComparedButGetsThePeersOfNow) {
  ClusterPlan plan = BootPlan(false);
  plan.boot_route = false;
  plan.boot_args = {};
  InstallerArgs now = Now(plan);
  EXPECT_EQ(DecideServerRerun(plan, false, now, {}).action, ServerRerun::kNone);
  now.peers = {"10.1.0.3"};
  EXPECT_EQ(DecideServerRerun(plan, false, now, {}).action, ServerRerun::kPeersOnly);
}

TEST(DecideServerRerun, AServerWhoseConfigHasTheAddressesAlreadyIsNotRunAgain) {
  const ClusterPlan plan = BootPlan(true);
  const ServerRerunDecision d = DecideServerRerun(plan, false, Now(plan), kInForce);
  EXPECT_EQ(d.action, ServerRerun::kNone);
  EXPECT_EQ(d.reason, "the install found ran with every setting the cluster needs");
}

TEST(DecideServerRerun, ABootRunWithoutTheNodeIpIsRunAgainNamingWhatIsMissing) {
  const ClusterPlan plan = BootPlan(true);
  const ServerRerunDecision d = DecideServerRerun(plan, false, Now(plan), {});
  EXPECT_EQ(d.action, ServerRerun::kInstaller);
  EXPECT_EQ(d.reason,
            "the boot install ran without --node-ip 10.1.0.2 --node-external-ip 203.0.113.2");
}

TEST(DecideServerRerun, AnotherNodeIpThanTheHostsIsRunAgain) {
  const ClusterPlan plan = BootPlan(true);
  const ServerRerunDecision d =
      DecideServerRerun(plan, false, Now(plan), K3sNodeAddresses{"10.0.0.2", "203.0.113.2"});
  EXPECT_EQ(d.action, ServerRerun::kInstaller);
  EXPECT_EQ(d.reason, "the boot install ran without --node-ip 10.1.0.2");
}

TEST(DecideServerRerun, AServerThatLearnedTheHostsAddressesFromTheMetadataServiceIsNotRunAgain) {
  ClusterPlan plan = BootPlan(true);
  plan.boot_args.node_ip = "metadata";
  const ServerRerunDecision d = DecideServerRerun(plan, false, Now(plan), kInForce);
  EXPECT_EQ(d.action, ServerRerun::kNone);
  EXPECT_EQ(d.reason, "the install found ran with every setting the cluster needs");
  plan.direct = false;  // tunnel access: only the peers, k3s untouched
  InstallerArgs now = Now(plan);
  now.peers = {"10.1.0.3"};
  EXPECT_EQ(DecideServerRerun(plan, false, now, kInForce).action, ServerRerun::kPeersOnly);
}

TEST(DecideServerRerun, AMetadataServiceThatDidNotAnswerLeavesTheRerunToTheHost) {
  ClusterPlan plan = BootPlan(true);
  plan.boot_args.node_ip = "metadata";
  const ServerRerunDecision d = DecideServerRerun(plan, false, Now(plan), {});
  EXPECT_EQ(d.action, ServerRerun::kInstaller);
  EXPECT_EQ(d.reason,
            "the boot install ran without --node-ip 10.1.0.2 --node-external-ip 203.0.113.2");
}

TEST(DecideServerRerun, AMetadataServiceThatGaveOtherAddressesIsCorrectedByTheHost) {
  ClusterPlan plan = BootPlan(true);
  plan.boot_args.node_ip = "metadata";
  EXPECT_EQ(DecideServerRerun(plan, false, Now(plan), K3sNodeAddresses{"10.9.0.7", "203.0.113.2"})
                .reason,
            "the boot install ran without --node-ip 10.1.0.2");
  // No private address in the metadata: the public one as node-ip, no external one.
  const ServerRerunDecision d =
      DecideServerRerun(plan, false, Now(plan), K3sNodeAddresses{"203.0.113.2", ""});
  EXPECT_EQ(d.action, ServerRerun::kInstaller);
  EXPECT_EQ(d.reason,
            "the boot install ran without --node-ip 10.1.0.2 --node-external-ip 203.0.113.2");
}

TEST(DecideServerRerun, AK3sSettingOtherThanTheAddressesIsRunAgain) {
  const ClusterPlan plan = BootPlan(true);
  InstallerArgs now = Now(plan);
  now.k3s_version = "v1.36.5+k3s1";
  EXPECT_EQ(DecideServerRerun(plan, false, now, kInForce).action, ServerRerun::kInstaller);
}

TEST(DecideServerRerun, PeersBehindTheNodeFirewallAreSetAloneWithoutTouchingK3s) {
  const ClusterPlan plan = BootPlan(false);
  InstallerArgs now = Now(plan);
  now.peers = {"10.1.0.3", "10.1.0.4"};
  const ServerRerunDecision d = DecideServerRerun(plan, false, now, kInForce);
  EXPECT_EQ(d.action, ServerRerun::kPeersOnly);
  EXPECT_EQ(d.reason, "the node firewall admits the cluster's nodes as they are now");
}

TEST(DecideServerRerun, PeersOnADirectAccessCloudNeedNothingOnTheNode) {
  const ClusterPlan plan = BootPlan(true);
  InstallerArgs now = Now(plan);
  now.peers = {"10.1.0.3"};
  EXPECT_EQ(DecideServerRerun(plan, false, now, kInForce).action, ServerRerun::kNone);
}

TEST(DecideServerRerun, MissingAddressesWinOverPeers) {
  const ClusterPlan plan = BootPlan(false);
  InstallerArgs now = Now(plan);
  now.peers = {"10.1.0.3"};
  EXPECT_EQ(DecideServerRerun(plan, false, now, {}).action, ServerRerun::kInstaller);
}

TEST(ServerRerunArgs, ARerunBehindTheNodeFirewallNamesItSoThePeersAreApplied) {
  InstallerArgs now = Now(BootPlan(false));
  now.peers = {"10.1.0.3"};
  const InstallerArgs tunnel = ServerRerunArgs(BootPlan(false), now);
  EXPECT_EQ(tunnel.node_firewall, "ssh-only");
  EXPECT_EQ(tunnel.peers, now.peers);
  const std::vector<std::string> words = InstallerArgWords(tunnel);
  bool firewall = false, peer = false;
  for (std::size_t i = 0; i + 1 < words.size(); ++i) {
    firewall = firewall || (words[i] == "--node-firewall" && words[i + 1] == "ssh-only");
    peer = peer || (words[i] == "--peer" && words[i + 1] == "10.1.0.3");
  }
  EXPECT_TRUE(firewall && peer);
  // Direct access: no node firewall, as before.
  EXPECT_EQ(ServerRerunArgs(BootPlan(true), Now(BootPlan(true))).node_firewall, "");
}

TEST(K3sNodeAddresses, TheConfigLinesGiveBothAddresses) {
  const K3sNodeAddresses a =
      ParseK3sNodeAddresses("node-ip: \"10.1.0.2\"\nnode-external-ip: \"203.0.113.2\"\n");
  EXPECT_EQ(a.node_ip, "10.1.0.2");
  EXPECT_EQ(a.node_external_ip, "203.0.113.2");
}

TEST(K3sNodeAddresses, NoLinesMeanK3sChooses) {
  const K3sNodeAddresses a = ParseK3sNodeAddresses("");
  EXPECT_EQ(a.node_ip, "");
  EXPECT_EQ(a.node_external_ip, "");
  EXPECT_EQ(ParseK3sNodeAddresses("node-ip: 10.1.0.9\n").node_ip, "10.1.0.9");
}

TEST(K3sNodeAddresses, TheCommandReadsK3sConfigAndNeverFails) {
  EXPECT_EQ(K3sNodeAddressesCommand(),
            "grep -E '^node-(external-)?ip:' /etc/rancher/k3s/config.yaml 2>/dev/null || true");
}

TEST(AgentBootInstallWait, WaitsForCloudInitThenSaysWhetherTheInstallerIsOnTheNode) {
  EXPECT_EQ(AgentBootInstallWaitCommand(),
            "cloud-init status --wait >/dev/null 2>&1 || true; test -s "
            "/var/lib/gpuprov/gpuprov-install.sh");
}

}  // namespace
}  // namespace gpuprov
