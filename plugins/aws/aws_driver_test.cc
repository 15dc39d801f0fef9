// SPDX-License-Identifier: Apache-2.0
//
// Loads the BUILT driver .so with dlopen, as the host does, and drives it through the C vtable
// against the EC2 emulator (tests/emulators, `gpuprov-emulator --backend memory --clouds aws`)
// started as a child process. Direct EC2 calls (to look at what the driver made, or to make a
// foreign instance) use the driver's own Ec2Client. Talks only to 127.0.0.1.
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "driver_test_util.h"
#include "ec2_client.h"
#include "gpuprov/driver_abi.h"

namespace gpuprov::aws {
namespace {

using namespace drivers::testing;  // the shared driver test helpers (driver_test_util.h)
using Poco::JSON::Array;
using Poco::JSON::Object;
using std::chrono::milliseconds;

constexpr const char* kKeyId = "AKIAGPUPROVTEST00001";
constexpr const char* kSecret = "gpuprov/emulator+secret/KEY";
constexpr const char* kPublicKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF test@gpuprov";

constexpr char kDriverPath[] = GPUPROV_AWS_DRIVER_PATH;
using Driver = DriverAt<kDriverPath>;

const gpuprov_type_driver_descriptor* Descriptor() { return Driver::Descriptor(); }

// --- no emulator needed -----------------------------------------------------

TEST(AwsDescriptor, IdentityAndCapabilities) {
  const gpuprov_type_driver_descriptor* d = Descriptor();
  ASSERT_NE(d, nullptr);
  EXPECT_STREQ(d->name, "aws");
  // How its VM learns its public address: REFERENCE.md section 6.
  EXPECT_STREQ(d->node_address, GPUPROV_NODE_ADDRESS_EC2);
  EXPECT_EQ(d->capabilities,
            static_cast<uint64_t>(GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_BOOT_CLOUD_INIT |
                                  GPUPROV_CAP_OPEN_PORTS | GPUPROV_CAP_HOSTS_KUBERNETES |
                                  GPUPROV_CAP_SPOT | GPUPROV_CAP_CLUSTER));
  // A host of ABI 1.2 or older refuses the spot and cluster bits it does not know (driver-protocol.md).
  EXPECT_EQ(d->abi_minor_required, 3);
  drivers::testing::ExpectEveryOperation(*d->vtable);
  EXPECT_NE(d->vtable->open_peer_ports, nullptr);
}

TEST(AwsDescriptor, RefusesPlainHttpToANonLoopbackEndpoint) {
  Driver driver(R"({"endpoint":"http://ec2.us-east-1.amazonaws.com","config":{}})");
  EXPECT_EQ(driver.init_status(), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_TRUE(Contains(driver.init_error(), "loopback")) << driver.init_error();
  EXPECT_TRUE(Contains(driver.init_error(), "GPUPROV_AWS_ENDPOINT")) << driver.init_error();
}

TEST(AwsDescriptor, NoCredentialsIsAuthBeforeAnyCall) {
  ScopedTempDir home;
  ScopedEnv h("HOME", home.path().c_str());
  ScopedEnv a("AWS_ACCESS_KEY_ID", nullptr);
  ScopedEnv s("AWS_SECRET_ACCESS_KEY", nullptr);
  ScopedEnv p("AWS_PROFILE", nullptr);
  ScopedEnv c("AWS_SHARED_CREDENTIALS_FILE", nullptr);
  ScopedEnv f("AWS_CONFIG_FILE", nullptr);
  // A closed loopback port: nothing may be sent anyway.
  Driver driver(R"({"endpoint":"http://127.0.0.1:9","config":{}})");
  ASSERT_EQ(driver.init_status(), GPUPROV_STATUS_OK) << driver.init_error();
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "AWS_ACCESS_KEY_ID")) << r.error;
  EXPECT_TRUE(Contains(r.error, "credentials")) << r.error;
}

TEST(AwsDescriptor, OffersWithoutTheNetworkUseTheTable) {
  ScopedEnv a("AWS_ACCESS_KEY_ID", kKeyId);
  ScopedEnv s("AWS_SECRET_ACCESS_KEY", kSecret);
  Driver driver(
      R"({"endpoint":"http://127.0.0.1:9","config":{"region":"eu-west-1","retry":{"max_attempts":1}}})");
  OpResult l4 = driver.Offers(R"({"gpu":{"type":"L4","count":1},"region":""})");
  ASSERT_EQ(l4.status, GPUPROV_STATUS_OK) << l4;
  Array::Ptr offers = l4.Doc()->getArray("offers");
  ASSERT_EQ(offers->size(), 1u) << l4.json;
  EXPECT_EQ(offers->getObject(0)->getValue<std::string>("instance_type"), "g6.xlarge");
  EXPECT_EQ(offers->getObject(0)->getValue<std::string>("region"), "eu-west-1");
  OpResult two = driver.Offers(R"({"gpu":{"type":"L4","count":2},"region":""})");
  ASSERT_EQ(two.status, GPUPROV_STATUS_OK) << two;
  EXPECT_EQ(two.Doc()->getArray("offers")->size(), 0u);
  EXPECT_TRUE(Contains(driver.host().All(), "L4:4 (g6.12xlarge)")) << driver.host().All();
}

// --- the emulator -----------------------------------------------------------

// The emulator as a child process (memory backend, aws only), accepting the test keys.
class AwsEmulator : public EmulatorProcess {
 public:
  static std::optional<std::string> Problem() {
    return EmulatorProcess::Problem(GPUPROV_EMULATOR_PATH);
  }
  bool Start(std::string* problem) {
    return EmulatorProcess::Start(
        GPUPROV_EMULATOR_PATH, {"--backend", "memory", "--clouds", "aws", "--boot-seconds", "1"},
        {{"AWS_ACCESS_KEY_ID", kKeyId}, {"AWS_SECRET_ACCESS_KEY", kSecret}}, {"aws"}, problem);
  }
};

class AwsEmulatorTest : public SharedEmulatorTest<AwsEmulator> {
 protected:
  void SetUp() override {
    SharedEmulatorTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    home_ = std::make_unique<ScopedTempDir>();
    env_.push_back(std::make_unique<ScopedEnv>("HOME", home_->path().c_str()));
    env_.push_back(std::make_unique<ScopedEnv>("AWS_ACCESS_KEY_ID", kKeyId));
    env_.push_back(std::make_unique<ScopedEnv>("AWS_SECRET_ACCESS_KEY", kSecret));
    env_.push_back(std::make_unique<ScopedEnv>("AWS_SESSION_TOKEN", nullptr));
    env_.push_back(std::make_unique<ScopedEnv>("AWS_REGION", nullptr));
    env_.push_back(std::make_unique<ScopedEnv>("AWS_DEFAULT_REGION", nullptr));
    env_.push_back(std::make_unique<ScopedEnv>("AWS_PROFILE", nullptr));
    emulator_->Reset("aws");
  }

  static std::string Url() { return emulator_->Url("aws"); }

  static std::string Config(const std::string& extra = "") {
    return R"({"endpoint":")" + Url() +
           R"(","config":{"region":"us-east-1","poll_interval_ms":100,"consistency_grace_seconds":20,)"
           R"("delete_wait_seconds":30,"retry":{"max_attempts":5,"base_delay_ms":20,"max_delay_ms":200,"total_budget_ms":20000}})" +
           extra + "}";
  }

  static HttpReply Control(const std::string& method, const std::string& path,
                           const std::string& body = "") {
    return emulator_->Control(method, path, body);
  }
  void Fault(const std::string& json) { emulator_->Fault(json); }
  long long Count(const std::string& field) { return emulator_->Count("aws", field); }
  void ExpectNothingLeft() {
    EXPECT_EQ(Count("instances"), 0);
    EXPECT_EQ(Count("backend_instances"), 0);
    EXPECT_EQ(Count("firewalls"), 0) << "security groups left";
    EXPECT_EQ(Count("ssh_keys"), 0) << "key pairs left";
  }

  // A direct EC2 client with the test credentials.
  std::unique_ptr<Ec2Client> Client() {
    return std::make_unique<Ec2Client>(Url(), drivers::RetryPolicy::Fast(), gpuprov::sdk::Host(),
                                       [] {
                                         AwsCredentials c;
                                         c.access_key_id = kKeyId;
                                         c.secret_access_key = kSecret;
                                         c.origin = "test";
                                         return c;
                                       });
  }

  // user_data is JSON string content.
  static std::string CreateRequest(const std::string& name, const std::string& extra = "",
                                   const std::string& user_data = "#!/bin/sh\\necho hi\\n") {
    return R"({"name":")" + name +
           R"(","region":"","gpu":{"type":"L4","count":1},"image":"",)"
           R"("ssh_public_key":")" +
           std::string(kPublicKey) + R"(","user_data":")" + user_data +
           R"(","tags":{"gpuprov":"1","gpuprov-name":")" + name +
           R"(","team":"ml"},"open_ports":[22])" + extra + "}";
  }

  // Polls get until the VM leaves `pending` (or 15 s pass); returns the last VM.
  Object::Ptr WaitNotPending(Driver& d, const std::string& id, const std::string& name) {
    return drivers::testing::PollVm(
        d, R"({"id":")" + id + R"(","name":")" + name + R"("})",
        [](const Object::Ptr& vm) { return vm->getValue<std::string>("state") != "pending"; },
        std::chrono::seconds(15), milliseconds(200));
  }

  std::unique_ptr<ScopedTempDir> home_;
  std::vector<std::unique_ptr<ScopedEnv>> env_;
};

