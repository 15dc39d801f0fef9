// SPDX-License-Identifier: Apache-2.0
#include "config_files.h"

#include <gtest/gtest.h>

namespace gpuprov::drivers {
namespace {

TEST(ConfigFiles, IniWithAwsNestedKeys) {
  const IniFile ini = ParseIni(
      "top = ignored\n"
      "[default]\n"
      "aws_access_key_id = AKIA1\n"
      "# comment\n"
      "; comment\n"
      "[profile   dev]\n"
      "Region = eu-west-1\n"
      "s3 =\n"
      "  max_concurrent_requests = 20\n"
      "  addressing_style = path\n"
      "output = json\n"
      "[core]\n"
      "project = my-project\n");
  EXPECT_EQ(IniValue(ini, "default", "aws_access_key_id"), "AKIA1");
  EXPECT_EQ(IniValue(ini, "profile dev", "region"), "eu-west-1");
  EXPECT_EQ(IniValue(ini, "profile dev", "s3.max_concurrent_requests"), "20");
  EXPECT_EQ(IniValue(ini, "profile dev", "s3.addressing_style"), "path");
  EXPECT_EQ(IniValue(ini, "profile dev", "output"), "json");
  EXPECT_FALSE(IniValue(ini, "profile dev", "s3").has_value());
  EXPECT_EQ(IniValue(ini, "core", "project"), "my-project");
  EXPECT_FALSE(IniValue(ini, "default", "top").has_value());
}

TEST(ConfigFiles, YamlScalars) {
  const std::string doc =
      "access-token: \"dop_v1_top\"  # the default context\n"
      "context: work\n"
      "auth-contexts:\n"
      "  work: 'dop_v1_work'\n"
      "  list: [1, 2]\n";
  EXPECT_EQ(YamlString(doc, {"access-token"}), "dop_v1_top");
  EXPECT_EQ(YamlString(doc, {"auth-contexts", "work"}), "dop_v1_work");
  EXPECT_FALSE(YamlString(doc, {"auth-contexts", "list"}).has_value());
  EXPECT_FALSE(YamlString(doc, {"auth-contexts", "missing"}).has_value());
  EXPECT_FALSE(YamlString(doc, {"context", "deeper"}).has_value());
  EXPECT_FALSE(YamlString("key: [unclosed", {"key"}).has_value());
}

}  // namespace
}  // namespace gpuprov::drivers
