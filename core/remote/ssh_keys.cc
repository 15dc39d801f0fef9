#include "ssh_keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <vector>

#include "error.h"
#include "file_util.h"
#include "paths.h"

namespace gpuprov {
namespace {

std::string Errno(int err) { return std::strerror(err); }

std::string Quoted(const std::string& path) { return "'" + path + "'"; }

std::string OctalMode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

/// Closes a file descriptor on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  int get() const { return fd_; }
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

/// Removes a file on scope exit unless Keep() was called.
class TempFileRemover {
 public:
  explicit TempFileRemover(std::string path) : path_(std::move(path)) {}
  ~TempFileRemover() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  TempFileRemover(const TempFileRemover&) = delete;
  TempFileRemover& operator=(const TempFileRemover&) = delete;
  void Keep() { path_.clear(); }

 private:
  std::string path_;
};

void FsyncDir(const std::filesystem::path& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void CreateParentDir(const std::filesystem::path& path) {
  const std::filesystem::path parent = path.parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  if (std::filesystem::exists(parent, ec)) return;
  EnsureDir(parent);
}

/// Throws unless \a path is a regular file only its owner can access.
void CheckPrivateKeyFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      throw Error("private key " + Quoted(path) + " does not exist",
                  "name an existing key file, or leave the key setting unset so gpuprov "
                  "generates one");
    }
    throw Error("cannot read private key " + Quoted(path) + ": " + Errno(err),
                "check the path and its permissions");
  }
  if (const std::string reason = UnreadableFileReason(path, kPrivateKeyKind); !reason.empty()) {
    throw UsageError("private key " + Quoted(path) + " " + reason, "name the key file itself");
  }
  if ((st.st_mode & 077) != 0) {
    throw Error("private key " + Quoted(path) + " is accessible by other users (mode " +
                    OctalMode(st.st_mode) + "); SSH refuses such keys",
                "run: chmod 600 " + Quoted(path));
  }
}

/// Passphrase callback that records it was asked and refuses: gpuprov never prompts.
int RefusePassphrase(const char* /*prompt*/, char* /*buf*/, size_t /*len*/, int /*echo*/,
                     int /*verify*/, void* userdata) {
  *static_cast<bool*>(userdata) = true;
  return -1;
}

SshKeyPtr ImportPrivateKey(const std::string& path) {
  bool asked_passphrase = false;
  ssh_key raw = nullptr;
  int rc = ssh_pki_import_privkey_file(path.c_str(), nullptr, &RefusePassphrase, &asked_passphrase,
                                       &raw);
  SshKeyPtr key(raw);
  if (rc == SSH_OK && key != nullptr) return key;
  if (asked_passphrase) {
    throw Error("private key " + Quoted(path) + " is protected by a passphrase",
                "gpuprov needs a key without a passphrase: make one with `ssh-keygen -t "
                "ed25519 -N '' -f <file>` and name it, or leave the key setting unset so "
                "gpuprov generates one");
  }
  if (rc == SSH_EOF) {
    throw Error("cannot read private key " + Quoted(path),
                "check the path and that the file is readable by you");
  }
  throw Error("cannot load private key " + Quoted(path) + ": not a private key libssh can read",
              "name an OpenSSH or PEM private key file (not the .pub), e.g. one made by "
              "`ssh-keygen -t ed25519`");
}

SshKeyPtr ParsePublicKeyLine(const std::string& pubkey_line) {
  std::istringstream in(pubkey_line);
  std::string type;
  std::string base64;
  in >> type >> base64;
  const std::string hint =
      "give a public key line such as `ssh-ed25519 AAAA... comment` (the contents of a "
      ".pub file)";
  if (type.empty() || base64.empty()) {
    throw Error("not an SSH public key line: '" + pubkey_line + "'", hint);
  }
  const enum ssh_keytypes_e key_type = ssh_key_type_from_name(type.c_str());
  if (key_type == SSH_KEYTYPE_UNKNOWN) {
    throw Error("unknown SSH public key type '" + type + "'", hint);
  }
  ssh_key raw = nullptr;
  int rc = ssh_pki_import_pubkey_base64(base64.c_str(), key_type, &raw);
  SshKeyPtr key(raw);
  if (rc != SSH_OK || key == nullptr) {
    throw Error("cannot decode the SSH public key of type '" + type + "'", hint);
  }
  return key;
}

std::string Fingerprint(ssh_key key, enum ssh_publickey_hash_type type) {
  unsigned char* hash = nullptr;
  size_t hash_len = 0;
  if (ssh_get_publickey_hash(key, type, &hash, &hash_len) != SSH_OK || hash == nullptr) {
    throw Error("cannot compute the fingerprint of an SSH key",
                "check that the key is a valid public key");
  }
  // ssh_get_fingerprint_hash prefixes MD5 with "MD5:"; DigitalOcean shows bare hex.
  char* text = type == SSH_PUBLICKEY_HASH_MD5 ? ssh_get_hexa(hash, hash_len)
                                              : ssh_get_fingerprint_hash(type, hash, hash_len);
  ssh_clean_pubkey_hash(&hash);
  if (text == nullptr) {
    throw Error("cannot format the fingerprint of an SSH key", "retry; this is an internal error");
  }
  std::string result(text);
  ssh_string_free_char(text);
  return result;
}

