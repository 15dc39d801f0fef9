// gzip (RFC 1952) of a byte string, at zlib's best compression.
#pragma once

#include <string>

namespace gpuprov {

/// \a data gzipped at level 9 (zlib through Poco). The same input gives the same bytes.
std::string Gzip(const std::string& data);

}  // namespace gpuprov
