#include "cloud.h"

#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

#include "config.h"
#include "console.h"
#include "driver_settings.h"
#include "gzip.h"
#include "interrupt.h"

namespace gpuprov {
namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;

std::string ToJson(const Object::Ptr& obj) {
  std::ostringstream out;
  obj->stringify(out);
  return out.str();
}

Object::Ptr ParseObject(const std::string& json, const std::string& what) {
  try {
    Poco::JSON::Parser parser;
    auto result = parser.parse(json).extract<Object::Ptr>();
    if (result.isNull()) throw Error("driver returned no object for " + what);
    return result;
  } catch (const Poco::Exception& e) {
    throw Error("driver returned invalid JSON for " + what + ": " + e.displayText(),
                "this is a bug in the driver; report it with `gpuprov -v` output");
  }
}

std::string Str(const Object::Ptr& o, const std::string& key) {
  if (o.isNull() || !o->has(key) || o->isNull(key)) return "";
  return o->getValue<std::string>(key);
}

CloudVm ParseVm(const Object::Ptr& o) {
  CloudVm vm;
  vm.id = Str(o, "id");
  vm.name = Str(o, "name");
  vm.state = Str(o, "state");
  vm.public_ip = Str(o, "public_ip");
  if (o->has("ssh_port") && !o->isNull("ssh_port")) vm.ssh_port = o->getValue<int>("ssh_port");
  vm.ssh_user = Str(o, "ssh_user");
  vm.region = Str(o, "region");
  vm.instance_type = Str(o, "instance_type");
  vm.message = Str(o, "message");
  vm.spot = o->has("spot") && o->get("spot").isBoolean() && o->getValue<bool>("spot");
  vm.private_ip = Str(o, "private_ip");
  vm.cluster = Str(o, "cluster");
  vm.role = Str(o, "role");
  if (auto ports = o->getObject("ports"); !ports.isNull()) {
    for (const auto& [k, v] : *ports) vm.ports[std::stoi(k)] = v.convert<int>();
  }
  return vm;
}

Array::Ptr PeerPortsJson(const std::vector<PeerPort>& ports) {
  Array::Ptr out = new Array;
  for (const PeerPort& p : ports) {
    Object::Ptr one = new Object;
    one->set("port", p.port);
    one->set("protocol", p.protocol);
    out->add(one);
  }
  return out;
}

void SetSources(Object& req, const PortSources& sources) {
  Array::Ptr cidrs = new Array;
  for (const auto& c : sources.allow_from) cidrs->add(c);
  req.set("allow_from", cidrs);
  Array::Ptr ports = new Array;
  for (int p : sources.narrowed_ports) ports->add(p);
  req.set("allow_from_ports", ports);
}

/// A driver confirms a narrowing by echoing "allow_from" in its result; one that ignored the
/// field (an older driver) left the ports open to everyone, which must not pass silently.
void RequireConfirmed(const Object& result, const PortSources& sources, const std::string& cloud,
                      const std::string& op) {
  std::vector<std::string> echoed;
  if (Array::Ptr a = result.getArray("allow_from"); !a.isNull()) {
    for (size_t i = 0; i < a->size(); ++i) echoed.push_back(a->getElement<std::string>(i));
  }
  std::vector<std::string> want = sources.allow_from;
  std::sort(echoed.begin(), echoed.end());
  std::sort(want.begin(), want.end());
  if (echoed != want) {
    throw Error("the " + cloud + " driver's " + op + " did not confirm allow_from: ports of the "
                "VM may be open to 0.0.0.0/0 instead of only the --allow-from sources",
                "the VM is kept: `gpuprov down NAME` removes it; drop --allow-from (and "
                "allow_from in config.toml or the spec) to use this driver, or update it");
  }
}

}  // namespace

std::string EndpointEnvVar(const std::string& cloud) {
  std::string upper = cloud;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return c == '-' ? '_' : std::toupper(c); });
  return "GPUPROV_" + upper + "_ENDPOINT";
}

std::string DriverConfigJson(const std::string& cloud, const Config& config) {
  Poco::JSON::Parser parser;
  Object::Ptr settings =
      parser.parse(CloudSettingsJson(config, cloud)).extract<Object::Ptr>();
  std::string endpoint = Str(settings, "endpoint");
  if (const char* env = std::getenv(EndpointEnvVar(cloud).c_str()); env && *env) {
    endpoint = env;
  }
  Object::Ptr root = new Object;
  root->set("endpoint", endpoint);
  root->set("config", settings);
  if (!config.pacer_dir.empty()) root->set("pacer_dir", config.pacer_dir);
  return ToJson(root);
}

