// SPDX-License-Identifier: Apache-2.0
//
// The EC2 emulator over HTTP (in-process, memory backend): SigV4 verification, the Query API's
// actions, element names, error codes, regions, pagination, state changes over time and the
// fault knobs. Requests are signed with the AWS driver's signer (plugins/aws/sigv4, itself
// checked against AWS's published vectors) through its Ec2Client, which also parses the XML.
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "docker_backend_fixture.h"
#include "ec2_api.h"
#include "ec2_client.h"
#include "emulator.h"
#include "emulator_test_util.h"
#include "sigv4.h"
#include "vm_rules.h"  // drivers::Base64

namespace gpuprov::emulator {
namespace {

using aws::Ec2Client;
using aws::Ec2Error;
using aws::Params;
using aws::XmlNode;
using testing::Call;
using testing::DockerBackendTest;
using testing::ReachablePorts;
using testing::Reply;
using testing::WaitFor;
using namespace std::chrono_literals;

constexpr const char* kKeyId = "AKIAEC2APITEST000001";
constexpr const char* kSecret = "ec2+api/test/secret";
constexpr const char* kUbuntu =
    "resolve:ssm:/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/"
    "ami-id";

class Ec2ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EmulatorOptions o;
    o.backend = "memory";
    o.boot_seconds = 0.3;
    o.clouds = {"aws"};
    o.tokens["aws"] = {kKeyId, kSecret};
    emu_ = std::make_unique<Emulator>(o);
    emu_->Start();
    url_ = emu_->BaseUrl("aws");
    control_ = emu_->ControlUrl();
  }
  void TearDown() override { emu_.reset(); }

  std::unique_ptr<Ec2Client> Client(const std::string& secret = kSecret,
                                    const std::string& key_id = kKeyId, long long skew = 0) {
    drivers::RetryPolicy once;
    once.max_attempts = 1;
    return std::make_unique<Ec2Client>(
        url_, once, gpuprov::sdk::Host(),
        [=] {
          aws::AwsCredentials c;
          c.access_key_id = key_id;
          c.secret_access_key = secret;
          c.origin = "test";
          return c;
        },
        [skew] {
          return std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count() +
                 skew;
        });
  }
  XmlNode Ec2(const std::string& action, const Params& params = {},
              const std::string& region = "us-east-1") {
    return Client()->Call(region, action, params);
  }
  // The EC2 error code of a call that must fail ("" when it succeeded).
  std::string ErrorOf(const std::string& action, const Params& params = {},
                      const std::string& region = "us-east-1", int* http = nullptr) {
    try {
      Client()->Call(region, action, params);
    } catch (const Ec2Error& e) {
      if (http) *http = e.http_status();
      return e.code();
    }
    return "";
  }
  Reply Control(const std::string& method, const std::string& path, const std::string& body = "") {
    return Call(control_, method, path, body);
  }
  void Fault(const std::string& json) { ASSERT_EQ(Control("POST", "/faults", json).status, 200); }
  int64_t Count(const std::string& field) {
    return Control("GET", "/counts?cloud=aws").Json()->getValue<int64_t>(field);
  }

  std::string Run(const Params& extra = {}, const std::string& region = "us-east-1") {
    Params p = {
        {"ImageId", kUbuntu}, {"InstanceType", "t3.micro"}, {"MinCount", "1"}, {"MaxCount", "1"}};
    p.insert(p.end(), extra.begin(), extra.end());
    XmlNode r = Ec2("RunInstances", p, region);
    return r.Items("instancesSet").at(0)->Text("instanceId");
  }
  XmlNode Instance(const std::string& id, const std::string& region = "us-east-1") {
    XmlNode d = Ec2("DescribeInstances", {{"InstanceId.1", id}}, region);
    return *d.Items("reservationSet").at(0)->Items("instancesSet").at(0);
  }

  std::unique_ptr<Emulator> emu_;
  std::string url_, control_;
};

TEST_F(Ec2ApiTest, SignedRequestsPassUnsignedAndWrongOnesGetTheRealCodes) {
  EXPECT_EQ(Ec2("DescribeInstances").name, "DescribeInstancesResponse");
  // No Authorization at all.
  Reply r = Call(url_, "POST", "/", "Action=DescribeInstances&Version=2016-11-15");
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("<Code>MissingAuthenticationToken</Code>"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("<RequestID>"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("<requestId>"), std::string::npos);
  int http = 0;
  EXPECT_EQ(ErrorOf("DescribeInstances", {}, "us-east-1", &http), "");
  // Wrong secret and unknown key: EC2 says AuthFailure (401) for both.
  try {
    Client("wrong-secret")->Call("us-east-1", "DescribeInstances", {});
    ADD_FAILURE() << "a wrong secret must fail";
  } catch (const Ec2Error& e) {
    EXPECT_EQ(e.code(), "AuthFailure");
    EXPECT_EQ(e.http_status(), 401);
    EXPECT_EQ(e.message(), "AWS was not able to validate the provided access credentials");
  }
  try {
    Client(kSecret, "AKIAUNKNOWN000000000")->Call("us-east-1", "DescribeInstances", {});
    ADD_FAILURE();
  } catch (const Ec2Error& e) {
    EXPECT_EQ(e.code(), "AuthFailure");
  }
  // A clock an hour off.
  try {
    Client(kSecret, kKeyId, -3600)->Call("us-east-1", "DescribeInstances", {});
    ADD_FAILURE();
  } catch (const Ec2Error& e) {
    EXPECT_EQ(e.code(), "RequestExpired");
  }
}

TEST_F(Ec2ApiTest, ASignatureOverAnotherBodyOrServiceIsRefused) {
  const std::string host = url_.substr(std::string("http://").size());
  const long long now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  // Signs host and x-amz-date only (the test client sets its own Content-Type).
  auto send = [&](const std::string& signed_body, const std::string& sent_body,
                  const std::string& service) {
    const std::string date = aws::AmzDate(now);
    aws::SigV4Request r;
    r.body = signed_body;
    r.headers = {{"host", host}, {"x-amz-date", date}};
    const std::string auth = aws::AuthorizationHeader(
        kKeyId, kSecret, date, aws::SigV4Scope{date.substr(0, 8), "us-east-1", service}, r);
    return Call(url_, "POST", "/", sent_body, "", {{"X-Amz-Date", date}, {"Authorization", auth}});
  };
  const std::string body = "Action=DescribeInstances&Version=2016-11-15";
  EXPECT_EQ(send(body, body, "ec2").status, 200);
  Reply tampered = send(body, body + "&MaxResults=5", "ec2");
  EXPECT_EQ(tampered.status, 401);
  EXPECT_NE(tampered.body.find("AuthFailure"), std::string::npos);
  Reply other = send(body, body, "s3");
  EXPECT_EQ(other.status, 403);
  EXPECT_NE(other.body.find("SignatureDoesNotMatch"), std::string::npos);
}

TEST_F(Ec2ApiTest, ActionAndParameterErrors) {
  EXPECT_EQ(ErrorOf("NoSuchAction"), "InvalidAction");
  EXPECT_EQ(
      ErrorOf("RunInstances", {{"InstanceType", "t3.micro"}, {"MinCount", "1"}, {"MaxCount", "1"}}),
      "MissingParameter");
  Params base = {{"InstanceType", "t3.micro"}, {"MinCount", "1"}, {"MaxCount", "1"}};
  auto with = [&](std::pair<std::string, std::string> p) {
    Params q = base;
    q.push_back(p);
    return q;
  };
  EXPECT_EQ(ErrorOf("RunInstances", with({"ImageId", "ami-12345678"})), "InvalidAMIID.NotFound");
  EXPECT_EQ(ErrorOf("RunInstances", with({"ImageId", "bogus"})), "InvalidAMIID.Malformed");
  EXPECT_EQ(ErrorOf("RunInstances", with({"ImageId", "resolve:ssm:/no/such/parameter"})),
            "InvalidParameterValue");
  Params bad_type = {
      {"ImageId", kUbuntu}, {"InstanceType", "x9.huge"}, {"MinCount", "1"}, {"MaxCount", "1"}};
  EXPECT_EQ(ErrorOf("RunInstances", bad_type), "InvalidParameterValue");
  Params key = {{"ImageId", kUbuntu},
                {"InstanceType", "t3.micro"},
                {"MinCount", "1"},
                {"MaxCount", "1"},
                {"KeyName", "missing"}};
  EXPECT_EQ(ErrorOf("RunInstances", key), "InvalidKeyPair.NotFound");
  // p6-b200 is offered in us-west-2 only here.
  Params b200 = {{"ImageId", kUbuntu},
                 {"InstanceType", "p6-b200.48xlarge"},
                 {"MinCount", "1"},
                 {"MaxCount", "1"}};
  EXPECT_EQ(ErrorOf("RunInstances", b200), "Unsupported");
  EXPECT_EQ(Count("instances"), 0);
}

TEST_F(Ec2ApiTest, UserDataIsBase64AndAtMost16KiBRaw) {
  Params p = {
      {"ImageId", kUbuntu}, {"InstanceType", "t3.micro"}, {"MinCount", "1"}, {"MaxCount", "1"}};
  Params ok = p, big = p, bad = p;
  std::string max(16384, 'a'), over(16385, 'a');
  ok.emplace_back("UserData", drivers::Base64(max));
  big.emplace_back("UserData", drivers::Base64(over));
  bad.emplace_back("UserData", "not base64!");
  EXPECT_EQ(ErrorOf("RunInstances", big), "InvalidParameterValue");
  EXPECT_EQ(ErrorOf("RunInstances", bad), "InvalidParameterValue");
  EXPECT_EQ(ErrorOf("RunInstances", ok), "");
}

TEST_F(Ec2ApiTest, InstanceGoesPendingRunningShuttingDownTerminated) {
  XmlNode run = Ec2("RunInstances", {{"ImageId", kUbuntu},
                                     {"InstanceType", "g6.xlarge"},
                                     {"MinCount", "1"},
                                     {"MaxCount", "1"},
                                     {"TagSpecification.1.ResourceType", "instance"},
                                     {"TagSpecification.1.Tag.1.Key", "Name"},
                                     {"TagSpecification.1.Tag.1.Value", "vm1"}});
  EXPECT_EQ(run.name, "RunInstancesResponse");
  EXPECT_EQ(run.Text("ownerId"), "111122223333");
  EXPECT_EQ(run.Text("reservationId").rfind("r-", 0), 0u);
  const XmlNode* item = run.Items("instancesSet").at(0);
  const std::string id = item->Text("instanceId");
  EXPECT_EQ(id.size(), 19u);  // i- + 17 hex
  EXPECT_EQ(item->Text("instanceState/code"), "0");
  EXPECT_EQ(item->Text("instanceState/name"), "pending");
  EXPECT_EQ(item->Text("ipAddress"), "");
  EXPECT_EQ(item->Text("placement/availabilityZone"), "us-east-1a");
  ASSERT_TRUE(WaitFor([&] { return Instance(id).Text("instanceState/name") == "running"; }, 5s));
  XmlNode running = Instance(id);
  EXPECT_EQ(running.Text("instanceState/code"), "16");
  EXPECT_EQ(running.Text("ipAddress").rfind("127.91.", 0), 0u);
  EXPECT_EQ(running.Items("tagSet").at(0)->Text("value"), "vm1");
  EXPECT_EQ(Control("GET", "/instances?cloud=aws").Json()->getArray("instances")->size(), 1u);

  XmlNode term = Ec2("TerminateInstances", {{"InstanceId.1", id}});
  const XmlNode* change = term.Items("instancesSet").at(0);
  EXPECT_EQ(change->Text("currentState/name"), "shutting-down");
  EXPECT_EQ(change->Text("currentState/code"), "32");
  EXPECT_EQ(change->Text("previousState/name"), "running");
  ASSERT_TRUE(WaitFor([&] { return Instance(id).Text("instanceState/name") == "terminated"; }, 5s));
  XmlNode gone = Instance(id);  // still listed once terminated
  EXPECT_EQ(gone.Text("instanceState/code"), "48");
  EXPECT_EQ(gone.Text("stateReason/code"), "Client.UserInitiatedShutdown");
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("backend_instances"), 0);
  // Terminating again is fine; an unknown id is not.
  EXPECT_EQ(ErrorOf("TerminateInstances", {{"InstanceId.1", id}}), "");
  EXPECT_EQ(ErrorOf("TerminateInstances", {{"InstanceId.1", "i-0123456789abcdef0"}}),
            "InvalidInstanceID.NotFound");
}

