// SPDX-License-Identifier: Apache-2.0
#include "ssh_connection.h"

#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Parser.h>

#include <algorithm>
#include <cctype>

namespace gpuprov::primeintellect {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::vector<std::string_view> Tokens(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && IsBlank(s[i])) ++i;
    size_t start = i;
    while (i < s.size() && !IsBlank(s[i])) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

// 1..65535, digits only.
std::optional<int> ParsePort(std::string_view s) {
  if (s.empty() || s.size() > 5) return std::nullopt;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v < 1 || v > 65535) return std::nullopt;
  return v;
}

// A login name as ssh and Linux accept it: letters, digits, '_', '-', '.'; not starting
// with '-'.
bool ValidUser(std::string_view u) {
  if (u.empty() || u.size() > 64 || u.front() == '-') return false;
  for (char c : u) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

// A DNS name, IPv4 address (both: letters, digits, '-', '.', '_') or an IPv6 address
// (hex digits, ':', '.'; checked loosely: at least two ':').
bool ValidHost(std::string_view h, bool* is_ipv6) {
  *is_ipv6 = false;
  if (h.empty() || h.size() > 253 || h.front() == '-') return false;
  size_t colons = 0;
  bool name_chars = true, v6_chars = true;
  for (char c : h) {
    auto u = static_cast<unsigned char>(c);
    if (c == ':') ++colons;
    if (!(std::isalnum(u) || c == '-' || c == '.' || c == '_')) name_chars = false;
    if (!(std::isxdigit(u) || c == ':' || c == '.')) v6_chars = false;
  }
  if (colons == 0) return name_chars;
  *is_ipv6 = true;
  return v6_chars && colons >= 2;
}

std::optional<SshConnection> Fail(std::string* error, std::string_view text,
                                  const std::string& why) {
  if (error) *error = "sshConnection \"" + std::string(text) + "\": " + why;
  return std::nullopt;
}

void CollectStrings(const Poco::Dynamic::Var& v, std::vector<std::string>* out, int depth);

void CollectFromString(const std::string& raw, std::vector<std::string>* out, int depth) {
  std::string_view s = Trim(raw);
  if (s.empty() || s == "null" || s == "None") return;
  if (s.front() == '[' && depth < 3) {
    // A list serialised into a string, e.g. "[null]" or "[\"root@h -p 22\"]".
    try {
      Poco::JSON::Parser parser;
      Poco::Dynamic::Var parsed = parser.parse(std::string(s));
      CollectStrings(parsed, out, depth + 1);
      return;
    } catch (const Poco::Exception&) {
    } catch (const std::exception&) {
    }
    // Not JSON: let the string parser reject it with a clear message.
  }
  out->emplace_back(s);
}

void CollectStrings(const Poco::Dynamic::Var& v, std::vector<std::string>* out, int depth) {
  if (v.isEmpty()) return;
  if (v.type() == typeid(Poco::JSON::Array::Ptr)) {
    Poco::JSON::Array::Ptr arr = v.extract<Poco::JSON::Array::Ptr>();
    if (arr.isNull()) return;
    for (size_t i = 0; i < arr->size(); ++i) CollectStrings(arr->get(i), out, depth + 1);
    return;
  }
  if (v.type() == typeid(Poco::JSON::Array)) {
    const auto& arr = v.extract<Poco::JSON::Array>();
    for (size_t i = 0; i < arr.size(); ++i) CollectStrings(arr.get(i), out, depth + 1);
    return;
  }
  if (v.isArray()) {  // std::vector<Var>
    for (size_t i = 0; i < v.size(); ++i) CollectStrings(v[i], out, depth + 1);
    return;
  }
  if (v.isString()) {
    CollectFromString(v.convert<std::string>(), out, depth);
  }
  // Numbers, booleans, objects: not a connection string.
}

}  // namespace

