// SPDX-License-Identifier: Apache-2.0
#include "docker_engine.h"

#include <Poco/Dynamic/Var.h>
#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>
#include <Poco/StreamCopier.h>
#include <Poco/Timespan.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "text.h"
#include "uri.h"

namespace gpuprov::docker {
namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;

// Blocks SIGPIPE on this thread while a request writes to the socket, and
// swallows one the request raised, so a daemon closing early cannot kill the
// process that loaded us. (Linux has no per-socket SIGPIPE switch, and Poco
// sends without MSG_NOSIGNAL.)
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        timespec zero{};
        sigtimedwait(&pipe_, nullptr, &zero);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
};

std::string Stringify(const Object& o) {
  std::ostringstream s;
  o.stringify(s);
  return s.str();
}

Object::Ptr ParseObject(const std::string& body, const std::string& what) {
  try {
    Poco::JSON::Parser parser;
    Poco::Dynamic::Var v = parser.parse(body);
    Object::Ptr o = v.extract<Object::Ptr>();
    if (o) return o;
  } catch (const Poco::Exception&) {
  } catch (const std::exception&) {
  }
  throw EngineError(EngineError::Kind::kProtocol, 0, "",
                    what + ": the Docker daemon sent a body that is not a JSON object");
}

Array::Ptr ParseArray(const std::string& body, const std::string& what) {
  try {
    Poco::JSON::Parser parser;
    Poco::Dynamic::Var v = parser.parse(body);
    Array::Ptr a = v.extract<Array::Ptr>();
    if (a) return a;
  } catch (const Poco::Exception&) {
  } catch (const std::exception&) {
  }
  throw EngineError(EngineError::Kind::kProtocol, 0, "",
                    what + ": the Docker daemon sent a body that is not a JSON array");
}

// Reads o[key] as a string; "" when absent or null.
std::string Str(const Object::Ptr& o, const std::string& key) {
  if (!o || !o->has(key) || o->isNull(key)) return "";
  return o->get(key).convert<std::string>();
}

int64_t Int(const Object::Ptr& o, const std::string& key) {
  if (!o || !o->has(key) || o->isNull(key)) return 0;
  return o->get(key).convert<int64_t>();
}

bool Bool(const Object::Ptr& o, const std::string& key) {
  if (!o || !o->has(key) || o->isNull(key)) return false;
  return o->get(key).convert<bool>();
}

Object::Ptr Obj(const Object::Ptr& o, const std::string& key) {
  if (!o || !o->has(key) || o->isNull(key)) return nullptr;
  return o->getObject(key);
}

std::map<std::string, std::string> StringMap(const Object::Ptr& o) {
  std::map<std::string, std::string> m;
  if (!o) return m;
  for (const auto& [k, v] : *o) m[k] = v.isEmpty() ? "" : v.convert<std::string>();
  return m;
}

// {"22/tcp": [{"HostIp": "127.0.0.1", "HostPort": "22"}], "53/udp": null}
std::vector<PortBinding> ParsePortMap(const Object::Ptr& ports) {
  std::vector<PortBinding> out;
  if (!ports) return out;
  for (const auto& [key, value] : *ports) {
    PortBinding base;
    size_t slash = key.find('/');
    base.container_port = std::atoi(key.substr(0, slash).c_str());
    if (slash != std::string::npos) base.protocol = key.substr(slash + 1);
    if (value.isEmpty()) continue;
    Array::Ptr list = value.extract<Array::Ptr>();
    if (!list) continue;
    for (size_t i = 0; i < list->size(); ++i) {
      Object::Ptr b = list->getObject(static_cast<unsigned>(i));
      PortBinding pb = base;
      pb.host_ip = Str(b, "HostIp");
      pb.host_port = Str(b, "HostPort");
      out.push_back(pb);
    }
  }
  return out;
}

