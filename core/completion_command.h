// `gpuprov completion bash|zsh|fish` prints the completion script; the hidden `__complete`, which
// those scripts run on each Tab, answers from the command table and this machine (installed
// drivers, VM records, GPU types offered before). completion.h holds the rules.
#pragma once

#include <string>
#include <vector>

#include "app_context.h"
#include "command_table.h"

namespace gpuprov {

/// Prints the completion script for \a shell; UsageError for a shell it has none for.
int RunCompletion(const std::string& shell);

/// Prints the `__complete` answer for \a words (the words after "gpuprov", the last one being
/// completed) from \a commands and \a globals and this machine's drivers and records.
int RunComplete(const AppContext& app, const std::vector<Command>& commands,
                const std::vector<OptionSpec>& globals, std::vector<std::string> words);

}  // namespace gpuprov
