// SPDX-License-Identifier: Apache-2.0
#include "primeintellect_driver.h"

#include <Poco/Dynamic/Var.h>
#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <tuple>

#include "driver_kit.h"
#include "ssh_connection.h"
#include "text.h"

namespace gpuprov::primeintellect {
namespace {

namespace kit = gpuprov::drivers;

// What a VM powered off from inside still costs (gpuprov's TTL on the node powers it off),
// from REFERENCE.md: no stop endpoint gpuprov can use; a pod is billed at priceHr until
// deleted (stoppedPriceHr applies only to pods the platform itself stops).
constexpr kit::PoweredOffCost kPoweredOffCost = kit::PoweredOffCost::kFull;

using kit::Credential;
using namespace gpuprov::drivers::prelude;  // DriverError, json, Array, Object

constexpr const char* kDefaultEndpoint = "https://api.primeintellect.ai";
constexpr const char* kApi = "/api/v1";
constexpr const char* kDefaultSshUser = "root";
constexpr int kPageSize = 100;
constexpr int kMaxPages = 100;

constexpr const char* kKeyHint =
    "set PRIME_API_KEY, or api_key in ~/.prime/config.json (what `prime login` writes), to an "
    "API key with Instances read and write";

using gpuprov::drivers::Upper;

using gpuprov::drivers::Lower;

std::string Trim(const std::string& s) { return kit::TrimSpace(s); }

// A response field as text; numbers converted, other shapes "".
std::string Text(const Object::Ptr& o, const std::string& key) {
  if (!json::Has(o, key)) return "";
  Poco::Dynamic::Var v = o->get(key);
  if (v.isString() || v.isNumeric()) return v.convert<std::string>();
  return "";
}

std::optional<double> Number(const Object::Ptr& o, const std::string& key) {
  if (!json::Has(o, key)) return std::nullopt;
  try {
    Poco::Dynamic::Var v = o->get(key);
    if (v.isNumeric() || v.isString()) {
      double d = v.convert<double>();
      if (std::isfinite(d)) return d;
    }
  } catch (const Poco::Exception&) {
  }
  return std::nullopt;
}

std::string Encode(const std::string& segment) { return kit::EncodeComponent(segment); }

// The message in a Prime Intellect error body: "message", then "error", then "detail" (a
// string, or FastAPI's [{loc, msg}] list), then "errors" [{param, details}]; a non-JSON body
// as text (first 300 characters).
std::string CloudMessage(const std::string& body) {
  Object::Ptr o = json::TryParseObject(body);
  if (!o) {
    std::string t = Trim(body);
    if (t.size() > 300) t = t.substr(0, 300) + "...";
    return t;
  }
  auto from_list = [](const Array::Ptr& arr) {
    std::string out;
    for (size_t i = 0; arr && i < arr->size(); ++i) {
      Poco::Dynamic::Var item = arr->get(static_cast<unsigned>(i));
      std::string part;
      if (item.type() == typeid(Object::Ptr)) {
        Object::Ptr e = item.extract<Object::Ptr>();
        std::string loc;
        if (json::Has(e, "loc") && e->get("loc").type() == typeid(Array::Ptr)) {
          Array::Ptr l = e->getArray("loc");
          for (size_t j = 0; j < l->size(); ++j) {
            std::string p = l->get(static_cast<unsigned>(j)).convert<std::string>();
            if (p == "body") continue;
            loc += (loc.empty() ? "" : ".") + p;
          }
        }
        if (loc.empty()) loc = Text(e, "param");
        std::string msg = Text(e, "msg");
        if (msg.empty()) msg = Text(e, "details");
        if (msg.empty()) msg = Text(e, "message");
        part = loc.empty() ? msg : loc + ": " + msg;
      } else if (item.isString()) {
        part = item.convert<std::string>();
      }
      if (!part.empty()) out += (out.empty() ? "" : "; ") + part;
    }
    return out;
  };
  for (const char* key : {"message", "error", "detail", "errors"}) {
    if (!json::Has(o, key)) continue;
    Poco::Dynamic::Var v = o->get(key);
    if (v.isString()) {
      std::string s = Trim(v.convert<std::string>());
      if (!s.empty()) return s;
    } else if (v.type() == typeid(Array::Ptr)) {
      std::string s = from_list(v.extract<Array::Ptr>());
      if (!s.empty()) return s;
    } else if (v.type() == typeid(Object::Ptr)) {
      Object::Ptr e = v.extract<Object::Ptr>();
      std::string s = Text(e, "message");
      if (s.empty()) s = Text(e, "msg");
      if (!s.empty()) return s;
    }
  }
  return "";
}

// SkyPilot's "resources unavailable" words (REFERENCE.md §8).
constexpr std::string_view kCapacityWords[] = {
    "no capacity", "capacity", "unavailable", "out of stock", "insufficient", "not available",
    "quota exceeded", "limit exceeded"};

bool IsCapacityText(const std::string& message) { return kit::MentionsAny(message, kCapacityWords); }

// The API as the kit's client speaks it: the key as a bearer token, errors read by
// CloudMessage ("HTTP 402: <message>"), statuses by HTTP status except that a refusal in
// capacity words is CAPACITY unless the status says auth, payment or a missing pod.
kit::ApiDialect PrimeIntellectApi(std::string endpoint_origin) {
  kit::ApiDialect d;
  d.cloud = "Prime Intellect";
  d.driver = "primeintellect";
  d.read_error = [](const std::string& body) { return kit::ApiError{"", CloudMessage(body)}; };
  d.status_of = [](int http_status, const kit::ApiError& e, const std::string&) {
    gpuprov_type_status status = kit::StatusOfHttp(http_status);
    if (status != GPUPROV_STATUS_AUTH && status != GPUPROV_STATUS_QUOTA &&
        status != GPUPROV_STATUS_NOT_FOUND && IsCapacityText(e.text)) {
      status = GPUPROV_STATUS_CAPACITY;
    }
    return status;
  };
  d.quote = kit::QuoteForm::kCodeAndText;
  d.hints = {
      {.status = GPUPROV_STATUS_AUTH,
       .text = std::string("; the API key from {origin} was refused: ") + kKeyHint},
      {.status = GPUPROV_STATUS_QUOTA,
       .text = "; payment required: add funds to the Prime Intellect wallet of this account or "
               "team"},
  };
  d.headers = {{"Accept", "application/json"}};
  d.any_json = true;  // some lists come bare
  d.endpoint_origin = std::move(endpoint_origin);
  return d;
}

// The key and type of an OpenSSH public key line ("ssh-ed25519 AAAA..."), comment dropped.
std::string KeyBody(const std::string& public_key) {
  std::istringstream in(public_key);
  std::string type, data;
  in >> type >> data;
  return data.empty() ? Trim(public_key) : type + " " + data;
}

std::string ShortHash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return std::string(buf, 12);
}

std::string PriceText(const std::optional<double>& p) {
  if (!p) return "price unknown";
  char buf[32];
  std::snprintf(buf, sizeof buf, "$%.2f/h", *p);
  return buf;
}

// --- pods as VMs -------------------------------------------------------------

// A pod carries no tags: its name, gpuprov-<VM name>, is gpuprov's mark (and the SSH key's,
// gpuprov-<hash>). Pods made before this prefix are still found by id (a state record's).
std::string PodName(const std::string& vm_name) { return kit::kResourcePrefix + vm_name; }

bool IsGpuprovName(const std::string& name) {
  return name.size() > std::string(kit::kResourcePrefix).size() &&
         name.rfind(kit::kResourcePrefix, 0) == 0;
}

// The VM name of a pod: its name without gpuprov's prefix (an older pod's name as it is).
std::string VmNameOf(const Object::Ptr& pod) {
  const std::string name = Text(pod, "name");
  return IsGpuprovName(name) ? name.substr(std::string(kit::kResourcePrefix).size()) : name;
}

bool IsGone(const Object::Ptr& pod) {
  std::string s = Upper(Text(pod, "status"));
  return s == "TERMINATED" || s == "DELETING";
}

// A pod made from a spot offer: its isSpot (the prime CLI's Pod.is_spot, api/pods.py).
bool IsSpotPod(const Object::Ptr& pod) {
  if (!json::Has(pod, "isSpot")) return false;
  try {
    return pod->get("isSpot").convert<bool>();
  } catch (const Poco::Exception&) {
    return false;
  }
}

// A spot pod Prime Intellect ended: TERMINATED (or STOPPED) while gpuprov did not delete it.
// P-DOC and the prime CLI document no preemption status (README.md, "Spot pods").
bool IsPreemptedPod(const Object::Ptr& pod) {
  const std::string s = Upper(Text(pod, "status"));
  return IsSpotPod(pod) && (s == "TERMINATED" || s == "STOPPED");
}

// The pod is no VM to get, list or delete: TERMINATED and not a preempted spot pod.
bool IsEnded(const Object::Ptr& pod) {
  return Upper(Text(pod, "status")) == "TERMINATED" && !IsPreemptedPod(pod);
}

// The external port the pod's primePortMapping gives SSH (usedBy "SSH", else internal 22).
std::optional<int> MappedSshPort(const Object::Ptr& pod) {
  if (!json::Has(pod, "primePortMapping")) return std::nullopt;
  Poco::Dynamic::Var v = pod->get("primePortMapping");
  if (v.type() != typeid(Array::Ptr)) return std::nullopt;
  Array::Ptr arr = v.extract<Array::Ptr>();
  std::optional<int> by_internal;
  for (size_t i = 0; i < arr->size(); ++i) {
    Object::Ptr m = json::ObjAt(arr, i);
    if (!m) continue;
    std::optional<double> ext = Number(m, "external");
    if (!ext || *ext < 1 || *ext > 65535) continue;
    int port = static_cast<int>(*ext);
    if (Upper(Text(m, "usedBy")) == "SSH") return port;
    if (Text(m, "internal") == "22" && !by_internal) by_internal = port;
  }
  return by_internal;
}

struct PodState {
  std::string state;  // pending|running|stopped|terminated|error
  std::string message;
};

// Maps a pod to gpuprov's five states. Running needs ACTIVE and a usable sshConnection, which
// is all the prime CLI waits for (`prime pods ssh`: until the status has an sshConnection,
// packages/prime/src/prime_cli/commands/pods.py `connect`) and all SkyPilot waits for (ACTIVE
// plus sshConnection, sky/provision/primeintellect/instance.py). The installation counts as
// still running only while the pod says so: installationProgress below 100 without
// installationStatus FINISHED (the CLI shows INSTALLING exactly then, pods.py
// `_format_pod_for_status`). Whether installationStatus always reaches FINISHED is
// UNCONFIRMED (P-DOC's examples show "PENDING"), so a pod that keeps it PENDING, or sends
// neither field, is running once ACTIVE with an sshConnection (README, "States").
PodState StateOf(const Object::Ptr& pod, const SshField& ssh) {
  const std::string status = Upper(Text(pod, "status"));
  const std::string install = Upper(Text(pod, "installationStatus"));
  const std::optional<double> progress = Number(pod, "installationProgress");
  const std::string failure = Text(pod, "installationFailure");
  if (IsPreemptedPod(pod)) {
    return {"preempted", "Prime Intellect ended the spot pod (status " + status + ")"};
  }
  if (status == "TERMINATED") return {"terminated", "terminated"};
  if (status == "DELETING") return {"terminated", "deleting"};
  if (status == "ERROR") {
    return {"error", failure.empty() ? "the pod is in status ERROR" : failure};
  }
  if (!failure.empty() || install == "FAILED" || install == "ERROR") {
    return {"error", "installation failed" + (failure.empty() ? "" : ": " + failure)};
  }
  if (status == "STOPPED") return {"stopped", "stopped"};
  if (status != "ACTIVE") {
    return {"pending", status.empty() ? "no status yet" : Lower(status)};
  }
  const bool installing = install != "FINISHED" && progress && *progress < 100;
  if (installing) {
    return {"pending", "installing (" + std::to_string(static_cast<int>(*progress)) + "%)"};
  }
  if (ssh.kind == SshField::Kind::kAbsent) return {"pending", "waiting for sshConnection"};
  if (ssh.kind == SshField::Kind::kMalformed) return {"error", ssh.error};
  return {"running", ""};
}

Object::Ptr VmJson(const Object::Ptr& pod) {
  SshField ssh = ReadSshField(json::Has(pod, "sshConnection") ? pod->get("sshConnection")
                                                              : Poco::Dynamic::Var());
  PodState st = StateOf(pod, ssh);

  std::string public_ip;
  std::string user = kDefaultSshUser;
  int port = 22;
  std::optional<int> mapped = MappedSshPort(pod);
  if (mapped) port = *mapped;
  if (ssh.kind == SshField::Kind::kParsed) {
    public_ip = ssh.connection.host;
    if (!ssh.connection.user.empty()) user = ssh.connection.user;
    if (ssh.connection.port_given) port = ssh.connection.port;
  }
  if (public_ip.empty() && json::Has(pod, "ip")) {
    std::vector<std::string> ips = FieldStrings(pod->get("ip"));
    if (!ips.empty()) public_ip = ips.front();
  }

  kit::VmFields vm;
  vm.id = Text(pod, "id");
  vm.name = VmNameOf(pod);
  vm.state = st.state;
  vm.public_ip = public_ip;
  vm.ssh_port = port;
  vm.ssh_user = user;
  // The Pod object has no cloudId and no data-center field (P-DOC get-pod, the prime CLI's
  // `Pod` model in api/pods.py): both are known only at create, which fills them from the
  // offer it took (VmResultFor).
  vm.image = Text(pod, "environmentType");
  const std::string gpu = Text(pod, "gpuName");
  const std::string count = Text(pod, "gpuCount");
  vm.gpus = gpu.empty() ? "" : gpu + (count.empty() ? "" : ":" + count);
  vm.created_at = Text(pod, "createdAt");
  vm.message = st.message;
  vm.spot = IsSpotPod(pod);
  vm.published_ports = std::vector<std::pair<int, int>>{{22, port}};
  // No private network, and a pod takes no tags: its peers use public_ip; cluster and role
  // are the host's to remember (the pod's name, gpuprov-<VM name>, is its only mark).
  vm.private_ip = "";
  vm.extra = {{"pod_name", Text(pod, "name")},
              {"cloud_status", Text(pod, "status")},
              {"provider", Text(pod, "providerType")}};
  if (std::optional<double> price = Number(pod, "priceHr")) {
    vm.extra.emplace_back("price_per_hour", *price);
  }
  return kit::VmJson(vm);
}

std::string VmResult(const Object::Ptr& pod, std::optional<bool> existing = std::nullopt) {
  return kit::VmResult(VmJson(pod), existing);
}

// --- requests ----------------------------------------------------------------

// The request's "gpu" and "region" as an offer query (no gpu: type "" and count 0).
OfferQuery QueryFor(const Object::Ptr& request) {
  OfferQuery q;
  if (std::optional<kit::GpuRequest> gpu = kit::ParseGpu(request)) {
    q.gpu_type = gpu->type;
    q.gpu_count = gpu->count;
  }
  q.region = json::Str(request, "region");
  return q;
}

std::string Describe(const OfferQuery& q) {
  std::string s = q.gpu_type.empty() ? "a CPU node" : q.gpu_type + ":" + std::to_string(q.gpu_count);
  if (!q.instance_type.empty()) s += " as " + q.instance_type;
  if (!q.region.empty()) s += " in " + q.region;
  return s;
}

// The request's "kubernetes": whether the host makes the VM a k3s node. Absent means on, the
// host's default for a cloud that hosts Kubernetes.
bool KubernetesOf(const Object::Ptr& request) {
  if (!json::Has(request, "kubernetes")) return true;
  Poco::Dynamic::Var v = request->get("kubernetes");
  if (!v.isBoolean()) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT, "\"kubernetes\" must be true or false");
  }
  return v.extract<bool>();
}

