// SPDX-License-Identifier: Apache-2.0
//
// EC2 error classification and response parsing (no network).
#include "ec2_client.h"

#include <gtest/gtest.h>

#include "ec2_xml.h"

namespace gpuprov::aws {
namespace {

TEST(Ec2Errors, ThrottlingAndServerErrorsAreRetriedCapacityQuotaAuthAreNot) {
  EXPECT_TRUE(IsRetryable(503, "RequestLimitExceeded"));
  EXPECT_TRUE(IsRetryable(400, "RequestLimitExceeded"));
  EXPECT_TRUE(IsRetryable(500, "InternalError"));
  EXPECT_TRUE(IsRetryable(503, "Unavailable"));
  EXPECT_TRUE(IsRetryable(502, ""));
  EXPECT_TRUE(IsRetryable(0, ""));  // no answer at all
  EXPECT_TRUE(IsRetryable(400, "RequestExpired"));
  EXPECT_FALSE(IsRetryable(500, "InsufficientInstanceCapacity"));
  EXPECT_FALSE(IsRetryable(400, "VcpuLimitExceeded"));
  EXPECT_FALSE(IsRetryable(401, "AuthFailure"));
  EXPECT_FALSE(IsRetryable(403, "SignatureDoesNotMatch"));
  EXPECT_FALSE(IsRetryable(400, "InvalidParameterValue"));
  EXPECT_FALSE(IsRetryable(501, ""));
}

TEST(Ec2Errors, StatusOfCode) {
  EXPECT_EQ(StatusOfCode(500, "InsufficientInstanceCapacity"), GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(StatusOfCode(400, "VcpuLimitExceeded"), GPUPROV_STATUS_QUOTA);
  EXPECT_EQ(StatusOfCode(400, "InstanceLimitExceeded"), GPUPROV_STATUS_QUOTA);
  EXPECT_EQ(StatusOfCode(401, "AuthFailure"), GPUPROV_STATUS_AUTH);
  EXPECT_EQ(StatusOfCode(403, "UnauthorizedOperation"), GPUPROV_STATUS_AUTH);
  EXPECT_EQ(StatusOfCode(400, "InvalidInstanceID.NotFound"), GPUPROV_STATUS_NOT_FOUND);
  EXPECT_EQ(StatusOfCode(503, "RequestLimitExceeded"), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(StatusOfCode(400, "InvalidParameterValue"), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(StatusOfCode(400, "IdempotentParameterMismatch"), GPUPROV_STATUS_INVALID_INPUT);
}

// EC2's Unsupported covers a type not offered in the zone (capacity: another zone or region
// may have it) and unsupported configurations (the request's fault); the message tells them
// apart. Images, subnets and VPCs a request names that are not there are the request's fault
// too, not "the VM is gone".
TEST(Ec2Errors, UnsupportedAndNotFoundAreClassifiedAsWhatTheyAre) {
  EXPECT_EQ(StatusOfError(400, "Unsupported",
                          "Your requested instance type (p5.48xlarge) is not supported in your "
                          "requested Availability Zone (us-east-1e). Please retry your request by "
                          "not specifying an Availability Zone or choosing us-east-1a."),
            GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(StatusOfError(400, "Unsupported",
                          "The requested configuration is currently not supported. Please check "
                          "the documentation for supported configurations."),
            GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(StatusOfError(400, "InvalidAMIID.NotFound", "The image id '[ami-1]' does not exist"),
            GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(StatusOfCode(400, "InvalidAMIID.NotFound"), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(StatusOfCode(400, "InvalidSubnetID.NotFound"), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(StatusOfCode(400, "InvalidVpcID.NotFound"), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(StatusOfError(400, "InvalidInstanceID.NotFound", ""), GPUPROV_STATUS_NOT_FOUND);
  EXPECT_EQ(StatusOfError(500, "InsufficientInstanceCapacity", ""), GPUPROV_STATUS_CAPACITY);
}

// The table the kit's transport retries by and the driver's hints match on.
TEST(Ec2Errors, TheTransportsTableIsStatusOfError) {
  const drivers::ErrorTable& t = Ec2Errors();
  EXPECT_EQ(t.StatusOf(400, {"RequestExpired", "", ""}, ""), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(t.StatusOf(503, {"RequestLimitExceeded", "", ""}, ""), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(t.StatusOf(500, {"InsufficientInstanceCapacity", "", ""}, ""),
            GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(t.StatusOf(400,
                       {"Unsupported",
                        "Your requested instance type (g6.xlarge) is not supported in your "
                        "requested Availability Zone (us-east-1e).",
                        ""},
                       ""),
            GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(t.StatusOf(400, {"Unsupported", "The instance type is not supported with this AMI", ""},
                       ""),
            GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(t.StatusOf(502, {}, ""), GPUPROV_STATUS_TRANSIENT);
}

TEST(Ec2Errors, RegionalEndpoints) {
  EXPECT_EQ(RegionalEndpoint("us-east-1"), "https://ec2.us-east-1.amazonaws.com");
  EXPECT_EQ(RegionalEndpoint("cn-north-1"), "https://ec2.cn-north-1.amazonaws.com.cn");
}

TEST(Ec2Xml, ReadsNestedSetsByNameIgnoringTheNamespace) {
  XmlNode doc = ParseXml(R"(<?xml version="1.0" encoding="UTF-8"?>
<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>r-1</requestId>
  <reservationSet><item><reservationId>r-abc</reservationId>
    <instancesSet>
      <item><instanceId>i-1</instanceId><instanceState><code>16</code><name>running</name></instanceState>
        <ipAddress>127.0.0.5</ipAddress><unknownElement>x</unknownElement>
        <tagSet><item><key>Name</key><value>a &amp; b</value></item></tagSet></item>
      <item><instanceId>i-2</instanceId><instanceState><code>0</code><name>pending</name></instanceState></item>
    </instancesSet></item></reservationSet>
  <nextToken>tok</nextToken>
</DescribeInstancesResponse>)");
  EXPECT_EQ(doc.name, "DescribeInstancesResponse");
  EXPECT_EQ(doc.Text("nextToken"), "tok");
  auto reservations = doc.Items("reservationSet");
  ASSERT_EQ(reservations.size(), 1u);
  auto instances = reservations[0]->Items("instancesSet");
  ASSERT_EQ(instances.size(), 2u);
  EXPECT_EQ(instances[0]->Text("instanceState/name"), "running");
  EXPECT_EQ(instances[0]->Text("ipAddress"), "127.0.0.5");
  EXPECT_EQ(instances[0]->Items("tagSet")[0]->Text("value"), "a & b");
  EXPECT_EQ(instances[1]->Text("ipAddress"), "");
  EXPECT_EQ(doc.Text("no/such/path"), "");
}

TEST(Ec2Xml, ErrorBody) {
  Ec2ErrorBody e = ParseErrorBody(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>"
      "InsufficientInstanceCapacity</Code><Message>We currently do not have sufficient capacity"
      "</Message></Error></Errors><RequestID>abc-123</RequestID></Response>");
  EXPECT_EQ(e.code, "InsufficientInstanceCapacity");
  EXPECT_EQ(e.message, "We currently do not have sufficient capacity");
  EXPECT_EQ(e.request_id, "abc-123");
  EXPECT_EQ(ParseErrorBody("not xml").code, "");
  EXPECT_THROW(ParseXml("<a><b></a>"), std::runtime_error);
}

}  // namespace
}  // namespace gpuprov::aws
