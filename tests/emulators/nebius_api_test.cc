// SPDX-License-Identifier: Apache-2.0
//
// The Nebius emulator through a gRPC C++ client of the same protos (generated stubs), with the
// memory backend: the token exchange (JWT checks), Bearer authentication, every method of
// every service, operations that finish over time and are read on their own endpoint, the
// instance state machine, security rules -> reachable ports, idempotency keys, every fault
// knob, the census of the control API, and the binary's start-up line. NebiusDockerTest.* runs
// one instance on the docker backend: cloud-init user data in the test VM, SSH as ubuntu
// reachable through the security group's rules only.
#include <Poco/Base64Encoder.h>
#include <Poco/Crypto/RSADigestEngine.h>
#include <Poco/Crypto/RSAKey.h>
#include <Poco/Net/StreamSocket.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "docker_backend_fixture.h"
#include "emulator.h"
#include "emulator_test_util.h"
#include "google/rpc/status.pb.h"
#include "nebius/common/v1/error.pb.h"
#include "nebius/common/v1/operation_service.grpc.pb.h"
#include "nebius/compute/v1/disk_service.grpc.pb.h"
#include "nebius/compute/v1/instance_service.grpc.pb.h"
#include "nebius/compute/v1/platform_service.grpc.pb.h"
#include "nebius/iam/v1/token_exchange_service.grpc.pb.h"
#include "nebius/vpc/v1/security_group_service.grpc.pb.h"
#include "nebius/vpc/v1/security_rule_service.grpc.pb.h"
#include "nebius/vpc/v1/subnet_service.grpc.pb.h"

