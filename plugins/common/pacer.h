// SPDX-License-Identifier: Apache-2.0
//
// Client-side pacing for APIs that publish a request rate (Lambda: about 1 request/s, launch 1
// per 12 s): calls that share a key are spaced at least an interval apart. Clouds count per API
// key, not per process, so a second gpuprov started right after the first must wait its turn
// too: with a shared folder (the driver settings' "pacer_dir", which the host sets to
// ~/.gpu-provisioner/pacer) the slots are kept in one small file per key there, under flock, so
// every process of the user paces together; without one, process-wide only. Waits end on
// Ctrl-C like every kit wait.
#pragma once

#include <chrono>
#include <string>

#include "gpuprov/sdk.hpp"

namespace gpuprov::drivers {

/// Reserves the next slot for `key` (slots are `interval` apart; the first is now) and sleeps
/// until it. Thread-safe: concurrent callers get successive slots. A zero or negative interval
/// returns at once. Throws DriverError(CANCELLED, "<what>: cancelled") when the host cancels.
///
/// `key` names what the cloud counts: the cloud, its endpoint and the credential (it may hold
/// the secret itself: only its salted SHA-256 is kept, in memory and as the file's name; the
/// key is never written). With `shared_dir` (created 0700 when missing) the slots are shared
/// with every process that paces the same key there: the file `<shared_dir>/<hash>` (0600)
/// holds the next free slot, read and moved under an exclusive flock. A file that cannot be
/// read as a slot, or names one further ahead than a bounded queue of callers could have
/// reserved (a corrupt file, a clock set back), counts as no slot; a folder or file that
/// cannot be used (not ours, not a folder, no space) falls back to process-wide pacing with a
/// debug line.
void PaceCall(const gpuprov::sdk::Host& host, const std::string& key,
              std::chrono::milliseconds interval, const std::string& what,
              const std::string& shared_dir = "");

/// The name of `key`'s file in the shared folder: the hex SHA-256 of a fixed salt and the key.
std::string PacerFileName(const std::string& key);

/// How many intervals ahead a shared slot may be before it counts as stale (see PaceCall): as
/// many callers as this can queue on one key at once.
inline constexpr int kPacerMaxQueued = 64;

}  // namespace gpuprov::drivers
