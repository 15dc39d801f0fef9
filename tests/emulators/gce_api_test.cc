// SPDX-License-Identifier: Apache-2.0
//
// The GCE emulator over HTTP with the memory backend: the service-account key it writes,
// the token endpoint's JWT checks, the Compute paths (instances, operations, firewalls,
// aggregated lists, catalogue), validation, and the fault knobs as GCE shows them.
#include <Poco/Crypto/RSADigestEngine.h>
#include <Poco/Crypto/RSAKey.h>
#include <Poco/URI.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "emulator.h"
#include "emulator_test_util.h"
#include "gce_api.h"

namespace gpuprov::emulator {
namespace {

using testing::Call;
using testing::ReachablePorts;
using testing::Reply;
using testing::WaitFor;
using namespace std::chrono_literals;

constexpr const char* kPublicKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPtlieUdwvU3Yi8XHX36t5VZpca1by3GqjV+S0aD87Tm emu-test";

std::string B64Url(const std::string& bytes) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t n = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    out += {a[n >> 18 & 63], a[n >> 12 & 63], a[n >> 6 & 63], a[n & 63]};
  }
  if (bytes.size() - i == 1) {
    uint32_t n = uint8_t(bytes[i]) << 16;
    out += {a[n >> 18 & 63], a[n >> 12 & 63]};
  } else if (bytes.size() - i == 2) {
    uint32_t n = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += {a[n >> 18 & 63], a[n >> 12 & 63], a[n >> 6 & 63]};
  }
  return out;
}

std::string FormEncode(const std::string& s) {
  std::string out;
  Poco::URI::encode(s, "!#$&'()*+,/:;=?@[]~ ", out);
  return out;
}

// A signed JWT-bearer assertion (RS256) with the given claims.
std::string Assertion(const std::string& pem, const std::string& iss, const std::string& aud,
                      int64_t iat, int64_t exp,
                      const std::string& scope = "https://www.googleapis.com/auth/cloud-platform") {
  JsonObject h = NewObject();
  h->set("alg", std::string("RS256"));
  h->set("typ", std::string("JWT"));
  JsonObject c = NewObject();
  c->set("iss", iss);
  c->set("scope", scope);
  c->set("aud", aud);
  c->set("iat", iat);
  c->set("exp", exp);
  const std::string input = B64Url(ToJson(h)) + "." + B64Url(ToJson(c));
  std::istringstream key_stream(pem);
  Poco::Crypto::RSAKey key(nullptr, &key_stream);
  Poco::Crypto::RSADigestEngine engine(key, "SHA256");
  engine.update(input);
  const auto& sig = engine.signature();
  return input + "." + B64Url(std::string(sig.begin(), sig.end()));
}

int64_t Now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class GceApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gce-api-test-" + std::to_string(getpid()) + "-" + RandomHex(4));
    std::filesystem::create_directories(dir_);
    key_path_ = (dir_ / "key.json").string();
    EmulatorOptions o;
    o.backend = "memory";
    o.boot_seconds = 0.3;
    o.clouds = {"gcp"};
    o.tokens["gcp"] = {key_path_};  // absent: the emulator writes its key there
    emu_ = std::make_unique<Emulator>(o);
    emu_->Start();
    base_ = emu_->BaseUrl("gcp");
    control_ = emu_->ControlUrl();
    std::ifstream in(key_path_);
    std::stringstream text;
    text << in.rdbuf();
    key_ = ParseObject(text.str());
    ASSERT_TRUE(key_) << "no key file at " << key_path_;
    token_ = NewToken();
  }
  void TearDown() override {
    emu_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string Str(const std::string& k) const { return GetString(key_, k).value_or(""); }

  Reply TokenRequest(const std::string& assertion, const std::string& path = "/token",
                     const std::string& grant = "urn:ietf:params:oauth:grant-type:jwt-bearer") {
    return Call(base_, "POST", path,
                "grant_type=" + FormEncode(grant) + "&assertion=" + FormEncode(assertion), "",
                {{"Content-Type", "application/x-www-form-urlencoded"}});
  }
  std::string NewToken() {
    Reply r = TokenRequest(
        Assertion(Str("private_key"), Str("client_email"), Str("token_uri"), Now(), Now() + 3600));
    EXPECT_EQ(r.status, 200) << r.body;
    return GetString(r.Json(), "access_token").value_or("");
  }
  std::string P(const std::string& rest) const {
    return "/compute/v1/projects/" + Str("project_id") + rest;
  }
  Reply Gce(const std::string& method, const std::string& rest, const std::string& body = "") {
    return Call(base_, method, P(rest), body, token_);
  }
  Reply Control(const std::string& method, const std::string& path, const std::string& body = "") {
    return Call(control_, method, path, body);
  }
  void Fault(const std::string& json) {
    Reply r = Control("POST", "/faults", json);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  int64_t Count(const std::string& what) {
    return GetInt(Control("GET", "/counts?cloud=gcp").Json(), what).value_or(-1);
  }

  static std::string InstanceBody(const std::string& name,
                                  const std::string& zone = "us-central1-a",
                                  const std::string& machine = "g2-standard-4",
                                  bool terminate = true, const std::string& extra_items = "") {
    return R"({"name":")" + name + R"(","machineType":"zones/)" + zone + "/machineTypes/" +
           machine + R"(",)" +
           (terminate ? R"("scheduling":{"onHostMaintenance":"TERMINATE","automaticRestart":true},)"
                      : "") +
           R"("disks":[{"boot":true,"autoDelete":true,"initializeParams":{"sourceImage":)"
           R"("projects/deeplearning-platform-release/global/images/family/common-cu128-ubuntu-2204-nvidia-570",)"
           R"("diskSizeGb":"100"}}],)"
           R"("networkInterfaces":[{"network":"global/networks/default","accessConfigs":[{"type":"ONE_TO_ONE_NAT","name":"External NAT"}]}],)"
           R"("metadata":{"items":[{"key":"ssh-keys","value":"ubuntu:)" +
           std::string(kPublicKey) + R"("})" + extra_items +
           R"(]},)"
           R"("labels":{"gpuprov":"1","gpuprov-name":")" +
           name + R"("},"tags":{"items":["gpuprov-)" + name + R"("]}})";
  }

  // Polls an operation (zonal when zone is set) until DONE.
  JsonObject WaitOp(const JsonObject& op, const std::string& zone = "") {
    const std::string name = GetString(op, "name").value_or("");
    JsonObject last = op;
    WaitFor(
        [&] {
          Reply r = Gce("GET", zone.empty() ? "/global/operations/" + name
                                            : "/zones/" + zone + "/operations/" + name);
          last = r.Json();
          return GetString(last, "status").value_or("") == "DONE";
        },
        10s);
    return last;
  }

  std::filesystem::path dir_;
  std::string key_path_;
  std::unique_ptr<Emulator> emu_;
  std::string base_, control_, token_;
  JsonObject key_;
};

