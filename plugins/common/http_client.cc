// SPDX-License-Identifier: Apache-2.0
#include "http_client.h"

#include <Poco/Exception.h>
#include <Poco/Net/Context.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/HTTPSClientSession.h>
#include <Poco/Net/IPAddress.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/SSLException.h>
#include <Poco/Net/SSLManager.h>
#include <Poco/StreamCopier.h>
#include <Poco/Timespan.h>
#include <Poco/URI.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "text.h"
#include "wait.h"

namespace gpuprov::drivers {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr size_t kMaxResponseBytes = 64u << 20;

// One client context for the process: peer and host-name verification on, system CA store.
Poco::Net::Context::Ptr ClientContext() {
  static std::once_flag once;
  static Poco::Net::Context::Ptr context;
  std::call_once(once, [] {
    Poco::Net::initializeSSL();
    context = new Poco::Net::Context(Poco::Net::Context::TLS_CLIENT_USE, "",
                                     Poco::Net::Context::VERIFY_RELAXED, 9,
                                     /*loadDefaultCAs=*/true);
    context->requireMinimumProtocol(Poco::Net::Context::PROTO_TLSV1_2);
    context->enableExtendedCertificateVerification(true);  // host name must match
  });
  return context;
}

// A client context that trusts only the CA certificates in `ca_file` (AWS_CA_BUNDLE), one per
// file for the process.
Poco::Net::Context::Ptr ClientContextFor(const std::string& ca_file) {
  if (ca_file.empty()) return ClientContext();
  static std::mutex mu;
  static std::map<std::string, Poco::Net::Context::Ptr> contexts;
  ClientContext();  // initializes SSL once
  std::lock_guard<std::mutex> lock(mu);
  auto it = contexts.find(ca_file);
  if (it != contexts.end()) return it->second;
  Poco::Net::Context::Ptr context = new Poco::Net::Context(
      Poco::Net::Context::TLS_CLIENT_USE, "", "", ca_file, Poco::Net::Context::VERIFY_RELAXED, 9,
      /*loadDefaultCAs=*/false);
  context->requireMinimumProtocol(Poco::Net::Context::PROTO_TLSV1_2);
  context->enableExtendedCertificateVerification(true);
  contexts[ca_file] = context;
  return context;
}

bool IsTlsVerificationFailure(const Poco::Exception& e) {
  if (dynamic_cast<const Poco::Net::CertificateValidationException*>(&e) != nullptr) return true;
  if (dynamic_cast<const Poco::Net::SSLContextException*>(&e) != nullptr) return true;
  const std::string text = Lower(e.displayText());
  return text.find("certificate verify failed") != std::string::npos ||
         text.find("host name verification") != std::string::npos ||
         text.find("wrong version number") != std::string::npos;
}

// The path part of a request line for logs: never the query's values that may be long; the
// whole path+query is fine (no secrets travel in URLs here), but cap the length.
std::string ForLog(const std::string& path_and_query) {
  return path_and_query.size() > 200 ? path_and_query.substr(0, 200) + "..." : path_and_query;
}

// Seconds until a "RateLimit-Reset"/"X-RateLimit-Reset" Unix time, when it is in the future.
std::optional<milliseconds> RateLimitResetDelay(const HttpHeaders& headers) {
  for (const char* name : {"RateLimit-Reset", "X-RateLimit-Reset"}) {
    auto it = headers.find(name);
    if (it == headers.end()) continue;
    try {
      long long reset = std::stoll(it->second);
      long long now = static_cast<long long>(std::time(nullptr));
      // Small numbers are delta-seconds (some APIs), large ones Unix times.
      long long delta = reset > 1'000'000'000LL ? reset - now : reset;
      return milliseconds(std::max(0LL, delta) * 1000);
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

}  // namespace

bool HeaderLess::operator()(const std::string& a, const std::string& b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) <
           std::tolower(static_cast<unsigned char>(y));
  });
}

bool IsLoopbackHost(const std::string& host_in) {
  std::string host = Lower(host_in);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost" || host == "localhost.") return true;
  Poco::Net::IPAddress ip;
  if (!Poco::Net::IPAddress::tryParse(host, ip)) return false;
  if (ip.family() == Poco::Net::IPAddress::IPv4) {
    // 127.0.0.0/8; tryParse accepts only dotted quads here.
    return host.rfind("127.", 0) == 0;
  }
  return ip.isLoopback();  // ::1 (not IPv4-mapped addresses)
}

