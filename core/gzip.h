// gzip (RFC 1952) of a byte string, by zopfli. The host's copy: drivers use the kit's Gzip
// (plugins/common/vm_rules.h), a separate link unit (the .so files); both are
// plugins/common/zopfli_gzip.h, so the host measures the bytes a driver sends.
#pragma once

#include <string>

namespace gpuprov {

/// \a data gzipped by zopfli (plugins/common/zopfli_gzip.h). The same input gives the same bytes.
std::string Gzip(const std::string& data);

}  // namespace gpuprov
