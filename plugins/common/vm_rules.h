// SPDX-License-Identifier: Apache-2.0
//
// Rules every cloud has for what a driver sends it, kept as data per cloud and checked here:
// VM names and user data (size and encoding).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpuprov::drivers {

/// What a cloud accepts as a VM name.
struct VmNameRules {
  std::string what = "a VM name";  ///< how the message names it: "a DigitalOcean droplet name"
  size_t max_length = 63;
  bool lower_case_only = false;      ///< letters a-z only
  bool letter_first = false;         ///< the first character is a letter (else letter or digit)
  std::string punctuation = "-";     ///< allowed besides letters and digits
  bool any_visible = false;          ///< any visible character (the charset rules are off)
  std::string note = "";             ///< appended in parentheses, e.g. why the length is short
};

/// Throws DriverError(INVALID_INPUT) naming the rule when `name` breaks `rules`:
/// "VM name \"x\" is not usable as <what>: use 1-63 letters, digits and '-', starting and
/// ending with a letter or digit". The last character is always a letter or digit unless
/// any_visible is set.
void ValidateVmName(const std::string& name, const VmNameRules& rules);

/// Throws DriverError(INVALID_INPUT) when user_data is larger than `max_bytes` ("user_data is
/// N bytes; <cloud> accepts at most M bytes (M/1024 KiB) of <form>: shorten the boot script or have it
/// download the rest") or is not UTF-8 text (clouds take it inside a JSON string or as text).
void CheckUserData(std::string_view user_data, size_t max_bytes, const std::string& cloud,
                   const std::string& form = "raw user data");
/// The size check alone, for user data a driver sends as bytes (gzipped, base64'd on the wire).
void CheckUserDataSize(std::string_view user_data, size_t max_bytes, const std::string& cloud,
                       const std::string& form);

/// True for well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF).
bool IsUtf8(std::string_view text);

/// Standard base64 on one line (no line breaks), as EC2's UserData wants it.
std::string Base64(std::string_view data);

/// \a data gzipped (RFC 1952) by zopfli (zopfli_gzip.h): user data a cloud takes compressed
/// (cloud-init unpacks gzip user data). The same input gives the same bytes, and the host's
/// measure of the gzipped script (core/gzip.h, its own link unit) uses the same code.
std::string Gzip(std::string_view data);

}  // namespace gpuprov::drivers
