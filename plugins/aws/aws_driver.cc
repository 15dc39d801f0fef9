// SPDX-License-Identifier: Apache-2.0
#include "aws_driver.h"

#include <Poco/JSON/Array.h>

#include <algorithm>
#include <ctime>
#include <random>
#include <set>
#include <sstream>

#include "driver_kit.h"
#include "ec2_instance_types.h"

namespace gpuprov::aws {
namespace {

namespace kit = gpuprov::drivers;

// What a VM powered off from inside still costs (gpuprov's TTL on the node powers it off),
// from REFERENCE.md: the driver launches with InstanceInitiatedShutdownBehavior=terminate, so a
// VM powered off from inside is terminated, and its root volume (DeleteOnTermination) with it.
constexpr kit::PoweredOffCost kPoweredOffCost = kit::PoweredOffCost::kNone;

using namespace gpuprov::drivers::prelude;  // DriverError, json, Array, Object
using kit::Base64;
using kit::kManagedTag;
using kit::kNameTag;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr const char* kSshUser = "ubuntu";  // DLAMI Ubuntu and Ubuntu AMIs (REFERENCE.md §9)
constexpr int kPageSize = 200;
constexpr int kMaxPages = 50;

// 1-63 of [A-Za-z0-9-], starting and ending with a letter or digit: usable as a host name, a
// tag value and in the names "gpuprov-<name>" of the security group and key pair.
const kit::VmNameRules kVmNameRules{.what = "an AWS instance name", .max_length = 63};

std::string ResourceName(const std::string& vm_name) { return kit::kResourcePrefix + vm_name; }
// The cluster's security group: "-peers" after the cluster name, since the server VM's own
// group is gpuprov-<cluster>.
std::string ClusterGroupName(const std::string& cluster) {
  return kit::ClusterResourceName(cluster) + "-peers";
}

std::string RandomHex(size_t n) {
  static const char* digits = "0123456789abcdef";
  std::random_device rd;
  std::string s;
  for (size_t i = 0; i < n; ++i) s += digits[rd() % 16];
  return s;
}

std::map<std::string, std::string> TagsOf(const XmlNode& resource) {
  std::map<std::string, std::string> tags;
  for (const XmlNode* t : resource.Items("tagSet")) tags[t->Text("key")] = t->Text("value");
  return tags;
}

bool Managed(const XmlNode& instance) {
  auto tags = TagsOf(instance);
  auto it = tags.find(kManagedTag);
  return it != tags.end() && it->second == "1";
}

// EC2 state name -> the protocol's five words.
std::string StateOf(const std::string& ec2_state) {
  if (ec2_state == "pending") return "pending";
  if (ec2_state == "running") return "running";
  if (ec2_state == "stopping" || ec2_state == "stopped") return "stopped";
  if (ec2_state == "shutting-down" || ec2_state == "terminated") return "terminated";
  return "error";
}

bool Gone(const XmlNode& instance) {
  const std::string s = instance.Text("instanceState/name");
  return s == "shutting-down" || s == "terminated";
}

// EC2 User Guide, "Spot Instance interruptions": EC2 took the Spot Instance back; with the
// interruption behaviour terminate (the driver's), it shuts down and terminates with the state
// reason Server.SpotInstanceTermination.
constexpr const char* kSpotTerminationCode = "Server.SpotInstanceTermination";

// "2026-12-06T12:00:00Z": an EC2 timestamp parameter (ISO 8601, UTC).
std::string NowIso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

bool Preempted(const XmlNode& instance) {
  return Gone(instance) && instance.Text("stateReason/code") == kSpotTerminationCode;
}

// "<region>/<instance-id>" <-> parts; a bare id has no region.
std::pair<std::string, std::string> SplitId(const std::string& id) {
  size_t slash = id.find('/');
  if (slash == std::string::npos) return {"", id};
  return {id.substr(0, slash), id.substr(slash + 1)};
}

// TagSpecification.<n>.* for one resource type.
void AddTagSpec(Params& params, int n, const std::string& resource_type,
                const std::map<std::string, std::string>& tags) {
  const std::string base = "TagSpecification." + std::to_string(n);
  params.emplace_back(base + ".ResourceType", resource_type);
  int i = 1;
  for (const auto& [k, v] : tags) {
    params.emplace_back(base + ".Tag." + std::to_string(i) + ".Key", k);
    params.emplace_back(base + ".Tag." + std::to_string(i) + ".Value", v);
    ++i;
  }
}

// True when the group's ingress opens tcp `port` to some IPv4 source (`world`: to 0.0.0.0/0).
// Only IPv4 ranges count: gpuprov reaches the VM at its public IPv4 address, and a rule open
// only to ::/0 lets none of that in.
bool PortOpen(const XmlNode* group, int port, bool world = false) {
  if (group == nullptr) return false;
  for (const XmlNode* perm : group->Items("ipPermissions")) {
    const std::string proto = perm->Text("ipProtocol");
    if (proto != "tcp" && proto != "-1") continue;
    bool everyone = false;
    for (const XmlNode* r : perm->Items("ipRanges")) everyone = everyone || r->Text("cidrIp") == "0.0.0.0/0";
    if (world && !everyone) continue;
    if (perm->Items("ipRanges").empty()) continue;
    if (proto == "-1") return true;
    try {
      if (std::stoi(perm->Text("fromPort")) <= port && port <= std::stoi(perm->Text("toPort"))) {
        return true;
      }
    } catch (const std::exception&) {
    }
  }
  return false;
}

// What to do in an account (region) without a default VPC.
std::string NoDefaultVpcHint(const std::string& region) {
  return "The account has no default VPC in " + region +
         ", and gpuprov launches into the default VPC unless told otherwise: set subnet_id "
         "(a subnet with a route to an internet gateway; its VPC is found from it) or vpc_id in "
         "[clouds.aws] of ~/.gpu-provisioner/config.toml, or create a default VPC (`aws ec2 "
         "create-default-vpc --region " +
         region + "`)";
}

// What a refused EC2 call's message ends with: the first row matching its status and code
// (kit::HintFor); {region} is the call's region, {origin} and {key} the credentials' origin and
// masked access key id.
const std::vector<kit::ErrorHint>& Ec2Hints() {
  static const std::vector<kit::ErrorHint> hints = [] {
    const std::string image_hint =
        ". That image is not available in {region} (an AMI of another region, or a DLAMI not "
        "published there): give an AMI of {region} with --image (or `image` in [clouds.aws]), "
        "or choose another region";
    const std::string network_hint =
        ". Check subnet_id and vpc_id in [clouds.aws]: they must name a subnet and VPC of this "
        "account in {region}";
    return std::vector<kit::ErrorHint>{
        {.status = GPUPROV_STATUS_AUTH,
         .text = ". AWS refused the credentials from {origin} (access key {key}): check them "
                 "(`aws sts get-caller-identity`), or set AWS_ACCESS_KEY_ID/"
                 "AWS_SECRET_ACCESS_KEY or AWS_PROFILE; the IAM user needs ec2:RunInstances, "
                 "ec2:Describe*, ec2:TerminateInstances, ec2:CreateTags, ec2:*SecurityGroup*, "
                 "ec2:ImportKeyPair and ec2:DeleteKeyPair, and ssm:GetParameters for the "
                 "default images (EC2 resolves their resolve:ssm: ids)"},
        {.status = GPUPROV_STATUS_INVALID_INPUT,
         .code = "InvalidAMIID.NotFound",
         .text = image_hint},
        {.status = GPUPROV_STATUS_INVALID_INPUT,
         .code = "InvalidAMIID.Unavailable",
         .text = image_hint},
        {.status = GPUPROV_STATUS_INVALID_INPUT,
         .code = "Unsupported",
         .text = ". EC2 does not support this combination of instance type, image and "
                 "settings in {region}: choose another GPU type or image"},
        {.status = GPUPROV_STATUS_INVALID_INPUT,
         .code = "VPCIdNotSpecified",
         .text = ". " + NoDefaultVpcHint("{region}")},
        {.status = GPUPROV_STATUS_INVALID_INPUT,
         .code = "InvalidSubnetID.NotFound",
         .text = network_hint},
        {.status = GPUPROV_STATUS_INVALID_INPUT,
         .code = "InvalidVpcID.NotFound",
         .text = network_hint},
        {.status = GPUPROV_STATUS_CAPACITY,
         .text = ". AWS has no capacity for this instance type in {region} right now: retry "
                 "later, or choose another region (--region) or GPU type"},
        {.status = GPUPROV_STATUS_QUOTA,
         .text = ". The account's EC2 quota does not allow it: request a higher limit in the "
                 "Service Quotas console (EC2 \"Running On-Demand G and VT instances\" or "
                 "\"Running On-Demand P instances\", counted in vCPUs) for {region}"},
        {.status = GPUPROV_STATUS_TRANSIENT, .text = ". EC2 kept failing; retry later"}};
  }();
  return hints;
}

}  // namespace

AwsDriver::AwsDriver(const gpuprov::sdk::InitContext& ctx) : host_(ctx.host) {
  kit::DriverSettings settings = kit::ParseSettings(ctx.config_json);
  endpoint_ = settings.endpoint;
  config_ = settings.config;
  profile_ = json::Str(config_, "profile");
  EnvLookup env = ProcessEnv();
  default_region_ = ResolveRegion(env, "", json::Str(config_, "region"), profile_);
  if (Array::Ptr regions = json::Arr(config_, "regions")) {
    for (size_t i = 0; i < regions->size(); ++i) {
      extra_regions_.push_back(regions->get(static_cast<unsigned>(i)).convert<std::string>());
    }
  }
  image_override_ = json::Str(config_, "image");
  vpc_id_ = json::Str(config_, "vpc_id");
  subnet_id_ = json::Str(config_, "subnet_id");
  consistency_grace_ = milliseconds(json::Int(config_, "consistency_grace_seconds", 60) * 1000);
  delete_wait_ = kit::DeleteWaitSetting(config_, std::chrono::seconds(600));
  poll_interval_ = kit::PollIntervalSetting(config_, milliseconds(2000));
  // The SDKs' endpoint variables, after gpuprov's own (GPUPROV_AWS_ENDPOINT / endpoint).
  if (endpoint_.empty()) endpoint_ = EndpointOverride(env, "EC2");
  drivers::HttpClientOptions http_options;
  if (auto ca = env("AWS_CA_BUNDLE")) http_options.ca_file = *ca;
  ec2_ = std::make_unique<Ec2Client>(endpoint_, kit::RetryPolicyFrom(config_), host_,
                                     [this] { return LoadCredentials(); }, nullptr,
                                     http_options);
}

AwsCredentials AwsDriver::LoadCredentials() const {
  CredentialOptions options;
  options.region = default_region_;
  options.policy = kit::RetryPolicyFrom(config_);
  options.host = host_;
  CredentialLookup found = ResolveCredentials(ProcessEnv(), profile_, options);
  if (!found.credentials) throw DriverError(GPUPROV_STATUS_AUTH, found.problem);
  host_.Debug("AWS credentials from " + found.credentials->origin + " (access key " +
              MaskKeyId(found.credentials->access_key_id) + ")");
  return *found.credentials;
}

void AwsDriver::Sleep(milliseconds d) const { kit::SleepOrCancel(host_, d, "waiting for EC2"); }

XmlNode AwsDriver::Call(const std::string& region, const std::string& action,
                        const Params& params) {
  try {
    return ec2_->Call(region, action, params);
  } catch (const Ec2Error& e) {
    Raise(region, e);
  }
}

void AwsDriver::Raise(const std::string& region, const Ec2Error& e) {
  const gpuprov_type_status status = StatusOfError(e.http_status(), e.code(), e.message());
  const std::string hint = kit::HintFor(
      Ec2Hints(), e.http_status(), status, e.code(),
      [&](std::string_view name) -> std::optional<std::string> {
        if (name == "region") return region;
        if (name == "origin") return ec2_->credentials().origin;
        if (name == "key") return MaskKeyId(ec2_->credentials().access_key_id);
        return std::nullopt;
      });
  throw DriverError(status, e.what() + hint);
}

std::vector<XmlNode> AwsDriver::DescribeInstances(const std::string& region, const Params& params) {
  std::vector<XmlNode> out;
  std::string token;
  const bool by_id = std::any_of(params.begin(), params.end(), [](const auto& p) {
    return p.first.rfind("InstanceId.", 0) == 0;
  });
  for (int page = 0; page < kMaxPages; ++page) {
    Params p = params;
    if (!by_id) p.emplace_back("MaxResults", std::to_string(kPageSize));
    if (!token.empty()) p.emplace_back("NextToken", token);
    XmlNode doc = Call(region, "DescribeInstances", p);
    for (const XmlNode* reservation : doc.Items("reservationSet")) {
      for (const XmlNode* instance : reservation->Items("instancesSet")) out.push_back(*instance);
    }
    token = doc.Text("nextToken");
    if (token.empty()) break;
  }
  return out;
}

std::optional<XmlNode> AwsDriver::FindByName(const std::string& region, const std::string& name,
                                             bool* foreign) {
  if (foreign) *foreign = false;
  Params p = {{"Filter.1.Name", "tag:Name"},
              {"Filter.1.Value.1", name},
              {"Filter.2.Name", "instance-state-name"},
              {"Filter.2.Value.1", "pending"},
              {"Filter.2.Value.2", "running"},
              {"Filter.2.Value.3", "stopping"},
              {"Filter.2.Value.4", "stopped"}};
  std::optional<XmlNode> found;
  for (auto& instance : DescribeInstances(region, p)) {
    if (Gone(instance) || TagsOf(instance)["Name"] != name) continue;
    if (!Managed(instance)) {
      if (foreign) *foreign = true;
      continue;
    }
    if (found) {
      host_.Warning("more than one gpuprov instance is named " + name + " in " + region + " (" +
                    found->Text("instanceId") + ", " + instance.Text("instanceId") +
                    "); using the first");
      continue;
    }
    found = instance;
  }
  return found;
}

std::vector<std::string> AwsDriver::SearchRegions(const std::string& requested) const {
  std::vector<std::string> out;
  auto add = [&](const std::string& r) {
    if (!r.empty() && std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  };
  add(requested);
  add(default_region_);
  for (const auto& r : extra_regions_) add(r);
  for (const auto& [id, l] : launched_) add(l.region);
  if (out.empty()) throw DriverError(GPUPROV_STATUS_INVALID_INPUT, NoRegionProblem(profile_));
  return out;
}

std::optional<XmlNode> AwsDriver::Resolve(const ObjectPtr& request, bool include_gone,
                                          std::string* region) {
  const auto [id, name] = kit::RequireIdOrName(request);
  const std::string requested_region = json::Str(request, "region");
  if (!id.empty()) {
    auto [id_region, instance_id] = SplitId(id);
    const std::string r = !id_region.empty()          ? id_region
                          : !requested_region.empty() ? requested_region
                                                      : default_region_;
    if (instance_id.rfind("i-", 0) == 0) {
      try {
        XmlNode doc = ec2_->Call(r, "DescribeInstances", {{"InstanceId.1", instance_id}});
        for (const XmlNode* reservation : doc.Items("reservationSet")) {
          for (const XmlNode* instance : reservation->Items("instancesSet")) {
            if (!Managed(*instance)) continue;
            if (!name.empty() && TagsOf(*instance)["Name"] != name) continue;
            if (Gone(*instance) && !include_gone) continue;
            *region = r;
            return *instance;
          }
        }
      } catch (const Ec2Error& e) {
        if (e.code() != "InvalidInstanceID.NotFound" && e.code() != "InvalidInstanceID.Malformed") {
          Raise(r, e);
        }
        // Eventual consistency: an instance this handle just launched may not be visible yet.
        auto it = launched_.find(instance_id);
        if (e.code() == "InvalidInstanceID.NotFound" && it != launched_.end() &&
            steady_clock::now() - it->second.at < consistency_grace_) {
          host_.Debug("instance " + instance_id + " not visible yet (eventual consistency)");
          *region = it->second.region;
          return it->second.item;
        }
      }
    }
  }
  if (!name.empty()) {
    for (const auto& r : SearchRegions(requested_region)) {
      if (auto found = FindByName(r, name)) {
        *region = r;
        return found;
      }
    }
  }
  return std::nullopt;
}

AwsDriver::ObjectPtr AwsDriver::VmJson(const std::string& region, const XmlNode& i,
                                       const std::vector<int>& ports) const {
  auto tags = TagsOf(i);
  const std::string ec2_state = i.Text("instanceState/name");
  kit::VmFields vm;
  vm.id = region + "/" + i.Text("instanceId");
  vm.name = tags["Name"];
  if (vm.name.empty()) vm.name = tags[kNameTag];
  vm.state = Preempted(i) ? "preempted" : StateOf(ec2_state);
  vm.spot = i.Text("instanceLifecycle") == "spot";
  vm.public_ip = i.Text("ipAddress");
  vm.ssh_user = kSshUser;
  vm.region = region;
  vm.instance_type = i.Text("instanceType");
  vm.image = i.Text("imageId");
  vm.gpus = GpusOfType(vm.instance_type);
  vm.created_at = i.Text("launchTime");
  if (const XmlNode* reason = i.Child("stateReason")) {
    const std::string code = reason->Text("code");
    if (ec2_state == "terminated" || ec2_state == "shutting-down") {
      vm.message = reason->Text("message");
      if (vm.message.empty()) vm.message = code;
      if (code == kSpotTerminationCode) {
        vm.message = code + ": " + reason->Text("message");
        if (reason->Text("message").rfind(code, 0) == 0) vm.message = reason->Text("message");
      } else if (code.rfind("Server.", 0) == 0) {
        vm.message = "EC2 ended the instance: " + vm.message +
                     (code == "Server.InsufficientInstanceCapacity"
                          ? " (no capacity: try another region or GPU type)"
                          : "");
      }
    }
  }
  vm.ports = ports;
  vm.private_ip = i.Text("privateIpAddress");
  vm.cluster = tags[kit::kClusterTag];
  vm.role = tags[kit::kRoleTag];
  vm.tags = std::vector<std::pair<std::string, std::string>>(tags.begin(), tags.end());
  return kit::VmJson(vm);
}

// --- network ---------------------------------------------------------------------

AwsDriver::Network AwsDriver::ResolveNetwork(const std::string& region) {
  Network net;
  if (!subnet_id_.empty() || !vpc_id_.empty()) {
    // The subnet named (its VPC with it), or the subnets of the VPC named.
    Params p = subnet_id_.empty()
                   ? Params{{"Filter.1.Name", "vpc-id"}, {"Filter.1.Value.1", vpc_id_}}
                   : Params{{"SubnetId.1", subnet_id_}};
    XmlNode doc = Call(region, "DescribeSubnets", p);
    std::vector<const XmlNode*> subnets = doc.Items("subnetSet");
    if (subnets.empty()) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "VPC " + vpc_id_ + " (vpc_id in [clouds.aws]) has no subnet in " + region +
                            ": create one with a route to an internet gateway, or set subnet_id");
    }
    // With only vpc_id: a subnet that gives public addresses by default first, then by id,
    // so every run picks the same one.
    std::sort(subnets.begin(), subnets.end(), [](const XmlNode* a, const XmlNode* b) {
      const bool pa = a->Text("mapPublicIpOnLaunch") == "true";
      const bool pb = b->Text("mapPublicIpOnLaunch") == "true";
      return pa != pb ? pa : a->Text("subnetId") < b->Text("subnetId");
    });
    net.subnet_id = subnets.front()->Text("subnetId");
    net.vpc_id = subnets.front()->Text("vpcId");
    if (!vpc_id_.empty() && net.vpc_id != vpc_id_) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "subnet_id " + subnet_id_ + " is in VPC " + net.vpc_id +
                            ", not in vpc_id " + vpc_id_ +
                            " ([clouds.aws]): drop vpc_id (the subnet's VPC is used) or make "
                            "them agree");
    }
    return net;
  }
  // One read says whether the default VPC that a launch without a subnet needs is there
  // (CreateSecurityGroup documents VpcId as "Required for a nondefault VPC"; without a default
  // VPC EC2 answers VPCIdNotSpecified), before anything is made.
  XmlNode doc = Call(region, "DescribeVpcs",
                     {{"Filter.1.Name", "isDefault"}, {"Filter.1.Value.1", "true"}});
  if (doc.Items("vpcSet").empty()) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT, NoDefaultVpcHint(region));
  }
  return net;
}

