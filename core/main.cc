#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "crash_point.h"
#include "error.h"
#include "fan_out.h"

int main(int argc, char** argv) {
#if GPUPROV_TEST_HOOKS
  // A test build only (CMake option GPUPROV_TEST_HOOKS): the installed gpuprov has no such code.
  if (const char* at = std::getenv(gpuprov::kCrashAtEnv); at != nullptr && *at != '\0') {
    try {
      gpuprov::ArmCrashPoint(at);
    } catch (const gpuprov::Error& e) {
      std::cerr << "error: " << e.what() << "\nhint: " << e.hint() << "\n";
      return e.exit_code();
    }
  }
#endif
  std::vector<std::string> args(argv + 1, argv + argc);
  const int code = gpuprov::RunCli(args);
  if (gpuprov::AbandonedJobsRunning()) {
    // A cloud call the command stopped waiting for still runs on its thread: end without the
    // static destructors it could still reach.
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    std::_Exit(code);
  }
  return code;
}
