#include "ssh_client.h"

#include <fcntl.h>
#include <libssh/callbacks.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "console.h"
#include "file_util.h"
#include "paths.h"
#include "ssh_keys.h"

namespace gpuprov {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;

/// Limit of blocking libssh calls (channel open, exec request, flush) after Connect.
constexpr seconds kOperationTimeout(60);
/// WaitForSsh: bounds of one attempt, pause between attempts, progress cadence.
constexpr seconds kMaxAttemptTimeout(10);
constexpr milliseconds kMinAttemptTimeout(200);
constexpr milliseconds kRetryPause(500);
constexpr seconds kProgressInterval(3);
/// Largest stdin chunk written at once.
constexpr size_t kWriteChunk = 32 * 1024;

struct SessionDeleter {
  void operator()(ssh_session session) const {
    ssh_disconnect(session);
    ssh_free(session);
  }
};
using SessionPtr = std::unique_ptr<std::remove_pointer_t<ssh_session>, SessionDeleter>;

struct KnownHostsEntryDeleter {
  void operator()(ssh_knownhosts_entry* entry) const { ssh_knownhosts_entry_free(entry); }
};
using KnownHostsEntryPtr = std::unique_ptr<ssh_knownhosts_entry, KnownHostsEntryDeleter>;

std::string Quoted(const std::string& path) { return "'" + path + "'"; }

std::string UserAtHost(const SshTarget& target) {
  return target.user + "@" + target.host + ":" + std::to_string(target.port);
}

std::string LibsshError(ssh_session session) {
  const char* text = ssh_get_error(session);
  return text != nullptr && *text != '\0' ? text : "unknown libssh error";
}

/// libssh expands %d, %u, %h... and a leading ~ in path options; "%%" stands for "%".
std::string LibsshPath(const std::string& path) {
  std::string out;
  for (char c : path) {
    out += c;
    if (c == '%') out += '%';
  }
  return out;
}

/// How libssh and OpenSSH name a host in known_hosts: `host` for port 22, else `[host]:port`;
/// lowercase.
std::string KnownHostsName(const std::string& host, int port) {
  std::string lower = host;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (port == 22) return lower;
  return "[" + lower + "]:" + std::to_string(port);
}

std::string SecondsText(milliseconds ms) {
  return std::to_string(duration_cast<seconds>(ms + milliseconds(500)).count()) + "s";
}

/// \a command shortened for messages.
std::string CommandSummary(const std::string& command) {
  constexpr size_t kMax = 120;
  std::string line = command.substr(0, command.find('\n'));
  if (line.size() > kMax) line = line.substr(0, kMax);
  return line.size() < command.size() ? line + " ..." : line;
}

void ValidateTarget(const SshTarget& target) {
  const std::string where = "SSH target " + UserAtHost(target);
  if (target.host.empty() || target.host.find_first_of("@ \t\r\n") != std::string::npos) {
    throw Error(where + " has an invalid host '" + target.host + "'",
                "give an IP address or a DNS name");
  }
  if (target.port < 1 || target.port > 65535) {
    throw Error(where + " has an invalid port " + std::to_string(target.port),
                "give a port between 1 and 65535");
  }
  if (target.user.empty()) {
    throw Error(where + " has no user", "set the SSH login user (e.g. root or ubuntu)");
  }
  if (target.private_key_path.empty()) {
    throw Error(where + " has no private key file", "name the key gpuprov should log in with");
  }
  if (target.known_hosts_path.empty()) {
    throw Error(where + " has no known_hosts file",
                "pass gpuprov's known_hosts path (e.g. ~/.gpu-provisioner/known_hosts)");
  }
}

void SetOption(ssh_session session, enum ssh_options_e option, const void* value, const char* name,
               const SshTarget& target) {
  if (ssh_options_set(session, option, value) != SSH_OK) {
    throw Error(std::string("cannot set the SSH option ") + name + " for " + UserAtHost(target) +
                    ": " + LibsshError(session),
                "check the SSH target settings (host, user, key and known_hosts paths)");
  }
}

void SetTimeout(ssh_session session, milliseconds timeout, const SshTarget& target) {
  const int64_t ms = std::max<int64_t>(timeout.count(), 1);
  long secs = static_cast<long>(ms / 1000);
  long usecs = static_cast<long>((ms % 1000) * 1000);
  SetOption(session, SSH_OPTIONS_TIMEOUT, &secs, "timeout", target);
  SetOption(session, SSH_OPTIONS_TIMEOUT_USEC, &usecs, "timeout", target);
}

void SetOptions(ssh_session session, const SshTarget& target, milliseconds timeout) {
  // No ~/.ssh/config, no /etc/ssh/ssh_config: behaviour depends on the target alone.
  // (This option takes a bool; the integer options below take an int.)
  bool process_config = false;
  SetOption(session, SSH_OPTIONS_PROCESS_CONFIG, &process_config, "ProcessConfig", target);
  int off = 0;
  int on = 1;
  SetOption(session, SSH_OPTIONS_HOST, target.host.c_str(), "Host", target);
  int port = target.port;
  SetOption(session, SSH_OPTIONS_PORT, &port, "Port", target);
  SetOption(session, SSH_OPTIONS_USER, target.user.c_str(), "User", target);
  // The SSH directory (default ~/.ssh) becomes gpuprov's home, so nothing under ~/.ssh is
  // read, and a missing HOME does not matter.
  const std::string home = std::filesystem::path(target.known_hosts_path).parent_path().string();
  if (!home.empty()) {
    SetOption(session, SSH_OPTIONS_SSH_DIR, LibsshPath(home).c_str(), "SshDir", target);
  }
  SetOption(session, SSH_OPTIONS_KNOWNHOSTS, LibsshPath(target.known_hosts_path).c_str(),
            "UserKnownHostsFile", target);
  // The system-wide file (default /etc/ssh/ssh_known_hosts) never matters.
  SetOption(session, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null", "GlobalKnownHostsFile", target);
  // Host keys are always checked. (With it off, libssh reports an unknown host as known.)
  SetOption(session, SSH_OPTIONS_STRICTHOSTKEYCHECK, &on, "StrictHostKeyChecking", target);
  // Authentication is ssh_userauth_publickey with this key only; the agent and the default
  // identities are used by ssh_userauth_publickey_auto and ssh_userauth_agent, never called.
  SetOption(session, SSH_OPTIONS_IDENTITY, LibsshPath(target.private_key_path).c_str(),
            "IdentityFile", target);
  SetOption(session, SSH_OPTIONS_PUBKEY_AUTH, &on, "PubkeyAuthentication", target);
  SetOption(session, SSH_OPTIONS_PASSWORD_AUTH, &off, "PasswordAuthentication", target);
  SetOption(session, SSH_OPTIONS_KBDINT_AUTH, &off, "KbdInteractiveAuthentication", target);
  SetOption(session, SSH_OPTIONS_GSSAPI_AUTH, &off, "GSSAPIAuthentication", target);
  SetTimeout(session, timeout, target);
}

/// A key recorded for the host in known_hosts, as read by gpuprov itself.
struct PinnedKey {
  std::string fingerprint;  // SHA256:..., or a description when the line cannot be parsed
  SshKeyPtr key;            // null when the line cannot be parsed
};

/// Every line of \a known_hosts_path that names \a host : \a port, parsed with libssh's
/// known_hosts parser. Unlike libssh's lookup, one unparsable line does not hide the others
/// (libssh then treats the host as unknown), and a matching line libssh cannot parse is
/// reported too.
std::vector<PinnedKey> ReadPinnedKeys(const std::string& known_hosts_path, const std::string& host,
                                      int port) {
  std::vector<PinnedKey> pinned;
  std::optional<std::string> text = ReadFileIfExists(known_hosts_path, kKnownHostsKind);
  if (!text) return pinned;
  const std::string name = KnownHostsName(host, port);
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos || line[start] == '#' || line[start] == '@') continue;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    ssh_knownhosts_entry* raw = nullptr;
    const int rc = ssh_known_hosts_parse_line(name.c_str(), line.c_str() + start, &raw);
    KnownHostsEntryPtr entry(raw);
    if (rc == SSH_AGAIN) continue;  // another host
    if (rc == SSH_OK && entry != nullptr && entry->publickey != nullptr) {
      PinnedKey key{KeyFingerprintSha256(entry->publickey), SshKeyPtr(entry->publickey)};
      entry->publickey = nullptr;  // now owned by key.key
      pinned.push_back(std::move(key));
    } else {
      pinned.push_back(PinnedKey{"an entry gpuprov cannot read", nullptr});
    }
  }
  return pinned;
}

