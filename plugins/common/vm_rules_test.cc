// SPDX-License-Identifier: Apache-2.0
#include "vm_rules.h"

#include <Poco/InflatingStream.h>
#include <gtest/gtest.h>

#include <iterator>
#include <sstream>

#include "gpuprov/sdk.hpp"

namespace gpuprov::drivers {
namespace {

const VmNameRules kHostname{.what = "a droplet name", .max_length = 63, .punctuation = "-."};
const VmNameRules kGce{.what = "a Compute Engine name",
                       .max_length = 55,
                       .lower_case_only = true,
                       .letter_first = true,
                       .note = "room for gpuprov-"};
const VmNameRules kVisible{.what = "a pod name", .max_length = 128, .any_visible = true};

std::string Refused(const std::string& name, const VmNameRules& rules) {
  try {
    ValidateVmName(name, rules);
  } catch (const gpuprov::sdk::DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
    return e.what();
  }
  return "";
}

TEST(VmRules, NamesByTheRulesOfEachCloud) {
  EXPECT_EQ(Refused("Web-1.prod", kHostname), "");
  EXPECT_EQ(Refused("web-1", kGce), "");
  EXPECT_EQ(Refused("my-pod#1", kVisible), "");
  EXPECT_EQ(Refused("my pod", kVisible), "VM name \"my pod\" is not usable as a pod name: use 1-128 visible characters");
  EXPECT_EQ(Refused("-web", kHostname),
            "VM name \"-web\" is not usable as a droplet name: use 1-63 letters, digits and '-' "
            "and '.', starting and ending with a letter or digit");
  EXPECT_EQ(Refused("Web", kGce),
            "VM name \"Web\" is not usable as a Compute Engine name: use 1-55 lower-case letters, "
            "digits and '-', starting with a letter and ending with a letter or digit (room for "
            "gpuprov-)");
  EXPECT_NE(Refused("1web", kGce), "");
  EXPECT_NE(Refused("web-", kGce), "");
  EXPECT_NE(Refused(std::string(56, 'a'), kGce), "");
  EXPECT_NE(Refused("", kHostname), "");
  EXPECT_NE(Refused("tab\there", kVisible), "");
}

TEST(VmRules, UserDataSizeAndEncoding) {
  EXPECT_NO_THROW(CheckUserData(std::string(100, 'x'), 100, "EC2"));
  try {
    CheckUserData(std::string(101, 'x'), 100, "EC2");
    FAIL();
  } catch (const gpuprov::sdk::DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
    EXPECT_EQ(std::string(e.what()),
              "user_data is 101 bytes; EC2 accepts at most 100 bytes of raw user data: shorten "
              "the boot script or have it download the rest");
  }
  EXPECT_THROW(CheckUserData("#!/bin/sh\n\xff\xfe", 100, "EC2"), gpuprov::sdk::DriverError);
}

TEST(VmRules, Utf8) {
  EXPECT_TRUE(IsUtf8("plain \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsUtf8("\xc3"));          // cut short
  EXPECT_FALSE(IsUtf8("\xc0\xaf"));      // overlong
  EXPECT_FALSE(IsUtf8("\xed\xa0\x80"));  // surrogate
  EXPECT_FALSE(IsUtf8("\x80"));
}

TEST(VmRules, Base64OnOneLine) {
  EXPECT_EQ(Base64("#!/bin/bash\n"), "IyEvYmluL2Jhc2gK");
  EXPECT_EQ(Base64(std::string(100, 'a')).find('\n'), std::string::npos);
}

TEST(VmRules, GzipIsRfc1952ByZopfliAndUnpacksToTheInput) {
  const std::string script = "#!/bin/bash\n" + std::string(4000, 'x') + "\necho done\n";
  const std::string packed = Gzip(script);
  ASSERT_GE(packed.size(), 10u);
  EXPECT_EQ(packed.substr(0, 3), std::string("\x1f\x8b\x08", 3));  // gzip magic, deflate
  EXPECT_EQ(static_cast<unsigned char>(packed[8]), 2);  // XFL 2: maximum compression
  EXPECT_LT(packed.size(), 100u);
  EXPECT_EQ(Gzip(script), packed);  // deterministic: the host measures what the driver sends
  std::istringstream in(packed);
  Poco::InflatingInputStream inflate(in, Poco::InflatingStreamBuf::STREAM_GZIP);
  const std::string unpacked((std::istreambuf_iterator<char>(inflate)), std::istreambuf_iterator<char>());
  EXPECT_EQ(unpacked, script);
}

}  // namespace
}  // namespace gpuprov::drivers
