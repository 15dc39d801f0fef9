#include "cluster_probe.h"

#include <gtest/gtest.h>

#include "error.h"
#include "installer_bundle.h"
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

// The "init" section as the probe prints it. CapEff values as /proc/self/status shows them for
// root: a VM (every capability), Docker's default set (no CAP_SYS_ADMIN), and Docker's default
// set plus SYS_ADMIN (how the test VMs run).
constexpr const char* kCapsVm = "000001ffffffffff";
constexpr const char* kCapsDockerDefault = "00000000a80425fb";
constexpr const char* kCapsDockerSysAdmin = "00000000a82425fb";

std::string Init(const std::string& pid1, const std::string& booted,
                 const std::string& container, const std::string& capeff) {
  return "pid1=" + pid1 + "\nsystemd_booted=" + booted + "\ncontainer=" + container +
         "\ncapeff=" + capeff + "\n";
}

// A probe output with an "init" section before the end.
NodeProbe ParseWithInit(const std::string& init, const std::string& marker = "",
                        const std::string& ci = "absent", const std::string& k3s = "") {
  std::string out = Output(marker, "free", ci, k3s, "");
  out.insert(out.find("@@end@@"), "@@init@@\n" + init);
  return ParseNodeProbe(out);
}

// The node a RunPod-like container offer gives: sshd run as PID 1 by Docker, default caps.
NodeProbe ContainerNode(const std::string& marker = "", const std::string& ci = "absent",
                        const std::string& k3s = "") {
  return ParseWithInit(Init("sshd", "no", "docker", kCapsDockerDefault), marker, ci, k3s);
}

ClusterDecision Boot(const NodeProbe& p, int waited = 0, int limit = 900) {
  return DecideClusterAction(p, BootRoute::kCloudInit, seconds(waited), seconds(limit), "0.1.0");
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
                           "systemctl is-active k3s", "nvidia-smi", "flock -n", "/proc/1/comm",
                           "/run/systemd/system", "CapEff", "/.dockerenv"}) {
    EXPECT_NE(cmd.find(part), std::string::npos) << part;
  }
}

// ---- The decision table (docs/design.md §3), one test per row and its edges. ----

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
    return DecideClusterAction(p, BootRoute::kNone, seconds(0), seconds(900), "0.1.0").action;
  };
  EXPECT_EQ(ssh(Parse("", "free", "absent", "")), ClusterAction::kPushInstaller);
  EXPECT_EQ(ssh(Parse("", "held", kRunning, "")), ClusterAction::kPushInstaller);
  EXPECT_EQ(ssh(Parse(Marker("ok", false), "free", "absent", "active")), ClusterAction::kCheckApi);
}

TEST(NodeProbe, ParsesTheInitSection) {
  NodeProbe vm = ParseWithInit(Init("systemd", "yes", "none", kCapsVm));
  EXPECT_EQ(vm.pid1, "systemd");
  EXPECT_EQ(vm.systemd_booted, true);
  EXPECT_EQ(vm.container, "none");
  EXPECT_EQ(vm.cap_sys_admin, true);
  NodeProbe c = ContainerNode();
  EXPECT_EQ(c.pid1, "sshd");
  EXPECT_EQ(c.systemd_booted, false);
  EXPECT_EQ(c.container, "docker");
  EXPECT_EQ(c.cap_sys_admin, false);
  EXPECT_EQ(ParseWithInit(Init("systemd", "yes", "docker", kCapsDockerSysAdmin)).cap_sys_admin,
            true);
  // Unreadable values stay unknown.
  NodeProbe odd = ParseWithInit("pid1=\nsystemd_booted=maybe\ncontainer=\ncapeff=zz\n");
  EXPECT_EQ(odd.pid1, "");
  EXPECT_FALSE(odd.systemd_booted.has_value());
  EXPECT_FALSE(odd.cap_sys_admin.has_value());
}

TEST(NodeProbe, WithoutTheInitSectionNothingIsAssumed) {
  NodeProbe p = Parse("", "free", "absent", "");
  EXPECT_EQ(p.pid1, "");
  EXPECT_FALSE(p.systemd_booted.has_value());
  EXPECT_FALSE(p.cap_sys_admin.has_value());
  EXPECT_EQ(CannotHostK3s(p), "");
  EXPECT_EQ(Boot(p).action, ClusterAction::kPushInstaller);
}

