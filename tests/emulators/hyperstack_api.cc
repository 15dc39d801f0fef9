// SPDX-License-Identifier: Apache-2.0
//
// Hyperstack ("Infrahub") API v1 (/v1/core: environments, keypairs, flavors,
// images, virtual machines, per-VM security rules; /v1/pricebook) as the official
// SDK generated from its OpenAPI definition describes it (NexGenCloud/
// hyperstack-sdk-python f130f57: hyperstack/api/*.py, docs/*.md);
// plugins/hyperstack/REFERENCE.md holds the facts with their sources; the SDK wins
// where they differ. Auth is the `api_key` header. Every body
// is {"status": true|false, "message": ..., <payload>}; errors carry
// "error_reason". Request bodies are checked against the documented shapes
// (unknown field or wrong type: 400 bad_request). A VM's security rules decide
// which of its ports are reachable (firewall_ports.h), and what reaches it on its
// environment's private network: the VMs of one environment share one
// (InstanceSpec::private_network; fixed_ip is the address there), and a VM admits
// nothing there but what its ingress rules allow ("New virtual machines are secure by
// default, initially configured without any firewall rules allowing incoming
// traffic", https://infrahub-doc.nexgencloud.com/docs/network-security/security-rules/).
// Guesses the reference marks UNCONFIRMED are listed in README.md.
#include <Poco/Base64Decoder.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "cloud_api.h"
#include "firewall_ports.h"
#include "request_shape.h"

namespace gpuprov::emulator {
namespace {

using Clock = std::chrono::steady_clock;
using SysClock = std::chrono::system_clock;

constexpr size_t kMaxName = 50;                  // plugins/hyperstack/REFERENCE.md §3.1
constexpr int64_t kMaxCount = 20;                // plugins/hyperstack/REFERENCE.md §3.1
// UNCONFIRMED (plugins/hyperstack/REFERENCE.md §3.1)
constexpr size_t kMaxUserData = 64 * 1024;
// plugins/hyperstack/REFERENCE.md §8, per source IP
constexpr int kRequestsPerMinute = 500;
constexpr int kDefaultPageSize = 30;
// CREATING for this long after the create call (then BUILD until the machine runs).
constexpr std::chrono::milliseconds kCreatingTime{500};

const std::vector<std::string>& RegionNames() {
  static const std::vector<std::string> r = {"CANADA-1", "NORWAY-1", "US-1"};
  return r;
}

bool KnownRegion(const std::string& r) {
  const auto& all = RegionNames();
  return std::find(all.begin(), all.end(), r) != all.end();
}

struct FlavorDef {
  int id;
  const char* name;
  const char* region;
  const char* gpu;  // "" for a CPU flavor
  int gpu_count;
  int cpu;
  double ram;
  int disk;
  int ephemeral;
  const char* testvm_gpu;
};

const std::vector<FlavorDef>& Flavors() {
  static const std::vector<FlavorDef> flavors = {
      {101, "n3-A100x1", "CANADA-1", "A100-80G-PCIe", 1, 28, 120.0, 100, 750, "A100-80GB"},
      {102, "n3-A100x2", "CANADA-1", "A100-80G-PCIe", 2, 60, 240.0, 100, 1500, "A100-80GB"},
      {103, "n3-A100x4", "CANADA-1", "A100-80G-PCIe", 4, 124, 480.0, 100, 3000, "A100-80GB"},
      {104, "n3-A100x8", "CANADA-1", "A100-80G-PCIe", 8, 252, 960.0, 100, 6000, "A100-80GB"},
      {105, "n3-A100x8-NVLink", "CANADA-1", "A100-80G-PCIe-NVLink", 8, 252, 1440.0, 100, 6000,
       "A100-80GB"},
      {111, "n3-H100x1", "CANADA-1", "H100-80G-PCIe", 1, 28, 180.0, 100, 750, "H100-80GB"},
      {112, "n3-H100x2", "CANADA-1", "H100-80G-PCIe", 2, 60, 360.0, 100, 1500, "H100-80GB"},
      {113, "n3-H100x4", "CANADA-1", "H100-80G-PCIe", 4, 124, 720.0, 100, 3000, "H100-80GB"},
      {114, "n3-H100x8", "CANADA-1", "H100-80G-PCIe", 8, 252, 1440.0, 100, 6000, "H100-80GB"},
      {115, "n3-H100x8-NVLink", "CANADA-1", "H100-80G-PCIe-NVLink", 8, 192, 1800.0, 100, 6000,
       "H100-80GB"},
      {116, "n3-H100-SXM5x8", "CANADA-1", "H100-80G-SXM5", 8, 192, 1800.0, 100, 32000,
       "H100-80GB"},
      {121, "n3-L40x1", "CANADA-1", "L40", 1, 28, 58.0, 100, 725, "L40"},
      {122, "n3-L40x2", "CANADA-1", "L40", 2, 60, 120.0, 100, 1450, "L40"},
      {131, "n3-RTX-A6000x1", "CANADA-1", "RTX-A6000", 1, 28, 58.0, 100, 725, "RTX-A6000"},
      {132, "n3-RTX-A6000x2", "CANADA-1", "RTX-A6000", 2, 60, 120.0, 100, 1450, "RTX-A6000"},
      {141, "n1-cpu-small", "CANADA-1", "", 0, 4, 4.0, 100, 0, ""},
      {211, "n3-RTX-A4000x1", "NORWAY-1", "RTX-A4000", 1, 6, 24.0, 100, 0, "RTX-A4000"},
      {212, "n3-RTX-A4000x2", "NORWAY-1", "RTX-A4000", 2, 12, 48.0, 100, 0, "RTX-A4000"},
      {241, "n1-cpu-small", "NORWAY-1", "", 0, 4, 4.0, 100, 0, ""},
      {316, "n3-H100-SXM5x8", "US-1", "H100-80G-SXM5", 8, 192, 1800.0, 100, 32000, "H100-80GB"},
  };
  return flavors;
}

const FlavorDef* FindFlavor(const std::string& name, const std::string& region) {
  for (const auto& f : Flavors()) {
    if (name == f.name && region == f.region) return &f;
  }
  return nullptr;
}

const std::vector<std::string>& ImageNames() {
  static const std::vector<std::string> images = {
      "Ubuntu Server 22.04 LTS R535 CUDA 12.2",
      "Ubuntu Server 24.04 LTS R570 CUDA 12.8 with Docker", "Ubuntu Server 22.04 LTS",
      "Ubuntu Server 24.04 LTS"};
  return images;
}

const std::vector<std::string>& Protocols() {
  static const std::vector<std::string> p = {"any", "ah",   "dccp", "egp",    "esp",  "gre",
                                             "icmp", "igmp", "ipip", "ospf",  "pgm",  "rsvp",
                                             "sctp", "tcp",  "udp",  "udplite", "vrrp"};
  return p;
}

std::string TrimSpace(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// MD5 colon hex of the key blob (OpenStack's keypair fingerprint); nullopt when
// the text is not "type base64 [comment]" with a blob that names its type.
std::optional<std::string> Fingerprint(const std::string& public_key) {
  std::istringstream in(public_key);
  std::string type, b64;
  if (!(in >> type >> b64)) return std::nullopt;
  static const std::set<std::string> types = {"ssh-rsa", "ssh-ed25519", "ecdsa-sha2-nistp256",
                                              "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521"};
  if (types.count(type) == 0) return std::nullopt;
  std::string blob;
  try {
    std::istringstream b(b64);
    Poco::Base64Decoder dec(b);
    blob.assign(std::istreambuf_iterator<char>(dec), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (blob.size() <= 4 + type.size() || blob.compare(4, type.size(), type) != 0) {
    return std::nullopt;
  }
  return Md5Fingerprint(blob);
}

class HyperstackApi : public CloudApi {
 public:
  HyperstackApi(InstanceBackend* backend, CloudOptions options)
      : CloudApi("hyperstack", backend, std::move(options)) {
    SeedEnvironments();
  }

  std::string BasePath() const override { return "/v1"; }

  JsonObject Counts() override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    int64_t rules = 0;
    for (const auto& [id, vm] : vms_) rules += static_cast<int64_t>(vm.rules.size());
    int64_t created_envs = 0;
    for (const auto& [id, e] : envs_) created_envs += !e.seeded;
    JsonObject o = NewObject();
    o->set("instances", vms_.size());
    o->set("firewalls", 0);
    o->set("ssh_keys", keys_.size());
    o->set("backend_instances", backend_->LiveCount(name_));
    o->set("environments", created_envs);
    o->set("security_rules", rules);
    o->set("rate_limited", rate_limited_);
    return o;
  }

  JsonArray Instances() override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    JsonArray a = NewArray();
    for (const auto& [id, vm] : vms_) {
      JsonObject row = InstanceRow(std::to_string(id), vm.name, vm.backend_id);
      JsonArray ports = NewArray();
      for (int p : AllowedPorts(vm)) ports->add(p);
      row->set("allowed_ports", ports);
      row->set("status", StatusOf(vm));
      row->set("user_data", vm.user_data);
      a->add(row);
    }
    return a;
  }

  void Reset() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, vm] : vms_) backend_->Delete(vm.backend_id);
    vms_.clear();
    keys_.clear();
    envs_.clear();
    SeedEnvironments();
    window_.clear();
    rate_limited_ = 0;
    force_port_randomization_ = false;
    faults_.Clear();
  }

