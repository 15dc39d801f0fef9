// SPDX-License-Identifier: Apache-2.0
#include "nebius_driver.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "driver_kit.h"

namespace gpuprov::nebius {
namespace {

namespace kit = gpuprov::drivers;

// What a VM powered off from inside still costs (gpuprov's TTL on the node powers it off),
// from REFERENCE.md: "stopped VMs are not billed for compute"; the boot disk stays and is billed.
constexpr kit::PoweredOffCost kPoweredOffCost = kit::PoweredOffCost::kDisk;

using namespace gpuprov::drivers::prelude;  // DriverError, json, Array, Object
using std::chrono::milliseconds;
namespace nc = ::nebius::common::v1;
namespace compute = ::nebius::compute::v1;
namespace vpc = ::nebius::vpc::v1;
using Done = std::function<void(grpc::Status)>;

constexpr int kMaxPages = 100;
constexpr int64_t kPageSize = 100;
constexpr int kIngressPriority = 500;
// A GPU image family needs at least 40 GB (REFERENCE.md §9).
constexpr int64_t kMinGpuDiskGib = 40;

std::string EnvOr(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? kit::TrimSpace(v) : "";
}

std::string HomeFile(const std::string& relative) {
  const std::string home = EnvOr("HOME");
  return home.empty() ? "" : home + "/" + relative;
}

template <class MapT>
std::map<std::string, std::string> LabelsOf(const MapT& labels) {
  return std::map<std::string, std::string>(labels.begin(), labels.end());
}

template <class MapT>
void SetLabels(MapT* to, const std::map<std::string, std::string>& labels) {
  for (const auto& [k, v] : labels) (*to)[k] = v;
}

// A listed resource from its metadata: the VM it was made for is its gpuprov-name label.
kit::ResourceFields ResourceOf(const std::string& kind, const nc::ResourceMetadata& m,
                               const std::string& region) {
  kit::ResourceFields r = kit::Resource(kind, m.id(), m.name());
  const auto labels = LabelsOf(m.labels());
  if (auto it = labels.find(kit::kNameTag); it != labels.end() && !it->second.empty()) {
    r.vm_names = {it->second};
  }
  r.region = region;
  if (m.has_created_at()) {
    r.created_at = google::protobuf::util::TimeUtil::ToString(m.created_at());
  }
  return r;
}

std::string PortList(const std::vector<int>& ports) {
  std::string out;
  for (int p : ports) out += (out.empty() ? "" : ",") + std::to_string(p);
  return out;
}

// The ingress TCP ports a rule opens to every source (AnyAddress: 0.0.0.0/0, or no CIDR and no
// source group); all of 1-65535 for a rule without ports.
std::set<int> OpenToAll(const vpc::SecurityRule& rule) {
  const vpc::SecurityRuleSpec& s = rule.spec();
  if (s.access() != vpc::ALLOW || !s.has_ingress()) return {};
  if (s.protocol() != vpc::TCP && s.protocol() != vpc::ANY) return {};
  const auto& cidrs = s.ingress().source_cidrs();
  if (!AnyAddress({cidrs.begin(), cidrs.end()}, s.ingress().source_security_group_id())) return {};
  std::set<int> ports;
  if (s.ingress().destination_ports().empty()) {
    for (int p = 1; p <= 65535; ++p) ports.insert(p);
  }
  for (int p : s.ingress().destination_ports()) ports.insert(p);
  return ports;
}

// The cluster's security group: "-peers" after the cluster name, since the server VM (named
// after the cluster) has its own group gpuprov-<cluster>.
std::string ClusterGroupName(const std::string& cluster) {
  return kit::ClusterResourceName(cluster) + "-peers";
}

// One rule of a cluster's group: the peer ports of one protocol (at most 8 a rule), from the
// group itself.
struct PeerRule {
  vpc::RuleProtocol protocol = vpc::TCP;
  std::vector<int> ports;  // sorted
  std::string name;        // "peers-tcp-6443-10250"
};

std::vector<PeerRule> PeerRulesOf(const std::vector<kit::PeerPort>& ports) {
  std::map<std::string, std::vector<int>> by_protocol;
  for (const auto& p : ports) by_protocol[p.protocol].push_back(p.port);
  std::vector<PeerRule> out;
  for (auto& [protocol, list] : by_protocol) {
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
    for (const auto& group : PortGroups(list)) {
      PeerRule r;
      r.protocol = protocol == "udp" ? vpc::UDP : vpc::TCP;
      r.ports = group;
      r.name = "peers-" + protocol;
      for (int port : group) r.name += "-" + std::to_string(port);
      out.push_back(std::move(r));
    }
  }
  return out;
}

// Whether rule is exactly `want` in group group_id: ALLOW ingress of its protocol and ports,
// whose only source is the group itself.
bool IsPeerRule(const vpc::SecurityRule& rule, const std::string& group_id, const PeerRule& want) {
  const vpc::SecurityRuleSpec& s = rule.spec();
  if (s.access() != vpc::ALLOW || !s.has_ingress() || s.protocol() != want.protocol) return false;
  if (s.ingress().source_security_group_id() != group_id || !s.ingress().source_cidrs().empty()) {
    return false;
  }
  std::vector<int> ports(s.ingress().destination_ports().begin(),
                         s.ingress().destination_ports().end());
  std::sort(ports.begin(), ports.end());
  return ports == want.ports;
}

}  // namespace

NebiusDriver::NebiusDriver(const gpuprov::sdk::InitContext& ctx) : host_(ctx.host) {
  kit::DriverSettings settings = kit::ParseSettings(ctx.config_json);
  config_ = settings.config;
  endpoints_ = ParseEndpoint(settings.endpoint);
  region_ = json::Str(config_, "region");
  if (region_.empty()) region_ = kDefaultRegion;
  ssh_user_ = json::Str(config_, "ssh_user");
  if (ssh_user_.empty()) ssh_user_ = kDefaultSshUser;
  NebiusClient::Options options;
  options.call_timeout =
      milliseconds(1000 * std::max<long long>(1, json::Int(config_, "call_timeout_seconds", 30)));
  options.poll_interval =
      std::max(milliseconds(10), kit::PollIntervalSetting(config_, milliseconds(2000)));
  options.operation_timeout = milliseconds(
      1000 * std::max<long long>(1, json::Int(config_, "operation_timeout_seconds", 900)));
  options.retry = kit::RetryPolicyFrom(config_);
  client_ = std::make_unique<NebiusClient>(
      endpoints_, host_, options,
      [this](std::shared_ptr<grpc::Channel> channel) { return MakeTokens(std::move(channel)); });
}

std::unique_ptr<TokenSource> NebiusDriver::MakeTokens(std::shared_ptr<grpc::Channel> channel) const {
  if (std::optional<kit::Credential> c = kit::CredentialFromEnv({"NEBIUS_IAM_TOKEN"})) {
    return std::make_unique<TokenSource>(c->value, c->origin);
  }
  std::string file = json::Str(config_, "credentials_file");
  std::string file_origin = "credentials_file in [clouds.nebius]";
  if (file.empty()) {
    file = EnvOr("NEBIUS_CREDENTIALS_FILE");
    file_origin = "$NEBIUS_CREDENTIALS_FILE";
  }
  if (!file.empty()) {
    std::optional<std::string> text = kit::ReadSmallFile(file);
    if (!text) {
      throw DriverError(GPUPROV_STATUS_AUTH, "cannot read the Nebius credentials file " + file +
                                                 " (" + file_origin + ")");
    }
    return std::make_unique<TokenSource>(ParseCredentialsFile(*text, file), std::move(channel));
  }
  const std::string token_file = HomeFile(".nebius/NEBIUS_IAM_TOKEN.txt");
  if (std::optional<std::string> t = kit::ReadSmallFile(token_file)) {
    if (!kit::TrimSpace(*t).empty()) {
      return std::make_unique<TokenSource>(kit::TrimSpace(*t), token_file);
    }
  }
  file = HomeFile(".nebius/credentials.json");
  if (std::optional<std::string> text = kit::ReadSmallFile(file)) {
    return std::make_unique<TokenSource>(ParseCredentialsFile(*text, file), std::move(channel));
  }
  throw DriverError(GPUPROV_STATUS_AUTH,
                    "no Nebius credentials: set NEBIUS_IAM_TOKEN (e.g. from `nebius iam "
                    "get-access-token`), or credentials_file in [clouds.nebius] (or "
                    "NEBIUS_CREDENTIALS_FILE) to a service-account credentials file (else "
                    "~/.nebius/credentials.json)");
}

const std::string& NebiusDriver::Project() {
  if (project_.empty()) {
    std::string p = json::Str(config_, "project_id");
    if (p.empty()) p = EnvOr("NEBIUS_PROJECT_ID");
    if (p.empty()) {
      std::string profile = json::Str(config_, "profile");
      if (profile.empty()) profile = EnvOr("NEBIUS_PROFILE");
      if (std::optional<std::string> text = kit::ReadSmallFile(HomeFile(".nebius/config.yaml"))) {
        p = ProfileParentId(*text, profile).value_or("");
      }
    }
    if (p.empty()) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "no Nebius project: set project_id in [clouds.nebius] of "
                        "~/.gpu-provisioner/config.toml or NEBIUS_PROJECT_ID (or parent-id in "
                        "the nebius CLI profile, ~/.nebius/config.yaml)");
    }
    project_ = p;
  }
  return project_;
}

