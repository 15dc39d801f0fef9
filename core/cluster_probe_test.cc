#include "cluster_probe.h"

#include <gtest/gtest.h>

#include "error.h"
#include "node_shell.h"

namespace gpuprov {
namespace {

using std::chrono::seconds;

/// A probe output as the node prints it.
std::string Output(const std::string& marker, const std::string& lock, const std::string& cloud_init,
                   const std::string& k3s, const std::string& gpu) {
  return "@@gpuprov-probe 1@@\n@@marker@@\n" + marker + "\n@@lock@@\n" + lock +
         "\n@@cloud-init@@\n" + cloud_init + "\n@@k3s@@\n" + k3s + "\n@@gpu@@\n" + gpu +
         "@@end@@\n";
}

std::string Marker(const std::string& result, bool gpu_configured, const std::string& version = "0.1.0") {
  return R"({"schema_version": 1, "installer_version": ")" + version + R"(", "phase": ")" +
         (result == "failed" ? "k3s-start" : "done") + R"(", "result": ")" + result +
         R"(", "failed_step": )" + (result == "failed" ? R"("k3s-start")" : "null") +
         R"(, "message": )" + (result == "failed" ? R"("k3s did not start")" : "null") +
         R"(, "gpu_configured": )" + (gpu_configured ? "true" : "false") +
         R"(, "public_ip": "127.90.0.5"})";
}

const std::string kDone = R"({"boot_status_code": "enabled-by-generator", "datasource": "nocloud", "errors": [], "status": "done"})";
const std::string kRunning = R"({"status": "running", "errors": []})";
const std::string kError = R"J({"status": "error", "errors": ["('scripts_user', RuntimeError('Runparts: 1 failures'))"]})J";

NodeProbe Parse(const std::string& marker, const std::string& lock, const std::string& ci,
                const std::string& k3s, const std::string& gpu = "") {
  return ParseNodeProbe(Output(marker, lock, ci, k3s, gpu));
}

ClusterDecision Boot(const NodeProbe& p, int waited = 0, int limit = 900) {
  return DecideClusterAction(p, true, seconds(waited), seconds(limit), "0.1.0");
}

TEST(NodeProbe, ParsesEverySection) {
  NodeProbe p = Parse(Marker("ok", true), "free", kDone, "active", "NVIDIA L4\nNVIDIA L4\n");
  EXPECT_TRUE(p.marker_present);
  EXPECT_EQ(p.marker_result, "ok");
  EXPECT_EQ(p.marker_version, "0.1.0");
  EXPECT_TRUE(p.marker_gpu_configured);
  EXPECT_EQ(p.marker_public_ip, "127.90.0.5");
  EXPECT_FALSE(p.installer_running);
  EXPECT_EQ(p.cloud_init, "done");
  EXPECT_EQ(p.k3s_unit, "active");
  EXPECT_TRUE(p.gpu_present);
  EXPECT_EQ(p.gpu_name, "NVIDIA L4");
  EXPECT_EQ(p.gpu_count, 2);
}

TEST(NodeProbe, CloudInitJsonErrorsAndTextFallback) {
  NodeProbe p = Parse("", "free", kError, "inactive");
  EXPECT_EQ(p.cloud_init, "error");
  EXPECT_NE(p.cloud_init_detail.find("scripts_user"), std::string::npos);
  EXPECT_EQ(Parse("", "free", "status: running", "inactive").cloud_init, "running");
  EXPECT_EQ(Parse("", "free", "absent", "").cloud_init, "absent");
  EXPECT_FALSE(Parse("", "free", "absent", "").marker_present);
}

TEST(NodeProbe, TruncatedOutputIsAnError) {
  EXPECT_THROW(ParseNodeProbe("@@gpuprov-probe 1@@\n@@marker@@\n"), Error);
  EXPECT_THROW(ParseNodeProbe("bash: line 1: syntax error\n"), Error);
}

TEST(NodeProbe, DamagedMarkerIsUnreadable) {
  NodeProbe p = Parse("{\"installer_version\": ", "free", kDone, "inactive");
  EXPECT_TRUE(p.marker_present);
  EXPECT_EQ(p.marker_result, "unreadable");
  EXPECT_EQ(Boot(p).action, ClusterAction::kPushInstaller);
}

class FakeShell : public NodeShell {
 public:
  explicit FakeShell(std::string out) : out_(std::move(out)) {}
  SshRunResult RunAsRoot(const std::string& purpose, const std::string& command,
                         const std::string&, std::chrono::milliseconds) override {
    calls.push_back(purpose);
    commands.push_back(command);
    return SshRunResult{0, out_, ""};
  }
  std::vector<std::string> calls, commands;

 private:
  std::string out_;
};

TEST(NodeProbe, IsOneRoundTrip) {
  FakeShell shell(Output(Marker("ok", false), "free", kDone, "active", ""));
  NodeProbe p = RunNodeProbe(shell);
  EXPECT_EQ(shell.calls, std::vector<std::string>{"probe"});
  EXPECT_EQ(p.k3s_unit, "active");
  // Everything it reads is in the one command.
  const std::string& cmd = shell.commands.at(0);
  for (const char* part : {"install-status.json", "cloud-init status --format json",
                           "systemctl is-active k3s", "nvidia-smi", "flock -n"}) {
    EXPECT_NE(cmd.find(part), std::string::npos) << part;
  }
}

