// SPDX-License-Identifier: Apache-2.0
//
// Every sshConnection shape REFERENCE.md lists, and malformed ones.
#include "ssh_connection.h"

#include <Poco/JSON/Parser.h>
#include <gtest/gtest.h>

#include <ostream>
#include <string>

namespace gpuprov::primeintellect {
namespace {

struct GoodCase {
  const char* label;
  const char* text;
  const char* user;
  const char* host;
  int port;
  bool port_given;
};

void PrintTo(const GoodCase& c, std::ostream* os) { *os << "\"" << c.text << "\""; }

class SshConnectionGood : public ::testing::TestWithParam<GoodCase> {};

TEST_P(SshConnectionGood, ParsesUserHostPort) {
  const GoodCase& c = GetParam();
  std::string error;
  std::optional<SshConnection> got = ParseSshConnection(c.text, &error);
  ASSERT_TRUE(got.has_value()) << error;
  EXPECT_EQ(got->user, c.user);
  EXPECT_EQ(got->host, c.host);
  EXPECT_EQ(got->port, c.port);
  EXPECT_EQ(got->port_given, c.port_given);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SshConnectionGood,
    ::testing::Values(
        // The documented form.
        GoodCase{"Documented", "root@135.23.125.123 -p 22", "root", "135.23.125.123", 22, true},
        // Container offers remap SSH to another external port.
        GoodCase{"RemappedPort", "root@135.23.125.123 -p 40123", "root", "135.23.125.123", 40123,
                 true},
        // Other providers log in as ubuntu.
        GoodCase{"UbuntuUser", "ubuntu@10.1.2.3 -p 22", "ubuntu", "10.1.2.3", 22, true},
        // No -p: port 22, as SkyPilot reads it.
        GoodCase{"NoPort", "root@1.2.3.4", "root", "1.2.3.4", 22, false},
        GoodCase{"NoUser", "1.2.3.4 -p 2222", "", "1.2.3.4", 2222, true},
        GoodCase{"PortFirst", "-p 2200 root@1.2.3.4", "root", "1.2.3.4", 2200, true},
        GoodCase{"GluedPort", "root@1.2.3.4 -p2201", "root", "1.2.3.4", 2201, true},
        GoodCase{"SshPrefix", "ssh root@1.2.3.4 -p 1234", "root", "1.2.3.4", 1234, true},
        GoodCase{"ExtraBlanks", "  root@1.2.3.4    -p   65535 \n", "root", "1.2.3.4", 65535,
                 true},
        GoodCase{"ColonPort", "root@1.2.3.4:2022", "root", "1.2.3.4", 2022, true},
        GoodCase{"ColonAndSamePort", "root@1.2.3.4:2022 -p 2022", "root", "1.2.3.4", 2022, true},
        GoodCase{"HostName", "ubuntu@node-7.example.com -p 22", "ubuntu", "node-7.example.com",
                 22, true},
        GoodCase{"Ipv6Bare", "root@2001:db8::1 -p 22", "root", "2001:db8::1", 22, true},
        GoodCase{"Ipv6Bracketed", "root@[2001:db8::1]:2200", "root", "2001:db8::1", 2200, true},
        GoodCase{"Loopback", "root@127.0.0.1 -p 31022", "root", "127.0.0.1", 31022, true},
        GoodCase{"PortOne", "root@1.2.3.4 -p 1", "root", "1.2.3.4", 1, true}),
    [](const ::testing::TestParamInfo<GoodCase>& info) { return std::string(info.param.label); });

struct BadCase {
  const char* label;
  const char* text;
  const char* error_part;  // expected in the error message
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << "\"" << c.text << "\""; }

class SshConnectionBad : public ::testing::TestWithParam<BadCase> {};

TEST_P(SshConnectionBad, IsRejectedWithAReason) {
  const BadCase& c = GetParam();
  std::string error;
  std::optional<SshConnection> got = ParseSshConnection(c.text, &error);
  EXPECT_FALSE(got.has_value()) << "parsed as " << got->user << "@" << got->host << ":"
                                << got->port;
  EXPECT_NE(error.find(c.error_part), std::string::npos) << error;
  EXPECT_NE(error.find("sshConnection"), std::string::npos) << error;
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, SshConnectionBad,
    ::testing::Values(BadCase{"Empty", "", "empty"}, BadCase{"Blank", "   ", "empty"},
                      BadCase{"OnlySsh", "ssh", "no user@host"},
                      BadCase{"OnlyPort", "-p 22", "no user@host"},
                      BadCase{"PortMissing", "root@1.2.3.4 -p", "without a port"},
                      BadCase{"PortNotNumber", "root@1.2.3.4 -p abc", "not 1..65535"},
                      BadCase{"PortZero", "root@1.2.3.4 -p 0", "not 1..65535"},
                      BadCase{"PortTooBig", "root@1.2.3.4 -p 65536", "not 1..65535"},
                      BadCase{"PortNegative", "root@1.2.3.4 -p -22", "not 1..65535"},
                      BadCase{"TwoPorts", "root@1.2.3.4 -p 22 -p 23", "two different"},
                      BadCase{"ColonPortDiffers", "root@1.2.3.4:22 -p 23", "differ"},
                      BadCase{"ColonPortBad", "root@1.2.3.4:ssh", "not 1..65535"},
                      BadCase{"NoHost", "root@ -p 22", "no host"},
                      BadCase{"EmptyUser", "@1.2.3.4 -p 22", "user"},
                      BadCase{"BadUser", "ro ot@1.2.3.4", "unexpected"},
                      BadCase{"UserWithSlash", "a/b@1.2.3.4", "user"},
                      BadCase{"HostWithSlash", "root@1.2.3.4/24", "host"},
                      BadCase{"UnknownOption", "root@1.2.3.4 -i key", "unexpected option"},
                      BadCase{"TwoTargets", "root@1.2.3.4 root@5.6.7.8", "after the address"},
                      BadCase{"UnclosedBracket", "root@[2001:db8::1", "unclosed"},
                      BadCase{"JunkAfterBracket", "root@[::1]x", "after ']'"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.label); });

// --- the field: null, lists, lists in strings ---------------------------------

Poco::Dynamic::Var Json(const std::string& text) {
  Poco::JSON::Parser parser;
  return parser.parse(text);
}

// The field inside a pod object, as the driver sees it.
Poco::Dynamic::Var Field(const std::string& value_json) {
  Poco::JSON::Object::Ptr pod =
      Json("{\"sshConnection\":" + value_json + "}").extract<Poco::JSON::Object::Ptr>();
  return pod->get("sshConnection");
}

struct FieldCase {
  const char* label;
  const char* json;  // the field's JSON value
  SshField::Kind kind;
  const char* host;  // when parsed
  int port;
};

void PrintTo(const FieldCase& c, std::ostream* os) { *os << c.json; }

class SshFieldShapes : public ::testing::TestWithParam<FieldCase> {};

TEST_P(SshFieldShapes, Normalises) {
  const FieldCase& c = GetParam();
  SshField f = ReadSshField(Field(c.json));
  EXPECT_EQ(f.kind, c.kind) << f.error;
  if (c.kind == SshField::Kind::kParsed) {
    EXPECT_EQ(f.connection.host, c.host);
    EXPECT_EQ(f.connection.port, c.port);
  }
  if (c.kind == SshField::Kind::kMalformed) {
    EXPECT_FALSE(f.error.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Field, SshFieldShapes,
    ::testing::Values(
        FieldCase{"Null", "null", SshField::Kind::kAbsent, "", 0},
        FieldCase{"EmptyString", "\"\"", SshField::Kind::kAbsent, "", 0},
        FieldCase{"ListOfNull", "[null]", SshField::Kind::kAbsent, "", 0},
        FieldCase{"EmptyList", "[]", SshField::Kind::kAbsent, "", 0},
        FieldCase{"StringListOfNull", "\"[null]\"", SshField::Kind::kAbsent, "", 0},
        FieldCase{"NullWordString", "\"null\"", SshField::Kind::kAbsent, "", 0},
        FieldCase{"String", "\"root@1.2.3.4 -p 2222\"", SshField::Kind::kParsed, "1.2.3.4", 2222},
        FieldCase{"List", "[\"root@1.2.3.4 -p 2222\"]", SshField::Kind::kParsed, "1.2.3.4", 2222},
        FieldCase{"ListNullFirst", "[null, \"ubuntu@5.6.7.8 -p 22\"]", SshField::Kind::kParsed,
                  "5.6.7.8", 22},
        FieldCase{"MultiNode", "[\"root@1.1.1.1 -p 1001\", \"root@2.2.2.2 -p 1002\"]",
                  SshField::Kind::kParsed, "1.1.1.1", 1001},
        FieldCase{"ListInString", "\"[\\\"root@9.9.9.9 -p 9\\\"]\"", SshField::Kind::kParsed,
                  "9.9.9.9", 9},
        FieldCase{"BadThenGood", "[\"garbage -x\", \"root@3.3.3.3\"]", SshField::Kind::kParsed,
                  "3.3.3.3", 22},
        FieldCase{"Malformed", "\"root@1.2.3.4 -p nope\"", SshField::Kind::kMalformed, "", 0},
        FieldCase{"MalformedList", "[\"-p 22\"]", SshField::Kind::kMalformed, "", 0},
        FieldCase{"NumberIsIgnored", "22", SshField::Kind::kAbsent, "", 0},
        FieldCase{"ObjectIsIgnored", "{\"a\":1}", SshField::Kind::kAbsent, "", 0}),
    [](const ::testing::TestParamInfo<FieldCase>& info) { return std::string(info.param.label); });

TEST(SshFieldStrings, IpListShapes) {
  EXPECT_EQ(FieldStrings(Field("\"1.2.3.4\"")), std::vector<std::string>{"1.2.3.4"});
  EXPECT_EQ(FieldStrings(Field("[null, \"5.6.7.8\"]")), std::vector<std::string>{"5.6.7.8"});
  EXPECT_TRUE(FieldStrings(Field("[null]")).empty());
  EXPECT_TRUE(FieldStrings(Field("null")).empty());
  EXPECT_TRUE(FieldStrings(Poco::Dynamic::Var()).empty());
}

}  // namespace
}  // namespace gpuprov::primeintellect