TEST_F(Ec2ApiTest, StopAndStartGiveANewPublicAddressAndKeepThePrivateOne) {
  XmlNode run = Ec2("RunInstances", {{"ImageId", kUbuntu},
                                     {"InstanceType", "g6.xlarge"},
                                     {"MinCount", "1"},
                                     {"MaxCount", "1"}});
  const std::string id = run.Items("instancesSet").at(0)->Text("instanceId");
  EXPECT_EQ(ErrorOf("StopInstances", {{"InstanceId.1", id}}), "IncorrectInstanceState");  // pending
  ASSERT_TRUE(WaitFor([&] { return Instance(id).Text("instanceState/name") == "running"; }, 5s));
  const XmlNode before = Instance(id);
  const std::string address = before.Text("ipAddress");
  ASSERT_FALSE(address.empty());

  XmlNode stop = Ec2("StopInstances", {{"InstanceId.1", id}});
  EXPECT_EQ(stop.name, "StopInstancesResponse");
  EXPECT_EQ(stop.Items("instancesSet").at(0)->Text("previousState/name"), "running");
  EXPECT_EQ(stop.Items("instancesSet").at(0)->Text("currentState/name"), "stopped");
  EXPECT_EQ(Instance(id).Text("instanceState/code"), "80");
  EXPECT_EQ(Instance(id).Text("ipAddress"), "");  // released while stopped

  XmlNode start = Ec2("StartInstances", {{"InstanceId.1", id}});
  EXPECT_EQ(start.Items("instancesSet").at(0)->Text("previousState/name"), "stopped");
  EXPECT_EQ(start.Items("instancesSet").at(0)->Text("currentState/name"), "pending");
  ASSERT_TRUE(WaitFor([&] { return Instance(id).Text("instanceState/name") == "running"; }, 5s));
  const XmlNode after = Instance(id);
  EXPECT_NE(after.Text("ipAddress"), "");
  EXPECT_NE(after.Text("ipAddress"), address);
  EXPECT_EQ(after.Text("privateIpAddress"), before.Text("privateIpAddress"));
  EXPECT_EQ(ErrorOf("StopInstances", {{"InstanceId.1", "i-0123456789abcdef0"}}),
            "InvalidInstanceID.NotFound");
}

TEST_F(Ec2ApiTest, ResourcesAreRegional) {
  const std::string id = Run({}, "eu-west-1");
  EXPECT_EQ(Instance(id, "eu-west-1").Text("placement/availabilityZone"), "eu-west-1a");
  EXPECT_EQ(ErrorOf("DescribeInstances", {{"InstanceId.1", id}}, "us-east-1"),
            "InvalidInstanceID.NotFound");
  EXPECT_TRUE(Ec2("DescribeInstances", {}, "us-east-1").Items("reservationSet").empty());
  EXPECT_EQ(ErrorOf("DescribeInstances", {}, "xx-nowhere-1"), "AuthFailure");
}

TEST_F(Ec2ApiTest, FiltersByNameAndStateAndPaginates) {
  for (int i = 0; i < 7; ++i) {
    Run({{"TagSpecification.1.ResourceType", "instance"},
         {"TagSpecification.1.Tag.1.Key", "Name"},
         {"TagSpecification.1.Tag.1.Value", "vm-" + std::to_string(i)}});
  }
  XmlNode one = Ec2("DescribeInstances", {{"Filter.1.Name", "tag:Name"},
                                          {"Filter.1.Value.1", "vm-3"},
                                          {"Filter.2.Name", "instance-state-name"},
                                          {"Filter.2.Value.1", "pending"},
                                          {"Filter.2.Value.2", "running"}});
  ASSERT_EQ(one.Items("reservationSet").size(), 1u);
  XmlNode glob =
      Ec2("DescribeInstances", {{"Filter.1.Name", "tag:Name"}, {"Filter.1.Value.1", "vm-*"}});
  EXPECT_EQ(glob.Items("reservationSet").size(), 7u);
  EXPECT_EQ(ErrorOf("DescribeInstances",
                    {{"Filter.1.Name", "no-such-filter"}, {"Filter.1.Value.1", "x"}}),
            "InvalidParameterValue");
  XmlNode page1 = Ec2("DescribeInstances", {{"MaxResults", "5"}});
  EXPECT_EQ(page1.Items("reservationSet").size(), 5u);
  const std::string token = page1.Text("nextToken");
  ASSERT_FALSE(token.empty());
  XmlNode page2 = Ec2("DescribeInstances", {{"MaxResults", "5"}, {"NextToken", token}});
  EXPECT_EQ(page2.Items("reservationSet").size(), 2u);
  EXPECT_EQ(page2.Text("nextToken"), "");
  EXPECT_EQ(
      ErrorOf("DescribeInstances", {{"MaxResults", "5"}, {"InstanceId.1", "i-0123456789abcdef0"}}),
      "InvalidParameterCombination");
}

