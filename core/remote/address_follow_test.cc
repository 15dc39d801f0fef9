#include "address_follow.h"

#include <gtest/gtest.h>

namespace gpuprov {
namespace {

CloudVm Live(const std::string& state, const std::string& public_ip) {
  CloudVm vm;
  vm.id = "i-1";
  vm.name = "n";
  vm.state = state;
  vm.public_ip = public_ip;
  return vm;
}

TEST(DecideAddress, AnAnsweringRecordedAddressIsKeptWithoutAskingTheCloud) {
  EXPECT_EQ(DecideAddress("203.0.113.5", true, std::nullopt).action, AddressAction::kKeep);
}

TEST(DecideAddress, ARunningVmAtAnotherAddressIsFollowed) {
  const AddressDecision d = DecideAddress("203.0.113.5", false, Live("running", "198.51.100.7"));
  EXPECT_EQ(d.action, AddressAction::kFollow);
  EXPECT_EQ(d.reason, "the cloud reports 198.51.100.7, not the recorded 203.0.113.5");
}

TEST(DecideAddress, TheSameAddressIsKeptSoTheConnectionReportsWhyItFails) {
  EXPECT_EQ(DecideAddress("203.0.113.5", false, Live("running", "203.0.113.5")).action,
            AddressAction::kKeep);
}

TEST(DecideAddress, NoPublicAddressFromTheCloudKeepsTheRecordedOne) {
  EXPECT_EQ(DecideAddress("203.0.113.5", false, Live("running", "")).action,
            AddressAction::kKeep);
}

TEST(DecideAddress, AStoppedOrPendingVmIsNotRunning) {
  const AddressDecision d = DecideAddress("203.0.113.5", false, Live("stopped", ""));
  EXPECT_EQ(d.action, AddressAction::kNotRunning);
  EXPECT_EQ(d.reason, "the VM is stopped, not running");
  EXPECT_EQ(DecideAddress("203.0.113.5", false, Live("pending", "198.51.100.7")).action,
            AddressAction::kNotRunning);
}

TEST(DecideAddress, AMissingOrTerminatedVmIsGone) {
  EXPECT_EQ(DecideAddress("203.0.113.5", false, std::nullopt).action, AddressAction::kGone);
  EXPECT_EQ(DecideAddress("203.0.113.5", false, Live("terminated", "")).action,
            AddressAction::kGone);
}

}  // namespace
}  // namespace gpuprov
