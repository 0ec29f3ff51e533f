// lm_head.cpp — log-probabilities of chosen tokens, in chunks of rows (see lm_head.h).
//   logits = h · Wᵀ,  lse[n] = log Σ_v exp(logits[n,v]),  logp[n] = logits[n,target[n]] − lse[n]
// Backward: dlogits[n,v] = dlogp[n] · (1[v = target[n]] − softmax(logits[n])[v]),
//   dh = dlogits · W,  dW += dlogitsᵀ · h.
// Rows go through the output layer in chunks of lm_chunk_rows(V), the same
// chunks in every path; each chunk reads the whole weight once (272 MB on
// the 0.5B shape: at 64 rows a chunk the read bounded the product). Without
// a keeper (LmKeep) only one chunk of logits exists at a time, in a buffer
// kept by the calling thread across calls (first-touch page faults are
// expensive), and the backward recomputes them; with one, the forward
// writes all N rows into it and the backward reads them. The
// matmuls go through matmul.h; the per-row exp passes run on whole vectors
// (simd.h) and give the same bits on every path: the exp is simd::vexp or
// its scalar twin canon_expf, Σ exp is one 16-lane association of doubles,
// log is canon_log (row_logsumexp below). The backward skips rows whose dlogp is 0 (prompt tokens,
// padding): their dh is 0 and they cost nothing.
#include "kernels/lm_head.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/matmul_backend.h"
#include "kernels/simd.h"
#include "util/canon_math.h"
#include "util/error.h"

#pragma GCC diagnostic ignored "-Wpsabi"

