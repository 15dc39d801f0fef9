// SPDX-License-Identifier: Apache-2.0
#include "api_client.h"

#include <gtest/gtest.h>

#include <array>
#include <functional>

#include "driver_test_util.h"
#include "json_util.h"
#include "loopback_server.h"

namespace gpuprov::drivers {
namespace {

using testing::RecordingHost;
using testing::Reply;
using testing::TestServer;

RetryPolicy Quick() {
  RetryPolicy p = RetryPolicy::Fast();
  p.max_attempts = 2;
  p.base_delay = std::chrono::milliseconds(1);
  p.max_delay = std::chrono::milliseconds(2);
  return p;
}

constexpr std::array<CloudCode, 1> kCodes = {{{"no-capacity", GPUPROV_STATUS_CAPACITY}}};
constexpr std::array<std::string_view, 1> kCapacityWords = {"sold out"};

// A cloud whose errors read {"error": {"code", "message"}}.
ApiDialect TestDialect(QuoteForm quote = QuoteForm::kParentheses) {
  ApiDialect d;
  d.cloud = "Test Cloud";
  d.driver = "testcloud";
  d.read_error = [](const std::string& body) {
    ApiError e;
    Poco::JSON::Object::Ptr err = json::Obj(json::TryParseObject(body), "error");
    e.code = json::Str(err, "code");
    e.text = err ? e.code + ": " + json::Str(err, "message") : body;
    return e;
  };
  d.codes = kCodes;
  d.capacity_words = kCapacityWords;
  d.quote = quote;
  d.hints = {{.http_status = 401, .text = " for the key from {origin}; set $TEST_KEY"},
             {.status = GPUPROV_STATUS_CAPACITY, .text = "; try later"},
             {.code = "bad-address", .text = "; fix the address"}};
  d.headers["Accept"] = "application/json";
  return d;
}

ApiAuth KeyAuth(std::optional<Credential> key = Credential{"k123", "$TEST_KEY"}) {
  ApiAuth a;
  a.resolve = [key] { return key; };
  a.missing = "no Test Cloud key found: set $TEST_KEY";
  a.label = "API key";
  return a;
}

// The DriverError `call` throws (a test failure when it throws none).
sdk::DriverError ErrorOf(const std::function<void()>& call) {
  try {
    call();
  } catch (const sdk::DriverError& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return sdk::DriverError(GPUPROV_STATUS_FAILED, "no error");
}

std::string ErrorBody(const std::string& code, const std::string& message) {
  return R"({"error": {"code": ")" + code + R"(", "message": ")" + message + R"("}})";
}

TEST(ApiClient, SendsTheCredentialHeadersAndBody) {
  std::string seen_body;
  TestServer server(
      [&](int, const std::string& method, const std::string& uri, const std::string& body) {
        seen_body = method + " " + uri + " " + body;
        return Reply{200, R"({"data": {"id": "i-1"}})", {}};
      });
  RecordingHost host;
  ApiClient api(server.Url(), Quick(), host.Host(), TestDialect(), KeyAuth());
  Poco::JSON::Object::Ptr body = new Poco::JSON::Object();
  body->set("name", "vm1");
  const ApiAnswer a = api.Call("POST", "/instances", "launch vm1", body);
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(json::Str(json::Obj(a.doc, "data"), "id"), "i-1");
  EXPECT_EQ(seen_body, R"(POST /v2/instances {"name":"vm1"})");
  EXPECT_EQ(server.LastHeader("Authorization"), "Bearer k123");
  EXPECT_EQ(server.LastHeader("Accept"), "application/json");
  EXPECT_EQ(server.LastHeader("Content-Type"), "application/json");
  EXPECT_NE(host.All().find("API key from $TEST_KEY"), std::string::npos) << host.All();
}

TEST(ApiClient, AKeyHeaderWithoutScheme) {
  TestServer server([](int, const std::string&, const std::string&, const std::string&) {
    return Reply{200, "", {}};
  });
  RecordingHost host;
  ApiAuth auth = KeyAuth();
  auth.header = "api_key";
  auth.scheme = "";
  ApiClient api(server.Url(), Quick(), host.Host(), TestDialect(), auth);
  const ApiAnswer a = api.Call("GET", "/x", "read x");
  EXPECT_EQ(a.doc, nullptr);
  EXPECT_EQ(server.LastHeader("api_key"), "k123");
  EXPECT_EQ(server.LastHeader("Content-Type"), "");
}

TEST(ApiClient, NoCredentialIsAuthBeforeAnyRequest) {
  TestServer server([](int, const std::string&, const std::string&, const std::string&) {
    return Reply{200, "{}", {}};
  });
  RecordingHost host;
  ApiClient api(server.Url(), Quick(), host.Host(), TestDialect(), KeyAuth(std::nullopt));
  const sdk::DriverError e = ErrorOf([&] { api.Call("GET", "/x", "read x"); });
  EXPECT_EQ(e.status(), GPUPROV_STATUS_AUTH);
  EXPECT_STREQ(e.what(), "no Test Cloud key found: set $TEST_KEY");
  EXPECT_EQ(server.count(), 0);
}

struct RefusalCase {
  int status;
  std::string body;
  QuoteForm quote;
  gpuprov_type_status expected_status;
  std::string expected_message;
};

class ApiClientRefusal : public ::testing::TestWithParam<RefusalCase> {};

TEST_P(ApiClientRefusal, StatusAndMessageComeFromTheDialect) {
  const RefusalCase& c = GetParam();
  TestServer server([&](int, const std::string&, const std::string&, const std::string&) {
    return Reply{c.status, c.body, {}};
  });
  RecordingHost host;
  ApiClient api(server.Url(), Quick(), host.Host(), TestDialect(c.quote), KeyAuth());
  const sdk::DriverError e = ErrorOf([&] { api.Call("GET", "/x", "read x"); });
  EXPECT_EQ(e.status(), c.expected_status);
  EXPECT_EQ(std::string(e.what()), c.expected_message);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ApiClientRefusal,
    ::testing::Values(
        RefusalCase{401, ErrorBody("unauthorized", "bad key"), QuoteForm::kParentheses,
                    GPUPROV_STATUS_AUTH,
                    "read x: Test Cloud answered HTTP 401 (unauthorized: bad key) for the key "
                    "from $TEST_KEY; set $TEST_KEY"},
        RefusalCase{400, ErrorBody("no-capacity", "none"), QuoteForm::kColon,
                    GPUPROV_STATUS_CAPACITY,
                    "read x: Test Cloud answered HTTP 400: no-capacity: none; try later"},
        RefusalCase{422, ErrorBody("other", "GPUs sold out"), QuoteForm::kColonUnlessHint,
                    GPUPROV_STATUS_CAPACITY,
                    "read x: Test Cloud answered HTTP 422 (other: GPUs sold out); try later"},
        RefusalCase{422, ErrorBody("other", "bad field"), QuoteForm::kColonUnlessHint,
                    GPUPROV_STATUS_INVALID_INPUT,
                    "read x: Test Cloud answered HTTP 422: other: bad field"},
        RefusalCase{403, ErrorBody("bad-address", "billing"), QuoteForm::kParentheses,
                    GPUPROV_STATUS_AUTH,
                    "read x: Test Cloud answered HTTP 403 (bad-address: billing); fix the "
                    "address"},
        RefusalCase{404, "plain text", QuoteForm::kParentheses, GPUPROV_STATUS_NOT_FOUND,
                    "read x: Test Cloud answered HTTP 404 (plain text)"},
        RefusalCase{400, ErrorBody("no-capacity", "none"), QuoteForm::kCodeAndText,
                    GPUPROV_STATUS_CAPACITY,
                    "read x: Test Cloud answered HTTP 400 no-capacity: no-capacity: none; try "
                    "later"},
        RefusalCase{404, "plain text", QuoteForm::kCodeAndText, GPUPROV_STATUS_NOT_FOUND,
                    "read x: Test Cloud answered HTTP 404: plain text"},
        RefusalCase{404, "", QuoteForm::kCodeAndText, GPUPROV_STATUS_NOT_FOUND,
                    "read x: Test Cloud answered HTTP 404"}));

TEST(ApiClient, HintFieldsFillTheirPlaceholders) {
  TestServer server([](int, const std::string&, const std::string&, const std::string&) {
    return Reply{403, ErrorBody("denied", "no"), {}};
  });
  RecordingHost host;
  ApiDialect d = TestDialect();
  d.hints = {{.http_status = 403, .text = "; ask {admin} in {project} ({origin}) {unknown}"}};
  d.hint_fields = {{"admin", [] { return std::string("alice"); }},
                   {"project", [] { return std::string("p1"); }}};
  ApiClient api(server.Url(), Quick(), host.Host(), d, KeyAuth());
  const sdk::DriverError e = ErrorOf([&] { api.Call("GET", "/x", "read x"); });
  EXPECT_EQ(std::string(e.what()),
            "read x: Test Cloud answered HTTP 403 (denied: no); ask alice in p1 ($TEST_KEY) "
            "{unknown}");
}

TEST(ApiClient, ARelativePathGoesUnderTheBasePath) {
  std::vector<std::string> uris;
  TestServer server([&](int, const std::string&, const std::string& uri, const std::string&) {
    uris.push_back(uri);
    return Reply{200, "{}", {}};
  });
  RecordingHost host;
  ApiDialect d = TestDialect();
  d.base_path = [] { return std::string("/projects/p1"); };
  ApiClient api(server.Url(), Quick(), host.Host(), d, KeyAuth());
  api.Call("GET", "instances?page=2", "list instances");
  api.Call("GET", "/projects/p2", "read project p2");
  EXPECT_EQ(uris,
            (std::vector<std::string>{"/v2/projects/p1/instances?page=2", "/v2/projects/p2"}));
}

TEST(ApiClient, ARateLimitOfTheDialectIsRetriedThenRefused) {
  TestServer server([](int n, const std::string&, const std::string&, const std::string&) {
    return n < 2 ? Reply{403, ErrorBody("rate-limited", "slow down"), {}} : Reply{200, "{}", {}};
  });
  RecordingHost host;
  ApiDialect d = TestDialect();
  d.rate_limited = [](int status, const ApiError& e) {
    return status == 403 && e.code == "rate-limited";
  };
  RetryPolicy three = Quick();
  three.max_attempts = 3;
  ApiClient patient(server.Url(), three, host.Host(), d, KeyAuth());
  EXPECT_EQ(patient.Call("GET", "/x", "read x").status, 200);
  EXPECT_EQ(server.count(), 3);

  TestServer always([](int, const std::string&, const std::string&, const std::string&) {
    return Reply{403, ErrorBody("rate-limited", "slow down"), {}};
  });
  ApiClient api(always.Url(), Quick(), host.Host(), d, KeyAuth());
  const sdk::DriverError e = ErrorOf([&] { api.Call("GET", "/x", "read x"); });
  EXPECT_EQ(e.status(), GPUPROV_STATUS_AUTH);
  EXPECT_EQ(std::string(e.what()),
            "read x: Test Cloud answered HTTP 403 (rate-limited: slow down)");
  EXPECT_EQ(always.count(), 2);
}

TEST(ApiClient, TheCredentialSentNeverAppearsInAMessage) {
  TestServer server([](int n, const std::string&, const std::string&, const std::string&) {
    const std::string echo = ErrorBody("bad-key", "key k123 is not valid");
    return Reply{n == 0 ? 401 : n == 1 ? 404 : 503, echo, {}};
  });
  RecordingHost host;
  ApiClient api(server.Url(), Quick(), host.Host(), TestDialect(), KeyAuth());
  const sdk::DriverError refused = ErrorOf([&] { api.Call("GET", "/x", "read x"); });
  EXPECT_EQ(std::string(refused.what()),
            "read x: Test Cloud answered HTTP 401 (bad-key: key <redacted> is not valid) for the "
            "key from $TEST_KEY; set $TEST_KEY");
  EXPECT_EQ(api.Call("GET", "/x", "read x", nullptr, {404}).error.text,
            "bad-key: key <redacted> is not valid");
  const sdk::DriverError exhausted = ErrorOf([&] { api.Call("GET", "/x", "read x"); });
  EXPECT_EQ(std::string(exhausted.what()).find("k123"), std::string::npos) << exhausted.what();
  EXPECT_NE(std::string(exhausted.what()).find("key <redacted> is not valid"), std::string::npos)
      << exhausted.what();
}

TEST(ApiClient, AnAllowedStatusIsAnAnswer) {
  TestServer server([](int, const std::string&, const std::string&, const std::string&) {
    return Reply{404, ErrorBody("not-found", "gone"), {}};
  });
  RecordingHost host;
  ApiClient api(server.Url(), Quick(), host.Host(), TestDialect(), KeyAuth());
  const ApiAnswer a = api.Call("GET", "/x", "read x", nullptr, {404});
  EXPECT_EQ(a.status, 404);
  EXPECT_FALSE(a.ok());
  EXPECT_EQ(a.error.code, "not-found");
  EXPECT_EQ(a.error.text, "not-found: gone");
}

TEST(ApiClient, A2xxBodyThatIsNotAnObjectFailsUnlessRaw) {
  TestServer server([](int, const std::string&, const std::string&, const std::string&) {
    return Reply{200, "[1, 2]", {}};
  });
  RecordingHost host;
  ApiClient api(server.Url(), Quick(), host.Host(), TestDialect(), KeyAuth());
  const sdk::DriverError e = ErrorOf([&] { api.Call("GET", "/x", "read x"); });
  EXPECT_EQ(e.status(), GPUPROV_STATUS_FAILED);
  EXPECT_STREQ(e.what(),
               "read x: Test Cloud answered HTTP 200 with a body that is not a JSON object");
  ApiCall raw{.path = "/x", .what = "read x", .raw = true};
  const ApiAnswer a = api.Send(raw);
  EXPECT_EQ(a.body, "[1, 2]");
  EXPECT_EQ(a.doc, nullptr);
  ASSERT_EQ(a.Parsed().type(), typeid(Poco::JSON::Array::Ptr));
  EXPECT_EQ(a.Parsed().extract<Poco::JSON::Array::Ptr>()->size(), 2u);
}

TEST(ApiClient, ADialectOfListsTakesAnyJson) {
  TestServer server([](int, const std::string&, const std::string&, const std::string&) {
    return Reply{200, "[]", {}};
  });
  RecordingHost host;
  ApiDialect lists = TestDialect();
  lists.any_json = true;
  ApiClient api(server.Url(), Quick(), host.Host(), lists, KeyAuth());
  EXPECT_EQ(api.Call("GET", "/x", "read x").Parsed().type(), typeid(Poco::JSON::Array::Ptr));
}

TEST(ApiClient, RetriesExhaustedQuoteTheCloudAndNameTheEndpoint) {
  TestServer server([](int, const std::string&, const std::string&, const std::string&) {
    return Reply{503, ErrorBody("busy", "try later"), {}};
  });
  RecordingHost host;
  ApiClient api(server.Url(), Quick(), host.Host(), TestDialect(), KeyAuth());
  const sdk::DriverError e = ErrorOf([&] { api.Call("GET", "/x", "read x"); });
  EXPECT_EQ(e.status(), GPUPROV_STATUS_TRANSIENT);
  const std::string m = e.what();
  EXPECT_EQ(m.rfind("read x: Test Cloud API at " + server.Url() + ": ", 0), 0u) << m;
  EXPECT_NE(m.find("the cloud said: busy: try later"), std::string::npos) << m;
  EXPECT_EQ(server.count(), 2);
}

TEST(ApiClient, ANonIdempotentCallIsNotRepeatedAfterA5xx) {
  TestServer server([](int, const std::string&, const std::string&, const std::string&) {
    return Reply{500, ErrorBody("oops", "internal"), {}};
  });
  RecordingHost host;
  ApiClient api(server.Url(), Quick(), host.Host(), TestDialect(), KeyAuth());
  const ApiAnswer a = api.Call("POST", "/launch", "launch", nullptr, {500}, false);
  EXPECT_EQ(a.status, 500);
  EXPECT_EQ(server.count(), 1);
}

TEST(ApiClient, AnAccessTokenIsRenewedOnceAfterA401) {
  TestServer server([](int n, const std::string&, const std::string&, const std::string&) {
    return n == 0 ? Reply{401, ErrorBody("expired", "token expired"), {}} : Reply{200, "{}", {}};
  });
  RecordingHost host;
  ApiAuth auth = KeyAuth();
  std::vector<bool> renewals;
  auth.token = [&](bool renew) {
    renewals.push_back(renew);
    return std::string(renew ? "new" : "old");
  };
  ApiClient api(server.Url(), Quick(), host.Host(), TestDialect(), auth);
  EXPECT_EQ(api.Call("GET", "/x", "read x").status, 200);
  EXPECT_EQ(renewals, (std::vector<bool>{false, true}));
  EXPECT_EQ(server.LastHeader("Authorization"), "Bearer new");
}

TEST(ApiClient, ABadEndpointNamesTheSetting) {
  RecordingHost host;
  const sdk::DriverError e = ErrorOf([&] {
    ApiClient api("http://example.com/v1", Quick(), host.Host(), TestDialect(), KeyAuth());
  });
  EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(std::string(e.what()).rfind("the Test Cloud endpoint (GPUPROV_TESTCLOUD_ENDPOINT or "
                                        "endpoint in [clouds.testcloud]): ",
                                        0),
            0u)
      << e.what();
  ApiDialect d = TestDialect();
  d.endpoint_origin = "base_url in ~/.testcloud/config.json";
  const sdk::DriverError named =
      ErrorOf([&] { ApiClient api("http://example.com/v1", Quick(), host.Host(), d, KeyAuth()); });
  EXPECT_EQ(std::string(named.what())
                .rfind("the Test Cloud endpoint (base_url in ~/.testcloud/config.json): ", 0),
            0u)
      << named.what();
}

struct CodedError {
  std::string code;
  std::string message;
  std::string Text() const { return code + ": " + message; }
};
CodedError ParseCoded(const std::string& body) { return {"c-" + body, "m"}; }

TEST(ApiClient, ReadCodeAndTextAdaptsACloudsOwnParser) {
  const ApiError e = ReadCodeAndText<ParseCoded>("x");
  EXPECT_EQ(e.code, "c-x");
  EXPECT_EQ(e.text, "c-x: m");
}

TEST(CredentialMemo, ResolvesOnce) {
  RecordingHost host;
  int calls = 0;
  CredentialMemo memo(
      [&]() -> std::optional<Credential> {
        ++calls;
        return Credential{"v", "$X"};
      },
      "none", "token", host.Host());
  EXPECT_EQ(memo.IfFound(), nullptr);
  EXPECT_EQ(memo.Get().origin, "$X");
  EXPECT_EQ(memo.Get().value, "v");
  EXPECT_EQ(calls, 1);
  ASSERT_NE(memo.IfFound(), nullptr);
}

}  // namespace
}  // namespace gpuprov::drivers