// --- security group and key pair ------------------------------------------------

IngressChange PlanIngress(const XmlNode* group, int port,
                          const gpuprov::drivers::PortSources& sources) {
  IngressChange change;
  const std::vector<std::string> want = sources.Of(port, /*with_ipv6=*/true);
  // A port not narrowed only gains its rule from everyone when nothing opens it to 0.0.0.0/0;
  // other rules of it (the user's) stay.
  // The sources of the group's own rule for exactly tcp port-port: EC2 refuses the whole
  // AuthorizeSecurityGroupIngress call when one of its ranges is already there
  // (InvalidPermission.Duplicate), so these are never sent again.
  std::set<std::string> have;
  if (group != nullptr) {
    for (const XmlNode* perm : group->Items("ipPermissions")) {
      if (perm->Text("ipProtocol") != "tcp" || perm->Text("fromPort") != std::to_string(port) ||
          perm->Text("toPort") != std::to_string(port)) {
        continue;
      }
      for (const XmlNode* r : perm->Items("ipRanges")) have.insert(r->Text("cidrIp"));
      for (const XmlNode* r : perm->Items("ipv6Ranges")) have.insert(r->Text("cidrIpv6"));
    }
  }
  if (!sources.IsNarrowed(port)) {
    // Open to 0.0.0.0/0 already: nothing to do. Else the world ranges the exact rule lacks
    // (a rule open only to ::/0 gains 0.0.0.0/0 alone).
    if (PortOpen(group, port, /*world=*/true)) return change;
    for (const auto& c : want) {
      if (!have.count(c)) change.authorize.push_back(c);
    }
    return change;
  }
  for (const auto& c : want) {
    if (!have.count(c)) change.authorize.push_back(c);
  }
  for (const auto& c : have) {
    if (std::find(want.begin(), want.end(), c) == want.end()) change.revoke.push_back(c);
  }
  return change;
}

