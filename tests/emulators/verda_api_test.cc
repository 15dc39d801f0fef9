// SPDX-License-Identifier: Apache-2.0
//
// The Verda emulator over HTTP with the memory backend, checked against the official Verda
// OpenAPI spec (V-SPEC: "Verda Cloud Public API", gurdasnijor/effect-verda
// spec/verda.openapi.json @805db07, changelog to 2026-09-25) and, where it is silent,
// plugins/verda/REFERENCE.md: the OAuth2 token endpoint (client credentials, refresh
// rotation, expiry, 401 bodies), every route's shape (bare-UUID create answers, one-element
// arrays for GET by id, {"code","message"} errors), instance states over time, the PUT action
// call and its refusal while provisioning, SSH keys under both spellings, startup scripts,
// the catalogue, and every fault knob of plugins/verda/REFERENCE.md, emulator notes (a)-(g).
#include <Poco/JSON/Parser.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>

#include "emulator.h"
#include "emulator_test_util.h"
#include "verda_spec_operations.h"

namespace gpuprov::emulator {
namespace {

using testing::Call;
using testing::Reply;
using testing::WaitFor;
using namespace std::chrono_literals;

constexpr const char* kClientId = "verda-test-client";
constexpr const char* kClientSecret = "verda-test-secret";
constexpr const char* kPublicKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPtlieUdwvU3Yi8XHX36t5VZpca1by3GqjV+S0aD87Tm emu-test";

bool IsUuid(const std::string& s) {
  static const std::regex uuid("^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$");
  return std::regex_match(s, uuid);
}

JsonArray ArrayOf(const Reply& r) {
  try {
    Poco::JSON::Parser p;
    return p.parse(r.body).extract<JsonArray>();
  } catch (const std::exception&) {
    return nullptr;
  }
}

std::string Code(const Reply& r) {
  return GetString(r.Json(), "code").value_or("(none: " + r.body + ")");
}
std::string Message(const Reply& r) { return GetString(r.Json(), "message").value_or(""); }

class VerdaApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EmulatorOptions o;
    o.backend = "memory";
    o.boot_seconds = 0.6;
    o.clouds = {"verda"};
    o.tokens["verda"] = {kClientId, kClientSecret};
    emu_ = std::make_unique<Emulator>(o);
    emu_->Start();
    base_ = emu_->BaseUrl("verda");
    control_ = emu_->ControlUrl();
    Settings(R"({"cloud":"verda","ordered_seconds":0.2,"deleting_seconds":0.3})");
    token_ = TokenJson(kClientId, kClientSecret)->getValue<std::string>("access_token");
  }
  void TearDown() override { emu_.reset(); }

  Reply PostToken(const std::string& body) { return Call(base_, "POST", "/oauth2/token", body); }
  JsonObject TokenJson(const std::string& id, const std::string& secret) {
    Reply r = PostToken(R"({"grant_type":"client_credentials","client_id":")" + id +
                        R"(","client_secret":")" + secret + "\"}");
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json();
  }
  Reply V(const std::string& method, const std::string& path, const std::string& body = "") {
    return Call(base_, method, path, body, token_);
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
    return Control("GET", "/counts?cloud=verda").Json()->getValue<int64_t>(what);
  }
  JsonObject ControlRow(const std::string& id) {
    JsonArray rows = GetArray(Control("GET", "/instances?cloud=verda").Json(), "instances");
    for (unsigned i = 0; rows && i < rows->size(); ++i) {
      if (rows->getObject(i)->getValue<std::string>("id") == id) return rows->getObject(i);
    }
    return nullptr;
  }
  std::string AddKey(const std::string& path = "/ssh-keys") {
    Reply r = V("POST", path, R"({"name":"gpuprov","key":")" + std::string(kPublicKey) + "\"}");
    EXPECT_EQ(r.status, 201) << r.body;
    return r.body;
  }
  std::string AddScript(const std::string& text) {
    JsonObject b = NewObject();
    b->set("name", std::string("gpuprov-vm"));
    b->set("script", text);
    Reply r = V("POST", "/scripts", ToJson(b));
    EXPECT_EQ(r.status, 201) << r.body;
    return r.body;
  }
  static std::string CreateBody(const std::string& hostname, const std::string& extra = "",
                                const std::string& type = "1H100.80S.30V") {
    return R"({"instance_type":")" + type +
           R"(","image":"ubuntu-24.04-cuda-12.8-open-docker","hostname":")" + hostname +
           R"(","description":"gpuprov test","location_code":"FIN-01")" + extra + "}";
  }
  std::string Create(const std::string& hostname, const std::string& extra = "") {
    Reply r = V("POST", "/instances", CreateBody(hostname, extra));
    EXPECT_EQ(r.status, 202) << r.body;
    return r.body;
  }
  JsonObject Instance(const std::string& id) {
    Reply r = V("GET", "/instances/" + id);
    return r.status == 200 ? r.Json() : nullptr;
  }
  std::string Status(const std::string& id) {
    JsonObject i = Instance(id);
    return i ? i->getValue<std::string>("status") : "404";
  }
  bool WaitStatus(const std::string& id, const std::string& want,
                  std::chrono::milliseconds timeout = 5s) {
    return WaitFor([&] { return Status(id) == want; }, timeout);
  }
  Reply Delete(const std::string& id) {
    return V("PUT", "/instances",
             R"({"action":"delete","id":[")" + id +
                 R"("],"volume_ids":null,"delete_permanently":true})");
  }

  std::unique_ptr<Emulator> emu_;
  std::string base_, control_, token_;
};

// --- authentication (plugins/verda/REFERENCE.md §1, emulator note 1 and fault g) ---

TEST_F(VerdaApiTest, TokenEndpointIssuesTheReferenceShapeForClientCredentials) {
  JsonObject t = TokenJson(kClientId, kClientSecret);
  EXPECT_EQ(t->getValue<std::string>("token_type"), "Bearer");
  EXPECT_EQ(t->getValue<std::string>("scope"), "cloud-api-v1");
  EXPECT_EQ(t->getValue<int>("expires_in"), 3600);
  EXPECT_FALSE(t->getValue<std::string>("access_token").empty());
  EXPECT_FALSE(t->getValue<std::string>("refresh_token").empty());
  EXPECT_NE(t->getValue<std::string>("access_token"), token_);

  Reply wrong = PostToken(R"({"grant_type":"client_credentials","client_id":")" +
                          std::string(kClientId) + R"(","client_secret":"nope"})");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(Code(wrong), "unauthorized_request");
  Reply unknown = PostToken(
      R"({"grant_type":"client_credentials","client_id":"other","client_secret":"x"})");
  EXPECT_EQ(unknown.status, 401);
  Reply missing = PostToken(R"({"grant_type":"client_credentials","client_id":"x"})");
  EXPECT_EQ(missing.status, 400);
  EXPECT_EQ(Code(missing), "invalid_request");
  Reply grant = PostToken(R"({"grant_type":"password"})");
  EXPECT_EQ(grant.status, 400);
  EXPECT_EQ(Message(grant), "unsupported grant type");  // V-SPEC example
  EXPECT_EQ(Message(wrong), "Invalid client id or client secret");  // V-SPEC example
  Reply extra = PostToken(R"({"grant_type":"client_credentials","client_id":")" +
                          std::string(kClientId) + R"(","client_secret":")" + kClientSecret +
                          R"(","scope":"all"})");
  EXPECT_EQ(extra.status, 400) << extra.body;  // not a member of GetAccessTokenDto
  EXPECT_EQ(PostToken("not json").status, 400);
  EXPECT_EQ(Call(base_, "GET", "/oauth2/token").status, 404);  // V-SPEC: POST only, no 405
}