TEST_F(Ec2ApiTest, SecurityGroupsKeyPairsAndTheirErrors) {
  XmlNode sg = Ec2("CreateSecurityGroup", {{"GroupName", "web"},
                                           {"GroupDescription", "web"},
                                           {"TagSpecification.1.ResourceType", "security-group"},
                                           {"TagSpecification.1.Tag.1.Key", "gpuprov"},
                                           {"TagSpecification.1.Tag.1.Value", "1"}});
  const std::string gid = sg.Text("groupId");
  EXPECT_EQ(gid.rfind("sg-", 0), 0u);
  EXPECT_EQ(ErrorOf("CreateSecurityGroup", {{"GroupName", "web"}, {"GroupDescription", "x"}}),
            "InvalidGroup.Duplicate");
  Params rule = {{"GroupId", gid},
                 {"IpPermissions.1.IpProtocol", "tcp"},
                 {"IpPermissions.1.FromPort", "6443"},
                 {"IpPermissions.1.ToPort", "6443"},
                 {"IpPermissions.1.IpRanges.1.CidrIp", "0.0.0.0/0"}};
  XmlNode ok = Ec2("AuthorizeSecurityGroupIngress", rule);
  EXPECT_EQ(ok.Text("return"), "true");
  EXPECT_EQ(ErrorOf("AuthorizeSecurityGroupIngress", rule), "InvalidPermission.Duplicate");
  XmlNode groups =
      Ec2("DescribeSecurityGroups", {{"Filter.1.Name", "tag:gpuprov"}, {"Filter.1.Value.1", "1"}});
  ASSERT_EQ(groups.Items("securityGroupInfo").size(), 1u);
  const XmlNode* g = groups.Items("securityGroupInfo")[0];
  EXPECT_EQ(g->Items("ipPermissions").at(0)->Text("fromPort"), "6443");
  EXPECT_EQ(g->Items("ipPermissions").at(0)->Items("ipRanges").at(0)->Text("cidrIp"), "0.0.0.0/0");
  EXPECT_EQ(Count("firewalls"), 1);  // the default group is not counted

  // The default group exists per region and cannot be deleted.
  XmlNode def = Ec2("DescribeSecurityGroups", {{"GroupName.1", "default"}});
  EXPECT_EQ(ErrorOf("DeleteSecurityGroup",
                    {{"GroupId", def.Items("securityGroupInfo")[0]->Text("groupId")}}),
            "CannotDelete");

  const std::string material =
      "c3NoLWVkMjU1MTkgQUFBQUMzTnphQzFsWkRJMU5URTVBQUFBSVB0bGllVWR3dlUzWWk4WEhYMzZ0NVZacGNhMWJ5M0dx"
      "alYrUzBhRDg3VG0gZW11LXRlc3Q=";
  XmlNode key = Ec2("ImportKeyPair", {{"KeyName", "k1"}, {"PublicKeyMaterial", material}});
  EXPECT_EQ(key.Text("keyName"), "k1");
  EXPECT_EQ(key.Text("keyPairId").rfind("key-", 0), 0u);
  EXPECT_EQ(ErrorOf("ImportKeyPair", {{"KeyName", "k1"}, {"PublicKeyMaterial", material}}),
            "InvalidKeyPair.Duplicate");
  EXPECT_EQ(ErrorOf("ImportKeyPair", {{"KeyName", "k2"}, {"PublicKeyMaterial", "bm90IGEga2V5"}}),
            "InvalidKey.Format");
  EXPECT_EQ(ErrorOf("DescribeKeyPairs", {{"KeyName.1", "nope"}}), "InvalidKeyPair.NotFound");
  EXPECT_EQ(Count("ssh_keys"), 1);

  // A group in use cannot go until its instance is terminated.
  const std::string id = Run({{"SecurityGroupId.1", gid}, {"KeyName", "k1"}});
  EXPECT_EQ(Instance(id).Items("groupSet").at(0)->Text("groupName"), "web");
  EXPECT_EQ(ErrorOf("DeleteSecurityGroup", {{"GroupId", gid}}), "DependencyViolation");
  Ec2("TerminateInstances", {{"InstanceId.1", id}});
  ASSERT_TRUE(WaitFor(
      [&] {
        return ErrorOf("DeleteSecurityGroup", {{"GroupId", gid}}) == "";
      },
      5s));
  EXPECT_EQ(ErrorOf("DeleteSecurityGroup", {{"GroupId", gid}}), "InvalidGroup.NotFound");
  Ec2("DeleteKeyPair", {{"KeyName", "k1"}});
  Ec2("DeleteKeyPair", {{"KeyName", "k1"}});  // idempotent
  EXPECT_EQ(Count("firewalls"), 0);
  EXPECT_EQ(Count("ssh_keys"), 0);
}

// What this machine reaches: the union of the instance's groups' tcp and all-traffic rules
// whose IPv4 ranges hold 127.0.0.1 (none from a default group); applied at every change.
TEST_F(Ec2ApiTest, ReachabilityFollowsTheSecurityGroups) {
  auto group = [&](const std::string& name) {
    return Ec2("CreateSecurityGroup", {{"GroupName", name}, {"GroupDescription", name}})
        .Text("groupId");
  };
  auto rule = [](const std::string& gid, const std::string& proto, const std::string& from,
                 const std::string& to, const std::string& cidr) {
    return Params{{"GroupId", gid},
                  {"IpPermissions.1.IpProtocol", proto},
                  {"IpPermissions.1.FromPort", from},
                  {"IpPermissions.1.ToPort", to},
                  {"IpPermissions.1.IpRanges.1.CidrIp", cidr}};
  };
  const std::string a = group("reach-a"), b = group("reach-b");
  Ec2("AuthorizeSecurityGroupIngress", rule(a, "tcp", "22", "22", "0.0.0.0/0"));
  Ec2("AuthorizeSecurityGroupIngress", rule(a, "tcp", "8080", "8080", "10.0.0.0/8"));
  Ec2("AuthorizeSecurityGroupIngress", rule(a, "udp", "53", "53", "0.0.0.0/0"));
  Run({{"SecurityGroupId.1", a},
       {"SecurityGroupId.2", b},
       {"TagSpecification.1.ResourceType", "instance"},
       {"TagSpecification.1.Tag.1.Key", "Name"},
       {"TagSpecification.1.Tag.1.Value", "reach"}});
  auto reachable = [&] { return ReachablePorts(control_, "aws", "reach"); };
  EXPECT_EQ(reachable(), "22");
  Ec2("AuthorizeSecurityGroupIngress", rule(b, "tcp", "6443", "6443", "127.0.0.1/32"));
  EXPECT_EQ(reachable(), "22,6443");
  Ec2("AuthorizeSecurityGroupIngress", rule(b, "tcp", "30000", "30100", "0.0.0.0/0"));
  EXPECT_EQ(reachable(), "22,6443,30000-30100");
  Ec2("RevokeSecurityGroupIngress", rule(b, "tcp", "6443", "6443", "127.0.0.1/32"));
  EXPECT_EQ(reachable(), "22,30000-30100");
  EXPECT_EQ(ErrorOf("RevokeSecurityGroupIngress", rule(b, "tcp", "6443", "6443", "127.0.0.1/32")),
            "InvalidPermission.NotFound");
  Ec2("AuthorizeSecurityGroupIngress",
      {{"GroupId", b}, {"IpPermissions.1.IpProtocol", "-1"},
       {"IpPermissions.1.IpRanges.1.CidrIp", "0.0.0.0/0"}});
  EXPECT_EQ(reachable(), "1-65535");
  // Without a group of its own, the region's default group: nothing from outside.
  Run({{"TagSpecification.1.ResourceType", "instance"},
       {"TagSpecification.1.Tag.1.Key", "Name"},
       {"TagSpecification.1.Tag.1.Value", "reach-default"}});
  EXPECT_EQ(ReachablePorts(control_, "aws", "reach-default"), "");
}

