// SPDX-License-Identifier: Apache-2.0
#include "digitalocean_driver.h"

#include <sstream>

#include <algorithm>
#include <map>

#include "digitalocean_rules.h"
#include "driver_kit.h"
#include "gpu_sizes.h"
#include "ssh_public_key.h"

namespace gpuprov::digitalocean {
namespace {

// What a VM powered off from inside still costs (gpuprov's TTL on the node powers it off),
// from REFERENCE.md: a powered-off droplet is `off` and kept, with its size reserved;
// DigitalOcean bills a droplet until it is destroyed, powered off or not.
constexpr kit::PoweredOffCost kPoweredOffCost = kit::PoweredOffCost::kFull;

using namespace gpuprov::drivers::prelude;  // DriverError, json, Array, Object

constexpr const char* kSshUser = "root";
constexpr int kPerPage = 200;
constexpr int kMaxPages = 100;

std::string Encode(const std::string& s) { return kit::EncodeComponent(s); }

bool HasTag(const Object::Ptr& droplet, const std::string& tag) {
  Array::Ptr tags = json::Arr(droplet, "tags");
  if (!tags) return false;
  for (size_t i = 0; i < tags->size(); ++i) {
    if (tags->get(static_cast<unsigned>(i)).toString() == tag) return true;
  }
  return false;
}

std::vector<std::string> TagsWithPrefix(const Object::Ptr& droplet, const std::string& prefix) {
  std::vector<std::string> out;
  Array::Ptr tags = json::Arr(droplet, "tags");
  if (!tags) return out;
  for (size_t i = 0; i < tags->size(); ++i) {
    std::string t = tags->get(static_cast<unsigned>(i)).toString();
    if (t.rfind(prefix, 0) == 0) out.push_back(t.substr(prefix.size()));
  }
  return out;
}

// The droplet's IPv4 address of `type` ("public", or "private": its VPC address) from
// networks.v4 (droplets/models/network_v4.yml).
std::string Ipv4Of(const Object::Ptr& droplet, const std::string& type) {
  Object::Ptr networks = json::Obj(droplet, "networks");
  Array::Ptr v4 = json::Arr(networks, "v4");
  if (!v4) return "";
  for (size_t i = 0; i < v4->size(); ++i) {
    Object::Ptr n = json::ObjAt(v4, i);
    if (n && json::Str(n, "type") == type) return json::Str(n, "ip_address");
  }
  return "";
}
std::string PublicIpv4(const Object::Ptr& droplet) { return Ipv4Of(droplet, "public"); }

// A region's default VPC (vpc.yml `default`), never gpuprov's to delete.
bool IsDefaultVpc(const Object::Ptr& vpc) {
  return vpc && vpc->has("default") && vpc->get("default").isBoolean() &&
         vpc->getValue<bool>("default");
}

// Tags of a cluster node: "gpuprov-cluster:<cluster>", "gpuprov-role:<role>".
std::string ClusterTag(const std::string& cluster) {
  return std::string(kit::kClusterTag) + ":" + cluster;
}
std::string RoleTag(const std::string& role) { return std::string(kit::kRoleTag) + ":" + role; }
std::string ClusterFirewallName(const std::string& cluster) {
  return kit::ClusterResourceName(cluster) + "-peers";
}

// The cluster a firewall serves (its gpuprov-cluster:<cluster> target tag), "" for another.
std::string ClusterOfFirewall(const Object::Ptr& fw) {
  const std::string prefix = ClusterTag("");
  Array::Ptr tags = json::Arr(fw, "tags");
  for (size_t i = 0; tags && i < tags->size(); ++i) {
    const std::string t = tags->get(static_cast<unsigned>(i)).toString();
    if (t.rfind(prefix, 0) == 0) return t.substr(prefix.size());
  }
  return "";
}

Object::Ptr VmJson(const Object::Ptr& d, const std::vector<int>& ports = {22}) {
  const std::string status = json::Str(d, "status");
  const std::string size = json::Has(d, "size_slug") ? json::Str(d, "size_slug")
                                                     : json::Str(json::Obj(d, "size"), "slug");
  Object::Ptr image = json::Obj(d, "image");
  kit::VmFields vm;
  vm.id = json::Str(d, "id");
  vm.name = json::Str(d, "name");
  vm.state = StateOf(status);
  vm.public_ip = PublicIpv4(d);
  vm.ssh_user = kSshUser;
  vm.region = json::Str(json::Obj(d, "region"), "slug");
  vm.instance_type = size;
  vm.image = json::Str(image, "slug");
  if (vm.image.empty()) vm.image = json::Str(image, "id");
  vm.gpus = GpusOfSlug(size);
  vm.created_at = json::Str(d, "created_at");
  vm.message = vm.state == "error" ? "droplet status " + status : std::string();
  vm.ports = ports;
  vm.private_ip = Ipv4Of(d, "private");
  if (auto c = TagsWithPrefix(d, ClusterTag("")); !c.empty()) vm.cluster = c.front();
  if (auto r = TagsWithPrefix(d, RoleTag("")); !r.empty()) vm.role = r.front();
  vm.tags.emplace();
  if (Array::Ptr t = json::Arr(d, "tags")) {
    for (size_t i = 0; i < t->size(); ++i) {
      std::string tag = t->get(static_cast<unsigned>(i)).toString();
      size_t colon = tag.find(':');
      if (tag == kManagedTag) {
        vm.tags->emplace_back("gpuprov", "1");
      } else if (tag.rfind(kVmTagPrefix, 0) == 0) {
        vm.tags->emplace_back("gpuprov-name", vm.name);
      } else if (colon != std::string::npos) {
        vm.tags->emplace_back(tag.substr(0, colon), tag.substr(colon + 1));
      } else {
        vm.tags->emplace_back(tag, "");
      }
    }
  }
  return kit::VmJson(vm);
}

Array::Ptr AllAddresses() {
  Array::Ptr a = new Array();
  a->add("0.0.0.0/0");
  a->add("::/0");
  return a;
}

}  // namespace

Object::Ptr InboundRule(int port, const kit::PortSources& sources) {
  Object::Ptr r = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  r->set("protocol", "tcp");
  r->set("ports", std::to_string(port));
  Object::Ptr from = new Object();
  Array::Ptr addresses = new Array();
  for (const auto& cidr : sources.Of(port, /*with_ipv6=*/true)) addresses->add(cidr);
  from->set("addresses", addresses);
  r->set("sources", from);
  return r;
}

Array::Ptr InboundRules(const std::vector<int>& ports, const kit::PortSources& sources) {
  Array::Ptr rules = new Array();
  for (int p : ports) rules->add(InboundRule(p, sources));
  return rules;
}

namespace {

// Without outbound rules an attached firewall blocks all egress (REFERENCE.md §5).
Array::Ptr OutboundRules() {
  Array::Ptr rules = new Array();
  for (const char* proto : {"tcp", "udp", "icmp"}) {
    Object::Ptr r = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    r->set("protocol", proto);
    if (std::string(proto) != "icmp") r->set("ports", "0");
    Object::Ptr dest = new Object();
    dest->set("addresses", AllAddresses());
    r->set("destinations", dest);
    rules->add(r);
  }
  return rules;
}

std::set<std::string> AddressesOf(const Object::Ptr& rule) {
  std::set<std::string> out;
  Array::Ptr addresses = json::Arr(json::Obj(rule, "sources"), "addresses");
  for (size_t j = 0; addresses && j < addresses->size(); ++j) {
    out.insert(addresses->get(static_cast<unsigned>(j)).toString());
  }
  return out;
}

// Whether an inbound tcp rule of the firewall opens port to every address (0.0.0.0/0);
// "0", "all" or "" is every port, "8000-9000" a range.
bool OpenToAll(const Object::Ptr& fw, int port) {
  Array::Ptr rules = json::Arr(fw, "inbound_rules");
  for (size_t i = 0; rules && i < rules->size(); ++i) {
    Object::Ptr r = json::ObjAt(rules, i);
    if (!r || json::Str(r, "protocol") != "tcp" || !AddressesOf(r).count("0.0.0.0/0")) continue;
    const std::string p = json::Str(r, "ports");
    if (p.empty() || kit::PortsOfRanges({p}).count(port) > 0) return true;
  }
  return false;
}

// Whether an inbound tcp rule of the firewall opens port to some address; "0", "all" or ""
// is every port, "8000-9000" a range.
bool OpenToSome(const Object::Ptr& fw, int port) {
  Array::Ptr rules = json::Arr(fw, "inbound_rules");
  for (size_t i = 0; rules && i < rules->size(); ++i) {
    Object::Ptr r = json::ObjAt(rules, i);
    if (!r || json::Str(r, "protocol") != "tcp" || AddressesOf(r).empty()) continue;
    const std::string p = json::Str(r, "ports");
    if (p.empty() || kit::PortsOfRanges({p}).count(port) > 0) return true;
  }
  return false;
}

std::string PortText(const std::vector<int>& ports) {
  std::string s;
  for (int p : ports) s += (s.empty() ? "" : ",") + std::to_string(p);
  return s;
}

std::set<std::string> DropletIdsOf(const Object::Ptr& fw) {
  std::set<std::string> ids;
  if (Array::Ptr a = json::Arr(fw, "droplet_ids")) {
    for (size_t i = 0; i < a->size(); ++i) ids.insert(a->get(static_cast<unsigned>(i)).toString());
  }
  return ids;
}

}  // namespace

DigitalOceanDriver::DigitalOceanDriver(const gpuprov::sdk::InitContext& ctx) : host_(ctx.host) {
  kit::DriverSettings settings = kit::ParseSettings(ctx.config_json, kDefaultEndpoint);
  endpoint_ = settings.endpoint;
  config_ = settings.config;
  default_region_ = json::Str(config_, "region");
  if (Array::Ptr extra = json::Arr(config_, "capacity_messages")) {
    for (size_t i = 0; i < extra->size(); ++i) {
      capacity_messages_.push_back(extra->get(static_cast<unsigned>(i)).toString());
    }
  }
  api_ = std::make_unique<kit::ApiClient>(endpoint_, kit::RetryPolicyFrom(config_), host_,
                                          DigitalOceanApi(capacity_messages_),
                                          DigitalOceanAuth(config_));
}

DigitalOceanDriver::ObjectPtr DigitalOceanDriver::CreateDroplet(const std::string& name,
                                                                const ObjectPtr& body) {
  kit::Backoff backoff(host_, api_->http().policy(), "create droplet " + name);
  for (;;) {
    std::optional<DriverError> failure;
    try {
      const kit::ApiAnswer a = api_->Call("POST", "/droplets", "create droplet " + name, body,
                                          {500, 502, 503, 504}, /*idempotent=*/false);
      const int status = a.status;
      const ObjectPtr& doc = a.doc;
      if (status < 500) {
        ObjectPtr droplet = json::Obj(doc, "droplet");
        if (!droplet) {
          throw DriverError(GPUPROV_STATUS_FAILED,
                            "create droplet " + name + ": the answer has no droplet");
        }
        return droplet;
      }
      failure.emplace(GPUPROV_STATUS_TRANSIENT,
                      "create droplet " + name + ": DigitalOcean answered HTTP " +
                          std::to_string(status) + ": " +
                          (doc ? json::Str(doc, "message") : std::string("no message")));
    } catch (const DriverError& e) {
      if (e.status() != GPUPROV_STATUS_TRANSIENT) throw;
      failure.emplace(e);
    }
    // The first try may have made the droplet although its answer was lost.
    if (ObjectPtr made = FindByName(name)) {
      host_.Info("droplet " + name + " was created although DigitalOcean's answer failed");
      return made;
    }
    if (!backoff.Wait(failure->what())) throw *failure;
  }
}

std::vector<DigitalOceanDriver::ObjectPtr> DigitalOceanDriver::ListAll(const std::string& path,
                                                                      const std::string& key,
                                                                      const std::string& what) {
  std::vector<ObjectPtr> out;
  const char sep = path.find('?') == std::string::npos ? '?' : '&';
  for (int page = 1; page <= kMaxPages; ++page) {
    ObjectPtr doc = api_->Call("GET",
                               path + sep + "page=" + std::to_string(page) +
                                   "&per_page=" + std::to_string(kPerPage),
                               what)
                        .doc;
    Array::Ptr items = json::Arr(doc, key);
    size_t n = items ? items->size() : 0;
    for (size_t i = 0; i < n; ++i) {
      if (ObjectPtr o = json::ObjAt(items, i)) out.push_back(o);
    }
    Object::Ptr pages = json::Obj(json::Obj(doc, "links"), "pages");
    if (n == 0 || !json::Has(pages, "next")) break;
  }
  return out;
}

std::vector<DigitalOceanDriver::ObjectPtr> DigitalOceanDriver::ManagedDroplets() {
  std::vector<ObjectPtr> out;
  std::set<std::string> seen;
  auto add = [&](const std::vector<ObjectPtr>& ds) {
    for (const auto& d : ds) {
      if (!HasTag(d, kManagedTag) || json::Str(d, "status") == "archive") continue;
      if (seen.insert(json::Str(d, "id")).second) out.push_back(d);
    }
  };
  // tag_name cannot be combined with type; GPU droplets are missing from the default list,
  // so they are listed with type=gpus and filtered here.
  add(ListAll(std::string("/droplets?tag_name=") + kManagedTag, "droplets", "list droplets"));
  add(ListAll("/droplets?type=gpus", "droplets", "list GPU droplets"));
  return out;
}

DigitalOceanDriver::ObjectPtr DigitalOceanDriver::FindByName(const std::string& name,
                                                             bool* foreign) {
  if (foreign) *foreign = false;
  for (const char* type : {"&type=gpus", ""}) {
    for (const auto& d : ListAll("/droplets?name=" + Encode(name) + type, "droplets",
                                 "find droplet " + name)) {
      if (json::Str(d, "name") != name || json::Str(d, "status") == "archive") continue;
      if (HasTag(d, kManagedTag)) return d;
      if (foreign) *foreign = true;
    }
  }
  return nullptr;
}

DigitalOceanDriver::ObjectPtr DigitalOceanDriver::Resolve(const ObjectPtr& request) {
  const auto [id, name] = kit::RequireIdOrName(request);
  if (!id.empty()) {
    bool numeric = std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (numeric) {
      const kit::ApiAnswer a =
          api_->Call("GET", "/droplets/" + id, "get droplet " + id, nullptr, {404});
      ObjectPtr d = a.status == 404 ? nullptr : json::Obj(a.doc, "droplet");
      if (d && HasTag(d, kManagedTag) && json::Str(d, "status") != "archive" &&
          (name.empty() || json::Str(d, "name") == name)) {
        return d;
      }
    }
  }
  if (!name.empty()) return FindByName(name);
  return nullptr;
}

DigitalOceanDriver::SshKey DigitalOceanDriver::EnsureSshKey(const std::string& public_key) {
  const std::string fp = kit::Md5Fingerprint(kit::ParseSshPublicKey(public_key));
  auto from = [&](const ObjectPtr& k, bool created) {
    SshKey key;
    key.id = json::Str(k, "id");
    key.ours = json::Str(k, "name").rfind(kResourcePrefix, 0) == 0;
    key.created = created;
    return key;
  };
  const kit::ApiAnswer found =
      api_->Call("GET", "/account/keys/" + fp, "look up SSH key " + fp, nullptr, {404});
  if (found.status != 404) {
    if (ObjectPtr k = json::Obj(found.doc, "ssh_key")) {
      host_.Debug("SSH key " + fp + " is registered already (id " + json::Str(k, "id") + ")");
      return from(k, false);
    }
  }
  std::string hex = fp;
  hex.erase(std::remove(hex.begin(), hex.end(), ':'), hex.end());
  Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  body->set("name", kResourcePrefix + hex.substr(0, 16));
  body->set("public_key", kit::TrimSpace(public_key));
  const kit::ApiAnswer made =
      api_->Call("POST", "/account/keys", "register SSH key " + fp, body, {422});
  if (made.status == 422) {
    // Registered in the meantime (or "already in use"): look it up once more.
    ObjectPtr k =
        json::Obj(api_->Call("GET", "/account/keys/" + fp, "look up SSH key " + fp).doc, "ssh_key");
    if (!k) throw DriverError(GPUPROV_STATUS_FAILED, "SSH key " + fp + " vanished");
    return from(k, false);
  }
  ObjectPtr k = json::Obj(made.doc, "ssh_key");
  if (!k) {
    throw DriverError(GPUPROV_STATUS_FAILED, "register SSH key: the answer has no ssh_key");
  }
  host_.Info("registered SSH key " + fp + " as " + json::Str(k, "name"));
  return from(k, true);
}

void DigitalOceanDriver::DeleteSshKey(const std::string& id) {
  api_->Call("DELETE", "/account/keys/" + Encode(id), "delete SSH key " + id, nullptr, {404});
}

DigitalOceanDriver::ObjectPtr DigitalOceanDriver::FindFirewall(const std::string& vm_name) {
  const std::string want = FirewallName(vm_name);
  for (const auto& fw : ListAll("/firewalls", "firewalls", "list firewalls")) {
    if (!ClusterOfFirewall(fw).empty()) continue;  // a cluster's, not this VM's
    if (json::Str(fw, "name") == want) return fw;
  }
  return nullptr;
}

void DigitalOceanDriver::CreateFirewall(const std::string& vm_name, const std::string& droplet_id,
                                        const std::vector<int>& ports,
                                        const kit::PortSources& sources) {
  Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  body->set("name", FirewallName(vm_name));
  body->set("inbound_rules", InboundRules(ports, sources));
  body->set("outbound_rules", OutboundRules());
  Array::Ptr ids = new Array();
  try {
    ids->add(std::stoll(droplet_id));
  } catch (const std::exception&) {
  }
  body->set("droplet_ids", ids);
  body->set("tags", Array::Ptr(new Array()));
  host_.Progress("creating firewall " + FirewallName(vm_name) + " (tcp " + PortText(ports) + ")");
  // Not repeated blindly (a lost answer could leave two); a re-run finds it by name.
  api_->Call("POST", "/firewalls", "create firewall " + FirewallName(vm_name), body, {},
             /*idempotent=*/false);
}

std::vector<int> DigitalOceanDriver::OpenFirewallPorts(const std::string& vm_name,
                                                       const std::string& droplet_id,
                                                       const std::vector<int>& ports,
                                                       const kit::PortSources& sources) {
  ObjectPtr fw = FindFirewall(vm_name);
  if (!fw) {
    CreateFirewall(vm_name, droplet_id, ports, sources);
    return ports;
  }
  const std::string fw_id = json::Str(fw, "id");
  if (!sources.Narrows()) return AddFirewallRules(vm_name, droplet_id, fw, ports);
  Array::Ptr inbound = RewriteInbound(json::Arr(fw, "inbound_rules"), ports, sources);
  std::vector<int> changed;
  auto text = [](const Array::Ptr& a) {
    std::ostringstream out;
    if (a) a->stringify(out);
    return out.str();
  };
  if (text(inbound) != text(json::Arr(fw, "inbound_rules"))) {
    for (int p : ports) changed.push_back(p);
  }
  const bool attached = DropletIdsOf(fw).count(droplet_id) > 0;
  if (!changed.empty()) {
    host_.Progress("setting tcp " + PortText(ports) + " of firewall " + FirewallName(vm_name) +
                   " to " + (sources.Narrows() ? "the allow_from sources" : "every address"));
    // PUT replaces the whole firewall: the rest of it is sent back as it is.
    Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    body->set("name", FirewallName(vm_name));
    body->set("inbound_rules", inbound);
    Array::Ptr outbound = json::Arr(fw, "outbound_rules");
    body->set("outbound_rules", outbound ? outbound : OutboundRules());
    Array::Ptr ids = new Array();
    for (const auto& id : DropletIdsOf(fw)) ids->add(std::stoll(id));
    if (!attached) ids->add(std::stoll(droplet_id));
    body->set("droplet_ids", ids);
    Array::Ptr tags = json::Arr(fw, "tags");
    body->set("tags", tags ? tags : Array::Ptr(new Array()));
    api_->Call("PUT", "/firewalls/" + Encode(fw_id), "update firewall " + FirewallName(vm_name),
               body);
    return changed;
  }
  if (!attached) {
    host_.Progress("attaching droplet " + droplet_id + " to firewall " + FirewallName(vm_name));
    Object::Ptr body = new Object();
    Array::Ptr ids = new Array();
    ids->add(std::stoll(droplet_id));
    body->set("droplet_ids", ids);
    api_->Call("POST", "/firewalls/" + Encode(fw_id) + "/droplets",
               "attach droplet " + droplet_id + " to firewall " + FirewallName(vm_name), body);
  }
  return changed;
}

std::vector<int> DigitalOceanDriver::AddFirewallRules(const std::string& vm_name,
                                                      const std::string& droplet_id,
                                                      const ObjectPtr& fw,
                                                      const std::vector<int>& ports) {
  // Only additions: rules and droplets the user added to it stay.
  const std::string fw_id = json::Str(fw, "id");
  std::vector<int> missing;
  for (int p : ports) {
    if (!OpenToAll(fw, p)) missing.push_back(p);
  }
  if (!missing.empty()) {
    host_.Progress("opening tcp " + PortText(missing) + " in firewall " + FirewallName(vm_name));
    Object::Ptr body = new Object();
    body->set("inbound_rules", InboundRules(missing, kit::PortSources{}));
    api_->Call("POST", "/firewalls/" + Encode(fw_id) + "/rules",
               "add rules to firewall " + FirewallName(vm_name), body);
  }
  if (DropletIdsOf(fw).count(droplet_id) == 0) {
    host_.Progress("attaching droplet " + droplet_id + " to firewall " + FirewallName(vm_name));
    Object::Ptr body = new Object();
    Array::Ptr ids = new Array();
    ids->add(std::stoll(droplet_id));
    body->set("droplet_ids", ids);
    api_->Call("POST", "/firewalls/" + Encode(fw_id) + "/droplets",
               "attach droplet " + droplet_id + " to firewall " + FirewallName(vm_name), body);
  }
  return missing;
}

Array::Ptr RewriteInbound(const Array::Ptr& rules, const std::vector<int>& ports,
                          const kit::PortSources& sources) {
  const std::set<int> set(ports.begin(), ports.end());
  std::set<int> satisfied;
  Array::Ptr out = new Array();
  for (size_t i = 0; rules && i < rules->size(); ++i) {
    Object::Ptr r = json::ObjAt(rules, i);
    if (!r) continue;
    int port = 0;
    try {
      const std::string text = json::Str(r, "ports");
      size_t used = 0;
      port = std::stoi(text, &used);
      if (used != text.size()) port = 0;
    } catch (const std::exception&) {
      port = 0;
    }
    if (json::Str(r, "protocol") == "tcp" && set.count(port) > 0) {
      const std::vector<std::string> want = sources.Of(port, true);
      const std::set<std::string> have = AddressesOf(r);
      if (sources.IsNarrowed(port)) {
        if (have != std::set<std::string>(want.begin(), want.end())) continue;  // stale
        if (!satisfied.insert(port).second) continue;  // a duplicate
      } else if (have.count("0.0.0.0/0")) {
        satisfied.insert(port);  // open to everyone already; other rules of it stay
      }
    }
    out->add(r);
  }
  for (int p : ports) {
    if (!satisfied.count(p)) out->add(InboundRule(p, sources));
  }
  return out;
}

std::vector<int> DigitalOceanDriver::OpenPortsOf(const std::string& vm_name,
                                                 const std::vector<int>& ports) {
  ObjectPtr fw = FindFirewall(vm_name);
  if (!fw) return ports;  // no firewall: the droplet takes every port
  std::vector<int> open;
  for (int p : ports) {
    if (OpenToSome(fw, p)) open.push_back(p);
  }
  return open;
}

std::string DigitalOceanDriver::Check(const std::string& /*request_json*/) {
  ObjectPtr doc = api_->Call("GET", "/account", "check the DigitalOcean account").doc;
  ObjectPtr account = json::Obj(doc, "account");
  std::string text = json::Str(account, "email");
  if (text.empty()) text = json::Str(account, "uuid");
  const std::string status = json::Str(account, "status");
  if (!status.empty()) text += " (" + status + ")";
  if (json::Has(account, "droplet_limit")) {
    text += ", droplet limit " + json::Str(account, "droplet_limit");
  }
  Object result(Poco::JSON_PRESERVE_KEY_ORDER);
  result.set("account", text);
  result.set("user_data_limit", 65536);  // user_data <= 64 KiB (REFERENCE.md §4)
  result.set("allow_from", true);       // create and open_ports narrow sources
  result.set("token_from", api_->credential().origin);
  result.set("endpoint", endpoint_);
  return json::Stringify(result);
}

DigitalOceanDriver::LiveSize DigitalOceanDriver::ReadLiveSize(const std::string& slug) {
  LiveSize live;
  for (const auto& s : ListAll("/sizes", "sizes", "list sizes")) {
    if (json::Str(s, "slug") != slug) continue;
    live.listed = true;
    live.available = !json::Has(s, "available") || s->getValue<bool>("available");
    if (Array::Ptr r = json::Arr(s, "regions")) {
      for (size_t i = 0; i < r->size(); ++i) {
        live.regions.push_back(r->get(static_cast<unsigned>(i)).toString());
      }
    }
    if (json::Has(s, "price_hourly")) live.price_per_hour = s->getValue<double>("price_hourly");
  }
  if (!live.listed || !live.available || live.regions.empty()) return live;
  // A region closed to new droplets, or one that no longer lists the size, is left out.
  std::set<std::string> closed;
  try {
    for (const auto& r : ListAll("/regions", "regions", "list regions")) {
      const std::string name = json::Str(r, "slug");
      bool open = !json::Has(r, "available") || r->getValue<bool>("available");
      if (Array::Ptr sizes = json::Arr(r, "sizes"); open && sizes) {
        open = false;
        for (size_t i = 0; i < sizes->size(); ++i) {
          if (sizes->get(static_cast<unsigned>(i)).toString() == slug) open = true;
        }
      }
      if (!open) closed.insert(name);
    }
  } catch (const DriverError& e) {
    if (e.status() == GPUPROV_STATUS_AUTH || e.status() == GPUPROV_STATUS_CANCELLED) throw;
    host_.Debug(std::string("region list unavailable, using the size's regions: ") + e.what());
  }
  std::erase_if(live.regions, [&](const std::string& r) { return closed.count(r) > 0; });
  return live;
}

std::string DigitalOceanDriver::DefaultRegionFor(const std::string& slug,
                                                 const std::vector<std::string>& table_regions) {
  LiveSize live;
  try {
    live = ReadLiveSize(slug);
  } catch (const DriverError& e) {
    if (e.status() == GPUPROV_STATUS_AUTH || e.status() == GPUPROV_STATUS_CANCELLED) throw;
    if (table_regions.empty()) throw;
    host_.Warning("DigitalOcean's size list cannot be read (" + std::string(e.what()) +
                  "); trying region " + table_regions.front() + " from the built-in table");
    return table_regions.front();
  }
  if (!live.listed) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "DigitalOcean's size list has no " + slug +
                          ": GPU Droplets may need enabling for the account (control panel), "
                          "or name another size; nothing was created");
  }
  if (!live.available || live.regions.empty()) {
    throw DriverError(GPUPROV_STATUS_CAPACITY,
                      "DigitalOcean sells " + slug +
                          " in no region now (GET /v2/sizes and /v2/regions); try later or "
                          "another GPU type; nothing was created");
  }
  host_.Info("region " + live.regions.front() + ": the first DigitalOcean sells " + slug +
             " in now (of " + [&] {
               std::string s;
               for (const auto& r : live.regions) s += (s.empty() ? "" : ", ") + r;
               return s;
             }() + ")");
  return live.regions.front();
}