std::string ForgetCommand(const std::string& known_hosts_path, const std::string& host, int port) {
  return "ssh-keygen -R " + ShellQuote(KnownHostsName(host, port)) + " -f " +
         ShellQuote(known_hosts_path);
}

SshError HostKeyChanged(const SshTarget& target, const std::string& now_fingerprint) {
  std::vector<PinnedKey> pinned = ReadPinnedKeys(target.known_hosts_path, target.host, target.port);
  std::string was;
  for (const PinnedKey& key : pinned) {
    if (!was.empty()) was += " and ";
    was += key.fingerprint;
  }
  if (was.empty()) was = "a key of another type";
  return SshError(
      SshFailure::kHostKeyChanged,
      "host key for " + SshHostPort(target.host, target.port) + " changed (was " + was + ", now " +
          now_fingerprint + "); refusing to connect",
      "this may be an attack (someone between you and the VM), or the VM at that address was "
      "recreated and has a new key. If the VM was recreated, forget the old key: `gpuprov down "
      "<name>` does so when it deletes the VM, or run `" +
          ForgetCommand(target.known_hosts_path, target.host, target.port) +
          "` (or delete the line for " + KnownHostsName(target.host, target.port) + " from " +
          target.known_hosts_path + "), then retry");
}

/// The lock that serialises changes to a known_hosts file between gpuprov processes.
FileLock LockKnownHosts(const std::string& known_hosts_path) {
  return FileLock(known_hosts_path + ".lock", "known_hosts " + known_hosts_path, 30000);
}

