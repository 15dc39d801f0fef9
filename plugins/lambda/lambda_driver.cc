// SPDX-License-Identifier: Apache-2.0
#include "lambda_driver.h"

#include <algorithm>
#include <map>

#include "driver_kit.h"
#include "instance_types.h"
#include "lambda_rules.h"

namespace gpuprov::lambda {
namespace {

namespace kit = gpuprov::drivers;

// What a VM powered off from inside still costs (gpuprov's TTL on the node powers it off),
// from REFERENCE.md: there is no stop or suspend; an instance is billed until terminated, so a
// powered-off one is billed in full.
constexpr kit::PoweredOffCost kPoweredOffCost = kit::PoweredOffCost::kFull;

using namespace gpuprov::drivers::prelude;  // DriverError, json, Array, Object
using std::chrono::milliseconds;

constexpr const char* kLaunchPath = "/instance-operations/launch";
// Optional launch fields an older API refuses as unknown (reference section 4).
constexpr const char* kDroppableFields[] = {"user_data", "image", "firewall_rulesets"};
// Words of an invalid-parameters message that refuses a field rather than its value.
constexpr std::string_view kRefusedFieldWords[] = {"unknown", "unexpected", "not allowed",
                                                   "not permitted", "extra", "unrecognized"};

std::string Encode(const std::string& s) { return kit::EncodeComponent(s); }

std::string Join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}

std::string PortList(const std::vector<int>& ports) {
  std::vector<std::string> s;
  for (int p : ports) s.push_back(std::to_string(p));
  return Join(s, ",");
}

long long ConfigInt(const Object::Ptr& o, const std::string& key, long long fallback) {
  return json::Int(o, key, fallback);
}

bool IsManaged(const Object::Ptr& instance) {
  return TagValue(instance, kit::kManagedTag) == "1";
}

std::vector<std::string> KeyNamesOf(const Object::Ptr& instance) {
  std::vector<std::string> out;
  Array::Ptr a = json::Arr(instance, "ssh_key_names");
  for (size_t i = 0; a && i < a->size(); ++i) out.push_back(a->get(static_cast<unsigned>(i)).toString());
  return out;
}

// True when the ruleset is attached to the instance (by the instance's firewall_rulesets or
// the ruleset's instance_ids).
bool IsAttached(const Object::Ptr& ruleset, const Object::Ptr& instance) {
  const std::string ruleset_id = json::Str(ruleset, "id");
  const std::string instance_id = json::Str(instance, "id");
  Array::Ptr sets = json::Arr(instance, "firewall_rulesets");
  for (size_t i = 0; sets && i < sets->size(); ++i) {
    if (json::Str(json::ObjAt(sets, i), "id") == ruleset_id) return true;
  }
  Array::Ptr ids = json::Arr(ruleset, "instance_ids");
  for (size_t i = 0; ids && i < ids->size(); ++i) {
    if (ids->get(static_cast<unsigned>(i)).toString() == instance_id) return true;
  }
  return false;
}

// True when a rule list holds a rule gpuprov made.
bool HasGpuprovRule(const Array::Ptr& rules) {
  for (size_t i = 0; rules && i < rules->size(); ++i) {
    if (json::Str(json::ObjAt(rules, i), "description").rfind(kRuleDescriptionPrefix, 0) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

LambdaDriver::LambdaDriver(const gpuprov::sdk::InitContext& ctx) : host_(ctx.host) {
  kit::DriverSettings settings = kit::ParseSettings(ctx.config_json, kDefaultEndpoint);
  endpoint_ = settings.endpoint;
  config_ = settings.config;
  default_region_ = json::Str(config_, "region");
  const std::string firewall = json::Str(config_, "firewall");
  if (!firewall.empty() && firewall != "ruleset" && firewall != "account") {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "firewall in [clouds.lambda] is \"" + firewall +
                          "\": use \"ruleset\" (a ruleset per VM) or \"account\" (the "
                          "account-wide rules)");
  }
  account_firewall_ = firewall == "account";
  // config.toml's [clouds.lambda] holds no tables: the pacing keys are plain keys there; the
  // "pacing" object (driver tests' JSON) is read when they are absent.
  Object::Ptr pacing = json::Obj(config_, "pacing");
  request_interval_ = milliseconds(std::max<long long>(
      0, ConfigInt(config_, "request_interval_ms",
                   ConfigInt(pacing, "request_interval_ms", kRequestIntervalMs))));
  launch_interval_ = milliseconds(std::max<long long>(
      0, ConfigInt(config_, "launch_interval_ms",
                   ConfigInt(pacing, "launch_interval_ms", kLaunchIntervalMs))));
  delete_wait_ = kit::DeleteWaitSetting(config_, std::chrono::seconds(600));
  api_ = std::make_unique<kit::ApiClient>(endpoint_, kit::RetryPolicyFrom(config_), host_,
                                          LambdaApi(), LambdaAuth(config_));
  // Lambda's documented pacing, for every attempt (retries too). Lambda counts per API key,
  // so the slots are shared with every gpuprov process using this key at this endpoint,
  // through the host's pacer folder (the init settings' pacer_dir; kit pacer.h; issue 30).
  // The launch slot first: the request slot is then taken when the launch really goes out.
  api_->http().set_before_attempt([this,
                                   pacer_dir = settings.pacer_dir](const kit::HttpRequest& r) {
    const std::string key =
        PaceKey(endpoint_, api_->credential_if_found() ? api_->credential_if_found()->value : "");
    if (r.method == "POST" && r.path_and_query == kLaunchPath) {
      kit::PaceCall(host_, "launch " + key, launch_interval_,
                    "waiting for Lambda's launch rate limit (1 launch per " +
                        std::to_string(launch_interval_.count() / 1000) + " s)",
                    pacer_dir);
    }
    kit::PaceCall(host_, key, request_interval_, "waiting for Lambda's rate limit", pacer_dir);
  });
}

LambdaDriver::ObjectPtr LambdaDriver::DataObject(const kit::ApiAnswer& a, const std::string& what) {
  ObjectPtr data = a.doc ? json::Obj(a.doc, "data") : nullptr;
  if (!data) throw DriverError(GPUPROV_STATUS_FAILED, what + ": Lambda's answer has no data object");
  return data;
}

Array::Ptr LambdaDriver::DataArray(const kit::ApiAnswer& a, const std::string& what) {
  Array::Ptr data = a.doc ? json::Arr(a.doc, "data") : nullptr;
  if (!data) throw DriverError(GPUPROV_STATUS_FAILED, what + ": Lambda's answer has no data list");
  return data;
}

std::vector<LambdaDriver::ObjectPtr> LambdaDriver::Instances() {
  Array::Ptr list = DataArray(api_->Call("GET", "/instances", "list instances"), "list instances");
  std::vector<ObjectPtr> out;
  for (size_t i = 0; i < list->size(); ++i) {
    ObjectPtr in = json::ObjAt(list, i);
    if (in && !IsGoneStatus(json::Str(in, "status"))) out.push_back(in);
  }
  return out;
}

LambdaDriver::ObjectPtr LambdaDriver::FindByName(const std::string& name, bool* foreign) {
  ObjectPtr found;
  for (const auto& in : Instances()) {
    if (json::Str(in, "name") != name) continue;
    if (IsManaged(in)) {
      if (found) host_.Warning("two gpuprov instances are named " + name + "; using " + json::Str(found, "id"));
      if (!found) found = in;
    } else if (foreign) {
      *foreign = true;
    }
  }
  return found;
}

LambdaDriver::ObjectPtr LambdaDriver::InstanceById(const std::string& id) {
  kit::ApiAnswer a =
      api_->Call("GET", "/instances/" + Encode(id), "get instance " + id, nullptr, {404});
  if (a.status == 404) return nullptr;
  ObjectPtr in = DataObject(a, "get instance " + id);
  return json::Str(in, "status") == "terminated" ? nullptr : in;
}

LambdaDriver::ObjectPtr LambdaDriver::Resolve(const ObjectPtr& request) {
  const auto [id, name] = kit::RequireIdOrName(request);
  if (!id.empty()) {
    ObjectPtr in = InstanceById(id);
    return in && IsManaged(in) ? in : nullptr;
  }
  return FindByName(name);
}

// --- SSH keys (reference section 3.6) -------------------------------------------------------

LambdaDriver::SshKey LambdaDriver::EnsureSshKey(const std::string& public_key) {
  const std::string our_name = KeyName(public_key);  // validates the key line
  auto find = [&]() -> std::optional<SshKey> {
    Array::Ptr keys = DataArray(api_->Call("GET", "/ssh-keys", "list SSH keys"), "list SSH keys");
    for (size_t i = 0; i < keys->size(); ++i) {
      ObjectPtr k = json::ObjAt(keys, i);
      if (k && SameKey(json::Str(k, "public_key"), public_key)) {
        return SshKey{json::Str(k, "id"), json::Str(k, "name"), false};
      }
    }
    return std::nullopt;
  };
  if (auto k = find()) {
    host_.Debug("SSH key is registered already as " + k->name);
    return *k;
  }
  Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  body->set("name", our_name);
  body->set("public_key", kit::TrimSpace(public_key));
  kit::ApiAnswer a =
      api_->Call("POST", "/ssh-keys", "register SSH key " + our_name, body, {400}, false);
  if (a.status == 400) {
    // Registered in the meantime (a lost answer, or another run)? L-SPEC addSSHKey documents
    // only 400 global/invalid-parameters, so whatever the code, look it up once more.
    if (auto k = find()) return *k;
    Array::Ptr keys = DataArray(api_->Call("GET", "/ssh-keys", "list SSH keys"), "list SSH keys");
    for (size_t i = 0; i < keys->size(); ++i) {
      if (json::Str(json::ObjAt(keys, i), "name") == our_name) {
        throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                          "an SSH key named " + our_name + " holds another public key; delete "
                          "it in the Lambda console (SSH keys)");
      }
    }
    throw DriverError(
        StatusOf(400, a.error.code),
        "register SSH key " + our_name + ": Lambda answered HTTP 400 (" + a.error.text + ")");
  }
  ObjectPtr k = DataObject(a, "register SSH key");
  host_.Info("registered SSH key " + our_name);
  return SshKey{json::Str(k, "id"), json::Str(k, "name"), true};
}

void LambdaDriver::DeleteKeyIfUnused(const std::string& key_name, const std::string& except_id) {
  if (key_name.rfind(kResourcePrefix, 0) != 0) return;  // the user's own key: never removed
  for (const auto& in : Instances()) {
    if (json::Str(in, "id") == except_id || !IsManaged(in)) continue;
    for (const auto& k : KeyNamesOf(in)) {
      if (k == key_name) {
        host_.Debug("SSH key " + key_name + " is still used by " + json::Str(in, "name") + "; kept");
        return;
      }
    }
  }
  Array::Ptr keys = DataArray(api_->Call("GET", "/ssh-keys", "list SSH keys"), "list SSH keys");
  for (size_t i = 0; i < keys->size(); ++i) {
    ObjectPtr k = json::ObjAt(keys, i);
    if (!k || json::Str(k, "name") != key_name) continue;
    DeleteSshKey(json::Str(k, "id"), key_name);
  }
}

bool LambdaDriver::DeleteSshKey(const std::string& id, const std::string& key_name) {
  host_.Progress("deleting SSH key " + key_name);
  const std::string what = "delete SSH key " + key_name;
  // L-SPEC deleteSSHKey lists 200, 400 (global/invalid-parameters), 401, 403 and no 404: a key
  // already gone (another run's `down`) may well answer 400. It counts as gone when a fresh
  // list no longer has it; 404 is taken as gone too.
  kit::ApiAnswer a = api_->Call("DELETE", "/ssh-keys/" + Encode(id), what, nullptr, {400, 404});
  if (a.status == 404) return false;
  if (a.status != 400) return true;
  Array::Ptr keys = DataArray(api_->Call("GET", "/ssh-keys", "list SSH keys"), "list SSH keys");
  for (size_t i = 0; i < keys->size(); ++i) {
    if (json::Str(json::ObjAt(keys, i), "id") == id) {
      throw DriverError(StatusOf(400, a.error.code),
                        what + ": Lambda answered HTTP 400 (" + a.error.text + ")");
    }
  }
  host_.Debug("SSH key " + key_name + " was already gone (" + a.error.text + ")");
  return false;
}

// --- firewall (reference section 5) ---------------------------------------------------------

void LambdaDriver::RefuseAccountNarrowing(const std::string& vm_name) {
  throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                    "allow_from: " + vm_name +
                        "'s ports are opened in the account-wide firewall rules, which every "
                        "instance shares, so they cannot be narrowed for one VM; use per-VM "
                        "rulesets (firewall = \"ruleset\" in [clouds.lambda], the default) or "
                        "provision without --allow-from");
}

LambdaDriver::ObjectPtr LambdaDriver::FindRuleset(const std::string& vm_name,
                                                  const std::string& region) {
  Array::Ptr sets = DataArray(api_->Call("GET", "/firewall-rulesets", "list firewall rulesets"),
                              "list firewall rulesets");
  for (size_t i = 0; i < sets->size(); ++i) {
    ObjectPtr s = json::ObjAt(sets, i);
    if (!s || json::Str(s, "name") != RulesetName(vm_name)) continue;
    if (!region.empty() && json::Str(json::Obj(s, "region"), "name") != region) continue;
    return s;
  }
  return nullptr;
}

std::string LambdaDriver::EnsureRuleset(const std::string& vm_name, const std::string& region,
                                        const std::vector<int>& ports,
                                        const kit::PortSources& sources, bool exact,
                                        bool* created) {
  *created = false;
  const std::string name = RulesetName(vm_name);
  const std::string narrowing =
      sources.Narrows()
          ? " (" + PortList(std::vector<int>(sources.narrowed.begin(), sources.narrowed.end())) +
                " only from " + Join(sources.allow_from) + ")"
          : "";
  if (ObjectPtr s = FindRuleset(vm_name, region)) {
    const std::string id = json::Str(s, "id");
    // PATCH replaces the list: every rule there is kept but the sources allow_from drops.
    bool changed = false;
    Array::Ptr all = OpenInRuleset(json::Arr(s, "rules"), vm_name, ports, sources, exact, &changed);
    if (!changed) return id;
    CheckRuleCount(all, sources);
    Object::Ptr body = new Object();
    body->set("rules", all);
    host_.Progress("setting tcp " + PortList(ports) + " in firewall ruleset " + name + narrowing);
    api_->Call("PATCH", "/firewall-rulesets/" + Encode(id), "update firewall ruleset " + name,
               body);
    return id;
  }
  Array::Ptr rules = RulesetRules(vm_name, ports, sources);
  CheckRuleCount(rules, sources);
  Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  body->set("name", name);
  body->set("region", region);
  body->set("rules", rules);
  host_.Progress("creating firewall ruleset " + name + " in " + region + " (tcp " +
                 PortList(ports) + ")" + narrowing);
  kit::ApiAnswer a =
      api_->Call("POST", "/firewall-rulesets", "create firewall ruleset " + name, body, {400},
                 /*idempotent=*/false);
  if (a.status == 400) {
    // Made by a lost answer or another run? L-SPEC createFirewallRuleset documents 400 only as
    // global/invalid-parameters or global/quota-exceeded, so whatever the code, look again.
    if (FindRuleset(vm_name, region)) {
      return EnsureRuleset(vm_name, region, ports, sources, exact, created);
    }
    throw DriverError(
        StatusOf(400, a.error.code),
        "create firewall ruleset " + name + ": Lambda answered HTTP 400 (" + a.error.text + ")");
  }
  *created = true;
  return json::Str(DataObject(a, "create firewall ruleset"), "id");
}

void LambdaDriver::DeleteRuleset(const ObjectPtr& ruleset) {
  const std::string id = json::Str(ruleset, "id");
  const std::string name = json::Str(ruleset, "name");
  host_.Progress("deleting firewall ruleset " + name);
  const std::string what = "delete firewall ruleset " + name;
  // L-SPEC deleteFirewallRuleset: 400 firewall-rulesets/firewall-ruleset-in-use while an
  // instance (one still terminating too) uses it; 409 is global/internal-error. Both are
  // tried again, bounded by delete_wait_seconds, with the kit's progress lines.
  kit::PollOptions options;
  options.what = "waiting for Lambda to release firewall ruleset " + name;
  options.interval = std::max(milliseconds(2000), request_interval_);
  options.timeout = delete_wait_;
  std::string last;
  const bool deleted = kit::PollUntil(host_, options, [&](std::string* status) {
    kit::ApiAnswer a =
        api_->Call("DELETE", "/firewall-rulesets/" + Encode(id), what, nullptr, {400, 404, 409});
    if (a.status == 400 && a.error.code != kRulesetInUseCode) {
      throw DriverError(StatusOf(400, a.error.code),
                        what + ": Lambda answered HTTP 400 (" + a.error.text + ")");
    }
    if (a.status != 400 && a.status != 409) return true;
    last = a.error.text;
    *status = a.status == 400 ? "still in use" : "HTTP 409";
    return false;
  });
  if (!deleted) {
    throw DriverError(GPUPROV_STATUS_TRANSIENT,
                      "firewall ruleset " + name + " is still in use after " +
                          std::to_string(delete_wait_.count()) + " s (" + last +
                          "); run `gpuprov down` again in a minute");
  }
}

void LambdaDriver::WarnAccountWideSources(const std::string& vm_name, const std::string& region,
                                          const kit::PortSources& sources) {
  if (!AccountRulesApply(region)) return;  // they do not apply there (L-SPEC firewallRulesList)
  Array::Ptr rules =
      DataArray(api_->Call("GET", "/firewall-rules", "read firewall rules"), "read firewall rules");
  const std::vector<int> wider = lambda::PortsWiderThan(rules, sources);
  if (wider.empty()) return;
  host_.Warning(
      "the account-wide firewall rules, which apply to every instance beside its "
      "ruleset, open tcp " +
      PortList(wider) + " to sources outside allow_from, so " + vm_name +
      " stays reachable there from those; remove or narrow those rules in "
      "Lambda's console (Firewall) to narrow them too");
}

void LambdaDriver::AddAccountRules(const std::string& vm_name, const std::vector<int>& ports) {
  Array::Ptr rules =
      DataArray(api_->Call("GET", "/firewall-rules", "read firewall rules"), "read firewall rules");
  bool changed = false;
  Array::Ptr updated = lambda::AddToAccountRules(rules, vm_name, ports, &changed);
  if (!changed) return;
  Object::Ptr body = new Object();
  body->set("data", updated);
  host_.Progress("opening tcp " + PortList(ports) + " in the account's firewall rules for " +
                 vm_name + " (" + std::to_string(updated->size()) + " rules, the user's kept)");
  api_->Call("PUT", "/firewall-rules", "write firewall rules", body);
}

void LambdaDriver::RemoveAccountRules(const std::string& vm_name) {
  Array::Ptr rules =
      DataArray(api_->Call("GET", "/firewall-rules", "read firewall rules"), "read firewall rules");
  if (!HasGpuprovRule(rules)) return;
  std::set<std::string> live;
  for (const auto& in : Instances()) {
    if (IsManaged(in) && json::Str(in, "name") != vm_name) live.insert(json::Str(in, "name"));
  }
  bool changed = false;
  Array::Ptr updated = RemoveFromAccountRules(rules, vm_name, live, &changed);
  if (!changed) return;
  Object::Ptr body = new Object();
  body->set("data", updated);
  host_.Progress("removing " + vm_name + "'s ports from the account's firewall rules");
  api_->Call("PUT", "/firewall-rules", "write firewall rules", body);
}

void LambdaDriver::OpenFor(const ObjectPtr& instance, const std::vector<int>& ports,
                           const kit::PortSources& sources, bool exact) {
  const std::string name = json::Str(instance, "name");
  const std::string region = json::Str(json::Obj(instance, "region"), "name");
  ObjectPtr ruleset = FindRuleset(name, region);
  if (ruleset && IsAttached(ruleset, instance)) {
    bool created = false;
    EnsureRuleset(name, region, ports, sources, exact, &created);
    if (sources.Narrows()) WarnAccountWideSources(name, region, sources);
  } else {
    if (sources.Narrows()) RefuseAccountNarrowing(name);
    if (!AccountRulesApply(region)) RefuseWithoutAccountRules(name, region, ports);
    AddAccountRules(name, ports);
  }
}

void LambdaDriver::RefuseWithoutAccountRules(const std::string& vm_name, const std::string& region,
                                             const std::vector<int>& ports) {
  throw DriverError(
      GPUPROV_STATUS_INVALID_INPUT,
      "tcp " + PortList(ports) + " of " + vm_name + " can only be opened by Lambda's account-wide "
          "firewall rules here (the instance has no firewall ruleset of gpuprov's, or this API "
          "takes none), and those rules do not apply in " + region +
          " (Lambda's API reference, firewall rules), so gpuprov cannot open them; provision in "
          "another region (--region), or remove this VM (`gpuprov down " + vm_name +
          "`) and provision again so it gets a ruleset of its own");
}

// --- launch ---------------------------------------------------------------------------------

std::string LambdaDriver::Launch(const std::string& name, ObjectPtr body,
                                 bool* rulesets_refused) {
  *rulesets_refused = false;
  const std::string what = "launch instance " + name;
  kit::Backoff backoff(host_, api_->http().policy(), what);
  for (;;) {
    std::optional<DriverError> failure;
    try {
      kit::ApiAnswer a = api_->Call("POST", kLaunchPath, what, body, {400, 404, 500, 502, 503, 504},
                                    /*idempotent=*/false);
      if ((a.status == 400 || a.status == 404) && a.error.code == "global/object-does-not-exist") {
        // L-SPEC launchInstance 400/404 ApiErrorLaunchResourceNotFound: something the launch
        // names (image, SSH key, ruleset) is not there; not a missing VM.
        throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                          what + ": Lambda answered HTTP " + std::to_string(a.status) + " (" +
                              a.error.text + "); check the image named (--image), or run again");
      }
      if (a.status == 400 && a.error.code == "global/invalid-parameters") {
        // An older API refuses fields it does not know: drop that one and launch again.
        bool dropped = false;
        for (const char* field : kDroppableFields) {
          if (body->has(field) && a.error.text.find(field) != std::string::npos &&
              kit::MentionsAny(a.error.text, kRefusedFieldWords)) {
            body->remove(field);
            dropped = true;
            if (std::string(field) == "firewall_rulesets") *rulesets_refused = true;
            host_.Warning("this Lambda API refuses \"" + std::string(field) + "\" (" +
                          a.error.text + "); launching without it" +
                          (std::string(field) == "user_data"
                               ? ": the installer is pushed over SSH once the instance runs"
                               : ""));
          }
        }
        if (!dropped) {
          throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                            what + ": Lambda answered HTTP 400 (" + a.error.text + ")");
        }
        if (*rulesets_refused) return "";  // the caller opens the ports another way first
        continue;
      }
      if (a.status == 400 || a.status == 404) {
        const gpuprov_type_status st = StatusOf(a.status, a.error.code);
        std::string text =
            what + ": Lambda answered HTTP " + std::to_string(a.status) + " (" + a.error.text + ")";
        if (st == GPUPROV_STATUS_CAPACITY) {
          text += "; Lambda has no capacity for this type there now: try another region or "
                  "instance type (--region, --gpus), or later";
        } else if (st == GPUPROV_STATUS_QUOTA) {
          text += "; ask Lambda support to raise the account's instance quota";
        }
        throw DriverError(st, text);
      }
      if (a.status < 400) {
        Array::Ptr ids = json::Arr(DataObject(a, what), "instance_ids");
        if (!ids || ids->size() != 1) {
          throw DriverError(GPUPROV_STATUS_FAILED, what + ": the answer has no instance id");
        }
        return ids->get(0).toString();
      }
      failure.emplace(
          GPUPROV_STATUS_TRANSIENT,
          what + ": Lambda answered HTTP " + std::to_string(a.status) + " (" + a.error.text + ")");
    } catch (const DriverError& e) {
      if (e.status() != GPUPROV_STATUS_TRANSIENT) throw;
      failure.emplace(e);
    }
    // Launch has no idempotency token: the failed try may have made the instance.
    if (ObjectPtr made = FindByName(name)) {
      host_.Info("instance " + name + " was launched although Lambda's answer failed");
      return json::Str(made, "id");
    }
    if (!backoff.Wait(failure->what())) throw *failure;
  }
}