// The fix for an offer the Kubernetes rule skipped.
std::string SkipFix(const std::vector<std::string>& vm_providers) {
  std::string list;
  for (const auto& p : vm_providers) list += (list.empty() ? "" : ",") + p;
  return "use --no-k8s for a plain machine (any offer), or, if one of those providers gives VMs, "
         "add it to vm_providers in [clouds.primeintellect] of config.toml (now \"" +
         list + "\")";
}

// The pod name is gpuprov-<VM name>, at most 128 characters, of letters, digits and '-' with at
// least one letter: the prime CLI's rule ("alphanumeric and dashes only, must contain at least
// 1 letter", packages/prime/src/prime_cli/commands/pods.py `create`). Whether the server
// enforces it is UNCONFIRMED; keeping to it is safe either way (the prefix is the letter).
const kit::VmNameRules kPodNameRules{.what = "a Prime Intellect pod name",
                                     .max_length = 120,
                                     .note = "the prime CLI allows only letters, digits and "
                                             "'-' in pod names"};

std::string ConfigFilePath() {
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') return "";
  return std::string(home) + "/.prime/config.json";
}

// A string member of ~/.prime/config.json; nullopt when the file or member is missing.
// Throws AUTH when the file exists but is not a JSON object (say so rather than ignore it).
std::optional<std::string> ConfigFileValue(const std::string& key) {
  const std::string path = ConfigFilePath();
  if (path.empty()) return std::nullopt;
  std::optional<std::string> text = kit::ReadSmallFile(path);
  if (!text) return std::nullopt;
  Object::Ptr o = json::TryParseObject(*text);
  if (!o) {
    throw DriverError(GPUPROV_STATUS_AUTH,
                      path + " is not a JSON object, so no API key can be read from it; " +
                          kKeyHint);
  }
  std::string v = Trim(Text(o, key));
  if (v.empty()) return std::nullopt;
  return v;
}