std::optional<SshConnection> ParseSshConnection(std::string_view text, std::string* error) {
  std::vector<std::string_view> tokens = Tokens(text);
  if (tokens.empty()) return Fail(error, text, "empty");
  size_t i = 0;
  if (tokens[0] == "ssh") ++i;

  SshConnection c;
  std::optional<std::string_view> target;
  std::optional<int> flag_port;
  for (; i < tokens.size(); ++i) {
    std::string_view t = tokens[i];
    if (t == "-p") {
      if (i + 1 >= tokens.size()) return Fail(error, text, "-p without a port");
      std::optional<int> p = ParsePort(tokens[++i]);
      if (!p) return Fail(error, text, "port \"" + std::string(tokens[i]) + "\" is not 1..65535");
      if (flag_port && *flag_port != *p) return Fail(error, text, "two different -p ports");
      flag_port = p;
    } else if (t.size() > 2 && t.substr(0, 2) == "-p") {
      std::optional<int> p = ParsePort(t.substr(2));
      if (!p) return Fail(error, text, "port \"" + std::string(t.substr(2)) + "\" is not 1..65535");
      if (flag_port && *flag_port != *p) return Fail(error, text, "two different -p ports");
      flag_port = p;
    } else if (t.front() == '-') {
      return Fail(error, text, "unexpected option \"" + std::string(t) + "\"");
    } else if (target) {
      return Fail(error, text, "unexpected \"" + std::string(t) + "\" after the address");
    } else {
      target = t;
    }
  }
  if (!target) return Fail(error, text, "no user@host");

  std::string_view addr = *target;
  size_t at = addr.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view user = addr.substr(0, at);
    if (!ValidUser(user)) return Fail(error, text, "user \"" + std::string(user) + "\" is not valid");
    c.user = std::string(user);
    addr = addr.substr(at + 1);
  }
  std::optional<int> inline_port;
  std::string_view host = addr;
  if (!addr.empty() && addr.front() == '[') {
    size_t close = addr.find(']');
    if (close == std::string_view::npos) return Fail(error, text, "unclosed '[' in the host");
    host = addr.substr(1, close - 1);
    std::string_view rest = addr.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return Fail(error, text, "unexpected text after ']'");
      inline_port = ParsePort(rest.substr(1));
      if (!inline_port) {
        return Fail(error, text, "port \"" + std::string(rest.substr(1)) + "\" is not 1..65535");
      }
    }
  } else if (std::count(addr.begin(), addr.end(), ':') == 1) {
    size_t colon = addr.find(':');
    host = addr.substr(0, colon);
    inline_port = ParsePort(addr.substr(colon + 1));
    if (!inline_port) {
      return Fail(error, text,
                  "port \"" + std::string(addr.substr(colon + 1)) + "\" is not 1..65535");
    }
  }
  bool is_ipv6 = false;
  if (host.empty()) return Fail(error, text, "no host");
  if (!ValidHost(host, &is_ipv6)) {
    return Fail(error, text, "host \"" + std::string(host) + "\" is not valid");
  }
  if (inline_port && flag_port && *inline_port != *flag_port) {
    return Fail(error, text, "the port after ':' and the -p port differ");
  }
  c.host = std::string(host);
  if (flag_port || inline_port) {
    c.port = flag_port ? *flag_port : *inline_port;
    c.port_given = true;
  }
  return c;
}

std::vector<std::string> FieldStrings(const Poco::Dynamic::Var& field) {
  std::vector<std::string> out;
  CollectStrings(field, &out, 0);
  return out;
}

SshField ReadSshField(const Poco::Dynamic::Var& field) {
  SshField result;
  std::vector<std::string> entries = FieldStrings(field);
  std::string first_error;
  for (const std::string& e : entries) {
    std::string error;
    if (std::optional<SshConnection> c = ParseSshConnection(e, &error)) {
      result.kind = SshField::Kind::kParsed;
      result.connection = *c;
      return result;
    }
    if (first_error.empty()) first_error = error;
  }
  if (!entries.empty()) {
    result.kind = SshField::Kind::kMalformed;
    result.error = first_error;
  }
  return result;
}

}  // namespace gpuprov::primeintellect