// --- the protocol ---------------------------------------------------------------------------

LambdaDriver::ObjectPtr LambdaDriver::VmJson(const ObjectPtr& in, const std::vector<int>& ports,
                                            const std::string& image) const {
  const std::string status = json::Str(in, "status");
  const std::string ip = json::Str(in, "ip");
  const VmState state = StateOf(status, !ip.empty());
  ObjectPtr type = json::Obj(in, "instance_type");
  const std::string type_name = json::Str(type, "name");
  kit::VmFields vm;
  // What the state says: Lambda hands out the address before the instance answers on it.
  vm.state = state.state;
  vm.message = state.message;
  vm.public_ip = state.state == "running" ? ip : std::string();
  vm.id = json::Str(in, "id");
  vm.name = json::Str(in, "name");
  vm.ssh_user = kSshUser;
  vm.region = json::Str(json::Obj(in, "region"), "name");
  vm.instance_type = type_name;
  // L-SPEC Instance has no image field: only create knows the image it asked for.
  vm.image = image;
  vm.gpus = GpusText(type_name);
  vm.ports = ports;
  vm.tags = kit::KeyValueTags(json::Arr(in, "tags"));
  // L-SPEC Instance.private_ip ("The private IPv4 address of the instance"): where a cluster's
  // peers reach it (README.md, "Clusters"); cluster and role are its tags.
  vm.private_ip = json::Str(in, "private_ip");
  vm.cluster = TagValue(in, kit::kClusterTag);
  vm.role = TagValue(in, kit::kRoleTag);
  return kit::VmJson(vm);
}

