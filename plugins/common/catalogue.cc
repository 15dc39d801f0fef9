// SPDX-License-Identifier: Apache-2.0
#include "catalogue.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "gpuprov/sdk.hpp"
#include "text.h"

namespace gpuprov::drivers {

using gpuprov::sdk::DriverError;

std::string GpusOf(const CatalogueRow& row) {
  return row.gpu_count > 0 ? row.gpu_type + ":" + std::to_string(row.gpu_count) : "";
}

std::optional<std::string> CanonicalGpu(const Catalogue& catalogue, const std::string& gpu_type) {
  if (catalogue.canonical_gpu) return catalogue.canonical_gpu(gpu_type);
  return Upper(gpu_type);
}

std::optional<size_t> FindGpuRow(const Catalogue& catalogue, const std::string& gpu_type,
                                 int count) {
  const std::optional<std::string> want = CanonicalGpu(catalogue, gpu_type);
  if (!want) return std::nullopt;
  std::optional<size_t> first;
  for (size_t i = 0; i < catalogue.rows.size(); ++i) {
    const CatalogueRow& r = catalogue.rows[i];
    if (r.gpu_count != count || r.gpu_type != *want) continue;
    if (r.preferred) return i;
    if (!first) first = i;
  }
  return first;
}

std::optional<size_t> FindTypeRow(const Catalogue& catalogue, const std::string& instance_type) {
  for (size_t i = 0; i < catalogue.rows.size(); ++i) {
    if (catalogue.rows[i].instance_type == instance_type) return i;
  }
  return std::nullopt;
}

std::string NotOfferedMessage(const Catalogue& catalogue, const std::string& gpu_type, int count) {
  const std::optional<std::string> want = CanonicalGpu(catalogue, gpu_type);
  const std::string asked = Upper(gpu_type) + ":" + std::to_string(count);
  std::string same;                                // "L4:1 (g6.xlarge), L4:4 (g6.12xlarge)"
  std::vector<std::string> order;                  // GPU types in table order
  std::map<std::string, std::set<int>> counts;     // GPU type -> counts offered
  for (const CatalogueRow& r : catalogue.rows) {
    if (r.gpu_count == 0) continue;
    if (!counts.count(r.gpu_type)) order.push_back(r.gpu_type);
    if (!counts[r.gpu_type].insert(r.gpu_count).second) continue;
    if (!want || r.gpu_type != *want) continue;
    const std::optional<size_t> pick = FindGpuRow(catalogue, r.gpu_type, r.gpu_count);
    const CatalogueRow& shown = pick ? catalogue.rows[*pick] : r;
    same += (same.empty() ? "" : ", ") + GpusOf(shown) + " (" + shown.instance_type + ")";
  }
  const std::string head = catalogue.cloud + " does not offer " + asked;
  if (!same.empty()) return head + "; it offers " + *want + " as " + same;
  std::string offered;
  for (const std::string& type : order) {
    std::string xs;
    for (int n : counts[type]) xs += (xs.empty() ? "x" : "/x") + std::to_string(n);
    offered += (offered.empty() ? "" : ", ") + type + " " + xs;
  }
  const std::string hint = catalogue.gpu_hint ? catalogue.gpu_hint(gpu_type) : "";
  return head + (hint.empty() ? "" : " (" + hint + ")") + "; GPUs it offers: " + offered;
}

CatalogueChoice ChooseInstanceType(const Catalogue& catalogue, const std::optional<GpuRequest>& gpu,
                                   const std::string& instance_type) {
  if (gpu) {
    const std::optional<size_t> row = FindGpuRow(catalogue, gpu->type, gpu->count);
    if (!row) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        NotOfferedMessage(catalogue, gpu->type, gpu->count));
    }
    const CatalogueRow& picked = catalogue.rows[*row];
    if (instance_type.empty() || instance_type == picked.instance_type) {
      return {picked, row, false};
    }
    const std::optional<size_t> other = FindTypeRow(catalogue, instance_type);
    if (other && catalogue.rows[*other].gpu_type == picked.gpu_type &&
        catalogue.rows[*other].gpu_count == picked.gpu_count) {
      return {catalogue.rows[*other], other, false};
    }
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      catalogue.type_word + " " + instance_type + " does not have " +
                          Upper(gpu->type) + ":" + std::to_string(gpu->count) + " (that is " +
                          picked.instance_type + ")");
  }
  if (!instance_type.empty()) {
    if (const std::optional<size_t> row = FindTypeRow(catalogue, instance_type)) {
      return {catalogue.rows[*row], row, false};
    }
    if (catalogue.cpu_default.instance_type == instance_type) {
      return {catalogue.cpu_default, std::nullopt, true};
    }
    CatalogueRow as_given;
    as_given.instance_type = instance_type;
    return {as_given, std::nullopt, false};
  }
  return {catalogue.cpu_default, std::nullopt, true};
}

}  // namespace gpuprov::drivers
