// gzip.h — lossless compression of resume states (gzip format, RFC 1952).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace ppolab {

// One gzip member. Inputs over kGzipBlock bytes are deflated as independent
// blocks of kGzipBlock bytes on all hardware threads (each block without the
// previous one's window, ended by a sync flush; pigz's layout), joined into
// one deflate stream with the CRC-32 of the whole: the same bytes at any
// thread count, read by any gunzip. A smaller input is zlib's single stream.
inline constexpr size_t kGzipBlock = size_t(1) << 22;
std::string gzip_compress(std::string_view bytes, int level = 1);
// `where` names the file in errors; refuses outputs larger than max_bytes.
std::string gzip_decompress(std::string_view bytes, std::string_view where, size_t max_bytes = size_t(1) << 36);

// Incremental gunzip of one gzip member: compressed bytes are pulled from
// `source` as needed (it fills up to `capacity` bytes and returns how many,
// 0 at the end of its input), decompressed bytes are produced only as asked
// for. A reader can thus look at the start of a stream and decide how much
// of it to accept without inflating (or holding) the rest. Errors name
// `where`: "not a valid gzip stream (truncated or corrupted)", "gzip
// stream is truncated", "unexpected bytes after the gzip stream".
class GzipInflater {
public:
    using Source = std::function<size_t(char* buffer, size_t capacity)>;
    GzipInflater(Source source, std::string where);
    ~GzipInflater();
    GzipInflater(const GzipInflater&) = delete;
    GzipInflater& operator=(const GzipInflater&) = delete;

    // Up to n decompressed bytes into out; fewer only at the end of the gzip
    // stream. Error if the input ends before the stream does.
    size_t read(char* out, size_t n);
    // Exactly n bytes, else Error "<where>: gzip stream is truncated (<what>:
    // <n> bytes expected, the stream ends after <got>)".
    void read_exact(char* out, size_t n, std::string_view what);
    // True if the gzip stream ends here, its trailer checked (CRC, length)
    // and no byte follows it in the source; false if it holds more
    // decompressed bytes (one is inflated to know). Error for bytes after
    // the stream or a damaged trailer.
    bool at_end();
    uint64_t produced() const { return produced_; }  // decompressed bytes handed out

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    uint64_t produced_ = 0;
};

}  // namespace ppolab
