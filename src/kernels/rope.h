// rope.h — rotary position embedding as Hugging Face Qwen2 applies it
// ("rotate_half": the first and second halves of each head are the pair).
//   inv_freq[i] = 1 / theta^(2i/d),  angle = position · inv_freq[i]
//   x1' = x1·cos − x2·sin,  x2' = x2·cos + x1·sin
#pragma once
#include <cstdint>

namespace ppolab {

// x: (N, heads, head_dim), rotated in place; positions: (N).
template <typename T>
void rope_forward(T* x, const int32_t* positions, int64_t N, int64_t heads, int64_t head_dim, double theta);
// The backward of a rotation is the inverse rotation, applied in place to the gradient.
template <typename T>
void rope_backward(T* dx, const int32_t* positions, int64_t N, int64_t heads, int64_t head_dim, double theta);

}  // namespace ppolab
