// SPDX-License-Identifier: Apache-2.0
#include "http_client.h"

#include <Poco/Net/Context.h>
#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/SecureServerSocket.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/StreamCopier.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "driver_test_util.h"
#include "loopback_server.h"

namespace gpuprov::drivers {
namespace {

using std::chrono::milliseconds;

using testing::RecordingHost;

using testing::Reply;
using testing::TestServer;

RetryPolicy Quick(int attempts = 4) {
  RetryPolicy p = RetryPolicy::Fast();
  p.max_attempts = attempts;
  p.base_delay = milliseconds(1);
  p.max_delay = milliseconds(5);
  return p;
}

TEST(HttpClientUrl, LoopbackHosts) {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "127.255.255.254", "localhost", "LOCALHOST",
                        "::1", "[::1]"}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  }
  for (const char* h : {"10.0.0.1", "128.0.0.1", "127.evil.com", "localhost.evil.com",
                        "api.digitalocean.com", "0.0.0.0", "::", "::ffff:127.0.0.1", ""}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
}

TEST(HttpClientUrl, HttpsAnywhereHttpOnlyLoopback) {
  ParsedUrl u = ParseBaseUrl("https://api.digitalocean.com/v2/");
  EXPECT_EQ(u.scheme, "https");
  EXPECT_EQ(u.host, "api.digitalocean.com");
  EXPECT_EQ(u.port, 443);
  EXPECT_EQ(u.path, "/v2");
  EXPECT_EQ(ParseBaseUrl("http://127.0.0.1:4010").port, 4010);
  EXPECT_EQ(ParseBaseUrl("http://localhost:4010/v2").path, "/v2");
  EXPECT_EQ(ParseBaseUrl("http://[::1]:4010/v2").host, "::1");
  for (const char* bad : {"http://api.digitalocean.com/v2", "http://10.1.2.3:80/v2",
                          "http://127.evil.example/v2", "ftp://127.0.0.1/", "api.digitalocean.com",
                          "https://user:pw@api.digitalocean.com/v2", "https:///v2",
                          "https://api.digitalocean.com/v2?x=1"}) {
    try {
      ParseBaseUrl(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const HttpError& e) {
      EXPECT_EQ(e.kind(), HttpError::Kind::kInvalidUrl) << bad;
    }
  }
  try {
    ParseBaseUrl("http://api.digitalocean.com/v2");
  } catch (const HttpError& e) {
    EXPECT_NE(std::string(e.what()).find("loopback"), std::string::npos) << e.what();
  }
  RecordingHost host;
  EXPECT_THROW(HttpClient("http://192.0.2.1/v2", Quick(), host.Host()), HttpError);
}

TEST(HttpClient, SendsToBasePathAndReturns4xxWithoutRetry) {
  TestServer server([](int, const std::string&, const std::string&, const std::string&) {
    return Reply{404, R"({"id":"not_found","message":"gone"})", {}};
  });
  RecordingHost host;
  HttpClient client(server.Url(), Quick(), host.Host());
  HttpResponse r = client.Send({"GET", "/droplets/1?x=y", {}, ""});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(server.count(), 1);
  EXPECT_EQ(server.LastUri(), "/v2/droplets/1?x=y");
  EXPECT_NE(r.body.find("gone"), std::string::npos);
}

TEST(HttpClient, Retries5xxThenSucceeds) {
  TestServer server([](int n, const std::string&, const std::string&, const std::string&) {
    return n < 2 ? Reply{503, R"({"id":"server_error"})", {}} : Reply{200, R"({"ok":true})", {}};
  });
  RecordingHost host;
  HttpClient client(server.Url(), Quick(), host.Host());
  HttpResponse r = client.Send({"POST", "/droplets", {}, R"({"a":1})"});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(server.count(), 3);
}

TEST(HttpClient, BeforeAttemptHookRunsBeforeEveryAttemptRetriesIncluded) {
  TestServer server([](int n, const std::string&, const std::string&, const std::string&) {
    return n < 2 ? Reply{429, "{}", {}} : Reply{200, "{}", {}};
  });
  RecordingHost host;
  HttpClient client(server.Url(), Quick(), host.Host());
  std::vector<std::string> seen;
  client.set_before_attempt([&](const HttpRequest& r) {
    seen.push_back(r.method + " " + r.path_and_query + " #" + std::to_string(server.count()));
  });
  EXPECT_EQ(client.Send({"GET", "/x", {}, ""}).status, 200);
  EXPECT_EQ(seen, (std::vector<std::string>{"GET /x #0", "GET /x #1", "GET /x #2"}));
}

TEST(HttpClient, Honours429RetryAfterCapped) {
  TestServer server([](int n, const std::string&, const std::string&, const std::string&) {
    if (n == 0) return Reply{429, R"({"id":"too_many_requests"})", {{"Retry-After", "60"}}};
    return Reply{200, "{}", {}};
  });
  RecordingHost host;
  RetryPolicy p = Quick();
  p.max_retry_after = milliseconds(30);  // the server asks for 60 s; the cap wins
  HttpClient client(server.Url(), p, host.Host());
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(client.Send({"GET", "/account", {}, ""}).status, 200);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, milliseconds(30));
  EXPECT_LT(took, milliseconds(5000));
  EXPECT_EQ(server.count(), 2);
}

TEST(HttpClient, NonIdempotentRequestsRetryOnlyThrottling) {
  TestServer server([](int n, const std::string&, const std::string&, const std::string&) {
    if (n == 0) return Reply{429, "{}", {{"Retry-After", "0"}}};
    return Reply{503, R"({"id":"server_error"})", {}};
  });
  RecordingHost host;
  HttpClient client(server.Url(), Quick(), host.Host());
  HttpRequest req{"POST", "/droplets", {}, "{}"};
  req.idempotent = false;
  HttpResponse r = client.Send(req);
  EXPECT_EQ(r.status, 503);       // returned, not retried: the server may have acted
  EXPECT_EQ(server.count(), 2);   // the 429 was retried once
}

TEST(HttpClient, GivesUpAfterMaxAttempts) {
  TestServer server([](int, const std::string&, const std::string&, const std::string&) {
    return Reply{500, R"({"id":"server_error","message":"boom"})", {}};
  });
  RecordingHost host;
  HttpClient client(server.Url(), Quick(3), host.Host());
  try {
    client.Send({"GET", "/account", {}, ""});
    FAIL() << "no error";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.kind(), HttpError::Kind::kRetriesExhausted);
    EXPECT_EQ(e.last_response().status, 500);
    EXPECT_NE(e.last_response().body.find("boom"), std::string::npos);
  }
  EXPECT_EQ(server.count(), 3);
}

