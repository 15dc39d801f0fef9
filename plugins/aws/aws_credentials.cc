// SPDX-License-Identifier: Apache-2.0
#include "aws_credentials.h"

#include <Poco/DigestEngine.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/SHA1Engine.h>
#include <Poco/URI.h>
#include <sys/wait.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "credentials.h"
#include "ec2_xml.h"
#include "http_client.h"
#include "sigv4.h"
#include "text.h"

namespace gpuprov::aws {
namespace {

using Section = std::map<std::string, std::string>;

// A configured source that failed: the chain stops and says why (never a secret).
struct SourceFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr long long kRefreshBeforeExpirySeconds = 600;
constexpr const char* kStsVersion = "2011-06-15";

std::string Get(const EnvLookup& env, const std::string& name) {
  std::optional<std::string> v = env(name);
  return v ? drivers::TrimSpace(*v) : "";
}

using gpuprov::drivers::Lower;

std::string HomeFile(const EnvLookup& env, const std::string& override_var,
                     const std::string& leaf) {
  std::string path = Get(env, override_var);
  if (!path.empty()) {
    if (path.rfind("~/", 0) == 0) path = Get(env, "HOME") + path.substr(1);
    return path;
  }
  const std::string home = Get(env, "HOME");
  return home.empty() ? "" : home + "/.aws/" + leaf;
}

std::string ExpandHome(const EnvLookup& env, const std::string& path) {
  return path.rfind("~/", 0) == 0 ? Get(env, "HOME") + path.substr(1) : path;
}

const Section* FindSection(const IniFile& ini, const std::string& name) {
  auto it = ini.find(name);
  return it == ini.end() ? nullptr : &it->second;
}

std::string Value(const Section* section, const std::string& key) {
  if (!section) return "";
  auto it = section->find(key);
  return it == section->end() ? "" : it->second;
}

// The config file names profiles "[profile NAME]", except "[default]".
const Section* ConfigSection(const IniFile& ini, const std::string& profile) {
  if (profile == "default") {
    if (auto* s = FindSection(ini, "default")) return s;
  }
  return FindSection(ini, "profile " + profile);
}

std::optional<AwsCredentials> FromSection(const Section* s, const std::string& origin) {
  const std::string id = Value(s, "aws_access_key_id");
  const std::string secret = Value(s, "aws_secret_access_key");
  if (id.empty() || secret.empty()) return std::nullopt;
  AwsCredentials c;
  c.access_key_id = id;
  c.secret_access_key = secret;
  c.session_token = Value(s, "aws_session_token");
  c.origin = origin;
  return c;
}

// --- the in-process cache of temporary credentials -------------------------------------

std::mutex& CacheMutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, AwsCredentials>& Cache() {
  static std::map<std::string, AwsCredentials> cache;
  return cache;
}

// Everything a resolution needs.
struct Resolver {
  const EnvLookup& env;
  const CredentialOptions& options;
  IniFile creds, conf;
  std::string cred_path, conf_path;

  long long Now() const {
    return options.clock ? options.clock() : static_cast<long long>(std::time(nullptr));
  }

  drivers::HttpClientOptions HttpOptions(bool link_local = false) const {
    drivers::HttpClientOptions o;
    o.ca_file = ExpandHome(env, Get(env, "AWS_CA_BUNDLE"));
    o.allow_link_local_http = link_local;
    o.env = [this](const std::string& n) { return env(n); };
    return o;
  }

  // Cached credentials under `key` while fresh, else fetch() and cache its answer.
  template <typename Fetch>
  AwsCredentials Cached(const std::string& key, Fetch fetch) const {
    {
      std::lock_guard<std::mutex> lock(CacheMutex());
      auto it = Cache().find(key);
      if (it != Cache().end() &&
          (it->second.expiration == 0 ||
           it->second.expiration - kRefreshBeforeExpirySeconds > Now())) {
        return it->second;
      }
    }
    AwsCredentials c = fetch();
    std::lock_guard<std::mutex> lock(CacheMutex());
    Cache()[key] = c;
    return c;
  }

