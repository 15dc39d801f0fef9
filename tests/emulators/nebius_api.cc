// SPDX-License-Identifier: Apache-2.0
//
// The Nebius AI Cloud emulator (plugins/nebius/REFERENCE.md, "Emulator notes"). A
// gRPC server whose one generic handler parses each call into the generated message of its
// method, so the wire format is the protos' own (plugins/nebius/proto). Order of a call:
// endpoint check (the :authority, when it names a real Nebius endpoint), authentication
// (Bearer metadata; the token exchange itself needs none), request faults (auth_failure,
// throttle, server_error), then the method under the API's lock. Resources advance with
// time on every call (Reconcile), as in the other emulators.
//
// A generic service rather than the generated Service classes: one place for the checks
// every call shares, and UNIMPLEMENTED for any method the protos do not list.
#include "nebius_api.h"

#include <Poco/Base64Decoder.h>
#include <Poco/Crypto/EVPPKey.h>
#include <Poco/Crypto/RSADigestEngine.h>
#include <Poco/Crypto/RSAKey.h>
#include <Poco/File.h>
#include <sys/stat.h>

#include <google/protobuf/timestamp.pb.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "emulator.h"
#include "google/rpc/status.pb.h"
#include "nebius/common/v1/error.pb.h"
#include "nebius/common/v1/operation.pb.h"
#include "nebius/common/v1/operation_service.pb.h"
#include "nebius/compute/v1/disk_service.pb.h"
#include "nebius/compute/v1/instance_service.pb.h"
#include "nebius/compute/v1/platform_service.pb.h"
#include "nebius/iam/v1/token_exchange_service.pb.h"
#include "nebius/vpc/v1/security_group_service.pb.h"
#include "nebius/vpc/v1/security_rule_service.pb.h"
#include "nebius/vpc/v1/subnet_service.pb.h"

namespace gpuprov::emulator {
namespace {

namespace nc = ::nebius::common::v1;
namespace compute = ::nebius::compute::v1;
namespace vpc = ::nebius::vpc::v1;
namespace iam = ::nebius::iam::v1;
using Clock = std::chrono::steady_clock;
using SysClock = std::chrono::system_clock;
using std::chrono::milliseconds;
using Code = grpc::StatusCode;

constexpr const char* kDefaultProject = "project-e00test";
constexpr const char* kEmulatorAccount = "serviceaccount-e00emulator";
constexpr const char* kGrantType = "urn:ietf:params:oauth:grant-type:token-exchange";
constexpr const char* kAccessTokenType = "urn:ietf:params:oauth:token-type:access_token";
constexpr const char* kJwtType = "urn:ietf:params:oauth:token-type:jwt";
constexpr size_t kMaxUserData = 32768;
constexpr int kMaxInterfaces = 8;
constexpr int kMaxRuleCidrs = 8;
constexpr int kMaxRulePorts = 8;
constexpr int64_t kDefaultPageSize = 100;
constexpr int64_t kMaxPageSize = 1000;
// A capacity or quota failure that the create operation reports (not the call) shows the
// instance this long first.
constexpr milliseconds kFailInOperationAfter{500};

// --- catalogue (plugins/nebius/REFERENCE.md §7, §9) ----------------------------------------------

struct PresetDef {
  const char* name;
  int vcpus;
  int memory_gib;
  int gpus;
};
struct PlatformDef {
  const char* name;
  const char* human;
  const char* testvm_gpu;  // the test VM's GPU file type ("" = CPU)
  int gpu_memory_gb;
  std::vector<PresetDef> presets;
};

const std::vector<PlatformDef>& Platforms() {
  // Preset names from the reference's table; the CPU platforms' presets other than
  // 8vcpu-32gb are UNCONFIRMED.
  static const std::vector<PlatformDef> platforms = {
      {"gpu-h100-sxm", "NVIDIA H100 NVLink with Intel Sapphire Rapids", "H100", 80,
       {{"1gpu-16vcpu-200gb", 16, 200, 1}, {"8gpu-128vcpu-1600gb", 128, 1600, 8}}},
      {"gpu-h200-sxm", "NVIDIA H200 NVLink with Intel Sapphire Rapids", "H200", 141,
       {{"1gpu-16vcpu-200gb", 16, 200, 1}, {"8gpu-128vcpu-1600gb", 128, 1600, 8}}},
      {"gpu-b200-sxm", "NVIDIA B200 NVLink with Intel Emerald Rapids", "B200", 180,
       {{"8gpu-160vcpu-1792gb", 160, 1792, 8}}},
      {"gpu-l40s-a", "NVIDIA L40S PCIe with Intel Ice Lake", "L40S", 48,
       {{"1gpu-8vcpu-32gb", 8, 32, 1}, {"1gpu-16vcpu-64gb", 16, 64, 1},
        {"1gpu-40vcpu-160gb", 40, 160, 1}}},
      {"gpu-l40s-d", "NVIDIA L40S PCIe with AMD Epyc Genoa", "L40S", 48,
       {{"1gpu-16vcpu-96gb", 16, 96, 1}, {"2gpu-64vcpu-384gb", 64, 384, 2},
        {"4gpu-128vcpu-768gb", 128, 768, 4}}},
      {"cpu-d3", "Non-GPU AMD EPYC Genoa", "", 0,
       {{"4vcpu-16gb", 4, 16, 0}, {"8vcpu-32gb", 8, 32, 0}}},
      {"cpu-e2", "Non-GPU Intel Ice Lake", "", 0,
       {{"2vcpu-8gb", 2, 8, 0}, {"8vcpu-32gb", 8, 32, 0}}},
  };
  return platforms;
}

// status.allowed_for_preemptibles: every GPU platform takes preemptible VMs, no CPU one does
// (Nebius documentation, "Preemptible virtual machines", supported platforms: "all VM platforms
// with GPUs").
bool AllowedForPreemptibles(const PlatformDef& p) { return *p.testvm_gpu != '\0'; }

const PlatformDef* FindPlatform(const std::string& name) {
  for (const auto& p : Platforms()) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

struct ImageDef {
  const char* family;
  const char* id;
  int min_disk_gib;  // the smallest boot disk the image fits on
};

const std::vector<ImageDef>& Images() {
  // The reference: the CUDA family needs at least 40 GB; ids and the other minimums are ours.
  static const std::vector<ImageDef> images = {
      {"ubuntu24.04-cuda13.0", "computeimage-e00u2404cuda130", 40},
      {"ubuntu22.04-cuda12", "computeimage-e00u2204cuda12", 40},
      {"ubuntu24.04-driverless", "computeimage-e00u2404driverless", 8},
  };
  return images;
}

const ImageDef* FindImageFamily(const std::string& family) {
  for (const auto& i : Images()) {
    if (family == i.family) return &i;
  }
  return nullptr;
}

const ImageDef* FindImageId(const std::string& id) {
  for (const auto& i : Images()) {
    if (id == i.id) return &i;
  }
  return nullptr;
}

// --- helpers ---------------------------------------------------------------------------

google::protobuf::Timestamp Timestamp(SysClock::time_point t) {
  google::protobuf::Timestamp ts;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch());
  ts.set_seconds(ns.count() / 1000000000);
  ts.set_nanos(static_cast<int32_t>(ns.count() % 1000000000));
  return ts;
}

std::optional<std::string> Base64UrlDecode(std::string text) {
  for (char& c : text) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  if (text.find_first_not_of(
          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") !=
      std::string::npos) {
    return std::nullopt;
  }
  while (text.size() % 4) text += '=';
  try {
    std::istringstream in(text);
    Poco::Base64Decoder decoder(in);
    std::string out((std::istreambuf_iterator<char>(decoder)), std::istreambuf_iterator<char>());
    return out;
  } catch (const Poco::Exception&) {
    return std::nullopt;
  }
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(SysClock::now().time_since_epoch())
      .count();
}

std::string ByteBufferString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// A failed call: the gRPC code and message, and the ServiceError detail in the
// grpc-status-details-bin trailer (a serialized google.rpc.Status), as the real API sends.
grpc::Status Fail(Code code, const std::string& message, const nc::ServiceError& error) {
  google::rpc::Status s;
  s.set_code(static_cast<int>(code));
  s.set_message(message);
  s.add_details()->PackFrom(error);
  return grpc::Status(code, message, s.SerializeAsString());
}

nc::ServiceError ServiceErrorOf(const std::string& service, const std::string& code,
                                nc::ServiceError::RetryType retry) {
  nc::ServiceError e;
  e.set_service(service);
  e.set_code(code);
  e.set_retry_type(retry);
  return e;
}

grpc::Status BadRequest(const std::string& service, const std::string& field,
                        const std::string& message) {
  nc::ServiceError e = ServiceErrorOf(service, "BadRequest", nc::ServiceError::NOTHING);
  auto* v = e.mutable_bad_request()->add_violations();
  v->set_field(field);
  v->set_message(message);
  return Fail(Code::INVALID_ARGUMENT, field + ": " + message, e);
}

grpc::Status NotFound(const std::string& service, const std::string& id,
                      const std::string& what = "resource") {
  nc::ServiceError e = ServiceErrorOf(service, "ResourceNotFound", nc::ServiceError::NOTHING);
  e.mutable_resource_not_found()->set_resource_id(id);
  return Fail(Code::NOT_FOUND, what + " " + id + " not found", e);
}

grpc::Status AlreadyExists(const std::string& service, const std::string& id,
                           const std::string& message) {
  nc::ServiceError e =
      ServiceErrorOf(service, "ResourceAlreadyExists", nc::ServiceError::NOTHING);
  e.mutable_resource_already_exists()->set_resource_id(id);
  return Fail(Code::ALREADY_EXISTS, message, e);
}

grpc::Status BadState(const std::string& service, const std::string& id,
                      const std::string& message) {
  nc::ServiceError e = ServiceErrorOf(service, "BadResourceState", nc::ServiceError::NOTHING);
  e.mutable_bad_resource_state()->set_resource_id(id);
  e.mutable_bad_resource_state()->set_message(message);
  return Fail(Code::FAILED_PRECONDITION, message, e);
}

// The page of items [start, start + size) of n and the next token ("" on the last page).
struct Page {
  size_t start = 0;
  size_t end = 0;
  std::string next;
};

std::optional<Page> PageOf(size_t n, int64_t page_size, const std::string& token) {
  Page p;
  if (page_size < 0) return std::nullopt;
  const size_t size = static_cast<size_t>(
      page_size == 0 ? kDefaultPageSize : std::min<int64_t>(page_size, kMaxPageSize));
  if (!token.empty()) {
    if (token.find_first_not_of("0123456789") != std::string::npos || token.size() > 9) {
      return std::nullopt;
    }
    p.start = std::min<size_t>(std::stoul(token), n);
  }
  p.end = std::min(n, p.start + size);
  if (p.end < n) p.next = std::to_string(p.end);
  return p;
}

grpc::Status BadPage(const std::string& service) {
  return BadRequest(service, "page_token", "invalid page token or page size");
}

// The service family of a method: the endpoint it is served at on the real cloud.
std::string FamilyOf(const std::string& method) {
  if (method.rfind("/nebius.compute.", 0) == 0) return "compute";
  if (method.rfind("/nebius.vpc.", 0) == 0) return "vpc";
  if (method.rfind("/nebius.iam.v1.TokenExchangeService/", 0) == 0) return "tokens.iam";
  return "";  // nebius.common.v1.OperationService: served on every endpoint
}

// The Nebius endpoint an :authority names ("compute" for compute.api.nebius.cloud:443), or ""
// for any other authority (127.0.0.1:PORT: one address serving every service).
std::string EndpointOf(const std::string& authority) {
  std::string host = authority.substr(0, authority.rfind(':') == std::string::npos
                                             ? authority.size()
                                             : authority.rfind(':'));
  const std::string suffix = ".api.nebius.cloud";
  if (host.size() > suffix.size() &&
      host.compare(host.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return host.substr(0, host.size() - suffix.size());
  }
  return "";
}

// The ports of an instance that this machine (127.0.0.1) may reach under rules (the
// security groups of its interfaces): ingress TCP/ANY rules whose sources hold this machine,
// by priority (lower first; DENY before ALLOW at equal priority), first match wins, the rest
// denied. A rule without ports covers every port; without source CIDRs or group, any source.
PortSet AllowedPorts(std::vector<const vpc::SecurityRule*> rules) {
  std::vector<const vpc::SecurityRule*> in;
  for (const auto* r : rules) {
    const auto& s = r->spec();
    if (!s.has_ingress()) continue;
    if (s.protocol() != vpc::TCP && s.protocol() != vpc::ANY) continue;
    const auto& ing = s.ingress();
    bool covers = ing.source_cidrs().empty() && ing.source_security_group_id().empty();
    for (const auto& c : ing.source_cidrs()) covers = covers || CoversThisMachine(c);
    if (covers) in.push_back(r);
  }
  std::stable_sort(in.begin(), in.end(), [](const auto* a, const auto* b) {
    if (a->spec().priority() != b->spec().priority()) {
      return a->spec().priority() < b->spec().priority();
    }
    return a->spec().access() == vpc::DENY && b->spec().access() != vpc::DENY;
  });
  auto verdict = [&](std::optional<int> port) {
    for (const auto* r : in) {
      const auto& ports = r->spec().ingress().destination_ports();
      const bool match = ports.empty() ||
                         (port && std::find(ports.begin(), ports.end(), *port) != ports.end());
      if (match) return r->spec().access() == vpc::ALLOW;
    }
    return false;
  };
  std::set<int> listed;
  for (const auto* r : in) {
    for (int p : r->spec().ingress().destination_ports()) listed.insert(p);
  }
  PortSet out = verdict(std::nullopt) ? PortSet::All() : PortSet{};
  for (int p : listed) {
    if (verdict(p)) {
      out.Add(p);
    } else {
      out.Remove(p, p);
    }
  }
  return out;
}

// --- the API ---------------------------------------------------------------------------

class NebiusApi;

// One unary call on the generic service: read the request, answer, finish.
class UnaryReactor : public grpc::ServerGenericBidiReactor {
 public:
  UnaryReactor(NebiusApi* api, grpc::GenericCallbackServerContext* ctx) : api_(api), ctx_(ctx) {
    StartRead(&request_);
  }
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool) override {}
  void OnDone() override { delete this; }

 private:
  NebiusApi* api_;
  grpc::GenericCallbackServerContext* ctx_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

class Generic : public grpc::CallbackGenericService {
 public:
  explicit Generic(NebiusApi* api) : api_(api) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new UnaryReactor(api_, ctx);
  }

 private:
  NebiusApi* api_;
};

// What a handler sees of its call.
struct Call {
  std::string method;
  std::string idempotency_key;  // x-idempotency-key metadata, "" when absent
  std::string account;          // the caller (created_by of operations)
};

class NebiusApi : public CloudApi {
 public:
  NebiusApi(InstanceBackend* backend, CloudOptions options) : CloudApi("nebius", backend,
                                                                       std::move(options)) {
    projects_.insert(kDefaultProject);
    if (const char* path = std::getenv(kNebiusCredentialsEnv); path && *path) {
      if (Poco::File(path).exists()) {
        LoadCredentials(path);
      } else {
        WriteCredentials(path);
      }
    }
    RegisterMethods();
  }

  std::string BasePath() const override { return ""; }

  // --- the gRPC server ---
  int Start(const std::string& host, int port, NebiusCallLog log) {
    log_ = std::move(log);
    generic_ = std::make_unique<Generic>(this);
    grpc::ServerBuilder builder;
    int bound = 0;
    builder.AddListeningPort(host + ":" + std::to_string(port),
                             grpc::InsecureServerCredentials(), &bound);
    builder.RegisterCallbackGenericService(generic_.get());
    server_ = builder.BuildAndStart();
    if (!server_ || bound == 0) {
      throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port) +
                               " for nebius (gRPC)");
    }
    return bound;
  }