// A container where systemd is not PID 1 fails at once on either route, whatever else the probe
// found: nothing to wait for (cloud-init "running" would otherwise wait 15 minutes) and nothing
// to push (the installer needs systemd).
TEST(DecisionTable, SystemdNotPid1FailsAtOnce) {
  auto ssh = [](const NodeProbe& p) {
    return DecideClusterAction(p, BootRoute::kNone, seconds(0), seconds(900), "0.1.0");
  };
  for (const ClusterDecision& d :
       {Boot(ContainerNode()), ssh(ContainerNode()), Boot(ContainerNode("", kRunning)),
        ssh(ContainerNode(Marker("ok", false), "absent", "active")),
        Boot(ContainerNode(Marker("failed", false), kError, "failed"))}) {
    EXPECT_EQ(d.action, ClusterAction::kFail) << d.reason;
    EXPECT_NE(d.reason.find("cannot host k3s"), std::string::npos) << d.reason;
    EXPECT_NE(d.reason.find("systemd is not PID 1"), std::string::npos) << d.reason;
    EXPECT_NE(d.reason.find("PID 1 is sshd"), std::string::npos) << d.reason;
    EXPECT_NE(d.reason.find("docker container, not a VM"), std::string::npos) << d.reason;
  }
  EXPECT_STREQ(ToString(ClusterAction::kFail), "fail");
}

TEST(DecisionTable, NoSystemdRunningFailsEvenWhenPid1IsCalledInit) {
  // sysvinit, or an init shim: /run/systemd/system is what tells.
  ClusterDecision d = Boot(ParseWithInit(Init("init", "no", "none", kCapsVm)));
  EXPECT_EQ(d.action, ClusterAction::kFail);
  EXPECT_NE(d.reason.find("systemd is not PID 1 (PID 1 is init)"), std::string::npos) << d.reason;
  // A shell as PID 1 with a stale /run/systemd/system in the image is no systemd either.
  EXPECT_EQ(Boot(ParseWithInit(Init("bash", "yes", "docker", kCapsDockerDefault))).action,
            ClusterAction::kFail);
}

TEST(DecisionTable, UnprivilegedContainerFailsAtOnce) {
  ClusterDecision d = Boot(ParseWithInit(Init("systemd", "yes", "lxc", kCapsDockerDefault)));
  EXPECT_EQ(d.action, ClusterAction::kFail);
  EXPECT_NE(d.reason.find("unprivileged lxc container (no CAP_SYS_ADMIN)"), std::string::npos)
      << d.reason;
}

TEST(DecisionTable, VmsAndPrivilegedSystemdContainersGoOn) {
  // A VM, and a container with systemd as PID 1 and CAP_SYS_ADMIN (how the test VMs run): the
  // rest of the table decides.
  for (const std::string& init : {Init("systemd", "yes", "none", kCapsVm),
                                  Init("systemd", "yes", "docker", kCapsDockerSysAdmin)}) {
    NodeProbe p = ParseWithInit(init, Marker("ok", false), kDone, "active");
    EXPECT_EQ(CannotHostK3s(p), "") << init;
    EXPECT_EQ(Boot(p).action, ClusterAction::kCheckApi) << init;
    EXPECT_EQ(Boot(ParseWithInit(init, "", kRunning)).action, ClusterAction::kWait) << init;
  }
}

// ---- The startup-script route (Verda): the same rows without asking cloud-init. ----

// A probe output with the startup script's trace and the time since boot; cloud-init's answer
// is whatever the node says (it is not asked on this route: "done" below would read as "never
// ran" on the cloud-init route, "running" as "still running").
NodeProbe Startup(const std::string& marker, const std::string& lock, const std::string& trace,
                  long booted, const std::string& ci = kDone, const std::string& k3s = "",
                  const std::string& gpu = "") {
  std::string out = Output(marker, lock, ci, k3s, gpu);
  out.insert(out.find("@@cloud-init@@"), "@@boot-trace@@\n" + trace + "\n");
  out.insert(out.find("@@end@@"),
             "@@init@@\n" + Init("systemd", "yes", "none", kCapsVm) +
                 (booted >= 0 ? "pid1_seconds=" + std::to_string(booted) + "\n" : ""));
  return ParseNodeProbe(out);
}