std::string DigitalOceanDriver::Offers(const std::string& request_json) {
  const auto [gpu, region] = kit::ParseOffersRequest(request_json, default_region_);
  Array::Ptr offers = new Array();

  std::optional<GpuSize> size = gpu ? SizeForGpu(gpu->type, gpu->count) : CpuSize();
  if (!size) {
    host_.Warning(NotOfferedMessage(gpu->type, gpu->count));
    return kit::OffersResult(offers, kPoweredOffCost);
  }

  // Live availability, regions and prices; the built-in table when the sizes list cannot be
  // read (an authentication failure still fails: nothing else would work either).
  std::vector<std::string> regions = size->regions;
  double price = size->price_per_hour;
  std::string price_source = "table";
  try {
    const LiveSize live = ReadLiveSize(size->slug);
    if (!live.listed) {
      host_.Warning("DigitalOcean's size list has no " + size->slug +
                    " (GPU Droplets may need enabling for the account)");
      return kit::OffersResult(offers, kPoweredOffCost);
    }
    if (!live.available) {
      host_.Warning("DigitalOcean lists " + size->slug + " as not available now");
      return kit::OffersResult(offers, kPoweredOffCost);
    }
    regions = live.regions;
    if (live.price_per_hour) {
      price = *live.price_per_hour;
      price_source = "live";
    }
  } catch (const DriverError& e) {
    if (e.status() == GPUPROV_STATUS_AUTH || e.status() == GPUPROV_STATUS_CANCELLED) throw;
    host_.Debug(std::string("size list unavailable, using the built-in table: ") + e.what());
  }
  for (const auto& r : regions) {
    if (!region.empty() && r != region) continue;
    offers->add(kit::OfferJson({size->slug, size->gpu_type, size->gpu_count, r, price, size->image,
                                std::nullopt, price_source, kPriceTableDate}));
  }
  if (offers->size() == 0) {
    host_.Warning(size->slug + " is not offered in region " + region + " (regions: " +
                  [&] {
                    std::string s;
                    for (const auto& r : regions) s += (s.empty() ? "" : ", ") + r;
                    return s;
                  }() +
                  ")");
  }
  return kit::OffersResult(offers, kPoweredOffCost);
}

