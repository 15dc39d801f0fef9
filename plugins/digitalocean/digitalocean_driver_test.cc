// SPDX-License-Identifier: Apache-2.0
//
// Loads the BUILT driver .so with dlopen, as the host does, and drives it through the C
// vtable against the DigitalOcean emulator (tests/emulators, `gpuprov-emulator --backend
// memory`) started as a child process. Talks only to 127.0.0.1.
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>
#include <Poco/URI.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpuprov/driver_abi.h"

extern char** environ;

namespace gpuprov::digitalocean {
namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr const char* kToken = "dop_v1_gpuprov_emulator_test_token";
constexpr const char* kKeyA =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF test@gpuprov";
constexpr const char* kKeyB =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGLNOSpIazn8gOTMOnUEqrXgF/uRfTEfARnXqkdhuaOj other@gpuprov";

Object::Ptr ParseJson(const std::string& text) {
  Poco::JSON::Parser parser;
  return parser.parse(text).extract<Object::Ptr>();
}

std::string Stringify(const Object::Ptr& o) {
  std::ostringstream s;
  o->stringify(s);
  return s.str();
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// --- the driver, loaded once ------------------------------------------------

const gpuprov_type_driver_descriptor* Descriptor() {
  static const gpuprov_type_driver_descriptor* d = [] {
    void* lib = dlopen(GPUPROV_DIGITALOCEAN_DRIVER_PATH, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      ADD_FAILURE() << "dlopen " << GPUPROV_DIGITALOCEAN_DRIVER_PATH << ": " << dlerror();
      return static_cast<const gpuprov_type_driver_descriptor*>(nullptr);
    }
    auto entry = reinterpret_cast<gpuprov_driver_entry_fn>(dlsym(lib, GPUPROV_DRIVER_ENTRY_SYMBOL));
    if (entry == nullptr) {
      ADD_FAILURE() << "no " << GPUPROV_DRIVER_ENTRY_SYMBOL;
      return static_cast<const gpuprov_type_driver_descriptor*>(nullptr);
    }
    return entry();
  }();
  return d;
}

struct FakeHost {
  std::vector<std::string> logs;
  gpuprov_type_host_api api{};
  FakeHost() {
    api.struct_size = sizeof(api);
    api.host_ctx = this;
    api.log = [](void* ctx, gpuprov_type_log_level level, const char* msg, size_t len) {
      static_cast<FakeHost*>(ctx)->logs.push_back(std::to_string(level) + " " +
                                                  std::string(msg, len));
    };
    api.progress = [](void* ctx, const char* msg, size_t len) {
      static_cast<FakeHost*>(ctx)->logs.push_back("P " + std::string(msg, len));
    };
    api.cancelled = [](void*) { return false; };
  }
  std::string All() const {
    std::string s;
    for (const auto& l : logs) s += l + "\n";
    return s;
  }
};

struct OpResult {
  gpuprov_type_status status = GPUPROV_STATUS_FAILED;
  std::string json;
  std::string error;
  Object::Ptr Doc() const { return ParseJson(json); }
  Object::Ptr Vm() const { return Doc()->getObject("vm"); }
};

std::ostream& operator<<(std::ostream& os, const OpResult& r) {
  return os << "status " << r.status << " " << (r.status == 0 ? r.json : r.error);
}

class Driver {
 public:
  explicit Driver(const std::string& config) {
    const gpuprov_type_driver_descriptor* d = Descriptor();
    if (d == nullptr) throw std::runtime_error("driver not loaded");
    vtable_ = d->vtable;
    gpuprov_type_init_input input{};
    input.struct_size = sizeof(input);
    input.host = &host_.api;
    input.config_host_owned = {config.data(), config.size()};
    handle_ = vtable_->init(&input, &init_status_);
    if (handle_ == nullptr) throw std::runtime_error("init returned NULL");
    if (init_status_ != GPUPROV_STATUS_OK) init_error_ = vtable_->last_error(handle_);
  }
  ~Driver() { vtable_->destroy(handle_); }
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  gpuprov_type_status init_status() const { return init_status_; }
  const std::string& init_error() const { return init_error_; }

  OpResult Call(gpuprov_drv_op_fn fn, const std::string& request) {
    gpuprov_type_json result{};
    OpResult r;
    r.status = fn(handle_, gpuprov_type_json{request.data(), request.size()}, &result);
    if (r.status == GPUPROV_STATUS_OK) {
      r.json.assign(result.data, result.len);
    } else {
      r.error = vtable_->last_error(handle_);
    }
    return r;
  }
  OpResult Check() { return Call(vtable_->check, "{}"); }
  OpResult Offers(const std::string& req) { return Call(vtable_->offers, req); }
  OpResult Create(const std::string& req) { return Call(vtable_->create, req); }
  OpResult Get(const std::string& req) { return Call(vtable_->get, req); }
  OpResult List() { return Call(vtable_->list, "{}"); }
  OpResult Delete(const std::string& req) { return Call(vtable_->delete_vm, req); }
  OpResult OpenPorts(const std::string& req) { return Call(vtable_->open_ports, req); }
  const FakeHost& host() const { return host_; }

 private:
  FakeHost host_;
  const gpuprov_drv_vtable* vtable_ = nullptr;
  gpuprov_type_driver* handle_ = nullptr;
  gpuprov_type_status init_status_ = GPUPROV_STATUS_FAILED;
  std::string init_error_;
};

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

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// --- no emulator needed -----------------------------------------------------

TEST(DigitalOceanDescriptor, IdentityAndCapabilities) {
  const gpuprov_type_driver_descriptor* d = Descriptor();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->magic, GPUPROV_DRIVER_MAGIC);
  EXPECT_STREQ(d->name, "digitalocean");
  EXPECT_EQ(d->capabilities, static_cast<uint64_t>(GPUPROV_CAP_VM_LIFECYCLE |
                                                   GPUPROV_CAP_BOOT_CLOUD_INIT |
                                                   GPUPROV_CAP_OPEN_PORTS |
                                                   GPUPROV_CAP_HOSTS_KUBERNETES));
  for (auto fn : {d->vtable->check, d->vtable->offers, d->vtable->create, d->vtable->get,
                  d->vtable->list, d->vtable->delete_vm, d->vtable->open_ports}) {
    EXPECT_NE(fn, nullptr);
  }
}

TEST(DigitalOceanDescriptor, RefusesPlainHttpToANonLoopbackEndpoint) {
  Driver driver(R"({"endpoint":"http://api.digitalocean.com/v2","config":{}})");
  EXPECT_EQ(driver.init_status(), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_TRUE(Contains(driver.init_error(), "loopback")) << driver.init_error();
}

TEST(DigitalOceanDescriptor, DefaultsToTheRealHttpsEndpoint) {
  ScopedEnv no_token("DIGITALOCEAN_TOKEN", nullptr);
  ScopedEnv no_token2("DIGITALOCEAN_ACCESS_TOKEN", nullptr);
  ScopedEnv no_token3("DO_API_TOKEN", nullptr);
  ScopedEnv no_doctl("XDG_CONFIG_HOME", "/nonexistent-gpuprov-test");
  Driver driver(R"({"endpoint":"","config":{}})");
  ASSERT_EQ(driver.init_status(), GPUPROV_STATUS_OK) << driver.init_error();
  // No token anywhere: AUTH before any network call, naming the variables.
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "DIGITALOCEAN_TOKEN")) << r.error;
}

TEST(DigitalOceanDescriptor, OffersWithoutTheNetworkSayWhenAGpuIsNotOffered) {
  ScopedEnv token("DIGITALOCEAN_TOKEN", kToken);
  // The sizes list is unreachable here (closed loopback port): the built-in table answers.
  Driver driver(R"({"endpoint":"http://127.0.0.1:9/v2","config":{"retry":{"max_attempts":1}}})");
  OpResult l4 = driver.Offers(R"({"gpu":{"type":"L4","count":1},"region":""})");
  ASSERT_EQ(l4.status, GPUPROV_STATUS_OK) << l4;
  EXPECT_EQ(l4.Doc()->getArray("offers")->size(), 0u);
  EXPECT_TRUE(Contains(driver.host().All(), "does not offer L4")) << driver.host().All();
  OpResult h100 = driver.Offers(R"({"gpu":{"type":"H100","count":8},"region":"tor1"})");
  ASSERT_EQ(h100.status, GPUPROV_STATUS_OK) << h100;
  Array::Ptr offers = h100.Doc()->getArray("offers");
  ASSERT_EQ(offers->size(), 1u) << h100.json;
  EXPECT_EQ(offers->getObject(0)->getValue<std::string>("instance_type"), "gpu-h100x8-640gb");
  EXPECT_GT(offers->getObject(0)->getValue<double>("price_per_hour"), 0.0);
}

// --- the emulator -----------------------------------------------------------

// The emulator as a child process; reads "<cloud> <url>" lines from its stdout.
class Emulator {
 public:
  static std::string Path() { return GPUPROV_EMULATOR_PATH; }

  bool Start(std::string* problem) {
    if (!std::filesystem::exists(Path())) {
      *problem = Path() + " is not built (tests/emulators)";
      return false;
    }
    int fds[2];
    if (pipe(fds) != 0) {
      *problem = "pipe failed";
      return false;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    std::string path = Path();
    // Fast boots; the real rate limits (250/min) are not enforced so the whole suite can run
    // within a minute (throttling is tested with the throttle fault).
    std::vector<std::string> args = {path,     "--backend",      "memory",          "--clouds",
                                     "digitalocean", "--boot-seconds", "1", "--no-rate-limits"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // The emulator accepts the token found in DIGITALOCEAN_TOKEN at start.
    setenv("DIGITALOCEAN_TOKEN", kToken, 1);
    int rc = posix_spawn(&pid_, path.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (rc != 0) {
      close(fds[0]);
      *problem = "cannot start " + path;
      pid_ = -1;
      return false;
    }
    out_fd_ = fds[0];
    const auto deadline = steady_clock::now() + std::chrono::seconds(20);
    std::string buffer;
    while (steady_clock::now() < deadline && (do_url_.empty() || control_url_.empty())) {
      pollfd p{out_fd_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char chunk[4096];
      ssize_t n = read(out_fd_, chunk, sizeof chunk);
      if (n <= 0) break;
      buffer.append(chunk, static_cast<size_t>(n));
      size_t nl;
      while ((nl = buffer.find('\n')) != std::string::npos) {
        std::string line = buffer.substr(0, nl);
        buffer.erase(0, nl + 1);
        std::istringstream words(line);
        std::string cloud, url;
        words >> cloud >> url;
        if (cloud == "digitalocean") do_url_ = url;
        if (cloud == "control") control_url_ = url;
      }
    }
    if (do_url_.empty() || control_url_.empty()) {
      *problem = "the emulator printed no 'digitalocean <url>' and 'control <url>' lines";
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
      for (int i = 0; i < 50 && waitpid(pid_, &status, WNOHANG) == 0; ++i) {
        std::this_thread::sleep_for(milliseconds(100));
      }
      if (waitpid(pid_, &status, WNOHANG) == 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
      }
      pid_ = -1;
    }
    if (drain_.joinable()) drain_.join();
    if (out_fd_ >= 0) close(out_fd_);
    out_fd_ = -1;
  }

  ~Emulator() { Stop(); }

  const std::string& do_url() const { return do_url_; }

  // One call to the control API (or to the DigitalOcean API with the token).
  std::pair<int, std::string> Http(const std::string& method, const std::string& url,
                                   const std::string& body = "", bool with_token = false) {
    Poco::URI uri(url);
    Poco::Net::HTTPClientSession session(uri.getHost(), uri.getPort());
    session.setTimeout(Poco::Timespan(10, 0));
    Poco::Net::HTTPRequest req(method, uri.getPathAndQuery(), Poco::Net::HTTPMessage::HTTP_1_1);
    if (with_token) req.set("Authorization", std::string("Bearer ") + kToken);
    if (!body.empty() || method == "POST") {
      req.setContentType("application/json");
      req.setContentLength(static_cast<std::streamsize>(body.size()));
    }
    session.sendRequest(req) << body;
    Poco::Net::HTTPResponse resp;
    std::string text;
    Poco::StreamCopier::copyToString(session.receiveResponse(resp), text);
    return {static_cast<int>(resp.getStatus()), text};
  }
  void Reset() { Http("POST", control_url_ + "/reset"); }
  void Fault(const std::string& fault, int times, const std::string& extra = "") {
    auto [status, body] = Http("POST", control_url_ + "/faults",
                               R"({"cloud":"digitalocean","fault":")" + fault +
                                   R"(","times":)" + std::to_string(times) + extra + "}");
    EXPECT_LT(status, 300) << "POST /faults " << fault << ": " << body;
  }
  Object::Ptr Counts() {
    auto [status, body] = Http("GET", control_url_ + "/counts?cloud=digitalocean");
    EXPECT_EQ(status, 200) << body;
    Object::Ptr o = ParseJson(body);
    // Either the counts themselves or {"digitalocean": {...}}.
    if (o->has("digitalocean")) return o->getObject("digitalocean");
    return o;
  }
  int Count(const std::string& what) { return Counts()->getValue<int>(what); }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::thread drain_;
  std::string do_url_, control_url_;
};

class DigitalOceanEmulatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    emulator_ = new Emulator();
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
    if (emulator_ == nullptr) GTEST_SKIP() << problem_;
    emulator_->Reset();
    token_ = std::make_unique<ScopedEnv>("DIGITALOCEAN_TOKEN", kToken);
  }
  void TearDown() override { token_.reset(); }

  // Settings with compressed retries, for the emulator's endpoint.
  static std::string Config(const std::string& extra_config = "") {
    return R"({"endpoint":")" + emulator_->do_url() +
           R"(","config":{"retry":{"max_attempts":5,"base_delay_ms":5,"max_delay_ms":50,)"
           R"("max_retry_after_ms":100,"total_budget_ms":20000,"attempt_timeout_ms":10000})" +
           extra_config + "}}";
  }

  static std::string CreateRequest(const std::string& name, const std::string& key = kKeyA,
                                   const std::string& user_data = "#!/bin/bash\necho hi\n") {
    Object::Ptr req = new Object();
    req->set("name", name);
    req->set("region", "");
    req->set("instance_type", "");
    Object::Ptr gpu = new Object();
    gpu->set("type", "H100");
    gpu->set("count", 1);
    req->set("gpu", gpu);
    req->set("image", "");
    req->set("ssh_public_key", key);
    req->set("user_data", user_data);
    Object::Ptr tags = new Object();
    tags->set("gpuprov", "1");
    tags->set("gpuprov-name", name);
    tags->set("team", "ml");
    req->set("tags", tags);
    Array::Ptr ports = new Array();
    for (int p : {22, 6443, 80, 443}) ports->add(p);
    req->set("open_ports", ports);
    return Stringify(req);
  }

  static Object::Ptr WaitRunning(Driver& driver, const std::string& id) {
    const auto deadline = steady_clock::now() + std::chrono::seconds(60);
    while (steady_clock::now() < deadline) {
      OpResult r = driver.Get(R"({"id":")" + id + R"("})");
      EXPECT_EQ(r.status, GPUPROV_STATUS_OK) << r;
      if (r.status != GPUPROV_STATUS_OK) return nullptr;
      Object::Ptr vm = r.Vm();
      if (vm->getValue<std::string>("state") == "running" &&
          !vm->getValue<std::string>("public_ip").empty()) {
        return vm;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    ADD_FAILURE() << "droplet " << id << " did not become running";
    return nullptr;
  }

  static Emulator* emulator_;
  static std::string problem_;
  std::unique_ptr<ScopedEnv> token_;
};

Emulator* DigitalOceanEmulatorTest::emulator_ = nullptr;
std::string DigitalOceanEmulatorTest::problem_;

TEST_F(DigitalOceanEmulatorTest, CheckReadsTheAccount) {
  Driver driver(Config());
  OpResult r = driver.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_FALSE(r.Doc()->getValue<std::string>("account").empty());
  EXPECT_EQ(r.Doc()->getValue<std::string>("token_from"), "$DIGITALOCEAN_TOKEN");
  EXPECT_FALSE(Contains(r.json, kToken));
  EXPECT_FALSE(Contains(driver.host().All(), kToken));
}

TEST_F(DigitalOceanEmulatorTest, OffersComeFromTheSizesList) {
  Driver driver(Config());
  OpResult r = driver.Offers(R"({"gpu":{"type":"H100","count":1},"region":""})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  Array::Ptr offers = r.Doc()->getArray("offers");
  ASSERT_GT(offers->size(), 0u) << r.json;
  for (size_t i = 0; i < offers->size(); ++i) {
    EXPECT_EQ(offers->getObject(i)->getValue<std::string>("instance_type"), "gpu-h100x1-80gb");
  }
  OpResult l4 = driver.Offers(R"({"gpu":{"type":"L4","count":1},"region":""})");
  ASSERT_EQ(l4.status, GPUPROV_STATUS_OK) << l4;
  EXPECT_EQ(l4.Doc()->getArray("offers")->size(), 0u);
}

TEST_F(DigitalOceanEmulatorTest, Lifecycle) {
  Driver driver(Config());
  OpResult created = driver.Create(CreateRequest("do-life"));
  ASSERT_EQ(created.status, GPUPROV_STATUS_OK) << created << "\n" << driver.host().All();
  EXPECT_FALSE(created.Doc()->getValue<bool>("existing"));
  Object::Ptr vm = created.Vm();
  const std::string id = vm->getValue<std::string>("id");
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(vm->getValue<std::string>("name"), "do-life");
  EXPECT_EQ(vm->getValue<std::string>("instance_type"), "gpu-h100x1-80gb");
  EXPECT_EQ(vm->getValue<std::string>("ssh_user"), "root");
  EXPECT_EQ(vm->getValue<std::string>("gpus"), "H100:1");
  EXPECT_TRUE(vm->getObject("ports")->has("6443"));
  const std::string state = vm->getValue<std::string>("state");
  EXPECT_TRUE(state == "pending" || state == "running") << state;
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("firewalls"), 1);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);

  Object::Ptr running = WaitRunning(driver, id);
  ASSERT_TRUE(running);
  EXPECT_TRUE(running->getValue<std::string>("public_ip").rfind("127.", 0) == 0)
      << running->getValue<std::string>("public_ip");

  // The firewall opens the requested ports and lets everything out.
  auto [fw_status, fw_body] = emulator_->Http("GET", emulator_->do_url() + "/firewalls", "", true);
  ASSERT_EQ(fw_status, 200) << fw_body;
  Object::Ptr fw = ParseJson(fw_body)->getArray("firewalls")->getObject(0);
  EXPECT_EQ(fw->getValue<std::string>("name"), "gpuprov-do-life");
  EXPECT_EQ(fw->getArray("inbound_rules")->size(), 4u) << fw_body;
  EXPECT_EQ(fw->getArray("outbound_rules")->size(), 3u) << fw_body;
  EXPECT_TRUE(Contains(fw_body, id)) << fw_body;

  OpResult by_name = driver.Get(R"({"name":"do-life"})");
  ASSERT_EQ(by_name.status, GPUPROV_STATUS_OK) << by_name;
  EXPECT_EQ(by_name.Vm()->getValue<std::string>("id"), id);

  OpResult list = driver.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list;
  Array::Ptr vms = list.Doc()->getArray("vms");
  ASSERT_EQ(vms->size(), 1u) << list.json;  // a GPU droplet: found with type=gpus
  EXPECT_EQ(vms->getObject(0)->getValue<std::string>("name"), "do-life");

  OpResult again = driver.Create(CreateRequest("do-life"));
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_TRUE(again.Doc()->getValue<bool>("existing"));
  EXPECT_EQ(again.Vm()->getValue<std::string>("id"), id);
  EXPECT_EQ(emulator_->Count("instances"), 1);
  EXPECT_EQ(emulator_->Count("firewalls"), 1);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);

  OpResult del = driver.Delete(R"({"id":")" + id + R"(","name":"do-life"})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del;
  EXPECT_TRUE(del.Doc()->getValue<bool>("deleted"));
  EXPECT_EQ(emulator_->Count("instances"), 0);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 0);

  OpResult gone = driver.Get(R"({"id":")" + id + R"("})");
  EXPECT_EQ(gone.status, GPUPROV_STATUS_NOT_FOUND) << gone;
  OpResult del2 = driver.Delete(R"({"id":")" + id + R"(","name":"do-life"})");
  ASSERT_EQ(del2.status, GPUPROV_STATUS_OK) << del2;
  EXPECT_FALSE(del2.Doc()->getValue<bool>("deleted"));
  EXPECT_FALSE(Contains(driver.host().All(), kToken));
}

TEST_F(DigitalOceanEmulatorTest, SharedKeyIsDeletedWithItsLastDroplet) {
  Driver driver(Config());
  OpResult a = driver.Create(CreateRequest("do-share-a"));
  ASSERT_EQ(a.status, GPUPROV_STATUS_OK) << a;
  OpResult b = driver.Create(CreateRequest("do-share-b"));
  ASSERT_EQ(b.status, GPUPROV_STATUS_OK) << b;
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  EXPECT_EQ(emulator_->Count("firewalls"), 2);
  ASSERT_EQ(driver.Delete(R"({"name":"do-share-a"})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  EXPECT_EQ(emulator_->Count("firewalls"), 1);
  ASSERT_EQ(driver.Delete(R"({"name":"do-share-b"})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 0);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
  EXPECT_EQ(emulator_->Count("instances"), 0);
}

TEST_F(DigitalOceanEmulatorTest, ReusesAKeyTheUserRegisteredAndNeverDeletesIt) {
  // The user's own key, registered outside gpuprov.
  auto [status, body] = emulator_->Http(
      "POST", emulator_->do_url() + "/account/keys",
      std::string(R"({"name":"laptop","public_key":")") + kKeyB + R"("})", true);
  ASSERT_EQ(status, 201) << body;
  Driver driver(Config());
  OpResult a = driver.Create(CreateRequest("do-userkey", kKeyB));
  ASSERT_EQ(a.status, GPUPROV_STATUS_OK) << a;
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  ASSERT_EQ(driver.Delete(R"({"name":"do-userkey"})").status, GPUPROV_STATUS_OK);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 1);
  EXPECT_EQ(emulator_->Count("instances"), 0);
}

TEST_F(DigitalOceanEmulatorTest, CapacityIsReportedWithDigitalOceansMessageAndNothingLeaks) {
  Driver driver(Config());
  emulator_->Fault("capacity", 1);
  OpResult r = driver.Create(CreateRequest("do-cap"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_CAPACITY) << r;
  EXPECT_TRUE(Contains(r.error, "Size is not available in this region.")) << r.error;
  EXPECT_EQ(emulator_->Count("instances"), 0);
  EXPECT_EQ(emulator_->Count("firewalls"), 0);
  EXPECT_EQ(emulator_->Count("ssh_keys"), 0);
}

TEST_F(DigitalOceanEmulatorTest, QuotaIsReported) {
  Driver driver(Config());
  emulator_->Fault("quota", 1);
  OpResult r = driver.Create(CreateRequest("do-quota"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_QUOTA) << r;
  EXPECT_TRUE(Contains(r.error, "droplet limit")) << r.error;
  EXPECT_EQ(emulator_->Count("ssh_keys"), 0);
}

TEST_F(DigitalOceanEmulatorTest, ThrottlingIsRetried) {
  Driver driver(Config());
  emulator_->Fault("throttle", 2);
  OpResult r = driver.Create(CreateRequest("do-throttle"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r << "\n" << driver.host().All();
  EXPECT_TRUE(Contains(driver.host().All(), "-> 429")) << driver.host().All();
  EXPECT_EQ(emulator_->Count("instances"), 1);
}

TEST_F(DigitalOceanEmulatorTest, ServerErrorBurstIsRetried) {
  Driver driver(Config());
  emulator_->Fault("server_error", 3);
  OpResult r = driver.Create(CreateRequest("do-5xx"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r << "\n" << driver.host().All();
  EXPECT_TRUE(Contains(driver.host().All(), "-> 500")) << driver.host().All();
  OpResult list = driver.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list;
  EXPECT_EQ(list.Doc()->getArray("vms")->size(), 1u);
}

TEST_F(DigitalOceanEmulatorTest, EndlessServerErrorsBecomeTransient) {
  Driver driver(Config());
  emulator_->Fault("server_error", 50);
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_TRANSIENT) << r;
  EXPECT_TRUE(Contains(r.error, "5 attempt")) << r.error;
}

TEST_F(DigitalOceanEmulatorTest, WrongTokenIsAuth) {
  ScopedEnv wrong("GPUPROV_TEST_WRONG_DO_TOKEN", "dop_v1_wrong_token_value");
  Driver driver(Config(R"(,"token_env":"GPUPROV_TEST_WRONG_DO_TOKEN")"));
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "DIGITALOCEAN_TOKEN")) << r.error;
  EXPECT_TRUE(Contains(r.error, "$GPUPROV_TEST_WRONG_DO_TOKEN")) << r.error;
  EXPECT_FALSE(Contains(r.error, "dop_v1_wrong_token_value")) << r.error;
  EXPECT_FALSE(Contains(driver.host().All(), "dop_v1_wrong_token_value"));
  OpResult c = driver.Create(CreateRequest("do-auth"));
  EXPECT_EQ(c.status, GPUPROV_STATUS_AUTH) << c;
}

TEST_F(DigitalOceanEmulatorTest, OpenPortsAddsToTheFirewall) {
  Driver driver(Config());
  Object::Ptr req = ParseJson(CreateRequest("do-ports"));
  Array::Ptr only_ssh = new Array();
  only_ssh->add(22);
  req->set("open_ports", only_ssh);
  OpResult c = driver.Create(Stringify(req));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  const std::string id = c.Vm()->getValue<std::string>("id");
  OpResult r = driver.OpenPorts(R"({"id":")" + id + R"(","ports":[6443,443]})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  auto [status, body] = emulator_->Http("GET", emulator_->do_url() + "/firewalls", "", true);
  ASSERT_EQ(status, 200) << body;
  Object::Ptr fw = ParseJson(body)->getArray("firewalls")->getObject(0);
  EXPECT_EQ(fw->getArray("inbound_rules")->size(), 3u) << body;
  EXPECT_EQ(emulator_->Count("firewalls"), 1);
}

TEST_F(DigitalOceanEmulatorTest, OversizedUserDataIsRefusedBeforeAnyCall) {
  Driver driver(Config());
  OpResult r = driver.Create(CreateRequest("do-big", kKeyA, std::string(64 * 1024 + 1, 'x')));
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  EXPECT_TRUE(Contains(r.error, "64 KiB")) << r.error;
  EXPECT_EQ(emulator_->Count("ssh_keys"), 0);
  EXPECT_EQ(emulator_->Count("instances"), 0);
}

TEST_F(DigitalOceanEmulatorTest, UnofferedGpuIsInvalidInput) {
  Driver driver(Config());
  Object::Ptr req = ParseJson(CreateRequest("do-l4"));
  req->getObject("gpu")->set("type", "L4");
  OpResult r = driver.Create(Stringify(req));
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  EXPECT_TRUE(Contains(r.error, "does not offer L4")) << r.error;
  EXPECT_EQ(emulator_->Count("instances"), 0);
}

}  // namespace
}  // namespace gpuprov::digitalocean