TEST(HttpClient, GivesUpWhenBudgetIsSpent) {
  TestServer server([](int, const std::string&, const std::string&, const std::string&) {
    return Reply{503, "{}", {{"Retry-After", "1"}}};
  });
  RecordingHost host;
  RetryPolicy p = Quick(100);
  p.max_retry_after = milliseconds(1000);
  p.total_budget = milliseconds(300);
  HttpClient client(server.Url(), p, host.Host());
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(client.Send({"GET", "/account", {}, ""}), HttpError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
  EXPECT_EQ(server.count(), 1);  // the 1 s wait would exceed the 300 ms budget
}

TEST(HttpClient, RetriesConnectionErrors) {
  int port = 0;
  {
    Poco::Net::ServerSocket s(Poco::Net::SocketAddress("127.0.0.1", 0));
    port = s.address().port();
  }  // closed: connections are refused
  RecordingHost host;
  HttpClient client("http://127.0.0.1:" + std::to_string(port), Quick(3), host.Host());
  try {
    client.Send({"GET", "/account", {}, ""});
    FAIL() << "no error";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.kind(), HttpError::Kind::kRetriesExhausted);
    EXPECT_EQ(e.last_response().status, 0);
    EXPECT_NE(std::string(e.what()).find("3 attempt"), std::string::npos) << e.what();
  }
}