// --- look-ups ---

std::optional<NebiusDriver::Instance> NebiusDriver::InstanceByName(const std::string& name) {
  nc::GetByNameRequest req;
  req.set_parent_id(Project());
  req.set_name(name);
  Instance inst;
  if (!client_->Run({"find instance " + name, false, true},
                    [&](grpc::ClientContext* c, Done d) {
                      client_->instances().async()->GetByName(c, &req, &inst, std::move(d));
                    })) {
    return std::nullopt;
  }
  return inst;
}

std::optional<NebiusDriver::Instance> NebiusDriver::InstanceById(const std::string& id) {
  compute::GetInstanceRequest req;
  req.set_id(id);
  Instance inst;
  if (!client_->Run({"get instance " + id, false, true}, [&](grpc::ClientContext* c, Done d) {
        client_->instances().async()->Get(c, &req, &inst, std::move(d));
      })) {
    return std::nullopt;
  }
  return inst;
}

std::optional<NebiusDriver::Instance> NebiusDriver::Resolve(const Object::Ptr& request) {
  const auto [id, name] = kit::RequireIdOrName(request);
  std::optional<Instance> inst;
  if (!id.empty() && id.rfind("computeinstance-", 0) == 0) inst = InstanceById(id);
  if (!inst && !name.empty()) inst = InstanceByName(name);
  if (!inst && id.rfind("computeinstance-", 0) != 0 && !id.empty()) inst = InstanceByName(id);
  if (!inst || !OwnedBy(LabelsOf(inst->metadata().labels()))) return std::nullopt;
  if (!name.empty() && inst->metadata().name() != name) return std::nullopt;
  return inst;
}

std::vector<NebiusDriver::Instance> NebiusDriver::Instances() {
  std::vector<Instance> out;
  std::string token;
  for (int page = 0; page < kMaxPages; ++page) {
    compute::ListInstancesRequest req;
    req.set_parent_id(Project());
    req.set_page_size(kPageSize);
    req.set_page_token(token);
    compute::ListInstancesResponse resp;
    client_->Run({"list instances"}, [&](grpc::ClientContext* c, Done d) {
      client_->instances().async()->List(c, &req, &resp, std::move(d));
    });
    for (auto& i : *resp.mutable_items()) out.push_back(std::move(i));
    token = resp.next_page_token();
    if (token.empty()) break;
  }
  return out;
}

std::vector<compute::Disk> NebiusDriver::Disks() {
  std::vector<compute::Disk> out;
  std::string token;
  for (int page = 0; page < kMaxPages; ++page) {
    compute::ListDisksRequest req;
    req.set_parent_id(Project());
    req.set_page_size(kPageSize);
    req.set_page_token(token);
    compute::ListDisksResponse resp;
    client_->Run({"list disks"}, [&](grpc::ClientContext* c, Done d) {
      client_->disks().async()->List(c, &req, &resp, std::move(d));
    });
    for (auto& i : *resp.mutable_items()) out.push_back(std::move(i));
    token = resp.next_page_token();
    if (token.empty()) break;
  }
  return out;
}

std::vector<vpc::SecurityGroup> NebiusDriver::Groups() {
  std::vector<vpc::SecurityGroup> out;
  std::string token;
  for (int page = 0; page < kMaxPages; ++page) {
    vpc::ListSecurityGroupsRequest req;
    req.set_parent_id(Project());
    req.set_page_size(kPageSize);
    req.set_page_token(token);
    vpc::ListSecurityGroupsResponse resp;
    client_->Run({"list security groups"}, [&](grpc::ClientContext* c, Done d) {
      client_->groups().async()->List(c, &req, &resp, std::move(d));
    });
    for (auto& i : *resp.mutable_items()) out.push_back(std::move(i));
    token = resp.next_page_token();
    if (token.empty()) break;
  }
  return out;
}

std::pair<std::string, std::string> NebiusDriver::Subnet() {
  const std::string wanted = json::Str(config_, "subnet_id");
  if (!wanted.empty()) {
    vpc::GetSubnetRequest req;
    req.set_id(wanted);
    vpc::Subnet s;
    if (!client_->Run({"get subnet " + wanted, false, true}, [&](grpc::ClientContext* c, Done d) {
          client_->subnets().async()->Get(c, &req, &s, std::move(d));
        })) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "subnet " + wanted + " (subnet_id in [clouds.nebius]) does not exist");
    }
    return {s.metadata().id(), s.spec().network_id()};
  }
  vpc::ListSubnetsRequest req;
  req.set_parent_id(Project());
  req.set_page_size(kPageSize);
  vpc::ListSubnetsResponse resp;
  client_->Run({"list subnets of project " + Project()}, [&](grpc::ClientContext* c, Done d) {
    client_->subnets().async()->List(c, &req, &resp, std::move(d));
  });
  const vpc::Subnet* pick = nullptr;
  for (const auto& s : resp.items()) {
    if (s.metadata().name().rfind("default-subnet", 0) == 0) {
      pick = &s;
      break;
    }
  }
  if (!pick && !resp.items().empty()) pick = &resp.items(0);
  if (!pick) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "project " + Project() +
                          " has no subnet; create a network in the Nebius console or set "
                          "subnet_id in [clouds.nebius]");
  }
  return {pick->metadata().id(), pick->spec().network_id()};
}

// --- security group ---

std::string NebiusDriver::EnsureSecurityGroup(const std::string& vm_name,
                                              const std::vector<int>& ports,
                                              const kit::PortSources& sources,
                                              const std::string& network_id,
                                              const std::map<std::string, std::string>& labels,
                                              bool* created) {
  *created = false;
  const std::string sg_name = SecurityGroupName(vm_name);
  if (std::optional<vpc::SecurityGroup> group = GroupByName(sg_name)) {
    if (!OwnedBy(LabelsOf(group->metadata().labels()), vm_name)) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "a security group named " + sg_name + " exists in project " + Project() +
                            " that gpuprov did not make; delete it or choose another VM name");
    }
    AddMissingRules(group->metadata().id(), vm_name, ports, sources, true);
    return group->metadata().id();
  }
  vpc::CreateSecurityGroupRequest req;
  req.mutable_metadata()->set_parent_id(Project());
  req.mutable_metadata()->set_name(sg_name);
  SetLabels(req.mutable_metadata()->mutable_labels(), labels);
  req.mutable_spec()->set_network_id(network_id);
  host_.Progress("creating security group " + sg_name + " (tcp " + PortList(ports) + ")");
  Operation op;
  client_->Run({"create security group " + sg_name, true}, [&](grpc::ClientContext* c, Done d) {
    client_->groups().async()->Create(c, &req, &op, std::move(d));
  });
  *created = true;
  op = client_->Wait(NebiusClient::Service::kVpc, op, "create security group " + sg_name);
  const std::string id = op.resource_id();
  AddMissingRules(id, vm_name, ports, sources, true);
  return id;
}

