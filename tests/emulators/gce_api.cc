// SPDX-License-Identifier: Apache-2.0
//
// Google Compute Engine REST v1 and its OAuth2 token endpoint, as described in
// plugins/gcp/REFERENCE.md: instances, zone and global operations, firewalls, disks,
// zones, regions, machine and accelerator types, networks, public images, the project.
// One server answers the token endpoint (POST /token, and libcloud's legacy
// /o/oauth2/token: jwt-bearer and refresh_token grants), the Security Token Service
// (POST /v1/token, token exchange), IAM Credentials generateAccessToken
// (POST /v1/projects/-/serviceAccounts/<email>:generateAccessToken), a metadata server
// (/computeMetadata/v1/...), a URL-sourced subject token (/metadata/identity/oauth2/token)
// and the Compute paths (/compute/v1/projects/...). Messages the reference does not give
// verbatim are marked "(not from the reference)" and listed in README.md.
#include "gce_api.h"

#include <Poco/Crypto/EVPPKey.h>
#include <Poco/Crypto/RSADigestEngine.h>
#include <Poco/Crypto/RSAKey.h>
#include <Poco/File.h>
#include <Poco/URI.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "emulator.h"

namespace gpuprov::emulator {
namespace {

using Clock = std::chrono::steady_clock;
using SysClock = std::chrono::system_clock;
using std::chrono::milliseconds;

constexpr const char* kSelfLinkBase = "https://www.googleapis.com/compute/v1/projects/";
constexpr const char* kDefaultProject = "gpuprov-emulator";
constexpr const char* kDefaultEmail = "gpuprov-emulator@gpuprov-emulator.iam.gserviceaccount.com";
constexpr size_t kMaxMetadataValue = 262144;
constexpr size_t kMaxMetadataTotal = 512 * 1024;
constexpr int kTokenLifetimeSeconds = 3599;
// The user credentials (authorized_user), workload identity pool and subject token the
// emulator accepts (README.md, "Google Compute Engine").
constexpr const char* kUserClientId = "emulator-client.apps.googleusercontent.com";
constexpr const char* kUserClientSecret = "emulator-client-secret";
constexpr const char* kUserRefreshToken = "1//emulator-refresh-token";
constexpr const char* kWifAudience =
    "//iam.googleapis.com/projects/470000000001/locations/global/workloadIdentityPools/"
    "gpuprov-pool/providers/gpuprov-provider";
constexpr const char* kSubjectToken = "emulator-subject-token";
constexpr int kMaxResultsDefault = 500;
// Timings of the emulated control plane (the backend decides the VM's own boot).
constexpr milliseconds kProvisioningPhase{800};   // PROVISIONING before STAGING
constexpr milliseconds kCapacityFailAfter{1000};  // a stockout is known this late
constexpr milliseconds kStoppingPhase{600};       // STOPPING before a deleted instance is gone
constexpr milliseconds kGlobalOpDuration{300};    // firewall operations

const std::vector<std::string>& ImageProjects() {
  static const std::vector<std::string> p = {"deeplearning-platform-release", "ubuntu-os-cloud",
                                             "debian-cloud"};
  return p;
}

// --- static catalogue (illustrative; plugins/gcp/REFERENCE.md §3.7, §7, §9) ----------------------

struct ZoneDef {
  const char* name;
  std::vector<std::string> accelerators;
};

const std::vector<ZoneDef>& Zones() {
  static const std::vector<ZoneDef> zones = {
      {"us-central1-a",
       {"nvidia-l4", "nvidia-tesla-t4", "nvidia-tesla-a100", "nvidia-a100-80gb", "nvidia-h100-80gb",
        "nvidia-h100-mega-80gb", "nvidia-tesla-v100"}},
      {"us-central1-b",
       {"nvidia-l4", "nvidia-tesla-t4", "nvidia-tesla-a100", "nvidia-h200-141gb", "nvidia-b200",
        "nvidia-tesla-v100"}},
      {"us-central1-c",
       {"nvidia-l4", "nvidia-tesla-t4", "nvidia-tesla-a100", "nvidia-a100-80gb", "nvidia-h100-80gb",
        "nvidia-h100-mega-80gb", "nvidia-tesla-v100"}},
      {"us-central1-f", {"nvidia-tesla-t4", "nvidia-tesla-a100", "nvidia-tesla-v100"}},
      {"us-east1-b", {"nvidia-l4", "nvidia-tesla-a100"}},
      {"us-east1-c", {"nvidia-l4", "nvidia-tesla-t4"}},
      {"us-east1-d", {"nvidia-l4", "nvidia-tesla-t4"}},
      {"us-west1-a", {"nvidia-l4", "nvidia-tesla-t4"}},
      {"us-west1-b", {"nvidia-l4", "nvidia-tesla-t4", "nvidia-tesla-a100"}},
      {"europe-west4-a",
       {"nvidia-l4", "nvidia-tesla-t4", "nvidia-tesla-a100", "nvidia-a100-80gb",
        "nvidia-tesla-v100"}},
      {"europe-west4-b",
       {"nvidia-l4", "nvidia-tesla-t4", "nvidia-tesla-a100", "nvidia-h100-80gb",
        "nvidia-h100-mega-80gb", "nvidia-tesla-v100"}},
      {"europe-west4-c", {"nvidia-l4", "nvidia-tesla-t4", "nvidia-h100-80gb", "nvidia-tesla-v100"}},
      {"asia-southeast1-a", {"nvidia-l4", "nvidia-tesla-t4"}},
      {"asia-southeast1-b", {"nvidia-l4", "nvidia-tesla-t4", "nvidia-h100-80gb"}},
      {"asia-southeast1-c", {"nvidia-l4", "nvidia-tesla-t4", "nvidia-tesla-a100"}},
  };
  return zones;
}

const ZoneDef* FindZone(const std::string& name) {
  for (const auto& z : Zones()) {
    if (name == z.name) return &z;
  }
  return nullptr;
}

std::string RegionOfZone(const std::string& zone) { return zone.substr(0, zone.rfind('-')); }

std::vector<std::string> RegionNames() {
  std::vector<std::string> out;
  for (const auto& z : Zones()) {
    std::string r = RegionOfZone(z.name);
    if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  }
  return out;
}

struct AcceleratorDef {
  const char* name;
  const char* description;
  int max_cards;
  const char* testvm_gpu;  // the test VM's GPU file type
  const char* quota_metric;
};

const std::vector<AcceleratorDef>& Accelerators() {
  static const std::vector<AcceleratorDef> a = {
      {"nvidia-l4", "NVIDIA L4", 8, "L4", "NVIDIA_L4_GPUS"},
      {"nvidia-tesla-t4", "NVIDIA T4", 4, "T4", "NVIDIA_T4_GPUS"},
      {"nvidia-tesla-v100", "NVIDIA V100", 8, "V100", "NVIDIA_V100_GPUS"},
      {"nvidia-tesla-a100", "NVIDIA A100 40GB", 16, "A100-40GB", "NVIDIA_A100_GPUS"},
      {"nvidia-a100-80gb", "NVIDIA A100 80GB", 8, "A100-80GB", "NVIDIA_A100_80GB_GPUS"},
      {"nvidia-h100-80gb", "NVIDIA H100 80GB", 8, "H100-80GB", "NVIDIA_H100_GPUS"},
      {"nvidia-h100-mega-80gb", "NVIDIA H100 Mega 80GB", 8, "H100-80GB", "NVIDIA_H100_MEGA_GPUS"},
      {"nvidia-h200-141gb", "NVIDIA H200 141GB", 8, "H200", "NVIDIA_H200_GPUS"},
      {"nvidia-b200", "NVIDIA B200", 8, "B200", "NVIDIA_B200_GPUS"},
  };
  return a;
}

const AcceleratorDef* FindAccelerator(const std::string& name) {
  for (const auto& a : Accelerators()) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

struct MachineTypeDef {
  std::string name;
  int cpus;
  int memory_mb;
  std::string accelerator;  // attached GPUs (accelerator-optimised families); "" otherwise
  int gpu_count;
};

const std::vector<MachineTypeDef>& MachineTypes() {
  static const std::vector<MachineTypeDef> types = [] {
    std::vector<MachineTypeDef> t;
    for (int n : {2, 4, 8, 16})
      t.push_back({"e2-standard-" + std::to_string(n), n, n * 4096, "", 0});
    for (int n : {1, 2, 4, 8, 16, 32, 64, 96}) {
      t.push_back({"n1-standard-" + std::to_string(n), n, n * 3840, "", 0});
    }
    const std::vector<std::pair<int, int>> g2 = {{4, 1},  {8, 1},  {12, 1}, {16, 1},
                                                 {24, 2}, {32, 1}, {48, 4}, {96, 8}};
    for (auto [cpus, gpus] : g2) {
      t.push_back({"g2-standard-" + std::to_string(cpus), cpus, cpus * 4096, "nvidia-l4", gpus});
    }
    for (int g : {1, 2, 4, 8}) {
      t.push_back(
          {"a2-highgpu-" + std::to_string(g) + "g", 12 * g, 87040 * g, "nvidia-tesla-a100", g});
      t.push_back(
          {"a2-ultragpu-" + std::to_string(g) + "g", 12 * g, 174080 * g, "nvidia-a100-80gb", g});
      t.push_back(
          {"a3-highgpu-" + std::to_string(g) + "g", 26 * g, 239616 * g, "nvidia-h100-80gb", g});
    }
    t.push_back({"a2-megagpu-16g", 96, 1392640, "nvidia-tesla-a100", 16});
    t.push_back({"a3-megagpu-8g", 208, 1916928, "nvidia-h100-mega-80gb", 8});
    t.push_back({"a3-ultragpu-8g", 224, 3022848, "nvidia-h200-141gb", 8});
    t.push_back({"a4-highgpu-8g", 224, 4063232, "nvidia-b200", 8});
    return t;
  }();
  return types;
}

bool ZoneHas(const ZoneDef& z, const std::string& accelerator) {
  return std::find(z.accelerators.begin(), z.accelerators.end(), accelerator) !=
         z.accelerators.end();
}

const MachineTypeDef* FindMachineType(const std::string& zone, const std::string& name) {
  const ZoneDef* z = FindZone(zone);
  if (!z) return nullptr;
  for (const auto& m : MachineTypes()) {
    if (m.name == name && (m.accelerator.empty() || ZoneHas(*z, m.accelerator))) return &m;
  }
  return nullptr;
}

struct ImageDef {
  const char* project;
  const char* name;
  const char* family;
  const char* description;
  int64_t id;
};

const std::vector<ImageDef>& Images() {
  static const std::vector<ImageDef> images = {
      {"deeplearning-platform-release", "common-cu128-ubuntu-2204-nvidia-570-v20250305",
       "common-cu128-ubuntu-2204-nvidia-570",
       "Google, Deep Learning VM with CUDA 12.8, M129, Ubuntu 22.04, NVIDIA driver 570",
       4711000000000000001},
      {"deeplearning-platform-release", "common-cu124-ubuntu-2204-v20241224",
       "common-cu124-ubuntu-2204", "Google, Deep Learning VM with CUDA 12.4, Ubuntu 22.04",
       4711000000000000002},
      {"deeplearning-platform-release", "common-cu124-debian-11-v20241224",
       "common-cu124-debian-11", "Google, Deep Learning VM with CUDA 12.4, Debian 11",
       4711000000000000003},
      {"ubuntu-os-cloud", "ubuntu-2204-jammy-v20250228", "ubuntu-2204-lts",
       "Canonical, Ubuntu, 22.04 LTS, amd64 jammy image built on 2025-02-28", 4711000000000000004},
      {"ubuntu-os-cloud", "ubuntu-2404-noble-amd64-v20250228", "ubuntu-2404-lts-amd64",
       "Canonical, Ubuntu, 24.04 LTS, amd64 noble image built on 2025-02-28", 4711000000000000005},
      {"debian-cloud", "debian-12-bookworm-v20250212", "debian-12",
       "Debian, Debian GNU/Linux, 12 (bookworm), amd64 built on 20250212", 4711000000000000006},
  };
  return images;
}

// "projects/P/global/images/family/F", "projects/P/global/images/N", "global/images/N"
// (in `project`) or a full URL -> the image, or nullptr.
const ImageDef* ResolveImage(const std::string& ref_in, const std::string& project) {
  std::string ref = ref_in;
  size_t p = ref.find("projects/");
  if (ref.rfind("global/", 0) == 0)
    ref = "projects/" + project + "/" + ref;
  else if (p != std::string::npos)
    ref = ref.substr(p);
  std::vector<std::string> seg = Split(ref, '/');
  if (seg.size() < 5 || seg[0] != "projects" || seg[2] != "global" || seg[3] != "images") {
    return nullptr;
  }
  for (const auto& i : Images()) {
    if (seg[1] != i.project) continue;
    if (seg.size() == 6 && seg[4] == "family" && seg[5] == i.family) return &i;
    if (seg.size() == 5 && seg[4] == i.name) return &i;
  }
  return nullptr;
}

// --- small helpers --------------------------------------------------------------

const std::regex& NameRe() {
  static const std::regex re("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$");
  return re;
}

std::string LastSegment(const std::string& s) {
  size_t slash = s.rfind('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

std::string UrlDecode(const std::string& s) {
  std::string plus = s;
  std::replace(plus.begin(), plus.end(), '+', ' ');
  std::string out;
  try {
    Poco::URI::decode(plus, out);
  } catch (const Poco::Exception&) {
    return plus;
  }
  return out;
}

std::map<std::string, std::string> ParseForm(const std::string& body) {
  std::map<std::string, std::string> out;
  for (const auto& pair : Split(body, '&')) {
    size_t eq = pair.find('=');
    if (eq == std::string::npos) continue;
    out[UrlDecode(pair.substr(0, eq))] = UrlDecode(pair.substr(eq + 1));
  }
  return out;
}

std::optional<std::string> Base64UrlDecode(std::string text) {
  while (!text.empty() && text.back() == '=') text.pop_back();
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '-')
      v = 62;
    else if (c == '_')
      v = 63;
    else
      return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(SysClock::now().time_since_epoch())
      .count();
}

std::string Fingerprint() { return RandomHex(8); }

JsonArray Strings(const std::vector<std::string>& v) {
  JsonArray a = NewArray();
  for (const auto& s : v) a->add(s);
  return a;
}

// One filter term: field op value (plugins/gcp/REFERENCE.md §3.3: "name=x", "labels.k=v", "name eq
// x").
struct FilterTerm {
  std::string field;
  bool negate = false;
  bool regex = false;
  std::string value;
};

// Parses "a = b", "a=b", "a = \"b\"", "a eq b", "a != b", joined by AND or in (...) groups.
std::optional<std::vector<FilterTerm>> ParseFilter(const std::string& text) {
  std::vector<FilterTerm> terms;
  std::string s = text;
  static const std::regex and_re("\\)\\s*(AND\\s*)?\\(|\\s+AND\\s+");
  s = std::regex_replace(s, and_re, "\x1f");
  for (std::string part : Split(s, '\x1f')) {
    while (!part.empty() && (part.front() == '(' || part.front() == ' ')) part.erase(0, 1);
    while (!part.empty() && (part.back() == ')' || part.back() == ' ')) part.pop_back();
    if (part.empty()) continue;
    static const std::regex term_re(
        "^([A-Za-z0-9_.\\-]+)\\s*(!=|=|\\s+eq\\s+|\\s+ne\\s+)\\s*(\"[^\"]*\"|'[^']*'|\\S+)$");
    std::smatch m;
    if (!std::regex_match(part, m, term_re)) return std::nullopt;
    FilterTerm t;
    t.field = m[1];
    std::string op = m[2];
    op.erase(std::remove(op.begin(), op.end(), ' '), op.end());
    t.negate = op == "!=" || op == "ne";
    t.regex = op == "eq" || op == "ne";
    t.value = m[3];
    if (t.value.size() >= 2 && (t.value.front() == '"' || t.value.front() == '\'')) {
      t.value = t.value.substr(1, t.value.size() - 2);
    }
    terms.push_back(t);
  }
  return terms;
}

std::string FieldOf(const JsonObject& o, const std::string& path) {
  JsonObject cur = o;
  std::vector<std::string> parts = Split(path, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!cur || !cur->has(parts[i])) return "";
    if (i + 1 == parts.size()) {
      Poco::Dynamic::Var v = cur->get(parts[i]);
      return v.isEmpty() ? "" : v.convert<std::string>();
    }
    cur = GetObject(cur, parts[i]);
  }
  return "";
}

bool Matches(const JsonObject& o, const std::vector<FilterTerm>& terms) {
  for (const auto& t : terms) {
    std::string v = FieldOf(o, t.field);
    // A URL field compares by its last segment too (zone=us-central1-a).
    std::string last = LastSegment(v);
    bool hit;
    if (t.regex) {
      try {
        std::regex re(t.value);
        hit = std::regex_match(v, re) || std::regex_match(last, re);
      } catch (const std::regex_error&) {
        hit = false;
      }
    } else if (t.value.find('*') != std::string::npos) {
      // '*' is a wildcard in "=" comparisons; everything else is literal.
      std::string pattern;
      for (char c : t.value) {
        if (c == '*') {
          pattern += ".*";
        } else {
          if (std::string(".^$|()[]{}+?\\").find(c) != std::string::npos) pattern += '\\';
          pattern += c;
        }
      }
      hit = std::regex_match(v, std::regex(pattern));
    } else {
      hit = v == t.value || last == t.value;
    }
    if (hit == t.negate) return false;
  }
  return true;
}

}  // namespace

// --- the compute v1 discovery document ----------------------------------------------
// Transcribed (names and types only, in our own tables) from the Compute Engine API
// discovery document, compute v1: googleapis/google-api-python-client
// googleapiclient/discovery_cache/documents/compute.v1.json at 02d69f6fb528, the document the
// npm client googleapis@178.0.0 (build/src/apis/compute/v1.{js,d.ts}) is generated from.
// tests/emulators/README.md, "Sources each emulator follows".

// The methods the emulator serves: discovery `id`, `httpMethod` and `flatPath` (under
// /compute/v1/). A request no row describes is answered 404 whatever the emulator could
// do with it.
const std::vector<GceDiscoveryMethod>& DiscoveryMethods() {
  static const std::vector<GceDiscoveryMethod> m = {
      {"compute.projects.get", "GET", "projects/{project}"},
      {"compute.zones.list", "GET", "projects/{project}/zones"},
      {"compute.zones.get", "GET", "projects/{project}/zones/{zone}"},
      {"compute.regions.list", "GET", "projects/{project}/regions"},
      {"compute.regions.get", "GET", "projects/{project}/regions/{region}"},
      {"compute.instances.aggregatedList", "GET", "projects/{project}/aggregated/instances"},
      {"compute.instances.list", "GET", "projects/{project}/zones/{zone}/instances"},
      {"compute.instances.insert", "POST", "projects/{project}/zones/{zone}/instances"},
      {"compute.instances.get", "GET", "projects/{project}/zones/{zone}/instances/{instance}"},
      {"compute.instances.delete", "DELETE",
       "projects/{project}/zones/{zone}/instances/{instance}"},
      {"compute.instances.stop", "POST", "projects/{project}/zones/{zone}/instances/{instance}/stop"},
      {"compute.instances.start", "POST",
       "projects/{project}/zones/{zone}/instances/{instance}/start"},
      {"compute.zoneOperations.list", "GET", "projects/{project}/zones/{zone}/operations"},
      {"compute.zoneOperations.get", "GET",
       "projects/{project}/zones/{zone}/operations/{operation}"},
      {"compute.zoneOperations.wait", "POST",
       "projects/{project}/zones/{zone}/operations/{operation}/wait"},
      {"compute.globalOperations.get", "GET", "projects/{project}/global/operations/{operation}"},
      {"compute.globalOperations.wait", "POST",
       "projects/{project}/global/operations/{operation}/wait"},
      {"compute.firewalls.list", "GET", "projects/{project}/global/firewalls"},
      {"compute.firewalls.insert", "POST", "projects/{project}/global/firewalls"},
      {"compute.firewalls.get", "GET", "projects/{project}/global/firewalls/{firewall}"},
      {"compute.firewalls.patch", "PATCH", "projects/{project}/global/firewalls/{firewall}"},
      {"compute.firewalls.update", "PUT", "projects/{project}/global/firewalls/{firewall}"},
      {"compute.firewalls.delete", "DELETE", "projects/{project}/global/firewalls/{firewall}"},
      {"compute.machineTypes.aggregatedList", "GET", "projects/{project}/aggregated/machineTypes"},
      {"compute.machineTypes.list", "GET", "projects/{project}/zones/{zone}/machineTypes"},
      {"compute.machineTypes.get", "GET",
       "projects/{project}/zones/{zone}/machineTypes/{machineType}"},
      {"compute.acceleratorTypes.aggregatedList", "GET",
       "projects/{project}/aggregated/acceleratorTypes"},
      {"compute.acceleratorTypes.list", "GET", "projects/{project}/zones/{zone}/acceleratorTypes"},
      {"compute.acceleratorTypes.get", "GET",
       "projects/{project}/zones/{zone}/acceleratorTypes/{acceleratorType}"},
      {"compute.diskTypes.list", "GET", "projects/{project}/zones/{zone}/diskTypes"},
      {"compute.diskTypes.get", "GET", "projects/{project}/zones/{zone}/diskTypes/{diskType}"},
      {"compute.disks.aggregatedList", "GET", "projects/{project}/aggregated/disks"},
      {"compute.disks.list", "GET", "projects/{project}/zones/{zone}/disks"},
      {"compute.disks.get", "GET", "projects/{project}/zones/{zone}/disks/{disk}"},
      {"compute.networks.list", "GET", "projects/{project}/global/networks"},
      {"compute.networks.get", "GET", "projects/{project}/global/networks/{network}"},
      {"compute.images.list", "GET", "projects/{project}/global/images"},
      {"compute.images.get", "GET", "projects/{project}/global/images/{image}"},
      {"compute.images.getFromFamily", "GET", "projects/{project}/global/images/family/{family}"},
  };
  return m;
}

namespace {

// A field's type in the discovery document: string (also int64/uint64, which JSON carries
// as strings; a number is accepted for them as Google's JSON parser does), boolean,
// integer (int32/uint32), an object of a transcribed schema, an array of one of those, a
// map of strings (additionalProperties string), or an object not transcribed here.
enum class Kind { kString, kInt64, kBool, kInt32, kObject, kStringMap, kUnchecked };
struct Field {
  const char* name;
  Kind kind;
  bool array = false;
  const char* schema = nullptr;  // for kObject
};
using Schema = std::vector<Field>;

const std::map<std::string, Schema>& Schemas() {
  using K = Kind;
  static const std::map<std::string, Schema> schemas = {
      {"Instance",
       {{"advancedMachineFeatures", K::kUnchecked}, {"canIpForward", K::kBool},
        {"confidentialInstanceConfig", K::kUnchecked}, {"cpuPlatform", K::kString},
        {"creationTimestamp", K::kString}, {"deletionProtection", K::kBool},
        {"description", K::kString}, {"disks", K::kObject, true, "AttachedDisk"},
        {"displayDevice", K::kUnchecked}, {"fingerprint", K::kString},
        {"guestAccelerators", K::kObject, true, "AcceleratorConfig"}, {"hostname", K::kString},
        {"id", K::kInt64}, {"instanceEncryptionKey", K::kUnchecked},
        {"keyRevocationActionType", K::kString}, {"kind", K::kString},
        {"labelFingerprint", K::kString}, {"labels", K::kStringMap},
        {"lastStartTimestamp", K::kString}, {"lastStopTimestamp", K::kString},
        {"lastSuspendedTimestamp", K::kString}, {"localSsdEncryptionMode", K::kString},
        {"machineType", K::kString}, {"metadata", K::kObject, false, "Metadata"},
        {"minCpuPlatform", K::kString}, {"name", K::kString},
        {"networkInterfaces", K::kObject, true, "NetworkInterface"},
        {"networkPerformanceConfig", K::kUnchecked}, {"params", K::kUnchecked},
        {"privateIpv6GoogleAccess", K::kString}, {"reservationAffinity", K::kUnchecked},
        {"resourcePolicies", K::kString, true}, {"resourceStatus", K::kUnchecked},
        {"satisfiesPzi", K::kBool}, {"satisfiesPzs", K::kBool},
        {"scheduling", K::kObject, false, "Scheduling"}, {"selfLink", K::kString},
        {"serviceAccounts", K::kObject, true, "ServiceAccount"},
        {"shieldedInstanceConfig", K::kUnchecked},
        {"shieldedInstanceIntegrityPolicy", K::kUnchecked}, {"sourceMachineImage", K::kString},
        {"sourceMachineImageEncryptionKey", K::kUnchecked}, {"startRestricted", K::kBool},
        {"status", K::kString}, {"statusMessage", K::kString},
        {"tags", K::kObject, false, "Tags"}, {"workloadIdentityConfig", K::kUnchecked},
        {"zone", K::kString}}},
      {"AttachedDisk",
       {{"architecture", K::kString}, {"autoDelete", K::kBool}, {"boot", K::kBool},
        {"deviceName", K::kString}, {"diskEncryptionKey", K::kUnchecked},
        {"diskSizeGb", K::kInt64}, {"forceAttach", K::kBool},
        {"guestOsFeatures", K::kUnchecked, true}, {"index", K::kInt32},
        {"initializeParams", K::kObject, false, "AttachedDiskInitializeParams"},
        {"interface", K::kString}, {"kind", K::kString}, {"licenses", K::kString, true},
        {"mode", K::kString}, {"savedState", K::kString},
        {"shieldedInstanceInitialState", K::kUnchecked}, {"source", K::kString},
        {"type", K::kString}}},
      {"AttachedDiskInitializeParams",
       {{"architecture", K::kString}, {"description", K::kString}, {"diskName", K::kString},
        {"diskSizeGb", K::kInt64}, {"diskType", K::kString},
        {"enableConfidentialCompute", K::kBool}, {"labels", K::kStringMap},
        {"licenses", K::kString, true}, {"onUpdateAction", K::kString},
        {"provisionedIops", K::kInt64}, {"provisionedThroughput", K::kInt64},
        {"replicaZones", K::kString, true}, {"resourceManagerTags", K::kStringMap},
        {"resourcePolicies", K::kString, true}, {"sourceImage", K::kString},
        {"sourceImageEncryptionKey", K::kUnchecked}, {"sourceSnapshot", K::kString},
        {"sourceSnapshotEncryptionKey", K::kUnchecked}, {"storagePool", K::kString}}},
      {"AcceleratorConfig", {{"acceleratorCount", K::kInt32}, {"acceleratorType", K::kString}}},
      {"NetworkInterface",
       {{"accessConfigs", K::kObject, true, "AccessConfig"},
        {"aliasIpRanges", K::kUnchecked, true}, {"aliasIpv6Ranges", K::kUnchecked, true},
        {"enableVpcScopedDns", K::kBool}, {"fingerprint", K::kString},
        {"igmpQuery", K::kString}, {"internalIpv6PrefixLength", K::kInt32},
        {"ipv6AccessConfigs", K::kObject, true, "AccessConfig"},
        {"ipv6AccessType", K::kString}, {"ipv6Address", K::kString}, {"kind", K::kString},
        {"name", K::kString}, {"network", K::kString}, {"networkAttachment", K::kString},
        {"networkIP", K::kString}, {"nicType", K::kString}, {"parentNicName", K::kString},
        {"queueCount", K::kInt32}, {"serviceClassId", K::kString}, {"stackType", K::kString},
        {"subnetwork", K::kString}, {"vlan", K::kInt32}}},
      {"AccessConfig",
       {{"externalIpv6", K::kString}, {"externalIpv6PrefixLength", K::kInt32},
        {"kind", K::kString}, {"name", K::kString}, {"natIP", K::kString},
        {"networkTier", K::kString}, {"publicPtrDomainName", K::kString},
        {"securityPolicy", K::kString}, {"setPublicPtr", K::kBool}, {"type", K::kString}}},
      {"Metadata",
       {{"fingerprint", K::kString}, {"items", K::kObject, true, "Metadata.items"},
        {"kind", K::kString}}},
      {"Metadata.items", {{"key", K::kString}, {"value", K::kString}}},
      {"Tags", {{"fingerprint", K::kString}, {"items", K::kString, true}}},
      {"Scheduling",
       {{"automaticRestart", K::kBool}, {"availabilityDomain", K::kInt32},
        {"gracefulShutdown", K::kUnchecked}, {"hostErrorTimeoutSeconds", K::kInt32},
        {"instanceTerminationAction", K::kString}, {"localSsdRecoveryTimeout", K::kUnchecked},
        {"locationHint", K::kString}, {"maxRunDuration", K::kUnchecked},
        {"minNodeCpus", K::kInt32}, {"nodeAffinities", K::kUnchecked, true},
        {"onHostMaintenance", K::kString}, {"onInstanceStopAction", K::kUnchecked},
        {"preemptible", K::kBool}, {"preemptionNoticeDuration", K::kUnchecked},
        {"provisioningModel", K::kString}, {"skipGuestOsShutdown", K::kBool},
        {"terminationTime", K::kString}}},
      {"ServiceAccount", {{"email", K::kString}, {"scopes", K::kString, true}}},
      {"Firewall",
       {{"allowed", K::kObject, true, "Firewall.allowed"}, {"creationTimestamp", K::kString},
        {"denied", K::kObject, true, "Firewall.allowed"}, {"description", K::kString},
        {"destinationRanges", K::kString, true}, {"direction", K::kString},
        {"disabled", K::kBool}, {"id", K::kInt64}, {"kind", K::kString},
        {"logConfig", K::kObject, false, "FirewallLogConfig"}, {"name", K::kString},
        {"network", K::kString}, {"params", K::kUnchecked}, {"priority", K::kInt32},
        {"selfLink", K::kString}, {"sourceRanges", K::kString, true},
        {"sourceServiceAccounts", K::kString, true}, {"sourceTags", K::kString, true},
        {"targetServiceAccounts", K::kString, true}, {"targetTags", K::kString, true}}},
      {"Firewall.allowed", {{"IPProtocol", K::kString}, {"ports", K::kString, true}}},
      {"FirewallLogConfig", {{"enable", K::kBool}, {"metadata", K::kString}}},
  };
  return schemas;
}

// "instance_resource.disks[0].initialize_params": Google's JSON parser names fields by
// their proto (snake_case) names in its errors.
std::string SnakeCase(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (std::isupper(static_cast<unsigned char>(c))) {
      if (!out.empty()) out += '_';
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out;
}

const char* TypeName(Kind k) {
  switch (k) {
    case Kind::kBool:
      return "TYPE_BOOL";
    case Kind::kInt32:
      return "TYPE_INT32";
    case Kind::kInt64:
      return "TYPE_INT64";
    default:
      return "TYPE_STRING";
  }
}

// One value against its field's kind; "" or the message of Google's JSON parser.
std::string CheckValue(const Poco::Dynamic::Var& v, const Field& f, const std::string& at);

std::string CheckObject(const JsonObject& o, const std::string& schema, const std::string& at) {
  const Schema& fields = Schemas().at(schema);
  for (const auto& [name, value] : *o) {
    const std::string& key = name;  // clang 14 lambdas cannot capture structured bindings
    auto it = std::find_if(fields.begin(), fields.end(),
                           [&](const Field& f) { return key == f.name; });
    if (it == fields.end()) {
      return "Invalid JSON payload received. Unknown name \"" + name + "\" at '" + at +
             "': Cannot find field.";
    }
    if (value.isEmpty()) continue;  // null: the field is not set
    const std::string field_at = at + "." + SnakeCase(name);
    if (it->array) {
      if (value.type() != typeid(JsonArray)) {
        return "Invalid value at '" + field_at + "' (" + TypeName(it->kind) + "), " +
               value.toString();
      }
      JsonArray a = value.extract<JsonArray>();
      for (size_t i = 0; i < a->size(); ++i) {
        const std::string e =
            CheckValue(a->get(static_cast<unsigned>(i)), *it, field_at + "[" + std::to_string(i) + "]");
        if (!e.empty()) return e;
      }
      continue;
    }
    const std::string e = CheckValue(value, *it, field_at);
    if (!e.empty()) return e;
  }
  return "";
}

std::string CheckValue(const Poco::Dynamic::Var& v, const Field& f, const std::string& at) {
  const auto bad = [&] {
    return "Invalid value at '" + at + "' (" + TypeName(f.kind) + "), " +
           (v.isString() ? "\"" + v.toString() + "\"" : v.toString());
  };
  switch (f.kind) {
    case Kind::kUnchecked:
      return "";
    case Kind::kString:
      return v.isString() ? "" : bad();
    case Kind::kInt64:
      if (v.isInteger()) return "";
      if (v.isString()) {
        const std::string t = v.toString();
        if (!t.empty() && t.find_first_not_of("-0123456789") == std::string::npos) return "";
      }
      return bad();
    case Kind::kInt32:
      return v.isInteger() ? "" : bad();
    case Kind::kBool:
      return v.isBoolean() ? "" : bad();
    case Kind::kStringMap: {
      if (v.type() != typeid(JsonObject)) return bad();
      for (const auto& [k, value] : *v.extract<JsonObject>()) {
        if (!value.isString()) {
          return "Invalid value at '" + at + "[" + k + "]' (TYPE_STRING), " + value.toString();
        }
      }
      return "";
    }
    case Kind::kObject:
      if (v.type() != typeid(JsonObject)) {
        return "Invalid value at '" + at + "' (type." + std::string(f.schema) + "), " +
               v.toString();
      }
      return CheckObject(v.extract<JsonObject>(), f.schema, at);
  }
  return "";
}

}  // namespace

std::string GceDiscoveryMethodId(const std::string& http_method, const std::string& path) {
  const std::string prefix = "/compute/v1/";
  if (path.rfind(prefix, 0) != 0) return "";
  const std::vector<std::string> seg = Split(path.substr(prefix.size()), '/');
  for (const auto& m : DiscoveryMethods()) {
    if (http_method != m.http_method) continue;
    const std::vector<std::string> tpl = Split(m.flat_path, '/');
    if (tpl.size() != seg.size()) continue;
    bool same = true;
    for (size_t i = 0; same && i < tpl.size(); ++i) {
      same = (tpl[i].size() > 2 && tpl[i].front() == '{') ? !seg[i].empty() : tpl[i] == seg[i];
    }
    if (same) return m.id;
  }
  return "";
}

std::string GceCheckResource(const std::string& schema, const JsonObject& resource) {
  if (Schemas().count(schema) == 0) return "no schema " + schema + " is transcribed";
  return CheckObject(resource, schema, SnakeCase(schema));
}

std::string GceCheckRequestBody(const std::string& method_id, const JsonObject& body) {
  // The request body of each method that takes one: its `request.$ref` and the name Google's
  // JSON parser gives it (the proto field of the request message).
  if (method_id == "compute.instances.insert") {
    return CheckObject(body, "Instance", "instance_resource");
  }
  if (method_id == "compute.firewalls.insert" || method_id == "compute.firewalls.patch" ||
      method_id == "compute.firewalls.update") {
    return CheckObject(body, "Firewall", "firewall_resource");
  }
  return "";
}

namespace {

// --- the API ------------------------------------------------------------------------

class GceApi : public CloudApi {
 public:
  GceApi(InstanceBackend* backend, CloudOptions options, const std::string& default_token)
      : CloudApi("gcp", backend, std::move(options)) {
    const std::string cred = options_.tokens.empty() ? default_token : options_.tokens.front();
    // A new key is made on first use (RSA key generation takes a while).
    if (cred == default_token) {
      static_token_ = default_token;
    } else if (Poco::File(cred).exists()) {
      LoadKey(cred);
    } else {
      write_key_to_ = cred;
    }
  }