  // One HTTP request to a full URL; HttpError becomes a SourceFailure naming `what`.
  drivers::HttpResponse Request(const std::string& what, const std::string& url,
                                drivers::HttpRequest request, drivers::RetryPolicy policy,
                                bool link_local = false) const {
    Poco::URI uri;
    try {
      uri = Poco::URI(url);
    } catch (const Poco::Exception&) {
      throw SourceFailure(what + ": \"" + url + "\" is not a URL");
    }
    std::string base = uri.getScheme() + "://" + uri.getAuthority();
    std::string path = uri.getPathEtc();
    std::string rel = request.path_and_query;
    if (!rel.empty()) {
      while (!path.empty() && path.back() == '/') path.pop_back();
      if (rel.front() != '/') rel.insert(rel.begin(), '/');
    }
    path += rel;
    if (path.empty()) path = "/";
    request.path_and_query = path;
    try {
      drivers::HttpClient client(base, policy, options.host, HttpOptions(link_local));
      return client.Send(request);
    } catch (const drivers::HttpError& e) {
      throw SourceFailure(what + ": " + e.what());
    }
  }

  // --- STS -------------------------------------------------------------------------

  std::string StsEndpoint() const {
    std::string e = EndpointOverride(env, "STS");
    if (!e.empty()) return e;
    if (options.region.empty()) {
      throw SourceFailure("no AWS region to call STS in: " + NoRegionProblem(""));
    }
    const bool china = options.region.rfind("cn-", 0) == 0;
    return "https://sts." + options.region + ".amazonaws.com" + (china ? ".cn" : "");
  }

  static std::string HostHeader(const std::string& url) {
    Poco::URI uri(url);
    const bool default_port = (uri.getScheme() == "https" && uri.getPort() == 443) ||
                              (uri.getScheme() == "http" && uri.getPort() == 80);
    return default_port ? uri.getHost() : uri.getHost() + ":" + std::to_string(uri.getPort());
  }

  AwsCredentials StsCall(const std::string& action,
                         const std::vector<std::pair<std::string, std::string>>& params,
                         const AwsCredentials* signer, const std::string& origin,
                         const std::string& fix) const {
    const std::string endpoint = StsEndpoint();
    std::vector<std::pair<std::string, std::string>> all = {{"Action", action},
                                                            {"Version", kStsVersion}};
    all.insert(all.end(), params.begin(), params.end());
    drivers::HttpRequest request;
    request.method = "POST";
    request.body = FormEncode(all);
    if (signer) {
      // The region STS signatures are scoped to: the client's region (us-east-1 for the
      // global endpoint only when the user pointed AWS_ENDPOINT_URL_STS at it without one).
      const std::string region = options.region.empty() ? "us-east-1" : options.region;
      SignedPost signed_post =
          SignQueryPost(HostHeader(endpoint), request.body, region, "sts", signer->access_key_id,
                        signer->secret_access_key, signer->session_token,
                        static_cast<long long>(std::time(nullptr)));
      for (const auto& [k, v] : signed_post.headers) {
        if (Lower(k) != "host") request.headers[k] = v;
      }
    } else {
      request.headers["Content-Type"] = kFormContentType;
    }
    drivers::HttpResponse r = Request("STS " + action + " at " + endpoint, endpoint, request,
                                      options.policy);
    XmlNode doc;
    try {
      doc = ParseXml(r.body);
    } catch (const std::exception&) {
      throw SourceFailure("STS " + action + " answered HTTP " + std::to_string(r.status) +
                          " without XML");
    }
    if (r.status != 200) {
      Ec2ErrorBody e = ParseErrorBody(r.body);
      throw SourceFailure("STS " + action + " for " + origin + " failed: " + e.code + ": " +
                          e.message + " (HTTP " + std::to_string(r.status) + "); " + fix);
    }
    const XmlNode* c = doc.Find(action + "Result/Credentials");
    if (c == nullptr || c->Text("AccessKeyId").empty() || c->Text("SecretAccessKey").empty()) {
      throw SourceFailure("STS " + action + " answered without Credentials");
    }
    AwsCredentials out;
    out.access_key_id = c->Text("AccessKeyId");
    out.secret_access_key = c->Text("SecretAccessKey");
    out.session_token = c->Text("SessionToken");
    out.expiration = ParseIsoTime(c->Text("Expiration")).value_or(0);
    out.origin = origin;
    return out;
  }