// allow_from (docs/driver-protocol.md): create narrows 6443/80/443 to the given sources, open_ports
// sets them to another list (revoking the old), and both confirm it in their results.
TEST_F(AwsEmulatorTest, AllowFromNarrowsTheGroupAndOpenPortsUpdatesIt) {
  Driver d(Config());
  OpResult check = d.Check();
  ASSERT_EQ(check.status, GPUPROV_STATUS_OK) << check;
  EXPECT_TRUE(check.Doc()->getValue<bool>("allow_from"));

  std::string req = CreateRequest("aws-narrow");
  req.replace(req.find(R"(,"open_ports":[22])"), std::string(R"(,"open_ports":[22])").size(),
              R"(,"open_ports":[22,6443,80,443],"allow_from":["127.0.0.1/32","2001:db8::/32"],)"
              R"("allow_from_ports":[80,443,6443])");
  OpResult c = d.Create(req);
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_TRUE(Contains(c.json, R"("allow_from":["127.0.0.1/32","2001:db8::/32"])")) << c.json;
  const std::string id = c.Vm()->getValue<std::string>("id");
  EXPECT_EQ(emulator_->ReachablePorts("aws", "aws-narrow"), "22,80,443,6443");

  auto ec2 = Client();
  auto sources_of = [&](const std::string& port) {
    XmlNode g = ec2->Call("us-east-1", "DescribeSecurityGroups",
                          {{"Filter.1.Name", "group-name"}, {"Filter.1.Value.1", "gpuprov-aws-narrow"}});
    std::set<std::string> out;
    for (const XmlNode* p : g.Items("securityGroupInfo")[0]->Items("ipPermissions")) {
      if (p->Text("fromPort") != port) continue;
      for (const XmlNode* r : p->Items("ipRanges")) out.insert(r->Text("cidrIp"));
      for (const XmlNode* r : p->Items("ipv6Ranges")) out.insert(r->Text("cidrIpv6"));
    }
    return out;
  };
  EXPECT_EQ(sources_of("6443"), (std::set<std::string>{"127.0.0.1/32", "2001:db8::/32"}));
  EXPECT_EQ(sources_of("22"), (std::set<std::string>{"0.0.0.0/0", "::/0"}));

  OpResult op = d.OpenPorts(R"({"id":")" + id + R"(","ports":[22,80,443,6443],)"
                            R"("allow_from":["10.0.0.0/8"],"allow_from_ports":[80,443,6443]})");
  ASSERT_EQ(op.status, GPUPROV_STATUS_OK) << op;
  EXPECT_EQ(op.json, R"({"allow_from":["10.0.0.0/8"]})");
  EXPECT_EQ(emulator_->ReachablePorts("aws", "aws-narrow"), "22");
  EXPECT_EQ(sources_of("443"), std::set<std::string>{"10.0.0.0/8"});
  EXPECT_EQ(sources_of("22"), (std::set<std::string>{"0.0.0.0/0", "::/0"}));

  // Widened again to everyone through the same field.
  op = d.OpenPorts(R"({"id":")" + id + R"(","ports":[22,80,443,6443],)"
                   R"("allow_from":["0.0.0.0/0"],"allow_from_ports":[80,443,6443]})");
  ASSERT_EQ(op.status, GPUPROV_STATUS_OK) << op;
  EXPECT_EQ(sources_of("6443"), std::set<std::string>{"0.0.0.0/0"});
  EXPECT_EQ(emulator_->ReachablePorts("aws", "aws-narrow"), "22,80,443,6443");

  // Not a CIDR: refused naming the field, before any call.
  OpResult bad = d.OpenPorts(R"({"id":")" + id + R"(","ports":[6443],"allow_from":["nonsense"],)"
                             R"("allow_from_ports":[6443]})");
  EXPECT_EQ(bad.status, GPUPROV_STATUS_INVALID_INPUT) << bad;
  EXPECT_TRUE(Contains(bad.error, "allow_from[0]")) << bad.error;
  ASSERT_EQ(d.Delete(R"({"name":"aws-narrow"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(AwsEmulatorTest, CheckNamesTheAccountAndTheUserDataLimit) {
  Driver d(Config());
  OpResult r = d.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  Object::Ptr doc = r.Doc();
  EXPECT_TRUE(Contains(doc->getValue<std::string>("account"), "111122223333")) << r.json;
  EXPECT_EQ(doc->getValue<int>("user_data_limit"), 16384);
  EXPECT_TRUE(doc->getValue<bool>("user_data_gzip"));
  EXPECT_FALSE(Contains(r.json, kSecret));
  EXPECT_FALSE(Contains(r.json, kKeyId));  // only a masked form
  EXPECT_FALSE(Contains(d.host().All(), kSecret));
}

TEST_F(AwsEmulatorTest, SdkEndpointVariablesAndNoRegion) {
  // Without GPUPROV_AWS_ENDPOINT / endpoint: AWS_ENDPOINT_URL_EC2, else AWS_ENDPOINT_URL.
  const std::string no_endpoint = R"({"config":{"region":"eu-west-1","retry":{"max_attempts":2}}})";
  {
    ScopedEnv ec2("AWS_ENDPOINT_URL_EC2", Url().c_str());
    ScopedEnv all("AWS_ENDPOINT_URL", "http://127.0.0.1:9");  // EC2's own variable wins
    Driver d(no_endpoint);
    OpResult r = d.Check();
    ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
    EXPECT_EQ(r.Doc()->getValue<std::string>("endpoint"), Url());
    EXPECT_EQ(r.Doc()->getValue<std::string>("credentials_from"),
              "$AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY");
    EXPECT_TRUE(Contains(r.Doc()->getValue<std::string>("account"), "region eu-west-1"));
  }
  {
    ScopedEnv all("AWS_ENDPOINT_URL", Url().c_str());
    Driver d(no_endpoint);
    EXPECT_EQ(d.Check().status, GPUPROV_STATUS_OK);
  }
  // No region anywhere: INVALID_INPUT naming where to set one, and nothing is called.
  emulator_->ClearRequests("aws");
  Driver none(R"({"endpoint":")" + Url() + R"("})");
  OpResult r = none.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  EXPECT_TRUE(Contains(r.error, "no AWS region")) << r.error;
  EXPECT_TRUE(Contains(r.error, "AWS_REGION")) << r.error;
  EXPECT_TRUE(emulator_->Requests("aws").empty());
}

TEST_F(AwsEmulatorTest, LifecycleCreateRunningListOpenPortsDelete) {
  Driver d(Config());
  OpResult c = d.Create(CreateRequest("aws-life"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  Object::Ptr vm = c.Vm();
  EXPECT_FALSE(c.Doc()->getValue<bool>("existing"));
  const std::string id = vm->getValue<std::string>("id");
  EXPECT_EQ(id.rfind("us-east-1/i-", 0), 0u) << id;
  EXPECT_EQ(vm->getValue<std::string>("state"), "pending");
  EXPECT_EQ(vm->getValue<std::string>("instance_type"), "g6.xlarge");
  EXPECT_EQ(vm->getValue<std::string>("gpus"), "L4:1");
  EXPECT_EQ(vm->getValue<std::string>("ssh_user"), "ubuntu");
  EXPECT_EQ(Count("instances"), 1);
  EXPECT_EQ(Count("firewalls"), 1);
  EXPECT_EQ(Count("ssh_keys"), 1);

  vm = WaitNotPending(d, id, "aws-life");
  ASSERT_TRUE(vm);
  EXPECT_EQ(vm->getValue<std::string>("state"), "running");
  EXPECT_EQ(vm->getValue<std::string>("public_ip").rfind("127.91.", 0), 0u);
  EXPECT_EQ(vm->getObject("tags")->getValue<std::string>("gpuprov"), "1");
  EXPECT_EQ(vm->getObject("tags")->getValue<std::string>("team"), "ml");

  // What EC2 holds: tags on the instance, the key pair and the group; SSH open; the image
  // resolved from the DLAMI parameter; the user data within the limit.
  auto ec2 = Client();
  const std::string instance_id = id.substr(id.find('/') + 1);
  XmlNode inst = ec2->Call("us-east-1", "DescribeInstances", {{"InstanceId.1", instance_id}});
  const XmlNode* item = inst.Items("reservationSet")[0]->Items("instancesSet")[0];
  EXPECT_EQ(item->Text("keyName"), "gpuprov-aws-life");
  // Launched with a ClientToken, so a retried RunInstances returns this same instance.
  EXPECT_EQ(item->Text("clientToken").rfind("gpuprov-", 0), 0u) << item->Text("clientToken");
  EXPECT_LE(item->Text("clientToken").size(), 64u);
  EXPECT_EQ(item->Text("imageId").rfind("ami-", 0), 0u);
  EXPECT_EQ(item->Items("groupSet")[0]->Text("groupName"), "gpuprov-aws-life");
  XmlNode keys = ec2->Call("us-east-1", "DescribeKeyPairs",
                           {{"Filter.1.Name", "tag:gpuprov"}, {"Filter.1.Value.1", "1"}});
  ASSERT_EQ(keys.Items("keySet").size(), 1u);
  EXPECT_EQ(keys.Items("keySet")[0]->Text("keyName"), "gpuprov-aws-life");
  auto groups = [&] {
    return ec2->Call("us-east-1", "DescribeSecurityGroups",
                     {{"Filter.1.Name", "tag:gpuprov-name"}, {"Filter.1.Value.1", "aws-life"}});
  };
  auto open_ports = [&] {
    std::set<std::string> ports;
    XmlNode g = groups();
    for (const XmlNode* group : g.Items("securityGroupInfo")) {
      for (const XmlNode* p : group->Items("ipPermissions")) ports.insert(p->Text("fromPort"));
    }
    return ports;
  };
  EXPECT_EQ(open_ports(), (std::set<std::string>{"22"}));

  OpResult list = d.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list;
  ASSERT_EQ(list.Doc()->getArray("vms")->size(), 1u) << list.json;

  // Idempotent by name.
  OpResult again = d.Create(CreateRequest("aws-life"));
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_TRUE(again.Doc()->getValue<bool>("existing"));
  EXPECT_EQ(again.Vm()->getValue<std::string>("id"), id);
  EXPECT_EQ(Count("instances"), 1);

  OpResult op = d.OpenPorts(R"({"id":")" + id + R"(","ports":[6443,80,443,22]})");
  ASSERT_EQ(op.status, GPUPROV_STATUS_OK) << op;
  EXPECT_EQ(open_ports(), (std::set<std::string>{"22", "80", "443", "6443"}));
  op = d.OpenPorts(R"({"id":")" + id + R"(","ports":[6443]})");  // already open: no error
  ASSERT_EQ(op.status, GPUPROV_STATUS_OK) << op;

  OpResult del = d.Delete(R"({"id":")" + id + R"(","name":"aws-life"})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del;
  EXPECT_TRUE(del.Doc()->getValue<bool>("deleted"));
  ExpectNothingLeft();
  // Gone: get by name is NOT_FOUND, a second delete is deleted=false.
  EXPECT_EQ(d.Get(R"({"name":"aws-life"})").status, GPUPROV_STATUS_NOT_FOUND);
  OpResult del2 = d.Delete(R"({"id":")" + id + R"(","name":"aws-life"})");
  ASSERT_EQ(del2.status, GPUPROV_STATUS_OK) << del2;
  EXPECT_FALSE(del2.Doc()->getValue<bool>("deleted"));
}

// Create of an existing instance widens nothing; open_ports adds only the missing rules,
// keeps the user's own, and the instance is reachable on exactly what the group allows.
// A cluster (ABI 1.5): every node is launched into the group gpuprov-<cluster>-peers besides its
// own, whose ingress rules on the peer ports reference the group itself, so the nodes reach each
// other on their private addresses and nothing opens to the internet.
TEST_F(AwsEmulatorTest, AClusterSharesASelfReferencingGroupThatGoesWithItsLastNode) {
  Driver d(Config());
  const std::string cluster =
      R"(,"cluster":{"name":"train","role":"%s","peer_ports":[{"port":6443,"protocol":"tcp"},)"
      R"({"port":10250,"protocol":"tcp"},{"port":51820,"protocol":"udp"}]})";
  auto with_role = [&](const std::string& role) {
    std::string c = cluster;
    c.replace(c.find("%s"), 2, role);
    return c;
  };
  OpResult server = d.Create(CreateRequest("train", with_role("server")));
  ASSERT_EQ(server.status, GPUPROV_STATUS_OK) << server << "\n" << d.host().All();
  OpResult agent = d.Create(CreateRequest("train-agent-1", with_role("agent")));
  ASSERT_EQ(agent.status, GPUPROV_STATUS_OK) << agent;
  EXPECT_EQ(Count("firewalls"), 3);  // each node's own and the cluster's
  EXPECT_EQ(agent.Vm()->getValue<std::string>("cluster"), "train");
  EXPECT_EQ(agent.Vm()->getValue<std::string>("role"), "agent");
  EXPECT_FALSE(agent.Vm()->getValue<std::string>("private_ip").empty()) << agent.json;

  // The group's rules name the group itself on exactly the peer ports.
  auto ec2 = Client();
  XmlNode groups = ec2->Call("us-east-1", "DescribeSecurityGroups",
                             {{"Filter.1.Name", "group-name"},
                              {"Filter.1.Value.1", "gpuprov-train-peers"}});
  auto items = groups.Items("securityGroupInfo");
  ASSERT_EQ(items.size(), 1u);
  const std::string gid = items.front()->Text("groupId");
  std::vector<std::string> rules;
  for (const XmlNode* perm : items.front()->Items("ipPermissions")) {
    ASSERT_EQ(perm->Items("groups").size(), 1u);
    EXPECT_EQ(perm->Items("groups").front()->Text("groupId"), gid);
    EXPECT_TRUE(perm->Items("ipRanges").empty());
    rules.push_back(perm->Text("ipProtocol") + "/" + perm->Text("fromPort"));
  }
  std::sort(rules.begin(), rules.end());
  EXPECT_EQ(rules, (std::vector<std::string>{"tcp/10250", "tcp/6443", "udp/51820"}));

  // Both instances are in it.
  XmlNode members = ec2->Call("us-east-1", "DescribeInstances",
                              {{"Filter.1.Name", "instance.group-id"}, {"Filter.1.Value.1", gid}});
  size_t n = 0;
  for (const XmlNode* r : members.Items("reservationSet")) n += r->Items("instancesSet").size();
  EXPECT_EQ(n, 2u);

  // open_peer_ports: the group already covers every member; idempotent.
  OpResult opened = d.OpenPeerPorts(
      R"({"cluster":"train","peer_ports":[{"port":6443,"protocol":"tcp"},)"
      R"({"port":10250,"protocol":"tcp"},{"port":51820,"protocol":"udp"}],"peers":[{"id":")" +
      agent.Vm()->getValue<std::string>("id") + R"(","name":"train-agent-1"}]})");
  ASSERT_EQ(opened.status, GPUPROV_STATUS_OK) << opened;
  EXPECT_EQ(opened.json, "{}");

  OpResult listed = d.ListResources();
  ASSERT_EQ(listed.status, GPUPROV_STATUS_OK) << listed;
  EXPECT_TRUE(Contains(listed.json, R"("kind":"cluster_firewall")")) << listed.json;
  // Each instance and the group name the cluster (gc knows an agent whose server is gone).
  EXPECT_TRUE(Contains(listed.json, R"("cluster":"train","role":"server")")) << listed.json;
  EXPECT_TRUE(Contains(listed.json, R"("cluster":"train","role":"agent")")) << listed.json;
  EXPECT_TRUE(Contains(listed.json, R"("name":"gpuprov-train-peers")")) << listed.json;

  ASSERT_EQ(d.Delete(R"({"id":")" + server.Vm()->getValue<std::string>("id") +
                     R"(","name":"train"})").status,
            GPUPROV_STATUS_OK);
  EXPECT_EQ(Count("firewalls"), 2);  // the agent's own and the cluster's
  ASSERT_EQ(d.Delete(R"({"id":")" + agent.Vm()->getValue<std::string>("id") +
                     R"(","name":"train-agent-1"})").status,
            GPUPROV_STATUS_OK);
  EXPECT_EQ(Count("firewalls"), 0);
}