void AwsDriver::AuthorizePorts(const std::string& region, const std::string& group_id,
                               const XmlNode* group, const std::vector<int>& ports,
                               const gpuprov::drivers::PortSources& sources) {
  for (int port : ports) {
    const IngressChange change = PlanIngress(group, port, sources);
    const std::string p = std::to_string(port);
    // One call per port: its IPv4 and IPv6 ranges together (added before anything is revoked,
    // so a narrowing never leaves the port shut meanwhile).
    if (!change.authorize.empty()) {
      auto authorize = [&](const std::vector<std::string>& cidrs) {
        Params params = {{"GroupId", group_id},
                         {"IpPermissions.1.IpProtocol", "tcp"},
                         {"IpPermissions.1.FromPort", p},
                         {"IpPermissions.1.ToPort", p}};
        int v4 = 0, v6 = 0;
        for (const std::string& cidr : cidrs) {
          const bool is_v6 = cidr.find(':') != std::string::npos;
          const std::string base = is_v6 ? "IpPermissions.1.Ipv6Ranges." + std::to_string(++v6)
                                         : "IpPermissions.1.IpRanges." + std::to_string(++v4);
          params.emplace_back(base + (is_v6 ? ".CidrIpv6" : ".CidrIp"), cidr);
          params.emplace_back(base + ".Description", "gpuprov");
        }
        const auto deadline = steady_clock::now() + consistency_grace_;
        while (true) {
          try {
            ec2_->Call(region, "AuthorizeSecurityGroupIngress", params);
            return true;
          } catch (const Ec2Error& e) {
            // EC2 refuses the whole call when any one range exists already.
            if (e.code() == "InvalidPermission.Duplicate") return false;
            // A group created a moment ago may not be visible yet.
            if (e.code() == "InvalidGroup.NotFound" && steady_clock::now() < deadline) {
              Sleep(poll_interval_);
              continue;
            }
            Raise(region, e);
          }
        }
      };
      // All of the port's missing ranges in one call; if one of them appeared meanwhile (a
      // concurrent run, a hand edit), each alone, so the others are still added.
      if (!authorize(change.authorize) && change.authorize.size() > 1) {
        for (const std::string& cidr : change.authorize) authorize({cidr});
      }
    }
    for (const std::string& cidr : change.revoke) {
      host_.Progress("revoking tcp " + p + " from " + cidr + " in security group " + group_id);
      const bool is_v6 = cidr.find(':') != std::string::npos;
      try {
        ec2_->Call(region, "RevokeSecurityGroupIngress",
                   {{"GroupId", group_id},
                    {"IpPermissions.1.IpProtocol", "tcp"},
                    {"IpPermissions.1.FromPort", p},
                    {"IpPermissions.1.ToPort", p},
                    {is_v6 ? "IpPermissions.1.Ipv6Ranges.1.CidrIpv6" : "IpPermissions.1.IpRanges.1.CidrIp",
                     cidr}});
      } catch (const Ec2Error& e) {
        if (e.code() != "InvalidPermission.NotFound") Raise(region, e);  // already gone
      }
    }
  }
}