TEST(HttpClient, StopsWhenCancelled) {
  RecordingHost host;
  TestServer server([&](int, const std::string&, const std::string&, const std::string&) {
    host.cancel = true;
    return Reply{503, "{}", {{"Retry-After", "1"}}};
  });
  RetryPolicy p = Quick(10);
  p.max_retry_after = milliseconds(2000);
  HttpClient client(server.Url(), p, host.Host());
  try {
    client.Send({"GET", "/account", {}, ""});
    FAIL() << "no error";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.kind(), HttpError::Kind::kCancelled);
  }
  EXPECT_EQ(server.count(), 1);
}

TEST(HttpClient, NeverLogsAuthorizationOrBodies) {
  TestServer server([](int n, const std::string&, const std::string&, const std::string& body) {
    EXPECT_NE(body.find("SECRET_BODY"), std::string::npos);
    return n == 0 ? Reply{502, R"({"echo":"SECRET_REPLY"})", {}} : Reply{200, "{}", {}};
  });
  RecordingHost host;
  HttpClient client(server.Url(), Quick(), host.Host());
  HttpRequest req{"POST", "/account/keys", {{"Authorization", "Bearer SECRET_TOKEN"}},
                  R"({"public_key":"SECRET_BODY"})"};
  EXPECT_EQ(client.Send(req).status, 200);
  const std::string logs = host.All();
  EXPECT_FALSE(logs.empty());
  EXPECT_EQ(logs.find("SECRET"), std::string::npos) << logs;
  EXPECT_NE(logs.find("POST /account/keys -> 502 (attempt 1)"), std::string::npos) << logs;
}

