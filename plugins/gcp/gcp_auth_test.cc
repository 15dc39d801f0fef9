// SPDX-License-Identifier: Apache-2.0
#include "gcp_auth.h"

#include <Poco/Base64Decoder.h>
#include <Poco/Base64Encoder.h>
#include <Poco/Crypto/RSADigestEngine.h>
#include <Poco/Crypto/RSAKey.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/StreamCopier.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "driver_test_util.h"

namespace gpuprov::gcp {
namespace {

using drivers::testing::ScopedEnv;
using drivers::testing::ScopedTempDir;
using gpuprov::sdk::DriverError;

// A 2048-bit RSA key made for these tests with `openssl genpkey -algorithm RSA` (PKCS#8).
constexpr const char* kTestKeyPem =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQDBoFP6xsAA6Dgs\n"
    "euniMkU8VDrh34tR5LY6AKIScGs8Y5IynIFDGEpSoFT4n8K04V/1dlecPenMS4rC\n"
    "frVJ4u03STolfOt/gZocGQtNKt6URBSyUoFRPqFLMGnjS8QQT2p0TFPTMW3/of7Y\n"
    "3Yw7p8g9/AVNqbc5UHXAyf5zqD07MPljcqY3EUPD2z2I9Gk1LISLfktgmuiC4m79\n"
    "a0pSifcaVagpDUf3GYV3BiAPYmhp8naR8gX37igK5v0X71ZwgAn+7s0nGUPULVFG\n"
    "GHMQE4IDWBexzYJUyhJA/scrWn5rzlGGmeP3z+n2dVZmLwXvHHcsk34VUO/Pb9jK\n"
    "Pe0vNC5lAgMBAAECggEABJerU5VKDGDK+kpvszDVjGTZYQOcFT/AjwzLoKEqzfZ0\n"
    "9dSD9VswDMMm7h8ImiExVTauxR2BJtpmKrmgzk/pUp3JmQYxkLyPyERTd2EBq/sX\n"
    "EZQG41jXWwZFhgGv9LdpfeN/O9EI5p6z7Ha0GDMhJaU4BqZJ7/xSUABf07maZYW3\n"
    "2HAfrpeVHv5N2XhUOB2mlX8LNVmyjCdm9konbTad3EpynOAaZZs4oD6dLRyDUeMm\n"
    "yzFP099AIXdcXVnmdFtv20nJwXHCFlMu2H2MlxZatyXZ3yOWYnc5Spb1iCQBQIm9\n"
    "BBjOTR50AHp1rb7OZqQ5YnR+mF7JeiP+ecMhickvaQKBgQDtoVb7tPAfxJA+RIOM\n"
    "kKlbMLUMZbRduMzwByB8UV4nw9zhnj4ukDOtqx353HiXq8aDMUswd8gmd4HEgDvS\n"
    "YDZtm5iMa8ITvd/Ov0IFWqUbo1da7Tb5WbGeqMAiAYNazaBDTMPyw0GLqjBTbHsd\n"
    "ojy3QgGsUsYej/bVBrZVrIZtKQKBgQDQmCho8GbvVpQM2bfvvgUVmEcM/Gz9IzfU\n"
    "L6CIToqzlrSvNmjyAY020NJhubJBw/RPVCwwpBtpFxTvIeqjKWg/495yJ/Bfp9wX\n"
    "YTWGYFX2PzDWhDM/1cnkbPxLowwzi3Yj/g3tQ9uoWhwraimVTdr0oR+HUGAMz0t1\n"
    "Td36a/Si3QKBgQC1eslWdEoKyPCsTWD2AikE9r7eV/IWvaLuEVNS/kVdMy1Gtbah\n"
    "kwmUsaG0CBelJc/2s7fLrT8TeaOGcbS+JzKKJRGs9EMFFraNS+3c7uw3nliBnbal\n"
    "WkXXeOM7VVJ/D5k8rKzdgxdU1cYQgEHKUPPztRpYA+NAxgvphzXLWnZTeQKBgQCK\n"
    "L8LVgi0u8RQzTyhjUmbb331yROeO6v3ZO5QFuMJ6JqScTldHu29pmP1GcFZ+6um2\n"
    "g/SiZJUkEX50zOs8G/pMGREMXxkGxZUwh92Fn9xSvZoFAp9Q8rhE805QbTtwCjvB\n"
    "rFRdkk66QLfYqwPRPTqIRRU19zEqS0mZ9HPRqiLuoQKBgGoCQH4oPP2GzSG6Ui3t\n"
    "aH5BHs1aKCl6TE2VCjkq62OnSX2vAeAzDxniTqmzzeEavWhmhQuJTfLvUheH1qdX\n"
    "1wQO1F1e/CHM2CCwywKueAk+3tEMr9gJcdNThM4JrYqe7X3oVqLV/PwLwSGLw/69\n"
    "gS68dSqXhtKMBKZgsk4tYkpL\n"
    "-----END PRIVATE KEY-----\n";

// The assertion MakeJwtAssertion makes for KeyJson() at iat 1700000000, and its RS256
// signature as OpenSSL's command line makes it with the key above:
// `printf %s "$input" | openssl dgst -sha256 -sign key.pem | basenc --base64url`, padding removed.
constexpr const char* kOpensslSigningInput =
    "eyJhbGciOiJSUzI1NiIsImtpZCI6ImFiYzEyMyIsInR5cCI6IkpXVCJ9.eyJhdWQiOiJodHRwczovL29hdXRoMi5"
    "nb29nbGVhcGlzLmNvbS90b2tlbiIsImV4cCI6MTcwMDAwMzYwMCwiaWF0IjoxNzAwMDAwMDAwLCJpc3MiOiJydW5"
    "uZXJAZGVtby1wcm9qZWN0LmlhbS5nc2VydmljZWFjY291bnQuY29tIiwic2NvcGUiOiJodHRwczovL3d3dy5nb29"
    "nbGVhcGlzLmNvbS9hdXRoL2Nsb3VkLXBsYXRmb3JtIn0";
constexpr const char* kOpensslSignature =
    "G00FU8YpVEgd7FjAa5b3ydDBBkv3EL3CJWtZmEXI1nDgnS6QVMPL6OexJUgG9_i--YQvL2q_YcGSyOmRzUgw1tSP"
    "17WNWfjmheaL8uhSH9dFkFCTpdy4jsYfuCOwyXpGYCti_c8WifQh5cCyeklGn6t4fkhQyiKkcSLuLdiKnyMQjPnl"
    "ETdbmV_HrgwHl9yjP9lFWEpbhkDXwB80nk7FZWIsKOrH-apMH5xSYIRNwK7_seZafVF29Km53j__fpFZF2KjTfif"
    "OlAzCBhXGIGVLML_4Ka283rpZ41_aiOgpRI6c4BvsqqZQlDZzw16YaUVkBW6y-GGthfftyWPIrL58A";

std::string KeyJson(const std::string& email = "runner@demo-project.iam.gserviceaccount.com") {
  Poco::JSON::Object o(Poco::JSON_PRESERVE_KEY_ORDER);
  o.set("type", "service_account");
  o.set("project_id", "demo-project");
  o.set("private_key_id", "abc123");
  o.set("private_key", kTestKeyPem);
  o.set("client_email", email);
  o.set("client_id", "1234567890");
  o.set("token_uri", "https://oauth2.googleapis.com/token");
  std::ostringstream s;
  o.stringify(s);
  return s.str();
}

Poco::JSON::Object::Ptr ParseJson(const std::string& text) {
  Poco::JSON::Parser parser;
  return parser.parse(text).extract<Poco::JSON::Object::Ptr>();
}

std::vector<std::string> SplitDots(const std::string& jwt) {
  std::vector<std::string> parts;
  std::stringstream in(jwt);
  for (std::string p; std::getline(in, p, '.');) parts.push_back(p);
  return parts;
}

/// A base64url part of a JWT, decoded.
std::string DecodePart(const std::string& part) {
  std::istringstream in(part);
  Poco::Base64Decoder decoder(in, Poco::BASE64_URL_ENCODING | Poco::BASE64_NO_PADDING);
  std::string out;
  Poco::StreamCopier::copyToString(decoder, out);
  return out;
}

TEST(GcpJwt, AssertionSignatureIsTheOneOpensslMakesForTheSameKeyAndInput) {
  GoogleCredentials sa = ParseCredentials(KeyJson(), "key.json");
  const std::vector<std::string> parts =
      SplitDots(MakeJwtAssertion(sa, kCloudPlatformScope, 1700000000));
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0] + "." + parts[1], kOpensslSigningInput);
  EXPECT_EQ(parts[2], kOpensslSignature);
}