  std::string BasePath() const override { return ""; }

  // Writes the key file once the URL is known (GceListening).
  void Listening(const std::string& base_url) {
    std::lock_guard<std::mutex> lock(mu_);
    token_uri_ = base_url + "/token";
    if (write_key_to_.empty()) return;
    EnsureKey();
    JsonObject k = NewObject();
    k->set("type", std::string("service_account"));
    k->set("project_id", project_);
    k->set("private_key_id", key_id_);
    k->set("private_key", key_pem_);
    k->set("client_email", client_email_);
    k->set("client_id", std::string("104711000000000000001"));
    k->set("auth_uri", std::string("https://accounts.google.com/o/oauth2/auth"));
    k->set("token_uri", token_uri_);
    k->set("auth_provider_x509_cert_url",
           std::string("https://www.googleapis.com/oauth2/v1/certs"));
    k->set("universe_domain", std::string("googleapis.com"));
    const std::string tmp = write_key_to_ + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      if (!out) throw std::runtime_error("gcp: cannot write the service-account key to " + tmp);
      chmod(tmp.c_str(), 0600);
      out << ToJson(k) << "\n";
      if (!out) throw std::runtime_error("gcp: cannot write the service-account key to " + tmp);
    }
    if (std::rename(tmp.c_str(), write_key_to_.c_str()) != 0) {
      throw std::runtime_error("gcp: cannot write the service-account key to " + write_key_to_);
    }
  }

