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
#include <ctime>
#include <mutex>
#include <sstream>
#include <thread>

#include "wait.h"

namespace gpuprov::drivers {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr size_t kMaxResponseBytes = 64u << 20;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

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

ParsedUrl ParseBaseUrl(const std::string& base_url) {
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
  if (out.scheme == "http" && !IsLoopbackHost(out.host)) {
    throw bad("plain http:// is allowed only for loopback hosts (127.0.0.0/8, localhost, ::1), "
              "so an API token never crosses a network unencrypted; use https://");
  }
  out.port = uri.getPort();
  out.path = uri.getPath();
  while (!out.path.empty() && out.path.back() == '/') out.path.pop_back();
  return out;
}

HttpClient::HttpClient(std::string base_url, RetryPolicy policy, const gpuprov::sdk::Host& host)
    : base_url_(std::move(base_url)),
      url_(ParseBaseUrl(base_url_)),
      policy_(policy),
      host_(host) {
  if (policy_.max_attempts < 1) policy_.max_attempts = 1;
}

HttpClient::~HttpClient() = default;

HttpResponse HttpClient::SendOnce(const HttpRequest& request, milliseconds timeout) {
  // A request that must not run twice gets a fresh connection: a stale kept-alive one could
  // fail after sending, leaving it unknown whether the server acted.
  if (!request.idempotent) session_.reset();
  if (!session_) {
    if (url_.scheme == "https") {
      session_ = std::make_unique<Poco::Net::HTTPSClientSession>(
          url_.host, static_cast<Poco::UInt16>(url_.port), ClientContext());
    } else {
      session_ = std::make_unique<Poco::Net::HTTPClientSession>(
          url_.host, static_cast<Poco::UInt16>(url_.port));
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
                            " (certificates are verified against the system CA store)");
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
