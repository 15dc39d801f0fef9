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

TEST(SshPublicKey, RsaFingerprintAndSurroundingSpace) {
  // Expected value printed by `ssh-keygen -l -E md5 -f key.pub` for this key.
  EXPECT_EQ(Md5Fingerprint(ParseSshPublicKey(
                "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC8WtZgLU3CfzkgSP4P6zxy3xEZ0g+lDFt0mIpzmSWl+5hy1HRkTgK6"
                "JTShftHI0J+qMiMmIjYwMcI6Vf2YmTxFhyDnX6q23Au2vQIEFS6CSd0UvDR1fPzgCQ9tvCcnxFkSya1bftoIk89BW3Xz"
                "x/adFxDC2kQD+Pw0cO0KM49btjm1Qb6NJ5extY9sJuqUc3g57AhqPDmwBasVwe6449b3+7TJVavB6MTL8XAm04KgfaG7"
                "WdTEtuSyGv7iO1hzEtwXzje1NLfwdD7PezFQ9NLxy01+jBfQjiGPPWGH+b5vvYzIEIzQBdQmBGHdCbCLfosE5mrPLLrV"
                "56B8NMT4HM+x rsa@gpuprov")),
            "fc:74:f2:69:80:a3:c7:66:a1:9d:14:7b:f9:89:4f:c2");
  const std::string line(kKey);
  EXPECT_EQ(Md5Fingerprint(ParseSshPublicKey("  " + line.substr(0, line.rfind(' ')) + "\n")),
            "ec:7a:06:74:b7:97:7b:30:52:63:82:56:53:6c:c5:5c");
  // An RSA blob under the ed25519 type name.
  EXPECT_THROW(ParseSshPublicKey("ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQABAAAB"),
               gpuprov::sdk::DriverError);
}

TEST(SshPublicKey, RefusesWhatIsNotAKeyNamingTheField) {
  for (const char* bad :
       {"", "hello", "not a key", "ssh-ed25519", "ssh-ed25519 !!!notbase64",
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