Array::Ptr StringArray(const std::vector<std::string>& v) {
  Array::Ptr a = new Array();
  for (const auto& s : v) a->add(s);
  return a;
}

Object::Ptr StringObject(const std::map<std::string, std::string>& m) {
  Object::Ptr o = new Object();
  for (const auto& [k, v] : m) o->set(k, v);
  return o;
}

std::string StripSlash(const std::string& name) {
  return !name.empty() && name.front() == '/' ? name.substr(1) : name;
}

using gpuprov::drivers::Lower;

}  // namespace

EngineError::EngineError(Kind kind, int http_status, std::string message, const std::string& what)
    : std::runtime_error(what),
      kind_(kind),
      http_status_(http_status),
      message_(std::move(message)) {}

std::string SocketPathFromDockerHost(std::string_view docker_host) {
  if (docker_host.empty()) return kDefaultSocket;
  constexpr std::string_view kUnix = "unix://";
  if (docker_host.substr(0, kUnix.size()) == kUnix) {
    std::string path(docker_host.substr(kUnix.size()));
    if (path.empty() || path.front() != '/') {
      throw EngineError(
          EngineError::Kind::kConfig, 0, "",
          "DOCKER_HOST=" + std::string(docker_host) +
              " does not name an absolute socket path; use unix:///path/to/docker.sock");
    }
    return path;
  }
  throw EngineError(EngineError::Kind::kConfig, 0, "",
                    "DOCKER_HOST=" + std::string(docker_host) +
                        " is not supported: gpuprov talks to Docker only over a unix socket "
                        "(DOCKER_HOST=unix:///var/run/docker.sock, or unset it)");
}

void DemuxStream(std::string_view raw, std::string* out, std::string* err) {
  size_t pos = 0;
  while (pos < raw.size()) {
    if (raw.size() - pos < 8) {
      throw EngineError(EngineError::Kind::kProtocol, 0, "",
                        "docker exec stream: truncated frame header");
    }
    auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(raw[i])); };
    uint32_t stream = byte(pos);
    uint32_t size =
        (byte(pos + 4) << 24) | (byte(pos + 5) << 16) | (byte(pos + 6) << 8) | byte(pos + 7);
    pos += 8;
    if (stream > 2) {
      throw EngineError(EngineError::Kind::kProtocol, 0, "",
                        "docker exec stream: unknown stream " + std::to_string(stream) +
                            " (was the exec created with Tty=true?)");
    }
    if (raw.size() - pos < size) {
      throw EngineError(
          EngineError::Kind::kProtocol, 0, "",
          "docker exec stream: frame of " + std::to_string(size) + " bytes truncated");
    }
    std::string* dst = stream == 2 ? err : out;
    if (dst != nullptr) dst->append(raw.substr(pos, size));
    pos += size;
  }
}

std::string UrlEncode(std::string_view s) { return drivers::EncodeComponent(s); }

Engine::Engine(std::string socket_path, std::chrono::milliseconds timeout)
    : socket_path_(std::move(socket_path)), timeout_(timeout) {}

Engine Engine::FromEnvironment(std::chrono::milliseconds timeout) {
  const char* host = std::getenv("DOCKER_HOST");
  return Engine(SocketPathFromDockerHost(host == nullptr ? "" : host), timeout);
}