std::string LambdaDriver::Check(const std::string& /*request_json*/) {
  kit::ApiAnswer a = api_->Call("GET", "/ssh-keys", "check the Lambda API key");
  const size_t keys = DataArray(a, "check the Lambda API key")->size();
  Object result(Poco::JSON_PRESERVE_KEY_ORDER);
  result.set("account", "Lambda Cloud account (" + std::to_string(keys) + " SSH keys)");
  result.set("user_data_limit", static_cast<int>(kMaxUserDataBytes));
  // Sources are narrowed in the VM's own ruleset; the account-wide rules serve every instance.
  if (!account_firewall_) result.set("allow_from", true);
  // Its firewall leaves the private network between instances unfiltered (OpenPeerPorts).
  result.set("private_network_unfiltered", true);
  result.set("key_from", api_->credential().origin);
  result.set("endpoint", endpoint_);
  return json::Stringify(result);
}

std::string LambdaDriver::Offers(const std::string& request_json) {
  const auto [gpu, region] = kit::ParseOffersRequest(request_json, default_region_);
  Array::Ptr offers = new Array();
  if (!gpu) {
    host_.Warning("Lambda has only GPU instances: ask for a GPU, e.g. A10:1 (the cheapest)");
    return kit::OffersResult(offers, kPoweredOffCost);
  }
  const kit::Catalogue& catalogue = TypeCatalogue();
  std::optional<std::string> canonical = kit::CanonicalGpu(catalogue, gpu->type);
  if (!canonical || !kit::FindGpuRow(catalogue, gpu->type, gpu->count)) {
    host_.Warning(kit::NotOfferedMessage(catalogue, gpu->type, gpu->count));
    return kit::OffersResult(offers, kPoweredOffCost);
  }
  // Live: every listed type with these GPUs (table rows and names that read as them).
  ObjectPtr types = DataObject(api_->Call("GET", "/instance-types", "list instance types"),
                               "list instance types");
  std::vector<std::string> matching, sold_out;
  for (const auto& type_name : types->getNames()) {
    std::optional<TypeGpus> g = GpusOfTypeName(type_name);
    if (!g || g->gpu_type != *canonical || g->gpu_count != gpu->count) continue;
    matching.push_back(type_name);
    ObjectPtr entry = json::Obj(types, type_name);
    ObjectPtr spec = json::Obj(entry, "instance_type");
    const double price = static_cast<double>(json::Int(spec, "price_cents_per_hour")) / 100.0;
    Array::Ptr regions = json::Arr(entry, "regions_with_capacity_available");
    bool any = false;
    for (size_t i = 0; regions && i < regions->size(); ++i) {
      const std::string r = json::Str(json::ObjAt(regions, i), "name");
      if (!region.empty() && r != region) continue;
      // Listed under regions_with_capacity_available: in stock now, at the live price.
      offers->add(kit::OfferJson({type_name, *canonical, gpu->count, r, price, "", true, "live", ""}));
      any = true;
    }
    if (!any) sold_out.push_back(type_name);
  }
  if (matching.empty()) {
    host_.Warning("Lambda's instance-type list has no type with " + *canonical + ":" +
                  std::to_string(gpu->count) + " now");
  } else if (offers->size() == 0) {
    host_.Warning("Lambda has no capacity now for " + Join(sold_out) +
                  (region.empty() ? std::string(" in any region") : " in " + region) +
                  " (GET /instance-types, regions_with_capacity_available); try later" +
                  (region.empty() ? "" : " or another region"));
  }
  return kit::OffersResult(offers, kPoweredOffCost);
}

