// SPDX-License-Identifier: Apache-2.0
#include "verda_driver.h"

#include <Poco/JSON/Parser.h>

#include <algorithm>
#include <map>

#include "driver_kit.h"

namespace gpuprov::verda {
namespace {

namespace kit = gpuprov::drivers;

// What a VM powered off from inside still costs (gpuprov's TTL on the node powers it off),
// from REFERENCE.md: a shut-down instance is `offline`, "GPU still billed".
constexpr kit::PoweredOffCost kPoweredOffCost = kit::PoweredOffCost::kFull;

using namespace gpuprov::drivers::prelude;  // DriverError, json, Array, Object
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// V-SPEC tag "SSH Keys": "`/v1/sshkeys` endpoints are deprecated. Use `/v1/ssh-keys` instead."
constexpr const char* kSshKeysPath = "/ssh-keys";
// GET /v1/scripts pages (V-SPEC: pageSize "default 10 maximum 100").
constexpr int kScriptPageSize = 100;

// A token is renewed this long before Verda says it expires.
constexpr seconds kTokenMargin{60};

std::string Encode(const std::string& s) { return kit::EncodeComponent(s); }

std::string Join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}

std::vector<std::string> StringsOf(const Array::Ptr& a) {
  std::vector<std::string> out;
  for (size_t i = 0; a && i < a->size(); ++i)
    out.push_back(a->get(static_cast<unsigned>(i)).toString());
  return out;
}

// The one-element array some Verda GETs answer with (section 3.5, 4), or an object as it is.
Object::Ptr FirstObject(const Poco::Dynamic::Var& doc) {
  if (doc.type() == typeid(Object::Ptr)) return doc.extract<Object::Ptr>();
  if (doc.type() == typeid(Array::Ptr)) return json::ObjAt(doc.extract<Array::Ptr>(), 0);
  return nullptr;
}

}  // namespace

VerdaDriver::VerdaDriver(const gpuprov::sdk::InitContext& ctx) : host_(ctx.host) {
  kit::DriverSettings settings = kit::ParseSettings(ctx.config_json, kDefaultEndpoint);
  // The version is the path prefix (section 2): "https://api.verda.com" means .../v1.
  endpoint_ = settings.endpoint.ends_with("/v1") ? settings.endpoint : settings.endpoint + "/v1";
  config_ = settings.config;
  default_location_ = json::Str(config_, "region");
  default_image_ = json::Str(config_, "image");
  image_configured_ = !default_image_.empty();
  if (default_image_.empty()) default_image_ = kDefaultImage;
  const long long limit = json::Int(config_, "startup_script_limit", kDefaultScriptLimit);
  if (limit < 1024) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT, "startup_script_limit in [clouds.verda] is " +
                                                        std::to_string(limit) +
                                                        ": use at least 1024 (bytes)");
  }
  script_limit_ = static_cast<size_t>(limit);
  os_volume_gb_ = static_cast<int>(json::Int(config_, "os_volume_gb", 100));
  delete_wait_ = kit::DeleteWaitSetting(config_, seconds(600));
  placement_wait_ = seconds(json::Int(config_, "placement_wait_seconds", 120));
  poll_interval_ = kit::PollIntervalSetting(config_, milliseconds(5000));
  kit::ApiAuth auth;
  auth.resolve = [this]() -> std::optional<kit::Credential> {
    credentials_ = ResolveCredentials(config_);
    if (!credentials_) return std::nullopt;
    return kit::Credential{"", credentials_->origin};
  };
  auth.missing = "no Verda API credentials found: " + CredentialsHint();
  auth.label = "client credentials";
  auth.token = [this](bool renew) { return Token(renew); };
  api_ = std::make_unique<kit::ApiClient>(endpoint_, kit::RetryPolicyFrom(config_), host_,
                                          VerdaApi(), auth);
}

// --- auth and calls ------------------------------------------------------------------------

const ClientCredentials& VerdaDriver::Credentials() {
  api_->credential();  // resolves credentials_ once (VerdaAuth), AUTH with the hint when none
  return *credentials_;
}

const std::string& VerdaDriver::Token(bool renew) {
  if (!renew && !token_.empty() && Clock::now() < token_expiry_) return token_;
  token_.clear();
  kit::HttpRequest req;
  req.method = "POST";
  req.path_and_query = "/oauth2/token";
  req.headers["Content-Type"] = "application/json";
  req.body = TokenRequestBody(Credentials());
  kit::HttpResponse resp;
  try {
    resp = api_->http().Send(req);
  } catch (const kit::HttpError& e) {
    kit::ThrowHttpError(
        e, "get a Verda access token at " + endpoint_,
        e.last_response().body.empty() ? "" : ParseApiError(e.last_response().body).Text());
  }
  if (resp.status < 200 || resp.status >= 300) {
    const ApiError err = ParseApiError(resp.body);
    gpuprov_type_status st = StatusOf(resp.status, err);
    if (resp.status == 400 || resp.status == 401 || resp.status == 403) st = GPUPROV_STATUS_AUTH;
    throw DriverError(st, "get a Verda access token: Verda answered HTTP " +
                              std::to_string(resp.status) + " (" + err.Text() +
                              ") for the client credentials from " + Credentials().origin +
                              (st == GPUPROV_STATUS_AUTH ? "; " + CredentialsHint() : ""));
  }
  const AccessToken t = ParseTokenAnswer(resp.body);
  token_ = t.value;
  const seconds life = std::max(seconds(1), seconds(t.expires_in) - kTokenMargin);
  token_expiry_ = Clock::now() + std::min(life, seconds(t.expires_in));
  host_.Debug("access token obtained (expires in " + std::to_string(t.expires_in) + " s)");
  return token_;
}

Array::Ptr VerdaDriver::ArrayOf(const kit::ApiAnswer& a, const std::string& what) {
  const Poco::Dynamic::Var doc = a.Parsed();
  if (doc.type() == typeid(Array::Ptr)) return doc.extract<Array::Ptr>();
  throw DriverError(GPUPROV_STATUS_FAILED, what + ": Verda's answer is not a JSON list");
}

// --- instances -----------------------------------------------------------------------------

