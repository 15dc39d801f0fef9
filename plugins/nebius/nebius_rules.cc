// SPDX-License-Identifier: Apache-2.0
#include "nebius_rules.h"

#include <Poco/Crypto/RSAKey.h>
#include <Poco/JWT/Signer.h>
#include <Poco/JWT/Token.h>
#include <Poco/Timestamp.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>
#include <set>
#include <sstream>

#include "config_files.h"
#include "credentials.h"
#include "json_util.h"
#include "tags.h"
#include "text.h"

namespace gpuprov::nebius {
namespace {

using gpuprov::sdk::DriverError;
namespace json = gpuprov::drivers::json;

using gpuprov::drivers::Lower;

// Text as a double-quoted YAML scalar.
std::string YamlQuoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

const std::vector<PlatformPreset>& GpuPresets() {
  // The table of REFERENCE.md (§7); the first row of a GPU:count is the one taken unless one is
  // marked preferred.
  static const std::vector<PlatformPreset> rows = {
      {"gpu-h100-sxm", "1gpu-16vcpu-200gb", "H100", 1, true},
      {"gpu-h100-sxm", "8gpu-128vcpu-1600gb", "H100", 8, true},
      {"gpu-h200-sxm", "1gpu-16vcpu-200gb", "H200", 1, true},
      {"gpu-h200-sxm", "8gpu-128vcpu-1600gb", "H200", 8, true},
      {"gpu-b200-sxm", "8gpu-160vcpu-1792gb", "B200", 8, true},
      {"gpu-l40s-a", "1gpu-8vcpu-32gb", "L40S", 1, true},
      {"gpu-l40s-a", "1gpu-16vcpu-64gb", "L40S", 1, false},
      {"gpu-l40s-a", "1gpu-40vcpu-160gb", "L40S", 1, false},
      {"gpu-l40s-d", "1gpu-16vcpu-96gb", "L40S", 1, false},
      {"gpu-l40s-d", "2gpu-64vcpu-384gb", "L40S", 2, true},
      {"gpu-l40s-d", "4gpu-128vcpu-768gb", "L40S", 4, true},
  };
  return rows;
}

const PlatformPreset& CpuPreset() {
  static const PlatformPreset cpu{"cpu-d3", "8vcpu-32gb", "", 0, true};
  return cpu;
}

const drivers::Catalogue& PresetCatalogue() {
  static const drivers::Catalogue catalogue = [] {
    drivers::Catalogue c;
    c.cloud = "Nebius";
    c.type_word = "platform/preset";
    for (const auto& r : GpuPresets()) {
      c.rows.push_back({r.InstanceType(), r.gpu_type, r.gpu_count, r.preferred});
    }
    c.cpu_default = {CpuPreset().InstanceType(), "", 0, true};
    c.gpu_hint = [](const std::string& gpu) -> std::string {
      const std::string g = Lower(gpu);
      if (g.rfind("a100", 0) == 0 || g.find("a6000") != std::string::npos) {
        return "Nebius AI Cloud has no A100 or RTX A6000 platform";
      }
      return "";
    };
    return c;
  }();
  return catalogue;
}

std::optional<PlatformPreset> ParseInstanceType(const std::string& instance_type) {
  const size_t slash = instance_type.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 >= instance_type.size() ||
      instance_type.find('/', slash + 1) != std::string::npos) {
    return std::nullopt;
  }
  return PresetOf(instance_type.substr(0, slash), instance_type.substr(slash + 1));
}

PlatformPreset PresetOf(const std::string& platform, const std::string& preset) {
  for (const auto& r : GpuPresets()) {
    if (r.platform == platform && r.preset == preset) return r;
  }
  return PlatformPreset{platform, preset, "", 0, false};
}

PlatformPreset ChoosePreset(const std::optional<drivers::GpuRequest>& gpu,
                            const std::string& instance_type) {
  if (!instance_type.empty() && !ParseInstanceType(instance_type)) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "instance_type \"" + instance_type +
                          "\" is not a Nebius platform/preset: write it as <platform>/<preset>, "
                          "e.g. gpu-h100-sxm/1gpu-16vcpu-200gb");
  }
  const drivers::CatalogueChoice choice =
      drivers::ChooseInstanceType(PresetCatalogue(), gpu, instance_type);
  if (choice.cpu_default) return CpuPreset();
  if (choice.index) return GpuPresets()[*choice.index];
  return *ParseInstanceType(choice.row.instance_type);
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  if (host.rfind("127.", 0) != 0) return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.') {
      ++dots;
    } else if (!std::isdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return dots == 3;
}

