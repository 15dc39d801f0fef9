// SPDX-License-Identifier: Apache-2.0
#include "verda_rules.h"

#include <Poco/DigestEngine.h>
#include <Poco/SHA2Engine.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <set>

#include "config_files.h"
#include "driver_status.h"
#include "gpu_names.h"
#include "gpuprov/sdk.hpp"
#include "json_util.h"
#include "ssh_public_key.h"
#include "text.h"

namespace gpuprov::verda {
namespace {

namespace json = drivers::json;
using Poco::JSON::Array;
using Poco::JSON::Object;

// Section 8's codes. Codes not listed fall back to the HTTP status.
constexpr std::array<drivers::CloudCode, 7> kCodes = {{
    {"invalid_request", GPUPROV_STATUS_INVALID_INPUT},
    {"unauthorized_request", GPUPROV_STATUS_AUTH},
    {"insufficient_funds", GPUPROV_STATUS_QUOTA},
    {"forbidden_action", GPUPROV_STATUS_AUTH},
    {"not_found", GPUPROV_STATUS_NOT_FOUND},
    {"server_error", GPUPROV_STATUS_TRANSIENT},
    {"service_unavailable", GPUPROV_STATUS_TRANSIENT},
}};
// Capacity and quota are said in prose (section 8).
constexpr std::array<std::string_view, 3> kCapacityWords = {"not enough resources", "no capacity",
                                                            "out of stock"};
// Images that carry NVIDIA's CUDA stack, preferred when gpuprov picks an image for a type.
constexpr std::array<std::string_view, 1> kCudaWords = {"cuda"};

// Characters, not bytes: JSON schema's maxLength counts code points.
size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}
constexpr std::array<std::string_view, 2> kQuotaWords = {"quota", "limit exceeded"};

// The GPU models Verda rents (the kit's canonical names, gpu_names.h).
constexpr std::string_view kVerdaGpus[] = {"H100",       "H200",       "A100", "L40S", "A6000",
                                           "RTX6000ADA", "RTXPRO6000", "B200", "B300", "V100"};

std::optional<ClientCredentials> FromEnvPair(const std::string& id_var,
                                             const std::string& secret_var) {
  std::optional<drivers::Credential> id = drivers::CredentialFromEnv({id_var});
  std::optional<drivers::Credential> secret = drivers::CredentialFromEnv({secret_var});
  if (!id || !secret) return std::nullopt;
  return ClientCredentials{id->value, secret->value, "$" + id_var + "/$" + secret_var};
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

}  // namespace

std::string DefaultCredentialsFile() {
  if (const char* f = std::getenv("VERDA_SHARED_CREDENTIALS_FILE"); f && *f) return f;
  if (const char* h = std::getenv("VERDA_HOME"); h && *h) return std::string(h) + "/credentials";
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + "/.verda/credentials" : "";
}

std::optional<ClientCredentials> ResolveCredentials(const Object::Ptr& config) {
  const std::string id_env = config ? json::Str(config, "client_id_env") : "";
  const std::string secret_env = config ? json::Str(config, "client_secret_env") : "";
  if (!id_env.empty() && !secret_env.empty()) {
    if (auto c = FromEnvPair(id_env, secret_env)) return c;
  }
  if (auto c = FromEnvPair("VERDA_CLIENT_ID", "VERDA_CLIENT_SECRET")) return c;
  if (auto c = FromEnvPair("DATACRUNCH_CLIENT_ID", "DATACRUNCH_CLIENT_SECRET")) return c;
  std::string path = config ? json::Str(config, "credentials_file") : "";
  if (path.empty()) path = DefaultCredentialsFile();
  if (path.empty()) return std::nullopt;
  std::optional<std::string> text = drivers::ReadSmallFile(path);
  if (!text) return std::nullopt;
  std::string profile = config ? json::Str(config, "profile") : "";
  if (profile.empty()) profile = EnvOr("VERDA_PROFILE", "default");
  const drivers::IniFile ini = drivers::ParseIni(*text);
  auto id = drivers::IniValue(ini, profile, "verda_client_id");
  auto secret = drivers::IniValue(ini, profile, "verda_client_secret");
  if (!id || !secret || id->empty() || secret->empty()) return std::nullopt;
  return ClientCredentials{*id, *secret, path + " [" + profile + "]"};
}

std::string CredentialsHint() {
  return "set VERDA_CLIENT_ID and VERDA_CLIENT_SECRET to Cloud API credentials from the Verda "
         "console (project > Keys > Cloud API credentials), or write verda_client_id and "
         "verda_client_secret to the [default] profile of ~/.verda/credentials (the verda "
         "CLI's file; VERDA_PROFILE picks another profile)";
}

std::string TokenRequestBody(const ClientCredentials& c) {
  Object body(Poco::JSON_PRESERVE_KEY_ORDER);
  body.set("grant_type", "client_credentials");
  body.set("client_id", c.client_id);
  body.set("client_secret", c.client_secret);
  return json::Stringify(body);
}

AccessToken ParseTokenAnswer(const std::string& body) {
  Object::Ptr doc = json::TryParseObject(body);
  AccessToken t;
  try {
    t.value = doc ? json::Str(doc, "access_token") : "";
    if (doc) t.expires_in = json::Int(doc, "expires_in", 3600);
  } catch (const std::exception&) {
    t.value.clear();
  }
  if (t.value.empty()) {
    throw gpuprov::sdk::DriverError(GPUPROV_STATUS_FAILED,
                                    "Verda's token answer has no access_token");
  }
  return t;
}

std::string ApiError::Text() const {
  if (code.empty()) return message;
  return code + (message.empty() ? "" : ": " + message);
}

ApiError ParseApiError(const std::string& body) {
  ApiError e;
  if (Object::Ptr doc = json::TryParseObject(body)) {
    try {
      e.code = json::Str(doc, "code");
      e.message = json::Str(doc, "message");
      if (e.message.empty()) e.message = json::Str(doc, "details");
      if (!e.code.empty() || !e.message.empty()) return e;
    } catch (const std::exception&) {
    }
  }
  std::string text = drivers::TrimSpace(body);
  if (text.size() > 300) text = text.substr(0, 300) + "...";
  e.code.clear();
  e.message = text.empty() ? "no error message" : text;
  return e;
}

gpuprov_type_status StatusOf(int http_status, const ApiError& error) {
  if (http_status >= 400 && http_status < 500 && http_status != 401 && http_status != 429) {
    if (drivers::MentionsAny(error.message, kCapacityWords)) return GPUPROV_STATUS_CAPACITY;
    if (drivers::MentionsAny(error.message, kQuotaWords)) return GPUPROV_STATUS_QUOTA;
  }
  return drivers::StatusOf(http_status, error.code, kCodes);
}

drivers::ApiDialect VerdaApi() {
  drivers::ApiDialect d;
  d.cloud = "Verda";
  d.driver = "verda";
  d.read_error = drivers::ReadCodeAndText<ParseApiError>;
  d.status_of = [](int http_status, const drivers::ApiError&, const std::string& body) {
    return StatusOf(http_status, ParseApiError(body));
  };
  d.hints = {
      {.status = GPUPROV_STATUS_AUTH,
       .text = " for the client credentials from {origin}; " + CredentialsHint()},
      {.status = GPUPROV_STATUS_QUOTA,
       .text = "; add funds or ask Verda support to raise the project's limits"},
      {.status = GPUPROV_STATUS_CAPACITY,
       .text = "; Verda has no capacity for this type there now: try another location or GPU "
               "(--region, --gpus), or later"},
  };
  d.always_content_type = true;
  d.any_json = true;
  return d;
}

bool IsNoCapacityAnswer(int http_status, const ApiError& error) {
  if (http_status == 503 && error.code == "service_unavailable") return true;
  return http_status >= 500 && drivers::MentionsAny(error.message, kCapacityWords);
}

VmState StateOf(const std::string& s, bool has_ip) {
  if (s == "new" || s == "ordered" || s == "pending" || s == "validating" || s == "provisioning") {
    return {"pending", ""};
  }
  if (s == "running") {
    return has_ip ? VmState{"running", ""} : VmState{"pending", "running, waiting for its IP"};
  }
  if (s == "offline") return {"stopped", "Verda reports the instance offline (shut down)"};
  if (s == "starting_hibernation" || s == "hibernating" || s == "restoring") {
    return {"stopped", "Verda status " + s};
  }
  if (s == "no_capacity") {
    return {"error",
            "Verda could not place the instance (no_capacity): try another location "
            "or GPU, or later"};
  }
  if (s == "error" || s == "installation_failed") return {"error", "Verda status " + s};
  if (IsGoneStatus(s)) return {"terminated", s};
  return {"error", "Verda status " + (s.empty() ? std::string("(none)") : s)};
}

bool IsGoneStatus(const std::string& s) {
  return s == "deleting" || s == "discontinued" || s == "notfound" || s == "unknown";
}

bool IsUnplacedStatus(const std::string& s) { return s == "new" || s == "ordered"; }

bool IsPreempted(const Object::Ptr& in) {
  if (!in || json::Str(in, "status") != "discontinued" || !in->has("is_spot")) return false;
  const Poco::Dynamic::Var spot = in->get("is_spot");
  return spot.isBoolean() && spot.extract<bool>();
}

std::string PreemptedMessage() { return "spot instance discontinued by Verda (status discontinued)"; }

// ---- instance types --------------------------------------------------------------------------

std::optional<std::string> CanonicalGpu(const std::string& requested) {
  return drivers::CanonicalGpuAmong(requested, kVerdaGpus);
}

const drivers::Catalogue& TypeCatalogue() {
  static const drivers::Catalogue catalogue = [] {
    drivers::Catalogue c;
    c.cloud = "Verda";
    // clang-format off
    c.rows = {
        // type               GPU           n  preferred
        {"1H100.80S.30V",     "H100",       1, true},
        {"1H100.80S.32V",     "H100",       1, false},
        {"1H100.80S.22V",     "H100",       1, false},
        {"2H100.80S.80V",     "H100",       2, true},
        {"4H100.80S.176V",    "H100",       4, true},
        {"8H100.80S.176V",    "H100",       8, true},
        {"1H200.141S.44V",    "H200",       1, true},
        {"8H200.141S.176V",   "H200",       8, true},
        {"1A100.22V",         "A100",       1, true},   // 80 GB
        {"1A100.40S.22V",     "A100",       1, false},  // 40 GB SXM
        {"2A100.44V",         "A100",       2, true},
        {"4A100.88V",         "A100",       4, true},
        {"8A100.176V",        "A100",       8, true},
        {"1L40S.20V",         "L40S",       1, true},
        {"2L40S.40V",         "L40S",       2, true},
        {"4L40S.80V",         "L40S",       4, true},
        {"8L40S.160V",        "L40S",       8, true},
        {"1A6000.10V",        "A6000",      1, true},
        {"2A6000.20V",        "A6000",      2, true},
        {"4A6000.40V",        "A6000",      4, true},
        {"8A6000.80V",        "A6000",      8, true},
        {"1RTX6000ADA.10V",   "RTX6000ADA", 1, true},
        {"1RTXPRO6000.30V",   "RTXPRO6000", 1, true},
        {"1B200.30V",         "B200",       1, true},
        {"1B300.30V",         "B300",       1, true},
        {"1V100.6V",          "V100",       1, true},
    };
    // clang-format on
    c.cpu_default = {"CPU.4V.16G", "", 0, true};
    c.canonical_gpu = CanonicalGpu;
    c.gpu_hint = [](const std::string& requested) {
      const std::string n = drivers::Squash(requested);
      if (n == "L4" || n == "T4" || n == "A10" || n == "A10G") {
        return std::string("Verda has no ") + requested + " instances";
      }
      return std::string("not a GPU Verda rents");
    };
    return c;
  }();
  return catalogue;
}

std::optional<TypeGpus> GpusOfTypeName(const std::string& type_name) {
  for (const auto& row : TypeCatalogue().rows) {
    if (row.instance_type == type_name) return TypeGpus{row.gpu_type, row.gpu_count};
  }
  // <count><GPU>[.<mem><S>].<vCPUs>V
  size_t i = 0;
  int count = 0;
  while (i < type_name.size() && std::isdigit(static_cast<unsigned char>(type_name[i]))) {
    count = count * 10 + (type_name[i] - '0');
    if (count > 64) return std::nullopt;
    ++i;
  }
  const size_t dot = type_name.find('.', i);
  if (i == 0 || count < 1 || dot == std::string::npos || dot == i) return std::nullopt;
  if (type_name.back() != 'V') return std::nullopt;
  std::optional<std::string> gpu = CanonicalGpu(type_name.substr(i, dot - i));
  if (!gpu) return std::nullopt;
  return TypeGpus{*gpu, count};
}

std::string GpusText(const std::string& type_name) {
  std::optional<TypeGpus> g = GpusOfTypeName(type_name);
  return g ? g->gpu_type + ":" + std::to_string(g->gpu_count) : "";
}

std::map<std::string, LiveType> ParseInstanceTypes(const Array::Ptr& a) {
  std::map<std::string, LiveType> out;
  for (size_t i = 0; a && i < a->size(); ++i) {
    Object::Ptr t = json::ObjAt(a, i);
    const std::string name = t ? json::Str(t, "instance_type") : "";
    if (name.empty()) continue;
    LiveType& row = out[name];
    for (auto [key, price] : {std::pair{"price_per_hour", &row.price_per_hour},
                              std::pair{"spot_price", &row.spot_price_per_hour}}) {
      try {
        *price = std::stod(json::Str(t, key));
      } catch (const std::exception&) {
        *price = 0;
      }
    }
    Array::Ptr os = json::Arr(t, "supported_os");
    for (size_t j = 0; os && j < os->size(); ++j) {
      row.supported_os.push_back(os->get(static_cast<unsigned>(j)).toString());
    }
  }
  return out;
}

std::vector<std::string> CandidateTypes(const std::string& canonical, int count,
                                        const std::map<std::string, LiveType>& live) {
  std::vector<std::string> out;
  auto add = [&](const std::string& t) {
    if (!live.empty() && live.count(t) == 0) return;
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  };
  const auto& rows = TypeCatalogue().rows;
  for (bool preferred : {true, false}) {
    for (const auto& row : rows) {
      if (row.gpu_type == canonical && row.gpu_count == count && row.preferred == preferred) {
        add(row.instance_type);
      }
    }
  }
  std::vector<std::pair<double, std::string>> others;
  std::set<int> counts;
  for (const auto& [name, t] : live) {
    const std::optional<TypeGpus> g = GpusOfTypeName(name);
    if (!g || g->gpu_type != canonical) continue;
    counts.insert(g->gpu_count);
    if (g->gpu_count == count) others.emplace_back(t.price_per_hour, name);
  }
  std::sort(others.begin(), others.end());
  for (const auto& [price, name] : others) add(name);
  if (out.empty()) {
    std::string has;
    for (int n : counts) has += (has.empty() ? "" : ", ") + std::to_string(n);
    throw gpuprov::sdk::DriverError(
        GPUPROV_STATUS_INVALID_INPUT,
        "Verda's instance-type list (GET /instance-types) has no type with " + canonical + ":" +
            std::to_string(count) +
            (has.empty() ? "; it lists no " + canonical + " type now"
                         : "; it has " + canonical + " with " + has + " GPUs") +
            ": choose another --gpus");
  }
  return out;
}

std::string ChooseImage(const std::string& wanted, bool user_chose,
                        const std::vector<std::string>& supported_os,
                        const std::vector<ImageRow>& images) {
  auto supported = [&](const std::string& image) {
    return std::find(supported_os.begin(), supported_os.end(), image) != supported_os.end();
  };
  if (supported_os.empty() || supported(wanted) || user_chose) return wanted;
  std::vector<std::string> fitting;
  const ImageRow* marked = nullptr;
  for (const auto& i : images) {
    if (!supported(i.image_type)) continue;
    if (i.is_default && !marked) marked = &i;
    fitting.push_back(i.image_type);
  }
  if (marked) return marked->image_type;
  if (fitting.empty()) fitting = supported_os;
  for (const auto& i : fitting) {
    if (drivers::MentionsAny(i, kCudaWords)) return i;
  }
  return fitting.front();
}

std::map<std::string, std::vector<std::string>> ParseAvailability(const Array::Ptr& a) {
  std::map<std::string, std::vector<std::string>> out;
  for (size_t i = 0; a && i < a->size(); ++i) {
    Object::Ptr loc = json::ObjAt(a, i);
    if (!loc) continue;
    const std::string code = json::Str(loc, "location_code");
    std::vector<std::string>& types = out[code];
    Array::Ptr list = json::Arr(loc, "availabilities");
    for (size_t j = 0; list && j < list->size(); ++j) {
      types.push_back(list->get(static_cast<unsigned>(j)).toString());
    }
  }
  return out;
}

// ---- names and recognition -------------------------------------------------------------------

std::string ScriptName(const std::string& vm_name) { return kResourcePrefix + vm_name; }

std::string KeyName(const std::string& line) {
  const drivers::SshPublicKey key = drivers::ParseSshPublicKey(line);
  Poco::SHA2Engine sha(Poco::SHA2Engine::SHA_256);
  sha.update(drivers::DecodedBlob(key));
  return kResourcePrefix + Poco::DigestEngine::digestToHex(sha.digest()).substr(0, 16);
}

std::string InstanceDescription(const std::string& vm_name) {
  return "gpuprov-managed VM " + vm_name + " (" + drivers::kNameTag + "=" + vm_name + ")";
}

Array::Ptr InstanceTags(const std::string& vm_name,
                        const std::map<std::string, std::string>& user_tags,
                        const drivers::ClusterRequest* cluster) {
  const size_t own = cluster ? 4 : 2;
  auto refuse = [own](const std::string& what) {
    return gpuprov::sdk::DriverError(GPUPROV_STATUS_INVALID_INPUT,
                                     what + " (Verda allows " + std::to_string(kMaxTags) +
                                         " tags per instance, gpuprov uses " +
                                         std::to_string(own) + "; keys up to " +
                                         std::to_string(kMaxTagKey) + " and values up to " +
                                         std::to_string(kMaxTagValue) +
                                         " characters): shorten or drop it in --tag / tags");
  };
  Array::Ptr tags = new Array();
  auto add = [&](const std::string& k, const std::string& v) {
    Object::Ptr t = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    t->set("key", k);
    t->set("value", v);
    tags->add(t);
  };
  for (const auto& [k, v] : drivers::ManagedTags(vm_name)) add(k, v);
  std::set<std::string> used = {drivers::kManagedTag, drivers::kNameTag};
  if (cluster) {
    add(drivers::kClusterTag, cluster->name);
    add(drivers::kRoleTag, cluster->role);
    used.insert({drivers::kClusterTag, drivers::kRoleTag});
  }
  for (const auto& [k, v] : user_tags) {
    if (CodePoints(k) > kMaxTagKey) {
      throw refuse("tag key " + k.substr(0, 20) + "... is " + std::to_string(CodePoints(k)) +
                   " characters");
    }
    if (CodePoints(v) > kMaxTagValue) {
      throw refuse("the value of tag " + k + " is " + std::to_string(CodePoints(v)) +
                   " characters");
    }
    const std::string key = drivers::FitTag(k, "-_.:", kMaxTagKey, /*lower_case=*/true);
    if (key.empty() || !used.insert(key).second) continue;
    if (tags->size() == kMaxTags) {
      throw refuse(std::to_string(user_tags.size()) + " user tags are too many (tag " + k +
                   " is one past the limit)");
    }
    add(key, v);
  }
  return tags;
}

std::string TagValue(const Object::Ptr& instance, const std::string& key) {
  Array::Ptr tags = instance ? json::Arr(instance, "tags") : nullptr;
  for (size_t i = 0; tags && i < tags->size(); ++i) {
    Object::Ptr t = json::ObjAt(tags, i);
    if (t && json::Str(t, "key") == key) return json::Str(t, "value");
  }
  return "";
}

bool IsManaged(const Object::Ptr& instance) {
  if (!instance) return false;
  if (TagValue(instance, drivers::kManagedTag) == "1") return true;
  const std::string hostname = json::Str(instance, "hostname");
  return !hostname.empty() && json::Str(instance, "description") == InstanceDescription(hostname);
}

std::string IdOfCreateAnswer(const std::string& body) {
  const std::string text = drivers::TrimSpace(body);
  if (text.empty()) return "";
  if (text[0] == '{') {
    Object::Ptr doc = json::TryParseObject(text);
    try {
      return doc ? json::Str(doc, "id") : "";
    } catch (const std::exception&) {
      return "";
    }
  }
  if (text[0] == '"') {
    const size_t end = text.find('"', 1);
    return end == std::string::npos ? "" : text.substr(1, end - 1);
  }
  // A bare id: one token of letters, digits and '-'.
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return "";
  }
  return text;
}