/// Generates an ed25519 key and publishes it at \a path unless another process did first.
/// Returns false when \a path already existed.
bool GenerateKey(const std::string& path) {
  CreateParentDir(path);
  ssh_key raw = nullptr;
  if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &raw) != SSH_OK || raw == nullptr) {
    throw Error(
        "cannot generate an ed25519 key for " + Quoted(path),
        "retry; if it persists, make one with `ssh-keygen -t ed25519 -N '' -f " + path + "`");
  }
  SshKeyPtr key(raw);

  // mkostemp creates the file with mode 0600: the key is never readable by others, not even
  // while it is being written.
  std::string tmp = path + ".tmp.XXXXXX";
  std::vector<char> tmpl(tmp.begin(), tmp.end());
  tmpl.push_back('\0');
  int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw Error("cannot create the key file " + Quoted(path) + ": " + Errno(err),
                "check that its directory is writable by you");
  }
  FdCloser closer(fd);
  tmp.assign(tmpl.data());
  TempFileRemover remover(tmp);
  if (::fchmod(fd, 0600) != 0) {
    const int err = errno;
    throw Error("cannot set mode 0600 on " + Quoted(tmp) + ": " + Errno(err),
                "check the file system of " + Quoted(path));
  }
  // ssh_pki_export_privkey_file truncates and rewrites the existing file, keeping its mode.
  if (ssh_pki_export_privkey_file(key.get(), nullptr, nullptr, nullptr, tmp.c_str()) != SSH_OK) {
    throw Error("cannot write the key file " + Quoted(path),
                "check free disk space and that the directory is writable by you");
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    throw Error("cannot write the key file " + Quoted(path) + ": " + Errno(err),
                "check free disk space");
  }
  // link() fails when the name exists: a key another process published first is kept.
  if (::link(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    if (err == EEXIST) return false;
    // File systems without hard links: rename replaces, which only a concurrent generation
    // of the same file could notice.
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      const int rename_err = errno;
      throw Error("cannot create the key file " + Quoted(path) + ": " + Errno(rename_err),
                  "check that its directory is writable by you");
    }
    remover.Keep();
  }
  FsyncDir(std::filesystem::path(path).parent_path());
  WriteFileAtomic(path + ".pub", PublicKeyLine(key.get()) + "\n", 0644);
  return true;
}

}  // namespace

SshKeyPtr LoadPrivateKey(const std::string& private_key_path) {
  CheckPrivateKeyFile(private_key_path);
  return ImportPrivateKey(private_key_path);
}

std::string EnsureEd25519Key(const std::string& private_key_path) {
  if (private_key_path.empty()) {
    throw Error("no private key path given",
                "name a key file, e.g. ~/.gpu-provisioner/keys/id_ed25519");
  }
  struct stat st {};
  if (::stat(private_key_path.c_str(), &st) != 0) {
    const int err = errno;
    if (err != ENOENT) {
      throw Error("cannot read private key " + Quoted(private_key_path) + ": " + Errno(err),
                  "check the path and its permissions");
    }
    GenerateKey(private_key_path);
  }
  SshKeyPtr key = LoadPrivateKey(private_key_path);
  return PublicKeyLine(key.get());
}

std::string PublicKeyLine(ssh_key key, const std::string& comment) {
  char* base64 = nullptr;
  if (ssh_pki_export_pubkey_base64(key, &base64) != SSH_OK || base64 == nullptr) {
    throw Error("cannot export the public part of an SSH key",
                "check that the key file holds a valid key");
  }
  std::string line = std::string(ssh_key_type_to_char(ssh_key_type(key))) + " " + base64;
  ssh_string_free_char(base64);
  if (!comment.empty()) line += " " + comment;
  return line;
}

std::string PublicKeyFingerprintMd5(const std::string& pubkey_line) {
  SshKeyPtr key = ParsePublicKeyLine(pubkey_line);
  return Fingerprint(key.get(), SSH_PUBLICKEY_HASH_MD5);
}

std::string PublicKeyFingerprintSha256(const std::string& pubkey_line) {
  SshKeyPtr key = ParsePublicKeyLine(pubkey_line);
  return Fingerprint(key.get(), SSH_PUBLICKEY_HASH_SHA256);
}

std::string KeyFingerprintSha256(ssh_key key) {
  return Fingerprint(key, SSH_PUBLICKEY_HASH_SHA256);
}

}  // namespace gpuprov