std::vector<VerdaDriver::ObjectPtr> VerdaDriver::Listed() {
  Array::Ptr list = ArrayOf(api_->Call("GET", "/instances", "list instances"), "list instances");
  std::vector<ObjectPtr> out;
  for (size_t i = 0; i < list->size(); ++i) {
    if (ObjectPtr in = json::ObjAt(list, i)) out.push_back(in);
  }
  return out;
}

std::vector<VerdaDriver::ObjectPtr> VerdaDriver::Instances() {
  std::vector<ObjectPtr> out = Listed();
  std::erase_if(out, [](const ObjectPtr& in) { return IsGoneStatus(json::Str(in, "status")); });
  return out;
}

VerdaDriver::ObjectPtr VerdaDriver::FindByName(const std::string& name, bool* foreign) {
  // Hostnames are not unique (section 3.3): the newest gpuprov instance of that name.
  ObjectPtr found;
  for (const auto& in : Instances()) {
    if (json::Str(in, "hostname") != name) continue;
    if (!IsManaged(in)) {
      if (foreign) *foreign = true;
      continue;
    }
    if (found) {
      host_.Warning("two gpuprov instances have hostname " + name + " (" + json::Str(found, "id") +
                    ", " + json::Str(in, "id") + "); using the newer");
      if (json::Str(in, "created_at") <= json::Str(found, "created_at")) continue;
    }
    found = in;
  }
  return found;
}

std::vector<VerdaDriver::ObjectPtr> VerdaDriver::PreemptedAmong(
    const std::vector<ObjectPtr>& listed) {
  std::set<std::string> live_names;
  std::vector<ObjectPtr> preempted;
  for (const auto& in : listed) {
    if (!IsManaged(in)) continue;
    if (IsPreempted(in)) {
      preempted.push_back(in);
    } else if (!IsGoneStatus(json::Str(in, "status"))) {
      live_names.insert(json::Str(in, "hostname"));
    }
  }
  std::erase_if(preempted, [&](const ObjectPtr& in) {
    return live_names.count(json::Str(in, "hostname")) > 0;
  });
  std::sort(preempted.begin(), preempted.end(), [](const ObjectPtr& a, const ObjectPtr& b) {
    return json::Str(a, "created_at") > json::Str(b, "created_at");
  });
  return preempted;
}

VerdaDriver::ObjectPtr VerdaDriver::InstanceById(const std::string& id) {
  const kit::ApiAnswer a =
      api_->Call("GET", "/instances/" + Encode(id), "get instance " + id, nullptr, {400, 404});
  if (a.status == 404 || a.status == 400) return nullptr;  // "Invalid instance id"
  ObjectPtr in = FirstObject(a.Parsed());
  if (!in) throw DriverError(GPUPROV_STATUS_FAILED, "get instance " + id + ": no instance object");
  return in;
}

VerdaDriver::ObjectPtr VerdaDriver::Resolve(const ObjectPtr& request) {
  const kit::VmRef ref = kit::RequireIdOrName(request);
  if (!ref.id.empty()) {
    // The id decides when Verda knows it: gone or going, or not gpuprov's (never touched),
    // is nothing; an unknown id falls back to the name.
    // A spot instance Verda took back is still the VM (preempted) until it is deleted.
    if (ObjectPtr in = InstanceById(ref.id)) {
      return IsManaged(in) && (!IsGoneStatus(json::Str(in, "status")) || IsPreempted(in))
                 ? in
                 : nullptr;
    }
  }
  if (ref.name.empty()) return nullptr;
  if (ObjectPtr live = FindByName(ref.name)) return live;
  for (const auto& in : PreemptedAmong(Listed())) {
    if (json::Str(in, "hostname") == ref.name) return in;
  }
  return nullptr;
}

std::map<std::string, std::vector<std::string>> VerdaDriver::Availability(
    const std::string& location, bool spot) {
  // is_spot / location_code: V-SPEC marks isSpot / locationCode "Deprecated camelCase alias".
  std::vector<std::pair<std::string, std::string>> q = {{"is_spot", spot ? "true" : "false"}};
  if (!location.empty()) q.emplace_back("location_code", location);
  const kit::ApiAnswer a = api_->Call("GET", "/instance-availability" + kit::QueryString(q),
                                      "list availability", nullptr, {400, 404});
  std::map<std::string, std::vector<std::string>> stock;
  if (a.status < 300) stock = ParseAvailability(ArrayOf(a, "list availability"));
  if (a.status >= 300 || (!location.empty() && stock.count(location) == 0)) {
    // A location Verda does not have (a typo in --region or location): say which it has.
    std::vector<std::string> codes;
    Array::Ptr all = ArrayOf(api_->Call("GET", "/locations", "list locations"), "list locations");
    for (size_t i = 0; i < all->size(); ++i)
      codes.push_back(json::Str(json::ObjAt(all, i), "code"));
    if (location.empty() || std::find(codes.begin(), codes.end(), location) != codes.end()) {
      if (a.status >= 300) {
        throw DriverError(StatusOf(a.status, ParseApiError(a.body)),
                          "list availability: Verda answered HTTP " + std::to_string(a.status) +
                              " (" + a.error.text + ")");
      }
      return stock;  // a known location that answered nothing: no stock there
    }
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT, "Verda has no location " + location +
                                                        " (--region, or location in "
                                                        "[clouds.verda]); its locations: " +
                                                        Join(codes));
  }
  return stock;
}

// --- keys and scripts ----------------------------------------------------------------------

VerdaDriver::SshKey VerdaDriver::EnsureSshKey(const std::string& public_key) {
  const kit::SshPublicKey mine = kit::ParseSshPublicKey(public_key);
  Array::Ptr keys = ArrayOf(api_->Call("GET", kSshKeysPath, "list SSH keys"), "list SSH keys");
  for (size_t i = 0; i < keys->size(); ++i) {
    ObjectPtr k = json::ObjAt(keys, i);
    const std::string line = json::Str(k, "key");
    try {
      if (kit::KeyIdentity(kit::ParseSshPublicKey(line, "key")) == kit::KeyIdentity(mine)) {
        host_.Debug("reusing SSH key " + json::Str(k, "name"));
        return {json::Str(k, "id"), json::Str(k, "name")};
      }
    } catch (const DriverError&) {
      // Another kind of key line: not ours.
    }
  }
  const std::string name = KeyName(public_key);
  Object body(Poco::JSON_PRESERVE_KEY_ORDER);
  body.set("name", name);
  body.set("key", kit::KeyIdentity(mine));
  host_.Progress("registering SSH key " + name);
  const kit::ApiAnswer a = api_->Send({.method = "POST",
                                       .path = kSshKeysPath,
                                       .what = "register SSH key " + name,
                                       .body = json::Stringify(body)});
  const std::string id = IdOfCreateAnswer(a.body);
  if (id.empty())
    throw DriverError(GPUPROV_STATUS_FAILED, "register SSH key: no key id in the answer");
  return {id, name};
}