std::vector<int> NebiusDriver::OpenPortsOf(const std::string& group_id,
                                           const std::vector<int>& ports, bool* egress_to_all) {
  std::set<int> open;
  if (egress_to_all != nullptr) *egress_to_all = false;
  for (const auto& r : Rules(group_id)) {
    for (int p : OpenToAll(r)) open.insert(p);
    const vpc::SecurityRuleSpec& s = r.spec();
    if (egress_to_all != nullptr && s.has_egress() && s.access() == vpc::ALLOW) {
      const auto& cidrs = s.egress().destination_cidrs();
      if (AnyAddress({cidrs.begin(), cidrs.end()}, s.egress().destination_security_group_id())) {
        *egress_to_all = true;
      }
    }
  }
  std::vector<int> out;
  for (int p : ports) {
    if (open.count(p)) out.push_back(p);
  }
  return out;
}

std::vector<IngressRule> NebiusDriver::IngressRules(const std::string& group_id) {
  std::vector<IngressRule> out;
  for (const auto& r : Rules(group_id)) {
    const vpc::SecurityRuleSpec& sp = r.spec();
    if (sp.access() != vpc::ALLOW || !sp.has_ingress()) continue;
    if (sp.protocol() != vpc::TCP && sp.protocol() != vpc::ANY) continue;
    IngressRule one;
    one.id = r.metadata().id();
    one.name = r.metadata().name();
    one.ports.assign(sp.ingress().destination_ports().begin(),
                     sp.ingress().destination_ports().end());
    one.cidrs.assign(sp.ingress().source_cidrs().begin(), sp.ingress().source_cidrs().end());
    out.push_back(std::move(one));
  }
  return out;
}

void NebiusDriver::AddMissingRules(const std::string& group_id, const std::string& vm_name,
                                   const std::vector<int>& ports, const kit::PortSources& sources,
                                   bool with_egress) {
  std::vector<int> world;  // the ports open to everyone; the narrowed ones below
  for (int p : ports) {
    if (!sources.IsNarrowed(p)) world.push_back(p);
  }
  bool egress_to_all = false;
  const std::vector<int> open = OpenPortsOf(group_id, world, &egress_to_all);
  std::vector<int> missing;
  for (int p : world) {
    if (std::find(open.begin(), open.end(), p) == open.end()) missing.push_back(p);
  }
  const auto labels = LabelsFor(vm_name, {});
  auto create_rule = [&](const std::string& rule_name, vpc::SecurityRuleSpec spec) {
    CreateRule(group_id, rule_name, labels, std::move(spec));
  };
  for (const auto& group : PortGroups(missing)) {
    vpc::SecurityRuleSpec spec;
    spec.set_access(vpc::ALLOW);
    spec.set_priority(kIngressPriority);
    spec.set_protocol(vpc::TCP);
    spec.set_type(vpc::STATEFUL);
    spec.mutable_ingress()->add_source_cidrs("0.0.0.0/0");
    for (int p : group) spec.mutable_ingress()->add_destination_ports(p);
    std::string rule_name = "ingress-tcp";
    for (int p : group) rule_name += "-" + std::to_string(p);
    host_.Progress("opening tcp " + PortList(group) + " in security group " +
                   SecurityGroupName(vm_name));
    create_rule(rule_name, std::move(spec));
  }
  if (sources.Narrows()) {
    // Exactly allow_from on the narrowed ports: the rules they lack first, then the rules that
    // admit other sources go (rules are immutable; the other ports of one come back first).
    const SourcesPlan plan = PlanSources(IngressRules(group_id), ports, sources);
    if (!plan.problem.empty()) {
      throw DriverError(GPUPROV_STATUS_FAILED,
                        "allow_from: " + plan.problem + " in security group " +
                            SecurityGroupName(vm_name) + "; delete that rule, then re-run");
    }
    for (const IngressRule& r : plan.add) {
      vpc::SecurityRuleSpec spec;
      spec.set_access(vpc::ALLOW);
      spec.set_priority(kIngressPriority);
      spec.set_protocol(vpc::TCP);
      spec.set_type(vpc::STATEFUL);
      for (const auto& c : r.cidrs) spec.mutable_ingress()->add_source_cidrs(c);
      for (int p : r.ports) spec.mutable_ingress()->add_destination_ports(p);
      std::string from;
      for (const auto& c : r.cidrs) from += (from.empty() ? "" : ", ") + c;
      host_.Progress("opening tcp " + PortList(r.ports) + " to " + from + " in security group " +
                     SecurityGroupName(vm_name));
      create_rule(r.name, std::move(spec));
    }
    for (const std::string& id : plan.remove_ids) {
      const std::string what = "delete security rule " + id + " of " + SecurityGroupName(vm_name);
      host_.Progress(what + " (it admits sources outside allow_from)");
      DeleteRule(id, what);
    }
  }
  if (with_egress && !egress_to_all) {
    // A group ends in an implicit deny: outbound traffic (package and k3s downloads) needs
    // its own rule. Looked for, not inferred from the ingress rules: a run that stopped
    // between the rules left a group with ingress and no egress.
    vpc::SecurityRuleSpec spec;
    spec.set_access(vpc::ALLOW);
    spec.set_priority(kIngressPriority);
    spec.set_protocol(vpc::ANY);
    spec.set_type(vpc::STATEFUL);
    spec.mutable_egress()->add_destination_cidrs("0.0.0.0/0");
    create_rule("egress-all", std::move(spec));
  }
}

void NebiusDriver::CreateRule(const std::string& group_id, const std::string& rule_name,
                              const std::map<std::string, std::string>& labels,
                              vpc::SecurityRuleSpec spec) {
  vpc::CreateSecurityRuleRequest req;
  req.mutable_metadata()->set_parent_id(group_id);
  req.mutable_metadata()->set_name(rule_name);
  SetLabels(req.mutable_metadata()->mutable_labels(), labels);
  *req.mutable_spec() = std::move(spec);
  Operation op;
  const std::string what = "create security rule " + rule_name + " in " + group_id;
  client_->Run({what, true}, [&](grpc::ClientContext* c, Done d) {
    client_->rules().async()->Create(c, &req, &op, std::move(d));
  });
  client_->Wait(NebiusClient::Service::kVpc, op, what);
}

void NebiusDriver::DeleteRule(const std::string& rule_id, const std::string& what) {
  vpc::DeleteSecurityRuleRequest req;
  req.set_id(rule_id);
  Operation op;
  if (client_->Run({what, true, true}, [&](grpc::ClientContext* c, Done d) {
        client_->rules().async()->Delete(c, &req, &op, std::move(d));
      })) {
    client_->Wait(NebiusClient::Service::kVpc, op, what);
  }
}

std::vector<vpc::SecurityRule> NebiusDriver::Rules(const std::string& group_id) {
  std::vector<vpc::SecurityRule> out;
  std::string token;
  for (int page = 0; page < kMaxPages; ++page) {
    vpc::ListSecurityRulesRequest req;
    req.set_parent_id(group_id);
    req.set_page_size(kPageSize);
    req.set_page_token(token);
    vpc::ListSecurityRulesResponse resp;
    client_->Run({"list rules of security group " + group_id}, [&](grpc::ClientContext* c, Done d) {
      client_->rules().async()->List(c, &req, &resp, std::move(d));
    });
    for (auto& r : *resp.mutable_items()) out.push_back(std::move(r));
    token = resp.next_page_token();
    if (token.empty()) break;
  }
  return out;
}

// --- a cluster's security group ---

std::optional<vpc::SecurityGroup> NebiusDriver::GroupByName(const std::string& sg_name) {
  vpc::GetSecurityGroupByNameRequest get;
  get.set_parent_id(Project());
  get.set_name(sg_name);
  vpc::SecurityGroup group;
  if (!client_->Run({"find security group " + sg_name, false, true},
                    [&](grpc::ClientContext* c, Done d) {
                      client_->groups().async()->GetByName(c, &get, &group, std::move(d));
                    })) {
    return std::nullopt;
  }
  return group;
}

