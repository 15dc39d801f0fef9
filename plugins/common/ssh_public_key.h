// SPDX-License-Identifier: Apache-2.0
//
// OpenSSH public key lines ("ssh-ed25519 AAAA... comment") as clouds take them: checked once
// where the request enters, compared without their comment, and named by the MD5 fingerprint
// that cloud consoles show (DigitalOcean, OpenStack-based clouds such as Hyperstack).
#pragma once

#include <string>

namespace gpuprov::drivers {

struct SshPublicKey {
  std::string type;     ///< "ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "sk-..."
  std::string base64;   ///< the key blob as written in the line
  std::string comment;  ///< the rest of the line, trimmed ("" when none)
};

/// Parses a public key line; throws DriverError(INVALID_INPUT) naming `field` when it is not
/// "<type> <base64 blob> [comment]" with a blob that starts with its own type name.
SshPublicKey ParseSshPublicKey(const std::string& line,
                               const std::string& field = "ssh_public_key");

/// "<type> <base64>": the key without its comment, for comparing keys.
std::string KeyIdentity(const SshPublicKey& key);

/// The decoded key blob (bytes), for clouds that name a key by another digest of it.
std::string DecodedBlob(const SshPublicKey& key);

/// MD5 of the decoded blob in lower-case colon hex ("aa:bb:..."), as `ssh-keygen -E md5`.
std::string Md5Fingerprint(const SshPublicKey& key);

}  // namespace gpuprov::drivers