namespace ppolab {

namespace {

using namespace simd;

constexpr int64_t kLmMinChunk = 64;  // rows of a chunk at least, whatever the byte budget
int64_t lm_chunk_bytes = kLmChunkBytes;

// The calling thread's logits buffer (shared by forward and backward), at least n floats.
float* lm_scratch(size_t n) {
    thread_local std::vector<float> buf;
    if (buf.size() < n) buf.resize(n);
    return buf.data();
}

// logits (rows, V) = h (rows, H) · Wᵀ on the path that a chunk of more than
// kSmallM rows takes, whatever `rows` is: a chunk of at most kSmallM rows
// (the last one, or a recompute of few live rows) whose path would differ
// goes through buffers padded with zero rows to kSmallM + 1. So a row's
// logits are the same bits in every chunk it falls in — the forward's, and
// the backward's recompute of its live rows only — which the kept logits'
// contract needs (matmul.h: products of at most kSmallM rows take the
// row-invariant kernels, larger ones oneDNN or the AMX tiles).
void lm_logits(float* logits, const float* h, WeightView W, int64_t rows) {
    const int64_t padded = kSmallM + 1, V = W.rows, H = W.cols;
    if (rows > kSmallM || std::strcmp(matmul_path_name(rows, W), matmul_path_name(padded, W)) == 0)
        return linear_forward(logits, h, W, rows);
    thread_local std::vector<float> hpad, zpad;
    hpad.assign(static_cast<size_t>(padded * H), 0.f);
    zpad.resize(static_cast<size_t>(padded * V));
    std::memcpy(hpad.data(), h, sizeof(float) * rows * H);
    linear_forward(zpad.data(), hpad.data(), W, padded);
    std::memcpy(logits, zpad.data(), sizeof(float) * rows * V);
}

void lm_check(const int32_t* targets, WeightView W, int64_t N) {
    if (W.rows <= 0 || W.cols <= 0) fail("lm_logprobs: output weight has shape (", W.rows, ", ", W.cols, ")");
    for (int64_t n = 0; n < N; ++n)
        if (targets[n] < 0 || targets[n] >= W.rows)
            fail("lm_logprobs: target of row ", n, " is ", targets[n], "; expected a token id in [0, ", W.rows, ")");
}

// log Σ_v exp z[v], the same bits on every path: the maximum (exact in any
// order; NaN never wins; a −0 maximum is made +0), then Σ_v e^(z[v] − max)
// with e^ from simd::vexp / its scalar twin canon_expf, each term widened to
// double and added in the 16-lane association (simd.h: lane v mod 16, then
// the fixed tree), then max + log Σ with canon_log.
float lm_lse_finish(float mx, double* lanes) { return mx + static_cast<float>(canon_log(lanes16_close(lanes))); }

// V: L floats (the exp); VH: L/2 floats, widened into VD.
template <class V, class VH, class VD>
PPOLAB_SIMD_INLINE float lm_logsumexp(const float* z, int64_t n) {
    constexpr int64_t L = sizeof(V) / 4, H = L / 2;
    V m = V{} - std::numeric_limits<float>::infinity();
    int64_t i = 0;
    for (; i + L <= n; i += L) {
        const V x = vload<V>(z + i);
        m = x > m ? x : m;
    }
    float mx = vhmax(m);
    for (; i < n; ++i) mx = z[i] > mx ? z[i] : mx;
    mx = mx + 0.f;
    Lanes16<VD, double> acc;
    for (i = 0; i + L <= n; i += L) {
        const V e = vexp<V>(vload<V>(z + i) - mx);
        VH half[2];
        std::memcpy(half, &e, sizeof e);
        acc.add(i, __builtin_convertvector(half[0], VD));
        acc.add(i + H, __builtin_convertvector(half[1], VD));
    }
    double lanes[16];
    acc.store(lanes);
    for (; i < n; ++i) lanes[i % 16] += static_cast<double>(canon_expf(z[i] - mx));
    return lm_lse_finish(mx, lanes);
}

// z[v] ← e^(z[v] − lse) · (−g), elementwise (vexp lanes, canon_expf tails).
template <class V>
PPOLAB_SIMD_INLINE void lm_scaled_softmax(float* z, int64_t n, float lse, float g) {
    constexpr int64_t L = sizeof(V) / 4;
    int64_t i = 0;
    for (; i + L <= n; i += L) vstore(z + i, vexp<V>(vload<V>(z + i) - lse) * -g);
    for (; i < n; ++i) z[i] = canon_expf(z[i] - lse) * -g;
}

PPOLAB_SIMD_AVX2 float lm_logsumexp_avx2(const float* z, int64_t n) { return lm_logsumexp<vf8, vf4, vd4>(z, n); }
PPOLAB_SIMD_AVX512 float lm_logsumexp_avx512(const float* z, int64_t n) { return lm_logsumexp<vf16, vf8, vd8>(z, n); }
PPOLAB_SIMD_AVX2 void lm_scaled_softmax_avx2(float* z, int64_t n, float lse, float g) {
    lm_scaled_softmax<vf8>(z, n, lse, g);
}
PPOLAB_SIMD_AVX512 void lm_scaled_softmax_avx512(float* z, int64_t n, float lse, float g) {
    lm_scaled_softmax<vf16>(z, n, lse, g);
}

}  // namespace

float row_logsumexp(const float* z, int64_t n) {
    if (simd_has_avx512()) return lm_logsumexp_avx512(z, n);
    if (simd_has_avx2()) return lm_logsumexp_avx2(z, n);
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) mx = z[i] > mx ? z[i] : mx;
    mx = mx + 0.f;
    double lanes[16] = {};
    for (int64_t i = 0; i < n; ++i) lanes[i % 16] += static_cast<double>(canon_expf(z[i] - mx));
    return lm_lse_finish(mx, lanes);
}

void row_scaled_softmax(float* z, int64_t n, float lse, float g) {
    if (simd_has_avx512()) return lm_scaled_softmax_avx512(z, n, lse, g);
    if (simd_has_avx2()) return lm_scaled_softmax_avx2(z, n, lse, g);
    for (int64_t i = 0; i < n; ++i) z[i] = canon_expf(z[i] - lse) * -g;
}

namespace {}  // namespace

int64_t lm_chunk_rows(int64_t V) {
    return std::max(kLmMinChunk, lm_chunk_bytes / (std::max<int64_t>(V, 1) * int64_t{sizeof(float)}) / 32 * 32);
}

int64_t lm_set_chunk_bytes(int64_t bytes) {
    PPOLAB_ASSERT(bytes >= 0);
    return std::exchange(lm_chunk_bytes, bytes);
}

