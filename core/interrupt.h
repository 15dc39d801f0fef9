// Ctrl-C handling: the first SIGINT or SIGTERM sets a flag that long waits poll, so gpuprov
// stops between steps with the state file consistent and says what was kept. Drivers see the
// same flag through the host API's `cancelled` callback (core/cloud.cc), so their waits and
// back-offs end too; a cancelled command exits 130.
#pragma once

#include <chrono>
#include <string>

namespace gpuprov {

void InstallInterruptHandler();
bool Interrupted();
/// Throws Error("interrupted while <doing>", exit code 130) once the user pressed Ctrl-C.
void ThrowIfInterrupted(const std::string& doing);

/// Sleeps \a pause in steps of at most 100 ms, throwing as ThrowIfInterrupted does once the
/// user pressed Ctrl-C.
void PauseUnlessInterrupted(std::chrono::milliseconds pause, const std::string& doing);

}  // namespace gpuprov