// Issue 33: a rule naming a group (a UserIdGroupPair) admits that group's running members on
// their private addresses, on its ports only; an instance outside the group is not a source.
TEST_F(Ec2ApiTest, AGroupReferencingItselfAdmitsItsMembersOnThePrivateNetwork) {
  const std::string peers =
      Ec2("CreateSecurityGroup", {{"GroupName", "gpuprov-t-peers"}, {"GroupDescription", "t"}})
          .Text("groupId");
  Ec2("AuthorizeSecurityGroupIngress", {{"GroupId", peers},
                                        {"IpPermissions.1.IpProtocol", "tcp"},
                                        {"IpPermissions.1.FromPort", "6443"},
                                        {"IpPermissions.1.ToPort", "6443"},
                                        {"IpPermissions.1.Groups.1.GroupId", peers},
                                        {"IpPermissions.2.IpProtocol", "udp"},
                                        {"IpPermissions.2.FromPort", "51820"},
                                        {"IpPermissions.2.ToPort", "51820"},
                                        {"IpPermissions.2.Groups.1.GroupId", peers}});
  EXPECT_EQ(ErrorOf("AuthorizeSecurityGroupIngress", {{"GroupId", peers},
                                                      {"IpPermissions.1.IpProtocol", "tcp"},
                                                      {"IpPermissions.1.FromPort", "6443"},
                                                      {"IpPermissions.1.ToPort", "6443"},
                                                      {"IpPermissions.1.Groups.1.GroupId", peers}}),
            "InvalidPermission.Duplicate");
  auto named = [](const std::string& name, const Params& groups) {
    Params p = {{"TagSpecification.1.ResourceType", "instance"},
                {"TagSpecification.1.Tag.1.Key", "Name"},
                {"TagSpecification.1.Tag.1.Value", name}};
    p.insert(p.end(), groups.begin(), groups.end());
    return p;
  };
  const std::string a = Run(named("t", {{"SecurityGroupId.1", peers}}));
  const std::string b = Run(named("t-agent-1", {{"SecurityGroupId.1", peers}}));
  const std::string c = Run(named("outsider", {}));
  const std::string b_ip = Instance(b).Text("privateIpAddress");
  const std::string c_ip = Instance(c).Text("privateIpAddress");
  ASSERT_FALSE(b_ip.empty());
  auto row = [&](const std::string& name) {
    JsonArray list = GetArray(Control("GET", "/instances?cloud=aws").Json(), "instances");
    for (size_t i = 0; list && i < list->size(); ++i) {
      JsonObject o = list->getObject(static_cast<unsigned>(i));
      if (GetString(o, "name").value_or("") == name) return o;
    }
    return NewObject();
  };
  // Once all run, t's private address admits t-agent-1 (and itself) on 6443/tcp and 51820/udp.
  std::string rules;
  ASSERT_TRUE(WaitFor(
      [&] {
        Ec2("DescribeInstances");
        rules = ToJson(GetArray(row("t"), "private_ingress"));
        return rules.find(b_ip) != std::string::npos;
      },
      std::chrono::seconds(5)))
      << rules;
  EXPECT_NE(rules.find(R"("protocol":"udp")"), std::string::npos) << rules;
  EXPECT_NE(rules.find(R"("ports":"51820")"), std::string::npos) << rules;
  EXPECT_EQ(rules.find(c_ip), std::string::npos) << rules;
  // The outsider's default group admits only its own members (none but itself).
  EXPECT_EQ(ToJson(GetArray(row("outsider"), "private_ingress")).find(b_ip), std::string::npos);
  XmlNode g = Ec2("DescribeSecurityGroups", {{"GroupId.1", peers}});
  for (const XmlNode* perm : g.Items("securityGroupInfo").at(0)->Items("ipPermissions")) {
    ASSERT_EQ(perm->Items("groups").size(), 1u);
    EXPECT_EQ(perm->Items("groups").at(0)->Text("groupId"), peers);
  }
}

// Issue 33's test world on EC2: the instances of a VPC are test VMs on one Docker network, and
// their security groups are enforced between their private addresses. A group whose rule on
// 6443 names the group itself lets its members reach each other there; an instance outside
// it, in the same VPC, does not.
class Ec2DockerTest : public DockerBackendTest {
 protected:
  void SetUp() override {
    EmulatorOptions o;
    o.clouds = {"aws"};
    o.tokens["aws"] = {kKeyId, kSecret};
    StartDockerEmulator(o);
    if (IsSkipped()) return;
    url_ = emu_->BaseUrl("aws");
  }
  XmlNode Ec2(const std::string& action, const Params& params = {}) {
    drivers::RetryPolicy once;
    once.max_attempts = 1;
    Ec2Client client(url_, once, gpuprov::sdk::Host(), [] {
      aws::AwsCredentials c;
      c.access_key_id = kKeyId;
      c.secret_access_key = kSecret;
      c.origin = "test";
      return c;
    });
    return client.Call("us-east-1", action, params);
  }
  std::string url_;
};

TEST_F(Ec2DockerTest, ASelfReferencingGroupAdmitsItsMembersOnTheirPrivateAddresses) {
  const std::string sg =
      Ec2("CreateSecurityGroup", {{"GroupName", "peers"}, {"GroupDescription", "peers"}})
          .Text("groupId");
  Ec2("AuthorizeSecurityGroupIngress", {{"GroupId", sg},
                                        {"IpPermissions.1.IpProtocol", "tcp"},
                                        {"IpPermissions.1.FromPort", "6443"},
                                        {"IpPermissions.1.ToPort", "6443"},
                                        {"IpPermissions.1.Groups.1.GroupId", sg}});
  auto run = [&](const std::string& name, bool member) {
    Params p = {{"ImageId", kUbuntu},
                {"InstanceType", "t3.micro"},
                {"MinCount", "1"},
                {"MaxCount", "1"},
                {"TagSpecification.1.ResourceType", "instance"},
                {"TagSpecification.1.Tag.1.Key", "Name"},
                {"TagSpecification.1.Tag.1.Value", name}};
    if (member) p.emplace_back("SecurityGroupId.1", sg);
    return Ec2("RunInstances", p).Items("instancesSet").at(0)->Text("instanceId");
  };
  const std::string server = run("emu-ec2-server", true);
  run("emu-ec2-agent", true);
  run("emu-ec2-outsider", false);
  std::string server_ip;
  ASSERT_TRUE(WaitFor(
      [&] {
        XmlNode d = Ec2("DescribeInstances", {{"InstanceId.1", server}});
        const XmlNode* i = d.Items("reservationSet").at(0)->Items("instancesSet").at(0);
        server_ip = i->Text("privateIpAddress");
        return i->Text("instanceState/name") == "running";
      },
      std::chrono::seconds(60)));
  ASSERT_EQ(server_ip.rfind("10.", 0), 0u) << server_ip;
  const std::string server_cid = ContainerOf("aws", "emu-ec2-server");
  const std::string agent_cid = ContainerOf("aws", "emu-ec2-agent");
  const std::string outsider_cid = ContainerOf("aws", "emu-ec2-outsider");
  ASSERT_FALSE(server_cid.empty() || agent_cid.empty() || outsider_cid.empty());
  ServePorts(server_cid, {6443, 8080}, {});
  auto probe = [&](const std::string& cid, int port) {
    return Probe(cid, server_ip, "tcp", port);
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        Ec2("DescribeInstances");  // the emulator sets the rules once every member runs
        return probe(agent_cid, 6443) == "port-6443\n";
      },
      std::chrono::seconds(60)))
      << "a member does not reach 6443 of " << server_ip;
  EXPECT_EQ(probe(agent_cid, 8080), "") << "a port the group does not open";
  EXPECT_EQ(probe(outsider_cid, 6443), "") << "an instance outside the group";
}

TEST_F(Ec2ApiTest, InstanceTypesWithGpuInfoAndOfferings) {
  XmlNode t = Ec2("DescribeInstanceTypes", {{"InstanceType.1", "g6.xlarge"}});
  const XmlNode* item = t.Items("instanceTypeSet").at(0);
  EXPECT_EQ(item->Text("vCpuInfo/defaultVCpus"), "4");
  const XmlNode* gpu = item->Items("gpuInfo/gpus").at(0);
  EXPECT_EQ(gpu->Text("name"), "L4");
  EXPECT_EQ(gpu->Text("manufacturer"), "NVIDIA");
  EXPECT_EQ(gpu->Text("count"), "1");
  EXPECT_EQ(ErrorOf("DescribeInstanceTypes", {{"InstanceType.1", "x9.huge"}}),
            "InvalidInstanceType");
  XmlNode off = Ec2("DescribeInstanceTypeOfferings", {{"LocationType", "region"},
                                                      {"Filter.1.Name", "instance-type"},
                                                      {"Filter.1.Value.1", "p6-b200.48xlarge"}});
  EXPECT_TRUE(off.Items("instanceTypeOfferingSet").empty());
  off = Ec2("DescribeInstanceTypeOfferings",
            {{"LocationType", "region"},
             {"Filter.1.Name", "instance-type"},
             {"Filter.1.Value.1", "p6-b200.48xlarge"}},
            "us-west-2");
  ASSERT_EQ(off.Items("instanceTypeOfferingSet").size(), 1u);
  EXPECT_EQ(off.Items("instanceTypeOfferingSet")[0]->Text("location"), "us-west-2");
  EXPECT_EQ(Ec2("DescribeRegions").Items("regionInfo").size(), 16u);
}