std::unique_ptr<Cloud> Cloud::Open(const DriverHost& host, const std::string& cloud,
                                   const Config& config) {
  return Open(host.Load(cloud), config);
}

std::unique_ptr<Cloud> Cloud::Open(const LoadedDriver& driver, const Config& config) {
  return Open(driver, config, nullptr);
}

std::unique_ptr<Cloud> Cloud::Open(const LoadedDriver& driver, const Config& config,
                                   std::function<bool()> stop) {
  const std::string& cloud = driver.info().name;
  const CheckedCloudSettings checked = CheckCloudSettings(config, driver.info());
  for (const std::string& warning : checked.warnings) Console::Get().Warning(warning);
  DriverCallbacks callbacks;
  callbacks.log = [cloud](gpuprov_type_log_level level, const std::string& msg) {
    Console& c = Console::Get();
    if (level >= GPUPROV_LOG_WARNING) {
      c.Warning(cloud + ": " + msg);
    } else {
      c.Debug(cloud + ": " + msg);
    }
  };
  callbacks.progress = [](const std::string& msg) { Console::Get().Info(msg); };
  callbacks.cancelled = [stop = std::move(stop)] { return Interrupted() || (stop && stop()); };
  return std::make_unique<Cloud>(
      DriverHost::Open(driver, DriverConfigJson(cloud, checked.config), callbacks));
}

Cloud::Cloud(std::unique_ptr<Driver> driver) : driver_(std::move(driver)) {}

std::size_t UserDataLimit::SizeOf(const std::string& script) const {
  return gzip ? Gzip(script).size() : script.size();
}

std::string UserDataLimit::Describe() const {
  return std::to_string(bytes) + "-byte" + (gzip ? " (gzipped)" : "");
}

CloudCheck Cloud::Check() {
  Object::Ptr r = ParseObject(driver_->Call(DriverOp::kCheck, "{}"), "check");
  CloudCheck check;
  check.account = Str(r, "account");
  for (const char* key : {"credentials_from", "token_from", "key_from", "key_source"}) {
    if (r->has(key) && r->get(key).isString() && !r->getValue<std::string>(key).empty()) {
      check.credentials_from = r->getValue<std::string>(key);
      break;
    }
  }
  if (r->has("user_data_limit") && r->get("user_data_limit").isNumeric()) {
    const double limit = r->getValue<double>("user_data_limit");
    if (limit > 0) check.user_data_limit.bytes = static_cast<std::size_t>(limit);
  }
  check.user_data_limit.gzip = r->has("user_data_gzip") && r->get("user_data_gzip").isBoolean() &&
                               r->getValue<bool>("user_data_gzip");
  check.honours_allow_from = r->has("allow_from") && r->get("allow_from").isBoolean() &&
                             r->getValue<bool>("allow_from");
  if (r->has("max_cluster_nodes") && r->get("max_cluster_nodes").isNumeric()) {
    const double nodes = r->getValue<double>("max_cluster_nodes");
    if (nodes >= 1 && nodes <= 1e6) check.max_cluster_nodes = static_cast<int>(nodes);
  }
  check.private_network_unfiltered = r->has("private_network_unfiltered") &&
                                     r->get("private_network_unfiltered").isBoolean() &&
                                     r->getValue<bool>("private_network_unfiltered");
  return check;
}