TEST_F(VerdaApiTest, EveryOtherRouteNeedsAnIssuedUnexpiredBearerToken) {
  for (const std::string path : {"/instances", "/sshkeys", "/ssh-keys", "/scripts",
                                 "/instance-types", "/instance-availability", "/images",
                                 "/locations"}) {
    for (const Reply& r : {Call(base_, "GET", path), Call(base_, "GET", path, "", "forged"),
                           Call(base_, "GET", path, "", kClientSecret)}) {
      EXPECT_EQ(r.status, 401) << path;
      EXPECT_EQ(Code(r), "unauthorized_request") << path;
    }
    EXPECT_EQ(V("GET", path).status, 200) << path;
  }
  // A wrong token is refused before any fault or route.
  Fault(R"({"cloud":"verda","fault":"throttle"})");
  EXPECT_EQ(Call(base_, "GET", "/instances", "", "forged").status, 401);
  EXPECT_EQ(V("GET", "/instances").status, 429);
}

TEST_F(VerdaApiTest, ShortLivedTokensExpireAndTheRefreshGrantRotates) {
  Settings(R"({"cloud":"verda","token_lifetime_seconds":0.4})");
  JsonObject t = TokenJson(kClientId, kClientSecret);
  EXPECT_EQ(t->getValue<int>("expires_in"), 1);
  const std::string access = t->getValue<std::string>("access_token");
  const std::string refresh = t->getValue<std::string>("refresh_token");
  EXPECT_EQ(Call(base_, "GET", "/instances", "", access).status, 200);
  std::this_thread::sleep_for(500ms);
  Reply expired = Call(base_, "GET", "/instances", "", access);
  EXPECT_EQ(expired.status, 401);
  EXPECT_EQ(Code(expired), "unauthorized_request");
  EXPECT_EQ(Message(expired), "Access token expired");

  Reply r = PostToken(R"({"grant_type":"refresh_token","refresh_token":")" + refresh + "\"}");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string access2 = r.Json()->getValue<std::string>("access_token");
  EXPECT_EQ(Call(base_, "GET", "/instances", "", access2).status, 200);
  // Each refresh token is good once; an unknown one is refused.
  EXPECT_EQ(PostToken(R"({"grant_type":"refresh_token","refresh_token":")" + refresh + "\"}")
                .status,
            401);
  EXPECT_EQ(PostToken(R"({"grant_type":"refresh_token"})").status, 400);

  // Revoked refresh tokens: the client must authenticate again (the SDK's fallback).
  const std::string refresh2 = r.Json()->getValue<std::string>("refresh_token");
  Settings(R"({"cloud":"verda","revoke_refresh_tokens":true})");
  EXPECT_EQ(PostToken(R"({"grant_type":"refresh_token","refresh_token":")" + refresh2 + "\"}")
                .status,
            401);
  EXPECT_FALSE(TokenJson(kClientId, kClientSecret)->getValue<std::string>("access_token").empty());
}

TEST_F(VerdaApiTest, ExpireTokensSettingAndAuthFailureFaultGive401) {
  Settings(R"({"cloud":"verda","expire_tokens":true})");
  Reply r = V("GET", "/instances");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(Message(r), "Access token expired");
  token_ = TokenJson(kClientId, kClientSecret)->getValue<std::string>("access_token");
  EXPECT_EQ(V("GET", "/instances").status, 200);

  Fault(R"({"cloud":"verda","fault":"auth_failure","times":2})");
  EXPECT_EQ(V("GET", "/instances").status, 401);
  EXPECT_EQ(Code(V("GET", "/sshkeys")), "unauthorized_request");
  EXPECT_EQ(V("GET", "/instances").status, 200);
}

// --- catalogue (plugins/verda/REFERENCE.md §3.6, §7, §9) ---

