// SPDX-License-Identifier: Apache-2.0
#include "hyperstack_driver.h"

#include <algorithm>

#include "driver_kit.h"

namespace gpuprov::hyperstack {
namespace {

namespace kit = gpuprov::drivers;

// What a VM powered off from inside still costs (gpuprov's TTL on the node powers it off),
// from REFERENCE.md: a powered-off VM is SHUTOFF, "still billed" (only hibernation pauses
// billing).
constexpr kit::PoweredOffCost kPoweredOffCost = kit::PoweredOffCost::kFull;

using namespace gpuprov::drivers::prelude;
using kit::kResourcePrefix;

constexpr int kPageSize = 100;
constexpr int kMaxPages = 100;
// SkyPilot retries a delete refused "being created" 18 times (REFERENCE.md §3.4).
constexpr int kDeleteTries = 18;
// The ports a VM result lists when its security rules open them: the ones gpuprov opens.
constexpr int kWellKnownPorts[] = {22, 80, 443, 6443};

bool Ok(int status) { return status >= 200 && status < 300; }

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string EnvironmentOf(const Object::Ptr& vm) {
  return json::Str(json::Obj(vm, "environment"), "name");
}

std::string KeyNameOf(const Object::Ptr& vm) { return json::Str(json::Obj(vm, "keypair"), "name"); }

}  // namespace

HyperstackDriver::HyperstackDriver(const gpuprov::sdk::InitContext& ctx) : host_(ctx.host) {
  const kit::DriverSettings settings = kit::ParseSettings(ctx.config_json, kDefaultEndpoint);
  endpoint_ = settings.endpoint;
  config_ = settings.config;
  default_region_ = json::Str(config_, "region");
  if (default_region_.empty()) default_region_ = kDefaultRegion;
  configured_environment_ = json::Str(config_, "environment");
  default_image_ = json::Str(config_, "image");
  poll_interval_ = kit::PollIntervalSetting(config_, std::chrono::milliseconds(5000));
  delete_timeout_ = kit::DeleteWaitSetting(config_, std::chrono::seconds(600));
  delete_retry_ = std::chrono::milliseconds(json::Int(config_, "delete_retry_ms", 10000));
  api_ = std::make_unique<kit::ApiClient>(endpoint_, kit::RetryPolicyFrom(config_), host_,
                                          HyperstackApi(), HyperstackAuth(config_));
}

std::vector<HyperstackDriver::ObjectPtr> HyperstackDriver::ListAll(const std::string& path,
                                                                   const std::string& key,
                                                                   const std::string& what) {
  // H-SDK list_vms, list_key_pairs, list_environments: query `page` and `pageSize` (the
  // answer spells it `page_size`, beside `count`, the whole list's length).
  // REFERENCE.md §H1: the default page size is not documented, so every
  // list is paged here until `count` items, a short page or an empty one.
  std::vector<ObjectPtr> out;
  const char sep = path.find('?') == std::string::npos ? '?' : '&';
  for (int page = 1; page <= kMaxPages; ++page) {
    ObjectPtr doc = api_->Call("GET",
                               path + sep +
                                   kit::QueryString({{"page", std::to_string(page)},
                                                     {"pageSize", std::to_string(kPageSize)}})
                                       .substr(1),
                               what)
                        .doc;
    Array::Ptr items = json::Arr(doc, key);
    const size_t n = items ? items->size() : 0;
    for (size_t i = 0; i < n; ++i) {
      if (ObjectPtr o = json::ObjAt(items, i)) out.push_back(o);
    }
    const long long page_size = json::Int(doc, "page_size", kPageSize);
    const long long count = json::Int(doc, "count", -1);
    if (n == 0 || static_cast<long long>(n) < page_size) break;
    if (count >= 0 && static_cast<long long>(out.size()) >= count) break;
  }
  return out;
}

std::string HyperstackDriver::RegionOf(const ObjectPtr& request) const {
  const std::string region = json::Str(request, "region");
  return region.empty() ? default_region_ : region;
}

std::vector<Flavor> HyperstackDriver::ListFlavors(const std::string& region) {
  const std::string query = region.empty() ? "" : kit::QueryString({{"region", region}});
  return ParseFlavors(api_->Call("GET", "/core/flavors" + query, "list flavors").doc);
}

std::vector<HyperstackDriver::ObjectPtr> HyperstackDriver::AllVms() {
  return ListAll("/core/virtual-machines", "instances", "list virtual machines");
}

std::vector<HyperstackDriver::ObjectPtr> HyperstackDriver::Environments() {
  return ListAll("/core/environments", "environments", "list environments");
}

std::map<std::string, double> HyperstackDriver::Pricebook() {
  std::string raw;
  try {
    raw = api_->Send({.path = "/pricebook", .what = "read the pricebook", .raw = true}).body;
  } catch (const DriverError& e) {
    if (e.status() == GPUPROV_STATUS_AUTH || e.status() == GPUPROV_STATUS_CANCELLED) throw;
    host_.Debug(std::string("pricebook unavailable, prices unknown: ") + e.what());
    return {};
  }
  return ParsePricebook(raw);
}

std::vector<HyperstackDriver::ObjectPtr> HyperstackDriver::ManagedVms() {
  std::vector<ObjectPtr> out;
  for (const auto& vm : AllVms()) {
    if (IsManaged(vm)) out.push_back(vm);
  }
  return out;
}

HyperstackDriver::ObjectPtr HyperstackDriver::FindByName(const std::string& name, bool* foreign) {
  // search= narrows the list; the exact name is checked here (REFERENCE.md §3.3).
  for (const auto& vm : ListAll("/core/virtual-machines" + kit::QueryString({{"search", name}}),
                                "instances", "look up virtual machine " + name)) {
    if (json::Str(vm, "name") != name) continue;
    if (IsManaged(vm)) return vm;
    if (foreign) *foreign = true;
  }
  return nullptr;
}

HyperstackDriver::ObjectPtr HyperstackDriver::GetVm(const std::string& id) {
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) return nullptr;
  const kit::ApiAnswer a = api_->Call("GET", "/core/virtual-machines/" + kit::EncodeComponent(id),
                                      "read virtual machine " + id, nullptr, {404});
  if (a.status == 404) return nullptr;
  ObjectPtr vm = json::Obj(a.doc, "instance");
  if (!vm) {
    throw DriverError(GPUPROV_STATUS_FAILED,
                      "read virtual machine " + id + ": the answer has no instance");
  }
  return vm;
}

