// SPDX-License-Identifier: Apache-2.0
#include "docker_driver.h"

#include <Poco/Dynamic/Var.h>
#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include "driver_kit.h"
#include "test_vm.h"
#include "text.h"

#ifndef GPUPROV_TESTVM_IMAGE
#error "GPUPROV_TESTVM_IMAGE must be defined (plugins/docker/CMakeLists.txt sets it)"
#endif

namespace gpuprov::docker {
namespace {

namespace kit = gpuprov::drivers;

// What a VM powered off from inside still costs (gpuprov's TTL on the node powers it off),
// from REFERENCE.md: the test cloud costs nothing; a stopped container holds only its files.
constexpr kit::PoweredOffCost kPoweredOffCost = kit::PoweredOffCost::kNone;

using namespace gpuprov::drivers::prelude;  // DriverError, json, Array, Object

// A VM name becomes the hostname and part of the container name.
const kit::VmNameRules kVmNameRules{.what = "a hostname", .max_length = 63};

// Labels every container of this driver carries.
constexpr const char* kLabelManaged = "io.gpuprov.managed";
constexpr const char* kLabelName = "io.gpuprov.name";
constexpr const char* kLabelAddress = "io.gpuprov.address";
constexpr const char* kLabelGpus = "io.gpuprov.gpus";
constexpr const char* kLabelInstanceType = "io.gpuprov.instance-type";
constexpr const char* kLabelTagPrefix = "io.gpuprov.tag.";
// Set from [clouds.docker] scope: test runs that share one daemon see only their own VMs.
constexpr const char* kLabelScope = "io.gpuprov.scope";

constexpr const char* kRegion = "local";
constexpr const char* kContainerPrefix = "gpuprov-";
constexpr const char* kSshUser = "root";
constexpr std::array<int, 2> kPublishedPorts = {22, 6443};

constexpr const char* kBuildImageCommand = "bash tests/fixtures/testvm/build-image.sh";

// The fake GPUs of the test cloud.
constexpr std::array<const char*, 6> kGpuTypes = {"L4",        "A10G", "A100",
                                                  "A100-80GB", "H100", "H100-80GB"};
constexpr std::array<int, 4> kGpuCounts = {1, 2, 4, 8};

// The loopback block VMs get addresses from: 127.77.X.Y, Y in 1..254.
constexpr int kAddressSlots = 256 * 254;

// One call to Docker never waits longer than this for a socket read.
constexpr std::chrono::seconds kEngineTimeout{20};

struct Offer {
  std::string instance_type;
  std::string gpu_type;  // "" for CPU only
  int gpu_count = 0;
};

using gpuprov::drivers::Lower;

using gpuprov::drivers::Upper;

Offer CpuOffer() { return Offer{"testvm-cpu", "", 0}; }

Offer GpuOffer(const std::string& type, int count) {
  return Offer{"testvm-" + Lower(type) + "x" + std::to_string(count), type, count};
}

std::vector<Offer> AllOffers() {
  std::vector<Offer> all = {CpuOffer()};
  for (const char* type : kGpuTypes) {
    for (int count : kGpuCounts) all.push_back(GpuOffer(type, count));
  }
  return all;
}

// The canonical spelling of a GPU type of the test cloud ("a100-80gb" -> "A100-80GB").
std::optional<std::string> CanonicalGpuType(const std::string& type) {
  for (const char* t : kGpuTypes) {
    if (Upper(type) == t) return std::string(t);
  }
  return std::nullopt;
}

// AllOffers() as the kit's catalogue (same order; testvm-cpu the CPU default).
const kit::Catalogue& OfferCatalogue() {
  static const kit::Catalogue catalogue = [] {
    kit::Catalogue c;
    c.cloud = "the docker test cloud";
    for (const Offer& o : AllOffers()) c.rows.push_back({o.instance_type, o.gpu_type, o.gpu_count, true});
    c.cpu_default = c.rows.front();
    c.canonical_gpu = CanonicalGpuType;
    return c;
  }();
  return catalogue;
}

std::string GpuTypeList() {
  std::string s;
  for (const char* t : kGpuTypes) s += (s.empty() ? "" : ", ") + std::string(t);
  return s;
}

// --- names, addresses, seed -------------------------------------------------

uint32_t Fnv1a(const std::string& s) {
  uint32_t h = 2166136261u;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

std::string AddressOfSlot(int slot) {
  return "127.77." + std::to_string(slot / 254) + "." + std::to_string(slot % 254 + 1);
}

// The first address from the name's hash on that no gpuprov container holds.
std::string PickAddress(const std::string& name, const std::set<std::string>& used) {
  int start = static_cast<int>(Fnv1a(name) % kAddressSlots);
  for (int i = 0; i < kAddressSlots; ++i) {
    std::string a = AddressOfSlot((start + i) % kAddressSlots);
    if (used.count(a) == 0) return a;
  }
  throw DriverError(GPUPROV_STATUS_QUOTA,
                    "every address of 127.77.0.0/16 is held by a gpuprov container; "
                    "delete some VMs (gpuprov down <name>)");
}

std::string RandomHex(int digits) {
  std::random_device rd;
  std::uniform_int_distribution<int> d(0, 15);
  std::string s;
  for (int i = 0; i < digits; ++i) s += "0123456789abcdef"[d(rd)];
  return s;
}

// The archive put at / before the first start: NoCloud seed and fake GPU.
std::string SeedArchive(const std::string& container_name, const std::string& hostname,
                        const std::string& ssh_public_key, const std::string& user_data,
                        const Offer& offer) {
  TestVmSeed seed;
  seed.instance_id = container_name + "-" + RandomHex(8);
  seed.hostname = hostname;
  std::istringstream lines(ssh_public_key);
  for (std::string line; std::getline(lines, line);) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty()) seed.public_keys.push_back(line);
  }
  seed.user_data = user_data.empty() ? "#cloud-config\n{}\n" : user_data;
  seed.gpu_type = offer.gpu_type;
  seed.gpu_count = offer.gpu_count;
  return NoCloudSeedTar(seed);
}

// --- containers as VMs ------------------------------------------------------

// Every gpuprov container of the daemon, whatever its scope (addresses are shared by all).
std::vector<std::string> AnyScopeFilter() { return {std::string(kLabelManaged) + "=1"}; }

// The gpuprov containers of `scope` ("": every one).
std::vector<std::string> ManagedFilter(const std::string& scope) {
  std::vector<std::string> f = AnyScopeFilter();
  if (!scope.empty()) f.push_back(std::string(kLabelScope) + "=" + scope);
  return f;
}

std::vector<std::string> NameFilter(const std::string& scope, const std::string& name) {
  std::vector<std::string> f = ManagedFilter(scope);
  f.push_back(std::string(kLabelName) + "=" + name);
  return f;
}

std::string Label(const ContainerInfo& c, const std::string& key) {
  auto it = c.labels.find(key);
  return it == c.labels.end() ? "" : it->second;
}

// Carries gpuprov's label and, when a scope is set, that scope's.
bool IsManaged(const ContainerInfo& c, const std::string& scope) {
  return Label(c, kLabelManaged) == "1" && (scope.empty() || Label(c, kLabelScope) == scope);
}

// A scope is a Docker label value kept simple: 1-63 of [a-zA-Z0-9_.-].
void ValidateScope(const std::string& scope) {
  bool ok = !scope.empty() && scope.size() <= 63;
  for (char c : scope) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
  }
  if (!ok) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "[clouds.docker] scope \"" + scope +
                          "\" must be 1-63 letters, digits, '_', '.' or '-'");
  }
}

