// SPDX-License-Identifier: Apache-2.0
#include "gcp_driver.h"

#include <Poco/JSON/Array.h>
#include <Poco/UUIDGenerator.h>

#include <algorithm>
#include <cstdlib>

#include "driver_kit.h"
#include "gcp_rules.h"

namespace gpuprov::gcp {
namespace {

namespace kit = gpuprov::drivers;

// What a VM powered off from inside still costs (gpuprov's TTL on the node powers it off),
// from REFERENCE.md: a powered-off instance is TERMINATED, i.e. stopped, not deleted; a stopped
// instance bills its persistent disks, not its vCPUs and GPUs.
constexpr kit::PoweredOffCost kPoweredOffCost = kit::PoweredOffCost::kDisk;

using namespace gpuprov::drivers::prelude;  // DriverError, json, Array, Object
using std::chrono::milliseconds;

constexpr int kMaxPages = 100;
constexpr const char* kUserDataKey = "user-data";
constexpr const char* kSshKeysKey = "ssh-keys";

std::string Encode(const std::string& s) { return kit::EncodeComponent(s); }

std::string NewRequestId() {
  return Poco::UUIDGenerator::defaultGenerator().createRandom().toString();
}

std::string EnvOr(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? kit::TrimSpace(v) : "";
}

// The tcp ports a firewall rule allows (protocol "all", or tcp without ports: every port).
std::set<int> AllowedTcpPorts(const Object::Ptr& fw) {
  std::vector<std::string> specs;
  Array::Ptr allowed = json::Arr(fw, "allowed");
  for (size_t i = 0; allowed && i < allowed->size(); ++i) {
    Object::Ptr a = json::ObjAt(allowed, i);
    const std::string proto = json::Str(a, "IPProtocol");
    if (proto != "tcp" && proto != "all") continue;
    Array::Ptr list = json::Arr(a, "ports");
    if (!list || proto == "all") specs.push_back("all");
    for (size_t j = 0; list && j < list->size(); ++j) {
      specs.push_back(list->get(static_cast<unsigned>(j)).toString());
    }
  }
  return kit::PortsOfRanges(specs);
}

// Whether a firewall rule admits every source (its sourceRanges hold 0.0.0.0/0).
bool OpenToAll(const Object::Ptr& fw) {
  Array::Ptr ranges = json::Arr(fw, "sourceRanges");
  for (size_t i = 0; ranges && i < ranges->size(); ++i) {
    if (ranges->get(static_cast<unsigned>(i)).toString() == "0.0.0.0/0") return true;
  }
  return false;
}

std::string Join(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string PortList(const std::vector<int>& ports) {
  std::vector<std::string> s;
  for (int p : ports) s.push_back(std::to_string(p));
  return Join(s, ",");
}

// The value of one metadata item of an instance, "" when absent.
std::string MetadataValue(const Object::Ptr& instance, const std::string& key) {
  Array::Ptr items = json::Arr(json::Obj(instance, "metadata"), "items");
  if (!items) return "";
  for (size_t i = 0; i < items->size(); ++i) {
    Object::Ptr item = json::ObjAt(items, i);
    if (json::Str(item, "key") == key) return json::Str(item, "value");
  }
  return "";
}

std::string LabelOf(const Object::Ptr& instance, const std::string& key) {
  return json::Str(json::Obj(instance, "labels"), key);
}

// The strings of a JSON array field ("sourceTags"), in order; empty when absent.
std::vector<std::string> StringsOf(const Object::Ptr& o, const std::string& key) {
  std::vector<std::string> out;
  Array::Ptr a = json::Arr(o, key);
  for (size_t i = 0; a && i < a->size(); ++i) {
    out.push_back(a->get(static_cast<unsigned>(i)).toString());
  }
  return out;
}

// The cluster a firewall rule serves, "" for another rule: gpuprov-<cluster>-peers whose
// sourceTags and targetTags are exactly gpuprov-cluster-<cluster>, with no sourceRanges (so it
// admits the cluster's instances only: "Source tags cannot be used to control traffic to an
// instance's external IP address", compute v1 Firewall.sourceTags,
// https://cloud.google.com/compute/docs/reference/rest/v1/firewalls).
std::string ClusterOfFirewall(const Object::Ptr& fw) {
  const std::string name = json::Str(fw, "name");
  const std::string prefix = kit::kResourcePrefix, suffix = "-peers";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return "";
  }
  const std::string cluster =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  const std::vector<std::string> tag = {kClusterNetworkTagPrefix + cluster};
  if (StringsOf(fw, "sourceTags") != tag || StringsOf(fw, "targetTags") != tag ||
      !StringsOf(fw, "sourceRanges").empty()) {
    return "";
  }
  return cluster;
}

// "tcp/6443" for each port a rule allows ("tcp/all" for a protocol allowed on every port).
std::set<std::string> AllowedSpecs(const Array::Ptr& allowed) {
  std::set<std::string> out;
  for (size_t i = 0; allowed && i < allowed->size(); ++i) {
    Object::Ptr a = json::ObjAt(allowed, i);
    const std::string proto = json::Str(a, "IPProtocol");
    const std::vector<std::string> ports = StringsOf(a, "ports");
    if (ports.empty()) out.insert(proto + "/all");
    for (const auto& p : ports) out.insert(proto + "/" + p);
  }
  return out;
}

// A firewall rule's `allowed` for the peer ports: one entry per protocol, in the order given.
Array::Ptr PeerAllowed(const std::vector<kit::PeerPort>& ports) {
  Array::Ptr allowed = new Array();
  std::vector<std::string> protocols;
  for (const auto& p : ports) {
    if (std::find(protocols.begin(), protocols.end(), p.protocol) == protocols.end()) {
      protocols.push_back(p.protocol);
    }
  }
  for (const auto& proto : protocols) {
    Object::Ptr entry = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    entry->set("IPProtocol", proto);
    Array::Ptr list = new Array();
    for (const auto& p : ports) {
      if (p.protocol == proto) list->add(std::to_string(p.port));
    }
    entry->set("ports", list);
    allowed->add(entry);
  }
  return allowed;
}

Array::Ptr OneString(const std::string& s) {
  Array::Ptr a = new Array();
  a->add(s);
  return a;
}

Object::Ptr Item(const std::string& key, const std::string& value) {
  Object::Ptr o = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  o->set("key", key);
  o->set("value", value);
  return o;
}

}  // namespace

GcpDriver::GcpDriver(const gpuprov::sdk::InitContext& ctx) : host_(ctx.host) {
  // The API base is accepted as well as the host ("https://compute.googleapis.com/compute/v1").
  kit::DriverSettings settings = kit::ParseSettings(ctx.config_json, kDefaultEndpoint, kApiPath);
  endpoint_ = settings.endpoint;
  config_ = settings.config;
  default_region_ = json::Str(config_, "region");
  if (default_region_.empty()) default_region_ = json::Str(config_, "zone");
  if (default_region_.empty()) default_region_ = kDefaultRegion;
  ssh_user_ = json::Str(config_, "ssh_user");
  if (ssh_user_.empty()) ssh_user_ = kDefaultSshUser;
  network_ = json::Str(config_, "network");
  if (network_.empty()) network_ = "default";
  subnetwork_ = json::Str(config_, "subnetwork");
  poll_interval_ =
      std::max(milliseconds(10), kit::PollIntervalSetting(config_, milliseconds(2000)));
  operation_timeout_ = std::chrono::seconds(
      std::max<long long>(1, json::Int(config_, "operation_timeout_seconds", 900)));
  policy_ = kit::RetryPolicyFrom(config_);
  kit::ApiDialect api = ComputeApi();
  api.base_path = [this] { return std::string(kApiPath) + "/projects/" + Encode(Project()); };
  // The hints read what is known when a call is refused, and never resolve anything.
  api.hint_fields = {
      {"project", [this] { return project_; }},
      {"account",
       [this] {
         if (!tokens_) return std::string("these credentials");
         const GoogleCredentials& c = tokens_->credentials();
         return c.client_email.empty() ? c.origin : c.client_email;
       }},
      {"origin", [this] { return tokens_ ? tokens_->credentials().origin : std::string("?"); }},
  };
  kit::ApiAuth auth;
  // An expired or revoked token: one new token, then the call again (REFERENCE.md §1.4).
  auth.token = [this](bool renew) { return Tokens().Token(renew); };
  api_ =
      std::make_unique<kit::ApiClient>(endpoint_, policy_, host_, std::move(api), std::move(auth));
}

TokenSource& GcpDriver::Tokens() {
  if (!tokens_) {
    std::optional<GoogleCredentials> creds =
        FindCredentials(json::Str(config_, "credentials_file"));
    if (!creds) {
      throw DriverError(GPUPROV_STATUS_AUTH,
                        "no Google Cloud credentials found: " + CredentialsHint());
    }
    host_.Debug("Google credentials from " + creds->Describe());
    tokens_ = std::make_unique<TokenSource>(std::move(*creds), policy_, host_);
  }
  return *tokens_;
}

const std::string& GcpDriver::Project() {
  if (project_.empty()) {
    std::string p = json::Str(config_, "project");
    if (p.empty()) p = EnvOr("GOOGLE_CLOUD_PROJECT");
    if (p.empty()) p = EnvOr("CLOUDSDK_CORE_PROJECT");
    // A service-account key names its project; quota_project_id (authorized_user and
    // others) is only the project billed for quota, not the one to create in.
    if (p.empty()) p = Tokens().credentials().project_id;
    if (p.empty()) p = GcloudConfigProject();
    const GoogleCredentials& c = Tokens().credentials();
    if (p.empty() && c.type == GoogleCredentials::Type::kMetadataServer) {
      p = kit::TrimSpace(
          MetadataGet(c.metadata_host, "project/project-id", std::chrono::seconds(5))
              .value_or(""));
    }
    if (p.empty()) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "no Google Cloud project: set project in [clouds.gcp] of "
                        "~/.gpu-provisioner/config.toml, GOOGLE_CLOUD_PROJECT, or gcloud's "
                        "`gcloud config set project <id>` (credentials from " +
                            c.Describe() + " name none)");
    }
    project_ = p;
  }
  return project_;
}

