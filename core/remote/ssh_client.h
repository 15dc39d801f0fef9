// SSH to the VMs gpuprov provisions (docs/design.md §3 and §5), with libssh.
//
// Host keys are pinned in gpuprov's own known_hosts file (trust on first use): the first
// connection to a host:port records its key, later connections must present the same key.
// Nothing outside that file matters: ~/.ssh/config, ~/.ssh/known_hosts, /etc/ssh and the SSH
// agent are never read. The file stays in OpenSSH's format, so `ssh -o UserKnownHostsFile=<file>
// -o StrictHostKeyChecking=yes` accepts the hosts gpuprov pinned. Authentication is by public
// key only, with the one private key file named in the target.
#pragma once

#include <libssh/libssh.h>

#include <chrono>
#include <functional>
#include <string>

#include "error.h"
#include "ssh_target.h"

namespace gpuprov {

struct SshRunResult {
  /// The remote command's exit status; 128 + the signal number when a signal killed it (as a
  /// shell reports it), and -1 when the server reported neither.
  int exit_status;
  std::string stdout_text;
  std::string stderr_text;
};

/// Why an SSH connection attempt failed. WaitForSsh retries kUnreachable only.
enum class SshFailure {
  kUnreachable = 1,  // refused, timed out, closed before or during key exchange: may heal
  kHostKeyChanged,   // the host presented a key other than the pinned one
  kAuthRejected,     // the server refused the private key
  kProtocol,         // no common algorithm, or another failure that retrying will not fix
};

class SshError : public Error {
 public:
  SshError(SshFailure failure, std::string message, std::string hint)
      : Error(std::move(message), std::move(hint)), failure_(failure) {}
  SshFailure failure() const { return failure_; }

 private:
  SshFailure failure_;
};

/// One authenticated libssh session. Movable, not copyable; the destructor disconnects.
/// Not thread-safe: use one session from one thread at a time.
class SshSession {
 public:
  static constexpr std::chrono::milliseconds kDefaultRunTimeout = std::chrono::minutes(10);

  /// One connection attempt: TCP connect, key exchange, host key check against
  /// target.known_hosts_path (pinning an unknown host's key, refusing a changed one),
  /// public key authentication. \a timeout bounds each blocking step.
  /// Throws SshError (see SshFailure), or Error for local problems (key file, known_hosts).
  static SshSession Connect(const SshTarget& target, std::chrono::milliseconds timeout);

  SshSession(SshSession&& other) noexcept;
  SshSession& operator=(SshSession&& other) noexcept;
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;
  ~SshSession();

  /// Runs \a command (through the remote user's login shell, as `ssh host command` does),
  /// writes \a stdin_data to its stdin and closes it, and collects both output streams.
  /// Throws Error when the command does not finish within \a timeout (the channel is closed)
  /// or the connection breaks. A non-zero exit status is a result, not an error.
  SshRunResult Run(const std::string& command, const std::string& stdin_data = {},
                   std::chrono::milliseconds timeout = kDefaultRunTimeout);

  /// Runs \a command with an empty stdin, forwarding its output to \a stdout_fd and
  /// \a stderr_fd as it arrives (-1 discards a stream), and returns its exit status as Run
  /// does. No time limit. Output that cannot be written to a descriptor is dropped.
  int RunStreaming(const std::string& command, int stdout_fd, int stderr_fd);

  /// Writes \a contents to \a remote_path with permission bits \a mode (e.g. 0644), as the
  /// SSH user. Atomic on the remote side: the file is written to a temporary file in the same
  /// directory and renamed over \a remote_path, so readers never see a partial file.
  /// Throws Error with the remote message when the directory is missing or not writable.
  void Upload(const std::string& remote_path, const std::string& contents, int mode);

  /// The libssh session, e.g. for port-forwarding channels. Owned by this object.
  ssh_session native() { return session_; }
  const SshTarget& target() const { return target_; }

 private:
  SshSession(ssh_session session, SshTarget target);
  int Exec(const std::string& command, const std::string& stdin_data,
           const std::function<void(const char* data, size_t len, bool is_stderr)>& sink,
           std::chrono::milliseconds timeout, bool has_timeout);

  ssh_session session_ = nullptr;
  SshTarget target_;
};

/// Retries SshSession::Connect until it succeeds or \a deadline has passed since the call,
/// calling \a progress (when set) with the elapsed time after the first failed attempt and
/// then about every 3 seconds, e.g. for "waiting for SSH on 127.0.0.5:22 ... 12s".
/// Only SshFailure::kUnreachable is retried: a changed host key or a refused key is thrown
/// at once. On timeout throws SshError(kUnreachable) naming the last error.
SshSession WaitForSsh(const SshTarget& target, std::chrono::milliseconds deadline,
                      const std::function<void(std::chrono::seconds elapsed)>& progress);

/// Removes every line for \a host : \a port from the known_hosts file (entries written as
/// `host` for port 22, `[host]:port`, and OpenSSH's hashed `|1|` names; lines with markers
/// such as @cert-authority are kept), e.g. when `gpuprov down` deletes the VM. The file is
/// rewritten atomically with mode 0600; a missing file or no matching line changes nothing.
void ForgetHostKey(const std::string& known_hosts_path, const std::string& host, int port);

/// Moves the keys pinned for \a from_host : \a from_port to \a to_host : \a to_port (what was
/// pinned there goes), so the VM that moved must present the key it had: the same machine at
/// a new address (a stop and start on a cloud without a static address). Nothing changes when
/// nothing is pinned for \a from_host : \a from_port. Atomic, as above.
void MoveHostKey(const std::string& known_hosts_path, const std::string& from_host, int from_port,
                 const std::string& to_host, int to_port);

/// `[host]:port`, the form error messages name hosts by.
std::string SshHostPort(const std::string& host, int port);

/// Quotes \a text for a POSIX shell command line (single quotes).
std::string ShellQuote(const std::string& text);

}  // namespace gpuprov