// "2026-12-02T10:00:00.123456789Z" -> "2026-12-02T10:00:00Z".
std::string TrimFraction(const std::string& rfc3339) {
  size_t dot = rfc3339.find('.');
  if (dot == std::string::npos) return rfc3339;
  return rfc3339.substr(0, dot) + "Z";
}

Object::Ptr VmJson(const ContainerInfo& c) {
  std::string state, message;
  if (c.status == "created" || c.status == "restarting") {
    state = "pending";
  } else if (c.status == "running") {
    state = "running";
  } else if (c.status == "exited" || c.status == "paused") {
    state = "stopped";
    if (c.status == "exited") message = "exited with code " + std::to_string(c.exit_code);
  } else if (c.status == "removing") {
    state = "terminated";
  } else {
    state = "error";
    message = "container is " + c.status;
  }
  if (!c.error.empty()) {
    state = "error";
    message = c.error;
  }
  kit::VmFields vm;
  vm.id = c.id;
  vm.name = Label(c, kLabelName);
  vm.state = state;
  vm.public_ip = Label(c, kLabelAddress);
  vm.ssh_user = kSshUser;
  vm.region = kRegion;
  vm.instance_type = Label(c, kLabelInstanceType);
  vm.image = c.image;
  vm.gpus = Label(c, kLabelGpus);
  vm.created_at = TrimFraction(c.created);
  vm.message = message;
  vm.published_ports.emplace();
  for (const auto& b : c.port_bindings) {
    if (b.protocol != "tcp" || b.host_port.empty()) continue;
    try {
      vm.published_ports->emplace_back(b.container_port, std::stoi(b.host_port));
    } catch (const std::exception&) {
    }
  }
  vm.tags.emplace();
  const std::string prefix = kLabelTagPrefix;
  for (const auto& [k, v] : c.labels) {
    if (k.compare(0, prefix.size(), prefix) == 0) vm.tags->emplace_back(k.substr(prefix.size()), v);
  }
  vm.extra = {{"container", c.name}};
  return kit::VmJson(vm);
}

