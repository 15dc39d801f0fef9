// SPDX-License-Identifier: Apache-2.0
#include "instance_types.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>
#include <vector>

#include "gpu_names.h"
#include "json_util.h"
#include "text.h"

namespace gpuprov::lambda {
namespace {

// The GPU models Lambda rents (the kit's canonical names, gpu_names.h).
constexpr std::string_view kLambdaGpus[] = {"A10",  "A6000", "RTX6000", "A100",
                                            "H100", "GH200", "B200",    "V100"};

}  // namespace

std::optional<std::string> CanonicalGpu(const std::string& requested) {
  return drivers::CanonicalGpuAmong(requested, kLambdaGpus);
}

const drivers::Catalogue& TypeCatalogue() {
  static const drivers::Catalogue catalogue = [] {
    drivers::Catalogue c;
    c.cloud = "Lambda";
    // clang-format off
    c.rows = {
        // type                     GPU        n  preferred (the one ChooseInstanceType names)
        {"gpu_1x_a10",              "A10",     1, true},
        {"gpu_1x_a6000",            "A6000",   1, true},
        {"gpu_2x_a6000",            "A6000",   2, true},
        {"gpu_4x_a6000",            "A6000",   4, true},
        {"gpu_1x_rtx6000",          "RTX6000", 1, true},
        {"gpu_1x_a100",             "A100",    1, true},   // PCIe 40 GB
        {"gpu_1x_a100_sxm4",        "A100",    1, false},  // SXM4 40 GB
        {"gpu_2x_a100",             "A100",    2, true},
        {"gpu_4x_a100",             "A100",    4, true},
        {"gpu_8x_a100",             "A100",    8, true},   // 40 GB SXM4
        {"gpu_8x_a100_80gb_sxm4",   "A100",    8, false},  // 80 GB
        {"gpu_1x_h100_pcie",        "H100",    1, true},
        {"gpu_1x_h100_sxm5",        "H100",    1, false},
        {"gpu_2x_h100_sxm5",        "H100",    2, true},
        {"gpu_4x_h100_sxm5",        "H100",    4, true},
        {"gpu_8x_h100_sxm5",        "H100",    8, true},
        {"gpu_1x_gh200",            "GH200",   1, true},   // ARM64 host (Grace)
        {"gpu_1x_b200_sxm6",        "B200",    1, true},
        {"gpu_8x_b200_sxm6",        "B200",    8, true},
        {"gpu_8x_v100",             "V100",    8, true},   // legacy
    };
    // clang-format on
    c.cpu_default = {"", "", 0, false};  // none: Lambda has only GPU instances
    c.canonical_gpu = CanonicalGpu;
    c.gpu_hint = [](const std::string& requested) {
      const std::string n = drivers::Squash(requested);
      if (n == "L4" || n == "T4" || n == "A10G" || n == "L40S") {
        return std::string("Lambda has no ") + requested + " instances";
      }
      return std::string("not a GPU Lambda rents");
    };
    return c;
  }();
  return catalogue;
}

std::optional<TypeGpus> GpusOfTypeName(const std::string& type_name) {
  for (const auto& row : TypeCatalogue().rows) {
    if (row.instance_type == type_name) return TypeGpus{row.gpu_type, row.gpu_count};
  }
  // gpu_<count>x_<model>[_<variant>...]
  if (type_name.rfind("gpu_", 0) != 0) return std::nullopt;
  const size_t x = type_name.find("x_", 4);
  if (x == std::string::npos || x == 4) return std::nullopt;
  int count = 0;
  for (size_t i = 4; i < x; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(type_name[i]))) return std::nullopt;
    count = count * 10 + (type_name[i] - '0');
    if (count > 64) return std::nullopt;
  }
  const size_t model_start = x + 2;
  const size_t model_end = type_name.find('_', model_start);
  const std::string model = type_name.substr(model_start, model_end - model_start);
  std::optional<std::string> gpu = CanonicalGpu(model);
  if (!gpu || count < 1) return std::nullopt;
  return TypeGpus{*gpu, count};
}

std::string GpusText(const std::string& type_name) {
  std::optional<TypeGpus> g = GpusOfTypeName(type_name);
  return g ? g->gpu_type + ":" + std::to_string(g->gpu_count) : "";
}

LiveChoice ChooseLiveType(const Poco::JSON::Object::Ptr& types, const std::string& gpu_type,
                          int count, const std::string& region, const std::string& requested) {
  namespace json = drivers::json;
  LiveChoice out;
  // (price, not preferred, name) orders the candidates with capacity.
  std::optional<std::tuple<long long, bool, std::string, std::string>> best;
  for (const auto& name : types ? types->getNames() : std::vector<std::string>{}) {
    if (!requested.empty()) {
      if (name != requested) continue;
    } else {
      std::optional<TypeGpus> g = GpusOfTypeName(name);
      if (!g || g->gpu_type != gpu_type || g->gpu_count != count) continue;
    }
    out.candidates.push_back(name);
    Poco::JSON::Object::Ptr entry = json::Obj(types, name);
    Poco::JSON::Array::Ptr regions = json::Arr(entry, "regions_with_capacity_available");
    std::string where;
    for (size_t i = 0; regions && i < regions->size() && where.empty(); ++i) {
      const std::string r = json::Str(json::ObjAt(regions, i), "name");
      if (region.empty() || r == region) where = r;
    }
    if (where.empty()) continue;
    bool preferred = false;
    for (const auto& row : TypeCatalogue().rows) {
      if (row.instance_type == name) preferred = row.preferred;
    }
    auto key = std::make_tuple(json::Int(json::Obj(entry, "instance_type"), "price_cents_per_hour"),
                               !preferred, name, where);
    if (!best || key < *best) best = key;
  }
  if (best) {
    out.type = std::get<2>(*best);
    out.region = std::get<3>(*best);
  }
  return out;
}

}  // namespace gpuprov::lambda
