// Ctrl-C handling: the first SIGINT or SIGTERM sets a flag that long waits poll, so gpuprov
// stops between steps with the state file consistent and says what was kept.
#pragma once

#include <string>

namespace gpuprov {

void InstallInterruptHandler();
bool Interrupted();
/// Throws Error("interrupted while <doing>") once the user pressed Ctrl-C.
void ThrowIfInterrupted(const std::string& doing);

}  // namespace gpuprov