bool IsLinkLocalCredentialHost(const std::string& host_in) {
  std::string host = Lower(host_in);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "169.254.169.254" || host == "169.254.170.2" || host == "169.254.170.23") {
    return true;
  }
  Poco::Net::IPAddress ip, imds6, ecs6;
  if (!Poco::Net::IPAddress::tryParse(host, ip) || ip.family() != Poco::Net::IPAddress::IPv6) {
    return false;
  }
  Poco::Net::IPAddress::tryParse("fd00:ec2::254", imds6);
  Poco::Net::IPAddress::tryParse("fd00:ec2::23", ecs6);
  return ip == imds6 || ip == ecs6;
}

bool NoProxyMatches(const std::string& no_proxy, const std::string& host_in) {
  std::string host = Lower(host_in);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::stringstream list(no_proxy);
  std::string entry;
  while (std::getline(list, entry, ',')) {
    entry = Lower(entry);
    entry.erase(0, entry.find_first_not_of(" \t"));
    entry.erase(entry.find_last_not_of(" \t") + 1);
    if (entry.empty()) continue;
    if (entry == "*") return true;
    if (entry.size() >= 2 && entry.front() == '[') {  // [::1]:port
      const size_t close = entry.find(']');
      entry = close == std::string::npos ? entry : entry.substr(1, close - 1);
    } else if (std::count(entry.begin(), entry.end(), ':') == 1) {
      entry = entry.substr(0, entry.find(':'));  // host:port: the port is not compared
    }
    if (!entry.empty() && entry.front() == '.') entry.erase(0, 1);
    if (host == entry) return true;
    if (host.size() > entry.size() &&
        host.compare(host.size() - entry.size(), entry.size(), entry) == 0 &&
        host[host.size() - entry.size() - 1] == '.') {
      return true;
    }
  }
  return false;
}

EnvReader ProcessEnvReader() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
}

std::optional<ProxySetting> ProxyFor(const ParsedUrl& url, const EnvReader& env) {
  if (IsLinkLocalCredentialHost(url.host)) return std::nullopt;
  auto first = [&](std::initializer_list<const char*> names)
      -> std::optional<std::pair<std::string, std::string>> {
    for (const char* n : names) {
      if (auto v = env(n)) return std::make_pair(std::string(n), *v);
    }
    return std::nullopt;
  };
  const auto chosen = url.scheme == "https" ? first({"https_proxy", "HTTPS_PROXY"})
                                            : first({"http_proxy", "HTTP_PROXY"});
  if (!chosen) return std::nullopt;
  if (auto no_proxy = first({"no_proxy", "NO_PROXY"})) {
    if (NoProxyMatches(no_proxy->second, url.host)) return std::nullopt;
  }
  const std::string& var = chosen->first;
  std::string value = chosen->second;
  if (value.find("://") == std::string::npos) value = "http://" + value;  // curl's default
  auto bad = [&](const std::string& why) {
    return HttpError(HttpError::Kind::kInvalidUrl,
                     "$" + var + ": " + why + " (expected http://[user:password@]host:port)");
  };
  Poco::URI uri;
  try {
    uri = Poco::URI(value);
  } catch (const Poco::Exception&) {
    throw bad("not a URL");
  }
  if (Lower(uri.getScheme()) != "http") {
    throw bad("only http:// proxies are supported (https:// targets still use TLS end to end "
              "through the proxy's CONNECT tunnel)");
  }
  if (uri.getHost().empty()) throw bad("the proxy URL has no host");
  ProxySetting p;
  p.host = uri.getHost();
  p.port = uri.getPort();
  p.origin = "$" + var;
  const std::string info = uri.getUserInfo();
  if (!info.empty()) {
    const size_t colon = info.find(':');
    Poco::URI::decode(info.substr(0, colon), p.username);
    if (colon != std::string::npos) Poco::URI::decode(info.substr(colon + 1), p.password);
  }
  // Plain http:// targets are loopback emulators: only a proxy on loopback keeps them local.
  if (url.scheme == "http" && !IsLoopbackHost(p.host)) return std::nullopt;
  return p;
}

