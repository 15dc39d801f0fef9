// SPDX-License-Identifier: Apache-2.0
//
// Helpers shared by the driver tests: text and JSON helpers, scoped environment variables and
// temporary directories, the SDK's recording host and loaded driver (gpuprov/testing.hpp) with
// parsed results, polling a VM's state, and the cloud emulator run as a child process (with a
// test-suite base that shares one).
// Header-only; depends on the SDK headers, Poco::Net and GoogleTest, never on core/.
#pragma once

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>
#include <Poco/Timespan.h>
#include <Poco/URI.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpuprov/driver_abi.h"
#include "gpuprov/sdk.hpp"
#include "gpuprov/testing.hpp"

namespace gpuprov::drivers::testing {

// --- text and JSON -------------------------------------------------------------

inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

/// Parses a JSON object (throws when the text is not one).
inline Poco::JSON::Object::Ptr ParseJson(const std::string& text) {
  Poco::JSON::Parser parser;
  return parser.parse(text).extract<Poco::JSON::Object::Ptr>();
}

inline std::string Stringify(const Poco::JSON::Object::Ptr& o) {
  std::ostringstream s;
  o->stringify(s);
  return s.str();
}

// --- clusters (ABI 1.5) ----------------------------------------------------------

/// k3s's peer ports as create's cluster and open_peer_ports carry them.
inline Poco::JSON::Array::Ptr K3sPeerPorts() {
  Poco::JSON::Parser parser;
  return parser
      .parse(R"([{"port":6443,"protocol":"tcp"},{"port":10250,"protocol":"tcp"},)"
             R"({"port":51820,"protocol":"udp"}])")
      .extract<Poco::JSON::Array::Ptr>();
}

/// The create request `create_json` of a node of `cluster` with `role`, k3s's peer ports.
inline std::string WithCluster(const std::string& create_json, const std::string& cluster,
                               const std::string& role) {
  Poco::JSON::Object::Ptr req = ParseJson(create_json);
  Poco::JSON::Object::Ptr c = new Poco::JSON::Object();
  c->set("name", cluster);
  c->set("role", role);
  c->set("peer_ports", K3sPeerPorts());
  req->set("cluster", c);
  return Stringify(req);
}

/// An open_peer_ports request for `cluster` listing the VM objects `vms` (their id, name,
/// private_ip and public_ip), with k3s's peer ports.
inline std::string PeerPortsRequestFor(const std::string& cluster,
                                       const std::vector<Poco::JSON::Object::Ptr>& vms) {
  Poco::JSON::Object::Ptr req = new Poco::JSON::Object();
  req->set("cluster", cluster);
  req->set("peer_ports", K3sPeerPorts());
  Poco::JSON::Array::Ptr peers = new Poco::JSON::Array();
  for (const auto& vm : vms) {
    Poco::JSON::Object::Ptr p = new Poco::JSON::Object();
    for (const char* k : {"id", "name", "private_ip", "public_ip"}) {
      p->set(k, vm->has(k) ? vm->getValue<std::string>(k) : std::string());
    }
    peers->add(p);
  }
  req->set("peers", peers);
  return Stringify(req);
}

// --- process state ---------------------------------------------------------------

/// Sets (or, with nullptr, unsets) an environment variable for a scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

/// A fresh directory under the system temp dir, removed with everything in it at the end.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& prefix = "gpuprov-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + tmpl);
    path_ = tmpl;
  }
  ~ScopedTempDir() { Remove(); }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// Removes the directory now (the destructor then has nothing to do).
  void Remove() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

 private:
  std::filesystem::path path_;
};

// --- the host side of the C ABI and a built driver through its C vtable ---------
// The recording host and the loaded driver are the SDK's (gpuprov/testing.hpp, installed for
// third-party drivers); what follows adds GoogleTest failures and Poco JSON to them.

using sdk::testing::RecordingHost;

/// The descriptor of the driver .so at `path` (sdk::testing::LoadDriverDescriptor), or nullptr
/// with a test failure when it cannot be loaded.
inline const gpuprov_type_driver_descriptor* LoadDriverDescriptor(const std::string& path) {
  try {
    return sdk::testing::LoadDriverDescriptor(path);
  } catch (const std::runtime_error& e) {
    ADD_FAILURE() << e.what();
    return nullptr;
  }
}