std::string DigitalOceanDriver::Create(const std::string& request_json) {
  const auto [request, name, user_data] =
      kit::ParseCreateRequest(request_json, kVmNameRules, kMaxUserDataBytes, "DigitalOcean",
                              "plain text");
  const std::string public_key = kit::RequiredSshPublicKey(
      request, "without a key DigitalOcean emails a root password and gpuprov cannot log in");
  const std::string fingerprint =
      kit::Md5Fingerprint(kit::ParseSshPublicKey(public_key));  // validates before any call
  std::vector<int> ports = kit::WithSsh(kit::PortsOf(request, "open_ports"));
  const kit::PortSources sources = kit::SourcesOf(request);  // checked before any call
  const std::optional<kit::ClusterRequest> cluster = kit::ParseCluster(request);

  // The size: from gpu (instance_type must agree), else instance_type, else the CPU size.
  const kit::CatalogueChoice choice = kit::ChooseInstanceType(
      SizeCatalogue(), kit::ParseGpu(request), json::Str(request, "instance_type"));
  std::optional<GpuSize> size = choice.index ? KnownSizes()[*choice.index] : CpuSize();
  size->slug = choice.row.instance_type;  // a size the table does not know: DigitalOcean decides
  std::string region = json::Str(request, "region");
  if (region.empty()) region = default_region_;
  std::string image = json::Str(request, "image");
  if (image.empty()) image = size->image;

  // Idempotent by name.
  bool foreign = false;
  if (ObjectPtr existing = FindByName(name, &foreign)) {
    const std::string id = json::Str(existing, "id");
    host_.Info("droplet " + name + " exists (id " + id + ", " + json::Str(existing, "status") + ")");
    // As it is: widening its ports is open_ports' job. Reported: what its firewall opens.
    // A create interrupted before its firewall left the droplet open to every port: the
    // firewall is made now (that only narrows).
    if (!FindFirewall(name)) CreateFirewall(name, id, ports, kit::SourcesOf(request));
    if (cluster) EnsureClusterFirewall(cluster->name, cluster->peer_ports);
    return kit::VmResult(VmJson(existing, OpenPortsOf(name, ports)), true);
  }
  if (foreign) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "a droplet named " + name +
                          " exists that gpuprov did not create (it lacks the gpuprov tag); "
                          "choose another VM name");
  }

  // No region named: one where DigitalOcean sells the size now
  // (REFERENCE.md §F6), not the first of the built-in table.
  if (region.empty()) region = DefaultRegionFor(size->slug, size->regions);

  // A cluster node joins the cluster's VPC (DigitalOcean's private network: droplets in one VPC
  // reach each other on their private addresses; vpcs/models/vpc.yml).
  const std::string vpc_id = cluster ? EnsureClusterVpc(cluster->name, region) : "";

  SshKey key = EnsureSshKey(public_key);

  Array::Ptr tags = new Array();
  std::set<std::string> tag_set = {kManagedTag, VmTag(name)};
  if (key.ours) tag_set.insert(KeyTag(key.id));
  if (cluster) {
    tag_set.insert(ClusterTag(cluster->name));
    tag_set.insert(RoleTag(cluster->role));
  }
  for (const auto& [k, value] : kit::UserTags(request)) {
    tag_set.insert(TagSafe(value.empty() ? k : k + ":" + value));
  }
  // Fixed ones first, for readability in the control panel.
  tags->add(std::string(kManagedTag));
  tags->add(VmTag(name));
  for (const auto& t : tag_set) {
    if (t != kManagedTag && t != VmTag(name)) tags->add(t);
  }

  Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  body->set("name", name);
  body->set("region", region);
  body->set("size", size->slug);
  body->set("image", image);
  Array::Ptr keys = new Array();
  try {
    keys->add(std::stoll(key.id));
  } catch (const std::exception&) {
    keys->add(fingerprint);
  }
  body->set("ssh_keys", keys);
  if (!user_data.empty()) body->set("user_data", user_data);
  body->set("tags", tags);
  body->set("ipv6", true);
  if (!vpc_id.empty()) body->set("vpc_uuid", vpc_id);
  body->set("monitoring", false);
  body->set("backups", false);

  host_.Progress("creating droplet " + name + " (" + size->slug + " in " + region + ", image " +
                 image + ")");
  ObjectPtr droplet;
  try {
    droplet = CreateDroplet(name, body);
  } catch (const DriverError& e) {
    // Leave nothing behind: a key this call registered goes again (no droplet uses it).
    if (key.created) {
      try {
        DeleteSshKey(key.id);
      } catch (const std::exception& cleanup) {
        host_.Warning("could not remove the SSH key registered for " + name + ": " + cleanup.what());
      }
    }
    throw;
  }
  const std::string id = json::Str(droplet, "id");
  host_.Info("droplet " + name + " is id " + id);
  OpenFirewallPorts(name, id, ports, sources);
  if (cluster) EnsureClusterFirewall(cluster->name, cluster->peer_ports);
  return kit::ConfirmSources(kit::VmResult(VmJson(droplet, ports), false), sources);
}

