// SPDX-License-Identifier: Apache-2.0
#include "sigv4.h"

#include <Poco/Crypto/DigestEngine.h>
#include <Poco/HMACEngine.h>

#include <algorithm>
#include <cctype>
#include <ctime>

#include "text.h"

namespace gpuprov::aws {
namespace {

// SHA-256 from Poco Crypto (OpenSSL) with the block and digest sizes Poco::HMACEngine needs.
class Sha256Engine : public Poco::Crypto::DigestEngine {
 public:
  enum { BLOCK_SIZE = 64, DIGEST_SIZE = 32 };
  Sha256Engine() : Poco::Crypto::DigestEngine("SHA256") {}
};

std::string Bytes(const Poco::DigestEngine::Digest& d) { return std::string(d.begin(), d.end()); }

using gpuprov::drivers::Lower;

// Trims and collapses inner runs of spaces (REFERENCE.md §1.3 step 4).
std::string CanonicalValue(const std::string& v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

}  // namespace

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string Sha256(const std::string& data) {
  Sha256Engine engine;
  engine.update(data);
  return Bytes(engine.digest());
}

std::string Sha256Hex(const std::string& data) { return Hex(Sha256(data)); }

std::string HmacSha256(const std::string& key, const std::string& data) {
  Poco::HMACEngine<Sha256Engine> hmac(key);
  hmac.update(data);
  return Bytes(hmac.digest());
}

std::string UriEncode(const std::string& s, bool keep_slash) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out;
}

std::string FormEncode(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [k, v] : params) {
    if (!out.empty()) out += '&';
    out += UriEncode(k) + "=" + UriEncode(v);
  }
  return out;
}

std::string CanonicalQueryString(std::vector<std::pair<std::string, std::string>> query) {
  for (auto& [k, v] : query) {
    k = UriEncode(k);
    v = UriEncode(v);
  }
  std::sort(query.begin(), query.end());
  std::string out;
  for (const auto& [k, v] : query) {
    if (!out.empty()) out += '&';
    out += k + "=" + v;
  }
  return out;
}

std::string SignedHeaderNames(const std::map<std::string, std::string>& headers) {
  std::vector<std::string> names;
  for (const auto& [k, v] : headers) names.push_back(Lower(k));
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ";") + n;
  return out;
}

std::string CanonicalRequest(const SigV4Request& r) {
  std::map<std::string, std::string> lower;
  for (const auto& [k, v] : r.headers) lower[Lower(k)] = CanonicalValue(v);
  std::string headers;
  for (const auto& [k, v] : lower) headers += k + ":" + v + "\n";
  return r.method + "\n" + UriEncode(r.path.empty() ? "/" : r.path, true) + "\n" +
         CanonicalQueryString(r.query) + "\n" + headers + "\n" + SignedHeaderNames(r.headers) +
         "\n" + Sha256Hex(r.body);
}

std::string StringToSign(const std::string& amz_date, const SigV4Scope& scope,
                         const std::string& canonical_request) {
  return "AWS4-HMAC-SHA256\n" + amz_date + "\n" + scope.String() + "\n" +
         Sha256Hex(canonical_request);
}

std::string SigningKey(const std::string& secret, const SigV4Scope& scope) {
  const std::string k_date = HmacSha256("AWS4" + secret, scope.date);
  const std::string k_region = HmacSha256(k_date, scope.region);
  const std::string k_service = HmacSha256(k_region, scope.service);
  return HmacSha256(k_service, "aws4_request");
}

std::string Signature(const std::string& secret, const std::string& amz_date,
                      const SigV4Scope& scope, const SigV4Request& request) {
  return Hex(HmacSha256(SigningKey(secret, scope),
                        StringToSign(amz_date, scope, CanonicalRequest(request))));
}

std::string AuthorizationHeader(const std::string& access_key_id, const std::string& secret,
                                const std::string& amz_date, const SigV4Scope& scope,
                                const SigV4Request& request) {
  return "AWS4-HMAC-SHA256 Credential=" + access_key_id + "/" + scope.String() +
         ", SignedHeaders=" + SignedHeaderNames(request.headers) +
         ", Signature=" + Signature(secret, amz_date, scope, request);
}

std::string AmzDate(long long unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

SignedPost SignQueryPost(const std::string& host_header, const std::string& body,
                         const std::string& region, const std::string& service,
                         const std::string& access_key_id, const std::string& secret,
                         const std::string& session_token, long long unix_seconds) {
  const std::string amz_date = AmzDate(unix_seconds);
  SigV4Request r;
  r.method = "POST";
  r.path = "/";
  r.body = body;
  r.headers["content-type"] = kFormContentType;
  r.headers["host"] = host_header;
  r.headers["x-amz-date"] = amz_date;
  if (!session_token.empty()) r.headers["x-amz-security-token"] = session_token;
  SigV4Scope scope{amz_date.substr(0, 8), region, service};
  SignedPost out;
  out.headers = r.headers;
  out.headers["authorization"] = AuthorizationHeader(access_key_id, secret, amz_date, scope, r);
  return out;
}

}  // namespace gpuprov::aws
