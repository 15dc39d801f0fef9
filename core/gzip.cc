#include "gzip.h"

#include <Poco/DeflatingStream.h>

#include <sstream>

namespace gpuprov {

std::string Gzip(const std::string& data) {
  std::ostringstream out;
  Poco::DeflatingOutputStream deflate(out, Poco::DeflatingStreamBuf::STREAM_GZIP, 9);
  deflate << data;
  deflate.close();
  return out.str();
}

}  // namespace gpuprov