TEST_F(VerdaApiTest, InstanceTypesCarryTheReferenceFieldsWithPricesAsStrings) {
  Reply r = V("GET", "/instance-types");
  ASSERT_EQ(r.status, 200);
  JsonArray a = ArrayOf(r);
  ASSERT_TRUE(a);
  std::set<std::string> names;
  for (unsigned i = 0; i < a->size(); ++i) {
    JsonObject t = a->getObject(i);
    names.insert(t->getValue<std::string>("instance_type"));
    for (const char* k : {"id", "instance_type", "model", "name", "description", "price_per_hour",
                          "spot_price", "cpu", "gpu", "gpu_memory", "memory", "storage",
                          "best_for", "p2p", "max_dynamic_price", "currency",
                          "manufacturer", "display_name", "supported_os"}) {
      EXPECT_TRUE(t->has(k)) << k;  // V-SPEC InstanceType: required
    }
    // An optional string is absent or a string, never null.
    EXPECT_TRUE(!t->has("deploy_warning") || t->get("deploy_warning").isString());
    EXPECT_TRUE(t->getArray("supported_os") && t->getArray("supported_os")->size() > 0);
    EXPECT_TRUE(t->get("price_per_hour").isString());
    EXPECT_TRUE(t->getObject("gpu")->has("number_of_gpus"));
    EXPECT_TRUE(t->getObject("gpu_memory")->has("size_in_gigabytes"));
  }
  for (const char* n : {"1H100.80S.30V", "8H100.80S.176V", "1A100.22V", "1L40S.20V",
                        "1A6000.10V", "CPU.4V.16G"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
}

TEST_F(VerdaApiTest, AvailabilityListsInStockTypesPerLocationAndAnswersOneTypeAsABool) {
  Reply r = V("GET", "/instance-availability?isSpot=false&locationCode=FIN-01");
  ASSERT_EQ(r.status, 200);
  JsonArray a = ArrayOf(r);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->size(), 1u);
  EXPECT_EQ(a->getObject(0)->getValue<std::string>("location_code"), "FIN-01");
  std::set<std::string> in_stock;
  JsonArray av = a->getObject(0)->getArray("availabilities");
  for (unsigned i = 0; i < av->size(); ++i) in_stock.insert(av->get(i).toString());
  EXPECT_TRUE(in_stock.count("1H100.80S.30V"));
  EXPECT_FALSE(in_stock.count("1B200.30V"));
  EXPECT_EQ(ArrayOf(V("GET", "/instance-availability"))->size(), 4u);
  EXPECT_EQ(V("GET", "/instance-availability?locationCode=MARS-01").status, 400);

  EXPECT_EQ(V("GET", "/instance-availability/1H100.80S.30V?isSpot=false&location_code=FIN-01").body,
            "true");
  EXPECT_EQ(V("GET", "/instance-availability/1H200.141S.44V?location_code=FIN-01").body, "false");
  EXPECT_EQ(V("GET", "/instance-availability/1H200.141S.44V?location_code=FIN-03").body, "true");

  Settings(R"({"cloud":"verda","out_of_stock":["1H100.80S.30V"]})");
  EXPECT_EQ(V("GET", "/instance-availability/1H100.80S.30V?location_code=FIN-01").body, "false");
  // V-SPEC POST /v1/instances "503": no capacity, {"code":"service_unavailable",...}.
  Reply c = V("POST", "/instances", CreateBody("no-stock"));
  EXPECT_EQ(c.status, 503);
  EXPECT_EQ(Code(c), "service_unavailable") << c.body;
  EXPECT_EQ(Message(c), "No capacity available") << c.body;
  Settings(R"({"cloud":"verda","out_of_stock":[]})");
  EXPECT_EQ(V("GET", "/instance-availability/1H100.80S.30V?location_code=FIN-01").body, "true");
}

TEST_F(VerdaApiTest, ImagesAndLocationsAreServed) {
  JsonArray images = ArrayOf(V("GET", "/images"));
  ASSERT_TRUE(images);
  std::set<std::string> types;
  for (unsigned i = 0; i < images->size(); ++i) {
    JsonObject im = images->getObject(i);
    EXPECT_TRUE(im->has("id") && im->has("name") && im->has("details"));
    types.insert(im->getValue<std::string>("image_type"));
  }
  EXPECT_TRUE(types.count("ubuntu-24.04-cuda-12.8-open-docker"));
  EXPECT_TRUE(types.count("ubuntu-22.04-cuda-12.0-docker"));
  JsonArray locations = ArrayOf(V("GET", "/locations"));
  ASSERT_TRUE(locations);
  std::set<std::string> codes;
  for (unsigned i = 0; i < locations->size(); ++i) {
    codes.insert(locations->getObject(i)->getValue<std::string>("code"));
  }
  EXPECT_EQ(codes, (std::set<std::string>{"FIN-01", "FIN-02", "FIN-03", "ICE-01"}));
  // V-SPEC GET /v1/images?instance_type=: the type's images only; 404 for an unknown type.
  JsonArray a6000 = ArrayOf(V("GET", "/images?instance_type=1A6000.10V"));
  ASSERT_TRUE(a6000);
  std::set<std::string> a6000_types;
  for (unsigned i = 0; i < a6000->size(); ++i) {
    JsonObject im = a6000->getObject(i);
    for (const char* k : {"id", "image_type", "name", "is_default", "details", "category",
                          "is_cluster"}) {
      EXPECT_TRUE(im->has(k)) << k;  // V-SPEC Os: required
    }
    a6000_types.insert(im->getValue<std::string>("image_type"));
  }
  EXPECT_TRUE(a6000_types.count("ubuntu-22.04-cuda-12.0-docker"));
  EXPECT_FALSE(a6000_types.count("ubuntu-24.04-cuda-12.8-open-docker"));
  EXPECT_EQ(V("GET", "/images?instance_type=9Z999.1V").status, 404);
}

TEST_F(VerdaApiTest, AnImageItsTypeDoesNotSupportIsRefused) {
  // V-SPEC InstanceType.supported_os; the message V-DS quotes from Verda for A6000/V100.
  Reply r = V("POST", "/instances", CreateBody("a6000-new", "", "1A6000.10V"));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(Message(r), "Operating system is not valid for this instance type");
  Reply ok = V("POST", "/instances",
               R"({"instance_type":"1A6000.10V","image":"ubuntu-22.04-cuda-12.0-docker",)"
               R"("hostname":"a6000-old","location_code":"FIN-01"})");
  EXPECT_EQ(ok.status, 202) << ok.body;
}

TEST_F(VerdaApiTest, DeprecatedAliasesAreServedAndCounted) {
  // V-SPEC still lists /v1/sshkeys and the camelCase query aliases, marked deprecated.
  EXPECT_EQ(V("GET", "/ssh-keys").status, 200);
  EXPECT_EQ(V("GET", "/instance-availability?is_spot=false&location_code=FIN-01").status, 200);
  EXPECT_EQ(Count("deprecated_calls"), 0);
  EXPECT_EQ(V("GET", "/sshkeys").status, 200);
  EXPECT_EQ(V("GET", "/instance-availability?isSpot=false").status, 200);
  EXPECT_EQ(V("GET", "/instance-availability/1H100.80S.30V?locationCode=FIN-01").status, 200);
  EXPECT_EQ(Count("deprecated_calls"), 3);
}

// --- SSH keys (plugins/verda/REFERENCE.md §3.5) and startup scripts (§4) ---

TEST_F(VerdaApiTest, SshKeysUnderBothSpellingsCreateAsBareUuidAndGetOneAsOneElementArray) {
  Reply created = V("POST", "/sshkeys",
                    R"({"name":"gpuprov","key":")" + std::string(kPublicKey) + "\"}");
  ASSERT_EQ(created.status, 201);
  EXPECT_TRUE(IsUuid(created.body)) << created.body;
  EXPECT_EQ(created.content_type.rfind("text/plain", 0), 0u) << created.content_type;
  const std::string id = created.body;
  const std::string id2 = AddKey("/ssh-keys");
  for (const std::string p : {"/sshkeys", "/ssh-keys"}) {
    JsonArray all = ArrayOf(V("GET", p));
    ASSERT_TRUE(all);
    EXPECT_EQ(all->size(), 2u);
    JsonArray one = ArrayOf(V("GET", p + "/" + id));
    ASSERT_TRUE(one);
    ASSERT_EQ(one->size(), 1u);
    JsonObject k = one->getObject(0);
    EXPECT_EQ(k->getValue<std::string>("id"), id);
    EXPECT_EQ(k->getValue<std::string>("name"), "gpuprov");
    EXPECT_EQ(k->getValue<std::string>("key"), kPublicKey);
    EXPECT_EQ(k->getValue<std::string>("fingerprint").size(), 47u);  // MD5 colon hex
    EXPECT_TRUE(k->has("created_by_user_id"));  // V-SPEC GetKeysResponseDto: required
    EXPECT_TRUE(k->has("created_at"));
  }
  EXPECT_EQ(Count("ssh_keys"), 2);
  Reply bad = V("POST", "/sshkeys", R"({"name":"x","key":"ssh-ed25519 notbase64!"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(Code(bad), "invalid_request");
  EXPECT_EQ(V("POST", "/sshkeys", R"({"name":"x"})").status, 400);
  EXPECT_EQ(V("POST", "/sshkeys", R"({"name":"x","public_key":"k","key":"k"})").status, 400);

  EXPECT_EQ(V("DELETE", "/ssh-keys/" + id).status, 200);
  Reply gone = V("GET", "/sshkeys/" + id);
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(Code(gone), "not_found");
  EXPECT_EQ(V("DELETE", "/sshkeys/" + id).status, 404);
  EXPECT_EQ(V("DELETE", "/sshkeys", R"({"keys":[")" + id2 + "\"]}").status, 200);
  EXPECT_EQ(Count("ssh_keys"), 0);
}

TEST_F(VerdaApiTest, ScriptsCreateListGetDeleteByIdAndByBodyKeepingTheText) {
  const std::string text = "#!/bin/bash\nset -eu\necho 'hello \"world\"' > /root/x\n";
  const std::string a = AddScript(text);
  const std::string b = AddScript("#!/bin/sh\ntrue\n");
  const std::string c = AddScript("#!/bin/sh\nfalse\n");
  EXPECT_TRUE(IsUuid(a)) << a;
  JsonArray all = ArrayOf(V("GET", "/scripts"));
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 3u);
  JsonArray one = ArrayOf(V("GET", "/scripts/" + a));
  ASSERT_TRUE(one);
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(one->getObject(0)->getValue<std::string>("id"), a);
  EXPECT_EQ(one->getObject(0)->getValue<std::string>("name"), "gpuprov-vm");
  EXPECT_EQ(one->getObject(0)->getValue<std::string>("script"), text);
  EXPECT_EQ(Count("scripts"), 3);

  EXPECT_EQ(V("POST", "/scripts", R"({"name":"x"})").status, 400);
  EXPECT_EQ(V("POST", "/scripts", R"({"name":"x","script":""})").status, 400);
  EXPECT_EQ(V("POST", "/scripts", R"({"name":"x","script":"y","extra":1})").status, 400);
  Settings(R"({"cloud":"verda","max_script_bytes":16})");
  Reply big = V("POST", "/scripts", R"({"name":"x","script":"0123456789abcdefg"})");
  EXPECT_EQ(big.status, 400);
  EXPECT_NE(Message(big).find("too long"), std::string::npos);
  Settings(R"({"cloud":"verda","max_script_bytes":0})");

  EXPECT_EQ(V("DELETE", "/scripts/" + a).status, 200);
  Reply gone = V("GET", "/scripts/" + a);
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(Code(gone), "not_found");
  // By body: all or nothing.
  EXPECT_EQ(V("DELETE", "/scripts", R"({"scripts":[")" + b + R"(",")" + a + "\"]}").status, 404);
  EXPECT_EQ(Count("scripts"), 2);
  EXPECT_EQ(V("DELETE", "/scripts", R"({"scripts":[")" + b + R"(",")" + c + "\"]}").status, 200);
  EXPECT_EQ(Count("scripts"), 0);
}

