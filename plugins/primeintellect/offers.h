// SPDX-License-Identifier: Apache-2.0
//
// Offers of Prime Intellect's GET /api/v1/availability/gpus (REFERENCE.md §3.1,
// REFERENCE.md §7) and the choice among them: the cheapest in-stock offer for a GPU type, count and
// region. Pure functions over the response text, no I/O.
//
// gpuprov names GPUs like "H100", "A100-80GB", "RTX-A6000" (core/gpu_request.h: upper case,
// [A-Z0-9-]); Prime Intellect names them "<MODEL>_<mem>GB" ("H100_80GB", "RTX_A6000_48GB").
// A request matches an offer when, with '-' read as '_', the names are equal or the offer's is
// the request's plus a "_<digits>GB" memory suffix ("H100" matches "H100_80GB"; "A100"
// matches both "A100_40GB" and "A100_80GB", and the cheaper wins). No GPU means "CPU_NODE".
//
// A region matches an offer's dataCenter, region or country (case-insensitive, '-' = '_').
// The offer's region as gpuprov shows it is its dataCenter (what pod create takes), else its
// region, else its country. Its instance type is its cloudId.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpuprov::primeintellect {

struct Offer {
  std::string cloud_id;
  std::string gpu_type;
  std::string socket;
  std::string provider;
  std::string data_center;
  std::string region;
  std::string country;
  std::string security;
  int gpu_count = 0;
  std::string stock_status;
  std::optional<double> price_per_hour;  ///< prices.onDemand, else prices.communityPrice
  std::string currency;
  std::optional<int> disk_min_gb, disk_default_gb, disk_max_gb;
  /// vcpu.defaultCount and memory.defaultCount: what pod create's vcpus and memory take (the
  /// prime CLI sends them, packages/prime/src/prime_cli/commands/pods.py `create`).
  std::optional<int> vcpus_default, memory_default_gb;
  std::vector<std::string> images;
  bool is_spot = false;

  /// dataCenter, else region, else country.
  std::string DisplayRegion() const;
};

/// One page of the availability response.
struct AvailabilityPage {
  std::vector<Offer> offers;
  std::optional<int> total_count;  ///< totalCount when the response has it
};

/// Parses {"items": [offer...], "totalCount": N}. Also accepts a bare list of offers, and an
/// object whose members are lists of offers (keyed by GPU type). Items that are not objects
/// are skipped. Throws std::runtime_error when the text is not such JSON.
AvailabilityPage ParseAvailability(const std::string& json);

/// What the user asked for.
struct OfferQuery {
  std::string gpu_type;       ///< gpuprov's name ("H100", "A100-80GB"); "" = no GPU
  int gpu_count = 0;          ///< ignored when gpu_type is ""
  std::string region;         ///< "" = any
  std::string instance_type;  ///< "" = any; else the offer's cloudId, exactly
};

/// The gpu_type query parameter to send for a request: the request itself when it is already
/// in Prime Intellect's full form ("H100_80GB", "A100-80GB" -> "A100_80GB", "CPU_NODE" for
/// no GPU), else nullopt (filter client-side with GpuTypeMatches).
std::optional<std::string> GpuTypeParameter(const std::string& requested);

/// True when the offer's gpuType serves the requested gpuprov GPU type (see the file comment).
bool GpuTypeMatches(const std::string& offer_gpu_type, const std::string& requested);

/// True when the offer's dataCenter, region or country is the requested region.
bool RegionMatches(const Offer& offer, const std::string& region);

/// True when stockStatus says the offer can be launched now: any non-empty value other than
/// words meaning none ("Unavailable", "Out of stock", "None", ...). "Low" is in stock.
bool InStock(const Offer& offer);

/// True when the offer fits the query's GPU type, count, region and instance type, whatever
/// its stock.
bool Matches(const Offer& offer, const OfferQuery& query);

/// The in-stock offers that match, cheapest first (unknown prices last; ties by higher stock,
/// then cloudId, provider, dataCenter, so the order is stable). An offer priced at or below
/// zero is no offer (an internal or placeholder SKU) and is left out.
std::vector<Offer> MatchingOffers(const std::vector<Offer>& offers, const OfferQuery& query);

/// The offers of one market, order kept: spot ones (isSpot) when \a spot, else on-demand ones.
std::vector<Offer> OfTheMarket(const std::vector<Offer>& offers, bool spot);

/// The cheapest in-stock matching offer, or nullopt.
std::optional<Offer> ChooseOffer(const std::vector<Offer>& offers, const OfferQuery& query);

/// The diskSize for pod create: the requested size when within the offer's min..max, else the
/// offer's default (or min), else nullopt with the error set (requested size out of range).
/// With neither a request nor offer limits: nullopt and no error (omit the field).
std::optional<int> DiskSizeFor(const Offer& offer, std::optional<int> requested_gb,
                               std::string* error);

/// The image for pod create: the requested one when the offer lists it (or lists nothing),
/// else "" with the error set; with no request "ubuntu_22_cuda_12" when offered, else the
/// offer's first image.
std::string ImageFor(const Offer& offer, const std::string& requested, std::string* error);

/// Providers whose pods are virtual machines with systemd as PID 1, where k3s can run, unless
/// `vm_providers` in [clouds.primeintellect] says otherwise. The project's references document
/// each as a VM cloud: hyperstack (plugins/hyperstack/REFERENCE.md), lambdalabs
/// (plugins/lambda/REFERENCE.md), datacrunch (plugins/verda/REFERENCE.md, Verda was DataCrunch),
/// nebius (plugins/nebius/REFERENCE.md), massedcompute (plugins/massedcompute/REFERENCE.md; a
/// provider id of P-DOC's create-pod provider enum). RunPod gives containers (REFERENCE.md); any
/// provider not listed counts as a container.
inline constexpr const char* kDefaultVmProviders =
    "hyperstack,lambdalabs,datacrunch,nebius,massedcompute";

/// Providers known to give containers, named as such in messages (REFERENCE.md).
inline constexpr const char* kKnownContainerProviders = "runpod";

/// A provider list: names separated by commas or blanks, lower-cased, repeats dropped. Throws
/// std::invalid_argument naming the entry when a name has other characters than [a-z0-9._-]
/// (any case), and when the list names no provider.
std::vector<std::string> ParseProviderList(const std::string& text);

/// True when the offer's provider is on the list (case-insensitive).
bool FromVmProvider(const Offer& offer, const std::vector<std::string>& vm_providers);

/// Offers split by provider: from a VM provider (kept) or not (skipped), order preserved.
struct ProviderSplit {
  std::vector<Offer> kept;
  std::vector<Offer> skipped;
};
ProviderSplit SplitByProvider(const std::vector<Offer>& offers,
                              const std::vector<std::string>& vm_providers);

/// The offers as a message lists them: "NVIDIA A100 80GB PCIe@runpod in US-KS-2 $1.19/h
/// (container)" for a known container provider, else "... (not in vm_providers)"; joined by
/// "; ".
std::string DescribeSkipped(const std::vector<Offer>& offers);

/// The image Prime Intellect documents as plain Ubuntu 22.04 with CUDA 12.
inline constexpr const char* kDefaultImage = "ubuntu_22_cuda_12";

}  // namespace gpuprov::primeintellect
