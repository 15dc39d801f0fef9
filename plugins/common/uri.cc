// SPDX-License-Identifier: Apache-2.0
#include "uri.h"

#include <Poco/URI.h>

namespace gpuprov::drivers {

// Poco::URI::encode keeps unreserved characters and encodes controls, non-ASCII and its own
// "illegal" set; the sub-delims and gen-delims of RFC 3986 are added here.
std::string EncodeComponent(std::string_view text) {
  std::string out;
  Poco::URI::encode(std::string(text), "!#$&'()*+,/:;=?@[]\"<>%{}|\\^` ", out);
  return out;
}

std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [name, value] : params) {
    out += (out.empty() ? "?" : "&") + EncodeComponent(name) + "=" + EncodeComponent(value);
  }
  return out;
}

}  // namespace gpuprov::drivers