/// Makes the directory of \a path exist (0700 when created) and \a path exist with mode 0600.
void PrepareKnownHostsFile(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty() && !std::filesystem::exists(parent, ec)) EnsureDir(parent);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    throw Error("cannot open the known_hosts file " + Quoted(path) + ": " + std::strerror(err),
                "check that its directory exists and is writable by you");
  }
  struct stat st {};
  if (::fstat(fd, &st) == 0 && (st.st_mode & 07777) != 0600) ::fchmod(fd, 0600);
  ::close(fd);
}

/// Checks the server's host key against target.known_hosts_path; pins it when the host is
/// not in the file. Throws SshError(kHostKeyChanged) when the file has another key for it.
void VerifyHostKey(ssh_session session, const SshTarget& target) {
  ssh_key raw = nullptr;
  if (ssh_get_server_publickey(session, &raw) != SSH_OK || raw == nullptr) {
    throw SshError(SshFailure::kUnreachable,
                   "SSH to " + UserAtHost(target) + " gave no host key: " + LibsshError(session),
                   "retry; if it persists, check that an SSH server listens on port " +
                       std::to_string(target.port));
  }
  SshKeyPtr server_key(raw);
  const std::string now_fingerprint = KeyFingerprintSha256(server_key.get());

  const enum ssh_known_hosts_e state = ssh_session_is_known_server(session);
  switch (state) {
    case SSH_KNOWN_HOSTS_OK:
      return;
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:
      throw HostKeyChanged(target, now_fingerprint);
    case SSH_KNOWN_HOSTS_ERROR:
      throw Error("cannot check the host key of " + SshHostPort(target.host, target.port) +
                      " against " + Quoted(target.known_hosts_path) + ": " + LibsshError(session),
                  "check that the file is readable by you and in OpenSSH known_hosts format");
    case SSH_KNOWN_HOSTS_NOT_FOUND:
    case SSH_KNOWN_HOSTS_UNKNOWN:
      break;
  }

  // First contact: pin the key. Under the lock, re-read the file: another gpuprov may have
  // pinned this host meanwhile, and a line libssh skipped must not be bypassed.
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(target.known_hosts_path).parent_path();
  if (!parent.empty() && !std::filesystem::exists(parent, ec)) EnsureDir(parent);
  FileLock lock = LockKnownHosts(target.known_hosts_path);
  std::vector<PinnedKey> pinned = ReadPinnedKeys(target.known_hosts_path, target.host, target.port);
  for (const PinnedKey& key : pinned) {
    if (key.key != nullptr &&
        ssh_key_cmp(key.key.get(), server_key.get(), SSH_KEY_CMP_PUBLIC) == 0) {
      return;
    }
  }
  if (!pinned.empty()) throw HostKeyChanged(target, now_fingerprint);
  PrepareKnownHostsFile(target.known_hosts_path);
  if (ssh_session_update_known_hosts(session) != SSH_OK) {
    throw Error("cannot record the host key of " + SshHostPort(target.host, target.port) + " in " +
                    Quoted(target.known_hosts_path) + ": " + LibsshError(session),
                "check that the file is writable by you");
  }
  Console::Get().Info("pinned the SSH host key of " + SshHostPort(target.host, target.port) + ": " +
                      now_fingerprint + " (in " + target.known_hosts_path + ")");
}