namespace gpuprov::emulator {
namespace {

namespace nc = ::nebius::common::v1;
namespace compute = ::nebius::compute::v1;
namespace vpc = ::nebius::vpc::v1;
namespace iam = ::nebius::iam::v1;
using testing::Call;
using testing::Reply;
using testing::WaitFor;
using namespace std::chrono_literals;
using Code = grpc::StatusCode;

constexpr const char* kToken = "nebius-test-token";
constexpr const char* kProject = "project-e00test";
constexpr const char* kAccount = "serviceaccount-e00tester";
constexpr const char* kKid = "publickey-e00tester";

std::string B64Url(const std::string& s) {
  std::ostringstream out;
  Poco::Base64Encoder enc(out, Poco::BASE64_URL_ENCODING | Poco::BASE64_NO_PADDING);
  enc.rdbuf()->setLineLength(0);
  enc << s;
  enc.close();
  return out.str();
}

// A JWT signed by key with the given header kid and claims.
std::string Jwt(Poco::Crypto::RSAKey& key, const std::string& kid, const std::string& claims) {
  const std::string signing =
      B64Url(R"({"alg":"RS256","typ":"JWT","kid":")" + kid + "\"}") + "." + B64Url(claims);
  Poco::Crypto::RSADigestEngine engine(key, "SHA256");
  engine.update(signing);
  const auto& sig = engine.signature();
  return signing + "." + B64Url(std::string(sig.begin(), sig.end()));
}

std::string Claims(const std::string& iss, int64_t exp_in) {
  const int64_t now = std::time(nullptr);
  return R"({"iss":")" + iss + R"(","sub":")" + iss + R"(","iat":)" + std::to_string(now) +
         R"(,"exp":)" + std::to_string(now + exp_in) + "}";
}

// The ServiceError in a failed call's grpc-status-details-bin.
nc::ServiceError DetailOf(const grpc::Status& st) {
  google::rpc::Status s;
  nc::ServiceError e;
  if (s.ParseFromString(st.error_details()) && s.details_size() > 0) s.details(0).UnpackTo(&e);
  return e;
}

nc::ServiceError DetailOf(const nc::Operation& op) {
  nc::ServiceError e;
  if (op.status().details_size() > 0) op.status().details(0).UnpackTo(&e);
  return e;
}

class NebiusApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EmulatorOptions o;
    o.backend = "memory";
    o.boot_seconds = 1.5;
    o.clouds = {"nebius"};
    o.tokens["nebius"] = {kToken};
    emu_ = std::make_unique<Emulator>(o);
    emu_->Start();
    address_ = emu_->BaseUrl("nebius");
    control_ = emu_->ControlUrl();
    Connect("");
  }
  void TearDown() override { emu_.reset(); }

  // Stubs over a channel whose :authority is `authority` ("" = the address).
  void Connect(const std::string& authority) {
    grpc::ChannelArguments args;
    if (!authority.empty()) args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, authority);
    channel_ = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
    instances_ = compute::InstanceService::NewStub(channel_);
    disks_ = compute::DiskService::NewStub(channel_);
    platforms_ = compute::PlatformService::NewStub(channel_);
    operations_ = nc::OperationService::NewStub(channel_);
    subnets_ = vpc::SubnetService::NewStub(channel_);
    groups_ = vpc::SecurityGroupService::NewStub(channel_);
    rules_ = vpc::SecurityRuleService::NewStub(channel_);
    tokens_ = iam::TokenExchangeService::NewStub(channel_);
  }

  // A call context with a deadline, the Bearer token (none when empty) and an idempotency key.
  std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = kToken,
                                           const std::string& key = "") {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + 10s);
    if (!token.empty()) c->AddMetadata("authorization", "Bearer " + token);
    if (!key.empty()) c->AddMetadata("x-idempotency-key", key);
    return c;
  }

  Reply Control(const std::string& method, const std::string& path, const std::string& body = "") {
    return Call(control_, method, path, body);
  }
  void Fault(const std::string& json) {
    Reply r = Control("POST", "/faults", json);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  void Settings(const std::string& json) {
    Reply r = Control("POST", "/settings", json);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  int64_t Count(const std::string& what) {
    return Control("GET", "/counts?cloud=nebius").Json()->getValue<int64_t>(what);
  }
  // The control API's row of instance id (empty object when absent).
  JsonObject Row(const std::string& id) {
    JsonArray list = GetArray(Control("GET", "/instances?cloud=nebius").Json(), "instances");
    for (size_t i = 0; list && i < list->size(); ++i) {
      JsonObject o = list->getObject(static_cast<unsigned>(i));
      if (GetString(o, "id").value_or("") == id) return o;
    }
    return NewObject();
  }

  nc::Operation GetOp(const std::string& id, grpc::Status* st = nullptr) {
    nc::GetOperationRequest req;
    req.set_id(id);
    nc::Operation op;
    grpc::Status s = operations_->Get(Ctx().get(), req, &op);
    if (st) *st = s;
    return op;
  }
  // Polls the operation until it has a status (at most 15 s).
  nc::Operation Wait(const nc::Operation& started) {
    nc::Operation op = started;
    WaitFor(
        [&] {
          op = GetOp(started.id());
          return op.has_status();
        },
        15s);
    return op;
  }

  compute::Instance GetInstance(const std::string& id, grpc::Status* st = nullptr) {
    compute::GetInstanceRequest req;
    req.set_id(id);
    compute::Instance out;
    grpc::Status s = instances_->Get(Ctx().get(), req, &out);
    if (st) *st = s;
    return out;
  }

  std::string SubnetId() {
    vpc::ListSubnetsRequest req;
    req.set_parent_id(kProject);
    vpc::ListSubnetsResponse resp;
    EXPECT_TRUE(subnets_->List(Ctx().get(), req, &resp).ok());
    return resp.items_size() ? resp.items(0).metadata().id() : "";
  }
  std::string NetworkId() {
    vpc::ListSubnetsRequest req;
    req.set_parent_id(kProject);
    vpc::ListSubnetsResponse resp;
    EXPECT_TRUE(subnets_->List(Ctx().get(), req, &resp).ok());
    return resp.items_size() ? resp.items(0).spec().network_id() : "";
  }

  // A security group with one ALLOW rule for ports from 0.0.0.0/0 (none: no rule).
  std::string MakeGroup(const std::string& name, const std::vector<int>& ports) {
    vpc::CreateSecurityGroupRequest req;
    req.mutable_metadata()->set_parent_id(kProject);
    req.mutable_metadata()->set_name(name);
    req.mutable_spec()->set_network_id(NetworkId());
    nc::Operation op;
    grpc::Status st = groups_->Create(Ctx().get(), req, &op);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(Wait(op).status().code(), 0);
    if (!ports.empty()) AddRule(op.resource_id(), ports);
    return op.resource_id();
  }
  std::string AddRule(const std::string& group, const std::vector<int>& ports,
                      vpc::RuleAccessAction access = vpc::ALLOW, int priority = 500,
                      const std::string& cidr = "0.0.0.0/0") {
    vpc::CreateSecurityRuleRequest req;
    req.mutable_metadata()->set_parent_id(group);
    req.mutable_metadata()->set_name("rule-" + std::to_string(ports.empty() ? 0 : ports[0]));
    auto* s = req.mutable_spec();
    s->set_access(access);
    s->set_protocol(vpc::TCP);
    s->set_priority(priority);
    s->set_type(vpc::STATEFUL);
    s->mutable_ingress()->add_source_cidrs(cidr);
    for (int p : ports) s->mutable_ingress()->add_destination_ports(p);
    nc::Operation op;
    grpc::Status st = rules_->Create(Ctx().get(), req, &op);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(Wait(op).status().code(), 0);
    return op.resource_id();
  }

  compute::CreateInstanceRequest InstanceRequest(const std::string& name,
                                                 const std::string& group = "",
                                                 bool public_ip = true) {
    compute::CreateInstanceRequest req;
    req.mutable_metadata()->set_parent_id(kProject);
    req.mutable_metadata()->set_name(name);
    (*req.mutable_metadata()->mutable_labels())["created-by"] = "gpuprov";
    auto* spec = req.mutable_spec();
    spec->mutable_resources()->set_platform("gpu-h100-sxm");
    spec->mutable_resources()->set_preset("1gpu-16vcpu-200gb");
    auto* disk = spec->mutable_boot_disk()->mutable_managed_disk();
    disk->set_name(name + "-boot");
    disk->mutable_spec()->set_size_gibibytes(100);
    disk->mutable_spec()->set_type(compute::DiskSpec::NETWORK_SSD);
    disk->mutable_spec()->mutable_source_image_family()->set_image_family("ubuntu24.04-cuda13.0");
    spec->mutable_boot_disk()->set_attach_mode(compute::AttachedDiskSpec::READ_WRITE);
    auto* nic = spec->add_network_interfaces();
    nic->set_name("eth0");
    nic->set_subnet_id(SubnetId());
    nic->mutable_ip_address();
    if (public_ip) nic->mutable_public_ip_address();
    if (!group.empty()) nic->add_security_groups()->set_id(group);
    spec->set_cloud_init_user_data("#cloud-config\nruncmd:\n  - [touch, /run/nebius-test]\n");
    return req;
  }

  grpc::Status Create(const compute::CreateInstanceRequest& req, nc::Operation* op,
                      const std::string& key = "") {
    return instances_->Create(Ctx(kToken, key).get(), req, op);
  }

  // Creates and waits for RUNNING; returns the instance id.
  std::string CreateRunning(const std::string& name, const std::string& group = "") {
    nc::Operation op;
    grpc::Status st = Create(InstanceRequest(name, group), &op);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(Wait(op).status().code(), 0) << Wait(op).status().message();
    return op.resource_id();
  }

  grpc::Status DeleteInstance(const std::string& id, nc::Operation* op) {
    compute::DeleteInstanceRequest req;
    req.set_id(id);
    return instances_->Delete(Ctx().get(), req, op);
  }

  std::unique_ptr<Emulator> emu_;
  std::string address_, control_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<compute::InstanceService::Stub> instances_;
  std::unique_ptr<compute::DiskService::Stub> disks_;
  std::unique_ptr<compute::PlatformService::Stub> platforms_;
  std::unique_ptr<nc::OperationService::Stub> operations_;
  std::unique_ptr<vpc::SubnetService::Stub> subnets_;
  std::unique_ptr<vpc::SecurityGroupService::Stub> groups_;
  std::unique_ptr<vpc::SecurityRuleService::Stub> rules_;
  std::unique_ptr<iam::TokenExchangeService::Stub> tokens_;
};

// --- authentication ---------------------------------------------------------------------

TEST_F(NebiusApiTest, EveryCallNeedsABearerToken) {
  compute::ListPlatformsRequest req;
  req.set_parent_id(kProject);
  compute::ListPlatformsResponse resp;
  EXPECT_EQ(platforms_->List(Ctx("").get(), req, &resp).error_code(), Code::UNAUTHENTICATED);
  EXPECT_EQ(platforms_->List(Ctx("wrong").get(), req, &resp).error_code(), Code::UNAUTHENTICATED);
  grpc::ClientContext basic;
  basic.AddMetadata("authorization", std::string("Basic ") + kToken);
  EXPECT_EQ(platforms_->List(&basic, req, &resp).error_code(), Code::UNAUTHENTICATED);
  EXPECT_TRUE(platforms_->List(Ctx().get(), req, &resp).ok());
  // The request log names the method, never the token.
  Reply log = Control("GET", "/requests?cloud=nebius");
  EXPECT_NE(log.body.find("/nebius.compute.v1.PlatformService/List"), std::string::npos);
  EXPECT_NE(log.body.find("401"), std::string::npos);
  EXPECT_EQ(log.body.find(kToken), std::string::npos);
}

class NebiusTokenTest : public NebiusApiTest {
 protected:
  void SetUp() override {
    NebiusApiTest::SetUp();
    std::ostringstream pub;
    key_.save(&pub);
    JsonObject sa = NewObject();
    sa->set("id", std::string(kAccount));
    sa->set("kid", std::string(kKid));
    sa->set("public_key_pem", pub.str());
    JsonObject body = NewObject();
    body->set("cloud", std::string("nebius"));
    body->set("service_account", sa);
    Settings(ToJson(body));
  }
  grpc::Status Exchange(
      const std::string& jwt, iam::CreateTokenResponse* resp,
      const std::string& grant = "urn:ietf:params:oauth:grant-type:token-exchange") {
    iam::ExchangeTokenRequest req;
    req.set_grant_type(grant);
    req.set_requested_token_type("urn:ietf:params:oauth:token-type:access_token");
    req.set_subject_token(jwt);
    req.set_subject_token_type("urn:ietf:params:oauth:token-type:jwt");
    return tokens_->Exchange(Ctx("").get(), req, resp);
  }
  bool Works(const std::string& token) {
    compute::ListInstancesRequest req;
    req.set_parent_id(kProject);
    compute::ListInstancesResponse resp;
    return instances_->List(Ctx(token).get(), req, &resp).ok();
  }
  static Poco::Crypto::RSAKey& Key() {
    static Poco::Crypto::RSAKey key(Poco::Crypto::RSAKey::KL_2048, Poco::Crypto::RSAKey::EXP_LARGE);
    return key;
  }
  static Poco::Crypto::RSAKey& OtherKey() {
    static Poco::Crypto::RSAKey key(Poco::Crypto::RSAKey::KL_2048, Poco::Crypto::RSAKey::EXP_LARGE);
    return key;
  }
  Poco::Crypto::RSAKey& key_ = Key();
};

TEST_F(NebiusTokenTest, ServiceAccountJwtIsExchangedForAnExpiringToken) {
  iam::CreateTokenResponse resp;
  grpc::Status st = Exchange(Jwt(key_, kKid, Claims(kAccount, 300)), &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.token_type(), "Bearer");
  EXPECT_EQ(resp.issued_token_type(), "urn:ietf:params:oauth:token-type:access_token");
  EXPECT_EQ(resp.expires_in(), 3600);
  EXPECT_TRUE(Works(resp.access_token()));
  // Operations carry the caller.
  nc::Operation op;
  ASSERT_TRUE(
      instances_->Create(Ctx(resp.access_token()).get(), InstanceRequest("by-sa"), &op).ok());
  EXPECT_EQ(op.created_by(), kAccount);

  // Expiry: a short lifetime, then the token is refused; expire_tokens ends every token.
  Settings(R"({"cloud":"nebius","token_lifetime_seconds":2})");
  iam::CreateTokenResponse brief;
  ASSERT_TRUE(Exchange(Jwt(key_, kKid, Claims(kAccount, 300)), &brief).ok());
  EXPECT_EQ(brief.expires_in(), 2);
  EXPECT_TRUE(Works(brief.access_token()));
  std::this_thread::sleep_for(2200ms);
  EXPECT_FALSE(Works(brief.access_token()));
  EXPECT_TRUE(Works(resp.access_token()));
  Settings(R"({"cloud":"nebius","expire_tokens":true})");
  EXPECT_FALSE(Works(resp.access_token()));
  EXPECT_TRUE(Works(kToken));  // a ready token (NEBIUS_IAM_TOKEN) is not an issued one
}

TEST_F(NebiusTokenTest, BadJwtsAreRefused) {
  iam::CreateTokenResponse resp;
  auto code = [&](const std::string& jwt) { return Exchange(jwt, &resp).error_code(); };
  EXPECT_EQ(code(Jwt(OtherKey(), kKid, Claims(kAccount, 300))), Code::UNAUTHENTICATED);  // forged
  EXPECT_EQ(code(Jwt(key_, "publickey-unknown", Claims(kAccount, 300))), Code::UNAUTHENTICATED);
  EXPECT_EQ(code(Jwt(key_, kKid, Claims("serviceaccount-other", 300))), Code::UNAUTHENTICATED);
  EXPECT_EQ(code(Jwt(key_, kKid, Claims(kAccount, -10))), Code::UNAUTHENTICATED);  // expired
  EXPECT_EQ(code(Jwt(key_, kKid, Claims(kAccount, 7200))), Code::UNAUTHENTICATED);  // too long
  EXPECT_EQ(code("not-a-jwt"), Code::UNAUTHENTICATED);
  std::string tampered = Jwt(key_, kKid, Claims(kAccount, 300));
  tampered[tampered.find('.') + 3] ^= 1;
  EXPECT_EQ(code(tampered), Code::UNAUTHENTICATED);
  grpc::Status st = Exchange(Jwt(key_, kKid, Claims(kAccount, 300)), &resp, "client_credentials");
  EXPECT_EQ(st.error_code(), Code::INVALID_ARGUMENT);
  ASSERT_EQ(DetailOf(st).bad_request().violations_size(), 1);
  EXPECT_EQ(DetailOf(st).bad_request().violations(0).field(), "grant_type");
}

TEST_F(NebiusApiTest, AuthFailureFaultRevokesForTimesCalls) {
  Fault(R"({"cloud":"nebius","fault":"auth_failure","times":2})");
  compute::ListPlatformsRequest req;
  req.set_parent_id(kProject);
  compute::ListPlatformsResponse resp;
  EXPECT_EQ(platforms_->List(Ctx().get(), req, &resp).error_code(), Code::UNAUTHENTICATED);
  EXPECT_EQ(platforms_->List(Ctx().get(), req, &resp).error_code(), Code::UNAUTHENTICATED);
  EXPECT_TRUE(platforms_->List(Ctx().get(), req, &resp).ok());
}

// --- catalogue, subnets, projects ----------------------------------------------------------

TEST_F(NebiusApiTest, PlatformsSubnetsAndProjects) {
  compute::ListPlatformsRequest req;
  req.set_parent_id(kProject);
  compute::ListPlatformsResponse resp;
  ASSERT_TRUE(platforms_->List(Ctx().get(), req, &resp).ok());
  bool h100 = false;
  for (const auto& p : resp.items()) {
    if (p.metadata().name() != "gpu-h100-sxm") continue;
    h100 = true;
    ASSERT_EQ(p.spec().presets_size(), 2);
    EXPECT_EQ(p.spec().presets(1).name(), "8gpu-128vcpu-1600gb");
    EXPECT_EQ(p.spec().presets(1).resources().gpu_count(), 8);
    EXPECT_EQ(p.spec().gpu_memory_gigabytes(), 80);
  }
  EXPECT_TRUE(h100);
  req.set_page_size(2);
  ASSERT_TRUE(platforms_->List(Ctx().get(), req, &resp).ok());
  EXPECT_EQ(resp.items_size(), 2);
  EXPECT_EQ(resp.next_page_token(), "2");
  nc::GetByNameRequest by_name;
  by_name.set_parent_id(kProject);
  by_name.set_name("gpu-l40s-d");
  compute::Platform p;
  ASSERT_TRUE(platforms_->GetByName(Ctx().get(), by_name, &p).ok());
  EXPECT_EQ(p.spec().presets(2).name(), "4gpu-128vcpu-768gb");
  by_name.set_name("gpu-a100");
  EXPECT_EQ(platforms_->GetByName(Ctx().get(), by_name, &p).error_code(), Code::NOT_FOUND);

  vpc::ListSubnetsRequest sreq;
  sreq.set_parent_id(kProject);
  vpc::ListSubnetsResponse sresp;
  ASSERT_TRUE(subnets_->List(Ctx().get(), sreq, &sresp).ok());
  ASSERT_EQ(sresp.items_size(), 1);
  EXPECT_EQ(sresp.items(0).metadata().name().rfind("default-subnet", 0), 0u);
  EXPECT_EQ(sresp.items(0).spec().network_id().rfind("vpcnetwork-", 0), 0u);
  vpc::GetSubnetRequest get;
  get.set_id(sresp.items(0).metadata().id());
  vpc::Subnet s;
  EXPECT_TRUE(subnets_->Get(Ctx().get(), get, &s).ok());

  // Another project is not this account's; settings add projects.
  sreq.set_parent_id("project-e00other");
  grpc::Status st = subnets_->List(Ctx().get(), sreq, &sresp);
  EXPECT_EQ(st.error_code(), Code::PERMISSION_DENIED);
  EXPECT_EQ(DetailOf(st).permission_denied().resource_id(), "project-e00other");
  Settings(R"({"cloud":"nebius","projects":["project-e00test","project-e00other"]})");
  EXPECT_TRUE(subnets_->List(Ctx().get(), sreq, &sresp).ok());
}

// --- security groups and rules -------------------------------------------------------------

TEST_F(NebiusApiTest, SecurityGroupsAndRules) {
  const std::string group = MakeGroup("gpuprov-sg", {});
  vpc::GetSecurityGroupRequest get;
  get.set_id(group);
  vpc::SecurityGroup g;
  ASSERT_TRUE(groups_->Get(Ctx().get(), get, &g).ok());
  EXPECT_EQ(g.metadata().name(), "gpuprov-sg");
  EXPECT_EQ(g.status().state(), vpc::SecurityGroupStatus::READY);
  vpc::GetSecurityGroupByNameRequest by_name;
  by_name.set_parent_id(kProject);
  by_name.set_name("gpuprov-sg");
  ASSERT_TRUE(groups_->GetByName(Ctx().get(), by_name, &g).ok());
  EXPECT_EQ(g.metadata().id(), group);
  vpc::ListSecurityGroupsRequest list;
  list.set_parent_id(kProject);
  vpc::ListSecurityGroupsResponse groups;
  ASSERT_TRUE(groups_->List(Ctx().get(), list, &groups).ok());
  ASSERT_EQ(groups.items_size(), 2);  // the network's default group and ours
  EXPECT_TRUE(groups.items(0).status().default_() || groups.items(1).status().default_());

  vpc::CreateSecurityGroupRequest dup;
  dup.mutable_metadata()->set_parent_id(kProject);
  dup.mutable_metadata()->set_name("gpuprov-sg");
  dup.mutable_spec()->set_network_id(NetworkId());
  nc::Operation op;
  EXPECT_EQ(groups_->Create(Ctx().get(), dup, &op).error_code(), Code::ALREADY_EXISTS);
  dup.mutable_metadata()->set_name("other");
  dup.mutable_spec()->set_network_id("vpcnetwork-nope");
  grpc::Status st = groups_->Create(Ctx().get(), dup, &op);
  EXPECT_EQ(st.error_code(), Code::INVALID_ARGUMENT);
  EXPECT_EQ(DetailOf(st).bad_request().violations(0).field(), "spec.network_id");

  // Rules: validated, then listed and counted.
  vpc::CreateSecurityRuleRequest rule;
  rule.mutable_metadata()->set_parent_id(group);
  rule.mutable_spec()->set_access(vpc::ALLOW);
  rule.mutable_spec()->set_protocol(vpc::TCP);
  rule.mutable_spec()->set_priority(500);
  for (int p = 1; p <= 9; ++p) rule.mutable_spec()->mutable_ingress()->add_destination_ports(p);
  st = rules_->Create(Ctx().get(), rule, &op);
  EXPECT_EQ(st.error_code(), Code::INVALID_ARGUMENT);
  EXPECT_EQ(DetailOf(st).bad_request().violations(0).field(), "spec.ingress.destination_ports");
  rule.mutable_spec()->mutable_ingress()->clear_destination_ports();
  rule.mutable_spec()->set_priority(1001);
  EXPECT_EQ(rules_->Create(Ctx().get(), rule, &op).error_code(), Code::INVALID_ARGUMENT);
  rule.mutable_spec()->set_priority(500);
  rule.mutable_spec()->mutable_ingress()->add_source_cidrs("not-a-cidr");
  EXPECT_EQ(rules_->Create(Ctx().get(), rule, &op).error_code(), Code::INVALID_ARGUMENT);
  rule.mutable_metadata()->set_parent_id("vpcsecuritygroup-nope");
  EXPECT_EQ(rules_->Create(Ctx().get(), rule, &op).error_code(), Code::NOT_FOUND);

  const std::string r1 = AddRule(group, {22, 80, 443, 6443});
  vpc::ListSecurityRulesRequest lr;
  lr.set_parent_id(group);
  vpc::ListSecurityRulesResponse rules;
  ASSERT_TRUE(rules_->List(Ctx().get(), lr, &rules).ok());
  ASSERT_EQ(rules.items_size(), 1);
  EXPECT_EQ(rules.items(0).spec().ingress().destination_ports_size(), 4);
  EXPECT_EQ(rules.items(0).status().direction(), vpc::INGRESS);
  vpc::GetSecurityRuleRequest gr;
  gr.set_id(r1);
  vpc::SecurityRule got;
  EXPECT_TRUE(rules_->Get(Ctx().get(), gr, &got).ok());
  EXPECT_EQ(Count("firewalls"), 1);
  EXPECT_EQ(Count("security_rules"), 1);

  // A rule goes by itself or with its group; the default group stays.
  vpc::DeleteSecurityRuleRequest dr;
  dr.set_id(r1);
  ASSERT_TRUE(rules_->Delete(Ctx().get(), dr, &op).ok());
  EXPECT_EQ(Wait(op).status().code(), 0);
  EXPECT_EQ(Count("security_rules"), 0);
  AddRule(group, {22});
  vpc::DeleteSecurityGroupRequest dg;
  dg.set_id(group);
  ASSERT_TRUE(groups_->Delete(Ctx().get(), dg, &op).ok());
  EXPECT_EQ(Wait(op).status().code(), 0);
  EXPECT_EQ(Count("firewalls"), 0);
  EXPECT_EQ(Count("security_rules"), 0);
  EXPECT_EQ(groups_->Get(Ctx().get(), get, &g).error_code(), Code::NOT_FOUND);
  ASSERT_TRUE(groups_->List(Ctx().get(), list, &groups).ok());
  ASSERT_EQ(groups.items_size(), 1);
  dg.set_id(groups.items(0).metadata().id());
  EXPECT_EQ(groups_->Delete(Ctx().get(), dg, &op).error_code(), Code::FAILED_PRECONDITION);
}

TEST_F(NebiusApiTest, ReachablePortsFollowTheSecurityRules) {
  const std::string group = MakeGroup("ports", {22});
  const std::string id = CreateRunning("ports-vm", group);
  EXPECT_EQ(GetString(Row(id), "reachable_ports").value_or("?"), "22");
  const std::string web = AddRule(group, {80, 443, 6443});
  EXPECT_EQ(GetString(Row(id), "reachable_ports").value_or("?"), "22,80,443,6443");
  // A DENY at a lower priority number wins; at equal priority DENY goes first too.
  AddRule(group, {443}, vpc::DENY, 100);
  AddRule(group, {80}, vpc::DENY, 500);
  EXPECT_EQ(GetString(Row(id), "reachable_ports").value_or("?"), "22,6443");
  // A source that does not hold this machine opens nothing; an all-ports rule opens the rest.
  AddRule(group, {8080}, vpc::ALLOW, 500, "10.0.0.0/8");
  EXPECT_EQ(GetString(Row(id), "reachable_ports").value_or("?"), "22,6443");
  AddRule(group, {}, vpc::ALLOW, 900);
  EXPECT_EQ(GetString(Row(id), "reachable_ports").value_or("?"), "1-79,81-442,444-65535");
  vpc::DeleteSecurityRuleRequest dr;
  dr.set_id(web);
  nc::Operation op;
  ASSERT_TRUE(rules_->Delete(Ctx().get(), dr, &op).ok());
  EXPECT_EQ(GetString(Row(id), "reachable_ports").value_or("?"), "1-79,81-442,444-65535");
  // The group is in use: it cannot go before the instance.
  vpc::DeleteSecurityGroupRequest dg;
  dg.set_id(group);
  EXPECT_EQ(groups_->Delete(Ctx().get(), dg, &op).error_code(), Code::FAILED_PRECONDITION);

  // No group listed: the network's default group (no rules here) applies; no public address:
  // nothing reachable either way.
  nc::Operation op2;
  ASSERT_TRUE(Create(InstanceRequest("default-sg"), &op2).ok());
  EXPECT_EQ(GetString(Row(op2.resource_id()), "reachable_ports").value_or("?"), "");
  EXPECT_EQ(Row(op2.resource_id())->getArray("security_groups")->size(), 1u);
  nc::Operation op3;
  ASSERT_TRUE(Create(InstanceRequest("private", group, false), &op3).ok());
  EXPECT_EQ(GetString(Row(op3.resource_id()), "reachable_ports").value_or("?"), "");
}

// A rule whose source is a security group (RuleIngress.source_security_group_id, nebius/api
// vpc/v1/security_rule.proto) admits, on their private addresses, the instances whose
// interfaces list that group; the referenced group must exist in the rule's group's network.
TEST_F(NebiusApiTest, ASelfReferencingRuleAdmitsTheGroupsMembersOnTheirPrivateAddresses) {
  const std::string own = MakeGroup("own", {22});
  const std::string peers = MakeGroup("peers", {});
  auto peer_rule = [&](vpc::RuleProtocol protocol, std::vector<int> ports,
                       const std::string& source) {
    vpc::CreateSecurityRuleRequest req;
    req.mutable_metadata()->set_parent_id(peers);
    req.mutable_metadata()->set_name("peers-" + std::to_string(ports[0]));
    auto* s = req.mutable_spec();
    s->set_access(vpc::ALLOW);
    s->set_protocol(protocol);
    s->set_priority(500);
    s->mutable_ingress()->set_source_security_group_id(source);
    for (int p : ports) s->mutable_ingress()->add_destination_ports(p);
    nc::Operation op;
    return rules_->Create(Ctx().get(), req, &op);
  };
  grpc::Status st = peer_rule(vpc::TCP, {6443}, "vpcsecuritygroup-nope");
  EXPECT_EQ(st.error_code(), Code::NOT_FOUND) << st.error_message();
  ASSERT_TRUE(peer_rule(vpc::TCP, {6443, 10250}, peers).ok());
  ASSERT_TRUE(peer_rule(vpc::UDP, {51820}, peers).ok());

  auto make = [&](const std::string& name, bool member) {
    compute::CreateInstanceRequest req = InstanceRequest(name, own);
    if (member) req.mutable_spec()->mutable_network_interfaces(0)->add_security_groups()->set_id(peers);
    nc::Operation op;
    EXPECT_TRUE(Create(req, &op).ok());
    EXPECT_EQ(Wait(op).status().code(), 0);
    return op.resource_id();
  };
  const std::string a = make("node-a", true);
  const std::string b = make("node-b", true);
  const std::string c = make("stranger", false);
  // The private address: status.network_interfaces[0].ip_address in CIDR form.
  auto ip_of = [&](const std::string& id) {
    std::string addr = GetInstance(id).status().network_interfaces(0).ip_address().address();
    EXPECT_EQ(addr.substr(addr.size() - 3), "/32") << addr;
    return addr.substr(0, addr.find('/'));
  };
  const std::string ip_a = ip_of(a), ip_b = ip_of(b), ip_c = ip_of(c);
  EXPECT_EQ(GetString(Row(a), "private_ip").value_or(""), ip_a);
  // Rules as "protocol ports from sources...", sources sorted.
  auto ingress = [&](const std::string& id) {
    std::vector<std::string> out;
    JsonArray rules = GetArray(Row(id), "private_ingress");
    for (size_t i = 0; rules && i < rules->size(); ++i) {
      JsonObject r = rules->getObject(static_cast<unsigned>(i));
      std::vector<std::string> sources;
      JsonArray src = GetArray(r, "sources");
      for (size_t k = 0; k < src->size(); ++k) sources.push_back(src->getElement<std::string>(k));
      std::sort(sources.begin(), sources.end());
      std::string line = GetString(r, "protocol").value_or("") + " " +
                         GetString(r, "ports").value_or("") + " from";
      for (const auto& s : sources) line += " " + s;
      out.push_back(line);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  const std::string ab = " from " + std::min(ip_a, ip_b) + " " + std::max(ip_a, ip_b);
  EXPECT_EQ(ingress(a), (std::vector<std::string>{"tcp 10250" + ab, "tcp 22 from 0.0.0.0/0",
                                                  "tcp 6443" + ab, "udp 51820" + ab}));
  // Not a member: only its own group's rule; and a member's sources never name it.
  EXPECT_EQ(ingress(c), (std::vector<std::string>{"tcp 22 from 0.0.0.0/0"}));
  for (const auto& line : ingress(b)) EXPECT_EQ(line.find(ip_c), std::string::npos) << line;
  // The peer rules open nothing to this machine.
  EXPECT_EQ(GetString(Row(a), "reachable_ports").value_or("?"), "22");

  // A member that goes is no source any more.
  nc::Operation del;
  ASSERT_TRUE(DeleteInstance(b, &del).ok());
  WaitFor([&] { return Row(b)->size() == 0; }, 15s);
  EXPECT_EQ(ingress(a), (std::vector<std::string>{"tcp 10250 from " + ip_a, "tcp 22 from 0.0.0.0/0",
                                                  "tcp 6443 from " + ip_a,
                                                  "udp 51820 from " + ip_a}));
}

// --- disks ---------------------------------------------------------------------------------

TEST_F(NebiusApiTest, DiskLifecycle) {
  compute::CreateDiskRequest req;
  req.mutable_metadata()->set_parent_id(kProject);
  req.mutable_metadata()->set_name("boot-1");
  req.mutable_spec()->set_size_gibibytes(100);
  req.mutable_spec()->set_type(compute::DiskSpec::NETWORK_SSD);
  req.mutable_spec()->mutable_source_image_family()->set_image_family("ubuntu24.04-cuda13.0");
  nc::Operation op;
  ASSERT_TRUE(disks_->Create(Ctx().get(), req, &op).ok());
  EXPECT_FALSE(op.has_status());  // running
  EXPECT_EQ(op.resource_id().rfind("computedisk-", 0), 0u);
  compute::GetDiskRequest get;
  get.set_id(op.resource_id());
  compute::Disk d;
  ASSERT_TRUE(disks_->Get(Ctx().get(), get, &d).ok());
  EXPECT_EQ(d.status().state(), compute::DiskStatus::CREATING);
  EXPECT_EQ(Wait(op).status().code(), 0);
  ASSERT_TRUE(disks_->Get(Ctx().get(), get, &d).ok());
  EXPECT_EQ(d.status().state(), compute::DiskStatus::READY);
  EXPECT_EQ(d.status().size_bytes(), int64_t{100} << 30);
  EXPECT_FALSE(d.status().source_image_id().empty());
  nc::GetByNameRequest by_name;
  by_name.set_parent_id(kProject);
  by_name.set_name("boot-1");
  ASSERT_TRUE(disks_->GetByName(Ctx().get(), by_name, &d).ok());
  EXPECT_EQ(d.metadata().id(), op.resource_id());
  compute::ListDisksRequest list;
  list.set_parent_id(kProject);
  compute::ListDisksResponse disks;
  ASSERT_TRUE(disks_->List(Ctx().get(), list, &disks).ok());
  EXPECT_EQ(disks.items_size(), 1);
  EXPECT_EQ(Count("disks"), 1);

  // Validation: a duplicate name, a CUDA image on a small disk, an unknown family, no type.
  nc::Operation bad;
  EXPECT_EQ(disks_->Create(Ctx().get(), req, &bad).error_code(), Code::ALREADY_EXISTS);
  req.mutable_metadata()->set_name("boot-2");
  req.mutable_spec()->set_size_gibibytes(20);
  grpc::Status st = disks_->Create(Ctx().get(), req, &bad);
  EXPECT_EQ(st.error_code(), Code::INVALID_ARGUMENT);
  EXPECT_EQ(DetailOf(st).bad_request().violations(0).field(), "spec.size");
  req.mutable_spec()->set_size_gibibytes(100);
  req.mutable_spec()->mutable_source_image_family()->set_image_family("windows");
  EXPECT_EQ(disks_->Create(Ctx().get(), req, &bad).error_code(), Code::NOT_FOUND);
  req.mutable_spec()->mutable_source_image_family()->set_image_family("ubuntu24.04-driverless");
  req.mutable_spec()->set_type(compute::DiskSpec::UNSPECIFIED);
  EXPECT_EQ(disks_->Create(Ctx().get(), req, &bad).error_code(), Code::INVALID_ARGUMENT);

  // Attached as existing_disk: it cannot be deleted until the instance is gone.
  compute::CreateInstanceRequest ireq = InstanceRequest("disk-user", MakeGroup("disk-sg", {22}));
  ireq.mutable_spec()->mutable_boot_disk()->mutable_existing_disk()->set_id(op.resource_id());
  nc::Operation iop;
  grpc::Status created = Create(ireq, &iop);
  ASSERT_TRUE(created.ok()) << created.error_message();
  ASSERT_TRUE(disks_->Get(Ctx().get(), get, &d).ok());
  EXPECT_EQ(d.status().read_write_attachment(), iop.resource_id());
  compute::DeleteDiskRequest del;
  del.set_id(op.resource_id());
  st = disks_->Delete(Ctx().get(), del, &bad);
  EXPECT_EQ(st.error_code(), Code::FAILED_PRECONDITION);
  EXPECT_EQ(DetailOf(st).bad_resource_state().resource_id(), op.resource_id());
  // A second instance cannot take the attached disk.
  compute::CreateInstanceRequest second = ireq;
  second.mutable_metadata()->set_name("disk-user-2");
  EXPECT_EQ(Create(second, &bad).error_code(), Code::FAILED_PRECONDITION);
  nc::Operation idel;
  ASSERT_TRUE(DeleteInstance(iop.resource_id(), &idel).ok());
  EXPECT_EQ(Wait(idel).status().code(), 0);
  ASSERT_TRUE(disks_->Get(Ctx().get(), get, &d).ok());
  EXPECT_TRUE(d.status().read_write_attachment().empty());  // an existing disk outlives it
  nc::Operation dop;
  ASSERT_TRUE(disks_->Delete(Ctx().get(), del, &dop).ok());
  ASSERT_TRUE(disks_->Get(Ctx().get(), get, &d).ok());
  EXPECT_EQ(d.status().state(), compute::DiskStatus::DELETING);
  EXPECT_EQ(Wait(dop).status().code(), 0);
  EXPECT_EQ(disks_->Get(Ctx().get(), get, &d).error_code(), Code::NOT_FOUND);
  EXPECT_EQ(Count("disks"), 0);
}

// --- instances ------------------------------------------------------------------------------

TEST_F(NebiusApiTest, InstanceLifecycleWithOperations) {
  // Wide phases, so a loaded machine's polls still see each: STOPPED 1 s, STARTING 2 s.
  Settings(R"({"cloud":"nebius","stopped_seconds":1})");
  const std::string group = MakeGroup("lifecycle", {22, 80, 443, 6443});
  Fault(R"({"cloud":"nebius","fault":"slow_boot","seconds":1.5})");
  nc::Operation op;
  compute::CreateInstanceRequest req = InstanceRequest("vm-1", group);
  ASSERT_TRUE(Create(req, &op).ok());
  EXPECT_EQ(op.resource_id().rfind("computeinstance-", 0), 0u);
  EXPECT_FALSE(op.has_status());
  EXPECT_EQ(op.description(), "Create instance vm-1");
  compute::CreateInstanceRequest echoed;
  ASSERT_TRUE(op.request().UnpackTo(&echoed));
  EXPECT_EQ(echoed.metadata().name(), "vm-1");

  // STOPPED+reconciling -> STARTING -> RUNNING with addresses (plugins/nebius/REFERENCE.md,
  // emulator notes 4).
  std::vector<compute::InstanceStatus::InstanceState> seen;
  compute::Instance inst;
  WaitFor(
      [&] {
        inst = GetInstance(op.resource_id());
        if (seen.empty() || seen.back() != inst.status().state()) {
          seen.push_back(inst.status().state());
          if (inst.status().state() != compute::InstanceStatus::RUNNING) {
            EXPECT_TRUE(inst.status().reconciling());
            EXPECT_TRUE(inst.status().network_interfaces(0).public_ip_address().address().empty());
          }
        }
        return inst.status().state() == compute::InstanceStatus::RUNNING;
      },
      10s);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], compute::InstanceStatus::STOPPED);
  EXPECT_EQ(seen[1], compute::InstanceStatus::STARTING);
  EXPECT_EQ(seen[2], compute::InstanceStatus::RUNNING);
  EXPECT_FALSE(inst.status().reconciling());
  EXPECT_TRUE(std::regex_match(inst.status().network_interfaces(0).public_ip_address().address(),
                               std::regex(R"(127\.91\.\d+\.\d+/32)")));
  EXPECT_TRUE(std::regex_match(inst.status().network_interfaces(0).ip_address().address(),
                               std::regex(R"(10\.\d+\.\d+\.\d+/32)")));
  EXPECT_EQ(inst.metadata().labels().at("created-by"), "gpuprov");
  EXPECT_EQ(inst.spec().cloud_init_user_data(), req.spec().cloud_init_user_data());
  ASSERT_EQ(inst.status().disk_attachments_size(), 1);
  EXPECT_TRUE(inst.status().disk_attachments(0).is_managed());
  nc::Operation done = Wait(op);
  EXPECT_EQ(done.status().code(), 0);
  EXPECT_TRUE(done.has_finished_at());
  EXPECT_EQ(GetString(Row(op.resource_id()), "reachable_ports").value_or("?"), "22,80,443,6443");

  // Names are unique in the project; the managed disk's name too.
  nc::Operation dup;
  grpc::Status st = Create(req, &dup);
  EXPECT_EQ(st.error_code(), Code::ALREADY_EXISTS);
  EXPECT_EQ(DetailOf(st).resource_already_exists().resource_id(), op.resource_id());
  compute::CreateInstanceRequest same_disk = InstanceRequest("vm-2", group);
  same_disk.mutable_spec()->mutable_boot_disk()->mutable_managed_disk()->set_name("vm-1-boot");
  EXPECT_EQ(Create(same_disk, &dup).error_code(), Code::ALREADY_EXISTS);

  // Find by name; list with pages; operations of the project's instances.
  nc::GetByNameRequest by_name;
  by_name.set_parent_id(kProject);
  by_name.set_name("vm-1");
  compute::Instance found;
  ASSERT_TRUE(instances_->GetByName(Ctx().get(), by_name, &found).ok());
  EXPECT_EQ(found.metadata().id(), op.resource_id());
  by_name.set_name("nope");
  EXPECT_EQ(instances_->GetByName(Ctx().get(), by_name, &found).error_code(), Code::NOT_FOUND);
  nc::Operation o2, o3;
  ASSERT_TRUE(Create(InstanceRequest("vm-2", group), &o2).ok());
  ASSERT_TRUE(Create(InstanceRequest("vm-3", group), &o3).ok());
  compute::ListInstancesRequest list;
  list.set_parent_id(kProject);
  list.set_page_size(2);
  compute::ListInstancesResponse page;
  ASSERT_TRUE(instances_->List(Ctx().get(), list, &page).ok());
  ASSERT_EQ(page.items_size(), 2);
  EXPECT_EQ(page.items(0).metadata().name(), "vm-1");
  ASSERT_FALSE(page.next_page_token().empty());
  list.set_page_token(page.next_page_token());
  ASSERT_TRUE(instances_->List(Ctx().get(), list, &page).ok());
  ASSERT_EQ(page.items_size(), 1);
  EXPECT_EQ(page.items(0).metadata().name(), "vm-3");
  EXPECT_TRUE(page.next_page_token().empty());
  list.set_page_token("bogus");
  EXPECT_EQ(instances_->List(Ctx().get(), list, &page).error_code(), Code::INVALID_ARGUMENT);
  compute::ListOperationsByParentRequest ops_req;
  ops_req.set_parent_id(kProject);
  nc::ListOperationsResponse ops;
  ASSERT_TRUE(instances_->ListOperationsByParent(Ctx().get(), ops_req, &ops).ok());
  EXPECT_EQ(ops.operations_size(), 3);
  nc::ListOperationsRequest by_resource;
  by_resource.set_resource_id(op.resource_id());
  ASSERT_TRUE(operations_->List(Ctx().get(), by_resource, &ops).ok());
  ASSERT_EQ(ops.operations_size(), 1);
  EXPECT_EQ(ops.operations(0).id(), op.id());
  EXPECT_EQ(Count("instances"), 3);
  EXPECT_EQ(Count("disks"), 3);

  // Delete: DELETING (reconciling), then NOT_FOUND; its managed disk goes with it.
  nc::Operation del;
  ASSERT_TRUE(DeleteInstance(op.resource_id(), &del).ok());
  EXPECT_EQ(del.resource_id(), op.resource_id());
  inst = GetInstance(op.resource_id());
  EXPECT_EQ(inst.status().state(), compute::InstanceStatus::DELETING);
  EXPECT_TRUE(inst.status().reconciling());
  EXPECT_EQ(Wait(del).status().code(), 0);
  grpc::Status gone;
  GetInstance(op.resource_id(), &gone);
  EXPECT_EQ(gone.error_code(), Code::NOT_FOUND);
  EXPECT_EQ(DetailOf(gone).resource_not_found().resource_id(), op.resource_id());
  EXPECT_EQ(DeleteInstance(op.resource_id(), &del).error_code(), Code::NOT_FOUND);
  EXPECT_EQ(Count("instances"), 2);
  EXPECT_EQ(Count("disks"), 2);

  // Start/Stop exist in the protos but are not emulated.
  compute::StopInstanceRequest stop;
  stop.set_id(o2.resource_id());
  EXPECT_EQ(instances_->Stop(Ctx().get(), stop, &del).error_code(), Code::UNIMPLEMENTED);

  // The control API's reset leaves nothing.
  Reply r = Control("POST", "/reset", R"({"cloud":"nebius"})");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("backend_instances"), 0);
  EXPECT_EQ(Count("disks"), 0);
  EXPECT_EQ(Count("firewalls"), 0);
}

