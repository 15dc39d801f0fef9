// SPDX-License-Identifier: Apache-2.0
#include "gcp_auth.h"

#include "config_files.h"

#include <Poco/Crypto/RSAKey.h>
#include <Poco/DateTimeFormat.h>
#include <Poco/DateTimeParser.h>
#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JWT/Signer.h>
#include <Poco/JWT/Token.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>
#include <Poco/URI.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "credentials.h"
#include "json_util.h"

namespace gpuprov::gcp {
namespace {

using gpuprov::sdk::DriverError;
using Poco::JSON::Array;
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

std::string GoogleCredentials::TypeName() const {
  switch (type) {
    case Type::kServiceAccount:
      return "service_account";
    case Type::kAuthorizedUser:
      return "authorized_user";
    case Type::kExternalAccount:
      return "external_account";
    case Type::kImpersonatedServiceAccount:
      return "impersonated_service_account";
    case Type::kMetadataServer:
      return "metadata server";
  }
  return "?";
}

std::string GoogleCredentials::Describe() const {
  if (type == Type::kMetadataServer) return origin;
  return origin + " (" + TypeName() + ")";
}

namespace {

// The service account an ...serviceAccounts/<email>:generateAccessToken URL names, or "".
std::string ImpersonatedEmail(const std::string& url) {
  const std::string marker = "/serviceAccounts/";
  const size_t at = url.find(marker);
  if (at == std::string::npos) return "";
  const size_t colon = url.find(':', at + marker.size());
  if (colon == std::string::npos) return "";
  std::string email;
  Poco::URI::decode(url.substr(at + marker.size(), colon - at - marker.size()), email);
  return email;
}

GoogleCredentials ParseObjectCredentials(const Object::Ptr& doc, const std::string& origin,
                                         bool nested);

}  // namespace

GoogleCredentials ParseCredentials(const std::string& json_text, const std::string& origin) {
  Object::Ptr doc = json::TryParseObject(json_text);
  if (!doc) {
    throw DriverError(GPUPROV_STATUS_AUTH,
                      origin +
                          " is not a JSON credentials file (expected a service-account key "
                          "or the file of `gcloud auth application-default login`)");
  }
  return ParseObjectCredentials(doc, origin, /*nested=*/false);
}

namespace {

GoogleCredentials ParseObjectCredentials(const Object::Ptr& doc, const std::string& origin,
                                         bool nested) {
  auto field_of = [&](const Object::Ptr& o, const std::string& key) {
    try {
      return json::Str(o, key);
    } catch (const DriverError&) {
      throw DriverError(GPUPROV_STATUS_AUTH, origin + ": field \"" + key + "\" must be a string");
    }
  };
  auto field = [&](const std::string& key) { return field_of(doc, key); };
  auto object = [&](const std::string& key) {
    try {
      return json::Obj(doc, key);
    } catch (const DriverError&) {
      throw DriverError(GPUPROV_STATUS_AUTH, origin + ": field \"" + key + "\" must be an object");
    }
  };
  auto require = [&](const std::string& value, const std::string& key, const std::string& fix) {
    if (value.empty()) {
      throw DriverError(GPUPROV_STATUS_AUTH, origin + " has no \"" + key + "\"; " + fix);
    }
  };
  const std::string kNewKey =
      "download a new key (IAM > Service accounts > Keys) or run `gcloud auth "
      "application-default login`";
  const std::string kNewConfig =
      "make the file again with `gcloud iam workload-identity-pools create-cred-config`";
  GoogleCredentials c;
  c.origin = origin;
  const std::string type = field("type");
  c.token_uri = field("token_uri");
  c.quota_project_id = field("quota_project_id");
  if (type == "service_account") {
    c.type = GoogleCredentials::Type::kServiceAccount;
    c.project_id = field("project_id");
    c.client_email = field("client_email");
    c.private_key_id = field("private_key_id");
    c.private_key_pem = field("private_key");
    require(c.client_email, "client_email", kNewKey);
    require(c.private_key_pem, "private_key", kNewKey);
  } else if (type == "authorized_user") {
    c.type = GoogleCredentials::Type::kAuthorizedUser;
    c.client_id = field("client_id");
    c.client_secret = field("client_secret");
    c.refresh_token = field("refresh_token");
    require(c.client_id, "client_id", kNewKey);
    require(c.client_secret, "client_secret", kNewKey);
    require(c.refresh_token, "refresh_token", kNewKey);
  } else if (type == "external_account" && !nested) {
    c.type = GoogleCredentials::Type::kExternalAccount;
    c.audience = field("audience");
    c.subject_token_type = field("subject_token_type");
    c.token_uri = field("token_url");
    if (c.token_uri.empty()) c.token_uri = kDefaultStsTokenUrl;
    c.impersonation_url = field("service_account_impersonation_url");
    c.client_email = ImpersonatedEmail(c.impersonation_url);
    c.workforce_pool_user_project = field("workforce_pool_user_project");
    require(c.audience, "audience", kNewConfig);
    require(c.subject_token_type, "subject_token_type", kNewConfig);
    Object::Ptr source = object("credential_source");
    if (!source) require("", "credential_source", kNewConfig);
    c.subject_token_file = field_of(source, "file");
    c.subject_token_url = field_of(source, "url");
    if (json::Has(source, "environment_id") || json::Has(source, "executable")) {
      throw DriverError(GPUPROV_STATUS_AUTH,
                        origin +
                            ": credential_source of AWS (environment_id) or executable sources "
                            "is not supported; use a file- or URL-sourced subject token");
    }
    if (c.subject_token_file.empty() == c.subject_token_url.empty()) {
      throw DriverError(GPUPROV_STATUS_AUTH,
                        origin + ": credential_source must name exactly one of \"file\" and "
                                 "\"url\"; " + kNewConfig);
    }
    if (Object::Ptr headers = json::Obj(source, "headers")) {
      for (const auto& [name, value] : *headers) {
        c.subject_token_headers[name] = value.isString() ? value.extract<std::string>() : "";
      }
    }
    if (Object::Ptr format = json::Obj(source, "format")) {
      const std::string format_type = field_of(format, "type");
      if (format_type == "json") {
        c.subject_token_field = field_of(format, "subject_token_field_name");
        require(c.subject_token_field, "credential_source.format.subject_token_field_name",
                kNewConfig);
      } else if (!format_type.empty() && format_type != "text") {
        throw DriverError(GPUPROV_STATUS_AUTH, origin + ": credential_source.format.type \"" +
                                                   format_type + "\" must be text or json");
      }
    }
  } else if (type == "impersonated_service_account" && !nested) {
    c.type = GoogleCredentials::Type::kImpersonatedServiceAccount;
    c.impersonation_url = field("service_account_impersonation_url");
    require(c.impersonation_url, "service_account_impersonation_url",
            "run `gcloud auth application-default login --impersonate-service-account=<email>`");
    c.client_email = ImpersonatedEmail(c.impersonation_url);
    if (Array::Ptr delegates = json::Arr(doc, "delegates")) {
      for (size_t i = 0; i < delegates->size(); ++i) {
        c.delegates.push_back(delegates->get(static_cast<unsigned>(i)).toString());
      }
    }
    Object::Ptr source = object("source_credentials");
    if (!source) {
      require("", "source_credentials",
              "run `gcloud auth application-default login --impersonate-service-account=<email>`");
    }
    c.source = std::make_shared<const GoogleCredentials>(
        ParseObjectCredentials(source, origin + " source_credentials", /*nested=*/true));
  } else {
    throw DriverError(GPUPROV_STATUS_AUTH,
                      origin + ": credentials of type \"" + type + "\" are not supported" +
                          (nested ? " as source_credentials (use service_account or "
                                    "authorized_user)"
                                  : "; use a service-account key (type service_account), "
                                    "`gcloud auth application-default login` (type "
                                    "authorized_user), a workload identity federation file "
                                    "(type external_account) or impersonated_service_account"));
  }
  if (c.token_uri.empty()) c.token_uri = kDefaultTokenUri;
  return c;
}

}  // namespace

std::string AdcFilePath() {
  std::string dir = GcloudConfigDir();
  return dir.empty() ? "" : dir + "/application_default_credentials.json";
}

std::string MetadataHost() {
  const std::string configured = EnvOr("GCE_METADATA_HOST");
  if (!configured.empty()) {
    std::string host = configured;
    if (host.rfind('[', 0) == 0) {
      host = host.substr(1, host.find(']') == std::string::npos ? 0 : host.find(']') - 1);
    } else if (std::count(host.begin(), host.end(), ':') == 1) {
      host = host.substr(0, host.find(':'));
    }
    // Loopback (test servers) or the metadata server's own names, for a Google VM or pod
    // whose DMI product name is hidden (e.g. a sandboxed container).
    if (!drivers::IsLoopbackHost(host) && configured != kDefaultMetadataHost &&
        configured != "metadata.google.internal") {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        "GCE_METADATA_HOST=" + configured +
                            " is neither a loopback address (test servers) nor the metadata "
                            "server (169.254.169.254, metadata.google.internal): unset it (on "
                            "Google Cloud the metadata server is found without it)");
    }
    return configured;
  }
  std::optional<std::string> product = drivers::ReadSmallFile("/sys/class/dmi/id/product_name");
  if (product && drivers::TrimSpace(*product).rfind("Google", 0) == 0) return kDefaultMetadataHost;
  return "";
}

std::optional<std::string> MetadataGet(const std::string& host, const std::string& path,
                                       std::chrono::milliseconds timeout) {
  // The metadata server speaks plain http on a link-local address, which the kit's
  // HttpClient refuses by rule (http only to loopback); this one GET is all it needs.
  try {
    Poco::URI uri("http://" + host);
    Poco::Net::HTTPClientSession session(uri.getHost(), uri.getPort());
    session.setTimeout(Poco::Timespan(static_cast<long>(timeout.count() / 1000),
                                      static_cast<long>(timeout.count() % 1000) * 1000));
    Poco::Net::HTTPRequest req(Poco::Net::HTTPRequest::HTTP_GET, "/computeMetadata/v1/" + path,
                               Poco::Net::HTTPMessage::HTTP_1_1);
    req.set("Metadata-Flavor", "Google");
    session.sendRequest(req);
    Poco::Net::HTTPResponse resp;
    std::istream& in = session.receiveResponse(resp);
    std::string body;
    Poco::StreamCopier::copyToString(in, body);
    if (resp.getStatus() != Poco::Net::HTTPResponse::HTTP_OK) return std::nullopt;
    if (resp.get("Metadata-Flavor", "") != "Google") return std::nullopt;
    return body;
  } catch (const Poco::Exception&) {
    return std::nullopt;
  }
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
    // Whether it is there, without opening it (a FIFO there would block an open; the read
    // below refuses anything but a regular file).
    std::error_code ec;
    if (path.empty() || !std::filesystem::exists(path, ec)) path.clear();
  }
  if (path.empty()) {
    const std::string host = MetadataHost();
    if (host.empty()) return std::nullopt;
    // The service account's email both proves a metadata server with an account attached
    // and names it (a VM made without a service account has none).
    std::optional<std::string> email =
        MetadataGet(host, "instance/service-accounts/default/email", std::chrono::seconds(2));
    if (!email) return std::nullopt;
    GoogleCredentials c;
    c.type = GoogleCredentials::Type::kMetadataServer;
    c.origin = "the metadata server at " + host;
    c.metadata_host = host;
    c.client_email = drivers::TrimSpace(*email);
    return c;
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
  return "set GOOGLE_APPLICATION_CREDENTIALS to a service-account JSON key or a workload "
         "identity federation file, run `gcloud auth application-default login`, or set "
         "credentials_file in [clouds.gcp] of ~/.gpu-provisioner/config.toml (on a Google VM, "
         "attach a service account)";
}

std::string GcloudConfigProject() {
  std::string dir = GcloudConfigDir();
  if (dir.empty()) return "";
  std::string active = EnvOr("CLOUDSDK_ACTIVE_CONFIG_NAME");
  if (active.empty()) {
    if (auto a = drivers::ReadSmallFile(dir + "/active_config")) active = drivers::TrimSpace(*a);
  }
  if (active.empty()) active = "default";
  // gcloud's configuration names are [a-z][-a-z0-9]*: anything else names no file of its.
  const auto name_char = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; };
  if (!(active[0] >= 'a' && active[0] <= 'z') || !std::all_of(active.begin(), active.end(), name_char)) {
    return "";
  }
  std::optional<std::string> text =
      drivers::ReadSmallFile(dir + "/configurations/config_" + active);
  return text ? drivers::IniValue(drivers::ParseIni(*text), "core", "project").value_or("") : "";
}