std::string LambdaDriver::Create(const std::string& request_json) {
  const auto [request, name, user_data] = kit::ParseCreateRequest(
      request_json, kVmNameRules, kMaxUserDataBytes, "Lambda", "plain-text user data");
  const std::string public_key = kit::RequiredSshPublicKey(
      request, "Lambda installs exactly one registered key for user ubuntu");
  KeyName(public_key);  // validates the key line before any call
  const std::vector<int> ports = kit::WithSsh(kit::PortsOf(request, "open_ports"));
  const kit::PortSources sources = kit::SourcesOf(request, /*ipv6_allowed=*/false);
  if (sources.Narrows() && account_firewall_) RefuseAccountNarrowing(name);
  // A cluster node is tagged; its peers reach it on its private address, which Lambda's
  // firewall does not filter, so nothing more is made for it (README.md, "Clusters").
  const std::optional<kit::ClusterRequest> cluster = kit::ParseCluster(request);
  std::optional<kit::GpuRequest> gpu = kit::ParseGpu(request);
  std::string type = json::Str(request, "instance_type");
  if (!gpu && type.empty()) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "Lambda has only GPU instances: ask for a GPU (gpus, e.g. A10:1) or name "
                      "an instance_type such as gpu_1x_a10");
  }
  std::string canonical;
  if (gpu) {
    std::optional<TypeGpus> named = type.empty() ? std::nullopt : GpusOfTypeName(type);
    const bool same = named && kit::CanonicalGpu(TypeCatalogue(), gpu->type) == named->gpu_type &&
                      named->gpu_count == gpu->count;
    if (!same) {
      // Refuses, before any call, a GPU Lambda does not rent (or a type without these GPUs);
      // the type itself comes from the live list below, any variant with these GPUs.
      canonical = kit::ChooseInstanceType(TypeCatalogue(), gpu, type).row.gpu_type;
      type.clear();
    }
  }
  std::string region = json::Str(request, "region");
  if (region.empty()) region = default_region_;
  const std::string image = json::Str(request, "image");

  // Idempotent by name.
  bool foreign = false;
  if (ObjectPtr existing = FindByName(name, &foreign)) {
    host_.Info("instance " + name + " exists (id " + json::Str(existing, "id") + ", " +
               json::Str(existing, "status") + ")");
    OpenFor(existing, ports, sources, /*exact=*/false);
    return kit::VmResult(VmJson(existing, ports), true);
  }
  if (foreign) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "a Lambda instance named " + name +
                          " exists that gpuprov did not launch (it lacks the gpuprov tag); "
                          "choose another VM name");
  }
  {
    // The type and region from the live list (L7): the cheapest listed type with these GPUs
    // (or the type named) that has capacity in the region (any region when none is named).
    ObjectPtr types = DataObject(api_->Call("GET", "/instance-types", "list instance types"),
                                 "list instance types");
    const LiveChoice choice =
        ChooseLiveType(types, canonical, gpu ? gpu->count : 0, region, type);
    const std::string asked = type.empty() ? canonical + ":" + std::to_string(gpu->count) : type;
    const std::string where = region.empty() ? std::string(" in any region") : " in " + region;
    if (choice.candidates.empty()) {
      throw DriverError(type.empty() ? GPUPROV_STATUS_CAPACITY : GPUPROV_STATUS_INVALID_INPUT,
                        "Lambda's instance-type list (GET /instance-types) has no " +
                            (type.empty() ? "type with " + asked : "type " + type) +
                            " now; ask `gpuprov offers --cloud lambda` what it has");
    }
    if (choice.type.empty()) {
      throw DriverError(GPUPROV_STATUS_CAPACITY,
                        "Lambda has no capacity for " + asked + " (" + Join(choice.candidates) +
                            ")" + where + " now; try later, another region (--region) or "
                            "another GPU");
    }
    type = choice.type;
    region = choice.region;
  }
  // Lambda's account-wide rules do not apply in us-south-1 (L-SPEC firewallRulesList): a VM
  // there gets its own ruleset even with firewall = "account".
  const bool account_rules = account_firewall_ && AccountRulesApply(region);
  if (account_firewall_ && !account_rules) {
    host_.Progress("Lambda's account-wide firewall rules do not apply in " + region + ": " +
                   name + " gets a firewall ruleset of its own (" + RulesetName(name) + ")");
  }

  SshKey key = EnsureSshKey(public_key);
  std::string ruleset_id;
  bool ruleset_created = false;
  bool rules_added = false;
  // name by an init-capture: clang 14 (the sanitizer build) cannot capture a structured binding.
  auto cleanup = [&, name = name] {
    // No instance of this name exists: what gpuprov made for it (now, or in a run that was
    // killed before its launch) goes again; a key only when no gpuprov instance uses it.
    try {
      if (ObjectPtr s = FindRuleset(name, region)) DeleteRuleset(s);
      if (rules_added) RemoveAccountRules(name);
      DeleteKeyIfUnused(key.name, "");
    } catch (const std::exception& e) {
      host_.Warning("could not remove what was made for " + name + ": " + e.what() +
                    "; `gpuprov down " + name + "` removes it");
    }
  };

  Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  body->set("region_name", region);
  body->set("instance_type_name", type);
  Array::Ptr key_names = new Array();
  key_names->add(key.name);
  body->set("ssh_key_names", key_names);
  body->set("name", name);
  body->set("quantity", 1);
  if (!user_data.empty()) body->set("user_data", user_data);  // plain text (section 4)
  if (!image.empty()) {
    Object::Ptr img = new Object();
    img->set(image.rfind("lambda-", 0) == 0 ? "family" : "id", image);
    body->set("image", img);
  }
  body->set("tags", LaunchTags(name, kit::UserTags(request), cluster));

  std::string id;
  try {
    if (account_rules) {
      AddAccountRules(name, ports);
      rules_added = true;
    } else {
      ruleset_id = EnsureRuleset(name, region, ports, sources, /*exact=*/true, &ruleset_created);
      Array::Ptr sets = new Array();
      Object::Ptr ref = new Object();
      ref->set("id", ruleset_id);
      sets->add(ref);
      body->set("firewall_rulesets", sets);
    }
    host_.Progress("launching " + name + " (" + type + " in " + region + ")");
    bool rulesets_refused = false;
    id = Launch(name, body, &rulesets_refused);
    if (rulesets_refused) {
      // An API without rulesets: the account-wide rules instead, written before the launch.
      if (ruleset_created) {
        if (ObjectPtr s = FindRuleset(name, region)) DeleteRuleset(s);
        ruleset_created = false;
      }
      if (sources.Narrows()) RefuseAccountNarrowing(name);
      if (!AccountRulesApply(region)) RefuseWithoutAccountRules(name, region, ports);
      AddAccountRules(name, ports);
      rules_added = true;
      id = Launch(name, body, &rulesets_refused);
    }
  } catch (const DriverError&) {
    cleanup();
    throw;
  }
  host_.Info("instance " + name + " is id " + id);
  if (sources.Narrows()) WarnAccountWideSources(name, region, sources);
  ObjectPtr in = InstanceById(id);
  if (!in) {
    // Launched, then gone before the first look: reported as terminated, so the host stops
    // waiting and `gpuprov down` removes the ruleset and key.
    Object::Ptr gone = new Object();
    gone->set("id", id);
    gone->set("name", name);
    gone->set("status", "terminated");
    Object::Ptr r = new Object();
    r->set("name", region);
    gone->set("region", r);
    Object::Ptr t = new Object();
    t->set("name", type);
    gone->set("instance_type", t);
    ObjectPtr vm = VmJson(gone, ports, image);
    vm->set("message", "Lambda no longer lists the instance (it vanished right after launch)");
    return kit::ConfirmSources(kit::VmResult(vm, false), sources);
  }
  return kit::ConfirmSources(kit::VmResult(VmJson(in, ports, image), false), sources);
}

