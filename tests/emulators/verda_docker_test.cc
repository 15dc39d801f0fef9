// SPDX-License-Identifier: Apache-2.0
//
// Verda on the docker backend: the startup script object runs the way the cloud runs it, not
// through cloud-init: once, at the first boot, as root, its stdout and stderr appended to
// /var/log/verda-startup-script.log; a reboot does not run it again; cloud-init gets no user
// data (only the key, which lands in root's authorized_keys). boot_script_fails makes the
// script fail; gpu_after_boot waits for the startup script to end (not for the 120 s bound).
// Skipped when Docker or the test image is not there.
#include <gtest/gtest.h>

#include <thread>

#include "docker_backend_fixture.h"

namespace gpuprov::emulator {
namespace {

using testing::Call;
using testing::DockerBackendTest;
using testing::Reply;
using testing::WaitFor;
using namespace std::chrono_literals;

constexpr const char* kClientId = "verda-docker-client";
constexpr const char* kClientSecret = "verda-docker-secret";
constexpr const char* kPublicKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPtlieUdwvU3Yi8XHX36t5VZpca1by3GqjV+S0aD87Tm emu-test";
constexpr const char* kLog = "/var/log/verda-startup-script.log";
constexpr const char* kDir = "/var/lib/verda-startup-script";

class VerdaDockerTest : public DockerBackendTest {
 protected:
  void SetUp() override {
    EmulatorOptions o;
    o.clouds = {"verda"};
    o.tokens["verda"] = {kClientId, kClientSecret};
    StartDockerEmulator(o);
    if (IsSkipped()) return;
    base_ = emu_->BaseUrl("verda");
    Reply t = Call(base_, "POST", "/oauth2/token",
                   std::string(R"({"grant_type":"client_credentials","client_id":")") +
                       kClientId + R"(","client_secret":")" + kClientSecret + "\"}");
    ASSERT_EQ(t.status, 200) << t.body;
    token_ = t.Json()->getValue<std::string>("access_token");
  }
  Reply V(const std::string& m, const std::string& p, const std::string& b = "") {
    return Call(base_, m, p, b, token_);
  }
  std::string Out(const std::string& cid, const std::string& cmd) { return Exec(cid, cmd).out; }

  // Creates a 1H100 instance called hostname with the key and script; its id.
  std::string CreateWithScript(const std::string& hostname, const std::string& script) {
    Reply k = V("POST", "/ssh-keys", R"({"name":")" + hostname + R"(","key":")" +
                                        std::string(kPublicKey) + "\"}");
    EXPECT_EQ(k.status, 201) << k.body;
    JsonObject s = NewObject();
    s->set("name", hostname);
    s->set("script", script);
    Reply sr = V("POST", "/scripts", ToJson(s));
    EXPECT_EQ(sr.status, 201) << sr.body;
    Reply r = V("POST", "/instances",
                R"({"instance_type":"1H100.80S.30V","image":"ubuntu-24.04-cuda-12.8-open-docker","hostname":")" +
                    hostname + R"(","description":"docker test","location_code":"FIN-01","ssh_key_ids":[")" +
                    k.body + R"("],"startup_script_id":")" + sr.body + "\"}");
    EXPECT_EQ(r.status, 202) << r.body;
    return r.body;
  }
  std::string WaitRunningIp(const std::string& id) {
    std::string ip;
    WaitFor(
        [&] {
          JsonObject i = V("GET", "/instances/" + id).Json();
          if (GetString(i, "status").value_or("") != "running" || i->isNull("ip")) return false;
          ip = i->getValue<std::string>("ip");
          return true;
        },
        120s);
    return ip;
  }
  bool WaitFile(const std::string& cid, const std::string& path) {
    return WaitFor([&] { return Exec(cid, "test -e " + path).exit_code == 0; }, 240s);
  }

  std::string base_, token_;
};