std::string DigitalOceanDriver::Get(const std::string& request_json) {
  return kit::GetVmResult(request_json, "gpuprov droplet", " on DigitalOcean",
                          [&](const ObjectPtr& request) -> ObjectPtr {
                            const ObjectPtr d = Resolve(request);
                            return d ? VmJson(d) : nullptr;
                          });
}

std::string DigitalOceanDriver::List(const std::string& /*request_json*/) {
  Array::Ptr vms = new Array();
  for (const auto& d : ManagedDroplets()) vms->add(VmJson(d));
  return kit::VmsResult(vms);
}

std::string DigitalOceanDriver::Delete(const std::string& request_json) {
  ObjectPtr request = json::ParseObject(request_json, "the delete request");
  ObjectPtr d = Resolve(request);
  std::string name = json::Str(request, "name");
  bool deleted = false;
  std::vector<std::string> key_ids;
  std::vector<std::string> clusters;
  if (d) {
    const std::string id = json::Str(d, "id");
    name = json::Str(d, "name");
    key_ids = TagsWithPrefix(d, kKeyTagPrefix);
    clusters = TagsWithPrefix(d, ClusterTag(""));
    host_.Progress("deleting droplet " + name + " (id " + id + ")");
    const kit::ApiAnswer a =
        api_->Call("DELETE", "/droplets/" + id, "delete droplet " + name, nullptr, {404, 422});
    const int status = a.status;
    const ObjectPtr& doc = a.doc;
    if (status == 422) {
      // "a destroy is already in progress" counts as deleted; anything else is an error.
      std::string msg = doc ? json::Str(doc, "message") : "";
      std::string lower = msg;
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      if (lower.find("in progress") == std::string::npos) {
        throw DriverError(Classify422(msg, capacity_messages_),
                          "delete droplet " + name + ": DigitalOcean answered HTTP 422: " + msg);
      }
    }
    deleted = status != 404;
  }
  // The firewall of this VM name, even when the droplet was already gone (a half-done create).
  if (!name.empty()) {
    const std::string fw_name = FirewallName(name);
    for (const auto& fw : ListAll("/firewalls", "firewalls", "list firewalls")) {
      if (json::Str(fw, "name") != fw_name) continue;
      host_.Progress("deleting firewall " + fw_name);
      api_->Call("DELETE", "/firewalls/" + Encode(json::Str(fw, "id")),
                 "delete firewall " + fw_name, nullptr, {404});
    }
  }
  // The droplet vanished before we could read its key tag (a failed boot): every key gpuprov
  // registered that no remaining gpuprov droplet carries is an orphan of it.
  if (!d) {
    for (const auto& k : ListAll("/account/keys", "ssh_keys", "list SSH keys")) {
      if (json::Str(k, "name").rfind(kResourcePrefix, 0) == 0) {
        key_ids.push_back(json::Str(k, "id"));
      }
    }
  }
  // The SSH key gpuprov registered, once no other gpuprov droplet uses it.
  if (!key_ids.empty()) {
    const std::string this_id = d ? json::Str(d, "id") : "";
    std::vector<ObjectPtr> others = ManagedDroplets();
    for (const auto& key_id : key_ids) {
      bool used = false;
      for (const auto& o : others) {
        if (json::Str(o, "id") != this_id && HasTag(o, KeyTag(key_id))) used = true;
      }
      if (used) {
        host_.Debug("SSH key " + key_id + " is still used by another gpuprov droplet; kept");
        continue;
      }
      host_.Progress("deleting SSH key " + key_id);
      DeleteSshKey(key_id);
    }
  }
  for (const auto& c : clusters) RemoveClusterLeftovers(c, d ? json::Str(d, "id") : "");
  return kit::DeletedResult(deleted);
}

