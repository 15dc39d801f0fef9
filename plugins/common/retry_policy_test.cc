// SPDX-License-Identifier: Apache-2.0
#include "retry_policy.h"

#include <gtest/gtest.h>

#include <Poco/DateTime.h>
#include <Poco/DateTimeFormat.h>
#include <Poco/DateTimeFormatter.h>
#include <Poco/Timespan.h>

namespace gpuprov::drivers {
namespace {

using std::chrono::milliseconds;

RetryPolicy Policy() {
  RetryPolicy p;
  p.base_delay = milliseconds(100);
  p.max_delay = milliseconds(1000);
  p.max_retry_after = milliseconds(5000);
  return p;
}

TEST(RetryPolicy, RetryableStatuses) {
  EXPECT_TRUE(IsRetryableStatus(429));
  EXPECT_TRUE(IsRetryableStatus(500));
  EXPECT_TRUE(IsRetryableStatus(502));
  EXPECT_TRUE(IsRetryableStatus(503));
  EXPECT_TRUE(IsRetryableStatus(504));
  EXPECT_FALSE(IsRetryableStatus(501));
  EXPECT_FALSE(IsRetryableStatus(505));
  for (int s : {200, 201, 202, 204, 400, 401, 403, 404, 409, 422}) {
    EXPECT_FALSE(IsRetryableStatus(s)) << s;
  }
}

TEST(RetryPolicy, CeilingDoublesAndCaps) {
  RetryPolicy p = Policy();
  EXPECT_EQ(BackoffCeiling(p, 1), milliseconds(100));
  EXPECT_EQ(BackoffCeiling(p, 2), milliseconds(200));
  EXPECT_EQ(BackoffCeiling(p, 3), milliseconds(400));
  EXPECT_EQ(BackoffCeiling(p, 4), milliseconds(800));
  EXPECT_EQ(BackoffCeiling(p, 5), milliseconds(1000));
  EXPECT_EQ(BackoffCeiling(p, 1000), milliseconds(1000));  // no overflow
}

TEST(RetryPolicy, FullJitterSpansZeroToCeiling) {
  RetryPolicy p = Policy();
  EXPECT_EQ(NextDelay(p, 3, std::nullopt, 0.0), milliseconds(0));
  EXPECT_EQ(NextDelay(p, 3, std::nullopt, 0.5), milliseconds(200));
  EXPECT_EQ(NextDelay(p, 3, std::nullopt, 0.999), milliseconds(399));
  EXPECT_EQ(NextDelay(p, 3, std::nullopt, 7.0), milliseconds(400));  // clamped draw
}

TEST(RetryPolicy, RetryAfterIsAFloorAndIsCapped) {
  RetryPolicy p = Policy();
  EXPECT_EQ(NextDelay(p, 1, milliseconds(2000), 0.0), milliseconds(2000));
  EXPECT_EQ(NextDelay(p, 1, milliseconds(60000), 0.0), milliseconds(5000));  // capped
  // Jitter above the server's minimum wins.
  EXPECT_EQ(NextDelay(p, 5, milliseconds(10), 0.5), milliseconds(500));
}

TEST(RetryPolicy, ParsesRetryAfterSeconds) {
  EXPECT_EQ(ParseRetryAfter("7"), milliseconds(7000));
  EXPECT_EQ(ParseRetryAfter(" 0 "), milliseconds(0));
  EXPECT_EQ(ParseRetryAfter("99999999999"), milliseconds(std::numeric_limits<int32_t>::max()));
  EXPECT_EQ(ParseRetryAfter(""), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("soon"), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("-3"), milliseconds(0));
}

TEST(RetryPolicy, ParsesRetryAfterHttpDate) {
  Poco::DateTime future;
  future += Poco::Timespan(30, 0);
  auto d = ParseRetryAfter(Poco::DateTimeFormatter::format(future, Poco::DateTimeFormat::HTTP_FORMAT));
  ASSERT_TRUE(d.has_value());
  EXPECT_GT(*d, milliseconds(25000));
  EXPECT_LE(*d, milliseconds(30000));
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT"), milliseconds(0));  // past
}

TEST(RetryPolicy, JitterIsInUnitInterval) {
  Jitter j(42);
  for (int i = 0; i < 1000; ++i) {
    double x = j.Next();
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
  }
}

}  // namespace
}  // namespace gpuprov::drivers
