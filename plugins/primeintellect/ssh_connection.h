// SPDX-License-Identifier: Apache-2.0
//
// Prime Intellect reports how to reach a pod in its `sshConnection` field
// (REFERENCE.md §3.3, §9). The field is a JSON value of several shapes:
//
//   "root@135.23.125.123 -p 22"          the documented form
//   "ubuntu@1.2.3.4 -p 40123"            other users, remapped ports (container offers)
//   "root@1.2.3.4"                       no -p: port 22
//   null, "", [null], []                 not known yet
//   ["root@1.2.3.4 -p 22", ...]          a list (multi-node pods): the first usable entry
//
// This file turns that value into user, host and port. Accepted grammar of one string
// (tokens separated by blanks, in any order after the optional leading "ssh"):
//
//   [ssh] [USER@]HOST[:PORT] [-p PORT | -pPORT]
//
// HOST is a name, an IPv4 address or an IPv6 address (bare, or in brackets when a :PORT
// follows). PORT is 1..65535. A port given twice must agree. Anything else is malformed.
// Pure functions, no I/O.
#pragma once

#include <Poco/Dynamic/Var.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuprov::primeintellect {

struct SshConnection {
  std::string user;  ///< "" when the string names none (the caller picks a default)
  std::string host;  ///< without brackets for IPv6
  int port = 22;
  bool port_given = false;  ///< false when the string had no port (22 assumed)

  friend bool operator==(const SshConnection&, const SshConnection&) = default;
};

/// Parses one sshConnection string. On failure returns nullopt and, when \a error is not
/// null, says what is wrong (the message quotes the input; it holds no secret).
std::optional<SshConnection> ParseSshConnection(std::string_view text,
                                                std::string* error = nullptr);

/// The non-empty strings an sshConnection (or ip) field holds, in order: a string gives
/// itself; null, "", "null", "[null]" and [] give nothing; a JSON list (or a string holding
/// a JSON list) gives its non-null, non-empty string members.
std::vector<std::string> FieldStrings(const Poco::Dynamic::Var& field);

/// What a pod's sshConnection field says.
struct SshField {
  enum class Kind {
    kAbsent,     ///< null or an empty shape: not known yet
    kParsed,     ///< `connection` is set
    kMalformed,  ///< a string that is none of the accepted shapes; `error` says why
  };
  Kind kind = Kind::kAbsent;
  SshConnection connection;
  std::string error;
};

/// Reads a pod's sshConnection field: the first entry that parses wins; when entries exist
/// but none parses, the result is kMalformed with the first entry's error.
SshField ReadSshField(const Poco::Dynamic::Var& field);

}  // namespace gpuprov::primeintellect
