// SPDX-License-Identifier: Apache-2.0
//
// Client-side pacing for APIs that publish a request rate (Lambda: about 1 request/s, launch 1
// per 12 s): calls that share a key are spaced at least an interval apart, process-wide, since
// clouds count per account, not per client object. Waits end on Ctrl-C like every kit wait.
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

}  // namespace gpuprov::drivers
