// SPDX-License-Identifier: Apache-2.0
//
// Lambda Cloud API v1 (/api/v1: instance types, instances, launch/terminate/
// restart, SSH keys, account-wide firewall rules, firewall rulesets, images)
// following Lambda's own OpenAPI spec v1.8.3 ("L-SPEC": openapi-1.8.3.json,
// vendored in github.com/alexandervaneck/lambda-ai-cloud-api-client at commit
// b6023bc07c0933df459426b281c113844f2571f5); operations are named by its
// operationId. Only the operations of kSpecOperations are served. Envelopes:
// success {"data": ...}, failure {"error": {"code", "message", "suggestion"?}}.
// Request bodies are checked against the documented shapes (unknown field or
// wrong type: 400 global/invalid-parameters). The documented pacing is enforced:
// about 1 request/s per API key, launch 1 per 12 s (429 otherwise, counted).
// Guesses the reference marks UNCONFIRMED are listed in README.md.
//
// Private addresses: every instance gets a private_ip on its region's private network
// (InstanceSpec::private_network = the region), where the instances of one region reach each
// other unfiltered: Lambda's firewall (account-wide rules and rulesets alike) admits traffic
// from public source networks only (L-SPEC FirewallRule.source_network, "a public IPv4
// address"), and SkyPilot's Lambda clusters talk on private_ip with no port opened
// (skypilot-org/skypilot sky/provision/lambda_cloud/instance.py). The backend is told so
// (SetPrivateIngress with nullopt: everything admitted); the node firewall is what filters
// there (plugins/lambda/README.md, "Clusters").
#include <Poco/Base64Decoder.h>
#include <Poco/Base64Encoder.h>
#include <Poco/Crypto/RSAKey.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <variant>

#include "cloud_api.h"
#include "firewall_ports.h"
#include "request_shape.h"