// Channel callbacks of Exec.
struct ExecState {
  const std::function<void(const char*, size_t, bool)>* sink = nullptr;
  bool eof = false;
  bool closed = false;
  std::optional<int> exit_status;
  std::string exit_signal;
  std::exception_ptr sink_error;  // thrown by the sink; rethrown by Exec (not through libssh)
};

int OnChannelData(ssh_session /*session*/, ssh_channel /*channel*/, void* data, uint32_t len,
                  int is_stderr, void* userdata) {
  auto* state = static_cast<ExecState*>(userdata);
  if (state->sink_error) return static_cast<int>(len);
  try {
    (*state->sink)(static_cast<const char*>(data), len, is_stderr != 0);
  } catch (...) {
    state->sink_error = std::current_exception();
  }
  return static_cast<int>(len);
}

void OnChannelEof(ssh_session /*session*/, ssh_channel /*channel*/, void* userdata) {
  static_cast<ExecState*>(userdata)->eof = true;
}

void OnChannelClose(ssh_session /*session*/, ssh_channel /*channel*/, void* userdata) {
  static_cast<ExecState*>(userdata)->closed = true;
}

void OnExitStatus(ssh_session /*session*/, ssh_channel /*channel*/, int exit_status,
                  void* userdata) {
  static_cast<ExecState*>(userdata)->exit_status = exit_status;
}

void OnExitSignal(ssh_session /*session*/, ssh_channel /*channel*/, const char* signal,
                  int /*core*/, const char* /*errmsg*/, const char* /*lang*/, void* userdata) {
  static_cast<ExecState*>(userdata)->exit_signal = signal != nullptr ? signal : "";
}

/// Signal numbers of Linux for the names an SSH server reports (RFC 4254 section 6.10).
int SignalNumber(const std::string& name) {
  static const std::pair<const char*, int> kSignals[] = {
      {"HUP", 1},   {"INT", 2},   {"QUIT", 3},  {"ILL", 4},   {"ABRT", 6},
      {"FPE", 8},   {"KILL", 9},  {"USR1", 10}, {"SEGV", 11}, {"USR2", 12},
      {"PIPE", 13}, {"ALRM", 14}, {"TERM", 15},
  };
  for (const auto& [signal_name, number] : kSignals) {
    if (name == signal_name) return number;
  }
  return 0;
}