HyperstackDriver::ObjectPtr HyperstackDriver::Resolve(const ObjectPtr& request) {
  const auto [id, name] = kit::RequireIdOrName(request);
  if (!id.empty()) {
    ObjectPtr vm = GetVm(id);
    if (vm && IsManaged(vm) && (name.empty() || json::Str(vm, "name") == name)) return vm;
    if (vm) return nullptr;  // that id is another VM now
  }
  if (!name.empty()) return FindByName(name);
  return nullptr;
}

HyperstackDriver::ObjectPtr HyperstackDriver::VmJson(const ObjectPtr& vm) const {
  const VmState state = StateOf(vm);
  Object::Ptr flavor = json::Obj(vm, "flavor");
  Flavor f;
  f.name = json::Str(flavor, "name");
  f.gpu = json::Str(flavor, "gpu");
  f.gpu_count = static_cast<int>(json::Int(flavor, "gpu_count", 0));
  std::vector<int> ports;
  const std::set<int> open = OpenTcpPorts(vm, /*world_only=*/false);
  for (int p : kWellKnownPorts) {
    if (open.count(p)) ports.push_back(p);
  }
  kit::VmFields out;
  out.id = json::Str(vm, "id");
  out.name = json::Str(vm, "name");
  out.state = state.state;
  out.public_ip = PublicIp(vm);
  out.ssh_user = kSshUser;
  out.region = json::Str(json::Obj(vm, "environment"), "region");
  out.instance_type = f.name;
  out.image = json::Str(json::Obj(vm, "image"), "name");
  out.gpus = GpusOf(f);
  out.created_at = json::Str(vm, "created_at");
  out.message = state.message;
  if (PortRandomized(vm)) {
    // H3 (unconfirmed): created with enable_port_randomization false; if Hyperstack
    // randomized the floating IP's ports anyway, SSH may not answer on port 22.
    out.message += std::string(out.message.empty() ? "" : "; ") +
                   "Hyperstack reports port randomization on this VM (port_randomization): SSH "
                   "may not answer on port 22 of its floating IP; see the hyperstack driver's "
                   "README";
  }
  out.ports = ports;
  const auto tags = TagsOf(vm);
  out.tags = tags;
  // fixed_ip: the VM's address on its environment's private network (REFERENCE.md §3.2),
  // null until it is known.
  out.private_ip = json::Str(vm, "fixed_ip");
  for (const auto& [key, value] : tags) {
    if (key == kit::kClusterTag) out.cluster = value;
    if (key == kit::kRoleTag) out.role = value;
  }
  out.extra = {{"environment", EnvironmentOf(vm)}};
  return kit::VmJson(out);
}

std::string HyperstackDriver::EnsureEnvironment(const std::string& region, Made* made) {
  const std::string name =
      configured_environment_.empty() ? EnvironmentName(region) : configured_environment_;
  for (const auto& e : Environments()) {
    if (json::Str(e, "name") != name) continue;
    const std::string env_region = json::Str(e, "region");
    if (!env_region.empty() && env_region != region) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "Hyperstack environment " + name + " is in region " + env_region +
                            ", not " + region + ": ask for region " + env_region +
                            " or name another environment in [clouds.hyperstack]");
    }
    return name;
  }
  if (!configured_environment_.empty()) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "Hyperstack environment " + name +
                          " (environment in [clouds.hyperstack]) does not exist: create it in "
                          "the console or remove the setting to let gpuprov use " +
                          EnvironmentName(region));
  }
  Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  body->set("name", name);
  body->set("region", region);
  host_.Progress("creating environment " + name);
  const kit::ApiAnswer a = api_->Call("POST", "/core/environments", "create environment " + name,
                                      body, {409}, /*idempotent=*/false);
  if (a.status == 409) return name;  // made in the meantime by another run
  made->environment = true;
  made->environment_id = json::Str(json::Obj(a.doc, "environment"), "id");
  return name;
}

