// SPDX-License-Identifier: Apache-2.0
//
// The request/response values every emulated cloud API handles, and small JSON
// helpers. Kept free of Poco's server classes so an API can be driven directly
// (no socket) in a unit test, and so the HTTP plumbing lives in one place
// (emulator.cc).
#pragma once

#include <Poco/Dynamic/Var.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpuprov::emulator {

/// One HTTP request as an API sees it.
struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // decoded, without the query
  std::vector<std::pair<std::string, std::string>> query;  // decoded, in order
  std::map<std::string, std::string> headers;              // names lower-cased
  std::string body;
  std::string host;  // the Host header ("127.0.0.1:34567"), for absolute links

  /// The first value of query parameter name, or nullopt.
  std::optional<std::string> Query(const std::string& name) const;
  /// Every value of query parameter name (repeated and comma-separated forms).
  std::vector<std::string> QueryAll(const std::string& name) const;
  /// Header value (name lower-case), "" when absent.
  std::string Header(const std::string& name) const;
  /// The bearer token of the Authorization header, "" when absent or not Bearer.
  std::string BearerToken() const;
};

/// One HTTP response.
struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json; charset=utf-8";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  void SetHeader(const std::string& name, const std::string& value);
};

using JsonObject = Poco::JSON::Object::Ptr;
using JsonArray = Poco::JSON::Array::Ptr;

/// A new JSON object that keeps insertion order (responses read like the docs).
JsonObject NewObject();
JsonArray NewArray();
/// Serialises compactly.
std::string ToJson(const JsonObject& o);
std::string ToJson(const JsonArray& a);
/// A response with a JSON body.
HttpResponse JsonResponse(int status, const JsonObject& body);
/// A response with no body (204 and friends).
HttpResponse EmptyResponse(int status);
/// A response with a text body.
HttpResponse TextResponse(int status, const std::string& text,
                          const std::string& content_type = "text/plain; charset=utf-8");

/// Parses body as a JSON object; nullptr when it is not one.
JsonObject ParseObject(const std::string& body);

/// Typed reads that never throw: a missing, null or wrongly typed field gives nullopt.
std::optional<std::string> GetString(const JsonObject& o, const std::string& key);
std::optional<int64_t> GetInt(const JsonObject& o, const std::string& key);
std::optional<double> GetDouble(const JsonObject& o, const std::string& key);
std::optional<bool> GetBool(const JsonObject& o, const std::string& key);
JsonObject GetObject(const JsonObject& o, const std::string& key);
JsonArray GetArray(const JsonObject& o, const std::string& key);
/// True when the key is present with JSON null, or absent.
bool IsNullOrAbsent(const JsonObject& o, const std::string& key);

/// RFC 3339 UTC with seconds ("2026-01-02T03:04:05Z").
std::string Rfc3339(std::chrono::system_clock::time_point t);
/// Same with milliseconds ("2026-01-02T03:04:05.123Z"), as FastAPI backends write.
std::string Rfc3339Millis(std::chrono::system_clock::time_point t);
/// Lower-case hex of random bytes (2 digits per byte).
std::string RandomHex(size_t bytes);
/// A random RFC 4122 version-4 UUID string.
std::string RandomUuid();
/// Splits s at sep, dropping empty pieces.
std::vector<std::string> Split(const std::string& s, char sep);
std::string Lower(std::string s);
/// Strips one trailing "/" unless the path is "/".
std::string TrimTrailingSlash(const std::string& path);

}  // namespace gpuprov::emulator
