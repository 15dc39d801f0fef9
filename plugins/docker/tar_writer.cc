// SPDX-License-Identifier: Apache-2.0
#include "tar_writer.h"

#include <array>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace gpuprov::docker {
namespace {

constexpr size_t kBlock = 512;

// Offsets and widths of the ustar header fields (POSIX.1-1988).
constexpr size_t kNameOff = 0, kNameLen = 100;
constexpr size_t kModeOff = 100, kModeLen = 8;
constexpr size_t kUidOff = 108, kUidLen = 8;
constexpr size_t kGidOff = 116, kGidLen = 8;
constexpr size_t kSizeOff = 124, kSizeLen = 12;
constexpr size_t kMtimeOff = 136, kMtimeLen = 12;
constexpr size_t kChksumOff = 148, kChksumLen = 8;
constexpr size_t kTypeOff = 156;
constexpr size_t kMagicOff = 257;
constexpr size_t kVersionOff = 263;
constexpr size_t kUnameOff = 265, kUnameLen = 32;
constexpr size_t kGnameOff = 297, kGnameLen = 32;
constexpr size_t kDevMajorOff = 329, kDevMinorOff = 337, kDevLen = 8;
constexpr size_t kPrefixOff = 345, kPrefixLen = 155;

// Writes value as zero-padded octal filling width-1 bytes, then a NUL.
void PutOctal(char* field, size_t width, uint64_t value, const std::string& path) {
  std::vector<char> digits(width - 1, '0');
  for (size_t i = width - 1; i-- > 0;) {
    digits[i] = static_cast<char>('0' + (value & 7));
    value >>= 3;
  }
  if (value != 0) throw std::invalid_argument("tar: a field of " + path + " is too large");
  std::memcpy(field, digits.data(), width - 1);
  field[width - 1] = '\0';
}

void PutString(char* field, size_t width, std::string_view s) {
  if (s.empty()) return;  // an empty view's data() may be null, which memcpy may not be given
  std::memcpy(field, s.data(), s.size() < width ? s.size() : width);
}

// "/a//b/c/" and "./a/b/c" -> "a/b/c"; any other "." and every ".." are refused.
std::string Normalize(std::string_view raw) {
  std::string_view rest = raw;
  while (!rest.empty() && rest.front() == '/') rest.remove_prefix(1);
  if (rest.substr(0, 2) == "./") rest.remove_prefix(2);
  std::string out;
  size_t i = 0;
  while (i <= rest.size()) {
    size_t j = rest.find('/', i);
    if (j == std::string_view::npos) j = rest.size();
    std::string_view part = rest.substr(i, j - i);
    if (part == "." || part == "..") {
      throw std::invalid_argument("tar: path \"" + std::string(raw) +
                                  "\" has a \".\" or \"..\" component");
    }
    if (!part.empty()) {
      if (!out.empty()) out += '/';
      out += part;
    }
    i = j + 1;
  }
  if (out.empty()) throw std::invalid_argument("tar: empty path \"" + std::string(raw) + "\"");
  return out;
}

}  // namespace

TarWriter::TarWriter(std::time_t mtime) : mtime_(mtime) {}

void TarWriter::AddFile(std::string_view path, std::string_view contents, uint32_t mode) {
  std::string p = Normalize(path);
  if (files_.count(p) != 0 || directories_.count(p) != 0) {
    throw std::invalid_argument("tar: " + p + " was added twice");
  }
  AddParents(p);
  AppendHeader(p, '0', mode, contents.size());
  data_.append(contents.data(), contents.size());
  size_t pad = (kBlock - contents.size() % kBlock) % kBlock;
  data_.append(pad, '\0');
  files_.insert(p);
}

void TarWriter::AddDirectory(std::string_view path, uint32_t mode) {
  std::string p = Normalize(path);
  if (files_.count(p) != 0) throw std::invalid_argument("tar: " + p + " is already a file");
  if (directories_.count(p) != 0) return;
  AddParents(p);
  AppendHeader(p + "/", '5', mode, 0);
  directories_.insert(p);
}

void TarWriter::AddParents(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return;
  std::string parent = path.substr(0, slash);
  if (directories_.count(parent) == 0) AddDirectory(parent, 0755);
}

void TarWriter::AppendHeader(const std::string& path, char type, uint32_t mode, uint64_t size) {
  std::array<char, kBlock> h{};
  // A name over 100 bytes is split at a "/" into prefix (<= 155) and name (<= 100).
  std::string_view name = path, prefix;
  if (path.size() > kNameLen) {
    size_t split = std::string::npos;
    // The last byte is never a split point: a directory's trailing "/" stays in the name.
    for (size_t i = 0; i + 1 < path.size() && i <= kPrefixLen; ++i) {
      if (path[i] == '/' && path.size() - i - 1 <= kNameLen) {
        split = i;
        break;
      }
    }
    if (split == std::string::npos) {
      throw std::invalid_argument("tar: path too long for ustar: " + path);
    }
    prefix = std::string_view(path).substr(0, split);
    name = std::string_view(path).substr(split + 1);
  }
  PutString(&h[kNameOff], kNameLen, name);
  PutOctal(&h[kModeOff], kModeLen, mode & 07777, path);
  PutOctal(&h[kUidOff], kUidLen, 0, path);
  PutOctal(&h[kGidOff], kGidLen, 0, path);
  PutOctal(&h[kSizeOff], kSizeLen, size, path);
  PutOctal(&h[kMtimeOff], kMtimeLen, mtime_ < 0 ? 0 : static_cast<uint64_t>(mtime_), path);
  h[kTypeOff] = type;
  std::memcpy(&h[kMagicOff], "ustar", 6);  // with its NUL
  std::memcpy(&h[kVersionOff], "00", 2);
  PutString(&h[kUnameOff], kUnameLen, "root");
  PutString(&h[kGnameOff], kGnameLen, "root");
  PutOctal(&h[kDevMajorOff], kDevLen, 0, path);
  PutOctal(&h[kDevMinorOff], kDevLen, 0, path);
  PutString(&h[kPrefixOff], kPrefixLen, prefix);
  // The checksum is the byte sum of the header with the checksum field as spaces.
  std::memset(&h[kChksumOff], ' ', kChksumLen);
  uint32_t sum = 0;
  for (char c : h) sum += static_cast<unsigned char>(c);
  PutOctal(&h[kChksumOff], 7, sum, path);  // six digits and a NUL; the space stays
  data_.append(h.data(), h.size());
  ++entry_count_;
}

std::string TarWriter::Finish() const {
  std::string out = data_;
  out.append(2 * kBlock, '\0');
  return out;
}

}  // namespace gpuprov::docker