/// What one vtable operation returned, with its JSON parsed on request.
struct OpResult : sdk::testing::CallResult {
  Poco::JSON::Object::Ptr Doc() const { return ParseJson(json); }
  Poco::JSON::Object::Ptr Vm() const { return Doc()->getObject("vm"); }
};

/// One driver handle made by init() with a recording host (sdk::testing::BasicLoadedDriver).
using LoadedDriver = sdk::testing::BasicLoadedDriver<OpResult>;

/// Calls get with `get_request` every `every` until `done(vm)` holds or `timeout` passes;
/// returns the last vm, or nullptr (a test failure) when a get fails.
template <typename Done>
Poco::JSON::Object::Ptr PollVm(LoadedDriver& driver, const std::string& get_request, Done done,
                               std::chrono::milliseconds timeout,
                               std::chrono::milliseconds every = std::chrono::milliseconds(100)) {
  Poco::JSON::Object::Ptr vm;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    OpResult r = driver.Get(get_request);
    EXPECT_EQ(r.status, GPUPROV_STATUS_OK) << r;
    if (r.status != GPUPROV_STATUS_OK) return nullptr;
    vm = r.Vm();
    if (done(vm)) return vm;
    std::this_thread::sleep_for(every);
  }
  return vm;
}

/// Polls get {"id": id} until the VM is running with a public IP; returns it, or nullptr (a
/// test failure naming `what` and the id) when that does not happen within `timeout`.
inline Poco::JSON::Object::Ptr WaitRunning(LoadedDriver& driver, const std::string& id,
                                           std::chrono::milliseconds timeout,
                                           const std::string& what) {
  auto running = [](const Poco::JSON::Object::Ptr& vm) {
    return vm->getValue<std::string>("state") == "running" &&
           !vm->getValue<std::string>("public_ip").empty();
  };
  Poco::JSON::Object::Ptr vm = PollVm(driver, R"({"id":")" + id + R"("})", running, timeout);
  if (vm && running(vm)) return vm;
  if (vm) ADD_FAILURE() << what << " " << id << " did not become running";
  return nullptr;
}

/// Expects get (`get_request`) to report the VM "preempted" with the cloud's `reason`, and list
/// to hold it alone, the same (docs/driver-protocol.md, "Spot VMs").
inline void ExpectPreempted(LoadedDriver& driver, const std::string& get_request,
                            const std::string& reason) {
  OpResult got = driver.Get(get_request);
  ASSERT_EQ(got.status, GPUPROV_STATUS_OK) << got;
  EXPECT_EQ(got.Vm()->getValue<std::string>("state"), "preempted") << got.json;
  EXPECT_EQ(got.Vm()->getValue<std::string>("message"), reason);
  OpResult list = driver.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list;
  Poco::JSON::Array::Ptr vms = list.Doc()->getArray("vms");
  ASSERT_EQ(vms->size(), 1u) << list.json;
  EXPECT_EQ(vms->getObject(0)->getValue<std::string>("state"), "preempted");
  EXPECT_EQ(vms->getObject(0)->getValue<std::string>("message"), reason);
}

/// LoadedDriver of the driver .so at `kPath`, a constant with static storage such as
/// `constexpr char kDriverPath[] = GPUPROV_<CLOUD>_DRIVER_PATH;` (compiled in by
/// gpuprov_add_driver_test): `using Driver = DriverAt<kDriverPath>;`.
template <const char* kPath>
class DriverAt : public LoadedDriver {
 public:
  explicit DriverAt(const std::string& config) : LoadedDriver(kPath, config) {}
  static const gpuprov_type_driver_descriptor* Descriptor() { return LoadDriverDescriptor(kPath); }
};

