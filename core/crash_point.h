// Test-only crash points (issue 15): gpuprov SIGKILLs itself right after a named step that
// changes the world, so an end-to-end test can prove that re-running the same command converges
// and that `gpuprov down` then leaves nothing. Nothing here reads the environment: only a gpuprov
// executable built with the CMake option GPUPROV_TEST_HOOKS arms a point (main.cc reads
// GPUPROV_TEST_CRASH_AT); the installed executable is always built without it, so in a package
// CrashPoint never kills.
#pragma once

#include <string>
#include <vector>

namespace gpuprov {

/// The environment variable a hooks build reads: GPUPROV_TEST_CRASH_AT=<point>.
inline constexpr const char* kCrashAtEnv = "GPUPROV_TEST_CRASH_AT";

/// Every point, in the order a run reaches them: provision's, then down's.
const std::vector<std::string>& CrashPointNames();

/// Arms \a point, so that reaching it kills this process. Throws UsageError naming the points
/// when \a point is not one of CrashPointNames().
void ArmCrashPoint(const std::string& point);

/// Disarms (for tests of this file).
void DisarmCrashPoint();

/// What reaching the armed point does instead of the SIGKILL; nullptr (the default) kills.
/// For unit tests: an action that throws a value no handler catches (nothing derived from
/// std::exception) stops the run where a kill would, leaving the files as the kill leaves them.
using CrashAction = void (*)(const char* point);
void SetCrashAction(CrashAction action);

/// When \a point is the armed one: says so on stderr and SIGKILLs this process (no cleanup, no
/// destructors, no flush of anything else: what a power cut or `kill -9` leaves), or runs the
/// action SetCrashAction gave. Else returns.
void CrashPoint(const char* point);

}  // namespace gpuprov
