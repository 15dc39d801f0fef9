// SPDX-License-Identifier: Apache-2.0
//
// Picking an instance type from a cloud's catalogue: a GPU request, or an `instance_type`,
// or the CPU default, with one message when nothing matches that lists what the cloud does
// offer. The cloud keeps its table as data (its own rows, with prices, images, ...) and gives
// the kit one CatalogueRow per row, in the same order, so a choice's `index` finds its own row.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "driver_request.h"

namespace gpuprov::drivers {

/// One instance type and its GPUs (gpu_count 0: none).
struct CatalogueRow {
  std::string instance_type;  ///< "g6.xlarge", "g2-standard-4", "gpu-h100x1-80gb"
  std::string gpu_type;       ///< gpuprov's canonical GPU name ("L4", "H100"); "" for none
  int gpu_count = 0;
  /// The row picked for gpu_type:gpu_count (several rows may have the same GPUs, e.g. larger
  /// CPU sizes; the preferred one is marked, else the first is taken).
  bool preferred = false;
};

struct Catalogue {
  std::string cloud;  ///< how messages name the cloud: "AWS", "Compute Engine", "DigitalOcean"
  std::string type_word = "instance type";  ///< "machine type", "size": in "X does not have"
  std::vector<CatalogueRow> rows;           ///< every known type, GPU rows included
  CatalogueRow cpu_default;                 ///< the type of a VM without a GPU
  /// A requested GPU name -> the canonical name of the rows (nullopt: the cloud has no such
  /// GPU). Default: upper case.
  std::function<std::optional<std::string>(const std::string&)> canonical_gpu;
  /// A sentence added to "no such GPU" messages for a requested name (e.g. "AWS's A10 GPU
  /// is called A10G"), or "".
  std::function<std::string(const std::string&)> gpu_hint;
};

/// What ChooseInstanceType picked. `index` is the row's position in Catalogue::rows, or
/// nullopt for the CPU default and for an instance_type the table does not know (passed to the
/// cloud as given: the cloud decides).
struct CatalogueChoice {
  CatalogueRow row;
  std::optional<size_t> index;
  bool cpu_default = false;
};

/// The canonical name of a requested GPU type, or nullopt.
std::optional<std::string> CanonicalGpu(const Catalogue& catalogue, const std::string& gpu_type);

/// The row for gpu_type:count (preferred row first), or nullopt.
std::optional<size_t> FindGpuRow(const Catalogue& catalogue, const std::string& gpu_type,
                                 int count);

/// The cloud's own entry (of `table`, in the catalogue's row order) for gpu_type:count.
template <class Entry>
std::optional<Entry> EntryForGpu(const Catalogue& catalogue, const std::vector<Entry>& table,
                                 const std::string& gpu_type, int count) {
  const std::optional<size_t> row = FindGpuRow(catalogue, gpu_type, count);
  if (!row || *row >= table.size()) return std::nullopt;
  return table[*row];
}

/// The row of an instance type name, or nullopt.
std::optional<size_t> FindTypeRow(const Catalogue& catalogue, const std::string& instance_type);

/// "<cloud> does not offer L4:3; it offers L4 as L4:1 (g6.xlarge), L4:4 (...)" when the GPU is
/// known in other counts, else "<cloud> does not offer MI300X:1 (<hint>); GPUs it offers:
/// H100 x1/x8, L4 x1/x4".
std::string NotOfferedMessage(const Catalogue& catalogue, const std::string& gpu_type, int count);

/// The type for a request:
/// - with a GPU: its row (DriverError INVALID_INPUT with NotOfferedMessage when none); an
///   `instance_type` given too must be a row with the same GPUs, else INVALID_INPUT
///   "instance type X does not have L4:1 (that is g6.xlarge)";
/// - without a GPU, an `instance_type`: its row when known, else that name as given;
/// - neither: the CPU default.
CatalogueChoice ChooseInstanceType(const Catalogue& catalogue, const std::optional<GpuRequest>& gpu,
                                   const std::string& instance_type);

/// "L4:1" for a row with GPUs, "" otherwise.
std::string GpusOf(const CatalogueRow& row);

}  // namespace gpuprov::drivers
