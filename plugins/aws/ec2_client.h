// SPDX-License-Identifier: Apache-2.0
//
// One signed EC2 Query API call (REFERENCE.md §1-§3, §8): the EC2 Query/XML wire form on the
// kit's ApiTransport (plugins/common/api_transport.h). The parameters are form-encoded into a
// POST to https://ec2.<region>.amazonaws.com/ (or the endpoint override, for an emulator),
// signed with SigV4, freshly for every attempt; error answers are read from their XML envelope
// (Response/Errors/Error/{Code,Message}, RequestID) and classified with EC2's code table
// (Ec2Errors). The transport retries, with exponential backoff and full jitter bounded by the
// RetryPolicy, what that table calls TRANSIENT: throttling (RequestLimitExceeded and the other
// throttling codes, any 503), server-side errors (InternalError, Unavailable,
// ServiceUnavailable, other 5xx), RequestExpired (re-signed with a new date) and network
// failures. Never retried: capacity (InsufficientInstanceCapacity and its variants), quota,
// auth and request errors; they come back as Ec2Error with the code so the driver reports them
// as such. Secrets never reach a log line or an error message.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "api_transport.h"
#include "aws_credentials.h"
#include "ec2_xml.h"
#include "gpuprov/driver_abi.h"
#include "gpuprov/sdk.hpp"
#include "http_client.h"
#include "retry_policy.h"

namespace gpuprov::aws {

inline constexpr const char* kEc2ApiVersion = "2016-11-15";

using Params = std::vector<std::pair<std::string, std::string>>;

/// An EC2 error answer (or a request that never got one: code "" and http_status 0).
class Ec2Error : public std::runtime_error {
 public:
  Ec2Error(int http_status, std::string code, std::string message, std::string request_id,
           const std::string& what)
      : std::runtime_error(what),
        http_status_(http_status),
        code_(std::move(code)),
        message_(std::move(message)),
        request_id_(std::move(request_id)) {}
  int http_status() const { return http_status_; }
  const std::string& code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& request_id() const { return request_id_; }

 private:
  int http_status_;
  std::string code_;
  std::string message_;
  std::string request_id_;
};

/// True for error codes that mean "too many requests" (RequestLimitExceeded first of all).
bool IsThrottlingCode(const std::string& code);
/// True for codes that mean "no capacity for this type here now".
bool IsCapacityCode(const std::string& code);
/// True for account quota codes (VcpuLimitExceeded, InstanceLimitExceeded, ...).
bool IsQuotaCode(const std::string& code);
/// True for credential/permission codes.
bool IsAuthCode(const std::string& code);
/// Whether a failed attempt is retried: throttling, server-side and network failures and
/// RequestExpired; never capacity, quota, auth or request errors.
bool IsRetryable(int http_status, const std::string& code);
/// The gpuprov status of an EC2 error code.
gpuprov_type_status StatusOfCode(int http_status, const std::string& code);
/// The gpuprov status of an EC2 error, where the code alone does not say: `Unsupported` is
/// CAPACITY when EC2 says the type is not supported in the Availability Zone (another zone or
/// region may have it), INVALID_INPUT for any other unsupported request (a type with that
/// image, a setting). Other codes as StatusOfCode.
gpuprov_type_status StatusOfError(int http_status, const std::string& code,
                                  const std::string& message);
/// EC2's error table for the kit's transport and hints: its codes, and StatusOfError.
const drivers::ErrorTable& Ec2Errors();

/// The base URL of EC2 in a region ("https://ec2.<region>.amazonaws.com"; China regions
/// end in amazonaws.com.cn).
std::string RegionalEndpoint(const std::string& region);

class Ec2Client {
 public:
  /// `endpoint` overrides the regional URL for every call ("" = the real one per region).
  /// `credentials` is called once, on the first request (so a missing key fails the first
  /// call, not construction); `clock` gives Unix seconds (tests pin it).
  Ec2Client(std::string endpoint, drivers::RetryPolicy policy, gpuprov::sdk::Host host,
            std::function<AwsCredentials()> credentials,
            std::function<long long()> clock = nullptr,
            drivers::HttpClientOptions http_options = {});
  ~Ec2Client();

  /// Calls `action` in `region` with `params` (Action and Version are added). Returns the
  /// parsed response root. Throws Ec2Error for EC2 errors (message "<action> in <region>:
  /// <code>: <message> (HTTP <n>, request id <id>)"), DriverError(CANCELLED) when the host
  /// cancels, DriverError(INVALID_INPUT) for a refused endpoint URL.
  XmlNode Call(const std::string& region, const std::string& action, const Params& params);

  const std::string& endpoint() const { return endpoint_; }
  const AwsCredentials& credentials();

 private:
  std::string endpoint_;
  gpuprov::sdk::Host host_;
  drivers::ApiTransport transport_;  // one HttpClient per regional endpoint; CA bundle
  std::function<AwsCredentials()> credentials_fn_;
  std::function<long long()> clock_;
  std::unique_ptr<AwsCredentials> credentials_;
};

}  // namespace gpuprov::aws
