#include "node_shell.h"

#include "console.h"
#include "installer_bundle.h"
#include "interrupt.h"

namespace gpuprov {

SshRunResult SshNodeShell::RunAsRoot(const std::string& purpose, const std::string& command,
                                     const std::string& stdin_data,
                                     std::chrono::milliseconds timeout) {
  ++round_trips_;
  Console& console = Console::Get();
  console.Debug("node round trip " + std::to_string(round_trips_) + ": " + purpose);
  const std::string as_root = AsRoot(command, session_->target().user);
  try {
    return session_->Run(as_root, stdin_data, timeout);
  } catch (const SshError&) {
    throw;  // host key or authentication: reconnecting cannot help
  } catch (const Error& e) {
    if (ssh_is_connected(session_->native())) throw;  // a timeout, not a drop
    console.Note("the SSH connection to " + SshHostPort(session_->target().host,
                                                       session_->target().port) +
                 " dropped (" + e.what() + "): reconnecting");
    *session_ = WaitForSsh(session_->target(), reconnect_wait_, [&](std::chrono::seconds s) {
      console.Progress("reconnecting over SSH", s);
      ThrowIfInterrupted("reconnecting over SSH");
    });
    console.Debug("node round trip " + std::to_string(round_trips_) + " again: " + purpose);
    return session_->Run(as_root, stdin_data, timeout);
  }
}

}  // namespace gpuprov
