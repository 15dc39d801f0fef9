// SPDX-License-Identifier: Apache-2.0
//
// Each Application Default Credentials source against the GCE emulator (tests/emulators,
// `gpuprov-emulator --backend memory --clouds gcp`) run as a child process: the refresh
// grant of authorized_user, the STS exchange of external_account (file- and URL-sourced
// subject tokens, with and without service-account impersonation), impersonated_service_account
// and the metadata server. Every token a source yields is then used on the emulated Compute
// API, which refuses tokens it did not issue. Talks only to 127.0.0.1.
#include <Poco/JSON/Object.h>
#include <Poco/URI.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "driver_test_util.h"
#include "gcp_auth.h"
#include "gpuprov/driver_abi.h"

namespace gpuprov::gcp {
namespace {

using namespace drivers::testing;  // NOLINT: the shared driver test helpers
using gpuprov::sdk::DriverError;
using Poco::JSON::Object;

constexpr char kDriverPath[] = GPUPROV_GCP_DRIVER_PATH;
using Driver = DriverAt<kDriverPath>;

// What the emulator accepts (tests/emulators/README.md, "Google Compute Engine").
constexpr const char* kClientId = "emulator-client.apps.googleusercontent.com";
constexpr const char* kClientSecret = "emulator-client-secret";
constexpr const char* kRefreshToken = "1//emulator-refresh-token";
constexpr const char* kAudience =
    "//iam.googleapis.com/projects/470000000001/locations/global/workloadIdentityPools/"
    "gpuprov-pool/providers/gpuprov-provider";
constexpr const char* kSubjectToken = "emulator-subject-token";
constexpr const char* kProject = "gpuprov-emulator";
constexpr const char* kEmail = "gpuprov-emulator@gpuprov-emulator.iam.gserviceaccount.com";

class GceEmulator : public OneCloudEmulator {
 public:
  GceEmulator() : OneCloudEmulator("gcp") {}
  bool Start(std::string* problem) {
    const std::string key = (dir_.path() / "key.json").string();
    return StartMemory({}, {{"GOOGLE_APPLICATION_CREDENTIALS", key}}, problem);
  }
  // "127.0.0.1:PORT"
  std::string HostPort() const { return Poco::URI(url()).getAuthority(); }
  void Settings(const std::string& json_fields) {
    HttpReply r = Control("POST", "/settings", R"({"cloud":"gcp",)" + json_fields + "}");
    EXPECT_EQ(r.status, 200) << r.body;
  }

 private:
  ScopedTempDir dir_{"gcp-cred-emu"};
};

class GcpCredentialSources : public SharedEmulatorTest<GceEmulator> {
 protected:
  void SetUp() override {
    SharedEmulatorTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    emulator_->Settings(R"("metadata_service_account":true)");
  }

  // Writes `text` to a file of the test's folder; returns its path.
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_.path() / name).string();
    std::ofstream(path) << text;
    return path;
  }

  static std::string AuthorizedUser(const std::string& refresh_token = kRefreshToken,
                                    bool with_type = true) {
    Object::Ptr o = new Object();
    if (with_type) o->set("type", "authorized_user");
    o->set("client_id", kClientId);
    o->set("client_secret", kClientSecret);
    o->set("refresh_token", refresh_token);
    o->set("quota_project_id", "quota-only-project");
    o->set("token_uri", emulator_->url() + "/token");
    return Stringify(o);
  }

  static std::string ImpersonationUrl(const std::string& email = kEmail) {
    return emulator_->url() + "/v1/projects/-/serviceAccounts/" + email + ":generateAccessToken";
  }

  // An external_account file; `source` is its credential_source.
  static std::string ExternalAccount(const Object::Ptr& source, bool impersonate,
                                     const std::string& audience = kAudience) {
    Object::Ptr o = new Object();
    o->set("type", "external_account");
    o->set("audience", audience);
    o->set("subject_token_type", "urn:ietf:params:oauth:token-type:jwt");
    o->set("token_url", emulator_->url() + "/v1/token");
    if (impersonate) o->set("service_account_impersonation_url", ImpersonationUrl());
    o->set("credential_source", source);
    return Stringify(o);
  }