ClusterDecision Script(const NodeProbe& p, int waited = 0, int limit = 900) {
  return DecideClusterAction(p, BootRoute::kStartupScript, seconds(waited), seconds(limit),
                             "0.1.0");
}

constexpr const char* kStarted = "started 2026-12-03T12:00:00Z";

TEST(NodeProbe, ParsesTheBootTraceAndTheTimeSinceBoot) {
  NodeProbe p = Startup("", "free", std::string(kStarted) + "\nexit 3", 42);
  EXPECT_EQ(p.boot_trace, "exited");
  EXPECT_EQ(p.boot_trace_exit, 3);
  EXPECT_EQ(p.booted_seconds, 42);
  EXPECT_EQ(DescribeNodeProbe(p)["boot_script"], "exit 3");
  p = Startup("", "free", kStarted, -1);
  EXPECT_EQ(p.boot_trace, "started");
  EXPECT_FALSE(p.booted_seconds.has_value());
  // A second boot's run starts anew; an exit line without a start is ignored.
  EXPECT_EQ(Startup("", "free", std::string(kStarted) + "\nexit 0\n" + kStarted, 5).boot_trace,
            "started");
  EXPECT_EQ(Startup("", "free", "exit 0", 5).boot_trace, "");
  EXPECT_EQ(Startup("", "free", "", 5).boot_trace, "");
  EXPECT_EQ(DescribeNodeProbe(Startup("", "free", "", 5)).count("boot_script"), 0u);
  // Everything is still one command.
  for (const char* part : {kNodeBootTracePath, "ps -o etimes= -p 1"}) {
    EXPECT_NE(NodeProbeCommand().find(part), std::string::npos) << part;
  }
}

// A boot install that ends while the probe runs must not look like one that never started: what
// says it ended (cloud-init's status, the startup script's trace) is read first, the lock next,
// the marker last. (CI saw cloud-init "error" beside an absent marker when the marker was read
// first: cloud-init status takes most of a second to start.)
TEST(NodeProbe, ReadsWhatSaysABootInstallEndedBeforeTheMarker) {
  const std::string& cmd = NodeProbeCommand();
  const size_t cloud_init = cmd.find("@@cloud-init@@");
  const size_t boot_trace = cmd.find("@@boot-trace@@");
  const size_t lock = cmd.find("@@lock@@");
  const size_t marker = cmd.find("@@marker@@");
  ASSERT_NE(marker, std::string::npos);
  EXPECT_LT(cloud_init, lock);
  EXPECT_LT(boot_trace, lock);
  EXPECT_LT(lock, marker);
}

TEST(CloudInitRoute, ARunningInstallWaitingForAptsLockSaysSo) {
  NodeProbe p;
  p.marker_present = true;
  p.marker_version = "0.1.0";
  p.marker_result = "running";
  p.marker_phase = "nvidia-toolkit";
  p.marker_message = "waiting for apt's lock (at most 900s): Could not get lock "
                     "/var/lib/apt/lists/lock. It is held by process 412 (python3)";
  p.installer_running = true;
  p.cloud_init = "running";
  ClusterDecision d = DecideClusterAction(p, BootRoute::kCloudInit, seconds(20), seconds(900), "0.1.0");
  EXPECT_EQ(d.action, ClusterAction::kWait);
  EXPECT_EQ(d.reason, "the boot install is running (nvidia-toolkit: waiting for apt's lock (at "
                      "most 900s): Could not get lock /var/lib/apt/lists/lock. It is held by "
                      "process 412 (python3))");
  p.marker_message.clear();
  d = DecideClusterAction(p, BootRoute::kCloudInit, seconds(20), seconds(900), "0.1.0");
  EXPECT_EQ(d.reason, "the boot install is running (nvidia-toolkit)");
}

TEST(StartupScriptRoute, InstalledAndRunningGoesToTheApiCheck) {
  // cloud-init says nothing useful here ("absent": an image without it).
  ClusterDecision d = Script(Startup(Marker("ok", false), "free", std::string(kStarted) + "\nexit 0",
                                     60, "absent", "active"));
  EXPECT_EQ(d.action, ClusterAction::kCheckApi) << d.reason;
}