  std::string Configure(const JsonObject& settings) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto v = GetDouble(settings, "floating_ip_delay_seconds")) floating_ip_delay_ = *v;
    if (auto v = GetDouble(settings, "deleting_seconds")) deleting_seconds_ = *v;
    // plugins/hyperstack/REFERENCE.md §H3 (unconfirmed): what the API does with
    // enable_port_randomization false is not documented; true here makes every new VM report
    // port_randomization on whatever the create asked, so a driver's reading of it is tested.
    if (auto v = GetBool(settings, "force_port_randomization")) force_port_randomization_ = *v;
    if (JsonArray a = GetArray(settings, "out_of_stock")) {
      out_of_stock_.clear();
      for (unsigned i = 0; i < a->size(); ++i) out_of_stock_.insert(a->get(i).toString());
    }
    return CloudApi::Configure(settings);
  }

 protected:
  struct Environment {
    int64_t id = 0;
    std::string name;
    std::string region;
    SysClock::time_point created;
    bool seeded = false;
  };
  struct Keypair {
    int64_t id = 0;
    std::string name;
    int64_t env_id = 0;
    std::string public_key;
    std::string fingerprint;
    SysClock::time_point created;
  };
  struct Rule {
    int64_t id = 0;
    JsonObject body;  // direction, protocol, ethertype, remote_ip_prefix, port_range_min/max
    SysClock::time_point created;
  };
  struct Vm {
    int64_t id = 0;
    std::string name;
    int64_t env_id = 0;
    const FlavorDef* flavor = nullptr;
    std::string image;
    std::string key_name;
    std::string user_data;
    bool floating_ip = false;
    bool port_randomization = true;
    std::vector<Rule> rules;
    std::vector<std::string> labels;
    std::string callback_url;
    std::string backend_id;
    Clock::time_point created_steady;
    SysClock::time_point created;
    double ip_after_seconds = -1;  // fault ip_after_boot; < 0: the cloud's delay
    std::optional<Clock::time_point> gone_at;  // deleted: DELETING until then
  };

  void SeedEnvironments() {
    Environment e;
    e.id = next_env_id_++;
    e.name = "default-CANADA-1";
    e.region = "CANADA-1";
    e.created = SysClock::now();
    e.seeded = true;
    envs_[e.id] = e;
  }

  // --- envelopes (plugins/hyperstack/REFERENCE.md §2, §8) ---
  static HttpResponse Error(int status, const std::string& reason, const std::string& message) {
    JsonObject o = NewObject();
    o->set("status", false);
    o->set("message", message);
    o->set("error_reason", reason);
    return JsonResponse(status, o);
  }
  static HttpResponse BadRequest(const std::string& message) {
    return Error(400, "bad_request", message);
  }
  static HttpResponse NotFound(const std::string& message) {
    return Error(404, "not_found", message);
  }
  static HttpResponse Ok(const std::string& message, const std::string& key = "",
                         const Poco::Dynamic::Var& payload = Poco::Dynamic::Var()) {
    JsonObject o = NewObject();
    o->set("status", true);
    o->set("message", message);
    if (!key.empty()) o->set(key, payload);
    return JsonResponse(200, o);
  }

  static HttpResponse Unauthorized() {
    return Error(401, "unauthorized", "Unauthorized: the api_key header is missing or invalid");
  }

  std::optional<HttpResponse> Authenticate(const HttpRequest& req) override {
    if (!TokenAccepted(req.Header("api_key"))) return Unauthorized();
    if (faults_.Take("auth_failure", req.method, req.path)) return Unauthorized();
    return std::nullopt;
  }

  static HttpResponse TooMany(int retry_after) {
    JsonObject o = NewObject();
    o->set("status", false);
    o->set("message", std::string("Too Many Requests"));
    HttpResponse r = JsonResponse(429, o);
    if (retry_after > 0) r.SetHeader("Retry-After", std::to_string(retry_after));
    return r;
  }

  HttpResponse Throttled(const HttpRequest& /*req*/, const Fault& f) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++rate_limited_;
    return TooMany(f.retry_after);
  }

  // value "legacy": the legacy 500 body without error_reason; value "after_create":
  // a VM create is carried out, then answered with the 5xx (plugins/hyperstack/REFERENCE.md,
  // emulator fault (g)).
  HttpResponse ServerError(const HttpRequest& req, const Fault& f) override {
    if (f.value == "after_create" && req.method == "POST" &&
        TrimTrailingSlash(req.path) == BasePath() + "/core/virtual-machines") {
      std::lock_guard<std::mutex> lock(mu_);
      CreateVms(req);
    }
    if (f.value == "legacy") {
      JsonObject o = NewObject();
      o->set("message", std::string("Internal Server Error"));
      return JsonResponse(f.status, o);
    }
    return Error(f.status, "server_error", "Internal server error");
  }

  HttpResponse InternalError(const std::string& what) override {
    return Error(500, "server_error", "Internal server error (emulator: " + what + ")");
  }

  // 500 requests per minute from the source (all keys: everything here is 127.0.0.1).
  std::optional<HttpResponse> CountRequest() {
    const auto now = Clock::now();
    while (!window_.empty() && window_.front() < now - std::chrono::minutes(1)) window_.pop_front();
    if (options_.enforce_rate_limits && window_.size() >= static_cast<size_t>(kRequestsPerMinute)) {
      ++rate_limited_;
      return TooMany(0);
    }
    window_.push_back(now);
    return std::nullopt;
  }

  HttpResponse Route(const HttpRequest& req) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto limited = CountRequest()) return *limited;
    Reconcile();
    const std::string base = BasePath() + "/core";
    std::string path = TrimTrailingSlash(req.path);
    if (path == BasePath() + "/pricebook") {
      if (req.method != "GET") return NotAllowed();
      return Pricebook();
    }
    if (path.compare(0, base.size(), base) != 0) return NotFound("Not found: " + path);
    std::vector<std::string> seg = Split(path.substr(base.size()), '/');
    const std::string& m = req.method;
    if (seg.empty()) return NotFound("Not found: " + path);
    const std::string& top = seg[0];

    if (top == "flavors" && seg.size() == 1 && m == "GET") return ListFlavors(req);
    if (top == "images" && seg.size() == 1 && m == "GET") return ListImages(req);
    if (top == "sg-rules-protocols" && seg.size() == 1 && m == "GET") {
      JsonArray a = NewArray();
      for (const auto& p : Protocols()) a->add(p);
      return Ok("Success", "protocols", a);
    }
    if (top == "environments") return RouteEnvironments(req, seg);
    if (top == "keypairs" && seg.size() == 1) {
      if (m == "GET") return ListKeypairs(req);
      if (m == "POST") return ImportKeypair(req);
      return NotAllowed();
    }
    if (top == "keypair" && seg.size() == 2) {
      if (m == "DELETE") return DeleteKeypair(seg[1]);
      if (m == "PUT") return RenameKeypair(req, seg[1]);
      return NotAllowed();
    }
    if (top == "virtual-machines") return RouteVms(req, seg);
    return NotFound("Not found: " + path);
  }

  static HttpResponse NotAllowed() {
    return Error(405, "not_allowed", "Method not allowed");
  }

  static std::optional<int64_t> ParseId(const std::string& s) {
    if (s.empty() || s.size() > 15 ||
        s.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    return std::stoll(s);
  }

  // --- pricebook ---
  // H-SDK docs/PricebookApi.md get_pricebook: GET /pricebook answers a JSON array of
  // PricebookModel {id, name, value, original_value, discount_applied, start_time, end_time}
  // (no envelope). The API reference (infrahub-doc.nexgencloud.com, "Retrieve Pricebook")
  // names a GPU model per entry, `value` being "price value for the GPU per hour", and shows
  // start_time/end_time null. The values are illustrative (the reference's example: RTX-A4000
  // 0.58); CPU flavors have no entry here.
  static HttpResponse Pricebook() {
    static const std::vector<std::pair<const char*, double>> prices = {
        {"A100-80G-PCIe", 1.35},        {"A100-80G-PCIe-NVLink", 1.40},
        {"H100-80G-PCIe", 1.90},        {"H100-80G-PCIe-NVLink", 1.95},
        {"H100-80G-SXM5", 2.40},        {"L40", 1.00},
        {"RTX-A6000", 0.50},            {"RTX-A4000", 0.58}};
    JsonArray a = NewArray();
    int id = 1;
    for (const auto& [name, value] : prices) {
      JsonObject o = NewObject();
      o->set("id", id++);
      o->set("name", std::string(name));
      o->set("value", value);
      o->set("original_value", value);
      o->set("discount_applied", false);
      o->set("start_time", Poco::Dynamic::Var());
      o->set("end_time", Poco::Dynamic::Var());
      a->add(o);
    }
    std::ostringstream out;
    a->stringify(out);
    HttpResponse r;
    r.status = 200;
    r.body = out.str();
    return r;
  }

  // --- catalogue (plugins/hyperstack/REFERENCE.md §7) ---
  bool InStock(const FlavorDef& f) const {
    return out_of_stock_.count(f.name) == 0 && out_of_stock_.count("*") == 0;
  }

  JsonObject FlavorJson(const FlavorDef& f) const {
    JsonObject o = NewObject();
    o->set("id", f.id);
    o->set("name", std::string(f.name));
    o->set("display_name", std::string(f.name));
    o->set("region_name", std::string(f.region));
    o->set("cpu", f.cpu);
    o->set("ram", f.ram);
    o->set("disk", f.disk);
    o->set("ephemeral", f.ephemeral);
    o->set("gpu", std::string(f.gpu));
    o->set("gpu_count", f.gpu_count);
    o->set("stock_available", InStock(f));
    o->set("labels", NewArray());
    o->set("features", NewObject());
    o->set("created_at", std::string("2024-06-01T00:00:00"));
    return o;
  }

  HttpResponse ListFlavors(const HttpRequest& req) {
    const std::string region = req.Query("region").value_or("");
    // Grouped by (GPU model, region), in catalogue order.
    std::vector<std::pair<std::string, std::string>> groups;
    for (const auto& f : Flavors()) {
      if (!region.empty() && region != f.region) continue;
      std::pair<std::string, std::string> g{f.gpu, f.region};
      if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
    }
    JsonArray data = NewArray();
    for (const auto& [gpu, r] : groups) {
      JsonObject g = NewObject();
      g->set("gpu", gpu);
      g->set("region_name", r);
      JsonArray list = NewArray();
      for (const auto& f : Flavors()) {
        if (gpu == f.gpu && r == f.region) list->add(FlavorJson(f));
      }
      g->set("flavors", list);
      data->add(g);
    }
    return Ok("Success", "data", data);
  }

  HttpResponse ListImages(const HttpRequest& req) {
    const std::string region = req.Query("region").value_or("");
    const std::string search = Lower(req.Query("search").value_or(""));
    JsonArray groups = NewArray();
    int id = 1;
    for (const auto& r : RegionNames()) {
      JsonArray list = NewArray();
      for (const auto& name : ImageNames()) {
        const int this_id = id++;
        if (!region.empty() && region != r) continue;
        if (!search.empty() && Lower(name).find(search) == std::string::npos) continue;
        JsonObject i = NewObject();
        i->set("id", this_id);
        i->set("name", name);
        i->set("region_name", r);
        i->set("type", std::string("Ubuntu"));
        i->set("version", name.find("24.04") != std::string::npos ? std::string("24.04")
                                                                  : std::string("22.04"));
        i->set("size", 10737418240LL);
        i->set("display_size", std::string("10.0 GB"));
        i->set("is_public", true);
        i->set("description", name);
        i->set("labels", NewArray());
        i->set("flavor_restrictions", Poco::Dynamic::Var());
        list->add(i);
      }
      if (list->size() == 0) continue;
      JsonObject g = NewObject();
      g->set("region_name", r);
      g->set("type", std::string("Ubuntu"));
      g->set("logo", std::string("https://infrahub-api.nexgencloud.com/logos/ubuntu.png"));
      g->set("images", list);
      groups->add(g);
    }
    return Ok("Success", "images", groups);
  }

  // --- environments (plugins/hyperstack/REFERENCE.md §3.7) ---
  Environment* EnvByName(const std::string& name) {
    for (auto& [id, e] : envs_) {
      if (e.name == name) return &e;
    }
    return nullptr;
  }

  static JsonObject EnvJson(const Environment& e) {
    JsonObject o = NewObject();
    o->set("id", e.id);
    o->set("name", e.name);
    o->set("org_id", 1001);
    o->set("region", e.region);
    JsonObject features = NewObject();
    features->set("network_optimised", false);
    o->set("features", features);
    o->set("created_at", Rfc3339(e.created));
    return o;
  }

  HttpResponse RouteEnvironments(const HttpRequest& req, const std::vector<std::string>& seg) {
    const std::string& m = req.method;
    if (seg.size() == 1) {
      if (m == "GET") {
        const std::string search = Lower(req.Query("search").value_or(""));
        std::vector<JsonObject> items;
        for (const auto& [id, e] : envs_) {
          if (!search.empty() && Lower(e.name).find(search) == std::string::npos) continue;
          items.push_back(EnvJson(e));
        }
        return Paged(req, "environments", items, "Success", /*all_by_default=*/true);
      }
      if (m == "POST") {
        JsonObject body = ParseObject(req.body);
        if (!body) return BadRequest("The body must be a JSON object");
        // H-SDK docs/CreateEnvironment.md: name and region, both required.
        if (auto e = CheckShape(body, {{"name", JsonType::kString, true},
                                       {"region", JsonType::kString, true}});
            !e.empty()) {
          return BadRequest(e);
        }
        const std::string name = *GetString(body, "name");
        const std::string region = *GetString(body, "region");
        if (name.empty() || name.size() > kMaxName) {
          return BadRequest("\"name\" must be 1 to 50 characters");
        }
        if (!KnownRegion(region)) return BadRequest("Region " + region + " does not exist");
        if (EnvByName(name)) {
          return Error(409, "already_exist", "Environment " + name + " already exists");
        }
        Environment e;
        e.id = next_env_id_++;
        e.name = name;
        e.region = region;
        e.created = SysClock::now();
        envs_[e.id] = e;
        return Ok("Environment created successfully", "environment", EnvJson(e));
      }
      return NotAllowed();
    }
    if (seg.size() == 3 && seg[1] == "name-availability" && m == "GET") {
      JsonObject o = NewObject();
      o->set("status", true);
      o->set("message", std::string("Success"));
      o->set("available", EnvByName(seg[2]) == nullptr);
      return JsonResponse(200, o);
    }
    if (seg.size() != 2) return NotFound("Not found: " + req.path);
    auto id = ParseId(seg[1]);
    auto it = id ? envs_.find(*id) : envs_.end();
    if (it == envs_.end()) return NotFound("Environment not found");
    if (m == "GET") return Ok("Success", "environment", EnvJson(it->second));
    if (m == "PUT") {
      JsonObject body = ParseObject(req.body);
      if (!body) return BadRequest("The body must be a JSON object");
      if (auto e = CheckShape(body, {{"name", JsonType::kString, true}}); !e.empty()) {
        return BadRequest(e);
      }
      const std::string name = *GetString(body, "name");
      if (Environment* other = EnvByName(name); other && other->id != it->first) {
        return Error(409, "already_exist", "Environment " + name + " already exists");
      }
      it->second.name = name;
      return Ok("Environment updated successfully", "environment", EnvJson(it->second));
    }
    if (m == "DELETE") {
      for (const auto& [vid, vm] : vms_) {
        if (vm.env_id == it->first) {
          return BadRequest("Environment " + it->second.name +
                            " still has virtual machines; delete them first");
        }
      }
      for (auto k = keys_.begin(); k != keys_.end();) {
        k = k->second.env_id == it->first ? keys_.erase(k) : std::next(k);
      }
      envs_.erase(it);
      return Ok("Environment deleted successfully");
    }
    return NotAllowed();
  }

  // --- keypairs (plugins/hyperstack/REFERENCE.md §3.6) ---
  JsonObject KeyJson(const Keypair& k) {
    JsonObject o = NewObject();
    o->set("id", k.id);
    o->set("name", k.name);
    auto e = envs_.find(k.env_id);
    if (e != envs_.end()) o->set("environment", EnvJson(e->second));
    o->set("public_key", k.public_key);
    o->set("fingerprint", k.fingerprint);
    o->set("created_at", Rfc3339(k.created));
    return o;
  }

  HttpResponse ListKeypairs(const HttpRequest& req) {
    std::vector<JsonObject> items;
    for (const auto& [id, k] : keys_) items.push_back(KeyJson(k));
    return Paged(req, "keypairs", items, "Success");
  }

  HttpResponse ImportKeypair(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return BadRequest("The body must be a JSON object");
    if (auto e = CheckShape(body, {{"name", JsonType::kString, true},
                                   {"environment_name", JsonType::kString, true},
                                   {"public_key", JsonType::kString, true}});
        !e.empty()) {
      return BadRequest(e);
    }
    const std::string name = *GetString(body, "name");
    const std::string env_name = *GetString(body, "environment_name");
    if (name.empty() || name.size() > kMaxName) {
      return BadRequest("\"name\" must be 1 to 50 characters");
    }
    Environment* env = EnvByName(env_name);
    if (!env) return NotFound("Environment " + env_name + " not found");
    const std::string pub = TrimSpace(*GetString(body, "public_key"));
    auto fp = Fingerprint(pub);
    if (!fp) return BadRequest("\"public_key\" is not a valid OpenSSH public key");
    for (const auto& [id, k] : keys_) {
      if (k.env_id == env->id && k.name == name) {
        return Error(409, "already_exist",
                     "Keypair " + name + " already exists in environment " + env_name);
      }
    }
    Keypair k;
    k.id = next_key_id_++;
    k.name = name;
    k.env_id = env->id;
    k.public_key = pub;
    k.fingerprint = *fp;
    k.created = SysClock::now();
    keys_[k.id] = k;
    return Ok("Imported SSH Key successfully", "keypair", KeyJson(k));
  }

  HttpResponse DeleteKeypair(const std::string& ref) {
    auto id = ParseId(ref);
    if (!id || keys_.erase(*id) == 0) return NotFound("Keypair not found");
    return Ok("Deleted keypair successfully");
  }

  HttpResponse RenameKeypair(const HttpRequest& req, const std::string& ref) {
    auto id = ParseId(ref);
    auto it = id ? keys_.find(*id) : keys_.end();
    if (it == keys_.end()) return NotFound("Keypair not found");
    JsonObject body = ParseObject(req.body);
    if (!body) return BadRequest("The body must be a JSON object");
    if (auto e = CheckShape(body, {{"name", JsonType::kString, true}}); !e.empty()) {
      return BadRequest(e);
    }
    it->second.name = *GetString(body, "name");
    return Ok("Updated keypair successfully", "keypair", KeyJson(it->second));
  }

  // --- paging ---
  // H-SDK (NexGenCloud/hyperstack-sdk-python f130f57, hyperstack/api/virtual_machine_api.py
  // list_vms, keypair_api.py list_key_pairs, environment_api.py list_environments): the query
  // parameters are `page` and `pageSize`; the answer (models Instances, Keypairs,
  // Environments) carries `count`, `page` and `page_size`. An unknown query parameter such as
  // `page_size` is ignored, as by the web framework behind it. Without either parameter,
  // `all_by_default` lists answer the whole list (the environments: H-TF reads them so).
  static HttpResponse Paged(const HttpRequest& req, const std::string& key,
                            const std::vector<JsonObject>& items, const std::string& message,
                            bool all_by_default = false) {
    int page = 1, page_size = kDefaultPageSize;
    if (all_by_default && !req.Query("page") && !req.Query("pageSize")) {
      page_size = std::max<int>(1, static_cast<int>(items.size()));
    }
    try {
      if (auto p = req.Query("page")) page = std::stoi(*p);
      if (auto p = req.Query("pageSize")) page_size = std::stoi(*p);
    } catch (const std::exception&) {
      return BadRequest("page and pageSize must be integers");
    }
    if (page < 1 || page_size < 1) return BadRequest("page and pageSize must be positive");
    JsonArray a = NewArray();
    const size_t from = static_cast<size_t>(page - 1) * page_size;
    for (size_t i = from; i < items.size() && i < from + page_size; ++i) a->add(items[i]);
    JsonObject o = NewObject();
    o->set("status", true);
    o->set("message", message);
    o->set(key, a);
    o->set("count", items.size());
    o->set("page", page);
    o->set("page_size", page_size);
    return JsonResponse(200, o);
  }

  // --- virtual machines (plugins/hyperstack/REFERENCE.md §3.1-3.4, §5) ---
  std::string StatusOf(const Vm& vm) {
    if (vm.gone_at) return "DELETING";
    InstanceStatus s = backend_->State(vm.backend_id);
    switch (s.state) {
      case InstanceState::kProvisioning:
        return Clock::now() - vm.created_steady < kCreatingTime ? "CREATING" : "BUILD";
      case InstanceState::kRunning:
        return "ACTIVE";
      case InstanceState::kError:
        return "ERROR";
      case InstanceState::kStopped:
        return "SHUTOFF";  // plugins/hyperstack/REFERENCE.md: stopped, still billed
      case InstanceState::kGone:
        return "DELETING";
    }
    return "BUILD";
  }

  JsonArray RulesJson(const Vm& vm) const {
    JsonArray a = NewArray();
    for (const auto& r : vm.rules) a->add(RuleJson(r));
    return a;
  }

  static JsonObject RuleJson(const Rule& r) {
    JsonObject o = NewObject();
    o->set("id", r.id);
    for (const char* k : {"direction", "protocol", "ethertype", "remote_ip_prefix",
                          "port_range_min", "port_range_max"}) {
      if (r.body->has(k)) o->set(k, r.body->get(k));
    }
    o->set("status", std::string("SUCCESS"));
    o->set("created_at", Rfc3339(r.created));
    return o;
  }

  std::set<int> AllowedPorts(const Vm& vm) const {
    // no public address, nothing reachable (plugins/hyperstack/REFERENCE.md §5)
    if (!vm.floating_ip) return {};
    return HyperstackAllowedPorts(RulesJson(vm));
  }

  // What reaches the VM on its environment's private network: its ingress IPv4 rules of tcp,
  // udp or any protocol (a rule without port_range_min/max: every port), each from its
  // remote_ip_prefix; nothing else (egress and icmp rules are not filtered here).
  static PrivateIngress PrivateIngressOf(const Vm& vm) {
    std::vector<PrivateRule> out;
    for (const auto& r : vm.rules) {
      if (GetString(r.body, "direction").value_or("") != "ingress" ||
          GetString(r.body, "ethertype").value_or("") != "IPv4") {
        continue;
      }
      const std::string protocol = GetString(r.body, "protocol").value_or("");
      const auto lo = GetInt(r.body, "port_range_min"), hi = GetInt(r.body, "port_range_max");
      for (const char* p : {"tcp", "udp"}) {
        if (protocol != p && protocol != "any") continue;
        PrivateRule rule;
        rule.protocol = p;
        rule.ports = lo && hi ? PortRange{static_cast<int>(*lo), static_cast<int>(*hi)}
                              : PortRange{1, 65535};
        rule.sources = {GetString(r.body, "remote_ip_prefix").value_or("0.0.0.0/0")};
        out.push_back(rule);
      }
    }
    return out;
  }

  // Whether the floating IP is attached: ACTIVE, and the attach delay passed.
  bool IpAttached(const Vm& vm, const InstanceStatus& s) const {
    if (!vm.floating_ip || s.state != InstanceState::kRunning || s.public_ip.empty()) return false;
    const double delay = vm.ip_after_seconds >= 0 ? vm.ip_after_seconds : floating_ip_delay_;
    return s.running_for.count() >= static_cast<int64_t>(delay * 1000);
  }

  JsonObject VmJson(const Vm& vm) {
    InstanceStatus s = backend_->State(vm.backend_id);
    const std::string status = StatusOf(vm);
    JsonObject o = NewObject();
    o->set("id", vm.id);
    o->set("name", vm.name);
    o->set("status", status);
    auto env = envs_.find(vm.env_id);
    if (env != envs_.end()) o->set("environment", EnvJson(env->second));
    JsonObject image = NewObject();
    image->set("name", vm.image);
    o->set("image", image);
    JsonObject flavor = NewObject();
    flavor->set("id", vm.flavor->id);
    flavor->set("name", std::string(vm.flavor->name));
    flavor->set("cpu", vm.flavor->cpu);
    flavor->set("ram", vm.flavor->ram);
    flavor->set("disk", vm.flavor->disk);
    flavor->set("ephemeral", vm.flavor->ephemeral);
    flavor->set("gpu", std::string(vm.flavor->gpu));
    flavor->set("gpu_count", vm.flavor->gpu_count);
    o->set("flavor", flavor);
    o->set("os", vm.image);
    JsonObject keypair = NewObject();
    keypair->set("name", vm.key_name);
    o->set("keypair", keypair);
    o->set("volume_attachments", NewArray());
    o->set("security_rules", RulesJson(vm));
    std::string vm_state = "building", power = "NOSTATE";
    if (status == "ACTIVE") vm_state = "active", power = "RUNNING";
    if (status == "ERROR") vm_state = "error";
    if (status == "DELETING") vm_state = "deleted";
    o->set("power_state", power);
    o->set("vm_state", vm_state);
    const bool booted = status != "CREATING";
    o->set("fixed_ip", booted ? Poco::Dynamic::Var(s.private_ip) : Poco::Dynamic::Var());
    const bool attached = !vm.gone_at && IpAttached(vm, s);
    o->set("floating_ip", attached ? Poco::Dynamic::Var(s.public_ip) : Poco::Dynamic::Var());
    std::string fip_status = "UNATTACHED";
    if (vm.floating_ip) fip_status = attached ? "ATTACHED" : "ATTACHING";
    o->set("floating_ip_status", fip_status);
    o->set("port_randomization", vm.port_randomization && vm.floating_ip);
    o->set("port_randomization_status",
           std::string(vm.port_randomization && vm.floating_ip ? "ENABLED" : "DISABLED"));
    o->set("locked", false);
    o->set("contract_id", Poco::Dynamic::Var());
    o->set("created_at", Rfc3339(vm.created));
    JsonArray labels = NewArray();
    for (const auto& l : vm.labels) labels->add(l);
    o->set("labels", labels);
    o->set("requires_public_ip", vm.floating_ip);
    o->set("callback_url", vm.callback_url);
    o->set("features", NewObject());
    return o;
  }

  // Deleted VMs leave after deleting_seconds; vanished machines at once.
  void Reconcile() {
    ForgetEnded(vms_, [](const auto& r) -> const auto& { return r.gone_at; });
  }

  // One security rule body; "" when it has the documented shape and values.
  static std::string CheckRule(const JsonObject& r, const std::string& where) {
    if (auto e = CheckShape(r,
                            {{"direction", JsonType::kString, true},
                             {"protocol", JsonType::kString, true},
                             {"ethertype", JsonType::kString, true},
                             {"remote_ip_prefix", JsonType::kString, true},
                             {"port_range_min", JsonType::kInteger},
                             {"port_range_max", JsonType::kInteger}},
                            where);
        !e.empty()) {
      return e;
    }
    const std::string prefix = where.empty() ? "" : where + ".";
    const std::string dir = *GetString(r, "direction");
    if (dir != "ingress" && dir != "egress") {
      return "\"" + prefix + "direction\" must be ingress or egress";
    }
    const std::string eth = *GetString(r, "ethertype");
    if (eth != "IPv4" && eth != "IPv6") return "\"" + prefix + "ethertype\" must be IPv4 or IPv6";
    const std::string proto = *GetString(r, "protocol");
    const auto& protos = Protocols();
    if (std::find(protos.begin(), protos.end(), proto) == protos.end()) {
      return "\"" + prefix + "protocol\" must be one of GET /core/sg-rules-protocols";
    }
    const std::string net = *GetString(r, "remote_ip_prefix");
    if (eth == "IPv4" && !CidrContains(net, net.substr(0, net.find('/')))) {
      return "\"" + prefix + "remote_ip_prefix\" must be a CIDR such as 0.0.0.0/0";
    }
    auto lo = GetInt(r, "port_range_min"), hi = GetInt(r, "port_range_max");
    if (lo.has_value() != hi.has_value()) {
      return "\"" + prefix + "port_range_min\" and \"port_range_max\" go together";
    }
    if (lo && (*lo < 1 || *hi > 65535 || *lo > *hi)) {
      return "\"" + prefix + "port_range_min/max\" must satisfy 1 <= min <= max <= 65535";
    }
    return "";
  }

  static bool SameRule(const JsonObject& a, const JsonObject& b) {
    for (const char* k : {"direction", "protocol", "ethertype", "remote_ip_prefix",
                          "port_range_min", "port_range_max"}) {
      if (a->has(k) != b->has(k)) return false;
      if (a->has(k) && a->get(k).toString() != b->get(k).toString()) return false;
    }
    return true;
  }

  Rule NewRule(const JsonObject& body) {
    Rule r;
    r.id = next_rule_id_++;
    r.body = body;
    r.created = SysClock::now();
    return r;
  }

  bool NameTaken(const std::string& name) const {
    for (const auto& [id, vm] : vms_) {
      if (!vm.gone_at && vm.name == name) return true;
    }
    return false;
  }

  HttpResponse CreateVms(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return BadRequest("The body must be a JSON object");
    // H-SDK docs/CreateInstancesPayload.md: image_name is optional there (a VM may boot from
    // a volume, volume_name); this emulator has no volumes, so it needs one or the other.
    if (auto e = CheckShape(body, {{"name", JsonType::kString, true},
                                   {"environment_name", JsonType::kString, true},
                                   {"image_name", JsonType::kString},
                                   {"flavor_name", JsonType::kString, true},
                                   {"key_name", JsonType::kString, true},
                                   {"count", JsonType::kInteger, true},
                                   {"assign_floating_ip", JsonType::kBool},
                                   {"enable_port_randomization", JsonType::kBool},
                                   {"security_rules", JsonType::kArray},
                                   {"user_data", JsonType::kString},
                                   {"labels", JsonType::kArray},
                                   {"callback_url", JsonType::kString},
                                   {"create_bootable_volume", JsonType::kBool},
                                   {"volume_name", JsonType::kString},
                                   {"profile", JsonType::kObject},
                                   {"flavor", JsonType::kObject}});
        !e.empty()) {
      return BadRequest(e);
    }
    const std::string name = *GetString(body, "name");
    if (name.empty() || name.size() > kMaxName) {
      return BadRequest("\"name\" must be 1 to 50 characters");
    }
    const int64_t count = *GetInt(body, "count");
    if (count < 1 || count > kMaxCount) return BadRequest("\"count\" must be between 1 and 20");
    const std::string env_name = *GetString(body, "environment_name");
    Environment* env = EnvByName(env_name);
    if (!env) return NotFound("Environment " + env_name + " not found");
    const std::string flavor_name = *GetString(body, "flavor_name");
    const FlavorDef* flavor = FindFlavor(flavor_name, env->region);
    if (!flavor) return NotFound("Flavor " + flavor_name + " not found in " + env->region);
    if (!GetString(body, "image_name")) {
      return BadRequest(GetString(body, "volume_name")
                            ? "Booting from a volume is not served by this emulator"
                            : "\"image_name\" is required unless the VM boots from volume_name");
    }
    const std::string image = *GetString(body, "image_name");
    const auto& images = ImageNames();
    if (std::find(images.begin(), images.end(), image) == images.end()) {
      return NotFound("Image " + image + " not found in " + env->region);
    }
    const std::string key_name = *GetString(body, "key_name");
    const Keypair* key = nullptr;
    for (const auto& [id, k] : keys_) {
      if (k.env_id == env->id && k.name == key_name) key = &k;
    }
    if (!key) return NotFound("Keypair " + key_name + " not found in environment " + env_name);
    const std::string user_data = GetString(body, "user_data").value_or("");
    if (user_data.size() > kMaxUserData) return BadRequest("\"user_data\" is larger than 64 KiB");
    std::vector<JsonObject> rules;
    if (JsonArray a = GetArray(body, "security_rules")) {
      if (auto e = CheckItems(a, JsonType::kObject, "security_rules"); !e.empty()) {
        return BadRequest(e);
      }
      for (unsigned i = 0; i < a->size(); ++i) {
        JsonObject r = a->getObject(i);
        if (auto e = CheckRule(r, "security_rules[" + std::to_string(i) + "]"); !e.empty()) {
          return BadRequest(e);
        }
        rules.push_back(r);
      }
    }
    std::vector<std::string> labels;
    if (JsonArray a = GetArray(body, "labels")) {
      if (auto e = CheckItems(a, JsonType::kString, "labels"); !e.empty()) return BadRequest(e);
      for (unsigned i = 0; i < a->size(); ++i) labels.push_back(a->get(i).convert<std::string>());
    }
    std::vector<std::string> names;
    for (int64_t i = 1; i <= count; ++i) {
      names.push_back(count == 1 ? name : name + "-" + std::to_string(i));
    }
    for (const auto& n : names) {
      if (NameTaken(n)) {
        return Error(409, "already_exist", "A virtual machine named " + n + " already exists");
      }
    }
    if (!InStock(*flavor) || faults_.Take("capacity", req.method, req.path)) {
      return BadRequest("Not enough stock available for flavor " + flavor_name + " in " +
                        env->region + "; try another flavor or region later");
    }
    if (faults_.Take("payment_required", req.method, req.path)) {
      return BadRequest("Insufficient balance to create the resource");
    }
    JsonArray out = NewArray();
    for (const auto& n : names) {
      Vm vm;
      vm.id = next_vm_id_++;
      vm.name = n;
      vm.env_id = env->id;
      vm.flavor = flavor;
      vm.image = image;
      vm.key_name = key_name;
      vm.user_data = user_data;
      vm.floating_ip = GetBool(body, "assign_floating_ip").value_or(false);
      vm.port_randomization =
          force_port_randomization_ || GetBool(body, "enable_port_randomization").value_or(true);
      for (const auto& r : rules) vm.rules.push_back(NewRule(r));
      vm.labels = labels;
      vm.callback_url = GetString(body, "callback_url").value_or("");
      vm.created = SysClock::now();
      vm.created_steady = Clock::now();
      if (auto f = faults_.Take("ip_after_boot")) vm.ip_after_seconds = f->seconds;
      InstanceSpec spec;
      spec.cloud = name_;
      spec.name = n;
      spec.image = image;
      spec.gpu_type = flavor->testvm_gpu;
      spec.gpu_count = flavor->gpu_count;
      spec.user_data = user_data;
      spec.ssh_public_keys = {key->public_key};
      spec.ssh_user = "ubuntu";
      spec.private_network = "env-" + std::to_string(env->id);  // the environment's network
      const std::set<int> ports = AllowedPorts(vm);
      spec.reachable = ToPortSet(ports);
      spec.faults = faults_.TakeBootFaults();
      try {
        vm.backend_id = backend_->Create(spec);
      } catch (const BackendError& e) {
        return Error(500, "server_error", std::string("Internal server error (emulator backend: ") +
                                              e.what() + ")");
      }
      backend_->SetPrivateIngress(vm.backend_id, PrivateIngressOf(vm));
      vms_[vm.id] = vm;
      out->add(VmJson(vms_.at(vm.id)));
    }
    return Ok("Creating " + std::to_string(names.size()) + " virtual machine(s)", "instances", out);
  }

  HttpResponse ListVms(const HttpRequest& req) {
    const std::string search = Lower(req.Query("search").value_or(""));
    const std::string env = req.Query("environment").value_or("");
    const bool exact = Lower(req.Query("exact_environment_match").value_or("false")) == "true";
    std::vector<JsonObject> items;
    for (const auto& [id, vm] : vms_) {  // ids grow: oldest first
      if (!search.empty() && Lower(vm.name).find(search) == std::string::npos) continue;
      if (!env.empty()) {
        auto e = envs_.find(vm.env_id);
        const std::string en = e == envs_.end() ? "" : e->second.name;
        if (exact ? en != env : en.find(env) == std::string::npos) continue;
      }
      items.push_back(VmJson(vm));
    }
    return Paged(req, "instances", items, "Getting VM list success");
  }

  HttpResponse RouteVms(const HttpRequest& req, const std::vector<std::string>& seg) {
    const std::string& m = req.method;
    if (seg.size() == 1) {
      if (m == "GET") return ListVms(req);
      if (m == "POST") return CreateVms(req);
      return NotAllowed();
    }
    if (seg.size() == 3 && seg[1] == "name-availability" && m == "GET") {
      JsonObject o = NewObject();
      o->set("status", true);
      o->set("message", std::string("Success"));
      o->set("available", !NameTaken(seg[2]));
      return JsonResponse(200, o);
    }
    auto id = ParseId(seg[1]);
    auto it = id ? vms_.find(*id) : vms_.end();
    if (it == vms_.end()) return NotFound("Virtual machine not found");
    Vm& vm = it->second;
    if (seg.size() == 2) {
      if (m == "GET") return Ok("Getting VM details success", "instance", VmJson(vm));
      if (m == "DELETE") return DeleteVm(vm);
      return NotAllowed();
    }
    if (seg[2] == "sg-rules") {
      if (seg.size() == 3 && m == "POST") return AddRule(req, vm);
      if (seg.size() == 4 && m == "DELETE") return DeleteRule(vm, seg[3]);
      return NotAllowed();
    }
    return NotFound("Not found: " + req.path);
  }

  HttpResponse DeleteVm(Vm& vm) {
    if (vm.gone_at) return Ok("Deleting virtual machine " + vm.name);
    const std::string status = StatusOf(vm);
    if (status == "CREATING" || status == "BUILD") {
      return BadRequest("VM " + vm.name +
                        " is currently being created and cannot be deleted yet. Please wait "
                        "until the creation process is finished before attempting deletion.");
    }
    backend_->Delete(vm.backend_id);
    vm.gone_at = Clock::now() + std::chrono::milliseconds(
                                    static_cast<int64_t>(deleting_seconds_ * 1000));
    return Ok("Deleting virtual machine " + vm.name);
  }

  HttpResponse AddRule(const HttpRequest& req, Vm& vm) {
    if (vm.gone_at) return NotFound("Virtual machine not found");
    JsonObject body = ParseObject(req.body);
    if (!body) return BadRequest("The body must be a JSON object");
    if (auto e = CheckRule(body, ""); !e.empty()) return BadRequest(e);
    for (const auto& r : vm.rules) {
      if (SameRule(r.body, body)) {
        return Error(409, "already_exist", "Security rule already exists");
      }
    }
    vm.rules.push_back(NewRule(body));
    backend_->SetReachablePorts(vm.backend_id, ToPortSet(AllowedPorts(vm)));
    backend_->SetPrivateIngress(vm.backend_id, PrivateIngressOf(vm));
    return Ok("Security rule created successfully", "security_rule", RuleJson(vm.rules.back()));
  }

  HttpResponse DeleteRule(Vm& vm, const std::string& ref) {
    auto rid = ParseId(ref);
    auto pos = std::find_if(vm.rules.begin(), vm.rules.end(),
                            [&](const Rule& r) { return rid && r.id == *rid; });
    if (pos == vm.rules.end()) return NotFound("Security rule not found");
    vm.rules.erase(pos);
    backend_->SetReachablePorts(vm.backend_id, ToPortSet(AllowedPorts(vm)));
    backend_->SetPrivateIngress(vm.backend_id, PrivateIngressOf(vm));
    return Ok("Security rule deleted successfully");
  }

  std::mutex mu_;
  std::map<int64_t, Environment> envs_;
  std::map<int64_t, Keypair> keys_;
  std::map<int64_t, Vm> vms_;
  std::deque<Clock::time_point> window_;
  int64_t rate_limited_ = 0;
  double floating_ip_delay_ = 1;
  double deleting_seconds_ = 1;
  bool force_port_randomization_ = false;
  std::set<std::string> out_of_stock_;
  int64_t next_env_id_ = 1;
  int64_t next_key_id_ = 5001;
  int64_t next_vm_id_ = 200001;
  int64_t next_rule_id_ = 900001;
};

}  // namespace

std::unique_ptr<CloudApi> MakeHyperstackApi(InstanceBackend* backend, CloudOptions options) {
  return std::make_unique<HyperstackApi>(backend, std::move(options));
}

}  // namespace gpuprov::emulator