  void Stop() {
    if (!server_) return;
    server_->Shutdown(SysClock::now() + std::chrono::seconds(2));
    server_->Wait();
    server_.reset();
  }

  ~NebiusApi() override { Stop(); }

  // One call, start to end; never throws.
  grpc::Status Handle(grpc::GenericCallbackServerContext* ctx, const grpc::ByteBuffer& in,
                      std::string* out) {
    const auto t0 = Clock::now();
    grpc::Status st;
    DelayRequest();
    if (!WaitWhileStalled()) {
      st = grpc::Status(Code::UNAVAILABLE,
                        "emulator: nebius was stalled (fault stall_after); this call was held and "
                        "not carried out");
    } else {
      try {
        st = Dispatch(ctx, ByteBufferString(in), out);
      } catch (const std::exception& e) {
        st = grpc::Status(Code::INTERNAL, std::string("emulator: ") + e.what());
      }
      StallIfMatched("POST", ctx->method(), "",
                     NebiusHttpEquivalent(static_cast<int>(st.error_code())));
    }
    if (log_) {
      log_(ctx->method(), static_cast<int>(st.error_code()),
           std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    return st;
  }

  // --- control API ---
  JsonObject Counts() override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    int64_t groups = 0;
    for (const auto& [id, g] : groups_) groups += !g.status().default_();
    JsonObject o = NewObject();
    o->set("instances", instances_.size());
    o->set("firewalls", groups);
    o->set("ssh_keys", 0);
    o->set("backend_instances", backend_->LiveCount(name_));
    o->set("disks", disks_.size());
    o->set("security_groups", groups);
    o->set("security_rules", rules_.size());
    int64_t running = 0;
    for (const auto& [id, op] : operations_) running += !op.proto.has_status();
    o->set("operations_running", running);
    return o;
  }

  JsonArray Instances() override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    JsonArray a = NewArray();
    for (auto& [id, inst] : instances_) {
      const std::string& name = inst.proto.metadata().name();
      JsonObject row =
          !inst.backend_id.empty() ? InstanceRow(id, name, inst.backend_id)
          : inst.preempted
              ? MachinelessRow(id, name, "stopped",
                               "preempted (POST /preempt): stopped, machine gone")
              : MachinelessRow(id, name, "provisioning",
                               "no machine: this create fails in its operation");
      const compute::InstanceStatus s = StatusOf(inst);
      row->set("nebius_state", compute::InstanceStatus::InstanceState_Name(s.state()));
      row->set("reconciling", s.reconciling());
      JsonArray sgs = NewArray();
      for (const auto& g : GroupsOf(inst)) sgs->add(g);
      row->set("security_groups", sgs);
      row->set("user_data", inst.proto.spec().cloud_init_user_data());
      row->set("on_preemption",
               inst.proto.spec().has_preemptible()
                   ? compute::PreemptibleSpec::PreemptionPolicy_Name(
                         inst.proto.spec().preemptible().on_preemption())
                   : std::string());
      row->set("recovery_policy",
               compute::InstanceRecoveryPolicy_Name(inst.proto.spec().recovery_policy()));
      a->add(row);
    }
    return a;
  }

  // The /instances row of an instance without a machine: preempted (stopped), or a create
  // failing in its operation (provisioning until then).
  static JsonObject MachinelessRow(const std::string& id, const std::string& name,
                                   const std::string& state, const std::string& message) {
    JsonObject r = NewObject();
    r->set("id", id);
    r->set("name", name);
    r->set("backend_id", std::string());
    r->set("state", state);
    r->set("message", message);
    r->set("reachable_ports", std::string());
    return r;
  }

