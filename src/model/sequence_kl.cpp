// sequence_kl.cpp — exact sequence KL between two policies (see sequence_kl.h).
//   lse_p = m_p + log Σ_v exp(zp_v − m_p)   (float64, m_p = max zp)
//   KL    = Σ_v exp(zp_v − lse_p) · ((zp_v − lse_p) − (zq_v − lse_q))
// summed over the response positions of a row in position order.
#include "model/sequence_kl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/matmul.h"
#include "util/error.h"

namespace ppolab {

namespace {

double row_lse(const float* z, int64_t V) {
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(z[v]));
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(z[v]) - mx);
    return mx + std::log(sum);
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
    const double lp = row_lse(zp, V), lq = row_lse(zq, V);
    double kl = 0;
    for (int64_t v = 0; v < V; ++v) {
        const double logp = static_cast<double>(zp[v]) - lp, logq = static_cast<double>(zq[v]) - lq;
        kl += std::exp(logp) * (logp - logq);
    }
    const double k1 = (static_cast<double>(zp[target]) - lp) - (static_cast<double>(zq[target]) - lq);
    return SequenceKl{kl, k1};
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
