// attention.h — grouped-query causal self-attention over left-padded rows.
//
// Shapes: q (B, T, nH, hd); k, v (B, T, nKV, hd); mask (B, T) with 1 for a
// real token, 0 for left padding; out (B, T, nH, hd). Query head h reads KV
// head h / (nH / nKV). Row t attends to every s ≤ t with mask[s] = 1, with
// scale 1/sqrt(hd); a padded query row outputs zeros.
//
// Branches (packed pairs): a mask value g ≥ 2 marks a token of branch g. A
// branch token sees the shared tokens (1) and its own branch before it, not
// other branches; a shared token sees shared tokens only. So a row
// [prompt | answer A (2) | answer B (3)] computes both answers as if each
// followed the prompt alone, with the prompt computed once (the positions
// must restart after the prompt too: Qwen2::forward does that).
#pragma once
#include <cstdint>

namespace ppolab {

// Whether a key of mask value `key` is visible to a query of mask value
// `query` (the causal order aside): real, and shared or the same branch.
inline bool attention_visible(uint8_t key, uint8_t query) { return key != 0 && (key == 1 || key == query); }

struct AttentionShape {
    int64_t B, T, nH, nKV, hd;
};

// probs (B, nH, T, T): the softmax weights, saved for the backward.
template <typename T>
void attention_forward(T* out, T* probs, const T* q, const T* k, const T* v, const uint8_t* mask, AttentionShape s);
// dq, dk, dv are overwritten.
template <typename T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* probs, const T* q, const T* k, const T* v,
                        const uint8_t* mask, AttentionShape s);

// One new query per row against a KV cache (incremental decoding).
// q (B, nH, hd); kcache, vcache (B, S_max, nKV, hd) of which the first S
// positions are filled; cache_mask (B, S_max) 1 where the cached position
// is a real token; out (B, nH, hd). The new token's own K/V must already be
// in the cache at position S-1.
void attention_decode(float* out, const float* q, const float* kcache, const float* vcache, const uint8_t* cache_mask,
                      int64_t B, int64_t S, int64_t S_max, int64_t nH, int64_t nKV, int64_t hd);

// Tree attention over one packed row of T tokens (a prefix tree teacher-
// forced in one pass, model/prefix_tree.h): parent (T) gives each token's
// predecessor in its sequence (−1 for the first token, else < t), and token t
// attends to itself and its ancestors only. q (T, nH, hd); k, v (T, nKV, hd);
// out (T, nH, hd). Each query is computed by attention_decode over its path
// (ancestors ascending, then itself), so a token's output is bit for bit
// what it is in its own sequence alone, by prefill or decode. Forward only.
void attention_tree(float* out, const float* q, const float* k, const float* v, const int32_t* parent, int64_t T,
                    int64_t nH, int64_t nKV, int64_t hd);

}  // namespace ppolab