std::string NebiusDriver::EnsureClusterGroup(const std::string& cluster,
                                             const std::vector<kit::PeerPort>& ports,
                                             const std::string& network_id, bool exact) {
  const std::string sg_name = ClusterGroupName(cluster);
  const std::map<std::string, std::string> labels = {{kit::kManagedTag, "1"},
                                                     {kit::kClusterTag, cluster}};
  std::optional<vpc::SecurityGroup> group = GroupByName(sg_name);
  std::string id;
  if (!group) {
    vpc::CreateSecurityGroupRequest req;
    req.mutable_metadata()->set_parent_id(Project());
    req.mutable_metadata()->set_name(sg_name);
    SetLabels(req.mutable_metadata()->mutable_labels(), labels);
    req.mutable_spec()->set_network_id(network_id);
    host_.Progress("creating security group " + sg_name + " (" + kit::PeerPortsText(ports) +
                   " between the nodes of cluster " + cluster + ")");
    try {
      Operation op;
      client_->Run({"create security group " + sg_name, true}, [&](grpc::ClientContext* c, Done d) {
        client_->groups().async()->Create(c, &req, &op, std::move(d));
      });
      op = client_->Wait(NebiusClient::Service::kVpc, op, "create security group " + sg_name);
      id = op.resource_id();
    } catch (const DriverError& e) {
      // Another node's create made it in the meantime (ALREADY_EXISTS): that one is used.
      if (e.status() != GPUPROV_STATUS_INVALID_INPUT) throw;
      group = GroupByName(sg_name);
      if (!group) throw;
    }
  }
  if (group) {
    const auto have = LabelsOf(group->metadata().labels());
    const auto it = have.find(kit::kClusterTag);
    if (!OwnedBy(have) || it == have.end() || it->second != cluster || have.count(kit::kNameTag)) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "a security group named " + sg_name + " exists in project " + Project() +
                            " that gpuprov did not make for cluster " + cluster +
                            "; delete it or choose another cluster name");
    }
    id = group->metadata().id();
  }
  // Rules whose source is the group itself admit the interfaces that list the group
  // (RuleIngress.source_security_group_id, nebius/api vpc/v1/security_rule.proto; Nebius
  // documentation, https://docs.nebius.com/vpc/security-groups/overview).
  const std::vector<PeerRule> wanted = PeerRulesOf(ports);
  std::vector<bool> present(wanted.size(), false);
  std::vector<vpc::SecurityRule> stale;
  for (const auto& r : Rules(id)) {
    bool used = false;
    for (size_t i = 0; i < wanted.size() && !used; ++i) {
      if (!present[i] && IsPeerRule(r, id, wanted[i])) present[i] = used = true;
    }
    if (!used) stale.push_back(r);
  }
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (present[i]) continue;
    vpc::SecurityRuleSpec spec;
    spec.set_access(vpc::ALLOW);
    spec.set_priority(kIngressPriority);
    spec.set_protocol(wanted[i].protocol);
    spec.set_type(vpc::STATEFUL);
    spec.mutable_ingress()->set_source_security_group_id(id);
    for (int p : wanted[i].ports) spec.mutable_ingress()->add_destination_ports(p);
    host_.Progress("allowing " + std::string(wanted[i].protocol == vpc::UDP ? "udp " : "tcp ") +
                   PortList(wanted[i].ports) + " within security group " + sg_name);
    CreateRule(id, wanted[i].name, labels, std::move(spec));
  }
  if (exact) {
    // Rules are immutable: one that differs (other ports or sources, a duplicate) goes; its
    // replacement was made above.
    for (const auto& r : stale) {
      const std::string what =
          "delete security rule " + r.metadata().name() + " of " + sg_name;
      host_.Progress(what + " (not one of the cluster's peer rules)");
      DeleteRule(r.metadata().id(), what);
    }
  }
  return id;
}

void NebiusDriver::RemoveClusterGroupIfLast(const std::string& cluster,
                                            const std::string& leaving_id) {
  for (const auto& inst : Instances()) {
    if (inst.metadata().id() == leaving_id) continue;
    const auto labels = LabelsOf(inst.metadata().labels());
    const auto it = labels.find(kit::kClusterTag);
    if (OwnedBy(labels) && it != labels.end() && it->second == cluster) return;
  }
  const std::string sg_name = ClusterGroupName(cluster);
  std::optional<vpc::SecurityGroup> group = GroupByName(sg_name);
  if (!group) return;
  const auto labels = LabelsOf(group->metadata().labels());
  const auto it = labels.find(kit::kClusterTag);
  if (!OwnedBy(labels) || it == labels.end() || it->second != cluster) return;
  try {
    DeleteGroup(*group);
  } catch (const DriverError& e) {
    if (e.status() == GPUPROV_STATUS_CANCELLED) throw;
    host_.Warning("security group " + sg_name + " of cluster " + cluster + " stays: " + e.what() +
                  "; `gpuprov gc --delete` removes it once no instance uses it");
  }
}

// --- boot disk ---

std::string NebiusDriver::EnsureBootDisk(const std::string& vm_name,
                                         const std::string& image_family, int64_t size_gib,
                                         const std::map<std::string, std::string>& labels,
                                         bool* created) {
  *created = false;
  const std::string disk_name = BootDiskName(vm_name);
  nc::GetByNameRequest get;
  get.set_parent_id(Project());
  get.set_name(disk_name);
  compute::Disk disk;
  std::string id;
  if (client_->Run({"find disk " + disk_name, false, true}, [&](grpc::ClientContext* c, Done d) {
        client_->disks().async()->GetByName(c, &get, &disk, std::move(d));
      })) {
    if (!OwnedBy(LabelsOf(disk.metadata().labels()), vm_name)) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "a disk named " + disk_name + " exists in project " + Project() +
                            " that gpuprov did not make; delete it or choose another VM name");
    }
    if (!disk.status().read_write_attachment().empty()) {
      throw DriverError(GPUPROV_STATUS_FAILED,
                        "disk " + disk_name + " is attached to " +
                            disk.status().read_write_attachment() +
                            "; `gpuprov down` that VM first");
    }
    id = disk.metadata().id();
  } else {
    compute::CreateDiskRequest req;
    req.mutable_metadata()->set_parent_id(Project());
    req.mutable_metadata()->set_name(disk_name);
    SetLabels(req.mutable_metadata()->mutable_labels(), labels);
    req.mutable_spec()->set_size_gibibytes(size_gib);
    req.mutable_spec()->set_type(compute::DiskSpec::NETWORK_SSD);
    req.mutable_spec()->mutable_source_image_family()->set_image_family(image_family);
    host_.Progress("creating boot disk " + disk_name + " (" + std::to_string(size_gib) +
                   " GiB, image family " + image_family + ")");
    Operation op;
    client_->Run({"create disk " + disk_name, true}, [&](grpc::ClientContext* c, Done d) {
      client_->disks().async()->Create(c, &req, &op, std::move(d));
    });
    *created = true;
    op = client_->Wait(NebiusClient::Service::kCompute, op, "create disk " + disk_name);
    id = op.resource_id();
  }
  // The disk is usable once READY (REFERENCE.md §3.1).
  compute::GetDiskRequest req;
  req.set_id(id);
  kit::PollOptions poll{"waiting for disk " + disk_name + " to be READY",
                        client_->options().poll_interval, client_->options().operation_timeout};
  const bool ready = kit::PollUntil(host_, poll, [&](std::string* state) {
    client_->Run({"get disk " + disk_name}, [&](grpc::ClientContext* c, Done d) {
      client_->disks().async()->Get(c, &req, &disk, std::move(d));
    });
    *state = compute::DiskStatus::State_Name(disk.status().state());
    if (disk.status().state() == compute::DiskStatus::ERROR ||
        disk.status().state() == compute::DiskStatus::BROKEN) {
      throw DriverError(GPUPROV_STATUS_FAILED, "boot disk " + disk_name + " is " + *state +
                                                   (disk.status().state_description().empty()
                                                        ? ""
                                                        : ": " + disk.status().state_description()));
    }
    return disk.status().state() == compute::DiskStatus::READY;
  });
  if (!ready) {
    throw DriverError(GPUPROV_STATUS_TRANSIENT,
                      "boot disk " + disk_name + " is not READY in time; re-run to continue");
  }
  return id;
}

// --- deletes ---

bool NebiusDriver::DeleteInstance(const Instance& inst) {
  const std::string id = inst.metadata().id();
  const std::string name = inst.metadata().name();
  compute::DeleteInstanceRequest req;
  req.set_id(id);
  Operation op;
  host_.Progress("deleting instance " + name + " (" + id + ")");
  if (!client_->Run({"delete instance " + name, true, true}, [&](grpc::ClientContext* c, Done d) {
        client_->instances().async()->Delete(c, &req, &op, std::move(d));
      })) {
    return false;
  }
  client_->Wait(NebiusClient::Service::kCompute, op, "delete instance " + name);
  // Gone (NOT_FOUND) before its disk can go.
  kit::PollOptions poll{"waiting for instance " + name + " to be gone",
                        client_->options().poll_interval, client_->options().operation_timeout};
  const bool gone = kit::PollUntil(host_, poll, [&](std::string* state) {
    std::optional<Instance> left = InstanceById(id);
    if (left) *state = InstanceStateName(left->status().state());
    return !left.has_value();
  });
  if (!gone) {
    throw DriverError(GPUPROV_STATUS_TRANSIENT,
                      "instance " + name + " is still there after its delete; re-run to retry");
  }
  return true;
}

