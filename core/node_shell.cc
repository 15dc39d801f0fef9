#include "node_shell.h"

#include "console.h"
#include "installer_bundle.h"

namespace gpuprov {

SshRunResult SshNodeShell::RunAsRoot(const std::string& purpose, const std::string& command,
                                     const std::string& stdin_data,
                                     std::chrono::milliseconds timeout) {
  ++round_trips_;
  Console::Get().Debug("node round trip " + std::to_string(round_trips_) + ": " + purpose);
  return session_->Run(AsRoot(command, session_->target().user), stdin_data, timeout);
}

}  // namespace gpuprov