std::string LambdaDriver::Get(const std::string& request_json) {
  return kit::GetVmResult(request_json, "gpuprov instance", " on Lambda",
                          [&](const ObjectPtr& request) -> ObjectPtr {
                            const ObjectPtr in = Resolve(request);
                            return in ? VmJson(in) : nullptr;
                          });
}

std::string LambdaDriver::List(const std::string& /*request_json*/) {
  Array::Ptr vms = new Array();
  for (const auto& in : Instances()) {
    if (IsManaged(in)) vms->add(VmJson(in));
  }
  return kit::VmsResult(vms);
}

void LambdaDriver::WaitGone(const std::string& id, const std::string& name) {
  kit::PollOptions options;
  options.what = "waiting for instance " + name + " to terminate";
  options.interval = std::max(milliseconds(2000), request_interval_);
  options.timeout = delete_wait_;
  const bool gone = kit::PollUntil(host_, options, [&](std::string* status) {
    kit::ApiAnswer a =
        api_->Call("GET", "/instances/" + Encode(id), "get instance " + id, nullptr, {404});
    if (a.status == 404) return true;
    *status = json::Str(DataObject(a, "get instance " + id), "status");
    return *status == "terminated";
  });
  if (!gone) {
    throw DriverError(GPUPROV_STATUS_TRANSIENT,
                      "instance " + name + " is still terminating after " +
                          std::to_string(delete_wait_.count()) +
                          " s; run `gpuprov down " + name + "` again later to remove its "
                          "firewall ruleset and SSH key");
  }
}