std::string MakeJwtAssertion(const GoogleCredentials& sa, const std::string& scope,
                             int64_t now_unix_seconds, int lifetime_seconds) {
  Poco::SharedPtr<Poco::Crypto::RSAKey> key;
  try {
    std::istringstream key_stream(sa.private_key_pem);
    key = new Poco::Crypto::RSAKey(nullptr, &key_stream);
  } catch (const Poco::Exception&) {
    // The OpenSSL message may quote key material: it is not passed on.
    throw DriverError(GPUPROV_STATUS_AUTH,
                      "the private_key in " + sa.origin +
                          " is not a PEM RSA private key; download a new service-account key");
  }
  Poco::JWT::Token token;
  token.setType("JWT");
  if (!sa.private_key_id.empty()) token.header().set("kid", sa.private_key_id);
  token.setIssuer(sa.client_email);
  token.setAudience(sa.token_uri);
  token.payload().set("scope", scope);
  // Whole seconds (RFC 7519 NumericDate); Token::setIssuedAt would write a fraction.
  token.payload().set("iat", now_unix_seconds);
  token.payload().set("exp", now_unix_seconds + lifetime_seconds);
  Poco::JWT::Signer signer(key);
  return signer.sign(token, Poco::JWT::Signer::ALGO_RS256);
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

std::string StsRequestBody(const GoogleCredentials& creds, const std::string& subject_token) {
  std::string body = "grant_type=" + FormEncode("urn:ietf:params:oauth:grant-type:token-exchange") +
                     "&audience=" + FormEncode(creds.audience) +
                     "&scope=" + FormEncode(kCloudPlatformScope) + "&requested_token_type=" +
                     FormEncode("urn:ietf:params:oauth:token-type:access_token") +
                     "&subject_token=" + FormEncode(subject_token) +
                     "&subject_token_type=" + FormEncode(creds.subject_token_type);
  if (!creds.workforce_pool_user_project.empty() && creds.impersonation_url.empty()) {
    Object options;
    options.set("userProject", creds.workforce_pool_user_project);
    body += "&options=" + FormEncode(json::Stringify(options));
  }
  return body;
}

std::string GenerateAccessTokenBody(const std::vector<std::string>& delegates) {
  Object o(Poco::JSON_PRESERVE_KEY_ORDER);
  Array::Ptr scope = new Array();
  scope->add(std::string(kCloudPlatformScope));
  o.set("scope", scope);
  if (!delegates.empty()) {
    Array::Ptr d = new Array();
    for (const std::string& name : delegates) {
      d->add(name.rfind("projects/", 0) == 0 ? name : "projects/-/serviceAccounts/" + name);
    }
    o.set("delegates", d);
  }
  o.set("lifetime", std::to_string(kAssertionLifetimeSeconds) + "s");
  return json::Stringify(o);
}

std::string SubjectTokenFrom(const GoogleCredentials& creds, const std::string& raw) {
  const std::string where = !creds.subject_token_file.empty()
                                ? "the subject token file " + creds.subject_token_file
                                : "the subject token URL " + creds.subject_token_url;
  std::string token;
  if (creds.subject_token_field.empty()) {
    token = drivers::TrimSpace(raw);
  } else {
    Object::Ptr doc = json::TryParseObject(raw);
    try {
      token = doc ? json::Str(doc, creds.subject_token_field) : "";
    } catch (const DriverError&) {
      token.clear();
    }
    if (token.empty()) {
      throw DriverError(GPUPROV_STATUS_AUTH,
                        where + " (" + creds.origin + ") gave no JSON field \"" +
                            creds.subject_token_field + "\"");
    }
  }
  if (token.empty()) {
    throw DriverError(GPUPROV_STATUS_AUTH, where + " (" + creds.origin + ") is empty");
  }
  return token;
}

namespace {

/// dddd-dd-ddTdd:dd:dd, optionally .d+, then Z or [+-]dd:dd. Written out: libstdc++'s std::regex
/// recurses once per character and a long input overflowed the stack (found by fuzzing,
/// docs/fuzzing.md).
bool HasRfc3339Shape(std::string_view s) {
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  // 'd' in a shape is a digit; any other character stands for itself.
  const auto fits = [&](std::string_view text, std::string_view shape) {
    if (text.size() != shape.size()) return false;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == 'd' ? !digit(text[i]) : text[i] != shape[i]) return false;
    }
    return true;
  };
  constexpr std::string_view kDateTime = "dddd-dd-ddTdd:dd:dd";
  if (s.size() < kDateTime.size() || !fits(s.substr(0, kDateTime.size()), kDateTime)) return false;
  s.remove_prefix(kDateTime.size());
  if (!s.empty() && s[0] == '.') {
    std::size_t n = 1;
    while (n < s.size() && digit(s[n])) ++n;
    if (n == 1) return false;
    s.remove_prefix(n);
  }
  if (s == "Z") return true;
  return !s.empty() && (s[0] == '+' || s[0] == '-') && fits(s.substr(1), "dd:dd");
}

}  // namespace

