#include "offers_command.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>

#include "cloud.h"
#include "console.h"
#include "driver_host.h"
#include "error.h"
#include "fan_out.h"
#include "k8s_policy.h"
#include "offer_cache.h"
#include "paths.h"
#include "prompt.h"
#include "provision_options.h"
#include "text_table.h"

namespace gpuprov {
namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;

constexpr const char* kNoCredentials = "missing or rejected";

long NowSeconds() {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count());
}

/// "now", "42s ago", "3m ago".
std::string AgeText(long seconds, bool cached) {
  if (!cached) return "now";
  if (seconds < 120) return std::to_string(seconds) + "s ago";
  return std::to_string(seconds / 60) + "m ago";
}

std::string MoneyText(double price) { return price > 0 ? FormatPricePerHour(price) : "-"; }

std::optional<int> MemoryOf(const CloudOffer& offer) {
  if (offer.gpu_memory_gb) return offer.gpu_memory_gb;
  if (offer.gpu_type.empty()) return std::nullopt;
  return KnownGpuMemoryGb(offer.gpu_type);
}

const CloudOfferAnswer* AnswerOf(const std::vector<CloudOfferAnswer>& answers,
                                 const std::string& cloud) {
  for (const auto& a : answers) {
    if (a.cloud == cloud) return &a;
  }
  return nullptr;
}

bool WithoutCredentials(const CloudOfferAnswer& a) {
  return a.error.empty() && !a.check.usable && a.check.credentials == kNoCredentials;
}

/// The drivers `offers` asks: the ones named, or (any) every cloud driver `check` checks, the
/// test cloud not counted, as provision's `--cloud any` does.
std::vector<DriverInfo> CloudsToAsk(const DriverHost& host, const CloudSelection& selection,
                                    std::vector<CloudOfferAnswer>& missing) {
  std::vector<DriverInfo> out;
  if (selection.any) {
    for (const DriverInfo& info : host.ListAll()) {
      if (!info.shadowed_by.empty() || info.name == kTestCloud) continue;
      if (!info.ok() || info.has(GPUPROV_CAP_VM_LIFECYCLE)) out.push_back(info);
    }
    return out;
  }
  for (const std::string& name : selection.clouds) {
    try {
      out.push_back(host.Find(name));
    } catch (const Error& e) {
      CloudOfferAnswer a;
      a.cloud = name;
      a.error = e.what();
      missing.push_back(a);
    }
  }
  return out;
}

/// What one cloud's thread fills; it owns everything it touches (fan_out.h).
struct CloudWork {
  std::string cloud;
  std::optional<LoadedDriver> driver;
  std::shared_ptr<const Config> config;
  std::optional<GpuRequest> gpus;
  std::vector<std::string> regions;  // {""} for the driver's choice
  bool kubernetes = false;
  CloudCheckReport check;
  std::vector<std::vector<CloudOffer>> offers;  // per region
  std::vector<std::string> offer_errors;        // per region
  std::string error;

