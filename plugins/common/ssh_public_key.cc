// SPDX-License-Identifier: Apache-2.0
#include "ssh_public_key.h"

#include <Poco/Base64Decoder.h>
#include <Poco/DigestEngine.h>
#include <Poco/MD5Engine.h>

#include <sstream>

#include "credentials.h"
#include "gpuprov/sdk.hpp"

namespace gpuprov::drivers {
namespace {

// The decoded blob, or "" when the text is not base64.
std::string DecodeBlob(const std::string& base64) {
  try {
    std::istringstream in(base64);
    Poco::Base64Decoder decoder(in);
    std::ostringstream out;
    out << decoder.rdbuf();
    return out.str();
  } catch (...) {
    return "";
  }
}

}  // namespace

SshPublicKey ParseSshPublicKey(const std::string& line, const std::string& field) {
  std::istringstream fields(line);
  SshPublicKey key;
  fields >> key.type >> key.base64;
  std::getline(fields, key.comment);
  key.comment = TrimSpace(key.comment);
  const bool known_type = key.type.rfind("ssh-", 0) == 0 || key.type.rfind("ecdsa-", 0) == 0 ||
                          key.type.rfind("sk-", 0) == 0;
  const std::string blob = known_type && !key.base64.empty() ? DecodeBlob(key.base64) : "";
  // The blob starts with a 4-byte length and the type name again.
  if (blob.size() < 4 + key.type.size() || blob.compare(4, key.type.size(), key.type) != 0) {
    throw gpuprov::sdk::DriverError(GPUPROV_STATUS_INVALID_INPUT,
                                    field +
                                        " is not an OpenSSH public key line "
                                        "(\"ssh-ed25519 AAAA... comment\")");
  }
  return key;
}

std::string DecodedBlob(const SshPublicKey& key) { return DecodeBlob(key.base64); }

std::string KeyIdentity(const SshPublicKey& key) { return key.type + " " + key.base64; }

std::string Md5Fingerprint(const SshPublicKey& key) {
  Poco::MD5Engine md5;
  md5.update(DecodedBlob(key));
  const Poco::DigestEngine::Digest& d = md5.digest();
  static const char* kHex = "0123456789abcdef";
  std::string fp;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) fp += ':';
    fp += kHex[d[i] >> 4];
    fp += kHex[d[i] & 0xf];
  }
  return fp;
}

}  // namespace gpuprov::drivers