Engine::Response Engine::Call(const std::string& method, const std::string& path,
                              const std::string& body, const std::string& content_type,
                              bool versioned) const {
  const std::string target = versioned ? std::string("/v") + kApiVersion + path : path;
  const Poco::Timespan timeout(static_cast<Poco::Timespan::TimeDiff>(timeout_.count()) * 1000);
  SigpipeGuard sigpipe_guard;

  Poco::Net::StreamSocket socket;
  try {
    socket.connect(Poco::Net::SocketAddress(Poco::Net::SocketAddress::UNIX_LOCAL, socket_path_),
                   timeout);
  } catch (const Poco::Exception& e) {
    int code = e.code();
    std::string reason = code > 0 ? std::strerror(code) : e.displayText();
    if (code == EACCES || code == EPERM) {
      throw EngineError(EngineError::Kind::kDenied, 0, "",
                        "cannot connect to the Docker daemon at " + socket_path_ + ": " + reason +
                            "; run as root or add this user to the group that owns the socket "
                            "(usually docker)");
    }
    throw EngineError(EngineError::Kind::kUnreachable, 0, "",
                      "cannot connect to the Docker daemon at " + socket_path_ + ": " + reason +
                          "; start dockerd");
  }

  try {
    Poco::Net::HTTPClientSession session(socket);
    session.setTimeout(timeout);
    session.setKeepAlive(false);
    Poco::Net::HTTPRequest request(method, target, Poco::Net::HTTPMessage::HTTP_1_1);
    request.setHost("docker");
    request.setKeepAlive(false);
    if (!body.empty() || method == Poco::Net::HTTPRequest::HTTP_POST ||
        method == Poco::Net::HTTPRequest::HTTP_PUT) {
      request.setContentType(content_type);
      request.setContentLength(static_cast<std::streamsize>(body.size()));
    }
    std::ostream& os = session.sendRequest(request);
    os.write(body.data(), static_cast<std::streamsize>(body.size()));
    os.flush();

    Poco::Net::HTTPResponse response;
    std::istream& is = session.receiveResponse(response);
    Response r;
    r.status = static_cast<int>(response.getStatus());
    Poco::StreamCopier::copyToString(is, r.body);
    for (const auto& [k, v] : response) r.headers[Lower(k)] = v;
    return r;
  } catch (const Poco::TimeoutException&) {
    throw EngineError(EngineError::Kind::kProtocol, 0, "",
                      method + " " + target + ": no answer from the Docker daemon at " +
                          socket_path_ + " within " + std::to_string(timeout_.count() / 1000) +
                          " s");
  } catch (const Poco::Exception& e) {
    throw EngineError(EngineError::Kind::kProtocol, 0, "",
                      method + " " + target + ": connection to the Docker daemon at " +
                          socket_path_ + " failed: " + e.displayText());
  }
}

void Engine::Fail(const Response& r, const std::string& what) const {
  std::string message;
  try {
    Poco::JSON::Parser parser;
    Object::Ptr o = parser.parse(r.body).extract<Object::Ptr>();
    message = Str(o, "message");
  } catch (...) {
  }
  if (message.empty()) {
    message = r.body;
    while (!message.empty() && std::isspace(static_cast<unsigned char>(message.back()))) {
      message.pop_back();
    }
  }
  throw EngineError(EngineError::Kind::kHttp, r.status, message,
                    what + ": Docker answered " + std::to_string(r.status) +
                        (message.empty() ? "" : ": " + message));
}

std::string Engine::Ping() const {
  Response r = Call("GET", "/_ping", "", "", /*versioned=*/false);
  if (r.status != 200) Fail(r, "ping");
  auto it = r.headers.find("api-version");
  if (it == r.headers.end() || it->second.empty()) {
    throw EngineError(EngineError::Kind::kProtocol, 0, "",
                      "ping: the server at " + socket_path_ +
                          " sent no Api-Version header; is it a Docker daemon?");
  }
  return it->second;
}

VersionInfo Engine::Version() const {
  Response r = Call("GET", "/version");
  if (r.status != 200) Fail(r, "version");
  Object::Ptr o = ParseObject(r.body, "version");
  return VersionInfo{Str(o, "Version"), Str(o, "ApiVersion"), Str(o, "Os"), Str(o, "Arch")};
}