std::optional<int64_t> SecondsUntil(const std::string& rfc3339, int64_t now_unix_seconds) {
  // Poco's parser is lenient about what precedes the fields: the shape is checked first.
  if (!HasRfc3339Shape(rfc3339)) return std::nullopt;
  Poco::DateTime dt;
  int tzd = 0;
  if (!Poco::DateTimeParser::tryParse(Poco::DateTimeFormat::ISO8601_FRAC_FORMAT, rfc3339, dt,
                                      tzd) &&
      !Poco::DateTimeParser::tryParse(Poco::DateTimeFormat::ISO8601_FORMAT, rfc3339, dt, tzd)) {
    return std::nullopt;
  }
  dt.makeUTC(tzd);
  return static_cast<int64_t>(dt.timestamp().epochTime()) - now_unix_seconds;
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

namespace {

// The error words of an OAuth/STS answer ({"error","error_description"}) or a Google API
// answer ({"error":{"code","message","status"}}); neither carries a secret.
std::string ErrorWords(const std::string& body) {
  Object::Ptr doc = json::TryParseObject(body);
  if (!doc) return "";
  std::string words;
  try {
    if (doc->isObject("error")) {
      Object::Ptr e = doc->getObject("error");
      words = json::Str(e, "status");
      const std::string message = json::Str(e, "message");
      if (!message.empty()) words += (words.empty() ? "" : ": ") + message;
    } else {
      words = json::Str(doc, "error");
      const std::string description = json::Str(doc, "error_description");
      if (!description.empty()) words += (words.empty() ? "" : ": ") + description;
    }
  } catch (const DriverError&) {
  }
  while (!words.empty() && words.back() == '.') words.pop_back();
  return words;
}

std::string BaseOf(const std::string& url, std::string* path_and_query) {
  Poco::URI uri(url);  // throws Poco::SyntaxException
  if (path_and_query) {
    *path_and_query = uri.getPathEtc();
    if (path_and_query->empty()) *path_and_query = "/";
  }
  return uri.getScheme() + "://" + uri.getAuthority();
}

}  // namespace

TokenSource::TokenSource(GoogleCredentials creds, drivers::RetryPolicy policy,
                         const sdk::Host& host)
    : creds_(std::move(creds)), policy_(policy), host_(host) {
  std::vector<std::pair<std::string, std::string>> urls;  // (what, url)
  switch (creds_.type) {
    case GoogleCredentials::Type::kServiceAccount:
    case GoogleCredentials::Type::kAuthorizedUser:
      urls.emplace_back("token_uri", creds_.token_uri);
      break;
    case GoogleCredentials::Type::kExternalAccount:
      urls.emplace_back("token_url", creds_.token_uri);
      if (!creds_.subject_token_url.empty()) {
        urls.emplace_back("credential_source.url", creds_.subject_token_url);
      }
      if (!creds_.impersonation_url.empty()) {
        urls.emplace_back("service_account_impersonation_url", creds_.impersonation_url);
      }
      break;
    case GoogleCredentials::Type::kImpersonatedServiceAccount:
      urls.emplace_back("service_account_impersonation_url", creds_.impersonation_url);
      source_ = std::make_unique<TokenSource>(*creds_.source, policy_, host_);
      break;
    case GoogleCredentials::Type::kMetadataServer:
      break;
  }
  for (const auto& [what, url] : urls) {
    try {
      ClientFor(url);
    } catch (const Poco::Exception&) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        what + " \"" + url + "\" in " + creds_.origin + " is not a URL");
    } catch (const drivers::HttpError& e) {
      throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                        what + " in " + creds_.origin + ": " + e.what());
    }
  }
}