std::optional<XmlNode> AwsDriver::DescribeGroup(const std::string& region,
                                                const std::string& group_name,
                                                const std::string& vpc_id) {
  Params filter = {{"Filter.1.Name", "group-name"}, {"Filter.1.Value.1", group_name}};
  if (!vpc_id.empty()) {  // names are unique per VPC
    filter.insert(filter.end(), {{"Filter.2.Name", "vpc-id"}, {"Filter.2.Value.1", vpc_id}});
  }
  XmlNode doc = Call(region, "DescribeSecurityGroups", filter);
  for (const XmlNode* g : doc.Items("securityGroupInfo")) {
    if (g->Text("groupName") == group_name) return *g;
  }
  return std::nullopt;
}

AwsDriver::GroupDeletion AwsDriver::DeleteGroup(const std::string& region,
                                                const std::string& group_id,
                                                steady_clock::time_point wait_until) {
  while (true) {
    try {
      ec2_->Call(region, "DeleteSecurityGroup", {{"GroupId", group_id}});
      return GroupDeletion::kDeleted;
    } catch (const Ec2Error& e) {
      if (e.code() == "InvalidGroup.NotFound") return GroupDeletion::kGone;
      // Deleting fails until every instance using it is fully terminated (REFERENCE.md §5).
      if (e.code() == "DependencyViolation") {
        if (steady_clock::now() >= wait_until) return GroupDeletion::kInUse;
        Sleep(poll_interval_);
        continue;
      }
      Raise(region, e);
    }
  }
}

AwsDriver::Resource AwsDriver::EnsureGroup(const std::string& region,
                                           const std::string& group_name,
                                           const std::string& description,
                                           const std::map<std::string, std::string>& tags,
                                           const std::string& vpc_id,
                                           std::optional<XmlNode>* group) {
  Resource out;
  *group = DescribeGroup(region, group_name, vpc_id);
  if (!*group) {
    Params params = {{"GroupName", group_name}, {"GroupDescription", description}};
    if (!vpc_id.empty()) params.emplace_back("VpcId", vpc_id);
    AddTagSpec(params, 1, "security-group", tags);
    host_.Progress("creating security group " + group_name + " in " + region +
                   (vpc_id.empty() ? "" : " (" + vpc_id + ")"));
    try {
      XmlNode doc = ec2_->Call(region, "CreateSecurityGroup", params);
      out.id = doc.Text("groupId");
      out.created = true;
    } catch (const Ec2Error& e) {
      if (e.code() != "InvalidGroup.Duplicate") Raise(region, e);
      // made by a concurrent or earlier run in the meantime
      *group = DescribeGroup(region, group_name, vpc_id);
      if (!*group) {
        throw DriverError(GPUPROV_STATUS_FAILED,
                          "security group " + group_name + " exists but cannot be read");
      }
    }
  }
  if (*group) out.id = (*group)->Text("groupId");
  if (out.id.empty()) {
    throw DriverError(GPUPROV_STATUS_FAILED, "CreateSecurityGroup answered without a groupId");
  }
  return out;
}

AwsDriver::Resource AwsDriver::EnsureSecurityGroup(const std::string& region,
                                                   const std::string& vm_name,
                                                   const std::vector<int>& ports,
                                                   const std::map<std::string, std::string>& tags,
                                                   const kit::PortSources& sources,
                                                   const Network& net) {
  std::optional<XmlNode> group;
  Resource out = EnsureGroup(region, ResourceName(vm_name),
                             "gpuprov VM " + vm_name + ": SSH, Kubernetes API, HTTP(S)", tags,
                             net.vpc_id, &group);
  AuthorizePorts(region, out.id, group ? &*group : nullptr, kit::WithSsh(ports), sources);
  return out;
}

AwsDriver::Resource AwsDriver::EnsureClusterGroup(const std::string& region,
                                                  const std::string& cluster,
                                                  const std::vector<kit::PeerPort>& ports,
                                                  const Network& net) {
  const std::string group_name = ClusterGroupName(cluster);
  std::optional<XmlNode> group;
  Resource out = EnsureGroup(
      region, group_name,
      "gpuprov cluster " + cluster + ": " + kit::PeerPortsText(ports) + " between its nodes",
      {{kit::kManagedTag, "1"}, {kit::kClusterTag, cluster}, {"Name", group_name}}, net.vpc_id,
      &group);
  // A rule whose source is the group itself (IpPermissions.N.Groups.1.GroupId, a
  // UserIdGroupPair): "the private IP addresses of the resources associated with the
  // referenced security group" may connect (AuthorizeSecurityGroupIngress in the EC2 API
  // reference; https://docs.aws.amazon.com/vpc/latest/userguide/security-group-rules.html).
  auto has_rule = [&](const kit::PeerPort& p) {
    if (!group) return false;
    for (const XmlNode* perm : group->Items("ipPermissions")) {
      if (perm->Text("ipProtocol") != p.protocol || perm->Text("fromPort") != std::to_string(p.port) ||
          perm->Text("toPort") != std::to_string(p.port)) {
        continue;
      }
      for (const XmlNode* pair : perm->Items("groups")) {
        if (pair->Text("groupId") == out.id) return true;
      }
    }
    return false;
  };
  Params params = {{"GroupId", out.id}};
  int n = 0;
  std::vector<kit::PeerPort> added;
  for (const auto& p : ports) {
    if (has_rule(p)) continue;
    const std::string k = "IpPermissions." + std::to_string(++n);
    params.insert(params.end(), {{k + ".IpProtocol", p.protocol},
                                 {k + ".FromPort", std::to_string(p.port)},
                                 {k + ".ToPort", std::to_string(p.port)},
                                 {k + ".Groups.1.GroupId", out.id}});
    added.push_back(p);
  }
  if (n > 0) {
    host_.Progress("allowing " + kit::PeerPortsText(added) + " within security group " +
                   group_name);
    try {
      ec2_->Call(region, "AuthorizeSecurityGroupIngress", params);
    } catch (const Ec2Error& e) {
      if (e.code() != "InvalidPermission.Duplicate") Raise(region, e);
    }
  }
  return out;
}

void AwsDriver::RemoveClusterGroup(const std::string& region, const std::string& cluster,
                                   const std::string& leaving_id,
                                   steady_clock::time_point wait_until) {
  Params members = {{"Filter.1.Name", "tag:" + std::string(kit::kClusterTag)},
                    {"Filter.1.Value.1", cluster},
                    {"Filter.2.Name", "instance-state-name"},
                    {"Filter.2.Value.1", "pending"},
                    {"Filter.2.Value.2", "running"},
                    {"Filter.2.Value.3", "stopping"},
                    {"Filter.2.Value.4", "stopped"}};
  for (const auto& i : DescribeInstances(region, members)) {
    if (Managed(i) && !Gone(i) && i.Text("instanceId") != leaving_id) return;
  }
  const std::string group_name = ClusterGroupName(cluster);
  XmlNode doc = Call(region, "DescribeSecurityGroups",
                     {{"Filter.1.Name", "group-name"}, {"Filter.1.Value.1", group_name}});
  for (const XmlNode* g : doc.Items("securityGroupInfo")) {
    if (g->Text("groupName") != group_name || !Managed(*g)) continue;
    const std::string id = g->Text("groupId");
    host_.Progress("deleting security group " + group_name + " (the cluster's last node is gone)");
    if (DeleteGroup(region, id, wait_until) == GroupDeletion::kInUse) {
      host_.Warning("security group " + group_name + " is still in use; `gpuprov gc --delete` "
                    "removes it once its instances are terminated");
    }
  }
}

