// SPDX-License-Identifier: Apache-2.0
//
// Encoding of the parts of a request URL, on Poco::URI: one rule for every cloud, RFC 3986's
// "unreserved" characters (letters, digits, '-', '.', '_', '~') stay, everything else is
// percent-encoded (upper-case hex). Safe for a path segment, a query name and a query value.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuprov::drivers {

/// `text` percent-encoded for use as one path segment or one query name or value.
std::string EncodeComponent(std::string_view text);

/// "?k1=v1&k2=v2" from the pairs in order, each encoded; "" when there are none. Pairs with
/// an empty value are kept ("k=").
std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params);

}  // namespace gpuprov::drivers