  JsonObject Counts() override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    JsonObject o = NewObject();
    o->set("instances", instances_.size());
    o->set("firewalls", firewalls_.size());
    o->set("ssh_keys", 0);
    o->set("backend_instances", backend_->LiveCount(name_));
    return o;
  }

  JsonArray Instances() override {
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    JsonArray a = NewArray();
    for (const auto& [key, inst] : instances_) {
      if (!inst.backend_id.empty()) {
        a->add(InstanceRow(std::to_string(inst.id), inst.name, inst.backend_id));
      } else {
        JsonObject row = NewObject();
        row->set("id", std::to_string(inst.id));
        row->set("name", inst.name);
        row->set("backend_id", std::string());
        row->set("state", std::string("provisioning"));
        row->set("message", std::string("no machine: this insert fails for lack of capacity"));
        a->add(row);
      }
    }
    return a;
  }

  void Reset() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, inst] : instances_) {
      if (!inst.backend_id.empty()) backend_->Delete(inst.backend_id);
    }
    instances_.clear();
    operations_.clear();
    request_ids_.clear();
    firewalls_.clear();
    told_ingress_.clear();
    faults_.Clear();
    os_login_policy_.clear();
  }

  // POST /settings: {"expire_tokens": true} makes every issued access token invalid (the
  // next call gets 401, as after expiry); {"token_lifetime_seconds": N} sets expires_in.
  std::string Configure(const JsonObject& settings) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto e = GetBool(settings, "expire_tokens"); e && *e) tokens_.clear();
    if (auto n = GetInt(settings, "token_lifetime_seconds")) {
      if (*n < 1 || *n > 3600) return "token_lifetime_seconds must be 1..3600";
      token_lifetime_ = static_cast<int>(*n);
    }
    if (auto v = GetBool(settings, "metadata_service_account")) metadata_service_account_ = *v;
    if (auto v = GetString(settings, "os_login_policy")) {
      if (*v != "" && *v != "override" && *v != "refuse") {
        return "os_login_policy must be \"\", \"override\" or \"refuse\"";
      }
      os_login_policy_ = *v;
    }
    return CloudApi::Configure(settings);
  }

 protected:
  struct Instance {
    uint64_t id = 0;
    std::string name;
    std::string zone;
    std::string machine_type;
    JsonArray guest_accelerators;
    JsonObject labels;
    std::vector<std::string> tags;
    JsonArray metadata_items;
    JsonObject scheduling;
    std::string source_image;  // the image's selfLink
    int64_t disk_gb = 10;
    std::string disk_type = "pd-standard";
    bool os_login = false;  // OS Login in effect (the effective enable-oslogin)
    std::string network;
    std::string backend_id;  // "" while a capacity failure is pending
    SysClock::time_point created;
    Clock::time_point created_steady;
    std::string insert_op;
    std::optional<Clock::time_point> capacity_fail_at;
    std::string capacity_code;  // the failed insert's error code ("" = ..._WITH_DETAILS)
    std::optional<Clock::time_point> deleting_since;
    std::string delete_op;
    std::string fingerprint = Fingerprint();
    std::string tags_fingerprint = Fingerprint();
    bool preempted = false;  // POST /preempt took it back; its operation is recorded
  };
  struct Operation {
    uint64_t id = 0;
    std::string name;
    std::string zone;  // "" = global
    std::string type;  // insert, delete, patch, update
    std::string target_link;
    uint64_t target_id = 0;
    std::string status = "RUNNING";
    SysClock::time_point insert_time;
    std::optional<SysClock::time_point> end_time;
    std::optional<Clock::time_point> done_at;  // global ops: DONE from then on
    JsonArray errors;                          // set when it failed
    int http_error_status = 0;
    std::string http_error_message;
    std::string status_message;  // "" = not written
  };
  struct Firewall {
    JsonObject resource;
  };

  // --- error shapes (plugins/gcp/REFERENCE.md §8) ---
  static HttpResponse Error(int status, const std::string& reason, const std::string& message,
                            const std::string& domain = "global",
                            const std::string& rpc_status = "") {
    JsonObject e = NewObject();
    e->set("message", message);
    e->set("domain", domain);
    e->set("reason", reason);
    JsonArray errors = NewArray();
    errors->add(e);
    JsonObject err = NewObject();
    err->set("code", status);
    err->set("message", message);
    err->set("errors", errors);
    if (!rpc_status.empty()) err->set("status", rpc_status);
    JsonObject o = NewObject();
    o->set("error", err);
    return JsonResponse(status, o);
  }
  // A request body with a field its discovery schema does not have, or of another type:
  // 400 INVALID_ARGUMENT with a google.rpc.BadRequest field violation, the shape of Google's
  // API errors (google.rpc.Status, AIP-193) as its JSON parser answers them; the wording is
  // from general knowledge of Google APIs, not a published source.
  static std::optional<HttpResponse> CheckBody(const std::string& method_id,
                                               const std::string& resource,
                                               const JsonObject& body) {
    const std::string message = GceCheckRequestBody(method_id, body);
    if (message.empty()) return std::nullopt;
    JsonObject e = NewObject();
    e->set("message", message);
    e->set("reason", std::string("invalid"));
    JsonArray errors = NewArray();
    errors->add(e);
    JsonObject violation = NewObject();
    violation->set("field", resource);
    violation->set("description", message);
    JsonArray violations = NewArray();
    violations->add(violation);
    JsonObject bad_request = NewObject();
    bad_request->set("@type", std::string("type.googleapis.com/google.rpc.BadRequest"));
    bad_request->set("fieldViolations", violations);
    JsonArray details = NewArray();
    details->add(bad_request);
    JsonObject err = NewObject();
    err->set("code", 400);
    err->set("message", message);
    err->set("errors", errors);
    err->set("status", std::string("INVALID_ARGUMENT"));
    err->set("details", details);
    JsonObject o = NewObject();
    o->set("error", err);
    return JsonResponse(400, o);
  }
  static HttpResponse NotFound(const std::string& resource) {
    return Error(404, "notFound", "The resource '" + resource + "' was not found");
  }
  static HttpResponse Invalid(const std::string& message) { return Error(400, "invalid", message); }
  static HttpResponse TokenError(int status, const std::string& error,
                                 const std::string& description) {
    JsonObject o = NewObject();
    o->set("error", error);
    o->set("error_description", description);
    return JsonResponse(status, o);
  }

  static bool IsTokenPath(const std::string& path) {
    return path == "/token" || path == "/o/oauth2/token" || path == "/oauth2/v4/token" ||
           path == kStsPath;
  }
  static constexpr const char* kStsPath = "/v1/token";
  static constexpr const char* kMetadataPrefix = "/computeMetadata/v1/";
  static constexpr const char* kSubjectTokenPath = "/metadata/identity/oauth2/token";
  static bool IsIamCredentialsPath(const std::string& path) {
    return path.rfind("/v1/projects/-/serviceAccounts/", 0) == 0;
  }
  // Paths that check their own credentials (a grant, a Metadata-Flavor header, a token of
  // the caller's own) instead of the Compute API's bearer token.
  static bool IsOwnAuthPath(const std::string& path) {
    return IsTokenPath(path) || IsIamCredentialsPath(path) || path == kSubjectTokenPath ||
           path.rfind(kMetadataPrefix, 0) == 0 || path == "/computeMetadata/v1";
  }

  std::optional<HttpResponse> Authenticate(const HttpRequest& req) override {
    if (IsOwnAuthPath(req.path)) return std::nullopt;
    const std::string token = req.BearerToken();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!token.empty() && token == static_token_) return std::nullopt;
      auto it = tokens_.find(token);
      if (it != tokens_.end() && Clock::now() < it->second) return std::nullopt;
    }
    JsonObject e = NewObject();
    e->set("message", std::string("Invalid Credentials"));
    e->set("domain", std::string("global"));
    e->set("reason", std::string("authError"));
    e->set("location", std::string("Authorization"));
    e->set("locationType", std::string("header"));
    JsonArray errors = NewArray();
    errors->add(e);
    JsonObject err = NewObject();
    err->set("code", 401);
    err->set("message",
             std::string("Request had invalid authentication credentials. Expected "
                         "OAuth 2 access token, login cookie or other valid "
                         "authentication credential. See "
                         "https://developers.google.com/identity/sign-in/web/devconsole-project."));
    err->set("errors", errors);
    err->set("status", std::string("UNAUTHENTICATED"));
    JsonObject o = NewObject();
    o->set("error", err);
    HttpResponse r = JsonResponse(401, o);
    r.SetHeader("WWW-Authenticate",
                "Bearer realm=\"https://accounts.google.com/\", error=\"invalid_token\"");
    return r;
  }

  HttpResponse Throttled(const HttpRequest& req, const Fault& f) override {
    if (IsOwnAuthPath(TrimTrailingSlash(req.path))) {
      // The token endpoint is another service with OAuth-shaped errors (not from the reference).
      HttpResponse r = TokenError(429, "rate_limit_exceeded", "Rate Limit Exceeded");
      r.SetHeader("Retry-After", std::to_string(f.retry_after));
      return r;
    }
    if (f.status == 403) {
      return Error(403, "rateLimitExceeded", "Rate Limit Exceeded", "usageLimits");
    }
    HttpResponse r = Error(429, "rateLimitExceeded",
                           "Quota exceeded for quota metric 'Queries' and limit 'Queries per "
                           "minute' of service 'compute.googleapis.com' for consumer "
                           "'project_number:470000000001'.",
                           "usageLimits", "RESOURCE_EXHAUSTED");
    r.SetHeader("Retry-After", std::to_string(f.retry_after));
    return r;
  }

  HttpResponse ServerError(const HttpRequest& req, const Fault& f) override {
    if (IsOwnAuthPath(TrimTrailingSlash(req.path))) {
      return TokenError(f.status, "internal_failure", "Backend Error (not from the reference)");
    }
    return Error(f.status, "backendError",
                 "Internal error. Please try again or contact Google Support. (Code: '" +
                     RandomHex(8) + "')");
  }

  HttpResponse InternalError(const std::string& what) override {
    return Error(500, "backendError", "Internal error (emulator: " + what + ")");
  }

  // --- routing ---
  HttpResponse Route(const HttpRequest& req) override {
    const std::string path = TrimTrailingSlash(req.path);
    const std::string& m = req.method;
    if (path == kStsPath) {
      if (m != "POST") return TokenError(405, "invalid_request", "use POST");
      std::lock_guard<std::mutex> lock(mu_);
      return StsEndpoint(req);
    }
    if (IsTokenPath(path)) {
      if (m != "POST") return TokenError(405, "invalid_request", "use POST");
      std::lock_guard<std::mutex> lock(mu_);
      return TokenEndpoint(req);
    }
    if (IsIamCredentialsPath(path)) {
      std::lock_guard<std::mutex> lock(mu_);
      return GenerateAccessToken(req, path);
    }
    if (path.rfind(kMetadataPrefix, 0) == 0 || path == "/computeMetadata/v1") {
      std::lock_guard<std::mutex> lock(mu_);
      return Metadata(req, path);
    }
    if (path == kSubjectTokenPath) return SubjectToken(req);
    const std::string prefix = "/compute/v1/projects/";
    if (path.rfind(prefix, 0) != 0) return NotFound(path);
    // Only what the discovery document describes is served (DiscoveryMethods).
    if (GceDiscoveryMethodId(m, path).empty()) {
      return NotFound(path.substr(std::string("/compute/v1/").size()));
    }
    std::vector<std::string> seg = Split(path.substr(prefix.size()), '/');
    if (seg.empty()) return NotFound(path);
    // POST .../operations/{op}/wait blocks (without the lock) until DONE or 2 s.
    if (m == "POST" && seg.size() >= 4 && seg.back() == "wait" &&
        seg[seg.size() - 3] == "operations") {
      const auto until = Clock::now() + milliseconds(2000);
      for (;;) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          Reconcile();
          auto it = operations_.find(seg[seg.size() - 2]);
          if (seg[0] != project_ || it == operations_.end()) {
            return NotFound("projects/" + seg[0] + "/operations/" + seg[seg.size() - 2]);
          }
          if (it->second.status == "DONE" || Clock::now() >= until) {
            return JsonResponse(200, OperationJson(it->second));
          }
        }
        std::this_thread::sleep_for(milliseconds(100));
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    Reconcile();
    ApplyPrivateIngress();
    const std::string& project = seg[0];
    const bool image_project =
        std::find(ImageProjects().begin(), ImageProjects().end(), project) != ImageProjects().end();
    if (image_project && seg.size() >= 3 && seg[1] == "global" && seg[2] == "images" &&
        m == "GET") {
      return RouteImages(req, project, seg);
    }
    if (project != project_) {
      return Error(403, "forbidden",
                   "Required 'compute.projects.get' permission for 'projects/" + project +
                       "' (the emulator serves project " + project_ + ")");
    }
    if (seg.size() == 1 && m == "GET") return JsonResponse(200, ProjectJson());
    const std::string& kind = seg[1];
    if (kind == "zones") return RouteZones(req, seg);
    if (kind == "regions") return RouteRegions(req, seg);
    if (kind == "global") return RouteGlobal(req, seg);
    if (kind == "aggregated" && seg.size() == 3 && m == "GET") return Aggregated(req, seg[2]);
    return NotFound(path.substr(std::string("/compute/v1/").size()));
  }

  // --- OAuth2 token endpoint (plugins/gcp/REFERENCE.md §1.1) ---
  HttpResponse TokenEndpoint(const HttpRequest& req) {
    std::map<std::string, std::string> form = ParseForm(req.body);
    const std::string grant = form["grant_type"];
    if (grant == "refresh_token") return RefreshGrant(form);
    if (grant != "urn:ietf:params:oauth:grant-type:jwt-bearer") {
      return TokenError(400, "unsupported_grant_type", "Invalid grant_type: " + grant);
    }
    std::vector<std::string> parts;
    {
      std::string a = form["assertion"];
      size_t start = 0;
      for (size_t dot; (dot = a.find('.', start)) != std::string::npos; start = dot + 1) {
        parts.push_back(a.substr(start, dot - start));
      }
      parts.push_back(a.substr(start));
    }
    if (parts.size() != 3) {
      return TokenError(400, "invalid_grant",
                        "Invalid JWT: the assertion is not header.claims.signature");
    }
    std::optional<std::string> header_text = Base64UrlDecode(parts[0]);
    std::optional<std::string> claims_text = Base64UrlDecode(parts[1]);
    std::optional<std::string> signature = Base64UrlDecode(parts[2]);
    JsonObject header = header_text ? ParseObject(*header_text) : nullptr;
    JsonObject claims = claims_text ? ParseObject(*claims_text) : nullptr;
    if (!header || !claims || !signature) {
      return TokenError(400, "invalid_grant", "Invalid JWT: the parts are not base64url JSON");
    }
    if (GetString(header, "alg").value_or("") != "RS256") {
      return TokenError(400, "invalid_grant",
                        "Invalid JWT: alg must be RS256 (not from the reference)");
    }
    if (GetString(claims, "iss").value_or("") != client_email_) {
      return TokenError(400, "invalid_grant", "Invalid grant: account not found");
    }
    bool verified = false;
    EnsureKey();
    try {
      Poco::Crypto::RSADigestEngine engine(*key_, "SHA256");
      engine.update(parts[0] + "." + parts[1]);
      verified = engine.verify(Poco::DigestEngine::Digest(signature->begin(), signature->end()));
    } catch (const Poco::Exception&) {
      verified = false;
    }
    if (!verified) return TokenError(400, "invalid_grant", "Invalid JWT Signature.");
    const std::string aud = GetString(claims, "aud").value_or("");
    const std::set<std::string> audiences = {"https://oauth2.googleapis.com/token",
                                             "https://accounts.google.com/o/oauth2/token",
                                             "https://www.googleapis.com/oauth2/v4/token",
                                             token_uri_,
                                             "http://" + req.host + "/token",
                                             "http://" + req.host + "/o/oauth2/token"};
    if (audiences.count(aud) == 0) {
      return TokenError(400, "invalid_grant",
                        "Invalid JWT: Failed audience check. The right audience is " + token_uri_);
    }
    const int64_t iat = GetInt(claims, "iat").value_or(0);
    const int64_t exp = GetInt(claims, "exp").value_or(0);
    const int64_t now = UnixNow();
    if (exp <= now || exp - iat > 3600 || iat > now + 300 || exp < iat) {
      return TokenError(400, "invalid_grant",
                        "Invalid JWT: Token must be a short-lived token (60 minutes) and in a "
                        "reasonable timeframe. Check your iat and exp values in the JWT claim.");
    }
    if (GetString(claims, "scope").value_or("").empty()) {
      return TokenError(400, "invalid_scope", "Invalid OAuth scope or ID token audience provided.");
    }
    const std::string token = "ya29.emu" + RandomHex(24);
    tokens_[token] = Clock::now() + std::chrono::seconds(token_lifetime_);
    JsonObject o = NewObject();
    o->set("access_token", token);
    o->set("expires_in", token_lifetime_);
    o->set("token_type", std::string("Bearer"));
    HttpResponse r = JsonResponse(200, o);
    r.SetHeader("Cache-Control", "no-cache, no-store, max-age=0, must-revalidate");
    return r;
  }

  // An access token the Compute paths accept from now on.
  JsonObject IssueToken(const std::string& prefix) {
    const std::string token = prefix + RandomHex(24);
    tokens_[token] = Clock::now() + std::chrono::seconds(token_lifetime_);
    JsonObject o = NewObject();
    o->set("access_token", token);
    o->set("expires_in", token_lifetime_);
    o->set("token_type", std::string("Bearer"));
    return o;
  }

  // refresh_token grant of authorized_user credentials (plugins/gcp/REFERENCE.md §1.2). Google's
  // wording for an unknown client and for a bad refresh token.
  HttpResponse RefreshGrant(std::map<std::string, std::string>& form) {
    if (form["client_id"] != kUserClientId || form["client_secret"] != kUserClientSecret) {
      return TokenError(401, "invalid_client", "The OAuth client was not found.");
    }
    if (form["refresh_token"] != kUserRefreshToken) {
      return TokenError(400, "invalid_grant", "Token has been expired or revoked.");
    }
    HttpResponse r = JsonResponse(200, IssueToken("ya29.emu-user-"));
    r.SetHeader("Cache-Control", "no-cache, no-store, max-age=0, must-revalidate");
    return r;
  }

  // Security Token Service token exchange (sts.googleapis.com/v1/token, RFC 8693).
  // (Error descriptions not from the reference.)
  HttpResponse StsEndpoint(const HttpRequest& req) {
    std::map<std::string, std::string> form = ParseForm(req.body);
    if (form["grant_type"] != "urn:ietf:params:oauth:grant-type:token-exchange") {
      return TokenError(400, "unsupported_grant_type",
                        "Invalid value for \"grant_type\": " + form["grant_type"]);
    }
    if (form["requested_token_type"] != "urn:ietf:params:oauth:token-type:access_token") {
      return TokenError(400, "invalid_request", "Invalid value for \"requested_token_type\"");
    }
    static const std::set<std::string> kSubjectTypes = {
        "urn:ietf:params:oauth:token-type:jwt", "urn:ietf:params:oauth:token-type:id_token",
        "urn:ietf:params:oauth:token-type:saml2",
        "urn:ietf:params:aws:token-type:aws4_request"};
    if (kSubjectTypes.count(form["subject_token_type"]) == 0) {
      return TokenError(400, "invalid_request", "Invalid value for \"subject_token_type\"");
    }
    if (form["audience"] != kWifAudience) {
      return TokenError(400, "invalid_target",
                        "The target service indicated by the \"audience\" parameters is invalid. "
                        "This might either be because the pool or provider is disabled or "
                        "deleted or because it doesn't exist.");
    }
    if (form["scope"].empty()) {
      return TokenError(400, "invalid_scope", "Scope(s) must be provided.");
    }
    if (form["subject_token"] != kSubjectToken) {
      return TokenError(400, "invalid_grant", "The subject token is invalid or expired.");
    }
    JsonObject o = IssueToken("ya29.emu-sts-");
    o->set("issued_token_type", std::string("urn:ietf:params:oauth:token-type:access_token"));
    return JsonResponse(200, o);
  }

  static HttpResponse GoogleApiError(int status, const std::string& rpc_status,
                                     const std::string& message) {
    JsonObject err = NewObject();
    err->set("code", status);
    err->set("message", message);
    err->set("status", rpc_status);
    JsonObject o = NewObject();
    o->set("error", err);
    return JsonResponse(status, o);
  }

  // IAM Credentials generateAccessToken: the caller's token (from any path above) buys a
  // token of the emulator's service account. (Messages not from the reference.)
  HttpResponse GenerateAccessToken(const HttpRequest& req, const std::string& path) {
    const std::string prefix = "/v1/projects/-/serviceAccounts/";
    const std::string suffix = ":generateAccessToken";
    if (req.method != "POST" || path.size() <= prefix.size() + suffix.size() ||
        path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) {
      return GoogleApiError(404, "NOT_FOUND", "Method not found.");
    }
    auto it = tokens_.find(req.BearerToken());
    if (it == tokens_.end() || Clock::now() >= it->second) {
      return GoogleApiError(401, "UNAUTHENTICATED",
                            "Request had invalid authentication credentials. Expected OAuth 2 "
                            "access token, login cookie or other valid authentication "
                            "credential.");
    }
    const std::string email =
        path.substr(prefix.size(), path.size() - prefix.size() - suffix.size());
    if (email != client_email_) {
      return GoogleApiError(404, "NOT_FOUND", "Not found; Gaia id not found for email " + email);
    }
    JsonObject body = ParseObject(req.body);
    JsonArray scope = body ? GetArray(body, "scope") : nullptr;
    if (!scope || scope->size() == 0) {
      return GoogleApiError(400, "INVALID_ARGUMENT", "Scope required.");
    }
    const std::string token = "ya29.emu-sa-" + RandomHex(24);
    tokens_[token] = Clock::now() + std::chrono::seconds(token_lifetime_);
    JsonObject o = NewObject();
    o->set("accessToken", token);
    o->set("expireTime", Rfc3339Millis(SysClock::now() + std::chrono::seconds(token_lifetime_)));
    return JsonResponse(200, o);
  }

  // The metadata server (plugins/gcp/REFERENCE.md §6): Metadata-Flavor: Google both ways; the
  // instance's service account (settings metadata_service_account=false: a VM without one).
  HttpResponse Metadata(const HttpRequest& req, const std::string& path) {
    auto text = [](int status, const std::string& body) {
      HttpResponse r = TextResponse(status, body, "application/text");
      r.SetHeader("Metadata-Flavor", "Google");
      return r;
    };
    if (req.Header("metadata-flavor") != "Google") {
      HttpResponse r =
          TextResponse(403, "Missing required header \"Metadata-Flavor\": \"Google\"\n",
                       "text/html; charset=UTF-8");
      r.SetHeader("Metadata-Flavor", "Google");
      return r;
    }
    if (req.method != "GET") return text(405, "Method Not Allowed\n");
    const std::string rest = path.size() > std::string(kMetadataPrefix).size()
                                 ? path.substr(std::string(kMetadataPrefix).size())
                                 : "";
    if (rest.empty()) return text(200, "instance/\nproject/\n");
    if (rest == "project/project-id") return text(200, project_);
    if (rest == "project/numeric-project-id") return text(200, "470000000001");
    const std::string sa = "instance/service-accounts";
    if (rest.rfind(sa, 0) == 0) {
      if (!metadata_service_account_) return text(404, "Not Found\n");
      if (rest == sa) return text(200, "default/\n" + client_email_ + "/\n");
      for (const std::string& who : {std::string("default"), client_email_}) {
        const std::string base = sa + "/" + who + "/";
        if (rest == base + "email") return text(200, client_email_);
        if (rest == base + "scopes") {
          return text(200, "https://www.googleapis.com/auth/cloud-platform\n");
        }
        if (rest == base + "token") {
          HttpResponse r = JsonResponse(200, IssueToken("ya29.emu-gce-"));
          r.SetHeader("Metadata-Flavor", "Google");
          return r;
        }
      }
    }
    return text(404, "Not Found\n");
  }

  // A URL-sourced subject token (credential_source.url), shaped like Azure's instance
  // metadata identity endpoint: needs the header "Metadata: true".
  HttpResponse SubjectToken(const HttpRequest& req) {
    if (req.Header("metadata") != "true") {
      return TokenError(400, "bad_request", "Required metadata header not specified");
    }
    JsonObject o = NewObject();
    o->set("access_token", std::string(kSubjectToken));
    o->set("token_type", std::string("Bearer"));
    return JsonResponse(200, o);
  }

  // --- project, zones, regions, types ---
  std::string Link(const std::string& rest) const { return kSelfLinkBase + project_ + "/" + rest; }

  JsonObject ProjectJson() {
    JsonObject o = NewObject();
    o->set("kind", std::string("compute#project"));
    o->set("id", std::string("470000000001"));
    o->set("creationTimestamp", std::string("2024-01-02T03:04:05.000-07:00"));
    o->set("name", project_);
    JsonObject meta = NewObject();
    meta->set("kind", std::string("compute#metadata"));
    meta->set("fingerprint", std::string("emuProjectFp="));
    o->set("commonInstanceMetadata", meta);
    JsonArray quotas = NewArray();
    int64_t gpus = 0;
    for (const auto& [k, inst] : instances_) gpus += GpuCount(inst);
    quotas->add(Quota("GPUS_ALL_REGIONS", 64, gpus));
    quotas->add(Quota("FIREWALLS", 200, static_cast<int64_t>(firewalls_.size())));
    o->set("quotas", quotas);
    o->set("selfLink", std::string(kSelfLinkBase) + project_);
    o->set("defaultServiceAccount", "470000000001-compute@developer.gserviceaccount.com");
    o->set("xpnProjectStatus", std::string("UNSPECIFIED_XPN_PROJECT_STATUS"));
    o->set("defaultNetworkTier", std::string("PREMIUM"));
    return o;
  }

  static JsonObject Quota(const std::string& metric, double limit, int64_t usage) {
    JsonObject q = NewObject();
    q->set("metric", metric);
    q->set("limit", limit);
    q->set("usage", static_cast<double>(usage));
    return q;
  }

  JsonObject ZoneJson(const ZoneDef& z) const {
    JsonObject o = NewObject();
    o->set("kind", std::string("compute#zone"));
    o->set("id", std::to_string(2000 + (&z - &Zones()[0])));
    o->set("creationTimestamp", std::string("1969-12-31T16:00:00.000-08:00"));
    o->set("name", std::string(z.name));
    o->set("description", std::string(z.name));
    o->set("status", std::string("UP"));
    o->set("region", Link("regions/" + RegionOfZone(z.name)));
    o->set("selfLink", Link(std::string("zones/") + z.name));
    o->set("availableCpuPlatforms",
           Strings({"Intel Cascade Lake", "AMD Milan", "Intel Sapphire Rapids"}));
    o->set("supportsPzs", false);
    return o;
  }

  JsonObject RegionJson(const std::string& region) {
    JsonObject o = NewObject();
    o->set("kind", std::string("compute#region"));
    o->set("id", std::to_string(1000 + std::hash<std::string>{}(region) % 1000));
    o->set("creationTimestamp", std::string("1969-12-31T16:00:00.000-08:00"));
    o->set("name", region);
    o->set("description", region);
    o->set("status", std::string("UP"));
    JsonArray zones = NewArray();
    for (const auto& z : Zones()) {
      if (RegionOfZone(z.name) == region) zones->add(Link(std::string("zones/") + z.name));
    }
    o->set("zones", zones);
    JsonArray quotas = NewArray();
    int64_t cpus = 0;
    std::map<std::string, int64_t> gpu_usage;
    for (const auto& [k, inst] : instances_) {
      if (RegionOfZone(inst.zone) != region) continue;
      if (const MachineTypeDef* mt = FindMachineType(inst.zone, inst.machine_type))
        cpus += mt->cpus;
      if (const AcceleratorDef* a = FindAccelerator(GpuAccelerator(inst))) {
        gpu_usage[a->quota_metric] += GpuCount(inst);
      }
    }
    quotas->add(Quota("CPUS", 2400, cpus));
    for (const auto& a : Accelerators())
      quotas->add(Quota(a.quota_metric, 16, gpu_usage[a.quota_metric]));
    o->set("quotas", quotas);
    o->set("selfLink", Link("regions/" + region));
    o->set("supportsPzs", false);
    return o;
  }

  JsonObject MachineTypeJson(const std::string& zone, const MachineTypeDef& m) const {
    JsonObject o = NewObject();
    o->set("kind", std::string("compute#machineType"));
    o->set("id", std::to_string(3000 + (&m - &MachineTypes()[0])));
    o->set("creationTimestamp", std::string("1969-12-31T16:00:00.000-08:00"));
    o->set("name", m.name);
    o->set("description", std::to_string(m.cpus) + " vCPUs, " + std::to_string(m.memory_mb / 1024) +
                              " GB RAM" +
                              (m.gpu_count ? ", " + std::to_string(m.gpu_count) + " GPU" : ""));
    o->set("guestCpus", m.cpus);
    o->set("memoryMb", m.memory_mb);
    o->set("imageSpaceGb", 0);
    o->set("maximumPersistentDisks", 128);
    o->set("maximumPersistentDisksSizeGb", std::string("263168"));
    o->set("zone", zone);
    o->set("selfLink", Link("zones/" + zone + "/machineTypes/" + m.name));
    o->set("isSharedCpu", false);
    if (m.gpu_count > 0) {
      JsonArray accs = NewArray();
      JsonObject a = NewObject();
      a->set("guestAcceleratorType", m.accelerator);
      a->set("guestAcceleratorCount", m.gpu_count);
      accs->add(a);
      o->set("accelerators", accs);
    }
    return o;
  }

  JsonObject AcceleratorJson(const std::string& zone, const AcceleratorDef& a) const {
    JsonObject o = NewObject();
    o->set("kind", std::string("compute#acceleratorType"));
    o->set("id", std::to_string(10000 + (&a - &Accelerators()[0])));
    o->set("creationTimestamp", std::string("1969-12-31T16:00:00.000-08:00"));
    o->set("name", std::string(a.name));
    o->set("description", std::string(a.description));
    o->set("zone", Link("zones/" + zone));
    o->set("selfLink", Link("zones/" + zone + "/acceleratorTypes/" + a.name));
    o->set("maximumCardsPerInstance", a.max_cards);
    return o;
  }

  JsonObject DiskTypeJson(const std::string& zone, const std::string& name) const {
    JsonObject o = NewObject();
    o->set("kind", std::string("compute#diskType"));
    o->set("name", name);
    o->set("description", name == "pd-ssd"               ? "SSD Persistent Disk"
                          : name == "pd-standard"        ? "Standard Persistent Disk"
                          : name == "hyperdisk-balanced" ? "Hyperdisk Balanced"
                                                         : "Balanced Persistent Disk");
    o->set("validDiskSize", std::string("10GB-65536GB"));
    o->set("zone", Link("zones/" + zone));
    o->set("selfLink", Link("zones/" + zone + "/diskTypes/" + name));
    o->set("defaultDiskSizeGb", std::string("100"));
    return o;
  }

  // The page of `all` a list request asks for: the elements whose JSON (json_of) its filter
  // keeps, from pageToken on, at most maxResults; *next_page_token is "" on the last page.
  // A 400 naming the parameter when filter, maxResults or pageToken is malformed.
  template <typename T, typename JsonOf>
  static std::optional<HttpResponse> SelectPage(const HttpRequest& req, const std::vector<T>& all,
                                                JsonOf json_of, std::vector<T>* page,
                                                std::string* next_page_token) {
    std::vector<T> items;
    if (auto f = req.Query("filter"); f && !f->empty()) {
      auto terms = ParseFilter(*f);
      if (!terms)
        return Invalid("Invalid value for field 'filter': '" + *f +
                       "'. Invalid list filter expression.");
      for (const auto& e : all) {
        if (Matches(json_of(e), *terms)) items.push_back(e);
      }
    } else {
      items = all;
    }
    int max = kMaxResultsDefault;
    if (auto mr = req.Query("maxResults")) {
      try {
        max = std::clamp(std::stoi(*mr), 1, 500);
      } catch (const std::exception&) {
        return Invalid("Invalid value for field 'maxResults': '" + *mr + "'. Must be an integer.");
      }
    }
    size_t start = 0;
    if (auto pt = req.Query("pageToken"); pt && !pt->empty()) {
      try {
        start = std::stoul(*pt);
      } catch (const std::exception&) {
        return Invalid("Invalid value for field 'pageToken': '" + *pt + "'. Invalid page token.");
      }
    }
    page->clear();
    for (size_t i = start; i < items.size() && i < start + static_cast<size_t>(max); ++i)
      page->push_back(items[i]);
    next_page_token->clear();
    if (start + static_cast<size_t>(max) < items.size()) {
      *next_page_token = std::to_string(start + max);
    }
    return std::nullopt;
  }

  // A list resource: items (absent when empty, plugins/gcp/REFERENCE.md §3.3), paginated.
  HttpResponse List(const HttpRequest& req, const std::string& kind, const std::string& self,
                    const std::vector<JsonObject>& all) {
    std::vector<JsonObject> page;
    std::string next_page_token;
    if (auto bad = SelectPage(
            req, all, [](const JsonObject& o) { return o; }, &page, &next_page_token)) {
      return *bad;
    }
    JsonObject o = NewObject();
    o->set("kind", kind);
    o->set("id", self);
    JsonArray arr = NewArray();
    for (const auto& item : page) arr->add(item);
    if (arr->size() > 0) o->set("items", arr);
    if (!next_page_token.empty()) o->set("nextPageToken", next_page_token);
    o->set("selfLink", Link(self));
    return JsonResponse(200, o);
  }

  HttpResponse RouteZones(const HttpRequest& req, const std::vector<std::string>& seg) {
    const std::string& m = req.method;
    if (seg.size() == 2 && m == "GET") {
      std::vector<JsonObject> all;
      for (const auto& z : Zones()) all.push_back(ZoneJson(z));
      return List(req, "compute#zoneList", "zones", all);
    }
    if (seg.size() < 3) return NotFound("projects/" + project_ + "/zones");
    const std::string& zone = seg[2];
    const ZoneDef* zdef = FindZone(zone);
    if (!zdef) return NotFound("projects/" + project_ + "/zones/" + zone);
    if (seg.size() == 3 && m == "GET") return JsonResponse(200, ZoneJson(*zdef));
    const std::string what = seg.size() > 3 ? seg[3] : "";
    const std::string base = "projects/" + project_ + "/zones/" + zone + "/" + what;
    if (what == "instances") {
      if (seg.size() == 4) {
        if (m == "GET") {
          std::vector<JsonObject> all;
          for (auto& [k, inst] : instances_) {
            if (inst.zone == zone) all.push_back(InstanceJson(inst));
          }
          return List(req, "compute#instanceList", "zones/" + zone + "/instances", all);
        }
        if (m == "POST") return InsertInstance(req, zone);
      }
      if (seg.size() >= 5) {
        auto it = instances_.find(zone + "/" + seg[4]);
        if (it == instances_.end()) {
          return NotFound(base + "/" + seg[4]);
        }
        if (seg.size() == 5 && m == "GET") return JsonResponse(200, InstanceJson(it->second));
        if (seg.size() == 5 && m == "DELETE") return DeleteInstance(req, it->second);
        if (seg.size() == 6 && m == "POST" && (seg[5] == "stop" || seg[5] == "start")) {
          return StopOrStartInstance(it->second, seg[5]);
        }
      }
      return NotFound(base);
    }
    if (what == "operations") {
      if (seg.size() == 5 && m == "GET") {
        auto it = operations_.find(seg[4]);
        if (it == operations_.end() || it->second.zone != zone)
          return NotFound(base + "/" + seg[4]);
        return JsonResponse(200, OperationJson(it->second));
      }
      if (seg.size() == 4 && m == "GET") {
        std::vector<JsonObject> all;
        for (auto& [n, op] : operations_) {
          if (op.zone == zone) all.push_back(OperationJson(op));
        }
        return List(req, "compute#operationList", "zones/" + zone + "/operations", all);
      }
      return NotFound(base);
    }
    if (what == "machineTypes" && m == "GET") {
      if (seg.size() == 4) {
        std::vector<JsonObject> all;
        for (const auto& mt : MachineTypes()) {
          if (FindMachineType(zone, mt.name) == &mt) all.push_back(MachineTypeJson(zone, mt));
        }
        return List(req, "compute#machineTypeList", "zones/" + zone + "/machineTypes", all);
      }
      if (seg.size() == 5) {
        const MachineTypeDef* mt = FindMachineType(zone, seg[4]);
        if (!mt) return NotFound(base + "/" + seg[4]);
        return JsonResponse(200, MachineTypeJson(zone, *mt));
      }
    }
    if (what == "acceleratorTypes" && m == "GET") {
      if (seg.size() == 4) {
        std::vector<JsonObject> all;
        for (const auto& a : Accelerators()) {
          if (ZoneHas(*zdef, a.name)) all.push_back(AcceleratorJson(zone, a));
        }
        return List(req, "compute#acceleratorTypeList", "zones/" + zone + "/acceleratorTypes", all);
      }
      if (seg.size() == 5) {
        const AcceleratorDef* a = FindAccelerator(seg[4]);
        if (!a || !ZoneHas(*zdef, a->name)) return NotFound(base + "/" + seg[4]);
        return JsonResponse(200, AcceleratorJson(zone, *a));
      }
    }
    if (what == "diskTypes" && m == "GET") {
      static const std::vector<std::string> types = {"pd-standard", "pd-balanced", "pd-ssd",
                                                     "hyperdisk-balanced"};
      if (seg.size() == 4) {
        std::vector<JsonObject> all;
        for (const auto& t : types) all.push_back(DiskTypeJson(zone, t));
        return List(req, "compute#diskTypeList", "zones/" + zone + "/diskTypes", all);
      }
      if (seg.size() == 5 && std::find(types.begin(), types.end(), seg[4]) != types.end()) {
        return JsonResponse(200, DiskTypeJson(zone, seg[4]));
      }
      return NotFound(base + (seg.size() > 4 ? "/" + seg[4] : ""));
    }
    if (what == "disks" && m == "GET") {
      if (seg.size() == 4) {
        std::vector<JsonObject> all;
        for (auto& [k, inst] : instances_) {
          if (inst.zone == zone) all.push_back(DiskJson(inst));
        }
        return List(req, "compute#diskList", "zones/" + zone + "/disks", all);
      }
      if (seg.size() == 5) {
        auto it = instances_.find(zone + "/" + seg[4]);
        if (it == instances_.end()) return NotFound(base + "/" + seg[4]);
        return JsonResponse(200, DiskJson(it->second));
      }
    }
    return NotFound(base);
  }

  HttpResponse RouteRegions(const HttpRequest& req, const std::vector<std::string>& seg) {
    if (req.method != "GET") return NotFound("projects/" + project_ + "/regions");
    if (seg.size() == 2) {
      std::vector<JsonObject> all;
      for (const auto& r : RegionNames()) all.push_back(RegionJson(r));
      return List(req, "compute#regionList", "regions", all);
    }
    const auto names = RegionNames();
    if (seg.size() == 3 && std::find(names.begin(), names.end(), seg[2]) != names.end()) {
      return JsonResponse(200, RegionJson(seg[2]));
    }
    return NotFound("projects/" + project_ + "/regions/" + (seg.size() > 2 ? seg[2] : ""));
  }

  HttpResponse RouteImages(const HttpRequest& req, const std::string& project,
                           const std::vector<std::string>& seg) {
    std::string ref = "projects/" + project;
    for (size_t i = 1; i < seg.size(); ++i) ref += "/" + seg[i];
    if (seg.size() == 3) {
      std::vector<JsonObject> all;
      for (const auto& i : Images()) {
        if (project == i.project) all.push_back(ImageJson(i));
      }
      return List(req, "compute#imageList", "images", all);
    }
    const ImageDef* i = ResolveImage(ref, project_);
    if (!i) return NotFound(ref);
    return JsonResponse(200, ImageJson(*i));
  }

  static JsonObject ImageJson(const ImageDef& i) {
    JsonObject o = NewObject();
    o->set("kind", std::string("compute#image"));
    o->set("id", std::to_string(i.id));
    o->set("creationTimestamp", std::string("2025-02-28T10:00:00.000-08:00"));
    o->set("name", std::string(i.name));
    o->set("description", std::string(i.description));
    o->set("sourceType", std::string("RAW"));
    o->set("status", std::string("READY"));
    o->set("archiveSizeBytes", std::string("2212155776"));
    o->set("diskSizeGb",
           std::string(std::string(i.project) == "deeplearning-platform-release" ? "50" : "10"));
    o->set("family", std::string(i.family));
    o->set("selfLink", kSelfLinkBase + std::string(i.project) + "/global/images/" + i.name);
    o->set("labelFingerprint", std::string("42WmSpB8rSM="));
    o->set("architecture", std::string("X86_64"));
    return o;
  }

  HttpResponse RouteGlobal(const HttpRequest& req, const std::vector<std::string>& seg) {
    const std::string& m = req.method;
    const std::string what = seg.size() > 2 ? seg[2] : "";
    const std::string base = "projects/" + project_ + "/global/" + what;
    if (what == "firewalls") {
      if (seg.size() == 3) {
        if (m == "GET") {
          std::vector<JsonObject> all;
          for (auto& [n, f] : firewalls_) all.push_back(f.resource);
          return List(req, "compute#firewallList", "global/firewalls", all);
        }
        if (m == "POST") return InsertFirewall(req);
      }
      if (seg.size() == 4) {
        auto it = firewalls_.find(seg[3]);
        if (it == firewalls_.end()) return NotFound(base + "/" + seg[3]);
        if (m == "GET") return JsonResponse(200, it->second.resource);
        if (m == "DELETE") return DeleteFirewall(req, it);
        if (m == "PATCH" || m == "PUT") return UpdateFirewall(req, it->second, m == "PATCH");
      }
      return NotFound(base);
    }
    if (what == "operations") {
      if (seg.size() == 4 && m == "GET") {
        auto it = operations_.find(seg[3]);
        if (it == operations_.end() || !it->second.zone.empty())
          return NotFound(base + "/" + seg[3]);
        return JsonResponse(200, OperationJson(it->second));
      }
      return NotFound(base);
    }
    if (what == "networks" && m == "GET") {
      if (seg.size() == 3)
        return List(req, "compute#networkList", "global/networks", {NetworkJson()});
      if (seg.size() == 4 && seg[3] == "default") return JsonResponse(200, NetworkJson());
      return NotFound(base + (seg.size() > 3 ? "/" + seg[3] : ""));
    }
    if (what == "images" && m == "GET") {
      // The emulated project has no images of its own.
      if (seg.size() == 3) return List(req, "compute#imageList", "global/images", {});
      return NotFound(base + (seg.size() > 3 ? "/" + seg[3] : ""));
    }
    return NotFound(base);
  }

  JsonObject NetworkJson() const {
    JsonObject o = NewObject();
    o->set("kind", std::string("compute#network"));
    o->set("id", std::string("5000000000000000001"));
    o->set("creationTimestamp", std::string("2024-01-02T03:04:05.000-07:00"));
    o->set("name", std::string("default"));
    o->set("description", std::string("Default network for the project"));
    o->set("selfLink", Link("global/networks/default"));
    o->set("autoCreateSubnetworks", true);
    JsonArray subnets = NewArray();
    for (const auto& r : RegionNames()) subnets->add(Link("regions/" + r + "/subnetworks/default"));
    o->set("subnetworks", subnets);
    JsonObject routing = NewObject();
    routing->set("routingMode", std::string("REGIONAL"));
    o->set("routingConfig", routing);
    o->set("networkFirewallPolicyEnforcementOrder", std::string("AFTER_CLASSIC_FIREWALL"));
    return o;
  }

  HttpResponse Aggregated(const HttpRequest& req, const std::string& what) {
    std::string list_key;
    std::vector<std::pair<std::string, JsonObject>> all;  // (zone, item)
    if (what == "instances") {
      list_key = "instances";
      for (auto& [k, inst] : instances_) all.emplace_back(inst.zone, InstanceJson(inst));
    } else if (what == "disks") {
      list_key = "disks";
      for (auto& [k, inst] : instances_) all.emplace_back(inst.zone, DiskJson(inst));
    } else if (what == "acceleratorTypes") {
      list_key = "acceleratorTypes";
      for (const auto& z : Zones()) {
        for (const auto& a : Accelerators()) {
          if (ZoneHas(z, a.name)) all.emplace_back(z.name, AcceleratorJson(z.name, a));
        }
      }
    } else if (what == "machineTypes") {
      list_key = "machineTypes";
      for (const auto& z : Zones()) {
        for (const auto& mt : MachineTypes()) {
          if (FindMachineType(z.name, mt.name) == &mt)
            all.emplace_back(z.name, MachineTypeJson(z.name, mt));
        }
      }
    } else {
      return NotFound("projects/" + project_ + "/aggregated/" + what);
    }
    std::vector<std::pair<std::string, JsonObject>> page;
    std::string next_page_token;
    if (auto bad = SelectPage(
            req, all, [](const auto& zone_item) { return zone_item.second; }, &page,
            &next_page_token)) {
      return *bad;
    }
    JsonObject by_zone = NewObject();
    std::map<std::string, JsonArray> lists;
    for (const auto& [zone, item] : page) {
      auto& l = lists[zone];
      if (!l) l = NewArray();
      l->add(item);
    }
    for (const auto& z : Zones()) {
      JsonObject scope = NewObject();
      auto it = lists.find(z.name);
      if (it != lists.end()) {
        scope->set(list_key, it->second);
      } else {
        JsonObject warning = NewObject();
        warning->set("code", std::string("NO_RESULTS_ON_PAGE"));
        warning->set("message", "There are no results for scope 'zones/" + std::string(z.name) +
                                    "' on this page.");
        JsonArray data = NewArray();
        JsonObject kv = NewObject();
        kv->set("key", std::string("scope"));
        kv->set("value", "zones/" + std::string(z.name));
        data->add(kv);
        warning->set("data", data);
        scope->set("warning", warning);
      }
      by_zone->set("zones/" + std::string(z.name), scope);
    }
    JsonObject o = NewObject();
    o->set("kind", "compute#" + what.substr(0, what.size() - 1) + "AggregatedList");
    o->set("id", "projects/" + project_ + "/aggregated/" + what);
    o->set("items", by_zone);
    if (!next_page_token.empty()) o->set("nextPageToken", next_page_token);
    o->set("selfLink", Link("aggregated/" + what));
    return JsonResponse(200, o);
  }

  // --- operations (plugins/gcp/REFERENCE.md §3.5) ---
  Operation& NewOperation(const std::string& zone, const std::string& type,
                          const std::string& target_link, uint64_t target_id) {
    Operation op;
    op.id = next_id_++;
    op.name = "operation-" + std::to_string(UnixNow() * 1000) + "-" + RandomHex(6) + "-" +
              RandomHex(4) + "-" + RandomHex(4);
    op.zone = zone;
    op.type = type;
    op.target_link = target_link;
    op.target_id = target_id;
    op.insert_time = SysClock::now();
    return operations_[op.name] = op;
  }

  static void Finish(Operation& op, const std::string& code = "", const std::string& message = "",
                     int http_status = 0, JsonArray details = nullptr) {
    if (op.status == "DONE") return;
    op.status = "DONE";
    op.end_time = SysClock::now();
    if (!code.empty()) {
      JsonObject e = NewObject();
      e->set("code", code);
      e->set("message", message);
      if (details) e->set("errorDetails", details);
      op.errors = NewArray();
      op.errors->add(e);
      op.http_error_status = http_status;
      op.http_error_message = http_status == 503   ? "SERVICE UNAVAILABLE"
                              : http_status == 403 ? "FORBIDDEN"
                              : http_status == 404 ? "NOT FOUND"
                                                   : "BAD REQUEST";
    }
  }

  JsonObject OperationJson(const Operation& op) const {
    JsonObject o = NewObject();
    o->set("kind", std::string("compute#operation"));
    o->set("id", std::to_string(op.id));
    o->set("name", op.name);
    if (!op.zone.empty()) o->set("zone", Link("zones/" + op.zone));
    o->set("operationType", op.type);
    o->set("targetLink", op.target_link);
    o->set("targetId", std::to_string(op.target_id));
    o->set("status", op.status);
    o->set("user", client_email_);
    o->set("progress", op.status == "DONE" ? 100 : 0);
    o->set("insertTime", Rfc3339Millis(op.insert_time));
    o->set("startTime", Rfc3339Millis(op.insert_time));
    if (op.end_time) o->set("endTime", Rfc3339Millis(*op.end_time));
    if (!op.status_message.empty()) o->set("statusMessage", op.status_message);
    if (op.errors) {
      JsonObject err = NewObject();
      err->set("errors", op.errors);
      o->set("error", err);
      o->set("httpErrorStatusCode", op.http_error_status);
      o->set("httpErrorMessage", op.http_error_message);
    }
    o->set("selfLink", op.zone.empty() ? Link("global/operations/" + op.name)
                                       : Link("zones/" + op.zone + "/operations/" + op.name));
    return o;
  }

  // --- instances (plugins/gcp/REFERENCE.md §3.1-3.4) ---
  static std::string GpuAccelerator(const Instance& inst) {
    if (inst.guest_accelerators && inst.guest_accelerators->size() > 0) {
      return LastSegment(
          GetString(inst.guest_accelerators->getObject(0), "acceleratorType").value_or(""));
    }
    if (const MachineTypeDef* mt = FindMachineType(inst.zone, inst.machine_type))
      return mt->accelerator;
    return "";
  }
  static int GpuCount(const Instance& inst) {
    if (inst.guest_accelerators && inst.guest_accelerators->size() > 0) {
      return static_cast<int>(
          GetInt(inst.guest_accelerators->getObject(0), "acceleratorCount").value_or(1));
    }
    if (const MachineTypeDef* mt = FindMachineType(inst.zone, inst.machine_type))
      return mt->gpu_count;
    return 0;
  }

  // The scheduling Compute Engine returns for an insert's (possibly partial) `scheduling`:
  // what the insert set, and the documented defaults for the rest (compute v1 discovery
  // document, schema Scheduling: automaticRestart "By default, this is set to true";
  // onHostMaintenance "For standard instances, the default behavior is MIGRATE. For
  // preemptible instances, the default and only possible behavior is TERMINATE";
  // provisioningModel STANDARD unless SPOT; preemptible false unless set).
  static JsonObject SchedulingWithDefaults(const JsonObject& sent) {
    JsonObject sch = NewObject();
    if (sent) {
      for (const auto& [k, v] : *sent) sch->set(k, v);
    }
    const bool spot = GetString(sch, "provisioningModel").value_or("") == "SPOT";
    const bool preemptible = GetBool(sch, "preemptible").value_or(false) || spot;
    if (!sch->has("preemptible")) sch->set("preemptible", preemptible);
    if (!sch->has("provisioningModel")) sch->set("provisioningModel", std::string("STANDARD"));
    if (!sch->has("onHostMaintenance")) {
      sch->set("onHostMaintenance", std::string(preemptible ? "TERMINATE" : "MIGRATE"));
    }
    if (!sch->has("automaticRestart")) sch->set("automaticRestart", !preemptible);
    return sch;
  }

  // The values the discovery document's Scheduling enums allow, for the fields gpuprov and
  // the clients here send.
  static std::optional<HttpResponse> CheckScheduling(const JsonObject& sch) {
    if (!sch) return std::nullopt;
    static const std::map<std::string, std::set<std::string>> enums = {
        {"onHostMaintenance", {"MIGRATE", "TERMINATE"}},
        {"provisioningModel", {"FLEX_START", "RESERVATION_BOUND", "SPOT", "STANDARD"}},
        {"instanceTerminationAction",
         {"DELETE", "INSTANCE_TERMINATION_ACTION_UNSPECIFIED", "STOP"}},
    };
    for (const auto& [field, allowed] : enums) {
      if (!sch->has(field)) continue;
      const std::string v = GetString(sch, field).value_or("?");
      if (allowed.count(v) == 0) {
        return Invalid("Invalid value for field 'resource.scheduling." + field + "': '" + v +
                       "'.");
      }
    }
    return std::nullopt;
  }

  // Zonal disk types (compute v1 discovery document, diskTypes.list; the ones Google lists
  // in its disk types page).
  static bool IsDiskType(const std::string& name) {
    static const std::set<std::string> types = {
        "pd-standard",       "pd-balanced",       "pd-ssd",
        "pd-extreme",        "hyperdisk-balanced", "hyperdisk-extreme",
        "hyperdisk-throughput", "hyperdisk-ml"};
    return types.count(name) > 0;
  }
  // Machine series with no Persistent Disk (see InsertInstance).
  static bool HyperdiskOnly(const std::string& machine_type) {
    for (const char* prefix : {"a3-ultragpu-", "a4-", "n4-"}) {
      if (machine_type.rfind(prefix, 0) == 0) return true;
    }
    return false;
  }

  std::string InstanceLink(const Instance& inst) const {
    return Link("zones/" + inst.zone + "/instances/" + inst.name);
  }

  // Status from the record and the backend: PROVISIONING -> STAGING -> RUNNING; an
  // instance that fails while booting is TERMINATED (stopped), as GCE has no error state.
  std::string StatusOf(const Instance& inst, InstanceStatus* backend_status) {
    const auto now = Clock::now();
    if (inst.deleting_since) return "STOPPING";
    if (inst.backend_id.empty()) return "PROVISIONING";
    InstanceStatus s = backend_->State(inst.backend_id);
    if (backend_status) *backend_status = s;
    switch (s.state) {
      case InstanceState::kProvisioning:
        return now - inst.created_steady < kProvisioningPhase ? "PROVISIONING" : "STAGING";
      case InstanceState::kRunning:
        return "RUNNING";
      case InstanceState::kError:
        return "TERMINATED";
      case InstanceState::kStopped:
        return "TERMINATED";  // plugins/gcp/REFERENCE.md §3.2: TERMINATED = stopped, not deleted
      case InstanceState::kGone:
        // A Spot VM Compute Engine took back (POST /preempt) is stopped when its
        // instanceTerminationAction is STOP (the default for SPOT), deleted when DELETE
        // (compute v1 Scheduling.instanceTerminationAction).
        return s.preempted && SpotStopsOnPreemption(inst) ? "TERMINATED" : "";
    }
    return "";
  }

  static bool SpotStopsOnPreemption(const Instance& inst) {
    return inst.scheduling &&
           GetString(inst.scheduling, "provisioningModel").value_or("") == "SPOT" &&
           GetString(inst.scheduling, "instanceTerminationAction").value_or("STOP") != "DELETE";
  }

  // Compute Engine records a preemption as a DONE zone operation compute.instances.preempted
  // targeting the instance, statusMessage "Instance was preempted." (documentation,
  // "Create and use Spot VMs", detecting a preemption: gcloud compute operations list
  // --filter="operationType=compute.instances.preempted").
  void RecordPreemption(Instance& inst) {
    if (inst.preempted) return;
    inst.preempted = true;
    Operation& op =
        NewOperation(inst.zone, "compute.instances.preempted", InstanceLink(inst), inst.id);
    op.status_message = "Instance was preempted.";
    Finish(op);
  }

  JsonObject InstanceJson(Instance& inst) {
    InstanceStatus s;
    const std::string status = StatusOf(inst, &s);
    JsonObject o = NewObject();
    o->set("kind", std::string("compute#instance"));
    o->set("id", std::to_string(inst.id));
    o->set("creationTimestamp", Rfc3339Millis(inst.created));
    o->set("name", inst.name);
    o->set("tags", [&] {
      JsonObject t = NewObject();
      if (!inst.tags.empty()) t->set("items", Strings(inst.tags));
      t->set("fingerprint", inst.tags_fingerprint);
      return t;
    }());
    o->set("machineType", Link("zones/" + inst.zone + "/machineTypes/" + inst.machine_type));
    o->set("status", status.empty() ? std::string("STOPPING") : status);
    if (status == "TERMINATED" && !inst.preempted) {
      o->set("statusMessage", std::string("Instance terminated during boot (emulator fault "
                                          "error_during_boot; not from the reference)"));
    }
    o->set("zone", Link("zones/" + inst.zone));
    o->set("canIpForward", false);
    JsonArray nics = NewArray();
    JsonObject nic = NewObject();
    nic->set("kind", std::string("compute#networkInterface"));
    nic->set("network", Link("global/networks/default"));
    nic->set("subnetwork", Link("regions/" + RegionOfZone(inst.zone) + "/subnetworks/default"));
    nic->set("networkIP", s.private_ip.empty()
                              ? std::string("10.128.0.") + std::to_string(inst.id % 250 + 2)
                              : s.private_ip);
    nic->set("name", std::string("nic0"));
    nic->set("fingerprint", std::string("nicFp0000=="));
    nic->set("stackType", std::string("IPV4_ONLY"));
    JsonArray acs = NewArray();
    JsonObject ac = NewObject();
    ac->set("kind", std::string("compute#accessConfig"));
    ac->set("type", std::string("ONE_TO_ONE_NAT"));
    ac->set("name", std::string("External NAT"));
    // The public address once STAGING (plugins/gcp/REFERENCE.md, emulator notes 4).
    if ((status == "STAGING" || status == "RUNNING") && !s.public_ip.empty()) {
      ac->set("natIP", s.public_ip);
    }
    ac->set("networkTier", std::string("PREMIUM"));
    acs->add(ac);
    nic->set("accessConfigs", acs);
    nics->add(nic);
    o->set("networkInterfaces", nics);
    JsonArray disks = NewArray();
    JsonObject d = NewObject();
    d->set("kind", std::string("compute#attachedDisk"));
    d->set("type", std::string("PERSISTENT"));
    d->set("mode", std::string("READ_WRITE"));
    d->set("source", Link("zones/" + inst.zone + "/disks/" + inst.name));
    d->set("deviceName", std::string("persistent-disk-0"));
    d->set("index", 0);
    d->set("boot", true);
    d->set("autoDelete", true);
    d->set("interface", std::string("SCSI"));
    d->set("diskSizeGb", std::to_string(inst.disk_gb));
    d->set("architecture", std::string("X86_64"));
    disks->add(d);
    o->set("disks", disks);
    JsonObject md = NewObject();
    md->set("kind", std::string("compute#metadata"));
    md->set("fingerprint", inst.fingerprint);
    if (inst.metadata_items && inst.metadata_items->size() > 0)
      md->set("items", inst.metadata_items);
    o->set("metadata", md);
    o->set("selfLink", InstanceLink(inst));
    o->set("scheduling", inst.scheduling ? inst.scheduling : SchedulingWithDefaults(nullptr));
    o->set("cpuPlatform",
           std::string(status == "RUNNING" ? "Intel Cascade Lake" : "Unknown CPU Platform"));
    if (inst.labels && inst.labels->size() > 0) o->set("labels", inst.labels);
    o->set("labelFingerprint", std::string("labelsFp00="));
    if (inst.guest_accelerators && inst.guest_accelerators->size() > 0) {
      o->set("guestAccelerators", inst.guest_accelerators);
    }
    // resourceStatus.effectiveInstanceMetadata (compute v1 discovery document, schema
    // ResourceStatusEffectiveInstanceMetadata): the metadata values in effect.
    JsonObject effective = NewObject();
    effective->set("enableOsloginMetadataValue", inst.os_login);
    effective->set("blockProjectSshKeysMetadataValue", false);
    JsonObject resource_status = NewObject();
    resource_status->set("effectiveInstanceMetadata", effective);
    o->set("resourceStatus", resource_status);
    o->set("startRestricted", false);
    o->set("deletionProtection", false);
    o->set("fingerprint", inst.fingerprint);
    o->set("lastStartTimestamp", Rfc3339Millis(inst.created));
    return o;
  }

  JsonObject DiskJson(const Instance& inst) const {
    JsonObject o = NewObject();
    o->set("kind", std::string("compute#disk"));
    o->set("id", std::to_string(inst.id + 1));
    o->set("creationTimestamp", Rfc3339Millis(inst.created));
    o->set("name", inst.name);
    o->set("sizeGb", std::to_string(inst.disk_gb));
    o->set("zone", Link("zones/" + inst.zone));
    o->set("status", std::string("READY"));
    o->set("selfLink", Link("zones/" + inst.zone + "/disks/" + inst.name));
    o->set("sourceImage", inst.source_image);
    o->set("sourceImageId", std::string("4711"));
    o->set("type", Link("zones/" + inst.zone + "/diskTypes/" + inst.disk_type));
    o->set("users", Strings({InstanceLink(inst)}));
    o->set("physicalBlockSizeBytes", std::string("4096"));
    o->set("architecture", std::string("X86_64"));
    return o;
  }

  // The tcp ports an allowed/denied list names (an entry without ports: all of them).
  static PortSet ListedPorts(const JsonArray& list) {
    PortSet out;
    for (size_t i = 0; list && i < list->size(); ++i) {
      JsonObject a = list->getObject(static_cast<unsigned>(i));
      const std::string proto = GetString(a, "IPProtocol").value_or("");
      if (proto != "tcp" && proto != "all") continue;
      JsonArray ports = GetArray(a, "ports");
      if (proto == "all" || !ports || ports->size() == 0) return PortSet::All();
      for (size_t j = 0; j < ports->size(); ++j) {
        const std::string p = ports->get(j).toString();
        const size_t dash = p.find('-');
        try {
          const int lo = std::stoi(p.substr(0, dash));
          out.Add(lo, dash == std::string::npos ? lo : std::stoi(p.substr(dash + 1)));
        } catch (const std::exception&) {
        }
      }
    }
    return out;
  }

  // What this machine can reach on an instance with these network tags
  // (plugins/gcp/REFERENCE.md §5): every enabled INGRESS rule of the network that targets the
  // instance (no targetTags, or one of its tags) and whose sourceRanges cover this machine decides
  // its ports, the lowest priority number first and deny before allow at equal priority; the
  // implied rule denies the rest. sourceTags never match this machine.
  PortSet ReachableOf(const std::vector<std::string>& tags) const {
    struct Decision {
      int64_t priority;
      bool deny;
      PortSet ports;
    };
    std::vector<Decision> rules;
    for (const auto& [n, f] : firewalls_) {
      const JsonObject& r = f.resource;
      if (GetBool(r, "disabled").value_or(false)) continue;
      if (GetString(r, "direction").value_or("INGRESS") != "INGRESS") continue;
      JsonArray targets = GetArray(r, "targetTags");
      bool applies = !targets || targets->size() == 0;
      for (size_t i = 0; targets && i < targets->size(); ++i) {
        applies = applies ||
                  std::find(tags.begin(), tags.end(), targets->get(i).toString()) != tags.end();
      }
      JsonArray ranges = GetArray(r, "sourceRanges");
      bool covers = false;
      for (size_t i = 0; ranges && i < ranges->size(); ++i) {
        covers = covers || CoversThisMachine(ranges->get(i).toString());
      }
      if (!applies || !covers) continue;
      const int64_t priority = GetInt(r, "priority").value_or(1000);
      if (JsonArray denied = GetArray(r, "denied")) {
        rules.push_back({priority, true, ListedPorts(denied)});
      }
      if (JsonArray allowed = GetArray(r, "allowed")) {
        rules.push_back({priority, false, ListedPorts(allowed)});
      }
    }
    std::stable_sort(rules.begin(), rules.end(), [](const Decision& a, const Decision& b) {
      return a.priority != b.priority ? a.priority < b.priority : a.deny && !b.deny;
    });
    PortSet decided, allowed;
    for (const Decision& d : rules) {
      PortSet fresh = d.ports;
      for (const PortRange& r : decided.ranges()) fresh.Remove(r.first, r.last);
      if (!d.deny) allowed.Add(fresh);
      decided.Add(d.ports);
    }
    return allowed;
  }

  // Tells the backend what every instance's rules allow now.
  void ApplyFirewalls() {
    for (const auto& [key, inst] : instances_) {
      if (inst.backend_id.empty()) continue;
      backend_->SetReachablePorts(inst.backend_id, ReachableOf(inst.tags));
    }
    ApplyPrivateIngress();
  }

  // What reaches an instance on its internal address from the network's other instances
  // (compute v1 Firewall, https://cloud.google.com/compute/docs/reference/rest/v1/firewalls):
  // every enabled INGRESS rule that targets it (no targetTags, or one of its tags) admits its
  // allowed protocols and ports from its sourceRanges and from the internal addresses of the
  // running instances of the network that carry one of its sourceTags ("the primary network
  // interfaces of VM instances that have the tag and are in the same VPC network"); the
  // implied deny ingress rule refuses the rest. A network made by hand has no other rule; the
  // pre-populated rules of a real default network (default-allow-internal and the others) are
  // not made here, as for a network that has had them removed. Deny rules are not applied on
  // this side (the backend's rules only admit).
  PrivateIngress PrivateIngressOf(const Instance& inst) {
    std::vector<PrivateRule> out;
    auto has_any = [](const std::vector<std::string>& tags, const JsonArray& wanted) {
      for (size_t i = 0; wanted && i < wanted->size(); ++i) {
        if (std::find(tags.begin(), tags.end(), wanted->get(i).toString()) != tags.end()) {
          return true;
        }
      }
      return false;
    };
    for (const auto& [n, f] : firewalls_) {
      const JsonObject& r = f.resource;
      if (GetBool(r, "disabled").value_or(false)) continue;
      if (GetString(r, "direction").value_or("INGRESS") != "INGRESS") continue;
      JsonArray targets = GetArray(r, "targetTags");
      if (targets && targets->size() > 0 && !has_any(inst.tags, targets)) continue;
      std::vector<std::string> sources;
      if (JsonArray ranges = GetArray(r, "sourceRanges")) {
        for (size_t i = 0; i < ranges->size(); ++i) {
          const std::string cidr = ranges->get(i).toString();
          if (cidr.find(':') == std::string::npos) sources.push_back(cidr);
        }
      }
      if (JsonArray source_tags = GetArray(r, "sourceTags")) {
        for (const auto& [key, o] : instances_) {
          if (o.deleting_since || o.backend_id.empty() || o.network != inst.network) continue;
          if (!has_any(o.tags, source_tags)) continue;
          const InstanceStatus st = backend_->State(o.backend_id);
          if (st.state == InstanceState::kRunning && !st.private_ip.empty()) {
            sources.push_back(st.private_ip);
          }
        }
      }
      if (sources.empty()) continue;
      JsonArray allowed = GetArray(r, "allowed");
      for (size_t i = 0; allowed && i < allowed->size(); ++i) {
        JsonObject a = allowed->getObject(static_cast<unsigned>(i));
        const std::string proto = GetString(a, "IPProtocol").value_or("");
        for (const char* p : {"tcp", "udp"}) {
          if (proto != p && proto != "all") continue;
          JsonArray ports = GetArray(a, "ports");
          PortSet set;
          if (!ports || ports->size() == 0) set.Add(1, 65535);
          for (size_t j = 0; ports && j < ports->size(); ++j) {
            const std::string spec = ports->get(j).toString();
            const size_t dash = spec.find('-');
            try {
              const int lo = std::stoi(spec.substr(0, dash));
              set.Add(lo, dash == std::string::npos ? lo : std::stoi(spec.substr(dash + 1)));
            } catch (const std::exception&) {
            }
          }
          for (const PortRange& range : set.ranges()) {
            PrivateRule rule;
            rule.protocol = p;
            rule.ports = range;
            rule.sources = sources;
            out.push_back(rule);
          }
        }
      }
    }
    return out;
  }

  // Tells the backend each instance's private ingress when it changed (peers' addresses are
  // known once they run, so this runs on every request and on every change of the rules).
  void ApplyPrivateIngress() {
    for (const auto& [key, inst] : instances_) {
      if (inst.backend_id.empty() || inst.deleting_since) continue;
      PrivateIngress ingress = PrivateIngressOf(inst);
      auto told = told_ingress_.find(inst.backend_id);
      if (told != told_ingress_.end() && told->second == ingress) continue;
      backend_->SetPrivateIngress(inst.backend_id, ingress);
      told_ingress_[inst.backend_id] = ingress;
    }
  }

  HttpResponse InsertInstance(const HttpRequest& req, const std::string& zone) {
    const std::string request_id = req.Query("requestId").value_or("");
    if (!request_id.empty()) {
      auto it = request_ids_.find(request_id);
      if (it != request_ids_.end() && operations_.count(it->second)) {
        return JsonResponse(200, OperationJson(operations_.at(it->second)));  // deduplicated
      }
    }
    JsonObject body = ParseObject(req.body);
    if (!body) return Error(400, "parseError", "Invalid JSON payload received.");
    if (auto bad = CheckBody("compute.instances.insert", "instance_resource", body)) return *bad;
    const std::string name = GetString(body, "name").value_or("");
    if (!std::regex_match(name, NameRe())) {
      return Invalid(
          "Invalid value for field 'resource.name': '" + name +
          "'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?|[1-9][0-9]{0,19})'");
    }
    const std::string mt_ref = GetString(body, "machineType").value_or("");
    const MachineTypeDef* mt = FindMachineType(zone, LastSegment(mt_ref));
    if (!mt) {
      return Invalid("Invalid value for field 'resource.machineType': '" + mt_ref +
                     "'. Machine type with name '" + LastSegment(mt_ref) +
                     "' does not exist in zone '" + zone + "'.");
    }
    if (instances_.count(zone + "/" + name)) {
      return Error(409, "alreadyExists",
                   "The resource 'projects/" + project_ + "/zones/" + zone + "/instances/" + name +
                       "' already exists");
    }
    JsonArray accs = GetArray(body, "guestAccelerators");
    std::string accelerator = mt->accelerator;
    int gpu_count = mt->gpu_count;
    if (accs && accs->size() > 0) {
      if (!mt->accelerator.empty() || mt->name.rfind("n1-", 0) != 0) {
        return Invalid("Invalid value for field 'resource.guestAccelerators': machine type " +
                       mt->name + " does not accept guest accelerators (not from the reference)");
      }
      JsonObject a = accs->getObject(0);
      const std::string type_ref = GetString(a, "acceleratorType").value_or("");
      const AcceleratorDef* def = FindAccelerator(LastSegment(type_ref));
      if (!def || !ZoneHas(*FindZone(zone), def->name)) {
        return Invalid(
            "Invalid value for field 'resource.guestAccelerators[0].acceleratorType': '" +
            type_ref + "'. Accelerator type '" + LastSegment(type_ref) +
            "' does not exist in zone '" + zone + "'.");
      }
      gpu_count = static_cast<int>(GetInt(a, "acceleratorCount").value_or(1));
      if (gpu_count < 1 || gpu_count > def->max_cards) {
        return Invalid(
            "Invalid value for field 'resource.guestAccelerators[0].acceleratorCount': '" +
            std::to_string(gpu_count) + "'. (not from the reference)");
      }
      accelerator = def->name;
    }
    JsonObject scheduling = GetObject(body, "scheduling");
    if (!accelerator.empty() &&
        GetString(scheduling, "onHostMaintenance").value_or("MIGRATE") != "TERMINATE") {
      return Error(400, "badRequest",
                   "Instances with guest accelerators do not support live migration.");
    }
    if (auto bad = CheckScheduling(scheduling)) return *bad;
    JsonArray disks = GetArray(body, "disks");
    JsonObject boot;
    for (size_t i = 0; disks && i < disks->size(); ++i) {
      JsonObject d = disks->getObject(static_cast<unsigned>(i));
      if (d && GetBool(d, "boot").value_or(false)) boot = d;
    }
    if (!boot) {
      return Invalid(
          "Invalid value for field 'resource.disks': ''. Boot disk must be specified. "
          "(not from the reference)");
    }
    JsonObject init = GetObject(boot, "initializeParams");
    // initializeParams.diskType: full or partial URL; absent means pd-standard (compute v1
    // discovery document, schema AttachedDiskInitializeParams.diskType).
    const std::string disk_type_ref = GetString(init, "diskType").value_or("");
    const std::string disk_type = disk_type_ref.empty() ? "pd-standard" : LastSegment(disk_type_ref);
    if (!IsDiskType(disk_type)) {
      return Invalid("Invalid value for field 'resource.disks[0].initializeParams.diskType': '" +
                     disk_type_ref + "'. The referenced diskType resource cannot be found.");
    }
    // A3 Ultra (a3-ultragpu-*), A4 (a4-*) and N4 take Hyperdisk only: "a3-ultragpu, n4, and
    // a4 instances only support hyperdisk-balanced" (skypilot-org/skypilot
    // sky/clouds/gcp.py `_get_disk_type`; Google's machine series pages list no Persistent
    // Disk for them). The wording is GCE's answer for a disk type the machine series does not
    // support, from general knowledge, not from a published source.
    if (HyperdiskOnly(mt->name) && disk_type.rfind("pd-", 0) == 0) {
      return Invalid("[" + disk_type + "] features are not compatible for creating instance.");
    }
    const std::string image_ref = GetString(init, "sourceImage").value_or("");
    const ImageDef* image = ResolveImage(image_ref, project_);
    if (!image) {
      std::string shown = image_ref;
      if (size_t p = shown.find("projects/"); p != std::string::npos) shown = shown.substr(p);
      return NotFound(shown.empty() ? "sourceImage" : shown);
    }
    int64_t disk_gb = 10;
    if (init && !IsNullOrAbsent(init, "diskSizeGb")) {
      try {
        disk_gb = init->get("diskSizeGb").convert<int64_t>();
      } catch (const Poco::Exception&) {
        return Invalid("Invalid value for field 'resource.disks[0].initializeParams.diskSizeGb'.");
      }
    }
    JsonArray nics = GetArray(body, "networkInterfaces");
    if (!nics || nics->size() == 0) {
      return Invalid(
          "Invalid value for field 'resource.networkInterfaces': ''. At least one network "
          "interface is required. (not from the reference)");
    }
    const std::string network =
        GetString(nics->getObject(0), "network").value_or("global/networks/default");
    if (LastSegment(network) != "default") {
      return NotFound("projects/" + project_ + "/global/networks/" + LastSegment(network));
    }
    JsonArray items = GetArray(GetObject(body, "metadata"), "items");
    size_t total = 0;
    std::set<std::string> keys;
    static const std::regex key_re("^[a-zA-Z0-9_-]{1,127}$");
    std::string user_data, ssh_user;
    std::vector<std::string> ssh_keys;
    for (size_t i = 0; items && i < items->size(); ++i) {
      JsonObject it = items->getObject(static_cast<unsigned>(i));
      const std::string key = GetString(it, "key").value_or("");
      const std::string value = GetString(it, "value").value_or("");
      if (!std::regex_match(key, key_re)) {
        return Invalid("Invalid value for field 'resource.metadata.items[" + std::to_string(i) +
                       "].key': '" + key + "'. Must be a match of regex '[a-zA-Z0-9-_]{1,128}'");
      }
      if (!keys.insert(key).second) {
        return Invalid("Invalid value for field 'resource.metadata': Duplicate metadata key '" +
                       key + "' (not from the reference)");
      }
      if (value.size() > kMaxMetadataValue) {
        return Invalid("Invalid value for field 'resource.metadata.items[" + std::to_string(i) +
                       "].value': value exceeds 262144 bytes (not from the reference)");
      }
      total += key.size() + value.size();
      if (key == "user-data") user_data = value;
      if (key == "ssh-keys" || key == "sshKeys") {
        std::istringstream lines(value);
        for (std::string line; std::getline(lines, line);) {
          size_t colon = line.find(':');
          if (colon == std::string::npos || colon == 0) continue;
          if (ssh_user.empty()) ssh_user = line.substr(0, colon);
          std::istringstream words(line.substr(colon + 1));
          std::string type, blob, comment;
          words >> type >> blob >> comment;
          if (!type.empty() && !blob.empty())
            ssh_keys.push_back(type + " " + blob + (comment.empty() ? "" : " " + comment));
        }
      }
    }
    if (total >= kMaxMetadataTotal) {
      return Invalid(
          "Invalid value for field 'resource.metadata': metadata exceeds 512 KB in total "
          "(not from the reference)");
    }
    JsonObject labels = GetObject(body, "labels");
    static const std::regex label_key("^[a-z][a-z0-9_-]{0,62}$");
    static const std::regex label_value("^[a-z0-9_-]{0,63}$");
    if (labels) {
      if (labels->size() > 64)
        return Invalid("Invalid value for field 'resource.labels': at most 64 labels");
      for (const auto& [k, v] : *labels) {
        const std::string value = v.isString() ? v.convert<std::string>() : "?";
        if (!std::regex_match(k, label_key) || !std::regex_match(value, label_value)) {
          return Invalid("Invalid value for field 'resource.labels': '" + k +
                         "'. Label keys and "
                         "values may contain only lowercase letters, digits, '_' and '-' (not from "
                         "the reference)");
        }
      }
    }
    std::vector<std::string> tags;
    if (JsonArray t = GetArray(GetObject(body, "tags"), "items")) {
      for (size_t i = 0; i < t->size(); ++i) {
        std::string tag = t->get(i).toString();
        if (!std::regex_match(tag, NameRe())) {
          return Invalid("Invalid value for field 'resource.tags.items[" + std::to_string(i) +
                         "]': '" + tag +
                         "'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'");
        }
        tags.push_back(tag);
      }
    }
    // enable-oslogin (instance metadata; the project sets none): TRUE turns OS Login on.
    bool os_login = false;
    bool os_login_off = false;
    for (size_t i = 0; items && i < items->size(); ++i) {
      JsonObject it = items->getObject(static_cast<unsigned>(i));
      if (GetString(it, "key").value_or("") != "enable-oslogin") continue;
      std::string v = GetString(it, "value").value_or("");
      std::transform(v.begin(), v.end(), v.begin(), ::toupper);
      os_login = v == "TRUE";
      os_login_off = v == "FALSE";
    }
    if (!os_login_policy_.empty()) {
      // Organization policy constraints/compute.requireOsLogin: "prevents metadata updates
      // that disable OS Login at the project or instance level" (Google's list of
      // organization policy constraints). The 412 conditionNotMet shape is the one Compute
      // Engine gives for other violated constraints (compute.vmExternalIpAccess); the
      // wording is not from a published source.
      if (os_login_policy_ == "refuse" && os_login_off) {
        return Error(412, "conditionNotMet",
                     "Constraint constraints/compute.requireOsLogin violated for project " +
                         project_ + ". OS Login cannot be disabled on instance 'projects/" +
                         project_ + "/zones/" + zone + "/instances/" + name + "'.");
      }
      os_login = true;
    }
    // Faults after validation, as the real API checks the body first.
    const AcceleratorDef* acc = FindAccelerator(accelerator);
    const std::string quota_metric = acc ? acc->quota_metric : "CPUS";
    const std::string quota_message =
        "Quota '" + quota_metric + "' exceeded.  Limit: 0.0 in region " + RegionOfZone(zone) + ".";
    std::optional<Fault> quota = faults_.Take("quota", req.method, req.path);
    if (quota && quota->status == 403) {
      return Error(403, "quotaExceeded", quota_message, "usageLimits");
    }
    std::optional<Fault> capacity_fault = faults_.Take("capacity", req.method, req.path, req.body);
    const bool capacity = capacity_fault.has_value();
    // "value" picks the operation error code (capacity_code below).
    const std::string capacity_code = capacity ? capacity_fault->value : "";
    if (capacity && !capacity_code.empty() && capacity_code != "insufficientCapacity" &&
        capacity_code != "RESOURCE_OPERATION_RATE_EXCEEDED" &&
        capacity_code != "ZONE_RESOURCE_POOL_EXHAUSTED") {
      return Error(500, "backendError",
                   "emulator: fault capacity takes value \"\", \"ZONE_RESOURCE_POOL_EXHAUSTED\", "
                   "\"insufficientCapacity\" or \"RESOURCE_OPERATION_RATE_EXCEEDED\"");
    }

    Instance inst;
    inst.id = 6000000000000000000ULL + next_id_++;
    inst.name = name;
    inst.zone = zone;
    inst.machine_type = mt->name;
    // As Compute Engine returns them: the accelerator type as a full URL, and for the machine
    // types that come with their GPUs (G2, A2, A3, A4) the GPUs they carry, also when the
    // insert named none (compute v1 discovery document, Instance.guestAccelerators and
    // AcceleratorConfig.acceleratorType).
    if (!accelerator.empty()) {
      JsonArray ga = NewArray();
      JsonObject a = NewObject();
      a->set("acceleratorType", Link("zones/" + zone + "/acceleratorTypes/" + accelerator));
      a->set("acceleratorCount", gpu_count);
      ga->add(a);
      inst.guest_accelerators = ga;
    }
    inst.labels = labels;
    inst.tags = tags;
    inst.metadata_items = items;
    inst.scheduling = SchedulingWithDefaults(scheduling);
    inst.source_image =
        kSelfLinkBase + std::string(image->project) + "/global/images/" + image->name;
    inst.disk_gb = disk_gb;
    inst.disk_type = disk_type;
    inst.network = network;
    inst.created = SysClock::now();
    inst.created_steady = Clock::now();
    inst.os_login = os_login;
    Operation& op = NewOperation(zone, "insert", InstanceLink(inst), inst.id);
    op.status = "PENDING";
    inst.insert_op = op.name;
    if (!request_id.empty()) request_ids_[request_id] = op.name;
    if (quota) {
      // Quota in the operation (plugins/gcp/REFERENCE.md §8); the instance never appears.
      Finish(op, "QUOTA_EXCEEDED", quota_message, 403);
      return JsonResponse(200, OperationJson(op));
    }
    if (capacity) {
      // Visible for a moment as PROVISIONING, then gone with the operation's error.
      inst.capacity_fail_at = Clock::now() + kCapacityFailAfter;
      inst.capacity_code = capacity_code;
    } else {
      InstanceSpec spec;
      spec.cloud = name_;
      spec.name = name;
      spec.image = image->name;
      if (acc) {
        spec.gpu_type = acc->testvm_gpu;
        spec.gpu_count = gpu_count;
      }
      spec.user_data = user_data;
      // With OS Login on, the guest ignores the ssh-keys metadata: no key reaches the VM.
      if (!os_login) spec.ssh_public_keys = ssh_keys;
      spec.ssh_user = ssh_user.empty() ? "root" : ssh_user;
      spec.reachable = ReachableOf(tags);
      // Every instance of a network reaches the others on their internal addresses, as the
      // network's firewall rules allow (PrivateIngressOf).
      spec.private_network = LastSegment(network);
      spec.faults = faults_.TakeBootFaults();
      try {
        inst.backend_id = backend_->Create(spec);
      } catch (const BackendError& e) {
        operations_.erase(op.name);
        return Error(503, "backendError", std::string("emulator backend: ") + e.what());
      }
    }
    JsonObject response = OperationJson(op);
    instances_[zone + "/" + name] = inst;
    return JsonResponse(200, response);
  }

  HttpResponse DeleteInstance(const HttpRequest& req, Instance& inst) {
    const std::string request_id = req.Query("requestId").value_or("");
    if (!request_id.empty()) {
      auto it = request_ids_.find(request_id);
      if (it != request_ids_.end() && operations_.count(it->second)) {
        return JsonResponse(200, OperationJson(operations_.at(it->second)));
      }
    }
    if (inst.deleting_since)
      return JsonResponse(200, OperationJson(operations_.at(inst.delete_op)));
    Operation& op = NewOperation(inst.zone, "delete", InstanceLink(inst), inst.id);
    if (!request_id.empty()) request_ids_[request_id] = op.name;
    inst.deleting_since = Clock::now();
    inst.delete_op = op.name;
    if (!inst.backend_id.empty()) backend_->Delete(inst.backend_id);
    if (auto ins = operations_.find(inst.insert_op); ins != operations_.end()) {
      Finish(ins->second, "RESOURCE_NOT_FOUND",
             "The resource '" + InstanceLink(inst) + "' was not found", 404);
    }
    return JsonResponse(200, OperationJson(op));
  }

  // instances.stop / instances.start (Compute API reference: both return a zone Operation;
  // stopping a TERMINATED instance or starting a RUNNING one changes nothing). The ephemeral
  // external IP is released at stop and a new one given at start: "If you stop or suspend an
  // instance, any ephemeral external IPv4 addresses ... are released"
  // (https://cloud.google.com/compute/docs/ip-addresses#ephemeraladdress); the emulator has no
  // static addresses. The operation is DONE once the backend has the request.
  HttpResponse StopOrStartInstance(Instance& inst, const std::string& verb) {
    if (inst.deleting_since || inst.backend_id.empty()) {
      return Error(400, "resourceNotReady",
                   "The resource '" + InstanceLink(inst) + "' is not ready");
    }
    Operation& op = NewOperation(inst.zone, verb, InstanceLink(inst), inst.id);
    if (verb == "stop") {
      backend_->Stop(inst.backend_id);
    } else {
      backend_->Start(inst.backend_id, /*new_address=*/true);
    }
    Finish(op);
    return JsonResponse(200, OperationJson(op));
  }

  // Advances every record with time and the backend's view.
  void Reconcile() {
    const auto now = Clock::now();
    for (auto it = instances_.begin(); it != instances_.end();) {
      Instance& inst = it->second;
      Operation* ins =
          operations_.count(inst.insert_op) ? &operations_.at(inst.insert_op) : nullptr;
      if (ins && ins->status == "PENDING") ins->status = "RUNNING";
      if (inst.deleting_since) {
        if (now - *inst.deleting_since >= kStoppingPhase) {
          if (auto d = operations_.find(inst.delete_op); d != operations_.end()) Finish(d->second);
          it = instances_.erase(it);
          continue;
        }
        ++it;
        continue;
      }
      if (inst.capacity_fail_at) {
        if (now >= *inst.capacity_fail_at) {
          if (ins) FailForCapacity(*ins, inst);
          it = instances_.erase(it);
          continue;
        }
        ++it;
        continue;
      }
      InstanceStatus backend_status;
      const std::string status = StatusOf(inst, &backend_status);
      if (backend_status.preempted) RecordPreemption(inst);
      if (status.empty()) {
        // The machine vanished: the instance is gone (404) and an unfinished insert fails.
        if (ins) {
          Finish(*ins, "RESOURCE_NOT_FOUND",
                 "The resource '" + InstanceLink(inst) + "' was not found", 404);
        }
        backend_->Delete(inst.backend_id);
        it = instances_.erase(it);
        continue;
      }
      if (ins && (status == "RUNNING" || status == "TERMINATED")) Finish(*ins);
      ++it;
    }
    for (auto& [n, op] : operations_) {
      if (op.done_at && now >= *op.done_at) Finish(op);
    }
  }

  void FailForCapacity(Operation& op, const Instance& inst) {
    const std::string zone_link = "projects/" + project_ + "/zones/" + inst.zone;
    if (inst.capacity_code == "ZONE_RESOURCE_POOL_EXHAUSTED") {
      // The code without details (the older form; SkyPilot's _gcp_handler reads both).
      Finish(op, inst.capacity_code,
             "The zone '" + zone_link +
                 "' does not have enough resources available to fulfill the request.  Try a "
                 "different zone, or try again later.",
             503);
      return;
    }
    if (inst.capacity_code == "insufficientCapacity") {
      // Not documented by Google; the code SkyPilot's _gcp_handler
      // (skypilot-org/skypilot sky/backends/cloud_vm_ray_backend.py) treats as a zone out of
      // capacity. Wording not from a published source.
      Finish(op, inst.capacity_code,
             "The zone '" + zone_link + "' does not have enough capacity for the request.",
             503);
      return;
    }
    if (inst.capacity_code == "RESOURCE_OPERATION_RATE_EXCEEDED") {
      // Compute Engine's answer when too many operations hit one resource (its "operation
      // rate" limits; SkyPilot's _gcp_handler blocks the zone on it). Wording not from a
      // published source.
      Finish(op, inst.capacity_code,
             "Operation rate exceeded for resource '" + zone_link + "/instances/" + inst.name +
                 "'. Too frequent operations from the source resource.",
             403);
      return;
    }
    std::vector<std::string> others;
    for (const auto& z : Zones()) {
      if (RegionOfZone(z.name) == RegionOfZone(inst.zone) && inst.zone != z.name) {
        const std::string acc = GpuAccelerator(inst);
        if (acc.empty() || ZoneHas(z, acc)) others.push_back(z.name);
      }
    }
    std::string available;
    for (const auto& z : others) available += (available.empty() ? "" : ",") + z;
    JsonObject meta = NewObject();
    meta->set("zone", inst.zone);
    meta->set("vmType", inst.machine_type);
    if (!available.empty()) meta->set("zonesAvailable", available);
    JsonObject info = NewObject();
    info->set("reason", std::string("resource_availability"));
    info->set("domain", std::string("compute.googleapis.com"));
    info->set("metadatas", meta);
    JsonObject d1 = NewObject();
    d1->set("errorInfo", info);
    JsonObject help = NewObject();
    JsonArray links = NewArray();
    JsonObject link = NewObject();
    link->set("description", std::string("Troubleshooting documentation"));
    link->set("url", std::string("https://cloud.google.com/compute/docs/resource-error"));
    links->add(link);
    help->set("links", links);
    JsonObject d2 = NewObject();
    d2->set("help", help);
    JsonArray details = NewArray();
    details->add(d1);
    details->add(d2);
    Finish(op, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
           "The zone 'projects/" + project_ + "/zones/" + inst.zone +
               "' does not have enough resources available to fulfill the request.  '(resource "
               "type:compute)'.",
           503, details);
  }

  // --- firewalls (plugins/gcp/REFERENCE.md §5) ---
  static std::string CheckFirewall(const JsonObject& f) {
    const std::string name = GetString(f, "name").value_or("");
    if (!std::regex_match(name, NameRe())) {
      return "Invalid value for field 'resource.name': '" + name +
             "'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'";
    }
    const std::string direction = GetString(f, "direction").value_or("INGRESS");
    if (direction != "INGRESS" && direction != "EGRESS") {
      return "Invalid value for field 'resource.direction': '" + direction + "'.";
    }
    JsonArray allowed = GetArray(f, "allowed");
    JsonArray denied = GetArray(f, "denied");
    if ((!allowed || allowed->size() == 0) && (!denied || denied->size() == 0)) {
      return "Invalid value for field 'resource.allowed': ''. At least one allowed or denied rule "
             "is required. (not from the reference)";
    }
    static const std::regex port_re("^[0-9]{1,5}(-[0-9]{1,5})?$");
    for (size_t i = 0; allowed && i < allowed->size(); ++i) {
      JsonObject a = allowed->getObject(static_cast<unsigned>(i));
      const std::string proto = GetString(a, "IPProtocol").value_or("");
      static const std::set<std::string> protos = {"tcp", "udp",  "icmp", "esp",
                                                   "ah",  "sctp", "ipip", "all"};
      if (protos.count(proto) == 0 && !std::regex_match(proto, std::regex("^[0-9]{1,3}$"))) {
        return "Invalid value for field 'resource.allowed[" + std::to_string(i) +
               "].IPProtocol': '" + proto + "'.";
      }
      JsonArray ports = GetArray(a, "ports");
      // Firewall.allowed[].ports: "This field is only applicable for the UDP or TCP protocol.
      // Each entry must be either an integer or a range" (compute v1 Firewall; SCTP takes
      // ports too).
      if (ports && ports->size() > 0 && proto != "tcp" && proto != "udp" && proto != "sctp") {
        return "Invalid value for field 'resource.allowed[" + std::to_string(i) +
               "].ports': ports are only allowed for the tcp, udp and sctp protocols, not '" +
               proto + "'. (wording not from the reference)";
      }
      for (size_t j = 0; ports && j < ports->size(); ++j) {
        const std::string p = ports->get(j).toString();
        const size_t dash = p.find('-');
        const bool in_range =
            std::regex_match(p, port_re) && std::stoi(p.substr(0, dash)) <= 65535 &&
            (dash == std::string::npos || (std::stoi(p.substr(dash + 1)) <= 65535 &&
                                           std::stoi(p.substr(0, dash)) <=
                                               std::stoi(p.substr(dash + 1))));
        if (!in_range) {
          return "Invalid value for field 'resource.allowed[" + std::to_string(i) + "].ports[" +
                 std::to_string(j) + "]': '" + p + "'. Must be a port or port range.";
        }
      }
    }
    static const std::regex cidr_re(
        "^[0-9]{1,3}(\\.[0-9]{1,3}){3}(/[0-9]{1,2})?$|^[0-9a-fA-F:]+(/[0-9]{1,3})?$");
    JsonArray ranges = GetArray(f, "sourceRanges");
    bool v4 = false, v6 = false;
    for (size_t i = 0; ranges && i < ranges->size(); ++i) {
      const std::string r = ranges->get(i).toString();
      if (!std::regex_match(r, cidr_re)) {
        return "Invalid value for field 'resource.sourceRanges[" + std::to_string(i) + "]': '" + r +
               "'. Must be a CIDR address range that is contained in the network.";
      }
      (r.find(':') == std::string::npos ? v4 : v6) = true;
    }
    // "A firewall rule can contain either IPv4 or IPv6 ranges, but not both" (VPC firewall
    // rules documentation, cloud.google.com/firewall/docs/using-firewalls).
    if (v4 && v6) {
      return "Invalid value for field 'resource.sourceRanges': a firewall rule can contain either "
             "IPv4 or IPv6 ranges, but not both. (wording not from the reference)";
    }
    JsonArray targets = GetArray(f, "targetTags");
    for (size_t i = 0; targets && i < targets->size(); ++i) {
      if (!std::regex_match(targets->get(i).toString(), NameRe())) {
        return "Invalid value for field 'resource.targetTags[" + std::to_string(i) + "]'.";
      }
    }
    // Firewall.sourceTags (compute v1): instance tags, RFC 1035 names as targetTags; for
    // INGRESS only ("If sourceTags are specified ... for INGRESS traffic"); not with
    // sourceServiceAccounts, nor targetTags with targetServiceAccounts ("cannot both be set").
    JsonArray source_tags = GetArray(f, "sourceTags");
    for (size_t i = 0; source_tags && i < source_tags->size(); ++i) {
      const std::string tag = source_tags->get(i).toString();
      if (!std::regex_match(tag, NameRe())) {
        return "Invalid value for field 'resource.sourceTags[" + std::to_string(i) + "]': '" +
               tag + "'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'";
      }
    }
    auto set = [&](const char* key) {
      JsonArray a = GetArray(f, key);
      return a && a->size() > 0;
    };
    if (set("sourceTags") && direction != "INGRESS") {
      return "Invalid value for field 'resource.sourceTags': source tags apply to INGRESS rules "
             "only. (wording not from the reference)";
    }
    if (set("sourceTags") && set("sourceServiceAccounts")) {
      return "Invalid value for field 'resource.sourceServiceAccounts': sourceTags and "
             "sourceServiceAccounts cannot both be set. (wording not from the reference)";
    }
    if (set("targetTags") && set("targetServiceAccounts")) {
      return "Invalid value for field 'resource.targetServiceAccounts': targetTags and "
             "targetServiceAccounts cannot both be set. (wording not from the reference)";
    }
    const std::string network = GetString(f, "network").value_or("global/networks/default");
    if (LastSegment(network) != "default") {
      return "Invalid value for field 'resource.network': '" + network +
             "'. The referenced network "
             "resource cannot be found.";
    }
    return "";
  }

  JsonObject FirewallResource(const JsonObject& body, const JsonObject& old) {
    JsonObject r = NewObject();
    r->set("kind", std::string("compute#firewall"));
    r->set("id", old ? GetString(old, "id").value_or("")
                     : std::to_string(7000000000000000000ULL + next_id_++));
    r->set("creationTimestamp",
           old ? GetString(old, "creationTimestamp").value_or("") : Rfc3339Millis(SysClock::now()));
    r->set("name", GetString(body, "name").value_or(""));
    r->set("description", GetString(body, "description").value_or(""));
    r->set("network", Link("global/networks/default"));
    r->set("priority", GetInt(body, "priority").value_or(1000));
    const std::string direction = GetString(body, "direction").value_or("INGRESS");
    r->set("direction", direction);
    JsonArray ranges = GetArray(body, "sourceRanges");
    if (direction == "INGRESS" && (!ranges || ranges->size() == 0) &&
        !GetArray(body, "sourceTags")) {
      ranges = Strings({"0.0.0.0/0"});
    }
    for (const char* k : {"sourceTags", "targetTags", "allowed", "denied", "destinationRanges"}) {
      if (JsonArray a = GetArray(body, k)) r->set(k, a);
    }
    if (ranges) r->set("sourceRanges", ranges);
    JsonObject log = NewObject();
    log->set("enable", false);
    r->set("logConfig", log);
    r->set("disabled", GetBool(body, "disabled").value_or(false));
    r->set("selfLink", Link("global/firewalls/" + GetString(body, "name").value_or("")));
    return r;
  }

  std::optional<HttpResponse> Deduplicated(const HttpRequest& req) {
    const std::string request_id = req.Query("requestId").value_or("");
    if (request_id.empty()) return std::nullopt;
    auto it = request_ids_.find(request_id);
    if (it == request_ids_.end() || !operations_.count(it->second)) return std::nullopt;
    return JsonResponse(200, OperationJson(operations_.at(it->second)));
  }

  HttpResponse GlobalOperation(const HttpRequest& req, const std::string& type,
                               const std::string& target_link, const std::string& id) {
    Operation& op = NewOperation("", type, target_link, std::stoull(id.empty() ? "0" : id));
    op.done_at = Clock::now() + kGlobalOpDuration;
    if (auto rid = req.Query("requestId"); rid && !rid->empty()) request_ids_[*rid] = op.name;
    return JsonResponse(200, OperationJson(op));
  }

  HttpResponse InsertFirewall(const HttpRequest& req) {
    if (auto d = Deduplicated(req)) return *d;
    JsonObject body = ParseObject(req.body);
    if (!body) return Error(400, "parseError", "Invalid JSON payload received.");
    if (auto bad = CheckBody("compute.firewalls.insert", "firewall_resource", body)) return *bad;
    if (auto e = CheckFirewall(body); !e.empty()) return Invalid(e);
    const std::string name = GetString(body, "name").value_or("");
    if (firewalls_.count(name)) {
      return Error(
          409, "alreadyExists",
          "The resource 'projects/" + project_ + "/global/firewalls/" + name + "' already exists");
    }
    JsonObject r = FirewallResource(body, nullptr);
    firewalls_[name] = Firewall{r};
    ApplyFirewalls();
    return GlobalOperation(req, "insert", Link("global/firewalls/" + name),
                           GetString(r, "id").value_or(""));
  }

  HttpResponse UpdateFirewall(const HttpRequest& req, Firewall& f, bool patch) {
    if (auto d = Deduplicated(req)) return *d;
    JsonObject body = ParseObject(req.body);
    if (!body) return Error(400, "parseError", "Invalid JSON payload received.");
    if (auto bad = CheckBody(patch ? "compute.firewalls.patch" : "compute.firewalls.update",
                             "firewall_resource", body)) {
      return *bad;
    }
    JsonObject merged = body;
    if (patch) {
      merged = NewObject();
      for (const auto& [k, v] : *f.resource) merged->set(k, v);
      for (const auto& [k, v] : *body) merged->set(k, v);
    }
    const std::string name = GetString(f.resource, "name").value_or("");
    if (GetString(merged, "name").value_or(name) != name) {
      return Invalid(
          "Invalid value for field 'resource.name': the name cannot change (not from the "
          "reference)");
    }
    merged->set("name", name);
    if (auto e = CheckFirewall(merged); !e.empty()) return Invalid(e);
    f.resource = FirewallResource(merged, f.resource);
    ApplyFirewalls();
    return GlobalOperation(req, patch ? "patch" : "update", Link("global/firewalls/" + name),
                           GetString(f.resource, "id").value_or(""));
  }

  HttpResponse DeleteFirewall(const HttpRequest& req,
                              std::map<std::string, Firewall>::iterator it) {
    if (auto d = Deduplicated(req)) return *d;
    const std::string name = it->first;
    const std::string id = GetString(it->second.resource, "id").value_or("");
    firewalls_.erase(it);
    ApplyFirewalls();
    return GlobalOperation(req, "delete", Link("global/firewalls/" + name), id);
  }

  // --- the service-account key the emulator accepts ---
  void EnsureKey() {
    if (key_) return;
    key_ = std::make_unique<Poco::Crypto::RSAKey>(Poco::Crypto::RSAKey::KL_2048,
                                                  Poco::Crypto::RSAKey::EXP_LARGE);
    Poco::Crypto::EVPPKey evp(key_.get());
    std::ostringstream pub, priv;
    evp.save(&pub, &priv);  // PKCS#8 "BEGIN PRIVATE KEY", as Google's key files
    key_pem_ = priv.str();
    key_id_ = RandomHex(20);
  }

  void LoadKey(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    JsonObject k = ParseObject(text.str());
    const std::string pem = GetString(k, "private_key").value_or("");
    if (!k || GetString(k, "type").value_or("") != "service_account" || pem.empty()) {
      throw std::runtime_error("gcp: " + path +
                               " (GOOGLE_APPLICATION_CREDENTIALS) is not a "
                               "service-account key; name a missing file to have the emulator "
                               "write its own key there");
    }
    std::istringstream pem_stream(pem);
    try {
      key_ = std::make_unique<Poco::Crypto::RSAKey>(nullptr, &pem_stream);
    } catch (const Poco::Exception&) {
      throw std::runtime_error("gcp: the private_key in " + path + " is not an RSA key");
    }
    key_pem_ = pem;
    key_id_ = GetString(k, "private_key_id").value_or("");
    client_email_ = GetString(k, "client_email").value_or(kDefaultEmail);
    project_ = GetString(k, "project_id").value_or(kDefaultProject);
    token_uri_ = GetString(k, "token_uri").value_or("");
  }

  std::mutex mu_;
  std::unique_ptr<Poco::Crypto::RSAKey> key_;
  std::string key_pem_;
  std::string key_id_;
  std::string client_email_ = kDefaultEmail;
  std::string project_ = kDefaultProject;
  std::string token_uri_;
  std::string write_key_to_;
  std::string static_token_;
  int token_lifetime_ = kTokenLifetimeSeconds;
  bool metadata_service_account_ = true;
  // The organization policy constraints/compute.requireOsLogin on the project (settings
  // os_login_policy): "" none; "override": inserts succeed, OS Login is on whatever the
  // instance's enable-oslogin says and its ssh-keys are ignored; "refuse": an insert that
  // turns OS Login off fails. Which of the two Google does is not confirmed
  // (plugins/gcp/REFERENCE.md §F8).
  std::string os_login_policy_;
  std::map<std::string, Clock::time_point> tokens_;
  std::map<std::string, Instance> instances_;  // "zone/name"
  std::map<std::string, Operation> operations_;
  std::map<std::string, std::string> request_ids_;  // requestId -> operation name
  std::map<std::string, Firewall> firewalls_;
  // What each instance's internal address was last told (ApplyPrivateIngress), by backend id.
  std::map<std::string, PrivateIngress> told_ingress_;
  uint64_t next_id_ = 1;
};

}  // namespace

std::unique_ptr<CloudApi> MakeGceApi(InstanceBackend* backend, CloudOptions options) {
  return std::make_unique<GceApi>(backend, std::move(options), Emulator::DefaultToken("gcp"));
}

void GceListening(CloudApi* api, const std::string& base_url) {
  if (auto* gce = dynamic_cast<GceApi*>(api)) gce->Listening(base_url);
}

}  // namespace gpuprov::emulator