std::string VmResult(const ContainerInfo& c, std::optional<bool> existing = std::nullopt) {
  Object result(Poco::JSON_PRESERVE_KEY_ORDER);
  result.set("vm", VmJson(c));
  if (existing) result.set("existing", *existing);
  return json::Stringify(result);
}

// The gpuprov container of `scope` labelled with this VM name; nullopt when none.
std::optional<ContainerInfo> FindByName(const Engine& engine, const std::string& scope,
                                        const std::string& name) {
  for (const auto& s : engine.ListContainers(NameFilter(scope, name))) {
    auto it = s.labels.find(kLabelName);
    if (it == s.labels.end() || it->second != name) continue;  // exact, whatever the filter did
    if (auto info = engine.InspectContainer(s.id); info && IsManaged(*info, scope)) return info;
  }
  return std::nullopt;
}

// The gpuprov container a get/delete request names by "id" or, failing that, "name".
std::optional<ContainerInfo> Resolve(const Engine& engine, const std::string& scope,
                                     const Object::Ptr& request) {
  const auto [id, name] = kit::RequireIdOrName(request);
  if (!id.empty()) {
    auto info = engine.InspectContainer(id);
    if (info && IsManaged(*info, scope) && (name.empty() || Label(*info, kLabelName) == name)) {
      return info;
    }
  }
  if (!name.empty()) return FindByName(engine, scope, name);
  return std::nullopt;
}

// Turns Engine errors into the status the host should see.
template <class Fn>
auto Translate(const std::string& what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const EngineError& e) {
    gpuprov_type_status status = GPUPROV_STATUS_FAILED;
    switch (e.kind()) {
      case EngineError::Kind::kConfig:
        status = GPUPROV_STATUS_INVALID_INPUT;
        break;
      case EngineError::Kind::kDenied:
        status = GPUPROV_STATUS_AUTH;
        break;
      case EngineError::Kind::kHttp:
        status = kit::StatusOfHttp(e.http_status());
        break;
      default:
        break;
    }
    throw DriverError(status, what + ": " + e.what());
  }
}

}  // namespace

DockerDriver::DockerDriver(const gpuprov::sdk::InitContext& ctx)
    : host_(ctx.host), default_image_(GPUPROV_TESTVM_IMAGE) {
  kit::DriverSettings settings = kit::ParseSettings(ctx.config_json);
  endpoint_ = settings.endpoint;
  const std::string image = json::Str(settings.config, "image");
  if (!image.empty()) default_image_ = image;
  if (json::Has(settings.config, "scope")) {
    scope_ = json::Str(settings.config, "scope");
    ValidateScope(scope_);
  }
}

Engine DockerDriver::MakeEngine() const {
  return Translate("docker", [&] {
    if (!endpoint_.empty()) return Engine(SocketPathFromDockerHost(endpoint_), kEngineTimeout);
    return Engine::FromEnvironment(kEngineTimeout);
  });
}

