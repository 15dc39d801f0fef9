// SPDX-License-Identifier: Apache-2.0
//
// Massed Compute VM API v1 (/api/v1: token validation, GPU inventory, images, account SSH
// keys, launch/list/get/terminate/restart of instances) as described in
// plugins/massedcompute/REFERENCE.md. Mixed key cases as the reference shows them
// (camelCase request bodies, snake_case inventory). The reference documents no error body:
// every error here is {"message": "..."} (a guess, listed in README.md). No firewall API:
// every port an instance listens on is reachable (PortSet::All()). The SSH route: the
// registered keys named at launch are installed for the instance's `username` ("Ubuntu"); the
// startup `command` is stored and shown as `command_startup`, never run.
#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <variant>

#include "cloud_api.h"
#include "request_shape.h"

namespace gpuprov::emulator {
namespace {

using Clock = std::chrono::steady_clock;
using SysClock = std::chrono::system_clock;

// After the machine runs, the OS is still booting this long: status "rented" with
// os_booted 0 (the reference's readiness rule wants rented, os_booted 1 and an ip).
constexpr std::chrono::milliseconds kOsBootTime{500};
constexpr const char* kSshUser = "Ubuntu";  // the reference's `username` example
constexpr size_t kMaxNameLength = 64;       // (not from the reference)

struct RegionDef {
  const char* name;
  const char* description;
};

const std::vector<RegionDef>& Regions() {
  static const std::vector<RegionDef> regions = {{"us-central-2", "Kansas City, MO"},
                                                 {"us-central-3", "Des Moines, IA"}};
  return regions;
}

const RegionDef* FindRegion(const std::string& name) {
  for (const auto& r : Regions()) {
    if (name == r.name) return &r;
  }
  return nullptr;
}

// Products (plugins/massedcompute/REFERENCE.md §7; prices, specs and capacity are illustrative).
struct ProductDef {
  const char* name;
  const char* description;
  int gpu_count;
  int price_cents_per_hour;
  int vcpus;
  int memory_gib;
  int storage_gb;
  const char* testvm_gpu;  // the test VM's GPU file type
  std::vector<std::string> regions;
  int capacity;  // capacity_available before any launch
};

const std::vector<ProductDef>& Products() {
  static const std::vector<ProductDef> products = {
      {"gpu_1x_a6000", "1x RTX A6000 (48GB)", 1, 57, 6, 48, 256, "RTX-A6000",
       {"us-central-2", "us-central-3"}, 8},
      {"gpu_2x_a6000", "2x RTX A6000 (48GB)", 2, 114, 12, 96, 512, "RTX-A6000",
       {"us-central-2"}, 4},
      {"gpu_4x_a6000", "4x RTX A6000 (48GB)", 4, 228, 24, 192, 1024, "RTX-A6000",
       {"us-central-2"}, 2},
      {"gpu_8x_a6000", "8x RTX A6000 (48GB)", 8, 456, 48, 384, 2048, "RTX-A6000",
       {"us-central-2"}, 1},
      {"gpu_1x_a6000_spot", "1x RTX A6000 (48GB) [spot]", 1, 39, 6, 48, 256, "RTX-A6000",
       {"us-central-2"}, 8},
      {"gpu_1x_l40", "1x L40 (48GB)", 1, 99, 12, 64, 512, "L40", {"us-central-3"}, 4},
      {"gpu_1x_a100", "1x A100 (80GB)", 1, 139, 12, 96, 512, "A100-80GB", {"us-central-3"}, 4},
      {"gpu_1x_h100", "1x H100 (80GB)", 1, 239, 20, 128, 1024, "H100-80GB", {"us-central-3"}, 4},
      {"gpu_1x_h100_nvl", "1x H100 NVL (94GB)", 1, 259, 20, 128, 1024, "H100-NVL",
       {"us-central-3"}, 2},
      {"gpu_8x_h100_sxm5", "8x H100 (80GB) SXM5", 8, 2152, 160, 1024, 8192, "H100-80GB",
       {"us-central-3"}, 1},
      // An internal-only SKU listed at $0/hr: "The '1x H100 SXM5' SKU exists in the catalog but
      // is internal-only" (massed-compute-agent-plugin skills/mc-pick-gpu/SKILL.md). Launching
      // it is refused (the answer is not documented).
      {"gpu_1x_h100_sxm5", "1x H100 SXM5", 1, 0, 20, 128, 1024, "H100-80GB", {"us-central-3"}, 4},
  };
  return products;
}

const ProductDef* FindProduct(const std::string& name) {
  for (const auto& p : Products()) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

struct ImageDef {
  int id;
  const char* name;
  const char* description;
};

const std::vector<ImageDef>& Images() {
  static const std::vector<ImageDef> images = {
      {184, "Ubuntu Server 24.04", "Ubuntu Server 24.04 with NVIDIA drivers and Docker"},
      {142, "Ubuntu Server 22.04 w/ drivers", "Ubuntu Server 22.04 with NVIDIA drivers"},
      {97, "Ubuntu Desktop 22.04", "Ubuntu Desktop 22.04 with NVIDIA drivers (VNC)"},
  };
  return images;
}

const ImageDef* FindImage(int64_t id) {
  for (const auto& i : Images()) {
    if (id == i.id) return &i;
  }
  return nullptr;
}

HttpResponse Message(int status, const std::string& message) {
  JsonObject o = NewObject();
  o->set("message", message);
  return JsonResponse(status, o);
}

// Key names: letters, digits and spaces (plugins/massedcompute/REFERENCE.md §3.5, from Brev's
// notes).
bool IsKeyName(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == ' ';
  });
}

bool LooksLikePublicKey(const std::string& key) {
  static const std::vector<std::string> prefixes = {"ssh-", "ecdsa-", "sk-"};
  const bool typed = std::any_of(prefixes.begin(), prefixes.end(),
                                 [&](const std::string& p) { return key.rfind(p, 0) == 0; });
  return typed && key.find(' ') != std::string::npos;
}

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// The image's own account setup, as the cloud's image does it: the user `username` with
// passwordless sudo and the launch's keys. Given to the test VM's cloud-init; the memory
// backend ignores it.
std::string AccountSetup(const std::vector<std::string>& keys) {
  std::string s =
      "#cloud-config\n"
      "users:\n"
      "  - default\n"
      "  - name: " +
      std::string(kSshUser) +
      "\n"
      "    gecos: Massed Compute user\n"
      "    groups: [adm, sudo]\n"
      "    sudo: [\"ALL=(ALL) NOPASSWD:ALL\"]\n"
      "    shell: /bin/bash\n"
      "    lock_passwd: true\n"
      "    ssh_authorized_keys:\n";
  for (const auto& k : keys) s += "      - \"" + k + "\"\n";
  return s;
}

class MassedComputeApi : public CloudApi {
 public:
  MassedComputeApi(InstanceBackend* backend, CloudOptions options)
      : CloudApi("massedcompute", backend, std::move(options)) {}

