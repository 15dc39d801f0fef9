// SPDX-License-Identifier: Apache-2.0
//
// The nebius driver's reading of a failed call: the serialized google.rpc.Status of the
// grpc-status-details-bin trailer (protobuf) with its ServiceError details
// (plugins/nebius/nebius_client.cc CallErrorOf), and the credentials file it reads.
#include "driver_fuzz.h"
#include "fuzz_input.h"
#include "nebius_client.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace f = gpuprov::fuzz;
  namespace n = gpuprov::nebius;
  const std::string bytes = f::Text(data, size);
  f::Try([&] {
    n::CallError e = n::CallErrorOf(8, "resource exhausted", bytes);
    (void)e.Describe();
  });
  f::Try([&] {
    google::rpc::Status status;
    if (status.ParseFromString(bytes)) (void)n::CallErrorOf(status).Describe();
  });
  f::Try([&] { (void)n::ParseCredentialsFile(bytes, "credentials.json"); });
  return 0;
}