  std::string SessionName(const std::string& configured) const {
    if (!configured.empty()) return configured;
    return "gpuprov-" + std::to_string(Now());
  }

  AwsCredentials WebIdentity(const std::string& token_file, const std::string& role_arn,
                             const std::string& session_name, const std::string& origin) const {
    return Cached("web|" + role_arn + "|" + token_file, [&] {
      std::optional<std::string> token = drivers::ReadSmallFile(ExpandHome(env, token_file));
      if (!token || drivers::TrimSpace(*token).empty()) {
        throw SourceFailure("the web identity token file " + token_file +
                            " cannot be read or is empty (" + origin + ")");
      }
      return StsCall("AssumeRoleWithWebIdentity",
                     {{"RoleArn", role_arn},
                      {"RoleSessionName", SessionName(session_name)},
                      {"WebIdentityToken", drivers::TrimSpace(*token)}},
                     nullptr, origin,
                     "check the role's trust policy and that the token file is current");
    });
  }

  // --- profiles ----------------------------------------------------------------------

  std::string ConfigSectionName(const std::string& profile) const {
    return profile == "default" ? "[default]" : "[profile " + profile + "]";
  }

  // Credentials of `profile`, or nullopt when it configures none. `depth` counts
  // source_profile hops.
  std::optional<AwsCredentials> Profile(const std::string& profile, int depth,
                                        bool as_source) const {
    if (depth > 8) {
      throw SourceFailure("profile " + profile +
                          ": source_profile chain longer than 8 (a loop?); fix source_profile "
                          "in " + conf_path);
    }
    const Section* cfg = ConfigSection(conf, profile);
    const Section* cred = FindSection(creds, profile);
    auto value = [&](const std::string& key) {
      std::string v = Value(cfg, key);
      return v.empty() ? Value(cred, key) : v;
    };
    const auto static_creds =
        FromSection(cred, "profile " + profile + " (" + cred_path + " [" + profile + "])");
    const std::string role_arn = value("role_arn");
    // A source profile with keys of its own uses them (the role is the profile's, not the
    // source's), as the SDKs do.
    if (!role_arn.empty() && !(as_source && static_creds)) {
      return Role(profile, role_arn, value, depth);
    }
    if (!value("sso_session").empty() || !value("sso_start_url").empty()) {
      return Sso(profile, cfg);
    }
    if (static_creds) return static_creds;
    if (!value("credential_process").empty()) {
      return Process(profile, value("credential_process"));
    }
    if (auto c = FromSection(cfg, "profile " + profile + " (" + conf_path + " " +
                                      ConfigSectionName(profile) + ")")) {
      return c;
    }
    return std::nullopt;
  }