  void Reset() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, inst] : instances_) {
      if (!inst.backend_id.empty()) backend_->Delete(inst.backend_id);
    }
    instances_.clear();
    disks_.clear();
    rules_.clear();
    told_ingress_.clear();
    groups_.clear();
    subnets_.clear();
    operations_.clear();
    idempotency_.clear();
    faults_.Clear();
  }

  // POST /settings (README "Nebius").
  std::string Configure(const JsonObject& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto e = GetBool(s, "expire_tokens"); e && *e) tokens_.clear();
    if (auto n = GetInt(s, "token_lifetime_seconds")) {
      if (*n < 1 || *n > 86400) return "token_lifetime_seconds must be 1..86400";
      token_lifetime_ = std::chrono::seconds(*n);
    }
    auto seconds = [&](const char* key, milliseconds* to) -> std::string {
      if (auto v = GetDouble(s, key)) {
        if (*v < 0 || *v > 3600) return std::string(key) + " must be 0..3600";
        *to = milliseconds(static_cast<int64_t>(*v * 1000));
      }
      return "";
    };
    for (auto [key, to] : std::initializer_list<std::pair<const char*, milliseconds*>>{
             {"stopped_seconds", &stopped_phase_},
             {"deleting_seconds", &deleting_phase_},
             {"disk_seconds", &disk_phase_},
             {"vpc_operation_seconds", &vpc_phase_}}) {
      if (std::string e = seconds(key, to); !e.empty()) return e;
    }
    if (auto d = GetString(s, "delete_while_busy")) {
      if (*d != "abort" && *d != "conflict") return "delete_while_busy is abort or conflict";
      delete_conflicts_ = *d == "conflict";
    }
    if (auto v = GetString(s, "vanish_instance")) {
      // The machine is lost (plugins/nebius/REFERENCE.md, emulator notes (f)): NOT_FOUND from now
      // on.
      auto it = instances_.begin();
      while (it != instances_.end() && it->first != *v &&
             it->second.proto.metadata().name() != *v) {
        ++it;
      }
      if (it == instances_.end()) return "vanish_instance: no instance with id or name " + *v;
      if (!it->second.backend_id.empty()) backend_->Delete(it->second.backend_id);
      Finish(it->second.create_op, Code::INTERNAL, "the instance was lost (vanish_instance)");
      ReleaseDisk(it->second);
      instances_.erase(it);
    }
    if (auto v = GetString(s, "unlabel")) {
      // The user's own resources by that name (an instance, a disk, a security group and its
      // rules): no labels, as if made without gpuprov (`gpuprov gc` must leave them alone).
      bool found = false;
      auto clear = [&](nc::ResourceMetadata* m) {
        if (m->name() != *v) return;
        m->mutable_labels()->clear();
        found = true;
      };
      for (auto& [id, inst] : instances_) clear(inst.proto.mutable_metadata());
      for (auto& [id, disk] : disks_) clear(disk.proto.mutable_metadata());
      for (auto& [id, group] : groups_) {
        if (group.metadata().name() != *v) continue;
        clear(group.mutable_metadata());
        for (auto& [rid, rule] : rules_) {
          if (rule.metadata().parent_id() == id) rule.mutable_metadata()->mutable_labels()->clear();
        }
      }
      if (!found) return "unlabel: no instance, disk or security group named " + *v;
    }
    if (JsonArray p = GetArray(s, "projects")) {
      std::set<std::string> projects;
      for (size_t i = 0; i < p->size(); ++i) {
        const std::string id = p->get(i).toString();
        if (id.rfind("project-", 0) != 0) return "projects: ids start with project-";
        projects.insert(id);
      }
      if (projects.empty()) return "projects: at least one";
      projects_ = projects;
    }
    if (JsonObject sa = GetObject(s, "service_account")) {
      const std::string kid = GetString(sa, "kid").value_or("");
      const std::string account = GetString(sa, "id").value_or("");
      const std::string pem = GetString(sa, "public_key_pem").value_or("");
      if (kid.empty() || account.empty() || pem.empty()) {
        return "service_account needs kid, id and public_key_pem";
      }
      try {
        std::istringstream in(pem);
        keys_[kid] = Key{account, std::make_shared<Poco::Crypto::RSAKey>(&in)};
      } catch (const Poco::Exception& e) {
        return "service_account.public_key_pem is not an RSA public key: " + e.displayText();
      }
    }
    return CloudApi::Configure(s);
  }

 protected:
  // The HTTP path of CloudApi is not used: this cloud is served over gRPC only.
  std::optional<HttpResponse> Authenticate(const HttpRequest&) override { return std::nullopt; }
  HttpResponse Throttled(const HttpRequest&, const Fault&) override { return GrpcOnly(); }
  HttpResponse ServerError(const HttpRequest&, const Fault&) override { return GrpcOnly(); }
  HttpResponse InternalError(const std::string&) override { return GrpcOnly(); }
  HttpResponse Route(const HttpRequest&) override { return GrpcOnly(); }
  static HttpResponse GrpcOnly() {
    return TextResponse(404, "the nebius emulator serves gRPC only\n");
  }

 private:
  struct Key {
    std::string account;
    std::shared_ptr<Poco::Crypto::RSAKey> key;
  };
  struct Operation {
    nc::Operation proto;
    std::string family;   // compute | vpc
    std::string project;  // for ListOperationsByParent
    std::optional<Clock::time_point> done_at;  // finishes OK then (time-based operations)
  };
  struct Instance {
    compute::Instance proto;  // metadata and spec as created; status made by StatusOf
    std::string backend_id;   // "" when its create fails in the operation
    Clock::time_point created;
    std::string create_op;
    std::string delete_op;
    std::optional<Clock::time_point> deleting_since;
    std::optional<Clock::time_point> fail_at;  // capacity/quota reported by the operation
    std::string fail_kind;                     // capacity | quota
    bool error_state = false;                  // error_during_boot "error": ERROR, not STOPPED
    // capacity "after_start": the create operation succeeds, then the start fails for want
    // of capacity: STOPPED, not reconciling, with a failed operation on the instance.
    std::optional<Clock::time_point> start_fail_at;
    bool start_failed = false;
    // POST /preempt took this preemptible instance back: STOPPED (not reconciling, no public
    // address), its machine gone, spec and boot disk kept, until it is deleted.
    bool preempted = false;
    double ip_after_seconds = 0;               // ip_after_boot
    std::string disk_id;                       // boot disk
    bool managed_disk = false;
  };
  struct Disk {
    compute::Disk proto;
    Clock::time_point ready_at;
    std::optional<Clock::time_point> deleting_until;
    std::string create_op;
    std::string delete_op;
  };

  using Handler = std::function<grpc::Status(const std::string&, std::string*, const Call&)>;

  // Registers method as a handler of Req -> Resp.
  template <class Req, class Resp>
  void On(const std::string& method,
          grpc::Status (NebiusApi::*fn)(const Req&, Resp*, const Call&)) {
    methods_[method] = [this, fn](const std::string& in, std::string* out, const Call& call) {
      Req req;
      if (!req.ParseFromString(in)) {
        return grpc::Status(Code::INVALID_ARGUMENT, "the request is not a valid " +
                                                        Req::descriptor()->full_name());
      }
      Resp resp;
      grpc::Status st = (this->*fn)(req, &resp, call);
      if (st.ok()) *out = resp.SerializeAsString();
      return st;
    };
  }

  void RegisterMethods() {
    On("/nebius.iam.v1.TokenExchangeService/Exchange", &NebiusApi::Exchange);
    On("/nebius.common.v1.OperationService/Get", &NebiusApi::GetOperation);
    On("/nebius.common.v1.OperationService/List", &NebiusApi::ListOperations);
    On("/nebius.compute.v1.InstanceService/Get", &NebiusApi::GetInstance);
    On("/nebius.compute.v1.InstanceService/GetByName", &NebiusApi::GetInstanceByName);
    On("/nebius.compute.v1.InstanceService/List", &NebiusApi::ListInstances);
    On("/nebius.compute.v1.InstanceService/Create", &NebiusApi::CreateInstance);
    On("/nebius.compute.v1.InstanceService/Delete", &NebiusApi::DeleteInstance);
    On("/nebius.compute.v1.InstanceService/Start", &NebiusApi::StartInstance);
    On("/nebius.compute.v1.InstanceService/Stop", &NebiusApi::StopInstance);
    On("/nebius.compute.v1.InstanceService/ListOperationsByParent",
       &NebiusApi::ListInstanceOperations);
    On("/nebius.compute.v1.DiskService/Get", &NebiusApi::GetDisk);
    On("/nebius.compute.v1.DiskService/GetByName", &NebiusApi::GetDiskByName);
    On("/nebius.compute.v1.DiskService/List", &NebiusApi::ListDisks);
    On("/nebius.compute.v1.DiskService/Create", &NebiusApi::CreateDisk);
    On("/nebius.compute.v1.DiskService/Delete", &NebiusApi::DeleteDisk);
    On("/nebius.compute.v1.PlatformService/GetByName", &NebiusApi::GetPlatformByName);
    On("/nebius.compute.v1.PlatformService/List", &NebiusApi::ListPlatforms);
    On("/nebius.vpc.v1.SubnetService/Get", &NebiusApi::GetSubnet);
    On("/nebius.vpc.v1.SubnetService/List", &NebiusApi::ListSubnets);
    On("/nebius.vpc.v1.SecurityGroupService/Get", &NebiusApi::GetGroup);
    On("/nebius.vpc.v1.SecurityGroupService/GetByName", &NebiusApi::GetGroupByName);
    On("/nebius.vpc.v1.SecurityGroupService/List", &NebiusApi::ListGroups);
    On("/nebius.vpc.v1.SecurityGroupService/Create", &NebiusApi::CreateGroup);
    On("/nebius.vpc.v1.SecurityGroupService/Delete", &NebiusApi::DeleteGroup);
    On("/nebius.vpc.v1.SecurityRuleService/Get", &NebiusApi::GetRule);
    On("/nebius.vpc.v1.SecurityRuleService/List", &NebiusApi::ListRules);
    On("/nebius.vpc.v1.SecurityRuleService/Create", &NebiusApi::CreateRule);
    On("/nebius.vpc.v1.SecurityRuleService/Delete", &NebiusApi::DeleteRule);
  }

  static std::string Metadata(grpc::GenericCallbackServerContext* ctx, const std::string& key) {
    const auto& md = ctx->client_metadata();
    auto it = md.find(key);
    if (it == md.end()) return "";
    return std::string(it->second.data(), it->second.size());
  }

  grpc::Status Dispatch(grpc::GenericCallbackServerContext* ctx, const std::string& in,
                        std::string* out) {
    const std::string& method = ctx->method();
    auto handler = methods_.find(method);
    if (handler == methods_.end()) {
      return grpc::Status(Code::UNIMPLEMENTED, "unknown method " + method);
    }
    Call call;
    call.method = method;
    call.idempotency_key = Metadata(ctx, "x-idempotency-key");
    // Each service on its own endpoint (plugins/nebius/REFERENCE.md §0) when the client names one.
    const std::string endpoint = EndpointOf(ctx->host());
    const std::string family = FamilyOf(method);
    if (!endpoint.empty() && !family.empty() && endpoint != family) {
      return grpc::Status(Code::UNIMPLEMENTED,
                          "service of " + method + " is not served at " + ctx->host() +
                              " (it is on " + family + ".api.nebius.cloud)");
    }
    if (family != "tokens.iam") {
      const std::string auth = Metadata(ctx, "authorization");
      const std::string token = auth.rfind("Bearer ", 0) == 0 ? auth.substr(7) : "";
      std::optional<std::string> account = Authenticated(token);
      if (!account) {
        return grpc::Status(Code::UNAUTHENTICATED,
                            auth.empty() ? "missing authorization metadata (Bearer token)"
                                         : "invalid or expired access token");
      }
      call.account = *account;
      if (faults_.Take("auth_failure", "POST", method)) {
        return grpc::Status(Code::UNAUTHENTICATED,
                            "access token revoked (fault auth_failure; not from the reference)");
      }
    }
    if (faults_.Take("throttle", "POST", method)) {
      nc::ServiceError e = ServiceErrorOf(ServiceName(method), "TooManyRequests",
                                          nc::ServiceError::CALL);
      e.mutable_too_many_requests()->set_violation("rate limit of " + method +
                                                   " exceeded (fault throttle)");
      return Fail(Code::RESOURCE_EXHAUSTED, "too many requests", e);
    }
    std::optional<Fault> server_error = faults_.Take("server_error", "POST", method);
    if (server_error && server_error->value != "after_create") return ServerFault(*server_error,
                                                                                  method);
    grpc::Status st;
    {
      std::lock_guard<std::mutex> lock(mu_);
      endpoint_ = endpoint;
      Reconcile();
      st = handler->second(in, out, call);
    }
    if (server_error) {
      out->clear();
      return ServerFault(*server_error, method);  // after_create: done, then the error
    }
    return st;
  }

  static std::string ServiceName(const std::string& method) {
    const std::string f = FamilyOf(method);
    return f.empty() ? "common" : f == "tokens.iam" ? "iam" : f;
  }

  static grpc::Status ServerFault(const Fault& f, const std::string& method) {
    if (f.status == 500) {
      nc::ServiceError e =
          ServiceErrorOf(ServiceName(method), "InternalError", nc::ServiceError::CALL);
      e.mutable_internal_error()->set_request_id(RandomUuid());
      e.mutable_internal_error()->set_trace_id(RandomHex(16));
      return Fail(Code::INTERNAL, "internal error (fault server_error)", e);
    }
    if (f.status == 504) {
      return grpc::Status(Code::DEADLINE_EXCEEDED, "deadline exceeded (fault server_error)");
    }
    return grpc::Status(Code::UNAVAILABLE, "service unavailable (fault server_error)");
  }

  std::optional<std::string> Authenticated(const std::string& token) {
    if (token.empty()) return std::nullopt;
    if (TokenAccepted(token)) return std::string(kEmulatorAccount);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tokens_.find(token);
    if (it == tokens_.end() || Clock::now() >= it->second.expires) return std::nullopt;
    return it->second.account;
  }

  // --- IAM token exchange (plugins/nebius/REFERENCE.md §1) ---
  grpc::Status Exchange(const iam::ExchangeTokenRequest& req, iam::CreateTokenResponse* resp,
                        const Call&) {
    if (req.grant_type() != kGrantType) {
      return BadRequest("iam", "grant_type", "must be " + std::string(kGrantType));
    }
    if (req.requested_token_type() != kAccessTokenType) {
      return BadRequest("iam", "requested_token_type", "must be " + std::string(kAccessTokenType));
    }
    if (req.subject_token_type() != kJwtType) {
      return BadRequest("iam", "subject_token_type", "must be " + std::string(kJwtType));
    }
    const std::vector<std::string> parts = [&] {
      std::vector<std::string> v;
      const std::string& a = req.subject_token();
      size_t start = 0;
      for (size_t dot; (dot = a.find('.', start)) != std::string::npos; start = dot + 1) {
        v.push_back(a.substr(start, dot - start));
      }
      v.push_back(a.substr(start));
      return v;
    }();
    auto deny = [](const std::string& why) {
      return grpc::Status(Code::UNAUTHENTICATED,
                          "subject_token rejected: " + why + " (wording not from the reference)");
    };
    if (parts.size() != 3) return deny("not a JWT (header.claims.signature)");
    const auto header_text = Base64UrlDecode(parts[0]);
    const auto claims_text = Base64UrlDecode(parts[1]);
    const auto signature = Base64UrlDecode(parts[2]);
    JsonObject header = header_text ? ParseObject(*header_text) : nullptr;
    JsonObject claims = claims_text ? ParseObject(*claims_text) : nullptr;
    if (!header || !claims || !signature) return deny("the parts are not base64url JSON");
    if (GetString(header, "alg").value_or("") != "RS256") return deny("alg must be RS256");
    const std::string kid = GetString(header, "kid").value_or("");
    auto key = keys_.find(kid);
    if (key == keys_.end()) return deny("unknown key id (kid) \"" + kid + "\"");
    const std::string iss = GetString(claims, "iss").value_or("");
    const std::string sub = GetString(claims, "sub").value_or("");
    if (iss != key->second.account || sub != key->second.account) {
      return deny("iss and sub must be the service account " + key->second.account +
                  " of key " + kid);
    }
    bool verified = false;
    try {
      Poco::Crypto::RSADigestEngine engine(*key->second.key, "SHA256");
      engine.update(parts[0] + "." + parts[1]);
      verified = engine.verify(Poco::DigestEngine::Digest(signature->begin(), signature->end()));
    } catch (const Poco::Exception&) {
      verified = false;
    }
    if (!verified) return deny("signature does not verify with key " + kid);
    const int64_t now = UnixNow();
    const int64_t exp = GetInt(claims, "exp").value_or(0);
    if (exp <= now) return deny("expired (exp)");
    if (exp > now + 3600) return deny("exp more than an hour ahead");
    if (auto iat = GetInt(claims, "iat"); iat && *iat > now + 300) return deny("iat in the future");
    const std::string token = "v1.emu" + RandomHex(24);
    tokens_[token] = Issued{key->second.account, Clock::now() + token_lifetime_};
    resp->set_access_token(token);
    resp->set_issued_token_type(kAccessTokenType);
    resp->set_token_type("Bearer");
    resp->set_expires_in(token_lifetime_.count());
    return grpc::Status::OK;
  }

  // --- operations (plugins/nebius/REFERENCE.md §3) ---
  Operation& NewOperation(const std::string& family, const std::string& project,
                          const std::string& description, const std::string& resource_id,
                          const google::protobuf::Message& request, const Call& call) {
    const std::string id =
        (family == "vpc" ? "vpcoperation-e00" : "computeoperation-e00") + NextId();
    Operation& op = operations_[id];
    op.family = family;
    op.project = project;
    op.proto.set_id(id);
    op.proto.set_description(description);
    *op.proto.mutable_created_at() = Timestamp(SysClock::now());
    op.proto.set_created_by(call.account);
    op.proto.mutable_request()->PackFrom(request);
    op.proto.set_resource_id(resource_id);
    if (!call.idempotency_key.empty()) idempotency_[call.method + "\n" + call.idempotency_key] = id;
    return op;
  }

  // The operation an earlier call with the same x-idempotency-key made, if any.
  const Operation* Replayed(const Call& call) {
    if (call.idempotency_key.empty()) return nullptr;
    auto it = idempotency_.find(call.method + "\n" + call.idempotency_key);
    if (it == idempotency_.end()) return nullptr;
    auto op = operations_.find(it->second);
    return op == operations_.end() ? nullptr : &op->second;
  }

  void Finish(const std::string& op_id, Code code = Code::OK, const std::string& message = "",
              const std::optional<nc::ServiceError>& detail = std::nullopt) {
    auto it = operations_.find(op_id);
    if (it == operations_.end() || it->second.proto.has_status()) return;
    auto* s = it->second.proto.mutable_status();
    s->set_code(static_cast<int>(code));
    s->set_message(message);
    if (detail) s->add_details()->PackFrom(*detail);
    *it->second.proto.mutable_finished_at() = Timestamp(SysClock::now());
    it->second.done_at.reset();
  }

  grpc::Status GetOperation(const nc::GetOperationRequest& req, nc::Operation* resp,
                            const Call&) {
    auto it = operations_.find(req.id());
    // An operation is read on the endpoint of the service that made it
    // (plugins/nebius/REFERENCE.md §3).
    if (it == operations_.end() || (!endpoint_.empty() && it->second.family != endpoint_)) {
      return NotFound(endpoint_.empty() ? "common" : endpoint_, req.id(), "operation");
    }
    *resp = it->second.proto;
    return grpc::Status::OK;
  }

  grpc::Status ListOperations(const nc::ListOperationsRequest& req,
                              nc::ListOperationsResponse* resp, const Call&) {
    std::vector<const Operation*> ops;
    for (const auto& [id, op] : operations_) {
      if (op.proto.resource_id() == req.resource_id() &&
          (endpoint_.empty() || op.family == endpoint_)) {
        ops.push_back(&op);
      }
    }
    auto page = PageOf(ops.size(), req.page_size(), req.page_token());
    if (!page) return BadPage("common");
    for (size_t i = page->start; i < page->end; ++i) *resp->add_operations() = ops[i]->proto;
    resp->set_next_page_token(page->next);
    return grpc::Status::OK;
  }

  // --- projects and ids ---
  std::string NextId() {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%06llu", static_cast<unsigned long long>(++next_id_));
    return buf + RandomHex(5);
  }

  grpc::Status CheckProject(const std::string& service, const std::string& field,
                            const std::string& project) {
    if (project.empty()) return BadRequest(service, field, "is required (the project id)");
    if (projects_.count(project)) return grpc::Status::OK;
    nc::ServiceError e = ServiceErrorOf(service, "PermissionDenied", nc::ServiceError::NOTHING);
    e.mutable_permission_denied()->set_resource_id(project);
    return Fail(Code::PERMISSION_DENIED,
                "permission denied for " + project + " (the emulator serves " +
                    *projects_.begin() + ")",
                e);
  }

  static grpc::Status CheckName(const std::string& service, const std::string& name) {
    static const std::regex re("^[a-zA-Z0-9][-_./a-zA-Z0-9]{0,254}$");
    if (name.empty()) return BadRequest(service, "metadata.name", "is required");
    if (!std::regex_match(name, re)) {
      return BadRequest(service, "metadata.name",
                        "must be 1-255 characters of [-_./a-zA-Z0-9] starting with a letter or "
                        "digit (rule not from the reference)");
    }
    return grpc::Status::OK;
  }

  // The project's default subnet and network (made on first use), and its default group.
  vpc::Subnet& SubnetOf(const std::string& project) {
    auto it = subnets_.find(project);
    if (it != subnets_.end()) return it->second;
    const std::string tail = project.substr(std::string("project-").size());
    vpc::Subnet s;
    s.mutable_metadata()->set_id("vpcsubnet-" + tail);
    s.mutable_metadata()->set_parent_id(project);
    s.mutable_metadata()->set_name("default-subnet-" + tail);
    s.mutable_metadata()->set_resource_version(1);
    *s.mutable_metadata()->mutable_created_at() = Timestamp(SysClock::now());
    s.mutable_spec()->set_network_id("vpcnetwork-" + tail);
    s.mutable_status()->set_state(vpc::SubnetStatus::READY);
    vpc::SecurityGroup g;
    g.mutable_metadata()->set_id("vpcsecuritygroup-" + tail + "default");
    g.mutable_metadata()->set_parent_id(project);
    g.mutable_metadata()->set_name("default-securitygroup-" + tail);
    g.mutable_metadata()->set_resource_version(1);
    g.mutable_spec()->set_network_id(s.spec().network_id());
    g.mutable_status()->set_state(vpc::SecurityGroupStatus::READY);
    g.mutable_status()->set_default_(true);
    groups_[g.metadata().id()] = g;
    return subnets_[project] = s;
  }

  // --- instances (plugins/nebius/REFERENCE.md §3.2-3.5) ---
  std::vector<std::string> GroupsOf(const Instance& inst) {
    std::vector<std::string> out;
    for (const auto& nic : inst.proto.spec().network_interfaces()) {
      for (const auto& g : nic.security_groups()) out.push_back(g.id());
    }
    if (out.empty()) {
      for (const auto& [id, g] : groups_) {
        if (g.status().default_() &&
            g.metadata().parent_id() == inst.proto.metadata().parent_id()) {
          out.push_back(id);
        }
      }
    }
    return out;
  }

  static bool WantsPublicIp(const compute::Instance& inst) {
    for (const auto& nic : inst.spec().network_interfaces()) {
      if (nic.has_public_ip_address()) return true;
    }
    return false;
  }

  PortSet ReachableOf(const Instance& inst) {
    if (!WantsPublicIp(inst.proto)) return {};  // no address this machine can reach
    std::vector<const vpc::SecurityRule*> rules;
    for (const auto& g : GroupsOf(inst)) {
      for (const auto& [id, r] : rules_) {
        if (r.metadata().parent_id() == g) rules.push_back(&r);
      }
    }
    return AllowedPorts(rules);
  }

  void ApplyRules() {
    for (auto& [id, inst] : instances_) {
      if (!inst.backend_id.empty() && !inst.deleting_since) {
        backend_->SetReachablePorts(inst.backend_id, ReachableOf(inst));
      }
    }
    ApplyPrivateIngress();
  }

  // The private addresses of the running instances whose interfaces list group_id.
  std::vector<std::string> MembersOf(const std::string& group_id) {
    std::vector<std::string> ips;
    for (const auto& [id, o] : instances_) {
      if (o.backend_id.empty() || o.deleting_since) continue;
      const auto groups = GroupsOf(o);
      if (std::find(groups.begin(), groups.end(), group_id) == groups.end()) continue;
      const InstanceStatus b = backend_->State(o.backend_id);
      if (b.state == InstanceState::kRunning && !b.private_ip.empty()) ips.push_back(b.private_ip);
    }
    return ips;
  }

  // What reaches an instance on its private address (the project's subnet): its groups' ALLOW
  // ingress rules of TCP, UDP or ANY, each from its source_cidrs and the private addresses of
  // the members of its source_security_group_id ("ID of the referenced Security Group as the
  // source", nebius/api vpc/v1/security_rule.proto), from anywhere when it names neither
  // ("Empty list means any address"); on its destination_ports, every port when none. A group
  // ends in an implicit deny (plugins/nebius/REFERENCE.md §5), so nothing else reaches it.
  // DENY rules are not applied on this side (gpuprov makes none; their first-match order
  // is the public side's, AllowedPorts).
  PrivateIngress PrivateIngressOf(const Instance& inst) {
    std::vector<PrivateRule> out;
    for (const auto& gid : GroupsOf(inst)) {
      for (const auto& [rid, r] : rules_) {
        const auto& s = r.spec();
        if (r.metadata().parent_id() != gid || s.access() != vpc::ALLOW || !s.has_ingress()) {
          continue;
        }
        const auto& ing = s.ingress();
        std::vector<std::string> sources(ing.source_cidrs().begin(), ing.source_cidrs().end());
        if (!ing.source_security_group_id().empty()) {
          for (const auto& ip : MembersOf(ing.source_security_group_id())) sources.push_back(ip);
        } else if (sources.empty()) {
          sources.push_back("0.0.0.0/0");
        }
        if (sources.empty()) continue;
        for (const char* protocol : {"tcp", "udp"}) {
          const bool any = s.protocol() == vpc::ANY;
          if (!any && s.protocol() != (std::string(protocol) == "tcp" ? vpc::TCP : vpc::UDP)) {
            continue;
          }
          std::vector<PortRange> ranges;
          for (int p : ing.destination_ports()) ranges.push_back(PortRange{p, p});
          if (ranges.empty()) ranges.push_back(PortRange{1, 65535});
          for (const auto& range : ranges) out.push_back(PrivateRule{protocol, range, sources});
        }
      }
    }
    return out;
  }

  // Tells the backend each live instance's private ingress when it changed (peers' addresses
  // are known once they run, so this runs with every request).
  void ApplyPrivateIngress() {
    for (const auto& [id, inst] : instances_) {
      if (inst.backend_id.empty() || inst.deleting_since) continue;
      PrivateIngress ingress = PrivateIngressOf(inst);
      auto told = told_ingress_.find(id);
      if (told != told_ingress_.end() && told->second == ingress) continue;
      backend_->SetPrivateIngress(inst.backend_id, ingress);
      told_ingress_[id] = ingress;
    }
  }

  // The status the API shows now: STOPPED+reconciling (just made) -> STARTING -> RUNNING;
  // DELETING; a start failure is STOPPED without reconciling (or ERROR).
  compute::InstanceStatus StatusOf(const Instance& inst) {
    compute::InstanceStatus s;
    const auto now = Clock::now();
    InstanceStatus b;
    if (!inst.backend_id.empty() && !inst.deleting_since) b = backend_->State(inst.backend_id);
    if (inst.deleting_since) {
      s.set_state(compute::InstanceStatus::DELETING);
      s.set_reconciling(true);
    } else if (inst.preempted) {
      // Nebius stops a preemptible VM it takes back (PreemptibleSpec.on_preemption STOP,
      // nebius/api compute/v1/instance.proto) and releases its dynamic public IP (Nebius
      // documentation, "Preemptible virtual machines"): STOPPED, settled, no address.
      s.set_state(compute::InstanceStatus::STOPPED);
    } else if (inst.start_failed) {
      s.set_state(compute::InstanceStatus::STOPPED);  // a failed start: not reconciling
    } else if (inst.backend_id.empty() || now - inst.created < stopped_phase_) {
      s.set_state(compute::InstanceStatus::STOPPED);
      s.set_reconciling(true);
    } else if (b.state == InstanceState::kProvisioning) {
      s.set_state(compute::InstanceStatus::STARTING);
      s.set_reconciling(true);
    } else if (b.state == InstanceState::kRunning) {
      s.set_state(compute::InstanceStatus::RUNNING);
    } else if (b.state == InstanceState::kError) {
      s.set_state(inst.error_state ? compute::InstanceStatus::ERROR
                                   : compute::InstanceStatus::STOPPED);
    } else if (b.state == InstanceState::kStopped) {
      // plugins/nebius/REFERENCE.md §3.5: stopped, not reconciling
      s.set_state(compute::InstanceStatus::STOPPED);
    } else {
      s.set_state(compute::InstanceStatus::UNSPECIFIED);  // gone: Reconcile drops it
    }
    int index = 0;
    for (const auto& nic : inst.proto.spec().network_interfaces()) {
      auto* n = s.add_network_interfaces();
      n->set_index(index++);
      n->set_name(nic.name());
      const bool has_address = s.state() == compute::InstanceStatus::STARTING ||
                               s.state() == compute::InstanceStatus::RUNNING;
      if (has_address && !b.private_ip.empty()) {
        n->mutable_ip_address()->set_address(b.private_ip + "/32");
      }
      const bool public_now = s.state() == compute::InstanceStatus::RUNNING &&
                              b.running_for.count() >= inst.ip_after_seconds * 1000;
      if (nic.has_public_ip_address()) {
        auto* p = n->mutable_public_ip_address();
        p->set_static_(nic.public_ip_address().static_());
        if (public_now && index == 1) p->set_address(b.public_ip + "/32");
      }
      for (const auto& g : nic.security_groups()) n->add_security_groups()->set_id(g.id());
    }
    if (!inst.disk_id.empty()) {
      auto* d = s.add_disk_attachments();
      d->set_id(inst.disk_id);
      if (auto it = disks_.find(inst.disk_id); it != disks_.end()) {
        d->set_name(it->second.proto.metadata().name());
      }
      d->set_is_managed(inst.managed_disk);
    }
    return s;
  }

  compute::Instance Shown(Instance& inst) {
    compute::Instance out = inst.proto;
    *out.mutable_status() = StatusOf(inst);
    return out;
  }

  // Drops the instance's disk (managed) or its attachment (existing).
  void ReleaseDisk(const Instance& inst) {
    auto it = disks_.find(inst.disk_id);
    if (it == disks_.end()) return;
    if (inst.managed_disk) {
      disks_.erase(it);
    } else {
      it->second.proto.mutable_status()->clear_read_write_attachment();
    }
  }

  static nc::ServiceError CapacityError(const compute::Instance& proto) {
    nc::ServiceError e =
        ServiceErrorOf("compute", "NotEnoughResources", nc::ServiceError::UNIT_OF_WORK);
    auto* v = e.mutable_not_enough_resources()->add_violations();
    v->set_resource_type(proto.spec().resources().platform() + "/" +
                         proto.spec().resources().preset());
    v->set_message("not enough resources of " + proto.spec().resources().platform() +
                   " in the region (fault capacity; wording not from the reference)");
    v->set_requested("1");
    return e;
  }

  static nc::ServiceError QuotaError(const compute::Instance& proto) {
    nc::ServiceError e = ServiceErrorOf("compute", "QuotaFailure", nc::ServiceError::NOTHING);
    auto* v = e.mutable_quota_failure()->add_violations();
    const PlatformDef* p = FindPlatform(proto.spec().resources().platform());
    v->set_quota(p && *p->testvm_gpu ? "compute.gpu." + Lower(p->testvm_gpu) + ".count"
                                     : "compute.instance.count");
    v->set_message("Quota limit exceeded (fault quota)");
    v->set_limit("0");
    v->set_requested("1");
    return e;
  }

  grpc::Status CreateInstance(const compute::CreateInstanceRequest& req, nc::Operation* resp,
                              const Call& call) {
    if (const Operation* op = Replayed(call)) {
      *resp = op->proto;
      return grpc::Status::OK;
    }
    const auto& md = req.metadata();
    const auto& spec = req.spec();
    if (auto st = CheckProject("compute", "metadata.parent_id", md.parent_id()); !st.ok()) {
      return st;
    }
    if (auto st = CheckName("compute", md.name()); !st.ok()) return st;
    const PlatformDef* platform = FindPlatform(spec.resources().platform());
    if (!platform) {
      return BadRequest("compute", "spec.resources.platform",
                        "unknown platform \"" + spec.resources().platform() + "\"");
    }
    const PresetDef* preset = nullptr;
    for (const auto& p : platform->presets) {
      if (spec.resources().preset() == p.name) preset = &p;
    }
    if (!preset) {
      return BadRequest("compute", "spec.resources.preset",
                        "platform " + std::string(platform->name) + " has no preset \"" +
                            spec.resources().preset() + "\"");
    }
    if (spec.has_preemptible()) {
      // nebius/api compute/v1/instance.proto: PreemptibleSpec.on_preemption is required, STOP
      // its only value; a preemptible VM needs a platform allowed_for_preemptibles. The wording
      // of both refusals is the emulator's.
      if (spec.preemptible().on_preemption() != compute::PreemptibleSpec::STOP) {
        return BadRequest("compute", "spec.preemptible.on_preemption",
                          "value is required (STOP)");
      }
      if (!AllowedForPreemptibles(*platform)) {
        return BadRequest("compute", "spec.preemptible",
                          "platform " + std::string(platform->name) +
                              " is not allowed for preemptible instances");
      }
    }
    if (spec.cloud_init_user_data().size() > kMaxUserData) {
      return BadRequest("compute", "spec.cloud_init_user_data",
                        "must be at most 32768 characters");
    }
    if (spec.network_interfaces_size() < 1 || spec.network_interfaces_size() > kMaxInterfaces) {
      return BadRequest("compute", "spec.network_interfaces", "1 to 8 interfaces");
    }
    static const std::regex nic_name("^[0-9a-z][0-9a-z-]{0,59}$");
    const vpc::Subnet& subnet = SubnetOf(md.parent_id());
    for (int i = 0; i < spec.network_interfaces_size(); ++i) {
      const auto& nic = spec.network_interfaces(i);
      const std::string field = "spec.network_interfaces[" + std::to_string(i) + "]";
      if (!std::regex_match(nic.name(), nic_name)) {
        return BadRequest("compute", field + ".name", "must match ^[0-9a-z][0-9a-z-]*$ (1-60)");
      }
      if (nic.subnet_id() != subnet.metadata().id()) {
        return BadRequest("compute", field + ".subnet_id",
                          "unknown subnet \"" + nic.subnet_id() + "\" in " + md.parent_id());
      }
      if (!nic.has_ip_address()) {
        return BadRequest("compute", field + ".ip_address", "is required (may be empty)");
      }
      for (const auto& g : nic.security_groups()) {
        auto it = groups_.find(g.id());
        if (it == groups_.end() || it->second.metadata().parent_id() != md.parent_id()) {
          return BadRequest("compute", field + ".security_groups",
                            "unknown security group \"" + g.id() + "\"");
        }
      }
    }
    for (const auto& [id, inst] : instances_) {
      if (inst.proto.metadata().parent_id() == md.parent_id() &&
          inst.proto.metadata().name() == md.name()) {
        return AlreadyExists("compute", id,
                             "instance with name \"" + md.name() + "\" already exists");
      }
    }
    // Boot disk: an existing READY, unattached disk of the project, or a managed one.
    const auto& boot = spec.boot_disk();
    std::string disk_id;
    const ImageDef* image = nullptr;
    if (boot.has_existing_disk()) {
      auto it = disks_.find(boot.existing_disk().id());
      if (it == disks_.end() || it->second.proto.metadata().parent_id() != md.parent_id()) {
        return NotFound("compute", boot.existing_disk().id(), "disk");
      }
      const Disk& d = it->second;
      if (ShownDisk(d).status().state() != compute::DiskStatus::READY) {
        return BadState("compute", d.proto.metadata().id(), "disk is not READY yet");
      }
      if (!d.proto.status().read_write_attachment().empty()) {
        return BadState("compute", d.proto.metadata().id(),
                        "disk is attached to " + d.proto.status().read_write_attachment());
      }
      disk_id = it->first;
      image = FindImageId(d.proto.status().source_image_id());
    } else if (boot.has_managed_disk()) {
      if (boot.managed_disk().name().empty()) {
        return BadRequest("compute", "spec.boot_disk.managed_disk.name", "is required");
      }
      for (const auto& [id, d] : disks_) {
        if (d.proto.metadata().parent_id() == md.parent_id() &&
            d.proto.metadata().name() == boot.managed_disk().name()) {
          return AlreadyExists("compute", id,
                               "disk with name \"" + boot.managed_disk().name() +
                                   "\" already exists");
        }
      }
      if (auto st = CheckDiskSpec(boot.managed_disk().spec(), "spec.boot_disk.managed_disk.spec",
                                  &image);
          !st.ok()) {
        return st;
      }
    } else {
      return BadRequest("compute", "spec.boot_disk", "existing_disk or managed_disk is required");
    }
    // Faults after validation, as a real API checks the request first.
    std::optional<Fault> capacity = faults_.Take("capacity", "POST", call.method);
    std::optional<Fault> quota = faults_.Take("quota", "POST", call.method);
    compute::Instance proto;
    *proto.mutable_metadata() = md;
    *proto.mutable_spec() = spec;
    const bool fails_at_start = capacity && capacity->value == "after_start";
    if (capacity && capacity->value != "operation" && !fails_at_start) {
      return Fail(Code::RESOURCE_EXHAUSTED, "not enough resources (fault capacity)",
                  CapacityError(proto));
    }
    if (quota && quota->value != "operation") {
      return Fail(Code::RESOURCE_EXHAUSTED, "Quota limit exceeded (fault quota)",
                  QuotaError(proto));
    }
    const std::string id = "computeinstance-e00" + NextId();
    auto* m = proto.mutable_metadata();
    m->set_id(id);
    m->set_resource_version(1);
    *m->mutable_created_at() = Timestamp(SysClock::now());
    *m->mutable_updated_at() = m->created_at();
    Instance inst;
    inst.created = Clock::now();
    if (boot.has_managed_disk()) {
      Disk d;
      d.proto.mutable_metadata()->set_id("computedisk-e00" + NextId());
      d.proto.mutable_metadata()->set_parent_id(md.parent_id());
      d.proto.mutable_metadata()->set_name(boot.managed_disk().name());
      *d.proto.mutable_metadata()->mutable_labels() = boot.managed_disk().labels();
      d.proto.mutable_metadata()->set_resource_version(1);
      *d.proto.mutable_metadata()->mutable_created_at() = m->created_at();
      *d.proto.mutable_spec() = boot.managed_disk().spec();
      d.proto.mutable_status()->set_state(compute::DiskStatus::READY);
      if (image) d.proto.mutable_status()->set_source_image_id(image->id);
      d.proto.mutable_status()->set_size_bytes(DiskGib(d.proto.spec()) << 30);
      d.ready_at = Clock::now();
      disk_id = d.proto.metadata().id();
      inst.managed_disk = true;
      disks_[disk_id] = d;
    }
    disks_[disk_id].proto.mutable_status()->set_read_write_attachment(id);
    inst.disk_id = disk_id;
    proto.mutable_spec()->mutable_boot_disk()->set_attach_mode(
        boot.attach_mode() == compute::AttachedDiskSpec::UNSPECIFIED
            ? compute::AttachedDiskSpec::READ_WRITE
            : boot.attach_mode());
    inst.proto = proto;
    Operation& op = NewOperation("compute", md.parent_id(), "Create instance " + md.name(), id,
                                 req, call);
    inst.create_op = op.proto.id();
    if (fails_at_start) {
      // The create operation is done at once; the start fails later (SkyPilot's Nebius
      // provisioner, sky/provision/nebius/utils.py `launch`, watches for exactly this: an
      // instance STOPPED without reconciling after its create, the reason in its newest
      // operation). The failed operation's wording is not from the vendor.
      Finish(inst.create_op);
      inst.start_fail_at = Clock::now() + kFailInOperationAfter;
    } else if (capacity || quota) {
      inst.fail_at = Clock::now() + kFailInOperationAfter;
      inst.fail_kind = capacity ? "capacity" : "quota";
    } else {
      std::optional<Fault> error = faults_.Take("error_during_boot");
      std::optional<Fault> ip_after = faults_.Take("ip_after_boot");
      InstanceSpec b;
      b.cloud = name_;
      b.name = spec.hostname().empty() ? md.name() : spec.hostname();
      b.image = image ? image->family : "";
      b.gpu_type = platform->testvm_gpu;
      b.gpu_count = preset->gpus;
      b.user_data = spec.cloud_init_user_data();
      b.ssh_user = "ubuntu";
      // Every instance of the project is on its subnet (one network per project here).
      b.private_network = spec.network_interfaces().empty()
                              ? std::string()
                              : spec.network_interfaces(0).subnet_id();
      b.faults = faults_.TakeBootFaults();
      if (error) {
        b.faults.error = true;
        inst.error_state = error->value == "error";
      }
      if (ip_after) inst.ip_after_seconds = ip_after->seconds;
      inst.proto = proto;
      b.reachable = ReachableOf(inst);
      try {
        inst.backend_id = backend_->Create(b);
      } catch (const BackendError& e) {
        const std::string op_id = op.proto.id();
        operations_.erase(op_id);
        ReleaseDisk(inst);
        return grpc::Status(Code::UNAVAILABLE, std::string("emulator backend: ") + e.what());
      }
    }
    *resp = op.proto;
    instances_[id] = std::move(inst);
    return grpc::Status::OK;
  }

  Instance* FindInstance(const std::string& id) {
    auto it = instances_.find(id);
    return it == instances_.end() ? nullptr : &it->second;
  }

  grpc::Status GetInstance(const compute::GetInstanceRequest& req, compute::Instance* resp,
                           const Call&) {
    Instance* inst = FindInstance(req.id());
    if (!inst) return NotFound("compute", req.id(), "instance");
    *resp = Shown(*inst);
    return grpc::Status::OK;
  }

  grpc::Status GetInstanceByName(const nc::GetByNameRequest& req, compute::Instance* resp,
                                 const Call&) {
    if (auto st = CheckProject("compute", "parent_id", req.parent_id()); !st.ok()) return st;
    for (auto& [id, inst] : instances_) {
      if (inst.proto.metadata().parent_id() == req.parent_id() &&
          inst.proto.metadata().name() == req.name()) {
        *resp = Shown(inst);
        return grpc::Status::OK;
      }
    }
    return NotFound("compute", req.parent_id() + "/" + req.name(), "instance");
  }

  grpc::Status ListInstances(const compute::ListInstancesRequest& req,
                             compute::ListInstancesResponse* resp, const Call&) {
    if (auto st = CheckProject("compute", "parent_id", req.parent_id()); !st.ok()) return st;
    std::vector<Instance*> items;
    for (auto& [id, inst] : instances_) {
      if (inst.proto.metadata().parent_id() == req.parent_id()) items.push_back(&inst);
    }
    auto page = PageOf(items.size(), req.page_size(), req.page_token());
    if (!page) return BadPage("compute");
    for (size_t i = page->start; i < page->end; ++i) *resp->add_items() = Shown(*items[i]);
    resp->set_next_page_token(page->next);
    return grpc::Status::OK;
  }

  // The unfinished operation on an instance, if any.
  const Operation* Busy(const Instance& inst) {
    for (const std::string& id : {inst.create_op, inst.delete_op}) {
      auto it = operations_.find(id);
      if (it != operations_.end() && !it->second.proto.has_status()) return &it->second;
    }
    return nullptr;
  }

  grpc::Status DeleteInstance(const compute::DeleteInstanceRequest& req, nc::Operation* resp,
                              const Call& call) {
    if (const Operation* op = Replayed(call)) {
      *resp = op->proto;
      return grpc::Status::OK;
    }
    Instance* inst = FindInstance(req.id());
    if (!inst) return NotFound("compute", req.id(), "instance");
    if (const Operation* busy = Busy(*inst)) {
      if (inst->deleting_since || delete_conflicts_) {
        nc::ServiceError e =
            ServiceErrorOf("compute", "OperationConflict", nc::ServiceError::CALL);
        e.mutable_operation_conflict()->set_conflicting_operation_id(busy->proto.id());
        e.mutable_operation_conflict()->set_resource_id(req.id());
        return Fail(Code::ABORTED,
                    "operation " + busy->proto.id() + " is in progress on " + req.id(), e);
      }
    }
    Operation& op = NewOperation("compute", inst->proto.metadata().parent_id(),
                                 "Delete instance " + inst->proto.metadata().name(), req.id(),
                                 req, call);
    // A create still running is aborted by the delete (plugins/nebius/REFERENCE.md §3).
    if (auto it = operations_.find(inst->create_op);
        it != operations_.end() && !it->second.proto.has_status()) {
      nc::ServiceError e = ServiceErrorOf("compute", "OperationAborted", nc::ServiceError::NOTHING);
      e.mutable_operation_aborted()->set_operation_id(inst->create_op);
      e.mutable_operation_aborted()->set_aborted_by_operation_id(op.proto.id());
      e.mutable_operation_aborted()->set_resource_id(req.id());
      Finish(inst->create_op, Code::ABORTED, "aborted by " + op.proto.id(), e);
    }
    inst->delete_op = op.proto.id();
    inst->deleting_since = Clock::now();
    inst->fail_at.reset();
    if (!inst->backend_id.empty()) backend_->Delete(inst->backend_id);
    *resp = op.proto;
    return grpc::Status::OK;
  }

  grpc::Status StartInstance(const compute::StartInstanceRequest& req, nc::Operation*,
                             const Call&) {
    if (!FindInstance(req.id())) return NotFound("compute", req.id(), "instance");
    return grpc::Status(Code::UNIMPLEMENTED, "Start is not emulated");
  }

  grpc::Status StopInstance(const compute::StopInstanceRequest& req, nc::Operation*,
                            const Call&) {
    if (!FindInstance(req.id())) return NotFound("compute", req.id(), "instance");
    return grpc::Status(Code::UNIMPLEMENTED, "Stop is not emulated");
  }

  grpc::Status ListInstanceOperations(const compute::ListOperationsByParentRequest& req,
                                      nc::ListOperationsResponse* resp, const Call&) {
    if (auto st = CheckProject("compute", "parent_id", req.parent_id()); !st.ok()) return st;
    std::vector<const Operation*> ops;
    for (const auto& [id, op] : operations_) {
      if (op.family == "compute" && op.project == req.parent_id() &&
          op.proto.resource_id().rfind("computeinstance-", 0) == 0) {
        ops.push_back(&op);
      }
    }
    // Newest first: SkyPilot takes the first operation of an instance as its most recent
    // (sky/provision/nebius/utils.py `launch`). Ids grow with time, so by id, descending.
    std::sort(ops.begin(), ops.end(), [](const Operation* a, const Operation* b) {
      return a->proto.id() > b->proto.id();
    });
    auto page = PageOf(ops.size(), req.page_size(), req.page_token());
    if (!page) return BadPage("compute");
    for (size_t i = page->start; i < page->end; ++i) *resp->add_operations() = ops[i]->proto;
    resp->set_next_page_token(page->next);
    return grpc::Status::OK;
  }

  // --- disks (plugins/nebius/REFERENCE.md §3.1) ---
  static int64_t DiskGib(const compute::DiskSpec& s) {
    switch (s.size_case()) {
      case compute::DiskSpec::kSizeBytes:
        return s.size_bytes() >> 30;
      case compute::DiskSpec::kSizeKibibytes:
        return s.size_kibibytes() >> 20;
      case compute::DiskSpec::kSizeMebibytes:
        return s.size_mebibytes() >> 10;
      case compute::DiskSpec::kSizeGibibytes:
        return s.size_gibibytes();
      default:
        return 0;
    }
  }

  grpc::Status CheckDiskSpec(const compute::DiskSpec& s, const std::string& field,
                             const ImageDef** image) {
    const int64_t gib = DiskGib(s);
    if (gib <= 0) return BadRequest("compute", field + ".size", "a positive size is required");
    if (s.type() == compute::DiskSpec::UNSPECIFIED) {
      return BadRequest("compute", field + ".type", "is required (e.g. NETWORK_SSD)");
    }
    *image = nullptr;
    if (s.has_source_image_family()) {
      const std::string& family = s.source_image_family().image_family();
      *image = FindImageFamily(family);
      if (!*image || !s.source_image_family().parent_id().empty()) {
        return NotFound("compute", family, "image family");
      }
    } else if (!s.source_image_id().empty()) {
      *image = FindImageId(s.source_image_id());
      if (!*image) return NotFound("compute", s.source_image_id(), "image");
    }
    if (*image && gib < (*image)->min_disk_gib) {
      return BadRequest("compute", field + ".size",
                        "image " + std::string((*image)->family) + " needs at least " +
                            std::to_string((*image)->min_disk_gib) + " GiB");
    }
    return grpc::Status::OK;
  }

  compute::Disk ShownDisk(const Disk& d) {
    compute::Disk out = d.proto;
    auto* s = out.mutable_status();
    if (d.deleting_until) {
      s->set_state(compute::DiskStatus::DELETING);
      s->set_reconciling(true);
    } else if (Clock::now() < d.ready_at) {
      s->set_state(compute::DiskStatus::CREATING);
      s->set_reconciling(true);
    } else {
      s->set_state(compute::DiskStatus::READY);
    }
    return out;
  }

  grpc::Status CreateDisk(const compute::CreateDiskRequest& req, nc::Operation* resp,
                          const Call& call) {
    if (const Operation* op = Replayed(call)) {
      *resp = op->proto;
      return grpc::Status::OK;
    }
    const auto& md = req.metadata();
    if (auto st = CheckProject("compute", "metadata.parent_id", md.parent_id()); !st.ok()) {
      return st;
    }
    if (auto st = CheckName("compute", md.name()); !st.ok()) return st;
    for (const auto& [id, d] : disks_) {
      if (d.proto.metadata().parent_id() == md.parent_id() &&
          d.proto.metadata().name() == md.name()) {
        return AlreadyExists("compute", id, "disk with name \"" + md.name() + "\" already exists");
      }
    }
    const ImageDef* image = nullptr;
    if (auto st = CheckDiskSpec(req.spec(), "spec", &image); !st.ok()) return st;
    Disk d;
    const std::string id = "computedisk-e00" + NextId();
    *d.proto.mutable_metadata() = md;
    d.proto.mutable_metadata()->set_id(id);
    d.proto.mutable_metadata()->set_resource_version(1);
    *d.proto.mutable_metadata()->mutable_created_at() = Timestamp(SysClock::now());
    *d.proto.mutable_spec() = req.spec();
    d.proto.mutable_status()->set_state(compute::DiskStatus::CREATING);
    if (image) d.proto.mutable_status()->set_source_image_id(image->id);
    d.proto.mutable_status()->set_size_bytes(DiskGib(req.spec()) << 30);
    d.ready_at = Clock::now() + disk_phase_;
    Operation& op = NewOperation("compute", md.parent_id(), "Create disk " + md.name(), id, req,
                                 call);
    op.done_at = d.ready_at;
    d.create_op = op.proto.id();
    disks_[id] = d;
    *resp = op.proto;
    return grpc::Status::OK;
  }

  grpc::Status GetDisk(const compute::GetDiskRequest& req, compute::Disk* resp, const Call&) {
    auto it = disks_.find(req.id());
    if (it == disks_.end()) return NotFound("compute", req.id(), "disk");
    *resp = ShownDisk(it->second);
    return grpc::Status::OK;
  }

  grpc::Status GetDiskByName(const nc::GetByNameRequest& req, compute::Disk* resp,
                             const Call&) {
    if (auto st = CheckProject("compute", "parent_id", req.parent_id()); !st.ok()) return st;
    for (const auto& [id, d] : disks_) {
      if (d.proto.metadata().parent_id() == req.parent_id() &&
          d.proto.metadata().name() == req.name()) {
        *resp = ShownDisk(d);
        return grpc::Status::OK;
      }
    }
    return NotFound("compute", req.parent_id() + "/" + req.name(), "disk");
  }

  grpc::Status ListDisks(const compute::ListDisksRequest& req, compute::ListDisksResponse* resp,
                         const Call&) {
    if (auto st = CheckProject("compute", "parent_id", req.parent_id()); !st.ok()) return st;
    std::vector<const Disk*> items;
    for (const auto& [id, d] : disks_) {
      if (d.proto.metadata().parent_id() == req.parent_id()) items.push_back(&d);
    }
    auto page = PageOf(items.size(), req.page_size(), req.page_token());
    if (!page) return BadPage("compute");
    for (size_t i = page->start; i < page->end; ++i) *resp->add_items() = ShownDisk(*items[i]);
    resp->set_next_page_token(page->next);
    return grpc::Status::OK;
  }

  grpc::Status DeleteDisk(const compute::DeleteDiskRequest& req, nc::Operation* resp,
                          const Call& call) {
    if (const Operation* op = Replayed(call)) {
      *resp = op->proto;
      return grpc::Status::OK;
    }
    auto it = disks_.find(req.id());
    if (it == disks_.end()) return NotFound("compute", req.id(), "disk");
    Disk& d = it->second;
    if (!d.proto.status().read_write_attachment().empty()) {
      return BadState("compute", req.id(),
                      "disk is attached to " + d.proto.status().read_write_attachment());
    }
    if (d.deleting_until) {
      *resp = operations_.at(d.delete_op).proto;
      return grpc::Status::OK;
    }
    Operation& op = NewOperation("compute", d.proto.metadata().parent_id(),
                                 "Delete disk " + d.proto.metadata().name(), req.id(), req, call);
    d.deleting_until = Clock::now() + disk_phase_;
    op.done_at = d.deleting_until;
    d.delete_op = op.proto.id();
    Finish(d.create_op, Code::ABORTED, "aborted by " + op.proto.id());
    *resp = op.proto;
    return grpc::Status::OK;
  }

  // --- platforms (plugins/nebius/REFERENCE.md §7) ---
  static compute::Platform PlatformProto(const PlatformDef& p, const std::string& project) {
    compute::Platform out;
    out.mutable_metadata()->set_id(std::string("computeplatform-e00") + p.name);
    out.mutable_metadata()->set_parent_id(project);
    out.mutable_metadata()->set_name(p.name);
    out.mutable_metadata()->set_resource_version(1);
    for (const auto& preset : p.presets) {
      auto* x = out.mutable_spec()->add_presets();
      x->set_name(preset.name);
      x->mutable_resources()->set_vcpu_count(preset.vcpus);
      x->mutable_resources()->set_memory_gibibytes(preset.memory_gib);
      x->mutable_resources()->set_gpu_count(preset.gpus);
      x->set_allow_gpu_clustering(preset.gpus == 8);
    }
    out.mutable_spec()->set_human_readable_name(p.human);
    out.mutable_spec()->set_gpu_memory_gigabytes(p.gpu_memory_gb);
    out.mutable_status()->set_allowed_for_preemptibles(AllowedForPreemptibles(p));
    return out;
  }

  grpc::Status GetPlatformByName(const nc::GetByNameRequest& req, compute::Platform* resp,
                                 const Call&) {
    if (auto st = CheckProject("compute", "parent_id", req.parent_id()); !st.ok()) return st;
    const PlatformDef* p = FindPlatform(req.name());
    if (!p) return NotFound("compute", req.name(), "platform");
    *resp = PlatformProto(*p, req.parent_id());
    return grpc::Status::OK;
  }

  grpc::Status ListPlatforms(const compute::ListPlatformsRequest& req,
                             compute::ListPlatformsResponse* resp, const Call&) {
    if (auto st = CheckProject("compute", "parent_id", req.parent_id()); !st.ok()) return st;
    auto page = PageOf(Platforms().size(), req.page_size(), req.page_token());
    if (!page) return BadPage("compute");
    for (size_t i = page->start; i < page->end; ++i) {
      *resp->add_items() = PlatformProto(Platforms()[i], req.parent_id());
    }
    resp->set_next_page_token(page->next);
    return grpc::Status::OK;
  }

  // --- subnets (plugins/nebius/REFERENCE.md, emulator notes 2) ---
  grpc::Status GetSubnet(const vpc::GetSubnetRequest& req, vpc::Subnet* resp, const Call&) {
    for (const auto& project : projects_) {
      const vpc::Subnet& s = SubnetOf(project);
      if (s.metadata().id() == req.id()) {
        *resp = s;
        return grpc::Status::OK;
      }
    }
    return NotFound("vpc", req.id(), "subnet");
  }

  grpc::Status ListSubnets(const vpc::ListSubnetsRequest& req, vpc::ListSubnetsResponse* resp,
                           const Call&) {
    if (auto st = CheckProject("vpc", "parent_id", req.parent_id()); !st.ok()) return st;
    if (!PageOf(1, req.page_size(), req.page_token())) return BadPage("vpc");
    if (req.page_token().empty() || req.page_token() == "0") {
      *resp->add_items() = SubnetOf(req.parent_id());
    }
    return grpc::Status::OK;
  }

  // --- security groups and rules (plugins/nebius/REFERENCE.md §5) ---
  grpc::Status CreateGroup(const vpc::CreateSecurityGroupRequest& req, nc::Operation* resp,
                           const Call& call) {
    if (const Operation* op = Replayed(call)) {
      *resp = op->proto;
      return grpc::Status::OK;
    }
    const auto& md = req.metadata();
    if (auto st = CheckProject("vpc", "metadata.parent_id", md.parent_id()); !st.ok()) return st;
    if (auto st = CheckName("vpc", md.name()); !st.ok()) return st;
    if (md.name().size() < 2) return BadRequest("vpc", "metadata.name", "2-255 characters");
    const vpc::Subnet& subnet = SubnetOf(md.parent_id());
    if (req.spec().network_id() != subnet.spec().network_id()) {
      return BadRequest("vpc", "spec.network_id",
                        "unknown network \"" + req.spec().network_id() + "\" (the project's is " +
                            subnet.spec().network_id() + ", the subnet's spec.network_id)");
    }
    for (const auto& [id, g] : groups_) {
      if (g.metadata().parent_id() == md.parent_id() && g.metadata().name() == md.name()) {
        return AlreadyExists("vpc", id,
                             "security group with name \"" + md.name() + "\" already exists");
      }
    }
    vpc::SecurityGroup g;
    const std::string id = "vpcsecuritygroup-e00" + NextId();
    *g.mutable_metadata() = md;
    g.mutable_metadata()->set_id(id);
    g.mutable_metadata()->set_resource_version(1);
    *g.mutable_metadata()->mutable_created_at() = Timestamp(SysClock::now());
    *g.mutable_spec() = req.spec();
    g.mutable_status()->set_state(vpc::SecurityGroupStatus::READY);
    groups_[id] = g;
    Operation& op = NewOperation("vpc", md.parent_id(), "Create security group " + md.name(), id,
                                 req, call);
    op.done_at = Clock::now() + vpc_phase_;
    *resp = op.proto;
    return grpc::Status::OK;
  }

  grpc::Status GetGroup(const vpc::GetSecurityGroupRequest& req, vpc::SecurityGroup* resp,
                        const Call&) {
    auto it = groups_.find(req.id());
    if (it == groups_.end()) return NotFound("vpc", req.id(), "security group");
    *resp = it->second;
    return grpc::Status::OK;
  }

  grpc::Status GetGroupByName(const vpc::GetSecurityGroupByNameRequest& req,
                              vpc::SecurityGroup* resp, const Call&) {
    if (auto st = CheckProject("vpc", "parent_id", req.parent_id()); !st.ok()) return st;
    SubnetOf(req.parent_id());
    for (const auto& [id, g] : groups_) {
      if (g.metadata().parent_id() == req.parent_id() && g.metadata().name() == req.name()) {
        *resp = g;
        return grpc::Status::OK;
      }
    }
    return NotFound("vpc", req.parent_id() + "/" + req.name(), "security group");
  }

  grpc::Status ListGroups(const vpc::ListSecurityGroupsRequest& req,
                          vpc::ListSecurityGroupsResponse* resp, const Call&) {
    if (auto st = CheckProject("vpc", "parent_id", req.parent_id()); !st.ok()) return st;
    SubnetOf(req.parent_id());
    std::vector<const vpc::SecurityGroup*> items;
    for (const auto& [id, g] : groups_) {
      if (g.metadata().parent_id() == req.parent_id()) items.push_back(&g);
    }
    auto page = PageOf(items.size(), req.page_size(), req.page_token());
    if (!page) return BadPage("vpc");
    for (size_t i = page->start; i < page->end; ++i) *resp->add_items() = *items[i];
    resp->set_next_page_token(page->next);
    return grpc::Status::OK;
  }

  grpc::Status DeleteGroup(const vpc::DeleteSecurityGroupRequest& req, nc::Operation* resp,
                           const Call& call) {
    if (const Operation* op = Replayed(call)) {
      *resp = op->proto;
      return grpc::Status::OK;
    }
    auto it = groups_.find(req.id());
    if (it == groups_.end()) return NotFound("vpc", req.id(), "security group");
    if (it->second.status().default_()) {
      return BadState("vpc", req.id(), "the network's default security group cannot be deleted");
    }
    for (const auto& [id, inst] : instances_) {
      for (const auto& g : GroupsOf(inst)) {
        if (g == req.id()) {
          // UNCONFIRMED: the reference does not say what deleting a group in use does.
          return BadState("vpc", req.id(), "security group is used by instance " + id);
        }
      }
    }
    Operation& op = NewOperation("vpc", it->second.metadata().parent_id(),
                                 "Delete security group " + it->second.metadata().name(),
                                 req.id(), req, call);
    op.done_at = Clock::now() + vpc_phase_;
    for (auto r = rules_.begin(); r != rules_.end();) {
      r = r->second.metadata().parent_id() == req.id() ? rules_.erase(r) : std::next(r);
    }
    groups_.erase(it);
    *resp = op.proto;
    return grpc::Status::OK;
  }

  grpc::Status CreateRule(const vpc::CreateSecurityRuleRequest& req, nc::Operation* resp,
                          const Call& call) {
    if (const Operation* op = Replayed(call)) {
      *resp = op->proto;
      return grpc::Status::OK;
    }
    const auto& md = req.metadata();
    const auto& s = req.spec();
    auto group = groups_.find(md.parent_id());
    if (md.parent_id().empty()) {
      return BadRequest("vpc", "metadata.parent_id", "is required (the security group id)");
    }
    if (group == groups_.end()) return NotFound("vpc", md.parent_id(), "security group");
    if (!md.name().empty()) {
      if (auto st = CheckName("vpc", md.name()); !st.ok()) return st;
    }
    if (s.access() == vpc::ACCESS_UNSPECIFIED) {
      return BadRequest("vpc", "spec.access", "ALLOW or DENY is required");
    }
    if (s.protocol() == vpc::PROTOCOL_UNSPECIFIED) {
      return BadRequest("vpc", "spec.protocol", "ANY, TCP, UDP or ICMP is required");
    }
    if (s.priority() < 0 || s.priority() > 1000) {
      return BadRequest("vpc", "spec.priority", "must be 0-1000");
    }
    if (!s.has_ingress() && !s.has_egress()) {
      return BadRequest("vpc", "spec.match", "ingress or egress is required");
    }
    const int cidrs = s.has_ingress() ? s.ingress().source_cidrs_size()
                                      : s.egress().destination_cidrs_size();
    const auto& ports = s.has_ingress() ? s.ingress().destination_ports()
                                        : s.egress().destination_ports();
    const std::string side = s.has_ingress() ? "spec.ingress" : "spec.egress";
    if (cidrs > kMaxRuleCidrs) return BadRequest("vpc", side + ".cidrs", "at most 8 CIDRs");
    if (ports.size() > kMaxRulePorts) {
      return BadRequest("vpc", side + ".destination_ports", "at most 8 ports");
    }
    for (int p : ports) {
      if (p < 1 || p > 65535) {
        return BadRequest("vpc", side + ".destination_ports", "ports are 1-65535");
      }
    }
    if (!ports.empty() && (s.protocol() == vpc::ICMP || s.protocol() == vpc::ANY)) {
      return BadRequest("vpc", side + ".destination_ports",
                        "ports need protocol TCP or UDP (rule not from the reference)");
    }
    // A referenced group (the source of an ingress rule, the destination of an egress one)
    // must exist in the same network as the rule's group.
    const std::string& ref = s.has_ingress() ? s.ingress().source_security_group_id()
                                             : s.egress().destination_security_group_id();
    if (!ref.empty()) {
      const std::string field = s.has_ingress() ? "spec.ingress.source_security_group_id"
                                                : "spec.egress.destination_security_group_id";
      auto other = groups_.find(ref);
      if (other == groups_.end()) return NotFound("vpc", ref, "security group");
      if (other->second.spec().network_id() != group->second.spec().network_id()) {
        return BadRequest("vpc", field,
                          "security group " + ref + " is in network " +
                              other->second.spec().network_id() + ", the rule's group in " +
                              group->second.spec().network_id());
      }
    }
    const auto& list =
        s.has_ingress() ? s.ingress().source_cidrs() : s.egress().destination_cidrs();
    static const std::regex cidr_re(R"(^(\d{1,3}\.){3}\d{1,3}/\d{1,2}$)");
    for (const auto& c : list) {
      if (!std::regex_match(c, cidr_re)) {
        return BadRequest("vpc", side + ".cidrs", "\"" + c + "\" is not an IPv4 CIDR");
      }
    }
    vpc::SecurityRule r;
    const std::string id = "vpcsecurityrule-e00" + NextId();
    *r.mutable_metadata() = md;
    r.mutable_metadata()->set_id(id);
    r.mutable_metadata()->set_resource_version(1);
    *r.mutable_metadata()->mutable_created_at() = Timestamp(SysClock::now());
    *r.mutable_spec() = s;
    if (r.spec().type() == vpc::RULE_TYPE_UNSPECIFIED) r.mutable_spec()->set_type(vpc::STATEFUL);
    r.mutable_status()->set_state(vpc::SecurityRuleStatus::READY);
    r.mutable_status()->set_effective_priority(s.priority());
    r.mutable_status()->set_direction(s.has_ingress() ? vpc::INGRESS : vpc::EGRESS);
    rules_[id] = r;
    Operation& op = NewOperation("vpc", group->second.metadata().parent_id(),
                                 "Create security rule " + md.name(), id, req, call);
    op.done_at = Clock::now() + vpc_phase_;
    ApplyRules();
    *resp = op.proto;
    return grpc::Status::OK;
  }

  grpc::Status GetRule(const vpc::GetSecurityRuleRequest& req, vpc::SecurityRule* resp,
                       const Call&) {
    auto it = rules_.find(req.id());
    if (it == rules_.end()) return NotFound("vpc", req.id(), "security rule");
    *resp = it->second;
    return grpc::Status::OK;
  }

  grpc::Status ListRules(const vpc::ListSecurityRulesRequest& req,
                         vpc::ListSecurityRulesResponse* resp, const Call&) {
    if (!groups_.count(req.parent_id())) return NotFound("vpc", req.parent_id(), "security group");
    std::vector<const vpc::SecurityRule*> items;
    for (const auto& [id, r] : rules_) {
      if (r.metadata().parent_id() == req.parent_id()) items.push_back(&r);
    }
    auto page = PageOf(items.size(), req.page_size(), req.page_token());
    if (!page) return BadPage("vpc");
    for (size_t i = page->start; i < page->end; ++i) *resp->add_items() = *items[i];
    resp->set_next_page_token(page->next);
    return grpc::Status::OK;
  }

  grpc::Status DeleteRule(const vpc::DeleteSecurityRuleRequest& req, nc::Operation* resp,
                          const Call& call) {
    if (const Operation* op = Replayed(call)) {
      *resp = op->proto;
      return grpc::Status::OK;
    }
    auto it = rules_.find(req.id());
    if (it == rules_.end()) return NotFound("vpc", req.id(), "security rule");
    const std::string project = groups_.count(it->second.metadata().parent_id())
                                    ? groups_.at(it->second.metadata().parent_id())
                                          .metadata()
                                          .parent_id()
                                    : "";
    Operation& op = NewOperation("vpc", project, "Delete security rule " + req.id(), req.id(),
                                 req, call);
    op.done_at = Clock::now() + vpc_phase_;
    rules_.erase(it);
    ApplyRules();
    *resp = op.proto;
    return grpc::Status::OK;
  }

  // --- time ---
  // Advances every record: operations that finish by time, instances with the backend.
  void Reconcile() {
    const auto now = Clock::now();
    for (auto it = instances_.begin(); it != instances_.end();) {
      Instance& inst = it->second;
      if (inst.deleting_since) {
        if (now - *inst.deleting_since >= deleting_phase_) {
          Finish(inst.delete_op);
          ReleaseDisk(inst);
          it = instances_.erase(it);
        } else {
          ++it;
        }
        continue;
      }
      if (inst.fail_at) {
        if (now >= *inst.fail_at) {
          if (inst.fail_kind == "capacity") {
            Finish(inst.create_op, Code::RESOURCE_EXHAUSTED,
                   "not enough resources (fault capacity)", CapacityError(inst.proto));
          } else {
            Finish(inst.create_op, Code::RESOURCE_EXHAUSTED,
                   "Quota limit exceeded (fault quota)", QuotaError(inst.proto));
          }
          ReleaseDisk(inst);
          it = instances_.erase(it);
        } else {
          ++it;
        }
        continue;
      }
      if (inst.start_fail_at) {
        if (!inst.start_failed && now >= *inst.start_fail_at) {
          inst.start_failed = true;
          compute::StartInstanceRequest start;
          start.set_id(inst.proto.metadata().id());
          Operation& op = NewOperation("compute", inst.proto.metadata().parent_id(),
                                       "Start instance " + inst.proto.metadata().name(),
                                       inst.proto.metadata().id(), start,
                                       Call{"/nebius.compute.v1.InstanceService/Start", "",
                                            kEmulatorAccount});
          Finish(op.proto.id(), Code::RESOURCE_EXHAUSTED,
                 "not enough resources to start the instance (fault capacity after_start)",
                 CapacityError(inst.proto));
        }
        ++it;
        continue;
      }
      if (inst.preempted) {
        ++it;
        continue;
      }
      const InstanceStatus b = backend_->State(inst.backend_id);
      if (b.state == InstanceState::kGone && b.preempted && inst.proto.spec().has_preemptible()) {
        // Taken back (POST /preempt): the instance stays, stopped; a create still running has
        // made it, so its operation succeeds. (A regular instance is lost instead, below.)
        Finish(inst.create_op);
        backend_->Delete(inst.backend_id);
        inst.backend_id.clear();
        inst.preempted = true;
        ++it;
        continue;
      }
      if (b.state == InstanceState::kGone) {
        // The machine vanished: NOT_FOUND from now on; an unfinished create fails.
        nc::ServiceError e = ServiceErrorOf("compute", "InternalError", nc::ServiceError::NOTHING);
        e.mutable_internal_error()->set_request_id(RandomUuid());
        Finish(inst.create_op, Code::INTERNAL,
               "the instance was lost while starting (" + b.message + ")", e);
        backend_->Delete(inst.backend_id);
        ReleaseDisk(inst);
        it = instances_.erase(it);
        continue;
      }
      if (b.state == InstanceState::kError) {
        nc::ServiceError e = ServiceErrorOf("compute", "InternalError", nc::ServiceError::NOTHING);
        e.mutable_internal_error()->set_request_id(RandomUuid());
        Finish(inst.create_op, Code::INTERNAL,
               "the instance failed to start (" + b.message + ")", e);
      } else if (b.state == InstanceState::kRunning && now - inst.created >= stopped_phase_) {
        Finish(inst.create_op);
      }
      ++it;
    }
    for (auto it = disks_.begin(); it != disks_.end();) {
      if (it->second.deleting_until && now >= *it->second.deleting_until) {
        Finish(it->second.delete_op);
        it = disks_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& [id, op] : operations_) {
      if (op.done_at && now >= *op.done_at) Finish(id);
    }
    for (auto it = tokens_.begin(); it != tokens_.end();) {
      it = now >= it->second.expires ? tokens_.erase(it) : std::next(it);
    }
    ApplyPrivateIngress();
  }

  // --- the emulator's own service account (kNebiusCredentialsEnv) ---
  void AddKey(const std::string& kid, const std::string& account,
              std::shared_ptr<Poco::Crypto::RSAKey> key) {
    keys_[kid] = Key{account, std::move(key)};
  }

  void LoadCredentials(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    JsonObject sc = GetObject(ParseObject(text.str()), "subject-credentials");
    const std::string pem = GetString(sc, "private-key").value_or("");
    const std::string kid = GetString(sc, "kid").value_or("");
    const std::string iss = GetString(sc, "iss").value_or("");
    if (!sc || pem.empty() || kid.empty() || iss.empty()) {
      throw std::runtime_error(std::string("nebius: ") + path + " (" + kNebiusCredentialsEnv +
                               ") is not a credentials file {\"subject-credentials\": {alg, "
                               "private-key, kid, iss, sub}}; name a missing file to have the "
                               "emulator write one");
    }
    std::istringstream pem_in(pem);
    try {
      AddKey(kid, iss, std::make_shared<Poco::Crypto::RSAKey>(nullptr, &pem_in));
    } catch (const Poco::Exception&) {
      throw std::runtime_error(std::string("nebius: the private-key in ") + path +
                               " is not an RSA key");
    }
  }

  void WriteCredentials(const std::string& path) {
    auto key = std::make_shared<Poco::Crypto::RSAKey>(Poco::Crypto::RSAKey::KL_2048,
                                                      Poco::Crypto::RSAKey::EXP_LARGE);
    Poco::Crypto::EVPPKey evp(key.get());
    std::ostringstream pub, priv;
    evp.save(&pub, &priv);  // PKCS#8 "BEGIN PRIVATE KEY", as the reference's file has
    const std::string kid = "publickey-e00" + RandomHex(8);
    const std::string account = "serviceaccount-e00" + RandomHex(8);
    JsonObject sc = NewObject();
    sc->set("alg", std::string("RS256"));
    sc->set("private-key", priv.str());
    sc->set("kid", kid);
    sc->set("iss", account);
    sc->set("sub", account);
    JsonObject file = NewObject();
    file->set("subject-credentials", sc);
    const std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      chmod(tmp.c_str(), 0600);
      out << ToJson(file) << "\n";
      if (!out) throw std::runtime_error("nebius: cannot write the credentials file " + tmp);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      throw std::runtime_error("nebius: cannot write the credentials file " + path);
    }
    AddKey(kid, account, key);
  }

  struct Issued {
    std::string account;
    Clock::time_point expires;
  };

  std::mutex mu_;  // every record below; taken by handlers after the checks
  std::map<std::string, Handler> methods_;
  std::unique_ptr<Generic> generic_;
  std::unique_ptr<grpc::Server> server_;
  NebiusCallLog log_;
  std::string endpoint_;  // the endpoint of the call being handled ("" = any)
  std::set<std::string> projects_;
  std::map<std::string, Key> keys_;  // kid -> service account and public key
  std::map<std::string, Issued> tokens_;
  std::chrono::seconds token_lifetime_{3600};
  milliseconds stopped_phase_{300};
  milliseconds deleting_phase_{1000};
  milliseconds disk_phase_{500};
  milliseconds vpc_phase_{200};
  bool delete_conflicts_ = false;
  std::map<std::string, Instance> instances_;
  std::map<std::string, Disk> disks_;
  std::map<std::string, vpc::Subnet> subnets_;  // project -> its default subnet
  std::map<std::string, vpc::SecurityGroup> groups_;
  std::map<std::string, vpc::SecurityRule> rules_;
  // What each instance's private address was last told (ApplyPrivateIngress).
  std::map<std::string, PrivateIngress> told_ingress_;
  std::map<std::string, Operation> operations_;
  std::map<std::string, std::string> idempotency_;  // method + key -> operation id
  uint64_t next_id_ = 0;
};