AwsDriver::Resource AwsDriver::EnsureKeyPair(const std::string& region, const std::string& vm_name,
                                             const std::string& public_key,
                                             const std::map<std::string, std::string>& tags) {
  const std::string key_name = ResourceName(vm_name);
  // A key pair of this name without a VM is left by an interrupted run: replace it, so the
  // VM gets exactly the key of this request.
  try {
    XmlNode doc = ec2_->Call(region, "DescribeKeyPairs", {{"KeyName.1", key_name}});
    if (!doc.Items("keySet").empty()) {
      host_.Debug("replacing the key pair " + key_name + " left by an earlier run");
      Call(region, "DeleteKeyPair", {{"KeyName", key_name}});
    }
  } catch (const Ec2Error& e) {
    if (e.code() != "InvalidKeyPair.NotFound") Raise(region, e);
  }
  Params params = {{"KeyName", key_name},
                   {"PublicKeyMaterial", Base64(kit::TrimSpace(public_key))}};
  AddTagSpec(params, 1, "key-pair", tags);
  host_.Progress("importing SSH key pair " + key_name + " in " + region);
  Resource out;
  try {
    XmlNode doc = ec2_->Call(region, "ImportKeyPair", params);
    out.id = doc.Text("keyName");
    out.created = true;
  } catch (const Ec2Error& e) {
    if (e.code() != "InvalidKeyPair.Duplicate") Raise(region, e);
    out.id = key_name;  // imported by a concurrent run a moment ago
  }
  if (out.id.empty()) out.id = key_name;
  return out;
}

void AwsDriver::DeleteVmResources(const std::string& region, const std::string& vm_name,
                                  steady_clock::time_point wait_until) {
  const std::string group_name = ResourceName(vm_name);
  XmlNode doc = Call(region, "DescribeSecurityGroups",
                     {{"Filter.1.Name", "group-name"}, {"Filter.1.Value.1", group_name}});
  for (const XmlNode* g : doc.Items("securityGroupInfo")) {
    if (g->Text("groupName") != group_name) continue;
    const std::string id = g->Text("groupId");
    host_.Progress("deleting security group " + group_name + " (" + id + ")");
    if (DeleteGroup(region, id, wait_until) == GroupDeletion::kInUse) {
      throw DriverError(GPUPROV_STATUS_FAILED,
                        "security group " + group_name + " (" + id +
                            ") is still in use by an instance; run `gpuprov down " + vm_name +
                            "` again once the instance is terminated");
    }
  }
  // DeleteKeyPair succeeds for a name that does not exist.
  Call(region, "DeleteKeyPair", {{"KeyName", ResourceName(vm_name)}});
}

bool AwsDriver::WaitTerminated(const std::string& region, const std::string& instance_id,
                               steady_clock::time_point deadline) {
  kit::PollOptions poll{"waiting for instance " + instance_id + " to terminate", poll_interval_,
                        std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now())};
  return kit::PollUntil(host_, poll, [&](std::string* state) {
    try {
      XmlNode doc = ec2_->Call(region, "DescribeInstances", {{"InstanceId.1", instance_id}});
      bool terminated = true;
      for (const XmlNode* r : doc.Items("reservationSet")) {
        for (const XmlNode* i : r->Items("instancesSet")) {
          *state = i->Text("instanceState/name");
          terminated = terminated && *state == "terminated";
        }
      }
      return terminated;
    } catch (const Ec2Error& e) {
      if (e.code() == "InvalidInstanceID.NotFound") return true;
      Raise(region, e);
    }
  });
}

// --- operations ---------------------------------------------------------------

std::string AwsDriver::Check(const std::string& /*request_json*/) {
  // One cheap read: the default security group's owner is the account id.
  XmlNode doc = Call(default_region_, "DescribeSecurityGroups",
                     {{"Filter.1.Name", "group-name"}, {"Filter.1.Value.1", "default"}});
  std::string owner;
  for (const XmlNode* g : doc.Items("securityGroupInfo")) {
    if (owner.empty()) owner = g->Text("ownerId");
  }
  const AwsCredentials& c = ec2_->credentials();
  Object result(Poco::JSON_PRESERVE_KEY_ORDER);
  result.set(
      "account",
      (owner.empty() ? std::string("account id not shown (no security group named default: no VPC in the region)") : "account " + owner) +
          ", region " + default_region_ + ", access key " + MaskKeyId(c.access_key_id) +
          ", credentials from " + c.origin);
  result.set("user_data_limit", static_cast<int>(kUserDataLimit));
  result.set("user_data_gzip", true);  // Create sends it gzipped: the limit counts those bytes
  result.set("allow_from", true);  // create and open_ports narrow sources
  result.set("credentials_from", c.origin);
  result.set("endpoint", endpoint_.empty() ? RegionalEndpoint(default_region_) : endpoint_);
  return json::Stringify(result);
}

std::string AwsDriver::Offers(const std::string& request_json) {
  ObjectPtr request = json::ParseObject(request_json, "the offers request");
  Array::Ptr offers = new Array();
  std::optional<InstanceType> type;
  if (std::optional<kit::GpuRequest> gpu = kit::ParseGpu(request)) {
    type = TypeForGpu(gpu->type, gpu->count);
    if (!type) {
      host_.Warning(NotOfferedMessage(gpu->type, gpu->count));
      return kit::OffersResult(offers, kPoweredOffCost);
    }
  } else {
    type = CpuType();
  }
  const std::string region =
      ResolveRegion(ProcessEnv(), json::Str(request, "region"), default_region_, profile_);
  // Is the type offered in the region? (Offering is not capacity: RunInstances can still say
  // InsufficientInstanceCapacity.) The table answers when the list cannot be read.
  bool api_answers = true;
  try {
    XmlNode doc = ec2_->Call(region, "DescribeInstanceTypeOfferings",
                             {{"LocationType", "region"},
                              {"Filter.1.Name", "instance-type"},
                              {"Filter.1.Value.1", type->name}});
    if (doc.Items("instanceTypeOfferingSet").empty()) {
      host_.Warning(std::string(type->name) + " is not offered in " + region +
                    "; choose another region with --region");
      return kit::OffersResult(offers, kPoweredOffCost);
    }
  } catch (const Ec2Error& e) {
    const gpuprov_type_status s = StatusOfCode(e.http_status(), e.code());
    if (s == GPUPROV_STATUS_AUTH || s == GPUPROV_STATUS_CANCELLED) Raise(region, e);
    host_.Debug(std::string("instance type offerings unavailable, using the built-in table: ") +
                e.what());
    api_answers = false;
  }
  std::optional<std::string> image = image_override_;
  if (image->empty()) image = DefaultImage(*type);
  if (!image) {
    host_.Warning(NoDefaultImageMessage(*type));
    return kit::OffersResult(offers, kPoweredOffCost);
  }
  kit::OfferFields offer{type->name, type->gpu_type, type->gpu_count, region,
                         type->price_per_hour, *image, std::nullopt, "table", kPriceTableDate};
  // Every EC2 GPU type sells as spot too; 0 (unknown) when the price history does not answer.
  offer.spot_price_per_hour =
      (api_answers ? SpotPrice(region, type->name) : std::nullopt).value_or(0.0);
  offers->add(kit::OfferJson(offer));
  return kit::OffersResult(offers, kPoweredOffCost);
}

std::optional<double> AwsDriver::SpotPrice(const std::string& region, const std::string& type) {
  // DescribeSpotPriceHistory with StartTime now: the price in effect now in each zone; the
  // lowest is what a Spot Instance of the type costs (EC2 API reference).
  try {
    XmlNode doc = ec2_->Call(region, "DescribeSpotPriceHistory",
                             {{"InstanceType.1", type},
                              {"ProductDescription.1", "Linux/UNIX"},
                              {"StartTime", NowIso8601()}});
    std::optional<double> lowest;
    for (const XmlNode* item : doc.Items("spotPriceHistorySet")) {
      try {
        const double price = std::stod(item->Text("spotPrice"));
        if (price > 0 && (!lowest || price < *lowest)) lowest = price;
      } catch (const std::exception&) {
      }
    }
    return lowest;
  } catch (const Ec2Error& e) {
    host_.Debug(std::string("spot prices unavailable: ") + e.what());
    return std::nullopt;
  }
}

