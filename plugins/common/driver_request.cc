// SPDX-License-Identifier: Apache-2.0
#include "driver_request.h"

#include <Poco/JSON/Array.h>

#include <algorithm>
#include <regex>

#include "credentials.h"
#include "json_util.h"

namespace gpuprov::drivers {

using gpuprov::sdk::DriverError;
using Poco::JSON::Array;
using Poco::JSON::Object;

std::vector<int> PortsOf(const Object::Ptr& request, const std::string& key) {
  std::vector<int> ports;
  Array::Ptr a = json::Arr(request, key);
  if (!a) return ports;
  for (size_t i = 0; i < a->size(); ++i) {
    int p = 0;
    try {
      p = a->get(static_cast<unsigned>(i)).convert<int>();
    } catch (...) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT, key + " must be a list of port numbers");
    }
    if (p < 1 || p > 65535) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        key + ": " + std::to_string(p) + " is not a TCP port");
    }
    ports.push_back(p);
  }
  return ports;
}

std::vector<std::string> PortSources::Of(int port, bool with_ipv6) const {
  if (!IsNarrowed(port)) {
    if (with_ipv6) return {"0.0.0.0/0", "::/0"};
    return {"0.0.0.0/0"};
  }
  std::vector<std::string> out;
  for (const auto& c : allow_from) {
    if (with_ipv6 || c.find(':') == std::string::npos) out.push_back(c);
  }
  return out;
}

bool IsEveryone(const std::string& cidr) { return cidr == "0.0.0.0/0" || cidr == "::/0"; }

PortSources SourcesOf(const Object::Ptr& request, bool ipv6_allowed) {
  PortSources sources;
  Array::Ptr cidrs = request ? request->getArray("allow_from") : nullptr;
  for (size_t i = 0; cidrs && i < cidrs->size(); ++i) {
    const Poco::Dynamic::Var v = cidrs->get(static_cast<unsigned>(i));
    const std::string text = v.isString() ? v.extract<std::string>() : std::string();
    // Canonical form only (the host sends it so): address, '/', prefix length; the address's
    // own syntax is left to the cloud, which rejects a malformed one naming it.
    static const std::regex v4(R"((\d{1,3}\.){3}\d{1,3}/(\d|[12]\d|3[0-2]))");
    static const std::regex v6(R"([0-9a-f:]*:[0-9a-f:]*/(\d|[1-9]\d|1[01]\d|12[0-8]))");
    const bool is_v6 = std::regex_match(text, v6);
    if (!std::regex_match(text, v4) && !is_v6) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "allow_from[" + std::to_string(i) + "] is not a CIDR such as 10.0.0.0/8");
    }
    if (is_v6 && !ipv6_allowed) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "allow_from: " + text + " is IPv6, and this cloud's rules take IPv4 "
                        "sources only; give IPv4 CIDRs with --allow-from");
    }
    sources.allow_from.push_back(text);
  }
  for (int p : PortsOf(request, "allow_from_ports")) sources.narrowed.insert(p);
  return sources;
}

std::string ConfirmSources(const std::string& result_json, const PortSources& sources) {
  if (!sources.Narrows()) return result_json;
  Object::Ptr result = json::ParseObject(result_json, "the result");
  Array::Ptr echoed = new Array();
  for (const auto& c : sources.allow_from) echoed->add(c);
  result->set("allow_from", echoed);
  return json::Stringify(result);
}

std::vector<int> WithSsh(std::vector<int> ports) {
  ports.push_back(22);
  std::sort(ports.begin(), ports.end());
  ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
  return ports;
}

std::optional<GpuRequest> ParseGpu(const Object::Ptr& request) {
  Object::Ptr gpu = json::Obj(request, "gpu");
  if (!gpu) return std::nullopt;
  GpuRequest g;
  g.type = json::Str(gpu, "type");
  g.count = static_cast<int>(json::Int(gpu, "count", 1));
  if (g.type.empty()) throw DriverError(GPUPROV_STATUS_INVALID_INPUT, "gpu.type is empty");
  if (g.count < 1) throw DriverError(GPUPROV_STATUS_INVALID_INPUT, "gpu.count must be >= 1");
  return g;
}

std::string RequiredSshPublicKey(const Object::Ptr& request, const std::string& why) {
  std::string key = json::Str(request, "ssh_public_key");
  if (TrimSpace(key).empty()) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT, "ssh_public_key is required: " + why);
  }
  return key;
}

std::string VmReference(const Object::Ptr& request) {
  const std::string name = json::Str(request, "name");
  return name.empty() ? "with id " + json::Str(request, "id") : "named " + name;
}