TEST_F(GceApiTest, WritesAServiceAccountKeyWhoseTokenUriIsTheEmulator) {
  EXPECT_EQ(Str("type"), "service_account");
  EXPECT_EQ(Str("token_uri"), base_ + "/token");
  EXPECT_NE(Str("private_key").find("-----BEGIN PRIVATE KEY-----"), std::string::npos);
  EXPECT_NE(Str("client_email").find(".iam.gserviceaccount.com"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(stat(key_path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(GceApiTest, TokenEndpointVerifiesTheJwt) {
  EXPECT_FALSE(token_.empty());
  Reply ok =
      TokenRequest(Assertion(Str("private_key"), Str("client_email"),
                             "https://accounts.google.com/o/oauth2/token", Now(), Now() + 3600),
                   "/o/oauth2/token");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(GetInt(ok.Json(), "expires_in").value_or(0), 3599);
  EXPECT_EQ(GetString(ok.Json(), "token_type").value_or(""), "Bearer");

  Poco::Crypto::RSAKey other(Poco::Crypto::RSAKey::KL_2048, Poco::Crypto::RSAKey::EXP_LARGE);
  std::ostringstream pub, priv;
  other.save(&pub, &priv);
  Reply forged = TokenRequest(
      Assertion(priv.str(), Str("client_email"), Str("token_uri"), Now(), Now() + 3600));
  EXPECT_EQ(forged.status, 400);
  EXPECT_EQ(GetString(forged.Json(), "error").value_or(""), "invalid_grant");
  EXPECT_EQ(GetString(forged.Json(), "error_description").value_or(""), "Invalid JWT Signature.");

  Reply expired = TokenRequest(Assertion(Str("private_key"), Str("client_email"), Str("token_uri"),
                                         Now() - 7200, Now() - 3600));
  EXPECT_EQ(expired.status, 400);
  EXPECT_NE(expired.body.find("short-lived"), std::string::npos) << expired.body;
  Reply too_long = TokenRequest(
      Assertion(Str("private_key"), Str("client_email"), Str("token_uri"), Now(), Now() + 7200));
  EXPECT_EQ(too_long.status, 400);
  Reply wrong_aud = TokenRequest(Assertion(Str("private_key"), Str("client_email"),
                                           "https://example.com/token", Now(), Now() + 60));
  EXPECT_EQ(wrong_aud.status, 400);
  EXPECT_NE(wrong_aud.body.find("audience"), std::string::npos) << wrong_aud.body;
  Reply stranger = TokenRequest(Assertion(Str("private_key"), "nobody@x.iam.gserviceaccount.com",
                                          Str("token_uri"), Now(), Now() + 60));
  EXPECT_EQ(stranger.status, 400);
  Reply grant = TokenRequest("x", "/token", "password");
  EXPECT_EQ(grant.status, 400);
  EXPECT_EQ(GetString(grant.Json(), "error").value_or(""), "unsupported_grant_type");
}

TEST_F(GceApiTest, ComputeNeedsAnIssuedTokenAndRefusesExpiredOnes) {
  Reply anon = Call(base_, "GET", P(""));
  EXPECT_EQ(anon.status, 401);
  EXPECT_EQ(GetString(GetObject(anon.Json(), "error"), "status").value_or(""), "UNAUTHENTICATED");
  EXPECT_NE(anon.Header("www-authenticate").find("invalid_token"), std::string::npos);
  EXPECT_EQ(Call(base_, "GET", P(""), "", "ya29.made-up").status, 401);
  Reply project = Gce("GET", "");
  ASSERT_EQ(project.status, 200) << project.body;
  EXPECT_EQ(GetString(project.Json(), "name").value_or(""), Str("project_id"));
  EXPECT_EQ(Call(base_, "GET", "/compute/v1/projects/someone-else", "", token_).status, 403);
  ASSERT_EQ(Control("POST", "/settings", R"({"cloud":"gcp","expire_tokens":true})").status, 200);
  EXPECT_EQ(Gce("GET", "").status, 401);
  token_ = NewToken();
  EXPECT_EQ(Gce("GET", "").status, 200);
}

// --- the other ways to a token (issue 17) ---

TEST_F(GceApiTest, RefreshGrantOfTheEmulatorsUserCredentials) {
  auto refresh = [&](const std::string& secret, const std::string& refresh_token) {
    return Call(base_, "POST", "/token",
                "grant_type=refresh_token&client_id=" +
                    FormEncode("emulator-client.apps.googleusercontent.com") +
                    "&client_secret=" + FormEncode(secret) +
                    "&refresh_token=" + FormEncode(refresh_token),
                "", {{"Content-Type", "application/x-www-form-urlencoded"}});
  };
  Reply ok = refresh("emulator-client-secret", "1//emulator-refresh-token");
  ASSERT_EQ(ok.status, 200) << ok.body;
  const std::string user_token = GetString(ok.Json(), "access_token").value_or("");
  EXPECT_EQ(Call(base_, "GET", P(""), "", user_token).status, 200);
  Reply revoked = refresh("emulator-client-secret", "1//other");
  EXPECT_EQ(revoked.status, 400);
  EXPECT_EQ(GetString(revoked.Json(), "error").value_or(""), "invalid_grant");
  Reply client = refresh("wrong-secret", "1//emulator-refresh-token");
  EXPECT_EQ(client.status, 401);
  EXPECT_EQ(GetString(client.Json(), "error").value_or(""), "invalid_client");
}

TEST_F(GceApiTest, StsExchangesTheSubjectTokenOfThePoolAndGenerateAccessTokenImpersonates) {
  auto sts = [&](const std::string& audience, const std::string& subject) {
    return Call(base_, "POST", "/v1/token",
                "grant_type=" + FormEncode("urn:ietf:params:oauth:grant-type:token-exchange") +
                    "&audience=" + FormEncode(audience) +
                    "&scope=" + FormEncode("https://www.googleapis.com/auth/cloud-platform") +
                    "&requested_token_type=" +
                    FormEncode("urn:ietf:params:oauth:token-type:access_token") +
                    "&subject_token=" + FormEncode(subject) + "&subject_token_type=" +
                    FormEncode("urn:ietf:params:oauth:token-type:jwt"),
                "", {{"Content-Type", "application/x-www-form-urlencoded"}});
  };
  const std::string pool =
      "//iam.googleapis.com/projects/470000000001/locations/global/workloadIdentityPools/"
      "gpuprov-pool/providers/gpuprov-provider";
  Reply ok = sts(pool, "emulator-subject-token");
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(GetString(ok.Json(), "issued_token_type").value_or(""),
            "urn:ietf:params:oauth:token-type:access_token");
  const std::string federated = GetString(ok.Json(), "access_token").value_or("");
  EXPECT_EQ(Call(base_, "GET", P(""), "", federated).status, 200);
  EXPECT_EQ(GetString(sts(pool, "forged").Json(), "error").value_or(""), "invalid_grant");
  EXPECT_EQ(GetString(sts("//iam.googleapis.com/x", "emulator-subject-token").Json(), "error")
                .value_or(""),
            "invalid_target");

  const std::string generate =
      "/v1/projects/-/serviceAccounts/" + Str("client_email") + ":generateAccessToken";
  const std::string body = R"({"scope":["https://www.googleapis.com/auth/cloud-platform"]})";
  EXPECT_EQ(Call(base_, "POST", generate, body, "ya29.made-up").status, 401);
  EXPECT_EQ(Call(base_, "POST",
                 "/v1/projects/-/serviceAccounts/nobody@x.iam.gserviceaccount.com:"
                 "generateAccessToken",
                 body, federated)
                .status,
            404);
  EXPECT_EQ(Call(base_, "POST", generate, "{}", federated).status, 400);
  Reply sa = Call(base_, "POST", generate, body, federated);
  ASSERT_EQ(sa.status, 200) << sa.body;
  EXPECT_FALSE(GetString(sa.Json(), "expireTime").value_or("").empty());
  EXPECT_EQ(
      Call(base_, "GET", P(""), "", GetString(sa.Json(), "accessToken").value_or("")).status, 200);
}

TEST_F(GceApiTest, MetadataServerAnswersOnlyWithTheFlavorHeader) {
  const std::string token_path = "/computeMetadata/v1/instance/service-accounts/default/token";
  Reply bare = Call(base_, "GET", token_path);
  EXPECT_EQ(bare.status, 403);
  Reply ok = Call(base_, "GET", token_path, "", "", {{"Metadata-Flavor", "Google"}});
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.Header("metadata-flavor"), "Google");
  EXPECT_EQ(Call(base_, "GET", P(""), "", GetString(ok.Json(), "access_token").value_or("")).status,
            200);
  Reply project = Call(base_, "GET", "/computeMetadata/v1/project/project-id", "", "",
                       {{"Metadata-Flavor", "Google"}});
  EXPECT_EQ(project.body, Str("project_id"));
  auto service_account = [&](bool on) {
    return Control("POST", "/settings",
                   std::string(R"({"cloud":"gcp","metadata_service_account":)") +
                       (on ? "true" : "false") + "}")
        .status;
  };
  ASSERT_EQ(service_account(false), 200);
  EXPECT_EQ(Call(base_, "GET", token_path, "", "", {{"Metadata-Flavor", "Google"}}).status, 404);
  ASSERT_EQ(service_account(true), 200);
}

TEST_F(GceApiTest, InstanceLifecycleWithOperations) {
  JsonObject op =
      Gce("POST", "/zones/us-central1-a/instances?requestId=r-1", InstanceBody("vm1")).Json();
  ASSERT_EQ(GetString(op, "kind").value_or(""), "compute#operation") << ToJson(op);
  EXPECT_EQ(GetString(op, "operationType").value_or(""), "insert");
  EXPECT_NE(GetString(op, "status").value_or(""), "DONE");
  EXPECT_NE(GetString(op, "targetLink").value_or("").find("/zones/us-central1-a/instances/vm1"),
            std::string::npos);
  // The same requestId is the same operation; no second instance.
  JsonObject again =
      Gce("POST", "/zones/us-central1-a/instances?requestId=r-1", InstanceBody("vm1")).Json();
  EXPECT_EQ(GetString(again, "name"), GetString(op, "name"));
  EXPECT_EQ(Count("instances"), 1);
  Reply dup = Gce("POST", "/zones/us-central1-a/instances", InstanceBody("vm1"));
  EXPECT_EQ(dup.status, 409);
  EXPECT_NE(dup.body.find("alreadyExists"), std::string::npos);

  JsonObject inst = Gce("GET", "/zones/us-central1-a/instances/vm1").Json();
  EXPECT_EQ(GetString(inst, "status").value_or(""), "PROVISIONING");
  JsonObject done = WaitOp(op, "us-central1-a");
  EXPECT_EQ(GetString(done, "status").value_or(""), "DONE");
  EXPECT_FALSE(done->has("error")) << ToJson(done);
  inst = Gce("GET", "/zones/us-central1-a/instances/vm1").Json();
  EXPECT_EQ(GetString(inst, "status").value_or(""), "RUNNING");
  JsonObject ac =
      GetArray(GetArray(inst, "networkInterfaces")->getObject(0), "accessConfigs")->getObject(0);
  EXPECT_EQ(GetString(ac, "natIP").value_or("").rfind("127.", 0), 0u) << ToJson(inst);
  EXPECT_EQ(GetString(GetObject(inst, "labels"), "gpuprov").value_or(""), "1");

  // Aggregated list with filters; empty zones carry a warning.
  JsonObject agg =
      Gce("GET", "/aggregated/instances?filter=" + FormEncode("name = \"vm1\"")).Json();
  JsonObject items = GetObject(agg, "items");
  EXPECT_EQ(GetArray(GetObject(items, "zones/us-central1-a"), "instances")->size(), 1u)
      << ToJson(agg);
  EXPECT_TRUE(GetObject(GetObject(items, "zones/us-east1-b"), "warning"));
  JsonObject none =
      Gce("GET", "/aggregated/instances?filter=" + FormEncode("labels.gpuprov = \"2\"")).Json();
  EXPECT_FALSE(GetObject(GetObject(none, "items"), "zones/us-central1-a")->has("instances"));
  JsonObject zone_list = Gce("GET", "/zones/us-east1-b/instances").Json();
  EXPECT_FALSE(zone_list->has("items")) << "items is absent when empty";

  JsonObject del = Gce("DELETE", "/zones/us-central1-a/instances/vm1").Json();
  EXPECT_EQ(GetString(del, "operationType").value_or(""), "delete");
  EXPECT_EQ(
      GetString(Gce("GET", "/zones/us-central1-a/instances/vm1").Json(), "status").value_or(""),
      "STOPPING");
  WaitOp(del, "us-central1-a");
  Reply gone = Gce("GET", "/zones/us-central1-a/instances/vm1");
  EXPECT_EQ(gone.status, 404);
  EXPECT_NE(gone.body.find("\"notFound\""), std::string::npos);
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("backend_instances"), 0);
}

TEST_F(GceApiTest, StopAndStartGiveANewEphemeralExternalIp) {
  JsonObject op = Gce("POST", "/zones/us-central1-a/instances", InstanceBody("vm1")).Json();
  WaitOp(op, "us-central1-a");
  const auto nat_ip = [&] {
    JsonObject inst = Gce("GET", "/zones/us-central1-a/instances/vm1").Json();
    JsonObject ac =
        GetArray(GetArray(inst, "networkInterfaces")->getObject(0), "accessConfigs")->getObject(0);
    return GetString(ac, "natIP").value_or("");
  };
  const auto status = [&] {
    return GetString(Gce("GET", "/zones/us-central1-a/instances/vm1").Json(), "status").value_or("");
  };
  ASSERT_EQ(status(), "RUNNING");
  const std::string before = nat_ip();
  ASSERT_FALSE(before.empty());
  JsonObject stop = Gce("POST", "/zones/us-central1-a/instances/vm1/stop", "").Json();
  EXPECT_EQ(GetString(stop, "operationType").value_or(""), "stop") << ToJson(stop);
  EXPECT_EQ(status(), "TERMINATED");
  JsonObject start = Gce("POST", "/zones/us-central1-a/instances/vm1/start", "").Json();
  EXPECT_EQ(GetString(start, "operationType").value_or(""), "start") << ToJson(start);
  ASSERT_TRUE(WaitFor([&] { return status() == "RUNNING"; }, 5s));
  EXPECT_NE(nat_ip(), before);
  EXPECT_EQ(Gce("POST", "/zones/us-central1-a/instances/nope/stop", "").status, 404);
}

TEST_F(GceApiTest, InsertValidationFollowsGce) {
  Reply migrate = Gce("POST", "/zones/us-central1-a/instances",
                      InstanceBody("vm2", "us-central1-a", "g2-standard-4", false));
  EXPECT_EQ(migrate.status, 400);
  EXPECT_NE(migrate.body.find("do not support live migration"), std::string::npos);
  Reply no_l4 = Gce("POST", "/zones/us-central1-f/instances", InstanceBody("vm2", "us-central1-f"));
  EXPECT_EQ(no_l4.status, 400);
  EXPECT_NE(no_l4.body.find("does not exist in zone"), std::string::npos) << no_l4.body;
  Reply bad_name = Gce("POST", "/zones/us-central1-a/instances", InstanceBody("Vm_2"));
  EXPECT_EQ(bad_name.status, 400);
  std::string big = R"(,{"key":"user-data","value":")" + std::string(262145, 'x') + R"("})";
  Reply too_big = Gce("POST", "/zones/us-central1-a/instances",
                      InstanceBody("vm2", "us-central1-a", "g2-standard-4", true, big));
  EXPECT_EQ(too_big.status, 400);
  std::string body = InstanceBody("vm2");
  body.replace(body.find("common-cu128-ubuntu-2204-nvidia-570"), 35, "no-such-family");
  Reply image = Gce("POST", "/zones/us-central1-a/instances", body);
  EXPECT_EQ(image.status, 404);
  EXPECT_EQ(Gce("POST", "/zones/mars-1-a/instances", InstanceBody("vm2")).status, 404);
  EXPECT_EQ(Count("instances"), 0);
  // An N1 type takes guestAccelerators.
  std::string n1 = InstanceBody("vm3", "us-central1-a", "n1-standard-4");
  n1.insert(
      1,
      R"("guestAccelerators":[{"acceleratorType":"zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4","acceleratorCount":1}],)");
  Reply t4 = Gce("POST", "/zones/us-central1-a/instances", n1);
  EXPECT_EQ(t4.status, 200) << t4.body;
}

// plugins/gcp/REFERENCE.md §F1: A3 Ultra (H200) and A4 (B200) take Hyperdisk only, so the
// Persistent Disk types are refused for them; hyperdisk-balanced is taken and reported.
TEST_F(GceApiTest, HyperdiskOnlySeriesRefusePersistentDisk) {
  auto with_disk = [](const std::string& name, const std::string& machine,
                      const std::string& disk_type) {
    std::string body = InstanceBody(name, "us-central1-b", machine);
    body.insert(body.find(R"("diskSizeGb")"),
                R"("diskType":"zones/us-central1-b/diskTypes/)" + disk_type + R"(",)");
    return body;
  };
  for (const char* machine : {"a3-ultragpu-8g", "a4-highgpu-8g"}) {
    for (const char* pd : {"pd-balanced", "pd-ssd", "pd-standard"}) {
      Reply r = Gce("POST", "/zones/us-central1-b/instances", with_disk("hd", machine, pd));
      EXPECT_EQ(r.status, 400) << machine << " " << pd << ": " << r.body;
      EXPECT_NE(r.body.find(std::string("[") + pd + "] features are not compatible"),
                std::string::npos)
          << r.body;
    }
  }
  // No diskType is pd-standard: refused too.
  EXPECT_EQ(Gce("POST", "/zones/us-central1-b/instances",
                InstanceBody("hd", "us-central1-b", "a3-ultragpu-8g"))
                .status,
            400);
  EXPECT_EQ(Count("instances"), 0);
  Reply ok = Gce("POST", "/zones/us-central1-b/instances",
                 with_disk("hd", "a3-ultragpu-8g", "hyperdisk-balanced"));
  ASSERT_EQ(ok.status, 200) << ok.body;
  JsonObject disk = Gce("GET", "/zones/us-central1-b/disks/hd").Json();
  EXPECT_EQ(GetString(disk, "type").value_or(""),
            "https://www.googleapis.com/compute/v1/projects/" + Str("project_id") +
                "/zones/us-central1-b/diskTypes/hyperdisk-balanced");
  // Other series keep Persistent Disk.
  Reply g2 = Gce("POST", "/zones/us-central1-b/instances",
                 with_disk("pd", "g2-standard-4", "pd-balanced"));
  EXPECT_EQ(g2.status, 200) << g2.body;
  Reply unknown = Gce("POST", "/zones/us-central1-b/instances",
                      with_disk("pd2", "g2-standard-4", "pd-imaginary"));
  EXPECT_EQ(unknown.status, 400) << unknown.body;
}

// Compute Engine resources as Google returns them (issue 30): every link a full URL, the GPUs
// of an accelerator-optimised machine type in guestAccelerators although the insert named
// none, and a partial scheduling completed with its defaults.
TEST_F(GceApiTest, InstancesComeBackAsGoogleReturnsThem) {
  const std::string base = "https://www.googleapis.com/compute/v1/projects/" + Str("project_id");
  ASSERT_EQ(Gce("POST", "/zones/us-central1-a/instances", InstanceBody("g2")).status, 200);
  std::string n1 = InstanceBody("n1", "us-central1-a", "n1-standard-4");
  n1.insert(
      1,
      R"("guestAccelerators":[{"acceleratorType":"nvidia-tesla-t4","acceleratorCount":2}],)");
  ASSERT_EQ(Gce("POST", "/zones/us-central1-a/instances", n1).status, 200);

  JsonObject g2 = Gce("GET", "/zones/us-central1-a/instances/g2").Json();
  JsonArray ga = GetArray(g2, "guestAccelerators");
  ASSERT_TRUE(ga && ga->size() == 1) << ToJson(g2);
  EXPECT_EQ(GetString(ga->getObject(0), "acceleratorType").value_or(""),
            base + "/zones/us-central1-a/acceleratorTypes/nvidia-l4");
  EXPECT_EQ(GetInt(ga->getObject(0), "acceleratorCount").value_or(0), 1);
  JsonObject sch = GetObject(g2, "scheduling");
  EXPECT_EQ(GetString(sch, "onHostMaintenance").value_or(""), "TERMINATE");
  EXPECT_EQ(GetBool(sch, "automaticRestart"), std::optional<bool>(true));
  EXPECT_EQ(GetBool(sch, "preemptible"), std::optional<bool>(false)) << ToJson(sch);
  EXPECT_EQ(GetString(sch, "provisioningModel").value_or(""), "STANDARD") << ToJson(sch);
  for (const char* link : {"selfLink", "zone", "machineType"}) {
    EXPECT_EQ(GetString(g2, link).value_or("").rfind(base + "/", 0), 0u) << link;
  }
  JsonObject nic = GetArray(g2, "networkInterfaces")->getObject(0);
  EXPECT_EQ(GetString(nic, "network").value_or("").rfind(base + "/", 0), 0u);
  EXPECT_EQ(GetString(nic, "subnetwork").value_or("").rfind(base + "/", 0), 0u);
  EXPECT_EQ(GetString(GetArray(g2, "disks")->getObject(0), "source").value_or("").rfind(base, 0),
            0u);

  JsonObject t4 = Gce("GET", "/zones/us-central1-a/instances/n1").Json();
  JsonObject acc = GetArray(t4, "guestAccelerators")->getObject(0);
  EXPECT_EQ(GetString(acc, "acceleratorType").value_or(""),
            base + "/zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4");
  EXPECT_EQ(GetInt(acc, "acceleratorCount").value_or(0), 2);
  // A CPU type carries none; a missing scheduling has every default.
  ASSERT_EQ(Gce("POST", "/zones/us-central1-a/instances",
                InstanceBody("cpu", "us-central1-a", "e2-standard-4", false))
                .status,
            200);
  JsonObject cpu = Gce("GET", "/zones/us-central1-a/instances/cpu").Json();
  EXPECT_FALSE(cpu->has("guestAccelerators"));
  EXPECT_EQ(GetString(GetObject(cpu, "scheduling"), "onHostMaintenance").value_or(""), "MIGRATE");
  Reply bad = Gce("POST", "/zones/us-central1-a/instances",
                  [&] {
                    std::string b = InstanceBody("bad", "us-central1-a", "e2-standard-4");
                    b.replace(b.find("\"TERMINATE\""), 11, "\"STOP\"");
                    return b;
                  }());
  EXPECT_EQ(bad.status, 400) << bad.body;
}

// plugins/gcp/REFERENCE.md §F5: the other operation errors a zone can end an insert with.
TEST_F(GceApiTest, CapacityFaultValuesPickTheOperationErrorCode) {
  for (const std::string code :
       {"insufficientCapacity", "RESOURCE_OPERATION_RATE_EXCEEDED", "ZONE_RESOURCE_POOL_EXHAUSTED"}) {
    Fault(R"({"cloud":"gcp","fault":"capacity","value":")" + code + R"("})");
    JsonObject op = Gce("POST", "/zones/us-central1-a/instances", InstanceBody("c1")).Json();
    JsonObject done = WaitOp(op, "us-central1-a");
    JsonObject e = GetArray(GetObject(done, "error"), "errors")->getObject(0);
    EXPECT_EQ(GetString(e, "code").value_or(""), code) << ToJson(done);
    EXPECT_EQ(Gce("GET", "/zones/us-central1-a/instances/c1").status, 404);
  }
}

// plugins/gcp/REFERENCE.md §F8: OS Login enforced by organization policy, in both forms the
// emulator can play (not confirmed which one Google plays).
TEST_F(GceApiTest, OsLoginPolicyOverridesOrRefusesEnableOsloginFalse) {
  // Inserts NAME with enable-oslogin=FALSE; the status, and the effective enable-oslogin.
  auto insert = [&](const std::string& name) {
    Reply r = Gce("POST", "/zones/us-central1-a/instances",
                  InstanceBody(name, "us-central1-a", "g2-standard-4", true,
                               R"(,{"key":"enable-oslogin","value":"FALSE"})"));
    JsonObject inst = Gce("GET", "/zones/us-central1-a/instances/" + name).Json();
    return std::make_pair(
        r, GetBool(GetObject(GetObject(inst, "resourceStatus"), "effectiveInstanceMetadata"),
                   "enableOsloginMetadataValue"));
  };
  auto policy = [&](const std::string& value) {
    ASSERT_EQ(Control("POST", "/settings",
                      R"({"cloud":"gcp","os_login_policy":")" + value + R"("})")
                  .status,
              200);
  };
  auto [free, free_on] = insert("free");
  EXPECT_EQ(free.status, 200) << free.body;
  EXPECT_EQ(free_on, std::optional<bool>(false));
  policy("override");
  auto [forced, forced_on] = insert("forced");
  EXPECT_EQ(forced.status, 200) << forced.body;
  EXPECT_EQ(forced_on, std::optional<bool>(true));
  policy("refuse");
  auto [refused, refused_on] = insert("refused");
  EXPECT_EQ(refused.status, 412) << refused.body;
  EXPECT_NE(GetString(GetObject(refused.Json(), "error"), "message")
                .value_or("")
                .find("constraints/compute.requireOsLogin"),
            std::string::npos)
      << refused.body;
  EXPECT_NE(refused.body.find("conditionNotMet"), std::string::npos);
  EXPECT_FALSE(refused_on.has_value());
}

// Issue 30 part 2: the operations the gcp driver calls (plugins/gcp/gcp_driver.cc; the list
// in plugins/gcp/REFERENCE.md), each one the Compute Engine
// discovery document describes; the emulator serves nothing the document does not describe.
TEST(GceDiscovery, TheDriversOperationsAreInTheDiscoveryDocument) {
  struct Op {
    const char* id;
    const char* method;
    const char* path;
  };
  const std::string p = "/compute/v1/projects/p1";
  for (const Op& op : {
           Op{"compute.projects.get", "GET", ""},
           Op{"compute.instances.aggregatedList", "GET", "/aggregated/instances"},
           Op{"compute.regions.get", "GET", "/regions/us-central1"},
           Op{"compute.acceleratorTypes.aggregatedList", "GET", "/aggregated/acceleratorTypes"},
           Op{"compute.instances.insert", "POST", "/zones/us-central1-a/instances"},
           Op{"compute.instances.get", "GET", "/zones/us-central1-a/instances/vm"},
           Op{"compute.instances.delete", "DELETE", "/zones/us-central1-a/instances/vm"},
           Op{"compute.instances.stop", "POST", "/zones/us-central1-a/instances/vm/stop"},
           Op{"compute.instances.start", "POST", "/zones/us-central1-a/instances/vm/start"},
           Op{"compute.zoneOperations.get", "GET", "/zones/us-central1-a/operations/op-1"},
           Op{"compute.globalOperations.get", "GET", "/global/operations/op-1"},
           Op{"compute.firewalls.list", "GET", "/global/firewalls"},
           Op{"compute.firewalls.insert", "POST", "/global/firewalls"},
           Op{"compute.firewalls.get", "GET", "/global/firewalls/gpuprov-vm"},
           Op{"compute.firewalls.patch", "PATCH", "/global/firewalls/gpuprov-vm"},
           Op{"compute.firewalls.delete", "DELETE", "/global/firewalls/gpuprov-vm"},
       }) {
    EXPECT_EQ(GceDiscoveryMethodId(op.method, p + op.path), op.id) << op.method << " " << op.path;
  }
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"POST", "/zones/us-central1-a/instances/vm/reset"},
           {"PATCH", "/zones/us-central1-a/instances/vm"},
           {"GET", "/zones/us-central1-a/instances/vm/serialPort"},
           {"GET", "/global/firewalls/a/b"}}) {
    EXPECT_EQ(GceDiscoveryMethodId(method, p + path), "") << method << " " << path;
  }
  std::set<std::string> ids;
  for (const auto& m : DiscoveryMethods()) {
    EXPECT_TRUE(ids.insert(m.id).second) << m.id;
    EXPECT_EQ(std::string(m.id).rfind("compute.", 0), 0u) << m.id;
  }
}