TEST(StartupScriptRoute, StillRunningWaitsThenIsPushedAtTheLimit) {
  // The installer holds its lock (cloud-init "done" does not matter).
  ClusterDecision d = Script(Startup(Marker("running", false), "held", kStarted, 30));
  EXPECT_EQ(d.action, ClusterAction::kWait);
  EXPECT_NE(d.reason.find("the boot install is running"), std::string::npos) << d.reason;
  // The script started and is still writing the installer (no marker, no lock yet).
  d = Script(Startup("", "free", kStarted, 30));
  EXPECT_EQ(d.action, ClusterAction::kWait);
  EXPECT_NE(d.reason.find("the startup script is running"), std::string::npos) << d.reason;
  // No trace yet on a node up for 20 s: the cloud has not started it yet.
  d = Script(Startup("", "free", "", 20));
  EXPECT_EQ(d.action, ClusterAction::kWait);
  EXPECT_NE(d.reason.find("has not started yet"), std::string::npos) << d.reason;
  // At the limit, each is pushed.
  for (const NodeProbe& p : {Startup(Marker("running", false), "held", kStarted, 900),
                             Startup("", "free", kStarted, 900)}) {
    d = Script(p, 900, 900);
    EXPECT_EQ(d.action, ClusterAction::kPushInstaller);
    EXPECT_NE(d.reason.find("still running after 900s"), std::string::npos) << d.reason;
  }
}

TEST(StartupScriptRoute, FailedIsPushed) {
  // The installer failed and said where.
  ClusterDecision d = Script(Startup(Marker("failed", false), "free",
                                     std::string(kStarted) + "\nexit 1", 80, kDone, "failed"));
  EXPECT_EQ(d.action, ClusterAction::kPushInstaller);
  EXPECT_NE(d.reason.find("failed at step k3s-start: k3s did not start"), std::string::npos)
      << d.reason;
  // The installer died (killed, the node rebooted): its marker still says running, lock free.
  d = Script(Startup(Marker("running", false), "free", std::string(kStarted) + "\nexit 137", 80));
  EXPECT_EQ(d.action, ClusterAction::kPushInstaller);
  EXPECT_NE(d.reason.find("stopped in step done"), std::string::npos) << d.reason;
  // The script failed before the installer wrote anything (cloud-init "done" is not asked).
  d = Script(Startup("", "free", std::string(kStarted) + "\nexit 2", 80, kDone));
  EXPECT_EQ(d.action, ClusterAction::kPushInstaller);
  EXPECT_NE(d.reason.find("the startup script failed (exit 2)"), std::string::npos) << d.reason;
  // Ended with 0 but wrote no marker: not gpuprov's installer that ran.
  d = Script(Startup("", "free", std::string(kStarted) + "\nexit 0", 80));
  EXPECT_EQ(d.action, ClusterAction::kPushInstaller);
  EXPECT_NE(d.reason.find("ended without installing"), std::string::npos) << d.reason;
}

TEST(StartupScriptRoute, NeverRanIsPushedOnceTheStartWindowHasPassed) {
  // No trace on a node up longer than the start window (a reused VM made without the script,
  // or a script that failed before its first line): pushed at once, whatever cloud-init says.
  for (const std::string& ci : {kDone, kRunning, std::string("absent")}) {
    ClusterDecision d = Script(Startup("", "free", "", 400, ci));
    EXPECT_EQ(d.action, ClusterAction::kPushInstaller) << ci;
    EXPECT_NE(d.reason.find("never ran (no trace of the startup script 400s after boot"),
              std::string::npos)
        << d.reason;
  }
  // The window is capped by the boot install wait: with 20 s, a node up 25 s is past it.
  EXPECT_EQ(Script(Startup("", "free", "", 25), 0, 20).action, ClusterAction::kPushInstaller);
  EXPECT_EQ(Script(Startup("", "free", "", 15), 0, 20).action, ClusterAction::kWait);
  // Without the time since boot, gpuprov's own waiting counts.
  EXPECT_EQ(Script(Startup("", "free", "", -1), 10, 900).action, ClusterAction::kWait);
  ClusterDecision d = Script(Startup("", "free", "", -1), 300, 900);
  EXPECT_EQ(d.action, ClusterAction::kPushInstaller);
  EXPECT_NE(d.reason.find("after 300s"), std::string::npos) << d.reason;
}

