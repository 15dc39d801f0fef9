#include "offer_cache.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "file_util.h"

namespace gpuprov {
namespace {

constexpr std::string_view kPrefix = "gpus-";
constexpr std::string_view kSuffix = ".txt";

std::filesystem::path CacheFile(const std::filesystem::path& dir, const std::string& cloud) {
  return dir / (std::string(kPrefix) + cloud + std::string(kSuffix));
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::vector<std::string> ReadLines(const std::filesystem::path& file) {
  try {
    if (auto text = ReadFileIfExists(file, kCacheFileKind)) return Lines(*text);
  } catch (const std::exception&) {
  }
  return {};
}

}  // namespace

void RememberGpuOffers(const std::filesystem::path& cache_dir, const std::string& cloud,
                       const std::vector<CloudOffer>& offers) {
  std::vector<std::string> fresh;
  for (const auto& o : offers) {
    if (o.gpu_type.empty() || o.gpu_count <= 0) continue;
    fresh.push_back(o.gpu_type + ":" + std::to_string(o.gpu_count));
  }
  if (fresh.empty()) return;
  const std::filesystem::path file = CacheFile(cache_dir, cloud);
  // Newest first, then the older lines not seen again, cut to the limit.
  std::vector<std::string> kept;
  std::set<std::string> seen;
  for (const auto& list : {fresh, ReadLines(file)}) {
    for (const auto& t : list) {
      if (kept.size() < kMaxCachedGpuTypes && seen.insert(t).second) kept.push_back(t);
    }
  }
  std::string text;
  for (const auto& t : kept) text += t + "\n";
  WriteFileAtomic(file, text, 0600);
}

std::vector<std::string> RememberedGpuTypes(const std::filesystem::path& cache_dir,
                                            const std::string& cloud) {
  std::set<std::string> all;
  if (!cloud.empty()) {
    for (auto& t : ReadLines(CacheFile(cache_dir, cloud))) all.insert(std::move(t));
  } else {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(cache_dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.size() > kPrefix.size() + kSuffix.size() && name.rfind(kPrefix, 0) == 0 &&
          name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0) {
        for (auto& t : ReadLines(entry.path())) all.insert(std::move(t));
      }
    }
  }
  return {all.begin(), all.end()};
}

}  // namespace gpuprov
