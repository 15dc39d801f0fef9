#include "offer_cache.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "error.h"
#include "file_util.h"
#include "paths.h"

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

using Poco::JSON::Array;
using Poco::JSON::Object;

/// The offers cache file's layout; a file of another version is ignored.
constexpr int kOfferAnswerFileVersion = 1;

std::filesystem::path AnswerFile(const std::filesystem::path& dir, const std::string& cloud) {
  return dir / "offers" / (cloud + ".json");
}

std::string StrOf(const Object::Ptr& o, const std::string& key) {
  return o->has(key) && o->get(key).isString() ? o->getValue<std::string>(key) : std::string();
}

Object::Ptr OfferObject(const CloudOffer& offer) {
  Object::Ptr o = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  o->set("instance_type", offer.instance_type);
  o->set("gpu_type", offer.gpu_type);
  o->set("gpu_count", offer.gpu_count);
  o->set("region", offer.region);
  o->set("price_per_hour", offer.price_per_hour);
  o->set("price_source", offer.price_source);
  o->set("price_date", offer.price_date);
  if (offer.in_stock) o->set("in_stock", *offer.in_stock);
  if (offer.spot_price_per_hour) o->set("spot_price_per_hour", *offer.spot_price_per_hour);
  if (offer.gpu_memory_gb) o->set("gpu_memory_gb", *offer.gpu_memory_gb);
  o->set("powered_off_cost", offer.powered_off_cost);
  return o;
}

/// Throws (Poco or std) on a field of the wrong type: the caller ignores the whole file.
CloudOffer OfferOf(const Object::Ptr& o) {
  CloudOffer offer;
  offer.instance_type = StrOf(o, "instance_type");
  offer.gpu_type = StrOf(o, "gpu_type");
  offer.gpu_count = o->getValue<int>("gpu_count");
  offer.region = StrOf(o, "region");
  offer.price_per_hour = o->getValue<double>("price_per_hour");
  offer.price_source = StrOf(o, "price_source");
  offer.price_date = StrOf(o, "price_date");
  if (o->has("in_stock")) offer.in_stock = o->getValue<bool>("in_stock");
  if (o->has("spot_price_per_hour")) {
    offer.spot_price_per_hour = o->getValue<double>("spot_price_per_hour");
  }
  if (o->has("gpu_memory_gb")) offer.gpu_memory_gb = o->getValue<int>("gpu_memory_gb");
  offer.powered_off_cost = StrOf(o, "powered_off_cost");
  return offer;
}

Object::Ptr AnswerObject(const CachedOfferAnswer& a) {
  Object::Ptr o = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  o->set("asked_at", static_cast<Poco::Int64>(a.asked_at));
  o->set("usable", a.usable);
  o->set("credentials", a.credentials);
  o->set("result", a.result);
  o->set("fix", a.fix);
  Array::Ptr regions = new Array;
  for (const auto& r : a.regions) {
    Object::Ptr ro = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    ro->set("region", r.region);
    Array::Ptr offers = new Array;
    for (const auto& offer : r.offers) offers->add(OfferObject(offer));
    ro->set("offers", offers);
    regions->add(ro);
  }
  o->set("regions", regions);
  return o;
}

CachedOfferAnswer AnswerOf(const Object::Ptr& o) {
  CachedOfferAnswer a;
  a.asked_at = static_cast<long>(o->getValue<Poco::Int64>("asked_at"));
  a.usable = o->getValue<bool>("usable");
  a.credentials = StrOf(o, "credentials");
  a.result = StrOf(o, "result");
  a.fix = StrOf(o, "fix");
  Array::Ptr regions = o->getArray("regions");
  if (regions.isNull()) throw std::runtime_error("an answer without regions");
  for (size_t i = 0; i < regions->size(); ++i) {
    Object::Ptr ro = regions->getObject(i);
    if (ro.isNull()) throw std::runtime_error("a region that is not an object");
    CachedOfferAnswer::Region r;
    r.region = StrOf(ro, "region");
    Array::Ptr offers = ro->getArray("offers");
    if (offers.isNull()) throw std::runtime_error("a region without offers");
    for (size_t j = 0; j < offers->size(); ++j) {
      Object::Ptr offer = offers->getObject(j);
      if (offer.isNull()) throw std::runtime_error("an offer that is not an object");
      r.offers.push_back(OfferOf(offer));
    }
    a.regions.push_back(std::move(r));
  }
  return a;
}