/// Frees what Exec set up, in the order libssh needs, on every path out of Exec.
class ExecResources {
 public:
  ExecResources(ssh_session session, ssh_channel channel) : session_(session), channel_(channel) {}
  ~ExecResources() {
    if (event_ != nullptr) {
      ssh_event_remove_session(event_, session_);
      ssh_event_free(event_);
    }
    if (callbacks_ != nullptr) ssh_remove_channel_callbacks(channel_, callbacks_);
    // Sends the channel close when the channel is still open.
    ssh_channel_free(channel_);
  }
  ExecResources(const ExecResources&) = delete;
  ExecResources& operator=(const ExecResources&) = delete;

  void set_callbacks(ssh_channel_callbacks callbacks) { callbacks_ = callbacks; }
  void set_event(ssh_event event) { event_ = event; }

 private:
  ssh_session session_;
  ssh_channel channel_;
  ssh_channel_callbacks callbacks_ = nullptr;
  ssh_event event_ = nullptr;
};

void WriteAllToFd(int fd, const char* data, size_t len, bool* failed) {
  if (fd < 0 || *failed) return;
  while (len > 0) {
    ssize_t n = ::write(fd, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *failed = true;
      return;
    }
    data += n;
    len -= static_cast<size_t>(n);
  }
}

}  // namespace

std::string SshHostPort(const std::string& host, int port) {
  return "[" + host + "]:" + std::to_string(port);
}

std::string ShellQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

SshSession::SshSession(ssh_session session, SshTarget target)
    : session_(session), target_(std::move(target)) {}

SshSession::SshSession(SshSession&& other) noexcept
    : session_(std::exchange(other.session_, nullptr)), target_(std::move(other.target_)) {}

SshSession& SshSession::operator=(SshSession&& other) noexcept {
  if (this != &other) {
    if (session_ != nullptr) SessionDeleter()(session_);
    session_ = std::exchange(other.session_, nullptr);
    target_ = std::move(other.target_);
  }
  return *this;
}

SshSession::~SshSession() {
  if (session_ != nullptr) SessionDeleter()(session_);
}

SshSession SshSession::Connect(const SshTarget& target, std::chrono::milliseconds timeout) {
  ValidateTarget(target);
  SshKeyPtr key = LoadPrivateKey(target.private_key_path);

  SessionPtr session(ssh_new());
  if (session == nullptr) {
    throw Error("cannot create an SSH session (out of memory)", "retry");
  }
  SetOptions(session.get(), target, timeout);

  if (ssh_connect(session.get()) != SSH_OK) {
    const std::string error = LibsshError(session.get());
    if (error.find("no match for method") != std::string::npos) {
      throw SshError(SshFailure::kProtocol,
                     "SSH to " + UserAtHost(target) +
                         " failed: no algorithm in common with the server (" + error + ")",
                     "the server's SSH configuration is too old or too strict for gpuprov; "
                     "log in another way and check its sshd settings");
    }
    throw SshError(SshFailure::kUnreachable,
                   "cannot connect to SSH on " + UserAtHost(target) + ": " + error,
                   "the VM may still be booting, or TCP port " + std::to_string(target.port) +
                       " is closed to this machine: check that the VM runs and that its "
                       "firewall allows SSH from your address, then retry");
  }

  VerifyHostKey(session.get(), target);

  const int auth = ssh_userauth_publickey(session.get(), nullptr, key.get());
  if (auth == SSH_AUTH_DENIED || auth == SSH_AUTH_PARTIAL) {
    throw SshError(
        SshFailure::kAuthRejected,
        "SSH to " + UserAtHost(target) + " refused the key " + Quoted(target.private_key_path),
        "the VM does not accept this key for user '" + target.user +
            "': check that the VM was created with the public key " +
            Quoted(target.private_key_path + ".pub") + " and that '" + target.user +
            "' is this cloud's login user");
  }
  if (auth != SSH_AUTH_SUCCESS) {
    throw SshError(SshFailure::kUnreachable,
                   "SSH to " + UserAtHost(target) +
                       " failed during authentication: " + LibsshError(session.get()),
                   "the connection broke; retry");
  }
  SetTimeout(session.get(), kOperationTimeout, target);
  return SshSession(session.release(), target);
}