void VerdaDriver::DeleteUnusedKeys(const std::vector<std::string>& key_ids,
                                   const std::string& except_id) {
  std::set<std::string> used;
  for (const auto& in : Instances()) {
    if (!IsManaged(in) || json::Str(in, "id") == except_id) continue;
    for (const auto& k : StringsOf(json::Arr(in, "ssh_key_ids"))) used.insert(k);
  }
  Array::Ptr keys = ArrayOf(api_->Call("GET", kSshKeysPath, "list SSH keys"), "list SSH keys");
  for (size_t i = 0; i < keys->size(); ++i) {
    ObjectPtr k = json::ObjAt(keys, i);
    const std::string id = json::Str(k, "id");
    const std::string name = json::Str(k, "name");
    if (name.rfind(kResourcePrefix, 0) != 0 || used.count(id)) continue;  // a user's key stays
    if (!key_ids.empty() && std::find(key_ids.begin(), key_ids.end(), id) == key_ids.end())
      continue;
    host_.Progress("deleting SSH key " + name + " (no gpuprov VM uses it)");
    api_->Call("DELETE", std::string(kSshKeysPath) + "/" + Encode(id), "delete SSH key " + name,
               nullptr, {404});
  }
}

std::vector<VerdaDriver::ObjectPtr> VerdaDriver::Scripts(const std::string& name_filter) {
  std::vector<ObjectPtr> out;
  std::set<std::string> seen;
  for (int page = 1;; ++page) {
    std::vector<std::pair<std::string, std::string>> q = {
        {"page", std::to_string(page)}, {"pageSize", std::to_string(kScriptPageSize)}};
    if (!name_filter.empty()) q.emplace_back("name", name_filter);
    kit::ApiAnswer a = api_->Call("GET", "/scripts" + kit::QueryString(q), "list startup scripts");
    Array::Ptr items = ArrayOf(a, "list startup scripts");
    bool fresh = false;
    for (size_t i = 0; i < items->size(); ++i) {
      ObjectPtr sc = json::ObjAt(items, i);
      if (sc && seen.insert(json::Str(sc, "id")).second) {
        out.push_back(sc);
        fresh = true;
      }
    }
    // The last page: a short one, all X-Total-Count items read, or (an API that ignores the
    // page parameters and answers the whole list each time) nothing new.
    long long total = -1;
    if (auto it = a.headers.find("X-Total-Count"); it != a.headers.end()) {
      try {
        total = std::stoll(it->second);
      } catch (const std::exception&) {
      }
    }
    if (!fresh || items->size() < static_cast<size_t>(kScriptPageSize) ||
        (total >= 0 && static_cast<long long>(out.size()) >= total)) {
      return out;
    }
  }
}

std::vector<std::string> VerdaDriver::ScriptIds(const std::string& vm_name) {
  std::vector<std::string> ids;
  for (const auto& sc : Scripts(ScriptName(vm_name))) {
    if (json::Str(sc, "name") == ScriptName(vm_name)) ids.push_back(json::Str(sc, "id"));
  }
  return ids;
}

std::map<std::string, LiveType> VerdaDriver::LiveTypes() {
  return ParseInstanceTypes(
      ArrayOf(api_->Call("GET", "/instance-types", "list instance types"), "list instance types"));
}

std::string VerdaDriver::ImageFor(const std::string& type, const std::string& wanted,
                                  bool user_chose, const LiveType& live) {
  std::vector<ImageRow> images;
  const bool fits = live.supported_os.empty() ||
                    std::find(live.supported_os.begin(), live.supported_os.end(), wanted) !=
                        live.supported_os.end();
  if (!fits && !user_chose) {
    // V-SPEC GET /v1/images: "instance_type: Filter OS images by instance type"; 404 when
    // the type is unknown (then supported_os alone decides).
    const kit::ApiAnswer a =
        api_->Call("GET", "/images" + kit::QueryString({{"instance_type", type}}),
                   "list the images of " + type, nullptr, {404});
    const Poco::Dynamic::Var doc = a.Parsed();
    if (a.status < 300 && doc.type() == typeid(Array::Ptr)) {
      Array::Ptr list = doc.extract<Array::Ptr>();
      for (size_t i = 0; i < list->size(); ++i) {
        ObjectPtr o = json::ObjAt(list, i);
        if (!o) continue;
        const bool marked = json::Has(o, "is_default") && o->get("is_default").isBoolean() &&
                            o->getValue<bool>("is_default");
        images.push_back({json::Str(o, "image_type"), marked});
      }
    }
  }
  const std::string image = ChooseImage(wanted, user_chose, live.supported_os, images);
  if (!fits && user_chose) {
    host_.Warning("Verda lists image " + wanted + " as not supported by " + type +
                  " (supported_os: " + Join(live.supported_os) + "); sending it as chosen");
  } else if (image != wanted) {
    host_.Info("image " + wanted + " does not run on " + type + " (its supported_os: " +
               Join(live.supported_os) + "); using " + image);
  }
  return image;
}

std::string VerdaDriver::CreateScript(const std::string& vm_name, const std::string& text) {
  // One script per VM: one a killed run left behind is replaced (its text may be older).
  DeleteScripts(vm_name);
  Object body(Poco::JSON_PRESERVE_KEY_ORDER);
  body.set("name", ScriptName(vm_name));
  body.set("script", text);
  host_.Progress("creating startup script " + ScriptName(vm_name) + " (" +
                 std::to_string(text.size()) + " bytes)");
  const kit::ApiAnswer a = api_->Send({.method = "POST",
                                       .path = "/scripts",
                                       .what = "create startup script " + ScriptName(vm_name),
                                       .body = json::Stringify(body)});
  const std::string id = IdOfCreateAnswer(a.body);
  if (id.empty())
    throw DriverError(GPUPROV_STATUS_FAILED, "create startup script: no id in the answer");
  return id;
}

