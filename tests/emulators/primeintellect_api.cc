// SPDX-License-Identifier: Apache-2.0
//
// Prime Intellect pods API (/api/v1: availability, pods, pod status, SSH keys)
// as described in plugins/primeintellect/REFERENCE.md. FastAPI-style errors
// ({"detail": ...}); trailing slash optional on every path.
#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "cloud_api.h"

namespace gpuprov::emulator {
namespace {

using Clock = std::chrono::steady_clock;
using SysClock = std::chrono::system_clock;

// After the machine runs: PENDING for this long, then ACTIVE with the
// installation still going and sshConnection null, then FINISHED.
constexpr std::chrono::milliseconds kPendingTime{500};
constexpr std::chrono::milliseconds kInstallTime{1500};
// A deleted pod shows DELETING this long, then is gone (404).
constexpr std::chrono::milliseconds kDeletingTime{1000};

struct Offer {
  const char* cloud_id;
  const char* gpu_type;
  const char* socket;
  const char* provider;
  const char* region;
  const char* data_center;
  const char* country;
  int gpu_count;
  int gpu_memory;
  double price;
  int vcpus;
  int memory_gb;
  const char* security;
  const char* ssh_user;  // what sshConnection names for this provider
  // A container provider (RunPod, plugins/primeintellect/REFERENCE.md): the docker backend gives it
  // a container with sshd as PID 1, no systemd. Every pod gets SSH on a remapped port.
  bool container;
  // A spot offer: the availability item's isSpot (the prime CLI's GPUAvailability.is_spot,
  // packages/prime/src/prime_cli/api/availability.py), echoed by a pod made from it (Pod.is_spot,
  // api/pods.py). The create body has no spot field (P-DOC create-pod, the CLI's PodConfig):
  // the item's cloudId names it, so the emulator's spot items have cloudIds of their own
  // (whether Prime Intellect's do is not documented).
  bool spot;
};

const std::vector<Offer>& Offers() {
  static const std::vector<Offer> offers = {
      {"n3-A100x1", "A100_80GB", "PCIe", "hyperstack", "canada", "CANADA-1", "CA", 1, 80, 1.35,
       28, 120, "secure_cloud", "ubuntu", false, false},
      {"n3-H100x8", "H100_80GB", "SXM5", "hyperstack", "canada", "CANADA-1", "CA", 8, 80, 19.12,
       192, 1800, "secure_cloud", "ubuntu", false, false},
      {"gpu_8x_h100_sxm5", "H100_80GB", "SXM5", "lambdalabs", "united_states", "us-east-1", "US",
       8, 80, 23.92, 208, 1800, "secure_cloud", "ubuntu", false, false},
      {"1A100.22V", "A100_80GB", "SXM4", "datacrunch", "europe", "FIN-01", "FI", 1, 80, 1.29, 22,
       120, "secure_cloud", "root", false, false},
      {"8H100.80S.176V", "H100_80GB", "SXM5", "datacrunch", "europe", "FIN-01", "FI", 8, 80,
       20.72, 176, 1480, "secure_cloud", "root", false, false},
      {"1H100.80S.30V", "H100_80GB", "SXM5", "datacrunch", "europe", "FIN-01", "FI", 1, 80,
       2.19, 30, 120, "secure_cloud", "root", false, false},
      {"1L40S.20V", "L40S_48GB", "PCIe", "datacrunch", "europe", "FIN-01", "FI", 1, 48, 1.10, 20,
       60, "secure_cloud", "root", false, false},
      {"gpu-h100-sxm_8gpu-128vcpu-1600gb", "H100_80GB", "SXM5", "nebius", "europe",
       "eu-north1", "FI", 8, 80, 23.60, 128, 1600, "secure_cloud", "root", false, false},
      {"NVIDIA A100 80GB PCIe", "A100_80GB", "PCIe", "runpod", "united_states", "US-KS-2", "US",
       1, 80, 1.19, 8, 117, "community_cloud", "root", true, false},
      {"NVIDIA H100 80GB HBM3", "H100_80GB", "SXM5", "runpod", "united_states", "US-TX-3", "US",
       1, 80, 1.99, 16, 125, "community_cloud", "root", true, false},
      {"NVIDIA RTX A6000", "RTX_A6000_48GB", "PCIe", "runpod", "europe", "EU-RO-1", "RO", 1, 48,
       0.49, 8, 50, "community_cloud", "root", true, false},
      {"l40s-48gb.1x", "L40S_48GB", "PCIe", "crusoecloud", "united_states", "us-east1", "US", 1,
       48, 1.45, 8, 147, "secure_cloud", "ubuntu", false, false},
      {"primecompute-h100x1", "H100_80GB", "SXM5", "primecompute", "united_states", "US-TX-1",
       "US", 1, 80, 2.29, 26, 225, "secure_cloud", "root", false, false},
      // massedcompute is a provider id of P-DOC's create-pod provider enum.
      {"gpu_1x_l40", "L40_48GB", "PCIe", "massedcompute", "united_states", "us-central-3", "US",
       1, 48, 0.99, 12, 64, "secure_cloud", "ubuntu", false, false},
      // Spot offers (isSpot): the same machines as 1A100.22V and 1H100.80S.30V, cheaper.
      {"1A100.22V.spot", "A100_80GB", "SXM4", "datacrunch", "europe", "FIN-01", "FI", 1, 80,
       0.52, 22, 120, "secure_cloud", "root", false, true},
      {"1H100.80S.30V.spot", "H100_80GB", "SXM5", "datacrunch", "europe", "FIN-01", "FI", 1, 80,
       0.89, 30, 120, "secure_cloud", "root", false, true},
  };
  return offers;
}

// "H100_80GB" -> "H100-80GB", the test VM's GPU file type.
std::string TestVmGpu(const std::string& gpu_type) {
  std::string s = gpu_type;
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}

JsonObject Range(int min, int def, int max, double price) {
  JsonObject o = NewObject();
  o->set("minCount", min);
  o->set("defaultCount", def);
  o->set("maxCount", max);
  o->set("pricePerUnit", price);
  o->set("step", 1);
  o->set("defaultIncludedInPrice", true);
  o->set("additionalInfo", Poco::Dynamic::Var());
  return o;
}

JsonObject DetailError(const std::string& text) {
  JsonObject o = NewObject();
  o->set("detail", text);
  return o;
}

HttpResponse Detail(int status, const std::string& text) {
  return JsonResponse(status, DetailError(text));
}

// FastAPI's validation error: {"detail":[{"loc":[...],"msg":...,"type":...}]}.
HttpResponse Validation(const std::vector<std::string>& loc, const std::string& msg,
                        const std::string& type = "value_error.missing") {
  JsonObject e = NewObject();
  JsonArray l = NewArray();
  for (const auto& p : loc) l->add(p);
  e->set("loc", l);
  e->set("msg", msg);
  e->set("type", type);
  JsonArray d = NewArray();
  d->add(e);
  JsonObject o = NewObject();
  o->set("detail", d);
  return JsonResponse(422, o);
}

// The fields of P-DOC's create-pod request (PodRequestConfig, as its example and the prime
// CLI's PodConfig in api/pods.py list them) with their JSON types. A FastAPI model ignores
// fields it does not declare, so unknown fields pass; a declared one of another type is 422.
enum class Kind { kString, kInteger, kNumber, kBool, kArray };
struct FieldType {
  const char* name;
  Kind kind;
};
constexpr FieldType kPodFields[] = {
    {"name", Kind::kString},        {"cloudId", Kind::kString},
    {"gpuType", Kind::kString},     {"socket", Kind::kString},
    {"gpuCount", Kind::kInteger},   {"diskSize", Kind::kInteger},
    {"vcpus", Kind::kInteger},      {"memory", Kind::kInteger},
    {"maxPrice", Kind::kNumber},    {"image", Kind::kString},
    {"customTemplateId", Kind::kString}, {"dataCenterId", Kind::kString},
    {"country", Kind::kString},     {"security", Kind::kString},
    {"envVars", Kind::kArray},      {"jupyterPassword", Kind::kString},
    {"sshKeyId", Kind::kString},    {"autoRestart", Kind::kBool},
    {"prepaidForHr", Kind::kInteger},
};

// The first declared field of `o` whose value (not null: the model's fields are Optional) is
// not of its type, as FastAPI's 422 names it: {loc, msg, type}; nullopt when all fit.
std::optional<std::tuple<std::string, std::string, std::string>> MistypedField(
    const JsonObject& o, const FieldType* fields, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const FieldType& f = fields[i];
    if (!o->has(f.name) || o->isNull(f.name)) continue;
    const Poco::Dynamic::Var v = o->get(f.name);
    bool ok = false;
    switch (f.kind) {
      case Kind::kString: ok = v.isString(); break;
      case Kind::kInteger: ok = v.isInteger(); break;
      case Kind::kNumber: ok = v.isNumeric(); break;
      case Kind::kBool: ok = v.isBoolean(); break;
      case Kind::kArray: ok = v.type() == typeid(JsonArray); break;
    }
    if (ok) continue;
    switch (f.kind) {
      case Kind::kString: return std::make_tuple(f.name, "str type expected", "type_error.str");
      case Kind::kInteger:
        return std::make_tuple(f.name, "value is not a valid integer", "type_error.integer");
      case Kind::kNumber:
        return std::make_tuple(f.name, "value is not a valid float", "type_error.float");
      case Kind::kBool:
        return std::make_tuple(f.name, "value could not be parsed to a boolean", "type_error.bool");
      case Kind::kArray: return std::make_tuple(f.name, "value is not a valid list", "type_error.list");
    }
  }
  return std::nullopt;
}

class PrimeIntellectApi : public CloudApi {
 public:
  PrimeIntellectApi(InstanceBackend* backend, CloudOptions options)
      : CloudApi("primeintellect", backend, std::move(options)) {}

