// SPDX-License-Identifier: Apache-2.0
//
// The nebius driver's gRPC layer: one channel per service endpoint (TLS with the system's CA
// roots; plaintext only to loopback), access tokens (NEBIUS_IAM_TOKEN or a service account's
// JWT exchanged at the token exchange, cached until shortly before expiry), and one way to
// make a call: `authorization: Bearer` metadata, a deadline, `x-idempotency-key` on mutating
// calls (the same key on every retry), retries of UNAVAILABLE/DEADLINE_EXCEEDED/INTERNAL/
// throttling with the kit's back-off, and cancellation: the call runs on gRPC's callback API
// while this thread polls Host::Cancelled() and then ClientContext::TryCancel()s it.
// Operations are polled on the channel of the service that made them (REFERENCE.md §3).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "gpuprov/sdk.hpp"
#include "nebius/common/v1/operation.pb.h"
#include "nebius/common/v1/operation_service.grpc.pb.h"
#include "nebius/compute/v1/disk_service.grpc.pb.h"
#include "nebius/compute/v1/instance_service.grpc.pb.h"
#include "nebius/compute/v1/platform_service.grpc.pb.h"
#include "nebius/iam/v1/token_exchange_service.grpc.pb.h"
#include "nebius/vpc/v1/security_group_service.grpc.pb.h"
#include "nebius/vpc/v1/security_rule_service.grpc.pb.h"
#include "nebius/vpc/v1/subnet_service.grpc.pb.h"
#include "nebius_rules.h"
#include "retry_policy.h"

namespace gpuprov::nebius {

/// A failed call or operation, read from its google.rpc.Status and ServiceError details.
struct CallError {
  int code = 0;  ///< gRPC status code
  Detail detail = Detail::kNone;
  std::string message;
  std::string detail_text;  ///< the detail in words ("quota compute.gpu.h100: limit 0, ...")
  std::string Describe() const;  ///< "RESOURCE_EXHAUSTED: <message> (<detail_text>)"
};

/// Reads the ServiceError details of a serialized google.rpc.Status (grpc-status-details-bin).
CallError CallErrorOf(int code, const std::string& message, const std::string& status_details_bin);
/// The same for an Operation's finished status.
CallError CallErrorOf(const ::google::rpc::Status& status);

/// Where access tokens come from (never logged; `origin` is).
class TokenSource {
 public:
  /// A ready token ($NEBIUS_IAM_TOKEN or a token file).
  TokenSource(std::string token, std::string origin);
  /// A service account key whose JWTs are exchanged on `channel`.
  TokenSource(ServiceAccountKey key, std::shared_ptr<grpc::Channel> channel);

  /// A valid token; exchanges a new one when none is cached, it expires within a minute, or
  /// `force_refresh` (after UNAUTHENTICATED). `run` makes the exchange call cancellable.
  std::string Token(const std::function<grpc::Status(grpc::ClientContext*,
                                                     const ::nebius::iam::v1::ExchangeTokenRequest&,
                                                     ::nebius::iam::v1::CreateTokenResponse*)>& run,
                    bool force_refresh = false);
  bool Refreshable() const { return key_.has_value(); }
  const std::string& origin() const { return origin_; }
  ::nebius::iam::v1::TokenExchangeService::Stub* stub() { return stub_.get(); }

 private:
  std::string token_;
  std::string origin_;
  std::optional<ServiceAccountKey> key_;
  std::unique_ptr<::nebius::iam::v1::TokenExchangeService::Stub> stub_;
  std::chrono::steady_clock::time_point expires_{};
};

class NebiusClient {
 public:
  struct Options {
    std::chrono::milliseconds call_timeout{30'000};
    std::chrono::milliseconds poll_interval{2'000};
    std::chrono::milliseconds operation_timeout{900'000};
    drivers::RetryPolicy retry;
  };

  /// `tokens` is made on first use by `make_tokens` (credentials are looked up only when a call
  /// needs them).
  NebiusClient(const Endpoints& endpoints, gpuprov::sdk::Host host, Options options,
               std::function<std::unique_ptr<TokenSource>(std::shared_ptr<grpc::Channel>)>
                   make_tokens);

  enum class Service { kCompute, kVpc };

  /// How a call is made.
  struct Call {
    std::string what;        ///< "create instance demo": messages and progress lines
    bool mutating = false;   ///< sends x-idempotency-key (one key for all its attempts)
    bool allow_not_found = false;  ///< NOT_FOUND returns false instead of throwing
    bool authenticated = true;     ///< sends the access token (not for the token exchange)
  };

  /// Runs one unary call: `start(context, done)` begins it on a stub's callback API (e.g.
  /// stub->async()->Get(ctx, &req, &resp, done)). Returns true on OK, false on NOT_FOUND when
  /// allowed; throws DriverError (mapped status, cancelled, retries exhausted) otherwise.
  bool Run(const Call& call,
           const std::function<void(grpc::ClientContext*, std::function<void(grpc::Status)>)>& start);

  /// Waits for `op` (returned by a mutating call on `service`) to finish, polling
  /// OperationService.Get there; throws DriverError with the operation's status when it
  /// failed, TRANSIENT when it is not done within the operation timeout.
  ::nebius::common::v1::Operation Wait(Service service, ::nebius::common::v1::Operation op,
                                       const std::string& what);

  ::nebius::compute::v1::InstanceService::Stub& instances() { return *instances_; }
  ::nebius::compute::v1::DiskService::Stub& disks() { return *disks_; }
  ::nebius::compute::v1::PlatformService::Stub& platforms() { return *platforms_; }
  ::nebius::vpc::v1::SubnetService::Stub& subnets() { return *subnets_; }
  ::nebius::vpc::v1::SecurityGroupService::Stub& groups() { return *groups_; }
  ::nebius::vpc::v1::SecurityRuleService::Stub& rules() { return *rules_; }

  const Options& options() const { return options_; }
  /// Where the token came from (credentials are looked up if needed).
  std::string TokenOrigin();

 private:
  /// One attempt; waits for completion, cancelling it when the host cancels.
  grpc::Status RunOnce(grpc::ClientContext* ctx,
                       const std::function<void(grpc::ClientContext*,
                                                std::function<void(grpc::Status)>)>& start);
  TokenSource& Tokens();
  std::string Token(bool force_refresh);

  Endpoints endpoints_;
  gpuprov::sdk::Host host_;
  Options options_;
  std::function<std::unique_ptr<TokenSource>(std::shared_ptr<grpc::Channel>)> make_tokens_;
  std::shared_ptr<grpc::Channel> compute_;
  std::shared_ptr<grpc::Channel> vpc_;
  std::shared_ptr<grpc::Channel> tokens_channel_;
  std::unique_ptr<TokenSource> tokens_;
  std::unique_ptr<::nebius::compute::v1::InstanceService::Stub> instances_;
  std::unique_ptr<::nebius::compute::v1::DiskService::Stub> disks_;
  std::unique_ptr<::nebius::compute::v1::PlatformService::Stub> platforms_;
  std::unique_ptr<::nebius::common::v1::OperationService::Stub> compute_ops_;
  std::unique_ptr<::nebius::vpc::v1::SubnetService::Stub> subnets_;
  std::unique_ptr<::nebius::vpc::v1::SecurityGroupService::Stub> groups_;
  std::unique_ptr<::nebius::vpc::v1::SecurityRuleService::Stub> rules_;
  std::unique_ptr<::nebius::common::v1::OperationService::Stub> vpc_ops_;
};

/// A channel to `address`: TLS with the system's CA bundle unless `plaintext`.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, bool plaintext);

}  // namespace gpuprov::nebius