namespace gpuprov::emulator {
namespace {

using Clock = std::chrono::steady_clock;
using SysClock = std::chrono::system_clock;

// L-SPEC InstanceLaunchRequest.user_data "cannot exceed 1MB": whether 10^6 or 2^20 bytes is
// unconfirmed; the emulator takes the stricter reading (setting user_data_limit_bytes).
constexpr size_t kDefaultMaxUserData = 1000 * 1000;
constexpr size_t kMaxFirewallRules = 20;      // plugins/lambda/REFERENCE.md §5
constexpr size_t kMaxNameLength = 64;
constexpr size_t kMaxPublicKeyLength = 4096;
// Slack on the pacing intervals, so a client that waits exactly the interval
// on its own clock is not refused for a few milliseconds of jitter.
constexpr double kPacingSlack = 0.9;

// --- the operations of L-SPEC (paths under /api/v1, its operationIds) ---------------------
struct SpecOperation {
  const char* method;
  const char* path;  // "{id}" for a path parameter
  const char* operation_id;
};

// Transcribed from L-SPEC "paths" (v1.8.3). The file-system operations are listed but not
// served (gpuprov mounts none).
constexpr SpecOperation kSpecOperations[] = {
    {"GET", "/instances", "listInstances"},
    {"GET", "/instances/{id}", "getInstance"},
    {"POST", "/instances/{id}", "postInstance"},
    {"GET", "/instance-types", "listInstanceTypes"},
    {"POST", "/instance-operations/launch", "launchInstance"},
    {"POST", "/instance-operations/restart", "restartInstance"},
    {"POST", "/instance-operations/terminate", "terminateInstance"},
    {"GET", "/ssh-keys", "listSSHKeys"},
    {"POST", "/ssh-keys", "addSSHKey"},
    {"DELETE", "/ssh-keys/{id}", "deleteSSHKey"},
    {"GET", "/file-systems", "listFilesystems"},
    {"POST", "/filesystems", "createFilesystem"},
    {"DELETE", "/filesystems/{id}", "filesystemDelete"},
    {"GET", "/images", "listImages"},
    {"GET", "/firewall-rules", "firewallRulesList"},
    {"PUT", "/firewall-rules", "firewallRulesSet"},
    {"GET", "/firewall-rulesets", "firewallRulesetsList"},
    {"POST", "/firewall-rulesets", "createFirewallRuleset"},
    {"GET", "/firewall-rulesets/global", "getGlobalFirewallRuleset"},
    {"PATCH", "/firewall-rulesets/global", "updateGlobalFirewallRuleset"},
    {"GET", "/firewall-rulesets/{id}", "getFirewallRuleset"},
    {"PATCH", "/firewall-rulesets/{id}", "updateFirewallRuleset"},
    {"DELETE", "/firewall-rulesets/{id}", "deleteFirewallRuleset"},
    {"GET", "/audit-events", "getAuditEvents"},
};

// The L-SPEC operation a method and path (below /api/v1) are, or nullptr. A literal segment
// ("global") wins over "{id}", as in the spec's own ordering.
const SpecOperation* SpecOperationOf(const std::string& method, const std::vector<std::string>& seg) {
  const SpecOperation* by_param = nullptr;
  for (const auto& op : kSpecOperations) {
    if (method != op.method) continue;
    std::vector<std::string> want;
    std::string part;
    std::istringstream in(std::string(op.path).substr(1));
    while (std::getline(in, part, '/')) want.push_back(part);
    if (want.size() != seg.size()) continue;
    bool literal = true, match = true;
    for (size_t i = 0; i < want.size() && match; ++i) {
      if (want[i] == "{id}") {
        literal = false;
      } else if (want[i] != seg[i]) {
        match = false;
      }
    }
    if (!match) continue;
    if (literal) return &op;
    if (!by_param) by_param = &op;
  }
  return by_param;
}

// --- catalogue (illustrative prices and capacity; names from plugins/lambda/REFERENCE.md §7) -----

struct RegionDef {
  const char* name;
  const char* description;
};

const std::vector<RegionDef>& Regions() {
  static const std::vector<RegionDef> regions = {
      {"us-east-1", "Virginia, USA"},       {"us-west-1", "California, USA"},
      {"us-west-2", "Arizona, USA"},        {"us-south-1", "Texas, USA"},
      {"us-midwest-1", "Illinois, USA"},    {"europe-central-1", "Germany"},
      {"asia-northeast-1", "Tokyo, Japan"},
      // The rest of L-SPEC PublicRegionCode (no capacity here).
      {"asia-south-1", "India"},            {"australia-east-1", "Australia"},
      {"me-west-1", "Israel"},              {"asia-northeast-2", "Osaka, Japan"},
      {"us-west-3", "Utah, USA"},           {"us-east-2", "Washington DC, USA"},
      {"us-south-2", "North Texas, USA"},   {"us-south-3", "Central Texas, USA"},
      {"us-east-3", "USA"},                 {"us-midwest-2", "USA"}};
  return regions;
}

const RegionDef* FindRegion(const std::string& name) {
  for (const auto& r : Regions()) {
    if (name == r.name) return &r;
  }
  return nullptr;
}

struct TypeDef {
  const char* name;
  const char* description;
  const char* gpu_description;
  int price_cents_per_hour;
  int vcpus;
  int memory_gib;
  int storage_gib;
  int gpus;
  const char* testvm_gpu;  // the test VM's GPU file type
  const char* architecture;
  std::vector<std::string> capacity;  // regions_with_capacity_available
};

const std::vector<TypeDef>& Types() {
  static const std::vector<TypeDef> types = {
      {"gpu_1x_a10", "1x A10 (24 GB PCIe)", "A10 (24 GB PCIe)", 75, 30, 200, 1400, 1, "A10",
       "x86_64", {"us-east-1", "us-west-1", "us-south-1"}},
      {"gpu_1x_a6000", "1x A6000 (48 GB)", "A6000 (48 GB)", 80, 14, 100, 512, 1, "RTX-A6000",
       "x86_64", {"us-west-1", "us-south-1"}},
      {"gpu_2x_a6000", "2x A6000 (48 GB)", "A6000 (48 GB)", 160, 28, 200, 1024, 2, "RTX-A6000",
       "x86_64", {"us-west-1"}},
      {"gpu_4x_a6000", "4x A6000 (48 GB)", "A6000 (48 GB)", 320, 56, 400, 2048, 4, "RTX-A6000",
       "x86_64", {"us-west-1"}},
      {"gpu_1x_rtx6000", "1x RTX 6000 (24 GB)", "RTX 6000 (24 GB)", 50, 14, 46, 512, 1,
       "RTX-6000", "x86_64", {}},
      {"gpu_1x_a100", "1x A100 (40 GB PCIe)", "A100 (40 GB PCIe)", 129, 30, 200, 512, 1,
       "A100-40GB", "x86_64", {"us-east-1", "us-west-2"}},
      {"gpu_1x_a100_sxm4", "1x A100 (40 GB SXM4)", "A100 (40 GB SXM4)", 129, 30, 200, 512, 1,
       "A100-40GB", "x86_64", {"us-east-1", "us-west-2", "us-midwest-1", "us-south-1"}},
      {"gpu_2x_a100", "2x A100 (40 GB PCIe)", "A100 (40 GB PCIe)", 258, 60, 400, 1024, 2,
       "A100-40GB", "x86_64", {}},
      {"gpu_4x_a100", "4x A100 (40 GB PCIe)", "A100 (40 GB PCIe)", 516, 120, 800, 2048, 4,
       "A100-40GB", "x86_64", {}},
      {"gpu_8x_a100", "8x A100 (40 GB SXM4)", "A100 (40 GB SXM4)", 1032, 124, 1800, 6000, 8,
       "A100-40GB", "x86_64", {"us-east-1"}},
      {"gpu_8x_a100_80gb_sxm4", "8x A100 (80 GB SXM4)", "A100 (80 GB SXM4)", 1432, 240, 1800,
       19500, 8, "A100-80GB", "x86_64", {"us-midwest-1"}},
      {"gpu_1x_h100_pcie", "1x H100 (80 GB PCIe)", "H100 (80 GB PCIe)", 249, 26, 200, 1000, 1,
       "H100-80GB", "x86_64", {"us-east-1", "us-west-1", "us-south-1"}},
      {"gpu_1x_h100_sxm5", "1x H100 (80 GB SXM5)", "H100 (80 GB SXM5)", 329, 26, 225, 2750, 1,
       "H100-80GB", "x86_64", {"us-east-1", "us-south-1"}},
      {"gpu_2x_h100_sxm5", "2x H100 (80 GB SXM5)", "H100 (80 GB SXM5)", 638, 52, 450, 5500, 2,
       "H100-80GB", "x86_64", {"us-south-1"}},
      {"gpu_4x_h100_sxm5", "4x H100 (80 GB SXM5)", "H100 (80 GB SXM5)", 1276, 104, 900, 11000, 4,
       "H100-80GB", "x86_64", {"us-south-1"}},
      {"gpu_8x_h100_sxm5", "8x H100 (80 GB SXM5)", "H100 (80 GB SXM5)", 2392, 208, 1800, 22000,
       8, "H100-80GB", "x86_64", {"us-east-1", "us-south-1"}},
      {"gpu_1x_gh200", "1x GH200 (96 GB)", "GH200 (96 GB)", 149, 64, 432, 4000, 1, "GH200",
       "arm64", {"us-east-1", "us-west-1"}},
      {"gpu_1x_b200_sxm6", "1x B200 (180 GB SXM6)", "B200 (180 GB SXM6)", 499, 26, 225, 2750, 1,
       "B200", "x86_64", {"us-south-1"}},
      {"gpu_8x_b200_sxm6", "8x B200 (180 GB SXM6)", "B200 (180 GB SXM6)", 3992, 208, 2900,
       22000, 8, "B200", "x86_64", {}},
      {"gpu_8x_v100", "8x Tesla V100 (16 GB)", "Tesla V100 (16 GB)", 440, 92, 448, 5900, 8,
       "V100", "x86_64", {"us-east-1"}},
  };
  return types;
}

const TypeDef* FindType(const std::string& name) {
  for (const auto& t : Types()) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

struct ImageDef {
  std::string id;
  const char* family;
  const char* name;
  const char* architecture;
  const char* version;
};

const std::vector<ImageDef>& Images() {
  static const std::vector<ImageDef> images = {
      {"0d1f4a0e3e6c4c0a8c2b7a5e9f1d2c3b", "lambda-stack-22-04", "Lambda Stack 22.04",
       "x86_64", "22.04.5"},
      {"1e2a5b1f4f7d4d1b9d3c8b6f0a2e3d4c", "lambda-stack-22-04", "Lambda Stack 22.04 (ARM)",
       "arm64", "22.04.5"},
      {"2f3b6c2a5a8e4e2c0e4d9c7a1b3f4e5d", "lambda-stack-24-04", "Lambda Stack 24.04",
       "x86_64", "24.04.2"},
      {"3a4c7d3b6b9f4f3d1f5e0d8b2c4a5f6e", "lambda-stack-24-04", "Lambda Stack 24.04 (ARM)",
       "arm64", "24.04.2"},
  };
  return images;
}

// The image of family for an architecture.
const ImageDef* ImageOfFamily(const std::string& family, const std::string& arch) {
  for (const auto& i : Images()) {
    if (family == i.family && arch == i.architecture) return &i;
  }
  return nullptr;
}

const ImageDef* ImageById(const std::string& id) {
  for (const auto& i : Images()) {
    if (id == i.id) return &i;
  }
  return nullptr;
}

// The account's inbound rules before anyone changes them (plugins/lambda/REFERENCE.md §5: TCP 22
// and ICMP).
JsonArray DefaultRules() {
  JsonArray a = NewArray();
  JsonObject ssh = NewObject();
  ssh->set("protocol", std::string("tcp"));
  JsonArray range = NewArray();
  range->add(22);
  range->add(22);
  ssh->set("port_range", range);
  ssh->set("source_network", std::string("0.0.0.0/0"));
  ssh->set("description", std::string("Allow SSH"));
  a->add(ssh);
  JsonObject icmp = NewObject();
  icmp->set("protocol", std::string("icmp"));
  icmp->set("source_network", std::string("0.0.0.0/0"));
  icmp->set("description", std::string("Allow ICMP"));
  a->add(icmp);
  return a;
}

std::string TrimSpace(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// True for "type base64 [comment]" with a known OpenSSH key type whose blob names it.
bool LooksLikePublicKey(const std::string& key) {
  std::istringstream in(key);
  std::string type, b64;
  if (!(in >> type >> b64)) return false;
  static const std::set<std::string> types = {"ssh-rsa", "ssh-ed25519", "ecdsa-sha2-nistp256",
                                              "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521"};
  if (types.count(type) == 0) return false;
  std::string blob;
  try {
    std::istringstream b(b64);
    Poco::Base64Decoder dec(b);
    blob.assign(std::istreambuf_iterator<char>(dec), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {
    return false;
  }
  return blob.size() > 4 + type.size() && blob.compare(4, type.size(), type) == 0;
}

// An SSH wire-format string or mpint.
void PutString(std::string& out, const std::string& s) {
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((s.size() >> shift) & 0xff);
  out += s;
}

// A new RSA key pair: (OpenSSH public key, PEM private key). Lambda generates one
// when POST /ssh-keys has no public_key (plugins/lambda/REFERENCE.md §3.6).
std::pair<std::string, std::string> GenerateKeyPair(const std::string& comment) {
  Poco::Crypto::RSAKey key(Poco::Crypto::RSAKey::KL_2048, Poco::Crypto::RSAKey::EXP_LARGE);
  auto mpint = [](const Poco::Crypto::RSAKeyImpl::ByteVec& v) {
    std::string s(v.begin(), v.end());
    if (!s.empty() && (static_cast<unsigned char>(s[0]) & 0x80)) s.insert(s.begin(), '\0');
    return s;
  };
  std::string blob;
  PutString(blob, "ssh-rsa");
  PutString(blob, mpint(key.encryptionExponent()));
  PutString(blob, mpint(key.modulus()));
  std::ostringstream b64;
  Poco::Base64Encoder enc(b64);
  enc.rdbuf()->setLineLength(0);
  enc << blob;
  enc.close();
  std::ostringstream pub, priv;
  key.save(&pub, &priv);
  return {"ssh-rsa " + b64.str() + " " + comment, priv.str()};
}

class LambdaApi : public CloudApi {
 public:
  LambdaApi(InstanceBackend* backend, CloudOptions options)
      : CloudApi("lambda", backend, std::move(options)) {
    global_rules_ = DefaultRules();
  }

  std::string BasePath() const override { return "/api/v1"; }

  JsonObject Counts() override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    JsonObject o = NewObject();
    o->set("instances", instances_.size());
    o->set("firewalls", rulesets_.size());
    o->set("ssh_keys", keys_.size());
    o->set("backend_instances", backend_->LiveCount(name_));
    o->set("firewall_rules", ChangedRuleCount());
    o->set("rulesets", rulesets_.size());
    o->set("rate_limited", rate_limited_);
    return o;
  }

  JsonArray Instances() override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    JsonArray a = NewArray();
    for (const auto& [id, in] : instances_) {
      JsonObject row = InstanceRow(id, in.name, in.backend_id);
      JsonArray ports = NewArray();
      for (int p : AllowedPorts(in)) ports->add(p);
      row->set("allowed_ports", ports);
      row->set("status", StatusOf(in));
      a->add(row);
    }
    return a;
  }

  void Reset() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, in] : instances_) backend_->Delete(in.backend_id);
    instances_.clear();
    keys_.clear();
    rulesets_.clear();
    global_rules_ = DefaultRules();
    pace_.clear();
    rate_limited_ = 0;
    faults_.Clear();
  }

