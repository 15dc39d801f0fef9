// SPDX-License-Identifier: Apache-2.0
//
// AWS Signature Version 4 for the EC2 Query API (REFERENCE.md §1.2-§1.6), with Poco Crypto's
// OpenSSL SHA-256 and an HMAC over it. Pure computation: no clock, no I/O, so every step is
// unit-tested against the reference's vectors (sigv4_test.cc).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gpuprov::aws {

/// Lower-case hex of bytes.
std::string Hex(const std::string& bytes);
/// SHA-256 of data (raw 32 bytes).
std::string Sha256(const std::string& data);
/// Lower-case hex SHA-256 of data.
std::string Sha256Hex(const std::string& data);
/// HMAC-SHA256(key, data), raw 32 bytes.
std::string HmacSha256(const std::string& key, const std::string& data);

/// RFC 3986 percent-encoding as SigV4 wants it: A-Z a-z 0-9 - _ . ~ stay, everything else is
/// %XX with upper-case hex (space is %20, never '+'). With keep_slash, '/' stays too (paths).
std::string UriEncode(const std::string& s, bool keep_slash = false);

/// name=value pairs joined with '&', both sides UriEncode'd, in the given order: the
/// application/x-www-form-urlencoded body of an EC2 Query request.
std::string FormEncode(const std::vector<std::pair<std::string, std::string>>& params);

/// What is signed. Header names may have any case; values are trimmed and inner runs of
/// spaces collapsed when canonicalised.
struct SigV4Request {
  std::string method = "POST";
  std::string path = "/";  ///< absolute path, not yet encoded
  /// Query parameters (decoded); sorted and encoded when canonicalised. Empty for POST.
  std::vector<std::pair<std::string, std::string>> query;
  std::map<std::string, std::string> headers;  ///< exactly the headers to sign
  std::string body;
};

/// The credential scope and keys.
struct SigV4Scope {
  std::string date;     ///< YYYYMMDD
  std::string region;   ///< e.g. us-east-1
  std::string service;  ///< ec2
  std::string String() const { return date + "/" + region + "/" + service + "/aws4_request"; }
};

/// The canonical query string: parameters sorted by encoded name, then encoded value.
std::string CanonicalQueryString(std::vector<std::pair<std::string, std::string>> query);
/// "content-type;host;x-amz-date": lower-case names, sorted, joined by ';'.
std::string SignedHeaderNames(const std::map<std::string, std::string>& headers);
/// The six lines of REFERENCE.md §1.3 joined by '\n'.
std::string CanonicalRequest(const SigV4Request& request);
/// The four lines of REFERENCE.md §1.4 (amz_date is the x-amz-date value).
std::string StringToSign(const std::string& amz_date, const SigV4Scope& scope,
                         const std::string& canonical_request);
/// kSigning of REFERENCE.md §1.5 (raw bytes).
std::string SigningKey(const std::string& secret_access_key, const SigV4Scope& scope);
/// Lower-case hex signature of a request.
std::string Signature(const std::string& secret_access_key, const std::string& amz_date,
                      const SigV4Scope& scope, const SigV4Request& request);
/// "AWS4-HMAC-SHA256 Credential=<akid>/<scope>, SignedHeaders=<names>, Signature=<hex>".
std::string AuthorizationHeader(const std::string& access_key_id,
                                const std::string& secret_access_key, const std::string& amz_date,
                                const SigV4Scope& scope, const SigV4Request& request);

/// x-amz-date for a Unix time: YYYYMMDD'T'HHMMSS'Z' (UTC).
std::string AmzDate(long long unix_seconds);

/// The headers to send with one signed EC2 Query POST: host, content-type, x-amz-date,
/// x-amz-security-token (when session_token is set) and Authorization.
struct SignedPost {
  std::map<std::string, std::string> headers;
};
SignedPost SignQueryPost(const std::string& host_header, const std::string& body,
                         const std::string& region, const std::string& service,
                         const std::string& access_key_id, const std::string& secret_access_key,
                         const std::string& session_token, long long unix_seconds);

/// The content type EC2 Query requests carry (and sign).
inline constexpr const char* kFormContentType = "application/x-www-form-urlencoded; charset=utf-8";

}  // namespace gpuprov::aws