void VerdaDriver::DeleteScripts(const std::string& vm_name) {
  for (const auto& id : ScriptIds(vm_name)) {
    host_.Progress("deleting startup script " + ScriptName(vm_name));
    api_->Call("DELETE", "/scripts/" + Encode(id), "delete startup script " + ScriptName(vm_name),
               nullptr, {404});
  }
}

// --- create --------------------------------------------------------------------------------

std::string VerdaDriver::Launch(const std::string& name, const std::string& body) {
  const std::string what = "create instance " + name;
  kit::Backoff backoff(host_, api_->http().policy(), what);
  for (;;) {
    std::optional<DriverError> failure;
    try {
      const kit::ApiAnswer a = api_->Send({.method = "POST",
                                           .path = "/instances",
                                           .what = what,
                                           .body = body,
                                           .allow = {500, 502, 503, 504},
                                           .idempotent = false});
      if (IsNoCapacityAnswer(a.status, ParseApiError(a.body))) {
        // Sold out there: nothing was made, and another try would only meet the same answer;
        // CAPACITY lets the host move on to another location or GPU.
        throw DriverError(GPUPROV_STATUS_CAPACITY,
                          what + ": Verda answered HTTP " + std::to_string(a.status) + " (" +
                              a.error.text +
                              "); Verda has no capacity for this type there now: try another "
                              "location or GPU (--region, --gpus), or later");
      }
      if (a.status < 500) {
        const std::string id = IdOfCreateAnswer(a.body);
        if (id.empty())
          throw DriverError(GPUPROV_STATUS_FAILED, what + ": the answer has no instance id");
        return id;
      }
      failure.emplace(
          GPUPROV_STATUS_TRANSIENT,
          what + ": Verda answered HTTP " + std::to_string(a.status) + " (" + a.error.text + ")");
    } catch (const DriverError& e) {
      if (e.status() != GPUPROV_STATUS_TRANSIENT) throw;
      failure.emplace(e);
    }
    // Creation is not idempotent (section 8): the failed try may have made the instance.
    if (ObjectPtr made = FindByName(name)) {
      host_.Info("instance " + name + " was created although Verda's answer failed");
      return json::Str(made, "id");
    }
    if (!backoff.Wait(failure->what())) throw *failure;
  }
}

VerdaDriver::ObjectPtr VerdaDriver::WaitPlaced(const std::string& id, const std::string& name) {
  ObjectPtr in;
  kit::PollOptions options;
  options.what = "waiting for Verda to place instance " + name;
  options.interval = std::min(poll_interval_, milliseconds(2000));
  options.timeout = placement_wait_;
  kit::PollUntil(host_, options, [&](std::string* status) {
    in = InstanceById(id);
    if (!in) return true;
    *status = json::Str(in, "status");
    return !IsUnplacedStatus(*status);
  });
  if (in && json::Str(in, "status") == "no_capacity") {
    host_.Progress("instance " + name + " could not be placed (no_capacity): deleting it");
    DeleteInstance(in);
    throw DriverError(GPUPROV_STATUS_CAPACITY,
                      "create instance " + name +
                          ": Verda accepted it but could not place it "
                          "(status no_capacity); try another location or GPU (--region, --gpus), "
                          "or later");
  }
  return in;
}