int SshSession::Exec(const std::string& command, const std::string& stdin_data,
                     const std::function<void(const char*, size_t, bool)>& sink,
                     std::chrono::milliseconds timeout, bool has_timeout) {
  if (session_ == nullptr) {
    throw Error("the SSH session to " + UserAtHost(target_) + " was moved away",
                "this is a bug in gpuprov; please report it");
  }
  const auto start = Clock::now();
  const auto broken = [&](const std::string& what) {
    return Error(
        "SSH to " + UserAtHost(target_) + " broke while " + what + ": " + LibsshError(session_),
        "check the VM is still running and reachable, then retry");
  };

  ssh_channel channel = ssh_channel_new(session_);
  if (channel == nullptr) throw broken("opening a channel");
  ExecResources resources(session_, channel);
  if (ssh_channel_open_session(channel) != SSH_OK) throw broken("opening a channel");

  ExecState state;
  state.sink = &sink;
  ssh_channel_callbacks_struct callbacks{};
  callbacks.userdata = &state;
  callbacks.channel_data_function = &OnChannelData;
  callbacks.channel_eof_function = &OnChannelEof;
  callbacks.channel_close_function = &OnChannelClose;
  callbacks.channel_exit_status_function = &OnExitStatus;
  callbacks.channel_exit_signal_function = &OnExitSignal;
  ssh_callbacks_init(&callbacks);
  if (ssh_set_channel_callbacks(channel, &callbacks) != SSH_OK) throw broken("starting a command");
  resources.set_callbacks(&callbacks);

  if (ssh_channel_request_exec(channel, command.c_str()) != SSH_OK) {
    throw broken("starting a command");
  }

  ssh_event event = ssh_event_new();
  if (event == nullptr) throw Error("cannot allocate an SSH event loop (out of memory)", "retry");
  resources.set_event(event);
  if (ssh_event_add_session(event, session_) != SSH_OK) throw broken("running a command");

  size_t written = 0;
  bool eof_sent = false;
  while (!state.closed) {
    // Writes only what the remote window takes, so a write never waits for the command
    // to read its stdin while it waits for us to read its output.
    while (!eof_sent && !state.closed) {
      if (written == stdin_data.size()) {
        if (ssh_channel_send_eof(channel) != SSH_OK) throw broken("closing the command's stdin");
        eof_sent = true;
        break;
      }
      const size_t window = ssh_channel_window_size(channel);
      if (window == 0) break;
      const size_t chunk = std::min({window, stdin_data.size() - written, kWriteChunk});
      const int n =
          ssh_channel_write(channel, stdin_data.data() + written, static_cast<uint32_t>(chunk));
      if (n == SSH_ERROR) {
        // The command may exit without reading all its stdin: the rest is dropped.
        if (ssh_channel_is_closed(channel) || state.eof) {
          eof_sent = true;
          break;
        }
        throw broken("sending the command's stdin");
      }
      if (n == 0) break;
      written += static_cast<size_t>(n);
    }
    if (state.closed) break;

    int poll_ms = 1000;
    if (has_timeout) {
      const auto left = timeout - duration_cast<milliseconds>(Clock::now() - start);
      if (left <= milliseconds(0)) {
        throw Error("command on " + UserAtHost(target_) + " did not finish within " +
                        SecondsText(timeout) + ": " + CommandSummary(command),
                    "check what the VM is doing (e.g. log in with `gpuprov ssh <name>`), "
                    "or allow more time");
      }
      poll_ms = static_cast<int>(std::min<int64_t>(left.count(), poll_ms));
    }
    const int rc = ssh_event_dopoll(event, poll_ms);
    if (state.sink_error) std::rethrow_exception(state.sink_error);
    if (rc == SSH_ERROR || ssh_is_connected(session_) == 0) {
      if (state.closed) break;
      throw broken("running a command");
    }
  }
  if (state.sink_error) std::rethrow_exception(state.sink_error);

  if (state.exit_status) return *state.exit_status;
  if (!state.exit_signal.empty()) {
    const int number = SignalNumber(state.exit_signal);
    return number > 0 ? 128 + number : -1;
  }
  return -1;
}