TEST_F(GceApiTest, WhatTheDiscoveryDocumentDoesNotDescribeIsNotServed) {
  ASSERT_EQ(Gce("POST", "/zones/us-central1-a/instances", InstanceBody("vm9")).status, 200);
  EXPECT_EQ(Gce("POST", "/zones/us-central1-a/instances/vm9/reset").status, 404);
  EXPECT_EQ(Gce("PATCH", "/zones/us-central1-a/instances/vm9", "{}").status, 404);
  EXPECT_EQ(Gce("GET", "/zones/us-central1-a/instances/vm9").status, 200);
}

// Issue 30 part 2: request bodies are read against the discovery schemas (Instance,
// Firewall): an unknown name or a value of another type is Google's 400 INVALID_ARGUMENT.
TEST_F(GceApiTest, RequestBodiesFollowTheDiscoverySchemas) {
  auto expect_400 = [&](const Reply& r, const std::string& needle) {
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find(needle), std::string::npos) << needle << "\n" << r.body;
    EXPECT_NE(r.body.find("INVALID_ARGUMENT"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("google.rpc.BadRequest"), std::string::npos) << r.body;
  };
  std::string unknown = InstanceBody("vm8");
  unknown.insert(1, R"("machine_type":"x",)");
  expect_400(Gce("POST", "/zones/us-central1-a/instances", unknown),
             R"(Unknown name \"machine_type\" at 'instance_resource': Cannot find field.)");
  std::string nested = InstanceBody("vm8");
  nested.insert(nested.find(R"("diskSizeGb")"), R"("disk_type":"pd-ssd",)");
  expect_400(Gce("POST", "/zones/us-central1-a/instances", nested),
             R"(at 'instance_resource.disks[0].initialize_params')");
  std::string mistyped = InstanceBody("vm8");
  mistyped.insert(1, R"("canIpForward":"yes",)");
  expect_400(Gce("POST", "/zones/us-central1-a/instances", mistyped),
             R"(Invalid value at 'instance_resource.can_ip_forward' (TYPE_BOOL), \"yes\")");
  std::string labels = InstanceBody("vm8");
  labels.replace(labels.find(R"("gpuprov":"1")"), 13, R"("gpuprov":1)");
  EXPECT_EQ(Gce("POST", "/zones/us-central1-a/instances", labels).status, 400);
  EXPECT_EQ(Count("instances"), 0);
  // int64 fields take a string or a number, as Google's parser does.
  std::string number = InstanceBody("vm8");
  number.replace(number.find(R"("diskSizeGb":"100")"), 18, R"("diskSizeGb":100)");
  EXPECT_EQ(Gce("POST", "/zones/us-central1-a/instances", number).status, 200);

  expect_400(Gce("POST", "/global/firewalls",
                 R"({"name":"fw1","sourceRange":["0.0.0.0/0"],"allowed":[{"IPProtocol":"tcp"}]})"),
             R"(Unknown name \"sourceRange\" at 'firewall_resource')");
  expect_400(Gce("POST", "/global/firewalls",
                 R"({"name":"fw1","allowed":[{"IPProtocol":"tcp","port":["22"]}]})"),
             R"(at 'firewall_resource.allowed[0]')");
  expect_400(Gce("POST", "/global/firewalls",
                 R"({"name":"fw1","priority":"high","allowed":[{"IPProtocol":"tcp"}]})"),
             "TYPE_INT32");
  EXPECT_EQ(Count("firewalls"), 0);
}

