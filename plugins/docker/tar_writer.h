// SPDX-License-Identifier: Apache-2.0
//
// An in-memory ustar archive builder: enough to hand a few small files to
// Docker's PUT /containers/{id}/archive (for example a NoCloud seed).
#pragma once

#include <cstdint>
#include <ctime>
#include <set>
#include <string>
#include <string_view>

namespace gpuprov::docker {

/// Builds a POSIX ustar archive in memory. Entries are owned by uid/gid 0
/// ("root"). Adding a file also adds each missing parent directory (mode 0755)
/// before it, so the archive extracts into a tree that does not exist yet.
/// Paths are relative to the extraction point: a leading "/" or "./" is dropped.
class TarWriter {
 public:
  /// mtime is the modification time written into every header.
  explicit TarWriter(std::time_t mtime = std::time(nullptr));

  /// Adds a regular file. Throws std::invalid_argument for an empty path, a
  /// ".." or "." component, a path ustar cannot store (over 255 bytes, or no
  /// split into a 155-byte prefix and 100-byte name), or a file added twice.
  void AddFile(std::string_view path, std::string_view contents, uint32_t mode = 0644);

  /// Adds a directory (and its missing parents). Adding one twice is a no-op.
  void AddDirectory(std::string_view path, uint32_t mode = 0755);

  /// The archive so far, terminated by the two zero blocks ustar ends with.
  std::string Finish() const;

  /// Number of entries (directories included).
  size_t entry_count() const { return entry_count_; }

 private:
  void AddParents(const std::string& path);
  void AppendHeader(const std::string& path, char type, uint32_t mode, uint64_t size);

  std::time_t mtime_;
  std::string data_;
  std::set<std::string> directories_;
  std::set<std::string> files_;
  size_t entry_count_ = 0;
};

}  // namespace gpuprov::docker