// ConfigFileValue, but nullopt (not an error) when the file is not JSON: for settings read
// before the API key, whose look-up reports a broken file.
std::optional<std::string> ConfigFileValueOrNone(const std::string& key) {
  try {
    return ConfigFileValue(key);
  } catch (const DriverError&) {
    return std::nullopt;
  }
}

// The prime CLI's API host and where it came from: $PRIME_API_BASE_URL, $PRIME_BASE_URL,
// base_url in ~/.prime/config.json; ("", "") when none is set.
std::pair<std::string, std::string> CliBaseUrl() {
  if (auto c = kit::CredentialFromEnv({"PRIME_API_BASE_URL", "PRIME_BASE_URL"})) {
    return {c->value, c->origin};
  }
  if (std::optional<std::string> v = ConfigFileValueOrNone("base_url")) {
    return {*v, "base_url in ~/.prime/config.json"};
  }
  return {"", ""};
}

std::string StripApiSuffix(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  const std::string suffix = kApi;
  if (url.size() > suffix.size() &&
      url.compare(url.size() - suffix.size(), std::string::npos, suffix) == 0) {
    url.erase(url.size() - suffix.size());
  }
  return url;
}

// $PRIME_API_KEY, else api_key in ~/.prime/config.json; nullopt when neither has one.
std::optional<Credential> FindApiKey() {
  if (auto c = kit::CredentialFromEnv({"PRIME_API_KEY"})) return c;
  if (std::optional<std::string> v = ConfigFileValue("api_key")) {
    return Credential{*v, "~/.prime/config.json"};
  }
  return std::nullopt;
}

}  // namespace

