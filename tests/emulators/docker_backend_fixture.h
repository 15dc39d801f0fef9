// SPDX-License-Identifier: Apache-2.0
//
// The fixture the docker-backend emulator tests share: skips when Docker or the test VM image is
// not there, starts the emulator with the docker backend, and finds, runs commands in and waits
// for cloud-init on the test VM containers it makes.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "docker_engine.h"
#include "emulator.h"
#include "emulator_test_util.h"

namespace gpuprov::emulator::testing {

/// The test VM image: $GPUPROV_TESTVM_IMAGE, else the tag the build was configured with.
inline std::string TestVmImage() {
  const char* env = std::getenv("GPUPROV_TESTVM_IMAGE");
  return env && *env ? env : GPUPROV_TESTVM_IMAGE;
}

class DockerBackendTest : public ::testing::Test {
 protected:
  /// Skips the test (check IsSkipped() after) when Docker or the image is missing; otherwise
  /// starts the emulator with `o` on the docker backend and the test VM image.
  void StartDockerEmulator(EmulatorOptions o) {
    try {
      engine_.Ping();
    } catch (const std::exception& e) {
      GTEST_SKIP() << "no Docker daemon: " << e.what();
    }
    if (!engine_.ImageExists(TestVmImage())) {
      GTEST_SKIP() << "image " << TestVmImage()
                   << " is not built; run: bash tests/fixtures/testvm/build-image.sh";
    }
    o.backend = "docker";
    o.image = TestVmImage();
    emu_ = std::make_unique<Emulator>(o);
    emu_->Start();
    control_ = emu_->ControlUrl();
  }
  void TearDown() override { emu_.reset(); }

  /// The container of the emulated instance `name` of `cloud`, by the emulator's labels.
  std::string ContainerOf(const std::string& cloud, const std::string& name) {
    for (const auto& c : engine_.ListContainers({"io.gpuprov.emulator=1",
                                                 "io.gpuprov.emulator.cloud=" + cloud,
                                                 "io.gpuprov.emulator.name=" + name})) {
      return c.id;
    }
    return "";
  }

  docker::ExecResult Exec(const std::string& id, const std::string& cmd) {
    return engine_.Exec(id, {"/bin/sh", "-c", cmd});
  }

  /// Waits (up to 240 s) for cloud-init to finish; returns the `cloud-init status` output.
  std::string WaitCloudInit(const std::string& id) {
    std::string out;
    WaitFor(
        [&] {
          try {
            out = Exec(id, "cloud-init status 2>&1 || true").out;
            return out.find("status: done") != std::string::npos ||
                   out.find("status: error") != std::string::npos;
          } catch (const std::exception&) {
            return false;
          }
        },
        std::chrono::seconds(240));
    return out;
  }

  /// Starts, in the background in container id, servers that answer "port-<P>" on each TCP
  /// port of tcp (to each connection) and each UDP port of udp (to each datagram), on every
  /// address of the VM.
  void ServePorts(const std::string& id, const std::vector<int>& tcp, const std::vector<int>& udp) {
    auto list = [](const std::vector<int>& ports) {
      std::string out;
      for (int p : ports) out += std::to_string(p) + ",";
      return "(" + out + ")";
    };
    Exec(id,
         "setsid python3 -c \"import socket, threading\n"
         "def tcp(p):\n"
         "  s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
         "  s.bind(('0.0.0.0', p)); s.listen(8)\n"
         "  while True:\n    c, _ = s.accept(); c.sendall(b'port-%d' % p); c.close()\n"
         "def udp(p):\n"
         "  s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('0.0.0.0', p))\n"
         "  while True:\n    d, a = s.recvfrom(64); s.sendto(b'port-%d' % p, a)\n"
         "for p in " + list(tcp) + ":\n  threading.Thread(target=tcp, args=(p,)).start()\n"
         "for p in " + list(udp) + ":\n  threading.Thread(target=udp, args=(p,)).start()\n\" "
         ">/dev/null 2>&1 </dev/null &");
  }

  /// What ServePorts' server at address:port answers when asked from container id ("port-P\n"),
  /// "" when nothing answers within 2 s. protocol "tcp" or "udp".
  std::string Probe(const std::string& id, const std::string& address,
                    const std::string& protocol, int port) {
    const std::string client =
        protocol == "tcp"
            ? "s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)\n"
              "print(s.recv(16).decode())"
            : "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)\n"
              "s.sendto(b'hi', (sys.argv[1], int(sys.argv[2]))); print(s.recv(16).decode())";
    return Exec(id, "python3 -c \"import socket, sys\n" + client + "\" " + address + " " +
                        std::to_string(port) + " 2>/dev/null")
        .out;
  }

  docker::Engine engine_ = docker::Engine::FromEnvironment(std::chrono::seconds(60));
  std::unique_ptr<Emulator> emu_;
  std::string control_;
};

}  // namespace gpuprov::emulator::testing
