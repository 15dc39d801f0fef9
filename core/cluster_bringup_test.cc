#include "cluster_bringup.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "error.h"
#include "gpuprov/driver_abi.h"
#include "node_shell.h"

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

TEST(ClusterPlan, TooSmallLimitFallsBackToSshWithANote) {
  ClusterPlan p = PlanCluster(kCloudInit | GPUPROV_CAP_OPEN_PORTS, 4096);
  EXPECT_FALSE(p.boot_route);
  EXPECT_TRUE(p.direct);
  EXPECT_TRUE(p.boot_script.empty());
  EXPECT_NE(p.note.find("4096-byte"), std::string::npos) << p.note;
  EXPECT_NE(p.note.find("over SSH"), std::string::npos) << p.note;
}

// A node that answers every command with one output and records what it was asked.
class RecordingShell : public NodeShell {
 public:
  explicit RecordingShell(std::string probe_output) : out_(std::move(probe_output)) {}
  SshRunResult RunAsRoot(const std::string& purpose, const std::string&, const std::string&,
                         std::chrono::milliseconds) override {
    calls.push_back(purpose);
    return SshRunResult{0, out_, ""};
  }
  std::vector<std::string> calls;

 private:
  std::string out_;
};

// The probe's output on a RunPod-like container: sshd is PID 1, no systemd, Docker's default
// capabilities; cloud-init installed but never run.
const char* const kContainerProbe =
    "@@gpuprov-probe 1@@\n@@marker@@\n\n@@lock@@\nfree\n@@cloud-init@@\n"
    "{\"status\": \"not started\", \"errors\": []}\n@@k3s@@\noffline\n@@gpu@@\nNVIDIA A100\n"
    "@@init@@\npid1=sshd\nsystemd_booted=no\ncontainer=docker\ncapeff=00000000a80425fb\n"
    "@@end@@\n";

// On either route, a container node is named as such after exactly one probe: no wait for a
// boot install, no installer pushed, and the error says what to do.
TEST(ClusterBringUp, AContainerNodeFailsAfterOneProbeWithTheFix) {
  for (const bool boot_route : {true, false}) {
    RecordingShell shell(kContainerProbe);
    ClusterInputs in;
    in.vm_name = "pi-ctr";
    in.plan.boot_route = boot_route;
    in.public_ip = "127.90.0.9";
    int saves = 0;
    in.save = [&](VmRecord&) { ++saves; };
    VmRecord rec;
    try {
      BringUpCluster(shell, in, rec);
      ADD_FAILURE() << "a container node was taken for a k3s host";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("pi-ctr: this node cannot host k3s: systemd is not PID 1 (PID 1 is "
                          "sshd; a docker container, not a VM)"),
                std::string::npos)
          << what;
      EXPECT_NE(e.hint().find("--no-k8s"), std::string::npos) << e.hint();
      EXPECT_NE(e.hint().find("vm_providers"), std::string::npos) << e.hint();
      EXPECT_NE(e.hint().find("gpuprov down pi-ctr"), std::string::npos) << e.hint();
    }
    EXPECT_EQ(shell.calls, std::vector<std::string>{"probe"}) << "boot route " << boot_route;
    EXPECT_EQ(rec.probe["decision"].rfind("fail: this node cannot host k3s", 0), 0u)
        << rec.probe["decision"];
    EXPECT_EQ(rec.probe["pid1"], "sshd");
    EXPECT_GE(saves, 1);
  }
}

}  // namespace
}  // namespace gpuprov
