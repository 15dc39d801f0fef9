// SPDX-License-Identifier: Apache-2.0
#include "docker_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "docker_test_util.h"
#include "tar_writer.h"

namespace gpuprov::docker {
namespace {

using testing::DaemonProblem;
using testing::ImageProblem;
using testing::kRunLabel;
using testing::RunId;
using testing::TestEngine;

const bool kCleanupRegistered = testing::RegisterCleanup();

std::string Frame(uint8_t stream, const std::string& payload) {
  std::string f(8, '\0');
  f[0] = static_cast<char>(stream);
  uint32_t n = static_cast<uint32_t>(payload.size());
  f[4] = static_cast<char>(n >> 24);
  f[5] = static_cast<char>(n >> 16);
  f[6] = static_cast<char>(n >> 8);
  f[7] = static_cast<char>(n);
  return f + payload;
}

TEST(DockerHostTest, EmptyMeansTheDefaultSocket) {
  EXPECT_EQ(SocketPathFromDockerHost(""), "/var/run/docker.sock");
}

TEST(DockerHostTest, UnixUrlGivesItsPath) {
  EXPECT_EQ(SocketPathFromDockerHost("unix:///run/user/1000/docker.sock"),
            "/run/user/1000/docker.sock");
}

TEST(DockerHostTest, TcpIsRefusedWithAClearMessage) {
  try {
    SocketPathFromDockerHost("tcp://127.0.0.1:2375");
    FAIL() << "tcp:// was accepted";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.kind(), EngineError::Kind::kConfig);
    EXPECT_NE(std::string(e.what()).find("only over a unix socket"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tcp://127.0.0.1:2375"), std::string::npos) << e.what();
  }
  EXPECT_THROW(SocketPathFromDockerHost("ssh://me@host"), EngineError);
  EXPECT_THROW(SocketPathFromDockerHost("unix://relative.sock"), EngineError);
}

TEST(DemuxStreamTest, SplitsStdoutAndStderr) {
  std::string out, err;
  DemuxStream(Frame(1, "hi\n") + Frame(2, "err\n") + Frame(1, "") + Frame(1, "more"), &out, &err);
  EXPECT_EQ(out, "hi\nmore");
  EXPECT_EQ(err, "err\n");
}

TEST(DemuxStreamTest, LargeFrameLengthIsBigEndian) {
  std::string payload(70000, 'x');
  std::string out, err;
  DemuxStream(Frame(1, payload), &out, &err);
  EXPECT_EQ(out.size(), 70000u);
}

TEST(DemuxStreamTest, TruncatedOrUnknownFramesThrow) {
  std::string out, err;
  EXPECT_THROW(DemuxStream(Frame(1, "hello").substr(0, 10), &out, &err), EngineError);
  EXPECT_THROW(DemuxStream(std::string("\x01\x00\x00", 3), &out, &err), EngineError);
  EXPECT_THROW(DemuxStream(Frame(7, "x"), &out, &err), EngineError);
}

TEST(UrlEncodeTest, EncodesAllButUnreserved) {
  EXPECT_EQ(UrlEncode(R"({"label":["a=b"]})"), "%7B%22label%22%3A%5B%22a%3Db%22%5D%7D");
  EXPECT_EQ(UrlEncode("Az09-._~"), "Az09-._~");
}

TEST(EngineTest, MissingSocketSaysStartDockerd) {
  Engine engine("/nonexistent/docker.sock");
  try {
    engine.Ping();
    FAIL() << "ping of a missing socket succeeded";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.kind(), EngineError::Kind::kUnreachable);
    EXPECT_EQ(e.http_status(), 0);
    EXPECT_EQ(std::string(e.what()),
              "cannot connect to the Docker daemon at /nonexistent/docker.sock: "
              "No such file or directory; start dockerd");
  }
}

TEST(EngineTest, PingAndVersion) {
  if (auto p = DaemonProblem()) GTEST_SKIP() << *p;
  Engine engine = TestEngine();
  std::string api = engine.Ping();
  EXPECT_FALSE(api.empty());
  VersionInfo v = engine.Version();
  EXPECT_FALSE(v.version.empty());
  EXPECT_EQ(v.api_version, api);
}

TEST(EngineTest, AbsentThingsAreReportedAsAbsent) {
  if (auto p = DaemonProblem()) GTEST_SKIP() << *p;
  Engine engine = TestEngine();
  const std::string missing = "gpuprov-engine-test-absent-" + RunId();
  EXPECT_FALSE(engine.ImageExists("gpuprov-no-such-image:zzz"));
  EXPECT_FALSE(engine.InspectContainer(missing).has_value());
  EXPECT_FALSE(engine.RemoveContainer(missing));
  EXPECT_FALSE(engine.FindContainerByName(missing).has_value());
}

TEST(EngineTest, CreateWithMissingImageCarriesDockersMessage) {
  if (auto p = DaemonProblem()) GTEST_SKIP() << *p;
  ContainerSpec spec;
  spec.name = "gpuprov-engine-test-noimage-" + RunId();
  spec.image = "gpuprov-no-such-image:zzz";
  spec.labels[kRunLabel] = RunId();
  try {
    TestEngine().CreateContainer(spec);
    FAIL() << "create with a missing image succeeded";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.kind(), EngineError::Kind::kHttp);
    EXPECT_EQ(e.http_status(), 404);
    EXPECT_EQ(e.message(), "No such image: gpuprov-no-such-image:zzz");
  }
}

// Create, archive, exec, list, kill, remove on a plain (non-systemd) container.
TEST(EngineTest, ContainerLifecycle) {
  if (auto p = ImageProblem(GPUPROV_TESTVM_IMAGE)) GTEST_SKIP() << *p;
  Engine engine = TestEngine();
  ContainerSpec spec;
  spec.name = "gpuprov-engine-test-" + RunId();
  spec.image = GPUPROV_TESTVM_IMAGE;
  spec.cmd = {"/bin/sleep", "infinity"};
  spec.hostname = "enginetest";
  spec.env = {"GPUPROV_TEST=yes"};
  spec.labels = {{kRunLabel, RunId()}, {"io.gpuprov.engine-test", "a b=c"}};
  spec.tmpfs = {{"/scratch", "rw,size=16m"}};
  spec.ports = {PortBinding{22, "tcp", "127.0.0.1", ""}};
  std::string id = engine.CreateContainer(spec);
  ASSERT_FALSE(id.empty());

  // A second container with the same name is a 409 conflict.
  try {
    engine.CreateContainer(spec);
    FAIL() << "a second container of the same name was created";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.http_status(), 409);
  }