bool NebiusDriver::DeleteBootDisk(const std::string& vm_name) {
  const std::string disk_name = BootDiskName(vm_name);
  nc::GetByNameRequest get;
  get.set_parent_id(Project());
  get.set_name(disk_name);
  compute::Disk disk;
  if (!client_->Run({"find disk " + disk_name, false, true}, [&](grpc::ClientContext* c, Done d) {
        client_->disks().async()->GetByName(c, &get, &disk, std::move(d));
      })) {
    return false;
  }
  if (!OwnedBy(LabelsOf(disk.metadata().labels()), vm_name)) {
    host_.Warning("disk " + disk_name + " is not labelled as gpuprov's for " + vm_name +
                  "; left in place");
    return false;
  }
  return DeleteDisk(disk);
}

bool NebiusDriver::DeleteDisk(const ::nebius::compute::v1::Disk& disk) {
  const std::string disk_name = disk.metadata().name();
  compute::DeleteDiskRequest req;
  req.set_id(disk.metadata().id());
  Operation op;
  host_.Progress("deleting disk " + disk_name);
  if (!client_->Run({"delete disk " + disk_name, true, true}, [&](grpc::ClientContext* c, Done d) {
        client_->disks().async()->Delete(c, &req, &op, std::move(d));
      })) {
    return false;
  }
  client_->Wait(NebiusClient::Service::kCompute, op, "delete disk " + disk_name);
  return true;
}

bool NebiusDriver::DeleteSecurityGroup(const std::string& vm_name) {
  const std::string sg_name = SecurityGroupName(vm_name);
  std::optional<vpc::SecurityGroup> group = GroupByName(sg_name);
  if (!group) return false;
  if (!OwnedBy(LabelsOf(group->metadata().labels()), vm_name)) {
    host_.Warning("security group " + sg_name + " is not labelled as gpuprov's for " + vm_name +
                  "; left in place");
    return false;
  }
  return DeleteGroup(*group);
}

bool NebiusDriver::DeleteGroup(const ::nebius::vpc::v1::SecurityGroup& group) {
  const std::string sg_name = group.metadata().name();
  const std::string id = group.metadata().id();
  // Its rules first (children of the group).
  for (const auto& r : Rules(id)) {
    DeleteRule(r.metadata().id(), "delete security rule " + r.metadata().name() + " of " + sg_name);
  }
  vpc::DeleteSecurityGroupRequest req;
  req.set_id(id);
  Operation op;
  host_.Progress("deleting security group " + sg_name);
  if (!client_->Run({"delete security group " + sg_name, true, true},
                    [&](grpc::ClientContext* c, Done d) {
                      client_->groups().async()->Delete(c, &req, &op, std::move(d));
                    })) {
    return false;
  }
  client_->Wait(NebiusClient::Service::kVpc, op, "delete security group " + sg_name);
  return true;
}

void NebiusDriver::CleanUp(const std::string& vm_name, bool disk, bool group) {
  try {
    if (std::optional<Instance> left = InstanceByName(vm_name);
        left && OwnedBy(LabelsOf(left->metadata().labels()), vm_name)) {
      DeleteInstance(*left);
    }
    if (disk) DeleteBootDisk(vm_name);
    if (group) DeleteSecurityGroup(vm_name);
  } catch (const std::exception& e) {
    host_.Warning("could not remove what the failed create of " + vm_name + " made: " +
                  e.what() + "; `gpuprov down " + vm_name + " --cloud nebius` retries");
  }
}

// --- results ---

Object::Ptr NebiusDriver::VmJson(const Instance& inst, const std::vector<int>& ports) const {
  const int state = inst.status().state();
  const std::string vm_state = VmStateOf(state, inst.status().reconciling());
  std::string public_ip;
  std::string private_ip;
  if (!inst.status().network_interfaces().empty()) {
    public_ip =
        StripPrefixLength(inst.status().network_interfaces(0).public_ip_address().address());
    // The interface's address on the project's subnet, in CIDR form like the public one.
    private_ip = StripPrefixLength(inst.status().network_interfaces(0).ip_address().address());
  }
  const PlatformPreset pp =
      PresetOf(inst.spec().resources().platform(), inst.spec().resources().preset());
  kit::VmFields vm;
  vm.id = inst.metadata().id();
  vm.name = inst.metadata().name();
  vm.state = vm_state;
  vm.public_ip = public_ip;
  vm.ssh_user = ssh_user_;
  vm.region = region_;
  vm.instance_type = pp.InstanceType();
  // The image family is on the boot disk, not the instance: not reported.
  vm.gpus = pp.gpu_count > 0 ? pp.gpu_type + ":" + std::to_string(pp.gpu_count) : "";
  vm.created_at = inst.metadata().has_created_at()
                      ? google::protobuf::util::TimeUtil::ToString(inst.metadata().created_at())
                      : std::string();
  vm.spot = inst.spec().has_preemptible();
  if (PreemptedByCompute(vm.spot, state, inst.status().reconciling(), inst.spec().stopped())) {
    vm.state = "preempted";
    vm.message = kPreemptedReason;
  } else if (vm_state != "running" && vm_state != "pending") {
    vm.message = InstanceStateName(state);
    if (state == compute::InstanceStatus::STOPPED) {
      vm.message +=
          ": the instance is stopped (its start failed or it was stopped); gpuprov down "
          "removes it";
    }
  }
  vm.ports = ports;
  vm.private_ip = private_ip;
  const auto labels = LabelsOf(inst.metadata().labels());
  if (auto it = labels.find(kit::kClusterTag); it != labels.end()) vm.cluster = it->second;
  if (auto it = labels.find(kit::kRoleTag); it != labels.end()) vm.role = it->second;
  vm.tags.emplace();
  for (const auto& [k, v] : labels) vm.tags->emplace_back(k, v);
  return kit::VmJson(vm);
}

// --- operations ---

std::string NebiusDriver::Check(const std::string& /*request_json*/) {
  const std::string project = Project();
  vpc::ListSubnetsRequest req;
  req.set_parent_id(project);
  req.set_page_size(1);
  vpc::ListSubnetsResponse resp;
  client_->Run({"list subnets of project " + project}, [&](grpc::ClientContext* c, Done d) {
    client_->subnets().async()->List(c, &req, &resp, std::move(d));
  });
  Object result(Poco::JSON_PRESERVE_KEY_ORDER);
  result.set("account", project + " / token from " + client_->TokenOrigin());
  result.set("user_data_limit", static_cast<int64_t>(kUserDataLimit));
  result.set("allow_from", true);  // security rules' source_cidrs (IPv4)
  result.set("credentials_from", client_->TokenOrigin());
  result.set("endpoint", endpoints_.compute);
  return json::Stringify(result);
}

std::string NebiusDriver::Offers(const std::string& request_json) {
  const auto [gpu, region] = kit::ParseOffersRequest(request_json, region_);
  Array::Ptr offers = new Array();
  std::vector<PlatformPreset> rows;
  if (gpu) {
    const std::optional<size_t> row = kit::FindGpuRow(PresetCatalogue(), gpu->type, gpu->count);
    if (!row) {
      host_.Warning(kit::NotOfferedMessage(PresetCatalogue(), gpu->type, gpu->count));
      return kit::OffersResult(offers, kPoweredOffCost);
    }
    rows.push_back(GpuPresets()[*row]);
  } else {
    rows.push_back(CpuPreset());
  }
  // What the project has (PlatformService.List); capacity shows only at create (REFERENCE.md §7).
  // A platform allowed_for_preemptibles sells the offer as spot too, at a price nobody here
  // knows (the API has none, the driver keeps no table: REFERENCE.md §3.7): spot price 0.
  std::set<std::string> known;
  std::set<std::string> preemptible_platforms;
  for (const auto& p : Platforms()) {
    for (const auto& preset : p.spec().presets()) {
      known.insert(p.metadata().name() + "/" + preset.name());
    }
    if (p.status().allowed_for_preemptibles()) preemptible_platforms.insert(p.metadata().name());
  }
  for (const auto& r : rows) {
    if (!known.count(r.InstanceType())) {
      host_.Warning("project " + Project() + " has no platform/preset " + r.InstanceType() +
                    " (PlatformService.List); " + std::to_string(known.size()) +
                    " presets are listed there");
      continue;
    }
    kit::OfferFields offer{r.InstanceType(), r.gpu_type, r.gpu_count, region, 0, ""};
    if (preemptible_platforms.count(r.platform)) offer.spot_price_per_hour = 0.0;
    offers->add(kit::OfferJson(offer));
  }
  return kit::OffersResult(offers, kPoweredOffCost);
}

