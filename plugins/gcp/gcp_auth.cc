// SPDX-License-Identifier: Apache-2.0
#include "gcp_auth.h"

#include "config_files.h"

#include <Poco/Crypto/RSADigestEngine.h>
#include <Poco/Crypto/RSAKey.h>
#include <Poco/Exception.h>
#include <Poco/JSON/Object.h>
#include <Poco/URI.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "credentials.h"
#include "json_util.h"

namespace gpuprov::gcp {
namespace {

using gpuprov::sdk::DriverError;
using Poco::JSON::Object;
namespace json = gpuprov::drivers::json;

std::string FormEncode(const std::string& s) {
  std::string out;
  Poco::URI::encode(s, "!#$&'()*+,/:;=?@[]~ ", out);
  return out;
}

std::string EnvOr(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string GcloudConfigDir() {
  std::string dir = EnvOr("CLOUDSDK_CONFIG");
  if (!dir.empty()) return dir;
  std::string home = EnvOr("HOME");
  return home.empty() ? "" : home + "/.config/gcloud";
}


}  // namespace

GoogleCredentials ParseCredentials(const std::string& json_text, const std::string& origin) {
  Object::Ptr doc = json::TryParseObject(json_text);
  if (!doc) {
    throw DriverError(GPUPROV_STATUS_AUTH,
                      origin +
                          " is not a JSON credentials file (expected a service-account key "
                          "or the file of `gcloud auth application-default login`)");
  }
  auto field = [&](const char* key) {
    try {
      return json::Str(doc, key);
    } catch (const DriverError&) {
      throw DriverError(GPUPROV_STATUS_AUTH, origin + ": field \"" + key + "\" must be a string");
    }
  };
  auto require = [&](const GoogleCredentials& c, const std::string& value, const char* key) {
    if (value.empty()) {
      throw DriverError(GPUPROV_STATUS_AUTH,
                        c.origin + " has no \"" + key +
                            "\"; download a new key (IAM > Service "
                            "accounts > Keys) or run `gcloud auth application-default login`");
    }
  };
  GoogleCredentials c;
  c.origin = origin;
  const std::string type = field("type");
  c.token_uri = field("token_uri");
  if (c.token_uri.empty()) c.token_uri = kDefaultTokenUri;
  if (type == "service_account") {
    c.type = GoogleCredentials::Type::kServiceAccount;
    c.project_id = field("project_id");
    c.client_email = field("client_email");
    c.private_key_id = field("private_key_id");
    c.private_key_pem = field("private_key");
    require(c, c.client_email, "client_email");
    require(c, c.private_key_pem, "private_key");
  } else if (type == "authorized_user") {
    c.type = GoogleCredentials::Type::kAuthorizedUser;
    c.project_id = field("quota_project_id");
    c.client_id = field("client_id");
    c.client_secret = field("client_secret");
    c.refresh_token = field("refresh_token");
    require(c, c.client_id, "client_id");
    require(c, c.client_secret, "client_secret");
    require(c, c.refresh_token, "refresh_token");
  } else {
    throw DriverError(GPUPROV_STATUS_AUTH,
                      origin + ": credentials of type \"" + type +
                          "\" are not supported; use a service-account key (type "
                          "service_account) or `gcloud auth application-default login` "
                          "(type authorized_user)");
  }
  return c;
}

std::string AdcFilePath() {
  std::string dir = GcloudConfigDir();
  return dir.empty() ? "" : dir + "/application_default_credentials.json";
}

std::optional<GoogleCredentials> FindCredentials(const std::string& configured_path) {
  std::string path = configured_path;
  std::string how = "credentials_file in [clouds.gcp]";
  if (path.empty()) {
    path = EnvOr("GOOGLE_APPLICATION_CREDENTIALS");
    how = "$GOOGLE_APPLICATION_CREDENTIALS";
  }
  if (path.empty()) {
    path = AdcFilePath();
    how = "";
    std::ifstream probe(path);
    if (path.empty() || !probe) return std::nullopt;
  }
  std::optional<std::string> text = drivers::ReadSmallFile(path);
  if (!text) {
    throw DriverError(GPUPROV_STATUS_AUTH, "cannot read the Google credentials file " + path +
                                               (how.empty() ? "" : " (named by " + how + ")") +
                                               ": check the path and that it is readable");
  }
  return ParseCredentials(*text, path);
}

std::string CredentialsHint() {
  return "set GOOGLE_APPLICATION_CREDENTIALS to a service-account JSON key, run `gcloud auth "
         "application-default login`, or set credentials_file in [clouds.gcp] of "
         "~/.gpu-provisioner/config.toml";
}

std::string GcloudConfigProject() {
  std::string dir = GcloudConfigDir();
  if (dir.empty()) return "";
  std::string active = "default";
  if (auto a = drivers::ReadSmallFile(dir + "/active_config")) {
    std::string name = drivers::TrimSpace(*a);
    if (!name.empty()) active = name;
  }
  std::optional<std::string> text =
      drivers::ReadSmallFile(dir + "/configurations/config_" + active);
  return text ? drivers::IniValue(drivers::ParseIni(*text), "core", "project").value_or("") : "";
}

std::string Base64UrlEncode(std::string_view bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t n = (static_cast<uint8_t>(bytes[i]) << 16) |
                 (static_cast<uint8_t>(bytes[i + 1]) << 8) | static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  if (i + 1 == bytes.size()) {
    uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
  } else if (i + 2 == bytes.size()) {
    uint32_t n = (static_cast<uint8_t>(bytes[i]) << 16) | (static_cast<uint8_t>(bytes[i + 1]) << 8);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
  }
  return out;
}

std::optional<std::string> Base64UrlDecode(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '-' || c == '+') {
      v = 62;
    } else if (c == '_' || c == '/') {
      v = 63;
    } else {
      return std::nullopt;
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  if (bits >= 6) return std::nullopt;  // one stray character cannot encode a byte
  return out;
}

std::string SignRs256(const std::string& private_key_pem, std::string_view data,
                      const std::string& origin) {
  try {
    std::istringstream key_stream(private_key_pem);
    Poco::Crypto::RSAKey key(nullptr, &key_stream);
    Poco::Crypto::RSADigestEngine engine(key, "SHA256");
    engine.update(data.data(), static_cast<unsigned>(data.size()));
    const Poco::DigestEngine::Digest& sig = engine.signature();
    return std::string(sig.begin(), sig.end());
  } catch (const Poco::Exception&) {
    // The OpenSSL message may quote key material: it is not passed on.
    throw DriverError(GPUPROV_STATUS_AUTH,
                      "the private_key in " + origin +
                          " is not a PEM RSA private key; download a new service-account key");
  }
}

std::string MakeJwtAssertion(const GoogleCredentials& sa, const std::string& scope,
                             int64_t now_unix_seconds, int lifetime_seconds) {
  Object header(Poco::JSON_PRESERVE_KEY_ORDER);
  header.set("alg", "RS256");
  header.set("typ", "JWT");
  if (!sa.private_key_id.empty()) header.set("kid", sa.private_key_id);
  Object claims(Poco::JSON_PRESERVE_KEY_ORDER);
  claims.set("iss", sa.client_email);
  claims.set("scope", scope);
  claims.set("aud", sa.token_uri);
  claims.set("iat", now_unix_seconds);
  claims.set("exp", now_unix_seconds + lifetime_seconds);
  const std::string signing_input =
      Base64UrlEncode(json::Stringify(header)) + "." + Base64UrlEncode(json::Stringify(claims));
  return signing_input + "." +
         Base64UrlEncode(SignRs256(sa.private_key_pem, signing_input, sa.origin));
}

std::string TokenRequestBody(const GoogleCredentials& creds, int64_t now_unix_seconds) {
  if (creds.type == GoogleCredentials::Type::kServiceAccount) {
    return "grant_type=" + FormEncode("urn:ietf:params:oauth:grant-type:jwt-bearer") +
           "&assertion=" +
           FormEncode(MakeJwtAssertion(creds, kCloudPlatformScope, now_unix_seconds));
  }
  return "grant_type=refresh_token&client_id=" + FormEncode(creds.client_id) +
         "&client_secret=" + FormEncode(creds.client_secret) +
         "&refresh_token=" + FormEncode(creds.refresh_token);
}

TokenResponse ParseTokenResponse(const std::string& body) {
  Object::Ptr doc = json::TryParseObject(body);
  TokenResponse r;
  try {
    r.access_token = json::Str(doc, "access_token");
    r.expires_in_seconds = json::Int(doc, "expires_in", 3600);
  } catch (const DriverError&) {
    r.access_token.clear();
  }
  if (r.access_token.empty()) {
    throw DriverError(GPUPROV_STATUS_AUTH, "the token endpoint answered without an access_token");
  }
  return r;
}

TokenSource::TokenSource(GoogleCredentials creds, drivers::RetryPolicy policy,
                         const sdk::Host& host)
    : creds_(std::move(creds)), host_(host) {
  Poco::URI uri;
  try {
    uri = Poco::URI(creds_.token_uri);
  } catch (const Poco::Exception&) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT, "token_uri \"" + creds_.token_uri + "\" in " +
                                                        creds_.origin + " is not a URL");
  }
  const std::string base = uri.getScheme() + "://" + uri.getAuthority();
  token_path_ = uri.getPathEtc();
  if (token_path_.empty()) token_path_ = "/";
  try {
    http_ = std::make_unique<drivers::HttpClient>(base, policy, host_);
  } catch (const drivers::HttpError& e) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "token_uri in " + creds_.origin + ": " + e.what());
  }
}

