// SPDX-License-Identifier: Apache-2.0
//
// The Verda rules that need no network: credentials, the error envelope and codes, states,
// instance types, names, recognition and the action answers.
#include "verda_rules.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "driver_test_util.h"
#include "json_util.h"

namespace gpuprov::verda {
namespace {

using drivers::testing::Contains;
using drivers::testing::ScopedEnv;
using drivers::testing::ScopedTempDir;
using Poco::JSON::Object;

constexpr const char* kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF test@gpuprov";

// Every place credentials come from, cleared, with HOME in a temp dir.
class CredentialsTest : public ::testing::Test {
 protected:
  ScopedTempDir home_;
  ScopedEnv h_{"HOME", home_.path().c_str()};
  ScopedEnv a_{"VERDA_CLIENT_ID", nullptr};
  ScopedEnv b_{"VERDA_CLIENT_SECRET", nullptr};
  ScopedEnv c_{"DATACRUNCH_CLIENT_ID", nullptr};
  ScopedEnv d_{"DATACRUNCH_CLIENT_SECRET", nullptr};
  ScopedEnv e_{"VERDA_SHARED_CREDENTIALS_FILE", nullptr};
  ScopedEnv f_{"VERDA_HOME", nullptr};
  ScopedEnv g_{"VERDA_PROFILE", nullptr};