std::string HyperstackDriver::EnsureKeyPair(const std::string& environment,
                                            const std::string& public_key, Made* made) {
  const std::string identity = KeyIdentity(public_key);
  auto find = [&]() -> ObjectPtr {
    for (const auto& k : ListAll("/core/keypairs", "keypairs", "list key pairs")) {
      if (EnvironmentOf(k) == environment && KeyIdentity(json::Str(k, "public_key")) == identity) {
        return k;
      }
    }
    return nullptr;
  };
  if (ObjectPtr k = find()) {
    host_.Debug("key pair " + json::Str(k, "name") + " in " + environment + " has this key");
    return json::Str(k, "name");
  }
  const std::string name = KeyPairName(public_key);
  Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  body->set("name", name);
  body->set("environment_name", environment);
  body->set("public_key", kit::TrimSpace(public_key));
  host_.Progress("importing SSH key as key pair " + name + " in " + environment);
  const kit::ApiAnswer a = api_->Call("POST", "/core/keypairs", "import key pair " + name, body,
                                      {409}, /*idempotent=*/false);
  const ObjectPtr& doc = a.doc;
  if (a.status == 409) {
    if (ObjectPtr k = find()) return json::Str(k, "name");
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "a key pair named " + name + " with another public key exists in " +
                          "Hyperstack environment " + environment +
                          ": delete it in the console, or use another SSH key");
  }
  made->key_pair = true;
  made->key_pair_id = json::Str(json::Obj(doc, "keypair"), "id");
  return name;
}

void HyperstackDriver::CheckImage(const std::string& region, const std::string& image) {
  // H-SDK list_images(region, include_public, search, page, per_page): its default page size
  // is not documented (H1), so the image is looked for by `search` first, which finds it
  // whichever way the list is paged; the whole list only names the others in the error.
  std::vector<std::string> names;
  for (const std::string& search : {image, std::string()}) {
    std::vector<std::pair<std::string, std::string>> query = {{"region", region},
                                                              {"include_public", "true"}};
    if (!search.empty()) query.emplace_back("search", search);
    ObjectPtr doc = api_->Call("GET", "/core/images" + kit::QueryString(query), "list images").doc;
    Array::Ptr groups = json::Arr(doc, "images");
    for (size_t g = 0; groups && g < groups->size(); ++g) {
      Array::Ptr list = json::Arr(json::ObjAt(groups, g), "images");
      for (size_t i = 0; list && i < list->size(); ++i) {
        const std::string n = json::Str(json::ObjAt(list, i), "name");
        if (n == image) return;
        if (!n.empty() && !search.empty()) continue;
        if (!n.empty()) names.push_back(n);
      }
    }
  }
  throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                    "Hyperstack has no image \"" + image + "\" in " + region +
                        "; images there: " + (names.empty() ? "none listed" : Join(names)));
}

HyperstackDriver::ObjectPtr HyperstackDriver::CreateVm(const std::string& name,
                                                       const ObjectPtr& body) {
  const std::string what = "create virtual machine " + name;
  kit::Backoff backoff(host_, api_->http().policy(), what);
  for (;;) {
    std::string problem;
    try {
      const kit::ApiAnswer a = api_->Send({.method = "POST",
                                           .path = "/core/virtual-machines",
                                           .what = what,
                                           .body = json::Stringify(body),
                                           .allow = {409, 500, 502, 503, 504},
                                           .idempotent = false,
                                           .raw = true});
      const int status = a.status;
      const std::string& raw = a.body;
      const ObjectPtr& doc = a.doc;
      if (Ok(status)) {
        ObjectPtr vm = json::ObjAt(json::Arr(doc, "instances"), 0);
        if (vm && !json::Str(vm, "id").empty()) {
          // The create answer may be short (id, status): read the whole object.
          if (ObjectPtr full = GetVm(json::Str(vm, "id"))) return full;
          return vm;
        }
        if (ObjectPtr found = FindByName(name)) return found;
        throw DriverError(GPUPROV_STATUS_FAILED, what + ": the answer has no instances");
      }
      if (status == 409) {
        // Made by an earlier attempt whose answer was lost, or by another run.
        if (ObjectPtr found = FindByName(name)) return found;
        throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                          what + ": Hyperstack answered HTTP 409: " + ApiMessage(raw) +
                              "; choose another VM name");
      }
      problem = "HTTP " + std::to_string(status) + ": " + ApiMessage(raw);
    } catch (const DriverError& e) {
      if (e.status() == GPUPROV_STATUS_NOT_FOUND) {
        // 404 on create: the environment, flavor, image or key pair named in the body.
        throw DriverError(GPUPROV_STATUS_INVALID_INPUT, e.what());
      }
      if (e.status() != GPUPROV_STATUS_TRANSIENT) throw;
      problem = e.what();
    }
    // An ambiguous failure: the VM may exist. Look before trying again.
    host_.Debug(what + " failed (" + problem + "); looking it up by name before retrying");
    if (ObjectPtr found = FindByName(name)) return found;
    if (!backoff.Wait(problem)) {
      throw DriverError(GPUPROV_STATUS_TRANSIENT,
                        what + " failed " + std::to_string(backoff.failures()) +
                            " time(s), last: " + problem + ". Try again in a few minutes");
    }
  }
}