std::string AwsDriver::Create(const std::string& request_json) {
  const auto [request, name, user_data] =
      kit::ParseCreateRequest(request_json, kVmNameRules, kUserDataTextLimit, "EC2",
                              "boot script before gzip");
  // The boot script gzipped (kit::Gzip: zopfli, as the host measures it), which cloud-init
  // unpacks before use ("Content found to be gzip compressed will be uncompressed",
  // https://cloudinit.readthedocs.io/en/latest/explanation/format.html): check says
  // "user_data_gzip", so EC2's 16 KB limit counts compressed bytes (REFERENCE.md §4).
  const std::string sent_user_data = user_data.empty() ? "" : kit::Gzip(user_data);
  kit::CheckUserDataSize(sent_user_data, kUserDataLimit, "EC2",
                         "user data (gzipped, before base64)");
  const std::string public_key = kit::TrimSpace(json::Str(request, "ssh_public_key"));
  {
    // EC2 API reference, ImportKeyPair: "Imports the public key from an RSA or ED25519 key
    // pair"; any other type is refused there (InvalidKey.Format) after the security group was
    // made, so it is refused here, before anything is.
    std::istringstream words(public_key);
    std::string kind, blob;
    if (!(words >> kind >> blob)) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "ssh_public_key must be an OpenSSH public key line (ssh-ed25519 or "
                        "ssh-rsa ...): EC2 imports it as the key pair gpuprov logs in with");
    }
    if (kind != "ssh-ed25519" && kind != "ssh-rsa") {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "the SSH key is " + kind +
                            ", but EC2 imports only RSA and ED25519 keys (ImportKeyPair): make "
                            "one with `ssh-keygen -t ed25519 -f ~/.ssh/gpuprov_aws` and pass "
                            "--ssh-key ~/.ssh/gpuprov_aws, or drop --ssh-key to use gpuprov's "
                            "own ed25519 key");
    }
  }
  const std::vector<int> ports = kit::WithSsh(kit::PortsOf(request, "open_ports"));
  const kit::PortSources sources = kit::SourcesOf(request);
  const std::optional<kit::ClusterRequest> cluster = kit::ParseCluster(request);

  // The instance type: from gpu (instance_type must agree), else instance_type, else CPU.
  const std::string instance_type = json::Str(request, "instance_type");
  const kit::CatalogueChoice choice =
      kit::ChooseInstanceType(InstanceTypeCatalogue(), kit::ParseGpu(request), instance_type);
  std::optional<InstanceType> type = choice.index ? InstanceTypes()[*choice.index] : CpuType();
  const std::string type_name = choice.row.instance_type;
  const std::string region =
      ResolveRegion(ProcessEnv(), json::Str(request, "region"), default_region_, profile_);
  std::string image = json::Str(request, "image");
  if (image.empty()) image = image_override_;
  if (image.empty()) {
    std::optional<std::string> fits = DefaultImage(*type);
    if (!fits) throw DriverError(GPUPROV_STATUS_INVALID_INPUT, NoDefaultImageMessage(*type));
    image = *fits;
  }

  std::map<std::string, std::string> tags = kit::UserTags(request, {"aws:"});
  tags.merge(kit::ManagedTags(name));
  tags["Name"] = name;
  if (cluster) {
    tags[kit::kClusterTag] = cluster->name;
    tags[kit::kRoleTag] = cluster->role;
  }

  // Idempotent by name: a live gpuprov instance of that name is returned.
  bool foreign = false;
  if (std::optional<XmlNode> existing = FindByName(region, name, &foreign)) {
    host_.Info("instance " + name + " exists (" + existing->Text("instanceId") + ", " +
               existing->Text("instanceState/name") + ")");
    // As it is: widening its ports is open_ports' job. Reported: what its group opens.
    std::vector<int> open;
    if (std::optional<XmlNode> group = OwnGroup(region, *existing)) {
      for (int p : ports) {
        if (PortOpen(&*group, p)) open.push_back(p);
      }
    }
    return kit::VmResult(VmJson(region, *existing, open), true);
  }
  if (foreign) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "an EC2 instance named " + name + " exists in " + region +
                          " that gpuprov did not create (it lacks the tag gpuprov=1); choose "
                          "another VM name");
  }

  // The VPC and subnet to launch into, checked before anything is made.
  const Network net = ResolveNetwork(region);
  Resource group = EnsureSecurityGroup(region, name, ports, tags, sources, net);
  const std::string cluster_group =
      cluster ? EnsureClusterGroup(region, cluster->name, cluster->peer_ports, net).id : "";
  Resource key;
  try {
    key = EnsureKeyPair(region, name, public_key, tags);
  } catch (const DriverError&) {
    try {
      DeleteVmResources(region, name, steady_clock::now());
    } catch (const std::exception& cleanup) {
      host_.Warning(std::string("could not remove the security group made for ") + name + ": " +
                    cleanup.what());
    }
    throw;
  }

  // A ClientToken makes RunInstances idempotent: the retries inside this call (throttling,
  // 5xx, lost answers) cannot launch a second instance.
  Params params = {{"ImageId", image},
                   {"InstanceType", type_name},
                   {"MinCount", "1"},
                   {"MaxCount", "1"},
                   {"KeyName", key.id},
                   {"ClientToken", "gpuprov-" + RandomHex(32)},
                   {"InstanceInitiatedShutdownBehavior", "terminate"}};
  if (kit::SpotRequested(request)) {
    // RunInstances' InstanceMarketOptions (EC2 API model, InstanceMarketOptionsRequest and
    // SpotMarketOptions): a one-time Spot Instance, terminated when EC2 takes it back; no
    // MaxPrice, so it is never above the on-demand price.
    params.insert(params.end(),
                  {{"InstanceMarketOptions.MarketType", "spot"},
                   {"InstanceMarketOptions.SpotOptions.SpotInstanceType", "one-time"},
                   {"InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior", "terminate"}});
  }
  if (net.subnet_id.empty()) {
    params.emplace_back("SecurityGroupId.1", group.id);  // the default VPC's default subnet
    if (!cluster_group.empty()) params.emplace_back("SecurityGroupId.2", cluster_group);
  } else {
    // A subnet of another VPC need not give public addresses (default subnets do): the
    // primary interface asks for one, as SkyPilot's launcher does
    // (sky/provision/aws/instance.py, NetworkInterfaces with AssociatePublicIpAddress). With
    // NetworkInterface.N, the subnet and groups go there (RunInstances in the EC2 API model).
    params.insert(params.end(), {{"NetworkInterface.1.DeviceIndex", "0"},
                                 {"NetworkInterface.1.SubnetId", net.subnet_id},
                                 {"NetworkInterface.1.AssociatePublicIpAddress", "true"},
                                 {"NetworkInterface.1.DeleteOnTermination", "true"},
                                 {"NetworkInterface.1.SecurityGroupId.1", group.id}});
    if (!cluster_group.empty()) {
      params.emplace_back("NetworkInterface.1.SecurityGroupId.2", cluster_group);
    }
  }
  if (!sent_user_data.empty()) params.emplace_back("UserData", Base64(sent_user_data));
  const long long disk_gb = json::Int(request, "disk_gb", 0);
  if (disk_gb > 0) {
    params.emplace_back("BlockDeviceMapping.1.DeviceName", "/dev/sda1");
    params.emplace_back("BlockDeviceMapping.1.Ebs.VolumeSize", std::to_string(disk_gb));
    params.emplace_back("BlockDeviceMapping.1.Ebs.VolumeType", "gp3");
    params.emplace_back("BlockDeviceMapping.1.Ebs.DeleteOnTermination", "true");
  }
  AddTagSpec(params, 1, "instance", tags);
  AddTagSpec(params, 2, "volume", tags);
  host_.Progress("launching " + type_name + " instance " + name + " in " + region + " (image " +
                 image + ")");
  XmlNode doc;
  try {
    doc = Call(region, "RunInstances", params);
  } catch (const DriverError& e) {
    // An answer lost after EC2 acted: the instance is there, under its Name tag.
    if (e.status() == GPUPROV_STATUS_TRANSIENT || e.status() == GPUPROV_STATUS_FAILED) {
      try {
        if (auto made = FindByName(region, name)) {
          return kit::ConfirmSources(kit::VmResult(VmJson(region, *made, ports), false), sources);
        }
      } catch (const std::exception&) {
      }
    }
    // Nothing was launched: remove what this call made for it.
    try {
      DeleteVmResources(region, name, steady_clock::now() + consistency_grace_);
    } catch (const std::exception& cleanup) {
      host_.Warning(std::string("could not remove the security group or key pair made for ") +
                    name + ": " + cleanup.what());
    }
    throw;
  }
  std::vector<const XmlNode*> items = doc.Items("instancesSet");
  if (items.empty()) {
    throw DriverError(GPUPROV_STATUS_FAILED, "RunInstances answered without an instance");
  }
  const XmlNode& instance = *items.front();
  const std::string instance_id = instance.Text("instanceId");
  host_.Info("instance " + name + " is " + instance_id + " in " + region);
  XmlNode remembered = instance;
  if (!remembered.Child("tagSet")) {  // RunInstances may omit tags: keep ours for Get
    XmlNode set{"tagSet", "", {}};
    for (const auto& [k, v] : tags) {
      set.children.push_back(XmlNode{"item", "", {XmlNode{"key", k, {}}, XmlNode{"value", v, {}}}});
    }
    remembered.children.push_back(set);
  }
  launched_[instance_id] = Launched{steady_clock::now(), remembered, region, ports};
  return kit::ConfirmSources(kit::VmResult(VmJson(region, remembered, ports), false), sources);
}

