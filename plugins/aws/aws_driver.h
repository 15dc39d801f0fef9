// SPDX-License-Identifier: Apache-2.0
//
// The "aws" driver: EC2 GPU instances over the EC2 Query API (REFERENCE.md), signed with
// SigV4 (sigv4.h), credentials as the AWS SDKs find them (aws_credentials.h).
//
// Settings (docs/driver-protocol.md, init): "endpoint" (GPUPROV_AWS_ENDPOINT; default
// https://ec2.<region>.amazonaws.com; http:// only for a loopback emulator); config keys:
//   region        default region (else AWS_REGION, AWS_DEFAULT_REGION, the profile's, us-east-1)
//   regions       extra regions `list` and look-ups by name search
//   profile       AWS profile (else AWS_PROFILE, else "default")
//   image         AMI id or resolve:ssm: parameter replacing the default images
//   vpc_id, subnet_id  where to launch in an account without a default VPC (README.md)
//   consistency_grace_seconds  how long InvalidInstanceID.NotFound right after RunInstances
//                              (and InvalidGroup.NotFound after CreateSecurityGroup) is
//                              read as "not visible yet" (default 60)
//   delete_wait_seconds  how long delete waits for `terminated` before removing the security
//                        group (default 600)
//   poll_interval_ms     polling interval of those waits (default 2000)
//   retry         {max_attempts, base_delay_ms, max_delay_ms, total_budget_ms,
//                  attempt_timeout_ms}
// What it creates per VM (all tagged Name=<vm>, gpuprov=1, gpuprov-name=<vm>): the instance
// (and its root volume), a security group "gpuprov-<vm>" in the default VPC (or vpc_id's /
// subnet_id's), and a key pair
// "gpuprov-<vm>". VM ids are "<region>/<instance-id>". A cluster node (create's "cluster", ABI
// 1.5) also carries the tags gpuprov-cluster and gpuprov-role and is launched into the
// security group "gpuprov-<cluster>-peers" besides its own: its ingress rules on the peer
// ports name the group itself, so exactly the cluster's instances reach each other there, on
// their private addresses in the VPC. The group goes with the cluster's last instance. See
// README.md.
#pragma once

#include <Poco/JSON/Object.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aws_credentials.h"
#include "cluster_request.h"
#include "driver_request.h"
#include "ec2_client.h"
#include "gpuprov/sdk.hpp"

namespace gpuprov::aws {

/// What to change in a security group so tcp `port` is open to its sources: for a narrowed
/// port exactly allow_from (the CIDRs to authorize, and those of its single-port rules to
/// revoke); for another 0.0.0.0/0 and ::/0 when nothing opens it to 0.0.0.0/0 (nothing revoked).
struct IngressChange {
  std::vector<std::string> authorize;
  std::vector<std::string> revoke;
};
IngressChange PlanIngress(const XmlNode* group, int port, const gpuprov::drivers::PortSources& sources);

class AwsDriver {
 public:
  static constexpr const char* kName = "aws";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "AWS EC2 GPU instances (EC2 Query API, SigV4): instances, security groups, key pairs";
  static constexpr uint64_t kCapabilities = GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_BOOT_CLOUD_INIT |
                                            GPUPROV_CAP_OPEN_PORTS | GPUPROV_CAP_HOSTS_KUBERNETES |
                                            GPUPROV_CAP_SPOT | GPUPROV_CAP_CLUSTER;
  /// How a VM learns its public address: IMDSv2 meta-data/public-ipv4; REFERENCE.md §6.
  static constexpr const char* kNodeAddress = GPUPROV_NODE_ADDRESS_EC2;
  /// Raw user data EC2 accepts (before base64), REFERENCE.md §4; the driver sends the boot script
  /// gzipped, so this counts compressed bytes.
  static constexpr size_t kUserDataLimit = 16384;
  /// The boot script's own size, before gzip: a bound so a runaway request is refused before it
  /// is compressed (shell text compresses about 3:1; 1 MiB is far beyond what fits).
  static constexpr size_t kUserDataTextLimit = 1024 * 1024;

  explicit AwsDriver(const gpuprov::sdk::InitContext& ctx);

  std::string Check(const std::string& request_json);
  std::string Offers(const std::string& request_json);
  std::string Create(const std::string& request_json);
  std::string Get(const std::string& request_json);
  std::string List(const std::string& request_json);
  std::string Delete(const std::string& request_json);
  std::string OpenPorts(const std::string& request_json);
  // `gpuprov gc` (ABI 1.2): instances, security groups and key pairs tagged gpuprov=1 in the
  // regions this driver searches (region, regions).
  std::string ListResources(const std::string& request_json);
  std::string DeleteResource(const std::string& request_json);
  // ABI 1.5: the cluster's self-referencing group covers every member it holds; checked and
  // repaired here.
  std::string OpenPeerPorts(const std::string& request_json);

 private:
  using ObjectPtr = Poco::JSON::Object::Ptr;