void HyperstackDriver::Undo(const Made& made, const std::string& environment) {
  try {
    if (made.key_pair && !made.key_pair_id.empty()) {
      host_.Progress("removing the key pair imported for this VM");
      api_->Call("DELETE", "/core/keypair/" + kit::EncodeComponent(made.key_pair_id),
                 "delete key pair " + made.key_pair_id, nullptr, {404});
    }
    if (made.environment && !made.environment_id.empty()) {
      host_.Progress("removing environment " + environment);
      api_->Call("DELETE", "/core/environments/" + kit::EncodeComponent(made.environment_id),
                 "delete environment " + environment, nullptr, {404});
    }
  } catch (const std::exception& e) {
    host_.Warning(std::string("could not remove what this create made: ") + e.what() +
                  "; `gpuprov down` removes it later");
  }
}

void HyperstackDriver::CleanUpEnvironment(const std::string& environment) {
  // Every environment gpuprov made, and the configured one for its key pairs: a VM that
  // vanished or a create cut short leaves key pairs and environments nothing uses.
  std::set<std::string> envs_in_use, keys_in_use;
  for (const auto& vm : AllVms()) {
    envs_in_use.insert(EnvironmentOf(vm));
    keys_in_use.insert(EnvironmentOf(vm) + "/" + KeyNameOf(vm));
  }
  auto ours = [&](const std::string& env) {
    return env.rfind(kResourcePrefix, 0) == 0 || env == environment ||
           (!configured_environment_.empty() && env == configured_environment_);
  };
  std::set<std::string> envs_with_other_keys;
  for (const auto& k : ListAll("/core/keypairs", "keypairs", "list key pairs")) {
    const std::string env = EnvironmentOf(k);
    const std::string name = json::Str(k, "name");
    // Only key pairs gpuprov imported; one the user imported is never deleted.
    const bool gpuprov_key = name.rfind(kResourcePrefix, 0) == 0;
    if (!ours(env) || !gpuprov_key || keys_in_use.count(env + "/" + name)) {
      envs_with_other_keys.insert(env);
      continue;
    }
    host_.Progress("deleting key pair " + name + " in " + env);
    api_->Call("DELETE", "/core/keypair/" + kit::EncodeComponent(json::Str(k, "id")),
               "delete key pair " + name, nullptr, {404});
  }
  for (const auto& e : Environments()) {
    const std::string name = json::Str(e, "name");
    // Only environments gpuprov names; a configured one is the user's.
    if (name.rfind(kResourcePrefix, 0) != 0 || name == configured_environment_ ||
        envs_in_use.count(name) || envs_with_other_keys.count(name)) {
      continue;
    }
    host_.Progress("deleting environment " + name + " (no VM left in it)");
    api_->Call("DELETE", "/core/environments/" + kit::EncodeComponent(json::Str(e, "id")),
               "delete environment " + name, nullptr, {404});
  }
}

void HyperstackDriver::WaitGone(const std::string& id, const std::string& name) {
  kit::PollOptions poll{"waiting for virtual machine " + name + " to be deleted", poll_interval_,
                        delete_timeout_};
  const bool gone = kit::PollUntil(host_, poll, [&](std::string* state) {
    ObjectPtr vm = GetVm(id);
    if (!vm) return true;
    *state = json::Str(vm, "status");
    return false;
  });
  if (!gone) {
    throw DriverError(GPUPROV_STATUS_TRANSIENT,
                      "virtual machine " + name + " is still being deleted after " +
                          std::to_string(delete_timeout_.count() / 1000) +
                          " s; run `gpuprov down " + name +
                          "` again to finish (its key pair and environment are removed then)");
  }
}

std::string HyperstackDriver::Check(const std::string& /*request_json*/) {
  // One page (H-SDK list_environments: `count` is the whole list's length).
  ObjectPtr doc =
      api_->Call("GET",
                 "/core/environments" +
                     kit::QueryString({{"page", "1"}, {"pageSize", std::to_string(kPageSize)}}),
                 "check the Hyperstack API key")
          .doc;
  Array::Ptr envs = json::Arr(doc, "environments");
  const long long count = json::Int(doc, "count", envs ? static_cast<long long>(envs->size()) : 0);
  Object result(Poco::JSON_PRESERVE_KEY_ORDER);
  result.set("account", "Hyperstack API key from " + api_->credential().origin + ", " +
                            std::to_string(count) + " environment(s)");
  result.set("user_data_limit", static_cast<int>(kMaxUserDataBytes));
  result.set("allow_from", true);  // create and open_ports narrow sources (IPv4)
  result.set("key_from", api_->credential().origin);
  result.set("endpoint", endpoint_);
  return json::Stringify(result);
}

