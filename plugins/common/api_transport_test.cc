// SPDX-License-Identifier: Apache-2.0
#include "api_transport.h"

#include <gtest/gtest.h>

#include <array>

#include "driver_test_util.h"
#include "loopback_server.h"

namespace gpuprov::drivers {
namespace {

using testing::RecordingHost;
using testing::Reply;
using testing::TestServer;

RetryPolicy Quick(int attempts = 3) {
  RetryPolicy p = RetryPolicy::Fast();
  p.max_attempts = attempts;
  p.base_delay = std::chrono::milliseconds(1);
  p.max_delay = std::chrono::milliseconds(2);
  return p;
}

constexpr std::array<CloudCode, 3> kCodes = {{{"SlowDown", GPUPROV_STATUS_TRANSIENT},
                                              {"NoCapacity", GPUPROV_STATUS_CAPACITY},
                                              {".NotFound", GPUPROV_STATUS_NOT_FOUND}}};
constexpr std::array<std::string_view, 1> kCapacityWords = {"sold out"};

ErrorTable Table() { return ErrorTable{kCodes, kCapacityWords, nullptr}; }

// A wire form whose error bodies read "<code>|<text>|<request id>" and whose attempts carry
// their number in X-Attempt (a signature that must be made anew every time).
ApiWireForm LineForm(int* signed_count) {
  ApiWireForm wire;
  wire.name = "Line API";
  wire.sign = [signed_count](HttpRequest& r) {
    r.headers["X-Attempt"] = std::to_string(++*signed_count);
  };
  wire.read_error = [](const std::string& body) {
    ApiError e;
    const size_t a = body.find('|');
    if (a == std::string::npos) return ApiError{"", body, ""};
    const size_t b = body.find('|', a + 1);
    e.code = body.substr(0, a);
    e.text = body.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
    if (b != std::string::npos) e.request_id = body.substr(b + 1);
    return e;
  };
  return wire;
}

HttpRequest Post(bool idempotent = true) {
  HttpRequest r;
  r.method = "POST";
  r.path_and_query = "/";
  r.body = "Action=Run";
  r.idempotent = idempotent;
  return r;
}

TEST(ErrorTable, CodesThenHttpStatusThenCapacityWords) {
  const ErrorTable t = Table();
  EXPECT_EQ(t.StatusOf(400, {"SlowDown", "", ""}, ""), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(t.StatusOf(503, {"NoCapacity", "", ""}, ""), GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(t.StatusOf(400, {"InvalidVolume.NotFound", "", ""}, ""), GPUPROV_STATUS_NOT_FOUND);
  EXPECT_EQ(t.StatusOf(400, {"", "the type is Sold Out here", ""}, ""), GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(t.StatusOf(500, {"", "sold out", ""}, ""), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(t.StatusOf(401, {}, ""), GPUPROV_STATUS_AUTH);
  EXPECT_EQ(t.StatusOf(0, {}, ""), GPUPROV_STATUS_TRANSIENT);
  ErrorTable own = Table();
  own.status_of = [](int, const ApiError&, const std::string& body) {
    return body == "quota" ? GPUPROV_STATUS_QUOTA : GPUPROV_STATUS_FAILED;
  };
  EXPECT_EQ(own.StatusOf(400, {"SlowDown", "", ""}, "quota"), GPUPROV_STATUS_QUOTA);
}

TEST(HintFor, FirstMatchingRowWithItsPlaceholdersFilled) {
  const std::vector<ErrorHint> hints = {
      {.status = GPUPROV_STATUS_AUTH, .text = ". Key from {origin} refused in {region}"},
      {.status = GPUPROV_STATUS_INVALID_INPUT, .code = "BadImage", .text = ". No image in {region}"},
      {.http_status = 400, .text = ". Check the request {as sent}"},
      {.text = ". Anything else"}};
  int filled = 0;
  const HintFill fill = [&](std::string_view name) -> std::optional<std::string> {
    ++filled;
    if (name == "origin") return "$KEY";
    if (name == "region") return "eu-west-1";
    return std::nullopt;
  };
  EXPECT_EQ(HintFor(hints, 401, GPUPROV_STATUS_AUTH, "", fill),
            ". Key from $KEY refused in eu-west-1");
  EXPECT_EQ(filled, 2);
  EXPECT_EQ(HintFor(hints, 400, GPUPROV_STATUS_INVALID_INPUT, "BadImage", fill),
            ". No image in eu-west-1");
  EXPECT_EQ(HintFor(hints, 400, GPUPROV_STATUS_INVALID_INPUT, "Other", fill),
            ". Check the request {as sent}");
  EXPECT_EQ(HintFor(hints, 500, GPUPROV_STATUS_TRANSIENT, "", fill), ". Anything else");
  filled = 0;
  EXPECT_EQ(HintFor(hints, 401, GPUPROV_STATUS_AUTH, ""), ". Key from {origin} refused in {region}");
  EXPECT_EQ(HintFor(std::span<const ErrorHint>(hints).first(1), 500, GPUPROV_STATUS_FAILED, "",
                    fill),
            "");
  EXPECT_EQ(filled, 0);
}

TEST(ScrubSecrets, EveryOccurrenceOfALongSecretOnly) {
  EXPECT_EQ(ScrubSecrets("key abcdefgh1234 rejected (abcdefgh1234)", {"abcdefgh1234", "key"}),
            "key <redacted> rejected (<redacted>)");
  EXPECT_EQ(ScrubSecrets("nothing here", {"", "abcdefgh1234"}), "nothing here");
}

TEST(ApiTransport, SignsEveryAttemptAnewAndRetriesACodeTheTableCallsTransient) {
  std::vector<std::string> attempts_seen;
  TestServer server([&](int n, const std::string&, const std::string&, const std::string&) {
    return n < 2 ? Reply{400, "SlowDown|Rate exceeded|req-" + std::to_string(n), {}}
                 : Reply{200, "<ok/>", {}};
  });
  RecordingHost host;
  ApiTransport transport(Quick(), host.Host());
  int signed_count = 0;
  const ApiOutcome out =
      transport.Send(server.Url(), Post(), "Run in r1", LineForm(&signed_count), Table());
  EXPECT_TRUE(out.ok());
  EXPECT_EQ(out.response.body, "<ok/>");
  EXPECT_EQ(out.attempts, 3);
  EXPECT_EQ(signed_count, 3);
  EXPECT_EQ(server.count(), 3);
  EXPECT_EQ(server.LastHeader("X-Attempt"), "3");
  const std::string log = host.All();
  EXPECT_NE(log.find("Run in r1 attempt 1: SlowDown: Rate exceeded (HTTP 400, request id req-0)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("Line API answered SlowDown; retrying"), std::string::npos) << log;
  EXPECT_EQ(log.find("Action=Run"), std::string::npos) << "no body in the log: " << log;
}

TEST(ApiTransport, ACapacityCodeIsNotRetriedEvenOnA503) {
  TestServer server([](int, const std::string&, const std::string&, const std::string&) {
    return Reply{503, "NoCapacity|none left|", {}};
  });
  RecordingHost host;
  ApiTransport transport(Quick(), host.Host());
  int signed_count = 0;
  const ApiOutcome out =
      transport.Send(server.Url(), Post(), "Run", LineForm(&signed_count), Table());
  EXPECT_FALSE(out.ok());
  EXPECT_EQ(out.status, GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(out.error.code, "NoCapacity");
  EXPECT_EQ(out.error.text, "none left");
  EXPECT_FALSE(out.retried_out);
  EXPECT_EQ(server.count(), 1);
  EXPECT_EQ(out.Failure("Run"), "Run: NoCapacity: none left (HTTP 503)");
}

TEST(ApiTransport, ServerErrorsRetriedOutSayHowLongTheyFailed) {
  TestServer server([](int, const std::string&, const std::string&, const std::string&) {
    return Reply{500, "oops", {}};
  });
  RecordingHost host;
  ApiTransport transport(Quick(2), host.Host());
  int signed_count = 0;
  const ApiOutcome out =
      transport.Send(server.Url(), Post(), "Run", LineForm(&signed_count), Table());
  EXPECT_EQ(out.status, GPUPROV_STATUS_TRANSIENT);
  EXPECT_TRUE(out.retried_out);
  EXPECT_EQ(server.count(), 2);
  EXPECT_EQ(out.Failure("Run"), "Run: HTTP 500: oops (still failing after 2 attempt(s) over 0 s)");
}

TEST(ApiTransport, ANonIdempotentRequestIsRetriedOnlyAfterA429) {
  int n5 = 0;
  TestServer refuses([&](int, const std::string&, const std::string&, const std::string&) {
    ++n5;
    return Reply{503, "busy", {}};
  });
  RecordingHost host;
  ApiTransport transport(Quick(), host.Host());
  int signed_count = 0;
  ApiOutcome out = transport.Send(refuses.Url(), Post(false), "Create", LineForm(&signed_count),
                                  Table());
  EXPECT_EQ(out.status, GPUPROV_STATUS_TRANSIENT);
  EXPECT_FALSE(out.retried_out);
  EXPECT_EQ(refuses.count(), 1);

  TestServer throttles([](int n, const std::string&, const std::string&, const std::string&) {
    return n == 0 ? Reply{429, "slow down", {{"Retry-After", "0"}}} : Reply{200, "", {}};
  });
  out = transport.Send(throttles.Url(), Post(false), "Create", LineForm(&signed_count), Table());
  EXPECT_TRUE(out.ok());
  EXPECT_EQ(throttles.count(), 2);
}

TEST(ApiTransport, NoAnswerIsTransientAndNamesTheNetworkProblem) {
  int port = 0;
  {
    TestServer gone([](int, const std::string&, const std::string&, const std::string&) {
      return Reply{};
    });
    port = gone.port();
  }
  RecordingHost host;
  ApiTransport transport(Quick(2), host.Host());
  int signed_count = 0;
  const ApiOutcome out = transport.Send("http://127.0.0.1:" + std::to_string(port), Post(),
                                        "Run", LineForm(&signed_count), Table());
  EXPECT_EQ(out.response.status, 0);
  EXPECT_EQ(out.status, GPUPROV_STATUS_TRANSIENT);
  EXPECT_TRUE(out.retried_out);
  EXPECT_EQ(signed_count, 2);
  EXPECT_FALSE(out.described.empty());
}

TEST(ApiTransport, SecretsAreScrubbedFromTheFailure) {
  TestServer server([](int, const std::string&, const std::string&, const std::string&) {
    return Reply{403, "Denied|key sk-secret-123 is not valid|", {}};
  });
  RecordingHost host;
  ApiTransport transport(Quick(), host.Host());
  int signed_count = 0;
  ApiWireForm wire = LineForm(&signed_count);
  wire.secrets = [] { return std::vector<std::string>{"sk-secret-123"}; };
  const ApiOutcome out = transport.Send(server.Url(), Post(), "Check", wire, Table());
  EXPECT_EQ(out.status, GPUPROV_STATUS_AUTH);
  EXPECT_EQ(out.error.text, "key <redacted> is not valid");
  EXPECT_EQ(out.Failure("Check"), "Check: Denied: key <redacted> is not valid (HTTP 403)");
  EXPECT_EQ(host.All().find("sk-secret-123"), std::string::npos) << host.All();
}

TEST(ApiTransport, CancelledBeforeAnAttemptAndRefusedUrls) {
  TestServer server([](int, const std::string&, const std::string&, const std::string&) {
    return Reply{};
  });
  RecordingHost host;
  host.cancel = true;
  ApiTransport transport(Quick(), host.Host());
  int signed_count = 0;
  try {
    transport.Send(server.Url(), Post(), "Run", LineForm(&signed_count), Table());
    ADD_FAILURE() << "no error";
  } catch (const sdk::DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_CANCELLED);
    EXPECT_STREQ(e.what(), "Run: cancelled");
  }
  EXPECT_EQ(server.count(), 0);
  host.cancel = false;
  try {
    transport.Send("http://example.com", Post(), "Run", LineForm(&signed_count), Table());
    ADD_FAILURE() << "no error";
  } catch (const sdk::DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
  }
  EXPECT_THROW(transport.ClientFor("http://example.com"), HttpError);
}

}  // namespace
}  // namespace gpuprov::drivers
