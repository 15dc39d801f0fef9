// Spot (preemptible) VMs (`--spot`, spec `spot: true`, [defaults] spot): which drivers sell
// them (GPUPROV_CAP_SPOT), what a spot request costs, and the refusal on a cloud that cannot.
// A spot VM the cloud took back has the driver state "preempted" (docs/driver-protocol.md).
#pragma once

#include <string>
#include <vector>

#include "cloud.h"
#include "error.h"
#include "driver_host.h"

namespace gpuprov {

/// The state word of a VM the cloud took back (GPUPROV_CAP_SPOT drivers).
inline constexpr const char* kPreemptedState = "preempted";

/// The names of the usable drivers among \a drivers that sell spot VMs, sorted, each once.
std::vector<std::string> SpotClouds(const std::vector<DriverInfo>& drivers);

/// The same for every driver \a host finds: its search path's and its in-memory ones.
std::vector<std::string> SpotClouds(const DriverHost& host);

/// The UsageError (exit 2, nothing made) for a spot request (\a origin: "--spot from the command
/// line", "spot from spec.yaml", ...) on \a cloud, whose driver lacks GPUPROV_CAP_SPOT, naming \a spot_clouds.
Error SpotRefusal(const std::string& cloud, const std::string& origin,
                       const std::vector<std::string>& spot_clouds);

/// The offers priced as spot: each price_per_hour becomes its spot_price_per_hour (0, unknown,
/// when the driver gives none) and on_demand_price_per_hour keeps the on-demand one, so every
/// price rule (cheapest first, --max-price, confirm_above_per_hour) applies to what is paid.
/// When some offers have a spot price, those without one are left out: the cloud sells them on
/// demand only, and cheapest first would take their unknown price first.
std::vector<CloudOffer> PricedAsSpot(std::vector<CloudOffer> offers);

/// " spot (on demand $1.01/h)" (with ", the driver's price table of DATE" when the on-demand
/// price is the driver's own): what the offer line adds after a spot offer's price.
std::string SpotPriceNote(const CloudOffer& offer);

}  // namespace gpuprov
