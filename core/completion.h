// Shell completion (issue 16, item 5). The scripts for bash, zsh and fish are thin: on each Tab
// they run `gpuprov __complete -- WORDS...`, and Complete() answers from the command table
// (commands, flags, output formats, shells) and from the machine (installed drivers' names,
// VM names from the state folder), so completion always matches the installed gpuprov.
#pragma once

#include <string>
#include <vector>

#include "command_table.h"

namespace gpuprov {

/// Where the names that are not in the command table come from.
class CompletionSources {
 public:
  virtual ~CompletionSources() = default;
  virtual std::vector<std::string> Clouds() = 0;  // installed, working drivers
  virtual std::vector<std::string> Vms() = 0;     // VM records in the state folder
  /// TYPE:COUNT offered before by \a cloud, or by any cloud when it is "".
  virtual std::vector<std::string> GpuTypes(const std::string& cloud) = 0;
};

struct CompletionResult {
  std::vector<std::string> words;  // candidates starting with the word being completed
  bool files = false;              // the shell should complete a path instead
};

/// Completes the last of \a words (the words after "gpuprov"; the last is the partial word,
/// "" after a space).
CompletionResult Complete(const std::vector<Command>& commands,
                          const std::vector<OptionSpec>& globals,
                          const std::vector<std::string>& words, CompletionSources& sources);

/// The `__complete` answer: one candidate per line, then ":files" or ":done".
std::string CompletionReply(const CompletionResult& result);

/// The completion script for "bash", "zsh" or "fish"; UsageError for another shell.
std::string CompletionScript(const std::string& shell);

}  // namespace gpuprov