ParsedUrl ParseBaseUrl(const std::string& base_url, bool allow_link_local_http) {
  auto bad = [&](const std::string& why) {
    return HttpError(HttpError::Kind::kInvalidUrl, "endpoint \"" + base_url + "\": " + why);
  };
  Poco::URI uri;
  try {
    uri = Poco::URI(base_url);
  } catch (const Poco::Exception& e) {
    throw bad("not a URL (" + e.message() + ")");
  }
  ParsedUrl out;
  out.scheme = Lower(uri.getScheme());
  out.host = uri.getHost();
  if (out.scheme != "https" && out.scheme != "http") {
    throw bad("use an https:// URL (http:// only for a local emulator on 127.0.0.1/localhost/::1)");
  }
  if (out.host.empty()) throw bad("the URL has no host");
  if (!uri.getUserInfo().empty()) throw bad("credentials in the URL are not accepted");
  if (!uri.getRawQuery().empty() || !uri.getFragment().empty()) {
    throw bad("a base URL takes no query or fragment");
  }
  if (out.scheme == "http" && !IsLoopbackHost(out.host) &&
      !(allow_link_local_http && IsLinkLocalCredentialHost(out.host))) {
    throw bad("plain http:// is allowed only for loopback hosts (127.0.0.0/8, localhost, ::1), "
              "so an API token never crosses a network unencrypted; use https://");
  }
  out.port = uri.getPort();
  out.path = uri.getPath();
  while (!out.path.empty() && out.path.back() == '/') out.path.pop_back();
  return out;
}

HttpClient::HttpClient(std::string base_url, RetryPolicy policy, const gpuprov::sdk::Host& host,
                       HttpClientOptions options)
    : base_url_(std::move(base_url)),
      url_(ParseBaseUrl(base_url_, options.allow_link_local_http)),
      policy_(policy),
      host_(host),
      ca_file_(options.ca_file) {
  if (policy_.max_attempts < 1) policy_.max_attempts = 1;
  proxy_ = ProxyFor(url_, options.env ? options.env : ProcessEnvReader());
  if (proxy_) {
    host_.Debug("requests to " + url_.host + " go through the proxy " + proxy_->host + ":" +
                std::to_string(proxy_->port) + " (" + proxy_->origin + ")");
  }
}

HttpClient::~HttpClient() = default;

HttpResponse HttpClient::SendOnce(const HttpRequest& request, milliseconds timeout) {
  // A request that must not run twice gets a fresh connection: a stale kept-alive one could
  // fail after sending, leaving it unknown whether the server acted.
  if (!request.idempotent) session_.reset();
  if (!session_) {
    if (url_.scheme == "https") {
      session_ = std::make_unique<Poco::Net::HTTPSClientSession>(
          url_.host, static_cast<Poco::UInt16>(url_.port), ClientContextFor(ca_file_));
    } else {
      session_ = std::make_unique<Poco::Net::HTTPClientSession>(
          url_.host, static_cast<Poco::UInt16>(url_.port));
    }
    if (proxy_) {
      Poco::Net::HTTPClientSession::ProxyConfig config;
      config.host = proxy_->host;
      config.port = static_cast<Poco::UInt16>(proxy_->port);
      config.username = proxy_->username;
      config.password = proxy_->password;
      session_->setProxyConfig(config);
    }
    session_->setKeepAlive(true);
  }
  const long long us = std::max<long long>(1000, timeout.count() * 1000);
  session_->setTimeout(Poco::Timespan(us));

  std::string target = request.path_and_query;
  if (target.empty() || target.front() != '/') target.insert(target.begin(), '/');
  Poco::Net::HTTPRequest req(request.method, url_.path + target, Poco::Net::HTTPMessage::HTTP_1_1);
  req.setKeepAlive(true);
  req.set("Accept", "application/json");
  req.set("User-Agent", "gpuprov-driver/0.1");
  for (const auto& [k, v] : request.headers) req.set(k, v);
  const bool has_body = !request.body.empty() || request.method == "POST" ||
                        request.method == "PUT" || request.method == "PATCH";
  if (has_body) req.setContentLength(static_cast<std::streamsize>(request.body.size()));

  std::ostream& os = session_->sendRequest(req);
  if (has_body) os << request.body;
  Poco::Net::HTTPResponse resp;
  std::istream& is = session_->receiveResponse(resp);

  HttpResponse out;
  out.status = static_cast<int>(resp.getStatus());
  for (const auto& [k, v] : resp) out.headers[k] = v;
  char buf[16384];
  while (is.read(buf, sizeof buf) || is.gcount() > 0) {
    out.body.append(buf, static_cast<size_t>(is.gcount()));
    if (out.body.size() > kMaxResponseBytes) {
      session_.reset();
      throw Poco::IOException("response larger than 64 MiB");
    }
  }
  if (!resp.getKeepAlive()) session_.reset();
  return out;
}