std::string LambdaDriver::Delete(const std::string& request_json) {
  ObjectPtr request = json::ParseObject(request_json, "the delete request");
  ObjectPtr in = Resolve(request);
  std::string name = json::Str(request, "name");
  bool deleted = false;
  std::string id, region;
  std::vector<std::string> key_names;
  if (in) {
    id = json::Str(in, "id");
    name = json::Str(in, "name");
    region = json::Str(json::Obj(in, "region"), "name");
    key_names = KeyNamesOf(in);
    host_.Progress("terminating instance " + name + " (id " + id + ")");
    Object::Ptr body = new Object();
    Array::Ptr ids = new Array();
    ids->add(id);
    body->set("instance_ids", ids);
    kit::ApiAnswer a = api_->Call("POST", "/instance-operations/terminate",
                                  "terminate instance " + name, body, {404});
    deleted = a.status != 404;  // already gone counts as done (section 3.4)
  }
  if (name.empty()) return kit::DeletedResult(deleted);
  // The ruleset of this VM name, even when the instance was already gone (a half-done create).
  ObjectPtr ruleset = FindRuleset(name, region);
  if (in && ruleset) WaitGone(id, name);  // Lambda refuses to delete an attached ruleset
  if (ruleset) DeleteRuleset(ruleset);
  RemoveAccountRules(name);
  if (!in) {
    // The instance vanished before its key could be read: every key gpuprov registered that
    // no live gpuprov instance uses is an orphan of it.
    Array::Ptr keys = DataArray(api_->Call("GET", "/ssh-keys", "list SSH keys"), "list SSH keys");
    for (size_t i = 0; i < keys->size(); ++i) {
      const std::string k = json::Str(json::ObjAt(keys, i), "name");
      if (k.rfind(kResourcePrefix, 0) == 0) key_names.push_back(k);
    }
  }
  for (const auto& k : key_names) DeleteKeyIfUnused(k, id);
  return kit::DeletedResult(deleted);
}