// ---- The decision table (design.md section 3), one test per row and its edges. ----

TEST(DecisionTable, InstalledAtBootAndRunningGoesToTheApiCheck) {
  EXPECT_EQ(Boot(Parse(Marker("ok", false), "free", kDone, "active")).action,
            ClusterAction::kCheckApi);
  EXPECT_EQ(Boot(Parse(Marker("ok", true), "free", kDone, "active", "NVIDIA L4\n")).action,
            ClusterAction::kCheckApi);
}

TEST(DecisionTable, BootInstallStillRunningWaits) {
  EXPECT_EQ(Boot(Parse("", "free", kRunning, "inactive")).action, ClusterAction::kWait);
  EXPECT_EQ(Boot(Parse("", "free", R"({"status": "not started"})", "")).action, ClusterAction::kWait);
  EXPECT_EQ(Boot(Parse(Marker("running", false), "held", kRunning, "activating")).action,
            ClusterAction::kWait);
  // The lock held without a marker yet: the installer just started.
  EXPECT_EQ(Boot(Parse("", "held", kDone, "")).action, ClusterAction::kWait);
}

TEST(DecisionTable, BootInstallStillRunningAfterTheLimitIsPushed) {
  ClusterDecision d = Boot(Parse("", "free", kRunning, "inactive"), 900, 900);
  EXPECT_EQ(d.action, ClusterAction::kPushInstaller);
  EXPECT_NE(d.reason.find("still running after 900s"), std::string::npos) << d.reason;
}

TEST(DecisionTable, BootInstallFailedIsPushed) {
  ClusterDecision d = Boot(Parse(Marker("failed", false), "free", kError, "failed"));
  EXPECT_EQ(d.action, ClusterAction::kPushInstaller);
  EXPECT_NE(d.reason.find("k3s-start"), std::string::npos) << d.reason;
  // The boot script failed before the installer wrote anything.
  d = Boot(Parse("", "free", kError, ""));
  EXPECT_EQ(d.action, ClusterAction::kPushInstaller);
  EXPECT_NE(d.reason.find("cloud-init error"), std::string::npos) << d.reason;
  // A run that died holding no lock, its marker still "running".
  EXPECT_EQ(Boot(Parse(Marker("running", false), "free", kDone, "inactive")).action,
            ClusterAction::kPushInstaller);
}

TEST(DecisionTable, BootInstallNeverRanIsPushed) {
  // No cloud-init at all, cloud-init disabled, or cloud-init done without our marker (a reused
  // VM whose user data was not ours).
  for (const std::string& ci : {std::string("absent"), std::string(R"({"status": "disabled"})"), kDone}) {
    ClusterDecision d = Boot(Parse("", "free", ci, ""));
    EXPECT_EQ(d.action, ClusterAction::kPushInstaller) << ci;
    EXPECT_NE(d.reason.find("never ran"), std::string::npos) << d.reason;
  }
}

TEST(DecisionTable, AGpuTheBootRunDidNotSeeIsPushed) {
  ClusterDecision d = Boot(Parse(Marker("ok", false), "free", kDone, "active", "NVIDIA H100\n"));
  EXPECT_EQ(d.action, ClusterAction::kPushInstaller);
  EXPECT_NE(d.reason.find("GPU"), std::string::npos);
}

TEST(DecisionTable, OlderInstallerOrStoppedK3sIsPushed) {
  EXPECT_EQ(Boot(Parse(Marker("ok", false, "0.0.9"), "free", kDone, "active")).action,
            ClusterAction::kPushInstaller);
  EXPECT_EQ(Boot(Parse(Marker("ok", false), "free", kDone, "failed")).action,
            ClusterAction::kPushInstaller);
}

TEST(DecisionTable, SshRoutePushesUnlessInstalled) {
  auto ssh = [](const NodeProbe& p) {
    return DecideClusterAction(p, false, seconds(0), seconds(900), "0.1.0").action;
  };
  EXPECT_EQ(ssh(Parse("", "free", "absent", "")), ClusterAction::kPushInstaller);
  EXPECT_EQ(ssh(Parse("", "held", kRunning, "")), ClusterAction::kPushInstaller);
  EXPECT_EQ(ssh(Parse(Marker("ok", false), "free", "absent", "active")), ClusterAction::kCheckApi);
}

TEST(NodeProbe, DescribeForTheRecord) {
  auto m = DescribeNodeProbe(Parse(Marker("ok", true), "free", kDone, "active", "NVIDIA L4\n"));
  EXPECT_EQ(m["cloud_init"], "done");
  EXPECT_EQ(m["k3s_unit"], "active");
  EXPECT_EQ(m["gpu"], "NVIDIA L4 x1");
  EXPECT_EQ(m["marker"], "ok (installer 0.1.0, phase done)");
}

}  // namespace
}  // namespace gpuprov