RetryPolicy RetryPolicyFrom(const Object::Ptr& config) {
  using std::chrono::milliseconds;
  RetryPolicy p;
  Object::Ptr r = json::Obj(config, "retry");
  if (!r) return p;
  p.max_attempts = static_cast<int>(std::max(1LL, json::Int(r, "max_attempts", p.max_attempts)));
  p.base_delay = milliseconds(json::Int(r, "base_delay_ms", p.base_delay.count()));
  p.max_delay = milliseconds(json::Int(r, "max_delay_ms", p.max_delay.count()));
  p.max_retry_after = milliseconds(json::Int(r, "max_retry_after_ms", p.max_retry_after.count()));
  p.total_budget = milliseconds(json::Int(r, "total_budget_ms", p.total_budget.count()));
  p.attempt_timeout = milliseconds(json::Int(r, "attempt_timeout_ms", p.attempt_timeout.count()));
  return p;
}

Object::Ptr PortMap(const std::vector<int>& ports) {
  Object::Ptr map = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  for (int p : ports) map->set(std::to_string(p), p);
  return map;
}

std::string VmResult(const Object::Ptr& vm, std::optional<bool> existing) {
  Object result(Poco::JSON_PRESERVE_KEY_ORDER);
  result.set("vm", vm);
  if (existing) result.set("existing", *existing);
  return json::Stringify(result);
}

std::set<int> PortsOfRanges(const std::vector<std::string>& specs) {
  std::set<int> ports;
  for (const std::string& spec : specs) {
    int lo = 0, hi = 0;
    try {
      if (spec == "all" || spec == "0") {
        lo = 1;
        hi = 65535;
      } else if (size_t dash = spec.find('-'); dash == std::string::npos) {
        lo = hi = std::stoi(spec);
      } else {
        lo = std::stoi(spec.substr(0, dash));
        hi = std::stoi(spec.substr(dash + 1));
      }
    } catch (const std::exception&) {
      continue;
    }
    for (int p = std::max(lo, 1); p <= std::min(hi, 65535); ++p) ports.insert(p);
  }
  return ports;
}

Object::Ptr OfferJson(const OfferFields& offer) {
  Object::Ptr o = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  o->set("instance_type", offer.instance_type);
  if (offer.gpu_count > 0 && !offer.gpu_type.empty()) {
    o->set("gpu_type", offer.gpu_type);
  } else {
    o->set("gpu_type", Poco::Dynamic::Var());
  }
  o->set("gpu_count", offer.gpu_count);
  o->set("region", offer.region);
  o->set("price_per_hour", offer.price_per_hour);
  if (!offer.image.empty()) o->set("image", offer.image);
  if (offer.in_stock) o->set("in_stock", *offer.in_stock);
  if (!offer.price_source.empty() && offer.price_per_hour > 0) {
    o->set("price_source", offer.price_source);
    if (offer.price_source == "table" && !offer.price_date.empty()) o->set("price_date", offer.price_date);
  }
  if (offer.spot_price_per_hour) o->set("spot_price_per_hour", *offer.spot_price_per_hour);
  return o;
}

DriverSettings ParseSettings(const std::string& settings_json, const std::string& default_endpoint,
                             const std::string& api_suffix) {
  Object::Ptr settings = json::ParseObject(settings_json, "the driver settings");
  DriverSettings out;
  out.endpoint = TrimSpace(json::Str(settings, "endpoint"));
  if (out.endpoint.empty()) out.endpoint = default_endpoint;
  while (!out.endpoint.empty() && out.endpoint.back() == '/') out.endpoint.pop_back();
  if (!api_suffix.empty() && out.endpoint.size() > api_suffix.size() &&
      out.endpoint.compare(out.endpoint.size() - api_suffix.size(), std::string::npos,
                           api_suffix) == 0) {
    out.endpoint.erase(out.endpoint.size() - api_suffix.size());
  }
  out.config = json::Obj(settings, "config");
  if (!out.config) out.config = new Object();
  out.pacer_dir = json::Str(settings, "pacer_dir");
  return out;
}

CreateBasics ParseCreateRequest(const std::string& request_json, const VmNameRules& rules,
                                size_t user_data_limit, const std::string& cloud,
                                const std::string& form) {
  CreateBasics out = ParseCreateRequest(request_json, rules);
  CheckUserData(out.user_data, user_data_limit, cloud, form);
  return out;
}

CreateBasics ParseCreateRequest(const std::string& request_json, const VmNameRules& rules) {
  CreateBasics out;
  out.request = json::ParseObject(request_json, "the create request");
  out.name = json::Str(out.request, "name");
  ValidateVmName(out.name, rules);
  out.user_data = json::Str(out.request, "user_data");
  return out;
}

bool SpotRequested(const Object::Ptr& request) { return json::Bool(request, "spot", false); }

OffersQuery ParseOffersRequest(const std::string& request_json, const std::string& default_region) {
  Object::Ptr request = json::ParseObject(request_json, "the offers request");
  OffersQuery q;
  q.gpu = ParseGpu(request);
  q.region = json::Str(request, "region");
  if (q.region.empty()) q.region = default_region;
  return q;
}

VmRef RequireIdOrName(const Object::Ptr& request) {
  VmRef ref{json::Str(request, "id"), json::Str(request, "name")};
  if (ref.id.empty() && ref.name.empty()) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT, "the request needs \"id\" or \"name\"");
  }
  return ref;
}

