#include "cluster_bringup.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "error.h"
#include "gpuprov/driver_abi.h"
#include "gzip.h"
#include "kubeconfig.h"
#include "node_shell.h"
#include "test_support.h"

namespace gpuprov {
namespace {

/// EC2's user data: 16 KB, which the AWS driver sends gzipped (check's user_data_gzip).
const UserDataLimit kEc2(16384, /*gzipped=*/true);

/// A raw limit the compressed boot script fits and the plain one does not.
std::size_t CompressedOnlyLimit() { return Gzip(InstallerScript()).size() * 4 / 3 + 2048; }

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

TEST(ClusterPlan, TheBootRouteKeepsTheArgumentsItsScriptRunsTheInstallerWith) {
  InstallerArgs args;
  args.cluster_nodes = 4;
  args.public_ip_source = "digitalocean";
  ClusterPlan boot = PlanCluster(kCloudInit, 65536, args);
  ASSERT_TRUE(boot.boot_route);
  EXPECT_EQ(boot.boot_args.cluster_nodes, 4);
  EXPECT_EQ(boot.boot_args.public_ip_source, "digitalocean");
  EXPECT_EQ(boot.boot_args.node_firewall, "ssh-only");  // tunnel access: the node's own
  ClusterPlan ssh = PlanCluster(kCloudInit, 65536, args, InstallRoute::kSsh);
  EXPECT_EQ(ssh.boot_args.cluster_nodes, 0);
}

TEST(ClusterPlan, AClusterServerLearnsItsK3sAddressesFromTheMetadataServiceAtBoot) {
  InstallerArgs server;
  server.cluster_nodes = 3;
  server.public_ip_source = "digitalocean";
  ClusterPlan p = PlanCluster(kCloudInit | GPUPROV_CAP_OPEN_PORTS, 65536, server);
  ASSERT_TRUE(p.boot_route);
  EXPECT_EQ(p.boot_args.node_ip, "metadata");
  EXPECT_NE(p.boot_script.find("'--node-ip' 'metadata'"), std::string::npos) << p.boot_script.substr(0, 400);
  server.public_ip_source = "ec2";
  EXPECT_EQ(PlanCluster(kCloudInit, kEc2, server).boot_args.node_ip, "metadata");
  // Where no metadata service gives the private address, or on an agent or a single VM, the
  // host gives the addresses over SSH.
  for (const char* source : {"interface", "none", ""}) {
    server.public_ip_source = source;
    EXPECT_EQ(PlanCluster(kCloudInit, 65536, server).boot_args.node_ip, "") << source;
  }
  InstallerArgs agent;
  agent.role = "agent";
  agent.public_ip_source = "digitalocean";
  EXPECT_EQ(PlanCluster(kCloudInit, 65536, agent).boot_args.node_ip, "");
  InstallerArgs single;
  single.public_ip_source = "digitalocean";
  EXPECT_EQ(PlanCluster(kCloudInit, 65536, single).boot_args.node_ip, "");
}

TEST(ClusterPlan, StartupScriptCloudsTakeTheBootRouteToo) {
  ClusterPlan p = PlanCluster(GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_HOSTS_KUBERNETES |
                                  GPUPROV_CAP_BOOT_STARTUP_SCRIPT,
                              262144);
  EXPECT_TRUE(p.boot_route);
  EXPECT_TRUE(p.startup_script);
  EXPECT_FALSE(p.direct);
  EXPECT_EQ(PortsToOpen(true, p), std::vector<int>{22});
  // The startup script leaves its own trace (no cloud-init run to ask), and failures name it.
  EXPECT_NE(p.boot_script.find("boot-script.status"), std::string::npos);
  EXPECT_EQ(BootRouteOf(p), BootRoute::kStartupScript);
  EXPECT_NE(BootLogOf(p).find(kNodeBootTracePath), std::string::npos);
  // Too small for the plain form: compressed, traced too.
  ClusterPlan small = PlanCluster(GPUPROV_CAP_BOOT_STARTUP_SCRIPT, CompressedOnlyLimit());
  EXPECT_TRUE(small.boot_route);
  EXPECT_NE(small.boot_script.find("base64 -d"), std::string::npos);
  EXPECT_NE(small.boot_script.find("boot-script.status"), std::string::npos);
  // Cloud-init clouds are asked through cloud-init, as before.
  ClusterPlan ci = PlanCluster(kCloudInit, 65536);
  EXPECT_FALSE(ci.startup_script);
  EXPECT_EQ(BootRouteOf(ci), BootRoute::kCloudInit);
  EXPECT_EQ(BootLogOf(ci), kNodeBootLog);
  EXPECT_EQ(ci.boot_script.find("boot-script.status"), std::string::npos);
  EXPECT_EQ(BootRouteOf(PlanCluster(0, 65536)), BootRoute::kNone);
}

TEST(ClusterPlan, NoBootScriptNoOpenPortsGivesSshRouteAndTunnel) {
  ClusterPlan p = PlanCluster(GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_HOSTS_KUBERNETES, 65536);
  EXPECT_FALSE(p.boot_route);
  EXPECT_FALSE(p.direct);
  EXPECT_TRUE(p.boot_script.empty());
  EXPECT_TRUE(p.note.empty());
}

TEST(ClusterPlan, Ec2sGzippedLimitTakesTheBootRoute) {
  ClusterPlan p = PlanCluster(kCloudInit, kEc2);
  EXPECT_TRUE(p.boot_route);
  EXPECT_LE(kEc2.SizeOf(p.boot_script), 16384u);
}

TEST(ClusterPlan, KeepsTheBootScriptsSizeAsTheCloudCountsIt) {
  ClusterPlan gzipped = PlanCluster(kCloudInit, kEc2);
  ASSERT_TRUE(gzipped.boot_route);
  EXPECT_EQ(gzipped.boot_script_size, kEc2.SizeOf(gzipped.boot_script));
  EXPECT_LT(gzipped.boot_script_size, gzipped.boot_script.size());
  ClusterPlan raw = PlanCluster(kCloudInit, 65536);
  ASSERT_TRUE(raw.boot_route);
  EXPECT_EQ(raw.boot_script_size, raw.boot_script.size());
  EXPECT_EQ(PlanCluster(0, 65536).boot_script_size, 0u);
}

TEST(ClusterPlan, TheBootScriptCarriesTheK3sChoiceWithinEc2sLimit) {
  InstallerArgs k3s;
  k3s.k3s_version = "v1.30.2+k3s1";
  k3s.k3s_sha256 = std::string(64, 'f');
  k3s.k3s_download_url = "https://mirror.example/k3s/releases/download";
  ClusterPlan p = PlanCluster(kCloudInit, kEc2, k3s);
  ASSERT_TRUE(p.boot_route);
  EXPECT_LE(kEc2.SizeOf(p.boot_script), 16384u);
  const std::string exec_line = p.boot_script.substr(p.boot_script.rfind("\nexec bash ") + 1);
  EXPECT_EQ(exec_line, "exec bash \"$dir/gpuprov-install.sh\" '--k3s-version' 'v1.30.2+k3s1' "
                       "'--k3s-sha256' '" + std::string(64, 'f') + "' '--k3s-download-url' "
                       "'https://mirror.example/k3s/releases/download' '--node-firewall' "
                       "'ssh-only'\n");
}

// The line of a boot script that runs the installer, without the command itself: its
// arguments ("" when none). The cloud-init form ends in `exec bash ...`; the startup-script form
// runs `bash ...` so its exit trap can record the status.
std::string InstallerArgsOf(const ClusterPlan& p) {
  const std::string run = "bash \"$dir/gpuprov-install.sh\"";
  const std::size_t at = p.boot_script.rfind(run);
  if (at == std::string::npos) return "<no installer line>";
  return p.boot_script.substr(at + run.size());
}

TEST(ClusterPlan, TunnelAccessFirewallsTheNodeOnBothBootForms) {
  // No firewall API (no GPUPROV_CAP_OPEN_PORTS): the installer closes the node but SSH, whether
  // the cloud runs cloud-init or a startup script, plain or compressed (EC2-sized limit).
  for (std::uint64_t boot : {std::uint64_t{GPUPROV_CAP_BOOT_CLOUD_INIT},
                             std::uint64_t{GPUPROV_CAP_BOOT_STARTUP_SCRIPT}}) {
    for (std::size_t limit : {std::size_t{262144}, CompressedOnlyLimit()}) {
      ClusterPlan p = PlanCluster(GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_HOSTS_KUBERNETES | boot,
                                  limit);
      ASSERT_TRUE(p.boot_route) << limit;
      EXPECT_FALSE(p.direct);
      EXPECT_EQ(NodeFirewallFor(p), "ssh-only");
      EXPECT_LE(p.boot_script.size(), limit);
      EXPECT_EQ(InstallerArgsOf(p), " '--node-firewall' 'ssh-only'\n");
    }
  }
}

TEST(ClusterPlan, DirectAccessLeavesTheNodeFirewallAlone) {
  ClusterPlan p = PlanCluster(kCloudInit | GPUPROV_CAP_OPEN_PORTS, kEc2);
  ASSERT_TRUE(p.boot_route);
  EXPECT_EQ(NodeFirewallFor(p), "");
  EXPECT_EQ(InstallerArgsOf(p), "\n");
  // cloud-init's form hands the boot over to the installer.
  EXPECT_NE(p.boot_script.find("\nexec bash \"$dir/gpuprov-install.sh\"\n"), std::string::npos);
}

TEST(ClusterPlan, TooSmallLimitFallsBackToSshWithANote) {
  ClusterPlan p = PlanCluster(kCloudInit | GPUPROV_CAP_OPEN_PORTS, 4096);
  EXPECT_FALSE(p.boot_route);
  EXPECT_TRUE(p.direct);
  EXPECT_TRUE(p.boot_script.empty());
  EXPECT_NE(p.note.find("4096-byte"), std::string::npos) << p.note;
  EXPECT_NE(p.note.find("over SSH"), std::string::npos) << p.note;
  EXPECT_TRUE(p.refusal.empty());
}

// --install-route, one test per row of PlanCluster's route choice (the auto rows are above).
TEST(ClusterPlan, InstallRouteSshOnABootScriptCloudPlansTheSshRouteWithItsReason) {
  ClusterPlan p = PlanCluster(kCloudInit | GPUPROV_CAP_OPEN_PORTS, 65536, {}, InstallRoute::kSsh);
  EXPECT_FALSE(p.boot_route);
  EXPECT_TRUE(p.direct);  // access still follows the cloud's firewall API
  EXPECT_TRUE(p.boot_script.empty());
  EXPECT_TRUE(p.note.empty());
  EXPECT_TRUE(p.refusal.empty());
  EXPECT_EQ(BootRouteOf(p), BootRoute::kNone);
  EXPECT_EQ(PlannedSshRouteReason(p), "--install-route ssh");
}

TEST(ClusterPlan, InstallRouteSshOnACloudWithoutBootScriptsIsTheSshRouteAsAsked) {
  ClusterPlan p = PlanCluster(GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_HOSTS_KUBERNETES, 65536, {},
                              InstallRoute::kSsh);
  EXPECT_FALSE(p.boot_route);
  EXPECT_FALSE(p.direct);
  EXPECT_TRUE(p.refusal.empty());
  EXPECT_EQ(PlannedSshRouteReason(p), "--install-route ssh");
}

TEST(ClusterPlan, InstallRouteBootWhereTheScriptFitsIsTheBootRoute) {
  ClusterPlan p = PlanCluster(kCloudInit, kEc2, {}, InstallRoute::kBoot);
  EXPECT_TRUE(p.boot_route);
  EXPECT_FALSE(p.boot_script.empty());
  EXPECT_TRUE(p.refusal.empty());
}

TEST(ClusterPlan, InstallRouteBootOnACloudWithoutBootScriptsIsRefused) {
  ClusterPlan p = PlanCluster(GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_HOSTS_KUBERNETES, 65536, {},
                              InstallRoute::kBoot);
  EXPECT_FALSE(p.boot_route);
  EXPECT_NE(p.refusal.find("no boot script"), std::string::npos) << p.refusal;
}

TEST(ClusterPlan, InstallRouteBootWhereTheInstallerDoesNotFitIsRefusedNotFallenBack) {
  ClusterPlan p = PlanCluster(kCloudInit | GPUPROV_CAP_OPEN_PORTS, 4096, {}, InstallRoute::kBoot);
  EXPECT_FALSE(p.boot_route);
  EXPECT_TRUE(p.note.empty());
  EXPECT_NE(p.refusal.find("4096-byte"), std::string::npos) << p.refusal;
}

TEST(ClusterPlan, InstallRouteAutoOnACloudWithoutBootScriptsIsTheSshRouteUnrefused) {
  ClusterPlan p = PlanCluster(GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_HOSTS_KUBERNETES, 65536, {},
                              InstallRoute::kAuto);
  EXPECT_FALSE(p.boot_route);
  EXPECT_TRUE(p.refusal.empty());
  EXPECT_EQ(PlannedSshRouteReason(p), "the cloud runs no boot script");
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

// ---- The bring-up loop on a fake node: what it pushes, when it retries and when it stops. ----

/// A probe as the node prints it (cluster_probe.h): the marker, the install lock, cloud-init
/// and the k3s unit.
std::string ProbeOutput(bool installed, const std::string& cloud_init) {
  const std::string marker =
      installed ? R"({"schema_version": 1, "installer_version": ")" + InstallerVersion() +
                      R"(", "phase": "done", "result": "ok", "failed_step": null, "message": null, )"
                      R"("gpu_configured": false, "public_ip": "127.90.0.5"})"
                : "";
  return "@@gpuprov-probe 1@@\n@@marker@@\n" + marker + "\n@@lock@@\nfree\n@@cloud-init@@\n" +
         cloud_init + "\n@@k3s@@\n" + (installed ? "active" : "inactive") +
         "\n@@gpu@@\n@@end@@\n";
}
const std::string kCloudInitDone = R"({"status": "done", "errors": []})";

/// Node checks that pass: /readyz 200, one Ready node, CoreDNS 1/1.
const std::string kChecksPass =
    "@@readyz@@\n200\n@@nodes@@\n"
    R"({"items":[{"metadata":{"name":"n1"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}]})"
    "\n@@coredns@@\n"
    R"({"spec":{"replicas":1},"status":{"readyReplicas":1}})"
    "\n@@end@@\n";

std::string Pem(const std::string& what) {
  return "-----BEGIN " + what + "-----\nAAAA\n-----END " + what + "-----\n";
}

/// k3s.yaml as k3s writes it, with embedded (fake) credentials.
std::string K3sYaml() {
  KubeCredentials c{"https://127.0.0.1:6443", Pem("CERTIFICATE"), Pem("CERTIFICATE"),
                    Pem("EC PRIVATE KEY")};
  return RenderKubeconfig("default", "https://127.0.0.1:6443", c);
}

/// Answers each command by its purpose; probes come from a queue (the last one repeats).
class FakeNode : public NodeShell {
 public:
  SshRunResult RunAsRoot(const std::string& purpose, const std::string& command,
                         const std::string&, std::chrono::milliseconds) override {
    calls.push_back(purpose);
    commands.push_back(command);
    if (purpose == "probe") {
      std::string out = probes.front();
      if (probes.size() > 1) probes.pop_front();
      return {0, out, ""};
    }
    if (purpose == "push installer" || purpose == "re-run installer with the public IP") {
      return {installer_exit, "", installer_exit == 0 ? "" : "k3s failed to start\n"};
    }
    if (purpose == "cluster checks") return {0, checks, ""};
    if (purpose == "read kubeconfig") return {0, K3sYaml(), ""};
    if (purpose == "create CUDA check pod") return {0, "@@created@@\n{}\n@@code@@\n201\n", ""};
    if (purpose == "CUDA check") {
      return {0, "@@pod@@\n{\"kind\":\"Pod\",\"status\":{\"phase\":\"" + cuda_phase +
                     "\"}}\n@@events@@\n{\"items\":[]}\n@@log@@\n" + cuda_log + "\n@@end@@\n",
              ""};
    }
    if (purpose == "delete CUDA check pod") return {0, "", ""};
    return {127, "", "unexpected command " + purpose};
  }
  int Count(const std::string& purpose) const {
    return static_cast<int>(std::count(calls.begin(), calls.end(), purpose));
  }
  std::deque<std::string> probes;
  std::string checks = kChecksPass;
  std::string cuda_phase = "Succeeded";
  std::string cuda_log = "Test PASSED\nDone";
  int installer_exit = 0;
  std::vector<std::string> calls;
  std::vector<std::string> commands;
};

/// The API seen from this machine: reachable, with certificate names from a queue (the last
/// one repeats).
class FakeReach : public ApiReach {
 public:
  std::string ConnectError(const std::string&, int) override { return ""; }
  std::vector<std::string> CertificateNames(const std::string&, int, const std::string&) override {
    auto names = names_seen.front();
    if (names_seen.size() > 1) names_seen.pop_front();
    return names;
  }
  int ReadyzStatus(const std::string&, int, const KubeCredentials&) override { return 200; }
  std::string HandshakeError(const std::string& host, int port, const std::string&) override {
    handshakes.push_back(host + ":" + std::to_string(port));
    return handshake_error;
  }
  std::deque<std::vector<std::string>> names_seen;
  std::string handshake_error = "connection refused";
  std::vector<std::string> handshakes;
};

TEST(PublicApiCheck, AClosedPortIsRecordedWithWhy) {
  FakeReach reach;
  reach.handshake_error = "timed out after 3s";
  EXPECT_EQ(CheckApiClosedAtPublicAddress(reach, "pi1", "127.90.0.7", 6443, Pem("CERTIFICATE")),
            "closed: timed out after 3s");
  EXPECT_EQ(reach.handshakes, std::vector<std::string>{"127.90.0.7:6443"});
}

TEST(PublicApiCheck, AnApiAnsweringAtThePublicAddressFailsNamingItAndTheFix) {
  FakeReach reach;
  reach.handshake_error = "";
  try {
    CheckApiClosedAtPublicAddress(reach, "pi1", "127.90.0.7", 6443, Pem("CERTIFICATE"));
    FAIL() << "an exposed API passed";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the Kubernetes API of pi1 is open to the internet at 127.90.0.7:6443"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("tunnel access"), std::string::npos) << what;
    EXPECT_NE(e.hint().find("systemctl status gpuprov-firewall"), std::string::npos) << e.hint();
    EXPECT_NE(e.hint().find("--node-firewall ssh-only"), std::string::npos) << e.hint();
    EXPECT_NE(e.hint().find("gpuprov down pi1"), std::string::npos) << e.hint();
  }
}

class BringUpLoop : public ::testing::Test {
 protected:
  BringUpLoop() {
    plan.boot_route = true;
    plan.direct = true;
    plan.boot_script = "#!/bin/bash\n";
    in.vm_name = "box";
    in.plan = plan;
    in.public_ip = "127.9.9.9";
    in.kubeconfig_path = dir.path() / "kube" / "box.yaml";
    in.save = [this](VmRecord& r) { ++saves; (void)r; };
    in.reach = &reach;
    in.poll_interval = std::chrono::milliseconds(1);
    reach.names_seen = {{"127.0.0.1", "localhost", "127.9.9.9"}};
    rec.name = "box";
  }
  ClusterResult Run() { return BringUpCluster(node, in, rec); }
  /// The error (what, then "hint: ...") for node checks that never pass (api_wait 0).
  std::string ValidationError() {
    in.api_wait = std::chrono::seconds(0);
    node.probes = {ProbeOutput(true, kCloudInitDone)};
    try {
      Run();
    } catch (const Error& e) {
      return std::string(e.what()) + "\nhint: " + e.hint();
    }
    return "(no error)";
  }