std::string AwsDriver::Get(const std::string& request_json) {
  ObjectPtr request = json::ParseObject(request_json, "the get request");
  std::string region;
  std::optional<XmlNode> instance = Resolve(request, /*include_gone=*/true, &region);
  if (!instance) {
    throw DriverError(GPUPROV_STATUS_NOT_FOUND,
                      "no gpuprov EC2 instance " + kit::VmReference(request));
  }
  std::vector<int> ports = {22};
  if (auto it = launched_.find(instance->Text("instanceId")); it != launched_.end()) {
    ports = it->second.ports;
  }
  return kit::VmResult(VmJson(region, *instance, ports));
}

std::string AwsDriver::List(const std::string& /*request_json*/) {
  Array::Ptr vms = new Array();
  for (const auto& region : SearchRegions("")) {
    // Live instances, and the Spot Instances EC2 took back (as "preempted", while EC2 still
    // describes them) unless a live one has their name (the replacement).
    Params p = {{"Filter.1.Name", "tag:gpuprov"},         {"Filter.1.Value.1", "1"},
                {"Filter.2.Name", "instance-state-name"}, {"Filter.2.Value.1", "pending"},
                {"Filter.2.Value.2", "running"},          {"Filter.2.Value.3", "stopping"},
                {"Filter.2.Value.4", "stopped"},          {"Filter.2.Value.5", "shutting-down"},
                {"Filter.2.Value.6", "terminated"}};
    const std::vector<XmlNode> instances = DescribeInstances(region, p);
    std::set<std::string> live_names;
    for (const auto& instance : instances) {
      if (Managed(instance) && !Gone(instance)) {
        live_names.insert(TagsOf(instance)["Name"]);
        vms->add(VmJson(region, instance));
      }
    }
    std::set<std::string> preempted_names;
    for (const auto& instance : instances) {
      const std::string name = TagsOf(instance)["Name"];
      if (!Managed(instance) || !Preempted(instance) || live_names.count(name) ||
          !preempted_names.insert(name).second) {
        continue;
      }
      vms->add(VmJson(region, instance));
    }
  }
  return kit::VmsResult(vms);
}

std::string AwsDriver::Delete(const std::string& request_json) {
  ObjectPtr request = json::ParseObject(request_json, "the delete request");
  std::string region;
  std::optional<XmlNode> instance = Resolve(request, /*include_gone=*/true, &region);
  std::string name = json::Str(request, "name");
  bool deleted = false;
  const auto deadline = steady_clock::now() + delete_wait_;
  std::string cluster, instance_id;
  if (instance) {
    const std::string id = instance->Text("instanceId");
    instance_id = id;
    cluster = TagsOf(*instance)[kit::kClusterTag];
    std::string tagged = TagsOf(*instance)["Name"];
    if (!tagged.empty()) name = tagged;
    if (!Gone(*instance)) {
      host_.Progress("terminating instance " + name + " (" + id + ")");
      try {
        ec2_->Call(region, "TerminateInstances", {{"InstanceId.1", id}});
        deleted = true;
      } catch (const Ec2Error& e) {
        if (e.code() != "InvalidInstanceID.NotFound") Raise(region, e);
      }
    }
    if (!WaitTerminated(region, id, deadline)) {
      throw DriverError(GPUPROV_STATUS_TRANSIENT,
                        "instance " + id + " was told to terminate but is not terminated after " +
                            std::to_string(delete_wait_.count() / 1000) + " s; run `gpuprov down " +
                            name +
                            "` again to remove its security "
                            "group and key pair");
    }
    launched_.erase(id);
  } else {
    const auto [id_region, ignored] = SplitId(json::Str(request, "id"));
    region = !id_region.empty() ? id_region
                                : ResolveRegion(ProcessEnv(), json::Str(request, "region"),
                                                default_region_, profile_);
  }
  // The security group and key pair of the name, also when the instance was already gone.
  if (!name.empty()) DeleteVmResources(region, name, deadline);
  if (!cluster.empty()) RemoveClusterGroup(region, cluster, instance_id, deadline);
  return kit::DeletedResult(deleted);
}

std::string AwsDriver::ListResources(const std::string& /*request_json*/) {
  std::vector<kit::ResourceFields> vms, groups, keys;
  std::map<std::string, std::string> cluster_of;  // vm resource id -> its cluster ("" none)
  auto vm_name_of = [](std::map<std::string, std::string> tags, const std::string& fallback) {
    const std::string n = tags[kNameTag];
    return n.empty() ? fallback : n;
  };
  const Params tagged = {{"Filter.1.Name", "tag:gpuprov"}, {"Filter.1.Value.1", "1"}};
  for (const auto& region : SearchRegions("")) {
    Params p = tagged;
    p.insert(p.end(), {{"Filter.2.Name", "instance-state-name"},
                       {"Filter.2.Value.1", "pending"},
                       {"Filter.2.Value.2", "running"},
                       {"Filter.2.Value.3", "stopping"},
                       {"Filter.2.Value.4", "stopped"}});
    for (const auto& instance : DescribeInstances(region, p)) {
      if (!Managed(instance) || Gone(instance)) continue;
      auto tags = TagsOf(instance);
      kit::ResourceFields r =
          kit::Resource("vm", region + "/" + instance.Text("instanceId"), tags["Name"]);
      r.vm_names = {vm_name_of(tags, tags["Name"])};
      r.region = region;
      r.created_at = instance.Text("launchTime");
      // EC2 does not say; the driver's us-east-1 list price when its table has the type.
      if (auto type = TypeByName(instance.Text("instanceType")); type && type->price_per_hour > 0) {
        r.price_per_hour = type->price_per_hour;
      }
      cluster_of[r.id] = tags[kit::kClusterTag];
      r.cluster = tags[kit::kClusterTag];
      r.role = tags[kit::kRoleTag];
      vms.push_back(r);
    }
    const XmlNode group_doc = Call(region, "DescribeSecurityGroups", tagged);
    for (const XmlNode* g : group_doc.Items("securityGroupInfo")) {
      if (!Managed(*g)) continue;
      const std::string name = g->Text("groupName");
      auto tags = TagsOf(*g);
      // A cluster's group carries the cluster tag and no VM name: it belongs to its nodes.
      if (!tags[kit::kClusterTag].empty() && tags[kNameTag].empty()) {
        kit::ResourceFields r =
            kit::Resource("cluster_firewall", region + "/" + g->Text("groupId"), name);
        r.cluster = tags[kit::kClusterTag];
        for (const auto& vm : vms) {
          if (vm.region == region && cluster_of[vm.id] == tags[kit::kClusterTag]) {
            r.vm_names.push_back(vm.vm_names.front());
          }
        }
        r.region = region;
        groups.push_back(r);
        continue;
      }
      kit::ResourceFields r =
          kit::Resource("security_group", region + "/" + g->Text("groupId"), name);
      r.vm_names = {vm_name_of(tags, name.substr(std::string(kit::kResourcePrefix).size()))};
      r.region = region;
      groups.push_back(r);
    }
    const XmlNode key_doc = Call(region, "DescribeKeyPairs", tagged);
    for (const XmlNode* k : key_doc.Items("keySet")) {
      if (!Managed(*k)) continue;
      const std::string name = k->Text("keyName");
      kit::ResourceFields r = kit::Resource("key_pair", region + "/" + name, name);
      r.vm_names = {vm_name_of(TagsOf(*k), name.substr(std::string(kit::kResourcePrefix).size()))};
      r.region = region;
      r.created_at = k->Text("createTime");
      keys.push_back(r);
    }
  }
  // Instances first: a security group cannot go while an instance uses it.
  vms.insert(vms.end(), groups.begin(), groups.end());
  vms.insert(vms.end(), keys.begin(), keys.end());
  return kit::ResourcesResult(vms);
}