TEST_F(VerdaApiTest, ScriptsArePagedNewestFirstFilteredByNameAndLimitedTo100) {
  // V-SPEC GET /v1/scripts: page, pageSize (default 10, maximum 100), name (partial match),
  // orderDirection (default desc); X-Page, X-Page-Size, X-Total-Count.
  for (int i = 0; i < 25; ++i) {
    JsonObject b = NewObject();
    b->set("name", (i % 2 ? std::string("other-") : std::string("gpuprov-vm")) +
                       std::to_string(i));
    b->set("script", std::string("#!/bin/sh\ntrue\n"));
    ASSERT_EQ(V("POST", "/scripts", ToJson(b)).status, 201);
  }
  Reply first = V("GET", "/scripts");
  JsonArray page = ArrayOf(first);
  ASSERT_TRUE(page);
  EXPECT_EQ(page->size(), 10u);  // the default page size
  EXPECT_EQ(page->getObject(0)->getValue<std::string>("name"), "gpuprov-vm24");  // newest first
  EXPECT_EQ(first.Header("x-total-count"), "25");
  EXPECT_EQ(first.Header("x-page"), "1");
  EXPECT_EQ(first.Header("x-page-size"), "10");
  EXPECT_EQ(ArrayOf(V("GET", "/scripts?page=3"))->size(), 5u);
  EXPECT_EQ(ArrayOf(V("GET", "/scripts?page=4"))->size(), 0u);
  JsonArray asc = ArrayOf(V("GET", "/scripts?orderDirection=asc&pageSize=100"));
  ASSERT_EQ(asc->size(), 25u);
  EXPECT_EQ(asc->getObject(0)->getValue<std::string>("name"), "gpuprov-vm0");
  Reply named = V("GET", "/scripts?name=gpuprov-&pageSize=100");
  EXPECT_EQ(ArrayOf(named)->size(), 13u);
  EXPECT_EQ(named.Header("x-total-count"), "13");
  EXPECT_EQ(V("GET", "/scripts?pageSize=101").status, 400);
  EXPECT_EQ(V("GET", "/scripts?page=0").status, 400);
  EXPECT_EQ(V("GET", "/scripts?orderDirection=up").status, 400);
  // The project quota (default 100, changelog 2026-03-30).
  Settings(R"({"cloud":"verda","script_quota":26})");
  ASSERT_EQ(V("POST", "/scripts", R"({"name":"x","script":"y"})").status, 201);
  Reply over = V("POST", "/scripts", R"({"name":"x","script":"y"})");
  EXPECT_EQ(over.status, 403);
  EXPECT_EQ(Code(over), "forbidden_action");
  EXPECT_NE(Message(over).find("quota"), std::string::npos) << over.body;
  EXPECT_EQ(Count("scripts"), 26);
}

// --- instances (plugins/verda/REFERENCE.md §3.1-§3.4, emulator notes 5-6) ---

TEST_F(VerdaApiTest, CreatedInstanceIsOrderedThenProvisioningThenRunningWithAnIp) {
  const std::string key = AddKey();
  const std::string script = AddScript("#!/bin/bash\necho installer\n");
  Reply r = V("POST", "/instances",
              CreateBody("gpuprov-a", R"(,"ssh_key_ids":[")" + key +
                                          R"("],"startup_script_id":")" + script +
                                          R"(","os_volume":{"name":"os","size":100},"is_spot":false,"contract":"PAY_AS_YOU_GO","pricing":"FIXED_PRICE","tags":[{"key":"gpuprov","value":"a"}])"));
  ASSERT_EQ(r.status, 202) << r.body;
  EXPECT_TRUE(IsUuid(r.body)) << r.body;
  EXPECT_EQ(r.content_type.rfind("text/plain", 0), 0u);
  const std::string id = r.body;

  JsonObject i = Instance(id);
  ASSERT_TRUE(i);
  EXPECT_EQ(i->getValue<std::string>("status"), "ordered");
  EXPECT_TRUE(i->isNull("ip"));
  for (const char* k : {"id", "ip", "status", "created_at", "hostname", "description", "location",
                        "instance_type", "image", "os_name", "price_per_hour", "is_spot",
                        "contract", "pricing", "cpu", "gpu", "gpu_memory", "memory", "storage",
                        "ssh_key_ids", "startup_script_id", "os_volume_id", "volume_ids",
                        "jupyter_token", "tags"}) {
    EXPECT_TRUE(i->has(k)) << k;
  }
  EXPECT_EQ(i->getValue<std::string>("hostname"), "gpuprov-a");
  EXPECT_EQ(i->getValue<std::string>("location"), "FIN-01");
  EXPECT_EQ(i->getValue<std::string>("instance_type"), "1H100.80S.30V");
  EXPECT_EQ(i->getValue<std::string>("startup_script_id"), script);
  EXPECT_EQ(i->getArray("ssh_key_ids")->get(0).toString(), key);
  EXPECT_EQ(i->getObject("gpu")->getValue<int>("number_of_gpus"), 1);
  EXPECT_EQ(i->getArray("tags")->getObject(0)->getValue<std::string>("key"), "gpuprov");

  ASSERT_TRUE(WaitStatus(id, "provisioning"));
  EXPECT_TRUE(Instance(id)->isNull("ip"));
  ASSERT_TRUE(WaitStatus(id, "running"));
  const std::string ip = Instance(id)->getValue<std::string>("ip");
  EXPECT_EQ(ip.rfind("127.91.", 0), 0u) << ip;

  // The script as stored went to the backend as the startup script; no firewall: every port.
  JsonObject row = ControlRow(id);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->getValue<std::string>("startup_script"), "#!/bin/bash\necho installer\n");
  EXPECT_EQ(row->getValue<std::string>("reachable_ports"), "1-65535");
  EXPECT_EQ(row->getValue<std::string>("status"), "running");

  JsonArray list = ArrayOf(V("GET", "/instances"));
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->getObject(0)->getValue<std::string>("id"), id);
  EXPECT_EQ(ArrayOf(V("GET", "/instances?status=running"))->size(), 1u);
  EXPECT_EQ(ArrayOf(V("GET", "/instances?status=offline"))->size(), 0u);
  // Without a script the field is null.
  const std::string plain = Create("gpuprov-b");
  EXPECT_TRUE(Instance(plain)->isNull("startup_script_id"));
}

TEST_F(VerdaApiTest, UnknownInstanceIs404WithTheReferenceBody) {
  Reply r = V("GET", "/instances/00000000-0000-4000-8000-000000000000");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Code(r), "not_found");
  EXPECT_EQ(Message(r), "Invalid instance id");
  Reply d = Delete("00000000-0000-4000-8000-000000000000");
  EXPECT_EQ(d.status, 404);
  EXPECT_EQ(Message(d), "Invalid instance id");
}

