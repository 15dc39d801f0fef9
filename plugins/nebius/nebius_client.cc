// SPDX-License-Identifier: Apache-2.0
#include "nebius_client.h"

#include <Poco/UUIDGenerator.h>

#include <ctime>

#include "credentials.h"
#include "google/rpc/status.pb.h"
#include "nebius/common/v1/error.pb.h"
#include "wait.h"

namespace gpuprov::nebius {
namespace {

using gpuprov::sdk::DriverError;
namespace nc = ::nebius::common::v1;
namespace iam = ::nebius::iam::v1;
using std::chrono::milliseconds;

constexpr const char* kGrantType = "urn:ietf:params:oauth:grant-type:token-exchange";
constexpr const char* kAccessTokenType = "urn:ietf:params:oauth:token-type:access_token";
constexpr const char* kJwtType = "urn:ietf:params:oauth:token-type:jwt";
// The system's CA bundle (Debian's ca-certificates).
constexpr const char* kSystemRoots = "/etc/ssl/certs/ca-certificates.crt";

void ReadServiceError(const nc::ServiceError& e, CallError* out) {
  using D = nc::ServiceError;
  std::string text;
  switch (e.details_case()) {
    case D::kQuotaFailure:
      out->detail = Detail::kQuotaFailure;
      for (const auto& v : e.quota_failure().violations()) {
        text += (text.empty() ? "" : "; ") + std::string("quota ") + v.quota() +
                (v.limit().empty() ? "" : ": limit " + v.limit()) +
                (v.requested().empty() ? "" : ", requested " + v.requested()) +
                (v.message().empty() ? "" : " (" + v.message() + ")");
      }
      break;
    case D::kNotEnoughResources:
      out->detail = Detail::kNotEnoughResources;
      for (const auto& v : e.not_enough_resources().violations()) {
        text += (text.empty() ? "" : "; ") + std::string("not enough ") + v.resource_type() +
                (v.requested().empty() ? "" : " (requested " + v.requested() + ")") +
                (v.message().empty() ? "" : ": " + v.message());
      }
      break;
    case D::kTooManyRequests:
      out->detail = Detail::kTooManyRequests;
      text = "too many requests" +
             (e.too_many_requests().violation().empty() ? std::string()
                                                        : ": " + e.too_many_requests().violation());
      break;
    case D::kOperationConflict:
      out->detail = Detail::kOperationConflict;
      text = "another operation (" + e.operation_conflict().conflicting_operation_id() +
             ") is running on " + e.operation_conflict().resource_id();
      break;
    case D::kOperationAborted:
      out->detail = Detail::kOperationAborted;
      text = "operation aborted by " + e.operation_aborted().aborted_by_operation_id();
      break;
    case D::kBadRequest:
      out->detail = Detail::kOther;
      for (const auto& v : e.bad_request().violations()) {
        text += (text.empty() ? "" : "; ") + v.field() + ": " + v.message();
      }
      break;
    case D::kBadResourceState:
      out->detail = Detail::kOther;
      text = e.bad_resource_state().resource_id() + ": " + e.bad_resource_state().message();
      break;
    case D::DETAILS_NOT_SET:
      break;
    default:
      out->detail = Detail::kOther;
      break;
  }
  if (!text.empty()) out->detail_text += (out->detail_text.empty() ? "" : "; ") + text;
}

void ReadDetails(const ::google::rpc::Status& st, CallError* out) {
  for (const auto& any : st.details()) {
    nc::ServiceError e;
    if (any.Is<nc::ServiceError>() && any.UnpackTo(&e)) ReadServiceError(e, out);
  }
}

std::string NewIdempotencyKey() {
  return Poco::UUIDGenerator::defaultGenerator().createRandom().toString();
}

}  // namespace

std::string CallError::Describe() const {
  return GrpcCodeName(code) + (message.empty() ? "" : ": " + message) +
         (detail_text.empty() || message.find(detail_text) != std::string::npos
              ? ""
              : " (" + detail_text + ")");
}

CallError CallErrorOf(int code, const std::string& message, const std::string& details_bin) {
  CallError e;
  e.code = code;
  e.message = message;
  ::google::rpc::Status st;
  if (!details_bin.empty() && st.ParseFromString(details_bin)) ReadDetails(st, &e);
  return e;
}

CallError CallErrorOf(const ::google::rpc::Status& status) {
  CallError e;
  e.code = status.code();
  e.message = status.message();
  ReadDetails(status, &e);
  return e;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, bool plaintext) {
  if (plaintext) return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::SslCredentialsOptions ssl;
  if (std::optional<std::string> roots = drivers::ReadSmallFile(kSystemRoots)) {
    ssl.pem_root_certs = *roots;
  }
  return grpc::CreateChannel(address, grpc::SslCredentials(ssl));
}

// --- TokenSource ---

TokenSource::TokenSource(std::string token, std::string origin)
    : token_(std::move(token)), origin_(std::move(origin)) {}

TokenSource::TokenSource(ServiceAccountKey key, std::shared_ptr<grpc::Channel> channel)
    : origin_(key.origin),
      key_(std::move(key)),
      stub_(iam::TokenExchangeService::NewStub(std::move(channel))) {}

std::string TokenSource::Token(
    const std::function<grpc::Status(grpc::ClientContext*, const iam::ExchangeTokenRequest&,
                                     iam::CreateTokenResponse*)>& run,
    bool force_refresh) {
  if (!key_) return token_;
  const auto now = std::chrono::steady_clock::now();
  if (!force_refresh && !token_.empty() && now + std::chrono::seconds(60) < expires_) {
    return token_;
  }
  iam::ExchangeTokenRequest req;
  req.set_grant_type(kGrantType);
  req.set_requested_token_type(kAccessTokenType);
  req.set_subject_token(MakeJwt(*key_, static_cast<int64_t>(std::time(nullptr))));
  req.set_subject_token_type(kJwtType);
  iam::CreateTokenResponse resp;
  grpc::ClientContext ctx;
  run(&ctx, req, &resp);
  if (resp.access_token().empty()) {
    throw DriverError(GPUPROV_STATUS_AUTH,
                      "the Nebius token exchange returned no access token for the service "
                      "account of " + origin_);
  }
  token_ = resp.access_token();
  const int64_t lifetime = resp.expires_in() > 0 ? resp.expires_in() : 3600;
  expires_ = now + std::chrono::seconds(lifetime);
  return token_;
}

// --- NebiusClient ---

NebiusClient::NebiusClient(
    const Endpoints& endpoints, gpuprov::sdk::Host host, Options options,
    std::function<std::unique_ptr<TokenSource>(std::shared_ptr<grpc::Channel>)> make_tokens)
    : endpoints_(endpoints),
      host_(host),
      options_(std::move(options)),
      make_tokens_(std::move(make_tokens)) {
  compute_ = MakeChannel(endpoints_.compute, endpoints_.plaintext);
  vpc_ = endpoints_.vpc == endpoints_.compute ? compute_
                                              : MakeChannel(endpoints_.vpc, endpoints_.plaintext);
  tokens_channel_ = endpoints_.tokens == endpoints_.compute
                        ? compute_
                        : MakeChannel(endpoints_.tokens, endpoints_.plaintext);
  instances_ = ::nebius::compute::v1::InstanceService::NewStub(compute_);
  disks_ = ::nebius::compute::v1::DiskService::NewStub(compute_);
  platforms_ = ::nebius::compute::v1::PlatformService::NewStub(compute_);
  compute_ops_ = nc::OperationService::NewStub(compute_);
  subnets_ = ::nebius::vpc::v1::SubnetService::NewStub(vpc_);
  groups_ = ::nebius::vpc::v1::SecurityGroupService::NewStub(vpc_);
  rules_ = ::nebius::vpc::v1::SecurityRuleService::NewStub(vpc_);
  vpc_ops_ = nc::OperationService::NewStub(vpc_);
}

TokenSource& NebiusClient::Tokens() {
  if (!tokens_) {
    tokens_ = make_tokens_(tokens_channel_);
    host_.Debug("Nebius access token from " + tokens_->origin());
  }
  return *tokens_;
}

std::string NebiusClient::TokenOrigin() { return Tokens().origin(); }

std::string NebiusClient::Token(bool force_refresh) {
  TokenSource& t = Tokens();
  return t.Token(
      [&](grpc::ClientContext*, const ::nebius::iam::v1::ExchangeTokenRequest& req,
          ::nebius::iam::v1::CreateTokenResponse* resp) {
        Run({"exchange the service-account key of " + t.origin() + " for an access token",
             false, false, false},
            [&](grpc::ClientContext* c, std::function<void(grpc::Status)> done) {
              t.stub()->async()->Exchange(c, &req, resp, std::move(done));
            });
        return grpc::Status::OK;
      },
      force_refresh);
}

grpc::Status NebiusClient::RunOnce(
    grpc::ClientContext* ctx,
    const std::function<void(grpc::ClientContext*, std::function<void(grpc::Status)>)>& start) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    grpc::Status status;
  };
  auto state = std::make_shared<State>();
  start(ctx, [state](grpc::Status s) {
    std::lock_guard<std::mutex> lock(state->mu);
    state->status = std::move(s);
    state->done = true;
    state->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(state->mu);
  bool cancel_sent = false;
  while (!state->done) {
    state->cv.wait_for(lock, drivers::kCancelCheckInterval);
    if (!state->done && !cancel_sent && host_.Cancelled()) {
      // The callback still runs (with CANCELLED); the context must outlive it.
      ctx->TryCancel();
      cancel_sent = true;
    }
  }
  return state->status;
}

bool NebiusClient::Run(
    const Call& call,
    const std::function<void(grpc::ClientContext*, std::function<void(grpc::Status)>)>& start) {
  const std::string key = call.mutating ? NewIdempotencyKey() : "";
  drivers::Backoff backoff(host_, options_.retry, call.what);
  bool refreshed = false;
  for (;;) {
    if (host_.Cancelled()) throw DriverError(GPUPROV_STATUS_CANCELLED, call.what + ": cancelled");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
    if (call.authenticated) ctx.AddMetadata("authorization", "Bearer " + Token(refreshed));
    if (!key.empty()) ctx.AddMetadata("x-idempotency-key", key);
    const grpc::Status st = RunOnce(&ctx, start);
    if (st.ok()) return true;
    if (host_.Cancelled()) throw DriverError(GPUPROV_STATUS_CANCELLED, call.what + ": cancelled");
    const CallError err = CallErrorOf(static_cast<int>(st.error_code()), st.error_message(),
                                      st.error_details());
    if (err.code == grpc::StatusCode::NOT_FOUND && call.allow_not_found) return false;
    if (err.code == grpc::StatusCode::UNAUTHENTICATED && call.authenticated && !refreshed &&
        Tokens().Refreshable()) {
      host_.Debug(call.what + ": UNAUTHENTICATED, exchanging a new access token");
      refreshed = true;
      continue;
    }
    if (RetryableGrpc(err.code, err.detail) && backoff.Wait("Nebius answered " + err.Describe())) {
      continue;
    }
    gpuprov_type_status status = StatusOfGrpc(err.code, err.detail, err.message);
    std::string msg = call.what + ": Nebius answered " + err.Describe();
    if (RetryableGrpc(err.code, err.detail)) {
      status = GPUPROV_STATUS_TRANSIENT;
      msg += " (after " + std::to_string(backoff.failures() + 1) + " attempts)";
    }
    if (status == GPUPROV_STATUS_AUTH) {
      msg += ". Access token from " + Tokens().origin() +
             " was refused; set NEBIUS_IAM_TOKEN (nebius iam get-access-token) or a "
             "service-account credentials file (credentials_file in [clouds.nebius])";
    } else if (status == GPUPROV_STATUS_QUOTA) {
      msg += ". Request a larger quota in the Nebius console or choose another platform";
    } else if (status == GPUPROV_STATUS_CAPACITY) {
      msg += ". Try again later, another preset, or a project in another region";
    } else if (err.code == grpc::StatusCode::UNAVAILABLE && !endpoints_.plaintext) {
      msg += " (endpoint " + endpoints_.compute + ")";
    }
    throw DriverError(status, msg);
  }
}

nc::Operation NebiusClient::Wait(Service service, nc::Operation op, const std::string& what) {
  nc::OperationService::Stub& ops = service == Service::kCompute ? *compute_ops_ : *vpc_ops_;
  drivers::PollOptions poll{what + " (operation " + op.id() + ")", options_.poll_interval,
                            options_.operation_timeout};
  bool first = true;
  const bool done = drivers::PollUntil(host_, poll, [&](std::string* state) {
    if (!first) {
      nc::GetOperationRequest req;
      req.set_id(op.id());
      nc::Operation next;
      Run({what + " (operation " + op.id() + ")"},
          [&](grpc::ClientContext* c, std::function<void(grpc::Status)> d) {
            ops.async()->Get(c, &req, &next, std::move(d));
          });
      op = std::move(next);
    }
    first = false;
    *state = op.has_status() ? "done" : "running";
    return op.has_status();
  });
  if (!done) {
    throw DriverError(GPUPROV_STATUS_TRANSIENT,
                      what + ": operation " + op.id() + " is still running after " +
                          std::to_string(options_.operation_timeout.count() / 1000) +
                          " s; re-run to continue (gpuprov finds the VM by name)");
  }
  if (op.status().code() != 0) {
    const CallError err = CallErrorOf(op.status());
    gpuprov_type_status status = StatusOfGrpc(err.code, err.detail, err.message);
    std::string msg = what + ": operation " + op.id() + " failed: " + err.Describe();
    if (status == GPUPROV_STATUS_TRANSIENT) {
      // Nothing was retried: the operation's end is final for this run.
      status = GPUPROV_STATUS_FAILED;
      msg += "; re-run to try again";
    }
    if (status == GPUPROV_STATUS_QUOTA) {
      msg += ". Request a larger quota in the Nebius console or choose another platform";
    } else if (status == GPUPROV_STATUS_CAPACITY) {
      msg += ". Try again later, another preset, or a project in another region";
    }
    throw DriverError(status, msg);
  }
  return op;
}

}  // namespace gpuprov::nebius