std::string VerdaDriver::Create(const std::string& request_json) {
  const auto [request, name, user_data] =
      kit::ParseCreateRequest(request_json, kVmNameRules, script_limit_, "Verda", "startup script");
  const std::string public_key =
      kit::RequiredSshPublicKey(request, "Verda installs the instance's registered keys for root");
  KeyName(public_key);  // validates the key line before any call
  // A cluster node carries its cluster and role as tags (V-SPEC DeployInstancePublicDto.tags).
  const std::optional<kit::ClusterRequest> cluster = kit::ParseCluster(request);
  // Tags within Verda's limits, checked before anything is made (V3).
  const Array::Ptr tags =
      InstanceTags(name, kit::UserTags(request), cluster ? &*cluster : nullptr);
  std::optional<kit::GpuRequest> gpu = kit::ParseGpu(request);
  std::string type = json::Str(request, "instance_type");
  // A GPU Verda does not rent is refused here, before any call; the counts come from the live
  // type list below.
  std::optional<TypeGpus> wanted_gpus;
  if (gpu) {
    const std::optional<std::string> canonical = CanonicalGpu(gpu->type);
    if (!canonical) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        kit::NotOfferedMessage(TypeCatalogue(), gpu->type, gpu->count));
    }
    wanted_gpus = TypeGpus{*canonical, gpu->count};
    if (!type.empty()) {
      const std::optional<TypeGpus> named = GpusOfTypeName(type);
      if (!named || named->gpu_type != *canonical || named->gpu_count != gpu->count) {
        throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                          "instance type " + type + " does not have " + *canonical + ":" +
                              std::to_string(gpu->count) +
                              "; give --gpus alone, or a type with those GPUs");
      }
    }
  }
  const bool spot = kit::SpotRequested(request);
  std::string location = json::Str(request, "region");
  if (location.empty()) location = default_location_;
  std::string image = json::Str(request, "image");
  const bool image_chosen = !image.empty() || image_configured_;
  if (image.empty()) image = default_image_;
  long long disk_gb = json::Int(request, "disk_gb", 0);
  if (disk_gb <= 0) disk_gb = os_volume_gb_;

  // Idempotent by name.
  bool foreign = false;
  if (ObjectPtr existing = FindByName(name, &foreign)) {
    host_.Info("instance " + name + " exists (id " + json::Str(existing, "id") + ", " +
               json::Str(existing, "status") + ")");
    return kit::VmResult(VmJson(existing), true);
  }
  if (foreign) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "a Verda instance with hostname " + name +
                          " exists that gpuprov did not create (it lacks the gpuprov tag); "
                          "choose another VM name");
  }

  // The types to try, from the live list (V-SPEC GET /v1/instance-types), not only the table.
  const std::map<std::string, LiveType> live = LiveTypes();
  std::vector<std::string> candidates;
  if (!wanted_gpus) {
    candidates.push_back(kit::ChooseInstanceType(TypeCatalogue(), gpu, type).row.instance_type);
  } else if (!type.empty()) {
    candidates.push_back(type);
  } else {
    candidates = CandidateTypes(wanted_gpus->gpu_type, wanted_gpus->gpu_count, live);
  }

  // The first candidate type in stock (as a spot instance for a spot request), and its
  // location (section 3.6, 7).
  const auto stock = Availability(location, spot);
  std::string chosen;
  for (const auto& t : candidates) {
    for (const auto& [loc, types] : stock) {
      if (!location.empty() && loc != location) continue;
      if (std::find(types.begin(), types.end(), t) != types.end()) {
        chosen = t;
        if (location.empty()) location = loc;
        break;
      }
    }
    if (!chosen.empty()) break;
  }
  if (chosen.empty()) {
    throw DriverError(GPUPROV_STATUS_CAPACITY,
                      "Verda has no " + std::string(spot ? "spot " : "") + "capacity now for " +
                          Join(candidates) +
                          (location.empty() ? std::string(" in any location") : " in " + location) +
                          " (GET /instance-availability" + (spot ? "?is_spot=true" : "") +
                          "); try later or another " +
                          (location.empty() ? "GPU" : "location (--region) or GPU") +
                          (spot ? ", or on demand (without --spot)" : ""));
  }

  if (auto it = live.find(chosen); it != live.end()) {
    image = ImageFor(chosen, image, image_chosen, it->second);
  }

  const SshKey key = EnsureSshKey(public_key);
  std::string script_id;
  // name by an init-capture: clang 14 (the sanitizer build) cannot capture a structured binding.
  auto cleanup = [&, name = name] {
    // No instance of this name exists: its script goes, and the key when no gpuprov
    // instance uses it.
    try {
      DeleteScripts(name);
      DeleteUnusedKeys({key.id}, "");
      if (cluster) RemoveClusterNetworks(cluster->name, "");
    } catch (const std::exception& e) {
      host_.Warning("could not remove what was made for " + name + ": " + e.what() +
                    "; `gpuprov down " + name + "` removes it");
    }
  };

  std::string id;
  ObjectPtr in;
  try {
    // A cluster node joins the cluster's private network (V-GO-PN below: verda-cloud/
    // verdacloud-sdk-go pkg/verda/private_networks.go and CreateInstanceRequest's network,
    // private_ip and public_ip in instances_types.go).
    const std::string network_id = cluster ? EnsureClusterNetwork(cluster->name) : "";
    if (!user_data.empty()) script_id = CreateScript(name, user_data);
    Object body(Poco::JSON_PRESERVE_KEY_ORDER);
    body.set("instance_type", chosen);
    body.set("image", image);
    body.set("hostname", name);
    body.set("description", InstanceDescription(name));
    Array::Ptr key_ids = new Array();
    key_ids->add(key.id);
    body.set("ssh_key_ids", key_ids);
    body.set("location_code", location);
    if (!script_id.empty()) body.set("startup_script_id", script_id);
    if (!network_id.empty()) {
      // "PrivateIP and PublicIP must be set together": an address on the network, and the
      // public one the host reaches the node at.
      body.set("network", network_id);
      body.set("private_ip", "auto");
      body.set("public_ip", "auto");
    }
    Object::Ptr os_volume = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    os_volume->set("name", "os-" + name);
    os_volume->set("size", disk_gb);
    if (spot) {
      // V-SPEC DeployInstancePublicDto: is_spot, contract SPOT (PAY_AS_YOU_GO|SPOT|LONG_TERM),
      // and os_volume.on_spot_discontinue (keep_detached|move_to_trash|delete_permanently;
      // verda-cloud/sdk-python v1.20.0 release notes: keep_detached before it existed). A
      // preempted VM is replaced by a new one with a new OS volume, so the old one is deleted
      // with it rather than left detached and billed.
      os_volume->set("on_spot_discontinue", "delete_permanently");
    }
    body.set("os_volume", os_volume);
    body.set("is_spot", spot);
    if (spot) body.set("contract", "SPOT");
    body.set("tags", tags);
    host_.Progress("creating " + std::string(spot ? "spot instance " : "") + name + " (" +
                   chosen + " in " + location + ")");
    id = Launch(name, json::Stringify(body));
    host_.Info("instance " + name + " is id " + id);
    in = WaitPlaced(id, name);
  } catch (const DriverError& e) {
    if (e.status() != GPUPROV_STATUS_CANCELLED) cleanup();
    throw;
  }
  if (!in) {
    // Created, then gone before it was placed: reported as terminated, so the host stops
    // waiting; `gpuprov down` removes the script and key.
    Object::Ptr gone = new Object();
    gone->set("id", id);
    gone->set("hostname", name);
    gone->set("status", "discontinued");
    gone->set("instance_type", chosen);
    gone->set("location", location);
    ObjectPtr vm = VmJson(gone);
    vm->set("message", "Verda no longer lists the instance (it vanished right after creation)");
    return kit::VmResult(vm, false);
  }
  return kit::VmResult(VmJson(in), false);
}

// --- the rest of the protocol ---------------------------------------------------------------

VerdaDriver::ObjectPtr VerdaDriver::VmJson(const ObjectPtr& in) const {
  const std::string status = json::Str(in, "status");
  const std::string ip = json::Str(in, "ip");
  const VmState state = StateOf(status, !ip.empty());
  const std::string type_name = json::Str(in, "instance_type");
  kit::VmFields vm;
  vm.id = json::Str(in, "id");
  vm.name = json::Str(in, "hostname");
  vm.state = state.state;
  vm.public_ip = state.state == "running" ? ip : std::string();
  vm.ssh_user = kSshUser;
  vm.region = json::Str(in, "location");
  vm.instance_type = type_name;
  vm.image = json::Str(in, "image");
  vm.gpus = GpusText(type_name);
  vm.created_at = json::Str(in, "created_at");
  vm.message = state.message;
  vm.spot = json::Has(in, "is_spot") && in->get("is_spot").isBoolean() &&
            in->getValue<bool>("is_spot");
  if (IsPreempted(in)) {
    vm.state = "preempted";
    vm.message = PreemptedMessage();
  }
  vm.tags = kit::KeyValueTags(json::Arr(in, "tags"));
  // The address on the cluster's private network (V-GO-PN Instance.PrivateIP: null for a
  // classic instance, then "": its peers use public_ip).
  vm.private_ip = json::Str(in, "private_ip");
  vm.cluster = TagValue(in, kit::kClusterTag);
  vm.role = TagValue(in, kit::kRoleTag);
  return kit::VmJson(vm);
}