std::string DigitalOceanDriver::OpenPorts(const std::string& request_json) {
  ObjectPtr request = json::ParseObject(request_json, "the open_ports request");
  std::vector<int> ports = kit::PortsOf(request, "ports");
  ObjectPtr d = Resolve(request);
  if (!d) {
    throw DriverError(GPUPROV_STATUS_NOT_FOUND,
                      "no gpuprov droplet with id " + json::Str(request, "id") + " on DigitalOcean");
  }
  const kit::PortSources sources = kit::SourcesOf(request);
  OpenFirewallPorts(json::Str(d, "name"), json::Str(d, "id"), kit::WithSsh(ports), sources);
  return kit::ConfirmSources("{}", sources);
}

std::string DigitalOceanDriver::ListResources(const std::string& /*request_json*/) {
  // Droplets first, then what they use: the order gc deletes in.
  std::vector<kit::ResourceFields> out;
  const std::vector<ObjectPtr> droplets = ManagedDroplets();
  for (const auto& d : droplets) {
    kit::ResourceFields r = kit::Resource("vm", json::Str(d, "id"), json::Str(d, "name"));
    r.vm_names = {json::Str(d, "name")};
    if (auto c = TagsWithPrefix(d, ClusterTag("")); !c.empty()) r.cluster = c.front();
    if (auto role = TagsWithPrefix(d, RoleTag("")); !role.empty()) r.role = role.front();
    r.region = json::Str(json::Obj(d, "region"), "slug");
    r.created_at = json::Str(d, "created_at");
    if (ObjectPtr size = json::Obj(d, "size"); size && json::Has(size, "price_hourly")) {
      r.price_per_hour = size->getValue<double>("price_hourly");
    }
    out.push_back(r);
  }
  // A firewall is gpuprov's by its name, gpuprov-<VM name> (its tags would attach droplets).
  // A cluster's firewall (its target is the cluster tag) belongs to the cluster's droplets.
  for (const auto& fw : ListAll("/firewalls", "firewalls", "list firewalls")) {
    const std::string name = json::Str(fw, "name");
    if (name.rfind(kResourcePrefix, 0) != 0) continue;
    const std::string cluster = ClusterOfFirewall(fw);
    kit::ResourceFields r =
        kit::Resource(cluster.empty() ? "firewall" : "cluster_firewall", json::Str(fw, "id"), name);
    if (cluster.empty()) {
      r.vm_names = {name.substr(std::string(kResourcePrefix).size())};
    } else {
      r.cluster = cluster;
      for (const auto& d : droplets) {
        if (HasTag(d, ClusterTag(cluster))) r.vm_names.push_back(json::Str(d, "name"));
      }
    }
    r.created_at = json::Str(fw, "created_at");
    out.push_back(r);
  }
  // A key gpuprov registered (gpuprov-<fingerprint>) belongs to the droplets tagged with it.
  for (const auto& k : ListAll("/account/keys", "ssh_keys", "list SSH keys")) {
    const std::string name = json::Str(k, "name");
    if (name.rfind(kResourcePrefix, 0) != 0) continue;
    kit::ResourceFields r = kit::Resource("ssh_key", json::Str(k, "id"), name);
    for (const auto& d : droplets) {
      if (HasTag(d, KeyTag(r.id))) r.vm_names.push_back(json::Str(d, "name"));
    }
    out.push_back(r);
  }
  // A cluster's VPC (VPCs take no tags: the gpuprov- name is the mark) belongs to the droplets
  // in it; last, since DigitalOcean deletes only a VPC without members.
  for (const auto& v : ListAll("/vpcs", "vpcs", "list VPCs")) {
    const std::string name = json::Str(v, "name");
    if (name.rfind(kResourcePrefix, 0) != 0 || IsDefaultVpc(v)) continue;
    kit::ResourceFields r = kit::Resource("cluster_network", json::Str(v, "id"), name);
    r.cluster = name.substr(std::string(kResourcePrefix).size());  // gpuprov-<cluster>
    for (const auto& d : droplets) {
      if (json::Str(d, "vpc_uuid") == r.id) r.vm_names.push_back(json::Str(d, "name"));
    }
    r.region = json::Str(v, "region");
    r.created_at = json::Str(v, "created_at");
    out.push_back(r);
  }
  return kit::ResourcesResult(out);
}

