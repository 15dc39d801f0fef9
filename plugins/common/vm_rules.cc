// SPDX-License-Identifier: Apache-2.0
#include "vm_rules.h"

#include <Poco/Base64Encoder.h>

#include <sstream>

#include "gpuprov/sdk.hpp"
#include "zopfli_gzip.h"

namespace gpuprov::drivers {

using gpuprov::sdk::DriverError;

namespace {

bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsLetter(char c, bool lower_only) { return IsLower(c) || (!lower_only && c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string Punctuation(const std::string& chars) {
  std::string out;
  for (size_t i = 0; i < chars.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == chars.size() ? " and " : ", ") + std::string("'") + chars[i] + "'";
  }
  return out;
}

}  // namespace

void ValidateVmName(const std::string& name, const VmNameRules& rules) {
  bool ok = !name.empty() && name.size() <= rules.max_length;
  std::string rule;
  if (rules.any_visible) {
    for (char c : name) {
      const auto u = static_cast<unsigned char>(c);
      ok = ok && u > 0x20 && u != 0x7f;
    }
    rule = "1-" + std::to_string(rules.max_length) + " visible characters";
  } else {
    auto alnum = [&](char c) { return IsLetter(c, rules.lower_case_only) || IsDigit(c); };
    for (char c : name) ok = ok && (alnum(c) || rules.punctuation.find(c) != std::string::npos);
    ok = ok && (rules.letter_first ? IsLetter(name.front(), rules.lower_case_only)
                                   : alnum(name.front()));
    ok = ok && alnum(name.back());
    rule = "1-" + std::to_string(rules.max_length) +
           (rules.lower_case_only ? " lower-case letters" : " letters") + ", digits" +
           (rules.punctuation.empty() ? "" : " and " + Punctuation(rules.punctuation)) +
           (rules.letter_first ? ", starting with a letter and ending with a letter or digit"
                               : ", starting and ending with a letter or digit");
  }
  if (!ok) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "VM name \"" + name + "\" is not usable as " + rules.what + ": use " + rule +
                          (rules.note.empty() ? "" : " (" + rules.note + ")"));
  }
}

bool IsUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t extra = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= text.size()) return false;  // cut short
    for (size_t k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static const uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

void CheckUserDataSize(std::string_view user_data, size_t max_bytes, const std::string& cloud,
                       const std::string& form) {
  if (user_data.size() > max_bytes) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "user_data is " + std::to_string(user_data.size()) + " bytes; " + cloud +
                          " accepts at most " + std::to_string(max_bytes) + " bytes" +
                          (max_bytes % 1024 == 0 ? " (" + std::to_string(max_bytes / 1024) + " KiB)"
                                                 : std::string()) +
                          " of " + form +
                          ": shorten the boot script or have it download the rest");
  }
}

void CheckUserData(std::string_view user_data, size_t max_bytes, const std::string& cloud,
                   const std::string& form) {
  CheckUserDataSize(user_data, max_bytes, cloud, form);
  if (!IsUtf8(user_data)) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "user_data is not UTF-8 text; " + cloud +
                          " takes a boot script as text (gzip'd parts must be base64'd)");
  }
}

std::string Base64(std::string_view data) {
  std::ostringstream out;
  Poco::Base64Encoder enc(out);
  enc.rdbuf()->setLineLength(0);
  enc.write(data.data(), static_cast<std::streamsize>(data.size()));
  enc.close();
  return out.str();
}

std::string Gzip(std::string_view data) { return zopfli_gzip::Gzip(data); }

}  // namespace gpuprov::drivers
