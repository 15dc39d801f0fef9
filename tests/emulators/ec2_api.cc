// SPDX-License-Identifier: Apache-2.0
//
// AWS EC2 Query API (2016-11-15) as described in plugins/aws/REFERENCE.md: form-encoded POST
// (or GET with the parameters in the query) dispatched on Action, XML responses with the real
// element names and namespace, SigV4 verified (access key id and secret from
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY at start), the error codes of
// plugins/aws/REFERENCE.md §8. Every resource is regional: the region is the one in the request's
// credential scope. Instances: pending -> running (ipAddress appears) -> shutting-down ->
// terminated, then listed for a while. Messages the reference does not give are from general
// knowledge of EC2 (README.md lists the simplifications).
#include <Poco/Base64Decoder.h>
#include <Poco/Base64Encoder.h>
#include <Poco/Crypto/DigestEngine.h>
#include <Poco/HMACEngine.h>
#include <Poco/MD5Engine.h>
#include <Poco/URI.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <mutex>
#include <cctype>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>
#include <variant>

#include "cloud_api.h"
#include "ec2_api.h"

namespace gpuprov::emulator {
namespace {

using Clock = std::chrono::steady_clock;
using SysClock = std::chrono::system_clock;
using Params = std::vector<std::pair<std::string, std::string>>;

constexpr const char* kXmlns = "http://ec2.amazonaws.com/doc/2016-11-15/";
constexpr const char* kApiVersion = "2016-11-15";
constexpr const char* kOwnerId = "111122223333";
constexpr size_t kMaxUserData = 16384;  // raw bytes before base64 (plugins/aws/REFERENCE.md §4)
constexpr int kMaxClockSkewSeconds = 15 * 60;
constexpr auto kTerminatedVisibleFor = std::chrono::minutes(10);
constexpr int kMaxInstancesPerRun = 20;

// --- static catalogue ----------------------------------------------------------

const std::vector<std::string>& Regions() {
  static const std::vector<std::string> regions = {
      "us-east-1",      "us-east-2",      "us-west-1",      "us-west-2",
      "ca-central-1",   "eu-west-1",      "eu-west-2",      "eu-west-3",
      "eu-central-1",   "eu-north-1",     "ap-northeast-1", "ap-northeast-2",
      "ap-southeast-1", "ap-southeast-2", "ap-south-1",     "sa-east-1"};
  return regions;
}

bool KnownRegion(const std::string& r) {
  return std::find(Regions().begin(), Regions().end(), r) != Regions().end();
}

struct TypeDef {
  const char* name;
  int vcpus;
  int memory_mib;
  const char* gpu;  // gpuInfo name ("" = none)
  int gpu_count;
  int gpu_memory_mib;                     // per GPU
  const char* testvm_gpu;                 // the test VM's GPU file type
  std::vector<std::string> only_regions;  // empty: offered everywhere
};

const std::vector<TypeDef>& Types() {
  static const std::vector<TypeDef> types = {
      {"t3.micro", 2, 1024, "", 0, 0, "", {}},
      {"t3.medium", 2, 4096, "", 0, 0, "", {}},
      {"m5.large", 2, 8192, "", 0, 0, "", {}},
      {"g4dn.xlarge", 4, 16384, "T4", 1, 15360, "T4", {}},
      {"g4dn.2xlarge", 8, 32768, "T4", 1, 15360, "T4", {}},
      {"g4dn.12xlarge", 48, 196608, "T4", 4, 15360, "T4", {}},
      {"g4dn.metal", 96, 393216, "T4", 8, 15360, "T4", {}},
      {"g5.xlarge", 4, 16384, "A10G", 1, 23028, "A10G", {}},
      {"g5.2xlarge", 8, 32768, "A10G", 1, 23028, "A10G", {}},
      {"g5.12xlarge", 48, 196608, "A10G", 4, 23028, "A10G", {}},
      {"g5.48xlarge", 192, 786432, "A10G", 8, 23028, "A10G", {}},
      {"g6.xlarge", 4, 16384, "L4", 1, 22888, "L4", {}},
      {"g6.2xlarge", 8, 32768, "L4", 1, 22888, "L4", {}},
      {"g6.12xlarge", 48, 196608, "L4", 4, 22888, "L4", {}},
      {"g6.48xlarge", 192, 786432, "L4", 8, 22888, "L4", {}},
      {"g6e.xlarge", 4, 32768, "L40S", 1, 45776, "L40S", {}},
      {"g6e.12xlarge", 48, 393216, "L40S", 4, 45776, "L40S", {}},
      {"g6e.48xlarge", 192, 1572864, "L40S", 8, 45776, "L40S", {}},
      {"p3.2xlarge", 8, 62464, "V100", 1, 16384, "V100", {}},
      {"p3.8xlarge", 32, 249856, "V100", 4, 16384, "V100", {}},
      {"p3.16xlarge", 64, 499712, "V100", 8, 16384, "V100", {}},
      {"p4d.24xlarge", 96, 1179648, "A100", 8, 40960, "A100", {}},
      {"p4de.24xlarge", 96, 1179648, "A100", 8, 81920, "A100-80GB", {"us-east-1", "us-west-2"}},
      {"p5.4xlarge", 16, 262144, "H100", 1, 81920, "H100", {}},
      {"p5.48xlarge", 192, 2097152, "H100", 8, 81920, "H100", {}},
      {"p5e.48xlarge", 192, 2097152, "H200", 8, 144384, "H200", {"us-east-2", "us-west-2"}},
      {"p5en.48xlarge", 192, 2097152, "H200", 8, 144384, "H200", {"us-east-2", "us-west-2"}},
      {"p6-b200.48xlarge", 192, 2097152, "B200", 8, 183359, "B200", {"us-west-2"}},
  };
  return types;
}

const TypeDef* FindType(const std::string& name) {
  for (const auto& t : Types()) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

bool OfferedIn(const TypeDef& t, const std::string& region) {
  return t.only_regions.empty() ||
         std::find(t.only_regions.begin(), t.only_regions.end(), region) != t.only_regions.end();
}

// Public SSM parameters EC2 resolves in RunInstances' ImageId (plugins/aws/REFERENCE.md §3.1, §9).
const std::vector<std::string>& SsmImageParameters() {
  static const std::vector<std::string> params = {
      "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
      "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id",
      "/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id",
      "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"};
  return params;
}

std::string Md5Hex(const std::string& s) {
  Poco::MD5Engine md5;
  md5.update(s);
  return Poco::DigestEngine::digestToHex(md5.digest());
}

// The AMI a parameter resolves to in a region: "ami-" + 17 hex, stable for the pair.
std::string AmiFor(const std::string& parameter, const std::string& region) {
  return "ami-0" + Md5Hex(parameter + "|" + region).substr(0, 16);
}

// --- crypto for SigV4 (an implementation separate from the driver's) -----------

class Sha256Engine : public Poco::Crypto::DigestEngine {
 public:
  enum { BLOCK_SIZE = 64, DIGEST_SIZE = 32 };
  Sha256Engine() : Poco::Crypto::DigestEngine("SHA256") {}
};

std::string Sha256Hex(const std::string& data) {
  Sha256Engine e;
  e.update(data);
  return Poco::DigestEngine::digestToHex(e.digest());
}

std::string Hmac(const std::string& key, const std::string& data) {
  Poco::HMACEngine<Sha256Engine> h(key);
  h.update(data);
  const auto& d = h.digest();
  return std::string(d.begin(), d.end());
}

std::string Rfc3986(const std::string& s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// --- XML ------------------------------------------------------------------------

std::string Esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// <tag>escaped text</tag>
std::string L(const std::string& tag, const std::string& text) {
  return "<" + tag + ">" + Esc(text) + "</" + tag + ">";
}
// <tag>inner xml</tag>
std::string E(const std::string& tag, const std::string& inner) {
  return "<" + tag + ">" + inner + "</" + tag + ">";
}

std::string Iso8601(SysClock::time_point t) {
  std::time_t tt = SysClock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
  return buf;
}

HttpResponse Xml(int status, const std::string& root, const std::string& inner) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/xml;charset=UTF-8";
  r.body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<" + root + " xmlns=\"" + kXmlns + "\">" +
           L("requestId", RandomUuid()) + inner + "</" + root + ">";
  return r;
}

// The error document of plugins/aws/REFERENCE.md §8: Response/Errors/Error/{Code,Message},
// RequestID.
HttpResponse Error(int status, const std::string& code, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/xml;charset=UTF-8";
  r.body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error>" +
           L("Code", code) + L("Message", message) + "</Error></Errors>" +
           L("RequestID", RandomUuid()) + "</Response>";
  return r;
}

HttpResponse BadParam(const std::string& message) {
  return Error(400, "InvalidParameterValue", message);
}
HttpResponse Missing(const std::string& name) {
  return Error(400, "MissingParameter", "The request must contain the parameter " + name);
}

// --- STS (Query API, version 2011-06-15) -----------------------------------------

constexpr const char* kStsXmlns = "https://sts.amazonaws.com/doc/2011-06-15/";

// STS's error document: ErrorResponse/Error/{Type,Code,Message}, RequestId.
HttpResponse StsError(int status, const std::string& code, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/xml";
  r.body = std::string("<ErrorResponse xmlns=\"") + kStsXmlns + "\"><Error>" +
           L("Type", status >= 500 ? "Receiver" : "Sender") + L("Code", code) +
           L("Message", message) + "</Error>" + L("RequestId", RandomUuid()) + "</ErrorResponse>";
  return r;
}

HttpResponse StsXml(const std::string& action, const std::string& result_inner) {
  HttpResponse r;
  r.content_type = "text/xml";
  r.body = "<" + action + "Response xmlns=\"" + kStsXmlns + "\"><" + action + "Result>" +
           result_inner + "</" + action + "Result>" +
           E("ResponseMetadata", L("RequestId", RandomUuid())) + "</" + action + "Response>";
  return r;
}

// Upper-case hex of n random characters (for issued keys and tokens).
std::string RandomUpperHex(size_t n) {
  std::string out;
  while (out.size() < n) {
    for (char c : RandomUuid()) {
      if (c != '-' && out.size() < n) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

// --- request parameters ----------------------------------------------------------

// Decodes application/x-www-form-urlencoded ('+' is a space).
Params ParseForm(const std::string& body) {
  Params out;
  for (const auto& pair : Split(body, '&')) {
    size_t eq = pair.find('=');
    std::string k = pair.substr(0, eq), v = eq == std::string::npos ? "" : pair.substr(eq + 1);
    std::replace(k.begin(), k.end(), '+', ' ');
    std::replace(v.begin(), v.end(), '+', ' ');
    std::string dk, dv;
    Poco::URI::decode(k, dk);
    Poco::URI::decode(v, dv);
    out.emplace_back(dk, dv);
  }
  return out;
}

class Args {
 public:
  explicit Args(Params p) : p_(std::move(p)) {}
  std::optional<std::string> Get(const std::string& name) const {
    for (const auto& [k, v] : p_) {
      if (k == name) return v;
    }
    return std::nullopt;
  }
  std::string Str(const std::string& name) const { return Get(name).value_or(""); }
  // Values of prefix.1, prefix.2, ... in index order.
  std::vector<std::string> List(const std::string& prefix) const {
    std::map<long, std::string> by_index;
    const std::string pre = prefix + ".";
    for (const auto& [k, v] : p_) {
      if (k.compare(0, pre.size(), pre) != 0) continue;
      const std::string rest = k.substr(pre.size());
      if (rest.empty() || !std::all_of(rest.begin(), rest.end(), ::isdigit)) continue;
      by_index[std::stol(rest)] = v;
    }
    std::vector<std::string> out;
    for (auto& [i, v] : by_index) out.push_back(v);
    return out;
  }
  // Indexes N present as prefix.N.<anything>, sorted.
  std::vector<std::string> Indexes(const std::string& prefix) const {
    std::set<long> idx;
    const std::string pre = prefix + ".";
    for (const auto& [k, v] : p_) {
      if (k.compare(0, pre.size(), pre) != 0) continue;
      const std::string rest = k.substr(pre.size());
      size_t dot = rest.find('.');
      const std::string n = rest.substr(0, dot);
      if (!n.empty() && dot != std::string::npos && std::all_of(n.begin(), n.end(), ::isdigit)) {
        idx.insert(std::stol(n));
      }
    }
    std::vector<std::string> out;
    for (long i : idx) out.push_back(prefix + "." + std::to_string(i));
    return out;
  }
  // Every parameter except the listed ones, sorted: what a ClientToken reuse must match.
  std::string Fingerprint(const std::set<std::string>& except) const {
    Params copy;
    for (const auto& kv : p_) {
      if (!except.count(kv.first)) copy.push_back(kv);
    }
    std::sort(copy.begin(), copy.end());
    std::string s;
    for (const auto& [k, v] : copy) s += k + "=" + v + "&";
    return s;
  }
  bool Bool(const std::string& name) const { return Lower(Str(name)) == "true"; }

 private:
  Params p_;
};

struct Filter {
  std::string name;
  std::vector<std::string> values;
};

std::vector<Filter> Filters(const Args& a) {
  std::vector<Filter> out;
  for (const auto& f : a.Indexes("Filter")) {
    out.push_back(Filter{a.Str(f + ".Name"), a.List(f + ".Value")});
  }
  return out;
}

// EC2 filter values accept * and ? wildcards.
bool Glob(const std::string& pattern, const std::string& text) {
  std::string re;
  for (char c : pattern) {
    if (c == '*') {
      re += ".*";
    } else if (c == '?') {
      re += '.';
    } else if (std::isalnum(static_cast<unsigned char>(c))) {
      re += c;
    } else {
      re += '\\';
      re += c;
    }
  }
  return std::regex_match(text, std::regex(re));
}

bool AnyMatch(const std::vector<std::string>& patterns, const std::string& value) {
  for (const auto& p : patterns) {
    if (Glob(p, value)) return true;
  }
  return false;
}

using Tags = std::vector<std::pair<std::string, std::string>>;

std::string TagSetXml(const Tags& tags) {
  std::string items;
  for (const auto& [k, v] : tags) items += E("item", L("key", k) + L("value", v));
  return E("tagSet", items);
}

void SetTag(Tags& tags, const std::string& k, const std::string& v) {
  for (auto& t : tags) {
    if (t.first == k) {
      t.second = v;
      return;
    }
  }
  tags.emplace_back(k, v);
}

// tag:<k>, tag-key, tag-value filters; nullopt when the filter is not a tag filter.
std::optional<bool> TagFilter(const Filter& f, const Tags& tags) {
  if (f.name.rfind("tag:", 0) == 0) {
    const std::string key = f.name.substr(4);
    for (const auto& [k, v] : tags) {
      if (k == key && AnyMatch(f.values, v)) return true;
    }
    return false;
  }
  if (f.name == "tag-key") {
    for (const auto& t : tags) {
      if (AnyMatch(f.values, t.first)) return true;
    }
    return false;
  }
  if (f.name == "tag-value") {
    for (const auto& t : tags) {
      if (AnyMatch(f.values, t.second)) return true;
    }
    return false;
  }
  return std::nullopt;
}

std::optional<std::string> Base64Decode(const std::string& s) {
  // A loop, not std::regex: libstdc++'s regex recurses once per character, and a 20 KB body
  // overflowed the server thread's stack (found by the ASan build of ec2_api_test).
  size_t end = s.size(), pad = 0;
  while (end > 0 && s[end - 1] == '=' && pad < 2) --end, ++pad;
  for (size_t i = 0; i < end; ++i) {
    const char c = s[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '/' && c != '\r' &&
        c != '\n') {
      return std::nullopt;
    }
  }
  try {
    std::istringstream in(s);
    Poco::Base64Decoder dec(in);
    return std::string(std::istreambuf_iterator<char>(dec), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string Base64Encode(const std::string& s) {
  std::ostringstream out;
  Poco::Base64Encoder enc(out);
  enc.rdbuf()->setLineLength(0);
  enc << s;
  enc.close();
  return out.str();
}

// The OpenSSH key blob of "type base64 [comment]" when the blob names its own type. Only RSA
// and ED25519: EC2 API reference, ImportKeyPair ("Imports the public key from an RSA or
// ED25519 key pair"); ECDSA and others get InvalidKey.Format there.
std::optional<std::pair<std::string, std::string>> OpenSshKey(const std::string& line) {
  std::istringstream in(line);
  std::string type, b64;
  if (!(in >> type >> b64)) return std::nullopt;
  static const std::set<std::string> types = {"ssh-rsa", "ssh-ed25519"};
  if (!types.count(type)) return std::nullopt;
  auto blob = Base64Decode(b64);
  if (!blob || blob->size() < 4 + type.size()) return std::nullopt;
  uint32_t n = (static_cast<uint8_t>((*blob)[0]) << 24) | (static_cast<uint8_t>((*blob)[1]) << 16) |
               (static_cast<uint8_t>((*blob)[2]) << 8) | static_cast<uint8_t>((*blob)[3]);
  if (n != type.size() || blob->compare(4, n, type) != 0) return std::nullopt;
  return std::make_pair(type, *blob);
}

// --- request parameters of each action (EC2 API model) -----------------------------

// Transcribed from the EC2 API model, botocore's data/ec2/2016-11-15/service-2.json as Debian's
// awscli 2.9.19 ships it (/usr/lib/python3/dist-packages/awscli/botocore/data/ec2/2016-11-15/):
// per action the members of its input shape as the EC2 protocol serializes them (queryName,
// else locationName with its first letter upper-cased, else the member name; lists flattened
// as Name.N), with their types, and "Name!" for each member the shape lists as required. Every
// parameter of the model is here, also those the emulator does not act on (real EC2 accepts
// them), so what the emulator refuses as UnknownParameter is what EC2 refuses.
// ec2_api_test (Ec2ApiModel.*) reads that file at run time and checks this table against it.
// The members AuthorizeSecurityGroupIngress and RevokeSecurityGroupIngress share.
#define GPUPROV_EC2_INGRESS_PARAMS                                                                           \
  "CidrIp:s FromPort:i GroupId:s GroupName:s IpPermissions.N.FromPort:i "                         \
  "IpPermissions.N.IpProtocol:s IpPermissions.N.IpRanges.N.CidrIp:s "                             \
  "IpPermissions.N.IpRanges.N.Description:s IpPermissions.N.Ipv6Ranges.N.CidrIpv6:s "             \
  "IpPermissions.N.Ipv6Ranges.N.Description:s IpPermissions.N.PrefixListIds.N.Description:s "     \
  "IpPermissions.N.PrefixListIds.N.PrefixListId:s IpPermissions.N.ToPort:i "                      \
  "IpPermissions.N.Groups.N.Description:s IpPermissions.N.Groups.N.GroupId:s "                    \
  "IpPermissions.N.Groups.N.GroupName:s IpPermissions.N.Groups.N.PeeringStatus:s "                \
  "IpPermissions.N.Groups.N.UserId:s IpPermissions.N.Groups.N.VpcId:s "                           \
  "IpPermissions.N.Groups.N.VpcPeeringConnectionId:s IpProtocol:s SourceSecurityGroupName:s "     \
  "SourceSecurityGroupOwnerId:s ToPort:i DryRun:b "

const std::vector<std::pair<std::string, std::string>>& ShapeSource() {
  static const std::vector<std::pair<std::string, std::string>> source = {
      {"AuthorizeSecurityGroupIngress",
       GPUPROV_EC2_INGRESS_PARAMS "TagSpecification.N.ResourceType:s "
       "TagSpecification.N.Tag.N.Key:s TagSpecification.N.Tag.N.Value:s"},
      {"CreateSecurityGroup",
       "GroupDescription:s GroupDescription! GroupName:s GroupName! VpcId:s "
       "TagSpecification.N.ResourceType:s TagSpecification.N.Tag.N.Key:s "
       "TagSpecification.N.Tag.N.Value:s DryRun:b"},
      {"CreateTags",
       "DryRun:b ResourceId.N:s ResourceId! Tag.N.Key:s Tag.N.Value:s Tag!"},
      {"DeleteKeyPair",
       "KeyName:s KeyPairId:s DryRun:b"},
      {"DeleteSecurityGroup",
       "GroupId:s GroupName:s DryRun:b"},
      {"DescribeAddresses",
       "Filter.N.Name:s Filter.N.Value.N:s PublicIp.N:s AllocationId.N:s DryRun:b"},
      {"DescribeAvailabilityZones",
       "Filter.N.Name:s Filter.N.Value.N:s ZoneName.N:s ZoneId.N:s AllAvailabilityZones:b "
       "DryRun:b"},
      {"DescribeInstanceTypeOfferings",
       "DryRun:b LocationType:s Filter.N.Name:s Filter.N.Value.N:s MaxResults:i NextToken:s"},
      {"DescribeInstanceTypes",
       "DryRun:b InstanceType.N:s Filter.N.Name:s Filter.N.Value.N:s MaxResults:i NextToken:s"},
      {"DescribeInstances",
       "Filter.N.Name:s Filter.N.Value.N:s InstanceId.N:s DryRun:b MaxResults:i NextToken:s"},
      {"DescribeKeyPairs",
       "Filter.N.Name:s Filter.N.Value.N:s KeyName.N:s KeyPairId.N:s DryRun:b IncludePublicKey:b"},
      {"DescribeRegions",
       "Filter.N.Name:s Filter.N.Value.N:s RegionName.N:s DryRun:b AllRegions:b"},
      {"DescribeSecurityGroups",
       "Filter.N.Name:s Filter.N.Value.N:s GroupId.N:s GroupName.N:s DryRun:b NextToken:s "
       "MaxResults:i"},
      {"DescribeSpotPriceHistory",
       "Filter.N.Name:s Filter.N.Value.N:s AvailabilityZone:s DryRun:b EndTime:t "
       "InstanceType.N:s MaxResults:i NextToken:s ProductDescription.N:s StartTime:t"},
      {"DescribeSubnets",
       "Filter.N.Name:s Filter.N.Value.N:s SubnetId.N:s DryRun:b NextToken:s MaxResults:i"},
      {"DescribeVpcs",
       "Filter.N.Name:s Filter.N.Value.N:s VpcId.N:s DryRun:b NextToken:s MaxResults:i"},
      {"ImportKeyPair",
       "DryRun:b KeyName:s KeyName! PublicKeyMaterial:B PublicKeyMaterial! "
       "TagSpecification.N.ResourceType:s TagSpecification.N.Tag.N.Key:s "
       "TagSpecification.N.Tag.N.Value:s"},
      {"RevokeSecurityGroupIngress",
       GPUPROV_EC2_INGRESS_PARAMS "SecurityGroupRuleId.N:s"},
      {"RunInstances",
       "BlockDeviceMapping.N.DeviceName:s BlockDeviceMapping.N.VirtualName:s "
       "BlockDeviceMapping.N.Ebs.DeleteOnTermination:b BlockDeviceMapping.N.Ebs.Iops:i "
       "BlockDeviceMapping.N.Ebs.SnapshotId:s BlockDeviceMapping.N.Ebs.VolumeSize:i "
       "BlockDeviceMapping.N.Ebs.VolumeType:s BlockDeviceMapping.N.Ebs.KmsKeyId:s "
       "BlockDeviceMapping.N.Ebs.Throughput:i BlockDeviceMapping.N.Ebs.OutpostArn:s "
       "BlockDeviceMapping.N.Ebs.Encrypted:b BlockDeviceMapping.N.NoDevice:s ImageId:s "
       "InstanceType:s Ipv6AddressCount:i Ipv6Address.N.Ipv6Address:s KernelId:s KeyName:s "
       "MaxCount:i MaxCount! MinCount:i MinCount! Monitoring.Enabled:b "
       "Placement.AvailabilityZone:s Placement.Affinity:s Placement.GroupName:s "
       "Placement.PartitionNumber:i Placement.HostId:s Placement.Tenancy:s "
       "Placement.SpreadDomain:s Placement.HostResourceGroupArn:s Placement.GroupId:s "
       "RamdiskId:s SecurityGroupId.N:s SecurityGroup.N:s SubnetId:s UserData:s AdditionalInfo:s "
       "ClientToken:s DisableApiTermination:b DryRun:b EbsOptimized:b IamInstanceProfile.Arn:s "
       "IamInstanceProfile.Name:s InstanceInitiatedShutdownBehavior:s "
       "NetworkInterface.N.AssociatePublicIpAddress:b NetworkInterface.N.DeleteOnTermination:b "
       "NetworkInterface.N.Description:s NetworkInterface.N.DeviceIndex:i "
       "NetworkInterface.N.SecurityGroupId.N:s NetworkInterface.N.Ipv6AddressCount:i "
       "NetworkInterface.N.Ipv6Addresses.N.Ipv6Address:s NetworkInterface.N.NetworkInterfaceId:s "
       "NetworkInterface.N.PrivateIpAddress:s NetworkInterface.N.PrivateIpAddresses.N.Primary:b "
       "NetworkInterface.N.PrivateIpAddresses.N.PrivateIpAddress:s "
       "NetworkInterface.N.SecondaryPrivateIpAddressCount:i NetworkInterface.N.SubnetId:s "
       "NetworkInterface.N.AssociateCarrierIpAddress:b NetworkInterface.N.InterfaceType:s "
       "NetworkInterface.N.NetworkCardIndex:i NetworkInterface.N.Ipv4Prefix.N.Ipv4Prefix:s "
       "NetworkInterface.N.Ipv4PrefixCount:i NetworkInterface.N.Ipv6Prefix.N.Ipv6Prefix:s "
       "NetworkInterface.N.Ipv6PrefixCount:i PrivateIpAddress:s ElasticGpuSpecification.N.Type:s "
       "ElasticInferenceAccelerator.N.Type:s ElasticInferenceAccelerator.N.Count:i "
       "TagSpecification.N.ResourceType:s TagSpecification.N.Tag.N.Key:s "
       "TagSpecification.N.Tag.N.Value:s LaunchTemplate.LaunchTemplateId:s "
       "LaunchTemplate.LaunchTemplateName:s LaunchTemplate.Version:s "
       "InstanceMarketOptions.MarketType:s InstanceMarketOptions.SpotOptions.MaxPrice:s "
       "InstanceMarketOptions.SpotOptions.SpotInstanceType:s "
       "InstanceMarketOptions.SpotOptions.BlockDurationMinutes:i "
       "InstanceMarketOptions.SpotOptions.ValidUntil:t "
       "InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior:s "
       "CreditSpecification.CpuCredits:s CpuOptions.CoreCount:i CpuOptions.ThreadsPerCore:i "
       "CapacityReservationSpecification.CapacityReservationPreference:s "
       "CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId:s "
       "CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationResourceGroupArn:s "
       "HibernationOptions.Configured:b LicenseSpecification.N.LicenseConfigurationArn:s "
       "MetadataOptions.HttpTokens:s MetadataOptions.HttpPutResponseHopLimit:i "
       "MetadataOptions.HttpEndpoint:s MetadataOptions.HttpProtocolIpv6:s "
       "MetadataOptions.InstanceMetadataTags:s EnclaveOptions.Enabled:b "
       "PrivateDnsNameOptions.HostnameType:s "
       "PrivateDnsNameOptions.EnableResourceNameDnsARecord:b "
       "PrivateDnsNameOptions.EnableResourceNameDnsAAAARecord:b "
       "MaintenanceOptions.AutoRecovery:s DisableApiStop:b"},
      {"TerminateInstances",
       "InstanceId.N:s InstanceId! DryRun:b"},
      {"StopInstances",
       "InstanceId.N:s InstanceId! Hibernate:b DryRun:b Force:b"},
      {"StartInstances",
       "InstanceId.N:s InstanceId! AdditionalInfo:s DryRun:b"},
  };
  return source;
}
#undef GPUPROV_EC2_INGRESS_PARAMS

// --- the API ------------------------------------------------------------------------

class Ec2Api : public CloudApi {
 public:
  Ec2Api(InstanceBackend* backend, CloudOptions options)
      : CloudApi("aws", backend, std::move(options)) {
    // Credentials come in pairs (access key id, secret); a single value is both.
    const auto& t = options_.tokens;
    if (t.size() == 1) {
      secrets_[t[0]] = t[0];
    } else {
      for (size_t i = 0; i + 1 < t.size(); i += 2) secrets_[t[i]] = t[i + 1];
    }
  }

  std::string BasePath() const override { return ""; }

  JsonObject Counts() override {
    std::lock_guard<std::mutex> lock(mu_);
    RefreshAll();
    size_t live = 0, groups = 0;
    for (const auto& [id, i] : instances_) live += i.phase != Phase::kTerminated;
    for (const auto& [id, g] : groups_) groups += !g.is_default;
    JsonObject o = NewObject();
    o->set("instances", live);
    o->set("firewalls", groups);
    o->set("ssh_keys", keys_.size());
    o->set("backend_instances", backend_->LiveCount(name_));
    o->set("credentials_issued", issued_);
    return o;
  }

  JsonArray Instances() override {
    std::lock_guard<std::mutex> lock(mu_);
    RefreshAll();
    JsonArray a = NewArray();
    for (const auto& [id, i] : instances_) {
      if (i.phase == Phase::kTerminated) continue;
      a->add(InstanceRow(id, TagValue(i.tags, "Name"), i.backend_id));
    }
    return a;
  }

  void Reset() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, i] : instances_) backend_->Delete(i.backend_id);
    instances_.clear();
    told_ingress_.clear();
    reservations_.clear();
    keys_.clear();
    groups_.clear();
    faults_.Clear();
    describe_not_found_ = 0;
    shutdown_seconds_ = 1.0;
    default_vpc_ = true;
    for (const auto& [key, session] : session_tokens_) secrets_.erase(key);
    session_tokens_.clear();
    imds_tokens_.clear();
    sso_tokens_ = {"emulator-aws-sso-token"};
    container_token_ = "emulator-aws-container-token";
    instance_role_ = "emulator-instance-role";
    issued_ = 0;
  }

  std::string Configure(const JsonObject& settings) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto n = GetInt(settings, "describe_not_found")) {
      if (*n < 0) return "describe_not_found must be >= 0";
      describe_not_found_ = static_cast<int>(*n);
    }
    if (auto t = GetString(settings, "sso_access_token")) sso_tokens_.insert(*t);
    if (auto t = GetString(settings, "container_authorization_token")) container_token_ = *t;
    if (auto r = GetString(settings, "instance_role")) instance_role_ = *r;
    if (auto s = GetDouble(settings, "shutdown_seconds")) {
      if (*s < 0) return "shutdown_seconds must be >= 0";
      shutdown_seconds_ = *s;
    }
    // An account without a default VPC (deleted, or an organization's account made without
    // one): the default VPC, its subnets and its default group are gone in every region.
    if (auto v = GetBool(settings, "default_vpc")) {
      default_vpc_ = *v;
      if (!default_vpc_) {
        std::erase_if(groups_, [this](const auto& kv) {
          return kv.second.vpc_id == DefaultVpc(kv.second.region);
        });
      }
    }
    return CloudApi::Configure(settings);
  }

 protected:
  enum class Phase { kLive, kShuttingDown, kTerminated };

  struct Rule {
    std::string protocol;  // tcp, udp, icmp, -1
    int from = -1, to = -1;
    std::vector<std::pair<std::string, std::string>> v4;  // cidr, description
    std::vector<std::pair<std::string, std::string>> v6;
    std::vector<std::string> groups;  // source security groups (UserIdGroupPairs): their members
    std::string rule_id;
  };
  struct Group {
    std::string id, name, description, region, vpc_id;
    Tags tags;
    std::vector<Rule> ingress;
    bool is_default = false;
  };
  struct KeyPair {
    std::string id, name, region, fingerprint, type, public_key;
    Tags tags;
    SysClock::time_point created;
  };
  struct Instance {
    std::string id, region, az, reservation_id, type, image_id, key_name, client_token;
    std::string subnet_id, vpc_id;
    bool public_address = true;  // the subnet's mapping, or the interface's request
    std::vector<std::string> group_ids;
    Tags tags;
    std::string backend_id;
    SysClock::time_point launch_time;
    std::string private_ip;
    Phase phase = Phase::kLive;
    Clock::time_point terminate_requested, terminated_at;
    std::string reason_code, reason_message;
    bool backend_deleted = false;
    int not_found_left = 0;
    int ami_launch_index = 0;
    int disk_gb = 0;
    std::string shutdown_behavior = "stop";
    bool stop_requested = false;  // StopInstances since the last start: "stopping", then "stopped"
    bool spot = false;  // InstanceMarketOptions.MarketType=spot: instanceLifecycle "spot"
  };
  struct Reservation {
    std::string id, region, fingerprint;
    std::vector<std::string> instance_ids;
  };

  static std::string TagValue(const Tags& tags, const std::string& key) {
    for (const auto& [k, v] : tags) {
      if (k == key) return v;
    }
    return "";
  }

  // --- authentication (SigV4, plugins/aws/REFERENCE.md §1) ---
  struct AuthParts {
    std::string access_key, date, region, service, signed_headers, signature;
  };

  static std::optional<AuthParts> ParseAuthorization(const std::string& header) {
    const std::string algo = "AWS4-HMAC-SHA256 ";
    if (header.compare(0, algo.size(), algo) != 0) return std::nullopt;
    AuthParts p;
    for (auto part : Split(header.substr(algo.size()), ',')) {
      part = Trim(part);
      size_t eq = part.find('=');
      if (eq == std::string::npos) continue;
      const std::string k = part.substr(0, eq), v = part.substr(eq + 1);
      if (k == "Credential") {
        std::vector<std::string> scope = Split(v, '/');
        if (scope.size() != 5 || scope[4] != "aws4_request") return std::nullopt;
        p.access_key = scope[0];
        p.date = scope[1];
        p.region = scope[2];
        p.service = scope[3];
      } else if (k == "SignedHeaders") {
        p.signed_headers = v;
      } else if (k == "Signature") {
        p.signature = v;
      }
    }
    if (p.access_key.empty() || p.signed_headers.empty() || p.signature.empty()) {
      return std::nullopt;
    }
    return p;
  }

  // Seconds since the epoch of an x-amz-date (YYYYMMDD'T'HHMMSS'Z').
  static std::optional<int64_t> ParseAmzDate(const std::string& d) {
    static const std::regex re("^(\\d{4})(\\d{2})(\\d{2})T(\\d{2})(\\d{2})(\\d{2})Z$");
    std::smatch m;
    if (!std::regex_match(d, m, re)) return std::nullopt;
    std::tm tm{};
    tm.tm_year = std::stoi(m[1]) - 1900;
    tm.tm_mon = std::stoi(m[2]) - 1;
    tm.tm_mday = std::stoi(m[3]);
    tm.tm_hour = std::stoi(m[4]);
    tm.tm_min = std::stoi(m[5]);
    tm.tm_sec = std::stoi(m[6]);
    return static_cast<int64_t>(timegm(&tm));
  }

  // The request's Action (query or form body), "" when none.
  static std::string ActionOf(const HttpRequest& req) {
    if (auto a = req.Query("Action")) return *a;
    if (req.method == "POST") {
      for (const auto& [k, v] : ParseForm(req.body)) {
        if (k == "Action") return v;
      }
    }
    return "";
  }

  // Paths served beside EC2 that authenticate themselves (SSO portal, container credentials,
  // instance metadata).
  static bool IsCredentialServicePath(const std::string& path) {
    return path.rfind("/federation/", 0) == 0 || path.rfind("/container-credentials/", 0) == 0 ||
           path.rfind("/latest/", 0) == 0;
  }

  std::optional<HttpResponse> Authenticate(const HttpRequest& req) override {
    if (IsCredentialServicePath(req.path)) return std::nullopt;
    const std::string action = ActionOf(req);
    if (action == "AssumeRoleWithWebIdentity") return std::nullopt;  // unsigned by design
    const bool sts = action == "AssumeRole" || action == "GetCallerIdentity";
    std::lock_guard<std::mutex> lock(mu_);
    auto refuse = [&](int status, const std::string& code, const std::string& message) {
      return sts ? StsError(status == 401 ? 403 : status,
                            code == "AuthFailure" ? "InvalidClientTokenId" : code, message)
                 : Error(status, code, message);
    };
    const std::string header = req.Header("authorization");
    if (header.empty()) {
      return refuse(401, "MissingAuthenticationToken", "Request is missing Authentication Token");
    }
    std::optional<AuthParts> a = ParseAuthorization(header);
    if (!a) {
      return refuse(400, "IncompleteSignature",
                   "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' "
                   "parameters with an AWS4-HMAC-SHA256 credential scope");
    }
    auto secret = secrets_.find(a->access_key);
    if (secret == secrets_.end()) {
      return refuse(401, "AuthFailure",
                   "AWS was not able to validate the provided access credentials");
    }
    const std::string service = sts ? "sts" : "ec2";
    if (a->service != service) {
      return refuse(403, "SignatureDoesNotMatch",
                    "Credential should be scoped to correct service: '" + service + "'.");
    }
    if (!KnownRegion(a->region)) {
      return refuse(401, "AuthFailure",
                   "Credential should be scoped to a valid region, not '" + a->region + "'.");
    }
    const std::string amz_date = req.Header("x-amz-date");
    std::optional<int64_t> when = ParseAmzDate(amz_date);
    if (!when || amz_date.substr(0, 8) != a->date) {
      return refuse(400, "IncompleteSignature",
                   "the x-amz-date header is missing or does not match the credential scope date");
    }
    const int64_t now =
        std::chrono::duration_cast<std::chrono::seconds>(SysClock::now().time_since_epoch())
            .count();
    if (std::llabs(now - *when) > kMaxClockSkewSeconds) {
      return refuse(400, "RequestExpired", "Request has expired.");
    }
    // The canonical request as the client must have built it (plugins/aws/REFERENCE.md §1.3).
    std::vector<std::string> names = Split(a->signed_headers, ';');
    if (std::find(names.begin(), names.end(), "host") == names.end()) {
      return refuse(401, "AuthFailure",
                   "AWS was not able to validate the provided access credentials");
    }
    std::string canonical_headers;
    for (const auto& n : names) {
      std::string v = n == "host" && req.headers.count("host") == 0 ? req.host : req.Header(n);
      std::string collapsed;
      bool space = false;
      for (char c : Trim(v)) {
        if (c == ' ' || c == '\t') {
          space = true;
          continue;
        }
        if (space) collapsed += ' ';
        space = false;
        collapsed += c;
      }
      canonical_headers += n + ":" + collapsed + "\n";
    }
    std::vector<std::pair<std::string, std::string>> q;
    for (const auto& [k, v] : req.query) q.emplace_back(Rfc3986(k, false), Rfc3986(v, false));
    std::sort(q.begin(), q.end());
    std::string query;
    for (const auto& [k, v] : q) query += (query.empty() ? "" : "&") + k + "=" + v;
    std::string payload_hash = req.Header("x-amz-content-sha256");
    if (payload_hash.empty() || payload_hash == "UNSIGNED-PAYLOAD") {
      payload_hash = Sha256Hex(req.body);
    }
    const std::string canonical =
        req.method + "\n" + Rfc3986(req.path.empty() ? "/" : req.path, true) + "\n" + query + "\n" +
        canonical_headers + "\n" + a->signed_headers + "\n" + payload_hash;
    const std::string scope = a->date + "/" + a->region + "/" + a->service + "/aws4_request";
    const std::string to_sign =
        "AWS4-HMAC-SHA256\n" + amz_date + "\n" + scope + "\n" + Sha256Hex(canonical);
    std::string key = Hmac("AWS4" + secret->second, a->date);
    key = Hmac(key, a->region);
    key = Hmac(key, a->service);
    key = Hmac(key, "aws4_request");
    const std::string mac = Hmac(key, to_sign);
    static const char* hex = "0123456789abcdef";
    std::string expected;
    for (unsigned char c : mac) {
      expected += hex[c >> 4];
      expected += hex[c & 15];
    }
    if (expected != a->signature) {
      // EC2 answers a wrong secret like an unknown key.
      return refuse(401, sts ? "SignatureDoesNotMatch" : "AuthFailure",
                    sts ? "The request signature we calculated does not match the signature "
                          "you provided."
                        : "AWS was not able to validate the provided access credentials");
    }
    // Temporary credentials (issued below) are valid only with their session token and
    // until they expire.
    if (auto t = session_tokens_.find(a->access_key); t != session_tokens_.end()) {
      if (req.Header("x-amz-security-token") != t->second.token) {
        return refuse(401, "AuthFailure",
                      "AWS was not able to validate the provided access credentials");
      }
      if (SysClock::now() >= t->second.expires) {
        return refuse(400, sts ? "ExpiredToken" : "RequestExpired",
                      "The security token included in the request is expired");
      }
    }
    return std::nullopt;
  }

  HttpResponse Throttled(const HttpRequest& /*req*/, const Fault& /*f*/) override {
    return Error(503, "RequestLimitExceeded", "Request limit exceeded.");
  }

  HttpResponse ServerError(const HttpRequest& /*req*/, const Fault& f) override {
    if (f.status == 503)
      return Error(503, "Unavailable", "The server is overloaded and can't handle the request.");
    return Error(f.status, "InternalError",
                 "An internal error has occurred. Retry your request, but if the problem persists, "
                 "contact us with details by posting a message on the AWS forums.");
  }

  HttpResponse InternalError(const std::string& what) override {
    return Error(500, "InternalError", "An internal error has occurred (emulator: " + what + ")");
  }

  // --- routing ---
  HttpResponse Route(const HttpRequest& req) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (req.path.rfind("/federation/", 0) == 0) return SsoPortal(req);
    if (req.path.rfind("/container-credentials/", 0) == 0) return ContainerCredentials(req);
    if (req.path.rfind("/latest/", 0) == 0) return InstanceMetadata(req);
    {
      const std::string sts_action = ActionOf(req);
      if (sts_action == "AssumeRole" || sts_action == "AssumeRoleWithWebIdentity" ||
          sts_action == "GetCallerIdentity") {
        return Sts(req, sts_action);
      }
    }
    if (req.path != "/" && !req.path.empty()) {
      return Error(400, "InvalidAction", "The action is not valid for this web service.");
    }
    Params all(req.query.begin(), req.query.end());
    if (req.method == "POST") {
      Params form = ParseForm(req.body);
      all.insert(all.end(), form.begin(), form.end());
    } else if (req.method != "GET") {
      return Error(405, "InvalidAction", "Only GET and POST are supported.");
    }
    Args a(all);
    const std::string action = a.Str("Action");
    if (action.empty()) return Missing("Action");
    if (a.Str("Version").empty()) return Missing("Version");
    if (a.Str("Version") != kApiVersion) {
      return Error(
          400, "InvalidParameterValue",
          "Version " + a.Str("Version") + " is not supported by this emulator (2016-11-15)");
    }
    if (auto refused = CheckParameters(action, all)) return *refused;
    region_ = ParseAuthorization(req.Header("authorization"))->region;
    EnsureRegion(region_);
    RefreshAll();
    ApplyPrivateIngress();
    if (action == "RunInstances") return RunInstances(req, a);
    if (action == "DescribeInstances") return DescribeInstances(a);
    if (action == "TerminateInstances") return TerminateInstances(a);
    if (action == "StopInstances") return StopOrStartInstances(a, /*stop=*/true);
    if (action == "StartInstances") return StopOrStartInstances(a, /*stop=*/false);
    if (action == "ImportKeyPair") return ImportKeyPair(a);
    if (action == "DescribeKeyPairs") return DescribeKeyPairs(a);
    if (action == "DeleteKeyPair") return DeleteKeyPair(a);
    if (action == "CreateSecurityGroup") return CreateSecurityGroup(a);
    if (action == "DescribeSecurityGroups") return DescribeSecurityGroups(a);
    if (action == "AuthorizeSecurityGroupIngress") return AuthorizeIngress(a);
    if (action == "RevokeSecurityGroupIngress") return RevokeIngress(a);
    if (action == "DeleteSecurityGroup") return DeleteSecurityGroup(a);
    if (action == "CreateTags") return CreateTags(a);
    if (action == "DescribeInstanceTypes") return DescribeInstanceTypes(a);
    if (action == "DescribeInstanceTypeOfferings") return DescribeInstanceTypeOfferings(a);
    if (action == "DescribeSpotPriceHistory") return DescribeSpotPriceHistory(a);
    if (action == "DescribeVpcs") return DescribeVpcs(a);
    if (action == "DescribeSubnets") return DescribeSubnets(a);
    if (action == "DescribeRegions") return DescribeRegions();
    if (action == "DescribeAvailabilityZones") return DescribeAvailabilityZones();
    if (action == "DescribeAddresses")
      return Xml(200, "DescribeAddressesResponse", E("addressesSet", ""));
    return Error(400, "InvalidAction",
                 "The action " + action + " is not valid for this web service.");
  }

  // Every parameter against the action's shape in the EC2 API model (Ec2ActionShapes): a name
  // the action does not take is 400 UnknownParameter "The parameter X is not recognized", a
  // required member not sent is 400 MissingParameter "The request must contain the parameter
  // X", a value not of the member's type is 400 InvalidParameterValue (EC2 API reference,
  // Errors, common client errors; the messages as EC2 words them in answers quoted by
  // aws/aws-cli issue 21 and aws/aws-sdk-cpp issue 327). Action, Version and the X-Amz-*
  // query authentication parameters are the common parameters of every action.
  static std::optional<HttpResponse> CheckParameters(const std::string& action, const Params& all) {
    const auto& shapes = Ec2ActionShapes();
    auto shape = shapes.find(action);
    if (shape == shapes.end()) {  // the table is what the emulator serves
      return Error(400, "InvalidAction",
                   "The action " + action + " is not valid for this web service.");
    }
    std::set<std::string> sent;
    for (const auto& [name, value] : all) {
      if (name == "Action" || name == "Version" || name.rfind("X-Amz-", 0) == 0) continue;
      sent.insert(name);
      const std::string pattern = Ec2ParamPattern(name);
      const Ec2Param* param = nullptr;
      for (const Ec2Param& p : shape->second.params) {
        if (p.pattern == pattern) param = &p;
      }
      if (!param) return Error(400, "UnknownParameter", "The parameter " + name + " is not recognized");
      static const std::regex integer("^-?[0-9]+$"), number("^-?[0-9]+(\\.[0-9]+)?$");
      const bool ok = param->type == 'i'   ? std::regex_match(value, integer)
                      : param->type == 'd' ? std::regex_match(value, number)
                      : param->type == 'b' ? (Lower(value) == "true" || Lower(value) == "false")
                                           : true;
      if (!ok) {
        return BadParam("Invalid value '" + value + "' for " + name + ": it must be " +
                        (param->type == 'b' ? "true or false" : "a number"));
      }
    }
    for (const std::string& r : shape->second.required) {
      const bool present = std::any_of(sent.begin(), sent.end(), [&](const std::string& n) {
        return n == r || n.rfind(r + ".", 0) == 0;
      });
      if (!present) return Missing(r);
    }
    return std::nullopt;
  }

  // --- STS, the SSO portal, container credentials and IMDSv2 (credential sources) ---
  struct Session {
    std::string token;
    SysClock::time_point expires;
    std::string arn;  // the assumed role's
  };

  // New temporary credentials for `arn`, valid for `seconds`; EC2 accepts them from now on.
  struct Issued {
    std::string access_key, secret, token;
    SysClock::time_point expires;
  };
  Issued Issue(const std::string& arn, int seconds) {
    Issued i;
    i.access_key = "ASIA" + RandomUpperHex(16);
    i.secret = RandomUpperHex(40);
    i.token = "IQoJb3JpZ2luX2VjE" + RandomUpperHex(96);
    i.expires = SysClock::now() + std::chrono::seconds(seconds);
    secrets_[i.access_key] = i.secret;
    session_tokens_[i.access_key] = Session{i.token, i.expires, arn};
    ++issued_;
    return i;
  }

  // arn:aws:iam::<12 digits>:role/<path/>name -> {account, name}.
  static std::optional<std::pair<std::string, std::string>> RoleArnParts(const std::string& arn) {
    static const std::regex re("^arn:aws[a-z-]*:iam::(\\d{12}):role/(?:[\\w+=,.@/-]*/)?([\\w+=,.@-]{1,64})$");
    std::smatch m;
    if (!std::regex_match(arn, m, re)) return std::nullopt;
    return std::make_pair(m[1].str(), m[2].str());
  }

  HttpResponse Sts(const HttpRequest& req, const std::string& action) {
    Params all(req.query.begin(), req.query.end());
    if (req.method == "POST") {
      Params form = ParseForm(req.body);
      all.insert(all.end(), form.begin(), form.end());
    }
    Args a(all);
    if (a.Str("Version") != "2011-06-15") {
      return StsError(400, "InvalidAction", "Could not find operation " + action +
                                                 " for version " + a.Str("Version"));
    }
    if (action == "GetCallerIdentity") {
      const std::string key = ParseAuthorization(req.Header("authorization"))->access_key;
      auto t = session_tokens_.find(key);
      const std::string arn = t != session_tokens_.end() ? t->second.arn
                                                         : "arn:aws:iam::123456789012:user/emulator";
      return StsXml(action, L("Arn", arn) + L("UserId", key) +
                                L("Account", arn.substr(13, 12)));
    }
    const std::string role_arn = a.Str("RoleArn");
    const std::string session = a.Str("RoleSessionName");
    if (role_arn.empty()) return StsError(400, "MissingParameter", "RoleArn is required");
    if (session.empty()) return StsError(400, "MissingParameter", "RoleSessionName is required");
    static const std::regex session_re("^[\\w+=,.@-]{2,64}$");
    if (!std::regex_match(session, session_re)) {
      return StsError(400, "ValidationError",
                      "1 validation error detected: Value '" + session +
                          "' at 'roleSessionName' failed to satisfy constraint: Member must "
                          "satisfy regular expression pattern: [\\w+=,.@-]*");
    }
    auto parts = RoleArnParts(role_arn);
    if (!parts) {
      return StsError(400, "ValidationError", role_arn + " is invalid");
    }
    int duration = 3600;
    if (!a.Str("DurationSeconds").empty()) {
      try {
        duration = std::stoi(a.Str("DurationSeconds"));
      } catch (const std::exception&) {
        duration = -1;
      }
      if (duration < 900 || duration > 43200) {
        return StsError(400, "ValidationError",
                        "1 validation error detected: Value at 'durationSeconds' failed to "
                        "satisfy constraint: Member must have value between 900 and 43200");
      }
    }
    // Roles whose name starts with "denied" trust nobody (tests of refusal).
    const bool denied = parts->second.rfind("denied", 0) == 0;
    std::string extra;
    if (action == "AssumeRoleWithWebIdentity") {
      const std::string token = a.Str("WebIdentityToken");
      if (token.empty()) return StsError(400, "MissingParameter", "WebIdentityToken is required");
      if (std::count(token.begin(), token.end(), '.') != 2) {
        return StsError(400, "InvalidIdentityToken", "The ID Token provided is not a valid JWT.");
      }
      if (denied) {
        return StsError(403, "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity");
      }
      extra = L("SubjectFromWebIdentityToken", "system:serviceaccount:default:gpuprov") +
              L("Audience", "sts.amazonaws.com") + L("Provider", "emulator-oidc");
    } else if (denied) {
      return StsError(403, "AccessDenied",
                      "User: arn:aws:iam::123456789012:user/emulator is not authorized to "
                      "perform: sts:AssumeRole on resource: " + role_arn);
    }
    const std::string assumed =
        "arn:aws:sts::" + parts->first + ":assumed-role/" + parts->second + "/" + session;
    Issued i = Issue(assumed, duration);
    return StsXml(action,
                  E("Credentials", L("AccessKeyId", i.access_key) +
                                       L("SecretAccessKey", i.secret) +
                                       L("SessionToken", i.token) +
                                       L("Expiration", Iso8601(i.expires))) +
                      E("AssumedRoleUser",
                        L("AssumedRoleId", "AROA" + RandomUpperHex(17) + ":" + session) +
                            L("Arn", assumed)) +
                      extra);
  }

  // IAM Identity Center's portal: GET /federation/credentials?account_id&role_name with the
  // CLI's cached access token in x-amz-sso_bearer_token (JSON errors as the portal's).
  HttpResponse SsoPortal(const HttpRequest& req) {
    auto err = [](int status, const std::string& type, const std::string& message) {
      JsonObject o = NewObject();
      o->set("message", message);
      HttpResponse r = JsonResponse(status, o);
      r.SetHeader("x-amzn-ErrorType", type);
      return r;
    };
    if (req.path != "/federation/credentials" || req.method != "GET") {
      return err(404, "ResourceNotFoundException", "Not found");
    }
    const std::string token = req.Header("x-amz-sso_bearer_token");
    if (token.empty() || sso_tokens_.count(token) == 0) {
      return err(401, "UnauthorizedException", "Session token not found or invalid");
    }
    const std::string account = req.Query("account_id").value_or("");
    const std::string role = req.Query("role_name").value_or("");
    if (account.empty() || role.empty()) {
      return err(400, "InvalidRequestException", "account_id and role_name are required");
    }
    if (role.rfind("denied", 0) == 0) return err(403, "ForbiddenException", "No access");
    Issued i = Issue("arn:aws:sts::" + account + ":assumed-role/AWSReservedSSO_" + role +
                         "/emulator",
                     3600);
    JsonObject rc = NewObject();
    rc->set("accessKeyId", i.access_key);
    rc->set("secretAccessKey", i.secret);
    rc->set("sessionToken", i.token);
    rc->set("expiration", static_cast<int64_t>(
                              std::chrono::duration_cast<std::chrono::milliseconds>(
                                  i.expires.time_since_epoch())
                                  .count()));
    JsonObject o = NewObject();
    o->set("roleCredentials", rc);
    return JsonResponse(200, o);
  }

  // The ECS/EKS container credentials endpoint: GET /container-credentials/<id>; with an
  // authorization token configured (default emulator-aws-container-token), the
  // Authorization header must carry it.
  HttpResponse ContainerCredentials(const HttpRequest& req) {
    if (req.method != "GET") return TextResponse(405, "method not allowed");
    if (!container_token_.empty() && req.Header("authorization") != container_token_) {
      JsonObject o = NewObject();
      o->set("code", "AccessDeniedException");
      o->set("message", "Authorization token is missing or invalid");
      return JsonResponse(401, o);
    }
    Issued i = Issue("arn:aws:sts::123456789012:assumed-role/emulator-task-role/container", 3600);
    JsonObject o = NewObject();
    o->set("RoleArn", "arn:aws:iam::123456789012:role/emulator-task-role");
    o->set("AccessKeyId", i.access_key);
    o->set("SecretAccessKey", i.secret);
    o->set("Token", i.token);
    o->set("Expiration", Iso8601(i.expires));
    return JsonResponse(200, o);
  }

  // IMDSv2: PUT /latest/api/token (X-aws-ec2-metadata-token-ttl-seconds 1-21600), then GETs
  // with X-aws-ec2-metadata-token. Only the credential paths are served.
  HttpResponse InstanceMetadata(const HttpRequest& req) {
    if (req.path == "/latest/api/token") {
      if (req.method != "PUT") return TextResponse(405, "");
      if (!req.Header("x-forwarded-for").empty()) return TextResponse(403, "");
      int ttl = 0;
      try {
        ttl = std::stoi(req.Header("x-aws-ec2-metadata-token-ttl-seconds"));
      } catch (const std::exception&) {
      }
      if (ttl < 1 || ttl > 21600) return TextResponse(400, "");
      const std::string token = "AQAEA" + RandomUpperHex(51);
      imds_tokens_[token] = SysClock::now() + std::chrono::seconds(ttl);
      HttpResponse r = TextResponse(200, token);
      r.SetHeader("X-aws-ec2-metadata-token-ttl-seconds", std::to_string(ttl));
      return r;
    }
    auto t = imds_tokens_.find(req.Header("x-aws-ec2-metadata-token"));
    if (t == imds_tokens_.end() || SysClock::now() >= t->second) return TextResponse(401, "");
    if (req.method != "GET") return TextResponse(405, "");
    const std::string base = "/latest/meta-data/iam/security-credentials/";
    if (req.path == base) {
      return instance_role_.empty() ? TextResponse(404, "") : TextResponse(200, instance_role_);
    }
    if (instance_role_.empty() || req.path != base + instance_role_) return TextResponse(404, "");
    Issued i = Issue("arn:aws:sts::123456789012:assumed-role/" + instance_role_ + "/i-emulator",
                     6 * 3600);
    JsonObject o = NewObject();
    o->set("Code", "Success");
    o->set("LastUpdated", Iso8601(SysClock::now()));
    o->set("Type", "AWS-HMAC");
    o->set("AccessKeyId", i.access_key);
    o->set("SecretAccessKey", i.secret);
    o->set("Token", i.token);
    o->set("Expiration", Iso8601(i.expires));
    return JsonResponse(200, o);
  }

  // --- regions, VPCs, subnets, default groups ---
  // Per region, as a new account has: the default VPC (172.31.0.0/16) with a default subnet in
  // each of its zones a-c that maps public addresses (Amazon VPC User Guide, "Default VPCs"),
  // unless the setting default_vpc is false; and one VPC of the account's own (10.0.0.0/16)
  // with one subnet in zone a that does not map public addresses, as a subnet made with
  // CreateSubnet does not. Every VPC has its security group "default".
  struct Subnet {
    std::string id, vpc_id, az, cidr;
    bool default_for_az = false, map_public_ip = false;
  };

  std::string DefaultVpc(const std::string& region) const {
    return "vpc-0" + Md5Hex("vpc|" + region).substr(0, 16);
  }
  std::string OwnVpc(const std::string& region) const {
    return "vpc-0" + Md5Hex("own-vpc|" + region).substr(0, 16);
  }
  // The VPCs of a region now: {id, cidr, is default}.
  std::vector<std::tuple<std::string, std::string, bool>> Vpcs(const std::string& region) const {
    std::vector<std::tuple<std::string, std::string, bool>> out;
    if (default_vpc_) out.emplace_back(DefaultVpc(region), "172.31.0.0/16", true);
    out.emplace_back(OwnVpc(region), "10.0.0.0/16", false);
    return out;
  }
  bool VpcExists(const std::string& region, const std::string& vpc) const {
    for (const auto& v : Vpcs(region)) {
      if (std::get<0>(v) == vpc) return true;
    }
    return false;
  }
  std::vector<Subnet> Subnets(const std::string& region) const {
    std::vector<Subnet> out;
    if (default_vpc_) {
      int k = 0;
      for (const char* z : {"a", "b", "c"}) {
        out.push_back(Subnet{"subnet-0" + Md5Hex("subnet|" + region + z).substr(0, 16),
                             DefaultVpc(region), region + z,
                             "172.31." + std::to_string(16 * k++) + ".0/20", true, true});
      }
    }
    out.push_back(Subnet{"subnet-0" + Md5Hex("own-subnet|" + region).substr(0, 16),
                         OwnVpc(region), region + "a", "10.0.1.0/24", false, false});
    return out;
  }
  std::optional<Subnet> FindSubnet(const std::string& id) const {
    for (const auto& sn : Subnets(region_)) {
      if (sn.id == id) return sn;
    }
    return std::nullopt;
  }
  static std::string DefaultGroupId(const std::string& vpc) {
    return "sg-0" + Md5Hex("default-sg|" + vpc).substr(0, 16);
  }

  void EnsureRegion(const std::string& region) {
    for (const auto& v : Vpcs(region)) {
      const std::string& vpc = std::get<0>(v);
      if (groups_.count(DefaultGroupId(vpc))) continue;
      Group g;
      g.id = DefaultGroupId(vpc);
      g.name = "default";
      g.description = "default VPC security group";
      g.region = region;
      g.vpc_id = vpc;
      g.is_default = true;
      groups_[g.id] = g;
    }
  }

  Group* FindGroup(const std::string& id) {
    auto it = groups_.find(id);
    return it == groups_.end() || it->second.region != region_ ? nullptr : &it->second;
  }
  // A group by name in a VPC (group names are unique per VPC); "" = the default VPC, where
  // EC2 looks up GroupName parameters.
  Group* FindGroupByName(const std::string& name, const std::string& vpc = "") {
    const std::string in = vpc.empty() ? DefaultVpc(region_) : vpc;
    for (auto& [id, g] : groups_) {
      if (g.region == region_ && g.name == name && g.vpc_id == in) return &g;
    }
    return nullptr;
  }
  KeyPair* FindKey(const std::string& name) {
    for (auto& [id, k] : keys_) {
      if (k.region == region_ && k.name == name) return &k;
    }
    return nullptr;
  }
  Instance* FindInstance(const std::string& id) {
    auto it = instances_.find(id);
    return it == instances_.end() || it->second.region != region_ ? nullptr : &it->second;
  }

  // --- instance state ---
  void Refresh(Instance& i) {
    const auto now = Clock::now();
    if (i.phase == Phase::kShuttingDown &&
        now - i.terminate_requested >=
            std::chrono::milliseconds(static_cast<int64_t>(shutdown_seconds_ * 1000))) {
      i.phase = Phase::kTerminated;
      i.terminated_at = now;
    }
    if (i.phase != Phase::kLive) return;
    InstanceStatus s = backend_->State(i.backend_id);
    if (s.state == InstanceState::kStopped && i.shutdown_behavior == "terminate" &&
        !i.stop_requested) {
      // plugins/aws/REFERENCE.md §3.1: with InstanceInitiatedShutdownBehavior=terminate, a shutdown
      // from inside the VM terminates it.
      i.phase = Phase::kShuttingDown;
      i.terminate_requested = now;
      i.reason_code = "Client.InstanceInitiatedShutdown";
      i.reason_message = "Client.InstanceInitiatedShutdown: Instance initiated shutdown";
      backend_->Delete(i.backend_id);
      if (shutdown_seconds_ <= 0) {
        i.phase = Phase::kTerminated;
        i.terminated_at = now;
      }
      return;
    }
    if (s.state == InstanceState::kGone && s.preempted) {
      // EC2 User Guide, "Spot Instance interruptions" / "State change reasons": an interrupted
      // one-time Spot Instance (interruption behaviour terminate) shuts down and terminates
      // with state reason Server.SpotInstanceTermination.
      i.phase = Phase::kShuttingDown;
      i.terminate_requested = now;
      i.reason_code = i.spot ? "Server.SpotInstanceTermination" : "Server.InternalError";
      i.reason_message = i.spot ? "Server.SpotInstanceTermination: Spot instance termination"
                                : "Server.InternalError: Internal error";
      backend_->Delete(i.backend_id);
      if (shutdown_seconds_ <= 0) {
        i.phase = Phase::kTerminated;
        i.terminated_at = now;
      }
      return;
    }
    if (s.state == InstanceState::kGone || s.state == InstanceState::kError) {
      i.phase = Phase::kTerminated;
      i.terminated_at = now;
      if (s.state == InstanceState::kGone) {
        i.reason_code = "Server.InternalError";
        i.reason_message = "Server.InternalError: Internal error on launch";
      } else {
        i.reason_code = "Server.InsufficientInstanceCapacity";
        i.reason_message = "Server.InsufficientInstanceCapacity: Insufficient capacity.";
      }
      backend_->Delete(i.backend_id);
      i.backend_deleted = true;
    }
  }

  void RefreshAll() {
    const auto now = Clock::now();
    for (auto it = instances_.begin(); it != instances_.end();) {
      Refresh(it->second);
      if (it->second.phase == Phase::kTerminated && !it->second.backend_deleted) {
        backend_->Delete(it->second.backend_id);
        it->second.backend_deleted = true;
      }
      if (it->second.phase == Phase::kTerminated &&
          now - it->second.terminated_at > kTerminatedVisibleFor) {
        it = instances_.erase(it);
        continue;
      }
      ++it;
    }
  }

  // (code, name) of an instance now.
  std::pair<int, std::string> StateOf(const Instance& i) {
    if (i.phase == Phase::kTerminated) return {48, "terminated"};
    if (i.phase == Phase::kShuttingDown) return {32, "shutting-down"};
    InstanceStatus s = backend_->State(i.backend_id);
    if (s.state == InstanceState::kRunning) {
      return i.stop_requested ? std::pair<int, std::string>{64, "stopping"}
                              : std::pair<int, std::string>{16, "running"};
    }
    if (s.state == InstanceState::kStopped) return {80, "stopped"};  // shutdown behavior "stop"
    return {0, "pending"};
  }

  std::string StateXml(const std::string& tag, std::pair<int, std::string> st) {
    return E(tag, L("code", std::to_string(st.first)) + L("name", st.second));
  }

  std::string InstanceXml(const Instance& i) {
    auto st = StateOf(i);
    InstanceStatus s = backend_->State(i.backend_id);
    if (!i.public_address) s.public_ip.clear();  // private only: no ipAddress, no dnsName
    const bool running = st.second == "running";
    const TypeDef* type = FindType(i.type);
    std::string x;
    x += L("instanceId", i.id);
    x += L("imageId", i.image_id);
    x += StateXml("instanceState", st);
    x += L(
        "privateDnsName", "ip-" + [&] {
          std::string d = i.private_ip;
          std::replace(d.begin(), d.end(), '.', '-');
          return d;
        }() + "." + i.region + ".compute.internal");
    x += running && !s.public_ip.empty()
             ? L(
                   "dnsName", "ec2-" +
                                  [&] {
                                    std::string d = s.public_ip;
                                    std::replace(d.begin(), d.end(), '.', '-');
                                    return d;
                                  }() +
                                  "." + i.region + ".compute.amazonaws.com")
             : "<dnsName/>";
    x += L("reason", i.phase == Phase::kLive ? "" : "User initiated");
    if (!i.key_name.empty()) x += L("keyName", i.key_name);
    x += L("amiLaunchIndex", std::to_string(i.ami_launch_index));
    x += E("productCodes", "");
    x += L("instanceType", i.type);
    // DescribeInstances' Instance.InstanceLifecycle: "spot" for a Spot Instance, absent for
    // an on-demand one (EC2 API model, InstanceLifecycleType).
    if (i.spot) x += L("instanceLifecycle", "spot");
    x += L("launchTime", Iso8601(i.launch_time));
    x += E("placement", L("availabilityZone", i.az) + "<groupName/>" + L("tenancy", "default"));
    x += E("monitoring", L("state", "disabled"));
    if (i.phase != Phase::kTerminated) {
      x += L("subnetId", i.subnet_id);
      x += L("vpcId", i.vpc_id);
      x += L("privateIpAddress", PrivateIpOf(i));
      if (running && !s.public_ip.empty()) x += L("ipAddress", s.public_ip);
    }
    x += L("sourceDestCheck", "true");
    std::string groups;
    for (const auto& gid : i.group_ids) {
      auto it = groups_.find(gid);
      groups +=
          E("item", L("groupId", gid) + L("groupName", it == groups_.end() ? "" : it->second.name));
    }
    x += E("groupSet", groups);
    if (!i.reason_code.empty()) {
      x += E("stateReason", L("code", i.reason_code) + L("message", i.reason_message));
    } else if (i.phase != Phase::kLive) {
      x += E("stateReason",
             L("code", "Client.UserInitiatedShutdown") +
                 L("message", "Client.UserInitiatedShutdown: User initiated shutdown"));
    }
    x += L("architecture", "x86_64");
    x += L("rootDeviceType", "ebs");
    x += L("rootDeviceName", "/dev/sda1");
    if (i.phase != Phase::kTerminated) {
      x += E("blockDeviceMapping",
             E("item",
               L("deviceName", "/dev/sda1") +
                   E("ebs", L("volumeId", "vol-0" + Md5Hex("vol|" + i.id).substr(0, 16)) +
                                L("status", "attached") + L("attachTime", Iso8601(i.launch_time)) +
                                L("deleteOnTermination", "true"))));
    } else {
      x += E("blockDeviceMapping", "");
    }
    x += L("virtualizationType", "hvm");
    x += L("clientToken", i.client_token);
    if (!i.tags.empty()) x += TagSetXml(i.tags);
    x += L("hypervisor", "xen");
    x += E("networkInterfaceSet", "");
    x += L("ebsOptimized", "false");
    x += L("enaSupport", "true");
    if (type) {
      x += E("cpuOptions", L("coreCount", std::to_string(std::max(1, type->vcpus / 2))) +
                               L("threadsPerCore", type->vcpus > 1 ? "2" : "1"));
    }
    x += E("metadataOptions", L("state", "applied") + L("httpTokens", "required") +
                                  L("httpPutResponseHopLimit", "2") + L("httpEndpoint", "enabled"));
    return x;
  }

  std::string ReservationXml(const Reservation& r, const std::vector<Instance*>& members) {
    std::string items;
    for (Instance* i : members) items += E("item", InstanceXml(*i));
    return L("reservationId", r.id) + L("ownerId", kOwnerId) + E("groupSet", "") +
           E("instancesSet", items);
  }

  // What this machine can reach on an instance of these groups (plugins/aws/REFERENCE.md §5): the
  // union of their tcp and all-traffic ingress rules whose IPv4 ranges cover this machine. A group
  // rule naming another group, or a default group's rules, never does.
  PortSet ReachableOf(const std::vector<std::string>& group_ids) const {
    PortSet out;
    for (const auto& gid : group_ids) {
      auto it = groups_.find(gid);
      if (it == groups_.end()) continue;
      for (const auto& r : it->second.ingress) {
        if (r.protocol != "tcp" && r.protocol != "-1") continue;
        bool covers = false;
        for (const auto& [cidr, d] : r.v4) covers = covers || CoversThisMachine(cidr);
        if (!covers) continue;
        if (r.protocol == "-1") {
          out.Add(PortSet::All());
        } else {
          out.Add(r.from, r.to);
        }
      }
    }
    return out;
  }

  // Tells the backend what every running instance's groups allow now.
  void ApplyGroups() {
    for (const auto& [id, i] : instances_) {
      if (i.phase != Phase::kLive || i.backend_deleted) continue;
      backend_->SetReachablePorts(i.backend_id, ReachableOf(i.group_ids));
    }
    ApplyPrivateIngress();
  }

  // The instance's private address: the backend's on its VPC's network (docker), else the
  // one this emulator gave it in the subnet.
  std::string PrivateIpOf(const Instance& i) {
    const InstanceStatus s = backend_->State(i.backend_id);
    return s.private_ip_on_network ? s.private_ip : i.private_ip;
  }

  // What reaches an instance on its private address (plugins/aws/REFERENCE.md §5): the union
  // of its groups' tcp, udp and all-traffic ingress rules, each from its IPv4 ranges and the
  // private addresses of the running members of the groups it names (a security group rule
  // that references a group admits "the private IP addresses of the resources associated with
  // the referenced security group", https://docs.aws.amazon.com/vpc/latest/userguide/
  // security-group-rules.html#security-group-referencing). The default group's implicit
  // self-reference ("allows inbound traffic from network interfaces assigned to the same
  // security group") is a rule of all traffic from the group.
  PrivateIngress PrivateIngressOf(const Instance& i) {
    std::vector<PrivateRule> out;
    auto members_of = [&](const std::string& gid) {
      std::vector<std::string> ips;
      for (const auto& [oid, o] : instances_) {
        if (o.phase != Phase::kLive || o.backend_deleted || o.vpc_id != i.vpc_id) continue;
        if (std::find(o.group_ids.begin(), o.group_ids.end(), gid) == o.group_ids.end()) continue;
        if (backend_->State(o.backend_id).state != InstanceState::kRunning) continue;
        ips.push_back(PrivateIpOf(o));
      }
      return ips;
    };
    auto add = [&](const std::string& protocol, int from, int to, std::vector<std::string> src) {
      if (src.empty()) return;
      for (const char* p : {"tcp", "udp"}) {
        if (protocol != "-1" && protocol != p) continue;
        PrivateRule rule;
        rule.protocol = p;
        rule.ports = protocol == "-1" ? PortRange{1, 65535} : PortRange{from, to};
        rule.sources = src;
        out.push_back(rule);
      }
    };
    for (const auto& gid : i.group_ids) {
      auto it = groups_.find(gid);
      if (it == groups_.end()) continue;
      if (it->second.is_default) add("-1", 0, 0, members_of(gid));
      for (const auto& r : it->second.ingress) {
        std::vector<std::string> src;
        for (const auto& [cidr, d] : r.v4) src.push_back(cidr);
        for (const auto& source_group : r.groups) {
          for (const auto& ip : members_of(source_group)) src.push_back(ip);
        }
        add(r.protocol, r.from, r.to, src);
      }
    }
    return out;
  }

  // Tells the backend each live instance's private ingress when it changed (peers' addresses
  // are known once they run, so this runs on every request).
  void ApplyPrivateIngress() {
    for (const auto& [id, i] : instances_) {
      if (i.phase != Phase::kLive || i.backend_deleted) continue;
      PrivateIngress ingress = PrivateIngressOf(i);
      auto told = told_ingress_.find(id);
      if (told != told_ingress_.end() && told->second == ingress) continue;
      backend_->SetPrivateIngress(i.backend_id, ingress);
      told_ingress_[id] = ingress;
    }
  }

  // --- RunInstances (plugins/aws/REFERENCE.md §3.1) ---
  HttpResponse RunInstances(const HttpRequest& req, const Args& a) {
    const std::string token = a.Str("ClientToken");
    const std::string fingerprint = a.Fingerprint({"ClientToken", "Action", "Version"});
    if (!token.empty()) {
      if (token.size() > 64) return BadParam("ClientToken must be at most 64 ASCII characters");
      auto it = reservations_.find(region_ + "|" + token);
      if (it != reservations_.end()) {
        if (it->second.fingerprint != fingerprint) {
          return Error(400, "IdempotentParameterMismatch",
                       "The client token you have provided is associated with a resource that is "
                       "already deleted or with different parameters.");
        }
        std::vector<Instance*> members;
        for (const auto& id : it->second.instance_ids) {
          if (auto jt = instances_.find(id); jt != instances_.end()) members.push_back(&jt->second);
        }
        return Xml(200, "RunInstancesResponse", ReservationXml(it->second, members));
      }
    }
    std::string image = a.Str("ImageId");
    if (image.empty()) return Missing("ImageId");
    const std::string type_name =
        a.Str("InstanceType").empty() ? "m1.small" : a.Str("InstanceType");
    const std::string min_s = a.Str("MinCount"), max_s = a.Str("MaxCount");
    if (min_s.empty()) return Missing("MinCount");
    if (max_s.empty()) return Missing("MaxCount");
    int min_count = 0, max_count = 0;
    try {
      min_count = std::stoi(min_s);
      max_count = std::stoi(max_s);
    } catch (const std::exception&) {
      return BadParam("MinCount and MaxCount must be integers");
    }
    if (min_count < 1 || max_count < min_count) {
      return BadParam("MinCount must be at least 1 and no more than MaxCount");
    }
    const int count = std::min(max_count, kMaxInstancesPerRun);
    if (min_count > count) {
      return Error(400, "InstanceLimitExceeded",
                   "Your quota allows for 0 more running instance(s). You requested at least " +
                       std::to_string(min_count));
    }
    // The image: an AMI of this region, or a public SSM parameter EC2 resolves.
    std::string image_parameter;
    if (image.rfind("resolve:ssm:", 0) == 0) {
      const std::string param = image.substr(std::string("resolve:ssm:").size());
      const auto& known = SsmImageParameters();
      if (std::find(known.begin(), known.end(), param) == known.end()) {
        return BadParam("Invalid SSM parameter specified for the image ID: " + param +
                        " (the emulator knows: " +
                        [&] {
                          std::string s;
                          for (const auto& k : known) s += (s.empty() ? "" : ", ") + k;
                          return s;
                        }() +
                        ")");
      }
      image = AmiFor(param, region_);
      image_parameter = param;
    } else {
      static const std::regex ami_re("^ami-[0-9a-f]{8}([0-9a-f]{9})?$");
      if (!std::regex_match(image, ami_re)) {
        return Error(400, "InvalidAMIID.Malformed",
                     "Invalid id: \"" + image + "\" (expecting \"ami-...\")");
      }
      bool known = false;
      for (const auto& p : SsmImageParameters()) {
        if (AmiFor(p, region_) == image) {
          known = true;
          image_parameter = p;
        }
      }
      if (!known) {
        return Error(400, "InvalidAMIID.NotFound", "The image id '[" + image + "]' does not exist");
      }
    }
    const TypeDef* type = FindType(type_name);
    if (!type) {
      return BadParam("Invalid value '" + type_name + "' for InstanceType.");
    }
    if (!OfferedIn(*type, region_)) {
      return Error(400, "Unsupported",
                   "Your requested instance type (" + type_name +
                       ") is not supported in your requested Availability Zone (" + region_ +
                       "a). Please retry your request by not specifying an Availability Zone or "
                       "choosing another Availability Zone.");
    }
    std::string key_name = a.Str("KeyName");
    KeyPair* key = nullptr;
    if (!key_name.empty()) {
      key = FindKey(key_name);
      if (!key) {
        return Error(400, "InvalidKeyPair.NotFound",
                     "The key pair '" + key_name + "' does not exist");
      }
    }
    // The network (RunInstances, EC2 API reference): a subnet from SubnetId or the primary
    // network interface (NetworkInterface.N, which then also carries the groups), else the
    // default VPC's default subnet of the zone. Without a default VPC and without a subnet EC2
    // answers 400 VPCIdNotSpecified (EC2 API reference, Error codes, common client errors),
    // message "No default VPC for this user" (as real RunInstances answers quote it, e.g.
    // github.com/google/cloud-forensics-utils issue 316).
    const std::vector<std::string> nics = a.Indexes("NetworkInterface");
    std::string nic;  // the interface of DeviceIndex 0
    for (const auto& n : nics) {
      if (a.Str(n + ".DeviceIndex") == "0") nic = n;
    }
    if (!nics.empty() && nic.empty()) {
      return Error(400, "InvalidParameterValue",
                   "When specifying network interfaces, one must have device index 0");
    }
    if (!nic.empty() && !a.Str("SubnetId").empty()) {
      return Error(400, "InvalidParameterCombination",
                   "Network interfaces and an instance-level subnet ID may not be specified on "
                   "the same request");
    }
    if (!nic.empty() && (!a.List("SecurityGroupId").empty() || !a.List("SecurityGroup").empty())) {
      return Error(400, "InvalidParameterCombination",
                   "Network interfaces and an instance-level security groups may not be "
                   "specified on the same request");
    }
    const std::string subnet_param = nic.empty() ? a.Str("SubnetId") : a.Str(nic + ".SubnetId");
    std::optional<Subnet> subnet;
    if (!subnet_param.empty()) {
      subnet = FindSubnet(subnet_param);
      if (!subnet) {
        return Error(400, "InvalidSubnetID.NotFound",
                     "The subnet ID '" + subnet_param + "' does not exist");
      }
    } else {
      if (!default_vpc_) return Error(400, "VPCIdNotSpecified", "No default VPC for this user");
      for (const auto& sn : Subnets(region_)) {
        if (sn.default_for_az && sn.az == region_ + "a") subnet = sn;
      }
    }
    bool public_address = subnet->map_public_ip;
    if (!nic.empty() && a.Get(nic + ".AssociatePublicIpAddress")) {
      public_address = a.Bool(nic + ".AssociatePublicIpAddress");
    }
    std::vector<std::string> group_ids;
    for (const auto& id : a.List(nic.empty() ? "SecurityGroupId" : nic + ".SecurityGroupId")) {
      Group* g = FindGroup(id);
      if (!g) {
        return Error(400, "InvalidGroup.NotFound",
                     "The security group '" + id + "' does not exist");
      }
      if (g->vpc_id != subnet->vpc_id) {
        return Error(400, "InvalidParameter",
                     "Security group " + id + " and subnet " + subnet->id +
                         " belong to different networks.");
      }
      group_ids.push_back(id);
    }
    for (const auto& name : a.List("SecurityGroup")) {
      Group* g = FindGroupByName(name, subnet->vpc_id);
      if (!g) {
        return Error(400, "InvalidGroup.NotFound",
                     "The security group '" + name + "' does not exist in VPC '" +
                         subnet->vpc_id + "'");
      }
      group_ids.push_back(g->id);
    }
    if (group_ids.empty()) group_ids.push_back(DefaultGroupId(subnet->vpc_id));
    std::string user_data;
    if (auto ud = a.Get("UserData")) {
      auto decoded = Base64Decode(*ud);
      if (!decoded) return BadParam("Invalid BASE64 encoding of user data.");
      if (decoded->size() > kMaxUserData) return BadParam("User data is limited to 16384 bytes");
      user_data = *decoded;
    }
    Tags tags;
    for (const auto& spec : a.Indexes("TagSpecification")) {
      const std::string rt = a.Str(spec + ".ResourceType");
      static const std::set<std::string> types = {"instance", "volume", "network-interface",
                                                  "spot-instances-request", "elastic-gpu"};
      if (!types.count(rt)) {
        return BadParam("'" + rt + "' is not a valid taggable resource type for this operation.");
      }
      if (rt != "instance") continue;
      for (const auto& t : a.Indexes(spec + ".Tag")) {
        const std::string k = a.Str(t + ".Key");
        if (k.empty() || k.size() > 128 || k.rfind("aws:", 0) == 0) {
          return BadParam("Tag keys must be 1-128 characters and must not start with 'aws:'");
        }
        SetTag(tags, k, a.Str(t + ".Value"));
      }
    }
    if (a.Bool("DryRun")) {
      return Error(412, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.");
    }
    // Faults after validation, as EC2 checks the request first.
    // "body" narrows it to one launch: a VM name ("train-agent-2", a cluster's third node).
    if (faults_.Take("capacity", req.method, req.path, req.body)) {
      return Error(500, "InsufficientInstanceCapacity",
                   "We currently do not have sufficient " + type_name +
                       " capacity in the Availability Zone you requested (" + region_ +
                       "a). Our system will be working on provisioning additional capacity. You "
                       "can currently get " +
                       type_name +
                       " capacity by not specifying an Availability Zone in your request or "
                       "choosing " +
                       region_ + "b, " + region_ + "c.");
    }
    if (faults_.Take("quota", req.method, req.path)) {
      return Error(400, "VcpuLimitExceeded",
                   "You have requested more vCPU capacity than your current vCPU limit of 0 "
                   "allows for the instance bucket that the specified instance type belongs to. "
                   "Please visit http://aws.amazon.com/contact-us/ec2-request to request an "
                   "adjustment to this limit.");
    }

    Reservation r;
    r.id = "r-0" + RandomHex(8).substr(0, 16);
    r.region = region_;
    r.fingerprint = fingerprint;
    std::vector<Instance*> members;
    for (int n = 0; n < count; ++n) {
      Instance i;
      i.id = "i-0" + RandomHex(8).substr(0, 16);
      i.region = region_;
      i.az = subnet->az;
      i.subnet_id = subnet->id;
      i.vpc_id = subnet->vpc_id;
      i.public_address = public_address;
      i.reservation_id = r.id;
      i.type = type_name;
      i.image_id = image;
      i.key_name = key_name;
      i.client_token = token;
      i.group_ids = group_ids;
      i.tags = tags;
      i.launch_time = SysClock::now();
      i.ami_launch_index = n;
      i.not_found_left = describe_not_found_;
      i.shutdown_behavior = a.Str("InstanceInitiatedShutdownBehavior").empty()
                                ? "stop"
                                : a.Str("InstanceInitiatedShutdownBehavior");
      i.spot = a.Str("InstanceMarketOptions.MarketType") == "spot";
      const uint64_t slot = ++launch_counter_;
      i.private_ip =
          "172.31." + std::to_string((slot / 250) % 256) + "." + std::to_string(slot % 250 + 4);

      InstanceSpec spec;
      spec.cloud = name_;
      spec.name = TagValue(tags, "Name").empty() ? i.id : TagValue(tags, "Name");
      spec.image = image;
      // The OSS-driver DLAMIs carry NVIDIA's open kernel modules, which do not drive Volta:
      // their release notes' supported_ec2_instances list no P3 (e.g. docs.amazonaws.cn/dlami/
      // latest/devguide/aws-deep-learning-ami-gpupt210oss-al2023-2026-09-21.html). EC2 still
      // launches it; the VM then shows no GPU.
      const bool driver_fits = !(std::string(type->gpu) == "V100" &&
                                 image_parameter.find("oss-nvidia-driver") != std::string::npos);
      if (type->gpu_count > 0 && driver_fits) {
        spec.gpu_type = type->testvm_gpu;
        spec.gpu_count = type->gpu_count;
      }
      spec.user_data = user_data;
      if (key) spec.ssh_public_keys.push_back(key->public_key);
      spec.ssh_user = "ubuntu";
      spec.reachable = ReachableOf(group_ids);
      spec.private_network = i.vpc_id;  // the VPC's instances share a network (docker)
      spec.faults = faults_.TakeBootFaults();
      try {
        i.backend_id = backend_->Create(spec);
      } catch (const BackendError& e) {
        return Error(500, "InsufficientInstanceCapacity",
                     std::string("Insufficient capacity (emulator backend: ") + e.what() + ")");
      }
      r.instance_ids.push_back(i.id);
      instances_[i.id] = i;
      members.push_back(&instances_[i.id]);
    }
    if (!token.empty()) reservations_[region_ + "|" + token] = r;
    return Xml(200, "RunInstancesResponse", ReservationXml(r, members));
  }

  // --- DescribeInstances (plugins/aws/REFERENCE.md §3.2, §3.3) ---
  bool Matches(Instance& i, const std::vector<Filter>& filters, std::string* bad) {
    for (const auto& f : filters) {
      if (auto t = TagFilter(f, i.tags)) {
        if (!*t) return false;
        continue;
      }
      std::vector<std::string> values;
      const auto st = StateOf(i);
      if (f.name == "instance-state-name") {
        values = {st.second};
      } else if (f.name == "instance-state-code") {
        values = {std::to_string(st.first)};
      } else if (f.name == "instance-id") {
        values = {i.id};
      } else if (f.name == "instance-type") {
        values = {i.type};
      } else if (f.name == "image-id") {
        values = {i.image_id};
      } else if (f.name == "key-name") {
        values = {i.key_name};
      } else if (f.name == "reservation-id") {
        values = {i.reservation_id};
      } else if (f.name == "availability-zone") {
        values = {i.az};
      } else if (f.name == "vpc-id") {
        values = {i.vpc_id};
      } else if (f.name == "subnet-id") {
        values = {i.subnet_id};
      } else if (f.name == "client-token") {
        values = {i.client_token};
      } else if (f.name == "instance.group-id" || f.name == "group-id") {
        values = i.group_ids;
      } else if (f.name == "ip-address") {
        values = {backend_->State(i.backend_id).public_ip};
      } else {
        *bad = f.name;
        return false;
      }
      bool any = false;
      for (const auto& v : values) any = any || AnyMatch(f.values, v);
      if (!any) return false;
    }
    return true;
  }

  HttpResponse DescribeInstances(const Args& a) {
    std::vector<std::string> ids = a.List("InstanceId");
    std::vector<Filter> filters = Filters(a);
    const std::string max_s = a.Str("MaxResults");
    if (!max_s.empty() && !ids.empty()) {
      return Error(400, "InvalidParameterCombination",
                   "The parameter instancesSet cannot be used with the parameter maxResults");
    }
    int max_results = 0;
    if (!max_s.empty()) {
      try {
        max_results = std::stoi(max_s);
      } catch (const std::exception&) {
      }
      if (max_results < 5 || max_results > 1000) {
        return BadParam("Value ( " + max_s +
                        " ) for parameter maxResults is invalid. Expecting a "
                        "value greater than 5.");
      }
    }
    std::vector<Instance*> chosen;
    if (!ids.empty()) {
      std::vector<std::string> missing;
      for (const auto& id : ids) {
        static const std::regex id_re("^i-[0-9a-f]{8}([0-9a-f]{9})?$");
        if (!std::regex_match(id, id_re)) {
          return Error(400, "InvalidInstanceID.Malformed", "Invalid id: \"" + id + "\"");
        }
        Instance* i = FindInstance(id);
        // Eventual consistency (setting describe_not_found): a new id is unknown at first.
        if (i && i->not_found_left > 0) {
          --i->not_found_left;
          i = nullptr;
        }
        if (!i) {
          missing.push_back(id);
        } else {
          chosen.push_back(i);
        }
      }
      if (!missing.empty()) {
        std::string list;
        for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
        return Error(400, "InvalidInstanceID.NotFound",
                     "The instance ID" + std::string(missing.size() > 1 ? "s '" : " '") + list +
                         (missing.size() > 1 ? "' do not exist" : "' does not exist"));
      }
    } else {
      for (auto& [id, i] : instances_) {
        if (i.region == region_) chosen.push_back(&i);
      }
    }
    std::vector<Instance*> matched;
    for (Instance* i : chosen) {
      std::string bad;
      if (Matches(*i, filters, &bad)) {
        matched.push_back(i);
      } else if (!bad.empty()) {
        return BadParam("The filter '" + bad + "' is invalid");
      }
    }
    std::sort(matched.begin(), matched.end(), [](Instance* x, Instance* y) {
      return x->launch_time != y->launch_time ? x->launch_time < y->launch_time : x->id < y->id;
    });
    size_t offset = 0;
    if (auto tok = a.Get("NextToken")) {
      auto decoded = Base64Decode(*tok);
      if (!decoded || decoded->rfind("offset:", 0) != 0) {
        return BadParam("The token '" + *tok + "' is invalid.");
      }
      offset = std::stoul(decoded->substr(7));
    }
    size_t end = max_results > 0 ? std::min(matched.size(), offset + max_results) : matched.size();
    std::string next;
    if (end < matched.size()) next = Base64Encode("offset:" + std::to_string(end));
    // Grouped by reservation, in order.
    std::vector<std::string> order;
    std::map<std::string, std::vector<Instance*>> by_reservation;
    for (size_t k = std::min(offset, matched.size()); k < end; ++k) {
      Instance* i = matched[k];
      if (!by_reservation.count(i->reservation_id)) order.push_back(i->reservation_id);
      by_reservation[i->reservation_id].push_back(i);
    }
    std::string items;
    for (const auto& rid : order) {
      Reservation r;
      r.id = rid;
      items += E("item", ReservationXml(r, by_reservation[rid]));
    }
    return Xml(200, "DescribeInstancesResponse",
               E("reservationSet", items) + (next.empty() ? "" : L("nextToken", next)));
  }

  // --- TerminateInstances (plugins/aws/REFERENCE.md §3.4) ---
  HttpResponse TerminateInstances(const Args& a) {
    std::vector<std::string> ids = a.List("InstanceId");
    if (ids.empty()) return Missing("InstanceId");
    for (const auto& id : ids) {
      if (!FindInstance(id)) {
        return Error(400, "InvalidInstanceID.NotFound",
                     "The instance ID '" + id + "' does not exist");
      }
    }
    std::string items;
    for (const auto& id : ids) {
      Instance& i = *FindInstance(id);
      auto previous = StateOf(i);
      if (i.phase == Phase::kLive) {
        i.phase = Phase::kShuttingDown;
        i.terminate_requested = Clock::now();
        backend_->Delete(i.backend_id);
        if (shutdown_seconds_ <= 0) {
          i.phase = Phase::kTerminated;
          i.terminated_at = Clock::now();
        }
      }
      items += E("item", L("instanceId", id) + StateXml("currentState", StateOf(i)) +
                             StateXml("previousState", previous));
    }
    return Xml(200, "TerminateInstancesResponse", E("instancesSet", items));
  }

  // --- StopInstances / StartInstances (EC2 API Reference, StopInstances and StartInstances:
  // InstanceId.N in, instancesSet of instanceId, currentState, previousState out; a wrong state
  // is 400 IncorrectInstanceState). Without an Elastic IP (this emulator has none) the public
  // IPv4 address is released at stop and a new one given at start: "We release your instance's
  // public IP address when it is stopped ... it receives a new public IP address when it is
  // started" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-instance-addressing.html).
  // The private address stays.
  HttpResponse StopOrStartInstances(const Args& a, bool stop) {
    std::vector<std::string> ids = a.List("InstanceId");
    if (ids.empty()) return Missing("InstanceId");
    for (const auto& id : ids) {
      Instance* i = FindInstance(id);
      if (!i) {
        return Error(400, "InvalidInstanceID.NotFound",
                     "The instance ID '" + id + "' does not exist");
      }
      const std::string state = StateOf(*i).second;
      const bool fits = stop ? state == "running" || state == "stopping" || state == "stopped"
                             : state == "stopped" || state == "running" || state == "pending";
      if (!fits) {
        return Error(400, "IncorrectInstanceState",
                     "The instance '" + id + "' is not in a state from which it can be " +
                         (stop ? "stopped." : "started."));
      }
    }
    std::string items;
    for (const auto& id : ids) {
      Instance& i = *FindInstance(id);
      const auto previous = StateOf(i);
      if (stop && previous.second == "running") {
        i.stop_requested = backend_->Stop(i.backend_id);
      } else if (!stop && previous.second == "stopped") {
        if (backend_->Start(i.backend_id, /*new_address=*/true)) i.stop_requested = false;
      }
      items += E("item", L("instanceId", id) + StateXml("currentState", StateOf(i)) +
                             StateXml("previousState", previous));
    }
    return Xml(200, std::string(stop ? "Stop" : "Start") + "InstancesResponse",
               E("instancesSet", items));
  }

  // --- key pairs (plugins/aws/REFERENCE.md §3.5) ---
  std::string Fingerprint(const std::string& type, const std::string& blob) {
    if (type == "ssh-ed25519") {
      // Imported ED25519 keys: base64 of the SHA-256 digest of the key.
      Sha256Engine e;
      e.update(blob);
      const auto& d = e.digest();
      return Base64Encode(std::string(d.begin(), d.end()));
    }
    // Imported RSA keys: MD5, colon hex (of the SSH blob here; EC2 digests the DER form).
    std::string hex = Md5Hex(blob), out;
    for (size_t k = 0; k < hex.size(); k += 2) out += (out.empty() ? "" : ":") + hex.substr(k, 2);
    return out;
  }

  std::string KeyXml(const KeyPair& k) {
    return L("keyPairId", k.id) + L("keyFingerprint", k.fingerprint) + L("keyName", k.name) +
           L("keyType", k.type == "ssh-ed25519" ? "ed25519" : "rsa") +
           (k.tags.empty() ? "" : TagSetXml(k.tags)) + L("createTime", Iso8601(k.created));
  }

  // Tags of TagSpecification.N entries for one resource type; an error for another type.
  std::optional<HttpResponse> TagsFor(const Args& a, const std::string& resource_type, Tags* out) {
    for (const auto& spec : a.Indexes("TagSpecification")) {
      const std::string rt = a.Str(spec + ".ResourceType");
      if (rt != resource_type) {
        return BadParam("'" + rt + "' is not a valid taggable resource type for this operation.");
      }
      for (const auto& t : a.Indexes(spec + ".Tag"))
        SetTag(*out, a.Str(t + ".Key"), a.Str(t + ".Value"));
    }
    return std::nullopt;
  }

  HttpResponse ImportKeyPair(const Args& a) {
    const std::string name = a.Str("KeyName");
    if (name.empty()) return Missing("KeyName");
    auto material = a.Get("PublicKeyMaterial");
    if (!material) return Missing("PublicKeyMaterial");
    auto decoded = Base64Decode(*material);
    std::optional<std::pair<std::string, std::string>> key;
    if (decoded) key = OpenSshKey(Trim(*decoded));
    if (!key)
      return Error(400, "InvalidKey.Format", "Key is not in valid OpenSSH public key format");
    if (FindKey(name)) {
      return Error(400, "InvalidKeyPair.Duplicate", "The keypair '" + name + "' already exists.");
    }
    Tags tags;
    if (auto e = TagsFor(a, "key-pair", &tags)) return *e;
    KeyPair k;
    k.id = "key-0" + RandomHex(8).substr(0, 16);
    k.name = name;
    k.region = region_;
    k.type = key->first;
    k.fingerprint = Fingerprint(key->first, key->second);
    k.public_key = Trim(*decoded);
    k.tags = tags;
    k.created = SysClock::now();
    keys_[k.id] = k;
    return Xml(200, "ImportKeyPairResponse",
               L("keyFingerprint", k.fingerprint) + L("keyName", k.name) + L("keyPairId", k.id) +
                   (tags.empty() ? "" : TagSetXml(tags)));
  }

  HttpResponse DescribeKeyPairs(const Args& a) {
    std::vector<std::string> names = a.List("KeyName");
    std::vector<std::string> ids = a.List("KeyPairId");
    for (const auto& n : names) {
      if (!FindKey(n)) {
        return Error(400, "InvalidKeyPair.NotFound", "The key pair '" + n + "' does not exist");
      }
    }
    std::vector<Filter> filters = Filters(a);
    std::string items;
    for (const auto& [id, k] : keys_) {
      if (k.region != region_) continue;
      if (!names.empty() && std::find(names.begin(), names.end(), k.name) == names.end()) continue;
      if (!ids.empty() && std::find(ids.begin(), ids.end(), k.id) == ids.end()) continue;
      bool ok = true;
      for (const auto& f : filters) {
        if (auto t = TagFilter(f, k.tags)) {
          ok = ok && *t;
        } else if (f.name == "key-name") {
          ok = ok && AnyMatch(f.values, k.name);
        } else if (f.name == "key-pair-id") {
          ok = ok && AnyMatch(f.values, k.id);
        } else if (f.name == "fingerprint") {
          ok = ok && AnyMatch(f.values, k.fingerprint);
        } else {
          return BadParam("The filter '" + f.name + "' is invalid");
        }
      }
      if (ok) items += E("item", KeyXml(k));
    }
    return Xml(200, "DescribeKeyPairsResponse", E("keySet", items));
  }

  HttpResponse DeleteKeyPair(const Args& a) {
    const std::string name = a.Str("KeyName"), id = a.Str("KeyPairId");
    if (name.empty() && id.empty()) return Missing("KeyName");
    for (auto it = keys_.begin(); it != keys_.end(); ++it) {
      if (it->second.region == region_ &&
          ((!name.empty() && it->second.name == name) || it->first == id)) {
        keys_.erase(it);
        break;
      }
    }
    // Succeeds for a name that does not exist, as EC2 does.
    return Xml(200, "DeleteKeyPairResponse", L("return", "true"));
  }

  // --- security groups (plugins/aws/REFERENCE.md §5) ---
  std::string RuleXml(const Rule& r) {
    std::string v4, v6;
    for (const auto& [cidr, d] : r.v4)
      v4 += E("item", L("cidrIp", cidr) + (d.empty() ? "" : L("description", d)));
    for (const auto& [cidr, d] : r.v6)
      v6 += E("item", L("cidrIpv6", cidr) + (d.empty() ? "" : L("description", d)));
    std::string x = L("ipProtocol", r.protocol);
    if (r.protocol != "-1")
      x += L("fromPort", std::to_string(r.from)) + L("toPort", std::to_string(r.to));
    std::string groups;
    for (const auto& gid : r.groups) {
      groups += E("item", L("groupId", gid) + L("userId", kOwnerId));
    }
    return x + E("groups", groups) + E("ipRanges", v4) + E("ipv6Ranges", v6) +
           E("prefixListIds", "");
  }

  std::string GroupXml(const Group& g) {
    std::string ingress;
    for (const auto& r : g.ingress) ingress += E("item", RuleXml(r));
    Rule all;
    all.protocol = "-1";
    all.v4 = {{"0.0.0.0/0", ""}};
    return L("ownerId", kOwnerId) + L("groupId", g.id) + L("groupName", g.name) +
           L("groupDescription", g.description) + L("vpcId", g.vpc_id) +
           E("ipPermissions", ingress) + E("ipPermissionsEgress", E("item", RuleXml(all))) +
           (g.tags.empty() ? "" : TagSetXml(g.tags));
  }

  HttpResponse CreateSecurityGroup(const Args& a) {
    const std::string name = a.Str("GroupName");
    const std::string description = a.Str("GroupDescription");
    if (name.empty()) return Missing("GroupName");
    if (description.empty()) return Missing("GroupDescription");
    if (name.size() > 255 || Lower(name).rfind("sg-", 0) == 0) {
      return BadParam("Group names may not be in the format sg-* and are at most 255 characters");
    }
    // VpcId: "Required for a nondefault VPC" (EC2 API reference, CreateSecurityGroup); without
    // it and without a default VPC: VPCIdNotSpecified.
    if (a.Str("VpcId").empty() && !default_vpc_) {
      return Error(400, "VPCIdNotSpecified", "No default VPC for this user");
    }
    const std::string vpc = a.Str("VpcId").empty() ? DefaultVpc(region_) : a.Str("VpcId");
    if (!VpcExists(region_, vpc)) {
      return Error(400, "InvalidVpcID.NotFound", "The vpc ID '" + vpc + "' does not exist");
    }
    if (FindGroupByName(name, vpc)) {
      return Error(400, "InvalidGroup.Duplicate",
                   "The security group '" + name + "' already exists for VPC '" + vpc + "'");
    }
    Tags tags;
    if (auto e = TagsFor(a, "security-group", &tags)) return *e;
    Group g;
    g.id = "sg-0" + RandomHex(8).substr(0, 16);
    g.name = name;
    g.description = description;
    g.region = region_;
    g.vpc_id = vpc;
    g.tags = tags;
    groups_[g.id] = g;
    return Xml(200, "CreateSecurityGroupResponse",
               L("return", "true") + L("groupId", g.id) + (tags.empty() ? "" : TagSetXml(tags)));
  }

  HttpResponse DescribeSecurityGroups(const Args& a) {
    std::vector<std::string> ids = a.List("GroupId");
    std::vector<std::string> names = a.List("GroupName");
    for (const auto& id : ids) {
      if (!FindGroup(id)) {
        return Error(400, "InvalidGroup.NotFound",
                     "The security group '" + id + "' does not exist");
      }
    }
    for (const auto& n : names) {
      if (!FindGroupByName(n)) {
        return Error(400, "InvalidGroup.NotFound",
                     "The security group '" + n + "' does not exist in default VPC '" +
                         DefaultVpc(region_) + "'");
      }
    }
    std::vector<Filter> filters = Filters(a);
    std::string items;
    for (const auto& [id, g] : groups_) {
      if (g.region != region_) continue;
      if (!ids.empty() && std::find(ids.begin(), ids.end(), g.id) == ids.end()) continue;
      if (!names.empty() && std::find(names.begin(), names.end(), g.name) == names.end()) continue;
      bool ok = true;
      for (const auto& f : filters) {
        if (auto t = TagFilter(f, g.tags)) {
          ok = ok && *t;
        } else if (f.name == "group-name") {
          ok = ok && AnyMatch(f.values, g.name);
        } else if (f.name == "group-id") {
          ok = ok && AnyMatch(f.values, g.id);
        } else if (f.name == "vpc-id") {
          ok = ok && AnyMatch(f.values, g.vpc_id);
        } else if (f.name == "description") {
          ok = ok && AnyMatch(f.values, g.description);
        } else if (f.name == "owner-id") {
          ok = ok && AnyMatch(f.values, kOwnerId);
        } else {
          return BadParam("The filter '" + f.name + "' is invalid");
        }
      }
      if (ok) items += E("item", GroupXml(g));
    }
    return Xml(200, "DescribeSecurityGroupsResponse", E("securityGroupInfo", items));
  }

  // The group of GroupId or GroupName, or an error response.
  std::variant<Group*, HttpResponse> TargetGroup(const Args& a) {
    if (!a.Str("GroupId").empty()) {
      Group* g = FindGroup(a.Str("GroupId"));
      if (!g) {
        return Error(400, "InvalidGroup.NotFound",
                     "The security group '" + a.Str("GroupId") + "' does not exist");
      }
      return g;
    }
    if (!a.Str("GroupName").empty()) {
      Group* g = FindGroupByName(a.Str("GroupName"));
      if (!g) {
        return Error(400, "InvalidGroup.NotFound",
                     "The security group '" + a.Str("GroupName") +
                         "' does not exist in default VPC '" + DefaultVpc(region_) + "'");
      }
      return g;
    }
    return Missing("GroupId");
  }

  static bool SameRange(const Rule& x, const Rule& y) {
    return x.protocol == y.protocol && (x.protocol == "-1" || (x.from == y.from && x.to == y.to));
  }

  HttpResponse AuthorizeIngress(const Args& a) {
    auto target = TargetGroup(a);
    if (auto* resp = std::get_if<HttpResponse>(&target)) return *resp;
    Group& g = *std::get<Group*>(target);
    std::vector<Rule> rules;
    auto parse_rule = [&](const std::string& proto_s, const std::string& from_s,
                          const std::string& to_s, Rule* r) -> std::optional<HttpResponse> {
      std::string proto = Lower(proto_s);
      if (proto == "6") proto = "tcp";
      if (proto == "17") proto = "udp";
      if (proto == "1") proto = "icmp";
      if (proto != "tcp" && proto != "udp" && proto != "icmp" && proto != "-1") {
        return BadParam("Invalid value '" + proto_s + "' for IP protocol. Unknown protocol.");
      }
      r->protocol = proto;
      if (proto != "-1") {
        try {
          r->from = std::stoi(from_s);
          r->to = std::stoi(to_s);
        } catch (const std::exception&) {
          return Error(
              400, "InvalidParameterValue",
              "Invalid value for portRange. Must specify both from and to ports with TCP/UDP.");
        }
        if ((proto == "tcp" || proto == "udp") &&
            (r->from < 0 || r->to > 65535 || r->from > r->to)) {
          return BadParam(
              "Invalid value for portRange. Must specify both from and to ports with "
              "TCP/UDP.");
        }
      }
      return std::nullopt;
    };
    // IpPermissions.N.* (the current form), or the older top-level parameters (the AWS CLI's
    // --protocol/--port/--cidr send these).
    for (const auto& p : a.Indexes("IpPermissions")) {
      Rule r;
      if (auto e = parse_rule(a.Str(p + ".IpProtocol"), a.Str(p + ".FromPort"),
                              a.Str(p + ".ToPort"), &r)) {
        return *e;
      }
      for (const auto& ip : a.Indexes(p + ".IpRanges")) {
        r.v4.emplace_back(a.Str(ip + ".CidrIp"), a.Str(ip + ".Description"));
      }
      for (const auto& ip : a.Indexes(p + ".Ipv6Ranges")) {
        r.v6.emplace_back(a.Str(ip + ".CidrIpv6"), a.Str(ip + ".Description"));
      }
      // UserIdGroupPairs (IpPermissions.N.Groups.M.GroupId): the group's members are the
      // source; the group must exist in the region (InvalidGroup.NotFound otherwise).
      for (const auto& gp : a.Indexes(p + ".Groups")) {
        const std::string gid = a.Str(gp + ".GroupId");
        if (!FindGroup(gid)) {
          return Error(400, "InvalidGroup.NotFound",
                       "The security group '" + gid + "' does not exist");
        }
        r.groups.push_back(gid);
      }
      rules.push_back(r);
    }
    if (rules.empty() && !a.Str("IpProtocol").empty()) {
      Rule r;
      if (auto e = parse_rule(a.Str("IpProtocol"), a.Str("FromPort"), a.Str("ToPort"), &r))
        return *e;
      if (!a.Str("CidrIp").empty()) r.v4.emplace_back(a.Str("CidrIp"), "");
      rules.push_back(r);
    }
    if (rules.empty()) return Missing("IpPermissions");
    static const std::regex v4_re("^\\d{1,3}(\\.\\d{1,3}){3}/\\d{1,2}$");
    for (const auto& r : rules) {
      if (r.v4.empty() && r.v6.empty() && r.groups.empty()) {
        return Missing("IpPermissions.N.IpRanges (a source is required)");
      }
      for (const auto& [cidr, d] : r.v4) {
        if (!std::regex_match(cidr, v4_re)) {
          return BadParam("CIDR block " + cidr + " is malformed");
        }
      }
    }
    // One existing (range, source) pair fails the whole call (plugins/aws/REFERENCE.md §5).
    for (const auto& r : rules) {
      for (const auto& have : g.ingress) {
        if (!SameRange(have, r)) continue;
        for (const auto& [cidr, d] : r.v4) {
          for (const auto& [c2, d2] : have.v4) {
            if (cidr == c2) {
              return Error(400, "InvalidPermission.Duplicate",
                           "the specified rule \"peer: " + cidr + ", " +
                               (r.protocol == "-1"           ? std::string("ALL")
                                : Lower(r.protocol) == "tcp" ? "TCP"
                                                             : r.protocol) +
                               ", from port: " + std::to_string(r.from) +
                               ", to port: " + std::to_string(r.to) + ", ALLOW\" already exists");
            }
          }
        }
        for (const auto& gid : r.groups) {
          if (std::find(have.groups.begin(), have.groups.end(), gid) != have.groups.end()) {
            return Error(400, "InvalidPermission.Duplicate",
                         "the specified rule \"peer: " + gid + ", " + (r.protocol == "udp" ? std::string("UDP") : std::string("TCP")) +
                             ", from port: " + std::to_string(r.from) +
                             ", to port: " + std::to_string(r.to) + ", ALLOW\" already exists");
          }
        }
        for (const auto& [cidr, d] : r.v6) {
          for (const auto& [c2, d2] : have.v6) {
            if (cidr == c2) {
              return Error(400, "InvalidPermission.Duplicate",
                           "the specified rule \"peer: " + cidr +
                               ", TCP, from port: " + std::to_string(r.from) +
                               ", to port: " + std::to_string(r.to) + ", ALLOW\" already exists");
            }
          }
        }
      }
    }
    std::string items;
    for (auto r : rules) {
      r.rule_id = "sgr-0" + RandomHex(8).substr(0, 16);
      bool merged = false;
      for (auto& have : g.ingress) {
        if (SameRange(have, r)) {
          have.v4.insert(have.v4.end(), r.v4.begin(), r.v4.end());
          have.v6.insert(have.v6.end(), r.v6.begin(), r.v6.end());
          have.groups.insert(have.groups.end(), r.groups.begin(), r.groups.end());
          merged = true;
        }
      }
      if (!merged) g.ingress.push_back(r);
      for (const auto& [cidr, d] : r.v4) {
        items += E("item", L("securityGroupRuleId", r.rule_id) + L("groupId", g.id) +
                               L("groupOwnerId", kOwnerId) + L("isEgress", "false") +
                               L("ipProtocol", r.protocol) + L("fromPort", std::to_string(r.from)) +
                               L("toPort", std::to_string(r.to)) + L("cidrIpv4", cidr));
      }
      for (const auto& gid : r.groups) {
        items += E("item", L("securityGroupRuleId", r.rule_id) + L("groupId", g.id) +
                               L("groupOwnerId", kOwnerId) + L("isEgress", "false") +
                               L("ipProtocol", r.protocol) + L("fromPort", std::to_string(r.from)) +
                               L("toPort", std::to_string(r.to)) +
                               E("referencedGroupInfo", L("groupId", gid) + L("userId", kOwnerId)));
      }
    }
    ApplyGroups();
    return Xml(200, "AuthorizeSecurityGroupIngressResponse",
               L("return", "true") + E("securityGroupRuleSet", items));
  }

  // IpPermissions.N with IpProtocol, FromPort, ToPort and IpRanges.M.CidrIp: each (range,
  // source) pair must exist (else InvalidPermission.NotFound, nothing removed).
  HttpResponse RevokeIngress(const Args& a) {
    auto target = TargetGroup(a);
    if (auto* resp = std::get_if<HttpResponse>(&target)) return *resp;
    Group& g = *std::get<Group*>(target);
    std::vector<std::pair<Rule, std::string>> doomed;  // range, cidr
    for (const auto& p : a.Indexes("IpPermissions")) {
      Rule r;
      r.protocol = Lower(a.Str(p + ".IpProtocol"));
      if (r.protocol == "6") r.protocol = "tcp";
      if (r.protocol != "-1") {
        try {
          r.from = std::stoi(a.Str(p + ".FromPort"));
          r.to = std::stoi(a.Str(p + ".ToPort"));
        } catch (const std::exception&) {
          return Error(
              400, "InvalidParameterValue",
              "Invalid value for portRange. Must specify both from and to ports with TCP/UDP.");
        }
      }
      for (const auto& ip : a.Indexes(p + ".IpRanges")) doomed.emplace_back(r, a.Str(ip + ".CidrIp"));
      for (const auto& ip : a.Indexes(p + ".Ipv6Ranges")) {
        doomed.emplace_back(r, a.Str(ip + ".CidrIpv6"));
      }
      for (const auto& gp : a.Indexes(p + ".Groups")) doomed.emplace_back(r, a.Str(gp + ".GroupId"));
    }
    if (doomed.empty()) return Missing("IpPermissions");
    for (const auto& [r, cidr] : doomed) {
      bool found = false;
      for (const auto& have : g.ingress) {
        if (!SameRange(have, r)) continue;
        for (const auto& [c, d] : have.v4) found = found || c == cidr;
        for (const auto& [c, d] : have.v6) found = found || c == cidr;
        for (const auto& gid : have.groups) found = found || gid == cidr;
      }
      if (!found) {
        return Error(400, "InvalidPermission.NotFound",
                     "The specified rule does not exist in this security group.");
      }
    }
    for (const auto& [r, cidr] : doomed) {
      for (auto& have : g.ingress) {
        if (!SameRange(have, r)) continue;
        // cidr by an init-capture: clang 14 cannot capture a structured binding.
        std::erase_if(have.v4, [&, cidr = cidr](const auto& pair) { return pair.first == cidr; });
        std::erase_if(have.v6, [&, cidr = cidr](const auto& pair) { return pair.first == cidr; });
        std::erase_if(have.groups, [&, cidr = cidr](const auto& gid) { return gid == cidr; });
      }
    }
    std::erase_if(g.ingress,
                  [](const Rule& r) { return r.v4.empty() && r.v6.empty() && r.groups.empty(); });
    ApplyGroups();
    return Xml(200, "RevokeSecurityGroupIngressResponse", L("return", "true"));
  }

  HttpResponse DeleteSecurityGroup(const Args& a) {
    auto target = TargetGroup(a);
    if (auto* resp = std::get_if<HttpResponse>(&target)) return *resp;
    Group& g = *std::get<Group*>(target);
    if (g.is_default) {
      return Error(
          400, "CannotDelete",
          "the specified group: \"" + g.id + "\" name: \"default\" cannot be deleted by a user");
    }
    for (auto& [id, i] : instances_) {
      if (i.phase == Phase::kTerminated) continue;
      if (std::find(i.group_ids.begin(), i.group_ids.end(), g.id) != i.group_ids.end()) {
        return Error(400, "DependencyViolation", "resource " + g.id + " has a dependent object");
      }
    }
    groups_.erase(g.id);
    return Xml(200, "DeleteSecurityGroupResponse", L("return", "true"));
  }

  HttpResponse CreateTags(const Args& a) {
    std::vector<std::string> ids = a.List("ResourceId");
    if (ids.empty()) return Missing("ResourceId");
    Tags tags;
    for (const auto& t : a.Indexes("Tag"))
      tags.emplace_back(a.Str(t + ".Key"), a.Str(t + ".Value"));
    for (const auto& id : ids) {
      Tags* target = nullptr;
      if (Instance* i = FindInstance(id)) target = &i->tags;
      if (Group* g = FindGroup(id)) target = &g->tags;
      for (auto& [kid, k] : keys_) {
        if (kid == id && k.region == region_) target = &k.tags;
      }
      if (!target) {
        const std::string kind = id.rfind("i-", 0) == 0    ? "InvalidInstanceID.NotFound"
                                 : id.rfind("sg-", 0) == 0 ? "InvalidGroup.NotFound"
                                                           : "InvalidID";
        return Error(400, kind, "The ID '" + id + "' does not exist");
      }
      for (const auto& [k, v] : tags) SetTag(*target, k, v);
    }
    return Xml(200, "CreateTagsResponse", L("return", "true"));
  }

  // --- catalogue (plugins/aws/REFERENCE.md §3.6) ---
  std::string TypeXml(const TypeDef& t) {
    std::string x = L("instanceType", t.name) + L("currentGeneration", "true") +
                    E("supportedUsageClasses", E("item", "on-demand") + E("item", "spot")) +
                    E("processorInfo", E("supportedArchitectures", E("item", "x86_64"))) +
                    E("vCpuInfo", L("defaultVCpus", std::to_string(t.vcpus))) +
                    E("memoryInfo", L("sizeInMiB", std::to_string(t.memory_mib)));
    if (t.gpu_count > 0) {
      x += E("gpuInfo",
             E("gpus",
               E("item", L("name", t.gpu) + L("manufacturer", "NVIDIA") +
                             L("count", std::to_string(t.gpu_count)) +
                             E("memoryInfo", L("sizeInMiB", std::to_string(t.gpu_memory_mib))))) +
                 L("totalGpuMemoryInMiB", std::to_string(t.gpu_memory_mib * t.gpu_count)));
    }
    return x;
  }

  HttpResponse DescribeInstanceTypes(const Args& a) {
    std::vector<std::string> names = a.List("InstanceType");
    std::vector<std::string> unknown;
    for (const auto& n : names) {
      if (!FindType(n)) unknown.push_back(n);
    }
    if (!unknown.empty()) {
      std::string list;
      for (const auto& u : unknown) list += (list.empty() ? "" : ", ") + u;
      return Error(400, "InvalidInstanceType",
                   "The following supplied instance types do not exist: [" + list + "]");
    }
    std::vector<Filter> filters = Filters(a);
    std::string items;
    for (const auto& t : Types()) {
      if (!names.empty() && std::find(names.begin(), names.end(), t.name) == names.end()) continue;
      bool ok = true;
      for (const auto& f : filters) {
        if (f.name == "instance-type") {
          ok = ok && AnyMatch(f.values, t.name);
        } else if (f.name == "current-generation") {
          ok = ok && AnyMatch(f.values, "true");
        } else {
          return BadParam("The filter '" + f.name + "' is invalid");
        }
      }
      if (ok) items += E("item", TypeXml(t));
    }
    return Xml(200, "DescribeInstanceTypesResponse", E("instanceTypeSet", items));
  }

  HttpResponse DescribeInstanceTypeOfferings(const Args& a) {
    const std::string location_type =
        a.Str("LocationType").empty() ? "region" : a.Str("LocationType");
    if (location_type != "region" && location_type != "availability-zone") {
      return BadParam("Invalid value '" + location_type + "' for LocationType");
    }
    std::vector<Filter> filters = Filters(a);
    std::vector<std::string> locations = {region_};
    if (location_type == "availability-zone")
      locations = {region_ + "a", region_ + "b", region_ + "c"};
    std::string items;
    for (const auto& t : Types()) {
      if (!OfferedIn(t, region_)) continue;
      for (const auto& loc : locations) {
        bool ok = true;
        for (const auto& f : filters) {
          if (f.name == "instance-type") {
            ok = ok && AnyMatch(f.values, t.name);
          } else if (f.name == "location") {
            ok = ok && AnyMatch(f.values, loc);
          } else {
            return BadParam("The filter '" + f.name + "' is invalid");
          }
        }
        if (ok) {
          items += E("item", L("instanceType", t.name) + L("locationType", location_type) +
                                 L("location", loc));
        }
      }
    }
    return Xml(200, "DescribeInstanceTypeOfferingsResponse", E("instanceTypeOfferingSet", items));
  }

  // --- Spot prices (EC2 API reference, DescribeSpotPriceHistory: spotPriceHistorySet items of
  // availabilityZone, instanceType, productDescription, spotPrice, timestamp; with StartTime
  // now, the price in effect now per zone). The prices are this emulator's own market, not
  // AWS's: $0.05 per vCPU plus $0.25 per GPU an hour, 2% dearer per zone after "a". ---
  HttpResponse DescribeSpotPriceHistory(const Args& a) {
    const std::vector<std::string> types = a.List("InstanceType");
    std::string items;
    for (const auto& t : Types()) {
      if (!OfferedIn(t, region_)) continue;
      if (!types.empty() && std::find(types.begin(), types.end(), t.name) == types.end()) continue;
      int zone = 0;
      for (const char* suffix : {"a", "b", "c"}) {
        const double price = (0.05 * t.vcpus + 0.25 * t.gpu_count) * (1 + 0.02 * zone++);
        char text[32];
        std::snprintf(text, sizeof text, "%.6f", price);
        items += E("item", L("availabilityZone", region_ + suffix) + L("instanceType", t.name) +
                               L("productDescription", "Linux/UNIX") + L("spotPrice", text) +
                               L("timestamp", Iso8601(SysClock::now())));
      }
    }
    return Xml(200, "DescribeSpotPriceHistoryResponse",
               L("nextToken", "") + E("spotPriceHistorySet", items));
  }

  // --- VPCs and subnets (EC2 API reference, DescribeVpcs / DescribeSubnets: vpcSet and
  // subnetSet items; the filters named there that a client of gpuprov's kind uses) ---
  HttpResponse DescribeVpcs(const Args& a) {
    const std::vector<std::string> ids = a.List("VpcId");
    for (const auto& id : ids) {
      if (!VpcExists(region_, id)) {
        return Error(400, "InvalidVpcID.NotFound", "The vpc ID '" + id + "' does not exist");
      }
    }
    std::string items;
    for (const auto& [id, cidr, is_default] : Vpcs(region_)) {
      if (!ids.empty() && std::find(ids.begin(), ids.end(), id) == ids.end()) continue;
      bool ok = true;
      for (const auto& f : Filters(a)) {
        if (f.name == "isDefault" || f.name == "is-default") {
          ok = ok && AnyMatch(f.values, is_default ? "true" : "false");
        } else if (f.name == "vpc-id") {
          ok = ok && AnyMatch(f.values, id);
        } else if (f.name == "state") {
          ok = ok && AnyMatch(f.values, "available");
        } else if (f.name == "cidr" || f.name == "cidr-block-association.cidr-block") {
          ok = ok && AnyMatch(f.values, cidr);
        } else if (f.name == "owner-id") {
          ok = ok && AnyMatch(f.values, kOwnerId);
        } else {
          return BadParam("The filter '" + f.name + "' is invalid");
        }
      }
      if (!ok) continue;
      items += E("item", L("vpcId", id) + L("ownerId", kOwnerId) + L("state", "available") +
                             L("cidrBlock", cidr) + L("dhcpOptionsId", "dopt-0" + Md5Hex("dopt|" + region_).substr(0, 16)) +
                             L("instanceTenancy", "default") +
                             L("isDefault", is_default ? "true" : "false"));
    }
    return Xml(200, "DescribeVpcsResponse", E("vpcSet", items));
  }

  HttpResponse DescribeSubnets(const Args& a) {
    const std::vector<std::string> ids = a.List("SubnetId");
    for (const auto& id : ids) {
      if (!FindSubnet(id)) {
        return Error(400, "InvalidSubnetID.NotFound", "The subnet ID '" + id + "' does not exist");
      }
    }
    std::string items;
    for (const Subnet& sn : Subnets(region_)) {
      if (!ids.empty() && std::find(ids.begin(), ids.end(), sn.id) == ids.end()) continue;
      bool ok = true;
      for (const auto& f : Filters(a)) {
        if (f.name == "vpc-id") {
          ok = ok && AnyMatch(f.values, sn.vpc_id);
        } else if (f.name == "subnet-id") {
          ok = ok && AnyMatch(f.values, sn.id);
        } else if (f.name == "availability-zone" || f.name == "availabilityZone") {
          ok = ok && AnyMatch(f.values, sn.az);
        } else if (f.name == "default-for-az" || f.name == "defaultForAz") {
          ok = ok && AnyMatch(f.values, sn.default_for_az ? "true" : "false");
        } else if (f.name == "map-public-ip-on-launch") {
          ok = ok && AnyMatch(f.values, sn.map_public_ip ? "true" : "false");
        } else if (f.name == "state") {
          ok = ok && AnyMatch(f.values, "available");
        } else if (f.name == "owner-id") {
          ok = ok && AnyMatch(f.values, kOwnerId);
        } else {
          return BadParam("The filter '" + f.name + "' is invalid");
        }
      }
      if (!ok) continue;
      items += E("item",
                 L("subnetId", sn.id) +
                     L("subnetArn", "arn:aws:ec2:" + region_ + ":" + kOwnerId + ":subnet/" + sn.id) +
                     L("state", "available") + L("ownerId", kOwnerId) + L("vpcId", sn.vpc_id) +
                     L("cidrBlock", sn.cidr) + L("availableIpAddressCount", "4091") +
                     L("availabilityZone", sn.az) +
                     L("availabilityZoneId", sn.az.substr(0, 3) + "-az" +
                                                 std::string(1, sn.az.back() - 'a' + '1')) +
                     L("defaultForAz", sn.default_for_az ? "true" : "false") +
                     L("mapPublicIpOnLaunch", sn.map_public_ip ? "true" : "false"));
    }
    return Xml(200, "DescribeSubnetsResponse", E("subnetSet", items));
  }

  HttpResponse DescribeRegions() {
    std::string items;
    for (const auto& r : Regions()) {
      items += E("item", L("regionName", r) + L("regionEndpoint", "ec2." + r + ".amazonaws.com") +
                             L("optInStatus", "opt-in-not-required"));
    }
    return Xml(200, "DescribeRegionsResponse", E("regionInfo", items));
  }

  HttpResponse DescribeAvailabilityZones() {
    std::string items;
    for (const char* z : {"a", "b", "c"}) {
      items += E("item",
                 L("zoneName", region_ + z) + L("zoneState", "available") +
                     L("regionName", region_) + E("messageSet", "") +
                     L("zoneId", region_.substr(0, 3) + "-az" + std::string(1, z[0] - 'a' + '1')));
    }
    return Xml(200, "DescribeAvailabilityZonesResponse", E("availabilityZoneInfo", items));
  }

  std::mutex mu_;
  std::map<std::string, std::string> secrets_;  // access key id -> secret
  std::map<std::string, Session> session_tokens_;  // temporary access key id -> its session
  std::map<std::string, SysClock::time_point> imds_tokens_;
  std::set<std::string> sso_tokens_ = {"emulator-aws-sso-token"};
  std::string container_token_ = "emulator-aws-container-token";
  std::string instance_role_ = "emulator-instance-role";
  int64_t issued_ = 0;             // temporary credentials issued
  std::map<std::string, Instance> instances_;
  // What each instance's private address was last told (ApplyPrivateIngress).
  std::map<std::string, PrivateIngress> told_ingress_;
  std::map<std::string, Reservation> reservations_;  // region|ClientToken
  std::map<std::string, KeyPair> keys_;
  std::map<std::string, Group> groups_;
  std::string region_;  // of the request being routed (under mu_)
  int describe_not_found_ = 0;
  double shutdown_seconds_ = 1.0;
  bool default_vpc_ = true;  // setting default_vpc
  uint64_t launch_counter_ = 0;
};

}  // namespace

const std::map<std::string, Ec2ActionShape>& Ec2ActionShapes() {
  static const std::map<std::string, Ec2ActionShape> shapes = [] {
    std::map<std::string, Ec2ActionShape> out;
    for (const auto& [action, text] : ShapeSource()) {
      Ec2ActionShape& shape = out[action];
      std::istringstream words(text);
      std::string w;
      while (words >> w) {
        if (w.back() == '!') {
          shape.required.push_back(w.substr(0, w.size() - 1));
        } else {
          const size_t colon = w.rfind(':');
          shape.params.push_back(Ec2Param{w.substr(0, colon), w.back()});
        }
      }
    }
    return out;
  }();
  return shapes;
}

std::string Ec2ParamPattern(const std::string& name) {
  std::string out;
  for (const std::string& part : Split(name, '.')) {
    const bool index = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    out += (out.empty() ? "" : ".") + (index ? std::string("N") : part);
  }
  return out;
}

std::unique_ptr<CloudApi> MakeEc2Api(InstanceBackend* backend, CloudOptions options) {
  return std::make_unique<Ec2Api>(backend, std::move(options));
}

}  // namespace gpuprov::emulator