TEST_F(VerdaApiTest, DeleteIsRefusedWhileProvisioningThenDeletingThenGone) {
  const std::string id = Create("gpuprov-del");
  Reply early = Delete(id);
  EXPECT_EQ(early.status, 400);
  EXPECT_EQ(Code(early), "invalid_request");
  EXPECT_EQ(Message(early), "Can't discontinue a provisioning instance");
  ASSERT_TRUE(WaitStatus(id, "running"));

  Reply r = Delete(id);
  ASSERT_EQ(r.status, 202) << r.body;
  JsonArray results = ArrayOf(r);
  ASSERT_TRUE(results);
  ASSERT_EQ(results->size(), 1u);
  EXPECT_EQ(results->getObject(0)->getValue<std::string>("action"), "delete");
  EXPECT_EQ(results->getObject(0)->getValue<std::string>("instanceId"), id);
  EXPECT_EQ(results->getObject(0)->getValue<std::string>("status"), "success");
  EXPECT_EQ(Status(id), "deleting");
  EXPECT_TRUE(Instance(id)->isNull("ip"));
  EXPECT_EQ(Count("backend_instances"), 0);
  Reply again = V("PUT", "/instances", R"({"action":"delete","id":")" + id + "\"}");
  EXPECT_EQ(again.status, 400);
  EXPECT_EQ(Message(again), "Can't discontinue a discontinued instance");
  ASSERT_TRUE(WaitStatus(id, "404"));
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Message(Delete(id)), "Invalid instance id");
}

TEST_F(VerdaApiTest, ActionOnSeveralIdsAnswersOneResultEach) {
  const std::string a = Create("multi-a");
  const std::string b = Create("multi-b");
  ASSERT_TRUE(WaitStatus(a, "running"));
  ASSERT_TRUE(WaitStatus(b, "running"));
  const std::string missing = "00000000-0000-4000-8000-000000000000";
  Reply r = V("PUT", "/instances",
              R"({"action":"delete","id":[")" + a + R"(",")" + missing + R"(",")" + b + "\"]}");
  ASSERT_EQ(r.status, 207) << r.body;  // V-SPEC: 207 when some actions failed
  JsonArray results = ArrayOf(r);
  ASSERT_EQ(results->size(), 3u);
  EXPECT_EQ(results->getObject(0)->getValue<std::string>("status"), "success");
  EXPECT_EQ(results->getObject(1)->getValue<std::string>("status"), "error");
  EXPECT_EQ(results->getObject(1)->getValue<std::string>("error"), "Invalid instance id");
  EXPECT_EQ(results->getObject(1)->getValue<int>("statusCode"), 404);
  EXPECT_EQ(results->getObject(2)->getValue<std::string>("status"), "success");
  EXPECT_EQ(V("PUT", "/instances", R"({"action":"fly","id":")" + a + "\"}").status, 400);
  EXPECT_EQ(V("PUT", "/instances", R"({"action":"delete"})").status, 400);
}

TEST_F(VerdaApiTest, CreateBodiesAreValidatedWithInvalidRequest) {
  const std::string key = AddKey();
  struct Case {
    std::string body;
    std::string says;
  };
  const std::vector<Case> cases = {
      {R"({"image":"ubuntu-24.04","hostname":"h","location_code":"FIN-01"})", "instance_type"},
      {R"({"instance_type":"1H100.80S.30V","hostname":"h","location_code":"FIN-01"})", "image"},
      {R"({"instance_type":"1H100.80S.30V","image":"ubuntu-24.04","location_code":"FIN-01"})",
       "hostname"},
      // V-SPEC DeployInstancePublicDto: location_code required (changelog 2026-03-19).
      {R"({"instance_type":"1H100.80S.30V","image":"ubuntu-24.04","hostname":"h"})",
       "location_code"},
      {CreateBody("h", R"(,"startup_script":"#!/bin/sh")"), "startup_script"},
      {CreateBody("h", "", "9Z999.1V"), "instance type"},
      {R"({"instance_type":"1H100.80S.30V","image":"windows","hostname":"h","location_code":"FIN-01"})",
       "image"},
      {CreateBody("h", R"(,"ssh_key_ids":["nope"])"), "ssh key"},
      {CreateBody("h", R"(,"ssh_key_ids":7)"), "ssh_key_ids"},
      // Tags: at most 10, key up to 63 and value up to 127 characters (V-SPEC TagDto).
      {CreateBody("h", R"(,"tags":[)" + [] {
         std::string t;
         for (int i = 0; i < 11; ++i) t += (i ? "," : "") + ("{\"key\":\"k" + std::to_string(i) + "\"}");
         return t;
       }() + "]"),
       "no more than 10"},
      {CreateBody("h", R"(,"tags":[{"key":"k","value":")" + std::string(128, 'v') + "\"}]"),
       "127"},
      {CreateBody("h", R"(,"tags":[{"key":")" + std::string(64, 'k') + "\"}]"), "63"},
      {CreateBody("h", R"(,"tags":[{"value":"v"}])"), "key"},
      {CreateBody("h", R"(,"startup_script_id":"nope")"), "startup script"},
      {R"({"instance_type":"1H100.80S.30V","image":"ubuntu-24.04","hostname":"h","description":"d","location_code":"MARS-1"})",
       "location"},
  };
  for (const auto& c : cases) {
    Reply r = V("POST", "/instances", c.body);
    EXPECT_EQ(r.status, 400) << c.body;
    EXPECT_EQ(Code(r), "invalid_request") << c.body;
    EXPECT_NE(Message(r).find(c.says), std::string::npos) << c.body << " -> " << r.body;
  }
  EXPECT_EQ(Count("instances"), 0);
  // The image by id works as by type.
  // The image by id works as by type; description is optional; ssh_key_ids may be one id.
  Reply byid = V("POST", "/instances",
                 R"({"instance_type":"1L40S.20V","image":"2088da25-bb0d-41cc-a191-dccae45d96fd","hostname":"h","location_code":"FIN-01","ssh_key_ids":")" +
                     key + R"(","tags":[{"key":"Team","value":"ml"},{"key":"free"}]})");
  EXPECT_EQ(byid.status, 202) << byid.body;
  JsonObject in = Instance(byid.body);
  EXPECT_EQ(in->getValue<std::string>("image"), "ubuntu-22.04-cuda-12.0-docker");
  EXPECT_EQ(in->getValue<std::string>("description"), "");
  // V-SPEC TagResponseDto {id, key (lowercased), value ("" for a freeform tag)}.
  JsonArray tags = in->getArray("tags");
  ASSERT_EQ(tags->size(), 2u);
  EXPECT_EQ(tags->getObject(0)->getValue<std::string>("key"), "team");
  EXPECT_EQ(tags->getObject(1)->getValue<std::string>("value"), "");
  EXPECT_FALSE(tags->getObject(0)->getValue<std::string>("id").empty());
}

TEST_F(VerdaApiTest, InstancesCarryEveryMemberTheSpecRequires) {
  const std::string id = Create("fields");
  ASSERT_TRUE(WaitStatus(id, "running"));
  JsonArray listed = ArrayOf(V("GET", "/instances"));
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  for (const JsonObject& in : {Instance(id), listed->getObject(0)}) {
    ASSERT_TRUE(in);
    // V-SPEC GetInstanceResponsePublicApiDto.required
    for (const char* k : {"id", "ip", "status", "created_at", "cpu", "gpu", "gpu_memory",
                          "memory", "storage", "hostname", "description", "tags", "location",
                          "price_per_hour", "is_spot", "instance_type", "image", "os_name",
                          "startup_script_id", "ssh_key_ids", "os_volume_id", "jupyter_token",
                          "contract", "pricing", "volume_ids"}) {
      EXPECT_TRUE(in->has(k)) << k;
    }
    EXPECT_TRUE(in->get("price_per_hour").isNumeric());
    EXPECT_TRUE(in->get("is_spot").isBoolean());
    EXPECT_TRUE(in->get("ip").isString());  // nullable until reachable; running here
    EXPECT_TRUE(in->getArray("volume_ids"));
    EXPECT_TRUE(in->getArray("tags"));
  }
  // V-SPEC Location.required, GetScriptResponseDto.required.
  JsonObject loc = ArrayOf(V("GET", "/locations"))->getObject(0);
  for (const char* k : {"code", "name", "country_code"}) EXPECT_TRUE(loc->has(k)) << k;
  AddScript("#!/bin/sh\n");
  JsonObject sc = ArrayOf(V("GET", "/scripts"))->getObject(0);
  for (const char* k : {"id", "name", "script", "created_at"}) EXPECT_TRUE(sc->has(k)) << k;
}

