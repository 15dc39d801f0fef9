#include "candidates.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "config.h"
#include "error.h"
#include "prompt.h"
#include "text_table.h"

namespace gpuprov {
namespace {

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

/// The entries of a comma list, trimmed; empty entries and repeats refused.
std::vector<std::string> SplitList(const std::string& text, const std::string& field,
                                   const std::string& what) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item =
        Trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty()) {
      throw UsageError(field + ": \"" + text + "\" has an empty " + what,
                       "give " + what + "s separated by commas, e.g. " +
                           (what == "cloud" ? "aws,gcp,lambda" : "us-central1,us-east1"));
    }
    if (!seen.insert(item).second) {
      throw UsageError(field + ": " + what + " \"" + item + "\" is given twice",
                       "name each " + what + " once");
    }
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string PriceText(double price) {
  return price > 0 ? FormatPricePerHour(price) : std::string("-");
}

std::string GpusText(const CloudOffer& o) {
  if (o.gpu_type.empty() || o.gpu_count <= 0) return "-";
  return o.gpu_type + ":" + std::to_string(o.gpu_count);
}

}  // namespace

std::string PriceSourceText(const CloudOffer& offer) {
  if (offer.price_per_hour <= 0 || offer.price_source.empty()) return "-";
  if (offer.price_source == "table" && !offer.price_date.empty()) return "table " + offer.price_date;
  return offer.price_source;
}

CloudSelection ParseCloudList(const std::string& text, const std::string& field) {
  CloudSelection sel;
  std::vector<std::string> items = SplitList(text, field, "cloud");
  if (items.size() == 1 && items[0] == "any") {
    sel.any = true;
    return sel;
  }
  for (const auto& c : items) {
    if (c == "any") {
      throw UsageError(field + ": \"any\" stands alone (every cloud whose credentials work)",
                       "give either a list of clouds or `any`");
    }
    if (!IsValidCloudName(c)) {
      throw UsageError(field + ": \"" + c +
                           "\" is not a cloud name; cloud names may hold only lower-case letters "
                           "a-z, digits, '_' and '-'",
                       "`gpuprov drivers` lists the clouds");
    }
  }
  sel.clouds = std::move(items);
  return sel;
}

std::vector<std::string> ParseRegionList(const std::string& text, const std::string& field) {
  std::vector<std::string> items = SplitList(text, field, "region");
  if (items.size() == 1 && items[0] == "any") return {};
  if (std::find(items.begin(), items.end(), "any") != items.end()) {
    throw UsageError(field + ": \"any\" stands alone (the driver's choice of region)",
                     "give either a list of regions or `any`");
  }
  return items;
}

bool IsCandidateList(const std::string& text) {
  const std::string t = Trim(text);
  return t == "any" || t.find(',') != std::string::npos;
}

std::vector<Candidate> CandidatesFromOffers(const std::vector<CloudOffers>& asked,
                                            const std::optional<std::string>& instance_type,
                                            bool spot) {
  const auto price = [spot](const CloudOffer& o) {
    return spot ? o.spot_price_per_hour.value_or(0) : o.price_per_hour;
  };
  std::vector<Candidate> out;
  for (const auto& a : asked) {
    Candidate skipped;
    skipped.cloud = a.cloud;
    skipped.region = a.region;
    skipped.order = a.order;
    skipped.spot = spot;
    if (!a.error.empty()) {
      skipped.skipped = a.error;
      out.push_back(skipped);
      continue;
    }
    // The chosen offer per region, regions in the order the driver listed them.
    std::vector<std::string> regions;
    std::map<std::string, CloudOffer> best;
    for (const auto& o : a.offers) {
      if (instance_type && o.instance_type != *instance_type) continue;
      if (spot && !o.spot_price_per_hour) continue;
      auto it = best.find(o.region);
      if (it == best.end()) {
        regions.push_back(o.region);
        best[o.region] = o;
      } else if (price(o) > 0 && (price(it->second) <= 0 || price(o) < price(it->second))) {
        it->second = o;
      }
    }
    if (regions.empty()) {
      skipped.skipped = instance_type ? "no " + std::string(spot ? "spot " : "") +
                                            "offer of instance type " + *instance_type
                                      : std::string(spot ? "no spot offer for this request"
                                                         : "no offer for this request");
      out.push_back(skipped);
      continue;
    }
    for (const auto& r : regions) {
      Candidate c;
      c.cloud = a.cloud;
      c.offer = best[r];
      c.region = r.empty() ? a.region : r;
      c.order = a.order;
      c.spot = spot;
      out.push_back(c);
    }
  }
  return out;
}

