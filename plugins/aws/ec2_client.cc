// SPDX-License-Identifier: Apache-2.0
#include "ec2_client.h"

#include <chrono>
#include <set>
#include <thread>

#include "http_client.h"
#include "sigv4.h"

namespace gpuprov::aws {
namespace {

using gpuprov::sdk::DriverError;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

bool In(const std::set<std::string>& set, const std::string& code) { return set.count(code) > 0; }

// "host[:port]" as sent in the Host header: the port only when it is not the scheme's default.
std::string HostHeader(const drivers::ParsedUrl& url) {
  std::string host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  const bool default_port =
      (url.scheme == "https" && url.port == 443) || (url.scheme == "http" && url.port == 80);
  return default_port ? host : host + ":" + std::to_string(url.port);
}

long long UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool IsThrottlingCode(const std::string& code) {
  static const std::set<std::string> codes = {"RequestLimitExceeded",
                                              "Throttling",
                                              "ThrottlingException",
                                              "RequestThrottled",
                                              "RequestThrottledException",
                                              "TooManyRequestsException",
                                              "SlowDown",
                                              "PriorRequestNotComplete"};
  return In(codes, code);
}

bool IsCapacityCode(const std::string& code) {
  static const std::set<std::string> codes = {"InsufficientInstanceCapacity",
                                              "InsufficientHostCapacity",
                                              "InsufficientReservedInstanceCapacity",
                                              "InsufficientCapacity",
                                              "InsufficientAddressCapacity",
                                              "InsufficientCapacityOnHost",
                                              "Unsupported"};
  return In(codes, code);
}

bool IsQuotaCode(const std::string& code) {
  static const std::set<std::string> codes = {
      "VcpuLimitExceeded",     "InstanceLimitExceeded",      "MaxSpotInstanceCountExceeded",
      "ResourceLimitExceeded", "SecurityGroupLimitExceeded", "RulesPerSecurityGroupLimitExceeded",
      "KeyPairLimitExceeded"};
  return In(codes, code);
}

bool IsAuthCode(const std::string& code) {
  static const std::set<std::string> codes = {"AuthFailure",          "SignatureDoesNotMatch",
                                              "IncompleteSignature",  "MissingAuthenticationToken",
                                              "InvalidClientTokenId", "UnauthorizedOperation",
                                              "OptInRequired",        "Blocked",
                                              "PendingVerification",  "UnrecognizedClientException",
                                              "ExpiredToken",         "InvalidToken",
                                              "AccessDenied",         "AccessDeniedException"};
  return In(codes, code);
}

bool IsRetryable(int http_status, const std::string& code) {
  if (IsCapacityCode(code) || IsQuotaCode(code) || IsAuthCode(code)) return false;
  if (IsThrottlingCode(code) || code == "RequestExpired") return true;
  static const std::set<std::string> server = {"InternalError",      "InternalFailure",
                                               "ServiceUnavailable", "Unavailable",
                                               "RequestTimeout",     "RequestTimeoutException"};
  if (In(server, code)) return true;
  if (http_status == 0) return true;  // the request never got an answer
  return http_status >= 500 && http_status != 501 && http_status != 505;
}

gpuprov_type_status StatusOfCode(int http_status, const std::string& code) {
  if (IsCapacityCode(code)) return GPUPROV_STATUS_CAPACITY;
  if (IsQuotaCode(code)) return GPUPROV_STATUS_QUOTA;
  if (IsAuthCode(code) || http_status == 401 || http_status == 403) return GPUPROV_STATUS_AUTH;
  if (code.find(".NotFound") != std::string::npos) return GPUPROV_STATUS_NOT_FOUND;
  if (IsRetryable(http_status, code)) return GPUPROV_STATUS_TRANSIENT;
  if (http_status >= 400 && http_status < 500) return GPUPROV_STATUS_INVALID_INPUT;
  return GPUPROV_STATUS_FAILED;
}

std::string RegionalEndpoint(const std::string& region) {
  const bool china = region.rfind("cn-", 0) == 0;
  return "https://ec2." + region + (china ? ".amazonaws.com.cn" : ".amazonaws.com");
}

Ec2Client::Ec2Client(std::string endpoint, drivers::RetryPolicy policy, gpuprov::sdk::Host host,
                     std::function<AwsCredentials()> credentials, std::function<long long()> clock)
    : endpoint_(std::move(endpoint)),
      policy_(policy),
      host_(host),
      credentials_fn_(std::move(credentials)),
      clock_(clock ? std::move(clock) : std::function<long long()>(UnixNow)) {
  if (policy_.max_attempts < 1) policy_.max_attempts = 1;
  if (!endpoint_.empty()) {
    try {
      ClientFor(endpoint_);
    } catch (const drivers::HttpError& e) {
      throw DriverError(
          GPUPROV_STATUS_INVALID_INPUT,
          std::string(e.what()) + " (set by GPUPROV_AWS_ENDPOINT or endpoint in [clouds.aws])");
    }
  }
}

Ec2Client::~Ec2Client() = default;

const AwsCredentials& Ec2Client::credentials() {
  if (!credentials_) credentials_ = std::make_unique<AwsCredentials>(credentials_fn_());
  return *credentials_;
}

drivers::HttpClient& Ec2Client::ClientFor(const std::string& base_url) {
  auto it = clients_.find(base_url);
  if (it != clients_.end()) return *it->second;
  // One attempt per Send: this class retries itself, re-signing each attempt.
  drivers::RetryPolicy once = policy_;
  once.max_attempts = 1;
  auto client = std::make_unique<drivers::HttpClient>(base_url, once, host_);
  return *clients_.emplace(base_url, std::move(client)).first->second;
}

XmlNode Ec2Client::Call(const std::string& region, const std::string& action,
                        const Params& params) {
  const AwsCredentials& creds = credentials();
  const std::string base = endpoint_.empty() ? RegionalEndpoint(region) : endpoint_;
  drivers::HttpClient* client = nullptr;
  try {
    client = &ClientFor(base);
  } catch (const drivers::HttpError& e) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT, e.what());
  }
  const drivers::ParsedUrl url = drivers::ParseBaseUrl(base);
  Params all = {{"Action", action}, {"Version", kEc2ApiVersion}};
  all.insert(all.end(), params.begin(), params.end());
  const std::string body = FormEncode(all);
  const std::string what = action + " in " + region;