std::string VerdaDriver::Check(const std::string& /*request_json*/) {
  Array::Ptr keys = ArrayOf(api_->Call("GET", kSshKeysPath, "check the Verda credentials"),
                            "check the Verda credentials");
  Object result(Poco::JSON_PRESERVE_KEY_ORDER);
  result.set("account", "Verda project (" + std::to_string(keys->size()) + " SSH keys)");
  result.set("user_data_limit", static_cast<int>(script_limit_));
  result.set("key_from", Credentials().origin);
  result.set("endpoint", endpoint_);
  return json::Stringify(result);
}

std::string VerdaDriver::Offers(const std::string& request_json) {
  const auto [gpu, location] = kit::ParseOffersRequest(request_json, default_location_);
  Array::Ptr offers = new Array();
  const kit::Catalogue& catalogue = TypeCatalogue();
  std::string canonical;
  int count = 0;
  if (gpu) {
    // Counts the table lacks are offered when the live list has them (V6).
    std::optional<std::string> c = CanonicalGpu(gpu->type);
    if (!c) {
      host_.Warning(kit::NotOfferedMessage(catalogue, gpu->type, gpu->count));
      return kit::OffersResult(offers, kPoweredOffCost);
    }
    canonical = *c;
    count = gpu->count;
  }
  // Prices from the live type list; a listed type the table lacks counts when its name reads
  // as the request (the set changes).
  std::map<std::string, double> price;
  std::map<std::string, double> spot_price;
  for (const auto& [name, t] : LiveTypes()) {
    price[name] = t.price_per_hour;
    if (t.spot_price_per_hour > 0) spot_price[name] = t.spot_price_per_hour;
  }
  auto wanted = [&, gpu = gpu](const std::string& type_name) {  // init-capture: clang 14
    if (!gpu) return type_name == catalogue.cpu_default.instance_type;
    std::optional<TypeGpus> g = GpusOfTypeName(type_name);
    return g && g->gpu_type == canonical && g->gpu_count == count;
  };
  std::vector<std::string> matching;
  for (const auto& [name, p] : price) {
    if (wanted(name)) matching.push_back(name);
  }
  // Spot stock is its own list (is_spot=true; dstack issue 3927 shows a type sold out on
  // demand but in stock as spot, and the reverse). An offer carries the spot price where the
  // type is in spot stock there; the protocol has one in_stock, which stays the on-demand one,
  // so a type in spot stock only is not offered.
  std::set<std::pair<std::string, std::string>> spot_stock;
  if (!spot_price.empty()) {
    for (const auto& [loc, types] : Availability(location, true)) {
      for (const auto& t : types) spot_stock.emplace(loc, t);
    }
  }
  for (const auto& [loc, in_stock] : Availability(location)) {
    if (!location.empty() && loc != location) continue;
    for (const auto& t : in_stock) {
      if (!wanted(t)) continue;
      kit::OfferFields offer{t, gpu ? canonical : "", count, loc,
                             price.count(t) ? price[t] : 0.0, "", true, "live", ""};
      if (spot_price.count(t) && spot_stock.count({loc, t})) offer.spot_price_per_hour = spot_price[t];
      offers->add(kit::OfferJson(offer));
    }
  }
  const std::string what = gpu ? canonical + ":" + std::to_string(count) : "a CPU instance";
  if (matching.empty()) {
    host_.Warning("Verda's instance-type list has no type with " + what + " now");
  } else if (offers->size() == 0) {
    host_.Warning("Verda has no capacity now for " + Join(matching) +
                  (location.empty() ? std::string(" in any location") : " in " + location) +
                  " (GET /instance-availability); try later" +
                  (location.empty() ? "" : " or another location"));
  }
  return kit::OffersResult(offers, kPoweredOffCost);
}

std::string VerdaDriver::Get(const std::string& request_json) {
  return kit::GetVmResult(request_json, "gpuprov instance", " on Verda",
                          [&](const ObjectPtr& request) -> ObjectPtr {
                            const ObjectPtr in = Resolve(request);
                            return in ? VmJson(in) : nullptr;
                          });
}

std::string VerdaDriver::List(const std::string& /*request_json*/) {
  Array::Ptr vms = new Array();
  const std::vector<ObjectPtr> listed = Listed();
  for (const auto& in : listed) {
    if (IsManaged(in) && !IsGoneStatus(json::Str(in, "status"))) vms->add(VmJson(in));
  }
  // And the spot instances Verda took back, while it lists them and no live VM has the name.
  for (const auto& in : PreemptedAmong(listed)) vms->add(VmJson(in));
  return kit::VmsResult(vms);
}

bool VerdaDriver::DeleteInstance(const ObjectPtr& instance) {
  const std::string id = json::Str(instance, "id");
  const std::string name = json::Str(instance, "hostname");
  const std::string what = "delete instance " + name;
  host_.Progress("deleting instance " + name + " (id " + id + ")");
  // The OS volume is deleted with it, not left in the trash (V4).
  const std::string body = DeleteActionBody(id, VolumesToDelete(instance));
  const auto start = Clock::now();
  for (;;) {
    const kit::ApiAnswer a = api_->Send(
        {.method = "PUT", .path = "/instances", .what = what, .body = body, .allow = {400, 404}});
    const ApiError error = ParseApiError(a.body);
    const Poco::Dynamic::Var doc = a.Parsed();
    // The message is either the error envelope or the instance's entry in the result list.
    std::string message = a.status >= 400 ? error.message : "";
    if (a.status < 400 && doc.type() == typeid(Array::Ptr)) {
      Array::Ptr results = doc.extract<Array::Ptr>();
      for (size_t i = 0; i < results->size(); ++i) {
        ObjectPtr r = json::ObjAt(results, i);
        if (r && json::Str(r, "instanceId") == id) message = json::Str(r, "error");
      }
    }
    if (a.status == 404) return false;
    if (a.status == 204) return true;  // V-SPEC: "already in the requested state"
    switch (ClassifyActionMessage(message)) {
      case ActionOutcome::kDone:
        return true;
      case ActionOutcome::kGone:
        return false;
      case ActionOutcome::kFailed:
        throw DriverError(a.status >= 400 ? StatusOf(a.status, error) : GPUPROV_STATUS_FAILED,
                          what + ": Verda answered " + message);
      case ActionOutcome::kNotYet:
        break;
    }
    // "Can't discontinue a provisioning instance": Verda takes the delete once it is placed.
    if (Clock::now() - start >= delete_wait_) {
      throw DriverError(GPUPROV_STATUS_TRANSIENT, what + ": still not deletable after " +
                                                      std::to_string(delete_wait_.count()) +
                                                      " s (" + message + "); run `gpuprov down " +
                                                      name + "` again later");
    }
    host_.Progress(what + ": " + message + "; retrying");
    kit::SleepOrCancel(host_, poll_interval_, what);
  }
}