/// Expects every operation of `v` to be set (check, offers, create, get, list, delete_vm),
/// and open_ports set exactly when `open_ports` (drivers with GPUPROV_CAP_OPEN_PORTS).
inline void ExpectEveryOperation(const gpuprov_drv_vtable& v, bool open_ports = true) {
  EXPECT_NE(v.check, nullptr);
  EXPECT_NE(v.offers, nullptr);
  EXPECT_NE(v.create, nullptr);
  EXPECT_NE(v.get, nullptr);
  EXPECT_NE(v.list, nullptr);
  EXPECT_NE(v.delete_vm, nullptr);
  EXPECT_EQ(v.open_ports != nullptr, open_ports);
}

// --- the cloud emulator as a child process ---------------------------------------

/// The answer to one HTTP request.
struct HttpReply {
  int status = 0;
  std::string body;
  Poco::JSON::Object::Ptr Doc() const {
    Poco::JSON::Parser parser;
    return parser.parse(body).extract<Poco::JSON::Object::Ptr>();
  }
};

/// One operation of a vendor's published API (transcribed, with its citation, by the test that
/// lists it): an HTTP method and path template (`{name}` is one path segment), or "POST" and a
/// gRPC method path; the query parameters the source documents for it and, when it lists them,
/// the HTTP statuses it may answer (empty: a `default` response covers any).
struct VendorOperation {
  std::string method;
  std::string path;
  std::vector<std::string> query{};
  std::vector<int> statuses{};
};

/// The operation of `ops` that METHOD `path` (without its query string; a trailing '/'
/// ignored) is, or nullptr.
inline const VendorOperation* FindVendorOperation(const std::string& method,
                                                  const std::string& path,
                                                  const std::vector<VendorOperation>& ops) {
  auto segments = [](std::string p) {
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t i = 0; i <= p.size(); ++i) {
      if (i == p.size() || p[i] == '/') {
        out.push_back(p.substr(start, i - start));
        start = i + 1;
      }
    }
    return out;
  };
  const std::vector<std::string> got = segments(path);
  for (const VendorOperation& op : ops) {
    const std::vector<std::string> want = segments(op.path);
    if (method != op.method || want.size() != got.size()) continue;
    bool same = true;
    for (size_t i = 0; same && i < want.size(); ++i) {
      const bool var = want[i].size() > 2 && want[i].front() == '{' && want[i].back() == '}';
      same = var ? !got[i].empty() : want[i] == got[i];
    }
    if (same) return &op;
  }
  return nullptr;
}

/// The requests of an emulator's log ("METHOD path -> status", EmulatorProcess::Requests) that
/// are none of `ops` (query strings ignored): what a driver called that the vendor's source
/// does not describe.
inline std::vector<std::string> OutsideOperations(const std::vector<std::string>& logged,
                                                  const std::vector<VendorOperation>& ops) {
  std::vector<std::string> outside;
  for (const std::string& line : logged) {
    const size_t space = line.find(' ');
    const std::string method = line.substr(0, space);
    const std::string target = line.substr(space + 1, line.find(" -> ") - space - 1);
    if (FindVendorOperation(method, target.substr(0, target.find('?')), ops) == nullptr) {
      outside.push_back(line);
    }
  }
  return outside;
}

/// One HTTP request to a loopback URL (anything else throws).
inline HttpReply LoopbackHttp(const std::string& method, const std::string& url,
                              const std::string& body = "",
                              const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  Poco::URI uri(url);
  if (uri.getHost().rfind("127.", 0) != 0) throw std::runtime_error("not loopback: " + url);
  Poco::Net::HTTPClientSession session(uri.getHost(), uri.getPort());
  session.setTimeout(Poco::Timespan(10, 0));
  Poco::Net::HTTPRequest req(method, uri.getPathAndQuery(), Poco::Net::HTTPMessage::HTTP_1_1);
  for (const auto& [name, value] : headers) req.set(name, value);
  if (!body.empty() || method == "POST") {
    req.setContentType("application/json");
    req.setContentLength(static_cast<std::streamsize>(body.size()));
  }
  session.sendRequest(req) << body;
  Poco::Net::HTTPResponse resp;
  HttpReply r;
  Poco::StreamCopier::copyToString(session.receiveResponse(resp), r.body);
  r.status = static_cast<int>(resp.getStatus());
  return r;
}

