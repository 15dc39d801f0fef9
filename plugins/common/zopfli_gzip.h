// SPDX-License-Identifier: Apache-2.0
// gzip (RFC 1952) with zopfli: the one compressor of the host's Gzip (core/gzip.h) and the kit's
// (vm_rules.h, inside the driver .so files), so what the host measures is what a driver sends.
// Header-only and not installed: each link unit compiles its own copy of the same code.
#pragma once

#include <zopfli/zopfli.h>

#include <cstdlib>
#include <string>
#include <string_view>

namespace gpuprov::zopfli_gzip {

/// Zopfli's iterations: 5 gzips the installer (~58 KB) in about 0.1 s, within a few bytes of
/// zopfli's default 15.
inline constexpr int kIterations = 5;

/// \a data gzipped by zopfli: standard gzip (gunzip, zlib and cloud-init inflate it), about 3 %
/// smaller than zlib at level 9, the same bytes for the same input (mtime 0).
inline std::string Gzip(std::string_view data) {
  ZopfliOptions options;
  ZopfliInitOptions(&options);
  options.numiterations = kIterations;
  unsigned char* out = nullptr;
  size_t out_size = 0;
  ZopfliCompress(&options, ZOPFLI_FORMAT_GZIP, reinterpret_cast<const unsigned char*>(data.data()),
                 data.size(), &out, &out_size);
  std::string result(reinterpret_cast<const char*>(out), out_size);
  std::free(out);  // zopfli allocates its output with malloc (zopfli.h)
  return result;
}

}  // namespace gpuprov::zopfli_gzip