  const auto start = steady_clock::now();
  for (int attempt = 1;; ++attempt) {
    if (host_.Cancelled()) throw DriverError(GPUPROV_STATUS_CANCELLED, what + ": cancelled");
    SignedPost signed_post =
        SignQueryPost(HostHeader(url), body, region, "ec2", creds.access_key_id,
                      creds.secret_access_key, creds.session_token, clock_());
    drivers::HttpRequest req;
    req.method = "POST";
    req.path_and_query = "/";
    req.body = body;
    for (const auto& [k, v] : signed_post.headers) req.headers[k] = v;
    req.headers["Accept"] = "text/xml";

    drivers::HttpResponse resp;
    std::string network_problem;
    try {
      resp = client->Send(req);
    } catch (const drivers::HttpError& e) {
      switch (e.kind()) {
        case drivers::HttpError::Kind::kCancelled:
          throw DriverError(GPUPROV_STATUS_CANCELLED, what + ": cancelled");
        case drivers::HttpError::Kind::kTls:
        case drivers::HttpError::Kind::kInvalidUrl:
          throw DriverError(GPUPROV_STATUS_FAILED, e.what());
        case drivers::HttpError::Kind::kRetriesExhausted:
          resp = e.last_response();
          if (resp.status == 0) network_problem = e.what();
          break;
      }
    }
    if (resp.status >= 200 && resp.status < 300) {
      try {
        return ParseXml(resp.body);
      } catch (const std::exception& e) {
        throw Ec2Error(resp.status, "", "", "",
                       what + ": the answer is not EC2 XML (" + e.what() + ")");
      }
    }
    Ec2ErrorBody err = resp.status ? ParseErrorBody(resp.body) : Ec2ErrorBody{};
    std::string described;
    if (resp.status == 0) {
      described = network_problem;
    } else if (!err.code.empty()) {
      described = err.code + ": " + err.message + " (HTTP " + std::to_string(resp.status) +
                  (err.request_id.empty() ? "" : ", request id " + err.request_id) + ")";
    } else {
      described = "HTTP " + std::to_string(resp.status) + " without an EC2 error body";
    }
    host_.Debug(what + " attempt " + std::to_string(attempt) + ": " + described);
    const bool retry = IsRetryable(resp.status, err.code) && attempt < policy_.max_attempts;
    if (retry) {
      const milliseconds delay = drivers::NextDelay(policy_, attempt, std::nullopt, jitter_.Next());
      const auto elapsed = std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
      if (elapsed + delay <= policy_.total_budget) {
        const std::string why = err.code.empty() ? described : err.code;
        host_.Debug(what + ": " + why + "; retrying in " + std::to_string(delay.count()) +
                    " ms (attempt " + std::to_string(attempt + 1) + " of " +
                    std::to_string(policy_.max_attempts) + ")");
        if (delay >= milliseconds(1000)) {
          host_.Progress("EC2 answered " + why + " to " + action + "; retrying in " +
                         std::to_string((delay.count() + 999) / 1000) + " s");
        }
        const auto until = steady_clock::now() + delay;
        while (steady_clock::now() < until) {
          if (host_.Cancelled()) throw DriverError(GPUPROV_STATUS_CANCELLED, what + ": cancelled");
          std::this_thread::sleep_for(
              std::min(milliseconds(50),
                       std::chrono::duration_cast<milliseconds>(until - steady_clock::now())));
        }
        continue;
      }
    }
    std::string message = what + ": " + described;
    if (IsRetryable(resp.status, err.code)) {
      message += " (still failing after " + std::to_string(attempt) + " attempt(s) over " +
                 std::to_string(
                     std::chrono::duration_cast<milliseconds>(steady_clock::now() - start).count() /
                     1000) +
                 " s)";
    }
    throw Ec2Error(resp.status, err.code, err.message, err.request_id, message);
  }
}

}  // namespace gpuprov::aws