namespace {
std::string OneMember(const std::string& key, const Poco::Dynamic::Var& value) {
  Object result;
  result.set(key, value);
  return json::Stringify(result);
}
}  // namespace

std::string OffersResult(const Array::Ptr& offers) { return OneMember("offers", offers); }

const char* PoweredOffCostName(PoweredOffCost cost) {
  switch (cost) {
    case PoweredOffCost::kNone:
      return "none";
    case PoweredOffCost::kDisk:
      return "disk";
    case PoweredOffCost::kFull:
      return "full";
  }
  return "full";
}

std::string OffersResult(const Array::Ptr& offers, PoweredOffCost powered_off) {
  Object o(Poco::JSON_PRESERVE_KEY_ORDER);
  o.set("offers", offers);
  o.set("powered_off_cost", std::string(PoweredOffCostName(powered_off)));
  return json::Stringify(o);
}
std::string VmsResult(const Array::Ptr& vms) { return OneMember("vms", vms); }
std::string DeletedResult(bool deleted) { return OneMember("deleted", deleted); }

ResourceFields Resource(std::string kind, std::string id, std::string name) {
  ResourceFields r;
  r.kind = std::move(kind);
  r.id = std::move(id);
  r.name = std::move(name);
  return r;
}

std::string ResourcesResult(const std::vector<ResourceFields>& resources) {
  Array::Ptr list = new Array();
  for (const auto& r : resources) {
    Object::Ptr o = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    o->set("kind", r.kind);
    o->set("id", r.id);
    o->set("name", r.name);
    Array::Ptr names = new Array();
    for (const auto& n : r.vm_names) names->add(n);
    o->set("vm_names", names);
    o->set("region", r.region);
    o->set("created_at", r.created_at);
    if (r.price_per_hour) o->set("price_per_hour", *r.price_per_hour);
    if (!r.cluster.empty()) o->set("cluster", r.cluster);
    if (!r.role.empty()) o->set("role", r.role);
    list->add(o);
  }
  Object::Ptr root = new Object();
  root->set("resources", list);
  return json::Stringify(root);
}

ResourceRef ParseResourceRequest(const std::string& request_json,
                                 const std::set<std::string>& kinds) {
  Object::Ptr request = json::ParseObject(request_json, "the delete_resource request");
  ResourceRef ref{json::Str(request, "kind"), json::Str(request, "id")};
  if (kinds.count(ref.kind) == 0) {
    std::string known;
    for (const auto& k : kinds) known += (known.empty() ? "" : ", ") + k;
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "kind '" + ref.kind + "' is not one this driver lists (" + known + ")");
  }
  if (ref.id.empty()) throw DriverError(GPUPROV_STATUS_INVALID_INPUT, "id is missing");
  return ref;
}

std::string GetVmResult(const std::string& request_json, const std::string& missing,
                        const std::string& where,
                        const std::function<Object::Ptr(const Object::Ptr& request)>& find_vm) {
  const Object::Ptr request = json::ParseObject(request_json, "the get request");
  const Object::Ptr vm = find_vm(request);
  if (!vm) {
    throw DriverError(GPUPROV_STATUS_NOT_FOUND,
                      "no " + missing + " " + VmReference(request) + where);
  }
  return VmResult(vm);
}

Object::Ptr VmJson(const VmFields& f) {
  Object::Ptr vm = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  vm->set("id", f.id);
  vm->set("name", f.name);
  vm->set("state", f.state);
  vm->set("public_ip", f.public_ip);
  vm->set("ssh_port", f.ssh_port);
  vm->set("ssh_user", f.ssh_user);
  vm->set("region", f.region);
  vm->set("instance_type", f.instance_type);
  vm->set("image", f.image);
  vm->set("gpus", f.gpus);
  vm->set("created_at", f.created_at);
  vm->set("message", f.message);
  if (f.spot) vm->set("spot", true);
  if (f.published_ports) {
    Object::Ptr ports = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    for (const auto& [port, reached_at] : *f.published_ports) {
      ports->set(std::to_string(port), reached_at);
    }
    vm->set("ports", ports);
  } else {
    vm->set("ports", PortMap(f.ports));
  }
  if (f.private_ip) {
    vm->set("private_ip", *f.private_ip);
    vm->set("cluster", f.cluster);
    vm->set("role", f.role);
  }
  if (f.tags) {
    Object::Ptr tags = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    for (const auto& [key, value] : *f.tags) tags->set(key, value);
    vm->set("tags", tags);
  }
  for (const auto& [key, value] : f.extra) vm->set(key, value);
  return vm;
}

std::vector<std::pair<std::string, std::string>> KeyValueTags(const Array::Ptr& tags) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; tags && i < tags->size(); ++i) {
    if (Object::Ptr one = json::ObjAt(tags, i)) {
      out.emplace_back(json::Str(one, "key"), json::Str(one, "value"));
    }
  }
  return out;
}

}  // namespace gpuprov::drivers