// Private networks (V-GO-PN: verda-cloud/verdacloud-sdk-go pkg/verda/private_networks.go,
// private_networks_types.go, instances_types.go): made, listed, read and deleted; an instance
// created on one (network + private_ip and public_ip "auto") gets an address there, the
// network's id and its auto-made subnet in the location; create's pairing rules; a network an
// instance is still on is refused until the instance is gone.
TEST_F(VerdaApiTest, PrivateNetworksAndTheInstancesOnThem) {
  for (const char* bad : {R"({})", R"({"name":""})", R"({"name":"n","mode":"bogus"})",
                          R"({"name":"n","is_default":"yes"})"}) {
    Reply r = V("POST", "/private-networks", bad);
    EXPECT_EQ(r.status, 400) << bad << " -> " << r.body;
    EXPECT_EQ(Code(r), "invalid_request") << bad;
  }
  Reply made = V("POST", "/private-networks", R"({"name":"gpuprov-train","mode":"auto"})");
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string net = made.Json()->getValue<std::string>("id");
  EXPECT_EQ(net.rfind("pn_", 0), 0u) << net;
  for (const char* k : {"id", "name", "mode", "is_default", "created_by_user_id", "created_at"}) {
    EXPECT_TRUE(made.Json()->has(k)) << k;
  }
  EXPECT_EQ(made.Json()->getValue<std::string>("mode"), "auto");
  EXPECT_FALSE(made.Json()->getValue<bool>("is_default"));
  EXPECT_EQ(Count("private_networks"), 1);
  JsonArray listed = ArrayOf(V("GET", "/private-networks"));
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->getObject(0)->getValue<std::string>("name"), "gpuprov-train");
  EXPECT_EQ(V("GET", "/private-networks/" + net).Json()->getValue<std::string>("id"), net);
  Reply unknown = V("GET", "/private-networks/pn_000000000000");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(Code(unknown), "not_found");

  // V-GO-PN validateNetworkFields and IPAllocation: both or neither, auto|none|IPv4, not both
  // none; an unknown network; no default network to take.
  for (const std::string& extra :
       {R"(,"network":")" + net + R"(","private_ip":"auto")",
        R"(,"network":")" + net + R"(","private_ip":"garbage","public_ip":"auto")",
        R"(,"network":")" + net + R"(","private_ip":"none","public_ip":"none")",
        std::string(R"(,"network":"pn_000000000000","private_ip":"auto","public_ip":"auto")"),
        std::string(R"(,"private_ip":"auto","public_ip":"auto")")}) {
    Reply r = V("POST", "/instances", CreateBody("gpuprov-bad", extra));
    EXPECT_EQ(r.status, 400) << extra << " -> " << r.body;
    EXPECT_EQ(Code(r), "invalid_request") << extra;
  }
  EXPECT_EQ(Count("instances"), 0);

  const std::string on = R"(,"network":")" + net + R"(","private_ip":"auto","public_ip":"auto")";
  const std::string a = Create("gpuprov-train", on);
  const std::string b = Create("gpuprov-train-agent-1", on);
  const std::string classic = Create("gpuprov-plain");
  for (const std::string& id : {a, b, classic}) ASSERT_TRUE(WaitStatus(id, "running")) << id;
  JsonObject ia = Instance(a), ib = Instance(b), ic = Instance(classic);
  EXPECT_EQ(ia->getValue<std::string>("private_ip").rfind("10.", 0), 0u) << ia->get("private_ip").toString();
  EXPECT_NE(ia->getValue<std::string>("private_ip"), ib->getValue<std::string>("private_ip"));
  EXPECT_EQ(ia->getValue<std::string>("private_network_id"), net);
  EXPECT_EQ(ia->getValue<std::string>("subnet_id").rfind("sn_", 0), 0u);
  EXPECT_EQ(ia->getValue<std::string>("subnet_id"), ib->getValue<std::string>("subnet_id"));
  EXPECT_TRUE(ia->get("ip").isString());  // public_ip "auto": a public address too
  for (const char* k : {"private_ip", "private_network_id", "subnet_id"}) {
    EXPECT_TRUE(ic->has(k) && ic->isNull(k)) << k;  // "nil for classic (non-VPC) instances"
  }

  Reply busy = V("DELETE", "/private-networks/" + net);
  EXPECT_EQ(busy.status, 400) << busy.body;
  EXPECT_EQ(Code(busy), "invalid_request");
  for (const std::string& id : {a, b}) ASSERT_EQ(Delete(id).status, 202);
  EXPECT_EQ(V("DELETE", "/private-networks/" + net).status, 400);  // still deleting
  for (const std::string& id : {a, b}) ASSERT_TRUE(WaitStatus(id, "404")) << id;
  EXPECT_EQ(V("DELETE", "/private-networks/" + net).status, 204);
  EXPECT_EQ(V("DELETE", "/private-networks/" + net).status, 404);
  EXPECT_EQ(Count("private_networks"), 0);
}

TEST_F(VerdaApiTest, DeletedInstancesLeaveTheirOsVolumeInTheTrashUnlessDeletedPermanently) {
  // V-SPEC PUT /v1/instances: without volume_ids the OS volume goes to the trash (null counts
  // as absent, as V-GO sends it); with them and delete_permanently it is gone; an empty array
  // detaches it.
  const std::string a = Create("vol-a");
  const std::string b = Create("vol-b");
  const std::string c = Create("vol-c");
  ASSERT_TRUE(WaitStatus(a, "running"));
  ASSERT_TRUE(WaitStatus(b, "running"));
  ASSERT_TRUE(WaitStatus(c, "running"));
  JsonObject in = Instance(b);
  const std::string os_volume = in->getValue<std::string>("os_volume_id");
  ASSERT_EQ(in->getArray("volume_ids")->size(), 1u);
  EXPECT_EQ(in->getArray("volume_ids")->get(0).toString(), os_volume);
  EXPECT_EQ(Delete(a).status, 202);  // volume_ids null
  EXPECT_EQ(Count("volumes_in_trash"), 1);
  EXPECT_EQ(V("PUT", "/instances",
              R"({"action":"delete","id":")" + b + R"(","volume_ids":[")" + os_volume +
                  R"("],"delete_permanently":true})")
                .status,
            202);
  EXPECT_EQ(Count("volumes_in_trash"), 1);
  EXPECT_EQ(V("PUT", "/instances", R"({"action":"delete","id":")" + c + R"(","volume_ids":[]})")
                .status,
            202);
  EXPECT_EQ(Count("detached_volumes"), 1);
  EXPECT_EQ(V("PUT", "/instances", R"({"action":"delete","id":")" + c + R"(","volume_ids":"x"})")
                .status,
            400);
}