// --- the driver ----------------------------------------------------------------

PrimeIntellectDriver::PrimeIntellectDriver(const gpuprov::sdk::InitContext& ctx)
    : host_(ctx.host) {
  // The prime CLI keeps the host without /api/v1; either is accepted. gpuprov's own setting
  // wins, then the prime CLI's (PRIME_API_BASE_URL, PRIME_BASE_URL, base_url in its config).
  kit::DriverSettings settings = kit::ParseSettings(ctx.config_json, "", kApi);
  endpoint_ = settings.endpoint;
  endpoint_origin_ = "GPUPROV_PRIMEINTELLECT_ENDPOINT or endpoint in [clouds.primeintellect]";
  if (endpoint_.empty()) {
    std::tie(endpoint_, endpoint_origin_) = CliBaseUrl();
    endpoint_ = StripApiSuffix(endpoint_);
  }
  if (endpoint_.empty()) {
    endpoint_ = kDefaultEndpoint;
    endpoint_origin_ = "the default";
  }

  Object::Ptr config = settings.config;
  config_team_id_ = Trim(json::Str(config, "team_id"));
  default_image_ = Trim(json::Str(config, "image"));
  std::string providers = kDefaultVmProviders;
  if (json::Has(config, "vm_providers")) {
    Poco::Dynamic::Var v = config->get("vm_providers");
    providers.clear();
    if (v.isString()) {
      providers = v.extract<std::string>();
    } else if (v.type() == typeid(Array::Ptr)) {
      Array::Ptr arr = v.extract<Array::Ptr>();
      for (size_t i = 0; i < arr->size(); ++i) providers += arr->get(i).toString() + ",";
    }
  }
  try {
    vm_providers_ = ParseProviderList(providers);
  } catch (const std::invalid_argument& e) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      std::string("[clouds.primeintellect] vm_providers: ") + e.what() +
                          "; write provider names separated by commas, e.g. \"" +
                          kDefaultVmProviders + "\" (the default when the key is absent)");
  }
  policy_ = kit::RetryPolicyFrom(config);
  poll_interval_ = kit::PollIntervalSetting(config, poll_interval_);
  delete_timeout_ = kit::DeleteWaitSetting(config, delete_timeout_);

  kit::ApiAuth auth;
  auth.resolve = [] { return FindApiKey(); };
  auth.missing = std::string("no Prime Intellect API key found: ") + kKeyHint;
  auth.label = "API key";
  api_ = std::make_unique<kit::ApiClient>(endpoint_, policy_, host_,
                                          PrimeIntellectApi(endpoint_origin_), std::move(auth));
}

PrimeIntellectDriver::~PrimeIntellectDriver() = default;

std::string PrimeIntellectDriver::TeamId() const {
  // PRIME_TEAM_ID set but empty is the personal account, as for the prime CLI: no team
  // parameter, whatever the config files say.
  if (const char* env = std::getenv("PRIME_TEAM_ID")) return Trim(env);
  if (!config_team_id_.empty()) return config_team_id_;
  try {
    return ConfigFileValue("team_id").value_or("");
  } catch (const DriverError&) {
    return "";
  }
}

std::vector<Offer> PrimeIntellectDriver::VmOffersOnly(const std::vector<Offer>& available,
                                                      const std::vector<Offer>& in_stock,
                                                      const OfferQuery& query) {
  ProviderSplit split = SplitByProvider(in_stock, vm_providers_);
  if (split.skipped.empty()) return split.kept;
  const std::string skipped = DescribeSkipped(split.skipped);
  if (split.kept.empty()) {
    const bool vm_sold_out = std::any_of(available.begin(), available.end(), [&](const Offer& o) {
      return Matches(o, query) && FromVmProvider(o, vm_providers_);
    });
    if (vm_sold_out) {
      throw DriverError(GPUPROV_STATUS_CAPACITY,
                        "Prime Intellect's VM offers of " + Describe(query) +
                            " are out of stock right now; the offers in stock are not from VM "
                            "providers (k3s needs systemd as PID 1, which a container lacks): " +
                            skipped +
                            "; try later, or " + SkipFix(vm_providers_));
    }
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "Prime Intellect has " + Describe(query) +
                          " only from providers that are not VM providers (k3s needs systemd as "
                          "PID 1, which a container lacks): skipped " + skipped + "; " +
                          SkipFix(vm_providers_));
  }
  host_.Progress("Prime Intellect: skipping " + std::to_string(split.skipped.size()) +
                 (split.skipped.size() == 1 ? " offer" : " offers") +
                 " not from a VM provider (k3s needs systemd as PID 1, which a container "
                 "lacks): " +
                 skipped + "; --no-k8s takes any offer");
  return split.kept;
}

std::vector<Offer> PrimeIntellectDriver::FetchAvailability(const OfferQuery& query) {
  std::string base = std::string(kApi) + "/availability/gpus?";
  if (std::optional<std::string> t = GpuTypeParameter(query.gpu_type)) {
    base += "gpu_type=" + Encode(*t) + "&";
  }
  if (!query.gpu_type.empty()) base += "gpu_count=" + std::to_string(query.gpu_count) + "&";
  std::vector<Offer> all;
  for (int page = 1; page <= kMaxPages; ++page) {
    std::string path =
        base + "page=" + std::to_string(page) + "&page_size=" + std::to_string(kPageSize);
    const kit::ApiAnswer r = api_->Call("GET", path, "list GPU availability");
    AvailabilityPage p;
    try {
      p = ParseAvailability(r.body);
    } catch (const std::exception& e) {
      throw DriverError(GPUPROV_STATUS_FAILED, std::string("list GPU availability: ") + e.what());
    }
    const size_t got = p.offers.size();
    all.insert(all.end(), p.offers.begin(), p.offers.end());
    if (got == 0 || !p.total_count || static_cast<int>(all.size()) >= *p.total_count) break;
  }
  return all;
}