  testing::ScopedTempDir dir;
  ClusterPlan plan;
  ClusterInputs in;
  FakeNode node;
  FakeReach reach;
  VmRecord rec;
  int saves = 0;
};

TEST_F(BringUpLoop, AnInstallDoneAtBootPushesNothingAndRecordsTheBootRoute) {
  node.probes = {ProbeOutput(true, kCloudInitDone)};
  ClusterResult r = Run();
  EXPECT_EQ(node.Count("push installer"), 0);
  EXPECT_EQ(node.Count("re-run installer with the public IP"), 0);
  EXPECT_EQ(rec.route, "boot");
  EXPECT_EQ(rec.route_reason, "");
  EXPECT_EQ(r.server, "https://127.9.9.9:6443");
  EXPECT_TRUE(std::filesystem::exists(in.kubeconfig_path));
  EXPECT_GT(saves, 0);
}

TEST_F(BringUpLoop, AfterInstallRunsOnceBetweenTheInstallAndTheValidation) {
  node.probes = {ProbeOutput(false, kCloudInitDone), ProbeOutput(true, kCloudInitDone)};
  std::vector<std::string> seen;
  in.after_install = [&](NodeShell& shell) {
    seen = node.calls;
    EXPECT_EQ(&shell, &node);
  };
  Run();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), "probe");  // the install's last probe saw k3s running
  EXPECT_EQ(std::count(seen.begin(), seen.end(), "push installer"), 1);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), "cluster checks"), 0);
  EXPECT_GT(node.Count("cluster checks"), 0);
}

