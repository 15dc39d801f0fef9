#include "gzip.h"

#include <mutex>

#include "zopfli_gzip.h"

namespace gpuprov {

std::string Gzip(const std::string& data) {
  // Zopfli spends about 0.1 s on the installer, and a provision measures the same boot script
  // more than once (does it fit, how big is it): the last answer is kept.
  static std::mutex mu;
  static std::string last_input, last_output;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!last_output.empty() && data == last_input) return last_output;
  }
  std::string out = zopfli_gzip::Gzip(data);
  std::lock_guard<std::mutex> lock(mu);
  last_input = data;
  last_output = out;
  return out;
}

}  // namespace gpuprov
