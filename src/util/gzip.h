// gzip.h — lossless compression of resume states (gzip format, RFC 1952).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace ppolab {

std::string gzip_compress(std::string_view bytes, int level = 1);
// `where` names the file in errors; refuses outputs larger than max_bytes.
std::string gzip_decompress(std::string_view bytes, std::string_view where,
                            size_t max_bytes = size_t(1) << 36);

}  // namespace ppolab