std::string Engine::CreateContainer(const ContainerSpec& spec) const {
  Object body;
  body.set("Image", spec.image);
  if (!spec.cmd.empty()) body.set("Cmd", StringArray(spec.cmd));
  if (!spec.hostname.empty()) body.set("Hostname", spec.hostname);
  if (!spec.env.empty()) body.set("Env", StringArray(spec.env));
  if (!spec.labels.empty()) body.set("Labels", StringObject(spec.labels));
  if (!spec.stop_signal.empty()) body.set("StopSignal", spec.stop_signal);

  Object::Ptr host_config = new Object();
  if (!spec.ports.empty()) {
    Object::Ptr exposed = new Object();
    Object::Ptr bindings = new Object();
    for (const auto& p : spec.ports) {
      std::string key = std::to_string(p.container_port) + "/" + p.protocol;
      exposed->set(key, Object::Ptr(new Object()));
      Array::Ptr list = bindings->has(key) ? bindings->getArray(key) : Array::Ptr(new Array());
      Object::Ptr b = new Object();
      b->set("HostIp", p.host_ip);
      b->set("HostPort", p.host_port);
      list->add(b);
      bindings->set(key, list);
    }
    body.set("ExposedPorts", exposed);
    host_config->set("PortBindings", bindings);
  }
  if (!spec.tmpfs.empty()) host_config->set("Tmpfs", StringObject(spec.tmpfs));
  if (!spec.binds.empty()) host_config->set("Binds", StringArray(spec.binds));
  if (!spec.cap_add.empty()) host_config->set("CapAdd", StringArray(spec.cap_add));
  if (!spec.security_opt.empty()) host_config->set("SecurityOpt", StringArray(spec.security_opt));
  if (!spec.cgroupns_mode.empty()) host_config->set("CgroupnsMode", spec.cgroupns_mode);
  if (spec.privileged) host_config->set("Privileged", true);
  Object::Ptr restart = new Object();
  restart->set("Name", "no");
  host_config->set("RestartPolicy", restart);
  body.set("HostConfig", host_config);

  std::string path = "/containers/create";
  if (!spec.name.empty()) path += "?name=" + UrlEncode(spec.name);
  Response r = Call("POST", path, Stringify(body));
  if (r.status != 201) {
    Fail(r, "create container " + (spec.name.empty() ? spec.image : spec.name));
  }
  std::string id = Str(ParseObject(r.body, "create container"), "Id");
  if (id.empty()) {
    throw EngineError(EngineError::Kind::kProtocol, 0, "",
                      "create container: the Docker daemon returned no Id");
  }
  return id;
}

void Engine::StartContainer(const std::string& id) const {
  Response r = Call("POST", "/containers/" + UrlEncode(id) + "/start");
  if (r.status != 204 && r.status != 304) Fail(r, "start container " + id);
}

std::optional<ContainerInfo> Engine::InspectContainer(const std::string& id_or_name) const {
  Response r = Call("GET", "/containers/" + UrlEncode(id_or_name) + "/json");
  if (r.status == 404) return std::nullopt;
  if (r.status != 200) Fail(r, "inspect container " + id_or_name);
  Object::Ptr o = ParseObject(r.body, "inspect container");
  ContainerInfo info;
  info.id = Str(o, "Id");
  info.name = StripSlash(Str(o, "Name"));
  info.created = Str(o, "Created");
  Object::Ptr config = Obj(o, "Config");
  info.image = Str(config, "Image");
  info.hostname = Str(config, "Hostname");
  info.labels = StringMap(Obj(config, "Labels"));
  Object::Ptr state = Obj(o, "State");
  info.status = Str(state, "Status");
  info.running = Bool(state, "Running");
  info.exit_code = static_cast<int>(Int(state, "ExitCode"));
  info.error = Str(state, "Error");
  info.port_bindings = ParsePortMap(Obj(Obj(o, "HostConfig"), "PortBindings"));
  Object::Ptr net = Obj(o, "NetworkSettings");
  info.published = ParsePortMap(Obj(net, "Ports"));
  info.pid = static_cast<int>(Int(state, "Pid"));
  info.ip_address = Str(net, "IPAddress");
  if (Object::Ptr networks = Obj(net, "Networks"); info.ip_address.empty() && networks) {
    for (const auto& [name, v] : *networks) {
      info.ip_address = Str(networks->getObject(name), "IPAddress");
      if (!info.ip_address.empty()) break;
    }
  }
  if (Object::Ptr networks = Obj(net, "Networks")) {
    for (const auto& [name, v] : *networks) {
      const std::string address = Str(networks->getObject(name), "IPAddress");
      if (!address.empty()) info.network_addresses[name] = address;
    }
  }
  return info;
}