TEST_F(NebiusApiTest, CreateIsValidated) {
  const std::string group = MakeGroup("validation", {22});
  auto field = [&](compute::CreateInstanceRequest req) {
    nc::Operation op;
    grpc::Status st = Create(req, &op);
    EXPECT_EQ(st.error_code(), Code::INVALID_ARGUMENT) << st.error_message();
    nc::ServiceError e = DetailOf(st);
    return e.bad_request().violations_size() ? e.bad_request().violations(0).field() : "";
  };
  auto r = InstanceRequest("v1", group);
  r.mutable_spec()->mutable_resources()->set_platform("gpu-a100");
  EXPECT_EQ(field(r), "spec.resources.platform");
  r = InstanceRequest("v1", group);
  r.mutable_spec()->mutable_resources()->set_preset("3gpu");
  EXPECT_EQ(field(r), "spec.resources.preset");
  r = InstanceRequest("v1", group);
  r.mutable_spec()->set_cloud_init_user_data(std::string(32769, 'x'));
  EXPECT_EQ(field(r), "spec.cloud_init_user_data");
  r = InstanceRequest("v1", group);
  r.mutable_spec()->mutable_network_interfaces(0)->set_name("Eth_0");
  EXPECT_EQ(field(r), "spec.network_interfaces[0].name");
  r = InstanceRequest("v1", group);
  r.mutable_spec()->mutable_network_interfaces(0)->set_subnet_id("vpcsubnet-nope");
  EXPECT_EQ(field(r), "spec.network_interfaces[0].subnet_id");
  r = InstanceRequest("v1", group);
  r.mutable_spec()->mutable_network_interfaces(0)->clear_ip_address();
  EXPECT_EQ(field(r), "spec.network_interfaces[0].ip_address");
  r = InstanceRequest("v1", group);
  r.mutable_spec()->mutable_network_interfaces(0)->add_security_groups()->set_id("vpcsg-x");
  EXPECT_EQ(field(r), "spec.network_interfaces[0].security_groups");
  r = InstanceRequest("v1", group);
  r.mutable_spec()->clear_boot_disk();
  EXPECT_EQ(field(r), "spec.boot_disk");
  r = InstanceRequest("v1", group);
  r.mutable_spec()->mutable_boot_disk()->mutable_managed_disk()->mutable_spec()->set_size_gibibytes(
      10);
  EXPECT_EQ(field(r), "spec.boot_disk.managed_disk.spec.size");
  r = InstanceRequest("", group);
  EXPECT_EQ(field(r), "metadata.name");
  r = InstanceRequest("v1", group);
  r.mutable_spec()->clear_network_interfaces();
  EXPECT_EQ(field(r), "spec.network_interfaces");
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("disks"), 0);
  EXPECT_EQ(Count("backend_instances"), 0);
}