TEST(GcpJwt, BadPrivateKeyIsAuthAndDoesNotQuoteTheKey) {
  GoogleCredentials sa = ParseCredentials(KeyJson(), "/tmp/key.json");
  sa.private_key_pem = "-----BEGIN PRIVATE KEY-----\nnot-a-key\n-----END PRIVATE KEY-----\n";
  try {
    MakeJwtAssertion(sa, kCloudPlatformScope, 1700000000);
    FAIL() << "no error";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_AUTH);
    EXPECT_NE(std::string(e.what()).find("/tmp/key.json"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("not-a-key"), std::string::npos) << e.what();
  }
}

TEST(GcpJwt, AssertionHasGooglesClaimsAndAVerifiableSignature) {
  GoogleCredentials sa = ParseCredentials(KeyJson(), "key.json");
  const std::string jwt = MakeJwtAssertion(sa, kCloudPlatformScope, 1700000000);
  EXPECT_EQ(jwt.find('='), std::string::npos);
  std::vector<std::string> parts = SplitDots(jwt);
  ASSERT_EQ(parts.size(), 3u) << jwt;
  auto header = ParseJson(DecodePart(parts[0]));
  EXPECT_EQ(header->getValue<std::string>("alg"), "RS256");
  EXPECT_EQ(header->getValue<std::string>("typ"), "JWT");
  EXPECT_EQ(header->getValue<std::string>("kid"), "abc123");
  const std::string claims_text = DecodePart(parts[1]);
  auto claims = ParseJson(claims_text);
  EXPECT_EQ(claims->getValue<std::string>("iss"), "runner@demo-project.iam.gserviceaccount.com");
  EXPECT_EQ(claims->getValue<std::string>("scope"),
            "https://www.googleapis.com/auth/cloud-platform");
  EXPECT_EQ(claims->getValue<std::string>("aud"), "https://oauth2.googleapis.com/token");
  EXPECT_EQ(claims->getValue<int64_t>("iat"), 1700000000);
  EXPECT_EQ(claims->getValue<int64_t>("exp"), 1700003600);
  EXPECT_NE(claims_text.find("\"iat\":1700000000,"), std::string::npos) << claims_text;
  EXPECT_FALSE(claims->has("sub"));

  // Verified with the public half only, by OpenSSL's RSA digest (not the JWT signer).
  std::istringstream priv(kTestKeyPem);
  Poco::Crypto::RSAKey full(nullptr, &priv);
  std::ostringstream pub_pem;
  full.save(&pub_pem);
  std::istringstream pub(pub_pem.str());
  Poco::Crypto::RSAKey public_only(&pub);
  Poco::Crypto::RSADigestEngine verifier(public_only, "SHA256");
  verifier.update(parts[0] + "." + parts[1]);
  std::string sig = DecodePart(parts[2]);
  EXPECT_TRUE(verifier.verify(Poco::DigestEngine::Digest(sig.begin(), sig.end())));
  Poco::Crypto::RSADigestEngine tampered(public_only, "SHA256");
  tampered.update(parts[0] + "." + parts[1] + "x");
  EXPECT_FALSE(tampered.verify(Poco::DigestEngine::Digest(sig.begin(), sig.end())));
}

