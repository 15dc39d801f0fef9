#include "output.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "error.h"

namespace gpuprov {
namespace {

using ::testing::HasSubstr;

Poco::JSON::Object::Ptr Sample() {
  Poco::JSON::Object::Ptr o = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
  o->set("name", std::string("demo"));
  o->set("ssh_port", 2222);
  o->set("kubernetes", false);
  o->set("price_per_hour", 1.25);
  o->set("vm_id", std::string("0123"));  // reads as a number in YAML unless quoted
  o->set("note", std::string("yes"));    // reads as a boolean in YAML 1.1 unless quoted
  o->set("last_error", Poco::Dynamic::Var());
  Poco::JSON::Array::Ptr ports = new Poco::JSON::Array;
  ports->add(22);
  ports->add(6443);
  o->set("open_ports", ports);
  Poco::JSON::Object::Ptr tags = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
  tags->set("team", std::string("ml: gpu"));
  o->set("tags", tags);
  return o;
}

TEST(RenderYaml, CarriesTheSameFieldsAndTypesAsTheJson) {
  const YAML::Node y = YAML::Load(RenderYaml(Sample()));
  EXPECT_EQ(y["name"].as<std::string>(), "demo");
  EXPECT_EQ(y["ssh_port"].as<int>(), 2222);
  EXPECT_EQ(y["kubernetes"].as<bool>(), false);
  EXPECT_DOUBLE_EQ(y["price_per_hour"].as<double>(), 1.25);
  EXPECT_EQ(y["vm_id"].Tag(), "!");  // quoted: a string, not 123
  EXPECT_EQ(y["vm_id"].as<std::string>(), "0123");
  EXPECT_EQ(y["note"].Tag(), "!");
  EXPECT_TRUE(y["last_error"].IsNull());
  ASSERT_TRUE(y["open_ports"].IsSequence());
  EXPECT_EQ(y["open_ports"][1].as<int>(), 6443);
  EXPECT_EQ(y["tags"]["team"].as<std::string>(), "ml: gpu");
}

TEST(RenderYaml, KeepsTheObjectsKeyOrder) {
  const std::string yaml = RenderYaml(Sample());
  EXPECT_LT(yaml.find("name:"), yaml.find("ssh_port:"));
  EXPECT_LT(yaml.find("ssh_port:"), yaml.find("kubernetes:"));
  EXPECT_LT(yaml.find("open_ports:"), yaml.find("tags:"));
}

TEST(RenderYaml, AnEmptyListIsAnEmptySequence) {
  Poco::JSON::Array::Ptr none = new Poco::JSON::Array;
  const YAML::Node y = YAML::Load(RenderYaml(none));
  EXPECT_TRUE(y.IsSequence());
  EXPECT_EQ(y.size(), 0u);
}

TEST(RenderJsonLine, IsOneLineThatParsesBack) {
  Poco::JSON::Object::Ptr o = Sample();
  o->set("message", std::string("two\nlines"));
  const std::string line = RenderJsonLine(o);
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  Poco::JSON::Parser parser;
  auto parsed = parser.parse(line).extract<Poco::JSON::Object::Ptr>();
  EXPECT_EQ(parsed->getValue<std::string>("message"), "two\nlines");
  EXPECT_EQ(parsed->getValue<int>("ssh_port"), 2222);
}

TEST(RenderJson, IsIndentedAndEndsWithANewline) {
  const std::string json = RenderJson(Sample());
  EXPECT_THAT(json, HasSubstr("\n  \"name\": \"demo\""));
  EXPECT_EQ(json.back(), '\n');
}

std::string FormatError(const std::string& text, bool streams) {
  try {
    ParseOutputFormat(text, streams, "list");
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    return e.what();
  }
  return "";
}

TEST(ParseOutputFormat, NamesEachFormat) {
  EXPECT_EQ(ParseOutputFormat("text", false, "list"), OutputFormat::kText);
  EXPECT_EQ(ParseOutputFormat("json", false, "list"), OutputFormat::kJson);
  EXPECT_EQ(ParseOutputFormat("yaml", false, "list"), OutputFormat::kYaml);
  EXPECT_EQ(ParseOutputFormat("ndjson", true, "provision"), OutputFormat::kNdjson);
}

TEST(ParseOutputFormat, RefusesNdjsonWhereNothingStreams) {
  EXPECT_THAT(FormatError("ndjson", false), HasSubstr("streams the events of provision and down"));
}

TEST(ParseOutputFormat, SuggestsTheClosestFormat) {
  EXPECT_THAT(
      FormatError("jsno", false),
      HasSubstr("--output must be one of text, json, yaml, not 'jsno' (did you mean json?)"));
  EXPECT_THAT(FormatError("xml", true), HasSubstr("text, json, yaml, ndjson"));
}

TEST(RenderStructured, RefusesText) {
  EXPECT_THROW(RenderStructured(Sample(), OutputFormat::kText), std::logic_error);
}

}  // namespace
}  // namespace gpuprov