void UnaryReactor::OnReadDone(bool ok) {
  if (!ok) {
    Finish(grpc::Status(Code::INTERNAL, "no request message"));
    return;
  }
  std::string out;
  grpc::Status st = api_->Handle(ctx_, request_, &out);
  if (!st.ok()) {
    Finish(st);
    return;
  }
  grpc::Slice slice(out);
  response_ = grpc::ByteBuffer(&slice, 1);
  StartWriteAndFinish(&response_, grpc::WriteOptions(), st);
}

}  // namespace

std::unique_ptr<CloudApi> MakeNebiusApi(InstanceBackend* backend, CloudOptions options) {
  return std::make_unique<NebiusApi>(backend, std::move(options));
}

int NebiusStartServer(CloudApi* api, const std::string& host, int port, NebiusCallLog log) {
  auto* n = dynamic_cast<NebiusApi*>(api);
  if (!n) throw std::runtime_error("NebiusStartServer: not the nebius API");
  return n->Start(host, port, std::move(log));
}

void NebiusStopServer(CloudApi* api) {
  if (auto* n = dynamic_cast<NebiusApi*>(api)) n->Stop();
}

int NebiusHttpEquivalent(int grpc_code) {
  switch (static_cast<Code>(grpc_code)) {
    case Code::OK:
      return 200;
    case Code::INVALID_ARGUMENT:
    case Code::FAILED_PRECONDITION:
    case Code::OUT_OF_RANGE:
      return 400;
    case Code::UNAUTHENTICATED:
      return 401;
    case Code::PERMISSION_DENIED:
      return 403;
    case Code::NOT_FOUND:
      return 404;
    case Code::ALREADY_EXISTS:
    case Code::ABORTED:
      return 409;
    case Code::RESOURCE_EXHAUSTED:
      return 429;
    case Code::CANCELLED:
      return 499;
    case Code::UNIMPLEMENTED:
      return 501;
    case Code::UNAVAILABLE:
      return 503;
    case Code::DEADLINE_EXCEEDED:
      return 504;
    default:
      return 500;
  }
}

}  // namespace gpuprov::emulator