HttpResponse HttpClient::Send(const HttpRequest& request) {
  const auto start = steady_clock::now();
  const std::string what = request.method + " " + ForLog(request.path_and_query);
  HttpResponse last;
  std::string last_problem;
  int attempt = 0;
  for (attempt = 1; attempt <= policy_.max_attempts; ++attempt) {
    if (host_.Cancelled()) {
      throw HttpError(HttpError::Kind::kCancelled, what + ": cancelled");
    }
    const auto elapsed = std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
    const milliseconds remaining = std::max(milliseconds(1), policy_.total_budget - elapsed);
    std::optional<milliseconds> retry_after;
    if (before_attempt_) before_attempt_(request);
    try {
      last = SendOnce(request, std::min(policy_.attempt_timeout, remaining));
      host_.Debug(what + " -> " + std::to_string(last.status) + " (attempt " +
                  std::to_string(attempt) + ")");
      if (!IsRetryableStatus(last.status)) return last;
      if (!request.idempotent && last.status != 429) return last;  // may have been done
      last_problem = "HTTP " + std::to_string(last.status);
      if (auto it = last.headers.find("Retry-After"); it != last.headers.end()) {
        retry_after = ParseRetryAfter(it->second);
      }
      if (!retry_after && last.status == 429) retry_after = RateLimitResetDelay(last.headers);
    } catch (const Poco::Exception& e) {
      session_.reset();
      if (IsTlsVerificationFailure(e)) {
        throw HttpError(HttpError::Kind::kTls,
                        what + ": TLS with " + url_.host + " failed: " + e.displayText() +
                            " (certificates are verified against " +
                            (ca_file_.empty() ? std::string("the system CA store") : ca_file_) + ")");
      }
      last = HttpResponse{};
      last_problem = e.displayText();
      host_.Debug(what + " -> " + last_problem + " (attempt " + std::to_string(attempt) + ")");
      // A refused or unresolvable connection never reached the server; anything else might.
      const bool not_sent = dynamic_cast<const Poco::Net::ConnectionRefusedException*>(&e) ||
                            dynamic_cast<const Poco::Net::HostNotFoundException*>(&e) ||
                            dynamic_cast<const Poco::Net::NoAddressFoundException*>(&e);
      if (!request.idempotent && !not_sent) break;
    } catch (const std::exception& e) {
      session_.reset();
      last = HttpResponse{};
      last_problem = e.what();
      host_.Debug(what + " -> " + last_problem + " (attempt " + std::to_string(attempt) + ")");
      if (!request.idempotent) break;
    }
    if (attempt == policy_.max_attempts) break;
    const milliseconds delay = NextDelay(policy_, attempt, retry_after, jitter_.Next());
    const auto now_elapsed = std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
    if (now_elapsed + delay > policy_.total_budget) {
      host_.Debug(what + ": the next wait (" + std::to_string(delay.count()) +
                  " ms) would exceed the retry budget");
      break;
    }
    if (delay >= milliseconds(1000)) {
      host_.Progress(url_.host + " answered " + last_problem + "; retrying in " +
                     std::to_string((delay.count() + 999) / 1000) + " s");
    }
    if (!SleepUnlessCancelled(host_, delay)) {
      throw HttpError(HttpError::Kind::kCancelled, what + ": cancelled");
    }
  }
  const auto total = std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
  std::ostringstream msg;
  msg << what << ": still failing after " << std::min(attempt, policy_.max_attempts)
      << " attempt(s) over " << (total.count() / 100) / 10.0 << " s (last: " << last_problem
      << ")";
  throw HttpError(HttpError::Kind::kRetriesExhausted, msg.str(), last);
}

}  // namespace gpuprov::drivers
