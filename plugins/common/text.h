// SPDX-License-Identifier: Apache-2.0
//
// Small ASCII text helpers every driver used to write for itself: case, squashing of the
// separators cloud catalogues spell differently, prefix tests. Locale-free (bytes >= 0x80
// pass through unchanged).
#pragma once

#include <string>
#include <string_view>

namespace gpuprov::drivers {

/// `s` with A-Z turned to a-z.
std::string Lower(std::string_view s);

/// `s` with a-z turned to A-Z.
std::string Upper(std::string_view s);

/// Upper(s) without ' ', '-' and '_': the key catalogues compare GPU names by ("RTX A6000",
/// "rtx-a6000" and "RTX_A6000" all read "RTXA6000").
std::string Squash(std::string_view s);

/// True when `s` starts with `prefix`.
bool StartsWith(std::string_view s, std::string_view prefix);

/// True when Lower(s) contains Lower(word).
bool ContainsNoCase(std::string_view s, std::string_view word);

/// `s` without its trailing full stops and spaces, so that ". <more>" can follow.
std::string NoFullStop(std::string_view s);

}  // namespace gpuprov::drivers
