// SPDX-License-Identifier: Apache-2.0
#include "ssh_public_key.h"

#include <gtest/gtest.h>

#include "gpuprov/sdk.hpp"

namespace gpuprov::drivers {
namespace {

// ssh-keygen -E md5 -lf of this key prints this fingerprint.
constexpr const char* kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF test@gpuprov";

TEST(SshPublicKey, SplitsTypeBlobAndComment) {
  SshPublicKey k = ParseSshPublicKey(std::string(kKey) + "  \n");
  EXPECT_EQ(k.type, "ssh-ed25519");
  EXPECT_EQ(k.comment, "test@gpuprov");
  EXPECT_EQ(KeyIdentity(k),
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF");
}

TEST(SshPublicKey, CommentDoesNotChangeTheFingerprint) {
  const std::string fp = Md5Fingerprint(ParseSshPublicKey(kKey));
  EXPECT_EQ(fp, "ec:7a:06:74:b7:97:7b:30:52:63:82:56:53:6c:c5:5c");
  EXPECT_EQ(
      fp, Md5Fingerprint(ParseSshPublicKey(
              "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF")));
}

TEST(SshPublicKey, RefusesWhatIsNotAKeyNamingTheField) {
  for (const char* bad :
       {"", "hello", "ssh-ed25519", "ssh-ed25519 !!!notbase64",
        "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF",
        "-----BEGIN OPENSSH PRIVATE KEY-----"}) {
    try {
      ParseSshPublicKey(bad, "public_key");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const gpuprov::sdk::DriverError& e) {
      EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
      EXPECT_NE(std::string(e.what()).find("public_key is not an OpenSSH"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace gpuprov::drivers
