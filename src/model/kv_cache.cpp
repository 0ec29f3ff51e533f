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

}  // namespace ppolab
