// SPDX-License-Identifier: Apache-2.0
#include "nebius_rules.h"

#include <Poco/Crypto/RSAKey.h>
#include <Poco/JWT/Signer.h>
#include <Poco/JWT/Token.h>
#include <gtest/gtest.h>

#include <sstream>

namespace gpuprov::nebius {
namespace {

using gpuprov::sdk::DriverError;

gpuprov_type_status StatusOfThrow(const std::function<void()>& f, std::string* message) {
  try {
    f();
  } catch (const DriverError& e) {
    *message = e.what();
    return e.status();
  }
  return GPUPROV_STATUS_OK;
}

TEST(NebiusPresets, GpuRequestsPickTheReferenceTable) {
  EXPECT_EQ(ChoosePreset(drivers::GpuRequest{"H100", 1}, "").InstanceType(),
            "gpu-h100-sxm/1gpu-16vcpu-200gb");
  EXPECT_EQ(ChoosePreset(drivers::GpuRequest{"h100", 8}, "").InstanceType(),
            "gpu-h100-sxm/8gpu-128vcpu-1600gb");
  EXPECT_EQ(ChoosePreset(drivers::GpuRequest{"H200", 8}, "").InstanceType(),
            "gpu-h200-sxm/8gpu-128vcpu-1600gb");
  EXPECT_EQ(ChoosePreset(drivers::GpuRequest{"B200", 8}, "").InstanceType(),
            "gpu-b200-sxm/8gpu-160vcpu-1792gb");
  EXPECT_EQ(ChoosePreset(drivers::GpuRequest{"L40S", 1}, "").InstanceType(),
            "gpu-l40s-a/1gpu-8vcpu-32gb");
  EXPECT_EQ(ChoosePreset(drivers::GpuRequest{"L40S", 4}, "").InstanceType(),
            "gpu-l40s-d/4gpu-128vcpu-768gb");
  const PlatformPreset cpu = ChoosePreset(std::nullopt, "");
  EXPECT_EQ(cpu.InstanceType(), "cpu-d3/8vcpu-32gb");
  EXPECT_EQ(cpu.gpu_count, 0);
}

TEST(NebiusPresets, UnknownGpuNamesWhatExists) {
  std::string msg;
  EXPECT_EQ(StatusOfThrow([] { ChoosePreset(drivers::GpuRequest{"A100", 1}, ""); }, &msg),
            GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_NE(msg.find("A100"), std::string::npos) << msg;
  EXPECT_NE(msg.find("H100"), std::string::npos) << msg;
  EXPECT_NE(msg.find("L40S"), std::string::npos) << msg;
  EXPECT_EQ(StatusOfThrow([] { ChoosePreset(drivers::GpuRequest{"H100", 3}, ""); }, &msg),
            GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_NE(msg.find("H100:8"), std::string::npos) << msg;
}

TEST(NebiusPresets, InstanceTypeIsPlatformSlashPreset) {
  const PlatformPreset p = ChoosePreset(std::nullopt, "gpu-h200-sxm/1gpu-16vcpu-200gb");
  EXPECT_EQ(p.platform, "gpu-h200-sxm");
  EXPECT_EQ(p.preset, "1gpu-16vcpu-200gb");
  EXPECT_EQ(p.gpu_type, "H200");
  EXPECT_EQ(p.gpu_count, 1);
  const PlatformPreset other = ChoosePreset(std::nullopt, "cpu-e2/4vcpu-16gb");
  EXPECT_EQ(other.platform, "cpu-e2");
  EXPECT_EQ(other.gpu_count, 0);
  std::string msg;
  EXPECT_EQ(StatusOfThrow([] { ChoosePreset(std::nullopt, "gpu-h100-sxm"); }, &msg),
            GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_NE(msg.find("<platform>/<preset>"), std::string::npos) << msg;
  EXPECT_FALSE(ParseInstanceType("a/b/c"));
  EXPECT_FALSE(ParseInstanceType("/b"));
}

TEST(NebiusEndpoints, RealServicesByDefault) {
  const Endpoints e = ParseEndpoint("");
  EXPECT_EQ(e.compute, "compute.api.nebius.cloud:443");
  EXPECT_EQ(e.vpc, "vpc.api.nebius.cloud:443");
  EXPECT_EQ(e.tokens, "tokens.iam.api.nebius.cloud:443");
  EXPECT_FALSE(e.plaintext);
}

TEST(NebiusEndpoints, OneAddressPlaintextOnlyToLoopback) {
  Endpoints e = ParseEndpoint("127.0.0.1:50051");
  EXPECT_EQ(e.compute, "127.0.0.1:50051");
  EXPECT_EQ(e.vpc, "127.0.0.1:50051");
  EXPECT_EQ(e.tokens, "127.0.0.1:50051");
  EXPECT_TRUE(e.plaintext);
  e = ParseEndpoint("http://127.0.0.5:7000/");
  EXPECT_EQ(e.compute, "127.0.0.5:7000");
  EXPECT_TRUE(e.plaintext);
  e = ParseEndpoint("https://127.0.0.1:7000");
  EXPECT_FALSE(e.plaintext);
  e = ParseEndpoint("compute.example.test");
  EXPECT_EQ(e.compute, "compute.example.test:443");
  EXPECT_FALSE(e.plaintext);
  e = ParseEndpoint("10.1.2.3:9000");
  EXPECT_FALSE(e.plaintext);
  std::string msg;
  EXPECT_EQ(StatusOfThrow([] { ParseEndpoint("http://10.1.2.3:9000"); }, &msg),
            GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_NE(msg.find("GPUPROV_NEBIUS_ENDPOINT"), std::string::npos) << msg;
  EXPECT_EQ(StatusOfThrow([] { ParseEndpoint("127.0.0.1:port"); }, &msg),
            GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(StatusOfThrow([] { ParseEndpoint("ftp://127.0.0.1:1"); }, &msg),
            GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_FALSE(IsLoopbackHost("127.0.0.1.example.com"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
}

TEST(NebiusStatus, ResourceExhaustedByDetail) {
  EXPECT_EQ(StatusOfGrpc(8, Detail::kQuotaFailure, "x"), GPUPROV_STATUS_QUOTA);
  EXPECT_EQ(StatusOfGrpc(8, Detail::kNone, "Quota limit exceeded for gpu"), GPUPROV_STATUS_QUOTA);
  EXPECT_EQ(StatusOfGrpc(8, Detail::kNotEnoughResources, "x"), GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(StatusOfGrpc(8, Detail::kNone, "no capacity"), GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(StatusOfGrpc(8, Detail::kTooManyRequests, "x"), GPUPROV_STATUS_TRANSIENT);
  EXPECT_TRUE(RetryableGrpc(8, Detail::kTooManyRequests));
  EXPECT_FALSE(RetryableGrpc(8, Detail::kNotEnoughResources));
  EXPECT_FALSE(RetryableGrpc(8, Detail::kQuotaFailure));
}

TEST(NebiusStatus, OtherCodes) {
  EXPECT_EQ(StatusOfGrpc(16, Detail::kNone, ""), GPUPROV_STATUS_AUTH);
  EXPECT_EQ(StatusOfGrpc(7, Detail::kNone, ""), GPUPROV_STATUS_AUTH);
  EXPECT_EQ(StatusOfGrpc(5, Detail::kNone, ""), GPUPROV_STATUS_NOT_FOUND);
  EXPECT_EQ(StatusOfGrpc(3, Detail::kOther, ""), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(StatusOfGrpc(6, Detail::kNone, ""), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(StatusOfGrpc(14, Detail::kNone, ""), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(StatusOfGrpc(4, Detail::kNone, ""), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(StatusOfGrpc(1, Detail::kNone, ""), GPUPROV_STATUS_CANCELLED);
  EXPECT_EQ(StatusOfGrpc(9, Detail::kNone, ""), GPUPROV_STATUS_FAILED);
  EXPECT_EQ(StatusOfGrpc(9, Detail::kOperationConflict, ""), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(StatusOfGrpc(12, Detail::kNone, ""), GPUPROV_STATUS_FAILED);
  EXPECT_TRUE(RetryableGrpc(14, Detail::kNone));
  EXPECT_TRUE(RetryableGrpc(4, Detail::kNone));
  EXPECT_FALSE(RetryableGrpc(16, Detail::kNone));
  EXPECT_FALSE(RetryableGrpc(3, Detail::kNone));
  EXPECT_EQ(GrpcCodeName(8), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(GrpcCodeName(99), "code 99");
}

TEST(NebiusState, InstanceStates) {
  EXPECT_EQ(VmStateOf(4, false), "running");
  EXPECT_EQ(VmStateOf(6, true), "pending");  // new instance: STOPPED while reconciling
  EXPECT_EQ(VmStateOf(6, false), "stopped");  // start failed
  EXPECT_EQ(VmStateOf(3, false), "pending");
  EXPECT_EQ(VmStateOf(1, true), "pending");
  EXPECT_EQ(VmStateOf(7, true), "terminated");
  EXPECT_EQ(VmStateOf(8, false), "error");
  EXPECT_EQ(InstanceStateName(6), "STOPPED");
  EXPECT_EQ(StripPrefixLength("203.0.113.7/32"), "203.0.113.7");
  EXPECT_EQ(StripPrefixLength("127.0.0.1"), "127.0.0.1");
}

// A preemptible VM Compute stopped: STOPPED, settled, not asked to stop (REFERENCE.md §3.7).
TEST(NebiusState, PreemptedIsAStoppedPreemptibleNobodyAskedToStop) {
  EXPECT_TRUE(PreemptedByCompute(true, 6, false, false));
  EXPECT_FALSE(PreemptedByCompute(false, 6, false, false));  // a regular VM: stopped
  EXPECT_FALSE(PreemptedByCompute(true, 6, true, false));    // still being made or started
  EXPECT_FALSE(PreemptedByCompute(true, 6, false, true));    // stopped on request
  EXPECT_FALSE(PreemptedByCompute(true, 4, false, false));   // running
  EXPECT_FALSE(PreemptedByCompute(true, 5, true, false));    // stopping
}

std::string NewPrivateKeyPem(Poco::Crypto::RSAKey* key) {
  std::ostringstream pub, priv;
  key->save(&pub, &priv);
  return priv.str();
}

TEST(NebiusCredentials, FileFieldsAndJwt) {
  Poco::Crypto::RSAKey key(Poco::Crypto::RSAKey::KL_2048, Poco::Crypto::RSAKey::EXP_LARGE);
  std::string pem = NewPrivateKeyPem(&key);
  std::string escaped;
  for (char c : pem) escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
  const std::string text = "{\"subject-credentials\": {\"alg\": \"RS256\", \"private-key\": \"" +
                           escaped +
                           "\", \"kid\": \"publickey-e00abc\", \"iss\": "
                           "\"serviceaccount-e00xyz\", \"sub\": \"serviceaccount-e00xyz\"}}";
  const ServiceAccountKey sa = ParseCredentialsFile(text, "/tmp/creds.json");
  EXPECT_EQ(sa.kid, "publickey-e00abc");
  EXPECT_EQ(sa.iss, "serviceaccount-e00xyz");
  EXPECT_EQ(sa.private_key_pem, pem);

  const std::string jwt = MakeJwt(sa, 1'700'000'000, 300);
  std::ostringstream pub;
  key.save(&pub);
  std::istringstream pub_in(pub.str());
  Poco::SharedPtr<Poco::Crypto::RSAKey> verify_key = new Poco::Crypto::RSAKey(&pub_in);
  Poco::JWT::Signer verifier(verify_key);
  verifier.addAlgorithm(Poco::JWT::Signer::ALGO_RS256);
  Poco::JWT::Token token;
  ASSERT_TRUE(verifier.tryVerify(jwt, token));
  EXPECT_EQ(token.getAlgorithm(), "RS256");
  EXPECT_EQ(token.header().getValue<std::string>("kid"), "publickey-e00abc");
  EXPECT_EQ(token.getIssuer(), "serviceaccount-e00xyz");
  EXPECT_EQ(token.getSubject(), "serviceaccount-e00xyz");
  EXPECT_EQ(token.getIssuedAt().epochTime(), 1'700'000'000);
  EXPECT_EQ(token.getExpiration().epochTime(), 1'700'000'300);

  // A key from another pair does not verify it.
  Poco::Crypto::RSAKey other(Poco::Crypto::RSAKey::KL_2048, Poco::Crypto::RSAKey::EXP_LARGE);
  std::ostringstream other_pub;
  other.save(&other_pub);
  std::istringstream other_in(other_pub.str());
  Poco::JWT::Signer wrong(Poco::SharedPtr<Poco::Crypto::RSAKey>(new Poco::Crypto::RSAKey(&other_in)));
  wrong.addAlgorithm(Poco::JWT::Signer::ALGO_RS256);
  Poco::JWT::Token t2;
  EXPECT_FALSE(wrong.tryVerify(jwt, t2));
}

TEST(NebiusCredentials, BadFilesNameTheFieldNotTheKey) {
  std::string msg;
  EXPECT_EQ(StatusOfThrow(
                [] {
                  ParseCredentialsFile(
                      R"({"subject-credentials": {"private-key": "SECRETPEM", "iss": "sa"}})",
                      "/x/creds.json");
                },
                &msg),
            GPUPROV_STATUS_AUTH);
  EXPECT_NE(msg.find("subject-credentials.kid"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/x/creds.json"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("SECRETPEM"), std::string::npos) << msg;
  EXPECT_EQ(StatusOfThrow([] { ParseCredentialsFile("not json", "f"); }, &msg),
            GPUPROV_STATUS_AUTH);
  EXPECT_EQ(StatusOfThrow([] { ParseCredentialsFile("{}", "f"); }, &msg), GPUPROV_STATUS_AUTH);
  EXPECT_NE(msg.find("subject-credentials"), std::string::npos);
  const ServiceAccountKey bad{"-----BEGIN PRIVATE KEY-----\nSECRETJUNK\n-----END PRIVATE KEY-----\n",
                              "k", "i", "i", "f.json"};
  EXPECT_EQ(StatusOfThrow([&] { MakeJwt(bad, 0); }, &msg), GPUPROV_STATUS_AUTH);
  EXPECT_EQ(msg.find("SECRETJUNK"), std::string::npos) << msg;
}

TEST(NebiusProfile, ParentIdOfDefaultOrNamedProfile) {
  const std::string yaml =
      "default: work\n"
      "profiles:\n"
      "  work:\n"
      "    endpoint: api.nebius.cloud\n"
      "    parent-id: project-e00work\n"
      "  home:\n"
      "    parent-id: project-e00home\n";
  EXPECT_EQ(ProfileParentId(yaml).value_or(""), "project-e00work");
  EXPECT_EQ(ProfileParentId(yaml, "home").value_or(""), "project-e00home");
  EXPECT_FALSE(ProfileParentId(yaml, "missing"));
  EXPECT_FALSE(ProfileParentId("profiles:\n  a:\n    parent-id: p\n"));
  EXPECT_FALSE(ProfileParentId("::: not yaml"));
}

TEST(NebiusUserData, CloudConfigUsersThenTheBootScript) {
  const std::string key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample me@host";
  const std::string ud = MakeUserData("ubuntu", key + "\n", "#!/bin/bash\necho hi\n");
  EXPECT_EQ(ud.rfind("Content-Type: multipart/mixed; boundary=", 0), 0u) << ud;
  const size_t cfg = ud.find("Content-Type: text/cloud-config");
  const size_t script = ud.find("Content-Type: text/x-shellscript");
  ASSERT_NE(cfg, std::string::npos);
  ASSERT_NE(script, std::string::npos);
  EXPECT_LT(cfg, script);
  EXPECT_NE(ud.find("#cloud-config\nusers:\n  - name: \"ubuntu\"\n"), std::string::npos) << ud;
  EXPECT_NE(ud.find("ssh_authorized_keys:\n      - \"" + key + "\"\n"), std::string::npos) << ud;
  EXPECT_NE(ud.find("\n\n#!/bin/bash\necho hi\n--"), std::string::npos) << ud;
  EXPECT_EQ(ud.substr(ud.size() - 5), "==--\n") << ud;  // the closing boundary

  const std::string only = MakeUserData("ubuntu", key, "");
  EXPECT_EQ(only.find("x-shellscript"), std::string::npos);
  const std::string cc = MakeUserData("ubuntu", key, "#cloud-config\nruncmd: [true]");
  EXPECT_EQ(cc.find("x-shellscript"), std::string::npos);
  EXPECT_NE(cc.find("runcmd: [true]\n--"), std::string::npos) << cc;
  EXPECT_NE(MakeUserData("a\"b", key, "").find("name: \"a\\\"b\""), std::string::npos);
}

TEST(NebiusNames, LabelsOwnershipAndRuleGroups) {
  EXPECT_EQ(SecurityGroupName("demo"), "gpuprov-demo");
  EXPECT_EQ(BootDiskName("demo"), "demo-boot");
  const auto labels = LabelsFor("demo", {{"Team X", "ML/Ops"}, {"gpuprov", "0"}});
  EXPECT_EQ(labels.at("gpuprov"), "1");
  EXPECT_EQ(labels.at("gpuprov-name"), "demo");
  EXPECT_EQ(labels.at("team_x"), "ml_ops");
  EXPECT_TRUE(OwnedBy(labels));
  EXPECT_TRUE(OwnedBy(labels, "demo"));
  EXPECT_FALSE(OwnedBy(labels, "other"));
  EXPECT_FALSE(OwnedBy({{"gpuprov-name", "demo"}}, "demo"));
  const auto groups = PortGroups({22, 80, 443, 6443, 1, 2, 3, 4, 5});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].size(), 8u);
  EXPECT_EQ(groups[1], std::vector<int>{5});
  EXPECT_TRUE(PortGroups({}).empty());
}

TEST(NebiusSources, PlanReplacesWiderRulesAndKeepsTheirOtherPorts) {
  drivers::PortSources s;
  s.allow_from = {"10.0.0.0/8"};
  s.narrowed = {80, 443, 6443};
  // The rule create made (every port to everyone) and the egress-free group's other rule.
  std::vector<IngressRule> rules = {
      {"r1", "ingress-tcp-22-80-443-6443", {22, 80, 443, 6443}, {"0.0.0.0/0"}},
      {"r2", "mine", {8080}, {"0.0.0.0/0"}}};
  SourcesPlan plan = PlanSources(rules, {22, 80, 443, 6443}, s);
  EXPECT_TRUE(plan.problem.empty());
  EXPECT_EQ(plan.remove_ids, (std::vector<std::string>{"r1"}));
  ASSERT_EQ(plan.add.size(), 2u);
  EXPECT_EQ(plan.add[0].ports, (std::vector<int>{22}));  // 22 again, from its own sources
  EXPECT_EQ(plan.add[0].cidrs, (std::vector<std::string>{"0.0.0.0/0"}));
  EXPECT_EQ(plan.add[1].ports, (std::vector<int>{80, 443, 6443}));
  EXPECT_EQ(plan.add[1].cidrs, (std::vector<std::string>{"10.0.0.0/8"}));
  EXPECT_EQ(plan.add[1].name.rfind("ingress-tcp-80-443-6443-src-", 0), 0u) << plan.add[1].name;
  EXPECT_EQ(plan.add[1].name.size(), std::string("ingress-tcp-80-443-6443-src-").size() + 8);

  // Applied: nothing more to do.
  std::vector<IngressRule> after = {rules[1]};
  for (auto r : plan.add) after.push_back(r);
  SourcesPlan again = PlanSources(after, {22, 80, 443, 6443}, s);
  EXPECT_TRUE(again.remove_ids.empty());
  EXPECT_TRUE(again.add.empty());

  // More than 8 sources: rules of at most 8 CIDRs; a rule opening every port cannot be kept.
  drivers::PortSources many;
  for (int i = 0; i < 9; ++i) many.allow_from.push_back("10." + std::to_string(i) + ".0.0/16");
  many.narrowed = {6443};
  plan = PlanSources({}, {6443}, many);
  ASSERT_EQ(plan.add.size(), 2u);
  EXPECT_EQ(plan.add[0].cidrs.size(), 8u);
  EXPECT_EQ(plan.add[1].cidrs.size(), 1u);
  EXPECT_NE(plan.add[0].name, plan.add[1].name);
  plan = PlanSources({{"r9", "all", {}, {"0.0.0.0/0"}}}, {6443}, many);
  EXPECT_NE(plan.problem.find("r9"), std::string::npos) << plan.problem;
}

// F12: an empty CIDR list means any address (security_rule.proto), unless the rule names a
// security group instead.
TEST(NebiusSecurityRules, AnEmptyCidrListIsAnyAddress) {
  EXPECT_TRUE(AnyAddress({}, ""));
  EXPECT_TRUE(AnyAddress({"0.0.0.0/0"}, ""));
  EXPECT_TRUE(AnyAddress({"10.0.0.0/8", "0.0.0.0/0"}, ""));
  EXPECT_FALSE(AnyAddress({"203.0.113.7/32"}, ""));
  EXPECT_FALSE(AnyAddress({}, "vpcsecuritygroup-e00abc"));
}

}  // namespace
}  // namespace gpuprov::nebius
