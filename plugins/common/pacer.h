// SPDX-License-Identifier: Apache-2.0
//
// Client-side pacing for APIs that publish a request rate (Lambda: about 1 request/s, launch 1
// per 12 s): calls that share a key are spaced at least an interval apart, process-wide or
// across processes (a file per key in the home folder), since clouds count per API key, not
// per client object. Waits end on Ctrl-C like every kit wait.
#pragma once

#include <chrono>
#include <string>

#include "gpuprov/sdk.hpp"

namespace gpuprov::drivers {

/// Reserves the next slot for `key` (slots are `interval` apart; the first is now) and sleeps
/// until it. Thread-safe: concurrent callers get successive slots. A zero or negative interval
/// returns at once. Throws DriverError(CANCELLED, "<what>: cancelled") when the host cancels.
void PaceCall(const gpuprov::sdk::Host& host, const std::string& key,
              std::chrono::milliseconds interval, const std::string& what);

/// The same across processes: a cloud counts per API key, so two gpuprov processes with one
/// key (a script of commands, a fleet) share the slots. The next slot of `key` is kept in a
/// file in `shared_dir` named by 16 hex of sha256(key) (never the key itself), read and
/// written under flock. "" for `shared_dir`, or a file that cannot be used (a debug line says
/// why): PaceCall above, within this process only.
void PaceCall(const gpuprov::sdk::Host& host, const std::string& key,
              std::chrono::milliseconds interval, const std::string& what,
              const std::string& shared_dir);

/// Where the shared slots live: $GPUPROV_HOME/pace, else $HOME/.gpu-provisioner/pace (the
/// host's home folder); "" when neither variable is set.
std::string DefaultPaceDir();

}  // namespace gpuprov::drivers