TEST_F(Ec2ApiTest, FaultsGiveTheReferenceCodes) {
  Fault(R"({"cloud":"aws","fault":"throttle","times":2})");
  int http = 0;
  EXPECT_EQ(ErrorOf("DescribeInstances", {}, "us-east-1", &http), "RequestLimitExceeded");
  EXPECT_EQ(http, 503);
  EXPECT_EQ(ErrorOf("DescribeInstances"), "RequestLimitExceeded");
  EXPECT_EQ(ErrorOf("DescribeInstances"), "");
  Fault(R"({"cloud":"aws","fault":"server_error","status":500})");
  EXPECT_EQ(ErrorOf("DescribeInstances", {}, "us-east-1", &http), "InternalError");
  EXPECT_EQ(http, 500);
  Params run = {
      {"ImageId", kUbuntu}, {"InstanceType", "g6.xlarge"}, {"MinCount", "1"}, {"MaxCount", "1"}};
  Fault(R"({"cloud":"aws","fault":"capacity"})");
  EXPECT_EQ(ErrorOf("RunInstances", run, "us-east-1", &http), "InsufficientInstanceCapacity");
  EXPECT_EQ(http, 500);
  Fault(R"({"cloud":"aws","fault":"quota"})");
  EXPECT_EQ(ErrorOf("RunInstances", run, "us-east-1", &http), "VcpuLimitExceeded");
  EXPECT_EQ(http, 400);
  EXPECT_EQ(Count("instances"), 0);
  // A wrong signature is refused before any fault fires.
  Fault(R"({"cloud":"aws","fault":"throttle"})");
  try {
    Client("bad")->Call("us-east-1", "DescribeInstances", {});
  } catch (const Ec2Error& e) {
    EXPECT_EQ(e.code(), "AuthFailure");
  }
}

TEST_F(Ec2ApiTest, EventualConsistencyAndBootFaults) {
  ASSERT_EQ(Control("POST", "/settings", R"({"cloud":"aws","describe_not_found":2})").status, 200);
  const std::string id = Run();
  EXPECT_EQ(ErrorOf("DescribeInstances", {{"InstanceId.1", id}}), "InvalidInstanceID.NotFound");
  EXPECT_EQ(ErrorOf("DescribeInstances", {{"InstanceId.1", id}}), "InvalidInstanceID.NotFound");
  EXPECT_EQ(ErrorOf("DescribeInstances", {{"InstanceId.1", id}}), "");
  ASSERT_EQ(Control("POST", "/settings", R"({"cloud":"aws","describe_not_found":0})").status, 200);

  Fault(R"({"cloud":"aws","fault":"vanish_during_boot"})");
  const std::string gone = Run();
  ASSERT_TRUE(
      WaitFor([&] { return Instance(gone).Text("instanceState/name") == "terminated"; }, 5s));
  EXPECT_EQ(Instance(gone).Text("stateReason/code"), "Server.InternalError");
  Fault(R"({"cloud":"aws","fault":"error_during_boot"})");
  const std::string flip = Run();
  ASSERT_TRUE(
      WaitFor([&] { return Instance(flip).Text("instanceState/name") == "terminated"; }, 5s));
  EXPECT_EQ(Instance(flip).Text("stateReason/code"), "Server.InsufficientInstanceCapacity");
  Fault(R"({"cloud":"aws","fault":"slow_boot","seconds":1.5})");
  const std::string slow = Run();
  std::this_thread::sleep_for(800ms);
  EXPECT_EQ(Instance(slow).Text("instanceState/name"), "pending");
  ASSERT_TRUE(WaitFor([&] { return Instance(slow).Text("instanceState/name") == "running"; }, 5s));
  EXPECT_EQ(Count("instances"), 2);  // the live ones: the first and the slow one
}

TEST_F(Ec2ApiTest, ClientTokenReturnsTheSameReservation) {
  Params p = {{"ImageId", kUbuntu},
              {"InstanceType", "t3.micro"},
              {"MinCount", "1"},
              {"MaxCount", "1"},
              {"ClientToken", "tok-1"}};
  XmlNode a = Ec2("RunInstances", p);
  XmlNode b = Ec2("RunInstances", p);
  EXPECT_EQ(a.Text("reservationId"), b.Text("reservationId"));
  EXPECT_EQ(Count("instances"), 1);
  p[1].second = "t3.medium";
  EXPECT_EQ(ErrorOf("RunInstances", p), "IdempotentParameterMismatch");
  // DryRun: validated, nothing made.
  Params dry = {{"ImageId", kUbuntu},
                {"InstanceType", "t3.micro"},
                {"MinCount", "1"},
                {"MaxCount", "1"},
                {"DryRun", "true"}};
  int http = 0;
  EXPECT_EQ(ErrorOf("RunInstances", dry, "us-east-1", &http), "DryRunOperation");
  EXPECT_EQ(http, 412);
  EXPECT_EQ(Count("instances"), 1);
}

TEST_F(Ec2ApiTest, RequestLogNamesEachActionAndStallAfterFiresOnTheNthMatch) {
  const std::string gid =
      Ec2("CreateSecurityGroup", {{"GroupName", "web"}, {"GroupDescription", "web"}})
          .Text("groupId");
  auto rule = [&](const std::string& port) {
    return Params{{"GroupId", gid},
                  {"IpPermissions.1.IpProtocol", "tcp"},
                  {"IpPermissions.1.FromPort", port},
                  {"IpPermissions.1.ToPort", port},
                  {"IpPermissions.1.IpRanges.1.CidrIp", "0.0.0.0/0"}};
  };
  // The second successful AuthorizeSecurityGroupIngress stalls the cloud, not the first.
  Fault(R"({"cloud":"aws","fault":"stall_after","method":"POST","path":"/",)"
        R"("body":"Action=AuthorizeSecurityGroupIngress&","nth":2})");
  EXPECT_EQ(
      Control("GET", "/faults?cloud=aws").Json()->getArray("aws")->getObject(0)->getValue<int>("nth"),
      2);
  Ec2("AuthorizeSecurityGroupIngress", rule("22"));
  EXPECT_EQ(ErrorOf("AuthorizeSecurityGroupIngress", rule("22")), "InvalidPermission.Duplicate");
  EXPECT_FALSE(Control("GET", "/stalled?cloud=aws").Json()->getValue<bool>("stalled"));
  Ec2("AuthorizeSecurityGroupIngress", rule("6443"));
  EXPECT_TRUE(Control("GET", "/stalled?cloud=aws").Json()->getValue<bool>("stalled"));
  ASSERT_EQ(Control("DELETE", "/stalled?cloud=aws").status, 204);
  // Each call is logged with its action, and nothing else of the signed form body.
  const Reply log = Control("GET", "/requests?cloud=aws");
  JsonArray requests = log.Json()->getArray("requests");
  std::vector<std::string> actions;
  for (size_t i = 0; i < requests->size(); ++i) {
    actions.push_back(requests->getObject(static_cast<unsigned>(i))->optValue<std::string>("action", ""));
  }
  EXPECT_EQ(actions, (std::vector<std::string>{"CreateSecurityGroup", "AuthorizeSecurityGroupIngress",
                                               "AuthorizeSecurityGroupIngress",
                                               "AuthorizeSecurityGroupIngress"}));
  EXPECT_EQ(log.body.find(kSecret), std::string::npos);
  EXPECT_EQ(log.body.find("0.0.0.0/0"), std::string::npos);
  // nth below 1 is refused, naming the field.
  const Reply bad = Control("POST", "/faults", R"({"cloud":"aws","fault":"stall_after","nth":0})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find(R"(\"nth\" must be 1 or more)"), std::string::npos) << bad.body;
}


// ImportKeyPair takes RSA and ED25519 only (EC2 API reference, ImportKeyPair): an ECDSA key is
// InvalidKey.Format, as EC2 answers it.
TEST_F(Ec2ApiTest, EcdsaKeysAreRefusedAsEc2Does) {
  const std::string ecdsa =
      "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBJSFFK09bJK+3FAHX9m"
      "6XOBZgK4xxP5/04hEBQeSP1uZHwRo+KVxD5sW3U1LFwRi+Cip/+Ns7gD/Vd3pjFRGitU= t@x";
  int http = 0;
  EXPECT_EQ(ErrorOf("ImportKeyPair", {{"KeyName", "e"}, {"PublicKeyMaterial", drivers::Base64(ecdsa)}},
                    "us-east-1", &http),
            "InvalidKey.Format");
  EXPECT_EQ(http, 400);
  EXPECT_EQ(Count("ssh_keys"), 0);
}