std::string DockerDriver::Check(const std::string& /*request_json*/) {
  return Translate("check", [&] {
    Engine engine = MakeEngine();
    std::string api = engine.Ping();
    // "1.41" compares as (major, minor).
    int major = 0, minor = 0;
    std::sscanf(api.c_str(), "%d.%d", &major, &minor);
    if (major < 1 || (major == 1 && minor < 41)) {
      throw DriverError(GPUPROV_STATUS_FAILED,
                        "the Docker daemon at " + engine.socket_path() + " speaks API " + api +
                            "; gpuprov needs API 1.41 (Docker 20.10) or newer");
    }
    VersionInfo v = engine.Version();
    host_.Debug("docker: daemon " + v.version + " (API " + api + ") at " + engine.socket_path());
    bool built = engine.ImageExists(default_image_);
    if (!built) {
      host_.Info("docker: image " + default_image_ + " is not built yet" +
                 (default_image_.rfind("gpuprov-testvm:", 0) == 0
                      ? std::string("; run: ") + kBuildImageCommand
                      : std::string()));
    }
    Object result(Poco::JSON_PRESERVE_KEY_ORDER);
    result.set("account", "docker " + v.version + " at " + engine.socket_path());
    result.set("image", default_image_);
    result.set("image_built", built);
    result.set("credentials_from", engine.socket_path());  // no credentials: the socket's access
    return json::Stringify(result);
  });
}

std::string DockerDriver::Offers(const std::string& request_json) {
  const auto [gpu, region] = kit::ParseOffersRequest(request_json, "");
  Array::Ptr offers = new Array();
  std::optional<size_t> row = gpu ? kit::FindGpuRow(OfferCatalogue(), gpu->type, gpu->count)
                                  : std::optional<size_t>(0);
  if (!region.empty() && region != kRegion) {
    host_.Debug("docker: no offers in region " + region + " (the test cloud has only " + kRegion +
                ")");
  } else if (!row) {
    host_.Debug("docker: " + kit::NotOfferedMessage(OfferCatalogue(), gpu->type, gpu->count));
  } else {
    const kit::CatalogueRow& o = OfferCatalogue().rows[*row];
    offers->add(kit::OfferJson({o.instance_type, o.gpu_type, o.gpu_count, kRegion, 0.0, ""}));
  }
  return kit::OffersResult(offers, kPoweredOffCost);
}