TEST(StartupScriptRoute, AGpuTheBootRunDidNotSeeIsPushed) {
  ClusterDecision d = Script(Startup(Marker("ok", false), "free", std::string(kStarted) + "\nexit 0",
                                     60, "absent", "active", "NVIDIA H100\n"));
  EXPECT_EQ(d.action, ClusterAction::kPushInstaller);
  EXPECT_NE(d.reason.find("appeared that the last install did not see"), std::string::npos)
      << d.reason;
  // Set up with the GPU: straight to the API check.
  EXPECT_EQ(Script(Startup(Marker("ok", true), "free", "", 60, "absent", "active", "NVIDIA H100\n"))
                .action,
            ClusterAction::kCheckApi);
}

TEST(NodeProbe, DescribeForTheRecord) {
  auto m = DescribeNodeProbe(Parse(Marker("ok", true), "free", kDone, "active", "NVIDIA L4\n"));
  EXPECT_EQ(m["cloud_init"], "done");
  EXPECT_EQ(m["k3s_unit"], "active");
  EXPECT_EQ(m["gpu"], "NVIDIA L4 x1");
  EXPECT_EQ(m["marker"], "ok (installer 0.1.0, phase done)");
  EXPECT_EQ(m.count("pid1"), 0u);
  m = DescribeNodeProbe(ContainerNode());
  EXPECT_EQ(m["pid1"], "sshd");
  EXPECT_EQ(m["container"], "docker");
}

// ---- A GPU on the PCI bus without a working driver (issue 32, F2) ----

// A marker as an installer with PCI detection writes it: \a gpu_seen is its gpu_seen object.
std::string GpuMarker(const std::string& result, const std::string& failed_step,
                      const std::string& message, const std::string& gpu_seen,
                      bool reboot_required = false, bool gpu_configured = false) {
  return R"({"schema_version": 1, "installer_version": "0.1.0", "phase": ")" +
         (result == "failed" ? failed_step : std::string("done")) + R"(", "result": ")" + result +
         R"(", "failed_step": )" + (failed_step.empty() ? "null" : "\"" + failed_step + "\"") +
         R"(, "message": )" + (message.empty() ? "null" : "\"" + message + "\"") +
         R"(, "gpu_seen": )" + gpu_seen + R"(, "gpu_configured": )" +
         (gpu_configured ? "true" : "false") + R"(, "fabric_manager": null, "reboot_required": )" +
         (reboot_required ? "true" : "false") + "}";
}

const std::string kNoDriverSeen =
    R"({"present": false, "name": null, "count": 0, "pci_nvidia": 2, "driver": "failing", "driver_error": "NVIDIA-SMI has failed", "nvswitch": false})";
const std::string kSmiFailed =
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.";

// A probe output with a "gpu-bus" section (what probes of this version print).
NodeProbe ParseWithBus(const std::string& bus, const std::string& marker, const std::string& ci,
                       const std::string& k3s = "", const std::string& lock = "free",
                       const std::string& gpu = "") {
  std::string out = Output(marker, lock, ci, k3s, gpu);
  out.insert(out.find("@@end@@"), "@@gpu-bus@@\n" + bus);
  return ParseNodeProbe(out);
}

const std::string kTwoGpusNoDriver = "pci_nvidia=2\nsmi_error=" + kSmiFailed + "\n";

ClusterDecision Ssh(const NodeProbe& p, bool driver_install = false) {
  return DecideClusterAction(p, BootRoute::kNone, seconds(0), seconds(900), "0.1.0",
                             driver_install);
}

TEST(NodeProbe, ParsesTheGpuBusSectionAndTheMarkersDriverFields) {
  NodeProbe p = ParseWithBus(kTwoGpusNoDriver,
                             GpuMarker("ok", "", "", kNoDriverSeen, /*reboot_required=*/true),
                             kDone, "active");
  ASSERT_TRUE(p.pci_nvidia);
  EXPECT_EQ(*p.pci_nvidia, 2);
  EXPECT_EQ(p.gpu_error, kSmiFailed);
  EXPECT_EQ(p.marker_gpu_driver, "failing");
  EXPECT_TRUE(p.marker_reboot_required);
  auto m = DescribeNodeProbe(p);
  EXPECT_EQ(m["gpu_pci"], "2");
  EXPECT_EQ(m["gpu_error"], kSmiFailed);
  EXPECT_EQ(m["reboot_required"], "yes");
  // Older probes print no such section: nothing is assumed.
  EXPECT_FALSE(Parse("", "free", kDone, "").pci_nvidia);
  EXPECT_EQ(GpuWithoutDriver(Parse("", "free", kDone, "")), "");
}

