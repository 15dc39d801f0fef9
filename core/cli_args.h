// Command-line parsing for gpuprov's subcommands: a small, strict parser. Unknown options are
// usage errors naming the option, the closest known one ("did you mean --cloud?") and the
// command's help; `--` ends options and the rest is kept verbatim (for `gpuprov ssh NAME --
// CMD...`). A short option takes its value attached or as the next word (`-ojson`, `-o json`),
// a long one after `=` or as the next word (`--output=json`, `--output json`).
// Written here rather than with CLI11: the same table drives help, the man page and completion,
// and the messages follow gpuprov's error convention.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuprov {

/// What a shell may complete for an option's value or a command's arguments.
enum class Completion {
  kNone,
  kFile,          // a path
  kCloud,         // an installed driver's name
  kVm,            // a VM name from the state folder
  kOutputFormat,  // text, json, yaml (and ndjson where the command streams)
  kShell,         // bash, zsh, fish
  kCommand,       // a gpuprov command
  kGpus,          // TYPE:COUNT a cloud offered before (offer_cache.h; a Tab calls no cloud)
};

struct OptionSpec {
  const char* long_name;   // "name" for --name
  char short_name;         // 'f' for -f, or 0
  const char* value_name;  // "NAME" when the option takes a value, nullptr for a switch
  const char* help;
  Completion completes = Completion::kNone;  // what the value is, for shell completion
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

/// Edit distance counting an insertion, deletion, substitution or swap of two neighbouring
/// characters as one (optimal string alignment).
size_t EditDistance(std::string_view a, std::string_view b);

/// The candidate closest to \a typed when it is near enough to be a typo (distance at most 2,
/// and at most a third of the longer word, or \a typed is a prefix of it); nullopt otherwise.
std::optional<std::string> ClosestMatch(std::string_view typed,
                                        const std::vector<std::string>& candidates);

/// " (did you mean X?)" for the closest candidate, or "".
std::string DidYouMean(std::string_view typed, const std::vector<std::string>& candidates);

}  // namespace gpuprov