TEST_F(BringUpLoop, AFailureAfterTheInstallStopsTheBringUpBeforeValidation) {
  node.probes = {ProbeOutput(true, kCloudInitDone)};
  in.after_install = [](NodeShell&) { throw Error("no join token", "look"); };
  EXPECT_THROW(Run(), Error);
  EXPECT_EQ(node.Count("cluster checks"), 0);
}

TEST_F(BringUpLoop, ABootInstallThatNeverRanIsPushedOnceAndTheRouteSaysSsh) {
  node.probes = {ProbeOutput(false, kCloudInitDone), ProbeOutput(true, kCloudInitDone)};
  Run();
  EXPECT_EQ(node.Count("push installer"), 1);
  EXPECT_EQ(node.Count("probe"), 2);
  EXPECT_EQ(rec.route, "ssh");
  EXPECT_NE(rec.route_reason.find("the boot install never ran"), std::string::npos)
      << rec.route_reason;
  EXPECT_EQ(rec.probe["pushed_over_ssh"], "yes");
}

TEST_F(BringUpLoop, GivesUpWhenK3sStillDoesNotRunAfterOnePush) {
  node.probes = {ProbeOutput(false, kCloudInitDone)};
  try {
    Run();
    FAIL() << "expected the bring-up to give up";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("after the installer ran over SSH"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(node.Count("push installer"), 1);  // never a second push
  EXPECT_EQ(node.Count("cluster checks"), 0);
}

TEST_F(BringUpLoop, ABootRunThatTakesTheLockAfterThePushIsWaitedFor) {
  // The boot run was still in cloud-init's early stages when the push ran; it took the lock
  // after the pushed run ended and is still installing at the next probe.
  std::string boot_run_holds_lock = ProbeOutput(true, R"({"status": "running", "errors": []})");
  boot_run_holds_lock.replace(boot_run_holds_lock.find("@@lock@@\nfree"),
                              std::string("@@lock@@\nfree").size(), "@@lock@@\nheld");
  node.probes = {ProbeOutput(false, kCloudInitDone), boot_run_holds_lock, boot_run_holds_lock,
                 ProbeOutput(true, kCloudInitDone)};
  Run();
  EXPECT_EQ(node.Count("push installer"), 1);  // waited, never a second push
  EXPECT_EQ(node.Count("probe"), 4);
  EXPECT_EQ(rec.probe["pushed_over_ssh"], "yes");
}

TEST_F(BringUpLoop, AFailedPushStopsWithTheInstallersLastLine) {
  node.probes = {ProbeOutput(false, kCloudInitDone)};
  node.installer_exit = 3;
  try {
    Run();
    FAIL() << "expected the push to fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(exit 3): k3s failed to start"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(node.Count("push installer"), 1);
  EXPECT_EQ(rec.probe["pushed_over_ssh"], "failed");
}

TEST_F(BringUpLoop, ACertificateWithoutThePublicIpIsReRunOnceWithIt) {
  node.probes = {ProbeOutput(true, kCloudInitDone)};
  reach.names_seen = {{"127.0.0.1", "localhost"}, {"127.0.0.1", "localhost", "127.9.9.9"}};
  Run();
  EXPECT_EQ(node.Count("re-run installer with the public IP"), 1);
  EXPECT_EQ(node.Count("push installer"), 0);
  EXPECT_EQ(rec.probe["san_rerun"], "yes");
  EXPECT_EQ(rec.route, "ssh");
  EXPECT_NE(rec.route_reason.find("--public-ip"), std::string::npos) << rec.route_reason;
}

TEST_F(BringUpLoop, TheReRunReasonNamesWhatTheCloudsSourceDidNotGive) {
  in.k3s.public_ip_source = "interface";
  node.probes = {ProbeOutput(true, kCloudInitDone)};
  reach.names_seen = {{"127.0.0.1", "localhost"}, {"127.0.0.1", "localhost", "127.9.9.9"}};
  Run();
  EXPECT_EQ(rec.route, "ssh");
  EXPECT_EQ(rec.route_reason,
            "the installer re-ran with --public-ip: the API certificate did not cover 127.9.9.9 "
            "(no public address on the VM's interfaces (the cloud puts none there: NAT))");
}

TEST_F(BringUpLoop, ACertificateStillWithoutThePublicIpAfterTheReRunGivesUp) {
  node.probes = {ProbeOutput(true, kCloudInitDone)};
  reach.names_seen = {{"127.0.0.1", "localhost"}};
  try {
    Run();
    FAIL() << "expected the bring-up to give up";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("still does not cover 127.9.9.9"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(node.Count("re-run installer with the public IP"), 1);  // once, not again
}

TEST_F(BringUpLoop, TheSshRouteRecordsWhyItWasTaken) {
  in.plan.boot_route = false;
  in.plan.boot_script.clear();
  node.probes = {ProbeOutput(false, "absent"), ProbeOutput(true, "absent")};
  Run();
  EXPECT_EQ(node.Count("push installer"), 1);
  EXPECT_EQ(rec.route, "ssh");
  EXPECT_EQ(rec.route_reason, "the cloud runs no boot script");
  // Direct access: the cloud's firewall is in front; the node's is left alone.
  for (size_t i = 0; i < node.calls.size(); ++i) {
    if (node.calls[i] == "push installer") {
      EXPECT_EQ(node.commands[i].find("--node-firewall"), std::string::npos) << node.commands[i];
    }
  }
}

TEST_F(BringUpLoop, TunnelAccessOverSshPushesTheInstallerWithTheNodeFirewall) {
  in.plan.boot_route = false;
  in.plan.direct = false;
  in.plan.boot_script.clear();
  in.ssh.host = "127.0.0.1";  // nothing listens on port 1: the tunnel check fails after the push
  in.ssh.port = 1;
  in.ssh.user = "root";
  node.probes = {ProbeOutput(false, "absent"), ProbeOutput(true, "absent")};
  EXPECT_ANY_THROW(Run());
  ASSERT_EQ(node.Count("push installer"), 1);
  for (size_t i = 0; i < node.calls.size(); ++i) {
    if (node.calls[i] == "push installer") {
      EXPECT_NE(node.commands[i].find(" '--node-firewall' 'ssh-only'"), std::string::npos)
          << node.commands[i];
    }
  }
  EXPECT_TRUE(reach.handshakes.empty());  // no public check before the tunnel check passed
}

TEST_F(BringUpLoop, ARerunThatFindsAnEarlierPushKeepsItsRoute) {
  rec.route = "ssh";
  rec.route_reason = "the boot install never ran (cloud-init done, no status marker)";
  node.probes = {ProbeOutput(true, kCloudInitDone)};
  Run();
  EXPECT_EQ(node.Count("push installer"), 0);
  EXPECT_EQ(rec.route, "ssh");
  EXPECT_EQ(rec.route_reason, "the boot install never ran (cloud-init done, no status marker)");
}

/// Node checks with \a coredns as the API's answer for the CoreDNS deployment, \a gpus
/// allocatable and \a sandbox as kube-system's FailedCreatePodSandBox events.
std::string Checks(const std::string& coredns, int gpus, const std::string& sandbox = "") {
  return "@@readyz@@\n200\n@@nodes@@\n"
         R"({"items":[{"metadata":{"name":"n1"},"status":{"conditions":[{"type":"Ready","status":"True"}],)"
         R"("allocatable":{"nvidia.com/gpu":")" + std::to_string(gpus) + R"("}}}]})"
         "\n@@coredns@@\n" + coredns + "\n@@sandbox@@\n" + sandbox + "\n@@end@@\n";
}
const std::string kCoreDnsReady = R"({"kind":"Deployment","spec":{"replicas":1},"status":{"readyReplicas":1}})";


TEST_F(BringUpLoop, ACoreDnsThatTheApiDoesNotHaveIsSaidSoNotZeroReplicas) {
  node.checks = Checks(R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":)"
                       R"("deployments.apps \"coredns\" not found","reason":"NotFound","code":404})",
                       0);
  const std::string err = ValidationError();
  EXPECT_NE(err.find("CoreDNS is not ready (deployment not found)"), std::string::npos) << err;
}

TEST_F(BringUpLoop, ARefusedClientCertificateIsSaidSoForCoreDns) {
  node.checks = Checks(R"({"kind":"Status","status":"Failure","message":"Unauthorized",)"
                       R"("reason":"Unauthorized","code":401})",
                       0);
  const std::string err = ValidationError();
  EXPECT_NE(err.find("CoreDNS is not ready (the API refused gpuprov's client certificate (HTTP "
                     "401: Unauthorized))"),
            std::string::npos)
      << err;
}

TEST_F(BringUpLoop, ADefaultRuntimeContainerdLacksIsNamedInsteadOfCoreDns) {
  node.checks = Checks(R"({"kind":"Deployment","spec":{"replicas":1},"status":{}})", 0,
                       R"({"items":[{"reason":"FailedCreatePodSandBox","message":"Failed to create )"
                       R"(pod sandbox: rpc error: code = Unknown desc = failed to get sandbox )"
                       R"(runtime: no runtime for \"nvidia\" is configured"}]})");
  const std::string err = ValidationError();
  EXPECT_NE(err.find("pods cannot start on node n1: Failed to create pod sandbox"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("no runtime for \"nvidia\" is configured"), std::string::npos) << err;
  EXPECT_NE(err.find("hint: k3s did not find nvidia-container-runtime"), std::string::npos) << err;
}