SshRunResult SshSession::Run(const std::string& command, const std::string& stdin_data,
                             std::chrono::milliseconds timeout) {
  SshRunResult result{-1, "", ""};
  const std::function<void(const char*, size_t, bool)> sink =
      [&result](const char* data, size_t len, bool is_stderr) {
        (is_stderr ? result.stderr_text : result.stdout_text).append(data, len);
      };
  result.exit_status = Exec(command, stdin_data, sink, timeout, /*has_timeout=*/true);
  return result;
}

int SshSession::RunStreaming(const std::string& command, int stdout_fd, int stderr_fd) {
  bool stdout_failed = false;
  bool stderr_failed = false;
  const std::function<void(const char*, size_t, bool)> sink = [&](const char* data, size_t len,
                                                                  bool is_stderr) {
    if (is_stderr) {
      WriteAllToFd(stderr_fd, data, len, &stderr_failed);
    } else {
      WriteAllToFd(stdout_fd, data, len, &stdout_failed);
    }
  };
  return Exec(command, {}, sink, milliseconds(0), /*has_timeout=*/false);
}

void SshSession::Upload(const std::string& remote_path, const std::string& contents, int mode) {
  if (remote_path.empty() || remote_path.back() == '/') {
    throw Error("cannot upload to '" + remote_path + "': not a file path",
                "name the remote file, e.g. /tmp/gpuprov-install.sh");
  }
  const size_t slash = remote_path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : remote_path.substr(0, slash));
  char mode_text[8];
  std::snprintf(mode_text, sizeof(mode_text), "%o", static_cast<unsigned>(mode & 07777));
  // The temporary file is in the target's directory, so mv is a rename(2): atomic. It is
  // created with mode 0600 and removed when a step fails.
  std::string script = "set -e; umask 077; ";
  script += "tmp=$(mktemp " + ShellQuote(dir + "/.gpuprov-upload.XXXXXX") + "); ";
  script += "trap 'rm -f \"$tmp\"' EXIT; ";
  script += "cat > \"$tmp\"; ";
  script += "chmod " + std::string(mode_text) + " \"$tmp\"; ";
  script += "mv -f \"$tmp\" " + ShellQuote(remote_path) + "; ";
  script += "trap - EXIT";
  SshRunResult result = Run("sh -c " + ShellQuote(script), contents);
  if (result.exit_status != 0) {
    std::string detail = result.stderr_text;
    while (!detail.empty() && (detail.back() == '\n' || detail.back() == '\r')) detail.pop_back();
    throw Error("cannot upload " + remote_path + " to " + UserAtHost(target_) + " (exit status " +
                    std::to_string(result.exit_status) + "): " + detail,
                "check that '" + dir + "' exists on the VM and that user '" + target_.user +
                    "' may write to it");
  }
}

SshSession WaitForSsh(const SshTarget& target, std::chrono::milliseconds deadline,
                      const std::function<void(std::chrono::seconds elapsed)>& progress) {
  const auto start = Clock::now();
  const auto end = start + deadline;
  std::optional<Clock::time_point> last_progress;
  std::string last_error;
  int attempts = 0;
  while (true) {
    const auto left = duration_cast<milliseconds>(end - Clock::now());
    const milliseconds attempt_timeout =
        std::clamp<milliseconds>(left, kMinAttemptTimeout, kMaxAttemptTimeout);
    ++attempts;
    try {
      return SshSession::Connect(target, attempt_timeout);
    } catch (const SshError& e) {
      if (e.failure() != SshFailure::kUnreachable) throw;
      last_error = e.what();
    }
    auto now = Clock::now();
    if (now >= end) break;
    if (progress && (!last_progress || now - *last_progress >= kProgressInterval)) {
      progress(duration_cast<seconds>(now - start));
      last_progress = now;
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(kRetryPause, end - now));
    if (Clock::now() >= end) break;
  }
  throw SshError(SshFailure::kUnreachable,
                 "SSH on " + SshHostPort(target.host, target.port) +
                     " did not become reachable within " + SecondsText(deadline) + " (" +
                     std::to_string(attempts) + " attempts; last: " + last_error + ")",
                 "the VM may still be booting or its firewall blocks port " +
                     std::to_string(target.port) +
                     ": check the VM in the cloud's console; re-running the same command "
                     "reuses the VM and waits again");
}

