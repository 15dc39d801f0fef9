// SPDX-License-Identifier: Apache-2.0
#include "api_transport.h"

#include "wait.h"

namespace gpuprov::drivers {

using gpuprov::sdk::DriverError;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

gpuprov_type_status StatusOfRefusal(int http_status, const ApiError& error,
                                    std::span<const CloudCode> codes,
                                    std::span<const std::string_view> capacity_words) {
  gpuprov_type_status st = StatusOf(http_status, error.code, codes);
  if (st == GPUPROV_STATUS_INVALID_INPUT && http_status >= 400 && http_status < 500 &&
      MentionsAny(error.text, capacity_words)) {
    st = GPUPROV_STATUS_CAPACITY;
  }
  return st;
}

gpuprov_type_status ErrorTable::StatusOf(int http_status, const ApiError& error,
                                         const std::string& body) const {
  if (status_of) return status_of(http_status, error, body);
  return StatusOfRefusal(http_status, error, codes, capacity_words);
}

std::string HintFor(std::span<const ErrorHint> hints, int http_status, gpuprov_type_status status,
                    std::string_view code, const HintFill& fill) {
  for (const ErrorHint& h : hints) {
    if (h.http_status != 0 && h.http_status != http_status) continue;
    if (h.status && *h.status != status) continue;
    if (!h.code.empty() && h.code != code) continue;
    std::string text = h.text;
    if (!fill) return text;
    for (size_t open = text.find('{'); open != std::string::npos; open = text.find('{', open)) {
      const size_t close = text.find('}', open);
      if (close == std::string::npos) break;
      const std::optional<std::string> value =
          fill(std::string_view(text).substr(open + 1, close - open - 1));
      if (!value) {
        ++open;
        continue;
      }
      text.replace(open, close - open + 1, *value);
      open += value->size();
    }
    return text;
  }
  return "";
}

std::string ScrubSecrets(std::string text, const std::vector<std::string>& secrets) {
  const std::string redacted = "<redacted>";
  for (const std::string& secret : secrets) {
    if (secret.size() < 4) continue;  // a shorter value would blank ordinary words
    for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
      text.replace(at, secret.size(), redacted);
      at += redacted.size();
    }
  }
  return text;
}

std::string ApiOutcome::Failure(const std::string& what) const {
  std::string message = what + ": " + described;
  if (retried_out) {
    message += " (still failing after " + std::to_string(attempts) + " attempt(s) over " +
               std::to_string(elapsed.count() / 1000) + " s)";
  }
  return message;
}

ApiTransport::ApiTransport(RetryPolicy policy, const gpuprov::sdk::Host& host,
                           HttpClientOptions options)
    : policy_(policy), host_(host), options_(std::move(options)) {
  if (policy_.max_attempts < 1) policy_.max_attempts = 1;
}

ApiTransport::~ApiTransport() = default;

HttpClient& ApiTransport::ClientFor(const std::string& base_url) {
  auto it = clients_.find(base_url);
  if (it != clients_.end()) return *it->second;
  RetryPolicy once = policy_;
  once.max_attempts = 1;
  auto client = std::make_unique<HttpClient>(base_url, once, host_, options_);
  return *clients_.emplace(base_url, std::move(client)).first->second;
}

namespace {

std::string DefaultDescription(int http_status, const ApiError& error) {
  const std::string status = "HTTP " + std::to_string(http_status);
  if (!error.code.empty()) {
    return error.code + ": " + error.text + " (" + status +
           (error.request_id.empty() ? "" : ", request id " + error.request_id) + ")";
  }
  return error.text.empty() ? status : status + ": " + error.text;
}

}  // namespace

ApiOutcome ApiTransport::Send(const std::string& base_url, const HttpRequest& request,
                              const std::string& what, const ApiWireForm& wire,
                              const ErrorTable& errors) {
  HttpClient* client = nullptr;
  try {
    client = &ClientFor(base_url);
  } catch (const HttpError& e) {
    ThrowHttpError(e, what);
  }
  const auto start = steady_clock::now();
  Backoff backoff(host_, policy_, what);
  ApiOutcome out;
  for (;;) {
    if (host_.Cancelled()) throw DriverError(GPUPROV_STATUS_CANCELLED, what + ": cancelled");
    ++out.attempts;
    HttpRequest attempt = request;
    if (wire.sign) wire.sign(attempt);
    const int attempts = out.attempts;
    out = ApiOutcome{};
    out.attempts = attempts;
    try {
      out.response = client->Send(attempt);
    } catch (const HttpError& e) {
      if (e.kind() != HttpError::Kind::kRetriesExhausted) ThrowHttpError(e, what);
      out.response = e.last_response();
      if (out.response.status == 0) out.described = e.what();
    }
    out.elapsed = std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
    if (out.ok()) return out;

    const int http_status = out.response.status;
    if (http_status != 0) {
      if (wire.read_error) {
        out.error = wire.read_error(out.response.body);
      } else {
        out.error.text = out.response.body;
      }
      out.described = wire.describe ? wire.describe(http_status, out.error)
                                    : DefaultDescription(http_status, out.error);
    }
    if (wire.secrets) {
      const std::vector<std::string> secrets = wire.secrets();
      out.error.text = ScrubSecrets(out.error.text, secrets);
      out.described = ScrubSecrets(out.described, secrets);
    }
    out.status = errors.StatusOf(http_status, out.error, out.response.body);
    host_.Debug(what + " attempt " + std::to_string(out.attempts) + ": " + out.described);

    const bool retryable = out.status == GPUPROV_STATUS_TRANSIENT &&
                           (request.idempotent || http_status == 429);
    if (!retryable) return out;
    std::optional<milliseconds> retry_after;
    if (auto it = out.response.headers.find("Retry-After"); it != out.response.headers.end()) {
      retry_after = ParseRetryAfter(it->second);
    }
    const std::string reason =
        wire.name + " answered " + (out.error.code.empty() ? out.described : out.error.code);
    if (!backoff.Wait(reason, retry_after)) {
      out.retried_out = true;
      out.elapsed = std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
      return out;
    }
  }
}

}  // namespace gpuprov::drivers