TEST_F(BringUpLoop, AGpuNodeEndsWithTheCudaCheckAsAPhaseOfItsOwn) {
  node.probes = {ProbeOutput(true, kCloudInitDone)};
  node.checks = Checks(kCoreDnsReady, 2);
  in.expected_gpus = 2;
  ClusterResult r = Run();
  EXPECT_TRUE(r.cuda_check_passed);
  EXPECT_EQ(node.Count("create CUDA check pod"), 1);
  EXPECT_EQ(node.Count("delete CUDA check pod"), 1);
  EXPECT_EQ(node.calls.back(), "delete CUDA check pod");
  EXPECT_EQ(rec.probe["cuda_check"], "passed: Done");
  EXPECT_EQ(rec.phase_seconds.count("cuda"), 1u);
  EXPECT_TRUE(std::filesystem::exists(in.kubeconfig_path));  // written before the check
}

TEST_F(BringUpLoop, AFailedCudaCheckIsRecordedAndThrown) {
  node.probes = {ProbeOutput(true, kCloudInitDone)};
  node.checks = Checks(kCoreDnsReady, 1);
  node.cuda_phase = "Failed";
  node.cuda_log = "Failed to allocate device vector A (error code system not yet initialized)!";
  in.expected_gpus = 1;
  EXPECT_THROW(Run(), Error);
  EXPECT_EQ(rec.probe["cuda_check"].rfind("failed: the CUDA check failed on box: CUDA error 802", 0),
            0u)
      << rec.probe["cuda_check"];
  EXPECT_EQ(rec.phase_seconds.count("cuda"), 1u);
}

