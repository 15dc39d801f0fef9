#include "ssh_tunnel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <libssh/libssh.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <optional>
#include <utility>
#include <vector>

namespace gpuprov {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;

/// Largest chunk moved at once in either direction.
constexpr size_t kChunk = 64 * 1024;
/// Bytes one connection may move per direction in one pass, so one busy connection does not
/// starve the others.
constexpr size_t kPassBudget = 256 * 1024;
/// Longest poll(2) wait: how often stop requests and channel-open deadlines are checked.
constexpr int kPollMs = 200;
/// Pause between connection attempts, and cadence of kConnecting events.
constexpr milliseconds kRetryPause(1000);
constexpr seconds kProgressInterval(3);
constexpr milliseconds kMinAttemptTimeout(200);
/// TCP keepalive on the SSH socket: probes after 15 s idle, every 5 s, 3 unanswered probes (or
/// 30 s of unacknowledged data) end the connection, so a VM that vanished is noticed in ~30 s.
constexpr int kKeepIdleS = 15;
constexpr int kKeepIntervalS = 5;
constexpr int kKeepCount = 3;
constexpr unsigned kUserTimeoutMs = 30000;

std::string SecondsText(milliseconds ms) {
  return std::to_string(duration_cast<seconds>(ms + milliseconds(500)).count()) + "s";
}

std::string HostPortText(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

/// True when the session can no longer carry channels.
bool SessionBroken(ssh_session session) {
  return ssh_is_connected(session) == 0 ||
         (ssh_get_status(session) & (SSH_CLOSED | SSH_CLOSED_ERROR)) != 0;
}

std::string LibsshError(ssh_session session) {
  const char* text = ssh_get_error(session);
  return text != nullptr && *text != '\0' ? text : "unknown libssh error";
}

/// One local client connection and the channel that carries it.
struct Connection {
  int fd = -1;
  ssh_channel channel = nullptr;
  std::string peer_host;  // the local client's address, sent as the originator
  int peer_port = 0;
  bool opening = true;
  Clock::time_point open_started;
  std::string to_client;  // read from the channel, not yet written to the client
  size_t to_client_offset = 0;
  bool client_eof = false;         // nothing more is read from the client (EOF sent)
  bool remote_eof = false;         // the channel has nothing more to read
  bool client_write_shut = false;  // shutdown(SHUT_WR) done on the client socket

  bool pending() const { return to_client_offset < to_client.size(); }
};

}  // namespace

/// The pump: owns the SSH session and every forwarded connection; used by one thread only.
class SshPortForward::Pump {
 public:
  explicit Pump(SshPortForward& owner) : owner_(owner), options_(owner.options_) {}
  ~Pump() { Detach(); }
  Pump(const Pump&) = delete;
  Pump& operator=(const Pump&) = delete;

  /// Connects the first session; false when \a should_stop said stop first.
  bool ConnectFirst(const std::function<bool()>& should_stop) {
    std::optional<SshSession> session = ConnectWithRetry(options_.connect_deadline, should_stop,
                                                         /*after_drop=*/false);
    if (!session) return false;
    Attach(std::move(*session));
    Emit({PortForwardEvent::Kind::kConnected, "", seconds(0), 0});
    return true;
  }

  /// Serves connections until \a should_stop; reconnects after drops.
  void Serve(const std::function<bool()>& should_stop) {
    bool more = false;
    while (!should_stop()) {
      ssh_session raw = session_->native();
      std::vector<pollfd> fds;
      fds.push_back({owner_.wake_pipe_[0], POLLIN, 0});
      fds.push_back({owner_.listen_fd_, POLLIN, 0});
      // POLLOUT too while libssh holds unsent bytes (left by the non-blocking channel open).
      const bool write_pending = (ssh_get_status(raw) & SSH_WRITE_PENDING) != 0;
      fds.push_back(
          {ssh_get_fd(raw), static_cast<short>(POLLIN | (write_pending ? POLLOUT : 0)), 0});
      for (const auto& conn : connections_) {
        short events = 0;
        if (!conn.opening && !conn.client_eof && ssh_channel_window_size(conn.channel) > 0) {
          events |= POLLIN;
        }
        if (conn.pending()) events |= POLLOUT;
        // A connection that waits for the SSH side is left out, so a hang-up on it cannot
        // make poll(2) return at once again and again.
        fds.push_back({events != 0 ? conn.fd : -1, events, 0});
      }
      const int rc = ::poll(fds.data(), fds.size(), more ? 0 : kPollMs);
      if (rc < 0 && errno != EINTR) {
        throw Error(std::string("the port forward cannot wait for sockets: ") +
                    std::strerror(errno));
      }
      if (rc > 0 && (fds[0].revents & POLLIN) != 0) DrainWakePipe();
      if (should_stop()) break;
      if (rc > 0 && fds[2].revents != 0) {
        // Lets libssh read what the SSH socket has: channel data, window adjustments, EOFs,
        // channel-open answers, global requests, and the end of the connection.
        ssh_event_dopoll(event_, 0);
      }
      if (!SessionBroken(raw) && rc > 0 && (fds[1].revents & POLLIN) != 0) AcceptAll();
      more = ServiceAll();
      if (SessionBroken(raw)) {
        if (!Reconnect(should_stop)) break;
        more = false;
      }
    }
  }

