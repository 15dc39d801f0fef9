// SPDX-License-Identifier: Apache-2.0
#include "http_client.h"

#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/StreamCopier.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include "driver_test_util.h"

namespace gpuprov::drivers {
namespace {

using std::chrono::milliseconds;

using testing::RecordingHost;

struct Reply {
  int status = 200;
  std::string body = "{}";
  std::map<std::string, std::string> headers;
};

// A loopback HTTP server answering with a function of the request number (0-based).
class TestServer {
 public:
  using Fn = std::function<Reply(int n, const std::string& method, const std::string& uri,
                                 const std::string& body)>;
  explicit TestServer(Fn fn) : fn_(std::move(fn)) {
    Poco::Net::ServerSocket socket(Poco::Net::SocketAddress("127.0.0.1", 0));
    port_ = socket.address().port();
    auto* params = new Poco::Net::HTTPServerParams;
    params->setKeepAlive(true);
    server_ = std::make_unique<Poco::Net::HTTPServer>(new Factory(this), socket, params);
    server_->start();
  }
  ~TestServer() { server_->stopAll(true); }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v2"; }
  int port() const { return port_; }
  int count() const { return count_.load(); }
  std::string LastUri() {
    std::lock_guard<std::mutex> l(mu_);
    return last_uri_;
  }

 private:
  class Handler : public Poco::Net::HTTPRequestHandler {
   public:
    explicit Handler(TestServer* s) : s_(s) {}
    void handleRequest(Poco::Net::HTTPServerRequest& req,
                       Poco::Net::HTTPServerResponse& resp) override {
      std::string body;
      Poco::StreamCopier::copyToString(req.stream(), body);
      int n = s_->count_++;
      {
        std::lock_guard<std::mutex> l(s_->mu_);
        s_->last_uri_ = req.getURI();
      }
      Reply r = s_->fn_(n, req.getMethod(), req.getURI(), body);
      resp.setStatus(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(r.status));
      for (const auto& [k, v] : r.headers) resp.set(k, v);
      resp.setContentType("application/json");
      resp.setContentLength(static_cast<std::streamsize>(r.body.size()));
      resp.send() << r.body;
    }

   private:
    TestServer* s_;
  };
  class Factory : public Poco::Net::HTTPRequestHandlerFactory {
   public:
    explicit Factory(TestServer* s) : s_(s) {}
    Poco::Net::HTTPRequestHandler* createRequestHandler(
        const Poco::Net::HTTPServerRequest&) override {
      return new Handler(s_);
    }

   private:
    TestServer* s_;
  };

  Fn fn_;
  int port_ = 0;
  std::atomic<int> count_{0};
  std::mutex mu_;
  std::string last_uri_;
  std::unique_ptr<Poco::Net::HTTPServer> server_;
};

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

}  // namespace
}  // namespace gpuprov::drivers
