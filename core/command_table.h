// The shape of gpuprov's command table (the rows live in cli.cc). The same table prints
// `--help` and `help COMMAND`, the man page generated at build time and the shell completion,
// so none of them can drift from what the parser accepts.
#pragma once

#include <string>
#include <vector>

#include "cli_args.h"

namespace gpuprov {

struct AppContext;

struct Command {
  const char* name;
  const char* synopsis;
  const char* summary;
  std::vector<OptionSpec> options;
  int (*run)(const AppContext& app, const ParsedArgs& args);
  Completion arguments = Completion::kNone;  // what its positional arguments are
  bool streams = false;                      // accepts --output ndjson (provision, down)
  bool hidden = false;                       // left out of help, man page and completion
};

/// The top-level help: commands with summaries, then the global options.
std::string MainHelp(const std::vector<Command>& commands, const std::vector<OptionSpec>& globals,
                     const std::string& version);

/// One command's help: usage, summary, its options, then the global options.
std::string CommandHelp(const Command& command, const std::vector<OptionSpec>& globals);

/// gpuprov(1) in man(7) markup: every visible command with its options, the global options,
/// files, environment and exit status.
std::string ManPage(const std::vector<Command>& commands, const std::vector<OptionSpec>& globals,
                    const std::string& version);

/// The visible command named \a name, or nullptr.
const Command* FindCommand(const std::vector<Command>& commands, const std::string& name);

/// The visible command names, in table order.
std::vector<std::string> CommandNames(const std::vector<Command>& commands);

}  // namespace gpuprov