  void Run(const std::atomic<bool>& stop) {
    std::unique_ptr<Cloud> opened;
    try {
      check = CheckReportOf(cloud, [&] {
        opened = Cloud::Open(*driver, *config, [&stop] { return stop.load(); });
        return opened->Check();
      });
      if (!check.usable) return;
      for (const std::string& region : regions) {
        std::vector<CloudOffer> got;
        std::string failed;
        try {
          got = opened->Offers(gpus, region, kubernetes);
        } catch (const std::exception& e) {
          failed = std::string("offers failed: ") + e.what();
        }
        offers.push_back(std::move(got));
        offer_errors.push_back(std::move(failed));
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
};

Object::Ptr RowObject(const Candidate& c, const CloudOfferAnswer* answer) {
  Object::Ptr o = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  const CloudOffer& offer = c.offer;
  o->set("cloud", c.cloud);
  o->set("region", c.region);
  o->set("instance_type", offer.instance_type);
  o->set("gpu_type", offer.gpu_type.empty() ? Poco::Dynamic::Var() : Poco::Dynamic::Var(offer.gpu_type));
  o->set("gpu_count", offer.gpu_count);
  const std::optional<int> memory = MemoryOf(offer);
  o->set("gpu_memory_gb", memory ? Poco::Dynamic::Var(*memory) : Poco::Dynamic::Var());
  o->set("price_per_hour",
         offer.price_per_hour > 0 ? Poco::Dynamic::Var(offer.price_per_hour) : Poco::Dynamic::Var());
  o->set("spot_price_per_hour", offer.spot_price_per_hour
                                    ? Poco::Dynamic::Var(*offer.spot_price_per_hour)
                                    : Poco::Dynamic::Var());
  o->set("in_stock", offer.in_stock ? Poco::Dynamic::Var(*offer.in_stock) : Poco::Dynamic::Var());
  o->set("price_source", offer.price_source);
  o->set("price_date", offer.price_date);
  o->set("age_seconds", answer ? answer->age_seconds : 0L);
  o->set("cached", answer ? answer->cached : false);
  return o;
}

void PrintStructured(const AppContext& app, const std::vector<Candidate>& rows,
                     const std::vector<CloudOfferAnswer>& answers) {
  Object::Ptr root = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  Array::Ptr offers = new Array, skipped = new Array, no_credentials = new Array;
  for (const auto& c : rows) {
    if (c.skipped.empty()) {
      offers->add(RowObject(c, AnswerOf(answers, c.cloud)));
    } else {
      Object::Ptr s = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
      s->set("cloud", c.cloud);
      s->set("region", c.region);
      s->set("reason", c.skipped);
      skipped->add(s);
    }
  }
  for (const auto& a : answers) {
    if (!WithoutCredentials(a)) continue;
    Object::Ptr n = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    n->set("cloud", a.cloud);
    n->set("credentials", a.check.credentials);
    n->set("result", a.check.result);
    n->set("fix", a.check.fix);
    no_credentials->add(n);
  }
  root->set("offers", offers);
  root->set("skipped", skipped);
  root->set("without_credentials", no_credentials);
  app.Print(root);
}

}  // namespace

std::optional<int> KnownGpuMemoryGb(const std::string& gpu_type) {
  // The vendors' data sheets: https://www.nvidia.com/en-us/data-center/ (H100, H200, L4, L40S,
  // T4, A10), https://www.nvidia.com/en-us/design-visualization/ (RTX A6000, RTX 6000 Ada, RTX
  // 4000 Ada, Quadro RTX 6000, RTX PRO 6000 Blackwell), https://aws.amazon.com/ec2/instance-types/g5/
  // (A10G), https://www.amd.com/en/products/accelerators/instinct/mi300.html (MI300X, MI325X).
  // Left out, sold in more than one size: A100 (40/80), V100 (16/32), GH200 (96/144), B200.
  static const std::map<std::string, int> kMemoryGb = {
      {"A10", 24},        {"A10G", 24},       {"A6000", 48},  {"H100", 80},
      {"H200", 141},      {"L4", 24},         {"L40S", 48},   {"MI300X", 192},
      {"MI325X", 256},    {"RTX4000ADA", 20}, {"RTX6000", 24}, {"RTX6000ADA", 48},
      {"RTXPRO6000", 96}, {"T4", 16},
  };
  auto it = kMemoryGb.find(gpu_type);
  if (it == kMemoryGb.end()) return std::nullopt;
  return it->second;
}

std::vector<Candidate> OfferRows(const std::vector<CloudOfferAnswer>& answers,
                                 const std::vector<std::string>& regions,
                                 const CandidateRules& rules) {
  const std::vector<std::string> asked_regions =
      regions.empty() ? std::vector<std::string>{""} : regions;
  std::vector<CloudOffers> asked;
  for (const auto& a : answers) {
    if (WithoutCredentials(a)) continue;
    const std::string error = !a.error.empty()  ? a.error
                              : !a.check.usable ? "check failed: " + a.check.result
                                                : std::string();
    for (size_t j = 0; j < asked_regions.size(); ++j) {
      CloudOffers o;
      o.cloud = a.cloud;
      o.region = asked_regions[j];
      o.order = a.index * asked_regions.size() + j;
      if (!error.empty()) {
        o.error = error;
      } else if (j < a.offers.size()) {
        o.offers = a.offers[j].offers;
        o.error = a.offers[j].error;
      }
      asked.push_back(std::move(o));
    }
  }
  return RankCandidates(asked, rules);
}

std::string OffersTable(const std::vector<Candidate>& rows,
                        const std::vector<CloudOfferAnswer>& answers) {
  std::vector<std::vector<std::string>> table = {{"GPUS", "GPU MEM", "CLOUD", "REGION",
                                                  "INSTANCE TYPE", "$/H", "SPOT $/H", "IN STOCK",
                                                  "PRICE FROM", "ASKED"}};
  std::string skipped;
  for (const auto& c : rows) {
    if (!c.skipped.empty()) {
      skipped += "  " + c.cloud + (c.region.empty() ? "" : " " + c.region) + ": " + c.skipped +
                 "\n";
      continue;
    }
    const CloudOffer& o = c.offer;
    const std::optional<int> memory = MemoryOf(o);
    const CloudOfferAnswer* answer = AnswerOf(answers, c.cloud);
    table.push_back({o.gpu_type.empty() || o.gpu_count <= 0
                         ? "-"
                         : o.gpu_type + ":" + std::to_string(o.gpu_count),
                     memory ? std::to_string(*memory) + " GB" : "-", c.cloud,
                     c.region.empty() ? "-" : c.region,
                     o.instance_type.empty() ? "-" : o.instance_type, MoneyText(o.price_per_hour),
                     MoneyText(o.spot_price_per_hour.value_or(0)),
                     !o.in_stock ? "-" : *o.in_stock ? "yes" : "no", PriceSourceText(o),
                     answer ? AgeText(answer->age_seconds, answer->cached) : "now"});
  }
  std::string out = table.size() > 1 ? AlignedColumns(table) : "no offers\n";
  if (!skipped.empty()) out += "\nnot offered:\n" + skipped;
  std::string no_credentials;
  for (const auto& a : answers) {
    if (!WithoutCredentials(a)) continue;
    // Driver messages often start with the cloud's name already.
    std::string result = a.check.result;
    if (result.rfind(a.cloud + ": ", 0) == 0) result.erase(0, a.cloud.size() + 2);
    no_credentials += "  " + a.cloud + ": " + result + "\n";
    if (!a.check.fix.empty()) no_credentials += "    fix: " + a.check.fix + "\n";
  }
  if (!no_credentials.empty()) out += "\nwithout credentials:\n" + no_credentials;
  return out;
}

int RunOffers(const AppContext& app, const OffersOptions& options) {
  Console& console = Console::Get();
  const DriverHost host = app.MakeDriverHost();
  const auto config = std::make_shared<const Config>(app.LoadUserConfig());
  const std::filesystem::path cache_dir = app.paths.home() / "cache";
  const std::vector<std::string> asked_regions =
      options.regions.empty() ? std::vector<std::string>{""} : options.regions;
  const int budget_seconds =
      config->defaults.timeouts.offers_wait_seconds.value_or(kDefaultOffersWaitSeconds);
  // provision's Kubernetes default (docs/design.md §2): on where the cloud can host it.
  Resolved<bool> kubernetes;
  kubernetes.value = config->defaults.kubernetes.value_or(true);
  if (config->defaults.kubernetes) kubernetes.source = Source::kConfig;
  const long now = NowSeconds();

  std::vector<CloudOfferAnswer> answers;
  const std::vector<DriverInfo> drivers = CloudsToAsk(host, options.clouds, answers);
  std::vector<std::shared_ptr<CloudWork>> work;  // the clouds asked now
  std::vector<size_t> work_answer;               // each one's index in answers
  std::vector<std::string> work_key;
  for (const DriverInfo& info : drivers) {
    CloudOfferAnswer a;
    a.cloud = info.name;
    if (!info.problem.empty()) {
      a.error = "the driver file is broken: " + info.problem;
      answers.push_back(a);
      continue;
    }
    const K8sDecision k8s =
        DecideKubernetes(kubernetes, info.name, info.has(GPUPROV_CAP_HOSTS_KUBERNETES));
    if (k8s.refused) {
      a.error = k8s.note;
      answers.push_back(a);
      continue;
    }
    const std::string key = OfferQuestionKey(options.gpus ? ToString(*options.gpus) : "-",
                                             options.regions, k8s.enabled);
    if (!options.refresh) {
      std::string problem;
      if (auto cached = ReadCachedOfferAnswer(cache_dir, info.name, key, now,
                                              kOfferAnswerMaxAgeSeconds, &problem)) {
        a.cached = true;
        a.age_seconds = now - cached->asked_at;
        a.check.cloud = info.name;
        a.check.usable = cached->usable;
        a.check.credentials = cached->credentials;
        a.check.result = cached->result;
        a.check.fix = cached->fix;
        for (const auto& r : cached->regions) a.offers.push_back({info.name, r.region, 0, r.offers, ""});
        answers.push_back(a);
        continue;
      }
      if (!problem.empty()) console.Debug("offers cache: " + problem);
    }
    auto w = std::make_shared<CloudWork>();
    w->cloud = info.name;
    w->config = config;
    w->gpus = options.gpus;
    w->regions = asked_regions;
    w->kubernetes = k8s.enabled;
    try {
      // Loading reads files and runs no cloud call: here, one driver after the other.
      w->driver.emplace(host.Load(info.name));
    } catch (const Error& e) {
      if (e.exit_code() == kExitInterrupted) throw;
      a.error = e.what();
      answers.push_back(a);
      continue;
    }
    answers.push_back(a);
    work.push_back(w);
    work_answer.push_back(answers.size() - 1);
    work_key.push_back(key);
  }

  if (!work.empty()) {
    console.Step("offers", "asking " + std::to_string(work.size()) + " cloud(s) for offers");
    std::vector<FanOutJob> jobs;
    for (const auto& w : work) jobs.push_back([w](const std::atomic<bool>& stop) { w->Run(stop); });
    const std::vector<bool> done =
        RunAllWithin(std::move(jobs), std::chrono::seconds(budget_seconds));
    bool cache_ready = false;
    for (size_t i = 0; i < work.size(); ++i) {
      CloudOfferAnswer& a = answers[work_answer[i]];
      if (!done[i]) {
        a.error = "no answer within " + std::to_string(budget_seconds) +
                  " s ([defaults.timeouts] offers_wait_seconds)";
        continue;
      }
      const CloudWork& w = *work[i];
      a.check = w.check;
      a.error = w.error;
      bool complete = a.error.empty();
      CachedOfferAnswer keep;
      keep.asked_at = now;
      keep.usable = w.check.usable;
      keep.credentials = w.check.credentials;
      keep.result = w.check.result;
      keep.fix = w.check.fix;
      for (size_t j = 0; j < w.offers.size(); ++j) {
        a.offers.push_back({w.cloud, w.regions[j], 0, w.offers[j], w.offer_errors[j]});
        keep.regions.push_back({w.regions[j], w.offers[j]});
        complete = complete && w.offer_errors[j].empty();
      }
      // Kept: a full answer, or credentials refused; a failure is asked again next time.
      if (!(complete && (w.check.usable || w.check.credentials == kNoCredentials))) continue;
      try {
        if (!cache_ready) EnsureDir(cache_dir);
        cache_ready = true;
        WriteCachedOfferAnswer(cache_dir, w.cloud, work_key[i], keep);
        for (const auto& offers : w.offers) RememberGpuOffers(cache_dir, w.cloud, offers);
      } catch (const Error& e) {
        console.Debug(std::string("offers cache not written: ") + e.what());
      }
    }
  }

  // The order given (any: the drivers' order), each cloud's offers numbered after it.
  std::stable_sort(answers.begin(), answers.end(), [&](const auto& x, const auto& y) {
    auto pos = [&](const std::string& c) {
      for (size_t i = 0; i < drivers.size(); ++i) {
        if (drivers[i].name == c) return i;
      }
      return drivers.size();
    };
    return pos(x.cloud) < pos(y.cloud);
  });
  for (size_t i = 0; i < answers.size(); ++i) answers[i].index = i;

  CandidateRules rules;
  rules.max_price = options.max_price;
  rules.spot = options.spot;
  const std::vector<Candidate> rows = OfferRows(answers, options.regions, rules);
  long oldest = -1;
  for (const auto& a : answers) {
    if (a.cached) oldest = std::max(oldest, a.age_seconds);
  }
  if (oldest >= 0) {
    console.Note("answers from the cache, up to " + AgeText(oldest, true) +
                 " (kept " + std::to_string(kOfferAnswerMaxAgeSeconds / 60) +
                 " minutes); --refresh asks the clouds again");
  }
  if (app.json_output) {
    PrintStructured(app, rows, answers);
  } else {
    console.Result(OffersTable(rows, answers));
  }
  return kExitOk;
}

}  // namespace gpuprov