std::vector<PrimeIntellectDriver::ObjectPtr> PrimeIntellectDriver::ListPods() {
  std::vector<ObjectPtr> pods;
  for (int page = 0; page < kMaxPages; ++page) {
    const int offset = page * kPageSize;
    Poco::Dynamic::Var v =
        api_->Call("GET",
                   std::string(kApi) + "/pods/?offset=" + std::to_string(offset) +
                       "&limit=" + std::to_string(kPageSize),
                   "list pods")
            .Parsed();
    Object::Ptr o = v.type() == typeid(Object::Ptr) ? v.extract<Object::Ptr>() : nullptr;
    Array::Ptr data;
    if (o && json::Has(o, "data") && o->get("data").type() == typeid(Array::Ptr)) {
      data = o->getArray("data");
    } else if (v.type() == typeid(Array::Ptr)) {
      data = v.extract<Array::Ptr>();
    } else {
      throw DriverError(GPUPROV_STATUS_FAILED,
                        "list pods: Prime Intellect answered without a \"data\" list");
    }
    for (size_t i = 0; i < data->size(); ++i) {
      if (Object::Ptr pod = json::ObjAt(data, i)) pods.push_back(pod);
    }
    std::optional<double> total = o ? Number(o, "total_count") : std::nullopt;
    if (!total && o) total = Number(o, "totalCount");
    if (data->size() == 0 || static_cast<int>(data->size()) < kPageSize) break;
    if (total && offset + static_cast<int>(data->size()) >= *total) break;
  }
  return pods;
}

PrimeIntellectDriver::ObjectPtr PrimeIntellectDriver::FindPodByName(const std::string& name) {
  ObjectPtr found;
  int matches = 0;
  const std::string pod_name = PodName(name);
  for (const ObjectPtr& pod : ListPods()) {
    if (Text(pod, "name") != pod_name || IsGone(pod)) continue;
    if (!found) found = pod;
    ++matches;
  }
  if (matches > 1) {
    host_.Warning("Prime Intellect has " + std::to_string(matches) + " live pods named " + name +
                  "; using " + Text(found, "id"));
  }
  return found;
}

PrimeIntellectDriver::ObjectPtr PrimeIntellectDriver::GetPod(const std::string& id) {
  const kit::ApiAnswer r =
      api_->Call("GET", std::string(kApi) + "/pods/" + Encode(id), "get pod " + id, nullptr, {404});
  if (r.status == 404) return nullptr;
  if (!r.doc) throw DriverError(GPUPROV_STATUS_FAILED, "get pod " + id + ": not a JSON object");
  return r.doc;
}

PrimeIntellectDriver::ObjectPtr PrimeIntellectDriver::Resolve(const ObjectPtr& request) {
  const auto [id, name] = kit::RequireIdOrName(request);
  if (!id.empty()) {
    ObjectPtr pod = GetPod(id);
    if (pod && (name.empty() || VmNameOf(pod) == name)) return pod;
  }
  if (name.empty()) return nullptr;
  if (ObjectPtr live = FindPodByName(name)) return live;
  for (const ObjectPtr& pod : ListPods()) {
    if (Text(pod, "name") == PodName(name) && IsPreemptedPod(pod)) return pod;
  }
  return nullptr;
}

std::string PrimeIntellectDriver::EnsureSshKey(const std::string& public_key) {
  const std::string want = KeyBody(public_key);
  if (want.empty()) return "";
  auto find = [&]() -> ObjectPtr {
    for (const ObjectPtr& k : ListKeys()) {
      if (KeyBody(Text(k, "publicKey")) == want) return k;
    }
    return nullptr;
  };
  if (ObjectPtr k = find()) {
    host_.Debug("SSH key already registered on the account as " + Text(k, "name"));
    if (json::Has(k, "isPrimary") && !k->get("isPrimary").convert<bool>()) {
      host_.Info("the SSH key " + Text(k, "name") +
                 " is registered but not the account's primary key; the pod create names it "
                 "(sshKeyId), and if SSH is refused all the same, make it primary in the Prime "
                 "Intellect dashboard");
    }
    return Text(k, "id");
  }
  Object::Ptr body = new Object();
  const std::string key_name = "gpuprov-" + ShortHash(want);
  body->set("name", key_name);
  body->set("publicKey", Trim(public_key));
  host_.Progress("registering SSH key " + key_name + " on the Prime Intellect account");
  Object::Ptr made =
      api_->Call("POST", std::string(kApi) + "/ssh_keys/", "register SSH key", body).doc;
  std::string id = made ? Text(made, "id") : "";
  if (id.empty()) {
    if (ObjectPtr k = find()) id = Text(k, "id");
  }
  return id;
}

PrimeIntellectDriver::ObjectPtr PrimeIntellectDriver::CreatePod(const std::string& body,
                                                               const std::string& name) {
  const std::string what = "create pod " + name;
  kit::ApiCall call;
  call.method = "POST";
  call.path = std::string(kApi) + "/pods/";
  call.what = what;
  call.body = body;
  // No idempotency key: a 5xx is answered, not retried, so that the pod is looked for first
  // (429 and failures to connect are still retried by the client).
  call.allow = {500, 502, 503, 504};
  call.idempotent = false;
  kit::Backoff backoff(host_, policy_, what);
  for (;;) {
    std::optional<DriverError> failure;
    try {
      const kit::ApiAnswer a = api_->Send(call);
      if (a.ok()) {
        if (a.doc && !Text(a.doc, "id").empty()) return a.doc;
        // Created, but the answer is unusable: find it by name.
        if (ObjectPtr found = FindPodByName(name)) return found;
        throw DriverError(GPUPROV_STATUS_FAILED,
                          what + ": Prime Intellect answered without a pod id");
      }
      const std::string problem =
          "HTTP " + std::to_string(a.status) + (a.error.text.empty() ? "" : ": " + a.error.text);
      if (IsCapacityText(a.error.text)) {
        throw DriverError(GPUPROV_STATUS_CAPACITY, what + ": Prime Intellect answered " + problem);
      }
      failure.emplace(GPUPROV_STATUS_TRANSIENT, problem);
    } catch (const DriverError& e) {
      if (e.status() != GPUPROV_STATUS_TRANSIENT) throw;
      failure.emplace(e);
    }
    // The create may have happened before the error: never create twice.
    if (ObjectPtr found = FindPodByName(name)) {
      host_.Info("pod " + name + " exists after a failed create answer (" + failure->what() +
                 "); using it");
      return found;
    }
    if (!backoff.Wait(failure->what())) {
      throw DriverError(GPUPROV_STATUS_TRANSIENT, what + ": Prime Intellect kept failing (" +
                                                      failure->what() +
                                                      "); nothing was created; try again later");
    }
  }
}

// --- operations ----------------------------------------------------------------