TEST_F(AwsEmulatorTest, PortsOfAnExistingInstanceOpenOnlyThroughOpenPorts) {
  Driver d(Config());
  OpResult c = d.Create(CreateRequest("aws-ports"));  // open_ports [22]
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  const std::string id = c.Vm()->getValue<std::string>("id");
  EXPECT_EQ(emulator_->ReachablePorts("aws", "aws-ports"), "22");

  // The same name with the k8s ports: returned as it is.
  const std::string k8s = R"(,"open_ports":[22,6443,80,443])";
  std::string again_req = CreateRequest("aws-ports");
  again_req.replace(again_req.find(R"(,"open_ports":[22])"), std::string(R"(,"open_ports":[22])").size(), k8s);
  OpResult again = d.Create(again_req);
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_TRUE(again.Doc()->getValue<bool>("existing"));
  Object::Ptr ports = again.Vm()->getObject("ports");
  EXPECT_TRUE(ports->has("22"));
  EXPECT_FALSE(ports->has("6443")) << Stringify(ports);
  EXPECT_EQ(emulator_->ReachablePorts("aws", "aws-ports"), "22");

  // A rule of the user's: 8080 from a private range (not this machine).
  auto ec2 = Client();
  XmlNode g = ec2->Call("us-east-1", "DescribeSecurityGroups",
                        {{"Filter.1.Name", "group-name"}, {"Filter.1.Value.1", "gpuprov-aws-ports"}});
  const std::string group_id = g.Items("securityGroupInfo")[0]->Text("groupId");
  ec2->Call("us-east-1", "AuthorizeSecurityGroupIngress",
            {{"GroupId", group_id},
             {"IpPermissions.1.IpProtocol", "tcp"},
             {"IpPermissions.1.FromPort", "8080"},
             {"IpPermissions.1.ToPort", "8080"},
             {"IpPermissions.1.IpRanges.1.CidrIp", "10.0.0.0/8"}});

  OpResult op = d.OpenPorts(R"({"id":")" + id + R"(","ports":[22,6443,80,443]})");
  ASSERT_EQ(op.status, GPUPROV_STATUS_OK) << op;
  EXPECT_EQ(emulator_->ReachablePorts("aws", "aws-ports"), "22,80,443,6443");
  op = d.OpenPorts(R"({"id":")" + id + R"(","ports":[22,6443,80,443]})");  // a repeat
  ASSERT_EQ(op.status, GPUPROV_STATUS_OK) << op;
  XmlNode g2 = ec2->Call("us-east-1", "DescribeSecurityGroups", {{"GroupId.1", group_id}});
  std::set<std::string> from;
  for (const XmlNode* p : g2.Items("securityGroupInfo")[0]->Items("ipPermissions")) {
    from.insert(p->Text("fromPort"));
  }
  EXPECT_EQ(from, (std::set<std::string>{"22", "80", "443", "6443", "8080"}));

  // The user removes 6443 again: no longer reachable.
  ec2->Call("us-east-1", "RevokeSecurityGroupIngress",
            {{"GroupId", group_id},
             {"IpPermissions.1.IpProtocol", "tcp"},
             {"IpPermissions.1.FromPort", "6443"},
             {"IpPermissions.1.ToPort", "6443"},
             {"IpPermissions.1.IpRanges.1.CidrIp", "0.0.0.0/0"}});
  EXPECT_EQ(emulator_->ReachablePorts("aws", "aws-ports"), "22,80,443");
  // 6443 keeps its ::/0 range only: not open to IPv4, so not reported open, and open_ports
  // adds 0.0.0.0/0 (EC2 refuses a call that repeats ::/0 as a whole: InvalidPermission.Duplicate).
  OpResult existing = d.Create(again_req);
  ASSERT_EQ(existing.status, GPUPROV_STATUS_OK) << existing;
  EXPECT_FALSE(existing.Vm()->getObject("ports")->has("6443")) << existing.json;
  op = d.OpenPorts(R"({"id":")" + id + R"(","ports":[6443]})");
  ASSERT_EQ(op.status, GPUPROV_STATUS_OK) << op;
  EXPECT_EQ(emulator_->ReachablePorts("aws", "aws-ports"), "22,80,443,6443");
  ASSERT_EQ(d.Delete(R"({"name":"aws-ports"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(AwsEmulatorTest, OversizeUserDataIsRefusedNamingTheLimit) {
  Driver d(Config());
  // The driver sends user data gzipped (check says user_data_gzip): text that does not compress
  // under 16 KB is refused before anything is made.
  std::mt19937 random(7);
  std::string big;
  for (int i = 0; i < 30000; ++i) big += static_cast<char>('!' + random() % 90);
  for (char& c : big) c = (c == '"' || c == '\\') ? 'q' : c;  // JSON string content
  OpResult r = d.Create(CreateRequest("aws-big", "", big));
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  EXPECT_TRUE(Contains(r.error, "16384")) << r.error;
  EXPECT_TRUE(Contains(r.error, "gzipped")) << r.error;
  ExpectNothingLeft();
  // A script far above 16 KB that compresses under it is fine (EC2 counts the bytes sent).
  std::string max(64 * 1024, 'y');
  OpResult ok = d.Create(CreateRequest("aws-max", "", max));
  ASSERT_EQ(ok.status, GPUPROV_STATUS_OK) << ok;
  ASSERT_EQ(d.Delete(R"({"id":")" + ok.Vm()->getValue<std::string>("id") + R"(","name":"aws-max"})")
                .status,
            GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(AwsEmulatorTest, CapacityIsReportedNotRetriedAndLeavesNothing) {
  Fault(R"({"cloud":"aws","fault":"capacity","times":1})");
  Driver d(Config());
  OpResult r = d.Create(CreateRequest("aws-cap"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_CAPACITY) << r;
  EXPECT_TRUE(Contains(r.error, "InsufficientInstanceCapacity")) << r.error;
  EXPECT_TRUE(Contains(r.error, "another region")) << r.error;
  ExpectNothingLeft();
  // Exactly one RunInstances answered 500: no blind retry.
  Array::Ptr reqs = Control("GET", "/requests?cloud=aws").Doc()->getArray("requests");
  int errors = 0;
  for (size_t i = 0; i < reqs->size(); ++i)
    errors += reqs->getObject(i)->getValue<int>("status") == 500;
  EXPECT_EQ(errors, 1);
}

TEST_F(AwsEmulatorTest, QuotaIsReportedAsQuota) {
  Fault(R"({"cloud":"aws","fault":"quota","times":1})");
  Driver d(Config());
  OpResult r = d.Create(CreateRequest("aws-quota"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_QUOTA) << r;
  EXPECT_TRUE(Contains(r.error, "VcpuLimitExceeded")) << r.error;
  EXPECT_TRUE(Contains(r.error, "Service Quotas")) << r.error;
  ExpectNothingLeft();
}

TEST_F(AwsEmulatorTest, ThrottlingIsRetriedWithBackoffAndJitter) {
  Fault(R"({"cloud":"aws","fault":"throttle","times":3})");
  Control("DELETE", "/requests?cloud=aws");
  Driver d(Config());
  OpResult r = d.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  Array::Ptr reqs = Control("GET", "/requests?cloud=aws").Doc()->getArray("requests");
  ASSERT_EQ(reqs->size(), 4u);
  for (unsigned i = 0; i < 3; ++i) EXPECT_EQ(reqs->getObject(i)->getValue<int>("status"), 503);
  EXPECT_EQ(reqs->getObject(3)->getValue<int>("status"), 200);
  const std::string logs = d.host().All();
  EXPECT_TRUE(Contains(logs, "RequestLimitExceeded; retrying in")) << logs;
  EXPECT_TRUE(Contains(logs, "(attempt 4 of 5)")) << logs;

  // Throttled for good: TRANSIENT after max_attempts, naming the code.
  Fault(R"({"cloud":"aws","fault":"throttle","times":-1})");
  OpResult t = d.Check();
  EXPECT_EQ(t.status, GPUPROV_STATUS_TRANSIENT) << t;
  EXPECT_TRUE(Contains(t.error, "RequestLimitExceeded")) << t.error;
  EXPECT_TRUE(Contains(t.error, "5 attempt(s)")) << t.error;
  Control("DELETE", "/faults?cloud=aws");
}

TEST_F(AwsEmulatorTest, ServerErrorsAreRetriedAndOneInstanceResults) {
  Fault(R"({"cloud":"aws","fault":"server_error","times":3,"status":503})");
  Driver d(Config());
  OpResult c = d.Create(CreateRequest("aws-5xx"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_EQ(Count("instances"), 1);
  ASSERT_EQ(d.Delete(R"({"name":"aws-5xx"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(AwsEmulatorTest, WrongSecretIsAnAuthFailureWithoutTheSecret) {
  ScopedEnv wrong("AWS_SECRET_ACCESS_KEY", "not-the-secret");
  Driver d(Config());
  OpResult r = d.Create(CreateRequest("aws-auth"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "AuthFailure")) << r.error;
  EXPECT_TRUE(Contains(r.error, "AWS_ACCESS_KEY_ID")) << r.error;
  EXPECT_FALSE(Contains(r.error, "not-the-secret"));
  EXPECT_FALSE(Contains(d.host().All(), "not-the-secret"));
  ExpectNothingLeft();
}

// Each refusal ends with the hint of its status and code, naming the region and, for AUTH,
// where the keys came from (the masked key id, never the secret).
TEST_F(AwsEmulatorTest, RefusalsEndWithTheHintOfTheirStatus) {
  const auto ends_with = [](const std::string& text, const std::string& end) {
    return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
  };
  Fault(R"({"cloud":"aws","fault":"capacity","times":1})");
  Driver d(Config());
  OpResult r = d.Create(CreateRequest("aws-hint"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_CAPACITY) << r;
  EXPECT_TRUE(ends_with(r.error,
                        "). AWS has no capacity for this instance type in us-east-1 right now: "
                        "retry later, or choose another region (--region) or GPU type"))
      << r.error;

  Fault(R"({"cloud":"aws","fault":"quota","times":1})");
  r = d.Create(CreateRequest("aws-hint"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_QUOTA) << r;
  EXPECT_TRUE(ends_with(r.error,
                        "). The account's EC2 quota does not allow it: request a higher limit in "
                        "the Service Quotas console (EC2 \"Running On-Demand G and VT instances\" "
                        "or \"Running On-Demand P instances\", counted in vCPUs) for us-east-1"))
      << r.error;

  Fault(R"({"cloud":"aws","fault":"throttle","times":5})");  // Config's max_attempts
  r = d.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_TRANSIENT) << r;
  EXPECT_TRUE(Contains(r.error, ": RequestLimitExceeded: ")) << r.error;
  EXPECT_TRUE(Contains(r.error, " (still failing after 5 attempt(s) over ")) << r.error;
  EXPECT_TRUE(ends_with(r.error, " s). EC2 kept failing; retry later")) << r.error;

  ScopedEnv wrong("AWS_SECRET_ACCESS_KEY", "not-the-secret");
  Driver refused(Config());
  r = refused.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "AuthFailure: ")) << r.error;
  EXPECT_TRUE(Contains(r.error,
                       "). AWS refused the credentials from $AWS_ACCESS_KEY_ID/"
                       "$AWS_SECRET_ACCESS_KEY (access key AKIA...0001): check them (`aws sts "
                       "get-caller-identity`)"))
      << r.error;
  EXPECT_FALSE(Contains(r.error, "not-the-secret"));
}

TEST_F(AwsEmulatorTest, NotFoundRightAfterLaunchIsTolerated) {
  ASSERT_EQ(Control("POST", "/settings", R"({"cloud":"aws","describe_not_found":3})").status, 200);
  Driver d(Config());
  OpResult c = d.Create(CreateRequest("aws-ec"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  const std::string id = c.Vm()->getValue<std::string>("id");
  OpResult g = d.Get(R"({"id":")" + id + R"(","name":"aws-ec"})");
  ASSERT_EQ(g.status, GPUPROV_STATUS_OK) << g;
  EXPECT_EQ(g.Vm()->getValue<std::string>("state"), "pending");
  EXPECT_TRUE(Contains(d.host().All(), "not visible yet")) << d.host().All();
  Object::Ptr vm = WaitNotPending(d, id, "aws-ec");
  ASSERT_TRUE(vm);
  EXPECT_EQ(vm->getValue<std::string>("state"), "running");
  ASSERT_EQ(Control("POST", "/settings", R"({"cloud":"aws","describe_not_found":0})").status, 200);
  ASSERT_EQ(d.Delete(R"({"id":")" + id + R"("})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

// Spot (docs/driver-protocol.md "Spot VMs", REFERENCE.md §3.7): a one-time Spot Instance with
// terminate on interruption; EC2 taking it back is "preempted" with its state reason, in get
// and list, until a live instance has the name; delete cleans up.
TEST_F(AwsEmulatorTest, SpotIsLaunchedOneTimeAndAPreemptionIsReportedWithEc2sReason) {
  Driver d(Config());
  OpResult offers = d.Offers(R"({"gpu":{"type":"L4","count":1},"region":""})");
  ASSERT_EQ(offers.status, GPUPROV_STATUS_OK) << offers;
  Object::Ptr offer = offers.Doc()->getArray("offers")->getObject(0);
  ASSERT_TRUE(offer->has("spot_price_per_hour")) << offers;
  EXPECT_GT(offer->getValue<double>("spot_price_per_hour"), 0);
  EXPECT_LT(offer->getValue<double>("spot_price_per_hour"),
            offer->getValue<double>("price_per_hour"));

  Control("DELETE", "/requests?cloud=aws");
  OpResult c = d.Create(CreateRequest("aws-spot", R"(,"spot":true)"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_TRUE(c.Vm()->getValue<bool>("spot"));
  const std::string id = c.Vm()->getValue<std::string>("id");
  Object::Ptr vm = WaitNotPending(d, id, "aws-spot");
  ASSERT_TRUE(vm);
  EXPECT_EQ(vm->getValue<std::string>("state"), "running");

  ASSERT_EQ(Control("POST", "/preempt", R"({"cloud":"aws","name":"aws-spot"})").status, 200);
  vm = drivers::testing::PollVm(
      d, R"({"id":")" + id + R"(","name":"aws-spot"})",
      [](const Object::Ptr& v) { return v->getValue<std::string>("state") != "running"; },
      std::chrono::seconds(15), milliseconds(100));
  ASSERT_TRUE(vm);
  EXPECT_EQ(vm->getValue<std::string>("state"), "preempted");
  EXPECT_EQ(vm->getValue<std::string>("message"),
            "Server.SpotInstanceTermination: Spot instance termination");
  OpResult list = d.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK) << list;
  Array::Ptr vms = list.Doc()->getArray("vms");
  ASSERT_EQ(vms->size(), 1u) << list;
  EXPECT_EQ(vms->getObject(0)->getValue<std::string>("state"), "preempted");

  // The replacement: a live instance of the name hides the preempted one from list.
  OpResult again = d.Create(CreateRequest("aws-spot", R"(,"spot":true)"));
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_FALSE(again.Doc()->getValue<bool>("existing"));
  const std::string new_id = again.Vm()->getValue<std::string>("id");
  EXPECT_NE(new_id, id);
  list = d.List();
  ASSERT_EQ(list.Doc()->getArray("vms")->size(), 1u) << list;
  EXPECT_EQ(list.Doc()->getArray("vms")->getObject(0)->getValue<std::string>("id"), new_id);

  ASSERT_EQ(d.Delete(R"({"id":")" + new_id + R"(","name":"aws-spot"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(AwsEmulatorTest, InstanceVanishingDuringBootEndsTerminatedAndDeleteCleansUp) {
  Fault(R"({"cloud":"aws","fault":"vanish_during_boot"})");
  Driver d(Config());
  OpResult c = d.Create(CreateRequest("aws-gone"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  const std::string id = c.Vm()->getValue<std::string>("id");
  Object::Ptr vm = WaitNotPending(d, id, "aws-gone");
  ASSERT_TRUE(vm);
  EXPECT_EQ(vm->getValue<std::string>("state"), "terminated");
  EXPECT_TRUE(Contains(vm->getValue<std::string>("message"), "Server.InternalError"))
      << vm->getValue<std::string>("message");
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("firewalls"), 1);  // until delete
  OpResult del = d.Delete(R"({"id":")" + id + R"(","name":"aws-gone"})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del;
  EXPECT_FALSE(del.Doc()->getValue<bool>("deleted"));
  ExpectNothingLeft();
}

TEST_F(AwsEmulatorTest, CapacityFlipAfterLaunchIsNamedInTheMessage) {
  Fault(R"({"cloud":"aws","fault":"error_during_boot"})");
  Driver d(Config());
  OpResult c = d.Create(CreateRequest("aws-flip"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  Object::Ptr vm = WaitNotPending(d, c.Vm()->getValue<std::string>("id"), "aws-flip");
  ASSERT_TRUE(vm);
  EXPECT_EQ(vm->getValue<std::string>("state"), "terminated");
  EXPECT_TRUE(Contains(vm->getValue<std::string>("message"), "no capacity"))
      << vm->getValue<std::string>("message");
  ASSERT_EQ(d.Delete(R"({"name":"aws-flip"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(AwsEmulatorTest, ARunAfterAKilledOneFindsTheVmByName) {
  std::string id;
  {
    Driver first(Config());
    OpResult c = first.Create(CreateRequest("aws-rerun"));
    ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
    id = c.Vm()->getValue<std::string>("id");
  }  // the handle is gone, as with a killed gpuprov
  Driver second(Config());
  OpResult again = second.Create(CreateRequest("aws-rerun"));
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again;
  EXPECT_TRUE(again.Doc()->getValue<bool>("existing"));
  EXPECT_EQ(again.Vm()->getValue<std::string>("id"), id);
  EXPECT_EQ(Count("instances"), 1);
  EXPECT_EQ(Count("firewalls"), 1);
  EXPECT_EQ(Count("ssh_keys"), 1);
  ASSERT_EQ(second.Delete(R"({"name":"aws-rerun"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(AwsEmulatorTest, LeftoverKeyAndGroupOfAnInterruptedRunAreReused) {
  // An earlier run made the group and key pair, then died before RunInstances.
  auto ec2 = Client();
  ec2->Call("us-east-1", "CreateSecurityGroup",
            {{"GroupName", "gpuprov-aws-half"}, {"GroupDescription", "left over"}});
  ec2->Call("us-east-1", "ImportKeyPair",
            {{"KeyName", "gpuprov-aws-half"},
             {"PublicKeyMaterial",
              "c3NoLWVkMjU1MTkgQUFBQUMzTnphQzFsWkRJMU5URTVBQUFBSUdMTk9TcElhem44Z09UTU9uVUVxclhnRi91"
              "UmZURWZBUm5YcWtkaHVhT2ogb3RoZXJAZ3B1cHJvdg=="}});
  Driver d(Config());
  OpResult c = d.Create(CreateRequest("aws-half"));
  ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
  EXPECT_EQ(Count("firewalls"), 1);
  EXPECT_EQ(Count("ssh_keys"), 1);
  XmlNode keys = ec2->Call("us-east-1", "DescribeKeyPairs", {{"KeyName.1", "gpuprov-aws-half"}});
  // The key pair now carries this request's key (ED25519 fingerprint = base64 SHA-256).
  EXPECT_EQ(keys.Items("keySet")[0]->Text("keyFingerprint"),
            "SsJTF2BVLve2231Vrr3kH3v6aAbvXcq+PNT5h8add2E=");
  ASSERT_EQ(d.Delete(R"({"name":"aws-half"})").status, GPUPROV_STATUS_OK);
  ExpectNothingLeft();
}

TEST_F(AwsEmulatorTest, ASameNamedInstanceGpuprovDidNotMakeIsRefused) {
  auto ec2 = Client();
  XmlNode run = ec2->Call("us-east-1", "RunInstances",
                          {{"ImageId",
                            "resolve:ssm:/aws/service/canonical/ubuntu/server/22.04/stable/current/"
                            "amd64/hvm/ebs-gp2/ami-id"},
                           {"InstanceType", "t3.micro"},
                           {"MinCount", "1"},
                           {"MaxCount", "1"},
                           {"TagSpecification.1.ResourceType", "instance"},
                           {"TagSpecification.1.Tag.1.Key", "Name"},
                           {"TagSpecification.1.Tag.1.Value", "aws-foreign"}});
  Driver d(Config());
  OpResult r = d.Create(CreateRequest("aws-foreign"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  EXPECT_TRUE(Contains(r.error, "did not create")) << r.error;
  EXPECT_EQ(Count("firewalls"), 0);
  EXPECT_EQ(Count("ssh_keys"), 0);
  // list shows only gpuprov's instances.
  OpResult list = d.List();
  ASSERT_EQ(list.status, GPUPROV_STATUS_OK);
  EXPECT_EQ(list.Doc()->getArray("vms")->size(), 0u);
  ec2->Call("us-east-1", "TerminateInstances",
            {{"InstanceId.1", run.Items("instancesSet")[0]->Text("instanceId")}});
}

TEST_F(AwsEmulatorTest, ClientTokenMakesARetriedRunInstancesIdempotent) {
  auto ec2 = Client();
  Params params = {{"ImageId",
                    "resolve:ssm:/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/"
                    "hvm/ebs-gp2/ami-id"},
                   {"InstanceType", "t3.micro"},
                   {"MinCount", "1"},
                   {"MaxCount", "1"},
                   {"ClientToken", "gpuprov-test-token-1"}};
  XmlNode a = ec2->Call("us-east-1", "RunInstances", params);
  XmlNode b = ec2->Call("us-east-1", "RunInstances", params);
  EXPECT_EQ(a.Items("instancesSet")[0]->Text("instanceId"),
            b.Items("instancesSet")[0]->Text("instanceId"));
  EXPECT_EQ(Count("instances"), 1);
  params[1].second = "t3.medium";
  try {
    ec2->Call("us-east-1", "RunInstances", params);
    ADD_FAILURE() << "a reused token with other parameters must fail";
  } catch (const Ec2Error& e) {
    EXPECT_EQ(e.code(), "IdempotentParameterMismatch");
  }
}

TEST_F(AwsEmulatorTest, ProfileCredentialsFromTheSharedFile) {
  ScopedEnv no_id("AWS_ACCESS_KEY_ID", nullptr);
  ScopedEnv no_secret("AWS_SECRET_ACCESS_KEY", nullptr);
  ScopedEnv profile("AWS_PROFILE", "gpu");
  std::filesystem::create_directories(home_->path() / ".aws");
  std::ofstream(home_->path() / ".aws/credentials")
      << "[gpu]\naws_access_key_id = " << kKeyId << "\naws_secret_access_key = " << kSecret << "\n";
  std::ofstream(home_->path() / ".aws/config") << "[profile gpu]\nregion = eu-west-1\n";
  Driver d(R"({"endpoint":")" + Url() + R"(","config":{}})");
  OpResult r = d.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_TRUE(Contains(r.Doc()->getValue<std::string>("account"), "region eu-west-1")) << r.json;
  EXPECT_TRUE(Contains(r.Doc()->getValue<std::string>("credentials_from"), "[gpu]")) << r.json;
}


// EC2 ImportKeyPair takes RSA and ED25519 keys only (EC2 API reference, ImportKeyPair): an
// ECDSA key is refused before any call, with the fix in the message.
TEST_F(AwsEmulatorTest, AnEcdsaKeyIsRefusedBeforeAnythingIsMade) {
  Driver d(Config());
  emulator_->ClearRequests("aws");
  std::string req = CreateRequest("aws-ecdsa");
  const std::string ecdsa =
      "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBJSFFK09bJK+3FAHX9m"
      "6XOBZgK4xxP5/04hEBQeSP1uZHwRo+KVxD5sW3U1LFwRi+Cip/+Ns7gD/Vd3pjFRGitU= t@x";
  req.replace(req.find(kPublicKey), std::string(kPublicKey).size(), ecdsa);
  OpResult c = d.Create(req);
  EXPECT_EQ(c.status, GPUPROV_STATUS_INVALID_INPUT) << c;
  EXPECT_TRUE(Contains(c.error, "ecdsa-sha2-nistp256")) << c.error;
  EXPECT_TRUE(Contains(c.error, "RSA and ED25519")) << c.error;
  EXPECT_TRUE(Contains(c.error, "ssh-keygen -t ed25519")) << c.error;
  EXPECT_TRUE(emulator_->Requests("aws").empty());
  ExpectNothingLeft();
}

// An account without a default VPC: one DescribeVpcs finds it out and the message names the
// settings, before a security group is made (not VPCIdNotSpecified from CreateSecurityGroup).
TEST_F(AwsEmulatorTest, NoDefaultVpcIsSaidPlainlyBeforeAnythingIsMade) {
  ASSERT_EQ(Control("POST", "/settings", R"({"cloud":"aws","default_vpc":false})").status, 200);
  Driver d(Config());
  OpResult c = d.Create(CreateRequest("aws-novpc"));
  EXPECT_EQ(c.status, GPUPROV_STATUS_INVALID_INPUT) << c;
  EXPECT_TRUE(Contains(c.error, "no default VPC in us-east-1")) << c.error;
  EXPECT_TRUE(Contains(c.error, "subnet_id")) << c.error;
  EXPECT_TRUE(Contains(c.error, "vpc_id")) << c.error;
  ExpectNothingLeft();
}

// subnet_id (or vpc_id alone): the group is made in that VPC and the instance launches into
// the subnet with a public address asked for on its interface (the subnet maps none itself).
TEST_F(AwsEmulatorTest, SubnetIdOrVpcIdLaunchIntoThatNetworkWithAPublicAddress) {
  ASSERT_EQ(Control("POST", "/settings", R"({"cloud":"aws","default_vpc":false})").status, 200);
  auto ec2 = Client();
  XmlNode subnets = ec2->Call("us-east-1", "DescribeSubnets", {});
  ASSERT_EQ(subnets.Items("subnetSet").size(), 1u);
  const std::string subnet = subnets.Items("subnetSet")[0]->Text("subnetId");
  const std::string vpc = subnets.Items("subnetSet")[0]->Text("vpcId");
  EXPECT_EQ(subnets.Items("subnetSet")[0]->Text("mapPublicIpOnLaunch"), "false");
  for (const std::string& setting : {R"("subnet_id":")" + subnet + "\"", R"("vpc_id":")" + vpc + "\""}) {
    SCOPED_TRACE(setting);
    std::string config = Config();
    config.replace(config.find(R"("region":"us-east-1")"), 20, R"("region":"us-east-1",)" + setting);
    Driver d(config);
    OpResult c = d.Create(CreateRequest("aws-subnet"));
    ASSERT_EQ(c.status, GPUPROV_STATUS_OK) << c;
    const std::string id = c.Vm()->getValue<std::string>("id");
    Object::Ptr vm = WaitNotPending(d, id, "aws-subnet");
    ASSERT_TRUE(vm);
    EXPECT_EQ(vm->getValue<std::string>("state"), "running");
    EXPECT_EQ(vm->getValue<std::string>("public_ip").rfind("127.91.", 0), 0u) << Stringify(vm);
    XmlNode inst = ec2->Call("us-east-1", "DescribeInstances",
                             {{"InstanceId.1", id.substr(id.find('/') + 1)}});
    const XmlNode* item = inst.Items("reservationSet")[0]->Items("instancesSet")[0];
    EXPECT_EQ(item->Text("subnetId"), subnet);
    EXPECT_EQ(item->Text("vpcId"), vpc);
    XmlNode g = ec2->Call("us-east-1", "DescribeSecurityGroups",
                          {{"Filter.1.Name", "group-name"}, {"Filter.1.Value.1", "gpuprov-aws-subnet"}});
    ASSERT_EQ(g.Items("securityGroupInfo").size(), 1u);
    EXPECT_EQ(g.Items("securityGroupInfo")[0]->Text("vpcId"), vpc);
    EXPECT_EQ(emulator_->ReachablePorts("aws", "aws-subnet"), "22");
    ASSERT_EQ(d.Delete(R"({"name":"aws-subnet"})").status, GPUPROV_STATUS_OK);
    ExpectNothingLeft();
  }
  // A subnet that is not there: the setting is named.
  std::string config = Config();
  config.replace(config.find(R"("region":"us-east-1")"), 20,
                 R"("region":"us-east-1","subnet_id":"subnet-0123456789abcdef0")");
  Driver bad(config);
  OpResult c = bad.Create(CreateRequest("aws-nosubnet"));
  EXPECT_EQ(c.status, GPUPROV_STATUS_INVALID_INPUT) << c;
  EXPECT_TRUE(Contains(c.error, "InvalidSubnetID.NotFound")) << c.error;
  EXPECT_TRUE(Contains(c.error, "subnet_id")) << c.error;
  ExpectNothingLeft();
}

// V100 (p3): the OSS-driver DLAMI does not drive Volta (DLAMI release notes list no P3), so
// there is no default image: refused before anything is made, and offered only with an image.
TEST_F(AwsEmulatorTest, VoltaHasNoDefaultImage) {
  Driver d(Config());
  std::string req = CreateRequest("aws-v100");
  req.replace(req.find(R"("type":"L4")"), 11, R"("type":"V100")");
  OpResult c = d.Create(req);
  EXPECT_EQ(c.status, GPUPROV_STATUS_INVALID_INPUT) << c;
  EXPECT_TRUE(Contains(c.error, "Volta")) << c.error;
  EXPECT_TRUE(Contains(c.error, "--image")) << c.error;
  ExpectNothingLeft();
  OpResult offers = d.Offers(R"({"gpu":{"type":"V100","count":1},"region":""})");
  ASSERT_EQ(offers.status, GPUPROV_STATUS_OK) << offers;
  EXPECT_EQ(offers.Doc()->getArray("offers")->size(), 0u) << offers.json;
  EXPECT_TRUE(Contains(d.host().All(), "no default image")) << d.host().All();
}

// An image EC2 does not have in the region is the request's fault (INVALID_INPUT naming
// --image), not NOT_FOUND; what the create made for it is removed.
TEST_F(AwsEmulatorTest, AnUnknownImageIsInvalidInputNotNotFound) {
  Driver d(Config());
  std::string req = CreateRequest("aws-noami");
  req.replace(req.find(R"("image":"")"), 10, R"("image":"ami-0123456789abcdef0")");
  OpResult c = d.Create(req);
  EXPECT_EQ(c.status, GPUPROV_STATUS_INVALID_INPUT) << c;
  EXPECT_TRUE(Contains(c.error, "InvalidAMIID.NotFound")) << c.error;
  EXPECT_TRUE(Contains(c.error, "--image")) << c.error;
  ExpectNothingLeft();
}

}  // namespace
}  // namespace gpuprov::aws