TEST_F(NebiusApiTest, IdempotencyKeyReturnsTheSameOperation) {
  const std::string group = MakeGroup("idem", {22});
  nc::Operation a, b, c;
  ASSERT_TRUE(Create(InstanceRequest("idem-vm", group), &a, "key-1").ok());
  ASSERT_TRUE(Create(InstanceRequest("idem-vm", group), &b, "key-1").ok());
  EXPECT_EQ(a.id(), b.id());
  EXPECT_EQ(a.resource_id(), b.resource_id());
  EXPECT_EQ(Count("instances"), 1);
  // Without the key, the name is taken.
  EXPECT_EQ(Create(InstanceRequest("idem-vm", group), &c).error_code(), Code::ALREADY_EXISTS);
}

TEST_F(NebiusApiTest, OperationsAreReadOnTheirServicesEndpoint) {
  const std::string group = MakeGroup("ep", {22});
  nc::Operation op;
  ASSERT_TRUE(Create(InstanceRequest("ep-vm", group), &op).ok());
  vpc::ListSecurityGroupsRequest lg;
  lg.set_parent_id(kProject);
  vpc::ListSecurityGroupsResponse groups;
  // As the vpc endpoint: compute operations do not exist there and compute is not served.
  Connect("vpc.api.nebius.cloud:443");
  grpc::Status st;
  GetOp(op.id(), &st);
  EXPECT_EQ(st.error_code(), Code::NOT_FOUND);
  compute::Instance inst;
  EXPECT_EQ(GetInstance(op.resource_id(), &st).metadata().id(), "");
  EXPECT_EQ(st.error_code(), Code::UNIMPLEMENTED);
  EXPECT_TRUE(groups_->List(Ctx().get(), lg, &groups).ok());
  // As the compute endpoint: found; vpc is not served there.
  Connect("compute.api.nebius.cloud:443");
  EXPECT_EQ(GetOp(op.id(), &st).id(), op.id());
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(groups_->List(Ctx().get(), lg, &groups).error_code(), Code::UNIMPLEMENTED);
  // Unknown ids are NOT_FOUND anywhere.
  Connect("");
  GetOp("computeoperation-nope", &st);
  EXPECT_EQ(st.error_code(), Code::NOT_FOUND);
}

