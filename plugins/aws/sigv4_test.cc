// SPDX-License-Identifier: Apache-2.0
//
// The signer against the vectors of REFERENCE.md §1.6: AWS's own published example (IAM
// ListUsers) and the EC2 POST vector (checked against botocore's signer by the reference).
#include "sigv4.h"

#include <gtest/gtest.h>

namespace gpuprov::aws {
namespace {

constexpr const char* kSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
constexpr const char* kContentType = "application/x-www-form-urlencoded; charset=utf-8";

SigV4Request IamExample() {
  SigV4Request r;
  r.method = "GET";
  r.path = "/";
  r.query = {{"Version", "2010-05-08"}, {"Action", "ListUsers"}};  // sorted when signing
  r.headers = {{"Content-Type", kContentType},
               {"Host", "iam.amazonaws.com"},
               {"X-Amz-Date", "20150830T123600Z"}};
  return r;
}

SigV4Request Ec2Example() {
  SigV4Request r;
  r.method = "POST";
  r.path = "/";
  r.body = "Action=DescribeInstances&Version=2016-11-15";
  r.headers = {{"content-type", kContentType},
               {"host", "ec2.us-east-1.amazonaws.com"},
               {"x-amz-date", "20240101T000000Z"}};
  return r;
}

TEST(SigV4, AwsPublishedIamExample) {
  const SigV4Request r = IamExample();
  EXPECT_EQ(CanonicalRequest(r),
            "GET\n/\nAction=ListUsers&Version=2010-05-08\n"
            "content-type:application/x-www-form-urlencoded; charset=utf-8\n"
            "host:iam.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
            "content-type;host;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex(CanonicalRequest(r)),
            "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59");
  const SigV4Scope scope{"20150830", "us-east-1", "iam"};
  EXPECT_EQ(Hex(SigningKey(kSecret, scope)),
            "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9");
  EXPECT_EQ(Signature(kSecret, "20150830T123600Z", scope, r),
            "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7");
}

TEST(SigV4, Ec2PostVector) {
  const SigV4Request r = Ec2Example();
  EXPECT_EQ(Sha256Hex(r.body), "6171eb09865e32b0602af0f7957e26573a51f53caaedff02ff88883cb0275885");
  EXPECT_EQ(Sha256Hex(CanonicalRequest(r)),
            "8cb2ae6adf0e6ce29ce5ef2948f09245420cc6d17e63f6f1773a5f7c162873ba");
  const SigV4Scope scope{"20240101", "us-east-1", "ec2"};
  EXPECT_EQ(Hex(SigningKey(kSecret, scope)),
            "a4324815bffc5042bce3822bc8ab01671477a09d28ac6b64c29e65189802946c");
  EXPECT_EQ(Signature(kSecret, "20240101T000000Z", scope, r),
            "dfab1f85e5f30dbf64d67ff4fb29822ebb07ccf268425aa9ad3f342625b5b9ad");
}

TEST(SigV4, SignQueryPostProducesTheVectorsAuthorizationHeader) {
  // 2024-01-01T00:00:00Z
  SignedPost p =
      SignQueryPost("ec2.us-east-1.amazonaws.com", "Action=DescribeInstances&Version=2016-11-15",
                    "us-east-1", "ec2", "AKIDEXAMPLE", kSecret, "", 1704067200LL);
  EXPECT_EQ(p.headers.at("x-amz-date"), "20240101T000000Z");
  EXPECT_EQ(p.headers.at("authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240101/us-east-1/ec2/aws4_request, "
            "SignedHeaders=content-type;host;x-amz-date, "
            "Signature=dfab1f85e5f30dbf64d67ff4fb29822ebb07ccf268425aa9ad3f342625b5b9ad");
  EXPECT_EQ(p.headers.count("x-amz-security-token"), 0u);
}

TEST(SigV4, SessionTokenIsSentAndSigned) {
  SignedPost p =
      SignQueryPost("127.0.0.1:4566", "Action=DescribeRegions&Version=2016-11-15", "eu-west-1",
                    "ec2", "ASIAEXAMPLE", kSecret, "FwoGZX-token", 1704067200LL);
  EXPECT_EQ(p.headers.at("x-amz-security-token"), "FwoGZX-token");
  EXPECT_NE(p.headers.at("authorization")
                .find("SignedHeaders=content-type;host;x-amz-date;x-amz-security-token"),
            std::string::npos);
  // A different token gives a different signature.
  SignedPost q = SignQueryPost("127.0.0.1:4566", "Action=DescribeRegions&Version=2016-11-15",
                               "eu-west-1", "ec2", "ASIAEXAMPLE", kSecret, "other", 1704067200LL);
  EXPECT_NE(p.headers.at("authorization"), q.headers.at("authorization"));
}

TEST(SigV4, UriEncodeKeepsOnlyUnreservedCharacters) {
  EXPECT_EQ(UriEncode("a-b_c.d~e"), "a-b_c.d~e");
  EXPECT_EQ(UriEncode("a b+c/d=e"), "a%20b%2Bc%2Fd%3De");
  EXPECT_EQ(UriEncode("/a b/", true), "/a%20b/");
  EXPECT_EQ(UriEncode("\xc3\xa9"), "%C3%A9");
  EXPECT_EQ(FormEncode({{"Filter.1.Name", "tag:Name"}, {"UserData", "ab+/="}}),
            "Filter.1.Name=tag%3AName&UserData=ab%2B%2F%3D");
}

TEST(SigV4, CanonicalFormTrimsHeaderValuesAndSortsQuery) {
  SigV4Request r;
  r.method = "GET";
  r.query = {{"b", "2"}, {"a", "x y"}, {"a", "1"}};
  r.headers = {{"X-Amz-Date", "20240101T000000Z"}, {"My-Header", "  a   b  c "}};
  EXPECT_EQ(CanonicalQueryString(r.query), "a=1&a=x%20y&b=2");
  const std::string c = CanonicalRequest(r);
  EXPECT_NE(c.find("my-header:a b c\n"), std::string::npos) << c;
  EXPECT_NE(c.find("\nmy-header;x-amz-date\n"), std::string::npos) << c;
}

TEST(SigV4, AmzDateIsUtc) {
  EXPECT_EQ(AmzDate(0), "19700101T000000Z");
  EXPECT_EQ(AmzDate(1440938160LL), "20150830T123600Z");
}

}  // namespace
}  // namespace gpuprov::aws