TokenSource::~TokenSource() = default;

drivers::HttpClient& TokenSource::ClientFor(const std::string& url) {
  const std::string base = BaseOf(url, nullptr);
  auto it = clients_.find(base);
  if (it == clients_.end()) {
    it = clients_.emplace(base, std::make_unique<drivers::HttpClient>(base, policy_, host_)).first;
  }
  return *it->second;
}

drivers::HttpResponse TokenSource::Send(const std::string& url, drivers::HttpRequest req,
                                        const std::string& what) {
  BaseOf(url, &req.path_and_query);
  drivers::HttpResponse resp;
  try {
    resp = ClientFor(url).Send(req);
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
  if (resp.status >= 200 && resp.status < 300) return resp;
  std::string msg = what + ": HTTP " + std::to_string(resp.status);
  const std::string words = ErrorWords(resp.body);
  if (!words.empty()) msg += " " + words;
  if (resp.status >= 400 && resp.status < 500) {
    throw DriverError(GPUPROV_STATUS_AUTH,
                      msg + ". The credentials in " + creds_.Describe() +
                          " were refused: the key may be deleted or disabled, the account may "
                          "lack the right, or this machine's clock is off; " +
                          CredentialsHint());
  }
  throw DriverError(GPUPROV_STATUS_FAILED, msg);
}

TokenResponse TokenSource::FetchOAuthToken() {
  drivers::HttpRequest req;
  req.method = "POST";
  req.headers["Content-Type"] = "application/x-www-form-urlencoded";
  req.body = TokenRequestBody(creds_, static_cast<int64_t>(std::time(nullptr)));
  // {"error": "invalid_grant", "error_description": "..."} (REFERENCE.md §1.1) on refusal.
  return ParseTokenResponse(
      Send(creds_.token_uri, req, "get a Google access token from " + creds_.token_uri).body);
}

std::string TokenSource::ReadSubjectToken() {
  if (!creds_.subject_token_file.empty()) {
    std::optional<std::string> raw = drivers::ReadSmallFile(creds_.subject_token_file);
    if (!raw) {
      throw DriverError(GPUPROV_STATUS_AUTH,
                        "cannot read the subject token file " + creds_.subject_token_file +
                            " named by credential_source.file in " + creds_.origin);
    }
    return SubjectTokenFrom(creds_, *raw);
  }
  drivers::HttpRequest req;
  req.method = "GET";
  for (const auto& [name, value] : creds_.subject_token_headers) req.headers[name] = value;
  return SubjectTokenFrom(
      creds_, Send(creds_.subject_token_url, req,
                   "get the subject token from " + creds_.subject_token_url)
                  .body);
}

TokenResponse TokenSource::FetchExternalToken() {
  drivers::HttpRequest req;
  req.method = "POST";
  req.headers["Content-Type"] = "application/x-www-form-urlencoded";
  req.body = StsRequestBody(creds_, ReadSubjectToken());
  TokenResponse federated = ParseTokenResponse(
      Send(creds_.token_uri, req, "exchange the subject token at " + creds_.token_uri).body);
  if (creds_.impersonation_url.empty()) return federated;
  return FetchImpersonated(federated.access_token);
}

TokenResponse TokenSource::FetchImpersonated(const std::string& source_token) {
  drivers::HttpRequest req;
  req.method = "POST";
  req.headers["Content-Type"] = "application/json";
  req.headers["Authorization"] = "Bearer " + source_token;
  req.body = GenerateAccessTokenBody(creds_.delegates);
  const std::string what =
      "get an access token of " +
      (creds_.client_email.empty() ? creds_.impersonation_url : creds_.client_email) +
      " (service account impersonation)";
  drivers::HttpResponse resp = Send(creds_.impersonation_url, req, what);
  Object::Ptr doc = json::TryParseObject(resp.body);
  TokenResponse r;
  std::string expire_time;
  try {
    r.access_token = json::Str(doc, "accessToken");
    expire_time = json::Str(doc, "expireTime");
  } catch (const DriverError&) {
    r.access_token.clear();
  }
  if (r.access_token.empty()) {
    throw DriverError(GPUPROV_STATUS_AUTH, what + ": the answer has no accessToken");
  }
  r.expires_in_seconds = SecondsUntil(expire_time, static_cast<int64_t>(std::time(nullptr)))
                             .value_or(kAssertionLifetimeSeconds);
  return r;
}

TokenResponse TokenSource::FetchMetadataToken() {
  std::optional<std::string> body = MetadataGet(
      creds_.metadata_host, "instance/service-accounts/default/token", std::chrono::seconds(10));
  if (!body) {
    throw DriverError(GPUPROV_STATUS_AUTH,
                      "no access token from " + creds_.origin +
                          ": the VM (or pod) has no service account with the cloud-platform "
                          "scope, or the server is unreachable; " +
                          CredentialsHint());
  }
  return ParseTokenResponse(*body);
}

std::string TokenSource::Token(bool force_refresh) {
  const auto now = std::chrono::steady_clock::now();
  if (!force_refresh && !token_.empty() && now + kTokenRefreshMargin < expires_) return token_;
  TokenResponse t;
  switch (creds_.type) {
    case GoogleCredentials::Type::kServiceAccount:
    case GoogleCredentials::Type::kAuthorizedUser:
      t = FetchOAuthToken();
      break;
    case GoogleCredentials::Type::kExternalAccount:
      t = FetchExternalToken();
      break;
    case GoogleCredentials::Type::kImpersonatedServiceAccount:
      t = FetchImpersonated(source_->Token(force_refresh));
      break;
    case GoogleCredentials::Type::kMetadataServer:
      t = FetchMetadataToken();
      break;
  }
  ++fetches_;
  token_ = t.access_token;
  expires_ = std::chrono::steady_clock::now() + std::chrono::seconds(t.expires_in_seconds);
  host_.Debug("access token from " + creds_.Describe() +
              (creds_.client_email.empty() ? "" : " for " + creds_.client_email) + ", valid " +
              std::to_string(t.expires_in_seconds) + " s");
  return token_;
}

}  // namespace gpuprov::gcp