GcpDriver::ObjectPtr GcpDriver::WaitOperation(const ObjectPtr& op_in, const std::string& what) {
  ObjectPtr op = op_in;
  if (!op) throw DriverError(GPUPROV_STATUS_FAILED, what + ": no operation in the answer");
  const std::string name = json::Str(op, "name");
  std::string path;
  if (json::Has(op, "zone")) {
    path = "zones/" + LastSegment(json::Str(op, "zone")) + "/operations/" + Encode(name);
  } else if (json::Has(op, "region")) {
    path = "regions/" + LastSegment(json::Str(op, "region")) + "/operations/" + Encode(name);
  } else {
    path = "global/operations/" + Encode(name);
  }
  kit::PollOptions poll{what + ": operation " + name, poll_interval_,
                       std::chrono::duration_cast<milliseconds>(operation_timeout_)};
  bool first = true;
  const bool done = kit::PollUntil(host_, poll, [&](std::string* state) {
    if (!first) {
      op = api_->Call("GET", path, what + " (operation " + name + ")").doc;
      if (!op) throw DriverError(GPUPROV_STATUS_FAILED, what + ": empty operation");
    }
    first = false;
    *state = json::Str(op, "status");
    return *state == "DONE";
  });
  if (!done) {
    throw DriverError(GPUPROV_STATUS_TRANSIENT,
                      what + ": operation " + name + " is still " + json::Str(op, "status") +
                          " after " + std::to_string(operation_timeout_.count()) +
                          " s; re-run to continue (gpuprov finds the VM by name)");
  }
  return op;
}

void GcpDriver::AwaitOperation(const ObjectPtr& op, const std::string& what,
                               const std::string& tolerated_code) {
  OperationError err = ParseOperationError(WaitOperation(op, what));
  if (err.code != "" && err.code != tolerated_code) {
    throw DriverError(ClassifyOperationError(err.code), what + ": " + err.code + ": " + err.message);
  }
}

std::vector<GcpDriver::ObjectPtr> GcpDriver::AggregatedInstances(const std::string& filter) {
  std::vector<ObjectPtr> out;
  std::string token;
  for (int page = 0; page < kMaxPages; ++page) {
    std::string path = "aggregated/instances?maxResults=500&returnPartialSuccess=true";
    if (!filter.empty()) path += "&filter=" + Encode(filter);
    if (!token.empty()) path += "&pageToken=" + Encode(token);
    ObjectPtr doc = api_->Call("GET", path, "list instances").doc;
    if (ObjectPtr items = json::Obj(doc, "items")) {
      for (const auto& [scope, value] : *items) {
        if (value.type() != typeid(Object::Ptr)) continue;
        Array::Ptr list = json::Arr(value.extract<Object::Ptr>(), "instances");
        for (size_t i = 0; list && i < list->size(); ++i) {
          if (ObjectPtr inst = json::ObjAt(list, i)) out.push_back(inst);
        }
      }
    }
    token = json::Str(doc, "nextPageToken");
    if (token.empty()) break;
  }
  return out;
}

GcpDriver::ObjectPtr GcpDriver::FindByName(const std::string& name, bool* foreign) {
  if (foreign) *foreign = false;
  for (const auto& inst : AggregatedInstances("name = \"" + name + "\"")) {
    if (json::Str(inst, "name") != name) continue;
    if (LabelOf(inst, kManagedLabel) == "1") return inst;
    if (foreign) *foreign = true;
  }
  return nullptr;
}

GcpDriver::ObjectPtr GcpDriver::Resolve(const ObjectPtr& request) {
  const auto [id, name] = kit::RequireIdOrName(request);
  // id = "<zone>/<name>": one direct read.
  size_t slash = id.find('/');
  if (slash != std::string::npos && slash > 0 && slash + 1 < id.size()) {
    const std::string zone = id.substr(0, slash), iname = id.substr(slash + 1);
    const kit::ApiAnswer a =
        api_->Call("GET", "zones/" + Encode(zone) + "/instances/" + Encode(iname),
                   "get instance " + iname, nullptr, {404});
    const ObjectPtr& inst = a.doc;
    if (a.status != 404 && inst && LabelOf(inst, kManagedLabel) == "1" &&
        (name.empty() || json::Str(inst, "name") == name)) {
      return inst;
    }
    if (name.empty()) return nullptr;
  }
  return FindByName(name.empty() ? id : name);
}

std::vector<std::string> GcpDriver::ZonesFor(const std::string& region,
                                             const std::string& accelerator) {
  std::vector<std::string> zones;
  if (accelerator.empty()) {
    ObjectPtr r = api_->Call("GET", "regions/" + Encode(region), "get region " + region).doc;
    if (Array::Ptr list = json::Arr(r, "zones")) {
      for (size_t i = 0; i < list->size(); ++i) {
        zones.push_back(LastSegment(list->get(static_cast<unsigned>(i)).toString()));
      }
    }
  } else {
    ObjectPtr doc =
        api_->Call("GET",
                   "aggregated/acceleratorTypes?filter=" + Encode("name = \"" + accelerator + "\""),
                   "list zones with " + accelerator)
            .doc;
    if (ObjectPtr items = json::Obj(doc, "items")) {
      for (const auto& [scope, value] : *items) {
        if (value.type() != typeid(Object::Ptr)) continue;
        Array::Ptr list = json::Arr(value.extract<Object::Ptr>(), "acceleratorTypes");
        for (size_t i = 0; list && i < list->size(); ++i) {
          ObjectPtr a = json::ObjAt(list, i);
          if (json::Str(a, "name") != accelerator) continue;
          const std::string zone = LastSegment(json::Str(a, "zone"));
          if (RegionOf(zone) == region) zones.push_back(zone);
        }
      }
    }
  }
  std::sort(zones.begin(), zones.end());
  zones.erase(std::unique(zones.begin(), zones.end()), zones.end());
  return zones;
}