/// `gpuprov-emulator` run as a child process. Start() waits for the "<cloud> <url>" lines
/// it prints on stdout (the wanted clouds and "control"), then keeps draining its stdout.
/// Its stderr goes to /dev/null unless GPUPROV_TEST_EMULATOR_STDERR is set. Stopped
/// (SIGTERM, then SIGKILL) by Stop() or the destructor.
class EmulatorProcess {
 public:
  EmulatorProcess() = default;
  ~EmulatorProcess() { Stop(); }
  EmulatorProcess(const EmulatorProcess&) = delete;
  EmulatorProcess& operator=(const EmulatorProcess&) = delete;

  /// Why the emulator at `path` cannot run, or nullopt.
  static std::optional<std::string> Problem(const std::string& path) {
    if (access(path.c_str(), X_OK) != 0) {
      return path + " is not built (build target gpuprov-emulator, tests/emulators)";
    }
    return std::nullopt;
  }

  /// Starts `path args...` with `env` added to the child's environment; false (with the
  /// reason in *problem) when it cannot start or prints no URL for a wanted cloud.
  bool Start(const std::string& path, const std::vector<std::string>& args,
             const std::vector<std::pair<std::string, std::string>>& env,
             const std::vector<std::string>& clouds, std::string* problem) {
    if (auto p = Problem(path)) {
      *problem = *p;
      return false;
    }
    std::vector<std::string> argv_strings = {path};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_strings) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) {
      *problem = "pipe failed";
      return false;
    }
    pid_ = fork();
    if (pid_ < 0) {
      close(fds[0]);
      close(fds[1]);
      *problem = "fork failed";
      return false;
    }
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      int devnull = open("/dev/null", O_WRONLY);
      if (devnull >= 0 && !getenv("GPUPROV_TEST_EMULATOR_STDERR")) dup2(devnull, STDERR_FILENO);
      close(fds[0]);
      close(fds[1]);
      for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
      execv(path.c_str(), argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_fd_ = fds[0];
    std::vector<std::string> wanted = clouds;
    wanted.push_back("control");
    auto missing = [&] {
      for (const auto& c : wanted) {
        if (!urls_.count(c)) return true;
      }
      return false;
    };
    std::string buffer;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (missing() && std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_fd_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char chunk[4096];
      ssize_t n = read(out_fd_, chunk, sizeof chunk);
      if (n <= 0) break;
      buffer.append(chunk, static_cast<size_t>(n));
      size_t nl;
      while ((nl = buffer.find('\n')) != std::string::npos) {
        std::istringstream words(buffer.substr(0, nl));
        buffer.erase(0, nl + 1);
        std::string cloud, url;
        words >> cloud >> url;
        if (!cloud.empty() && !url.empty()) urls_[cloud] = url;
      }
    }
    if (missing()) {
      *problem = "the emulator printed no";
      for (const auto& c : wanted) *problem += " '" + c + " <url>'";
      *problem += " line(s)";
      Stop();
      return false;
    }
    // Keep draining stdout so the emulator never blocks on a full pipe.
    drain_ = std::thread([fd = out_fd_] {
      char chunk[4096];
      while (read(fd, chunk, sizeof chunk) > 0) {
      }
    });
    return true;
  }

  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      bool gone = false;
      for (int i = 0; i < 100 && !gone; ++i) {
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
          gone = true;
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
      if (!gone) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
      }
      pid_ = -1;
    }
    if (drain_.joinable()) drain_.join();  // read() returns 0 once the child is gone
    if (out_fd_ >= 0) close(out_fd_);
    out_fd_ = -1;
  }

  /// The URL the emulator printed for `cloud` ("" when none).
  std::string Url(const std::string& cloud) const {
    auto it = urls_.find(cloud);
    return it == urls_.end() ? std::string() : it->second;
  }
  std::string control_url() const { return Url("control"); }

  /// One request to the control API (`path` starts with '/').
  HttpReply Control(const std::string& method, const std::string& path,
                    const std::string& body = "") const {
    return LoopbackHttp(method, control_url() + path, body);
  }

  /// Forgets every resource, fault and logged request of `cloud`.
  void Reset(const std::string& cloud) const {
    HttpReply r = Control("POST", "/reset", R"({"cloud":")" + cloud + R"("})");
    EXPECT_EQ(r.status, 200) << "POST /reset: " << r.body;
  }
  /// Arms a fault: `json` is the body of POST /faults ({"cloud": ..., "fault": ..., ...}).
  void Fault(const std::string& json) const {
    HttpReply r = Control("POST", "/faults", json);
    EXPECT_EQ(r.status, 200) << "POST /faults " << json << ": " << r.body;
  }
  /// One member of GET /counts?cloud=<cloud> ("instances", "firewalls", "ssh_keys",
  /// "backend_instances").
  long long Count(const std::string& cloud, const std::string& what) const {
    HttpReply r = Control("GET", "/counts?cloud=" + cloud);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Doc()->getValue<long long>(what);
  }
  /// "METHOD path -> status" of every request `cloud` logged, oldest first.
  std::vector<std::string> Requests(const std::string& cloud) const {
    HttpReply r = Control("GET", "/requests?cloud=" + cloud);
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<std::string> out;
    Poco::JSON::Array::Ptr list = r.Doc()->getArray("requests");
    for (size_t i = 0; list && i < list->size(); ++i) {
      Poco::JSON::Object::Ptr o = list->getObject(static_cast<unsigned>(i));
      out.push_back(o->getValue<std::string>("method") + " " + o->getValue<std::string>("path") +
                    " -> " + std::to_string(o->getValue<int>("status")));
    }
    return out;
  }
  void ClearRequests(const std::string& cloud) const {
    Control("DELETE", "/requests?cloud=" + cloud);
  }
  /// The TCP ports this machine can reach on `cloud`'s instance called name under the
  /// cloud's firewall rules now ("22,443,6443", "1-65535"; "" when none or no such instance).
  std::string ReachablePorts(const std::string& cloud, const std::string& name) const {
    HttpReply r = Control("GET", "/instances?cloud=" + cloud);
    EXPECT_EQ(r.status, 200) << r.body;
    Poco::JSON::Array::Ptr list = r.Doc()->getArray("instances");
    for (size_t i = 0; list && i < list->size(); ++i) {
      Poco::JSON::Object::Ptr o = list->getObject(static_cast<unsigned>(i));
      if (o->getValue<std::string>("name") == name) {
        return o->getValue<std::string>("reachable_ports");
      }
    }
    return "";
  }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::thread drain_;
  std::map<std::string, std::string> urls_;
};

