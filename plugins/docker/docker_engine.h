// SPDX-License-Identifier: Apache-2.0
//
// A small Docker Engine API client: HTTP/1.1 over the daemon's AF_UNIX socket,
// API pinned at v1.41 (Docker 20.10), one connection per request. It depends on
// Poco only (no gpuprov SDK or core), so the driver and the cloud emulator's
// Docker backend can both use it. Facts: REFERENCE.md.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpuprov::docker {

/// The API version every path is pinned at.
inline constexpr const char* kApiVersion = "1.41";
/// The socket used when DOCKER_HOST is unset.
inline constexpr const char* kDefaultSocket = "/var/run/docker.sock";

/// A failed Engine call. http_status() is the daemon's status code, or 0 when no
/// HTTP response arrived (no daemon, bad DOCKER_HOST, broken connection).
/// message() is Docker's own {"message": ...} text when it sent one.
class EngineError : public std::runtime_error {
 public:
  enum class Kind {
    kHttp,         // the daemon answered with an error status
    kUnreachable,  // cannot connect to the socket
    kDenied,       // the socket refused us (EACCES): not root and not in group docker
    kConfig,       // DOCKER_HOST cannot be used
    kProtocol,     // the answer was not what the API documents, or the connection broke
  };
  EngineError(Kind kind, int http_status, std::string message, const std::string& what);
  Kind kind() const { return kind_; }
  int http_status() const { return http_status_; }
  const std::string& message() const { return message_; }

 private:
  Kind kind_;
  int http_status_;
  std::string message_;
};

/// Returns the socket path named by a DOCKER_HOST value: "" -> kDefaultSocket,
/// "unix:///p" -> "/p". Throws EngineError (kConfig) for tcp://, ssh:// and
/// anything else: only unix sockets are supported.
std::string SocketPathFromDockerHost(std::string_view docker_host);

/// Splits Docker's multiplexed exec/log stream (8-byte frame headers: stream
/// 1 = stdout, 2 = stderr, then a big-endian uint32 length) into out and err.
/// Frames of stream 0 (stdin echo) go to out. Throws EngineError (kProtocol)
/// on a truncated frame or an unknown stream number.
void DemuxStream(std::string_view raw, std::string* out, std::string* err);

/// One published port: container_port/protocol -> host_ip:host_port.
struct PortBinding {
  int container_port = 0;
  std::string protocol = "tcp";
  std::string host_ip;
  std::string host_port;  // "" lets the daemon choose at start
};

/// Body of POST /containers/create. Empty fields are left out of the request.
struct ContainerSpec {
  std::string name;  // [a-zA-Z0-9][a-zA-Z0-9_.-]*; "" lets the daemon choose
  std::string image;
  std::vector<std::string> cmd;  // empty: the image's CMD
  std::string hostname;
  std::vector<std::string> env;  // "K=V"
  std::map<std::string, std::string> labels;
  std::vector<PortBinding> ports;
  std::map<std::string, std::string> tmpfs;  // mount point -> options ("rw,nosuid,size=64m")
  std::vector<std::string> binds;            // "/host:/container[:ro]"
  std::vector<std::string> cap_add;
  std::vector<std::string> security_opt;
  std::string cgroupns_mode;  // "host" or "private"; "" leaves the daemon's default
  bool privileged = false;
  std::string stop_signal;  // "" leaves the image's
};

/// What GET /containers/{id}/json says about a container.
struct ContainerInfo {
  std::string id;
  std::string name;   // without Docker's leading "/"
  std::string image;  // Config.Image as requested
  std::string hostname;
  std::string status;  // created|running|paused|restarting|removing|exited|dead
  bool running = false;
  int exit_code = 0;
  std::string error;    // State.Error
  std::string created;  // RFC 3339 with nanoseconds, as Docker writes it
  std::map<std::string, std::string> labels;
  std::vector<PortBinding> port_bindings;  // HostConfig.PortBindings: what was requested
  std::vector<PortBinding> published;      // NetworkSettings.Ports: only while running
  int pid = 0;             // State.Pid: its first process on this host, 0 unless running
  std::string ip_address;  // its IPv4 address on its first Docker network ("" unless running)
  /// Its IPv4 address on each Docker network it is attached to, by network name.
  std::map<std::string, std::string> network_addresses;
};

