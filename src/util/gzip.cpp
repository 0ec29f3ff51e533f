#include "util/gzip.h"

#include <zlib.h>

#include "util/error.h"

namespace ppolab {

std::string gzip_compress(std::string_view bytes, int level) {
    z_stream zs{};
    // windowBits 15 + 16 selects the gzip wrapper; mtime stays 0 so the
    // output is a pure function of the input (same state, same bytes).
    if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        fail("gzip: cannot initialise zlib");
    std::string out;
    out.resize(deflateBound(&zs, bytes.size()) + 32);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    zs.avail_in = static_cast<uInt>(bytes.size());
    PPOLAB_ASSERT(bytes.size() < (size_t(1) << 32));
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    int rc = deflate(&zs, Z_FINISH);
    size_t written = zs.total_out;
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) fail("gzip: compression failed (", rc, ")");
    out.resize(written);
    return out;
}

std::string gzip_decompress(std::string_view bytes, std::string_view where, size_t max_bytes) {
    z_stream zs{};
    if (inflateInit2(&zs, 15 + 16) != Z_OK) fail("gzip: cannot initialise zlib");
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    zs.avail_in = static_cast<uInt>(bytes.size());
    std::string out;
    char chunk[1 << 16];
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        zs.next_out = reinterpret_cast<Bytef*>(chunk);
        zs.avail_out = sizeof(chunk);
        rc = inflate(&zs, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END) {
            inflateEnd(&zs);
            fail(where, ": not a valid gzip stream (truncated or corrupted)");
        }
        out.append(chunk, sizeof(chunk) - zs.avail_out);
        if (out.size() > max_bytes) {
            inflateEnd(&zs);
            fail(where, ": decompressed size exceeds the limit of ", max_bytes, " bytes");
        }
        if (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0) {
            inflateEnd(&zs);
            fail(where, ": gzip stream is truncated");
        }
    }
    bool trailing = zs.avail_in != 0;
    inflateEnd(&zs);
    if (trailing) fail(where, ": unexpected bytes after the gzip stream");
    return out;
}

}  // namespace ppolab