// Spot (POST /preempt; V-SPEC GET /v1/instance-availability is_spot, DeployInstancePublicDto
// is_spot / contract; os_volume.on_spot_discontinue from verda-cloud/sdk-python v1.20.0): spot
// stock is its own list, a preempted spot instance is listed as discontinued until deleted and
// its OS volume goes as on_spot_discontinue says; an on-demand one vanishes.
TEST_F(VerdaApiTest, SpotHasItsOwnStockAndAPreemptedSpotInstanceIsDiscontinuedUntilDeleted) {
  auto in_stock = [&](const std::string& query) {
    Reply r = V("GET", "/instance-availability?location_code=FIN-01" + query);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.body.find("\"1H100.80S.30V\"") != std::string::npos;
  };
  EXPECT_TRUE(in_stock("&is_spot=true"));
  Settings(R"({"cloud":"verda","spot_out_of_stock":["1H100.80S.30V"]})");
  EXPECT_FALSE(in_stock("&is_spot=true"));
  EXPECT_TRUE(in_stock("&is_spot=false"));
  EXPECT_EQ(V("GET", "/instance-availability/1H100.80S.30V?is_spot=true&location_code=FIN-01").body,
            "false");
  Reply sold_out = V("POST", "/instances", CreateBody("spot-none", R"(,"is_spot":true)"));
  EXPECT_EQ(sold_out.status, 503) << sold_out.body;
  Settings(R"({"cloud":"verda","spot_out_of_stock":[]})");

  EXPECT_EQ(V("POST", "/instances", CreateBody("spot-bad", R"(,"contract":"CHEAP")")).status, 400);
  EXPECT_EQ(V("POST", "/instances",
              CreateBody("spot-bad", R"(,"os_volume":{"name":"os","size":50,)"
                                     R"("on_spot_discontinue":"keep"}})"))
                .status,
            400);
  const std::string trashed = Create(
      "spot-a", R"(,"is_spot":true,"contract":"SPOT","os_volume":{"name":"os","size":50,)"
                R"("on_spot_discontinue":"move_to_trash"})");
  const std::string kept = Create("spot-b", R"(,"is_spot":true)");  // keep_detached, the default
  const std::string on_demand = Create("spot-c");
  for (const auto& id : {trashed, kept, on_demand}) ASSERT_TRUE(WaitStatus(id, "running"));
  JsonObject in = Instance(trashed);
  EXPECT_TRUE(in->getValue<bool>("is_spot"));
  EXPECT_EQ(in->getValue<std::string>("contract"), "SPOT");
  EXPECT_DOUBLE_EQ(in->getValue<double>("price_per_hour"), 0.99);
  EXPECT_EQ(Instance(on_demand)->getValue<std::string>("contract"), "PAY_AS_YOU_GO");

  for (const std::string name : {"spot-a", "spot-b", "spot-c"}) {
    Reply r = Control("POST", "/preempt", R"({"cloud":"verda","name":")" + name + R"("})");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  EXPECT_EQ(Control("POST", "/preempt", R"({"cloud":"verda","name":"spot-c"})").status, 404);
  EXPECT_EQ(Status(trashed), "discontinued");
  EXPECT_EQ(Status(kept), "discontinued");
  EXPECT_TRUE(Instance(kept)->getValue<bool>("is_spot"));
  EXPECT_EQ(Status(on_demand), "404");  // not spot: it vanishes
  EXPECT_EQ(Count("volumes_in_trash"), 1);
  EXPECT_EQ(Count("detached_volumes"), 1);
  Reply listed = V("GET", "/instances?status=discontinued");
  EXPECT_NE(listed.body.find(trashed), std::string::npos) << listed.body;

  // Deleting a preempted instance ends it; its kept OS volume goes with volume_ids.
  const std::string volume = Instance(kept)->getValue<std::string>("os_volume_id");
  EXPECT_EQ(V("PUT", "/instances",
              R"({"action":"delete","id":[")" + kept + R"("],"volume_ids":[")" + volume +
                  R"("],"delete_permanently":true})")
                .status,
            202);
  EXPECT_EQ(Count("detached_volumes"), 0);
  EXPECT_TRUE(WaitStatus(kept, "404"));
  EXPECT_EQ(Delete(trashed).status, 202);
  EXPECT_TRUE(WaitStatus(trashed, "404"));
}

// --- faults (emulator notes a-g) ---

TEST_F(VerdaApiTest, FaultA_CapacityQuotaAndPaymentRefuseTheCreate) {
  Fault(R"({"cloud":"verda","fault":"capacity"})");
  Reply r = V("POST", "/instances", CreateBody("cap"));
  EXPECT_EQ(r.status, 503);  // V-SPEC POST /v1/instances "503"
  EXPECT_EQ(Code(r), "service_unavailable");
  EXPECT_EQ(Message(r), "No capacity available");
  Fault(R"({"cloud":"verda","fault":"quota"})");
  r = V("POST", "/instances", CreateBody("quota"));
  EXPECT_EQ(r.status, 403);  // V-SPEC error table: forbidden_action is 403
  EXPECT_EQ(Code(r), "forbidden_action");
  EXPECT_NE(Message(r).find("quota"), std::string::npos);
  Fault(R"({"cloud":"verda","fault":"payment_required"})");
  r = V("POST", "/instances", CreateBody("pay"));
  EXPECT_EQ(Code(r), "insufficient_funds");
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("backend_instances"), 0);
  EXPECT_EQ(V("POST", "/instances", CreateBody("ok")).status, 202);
}

TEST_F(VerdaApiTest, FaultB_AcceptedCreateEndsInNoCapacity) {
  Fault(R"({"cloud":"verda","fault":"error_during_boot","value":"no_capacity"})");
  const std::string id = Create("nocap");
  ASSERT_TRUE(WaitStatus(id, "no_capacity"));
  EXPECT_TRUE(Instance(id)->isNull("ip"));
  EXPECT_EQ(Delete(id).status, 202);
  EXPECT_TRUE(WaitStatus(id, "404"));
}

TEST_F(VerdaApiTest, FaultC_ThrottleAndServiceUnavailableBursts) {
  Fault(R"({"cloud":"verda","fault":"throttle","times":2,"retry_after":3})");
  for (int i = 0; i < 2; ++i) {
    Reply r = V("GET", "/instances");
    EXPECT_EQ(r.status, 429);
    EXPECT_EQ(r.Header("retry-after"), "3");
    EXPECT_EQ(Code(r), "rate_limit_exceeded");  // V-SPEC error table
  }
  EXPECT_EQ(V("GET", "/instances").status, 200);
  Fault(R"({"cloud":"verda","fault":"server_error","status":503,"times":3})");
  for (int i = 0; i < 3; ++i) {
    Reply r = V("GET", "/instance-availability");
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(Code(r), "service_unavailable");
  }
  Fault(R"({"cloud":"verda","fault":"server_error"})");
  EXPECT_EQ(Code(V("GET", "/images")), "server_error");
  EXPECT_EQ(V("GET", "/images").status, 200);
  // Only the token endpoint.
  Fault(R"({"cloud":"verda","fault":"server_error","status":503,"path":"/v1/oauth2/token"})");
  EXPECT_EQ(V("GET", "/images").status, 200);
  EXPECT_EQ(PostToken(R"({"grant_type":"client_credentials","client_id":"a","client_secret":"b"})")
                .status,
            503);
}

TEST_F(VerdaApiTest, FaultD_SlowBootKeepsProvisioningWithoutAnIpAndIpAfterBoot) {
  Fault(R"({"cloud":"verda","fault":"slow_boot","seconds":1.5})");
  const std::string slow = Create("slow");
  const std::string fast = Create("fast");
  ASSERT_TRUE(WaitStatus(fast, "running"));
  EXPECT_EQ(Status(slow), "provisioning");
  EXPECT_TRUE(Instance(slow)->isNull("ip"));
  EXPECT_TRUE(WaitStatus(slow, "running", 5s));

  Fault(R"({"cloud":"verda","fault":"ip_after_boot","seconds":1})");
  const std::string noip = Create("noip");
  ASSERT_TRUE(WaitStatus(noip, "running"));
  EXPECT_TRUE(Instance(noip)->isNull("ip"));
  EXPECT_TRUE(WaitFor([&] { return !Instance(noip)->isNull("ip"); }, 5s));
}