  std::string Configure(const JsonObject& settings) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto v = GetDouble(settings, "requests_per_second")) {
      if (*v <= 0) return "requests_per_second must be > 0";
      requests_per_second_ = *v;
    }
    if (auto v = GetDouble(settings, "launch_interval_seconds")) launch_interval_ = *v;
    if (auto v = GetDouble(settings, "terminating_seconds")) terminating_seconds_ = *v;
    if (auto v = GetBool(settings, "legacy_api")) legacy_api_ = *v;
    if (auto v = GetDouble(settings, "ruleset_release_seconds")) ruleset_release_seconds_ = *v;
    if (auto v = GetInt(settings, "user_data_limit_bytes")) {
      if (*v < 1) return "user_data_limit_bytes must be > 0";
      user_data_limit_ = static_cast<size_t>(*v);
    }
    if (auto v = GetString(settings, "us_south_1_firewall")) {
      if (*v != "rulesets_only" && *v != "unfiltered") {
        return "us_south_1_firewall is \"rulesets_only\" or \"unfiltered\"";
      }
      us_south_1_unfiltered_ = *v == "unfiltered";
    }
    if (JsonArray a = GetArray(settings, "sold_out")) {
      sold_out_.clear();
      for (unsigned i = 0; i < a->size(); ++i) sold_out_.insert(a->get(i).toString());
    }
    return CloudApi::Configure(settings);
  }

 protected:
  struct Instance {
    std::string id;
    std::string name;  // "" = null
    bool has_name = false;
    std::string region;
    const TypeDef* type = nullptr;
    std::vector<std::string> ssh_key_names;
    std::string hostname;
    std::string user_data;
    JsonArray tags;
    const ImageDef* image = nullptr;
    std::vector<std::string> ruleset_ids;
    std::string backend_id;
    std::string jupyter_token;
    double ip_after_seconds = 0;  // fault ip_after_boot
    std::optional<Clock::time_point> terminate_at;
  };
  struct SshKey {
    std::string id;
    std::string name;
    std::string public_key;
  };
  struct Ruleset {
    std::string id;
    std::string name;
    std::string region;
    JsonArray rules;
    SysClock::time_point created;
    // When an instance that used it ended; the ruleset stays in use ruleset_release_seconds
    // (the setting now) after that: how long Lambda takes to let go of it is unconfirmed.
    std::optional<Clock::time_point> last_user_ended;
  };
  struct Pace {
    std::optional<Clock::time_point> last;
    std::optional<Clock::time_point> last_launch;
  };

  // --- envelopes (plugins/lambda/REFERENCE.md §2, §8) ---
  static HttpResponse Error(int status, const std::string& code, const std::string& message,
                            const std::string& suggestion = "") {
    JsonObject e = NewObject();
    e->set("code", code);
    e->set("message", message);
    if (!suggestion.empty()) e->set("suggestion", suggestion);
    JsonObject o = NewObject();
    o->set("error", e);
    return JsonResponse(status, o);
  }
  static HttpResponse Invalid(const std::string& detail) {
    return Error(400, "global/invalid-parameters", "Invalid request data: " + detail + ".",
                 "Check the request body against the API reference.");
  }
  static HttpResponse NotFound(const std::string& what) {
    return Error(404, "global/object-does-not-exist", what + " does not exist.",
                 "Check the id or name and try again.");
  }
  static HttpResponse Data(const Poco::Dynamic::Var& payload, int status = 200) {
    JsonObject o = NewObject();
    o->set("data", payload);
    return JsonResponse(status, o);
  }

  // The API key of a Bearer or Basic (key as user, empty password) header; "" when neither.
  static std::string PresentedKey(const HttpRequest& req) {
    const std::string bearer = req.BearerToken();
    if (!bearer.empty()) return bearer;
    const std::string h = req.Header("authorization");
    if (h.size() > 6 && Lower(h.substr(0, 6)) == "basic ") {
      std::string decoded;
      try {
        std::istringstream in(TrimSpace(h.substr(6)));
        Poco::Base64Decoder dec(in);
        decoded.assign(std::istreambuf_iterator<char>(dec), std::istreambuf_iterator<char>());
      } catch (const std::exception&) {
        return "";
      }
      const size_t colon = decoded.find(':');
      if (colon == std::string::npos || colon + 1 != decoded.size()) return "";
      return decoded.substr(0, colon);
    }
    return "";
  }

  static HttpResponse Unauthorized() {
    return Error(401, "global/invalid-api-key", "API key was invalid, expired, or deleted.",
                 "Check your API key or create a new one, then try again.");
  }

  std::optional<HttpResponse> Authenticate(const HttpRequest& req) override {
    if (!TokenAccepted(PresentedKey(req))) return Unauthorized();
    if (faults_.Take("auth_failure", req.method, req.path)) return Unauthorized();
    return std::nullopt;
  }

  HttpResponse TooMany(const std::string& message, int retry_after) {
    HttpResponse r = Error(429, "global/rate-limited", message,
                           "Slow down: about 1 request per second, and 1 launch per 12 seconds.");
    if (retry_after > 0) r.SetHeader("Retry-After", std::to_string(retry_after));
    return r;
  }

  HttpResponse Throttled(const HttpRequest& /*req*/, const Fault& f) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++rate_limited_;
    return TooMany("Too many requests.", f.retry_after);
  }

  // value "after_create": a launch is carried out, then answered with the 5xx
  // (the ambiguous failure after which a client must look for its instance by name).
  HttpResponse ServerError(const HttpRequest& req, const Fault& f) override {
    if (f.value == "after_create" && req.method == "POST" &&
        TrimTrailingSlash(req.path) == BasePath() + "/instance-operations/launch") {
      std::lock_guard<std::mutex> lock(mu_);
      Launch(req);
    }
    return Error(f.status, "provider/internal-unavailable",
                 "The upstream provider is temporarily unavailable.",
                 "Try again in a few seconds.");
  }

  HttpResponse InternalError(const std::string& what) override {
    return Error(500, "global/internal-error", "Internal error (emulator: " + what + ")");
  }

  // Documented pacing; nullopt when the request may go on. Lambda's Cloud API spec (v1.8.3,
  // info.description; vendored in alexandervaneck/lambda-ai-cloud-api-client at
  // openapi-1.8.3.json): "Requests to the API are generally limited to one request per second.
  // Requests to the /instance-operations/launch endpoint are limited to one request per 12
  // seconds". The spec authenticates every request by its API key (Authentication: Bearer or
  // Basic with the key) and names no other unit, so each presented key has its own pace here:
  // two gpuprov processes with one key share it, two keys do not.
  std::optional<HttpResponse> Paced(const HttpRequest& req, bool launch) {
    if (!options_.enforce_rate_limits) return std::nullopt;
    Pace& p = pace_[PresentedKey(req)];
    const auto now = Clock::now();
    auto since = [&](Clock::time_point t) {
      return std::chrono::duration<double>(now - t).count();
    };
    if (p.last && since(*p.last) < kPacingSlack / requests_per_second_) {
      ++rate_limited_;
      return TooMany("Too many requests: the limit is about 1 request per second.", 0);
    }
    if (launch && p.last_launch && since(*p.last_launch) < kPacingSlack * launch_interval_) {
      ++rate_limited_;
      p.last = now;
      return TooMany("Too many launch requests: the limit is 1 launch per 12 seconds.", 0);
    }
    p.last = now;
    if (launch) p.last_launch = now;
    return std::nullopt;
  }

  HttpResponse Route(const HttpRequest& req) override {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string base = BasePath();
    std::string path = TrimTrailingSlash(req.path);
    if (path.compare(0, base.size(), base) != 0) return NotFound("The path " + path);
    std::vector<std::string> seg = Split(path.substr(base.size()), '/');
    const std::string& m = req.method;
    const bool launch = m == "POST" && seg.size() == 2 && seg[0] == "instance-operations" &&
                        seg[1] == "launch";
    if (auto limited = Paced(req, launch)) return *limited;
    Reconcile();
    // Only what L-SPEC describes is served (GET /regions, say, is not one of its operations).
    if (!SpecOperationOf(m, seg)) return NotFound("The path " + path);
    // Fault "concurrent": another client sent this same request just before (two gpuprov
    // runs registering one SSH key, or deleting it): carried out once for it, then for us.
    if (faults_.Take("concurrent", m, req.path)) Serve(req, seg);
    // L-SPEC launchInstance 403 ApiErrorInvalidBillingAddress.
    if (launch && faults_.Take("invalid_address", m, req.path)) {
      return Error(403, "global/invalid-address", "Your billing address is invalid.",
                   "Make sure your billing address is valid. Contact Support if problems "
                   "continue.");
    }
    return Serve(req, seg);
  }

  HttpResponse Serve(const HttpRequest& req, const std::vector<std::string>& seg) {
    const std::string& m = req.method;
    const std::string path = TrimTrailingSlash(req.path);
    const std::string& top = seg[0];

    if (top == "instance-types" && seg.size() == 1 && m == "GET") return ListTypes();
    if (top == "images" && seg.size() == 1 && m == "GET") return ListImages();
    if (top == "instances") {
      if (seg.size() == 1 && m == "GET") return ListInstances();
      if (seg.size() == 2 && m == "GET") return GetInstance(seg[1]);
      if (seg.size() == 2 && m == "POST") return RenameInstance(req, seg[1]);
      return MethodNotAllowed();
    }
    // L-SPEC listFilesystems: none exist here (gpuprov mounts none).
    if (top == "file-systems" && seg.size() == 1 && m == "GET") return Data(NewArray());
    if (top == "instance-operations" && seg.size() == 2 && m == "POST") {
      if (seg[1] == "launch") return Launch(req);
      if (seg[1] == "terminate") return Terminate(req);
      if (seg[1] == "restart") return Restart(req);
    }
    if (top == "ssh-keys") {
      if (seg.size() == 1 && m == "GET") return ListKeys();
      if (seg.size() == 1 && m == "POST") return AddKey(req);
      if (seg.size() == 2 && m == "DELETE") return DeleteKey(seg[1]);
      return MethodNotAllowed();
    }
    if (top == "firewall-rules" && seg.size() == 1) {
      if (m == "GET") return Data(global_rules_);
      if (m == "PUT") return PutRules(req);
      return MethodNotAllowed();
    }
    if (top == "firewall-rulesets") return RouteRulesets(req, seg);
    return NotFound("The path " + path);
  }

  static HttpResponse MethodNotAllowed() {
    return Error(405, "global/invalid-parameters", "Method not allowed. (not from the reference)");
  }

  // --- catalogue ---
  static JsonObject RegionJson(const std::string& name) {
    JsonObject o = NewObject();
    o->set("name", name);
    const RegionDef* r = FindRegion(name);
    o->set("description", std::string(r ? r->description : name.c_str()));
    return o;
  }

  static JsonObject TypeJson(const TypeDef& t) {
    JsonObject o = NewObject();
    o->set("name", std::string(t.name));
    o->set("description", std::string(t.description));
    o->set("gpu_description", std::string(t.gpu_description));
    o->set("price_cents_per_hour", t.price_cents_per_hour);
    JsonObject specs = NewObject();
    specs->set("vcpus", t.vcpus);
    specs->set("memory_gib", t.memory_gib);
    specs->set("storage_gib", t.storage_gib);
    specs->set("gpus", t.gpus);
    o->set("specs", specs);
    return o;
  }

  std::vector<std::string> CapacityOf(const TypeDef& t) const {
    if (sold_out_.count(t.name) || sold_out_.count("*")) return {};
    return t.capacity;
  }

  HttpResponse ListTypes() {
    JsonObject data = NewObject();
    for (const auto& t : Types()) {
      JsonObject entry = NewObject();
      entry->set("instance_type", TypeJson(t));
      JsonArray regions = NewArray();
      for (const auto& r : CapacityOf(t)) regions->add(RegionJson(r));
      entry->set("regions_with_capacity_available", regions);
      data->set(t.name, entry);
    }
    return Data(data);
  }

  static JsonObject ImageJson(const ImageDef& i, const std::string& region) {
    JsonObject o = NewObject();
    o->set("id", i.id);
    o->set("created_time", std::string("2025-01-15T00:00:00Z"));
    o->set("updated_time", std::string("2025-01-15T00:00:00Z"));
    o->set("name", std::string(i.name));
    o->set("description",
           std::string(i.name) + " with the NVIDIA driver, CUDA, PyTorch and Docker");
    o->set("family", std::string(i.family));
    o->set("version", std::string(i.version));
    o->set("architecture", std::string(i.architecture));
    o->set("region", RegionJson(region));  // L-SPEC Region: name and description
    return o;
  }

  HttpResponse ListImages() {
    JsonArray a = NewArray();
    for (const auto& r : Regions()) {
      for (const auto& i : Images()) a->add(ImageJson(i, r.name));
    }
    return Data(a);
  }

  // --- instances ---
  std::string StatusOf(const Instance& in) {
    if (in.terminate_at) return "terminating";
    InstanceStatus s = backend_->State(in.backend_id);
    switch (s.state) {
      case InstanceState::kProvisioning:
        return "booting";
      case InstanceState::kRunning:
        return "active";
      case InstanceState::kError:
      // plugins/lambda/REFERENCE.md: no stopped state; a powered-off one is unhealthy
      case InstanceState::kStopped:
        return "unhealthy";
      case InstanceState::kGone:
        return "terminated";
    }
    return "booting";
  }

  std::vector<JsonArray> RulesetRules(const Instance& in) const {
    std::vector<JsonArray> out;
    for (const auto& id : in.ruleset_ids) {
      auto it = rulesets_.find(id);
      if (it != rulesets_.end()) out.push_back(it->second.rules);
    }
    return out;
  }

  std::set<int> AllowedPorts(const Instance& in) const {
    return LambdaAllowedPorts(in.region, global_rules_, RulesetRules(in), us_south_1_unfiltered_);
  }

  // Tells the backend each live instance's reachable ports (after a rule change).
  void ApplyRules() {
    for (const auto& [id, in] : instances_) {
      if (!in.terminate_at) backend_->SetReachablePorts(in.backend_id, ToPortSet(AllowedPorts(in)));
    }
  }

  // Terminated instances leave after terminating_seconds; vanished machines at once.
  void Reconcile() {
    ForgetEnded(instances_, [](const auto& r) -> const auto& { return r.terminate_at; });
  }

  // L-SPEC Instance: required id, status, ssh_key_names, file_system_names, region,
  // instance_type, actions; the optional strings (name, ip, private_ip, hostname, jupyter_*)
  // are absent until known, never null (the schema types them as plain strings). There is no
  // image field.
  JsonObject InstanceJson(const Instance& in) {
    InstanceStatus s = backend_->State(in.backend_id);
    const std::string status = StatusOf(in);
    JsonObject o = NewObject();
    o->set("id", in.id);
    if (in.has_name) o->set("name", in.name);
    const bool ip_known =
        (status == "active" || status == "unhealthy" || status == "terminating") &&
        !s.public_ip.empty() &&
        s.running_for.count() >= static_cast<int64_t>(in.ip_after_seconds * 1000);
    if (ip_known) {
      o->set("ip", s.public_ip);
      o->set("private_ip", s.private_ip);
    }
    o->set("status", status);
    JsonArray keys = NewArray();
    for (const auto& k : in.ssh_key_names) keys->add(k);
    o->set("ssh_key_names", keys);
    o->set("file_system_names", NewArray());
    o->set("region", RegionJson(in.region));
    o->set("instance_type", TypeJson(*in.type));
    o->set("hostname", in.hostname);
    o->set("jupyter_token", in.jupyter_token);
    if (ip_known) {
      o->set("jupyter_url", "https://jupyter-" + in.id + ".lambdaspaces.com/?token=" +
                                in.jupyter_token);
    }
    o->set("actions", ActionsJson(status));
    o->set("tags", in.tags ? in.tags : NewArray());
    JsonArray rulesets = NewArray();
    for (const auto& rid : in.ruleset_ids) {
      JsonObject r = NewObject();
      r->set("id", rid);
      auto it = rulesets_.find(rid);
      if (it != rulesets_.end()) r->set("name", it->second.name);
      rulesets->add(r);
    }
    o->set("firewall_rulesets", rulesets);
    return o;
  }

  // L-SPEC InstanceActionAvailability: each of migrate, rebuild, restart, cold_reboot,
  // terminate as {available, reason_code?, reason_description?} (InstanceActionUnavailableCode).
  static JsonObject ActionsJson(const std::string& status) {
    auto one = [](bool available, const std::string& code, const std::string& why) {
      JsonObject a = NewObject();
      a->set("available", available);
      if (!available) {
        a->set("reason_code", code);
        a->set("reason_description", why);
      }
      return a;
    };
    const bool terminating = status == "terminating" || status == "terminated";
    const bool launched = status == "active" || status == "unhealthy";
    JsonObject o = NewObject();
    for (const char* action : {"migrate", "rebuild", "restart", "cold_reboot", "terminate"}) {
      const bool is_terminate = std::string(action) == "terminate";
      if (terminating) {
        o->set(action, one(false, "vm-is-terminating", "The instance is terminating."));
      } else if (!launched && !is_terminate) {
        o->set(action, one(false, "vm-has-not-launched", "The instance has not launched yet."));
      } else {
        o->set(action, one(true, "", ""));
      }
    }
    return o;
  }

  HttpResponse ListInstances() {
    JsonArray a = NewArray();
    for (const auto& [id, in] : instances_) a->add(InstanceJson(in));
    return Data(a);
  }

  // L-SPEC postInstance: InstanceModificationRequest {name (<= 64)} -> the Instance.
  HttpResponse RenameInstance(const HttpRequest& req, const std::string& id) {
    auto it = instances_.find(id);
    if (it == instances_.end()) return NotFound("Instance " + id);
    JsonObject body = ParseObject(req.body);
    if (!body) return Invalid("the body must be a JSON object");
    if (auto e = CheckShape(body, {{"name", JsonType::kString}}); !e.empty()) return Invalid(e);
    if (auto n = GetString(body, "name")) {
      if (n->size() > kMaxNameLength) return Invalid("\"name\" is longer than 64 characters");
      it->second.name = *n;
      it->second.has_name = true;
    }
    return Data(InstanceJson(it->second));
  }

  HttpResponse GetInstance(const std::string& id) {
    auto it = instances_.find(id);
    if (it == instances_.end()) return NotFound("Instance " + id);
    return Data(InstanceJson(it->second));
  }

  // Each {"protocol", "port_range"?, "source_network", "description"}; "" when fine.
  static std::string CheckRules(const JsonArray& rules, const std::string& field) {
    if (auto e = CheckItems(rules, JsonType::kObject, field); !e.empty()) return e;
    if (rules->size() > kMaxFirewallRules) {
      return "\"" + field + "\" has " + std::to_string(rules->size()) +
             " rules; at most 20 are allowed";
    }
    for (unsigned i = 0; i < rules->size(); ++i) {
      const std::string where = field + "[" + std::to_string(i) + "]";
      JsonObject r = rules->getObject(i);
      if (auto e = CheckShape(r,
                              {{"protocol", JsonType::kString, true},
                               {"port_range", JsonType::kArray},
                               {"source_network", JsonType::kString, true},
                               {"description", JsonType::kString, true}},
                              where);
          !e.empty()) {
        return e;
      }
      const std::string proto = GetString(r, "protocol").value_or("");
      if (proto != "tcp" && proto != "udp" && proto != "icmp" && proto != "all") {
        return "\"" + where + ".protocol\" must be one of tcp, udp, icmp, all";
      }
      JsonArray range = GetArray(r, "port_range");
      if (proto == "icmp" && range) return "\"" + where + ".port_range\" is not allowed for icmp";
      if ((proto == "tcp" || proto == "udp") && !range) {
        return "\"" + where + ".port_range\" is required for " + proto;
      }
      if (range) {
        if (range->size() != 2 || !range->get(0).isInteger() || !range->get(1).isInteger()) {
          return "\"" + where + ".port_range\" must be [min, max] (two integers)";
        }
        const int lo = range->get(0).convert<int>(), hi = range->get(1).convert<int>();
        if (lo < 1 || hi > 65535 || lo > hi) {
          return "\"" + where + ".port_range\" must satisfy 1 <= min <= max <= 65535";
        }
      }
      if (GetString(r, "description").value_or("").size() > 128) {  // L-SPEC FirewallRule
        return "\"" + where + ".description\" is longer than 128 characters";
      }
      const std::string net = GetString(r, "source_network").value_or("");
      if (!CidrContains(net, net.substr(0, net.find('/')))) {
        return "\"" + where + ".source_network\" must be an IPv4 CIDR such as 0.0.0.0/0";
      }
    }
    return "";
  }

  HttpResponse Launch(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Invalid("the body must be a JSON object");
    std::vector<FieldShape> shape = {{"region_name", JsonType::kString, true},
                                     {"instance_type_name", JsonType::kString, true},
                                     {"ssh_key_names", JsonType::kArray, true},
                                     {"name", JsonType::kString},
                                     {"hostname", JsonType::kString},
                                     {"quantity", JsonType::kInteger},
                                     {"file_system_names", JsonType::kArray},
                                     {"file_system_mounts", JsonType::kArray},
                                     {"tags", JsonType::kArray}};
    if (!legacy_api_) {
      shape.push_back({"image", JsonType::kObject});
      shape.push_back({"user_data", JsonType::kString});
      shape.push_back({"firewall_rulesets", JsonType::kArray});
    }
    if (auto e = CheckShape(body, shape); !e.empty()) return Invalid(e);
    const std::string region = *GetString(body, "region_name");
    const std::string type_name = *GetString(body, "instance_type_name");
    const TypeDef* type = FindType(type_name);
    if (!FindRegion(region)) return Invalid("unknown region_name \"" + region + "\"");
    if (!type) return Invalid("unknown instance_type_name \"" + type_name + "\"");
    JsonArray key_names = GetArray(body, "ssh_key_names");
    if (auto e = CheckItems(key_names, JsonType::kString, "ssh_key_names"); !e.empty()) {
      return Invalid(e);
    }
    if (key_names->size() != 1) return Invalid("exactly one SSH key name must be given");
    const std::string key_name = key_names->get(0).convert<std::string>();
    const SshKey* key = KeyByName(key_name);
    if (!key) return NotFound("SSH key \"" + key_name + "\"");
    Instance in;
    if (auto n = GetString(body, "name")) {
      if (n->size() > kMaxNameLength) return Invalid("\"name\" is longer than 64 characters");
      in.name = *n;
      in.has_name = true;
    }
    const int64_t quantity = GetInt(body, "quantity").value_or(1);
    if (quantity < 1 || quantity > 10) return Invalid("\"quantity\" must be between 1 and 10");
    std::string hostname;
    if (auto h = GetString(body, "hostname")) {
      static const std::regex hostname_re("^[a-z0-9][0-9a-z-]{0,62}$");
      if (!std::regex_match(*h, hostname_re)) {
        return Invalid("\"hostname\" must match ^[a-z0-9][0-9a-z-]{0,62}$");
      }
      hostname = *h;
    }
    if (JsonArray mounts = GetArray(body, "file_system_mounts"); mounts && mounts->size() > 0) {
      return NotFound("File system in \"file_system_mounts\"");  // none exist here
    }
    if (JsonArray fs = GetArray(body, "file_system_names"); fs && fs->size() > 0) {
      if (auto e = CheckItems(fs, JsonType::kString, "file_system_names"); !e.empty()) {
        return Invalid(e);
      }
      return NotFound("File system \"" + fs->get(0).convert<std::string>() + "\"");
    }
    std::string user_data = GetString(body, "user_data").value_or("");
    if (user_data.size() > user_data_limit_) {
      return Invalid("\"user_data\" is larger than 1MB (" + std::to_string(user_data_limit_) +
                     " bytes here)");
    }
    in.tags = NewArray();
    if (JsonArray tags = GetArray(body, "tags")) {
      if (auto e = CheckItems(tags, JsonType::kObject, "tags"); !e.empty()) return Invalid(e);
      static const std::regex tag_key_re("^[a-z][a-z0-9-:]+$");
      for (unsigned i = 0; i < tags->size(); ++i) {
        const std::string where = "tags[" + std::to_string(i) + "]";
        JsonObject t = tags->getObject(i);
        if (auto e = CheckShape(t, {{"key", JsonType::kString, true},
                                    {"value", JsonType::kString, true}},
                                where);
            !e.empty()) {
          return Invalid(e);
        }
        const std::string k = *GetString(t, "key"), v = *GetString(t, "value");
        if (k.size() > 55 || !std::regex_match(k, tag_key_re) || k.rfind("lambda-ai-", 0) == 0) {
          return Invalid("\"" + where + ".key\" must match ^[a-z][a-z0-9-:]+$, be at most 55 "
                         "characters and not start with lambda-ai-");
        }
        if (v.size() > 128) return Invalid("\"" + where + ".value\" is longer than 128 characters");
        in.tags->add(t);
      }
    }
    const ImageDef* image = ImageOfFamily("lambda-stack-22-04", type->architecture);
    if (JsonObject img = GetObject(body, "image")) {
      if (auto e = CheckShape(img, {{"id", JsonType::kString}, {"family", JsonType::kString}},
                              "image");
          !e.empty()) {
        return Invalid(e);
      }
      auto id = GetString(img, "id");
      auto family = GetString(img, "family");
      if (id.has_value() == family.has_value()) {
        return Invalid("\"image\" takes exactly one of id and family");
      }
      image = id ? ImageById(*id) : ImageOfFamily(*family, type->architecture);
      if (!image) return NotFound("Image " + (id ? *id : *family));
      if (std::string(image->architecture) != type->architecture) {
        return Invalid("image " + image->id + " is " + image->architecture + " but " + type->name +
                       " needs " + type->architecture);
      }
    }
    if (JsonArray sets = GetArray(body, "firewall_rulesets")) {
      if (auto e = CheckItems(sets, JsonType::kObject, "firewall_rulesets"); !e.empty()) {
        return Invalid(e);
      }
      for (unsigned i = 0; i < sets->size(); ++i) {
        JsonObject s = sets->getObject(i);
        const std::string where = "firewall_rulesets[" + std::to_string(i) + "]";
        if (auto e = CheckShape(s, {{"id", JsonType::kString, true}}, where); !e.empty()) {
          return Invalid(e);
        }
        const std::string id = *GetString(s, "id");
        auto it = rulesets_.find(id);
        if (it == rulesets_.end()) return NotFound("Firewall ruleset " + id);
        if (it->second.region != region) {
          return Invalid("firewall ruleset " + id + " is in " + it->second.region + ", not " +
                         region);
        }
        in.ruleset_ids.push_back(id);
      }
    }
    // Capacity and quota after validation, as the real API checks the body first.
    const auto capacity = CapacityOf(*type);
    if (faults_.Take("capacity", req.method, req.path) ||
        std::find(capacity.begin(), capacity.end(), region) == capacity.end()) {
      return Error(400, "instance-operations/launch/insufficient-capacity",
                   "Not enough capacity to fulfill launch request.",
                   "Choose an instance type with more availability, or try again later.");
    }
    if (faults_.Take("quota", req.method, req.path)) {
      return Error(400, "global/quota-exceeded", "Quota exceeded.",
                   "Contact Support to increase your quota.");
    }

    JsonArray ids = NewArray();
    for (int64_t n = 0; n < quantity; ++n) {
      Instance one = in;
      one.id = RandomHex(16);
      one.region = region;
      one.type = type;
      one.ssh_key_names = {key_name};
      one.user_data = user_data;
      one.image = image;
      one.jupyter_token = RandomHex(16);
      if (auto f = faults_.Take("ip_after_boot")) one.ip_after_seconds = f->seconds;
      InstanceSpec spec;
      spec.cloud = name_;
      spec.name = in.has_name && !in.name.empty() ? in.name : one.id;
      spec.image = image->family;
      spec.gpu_type = type->testvm_gpu;
      spec.gpu_count = type->gpus;
      spec.user_data = user_data;
      spec.ssh_public_keys = {key->public_key};
      spec.ssh_user = "ubuntu";
      const std::set<int> ports = AllowedPorts(one);
      spec.reachable = ToPortSet(ports);
      spec.faults = faults_.TakeBootFaults();
      spec.private_network = region;  // the region's instances share one private network
      try {
        one.backend_id = backend_->Create(spec);
        backend_->SetPrivateIngress(one.backend_id, std::nullopt);  // unfiltered (above)
      } catch (const BackendError& e) {
        return Error(500, "global/internal-error",
                     std::string("Internal error (emulator backend: ") + e.what() + ")");
      }
      const InstanceStatus s = backend_->State(one.backend_id);
      std::string dashed = s.private_ip;
      std::replace(dashed.begin(), dashed.end(), '.', '-');
      one.hostname = hostname.empty() ? dashed + ".cloud.lambdalabs.com" : hostname;
      instances_[one.id] = one;
      ids->add(one.id);
    }
    JsonObject data = NewObject();
    data->set("instance_ids", ids);
    return Data(data);
  }

  // The instance_ids of a terminate/restart body, all known; or the error.
  std::variant<std::vector<std::string>, HttpResponse> IdsOf(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Invalid("the body must be a JSON object");
    if (auto e = CheckShape(body, {{"instance_ids", JsonType::kArray, true}}); !e.empty()) {
      return Invalid(e);
    }
    JsonArray a = GetArray(body, "instance_ids");
    if (auto e = CheckItems(a, JsonType::kString, "instance_ids"); !e.empty()) return Invalid(e);
    if (a->size() == 0) return Invalid("\"instance_ids\" must not be empty");
    std::vector<std::string> ids;
    for (unsigned i = 0; i < a->size(); ++i) {
      const std::string id = a->get(i).convert<std::string>();
      auto it = instances_.find(id);
      if (it == instances_.end()) return NotFound("Instance " + id);
      ids.push_back(id);
    }
    return ids;
  }

  HttpResponse Terminate(const HttpRequest& req) {
    auto ids = IdsOf(req);
    if (auto* err = std::get_if<HttpResponse>(&ids)) return *err;
    JsonArray out = NewArray();
    for (const auto& id : std::get<std::vector<std::string>>(ids)) {
      Instance& in = instances_.at(id);
      if (!in.terminate_at) {
        backend_->Delete(in.backend_id);
        in.terminate_at = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(
                                             terminating_seconds_ * 1000));
        for (const auto& rid : in.ruleset_ids) {
          auto it = rulesets_.find(rid);
          if (it == rulesets_.end()) continue;
          it->second.last_user_ended = *in.terminate_at;
        }
      }
      out->add(InstanceJson(in));
    }
    JsonObject data = NewObject();
    data->set("terminated_instances", out);
    return Data(data);
  }

  HttpResponse Restart(const HttpRequest& req) {
    auto ids = IdsOf(req);
    if (auto* err = std::get_if<HttpResponse>(&ids)) return *err;
    JsonArray out = NewArray();
    for (const auto& id : std::get<std::vector<std::string>>(ids)) {
      out->add(InstanceJson(instances_.at(id)));
    }
    JsonObject data = NewObject();
    data->set("restarted_instances", out);
    return Data(data);
  }

  // --- SSH keys (plugins/lambda/REFERENCE.md §3.6) ---
  const SshKey* KeyByName(const std::string& name) const {
    for (const auto& [id, k] : keys_) {
      if (k.name == name) return &k;
    }
    return nullptr;
  }

  static JsonObject KeyJson(const SshKey& k) {
    JsonObject o = NewObject();
    o->set("id", k.id);
    o->set("name", k.name);
    o->set("public_key", k.public_key);
    return o;
  }

  HttpResponse ListKeys() {
    JsonArray a = NewArray();
    for (const auto& [id, k] : keys_) a->add(KeyJson(k));
    return Data(a);
  }

  HttpResponse AddKey(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Invalid("the body must be a JSON object");
    if (auto e = CheckShape(body, {{"name", JsonType::kString, true},
                                   {"public_key", JsonType::kString}});
        !e.empty()) {
      return Invalid(e);
    }
    const std::string name = *GetString(body, "name");
    if (name.empty() || name.size() > kMaxNameLength) {
      return Invalid("\"name\" must be 1 to 64 characters");
    }
    if (KeyByName(name)) {
      // L-SPEC addSSHKey documents only 400 ApiErrorInvalidParameters (no global/duplicate).
      return Invalid("an SSH key named \"" + name + "\" already exists");
    }
    SshKey k;
    k.id = RandomHex(16);
    k.name = name;
    std::string private_key;
    if (auto pub = GetString(body, "public_key")) {
      k.public_key = TrimSpace(*pub);
      if (k.public_key.size() > kMaxPublicKeyLength || !LooksLikePublicKey(k.public_key)) {
        return Invalid("\"public_key\" must be an OpenSSH public key of at most 4096 characters");
      }
    } else {
      auto [pub_key, priv] = GenerateKeyPair(name);
      k.public_key = pub_key;
      private_key = priv;
    }
    keys_[k.id] = k;
    JsonObject o = KeyJson(k);
    if (!private_key.empty()) o->set("private_key", private_key);
    return Data(o);
  }

  HttpResponse DeleteKey(const std::string& id) {
    // L-SPEC deleteSSHKey documents 200, 400 ApiErrorInvalidParameters, 401, 403 (no 404).
    if (keys_.erase(id) == 0) return Invalid("SSH key " + id + " does not exist");
    return Data(NewObject());
  }

  // --- firewall rules and rulesets (plugins/lambda/REFERENCE.md §5) ---
  // Account-wide rules not in the starting list (a leak check).
  int64_t ChangedRuleCount() const {
    // Field by field: parsed objects need not keep the key order.
    auto key = [](const JsonObject& r) {
      std::string k = GetString(r, "protocol").value_or("") + "|";
      if (JsonArray range = GetArray(r, "port_range"); range && range->size() == 2) {
        k += std::to_string(range->get(0).convert<int>()) + "-" +
             std::to_string(range->get(1).convert<int>());
      }
      return k + "|" + GetString(r, "source_network").value_or("") + "|" +
             GetString(r, "description").value_or("");
    };
    std::set<std::string> defaults;
    JsonArray d = DefaultRules();
    for (unsigned i = 0; i < d->size(); ++i) defaults.insert(key(d->getObject(i)));
    int64_t n = 0;
    for (unsigned i = 0; i < global_rules_->size(); ++i) {
      n += defaults.count(key(global_rules_->getObject(i))) == 0;
    }
    return n;
  }

  HttpResponse PutRules(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Invalid("the body must be a JSON object");
    if (auto e = CheckShape(body, {{"data", JsonType::kArray, true}}); !e.empty()) {
      return Invalid(e);
    }
    JsonArray rules = GetArray(body, "data");
    if (auto e = CheckRules(rules, "data"); !e.empty()) return Invalid(e);
    global_rules_ = rules;
    ApplyRules();
    return Data(global_rules_);
  }

  JsonObject RulesetJson(const Ruleset& r) const {
    JsonObject o = NewObject();
    o->set("id", r.id);
    o->set("name", r.name);
    o->set("region", RegionJson(r.region));
    o->set("rules", r.rules);
    o->set("created", Rfc3339(r.created));
    JsonArray ids = NewArray();
    for (const auto& [id, in] : instances_) {
      if (std::find(in.ruleset_ids.begin(), in.ruleset_ids.end(), r.id) != in.ruleset_ids.end()) {
        ids->add(id);
      }
    }
    o->set("instance_ids", ids);
    return o;
  }

  JsonObject GlobalRulesetJson() const {
    JsonObject o = NewObject();
    o->set("id", std::string("global"));
    o->set("name", std::string("Global Firewall Rules"));
    o->set("rules", global_rules_);
    return o;
  }

  HttpResponse RouteRulesets(const HttpRequest& req, const std::vector<std::string>& seg) {
    const std::string& m = req.method;
    if (seg.size() == 1) {
      if (m == "GET") {
        JsonArray a = NewArray();
        for (const auto& [id, r] : rulesets_) a->add(RulesetJson(r));
        return Data(a);
      }
      if (m == "POST") return CreateRuleset(req);
      return MethodNotAllowed();
    }
    if (seg.size() != 2) return NotFound("The path " + req.path);
    if (seg[1] == "global") {
      if (m == "GET") return Data(GlobalRulesetJson());
      if (m == "PATCH") {
        JsonObject body = ParseObject(req.body);
        if (!body) return Invalid("the body must be a JSON object");
        if (auto e = CheckShape(body, {{"rules", JsonType::kArray, true}}); !e.empty()) {
          return Invalid(e);
        }
        JsonArray rules = GetArray(body, "rules");
        if (auto e = CheckRules(rules, "rules"); !e.empty()) return Invalid(e);
        global_rules_ = rules;
        ApplyRules();
        return Data(GlobalRulesetJson());
      }
      return MethodNotAllowed();
    }
    auto it = rulesets_.find(seg[1]);
    if (it == rulesets_.end()) {
      // L-SPEC ApiErrorFirewallRulesetNotFound.
      return Error(404, "global/object-does-not-exist",
                   "Firewall ruleset does not exist or you do not have permission to access it.",
                   "Check your firewall ruleset ID and try again.");
    }
    if (m == "GET") return Data(RulesetJson(it->second));
    if (m == "PATCH") {
      JsonObject body = ParseObject(req.body);
      if (!body) return Invalid("the body must be a JSON object");
      if (auto e = CheckShape(body, {{"name", JsonType::kString}, {"rules", JsonType::kArray}});
          !e.empty()) {
        return Invalid(e);
      }
      JsonArray rules = GetArray(body, "rules");
      if (rules) {
        if (auto e = CheckRules(rules, "rules"); !e.empty()) return Invalid(e);
      }
      if (auto n = GetString(body, "name")) {
        if (auto e = CheckRulesetName(*n, it->second.region, it->first); !e.empty()) {
          return Invalid(e);
        }
        it->second.name = *n;
      }
      if (rules) it->second.rules = rules;
      ApplyRules();
      return Data(RulesetJson(it->second));
    }
    if (m == "DELETE") {
      // L-SPEC deleteFirewallRuleset: 400 ApiErrorFirewallRulesetInUse while an instance
      // (a terminating one too) uses it, and for ruleset_release_seconds after.
      const auto release =
          std::chrono::milliseconds(static_cast<int64_t>(ruleset_release_seconds_ * 1000));
      bool in_use = it->second.last_user_ended &&
                    Clock::now() < *it->second.last_user_ended + release;
      for (const auto& entry : instances_) {
        const std::vector<std::string>& used = entry.second.ruleset_ids;
        in_use = in_use || std::find(used.begin(), used.end(), it->first) != used.end();
      }
      if (in_use) {
        return Error(400, "firewall-rulesets/firewall-ruleset-in-use",
                     "Firewall ruleset is in use by one or more instances.",
                     "Terminate all instances that are using the ruleset before deleting it.");
      }
      rulesets_.erase(it);
      return Data(NewObject());
    }
    return MethodNotAllowed();
  }

  std::string CheckRulesetName(const std::string& name, const std::string& region,
                               const std::string& self_id) const {
    if (name.empty() || name.size() > kMaxNameLength) return "\"name\" must be 1 to 64 characters";
    for (const auto& [id, r] : rulesets_) {
      if (id != self_id && r.name == name && r.region == region) {
        return "a firewall ruleset named \"" + name + "\" already exists in " + region;
      }
    }
    return "";
  }

  HttpResponse CreateRuleset(const HttpRequest& req) {
    JsonObject body = ParseObject(req.body);
    if (!body) return Invalid("the body must be a JSON object");
    if (auto e = CheckShape(body, {{"name", JsonType::kString, true},
                                   {"region", JsonType::kString, true},
                                   {"rules", JsonType::kArray, true}});
        !e.empty()) {
      return Invalid(e);
    }
    Ruleset r;
    r.name = *GetString(body, "name");
    r.region = *GetString(body, "region");
    if (!FindRegion(r.region)) return Invalid("unknown region \"" + r.region + "\"");
    // A name taken in the region: 400 global/invalid-parameters (CheckRulesetName), the
    // only invalid-input error L-SPEC createFirewallRuleset documents (no global/duplicate).
    if (auto e = CheckRulesetName(r.name, r.region, ""); !e.empty()) return Invalid(e);
    r.rules = GetArray(body, "rules");
    if (auto e = CheckRules(r.rules, "rules"); !e.empty()) return Invalid(e);
    r.id = RandomHex(16);
    r.created = SysClock::now();
    rulesets_[r.id] = r;
    return Data(RulesetJson(r));
  }

  std::mutex mu_;
  std::map<std::string, Instance> instances_;
  std::map<std::string, SshKey> keys_;
  std::map<std::string, Ruleset> rulesets_;
  JsonArray global_rules_;
  std::map<std::string, Pace> pace_;
  int64_t rate_limited_ = 0;
  double requests_per_second_ = 1;
  double launch_interval_ = 12;
  double terminating_seconds_ = 1;
  double ruleset_release_seconds_ = 0;
  size_t user_data_limit_ = kDefaultMaxUserData;
  bool us_south_1_unfiltered_ = false;
  bool legacy_api_ = false;
  std::set<std::string> sold_out_;
};

}  // namespace

std::unique_ptr<CloudApi> MakeLambdaApi(InstanceBackend* backend, CloudOptions options) {
  return std::make_unique<LambdaApi>(backend, std::move(options));
}

}  // namespace gpuprov::emulator
