#include "cluster_bringup.h"

#include <gtest/gtest.h>

#include "gpuprov/driver_abi.h"

namespace gpuprov {
namespace {

constexpr std::uint64_t kCloudInit = GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_HOSTS_KUBERNETES |
                                     GPUPROV_CAP_BOOT_CLOUD_INIT;

TEST(ClusterPlan, BootScriptAndOpenPortsGiveBootRouteAndDirectAccess) {
  ClusterPlan p = PlanCluster(kCloudInit | GPUPROV_CAP_OPEN_PORTS, 65536);
  EXPECT_TRUE(p.boot_route);
  EXPECT_TRUE(p.direct);
  EXPECT_EQ(p.boot_script.rfind("#!/bin/bash\n", 0), 0u);
  EXPECT_TRUE(p.note.empty());
  EXPECT_EQ(PortsToOpen(true, p), (std::vector<int>{22, 6443, 80, 443}));
  EXPECT_EQ(PortsToOpen(false, p), std::vector<int>{22});
  EXPECT_EQ(DirectModePortsText(), "22, 6443, 80 and 443");
}

TEST(ClusterPlan, StartupScriptCloudsTakeTheBootRouteToo) {
  ClusterPlan p = PlanCluster(GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_HOSTS_KUBERNETES |
                                  GPUPROV_CAP_BOOT_STARTUP_SCRIPT,
                              262144);
  EXPECT_TRUE(p.boot_route);
  EXPECT_FALSE(p.direct);
  EXPECT_EQ(PortsToOpen(true, p), std::vector<int>{22});
}

TEST(ClusterPlan, NoBootScriptNoOpenPortsGivesSshRouteAndTunnel) {
  ClusterPlan p = PlanCluster(GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_HOSTS_KUBERNETES, 65536);
  EXPECT_FALSE(p.boot_route);
  EXPECT_FALSE(p.direct);
  EXPECT_TRUE(p.boot_script.empty());
  EXPECT_TRUE(p.note.empty());
}

TEST(ClusterPlan, Ec2SizedLimitStillFitsCompressed) {
  ClusterPlan p = PlanCluster(kCloudInit, 16384);
  EXPECT_TRUE(p.boot_route);
  EXPECT_LE(p.boot_script.size(), 16384u);
}

TEST(ClusterPlan, TheBootScriptCarriesTheK3sChoiceWithinEc2sLimit) {
  InstallerArgs k3s;
  k3s.k3s_version = "v1.30.2+k3s1";
  k3s.k3s_sha256 = std::string(64, 'f');
  k3s.k3s_download_url = "https://mirror.example/k3s/releases/download";
  ClusterPlan p = PlanCluster(kCloudInit, 16384, k3s);
  ASSERT_TRUE(p.boot_route);
  EXPECT_LE(p.boot_script.size(), 16384u);
  const std::string exec_line = p.boot_script.substr(p.boot_script.rfind("\nexec bash ") + 1);
  EXPECT_EQ(exec_line, "exec bash \"$dir/gpuprov-install.sh\" '--k3s-version' 'v1.30.2+k3s1' "
                       "'--k3s-sha256' '" + std::string(64, 'f') + "' '--k3s-download-url' "
                       "'https://mirror.example/k3s/releases/download'\n");
}

TEST(ClusterPlan, TooSmallLimitFallsBackToSshWithANote) {
  ClusterPlan p = PlanCluster(kCloudInit | GPUPROV_CAP_OPEN_PORTS, 4096);
  EXPECT_FALSE(p.boot_route);
  EXPECT_TRUE(p.direct);
  EXPECT_TRUE(p.boot_script.empty());
  EXPECT_NE(p.note.find("4096-byte"), std::string::npos) << p.note;
  EXPECT_NE(p.note.find("over SSH"), std::string::npos) << p.note;
}

}  // namespace
}  // namespace gpuprov