  /// One EC2 call; EC2 errors become DriverError with a status and an actionable message.
  XmlNode Call(const std::string& region, const std::string& action, const Params& params);
  /// Throws the DriverError for an EC2 error: its status and what the user can do.
  [[noreturn]] void Raise(const std::string& region, const Ec2Error& e);
  /// Every instance matching filters in a region (DescribeInstances, all pages).
  /// The lowest spot price of \a type in \a region's zones now (USD per hour); nullopt when EC2
  /// does not say.
  std::optional<double> SpotPrice(const std::string& region, const std::string& type);
  std::vector<XmlNode> DescribeInstances(const std::string& region, const Params& params);
  /// The live (not shutting-down/terminated) instance tagged Name=name in region, or nullopt;
  /// `foreign` is set when a same-named instance lacks the gpuprov tag.
  std::optional<XmlNode> FindByName(const std::string& region, const std::string& name,
                                    bool* foreign = nullptr);
  /// The instance a request names ("id" as "<region>/<i-...>" or bare, or "name"); with
  /// include_gone, a terminated instance found by id is returned too. *region is set.
  std::optional<XmlNode> Resolve(const ObjectPtr& request, bool include_gone, std::string* region);
  /// Regions to search by name: the request's, the default, config "regions".
  std::vector<std::string> SearchRegions(const std::string& requested) const;

  struct Resource {
    std::string id;
    bool created = false;
  };
  /// The security group gpuprov made for the instance (gpuprov-<name>), described; nullopt
  /// when it has none.
  std::optional<XmlNode> OwnGroup(const std::string& region, const XmlNode& instance);
  /// Where instances launch: empty ids mean the default VPC (and its default subnets).
  struct Network {
    std::string vpc_id;
    std::string subnet_id;
  };
  /// The VPC and subnet of the settings (subnet_id, else a subnet of vpc_id, read with
  /// DescribeSubnets), else the default VPC after one DescribeVpcs says it exists. Throws
  /// INVALID_INPUT naming the settings when there is none: nothing is made before this.
  Network ResolveNetwork(const std::string& region);
  Resource EnsureSecurityGroup(const std::string& region, const std::string& vm_name,
                               const std::vector<int>& ports,
                               const std::map<std::string, std::string>& tags,
                               const gpuprov::drivers::PortSources& sources, const Network& net);
  /// Opens each of `ports` to exactly its sources (PlanIngress): authorizes what is missing,
  /// revokes what a narrowing or widening left over. Rules of other ports stay.
  void AuthorizePorts(const std::string& region, const std::string& group_id, const XmlNode* group,
                      const std::vector<int>& ports, const gpuprov::drivers::PortSources& sources);
  /// The security group group_name in vpc_id's VPC ("" = the default VPC), made (tagged) when
  /// missing; *group is it as described, nullopt when this call made it.
  Resource EnsureGroup(const std::string& region, const std::string& group_name,
                       const std::string& description,
                       const std::map<std::string, std::string>& tags, const std::string& vpc_id,
                       std::optional<XmlNode>* group);
  /// The security group called group_name (in vpc_id's VPC; "" = any), or nullopt.
  std::optional<XmlNode> DescribeGroup(const std::string& region, const std::string& group_name,
                                       const std::string& vpc_id);
  /// DeleteSecurityGroup, retrying a DependencyViolation (an instance not yet terminated)
  /// until wait_until: kInUse when it still is then, kGone when the group was already gone.
  /// Throws DriverError for any other refusal.
  enum class GroupDeletion { kDeleted, kGone, kInUse };
  GroupDeletion DeleteGroup(const std::string& region, const std::string& group_id,
                            std::chrono::steady_clock::time_point wait_until);
  /// The cluster's group "gpuprov-<cluster>-peers" in net's VPC, made when missing, with an
  /// ingress rule from the group itself on each of `ports` (authorized when missing).
  Resource EnsureClusterGroup(const std::string& region, const std::string& cluster,
                              const std::vector<gpuprov::drivers::PeerPort>& ports,
                              const Network& net);
  /// Deletes the cluster's group once no live instance but `leaving_id` carries its tag
  /// (retrying a DependencyViolation until wait_until).
  void RemoveClusterGroup(const std::string& region, const std::string& cluster,
                          const std::string& leaving_id,
                          std::chrono::steady_clock::time_point wait_until);
  Resource EnsureKeyPair(const std::string& region, const std::string& vm_name,
                         const std::string& public_key,
                         const std::map<std::string, std::string>& tags);
  /// Deletes the security group and key pair of a VM name (absent ones are fine). With
  /// wait_until, a DependencyViolation is retried until then.
  void DeleteVmResources(const std::string& region, const std::string& vm_name,
                         std::chrono::steady_clock::time_point wait_until);
  /// Polls until the instance is terminated (or gone) or the deadline passes.
  bool WaitTerminated(const std::string& region, const std::string& instance_id,
                      std::chrono::steady_clock::time_point deadline);

  ObjectPtr VmJson(const std::string& region, const XmlNode& instance,
                   const std::vector<int>& ports = {22}) const;
  AwsCredentials LoadCredentials() const;
  void Sleep(std::chrono::milliseconds d) const;

  gpuprov::sdk::Host host_;
  std::string endpoint_;
  ObjectPtr config_;
  std::string default_region_;
  std::vector<std::string> extra_regions_;
  std::string profile_;
  std::string image_override_;
  std::string vpc_id_;     ///< [clouds.aws] vpc_id ("" = the default VPC)
  std::string subnet_id_;  ///< [clouds.aws] subnet_id
  std::chrono::milliseconds consistency_grace_{60'000};
  std::chrono::milliseconds delete_wait_{600'000};
  std::chrono::milliseconds poll_interval_{2'000};
  std::unique_ptr<Ec2Client> ec2_;
  /// Instances this handle launched: id -> (launch time, the RunInstances item, region), so a
  /// Get right after launch tolerates InvalidInstanceID.NotFound (eventual consistency).
  struct Launched {
    std::chrono::steady_clock::time_point at;
    XmlNode item;
    std::string region;
    std::vector<int> ports;
  };
  std::map<std::string, Launched> launched_;
};

}  // namespace gpuprov::aws