TEST_F(VerdaApiTest, FaultE_VanishAsNotFoundOrDiscontinuedAndErrorStates) {
  Fault(R"({"cloud":"verda","fault":"vanish_during_boot"})");
  const std::string gone = Create("vanish");
  EXPECT_TRUE(WaitStatus(gone, "404"));
  EXPECT_EQ(Count("backend_instances"), 0);

  Fault(R"({"cloud":"verda","fault":"vanish_during_boot","value":"discontinued"})");
  const std::string disc = Create("disc");
  ASSERT_TRUE(WaitStatus(disc, "discontinued"));
  EXPECT_EQ(Count("backend_instances"), 0);
  EXPECT_EQ(Message(Delete(disc)), "Can't discontinue a discontinued instance");

  Fault(R"({"cloud":"verda","fault":"error_during_boot"})");
  const std::string err = Create("err");
  ASSERT_TRUE(WaitStatus(err, "error"));
  Fault(R"({"cloud":"verda","fault":"error_during_boot","value":"installation_failed"})");
  const std::string inst = Create("inst");
  ASSERT_TRUE(WaitStatus(inst, "installation_failed"));
  EXPECT_EQ(Delete(err).status, 202);
  EXPECT_EQ(Delete(inst).status, 202);
}

TEST_F(VerdaApiTest, FaultF_DuplicateHostnamesFromAnEarlierRun) {
  // An earlier run's leftovers, older than anything made now.
  Settings(R"({"cloud":"verda","seed_instances":[
      {"hostname":"gpuprov-dup","status":"running","age_seconds":900},
      {"hostname":"gpuprov-dup","status":"error","age_seconds":600}]})");
  // And a create whose answer was lost (5xx after the instance was made).
  Fault(R"({"cloud":"verda","fault":"server_error","value":"after_create","method":"POST",
             "path":"/v1/instances"})");
  Reply lost = V("POST", "/instances", CreateBody("gpuprov-dup"));
  EXPECT_EQ(lost.status, 500);
  const std::string made = Create("gpuprov-dup");
  JsonArray list = ArrayOf(V("GET", "/instances"));
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 4u);
  std::vector<std::string> created;
  std::set<std::string> statuses;
  for (unsigned i = 0; i < list->size(); ++i) {
    EXPECT_EQ(list->getObject(i)->getValue<std::string>("hostname"), "gpuprov-dup");
    created.push_back(list->getObject(i)->getValue<std::string>("created_at"));
    statuses.insert(list->getObject(i)->getValue<std::string>("status"));
  }
  EXPECT_TRUE(std::is_sorted(created.begin(), created.end()));
  EXPECT_LT(created[0], created[3]);
  EXPECT_TRUE(statuses.count("error"));
  EXPECT_EQ(Count("backend_instances"), 3);  // the error leftover is only a record
  Reply bad =
      Control("POST", "/settings", R"({"cloud":"verda","seed_instances":[{"status":"running"}]})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("hostname"), std::string::npos) << bad.body;
}

TEST_F(VerdaApiTest, FaultG_ExpiredTokenMidRunThenTheClientRefreshes) {
  const std::string refresh =
      TokenJson(kClientId, kClientSecret)->getValue<std::string>("refresh_token");
  const std::string id = Create("mid-run");
  Settings(R"({"cloud":"verda","expire_tokens":true})");
  EXPECT_EQ(V("GET", "/instances/" + id).status, 401);
  Reply r = PostToken(R"({"grant_type":"refresh_token","refresh_token":")" + refresh + "\"}");
  ASSERT_EQ(r.status, 200);
  token_ = r.Json()->getValue<std::string>("access_token");
  EXPECT_EQ(V("GET", "/instances/" + id).status, 200);
}

TEST_F(VerdaApiTest, SharedBootFaultsReachTheBackend) {
  Fault(R"({"cloud":"verda","fault":"boot_script_fails"})");
  Fault(R"({"cloud":"verda","fault":"gpu_after_boot","seconds":0.8})");
  Fault(R"({"cloud":"verda","fault":"port_blocked","value":"6443"})");
  const std::string id = Create("shared", R"(,"startup_script_id":")" +
                                              AddScript("#!/bin/sh\necho x\n") + "\"");
  ASSERT_TRUE(WaitStatus(id, "running"));
  JsonObject row = ControlRow(id);
  EXPECT_TRUE(row->getValue<bool>("boot_script_fails"));
  EXPECT_FALSE(row->getValue<bool>("gpu_present"));
  EXPECT_EQ(row->getValue<std::string>("reachable_ports"), "1-6442,6444-65535");
  EXPECT_TRUE(WaitFor([&] { return ControlRow(id)->getValue<bool>("gpu_present"); }, 5s));
}

TEST_F(VerdaApiTest, ResetForgetsEverythingAndUnknownPathsUseTheEnvelope) {
  AddKey();
  AddScript("#!/bin/sh\n");
  Create("r");
  Reply nf = V("GET", "/volumes");
  EXPECT_EQ(nf.status, 404);
  EXPECT_EQ(Code(nf), "not_found");
  // An operation V-SPEC does not describe is its not_found ("Resource not found, or invalid
  // path", 404), whatever the method.
  Reply patch = V("PATCH", "/instances");
  EXPECT_EQ(patch.status, 404);
  EXPECT_EQ(Code(patch), "not_found");
  ASSERT_EQ(Control("POST", "/reset", R"({"cloud":"verda"})").status, 200);
  EXPECT_EQ(Count("instances"), 0);
  EXPECT_EQ(Count("ssh_keys"), 0);
  EXPECT_EQ(Count("scripts"), 0);
  EXPECT_EQ(Count("backend_instances"), 0);
  // Issued tokens went too.
  EXPECT_EQ(V("GET", "/instances").status, 401);
}

// Part 2 of issue 30: the emulator serves only operations the spec describes. Every row of the
// transcribed table is served (not the envelope's "Not found"), and requests next to them that
// the spec lacks are not.
TEST_F(VerdaApiTest, ServesExactlyTheSpecOperationsOfItsTable) {
  for (const auto& op : kVerdaSpecOperations) {
    if (op.path == "/v1/oauth2/token") continue;  // checked with its body above
    std::string path(op.path.substr(3));         // after "/v1"
    for (const char* seg : {"{instance_id}", "{instance_type}", "{sshKeyId}", "{scriptId}", "{id}"}) {
      const size_t at = path.find(seg);
      if (at != std::string::npos) path.replace(at, std::string(seg).size(), "1H100.80S.30V");
    }
    Reply r = V(std::string(op.method), path, op.method == "GET" ? "" : "{}");
    EXPECT_EQ(Message(r).find("Not found: "), std::string::npos)
        << op.method << " " << op.path << " (" << op.operation_id << ") -> " << r.body;
    EXPECT_TRUE(FindVerdaSpecOperation(op.method, op.path)) << op.path;
  }
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"DELETE", "/instances"},
           {"DELETE", "/instances/x"},
           {"POST", "/instance-types"},
           {"PUT", "/scripts/x"},
           {"GET", "/scripts/x/y"},
           {"GET", "/volumes/trash"}}) {
    Reply r = V(method, path, "{}");
    EXPECT_EQ(r.status, 404) << method << " " << path;
    EXPECT_EQ(Code(r), "not_found") << method << " " << path;
  }
  EXPECT_FALSE(FindVerdaSpecOperation("GET", "/v1/instances/a/b"));
  EXPECT_EQ(FindVerdaSpecOperation("GET", "/v1/instances/a")->operation_id,
            "InstancesController_getInstanceById");
  EXPECT_TRUE(FindVerdaSpecOperation("GET", "/v1/sshkeys")->deprecated);
}

}  // namespace
}  // namespace gpuprov::emulator