std::vector<std::string> VolumesToDelete(const Object::Ptr& instance) {
  if (!instance) return {};
  const std::string os = json::Str(instance, "os_volume_id");
  if (!os.empty()) return {os};
  std::vector<std::string> out;
  Array::Ptr ids = json::Arr(instance, "volume_ids");
  for (size_t i = 0; ids && i < ids->size(); ++i) {
    out.push_back(ids->get(static_cast<unsigned>(i)).toString());
  }
  return out;
}

std::string DeleteActionBody(const std::string& id, const std::vector<std::string>& volume_ids) {
  Object body(Poco::JSON_PRESERVE_KEY_ORDER);
  body.set("action", "delete");
  Array::Ptr ids = new Array();
  ids->add(id);
  body.set("id", ids);
  Array::Ptr volumes = new Array();
  for (const auto& v : volume_ids) volumes->add(v);
  body.set("volume_ids", volumes);
  body.set("delete_permanently", true);
  return json::Stringify(body);
}

ActionOutcome ClassifyActionMessage(const std::string& message) {
  if (message.empty()) return ActionOutcome::kDone;
  constexpr std::array<std::string_view, 3> kGone = {"invalid instance id",
                                                     "discontinue a discontinued", "not found"};
  constexpr std::array<std::string_view, 2> kNotYet = {"discontinue a provisioning",
                                                       "discontinue a new"};
  if (drivers::MentionsAny(message, kGone)) return ActionOutcome::kGone;
  if (drivers::MentionsAny(message, kNotYet)) return ActionOutcome::kNotYet;
  return ActionOutcome::kFailed;
}

}  // namespace gpuprov::verda
