// SPDX-License-Identifier: Apache-2.0
#include "emulator.h"
#include "gce_api.h"
#ifdef GPUPROV_EMULATOR_NEBIUS
#include "nebius_api.h"
#endif

#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/StreamCopier.h>
#include <Poco/ThreadPool.h>
#include <Poco/URI.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <stdexcept>
#include <unistd.h>

namespace gpuprov::emulator {

namespace {

constexpr size_t kMaxLoggedPerCloud = 20000;
constexpr const char* kListenHost = "127.0.0.1";

// The Action field of a form-encoded body (EC2's Query API), for the request log: letters and
// digits only, so nothing else of the body (no credential, no value) can reach the log.
std::string FormAction(const HttpRequest& req) {
  if (req.Header("content-type").rfind("application/x-www-form-urlencoded", 0) != 0) return "";
  size_t start = 0;
  while (start <= req.body.size()) {
    size_t end = req.body.find('&', start);
    if (end == std::string::npos) end = req.body.size();
    if (req.body.compare(start, 7, "Action=") == 0) {
      std::string action = req.body.substr(start + 7, end - start - 7);
      for (char c : action) {
        if (!std::isalnum(static_cast<unsigned char>(c))) return "";
      }
      return action;
    }
    start = end + 1;
  }
  return "";
}

HttpRequest ReadRequest(Poco::Net::HTTPServerRequest& in) {
  HttpRequest r;
  r.method = in.getMethod();
  Poco::URI uri(in.getURI());
  r.path = uri.getPath();
  try {
    for (const auto& kv : uri.getQueryParameters()) r.query.push_back(kv);
  } catch (const Poco::Exception&) {
  }
  for (const auto& [k, v] : in) r.headers[Lower(k)] = v;
  r.host = in.getHost();
  if (r.host.empty()) r.host = in.serverAddress().toString();
  if (in.hasContentLength() || in.getChunkedTransferEncoding()) {
    Poco::StreamCopier::copyToString(in.stream(), r.body);
  }
  return r;
}

void WriteResponse(const HttpResponse& r, Poco::Net::HTTPServerResponse& out) {
  out.setStatusAndReason(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(r.status));
  for (const auto& [k, v] : r.headers) out.set(k, v);
  if (!r.content_type.empty()) out.setContentType(r.content_type);
  out.setContentLength(static_cast<std::streamsize>(r.body.size()));
  std::ostream& os = out.send();
  if (!r.body.empty()) os << r.body;
}

class Handler : public Poco::Net::HTTPRequestHandler {
 public:
  Handler(Emulator* e, CloudApi* api) : e_(e), api_(api) {}
  void handleRequest(Poco::Net::HTTPServerRequest& in,
                     Poco::Net::HTTPServerResponse& out) override {
    HttpRequest req = ReadRequest(in);
    HttpResponse resp = api_ ? e_->HandleCloud(api_, req) : e_->HandleControl(req);
    WriteResponse(resp, out);
  }

 private:
  Emulator* e_;
  CloudApi* api_;  // nullptr: the control API
};

class Factory : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  Factory(Emulator* e, CloudApi* api) : e_(e), api_(api) {}
  Poco::Net::HTTPRequestHandler* createRequestHandler(
      const Poco::Net::HTTPServerRequest&) override {
    return new Handler(e_, api_);
  }

 private:
  Emulator* e_;
  CloudApi* api_;
};

HttpResponse ControlError(int status, const std::string& message) {
  JsonObject o = NewObject();
  o->set("error", message);
  return JsonResponse(status, o);
}

}  // namespace

struct Emulator::Server {
  std::string cloud;
  CloudApi* api = nullptr;
  int port = 0;
  std::unique_ptr<Poco::ThreadPool> pool;
  std::unique_ptr<Poco::Net::HTTPServer> http;
  bool grpc = false;  // a gRPC server (nebius): printed as host:port, no scheme or path
};

std::vector<std::string> Emulator::KnownClouds() {
  return {"digitalocean", "primeintellect", "aws",   "gcp",
          "lambda",       "hyperstack",     "verda", "massedcompute"
#ifdef GPUPROV_EMULATOR_NEBIUS
          ,
          "nebius"
#endif
  };
}