TEST_F(VerdaDockerTest, StartupScriptRunsOnceAsRootAtFirstBootNotThroughCloudInit) {
  const std::string script =
      "#!/bin/bash\n"
      "echo \"uid=$(id -u) user=$(id -un)\"\n"
      "echo to-stderr >&2\n"
      "echo run >> /root/verda-startup-runs\n";
  const std::string id = CreateWithScript("verda-startup", script);
  const std::string ip = WaitRunningIp(id);
  EXPECT_EQ(ip.rfind("127.90.", 0), 0u) << ip;
  const std::string cid = ContainerOf("verda", "verda-startup");
  ASSERT_FALSE(cid.empty());

  ASSERT_TRUE(WaitFile(cid, std::string(kDir) + "/exit-status"));
  EXPECT_EQ(Out(cid, std::string("cat ") + kDir + "/exit-status"), "0\n");
  EXPECT_EQ(Out(cid, std::string("cat ") + kLog), "uid=0 user=root\nto-stderr\n");
  EXPECT_EQ(Out(cid, std::string("stat -c %a ") + kLog), "600\n");
  EXPECT_EQ(Out(cid, "cat /root/verda-startup-runs"), "run\n");

  // cloud-init ran (the key) but had no user data: it did not run the script.
  const std::string status = WaitCloudInit(cid);
  EXPECT_NE(status.find("status: done"), std::string::npos) << status;
  EXPECT_EQ(Out(cid, "cat /var/lib/cloud/seed/nocloud/user-data"), "");
  EXPECT_EQ(Out(cid, "ls /var/lib/cloud/instance/scripts/ 2>/dev/null | grep -v '^vendor$'"), "");
  EXPECT_EQ(Out(cid, "grep -c verda-startup-runs /var/lib/cloud/instance/user-data.txt "
                     "2>/dev/null || true"),
            "0\n");
  EXPECT_NE(Out(cid, "cat /root/.ssh/authorized_keys").find(kPublicKey), std::string::npos);
  EXPECT_EQ(Out(cid, "cat /etc/gpuprov-testvm/gpu"), "H100-80GB:1\n");

  // Reboot (systemd halts on SIGRTMIN+3, then the machine starts again): not run again.
  engine_.KillContainer(cid, "SIGRTMIN+3");
  ASSERT_TRUE(WaitFor([&] { return !engine_.InspectContainer(cid)->running; }, 60s));
  engine_.StartContainer(cid);
  // Once this boot has looked at the unit (its condition checked), it has refused to run.
  ASSERT_TRUE(WaitFor(
      [&] {
        return Out(cid, "systemctl show -p ConditionTimestampMonotonic --value "
                        "gpuprov-emulator-startup-script.service 2>/dev/null")
                   .find_first_not_of("0\n") != std::string::npos;
      },
      120s));
  EXPECT_EQ(Out(cid, "systemctl show -p ConditionResult --value "
                     "gpuprov-emulator-startup-script.service"),
            "no\n");
  std::this_thread::sleep_for(2s);  // a (wrong) second run would have written by now
  EXPECT_EQ(Out(cid, "cat /root/verda-startup-runs"), "run\n");
  EXPECT_EQ(Out(cid, std::string("cat ") + kLog), "uid=0 user=root\nto-stderr\n");

  Reply d = V("PUT", "/instances", R"({"action":"delete","id":[")" + id + "\"]}");
  EXPECT_EQ(d.status, 202) << d.body;
  EXPECT_TRUE(WaitFor([&] { return !engine_.InspectContainer(cid); }, 60s));
}

TEST_F(VerdaDockerTest, BootScriptFailsFailsTheStartupScript) {
  ASSERT_EQ(Call(control_, "POST", "/faults", R"({"cloud":"verda","fault":"boot_script_fails"})")
                .status,
            200);
  const std::string id = CreateWithScript("verda-fails", "#!/bin/sh\necho should-not-run\n");
  ASSERT_FALSE(WaitRunningIp(id).empty());
  const std::string cid = ContainerOf("verda", "verda-fails");
  ASSERT_FALSE(cid.empty());
  ASSERT_TRUE(WaitFile(cid, std::string(kDir) + "/exit-status"));
  EXPECT_EQ(Out(cid, std::string("cat ") + kDir + "/exit-status"), "1\n");
  const std::string log = Out(cid, std::string("cat ") + kLog);
  EXPECT_NE(log.find("injected boot script failure"), std::string::npos) << log;
  EXPECT_EQ(log.find("should-not-run"), std::string::npos) << log;
}

TEST_F(VerdaDockerTest, LateGpuWaitsForTheStartupScriptToEnd) {
  ASSERT_EQ(Call(control_, "POST", "/faults",
                 R"({"cloud":"verda","fault":"gpu_after_boot","seconds":0})")
                .status,
            200);
  // A slow script that never writes the installer's marker and fails: only its end counts.
  const std::string id =
      CreateWithScript("verda-late-gpu", "#!/bin/sh\nsleep 8\necho slept\nexit 3\n");
  ASSERT_FALSE(WaitRunningIp(id).empty());
  const std::string cid = ContainerOf("verda", "verda-late-gpu");
  ASSERT_FALSE(cid.empty());
  bool gpu = false;
  WaitFor(
      [&] {
        const std::string s = Out(cid, std::string("test -e /etc/gpuprov-testvm/gpu && echo gpu; "
                                                    "test -e ") +
                                           kDir + "/exit-status && echo ended");
        gpu = s.find("gpu") != std::string::npos;
        EXPECT_TRUE(!gpu || s.find("ended") != std::string::npos) << "GPU before the end: " << s;
        return gpu;
      },
      240s);
  EXPECT_TRUE(gpu);
  EXPECT_EQ(Out(cid, std::string("cat ") + kDir + "/exit-status"), "3\n");
  EXPECT_EQ(Out(cid, std::string("cat ") + kLog), "slept\n");
  EXPECT_EQ(Out(cid, "cat /etc/gpuprov-testvm/gpu"), "H100-80GB:1\n");
}

}  // namespace
}  // namespace gpuprov::emulator
