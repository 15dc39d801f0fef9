// SPDX-License-Identifier: Apache-2.0
//
// Verda Cloud (formerly DataCrunch) Public API (/v1: OAuth2 token endpoint, instances with the
// PUT action call, SSH keys under /ssh-keys (and the deprecated /sshkeys), startup scripts,
// instance types, availability, images, locations).
//
// The source it follows is the official OpenAPI spec "Verda Cloud Public API" (changelog up to
// 2026-09-25), vendored in gurdasnijor/effect-verda at spec/verda.openapi.json (commit
// 805db07978f1267a1c6cb2db6d966c32ff923a03); "V-SPEC <operation or schema>" in the comments
// below names the part of it an answer follows; plugins/verda/REFERENCE.md is
// followed only where the spec is silent. Errors are PublicApiErrorResponseDto
// {"code", "message"} with the spec's error table (invalid_request 400, unauthorized_request
// 401, insufficient_funds 402, forbidden_action 403, not_found 404, rate_limit_exceeded 429,
// server_error 500, service_unavailable 503). Create calls answer the new id as bare text.
// There is no firewall API: every port of an instance is reachable (plugins/verda/REFERENCE.md §5).
// Private networks (/private-networks, and create's network, subnet, private_ip and public_ip;
// the instance's private_ip, private_network_id and subnet_id) follow the official Go SDK, the
// spec above predating them: verda-cloud/verdacloud-sdk-go pkg/verda/private_networks.go,
// private_networks_types.go and instances_types.go ("V-GO-PN" below). An instance on one joins
// the backend's private network of its subnet, where its peers reach it on every port (no
// firewall there either).
// The startup script travels to the backend as InstanceSpec::startup_script, never as cloud-init
// user data (plugins/verda/REFERENCE.md §4). Guesses the reference marks UNCONFIRMED are listed in
// README.md.
#include <Poco/Base64Decoder.h>
#include <Poco/Net/IPAddress.h>

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <variant>

#include "cloud_api.h"
#include "request_shape.h"
#include "verda_spec_operations.h"