std::string DigitalOceanDriver::DeleteResource(const std::string& request_json) {
  const kit::ResourceRef ref = kit::ParseResourceRequest(
      request_json, {"vm", "firewall", "ssh_key", "cluster_firewall", "cluster_network"});
  const bool firewall = ref.kind == "firewall" || ref.kind == "cluster_firewall";
  const std::string path = ref.kind == "vm"                ? "/droplets/" + Encode(ref.id)
                           : firewall                      ? "/firewalls/" + Encode(ref.id)
                           : ref.kind == "cluster_network" ? "/vpcs/" + Encode(ref.id)
                                                           : "/account/keys/" + Encode(ref.id);
  const char* member = ref.kind == "vm"                ? "droplet"
                       : firewall                      ? "firewall"
                       : ref.kind == "cluster_network" ? "vpc"
                                                       : "ssh_key";
  // Looked up again: only what still carries gpuprov's mark is deleted.
  const kit::ApiAnswer a =
      api_->Call("GET", path, "get " + ref.kind + " " + ref.id, nullptr, {404});
  ObjectPtr o = a.status == 404 ? nullptr : json::Obj(a.doc, member);
  if (!o) return kit::DeletedResult(false);
  const bool ours = ref.kind == "vm" ? HasTag(o, kManagedTag)
                                     : json::Str(o, "name").rfind(kResourcePrefix, 0) == 0 &&
                                           !IsDefaultVpc(o);
  if (!ours) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      ref.kind + " " + ref.id + " does not carry gpuprov's " +
                          (ref.kind == "vm" ? "tag" : "name") + "; gpuprov leaves it alone");
  }
  host_.Progress("deleting " + ref.kind + " " + json::Str(o, "name") + " (id " + ref.id + ")");
  const kit::ApiAnswer d =
      api_->Call("DELETE", path, "delete " + ref.kind + " " + ref.id, nullptr, {404});
  return kit::DeletedResult(d.status != 404);
}

