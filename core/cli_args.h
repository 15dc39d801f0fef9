// Command-line parsing for gpuprov's subcommands: a small, strict parser. Unknown options are
// usage errors naming the option and the command's help; `--` ends options and the rest is kept
// verbatim (for `gpuprov ssh NAME -- CMD...`).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpuprov {

struct OptionSpec {
  const char* long_name;   // "name" for --name
  char short_name;         // 'f' for -f, or 0
  const char* value_name;  // "NAME" when the option takes a value, nullptr for a switch
  const char* help;
};

struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::string> values;  // long name -> value (last wins)
  /// Every (long name, value) in command-line order, for options given more than once.
  std::vector<std::pair<std::string, std::string>> all_values;
  std::vector<std::string> switches;          // long names, in order
  std::vector<std::string> after_dashdash;
  bool has_dashdash = false;

  bool has(const std::string& name) const;
  std::optional<std::string> value(const std::string& name) const;
  /// Every value given for a repeatable option, in order.
  std::vector<std::string> values_of(const std::string& name) const;
};

/// Parses args against options; throws UsageError naming the bad option and `command`.
ParsedArgs ParseArgs(const std::vector<std::string>& args, const std::vector<OptionSpec>& options,
                     const std::string& command);

/// "  -f, --file SPEC   help" lines.
std::string OptionsHelp(const std::vector<OptionSpec>& options);

}  // namespace gpuprov
