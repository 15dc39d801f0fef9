// SSH local port forwarding (docs/design.md §2, tunnel mode): a TCP listener on this machine
// whose connections are carried to a host:port as seen from the VM, over direct-tcpip channels
// of one SSH session (what `ssh -L` does). `gpuprov tunnel NAME` holds 127.0.0.1:16443 ->
// node 127.0.0.1:6443 until Ctrl-C; provision reaches a node's API through a temporary forward on
// an ephemeral port.
//
// Threading: libssh sessions are not thread-safe, so exactly one thread (the pump) touches the
// session and its channels: the background thread after Start(), or the caller's thread inside
// Run(). The pump multiplexes everything with poll(2) over the listening socket, every local
// client socket, the SSH socket and a wake-up pipe (Stop()), moving bytes with non-blocking
// socket calls and ssh_channel_read_nonblocking. Writes to a channel never exceed its remote
// window, so a channel write does not wait for the other side to read; it does wait until libssh
// has handed the packet to the kernel's socket buffer. Channels are opened without blocking
// (the session is switched to non-blocking mode for that call only), so a slow open does not hold
// up the other connections. Reading from a channel only while the local client has taken the
// previous chunk gives back-pressure in both directions: the SSH window stops the remote sender.
//
// Reconnects: when the SSH connection breaks (EOF, socket error, TCP keepalive timeout of about
// 30 s), every forwarded connection is closed (its client sees the connection end) and a new
// session is made, retrying until reconnect_deadline. The listening socket stays open
// throughout; local connections made while reconnecting wait in its backlog and are served
// once the session is back. A changed host key or a refused key ends the forward at once.
// With options.follow, each reconnect attempt first asks where the VM is now: a VM replaced by a
// new one (a new address, its own host key pinned by whoever made it) is followed, and the
// reconnect deadline starts again for it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ssh_client.h"

namespace gpuprov {

struct PortForwardOptions {
  /// Where to listen on this machine: a numeric IPv4 or IPv6 address.
  std::string listen_host = "127.0.0.1";
  /// 0 picks a free port (see SshPortForward::port()).
  int listen_port = 0;
  /// The destination as the VM sees it, e.g. 127.0.0.1:6443 for the node's Kubernetes API.
  std::string remote_host = "127.0.0.1";
  int remote_port = 0;
  /// How long the first connection (Start, Run) retries an unreachable VM.
  std::chrono::milliseconds connect_deadline = std::chrono::seconds(30);
  /// How long a reconnect after a drop retries before the forward gives up.
  std::chrono::milliseconds reconnect_deadline = std::chrono::minutes(5);
  /// Bound of one connection attempt, and of opening one channel.
  std::chrono::milliseconds attempt_timeout = std::chrono::seconds(5);
  /// Asked on the pump thread before each reconnect attempt after a drop: the SSH target of the
  /// VM now (e.g. from its state record), or nullopt when unknown (the current one is kept). A
  /// target with another host, port or user replaces the current one (kFollowed). Unset: the
  /// forward keeps its target.
  std::function<std::optional<SshTarget>()> follow;
};

/// What the forward reports while it runs (through the callback given to SshPortForward).
struct PortForwardEvent {
  enum class Kind {
    kConnecting = 1,  // an attempt failed and connecting goes on; elapsed and message are set
    kConnected,       // the first session is up
    kDropped,        // the SSH connection broke; message says why, open_connections how many closed
    kReconnected,    // a new session is up after a drop
    kChannelFailed,  // the VM refused one forwarded connection (e.g. nothing listens there)
    kFollowed,       // after a drop, options.follow named another target; message: "user@host:port"
  };
  Kind kind;
  std::string message;
  std::chrono::seconds elapsed{0};
  int open_connections = 0;
};

class SshPortForward {
 public:
  /// Called on the pump thread (see the file comment); must not call back into the forward.
  using EventCallback = std::function<void(const PortForwardEvent&)>;

  /// Binds and listens on options.listen_host:listen_port at once; nothing is connected yet.
  /// Throws Error "<host>:<port> is already in use" (with a hint naming the holder's command
  /// and --local-port) when another socket holds the port, and Error for other bind failures
  /// or invalid options.
  SshPortForward(SshTarget target, PortForwardOptions options, EventCallback on_event = nullptr);
  SshPortForward(const SshPortForward&) = delete;
  SshPortForward& operator=(const SshPortForward&) = delete;
  /// Stops the pump (as Stop() does) and closes the listening socket.
  ~SshPortForward();

  /// The bound local port (the chosen one when listen_port was 0).
  int port() const { return port_; }
  /// "127.0.0.1:16443", or "[::1]:16443".
  std::string local_address() const;

  /// Connects (retrying an unreachable VM until connect_deadline) on the calling thread, then
  /// runs the pump on a background thread and returns. Throws SshError/Error when the first
  /// connection fails. Call at most once.
  void Start();
  /// Ends the background pump: closes forwarded connections and the session, joins the thread.
  /// The listening socket stays bound until the destructor. Safe to call more than once.
  void Stop();
  /// Set when the background pump ended on its own (reconnect_deadline passed, host key
  /// changed, ...): the exception it ended with; the listening socket is closed then, so local
  /// connections are refused. Null while it runs, and when Stop() ended it.
  std::exception_ptr failure() const;

  /// Connects and runs the pump on the calling thread until \a should_stop returns true
  /// (checked at least every 200 ms, also while connecting). Returns normally on a stop;
  /// throws SshError/Error when connecting fails or a reconnect gives up.
  void Run(const std::function<bool()>& should_stop);

 private:
  class Pump;

  SshTarget target_;
  PortForwardOptions options_;
  EventCallback on_event_;
  int listen_fd_ = -1;
  int port_ = 0;
  int wake_pipe_[2] = {-1, -1};
  std::atomic<bool> stop_requested_{false};
  std::unique_ptr<Pump> pump_;
  std::thread thread_;
  mutable std::mutex failure_mutex_;
  std::exception_ptr failure_;
  bool started_ = false;
};

}  // namespace gpuprov
