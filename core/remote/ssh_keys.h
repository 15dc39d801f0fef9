// SSH key files of gpuprov: the ed25519 key it generates (docs/design.md §5, `keys/`), a key
// the user names instead, and the fingerprints clouds and OpenSSH print for public keys.
#pragma once

#include <libssh/libssh.h>

#include <memory>
#include <string>
#include <type_traits>

namespace gpuprov {

/// Frees a libssh key.
struct SshKeyDeleter {
  void operator()(ssh_key key) const { ssh_key_free(key); }
};
using SshKeyPtr = std::unique_ptr<std::remove_pointer_t<ssh_key>, SshKeyDeleter>;

/// Makes sure a usable private key exists at \a private_key_path and returns its public key
/// line (`<type> <base64> gpuprov`, e.g. `ssh-ed25519 AAAA... gpuprov`).
///
/// Missing file: generates an ed25519 key, writes it in OpenSSH format with mode 0600 (the
/// parent directory is created with mode 0700 when missing) and writes the public key line to
/// `<path>.pub` (mode 0644). The key file appears complete or not at all; when two processes
/// generate at once, the first key written wins and both return it.
/// Present file: loaded as is (any key type libssh reads, e.g. one made by ssh-keygen); its
/// `.pub` is neither read nor written.
/// Throws Error when the file is accessible by group or others (OpenSSH refuses such keys
/// too), is passphrase-protected, or cannot be read or written.
std::string EnsureEd25519Key(const std::string& private_key_path);

/// Loads the unencrypted private key at \a private_key_path after checking that only its owner
/// can access it. Throws Error as EnsureEd25519Key does for a present file, and when the file
/// is missing.
SshKeyPtr LoadPrivateKey(const std::string& private_key_path);

/// The public key line `<type> <base64> <comment>` of \a key (private or public).
std::string PublicKeyLine(ssh_key key, const std::string& comment = "gpuprov");

/// MD5 fingerprint of a public key line as DigitalOcean shows it: 16 lowercase hex bytes
/// separated by colons (`43:51:43:a1:...`), without OpenSSH's `MD5:` prefix.
/// Throws Error when \a pubkey_line is not `<type> <base64> [comment]` of a known key type.
std::string PublicKeyFingerprintMd5(const std::string& pubkey_line);

/// SHA256 fingerprint of a public key line as OpenSSH prints it: `SHA256:` followed by
/// unpadded base64. Throws Error as PublicKeyFingerprintMd5 does.
std::string PublicKeyFingerprintSha256(const std::string& pubkey_line);

/// SHA256 fingerprint (`SHA256:...`) of a libssh key (for host keys).
std::string KeyFingerprintSha256(ssh_key key);

}  // namespace gpuprov