TokenSource::~TokenSource() = default;

std::string TokenSource::Token(bool force_refresh) {
  const auto now = std::chrono::steady_clock::now();
  if (!force_refresh && !token_.empty() && now + kTokenRefreshMargin < expires_) return token_;
  drivers::HttpRequest req;
  req.method = "POST";
  req.path_and_query = token_path_;
  req.headers["Content-Type"] = "application/x-www-form-urlencoded";
  req.body = TokenRequestBody(creds_, static_cast<int64_t>(std::time(nullptr)));
  drivers::HttpResponse resp;
  const std::string what = "get a Google access token from " + creds_.token_uri;
  try {
    resp = http_->Send(req);
  } catch (const drivers::HttpError& e) {
    switch (e.kind()) {
      case drivers::HttpError::Kind::kCancelled:
        throw DriverError(GPUPROV_STATUS_CANCELLED, what + ": cancelled");
      case drivers::HttpError::Kind::kRetriesExhausted:
        throw DriverError(GPUPROV_STATUS_TRANSIENT, what + ": " + e.what());
      default:
        throw DriverError(GPUPROV_STATUS_FAILED, what + ": " + e.what());
    }
  }
  ++fetches_;
  if (resp.status != 200) {
    // {"error": "invalid_grant", "error_description": "..."} (reference §1.1): neither
    // field carries a secret.
    Object::Ptr doc = json::TryParseObject(resp.body);
    std::string error, description;
    try {
      error = json::Str(doc, "error");
      description = json::Str(doc, "error_description");
    } catch (const DriverError&) {
    }
    std::string msg = what + ": HTTP " + std::to_string(resp.status);
    if (!error.empty()) msg += " " + error;
    while (!description.empty() && description.back() == '.') description.pop_back();
    if (!description.empty()) msg += ": " + description;
    if (resp.status >= 400 && resp.status < 500) {
      throw DriverError(GPUPROV_STATUS_AUTH,
                        msg + ". The credentials in " + creds_.origin +
                            " were refused: the key may be deleted or disabled, or this "
                            "machine's clock is off; " +
                            CredentialsHint());
    }
    throw DriverError(GPUPROV_STATUS_FAILED, msg);
  }
  TokenResponse t = ParseTokenResponse(resp.body);
  token_ = t.access_token;
  expires_ = std::chrono::steady_clock::now() + std::chrono::seconds(t.expires_in_seconds);
  host_.Debug("access token from " + creds_.token_uri + " for " +
              (creds_.client_email.empty() ? creds_.origin : creds_.client_email) + ", valid " +
              std::to_string(t.expires_in_seconds) + " s");
  return token_;
}

}  // namespace gpuprov::gcp
