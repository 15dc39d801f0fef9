// SPDX-License-Identifier: Apache-2.0
#include "api_client.h"

#include "json_util.h"
#include "text.h"
#include "wait.h"

namespace gpuprov::drivers {

using gpuprov::sdk::DriverError;

CredentialMemo::CredentialMemo(Resolver resolve, std::string missing, std::string label,
                               const gpuprov::sdk::Host& host)
    : resolve_(std::move(resolve)),
      missing_(std::move(missing)),
      label_(std::move(label)),
      host_(host) {}

const Credential& CredentialMemo::Get() {
  if (!found_) {
    if (resolve_) found_ = resolve_();
    if (!found_) throw DriverError(GPUPROV_STATUS_AUTH, missing_);
    host_.Debug(label_ + " from " + found_->origin);
  }
  return *found_;
}

ApiClient::ApiClient(std::string endpoint, RetryPolicy policy, const gpuprov::sdk::Host& host,
                     ApiDialect dialect, ApiAuth auth)
    : endpoint_(std::move(endpoint)),
      host_(host),
      dialect_(std::move(dialect)),
      auth_(std::move(auth)),
      credential_(auth_.resolve, auth_.missing, auth_.label, host) {
  try {
    http_ = std::make_unique<HttpClient>(endpoint_, policy, host_);
  } catch (const HttpError& e) {
    const std::string origin = !dialect_.endpoint_origin.empty()
                                   ? dialect_.endpoint_origin
                                   : "GPUPROV_" + Upper(dialect_.driver) +
                                         "_ENDPOINT or endpoint in [clouds." + dialect_.driver +
                                         "]";
    ThrowHttpError(e, "the " + dialect_.cloud + " endpoint (" + origin + ")");
  }
}

std::string ApiClient::Scrub(std::string text) const { return ScrubSecrets(std::move(text), {sent_}); }

ApiError ApiClient::ReadError(const std::string& body) const {
  ApiError error = dialect_.read_error ? dialect_.read_error(body) : ApiError{"", body};
  error.text = Scrub(error.text);
  return error;
}

gpuprov_type_status ApiClient::StatusOfAnswer(int http_status, const ApiError& error,
                                              const std::string& body) const {
  if (dialect_.status_of) return dialect_.status_of(http_status, error, body);
  return StatusOfRefusal(http_status, error, dialect_.codes, dialect_.capacity_words);
}

DriverError ApiClient::Refusal(const std::string& what, int http_status, const std::string& body) {
  const ApiError error = ReadError(body);
  const gpuprov_type_status st = StatusOfAnswer(http_status, error, body);
  const std::string hint =
      HintFor(dialect_.hints, http_status, st, error.code,
              [this](std::string_view name) -> std::optional<std::string> {
                if (auto field = dialect_.hint_fields.find(name); field != dialect_.hint_fields.end()) {
                  return field->second();
                }
                if (name == "origin") return credential_.Get().origin;
                return std::nullopt;
              });
  std::string text = what + ": " + dialect_.cloud + " answered HTTP " + std::to_string(http_status);
  switch (dialect_.quote) {
    case QuoteForm::kCodeAndText:
      if (!error.code.empty()) text += " " + error.code;
      if (!error.text.empty()) text += ": " + error.text;
      break;
    case QuoteForm::kColonUnlessHint:
      text += hint.empty() ? ": " + error.text : " (" + error.text + ")";
      break;
    case QuoteForm::kColon:
      text += ": " + error.text;
      break;
    case QuoteForm::kParentheses:
      text += " (" + error.text + ")";
      break;
  }
  return DriverError(st, Scrub(text + hint));
}

ApiAnswer ApiClient::Send(const ApiCall& call) {
  HttpRequest req;
  req.idempotent = call.idempotent;
  req.method = call.method;
  req.path_and_query = call.path;
  if (dialect_.base_path && call.path.rfind('/', 0) != 0) {
    req.path_and_query = dialect_.base_path() + "/" + call.path;
  }
  for (const auto& [name, value] : dialect_.headers) req.headers[name] = value;
  if (!call.body.empty() || dialect_.always_content_type) {
    req.headers["Content-Type"] = "application/json";
  }
  req.body = call.body;
  HttpResponse resp;
  std::optional<Backoff> rate_limit_backoff;
  if (dialect_.rate_limited) rate_limit_backoff.emplace(host_, http_->policy(), call.what);
  bool renew = false;
  bool renewed = false;
  for (;;) {
    sent_ = auth_.token ? auth_.token(renew) : credential_.Get().value;
    req.headers[auth_.header] = auth_.scheme + sent_;
    renew = false;
    try {
      resp = http_->Send(req);
    } catch (const HttpError& e) {
      const std::string& last = e.last_response().body;
      std::string said;
      if ((!last.empty() || dialect_.quote_empty_answer) && dialect_.read_error) {
        said = ReadError(last).text;
      }
      try {
        ThrowHttpError(e, call.what + ": " + dialect_.cloud + " API at " + endpoint_, said);
      } catch (const DriverError& thrown) {
        throw DriverError(thrown.status(), Scrub(thrown.what()));
      }
    }
    // An expired or revoked access token: one new token, then the call once more.
    if (auth_.token && resp.status == 401 && !renewed) {
      host_.Debug(call.what + ": 401, renewing the access token");
      renew = renewed = true;
      continue;
    }
    if (rate_limit_backoff && (resp.status < 200 || resp.status >= 300)) {
      const ApiError error = ReadError(resp.body);
      if (dialect_.rate_limited(resp.status, error) &&
          rate_limit_backoff->Wait(dialect_.cloud + " rate limit (HTTP " +
                                   std::to_string(resp.status) +
                                   (error.code.empty() ? "" : " " + error.code) + ")")) {
        continue;
      }
    }
    break;
  }
  ApiAnswer a;
  a.status = resp.status;
  a.headers = resp.headers;
  a.body = resp.body;
  if (!a.ok()) {
    if (call.allow.count(resp.status) == 0) throw Refusal(call.what, resp.status, resp.body);
    a.error = ReadError(resp.body);
  }
  if (TrimSpace(resp.body).empty()) return a;
  a.doc = json::TryParseObject(resp.body);
  if (!a.doc && a.ok() && !call.raw && !dialect_.any_json) {
    throw DriverError(GPUPROV_STATUS_FAILED, call.what + ": " + dialect_.cloud + " answered HTTP " +
                                                 std::to_string(resp.status) +
                                                 " with a body that is not a JSON object");
  }
  return a;
}

Poco::Dynamic::Var ApiAnswer::Parsed() const {
  try {
    Poco::JSON::Parser parser;
    return parser.parse(body);
  } catch (...) {
    return {};
  }
}

ApiAnswer ApiClient::Call(const std::string& method, const std::string& path,
                          const std::string& what, const Poco::JSON::Object::Ptr& body,
                          const std::set<int>& allow, bool idempotent) {
  ApiCall call;
  call.method = method;
  call.path = path;
  call.what = what;
  if (body) call.body = json::Stringify(body);
  call.allow = allow;
  call.idempotent = idempotent;
  return Send(call);
}

}  // namespace gpuprov::drivers