std::vector<CloudOffer> Cloud::Offers(const std::optional<GpuRequest>& gpu,
                                      const std::string& region, bool kubernetes) {
  Object::Ptr req = new Object;
  if (gpu) {
    Object::Ptr g = new Object;
    g->set("type", gpu->type);
    g->set("count", gpu->count);
    req->set("gpu", g);
  } else {
    req->set("gpu", Poco::Dynamic::Var());
  }
  req->set("region", region);
  req->set("kubernetes", kubernetes);
  Object::Ptr r = ParseObject(driver_->Call(DriverOp::kOffers, ToJson(req)), "offers");
  std::vector<CloudOffer> out;
  const std::string powered_off = Str(r, "powered_off_cost");
  if (auto arr = r->getArray("offers"); !arr.isNull()) {
    for (size_t i = 0; i < arr->size(); ++i) {
      Object::Ptr o = arr->getObject(i);
      CloudOffer offer;
      offer.instance_type = Str(o, "instance_type");
      offer.gpu_type = Str(o, "gpu_type");
      if (o->has("gpu_count") && !o->isNull("gpu_count")) offer.gpu_count = o->getValue<int>("gpu_count");
      offer.region = Str(o, "region");
      if (o->has("price_per_hour") && !o->isNull("price_per_hour")) {
        offer.price_per_hour = o->getValue<double>("price_per_hour");
      }
      if (o->has("price_source") && o->get("price_source").isString()) {
        offer.price_source = o->getValue<std::string>("price_source");
      }
      if (o->has("price_date") && o->get("price_date").isString()) {
        offer.price_date = o->getValue<std::string>("price_date");
      }
      if (o->has("gpu_memory_gb") && o->get("gpu_memory_gb").isNumeric() &&
          o->getValue<int>("gpu_memory_gb") > 0) {
        offer.gpu_memory_gb = o->getValue<int>("gpu_memory_gb");
      }
      if (o->has("in_stock") && o->get("in_stock").isBoolean()) {
        offer.in_stock = o->getValue<bool>("in_stock");
      }
      if (o->has("spot_price_per_hour") && o->get("spot_price_per_hour").isNumeric()) {
        offer.spot_price_per_hour = o->getValue<double>("spot_price_per_hour");
      }
      if (powered_off == "none" || powered_off == "disk" || powered_off == "full") {
        offer.powered_off_cost = powered_off;
      }
      out.push_back(offer);
    }
  }
  return out;
}

std::pair<CloudVm, bool> Cloud::Create(const CreateRequest& request) {
  Object::Ptr req = new Object;
  req->set("name", request.name);
  req->set("region", request.region);
  req->set("instance_type", request.instance_type);
  if (request.gpu) {
    Object::Ptr g = new Object;
    g->set("type", request.gpu->type);
    g->set("count", request.gpu->count);
    req->set("gpu", g);
  } else {
    req->set("gpu", Poco::Dynamic::Var());
  }
  req->set("image", request.image);
  req->set("ssh_public_key", request.ssh_public_key);
  req->set("user_data", request.user_data);
  Object::Ptr tags = new Object;
  for (const auto& [k, v] : request.tags) tags->set(k, v);
  req->set("tags", tags);
  Array::Ptr ports = new Array;
  for (int p : request.open_ports) ports->add(p);
  req->set("open_ports", ports);
  if (request.disk_gb) req->set("disk_gb", *request.disk_gb);
  req->set("kubernetes", request.kubernetes);
  if (request.spot) req->set("spot", true);
  if (request.sources.narrows()) SetSources(*req, request.sources);
  if (request.cluster) {
    Object::Ptr c = new Object;
    c->set("name", request.cluster->name);
    c->set("role", request.cluster->role);
    c->set("peer_ports", PeerPortsJson(request.cluster->peer_ports));
    req->set("cluster", c);
  }
  Object::Ptr r = ParseObject(driver_->Call(DriverOp::kCreate, ToJson(req)), "create");
  Object::Ptr vm = r->getObject("vm");
  if (vm.isNull()) throw Error("driver " + name() + " returned no VM from create");
  bool existing = r->has("existing") && r->getValue<bool>("existing");
  // An existing VM is returned as it is; open_ports narrows it (vm_ports.h).
  if (!existing && request.sources.narrows()) {
    RequireConfirmed(*r, request.sources, name(), "create");
  }
  return {ParseVm(vm), existing};
}

void Cloud::OpenPeerPorts(const std::string& cluster, const std::vector<PeerPort>& ports,
                          const std::vector<ClusterPeer>& peers) {
  Object::Ptr req = new Object;
  req->set("cluster", cluster);
  req->set("peer_ports", PeerPortsJson(ports));
  Array::Ptr list = new Array;
  for (const ClusterPeer& p : peers) {
    Object::Ptr one = new Object;
    one->set("id", p.id);
    one->set("name", p.name);
    one->set("private_ip", p.private_ip);
    one->set("public_ip", p.public_ip);
    list->add(one);
  }
  req->set("peers", list);
  ParseObject(driver_->Call(DriverOp::kOpenPeerPorts, ToJson(req)), "open_peer_ports");
}