// --- faults ----------------------------------------------------------------------------------

TEST_F(NebiusApiTest, CapacityAndQuotaFailTheCallOrTheOperation) {
  const std::string group = MakeGroup("cap", {22});
  nc::Operation op;
  Fault(R"({"cloud":"nebius","fault":"capacity"})");
  grpc::Status st = Create(InstanceRequest("cap-1", group), &op);
  EXPECT_EQ(st.error_code(), Code::RESOURCE_EXHAUSTED);
  nc::ServiceError e = DetailOf(st);
  ASSERT_EQ(e.not_enough_resources().violations_size(), 1);
  EXPECT_EQ(e.not_enough_resources().violations(0).resource_type(),
            "gpu-h100-sxm/1gpu-16vcpu-200gb");
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("disks"), 0);

  Fault(R"({"cloud":"nebius","fault":"quota"})");
  st = Create(InstanceRequest("cap-2", group), &op);
  EXPECT_EQ(st.error_code(), Code::RESOURCE_EXHAUSTED);
  ASSERT_EQ(DetailOf(st).quota_failure().violations_size(), 1);
  EXPECT_NE(DetailOf(st).quota_failure().violations(0).message().find("Quota limit exceeded"),
            std::string::npos);

  // In the operation: accepted, then the operation fails and the instance is gone.
  Fault(R"({"cloud":"nebius","fault":"capacity","value":"operation"})");
  ASSERT_TRUE(Create(InstanceRequest("cap-3", group), &op).ok());
  compute::Instance pending = GetInstance(op.resource_id(), &st);
  if (st.ok()) {  // for 0.5 s: STOPPED+reconciling
    EXPECT_EQ(pending.status().state(), compute::InstanceStatus::STOPPED);
    EXPECT_TRUE(pending.status().reconciling());
  }
  nc::Operation done = Wait(op);
  EXPECT_EQ(done.status().code(), static_cast<int>(Code::RESOURCE_EXHAUSTED));
  EXPECT_EQ(DetailOf(done).not_enough_resources().violations_size(), 1);
  GetInstance(op.resource_id(), &st);
  EXPECT_EQ(st.error_code(), Code::NOT_FOUND);
  Fault(R"({"cloud":"nebius","fault":"quota","value":"operation"})");
  ASSERT_TRUE(Create(InstanceRequest("cap-4", group), &op).ok());
  done = Wait(op);
  EXPECT_EQ(done.status().code(), static_cast<int>(Code::RESOURCE_EXHAUSTED));
  EXPECT_EQ(DetailOf(done).quota_failure().violations_size(), 1);
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("disks"), 0);
  EXPECT_EQ(Count("backend_instances"), 0);
}