std::string PrimeIntellectDriver::Check(const std::string& /*request_json*/) {
  Object::Ptr o =
      api_->Call("GET", std::string(kApi) + "/pods/?offset=0&limit=1", "check credentials").doc;
  const Credential& key = api_->credential();
  std::optional<double> pods = o ? Number(o, "total_count") : std::nullopt;
  const std::string team = TeamId();
  Object result(Poco::JSON_PRESERVE_KEY_ORDER);
  result.set("account", "Prime Intellect at " + endpoint_ + " (key from " + key.origin +
                            (team.empty() ? ", personal account" : ", team " + team) + ")");
  result.set("key_source", key.origin);
  result.set("endpoint", endpoint_);
  result.set("endpoint_from", endpoint_origin_);
  // The prime CLI's SSH key (`prime pods ssh` uses it); gpuprov registers and uses its own.
  if (std::optional<std::string> path = ConfigFileValueOrNone("ssh_key_path")) {
    std::string expanded = *path;
    const char* home = std::getenv("HOME");
    if (expanded.rfind("~/", 0) == 0 && home != nullptr) expanded = home + expanded.substr(1);
    result.set("cli_ssh_key_path", expanded);
  }
  if (pods) result.set("pods", static_cast<long long>(*pods));
  return json::Stringify(result);
}

std::string PrimeIntellectDriver::Offers(const std::string& request_json) {
  Object::Ptr request = json::ParseObject(request_json, "the offers request");
  OfferQuery query = QueryFor(request);
  const bool kubernetes = KubernetesOf(request);
  std::vector<Offer> available = FetchAvailability(query);
  std::vector<Offer> matching = MatchingOffers(available, query);
  // Offered but sold out is a capacity problem, not "not offered": say so.
  if (matching.empty() &&
      std::any_of(available.begin(), available.end(),
                  [&](const Offer& o) { return Matches(o, query); })) {
    throw sdk::DriverError(GPUPROV_STATUS_CAPACITY,
                           "Prime Intellect offers " + Describe(query) +
                               " but every matching offer is out of stock right now");
  }
  // Spot offers (isSpot) are sold on the row of the on-demand offer of the same GPUs in the
  // same region, as its spot_price_per_hour (README.md, "Spot pods").
  std::vector<Offer> spot_offers = OfTheMarket(matching, true);
  matching = OfTheMarket(matching, false);
  if (kubernetes && !matching.empty()) matching = VmOffersOnly(available, matching, query);
  if (kubernetes) spot_offers = SplitByProvider(spot_offers, vm_providers_).kept;
  // Unknown prices would look free to the host's "cheapest" rule: drop them when priced
  // offers exist.
  bool any_priced = std::any_of(matching.begin(), matching.end(),
                                [](const Offer& o) { return o.price_per_hour.has_value(); });
  Array::Ptr offers = new Array();
  for (const Offer& m : matching) {
    if (any_priced && !m.price_per_hour) continue;
    Object::Ptr o = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    o->set("instance_type", m.cloud_id);
    if (m.gpu_type.empty() || m.gpu_type == "CPU_NODE") {
      o->set("gpu_type", Poco::Dynamic::Var());
    } else {
      o->set("gpu_type", m.gpu_type);
    }
    o->set("gpu_count", m.gpu_count);
    o->set("region", m.DisplayRegion());
    if (m.price_per_hour) {
      o->set("price_per_hour", *m.price_per_hour);
      o->set("price_source", "live");
    } else {
      o->set("price_per_hour", Poco::Dynamic::Var());
    }
    o->set("currency", m.currency);
    o->set("provider", m.provider);
    o->set("socket", m.socket);
    o->set("data_center", m.data_center);
    o->set("country", m.country);
    o->set("stock_status", m.stock_status);
    o->set("in_stock", true);  // matching offers are the ones in stock
    // MatchingOffers sorts cheapest first: the first spot offer of these GPUs here is the price.
    for (const Offer& s : spot_offers) {
      if (s.price_per_hour && s.gpu_type == m.gpu_type && s.gpu_count == m.gpu_count &&
          s.DisplayRegion() == m.DisplayRegion()) {
        o->set("spot_price_per_hour", *s.price_per_hour);
        break;
      }
    }
    offers->add(o);
  }
  host_.Debug("availability: " + std::to_string(offers->size()) + " in-stock offers for " +
              Describe(query));
  return kit::OffersResult(offers, kPoweredOffCost);
}