TEST(HttpClient, HttpsToAPlainServerFailsAsTlsWithoutRetry) {
  // A plain-text server that answers at once, whatever the client sends: the TLS handshake
  // reads a non-TLS record ("wrong version number").
  Poco::Net::ServerSocket listener(Poco::Net::SocketAddress("127.0.0.1", 0));
  std::atomic<int> accepted{0};
  std::atomic<bool> stop{false};
  std::thread server([&] {
    try {
      while (!stop) {
        if (!listener.poll(Poco::Timespan(0, 50'000), Poco::Net::Socket::SELECT_READ)) continue;
        Poco::Net::StreamSocket s = listener.acceptConnection();
        ++accepted;
        const std::string reply = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        s.sendBytes(reply.data(), static_cast<int>(reply.size()));
        s.shutdownSend();
      }
    } catch (...) {
    }
  });
  RecordingHost host;
  HttpClient client("https://127.0.0.1:" + std::to_string(listener.address().port()), Quick(),
                    host.Host());
  try {
    client.Send({"GET", "/account", {}, ""});
    ADD_FAILURE() << "no error";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.kind(), HttpError::Kind::kTls) << e.what();
    EXPECT_NE(std::string(e.what()).find("system CA store"), std::string::npos) << e.what();
  }
  EXPECT_EQ(accepted.load(), 1);
  stop = true;
  server.join();
}

// --- proxies ----------------------------------------------------------------------------

EnvReader EnvOf(std::map<std::string, std::string> vars) {
  return [vars](const std::string& n) -> std::optional<std::string> {
    auto it = vars.find(n);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(HttpProxy, NoProxyListMatching) {
  EXPECT_TRUE(NoProxyMatches("*", "api.example.com"));
  EXPECT_TRUE(NoProxyMatches("example.com", "api.example.com"));
  EXPECT_TRUE(NoProxyMatches(" .example.com ,other", "api.example.com"));
  EXPECT_TRUE(NoProxyMatches("example.com", "EXAMPLE.com"));
  EXPECT_TRUE(NoProxyMatches("localhost:8443,127.0.0.1", "127.0.0.1"));
  EXPECT_TRUE(NoProxyMatches("[::1]:443", "[::1]"));
  EXPECT_FALSE(NoProxyMatches("example.com", "badexample.com"));
  EXPECT_FALSE(NoProxyMatches("", "example.com"));
  EXPECT_FALSE(NoProxyMatches("api.example.com", "example.com"));
}

TEST(HttpProxy, WhichVariableApplies) {
  const ParsedUrl https = ParseBaseUrl("https://ec2.us-east-1.amazonaws.com");
  const ParsedUrl http = ParseBaseUrl("http://127.0.0.1:8080");
  EXPECT_FALSE(ProxyFor(https, EnvOf({})));
  auto p = ProxyFor(https, EnvOf({{"HTTPS_PROXY", "http://u%40x:p%3Aw@proxy.corp:3128"}}));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->host, "proxy.corp");
  EXPECT_EQ(p->port, 3128);
  EXPECT_EQ(p->username, "u@x");
  EXPECT_EQ(p->password, "p:w");
  EXPECT_EQ(p->origin, "$HTTPS_PROXY");
  // The lower-case form wins, a bare host:port is http://, HTTP_PROXY is not for https.
  auto lower = ProxyFor(https, EnvOf({{"HTTPS_PROXY", "http://a:1"}, {"https_proxy", "b:2"}}));
  ASSERT_TRUE(lower);
  EXPECT_EQ(lower->host, "b");
  EXPECT_EQ(lower->origin, "$https_proxy");
  EXPECT_FALSE(ProxyFor(https, EnvOf({{"HTTP_PROXY", "http://a:1"}})));
  // NO_PROXY / no_proxy bypass.
  EXPECT_FALSE(ProxyFor(https, EnvOf({{"HTTPS_PROXY", "http://a:1"}, {"NO_PROXY", ".amazonaws.com"}})));
  EXPECT_FALSE(ProxyFor(https, EnvOf({{"https_proxy", "http://a:1"}, {"no_proxy", "*"}})));
  // A plain-http (loopback) target goes only through a loopback proxy.
  EXPECT_TRUE(ProxyFor(http, EnvOf({{"HTTP_PROXY", "http://127.0.0.1:3128"}})));
  EXPECT_FALSE(ProxyFor(http, EnvOf({{"HTTP_PROXY", "http://proxy.corp:3128"}})));
  EXPECT_FALSE(ProxyFor(http, EnvOf({{"HTTPS_PROXY", "http://127.0.0.1:3128"}})));
  // Instance metadata and container credentials are never proxied.
  const ParsedUrl imds = ParseBaseUrl("http://169.254.169.254", /*allow_link_local_http=*/true);
  EXPECT_FALSE(ProxyFor(imds, EnvOf({{"HTTP_PROXY", "http://127.0.0.1:3128"}})));
  // An https:// proxy is refused naming the variable.
  try {
    ProxyFor(https, EnvOf({{"HTTPS_PROXY", "https://proxy.corp:443"}}));
    ADD_FAILURE() << "no error";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.kind(), HttpError::Kind::kInvalidUrl);
    EXPECT_NE(std::string(e.what()).find("$HTTPS_PROXY"), std::string::npos) << e.what();
  }
}

TEST(HttpProxy, LinkLocalCredentialHostsNeedTheFlag) {
  EXPECT_THROW(ParseBaseUrl("http://169.254.169.254"), HttpError);
  EXPECT_EQ(ParseBaseUrl("http://169.254.170.2", true).host, "169.254.170.2");
  EXPECT_EQ(ParseBaseUrl("http://[fd00:ec2::254]", true).host, "fd00:ec2::254");
  EXPECT_THROW(ParseBaseUrl("http://169.254.1.1", true), HttpError);
  EXPECT_THROW(ParseBaseUrl("http://10.0.0.1", true), HttpError);
}

#ifdef GPUPROV_PROXY_FIXTURE
// tests/fixtures/proxy/connect_proxy.py as a child process, logging request lines to a file.
class ProxyProcess {
 public:
  explicit ProxyProcess(const std::string& log) : log_(log) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      execl("/usr/bin/python3", "python3", GPUPROV_PROXY_FIXTURE, log.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    std::string line;
    char c;
    while (read(fds[0], &c, 1) == 1 && c != '\n') line += c;
    close(fds[0]);
    const std::string prefix = "proxy ";
    if (line.rfind(prefix, 0) == 0) url_ = line.substr(prefix.size());
  }
  ~ProxyProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  const std::string& url() const { return url_; }
  std::string Log() const {
    std::ifstream f(log_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

 private:
  std::string log_;
  std::string url_;
  pid_t pid_ = -1;
};

// A self-signed certificate for localhost/127.0.0.1 made with the openssl CLI.
struct TestCertificate {
  testing::ScopedTempDir dir;
  std::string cert = (dir.path() / "cert.pem").string();
  std::string key = (dir.path() / "key.pem").string();
  bool ok = false;
  TestCertificate() {
    const std::string cmd =
        "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext "
        "subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout '" + key + "' -out '" + cert +
        "' >/dev/null 2>&1";
    ok = std::system(cmd.c_str()) == 0;
  }
};

TEST(HttpProxy, HttpsGoesThroughAConnectTunnelAndNoProxyBypassesIt) {
  TestCertificate certificate;
  ASSERT_TRUE(certificate.ok) << "openssl could not make a test certificate";
  Poco::Net::Context::Ptr server_tls = new Poco::Net::Context(
      Poco::Net::Context::TLS_SERVER_USE, certificate.key, certificate.cert, "",
      Poco::Net::Context::VERIFY_NONE);
  TestServer server([](int, const std::string&, const std::string& uri, const std::string&) {
    return Reply{200, R"({"uri":")" + uri + R"("})", {}};
  }, server_tls);
  testing::ScopedTempDir dir;
  ProxyProcess proxy((dir.path() / "proxy.log").string());
  ASSERT_FALSE(proxy.url().empty()) << "the proxy fixture did not start";
  RecordingHost host;
  const std::string target = "https://localhost:" + std::to_string(server.port());

  HttpClientOptions via_proxy;
  via_proxy.ca_file = certificate.cert;
  via_proxy.env = EnvOf({{"HTTPS_PROXY", proxy.url()}});
  HttpClient client(target, Quick(1), host.Host(), via_proxy);
  ASSERT_TRUE(client.proxy());
  HttpRequest get;
  get.path_and_query = "/v1/things?x=1";
  HttpResponse r = client.Send(get);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"uri":"/v1/things?x=1"})");
  // The proxy saw only the tunnel's target: TLS stayed end to end.
  EXPECT_EQ(proxy.Log(), "CONNECT localhost:" + std::to_string(server.port()) + "\n");
  EXPECT_EQ(server.count(), 1);

  // Without the custom CA (the system store), the tunnelled TLS fails verification.
  HttpClientOptions system_cas = via_proxy;
  system_cas.ca_file.clear();
  HttpClient untrusted(target, Quick(1), host.Host(), system_cas);
  try {
    untrusted.Send(get);
    ADD_FAILURE() << "a self-signed certificate was accepted";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.kind(), HttpError::Kind::kTls) << e.what();
  }

  // NO_PROXY: a direct connection; the proxy log does not grow.
  const std::string before = proxy.Log();
  HttpClientOptions bypass = via_proxy;
  bypass.env = EnvOf({{"https_proxy", proxy.url()}, {"no_proxy", "localhost"}});
  HttpClient direct(target, Quick(1), host.Host(), bypass);
  EXPECT_FALSE(direct.proxy());
  EXPECT_EQ(direct.Send(get).status, 200);
  EXPECT_EQ(proxy.Log(), before);
}

TEST(HttpProxy, PlainHttpToLoopbackGoesThroughALoopbackHttpProxy) {
  TestServer server([](int, const std::string&, const std::string& uri, const std::string& body) {
    return Reply{201, R"({"uri":")" + uri + R"(","body":")" + body + R"("})", {}};
  });
  testing::ScopedTempDir dir;
  ProxyProcess proxy((dir.path() / "proxy.log").string());
  ASSERT_FALSE(proxy.url().empty()) << "the proxy fixture did not start";
  RecordingHost host;
  HttpClientOptions options;
  options.env = EnvOf({{"http_proxy", proxy.url()}});
  HttpClient client(server.Url(), Quick(1), host.Host(), options);
  HttpRequest post;
  post.method = "POST";
  post.path_and_query = "/droplets";
  post.body = "abc";
  HttpResponse r = client.Send(post);
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.body, R"({"uri":"/v2/droplets","body":"abc"})");
  EXPECT_EQ(proxy.Log(), "POST http://127.0.0.1:" + std::to_string(server.port()) + "/v2/droplets\n");
}
#endif  // GPUPROV_PROXY_FIXTURE

}  // namespace
}  // namespace gpuprov::drivers