 private:
  void Emit(const PortForwardEvent& event) {
    if (owner_.on_event_) owner_.on_event_(event);
  }

  std::string Where() const {
    return owner_.target_.user + "@" + SshHostPort(owner_.target_.host, owner_.target_.port);
  }

  /// Sleeps up to \a pause, waking early on Stop(); false when \a should_stop says stop.
  bool Pause(milliseconds pause, const std::function<bool()>& should_stop) {
    const auto end = Clock::now() + pause;
    while (!should_stop()) {
      const auto left = duration_cast<milliseconds>(end - Clock::now());
      if (left <= milliseconds(0)) return true;
      pollfd pfd{owner_.wake_pipe_[0], POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), kPollMs))) > 0) {
        DrainWakePipe();
      }
    }
    return false;
  }

  /// SshSession::Connect until it succeeds, \a deadline passes (throws SshError), or
  /// \a should_stop (nullopt). Only unreachable is retried, as in WaitForSsh.
  std::optional<SshSession> ConnectWithRetry(milliseconds deadline,
                                             const std::function<bool()>& should_stop,
                                             bool after_drop) {
    auto start = Clock::now();
    auto end = start + deadline;
    auto next_progress = start;  // the first failed attempt is reported at once
    std::string last_error;
    int attempts = 0;
    while (!should_stop()) {
      if (after_drop && Follow()) {
        // Another VM: its own deadline.
        start = Clock::now();
        end = start + deadline;
        attempts = 0;
        next_progress = start;
      }
      const auto left = duration_cast<milliseconds>(end - Clock::now());
      const milliseconds attempt =
          std::clamp<milliseconds>(left, kMinAttemptTimeout, options_.attempt_timeout);
      ++attempts;
      try {
        return SshSession::Connect(owner_.target_, attempt);
      } catch (const SshError& e) {
        if (e.failure() != SshFailure::kUnreachable) throw;
        last_error = e.what();
      }
      const auto now = Clock::now();
      if (now >= end) {
        const std::string what =
            after_drop ? " did not come back within " : " did not become reachable within ";
        throw SshError(SshFailure::kUnreachable,
                       "SSH on " + SshHostPort(owner_.target_.host, owner_.target_.port) + what +
                           SecondsText(deadline) + " (" + std::to_string(attempts) +
                           " attempts; last: " + last_error + ")",
                       "check that the VM runs (`gpuprov list`) and that its firewall allows SSH "
                       "from this machine, then run the command again");
      }
      if (now >= next_progress) {
        Emit({PortForwardEvent::Kind::kConnecting, last_error, duration_cast<seconds>(now - start),
              0});
        next_progress = now + kProgressInterval;
      }
      if (!Pause(std::min<milliseconds>(kRetryPause, duration_cast<milliseconds>(end - now)),
                 should_stop)) {
        break;
      }
    }
    return std::nullopt;
  }

  /// options.follow's target when it differs from the current one: taken (kFollowed), true.
  bool Follow() {
    if (!options_.follow) return false;
    std::optional<SshTarget> now = options_.follow();
    SshTarget& current = owner_.target_;
    if (!now || now->host.empty() ||
        (now->host == current.host && now->port == current.port && now->user == current.user)) {
      return false;
    }
    current = std::move(*now);
    Emit({PortForwardEvent::Kind::kFollowed, Where(), seconds(0), 0});
    return true;
  }

  /// Takes \a session over: event loop, packet counter, TCP keepalive.
  void Attach(SshSession session) {
    session_.emplace(std::move(session));
    ssh_session raw = session_->native();
    counters_ = {};
    ssh_set_counters(raw, nullptr, &counters_);
    event_ = ssh_event_new();
    if (event_ == nullptr || ssh_event_add_session(event_, raw) != SSH_OK) {
      throw Error("cannot set up the SSH event loop for the port forward: " + LibsshError(raw),
                  "retry; if it persists, report it with `gpuprov -v ...`");
    }
    const int fd = ssh_get_fd(raw);
    if (fd >= 0) {
      int on = 1;
      int idle = kKeepIdleS;
      int interval = kKeepIntervalS;
      int count = kKeepCount;
      unsigned user_timeout = kUserTimeoutMs;
      // Best effort: without them a vanished VM is noticed only when TCP gives up.
      ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
      ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    }
  }

  /// Closes every connection, then the session.
  void Detach() {
    while (!connections_.empty()) {
      Close(connections_.front());
      connections_.pop_front();
    }
    if (!session_) return;
    ssh_session raw = session_->native();
    if (event_ != nullptr) {
      ssh_event_remove_session(event_, raw);
      ssh_event_free(event_);
      event_ = nullptr;
    }
    session_.reset();  // disconnects; the counters are still alive here
  }

  bool Reconnect(const std::function<bool()>& should_stop) {
    const std::string reason = LibsshError(session_->native());
    const int open = static_cast<int>(connections_.size());
    Detach();
    Emit({PortForwardEvent::Kind::kDropped, reason, seconds(0), open});
    std::optional<SshSession> session =
        ConnectWithRetry(options_.reconnect_deadline, should_stop, /*after_drop=*/true);
    if (!session) return false;
    Attach(std::move(*session));
    Emit({PortForwardEvent::Kind::kReconnected, "", seconds(0), 0});
    return true;
  }

  void DrainWakePipe() {
    char buf[64];
    while (::read(owner_.wake_pipe_[0], buf, sizeof(buf)) > 0) {
    }
  }

  void AcceptAll() {
    ssh_session raw = session_->native();
    while (true) {
      sockaddr_storage addr{};
      socklen_t len = sizeof(addr);
      const int fd = ::accept4(owner_.listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // EAGAIN: none left; EMFILE and the like: retried on the next wake-up
      }
      Connection conn;
      conn.fd = fd;
      char host[NI_MAXHOST] = "127.0.0.1";
      char serv[NI_MAXSERV] = "0";
      ::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV);
      conn.peer_host = host;
      conn.peer_port = std::atoi(serv);
      conn.channel = ssh_channel_new(raw);
      conn.open_started = Clock::now();
      if (conn.channel == nullptr) {
        ::close(fd);
        return;  // the session is broken; Serve reconnects
      }
      connections_.push_back(std::move(conn));
    }
  }

  /// Moves bytes for every connection until no new SSH packet arrives during a whole pass, so
  /// no data is left in libssh's channel buffers while poll(2) waits on the socket. True when
  /// a connection still has work that needs no wake-up (the next poll must not wait).
  bool ServiceAll() {
    ssh_session raw = session_->native();
    for (int pass = 0; pass < 8; ++pass) {
      const uint64_t packets_before = counters_.in_packets;
      bool more = false;
      for (auto it = connections_.begin(); it != connections_.end();) {
        if (SessionBroken(raw)) return false;
        if (Service(*it, &more)) {
          ++it;
        } else {
          Close(*it);
          it = connections_.erase(it);
        }
      }
      if (counters_.in_packets == packets_before) return more;
    }
    return true;
  }

  /// Writes what is pending to the client; false when the client is gone.
  static bool FlushToClient(Connection& conn) {
    while (conn.pending()) {
      const ssize_t n = ::send(conn.fd, conn.to_client.data() + conn.to_client_offset,
                               conn.to_client.size() - conn.to_client_offset, MSG_NOSIGNAL);
      if (n > 0) {
        conn.to_client_offset += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      return false;
    }
    conn.to_client.clear();
    conn.to_client_offset = 0;
    return true;
  }

  /// One step of one connection; false when it is finished or failed (then it is closed).
  bool Service(Connection& conn, bool* more) {
    ssh_session raw = session_->native();
    if (conn.opening) {
      // Non-blocking open: SSH_AGAIN until the server answers; the answer arrives through the
      // event loop and the next call returns SSH_OK.
      ssh_set_blocking(raw, 0);
      const int rc =
          ssh_channel_open_forward(conn.channel, options_.remote_host.c_str(), options_.remote_port,
                                   conn.peer_host.c_str(), conn.peer_port);
      ssh_set_blocking(raw, 1);
      if (rc == SSH_AGAIN) {
        if (Clock::now() - conn.open_started < options_.attempt_timeout) return true;
        Emit({PortForwardEvent::Kind::kChannelFailed,
              "the VM did not answer a request to connect to " +
                  HostPortText(options_.remote_host, options_.remote_port) + " within " +
                  SecondsText(options_.attempt_timeout),
              seconds(0), 0});
        return false;
      }
      if (rc != SSH_OK) {
        if (SessionBroken(raw)) return false;
        Emit({PortForwardEvent::Kind::kChannelFailed,
              "the VM could not connect to " +
                  HostPortText(options_.remote_host, options_.remote_port) + ": " +
                  LibsshError(raw),
              seconds(0), 0});
        return false;
      }
      conn.opening = false;
    }

    char buf[kChunk];
    // Channel -> client.
    size_t moved = 0;
    while (moved < kPassBudget) {
      if (conn.pending()) {
        if (!FlushToClient(conn)) return false;
        if (conn.pending()) break;
      }
      if (conn.remote_eof) break;
      const int n = ssh_channel_read_nonblocking(conn.channel, buf, sizeof(buf), 0);
      if (n == SSH_EOF) {
        conn.remote_eof = true;
      } else if (n == SSH_ERROR) {
        if (SessionBroken(raw)) return false;
        conn.remote_eof = true;  // the VM closed the channel
      } else if (n == 0) {
        if (ssh_channel_is_eof(conn.channel) != 0) conn.remote_eof = true;
        break;
      } else {
        conn.to_client.assign(buf, static_cast<size_t>(n));
        conn.to_client_offset = 0;
        moved += static_cast<size_t>(n);
      }
    }
    if (moved >= kPassBudget) *more = true;
    if (conn.remote_eof && !conn.pending() && !conn.client_write_shut) {
      ::shutdown(conn.fd, SHUT_WR);
      conn.client_write_shut = true;
    }

    // Client -> channel: never more than the remote window, so the write does not wait.
    moved = 0;
    while (!conn.client_eof && moved < kPassBudget) {
      const uint32_t window = ssh_channel_window_size(conn.channel);
      if (window == 0) break;  // the window adjustment arrives through the SSH socket
      const ssize_t n = ::recv(conn.fd, buf, std::min<size_t>(sizeof(buf), window), 0);
      if (n > 0) {
        const int written = ssh_channel_write(conn.channel, buf, static_cast<uint32_t>(n));
        if (written != n) {
          if (SessionBroken(raw)) return false;
          // The VM closed the channel: what the client sends has nowhere to go. What the VM
          // sent before still goes to the client.
          conn.client_eof = true;
          break;
        }
        moved += static_cast<size_t>(n);
        continue;
      }
      if (n == 0) {
        conn.client_eof = true;
        if (ssh_channel_send_eof(conn.channel) != SSH_OK && SessionBroken(raw)) return false;
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return false;  // reset by the client
    }
    if (moved >= kPassBudget) *more = true;

    if (conn.remote_eof && !conn.pending() &&
        (conn.client_eof || ssh_channel_is_closed(conn.channel) != 0)) {
      return false;  // both directions are done
    }
    return true;
  }

  static void Close(Connection& conn) {
    if (conn.channel != nullptr) {
      // Sends the channel close when the channel is still open.
      ssh_channel_free(conn.channel);
      conn.channel = nullptr;
    }
    CloseFd(&conn.fd);
  }

  SshPortForward& owner_;
  const PortForwardOptions& options_;
  // Declared before session_ so it outlives the session, which updates it until it is freed.
  ssh_counter_struct counters_{};
  std::optional<SshSession> session_;
  ssh_event event_ = nullptr;
  std::list<Connection> connections_;
};

SshPortForward::SshPortForward(SshTarget target, PortForwardOptions options, EventCallback on_event)
    : target_(std::move(target)), options_(std::move(options)), on_event_(std::move(on_event)) {
  if (options_.listen_port < 0 || options_.listen_port > 65535) {
    throw UsageError("invalid local port " + std::to_string(options_.listen_port),
                     "give a port between 1 and 65535, or 0 for any free port");
  }
  if (options_.remote_port < 1 || options_.remote_port > 65535 || options_.remote_host.empty()) {
    throw Error(
        "invalid forward destination " + HostPortText(options_.remote_host, options_.remote_port),
        "give a host and a port between 1 and 65535");
  }
  const std::string where = HostPortText(options_.listen_host, options_.listen_port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* found = nullptr;
  const int gai = ::getaddrinfo(options_.listen_host.c_str(),
                                std::to_string(options_.listen_port).c_str(), &hints, &found);
  if (gai != 0 || found == nullptr) {
    throw UsageError("cannot listen on " + where + ": '" + options_.listen_host +
                         "' is not a numeric IP address",
                     "listen on an address such as 127.0.0.1");
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);

  listen_fd_ = ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) {
    throw Error("cannot create a socket to listen on " + where + ": " + std::strerror(errno));
  }
  // Lets a new tunnel bind while connections of an old one linger in TIME_WAIT; on Linux it
  // does not let two sockets listen on one port.
  int on = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  if (::bind(listen_fd_, found->ai_addr, found->ai_addrlen) != 0) {
    const int err = errno;
    CloseFd(&listen_fd_);
    if (err == EADDRINUSE) {
      const std::string port = std::to_string(options_.listen_port);
      throw Error(where + " is already in use",
                  "another program listens there (perhaps another `gpuprov tunnel`): "
                  "`ss -ltnp 'sport = :" +
                      port + "'` shows which; stop it, or choose another port with --local-port N");
    }
    if (err == EADDRNOTAVAIL) {
      throw Error("cannot listen on " + where + ": no local interface has that address",
                  "listen on 127.0.0.1");
    }
    if (err == EACCES) {
      throw Error("cannot listen on " + where + ": ports below 1024 need root",
                  "choose a port above 1023 with --local-port N");
    }
    throw Error("cannot listen on " + where + ": " + std::strerror(err));
  }
  if (::listen(listen_fd_, SOMAXCONN) != 0) {
    const int err = errno;
    CloseFd(&listen_fd_);
    throw Error("cannot listen on " + where + ": " + std::strerror(err));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (::pipe2(wake_pipe_, O_NONBLOCK | O_CLOEXEC) != 0) {
    const int err = errno;
    CloseFd(&listen_fd_);
    throw Error(std::string("cannot create the port forward's wake-up pipe: ") +
                std::strerror(err));
  }
}

SshPortForward::~SshPortForward() {
  Stop();
  CloseFd(&listen_fd_);
  CloseFd(&wake_pipe_[0]);
  CloseFd(&wake_pipe_[1]);
}

std::string SshPortForward::local_address() const {
  return HostPortText(options_.listen_host, port_);
}

void SshPortForward::Start() {
  if (started_) throw Error("this port forward was started already", "this is a bug in gpuprov");
  started_ = true;
  pump_ = std::make_unique<Pump>(*this);
  const auto should_stop = [this] { return stop_requested_.load(); };
  if (!pump_->ConnectFirst(should_stop)) return;
  thread_ = std::thread([this, should_stop] {
    try {
      pump_->Serve(should_stop);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex_);
      failure_ = std::current_exception();
      // Nobody will accept anymore: new local connections are refused instead of waiting.
      CloseFd(&listen_fd_);
    }
    pump_.reset();  // closes the connections and the session on this thread
  });
}

void SshPortForward::Stop() {
  stop_requested_.store(true);
  if (wake_pipe_[1] >= 0) {
    const char byte = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_pipe_[1], &byte, 1);
  }
  if (thread_.joinable()) thread_.join();
  pump_.reset();
}

std::exception_ptr SshPortForward::failure() const {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  return failure_;
}

void SshPortForward::Run(const std::function<bool()>& should_stop) {
  if (started_) throw Error("this port forward was started already", "this is a bug in gpuprov");
  started_ = true;
  const auto stop = [this, &should_stop] { return stop_requested_.load() || should_stop(); };
  Pump pump(*this);
  if (!pump.ConnectFirst(stop)) return;
  pump.Serve(stop);
}

}  // namespace gpuprov