// Issue 30 part 2: what the emulator answers carries only fields of the discovery schemas,
// each of its type (an optional string is a string or absent, never null).
TEST_F(GceApiTest, ResourcesAnsweredFollowTheDiscoverySchemas) {
  std::string n1 = InstanceBody("n1", "us-central1-a", "n1-standard-4");
  n1.insert(
      1,
      R"("guestAccelerators":[{"acceleratorType":"nvidia-tesla-t4","acceleratorCount":1}],)");
  JsonObject op = Gce("POST", "/zones/us-central1-a/instances", n1).Json();
  for (int i = 0; i < 2; ++i) {  // PROVISIONING, then RUNNING
    JsonObject inst = Gce("GET", "/zones/us-central1-a/instances/n1").Json();
    EXPECT_EQ(GceCheckResource("Instance", inst), "") << ToJson(inst);
    WaitOp(op, "us-central1-a");
  }
  ASSERT_EQ(Gce("POST", "/global/firewalls",
                R"({"name":"fw1","allowed":[{"IPProtocol":"tcp","ports":["22"]}],"targetTags":["n1"]})")
                .status,
            200);
  JsonObject fw = Gce("GET", "/global/firewalls/fw1").Json();
  EXPECT_EQ(GceCheckResource("Firewall", fw), "") << ToJson(fw);
  JsonObject listed = GetArray(Gce("GET", "/zones/us-central1-a/instances").Json(), "items")->getObject(0);
  EXPECT_EQ(GceCheckResource("Instance", listed), "");
}