Endpoints ParseEndpoint(const std::string& override_address) {
  if (override_address.empty()) {
    return Endpoints{kComputeEndpoint, kVpcEndpoint, kTokensEndpoint, false};
  }
  std::string rest = override_address;
  std::string scheme;
  if (const size_t p = rest.find("://"); p != std::string::npos) {
    scheme = Lower(rest.substr(0, p));
    rest = rest.substr(p + 3);
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const auto bad = [&](const std::string& why) {
    return DriverError(GPUPROV_STATUS_INVALID_INPUT,
                       "the Nebius endpoint \"" + override_address + "\" " + why +
                           " (set by GPUPROV_NEBIUS_ENDPOINT or endpoint in [clouds.nebius]; "
                           "write host:port)");
  };
  if (!scheme.empty() && scheme != "http" && scheme != "https") {
    throw bad("has scheme " + scheme + "; use https:// or none");
  }
  std::string host = rest;
  if (rest.empty() || rest.find('/') != std::string::npos) throw bad("is not host:port");
  if (rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string::npos) throw bad("is not host:port");
    host = rest.substr(0, close + 1);
  } else if (const size_t colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    const std::string port = rest.substr(colon + 1);
    if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos) {
      throw bad("has no valid port");
    }
  } else {
    rest += ":443";
  }
  const bool loopback = IsLoopbackHost(host);
  if (scheme == "http" && !loopback) {
    throw bad("is plaintext (http://) to a host that is not loopback; only emulators on "
              "127.0.0.1 may be reached without TLS");
  }
  const bool plaintext = scheme == "http" || (scheme.empty() && loopback);
  return Endpoints{rest, rest, rest, plaintext};
}

ServiceAccountKey ParseCredentialsFile(const std::string& text, const std::string& origin) {
  Poco::JSON::Object::Ptr doc = json::TryParseObject(text);
  const auto bad = [&](const std::string& why) {
    return DriverError(GPUPROV_STATUS_AUTH,
                       "the Nebius credentials file " + origin + " " + why +
                           "; it should hold {\"subject-credentials\": {\"alg\": \"RS256\", "
                           "\"private-key\", \"kid\", \"iss\", \"sub\"}} (a service account's "
                           "key, as `nebius iam auth-public-key generate` writes it)");
  };
  if (!doc) throw bad("is not a JSON object");
  Poco::JSON::Object::Ptr sc = json::Obj(doc, "subject-credentials");
  if (!sc) throw bad("has no \"subject-credentials\" object");
  ServiceAccountKey key;
  key.private_key_pem = json::Str(sc, "private-key");
  key.kid = json::Str(sc, "kid");
  key.iss = json::Str(sc, "iss");
  key.sub = json::Str(sc, "sub");
  key.origin = origin;
  const std::string alg = json::Str(sc, "alg");
  if (!alg.empty() && alg != "RS256") throw bad("names alg " + alg + ", not RS256");
  for (const auto& [field, value] :
       {std::pair<const char*, std::string*>{"private-key", &key.private_key_pem},
        {"kid", &key.kid},
        {"iss", &key.iss}}) {
    if (value->empty()) throw bad(std::string("has no subject-credentials.") + field);
  }
  if (key.sub.empty()) key.sub = key.iss;
  return key;
}

