// SPDX-License-Identifier: Apache-2.0
#include "offers.h"

#include <Poco/Dynamic/Var.h>
#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "text.h"

namespace gpuprov::primeintellect {
namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;

using gpuprov::drivers::Lower;

// Upper case, '-' and ' ' read as '_', blanks around trimmed.
std::string NormalizeGpu(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '-' || c == ' ') c = '_';
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  while (!out.empty() && out.front() == '_') out.erase(out.begin());
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

// Lower case, '-' and ' ' read as '_'.
std::string NormalizeRegion(const std::string& s) {
  std::string out = Lower(s);
  for (char& c : out) {
    if (c == '-' || c == ' ') c = '_';
  }
  return out;
}

// "80GB" and the like.
bool IsMemorySuffix(const std::string& s) {
  if (s.size() < 3 || s.compare(s.size() - 2, 2, "GB") != 0) return false;
  for (size_t i = 0; i + 2 < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

std::string Str(const Object::Ptr& o, const std::string& key) {
  if (o.isNull() || !o->has(key) || o->isNull(key)) return "";
  Poco::Dynamic::Var v = o->get(key);
  if (v.isString()) return v.convert<std::string>();
  if (v.isNumeric()) return v.convert<std::string>();
  return "";
}

std::optional<double> Num(const Object::Ptr& o, const std::string& key) {
  if (o.isNull() || !o->has(key) || o->isNull(key)) return std::nullopt;
  Poco::Dynamic::Var v = o->get(key);
  try {
    if (v.isNumeric() || v.isString()) {
      double d = v.convert<double>();
      if (std::isfinite(d)) return d;
    }
  } catch (const Poco::Exception&) {
  }
  return std::nullopt;
}

std::optional<int> Int(const Object::Ptr& o, const std::string& key) {
  std::optional<double> d = Num(o, key);
  if (!d) return std::nullopt;
  return static_cast<int>(std::lround(*d));
}

Object::Ptr Child(const Object::Ptr& o, const std::string& key) {
  if (o.isNull() || !o->has(key) || o->isNull(key)) return nullptr;
  Poco::Dynamic::Var v = o->get(key);
  if (v.type() == typeid(Object::Ptr)) return v.extract<Object::Ptr>();
  return nullptr;
}

Offer ParseOffer(const Object::Ptr& o) {
  Offer offer;
  offer.cloud_id = Str(o, "cloudId");
  offer.gpu_type = Str(o, "gpuType");
  offer.socket = Str(o, "socket");
  offer.provider = Str(o, "provider");
  offer.data_center = Str(o, "dataCenter");
  offer.region = Str(o, "region");
  offer.country = Str(o, "country");
  offer.security = Str(o, "security");
  offer.gpu_count = Int(o, "gpuCount").value_or(0);
  offer.stock_status = Str(o, "stockStatus");
  if (Object::Ptr prices = Child(o, "prices")) {
    offer.price_per_hour = Num(prices, "onDemand");
    if (!offer.price_per_hour) offer.price_per_hour = Num(prices, "communityPrice");
    offer.currency = Str(prices, "currency");
  }
  if (Object::Ptr disk = Child(o, "disk")) {
    offer.disk_min_gb = Int(disk, "minCount");
    offer.disk_default_gb = Int(disk, "defaultCount");
    offer.disk_max_gb = Int(disk, "maxCount");
  }
  if (Object::Ptr vcpu = Child(o, "vcpu")) offer.vcpus_default = Int(vcpu, "defaultCount");
  if (Object::Ptr memory = Child(o, "memory")) offer.memory_default_gb = Int(memory, "defaultCount");
  if (o->has("images") && !o->isNull("images")) {
    Poco::Dynamic::Var v = o->get("images");
    if (v.type() == typeid(Array::Ptr)) {
      Array::Ptr arr = v.extract<Array::Ptr>();
      for (size_t i = 0; arr && i < arr->size(); ++i) {
        Poco::Dynamic::Var item = arr->get(i);
        if (item.isString()) offer.images.push_back(item.convert<std::string>());
      }
    }
  }
  if (o->has("isSpot") && !o->isNull("isSpot")) {
    try {
      offer.is_spot = o->get("isSpot").convert<bool>();
    } catch (const Poco::Exception&) {
    }
  }
  return offer;
}

void AddItems(const Array::Ptr& items, std::vector<Offer>* out) {
  for (size_t i = 0; items && i < items->size(); ++i) {
    Poco::Dynamic::Var item = items->get(i);
    if (item.type() == typeid(Object::Ptr)) out->push_back(ParseOffer(item.extract<Object::Ptr>()));
  }
}

// Higher is more stock; unknown words rank between Low and Medium.
int StockRank(const std::string& status) {
  std::string s = Lower(status);
  if (s == "high" || s == "available") return 4;
  if (s == "medium") return 3;
  if (s == "low") return 1;
  return 2;
}

}  // namespace

std::string Offer::DisplayRegion() const {
  if (!data_center.empty()) return data_center;
  if (!region.empty()) return region;
  return country;
}

AvailabilityPage ParseAvailability(const std::string& json) {
  Poco::Dynamic::Var root;
  try {
    Poco::JSON::Parser parser;
    root = parser.parse(json);
  } catch (const Poco::Exception& e) {
    throw std::runtime_error("the availability response is not JSON: " + e.displayText());
  }
  AvailabilityPage page;
  if (root.type() == typeid(Array::Ptr)) {
    AddItems(root.extract<Array::Ptr>(), &page.offers);
    return page;
  }
  if (root.type() != typeid(Object::Ptr)) {
    throw std::runtime_error("the availability response is neither an object nor a list");
  }
  Object::Ptr o = root.extract<Object::Ptr>();
  if (o->has("items")) {
    Poco::Dynamic::Var items = o->get("items");
    if (items.type() == typeid(Array::Ptr)) {
      AddItems(items.extract<Array::Ptr>(), &page.offers);
    } else if (!items.isEmpty()) {
      throw std::runtime_error("the availability response's \"items\" is not a list");
    }
    page.total_count = Int(o, "totalCount");
    if (!page.total_count) page.total_count = Int(o, "total_count");
    return page;
  }
  // {"H100_80GB": [offer...], ...}
  for (const auto& [key, value] : *o) {
    if (value.type() == typeid(Array::Ptr)) AddItems(value.extract<Array::Ptr>(), &page.offers);
  }
  return page;
}

std::optional<std::string> GpuTypeParameter(const std::string& requested) {
  if (requested.empty()) return std::string("CPU_NODE");
  std::string n = NormalizeGpu(requested);
  if (n == "CPU_NODE") return n;
  size_t us = n.rfind('_');
  if (us != std::string::npos && us > 0 && IsMemorySuffix(n.substr(us + 1))) return n;
  return std::nullopt;
}

bool GpuTypeMatches(const std::string& offer_gpu_type, const std::string& requested) {
  std::string offer = NormalizeGpu(offer_gpu_type);
  if (requested.empty()) return offer == "CPU_NODE";
  std::string want = NormalizeGpu(requested);
  if (want.empty() || offer.empty()) return false;
  if (offer == want) return true;
  return offer.size() > want.size() + 1 && offer.compare(0, want.size(), want) == 0 &&
         offer[want.size()] == '_' && IsMemorySuffix(offer.substr(want.size() + 1));
}

bool RegionMatches(const Offer& offer, const std::string& region) {
  if (region.empty()) return true;
  std::string want = NormalizeRegion(region);
  for (const std::string* field : {&offer.data_center, &offer.region, &offer.country}) {
    if (!field->empty() && NormalizeRegion(*field) == want) return true;
  }
  return false;
}

bool InStock(const Offer& offer) {
  std::string s = NormalizeRegion(offer.stock_status);  // lower case, '_' for blanks
  while (!s.empty() && s.front() == '_') s.erase(s.begin());
  while (!s.empty() && s.back() == '_') s.pop_back();
  static const char* const kNone[] = {"",     "unavailable", "out_of_stock", "outofstock",
                                      "none", "no",          "sold_out",     "0",
                                      "empty", "not_available", "null"};
  for (const char* word : kNone) {
    if (s == word) return false;
  }
  return true;
}

bool Matches(const Offer& offer, const OfferQuery& query) {
  if (!GpuTypeMatches(offer.gpu_type, query.gpu_type)) return false;
  if (!query.gpu_type.empty() && offer.gpu_count != query.gpu_count) return false;
  if (!RegionMatches(offer, query.region)) return false;
  if (!query.instance_type.empty() && offer.cloud_id != query.instance_type) return false;
  return !offer.cloud_id.empty();
}

std::vector<Offer> MatchingOffers(const std::vector<Offer>& offers, const OfferQuery& query) {
  std::vector<Offer> out;
  for (const Offer& o : offers) {
    const bool free_or_less = o.price_per_hour && *o.price_per_hour <= 0;
    if (InStock(o) && Matches(o, query) && !free_or_less) out.push_back(o);
  }
  std::stable_sort(out.begin(), out.end(), [](const Offer& a, const Offer& b) {
    if (a.price_per_hour.has_value() != b.price_per_hour.has_value()) {
      return a.price_per_hour.has_value();
    }
    if (a.price_per_hour && *a.price_per_hour != *b.price_per_hour) {
      return *a.price_per_hour < *b.price_per_hour;
    }
    int ra = StockRank(a.stock_status), rb = StockRank(b.stock_status);
    if (ra != rb) return ra > rb;
    if (a.cloud_id != b.cloud_id) return a.cloud_id < b.cloud_id;
    if (a.provider != b.provider) return a.provider < b.provider;
    return a.data_center < b.data_center;
  });
  return out;
}

std::vector<Offer> OfTheMarket(const std::vector<Offer>& offers, bool spot) {
  std::vector<Offer> out;
  for (const Offer& o : offers) {
    if (o.is_spot == spot) out.push_back(o);
  }
  return out;
}

std::optional<Offer> ChooseOffer(const std::vector<Offer>& offers, const OfferQuery& query) {
  std::vector<Offer> m = MatchingOffers(offers, query);
  if (m.empty()) return std::nullopt;
  return m.front();
}

std::vector<std::string> ParseProviderList(const std::string& text) {
  std::string spaced = text;
  for (char& c : spaced) {
    if (c == ',') c = ' ';
  }
  std::istringstream in(spaced);
  std::vector<std::string> out;
  std::string name;
  while (in >> name) {
    for (char c : name) {
      const auto u = static_cast<unsigned char>(c);
      if (!std::isalnum(u) && c != '.' && c != '_' && c != '-') {
        throw std::invalid_argument("\"" + name + "\" is not a provider name (letters, digits, "
                                    "'.', '_' and '-')");
      }
    }
    name = Lower(name);
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  if (out.empty()) throw std::invalid_argument("it names no provider");
  return out;
}

bool FromVmProvider(const Offer& offer, const std::vector<std::string>& vm_providers) {
  const std::string provider = Lower(offer.provider);
  return !provider.empty() &&
         std::find(vm_providers.begin(), vm_providers.end(), provider) != vm_providers.end();
}

ProviderSplit SplitByProvider(const std::vector<Offer>& offers,
                              const std::vector<std::string>& vm_providers) {
  ProviderSplit split;
  for (const Offer& o : offers) {
    (FromVmProvider(o, vm_providers) ? split.kept : split.skipped).push_back(o);
  }
  return split;
}

std::string DescribeSkipped(const std::vector<Offer>& offers) {
  static const std::vector<std::string> known_containers =
      ParseProviderList(kKnownContainerProviders);
  std::string out;
  for (const Offer& o : offers) {
    std::string one = o.cloud_id + "@" + (o.provider.empty() ? "(no provider)" : o.provider);
    if (!o.DisplayRegion().empty()) one += " in " + o.DisplayRegion();
    if (o.price_per_hour) {
      char buf[32];
      std::snprintf(buf, sizeof buf, " $%.2f/h", *o.price_per_hour);
      one += buf;
    }
    one += FromVmProvider(o, known_containers) ? " (container)" : " (not in vm_providers)";
    out += (out.empty() ? "" : "; ") + one;
  }
  return out;
}

std::optional<int> DiskSizeFor(const Offer& offer, std::optional<int> requested_gb,
                               std::string* error) {
  if (error) error->clear();
  if (requested_gb) {
    bool too_small = offer.disk_min_gb && *requested_gb < *offer.disk_min_gb;
    bool too_big = offer.disk_max_gb && *requested_gb > *offer.disk_max_gb;
    if (*requested_gb <= 0 || too_small || too_big) {
      if (error) {
        *error = "disk size " + std::to_string(*requested_gb) + " GB is outside what offer " +
                 offer.cloud_id + " allows (" +
                 (offer.disk_min_gb ? std::to_string(*offer.disk_min_gb) : std::string("1")) +
                 ".." +
                 (offer.disk_max_gb ? std::to_string(*offer.disk_max_gb) : std::string("?")) +
                 " GB)";
      }
      return std::nullopt;
    }
    return requested_gb;
  }
  if (offer.disk_default_gb && *offer.disk_default_gb > 0) return offer.disk_default_gb;
  if (offer.disk_min_gb && *offer.disk_min_gb > 0) return offer.disk_min_gb;
  return std::nullopt;
}

std::string ImageFor(const Offer& offer, const std::string& requested, std::string* error) {
  if (error) error->clear();
  auto offered = [&](const std::string& image) {
    return offer.images.empty() ||
           std::find(offer.images.begin(), offer.images.end(), image) != offer.images.end();
  };
  if (!requested.empty()) {
    if (offered(requested)) return requested;
    if (error) {
      std::string list;
      for (const auto& i : offer.images) list += (list.empty() ? "" : ", ") + i;
      *error = "image " + requested + " is not offered by " + offer.cloud_id + " (images: " +
               list + ")";
    }
    return "";
  }
  if (offered(kDefaultImage)) return kDefaultImage;
  return offer.images.front();
}

}  // namespace gpuprov::primeintellect