namespace {

// Rewrites the known_hosts file under its lock: each line naming \a host : \a port (written as
// `host` for port 22, `[host]:port`, or OpenSSH's hashed `|1|` name; lines with markers such as
// @cert-authority never match) is replaced by what \a replace returns for it ("" drops it), the
// other lines by what \a keep returns ("" drops it). Nothing is written when no line changed.
void RewriteKnownHosts(const std::string& known_hosts_path, const std::string& host, int port,
                       const std::function<std::string(const std::string& line, size_t key_at)>&
                           replace,
                       const std::function<bool(const std::string& line)>& keep) {
  std::error_code ec;
  if (!std::filesystem::exists(known_hosts_path, ec)) return;
  FileLock lock = LockKnownHosts(known_hosts_path);
  std::optional<std::string> text = ReadFileIfExists(known_hosts_path, kKnownHostsKind);
  if (!text) return;

  const std::string plain = KnownHostsName(host, port);
  const std::string bracketed = "[" + KnownHostsName(host, 22) + "]:" + std::to_string(port);
  // Where the key type starts when the line names the host; npos otherwise.
  const auto names_host = [&](const std::string& line) -> size_t {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#' || line[start] == '@') {
      return std::string::npos;
    }
    const size_t end = line.find_first_of(" \t", start);
    if (end == std::string::npos) return std::string::npos;
    const std::string field = line.substr(start, end - start);
    if (field.rfind("|1|", 0) == 0) {
      // Hashed by OpenSSH: libssh's parser checks the hash.
      ssh_knownhosts_entry* raw = nullptr;
      const int rc = ssh_known_hosts_parse_line(plain.c_str(), line.c_str() + start, &raw);
      KnownHostsEntryPtr entry(raw);
      return rc == SSH_OK ? end : std::string::npos;
    }
    std::istringstream patterns(field);
    std::string pattern;
    while (std::getline(patterns, pattern, ',')) {
      std::transform(pattern.begin(), pattern.end(), pattern.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (pattern == plain || pattern == bracketed) return end;
    }
    return std::string::npos;
  };

  std::string out;
  bool changed = false;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t key_at = names_host(line);
    std::string now = key_at != std::string::npos ? replace(line, key_at)
                      : keep(line)                 ? line
                                                   : std::string();
    changed = changed || now != line;
    if (!now.empty()) out += now + '\n';
  }
  if (changed) WriteFileAtomic(known_hosts_path, out, 0600);
}

}  // namespace

void ForgetHostKey(const std::string& known_hosts_path, const std::string& host, int port) {
  RewriteKnownHosts(
      known_hosts_path, host, port, [](const std::string&, size_t) { return std::string(); },
      [](const std::string&) { return true; });
}

void MoveHostKey(const std::string& known_hosts_path, const std::string& from_host, int from_port,
                 const std::string& to_host, int to_port) {
  bool pinned = false;
  RewriteKnownHosts(
      known_hosts_path, from_host, from_port,
      [&](const std::string& line, size_t) {
        pinned = true;
        return line;
      },
      [](const std::string&) { return true; });
  if (!pinned) return;  // moved before, or never pinned
  // What the file pins for the new address now (a VM that had it before) goes first.
  ForgetHostKey(known_hosts_path, to_host, to_port);
  const std::string to_name = KnownHostsName(to_host, to_port);
  RewriteKnownHosts(
      known_hosts_path, from_host, from_port,
      [&](const std::string& line, size_t key_at) { return to_name + line.substr(key_at); },
      [](const std::string&) { return true; });
}

}  // namespace gpuprov