std::string HyperstackDriver::Offers(const std::string& request_json) {
  // No region: every region's flavors, the default region's first.
  const auto [gpu, region] = kit::ParseOffersRequest(request_json, "");
  Array::Ptr offers = new Array();

  std::vector<Flavor> flavors;
  try {
    flavors = ListFlavors(region);
  } catch (const DriverError& e) {
    if (e.status() == GPUPROV_STATUS_AUTH || e.status() == GPUPROV_STATUS_CANCELLED) throw;
    host_.Debug(std::string("flavor list unavailable, using the built-in table: ") + e.what());
    for (const Flavor& f : KnownFlavors()) {
      if (region.empty() || f.region == region) flavors.push_back(f);
    }
  }
  const kit::Catalogue catalogue = FlavorCatalogue(flavors, CpuFlavor(flavors));
  const std::string wanted =
      gpu ? CanonicalGpu(gpu->type).value_or("?") + ":" + std::to_string(gpu->count) : "";
  std::vector<const Flavor*> matching;
  for (const Flavor& f : flavors) {
    if (GpusOf(f) == wanted) matching.push_back(&f);
  }
  if (matching.empty()) {
    host_.Warning(gpu ? kit::NotOfferedMessage(catalogue, gpu->type, gpu->count) +
                            (region.empty() ? "" : " (in " + region + ")")
                      : "Hyperstack lists no CPU flavor" +
                            (region.empty() ? std::string() : " in " + region));
    return kit::OffersResult(offers, kPoweredOffCost);
  }
  // The default region first, then the preferred (PCIe) flavors: the host takes the first of
  // equally priced offers (and of offers whose price the pricebook does not give).
  std::stable_sort(matching.begin(), matching.end(), [&](const Flavor* a, const Flavor* b) {
    const bool ra = a->region == default_region_, rb = b->region == default_region_;
    if (ra != rb) return ra;
    return IsPreferredFlavor(a->name) && !IsPreferredFlavor(b->name);
  });
  // Prices from the pricebook (REFERENCE.md §H2): a flavor's GPU model
  // times its count; unknown (0, no price source) when the pricebook does not name it.
  const std::map<std::string, double> pricebook = Pricebook();
  std::vector<std::string> out_of_stock;
  for (const Flavor* f : matching) {
    if (!f->stock_available) {
      out_of_stock.push_back(f->name + " in " + f->region);
      continue;
    }
    const std::optional<std::string> g = CanonicalGpu(f->gpu);
    const std::optional<double> price = FlavorPrice(pricebook, *f);
    offers->add(kit::OfferJson({f->name, f->gpu_count > 0 && g ? *g : "", f->gpu_count,
                                f->region, price.value_or(0.0), "", true,
                                price ? "live" : "", ""}));
  }
  if (offers->size() == 0) {
    host_.Warning("Hyperstack has " + (wanted.empty() ? std::string("CPU VMs") : wanted) + " as " +
                  Join(out_of_stock) +
                  " but none is in stock now (stock_available false); try later or another "
                  "region");
  }
  return kit::OffersResult(offers, kPoweredOffCost);
}

std::string HyperstackDriver::Create(const std::string& request_json) {
  const auto [request, name, user_data] =
      kit::ParseCreateRequest(request_json, kVmNameRules, kMaxUserDataBytes, "Hyperstack");
  const std::string public_key =
      kit::RequiredSshPublicKey(request, "Hyperstack needs a key pair (key_name) to create a VM");
  KeyPairName(public_key);  // checks the key line before any call
  const std::vector<int> ports = kit::WithSsh(kit::PortsOf(request, "open_ports"));
  const kit::PortSources sources = kit::SourcesOf(request, /*ipv6_allowed=*/false);
  const std::optional<kit::GpuRequest> gpu = kit::ParseGpu(request);
  const std::string region = RegionOf(request);
  // A cluster node goes into the same environment as any VM of the region: an environment's
  // VMs share its private network, and each VM's own security rules decide what reaches it
  // there (open_peer_ports), so the cluster needs no environment of its own.
  const std::optional<kit::ClusterRequest> cluster = kit::ParseCluster(request);

  // A re-run finds the VM of that name instead of making a second.
  bool foreign = false;
  if (ObjectPtr existing = FindByName(name, &foreign)) {
    host_.Info("virtual machine " + name + " exists (id " + json::Str(existing, "id") + ", " +
               json::Str(existing, "status") + ")");
    return kit::VmResult(VmJson(existing), true);
  }
  if (foreign) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "a Hyperstack VM named " + name +
                          " exists that gpuprov did not create (it lacks the gpuprov label); "
                          "choose another VM name");
  }

  // The flavor, from the region's live list: a GPU request and instance_type must agree.
  const std::vector<Flavor> flavors = ListFlavors(region);
  const kit::CatalogueChoice choice = kit::ChooseInstanceType(
      FlavorCatalogue(flavors, CpuFlavor(flavors)), gpu, json::Str(request, "instance_type"));
  const std::string flavor = choice.row.instance_type;
  if (choice.index && !flavors[*choice.index].stock_available) {
    throw DriverError(GPUPROV_STATUS_CAPACITY,
                      "Hyperstack flavor " + flavor + " is out of stock in " + region +
                          " (stock_available false); try another region (--region) or later");
  }
  std::string image = json::Str(request, "image");
  if (image.empty()) image = default_image_;
  if (image.empty()) image = choice.row.gpu_count > 0 ? kDefaultGpuImage : kDefaultCpuImage;
  CheckImage(region, image);

  Made made;
  const std::string environment = EnsureEnvironment(region, &made);
  std::string key_name;
  try {
    key_name = EnsureKeyPair(environment, public_key, &made);
  } catch (const DriverError&) {
    Undo(made, environment);
    throw;
  }

  Array::Ptr rules = IngressRules(ports, sources);
  Array::Ptr labels = new Array();
  for (const auto& l : VmLabels(name, request)) labels->add(l);
  if (cluster) {
    for (const auto& l : ClusterLabels(*cluster)) labels->add(l);
  }
  Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  body->set("name", name);
  body->set("environment_name", environment);
  body->set("image_name", image);
  body->set("flavor_name", flavor);
  body->set("key_name", key_name);
  body->set("count", 1);
  body->set("assign_floating_ip", true);
  // Keep SSH on port 22 (REFERENCE.md §3.1: several real clients send false).
  body->set("enable_port_randomization", false);
  body->set("security_rules", rules);
  // raw text, not base64 (REFERENCE.md §4)
  if (!user_data.empty()) body->set("user_data", user_data);
  body->set("labels", labels);

  std::string port_list;
  for (int p : ports) port_list += (port_list.empty() ? "" : ",") + std::to_string(p);
  host_.Progress("creating virtual machine " + name + " (" + flavor + " in " + environment +
                 ", image " + image + ", tcp " + port_list + " open)");
  ObjectPtr vm;
  try {
    vm = CreateVm(name, body);
  } catch (const DriverError&) {
    Undo(made, environment);
    throw;
  }
  host_.Info("virtual machine " + name + " is id " + json::Str(vm, "id"));
  return kit::ConfirmSources(kit::VmResult(VmJson(vm), false), sources);
}