  template <typename ValueFn>
  AwsCredentials Role(const std::string& profile, const std::string& role_arn, ValueFn value,
                      int depth) const {
    if (!value("mfa_serial").empty()) {
      throw SourceFailure(
          "profile " + profile + " needs an MFA code (mfa_serial), which gpuprov cannot ask "
          "for: run `aws sts get-caller-identity --profile " + profile + "` (it prompts and "
          "caches the role), then `eval \"$(aws configure export-credentials --profile " +
          profile + " --format env)\"`, or use a profile without mfa_serial");
    }
    const std::string session = value("role_session_name");
    if (!value("web_identity_token_file").empty()) {
      return WebIdentity(value("web_identity_token_file"), role_arn, session,
                         "profile " + profile + " (role_arn via web_identity_token_file)");
    }
    std::optional<AwsCredentials> source;
    std::string origin;
    const std::string source_profile = value("source_profile");
    const std::string credential_source = value("credential_source");
    if (!source_profile.empty()) {
      origin = "profile " + profile + " (role_arn via source_profile " + source_profile + ")";
      if (source_profile == profile) {
        source = FromSection(FindSection(creds, profile), origin);
        if (!source) source = FromSection(ConfigSection(conf, profile), origin);
      } else {
        source = Profile(source_profile, depth + 1, /*as_source=*/true);
      }
      if (!source) {
        throw SourceFailure("profile " + profile + ": its source_profile " + source_profile +
                            " has no credentials (add aws_access_key_id/aws_secret_access_key "
                            "for [" + source_profile + "] in " + cred_path + ")");
      }
    } else if (!credential_source.empty()) {
      origin = "profile " + profile + " (role_arn via credential_source " + credential_source + ")";
      if (credential_source == "Environment") {
        source = EnvKeys();
      } else if (credential_source == "EcsContainer") {
        source = Container();
      } else if (credential_source == "Ec2InstanceMetadata") {
        source = Imds(/*required=*/true);
      } else {
        throw SourceFailure("profile " + profile + ": credential_source = " + credential_source +
                            " is not one of Environment, Ec2InstanceMetadata, EcsContainer");
      }
      if (!source) {
        throw SourceFailure("profile " + profile + ": credential_source " + credential_source +
                            " has no credentials");
      }
    } else {
      throw SourceFailure("profile " + profile + " sets role_arn but neither source_profile nor "
                          "credential_source (nor web_identity_token_file): add one to " +
                          ConfigSectionName(profile) + " in " + conf_path);
    }
    std::vector<std::pair<std::string, std::string>> params = {
        {"RoleArn", role_arn}, {"RoleSessionName", SessionName(session)}};
    if (!value("external_id").empty()) params.emplace_back("ExternalId", value("external_id"));
    if (!value("duration_seconds").empty()) {
      params.emplace_back("DurationSeconds", value("duration_seconds"));
    }
    const AwsCredentials signer = *source;
    return Cached("role|" + profile + "|" + role_arn + "|" + signer.access_key_id, [&] {
      return StsCall("AssumeRole", params, &signer, origin,
                     "check that the source credentials (" + signer.origin +
                         ") may sts:AssumeRole " + role_arn + " and the role trusts them");
    });
  }

  AwsCredentials Sso(const std::string& profile, const Section* cfg) const {
    std::string start_url = Value(cfg, "sso_start_url");
    std::string sso_region = Value(cfg, "sso_region");
    std::string cache_key = start_url;
    const std::string session = Value(cfg, "sso_session");
    if (!session.empty()) {
      const Section* s = FindSection(conf, "sso-session " + session);
      if (s == nullptr) {
        throw SourceFailure("profile " + profile + " names sso_session " + session +
                            " but " + conf_path + " has no [sso-session " + session +
                            "] section: run `aws configure sso --profile " + profile + "`");
      }
      start_url = Value(s, "sso_start_url");
      sso_region = Value(s, "sso_region");
      cache_key = session;
    }
    const std::string account = Value(cfg, "sso_account_id");
    const std::string role = Value(cfg, "sso_role_name");
    const std::string login = "`aws sso login --profile " + profile + "`";
    if (sso_region.empty() || account.empty() || role.empty()) {
      throw SourceFailure("profile " + profile +
                          " is an SSO profile without sso_region, sso_account_id or "
                          "sso_role_name: run `aws configure sso --profile " + profile + "`");
    }
    Poco::SHA1Engine sha1;
    sha1.update(cache_key);
    const std::string home = Get(env, "HOME");
    const std::string cache_file =
        home + "/.aws/sso/cache/" + Poco::DigestEngine::digestToHex(sha1.digest()) + ".json";
    std::optional<std::string> text = drivers::ReadSmallFile(cache_file);
    if (!text) {
      throw SourceFailure("profile " + profile + ": no cached SSO login (" + cache_file +
                          "): run " + login);
    }
    std::string token, expires_at;
    try {
      Poco::JSON::Parser parser;
      auto o = parser.parse(*text).extract<Poco::JSON::Object::Ptr>();
      token = o->optValue<std::string>("accessToken", "");
      expires_at = o->optValue<std::string>("expiresAt", "");
    } catch (const std::exception&) {
      throw SourceFailure("profile " + profile + ": the cached SSO login " + cache_file +
                          " is not JSON: run " + login);
    }
    std::optional<long long> expiry = ParseIsoTime(expires_at);
    if (token.empty() || !expiry || *expiry <= Now()) {
      throw SourceFailure("profile " + profile + ": the cached SSO login has expired: run " +
                          login);
    }
    std::string portal = EndpointOverride(env, "SSO");
    if (portal.empty()) portal = "https://portal.sso." + sso_region + ".amazonaws.com";
    const std::string origin = "profile " + profile + " (" +
                               (session.empty() ? "sso_start_url" : "sso_session " + session) +
                               ", account " + account + ", role " + role + ")";
    return Cached("sso|" + profile + "|" + account + "|" + role + "|" + token.substr(0, 16), [&] {
      drivers::HttpRequest request;
      request.path_and_query =
          "/federation/credentials?account_id=" + UriEncode(account) +
          "&role_name=" + UriEncode(role);
      request.headers["x-amz-sso_bearer_token"] = token;
      drivers::HttpResponse r =
          Request("the SSO portal " + portal, portal, request, options.policy);
      if (r.status == 401 || r.status == 403) {
        throw SourceFailure("profile " + profile + ": the SSO portal refused the cached login "
                            "(HTTP " + std::to_string(r.status) + "): run " + login +
                            " (and check that the role " + role + " exists in account " +
                            account + ")");
      }
      if (r.status != 200) {
        throw SourceFailure("profile " + profile + ": the SSO portal answered HTTP " +
                            std::to_string(r.status));
      }
      AwsCredentials c;
      try {
        Poco::JSON::Parser parser;
        auto o = parser.parse(r.body).extract<Poco::JSON::Object::Ptr>();
        auto rc = o->getObject("roleCredentials");
        if (!rc) throw std::runtime_error("no roleCredentials");
        c.access_key_id = rc->optValue<std::string>("accessKeyId", "");
        c.secret_access_key = rc->optValue<std::string>("secretAccessKey", "");
        c.session_token = rc->optValue<std::string>("sessionToken", "");
        c.expiration = rc->optValue<long long>("expiration", 0) / 1000;  // milliseconds
      } catch (const std::exception&) {
        throw SourceFailure("profile " + profile +
                            ": the SSO portal's answer has no roleCredentials");
      }
      if (c.access_key_id.empty() || c.secret_access_key.empty()) {
        throw SourceFailure("profile " + profile + ": the SSO portal returned no keys");
      }
      c.origin = origin;
      return c;
    });
  }