TEST_F(BringUpLoop, TheCudaCheckIsSkippedWhenOffAndOnNodesWithoutGpus) {
  node.probes = {ProbeOutput(true, kCloudInitDone)};
  node.checks = Checks(kCoreDnsReady, 1);
  in.expected_gpus = 1;
  in.cuda_check = false;
  EXPECT_FALSE(Run().cuda_check_passed);
  EXPECT_EQ(rec.probe["cuda_check"], "skipped (smoke test off)");
  in.cuda_check = true;
  in.expected_gpus = 0;
  EXPECT_FALSE(Run().cuda_check_passed);
  EXPECT_EQ(node.Count("create CUDA check pod"), 0);
  EXPECT_EQ(rec.phase_seconds.count("cuda"), 0u);
}

// ---- A GPU without a working driver (issue 32, F2) ----

/// A probe of a node with one NVIDIA GPU on the PCI bus: \a gpu "" (nvidia-smi fails) or the
/// GPU nvidia-smi lists; the marker an installer wrote (\a marker_json "" for none).
std::string GpuNodeProbe(const std::string& marker_json, const std::string& gpu,
                         const std::string& k3s = "active") {
  return "@@gpuprov-probe 1@@\n@@marker@@\n" + marker_json + "\n@@lock@@\nfree\n@@cloud-init@@\n" +
         kCloudInitDone + "\n@@k3s@@\n" + k3s + "\n@@gpu@@\n" + gpu +
         "@@gpu-bus@@\npci_nvidia=1\n" +
         (gpu.empty() ? "smi_error=NVIDIA-SMI has failed because it couldn't communicate with "
                        "the NVIDIA driver.\n"
                      : "") +
         "@@init@@\npid1=systemd\nsystemd_booted=yes\ncontainer=none\npid1_seconds=0\n@@end@@\n";
}