  // GET the emulated project with `token`: the Compute API's verdict on it.
  static int ComputeStatus(const std::string& token) {
    return LoopbackHttp("GET", emulator_->url() + "/compute/v1/projects/" + kProject, "",
                        {{"Authorization", "Bearer " + token}})
        .status;
  }

  static std::string TokenOf(const std::string& path) {
    std::optional<GoogleCredentials> c = FindCredentials(path);
    if (!c) throw std::runtime_error("no credentials in " + path);
    TokenSource tokens(*c, drivers::RetryPolicy::Fast(), gpuprov::sdk::Host());
    return tokens.Token();
  }

  static std::string Config() {
    return R"({"endpoint":")" + emulator_->url() +
           R"(","config":{"retry":{"max_attempts":2,"base_delay_ms":5,"max_delay_ms":20,)"
           R"("total_budget_ms":5000,"attempt_timeout_ms":5000}}})";
  }

  ScopedTempDir dir_{"gcp-cred"};
  // No credentials but the ones a test sets; no real metadata server is ever asked.
  ScopedEnv no_gac_{"GOOGLE_APPLICATION_CREDENTIALS", nullptr};
  ScopedEnv gcloud_dir_{"CLOUDSDK_CONFIG", dir_.path().c_str()};
  ScopedEnv no_active_{"CLOUDSDK_ACTIVE_CONFIG_NAME", nullptr};
  ScopedEnv no_project_{"GOOGLE_CLOUD_PROJECT", nullptr};
  ScopedEnv no_core_project_{"CLOUDSDK_CORE_PROJECT", nullptr};
  ScopedEnv metadata_closed_{"GCE_METADATA_HOST", "127.0.0.1:9"};
};

// --- authorized_user: refresh grant ---------------------------------------------------

TEST_F(GcpCredentialSources, AuthorizedUserFromGcloudsAdcFileGetsATokenComputeAccepts) {
  Write("application_default_credentials.json", AuthorizedUser());
  std::optional<GoogleCredentials> c = FindCredentials("");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->type, GoogleCredentials::Type::kAuthorizedUser);
  EXPECT_TRUE(Contains(c->Describe(), "application_default_credentials.json (authorized_user)"))
      << c->Describe();
  EXPECT_EQ(c->project_id, "");  // quota_project_id is not the project to create in
  EXPECT_EQ(c->quota_project_id, "quota-only-project");
  TokenSource tokens(*c, drivers::RetryPolicy::Fast(), gpuprov::sdk::Host());
  EXPECT_EQ(ComputeStatus(tokens.Token()), 200);
  EXPECT_EQ(ComputeStatus("ya29.emu-made-up-token"), 401);
}

TEST_F(GcpCredentialSources, AuthorizedUserWithARevokedRefreshTokenIsAuthWithoutSecrets) {
  const std::string path = Write("adc.json", AuthorizedUser("1//revoked-refresh-token"));
  try {
    TokenOf(path);
    FAIL() << "a wrong refresh token was accepted";
  } catch (const DriverError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.status(), GPUPROV_STATUS_AUTH) << msg;
    EXPECT_TRUE(Contains(msg, "invalid_grant")) << msg;
    EXPECT_TRUE(Contains(msg, path)) << msg;
    EXPECT_FALSE(Contains(msg, "revoked-refresh-token")) << msg;
    EXPECT_FALSE(Contains(msg, kClientSecret)) << msg;
  }
}

TEST_F(GcpCredentialSources, CheckUsesTheActiveGcloudConfigurationsProjectNotTheQuotaProject) {
  Write("application_default_credentials.json", AuthorizedUser());
  std::filesystem::create_directories(dir_.path() / "configurations");
  Write("active_config", "default\n");
  Write("configurations/config_default", "[core]\nproject = not-this-one\n");
  Write("configurations/config_work", std::string("[core]\nproject = ") + kProject + "\n");
  ScopedEnv active("CLOUDSDK_ACTIVE_CONFIG_NAME", "work");
  Driver driver(Config());
  ASSERT_EQ(driver.init_status(), GPUPROV_STATUS_OK) << driver.init_error();
  OpResult r = driver.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_TRUE(Contains(r.Doc()->getValue<std::string>("account"), kProject)) << r.json;
  EXPECT_TRUE(Contains(r.Doc()->getValue<std::string>("credentials_from"), "(authorized_user)"))
      << r.json;
  EXPECT_FALSE(Contains(r.json, kRefreshToken)) << r.json;
}

