// SPDX-License-Identifier: Apache-2.0
#include <Poco/Net/IPAddress.h>

#include <algorithm>
#include <cstdint>

#include "instance_backend.h"

namespace gpuprov::emulator {

namespace {
constexpr int kMinPort = 1;
constexpr int kMaxPort = 65535;
}  // namespace

PortSet::PortSet(std::initializer_list<int> ports) {
  for (int p : ports) Add(p);
}

PortSet PortSet::All() {
  PortSet s;
  s.Add(kMinPort, kMaxPort);
  return s;
}

void PortSet::Add(int first, int last) {
  first = std::max(first, kMinPort);
  last = std::min(last, kMaxPort);
  if (first > last) return;
  std::vector<PortRange> out;
  PortRange add{first, last};
  bool placed = false;
  for (const PortRange& r : ranges_) {
    if (r.last + 1 < add.first) {
      out.push_back(r);
    } else if (add.last + 1 < r.first) {
      if (!placed) out.push_back(add);
      placed = true;
      out.push_back(r);
    } else {  // overlapping or adjacent: merge into add
      add.first = std::min(add.first, r.first);
      add.last = std::max(add.last, r.last);
    }
  }
  if (!placed) out.push_back(add);
  ranges_ = std::move(out);
}

void PortSet::Add(const PortSet& other) {
  for (const PortRange& r : other.ranges_) Add(r.first, r.last);
}

void PortSet::Remove(int first, int last) {
  std::vector<PortRange> out;
  for (const PortRange& r : ranges_) {
    if (r.last < first || last < r.first) {
      out.push_back(r);
      continue;
    }
    if (r.first < first) out.push_back({r.first, first - 1});
    if (last < r.last) out.push_back({last + 1, r.last});
  }
  ranges_ = std::move(out);
}

bool PortSet::Contains(int port) const {
  for (const PortRange& r : ranges_) {
    if (r.first <= port && port <= r.last) return true;
  }
  return false;
}

std::string PortSet::ToString() const {
  std::string s;
  for (const PortRange& r : ranges_) {
    if (!s.empty()) s += ",";
    s += std::to_string(r.first);
    if (r.last != r.first) s += "-" + std::to_string(r.last);
  }
  return s;
}

bool CoversThisMachine(const std::string& cidr) {
  const size_t slash = cidr.find('/');
  int bits = 32;
  if (slash != std::string::npos) {
    const std::string b = cidr.substr(slash + 1);
    if (b.empty() || b.size() > 2 || b.find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
    bits = std::stoi(b);
    if (bits > 32) return false;
  }
  Poco::Net::IPAddress address;
  if (!Poco::Net::IPAddress::tryParse(cidr.substr(0, slash), address) ||
      address.family() != Poco::Net::IPAddress::IPv4) {
    return false;
  }
  const auto* raw = static_cast<const unsigned char*>(address.addr());
  const uint32_t network = (uint32_t{raw[0]} << 24) | (uint32_t{raw[1]} << 16) |
                           (uint32_t{raw[2]} << 8) | uint32_t{raw[3]};
  const uint32_t mask = bits == 0 ? 0 : ~uint32_t{0} << (32 - bits);
  return (network & mask) == (0x7F000001u & mask);
}

PortSet WithoutBlocked(PortSet ports, const std::vector<int>& blocked) {
  for (int p : blocked) ports.Remove(p, p);
  return ports;
}

std::string StartupScriptLog(const std::string& cloud) {
  return "/var/log/" + cloud + "-startup-script.log";
}

std::string StartupScriptDir(const std::string& cloud) {
  return "/var/lib/" + cloud + "-startup-script";
}

}  // namespace gpuprov::emulator
