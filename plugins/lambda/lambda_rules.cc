// SPDX-License-Identifier: Apache-2.0
#include "lambda_rules.h"

#include <Poco/DigestEngine.h>
#include <Poco/SHA2Engine.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "config_files.h"
#include "driver_status.h"
#include "gpuprov/sdk.hpp"
#include "json_util.h"
#include "ssh_public_key.h"
#include "standard_settings.h"
#include "tags.h"

namespace gpuprov::lambda {
namespace {

namespace json = drivers::json;
using Poco::JSON::Array;
using Poco::JSON::Object;

// Section 8, corrected by Lambda's OpenAPI spec v1.8.3 (L-SPEC: openapi-1.8.3.json in
// alexandervaneck/lambda-ai-cloud-api-client). Codes not listed fall back to the HTTP status.
constexpr std::array<drivers::CloudCode, 15> kCodes = {{
    {kCapacityCode, GPUPROV_STATUS_CAPACITY},
    {"instance-operations/launch/file-system-in-wrong-region", GPUPROV_STATUS_INVALID_INPUT},
    {"global/invalid-api-key", GPUPROV_STATUS_AUTH},
    {"global/account-inactive", GPUPROV_STATUS_AUTH},
    {"global/forbidden", GPUPROV_STATUS_AUTH},
    {"global/invalid-parameters", GPUPROV_STATUS_INVALID_INPUT},
    {"global/object-does-not-exist", GPUPROV_STATUS_NOT_FOUND},
    {"global/not-found", GPUPROV_STATUS_NOT_FOUND},
    {"global/quota-exceeded", GPUPROV_STATUS_QUOTA},
    {"global/duplicate", GPUPROV_STATUS_INVALID_INPUT},
    {"global/internal-error", GPUPROV_STATUS_TRANSIENT},
    {"global/conflict", GPUPROV_STATUS_TRANSIENT},
    {"global/rate-limited", GPUPROV_STATUS_TRANSIENT},
    // L-SPEC deleteFirewallRuleset 400 ApiErrorFirewallRulesetInUse: the ruleset is still
    // attached to an instance (one Lambda is still terminating): wait and try again.
    {kRulesetInUseCode, GPUPROV_STATUS_TRANSIENT},
    // L-SPEC launchInstance 403 ApiErrorInvalidBillingAddress: the account's billing, not its
    // key (an AUTH status would send the user to the API key).
    {kInvalidAddressCode, GPUPROV_STATUS_FAILED},
}};

// The key type and blob of an OpenSSH public key line, or nullopt.
std::optional<std::pair<std::string, std::string>> KeyParts(const std::string& line) {
  std::istringstream fields(line);
  std::string type, blob;
  if (!(fields >> type >> blob)) return std::nullopt;
  return std::make_pair(type, blob);
}

std::string Trimmed(const std::string& s) { return drivers::TrimSpace(s); }

// The VM names a gpuprov rule's description lists, or nullopt for a rule gpuprov did not make.
std::optional<std::vector<std::string>> RuleVms(const Object::Ptr& rule) {
  const std::string d = rule ? json::Str(rule, "description") : "";
  const std::string prefix = kRuleDescriptionPrefix;
  if (d.rfind(prefix, 0) != 0) return std::nullopt;
  std::vector<std::string> names;
  std::istringstream in(d.substr(prefix.size()));
  std::string n;
  while (std::getline(in, n, ',')) {
    n = Trimmed(n);
    if (!n.empty()) names.push_back(n);
  }
  return names;
}

std::string RuleDescription(const std::vector<std::string>& names) {
  std::string d = kRuleDescriptionPrefix;
  for (size_t i = 0; i < names.size(); ++i) d += (i ? "," : "") + names[i];
  return d;
}

// The single tcp port of a rule [p, p] from 0.0.0.0/0, or 0.
int SingleTcpPort(const Object::Ptr& rule) {
  if (!rule || json::Str(rule, "protocol") != "tcp") return 0;
  if (json::Str(rule, "source_network") != "0.0.0.0/0") return 0;
  Array::Ptr range = json::Arr(rule, "port_range");
  if (!range || range->size() != 2) return 0;
  const int lo = range->get(0).convert<int>(), hi = range->get(1).convert<int>();
  return lo == hi ? lo : 0;
}

Object::Ptr CopyRule(const Object::Ptr& rule) {
  Object::Ptr c = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  for (const char* k : {"protocol", "port_range", "source_network", "description"}) {
    if (rule->has(k)) c->set(k, rule->get(k));
  }
  return c;
}

}  // namespace

std::string DefaultKeysFile() {
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + "/.lambda_cloud/lambda_keys" : "";
}

std::optional<std::string> ApiKeyFromKeysText(const std::string& text) {
  // The file is "key = value" lines without a section: read it as one section.
  drivers::IniFile ini = drivers::ParseIni("[lambda_keys]\n" + text);
  std::optional<std::string> key = drivers::IniValue(ini, "lambda_keys", "api_key");
  if (!key || Trimmed(*key).empty()) return std::nullopt;
  return Trimmed(*key);
}

std::optional<drivers::Credential> ResolveApiKey(const Poco::JSON::Object::Ptr& config) {
  const std::string env = drivers::TokenEnvSetting(config);
  if (!env.empty()) {
    if (auto c = drivers::CredentialFromEnv({env})) return c;
  }
  if (auto c = drivers::CredentialFromEnv({"LAMBDA_API_KEY"})) return c;
  std::string path = config ? json::Str(config, "api_key_file") : "";
  if (path.empty()) path = DefaultKeysFile();
  if (path.empty()) return std::nullopt;
  std::optional<std::string> text = drivers::ReadSmallFile(path);
  if (!text) return std::nullopt;
  std::optional<std::string> key = ApiKeyFromKeysText(*text);
  if (!key) return std::nullopt;
  return drivers::Credential{*key, path};
}

std::string ApiKeyHint() {
  return "set LAMBDA_API_KEY to an API key from https://cloud.lambda.ai/api-keys, or write "
         "\"api_key = <KEY>\" to ~/.lambda_cloud/lambda_keys (the file SkyPilot uses), or name "
         "the variable with token_env in [clouds.lambda] of config.toml";
}

std::string ApiError::Text() const {
  std::string t = code.empty() ? message : code + (message.empty() ? "" : ": " + message);
  if (!suggestion.empty()) t += " (" + suggestion + ")";
  return t;
}

ApiError ParseApiError(const std::string& body) {
  ApiError e;
  if (Object::Ptr doc = json::TryParseObject(body)) {
    try {
      if (Object::Ptr err = json::Obj(doc, "error")) {
        e.code = json::Str(err, "code");
        e.message = json::Str(err, "message");
        e.suggestion = json::Str(err, "suggestion");
        return e;
      }
    } catch (const std::exception&) {
    }
  }
  std::string text = Trimmed(body);
  if (text.size() > 300) text = text.substr(0, 300) + "...";
  e.message = text.empty() ? "no error message" : text;
  return e;
}

gpuprov_type_status StatusOf(int http_status, const std::string& code) {
  if (code.rfind("provider/", 0) == 0) return GPUPROV_STATUS_TRANSIENT;  // upstream, retry
  return drivers::StatusOf(http_status, code, kCodes);
}

drivers::ApiDialect LambdaApi() {
  drivers::ApiDialect d;
  d.cloud = "Lambda";
  d.driver = "lambda";
  d.read_error = drivers::ReadCodeAndText<ParseApiError>;
  d.status_of = [](int http_status, const drivers::ApiError& e, const std::string&) {
    return StatusOf(http_status, e.code);
  };
  d.hints = {
      {.status = GPUPROV_STATUS_AUTH, .text = " for the API key from {origin}; " + ApiKeyHint()},
      {.status = GPUPROV_STATUS_QUOTA,
       .text = "; ask Lambda support to raise the account's instance quota"},
      {.code = kInvalidAddressCode,
       .text = "; correct the account's billing address in the Lambda console (Settings, "
               "Billing), then run the command again"},
  };
  return d;
}

drivers::ApiAuth LambdaAuth(const Object::Ptr& config) {
  drivers::ApiAuth a;
  a.resolve = [config] { return ResolveApiKey(config); };
  a.missing = "no Lambda API key found: " + ApiKeyHint();
  a.label = "API key";
  return a;
}

VmState StateOf(const std::string& s, bool has_ip) {
  if (s == "booting") return {"pending", ""};
  if (s == "active") return has_ip ? VmState{"running", ""}
                                   : VmState{"pending", "active, waiting for its IP"};
  if (s == "unhealthy") {
    return {"error", "Lambda reports the instance unhealthy (a restart in the Lambda console "
                     "may fix it)"};
  }
  if (s == "terminating" || s == "terminated") return {"terminated", s};
  if (s == "preempted") return {"terminated", "preempted by Lambda"};
  return {"error", "Lambda status " + (s.empty() ? std::string("(none)") : s)};
}

bool AccountRulesApply(const std::string& region) { return region != kNoAccountRulesRegion; }

bool IsGoneStatus(const std::string& s) {
  return s == "terminating" || s == "terminated" || s == "preempted";
}

std::string RulesetName(const std::string& vm_name) { return kResourcePrefix + vm_name; }

std::string KeyName(const std::string& line) {
  const drivers::SshPublicKey key = drivers::ParseSshPublicKey(line);
  Poco::SHA2Engine sha(Poco::SHA2Engine::SHA_256);
  sha.update(drivers::DecodedBlob(key));
  return kResourcePrefix + Poco::DigestEngine::digestToHex(sha.digest()).substr(0, 16);
}

std::string PaceKey(const std::string& endpoint, const std::string& api_key) {
  Poco::SHA2Engine sha(Poco::SHA2Engine::SHA_256);
  sha.update(api_key);
  return "lambda " + endpoint + " " + Poco::DigestEngine::digestToHex(sha.digest()).substr(0, 16);
}

bool SameKey(const std::string& a, const std::string& b) {
  auto pa = KeyParts(a), pb = KeyParts(b);
  return pa && pb && *pa == *pb;
}

Array::Ptr LaunchTags(const std::string& vm_name,
                      const std::map<std::string, std::string>& user_tags,
                      const std::optional<drivers::ClusterRequest>& cluster) {
  Array::Ptr tags = new Array();
  auto add = [&](const std::string& k, const std::string& v) {
    Object::Ptr t = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    t->set("key", k);
    t->set("value", v.substr(0, 128));
    tags->add(t);
  };
  for (const auto& [k, v] : drivers::ManagedTags(vm_name)) add(k, v);
  std::set<std::string> used = {drivers::kManagedTag, drivers::kNameTag};
  if (cluster) {
    // Both keys match RequestedTagEntry's ^[a-z][a-z0-9-:]+$; a cluster name (a DNS label,
    // at most 63) and a role fit its 128-character values.
    add(drivers::kClusterTag, cluster->name);
    add(drivers::kRoleTag, cluster->role);
    used.insert({drivers::kClusterTag, drivers::kRoleTag});
  }
  for (const auto& [k, v] : user_tags) {
    std::string key = drivers::FitTag(k, "-:", 55, /*lower_case=*/true, '-');
    if (key.empty() || !std::isalpha(static_cast<unsigned char>(key[0]))) key = "t-" + key;
    key = key.substr(0, 55);
    if (key.size() < 2 || key.rfind("lambda-ai-", 0) == 0 || !used.insert(key).second) continue;
    add(key, v);
  }
  return tags;
}

std::string TagValue(const Object::Ptr& instance, const std::string& key) {
  Array::Ptr tags = json::Arr(instance, "tags");
  for (size_t i = 0; tags && i < tags->size(); ++i) {
    Object::Ptr t = json::ObjAt(tags, i);
    if (t && json::Str(t, "key") == key) return json::Str(t, "value");
  }
  return "";
}

Object::Ptr TcpRule(int port, const std::string& description, const std::string& source) {
  Object::Ptr r = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  r->set("protocol", "tcp");
  Array::Ptr range = new Array();
  range->add(port);
  range->add(port);
  r->set("port_range", range);
  r->set("source_network", source);
  r->set("description", description);
  return r;
}

Array::Ptr RulesetRules(const std::string& vm_name, const std::vector<int>& ports,
                        const drivers::PortSources& sources) {
  Array::Ptr rules = new Array();
  for (int p : ports) {
    for (const std::string& cidr : sources.Of(p, /*with_ipv6=*/false)) {
      rules->add(TcpRule(p, "gpuprov " + vm_name + ": tcp " + std::to_string(p), cidr));
    }
  }
  return rules;
}

Array::Ptr OpenInRuleset(const Array::Ptr& rules, const std::string& vm_name,
                         const std::vector<int>& ports, const drivers::PortSources& sources,
                         bool exact, bool* changed) {
  *changed = false;
  Array::Ptr out = new Array();
  std::map<int, std::set<std::string>> single;  // tcp [p, p] rules kept: port -> sources
  std::map<int, bool> any_rule;                 // port -> some tcp rule opens it
  const std::set<int> world = OpenTcpPorts(rules);
  for (size_t i = 0; rules && i < rules->size(); ++i) {
    Object::Ptr r = json::ObjAt(rules, i);
    const std::string proto = r ? json::Str(r, "protocol") : "";
    Array::Ptr range = r ? json::Arr(r, "port_range") : nullptr;
    const bool two = range && range->size() == 2;
    const int lo = two ? range->get(0).convert<int>() : 1;
    const int hi = two ? range->get(1).convert<int>() : 65535;
    const std::string source = r ? json::Str(r, "source_network") : "";
    if (proto == "tcp" || proto == "all") {
      for (int p : ports) {
        if (p >= lo && p <= hi) any_rule[p] = true;
      }
    }
    if (exact && proto == "tcp" && two && lo == hi && sources.IsNarrowed(lo) &&
        std::find(ports.begin(), ports.end(), lo) != ports.end()) {
      const std::vector<std::string> want = sources.Of(lo, /*with_ipv6=*/false);
      if (std::find(want.begin(), want.end(), source) == want.end()) {
        *changed = true;  // a source allow_from no longer holds
        continue;
      }
      single[lo].insert(source);
    }
    out->add(rules->get(static_cast<unsigned>(i)));
  }
  for (int p : ports) {
    const std::string description = "gpuprov " + vm_name + ": tcp " + std::to_string(p);
    std::vector<std::string> add;
    if (!exact) {
      if (!any_rule[p]) add = sources.Of(p, /*with_ipv6=*/false);
    } else if (sources.IsNarrowed(p)) {
      for (const std::string& cidr : sources.Of(p, /*with_ipv6=*/false)) {
        if (!single[p].count(cidr)) add.push_back(cidr);
      }
    } else if (!world.count(p) && !world.count(0)) {
      add.push_back("0.0.0.0/0");
    }
    for (const std::string& cidr : add) out->add(TcpRule(p, description, cidr));
    if (!add.empty()) *changed = true;
  }
  return out;
}

std::vector<int> PortsWiderThan(const Array::Ptr& rules, const drivers::PortSources& sources) {
  std::set<int> wider;
  for (size_t i = 0; rules && i < rules->size(); ++i) {
    Object::Ptr r = json::ObjAt(rules, i);
    if (!r) continue;
    const std::string proto = json::Str(r, "protocol");
    if (proto != "tcp" && proto != "all") continue;
    const std::string source = json::Str(r, "source_network");
    if (std::find(sources.allow_from.begin(), sources.allow_from.end(), source) !=
        sources.allow_from.end()) {
      continue;
    }
    Array::Ptr range = json::Arr(r, "port_range");
    const bool two = range && range->size() == 2;
    const int lo = two ? range->get(0).convert<int>() : 1;
    const int hi = two ? range->get(1).convert<int>() : 65535;
    for (int p : sources.narrowed) {
      if (p >= lo && p <= hi && sources.IsNarrowed(p)) wider.insert(p);
    }
  }
  return {wider.begin(), wider.end()};
}

void CheckRuleCount(const Array::Ptr& rules, const drivers::PortSources& sources) {
  if (!rules || rules->size() <= kMaxRules) return;
  throw sdk::DriverError(GPUPROV_STATUS_INVALID_INPUT,
                         "allow_from: the VM's firewall ruleset would need " +
                             std::to_string(rules->size()) + " rules (one per port and source; " +
                             std::to_string(sources.allow_from.size()) +
                             " sources), and Lambda takes at most " + std::to_string(kMaxRules) +
                             "; give fewer --allow-from sources (a wider CIDR covers several)");
}

std::set<int> OpenTcpPorts(const Array::Ptr& rules) {
  std::set<int> ports;
  for (size_t i = 0; rules && i < rules->size(); ++i) {
    Object::Ptr r = json::ObjAt(rules, i);
    if (!r) continue;
    const std::string proto = json::Str(r, "protocol");
    if (proto != "tcp" && proto != "all") continue;
    if (json::Str(r, "source_network") != "0.0.0.0/0") continue;
    Array::Ptr range = json::Arr(r, "port_range");
    if (!range || range->size() != 2) {
      ports.insert(0);
      continue;
    }
    const int lo = range->get(0).convert<int>(), hi = range->get(1).convert<int>();
    if (lo <= 1 && hi >= 65535) {
      ports.insert(0);
    } else {
      for (int p = lo; p <= hi && p - lo < 65536; ++p) ports.insert(p);
    }
  }
  return ports;
}

Array::Ptr AddToAccountRules(const Array::Ptr& rules, const std::string& vm_name,
                             const std::vector<int>& ports, bool* changed) {
  *changed = false;
  Array::Ptr out = new Array();
  std::set<int> covered;
  for (size_t i = 0; rules && i < rules->size(); ++i) {
    Object::Ptr r = json::ObjAt(rules, i);
    if (!r) continue;
    Object::Ptr copy = CopyRule(r);
    std::optional<std::vector<std::string>> vms = RuleVms(r);
    const int port = SingleTcpPort(r);
    const bool wanted = std::find(ports.begin(), ports.end(), port) != ports.end();
    if (vms && port != 0 && wanted && !covered.count(port)) {
      if (std::find(vms->begin(), vms->end(), vm_name) != vms->end()) {
        covered.insert(port);
      } else {
        std::vector<std::string> more = *vms;
        more.push_back(vm_name);
        // L-SPEC FirewallRule.description: at most 128 characters. A full rule stays as it
        // is; the VM goes into another gpuprov rule of the port (or a new one).
        if (RuleDescription(more).size() <= kMaxRuleDescription) {
          covered.insert(port);
          copy->set("description", RuleDescription(more));
          *changed = true;
        }
      }
    }
    out->add(copy);
  }
  for (int p : ports) {
    if (covered.count(p)) continue;
    out->add(TcpRule(p, RuleDescription({vm_name})));
    covered.insert(p);
    *changed = true;
  }
  return out;
}

Array::Ptr RemoveFromAccountRules(const Array::Ptr& rules, const std::string& vm_name,
                                  const std::set<std::string>& live_vms, bool* changed) {
  *changed = false;
  Array::Ptr out = new Array();
  for (size_t i = 0; rules && i < rules->size(); ++i) {
    Object::Ptr r = json::ObjAt(rules, i);
    if (!r) continue;
    Object::Ptr copy = CopyRule(r);
    std::optional<std::vector<std::string>> vms = RuleVms(r);
    if (!vms) {
      out->add(copy);
      continue;
    }
    std::vector<std::string> keep;
    for (const auto& n : *vms) {
      if (n != vm_name && live_vms.count(n)) keep.push_back(n);
    }
    if (keep.size() != vms->size()) *changed = true;
    if (keep.empty()) continue;
    copy->set("description", RuleDescription(keep));
    out->add(copy);
  }
  return out;
}

std::vector<std::string> AccountRuleVms(const Array::Ptr& rules) {
  std::vector<std::string> out;
  for (size_t i = 0; rules && i < rules->size(); ++i) {
    std::optional<std::vector<std::string>> vms = RuleVms(json::ObjAt(rules, i));
    if (!vms) continue;
    for (const auto& vm : *vms) {
      if (std::find(out.begin(), out.end(), vm) == out.end()) out.push_back(vm);
    }
  }
  return out;
}

}  // namespace gpuprov::lambda