std::string DriverMarker(const std::string& result, bool reboot_required, bool gpu_configured) {
  return R"({"schema_version": 1, "installer_version": ")" + InstallerVersion() +
         R"(", "phase": ")" + (result == "ok" ? "done" : "gpu-detect") + R"(", "result": ")" +
         result + R"(", "failed_step": )" + (result == "ok" ? "null" : R"("gpu-detect")") +
         R"(, "message": null, "gpu_configured": )" + (gpu_configured ? "true" : "false") +
         R"(, "reboot_required": )" + (reboot_required ? "true" : "false") + "}";
}

TEST_F(BringUpLoop, AGpuWithoutADriverFailsAtTheBootInstallsMarkerNamingTheCloudsGpuImage) {
  in.cloud = "digitalocean";
  node.probes = {GpuNodeProbe(DriverMarker("failed", false, false), "", "inactive")};
  try {
    Run();
    ADD_FAILURE() << "a GPU without a driver went on";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("box: 1 NVIDIA GPU(s) on the PCI bus but no working "
                                         "NVIDIA driver (nvidia-smi: NVIDIA-SMI has failed"),
              std::string::npos)
        << e.what();
    EXPECT_NE(e.hint().find("use a GPU image of digitalocean"), std::string::npos) << e.hint();
    EXPECT_NE(e.hint().find("digitalocean/README.md"), std::string::npos) << e.hint();
    EXPECT_NE(e.hint().find("--nvidia-driver install"), std::string::npos) << e.hint();
  }
  EXPECT_EQ(node.calls, std::vector<std::string>{"probe"});
}