std::string MakeJwt(const ServiceAccountKey& key, int64_t now_unix_seconds, int lifetime_seconds) {
  Poco::SharedPtr<Poco::Crypto::RSAKey> rsa;
  try {
    std::istringstream in(key.private_key_pem);
    rsa = new Poco::Crypto::RSAKey(nullptr, &in);
  } catch (const Poco::Exception&) {
    // OpenSSL's message may quote key material: it is not passed on.
    throw DriverError(GPUPROV_STATUS_AUTH, "subject-credentials.private-key in " + key.origin +
                                               " is not a PEM RSA private key");
  }
  Poco::JWT::Token token;
  token.setType("JWT");
  token.header().set("kid", key.kid);
  token.setIssuer(key.iss);
  token.setSubject(key.sub);
  token.setIssuedAt(Poco::Timestamp::fromEpochTime(static_cast<std::time_t>(now_unix_seconds)));
  token.setExpiration(Poco::Timestamp::fromEpochTime(
      static_cast<std::time_t>(now_unix_seconds + lifetime_seconds)));
  Poco::JWT::Signer signer(rsa);
  return signer.sign(token, Poco::JWT::Signer::ALGO_RS256);
}

std::optional<std::string> ProfileParentId(const std::string& yaml_text,
                                           const std::string& profile) {
  std::string name = profile;
  if (name.empty()) name = drivers::YamlString(yaml_text, {"default"}).value_or("");
  if (name.empty()) return std::nullopt;
  std::optional<std::string> id = drivers::YamlString(yaml_text, {"profiles", name, "parent-id"});
  if (id && id->empty()) return std::nullopt;
  return id;
}

gpuprov_type_status StatusOfGrpc(int code, Detail detail, const std::string& message) {
  switch (code) {
    case 0:
      return GPUPROV_STATUS_OK;
    case 1:  // CANCELLED
      return GPUPROV_STATUS_CANCELLED;
    case 3:   // INVALID_ARGUMENT
    case 6:   // ALREADY_EXISTS
    case 11:  // OUT_OF_RANGE
      return GPUPROV_STATUS_INVALID_INPUT;
    case 5:  // NOT_FOUND
      return GPUPROV_STATUS_NOT_FOUND;
    case 7:   // PERMISSION_DENIED
    case 16:  // UNAUTHENTICATED
      return GPUPROV_STATUS_AUTH;
    case 8:  // RESOURCE_EXHAUSTED
      if (detail == Detail::kQuotaFailure ||
          message.find("Quota limit exceeded") != std::string::npos) {
        return GPUPROV_STATUS_QUOTA;
      }
      if (detail == Detail::kTooManyRequests) return GPUPROV_STATUS_TRANSIENT;
      return GPUPROV_STATUS_CAPACITY;
    case 4:   // DEADLINE_EXCEEDED
    case 10:  // ABORTED
    case 13:  // INTERNAL
    case 14:  // UNAVAILABLE
      return GPUPROV_STATUS_TRANSIENT;
    case 9:  // FAILED_PRECONDITION
      return detail == Detail::kOperationConflict ? GPUPROV_STATUS_TRANSIENT
                                                  : GPUPROV_STATUS_FAILED;
    default:
      return GPUPROV_STATUS_FAILED;
  }
}

bool RetryableGrpc(int code, Detail detail) {
  switch (code) {
    case 4:
    case 10:
    case 13:
    case 14:
      return true;
    case 8:
    case 9:
      return detail == Detail::kTooManyRequests || detail == Detail::kOperationConflict;
    default:
      return false;
  }
}

std::string GrpcCodeName(int code) {
  static const char* const names[] = {
      "OK",        "CANCELLED",          "UNKNOWN",           "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND",  "ALREADY_EXISTS",    "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",       "UNAVAILABLE",       "DATA_LOSS",
      "UNAUTHENTICATED"};
  if (code >= 0 && code <= 16) return names[code];
  return "code " + std::to_string(code);
}