std::vector<compute::Platform> NebiusDriver::Platforms() {
  std::vector<compute::Platform> out;
  std::string token;
  for (int page = 0; page < kMaxPages; ++page) {
    compute::ListPlatformsRequest req;
    req.set_parent_id(Project());
    req.set_page_size(kPageSize);
    req.set_page_token(token);
    compute::ListPlatformsResponse resp;
    client_->Run({"list platforms of project " + Project()}, [&](grpc::ClientContext* c, Done d) {
      client_->platforms().async()->List(c, &req, &resp, std::move(d));
    });
    out.insert(out.end(), resp.items().begin(), resp.items().end());
    token = resp.next_page_token();
    if (token.empty()) break;
  }
  return out;
}

void NebiusDriver::RequireAllowedForPreemptibles(const PlatformPreset& pp) {
  // Platforms that take preemptible VMs say so in status.allowed_for_preemptibles (Nebius
  // documentation, "Preemptible virtual machines": "The platforms available for preemptible VMs
  // are marked as allowed_for_preemptibles: true").
  bool allowed = false;
  std::string others;
  for (const auto& p : Platforms()) {
    if (!p.status().allowed_for_preemptibles()) continue;
    if (p.metadata().name() == pp.platform) allowed = true;
    others += (others.empty() ? "" : ", ") + p.metadata().name();
  }
  if (allowed) return;
  throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                    "platform " + pp.platform + " does not take preemptible (spot) VMs in project " +
                        Project() + " (PlatformService: allowed_for_preemptibles is false); " +
                        (others.empty() ? std::string("no platform there does")
                                        : "platforms that do: " + others) +
                        "; drop --spot or choose a GPU of one of those");
}

std::string NebiusDriver::Create(const std::string& request_json) {
  const auto [request, name, user_data] = kit::ParseCreateRequest(
      request_json, kVmNameRules, kUserDataLimit,
      "Nebius (cloud_init_user_data, less the cloud-config part with the SSH key)");
  const std::string public_key = kit::RequiredSshPublicKey(
      request, "Nebius has no SSH key resource; the key goes in through cloud-init users");
  kit::ParseSshPublicKey(public_key, "ssh_public_key");
  const std::vector<int> ports = kit::WithSsh(kit::PortsOf(request, "open_ports"));
  // IPv4 only: the VM gets a public IPv4 address (public_ip_address).
  const kit::PortSources sources = kit::SourcesOf(request, /*ipv6_allowed=*/false);
  const PlatformPreset pp = ChoosePreset(kit::ParseGpu(request), json::Str(request, "instance_type"));
  const bool has_gpu = pp.gpu_count > 0 || pp.platform.rfind("gpu-", 0) == 0;
  const bool spot = kit::SpotRequested(request);
  std::string image_family = json::Str(request, "image");
  if (image_family.empty()) image_family = json::Str(config_, "image_family");
  if (image_family.empty()) image_family = has_gpu ? kGpuImageFamily : kCpuImageFamily;
  const int64_t disk_gib = json::Int(request, "disk_gb", 0) > 0 ? json::Int(request, "disk_gb", 0)
                                                               : (has_gpu ? 100 : 50);
  if (has_gpu && disk_gib < kMinGpuDiskGib) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "disk_gb " + std::to_string(disk_gib) + " is too small for the GPU image " +
                          image_family + ": use at least " + std::to_string(kMinGpuDiskGib));
  }
  const std::string region = json::Str(request, "region");
  if (!region.empty() && region != region_) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "region " + region + ": a Nebius project serves one region, and this one "
                      "is configured for " + region_ + " (region and project_id in "
                      "[clouds.nebius]); use a project in " + region + " or drop --region");
  }
  const std::string cloud_init = MakeUserData(ssh_user_, public_key, user_data);
  const std::optional<kit::ClusterRequest> cluster = kit::ParseCluster(request);
  std::map<std::string, std::string> labels = LabelsFor(name, kit::UserTags(request));
  if (cluster) {
    labels[kit::kClusterTag] = cluster->name;
    labels[kit::kRoleTag] = cluster->role;
  }

  // Idempotent by name (instance names are unique in a project).
  if (std::optional<Instance> existing = InstanceByName(name)) {
    if (!OwnedBy(LabelsOf(existing->metadata().labels()))) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "an instance named " + name + " exists in project " + Project() +
                            " that gpuprov did not create (no label gpuprov=1); choose another "
                            "VM name");
    }
    host_.Info("instance " + name + " exists (" +
               InstanceStateName(existing->status().state()) + ")");
    std::vector<int> open;
    const auto& nics = existing->spec().network_interfaces();
    if (!nics.empty() && !nics[0].security_groups().empty()) {
      open = OpenPortsOf(nics[0].security_groups(0).id(), ports);
    }
    return kit::VmResult(VmJson(*existing, open), true);
  }

  if (spot) RequireAllowedForPreemptibles(pp);
  const auto [subnet_id, network_id] = Subnet();
  bool group_created = false;
  bool disk_created = false;
  std::string group_id;
  std::string cluster_group_id;
  std::string disk_id;
  try {
    group_id = EnsureSecurityGroup(name, ports, sources, network_id, labels, &group_created);
    if (cluster) {
      cluster_group_id =
          EnsureClusterGroup(cluster->name, cluster->peer_ports, network_id, /*exact=*/false);
    }
    disk_id = EnsureBootDisk(name, image_family, disk_gib, labels, &disk_created);
  } catch (const DriverError& e) {
    if (e.status() != GPUPROV_STATUS_CANCELLED) CleanUp(name, disk_created, group_created);
    throw;
  }

  compute::CreateInstanceRequest req;
  req.mutable_metadata()->set_parent_id(Project());
  req.mutable_metadata()->set_name(name);
  SetLabels(req.mutable_metadata()->mutable_labels(), labels);
  compute::InstanceSpec* spec = req.mutable_spec();
  spec->mutable_resources()->set_platform(pp.platform);
  spec->mutable_resources()->set_preset(pp.preset);
  spec->mutable_boot_disk()->set_attach_mode(compute::AttachedDiskSpec::READ_WRITE);
  spec->mutable_boot_disk()->mutable_existing_disk()->set_id(disk_id);
  compute::NetworkInterfaceSpec* nic = spec->add_network_interfaces();
  nic->set_name("eth0");
  nic->set_subnet_id(subnet_id);
  nic->mutable_ip_address();
  nic->mutable_public_ip_address();
  nic->add_security_groups()->set_id(group_id);
  if (!cluster_group_id.empty()) nic->add_security_groups()->set_id(cluster_group_id);
  spec->set_cloud_init_user_data(cloud_init);
  if (spot) {
    // A preemptible VM (nebius/api compute/v1/instance.proto, InstanceSpec.preemptible:
    // on_preemption STOP, the only policy, required; priority is deprecated and not sent) with
    // recovery_policy FAIL, as Nebius's "Preemptible virtual machines" page creates one (and
    // SkyPilot's and dstack's Nebius provisioners do): Compute stops it when it wants the
    // capacity back, and the host's re-run replaces it.
    spec->mutable_preemptible()->set_on_preemption(compute::PreemptibleSpec::STOP);
    spec->set_recovery_policy(compute::FAIL);
  }

  host_.Progress("creating " + std::string(spot ? "preemptible " : "") + "instance " + name +
                 " (" + pp.InstanceType() + " in project " + Project() + ")");
  Operation op;
  try {
    try {
      client_->Run({"create instance " + name, true}, [&](grpc::ClientContext* c, Done d) {
        client_->instances().async()->Create(c, &req, &op, std::move(d));
      });
    } catch (const DriverError& e) {
      // Made in the meantime (another gpuprov run): that one is returned.
      if (e.status() == GPUPROV_STATUS_INVALID_INPUT) {
        if (std::optional<Instance> other = InstanceByName(name);
            other && OwnedBy(LabelsOf(other->metadata().labels()), name)) {
          return kit::VmResult(VmJson(*other, ports), true);
        }
      }
      throw;
    }
    op = client_->Wait(NebiusClient::Service::kCompute, op, "create instance " + name);
  } catch (const DriverError& e) {
    if (e.status() != GPUPROV_STATUS_CANCELLED) CleanUp(name, disk_created, group_created);
    throw;
  }
  std::optional<Instance> inst = InstanceById(op.resource_id());
  if (!inst) inst = InstanceByName(name);
  if (!inst) {
    CleanUp(name, disk_created, group_created);
    throw DriverError(GPUPROV_STATUS_FAILED, "instance " + name +
                                                 " disappeared right after its create operation "
                                                 "finished; re-run to try again");
  }
  inst = AwaitStart(*inst, name, disk_created, group_created);
  host_.Info("instance " + name + " created (" + inst->metadata().id() + ")");
  return kit::ConfirmSources(kit::VmResult(VmJson(*inst, ports), false), sources);
}