TEST(GcpCredentials, ParsesAServiceAccountKey) {
  GoogleCredentials c = ParseCredentials(KeyJson(), "/keys/sa.json");
  EXPECT_EQ(c.type, GoogleCredentials::Type::kServiceAccount);
  EXPECT_EQ(c.project_id, "demo-project");
  EXPECT_EQ(c.client_email, "runner@demo-project.iam.gserviceaccount.com");
  EXPECT_EQ(c.token_uri, "https://oauth2.googleapis.com/token");
  EXPECT_EQ(c.origin, "/keys/sa.json");
}

TEST(GcpCredentials, ParsesApplicationDefaultUserCredentials) {
  GoogleCredentials c = ParseCredentials(
      R"({"type":"authorized_user","client_id":"cid.apps.googleusercontent.com",)"
      R"("client_secret":"csecret","refresh_token":"1//rtoken","quota_project_id":"qp"})",
      "adc.json");
  EXPECT_EQ(c.type, GoogleCredentials::Type::kAuthorizedUser);
  // quota_project_id is the project billed for quota, not the one to create in (issue 17).
  EXPECT_EQ(c.project_id, "");
  EXPECT_EQ(c.quota_project_id, "qp");
  EXPECT_EQ(c.token_uri, kDefaultTokenUri);
  const std::string body = TokenRequestBody(c, 0);
  EXPECT_NE(body.find("grant_type=refresh_token"), std::string::npos) << body;
  EXPECT_NE(body.find("refresh_token=1%2F%2Frtoken"), std::string::npos) << body;
}