TEST_F(GceApiTest, CapacityArrivesInTheOperationAndTheInstanceVanishes) {
  Fault(R"({"cloud":"gcp","fault":"capacity"})");
  JsonObject op = Gce("POST", "/zones/us-central1-a/instances", InstanceBody("cap")).Json();
  EXPECT_EQ(Gce("GET", "/zones/us-central1-a/instances/cap").status, 200);  // for a moment
  JsonObject done = WaitOp(op, "us-central1-a");
  JsonObject e = GetArray(GetObject(done, "error"), "errors")->getObject(0);
  EXPECT_EQ(GetString(e, "code").value_or(""), "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS");
  JsonObject meta =
      GetObject(GetObject(GetArray(e, "errorDetails")->getObject(0), "errorInfo"), "metadatas");
  EXPECT_EQ(GetString(meta, "zonesAvailable").value_or(""), "us-central1-b,us-central1-c");
  EXPECT_EQ(GetInt(done, "httpErrorStatusCode").value_or(0), 503);
  EXPECT_EQ(Gce("GET", "/zones/us-central1-a/instances/cap").status, 404);
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("backend_instances"), 0);
}

TEST_F(GceApiTest, QuotaInTheOperationOrSynchronously) {
  Fault(R"({"cloud":"gcp","fault":"quota"})");
  JsonObject done = WaitOp(Gce("POST", "/zones/us-central1-a/instances", InstanceBody("q1")).Json(),
                           "us-central1-a");
  JsonObject e = GetArray(GetObject(done, "error"), "errors")->getObject(0);
  EXPECT_EQ(GetString(e, "code").value_or(""), "QUOTA_EXCEEDED");
  EXPECT_NE(GetString(e, "message").value_or("").find("NVIDIA_L4_GPUS"), std::string::npos);
  Fault(R"({"cloud":"gcp","fault":"quota","status":403})");
  Reply sync = Gce("POST", "/zones/us-central1-a/instances", InstanceBody("q2"));
  EXPECT_EQ(sync.status, 403);
  EXPECT_NE(sync.body.find("\"quotaExceeded\""), std::string::npos);
  EXPECT_EQ(Count("instances"), 0);
}

