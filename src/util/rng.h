// rng.h — Philox4x32-10, a counter-based generator (Salmon et al., SC'11).
//
// The whole state is three integers (seed, stream, counter), so it is
// serialised exactly and a resumed run draws the same numbers. Every draw
// consumes whole 128-bit blocks: no hidden buffered lanes.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "util/canon_math.h"

namespace ppolab {

class Philox {
public:
    Philox(uint64_t seed = 0, uint64_t stream = 0) : seed_(seed), stream_(stream) {}

    std::array<uint32_t, 4> next_block() { return block(counter_++); }

    // Uniform in [0, 1) with 53 random bits.
    double uniform() {
        auto b = next_block();
        uint64_t bits = (static_cast<uint64_t>(b[0]) << 21) ^ (b[1] >> 11);
        return static_cast<double>(bits & ((uint64_t(1) << 53) - 1)) * 0x1.0p-53;
    }
    // Uniform integer in [0, n), unbiased (rejection sampling). n > 0.
    uint64_t below(uint64_t n) {
        uint64_t limit = UINT64_MAX - UINT64_MAX % n;
        for (;;) {
            auto b = next_block();
            uint64_t v = (static_cast<uint64_t>(b[0]) << 32) | b[1];
            if (v < limit) return v % n;
        }
    }
    // Standard normal (Box–Muller on one block), with ppolab's own log and
    // cos (util/canon_math.h): the same number on every CPU.
    double normal() {
        auto b = next_block();
        double u1 = (static_cast<double>(b[0]) + 1.0) * 0x1.0p-32;  // (0, 1]
        double u2 = static_cast<double>(b[1]) * 0x1.0p-32;          // [0, 1)
        return std::sqrt(-2.0 * canon_log(u1)) * canon_cos(6.283185307179586 * u2);
    }
    // A permutation of 0..n-1 (Fisher–Yates from the end).
    std::vector<int64_t> permutation(int64_t n) {
        std::vector<int64_t> p(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
        for (int64_t i = n - 1; i > 0; --i)
            std::swap(p[static_cast<size_t>(i)], p[below(static_cast<uint64_t>(i) + 1)]);
        return p;
    }

    uint64_t seed() const { return seed_; }
    uint64_t stream() const { return stream_; }
    uint64_t counter() const { return counter_; }
    void set_counter(uint64_t c) { counter_ = c; }
    bool operator==(const Philox&) const = default;

    std::array<uint32_t, 4> block(uint64_t counter) const {
        uint32_t c[4] = {static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32),
                         static_cast<uint32_t>(stream_), static_cast<uint32_t>(stream_ >> 32)};
        uint32_t k[2] = {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)};
        for (int round = 0; round < 10; ++round) {
            uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c[0];
            uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c[2];
            uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0];
            uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1];
            c[0] = n0;
            c[1] = static_cast<uint32_t>(p1);
            c[2] = n2;
            c[3] = static_cast<uint32_t>(p0);
            k[0] += 0x9E3779B9u;
            k[1] += 0xBB67AE85u;
        }
        return {c[0], c[1], c[2], c[3]};
    }

private:
    uint64_t seed_;
    uint64_t stream_;
    uint64_t counter_ = 0;
};

}  // namespace ppolab
