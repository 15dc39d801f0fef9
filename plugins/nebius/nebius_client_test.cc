// SPDX-License-Identifier: Apache-2.0
// Reading Nebius errors: the ServiceError details of a gRPC status (grpc-status-details-bin)
// and of a failed Operation.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpuprov::nebius