namespace gpuprov::emulator {
namespace {

using Clock = std::chrono::steady_clock;
using SysClock = std::chrono::system_clock;

constexpr const char* kScope = "cloud-api-v1";
// V-SPEC DeployInstancePublicDto.tags "Maximum 10", TagDto key maxLength 63, value 127.
constexpr size_t kMaxTags = 10;
constexpr size_t kMaxTagKey = 63;
constexpr size_t kMaxTagValue = 127;
// The project member the emulated API says made what it makes (V-GO-PN created_by_user_id).
constexpr const char* kUserId = "0b2c5e0e-7d1a-4c55-9b7e-2f6a1c9d4e11";
// V-SPEC tag "Startup Scripts": "One project can have up to 100 startup scripts (configurable
// quota up to 10000)"; GET /v1/scripts pageSize "default 10 maximum 100".
constexpr int64_t kScriptQuota = 100;
constexpr int kScriptPageDefault = 10;
constexpr int kScriptPageMax = 100;

// Characters, as JSON schema's maxLength counts them (not bytes).
size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}
constexpr double kRefreshTokenLifetime = 7 * 24 * 3600;  // not in the reference: a week

// --- catalogue (names from plugins/verda/REFERENCE.md §7 and §9; prices and stock illustrative)
// -----------

struct LocationDef {
  const char* code;
  const char* name;
  const char* country_code;
};

const std::vector<LocationDef>& Locations() {
  static const std::vector<LocationDef> l = {{"FIN-01", "Finland 1", "FI"},
                                             {"FIN-02", "Finland 2", "FI"},
                                             {"FIN-03", "Finland 3", "FI"},
                                             {"ICE-01", "Iceland 1", "IS"}};
  return l;
}

bool KnownLocation(const std::string& code) {
  for (const auto& l : Locations()) {
    if (code == l.code) return true;
  }
  return false;
}

const std::vector<std::string> kModernImages = {
    "ubuntu-24.04-cuda-13.0-open-docker", "ubuntu-24.04-cuda-12.8-open-docker",
    "ubuntu-22.04-cuda-12.0-docker", "ubuntu-24.04", "ubuntu-22.04"};
const std::vector<std::string> kOlderImages = {"ubuntu-22.04-cuda-12.0-docker", "ubuntu-22.04"};

struct TypeDef {
  const char* instance_type;
  const char* model;        // free text, as the reference warns
  const char* gpu_description;
  int gpus;
  int gpu_memory_gb;        // per instance
  int vcpus;
  int memory_gb;
  const char* price;        // per hour, a string as the API sends it
  const char* spot_price;
  const char* testvm_gpu;   // the test VM's GPU file type ("" for CPU)
  std::vector<std::string> stock;  // locations where it is available
  // V-SPEC InstanceType.supported_os ("Supported OS image types"); a create with another image
  // type is refused. The Volta and Ampere workstation types run only the older images: V-DS
  // (dstackai/dstack src/dstack/_internal/core/backends/verda/compute.py, 2026-08-21) pins
  // Ubuntu 22.04 + CUDA 12.0 for V100/A6000 because Verda answers "Operating system is not
  // valid for this instance type" for newer images.
  std::vector<std::string> supported_os = kModernImages;
};

const std::vector<TypeDef>& Types() {
  static const std::vector<TypeDef> t = {
      {"1H100.80S.30V", "H100 SXM5 80GB", "1x H100 SXM5 80GB", 1, 80, 30, 120, "2.19", "0.99",
       "H100-80GB", {"FIN-01", "FIN-02", "FIN-03", "ICE-01"}},
      {"2H100.80S.80V", "H100 SXM5 80GB", "2x H100 SXM5 80GB", 2, 160, 80, 370, "4.38", "1.98",
       "H100-80GB", {"FIN-01", "FIN-03"}},
      {"4H100.80S.176V", "H100 SXM5 80GB", "4x H100 SXM5 80GB", 4, 320, 176, 740, "8.76", "3.96",
       "H100-80GB", {"FIN-01"}},
      {"8H100.80S.176V", "H100 SXM5 80GB", "8x H100 SXM5 80GB", 8, 640, 176, 1480, "17.52",
       "7.92", "H100-80GB", {"FIN-01", "ICE-01"}},
      {"1H200.141S.44V", "H200 SXM5 141GB", "1x H200 SXM5 141GB", 1, 141, 44, 185, "3.39",
       "1.49", "H200-141GB", {"FIN-03"}},
      {"1B200.30V", "B200 SXM6 180GB", "1x B200 SXM6 180GB", 1, 180, 30, 184, "4.49", "1.99",
       "B200", {}},
      // A type gpuprov's table lacks (its name from V-SPEC CreateInstanceGroupDto's example).
      {"8B300.640S.176V", "B300 SXM6 262GB", "8x B300 SXM6 262GB", 8, 2096, 176, 2048, "39.92",
       "17.92", "B300", {"FIN-02"}},
      {"1A100.22V", "A100 SXM4 80GB", "1x A100 SXM4 80GB", 1, 80, 22, 120, "1.29", "0.49",
       "A100-80GB", {"FIN-01", "FIN-02"}},
      {"1A100.40S.22V", "A100 SXM4 40GB", "1x A100 SXM4 40GB", 1, 40, 22, 120, "0.99", "0.39",
       "A100-40GB", {"FIN-02"}},
      {"8A100.176V", "A100 SXM4 80GB", "8x A100 SXM4 80GB", 8, 640, 176, 960, "10.32", "3.92",
       "A100-80GB", {"FIN-01"}},
      {"1L40S.20V", "L40S", "1x L40S 48GB", 1, 48, 20, 60, "0.91", "0.39", "L40S",
       {"FIN-01", "FIN-03"}},
      {"1A6000.10V", "RTX A6000", "1x RTX A6000 48GB", 1, 48, 10, 60, "0.49", "0.19",
       "RTX-A6000", {"FIN-01"}, kOlderImages},
      {"2A6000.20V", "RTX A6000", "2x RTX A6000 48GB", 2, 96, 20, 120, "0.98", "0.38",
       "RTX-A6000", {}, kOlderImages},
      {"1V100.6V", "Tesla V100 16GB", "1x Tesla V100 16GB", 1, 16, 6, 23, "0.39", "0.14", "V100",
       {"FIN-01"}, kOlderImages},
      {"CPU.4V.16G", "CPU Node", "", 0, 0, 4, 16, "0.03", "0.01", "",
       {"FIN-01", "FIN-02", "FIN-03", "ICE-01"}},
  };
  return t;
}

const TypeDef* FindType(const std::string& name) {
  for (const auto& t : Types()) {
    if (name == t.instance_type) return &t;
  }
  return nullptr;
}

struct ImageDef {
  const char* id;
  const char* image_type;
  const char* name;
};

const std::vector<ImageDef>& Images() {
  static const std::vector<ImageDef> i = {
      {"2404f580-1300-1111-82b3-f199fb9b701b", "ubuntu-24.04-cuda-13.0-open-docker",
       "Ubuntu 24.04 + CUDA 13.0 Open + Docker"},
      {"5f0c6b8e-3d41-4c1e-9a52-0b8f0d1e7a01", "ubuntu-24.04-cuda-12.8-open-docker",
       "Ubuntu 24.04 + CUDA 12.8 Open + Docker"},
      {"2088da25-bb0d-41cc-a191-dccae45d96fd", "ubuntu-22.04-cuda-12.0-docker",
       "Ubuntu 22.04 + CUDA 12.0 + Docker"},
      {"7b3e2a10-8c55-4f0e-b1d4-6a9e0c2f5b02", "ubuntu-24.04", "Ubuntu 24.04"},
      {"9c4f3b21-9d66-4a1f-82e5-7bAF1d306c03", "ubuntu-22.04", "Ubuntu 22.04"},
  };
  return i;
}

const ImageDef* FindImage(const std::string& id_or_type) {
  for (const auto& i : Images()) {
    if (id_or_type == i.id || id_or_type == i.image_type) return &i;
  }
  return nullptr;
}

std::string TrimSpace(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// The decoded blob of "type base64 [comment]" with a known OpenSSH key type that the blob
// names; "" when it is not such a key.
std::string PublicKeyBlob(const std::string& key) {
  std::istringstream in(key);
  std::string type, b64;
  if (!(in >> type >> b64)) return "";
  static const std::set<std::string> types = {"ssh-rsa", "ssh-ed25519", "ecdsa-sha2-nistp256",
                                              "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521"};
  if (types.count(type) == 0) return "";
  std::string blob;
  try {
    std::istringstream b(b64);
    Poco::Base64Decoder dec(b);
    blob.assign(std::istreambuf_iterator<char>(dec), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {
    return "";
  }
  if (blob.size() <= 4 + type.size() || blob.compare(4, type.size(), type) != 0) return "";
  return blob;
}

class VerdaApi : public CloudApi {
 public:
  VerdaApi(InstanceBackend* backend, CloudOptions options)
      : CloudApi("verda", backend, std::move(options)) {
    // Client credentials come in pairs (client id, secret); a single value is both.
    const auto& t = options_.tokens;
    if (t.size() == 1) {
      clients_[t[0]] = t[0];
    } else {
      for (size_t i = 0; i + 1 < t.size(); i += 2) clients_[t[i]] = t[i + 1];
    }
  }

  std::string BasePath() const override { return "/v1"; }

  JsonObject Counts() override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    JsonObject o = NewObject();
    o->set("instances", instances_.size());
    o->set("firewalls", 0);
    o->set("ssh_keys", keys_.size());
    o->set("backend_instances", backend_->LiveCount(name_));
    o->set("scripts", scripts_.size());
    o->set("private_networks", networks_.size());
    // The volumes the instances left behind (V-SPEC PUT /v1/instances): moved to the trash
    // ("deleted after 96 hours and counts towards the storage volume quota") or detached.
    o->set("volumes_in_trash", trash_.size());
    o->set("detached_volumes", detached_.size());
    // Requests that used an operation or query parameter V-SPEC marks deprecated.
    o->set("deprecated_calls", deprecated_calls_);
    return o;
  }

  JsonArray Instances() override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    JsonArray a = NewArray();
    for (const auto& [id, in] : instances_) {
      JsonObject row = InstanceRow(id, in.hostname, in.backend_id);
      row->set("status", StatusOf(in));
      row->set("startup_script_id", in.startup_script_id);
      row->set("startup_script", in.startup_script);
      a->add(row);
    }
    return a;
  }

  void Reset() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, in] : instances_) {
      if (!in.backend_id.empty()) backend_->Delete(in.backend_id);
    }
    instances_.clear();
    keys_.clear();
    scripts_.clear();
    networks_.clear();
    trash_.clear();
    detached_.clear();
    deprecated_calls_ = 0;
    spot_out_of_stock_.clear();
    script_quota_ = kScriptQuota;
    access_tokens_.clear();
    refresh_tokens_.clear();
    faults_.Clear();
  }

  std::string Configure(const JsonObject& settings) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto v = GetDouble(settings, "token_lifetime_seconds")) {
      if (*v <= 0) return "token_lifetime_seconds must be > 0";
      token_lifetime_ = *v;
    }
    if (auto v = GetBool(settings, "expire_tokens"); v && *v) {
      for (auto& [t, expires] : access_tokens_) expires = Clock::now();
    }
    if (auto v = GetBool(settings, "revoke_refresh_tokens"); v && *v) refresh_tokens_.clear();
    if (auto v = GetDouble(settings, "ordered_seconds")) ordered_seconds_ = *v;
    if (auto v = GetDouble(settings, "deleting_seconds")) deleting_seconds_ = *v;
    if (auto v = GetInt(settings, "max_script_bytes")) max_script_bytes_ = *v;
    if (auto v = GetInt(settings, "script_quota")) {
      if (*v < 1) return "script_quota must be >= 1";
      script_quota_ = *v;
    }
    if (JsonArray a = GetArray(settings, "out_of_stock")) {
      out_of_stock_.clear();
      for (unsigned i = 0; i < a->size(); ++i) out_of_stock_.insert(a->get(i).toString());
    }
    if (JsonArray a = GetArray(settings, "spot_out_of_stock")) {
      spot_out_of_stock_.clear();
      for (unsigned i = 0; i < a->size(); ++i) spot_out_of_stock_.insert(a->get(i).toString());
    }
    if (JsonArray a = GetArray(settings, "seed_instances")) {
      for (unsigned i = 0; i < a->size(); ++i) {
        if (auto e = Seed(a->getObject(i)); !e.empty()) return "seed_instances[" +
                                                               std::to_string(i) + "]: " + e;
      }
    }
    return CloudApi::Configure(settings);
  }

 protected:
  struct Instance {
    std::string id;
    std::string hostname;
    std::string description;
    std::string location;
    const TypeDef* type = nullptr;
    const ImageDef* image = nullptr;
    std::string image_value;  // as sent (type string or id)
    std::vector<std::string> ssh_key_ids;
    std::string startup_script_id;  // "" = null
    std::string startup_script;     // the script's text at create
    bool is_spot = false;
    std::string contract = "PAY_AS_YOU_GO";
    std::string pricing = "FIXED_PRICE";
    JsonArray tags;
    std::string os_volume_id;
    std::string jupyter_token;
    std::string backend_id;
    SysClock::time_point created_at;
    Clock::time_point created;
    std::string error_status = "error";  // error_during_boot's status
    bool vanish_discontinued = false;    // vanish_during_boot "discontinued": listed as such
    double ip_after_seconds = 0;         // ip_after_boot
    std::string fixed_status;            // once set (seeded, discontinued), the status
    // os_volume.on_spot_discontinue (a spot instance's OS volume when Verda discontinues it)
    std::string on_spot_discontinue = "keep_detached";
    bool preempted = false;  // a spot instance POST /preempt took back: listed as discontinued
    std::optional<Clock::time_point> gone_at;  // deleting until then
    std::string network_id;  // V-GO-PN Instance.PrivateNetworkID ("" = a classic instance)
    std::string subnet_id;
    bool public_ip = true;  // public_ip "none": the instance has no public address
  };
  // V-GO-PN PrivateNetwork: "Networks are global; their subnets are per-location"; mode "auto"
  // "creates subnets per location on first use", "custom" "requires creating them explicitly"
  // (the emulator serves no subnet calls: a custom network has none).
  struct Network {
    std::string id;
    std::string name;
    std::string mode = "auto";
    bool is_default = false;
    SysClock::time_point created_at;
    std::map<std::string, std::string> subnets;  // location code -> subnet id
  };
  struct SshKey {
    std::string id;
    std::string name;
    std::string key;
    std::string fingerprint;
    SysClock::time_point created_at;
  };
  struct Script {
    std::string id;
    std::string name;
    std::string script;
    SysClock::time_point created_at;
    uint64_t seq = 0;  // creation order (ties of created_at)
  };

  // --- envelopes (plugins/verda/REFERENCE.md §8) ---
  static HttpResponse Error(int status, const std::string& code, const std::string& message) {
    JsonObject o = NewObject();
    o->set("code", code);
    o->set("message", message);
    return JsonResponse(status, o);
  }
  static HttpResponse Invalid(const std::string& message) {
    return Error(400, "invalid_request", message);
  }
  static HttpResponse NotFound(const std::string& message) {
    return Error(404, "not_found", message);
  }
  static HttpResponse Unauthorized(const std::string& message) {
    return Error(401, "unauthorized_request", message);
  }
  // A create's answer: the new id as bare text (plugins/verda/REFERENCE.md §2).
  static HttpResponse IdText(int status, const std::string& id) {
    return TextResponse(status, id);
  }
  static HttpResponse Json(const JsonArray& a, int status = 200) {
    HttpResponse r;
    r.status = status;
    r.body = ToJson(a);
    return r;
  }

  bool IsTokenPath(const HttpRequest& req) const {
    return TrimTrailingSlash(req.path) == BasePath() + "/oauth2/token";
  }

  std::optional<HttpResponse> Authenticate(const HttpRequest& req) override {
    if (IsTokenPath(req)) return std::nullopt;  // the token endpoint checks the body
    std::lock_guard<std::mutex> lock(mu_);
    const std::string token = req.BearerToken();
    if (token.empty()) return Unauthorized("Missing access token");
    auto it = access_tokens_.find(token);
    if (it == access_tokens_.end()) return Unauthorized("Invalid access token");
    if (Clock::now() >= it->second) return Unauthorized("Access token expired");
    if (faults_.Take("auth_failure", req.method, req.path)) {
      return Unauthorized("Access token expired");
    }
    return std::nullopt;
  }

  // V-SPEC "Rate Limits" and error table: 429 rate_limit_exceeded with Retry-After.
  HttpResponse Throttled(const HttpRequest& /*req*/, const Fault& f) override {
    HttpResponse r = Error(429, "rate_limit_exceeded", "Too many requests, slow down");
    if (f.retry_after > 0) r.SetHeader("Retry-After", std::to_string(f.retry_after));
    return r;
  }

  // value "after_create": the instance is made, then the 5xx is answered (the ambiguous
  // failure after which a client must find its instance by hostname,
  // plugins/verda/REFERENCE.md §8).
  HttpResponse ServerError(const HttpRequest& req, const Fault& f) override {
    if (f.value == "after_create" && req.method == "POST" &&
        TrimTrailingSlash(req.path) == BasePath() + "/instances") {
      std::lock_guard<std::mutex> lock(mu_);
      CreateInstance(req);
    }
    if (f.status == 503 && req.method == "POST" &&
        TrimTrailingSlash(req.path) == BasePath() + "/instances") {
      // On the create, Verda's own 503 envelope means no capacity (V-SPEC POST /v1/instances
      // "503"; the `capacity` fault answers it). An injected 503 there is an outage in front of
      // the API instead: the gateway's page, not Verda's envelope (V-SPEC lists the Cloudflare
      // header cf-connecting-ip on this operation), which a client cannot read as "no capacity".
      return TextResponse(503,
                          "<html><head><title>503 Service Temporarily Unavailable</title></head>"
                          "<body>503 Service Temporarily Unavailable</body></html>",
                          "text/html");
    }
    if (f.status == 503) return Error(503, "service_unavailable", "Service unavailable");
    return Error(f.status, "server_error", "Internal server error");
  }

  HttpResponse InternalError(const std::string& what) override {
    return Error(500, "server_error", "Internal server error (emulator: " + what + ")");
  }

  HttpResponse Route(const HttpRequest& req) override {
    if (IsTokenPath(req)) {
      if (req.method != "POST") return MethodNotAllowed();
      std::lock_guard<std::mutex> lock(mu_);
      return Token(req);
    }
    std::lock_guard<std::mutex> lock(mu_);
    const std::string base = BasePath();
    const std::string path = TrimTrailingSlash(req.path);
    if (path.compare(0, base.size(), base) != 0) return NotFound("Not found: " + path);
    std::vector<std::string> seg = Split(path.substr(base.size()), '/');
    const std::string& m = req.method;
    // Only what the spec describes (verda_spec_operations.h); anything else is the error
    // table's not_found "Resource not found, or invalid path".
    if (!FindVerdaSpecOperation(m, path)) return NotFound("Not found: " + m + " " + path);
    Reconcile();
    if (seg.empty()) return NotFound("Not found: " + path);
    const std::string& top = seg[0];
    if (top == "instance-types" && seg.size() == 1 && m == "GET") return ListTypes();
    if (top == "instance-availability" && m == "GET") {
      if (seg.size() == 1) return Availability(req);
      if (seg.size() == 2) return TypeAvailable(req, seg[1]);
    }
    if (top == "images" && seg.size() == 1 && m == "GET") return ListImages(req);
    if (top == "locations" && seg.size() == 1 && m == "GET") return ListLocations();
    if (top == "instances") {
      if (seg.size() == 1 && m == "GET") return ListInstances(req);
      if (seg.size() == 1 && m == "POST") return CreateInstance(req);
      if (seg.size() == 1 && m == "PUT") return Action(req);
      if (seg.size() == 2 && m == "GET") return GetInstance(seg[1]);
      return MethodNotAllowed();
    }
    // V-SPEC tag "SSH Keys": "/v1/sshkeys endpoints are deprecated. Use /v1/ssh-keys instead";
    // the spec still lists them (deprecated: true), so they are served, and counted.
    if (top == "sshkeys" || top == "ssh-keys") {
      if (top == "sshkeys") ++deprecated_calls_;
      if (seg.size() == 1 && m == "GET") return ListKeys("");
      if (seg.size() == 1 && m == "POST") return AddKey(req);
      if (seg.size() == 1 && m == "DELETE") return DeleteMany(req, "keys", keys_, "ssh key");
      if (seg.size() == 2 && m == "GET") return ListKeys(seg[1]);
      if (seg.size() == 2 && m == "DELETE") return DeleteOne(seg[1], keys_, "ssh key");
      return MethodNotAllowed();
    }
    if (top == "private-networks") {
      if (seg.size() == 1 && m == "GET") return ListNetworks();
      if (seg.size() == 1 && m == "POST") return CreateNetwork(req);
      if (seg.size() == 2 && m == "GET") return GetNetwork(seg[1]);
      if (seg.size() == 2 && m == "DELETE") return DeleteNetwork(seg[1]);
      return MethodNotAllowed();
    }
    if (top == "scripts") {
      if (seg.size() == 1 && m == "GET") return ListScripts(req);
      if (seg.size() == 1 && m == "POST") return AddScript(req);
      if (seg.size() == 1 && m == "DELETE") return DeleteMany(req, "scripts", scripts_, "script");
      if (seg.size() == 2 && m == "GET") return GetScript(seg[1]);
      if (seg.size() == 2 && m == "DELETE") return DeleteOne(seg[1], scripts_, "script");
      return MethodNotAllowed();
    }
    return NotFound("Not found: " + path);
  }

  // A method the spec does not list for a path: its error table has no 405, only not_found
  // ("Resource not found, or invalid path", 404).
  static HttpResponse MethodNotAllowed() {
    return Error(404, "not_found", "Resource not found, or invalid path");
  }

  // --- OAuth2: V-SPEC POST /v1/oauth2/token (Oauth2Controller_getAccessToken), body oneOf
  // GetAccessTokenDto {grant_type, client_id, client_secret} | RefreshAccessTokenPublicApiDto
  // {grant_type, refresh_token}; 400 example "unsupported grant type", 401 example "Invalid
  // client id or client secret".
  HttpResponse Token(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Invalid("The body must be a JSON object");
    const std::string grant = GetString(body, "grant_type").value_or("");
    if (grant == "client_credentials") {
      if (auto e = CheckShape(body, {{"grant_type", JsonType::kString, true},
                                     {"client_id", JsonType::kString, true},
                                     {"client_secret", JsonType::kString, true}});
          !e.empty()) {
        return Invalid(e);
      }
      const auto id = GetString(body, "client_id");
      const auto secret = GetString(body, "client_secret");
      auto it = clients_.find(*id);
      if (it == clients_.end() || it->second != *secret) {
        return Unauthorized("Invalid client id or client secret");
      }
      return IssueTokens();
    }
    if (grant == "refresh_token") {
      if (auto e = CheckShape(body, {{"grant_type", JsonType::kString, true},
                                     {"refresh_token", JsonType::kString, true}});
          !e.empty()) {
        return Invalid(e);
      }
      const auto refresh = GetString(body, "refresh_token");
      auto it = refresh_tokens_.find(*refresh);
      if (it == refresh_tokens_.end() || Clock::now() >= it->second) {
        return Unauthorized("Invalid refresh token");
      }
      refresh_tokens_.erase(it);  // rotated: each refresh token is good once
      return IssueTokens();
    }
    return Invalid("unsupported grant type");
  }

  HttpResponse IssueTokens() {
    const std::string access = "verda-emu-at-" + RandomHex(24);
    const std::string refresh = "verda-emu-rt-" + RandomHex(24);
    const auto now = Clock::now();
    access_tokens_[access] =
        now + std::chrono::milliseconds(static_cast<int64_t>(token_lifetime_ * 1000));
    refresh_tokens_[refresh] =
        now + std::chrono::seconds(static_cast<int64_t>(kRefreshTokenLifetime));
    JsonObject o = NewObject();
    o->set("access_token", access);
    o->set("refresh_token", refresh);
    o->set("scope", std::string(kScope));
    o->set("token_type", std::string("Bearer"));
    o->set("expires_in", static_cast<int64_t>(token_lifetime_ + 0.999));
    return JsonResponse(200, o);
  }

  // --- catalogue (plugins/verda/REFERENCE.md §3.6) ---
  // Spot stock is its own list (V-SPEC GET /v1/instance-availability is_spot); here the same
  // locations as on demand, less the types the spot_out_of_stock setting names.
  bool InStock(const TypeDef& t, const std::string& location, bool spot = false) const {
    if (out_of_stock_.count(t.instance_type) || out_of_stock_.count("*")) return false;
    if (spot && (spot_out_of_stock_.count(t.instance_type) || spot_out_of_stock_.count("*"))) {
      return false;
    }
    return std::find(t.stock.begin(), t.stock.end(), location) != t.stock.end();
  }

  static bool SpotQuery(const HttpRequest& req) {
    return req.Query("is_spot").value_or(req.Query("isSpot").value_or("false")) == "true";
  }

  static JsonObject Described(const std::string& description) {
    JsonObject o = NewObject();
    o->set("description", description);
    return o;
  }

  // V-SPEC schema InstanceType: every required member (best_for, cpu, description, gpu,
  // gpu_memory, id, instance_type, memory, model, name, p2p, price_per_hour, spot_price,
  // max_dynamic_price, storage, currency, manufacturer, display_name, supported_os), prices
  // as strings; the optional deploy_warning is left out rather than null.
  static JsonObject TypeJson(const TypeDef& t) {
    JsonObject o = NewObject();
    o->set("id", std::string("0b5c7a9e-") + std::to_string(1000 + (&t - Types().data())) +
                     "-4e21-9f3a-5d6c7e8f9a0b");
    o->set("instance_type", std::string(t.instance_type));
    o->set("model", std::string(t.model));
    o->set("name", std::string(t.model));
    o->set("description", std::string(t.instance_type) + " " + t.model);
    o->set("price_per_hour", std::string(t.price));
    o->set("spot_price", std::string(t.spot_price));
    JsonObject cpu = Described(std::to_string(t.vcpus) + " CPU");
    cpu->set("number_of_cores", t.vcpus);
    o->set("cpu", cpu);
    JsonObject gpu = Described(t.gpu_description);
    gpu->set("number_of_gpus", t.gpus);
    o->set("gpu", gpu);
    JsonObject gmem = Described(std::to_string(t.gpu_memory_gb) + "GB GPU RAM");
    gmem->set("size_in_gigabytes", t.gpu_memory_gb);
    o->set("gpu_memory", gmem);
    JsonObject mem = Described(std::to_string(t.memory_gb) + "GB RAM");
    mem->set("size_in_gigabytes", t.memory_gb);
    o->set("memory", mem);
    o->set("storage", Described("Dynamic"));
    JsonArray best = NewArray();
    if (t.gpus > 0) {
      best->add(std::string("Inference"));
      best->add(std::string("Training"));
    }
    o->set("best_for", best);
    o->set("p2p", t.gpus > 1 ? std::string("NVLink") : std::string(""));
    o->set("max_dynamic_price", std::string(t.price));  // deprecated, still required
    o->set("currency", std::string("usd"));
    o->set("manufacturer", std::string(t.gpus > 0 ? "NVIDIA" : "AMD"));
    o->set("display_name", std::string(t.gpus > 0 ? "NVIDIA " : "") + t.model);
    JsonArray os = NewArray();
    for (const auto& i : t.supported_os) os->add(i);
    o->set("supported_os", os);
    return o;
  }

  HttpResponse ListTypes() {
    JsonArray a = NewArray();
    for (const auto& t : Types()) a->add(TypeJson(t));
    return Json(a);
  }

  // The location of an availability query: V-SPEC GET /v1/instance-availability takes
  // location_code and is_spot, and still accepts locationCode / isSpot, "Deprecated camelCase
  // alias" (counted).
  std::string AvailabilityLocation(const HttpRequest& req) {
    if (req.Query("isSpot") || req.Query("locationCode")) ++deprecated_calls_;
    return req.Query("location_code").value_or(req.Query("locationCode").value_or(""));
  }

  // GET /instance-availability?is_spot=&location_code= (V-SPEC
  // InstanceAvailabilityController_getAllAvailabilities).
  HttpResponse Availability(const HttpRequest& req) {
    const std::string only = AvailabilityLocation(req);
    const bool spot = SpotQuery(req);
    if (!only.empty() && !KnownLocation(only)) return Invalid("Invalid location code " + only);
    JsonArray a = NewArray();
    for (const auto& l : Locations()) {
      if (!only.empty() && only != l.code) continue;
      JsonObject o = NewObject();
      o->set("location_code", std::string(l.code));
      JsonArray types = NewArray();
      for (const auto& t : Types()) {
        if (InStock(t, l.code, spot)) types->add(std::string(t.instance_type));
      }
      o->set("availabilities", types);
      a->add(o);
    }
    return Json(a);
  }

  // GET /instance-availability/{type}?isSpot=&location_code= → true|false.
  HttpResponse TypeAvailable(const HttpRequest& req, const std::string& type) {
    const std::string location = AvailabilityLocation(req);
    if (!location.empty() && !KnownLocation(location)) {
      return Invalid("Invalid location code " + location);
    }
    const TypeDef* t = FindType(type);
    bool available = false;
    if (t) {
      for (const auto& l : Locations()) {
        if ((location.empty() || location == l.code) && InStock(*t, l.code, SpotQuery(req))) {
          available = true;
        }
      }
    }
    HttpResponse r;
    r.body = available ? "true" : "false";
    return r;
  }

  // V-SPEC GET /v1/images (schema Os): "instance_type: Filter OS images by instance type",
  // 404 "Instance type not found".
  HttpResponse ListImages(const HttpRequest& req) {
    const TypeDef* only = nullptr;
    if (auto t = req.Query("instance_type")) {
      only = FindType(*t);
      if (!only) return NotFound("Instance type not found");
    }
    JsonArray a = NewArray();
    for (const auto& i : Images()) {
      if (only && std::find(only->supported_os.begin(), only->supported_os.end(),
                            i.image_type) == only->supported_os.end()) {
        continue;
      }
      JsonObject o = NewObject();
      o->set("id", std::string(i.id));
      o->set("name", std::string(i.name));
      o->set("image_type", std::string(i.image_type));
      JsonArray details = NewArray();
      details->add(std::string(i.name));
      o->set("details", details);
      o->set("is_default", std::string(i.image_type) == "ubuntu-24.04-cuda-12.8-open-docker");
      o->set("is_cluster", false);
      o->set("category", std::string("ubuntu"));
      a->add(o);
    }
    return Json(a);
  }

  HttpResponse ListLocations() {
    JsonArray a = NewArray();
    for (const auto& l : Locations()) {
      JsonObject o = NewObject();
      o->set("code", std::string(l.code));
      o->set("name", std::string(l.name));
      o->set("country_code", std::string(l.country_code));
      a->add(o);
    }
    return Json(a);
  }

  // --- instances (plugins/verda/REFERENCE.md §3.1-§3.4) ---
  std::string StatusOf(const Instance& in) const {
    if (in.gone_at) return "deleting";
    if (!in.fixed_status.empty()) return in.fixed_status;
    const InstanceStatus s = backend_->State(in.backend_id);
    switch (s.state) {
      case InstanceState::kProvisioning:
        return std::chrono::duration<double>(Clock::now() - in.created).count() < ordered_seconds_
                   ? "ordered"
                   : "provisioning";
      case InstanceState::kRunning:
        return "running";
      case InstanceState::kError:
        return in.error_status;
      case InstanceState::kStopped:
        return "offline";  // plugins/verda/REFERENCE.md §3.2: shut down, GPU still billed
      case InstanceState::kGone:
        return "discontinued";
    }
    return "provisioning";
  }

  // Forgets instances whose deletion has ended and those that vanished; a vanish as
  // "discontinued" stays listed with that status (until deleted).
  void Reconcile() {
    const auto now = Clock::now();
    for (auto it = instances_.begin(); it != instances_.end();) {
      Instance& in = it->second;
      if (in.gone_at) {
        it = now >= *in.gone_at ? instances_.erase(it) : std::next(it);
        continue;
      }
      if (!in.backend_id.empty() &&
          backend_->State(in.backend_id).state == InstanceState::kGone) {
        const bool preempted = backend_->State(in.backend_id).preempted;
        backend_->Delete(in.backend_id);
        if (preempted && in.is_spot) {
          // Verda ends a spot instance it takes back by discontinuing it; its OS volume follows
          // os_volume.on_spot_discontinue (verda-cloud/sdk-python v1.20.0 release notes:
          // keep_detached, move_to_trash, delete_permanently). It stays listed as discontinued
          // until deleted (the emulator's choice: the reference does not say how long).
          in.preempted = true;
          if (in.on_spot_discontinue == "keep_detached") detached_.insert(in.os_volume_id);
          if (in.on_spot_discontinue == "move_to_trash") trash_.insert(in.os_volume_id);
          in.backend_id.clear();
          in.fixed_status = "discontinued";
          ++it;
          continue;
        }
        if (!in.vanish_discontinued) {
          it = instances_.erase(it);
          continue;
        }
        in.backend_id.clear();
        in.fixed_status = "discontinued";
      }
      ++it;
    }
  }

  JsonObject InstanceJson(const Instance& in) const {
    const std::string status = StatusOf(in);
    JsonObject o = NewObject();
    o->set("id", in.id);
    Poco::Dynamic::Var ip;
    if (status == "running" || status == "offline") {
      const InstanceStatus s = backend_->State(in.backend_id);
      if (!s.public_ip.empty() && s.running_for.count() >= in.ip_after_seconds * 1000) {
        ip = s.public_ip;
      }
    }
    o->set("ip", in.public_ip ? ip : Poco::Dynamic::Var());
    // V-GO-PN Instance: "PrivateIP, PrivateNetworkID and SubnetID are nil for classic
    // (non-VPC) instances"; the address is the backend's on the subnet's network.
    Poco::Dynamic::Var private_ip;
    if (!in.network_id.empty() && (status == "running" || status == "offline")) {
      const InstanceStatus st = backend_->State(in.backend_id);
      if (!st.private_ip.empty()) private_ip = st.private_ip;
    }
    o->set("private_ip", private_ip);
    o->set("private_network_id",
           in.network_id.empty() ? Poco::Dynamic::Var() : Poco::Dynamic::Var(in.network_id));
    o->set("subnet_id",
           in.subnet_id.empty() ? Poco::Dynamic::Var() : Poco::Dynamic::Var(in.subnet_id));
    o->set("status", status);
    o->set("created_at", Rfc3339(in.created_at));
    o->set("hostname", in.hostname);
    o->set("description", in.description);
    o->set("location", in.location);
    o->set("instance_type", std::string(in.type->instance_type));
    o->set("image", std::string(in.image->image_type));
    o->set("os_name", std::string(in.image->name));
    o->set("price_per_hour",
           std::stod(in.is_spot ? in.type->spot_price : in.type->price));
    o->set("is_spot", in.is_spot);
    o->set("contract", in.contract);
    o->set("pricing", in.pricing);
    const JsonObject t = TypeJson(*in.type);
    o->set("cpu", t->getObject("cpu"));
    o->set("gpu", t->getObject("gpu"));
    o->set("gpu_memory", t->getObject("gpu_memory"));
    o->set("memory", t->getObject("memory"));
    o->set("storage", t->getObject("storage"));
    JsonArray keys = NewArray();
    for (const auto& k : in.ssh_key_ids) keys->add(k);
    o->set("ssh_key_ids", keys);
    // Required by V-SPEC GetInstanceResponsePublicApiDto; null without a script, as V-GO's
    // Instance.StartupScriptID (*string, pkg/verda/instances_types.go) expects.
    if (in.startup_script_id.empty()) {
      o->set("startup_script_id", Poco::Dynamic::Var());
    } else {
      o->set("startup_script_id", in.startup_script_id);
    }
    o->set("os_volume_id", in.os_volume_id);
    // V-SPEC GetInstanceResponsePublicApiDto.volume_ids: required array; its example lists the
    // OS volume (the os_volume_id of the same example) among them.
    JsonArray volumes = NewArray();
    volumes->add(in.os_volume_id);
    o->set("volume_ids", volumes);
    o->set("jupyter_token", in.jupyter_token);
    o->set("tags", in.tags ? in.tags : NewArray());
    return o;
  }

  HttpResponse ListInstances(const HttpRequest& req) {
    const std::string only = req.Query("status").value_or("");
    std::vector<const Instance*> list;
    for (const auto& [id, in] : instances_) list.push_back(&in);
    std::sort(list.begin(), list.end(), [](const Instance* a, const Instance* b) {
      return a->created_at < b->created_at;
    });
    JsonArray a = NewArray();
    for (const Instance* in : list) {
      if (!only.empty() && StatusOf(*in) != only) continue;
      a->add(InstanceJson(*in));
    }
    return Json(a);
  }

  HttpResponse GetInstance(const std::string& id) {
    auto it = instances_.find(id);
    if (it == instances_.end()) return NotFound("Invalid instance id");
    return JsonResponse(200, InstanceJson(it->second));
  }

  // A create's tags as the instance then carries them (V-SPEC TagResponseDto {id, key, value}):
  // at most 10 (DeployInstancePublicDto.tags "Maximum 10"), each a TagDto {key required,
  // maxLength 63; value maxLength 127, omitted = a freeform tag, value ""}; "Keys are
  // lowercased"; "the same key-value pair receives the same tag id wherever it is applied"
  // (changelog 2026-09-11). Null with *error set for a list the API refuses.
  JsonArray Tags(const JsonArray& tags, std::string* error) {
    if (tags->size() > kMaxTags) {
      *error = "tags must contain no more than " + std::to_string(kMaxTags) + " elements";
      return nullptr;
    }
    JsonArray out = NewArray();
    std::set<std::string> keys;
    for (unsigned i = 0; i < tags->size(); ++i) {
      JsonObject t = tags->getObject(i);
      const std::string where = "tags[" + std::to_string(i) + "]";
      if (!t) {
        *error = where + " must be an object";
        return nullptr;
      }
      if (auto e = CheckShape(t, {{"key", JsonType::kString, true}, {"value", JsonType::kString}},
                              where);
          !e.empty()) {
        *error = e;
        return nullptr;
      }
      std::string key = *GetString(t, "key");
      const std::string value = GetString(t, "value").value_or("");
      if (key.empty() || CodePoints(key) > kMaxTagKey) {
        *error = where + ".key must be 1 to " + std::to_string(kMaxTagKey) + " characters";
        return nullptr;
      }
      if (CodePoints(value) > kMaxTagValue) {
        *error = where + ".value must be shorter than or equal to " +
                 std::to_string(kMaxTagValue) + " characters";
        return nullptr;
      }
      for (auto& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (!keys.insert(key).second) continue;
      std::string& id = tag_ids_[key + "\n" + value];
      if (id.empty()) id = "tag_" + RandomHex(11);
      JsonObject o = NewObject();
      o->set("id", id);
      o->set("key", key);
      o->set("value", value);
      out->add(o);
    }
    return out;
  }

  // V-SPEC POST /v1/instances (InstancesController_deployInstance), body
  // DeployInstancePublicDto: required instance_type, image, hostname, location_code (required
  // since the 2026-03-19 changelog); ssh_key_ids one id or a list; tags at most 10 TagDto.
  HttpResponse CreateInstance(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Invalid("The body must be a JSON object");
    if (auto one = GetString(body, "ssh_key_ids")) {  // oneOf: a uuid or an array of them
      JsonArray ids = NewArray();
      ids->add(*one);
      body->set("ssh_key_ids", ids);
    }
    if (auto e = CheckShape(body, {{"instance_type", JsonType::kString, true},
                                   {"image", JsonType::kString, true},
                                   {"hostname", JsonType::kString, true},
                                   {"description", JsonType::kString},
                                   {"ssh_key_ids", JsonType::kArray},
                                   {"location_code", JsonType::kString, true},
                                   {"startup_script_id", JsonType::kString},
                                   {"os_volume", JsonType::kObject},
                                   {"is_spot", JsonType::kBool},
                                   {"contract", JsonType::kString},
                                   {"pricing", JsonType::kString},
                                   {"volumes", JsonType::kArray},
                                   {"existing_volumes", JsonType::kArray},
                                   {"coupon", JsonType::kString},
                                   {"tags", JsonType::kArray},
                                   {"network", JsonType::kString},
                                   {"subnet", JsonType::kString},
                                   {"private_ip", JsonType::kString},
                                   {"public_ip", JsonType::kString}});
        !e.empty()) {
      return Invalid(e);
    }
    Instance in;
    in.hostname = *GetString(body, "hostname");
    in.description = GetString(body, "description").value_or("");
    if (in.hostname.empty()) return Invalid("hostname must not be empty");
    const std::string type_name = *GetString(body, "instance_type");
    in.type = FindType(type_name);
    if (!in.type) return Invalid("Invalid instance type " + type_name);
    in.image_value = *GetString(body, "image");
    in.image = FindImage(in.image_value);
    if (!in.image) return Invalid("Invalid image " + in.image_value);
    // V-SPEC InstanceType.supported_os; the message is the one V-DS quotes from Verda.
    if (std::find(in.type->supported_os.begin(), in.type->supported_os.end(),
                  in.image->image_type) == in.type->supported_os.end()) {
      return Invalid("Operating system is not valid for this instance type");
    }
    in.location = *GetString(body, "location_code");
    if (!KnownLocation(in.location)) return Invalid("Invalid location code " + in.location);
    std::vector<std::string> public_keys;
    if (JsonArray ids = GetArray(body, "ssh_key_ids")) {
      if (auto e = CheckItems(ids, JsonType::kString, "ssh_key_ids"); !e.empty()) {
        return Invalid(e);
      }
      for (unsigned i = 0; i < ids->size(); ++i) {
        const std::string id = ids->get(i).toString();
        auto k = keys_.find(id);
        if (k == keys_.end()) return Invalid("Invalid ssh key id " + id);
        in.ssh_key_ids.push_back(id);
        public_keys.push_back(k->second.key);
      }
    }
    if (auto sid = GetString(body, "startup_script_id")) {
      auto s = scripts_.find(*sid);
      if (s == scripts_.end()) return Invalid("Invalid startup script id " + *sid);
      in.startup_script_id = *sid;
      in.startup_script = s->second.script;
    }
    in.is_spot = GetBool(body, "is_spot").value_or(false);
    if (in.is_spot) in.contract = "SPOT";
    // V-SPEC DeployInstancePublicDto.contract enum; os_volume.on_spot_discontinue enum
    // (verda-cloud/sdk-python v1.20.0 release notes).
    if (auto c = GetString(body, "contract")) {
      if (*c != "PAY_AS_YOU_GO" && *c != "SPOT" && *c != "LONG_TERM") {
        return Invalid("contract must be one of PAY_AS_YOU_GO, SPOT, LONG_TERM");
      }
      in.contract = *c;
    }
    if (JsonObject os_volume = GetObject(body, "os_volume")) {
      if (auto e = CheckShape(os_volume, {{"name", JsonType::kString},
                                          {"size", JsonType::kNumber},
                                          {"on_spot_discontinue", JsonType::kString}},
                              "os_volume");
          !e.empty()) {
        return Invalid(e);
      }
      if (auto d = GetString(os_volume, "on_spot_discontinue")) {
        if (*d != "keep_detached" && *d != "move_to_trash" && *d != "delete_permanently") {
          return Invalid("os_volume.on_spot_discontinue must be one of keep_detached, "
                         "move_to_trash, delete_permanently");
        }
        in.on_spot_discontinue = *d;
      }
    }
    if (auto p = GetString(body, "pricing")) in.pricing = *p;
    if (std::string e = Attach(body, &in); !e.empty()) return Invalid(e);
    if (JsonArray tags = GetArray(body, "tags")) {
      std::string e;
      in.tags = Tags(tags, &e);
      if (!e.empty()) return Invalid(e);
    }
    // Stock and account limits after validation, as a real API checks the body first.
    // No capacity: V-SPEC POST /v1/instances "503": "The requested instance type has no
    // capacity in the selected location", example {"code":"service_unavailable","message":
    // "No capacity available"}.
    if (faults_.Take("capacity", req.method, req.path) ||
        !InStock(*in.type, in.location, in.is_spot)) {
      return Error(503, "service_unavailable", "No capacity available");
    }
    // V-SPEC error table: forbidden_action "Can't perform the current action", 403 (the
    // spec gives no body for a quota refusal; the message is ours).
    if (faults_.Take("quota", req.method, req.path)) {
      return Error(403, "forbidden_action", "Instance quota limit exceeded");
    }
    if (faults_.Take("payment_required", req.method, req.path)) {
      return Error(402, "insufficient_funds", "Insufficient funds to deploy the instance");
    }
    std::string error;
    const std::string id = Launch(std::move(in), 0, &error);
    if (id.empty()) return Error(500, "server_error", error);
    return IdText(202, id);
  }

  // Makes the instance (age_seconds: created that long ago), through the backend unless
  // fixed_status is set (an instance an earlier run left in that state); its id, or "" with
  // *error.
  std::string Launch(Instance in, double age_seconds, std::string* error,
                     const std::string& fixed_status = "") {
    in.id = RandomUuid();
    in.os_volume_id = RandomUuid();
    in.jupyter_token = RandomHex(16);
    const auto age = std::chrono::milliseconds(static_cast<int64_t>(age_seconds * 1000));
    in.created_at = SysClock::now() - age;
    in.created = Clock::now() - age;
    in.fixed_status = fixed_status;
    if (fixed_status.empty()) {
      // error_during_boot's value is the status it ends in; vanish_during_boot "discontinued"
      // keeps it listed as discontinued instead of 404.
      const std::optional<Fault> fail = faults_.Take("error_during_boot");
      if (fail && !fail->value.empty()) in.error_status = fail->value;
      const std::optional<Fault> vanish = faults_.Take("vanish_during_boot");
      in.vanish_discontinued = vanish && vanish->value == "discontinued";
      if (auto f = faults_.Take("ip_after_boot")) in.ip_after_seconds = f->seconds;
      InstanceSpec spec;
      spec.cloud = name_;
      spec.name = in.hostname;
      spec.image = in.image->image_type;
      spec.gpu_type = in.type->testvm_gpu;
      spec.gpu_count = in.type->gpus;
      spec.startup_script = in.startup_script;  // run by the "cloud", never by cloud-init
      for (const auto& kid : in.ssh_key_ids) spec.ssh_public_keys.push_back(keys_.at(kid).key);
      spec.ssh_user = "root";           // plugins/verda/REFERENCE.md §9
      // no firewall API (plugins/verda/REFERENCE.md §5): every port
      spec.reachable = PortSet::All();
      // No firewall between instances either (plugins/verda/README.md, Clusters): they reach
      // each other at their public addresses on every port, and on their subnet's private
      // network when on one; the node firewall filters.
      spec.public_network = true;
      spec.private_network = in.subnet_id;
      spec.faults = faults_.TakeBootFaults();
      if (fail) spec.faults.error = true;
      if (vanish) spec.faults.vanish = true;
      try {
        in.backend_id = backend_->Create(spec);
      } catch (const BackendError& e) {
        *error = std::string("Internal server error (emulator backend: ") + e.what() + ")";
        return "";
      }
    }
    const std::string id = in.id;
    instances_[id] = std::move(in);
    return id;
  }

  // create's private network fields (V-GO-PN CreateInstanceRequest): "private_ip and public_ip
  // must both be set (or both omitted)", each "auto", "none" or an IPv4 address, "cannot both
  // be none"; network and subnet ids select the attachment, and "Omitting both takes the
  // project's default network and its default subnet in the instance's location when the IPs
  // request a private network". An auto network makes its subnet in a location on first use.
  // The emulator assigns the addresses itself (a literal one is accepted, not honoured).
  // Sets in's network, subnet and public address; the refusal's message, else "".
  std::string Attach(const JsonObject& body, Instance* in) {
    const std::optional<std::string> priv = GetString(body, "private_ip");
    const std::optional<std::string> pub = GetString(body, "public_ip");
    const std::string network = GetString(body, "network").value_or("");
    const std::string subnet = GetString(body, "subnet").value_or("");
    if (priv.has_value() != pub.has_value()) {
      return "private_ip and public_ip must both be set (or both omitted)";
    }
    auto valid = [](const std::string& v) {
      if (v == "auto" || v == "none") return true;
      Poco::Net::IPAddress a;
      return Poco::Net::IPAddress::tryParse(v, a) && a.family() == Poco::Net::IPAddress::IPv4;
    };
    for (const auto& [field, v] : {std::pair{"private_ip", priv}, std::pair{"public_ip", pub}}) {
      if (v && !valid(*v)) {
        return std::string(field) + " must be \"auto\", \"none\" or an IPv4 address";
      }
    }
    if (priv && *priv == "none" && *pub == "none") {
      return "private_ip and public_ip cannot both be \"none\"";
    }
    const bool wants_private = (priv && *priv != "none") || !network.empty() || !subnet.empty();
    if (!wants_private) {
      if (pub && *pub == "none") return "public_ip \"none\" needs a private address";
      return "";
    }
    if (priv && *priv == "none") return "private_ip \"none\" with a network or subnet";
    Network* n = nullptr;
    if (network.empty()) {
      for (auto& [id, candidate] : networks_) {
        if (candidate.is_default) n = &candidate;
      }
      if (!n) return "The project has no default private network";
    } else {
      auto it = networks_.find(network);
      if (it == networks_.end()) return "Invalid private network id " + network;
      n = &it->second;
    }
    auto sub = n->subnets.find(in->location);
    if (sub == n->subnets.end()) {
      if (n->mode != "auto") {
        return "Private network " + n->name + " has no subnet in " + in->location;
      }
      sub = n->subnets.emplace(in->location, "sn_" + RandomHex(12)).first;
    }
    if (!subnet.empty() && subnet != sub->second) return "Invalid subnet id " + subnet;
    in->network_id = n->id;
    in->subnet_id = sub->second;
    in->public_ip = !(pub && *pub == "none");
    return "";
  }

  // --- private networks (V-GO-PN PrivateNetworkService) ---
  JsonObject NetworkJson(const Network& n) const {
    JsonObject o = NewObject();
    o->set("id", n.id);
    o->set("name", n.name);
    o->set("mode", n.mode);
    o->set("is_default", n.is_default);
    o->set("created_by_user_id", kUserId);
    o->set("created_at", Rfc3339(n.created_at));
    return o;
  }

  HttpResponse ListNetworks() {
    std::vector<const Network*> list;
    for (const auto& [id, n] : networks_) list.push_back(&n);
    std::sort(list.begin(), list.end(),
              [](const Network* a, const Network* b) { return a->created_at < b->created_at; });
    JsonArray a = NewArray();
    for (const Network* n : list) a->add(NetworkJson(*n));
    return Json(a);
  }

  // POST /private-networks {name (required), mode "auto"|"custom", is_default}: the network.
  // V-GO-PN names no uniqueness rule for names: two networks may share one.
  HttpResponse CreateNetwork(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Invalid("The body must be a JSON object");
    if (auto e = CheckShape(body, {{"name", JsonType::kString, true},
                                   {"mode", JsonType::kString},
                                   {"is_default", JsonType::kBool}});
        !e.empty()) {
      return Invalid(e);
    }
    Network n;
    n.name = *GetString(body, "name");
    if (n.name.empty()) return Invalid("name must not be empty");
    n.mode = GetString(body, "mode").value_or("auto");
    if (n.mode != "auto" && n.mode != "custom") return Invalid("mode must be one of auto, custom");
    n.is_default = GetBool(body, "is_default").value_or(false);
    if (n.is_default) {
      for (auto& [id, other] : networks_) other.is_default = false;
    }
    n.id = "pn_" + RandomHex(12);
    n.created_at = SysClock::now();
    networks_[n.id] = n;
    return JsonResponse(201, NetworkJson(n));
  }

  HttpResponse GetNetwork(const std::string& id) {
    auto it = networks_.find(id);
    if (it == networks_.end()) return NotFound("Private network not found");
    return JsonResponse(200, NetworkJson(it->second));
  }

  // DELETE /private-networks/{id} "deletes a private network and its subnets" (V-GO-PN); one an
  // instance is still on (also one being deleted) is refused: the emulator's rule, as V-GO-PN
  // gives none.
  HttpResponse DeleteNetwork(const std::string& id) {
    auto it = networks_.find(id);
    if (it == networks_.end()) return NotFound("Private network not found");
    for (const auto& [iid, in] : instances_) {
      if (in.network_id == id) {
        return Error(400, "invalid_request",
                     "Private network " + it->second.name + " still has instances (" +
                         in.hostname + ")");
      }
    }
    networks_.erase(it);
    return EmptyResponse(204);
  }

  // POST /settings seed_instances item: {"hostname", "instance_type"?, "location_code"?,
  // "status"? ("running" (default): a real backend instance; any other status is only a
  // record), "age_seconds"? (default 600)}: an instance an earlier run left behind (reference
  // plugins/verda/REFERENCE.md §3.3: hostnames are not unique).
  std::string Seed(const JsonObject& o) {
    if (!o) return "must be an object";
    Instance in;
    in.hostname = GetString(o, "hostname").value_or("");
    if (in.hostname.empty()) return "\"hostname\" is required";
    in.description = GetString(o, "description").value_or("");
    in.type = FindType(GetString(o, "instance_type").value_or("1H100.80S.30V"));
    if (!in.type) return "unknown instance_type";
    in.image = FindImage("ubuntu-24.04-cuda-12.8-open-docker");
    in.location = GetString(o, "location_code").value_or("FIN-01");
    const std::string status = GetString(o, "status").value_or("running");
    std::string error;
    const std::string id = Launch(in, GetDouble(o, "age_seconds").value_or(600), &error,
                                  status == "running" ? "" : status);
    return id.empty() ? error : "";
  }

  // PUT /instances (V-SPEC InstancesController_performActions, body
  // PerformInstanceActionPublicDto {action, id: uuid | [uuid], volume_ids?: [string],
  // delete_permanently?: bool}). One id: success 202 with the result array, a refusal as the
  // error envelope ("400/404 ... (single action only)"); several ids: 202 when all succeed,
  // 207 with one InstanceActionResultDto each when some fail.
  // Volumes of a deleted instance (V-SPEC PUT description and changelog 2026-02-03): those in
  // volume_ids are deleted (permanently with delete_permanently, else moved to the trash);
  // "If not providing a volume_ids array, only the OS volume will be deleted [to the trash]
  // and the rest detached", and delete_permanently applies only "when volume IDs to delete are
  // also provided". volume_ids null counts as not provided: V-GO's InstanceActionRequest
  // (pkg/verda/instances_types.go) sends null for a nil slice.
  HttpResponse Action(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Invalid("The body must be a JSON object");
    if (auto e = CheckShape(body, {{"action", JsonType::kString, true},
                                   {"id", GetString(body, "id") ? JsonType::kString
                                                                 : JsonType::kArray,
                                    true},
                                   {"volume_ids", JsonType::kArray},
                                   {"delete_permanently", JsonType::kBool}});
        !e.empty()) {
      return Invalid(e);
    }
    std::optional<std::set<std::string>> volume_ids;
    if (JsonArray v = GetArray(body, "volume_ids")) {
      if (auto e = CheckItems(v, JsonType::kString, "volume_ids"); !e.empty()) return Invalid(e);
      volume_ids.emplace();
      for (unsigned i = 0; i < v->size(); ++i) volume_ids->insert(v->get(i).toString());
    }
    const bool permanently = GetBool(body, "delete_permanently").value_or(false);
    const std::string action = GetString(body, "action").value_or("");
    if (action.empty()) return Invalid("action is required");
    std::vector<std::string> ids;
    if (auto one = GetString(body, "id")) {
      ids.push_back(*one);
    } else if (JsonArray a = GetArray(body, "id")) {
      if (auto e = CheckItems(a, JsonType::kString, "id"); !e.empty()) return Invalid(e);
      for (unsigned i = 0; i < a->size(); ++i) ids.push_back(a->get(i).toString());
    }
    if (ids.empty()) return Invalid("id is required: an instance id or a list of them");
    // V-SPEC PerformInstanceActionPublicDto.action enum.
    static const std::set<std::string> known = {
        "boot",   "start",       "shutdown",     "force_shutdown", "hibernate", "delete",
        "discontinue", "delete_stuck", "configure_spot", "deploy",   "transfer"};
    if (known.count(action) == 0) return Invalid("Invalid action " + action);
    if (action != "delete" && action != "discontinue" && action != "delete_stuck") {
      return Invalid("Action " + action + " is not emulated (not from the reference)");
    }
    struct Result {
      std::string id;
      int status = 202;
      std::string code, error;
    };
    std::vector<Result> results;
    for (const auto& id : ids) {
      Result r;
      r.id = id;
      auto it = instances_.find(id);
      if (it == instances_.end()) {
        r.status = 404;
        r.code = "not_found";
        r.error = "Invalid instance id";
      } else {
        Instance& in = it->second;
        const std::string s = StatusOf(in);
        // A preempted spot instance is deleted (the emulator's choice: the reference does not
        // say; its kept OS volume goes as a delete's volume_ids say).
        if (action == "delete" && in.preempted && !in.gone_at) {
          in.gone_at = Clock::now();
          detached_.erase(in.os_volume_id);
          if (volume_ids && volume_ids->count(in.os_volume_id) == 0) {
            detached_.insert(in.os_volume_id);
          }
        } else if (s == "deleting" || s == "discontinued") {
          r.status = 400;
          r.code = "invalid_request";
          r.error = "Can't discontinue a discontinued instance";
        } else if (action != "delete_stuck" &&
                   (s == "new" || s == "ordered" || s == "pending" || s == "validating" ||
                    s == "provisioning")) {
          r.status = 400;
          r.code = "invalid_request";
          r.error = "Can't discontinue a provisioning instance";
        } else {
          if (!in.backend_id.empty()) backend_->Delete(in.backend_id);
          in.gone_at = Clock::now() + std::chrono::milliseconds(
                                          static_cast<int64_t>(deleting_seconds_ * 1000));
          if (!volume_ids) {
            trash_.insert(in.os_volume_id);
          } else if (volume_ids->count(in.os_volume_id) == 0) {
            detached_.insert(in.os_volume_id);
          } else if (!permanently) {
            trash_.insert(in.os_volume_id);
          }
        }
      }
      results.push_back(r);
    }
    if (results.size() == 1 && results[0].status != 202) {
      return Error(results[0].status, results[0].code, results[0].error);
    }
    JsonArray a = NewArray();
    bool some_failed = false;
    for (const auto& r : results) {
      some_failed = some_failed || r.status != 202;
      JsonObject o = NewObject();
      o->set("action", action);
      o->set("instanceId", r.id);
      o->set("status", std::string(r.status == 202 ? "success" : "error"));
      if (r.status != 202) {
        o->set("error", r.error);
        o->set("statusCode", r.status);
      }
      a->add(o);
    }
    return Json(a, some_failed ? 207 : 202);
  }

  // --- SSH keys (plugins/verda/REFERENCE.md §3.5) and startup scripts (§4) ---
  static JsonObject KeyJson(const SshKey& k) {
    JsonObject o = NewObject();
    o->set("id", k.id);
    o->set("name", k.name);
    o->set("key", k.key);
    o->set("fingerprint", k.fingerprint);
    // V-SPEC GetKeysResponseDto requires created_by_user_id, "null when the creator is
    // unknown" (changelog 2026-09-21); the emulator has no users.
    o->set("created_by_user_id", Poco::Dynamic::Var());
    o->set("created_at", Rfc3339(k.created_at));
    return o;
  }

  // All keys, or (one non-empty) a one-element array.
  HttpResponse ListKeys(const std::string& one) {
    JsonArray a = NewArray();
    if (!one.empty()) {
      auto it = keys_.find(one);
      if (it == keys_.end()) return NotFound("Invalid ssh key id");
      a->add(KeyJson(it->second));
      return Json(a);
    }
    for (const auto& [id, k] : keys_) a->add(KeyJson(k));
    return Json(a);
  }

  HttpResponse AddKey(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Invalid("The body must be a JSON object");
    if (auto e = CheckShape(body, {{"name", JsonType::kString, true},
                                   {"key", JsonType::kString, true}});
        !e.empty()) {
      return Invalid(e);
    }
    SshKey k;
    k.name = *GetString(body, "name");
    k.key = TrimSpace(*GetString(body, "key"));
    if (k.name.empty()) return Invalid("name must not be empty");
    const std::string blob = PublicKeyBlob(k.key);
    if (blob.empty()) return Invalid("key must be an OpenSSH public key (\"ssh-ed25519 AAAA...\")");
    k.id = RandomUuid();
    k.fingerprint = Md5Fingerprint(blob);
    k.created_at = SysClock::now();
    keys_[k.id] = k;
    return IdText(201, k.id);
  }

  static JsonObject ScriptJson(const Script& s) {
    JsonObject o = NewObject();
    o->set("id", s.id);
    o->set("name", s.name);
    o->set("script", s.script);
    o->set("created_at", Rfc3339(s.created_at));
    return o;
  }

  // GET /scripts/{id}: a one-element array (V-GO startup_scripts.go: "API returns array even
  // for single script lookup").
  HttpResponse GetScript(const std::string& id) {
    auto it = scripts_.find(id);
    if (it == scripts_.end()) return NotFound("Invalid script id");
    JsonArray a = NewArray();
    a->add(ScriptJson(it->second));
    return Json(a);
  }

  // A page number query parameter: 1.. (the spec's "number"); nullopt with *error otherwise.
  static std::optional<int64_t> PageNumber(const HttpRequest& req, const std::string& name,
                                           int64_t fallback, int64_t max, std::string* error) {
    const std::optional<std::string> v = req.Query(name);
    if (!v) return fallback;
    try {
      size_t used = 0;
      const long long n = std::stoll(*v, &used);
      if (used == v->size() && n >= 1 && n <= max) return n;
    } catch (const std::exception&) {
    }
    *error = name + " must be a number from 1 to " + std::to_string(max);
    return std::nullopt;
  }

  // GET /scripts (V-SPEC ScriptsController_getScripts): page (default 1), pageSize (default
  // 10, maximum 100), name ("Startup scripts match by a partial name"), orderBy (only
  // created_at), orderDirection (asc | desc, default desc: changelog 2026-06-12); the payload
  // stays a plain array and the page is described by X-Page, X-Page-Size and X-Total-Count
  // (section "Pagination").
  HttpResponse ListScripts(const HttpRequest& req) {
    std::string e;
    const auto page = PageNumber(req, "page", 1, std::numeric_limits<int32_t>::max(), &e);
    const auto size = PageNumber(req, "pageSize", kScriptPageDefault, kScriptPageMax, &e);
    if (!page || !size) return Invalid(e);
    const std::string order_by = req.Query("orderBy").value_or("created_at");
    const std::string direction = req.Query("orderDirection").value_or("desc");
    if (order_by != "created_at") return Invalid("orderBy must be one of: created_at");
    if (direction != "asc" && direction != "desc") {
      return Invalid("orderDirection must be one of: asc, desc");
    }
    std::string filter = req.Query("name").value_or("");
    auto lower = [](std::string t) {
      for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return t;
    };
    filter = lower(filter);
    std::vector<const Script*> match;
    for (const auto& [id, sc] : scripts_) {
      if (filter.empty() || lower(sc.name).find(filter) != std::string::npos) match.push_back(&sc);
    }
    std::sort(match.begin(), match.end(), [&](const Script* a, const Script* b) {
      return direction == "asc" ? a->seq < b->seq : a->seq > b->seq;
    });
    JsonArray a = NewArray();
    const size_t first = static_cast<size_t>((*page - 1) * *size);
    for (size_t i = first; i < match.size() && i < first + static_cast<size_t>(*size); ++i) {
      a->add(ScriptJson(*match[i]));
    }
    HttpResponse r = Json(a);
    r.SetHeader("X-Page", std::to_string(*page));
    r.SetHeader("X-Page-Size", std::to_string(*size));
    r.SetHeader("X-Total-Count", std::to_string(match.size()));
    return r;
  }

  HttpResponse AddScript(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Invalid("The body must be a JSON object");
    if (auto e = CheckShape(body, {{"name", JsonType::kString, true},
                                   {"script", JsonType::kString, true}});
        !e.empty()) {
      return Invalid(e);
    }
    Script s;
    s.name = *GetString(body, "name");
    s.script = *GetString(body, "script");
    if (s.name.empty()) return Invalid("name must not be empty");
    if (s.script.empty()) return Invalid("script must not be empty");
    if (max_script_bytes_ > 0 && static_cast<int64_t>(s.script.size()) > max_script_bytes_) {
      return Invalid("script is too long: " + std::to_string(s.script.size()) +
                     " bytes, at most " + std::to_string(max_script_bytes_));
    }
    // V-SPEC changelog 2026-03-30: "Total number of startup scripts in a project now limited
    // by a per-user quota with a default of 100". The spec gives no body for the refusal; the
    // status and code are the error table's forbidden_action ("Can't perform the current
    // action", 403), the message ours.
    if (static_cast<int64_t>(scripts_.size()) >= script_quota_) {
      return Error(403, "forbidden_action",
                   "Startup script quota exceeded: the project has " +
                       std::to_string(scripts_.size()) + " of at most " +
                       std::to_string(script_quota_) + " startup scripts");
    }
    s.id = RandomUuid();
    s.created_at = SysClock::now();
    s.seq = ++script_seq_;
    scripts_[s.id] = s;
    return IdText(201, s.id);
  }

  template <class Map>
  HttpResponse DeleteOne(const std::string& id, Map& map, const std::string& what) {
    if (map.erase(id) == 0) return NotFound("Invalid " + what + " id");
    return EmptyResponse(200);
  }

  // DELETE /sshkeys {"keys": [ids]}, DELETE /scripts {"scripts": [ids]}: all or nothing.
  template <class Map>
  HttpResponse DeleteMany(const HttpRequest& req, const std::string& field, Map& map,
                          const std::string& what) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Invalid("The body must be a JSON object");
    if (auto e = CheckShape(body, {{field, JsonType::kArray, true}}); !e.empty()) {
      return Invalid(e);
    }
    JsonArray a = GetArray(body, field);
    if (auto e = CheckItems(a, JsonType::kString, field); !e.empty()) return Invalid(e);
    for (unsigned i = 0; i < a->size(); ++i) {
      if (map.count(a->get(i).toString()) == 0) return NotFound("Invalid " + what + " id");
    }
    for (unsigned i = 0; i < a->size(); ++i) map.erase(a->get(i).toString());
    return EmptyResponse(200);
  }

  std::mutex mu_;
  std::map<std::string, std::string> clients_;  // client id -> secret
  std::map<std::string, Clock::time_point> access_tokens_;   // -> expiry
  std::map<std::string, Clock::time_point> refresh_tokens_;  // -> expiry
  std::map<std::string, Instance> instances_;
  std::map<std::string, SshKey> keys_;
  std::map<std::string, Script> scripts_;
  std::map<std::string, Network> networks_;
  double token_lifetime_ = 3600;
  double ordered_seconds_ = 0.5;
  double deleting_seconds_ = 1;
  int64_t max_script_bytes_ = 0;  // 0: no limit (the reference gives none)
  int64_t script_quota_ = kScriptQuota;
  uint64_t script_seq_ = 0;
  std::set<std::string> trash_;     // volume ids in the trash
  std::set<std::string> detached_;  // volume ids left detached
  std::map<std::string, std::string> tag_ids_;  // "key\nvalue" -> the project's tag id
  int64_t deprecated_calls_ = 0;
  std::set<std::string> out_of_stock_;
  std::set<std::string> spot_out_of_stock_;
};

}  // namespace

std::unique_ptr<CloudApi> MakeVerdaApi(InstanceBackend* backend, CloudOptions options) {
  return std::make_unique<VerdaApi>(backend, std::move(options));
}

}  // namespace gpuprov::emulator
