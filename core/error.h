// The one error convention of gpuprov's core: a function that cannot do its job throws
// gpuprov::Error. The CLI's top level prints `error: <message>` and, when set, `hint: <hint>`
// on stderr, and exits with exit_code (2 = bad input or usage, nothing created; 1 = failure;
// 130 = interrupted by Ctrl-C).
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace gpuprov {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,
  kExitUsage = 2,
  kExitInterrupted = 130,  ///< Ctrl-C (SIGINT) or SIGTERM stopped the command: 128 + SIGINT
};

class Error : public std::runtime_error {
 public:
  Error(std::string message, std::string hint = "", int exit_code = kExitFailure)
      : std::runtime_error(std::move(message)), hint_(std::move(hint)), exit_code_(exit_code) {}

  const std::string& hint() const { return hint_; }
  int exit_code() const { return exit_code_; }

 private:
  std::string hint_;
  int exit_code_;
};

/// Bad input from the user (flag, spec file, config file): exit code 2, nothing was created.
inline Error UsageError(std::string message, std::string hint = "") {
  return Error(std::move(message), std::move(hint), kExitUsage);
}

}  // namespace gpuprov
