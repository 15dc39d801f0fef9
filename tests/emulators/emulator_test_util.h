// SPDX-License-Identifier: Apache-2.0
//
// A tiny HTTP client for the emulator tests (127.0.0.1 only).
#pragma once

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>
#include <Poco/URI.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "emulator_http.h"

namespace gpuprov::emulator::testing {

struct Reply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string content_type;

  JsonObject Json() const {
    JsonObject o = ParseObject(body);
    return o ? o : NewObject();
  }
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

/// base: "http://127.0.0.1:P/v2"; path is appended ("/droplets?type=gpus").
inline Reply Call(const std::string& base, const std::string& method, const std::string& path,
                  const std::string& body = "", const std::string& token = "",
                  const std::map<std::string, std::string>& extra_headers = {}) {
  Poco::URI uri(base);
  Poco::Net::HTTPClientSession session(uri.getHost(), uri.getPort());
  session.setTimeout(Poco::Timespan(30, 0));
  Poco::Net::HTTPRequest req(method, uri.getPath() + path, Poco::Net::HTTPMessage::HTTP_1_1);
  if (!token.empty()) req.set("Authorization", "Bearer " + token);
  for (const auto& [k, v] : extra_headers) req.set(k, v);
  if (!body.empty() || method == "POST" || method == "PUT") {
    req.setContentType("application/json");
    req.setContentLength(static_cast<std::streamsize>(body.size()));
    session.sendRequest(req) << body;
  } else {
    session.sendRequest(req);
  }
  Poco::Net::HTTPResponse resp;
  std::istream& in = session.receiveResponse(resp);
  Reply r;
  r.status = resp.getStatus();
  Poco::StreamCopier::copyToString(in, r.body);
  for (const auto& [k, v] : resp) r.headers[Lower(k)] = v;
  r.content_type = resp.getContentType();
  return r;
}

/// The reachable_ports of cloud's instance called name, from the control API's
/// /instances ("22,6443", "1-65535"; "<none>" when no such instance).
inline std::string ReachablePorts(const std::string& control_url, const std::string& cloud,
                                  const std::string& name) {
  Reply r = Call(control_url, "GET", "/instances?cloud=" + cloud, "");
  JsonArray list = GetArray(r.Json(), "instances");
  for (size_t i = 0; list && i < list->size(); ++i) {
    JsonObject o = list->getObject(static_cast<unsigned>(i));
    if (GetString(o, "name").value_or("") == name) {
      return GetString(o, "reachable_ports").value_or("");
    }
  }
  return "<none>";
}

/// Polls cond every 50 ms until it holds or timeout passes.
inline bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return cond();
}

}  // namespace gpuprov::emulator::testing
