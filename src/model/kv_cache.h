// kv_cache.h — keys and values of every layer for incremental decoding of a
// batch of rows, preallocated to the context limit (no allocation per token).
//
// Column s of the cache holds the token fed at step s of the batch; each row
// has its own left padding (mask 0) and its own RoPE position counter, so a
// row's numbers do not depend on the other rows of the batch.
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace ppolab {

struct KvCache {
    int64_t L = 0, B = 0, S_max = 0, nKV = 0, hd = 0;
    int64_t S = 0;                       // filled columns
    std::vector<float> k;                // (L, B, S_max, nKV, hd), after RoPE
    std::vector<float> v;                // (L, B, S_max, nKV, hd)
    std::vector<uint8_t> mask;           // (B, S_max) 1 where the column is a real token
    std::vector<int32_t> next_position;  // (B) RoPE position of the row's next token

    KvCache() = default;
    KvCache(const Qwen2Config& config, int64_t batch, int64_t max_len);

    float* k_layer(int64_t l) { return k.data() + l * B * S_max * nKV * hd; }  // (B, S_max, nKV, hd)
    float* v_layer(int64_t l) { return v.data() + l * B * S_max * nKV * hd; }
    void clear();  // S = 0, masks and positions reset (storage kept)
    // Row 0 of `one` (a one-row cache, e.g. a prompt prefilled alone) into
    // row b, its S columns right-aligned to end at column `end` (mask 0
    // before them); S becomes `end` when it was less.
    void place_row(int64_t b, const KvCache& one, int64_t end);
};

}  // namespace ppolab