  auto info = engine.InspectContainer(spec.name);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->id, id);
  EXPECT_EQ(info->name, spec.name);
  EXPECT_EQ(info->status, "created");
  EXPECT_EQ(info->labels.at("io.gpuprov.engine-test"), "a b=c");
  ASSERT_EQ(info->port_bindings.size(), 1u);
  EXPECT_EQ(info->port_bindings[0].container_port, 22);
  EXPECT_EQ(info->port_bindings[0].host_ip, "127.0.0.1");
  EXPECT_TRUE(info->published.empty());

  TarWriter tar;
  tar.AddFile("opt/gpuprov-engine-test/sub/hello.txt", "hello\n", 0600);
  engine.PutArchive(id, "/", tar.Finish());

  engine.StartContainer(id);
  engine.StartContainer(id);  // already running: 304, no error
  info = engine.InspectContainer(id);
  ASSERT_TRUE(info.has_value());
  EXPECT_TRUE(info->running);
  ASSERT_EQ(info->published.size(), 1u);
  EXPECT_EQ(info->published[0].host_ip, "127.0.0.1");
  EXPECT_FALSE(info->published[0].host_port.empty());

  ExecResult r = engine.Exec(id, {"/bin/cat", "/opt/gpuprov-engine-test/sub/hello.txt"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "hello\n");
  EXPECT_EQ(r.err, "");
  r = engine.Exec(id,
                  {"/bin/sh", "-c",
                   "stat -c %a /opt/gpuprov-engine-test/sub/hello.txt; "
                   "echo \"$GPUPROV_TEST $(hostname)\"; echo oops >&2; "
                   "exit 3"},
                  {"GPUPROV_TEST=exec"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "600\nexec enginetest\n");
  EXPECT_EQ(r.err, "oops\n");
  // Larger than one frame and than Poco's buffers.
  r = engine.Exec(id, {"/bin/sh", "-c", "head -c 300000 /dev/zero | tr '\\0' a"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.size(), 300000u);

  auto rows = engine.ListContainers(
      {std::string(kRunLabel) + "=" + RunId(), "io.gpuprov.engine-test=a b=c"});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].id, id);
  EXPECT_EQ(rows[0].state, "running");
  EXPECT_EQ(rows[0].names, std::vector<std::string>{spec.name});
  EXPECT_GT(rows[0].created, 0);
  // Exact names only: a prefix of the name finds nothing.
  EXPECT_TRUE(engine.FindContainerByName(spec.name).has_value());
  EXPECT_FALSE(engine.FindContainerByName(spec.name.substr(0, spec.name.size() - 1)).has_value());

  engine.KillContainer(id);
  info = engine.InspectContainer(id);
  ASSERT_TRUE(info.has_value());
  EXPECT_FALSE(info->running);
  EXPECT_TRUE(info->published.empty());
  try {
    engine.Exec(id, {"/bin/true"});
    FAIL() << "exec in a stopped container succeeded";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.http_status(), 409);
  }

  EXPECT_TRUE(engine.RemoveContainer(id));
  EXPECT_FALSE(engine.RemoveContainer(id));
  EXPECT_FALSE(engine.InspectContainer(id).has_value());
}

}  // namespace
}  // namespace gpuprov::docker