std::vector<std::string> Emulator::TokenEnvVars(const std::string& cloud) {
  if (cloud == "digitalocean") return {"DIGITALOCEAN_TOKEN", "DIGITALOCEAN_ACCESS_TOKEN"};
  if (cloud == "primeintellect") return {"PRIME_API_KEY"};
  // AWS: the access key id, then its secret (the EC2 API pairs them up).
  if (cloud == "aws") return {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"};
  // GCP: the service-account key file (gce_api.cc: an absent file is written by the emulator).
  if (cloud == "gcp") return {"GOOGLE_APPLICATION_CREDENTIALS"};
  if (cloud == "lambda") return {"LAMBDA_API_KEY"};
  if (cloud == "hyperstack") return {"HYPERSTACK_API_KEY"};
  // Verda: the OAuth2 client id, then its secret (the token endpoint pairs them up).
  if (cloud == "verda") return {"VERDA_CLIENT_ID", "VERDA_CLIENT_SECRET"};
  // Massed Compute: no official name; third-party tools use both
  // (plugins/massedcompute/REFERENCE.md §1).
  if (cloud == "massedcompute") return {"MASSED_API_KEY", "MASSED_COMPUTE_API_TOKEN"};
  // Nebius: a ready IAM token; service-account JWTs are checked against the key of
  // NEBIUS_CREDENTIALS_FILE (nebius_api.h) and exchanged for tokens the emulator issues.
  if (cloud == "nebius") return {"NEBIUS_IAM_TOKEN"};
  return {};
}

std::string Emulator::DefaultToken(const std::string& cloud) {
  return "emulator-" + cloud + "-token";
}

Emulator::Emulator(EmulatorOptions options) : options_(std::move(options)) {
  if (options_.clouds.empty()) options_.clouds = KnownClouds();
  for (const auto& c : options_.clouds) {
    const auto known = KnownClouds();
    if (std::find(known.begin(), known.end(), c) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw std::runtime_error("unknown cloud \"" + c + "\"; this emulator serves: " + list);
    }
  }
  if (options_.session.empty()) {
    options_.session = std::to_string(getpid()) + "-" + RandomHex(4);
  }
  if (options_.backend == "memory") {
    backend_ = MakeMemoryBackend(
        std::chrono::milliseconds(static_cast<int64_t>(options_.boot_seconds * 1000)));
  } else if (options_.backend == "docker") {
    DockerBackendOptions d;
    d.image = options_.image;
    d.session = options_.session;
    d.ssh_delay_seconds = options_.ssh_delay_seconds;
    backend_ = MakeDockerBackend(d);
  } else {
    throw std::runtime_error("unknown backend \"" + options_.backend + "\"; use memory or docker");
  }
  for (const auto& c : options_.clouds) {
    CloudOptions co;
    co.enforce_rate_limits = options_.enforce_rate_limits;
    co.api_latency_ms = options_.api_latency_ms;
    auto t = options_.tokens.find(c);
    if (t != options_.tokens.end()) {
      co.tokens = t->second;
    } else {
      for (const auto& var : TokenEnvVars(c)) {
        const char* v = std::getenv(var.c_str());
        if (v && *v) co.tokens.push_back(v);
      }
      if (co.tokens.empty()) {
        co.tokens.push_back(DefaultToken(c));
        std::string vars;
        for (const auto& var : TokenEnvVars(c)) vars += (vars.empty() ? "" : " or ") + var;
        notes_.push_back(c + ": " + vars + " is not set; accepting the token " + DefaultToken(c));
      }
    }
    if (c == "digitalocean") apis_.push_back(MakeDigitalOceanApi(backend_.get(), co));
    if (c == "primeintellect") apis_.push_back(MakePrimeIntellectApi(backend_.get(), co));
    if (c == "aws") apis_.push_back(MakeEc2Api(backend_.get(), co));
    if (c == "gcp") apis_.push_back(MakeGceApi(backend_.get(), co));
    if (c == "lambda") apis_.push_back(MakeLambdaApi(backend_.get(), co));
    if (c == "hyperstack") apis_.push_back(MakeHyperstackApi(backend_.get(), co));
    if (c == "verda") apis_.push_back(MakeVerdaApi(backend_.get(), co));
    if (c == "massedcompute") apis_.push_back(MakeMassedComputeApi(backend_.get(), co));
#ifdef GPUPROV_EMULATOR_NEBIUS
    if (c == "nebius") apis_.push_back(MakeNebiusApi(backend_.get(), co));
#endif
  }
}

Emulator::~Emulator() {
  try {
    Stop();
  } catch (...) {
  }
}

void Emulator::Start() {
  if (started_) return;
  started_ = true;
  auto start_server = [&](const std::string& name, CloudApi* api) {
    auto s = std::make_unique<Server>();
    s->cloud = name;
    s->api = api;
    int port = 0;
    if (auto it = options_.ports.find(name); it != options_.ports.end()) port = it->second;
#ifdef GPUPROV_EMULATOR_NEBIUS
    if (name == "nebius") {
      s->grpc = true;
      s->port = NebiusStartServer(api, kListenHost, port,
                                  [this](const std::string& method, int code, double ms) {
                                    LoggedRequest l;
                                    l.cloud = "nebius";
                                    l.method = "POST";  // gRPC calls are HTTP/2 POSTs
                                    l.path = method;
                                    l.status = NebiusHttpEquivalent(code);
                                    l.duration_ms = ms;
                                    l.time = Rfc3339Millis(std::chrono::system_clock::now());
                                    Log(std::move(l));
                                  });
      servers_.push_back(std::move(s));
      return;
    }
#endif
    Poco::Net::ServerSocket socket;
    try {
      socket.bind(Poco::Net::SocketAddress(kListenHost, static_cast<Poco::UInt16>(port)), true);
      socket.listen(128);
    } catch (const Poco::Exception& e) {
      throw std::runtime_error("cannot listen on " + std::string(kListenHost) + ":" +
                               std::to_string(port) + " for " + name + ": " + e.displayText());
    }
    s->port = socket.address().port();
    auto* params = new Poco::Net::HTTPServerParams;
    params->setMaxThreads(64);
    params->setMaxQueued(256);
    params->setKeepAlive(true);
    params->setMaxKeepAliveRequests(0);
    params->setKeepAliveTimeout(Poco::Timespan(10, 0));
    params->setTimeout(Poco::Timespan(60, 0));
    s->pool = std::make_unique<Poco::ThreadPool>(2, 64);
    s->http = std::make_unique<Poco::Net::HTTPServer>(new Factory(this, api), *s->pool, socket,
                                                      params);
    s->http->start();
    servers_.push_back(std::move(s));
  };
  for (const auto& api : apis_) start_server(api->name(), api.get());
  start_server("control", nullptr);
  for (const auto& api : apis_) {
    if (api->name() == "gcp") GceListening(api.get(), BaseUrl("gcp"));
  }
}

void Emulator::Stop() {
  if (stopped_) return;
  stopped_ = true;
  for (const auto& a : apis_) a->ReleaseStall();  // held requests end, so the servers can stop
  for (auto& s : servers_) {
    if (s->http) s->http->stopAll(true);
#ifdef GPUPROV_EMULATOR_NEBIUS
    if (s->grpc) NebiusStopServer(s->api);
#endif
  }
  for (auto& s : servers_) {
    if (s->pool) s->pool->joinAll();
  }
  if (backend_) backend_->RemoveAll();
}

std::vector<std::pair<std::string, std::string>> Emulator::Endpoints() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& s : servers_) {
    std::string url = std::string(kListenHost) + ":" + std::to_string(s->port);
    if (!s->grpc) url = "http://" + url + (s->api ? s->api->BasePath() : "");
    out.emplace_back(s->cloud, url);
  }
  return out;
}

