// SPDX-License-Identifier: Apache-2.0
//
// DigitalOcean API v2 (droplets, actions, SSH keys, firewalls, sizes, regions,
// images, account). The source it follows is DigitalOcean's OpenAPI spec
// (digitalocean/openapi, commit 7c1300c479fe, specification/resources/...);
// plugins/digitalocean/REFERENCE.md holds the facts with their sources; the spec
// wins where they differ. Messages no source gives verbatim are marked "(not from the
// reference)" and listed in README.md.
#include <Poco/Base64Decoder.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>

#include "cloud_api.h"
#include "request_shape.h"

namespace gpuprov::emulator {
namespace {

using Clock = std::chrono::steady_clock;
using SysClock = std::chrono::system_clock;

constexpr int kRateLimitPerHour = 5000;
constexpr int kRateLimitPerMinute = 250;
constexpr int kKeyListLimitPerMinute = 10;
constexpr int kDropletLimit = 1000;  // the account's droplet quota (GET /v2/account)
constexpr size_t kMaxUserData = 64 * 1024;
constexpr int kDefaultPerPage = 20;
constexpr int kMaxPerPage = 200;

// --- static catalogue --------------------------------------------------------

struct SizeDef {
  const char* slug;
  int vcpus;
  int memory_mb;
  int disk_gb;
  double transfer_tb;
  double price_hourly;
  std::vector<std::string> regions;
  int gpu_count;         // 0: CPU size
  const char* gpu_model; // DO's gpu_info.model
  int vram_gb;           // per GPU
  const char* testvm_gpu;  // test VM GPU file type; "" = no nvidia-smi GPU (AMD)
  const char* description;
};

const std::vector<std::string> kAllRegions = {"nyc1", "nyc2", "nyc3", "sfo3", "ams3", "tor1",
                                              "atl1", "fra1", "lon1", "sgp1", "blr1", "syd1"};

const std::vector<SizeDef>& Sizes() {
  static const std::vector<SizeDef> sizes = {
      {"s-1vcpu-1gb", 1, 1024, 25, 1.0, 0.00893, kAllRegions, 0, "", 0, "", "Basic"},
      {"s-2vcpu-4gb", 2, 4096, 80, 4.0, 0.03571, kAllRegions, 0, "", 0, "", "Basic"},
      {"s-4vcpu-8gb", 4, 8192, 160, 5.0, 0.07143, kAllRegions, 0, "", 0, "", "Basic"},
      {"gpu-h100x1-80gb", 20, 245760, 720, 15.0, 3.39, {"nyc2", "tor1"}, 1, "nvidia_h100", 80,
       "H100-80GB", "H100 GPU - 1X"},
      {"gpu-h100x8-640gb", 160, 1966080, 2046, 60.0, 23.92, {"nyc2", "tor1"}, 8, "nvidia_h100",
       80, "H100-80GB", "H100 GPU - 8X"},
      {"gpu-h200x1-141gb", 24, 245760, 720, 15.0, 3.44, {"atl1", "nyc2"}, 1, "nvidia_h200", 141,
       "H200", "H200 GPU - 1X"},
      {"gpu-h200x8-1128gb", 192, 1966080, 2046, 60.0, 27.52, {"atl1", "nyc2"}, 8, "nvidia_h200",
       141, "H200", "H200 GPU - 8X"},
      {"gpu-l40sx1-48gb", 8, 65536, 500, 10.0, 1.57, {"tor1", "nyc2", "ams3"}, 1, "nvidia_l40s",
       48, "L40S", "L40S GPU - 1X"},
      {"gpu-6000adax1-48gb", 8, 65536, 500, 10.0, 1.57, {"tor1", "nyc2", "ams3"}, 1,
       "nvidia_rtx_6000_ada", 48, "RTX-6000-Ada", "RTX 6000 Ada GPU - 1X"},
      {"gpu-4000adax1-20gb", 8, 32768, 500, 10.0, 0.76, {"tor1", "nyc2", "ams3"}, 1,
       "nvidia_rtx_4000_ada", 20, "RTX-4000-Ada", "RTX 4000 Ada GPU - 1X"},
      {"gpu-mi300x1-192gb", 20, 245760, 720, 15.0, 1.99, {"atl1"}, 1, "amd_mi300x", 192, "",
       "MI300X GPU - 1X"},
      {"gpu-mi300x8-1536gb", 160, 1966080, 2046, 60.0, 15.92, {"atl1"}, 8, "amd_mi300x", 192, "",
       "MI300X GPU - 8X"},
      {"gpu-mi325x1-256gb", 20, 167936, 720, 15.0, 2.49, {"atl1"}, 1, "amd_mi325x", 256, "",
       "MI325X GPU - 1X"},
      {"gpu-mi325x8-2048gb", 160, 1343488, 2046, 60.0, 19.92, {"atl1"}, 8, "amd_mi325x", 256, "",
       "MI325X GPU - 8X"},
  };
  return sizes;
}

const SizeDef* FindSize(const std::string& slug) {
  for (const auto& s : Sizes()) {
    if (slug == s.slug) return &s;
  }
  return nullptr;
}

struct RegionDef {
  const char* slug;
  const char* name;
};

const std::vector<RegionDef>& Regions() {
  static const std::vector<RegionDef> regions = {
      {"nyc1", "New York 1"}, {"nyc2", "New York 2"},     {"nyc3", "New York 3"},
      {"sfo3", "San Francisco 3"}, {"ams3", "Amsterdam 3"}, {"tor1", "Toronto 1"},
      {"atl1", "Atlanta 1"},  {"fra1", "Frankfurt 1"},    {"lon1", "London 1"},
      {"sgp1", "Singapore 1"}, {"blr1", "Bangalore 1"},  {"syd1", "Sydney 1"}};
  return regions;
}

const RegionDef* FindRegion(const std::string& slug) {
  for (const auto& r : Regions()) {
    if (slug == r.slug) return &r;
  }
  return nullptr;
}

struct ImageDef {
  int64_t id;
  const char* slug;
  const char* name;
  const char* distribution;
  int min_disk;
  const char* description;
};

const std::vector<ImageDef>& Images() {
  static const std::vector<ImageDef> images = {
      {129211873, "ubuntu-22-04-x64", "22.04 (LTS) x64", "Ubuntu", 7, "Ubuntu 22.04 (LTS) x64"},
      {160232537, "ubuntu-24-04-x64", "24.04 (LTS) x64", "Ubuntu", 7, "Ubuntu 24.04 (LTS) x64"},
      {138311633, "debian-12-x64", "12 x64", "Debian", 7, "Debian 12 x64"},
      {150011722, "gpu-h100x1-base", "AI/ML Ready (H100x1)", "Ubuntu", 20,
       "Ubuntu 22.04 with NVIDIA drivers, CUDA and the NVIDIA container toolkit"},
      {150011723, "gpu-h100x8-base", "AI/ML Ready (H100x8)", "Ubuntu", 20,
       "Ubuntu 22.04 with NVIDIA drivers, CUDA, the NVIDIA container toolkit and fabric manager"},
      {150011724, "gpu-amd-base", "AI/ML Ready (AMD)", "Ubuntu", 20,
       "Ubuntu 22.04 with ROCm"},
  };
  return images;
}

const ImageDef* FindImage(const std::string& id_or_slug) {
  for (const auto& i : Images()) {
    if (id_or_slug == i.slug || id_or_slug == std::to_string(i.id)) return &i;
  }
  return nullptr;
}

JsonArray StringArray(const std::vector<std::string>& v) {
  JsonArray a = NewArray();
  for (const auto& s : v) a->add(s);
  return a;
}

JsonObject GpuInfoJson(const SizeDef& s) {
  JsonObject g = NewObject();
  g->set("count", s.gpu_count);
  g->set("model", std::string(s.gpu_model));
  JsonObject vram = NewObject();
  vram->set("amount", s.vram_gb);
  vram->set("unit", std::string("gib"));
  g->set("vram", vram);
  return g;
}

JsonObject SizeJson(const SizeDef& s, const std::vector<std::string>& regions, bool available) {
  JsonObject o = NewObject();
  o->set("slug", std::string(s.slug));
  o->set("memory", s.memory_mb);
  o->set("vcpus", s.vcpus);
  o->set("disk", s.disk_gb);
  o->set("transfer", s.transfer_tb);
  o->set("price_monthly", static_cast<double>(static_cast<int64_t>(s.price_hourly * 672 * 100)) / 100);
  o->set("price_hourly", s.price_hourly);
  o->set("regions", StringArray(regions));
  o->set("available", available);
  o->set("description", std::string(s.description));
  if (s.gpu_count > 0) o->set("gpu_info", GpuInfoJson(s));
  return o;
}

JsonObject RegionJson(const RegionDef& r, const std::vector<std::string>& sizes, bool available) {
  JsonObject o = NewObject();
  o->set("name", std::string(r.name));
  o->set("slug", std::string(r.slug));
  o->set("features", StringArray({"backups", "ipv6", "metadata", "install_agent", "storage",
                                  "image_transfer"}));
  o->set("available", available);
  o->set("sizes", StringArray(sizes));
  return o;
}

JsonObject ImageJson(const ImageDef& i) {
  JsonObject o = NewObject();
  o->set("id", i.id);
  o->set("name", std::string(i.name));
  o->set("distribution", std::string(i.distribution));
  o->set("slug", std::string(i.slug));
  o->set("public", true);
  o->set("regions", StringArray(kAllRegions));
  o->set("created_at", std::string("2024-04-23T18:00:00Z"));
  o->set("min_disk_size", i.min_disk);
  o->set("type", std::string("base"));
  o->set("size_gigabytes", 2.36);
  o->set("description", std::string(i.description));
  o->set("tags", NewArray());
  o->set("status", std::string("available"));
  return o;
}

// --- SSH key helpers -----------------------------------------------------------

// The key blob of "type base64 [comment]", or nullopt when the text is not an
// OpenSSH public key whose blob names its own type.
std::optional<std::string> KeyBlob(const std::string& public_key) {
  std::istringstream in(public_key);
  std::string type, b64;
  if (!(in >> type >> b64)) return std::nullopt;
  static const std::set<std::string> types = {
      "ssh-rsa", "ssh-ed25519", "ssh-dss", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
      "ecdsa-sha2-nistp521", "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com"};
  if (types.count(type) == 0) return std::nullopt;
  std::string blob;
  try {
    std::istringstream b(b64);
    Poco::Base64Decoder dec(b);
    blob.assign(std::istreambuf_iterator<char>(dec), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (blob.size() < 4 + type.size()) return std::nullopt;
  uint32_t n = (static_cast<uint8_t>(blob[0]) << 24) | (static_cast<uint8_t>(blob[1]) << 16) |
               (static_cast<uint8_t>(blob[2]) << 8) | static_cast<uint8_t>(blob[3]);
  if (n != type.size() || blob.compare(4, n, type) != 0) return std::nullopt;
  return blob;
}


std::string TrimSpace(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

bool ValidTag(const std::string& t) {
  if (t.empty() || t.size() > 255) return false;
  for (char c : t) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != ':' && c != '-' && c != '_') {
      return false;
    }
  }
  return true;
}

bool ValidHostname(const std::string& n) {
  if (n.empty() || n.size() > 255) return false;
  for (char c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') return false;
  }
  return true;
}

// --- the API ----------------------------------------------------------------------

class DigitalOceanApi : public CloudApi {
 public:
  DigitalOceanApi(InstanceBackend* backend, CloudOptions options)
      : CloudApi("digitalocean", backend, std::move(options)) {}

  std::string BasePath() const override { return "/v2"; }

  JsonObject Counts() override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    JsonObject o = NewObject();
    o->set("instances", droplets_.size());
    o->set("firewalls", firewalls_.size());
    o->set("ssh_keys", keys_.size());
    size_t vpcs = 0;  // the regions' default VPCs are not gpuprov's to count
    for (const auto& [id, v] : vpc_records_) vpcs += !v.is_default;
    o->set("vpcs", vpcs);
    o->set("backend_instances", backend_->LiveCount(name_));
    return o;
  }

  // Besides the shared settings: "size_regions" {"<slug>":["tor1",...]} (the regions a size
  // is sold in now), "unavailable_sizes" and "unavailable_regions" (slugs whose `available`
  // is false). digitalocean/openapi sizes/models/size.yml (`regions`, `available`) and
  // regions/models/region.yml (`available`, `sizes`): GPU sizes are per region and change.
  std::string Configure(const JsonObject& settings) override {
    std::lock_guard<std::mutex> lock(mu_);  // Route reads the options under mu_
    if (JsonObject o = GetObject(settings, "size_regions")) {
      for (const auto& [slug, value] : *o) {
        JsonArray a = GetArray(o, slug);
        if (!a || !FindSize(slug)) return "\"size_regions\" maps a known size slug to a list";
        std::vector<std::string> regions;
        for (unsigned i = 0; i < a->size(); ++i) regions.push_back(a->get(i).toString());
        size_regions_[slug] = regions;
      }
    }
    if (JsonArray a = GetArray(settings, "unavailable_sizes")) {
      unavailable_sizes_.clear();
      for (unsigned i = 0; i < a->size(); ++i) unavailable_sizes_.insert(a->get(i).toString());
    }
    if (JsonArray a = GetArray(settings, "unavailable_regions")) {
      unavailable_regions_.clear();
      for (unsigned i = 0; i < a->size(); ++i) unavailable_regions_.insert(a->get(i).toString());
    }
    return CloudApi::Configure(settings);
  }

  JsonArray Instances() override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    JsonArray a = NewArray();
    for (const auto& [id, d] : droplets_) {
      a->add(InstanceRow(std::to_string(id), d.name, d.backend_id));
    }
    return a;
  }