std::string DockerDriver::Create(const std::string& request_json) {
  // Named references, not a structured binding: the lambdas below capture them, which clang
  // before 16 refuses for a binding (C++20 P1091).
  const kit::CreateBasics basics = kit::ParseCreateRequest(request_json, kVmNameRules);
  const Poco::JSON::Object::Ptr& request = basics.request;
  const std::string& name = basics.name;
  const std::string& user_data = basics.user_data;
  const std::string region = json::Str(request, "region");
  if (!region.empty() && region != kRegion) {
    throw DriverError(
        GPUPROV_STATUS_INVALID_INPUT,
        "region " + region + " does not exist in the docker test cloud; use " + kRegion);
  }

  // The offer: from gpu (instance_type must agree), else instance_type, else testvm-cpu; the
  // test cloud has no type the table does not list.
  const std::string instance_type = json::Str(request, "instance_type");
  const kit::CatalogueChoice choice =
      kit::ChooseInstanceType(OfferCatalogue(), kit::ParseGpu(request), Lower(instance_type));
  if (!choice.index && !choice.cpu_default) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "instance type " + instance_type +
                          " does not exist in the docker test cloud; use testvm-cpu or "
                          "testvm-<gpu>x<count> (GPU types: " +
                          GpuTypeList() + "; counts 1, 2, 4, 8)");
  }
  const std::optional<Offer> offer =
      Offer{choice.row.instance_type, choice.row.gpu_type, choice.row.gpu_count};

  std::map<std::string, std::string> tag_labels;
  if (Object::Ptr tags = json::Obj(request, "tags")) {
    for (const auto& [k, v] : *tags) {
      if (k.empty()) throw DriverError(GPUPROV_STATUS_INVALID_INPUT, "a tag has an empty key");
      tag_labels[kLabelTagPrefix + k] = v.isEmpty() ? "" : v.convert<std::string>();
    }
  }
  const std::string ssh_public_key = json::Str(request, "ssh_public_key");
  const std::string container_name = kContainerPrefix + name;

  return Translate("create " + name, [&]() -> std::string {
    Engine engine = MakeEngine();

    // Idempotent by name: the container labelled with this name is the VM.
    if (std::optional<ContainerInfo> found = FindByName(engine, scope_, name)) {
      host_.Info("docker: VM " + name + " exists as container " + found->name + " (" +
                 found->status + ")");
      if (found->status == "created") {
        // Never started: (re)seed, as a run that stopped before start may have left it bare.
        engine.PutArchive(found->id, "/",
                          SeedArchive(found->name, name, ssh_public_key, user_data, *offer));
      }
      if (!found->running) {
        host_.Progress("starting container " + found->name);
        engine.StartContainer(found->id);
        found = engine.InspectContainer(found->id);
        if (!found) {
          throw DriverError(GPUPROV_STATUS_FAILED,
                            "container " + container_name + " vanished while starting it");
        }
      }
      return VmResult(*found, true);
    }

    std::string image = json::Str(request, "image");
    const bool default_image = image.empty();
    if (default_image) image = default_image_;
    if (!engine.ImageExists(image)) {
      // The test image of this tree (or another recipe's) is built, never pulled.
      if (default_image && image.rfind("gpuprov-testvm:", 0) == 0) {
        throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                          "image " + image + " is not built; run: " + kBuildImageCommand);
      }
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "image " + image +
                            " does not exist in the local Docker (the test cloud "
                            "pulls nothing); build or import it first");
    }

    std::set<std::string> used;
    for (const auto& s : engine.ListContainers(AnyScopeFilter())) {
      auto it = s.labels.find(kLabelAddress);
      if (it != s.labels.end()) used.insert(it->second);
    }
    const std::string address = PickAddress(name, used);

    TestVmSpec vm;
    vm.name = container_name;
    vm.image = image;
    vm.hostname = name;
    for (int port : kPublishedPorts) {
      vm.ports.push_back(PortBinding{port, "tcp", address, std::to_string(port)});
    }
    vm.labels = tag_labels;
    vm.labels[kLabelManaged] = "1";
    vm.labels[kLabelName] = name;
    vm.labels[kLabelAddress] = address;
    vm.labels[kLabelGpus] =
        offer->gpu_count > 0 ? offer->gpu_type + ":" + std::to_string(offer->gpu_count) : "";
    vm.labels[kLabelInstanceType] = offer->instance_type;
    if (!scope_.empty()) vm.labels[kLabelScope] = scope_;
    const ContainerSpec spec = TestVmContainer(vm);

    host_.Progress("creating container " + container_name + " (" + image + ", " + address + ")");
    std::string id;
    try {
      id = engine.CreateContainer(spec);
    } catch (const EngineError& e) {
      if (e.kind() != EngineError::Kind::kHttp || e.http_status() != 409) throw;
      // A parallel create of the same name won, or the name belongs to someone else.
      if (std::optional<ContainerInfo> found = FindByName(engine, scope_, name)) {
        return VmResult(*found, true);
      }
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "a container named " + container_name +
                            " exists that gpuprov did not create; remove it (docker rm -f " +
                            container_name + ") or choose another VM name");
    }
    host_.Debug("docker: created container " + id.substr(0, 12) + " for VM " + name);

    // A VM that did not boot is removed, so the next run starts clean.
    try {
      engine.PutArchive(id, "/",
                        SeedArchive(container_name, name, ssh_public_key, user_data, *offer));
      host_.Progress("starting container " + container_name);
      engine.StartContainer(id);
    } catch (...) {
      try {
        engine.RemoveContainer(id);
      } catch (const std::exception& e) {
        host_.Warning("docker: could not remove the failed container " + container_name + ": " +
                      e.what());
      }
      throw;
    }
    std::optional<ContainerInfo> info = engine.InspectContainer(id);
    if (!info) {
      throw DriverError(GPUPROV_STATUS_FAILED,
                        "container " + container_name + " vanished right after it started");
    }
    host_.Info("docker: VM " + name + " is container " + container_name + " at " + address);
    return VmResult(*info, false);
  });
}

std::string DockerDriver::Get(const std::string& request_json) {
  Object::Ptr request = json::ParseObject(request_json, "the request");
  return Translate("get", [&] {
    Engine engine = MakeEngine();
    std::optional<ContainerInfo> info = Resolve(engine, scope_, request);
    if (!info) {
      throw DriverError(GPUPROV_STATUS_NOT_FOUND,
                        "no docker test VM " + kit::VmReference(request) +
                            " (list them with: docker ps -a --filter label=" + kLabelManaged +
                            "=1)");
    }
    return VmResult(*info);
  });
}