GcpDriver::ObjectPtr GcpDriver::NewIngressRule(const std::string& fw_name,
                                               const std::string& description) const {
  Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  body->set("name", fw_name);
  body->set("description", description);
  body->set("network", "global/networks/" + network_);
  body->set("direction", "INGRESS");
  body->set("priority", 1000);
  return body;
}

GcpDriver::ObjectPtr GcpDriver::GetFirewall(const std::string& vm_name) {
  return GetFirewallNamed(FirewallName(vm_name));
}

GcpDriver::ObjectPtr GcpDriver::GetFirewallNamed(const std::string& fw_name) {
  const kit::ApiAnswer a = api_->Call("GET", "global/firewalls/" + Encode(fw_name),
                                      "get firewall rule " + fw_name, nullptr, {404});
  return a.status == 404 ? nullptr : a.doc;
}

void GcpDriver::FirewallOperation(const std::string& method, const std::string& fw_name,
                                  const ObjectPtr& body, const std::string& what) {
  const std::string path =
      method == "POST" ? "global/firewalls" : "global/firewalls/" + Encode(fw_name);
  const kit::ApiAnswer op =
      api_->Call(method, path + "?requestId=" + NewRequestId(), what, body, {404});
  if (op.status == 404) return;  // a DELETE of a rule already gone
  AwaitOperation(op.doc, what);
}

void GcpDriver::SetPortRules(const std::string& vm_name, const std::vector<int>& ports,
                             const kit::PortSources& sources, bool exact) {
  std::vector<int> world, narrowed;
  for (int p : ports) (sources.IsNarrowed(p) ? narrowed : world).push_back(p);
  // The sources rule first, so that a port moved out of the 0.0.0.0/0 rule stays open to them.
  SetSourcesFirewall(vm_name, narrowed, sources.allow_from);
  EnsureFirewall(vm_name, world);
  if (exact && !narrowed.empty()) {
    if (ObjectPtr fw = GetFirewall(vm_name)) {
      RemoveFromFirewall(fw, std::set<int>(narrowed.begin(), narrowed.end()));
    }
  }
}

void GcpDriver::SetSourcesFirewall(const std::string& vm_name, const std::vector<int>& ports,
                                   const std::vector<std::string>& allow_from) {
  const std::string fw_name = SourcesFirewallName(vm_name);
  ObjectPtr fw = GetFirewallNamed(fw_name);
  if (ports.empty()) {
    if (fw) {
      host_.Progress("deleting firewall rule " + fw_name + " (no port of " + vm_name +
                     " is narrowed now)");
      FirewallOperation("DELETE", fw_name, nullptr, "delete firewall rule " + fw_name);
    }
    return;
  }
  Array::Ptr ranges = new Array();
  for (const auto& c : allow_from) ranges->add(c);
  Array::Ptr allowed = new Array();
  Object::Ptr tcp = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  tcp->set("IPProtocol", "tcp");
  Array::Ptr list = new Array();
  for (int p : ports) list->add(std::to_string(p));
  tcp->set("ports", list);
  allowed->add(tcp);
  const std::string summary = "tcp " + PortList(ports) + " from " + Join(allow_from);
  if (fw) {
    std::set<std::string> had;
    if (Array::Ptr r = json::Arr(fw, "sourceRanges")) {
      for (size_t i = 0; i < r->size(); ++i)
        had.insert(r->get(static_cast<unsigned>(i)).toString());
    }
    const std::set<int> had_ports = AllowedTcpPorts(fw);
    if (had == std::set<std::string>(allow_from.begin(), allow_from.end()) &&
        had_ports == std::set<int>(ports.begin(), ports.end())) {
      return;
    }
    Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    body->set("sourceRanges", ranges);
    body->set("allowed", allowed);
    host_.Progress("setting firewall rule " + fw_name + " to " + summary);
    FirewallOperation("PATCH", fw_name, body, "update firewall rule " + fw_name);
    return;
  }
  Object::Ptr body = NewIngressRule(
      fw_name, "gpuprov: inbound ports of VM " + vm_name + " open only to its --allow-from "
               "sources");
  body->set("sourceRanges", ranges);
  Array::Ptr targets = new Array();
  targets->add(FirewallName(vm_name));
  body->set("targetTags", targets);
  body->set("allowed", allowed);
  host_.Progress("creating firewall rule " + fw_name + " (" + summary + ")");
  const kit::ApiAnswer op = api_->Call("POST", "global/firewalls?requestId=" + NewRequestId(),
                                       "create firewall rule " + fw_name, body, {409});
  if (op.status == 409) {  // made in the meantime: make it match
    SetSourcesFirewall(vm_name, ports, allow_from);
    return;
  }
  AwaitOperation(op.doc, "create firewall rule " + fw_name);
}

void GcpDriver::RemoveFromFirewall(const ObjectPtr& fw, const std::set<int>& ports) {
  const std::string fw_name = json::Str(fw, "name");
  Array::Ptr allowed = new Array();
  std::vector<int> removed;
  Array::Ptr had = json::Arr(fw, "allowed");
  for (size_t i = 0; had && i < had->size(); ++i) {
    Object::Ptr a = json::ObjAt(had, i);
    Array::Ptr list = json::Arr(a, "ports");
    if (!a || json::Str(a, "IPProtocol") != "tcp" || !list) {
      allowed->add(had->get(static_cast<unsigned>(i)));
      continue;
    }
    Array::Ptr kept = new Array();
    for (size_t j = 0; j < list->size(); ++j) {
      const std::string spec = list->get(static_cast<unsigned>(j)).toString();
      const bool single = spec.find('-') == std::string::npos;
      if (single && ports.count(std::atoi(spec.c_str()))) {
        removed.push_back(std::atoi(spec.c_str()));
      } else {
        kept->add(spec);
      }
    }
    if (kept->size() == 0) continue;
    Object::Ptr entry = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    entry->set("IPProtocol", "tcp");
    entry->set("ports", kept);
    allowed->add(entry);
  }
  if (removed.empty()) return;
  if (allowed->size() == 0) {
    host_.Progress("deleting firewall rule " + fw_name + " (its ports are narrowed now)");
    FirewallOperation("DELETE", fw_name, nullptr, "delete firewall rule " + fw_name);
    return;
  }
  Object::Ptr body = new Object();
  body->set("allowed", allowed);
  host_.Progress("closing tcp " + PortList(removed) + " to 0.0.0.0/0 in firewall rule " + fw_name);
  FirewallOperation("PATCH", fw_name, body, "update firewall rule " + fw_name);
}

void GcpDriver::EnsureFirewall(const std::string& vm_name, const std::vector<int>& ports) {
  const std::string fw_name = FirewallName(vm_name);
  if (ports.empty()) return;
  if (ObjectPtr fw = GetFirewall(vm_name)) {
    AddToFirewall(fw, ports);
    return;
  }
  Object::Ptr body = NewIngressRule(fw_name, "gpuprov: inbound ports of VM " + vm_name);
  Array::Ptr sources = new Array();
  sources->add("0.0.0.0/0");
  body->set("sourceRanges", sources);
  Array::Ptr targets = new Array();
  targets->add(fw_name);
  body->set("targetTags", targets);
  Array::Ptr allowed = new Array();
  Object::Ptr tcp = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  tcp->set("IPProtocol", "tcp");
  Array::Ptr list = new Array();
  for (int p : ports) list->add(std::to_string(p));
  tcp->set("ports", list);
  allowed->add(tcp);
  body->set("allowed", allowed);
  const std::string query = "?requestId=" + NewRequestId();
  host_.Progress("creating firewall rule " + fw_name + " (tcp " + PortList(ports) +
                 " from 0.0.0.0/0)");
  const kit::ApiAnswer op = api_->Call("POST", "global/firewalls" + query,
                                       "create firewall rule " + fw_name, body, {409});
  if (op.status == 409) {  // made in the meantime: check it has the ports
    EnsureFirewall(vm_name, ports);
    return;
  }
  AwaitOperation(op.doc, "create firewall rule " + fw_name);
}