std::string NebiusDriver::Get(const std::string& request_json) {
  Object::Ptr request = json::ParseObject(request_json, "the get request");
  std::optional<Instance> inst = Resolve(request);
  if (!inst) {
    throw DriverError(GPUPROV_STATUS_NOT_FOUND, "no gpuprov instance " +
                                                    kit::VmReference(request) + " in project " +
                                                    Project());
  }
  Object::Ptr vm = VmJson(*inst, {22});
  // Stopped without reconciling: a failed start says why (the host reads capacity words in
  // the message); a VM that ran and was powered off has no failed operation and stays stopped.
  if (inst->status().state() == compute::InstanceStatus::STOPPED && !inst->status().reconciling()) {
    if (const StartFailure f = StartFailureOf(*inst); f.failed) {
      vm->set("state", std::string("stopped"));  // a start that failed, not a preemption
      vm->set("message", "the instance did not start: " + f.text);
    }
  }
  return kit::VmResult(vm);
}

NebiusDriver::StartFailure NebiusDriver::StartFailureOf(const Instance& inst) {
  StartFailure out;
  const std::string id = inst.metadata().id();
  std::optional<Operation> newest;
  auto newer = [](const Operation& a, const Operation& b) {
    return std::make_pair(a.created_at().seconds(), a.created_at().nanos()) >
           std::make_pair(b.created_at().seconds(), b.created_at().nanos());
  };
  try {
    // The project's instance operations, as SkyPilot reads them (at most 1000); whichever
    // order the API lists them in, the newest of this instance's is taken.
    std::string token;
    for (int page = 0; page < 10; ++page) {
      compute::ListOperationsByParentRequest req;
      req.set_parent_id(Project());
      req.set_page_size(kPageSize);
      req.set_page_token(token);
      nc::ListOperationsResponse resp;
      client_->Run({"list operations of project " + Project()},
                   [&](grpc::ClientContext* c, Done d) {
                     client_->instances().async()->ListOperationsByParent(c, &req, &resp,
                                                                          std::move(d));
                   });
      for (const auto& op : resp.operations()) {
        if (op.resource_id() == id && (!newest || newer(op, *newest))) newest = op;
      }
      token = resp.next_page_token();
      if (token.empty()) break;
    }
  } catch (const DriverError& e) {
    if (e.status() == GPUPROV_STATUS_CANCELLED) throw;
    host_.Debug("could not read the operations of instance " + id + ": " + e.what());
  }
  if (!newest || !newest->has_status() || newest->status().code() == 0) {
    out.text = newest ? "its last operation (" + newest->description() + ") reports no error"
                      : "no operation of the instance is listed";
    return out;
  }
  const CallError err = CallErrorOf(newest->status());
  out.failed = true;
  out.status = StatusOfGrpc(err.code, err.detail, err.message);
  if (out.status == GPUPROV_STATUS_TRANSIENT) out.status = GPUPROV_STATUS_FAILED;
  out.text = newest->description() + ": " + err.Describe();
  if (out.status == GPUPROV_STATUS_CAPACITY) out.text += " (no capacity)";
  return out;
}

NebiusDriver::Instance NebiusDriver::AwaitStart(Instance inst, const std::string& vm_name,
                                                bool disk_created, bool group_created) {
  // A new instance shows STOPPED while reconciling, then STARTING; STOPPED without
  // reconciling after the create operation succeeded is a start that failed (SkyPilot's
  // sky/provision/nebius/utils.py `launch` waits for exactly these; UNCONFIRMED whether the
  // create operation itself then reports the error).
  auto started = [](const Instance& i) {
    const int s = i.status().state();
    return s == compute::InstanceStatus::STARTING || s == compute::InstanceStatus::RUNNING;
  };
  auto failed = [](const Instance& i) {
    const int s = i.status().state();
    return s == compute::InstanceStatus::ERROR ||
           (s == compute::InstanceStatus::STOPPED && !i.status().reconciling());
  };
  kit::PollOptions poll{"waiting for instance " + vm_name + " to start",
                        client_->options().poll_interval, client_->options().operation_timeout};
  kit::PollUntil(host_, poll, [&](std::string* state) {
    *state = InstanceStateName(inst.status().state());
    if (started(inst) || failed(inst)) return true;
    std::optional<Instance> now = InstanceById(inst.metadata().id());
    if (!now) return true;  // gone: the host sees it at its next look
    inst = *now;
    return started(inst) || failed(inst);
  });
  if (!failed(inst)) return inst;
  const StartFailure f = StartFailureOf(inst);
  const gpuprov_type_status status = f.failed ? f.status : GPUPROV_STATUS_FAILED;
  std::string msg = "instance " + vm_name + " did not start after its create (" +
                    InstanceStateName(inst.status().state()) + "): " + f.text;
  if (status == GPUPROV_STATUS_CAPACITY) {
    msg += "; try again later, another preset, or a project in another region";
  } else if (status == GPUPROV_STATUS_QUOTA) {
    msg += "; request a larger quota in the Nebius console or choose another platform";
  } else {
    msg += "; re-run to try again";
  }
  CleanUp(vm_name, disk_created, group_created);
  throw DriverError(status, msg);
}

std::string NebiusDriver::List(const std::string& /*request_json*/) {
  Array::Ptr vms = new Array();
  for (const auto& inst : Instances()) {
    if (OwnedBy(LabelsOf(inst.metadata().labels()))) vms->add(VmJson(inst, {22}));
  }
  return kit::VmsResult(vms);
}

std::string NebiusDriver::Delete(const std::string& request_json) {
  Object::Ptr request = json::ParseObject(request_json, "the delete request");
  std::optional<Instance> inst = Resolve(request);
  std::string name = json::Str(request, "name");
  std::string cluster;
  bool deleted = false;
  if (inst) {
    name = inst->metadata().name();
    const auto labels = LabelsOf(inst->metadata().labels());
    if (auto it = labels.find(kit::kClusterTag); it != labels.end()) cluster = it->second;
    deleted = DeleteInstance(*inst);
  }
  // The disk and group of this VM name, also when the instance was already gone.
  if (!name.empty()) {
    bool valid = true;
    try {
      kit::ValidateVmName(name, kVmNameRules);
    } catch (const DriverError&) {
      valid = false;
    }
    if (valid) {
      DeleteBootDisk(name);
      DeleteSecurityGroup(name);
    }
  }
  // The cluster's group goes with its last node.
  if (!cluster.empty()) RemoveClusterGroupIfLast(cluster, inst->metadata().id());
  return kit::DeletedResult(deleted);
}