std::string Emulator::BaseUrl(const std::string& cloud) const {
  for (const auto& [c, url] : Endpoints()) {
    if (c == cloud) return url;
  }
  return "";
}

std::string Emulator::ControlUrl() const { return BaseUrl("control"); }

CloudApi* Emulator::Find(const std::string& cloud) const {
  for (const auto& a : apis_) {
    if (a->name() == cloud) return a.get();
  }
  return nullptr;
}

void Emulator::Log(LoggedRequest r) {
  std::lock_guard<std::mutex> lock(log_mu_);
  auto& v = log_[r.cloud];
  if (v.size() >= kMaxLoggedPerCloud) v.erase(v.begin(), v.begin() + kMaxLoggedPerCloud / 10);
  v.push_back(std::move(r));
}

HttpResponse Emulator::HandleCloud(CloudApi* api, const HttpRequest& req) {
  const auto t0 = std::chrono::steady_clock::now();
  HttpResponse resp;
  api->DelayRequest();
  if (api->WaitWhileStalled()) {
    resp = api->Serve(req);
    api->StallIfMatched(req.method, req.path, req.body, resp.status);
  } else {
    resp = ControlError(503, "emulator: " + api->name() +
                                 " was stalled (fault stall_after); this request was held and "
                                 "not carried out");
  }
  LoggedRequest l;
  l.cloud = api->name();
  l.method = req.method;
  l.path = req.path;
  // The query never carries credentials on these APIs (they use headers).
  std::string q;
  for (const auto& [k, v] : req.query) q += (q.empty() ? "?" : "&") + k + "=" + v;
  l.path += q;
  l.action = FormAction(req);
  l.status = resp.status;
  l.duration_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                      .count();
  l.time = Rfc3339Millis(std::chrono::system_clock::now());
  Log(std::move(l));
  return resp;
}