void GcpDriver::AddToFirewall(const ObjectPtr& fw, const std::vector<int>& ports) {
  const std::string fw_name = json::Str(fw, "name");
  const std::set<int> open = OpenToAll(fw) ? AllowedTcpPorts(fw) : std::set<int>{};
  std::vector<int> missing;
  for (int p : ports) {
    if (open.count(p) == 0) missing.push_back(p);
  }
  if (missing.empty()) return;
  if (!OpenToAll(fw)) {
    throw DriverError(GPUPROV_STATUS_FAILED,
                      "firewall rule " + fw_name + " does not admit 0.0.0.0/0 (its sourceRanges "
                      "were changed), so opening tcp " + PortList(missing) +
                      " in it would not reach this machine; add 0.0.0.0/0 or this machine's "
                      "address to its sourceRanges, or open the ports in a rule of your own");
  }
  // Only `allowed` changes, and only by one more entry: what the rule allowed stays.
  Array::Ptr allowed = new Array();
  if (Array::Ptr had = json::Arr(fw, "allowed")) {
    for (size_t i = 0; i < had->size(); ++i) allowed->add(had->get(static_cast<unsigned>(i)));
  }
  Object::Ptr tcp = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  tcp->set("IPProtocol", "tcp");
  Array::Ptr list = new Array();
  for (int p : missing) list->add(std::to_string(p));
  tcp->set("ports", list);
  allowed->add(tcp);
  Object::Ptr body = new Object();
  body->set("allowed", allowed);
  host_.Progress("opening tcp " + PortList(missing) + " in firewall rule " + fw_name);
  const kit::ApiAnswer op =
      api_->Call("PATCH", "global/firewalls/" + Encode(fw_name) + "?requestId=" + NewRequestId(),
                 "update firewall rule " + fw_name, body);
  AwaitOperation(op.doc, "update firewall rule " + fw_name);
}

std::vector<int> GcpDriver::OpenPortsOf(const std::string& vm_name, const std::vector<int>& ports) {
  std::set<int> allowed;
  if (ObjectPtr fw = GetFirewall(vm_name); fw && OpenToAll(fw)) allowed = AllowedTcpPorts(fw);
  if (ObjectPtr src = GetFirewallNamed(SourcesFirewallName(vm_name))) {
    for (int p : AllowedTcpPorts(src)) allowed.insert(p);
  }
  std::vector<int> open;
  for (int p : ports) {
    if (allowed.count(p)) open.push_back(p);
  }
  return open;
}

bool GcpDriver::DeleteFirewall(const std::string& vm_name) {
  const std::string fw_name = FirewallName(vm_name);
  bool deleted = false;
  // The sources rule first: it is gpuprov's when it targets the VM's tag.
  const std::string src_name = SourcesFirewallName(vm_name);
  if (ObjectPtr src = GetFirewallNamed(src_name)) {
    Array::Ptr tags = json::Arr(src, "targetTags");
    if (tags && tags->size() == 1 && tags->get(0).toString() == fw_name) {
      host_.Progress("deleting firewall rule " + src_name);
      FirewallOperation("DELETE", src_name, nullptr, "delete firewall rule " + src_name);
      deleted = true;
    }
  }
  ObjectPtr fw = GetFirewall(vm_name);
  if (!fw) return deleted;
  // Only the rule gpuprov made: it targets the VM's own tag.
  bool ours = false;
  if (Array::Ptr tags = json::Arr(fw, "targetTags")) {
    for (size_t i = 0; i < tags->size(); ++i) {
      ours = ours || tags->get(static_cast<unsigned>(i)).toString() == fw_name;
    }
  }
  if (!ours) {
    host_.Warning("firewall rule " + fw_name + " does not target tag " + fw_name +
                  "; gpuprov did not make it and leaves it");
    return deleted;
  }
  host_.Progress("deleting firewall rule " + fw_name);
  const kit::ApiAnswer op =
      api_->Call("DELETE", "global/firewalls/" + Encode(fw_name) + "?requestId=" + NewRequestId(),
                 "delete firewall rule " + fw_name, nullptr, {404});
  if (op.status == 404) return false;
  AwaitOperation(op.doc, "delete firewall rule " + fw_name);
  return true;
}

bool GcpDriver::DeleteInstance(const std::string& zone, const std::string& name) {
  const kit::ApiAnswer op = api_->Call(
      "DELETE",
      "zones/" + Encode(zone) + "/instances/" + Encode(name) + "?requestId=" + NewRequestId(),
      "delete instance " + name, nullptr, {404});
  if (op.status == 404) return false;
  AwaitOperation(op.doc, "delete instance " + name, "RESOURCE_NOT_FOUND");  // gone already: deleted
  return true;
}

void GcpDriver::WarnIfOsLogin(const ObjectPtr& inst) {
  // resourceStatus.effectiveInstanceMetadata.enableOsloginMetadataValue (compute v1 discovery
  // document, schema ResourceStatusEffectiveInstanceMetadata: "Effective enable-oslogin value
  // at Instance level"): true although gpuprov set enable-oslogin=FALSE means something
  // above the instance enforces OS Login (REFERENCE.md §F8). Whether Google reports an
  // organization policy's enforcement here is not confirmed; a refused insert is the other
  // form (Create). Absent: nothing is known, nothing is said.
  ObjectPtr effective =
      json::Obj(json::Obj(inst, "resourceStatus"), "effectiveInstanceMetadata");
  if (!json::Has(effective, "enableOsloginMetadataValue")) return;
  const Poco::Dynamic::Var on = effective->get("enableOsloginMetadataValue");
  if (!on.isBoolean() || !on.extract<bool>()) return;
  host_.Warning("instance " + json::Str(inst, "name") +
                " has OS Login on although gpuprov turned it off in its metadata: " +
                OsLoginPolicyHint(Project()));
}

GcpDriver::ObjectPtr GcpDriver::VmJson(const ObjectPtr& inst, const std::vector<int>& ports) const {
  const std::string zone = LastSegment(json::Str(inst, "zone"));
  const std::string name = json::Str(inst, "name");
  const std::string status = json::Str(inst, "status");
  const std::string machine = LastSegment(json::Str(inst, "machineType"));
  std::string accelerator;
  int accelerator_count = 0;
  if (ObjectPtr ga = json::ObjAt(json::Arr(inst, "guestAccelerators"), 0)) {
    accelerator = LastSegment(json::Str(ga, "acceleratorType"));
    accelerator_count = static_cast<int>(json::Int(ga, "acceleratorCount", 1));
  }
  std::string gpus;
  if (auto m = MachineTypeByName(machine, accelerator); m && m->gpu_count > 0) {
    gpus = m->gpu_type + ":" +
           std::to_string(m->guest_accelerator && accelerator_count > 0 ? accelerator_count
                                                                        : m->gpu_count);
  } else if (!accelerator.empty()) {
    gpus = accelerator + ":" + std::to_string(accelerator_count);
  }
  std::string public_ip, private_ip;
  if (ObjectPtr nic = json::ObjAt(json::Arr(inst, "networkInterfaces"), 0)) {
    if (ObjectPtr ac = json::ObjAt(json::Arr(nic, "accessConfigs"), 0)) {
      public_ip = json::Str(ac, "natIP");
    }
    // The internal address on the VPC network (compute v1 NetworkInterface.networkIP).
    private_ip = json::Str(nic, "networkIP");
  }
  std::string user = SshUserOf(MetadataValue(inst, kSshKeysKey));
  const std::string state = StateOf(status);
  std::string message = json::Str(inst, "statusMessage");
  if (status == "TERMINATED" && message.empty()) {
    message =
        "TERMINATED: the instance is stopped (not deleted); start it in the console, or "
        "gpuprov down removes it";
  }
  kit::VmFields vm;
  vm.id = zone + "/" + name;
  vm.name = name;
  vm.state = state;
  vm.public_ip = public_ip;
  vm.ssh_user = user.empty() ? ssh_user_ : user;
  vm.region = zone;
  vm.instance_type = machine;
  // The boot image is not on the instance (only on its disk): not reported.
  vm.gpus = gpus;
  vm.created_at = json::Str(inst, "creationTimestamp");
  vm.message = state == "running" || state == "pending"
                   ? std::string()
                   : status + (message.empty() ? "" : ": " + message);
  vm.spot = json::Str(json::Obj(inst, "scheduling"), "provisioningModel") == "SPOT";
  vm.ports = ports;
  vm.private_ip = private_ip;
  vm.cluster = LabelOf(inst, kit::kClusterTag);
  vm.role = LabelOf(inst, kit::kRoleTag);
  vm.tags.emplace();
  if (ObjectPtr labels = json::Obj(inst, "labels")) {
    for (const auto& [k, v] : *labels)
      vm.tags->emplace_back(k, v.isEmpty() ? std::string() : v.convert<std::string>());
  }
  return kit::VmJson(vm);
}