std::string InstanceStateName(int s) {
  static const char* const names[] = {"UNSPECIFIED", "CREATING", "UPDATING",
                                      "STARTING",    "RUNNING",  "STOPPING",
                                      "STOPPED",     "DELETING", "ERROR"};
  if (s >= 0 && s <= 8) return names[s];
  return "STATE " + std::to_string(s);
}

std::string VmStateOf(int s, bool reconciling) {
  switch (s) {
    case 4:
      return "running";
    case 6:  // STOPPED: a new instance shows it while reconciling (REFERENCE.md §3.3)
      return reconciling ? "pending" : "stopped";
    case 5:  // STOPPING
      return "stopped";
    case 7:  // DELETING
      return "terminated";
    case 8:
      return "error";
    default:  // UNSPECIFIED, CREATING, UPDATING, STARTING
      return "pending";
  }
}

bool PreemptedByCompute(bool preemptible, int instance_state, bool reconciling,
                        bool stopped_in_spec) {
  return preemptible && instance_state == 6 /* STOPPED */ && !reconciling && !stopped_in_spec;
}

bool AnyAddress(const std::vector<std::string>& cidrs, const std::string& security_group_id) {
  if (cidrs.empty()) return security_group_id.empty();
  return std::find(cidrs.begin(), cidrs.end(), "0.0.0.0/0") != cidrs.end();
}

std::string StripPrefixLength(const std::string& cidr) {
  const size_t slash = cidr.find('/');
  return slash == std::string::npos ? cidr : cidr.substr(0, slash);
}

std::string MakeUserData(const std::string& ssh_user, const std::string& ssh_public_key,
                         const std::string& user_data) {
  const std::string boundary = "==gpuprov-nebius-boundary==";
  std::string config = "#cloud-config\n";
  config += "users:\n";
  config += "  - name: " + YamlQuoted(ssh_user) + "\n";
  config += "    shell: /bin/bash\n";
  config += "    sudo: \"ALL=(ALL) NOPASSWD:ALL\"\n";
  config += "    lock_passwd: true\n";
  config += "    ssh_authorized_keys:\n";
  config += "      - " + YamlQuoted(drivers::TrimSpace(ssh_public_key)) + "\n";
  std::string out = "Content-Type: multipart/mixed; boundary=\"" + boundary + "\"\n";
  out += "MIME-Version: 1.0\n\n";
  out += "--" + boundary + "\n";
  out += "Content-Type: text/cloud-config; charset=\"us-ascii\"\n";
  out += "MIME-Version: 1.0\n\n";
  out += config;
  if (!user_data.empty()) {
    const bool cloud_config = user_data.rfind("#cloud-config", 0) == 0;
    out += "--" + boundary + "\n";
    out += std::string("Content-Type: ") +
           (cloud_config ? "text/cloud-config" : "text/x-shellscript") + "; charset=\"utf-8\"\n";
    out += "MIME-Version: 1.0\n\n";
    out += user_data;
    if (user_data.back() != '\n') out += '\n';
  }
  out += "--" + boundary + "--\n";
  return out;
}

std::string SecurityGroupName(const std::string& vm_name) {
  return std::string(drivers::kResourcePrefix) + vm_name;
}

std::string BootDiskName(const std::string& vm_name) { return vm_name + "-boot"; }

std::map<std::string, std::string> LabelsFor(const std::string& vm_name,
                                             const std::map<std::string, std::string>& user_tags) {
  std::map<std::string, std::string> labels;
  for (const auto& [k, v] : user_tags) {
    const std::string key = drivers::FitTag(k, "-_", 63, true);
    if (key.empty()) continue;
    labels[key] = drivers::FitTag(v, "-_.", 63, true);
  }
  for (const auto& [k, v] : drivers::ManagedTags(vm_name)) labels[k] = v;
  return labels;
}

bool OwnedBy(const std::map<std::string, std::string>& labels, const std::string& vm_name) {
  auto managed = labels.find(drivers::kManagedTag);
  if (managed == labels.end() || managed->second != "1") return false;
  if (vm_name.empty()) return true;
  auto name = labels.find(drivers::kNameTag);
  return name != labels.end() && name->second == vm_name;
}

