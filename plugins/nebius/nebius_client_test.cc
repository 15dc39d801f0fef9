// SPDX-License-Identifier: Apache-2.0
// Reading Nebius errors: the ServiceError details of a gRPC status (grpc-status-details-bin)
// and of a failed Operation.
#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/SocketAddress.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "google/rpc/status.pb.h"
#include "nebius/common/v1/error.pb.h"
#include "nebius_client.h"

namespace gpuprov::nebius {
namespace {

namespace nc = ::nebius::common::v1;

::google::rpc::Status StatusWith(int code, const std::string& message, const nc::ServiceError& e) {
  ::google::rpc::Status st;
  st.set_code(code);
  st.set_message(message);
  st.add_details()->PackFrom(e);
  return st;
}

TEST(NebiusErrors, QuotaFailureDetail) {
  nc::ServiceError e;
  e.set_service("compute");
  auto* v = e.mutable_quota_failure()->add_violations();
  v->set_quota("compute.instance.gpu.h100");
  v->set_limit("0");
  v->set_requested("1");
  const auto st = StatusWith(8, "quota exceeded", e);
  const CallError err = CallErrorOf(8, st.message(), st.SerializeAsString());
  EXPECT_EQ(err.detail, Detail::kQuotaFailure);
  EXPECT_NE(err.detail_text.find("compute.instance.gpu.h100"), std::string::npos);
  EXPECT_NE(err.Describe().find("RESOURCE_EXHAUSTED: quota exceeded"), std::string::npos);
  EXPECT_EQ(StatusOfGrpc(err.code, err.detail, err.message), GPUPROV_STATUS_QUOTA);
}

TEST(NebiusErrors, NotEnoughResourcesAndThrottling) {
  nc::ServiceError e;
  e.mutable_not_enough_resources()->add_violations()->set_resource_type("gpu-h100-sxm");
  auto st = StatusWith(8, "no capacity", e);
  CallError err = CallErrorOf(8, st.message(), st.SerializeAsString());
  EXPECT_EQ(err.detail, Detail::kNotEnoughResources);
  EXPECT_EQ(StatusOfGrpc(err.code, err.detail, err.message), GPUPROV_STATUS_CAPACITY);

  nc::ServiceError t;
  t.mutable_too_many_requests()->set_violation("rate");
  st = StatusWith(8, "slow down", t);
  err = CallErrorOf(8, st.message(), st.SerializeAsString());
  EXPECT_EQ(err.detail, Detail::kTooManyRequests);
  EXPECT_TRUE(RetryableGrpc(err.code, err.detail));
}

TEST(NebiusErrors, NoOrUnreadableDetails) {
  CallError err = CallErrorOf(14, "unavailable", "");
  EXPECT_EQ(err.detail, Detail::kNone);
  err = CallErrorOf(14, "unavailable", "\xff\xfe not a proto");
  EXPECT_EQ(err.detail, Detail::kNone);
  EXPECT_EQ(err.Describe(), "UNAVAILABLE: unavailable");
}

TEST(NebiusErrors, FailedOperationStatus) {
  nc::ServiceError e;
  e.mutable_operation_conflict()->set_conflicting_operation_id("op-1");
  e.mutable_operation_conflict()->set_resource_id("computeinstance-1");
  const CallError err = CallErrorOf(StatusWith(9, "busy", e));
  EXPECT_EQ(err.code, 9);
  EXPECT_EQ(err.detail, Detail::kOperationConflict);
  EXPECT_NE(err.detail_text.find("op-1"), std::string::npos);
}

// --- calls: deadlines and Ctrl-C ------------------------------------------------

// A host whose cancel flag the test sets.
struct TestHost {
  std::atomic<bool> cancel{false};
  gpuprov_type_host_api api{};
  TestHost() {
    api.struct_size = sizeof(api);
    api.host_ctx = this;
    api.log = [](void*, gpuprov_type_log_level, const char*, size_t) {};
    api.progress = [](void*, const char*, size_t) {};
    api.cancelled = [](void* ctx) { return static_cast<TestHost*>(ctx)->cancel.load(); };
  }
};

// A loopback port that accepts TCP connections (the kernel's backlog) and never answers: a
// gRPC call to it stays in flight until its deadline or a cancel.
struct SilentServer {
  Poco::Net::ServerSocket socket{Poco::Net::SocketAddress("127.0.0.1", 0)};
  std::string address() const { return "127.0.0.1:" + std::to_string(socket.address().port()); }
};

gpuprov_type_status ListInstances(NebiusClient& client) {
  ::nebius::compute::v1::ListInstancesRequest req;
  req.set_parent_id("project-e00test");
  ::nebius::compute::v1::ListInstancesResponse resp;
  try {
    client.Run({"list instances"}, [&](grpc::ClientContext* c, std::function<void(grpc::Status)> d) {
      client.instances().async()->List(c, &req, &resp, std::move(d));
    });
  } catch (const gpuprov::sdk::DriverError& e) {
    return e.status();
  }
  return GPUPROV_STATUS_OK;
}

std::unique_ptr<NebiusClient> ClientFor(const std::string& address, TestHost& host,
                                        std::chrono::milliseconds call_timeout) {
  NebiusClient::Options o;
  o.call_timeout = call_timeout;
  o.retry = drivers::RetryPolicy::Fast();
  o.retry.max_attempts = 2;
  return std::make_unique<NebiusClient>(
      ParseEndpoint(address), gpuprov::sdk::Host(&host.api), o,
      [](std::shared_ptr<grpc::Channel>) { return std::make_unique<TokenSource>("t", "test"); });
}

TEST(NebiusCalls, CtrlCCancelsAnInFlightCall) {
  SilentServer silent;
  TestHost host;
  auto client = ClientFor(silent.address(), host, std::chrono::seconds(60));
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    host.cancel = true;
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ListInstances(*client), GPUPROV_STATUS_CANCELLED);
  const auto took = std::chrono::steady_clock::now() - start;
  canceller.join();
  EXPECT_GE(took, std::chrono::milliseconds(250));
  EXPECT_LT(took, std::chrono::seconds(2));
}

TEST(NebiusCalls, EveryCallHasADeadline) {
  SilentServer silent;
  TestHost host;
  auto client = ClientFor(silent.address(), host, std::chrono::milliseconds(300));
  const auto start = std::chrono::steady_clock::now();
  // DEADLINE_EXCEEDED twice (max_attempts 2), then TRANSIENT.
  EXPECT_EQ(ListInstances(*client), GPUPROV_STATUS_TRANSIENT);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(550));
  EXPECT_LT(took, std::chrono::seconds(5));
}

}  // namespace
}  // namespace gpuprov::nebius