std::vector<ContainerSummary> Engine::ListContainers(
    const std::vector<std::string>& label_filters) const {
  std::string path = "/containers/json?all=true";
  if (!label_filters.empty()) {
    Object filters;
    filters.set("label", StringArray(label_filters));
    path += "&filters=" + UrlEncode(Stringify(filters));
  }
  Response r = Call("GET", path);
  if (r.status != 200) Fail(r, "list containers");
  Array::Ptr rows = ParseArray(r.body, "list containers");
  std::vector<ContainerSummary> out;
  for (size_t i = 0; i < rows->size(); ++i) {
    Object::Ptr row = rows->getObject(static_cast<unsigned>(i));
    if (!row) continue;
    ContainerSummary s;
    s.id = Str(row, "Id");
    if (row->has("Names") && !row->isNull("Names")) {
      Array::Ptr names = row->getArray("Names");
      for (size_t j = 0; names && j < names->size(); ++j) {
        s.names.push_back(StripSlash(names->getElement<std::string>(static_cast<unsigned>(j))));
      }
    }
    s.image = Str(row, "Image");
    s.state = Str(row, "State");
    s.created = Int(row, "Created");
    s.labels = StringMap(Obj(row, "Labels"));
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<ContainerSummary> Engine::FindContainerByName(
    const std::string& name, const std::vector<std::string>& label_filters) const {
  for (auto& s : ListContainers(label_filters)) {
    if (std::find(s.names.begin(), s.names.end(), StripSlash(name)) != s.names.end()) return s;
  }
  return std::nullopt;
}

void Engine::PutArchive(const std::string& id, const std::string& dir,
                        const std::string& tar) const {
  Response r = Call("PUT", "/containers/" + UrlEncode(id) + "/archive?path=" + UrlEncode(dir), tar,
                    "application/x-tar");
  if (r.status != 200) Fail(r, "copy files into container " + id + " at " + dir);
}

ExecResult Engine::Exec(const std::string& id, const std::vector<std::string>& cmd,
                        const std::vector<std::string>& env) const {
  Object create;
  create.set("AttachStdin", false);
  create.set("AttachStdout", true);
  create.set("AttachStderr", true);
  create.set("Tty", false);
  create.set("Cmd", StringArray(cmd));
  if (!env.empty()) create.set("Env", StringArray(env));
  Response r = Call("POST", "/containers/" + UrlEncode(id) + "/exec", Stringify(create));
  if (r.status != 201) Fail(r, "exec in container " + id);
  std::string exec_id = Str(ParseObject(r.body, "exec create"), "Id");
  if (exec_id.empty()) {
    throw EngineError(EngineError::Kind::kProtocol, 0, "",
                      "exec create: the Docker daemon returned no Id");
  }

  Object start;
  start.set("Detach", false);
  start.set("Tty", false);
  // The daemon answers 200 and then streams frames until the command exits
  // and it closes the connection.
  r = Call("POST", "/exec/" + exec_id + "/start", Stringify(start));
  if (r.status != 200) Fail(r, "start exec in container " + id);
  ExecResult result;
  DemuxStream(r.body, &result.out, &result.err);

  // The stream ends when the process's output closes; the exit code may be
  // recorded a moment later.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    r = Call("GET", "/exec/" + exec_id + "/json");
    if (r.status != 200) Fail(r, "inspect exec in container " + id);
    Object::Ptr o = ParseObject(r.body, "exec inspect");
    if (!Bool(o, "Running")) {
      result.exit_code = static_cast<int>(Int(o, "ExitCode"));
      return result;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw EngineError(
          EngineError::Kind::kProtocol, 0, "",
          "exec in container " + id + ": output ended but the command still runs after 5 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Engine::KillContainer(const std::string& id, const std::string& signal) const {
  Response r = Call("POST", "/containers/" + UrlEncode(id) + "/kill?signal=" + UrlEncode(signal));
  if (r.status != 204) Fail(r, "kill container " + id);
}

bool Engine::RemoveContainer(const std::string& id) const {
  Response r = Call("DELETE", "/containers/" + UrlEncode(id) + "?force=true&v=true");
  if (r.status == 404) return false;
  if (r.status != 204) Fail(r, "remove container " + id);
  return true;
}

bool Engine::ImageExists(const std::string& name) const {
  // Image references hold "/" and ":", which the route accepts as is.
  std::string ref;
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    ref += (std::isalnum(u) || std::strchr("-_.~/:@", c) != nullptr) ? std::string(1, c)
                                                                     : UrlEncode(std::string(1, c));
  }
  Response r = Call("GET", "/images/" + ref + "/json");
  if (r.status == 404) return false;
  if (r.status != 200) Fail(r, "inspect image " + name);
  return true;
}

// Docker Engine API v1.41, Network: NetworkCreate (Name, Driver, Internal, IPAM.Config[].Subnet,
// Labels), NetworkConnect (Container), NetworkDelete, NetworkList (filters.label);
// https://docs.docker.com/engine/api/v1.41/#tag/Network
std::string Engine::CreateNetwork(const std::string& name, const std::string& subnet,
                                  const std::map<std::string, std::string>& labels,
                                  bool internal) const {
  Object body;
  body.set("Name", name);
  body.set("Driver", "bridge");
  body.set("CheckDuplicate", true);
  body.set("Internal", internal);
  Object::Ptr ipam = new Object();
  Array::Ptr config = new Array();
  Object::Ptr one = new Object();
  one->set("Subnet", subnet);
  config->add(one);
  ipam->set("Config", config);
  body.set("IPAM", ipam);
  if (!labels.empty()) body.set("Labels", StringObject(labels));
  Response r = Call("POST", "/networks/create", Stringify(body));
  if (r.status != 201) Fail(r, "create network " + name);
  return Str(ParseObject(r.body, "create network"), "Id");
}

void Engine::ConnectNetwork(const std::string& network, const std::string& container) const {
  Object body;
  body.set("Container", container);
  Response r = Call("POST", "/networks/" + UrlEncode(network) + "/connect", Stringify(body));
  if (r.status != 200) Fail(r, "connect container " + container + " to network " + network);
}

bool Engine::RemoveNetwork(const std::string& network) const {
  Response r = Call("DELETE", "/networks/" + UrlEncode(network));
  if (r.status == 404) return false;
  if (r.status != 204 && r.status != 200) Fail(r, "remove network " + network);
  return true;
}

std::vector<std::string> Engine::ListNetworks(const std::vector<std::string>& label_filters) const {
  std::string path = "/networks";
  if (!label_filters.empty()) {
    Object filters;
    filters.set("label", StringArray(label_filters));
    path += "?filters=" + UrlEncode(Stringify(filters));
  }
  Response r = Call("GET", path);
  if (r.status != 200) Fail(r, "list networks");
  Array::Ptr rows = ParseArray(r.body, "list networks");
  std::vector<std::string> out;
  for (size_t i = 0; i < rows->size(); ++i) {
    if (Object::Ptr row = rows->getObject(static_cast<unsigned>(i))) out.push_back(Str(row, "Name"));
  }
  return out;
}

}  // namespace gpuprov::docker