std::vector<Candidate> RankCandidates(const std::vector<CloudOffers>& asked,
                                      const CandidateRules& rules) {
  std::vector<Candidate> out = CandidatesFromOffers(asked, rules.instance_type, rules.spot);
  // Sorted before the price skips too, so skipped rows keep the price order among themselves.
  SortCandidates(out);
  SkipAbovePrice(out, rules.max_price);
  SortCandidates(out);
  return out;
}

void SortCandidates(std::vector<Candidate>& candidates) {
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    const bool a_skip = !a.skipped.empty(), b_skip = !b.skipped.empty();
    if (a_skip != b_skip) return b_skip;
    if (a_skip) return a.order < b.order;
    const bool a_known = a.Price() > 0, b_known = b.Price() > 0;
    if (a_known != b_known) return a_known;
    if (a_known && a.Price() != b.Price()) return a.Price() < b.Price();
    return a.order < b.order;
  });
}

void SkipAbovePrice(std::vector<Candidate>& candidates, std::optional<double> max_price) {
  if (!max_price) return;
  for (auto& c : candidates) {
    if (!c.skipped.empty()) continue;
    if (std::optional<std::string> refused = MaxPriceRefusal(c.Price(), max_price)) {
      c.skipped = *refused;
    }
  }
}

std::string CandidateTable(const std::vector<Candidate>& candidates) {
  std::vector<std::vector<std::string>> rows = {
      {"#", "CLOUD", "REGION", "INSTANCE TYPE", "GPUS", "$/H", "PRICE FROM", "IN STOCK", "NOTE"}};
  size_t n = 0;
  for (const auto& c : candidates) {
    const bool tried = c.skipped.empty();
    std::string note = !c.skipped.empty() ? "skipped: " + c.skipped
                       : !c.failed.empty() ? "failed: " + c.failed
                                           : "";
    rows.push_back({tried ? std::to_string(++n) : "-", c.cloud, c.region.empty() ? "-" : c.region,
                    c.offer.instance_type.empty() ? "-" : c.offer.instance_type, GpusText(c.offer),
                    PriceText(c.Price()),
                    PriceSourceText(c.offer),
                    !c.offer.in_stock ? "-" : *c.offer.in_stock ? "yes" : "no", note});
  }
  return AlignedColumns(rows);
}

AttemptDecision DecideAfterAttempt(AttemptOutcome outcome, bool failover, bool has_next) {
  switch (outcome) {
    case AttemptOutcome::kCreated:
      return {AttemptAction::kProceed, ""};
    case AttemptOutcome::kInterrupted:
      return {AttemptAction::kStop, "interrupted"};
    case AttemptOutcome::kFailed:
      return {AttemptAction::kStop, "failed"};
    case AttemptOutcome::kBootFailed:
      return {AttemptAction::kStop, "the VM failed while booting"};
    case AttemptOutcome::kCapacity:
    case AttemptOutcome::kQuota:
    case AttemptOutcome::kBootCapacity: {
      const std::string why = outcome == AttemptOutcome::kQuota      ? "quota"
                              : outcome == AttemptOutcome::kCapacity ? "no capacity"
                                                                     : "no capacity while booting";
      // A single candidate fails as provision always did (create's own clean-up; a VM that
      // went to error is kept for a look).
      if (!failover) return {AttemptAction::kStop, why};
      if (has_next) return {AttemptAction::kNext, why};
      return {AttemptAction::kCleanUpAndStop, why + "; no candidate left"};
    }
  }
  return {AttemptAction::kStop, "failed"};
}

bool BootFailureIsCapacity(const std::string& state, const std::string& message) {
  if (state == "running") return false;
  std::string m;
  for (char ch : message) m += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const char* word : {"capacity", "not enough resources", "enough resources available",
                           "out of stock", "stock", "zone_resource_pool_exhausted",
                           "resource_pool_exhausted"}) {
    if (m.find(word) != std::string::npos) return true;
  }
  return false;
}

std::string TriedReport(const std::vector<Candidate>& candidates) {
  std::string out;
  for (const auto& c : candidates) {
    if (c.failed.empty()) continue;
    out += "  " + c.cloud + " " + (c.region.empty() ? "-" : c.region) + " " +
           c.offer.instance_type + " " + PriceText(c.Price()) + ": " + c.failed +
           "\n";
  }
  return out;
}

}  // namespace gpuprov
