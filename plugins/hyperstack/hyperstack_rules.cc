// SPDX-License-Identifier: Apache-2.0
#include "hyperstack_rules.h"

#include <Poco/Net/IPAddress.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <map>
#include <string_view>

#include "driver_status.h"
#include "gpuprov/sdk.hpp"
#include "json_util.h"
#include "ssh_public_key.h"
#include "standard_settings.h"
#include "tags.h"
#include "text.h"

namespace gpuprov::hyperstack {
namespace {

namespace kit = gpuprov::drivers;
namespace json = gpuprov::drivers::json;
using kit::kResourcePrefix;
using Poco::JSON::Array;
using Poco::JSON::Object;

using gpuprov::drivers::Upper;

// Letters and digits only, upper case: "rtx_a6000" and "RTX-A6000" compare equal.
std::string Squash(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

// error_reason words of REFERENCE.md §8 and what they mean.
constexpr std::array<kit::CloudCode, 7> kErrorReasons = {{
    {"unauthorized", GPUPROV_STATUS_AUTH},
    {"forbidden", GPUPROV_STATUS_AUTH},
    {"not_found", GPUPROV_STATUS_NOT_FOUND},
    {"already_exist", GPUPROV_STATUS_INVALID_INPUT},
    {"bad_request", GPUPROV_STATUS_INVALID_INPUT},
    {"not_allowed", GPUPROV_STATUS_FAILED},
    {"server_error", GPUPROV_STATUS_TRANSIENT},
}};

// REFERENCE.md §8: the out-of-stock body is UNCONFIRMED; classify by these words.
constexpr std::array<std::string_view, 5> kCapacityWords = {"stock", "capacity", "not available",
                                                            "unavailable", "no available"};
constexpr std::array<std::string_view, 4> kBalanceWords = {"balance", "insufficient funds",
                                                           "payment", "credit"};

std::string MessageOf(const std::string& body) {
  if (Object::Ptr o = json::TryParseObject(body)) {
    try {
      return json::Str(o, "message");
    } catch (...) {
    }
  }
  return kit::TrimSpace(body);
}

}  // namespace

std::optional<kit::Credential> ResolveApiKey(const Object::Ptr& config) {
  const std::string env_name = kit::TokenEnvSetting(config);
  if (!env_name.empty()) {
    if (auto c = kit::CredentialFromEnv({env_name})) return c;
  }
  if (auto c = kit::CredentialFromEnv({"HYPERSTACK_API_KEY"})) return c;
  if (config) {
    const std::string literal = kit::TrimSpace(json::Str(config, "token"));
    if (!literal.empty())
      return kit::Credential{literal, "config.toml [clouds.hyperstack] token"};
  }
  std::string path = config ? json::Str(config, "api_key_file") : "";
  if (path.empty()) {
    const char* home = std::getenv("HOME");
    if (home == nullptr || *home == '\0') return std::nullopt;
    path = std::string(home) + "/.hyperstack/api_key";
  }
  if (std::optional<std::string> text = kit::ReadSmallFile(path)) {
    const std::string key = kit::TrimSpace(*text);
    if (!key.empty()) return kit::Credential{key, path};
  }
  return std::nullopt;
}

std::string ApiKeyHint() {
  return "set HYPERSTACK_API_KEY to an API key from console.hyperstack.cloud (API keys), write it "
         "to ~/.hyperstack/api_key as SkyPilot reads it, or name the variable with token_env "
         "in [clouds.hyperstack] of config.toml";
}

std::string EnvironmentName(const std::string& region) { return kResourcePrefix + region; }

std::string KeyPairName(const std::string& public_key_line) {
  const kit::SshPublicKey key = kit::ParseSshPublicKey(public_key_line);
  std::string hex = kit::Md5Fingerprint(key);
  hex.erase(std::remove(hex.begin(), hex.end(), ':'), hex.end());
  return kResourcePrefix + hex.substr(0, 16);
}

std::string KeyIdentity(const std::string& public_key_line) {
  try {
    return kit::KeyIdentity(kit::ParseSshPublicKey(public_key_line));
  } catch (const gpuprov::sdk::DriverError&) {
    return kit::TrimSpace(public_key_line);
  }
}

std::vector<std::string> VmLabels(const std::string& vm_name, const Object::Ptr& request) {
  std::vector<std::string> labels = {kManagedLabel, kNameLabelPrefix + vm_name};
  for (const auto& [key, value] : kit::UserTags(request)) {
    labels.push_back(value.empty() ? key : key + "=" + value);
  }
  return labels;
}

std::vector<std::string> ClusterLabels(const kit::ClusterRequest& cluster) {
  return {std::string(kit::kClusterTag) + "=" + cluster.name,
          std::string(kit::kRoleTag) + "=" + cluster.role};
}

bool IsManaged(const Object::Ptr& vm) {
  if (Array::Ptr labels = json::Arr(vm, "labels")) {
    for (size_t i = 0; i < labels->size(); ++i) {
      if (labels->get(static_cast<unsigned>(i)).toString() == kManagedLabel) return true;
    }
  }
  return false;
}

std::vector<std::pair<std::string, std::string>> TagsOf(const Object::Ptr& vm) {
  std::vector<std::pair<std::string, std::string>> tags;
  if (Array::Ptr labels = json::Arr(vm, "labels")) {
    for (size_t i = 0; i < labels->size(); ++i) {
      const std::string l = labels->get(static_cast<unsigned>(i)).toString();
      const size_t eq = l.find('=');
      if (l == kManagedLabel) {
        tags.emplace_back(kit::kManagedTag, "1");
      } else if (l.rfind(kNameLabelPrefix, 0) == 0) {
        tags.emplace_back(kit::kNameTag, l.substr(std::string(kNameLabelPrefix).size()));
      } else if (eq != std::string::npos) {
        tags.emplace_back(l.substr(0, eq), l.substr(eq + 1));
      } else {
        tags.emplace_back(l, "");
      }
    }
  }
  return tags;
}

std::string PublicIp(const Object::Ptr& vm) {
  if (Upper(json::Str(vm, "floating_ip_status")) != "ATTACHED") return "";
  return json::Str(vm, "floating_ip");
}

bool PortRandomized(const Object::Ptr& vm) {
  if (vm && vm->has("port_randomization")) {
    const Poco::Dynamic::Var v = vm->get("port_randomization");
    if (v.isBoolean() && v.extract<bool>()) return true;
  }
  return Upper(json::Str(vm, "port_randomization_status")) == "ENABLED";
}

VmState StateOf(const Object::Ptr& vm) {
  const std::string status = Upper(json::Str(vm, "status"));
  if (status == "ACTIVE") {
    if (!PublicIp(vm).empty()) return {"running", ""};
    std::string fip = json::Str(vm, "floating_ip_status");
    return {"pending", "ACTIVE, waiting for the floating IP (" +
                           (fip.empty() ? std::string("no status") : fip) + ")"};
  }
  if (status == "STOPPING" || status == "SHUTOFF" || status == "HIBERNATING" ||
      status == "HIBERNATED") {
    return {"stopped", "Hyperstack status " + status};
  }
  if (status == "DELETING" || status == "DELETED")
    return {"terminated", "Hyperstack status " + status};
  if (status == "ERROR") {
    // The API documents no reason field; say what the VM object does tell.
    std::string why = "Hyperstack status ERROR";
    std::vector<std::string> parts;
    for (const char* key : {"vm_state", "power_state"}) {
      const std::string v = json::Str(vm, key);
      if (!v.empty()) parts.push_back(std::string(key) + " " + v);
    }
    for (const char* key : {"fault", "error_reason", "message", "status_reason"}) {
      if (!json::Has(vm, key)) continue;
      Poco::Dynamic::Var v = vm->get(key);
      std::string text;
      if (v.type() == typeid(Object::Ptr)) {
        text = json::Str(v.extract<Object::Ptr>(), "message");
      } else if (v.isString()) {
        text = v.toString();
      }
      if (!text.empty()) parts.push_back(text);
    }
    std::string joined;
    for (const auto& p : parts) joined += (joined.empty() ? "" : ", ") + p;
    if (!joined.empty()) why += " (" + joined + ")";
    return {"error", why +
                         "; Hyperstack advises deleting it and creating it again, "
                         "possibly in another region"};
  }
  return {"pending", status.empty() ? "" : "Hyperstack status " + status};
}

Object::Ptr IngressRule(int port, const std::string& cidr) {
  Object::Ptr r = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  r->set("direction", "ingress");
  r->set("protocol", "tcp");
  r->set("ethertype", "IPv4");
  r->set("remote_ip_prefix", cidr);
  r->set("port_range_min", port);
  r->set("port_range_max", port);
  return r;
}

Object::Ptr PeerRule(const kit::PeerPort& port, const std::string& address) {
  Object::Ptr r = IngressRule(port.port, address + "/32");
  r->set("protocol", port.protocol);
  return r;
}

bool IsPeerRule(const Object::Ptr& rule, const std::vector<kit::PeerPort>& ports) {
  if (!rule || json::Str(rule, "direction") != "ingress" ||
      json::Str(rule, "ethertype") != "IPv4") {
    return false;
  }
  const std::string protocol = json::Str(rule, "protocol");
  const long long lo = json::Int(rule, "port_range_min", 0);
  if (lo < 1 || lo > 65535 || json::Int(rule, "port_range_max", 0) != lo) return false;
  if (ports.empty() ? protocol != "tcp" && protocol != "udp"
                    : std::find(ports.begin(), ports.end(),
                                kit::PeerPort{static_cast<int>(lo), protocol}) == ports.end()) {
    return false;
  }
  const std::string prefix = json::Str(rule, "remote_ip_prefix");
  const size_t slash = prefix.find('/');
  if (slash == std::string::npos || prefix.substr(slash) != "/32") return false;
  Poco::Net::IPAddress address;
  return Poco::Net::IPAddress::tryParse(prefix.substr(0, slash), address) &&
         address.family() == Poco::Net::IPAddress::IPv4 && address.isSiteLocal();
}

PeerRuleChange PlanPeerRules(const Object::Ptr& vm, const std::vector<kit::PeerPort>& ports,
                             const std::vector<std::string>& addresses) {
  auto key = [](const std::string& protocol, long long port, const std::string& prefix) {
    return protocol + " " + std::to_string(port) + " " + prefix;
  };
  std::set<std::string> have;
  PeerRuleChange change;
  Array::Ptr rules = json::Arr(vm, "security_rules");
  for (size_t i = 0; rules && i < rules->size(); ++i) {
    Object::Ptr r = json::ObjAt(rules, i);
    if (!IsPeerRule(r, ports)) continue;
    const long long port = json::Int(r, "port_range_min", 0);
    const std::string prefix = json::Str(r, "remote_ip_prefix");
    const bool wanted =
        std::find(addresses.begin(), addresses.end(), prefix.substr(0, prefix.find('/'))) !=
        addresses.end();
    if (wanted && have.insert(key(json::Str(r, "protocol"), port, prefix)).second) continue;
    change.remove_ids.push_back(json::Str(r, "id"));  // a former peer's, or a duplicate
  }
  for (const std::string& address : addresses) {
    for (const kit::PeerPort& p : ports) {
      if (!have.count(key(p.protocol, p.port, address + "/32"))) {
        change.add.push_back(PeerRule(p, address));
      }
    }
  }
  return change;
}

Array::Ptr IngressRules(const std::vector<int>& ports, const kit::PortSources& sources) {
  Array::Ptr rules = new Array();
  for (int p : ports) {
    for (const auto& cidr : sources.Of(p, /*with_ipv6=*/false)) rules->add(IngressRule(p, cidr));
  }
  return rules;
}

RuleChange PlanRules(const Object::Ptr& vm, int port, const kit::PortSources& sources) {
  const std::vector<std::string> want = sources.Of(port, /*with_ipv6=*/false);
  std::set<std::string> have;
  RuleChange change;
  Array::Ptr rules = json::Arr(vm, "security_rules");
  for (size_t i = 0; rules && i < rules->size(); ++i) {
    Object::Ptr r = json::ObjAt(rules, i);
    if (!r || json::Str(r, "direction") != "ingress" || json::Str(r, "ethertype") != "IPv4" ||
        json::Str(r, "protocol") != "tcp" || json::Int(r, "port_range_min", 0) != port ||
        json::Int(r, "port_range_max", 0) != port || IsPeerRule(r)) {
      continue;
    }
    const std::string prefix = json::Str(r, "remote_ip_prefix");
    if (std::find(want.begin(), want.end(), prefix) == want.end()) {
      change.remove_ids.push_back(json::Str(r, "id"));
    } else {
      have.insert(prefix);
    }
  }
  for (const auto& c : want) {
    if (!have.count(c)) change.add.push_back(c);
  }
  return change;
}

std::set<int> OpenTcpPorts(const Object::Ptr& vm, bool world_only) {
  std::set<int> ports;
  Array::Ptr rules = json::Arr(vm, "security_rules");
  for (size_t i = 0; rules && i < rules->size(); ++i) {
    Object::Ptr r = json::ObjAt(rules, i);
    if (!r) continue;
    const std::string proto = json::Str(r, "protocol");
    if (json::Str(r, "direction") != "ingress" || json::Str(r, "ethertype") != "IPv4" ||
        (world_only && json::Str(r, "remote_ip_prefix") != "0.0.0.0/0") ||
        (proto != "tcp" && proto != "any") || IsPeerRule(r)) {
      continue;
    }
    const long long lo = json::Int(r, "port_range_min", 1);
    const long long hi = json::Int(r, "port_range_max", 65535);
    // Wide ranges: only the ports gpuprov asks for matter; cap the walk.
    for (long long p = std::max(1LL, lo); p <= std::min(65535LL, hi) && p - lo < 65536; ++p) {
      ports.insert(static_cast<int>(p));
    }
  }
  return ports;
}

std::string ErrorReason(const std::string& body) {
  if (Object::Ptr o = json::TryParseObject(body)) {
    try {
      return json::Str(o, "error_reason");
    } catch (...) {
    }
  }
  return "";
}

std::string ApiMessage(const std::string& body) {
  std::string message = MessageOf(body);
  if (message.size() > 300) message = message.substr(0, 300) + "...";
  if (message.empty()) message = "no error message";
  const std::string reason = ErrorReason(body);
  return reason.empty() ? message : message + " (" + reason + ")";
}

gpuprov_type_status StatusOfError(int http_status, const std::string& body) {
  if (http_status == 400 || http_status == 409) {
    const std::string message = MessageOf(body);
    if (kit::MentionsAny(message, kCapacityWords)) return GPUPROV_STATUS_CAPACITY;
    if (kit::MentionsAny(message, kBalanceWords)) return GPUPROV_STATUS_QUOTA;
  }
  if (http_status == 401 || http_status == 403) return GPUPROV_STATUS_AUTH;
  return kit::StatusOf(http_status, ErrorReason(body), kErrorReasons);
}

drivers::ApiDialect HyperstackApi() {
  drivers::ApiDialect d;
  d.cloud = "Hyperstack";
  d.driver = "hyperstack";
  d.read_error = [](const std::string& body) {
    return drivers::ApiError{ErrorReason(body), ApiMessage(body)};
  };
  d.status_of = [](int http_status, const drivers::ApiError&, const std::string& body) {
    return StatusOfError(http_status, body);
  };
  d.quote = drivers::QuoteForm::kColon;
  d.hints = {
      {.status = GPUPROV_STATUS_AUTH,
       .text = "; the API key from {origin} was refused: " + ApiKeyHint()},
      {.status = GPUPROV_STATUS_CAPACITY,
       .text = "; try another flavor or region (--region), or later"},
  };
  d.headers["Accept"] = "application/json";
  d.quote_empty_answer = true;
  return d;
}

drivers::ApiAuth HyperstackAuth(const Object::Ptr& config) {
  drivers::ApiAuth a;
  a.header = "api_key";
  a.scheme = "";
  a.resolve = [config] { return ResolveApiKey(config); };
  a.missing = "no Hyperstack API key found: " + ApiKeyHint();
  a.label = "API key";
  return a;
}

bool IsStillBeingCreated(const std::string& body) {
  constexpr std::array<std::string_view, 2> kWords = {"being created", "creation process"};
  return kit::MentionsAny(MessageOf(body), kWords);
}

// --- flavors ---------------------------------------------------------------------------------

const std::vector<Flavor>& KnownFlavors() {
  // REFERENCE.md §7 (SkyPilot catalog v8 and client code): name, gpu field, count, region seen.
  // clang-format off
  static const std::vector<Flavor> kFlavors = {
      {"n3-H100x1",          "H100-80G-PCIe",        1, "CANADA-1"},
      {"n3-H100x2",          "H100-80G-PCIe",        2, "CANADA-1"},
      {"n3-H100x4",          "H100-80G-PCIe",        4, "CANADA-1"},
      {"n3-H100x8",          "H100-80G-PCIe",        8, "CANADA-1"},
      {"n3-H100x8-NVLink",   "H100-80G-PCIe-NVLink", 8, "CANADA-1"},
      {"n3-H100-SXM5x8",     "H100-80G-SXM5",        8, "CANADA-1"},
      {"n3-H100-SXM5x8",     "H100-80G-SXM5",        8, "US-1"},
      {"n3-A100x1",          "A100-80G-PCIe",        1, "CANADA-1"},
      {"n3-A100x2",          "A100-80G-PCIe",        2, "CANADA-1"},
      {"n3-A100x4",          "A100-80G-PCIe",        4, "CANADA-1"},
      {"n3-A100x8",          "A100-80G-PCIe",        8, "CANADA-1"},
      {"n3-A100x8-NVLink",   "A100-80G-PCIe-NVLink", 8, "CANADA-1"},
      {"n3-L40x1",           "L40",                  1, "CANADA-1"},
      {"n3-L40x2",           "L40",                  2, "CANADA-1"},
      {"n3-L40x4",           "L40",                  4, "CANADA-1"},
      {"n3-L40x8",           "L40",                  8, "CANADA-1"},
      {"n3-RTX-A6000x1",     "RTX-A6000",            1, "CANADA-1"},
      {"n3-RTX-A6000x2",     "RTX-A6000",            2, "CANADA-1"},
      {"n3-RTX-A6000x4",     "RTX-A6000",            4, "CANADA-1"},
      {"n3-RTX-A6000x8",     "RTX-A6000",            8, "CANADA-1"},
      {"n3-RTX-A4000x1",     "RTX-A4000",            1, "NORWAY-1"},
      {"n3-RTX-A4000x2",     "RTX-A4000",            2, "NORWAY-1"},
  };
  // clang-format on
  return kFlavors;
}

std::optional<std::string> CanonicalGpu(const std::string& name) {
  std::string s = Upper(name);
  // Drop the memory and form suffix of a flavor's gpu field: "H100-80G-PCIe" -> "H100".
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if ((s[i] == '-' || s[i] == '_' || s[i] == ' ') &&
        std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      size_t j = i + 1;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (j < s.size() && (s[j] == 'G')) {
        s = s.substr(0, i);
        break;
      }
    }
  }
  std::string key = Squash(s);
  if (key.rfind("NVIDIA", 0) == 0) key = key.substr(6);
  if (key.empty() || key == "L40S") return std::nullopt;
  static const std::map<std::string, std::string> kNames = {
      {"RTXA6000", "RTX-A6000"}, {"A6000", "RTX-A6000"},    {"RTXA4000", "RTX-A4000"},
      {"A4000", "RTX-A4000"},    {"RTXA5000", "RTX-A5000"}, {"A5000", "RTX-A5000"},
  };
  if (auto it = kNames.find(key); it != kNames.end()) return it->second;
  return key;
}

bool IsPreferredFlavor(const std::string& flavor_name) {
  // "n3-<GPU>x<n>" with nothing after the count.
  const size_t x = flavor_name.rfind('x');
  if (x == std::string::npos || x + 1 >= flavor_name.size()) return false;
  return flavor_name.find_first_not_of("0123456789", x + 1) == std::string::npos &&
         flavor_name.find("SXM") == std::string::npos;
}

std::string GpusOf(const Flavor& flavor) {
  if (flavor.gpu_count <= 0 || flavor.gpu.empty()) return "";
  const std::optional<std::string> gpu = CanonicalGpu(flavor.gpu);
  return gpu ? *gpu + ":" + std::to_string(flavor.gpu_count) : "";
}

std::string CpuFlavor(const std::vector<Flavor>& flavors) {
  for (const Flavor& f : flavors) {
    if (f.gpu_count == 0 || f.gpu.empty()) return f.name;
  }
  return "n1-cpu-small";
}

kit::Catalogue FlavorCatalogue(const std::vector<Flavor>& flavors, const std::string& cpu_flavor) {
  kit::Catalogue c;
  c.cloud = "Hyperstack";
  c.type_word = "flavor";
  for (const Flavor& f : flavors) {
    const std::optional<std::string> gpu =
        f.gpu_count > 0 && !f.gpu.empty() ? CanonicalGpu(f.gpu) : std::nullopt;
    c.rows.push_back({f.name, gpu.value_or(""), gpu ? f.gpu_count : 0, IsPreferredFlavor(f.name)});
  }
  c.cpu_default = {cpu_flavor, "", 0, true};
  c.canonical_gpu = CanonicalGpu;
  c.gpu_hint = [](const std::string& asked) {
    return Squash(asked).find("L40S") != std::string::npos
               ? std::string(
                     "Hyperstack has no L40S; its closest flavor is the L40 (n3-L40x1), "
                     "ask for L40:1 if that will do")
               : std::string();
  };
  return c;
}

std::vector<Flavor> ParseFlavors(const Object::Ptr& doc) {
  std::vector<Flavor> out;
  Array::Ptr groups = json::Arr(doc, "data");
  for (size_t g = 0; groups && g < groups->size(); ++g) {
    Array::Ptr list = json::Arr(json::ObjAt(groups, g), "flavors");
    for (size_t i = 0; list && i < list->size(); ++i) {
      Object::Ptr f = json::ObjAt(list, i);
      if (!f || json::Str(f, "name").empty()) continue;
      Flavor flavor;
      flavor.name = json::Str(f, "name");
      flavor.gpu = json::Str(f, "gpu");
      flavor.gpu_count = static_cast<int>(json::Int(f, "gpu_count", 0));
      flavor.region = json::Str(f, "region_name");
      flavor.stock_available =
          !json::Has(f, "stock_available") || f->getValue<bool>("stock_available");
      out.push_back(flavor);
    }
  }
  return out;
}

std::map<std::string, double> ParsePricebook(const std::string& body) {
  std::map<std::string, double> out;
  Poco::JSON::Array::Ptr list;
  try {
    Poco::JSON::Parser parser;
    list = parser.parse(body).extract<Poco::JSON::Array::Ptr>();
  } catch (const std::exception&) {
    return out;
  }
  for (size_t i = 0; list && i < list->size(); ++i) {
    Object::Ptr entry = json::ObjAt(list, i);
    const std::string name = json::Str(entry, "name");
    if (name.empty() || !entry->has("value")) continue;
    const Poco::Dynamic::Var v = entry->get("value");
    try {
      double value = 0;
      if (v.isString()) {
        size_t used = 0;
        const std::string text = v.extract<std::string>();
        value = std::stod(text, &used);
        if (used != text.size()) continue;
      } else if (v.isNumeric()) {
        value = v.convert<double>();
      } else {
        continue;
      }
      if (value > 0) out[name] = value;
    } catch (const std::exception&) {
    }
  }
  return out;
}

std::optional<double> FlavorPrice(const std::map<std::string, double>& pricebook,
                                  const Flavor& flavor) {
  if (flavor.gpu_count <= 0 || flavor.gpu.empty()) return std::nullopt;
  auto it = pricebook.find(flavor.gpu);
  if (it == pricebook.end()) return std::nullopt;
  return it->second * flavor.gpu_count;
}

}  // namespace gpuprov::hyperstack