/// "" when `logged` ("METHOD /path?query -> status", as EmulatorProcess::Requests gives it) is
/// one of `operations` with only documented query parameters; otherwise what is wrong.
inline std::string CheckAgainstOperations(const std::string& logged,
                                          const std::vector<VendorOperation>& operations) {
  std::istringstream in(logged);
  std::string method, target;
  in >> method >> target;
  const size_t q = target.find('?');
  const std::string path = target.substr(0, q);
  std::vector<std::string> params;
  if (q != std::string::npos) {
    std::istringstream query(target.substr(q + 1));
    for (std::string kv; std::getline(query, kv, '&');) params.push_back(kv.substr(0, kv.find('=')));
  }
  const VendorOperation* op = FindVendorOperation(method, path, operations);
  if (op == nullptr) return logged + ": not an operation of the vendor's source";
  for (const std::string& p : params) {
    if (std::find(op->query.begin(), op->query.end(), p) == op->query.end()) {
      return logged + ": query parameter \"" + p + "\" is not documented for " + op->method +
             " " + op->path;
    }
  }
  const size_t arrow = logged.rfind("-> ");
  if (!op->statuses.empty() && arrow != std::string::npos) {
    const int status = std::atoi(logged.c_str() + arrow + 3);
    if (std::find(op->statuses.begin(), op->statuses.end(), status) == op->statuses.end()) {
      return logged + ": status " + std::to_string(status) + " is not documented for " +
             op->method + " " + op->path;
    }
  }
  return "";
}