  void WriteFile(const std::filesystem::path& p, const std::string& text) {
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
};

TEST_F(CredentialsTest, NoneAnywhere) { EXPECT_FALSE(ResolveCredentials(new Object())); }

TEST_F(CredentialsTest, EnvironmentFirstThenDataCrunchNames) {
  ScopedEnv id("DATACRUNCH_CLIENT_ID", "dc-id");
  ScopedEnv secret("DATACRUNCH_CLIENT_SECRET", "dc-secret");
  auto c = ResolveCredentials(new Object());
  ASSERT_TRUE(c);
  EXPECT_EQ(c->client_id, "dc-id");
  EXPECT_EQ(c->origin, "$DATACRUNCH_CLIENT_ID/$DATACRUNCH_CLIENT_SECRET");
  ScopedEnv vid("VERDA_CLIENT_ID", "v-id");
  ScopedEnv vsecret("VERDA_CLIENT_SECRET", " v-secret\n");
  c = ResolveCredentials(new Object());
  ASSERT_TRUE(c);
  EXPECT_EQ(c->client_id, "v-id");
  EXPECT_EQ(c->client_secret, "v-secret");
  EXPECT_EQ(c->origin, "$VERDA_CLIENT_ID/$VERDA_CLIENT_SECRET");
}

TEST_F(CredentialsTest, AnIdWithoutItsSecretIsSkipped) {
  ScopedEnv vid("VERDA_CLIENT_ID", "v-id");
  EXPECT_FALSE(ResolveCredentials(new Object()));
}

TEST_F(CredentialsTest, ConfigNamesTheVariables) {
  ScopedEnv id("MY_ID", "mine");
  ScopedEnv secret("MY_SECRET", "s");
  ScopedEnv vid("VERDA_CLIENT_ID", "v-id");
  ScopedEnv vsecret("VERDA_CLIENT_SECRET", "v-secret");
  Object::Ptr config = new Object();
  config->set("client_id_env", "MY_ID");
  config->set("client_secret_env", "MY_SECRET");
  auto c = ResolveCredentials(config);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->client_id, "mine");
}

TEST_F(CredentialsTest, TheCliCredentialsFileAndProfiles) {
  WriteFile(home_.path() / ".verda/credentials",
            "[default]\nverda_client_id = file-id\nverda_client_secret = file-secret\n"
            "[work]\nverda_client_id = work-id\nverda_client_secret = work-secret\n");
  auto c = ResolveCredentials(new Object());
  ASSERT_TRUE(c);
  EXPECT_EQ(c->client_id, "file-id");
  EXPECT_EQ(c->client_secret, "file-secret");
  EXPECT_TRUE(Contains(c->origin, ".verda/credentials [default]")) << c->origin;
  {
    ScopedEnv p("VERDA_PROFILE", "work");
    c = ResolveCredentials(new Object());
    ASSERT_TRUE(c);
    EXPECT_EQ(c->client_id, "work-id");
  }
  Object::Ptr config = new Object();
  config->set("profile", "nope");
  EXPECT_FALSE(ResolveCredentials(config));
  // VERDA_HOME and VERDA_SHARED_CREDENTIALS_FILE move the file.
  WriteFile(home_.path() / "vh/credentials",
            "[default]\nverda_client_id = vh-id\nverda_client_secret = vh\n");
  {
    ScopedEnv vh("VERDA_HOME", (home_.path() / "vh").c_str());
    EXPECT_EQ(ResolveCredentials(new Object())->client_id, "vh-id");
    WriteFile(home_.path() / "shared",
              "[default]\nverda_client_id = sh-id\nverda_client_secret = sh\n");
    ScopedEnv sh("VERDA_SHARED_CREDENTIALS_FILE", (home_.path() / "shared").c_str());
    EXPECT_EQ(ResolveCredentials(new Object())->client_id, "sh-id");
  }
}

TEST(VerdaToken, RequestBodyAndAnswer) {
  const std::string body = TokenRequestBody({"id1", "sec ret", "x"});
  Object::Ptr doc = drivers::json::TryParseObject(body);
  ASSERT_TRUE(doc);
  EXPECT_EQ(doc->getValue<std::string>("grant_type"), "client_credentials");
  EXPECT_EQ(doc->getValue<std::string>("client_id"), "id1");
  EXPECT_EQ(doc->getValue<std::string>("client_secret"), "sec ret");
  AccessToken t = ParseTokenAnswer(
      R"({"access_token":"abc","refresh_token":"r","scope":"cloud-api-v1","token_type":"Bearer","expires_in":120})");
  EXPECT_EQ(t.value, "abc");
  EXPECT_EQ(t.expires_in, 120);
  EXPECT_EQ(ParseTokenAnswer(R"({"access_token":"abc"})").expires_in, 3600);
  EXPECT_THROW(ParseTokenAnswer("{}"), gpuprov::sdk::DriverError);
  EXPECT_THROW(ParseTokenAnswer("not json"), gpuprov::sdk::DriverError);
}

TEST(VerdaErrors, EnvelopeAndStatuses) {
  ApiError e = ParseApiError(R"({"code":"invalid_request","message":"Not enough resources"})");
  EXPECT_EQ(e.Text(), "invalid_request: Not enough resources");
  EXPECT_EQ(StatusOf(400, e), GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(StatusOf(400, ParseApiError(R"({"code":"invalid_request","message":"bad image"})")),
            GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(
      StatusOf(400,
               ParseApiError(
                   R"({"code":"forbidden_action","message":"Instance quota limit exceeded"})")),
      GPUPROV_STATUS_QUOTA);
  EXPECT_EQ(StatusOf(402, ParseApiError(R"({"code":"insufficient_funds","message":"x"})")),
            GPUPROV_STATUS_QUOTA);
  EXPECT_EQ(StatusOf(401, ParseApiError(R"({"code":"unauthorized_request","message":"x"})")),
            GPUPROV_STATUS_AUTH);
  EXPECT_EQ(StatusOf(404, ParseApiError(R"({"code":"not_found","message":"Invalid instance id"})")),
            GPUPROV_STATUS_NOT_FOUND);
  EXPECT_EQ(StatusOf(503, ParseApiError("<html>upstream</html>")), GPUPROV_STATUS_TRANSIENT);
  // V1: V-SPEC POST /v1/instances "503" {"code":"service_unavailable","message":"No capacity
  // available"} is no capacity; a 503 without Verda's envelope is not.
  EXPECT_TRUE(IsNoCapacityAnswer(
      503, ParseApiError(R"({"code":"service_unavailable","message":"No capacity available"})")));
  EXPECT_TRUE(IsNoCapacityAnswer(500, ParseApiError(R"({"code":"server_error","message":"No capacity"})")));
  EXPECT_FALSE(IsNoCapacityAnswer(503, ParseApiError("<html>upstream</html>")));
  EXPECT_FALSE(IsNoCapacityAnswer(500, ParseApiError(R"({"code":"server_error","message":"x"})")));
  EXPECT_EQ(StatusOf(429, ParseApiError("")), GPUPROV_STATUS_TRANSIENT);
  // Not JSON: the text itself; "details" when there is no message.
  EXPECT_EQ(ParseApiError("plain failure").Text(), "plain failure");
  EXPECT_EQ(ParseApiError(R"({"code":"x","details":"why"})").message, "why");
  EXPECT_EQ(ParseApiError("").message, "no error message");
}

TEST(VerdaStates, EveryReferenceStatusMapsToAProtocolWord) {
  for (const char* s : {"new", "ordered", "pending", "validating", "provisioning"}) {
    EXPECT_EQ(StateOf(s, false).state, "pending") << s;
  }
  EXPECT_EQ(StateOf("running", true).state, "running");
  EXPECT_EQ(StateOf("running", false).state, "pending");
  EXPECT_EQ(StateOf("running", false).message, "running, waiting for its IP");
  for (const char* s : {"offline", "starting_hibernation", "hibernating", "restoring"}) {
    EXPECT_EQ(StateOf(s, true).state, "stopped") << s;
  }
  EXPECT_EQ(StateOf("no_capacity", false).state, "error");
  EXPECT_TRUE(Contains(StateOf("no_capacity", false).message, "no_capacity"));
  EXPECT_EQ(StateOf("error", false).state, "error");
  EXPECT_EQ(StateOf("installation_failed", false).message, "Verda status installation_failed");
  for (const char* s : {"deleting", "discontinued", "notfound", "unknown"}) {
    EXPECT_EQ(StateOf(s, false).state, "terminated") << s;
    EXPECT_TRUE(IsGoneStatus(s)) << s;
  }
  EXPECT_EQ(StateOf("martian", false).state, "error");
  EXPECT_FALSE(IsGoneStatus("running"));
  EXPECT_TRUE(IsUnplacedStatus("ordered"));
  EXPECT_FALSE(IsUnplacedStatus("provisioning"));
}

TEST(VerdaTypes, GpuRequestsBecomeTheReferenceNames) {
  const drivers::Catalogue& c = TypeCatalogue();
  auto type_for = [&](const std::string& gpu, int n) {
    return drivers::ChooseInstanceType(c, drivers::GpuRequest{gpu, n}, "").row.instance_type;
  };
  EXPECT_EQ(type_for("H100", 1), "1H100.80S.30V");
  EXPECT_EQ(type_for("h100", 8), "8H100.80S.176V");
  EXPECT_EQ(type_for("A100", 1), "1A100.22V");
  EXPECT_EQ(type_for("L40S", 4), "4L40S.80V");
  EXPECT_EQ(type_for("RTX_A6000", 1), "1A6000.10V");
  EXPECT_EQ(type_for("A6000", 2), "2A6000.20V");
  EXPECT_EQ(drivers::ChooseInstanceType(c, std::nullopt, "").row.instance_type, "CPU.4V.16G");
}

TEST(VerdaTypes, AnUnknownGpuIsRefusedNamingWhatVerdaHas) {
  try {
    drivers::ChooseInstanceType(TypeCatalogue(), drivers::GpuRequest{"L4", 1}, "");
    FAIL() << "L4 accepted";
  } catch (const gpuprov::sdk::DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
    EXPECT_TRUE(Contains(e.what(), "Verda does not offer L4:1")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "H100")) << e.what();
  }
  try {
    drivers::ChooseInstanceType(TypeCatalogue(), drivers::GpuRequest{"H100", 3}, "");
    FAIL() << "H100:3 accepted";
  } catch (const gpuprov::sdk::DriverError& e) {
    EXPECT_TRUE(Contains(e.what(), "1H100.80S.30V")) << e.what();
  }
}

TEST(VerdaTypes, NamesReadAsTheirGpus) {
  EXPECT_EQ(GpusText("8H100.80S.176V"), "H100:8");
  EXPECT_EQ(GpusText("1A100.40S.22V"), "A100:1");
  EXPECT_EQ(GpusText("4H200.141S.88V"), "H200:4");  // not in the table: read from the name
  EXPECT_EQ(GpusText("2RTX6000ADA.20V"), "RTX6000ADA:2");
  EXPECT_EQ(GpusText("CPU.4V.16G"), "");
  EXPECT_EQ(GpusText("1FOO.10V"), "");
  EXPECT_EQ(GpusText("H100.80S.30V"), "");
  EXPECT_EQ(GpusText(""), "");
}

TEST(VerdaTypes, CandidatesComeFromTheTableAndTheLiveList) {
  Poco::JSON::Parser parser;
  auto live = ParseInstanceTypes(parser.parse(R"([
      {"instance_type":"8H100.80S.352V","price_per_hour":"20.00","supported_os":["ubuntu-24.04"]},
      {"instance_type":"8H100.80S.176V","price_per_hour":"17.52"},
      {"instance_type":"8H100.80S.168V","price_per_hour":"x"},
      {"instance_type":"8B300.640S.176V","price_per_hour":"39.92"},
      {"instance_type":"1H100.80S.30V","price_per_hour":"2.19"}])")
                                         .extract<Poco::JSON::Array::Ptr>());
  ASSERT_EQ(live.size(), 5u);
  EXPECT_DOUBLE_EQ(live["8H100.80S.176V"].price_per_hour, 17.52);
  EXPECT_EQ(live["8H100.80S.352V"].supported_os, (std::vector<std::string>{"ubuntu-24.04"}));
  // The table's row first, then the live others cheapest first; a table row the live list
  // lacks is not tried.
  EXPECT_EQ(CandidateTypes("H100", 8, live),
            (std::vector<std::string>{"8H100.80S.176V", "8H100.80S.168V", "8H100.80S.352V"}));
  EXPECT_EQ(CandidateTypes("B300", 8, live), (std::vector<std::string>{"8B300.640S.176V"}));
  EXPECT_EQ(CandidateTypes("H100", 1, {}), (std::vector<std::string>{"1H100.80S.30V",
                                                                      "1H100.80S.32V",
                                                                      "1H100.80S.22V"}));
  try {
    CandidateTypes("H100", 2, live);
    FAIL() << "H100:2 accepted";
  } catch (const gpuprov::sdk::DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
    EXPECT_TRUE(Contains(e.what(), "H100 with 1, 8 GPUs")) << e.what();
  }
}

TEST(VerdaTypes, AnImageTheTypeSupports) {
  const std::vector<std::string> older = {"ubuntu-22.04-cuda-12.0-docker", "ubuntu-22.04"};
  const std::string def = "ubuntu-24.04-cuda-12.8-open-docker";
  EXPECT_EQ(ChooseImage(def, false, {}, {}), def);  // no supported_os: as wanted
  EXPECT_EQ(ChooseImage(def, false, {def, "ubuntu-24.04"}, {}), def);
  EXPECT_EQ(ChooseImage(def, true, older, {}), def);  // the user's choice: Verda decides
  EXPECT_EQ(ChooseImage(def, false, older, {}), "ubuntu-22.04-cuda-12.0-docker");
  EXPECT_EQ(ChooseImage(def, false, {"ubuntu-22.04", "ubuntu-20.04-cuda-11.8"}, {}),
            "ubuntu-20.04-cuda-11.8");
  EXPECT_EQ(ChooseImage(def, false, older,
                        {{"ubuntu-22.04-cuda-12.0-docker", false}, {"ubuntu-22.04", true}}),
            "ubuntu-22.04");  // the list's default, when the type supports it
  EXPECT_EQ(ChooseImage(def, false, {"ubuntu-22.04"}, {}), "ubuntu-22.04");
}

TEST(VerdaNames, TagsWithinVerdasLimits) {
  std::map<std::string, std::string> user;
  for (int i = 0; i < 8; ++i) user["t" + std::to_string(i)] = std::string(127, 'v');
  user["Team"] = "ml";  // 9 user tags: one too many
  try {
    InstanceTags("demo", user);
    FAIL() << "11 tags accepted";
  } catch (const gpuprov::sdk::DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
    EXPECT_TRUE(Contains(e.what(), "10 tags")) << e.what();
  }
  user.erase("t7");
  Poco::JSON::Array::Ptr tags = InstanceTags("demo", user);
  EXPECT_EQ(tags->size(), 10u);
  Object::Ptr in = new Object();
  in->set("tags", tags);
  EXPECT_EQ(TagValue(in, "team"), "ml");  // keys lower-cased, as Verda stores them
  try {
    InstanceTags("demo", {{"long", std::string(128, 'v')}});
    FAIL() << "a 128-character value accepted";
  } catch (const gpuprov::sdk::DriverError& e) {
    EXPECT_TRUE(Contains(e.what(), "tag long")) << e.what();
  }
  EXPECT_THROW(InstanceTags("demo", {{std::string(64, 'k'), "v"}}), gpuprov::sdk::DriverError);
  // Characters, not bytes: 127 two-byte characters fit.
  std::string wide;
  for (int i = 0; i < 127; ++i) wide += "\xc3\xa9";
  EXPECT_EQ(InstanceTags("demo", {{"accent", wide}})->size(), 3u);
}

TEST(VerdaTypes, Availability) {
  Poco::JSON::Parser parser;
  auto a =
      parser
          .parse(R"([{"location_code":"FIN-01","availabilities":["1H100.80S.30V","CPU.4V.16G"]},
                           {"location_code":"ICE-01","availabilities":[]}])")
          .extract<Poco::JSON::Array::Ptr>();
  auto m = ParseAvailability(a);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m["FIN-01"], (std::vector<std::string>{"1H100.80S.30V", "CPU.4V.16G"}));
  EXPECT_TRUE(m["ICE-01"].empty());
}