TEST_F(BringUpLoop, ADriverTheInstallerAddedIsLoadedByOneRebootThenTheGpuIsConfigured) {
  in.k3s.nvidia_driver = "install";
  // Before the reboot; after it (the wait's probe, then the loop's); after the installer re-ran.
  node.probes = {GpuNodeProbe(DriverMarker("ok", true, false), ""),
                 GpuNodeProbe(DriverMarker("ok", true, false), "NVIDIA L4\n"),
                 GpuNodeProbe(DriverMarker("ok", true, false), "NVIDIA L4\n"),
                 GpuNodeProbe(DriverMarker("ok", false, true), "NVIDIA L4\n")};
  Run();
  EXPECT_EQ(node.Count("reboot"), 1);
  EXPECT_EQ(node.Count("push installer"), 1);
  EXPECT_EQ(rec.probe["rebooted"], "yes");
  EXPECT_NE(node.commands[1].find("systemctl reboot"), std::string::npos) << node.commands[1];
}

TEST_F(BringUpLoop, ADriverStillNotLoadedAfterTheRebootStopsInsteadOfRebootingAgain) {
  in.k3s.nvidia_driver = "install";
  node.probes = {GpuNodeProbe(DriverMarker("ok", true, false), "")};
  EXPECT_THROW(Run(), Error);
  EXPECT_EQ(node.Count("reboot"), 1);
}

}  // namespace
}  // namespace gpuprov
