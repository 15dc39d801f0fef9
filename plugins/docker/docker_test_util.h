// SPDX-License-Identifier: Apache-2.0
//
// Helpers shared by the docker tests: daemon and image probes, a per-process
// run id, and cleanup of every container a test run made.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <optional>
#include <random>
#include <string>

#include "docker_engine.h"

namespace gpuprov::docker::testing {

/// Label every container made by this test process carries (directly, or as
/// the driver's tag label io.gpuprov.tag.test-run).
inline constexpr const char* kRunLabel = "io.gpuprov.test-run";
inline constexpr const char* kRunTagLabel = "io.gpuprov.tag.test-run";

/// "<pid>-<random>", the same for the whole process.
inline const std::string& RunId() {
  static const std::string id = [] {
    std::random_device rd;
    return std::to_string(getpid()) + "-" + std::to_string(rd() % 100000);
  }();
  return id;
}

/// The engine the tests use: $DOCKER_HOST or the default socket.
inline Engine TestEngine() { return Engine::FromEnvironment(std::chrono::seconds(30)); }

/// Why docker tests cannot run here, or nullopt when the daemon answers.
inline std::optional<std::string> DaemonProblem() {
  try {
    TestEngine().Ping();
    return std::nullopt;
  } catch (const std::exception& e) {
    return std::string("Docker daemon not reachable: ") + e.what();
  }
}

/// Why tests needing the test VM image cannot run, or nullopt.
inline std::optional<std::string> ImageProblem(const std::string& image) {
  if (auto p = DaemonProblem()) return p;
  try {
    if (!TestEngine().ImageExists(image)) {
      return "image " + image + " is not built; run: bash tests/fixtures/testvm/build-image.sh";
    }
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

/// Removes every container of this run (both labels), ignoring errors.
inline void RemoveRunContainers() {
  try {
    Engine engine = TestEngine();
    for (const char* label : {kRunLabel, kRunTagLabel}) {
      for (const auto& c : engine.ListContainers({std::string(label) + "=" + RunId()})) {
        engine.RemoveContainer(c.id);
      }
    }
  } catch (const std::exception&) {
  }
}

/// Removes this run's containers after every test, failed or not.
class CleanupListener : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& /*info*/) override { RemoveRunContainers(); }
  void OnTestProgramEnd(const ::testing::UnitTest& /*unit*/) override { RemoveRunContainers(); }
};

/// Registers CleanupListener once per process (call from any test file).
inline bool RegisterCleanup() {
  static const bool registered = [] {
    ::testing::UnitTest::GetInstance()->listeners().Append(new CleanupListener());
    return true;
  }();
  return registered;
}

}  // namespace gpuprov::docker::testing