TEST_F(GceApiTest, ThrottlingAndServerErrorsAsGoogleSendsThem) {
  Fault(R"({"cloud":"gcp","fault":"throttle","retry_after":3})");
  Reply t = Gce("GET", "");
  EXPECT_EQ(t.status, 429);
  EXPECT_EQ(t.Header("retry-after"), "3");
  EXPECT_EQ(GetString(GetObject(t.Json(), "error"), "status").value_or(""), "RESOURCE_EXHAUSTED");
  Fault(R"({"cloud":"gcp","fault":"throttle","status":403})");
  Reply t403 = Gce("GET", "");
  EXPECT_EQ(t403.status, 403);
  EXPECT_NE(t403.body.find("\"rateLimitExceeded\""), std::string::npos);
  Fault(R"({"cloud":"gcp","fault":"server_error","status":503})");
  Reply s = Gce("GET", "");
  EXPECT_EQ(s.status, 503);
  EXPECT_NE(s.body.find("\"backendError\""), std::string::npos);
  EXPECT_EQ(Gce("GET", "").status, 200);
  // On the token endpoint (another service) a throttle answers in OAuth's shape.
  Fault(R"({"cloud":"gcp","fault":"throttle","retry_after":2})");
  Reply tok = TokenRequest(
      Assertion(Str("private_key"), Str("client_email"), Str("token_uri"), Now(), Now() + 3600));
  EXPECT_EQ(tok.status, 429);
  EXPECT_EQ(tok.Header("retry-after"), "2");
  EXPECT_EQ(GetString(tok.Json(), "error").value_or(""), "rate_limit_exceeded");
  // A filter with a wildcard.
  WaitOp(Gce("POST", "/zones/us-central1-a/instances", InstanceBody("wild-1")).Json(),
         "us-central1-a");
  JsonObject wild =
      Gce("GET", "/zones/us-central1-a/instances?filter=" + FormEncode("name = \"wild-*\"")).Json();
  EXPECT_EQ(GetArray(wild, "items")->size(), 1u) << ToJson(wild);
  JsonObject tame =
      Gce("GET", "/zones/us-central1-a/instances?filter=" + FormEncode("name = \"wild\"")).Json();
  EXPECT_FALSE(tame->has("items"));
}

