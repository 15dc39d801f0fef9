// SPDX-License-Identifier: Apache-2.0
#include "driver_status.h"

#include <gtest/gtest.h>

#include <array>
#include <string_view>

namespace gpuprov::drivers {
namespace {

TEST(DriverStatus, HttpTable) {
  EXPECT_EQ(StatusOfHttp(200), GPUPROV_STATUS_OK);
  EXPECT_EQ(StatusOfHttp(204), GPUPROV_STATUS_OK);
  EXPECT_EQ(StatusOfHttp(400), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(StatusOfHttp(401), GPUPROV_STATUS_AUTH);
  EXPECT_EQ(StatusOfHttp(402), GPUPROV_STATUS_QUOTA);
  EXPECT_EQ(StatusOfHttp(403), GPUPROV_STATUS_AUTH);
  EXPECT_EQ(StatusOfHttp(404), GPUPROV_STATUS_NOT_FOUND);
  EXPECT_EQ(StatusOfHttp(409), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(StatusOfHttp(410), GPUPROV_STATUS_NOT_FOUND);
  EXPECT_EQ(StatusOfHttp(422), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(StatusOfHttp(429), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(StatusOfHttp(500), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(StatusOfHttp(503), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(StatusOfHttp(501), GPUPROV_STATUS_FAILED);
  EXPECT_EQ(StatusOfHttp(505), GPUPROV_STATUS_FAILED);
  EXPECT_EQ(StatusOfHttp(302), GPUPROV_STATUS_FAILED);
}

constexpr std::array<CloudCode, 3> kCodes = {{
    {"InsufficientInstanceCapacity", GPUPROV_STATUS_CAPACITY},
    {"VcpuLimitExceeded", GPUPROV_STATUS_QUOTA},
    {".NotFound", GPUPROV_STATUS_NOT_FOUND},
}};

TEST(DriverStatus, CloudCodesWinOverTheHttpStatus) {
  EXPECT_EQ(StatusOf(500, "InsufficientInstanceCapacity", kCodes), GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(StatusOf(400, "VcpuLimitExceeded", kCodes), GPUPROV_STATUS_QUOTA);
  EXPECT_EQ(StatusOf(400, "InvalidInstanceID.NotFound", kCodes), GPUPROV_STATUS_NOT_FOUND);
  EXPECT_EQ(StatusOf(400, "SomethingElse", kCodes), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(StatusOf(0, "", kCodes), GPUPROV_STATUS_TRANSIENT);
  EXPECT_FALSE(StatusOfCode(kCodes, "").has_value());
}

TEST(DriverStatus, TransportFailures) {
  EXPECT_EQ(StatusOf(HttpError(HttpError::Kind::kInvalidUrl, "x")), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(StatusOf(HttpError(HttpError::Kind::kCancelled, "x")), GPUPROV_STATUS_CANCELLED);
  EXPECT_EQ(StatusOf(HttpError(HttpError::Kind::kTls, "x")), GPUPROV_STATUS_FAILED);
  EXPECT_EQ(StatusOf(HttpError(HttpError::Kind::kRetriesExhausted, "x")),
            GPUPROV_STATUS_TRANSIENT);
  try {
    HttpResponse last;
    last.status = 503;
    ThrowHttpError(HttpError(HttpError::Kind::kRetriesExhausted, "GET /x: still failing", last),
                   "list droplets", "Server Error");
    FAIL() << "no throw";
  } catch (const gpuprov::sdk::DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_TRANSIENT);
    EXPECT_NE(std::string(e.what()).find("list droplets: GET /x: still failing"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("Server Error"), std::string::npos);
  }
}

TEST(DriverStatus, MentionsAnyIgnoresCase) {
  constexpr std::array<std::string_view, 2> words = {"out of stock", "no capacity"};
  EXPECT_TRUE(MentionsAny("GPU is OUT OF STOCK here", words));
  EXPECT_FALSE(MentionsAny("bad request", words));
}

}  // namespace
}  // namespace gpuprov::drivers