std::string HyperstackDriver::Get(const std::string& request_json) {
  return kit::GetVmResult(request_json, "gpuprov virtual machine", " on Hyperstack",
                          [&](const ObjectPtr& request) -> ObjectPtr {
                            const ObjectPtr vm = Resolve(request);
                            return vm ? VmJson(vm) : nullptr;
                          });
}

std::string HyperstackDriver::List(const std::string& /*request_json*/) {
  Array::Ptr vms = new Array();
  for (const auto& vm : ManagedVms()) vms->add(VmJson(vm));
  return kit::VmsResult(vms);
}

bool HyperstackDriver::DeleteVmAndWait(const std::string& id, const std::string& name) {
  host_.Progress("deleting virtual machine " + name + " (id " + id + ")");
  // A VM still being created cannot be deleted yet (REFERENCE.md §3.4): try again, cancellable.
  kit::PollOptions poll{"waiting until virtual machine " + name + " can be deleted", delete_retry_,
                        delete_retry_ * kDeleteTries};
  bool gone_already = false;
  const bool accepted = kit::PollUntil(host_, poll, [&](std::string* state) {
    const kit::ApiAnswer a =
        api_->Send({.method = "DELETE",
                    .path = "/core/virtual-machines/" + kit::EncodeComponent(id),
                    .what = "delete virtual machine " + name,
                    .allow = {400, 404, 409},
                    .raw = true});
    const int status = a.status;
    const std::string& raw = a.body;
    if (Ok(status)) return true;
    if (status == 404) return gone_already = true;
    if (!IsStillBeingCreated(raw)) {
      throw DriverError(StatusOfError(status, raw),
                        "delete virtual machine " + name + ": Hyperstack answered HTTP " +
                            std::to_string(status) + ": " + ApiMessage(raw));
    }
    *state = "still being created";
    return false;
  });
  if (!accepted) {
    throw DriverError(
        GPUPROV_STATUS_TRANSIENT,
        "virtual machine " + name + " was still being created after " +
            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(poll.timeout).count()) +
            " s of retries; run `gpuprov down " + name + "` again later");
  }
  WaitGone(id, name);  // its security rules go with it (REFERENCE.md §3.4)
  return !gone_already;
}

std::string HyperstackDriver::Delete(const std::string& request_json) {
  ObjectPtr request = json::ParseObject(request_json, "the delete request");
  ObjectPtr vm = Resolve(request);
  std::string name = json::Str(request, "name");
  std::string environment;
  bool deleted = false;
  if (vm) {
    const std::string id = json::Str(vm, "id");
    name = json::Str(vm, "name");
    environment = EnvironmentOf(vm);
    deleted = DeleteVmAndWait(id, name);
  }
  CleanUpEnvironment(environment);
  return kit::DeletedResult(deleted);
}