std::string GcpDriver::Check(const std::string& /*request_json*/) {
  const std::string& project = Project();
  ObjectPtr p = api_->Call("GET", std::string(kApiPath) + "/projects/" + Encode(project),
                           "read project " + project)
                    .doc;
  const GoogleCredentials& c = Tokens().credentials();
  Object result(Poco::JSON_PRESERVE_KEY_ORDER);
  std::string who = c.client_email.empty() ? c.TypeName() + " credentials" : c.client_email;
  const std::string name = json::Str(p, "name");
  result.set("account", (name.empty() ? project : name) + " / " + who);
  result.set("user_data_limit", static_cast<int64_t>(kMaxMetadataValueBytes));
  result.set("allow_from", true);  // a second firewall rule per VM holds the sources (IPv4)
  result.set("credentials_from", c.Describe());
  result.set("endpoint", endpoint_);
  return json::Stringify(result);
}

std::string GcpDriver::Offers(const std::string& request_json) {
  const auto [gpu, location] = kit::ParseOffersRequest(request_json, default_region_);
  Array::Ptr offers = new Array();
  std::optional<GceMachineType> mt =
      gpu ? MachineTypeForGpu(gpu->type, gpu->count) : CpuMachineType();
  if (!mt) {
    host_.Warning(NotOfferedMessage(gpu->type, gpu->count));
    return kit::OffersResult(offers, kPoweredOffCost);
  }
  // The zones of the region that have the GPU (acceleratorTypes); capacity is only learnt
  // at create time (REFERENCE.md §3.7).
  std::vector<std::string> zones;
  try {
    zones = ZonesFor(RegionOf(location), mt->accelerator);
    if (IsZone(location)) {
      const bool listed = std::find(zones.begin(), zones.end(), location) != zones.end();
      zones = listed ? std::vector<std::string>{location} : std::vector<std::string>{};
    }
  } catch (const DriverError& e) {
    if (e.status() == GPUPROV_STATUS_AUTH || e.status() == GPUPROV_STATUS_CANCELLED ||
        e.status() == GPUPROV_STATUS_INVALID_INPUT) {
      throw;
    }
    host_.Debug(std::string("zone list unavailable: ") + e.what());
    zones = {location};
  }
  if (zones.empty()) {
    host_.Warning(location + " has no zone with " +
                  (mt->accelerator.empty() ? std::string("machine type ") + mt->machine_type
                                           : mt->accelerator) +
                  "; try another --region");
    return kit::OffersResult(offers, kPoweredOffCost);
  }
  // Every machine type sells as a Spot VM too (https://cloud.google.com/compute/docs/instances/spot:
  // GPUs included); the table has no Spot prices, so the spot price is 0, unknown.
  Object::Ptr o = kit::OfferJson(
      {mt->machine_type, mt->gpu_type, mt->gpu_count, location, mt->price_per_hour, "",
       std::nullopt, "table", kPriceTableDate, 0.0});
  Array::Ptr zone_list = new Array();
  for (const auto& z : zones) zone_list->add(z);
  o->set("zones", zone_list);
  offers->add(o);
  return kit::OffersResult(offers, kPoweredOffCost);
}

