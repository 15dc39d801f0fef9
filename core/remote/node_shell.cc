#include "node_shell.h"

#include <sstream>

#include "console.h"
#include "installer_bundle.h"
#include "interrupt.h"

namespace gpuprov {

std::map<std::string, std::string> NodeOutputSections(const std::string& output) {
  std::map<std::string, std::string> sections;
  std::istringstream in(output);
  std::string line, current;
  bool started = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.size() > 4 && line.compare(0, 2, "@@") == 0 &&
        line.compare(line.size() - 2, 2, "@@") == 0) {
      current = line.substr(2, line.size() - 4);
      sections[current];
      started = true;
      continue;
    }
    if (started) sections[current] += line + "\n";
  }
  return sections;
}

std::string TrimSpace(const std::string& text) {
  const auto b = text.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return text.substr(b, text.find_last_not_of(" \t\r\n") - b + 1);
}

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