std::string NebiusDriver::OpenPorts(const std::string& request_json) {
  Object::Ptr request = json::ParseObject(request_json, "the open_ports request");
  const std::vector<int> ports = kit::PortsOf(request, "ports");
  const kit::PortSources sources = kit::SourcesOf(request, /*ipv6_allowed=*/false);
  std::optional<Instance> inst = Resolve(request);
  if (!inst) {
    throw DriverError(GPUPROV_STATUS_NOT_FOUND,
                      "no gpuprov instance " + kit::VmReference(request) + " in project " +
                          Project());
  }
  const std::string name = inst->metadata().name();
  std::string group_id;
  for (const auto& nic : inst->spec().network_interfaces()) {
    for (const auto& g : nic.security_groups()) {
      vpc::GetSecurityGroupRequest req;
      req.set_id(g.id());
      vpc::SecurityGroup group;
      if (client_->Run({"get security group " + g.id(), false, true},
                       [&](grpc::ClientContext* c, Done d) {
                         client_->groups().async()->Get(c, &req, &group, std::move(d));
                       }) &&
          OwnedBy(LabelsOf(group.metadata().labels()), name)) {
        group_id = g.id();
      }
    }
  }
  if (group_id.empty()) {
    throw DriverError(GPUPROV_STATUS_FAILED,
                      "instance " + name + " has no security group gpuprov made (" +
                          SecurityGroupName(name) +
                          "); open tcp " + PortList(ports) +
                          " in its group yourself, or gpuprov down and up again");
  }
  AddMissingRules(group_id, name, kit::WithSsh(ports), sources, false);
  return kit::ConfirmSources("{}", sources);
}

std::string NebiusDriver::OpenPeerPorts(const std::string& request_json) {
  const kit::PeerPortsRequest r = kit::ParsePeerPortsRequest(request_json);
  const std::string group_id =
      EnsureClusterGroup(r.cluster, r.peer_ports, Subnet().second, /*exact=*/true);
  // Membership is the interface's list of groups, set at create: each peer must be in it.
  std::string outside;
  for (const auto& p : r.peers) {
    std::optional<Instance> inst;
    if (p.id.rfind("computeinstance-", 0) == 0) inst = InstanceById(p.id);
    if (!inst && !p.name.empty()) inst = InstanceByName(p.name);
    if (!inst) {
      host_.Debug("peer " + p.name + " (" + p.id + ") is not there; nothing to check");
      continue;
    }
    bool member = false;
    for (const auto& nic : inst->spec().network_interfaces()) {
      for (const auto& g : nic.security_groups()) member = member || g.id() == group_id;
    }
    if (!member) outside += (outside.empty() ? "" : ", ") + inst->metadata().name();
  }
  if (!outside.empty()) {
    throw DriverError(GPUPROV_STATUS_FAILED,
                      "instance(s) " + outside + " are not in security group " +
                          ClusterGroupName(r.cluster) + " (their network interface does not "
                          "list it), so the cluster's other nodes cannot reach them on " +
                          kit::PeerPortsText(r.peer_ports) + "; `gpuprov down` them and re-run");
  }
  return "{}";
}

std::string NebiusDriver::ListResources(const std::string& /*request_json*/) {
  // Instances before the disks they boot from and the groups their interfaces use: the order
  // gc deletes in. A security rule is a child of its group and goes with it.
  // Credentials before the project: with neither, this is a cloud without credentials (AUTH),
  // which a sweep of every cloud skips, not a misconfigured one.
  client_->TokenOrigin();
  std::vector<kit::ResourceFields> out;
  std::map<std::string, std::vector<std::string>> nodes_of;  // cluster -> its VMs' names
  for (const auto& inst : Instances()) {
    auto labels = LabelsOf(inst.metadata().labels());
    if (!OwnedBy(labels)) continue;
    kit::ResourceFields r = ResourceOf("vm", inst.metadata(), region_);
    r.cluster = labels[kit::kClusterTag];
    r.role = labels[kit::kRoleTag];
    if (!r.cluster.empty()) nodes_of[r.cluster].push_back(inst.metadata().name());
    out.push_back(std::move(r));
  }
  for (const auto& disk : Disks()) {
    if (!OwnedBy(LabelsOf(disk.metadata().labels()))) continue;
    out.push_back(ResourceOf("disk", disk.metadata(), region_));
  }
  for (const auto& group : Groups()) {
    auto labels = LabelsOf(group.metadata().labels());
    if (!OwnedBy(labels)) continue;
    // A cluster's group carries the cluster label and no VM name: it belongs to its nodes.
    if (!labels[kit::kClusterTag].empty() && labels[kit::kNameTag].empty()) {
      kit::ResourceFields r = ResourceOf("cluster_firewall", group.metadata(), region_);
      r.cluster = labels[kit::kClusterTag];
      r.vm_names = nodes_of[r.cluster];
      out.push_back(std::move(r));
      continue;
    }
    out.push_back(ResourceOf("security_group", group.metadata(), region_));
  }
  return kit::ResourcesResult(out);
}

std::string NebiusDriver::DeleteResource(const std::string& request_json) {
  const kit::ResourceRef ref =
      kit::ParseResourceRequest(request_json, {"vm", "disk", "security_group", "cluster_firewall"});
  auto refuse = [&] {
    return DriverError(GPUPROV_STATUS_INVALID_INPUT,
                       ref.kind + " " + ref.id +
                           " does not carry gpuprov's label (gpuprov=1); gpuprov leaves it alone");
  };
  // Each is read again: only what still carries gpuprov's label is deleted.
  if (ref.kind == "vm") {
    std::optional<Instance> inst = InstanceById(ref.id);
    if (!inst) return kit::DeletedResult(false);
    if (!OwnedBy(LabelsOf(inst->metadata().labels()))) throw refuse();
    return kit::DeletedResult(DeleteInstance(*inst));
  }
  if (ref.kind == "disk") {
    compute::GetDiskRequest req;
    req.set_id(ref.id);
    compute::Disk disk;
    if (!client_->Run({"get disk " + ref.id, false, true}, [&](grpc::ClientContext* c, Done d) {
          client_->disks().async()->Get(c, &req, &disk, std::move(d));
        })) {
      return kit::DeletedResult(false);
    }
    if (!OwnedBy(LabelsOf(disk.metadata().labels()))) throw refuse();
    return kit::DeletedResult(DeleteDisk(disk));
  }
  vpc::GetSecurityGroupRequest req;
  req.set_id(ref.id);
  vpc::SecurityGroup group;
  if (!client_->Run({"get security group " + ref.id, false, true},
                    [&](grpc::ClientContext* c, Done d) {
                      client_->groups().async()->Get(c, &req, &group, std::move(d));
                    })) {
    return kit::DeletedResult(false);
  }
  if (!OwnedBy(LabelsOf(group.metadata().labels()))) throw refuse();
  return kit::DeletedResult(DeleteGroup(group));
}

}  // namespace gpuprov::nebius

// The keys of [clouds.nebius] this driver reads (gpuprov refuses others in config.toml); the
// kit's standard keys first, README.md's settings table lists the same
// (driver_settings_docs_test).
constexpr gpuprov_type_config_key kNebiusConfigKeys[] = {
    gpuprov::drivers::kRetryKey,
    gpuprov::drivers::PollIntervalKey("operation and disk polling interval (2000)"),
    gpuprov::sdk::StringKey("project_id", "the project (parent_id) VMs go in (else NEBIUS_PROJECT_ID, the nebius CLI profile's parent-id)"),
    gpuprov::sdk::StringKey("profile", "the nebius CLI profile read for parent-id (else NEBIUS_PROFILE, the file's default)"),
    gpuprov::sdk::StringKey("credentials_file", "a service-account credentials file (else NEBIUS_CREDENTIALS_FILE, ~/.nebius/credentials.json); NEBIUS_IAM_TOKEN wins"),
    gpuprov::sdk::StringKey("region", "the region of the project, reported on VMs (eu-north1)"),
    gpuprov::sdk::StringKey("subnet_id", "the subnet of new VMs (else the project's default-subnet)"),
    gpuprov::sdk::StringKey("image_family", "the boot image family when the request names none (ubuntu24.04-cuda13.0 for GPUs)"),
    gpuprov::sdk::StringKey("ssh_user", "the user cloud-init creates with the SSH key (ubuntu)"),
    gpuprov::sdk::IntegerKey("call_timeout_seconds", "the deadline of one gRPC call (30)"),
    gpuprov::sdk::IntegerKey("operation_timeout_seconds", "how long one operation may take (900)"),
};

GPUPROV_DRIVER(gpuprov::nebius::NebiusDriver, kNebiusConfigKeys)