std::string HyperstackDriver::ListResources(const std::string& /*request_json*/) {
  std::vector<kit::ResourceFields> out;
  // Environment and environment/key name -> the gpuprov VMs using them; what a VM without
  // gpuprov's label uses is not listed at all.
  std::map<std::string, std::vector<std::string>> env_users, key_users;
  std::set<std::string> foreign_envs, foreign_keys;
  for (const auto& vm : AllVms()) {
    const std::string env = EnvironmentOf(vm), key = env + "/" + KeyNameOf(vm);
    const std::string name = json::Str(vm, "name");
    if (!IsManaged(vm)) {
      foreign_envs.insert(env);
      foreign_keys.insert(key);
      continue;
    }
    env_users[env].push_back(name);
    key_users[key].push_back(name);
    kit::ResourceFields r = kit::Resource("vm", json::Str(vm, "id"), name);
    std::string labelled;
    for (const auto& [key, value] : TagsOf(vm)) {
      if (key == kit::kNameTag) labelled = value;
    }
    r.vm_names = {labelled.empty() ? name : labelled};
    for (const auto& [key, value] : TagsOf(vm)) {
      if (key == kit::kClusterTag) r.cluster = value;
      if (key == kit::kRoleTag) r.role = value;
    }
    r.region = json::Str(json::Obj(vm, "environment"), "region");
    r.created_at = json::Str(vm, "created_at");
    out.push_back(r);
  }
  for (const auto& k : ListAll("/core/keypairs", "keypairs", "list key pairs")) {
    const std::string name = json::Str(k, "name"), env = EnvironmentOf(k);
    if (name.rfind(kResourcePrefix, 0) != 0) {
      foreign_envs.insert(env);  // the user's key pair keeps its environment
      continue;
    }
    if (foreign_keys.count(env + "/" + name)) continue;
    kit::ResourceFields r = kit::Resource("key_pair", json::Str(k, "id"), name);
    r.vm_names = key_users[env + "/" + name];
    r.region = env;
    r.created_at = json::Str(k, "created_at");
    out.push_back(r);
  }
  for (const auto& e : Environments()) {
    const std::string name = json::Str(e, "name");
    // A configured environment is the user's, even when named gpuprov-*.
    if (name.rfind(kResourcePrefix, 0) != 0 || name == configured_environment_ ||
        foreign_envs.count(name)) {
      continue;
    }
    kit::ResourceFields r = kit::Resource("environment", json::Str(e, "id"), name);
    r.vm_names = env_users[name];
    r.region = json::Str(e, "region");
    r.created_at = json::Str(e, "created_at");
    out.push_back(r);
  }
  return kit::ResourcesResult(out);
}

std::string HyperstackDriver::DeleteResource(const std::string& request_json) {
  const kit::ResourceRef ref =
      kit::ParseResourceRequest(request_json, {"vm", "key_pair", "environment"});
  auto refuse = [&](const std::string& why) {
    return DriverError(GPUPROV_STATUS_INVALID_INPUT,
                       ref.kind + " " + ref.id + " " + why + "; gpuprov leaves it alone");
  };
  // Each is looked up again: only what still carries gpuprov's label or name is deleted.
  if (ref.kind == "vm") {
    ObjectPtr vm = GetVm(ref.id);
    if (!vm) return kit::DeletedResult(false);
    if (!IsManaged(vm)) throw refuse("does not carry gpuprov's label");
    return kit::DeletedResult(DeleteVmAndWait(ref.id, json::Str(vm, "name")));
  }
  std::vector<ObjectPtr> vms = AllVms();
  if (ref.kind == "key_pair") {
    for (const auto& k : ListAll("/core/keypairs", "keypairs", "list key pairs")) {
      if (json::Str(k, "id") != ref.id) continue;
      const std::string name = json::Str(k, "name"), env = EnvironmentOf(k);
      if (name.rfind(kResourcePrefix, 0) != 0) throw refuse("is not named gpuprov-*");
      for (const auto& vm : vms) {
        if (!IsManaged(vm) && EnvironmentOf(vm) == env && KeyNameOf(vm) == name) {
          throw refuse("is used by virtual machine " + json::Str(vm, "name"));
        }
      }
      host_.Progress("deleting key pair " + name + " in " + env);
      const kit::ApiAnswer a = api_->Call("DELETE", "/core/keypair/" + kit::EncodeComponent(ref.id),
                                          "delete key pair " + name, nullptr, {404});
      return kit::DeletedResult(a.status != 404);
    }
    return kit::DeletedResult(false);
  }
  for (const auto& e : Environments()) {
    if (json::Str(e, "id") != ref.id) continue;
    const std::string name = json::Str(e, "name");
    if (name.rfind(kResourcePrefix, 0) != 0 || name == configured_environment_) {
      throw refuse("is not an environment gpuprov made");
    }
    for (const auto& vm : vms) {
      if (!IsManaged(vm) && EnvironmentOf(vm) == name) {
        throw refuse("holds virtual machine " + json::Str(vm, "name"));
      }
    }
    for (const auto& k : ListAll("/core/keypairs", "keypairs", "list key pairs")) {
      if (EnvironmentOf(k) == name && json::Str(k, "name").rfind(kResourcePrefix, 0) != 0) {
        throw refuse("holds the key pair " + json::Str(k, "name"));
      }
    }
    host_.Progress("deleting environment " + name);
    const kit::ApiAnswer a =
        api_->Call("DELETE", "/core/environments/" + kit::EncodeComponent(ref.id),
                   "delete environment " + name, nullptr, {404});
    return kit::DeletedResult(a.status != 404);
  }
  return kit::DeletedResult(false);
}

