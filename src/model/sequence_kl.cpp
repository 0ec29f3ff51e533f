// sequence_kl.cpp — exact sequence KL between two policies (see sequence_kl.h).
// At one position, with p'_v = zp_v − max zp and q'_v = zq_v − max zq (float64),
//   S_p = Σ_v e^{p'_v},  S_q = Σ_v e^{q'_v},  A = Σ_v e^{p'_v} (p'_v − q'_v)
//   log p_v − log q_v = (p'_v − q'_v) − (log S_p − log S_q)
//   KL = Σ_v p_v (log p_v − log q_v) = A / S_p − (log S_p − log S_q)
// — two exponentials per vocabulary entry, in one pass after the maxima,
// 8 (AVX-512) or 4 (AVX2) float64 lanes at a time (simd.h vexp_f64) where the
// CPU has them. Every path gives the same bits: e^x is canon_exp
// (util/canon_math.h), which vexp_f64 equals lane for lane; S_p, S_q and A
// are each summed in one association — 16 interleaved partial sums (entry v
// in lane v mod 16, v ascending) closed by simd.h's fixed tree; log is
// canon_log; the maxima are exact (a −0 maximum made +0).
// Bit-identical logits give A = 0 and S_p = S_q: exactly 0.
// The positions' terms are summed over the response positions of a row in
// position order.
#include "model/sequence_kl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/matmul.h"
#include "kernels/simd.h"
#include "util/canon_math.h"
#include "util/error.h"