std::string GcpDriver::Create(const std::string& request_json) {
  const auto [request, name, user_data] =
      kit::ParseCreateRequest(request_json, kVmNameRules, kMaxMetadataValueBytes,
                              "a Compute Engine metadata value");
  const std::string public_key = kit::RequiredSshPublicKey(
      request, "Compute Engine takes the login key from the ssh-keys metadata item");
  const std::string ssh_keys = SshKeysEntry(ssh_user_, public_key);
  const std::vector<int> ports = kit::WithSsh(kit::PortsOf(request, "open_ports"));
  // IPv4 only: a GCE firewall rule takes IPv4 or IPv6 ranges, not both, and the VM's access
  // config gives it an IPv4 address only.
  const kit::PortSources sources = kit::SourcesOf(request, /*ipv6_allowed=*/false);
  const std::optional<kit::ClusterRequest> cluster = kit::ParseCluster(request);
  const std::string cluster_tag = cluster ? ClusterNetworkTag(cluster->name) : "";

  const kit::CatalogueChoice choice = kit::ChooseInstanceType(
      MachineTypeCatalogue(), kit::ParseGpu(request), json::Str(request, "instance_type"));
  GceMachineType mt = choice.cpu_default ? CpuMachineType()
                      : choice.index    ? GpuMachineTypes()[*choice.index]
                                        : GceMachineType{"", 0, choice.row.instance_type, "", false, 0};
  if (!choice.cpu_default && !kit::ParseGpu(request) && mt.guest_accelerator) {
    mt = GceMachineType{"", 0, mt.machine_type, "", false, 0};  // an N1 type without a GPU: plain
  }
  const bool has_gpu = mt.gpu_count > 0;
  std::string location = json::Str(request, "region");
  if (location.empty()) location = default_region_;
  std::string image = json::Str(request, "image");
  if (image.empty()) image = json::Str(config_, "image");
  if (image.empty()) image = has_gpu ? kGpuImage : kCpuImage;
  if (image.find('/') == std::string::npos) image = "global/images/" + image;
  const long long disk_gb = json::Int(request, "disk_gb", 0) > 0 ? json::Int(request, "disk_gb", 0)
                                                                 : (has_gpu ? 100 : 20);

  // Idempotent by name: a VM of that name (any zone) is returned, not duplicated.
  bool foreign = false;
  if (ObjectPtr existing = FindByName(name, &foreign)) {
    host_.Info("instance " + name + " exists (" + LastSegment(json::Str(existing, "zone")) + ", " +
               json::Str(existing, "status") + ")");
    WarnIfOsLogin(existing);
    // A create interrupted before the cluster's rule: it is made now (it opens nothing to the
    // internet).
    if (cluster) EnsureClusterFirewall(cluster->name, cluster->peer_ports);
    // As it is: widening its ports is open_ports' job. Reported: what its rule opens.
    return kit::VmResult(VmJson(existing, OpenPortsOf(name, ports)), true);
  }
  if (foreign) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "an instance named " + name + " exists in project " + Project() +
                          " that gpuprov did not create (no label gpuprov=1); choose another "
                          "VM name");
  }

  std::vector<std::string> zones;
  if (IsZone(location)) {
    zones = {location};
  } else {
    zones = ZonesFor(location, mt.accelerator);
    if (zones.empty()) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "no zone of " + location + " offers " +
                            (mt.accelerator.empty() ? mt.machine_type : mt.accelerator) +
                            "; choose another --region");
    }
  }

  // name by an init-capture: clang 14 (the sanitizer build) cannot capture a structured binding.
  auto forget_firewall = [&, name = name] {
    try {
      DeleteFirewall(name);
    } catch (const std::exception& e) {
      host_.Warning("could not remove firewall rule " + FirewallName(name) + ": " + e.what() +
                    "; `gpuprov down " + name + " --cloud gcp` retries");
    }
  };
  // The firewall rules first: the instance carries their tag from the start.
  try {
    SetPortRules(name, ports, sources, /*exact=*/true);
  } catch (const DriverError&) {
    forget_firewall();
    throw;
  }

  std::vector<std::string> stockouts;  // the zones tried, each refused for capacity or rate
  std::vector<std::string> suggested;
  std::string last_capacity;
  bool any_capacity = false;  // else every zone refused the operation's rate: TRANSIENT
  for (const auto& zone : zones) {
    Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    body->set("name", name);
    body->set("machineType", "zones/" + zone + "/machineTypes/" + mt.machine_type);
    if (mt.guest_accelerator) {
      Array::Ptr accs = new Array();
      Object::Ptr a = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
      a->set("acceleratorType", "zones/" + zone + "/acceleratorTypes/" + mt.accelerator);
      a->set("acceleratorCount", mt.gpu_count);
      accs->add(a);
      body->set("guestAccelerators", accs);
    }
    if (kit::SpotRequested(request)) {
      // A Spot VM (compute v1 Scheduling: provisioningModel SPOT; Spot VMs take
      // onHostMaintenance TERMINATE and automaticRestart false): stopped when Compute Engine
      // preempts it (instanceTerminationAction STOP), so get sees it and its preemption.
      Object::Ptr scheduling = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
      scheduling->set("provisioningModel", "SPOT");
      scheduling->set("instanceTerminationAction", "STOP");
      scheduling->set("onHostMaintenance", "TERMINATE");
      scheduling->set("automaticRestart", false);
      body->set("scheduling", scheduling);
    } else if (has_gpu) {
      // GPUs cannot live-migrate (REFERENCE.md §3.1).
      Object::Ptr scheduling = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
      scheduling->set("onHostMaintenance", "TERMINATE");
      scheduling->set("automaticRestart", true);
      body->set("scheduling", scheduling);
    }
    Array::Ptr disks = new Array();
    Object::Ptr disk = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    disk->set("boot", true);
    disk->set("autoDelete", true);
    Object::Ptr init = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    init->set("sourceImage", image);
    init->set("diskSizeGb", std::to_string(disk_gb));
    // A3 Ultra and A4 take only Hyperdisk (BootDiskType, REFERENCE.md §F1).
    init->set("diskType", "zones/" + zone + "/diskTypes/" + BootDiskType(mt.machine_type));
    disk->set("initializeParams", init);
    disks->add(disk);
    body->set("disks", disks);
    Array::Ptr nics = new Array();
    Object::Ptr nic = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    nic->set("network", "global/networks/" + network_);
    if (!subnetwork_.empty()) {
      nic->set("subnetwork", subnetwork_.find('/') == std::string::npos
                                 ? "regions/" + RegionOf(zone) + "/subnetworks/" + subnetwork_
                                 : subnetwork_);
    }
    Array::Ptr access = new Array();
    Object::Ptr nat = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    nat->set("type", "ONE_TO_ONE_NAT");
    nat->set("name", "External NAT");
    access->add(nat);
    nic->set("accessConfigs", access);
    nics->add(nic);
    body->set("networkInterfaces", nics);
    Array::Ptr items = new Array();
    items->add(Item(kSshKeysKey, ssh_keys));
    items->add(Item("enable-oslogin", "FALSE"));  // keys from metadata only (REFERENCE.md §3.6)
    if (!user_data.empty()) items->add(Item(kUserDataKey, user_data));
    Object::Ptr metadata = new Object();
    metadata->set("items", items);
    body->set("metadata", metadata);
    Object::Ptr labels = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    for (const auto& [k, v] : kit::UserTags(request)) labels->set(LabelKey(k), LabelValue(v));
    labels->set(kManagedLabel, "1");
    labels->set(kNameLabel, name);
    if (cluster) {
      labels->set(kit::kClusterTag, cluster->name);
      labels->set(kit::kRoleTag, cluster->role);
    }
    body->set("labels", labels);
    Object::Ptr tags = new Object();
    Array::Ptr tag_items = new Array();
    tag_items->add(FirewallName(name));
    // The cluster's rule admits and targets this tag: the node reaches its peers' peer ports
    // on the network's internal addresses from its first boot on.
    if (cluster) tag_items->add(cluster_tag);
    tags->set("items", tag_items);
    body->set("tags", tags);

    host_.Progress("creating instance " + name + " (" + mt.machine_type +
                   (mt.guest_accelerator
                        ? " + " + std::to_string(mt.gpu_count) + "x " + mt.accelerator
                        : std::string()) +
                   " in " + zone + ")");
    kit::ApiAnswer op;
    try {
      // The same requestId on every retry of this request: GCE runs it once (REFERENCE.md §2).
      op = api_->Call("POST", "zones/" + zone + "/instances?requestId=" + NewRequestId(),
                      "create instance " + name, body, {409});
    } catch (const DriverError& e) {
      forget_firewall();
      if (IsOsLoginPolicyError(e.what())) {
        throw DriverError(e.status(),
                          kit::NoFullStop(e.what()) + ". " + OsLoginPolicyHint(Project()));
      }
      throw;
    }
    if (op.status == 409) {  // made in the meantime (another gpuprov run)
      if (ObjectPtr existing = FindByName(name)) {
        return kit::VmResult(VmJson(existing, ports), true);
      }
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "instance " + name + " exists in " + zone +
                            " but is not gpuprov's; choose another VM name");
    }
    ObjectPtr done = WaitOperation(op.doc, "create instance " + name);
    OperationError err = ParseOperationError(done);
    const std::string inst_path = "zones/" + zone + "/instances/" + Encode(name);
    if (err.code.empty()) {
      const kit::ApiAnswer inst =
          api_->Call("GET", inst_path, "get instance " + name, nullptr, {404});
      if (inst.status != 404) {
        host_.Info("instance " + name + " created in " + zone);
        WarnIfOsLogin(inst.doc);
        if (cluster) EnsureClusterFirewall(cluster->name, cluster->peer_ports);
        return kit::ConfirmSources(kit::VmResult(VmJson(inst.doc, ports), false), sources);
      }
      // Gone right after a DONE insert: as RESOURCE_NOT_FOUND below (REFERENCE.md §F5).
      err.code = kGoneAfterCreate;
      err.message = "the instance was not found right after its create operation finished";
    }
    // A failed insert may leave the instance visible for a moment (REFERENCE.md §8): make sure
    // it is gone before going on.
    try {
      const kit::ApiAnswer left =
          api_->Call("GET", inst_path, "get instance " + name, nullptr, {404});
      if (left.status != 404 && left.doc) DeleteInstance(zone, name);
    } catch (const DriverError& e) {
      host_.Warning("could not check that failed instance " + name + " is gone: " + e.what());
    }
    const ZoneFailure failure = ClassifyZoneFailure(err.code);
    const gpuprov_type_status st = failure.status;
    if (failure.next_zone) {
      host_.Info(zone + (st == GPUPROV_STATUS_CAPACITY ? " has no capacity for "
                                                       : " refused the create of ") +
                 mt.machine_type + " (" + err.code + ": " + failure.reason +
                 "); trying the next zone");
      stockouts.push_back(zone);
      last_capacity = err.code + ": " + kit::NoFullStop(err.message);
      if (st == GPUPROV_STATUS_CAPACITY) any_capacity = true;
      for (const auto& z : err.zones_available) suggested.push_back(z);
      continue;
    }
    forget_firewall();
    if (st == GPUPROV_STATUS_QUOTA) {
      throw DriverError(st,
                        "create instance " + name + " in " + zone + ": " + err.code + ": " +
                            kit::NoFullStop(err.message) +
                            ". Request more quota (IAM & Admin > Quotas) or choose another region");
    }
    throw DriverError(
        st, "create instance " + name + " in " + zone + ": " + err.code + ": " + err.message);
  }
  forget_firewall();
  // GCE's zonesAvailable hints, less the zones just tried.
  std::sort(suggested.begin(), suggested.end());
  suggested.erase(std::unique(suggested.begin(), suggested.end()), suggested.end());
  suggested.erase(std::remove_if(suggested.begin(), suggested.end(),
                                 [&](const std::string& z) {
                                   return std::find(stockouts.begin(), stockouts.end(), z) !=
                                          stockouts.end();
                                 }),
                  suggested.end());
  if (!any_capacity) {
    throw DriverError(GPUPROV_STATUS_TRANSIENT,
                      "Compute Engine refused to create " + mt.machine_type + " in " +
                          Join(stockouts) + " for the rate of operations (" + last_capacity +
                          "). Wait a minute and re-run");
  }
  throw DriverError(GPUPROV_STATUS_CAPACITY,
                    "no capacity for " + mt.machine_type + " in " + Join(stockouts) + " (" +
                        last_capacity + ")" +
                        (suggested.empty() ? "" : "; Compute Engine suggests " + Join(suggested)) +
                        ". Try again later or another --region");
}