// An account without a default VPC (setting default_vpc false): DescribeVpcs lists none with
// isDefault, CreateSecurityGroup without VpcId and RunInstances without a subnet are
// VPCIdNotSpecified; a subnet of the account's own VPC maps no public address unless the
// primary interface asks for one.
TEST_F(Ec2ApiTest, WithoutADefaultVpcLaunchesNeedASubnet) {
  const Params is_default = {{"Filter.1.Name", "isDefault"}, {"Filter.1.Value.1", "true"}};
  EXPECT_EQ(Ec2("DescribeVpcs", is_default).Items("vpcSet").size(), 1u);
  EXPECT_EQ(Ec2("DescribeSubnets").Items("subnetSet").size(), 4u);
  // A group of the default VPC cannot go with a subnet of another VPC.
  XmlNode own = Ec2("DescribeSubnets", {{"Filter.1.Name", "default-for-az"}, {"Filter.1.Value.1", "false"}});
  ASSERT_EQ(own.Items("subnetSet").size(), 1u);
  const std::string subnet = own.Items("subnetSet")[0]->Text("subnetId");
  const std::string vpc = own.Items("subnetSet")[0]->Text("vpcId");
  EXPECT_EQ(own.Items("subnetSet")[0]->Text("mapPublicIpOnLaunch"), "false");
  const std::string web = Ec2("CreateSecurityGroup", {{"GroupName", "web"}, {"GroupDescription", "w"}})
                              .Text("groupId");
  Params base = {
      {"ImageId", kUbuntu}, {"InstanceType", "t3.micro"}, {"MinCount", "1"}, {"MaxCount", "1"}};
  Params mixed = base;
  mixed.insert(mixed.end(), {{"SubnetId", subnet}, {"SecurityGroupId.1", web}});
  EXPECT_EQ(ErrorOf("RunInstances", mixed), "InvalidParameter");

  ASSERT_EQ(Control("POST", "/settings", R"({"cloud":"aws","default_vpc":false})").status, 200);
  EXPECT_TRUE(Ec2("DescribeVpcs", is_default).Items("vpcSet").empty());
  EXPECT_EQ(Ec2("DescribeVpcs").Items("vpcSet").size(), 1u);
  EXPECT_EQ(Ec2("DescribeSubnets").Items("subnetSet").size(), 1u);
  int http = 0;
  EXPECT_EQ(ErrorOf("CreateSecurityGroup", {{"GroupName", "g"}, {"GroupDescription", "g"}},
                    "us-east-1", &http),
            "VPCIdNotSpecified");
  EXPECT_EQ(http, 400);
  EXPECT_EQ(ErrorOf("RunInstances", base, "us-east-1", &http), "VPCIdNotSpecified");
  EXPECT_EQ(http, 400);
  EXPECT_EQ(ErrorOf("CreateSecurityGroup",
                    {{"GroupName", "g"}, {"GroupDescription", "g"}, {"VpcId", "vpc-0123456789abcdef0"}}),
            "InvalidVpcID.NotFound");
  const std::string gid =
      Ec2("CreateSecurityGroup", {{"GroupName", "g"}, {"GroupDescription", "g"}, {"VpcId", vpc}})
          .Text("groupId");
  Params unknown = base;
  unknown.emplace_back("SubnetId", "subnet-0123456789abcdef0");
  EXPECT_EQ(ErrorOf("RunInstances", unknown), "InvalidSubnetID.NotFound");
  // Both an interface and instance-level groups: refused.
  Params both = base;
  both.insert(both.end(), {{"NetworkInterface.1.DeviceIndex", "0"},
                           {"NetworkInterface.1.SubnetId", subnet},
                           {"SecurityGroupId.1", gid}});
  EXPECT_EQ(ErrorOf("RunInstances", both), "InvalidParameterCombination");

  const std::string quiet = Run({{"SubnetId", subnet}, {"SecurityGroupId.1", gid}});
  const std::string seen = Run({{"NetworkInterface.1.DeviceIndex", "0"},
                                {"NetworkInterface.1.SubnetId", subnet},
                                {"NetworkInterface.1.AssociatePublicIpAddress", "true"},
                                {"NetworkInterface.1.SecurityGroupId.1", gid}});
  ASSERT_TRUE(WaitFor([&] { return Instance(seen).Text("instanceState/name") == "running" &&
                                   Instance(quiet).Text("instanceState/name") == "running"; },
                      5s));
  EXPECT_EQ(Instance(quiet).Text("ipAddress"), "");
  EXPECT_EQ(Instance(quiet).Text("subnetId"), subnet);
  EXPECT_NE(Instance(seen).Text("ipAddress"), "");
  EXPECT_EQ(Instance(seen).Text("vpcId"), vpc);
  EXPECT_EQ(Instance(seen).Items("groupSet").at(0)->Text("groupId"), gid);
}

// Parameters are held to the action's shape in the EC2 API model: an unknown name is
// UnknownParameter, a required member not sent MissingParameter, a value not of its type
// InvalidParameterValue (all 400), before anything is done.
TEST_F(Ec2ApiTest, UnknownMissingAndMistypedParametersGetEc2sCodes) {
  int http = 0;
  try {
    Client()->Call("us-east-1", "DescribeInstances", {{"InstanceIds.1", "i-0123456789abcdef0"}});
    ADD_FAILURE() << "an unknown parameter must be refused";
  } catch (const Ec2Error& e) {
    EXPECT_EQ(e.code(), "UnknownParameter");
    EXPECT_EQ(e.http_status(), 400);
    EXPECT_EQ(e.message(), "The parameter InstanceIds.1 is not recognized");
  }
  Params run = {{"ImageId", kUbuntu}, {"InstanceType", "t3.micro"}, {"MinCount", "1"}, {"MaxCount", "1"}};
  Params extra = run;
  extra.emplace_back("SecurityGroupIds.1", "sg-1");  // the SDK member name, not the wire name
  EXPECT_EQ(ErrorOf("RunInstances", extra), "UnknownParameter");
  EXPECT_EQ(ErrorOf("RunInstances", {{"ImageId", kUbuntu}, {"MinCount", "1"}}, "us-east-1", &http),
            "MissingParameter");
  EXPECT_EQ(http, 400);
  EXPECT_EQ(ErrorOf("TerminateInstances"), "MissingParameter");
  EXPECT_EQ(ErrorOf("CreateTags", {{"ResourceId.1", "i-0123456789abcdef0"}}), "MissingParameter");
  EXPECT_EQ(ErrorOf("DescribeInstances", {{"MaxResults", "ten"}}), "InvalidParameterValue");
  EXPECT_EQ(ErrorOf("DescribeInstances", {{"DryRun", "maybe"}}), "InvalidParameterValue");
  EXPECT_EQ(ErrorOf("DescribeVpcs", {{"Filter.1.Name", "isDefault"}, {"Filter.1.Value.1", "true"}}), "");
  // Parameters of the model the emulator does not act on are still accepted, as EC2 does.
  Params placed = run;
  placed.emplace_back("Placement.Tenancy", "default");
  EXPECT_EQ(ErrorOf("RunInstances", placed), "");
}

// --- the EC2 API model (botocore's data/ec2/2016-11-15/service-2.json, read at run time) ---

