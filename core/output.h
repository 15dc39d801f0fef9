// How results are printed: text (each command's own), or the same data as JSON, YAML or, for
// the commands that stream (provision, down), newline-delimited JSON events. Commands build a
// Poco JSON value once and hand it here, so -o json and -o yaml always carry the same fields.
#pragma once

#include <Poco/Dynamic/Var.h>

#include <string>
#include <vector>

namespace gpuprov {

enum class OutputFormat { kText, kJson, kYaml, kNdjson };

/// "text", "json", "yaml", "ndjson".
const char* OutputFormatName(OutputFormat format);

/// The format named by --output. Throws UsageError listing the formats (and the closest one to
/// a typo) when \a text names none, or names ndjson and \a streams is false (the command does
/// not stream events).
OutputFormat ParseOutputFormat(const std::string& text, bool streams, const std::string& command);

/// Pretty JSON (2-space indent) with a final newline.
std::string RenderJson(const Poco::Dynamic::Var& value);
/// The JSON value on one line with a final newline (one ndjson event).
std::string RenderJsonLine(const Poco::Dynamic::Var& value);
/// The same value as a YAML document (keys in the value's order; strings quoted where YAML
/// would read them as another type) with a final newline.
std::string RenderYaml(const Poco::Dynamic::Var& value);

/// The value in a structured format: JSON for kJson, YAML for kYaml, one JSON line for
/// kNdjson. Throws std::logic_error for kText (the caller prints its own text).
std::string RenderStructured(const Poco::Dynamic::Var& value, OutputFormat format);

}  // namespace gpuprov