namespace ppolab {

namespace {

// The position's result from its sums (the formula above).
SequenceKl finish_position(const float* zp, const float* zq, int32_t target, double mxp, double mxq, double sp,
                           double sq, double a) {
    const double log_ratio = canon_log(sp) - canon_log(sq), lp = mxp + canon_log(sp), lq = mxq + canon_log(sq);
    const double k1 = (static_cast<double>(zp[target]) - lp) - (static_cast<double>(zq[target]) - lq);
    return SequenceKl{a / sp - log_ratio, k1};
}

// The sums of the formula above, 16 lanes each (entry v in lane v mod 16).
struct KlSums {
    double sp[16] = {}, sq[16] = {}, a[16] = {};
};
// Entries [v, V) added to their lanes (the portable loop, and the vector
// loop's tail), then the position's result from the closed lanes.
SequenceKl add_terms_and_finish(const float* zp, const float* zq, int64_t v, int64_t V, int32_t target, double mxp,
                                double mxq, KlSums& s) {
    for (; v < V; ++v) {
        const double p = static_cast<double>(zp[v]) - mxp, q = static_cast<double>(zq[v]) - mxq, e = canon_exp(p);
        s.sp[v % 16] += e;
        s.sq[v % 16] += canon_exp(q);
        s.a[v % 16] += e * (p - q);
    }
    return finish_position(zp, zq, target, mxp, mxq, simd::lanes16_close(s.sp), simd::lanes16_close(s.sq),
                           simd::lanes16_close(s.a));
}

SequenceKl position_kl_portable(const float* zp, const float* zq, int64_t V, int32_t target) {
    double mxp = -std::numeric_limits<double>::infinity(), mxq = mxp;
    for (int64_t v = 0; v < V; ++v) {
        mxp = std::max(mxp, static_cast<double>(zp[v]));
        mxq = std::max(mxq, static_cast<double>(zq[v]));
    }
    KlSums s;
    return add_terms_and_finish(zp, zq, 0, V, target, mxp + 0.0, mxq + 0.0, s);
}

// VD: L float64 lanes, VF: L floats (widened into VD). The tail past the last
// whole vector goes to its lanes one entry at a time with canon_exp.
template <class VD, class VF>
PPOLAB_SIMD_INLINE SequenceKl position_kl_simd(const float* zp, const float* zq, int64_t V, int32_t target) {
    using namespace simd;
    constexpr int64_t L = sizeof(VD) / sizeof(double);
    if (V < L) return position_kl_portable(zp, zq, V, target);
    VF mp = vload<VF>(zp), mq = vload<VF>(zq);
    int64_t v = L;
    for (; v + L <= V; v += L) {
        const VF p = vload<VF>(zp + v), q = vload<VF>(zq + v);
        mp = mp > p ? mp : p;
        mq = mq > q ? mq : q;
    }
    float fp = mp[0], fq = mq[0];
    for (int64_t i = 1; i < L; ++i) fp = std::max(fp, mp[i]), fq = std::max(fq, mq[i]);
    for (; v < V; ++v) fp = std::max(fp, zp[v]), fq = std::max(fq, zq[v]);
    const double mxp = static_cast<double>(fp) + 0.0, mxq = static_cast<double>(fq) + 0.0;
    Lanes16<VD, double> sp, sq, a;
    for (v = 0; v + L <= V; v += L) {
        const VD p = __builtin_convertvector(vload<VF>(zp + v), VD) - mxp;
        const VD q = __builtin_convertvector(vload<VF>(zq + v), VD) - mxq;
        const VD e = vexp_f64(p);
        sp.add(v, e);
        sq.add(v, vexp_f64(q));
        a.add(v, e * (p - q));
    }
    KlSums s;
    sp.store(s.sp);
    sq.store(s.sq);
    a.store(s.a);
    return add_terms_and_finish(zp, zq, v, V, target, mxp, mxq, s);
}

PPOLAB_SIMD_AVX512 SequenceKl position_kl_avx512(const float* zp, const float* zq, int64_t V, int32_t target) {
    return position_kl_simd<simd::vd8, simd::vf8>(zp, zq, V, target);
}
PPOLAB_SIMD_AVX2 SequenceKl position_kl_avx2(const float* zp, const float* zq, int64_t V, int32_t target) {
    return position_kl_simd<simd::vd4, simd::vf4>(zp, zq, V, target);
}

// The final hidden states (B, T, H) of `model` over the batch at positions `src`, as (M, H).
std::vector<float> hidden_rows(Qwen2& model, const ScoringBatch& b, const std::vector<int64_t>& src) {
    const int64_t H = model.config().hidden_size;
    const float* h = model.forward(b.tokens.data(), b.mask.data(), b.B, b.T, false);
    std::vector<float> out(src.size() * static_cast<size_t>(H));  // (M, H)
    for (size_t i = 0; i < src.size(); ++i)
        std::memcpy(out.data() + static_cast<int64_t>(i) * H, h + src[i] * H, sizeof(float) * static_cast<size_t>(H));
    return out;
}

void check_batch_shape(const ScoringBatch& b) {
    if (!b.reads.empty()) fail("sequence KL: a packed pair batch has no per-token log-probs");
    const size_t n = static_cast<size_t>(b.B * b.T);
    if (b.B <= 0 || b.T <= 0 || b.tokens.size() != n || b.mask.size() != n || b.response_mask.size() != n)
        fail("sequence KL: inconsistent batch shape (B=", b.B, ", T=", b.T, ")");
    for (int64_t i = 0; i < b.B * b.T; ++i)
        if (b.response_mask[static_cast<size_t>(i)] && (i % b.T == 0 || !b.mask[static_cast<size_t>(i - 1)]))
            fail("sequence KL: row ", i / b.T, " has a response token at position ", i % b.T,
                 " with no real token before it");
}

void check_inputs(const Qwen2& policy, const Qwen2& reference, const ScoringBatch& b) {
    check_batch_shape(b);
    const Qwen2Config &p = policy.config(), &q = reference.config();
    if (p.vocab_size != q.vocab_size || p.hidden_size != q.hidden_size)
        fail("sequence KL: the policy has vocabulary ", p.vocab_size, " and width ", p.hidden_size, ", the reference ",
             q.vocab_size, " and ", q.hidden_size);
}

}  // namespace

SequenceKl position_kl(const float* zp, const float* zq, int64_t V, int32_t target) {
    if (simd::simd_has_avx512()) return position_kl_avx512(zp, zq, V, target);
    if (simd::simd_has_avx2()) return position_kl_avx2(zp, zq, V, target);
    return position_kl_portable(zp, zq, V, target);
}

namespace {

// Both overloads below, their inputs checked: hp, hq (M, H) at the rows that
// produce the M response tokens of b.
std::vector<SequenceKl> kl_from_hidden(const std::vector<float>& hp, const std::vector<float>& hq, WeightView Wp,
                                       WeightView Wq, const ScoringBatch& b, const std::vector<int64_t>& pos) {
    const int64_t M = static_cast<int64_t>(pos.size()), V = Wp.rows, H = Wp.cols;
    std::vector<SequenceKl> per_position(pos.size());                                              // (M)
    std::vector<float> zp(static_cast<size_t>(std::min(M, kSequenceKlChunk) * V)), zq(zp.size());  // (chunk, V)
    for (int64_t n0 = 0; n0 < M; n0 += kSequenceKlChunk) {
        const int64_t rows = std::min(kSequenceKlChunk, M - n0);
        linear_forward(zp.data(), hp.data() + n0 * H, Wp, rows);
        linear_forward(zq.data(), hq.data() + n0 * H, Wq, rows);
#pragma omp parallel for schedule(static) if (rows * V > 65536)
        for (int64_t r = 0; r < rows; ++r)
            per_position[static_cast<size_t>(n0 + r)] =
                position_kl(zp.data() + r * V, zq.data() + r * V, V,
                            b.tokens[static_cast<size_t>(pos[static_cast<size_t>(n0 + r)])]);
    }
    std::vector<SequenceKl> out(static_cast<size_t>(b.B));
    for (size_t i = 0; i < pos.size(); ++i) {  // position order within each row
        SequenceKl& row = out[static_cast<size_t>(pos[i] / b.T)];
        row.kl_exact += per_position[i].kl_exact;
        row.kl_k1 += per_position[i].kl_k1;
    }
    return out;
}

}  // namespace

std::vector<SequenceKl> sequence_kl(Qwen2& policy, Qwen2& reference, const ScoringBatch& b) {
    check_inputs(policy, reference, b);
    const std::vector<int64_t> pos = response_positions(b);
    std::vector<int64_t> src(pos.size());
    for (size_t i = 0; i < pos.size(); ++i) src[i] = pos[i] - 1;  // the prefix that produces the token
    const std::vector<float> hp = hidden_rows(policy, b, src), hq = hidden_rows(reference, b, src);  // (M, H)
    return kl_from_hidden(hp, hq, policy.weights().output_matrix().view(), reference.weights().output_matrix().view(),
                          b, pos);
}

std::vector<SequenceKl> sequence_kl(const std::vector<float>& hp, const std::vector<float>& hq, WeightView Wp,
                                    WeightView Wq, const ScoringBatch& b) {
    check_batch_shape(b);
    if (Wp.rows != Wq.rows || Wp.cols != Wq.cols)
        fail("sequence KL: the policy's output matrix is ", Wp.rows, " x ", Wp.cols, ", the reference's ", Wq.rows,
             " x ", Wq.cols);
    const std::vector<int64_t> pos = response_positions(b);
    const size_t n = pos.size() * static_cast<size_t>(Wp.cols);
    if (hp.size() != n || hq.size() != n)
        fail("sequence KL: hidden states of ", hp.size(), " and ", hq.size(), " floats for ", pos.size(),
             " response positions of width ", Wp.cols);
    return kl_from_hidden(hp, hq, Wp, Wq, b, pos);
}

}  // namespace ppolab