GcpDriver::ObjectPtr GcpDriver::VmJsonWithPreemption(const ObjectPtr& inst,
                                                     const std::vector<int>& ports) {
  ObjectPtr vm = VmJson(inst, ports);
  if (json::Str(inst, "status") != "TERMINATED" || !json::Bool(vm, "spot", false)) return vm;
  // A Spot VM with instanceTerminationAction STOP is TERMINATED after a preemption as after a
  // stop; Compute Engine records the preemption as a zone operation of type
  // compute.instances.preempted on the instance (documentation, "Create and use Spot VMs").
  const std::string zone = LastSegment(json::Str(inst, "zone"));
  const std::string filter = "operationType=\"compute.instances.preempted\" AND targetId=\"" +
                             json::Str(inst, "id") + "\"";
  ObjectPtr ops = api_->Call("GET", "zones/" + Encode(zone) + "/operations?filter=" + Encode(filter),
                             "look for a preemption of " + json::Str(inst, "name"))
                      .doc;
  if (ObjectPtr op = json::ObjAt(json::Arr(ops, "items"), 0)) {
    const std::string said = json::Str(op, "statusMessage");
    vm->set("state", std::string("preempted"));
    vm->set("message", "compute.instances.preempted" + (said.empty() ? "" : ": " + said));
  }
  return vm;
}

std::string GcpDriver::Get(const std::string& request_json) {
  ObjectPtr request = json::ParseObject(request_json, "the get request");
  ObjectPtr inst = Resolve(request);
  if (!inst) {
    throw DriverError(GPUPROV_STATUS_NOT_FOUND, "no gpuprov instance " +
                                                    kit::VmReference(request) +
                                                    " in project " + Project());
  }
  return kit::VmResult(VmJsonWithPreemption(inst, {22}));
}

std::string GcpDriver::List(const std::string& /*request_json*/) {
  Array::Ptr vms = new Array();
  for (const auto& inst :
       AggregatedInstances(std::string("labels.") + kManagedLabel + " = \"1\"")) {
    if (LabelOf(inst, kManagedLabel) == "1") vms->add(VmJsonWithPreemption(inst, {22}));
  }
  return kit::VmsResult(vms);
}

std::string GcpDriver::Delete(const std::string& request_json) {
  ObjectPtr request = json::ParseObject(request_json, "the delete request");
  ObjectPtr inst = Resolve(request);
  std::string name = json::Str(request, "name");
  bool deleted = false;
  std::string cluster;
  if (inst) {
    name = json::Str(inst, "name");
    cluster = LabelOf(inst, kit::kClusterTag);
    const std::string zone = LastSegment(json::Str(inst, "zone"));
    host_.Progress("deleting instance " + name + " in " + zone);
    deleted = DeleteInstance(zone, name);
  }
  // The firewall rule of this VM name, also when the instance was already gone.
  if (!name.empty()) {
    try {
      kit::ValidateVmName(name, kVmNameRules);
      DeleteFirewall(name);
    } catch (const DriverError& e) {
      if (e.status() != GPUPROV_STATUS_INVALID_INPUT) throw;
    }
  }
  if (!cluster.empty()) RemoveClusterLeftovers(cluster, name);
  return kit::DeletedResult(deleted);
}

namespace {
// The VM of a rule gpuprov made, else "": gpuprov-<vm> targeting the tag of that name, or
// SourcesFirewallName(vm) targeting only the tag gpuprov-<vm>.
std::string FirewallVm(const Object::Ptr& fw) {
  const std::string name = json::Str(fw, "name");
  const std::string prefix = kit::kResourcePrefix;
  if (name.rfind(prefix, 0) != 0) return "";
  Array::Ptr tags = json::Arr(fw, "targetTags");
  for (size_t i = 0; tags && i < tags->size(); ++i) {
    const std::string tag = tags->get(static_cast<unsigned>(i)).toString();
    if (tag == name) return name.substr(prefix.size());
    if (tags->size() == 1 && tag.rfind(prefix, 0) == 0 &&
        SourcesFirewallName(tag.substr(prefix.size())) == name) {
      return tag.substr(prefix.size());
    }
  }
  return "";
}
bool OwnFirewall(const Object::Ptr& fw) { return !FirewallVm(fw).empty(); }
}  // namespace

std::string GcpDriver::ListResources(const std::string& /*request_json*/) {
  std::vector<kit::ResourceFields> out;
  for (const auto& inst :
       AggregatedInstances(std::string("labels.") + kManagedLabel + " = \"1\"")) {
    if (LabelOf(inst, kManagedLabel) != "1") continue;
    const std::string name = json::Str(inst, "name");
    const std::string zone = LastSegment(json::Str(inst, "zone"));
    kit::ResourceFields r = kit::Resource("vm", zone + "/" + name, name);
    const std::string labelled = LabelOf(inst, kNameLabel);
    r.vm_names = {labelled.empty() ? name : labelled};
    r.cluster = LabelOf(inst, kit::kClusterTag);
    r.role = LabelOf(inst, kit::kRoleTag);
    r.region = zone;
    r.created_at = json::Str(inst, "creationTimestamp");
    // GCE says no price: the driver's approximate us-central1 list price when it knows the type.
    std::string accelerator;
    if (Array::Ptr acc = json::Arr(inst, "guestAccelerators"); acc && acc->size() > 0) {
      accelerator = LastSegment(json::Str(json::ObjAt(acc, 0), "acceleratorType"));
    }
    if (auto type = MachineTypeByName(LastSegment(json::Str(inst, "machineType")), accelerator);
        type && type->price_per_hour > 0) {
      r.price_per_hour = type->price_per_hour;
    }
    out.push_back(r);
  }
  const std::vector<kit::ResourceFields> vms = out;
  std::string token;
  for (int page = 0; page < kMaxPages; ++page) {
    std::string path = "global/firewalls?maxResults=500";
    if (!token.empty()) path += "&pageToken=" + Encode(token);
    ObjectPtr doc = api_->Call("GET", path, "list firewall rules").doc;
    Array::Ptr items = json::Arr(doc, "items");
    for (size_t i = 0; items && i < items->size(); ++i) {
      ObjectPtr fw = json::ObjAt(items, i);
      if (!fw) continue;
      // A cluster's rule belongs to the instances that carry the cluster's label.
      if (const std::string cluster = ClusterOfFirewall(fw); !cluster.empty()) {
        const std::string name = json::Str(fw, "name");
        kit::ResourceFields r = kit::Resource("cluster_firewall", name, name);
        r.cluster = cluster;
        for (const auto& vm : vms) {
          if (vm.cluster == cluster) r.vm_names.push_back(vm.name);
        }
        r.region = "global";
        r.created_at = json::Str(fw, "creationTimestamp");
        out.push_back(r);
        continue;
      }
      if (!OwnFirewall(fw)) continue;
      const std::string name = json::Str(fw, "name");
      kit::ResourceFields r = kit::Resource("firewall", name, name);
      r.vm_names = {FirewallVm(fw)};
      r.region = "global";
      r.created_at = json::Str(fw, "creationTimestamp");
      out.push_back(r);
    }
    token = json::Str(doc, "nextPageToken");
    if (token.empty()) break;
  }
  return kit::ResourcesResult(out);
}