TEST(VerdaNames, ScriptKeyDescriptionTags) {
  EXPECT_EQ(ScriptName("demo"), "gpuprov-demo");
  const std::string k = KeyName(kKey);
  EXPECT_EQ(k.size(), std::string("gpuprov-").size() + 16);
  EXPECT_EQ(k,
            KeyName(std::string(kKey).substr(0, std::string(kKey).rfind(' '))));  // comment ignored
  EXPECT_THROW(KeyName("not a key"), gpuprov::sdk::DriverError);
  Object::Ptr in = new Object();
  in->set("hostname", "demo");
  EXPECT_FALSE(IsManaged(in));
  in->set("description", InstanceDescription("demo"));
  EXPECT_TRUE(IsManaged(in));  // an API that drops tags still shows the description
  in->set("description", InstanceDescription("other"));
  EXPECT_FALSE(IsManaged(in));
  in->set("tags", InstanceTags("demo", {{"team", "ml"}, {"gpuprov", "0"}, {"a b", "c"}}));
  EXPECT_TRUE(IsManaged(in));
  EXPECT_EQ(TagValue(in, "gpuprov-name"), "demo");
  EXPECT_EQ(TagValue(in, "team"), "ml");
  EXPECT_EQ(TagValue(in, "a_b"), "c");
}