std::string PrimeIntellectDriver::Create(const std::string& request_json) {
  const Object::Ptr request = kit::ParseCreateRequest(request_json, kPodNameRules).request;
  const std::string name = json::Str(request, "name");
  kit::ParseCluster(request);  // checked before any call; nothing on the cloud to set
  OfferQuery query = QueryFor(request);
  query.instance_type = json::Str(request, "instance_type");
  const bool kubernetes = KubernetesOf(request);
  std::string image = json::Str(request, "image");
  if (image.empty()) image = default_image_;
  const std::string public_key = json::Str(request, "ssh_public_key");
  std::optional<int> disk_gb;
  if (json::Has(request, "disk_gb")) disk_gb = static_cast<int>(json::Int(request, "disk_gb"));

  // Idempotent by name: a live pod of that name is the VM.
  if (ObjectPtr found = FindPodByName(name)) {
    host_.Info("pod " + name + " exists (id " + Text(found, "id") + ", " + Text(found, "status") +
               ")");
    if (!public_key.empty()) EnsureSshKey(public_key);
    return VmResult(found, true);
  }

  // The offer: always a live availability item (REFERENCE.md §7), a spot one (isSpot) for a
  // spot request. The host names the on-demand offer of the row it took: a spot request then
  // takes the spot offer of the same GPUs and region (README.md, "Spot pods").
  const bool spot = kit::SpotRequested(request);
  std::vector<Offer> available = FetchAvailability(query);
  const bool named_spot_offer =
      std::any_of(available.begin(), available.end(), [&](const Offer& o) {
        return o.is_spot && o.cloud_id == query.instance_type;
      });
  if (spot && !named_spot_offer) query.instance_type.clear();
  std::vector<Offer> candidates = OfTheMarket(MatchingOffers(available, query), spot);
  if (kubernetes && !candidates.empty()) {
    candidates = VmOffersOnly(available, candidates, query);
  }
  std::optional<Offer> offer;
  if (!candidates.empty()) offer = candidates.front();
  if (!offer) {
    std::string seen;
    for (const Offer& o : available) {
      if (!Matches(o, query) || o.is_spot != spot) continue;
      seen += (seen.empty() ? "" : ", ") + o.cloud_id + "@" + o.provider + " in " +
              o.DisplayRegion() + " (stock \"" + o.stock_status + "\")";
    }
    if (!seen.empty()) {
      throw DriverError(GPUPROV_STATUS_CAPACITY,
                        "Prime Intellect has no " + std::string(spot ? "spot " : "") +
                            Describe(query) + " in stock now: " + seen +
                            "; try another region or GPU, or later");
    }
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "Prime Intellect offers no " + std::string(spot ? "spot " : "") +
                          Describe(query) +
                          "; `gpuprov provision --cloud primeintellect` lists what matches "
                          "(GPU types look like H100, A100-80GB, L40S)");
  }
  std::string error;
  std::optional<int> disk = DiskSizeFor(*offer, disk_gb, &error);
  if (!error.empty()) throw DriverError(GPUPROV_STATUS_INVALID_INPUT, error);
  std::string chosen_image = ImageFor(*offer, image, &error);
  if (!error.empty()) throw DriverError(GPUPROV_STATUS_INVALID_INPUT, error);

  const std::string key_id = public_key.empty() ? "" : EnsureSshKey(public_key);

  Object::Ptr pod = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  pod->set("name", PodName(name));
  pod->set("cloudId", offer->cloud_id);
  pod->set("gpuType", offer->gpu_type);
  if (!offer->socket.empty()) pod->set("socket", offer->socket);
  pod->set("gpuCount", offer->gpu_count);
  if (disk) pod->set("diskSize", *disk);
  // The offer's defaults, as the prime CLI and SkyPilot send them (optional in P-DOC).
  if (offer->vcpus_default && *offer->vcpus_default > 0) pod->set("vcpus", *offer->vcpus_default);
  if (offer->memory_default_gb && *offer->memory_default_gb > 0) {
    pod->set("memory", *offer->memory_default_gb);
  }
  pod->set("image", chosen_image);
  if (!offer->data_center.empty()) pod->set("dataCenterId", offer->data_center);
  if (!offer->country.empty()) pod->set("country", offer->country);
  if (!offer->security.empty()) pod->set("security", offer->security);
  pod->set("autoRestart", false);
  // The key this pod gets: P-DOC's create-pod request lists pod.sshKeyId. Whether a pod created
  // without it gets every account key or only the primary one is UNCONFIRMED; naming it covers
  // both (README, "Differences").
  if (!key_id.empty()) pod->set("sshKeyId", key_id);
  Object::Ptr provider = new Object();
  provider->set("type", offer->provider);
  Object body(Poco::JSON_PRESERVE_KEY_ORDER);
  body.set("pod", pod);
  body.set("provider", provider);
  if (std::string team = TeamId(); !team.empty()) {
    Object::Ptr t = new Object();
    t->set("teamId", team);
    body.set("team", t);
  } else {
    body.set("team", Poco::Dynamic::Var());
  }

  host_.Progress("creating pod " + PodName(name) + ": " + offer->cloud_id + " on " + offer->provider +
                 " in " + offer->DisplayRegion() + " (" + PriceText(offer->price_per_hour) +
                 ", image " + chosen_image + ")");
  ObjectPtr created = CreatePod(json::Stringify(body), name);
  host_.Info("pod " + name + " is " + Text(created, "id") + " (" + Text(created, "status") + ")");
  // The Pod has no cloudId or data-center field: create knows them from the offer.
  Object::Ptr vm = VmJson(created);
  vm->set("instance_type", offer->cloud_id);
  vm->set("region", offer->DisplayRegion());
  return kit::VmResult(vm, false);
}

std::string PrimeIntellectDriver::Get(const std::string& request_json) {
  Object::Ptr request = json::ParseObject(request_json, "the get request");
  ObjectPtr pod = Resolve(request);
  if (!pod || IsEnded(pod)) {
    throw DriverError(GPUPROV_STATUS_NOT_FOUND,
                      "no Prime Intellect pod " + kit::VmReference(request) +
                          " (see https://app.primeintellect.ai or `prime pods list`)");
  }
  return VmResult(pod);
}

std::string PrimeIntellectDriver::List(const std::string& /*request_json*/) {
  Array::Ptr vms = new Array();
  const std::vector<ObjectPtr> pods = ListPods();
  std::set<std::string> live_names;
  for (const ObjectPtr& pod : pods) {
    if (Upper(Text(pod, "status")) == "TERMINATED" || !IsGpuprovName(Text(pod, "name"))) continue;
    vms->add(VmJson(pod));
    live_names.insert(Text(pod, "name"));
  }
  // Spot pods Prime Intellect ended, while it lists them and no live pod has their name
  // (docs/driver-protocol.md, "Spot VMs").
  for (const ObjectPtr& pod : pods) {
    if (IsGpuprovName(Text(pod, "name")) && IsPreemptedPod(pod) &&
        live_names.insert(Text(pod, "name")).second) {
      vms->add(VmJson(pod));
    }
  }
  return kit::VmsResult(vms);
}

std::string PrimeIntellectDriver::Delete(const std::string& request_json) {
  Object::Ptr request = json::ParseObject(request_json, "the delete request");
  ObjectPtr pod = Resolve(request);
  if (!pod || IsEnded(pod)) {
    host_.Debug("nothing to delete for " + request_json);
    DeleteOwnKeysIfNoPods();  // a half-done create may have registered the key only
    return kit::DeletedResult(false);
  }
  bool finished = false;
  const bool deleted = DeletePod(pod, &finished);
  if (finished) DeleteOwnKeysIfNoPods();
  return kit::DeletedResult(deleted);
}

bool PrimeIntellectDriver::DeletePod(const ObjectPtr& pod, bool* finished) {
  const std::string id = Text(pod, "id");
  const std::string name = Text(pod, "name");
  host_.Progress("deleting pod " + name + " (" + id + ")");
  const kit::ApiAnswer r = api_->Call("DELETE", std::string(kApi) + "/pods/" + Encode(id),
                                      "delete pod " + name, nullptr, {404});
  if (r.status == 404) {
    *finished = true;
    return false;
  }

  // Deletion is asynchronous (DELETING, then TERMINATED or gone): wait, bounded.
  std::string status = Text(pod, "status");
  kit::PollOptions poll{"waiting for pod " + name + " to be deleted", poll_interval_,
                        std::chrono::duration_cast<std::chrono::milliseconds>(delete_timeout_)};
  *finished = kit::PollUntil(host_, poll, [&](std::string* state) {
    ObjectPtr now = GetPod(id);
    if (!now) return true;
    status = Upper(Text(now, "status"));
    *state = Lower(status);
    return status == "TERMINATED";
  });
  if (!*finished) {
    host_.Warning("pod " + name + " is still " + status + " after " +
                  std::to_string(delete_timeout_.count()) +
                  " s; Prime Intellect finishes the deletion on its own");
  }
  return true;
}