std::optional<CloudVm> Cloud::Get(const std::string& id, const std::string& vm_name) {
  Object::Ptr req = new Object;
  if (!id.empty()) req->set("id", id);
  if (!vm_name.empty()) req->set("name", vm_name);
  try {
    Object::Ptr r = ParseObject(driver_->Call(DriverOp::kGet, ToJson(req)), "get");
    Object::Ptr vm = r->getObject("vm");
    if (vm.isNull()) return std::nullopt;
    return ParseVm(vm);
  } catch (const DriverCallError& e) {
    if (e.status() == GPUPROV_STATUS_NOT_FOUND) return std::nullopt;
    throw;
  }
}

std::vector<CloudVm> Cloud::List() {
  Object::Ptr r = ParseObject(driver_->Call(DriverOp::kList, "{}"), "list");
  std::vector<CloudVm> out;
  if (auto arr = r->getArray("vms"); !arr.isNull()) {
    for (size_t i = 0; i < arr->size(); ++i) out.push_back(ParseVm(arr->getObject(i)));
  }
  return out;
}

bool Cloud::Delete(const std::string& id, const std::string& vm_name) {
  Object::Ptr req = new Object;
  req->set("id", id);
  req->set("name", vm_name);
  Object::Ptr r = ParseObject(driver_->Call(DriverOp::kDelete, ToJson(req)), "delete_vm");
  return r->has("deleted") && r->getValue<bool>("deleted");
}

void Cloud::OpenPorts(const std::string& id, const std::string& vm_name,
                      const std::vector<int>& ports, const PortSources& sources) {
  Object::Ptr req = new Object;
  req->set("id", id);
  req->set("name", vm_name);
  Array::Ptr list = new Array;
  for (int p : ports) list->add(p);
  req->set("ports", list);
  if (sources.narrows()) SetSources(*req, sources);
  Object::Ptr r = ParseObject(driver_->Call(DriverOp::kOpenPorts, ToJson(req)), "open_ports");
  if (sources.narrows()) RequireConfirmed(*r, sources, name(), "open_ports");
}

std::vector<CloudResource> Cloud::ListResources() {
  Object::Ptr r = ParseObject(driver_->Call(DriverOp::kListResources, "{}"), "list_resources");
  std::vector<CloudResource> out;
  Array::Ptr arr = r->getArray("resources");
  if (arr.isNull()) {
    throw Error("driver " + name() + " returned no resources array from list_resources",
                "this is a bug in the driver; report it with `gpuprov -v` output");
  }
  for (size_t i = 0; i < arr->size(); ++i) {
    Object::Ptr o = arr->getObject(static_cast<unsigned>(i));
    if (o.isNull()) continue;
    CloudResource res;
    res.kind = Str(o, "kind");
    res.id = Str(o, "id");
    res.name = Str(o, "name");
    res.region = Str(o, "region");
    res.created_at = Str(o, "created_at");
    if (res.kind.empty() || res.id.empty()) {
      throw Error("driver " + name() + " listed a resource without kind or id",
                  "this is a bug in the driver; report it with `gpuprov -v` output");
    }
    if (Array::Ptr names = o->getArray("vm_names"); !names.isNull()) {
      for (size_t j = 0; j < names->size(); ++j) {
        std::string vm = names->get(static_cast<unsigned>(j)).toString();
        if (!vm.empty()) res.vm_names.push_back(vm);
      }
      // Sorted: a cloud lists them in the order they were attached (a cluster's nodes are made
      // at once), and gc's table and JSON should not change with it.
      std::sort(res.vm_names.begin(), res.vm_names.end());
    }
    if (o->has("price_per_hour") && o->get("price_per_hour").isNumeric()) {
      res.price_per_hour = o->getValue<double>("price_per_hour");
    }
    res.cluster = Str(o, "cluster");
    res.role = Str(o, "role");
    out.push_back(res);
  }
  return out;
}

bool Cloud::DeleteResource(const std::string& kind, const std::string& id) {
  Object::Ptr req = new Object;
  req->set("kind", kind);
  req->set("id", id);
  try {
    Object::Ptr r =
        ParseObject(driver_->Call(DriverOp::kDeleteResource, ToJson(req)), "delete_resource");
    return r->has("deleted") && r->getValue<bool>("deleted");
  } catch (const DriverCallError& e) {
    if (e.status() == GPUPROV_STATUS_NOT_FOUND) return false;
    throw;
  }
}

}  // namespace gpuprov