std::string GcpDriver::DeleteResource(const std::string& request_json) {
  const kit::ResourceRef ref =
      kit::ParseResourceRequest(request_json, {"vm", "firewall", "cluster_firewall"});
  auto refuse = [&] {
    return DriverError(GPUPROV_STATUS_INVALID_INPUT,
                       ref.kind + " " + ref.id +
                           " does not carry gpuprov's label or name; gpuprov leaves it alone");
  };
  if (ref.kind == "cluster_firewall") {
    const ObjectPtr fw = GetFirewallNamed(ref.id);
    if (!fw) return kit::DeletedResult(false);
    if (ClusterOfFirewall(fw).empty()) throw refuse();
    host_.Progress("deleting firewall rule " + ref.id);
    FirewallOperation("DELETE", ref.id, nullptr, "delete firewall rule " + ref.id);
    return kit::DeletedResult(true);
  }
  if (ref.kind == "firewall") {
    const kit::ApiAnswer a = api_->Call("GET", "global/firewalls/" + Encode(ref.id),
                                        "get firewall rule " + ref.id, nullptr, {404});
    const ObjectPtr& fw = a.doc;
    if (a.status == 404 || !fw) return kit::DeletedResult(false);
    if (!OwnFirewall(fw)) throw refuse();
    if (ref.id != FirewallName(FirewallVm(fw))) {  // a sources rule
      host_.Progress("deleting firewall rule " + ref.id);
      FirewallOperation("DELETE", ref.id, nullptr, "delete firewall rule " + ref.id);
      return kit::DeletedResult(true);
    }
    return kit::DeletedResult(DeleteFirewall(FirewallVm(fw)));
  }
  const size_t slash = ref.id.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 >= ref.id.size()) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "id '" + ref.id + "' is not <zone>/<name> as list_resources gives it");
  }
  const std::string zone = ref.id.substr(0, slash), name = ref.id.substr(slash + 1);
  const kit::ApiAnswer a = api_->Call("GET", "zones/" + Encode(zone) + "/instances/" + Encode(name),
                                      "get instance " + name, nullptr, {404});
  const ObjectPtr& inst = a.doc;
  if (a.status == 404 || !inst) return kit::DeletedResult(false);
  if (LabelOf(inst, kManagedLabel) != "1") throw refuse();
  host_.Progress("deleting instance " + name + " in " + zone);
  return kit::DeletedResult(DeleteInstance(zone, name));
}

void GcpDriver::EnsureClusterFirewall(const std::string& cluster,
                                      const std::vector<kit::PeerPort>& ports) {
  const std::string fw_name = ClusterFirewallName(cluster);
  const std::string tag = ClusterNetworkTag(cluster);
  const Array::Ptr allowed = PeerAllowed(ports);
  const std::string what = kit::PeerPortsText(ports) + " between the instances tagged " + tag;
  // Nodes created at once race to insert it: rule names are unique in a project, the losers
  // get 409 alreadyExists and check the rule the winner made.
  for (int attempt = 0; attempt < 3; ++attempt) {
    const ObjectPtr fw = GetFirewallNamed(fw_name);
    if (fw) {
      if (ClusterOfFirewall(fw) != cluster) {
        throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                          "firewall rule " + fw_name + " exists but is not gpuprov's rule of "
                          "cluster " + cluster +
                              " (its sourceTags and targetTags are not exactly " + tag +
                              ", or it has sourceRanges); rename or delete it");
      }
      if (AllowedSpecs(json::Arr(fw, "allowed")) == AllowedSpecs(allowed) &&
          !json::Bool(fw, "disabled", false)) {
        return;
      }
      // PATCH changes the fields it names (firewalls.patch, "patch semantics").
      Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
      body->set("allowed", allowed);
      body->set("disabled", false);
      host_.Progress("setting firewall rule " + fw_name + " to " + what);
      FirewallOperation("PATCH", fw_name, body, "update firewall rule " + fw_name);
      return;
    }
    // compute v1 Firewall (https://cloud.google.com/compute/docs/reference/rest/v1/firewalls):
    // sourceTags admits the primary internal addresses of the network's instances with the
    // tag; targetTags applies the rule to them; no sourceRanges, so nothing from outside.
    Object::Ptr body =
        NewIngressRule(fw_name, "gpuprov: the peer ports between the nodes of cluster " + cluster);
    body->set("sourceTags", OneString(tag));
    body->set("targetTags", OneString(tag));
    body->set("allowed", allowed);
    host_.Progress("creating firewall rule " + fw_name + " (" + what + ")");
    const kit::ApiAnswer op = api_->Call("POST", "global/firewalls?requestId=" + NewRequestId(),
                                         "create firewall rule " + fw_name, body, {409});
    if (op.status == 409) {
      host_.Debug("firewall rule " + fw_name + " was made meanwhile by another node of cluster " +
                  cluster);
      continue;
    }
    AwaitOperation(op.doc, "create firewall rule " + fw_name);
    return;
  }
  throw DriverError(GPUPROV_STATUS_TRANSIENT,
                    "firewall rule " + fw_name + ": its create answered alreadyExists but it "
                    "could not be read; re-run");
}

void GcpDriver::RemoveClusterLeftovers(const std::string& cluster, const std::string& leaving) {
  for (const auto& inst : AggregatedInstances("labels." + std::string(kit::kClusterTag) + " = \"" +
                                              cluster + "\"")) {
    if (LabelOf(inst, kManagedLabel) == "1" && LabelOf(inst, kit::kClusterTag) == cluster &&
        json::Str(inst, "name") != leaving) {
      return;
    }
  }
  const std::string fw_name = ClusterFirewallName(cluster);
  const ObjectPtr fw = GetFirewallNamed(fw_name);
  if (!fw || ClusterOfFirewall(fw) != cluster) return;
  host_.Progress("deleting firewall rule " + fw_name + " (the cluster's last instance is gone)");
  FirewallOperation("DELETE", fw_name, nullptr, "delete firewall rule " + fw_name);
}

std::string GcpDriver::OpenPeerPorts(const std::string& request_json) {
  const kit::PeerPortsRequest r = kit::ParsePeerPortsRequest(request_json);
  EnsureClusterFirewall(r.cluster, r.peer_ports);
  return "{}";
}

std::string GcpDriver::OpenPorts(const std::string& request_json) {
  ObjectPtr request = json::ParseObject(request_json, "the open_ports request");
  std::vector<int> ports = kit::PortsOf(request, "ports");
  ObjectPtr inst = Resolve(request);
  if (!inst) {
    throw DriverError(
        GPUPROV_STATUS_NOT_FOUND,
        "no gpuprov instance with id " + json::Str(request, "id") + " in project " + Project());
  }
  SetPortRules(json::Str(inst, "name"), kit::WithSsh(ports),
               kit::SourcesOf(request, /*ipv6_allowed=*/false), /*exact=*/true);
  return kit::ConfirmSources("{}", kit::SourcesOf(request, /*ipv6_allowed=*/false));
}

}  // namespace gpuprov::gcp

// The keys of [clouds.gcp] this driver reads (gpuprov refuses others in config.toml); the kit's
// standard keys first, README.md's settings table lists the same (driver_settings_docs_test).
constexpr gpuprov_type_config_key kGcpConfigKeys[] = {
    gpuprov::drivers::kRetryKey,
    gpuprov::drivers::PollIntervalKey("zone operation polling interval (2000)"),
    gpuprov::sdk::StringKey("project", "the project (else GOOGLE_CLOUD_PROJECT, gcloud's, the credentials')"),
    gpuprov::sdk::StringKey("credentials_file", "a service-account JSON key file (else GOOGLE_APPLICATION_CREDENTIALS, gcloud's)"),
    gpuprov::sdk::StringKey("region", "the region or zone used when provision names none (us-central1)"),
    gpuprov::sdk::StringKey("zone", "read when region is not set"),
    gpuprov::sdk::StringKey("network", "the VPC network (default)"),
    gpuprov::sdk::StringKey("subnetwork", "a subnetwork, by name or partial URL"),
    gpuprov::sdk::StringKey("ssh_user", "the user named in the ssh-keys metadata (ubuntu)"),
    gpuprov::sdk::StringKey("image", "the boot image when the request names none"),
    gpuprov::sdk::IntegerKey("operation_timeout_seconds", "how long a zone operation may take (900)"),
};

GPUPROV_DRIVER(gpuprov::gcp::GcpDriver, kGcpConfigKeys)
