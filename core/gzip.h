// gzip (RFC 1952) of a byte string, at zlib's best compression. The host's copy: drivers use
// the kit's Gzip (plugins/common/vm_rules.h), a separate link unit (the .so files).
#pragma once

#include <string>

namespace gpuprov {

/// \a data gzipped at level 9 (zlib through Poco). The same input gives the same bytes.
std::string Gzip(const std::string& data);

}  // namespace gpuprov
