#include "output.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <sstream>
#include <stdexcept>

#include "cli_args.h"
#include "error.h"

namespace gpuprov {
namespace {

/// true for text a YAML 1.1 or 1.2 reader would take for a number, boolean or null when
/// unquoted ("0123", "1e3", "yes", "off", "~", "").
bool ReadsAsAnotherType(const std::string& text) {
  if (text.empty()) return true;
  std::string lower;
  for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const char* const kWords[] = {"y",     "n",    "yes", "no",   "on",   "off",   "true",
                                       "false", "null", "~",   ".nan", ".inf", "-.inf", "+.inf"};
  for (const char* w : kWords) {
    if (lower == w) return true;
  }
  // Anything that starts like a number (digits, sign, dot) is quoted: covers 0x1f, 1_000, 1:20.
  const char c = text[0];
  return std::isdigit(static_cast<unsigned char>(c)) ||
         ((c == '-' || c == '+' || c == '.') && text.size() > 1 &&
          (std::isdigit(static_cast<unsigned char>(text[1])) || text[1] == '.'));
}

void EmitYaml(YAML::Emitter& out, const Poco::Dynamic::Var& v) {
  if (v.isEmpty()) {
    out << YAML::Null;
  } else if (v.type() == typeid(Poco::JSON::Object::Ptr)) {
    const auto& object = v.extract<Poco::JSON::Object::Ptr>();
    out << YAML::BeginMap;
    // getNames() gives insertion order for JSON_PRESERVE_KEY_ORDER objects and sorted names
    // otherwise, the order stringify writes.
    std::vector<std::string> names;
    object->getNames(names);
    for (const auto& name : names) {
      out << YAML::Key << name << YAML::Value;
      EmitYaml(out, object->get(name));
    }
    out << YAML::EndMap;
  } else if (v.type() == typeid(Poco::JSON::Object)) {
    Poco::JSON::Object::Ptr copy = new Poco::JSON::Object(v.extract<Poco::JSON::Object>());
    EmitYaml(out, Poco::Dynamic::Var(copy));
  } else if (v.type() == typeid(Poco::JSON::Array::Ptr)) {
    const auto& array = v.extract<Poco::JSON::Array::Ptr>();
    out << YAML::BeginSeq;
    for (size_t i = 0; i < array->size(); ++i) EmitYaml(out, array->get(i));
    out << YAML::EndSeq;
  } else if (v.type() == typeid(Poco::JSON::Array)) {
    Poco::JSON::Array::Ptr copy = new Poco::JSON::Array(v.extract<Poco::JSON::Array>());
    EmitYaml(out, Poco::Dynamic::Var(copy));
  } else if (v.isBoolean()) {
    out << v.convert<bool>();
  } else if (v.isInteger()) {
    out << v.convert<Poco::Int64>();
  } else if (v.isNumeric()) {
    out << v.convert<double>();
  } else {
    const std::string text = v.convert<std::string>();
    if (ReadsAsAnotherType(text)) {
      out << YAML::DoubleQuoted << text;
    } else {
      out << text;  // yaml-cpp quotes what a plain scalar cannot hold (": ", "#", ...)
    }
  }
}

}  // namespace

const char* OutputFormatName(OutputFormat format) {
  switch (format) {
    case OutputFormat::kText:
      return "text";
    case OutputFormat::kJson:
      return "json";
    case OutputFormat::kYaml:
      return "yaml";
    case OutputFormat::kNdjson:
      return "ndjson";
  }
  return "text";
}

OutputFormat ParseOutputFormat(const std::string& text, bool streams, const std::string& command) {
  if (text == "text") return OutputFormat::kText;
  if (text == "json") return OutputFormat::kJson;
  if (text == "yaml") return OutputFormat::kYaml;
  if (text == "ndjson") {
    if (streams) return OutputFormat::kNdjson;
    throw UsageError("--output ndjson streams the events of provision and down; `gpuprov " +
                         command + "` prints one result",
                     "use --output json (or yaml) with `gpuprov " + command + "`");
  }
  std::vector<std::string> formats = {"text", "json", "yaml"};
  if (streams) formats.push_back("ndjson");
  std::string list;
  for (const auto& f : formats) list += (list.empty() ? "" : ", ") + f;
  throw UsageError(
      "--output must be one of " + list + ", not '" + text + "'" + DidYouMean(text, formats),
      "e.g. -o json, -ojson or --output=json");
}

std::string RenderJson(const Poco::Dynamic::Var& value) {
  std::ostringstream out;
  if (value.type() == typeid(Poco::JSON::Object::Ptr)) {
    value.extract<Poco::JSON::Object::Ptr>()->stringify(out, 2);
  } else if (value.type() == typeid(Poco::JSON::Array::Ptr)) {
    value.extract<Poco::JSON::Array::Ptr>()->stringify(out, 2);
  } else {
    Poco::JSON::Stringifier::stringify(value, out, 2);
  }
  return out.str() + "\n";
}

std::string RenderJsonLine(const Poco::Dynamic::Var& value) {
  std::ostringstream out;
  Poco::JSON::Stringifier::stringify(value, out, 0);
  std::string line = out.str();
  // Poco writes no newlines at indent 0, but a string's own newlines are escaped anyway.
  return line + "\n";
}

std::string RenderYaml(const Poco::Dynamic::Var& value) {
  YAML::Emitter out;
  out.SetIndent(2);
  EmitYaml(out, value);
  return std::string(out.c_str()) + "\n";
}

std::string RenderStructured(const Poco::Dynamic::Var& value, OutputFormat format) {
  switch (format) {
    case OutputFormat::kJson:
      return RenderJson(value);
    case OutputFormat::kYaml:
      return RenderYaml(value);
    case OutputFormat::kNdjson:
      return RenderJsonLine(value);
    case OutputFormat::kText:
      break;
  }
  throw std::logic_error("RenderStructured called for text output");
}

}  // namespace gpuprov