TEST(VerdaAnswers, CreateIdsAndActions) {
  EXPECT_EQ(IdOfCreateAnswer("1f0c7a2e-aaaa-bbbb-cccc-0123456789ab\n"),
            "1f0c7a2e-aaaa-bbbb-cccc-0123456789ab");
  EXPECT_EQ(IdOfCreateAnswer(R"("abc-1")"), "abc-1");
  EXPECT_EQ(IdOfCreateAnswer(R"({"id":"abc-2","status":"ordered"})"), "abc-2");
  EXPECT_EQ(IdOfCreateAnswer("<html>oops</html>"), "");
  EXPECT_EQ(IdOfCreateAnswer(""), "");
  // V4/V7: volume_ids is an array (V-SPEC PerformInstanceActionPublicDto), never null, and
  // names the OS volume so delete_permanently applies to it (the old assertion, null, followed
  // our notes, which the spec corrects).
  Object::Ptr in = drivers::json::TryParseObject(
      R"({"id":"i-1","os_volume_id":"v-os","volume_ids":["v-os","v-data"]})");
  EXPECT_EQ(VolumesToDelete(in), (std::vector<std::string>{"v-os"}));
  in->remove("os_volume_id");
  EXPECT_EQ(VolumesToDelete(in), (std::vector<std::string>{"v-os", "v-data"}));
  Object::Ptr body = drivers::json::TryParseObject(DeleteActionBody("i-1", {"v-os"}));
  ASSERT_TRUE(body);
  EXPECT_EQ(body->getValue<std::string>("action"), "delete");
  EXPECT_EQ(body->getArray("id")->getElement<std::string>(0), "i-1");
  ASSERT_TRUE(body->getArray("volume_ids"));
  EXPECT_EQ(body->getArray("volume_ids")->getElement<std::string>(0), "v-os");
  EXPECT_TRUE(body->getValue<bool>("delete_permanently"));
  body = drivers::json::TryParseObject(DeleteActionBody("i-1", {}));
  ASSERT_TRUE(body->getArray("volume_ids"));
  EXPECT_EQ(body->getArray("volume_ids")->size(), 0u);
  EXPECT_EQ(ClassifyActionMessage(""), ActionOutcome::kDone);
  EXPECT_EQ(ClassifyActionMessage("Invalid instance id"), ActionOutcome::kGone);
  EXPECT_EQ(ClassifyActionMessage("Can't discontinue a discontinued instance"),
            ActionOutcome::kGone);
  EXPECT_EQ(ClassifyActionMessage("Can't discontinue a provisioning instance"),
            ActionOutcome::kNotYet);
  EXPECT_EQ(ClassifyActionMessage("something else"), ActionOutcome::kFailed);
}

}  // namespace
}  // namespace gpuprov::verda
