// SPDX-License-Identifier: Apache-2.0
//
// A loopback HTTP(S) server for the kit's client tests: it answers each request with a
// function of its number (0-based), method, URI and body.
#pragma once

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

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace gpuprov::drivers::testing {

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
  /// With `tls`, the server speaks HTTPS with that server context.
  explicit TestServer(Fn fn, Poco::Net::Context::Ptr tls = nullptr) : fn_(std::move(fn)) {
    Poco::Net::ServerSocket socket =
        tls ? Poco::Net::SecureServerSocket(Poco::Net::SocketAddress("127.0.0.1", 0), 64, tls)
            : Poco::Net::ServerSocket(Poco::Net::SocketAddress("127.0.0.1", 0));
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
  /// A header of the last request ("" when it had none).
  std::string LastHeader(const std::string& name) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = last_headers_.find(name);
    return it == last_headers_.end() ? "" : it->second;
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
        s_->last_headers_.clear();
        for (const auto& [k, v] : req) s_->last_headers_[k] = v;
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
  std::map<std::string, std::string> last_headers_;
  std::unique_ptr<Poco::Net::HTTPServer> server_;
};

}  // namespace gpuprov::drivers::testing
