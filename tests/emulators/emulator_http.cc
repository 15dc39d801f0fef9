// SPDX-License-Identifier: Apache-2.0
#include "emulator_http.h"

#include <Poco/Exception.h>
#include <Poco/JSON/Parser.h>

#include <cctype>
#include <ctime>
#include <random>
#include <sstream>

namespace gpuprov::emulator {

std::optional<std::string> HttpRequest::Query(const std::string& name) const {
  for (const auto& [k, v] : query) {
    if (k == name) return v;
  }
  return std::nullopt;
}

std::vector<std::string> HttpRequest::QueryAll(const std::string& name) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : query) {
    if (k != name && k != name + "[]") continue;
    for (const auto& piece : Split(v, ',')) out.push_back(piece);
  }
  return out;
}

std::string HttpRequest::Header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

std::string HttpRequest::BearerToken() const {
  std::string auth = Header("authorization");
  const std::string prefix = "bearer ";
  if (auth.size() <= prefix.size() || Lower(auth.substr(0, prefix.size())) != prefix) return "";
  std::string token = auth.substr(prefix.size());
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.front()))) {
    token.erase(token.begin());
  }
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) {
    token.pop_back();
  }
  return token;
}

void HttpResponse::SetHeader(const std::string& name, const std::string& value) {
  for (auto& [k, v] : headers) {
    if (Lower(k) == Lower(name)) {
      v = value;
      return;
    }
  }
  headers.emplace_back(name, value);
}

JsonObject NewObject() { return new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER); }
JsonArray NewArray() { return new Poco::JSON::Array(); }

std::string ToJson(const JsonObject& o) {
  std::ostringstream s;
  o->stringify(s);
  return s.str();
}

std::string ToJson(const JsonArray& a) {
  std::ostringstream s;
  a->stringify(s);
  return s.str();
}

HttpResponse JsonResponse(int status, const JsonObject& body) {
  HttpResponse r;
  r.status = status;
  r.body = ToJson(body);
  return r;
}

HttpResponse EmptyResponse(int status) {
  HttpResponse r;
  r.status = status;
  r.content_type.clear();
  return r;
}

HttpResponse TextResponse(int status, const std::string& text, const std::string& content_type) {
  HttpResponse r;
  r.status = status;
  r.content_type = content_type;
  r.body = text;
  return r;
}

JsonObject ParseObject(const std::string& body) {
  try {
    Poco::JSON::Parser parser;
    Poco::Dynamic::Var v = parser.parse(body);
    if (v.type() == typeid(Poco::JSON::Object::Ptr)) return v.extract<Poco::JSON::Object::Ptr>();
  } catch (const Poco::Exception&) {
  } catch (const std::exception&) {
  }
  return nullptr;
}

std::optional<std::string> GetString(const JsonObject& o, const std::string& key) {
  if (!o || !o->has(key) || o->isNull(key)) return std::nullopt;
  Poco::Dynamic::Var v = o->get(key);
  if (!v.isString()) return std::nullopt;
  return v.convert<std::string>();
}

std::optional<int64_t> GetInt(const JsonObject& o, const std::string& key) {
  if (!o || !o->has(key) || o->isNull(key)) return std::nullopt;
  Poco::Dynamic::Var v = o->get(key);
  try {
    if (v.isInteger()) return v.convert<int64_t>();
    if (v.isNumeric()) {
      double d = v.convert<double>();
      if (d == static_cast<double>(static_cast<int64_t>(d))) return static_cast<int64_t>(d);
    }
  } catch (const Poco::Exception&) {
  }
  return std::nullopt;
}

std::optional<double> GetDouble(const JsonObject& o, const std::string& key) {
  if (!o || !o->has(key) || o->isNull(key)) return std::nullopt;
  Poco::Dynamic::Var v = o->get(key);
  try {
    if (v.isNumeric()) return v.convert<double>();
  } catch (const Poco::Exception&) {
  }
  return std::nullopt;
}

std::optional<bool> GetBool(const JsonObject& o, const std::string& key) {
  if (!o || !o->has(key) || o->isNull(key)) return std::nullopt;
  Poco::Dynamic::Var v = o->get(key);
  if (v.type() == typeid(bool)) return v.extract<bool>();
  return std::nullopt;
}

JsonObject GetObject(const JsonObject& o, const std::string& key) {
  if (!o || !o->has(key) || o->isNull(key)) return nullptr;
  Poco::Dynamic::Var v = o->get(key);
  if (v.type() == typeid(Poco::JSON::Object::Ptr)) return v.extract<Poco::JSON::Object::Ptr>();
  return nullptr;
}

JsonArray GetArray(const JsonObject& o, const std::string& key) {
  if (!o || !o->has(key) || o->isNull(key)) return nullptr;
  Poco::Dynamic::Var v = o->get(key);
  if (v.type() == typeid(Poco::JSON::Array::Ptr)) return v.extract<Poco::JSON::Array::Ptr>();
  return nullptr;
}

bool IsNullOrAbsent(const JsonObject& o, const std::string& key) {
  return !o || !o->has(key) || o->isNull(key);
}

namespace {
std::string FormatUtc(std::chrono::system_clock::time_point t, bool millis) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string s = buf;
  if (millis) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() %
              1000;
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%03d", static_cast<int>(ms));
    s += frac;
  }
  return s + "Z";
}

std::mt19937_64& Rng() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}
}  // namespace

std::string Rfc3339(std::chrono::system_clock::time_point t) { return FormatUtc(t, false); }
std::string Rfc3339Millis(std::chrono::system_clock::time_point t) { return FormatUtc(t, true); }

std::string RandomHex(size_t bytes) {
  static const char* digits = "0123456789abcdef";
  std::uniform_int_distribution<int> d(0, 255);
  std::string s;
  for (size_t i = 0; i < bytes; ++i) {
    int b = d(Rng());
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::string RandomUuid() {
  std::string h = RandomHex(16);
  h[12] = '4';
  h[16] = "89ab"[std::uniform_int_distribution<int>(0, 3)(Rng())];
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20);
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string TrimTrailingSlash(const std::string& path) {
  if (path.size() > 1 && path.back() == '/') return path.substr(0, path.size() - 1);
  return path;
}

}  // namespace gpuprov::emulator