std::string VerdaDriver::Delete(const std::string& request_json) {
  ObjectPtr request = json::ParseObject(request_json, "the delete request");
  ObjectPtr in = Resolve(request);
  std::string name = json::Str(request, "name");
  bool deleted = false;
  std::string id;
  std::vector<std::string> key_ids;
  std::string cluster;
  if (in) {
    id = json::Str(in, "id");
    name = json::Str(in, "hostname");
    key_ids = StringsOf(json::Arr(in, "ssh_key_ids"));
    cluster = TagValue(in, kit::kClusterTag);
    deleted = DeleteInstance(in);
  }
  if (name.empty()) return kit::DeletedResult(deleted);
  // The startup script of this VM name, also when the instance was already gone (a half-done
  // create), and gpuprov's keys no other gpuprov instance uses (every such key when the
  // instance's own could not be read).
  DeleteScripts(name);
  DeleteUnusedKeys(key_ids, id);
  // The cluster's private network goes with its last node.
  if (!cluster.empty()) RemoveClusterNetworks(cluster, id);
  return kit::DeletedResult(deleted);
}

std::vector<VerdaDriver::ObjectPtr> VerdaDriver::ClusterNetworks(const std::string& cluster) {
  const std::string wanted = cluster.empty() ? "" : kit::ClusterResourceName(cluster);
  Array::Ptr list = ArrayOf(api_->Call("GET", "/private-networks", "list private networks"),
                            "list private networks");
  std::vector<ObjectPtr> out;
  for (size_t i = 0; i < list->size(); ++i) {
    ObjectPtr n = json::ObjAt(list, i);
    const std::string name = json::Str(n, "name");
    if (wanted.empty() ? name.rfind(kResourcePrefix, 0) == 0 : name == wanted) out.push_back(n);
  }
  std::stable_sort(out.begin(), out.end(), [](const ObjectPtr& a, const ObjectPtr& b) {
    return std::pair(json::Str(a, "created_at"), json::Str(a, "id")) <
           std::pair(json::Str(b, "created_at"), json::Str(b, "id"));
  });
  return out;
}

std::string VerdaDriver::EnsureClusterNetwork(const std::string& cluster) {
  const std::string name = kit::ClusterResourceName(cluster);
  std::vector<ObjectPtr> found = ClusterNetworks(cluster);
  if (found.empty()) {
    // V-GO-PN CreatePrivateNetworkRequest {name, mode}: mode "auto" "creates subnets per
    // location on first use".
    Object body(Poco::JSON_PRESERVE_KEY_ORDER);
    body.set("name", name);
    body.set("mode", "auto");
    host_.Progress("creating private network " + name + " for cluster " + cluster);
    const kit::ApiAnswer a = api_->Send({.method = "POST",
                                         .path = "/private-networks",
                                         .what = "create private network " + name,
                                         .body = json::Stringify(body)});
    const std::string id = IdOfCreateAnswer(a.body);
    if (id.empty()) {
      throw DriverError(GPUPROV_STATUS_FAILED,
                        "create private network " + name + ": no id in Verda's answer");
    }
    found = ClusterNetworks(cluster);
    if (found.empty()) return id;
  }
  return json::Str(found.front(), "id");
}

void VerdaDriver::RemoveClusterNetworks(const std::string& cluster, const std::string& except_id) {
  for (const auto& in : Instances()) {
    if (json::Str(in, "id") != except_id && IsManaged(in) &&
        TagValue(in, kit::kClusterTag) == cluster) {
      return;  // a node of the cluster stays
    }
  }
  for (const auto& n : ClusterNetworks(cluster)) {
    try {
      DeleteNetwork(n);
    } catch (const DriverError& e) {
      if (e.status() == GPUPROV_STATUS_CANCELLED) throw;
      host_.Warning(std::string(e.what()) + "; `gpuprov gc --delete` removes it later");
    }
  }
}

bool VerdaDriver::DeleteNetwork(const ObjectPtr& network) {
  const std::string id = json::Str(network, "id");
  const std::string what = "delete private network " + json::Str(network, "name");
  host_.Progress("deleting private network " + json::Str(network, "name") + " (id " + id + ")");
  const auto start = Clock::now();
  for (;;) {
    // A network an instance is still on (one Verda is still deleting) is refused; V-GO-PN
    // gives no status for that, so any refusal but 404 is waited out.
    const kit::ApiAnswer a = api_->Call("DELETE", "/private-networks/" + Encode(id), what,
                                        nullptr, {400, 403, 404, 409});
    if (a.status == 404) return false;
    if (a.ok()) return true;
    if (Clock::now() - start >= delete_wait_) {
      throw DriverError(GPUPROV_STATUS_TRANSIENT,
                        what + ": Verda still refuses it after " +
                            std::to_string(delete_wait_.count()) + " s (HTTP " +
                            std::to_string(a.status) + ": " + a.error.text + ")");
    }
    kit::SleepOrCancel(host_, poll_interval_, what);
  }
}