std::string LambdaDriver::ListResources(const std::string& /*request_json*/) {
  std::vector<kit::ResourceFields> out;
  std::vector<ObjectPtr> managed;
  for (const auto& in : Instances()) {
    if (!IsManaged(in)) continue;
    managed.push_back(in);
    const std::string name = json::Str(in, "name");
    const std::string tagged = TagValue(in, kit::kNameTag);
    kit::ResourceFields r = kit::Resource("vm", json::Str(in, "id"), name);
    r.vm_names = {tagged.empty() ? name : tagged};
    r.cluster = TagValue(in, kit::kClusterTag);
    r.role = TagValue(in, kit::kRoleTag);
    r.region = json::Str(json::Obj(in, "region"), "name");
    // Lambda lists no creation time for an instance; its type carries the price.
    ObjectPtr type = json::Obj(in, "instance_type");
    if (type && json::Has(type, "price_cents_per_hour")) {
      r.price_per_hour = static_cast<double>(json::Int(type, "price_cents_per_hour")) / 100.0;
    }
    out.push_back(r);
  }
  Array::Ptr sets = DataArray(api_->Call("GET", "/firewall-rulesets", "list firewall rulesets"),
                              "list firewall rulesets");
  for (size_t i = 0; i < sets->size(); ++i) {
    ObjectPtr set = json::ObjAt(sets, i);
    const std::string name = json::Str(set, "name");
    if (!set || name.rfind(kResourcePrefix, 0) != 0) continue;
    kit::ResourceFields r = kit::Resource("ruleset", json::Str(set, "id"), name);
    r.vm_names = {name.substr(std::string(kResourcePrefix).size())};
    r.region = json::Str(json::Obj(set, "region"), "name");
    r.created_at = json::Str(set, "created");
    out.push_back(r);
  }
  // gpuprov's rules in the account-wide list, as one resource per VM name they name.
  Array::Ptr rules =
      DataArray(api_->Call("GET", "/firewall-rules", "read firewall rules"), "read firewall rules");
  for (const auto& vm : AccountRuleVms(rules)) {
    kit::ResourceFields r =
        kit::Resource("account_rules", vm, "gpuprov's account-wide firewall rules for " + vm);
    r.vm_names = {vm};
    out.push_back(r);
  }
  Array::Ptr keys = DataArray(api_->Call("GET", "/ssh-keys", "list SSH keys"), "list SSH keys");
  for (size_t i = 0; i < keys->size(); ++i) {
    ObjectPtr k = json::ObjAt(keys, i);
    const std::string name = json::Str(k, "name");
    if (!k || name.rfind(kResourcePrefix, 0) != 0) continue;
    kit::ResourceFields r = kit::Resource("ssh_key", json::Str(k, "id"), name);
    for (const auto& in : managed) {
      for (const auto& used : KeyNamesOf(in)) {
        if (used == name) r.vm_names.push_back(json::Str(in, "name"));
      }
    }
    out.push_back(r);
  }
  return kit::ResourcesResult(out);
}