/// Calls every operation of a cloud driver once, as a provision, open_ports (widened, then
/// narrowed to a source), gc and down would: check, offers, create (`create_request`, whose VM
/// is called `name`), get, list, open_ports twice, list_resources, delete. For a test that
/// then checks what the driver sent (CheckAgainstOperations).
inline void CallEveryOperation(LoadedDriver& driver, const std::string& offers_request,
                               const std::string& create_request, const std::string& name) {
  ASSERT_EQ(driver.Check().status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Offers(offers_request).status, GPUPROV_STATUS_OK);
  OpResult created = driver.Create(create_request);
  ASSERT_EQ(created.status, GPUPROV_STATUS_OK) << created;
  const std::string id = created.Vm()->getValue<std::string>("id");
  ASSERT_EQ(driver.Get(R"({"id":")" + id + R"("})").status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.List().status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.OpenPorts(R"({"id":")" + id + R"(","ports":[8080]})").status,
            GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.OpenPorts(R"({"id":")" + id +
                             R"(","ports":[6443],"allow_from":["192.0.2.0/24"]})")
                .status,
            GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Call(driver.vtable().list_resources, "{}").status, GPUPROV_STATUS_OK);
  ASSERT_EQ(driver.Delete(R"({"id":")" + id + R"(","name":")" + name + R"("})").status,
            GPUPROV_STATUS_OK);
}

/// Each of `requests` (EmulatorProcess::Requests) is one of `operations` (CheckAgainstOperations).
inline void ExpectOnlyOperations(const std::vector<std::string>& requests,
                                 const std::vector<VendorOperation>& operations) {
  EXPECT_GT(requests.size(), 10u);
  for (const std::string& r : requests) EXPECT_EQ(CheckAgainstOperations(r, operations), "");
}

#ifdef GPUPROV_EMULATOR_PATH
/// The built emulator serving one cloud from its memory backend, for SharedEmulatorTest: a
/// test's emulator class derives from it and starts it with that cloud's arguments and the
/// credentials the emulator accepts.
class OneCloudEmulator : public EmulatorProcess {
 public:
  explicit OneCloudEmulator(std::string cloud) : cloud_(std::move(cloud)) {}
  static std::optional<std::string> Problem() {
    return EmulatorProcess::Problem(GPUPROV_EMULATOR_PATH);
  }
  /// `gpuprov-emulator --backend memory --clouds <cloud> <args...>` with `env` added.
  bool StartMemory(const std::vector<std::string>& args,
                   const std::vector<std::pair<std::string, std::string>>& env,
                   std::string* problem) {
    std::vector<std::string> all = {"--backend", "memory", "--clouds", cloud_};
    all.insert(all.end(), args.begin(), args.end());
    return EmulatorProcess::Start(GPUPROV_EMULATOR_PATH, all, env, {cloud_}, problem);
  }
  std::string url() const { return Url(cloud_); }
  void Reset() const { EmulatorProcess::Reset(cloud_); }
  long long Count(const std::string& what) const { return EmulatorProcess::Count(cloud_, what); }
  std::vector<std::string> Requests() const { return EmulatorProcess::Requests(cloud_); }
  /// The ports of VM \a name that this machine can reach now ("22,80,443").
  std::string Reachable(const std::string& name) const { return ReachablePorts(cloud_, name); }

 private:
  std::string cloud_;
};
#endif

/// Base of a test suite whose tests share one emulator. `E` has a default constructor,
/// `bool Start(std::string* problem)` and `static std::optional<std::string> Problem()` (why
/// the emulator binary cannot run, as EmulatorProcess::Problem). The suite starts it once.
/// Every test is skipped, with the reason, when the emulator is not built, and fails when it
/// is built but did not start. A SetUp() override calls this one first and returns when
/// IsSkipped() or HasFatalFailure().
template <typename E>
class SharedEmulatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    problem_.clear();
    if (auto p = E::Problem()) {
      problem_ = *p;
      return;
    }
    emulator_ = new E();
    if (!emulator_->Start(&problem_)) {
      delete emulator_;
      emulator_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete emulator_;
    emulator_ = nullptr;
  }
  void SetUp() override {
    if (emulator_ != nullptr) return;
    if (E::Problem()) GTEST_SKIP() << problem_;
    FAIL() << "the emulator did not start: " << problem_;
  }

  static inline E* emulator_ = nullptr;
  static inline std::string problem_;
};

}  // namespace gpuprov::drivers::testing