std::string VerdaDriver::ListResources(const std::string& /*request_json*/) {
  std::vector<kit::ResourceFields> out;
  std::vector<ObjectPtr> managed;
  for (const auto& in : Instances()) {
    if (!IsManaged(in)) continue;
    managed.push_back(in);
    const std::string name = json::Str(in, "hostname");
    kit::ResourceFields r = kit::Resource("vm", json::Str(in, "id"), name);
    r.vm_names = {name};
    r.cluster = TagValue(in, kit::kClusterTag);
    r.role = TagValue(in, kit::kRoleTag);
    r.region = json::Str(in, "location");
    r.created_at = json::Str(in, "created_at");
    if (json::Has(in, "price_per_hour")) {
      try {
        r.price_per_hour = in->getValue<double>("price_per_hour");
      } catch (const Poco::Exception&) {
      }
    }
    out.push_back(r);
  }
  const std::string prefix = kResourcePrefix;
  // A cluster's private network (networks take no tags: the gpuprov- name is the mark) belongs
  // to the instances on it and those its cluster tag names.
  for (const auto& n : ClusterNetworks("")) {
    const std::string name = json::Str(n, "name");
    kit::ResourceFields r = kit::Resource("cluster_network", json::Str(n, "id"), name);
    r.cluster = name.substr(prefix.size());
    for (const auto& in : managed) {
      if (json::Str(in, "private_network_id") == r.id ||
          TagValue(in, kit::kClusterTag) == r.cluster) {
        r.vm_names.push_back(json::Str(in, "hostname"));
      }
    }
    r.created_at = json::Str(n, "created_at");
    out.push_back(r);
  }
  for (const auto& sc : Scripts(prefix)) {
    const std::string name = json::Str(sc, "name");
    if (!sc || name.rfind(prefix, 0) != 0) continue;
    kit::ResourceFields r = kit::Resource("script", json::Str(sc, "id"), name);
    r.vm_names = {name.substr(prefix.size())};
    r.created_at = json::Str(sc, "created_at");
    out.push_back(r);
  }
  Array::Ptr keys = ArrayOf(api_->Call("GET", kSshKeysPath, "list SSH keys"), "list SSH keys");
  for (size_t i = 0; i < keys->size(); ++i) {
    ObjectPtr k = json::ObjAt(keys, i);
    const std::string name = json::Str(k, "name");
    if (!k || name.rfind(prefix, 0) != 0) continue;
    kit::ResourceFields r = kit::Resource("ssh_key", json::Str(k, "id"), name);
    for (const auto& in : managed) {
      for (const auto& id : StringsOf(json::Arr(in, "ssh_key_ids"))) {
        if (id == r.id) r.vm_names.push_back(json::Str(in, "hostname"));
      }
    }
    out.push_back(r);
  }
  return kit::ResourcesResult(out);
}

std::string VerdaDriver::OpenPeerPorts(const std::string& request_json) {
  return kit::PeerPortsLeftToNodeFirewall(request_json);
}

std::string VerdaDriver::DeleteResource(const std::string& request_json) {
  const kit::ResourceRef ref =
      kit::ParseResourceRequest(request_json, {"vm", "cluster_network", "script", "ssh_key"});
  auto refuse = [&] {
    return DriverError(GPUPROV_STATUS_INVALID_INPUT,
                       ref.kind + " " + ref.id +
                           " does not carry gpuprov's tag or name; gpuprov leaves it alone");
  };
  // Each is looked up again: only what still carries gpuprov's mark is deleted.
  if (ref.kind == "vm") {
    ObjectPtr in = InstanceById(ref.id);
    if (!in || IsGoneStatus(json::Str(in, "status"))) return kit::DeletedResult(false);
    if (!IsManaged(in)) throw refuse();
    return kit::DeletedResult(DeleteInstance(in));
  }
  if (ref.kind == "cluster_network") {
    const kit::ApiAnswer a = api_->Call("GET", "/private-networks/" + Encode(ref.id),
                                        "get private network " + ref.id, nullptr, {404});
    if (a.status == 404 || !a.doc) return kit::DeletedResult(false);
    if (json::Str(a.doc, "name").rfind(kResourcePrefix, 0) != 0) throw refuse();
    return kit::DeletedResult(DeleteNetwork(a.doc));
  }
  const bool script = ref.kind == "script";
  const std::string path = script ? "/scripts" : kSshKeysPath;
  std::vector<ObjectPtr> list;
  if (script) {
    list = Scripts(kResourcePrefix);
  } else {
    Array::Ptr keys = ArrayOf(api_->Call("GET", path, "list SSH keys"), "list SSH keys");
    for (size_t i = 0; i < keys->size(); ++i) list.push_back(json::ObjAt(keys, i));
  }
  for (const auto& o : list) {
    if (!o || json::Str(o, "id") != ref.id) continue;
    const std::string name = json::Str(o, "name");
    if (name.rfind(kResourcePrefix, 0) != 0) throw refuse();
    host_.Progress("deleting " + std::string(script ? "startup script " : "SSH key ") + name);
    const kit::ApiAnswer a = api_->Call("DELETE", path + "/" + Encode(ref.id),
                                        "delete " + ref.kind + " " + name, nullptr, {404});
    return kit::DeletedResult(a.status != 404);
  }
  return kit::DeletedResult(false);
}

}  // namespace gpuprov::verda

// The keys of [clouds.verda] this driver reads (gpuprov refuses others in config.toml); the kit's
// standard keys first, README.md's settings table lists the same (driver_settings_docs_test).
constexpr gpuprov_type_config_key kVerdaConfigKeys[] = {
    gpuprov::drivers::kRetryKey,
    gpuprov::drivers::PollIntervalKey("how often to poll while waiting (5000)"),
    gpuprov::drivers::DeleteWaitKey("how long down retries a delete Verda refuses while provisioning (600)"),
    gpuprov::sdk::StringKey("region", "the location code used when provision names no --region "
                                      "(e.g. FIN-01)"),
    gpuprov::sdk::StringKey("image",
                            "the OS image type (default ubuntu-24.04-cuda-12.8-open-docker)"),
    gpuprov::sdk::StringKey("client_id_env", "the environment variable that holds the client id"),
    gpuprov::sdk::StringKey("client_secret_env",
                            "the environment variable that holds the client secret"),
    gpuprov::sdk::StringKey("credentials_file",
                            "the verda CLI's credentials file (~/.verda/credentials)"),
    gpuprov::sdk::StringKey("profile", "the profile (section) of the credentials file (default)"),
    gpuprov::sdk::IntegerKey("startup_script_limit", "bytes of startup script sent (65536)"),
    gpuprov::sdk::IntegerKey("os_volume_gb",
                             "OS volume size when provision gives no --disk-gb (100)"),
    gpuprov::sdk::IntegerKey("placement_wait_seconds",
                             "how long create waits for the instance to be placed (120)"),
    gpuprov::sdk::RenamedKey("location", "region"),
};

GPUPROV_DRIVER(gpuprov::verda::VerdaDriver, kVerdaConfigKeys)