std::vector<PrimeIntellectDriver::ObjectPtr> PrimeIntellectDriver::ListKeys() {
  std::vector<ObjectPtr> keys;
  for (int page = 0; page < kMaxPages; ++page) {
    const int offset = page * kPageSize;
    Object::Ptr o = api_->Call("GET",
                               std::string(kApi) + "/ssh_keys/?offset=" + std::to_string(offset) +
                                   "&limit=" + std::to_string(kPageSize),
                               "list SSH keys")
                        .doc;
    Array::Ptr data = o ? json::Arr(o, "data") : nullptr;
    if (!data) break;
    for (size_t i = 0; i < data->size(); ++i) {
      if (Object::Ptr k = json::ObjAt(data, i)) keys.push_back(k);
    }
    std::optional<double> total = Number(o, "total_count");
    if (data->size() < static_cast<size_t>(kPageSize)) break;
    if (total && offset + static_cast<int>(data->size()) >= *total) break;
  }
  return keys;
}

std::string PrimeIntellectDriver::OpenPeerPorts(const std::string& request_json) {
  return kit::PeerPortsLeftToNodeFirewall(request_json);
}

std::string PrimeIntellectDriver::ListResources(const std::string& /*request_json*/) {
  // Pods first, then the account key they were made with: the order gc deletes in.
  std::vector<kit::ResourceFields> out;
  std::vector<std::string> live;  // the VM names of gpuprov's live pods
  for (const ObjectPtr& pod : ListPods()) {
    const std::string name = Text(pod, "name");
    if (IsGone(pod) || !IsGpuprovName(name)) continue;
    kit::ResourceFields r = kit::Resource("vm", Text(pod, "id"), name);
    r.vm_names = {VmNameOf(pod)};
    live.push_back(r.vm_names.front());
    r.created_at = Text(pod, "createdAt");
    r.price_per_hour = Number(pod, "priceHr");
    out.push_back(r);
  }
  // A pod has no key field: the account's keys are put on every pod made after them, so
  // gpuprov's key belongs to every live gpuprov pod (an orphan once none is left).
  for (const ObjectPtr& k : ListKeys()) {
    const std::string name = Text(k, "name");
    if (!IsGpuprovName(name)) continue;
    kit::ResourceFields r = kit::Resource("ssh_key", Text(k, "id"), name);
    r.vm_names = live;
    r.created_at = Text(k, "createdAt");
    out.push_back(r);
  }
  return kit::ResourcesResult(out);
}

std::string PrimeIntellectDriver::DeleteResource(const std::string& request_json) {
  const kit::ResourceRef ref = kit::ParseResourceRequest(request_json, {"vm", "ssh_key"});
  auto refuse = [&](const std::string& name) {
    return DriverError(GPUPROV_STATUS_INVALID_INPUT,
                       ref.kind + " " + ref.id + " (" + name +
                           ") is not named gpuprov-...; gpuprov leaves it alone");
  };
  // Read again: only what is still named as gpuprov's is deleted.
  if (ref.kind == "vm") {
    ObjectPtr pod = GetPod(ref.id);
    if (!pod || IsGone(pod)) return kit::DeletedResult(false);  // gone or already going
    if (!IsGpuprovName(Text(pod, "name"))) throw refuse(Text(pod, "name"));
    bool finished = false;
    return kit::DeletedResult(DeletePod(pod, &finished));
  }
  for (const ObjectPtr& k : ListKeys()) {
    if (Text(k, "id") != ref.id) continue;
    const std::string name = Text(k, "name");
    if (!IsGpuprovName(name)) throw refuse(name);
    host_.Progress("deleting SSH key " + name);
    const kit::ApiAnswer r = api_->Call("DELETE", std::string(kApi) + "/ssh_keys/" + Encode(ref.id),
                                        "delete SSH key " + name, nullptr, {404});
    return kit::DeletedResult(r.status != 404);
  }
  return kit::DeletedResult(false);
}

void PrimeIntellectDriver::DeleteOwnKeysIfNoPods() {
  for (const ObjectPtr& pod : ListPods()) {
    if (!IsGone(pod)) return;
  }
  for (const ObjectPtr& k : ListKeys()) {
    if (Text(k, "name").rfind("gpuprov-", 0) != 0) continue;
    host_.Progress("deleting SSH key " + Text(k, "name") + " (no pod left on the account)");
    api_->Call("DELETE", std::string(kApi) + "/ssh_keys/" + Encode(Text(k, "id")),
               "delete SSH key " + Text(k, "name"), nullptr, {404});
  }
}

}  // namespace gpuprov::primeintellect

// The keys of [clouds.primeintellect] this driver reads (gpuprov refuses others in config.toml);
// the kit's standard keys first, README.md's settings table lists the same
// (driver_settings_docs_test).
constexpr gpuprov_type_config_key kPrimeIntellectConfigKeys[] = {
    gpuprov::drivers::kRetryKey,
    gpuprov::drivers::PollIntervalKey("pod status polling interval (5000)"),
    gpuprov::drivers::DeleteWaitKey("how long delete waits for the pod to go (600)"),
    gpuprov::sdk::StringKey("team_id", "the team whose pods are used (else PRIME_TEAM_ID, the CLI's)"),
    gpuprov::sdk::StringKey("image", "the pod image (ubuntu_22_cuda_12 when offered)"),
    gpuprov::sdk::StringKey("vm_providers",
                            "providers whose offers are VMs, taken with Kubernetes on (README)"),
    gpuprov::sdk::RenamedKey("delete_timeout_s", gpuprov::drivers::kDeleteWaitSetting),
    gpuprov::sdk::RenamedKey("http_max_attempts", "retry.max_attempts"),
    gpuprov::sdk::RenamedKey("http_base_delay_ms", "retry.base_delay_ms"),
    gpuprov::sdk::RenamedKey("http_max_delay_ms", "retry.max_delay_ms"),
    gpuprov::sdk::RenamedKey("http_max_retry_after_ms", "retry.max_retry_after_ms"),
    gpuprov::sdk::RenamedKey("http_total_budget_ms", "retry.total_budget_ms"),
    gpuprov::sdk::RenamedKey("http_timeout_ms", "retry.attempt_timeout_ms"),
};

GPUPROV_DRIVER(gpuprov::primeintellect::PrimeIntellectDriver, kPrimeIntellectConfigKeys)