std::string HyperstackDriver::OpenPorts(const std::string& request_json) {
  ObjectPtr request = json::ParseObject(request_json, "the open_ports request");
  const std::vector<int> ports = kit::PortsOf(request, "ports");
  ObjectPtr vm = Resolve(request);
  if (!vm) {
    throw DriverError(GPUPROV_STATUS_NOT_FOUND,
                      "no gpuprov virtual machine " + kit::VmReference(request) + " on Hyperstack");
  }
  const std::string id = json::Str(vm, "id");
  const kit::PortSources sources = kit::SourcesOf(request, /*ipv6_allowed=*/false);
  const std::set<int> open = OpenTcpPorts(vm);
  for (int p : kit::WithSsh(ports)) {
    if (sources.IsNarrowed(p)) {
      // Exactly allow_from: the missing sources first, then the others go.
      const RuleChange change = PlanRules(vm, p, sources);
      for (const std::string& cidr : change.add) {
        host_.Progress("adding a security rule for tcp " + std::to_string(p) + " from " + cidr +
                       " to " + json::Str(vm, "name"));
        api_->Call("POST", "/core/virtual-machines/" + kit::EncodeComponent(id) + "/sg-rules",
                   "add a security rule for port " + std::to_string(p), IngressRule(p, cidr), {409});
      }
      for (const std::string& rule_id : change.remove_ids) {
        host_.Progress("removing security rule " + rule_id + " (tcp " + std::to_string(p) +
                       ") of " + json::Str(vm, "name"));
        api_->Call("DELETE",
                   "/core/virtual-machines/" + kit::EncodeComponent(id) + "/sg-rules/" +
                       kit::EncodeComponent(rule_id),
                   "remove security rule " + rule_id, nullptr, {404});
      }
      continue;
    }
    if (open.count(p)) continue;
    host_.Progress("adding a security rule for tcp " + std::to_string(p) + " to " +
                   json::Str(vm, "name"));
    // 409: an identical rule exists already (added by an earlier, interrupted call).
    api_->Call("POST", "/core/virtual-machines/" + kit::EncodeComponent(id) + "/sg-rules",
               "add a security rule for port " + std::to_string(p), IngressRule(p), {409});
  }
  return kit::ConfirmSources("{}", sources);
}

std::string HyperstackDriver::OpenPeerPorts(const std::string& request_json) {
  const kit::PeerPortsRequest r = kit::ParsePeerPortsRequest(request_json);
  for (const kit::Peer& node : r.peers) {
    ObjectPtr vm = GetVm(node.id);
    if (!vm && !node.name.empty()) vm = FindByName(node.name);
    if (!vm || !IsManaged(vm)) {
      host_.Debug("open_peer_ports: node " + node.name + " (id " + node.id +
                  ") is gone; nothing to set on it");
      continue;
    }
    const std::string id = json::Str(vm, "id"), name = json::Str(vm, "name");
    std::vector<std::string> addresses;
    for (const kit::Peer& other : r.peers) {
      if (&other != &node && !other.address().empty()) addresses.push_back(other.address());
    }
    const PeerRuleChange change = PlanPeerRules(vm, r.peer_ports, addresses);
    const std::string rules_path =
        "/core/virtual-machines/" + kit::EncodeComponent(id) + "/sg-rules";
    for (const ObjectPtr& rule : change.add) {
      const std::string what = json::Str(rule, "protocol") + " " +
                               std::to_string(json::Int(rule, "port_range_min", 0)) + " from " +
                               json::Str(rule, "remote_ip_prefix");
      host_.Progress("adding a security rule for " + what + " to " + name + " (cluster " +
                     r.cluster + ")");
      // 409: the same rule exists (an earlier call was cut short after adding it).
      api_->Call("POST", rules_path, "add a security rule for " + what + " to " + name, rule,
                 {409});
    }
    for (const std::string& rule_id : change.remove_ids) {
      host_.Progress("removing security rule " + rule_id + " of " + name +
                     " (a node no longer in cluster " + r.cluster + ")");
      api_->Call("DELETE", rules_path + "/" + kit::EncodeComponent(rule_id),
                 "remove security rule " + rule_id + " of " + name, nullptr, {404});
    }
  }
  return "{}";
}

}  // namespace gpuprov::hyperstack

// The keys of [clouds.hyperstack] this driver reads (gpuprov refuses others in config.toml); the
// kit's standard keys first, README.md's settings table lists the same
// (driver_settings_docs_test).
constexpr gpuprov_type_config_key kHyperstackConfigKeys[] = {
    gpuprov::drivers::kRetryKey,
    gpuprov::drivers::PollIntervalKey("how often delete looks whether the VM is gone (5000)"),
    gpuprov::drivers::DeleteWaitKey("how long down waits for the VM to go (600)"),
    gpuprov::drivers::TokenEnvKey("the environment variable that holds the API key"),
    gpuprov::sdk::StringKey("token", "the API key itself (works; prefer the environment)"),
    gpuprov::sdk::StringKey("region", "the region used when provision names none (CANADA-1)"),
    gpuprov::sdk::StringKey("environment", "an existing environment to use (never deleted)"),
    gpuprov::sdk::StringKey("image", "the image name (the reference's Ubuntu CUDA image)"),
    gpuprov::sdk::StringKey("api_key_file", "a file holding the API key (~/.hyperstack/api_key)"),
    gpuprov::sdk::IntegerKey("delete_retry_ms", "retry interval of a delete refused while creating (10000)"),
    gpuprov::sdk::RenamedKey("api_key_env", gpuprov::drivers::kTokenEnvSetting),
    gpuprov::sdk::RenamedKey("api_key", "token"),
    gpuprov::sdk::RenamedKey("delete_timeout_seconds", gpuprov::drivers::kDeleteWaitSetting),
};

GPUPROV_DRIVER(gpuprov::hyperstack::HyperstackDriver, kHyperstackConfigKeys)