std::string DigitalOceanDriver::FindClusterVpc(const std::string& cluster,
                                               const std::string& region) {
  const std::string name = kit::ClusterResourceName(cluster);
  for (const auto& v : ListAll("/vpcs", "vpcs", "list VPCs")) {
    if (json::Str(v, "name") != name) continue;
    if (json::Str(v, "region") != region) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "the VPC " + name + " of cluster " + cluster + " is in region " +
                            json::Str(v, "region") + ", not " + region +
                            " (VPC names are unique in an account): put the cluster in that "
                            "region, or remove the leftover with `gpuprov gc --delete`");
    }
    return json::Str(v, "id");
  }
  return "";
}

std::string DigitalOceanDriver::EnsureClusterVpc(const std::string& cluster,
                                                 const std::string& region) {
  const std::string name = kit::ClusterResourceName(cluster);
  if (std::string id = FindClusterVpc(cluster, region); !id.empty()) return id;
  // vpcs_create.yml: name and region; DigitalOcean picks a free ip_range when none is sent.
  Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  body->set("name", name);
  body->set("region", region);
  body->set("description", "gpuprov cluster " + cluster);
  host_.Progress("creating VPC " + name + " in " + region);
  // VPC names are unique in an account (vpc.yml: "Must be unique"): when another node of the
  // cluster made it since the lookup above, the create is refused (422 unprocessable_entity,
  // 409 conflict: vpcs_create.yml's error responses) and that VPC is the cluster's.
  const kit::ApiAnswer a =
      api_->Call("POST", "/vpcs", "create VPC " + name, body, {409, 422}, false);
  if (a.status == 409 || a.status == 422) {
    if (std::string id = FindClusterVpc(cluster, region); !id.empty()) {
      host_.Debug("VPC " + name + " was made meanwhile by another node of the cluster (id " + id +
                  ")");
      return id;
    }
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "create VPC " + name + ": DigitalOcean refused it (HTTP " +
                          std::to_string(a.status) + "): " + json::Str(a.doc, "message"));
  }
  const std::string id = json::Str(json::Obj(a.doc, "vpc"), "id");
  if (id.empty()) {
    throw DriverError(GPUPROV_STATUS_FAILED, "create VPC " + name + ": DigitalOcean returned no id");
  }
  return id;
}