void lm_logprobs_forward(float* logp, const float* h, const int32_t* targets, WeightView W, int64_t N, LmKeep* keep) {
    // logp (N); h (N, H); targets (N); W (V, H)
    lm_check(targets, W, N);
    const int64_t V = W.rows;
    if (keep) {
        keep->valid = N * V * static_cast<int64_t>(sizeof(float)) <= keep->max_bytes;
        keep->h = h;
        keep->w = W.data;
        keep->N = N;
        if (keep->valid) {
            keep->logits.resize(static_cast<size_t>(N * V));
            keep->lse.resize(static_cast<size_t>(N));
        }
    }
    const bool kept = keep && keep->valid;
    const int64_t chunk = lm_chunk_rows(V);
    float* scratch = kept ? nullptr : lm_scratch(static_cast<size_t>(std::min(N, chunk) * V));  // (chunk, V)
    for (int64_t n0 = 0; n0 < N; n0 += chunk) {
        const int64_t rows = std::min(chunk, N - n0);
        float* logits = kept ? keep->logits.data() + n0 * V : scratch;
        lm_logits(logits, h + n0 * W.cols, W, rows);
#pragma omp parallel for schedule(static) if (rows * V > 65536)
        for (int64_t r = 0; r < rows; ++r) {
            const float* z = logits + r * V;  // (V)
            const float lse = row_logsumexp(z, V);
            if (kept) keep->lse[n0 + r] = lse;
            logp[n0 + r] = z[targets[n0 + r]] - lse;
        }
    }
}

void lm_logprobs_backward(float* dh, float* dW, const float* dlogp, const float* h, const int32_t* targets,
                          WeightView W, int64_t N, LmKeep* keep) {
    // dh (N, H) overwritten; dW (V, H) accumulated or nullptr; dlogp (N); h (N, H); targets (N); W (V, H)
    lm_check(targets, W, N);
    // dW is always FP32; W may be the BF16 copy of FP32 masters (mixed precision).
    const int64_t V = W.rows, H = W.cols;
    std::vector<int64_t> live;  // rows with a nonzero upstream gradient
    for (int64_t n = 0; n < N; ++n) {
        if (dlogp[n] != 0.f) live.push_back(n);
        else std::memset(dh + n * H, 0, sizeof(float) * H);
    }
    const int64_t L = static_cast<int64_t>(live.size());
    const bool kept = keep && keep->valid && keep->h == h && keep->w == W.data && keep->N == N;
    const bool all_live = L == N;  // rows contiguous: read h, the kept logits and dh in place
    const int64_t max_rows = lm_chunk_rows(V), chunk = std::min(L, max_rows);
    // Scratch only for what is not read in place: the logits unless kept
    // with every row live, the gathered h and dh unless every row is live.
    const int64_t logit_floats = kept && all_live ? 0 : chunk * V;
    float* scratch = lm_scratch(static_cast<size_t>(logit_floats + (all_live ? 0 : 2 * chunk * H)));
    for (int64_t i0 = 0; i0 < L; i0 += max_rows) {
        const int64_t rows = std::min(max_rows, L - i0);
        float* logits = scratch;                         // (rows, V): logits in, dlogits out
        float* hbuf = scratch + logit_floats;            // (rows, H) gathered h
        float* dhc = hbuf + (all_live ? 0 : chunk * H);  // (rows, H)
        const float* hc = hbuf;
        if (all_live) {
            hc = h + i0 * H;
            dhc = dh + i0 * H;
            if (kept) logits = keep->logits.data() + i0 * V;
        } else {
            for (int64_t r = 0; r < rows; ++r) std::memcpy(hbuf + r * H, h + live[i0 + r] * H, sizeof(float) * H);
            if (kept)
                for (int64_t r = 0; r < rows; ++r)
                    std::memcpy(logits + r * V, keep->logits.data() + live[i0 + r] * V, sizeof(float) * V);
        }
        if (!kept) lm_logits(logits, hc, W, rows);
#pragma omp parallel for schedule(static) if (rows * V > 65536)
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t n = live[i0 + r];
            float* z = logits + r * V;
            const float g = dlogp[n];
            row_scaled_softmax(z, V, kept ? keep->lse[n] : row_logsumexp(z, V), g);
            z[targets[n]] += g;
        }
        linear_backward_input(dhc, logits, W, rows);
        if (!all_live)
            for (int64_t r = 0; r < rows; ++r) std::memcpy(dh + live[i0 + r] * H, dhc + r * H, sizeof(float) * H);
        if (dW) linear_backward_weight(dW, logits, hc, rows, V, H, W.type);
    }
    if (keep) keep->valid = false;  // its logits are now dlogits
}

}  // namespace ppolab