TEST_F(NebiusApiTest, ThrottleAndServerErrors) {
  compute::ListInstancesRequest req;
  req.set_parent_id(kProject);
  compute::ListInstancesResponse resp;
  Fault(R"({"cloud":"nebius","fault":"throttle","times":2})");
  grpc::Status st = instances_->List(Ctx().get(), req, &resp);
  EXPECT_EQ(st.error_code(), Code::RESOURCE_EXHAUSTED);
  EXPECT_FALSE(DetailOf(st).too_many_requests().violation().empty());
  EXPECT_EQ(DetailOf(st).retry_type(), nc::ServiceError::CALL);
  EXPECT_EQ(instances_->List(Ctx().get(), req, &resp).error_code(), Code::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(instances_->List(Ctx().get(), req, &resp).ok());

  // A burst of UNAVAILABLE on one method only; INTERNAL with a request id; DEADLINE_EXCEEDED.
  Fault(R"({"cloud":"nebius","fault":"server_error","status":503,"times":3,)"
        R"("path":"/nebius.compute.v1.InstanceService/List"})");
  compute::ListPlatformsRequest preq;
  preq.set_parent_id(kProject);
  compute::ListPlatformsResponse presp;
  EXPECT_TRUE(platforms_->List(Ctx().get(), preq, &presp).ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(instances_->List(Ctx().get(), req, &resp).error_code(), Code::UNAVAILABLE);
  }
  EXPECT_TRUE(instances_->List(Ctx().get(), req, &resp).ok());
  Fault(R"({"cloud":"nebius","fault":"server_error"})");
  st = instances_->List(Ctx().get(), req, &resp);
  EXPECT_EQ(st.error_code(), Code::INTERNAL);
  EXPECT_FALSE(DetailOf(st).internal_error().request_id().empty());
  Fault(R"({"cloud":"nebius","fault":"server_error","status":504})");
  EXPECT_EQ(instances_->List(Ctx().get(), req, &resp).error_code(), Code::DEADLINE_EXCEEDED);
}

TEST_F(NebiusApiTest, AmbiguousCreateIsSafeToRetryWithTheSameKey) {
  const std::string group = MakeGroup("amb", {22});
  Fault(R"({"cloud":"nebius","fault":"server_error","status":503,"value":"after_create",)"
        R"("path":"/nebius.compute.v1.InstanceService/Create"})");
  nc::Operation op;
  EXPECT_EQ(Create(InstanceRequest("amb-vm", group), &op, "k-amb").error_code(),
            Code::UNAVAILABLE);
  EXPECT_EQ(Count("instances"), 1);  // made, though the call failed
  ASSERT_TRUE(Create(InstanceRequest("amb-vm", group), &op, "k-amb").ok());
  EXPECT_EQ(Count("instances"), 1);
  EXPECT_EQ(Wait(op).status().code(), 0);
}

// Preemptible instances (README "Nebius"; nebius/api compute/v1/instance.proto
// PreemptibleSpec): the spec is kept and returned, refused without on_preemption or on a
// platform not allowed_for_preemptibles; POST /preempt stops one as Nebius does (STOPPED, not
// reconciling, no public address), and loses a regular one.
TEST_F(NebiusApiTest, PreemptibleInstancesAreStoppedByPreempt) {
  const std::string group = MakeGroup("spot", {22});
  auto preemptible = [&](const std::string& name) {
    auto r = InstanceRequest(name, group);
    r.mutable_spec()->mutable_preemptible()->set_on_preemption(compute::PreemptibleSpec::STOP);
    r.mutable_spec()->set_recovery_policy(compute::FAIL);
    return r;
  };
  auto refused_field = [&](const compute::CreateInstanceRequest& req) {
    nc::Operation op;
    grpc::Status st = Create(req, &op);
    EXPECT_EQ(st.error_code(), Code::INVALID_ARGUMENT) << st.error_message();
    nc::ServiceError e = DetailOf(st);
    return e.bad_request().violations_size() ? e.bad_request().violations(0).field() : "";
  };
  auto r = preemptible("no-policy");
  r.mutable_spec()->mutable_preemptible()->clear_on_preemption();
  EXPECT_EQ(refused_field(r), "spec.preemptible.on_preemption");
  r = preemptible("cpu");
  r.mutable_spec()->mutable_resources()->set_platform("cpu-d3");
  r.mutable_spec()->mutable_resources()->set_preset("8vcpu-32gb");
  r.mutable_spec()->mutable_boot_disk()->mutable_managed_disk()->mutable_spec()
      ->mutable_source_image_family()->set_image_family("ubuntu24.04-driverless");
  EXPECT_EQ(refused_field(r), "spec.preemptible");
  EXPECT_EQ(Count("instances"), 0);
  // The platform list says which platforms take them.
  compute::ListPlatformsRequest list;
  list.set_parent_id(kProject);
  compute::ListPlatformsResponse platforms;
  ASSERT_TRUE(platforms_->List(Ctx().get(), list, &platforms).ok());
  for (const auto& p : platforms.items()) {
    EXPECT_EQ(p.status().allowed_for_preemptibles(), p.metadata().name().rfind("gpu-", 0) == 0)
        << p.metadata().name();
  }

  nc::Operation op;
  ASSERT_TRUE(Create(preemptible("spot"), &op).ok());
  ASSERT_EQ(Wait(op).status().code(), 0);
  const std::string id = op.resource_id();
  compute::Instance inst = GetInstance(id);
  EXPECT_EQ(inst.status().state(), compute::InstanceStatus::RUNNING);
  EXPECT_TRUE(inst.spec().has_preemptible());
  EXPECT_EQ(inst.spec().preemptible().on_preemption(), compute::PreemptibleSpec::STOP);
  EXPECT_EQ(inst.spec().recovery_policy(), compute::FAIL);
  EXPECT_FALSE(inst.status().network_interfaces(0).public_ip_address().address().empty());
  EXPECT_EQ(GetString(Row(id), "on_preemption").value_or(""), "STOP");

  Reply pre = Control("POST", "/preempt", R"({"cloud":"nebius","name":"spot"})");
  ASSERT_EQ(pre.status, 200) << pre.body;
  inst = GetInstance(id);
  EXPECT_EQ(inst.status().state(), compute::InstanceStatus::STOPPED);
  EXPECT_FALSE(inst.status().reconciling());
  EXPECT_TRUE(inst.status().network_interfaces(0).public_ip_address().address().empty());
  EXPECT_TRUE(inst.spec().has_preemptible());
  EXPECT_FALSE(inst.spec().stopped());
  EXPECT_EQ(Count("instances"), 1);
  EXPECT_EQ(Count("disks"), 1);  // its boot disk stays
  EXPECT_EQ(Count("backend_instances"), 0);
  EXPECT_EQ(GetString(Row(id), "state").value_or(""), "stopped");
  // Taken back already: nothing live of that name.
  EXPECT_EQ(Control("POST", "/preempt", R"({"cloud":"nebius","name":"spot"})").status, 404);
  nc::Operation del;
  ASSERT_TRUE(DeleteInstance(id, &del).ok());
  EXPECT_EQ(Wait(del).status().code(), 0);
  EXPECT_EQ(Count("instances"), 0);

  // A regular instance is lost instead.
  const std::string regular = CreateRunning("regular", group);
  ASSERT_EQ(Control("POST", "/preempt", R"({"cloud":"nebius","name":"regular"})").status, 200);
  grpc::Status st;
  GetInstance(regular, &st);
  EXPECT_EQ(st.error_code(), Code::NOT_FOUND);
}

TEST_F(NebiusApiTest, BootFaults) {
  const std::string group = MakeGroup("boot", {22});
  // slow_boot: still STARTING when a normal boot would run.
  Fault(R"({"cloud":"nebius","fault":"slow_boot","seconds":3})");
  nc::Operation slow;
  ASSERT_TRUE(Create(InstanceRequest("slow", group), &slow).ok());
  std::this_thread::sleep_for(2s);
  compute::Instance inst = GetInstance(slow.resource_id());
  EXPECT_EQ(inst.status().state(), compute::InstanceStatus::STARTING);
  EXPECT_TRUE(inst.status().reconciling());
  EXPECT_FALSE(GetOp(slow.id()).has_status());

  // error_during_boot: STOPPED without reconciling and a failed create (reference Gotcha).
  Fault(R"({"cloud":"nebius","fault":"error_during_boot"})");
  nc::Operation failed;
  ASSERT_TRUE(Create(InstanceRequest("fails", group), &failed).ok());
  nc::Operation done = Wait(failed);
  EXPECT_EQ(done.status().code(), static_cast<int>(Code::INTERNAL));
  EXPECT_FALSE(done.status().message().empty());
  inst = GetInstance(failed.resource_id());
  EXPECT_EQ(inst.status().state(), compute::InstanceStatus::STOPPED);
  EXPECT_FALSE(inst.status().reconciling());
  Fault(R"({"cloud":"nebius","fault":"error_during_boot","value":"error"})");
  ASSERT_TRUE(Create(InstanceRequest("errors", group), &failed).ok());
  EXPECT_EQ(Wait(failed).status().code(), static_cast<int>(Code::INTERNAL));
  EXPECT_EQ(GetInstance(failed.resource_id()).status().state(), compute::InstanceStatus::ERROR);

  // vanish_during_boot: NOT_FOUND, the create failed, nothing left behind.
  Fault(R"({"cloud":"nebius","fault":"vanish_during_boot"})");
  nc::Operation vanish;
  ASSERT_TRUE(Create(InstanceRequest("vanish", group), &vanish).ok());
  EXPECT_EQ(Wait(vanish).status().code(), static_cast<int>(Code::INTERNAL));
  grpc::Status st;
  GetInstance(vanish.resource_id(), &st);
  EXPECT_EQ(st.error_code(), Code::NOT_FOUND);

  // ip_after_boot: RUNNING without a public address for a while.
  Fault(R"({"cloud":"nebius","fault":"ip_after_boot","seconds":3})");
  nc::Operation late;
  ASSERT_TRUE(Create(InstanceRequest("late-ip", group), &late).ok());
  EXPECT_EQ(Wait(late).status().code(), 0);
  inst = GetInstance(late.resource_id());
  EXPECT_EQ(inst.status().state(), compute::InstanceStatus::RUNNING);
  EXPECT_TRUE(inst.status().network_interfaces(0).public_ip_address().address().empty());
  EXPECT_TRUE(WaitFor(
      [&] {
        return !GetInstance(late.resource_id())
                    .status()
                    .network_interfaces(0)
                    .public_ip_address()
                    .address()
                    .empty();
      },
      8s));

  // A running instance lost later (settings vanish_instance): NOT_FOUND, its disk gone too.
  Settings(R"({"cloud":"nebius","vanish_instance":"late-ip"})");
  GetInstance(late.resource_id(), &st);
  EXPECT_EQ(st.error_code(), Code::NOT_FOUND);
  EXPECT_EQ(
      Control("POST", "/settings", R"({"cloud":"nebius","vanish_instance":"late-ip"})").status,
      400);

  // The shared boot faults reach the backend (memory: flags in /instances).
  Fault(R"({"cloud":"nebius","fault":"boot_script_fails"})");
  nc::Operation script;
  ASSERT_TRUE(Create(InstanceRequest("script", group), &script).ok());
  EXPECT_EQ(GetBool(Row(script.resource_id()), "boot_script_fails").value_or(false), true);
  Fault(R"({"cloud":"nebius","fault":"port_blocked","value":"22"})");
  nc::Operation blocked;
  ASSERT_TRUE(Create(InstanceRequest("blocked", group), &blocked).ok());
  EXPECT_EQ(GetString(Row(blocked.resource_id()), "reachable_ports").value_or("?"), "");
}

TEST_F(NebiusApiTest, DeleteWhileBusyAbortsOrConflicts) {
  const std::string group = MakeGroup("busy", {22});
  // Long boots, so the deletes below surely meet running creates.
  Fault(R"({"cloud":"nebius","fault":"slow_boot","seconds":3,"times":2})");
  nc::Operation create, del;
  ASSERT_TRUE(Create(InstanceRequest("busy-1", group), &create).ok());
  ASSERT_TRUE(DeleteInstance(create.resource_id(), &del).ok());
  nc::Operation aborted = GetOp(create.id());
  EXPECT_EQ(aborted.status().code(), static_cast<int>(Code::ABORTED));
  EXPECT_EQ(DetailOf(aborted).operation_aborted().aborted_by_operation_id(), del.id());
  // A second delete while the first runs: OperationConflict.
  nc::Operation again;
  grpc::Status st = DeleteInstance(create.resource_id(), &again);
  EXPECT_EQ(st.error_code(), Code::ABORTED);
  EXPECT_EQ(DetailOf(st).operation_conflict().conflicting_operation_id(), del.id());
  EXPECT_EQ(Wait(del).status().code(), 0);

  Settings(R"({"cloud":"nebius","delete_while_busy":"conflict"})");
  ASSERT_TRUE(Create(InstanceRequest("busy-2", group), &create).ok());
  st = DeleteInstance(create.resource_id(), &del);
  EXPECT_EQ(st.error_code(), Code::ABORTED);
  EXPECT_EQ(DetailOf(st).operation_conflict().conflicting_operation_id(), create.id());
  EXPECT_EQ(Wait(create).status().code(), 0);
  ASSERT_TRUE(DeleteInstance(create.resource_id(), &del).ok());
  EXPECT_EQ(Wait(del).status().code(), 0);
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("disks"), 0);
}

