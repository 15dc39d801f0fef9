#include "spot.h"

#include <algorithm>

#include "prompt.h"

namespace gpuprov {

std::vector<std::string> SpotClouds(const std::vector<DriverInfo>& drivers) {
  std::vector<std::string> out;
  for (const DriverInfo& d : drivers) {
    if (d.problem.empty() && d.shadowed_by.empty() && d.has(GPUPROV_CAP_SPOT)) out.push_back(d.name);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::string> SpotClouds(const DriverHost& host) {
  std::vector<DriverInfo> drivers = host.ListAll();
  for (const std::string& name : host.InMemoryNames()) drivers.push_back(host.Load(name).info());
  return SpotClouds(drivers);
}

Error SpotRefusal(const std::string& cloud, const std::string& origin,
                       const std::vector<std::string>& spot_clouds) {
  std::string names;
  for (const auto& c : spot_clouds) names += (names.empty() ? "" : ", ") + c;
  return UsageError(
      "the " + cloud + " driver does not make spot VMs (" + origin + ")",
      (spot_clouds.empty() ? std::string("no installed driver makes spot VMs")
                           : "clouds whose driver makes spot VMs: " + names) +
          "; drop --spot (and spot in the spec or config.toml) for " + cloud +
          "; nothing was created");
}

std::vector<CloudOffer> PricedAsSpot(std::vector<CloudOffer> offers) {
  const auto has_spot_price = [](const CloudOffer& o) {
    return o.spot_price_per_hour.value_or(0) > 0;
  };
  if (std::any_of(offers.begin(), offers.end(), has_spot_price)) {
    offers.erase(std::remove_if(offers.begin(), offers.end(),
                                [&](const CloudOffer& o) { return !has_spot_price(o); }),
                 offers.end());
  }
  for (CloudOffer& o : offers) {
    o.on_demand_price_per_hour = o.price_per_hour;
    o.price_per_hour = o.spot_price_per_hour.value_or(0);
  }
  return offers;
}

std::string SpotPriceNote(const CloudOffer& offer) {
  if (offer.on_demand_price_per_hour <= 0) return " spot";
  return " spot (on demand " + FormatPricePerHour(offer.on_demand_price_per_hour) +
         (offer.price_source == "table"
              ? ", the driver's price table" +
                    (offer.price_date.empty() ? "" : " of " + offer.price_date)
              : std::string()) +
         ")";
}

}  // namespace gpuprov
