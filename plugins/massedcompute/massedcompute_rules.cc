// SPDX-License-Identifier: Apache-2.0
#include "massedcompute_rules.h"

#include <Poco/DigestEngine.h>
#include <Poco/SHA2Engine.h>

#include <algorithm>
#include <regex>

#include "driver_kit.h"
#include "text.h"

namespace gpuprov::massedcompute {
namespace {

namespace kit = gpuprov::drivers;
using namespace gpuprov::drivers::prelude;  // DriverError, json, Array, Object

constexpr const char* kKeyNamePrefix = "gpuprov ";

using gpuprov::drivers::Lower;

std::string WithoutPrefix(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0 ? s.substr(prefix.size()) : s;
}

}  // namespace

const drivers::VmNameRules kVmNameRules{
    .what = "a Massed Compute instance name",
    .max_length = 55,
    .note = "gpuprov names the instance gpuprov-<name>, its mark in place of tags"};

std::string CanonicalModel(const std::string& model) {
  std::string s;
  for (char c : kit::TrimSpace(model)) {
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (u == ' ' || u == '_' || u == '-') {
      if (!s.empty() && s.back() != '-') s += '-';
    } else {
      s += u;
    }
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  return WithoutPrefix(s, "NVIDIA-");
}

std::optional<DescribedGpus> ParseDescription(const std::string& description) {
  // The model runs up to "(<mem>GB)" or an annotation in brackets ("[spot]").
  static const std::regex head(R"(^\s*(\d+)\s*x\s+([^(\[]*)(.*)$)", std::regex::icase);
  static const std::regex memory(R"(\(\s*(\d+)\s*GB\s*\))", std::regex::icase);
  // Interconnect words after the model are not part of it ("8x H100 SXM5").
  static const std::regex interconnect(R"(\s+(SXM\d*|PCIE|NVLINK|HGX)\s*$)", std::regex::icase);
  std::smatch m;
  if (!std::regex_match(description, m, head)) return std::nullopt;
  DescribedGpus d;
  try {
    d.count = std::stoi(m[1].str());
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::string model = m[2].str();
  while (std::regex_search(model, interconnect)) {
    model = std::regex_replace(model, interconnect, "");
  }
  d.model = CanonicalModel(model);
  const std::string rest = m[3].str();
  std::smatch mem;
  if (std::regex_search(rest, mem, memory)) d.memory_gb = std::stoi(mem[1].str());
  d.spot = Lower(description).find("[spot]") != std::string::npos;
  if (d.count < 1 || d.model.empty()) return std::nullopt;
  return d;
}

bool GpuMatches(const std::string& requested, const Product& product) {
  const std::string want = CanonicalModel(requested);
  const std::string have = product.model;
  if (want.empty() || have.empty()) return false;
  auto same = [](const std::string& a, const std::string& b) {
    return a == b || WithoutPrefix(a, "RTX-") == WithoutPrefix(b, "RTX-");
  };
  if (same(want, have)) return true;
  if (product.memory_gb > 0) {
    const std::string suffix = "-" + std::to_string(product.memory_gb) + "GB";
    if (want.size() > suffix.size() &&
        want.compare(want.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return same(want.substr(0, want.size() - suffix.size()), have);
    }
  }
  return false;
}

std::vector<Product> ParseInventory(const Object::Ptr& doc) {
  Object::Ptr inv;
  try {
    inv = json::Obj(doc, "gpu_inventory");
  } catch (const DriverError&) {
  }
  if (!inv) {
    throw DriverError(GPUPROV_STATUS_FAILED,
                      "GET /gpu-inventory: the answer has no \"gpu_inventory\" object");
  }
  std::vector<Product> out;
  for (const auto& key : inv->getNames()) {
    Object::Ptr entry;
    try {
      entry = json::Obj(inv, key);
    } catch (const DriverError&) {
      continue;
    }
    if (!entry) continue;
    Object::Ptr type = json::Obj(entry, "instance_type");
    Product p;
    p.name = json::Str(type, "name");
    if (p.name.empty()) p.name = key;
    p.description = json::Str(type, "description");
    if (auto d = ParseDescription(p.description)) {
      p.model = d->model;
      p.gpu_count = d->count;
      p.memory_gb = d->memory_gb;
      p.spot = d->spot;
    }
    if (IsSpotProduct(p.name, p.description)) p.spot = true;
    p.price_per_hour = static_cast<double>(json::Int(type, "price_cents_per_hour")) / 100.0;
    p.capacity = static_cast<int>(json::Int(entry, "capacity_available"));
    Array::Ptr regions = json::Arr(entry, "regions_with_capacity_available");
    for (size_t i = 0; regions && i < regions->size(); ++i) {
      const std::string r = json::Str(json::ObjAt(regions, i), "name");
      if (!r.empty()) p.regions.push_back(r);
    }
    out.push_back(p);
  }
  std::sort(out.begin(), out.end(),
            [](const Product& a, const Product& b) { return a.name < b.name; });
  return out;
}

std::string OfferedText(const std::vector<Product>& products, bool spot) {
  std::string out;
  for (const auto& p : products) {
    if (p.spot != spot || p.model.empty()) continue;
    out += (out.empty() ? "" : ", ") + p.model + ":" + std::to_string(p.gpu_count) + " (" +
           p.name + ")";
  }
  return out.empty() ? "none" : out;
}

std::string InstanceNameFor(const std::string& vm_name) { return kInstancePrefix + vm_name; }

std::optional<std::string> VmNameOf(const std::string& instance_name) {
  const std::string prefix = kInstancePrefix;
  if (instance_name.size() <= prefix.size() || instance_name.rfind(prefix, 0) != 0) {
    return std::nullopt;
  }
  return instance_name.substr(prefix.size());
}

std::string KeyName(const std::string& public_key_line) {
  const kit::SshPublicKey key = kit::ParseSshPublicKey(public_key_line);
  Poco::SHA2Engine sha(Poco::SHA2Engine::SHA_256);
  sha.update(kit::DecodedBlob(key));
  return kKeyNamePrefix + Poco::DigestEngine::digestToHex(sha.digest()).substr(0, 16);
}

bool IsGpuprovKeyName(const std::string& name) {
  static const std::regex re("^gpuprov [0-9a-f]{16}$");
  return std::regex_match(name, re);
}

bool IsOffered(const Product& product) { return product.price_per_hour > 0; }

bool IsSpotProduct(const std::string& name, const std::string& description) {
  const std::string suffix = "_spot";
  const std::string n = Lower(kit::TrimSpace(name));
  return (n.size() > suffix.size() &&
          n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) ||
         Lower(description).find("[spot]") != std::string::npos;
}

const Product* SpotTwin(const std::vector<Product>& products, const Product& on_demand) {
  const Product* same_gpus = nullptr;
  for (const auto& p : products) {
    if (!p.spot || !IsOffered(p)) continue;
    if (p.name == on_demand.name + "_spot") return &p;
    if (!same_gpus && !p.model.empty() && p.model == on_demand.model &&
        p.gpu_count == on_demand.gpu_count && p.memory_gb == on_demand.memory_gb) {
      same_gpus = &p;
    }
  }
  return same_gpus;
}

bool HasCapacityIn(const Product& product, const std::string& region) {
  if (product.capacity <= 0 || product.regions.empty()) return false;
  return region.empty() ||
         std::find(product.regions.begin(), product.regions.end(), region) != product.regions.end();
}

VmState StateOf(const std::string& raw, std::optional<bool> os_booted, bool has_ip) {
  const std::string s = Lower(kit::TrimSpace(raw));
  if (s == "rented" || s == "running" || s == "active") {
    if (os_booted && !*os_booted) return {"pending", s + ", the OS is booting (os_booted 0)"};
    if (!has_ip) return {"pending", s + ", waiting for its IP"};
    return {"running", ""};
  }
  if (s == "stopping" || s == "stopped") return {"stopped", s};
  if (s == "terminating" || s == "deleting" || s == "terminated" || s == "deleted") {
    return {"terminated", s};
  }
  if (s == "failed" || s == "error") return {"error", "Massed Compute status " + s};
  return {"pending", s.empty() ? "no status yet" : s};
}

VmState SpotStateOf(const std::string& raw, std::optional<bool> os_booted, bool has_ip,
                    const std::string& product_name) {
  const std::string s = Lower(kit::TrimSpace(raw));
  // terminating/deleting/stopping: someone asked for it (gpuprov's own delete among them).
  const bool ended = s == "terminated" || s == "deleted" || s == "stopped" || s == "preempted" ||
                     s == "reclaimed" || s == "interrupted";
  if (ended) {
    return {"preempted", "Massed Compute ended the spot instance (status " + s + ", product " +
                             product_name + ")"};
  }
  return StateOf(raw, os_booted, has_ip);
}

}  // namespace gpuprov::massedcompute