void DigitalOceanDriver::EnsureClusterFirewall(const std::string& cluster,
                                               const std::vector<kit::PeerPort>& ports) {
  const std::string name = ClusterFirewallName(cluster);
  const std::string tag = ClusterTag(cluster);
  // firewall_rule.yml: sources.tags admits the droplets carrying the tag (their public and
  // private addresses); the firewall's own tags apply it to them.
  Array::Ptr inbound = new Array();
  for (const auto& p : ports) {
    Object::Ptr rule = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    rule->set("protocol", p.protocol);
    rule->set("ports", std::to_string(p.port));
    Object::Ptr src = new Object();
    Array::Ptr tags = new Array();
    tags->add(tag);
    src->set("tags", tags);
    rule->set("sources", src);
    inbound->add(rule);
  }
  Array::Ptr targets = new Array();
  targets->add(tag);
  ObjectPtr existing;
  for (const auto& fw : ListAll("/firewalls", "firewalls", "list firewalls")) {
    if (json::Str(fw, "name") == name && ClusterOfFirewall(fw) == cluster) existing = fw;
  }
  auto rules_of = [](const Array::Ptr& rules) {
    std::set<std::string> out;  // "tcp/6443" of each rule from exactly the cluster tag
    for (size_t i = 0; rules && i < rules->size(); ++i) {
      Object::Ptr r = json::ObjAt(rules, i);
      Array::Ptr t = json::Arr(json::Obj(r, "sources"), "tags");
      const std::string from = t && t->size() == 1 ? t->get(0).toString() : "";
      out.insert(json::Str(r, "protocol") + "/" + json::Str(r, "ports") + "<" + from);
    }
    return out;
  };
  Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  body->set("name", name);
  body->set("inbound_rules", inbound);
  body->set("outbound_rules", OutboundRules());
  body->set("tags", targets);
  if (!existing) {
    host_.Progress("creating firewall " + name + " (" + kit::PeerPortsText(ports) +
                   " between the droplets tagged " + tag + ")");
    api_->Call("POST", "/firewalls", "create firewall " + name, body, {}, false);
    KeepOneClusterFirewall(cluster);
    return;
  }
  if (rules_of(json::Arr(existing, "inbound_rules")) == rules_of(inbound)) return;
  host_.Progress("setting " + kit::PeerPortsText(ports) + " of firewall " + name);
  // PUT replaces the whole firewall (firewalls_update.yml).
  api_->Call("PUT", "/firewalls/" + Encode(json::Str(existing, "id")), "update firewall " + name,
             body);
}

void DigitalOceanDriver::KeepOneClusterFirewall(const std::string& cluster) {
  const std::string name = ClusterFirewallName(cluster);
  std::vector<std::string> ids;
  for (const auto& fw : ListAll("/firewalls", "firewalls", "list firewalls")) {
    if (json::Str(fw, "name") == name && ClusterOfFirewall(fw) == cluster) {
      ids.push_back(json::Str(fw, "id"));
    }
  }
  if (ids.size() < 2) return;
  // Every node that made one keeps the smallest id of those it sees and deletes the rest; the
  // last to look sees them all, so one firewall stays.
  std::sort(ids.begin(), ids.end());
  for (std::size_t i = 1; i < ids.size(); ++i) {
    host_.Debug("deleting firewall " + name + " (id " + ids[i] +
                "): another node of the cluster made one at the same time");
    api_->Call("DELETE", "/firewalls/" + Encode(ids[i]), "delete firewall " + name, nullptr,
               {404});
  }
}

void DigitalOceanDriver::RemoveClusterLeftovers(const std::string& cluster,
                                                const std::string& leaving_id) {
  for (const auto& d : ManagedDroplets()) {
    if (json::Str(d, "id") != leaving_id && HasTag(d, ClusterTag(cluster))) return;
  }
  const std::string fw_name = ClusterFirewallName(cluster);
  for (const auto& fw : ListAll("/firewalls", "firewalls", "list firewalls")) {
    if (json::Str(fw, "name") != fw_name || ClusterOfFirewall(fw) != cluster) continue;
    host_.Progress("deleting firewall " + fw_name + " (the cluster's last droplet is gone)");
    api_->Call("DELETE", "/firewalls/" + Encode(json::Str(fw, "id")), "delete firewall " + fw_name,
               nullptr, {404});
  }
  const std::string vpc_name = kit::ClusterResourceName(cluster);
  for (const auto& v : ListAll("/vpcs", "vpcs", "list VPCs")) {
    if (json::Str(v, "name") != vpc_name || IsDefaultVpc(v)) continue;
    host_.Progress("deleting VPC " + vpc_name);
    // A droplet still being destroyed is still a member: the VPC stays, and gc removes it.
    const kit::ApiAnswer a = api_->Call("DELETE", "/vpcs/" + Encode(json::Str(v, "id")),
                                        "delete VPC " + vpc_name, nullptr, {403, 404, 409});
    if (a.status == 403 || a.status == 409) {
      host_.Warning("the VPC " + vpc_name + " still has members; `gpuprov gc --delete` removes "
                    "it once they are gone");
    }
  }
}

std::string DigitalOceanDriver::OpenPeerPorts(const std::string& request_json) {
  const kit::PeerPortsRequest r = kit::ParsePeerPortsRequest(request_json);
  EnsureClusterFirewall(r.cluster, r.peer_ports);
  return "{}";
}

}  // namespace gpuprov::digitalocean

// The keys of [clouds.digitalocean] this driver reads (gpuprov refuses others in config.toml);
// the kit's standard keys first, README.md's settings table lists the same
// (driver_settings_docs_test).
constexpr gpuprov_type_config_key kDigitalOceanConfigKeys[] = {
    gpuprov::drivers::kRetryKey,
    gpuprov::drivers::TokenEnvKey("the environment variable that holds the API token"),
    gpuprov::sdk::StringKey("region", "the region used when provision names none (else the first DigitalOcean sells the size in now)"),
    gpuprov::sdk::StringKey("token", "the API token itself (works; prefer the environment)"),
    gpuprov::sdk::StringKey("doctl_config", "doctl's config file (default: ~/.config/doctl, else ~/Library/Application Support/doctl, config.yaml)"),
    gpuprov::sdk::StringKey("doctl_context", "the doctl auth context to read the token from"),
    gpuprov::sdk::StringListKey("capacity_messages", "more 422 message substrings that mean no capacity"),
};

GPUPROV_DRIVER(gpuprov::digitalocean::DigitalOceanDriver, kDigitalOceanConfigKeys)