TEST_F(NebiusApiTest, UnknownMethodsAndBadSettings) {
  grpc::GenericStub stub(channel_);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", std::string("Bearer ") + kToken);
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  grpc::Slice empty("");
  grpc::ByteBuffer in(&empty, 1), out;
  grpc::Status st;
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  stub.UnaryCall(&ctx, "/nebius.compute.v1.GpuClusterService/List", grpc::StubOptions(), &in,
                 &out, [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(m);
                   st = s;
                   done = true;
                   cv.notify_one();
                 });
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] { return done; });
  EXPECT_EQ(st.error_code(), Code::UNIMPLEMENTED);
  EXPECT_EQ(Control("POST", "/settings", R"({"cloud":"nebius","delete_while_busy":"x"})").status,
            400);
  EXPECT_EQ(Control("POST", "/settings", R"({"cloud":"nebius","projects":["tenant-1"]})").status,
            400);
  EXPECT_EQ(Control("POST", "/settings",
                    R"({"cloud":"nebius","service_account":{"id":"a","kid":"b",)"
                    R"("public_key_pem":"nope"}})")
                .status,
            400);
}

// --- the binary -----------------------------------------------------------------------------

TEST(NebiusEmulatorBinary, PrintsItsGrpcAddressAndWritesTheCredentialsFile) {
  char dir_template[] = "/tmp/nebius-emu-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string creds = std::string(dir_template) + "/credentials.json";
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    setenv("NEBIUS_IAM_TOKEN", "env-nebius-token", 1);
    setenv("NEBIUS_CREDENTIALS_FILE", creds.c_str(), 1);
    execl(GPUPROV_EMULATOR_PATH, GPUPROV_EMULATOR_PATH, "--clouds", "nebius", nullptr);
    _exit(127);
  }
  close(out[1]);
  FILE* f = fdopen(out[0], "r");
  std::vector<std::string> lines;
  char buf[512];
  while ((lines.empty() || lines.back().rfind("control ", 0) != 0) && fgets(buf, sizeof buf, f)) {
    std::string l = buf;
    if (!l.empty() && l.back() == '\n') l.pop_back();
    lines.push_back(l);
  }
  ASSERT_EQ(lines.size(), 2u);
  std::smatch m;
  ASSERT_TRUE(std::regex_match(lines[0], m, std::regex(R"(nebius (127\.0\.0\.1:\d+))")))
      << lines[0];
  auto channel = grpc::CreateChannel(m[1].str(), grpc::InsecureChannelCredentials());
  auto stub = compute::PlatformService::NewStub(channel);
  compute::ListPlatformsRequest req;
  req.set_parent_id(kProject);
  compute::ListPlatformsResponse resp;
  grpc::ClientContext ok_ctx;
  ok_ctx.AddMetadata("authorization", "Bearer env-nebius-token");
  EXPECT_TRUE(stub->List(&ok_ctx, req, &resp).ok());
  grpc::ClientContext bad_ctx;
  bad_ctx.AddMetadata("authorization", "Bearer emulator-nebius-token");
  EXPECT_EQ(stub->List(&bad_ctx, req, &resp).error_code(), Code::UNAUTHENTICATED);
  // The credentials file it wrote: 0600, the reference's shape, and its key's JWTs work.
  struct stat st {};
  ASSERT_EQ(stat(creds.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream in(creds);
  std::stringstream text;
  text << in.rdbuf();
  JsonObject sc = GetObject(ParseObject(text.str()), "subject-credentials");
  ASSERT_TRUE(sc);
  EXPECT_EQ(GetString(sc, "alg").value_or(""), "RS256");
  const std::string kid = GetString(sc, "kid").value_or("");
  const std::string iss = GetString(sc, "iss").value_or("");
  EXPECT_EQ(kid.rfind("publickey-", 0), 0u);
  EXPECT_EQ(iss.rfind("serviceaccount-", 0), 0u);
  EXPECT_EQ(GetString(sc, "sub").value_or(""), iss);
  std::istringstream pem(GetString(sc, "private-key").value_or(""));
  Poco::Crypto::RSAKey key(nullptr, &pem);
  auto tokens = iam::TokenExchangeService::NewStub(channel);
  iam::ExchangeTokenRequest ex;
  ex.set_grant_type("urn:ietf:params:oauth:grant-type:token-exchange");
  ex.set_requested_token_type("urn:ietf:params:oauth:token-type:access_token");
  ex.set_subject_token_type("urn:ietf:params:oauth:token-type:jwt");
  ex.set_subject_token(Jwt(key, kid, Claims(iss, 120)));
  iam::CreateTokenResponse token;
  grpc::ClientContext ex_ctx;
  grpc::Status exst = tokens->Exchange(&ex_ctx, ex, &token);
  ASSERT_TRUE(exst.ok()) << exst.error_message();
  grpc::ClientContext sa_ctx;
  sa_ctx.AddMetadata("authorization", "Bearer " + token.access_token());
  EXPECT_TRUE(stub->List(&sa_ctx, req, &resp).ok());
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  fclose(f);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::remove(creds.c_str());
  rmdir(dir_template);
}

// --- docker backend --------------------------------------------------------------------------

class NebiusDockerTest : public testing::DockerBackendTest {};

TEST_F(NebiusDockerTest, UserDataRunsAndOnlyTheGroupsPortsAnswer) {
  EmulatorOptions o;
  o.clouds = {"nebius"};
  o.tokens["nebius"] = {kToken};
  StartDockerEmulator(o);
  if (IsSkipped()) return;
  auto channel = grpc::CreateChannel(emu_->BaseUrl("nebius"), grpc::InsecureChannelCredentials());
  auto instances = compute::InstanceService::NewStub(channel);
  auto groups = vpc::SecurityGroupService::NewStub(channel);
  auto rules = vpc::SecurityRuleService::NewStub(channel);
  auto subnets = vpc::SubnetService::NewStub(channel);
  auto ctx = [] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->AddMetadata("authorization", std::string("Bearer ") + kToken);
    c->set_deadline(std::chrono::system_clock::now() + 30s);
    return c;
  };
  vpc::ListSubnetsRequest sreq;
  sreq.set_parent_id(kProject);
  vpc::ListSubnetsResponse subnet;
  ASSERT_TRUE(subnets->List(ctx().get(), sreq, &subnet).ok());
  vpc::CreateSecurityGroupRequest g;
  g.mutable_metadata()->set_parent_id(kProject);
  g.mutable_metadata()->set_name("docker-sg");
  g.mutable_spec()->set_network_id(subnet.items(0).spec().network_id());
  nc::Operation gop;
  ASSERT_TRUE(groups->Create(ctx().get(), g, &gop).ok());
  vpc::CreateSecurityRuleRequest r;
  r.mutable_metadata()->set_parent_id(gop.resource_id());
  r.mutable_spec()->set_access(vpc::ALLOW);
  r.mutable_spec()->set_protocol(vpc::TCP);
  r.mutable_spec()->set_priority(500);
  r.mutable_spec()->mutable_ingress()->add_source_cidrs("0.0.0.0/0");
  r.mutable_spec()->mutable_ingress()->add_destination_ports(22);
  nc::Operation rop;
  ASSERT_TRUE(rules->Create(ctx().get(), r, &rop).ok());

  const std::string key =
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPtlieUdwvU3Yi8XHX36t5VZpca1by3GqjV+S0aD87Tm nebius-t";
  compute::CreateInstanceRequest req;
  req.mutable_metadata()->set_parent_id(kProject);
  req.mutable_metadata()->set_name("nebius-docker");
  req.mutable_spec()->mutable_resources()->set_platform("gpu-l40s-a");
  req.mutable_spec()->mutable_resources()->set_preset("1gpu-8vcpu-32gb");
  auto* disk = req.mutable_spec()->mutable_boot_disk()->mutable_managed_disk();
  disk->set_name("nebius-docker-boot");
  disk->mutable_spec()->set_size_gibibytes(64);
  disk->mutable_spec()->set_type(compute::DiskSpec::NETWORK_SSD);
  disk->mutable_spec()->mutable_source_image_family()->set_image_family("ubuntu24.04-cuda13.0");
  auto* nic = req.mutable_spec()->add_network_interfaces();
  nic->set_name("eth0");
  nic->set_subnet_id(subnet.items(0).metadata().id());
  nic->mutable_ip_address();
  nic->mutable_public_ip_address();
  nic->add_security_groups()->set_id(gop.resource_id());
  req.mutable_spec()->set_cloud_init_user_data(
      "#cloud-config\nssh_authorized_keys:\n  - " + key +
      "\nruncmd:\n  - [sh, -c, 'echo nebius > /run/nebius-user-data']\n");
  nc::Operation op;
  ASSERT_TRUE(instances->Create(ctx().get(), req, &op).ok());
  compute::Instance inst;
  ASSERT_TRUE(WaitFor(
      [&] {
        compute::GetInstanceRequest get;
        get.set_id(op.resource_id());
        return instances->Get(ctx().get(), get, &inst).ok() &&
               inst.status().state() == compute::InstanceStatus::RUNNING &&
               !inst.status().network_interfaces(0).public_ip_address().address().empty();
      },
      120s));
  std::string address = inst.status().network_interfaces(0).public_ip_address().address();
  address = address.substr(0, address.find('/'));
  const std::string container = ContainerOf("nebius", "nebius-docker");
  ASSERT_FALSE(container.empty());
  EXPECT_NE(WaitCloudInit(container).find("status: done"), std::string::npos);
  EXPECT_EQ(Exec(container, "cat /run/nebius-user-data").out, "nebius\n");
  EXPECT_NE(Exec(container, "cat /home/ubuntu/.ssh/authorized_keys").out.find("nebius-t"),
            std::string::npos);
  EXPECT_NE(Exec(container, "cat /etc/gpuprov-testvm/gpu").out.find("L40S"), std::string::npos);
  // SSH answers on the public address (rule for 22); 6443 does not until a rule opens it.
  auto greeting = [&](int port) -> std::string {
    try {
      Poco::Net::StreamSocket s;
      s.connect(Poco::Net::SocketAddress(address, static_cast<Poco::UInt16>(port)),
                Poco::Timespan(5, 0));
      s.setReceiveTimeout(Poco::Timespan(5, 0));
      char buf[64];
      const int n = s.receiveBytes(buf, sizeof buf);
      return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    } catch (const Poco::Exception&) {
      return "";
    }
  };
  EXPECT_TRUE(WaitFor([&] { return greeting(22).rfind("SSH-2.0-", 0) == 0; }, 60s));
  Exec(container,
       "setsid python3 -c \"import socket\n"
       "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
       "s.bind(('0.0.0.0', 6443)); s.listen(8)\n"
       "while True:\n  c, _ = s.accept(); c.sendall(b'api-ok'); c.close()\n\" "
       ">/dev/null 2>&1 < /dev/null &");
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(greeting(6443), "");
  r.mutable_spec()->mutable_ingress()->set_destination_ports(0, 6443);
  ASSERT_TRUE(rules->Create(ctx().get(), r, &rop).ok());
  EXPECT_TRUE(WaitFor([&] { return greeting(6443) == "api-ok"; }, 20s));

  compute::DeleteInstanceRequest del;
  del.set_id(op.resource_id());
  ASSERT_TRUE(instances->Delete(ctx().get(), del, &op).ok());
  EXPECT_TRUE(WaitFor(
      [&] {
        Reply c = Call(control_, "GET", "/counts?cloud=nebius");
        return c.Json()->getValue<int64_t>("backend_instances") == 0 &&
               c.Json()->getValue<int64_t>("instances") == 0;
      },
      60s));
}

}  // namespace
}  // namespace gpuprov::emulator