  std::string BasePath() const override { return "/api/v1"; }

  JsonObject Counts() override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    JsonObject o = NewObject();
    size_t live = 0;
    for (const auto& [id, p] : pods_) {
      if (!p.deleted) ++live;
    }
    o->set("instances", live);
    o->set("firewalls", 0);
    o->set("ssh_keys", keys_.size());
    o->set("backend_instances", backend_->LiveCount(name_));
    return o;
  }

  JsonArray Instances() override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    JsonArray a = NewArray();
    for (const auto& [id, p] : pods_) {
      if (p.deleted) continue;
      JsonObject row = InstanceRow(id, p.name, p.backend_id);
      row->set("vcpus", p.vcpus);  // what create sent (0: none)
      row->set("memory", p.memory);
      JsonArray keys = NewArray();
      for (const auto& k : p.key_names) keys->add(k);
      row->set("ssh_key_names", keys);
      a->add(row);
    }
    return a;
  }

  void Reset() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, p] : pods_) backend_->Delete(p.backend_id);
    pods_.clear();
    history_.clear();
    keys_.clear();
    faults_.Clear();
    installation_fields_ = "all";
    primary_key_only_ = false;
  }

  // installation_fields: "all" (installationStatus PENDING -> FINISHED with the progress),
  // "status_stays_pending" (installationStatus stays PENDING, as every P-DOC example shows it,
  // while the progress reaches 100) or "none" (neither field: both are Optional in the prime
  // CLI's Pod model, api/pods.py). primary_key_only: a pod created without sshKeyId gets only
  // the account's primary key (which keys a pod gets is UNCONFIRMED).
  std::string Configure(const JsonObject& settings) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto v = GetString(settings, "installation_fields")) {
      if (*v != "all" && *v != "status_stays_pending" && *v != "none") {
        return "installation_fields must be all, status_stays_pending or none";
      }
      installation_fields_ = *v;
    }
    if (auto v = GetBool(settings, "primary_key_only")) primary_key_only_ = *v;
    return CloudApi::Configure(settings);
  }

 protected:
  struct Pod {
    std::string id;
    std::string name;
    const Offer* offer = nullptr;
    std::string image;
    int disk = 0;
    std::string team_id;
    std::string backend_id;
    SysClock::time_point created;
    SysClock::time_point updated;
    uint64_t seq = 0;  // picks the sshConnection/ip shape
    bool deleted = false;
    Clock::time_point deleted_at;
    bool failed = false;  // ERROR with installationFailure
    std::string failure;
    bool preempted = false;  // a spot pod taken back (POST /preempt): TERMINATED until deleted
    bool auto_restart = false;
    std::optional<std::string> jupyter_password;
    JsonArray env_vars;
    int64_t vcpus = 0;   // as sent (0: not sent)
    int64_t memory = 0;  // GB, as sent (0: not sent)
    std::vector<std::string> key_names;  // the account keys put on the pod
  };
  struct Key {
    std::string id;
    std::string name;
    std::string public_key;
    bool primary = false;
    SysClock::time_point created;
  };

  std::optional<HttpResponse> Authenticate(const HttpRequest& req) override {
    if (TokenAccepted(req.BearerToken())) return std::nullopt;
    // plugins/primeintellect/REFERENCE.md §1: 401 for an invalid key, body may be empty text/plain.
    return TextResponse(401, "");
  }

  HttpResponse Throttled(const HttpRequest& /*req*/, const Fault& f) override {
    HttpResponse r = Detail(429, "Rate limit exceeded. Please retry later.");
    r.SetHeader("Retry-After", std::to_string(f.retry_after));
    return r;
  }

  HttpResponse ServerError(const HttpRequest& /*req*/, const Fault& f) override {
    // An unhandled error in a FastAPI app: text/plain "Internal Server Error".
    return TextResponse(f.status, f.status == 500 ? "Internal Server Error" : "Bad Gateway");
  }

  HttpResponse InternalError(const std::string& what) override {
    return TextResponse(500, "Internal Server Error (emulator: " + what + ")");
  }

  HttpResponse Route(const HttpRequest& req) override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    const std::string base = BasePath();
    std::string path = TrimTrailingSlash(req.path);
    if (path.compare(0, base.size(), base) != 0) return Detail(404, "Not Found");
    std::vector<std::string> seg = Split(path.substr(base.size()), '/');
    const std::string& m = req.method;
    if (seg.empty()) return Detail(404, "Not Found");
    if (seg[0] == "availability" && seg.size() == 2 && m == "GET" &&
        (seg[1] == "gpus" || seg[1] == "multi-node")) {
      return Availability(req, seg[1] == "multi-node");
    }
    if (seg[0] == "pods") {
      if (seg.size() == 1) {
        if (m == "GET") return ListPods(req, false);
        if (m == "POST") return CreatePod(req);
        return MethodNotAllowed();
      }
      if (seg.size() == 2 && seg[1] == "status" && m == "GET") return PodStatus(req);
      if (seg.size() == 2 && seg[1] == "history" && m == "GET") return ListPods(req, true);
      if (seg.size() == 2) {
        if (m == "GET") return GetPod(seg[1]);
        if (m == "DELETE") return DeletePod(seg[1]);
        return MethodNotAllowed();
      }
      return Detail(404, "Not Found");
    }
    if (seg[0] == "ssh_keys") {
      if (seg.size() == 1) {
        if (m == "GET") return ListKeys(req);
        if (m == "POST") return CreateKey(req);
        return MethodNotAllowed();
      }
      if (seg.size() == 2 && m == "DELETE") return DeleteKey(seg[1]);
      return MethodNotAllowed();
    }
    return Detail(404, "Not Found");
  }

  static HttpResponse MethodNotAllowed() { return Detail(405, "Method Not Allowed"); }

  static int QueryInt(const HttpRequest& req, const std::string& name, int def) {
    if (auto v = req.Query(name)) {
      try {
        return std::stoi(*v);
      } catch (const std::exception&) {
      }
    }
    return def;
  }

  // --- availability (plugins/primeintellect/REFERENCE.md §3.1) ---
  JsonObject OfferJson(const Offer& o, bool out_of_stock) {
    JsonObject j = NewObject();
    j->set("cloudId", std::string(o.cloud_id));
    j->set("gpuType", std::string(o.gpu_type));
    j->set("socket", std::string(o.socket));
    j->set("provider", std::string(o.provider));
    j->set("region", std::string(o.region));
    j->set("dataCenter", std::string(o.data_center));
    j->set("country", std::string(o.country));
    j->set("gpuCount", o.gpu_count);
    j->set("gpuMemory", o.gpu_memory);
    j->set("disk", Range(50, 100, 1000, 0.0001));
    j->set("vcpu", Range(o.vcpus, o.vcpus, o.vcpus, 0));
    j->set("memory", Range(o.memory_gb, o.memory_gb, o.memory_gb, 0));
    j->set("sharedDisk", Poco::Dynamic::Var());
    j->set("internetSpeed", 10000);
    j->set("interconnect", o.gpu_count > 1 ? Poco::Dynamic::Var(3200) : Poco::Dynamic::Var());
    j->set("interconnectType", o.gpu_count > 1 ? Poco::Dynamic::Var(std::string("InfiniBand"))
                                               : Poco::Dynamic::Var());
    j->set("provisioningTime", o.container ? 2 : 10);
    j->set("stockStatus", std::string(out_of_stock ? "" : "High"));
    j->set("security", std::string(o.security));
    JsonObject prices = NewObject();
    prices->set("onDemand", o.price);
    prices->set("communityPrice", std::string(o.security) == "community_cloud"
                                      ? Poco::Dynamic::Var(o.price)
                                      : Poco::Dynamic::Var());
    prices->set("isVariable", false);
    prices->set("currency", std::string("USD"));
    j->set("prices", prices);
    JsonArray images = NewArray();
    images->add(std::string("ubuntu_22_cuda_12"));
    images->add(std::string("cuda_12_4_pytorch_2_5"));
    images->add(std::string("cuda_12_6_pytorch_2_7"));
    j->set("images", images);
    j->set("isSpot", o.spot);
    j->set("prepaidTime", Poco::Dynamic::Var());
    return j;
  }

  HttpResponse Availability(const HttpRequest& req, bool multi_node) {
    std::optional<std::string> gpu_type = req.Query("gpu_type");
    int gpu_count = QueryInt(req, "gpu_count", 0);
    std::vector<std::string> regions = req.QueryAll("regions");
    int page = std::max(1, QueryInt(req, "page", 1));
    int page_size = std::clamp(QueryInt(req, "page_size", 100), 1, 1000);
    const bool out_of_stock = faults_.Armed("capacity");
    std::vector<JsonObject> items;
    if (!multi_node) {
      for (const auto& o : Offers()) {
        if (gpu_type && *gpu_type != o.gpu_type) continue;
        if (gpu_count > 0 && gpu_count != o.gpu_count) continue;
        if (!regions.empty() &&
            std::find(regions.begin(), regions.end(), o.region) == regions.end()) {
          continue;
        }
        items.push_back(OfferJson(o, out_of_stock));
      }
    }
    JsonArray arr = NewArray();
    for (size_t i = (page - 1) * static_cast<size_t>(page_size);
         i < items.size() && i < static_cast<size_t>(page) * page_size; ++i) {
      arr->add(items[i]);
    }
    JsonObject o = NewObject();
    o->set("items", arr);
    o->set("totalCount", items.size());
    return JsonResponse(200, o);
  }

  // --- pods (plugins/primeintellect/REFERENCE.md §3.2-3.5) ---
  void Reconcile() {
    for (auto it = pods_.begin(); it != pods_.end();) {
      Pod& p = it->second;
      if (p.deleted) {
        if (Clock::now() - p.deleted_at >= kDeletingTime) {
          history_.push_back(p);
          it = pods_.erase(it);
          continue;
        }
      } else if (!p.failed) {
        InstanceStatus s = backend_->State(p.backend_id);
        if (s.state == InstanceState::kGone && s.preempted && p.offer->spot) {
          // A spot pod taken back: TERMINATED in get and list until it is deleted. P-DOC and
          // the prime CLI document no preemption status; TERMINATED is the status enum's
          // word for a pod that ended (plugins/primeintellect/README.md, "Spot pods").
          if (!p.preempted) {
            p.preempted = true;
            p.updated = SysClock::now();
          }
          ++it;
          continue;
        }
        if (s.state == InstanceState::kGone) {
          // Vanished behind the API's back: 404 from now on.
          backend_->Delete(p.backend_id);
          it = pods_.erase(it);
          continue;
        }
        if (s.state == InstanceState::kError) {
          p.failed = true;
          p.failure = "Provisioning failed at provider " + std::string(p.offer->provider) +
                      ": " + s.message;
          p.updated = SysClock::now();
          backend_->Delete(p.backend_id);
        }
      }
      ++it;
    }
  }

  Pod* FindPod(const std::string& id) {
    auto it = pods_.find(id);
    return it == pods_.end() ? nullptr : &it->second;
  }

  // The pod's phase; fills ssh/ip when ready.
  struct View {
    std::string status;
    std::string installation = "PENDING";
    int progress = 0;
    bool ready = false;
    InstanceStatus backend;
  };
  View ViewOf(const Pod& p) {
    View v;
    if (p.deleted) {
      v.status = "DELETING";
      return v;
    }
    if (p.failed) {
      v.status = "ERROR";
      v.installation = "ERROR";
      return v;
    }
    if (p.preempted) {
      v.status = "TERMINATED";
      return v;
    }
    v.backend = backend_->State(p.backend_id);
    if (v.backend.state == InstanceState::kStopped) {
      v.status = "STOPPED";  // plugins/primeintellect/REFERENCE.md §3.3
      return v;
    }
    if (v.backend.state != InstanceState::kRunning) {
      v.status = "PROVISIONING";
      return v;
    }
    const auto t = v.backend.running_for;
    if (t < kPendingTime) {
      v.status = "PENDING";
      v.progress = 10;
    } else if (t < kPendingTime + kInstallTime) {
      v.status = "ACTIVE";
      v.progress = 10 + static_cast<int>(80 * (t - kPendingTime) / kInstallTime);
    } else {
      v.status = "ACTIVE";
      v.installation = "FINISHED";
      v.progress = 100;
      v.ready = true;
    }
    return v;
  }

  // sshConnection/ip in the shapes the reference lists, varied per pod so a
  // client must parse them all: seq%3 == 0 string, 1 one-element list,
  // 2 string; before ready: null, [null] or null.
  Poco::Dynamic::Var SshConnection(const Pod& p, const View& v) {
    const int shape = static_cast<int>(p.seq % 3);
    if (!v.ready) {
      if (shape == 1) {
        JsonArray a = NewArray();
        a->add(Poco::Dynamic::Var());
        return a;
      }
      return Poco::Dynamic::Var();
    }
    std::string s = std::string(p.offer->ssh_user) + "@" + v.backend.public_ip + " -p " +
                    std::to_string(v.backend.ssh_port);
    if (shape == 1) {
      JsonArray a = NewArray();
      a->add(s);
      return a;
    }
    return s;
  }

  Poco::Dynamic::Var Ip(const Pod& p, const View& v) {
    const int shape = static_cast<int>(p.seq % 3);
    if (!v.ready) return Poco::Dynamic::Var();
    if (shape == 1) {
      JsonArray a = NewArray();
      a->add(v.backend.public_ip);
      return a;
    }
    return v.backend.public_ip;
  }

  JsonArray PortMapping(const View& v) {
    JsonArray a = NewArray();
    if (!v.ready) return a;
    JsonObject m = NewObject();
    m->set("internal", std::string("22"));
    m->set("external", std::to_string(v.backend.ssh_port));
    m->set("protocol", std::string("TCP"));
    m->set("usedBy", std::string("SSH"));
    m->set("description", std::string("SSH"));
    a->add(m);
    return a;
  }

  void SetInstallation(JsonObject o, const View& v) const {
    if (installation_fields_ == "none") return;
    const bool stays = installation_fields_ == "status_stays_pending" && v.installation == "FINISHED";
    o->set("installationStatus", stays ? std::string("PENDING") : v.installation);
    o->set("installationProgress", v.progress);
  }

  JsonObject PodJson(const Pod& p) {
    View v = ViewOf(p);
    JsonObject o = NewObject();
    o->set("id", p.id);
    o->set("name", p.name);
    o->set("userId", user_id_);
    o->set("teamId", p.team_id.empty() ? Poco::Dynamic::Var() : Poco::Dynamic::Var(p.team_id));
    o->set("walletId", wallet_id_);
    o->set("type", std::string("HOSTED"));
    o->set("providerType", std::string(p.offer->provider));
    o->set("status", v.status);
    SetInstallation(o, v);
    o->set("installationFailure", p.failed ? Poco::Dynamic::Var(p.failure) : Poco::Dynamic::Var());
    o->set("finalizerStatus", Poco::Dynamic::Var());
    o->set("createdAt", Rfc3339Millis(p.created));
    o->set("updatedAt", Rfc3339Millis(p.updated));
    o->set("gpuName", std::string(p.offer->gpu_type));
    o->set("gpuCount", p.offer->gpu_count);
    o->set("socket", std::string(p.offer->socket));
    o->set("priceHr", p.offer->price);
    o->set("stoppedPriceHr", 0.0);
    o->set("provisioningPriceHr", 0.0);
    o->set("basePriceHr", p.offer->price);
    o->set("baseCurrency", std::string("USD"));
    o->set("environmentType", p.image);
    o->set("customTemplateId", Poco::Dynamic::Var());
    o->set("primePortMapping", PortMapping(v));
    o->set("sshConnection", SshConnection(p, v));
    o->set("ip", Ip(p, v));
    JsonObject res = NewObject();
    res->set("memory", p.offer->memory_gb);
    res->set("disk", p.disk);
    res->set("vcpus", p.offer->vcpus);
    if (p.vcpus > 0) res->set("vcpus", p.vcpus);
    if (p.memory > 0) res->set("memory", p.memory);
    o->set("resources", res);
    o->set("attachedResources", NewArray());
    o->set("isSpot", p.offer->spot);
    o->set("autoRestart", p.auto_restart);
    o->set("jupyterPassword",
           p.jupyter_password ? Poco::Dynamic::Var(*p.jupyter_password) : Poco::Dynamic::Var());
    o->set("envVars", p.env_vars ? p.env_vars : NewArray());
    return o;
  }

  HttpResponse CreatePod(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Validation({"body"}, "value is not a valid dict", "type_error.dict");
    JsonObject pod = GetObject(body, "pod");
    if (!pod) return Validation({"body", "pod"}, "field required");
    if (auto bad = MistypedField(pod, kPodFields, std::size(kPodFields))) {
      return Validation({"body", "pod", std::get<0>(*bad)}, std::get<1>(*bad), std::get<2>(*bad));
    }
    std::optional<std::string> cloud_id = GetString(pod, "cloudId");
    if (!cloud_id) return Validation({"body", "pod", "cloudId"}, "field required");
    std::optional<std::string> gpu_type = GetString(pod, "gpuType");
    if (!gpu_type) return Validation({"body", "pod", "gpuType"}, "field required");
    std::optional<int64_t> gpu_count = GetInt(pod, "gpuCount");
    if (!gpu_count) return Validation({"body", "pod", "gpuCount"}, "field required");
    JsonObject provider = GetObject(body, "provider");
    std::optional<std::string> provider_type = GetString(provider, "type");
    if (!provider_type) return Validation({"body", "provider", "type"}, "field required");
    std::string name = GetString(pod, "name").value_or("");
    const Offer* offer = nullptr;
    for (const auto& o : Offers()) {
      if (*cloud_id == o.cloud_id && *gpu_type == o.gpu_type && *provider_type == o.provider &&
          *gpu_count == o.gpu_count) {
        offer = &o;
      }
    }
    if (!offer) {
      return Detail(400, "No offer matches cloudId " + *cloud_id + ", gpuType " + *gpu_type +
                             " x" + std::to_string(*gpu_count) + " at provider " +
                             *provider_type + " (not from the reference)");
    }
    if (auto dc = GetString(pod, "dataCenterId"); dc && *dc != offer->data_center) {
      return Detail(400, "Offer " + *cloud_id + " is not available in data center " + *dc +
                             " (not from the reference)");
    }
    if (auto s = GetString(pod, "socket"); s && *s != offer->socket) {
      return Detail(400, "Offer " + *cloud_id + " has socket " + offer->socket +
                             ", not " + *s + " (not from the reference)");
    }
    int disk = static_cast<int>(GetInt(pod, "diskSize").value_or(100));
    if (disk < 50 || disk > 1000) {
      return Validation({"body", "pod", "diskSize"},
                        "diskSize must be between 50 and 1000 for this offer",
                        "value_error.number.not_in_range");
    }
    std::string image = GetString(pod, "image").value_or("ubuntu_22_cuda_12");
    // vcpus and memory: optional integers (P-DOC create-pod request); within the offer's
    // vcpu/memory range, which is one value here.
    int64_t vcpus = 0, memory = 0;
    for (const auto& [field, range, out] :
         {std::tuple<const char*, int, int64_t*>{"vcpus", offer->vcpus, &vcpus},
          std::tuple<const char*, int, int64_t*>{"memory", offer->memory_gb, &memory}}) {
      if (!pod->has(field) || pod->isNull(field)) continue;
      std::optional<int64_t> n = GetInt(pod, field);
      if (!n) {
        return Validation({"body", "pod", field}, "value is not a valid integer",
                          "type_error.integer");
      }
      if (*n != range) {
        return Validation({"body", "pod", field},
                          std::string(field) + " must be " + std::to_string(range) +
                              " for this offer",
                          "value_error.number.not_in_range");
      }
      *out = *n;
    }
    // sshKeyId: P-DOC create-pod request's pod.sshKeyId, one of the account's keys.
    std::optional<std::string> ssh_key_id = GetString(pod, "sshKeyId");
    if (ssh_key_id && !keys_.count(*ssh_key_id)) {
      return Detail(404, "SSH key not found (not from the reference)");
    }
    if (faults_.Take("payment_required", req.method, req.path)) {
      return Detail(402, "Insufficient funds: please top up your wallet");
    }
    // A capacity fault's "body" narrows it to one create: a pod name ("gpuprov-train-agent-2",
    // a cluster's third node).
    if (faults_.Take("capacity", req.method, req.path, req.body) ||
        faults_.Take("quota", req.method, req.path)) {
      return Detail(400, "No capacity available for " + *gpu_type + " x" +
                             std::to_string(*gpu_count) + " at " + offer->data_center +
                             ". Please try another offer.");
    }

    Pod p;
    p.id = RandomHex(16);
    p.name = name;
    p.offer = offer;
    p.image = image;
    p.disk = disk;
    if (JsonObject team = GetObject(body, "team")) p.team_id = GetString(team, "teamId").value_or("");
    p.created = p.updated = SysClock::now();
    p.seq = next_seq_++;
    p.auto_restart = GetBool(pod, "autoRestart").value_or(false);
    if (auto jp = GetString(pod, "jupyterPassword")) p.jupyter_password = *jp;
    p.env_vars = GetArray(pod, "envVars");
    p.vcpus = vcpus;
    p.memory = memory;

    InstanceSpec spec;
    spec.cloud = name_;
    spec.name = name.empty() ? "pod-" + p.id.substr(0, 8) : name;
    spec.image = image;
    spec.gpu_type = TestVmGpu(offer->gpu_type);
    spec.gpu_count = offer->gpu_count;
    // No boot script on Prime Intellect (plugins/primeintellect/REFERENCE.md §4); the account's
    // keys are installed (the reference leaves "primary only" unconfirmed).
    // With primary_key_only, a pod without sshKeyId gets the primary key only.
    for (const auto& [id, k] : keys_) {
      const bool named = ssh_key_id && *ssh_key_id == id;
      if (primary_key_only_ && !k.primary && !named) continue;
      spec.ssh_public_keys.push_back(k.public_key);
      p.key_names.push_back(k.name);
    }
    spec.ssh_user = offer->ssh_user;
    spec.reachable = PortSet::All();  // no firewall API: every port the node listens on
    // No private network either (plugins/primeintellect/README.md, Clusters): pods reach each
    // other at their public addresses, on every port; the node firewall filters.
    spec.public_network = true;
    spec.remap_ssh = true;
    spec.container = offer->container;
    spec.faults = faults_.TakeBootFaults();
    try {
      p.backend_id = backend_->Create(spec);
    } catch (const BackendError& e) {
      return Detail(400, std::string("No capacity available (emulator backend: ") + e.what() +
                             ")");
    }
    pods_[p.id] = p;
    return JsonResponse(200, PodJson(pods_[p.id]));
  }

  HttpResponse GetPod(const std::string& id) {
    Pod* p = FindPod(id);
    if (!p) return Detail(404, "Pod not found");
    return JsonResponse(200, PodJson(*p));
  }

  HttpResponse ListPods(const HttpRequest& req, bool history) {
    int offset = std::max(0, QueryInt(req, "offset", 0));
    int limit = std::clamp(QueryInt(req, "limit", 100), 1, 1000);
    std::vector<JsonObject> items;
    if (history) {
      for (const auto& p : history_) {
        JsonObject o = PodJson(p);
        o->set("status", std::string("TERMINATED"));
        o->set("sshConnection", Poco::Dynamic::Var());
        o->set("ip", Poco::Dynamic::Var());
        items.push_back(o);
      }
    } else {
      std::vector<const Pod*> sorted;
      for (const auto& [id, p] : pods_) sorted.push_back(&p);
      std::sort(sorted.begin(), sorted.end(),
                [](const Pod* a, const Pod* b) { return a->seq > b->seq; });  // newest first
      for (const Pod* p : sorted) items.push_back(PodJson(*p));
    }
    JsonArray data = NewArray();
    for (size_t i = offset; i < items.size() && i < static_cast<size_t>(offset + limit); ++i) {
      data->add(items[i]);
    }
    JsonObject o = NewObject();
    o->set("total_count", items.size());
    o->set("offset", offset);
    o->set("limit", limit);
    o->set("data", data);
    return JsonResponse(200, o);
  }

  HttpResponse PodStatus(const HttpRequest& req) {
    JsonArray data = NewArray();
    for (const auto& id : req.QueryAll("pod_ids")) {
      Pod* p = FindPod(id);
      if (!p) continue;
      View v = ViewOf(*p);
      JsonObject o = NewObject();
      o->set("podId", p->id);
      o->set("providerType", std::string(p->offer->provider));
      o->set("status", v.status);
      o->set("sshConnection", SshConnection(*p, v));
      o->set("costPerHr", p->offer->price);
      o->set("primePortMapping", PortMapping(v));
      o->set("ip", Ip(*p, v));
      o->set("installationFailure",
             p->failed ? Poco::Dynamic::Var(p->failure) : Poco::Dynamic::Var());
      if (installation_fields_ != "none") o->set("installationProgress", v.progress);
      data->add(o);
    }
    JsonObject o = NewObject();
    o->set("data", data);
    return JsonResponse(200, o);
  }

  HttpResponse DeletePod(const std::string& id) {
    Pod* p = FindPod(id);
    if (!p || p->deleted) return Detail(404, "Pod not found");
    p->deleted = true;
    p->deleted_at = Clock::now();
    p->updated = SysClock::now();
    backend_->Delete(p->backend_id);
    JsonObject o = NewObject();
    o->set("status", std::string("ok"));  // (not from the reference)
    return JsonResponse(200, o);
  }

  // --- SSH keys (plugins/primeintellect/REFERENCE.md §3.6) ---
  JsonObject KeyJson(const Key& k) {
    JsonObject o = NewObject();
    o->set("id", k.id);
    o->set("userId", user_id_);
    o->set("name", k.name);
    o->set("publicKey", k.public_key);
    o->set("isPrimary", k.primary);
    o->set("isUserKey", true);
    o->set("createdAt", Rfc3339Millis(k.created));
    o->set("updatedAt", Rfc3339Millis(k.created));
    return o;
  }

  HttpResponse ListKeys(const HttpRequest& req) {
    int offset = std::max(0, QueryInt(req, "offset", 0));
    int limit = std::clamp(QueryInt(req, "limit", 100), 1, 1000);
    std::vector<const Key*> all;
    for (const auto& [id, k] : keys_) all.push_back(&k);
    std::sort(all.begin(), all.end(),
              [](const Key* a, const Key* b) { return a->created < b->created; });
    JsonArray data = NewArray();
    for (size_t i = offset; i < all.size() && i < static_cast<size_t>(offset + limit); ++i) {
      data->add(KeyJson(*all[i]));
    }
    JsonObject o = NewObject();
    o->set("data", data);
    o->set("total_count", all.size());
    o->set("offset", offset);
    o->set("limit", limit);
    o->set("status", std::string("success"));
    return JsonResponse(200, o);
  }

  HttpResponse CreateKey(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Validation({"body"}, "value is not a valid dict", "type_error.dict");
    static constexpr FieldType kKeyFields[] = {{"name", Kind::kString},
                                               {"publicKey", Kind::kString}};
    if (auto bad = MistypedField(body, kKeyFields, std::size(kKeyFields))) {
      return Validation({"body", std::get<0>(*bad)}, std::get<1>(*bad), std::get<2>(*bad));
    }
    std::optional<std::string> name = GetString(body, "name");
    if (!name) return Validation({"body", "name"}, "field required");
    std::optional<std::string> pub = GetString(body, "publicKey");
    if (!pub) return Validation({"body", "publicKey"}, "field required");
    if (pub->rfind("ssh-", 0) != 0 && pub->rfind("ecdsa-", 0) != 0) {
      return Detail(400, "Invalid SSH public key (not from the reference)");
    }
    Key k;
    k.id = RandomHex(12);
    k.name = *name;
    k.public_key = *pub;
    while (!k.public_key.empty() && std::isspace(static_cast<unsigned char>(k.public_key.back()))) {
      k.public_key.pop_back();
    }
    k.primary = keys_.empty();
    k.created = SysClock::now();
    keys_[k.id] = k;
    return JsonResponse(200, KeyJson(k));
  }

  HttpResponse DeleteKey(const std::string& id) {
    auto it = keys_.find(id);
    if (it == keys_.end()) return Detail(404, "SSH key not found");
    bool was_primary = it->second.primary;
    keys_.erase(it);
    if (was_primary && !keys_.empty()) {
      auto first = std::min_element(keys_.begin(), keys_.end(), [](const auto& a, const auto& b) {
        return a.second.created < b.second.created;
      });
      first->second.primary = true;
    }
    JsonObject o = NewObject();
    o->set("status", std::string("success"));  // (not from the reference)
    return JsonResponse(200, o);
  }

  std::mutex mu_;
  std::map<std::string, Pod> pods_;
  std::vector<Pod> history_;
  std::map<std::string, Key> keys_;
  std::string installation_fields_ = "all";
  bool primary_key_only_ = false;
  uint64_t next_seq_ = 0;
  std::string user_id_ = "cm" + RandomHex(11);
  std::string wallet_id_ = "cm" + RandomHex(11);
};

}  // namespace

std::unique_ptr<CloudApi> MakePrimeIntellectApi(InstanceBackend* backend, CloudOptions options) {
  return std::make_unique<PrimeIntellectApi>(backend, std::move(options));
}

}  // namespace gpuprov::emulator
