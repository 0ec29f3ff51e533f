#include "model/kv_cache.h"

#include <algorithm>

#include "util/error.h"

namespace ppolab {

KvCache::KvCache(const Qwen2Config& c, int64_t batch, int64_t max_len)
    : L(c.num_hidden_layers), B(batch), S_max(max_len), nKV(c.num_key_value_heads), hd(c.head_dim) {
    if (batch <= 0 || max_len <= 0) fail("KV cache: batch (", batch, ") and length (", max_len, ") must be positive");
    const size_t n = static_cast<size_t>(L * B * S_max * nKV * hd);
    k.assign(n, 0.f);
    v.assign(n, 0.f);
    mask.assign(static_cast<size_t>(B * S_max), 0);
    next_position.assign(static_cast<size_t>(B), 0);
}

void KvCache::clear() {
    S = 0;
    std::fill(mask.begin(), mask.end(), 0);
    std::fill(next_position.begin(), next_position.end(), 0);
}

void KvCache::place_row(int64_t b, const KvCache& one, int64_t end) {
    if (one.B != 1 || one.L != L || one.nKV != nKV || one.hd != hd)
        fail("KV cache: place_row needs a one-row cache of the same model shape");
    if (b < 0 || b >= B || end > S_max || one.S > end)
        fail("KV cache: ", one.S, " columns cannot end at column ", end, " of row ", b, " (B=", B, ", S_max=", S_max,
             ")");
    const int64_t KV = nKV * hd, start = end - one.S;
    for (int64_t l = 0; l < L; ++l) {
        const size_t from = static_cast<size_t>(l * one.S_max * KV), n = static_cast<size_t>(one.S * KV);
        const size_t to = static_cast<size_t>(((l * B + b) * S_max + start) * KV);
        std::copy_n(one.k.begin() + from, n, k.begin() + to);
        std::copy_n(one.v.begin() + from, n, v.begin() + to);
    }
    uint8_t* m = mask.data() + b * S_max;
    std::fill(m, m + start, 0);
    std::copy_n(one.mask.begin(), one.S, m + start);
    next_position[static_cast<size_t>(b)] = one.next_position[0];
    S = std::max(S, end);
}

}  // namespace ppolab
