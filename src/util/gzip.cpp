#include "util/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "util/error.h"

namespace ppolab {

namespace {

// zlib's gzip stream of `bytes` in one piece (a 10-byte header, the deflate
// stream, CRC-32 and length).
std::string gzip_single(std::string_view bytes, int level) {
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

// One block as raw deflate (no wrapper, empty window): ended by a sync flush
// (an empty stored block, byte-aligned, not final) so that the next block's
// stream can follow, or, for the last, by the final block. Its CRC-32 too.
struct DeflatedBlock {
    std::string bytes;
    uLong crc = 0;
};

DeflatedBlock deflate_block(std::string_view block, int level, bool last) {
    z_stream zs{};
    if (deflateInit2(&zs, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) fail("gzip: cannot initialise zlib");
    DeflatedBlock out;
    out.bytes.resize(deflateBound(&zs, block.size()) + 64);  // + the sync flush's empty stored block
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(block.data()));
    zs.avail_in = static_cast<uInt>(block.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.bytes.data());
    zs.avail_out = static_cast<uInt>(out.bytes.size());
    const int rc = deflate(&zs, last ? Z_FINISH : Z_SYNC_FLUSH);
    const bool done = last ? rc == Z_STREAM_END : rc == Z_OK && zs.avail_in == 0 && zs.avail_out > 0;
    out.bytes.resize(zs.total_out);
    deflateEnd(&zs);
    if (!done) fail("gzip: compression failed (", rc, ")");
    out.crc = crc32(0L, reinterpret_cast<const Bytef*>(block.data()), static_cast<uInt>(block.size()));
    return out;
}

void put_le32(std::string& s, uint32_t v) {
    for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

std::string gzip_compress(std::string_view bytes, int level) {
    if (bytes.size() <= kGzipBlock) return gzip_single(bytes, level);
    const size_t n = (bytes.size() + kGzipBlock - 1) / kGzipBlock;
    std::vector<DeflatedBlock> blocks(n);
    std::atomic<size_t> next{0};
    std::exception_ptr error;
    std::mutex error_mu;
    auto work = [&] {
        for (size_t i; (i = next.fetch_add(1)) < n;) {
            try {
                blocks[i] = deflate_block(bytes.substr(i * kGzipBlock, kGzipBlock), level, i + 1 == n);
            } catch (...) {
                std::lock_guard lock(error_mu);
                if (!error) error = std::current_exception();
            }
        }
    };
    const size_t threads = std::min<size_t>(n, std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (std::thread& t : pool) t.join();
    if (error) std::rethrow_exception(error);

    // zlib's own gzip header for this level (mtime 0, its OS byte), then the
    // blocks' streams, then the CRC-32 of all the bytes and their length mod 2^32.
    std::string out = gzip_single({}, level).substr(0, 10);
    uLong crc = blocks[0].crc;
    for (size_t i = 1; i < n; ++i) {
        const size_t len = std::min(kGzipBlock, bytes.size() - i * kGzipBlock);
        crc = crc32_combine(crc, blocks[i].crc, static_cast<z_off_t>(len));
    }
    size_t total = 10 + 8;
    for (const DeflatedBlock& b : blocks) total += b.bytes.size();
    out.reserve(total);
    for (const DeflatedBlock& b : blocks) out += b.bytes;
    put_le32(out, static_cast<uint32_t>(crc));
    put_le32(out, static_cast<uint32_t>(bytes.size() & 0xffffffffu));
    return out;
}

std::string gzip_decompress(std::string_view bytes, std::string_view where, size_t max_bytes) {
    size_t offset = 0;
    GzipInflater in(
        [&](char* buffer, size_t capacity) {
            const size_t n = std::min(capacity, bytes.size() - offset);
            std::copy_n(bytes.data() + offset, n, buffer);
            offset += n;
            return n;
        },
        std::string(where));
    std::string out;
    char chunk[1 << 16];
    while (true) {
        const size_t n = in.read(chunk, sizeof(chunk));
        if (n == 0) break;
        out.append(chunk, n);
        if (out.size() > max_bytes) fail(where, ": decompressed size exceeds the limit of ", max_bytes, " bytes");
    }
    if (!in.at_end()) fail(where, ": gzip stream is truncated");  // unreachable: read() returned 0 at the end
    return out;
}

// ------------------------------------------------------------ GzipInflater

struct GzipInflater::Impl {
    z_stream zs{};
    Source source;
    std::string where;
    std::vector<char> input = std::vector<char>(1 << 16);
    bool source_done = false;  // the source returned 0
    bool ended = false;        // Z_STREAM_END: trailer checked

    ~Impl() { inflateEnd(&zs); }

    // More compressed input; false at the end of the source.
    bool refill() {
        if (source_done) return false;
        const size_t n = source(input.data(), input.size());
        if (n == 0) {
            source_done = true;
            return false;
        }
        zs.next_in = reinterpret_cast<Bytef*>(input.data());
        zs.avail_in = static_cast<uInt>(n);
        return true;
    }
};

GzipInflater::GzipInflater(Source source, std::string where) : impl_(std::make_unique<Impl>()) {
    impl_->source = std::move(source);
    impl_->where = std::move(where);
    if (inflateInit2(&impl_->zs, 15 + 16) != Z_OK) {
        impl_.reset();
        fail("gzip: cannot initialise zlib");
    }
}

GzipInflater::~GzipInflater() = default;

size_t GzipInflater::read(char* out, size_t n) {
    Impl& m = *impl_;
    size_t done = 0;
    while (done < n && !m.ended) {
        // At the end of the source inflate may still hold output (a long
        // match, the window): it is called anyway, and only a call without
        // progress means the stream is cut short.
        if (m.zs.avail_in == 0) m.refill();
        const size_t want = std::min<size_t>(n - done, size_t(1) << 30);
        m.zs.next_out = reinterpret_cast<Bytef*>(out + done);
        m.zs.avail_out = static_cast<uInt>(want);
        const int rc = inflate(&m.zs, Z_NO_FLUSH);
        done += want - m.zs.avail_out;
        if (rc == Z_STREAM_END) {
            m.ended = true;
        } else if (rc == Z_BUF_ERROR) {
            // No progress possible: input is needed and none is left.
            if (m.zs.avail_in == 0 && m.source_done) fail(m.where, ": gzip stream is truncated");
            fail(m.where, ": not a valid gzip stream (truncated or corrupted)");
        } else if (rc != Z_OK) {
            fail(m.where, ": not a valid gzip stream (truncated or corrupted)");
        }
    }
    produced_ += done;
    return done;
}

void GzipInflater::read_exact(char* out, size_t n, std::string_view what) {
    const size_t got = read(out, n);
    if (got != n)
        fail(impl_->where, ": gzip stream is truncated (", what, ": ", n, " bytes expected, the stream ends after ",
             got, ")");
}

bool GzipInflater::at_end() {
    char extra;
    if (read(&extra, 1) != 0) return false;
    Impl& m = *impl_;
    if (m.zs.avail_in != 0 || m.refill()) fail(m.where, ": unexpected bytes after the gzip stream");
    return true;
}

}  // namespace ppolab