  std::string BasePath() const override { return "/api/v1"; }

  JsonObject Counts() override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    JsonObject o = NewObject();
    o->set("instances", instances_.size());
    o->set("firewalls", 0);
    o->set("ssh_keys", keys_.size());
    o->set("backend_instances", backend_->LiveCount(name_));
    o->set("launches", launches_);
    return o;
  }

  JsonArray Instances() override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    JsonArray a = NewArray();
    for (const auto& [id, in] : instances_) {
      JsonObject row = InstanceRow(id, in.name, in.backend_id);
      row->set("status", View(in).status);
      JsonArray keys = NewArray();
      for (const auto& k : in.key_names) keys->add(k);
      row->set("ssh_key_names", keys);
      row->set("command_startup", in.command);
      a->add(row);
    }
    return a;
  }

  void Reset() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, in] : instances_) backend_->Delete(in.backend_id);
    instances_.clear();
    keys_.clear();
    faults_.Clear();
    read_only_tokens_.clear();
    capacity_.clear();
    single_shape_ = false;
    terminating_seconds_ = 1;
    launches_ = 0;
    omit_os_booted_ = false;
    image_field_ = "imageId";
  }

  std::string Configure(const JsonObject& settings) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (JsonArray a = GetArray(settings, "read_only_tokens")) {
      read_only_tokens_.clear();
      for (unsigned i = 0; i < a->size(); ++i) read_only_tokens_.insert(a->get(i).toString());
    }
    if (JsonObject c = GetObject(settings, "capacity")) {
      for (const auto& [product, value] : *c) {
        if (!FindProduct(product) && product != "*") return "capacity: unknown product " + product;
        if (!value.isInteger() || value.convert<int>() < 0) {
          return "capacity." + product + " must be a count >= 0";
        }
        capacity_[product] = value.convert<int>();
      }
    }
    if (auto v = GetBool(settings, "single_instance_shape")) single_shape_ = *v;
    // omit_os_booted: instances carry no os_booted and say "pending", then "Running" once the
    // OS is up, as the vendor's fixture (massed-compute-mcp bafb889
    // packages/node/tests/forward.test.ts: {uuid, name, ip, username, password,
    // status:"Running"}) and agent plugin (skills/mc-launch-vms/SKILL.md: "from `pending` to
    // `running`") show them.
    if (auto v = GetBool(settings, "omit_os_booted")) omit_os_booted_ = *v;
    // launch_image_field: "imageId" (integer, massed-compute-mcp d11c49a tools.json
    // instances_launch) or "os_image_name" (string, what skills/mc-launch-vms/SKILL.md says
    // the REST launch takes); the two sources disagree.
    if (auto v = GetString(settings, "launch_image_field")) {
      if (*v != "imageId" && *v != "os_image_name") {
        return "launch_image_field must be imageId or os_image_name";
      }
      image_field_ = *v;
    }
    if (auto v = GetDouble(settings, "terminating_seconds")) terminating_seconds_ = *v;
    return CloudApi::Configure(settings);
  }

 protected:
  struct Instance {
    std::string uuid;
    std::string name;
    const ProductDef* product = nullptr;
    const ImageDef* image = nullptr;
    std::string region;
    std::string command;
    std::vector<std::string> key_names;
    std::string password;
    std::string backend_id;
    SysClock::time_point created;
    double ip_after_seconds = 0;  // fault ip_after_boot
    std::optional<Clock::time_point> terminate_at;
  };
  struct SshKey {
    std::string id;
    std::string name;
    std::string public_key;
  };

  std::optional<HttpResponse> Authenticate(const HttpRequest& req) override {
    const std::string token = req.BearerToken();
    const bool read_only = [&] {
      std::lock_guard<std::mutex> lock(mu_);
      return read_only_tokens_.count(token) > 0;
    }();
    if (!TokenAccepted(token) && !read_only) return Message(401, "Unauthenticated.");
    if (faults_.Take("auth_failure", req.method, req.path)) return Message(401, "Unauthenticated.");
    // Read-only keys may list and get (plugins/massedcompute/REFERENCE.md §1); 403 is the likely
    // status (plugins/massedcompute/REFERENCE.md §8).
    if (read_only && req.method != "GET" &&
        TrimTrailingSlash(req.path) != BasePath() + "/account/token/validation") {
      return Message(403, "This API key is read-only: it cannot launch, restart or terminate "
                          "instances or change SSH keys.");
    }
    return std::nullopt;
  }

  HttpResponse Throttled(const HttpRequest& /*req*/, const Fault& f) override {
    HttpResponse r = Message(429, "Too Many Attempts.");
    if (f.retry_after > 0) r.SetHeader("Retry-After", std::to_string(f.retry_after));
    return r;
  }

  // value "after_create": a launch is carried out, then answered with the 5xx (the ambiguous
  // failure after which a client must list by name before launching again,
  // plugins/massedcompute/REFERENCE.md §8).
  HttpResponse ServerError(const HttpRequest& req, const Fault& f) override {
    if (f.value == "after_create" && req.method == "POST" &&
        TrimTrailingSlash(req.path) == BasePath() + "/instance/launch") {
      std::lock_guard<std::mutex> lock(mu_);
      Reconcile();
      Launch(req);
    }
    return Message(f.status, "Server Error");
  }

  HttpResponse InternalError(const std::string& what) override {
    return Message(500, "Server Error (emulator: " + what + ")");
  }

  HttpResponse Route(const HttpRequest& req) override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    const std::string base = BasePath();
    const std::string path = TrimTrailingSlash(req.path);
    if (path.compare(0, base.size(), base) != 0) return NotFound();
    const std::vector<std::string> seg = Split(path.substr(base.size()), '/');
    const std::string& m = req.method;
    if (seg.empty()) return NotFound();
    if (seg.size() == 3 && seg[0] == "account" && seg[1] == "token" &&
        seg[2] == "validation" && m == "POST") {
      return Message(200, "Valid Token");
    }
    if (seg.size() == 1 && seg[0] == "gpu-inventory" && m == "GET") return Inventory();
    if (seg.size() == 1 && seg[0] == "images" && m == "GET") return ListImages();
    if (seg[0] == "ssh-keys") {
      if (seg.size() == 1 && m == "GET") return ListKeys();
      if (seg.size() == 1 && m == "POST") return AddKey(req);
      if (seg.size() == 2 && m == "DELETE") return DeleteKey(seg[1]);
      return MethodNotAllowed();
    }
    if (seg[0] == "instance") {
      if (seg.size() == 1 && m == "GET") return ListInstances();
      if (seg.size() == 2 && seg[1] == "launch" && m == "POST") return Launch(req);
      if (seg.size() == 2 && seg[1] == "terminate" && m == "POST") return Terminate(req);
      if (seg.size() == 2 && seg[1] == "restart" && m == "POST") return Restart(req);
      if (seg.size() == 2 && m == "GET") return GetInstance(seg[1]);
      return MethodNotAllowed();
    }
    return NotFound();
  }

  static HttpResponse NotFound() { return Message(404, "Not Found"); }
  static HttpResponse MethodNotAllowed() {
    return Message(405, "The method is not supported for this route. (not from the reference)");
  }
  static HttpResponse Invalid(const std::string& detail) { return Message(400, detail); }

  // --- discovery (plugins/massedcompute/REFERENCE.md §3.6) ---
  int CapacityOf(const ProductDef& p) const {
    int base = p.capacity;
    if (auto it = capacity_.find("*"); it != capacity_.end()) base = it->second;
    if (auto it = capacity_.find(p.name); it != capacity_.end()) base = it->second;
    int used = 0;
    for (const auto& [id, in] : instances_) used += in.product == &p && !in.terminate_at;
    return std::max(0, base - used);
  }

  static JsonObject RegionJson(const std::string& name) {
    JsonObject o = NewObject();
    o->set("name", name);
    const RegionDef* r = FindRegion(name);
    o->set("description", std::string(r ? r->description : ""));
    return o;
  }

  HttpResponse Inventory() {
    JsonObject inv = NewObject();
    for (const auto& p : Products()) {
      JsonObject type = NewObject();
      type->set("name", std::string(p.name));
      type->set("description", std::string(p.description));
      type->set("price_cents_per_hour", p.price_cents_per_hour);
      JsonObject specs = NewObject();
      specs->set("vcpu_count", p.vcpus);
      specs->set("memory_gib", p.memory_gib);
      specs->set("storage_gb", p.storage_gb);
      type->set("specs", specs);
      JsonObject entry = NewObject();
      entry->set("instance_type", type);
      const int capacity = CapacityOf(p);
      JsonArray regions = NewArray();
      if (capacity > 0) {
        for (const auto& r : p.regions) regions->add(RegionJson(r));
      }
      entry->set("regions_with_capacity_available", regions);
      entry->set("capacity_available", capacity);
      inv->set(p.name, entry);
    }
    JsonObject o = NewObject();
    o->set("gpu_inventory", inv);
    return JsonResponse(200, o);
  }

  static HttpResponse ListImages() {
    JsonArray a = NewArray();
    for (const auto& i : Images()) {
      JsonObject o = NewObject();
      o->set("vm_image_id", i.id);
      o->set("vm_image_name", std::string(i.name));
      o->set("vm_image_description", std::string(i.description));
      a->add(o);
    }
    JsonObject o = NewObject();
    o->set("images", a);
    return JsonResponse(200, o);
  }

  // --- SSH keys (plugins/massedcompute/REFERENCE.md §3.5) ---
  const SshKey* KeyByName(const std::string& name) const {
    for (const auto& [id, k] : keys_) {
      if (k.name == name) return &k;
    }
    return nullptr;
  }

  HttpResponse ListKeys() {
    JsonArray a = NewArray();
    for (const auto& [id, k] : keys_) {
      JsonObject o = NewObject();
      o->set("id", k.id);
      o->set("name", k.name);
      o->set("public_key", k.public_key);
      a->add(o);
    }
    JsonObject o = NewObject();
    o->set("sshKeys", a);
    return JsonResponse(200, o);
  }

  HttpResponse AddKey(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Invalid("The request body must be a JSON object.");
    if (auto e = CheckShape(body, {{"name", JsonType::kString, true},
                                   {"publicKey", JsonType::kString, true}});
        !e.empty()) {
      return Invalid(e);
    }
    const std::string name = *GetString(body, "name");
    const std::string pub = Trim(*GetString(body, "publicKey"));
    if (!IsKeyName(name)) {
      return Invalid("The name may contain only letters, digits and spaces (1 to 64 "
                     "characters).");
    }
    if (KeyByName(name)) return Invalid("An SSH key named \"" + name + "\" already exists.");
    if (!LooksLikePublicKey(pub)) return Invalid("The publicKey is not an OpenSSH public key.");
    SshKey k;
    k.id = RandomUuid();
    k.name = name;
    k.public_key = pub;
    keys_[k.id] = k;
    JsonObject key = NewObject();
    key->set("name", k.name);
    key->set("id", k.id);
    JsonObject o = NewObject();
    o->set("sshKey", key);
    return JsonResponse(200, o);
  }

  HttpResponse DeleteKey(const std::string& id) {
    if (keys_.erase(id) == 0) return Message(404, "SSH key not found.");
    JsonObject o = NewObject();
    o->set("result", NewObject());
    return JsonResponse(200, o);
  }

  // --- instances (plugins/massedcompute/REFERENCE.md §3.1-3.4) ---
  struct Viewed {
    std::string status;
    bool os_booted = false;
    std::string ip;
  };
  Viewed View(const Instance& in) {
    Viewed v;
    if (in.terminate_at) {
      v.status = "terminating";
      return v;
    }
    const InstanceStatus s = backend_->State(in.backend_id);
    switch (s.state) {
      case InstanceState::kProvisioning:
        v.status = omit_os_booted_ ? "pending" : "booting";
        break;
      case InstanceState::kRunning:
        v.os_booted = s.running_for >= kOsBootTime;
        v.status = !omit_os_booted_ ? "rented" : v.os_booted ? "Running" : "pending";
        if (s.running_for.count() >= static_cast<int64_t>(in.ip_after_seconds * 1000)) {
          v.ip = s.public_ip;
        }
        break;
      case InstanceState::kError:
        v.status = "failed";
        break;
      // plugins/massedcompute/REFERENCE.md: Brev's mapping knows `stopped`
      case InstanceState::kStopped:
        v.status = "stopped";
        break;
      case InstanceState::kGone:
        v.status = "terminated";
        break;
    }
    return v;
  }

  JsonObject InstanceJson(const Instance& in) {
    const Viewed v = View(in);
    JsonObject o = NewObject();
    o->set("uuid", in.uuid);
    o->set("name", in.name);
    o->set("ip", v.ip);
    o->set("username", std::string(kSshUser));
    o->set("password", in.password);
    o->set("status", v.status);
    if (!omit_os_booted_) o->set("os_booted", v.os_booted ? 1 : 0);
    o->set("command_startup", in.command);
    o->set("created", Rfc3339(in.created));
    o->set("active", in.terminate_at || v.status == "terminated" ? 0 : 1);
    JsonObject image = NewObject();
    image->set("id", in.image->id);
    image->set("name", std::string(in.image->name));
    image->set("description", std::string(in.image->description));
    o->set("image", image);
    JsonObject product = NewObject();
    const ProductDef& p = *in.product;
    product->set("name", std::string(p.name));
    product->set("description", std::string(p.description));
    product->set("gpu_count", p.gpu_count);
    product->set("vcpu", p.vcpus);
    product->set("ram", p.memory_gib);
    product->set("storage", p.storage_gb);
    const std::string price = std::to_string(p.price_cents_per_hour / 100) + "." +
                              (p.price_cents_per_hour % 100 < 10 ? "0" : "") +
                              std::to_string(p.price_cents_per_hour % 100);
    product->set("price_hr", price);
    product->set("final_price_hr", price);
    o->set("product", product);
    o->set("region", RegionJson(in.region));
    return o;
  }

  // Terminated instances leave after terminating_seconds; vanished machines at once. An
  // instance taken back (POST /preempt, meant for spot products) stays listed as "terminated"
  // until it is terminated: the reference documents no preemption status, so the emulator
  // shows it as plugins/massedcompute/README.md ("Spot instances") says the driver reads it.
  void Reconcile() {
    ForgetEnded(
        instances_, [](const auto& r) -> const auto& { return r.terminate_at; },
        /*keep_preempted=*/true);
  }

  HttpResponse ListInstances() {
    JsonArray a = NewArray();
    for (const auto& [id, in] : instances_) a->add(InstanceJson(in));
    JsonObject o = NewObject();
    o->set("runningInstances", a);
    return JsonResponse(200, o);
  }

  HttpResponse GetInstance(const std::string& uuid) {
    auto it = instances_.find(uuid);
    if (it == instances_.end()) return Message(404, "Instance not found.");
    JsonObject o = NewObject();
    if (single_shape_) {
      o->set("runningInstance", InstanceJson(it->second));  // RetrieveSingleRunningInstanceV1
    } else {
      JsonArray a = NewArray();
      a->add(InstanceJson(it->second));
      o->set("runningInstances", a);
    }
    return JsonResponse(200, o);
  }

  HttpResponse Launch(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Invalid("The request body must be a JSON object.");
    const bool by_name = image_field_ == "os_image_name";
    if (by_name && !body->has("os_image_name")) {
      // Laravel's validation answer (the API's framework: "Unauthenticated.", "Too Many
      // Attempts."); the exact body is not documented.
      JsonObject errors = NewObject();
      JsonArray list = NewArray();
      list->add(std::string("The os image name field is required."));
      errors->set("os_image_name", list);
      JsonObject o = NewObject();
      o->set("message", std::string("The os image name field is required."));
      o->set("errors", errors);
      return JsonResponse(422, o);
    }
    if (auto e = CheckShape(body, {{"imageId", JsonType::kInteger, !by_name},
                                   {"os_image_name", JsonType::kString, by_name},
                                   {"productName", JsonType::kString, true},
                                   {"regionName", JsonType::kString, true},
                                   {"instanceName", JsonType::kString},
                                   {"sshKeys", JsonType::kArray},
                                   {"sshKey", JsonType::kString},
                                   {"command", JsonType::kString},
                                   {"coupon", JsonType::kString}});
        !e.empty()) {
      return Invalid(e);
    }
    const ImageDef* image = nullptr;
    if (by_name) {
      const std::string want = *GetString(body, "os_image_name");
      for (const auto& i : Images()) {
        if (want == i.name) image = &i;
      }
      if (!image) return Invalid("Unknown os_image_name \"" + want + "\".");
    } else {
      image = FindImage(*GetInt(body, "imageId"));
      if (!image) {
        return Invalid("Unknown imageId " + std::to_string(*GetInt(body, "imageId")) + ".");
      }
    }
    const std::string product_name = *GetString(body, "productName");
    const ProductDef* product = FindProduct(product_name);
    if (!product) return Invalid("Unknown productName \"" + product_name + "\".");
    if (product->price_cents_per_hour <= 0) {
      return Invalid("The product \"" + product_name + "\" cannot be launched (internal-only).");
    }
    const std::string region = *GetString(body, "regionName");
    if (region != "any" && !FindRegion(region)) {
      return Invalid("Unknown regionName \"" + region + "\".");
    }
    Instance in;
    in.name = GetString(body, "instanceName").value_or("");
    if (in.name.size() > kMaxNameLength) return Invalid("The instanceName is too long.");
    std::vector<std::string> key_names;
    if (JsonArray keys = GetArray(body, "sshKeys")) {
      if (auto e = CheckItems(keys, JsonType::kString, "sshKeys"); !e.empty()) return Invalid(e);
      for (unsigned i = 0; i < keys->size(); ++i) key_names.push_back(keys->get(i).toString());
    }
    if (auto k = GetString(body, "sshKey")) key_names.push_back(*k);  // older revision
    std::vector<std::string> public_keys;
    for (const auto& k : key_names) {
      const SshKey* key = KeyByName(k);
      if (!key) return Invalid("Unknown SSH key \"" + k + "\".");
      public_keys.push_back(key->public_key);
    }
    if (auto c = GetString(body, "coupon"); c && !c->empty()) {
      return Invalid("The coupon \"" + *c + "\" is not valid.");
    }
    // Capacity after validation (the launch error is UNCONFIRMED,
    // plugins/massedcompute/REFERENCE.md §8).
    const bool in_region = region == "any" || std::find(product->regions.begin(),
                                                        product->regions.end(),
                                                        region) != product->regions.end();
    if (faults_.Take("capacity", req.method, req.path) || CapacityOf(*product) == 0 ||
        !in_region) {
      return Invalid("No capacity available for " + product_name +
                     (region == "any" ? std::string() : " in " + region) +
                     ": the product is out of stock.");
    }
    if (faults_.Take("quota", req.method, req.path) ||
        faults_.Take("payment_required", req.method, req.path)) {
      return Message(402, "Insufficient account balance to launch this instance.");
    }
    in.uuid = RandomUuid();
    in.product = product;
    in.image = image;
    in.region = region == "any" ? product->regions.front() : region;
    in.command = GetString(body, "command").value_or("");
    in.key_names = key_names;
    in.password = RandomHex(8);
    in.created = SysClock::now();
    if (auto f = faults_.Take("ip_after_boot")) in.ip_after_seconds = f->seconds;
    InstanceSpec spec;
    spec.cloud = name_;
    spec.name = in.name.empty() ? "mc-" + in.uuid.substr(0, 8) : in.name;
    spec.image = image->name;
    spec.gpu_type = product->testvm_gpu;
    spec.gpu_count = product->gpu_count;
    spec.user_data = AccountSetup(public_keys);
    spec.ssh_public_keys = public_keys;
    spec.ssh_user = kSshUser;
    spec.reachable = PortSet::All();  // no firewall API: every port the node listens on
    // No private network either (plugins/massedcompute/README.md, Clusters): instances reach
    // each other at their public addresses, on every port; the node firewall filters.
    spec.public_network = true;
    spec.faults = faults_.TakeBootFaults();
    try {
      in.backend_id = backend_->Create(spec);
    } catch (const BackendError& e) {
      return Message(500, std::string("Server Error (emulator backend: ") + e.what() + ")");
    }
    ++launches_;
    instances_[in.uuid] = in;
    JsonObject o = NewObject();
    o->set("response", in.uuid);
    return JsonResponse(202, o);
  }

  // The instanceUuids of a terminate/restart body, all known; or the error.
  std::variant<std::vector<std::string>, HttpResponse> UuidsOf(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Invalid("The request body must be a JSON object.");
    if (auto e = CheckShape(body, {{"instanceUuids", JsonType::kArray, true}}); !e.empty()) {
      return Invalid(e);
    }
    JsonArray a = GetArray(body, "instanceUuids");
    if (auto e = CheckItems(a, JsonType::kString, "instanceUuids"); !e.empty()) return Invalid(e);
    if (a->size() == 0) return Invalid("instanceUuids must not be empty.");
    std::vector<std::string> uuids;
    for (unsigned i = 0; i < a->size(); ++i) {
      const std::string id = a->get(i).toString();
      auto it = instances_.find(id);
      if (it == instances_.end() || it->second.terminate_at) {
        return Message(404, "Instance " + id + " not found.");
      }
      uuids.push_back(id);
    }
    return uuids;
  }

  HttpResponse Terminate(const HttpRequest& req) {
    auto uuids = UuidsOf(req);
    if (auto* err = std::get_if<HttpResponse>(&uuids)) return *err;
    JsonArray out = NewArray();
    for (const auto& id : std::get<std::vector<std::string>>(uuids)) {
      Instance& in = instances_.at(id);
      const Viewed v = View(in);
      backend_->Delete(in.backend_id);
      in.terminate_at = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(
                                           terminating_seconds_ * 1000));
      JsonObject t = NewObject();
      t->set("id", in.uuid);
      t->set("name", in.name);
      t->set("ip", v.ip);
      t->set("status", std::string("terminated"));
      t->set("region", RegionJson(in.region));
      JsonObject type = NewObject();
      type->set("name", std::string(in.product->name));
      type->set("description", std::string(in.product->description));
      type->set("price_cents_per_hour", in.product->price_cents_per_hour);
      JsonObject specs = NewObject();
      specs->set("vcpus", in.product->vcpus);
      specs->set("memory_gib", in.product->memory_gib);
      specs->set("storage_gb", in.product->storage_gb);
      type->set("specs", specs);
      t->set("instance_type", type);
      JsonArray keys = NewArray();
      for (const auto& k : in.key_names) keys->add(k);
      t->set("ssh_key_names", keys);
      t->set("file_system_names", NewArray());
      t->set("jupyter_token", Poco::Dynamic::Var());
      t->set("jupyter_url", Poco::Dynamic::Var());
      out->add(t);
    }
    JsonObject data = NewObject();
    data->set("terminated_instances", out);
    JsonObject response = NewObject();
    response->set("data", data);
    JsonObject o = NewObject();
    o->set("response", response);
    return JsonResponse(202, o);
  }

  HttpResponse Restart(const HttpRequest& req) {
    auto uuids = UuidsOf(req);
    if (auto* err = std::get_if<HttpResponse>(&uuids)) return *err;
    JsonArray out = NewArray();
    for (const auto& id : std::get<std::vector<std::string>>(uuids)) {
      JsonObject o = InstanceJson(instances_.at(id));
      o->set("status", std::string("booting"));
      out->add(o);
    }
    JsonObject o = NewObject();
    o->set("response", out);
    return JsonResponse(202, o);
  }

  std::mutex mu_;
  std::map<std::string, Instance> instances_;
  std::map<std::string, SshKey> keys_;
  std::set<std::string> read_only_tokens_;
  std::map<std::string, int> capacity_;  // product (or "*") -> capacity_available base
  bool single_shape_ = false;
  bool omit_os_booted_ = false;
  std::string image_field_ = "imageId";
  double terminating_seconds_ = 1;
  int64_t launches_ = 0;
};

}  // namespace

std::unique_ptr<CloudApi> MakeMassedComputeApi(InstanceBackend* backend, CloudOptions options) {
  return std::make_unique<MassedComputeApi>(backend, std::move(options));
}

}  // namespace gpuprov::emulator