  // Credentials as credential_process and container endpoints print them (JSON).
  static AwsCredentials FromJson(const std::string& text, const std::string& origin,
                                 const std::string& what, bool need_version) {
    Poco::JSON::Object::Ptr o;
    try {
      Poco::JSON::Parser parser;
      o = parser.parse(text).extract<Poco::JSON::Object::Ptr>();
    } catch (const std::exception&) {
      throw SourceFailure(what + " did not print a JSON object");
    }
    if (need_version && o->optValue<int>("Version", 0) != 1) {
      throw SourceFailure(what + " printed JSON without \"Version\": 1");
    }
    AwsCredentials c;
    c.access_key_id = o->optValue<std::string>("AccessKeyId", "");
    c.secret_access_key = o->optValue<std::string>("SecretAccessKey", "");
    c.session_token = o->optValue<std::string>(o->has("SessionToken") ? "SessionToken" : "Token",
                                               "");
    if (c.access_key_id.empty() || c.secret_access_key.empty()) {
      throw SourceFailure(what + " printed no AccessKeyId/SecretAccessKey");
    }
    const std::string expiration = o->optValue<std::string>("Expiration", "");
    if (!expiration.empty()) {
      std::optional<long long> t = ParseIsoTime(expiration);
      if (!t) throw SourceFailure(what + " printed an Expiration that is not ISO 8601");
      c.expiration = *t;
    }
    c.origin = origin;
    return c;
  }