// The model as Debian's awscli ships it (scripts/setup.sh installs awscli), or
// $GPUPROV_EC2_API_MODEL. Never copied into the tree.
std::string ModelPath() {
  if (const char* env = std::getenv("GPUPROV_EC2_API_MODEL")) return env;
  for (const char* p : {"/usr/lib/python3/dist-packages/awscli/botocore/data/ec2/2016-11-15/service-2.json",
                        "/usr/lib/python3/dist-packages/botocore/data/ec2/2016-11-15/service-2.json"}) {
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

class Ec2ApiModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = ModelPath();
    if (path.empty()) return;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    model_ = Poco::JSON::Parser().parse(text.str()).extract<Poco::JSON::Object::Ptr>();
  }
  void SetUp() override {
    ASSERT_TRUE(model_) << "the EC2 API model is not on this machine: apt-get install awscli "
                           "(scripts/setup.sh does), or set GPUPROV_EC2_API_MODEL to a "
                           "service-2.json of ec2/2016-11-15";
  }
  static Poco::JSON::Object::Ptr Shape(const std::string& name) {
    return model_->getObject("shapes")->getObject(name);
  }
  // The name a member is sent under by the EC2 protocol: queryName, else locationName with
  // its first letter upper-cased, else the member name (botocore's EC2 serializer).
  static std::string WireName(const std::string& member, const Poco::JSON::Object::Ptr& ref) {
    if (ref->has("queryName")) return ref->getValue<std::string>("queryName");
    if (ref->has("locationName")) {
      std::string n = ref->getValue<std::string>("locationName");
      n[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(n[0])));
      return n;
    }
    return member;
  }
  static char TypeLetter(const std::string& t) {
    if (t == "integer" || t == "long") return 'i';
    if (t == "boolean") return 'b';
    if (t == "double" || t == "float") return 'd';
    if (t == "timestamp") return 't';
    if (t == "blob") return 'B';
    return 's';
  }
  // Every parameter pattern of a shape with its type letter (lists flattened as .N).
  static void Flatten(const std::string& shape, const std::string& prefix,
                      std::map<std::string, char>* out) {
    Poco::JSON::Object::Ptr s = Shape(shape);
    const std::string type = s->getValue<std::string>("type");
    if (type == "structure") {
      Poco::JSON::Object::Ptr members = s->getObject("members");
      for (const auto& [name, value] : *members) {
        Poco::JSON::Object::Ptr ref = members->getObject(name);
        Flatten(ref->getValue<std::string>("shape"),
                (prefix.empty() ? "" : prefix + ".") + WireName(name, ref), out);
      }
    } else if (type == "list") {
      Flatten(s->getObject("member")->getValue<std::string>("shape"), prefix + ".N", out);
    } else {
      (*out)[prefix] = TypeLetter(type);
    }
  }
  struct Input {
    std::map<std::string, char> params;
    std::set<std::string> required;
  };
  // nullopt when the model has no such operation.
  static std::optional<Input> InputOf(const std::string& action) {
    Poco::JSON::Object::Ptr ops = model_->getObject("operations");
    if (!ops->has(action)) return std::nullopt;
    Input in;
    const std::string shape = ops->getObject(action)->getObject("input")->getValue<std::string>("shape");
    Flatten(shape, "", &in.params);
    Poco::JSON::Object::Ptr s = Shape(shape);
    if (auto req = s->getArray("required")) {
      for (size_t i = 0; i < req->size(); ++i) {
        const std::string member = req->getElement<std::string>(static_cast<unsigned>(i));
        in.required.insert(WireName(member, s->getObject("members")->getObject(member)));
      }
    }
    return in;
  }
  // Problems of a response element against its model shape: every child element is a member
  // of the structure (by its XML name: locationName, else the member name), a list holds
  // "item" elements, and integer and boolean values parse as such. The model marks no output
  // member of these actions required, so absence is never a problem.
  static void CheckXml(const XmlNode& node, const std::string& shape, const std::string& path,
                       std::vector<std::string>* problems) {
    Poco::JSON::Object::Ptr s = Shape(shape);
    const std::string type = s->getValue<std::string>("type");
    if (type == "structure") {
      Poco::JSON::Object::Ptr members = s->getObject("members");
      for (const XmlNode& child : node.children) {
        std::string member_shape;
        for (const auto& [name, value] : *members) {
          Poco::JSON::Object::Ptr ref = members->getObject(name);
          const std::string xml = ref->has("locationName") ? ref->getValue<std::string>("locationName") : name;
          if (xml == child.name) member_shape = ref->getValue<std::string>("shape");
        }
        if (member_shape.empty()) {
          // At the root, requestId of every answer, and `return`, which EC2 sends beside the
          // model's members for some actions (the EC2 API reference's sample response of
          // CreateSecurityGroup: <return>true</return><groupId>...</groupId>).
          const bool root = path.find('/') == std::string::npos;
          if (!(root && (child.name == "requestId" || child.name == "return"))) {
            problems->push_back(path + "/" + child.name + " is not in " + shape);
          }
          continue;
        }
        CheckXml(child, member_shape, path + "/" + child.name, problems);
      }
    } else if (type == "list") {
      for (const XmlNode& child : node.children) {
        if (child.name != "item") {
          problems->push_back(path + "/" + child.name + ": a list holds item elements");
          continue;
        }
        CheckXml(child, s->getObject("member")->getValue<std::string>("shape"), path + "/item", problems);
      }
    } else if (!node.children.empty()) {
      problems->push_back(path + " is a " + type + " but has child elements");
    } else if ((type == "integer" || type == "long") &&
               node.text.find_first_not_of("-0123456789") != std::string::npos) {
      problems->push_back(path + " = '" + node.text + "' is not an integer");
    } else if (type == "boolean" && node.text != "true" && node.text != "false") {
      problems->push_back(path + " = '" + node.text + "' is not a boolean");
    }
  }
  // The problems of a whole answer of `action`.
  static std::vector<std::string> ResponseProblems(const std::string& action, const XmlNode& doc) {
    std::vector<std::string> problems;
    Poco::JSON::Object::Ptr op = model_->getObject("operations")->getObject(action);
    if (doc.name != action + "Response") problems.push_back("root " + doc.name);
    if (!op->has("output")) return problems;
    CheckXml(doc, op->getObject("output")->getValue<std::string>("shape"), action, &problems);
    return problems;
  }

  static inline Poco::JSON::Object::Ptr model_;
};

// Every answer of every action the emulator serves, in a lifecycle that fills them (instances,
// groups with rules, key pairs, subnets), has only elements of the action's output shape in the
// model, with integer and boolean values of those types.
class Ec2ApiModelResponses : public Ec2ApiModel {
 protected:
  void SetUp() override {
    Ec2ApiModel::SetUp();
    if (HasFatalFailure()) return;
    EmulatorOptions o;
    o.backend = "memory";
    o.boot_seconds = 0.1;
    o.clouds = {"aws"};
    o.tokens["aws"] = {kKeyId, kSecret};
    emu_ = std::make_unique<Emulator>(o);
    emu_->Start();
    drivers::RetryPolicy once;
    once.max_attempts = 1;
    client_ = std::make_unique<Ec2Client>(emu_->BaseUrl("aws"), once, gpuprov::sdk::Host(), [] {
      aws::AwsCredentials c;
      c.access_key_id = kKeyId;
      c.secret_access_key = kSecret;
      c.origin = "test";
      return c;
    });
  }
  XmlNode Checked(const std::string& action, const Params& params) {
    XmlNode doc = client_->Call("us-east-1", action, params);
    for (const std::string& p : ResponseProblems(action, doc)) ADD_FAILURE() << action << ": " << p;
    seen_.insert(action);
    return doc;
  }
  std::unique_ptr<Emulator> emu_;
  std::unique_ptr<Ec2Client> client_;
  std::set<std::string> seen_;
};

