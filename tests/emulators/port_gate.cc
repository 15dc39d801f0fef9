// SPDX-License-Identifier: Apache-2.0
#include "port_gate.h"

#include <Poco/Net/NetException.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>

#include <atomic>
#include <list>
#include <memory>
#include <stdexcept>
#include <thread>

namespace gpuprov::emulator {
namespace {

using Poco::Timespan;
using Poco::Net::IPAddress;
using Poco::Net::ServerSocket;
using Poco::Net::Socket;
using Poco::Net::SocketAddress;
using Poco::Net::StreamSocket;

// How often a blocked accept or copy looks at its stop flag.
const Timespan kPollEvery(0, 100 * 1000);
const Timespan kConnectTimeout(3, 0);

bool IsLoopback(const std::string& address) {
  IPAddress a;
  return IPAddress::tryParse(address, a) && a.family() == IPAddress::IPv4 && a.isLoopback();
}

// 10/8, 172.16/12, 192.168/16: where Docker puts its bridge networks.
bool IsPrivateIpv4(const std::string& address) {
  IPAddress a;
  return IPAddress::tryParse(address, a) && a.family() == IPAddress::IPv4 && a.isSiteLocal();
}

void SendAll(StreamSocket& to, const char* data, int n) {
  while (n > 0) {
    int sent = to.sendBytes(data, n);
    if (sent <= 0) throw Poco::Net::NetException("send failed");
    data += sent;
    n -= sent;
  }
}

// Copies both ways until both sides have ended (or stop is set).
void Copy(StreamSocket a, StreamSocket b, const std::atomic<bool>& stop) {
  char buf[16384];
  bool a_open = true, b_open = true;
  try {
    while (!stop && (a_open || b_open)) {
      Socket::SocketList readable, writable, failed;
      if (a_open) readable.push_back(a);
      if (b_open) readable.push_back(b);
      if (Socket::select(readable, writable, failed, kPollEvery) == 0) continue;
      for (Socket& s : readable) {
        const bool from_a = s == a;
        StreamSocket& from = from_a ? a : b;
        StreamSocket& to = from_a ? b : a;
        int n = from.receiveBytes(buf, sizeof buf);
        if (n <= 0) {
          (from_a ? a_open : b_open) = false;
          try {
            to.shutdownSend();
          } catch (const Poco::Exception&) {
          }
        } else {
          SendAll(to, buf, n);
        }
      }
    }
  } catch (const Poco::Exception&) {  // a reset on either side ends both
  }
  a.close();
  b.close();
}

// A connection accepted by a listener and the one it made to the target.
struct SocketPair {
  StreamSocket client;
  StreamSocket upstream;
};

}  // namespace

// The connections made through one address's listeners.
class PortGate::Connections {
 public:
  ~Connections() {
    stop_ = true;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& p : pumps_) p.thread.join();
  }

  /// The pump thread gets the only references to the two sockets: Poco counts them inside its
  /// own library, which ThreadSanitizer does not see, so a last release on the listener's
  /// thread after the pump ended was reported as a race with the pump's close().
  void Add(std::unique_ptr<SocketPair> sockets) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = pumps_.begin(); it != pumps_.end();) {  // forget finished ones
      if (it->done) {
        it->thread.join();
        it = pumps_.erase(it);
      } else {
        ++it;
      }
    }
    Pump& p = pumps_.emplace_back();
    p.thread = std::thread([this, &p, sockets = std::move(sockets)]() mutable {
      Copy(sockets->client, sockets->upstream, stop_);
      sockets.reset();
      p.done = true;
    });
  }

 private:
  struct Pump {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  std::mutex mu_;
  std::list<Pump> pumps_;
  std::atomic<bool> stop_{false};
};

// One listening port: accepts and hands each connection, joined to the target, to Connections.
class PortGate::Listener {
 public:
  Listener(const SocketAddress& at, const SocketAddress& target,
           std::shared_ptr<Connections> connections)
      : target_(target), connections_(std::move(connections)) {
    socket_.bind(at, /*reuseAddress=*/true);
    socket_.listen(64);
    thread_ = std::thread([this] { Run(); });
  }

  ~Listener() {
    stop_ = true;
    thread_.join();
    socket_.close();
  }

  int target_port() const { return target_.port(); }

 private:
  void Run() {
    while (!stop_) {
      try {
        if (!socket_.poll(kPollEvery, Socket::SELECT_READ)) continue;
        std::unique_ptr<SocketPair> sockets;
        {  // this thread's references end here, before the pump starts (Connections::Add)
          StreamSocket client = socket_.acceptConnection();
          StreamSocket upstream;
          try {
            upstream.connect(target_, kConnectTimeout);
          } catch (const Poco::Exception&) {
            client.setLinger(true, 0);  // nothing listens there: reset, as Docker's proxy does
            client.close();
            continue;
          }
          client.setNoDelay(true);
          upstream.setNoDelay(true);
          sockets = std::make_unique<SocketPair>(SocketPair{client, upstream});
        }
        connections_->Add(std::move(sockets));
      } catch (const Poco::Exception&) {
      }
    }
  }

  ServerSocket socket_;
  SocketAddress target_;
  std::shared_ptr<Connections> connections_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

PortGate::Address::Address() : connections(std::make_shared<Connections>()) {}
PortGate::Address::~Address() = default;
PortGate::Address::Address(Address&&) noexcept = default;

PortGate::~PortGate() {
  std::lock_guard<std::mutex> lock(mu_);
  addresses_.clear();
}

std::vector<std::string> PortGate::Set(const std::string& listen_address,
                                       const std::string& target_address,
                                       const std::map<int, int>& forwards) {
  if (!IsLoopback(listen_address)) {
    throw std::invalid_argument("port gate: " + listen_address + " is not a loopback address");
  }
  if (!IsPrivateIpv4(target_address)) {
    throw std::invalid_argument("port gate: " + target_address +
                                " is not a container bridge address");
  }
  std::lock_guard<std::mutex> lock(mu_);
  Address& a = addresses_[listen_address];
  if (a.target != target_address) a.listeners.clear();  // a new container behind the address
  a.target = target_address;
  std::vector<std::string> failed;
  for (auto it = a.listeners.begin(); it != a.listeners.end();) {
    auto want = forwards.find(it->first);
    if (want == forwards.end() || want->second != it->second->target_port()) {
      it = a.listeners.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [port, target_port] : forwards) {
    if (a.listeners.count(port)) continue;
    try {
      a.listeners[port] = std::make_unique<Listener>(
          SocketAddress(listen_address, static_cast<uint16_t>(port)),
          SocketAddress(target_address, static_cast<uint16_t>(target_port)), a.connections);
    } catch (const Poco::Exception& e) {
      failed.push_back(listen_address + ":" + std::to_string(port) + ": " + e.displayText() +
                       (port < 1024 ? " (ports below 1024 need root or CAP_NET_BIND_SERVICE)"
                                    : ""));
    }
  }
  return failed;
}

void PortGate::Close(const std::string& listen_address) {
  std::lock_guard<std::mutex> lock(mu_);
  addresses_.erase(listen_address);
}

std::map<int, int> PortGate::Forwards(const std::string& listen_address) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<int, int> out;
  auto it = addresses_.find(listen_address);
  if (it == addresses_.end()) return out;
  for (const auto& [port, l] : it->second.listeners) out[port] = l->target_port();
  return out;
}

}  // namespace gpuprov::emulator
