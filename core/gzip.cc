#include "gzip.h"

#include "zopfli_gzip.h"

namespace gpuprov {

std::string Gzip(const std::string& data) { return zopfli_gzip::Gzip(data); }

}  // namespace gpuprov
