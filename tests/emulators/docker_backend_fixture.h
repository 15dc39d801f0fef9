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

  docker::Engine engine_ = docker::Engine::FromEnvironment(std::chrono::seconds(60));
  std::unique_ptr<Emulator> emu_;
  std::string control_;
};

}  // namespace gpuprov::emulator::testing