HttpResponse Emulator::HandleControl(const HttpRequest& req) {
  const std::string path = TrimTrailingSlash(req.path);
  const std::string& m = req.method;
  JsonObject body = req.body.empty() ? NewObject() : ParseObject(req.body);
  if (!body) return ControlError(400, "the body must be a JSON object");
  std::string cloud = req.Query("cloud").value_or(GetString(body, "cloud").value_or(""));
  std::vector<CloudApi*> targets;
  if (cloud.empty() || cloud == "*" || cloud == "all") {
    for (const auto& a : apis_) targets.push_back(a.get());
    cloud.clear();
  } else if (CloudApi* a = Find(cloud)) {
    targets.push_back(a);
  } else {
    return ControlError(404, "no cloud \"" + cloud + "\" in this emulator");
  }

  if (path == "/health" && m == "GET") {
    JsonObject o = NewObject();
    o->set("ok", true);
    o->set("backend", backend_->Name());
    JsonArray clouds = NewArray();
    for (const auto& a : apis_) clouds->add(a->name());
    o->set("clouds", clouds);
    return JsonResponse(200, o);
  }
  if (path == "/faults") {
    if (m == "POST") {
      if (cloud.empty() && !GetString(body, "cloud")) {
        return ControlError(400, "\"cloud\" is required (or \"*\" for every cloud)");
      }
      std::string error;
      std::optional<Fault> f = FaultBook::Parse(body, &error);
      if (!f) return ControlError(400, error);
      for (CloudApi* a : targets) a->faults().Add(*f);
      JsonObject o = NewObject();
      o->set("ok", true);
      o->set("fault", f->ToJson());
      return JsonResponse(200, o);
    }
    if (m == "GET") {
      JsonObject o = NewObject();
      for (CloudApi* a : targets) o->set(a->name(), a->faults().ToJson());
      return JsonResponse(200, o);
    }
    if (m == "DELETE") {
      for (CloudApi* a : targets) {
        a->faults().Clear();
        a->ReleaseStall();
      }
      return EmptyResponse(204);
    }
  }
  if (path == "/preempt" && m == "POST") {
    // The cloud takes the named instance back, as it does a spot VM; each cloud's API then
    // reports it as its reference says (tests/emulators/README.md, "Preemption").
    const std::string name = GetString(body, "name").value_or("");
    if (cloud.empty() || name.empty()) {
      return ControlError(400, "\"cloud\" and \"name\" are required");
    }
    if (!targets.front()->Preempt(name)) {
      return ControlError(404, "no live instance \"" + name + "\" on " + cloud);
    }
    JsonObject o = NewObject();
    o->set("ok", true);
    return JsonResponse(200, o);
  }
  if (path == "/stalled") {
    if (m == "GET") {
      if (!cloud.empty()) return JsonResponse(200, targets.front()->StallState());
      JsonObject o = NewObject();
      for (CloudApi* a : targets) o->set(a->name(), a->StallState());
      return JsonResponse(200, o);
    }
    if (m == "DELETE") {
      for (CloudApi* a : targets) a->ReleaseStall();
      return EmptyResponse(204);
    }
  }
  if (path == "/counts" && m == "GET") {
    JsonObject total = NewObject();
    int64_t instances = 0, firewalls = 0, keys = 0, live = 0;
    std::map<std::string, int64_t> extra;  // counts only some clouds keep (rulesets, ...)
    JsonObject per = NewObject();
    for (CloudApi* a : targets) {
      JsonObject c = a->Counts();
      c->set("delayed_requests", a->delayed_requests());
      c->set("api_latency_ms", a->api_latency_ms());
      instances += c->getValue<int64_t>("instances");
      firewalls += c->getValue<int64_t>("firewalls");
      keys += c->getValue<int64_t>("ssh_keys");
      live += c->getValue<int64_t>("backend_instances");
      for (const auto& [k, v] : *c) {
        if (k != "instances" && k != "firewalls" && k != "ssh_keys" &&
            k != "backend_instances" && v.isInteger()) {
          extra[k] += v.convert<int64_t>();
        }
      }
      per->set(a->name(), c);
    }
    total->set("instances", instances);
    total->set("firewalls", firewalls);
    total->set("ssh_keys", keys);
    total->set("backend_instances", live);
    for (const auto& [k, n] : extra) total->set(k, n);
    if (cloud.empty()) total->set("clouds", per);
    return JsonResponse(200, total);
  }
  if (path == "/requests") {
    if (m == "GET") {
      JsonArray arr = NewArray();
      std::lock_guard<std::mutex> lock(log_mu_);
      for (CloudApi* a : targets) {
        for (const auto& l : log_[a->name()]) {
          JsonObject o = NewObject();
          o->set("cloud", l.cloud);
          o->set("method", l.method);
          o->set("path", l.path);
          if (!l.action.empty()) o->set("action", l.action);
          o->set("status", l.status);
          o->set("duration_ms", l.duration_ms);
          o->set("time", l.time);
          arr->add(o);
        }
      }
      JsonObject o = NewObject();
      o->set("requests", arr);
      return JsonResponse(200, o);
    }
    if (m == "DELETE") {
      std::lock_guard<std::mutex> lock(log_mu_);
      for (CloudApi* a : targets) log_[a->name()].clear();
      return EmptyResponse(204);
    }
  }
  if (path == "/instances" && m == "GET") {
    JsonArray arr = NewArray();
    for (CloudApi* a : targets) {
      JsonArray rows = a->Instances();
      for (size_t i = 0; i < rows->size(); ++i) {
        JsonObject row = rows->getObject(static_cast<unsigned>(i));
        row->set("cloud", a->name());
        arr->add(row);
      }
    }
    JsonObject o = NewObject();
    o->set("instances", arr);
    return JsonResponse(200, o);
  }
  if (path == "/reset" && m == "POST") {
    for (CloudApi* a : targets) {
      a->ReleaseStall();
      a->Reset();
      a->ResetDelayedCount();
    }
    {
      std::lock_guard<std::mutex> lock(log_mu_);
      for (CloudApi* a : targets) log_[a->name()].clear();
    }
    JsonObject o = NewObject();
    o->set("ok", true);
    return JsonResponse(200, o);
  }
  if (path == "/settings" && m == "POST") {
    for (CloudApi* a : targets) {
      std::string e = a->Configure(body);
      if (!e.empty()) return ControlError(400, e);
    }
    JsonObject o = NewObject();
    o->set("ok", true);
    return JsonResponse(200, o);
  }
  return ControlError(404, "no control endpoint " + m + " " + path +
                               " (see tests/emulators/README.md)");
}

}  // namespace gpuprov::emulator
