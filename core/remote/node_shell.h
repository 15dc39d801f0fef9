// NodeShell: the one way cluster code runs commands on a node. SshNodeShell runs them over an
// SshSession as root (sudo -n for other users) and logs each at debug level with its purpose,
// so `-v` shows every SSH round trip; tests use a fake.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "ssh_client.h"

namespace gpuprov {

/// Splits the output of a node command into sections: a line "@@name@@" starts section
/// "name"; text before the first such line is dropped. Each section keeps its lines with "\n".
std::map<std::string, std::string> NodeOutputSections(const std::string& output);

/// \a text without leading and trailing whitespace (spaces, tabs, CR, LF).
std::string TrimSpace(const std::string& text);

/// Shell text defining `api`: curl to the node's own API server (https://127.0.0.1:6443) with
/// k3s's admin client certificate, so node commands read and write the cluster over one SSH
/// round trip whatever the access mode.
inline constexpr const char* kNodeApiFunction =
    "T=/var/lib/rancher/k3s/server/tls\n"
    "api() { curl -sS --max-time 10 --cacert \"$T/server-ca.crt\" --cert \"$T/client-admin.crt\" "
    "--key \"$T/client-admin.key\" \"$@\"; }\n";

class NodeShell {
 public:
  virtual ~NodeShell() = default;
  /// Runs \a command as root on the node with \a stdin_data; one SSH round trip. \a purpose
  /// names it in debug logs ("probe", "push installer"). Throws Error when the connection
  /// breaks or the command outlives \a timeout; a non-zero exit status is a result.
  virtual SshRunResult RunAsRoot(const std::string& purpose, const std::string& command,
                                 const std::string& stdin_data,
                                 std::chrono::milliseconds timeout) = 0;
};

/// Runs commands over an SshSession. When the connection has dropped (a node rebooting, an idle
/// connection cut by a NAT), it reconnects to the session's target once, with a bounded wait,
/// and runs the command again: every command the cluster code sends is safe to repeat.
class SshNodeShell : public NodeShell {
 public:
  /// Borrows \a session; it must outlive this object. \a reconnect_wait bounds a reconnect.
  explicit SshNodeShell(SshSession* session,
                        std::chrono::milliseconds reconnect_wait = std::chrono::minutes(2))
      : session_(session), reconnect_wait_(reconnect_wait) {}
  SshRunResult RunAsRoot(const std::string& purpose, const std::string& command,
                         const std::string& stdin_data,
                         std::chrono::milliseconds timeout) override;
  /// How many commands ran through this shell.
  int round_trips() const { return round_trips_; }

 private:
  SshSession* session_;
  std::chrono::milliseconds reconnect_wait_;
  int round_trips_ = 0;
};

}  // namespace gpuprov