TEST(DecisionTable, GpuWithoutDriverOnTheSshRouteFailsBeforeAnyPush) {
  ClusterDecision d = Ssh(ParseWithBus(kTwoGpusNoDriver, "", "absent"));
  EXPECT_EQ(d.action, ClusterAction::kFail);
  EXPECT_EQ(d.cause, ClusterDecision::Cause::kGpuWithoutDriver);
  EXPECT_NE(d.reason.find("2 NVIDIA GPU(s) on the PCI bus but no working NVIDIA driver"),
            std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find(kSmiFailed), std::string::npos) << d.reason;
}

TEST(DecisionTable, GpuWithoutDriverOnABootRouteFailsOnceTheBootInstallSpoke) {
  // The boot install still to come (the image may load a driver meanwhile): wait.
  EXPECT_EQ(Boot(ParseWithBus(kTwoGpusNoDriver, "", kRunning)).action, ClusterAction::kWait);
  // The boot install failed at gpu-detect: fail at once, no push of the same failing run.
  ClusterDecision d = Boot(ParseWithBus(
      kTwoGpusNoDriver, GpuMarker("failed", "gpu-detect", "no driver", kNoDriverSeen), kDone));
  EXPECT_EQ(d.action, ClusterAction::kFail);
  EXPECT_EQ(d.cause, ClusterDecision::Cause::kGpuWithoutDriver);
  // Also on the startup-script route.
  d = DecideClusterAction(
      ParseWithBus(kTwoGpusNoDriver, GpuMarker("failed", "gpu-detect", "x", kNoDriverSeen), ""),
      BootRoute::kStartupScript, seconds(0), seconds(900), "0.1.0");
  EXPECT_EQ(d.action, ClusterAction::kFail);
  // An installer still running is waited for.
  EXPECT_EQ(Boot(ParseWithBus(kTwoGpusNoDriver, "", kRunning, "", "held")).action,
            ClusterAction::kWait);
}

TEST(DecisionTable, GpuConfiguredBeforeWhoseDriverIsLateIsNotAGpuWithoutDriver) {
  NodeProbe p = ParseWithBus(kTwoGpusNoDriver, Marker("ok", true), kDone, "active");
  EXPECT_EQ(GpuWithoutDriver(p), "");
  EXPECT_EQ(Boot(p).action, ClusterAction::kCheckApi);
}

TEST(DecisionTable, GpuWithoutDriverWithDriverInstallIsPushed) {
  EXPECT_EQ(Ssh(ParseWithBus(kTwoGpusNoDriver, "", "absent"), true).action,
            ClusterAction::kPushInstaller);
}

TEST(DecisionTable, ADriverTheInstallerAddedRebootsThenTheGpuIsConfigured) {
  const std::string installed = GpuMarker("ok", "", "", kNoDriverSeen, /*reboot_required=*/true);
  ClusterDecision d = Ssh(ParseWithBus(kTwoGpusNoDriver, installed, "absent", "active"), true);
  EXPECT_EQ(d.action, ClusterAction::kReboot);
  EXPECT_EQ(std::string(ToString(d.action)), "reboot");
  // After the reboot the driver works: the GPU the last run did not see is configured.
  d = Ssh(ParseWithBus("pci_nvidia=2\n", installed, "absent", "active", "free", "NVIDIA L4\n"),
          true);
  EXPECT_EQ(d.action, ClusterAction::kPushInstaller);
  EXPECT_NE(d.reason.find("appeared"), std::string::npos) << d.reason;
}

TEST(DecisionTable, ADriverThatDidNotLoadAfterTheRebootFails) {
  ClusterDecision d = Ssh(
      ParseWithBus(kTwoGpusNoDriver,
                   GpuMarker("failed", "gpu-detect", "the machine rebooted since", kNoDriverSeen),
                   "absent"),
      true);
  EXPECT_EQ(d.action, ClusterAction::kFail);
  EXPECT_NE(d.reason.find("the machine rebooted since"), std::string::npos) << d.reason;
}

}  // namespace
}  // namespace gpuprov
