// SPDX-License-Identifier: Apache-2.0
#include "ec2_client.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <string_view>

#include "driver_status.h"
#include "http_client.h"
#include "sigv4.h"

namespace gpuprov::aws {
namespace {

using gpuprov::sdk::DriverError;

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

namespace {

// "Too many requests" codes: retried like any TRANSIENT code, listed apart because
// IsThrottlingCode names them.
constexpr std::string_view kThrottlingCodes[] = {
    "RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled",
    "RequestThrottledException", "TooManyRequestsException", "SlowDown", "PriorRequestNotComplete"};

// EC2 error codes and their status (REFERENCE.md §8); codes not listed follow the HTTP status.
constexpr drivers::CloudCode kEc2Codes[] = {
    {"InsufficientInstanceCapacity", GPUPROV_STATUS_CAPACITY},
    {"InsufficientHostCapacity", GPUPROV_STATUS_CAPACITY},
    {"InsufficientReservedInstanceCapacity", GPUPROV_STATUS_CAPACITY},
    {"InsufficientCapacity", GPUPROV_STATUS_CAPACITY},
    {"InsufficientAddressCapacity", GPUPROV_STATUS_CAPACITY},
    {"InsufficientCapacityOnHost", GPUPROV_STATUS_CAPACITY},
    {"VcpuLimitExceeded", GPUPROV_STATUS_QUOTA},
    {"InstanceLimitExceeded", GPUPROV_STATUS_QUOTA},
    {"MaxSpotInstanceCountExceeded", GPUPROV_STATUS_QUOTA},
    {"ResourceLimitExceeded", GPUPROV_STATUS_QUOTA},
    {"SecurityGroupLimitExceeded", GPUPROV_STATUS_QUOTA},
    {"RulesPerSecurityGroupLimitExceeded", GPUPROV_STATUS_QUOTA},
    {"KeyPairLimitExceeded", GPUPROV_STATUS_QUOTA},
    {"AuthFailure", GPUPROV_STATUS_AUTH},
    {"SignatureDoesNotMatch", GPUPROV_STATUS_AUTH},
    {"IncompleteSignature", GPUPROV_STATUS_AUTH},
    {"MissingAuthenticationToken", GPUPROV_STATUS_AUTH},
    {"InvalidClientTokenId", GPUPROV_STATUS_AUTH},
    {"UnauthorizedOperation", GPUPROV_STATUS_AUTH},
    {"OptInRequired", GPUPROV_STATUS_AUTH},
    {"Blocked", GPUPROV_STATUS_AUTH},
    {"PendingVerification", GPUPROV_STATUS_AUTH},
    {"UnrecognizedClientException", GPUPROV_STATUS_AUTH},
    {"ExpiredToken", GPUPROV_STATUS_AUTH},
    {"InvalidToken", GPUPROV_STATUS_AUTH},
    {"AccessDenied", GPUPROV_STATUS_AUTH},
    {"AccessDeniedException", GPUPROV_STATUS_AUTH},
    {"RequestLimitExceeded", GPUPROV_STATUS_TRANSIENT},
    {"Throttling", GPUPROV_STATUS_TRANSIENT},
    {"ThrottlingException", GPUPROV_STATUS_TRANSIENT},
    {"RequestThrottled", GPUPROV_STATUS_TRANSIENT},
    {"RequestThrottledException", GPUPROV_STATUS_TRANSIENT},
    {"TooManyRequestsException", GPUPROV_STATUS_TRANSIENT},
    {"SlowDown", GPUPROV_STATUS_TRANSIENT},
    {"PriorRequestNotComplete", GPUPROV_STATUS_TRANSIENT},
    {"RequestExpired", GPUPROV_STATUS_TRANSIENT},  // re-signed with a new date on retry
    {"InternalError", GPUPROV_STATUS_TRANSIENT},
    {"InternalFailure", GPUPROV_STATUS_TRANSIENT},
    {"ServiceUnavailable", GPUPROV_STATUS_TRANSIENT},
    {"Unavailable", GPUPROV_STATUS_TRANSIENT},
    {"RequestTimeout", GPUPROV_STATUS_TRANSIENT},
    {"RequestTimeoutException", GPUPROV_STATUS_TRANSIENT},
    // A resource the request names that is not there: the request's fault, not "the VM is
    // gone" (an image not published in this region, a subnet_id/vpc_id setting of another
    // region or account). Before the generic ".NotFound" row, which they would match.
    {"InvalidAMIID.NotFound", GPUPROV_STATUS_INVALID_INPUT},
    {"InvalidAMIID.Unavailable", GPUPROV_STATUS_INVALID_INPUT},
    {"InvalidSubnetID.NotFound", GPUPROV_STATUS_INVALID_INPUT},
    {"InvalidVpcID.NotFound", GPUPROV_STATUS_INVALID_INPUT},
    {".NotFound", GPUPROV_STATUS_NOT_FOUND},
};

bool HasStatus(const std::string& code, gpuprov_type_status status) {
  return drivers::StatusOfCode(kEc2Codes, code) == status;
}

}  // namespace

bool IsThrottlingCode(const std::string& code) {
  return std::find(std::begin(kThrottlingCodes), std::end(kThrottlingCodes), code) !=
         std::end(kThrottlingCodes);
}
bool IsCapacityCode(const std::string& code) { return HasStatus(code, GPUPROV_STATUS_CAPACITY); }
bool IsQuotaCode(const std::string& code) { return HasStatus(code, GPUPROV_STATUS_QUOTA); }
bool IsAuthCode(const std::string& code) { return HasStatus(code, GPUPROV_STATUS_AUTH); }

bool IsRetryable(int http_status, const std::string& code) {
  return StatusOfCode(http_status, code) == GPUPROV_STATUS_TRANSIENT;
}

gpuprov_type_status StatusOfCode(int http_status, const std::string& code) {
  // 429 without a code is throttling; 4xx other than these is the request's fault.
  return drivers::StatusOf(http_status, code, kEc2Codes);
}

gpuprov_type_status StatusOfError(int http_status, const std::string& code,
                                  const std::string& message) {
  // The EC2 API reference (Errors > Common client error codes) describes `Unsupported` as "The
  // specified request is unsupported", for example a launch in an Availability Zone that has
  // constraints on the type; "the returned message provides details". So: a type not offered
  // in the zone ("... is not supported in your requested Availability Zone ...") is capacity
  // here, anything else unsupported (a type with that image, a setting) is the request's.
  if (code == "Unsupported") {
    return message.find("Availability Zone") != std::string::npos ? GPUPROV_STATUS_CAPACITY
                                                                  : GPUPROV_STATUS_INVALID_INPUT;
  }
  return StatusOfCode(http_status, code);
}

const drivers::ErrorTable& Ec2Errors() {
  static const drivers::ErrorTable table{
      kEc2Codes, {}, [](int http_status, const drivers::ApiError& e, const std::string&) {
        return StatusOfError(http_status, e.code, e.text);
      }};
  return table;
}

drivers::ApiError ReadEc2Error(const std::string& body) {
  const Ec2ErrorBody e = ParseErrorBody(body);
  return drivers::ApiError{e.code, e.message, e.request_id};
}

std::string RegionalEndpoint(const std::string& region) {
  const bool china = region.rfind("cn-", 0) == 0;
  return "https://ec2." + region + (china ? ".amazonaws.com.cn" : ".amazonaws.com");
}

Ec2Client::Ec2Client(std::string endpoint, drivers::RetryPolicy policy, gpuprov::sdk::Host host,
                     std::function<AwsCredentials()> credentials, std::function<long long()> clock,
                     drivers::HttpClientOptions http_options)
    : endpoint_(std::move(endpoint)),
      host_(host),
      transport_(policy, host_, std::move(http_options)),
      credentials_fn_(std::move(credentials)),
      clock_(clock ? std::move(clock) : std::function<long long()>(UnixNow)) {
  if (!endpoint_.empty()) {
    try {
      transport_.ClientFor(endpoint_);
    } catch (const drivers::HttpError& e) {
      throw DriverError(
          GPUPROV_STATUS_INVALID_INPUT,
          std::string(e.what()) + " (set by GPUPROV_AWS_ENDPOINT or endpoint in [clouds.aws])");
    }
  }
}

Ec2Client::~Ec2Client() = default;

const AwsCredentials& Ec2Client::credentials() {
  // Temporary credentials are fetched again 5 minutes before they expire.
  if (!credentials_ ||
      (credentials_->expiration != 0 && credentials_->expiration - 300 <= clock_())) {
    credentials_ = std::make_unique<AwsCredentials>(credentials_fn_());
  }
  return *credentials_;
}

XmlNode Ec2Client::Call(const std::string& region, const std::string& action,
                        const Params& params) {
  const AwsCredentials creds = credentials();  // missing credentials are named first
  if (region.empty()) throw DriverError(GPUPROV_STATUS_INVALID_INPUT, NoRegionProblem(""));
  const std::string base = endpoint_.empty() ? RegionalEndpoint(region) : endpoint_;
  drivers::ParsedUrl url;
  try {
    transport_.ClientFor(base);
    url = drivers::ParseBaseUrl(base, transport_.options().allow_link_local_http);
  } catch (const drivers::HttpError& e) {
    drivers::ThrowHttpError(e, "the EC2 endpoint " + base);
  }
  Params all = {{"Action", action}, {"Version", kEc2ApiVersion}};
  all.insert(all.end(), params.begin(), params.end());
  drivers::HttpRequest request;
  request.method = "POST";
  request.path_and_query = "/";
  request.body = FormEncode(all);
  request.headers["Accept"] = "text/xml";
  const std::string what = action + " in " + region;

  drivers::ApiWireForm wire;
  wire.name = "EC2";
  // SigV4 over the attempt's own time, so a retry after RequestExpired carries a new date.
  wire.sign = [&](drivers::HttpRequest& attempt) {
    const SignedPost signed_post =
        SignQueryPost(HostHeader(url), attempt.body, region, "ec2", creds.access_key_id,
                      creds.secret_access_key, creds.session_token, clock_());
    for (const auto& [k, v] : signed_post.headers) attempt.headers[k] = v;
  };
  wire.read_error = ReadEc2Error;
  wire.describe = [](int http_status, const drivers::ApiError& e) {
    if (e.code.empty()) return "HTTP " + std::to_string(http_status) + " without an EC2 error body";
    return e.code + ": " + e.text + " (HTTP " + std::to_string(http_status) +
           (e.request_id.empty() ? "" : ", request id " + e.request_id) + ")";
  };
  wire.secrets = [&creds] {
    return std::vector<std::string>{creds.secret_access_key, creds.session_token};
  };

  const drivers::ApiOutcome out = transport_.Send(base, request, what, wire, Ec2Errors());
  if (out.ok()) {
    try {
      return ParseXml(out.response.body);
    } catch (const std::exception& e) {
      throw Ec2Error(out.response.status, "", "", "",
                     what + ": the answer is not EC2 XML (" + e.what() + ")");
    }
  }
  throw Ec2Error(out.response.status, out.error.code, out.error.text, out.error.request_id,
                 out.Failure(what));
}

}  // namespace gpuprov::aws
