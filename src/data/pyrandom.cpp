#include "data/pyrandom.h"

#include "util/error.h"

namespace ppolab {

namespace {
constexpr int N = 624;
constexpr int M = 397;
constexpr uint32_t MATRIX_A = 0x9908b0dfu;
constexpr uint32_t UPPER_MASK = 0x80000000u;
constexpr uint32_t LOWER_MASK = 0x7fffffffu;

int bit_length(uint64_t n) {
    int k = 0;
    while (n) {
        ++k;
        n >>= 1;
    }
    return k;
}
}  // namespace

PyRandom::PyRandom(int64_t seed) {
    // random_seed(): n = abs(seed); key = 32-bit words of n, little-endian;
    // zero gives the one-word key [0].
    uint64_t n = seed < 0 ? uint64_t(0) - static_cast<uint64_t>(seed) : static_cast<uint64_t>(seed);
    std::vector<uint32_t> key;
    while (n) {
        key.push_back(static_cast<uint32_t>(n & 0xffffffffu));
        n >>= 32;
    }
    if (key.empty()) key.push_back(0);
    init_by_array(key);
}

void PyRandom::init_genrand(uint32_t s) {
    mt_[0] = s;
    for (int i = 1; i < N; ++i) mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
    index_ = N;
}

void PyRandom::init_by_array(const std::vector<uint32_t>& key) {
    init_genrand(19650218u);
    int i = 1;
    size_t j = 0;
    const size_t key_length = key.size();
    for (size_t k = (N > key_length ? N : key_length); k; --k) {
        mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] + static_cast<uint32_t>(j);
        ++i;
        ++j;
        if (i >= N) {
            mt_[0] = mt_[N - 1];
            i = 1;
        }
        if (j >= key_length) j = 0;
    }
    for (int k = N - 1; k; --k) {
        mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
        ++i;
        if (i >= N) {
            mt_[0] = mt_[N - 1];
            i = 1;
        }
    }
    mt_[0] = 0x80000000u;  // MSB is 1, assuring a non-zero initial array
    index_ = N;
}

uint32_t PyRandom::genrand_uint32() {
    static const uint32_t mag01[2] = {0x0u, MATRIX_A};
    if (index_ >= N) {
        int kk = 0;
        for (; kk < N - M; ++kk) {
            uint32_t y = (mt_[kk] & UPPER_MASK) | (mt_[kk + 1] & LOWER_MASK);
            mt_[kk] = mt_[kk + M] ^ (y >> 1) ^ mag01[y & 0x1u];
        }
        for (; kk < N - 1; ++kk) {
            uint32_t y = (mt_[kk] & UPPER_MASK) | (mt_[kk + 1] & LOWER_MASK);
            mt_[kk] = mt_[kk + (M - N)] ^ (y >> 1) ^ mag01[y & 0x1u];
        }
        uint32_t y = (mt_[N - 1] & UPPER_MASK) | (mt_[0] & LOWER_MASK);
        mt_[N - 1] = mt_[M - 1] ^ (y >> 1) ^ mag01[y & 0x1u];
        index_ = 0;
    }
    uint32_t y = mt_[index_++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= (y >> 18);
    return y;
}

uint64_t PyRandom::getrandbits(int k) {
    if (k < 0 || k > 64) fail("PyRandom::getrandbits: k must be in [0, 64], got ", k);
    if (k == 0) return 0;
    if (k <= 32) return genrand_uint32() >> (32 - k);
    // CPython fills 32-bit words from the least significant one; the last
    // (most significant) word keeps only its top (k mod 32) bits.
    uint64_t low = genrand_uint32();
    uint64_t high = genrand_uint32() >> (64 - k);
    return low | (high << 32);
}

double PyRandom::random() {
    uint32_t a = genrand_uint32() >> 5;
    uint32_t b = genrand_uint32() >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

uint64_t PyRandom::randbelow(uint64_t n) {
    if (n == 0) fail("PyRandom::randbelow: n must be positive");
    int k = bit_length(n);
    uint64_t r = getrandbits(k);
    while (r >= n) r = getrandbits(k);
    return r;
}

}  // namespace ppolab