  void Reset() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, d] : droplets_) backend_->Delete(d.backend_id);
    droplets_.clear();
    actions_.clear();
    keys_.clear();
    firewalls_.clear();
    vpcs_.clear();
    vpc_records_.clear();
    told_ingress_.clear();
    rate_.clear();
    key_lists_.clear();
    size_regions_.clear();
    unavailable_sizes_.clear();
    unavailable_regions_.clear();
    faults_.Clear();
  }

 protected:
  // --- records ---
  struct Droplet {
    int64_t id = 0;
    std::string name;
    std::string region;
    std::string size;
    const ImageDef* image = nullptr;
    std::vector<std::string> tags;
    std::vector<int64_t> key_ids;
    std::string backend_id;
    SysClock::time_point created;
    int64_t action_id = 0;
    std::string vpc_uuid;
    bool monitoring = false;
    bool ipv6 = false;
    bool backups = false;
    bool gpu = false;
  };
  struct Action {
    int64_t id = 0;
    int64_t droplet_id = 0;
    std::string type;
    std::string region;
    std::string status = "in-progress";
    SysClock::time_point started;
    std::optional<SysClock::time_point> completed;
  };
  struct SshKey {
    int64_t id = 0;
    std::string name;
    std::string public_key;
    std::string fingerprint;
  };
  // digitalocean/openapi vpcs/models/vpc.yml: id, urn, name, description, region, ip_range,
  // default, created_at. https://docs.digitalocean.com/reference/api/digitalocean/#tag/VPCs
  struct Vpc {
    std::string id;
    std::string name;
    std::string description;
    std::string region;
    std::string ip_range;
    bool is_default = false;
    SysClock::time_point created;
  };
  struct Firewall {
    std::string id;
    std::string name;
    Clock::time_point created_steady;
    SysClock::time_point created;
    JsonArray inbound;
    JsonArray outbound;
    std::vector<int64_t> droplet_ids;
    std::vector<std::string> tags;
  };

  // --- error shapes (plugins/digitalocean/REFERENCE.md §1, §8) ---
  static HttpResponse Error(int status, const std::string& id, const std::string& message) {
    JsonObject o = NewObject();
    o->set("id", id);
    o->set("message", message);
    o->set("request_id", RandomUuid());
    return JsonResponse(status, o);
  }
  static HttpResponse NotFound() {
    return Error(404, "not_found", "The resource you were accessing could not be found.");
  }
  static HttpResponse Unprocessable(const std::string& message) {
    return Error(422, "unprocessable_entity", message);
  }

  std::optional<HttpResponse> Authenticate(const HttpRequest& req) override {
    if (TokenAccepted(req.BearerToken())) return std::nullopt;
    JsonObject o = NewObject();
    o->set("id", std::string("unauthorized"));
    o->set("message", std::string("Unable to authenticate you"));
    return JsonResponse(401, o);
  }

  HttpResponse Throttled(const HttpRequest& /*req*/, const Fault& f) override {
    HttpResponse r = Error(429, "too_many_requests", "API Rate limit exceeded.");
    r.SetHeader("Retry-After", std::to_string(f.retry_after));
    r.SetHeader("RateLimit-Remaining", "0");
    r.SetHeader("RateLimit-Reset", std::to_string(UnixNow() + f.retry_after));
    return r;
  }

  HttpResponse ServerError(const HttpRequest& /*req*/, const Fault& f) override {
    return Error(f.status, "server_error", "Server Error");
  }

  HttpResponse InternalError(const std::string& what) override {
    return Error(500, "server_error", "Server Error (emulator: " + what + ")");
  }

  static int64_t UnixNow() {
    return std::chrono::duration_cast<std::chrono::seconds>(SysClock::now().time_since_epoch())
        .count();
  }

  // Rate-limit headers on every response (plugins/digitalocean/REFERENCE.md §8).
  void Decorate(const HttpRequest& req, HttpResponse& resp) override {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string token = req.BearerToken();
    auto& window = rate_[TokenAccepted(token) ? token : std::string()];
    Prune(window, std::chrono::hours(1));
    for (const auto& [k, v] : resp.headers) {
      if (k == "RateLimit-Remaining") {  // a throttle fault set its own numbers
        resp.SetHeader("RateLimit-Limit", std::to_string(kRateLimitPerHour));
        return;
      }
    }
    int remaining = kRateLimitPerHour - static_cast<int>(window.size());
    int64_t reset = UnixNow() + 3600;
    if (!window.empty()) {
      reset = UnixNow() + std::chrono::duration_cast<std::chrono::seconds>(
                              window.front().first + std::chrono::hours(1) - Clock::now())
                              .count();
    }
    resp.SetHeader("RateLimit-Limit", std::to_string(kRateLimitPerHour));
    resp.SetHeader("RateLimit-Remaining", std::to_string(std::max(remaining, 0)));
    resp.SetHeader("RateLimit-Reset", std::to_string(reset));
  }

  // One request of a token: (time, 1).
  using Window = std::deque<std::pair<Clock::time_point, int>>;
  static void Prune(Window& w, Clock::duration age) {
    const auto limit = Clock::now() - age;
    while (!w.empty() && w.front().first < limit) w.pop_front();
  }

  // Counts the request; a 429 when over the hour or minute limit (enforced only
  // when enforce_rate_limits is on).
  std::optional<HttpResponse> CountRequest(const HttpRequest& req) {
    auto& window = rate_[req.BearerToken()];
    Prune(window, std::chrono::hours(1));
    int last_minute = 0;
    const auto minute_ago = Clock::now() - std::chrono::minutes(1);
    for (auto it = window.rbegin(); it != window.rend() && it->first >= minute_ago; ++it) {
      ++last_minute;
    }
    if (options_.enforce_rate_limits &&
        (window.size() >= static_cast<size_t>(kRateLimitPerHour) ||
         last_minute >= kRateLimitPerMinute)) {
      int wait = last_minute >= kRateLimitPerMinute ? 60 : 3600;
      HttpResponse r = Error(429, "too_many_requests", "API Rate limit exceeded.");
      r.SetHeader("Retry-After", std::to_string(wait));
      return r;
    }
    window.emplace_back(Clock::now(), 1);
    return std::nullopt;
  }

  HttpResponse Route(const HttpRequest& req) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto limited = CountRequest(req)) return *limited;
    Reconcile();
    ApplyPrivateIngress();
    const std::string base = BasePath();
    std::string path = TrimTrailingSlash(req.path);
    if (path.compare(0, base.size(), base) != 0) return NotFound();
    std::vector<std::string> seg = Split(path.substr(base.size()), '/');
    const std::string& m = req.method;
    if (seg.empty()) return NotFound();
    const std::string& top = seg[0];

    if (top == "account" && seg.size() == 1 && m == "GET") return GetAccount();
    if (top == "account" && seg.size() >= 2 && seg[1] == "keys") {
      if (seg.size() == 2) {
        if (m == "GET") return ListKeys(req);
        if (m == "POST") return CreateKey(req);
      } else if (seg.size() == 3) {
        if (m == "GET") return GetKey(seg[2]);
        if (m == "PUT") return UpdateKey(req, seg[2]);
        if (m == "DELETE") return DeleteKey(seg[2]);
      }
      return MethodNotAllowed();
    }
    if (top == "droplets") {
      if (seg.size() == 1) {
        if (m == "GET") return ListDroplets(req);
        if (m == "POST") return CreateDroplets(req);
        if (m == "DELETE") return DeleteDropletsByTag(req);
        return MethodNotAllowed();
      }
      std::optional<int64_t> id = ParseId(seg[1]);
      if (seg.size() == 2) {
        if (m == "GET") return GetDroplet(id);
        if (m == "DELETE") return DeleteDroplet(id);
        return MethodNotAllowed();
      }
      if (seg.size() == 3 && seg[2] == "actions" && m == "GET") return DropletActions(req, id);
      if (seg.size() == 4 && seg[2] == "actions" && m == "GET") {
        std::optional<int64_t> aid = ParseId(seg[3]);
        Action* a = aid ? FindAction(*aid) : nullptr;
        if (!id || !a || a->droplet_id != *id) return NotFound();
        return GetAction(aid);
      }
      if (seg.size() == 5 && seg[2] == "destroy_with_associated_resources" &&
          seg[3] == "dangerous" && m == "DELETE") {
        if (Lower(req.Header("x-dangerous")) != "true") {
          return Error(412, "precondition_failed",
                       "The X-Dangerous header must be set to true (not from the reference)");
        }
        HttpResponse r = DeleteDroplet(id);
        if (r.status == 204) return EmptyResponse(202);
        return r;
      }
      return NotFound();
    }
    if (top == "actions") {
      if (seg.size() == 1 && m == "GET") return ListActions(req);
      if (seg.size() == 2 && m == "GET") return GetAction(ParseId(seg[1]));
      return NotFound();
    }
    if (top == "firewalls") return RouteFirewalls(req, seg);
    if (top == "vpcs") return RouteVpcs(req, seg);
    if (top == "sizes" && seg.size() == 1 && m == "GET") {
      std::vector<JsonObject> items;
      for (const auto& s : Sizes()) items.push_back(LiveSizeJson(s));
      return Paginated(req, "sizes", items);
    }
    if (top == "regions" && seg.size() == 1 && m == "GET") {
      std::vector<JsonObject> items;
      for (const auto& r : Regions()) items.push_back(LiveRegionJson(r));
      return Paginated(req, "regions", items);
    }
    if (top == "images") {
      if (seg.size() == 1 && m == "GET") {
        std::vector<JsonObject> items;
        for (const auto& i : Images()) items.push_back(ImageJson(i));
        return Paginated(req, "images", items);
      }
      if (seg.size() == 2 && m == "GET") {
        const ImageDef* i = FindImage(seg[1]);
        if (!i) return NotFound();
        JsonObject o = NewObject();
        o->set("image", ImageJson(*i));
        return JsonResponse(200, o);
      }
    }
    return NotFound();
  }

  // --- the catalogue as sold now (Configure can narrow it) ---
  std::vector<std::string> RegionsOf(const SizeDef& s) const {
    auto it = size_regions_.find(s.slug);
    return it == size_regions_.end() ? s.regions : it->second;
  }
  bool SizeSold(const SizeDef& s, const std::string& region) const {
    if (unavailable_sizes_.count(s.slug)) return false;
    const std::vector<std::string> regions = RegionsOf(s);
    return std::find(regions.begin(), regions.end(), region) != regions.end();
  }
  JsonObject LiveSizeJson(const SizeDef& s) const {
    return SizeJson(s, RegionsOf(s), unavailable_sizes_.count(s.slug) == 0);
  }
  JsonObject LiveRegionJson(const RegionDef& r) const {
    std::vector<std::string> sizes;
    for (const auto& s : Sizes()) {
      if (SizeSold(s, r.slug)) sizes.push_back(s.slug);
    }
    return RegionJson(r, sizes, unavailable_regions_.count(r.slug) == 0);
  }

  static HttpResponse MethodNotAllowed() {
    return Error(405, "method_not_allowed", "Method Not Allowed (not from the reference)");
  }

  static std::optional<int64_t> ParseId(const std::string& s) {
    if (s.empty() || s.size() > 18) return std::nullopt;
    for (char c : s) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    }
    return std::stoll(s);
  }

  // --- pagination (plugins/digitalocean/REFERENCE.md §2) ---
  HttpResponse Paginated(const HttpRequest& req, const std::string& key,
                         const std::vector<JsonObject>& items) {
    int per_page = kDefaultPerPage;
    int page = 1;
    if (auto p = req.Query("per_page")) {
      try {
        per_page = std::stoi(*p);
      } catch (const std::exception&) {
      }
    }
    if (auto p = req.Query("page")) {
      try {
        page = std::stoi(*p);
      } catch (const std::exception&) {
      }
    }
    per_page = std::clamp(per_page, 1, kMaxPerPage);
    if (page < 1) page = 1;
    const int total = static_cast<int>(items.size());
    const int last = std::max(1, (total + per_page - 1) / per_page);
    JsonArray arr = NewArray();
    for (int i = (page - 1) * per_page; i < std::min(total, page * per_page); ++i) {
      arr->add(items[i]);
    }
    JsonObject o = NewObject();
    o->set(key, arr);
    JsonObject pages = NewObject();
    auto link = [&](int p) {
      std::string url = "http://" + req.host + req.path + "?";
      for (const auto& [k, v] : req.query) {
        if (k == "page" || k == "per_page") continue;
        url += k + "=" + v + "&";
      }
      return url + "page=" + std::to_string(p) + "&per_page=" + std::to_string(per_page);
    };
    if (page > 1) {
      pages->set("first", link(1));
      pages->set("prev", link(std::min(page - 1, last)));
    }
    if (page < last) {
      pages->set("next", link(page + 1));
      pages->set("last", link(last));
    }
    JsonObject links = NewObject();
    links->set("pages", pages);
    o->set("links", links);
    JsonObject meta = NewObject();
    meta->set("total", total);
    o->set("meta", meta);
    return JsonResponse(200, o);
  }

  // --- account ---
  HttpResponse GetAccount() {
    JsonObject a = NewObject();
    a->set("droplet_limit", kDropletLimit);
    a->set("floating_ip_limit", 3);
    a->set("volume_limit", 100);
    a->set("email", std::string("emulator@example.com"));
    a->set("name", std::string("gpuprov emulator"));
    a->set("uuid", account_uuid_);
    a->set("email_verified", true);
    a->set("status", std::string("active"));
    a->set("status_message", std::string(""));
    JsonObject o = NewObject();
    o->set("account", a);
    return JsonResponse(200, o);
  }

  // --- droplets ---
  // Backend state → droplet state. A droplet whose machine vanished or failed
  // is removed (404 from now on) and its create action errors
  // (plugins/digitalocean/REFERENCE.md §8).
  void Reconcile() {
    for (auto it = droplets_.begin(); it != droplets_.end();) {
      InstanceStatus s = backend_->State(it->second.backend_id);
      Action* a = FindAction(it->second.action_id);
      if (s.state == InstanceState::kGone || s.state == InstanceState::kError) {
        if (a && a->status == "in-progress") {
          a->status = "errored";
          a->completed = SysClock::now();
        }
        RemoveFromFirewalls(it->first);
        backend_->Delete(it->second.backend_id);
        it = droplets_.erase(it);
        continue;
      }
      if (s.state == InstanceState::kRunning && a && a->status == "in-progress") {
        a->status = "completed";
        a->completed = SysClock::now();
      }
      ++it;
    }
  }

  Action* FindAction(int64_t id) {
    auto it = actions_.find(id);
    return it == actions_.end() ? nullptr : &it->second;
  }

  JsonObject DropletJson(const Droplet& d) {
    InstanceStatus s = backend_->State(d.backend_id);
    const SizeDef* size = FindSize(d.size);
    const RegionDef* region = FindRegion(d.region);
    JsonObject o = NewObject();
    o->set("id", d.id);
    o->set("name", d.name);
    o->set("memory", size->memory_mb);
    o->set("vcpus", size->vcpus);
    o->set("disk", size->disk_gb);
    o->set("locked", false);
    // plugins/digitalocean/REFERENCE.md §3.2: a powered-off droplet is `off` (and kept).
    o->set("status", std::string(s.state == InstanceState::kRunning   ? "active"
                                 : s.state == InstanceState::kStopped ? "off"
                                                                      : "new"));
    o->set("kernel", Poco::Dynamic::Var());
    o->set("created_at", Rfc3339(d.created));
    JsonArray features = NewArray();
    if (d.monitoring) features->add(std::string("monitoring"));
    if (d.ipv6) features->add(std::string("ipv6"));
    if (d.backups) features->add(std::string("backups"));
    features->add(std::string("private_networking"));
    o->set("features", features);
    o->set("backup_ids", NewArray());
    o->set("next_backup_window", Poco::Dynamic::Var());
    o->set("snapshot_ids", NewArray());
    o->set("image", ImageJson(*d.image));
    o->set("volume_ids", NewArray());
    o->set("size", LiveSizeJson(*size));
    o->set("size_slug", d.size);
    JsonObject networks = NewObject();
    JsonArray v4 = NewArray();
    if (s.state == InstanceState::kRunning) {
      JsonObject pub = NewObject();
      pub->set("ip_address", s.public_ip);
      pub->set("netmask", std::string("255.0.0.0"));
      pub->set("gateway", std::string("127.0.0.1"));
      pub->set("type", std::string("public"));
      v4->add(pub);
      JsonObject priv = NewObject();
      priv->set("ip_address", s.private_ip);
      priv->set("netmask", std::string("255.255.240.0"));
      priv->set("gateway", Poco::Dynamic::Var());
      priv->set("type", std::string("private"));
      v4->add(priv);
    }
    networks->set("v4", v4);
    networks->set("v6", NewArray());
    o->set("networks", networks);
    o->set("region", LiveRegionJson(*region));
    o->set("tags", StringArray(d.tags));
    o->set("vpc_uuid", d.vpc_uuid);
    if (d.gpu) o->set("gpu_info", GpuInfoJson(*size));
    return o;
  }

  HttpResponse ListDroplets(const HttpRequest& req) {
    std::optional<std::string> tag = req.Query("tag_name");
    std::optional<std::string> name = req.Query("name");
    std::optional<std::string> type = req.Query("type");
    if (tag && (name || type)) {
      return Unprocessable(
          "tag_name cannot be combined with name or type (not from the reference)");
    }
    if (type && *type != "gpus" && *type != "droplets") {
      return Unprocessable("type must be one of droplets, gpus (not from the reference)");
    }
    std::vector<JsonObject> items;
    for (const auto& [id, d] : droplets_) {
      if (tag) {
        // Tag listing includes GPU droplets (plugins/digitalocean/REFERENCE.md §3.3).
        if (std::find(d.tags.begin(), d.tags.end(), *tag) == d.tags.end()) continue;
      } else {
        // GPU droplets are hidden from the plain list (plugins/digitalocean/REFERENCE.md §3.3).
        const bool want_gpus = type && *type == "gpus";
        if (d.gpu != want_gpus) continue;
        if (name && Lower(*name) != Lower(d.name)) continue;
      }
      items.push_back(DropletJson(d));
    }
    return Paginated(req, "droplets", items);
  }

  HttpResponse GetDroplet(std::optional<int64_t> id) {
    if (!id || droplets_.count(*id) == 0) return NotFound();
    JsonObject o = NewObject();
    o->set("droplet", DropletJson(droplets_.at(*id)));
    return JsonResponse(200, o);
  }

  // --- reachability (plugins/digitalocean/REFERENCE.md §5): a droplet in no firewall takes every
  // port; one in firewalls (by id or tag) takes the union of their inbound tcp rules whose source
  // addresses cover this machine. Told to the backend after every change.
  static PortSet RulePorts(const JsonObject& rule) {
    const std::string ports = GetString(rule, "ports").value_or("");
    PortSet out;
    if (ports.empty() || ports == "0" || ports == "all") return PortSet::All();
    const size_t dash = ports.find('-');
    try {
      const int lo = std::stoi(ports.substr(0, dash));
      out.Add(lo, dash == std::string::npos ? lo : std::stoi(ports.substr(dash + 1)));
    } catch (const std::exception&) {
    }
    return out;
  }

  bool Applies(const Firewall& f, const Droplet& d) const {
    if (std::find(f.droplet_ids.begin(), f.droplet_ids.end(), d.id) != f.droplet_ids.end()) {
      return true;
    }
    for (const auto& t : f.tags) {
      if (std::find(d.tags.begin(), d.tags.end(), t) != d.tags.end()) return true;
    }
    return false;
  }

  PortSet ReachableOf(const Droplet& d) const {
    bool guarded = false;
    PortSet out;
    for (const auto& [fid, f] : firewalls_) {
      if (!Applies(f, d)) continue;
      guarded = true;
      for (size_t i = 0; f.inbound && i < f.inbound->size(); ++i) {
        JsonObject r = f.inbound->getObject(static_cast<unsigned>(i));
        if (!r || GetString(r, "protocol").value_or("") != "tcp") continue;
        if (GetString(r, "action").value_or("allow") != "allow") continue;
        JsonArray addresses = GetArray(GetObject(r, "sources"), "addresses");
        bool covers = false;
        for (size_t j = 0; addresses && j < addresses->size(); ++j) {
          covers = covers || CoversThisMachine(addresses->get(j).toString());
        }
        if (covers) out.Add(RulePorts(r));
      }
    }
    return guarded ? out : PortSet::All();
  }

  void ApplyFirewalls() {
    for (const auto& [id, d] : droplets_) backend_->SetReachablePorts(d.backend_id, ReachableOf(d));
    ApplyPrivateIngress();
  }

  // A cloud firewall filters a droplet's private (VPC) interface as its public one: its
  // inbound rules admit their sources' addresses, their droplet_ids' and their tags'
  // droplets' private addresses (firewalls/models/firewall_rule_target.yml;
  // plugins/digitalocean/REFERENCE.md §5). A droplet in no firewall takes everything. Peers' addresses are known once they
  // run, so this is worked out again on every request and told to the backend on a change.
  PrivateIngress PrivateIngressOf(const Droplet& d) {
    bool guarded = false;
    std::vector<PrivateRule> out;
    auto private_ip = [&](const Droplet& o) -> std::string {
      if (o.vpc_uuid != d.vpc_uuid) return "";
      InstanceStatus st = backend_->State(o.backend_id);
      return st.state == InstanceState::kRunning ? st.private_ip : "";
    };
    for (const auto& [fid, f] : firewalls_) {
      if (!Applies(f, d)) continue;
      guarded = true;
      for (size_t i = 0; f.inbound && i < f.inbound->size(); ++i) {
        JsonObject r = f.inbound->getObject(static_cast<unsigned>(i));
        const std::string proto = r ? GetString(r, "protocol").value_or("") : "";
        if (proto != "tcp" && proto != "udp") continue;
        JsonObject src = GetObject(r, "sources");
        PrivateRule rule;
        rule.protocol = proto;
        const PortSet ports = RulePorts(r);
        if (ports.empty()) continue;
        rule.ports = ports.ranges().front();
        if (JsonArray a = GetArray(src, "addresses")) {
          for (size_t j = 0; j < a->size(); ++j) {
            const std::string cidr = a->get(j).toString();
            if (cidr.find(':') == std::string::npos) rule.sources.push_back(cidr);
          }
        }
        std::set<std::string> tags;
        if (JsonArray a = GetArray(src, "tags")) {
          for (size_t j = 0; j < a->size(); ++j) tags.insert(a->get(j).toString());
        }
        std::set<int64_t> ids;
        if (JsonArray a = GetArray(src, "droplet_ids")) {
          for (size_t j = 0; j < a->size(); ++j) {
            if (a->get(j).isInteger()) ids.insert(a->get(j).convert<int64_t>());
          }
        }
        for (const auto& [oid, o] : droplets_) {
          bool member = ids.count(oid) > 0;
          for (const auto& t : o.tags) member = member || tags.count(t) > 0;
          if (!member) continue;
          if (const std::string ip = private_ip(o); !ip.empty()) rule.sources.push_back(ip);
        }
        if (!rule.sources.empty()) out.push_back(rule);
      }
    }
    if (!guarded) return std::nullopt;
    return out;
  }

  void ApplyPrivateIngress() {
    for (const auto& [id, d] : droplets_) {
      PrivateIngress ingress = PrivateIngressOf(d);
      auto told = told_ingress_.find(id);
      if (told != told_ingress_.end() && told->second == ingress) continue;
      backend_->SetPrivateIngress(d.backend_id, ingress);
      told_ingress_[id] = ingress;
    }
  }

  void RemoveFromFirewalls(int64_t droplet_id) {
    for (auto& [fid, f] : firewalls_) {
      f.droplet_ids.erase(std::remove(f.droplet_ids.begin(), f.droplet_ids.end(), droplet_id),
                          f.droplet_ids.end());
    }
  }

  void DestroyDroplet(int64_t id) {
    auto it = droplets_.find(id);
    if (it == droplets_.end()) return;
    Action* a = FindAction(it->second.action_id);
    if (a && a->status == "in-progress") {
      a->status = "errored";
      a->completed = SysClock::now();
    }
    backend_->Delete(it->second.backend_id);
    RemoveFromFirewalls(id);
    told_ingress_.erase(id);
    droplets_.erase(it);
  }

  HttpResponse DeleteDroplet(std::optional<int64_t> id) {
    if (!id || droplets_.count(*id) == 0) return NotFound();
    DestroyDroplet(*id);
    return EmptyResponse(204);
  }

  HttpResponse DeleteDropletsByTag(const HttpRequest& req) {
    std::optional<std::string> tag = req.Query("tag_name");
    if (!tag || tag->empty()) {
      return Unprocessable("tag_name is required to delete droplets in bulk (not from the "
                           "reference)");
    }
    std::vector<int64_t> doomed;
    for (const auto& [id, d] : droplets_) {
      if (std::find(d.tags.begin(), d.tags.end(), *tag) != d.tags.end()) doomed.push_back(id);
    }
    for (int64_t id : doomed) DestroyDroplet(id);
    return EmptyResponse(204);
  }

  std::optional<int64_t> ResolveKey(const Poco::Dynamic::Var& v) {
    try {
      if (v.isInteger()) {
        int64_t id = v.convert<int64_t>();
        if (keys_.count(id)) return id;
        return std::nullopt;
      }
      if (v.isString()) {
        std::string s = v.convert<std::string>();
        if (auto id = ParseId(s); id && keys_.count(*id)) return *id;
        for (const auto& [id, k] : keys_) {
          if (k.fingerprint == s) return id;
        }
      }
    } catch (const Poco::Exception&) {
    }
    return std::nullopt;
  }

  // digitalocean/openapi droplets/models/droplet_create.yml (with droplet_single_create.yml's
  // `name` and droplet_multi_create.yml's `names`): the fields of POST /v2/droplets and their
  // types; `size` and `image` (a slug or an id) are required; `region` may be left out ("the
  // Droplet may deploy in any region"). A field the spec does not have, or of another type, is
  // the spec's default error (shared/responses/unexpected_error.yml: {id, message}) as a 422.
  static std::string CheckDropletCreate(const JsonObject& body) {
    JsonObject rest = new Poco::JSON::Object(*body);
    rest->remove("image");
    if (auto e = CheckShape(rest, {{"name", JsonType::kString},
                                   {"names", JsonType::kArray},
                                   {"region", JsonType::kString},
                                   {"size", JsonType::kString, true},
                                   {"ssh_keys", JsonType::kArray},
                                   {"backups", JsonType::kBool},
                                   {"backup_policy", JsonType::kObject},
                                   {"ipv6", JsonType::kBool},
                                   {"monitoring", JsonType::kBool},
                                   {"tags", JsonType::kArray},
                                   {"user_data", JsonType::kString},
                                   {"private_networking", JsonType::kBool},
                                   {"volumes", JsonType::kArray},
                                   {"vpc_uuid", JsonType::kString},
                                   {"with_droplet_agent", JsonType::kBool},
                                   {"public_networking", JsonType::kBool}});
        !e.empty()) {
      return e;
    }
    if (!body->has("image") || body->isNull("image")) return "\"image\" is required";
    const Poco::Dynamic::Var image = body->get("image");
    if (!image.isString() && !image.isInteger()) return "\"image\" must be a slug or an id";
    return "";
  }

  HttpResponse CreateDroplets(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) {
      return Error(400, "bad_request",
                   "unexpected end of JSON input (the body must be a JSON object)");
    }
    if (auto e = CheckDropletCreate(body); !e.empty()) return Unprocessable(e);
    std::vector<std::string> names;
    if (JsonArray arr = GetArray(body, "names")) {
      for (size_t i = 0; i < arr->size(); ++i) {
        if (!arr->get(i).isString()) return Unprocessable("names must be strings");
        names.push_back(arr->get(i).convert<std::string>());
      }
      if (names.empty() || names.size() > 10) {
        return Unprocessable("You may only create up to 10 Droplets at a time (not from the "
                             "reference)");
      }
    } else if (auto n = GetString(body, "name")) {
      names.push_back(*n);
    } else {
      return Unprocessable("Name is required (not from the reference)");
    }
    for (const auto& n : names) {
      if (!ValidHostname(n)) {
        return Unprocessable(
            "Name Only valid hostname characters are allowed. (a-z, A-Z, 0-9, . and -)");
      }
    }
    std::optional<std::string> region = GetString(body, "region");
    std::optional<std::string> size = GetString(body, "size");
    std::string image_ref;
    if (auto s = GetString(body, "image")) {
      image_ref = *s;
    } else if (auto i = GetInt(body, "image")) {
      image_ref = std::to_string(*i);
    }
    if (!size || !FindSize(*size)) {
      return Unprocessable("You specified an invalid size for Droplet creation.");
    }
    if (!region) {
      // droplet_create.yml: without a region "the Droplet may deploy in any region": here the
      // first open region that sells the size.
      for (const auto& r : Regions()) {
        if (SizeSold(*FindSize(*size), r.slug) && !unavailable_regions_.count(r.slug)) {
          region = r.slug;
          break;
        }
      }
      if (!region) return Unprocessable("Size is not available in this region.");
    }
    if (!FindRegion(*region)) {
      return Unprocessable("You specified an invalid region for Droplet creation.");
    }
    const ImageDef* image = FindImage(image_ref);
    if (!image) return Unprocessable("You specified an invalid image for Droplet creation.");
    // A size sold out everywhere or not sold in the region, and a region closed to new
    // droplets: DigitalOcean's 422s (the messages of plugins/digitalocean/REFERENCE.md §F6).
    const SizeDef* sdef = FindSize(*size);
    if (!SizeSold(*sdef, *region)) return Unprocessable("Size is not available in this region.");
    if (unavailable_regions_.count(*region)) return Unprocessable("Region is not available");
    std::string user_data = GetString(body, "user_data").value_or("");
    if (user_data.size() > kMaxUserData) {
      return Unprocessable("user_data must be 64 KiB or smaller (not from the reference)");
    }
    std::vector<std::string> tags;
    if (JsonArray arr = GetArray(body, "tags")) {
      for (size_t i = 0; i < arr->size(); ++i) {
        std::string t = arr->get(i).isString() ? arr->get(i).convert<std::string>() : "";
        if (!ValidTag(t)) {
          return Unprocessable("tag names must consist of letters, numbers, colons, dashes "
                               "and underscores (not from the reference)");
        }
        if (std::find(tags.begin(), tags.end(), t) == tags.end()) tags.push_back(t);
      }
    }
    std::vector<int64_t> key_ids;
    if (JsonArray arr = GetArray(body, "ssh_keys")) {
      for (size_t i = 0; i < arr->size(); ++i) {
        std::optional<int64_t> k = ResolveKey(arr->get(i));
        if (!k) {
          return Unprocessable("You specified an invalid SSH key for Droplet creation (not from "
                               "the reference)");
        }
        key_ids.push_back(*k);
      }
    }
    // droplet_create.yml: vpc_uuid "must be in the same region as the Droplet".
    const std::string vpc_uuid = GetString(body, "vpc_uuid").value_or(VpcFor(*region));
    if (auto v = vpc_records_.find(vpc_uuid);
        v == vpc_records_.end() || v->second.region != *region) {
      return Unprocessable("vpc_uuid: the VPC does not exist or is not in region " + *region);
    }
    // Faults and quota after validation, as the real API checks the body first.
    // "body" narrows it to one create: a VM name ("train-agent-2", a cluster's third node) or
    // a tag ("gpuprov-cluster:train", with nth the k-th create of that cluster).
    if (faults_.Take("capacity", req.method, req.path, req.body)) {
      return Unprocessable("Size is not available in this region.");
    }
    if (faults_.Take("quota", req.method, req.path) ||
        droplets_.size() + names.size() > static_cast<size_t>(kDropletLimit)) {
      return Unprocessable("creating this/these droplet(s) will exceed your droplet limit");
    }

    JsonArray created = NewArray();
    JsonArray action_links = NewArray();
    for (const auto& n : names) {
      Droplet d;
      d.id = next_droplet_id_++;
      d.name = n;
      d.region = *region;
      d.size = *size;
      d.image = image;
      d.tags = tags;
      d.key_ids = key_ids;
      d.created = SysClock::now();
      d.vpc_uuid = vpc_uuid;
      d.monitoring = GetBool(body, "monitoring").value_or(false);
      d.ipv6 = GetBool(body, "ipv6").value_or(false);
      d.backups = GetBool(body, "backups").value_or(false);
      d.gpu = sdef->gpu_count > 0;

      InstanceSpec spec;
      spec.cloud = name_;
      spec.name = n;
      spec.image = image->slug;
      if (d.gpu && *sdef->testvm_gpu) {
        spec.gpu_type = sdef->testvm_gpu;
        spec.gpu_count = sdef->gpu_count;
      }
      spec.user_data = user_data;
      for (int64_t k : key_ids) spec.ssh_public_keys.push_back(keys_.at(k).public_key);
      spec.ssh_user = "root";
      spec.reachable = ReachableOf(d);
      // A VPC of its own (not the region's default) is a private network the test VMs share;
      // in a default VPC a droplet keeps a made-up private address.
      if (!vpc_records_.at(vpc_uuid).is_default) spec.private_network = vpc_uuid;
      spec.faults = faults_.TakeBootFaults();
      try {
        d.backend_id = backend_->Create(spec);
      } catch (const BackendError& e) {
        return Unprocessable(std::string("Region is not available (emulator backend: ") +
                             e.what() + ")");
      }

      Action a;
      a.id = next_action_id_++;
      a.droplet_id = d.id;
      a.type = "create";
      a.region = d.region;
      a.started = d.created;
      actions_[a.id] = a;
      d.action_id = a.id;
      droplets_[d.id] = d;
      created->add(DropletJson(d));
      JsonObject link = NewObject();
      link->set("id", a.id);
      link->set("rel", std::string(names.size() > 1 ? "multiple_create" : "create"));
      link->set("href", "http://" + req.host + BasePath() + "/actions/" + std::to_string(a.id));
      action_links->add(link);
    }
    JsonObject o = NewObject();
    if (names.size() == 1 && !GetArray(body, "names")) {
      o->set("droplet", created->getObject(0));
    } else {
      o->set("droplets", created);
    }
    JsonObject links = NewObject();
    links->set("actions", action_links);
    o->set("links", links);
    return JsonResponse(202, o);
  }

  // The region's default VPC, made on first use (every droplet is in a VPC: without
  // vpc_uuid, "the Droplet will be placed in your account's default VPC for the region";
  // droplet_create.yml).
  std::string VpcFor(const std::string& region) {
    auto it = vpcs_.find(region);
    if (it == vpcs_.end()) {
      Vpc v;
      v.id = RandomUuid();
      v.name = "default-" + region;
      v.region = region;
      v.ip_range = NextIpRange();
      v.is_default = true;
      v.created = SysClock::now();
      vpc_records_[v.id] = v;
      it = vpcs_.emplace(region, v.id).first;
    }
    return it->second;
  }

  std::string NextIpRange() {
    const int n = next_vpc_range_++;
    return "10." + std::to_string(100 + n / 16) + "." + std::to_string((n % 16) * 16) + ".0/20";
  }

  // --- VPCs (digitalocean/openapi vpcs/vpcs_create.yml, vpcs_list.yml, vpcs_get.yml,
  // vpcs_delete.yml) ---
  JsonObject VpcJson(const Vpc& v) const {
    JsonObject o = NewObject();
    o->set("id", v.id);
    o->set("urn", "do:vpc:" + v.id);
    o->set("name", v.name);
    o->set("description", v.description);
    o->set("region", v.region);
    o->set("ip_range", v.ip_range);
    o->set("default", v.is_default);
    o->set("created_at", Rfc3339(v.created));
    return o;
  }

  // vpc.yml: name "may only contain alphanumeric characters, dashes, and periods", unique in
  // the account; region a region slug; description at most 255 characters.
  HttpResponse CreateVpc(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Error(400, "bad_request", "the body must be a JSON object");
    if (auto e = CheckShape(body, {{"name", JsonType::kString, true},
                                   {"region", JsonType::kString, true},
                                   {"description", JsonType::kString},
                                   {"ip_range", JsonType::kString},
                                   {"default", JsonType::kBool}});
        !e.empty()) {
      return Unprocessable(e);
    }
    const std::string name = GetString(body, "name").value_or("");
    static const std::regex name_re("^[A-Za-z0-9.-]{1,255}$");
    if (!std::regex_match(name, name_re)) {
      return Unprocessable("name may only contain alphanumeric characters, dashes, and periods");
    }
    const std::string region = GetString(body, "region").value_or("");
    if (!FindRegion(region)) return Unprocessable("You specified an invalid region.");
    for (const auto& [id, v] : vpc_records_) {
      if (v.name == name) return Unprocessable("A VPC with this name already exists.");
    }
    const std::string description = GetString(body, "description").value_or("");
    if (description.size() > 255) return Unprocessable("description is longer than 255");
    Vpc v;
    v.id = RandomUuid();
    v.name = name;
    v.description = description;
    v.region = region;
    v.ip_range = GetString(body, "ip_range").value_or(NextIpRange());
    v.created = SysClock::now();
    vpc_records_[v.id] = v;
    JsonObject o = NewObject();
    o->set("vpc", VpcJson(v));
    return JsonResponse(201, o);
  }

  HttpResponse RouteVpcs(const HttpRequest& req, const std::vector<std::string>& seg) {
    const std::string& m = req.method;
    if (seg.size() == 1) {
      if (m == "GET") {
        std::vector<JsonObject> items;
        for (const auto& [id, v] : vpc_records_) items.push_back(VpcJson(v));
        return Paginated(req, "vpcs", items);
      }
      if (m == "POST") return CreateVpc(req);
      return MethodNotAllowed();
    }
    if (seg.size() != 2) return NotFound();
    auto it = vpc_records_.find(seg[1]);
    if (it == vpc_records_.end()) return NotFound();
    if (m == "GET") {
      JsonObject o = NewObject();
      o->set("vpc", VpcJson(it->second));
      return JsonResponse(200, o);
    }
    if (m != "DELETE") return MethodNotAllowed();
    // "A VPC can only be deleted if it does not contain any member resources" and the
    // region's default VPC cannot be deleted (vpcs_delete.yml's description); the refusal's
    // status is not in the spec: 403 as the API answers other forbidden deletes.
    if (it->second.is_default) {
      return Error(403, "forbidden", "Cannot delete the default VPC of a region.");
    }
    for (const auto& [id, d] : droplets_) {
      if (d.vpc_uuid == it->second.id) {
        return Error(403, "forbidden", "Can not delete VPC with members");
      }
    }
    vpc_records_.erase(it);
    return EmptyResponse(204);
  }

  // --- actions ---
  JsonObject ActionJson(const Action& a) {
    JsonObject o = NewObject();
    o->set("id", a.id);
    o->set("status", a.status);
    o->set("type", a.type);
    o->set("started_at", Rfc3339(a.started));
    if (a.completed) {
      o->set("completed_at", Rfc3339(*a.completed));
    } else {
      o->set("completed_at", Poco::Dynamic::Var());
    }
    o->set("resource_id", a.droplet_id);
    o->set("resource_type", std::string("droplet"));
    if (const RegionDef* r = FindRegion(a.region)) o->set("region", LiveRegionJson(*r));
    o->set("region_slug", a.region);
    return o;
  }

  HttpResponse GetAction(std::optional<int64_t> id) {
    Action* a = id ? FindAction(*id) : nullptr;
    if (!a) return NotFound();
    JsonObject o = NewObject();
    o->set("action", ActionJson(*a));
    return JsonResponse(200, o);
  }

  HttpResponse ListActions(const HttpRequest& req) {
    std::vector<JsonObject> items;
    for (auto it = actions_.rbegin(); it != actions_.rend(); ++it) {
      items.push_back(ActionJson(it->second));
    }
    return Paginated(req, "actions", items);
  }

  HttpResponse DropletActions(const HttpRequest& req, std::optional<int64_t> id) {
    if (!id || droplets_.count(*id) == 0) return NotFound();
    std::vector<JsonObject> items;
    for (const auto& [aid, a] : actions_) {
      if (a.droplet_id == *id) items.push_back(ActionJson(a));
    }
    return Paginated(req, "actions", items);
  }

  // --- SSH keys (plugins/digitalocean/REFERENCE.md §3.6) ---
  static JsonObject KeyJson(const SshKey& k) {
    JsonObject o = NewObject();
    o->set("id", k.id);
    o->set("fingerprint", k.fingerprint);
    o->set("public_key", k.public_key);
    o->set("name", k.name);
    return o;
  }

  SshKey* FindKey(const std::string& id_or_fp) {
    if (auto id = ParseId(id_or_fp)) {
      auto it = keys_.find(*id);
      return it == keys_.end() ? nullptr : &it->second;
    }
    for (auto& [id, k] : keys_) {
      if (k.fingerprint == id_or_fp) return &k;
    }
    return nullptr;
  }

  HttpResponse ListKeys(const HttpRequest& req) {
    // Only 10 list requests per 60 s on this path (plugins/digitalocean/REFERENCE.md §3.6).
    auto& w = key_lists_[req.BearerToken()];
    Prune(w, std::chrono::minutes(1));
    if (options_.enforce_rate_limits && w.size() >= static_cast<size_t>(kKeyListLimitPerMinute)) {
      HttpResponse r = Error(429, "too_many_requests", "API Rate limit exceeded.");
      auto wait = std::chrono::duration_cast<std::chrono::seconds>(
                      w.front().first + std::chrono::minutes(1) - Clock::now())
                      .count() + 1;
      r.SetHeader("Retry-After", std::to_string(wait));
      return r;
    }
    w.emplace_back(Clock::now(), 1);
    std::vector<JsonObject> items;
    for (const auto& [id, k] : keys_) items.push_back(KeyJson(k));
    return Paginated(req, "ssh_keys", items);
  }

  HttpResponse CreateKey(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Error(400, "bad_request", "the body must be a JSON object");
    // digitalocean/openapi ssh_keys/models/sshKeys.yml: name and public_key required (id and
    // fingerprint are the answer's).
    if (auto e = CheckShape(body, {{"name", JsonType::kString, true},
                                   {"public_key", JsonType::kString, true},
                                   {"id", JsonType::kInteger},
                                   {"fingerprint", JsonType::kString}});
        !e.empty()) {
      return Unprocessable(e);
    }
    std::optional<std::string> name = GetString(body, "name");
    std::optional<std::string> pub = GetString(body, "public_key");
    if (!name || name->empty()) return Unprocessable("Name can't be blank");
    if (!pub) return Unprocessable("Public key can't be blank");
    std::string key = TrimSpace(*pub);
    std::optional<std::string> blob = KeyBlob(key);
    if (!blob) {
      return Unprocessable("Key invalid, key should be of the format `type key [comment]` (not "
                           "from the reference)");
    }
    std::string fp = Md5Fingerprint(*blob);
    for (const auto& [id, k] : keys_) {
      if (k.fingerprint == fp) return Unprocessable("SSH Key is already in use on your account");
    }
    SshKey k;
    k.id = next_key_id_++;
    k.name = *name;
    k.public_key = key;
    k.fingerprint = fp;
    keys_[k.id] = k;
    JsonObject o = NewObject();
    o->set("ssh_key", KeyJson(k));
    return JsonResponse(201, o);
  }

  HttpResponse GetKey(const std::string& ref) {
    SshKey* k = FindKey(ref);
    if (!k) return NotFound();
    JsonObject o = NewObject();
    o->set("ssh_key", KeyJson(*k));
    return JsonResponse(200, o);
  }

  HttpResponse UpdateKey(const HttpRequest& req, const std::string& ref) {
    SshKey* k = FindKey(ref);
    if (!k) return NotFound();
    JsonObject body = ParseObject(req.body);
    if (auto n = GetString(body, "name")) k->name = *n;
    JsonObject o = NewObject();
    o->set("ssh_key", KeyJson(*k));
    return JsonResponse(200, o);
  }

  HttpResponse DeleteKey(const std::string& ref) {
    SshKey* k = FindKey(ref);
    if (!k) return NotFound();
    keys_.erase(k->id);
    return EmptyResponse(204);
  }

  // --- firewalls (plugins/digitalocean/REFERENCE.md §5) ---
  JsonObject FirewallJson(const Firewall& f) {
    JsonObject o = NewObject();
    o->set("id", f.id);
    o->set("name", f.name);
    const bool settled = Clock::now() - f.created_steady >= std::chrono::seconds(1);
    o->set("status", std::string(settled ? "succeeded" : "waiting"));
    o->set("inbound_rules", f.inbound);
    o->set("outbound_rules", f.outbound);
    o->set("created_at", Rfc3339(f.created));
    JsonArray ids = NewArray();
    for (int64_t id : f.droplet_ids) ids->add(id);
    o->set("droplet_ids", ids);
    o->set("tags", StringArray(f.tags));
    JsonArray pending = NewArray();
    if (!settled) {
      for (int64_t id : f.droplet_ids) {
        JsonObject p = NewObject();
        p->set("droplet_id", id);
        p->set("removing", false);
        p->set("status", std::string("waiting"));
        pending->add(p);
      }
    }
    o->set("pending_changes", pending);
    return o;
  }

  // Validates one rules array; "" when fine. endpoint_key: sources|destinations.
  static std::string CheckRules(const JsonArray& rules, const std::string& endpoint_key,
                                const std::string& what) {
    if (!rules) return "";
    for (size_t i = 0; i < rules->size(); ++i) {
      JsonObject r = rules->getObject(static_cast<unsigned>(i));
      if (!r) return what + " must be objects";
      std::string proto = GetString(r, "protocol").value_or("");
      if (proto != "tcp" && proto != "udp" && proto != "icmp") {
        return what + ": protocol must be one of tcp, udp, icmp";
      }
      std::string ports = GetString(r, "ports").value_or("");
      if (proto != "icmp") {
        static const std::regex port_re("^(0|all|[0-9]{1,5}(-[0-9]{1,5})?)$");
        if (!std::regex_match(ports, port_re)) {
          return what + ": ports must be a port (\"443\"), a range (\"8000-9000\") or \"0\"";
        }
      }
      JsonObject ep = GetObject(r, endpoint_key);
      bool any = false;
      for (const char* k : {"addresses", "droplet_ids", "tags", "load_balancer_uids",
                            "kubernetes_ids"}) {
        if (JsonArray a = GetArray(ep, k); a && a->size() > 0) any = true;
      }
      if (!any) return what + ": each rule needs " + endpoint_key;
      if (auto action = GetString(r, "action"); action && *action != "allow" && *action != "deny") {
        return what + ": action must be allow or deny";
      }
    }
    return "";
  }

  // Fills f from a create/update body; "" when fine. Its fields: digitalocean/openapi
  // firewalls/models/firewall.yml (name, droplet_ids, tags, and firewall_rule.yml's
  // inbound_rules/outbound_rules); id, status, created_at and pending_changes are readOnly, so
  // a client that sends a firewall back as it read it is not refused for them.
  std::string FillFirewall(Firewall& f, const JsonObject& body) {
    if (auto e = CheckShape(body, {{"name", JsonType::kString, true},
                                   {"inbound_rules", JsonType::kArray},
                                   {"outbound_rules", JsonType::kArray},
                                   {"droplet_ids", JsonType::kArray},
                                   {"tags", JsonType::kArray},
                                   {"id", JsonType::kString},
                                   {"status", JsonType::kString},
                                   {"created_at", JsonType::kString},
                                   {"pending_changes", JsonType::kArray}});
        !e.empty()) {
      return e;
    }
    std::optional<std::string> name = GetString(body, "name");
    static const std::regex name_re("^[a-zA-Z0-9][a-zA-Z0-9\\.-]+$");
    if (!name || !std::regex_match(*name, name_re)) {
      return "name must match ^[a-zA-Z0-9][a-zA-Z0-9\\.-]+$ (not from the reference)";
    }
    JsonArray in = GetArray(body, "inbound_rules");
    JsonArray out = GetArray(body, "outbound_rules");
    if ((!in || in->size() == 0) && (!out || out->size() == 0)) {
      return "At least one rule must be specified. (not from the reference)";
    }
    if (auto e = CheckRules(in, "sources", "inbound_rules"); !e.empty()) return e;
    if (auto e = CheckRules(out, "destinations", "outbound_rules"); !e.empty()) return e;
    std::vector<int64_t> ids;
    if (JsonArray a = GetArray(body, "droplet_ids")) {
      for (size_t i = 0; i < a->size(); ++i) {
        auto id = a->get(i).isInteger() ? std::optional<int64_t>(a->get(i).convert<int64_t>())
                                        : std::nullopt;
        if (!id || droplets_.count(*id) == 0) {
          return "droplet_ids: droplet not found (not from the reference)";
        }
        ids.push_back(*id);
      }
    }
    std::vector<std::string> tags;
    if (JsonArray a = GetArray(body, "tags")) {
      for (size_t i = 0; i < a->size(); ++i) {
        if (!a->get(i).isString()) return "tags must be strings";
        tags.push_back(a->get(i).convert<std::string>());
      }
    }
    f.name = *name;
    f.inbound = in ? in : NewArray();
    f.outbound = out ? out : NewArray();
    f.droplet_ids = ids;
    f.tags = tags;
    return "";
  }

  HttpResponse RouteFirewalls(const HttpRequest& req, const std::vector<std::string>& seg) {
    HttpResponse resp = ChangeFirewalls(req, seg);
    if (req.method != "GET" && resp.status < 300) ApplyFirewalls();
    return resp;
  }

  HttpResponse ChangeFirewalls(const HttpRequest& req, const std::vector<std::string>& seg) {
    const std::string& m = req.method;
    if (seg.size() == 1) {
      if (m == "GET") {
        std::vector<JsonObject> items;
        for (const auto& [id, f] : firewalls_) items.push_back(FirewallJson(f));
        return Paginated(req, "firewalls", items);
      }
      if (m == "POST") {
        JsonObject body = ParseObject(req.body);
        if (!body) return Error(400, "bad_request", "the body must be a JSON object");
        Firewall f;
        if (auto e = FillFirewall(f, body); !e.empty()) return Unprocessable(e);
        f.id = RandomUuid();
        f.created = SysClock::now();
        f.created_steady = Clock::now();
        firewalls_[f.id] = f;
        JsonObject o = NewObject();
        o->set("firewall", FirewallJson(f));
        return JsonResponse(202, o);
      }
      return MethodNotAllowed();
    }
    auto it = firewalls_.find(seg[1]);
    if (it == firewalls_.end()) return NotFound();
    Firewall& f = it->second;
    if (seg.size() == 2) {
      if (m == "GET") {
        JsonObject o = NewObject();
        o->set("firewall", FirewallJson(f));
        return JsonResponse(200, o);
      }
      if (m == "PUT") {
        JsonObject body = ParseObject(req.body);
        if (!body) return Error(400, "bad_request", "the body must be a JSON object");
        Firewall updated = f;
        if (auto e = FillFirewall(updated, body); !e.empty()) return Unprocessable(e);
        f = updated;
        JsonObject o = NewObject();
        o->set("firewall", FirewallJson(f));
        return JsonResponse(200, o);
      }
      if (m == "DELETE") {
        firewalls_.erase(it);
        return EmptyResponse(204);
      }
      return MethodNotAllowed();
    }
    if (seg.size() != 3 || (m != "POST" && m != "DELETE")) return NotFound();
    JsonObject body = ParseObject(req.body);
    if (!body) return Error(400, "bad_request", "the body must be a JSON object");
    const bool add = m == "POST";
    if (seg[2] == "droplets") {
      JsonArray a = GetArray(body, "droplet_ids");
      if (!a) return Unprocessable("droplet_ids is required (not from the reference)");
      for (size_t i = 0; i < a->size(); ++i) {
        if (!a->get(i).isInteger()) return Unprocessable("droplet_ids must be integers");
        int64_t id = a->get(i).convert<int64_t>();
        auto pos = std::find(f.droplet_ids.begin(), f.droplet_ids.end(), id);
        if (add) {
          if (droplets_.count(id) == 0) return NotFound();
          if (pos == f.droplet_ids.end()) f.droplet_ids.push_back(id);
        } else if (pos != f.droplet_ids.end()) {
          f.droplet_ids.erase(pos);
        }
      }
      return EmptyResponse(204);
    }
    if (seg[2] == "tags") {
      JsonArray a = GetArray(body, "tags");
      if (!a) return Unprocessable("tags is required (not from the reference)");
      for (size_t i = 0; i < a->size(); ++i) {
        std::string t = a->get(i).isString() ? a->get(i).convert<std::string>() : "";
        auto pos = std::find(f.tags.begin(), f.tags.end(), t);
        if (add && pos == f.tags.end()) f.tags.push_back(t);
        if (!add && pos != f.tags.end()) f.tags.erase(pos);
      }
      return EmptyResponse(204);
    }
    if (seg[2] == "rules") {
      JsonArray in = GetArray(body, "inbound_rules");
      JsonArray out = GetArray(body, "outbound_rules");
      if (auto e = CheckRules(in, "sources", "inbound_rules"); !e.empty()) return Unprocessable(e);
      if (auto e = CheckRules(out, "destinations", "outbound_rules"); !e.empty()) {
        return Unprocessable(e);
      }
      auto apply = [&](JsonArray& target, const JsonArray& rules) {
        if (!rules) return;
        for (size_t i = 0; i < rules->size(); ++i) {
          std::string want = ToJson(rules->getObject(static_cast<unsigned>(i)));
          bool found = false;
          for (size_t j = 0; j < target->size(); ++j) {
            if (ToJson(target->getObject(static_cast<unsigned>(j))) == want) {
              found = true;
              if (!add) {
                target->remove(static_cast<unsigned>(j));
                break;
              }
            }
          }
          if (add && !found) target->add(rules->getObject(static_cast<unsigned>(i)));
        }
      };
      apply(f.inbound, in);
      apply(f.outbound, out);
      return EmptyResponse(204);
    }
    return NotFound();
  }

  std::mutex mu_;
  std::map<int64_t, Droplet> droplets_;
  std::map<int64_t, Action> actions_;
  std::map<int64_t, SshKey> keys_;
  std::map<std::string, Firewall> firewalls_;
  std::map<std::string, std::string> vpcs_;  // region -> its default VPC's id
  std::map<std::string, Vpc> vpc_records_;   // id -> VPC (default ones included)
  int next_vpc_range_ = 0;
  // What each droplet's private address was last told (CloudApi backend), to tell only changes.
  std::map<int64_t, PrivateIngress> told_ingress_;
  std::map<std::string, Window> rate_;
  std::map<std::string, Window> key_lists_;
  std::map<std::string, std::vector<std::string>> size_regions_;
  std::set<std::string> unavailable_sizes_;
  std::set<std::string> unavailable_regions_;
  int64_t next_droplet_id_ = 412000001;
  int64_t next_action_id_ = 2100000001;
  int64_t next_key_id_ = 41000001;
  std::string account_uuid_ = RandomUuid();
};

}  // namespace

std::unique_ptr<CloudApi> MakeDigitalOceanApi(InstanceBackend* backend, CloudOptions options) {
  return std::make_unique<DigitalOceanApi>(backend, std::move(options));
}

}  // namespace gpuprov::emulator