std::string DockerDriver::List(const std::string& /*request_json*/) {
  return Translate("list", [&] {
    Engine engine = MakeEngine();
    Array::Ptr vms = new Array();
    for (const auto& s : engine.ListContainers(ManagedFilter(scope_))) {
      // A container removed between the two calls is skipped.
      if (std::optional<ContainerInfo> info = engine.InspectContainer(s.id)) {
        if (IsManaged(*info, scope_)) vms->add(VmJson(*info));
      }
    }
    return kit::VmsResult(vms);
  });
}

std::string DockerDriver::Delete(const std::string& request_json) {
  Object::Ptr request = json::ParseObject(request_json, "the request");
  return Translate("delete", [&] {
    Engine engine = MakeEngine();
    std::optional<ContainerInfo> info = Resolve(engine, scope_, request);
    bool deleted = false;
    if (info) {
      host_.Progress("removing container " + info->name);
      deleted = engine.RemoveContainer(info->id);
    } else {
      host_.Debug("docker: nothing to delete for " + request_json);
    }
    return kit::DeletedResult(deleted);
  });
}

std::string DockerDriver::ListResources(const std::string& /*request_json*/) {
  return Translate("list resources", [&] {
    Engine engine = MakeEngine();
    // A VM is its container and nothing else: no key, firewall or disk is made for it.
    std::vector<kit::ResourceFields> out;
    std::vector<ContainerSummary> containers;
    try {
      containers = engine.ListContainers(ManagedFilter(scope_));
    } catch (const EngineError& e) {
      // No daemon socket at all (Docker not installed or never started): no container can
      // exist, so a sweep of every cloud finds nothing here rather than failing.
      std::error_code ec;
      if (e.kind() != EngineError::Kind::kUnreachable ||
          std::filesystem::exists(engine.socket_path(), ec)) {
        throw;
      }
      host_.Info("docker: no Docker daemon socket at " + engine.socket_path() +
                 ", so no test VM to sweep");
      return kit::ResourcesResult(out);
    }
    for (const auto& s : containers) {
      std::optional<ContainerInfo> info = engine.InspectContainer(s.id);
      if (!info || !IsManaged(*info, scope_)) continue;  // removed meanwhile, or not ours
      const std::string vm_name = Label(*info, kLabelName);
      kit::ResourceFields r = kit::Resource("vm", info->id, info->name);
      if (!vm_name.empty()) r.vm_names = {vm_name};
      r.region = kRegion;
      r.created_at = TrimFraction(info->created);
      r.price_per_hour = 0.0;  // the test cloud's offers cost nothing
      out.push_back(r);
    }
    return kit::ResourcesResult(out);
  });
}

std::string DockerDriver::DeleteResource(const std::string& request_json) {
  const kit::ResourceRef ref = kit::ParseResourceRequest(request_json, {"vm"});
  return Translate("delete container " + ref.id, [&] {
    Engine engine = MakeEngine();
    // Inspected again: only a container that still carries gpuprov's labels is removed.
    std::optional<ContainerInfo> info = engine.InspectContainer(ref.id);
    if (!info) return kit::DeletedResult(false);
    if (!IsManaged(*info, scope_)) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "container " + info->name + " (" + ref.id.substr(0, 12) +
                            ") does not carry gpuprov's label " + kLabelManaged + "=1" +
                            (scope_.empty() ? "" : " and " + std::string(kLabelScope) + "=" + scope_) +
                            "; gpuprov leaves it alone");
    }
    host_.Progress("removing container " + info->name);
    return kit::DeletedResult(engine.RemoveContainer(info->id));
  });
}

}  // namespace gpuprov::docker

// The keys of [clouds.docker] this driver reads (ABI 1.1: gpuprov refuses others).
constexpr gpuprov_type_config_key kDockerConfigKeys[] = {
    gpuprov::sdk::StringKey("image", "the test VM image used when the request names none"),
    gpuprov::sdk::StringKey("scope", "only containers labelled with this scope are this cloud's "
                                     "(test runs sharing one Docker daemon)"),
};

GPUPROV_DRIVER(gpuprov::docker::DockerDriver, kDockerConfigKeys)