TEST_F(Ec2ApiModelResponses, EveryAnswerHasOnlyTheModelsElementsAndTypes) {
  // The check itself: an element the model lacks and a boolean that is not one, deep down.
  const XmlNode bad = aws::ParseXml(
      "<DescribeVpcsResponse><vpcSet><item><vpcId>v</vpcId><isDefault>maybe</isDefault><nope/>"
      "</item></vpcSet></DescribeVpcsResponse>");
  EXPECT_EQ(ResponseProblems("DescribeVpcs", bad).size(), 2u);

  const Params tag = {{"TagSpecification.1.ResourceType", "security-group"},
                      {"TagSpecification.1.Tag.1.Key", "gpuprov"},
                      {"TagSpecification.1.Tag.1.Value", "1"}};
  Params sg = {{"GroupName", "g"}, {"GroupDescription", "g"}};
  sg.insert(sg.end(), tag.begin(), tag.end());
  const std::string gid = Checked("CreateSecurityGroup", sg).Text("groupId");
  const Params rule = {{"GroupId", gid},
                       {"IpPermissions.1.IpProtocol", "tcp"},
                       {"IpPermissions.1.FromPort", "22"},
                       {"IpPermissions.1.ToPort", "22"},
                       {"IpPermissions.1.IpRanges.1.CidrIp", "0.0.0.0/0"},
                       {"IpPermissions.1.Ipv6Ranges.1.CidrIpv6", "::/0"}};
  Checked("AuthorizeSecurityGroupIngress", rule);
  const std::string material =
      "c3NoLWVkMjU1MTkgQUFBQUMzTnphQzFsWkRJMU5URTVBQUFBSVB0bGllVWR3dlUzWWk4WEhYMzZ0NVZacGNhMWJ5M0dx"
      "alYrUzBhRDg3VG0gZW11LXRlc3Q=";
  Checked("ImportKeyPair", {{"KeyName", "k"},
                            {"PublicKeyMaterial", material},
                            {"TagSpecification.1.ResourceType", "key-pair"},
                            {"TagSpecification.1.Tag.1.Key", "gpuprov"},
                            {"TagSpecification.1.Tag.1.Value", "1"}});
  XmlNode run = Checked("RunInstances", {{"ImageId", kUbuntu},
                                         {"InstanceType", "g6.xlarge"},
                                         {"MinCount", "1"},
                                         {"MaxCount", "1"},
                                         {"KeyName", "k"},
                                         {"SecurityGroupId.1", gid},
                                         {"TagSpecification.1.ResourceType", "instance"},
                                         {"TagSpecification.1.Tag.1.Key", "Name"},
                                         {"TagSpecification.1.Tag.1.Value", "vm"}});
  const std::string id = run.Items("instancesSet").at(0)->Text("instanceId");
  ASSERT_TRUE(WaitFor([&] {
    return Checked("DescribeInstances", {{"InstanceId.1", id}})
               .Items("reservationSet").at(0)->Items("instancesSet").at(0)->Text("instanceState/name") == "running";
  }, 5s));
  Checked("DescribeInstances", {{"MaxResults", "5"}});
  Checked("DescribeSecurityGroups", {{"GroupId.1", gid}});
  Checked("DescribeKeyPairs", {{"KeyName.1", "k"}});
  Checked("CreateTags", {{"ResourceId.1", id}, {"Tag.1.Key", "team"}, {"Tag.1.Value", "ml"}});
  Checked("DescribeInstanceTypes", {{"InstanceType.1", "g6.xlarge"}});
  Checked("DescribeInstanceTypeOfferings", {{"LocationType", "region"}});
  Checked("DescribeSpotPriceHistory", {{"InstanceType.1", "g6.xlarge"},
                                       {"ProductDescription.1", "Linux/UNIX"},
                                       {"StartTime", "2026-12-06T12:00:00Z"}});
  Checked("DescribeRegions", {});
  Checked("DescribeAvailabilityZones", {});
  Checked("DescribeAddresses", {});
  Checked("DescribeVpcs", {});
  Checked("DescribeSubnets", {});
  Checked("RevokeSecurityGroupIngress", rule);
  Checked("StopInstances", {{"InstanceId.1", id}});
  ASSERT_TRUE(WaitFor([&] {
    return Checked("DescribeInstances", {{"InstanceId.1", id}})
               .Items("reservationSet").at(0)->Items("instancesSet").at(0)->Text("instanceState/name") == "stopped";
  }, 5s));
  Checked("StartInstances", {{"InstanceId.1", id}});
  Checked("TerminateInstances", {{"InstanceId.1", id}});
  ASSERT_TRUE(WaitFor([&] {
    try {
      client_->Call("us-east-1", "DeleteSecurityGroup", {{"GroupId", gid}});
      return true;
    } catch (const Ec2Error&) {
      return false;
    }
  }, 5s));
  Checked("DeleteKeyPair", {{"KeyName", "k"}});
  Checked("DescribeInstances", {{"InstanceId.1", id}});  // terminated
  std::set<std::string> all;
  for (const auto& [action, shape] : Ec2ActionShapes()) all.insert(action);
  all.erase("DeleteSecurityGroup");  // answered above, outside Checked (it waits)
  for (const std::string& a : all) EXPECT_TRUE(seen_.count(a)) << a << " was not checked";
}

// Every action the emulator serves is an operation of the model, and it takes exactly the
// model's parameters, of the model's types, with the model's required members.
TEST_F(Ec2ApiModel, EveryServedActionAndParameterIsInTheModel) {
  EXPECT_EQ(model_->getObject("metadata")->getValue<std::string>("apiVersion"), "2016-11-15");
  EXPECT_EQ(model_->getObject("metadata")->getValue<std::string>("protocol"), "ec2");
  for (const auto& [action, shape] : Ec2ActionShapes()) {
    SCOPED_TRACE(action);
    std::optional<Input> model = InputOf(action);
    ASSERT_TRUE(model) << action << " is not an operation of the EC2 API model";
    std::map<std::string, char> served;
    for (const Ec2Param& p : shape.params) served[p.pattern] = p.type;
    EXPECT_EQ(served, model->params);
    EXPECT_EQ(std::set<std::string>(shape.required.begin(), shape.required.end()), model->required);
  }
}

// The operations the AWS driver calls and the parameters it sends (transcribed from
// plugins/aws/aws_driver.cc): each is served by the emulator and described by the model.
TEST_F(Ec2ApiModel, TheDriversOperationsAndParametersAreInTheModel) {
  const std::map<std::string, std::vector<std::string>> driver = {
      {"DescribeInstances",
       {"InstanceId.1", "Filter.1.Name", "Filter.1.Value.1", "MaxResults", "NextToken"}},
      {"RunInstances",
       {"ImageId", "InstanceType", "MinCount", "MaxCount", "KeyName", "SecurityGroupId.1",
        "ClientToken", "InstanceInitiatedShutdownBehavior", "UserData",
        "BlockDeviceMapping.1.DeviceName", "BlockDeviceMapping.1.Ebs.VolumeSize",
        "BlockDeviceMapping.1.Ebs.VolumeType", "BlockDeviceMapping.1.Ebs.DeleteOnTermination",
        "TagSpecification.1.ResourceType", "TagSpecification.1.Tag.1.Key",
        "TagSpecification.1.Tag.1.Value", "NetworkInterface.1.DeviceIndex",
        "NetworkInterface.1.SubnetId", "NetworkInterface.1.AssociatePublicIpAddress",
        "NetworkInterface.1.DeleteOnTermination", "NetworkInterface.1.SecurityGroupId.1",
        "InstanceMarketOptions.MarketType", "InstanceMarketOptions.SpotOptions.SpotInstanceType",
        "InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior"}},
      {"TerminateInstances", {"InstanceId.1"}},
      {"DescribeSecurityGroups", {"GroupId.1", "Filter.1.Name", "Filter.2.Value.1"}},
      {"CreateSecurityGroup",
       {"GroupName", "GroupDescription", "VpcId", "TagSpecification.1.ResourceType",
        "TagSpecification.1.Tag.1.Key", "TagSpecification.1.Tag.1.Value"}},
      {"AuthorizeSecurityGroupIngress",
       {"GroupId", "IpPermissions.1.IpProtocol", "IpPermissions.1.FromPort",
        "IpPermissions.1.ToPort", "IpPermissions.1.IpRanges.1.CidrIp",
        "IpPermissions.1.IpRanges.1.Description", "IpPermissions.1.Ipv6Ranges.1.CidrIpv6",
        "IpPermissions.1.Ipv6Ranges.1.Description"}},
      {"RevokeSecurityGroupIngress",
       {"GroupId", "IpPermissions.1.IpProtocol", "IpPermissions.1.FromPort",
        "IpPermissions.1.ToPort", "IpPermissions.1.IpRanges.1.CidrIp",
        "IpPermissions.1.Ipv6Ranges.1.CidrIpv6"}},
      {"DeleteSecurityGroup", {"GroupId"}},
      {"DescribeKeyPairs", {"KeyName.1", "Filter.1.Name", "Filter.1.Value.1"}},
      {"ImportKeyPair",
       {"KeyName", "PublicKeyMaterial", "TagSpecification.1.ResourceType",
        "TagSpecification.1.Tag.1.Key", "TagSpecification.1.Tag.1.Value"}},
      {"DeleteKeyPair", {"KeyName"}},
      {"DescribeInstanceTypeOfferings", {"LocationType", "Filter.1.Name", "Filter.1.Value.1"}},
      {"DescribeSpotPriceHistory", {"InstanceType.1", "ProductDescription.1", "StartTime"}},
      {"DescribeVpcs", {"Filter.1.Name", "Filter.1.Value.1"}},
      {"DescribeSubnets", {"SubnetId.1", "Filter.1.Name", "Filter.1.Value.1"}},
  };
  for (const auto& [action, params] : driver) {
    SCOPED_TRACE(action);
    EXPECT_TRUE(Ec2ActionShapes().count(action)) << "the emulator does not serve " << action;
    std::optional<Input> model = InputOf(action);
    ASSERT_TRUE(model) << action << " is not an operation of the EC2 API model";
    for (const std::string& p : params) {
      EXPECT_TRUE(model->params.count(Ec2ParamPattern(p))) << p << " is not a parameter of " << action;
    }
  }
}

}  // namespace
}  // namespace gpuprov::emulator