/// One row of GET /containers/json.
struct ContainerSummary {
  std::string id;
  std::vector<std::string> names;  // without the leading "/"
  std::string image;
  std::string state;    // as ContainerInfo::status
  int64_t created = 0;  // Unix seconds
  std::map<std::string, std::string> labels;
};

/// Output of a finished exec.
struct ExecResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// GET /version, the fields callers use.
struct VersionInfo {
  std::string version;      // "20.10.24+dfsg1"
  std::string api_version;  // "1.41"
  std::string os;
  std::string arch;
};

/// A Docker Engine client bound to one socket. Stateless between calls and
/// cheap to copy; not for concurrent use of one object from several threads.
class Engine {
 public:
  /// timeout bounds the connect and each socket read/write of a request.
  explicit Engine(std::string socket_path,
                  std::chrono::milliseconds timeout = std::chrono::seconds(30));
  /// The socket from $DOCKER_HOST, else kDefaultSocket.
  static Engine FromEnvironment(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  const std::string& socket_path() const { return socket_path_; }

  /// GET /_ping; returns the Api-Version header (the daemon's newest API).
  std::string Ping() const;
  VersionInfo Version() const;

  /// POST /containers/create; returns the new container's id.
  std::string CreateContainer(const ContainerSpec& spec) const;
  /// POST /containers/{id}/start; an already running container is fine (304).
  void StartContainer(const std::string& id) const;
  /// GET /containers/{id}/json; std::nullopt when there is no such container.
  std::optional<ContainerInfo> InspectContainer(const std::string& id_or_name) const;
  /// GET /containers/json?all=true with every "key=value" (or "key") of
  /// label_filters ANDed; stopped containers included.
  std::vector<ContainerSummary> ListContainers(const std::vector<std::string>& label_filters) const;
  /// The container whose name is exactly name (not Docker's substring
  /// match), among those matching label_filters; std::nullopt when none.
  std::optional<ContainerSummary> FindContainerByName(
      const std::string& name, const std::vector<std::string>& label_filters = {}) const;
  /// PUT /containers/{id}/archive?path=<dir>: extracts a tar archive into dir.
  void PutArchive(const std::string& id, const std::string& dir, const std::string& tar) const;
  /// Runs cmd in a running container (no TTY, no stdin) and waits for it.
  ExecResult Exec(const std::string& id, const std::vector<std::string>& cmd,
                  const std::vector<std::string>& env = {}) const;
  /// POST /containers/{id}/kill.
  void KillContainer(const std::string& id, const std::string& signal = "SIGKILL") const;
  /// DELETE /containers/{id}?force=true&v=true; false when it was already gone.
  bool RemoveContainer(const std::string& id) const;
  /// GET /images/{name}/json succeeds.
  bool ImageExists(const std::string& name) const;

  /// POST /networks/create: a bridge network called name with IPv4 subnet (CIDR) and labels;
  /// internal (no route out of it) when asked. Returns its id. Throws EngineError (kHttp 409)
  /// when the name is taken, and (kHttp 403 or 400) when the subnet overlaps another network's.
  std::string CreateNetwork(const std::string& name, const std::string& subnet,
                            const std::map<std::string, std::string>& labels,
                            bool internal) const;
  /// POST /networks/{id}/connect: attaches a container (created or running) to the network.
  void ConnectNetwork(const std::string& network, const std::string& container) const;
  /// DELETE /networks/{id}; false when it was already gone.
  bool RemoveNetwork(const std::string& network) const;
  /// GET /networks with every "key=value" (or "key") of label_filters ANDed: the names.
  std::vector<std::string> ListNetworks(const std::vector<std::string>& label_filters) const;

 private:
  struct Response {
    int status = 0;
    std::string body;
    std::map<std::string, std::string> headers;  // names lower-cased
  };
  /// Sends one request on a new connection and reads the whole answer.
  /// versioned=false sends the path as is (no /v1.41 prefix).
  Response Call(const std::string& method, const std::string& path, const std::string& body = "",
                const std::string& content_type = "application/json", bool versioned = true) const;
  /// Throws EngineError (kHttp) for r, naming what was attempted.
  [[noreturn]] void Fail(const Response& r, const std::string& what) const;

  std::string socket_path_;
  std::chrono::milliseconds timeout_;
};

/// Percent-encodes everything but RFC 3986 unreserved characters.
std::string UrlEncode(std::string_view s);

}  // namespace gpuprov::docker