TEST_F(GcpCredentialSources, AQuotaProjectAloneIsNoProjectToCreateIn) {
  Write("application_default_credentials.json", AuthorizedUser());
  Driver driver(Config());
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  EXPECT_TRUE(Contains(r.error, "no Google Cloud project")) << r.error;
  EXPECT_FALSE(Contains(r.error, "quota-only-project")) << r.error;
}

// --- external_account: STS exchange ----------------------------------------------------

TEST_F(GcpCredentialSources, ExternalAccountWithAFileSourcedTokenIsExchangedAtSts) {
  Object::Ptr source = new Object();
  source->set("file", Write("oidc-token", std::string(kSubjectToken) + "\n"));
  const std::string path = Write("wif.json", ExternalAccount(source, /*impersonate=*/false));
  std::optional<GoogleCredentials> c = FindCredentials(path);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->type, GoogleCredentials::Type::kExternalAccount);
  const std::string token = TokenOf(path);
  EXPECT_EQ(token.rfind("ya29.emu-sts-", 0), 0u);
  EXPECT_EQ(ComputeStatus(token), 200);
}

TEST_F(GcpCredentialSources, ExternalAccountWithAWrongSubjectTokenOrAudienceIsRefused) {
  Object::Ptr source = new Object();
  source->set("file", Write("oidc-token", "someone-elses-token"));
  try {
    TokenOf(Write("wif.json", ExternalAccount(source, false)));
    FAIL() << "a wrong subject token was accepted";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_AUTH) << e.what();
    EXPECT_TRUE(Contains(e.what(), "invalid_grant")) << e.what();
    EXPECT_FALSE(Contains(e.what(), "someone-elses-token")) << e.what();
  }
  source->set("file", Write("oidc-token", kSubjectToken));
  try {
    TokenOf(Write("wif2.json", ExternalAccount(source, false, "//iam.googleapis.com/other")));
    FAIL() << "a wrong audience was accepted";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_AUTH) << e.what();
    EXPECT_TRUE(Contains(e.what(), "invalid_target")) << e.what();
  }
}

TEST_F(GcpCredentialSources, ExternalAccountWithAUrlSourcedJsonTokenAndImpersonation) {
  Object::Ptr source = new Object();
  source->set("url", emulator_->url() + "/metadata/identity/oauth2/token");
  Object::Ptr headers = new Object();
  headers->set("Metadata", "true");
  source->set("headers", headers);
  Object::Ptr format = new Object();
  format->set("type", "json");
  format->set("subject_token_field_name", "access_token");
  source->set("format", format);
  const std::string path = Write("wif-url.json", ExternalAccount(source, /*impersonate=*/true));
  const std::string token = TokenOf(path);
  EXPECT_EQ(token.rfind("ya29.emu-sa-", 0), 0u) << "not the impersonated account's token";
  EXPECT_EQ(ComputeStatus(token), 200);

  // The driver, named by GOOGLE_APPLICATION_CREDENTIALS, says where its credentials came from.
  ScopedEnv gac("GOOGLE_APPLICATION_CREDENTIALS", path.c_str());
  ScopedEnv project("GOOGLE_CLOUD_PROJECT", kProject);
  Driver driver(Config());
  OpResult r = driver.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(r.Doc()->getValue<std::string>("credentials_from"), path + " (external_account)");
  EXPECT_TRUE(Contains(r.Doc()->getValue<std::string>("account"), kEmail)) << r.json;

  // Without the header the URL names, the subject token URL refuses.
  source->remove("headers");
  try {
    TokenOf(Write("wif-noheader.json", ExternalAccount(source, true)));
    FAIL() << "the subject token URL answered without its header";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_AUTH) << e.what();
    EXPECT_TRUE(Contains(e.what(), "subject token")) << e.what();
  }
}

// --- impersonated_service_account --------------------------------------------------------