TEST(GcpCredentials, ServiceAccountTokenRequestIsAJwtBearerGrant) {
  GoogleCredentials c = ParseCredentials(KeyJson(), "k.json");
  const std::string body = TokenRequestBody(c, 1700000000);
  EXPECT_EQ(
      body.rfind("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=", 0),
      0u)
      << body;
}

TEST(GcpCredentials, MissingFieldsAndUnknownTypesNameTheFileAndTheField) {
  for (const auto& [text, needle] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type":"service_account","client_email":"a@b"})", "\"private_key\""},
           {R"({"type":"authorized_user","client_id":"x","client_secret":"y"})",
            "\"refresh_token\""},
           {R"({"type":"external_account"})", "\"audience\""},
           {R"({"type":"gdch_service_account"})", "gdch_service_account"},
           {"not json", "not a JSON credentials file"}}) {
    try {
      ParseCredentials(text, "/etc/creds.json");
      ADD_FAILURE() << "no error for " << text;
    } catch (const DriverError& e) {
      EXPECT_EQ(e.status(), GPUPROV_STATUS_AUTH);
      EXPECT_NE(std::string(e.what()).find("/etc/creds.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
}

TEST(GcpCredentials, LookupOrderIsConfigThenEnvironmentThenAdcFile) {
  ScopedTempDir dir("gcp-creds");
  const std::string env_key = (dir.path() / "env.json").string();
  const std::string cfg_key = (dir.path() / "cfg.json").string();
  std::ofstream(env_key) << KeyJson("env@p.iam.gserviceaccount.com");
  std::ofstream(cfg_key) << KeyJson("cfg@p.iam.gserviceaccount.com");
  std::filesystem::create_directories(dir.path() / "gcloud");
  std::ofstream((dir.path() / "gcloud" / "application_default_credentials.json").string())
      << KeyJson("adc@p.iam.gserviceaccount.com");
  ScopedEnv cloudsdk("CLOUDSDK_CONFIG", (dir.path() / "gcloud").c_str());
  {
    ScopedEnv gac("GOOGLE_APPLICATION_CREDENTIALS", env_key.c_str());
    EXPECT_EQ(FindCredentials(cfg_key)->client_email, "cfg@p.iam.gserviceaccount.com");
    EXPECT_EQ(FindCredentials("")->client_email, "env@p.iam.gserviceaccount.com");
  }
  ScopedEnv no_gac("GOOGLE_APPLICATION_CREDENTIALS", nullptr);
  EXPECT_EQ(FindCredentials("")->client_email, "adc@p.iam.gserviceaccount.com");
  std::filesystem::remove(dir.path() / "gcloud" / "application_default_credentials.json");
  EXPECT_FALSE(FindCredentials("").has_value());
  {
    ScopedEnv gac("GOOGLE_APPLICATION_CREDENTIALS", (dir.path() / "missing.json").c_str());
    try {
      FindCredentials("");
      ADD_FAILURE() << "a named but missing file must be an error";
    } catch (const DriverError& e) {
      EXPECT_EQ(e.status(), GPUPROV_STATUS_AUTH);
      EXPECT_NE(std::string(e.what()).find("GOOGLE_APPLICATION_CREDENTIALS"), std::string::npos);
    }
  }
}

TEST(GcpCredentials, ParsesAnExternalAccountFile) {
  GoogleCredentials c = ParseCredentials(
      R"({"type":"external_account","audience":"//iam.googleapis.com/projects/1/locations/global/)"
      R"(workloadIdentityPools/p/providers/q","subject_token_type":"urn:ietf:params:oauth:)"
      R"(token-type:jwt","token_url":"https://sts.googleapis.com/v1/token",)"
      R"("service_account_impersonation_url":"https://iamcredentials.googleapis.com/v1/)"
      R"(projects/-/serviceAccounts/ci%40p.iam.gserviceaccount.com:generateAccessToken",)"
      R"("credential_source":{"url":"http://169.254.169.254/token","headers":{"Metadata":"true"},)"
      R"("format":{"type":"json","subject_token_field_name":"access_token"}}})",
      "wif.json");
  EXPECT_EQ(c.type, GoogleCredentials::Type::kExternalAccount);
  EXPECT_EQ(c.token_uri, "https://sts.googleapis.com/v1/token");
  EXPECT_EQ(c.client_email, "ci@p.iam.gserviceaccount.com");
  EXPECT_EQ(c.subject_token_url, "http://169.254.169.254/token");
  EXPECT_EQ(c.subject_token_headers.at("Metadata"), "true");
  EXPECT_EQ(c.subject_token_field, "access_token");
  EXPECT_EQ(c.Describe(), "wif.json (external_account)");
  EXPECT_EQ(SubjectTokenFrom(c, R"({"access_token":"st-1"})"), "st-1");
  EXPECT_THROW(SubjectTokenFrom(c, R"({"other":"st-1"})"), DriverError);
  const std::string body = StsRequestBody(c, "st-1");
  EXPECT_EQ(body.rfind("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange"
                       "&audience=%2F%2Fiam.googleapis.com%2Fprojects%2F1",
                       0),
            0u)
      << body;
  EXPECT_NE(body.find("&requested_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_"
                      "token&subject_token=st-1&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%"
                      "3Atoken-type%3Ajwt"),
            std::string::npos)
      << body;
}

TEST(GcpCredentials, ExternalAccountSourcesThatCannotWorkAreRefusedByName) {
  auto parse = [](const std::string& source) {
    return ParseCredentials(R"({"type":"external_account","audience":"a","subject_token_type":)"
                            R"("t","credential_source":)" +
                                source + "}",
                            "wif.json");
  };
  for (const std::string& source :
       {std::string(R"({"environment_id":"aws1","region_url":"x"})"),
        std::string(R"({"executable":{"command":"/bin/true"}})"),
        std::string(R"({"file":"/a","url":"http://127.0.0.1/b"})"), std::string("{}")}) {
    try {
      parse(source);
      FAIL() << "accepted " << source;
    } catch (const DriverError& e) {
      EXPECT_EQ(e.status(), GPUPROV_STATUS_AUTH);
      EXPECT_NE(std::string(e.what()).find("wif.json"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse(R"({"file":"/run/token"})").subject_token_file, "/run/token");
  EXPECT_EQ(parse(R"({"file":"/run/token"})").token_uri, kDefaultStsTokenUrl);
}

TEST(GcpCredentials, ParsesImpersonatedServiceAccountWithItsSource) {
  GoogleCredentials c = ParseCredentials(
      R"({"type":"impersonated_service_account","service_account_impersonation_url":)"
      R"("https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/)"
      R"(deploy@p.iam.gserviceaccount.com:generateAccessToken","delegates":["mid@p.iam.)"
      R"(gserviceaccount.com"],"source_credentials":{"type":"authorized_user","client_id":"c",)"
      R"("client_secret":"s","refresh_token":"r"}})",
      "imp.json");
  EXPECT_EQ(c.type, GoogleCredentials::Type::kImpersonatedServiceAccount);
  EXPECT_EQ(c.client_email, "deploy@p.iam.gserviceaccount.com");
  ASSERT_TRUE(c.source);
  EXPECT_EQ(c.source->type, GoogleCredentials::Type::kAuthorizedUser);
  EXPECT_EQ(GenerateAccessTokenBody(c.delegates),
            R"({"scope":["https://www.googleapis.com/auth/cloud-platform"],"delegates":)"
            R"(["projects/-/serviceAccounts/mid@p.iam.gserviceaccount.com"],"lifetime":"3600s"})");
  // A source that is itself impersonated or federated is refused.
  EXPECT_THROW(ParseCredentials(R"({"type":"impersonated_service_account",)"
                                R"("service_account_impersonation_url":"https://x/v1/projects/-/)"
                                R"(serviceAccounts/a@b:generateAccessToken","source_credentials":)"
                                R"({"type":"external_account"}})",
                                "imp.json"),
               DriverError);
}

TEST(GcpCredentials, SecondsUntilReadsRfc3339Times) {
  // 2026-12-03T18:00:00Z is 1796320800.
  EXPECT_EQ(SecondsUntil("2026-12-03T18:00:00Z", 1796320800 - 3599), 3599);
  EXPECT_EQ(SecondsUntil("2026-12-03T18:00:00.250Z", 1796320800 - 10), 10);
  EXPECT_EQ(SecondsUntil("2026-12-03T19:00:00+01:00", 1796320800), 0);
  EXPECT_FALSE(SecondsUntil("tomorrow", 0));
  for (const char* bad : {"2026-12-03T18:00:00", "2026-12-03T18:00:00.Z", "2026-12-03 18:00:00Z",
                          "2026-12-03T18:00:00+0100", "x2026-12-03T18:00:00Z", "2026-12-03T18:00:00Zx"}) {
    EXPECT_FALSE(SecondsUntil(bad, 0)) << bad;
  }
  // std::regex overflowed the stack on a long input (found by fuzzing); now a plain refusal.
  EXPECT_FALSE(SecondsUntil("2026-12-03T18:00:00." + std::string(200000, '1'), 0));
}

TEST(GcpCredentials, ActiveConfigNameFromTheEnvironmentWinsOverTheFile) {
  ScopedTempDir dir("gcp-active");
  std::filesystem::create_directories(dir.path() / "configurations");
  std::ofstream((dir.path() / "active_config").string()) << "default\n";
  std::ofstream((dir.path() / "configurations" / "config_default").string())
      << "[core]\nproject = from-default\n";
  std::ofstream((dir.path() / "configurations" / "config_ci").string())
      << "[core]\nproject = from-ci\n";
  ScopedEnv cloudsdk("CLOUDSDK_CONFIG", dir.path().c_str());
  {
    ScopedEnv active("CLOUDSDK_ACTIVE_CONFIG_NAME", nullptr);
    EXPECT_EQ(GcloudConfigProject(), "from-default");
  }
  {
    ScopedEnv active("CLOUDSDK_ACTIVE_CONFIG_NAME", "ci");
    EXPECT_EQ(GcloudConfigProject(), "from-ci");
  }
  // Not a gcloud configuration name: no file outside configurations/ is read.
  std::ofstream((dir.path() / "config_x").string()) << "[core]\nproject = outside\n";
  std::filesystem::create_directories(dir.path() / "configurations" / "config_sub");
  ScopedEnv active("CLOUDSDK_ACTIVE_CONFIG_NAME", "sub/../../config_x");
  EXPECT_EQ(GcloudConfigProject(), "");
}

TEST(GcpCredentials, ProjectFromGcloudsActiveConfiguration) {
  ScopedTempDir dir("gcp-gcloud");
  std::filesystem::create_directories(dir.path() / "configurations");
  std::ofstream((dir.path() / "active_config").string()) << "work\n";
  std::ofstream((dir.path() / "configurations" / "config_work").string())
      << "[compute]\nzone = us-east1-b\n[core]\naccount = me@example.com\nproject = my-proj\n";
  ScopedEnv cloudsdk("CLOUDSDK_CONFIG", dir.path().c_str());
  EXPECT_EQ(GcloudConfigProject(), "my-proj");
  std::filesystem::remove(dir.path() / "active_config");
  EXPECT_EQ(GcloudConfigProject(), "");  // "default" has no file
}

TEST(GcpTokenSource, RefusesPlainHttpToANonLoopbackTokenUri) {
  GoogleCredentials c = ParseCredentials(KeyJson(), "k.json");
  c.token_uri = "http://oauth2.googleapis.com/token";
  try {
    TokenSource t(c, drivers::RetryPolicy::Fast(), gpuprov::sdk::Host());
    FAIL() << "accepted plain http";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
    EXPECT_NE(std::string(e.what()).find("loopback"), std::string::npos) << e.what();
  }
}

// A token endpoint on 127.0.0.1 that records the form bodies it gets and answers with the
// status and body it is given.
class FakeTokenEndpoint {
 public:
  FakeTokenEndpoint() : socket_(Poco::Net::SocketAddress("127.0.0.1", 0)) {
    server_ = std::make_unique<Poco::Net::HTTPServer>(new Factory(this), socket_,
                                                      new Poco::Net::HTTPServerParams);
    server_->start();
  }
  ~FakeTokenEndpoint() { server_->stopAll(true); }
  std::string uri() const {
    return "http://127.0.0.1:" + std::to_string(socket_.address().port()) + "/token";
  }
  void Answer(int status, const std::string& body) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
    body_ = body;
  }
  std::vector<std::string> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }

 private:
  class Handler : public Poco::Net::HTTPRequestHandler {
   public:
    explicit Handler(FakeTokenEndpoint* e) : e_(e) {}
    void handleRequest(Poco::Net::HTTPServerRequest& req,
                       Poco::Net::HTTPServerResponse& resp) override {
      std::string body;
      Poco::StreamCopier::copyToString(req.stream(), body);
      std::lock_guard<std::mutex> lock(e_->mu_);
      e_->bodies_.push_back(req.getMethod() + " " + req.getURI() + " " + body);
      resp.setStatus(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(e_->status_));
      resp.setContentType("application/json");
      resp.sendBuffer(e_->body_.data(), e_->body_.size());
    }

   private:
    FakeTokenEndpoint* e_;
  };
  class Factory : public Poco::Net::HTTPRequestHandlerFactory {
   public:
    explicit Factory(FakeTokenEndpoint* e) : e_(e) {}
    Poco::Net::HTTPRequestHandler* createRequestHandler(
        const Poco::Net::HTTPServerRequest&) override {
      return new Handler(e_);
    }

   private:
    FakeTokenEndpoint* e_;
  };

  Poco::Net::ServerSocket socket_;
  std::unique_ptr<Poco::Net::HTTPServer> server_;
  std::mutex mu_;
  int status_ = 200;
  std::string body_ = R"({"access_token":"at-1","expires_in":3599,"token_type":"Bearer"})";
  std::vector<std::string> bodies_;
};

GoogleCredentials UserCredentials(const std::string& token_uri) {
  GoogleCredentials c =
      ParseCredentials(R"({"type":"authorized_user","client_id":"cid.apps.googleusercontent.com",)"
                       R"("client_secret":"csecret-value","refresh_token":"1//rtoken-value"})",
                       "/home/u/.config/gcloud/application_default_credentials.json");
  c.token_uri = token_uri;
  return c;
}

TEST(GcpTokenSource, UserCredentialsUseTheRefreshGrantAndTheTokenIsCached) {
  FakeTokenEndpoint endpoint;
  TokenSource tokens(UserCredentials(endpoint.uri()), drivers::RetryPolicy::Fast(),
                     gpuprov::sdk::Host());
  EXPECT_EQ(tokens.Token(), "at-1");
  EXPECT_EQ(tokens.Token(), "at-1");
  EXPECT_EQ(tokens.fetches(), 1);
  std::vector<std::string> bodies = endpoint.bodies();
  ASSERT_EQ(bodies.size(), 1u);
  EXPECT_EQ(bodies[0].rfind(
                "POST /token grant_type=refresh_token&client_id=cid.apps.googleusercontent.com"
                "&client_secret=csecret-value&refresh_token=1%2F%2Frtoken-value",
                0),
            0u)
      << bodies[0];
  endpoint.Answer(200, R"({"access_token":"at-2","expires_in":3599})");
  EXPECT_EQ(tokens.Token(/*force_refresh=*/true), "at-2");
  EXPECT_EQ(tokens.fetches(), 2);
}

TEST(GcpTokenSource, AServiceAccountPostsASignedAssertionToItsTokenUri) {
  FakeTokenEndpoint endpoint;
  GoogleCredentials sa = ParseCredentials(KeyJson(), "sa.json");
  sa.token_uri = endpoint.uri();
  TokenSource tokens(sa, drivers::RetryPolicy::Fast(), gpuprov::sdk::Host());
  EXPECT_EQ(tokens.Token(), "at-1");
  const std::string body = endpoint.bodies().at(0);
  const std::string prefix =
      "POST /token grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=";
  ASSERT_EQ(body.rfind(prefix, 0), 0u) << body;
  std::vector<std::string> parts = SplitDots(body.substr(prefix.size()));
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(ParseJson(DecodePart(parts[1]))->getValue<std::string>("aud"),
            endpoint.uri());
}

TEST(GcpTokenSource, ATokenAboutToExpireIsReplaced) {
  FakeTokenEndpoint endpoint;
  endpoint.Answer(200, R"({"access_token":"short","expires_in":60})");  // inside the 5 min margin
  TokenSource tokens(UserCredentials(endpoint.uri()), drivers::RetryPolicy::Fast(),
                     gpuprov::sdk::Host());
  tokens.Token();
  tokens.Token();
  EXPECT_EQ(tokens.fetches(), 2);
}

TEST(GcpTokenSource, ARefusedGrantIsAuthWithGooglesWordsButNoSecrets) {
  FakeTokenEndpoint endpoint;
  endpoint.Answer(
      400, R"({"error":"invalid_grant","error_description":"Token has been expired or revoked."})");
  TokenSource tokens(UserCredentials(endpoint.uri()), drivers::RetryPolicy::Fast(),
                     gpuprov::sdk::Host());
  try {
    tokens.Token();
    FAIL() << "no error";
  } catch (const DriverError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.status(), GPUPROV_STATUS_AUTH);
    EXPECT_NE(msg.find("invalid_grant: Token has been expired or revoked"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("application_default_credentials.json"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("csecret-value"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("rtoken-value"), std::string::npos) << msg;
  }
  endpoint.Answer(200, R"({"token_type":"Bearer"})");
  EXPECT_THROW(tokens.Token(), DriverError);  // 200 without access_token
}

}  // namespace
}  // namespace gpuprov::gcp