std::string LambdaDriver::DeleteResource(const std::string& request_json) {
  const kit::ResourceRef ref =
      kit::ParseResourceRequest(request_json, {"vm", "ruleset", "account_rules", "ssh_key"});
  auto refuse = [&] {
    return DriverError(
        GPUPROV_STATUS_INVALID_INPUT,
        ref.kind + " " + ref.id + " does not carry gpuprov's tag or name; gpuprov leaves it alone");
  };
  // Each is looked up again: only what still carries gpuprov's mark is deleted.
  if (ref.kind == "vm") {
    ObjectPtr in = InstanceById(ref.id);
    if (!in || IsGoneStatus(json::Str(in, "status"))) return kit::DeletedResult(false);
    if (!IsManaged(in)) throw refuse();
    host_.Progress("terminating instance " + json::Str(in, "name") + " (id " + ref.id + ")");
    Object::Ptr body = new Object();
    Array::Ptr ids = new Array();
    ids->add(ref.id);
    body->set("instance_ids", ids);
    kit::ApiAnswer a = api_->Call("POST", "/instance-operations/terminate",
                                  "terminate instance " + ref.id, body, {404});
    return kit::DeletedResult(a.status != 404);
  }
  if (ref.kind == "account_rules") {
    Array::Ptr rules = DataArray(api_->Call("GET", "/firewall-rules", "read firewall rules"),
                                 "read firewall rules");
    const std::vector<std::string> vms = AccountRuleVms(rules);
    if (std::find(vms.begin(), vms.end(), ref.id) == vms.end()) return kit::DeletedResult(false);
    RemoveAccountRules(ref.id);
    return kit::DeletedResult(true);
  }
  const bool ruleset = ref.kind == "ruleset";
  Array::Ptr list =
      ruleset ? DataArray(api_->Call("GET", "/firewall-rulesets", "list firewall rulesets"),
                          "list firewall rulesets")
              : DataArray(api_->Call("GET", "/ssh-keys", "list SSH keys"), "list SSH keys");
  ObjectPtr found;
  for (size_t i = 0; i < list->size(); ++i) {
    ObjectPtr o = json::ObjAt(list, i);
    if (o && json::Str(o, "id") == ref.id) found = o;
  }
  if (!found) return kit::DeletedResult(false);
  if (json::Str(found, "name").rfind(kResourcePrefix, 0) != 0) throw refuse();
  if (ruleset) {
    // Lambda refuses to delete a ruleset attached to an instance, terminating ones included.
    Array::Ptr attached = json::Arr(found, "instance_ids");
    for (size_t i = 0; attached && i < attached->size(); ++i) {
      const std::string id = attached->get(static_cast<unsigned>(i)).toString();
      WaitGone(id, id);
    }
    DeleteRuleset(found);
    return kit::DeletedResult(true);
  }
  return kit::DeletedResult(DeleteSshKey(ref.id, json::Str(found, "name")));
}

std::string LambdaDriver::OpenPeerPorts(const std::string& request_json) {
  // Lambda's firewall (the account-wide rules and the rulesets) admits inbound traffic from
  // public source networks only (L-SPEC FirewallRule.source_network: "a public IPv4 address");
  // instances of one region reach each other on their private_ip without it, as SkyPilot's
  // Lambda clusters do (skypilot-org/skypilot sky/provision/lambda_cloud/instance.py: the
  // nodes talk on private_ip, and open_ports is not supported). There is nothing to set on
  // the cloud: the node firewall admits exactly the peers on the peer ports (README.md,
  // "Clusters"), and no rule opens them to the internet.
  const kit::PeerPortsRequest req = kit::ParsePeerPortsRequest(request_json);
  host_.Debug("cluster " + req.cluster + ": " + std::to_string(req.peers.size()) +
              " nodes reach each other on their private addresses (" +
              kit::PeerPortsText(req.peer_ports) + "); Lambda's firewall filters only public "
              "sources, so nothing is set on the cloud");
  return "{}";
}

std::string LambdaDriver::OpenPorts(const std::string& request_json) {
  ObjectPtr request = json::ParseObject(request_json, "the open_ports request");
  const std::vector<int> ports = kit::PortsOf(request, "ports");
  const kit::PortSources sources = kit::SourcesOf(request, /*ipv6_allowed=*/false);
  ObjectPtr in = Resolve(request);
  if (!in) {
    throw DriverError(GPUPROV_STATUS_NOT_FOUND,
                      "no gpuprov instance " + kit::VmReference(request) + " on Lambda");
  }
  if (!ports.empty()) OpenFor(in, ports, sources, /*exact=*/true);
  return kit::ConfirmSources("{}", sources);
}

}  // namespace gpuprov::lambda

// The keys of [clouds.lambda] this driver reads (gpuprov refuses others in config.toml); the
// kit's standard keys first, README.md's settings table lists the same
// (driver_settings_docs_test).
constexpr gpuprov_type_config_key kLambdaConfigKeys[] = {
    gpuprov::drivers::kRetryKey,
    gpuprov::drivers::DeleteWaitKey("how long down waits for the instance (600)"),
    gpuprov::drivers::TokenEnvKey("the environment variable that holds the API key"),
    gpuprov::sdk::RenamedKey("api_key_env", gpuprov::drivers::kTokenEnvSetting),
    gpuprov::sdk::StringKey("region", "the region used when provision names none"),
    gpuprov::sdk::StringKey("firewall", "\"ruleset\" (a ruleset per VM, default) or \"account\""),
    gpuprov::sdk::StringKey("api_key_file", "Lambda's keys file (~/.lambda_cloud/lambda_keys)"),
    gpuprov::sdk::IntegerKey("request_interval_ms", "pause between API requests (1000, as documented)"),
    gpuprov::sdk::IntegerKey("launch_interval_ms", "pause between launches (12000, as documented)"),
};

GPUPROV_DRIVER(gpuprov::lambda::LambdaDriver, kLambdaConfigKeys)