TEST_F(GcpCredentialSources, ImpersonatedServiceAccountTradesTheSourcesTokenForTheAccounts) {
  auto file = [&](const std::string& email) {
    Object::Ptr o = new Object();
    o->set("type", "impersonated_service_account");
    o->set("service_account_impersonation_url", ImpersonationUrl(email));
    o->set("source_credentials", ParseJson(AuthorizedUser()));
    o->set("delegates", Poco::JSON::Array::Ptr(new Poco::JSON::Array()));
    return Stringify(o);
  };
  const std::string path = Write("impersonated.json", file(kEmail));
  std::optional<GoogleCredentials> c = FindCredentials(path);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->client_email, kEmail);
  const std::string token = TokenOf(path);
  EXPECT_EQ(token.rfind("ya29.emu-sa-", 0), 0u);
  EXPECT_EQ(ComputeStatus(token), 200);
  try {
    TokenOf(Write("other.json", file("nobody@elsewhere.iam.gserviceaccount.com")));
    FAIL() << "an unknown account was impersonated";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_AUTH) << e.what();
    EXPECT_TRUE(Contains(e.what(), "NOT_FOUND")) << e.what();
  }
}

// --- the metadata server -----------------------------------------------------------------

TEST_F(GcpCredentialSources, MetadataServerGivesTheTokenAndTheProjectWhenNoFileExists) {
  ScopedEnv metadata("GCE_METADATA_HOST", emulator_->HostPort().c_str());
  std::optional<GoogleCredentials> c = FindCredentials("");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->type, GoogleCredentials::Type::kMetadataServer);
  EXPECT_EQ(c->client_email, kEmail);
  TokenSource tokens(*c, drivers::RetryPolicy::Fast(), gpuprov::sdk::Host());
  EXPECT_EQ(ComputeStatus(tokens.Token()), 200);

  Driver driver(Config());
  OpResult r = driver.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_EQ(r.Doc()->getValue<std::string>("credentials_from"),
            "the metadata server at " + emulator_->HostPort());
  EXPECT_TRUE(Contains(r.Doc()->getValue<std::string>("account"), kProject)) << r.json;
}

TEST_F(GcpCredentialSources, MetadataServerWithoutAServiceAccountIsNoCredentials) {
  ScopedEnv metadata("GCE_METADATA_HOST", emulator_->HostPort().c_str());
  emulator_->Settings(R"("metadata_service_account":false)");
  EXPECT_FALSE(FindCredentials(""));
  Driver driver(Config());
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_AUTH) << r;
  EXPECT_TRUE(Contains(r.error, "no Google Cloud credentials")) << r.error;
}

TEST_F(GcpCredentialSources, MetadataServerNeedsTheFlavorHeaderAndAnsweresWithIt) {
  HttpReply bare = LoopbackHttp(
      "GET", emulator_->url() + "/computeMetadata/v1/instance/service-accounts/default/token", "",
      {});
  EXPECT_EQ(bare.status, 403) << bare.body;
  EXPECT_EQ(MetadataGet(emulator_->HostPort(), "project/project-id", std::chrono::seconds(2)),
            std::optional<std::string>(kProject));
  // A server that does not answer as Google's metadata server is none.
  EXPECT_FALSE(MetadataGet("127.0.0.1:9", "project/project-id", std::chrono::seconds(2)));
}

TEST_F(GcpCredentialSources, AMetadataHostNeitherLoopbackNorGooglesIsRefused) {
  for (const char* host : {"metadata.example.com:80", "10.0.0.1", "169.254.169.254:8080"}) {
    ScopedEnv metadata("GCE_METADATA_HOST", host);
    try {
      FindCredentials("");
      ADD_FAILURE() << "GCE_METADATA_HOST=" << host << " was accepted";
    } catch (const DriverError& e) {
      EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
      EXPECT_TRUE(Contains(e.what(), "GCE_METADATA_HOST")) << e.what();
    }
  }
  // The metadata server's own names are accepted (MetadataHost sends nothing).
  for (const char* host : {"169.254.169.254", "metadata.google.internal", "127.0.0.1:8080"}) {
    ScopedEnv metadata("GCE_METADATA_HOST", host);
    EXPECT_EQ(MetadataHost(), host);
  }
}

}  // namespace
}  // namespace gpuprov::gcp