std::string AwsDriver::DeleteResource(const std::string& request_json) {
  const kit::ResourceRef ref =
      kit::ParseResourceRequest(request_json,
                                {"vm", "security_group", "key_pair", "cluster_firewall"});
  const auto [region, id] = SplitId(ref.id);
  if (region.empty() || id.empty()) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "id '" + ref.id + "' is not <region>/<id> as list_resources gives it");
  }
  auto refuse = [&] {
    return DriverError(
        GPUPROV_STATUS_INVALID_INPUT,
        ref.kind + " " + ref.id + " is not tagged gpuprov=1; gpuprov leaves it alone");
  };
  // Each is looked up again: only what still carries gpuprov's tag is deleted.
  if (ref.kind == "vm") {
    std::vector<XmlNode> found;
    try {
      found = DescribeInstances(region, {{"InstanceId.1", id}});
    } catch (const DriverError& e) {
      if (e.status() == GPUPROV_STATUS_NOT_FOUND) return kit::DeletedResult(false);
      throw;
    }
    if (found.empty() || Gone(found.front())) return kit::DeletedResult(false);
    if (!Managed(found.front())) throw refuse();
    host_.Progress("terminating instance " + id + " in " + region);
    try {
      ec2_->Call(region, "TerminateInstances", {{"InstanceId.1", id}});
    } catch (const Ec2Error& e) {
      if (e.code() == "InvalidInstanceID.NotFound") return kit::DeletedResult(false);
      Raise(region, e);
    }
    return kit::DeletedResult(true);
  }
  if (ref.kind == "key_pair") {
    XmlNode doc;
    try {
      doc = ec2_->Call(region, "DescribeKeyPairs", {{"KeyName.1", id}});
    } catch (const Ec2Error& e) {
      if (e.code() == "InvalidKeyPair.NotFound") return kit::DeletedResult(false);
      Raise(region, e);
    }
    auto items = doc.Items("keySet");
    if (items.empty()) return kit::DeletedResult(false);
    if (!Managed(*items.front())) throw refuse();
    host_.Progress("deleting key pair " + id + " in " + region);
    Call(region, "DeleteKeyPair", {{"KeyName", id}});
    return kit::DeletedResult(true);
  }
  XmlNode doc;
  try {
    doc = ec2_->Call(region, "DescribeSecurityGroups", {{"GroupId.1", id}});
  } catch (const Ec2Error& e) {
    if (e.code() == "InvalidGroup.NotFound") return kit::DeletedResult(false);
    Raise(region, e);
  }
  auto items = doc.Items("securityGroupInfo");
  if (items.empty()) return kit::DeletedResult(false);
  if (!Managed(*items.front())) throw refuse();
  host_.Progress("deleting security group " + items.front()->Text("groupName") + " (" + id + ")");
  switch (DeleteGroup(region, id, steady_clock::now() + delete_wait_)) {
    case GroupDeletion::kDeleted: return kit::DeletedResult(true);
    case GroupDeletion::kGone: return kit::DeletedResult(false);
    case GroupDeletion::kInUse: break;
  }
  throw DriverError(GPUPROV_STATUS_FAILED, "security group " + ref.id +
                                               " is still in use by an instance (DependencyViolation)");
}

std::string AwsDriver::OpenPorts(const std::string& request_json) {
  ObjectPtr request = json::ParseObject(request_json, "the open_ports request");
  std::vector<int> ports = kit::PortsOf(request, "ports");
  std::string region;
  std::optional<XmlNode> instance = Resolve(request, /*include_gone=*/false, &region);
  if (!instance) {
    throw DriverError(GPUPROV_STATUS_NOT_FOUND,
                      "no gpuprov EC2 instance with id " + json::Str(request, "id"));
  }
  std::optional<XmlNode> group = OwnGroup(region, *instance);
  if (!group) {
    throw DriverError(GPUPROV_STATUS_FAILED,
                      "instance " + instance->Text("instanceId") + " has no security group " +
                          ResourceName(TagsOf(*instance)["Name"]) +
                          " (it was not made by gpuprov's create)");
  }
  // Each listed port gets exactly its sources; the group's other rules stay.
  const kit::PortSources sources = kit::SourcesOf(request);
  AuthorizePorts(region, group->Text("groupId"), &*group, ports, sources);
  return kit::ConfirmSources("{}", sources);
}

std::string AwsDriver::OpenPeerPorts(const std::string& request_json) {
  const kit::PeerPortsRequest r = kit::ParsePeerPortsRequest(request_json);
  // The peers' ids are "<region>/<instance-id>"; the cluster is in one region.
  std::string region;
  for (const auto& p : r.peers) {
    if (region.empty()) region = SplitId(p.id).first;
  }
  if (region.empty()) region = ResolveRegion(ProcessEnv(), "", default_region_, profile_);
  EnsureClusterGroup(region, r.cluster, r.peer_ports, ResolveNetwork(region));
  return "{}";
}

std::optional<XmlNode> AwsDriver::OwnGroup(const std::string& region, const XmlNode& instance) {
  const std::string group_name = ResourceName(TagsOf(instance)["Name"]);
  for (const XmlNode* g : instance.Items("groupSet")) {
    if (g->Text("groupName") != group_name) continue;
    XmlNode doc = Call(region, "DescribeSecurityGroups", {{"GroupId.1", g->Text("groupId")}});
    std::vector<const XmlNode*> groups = doc.Items("securityGroupInfo");
    if (!groups.empty()) return *groups.front();
  }
  return std::nullopt;
}

}  // namespace gpuprov::aws

// The keys of [clouds.aws] this driver reads (gpuprov refuses others in config.toml); the kit's
// standard keys first, README.md's settings table lists the same (driver_settings_docs_test).
constexpr gpuprov_type_config_key kAwsConfigKeys[] = {
    gpuprov::drivers::kRetryKey,
    gpuprov::drivers::PollIntervalKey("polling interval of the waits below (2000)"),
    gpuprov::drivers::DeleteWaitKey("how long delete waits for terminated before removing the security group (600)"),
    gpuprov::sdk::StringListKey("regions", "more regions that list and look-ups by name search (default: only the default region)"),
    gpuprov::sdk::StringKey("profile", "the AWS profile for credentials and region (else AWS_PROFILE, else default)"),
    gpuprov::sdk::StringKey("region", "the region used when provision names none (else AWS_REGION, the profile's)"),
    gpuprov::sdk::StringKey("image", "an AMI id or resolve:ssm: parameter used instead of the default images"),
    gpuprov::sdk::StringKey("vpc_id", "the VPC for security groups and instances, for accounts without a default VPC (else the default VPC)"),
    gpuprov::sdk::StringKey("subnet_id", "the subnet instances launch into, with a public address (its VPC is used; else the default VPC)"),
    gpuprov::sdk::IntegerKey("consistency_grace_seconds", "how long a just-created instance or group may be not visible yet (60)"),
};

GPUPROV_DRIVER(gpuprov::aws::AwsDriver, kAwsConfigKeys)