std::vector<std::vector<int>> PortGroups(const std::vector<int>& ports) {
  std::vector<std::vector<int>> groups;
  for (size_t i = 0; i < ports.size(); i += 8) {
    groups.emplace_back(ports.begin() + static_cast<long>(i),
                        ports.begin() + static_cast<long>(std::min(ports.size(), i + 8)));
  }
  return groups;
}

namespace {

// FNV-1a (32 bits) of the CIDRs, as 8 hex digits: a short fixed name part per source list.
std::string CidrsHash(const std::vector<std::string>& cidrs) {
  uint32_t h = 2166136261u;
  for (const auto& c : cidrs) {
    for (char ch : c + ",") {
      h ^= static_cast<unsigned char>(ch);
      h *= 16777619u;
    }
  }
  static const char* hex = "0123456789abcdef";
  std::string out(8, '0');
  for (int i = 7; i >= 0; --i, h >>= 4) out[static_cast<size_t>(i)] = hex[h & 0xf];
  return out;
}

// Rules for `ports` from `cidrs`, split to at most 8 of each.
void AddRules(const std::vector<int>& ports, const std::vector<std::string>& cidrs,
              std::vector<IngressRule>* out) {
  for (const auto& group : PortGroups(ports)) {
    for (size_t i = 0; i < cidrs.size(); i += 8) {
      IngressRule r;
      r.ports = group;
      r.cidrs.assign(cidrs.begin() + static_cast<long>(i),
                     cidrs.begin() + static_cast<long>(std::min(cidrs.size(), i + 8)));
      r.name = "ingress-tcp";
      for (int p : group) r.name += "-" + std::to_string(p);
      r.name += "-src-" + CidrsHash(r.cidrs);
      out->push_back(std::move(r));
    }
  }
}

}  // namespace

SourcesPlan PlanSources(const std::vector<IngressRule>& rules, const std::vector<int>& ports,
                        const drivers::PortSources& sources) {
  SourcesPlan plan;
  std::set<int> narrowed;
  for (int p : ports) {
    if (sources.IsNarrowed(p)) narrowed.insert(p);
  }
  if (narrowed.empty()) return plan;
  const std::set<std::string> want(sources.allow_from.begin(), sources.allow_from.end());
  std::map<int, std::set<std::string>> covered;
  for (const auto& r : rules) {
    std::vector<int> hit;
    for (int p : narrowed) {
      if (r.ports.empty() || std::find(r.ports.begin(), r.ports.end(), p) != r.ports.end()) {
        hit.push_back(p);
      }
    }
    if (hit.empty()) continue;
    bool wider = r.cidrs.empty();
    for (const auto& c : r.cidrs) wider = wider || want.count(c) == 0;
    if (!wider) {
      for (int p : hit) covered[p].insert(r.cidrs.begin(), r.cidrs.end());
      continue;
    }
    if (r.ports.empty()) {
      plan.problem = "security rule " + r.name + " (" + r.id +
                     ") opens every tcp port to sources outside allow_from";
      continue;
    }
    plan.remove_ids.push_back(r.id);
    std::vector<int> keep;
    for (int p : r.ports) {
      if (!narrowed.count(p)) keep.push_back(p);
    }
    if (!keep.empty())
      AddRules(keep, r.cidrs.empty() ? std::vector<std::string>{"0.0.0.0/0"} : r.cidrs, &plan.add);
  }
  // The narrowed ports by the sources they lack: one set of rules per distinct list.
  std::map<std::vector<std::string>, std::vector<int>> lacking;
  for (int p : narrowed) {
    std::vector<std::string> missing;
    for (const auto& c : sources.allow_from) {
      if (!covered[p].count(c)) missing.push_back(c);
    }
    if (!missing.empty()) lacking[missing].push_back(p);
  }
  for (const auto& [cidrs, ps] : lacking) AddRules(ps, cidrs, &plan.add);
  return plan;
}

}  // namespace gpuprov::nebius