/// The answers in \a file by key; throws when the file is not one this version wrote.
std::map<std::string, CachedOfferAnswer> ReadAnswers(const std::filesystem::path& file) {
  std::map<std::string, CachedOfferAnswer> out;
  const std::optional<std::string> text = ReadFileIfExists(file, kCacheFileKind);
  if (!text) return out;
  Poco::JSON::Parser parser;
  Object::Ptr root = parser.parse(*text).extract<Object::Ptr>();
  if (root.isNull() || !root->has("version") ||
      root->getValue<int>("version") != kOfferAnswerFileVersion) {
    throw std::runtime_error("not a version " + std::to_string(kOfferAnswerFileVersion) +
                             " offers cache");
  }
  Object::Ptr answers = root->getObject("answers");
  if (answers.isNull()) throw std::runtime_error("no answers object");
  for (const auto& key : answers->getNames()) {
    Object::Ptr a = answers->getObject(key);
    if (a.isNull()) throw std::runtime_error("answer " + key + " is not an object");
    out[key] = AnswerOf(a);
  }
  return out;
}

}  // namespace

std::string OfferQuestionKey(const std::string& gpus, const std::vector<std::string>& regions,
                             bool kubernetes) {
  std::string key = gpus + " regions=";
  for (size_t i = 0; i < regions.size(); ++i) key += (i ? "," : "") + regions[i];
  return key + (kubernetes ? " k8s" : " no-k8s");
}

std::optional<CachedOfferAnswer> ReadCachedOfferAnswer(const std::filesystem::path& cache_dir,
                                                       const std::string& cloud,
                                                       const std::string& key, long now,
                                                       long max_age_seconds,
                                                       std::string* problem) {
  const std::filesystem::path file = AnswerFile(cache_dir, cloud);
  try {
    const std::map<std::string, CachedOfferAnswer> answers = ReadAnswers(file);
    auto it = answers.find(key);
    if (it == answers.end()) return std::nullopt;
    const long age = now - it->second.asked_at;
    if (age < 0 || age > max_age_seconds) return std::nullopt;
    return it->second;
  } catch (const Poco::Exception& e) {
    if (problem) *problem = file.string() + " is ignored: " + e.displayText();
  } catch (const std::exception& e) {
    if (problem) *problem = file.string() + " is ignored: " + e.what();
  }
  return std::nullopt;
}

void WriteCachedOfferAnswer(const std::filesystem::path& cache_dir, const std::string& cloud,
                            const std::string& key, const CachedOfferAnswer& answer) {
  const std::filesystem::path file = AnswerFile(cache_dir, cloud);
  EnsureDir(file.parent_path());
  std::map<std::string, CachedOfferAnswer> answers;
  try {
    answers = ReadAnswers(file);
  } catch (const std::exception&) {
    // A file that cannot be read (Poco's exceptions are std::exceptions too) is replaced.
  }
  answers[key] = answer;
  Object::Ptr all = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  for (const auto& [k, a] : answers) {
    const long age = answer.asked_at - a.asked_at;
    if (age >= 0 && age <= kOfferAnswerMaxAgeSeconds) all->set(k, AnswerObject(a));
  }
  Object::Ptr root = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  root->set("version", kOfferAnswerFileVersion);
  root->set("answers", all);
  std::ostringstream out;
  root->stringify(out);
  WriteFileAtomic(file, out.str() + "\n", 0600);
}

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