  AwsCredentials Process(const std::string& profile, const std::string& command) const {
    const std::string origin = "profile " + profile + " (credential_process)";
    return Cached("process|" + profile + "|" + command, [&] {
      const std::string what = "credential_process of profile " + profile;
      // popen runs the command with /bin/sh -c; its stderr goes to ours, stdout is read.
      FILE* pipe = popen(command.c_str(), "r");
      if (pipe == nullptr) throw SourceFailure(what + " could not be started");
      std::string out;
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, pipe)) > 0 && out.size() < (1u << 20)) {
        out.append(buf, n);
      }
      const int status = pclose(pipe);
      if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        throw SourceFailure(what + " failed (exit status " +
                            std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                            "); run it yourself to see why");
      }
      AwsCredentials c = FromJson(out, origin, what, /*need_version=*/true);
      if (c.expiration != 0 && c.expiration <= Now()) {
        throw SourceFailure(what + " printed credentials that have already expired");
      }
      return c;
    });
  }

  // --- environment, containers, instance metadata ----------------------------------------

  std::optional<AwsCredentials> EnvKeys() const {
    const std::string id = Get(env, "AWS_ACCESS_KEY_ID");
    const std::string secret = Get(env, "AWS_SECRET_ACCESS_KEY");
    if (id.empty() || secret.empty()) return std::nullopt;
    AwsCredentials c;
    c.access_key_id = id;
    c.secret_access_key = secret;
    c.session_token = Get(env, "AWS_SESSION_TOKEN");
    c.origin = "$AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY";
    return c;
  }

  std::optional<AwsCredentials> Container() const {
    std::string url = Get(env, "AWS_CONTAINER_CREDENTIALS_FULL_URI");
    std::string origin = "container credentials ($AWS_CONTAINER_CREDENTIALS_FULL_URI)";
    if (url.empty()) {
      const std::string relative = Get(env, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
      if (relative.empty()) return std::nullopt;
      url = options.container_host + (relative.front() == '/' ? "" : "/") + relative;
      origin = "container credentials ($AWS_CONTAINER_CREDENTIALS_RELATIVE_URI)";
    } else {
      Poco::URI uri;
      try {
        uri = Poco::URI(url);
      } catch (const Poco::Exception&) {
      }
      const std::string host = uri.getHost();
      if (Lower(uri.getScheme()) == "http" && !drivers::IsLoopbackHost(host) &&
          !drivers::IsLinkLocalCredentialHost(host)) {
        throw SourceFailure("AWS_CONTAINER_CREDENTIALS_FULL_URI: http:// is allowed only for "
                            "loopback and the ECS/EKS addresses 169.254.170.2/.23; use https://");
      }
    }
    std::string authorization;
    const std::string token_file = Get(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
    if (!token_file.empty()) {
      std::optional<std::string> t = drivers::ReadSmallFile(token_file);
      if (!t) {
        throw SourceFailure("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE " + token_file +
                            " cannot be read");
      }
      authorization = drivers::TrimSpace(*t);
    } else {
      authorization = Get(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN");
    }
    if (authorization.find_first_of("\r\n") != std::string::npos) {
      throw SourceFailure("the container authorization token contains a line break");
    }
    return Cached("container|" + url, [&] {
      drivers::HttpRequest request;
      if (!authorization.empty()) request.headers["Authorization"] = authorization;
      drivers::RetryPolicy policy = options.policy;
      policy.max_attempts = std::min(policy.max_attempts, 3);
      policy.attempt_timeout = std::chrono::milliseconds(2000);
      drivers::HttpResponse r = Request(origin, url, request, policy, /*link_local=*/true);
      if (r.status != 200) {
        throw SourceFailure(origin + " answered HTTP " + std::to_string(r.status) +
                            (r.status == 401 || r.status == 403
                                 ? " (check AWS_CONTAINER_AUTHORIZATION_TOKEN[_FILE])"
                                 : ""));
      }
      return FromJson(r.body, origin, origin, /*need_version=*/false);
    });
  }

  static bool DmiSaysEc2() {
    for (const char* f : {"/sys/class/dmi/id/board_vendor", "/sys/class/dmi/id/sys_vendor"}) {
      if (auto t = drivers::ReadSmallFile(f)) {
        if (t->find("Amazon EC2") != std::string::npos) return true;
      }
    }
    if (auto t = drivers::ReadSmallFile("/sys/hypervisor/uuid")) {
      if (Lower(*t).rfind("ec2", 0) == 0) return true;
    }
    return false;
  }

  std::optional<AwsCredentials> Imds(bool required) const {
    if (Lower(Get(env, "AWS_EC2_METADATA_DISABLED")) == "true") return std::nullopt;
    std::string endpoint = Get(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT");
    if (endpoint.empty()) {
      const bool on_ec2 = options.on_ec2 ? options.on_ec2() : DmiSaysEc2();
      if (!on_ec2 && !required) return std::nullopt;
      endpoint = options.imds_endpoint;
    }
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
    const std::string origin_base = "EC2 instance profile (IMDSv2 at " + endpoint + ")";
    drivers::RetryPolicy policy = options.policy;
    policy.max_attempts = 2;
    policy.attempt_timeout = std::chrono::milliseconds(1000);
    return Cached("imds|" + endpoint, [&] {
      drivers::HttpRequest put;
      put.method = "PUT";
      put.path_and_query = "latest/api/token";
      put.headers["X-aws-ec2-metadata-token-ttl-seconds"] = "21600";
      drivers::HttpResponse t = Request(origin_base, endpoint, put, policy, true);
      if (t.status != 200 || t.body.empty()) {
        throw SourceFailure(origin_base + ": the token PUT answered HTTP " +
                            std::to_string(t.status));
      }
      drivers::HttpRequest list;
      list.path_and_query = "latest/meta-data/iam/security-credentials/";
      list.headers["X-aws-ec2-metadata-token"] = t.body;
      drivers::HttpResponse roles = Request(origin_base, endpoint, list, policy, true);
      std::string role = drivers::TrimSpace(roles.body);
      role = role.substr(0, role.find('\n'));
      if (roles.status == 404 || (roles.status == 200 && role.empty())) {
        throw SourceFailure("this EC2 instance has no instance profile (IAM role): attach one, "
                            "or set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE");
      }
      if (roles.status != 200) {
        throw SourceFailure(origin_base + " answered HTTP " + std::to_string(roles.status));
      }
      drivers::HttpRequest get = list;
      get.path_and_query += role;
      drivers::HttpResponse r = Request(origin_base, endpoint, get, policy, true);
      if (r.status != 200) {
        throw SourceFailure(origin_base + ": role " + role + " answered HTTP " +
                            std::to_string(r.status));
      }
      const std::string origin = "EC2 instance profile " + role + " (IMDSv2)";
      return FromJson(r.body, origin, origin, /*need_version=*/false);
    });
  }
};

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
}

std::string CredentialsFilePath(const EnvLookup& env) {
  return HomeFile(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
}

std::string ConfigFilePath(const EnvLookup& env) {
  return HomeFile(env, "AWS_CONFIG_FILE", "config");
}

std::string ProfileName(const EnvLookup& env, const std::string& configured) {
  if (!configured.empty()) return configured;
  std::string p = Get(env, "AWS_PROFILE");
  return p.empty() ? "default" : p;
}

std::string EndpointOverride(const EnvLookup& env, const std::string& service_id) {
  std::string v = Get(env, "AWS_ENDPOINT_URL_" + service_id);
  return v.empty() ? Get(env, "AWS_ENDPOINT_URL") : v;
}

void ClearCredentialCache() {
  std::lock_guard<std::mutex> lock(CacheMutex());
  Cache().clear();
}

CredentialLookup ResolveCredentials(const EnvLookup& env, const std::string& configured_profile,
                                    const CredentialOptions& options) {
  CredentialLookup out;
  Resolver r{env, options, {}, {}, CredentialsFilePath(env), ConfigFilePath(env)};
  if (!r.cred_path.empty()) {
    if (auto text = drivers::ReadSmallFile(r.cred_path)) r.creds = ParseIni(*text);
  }
  if (!r.conf_path.empty()) {
    if (auto text = drivers::ReadSmallFile(r.conf_path)) r.conf = ParseIni(*text);
  }
  const std::string profile = ProfileName(env, configured_profile);
  try {
    if (auto c = r.EnvKeys()) {
      out.credentials = c;
      return out;
    }
    const std::string token_file = Get(env, "AWS_WEB_IDENTITY_TOKEN_FILE");
    const std::string role_arn = Get(env, "AWS_ROLE_ARN");
    if (!token_file.empty() && !role_arn.empty()) {
      out.credentials = r.WebIdentity(token_file, role_arn, Get(env, "AWS_ROLE_SESSION_NAME"),
                                      "web identity ($AWS_WEB_IDENTITY_TOKEN_FILE, role " +
                                          role_arn + ")");
      return out;
    }
    if (auto c = r.Profile(profile, 0, /*as_source=*/false)) {
      out.credentials = c;
      return out;
    }
    if (auto c = r.Container()) {
      out.credentials = c;
      return out;
    }
    if (auto c = r.Imds(/*required=*/false)) {
      out.credentials = c;
      return out;
    }
  } catch (const SourceFailure& e) {
    out.problem = e.what();
    return out;
  }
  const std::string id = Get(env, "AWS_ACCESS_KEY_ID");
  const std::string secret = Get(env, "AWS_SECRET_ACCESS_KEY");
  std::string half;
  if (!id.empty() || !secret.empty()) {
    half = std::string(id.empty() ? "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not"
                                  : "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not") +
           "; ";
  }
  if (Get(env, "AWS_WEB_IDENTITY_TOKEN_FILE").empty() != Get(env, "AWS_ROLE_ARN").empty()) {
    half += Get(env, "AWS_ROLE_ARN").empty()
                ? "AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not; "
                : "AWS_ROLE_ARN is set but AWS_WEB_IDENTITY_TOKEN_FILE is not; ";
  }
  out.problem = half +
                "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and "
                "AWS_SESSION_TOKEN for temporary keys), or configure profile \"" +
                profile + "\" (keys in " +
                (r.cred_path.empty() ? "~/.aws/credentials" : r.cred_path) +
                " via `aws configure`, or role_arn + source_profile, sso_session or "
                "credential_process in " +
                (r.conf_path.empty() ? "~/.aws/config" : r.conf_path) +
                "; AWS_PROFILE picks the profile), or AWS_WEB_IDENTITY_TOKEN_FILE + "
                "AWS_ROLE_ARN, or AWS_CONTAINER_CREDENTIALS_FULL_URI";
  return out;
}

std::string ResolveRegion(const EnvLookup& env, const std::string& requested,
                          const std::string& configured, const std::string& configured_profile) {
  if (!requested.empty()) return requested;
  if (!configured.empty()) return configured;
  for (const char* var : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    std::string v = Get(env, var);
    if (!v.empty()) return v;
  }
  const std::string conf_path = ConfigFilePath(env);
  if (!conf_path.empty()) {
    if (auto text = drivers::ReadSmallFile(conf_path)) {
      IniFile conf = ParseIni(*text);
      std::string r = Value(ConfigSection(conf, ProfileName(env, configured_profile)), "region");
      if (!r.empty()) return r;
    }
  }
  return "";
}

std::string NoRegionProblem(const std::string& profile) {
  return "no AWS region is set: pass --region, or set region in [clouds.aws] of config.toml, or "
         "AWS_REGION / AWS_DEFAULT_REGION, or `region = ...` under " +
         std::string(profile.empty() || profile == "default" ? "[default]"
                                                             : "[profile " + profile + "]") +
         " in ~/.aws/config (`aws configure set region us-east-1`); gpuprov does not pick one";
}

std::string MaskKeyId(const std::string& id) {
  if (id.size() <= 8) return std::string(id.size(), '*');
  return id.substr(0, 4) + "..." + id.substr(id.size() - 4);
}

std::optional<long long> ParseIsoTime(const std::string& text_in) {
  const std::string text = drivers::TrimSpace(text_in);
  int y, mo, d, h, mi, s, used = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &s, &used) !=
          6 ||
      used == 0) {
    return std::nullopt;
  }
  size_t i = static_cast<size_t>(used);
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  }
  long long offset = 0;
  const std::string zone = text.substr(i);
  if (zone == "Z" || zone == "UTC" || zone.empty()) {
    offset = 0;
  } else if ((zone[0] == '+' || zone[0] == '-') && zone.size() == 6 && zone[3] == ':') {
    try {
      offset = (std::stoll(zone.substr(1, 2)) * 60 + std::stoll(zone.substr(4, 2))) * 60;
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (zone[0] == '-') offset = -offset;
  } else {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  return static_cast<long long>(timegm(&tm)) - offset;
}

}  // namespace gpuprov::aws