TEST_F(GceApiTest, VanishingAndFailingBoots) {
  Fault(R"({"cloud":"gcp","fault":"vanish_during_boot"})");
  JsonObject done = WaitOp(
      Gce("POST", "/zones/us-central1-a/instances", InstanceBody("gone")).Json(), "us-central1-a");
  EXPECT_EQ(
      GetString(GetArray(GetObject(done, "error"), "errors")->getObject(0), "code").value_or(""),
      "RESOURCE_NOT_FOUND");
  EXPECT_EQ(Gce("GET", "/zones/us-central1-a/instances/gone").status, 404);
  Fault(R"({"cloud":"gcp","fault":"error_during_boot"})");
  WaitOp(Gce("POST", "/zones/us-central1-a/instances", InstanceBody("stopped")).Json(),
         "us-central1-a");
  // GCE has no error state: the instance is TERMINATED (stopped), not gone.
  EXPECT_EQ(
      GetString(Gce("GET", "/zones/us-central1-a/instances/stopped").Json(), "status").value_or(""),
      "TERMINATED");
}

TEST_F(GceApiTest, FirewallsWithGlobalOperations) {
  const std::string fw =
      R"({"name":"gpuprov-vm1","network":"global/networks/default","direction":"INGRESS",)"
      R"("sourceRanges":["0.0.0.0/0"],"targetTags":["gpuprov-vm1"],)"
      R"("allowed":[{"IPProtocol":"tcp","ports":["22"]}]})";
  JsonObject op = Gce("POST", "/global/firewalls?requestId=f-1", fw).Json();
  EXPECT_FALSE(op->has("zone"));
  EXPECT_EQ(GetString(WaitOp(op), "status").value_or(""), "DONE");
  EXPECT_EQ(Gce("POST", "/global/firewalls", fw).status, 409);
  EXPECT_EQ(Count("firewalls"), 1);
  WaitOp(Gce("PATCH", "/global/firewalls/gpuprov-vm1",
             R"({"allowed":[{"IPProtocol":"tcp","ports":["22","6443","80","443"]}]})")
             .Json());
  JsonObject got = Gce("GET", "/global/firewalls/gpuprov-vm1").Json();
  EXPECT_EQ(GetArray(GetArray(got, "allowed")->getObject(0), "ports")->size(), 4u) << ToJson(got);
  EXPECT_EQ(GetArray(got, "targetTags")->size(), 1u) << "PATCH keeps what it does not name";
  Reply bad = Gce("POST", "/global/firewalls",
                  R"({"name":"x","allowed":[{"IPProtocol":"tcp","ports":["http"]}]})");
  EXPECT_EQ(bad.status, 400);
  WaitOp(Gce("DELETE", "/global/firewalls/gpuprov-vm1").Json());
  EXPECT_EQ(Gce("GET", "/global/firewalls/gpuprov-vm1").status, 404);
  EXPECT_EQ(Count("firewalls"), 0);
}

// What this machine reaches: the enabled INGRESS rules targeting the instance's tags (or
// all instances) from ranges that hold 127.0.0.1, by priority (deny first on a tie); the
// implied rule denies the rest. Applied at every insert, patch and delete.
TEST_F(GceApiTest, ReachabilityFollowsTheFirewallRules) {
  Gce("POST", "/zones/us-central1-a/instances", InstanceBody("reach"));  // tag gpuprov-reach
  auto reachable = [&] { return ReachablePorts(control_, "gcp", "reach"); };
  EXPECT_EQ(reachable(), "");
  auto insert = [&](const std::string& body) {
    Reply r = Gce("POST", "/global/firewalls", body);
    ASSERT_EQ(r.status, 200) << r.body;
  };
  insert(R"({"name":"own","sourceRanges":["0.0.0.0/0"],"targetTags":["gpuprov-reach"],)"
         R"("allowed":[{"IPProtocol":"tcp","ports":["22","8000-8100"]}]})");
  insert(R"({"name":"other-tag","sourceRanges":["0.0.0.0/0"],"targetTags":["web"],)"
         R"("allowed":[{"IPProtocol":"tcp","ports":["80"]}]})");
  insert(R"({"name":"private","sourceRanges":["10.0.0.0/8"],)"
         R"("allowed":[{"IPProtocol":"tcp","ports":["443"]}]})");
  EXPECT_EQ(reachable(), "22,8000-8100");
  insert(R"({"name":"no-8080","priority":900,"sourceRanges":["127.0.0.0/8"],)"
         R"("denied":[{"IPProtocol":"tcp","ports":["8080"]}]})");
  EXPECT_EQ(reachable(), "22,8000-8079,8081-8100");
  ASSERT_EQ(Gce("PATCH", "/global/firewalls/own",
                R"({"allowed":[{"IPProtocol":"tcp","ports":["22"]},{"IPProtocol":"tcp","ports":["6443"]}]})")
                .status,
            200);
  EXPECT_EQ(reachable(), "22,6443");
  ASSERT_EQ(Gce("PATCH", "/global/firewalls/own", R"({"disabled":true})").status, 200);
  EXPECT_EQ(reachable(), "");
  ASSERT_EQ(Gce("PATCH", "/global/firewalls/own", R"({"disabled":false})").status, 200);
  ASSERT_EQ(Gce("DELETE", "/global/firewalls/own").status, 200);
  EXPECT_EQ(reachable(), "");
  insert(R"({"name":"all","sourceRanges":["0.0.0.0/0"],"allowed":[{"IPProtocol":"all"}]})");
  EXPECT_EQ(reachable(), "1-8079,8081-65535");
}

// compute v1 Firewall (https://cloud.google.com/compute/docs/reference/rest/v1/firewalls):
// sourceTags are instance tags (RFC 1035 names) of INGRESS rules, not with
// sourceServiceAccounts; ports only for tcp, udp and sctp; a second rule of a name is 409
// alreadyExists. A rule with sourceTags and no sourceRanges gets no 0.0.0.0/0.
TEST_F(GceApiTest, FirewallSourceTagsAndPortsAreValidated) {
  auto post = [&](const std::string& body) { return Gce("POST", "/global/firewalls", body); };
  EXPECT_EQ(post(R"({"name":"a","sourceTags":["Bad_Tag"],"allowed":[{"IPProtocol":"tcp"}]})")
                .status,
            400);
  EXPECT_EQ(post(R"({"name":"a","direction":"EGRESS","sourceTags":["peers"],)"
                 R"("allowed":[{"IPProtocol":"tcp"}]})")
                .status,
            400);
  EXPECT_EQ(post(R"({"name":"a","sourceTags":["peers"],)"
                 R"("sourceServiceAccounts":["sa@p.iam.gserviceaccount.com"],)"
                 R"("allowed":[{"IPProtocol":"tcp"}]})")
                .status,
            400);
  EXPECT_EQ(post(R"({"name":"a","sourceTags":["peers"],)"
                 R"("allowed":[{"IPProtocol":"icmp","ports":["22"]}]})")
                .status,
            400);
  EXPECT_EQ(post(R"({"name":"a","sourceTags":["peers"],)"
                 R"("allowed":[{"IPProtocol":"tcp","ports":["70000"]}]})")
                .status,
            400);
  EXPECT_EQ(post(R"({"name":"a","sourceTags":["peers"],)"
                 R"("allowed":[{"IPProtocol":"tcp","ports":["9000-8000"]}]})")
                .status,
            400);
  EXPECT_EQ(Count("firewalls"), 0);
  const std::string peers =
      R"({"name":"gpuprov-c-peers","network":"global/networks/default","direction":"INGRESS",)"
      R"("sourceTags":["gpuprov-cluster-c"],"targetTags":["gpuprov-cluster-c"],)"
      R"("allowed":[{"IPProtocol":"tcp","ports":["6443","10250"]},)"
      R"({"IPProtocol":"udp","ports":["51820"]}]})";
  Reply made = post(peers);
  ASSERT_EQ(made.status, 200) << made.body;
  EXPECT_EQ(GetString(WaitOp(made.Json()), "status").value_or(""), "DONE");
  JsonObject got = Gce("GET", "/global/firewalls/gpuprov-c-peers").Json();
  EXPECT_EQ(ToJson(GetArray(got, "sourceTags")), R"(["gpuprov-cluster-c"])");
  EXPECT_EQ(ToJson(GetArray(got, "targetTags")), R"(["gpuprov-cluster-c"])");
  EXPECT_FALSE(got->has("sourceRanges")) << ToJson(got);
  Reply again = post(peers);
  EXPECT_EQ(again.status, 409);
  EXPECT_NE(again.body.find("alreadyExists"), std::string::npos) << again.body;
}

