// The gpuprov command line: global options, the subcommand table (which also prints help), and
// the top-level error handling that turns gpuprov::Error into a message and an exit code.
#pragma once

#include <string>
#include <vector>

namespace gpuprov {

/// Runs gpuprov with argv[1..]; returns the process exit code.
int RunCli(const std::vector<std::string>& args);

}  // namespace gpuprov