// The sources one instance's rules admit on its internal address for protocol/ports, sorted,
// joined by commas; "null" when nothing filters it.
std::string PrivateSources(const std::string& control, const std::string& name,
                           const std::string& protocol, const std::string& ports) {
  JsonArray rows = GetArray(Call(control, "GET", "/instances?cloud=gcp").Json(), "instances");
  for (size_t i = 0; rows && i < rows->size(); ++i) {
    JsonObject row = rows->getObject(static_cast<unsigned>(i));
    if (GetString(row, "name").value_or("") != name) continue;
    if (row->isNull("private_ingress")) return "null";
    std::vector<std::string> out;
    JsonArray rules = GetArray(row, "private_ingress");
    for (size_t j = 0; rules && j < rules->size(); ++j) {
      JsonObject r = rules->getObject(static_cast<unsigned>(j));
      if (GetString(r, "protocol") != protocol || GetString(r, "ports") != ports) continue;
      JsonArray src = GetArray(r, "sources");
      for (size_t k = 0; src && k < src->size(); ++k) out.push_back(src->get(k).toString());
    }
    std::sort(out.begin(), out.end());
    std::string joined;
    for (const auto& a : out) joined += (joined.empty() ? "" : ",") + a;
    return joined;
  }
  return "no instance " + name;
}

// Between the network's instances the rules apply to their internal addresses (networkIP):
// a rule's sourceTags admit the running instances with the tag, its sourceRanges their
// ranges; the implied deny refuses the rest, so every instance's private side is filtered.
// Recomputed when instances come and go and when rules change.
TEST_F(GceApiTest, RulesBetweenInstancesFollowSourceTagsAndTargetTags) {
  const std::string peer_tag = R"(,"gpuprov-cluster-c"]}})";
  auto body = [&](const std::string& name, bool tagged) {
    std::string b = InstanceBody(name);
    if (tagged) b.replace(b.rfind("\"]}}"), 4, "\"" + peer_tag);
    return b;
  };
  for (const auto& [name, tagged] :
       std::vector<std::pair<std::string, bool>>{{"a", true}, {"b", true}, {"c", false}}) {
    Reply r = Gce("POST", "/zones/us-central1-a/instances", body(name, tagged));
    ASSERT_EQ(r.status, 200) << r.body;
  }
  std::map<std::string, std::string> ip;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const char* n : {"a", "b", "c"}) {
          JsonObject inst = Gce("GET", "/zones/us-central1-a/instances/" + std::string(n)).Json();
          if (GetString(inst, "status").value_or("") != "RUNNING") return false;
          ip[n] = GetString(GetArray(inst, "networkInterfaces")->getObject(0), "networkIP")
                      .value_or("");
        }
        return true;
      },
      10s));
  EXPECT_EQ(ip["a"].rfind("10.", 0), 0u);
  EXPECT_EQ(PrivateSources(control_, "a", "tcp", "6443"), "");  // the implied deny
  ASSERT_EQ(Gce("POST", "/global/firewalls",
                R"({"name":"gpuprov-c-peers","sourceTags":["gpuprov-cluster-c"],)"
                R"("targetTags":["gpuprov-cluster-c"],)"
                R"("allowed":[{"IPProtocol":"tcp","ports":["6443","10250"]},)"
                R"({"IPProtocol":"udp","ports":["51820"]}]})")
                .status,
            200);
  const std::string ab = std::min(ip["a"], ip["b"]) + "," + std::max(ip["a"], ip["b"]);
  EXPECT_EQ(PrivateSources(control_, "a", "tcp", "6443"), ab);
  EXPECT_EQ(PrivateSources(control_, "b", "udp", "51820"), ab);
  EXPECT_EQ(PrivateSources(control_, "b", "tcp", "10250"), ab);
  EXPECT_EQ(PrivateSources(control_, "b", "tcp", "22"), "");
  EXPECT_EQ(PrivateSources(control_, "c", "tcp", "6443"), "");  // not a target
  // sourceRanges admit as well (OR), and a patch applies at once.
  ASSERT_EQ(Gce("PATCH", "/global/firewalls/gpuprov-c-peers",
                R"({"sourceRanges":["192.0.2.0/24"],)"
                R"("allowed":[{"IPProtocol":"tcp","ports":["6443"]}]})")
                .status,
            200);
  EXPECT_EQ(PrivateSources(control_, "a", "tcp", "6443"), ab + ",192.0.2.0/24");
  EXPECT_EQ(PrivateSources(control_, "a", "udp", "51820"), "");
  // An instance that goes is no longer a source.
  WaitOp(Gce("DELETE", "/zones/us-central1-a/instances/b").Json(), "us-central1-a");
  EXPECT_EQ(PrivateSources(control_, "a", "tcp", "6443"), ip["a"] + ",192.0.2.0/24");
}

TEST_F(GceApiTest, CatalogueZonesWithAnAccelerator) {
  JsonObject agg =
      Gce("GET", "/aggregated/acceleratorTypes?filter=" + FormEncode("name = \"nvidia-l4\""))
          .Json();
  std::vector<std::string> zones;
  for (const auto& [scope, v] : *GetObject(agg, "items")) {
    JsonArray list = GetArray(v.extract<JsonObject>(), "acceleratorTypes");
    if (list && list->size() > 0 && scope.rfind("zones/us-central1-", 0) == 0)
      zones.push_back(scope);
  }
  EXPECT_EQ(zones, (std::vector<std::string>{"zones/us-central1-a", "zones/us-central1-b",
                                             "zones/us-central1-c"}));
  JsonObject region = Gce("GET", "/regions/us-central1").Json();
  EXPECT_EQ(GetArray(region, "zones")->size(), 4u);
  JsonObject mt = Gce("GET", "/zones/us-central1-a/machineTypes/a3-highgpu-8g").Json();
  EXPECT_EQ(GetInt(GetArray(mt, "accelerators")->getObject(0), "guestAcceleratorCount").value_or(0),
            8);
  JsonObject image =
      Call(base_, "GET",
           "/compute/v1/projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts", "", token_)
          .Json();
  EXPECT_EQ(GetString(image, "family").value_or(""), "ubuntu-2204-lts");
}

}  // namespace
}  // namespace gpuprov::emulator
