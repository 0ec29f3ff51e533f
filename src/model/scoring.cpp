#include "model/scoring.h"

#include <algorithm>
#include <cstring>

#include "kernels/lm_head.h"
#include "util/error.h"

namespace ppolab {

static void check_row(const ScoringRow& row, size_t i, const ScoringLimits& lim) {
    const int64_t p = static_cast<int64_t>(row.prompt.size()), r = static_cast<int64_t>(row.response.size());
    if (p == 0) fail("scoring row ", i, ": empty prompt");
    if (r == 0) fail("scoring row ", i, ": empty response");
    if (p > lim.max_prompt)
        fail("scoring row ", i, ": prompt of ", p, " tokens exceeds max_prompt = ", lim.max_prompt,
             " (rows over the limits are refused, not truncated)");
    if (r > lim.max_response)
        fail("scoring row ", i, ": response of ", r, " tokens exceeds max_response = ", lim.max_response,
             " (rows over the limits are refused, not truncated)");
    if (p + r > lim.max_context)
        fail("scoring row ", i, ": prompt + response = ", p + r, " tokens exceeds max_context = ", lim.max_context,
             " (rows over the limits are refused, not truncated)");
}

ScoringBatch scoring_batch(const std::vector<ScoringRow>& rows, const ScoringLimits& lim, int32_t pad_id) {
    if (rows.empty()) fail("scoring batch: no rows");
    ScoringBatch s;
    s.B = static_cast<int64_t>(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        check_row(rows[i], i, lim);
        const int64_t p = static_cast<int64_t>(rows[i].prompt.size()),
                      r = static_cast<int64_t>(rows[i].response.size());
        s.P = std::max(s.P, p);
        s.R = std::max(s.R, r);
    }
    s.T = s.P + s.R;
    s.tokens.assign(static_cast<size_t>(s.B * s.T), pad_id);
    s.mask.assign(static_cast<size_t>(s.B * s.T), 0);
    s.response_mask.assign(static_cast<size_t>(s.B * s.T), 0);
    for (int64_t b = 0; b < s.B; ++b) {
        const auto& row = rows[static_cast<size_t>(b)];
        const int64_t p = static_cast<int64_t>(row.prompt.size());
        for (int64_t j = 0; j < p; ++j) {
            const size_t at = static_cast<size_t>(b * s.T + s.P - p + j);
            s.tokens[at] = row.prompt[static_cast<size_t>(j)];
            s.mask[at] = 1;
        }
        for (size_t j = 0; j < row.response.size(); ++j) {
            const size_t at = static_cast<size_t>(b * s.T + s.P) + j;
            s.tokens[at] = row.response[j];
            s.mask[at] = 1;
            s.response_mask[at] = 1;
        }
    }
    return s;
}

ScoringBatch packed_pair_batch(const std::vector<ScoringRow>& rows, const ScoringLimits& lim, int32_t pad_id) {
    if (rows.empty() || rows.size() % 2 != 0)
        fail("packed pair batch: ", rows.size(), " rows; expected chosen rows then as many rejected rows");
    const size_t n = rows.size() / 2;
    ScoringBatch s;
    s.B = static_cast<int64_t>(n);
    std::vector<int64_t> len(n);
    for (size_t i = 0; i < rows.size(); ++i) check_row(rows[i], i, lim);
    for (size_t i = 0; i < n; ++i) {
        const ScoringRow &c = rows[i], &r = rows[n + i];
        if (c.prompt != r.prompt)
            fail("packed pair batch: rows ", i, " and ", n + i, " have different prompts (a pair shares its prompt)");
        len[i] = static_cast<int64_t>(c.prompt.size() + c.response.size() + r.response.size());
        s.T = std::max(s.T, len[i]);
        s.P = std::max(s.P, static_cast<int64_t>(c.prompt.size()));
        s.R = std::max(s.R, static_cast<int64_t>(std::max(c.response.size(), r.response.size())));
    }
    s.tokens.assign(static_cast<size_t>(s.B * s.T), pad_id);
    s.mask.assign(static_cast<size_t>(s.B * s.T), 0);
    s.response_mask.assign(static_cast<size_t>(s.B * s.T), 0);
    s.reads.assign(2 * n, 0);
    for (size_t i = 0; i < n; ++i) {
        int64_t at = static_cast<int64_t>(i) * s.T + s.T - len[i];  // left padding
        auto put = [&](const std::vector<int32_t>& ids, uint8_t g, bool response) {
            for (int32_t id : ids) {
                s.tokens[static_cast<size_t>(at)] = id;
                s.mask[static_cast<size_t>(at)] = g;
                s.response_mask[static_cast<size_t>(at)] = response;
                ++at;
            }
        };
        put(rows[i].prompt, 1, false);
        put(rows[i].response, 2, true);
        s.reads[i] = at - 1;
        put(rows[n + i].response, 3, true);
        s.reads[n + i] = at - 1;
    }
    return s;
}

static void check_batch(const ScoringBatch& s) {
    const size_t n = static_cast<size_t>(s.B * s.T);
    if (s.B <= 0 || s.T <= 0 || s.tokens.size() != n || s.mask.size() != n || s.response_mask.size() != n)
        fail("scoring batch: inconsistent shape (B=", s.B, ", T=", s.T, ")");
    for (int64_t r : s.reads)
        if (r < 0 || r >= s.B * s.T || !s.response_mask[static_cast<size_t>(r)])
            fail("scoring batch: read position ", r, " is not a response token");
    for (int64_t b = 0; b < s.B; ++b)
        for (int64_t t = 0; t < s.T; ++t) {
            const size_t at = static_cast<size_t>(b * s.T + t);
            if (!s.response_mask[at]) continue;
            if (!s.mask[at]) fail("scoring batch row ", b, ": response position ", t, " is padding");
            if (t == 0 || !s.mask[at - 1])
                fail("scoring batch row ", b, ": response token at position ", t, " has no real token before it");
        }
}

std::vector<int64_t> response_positions(const ScoringBatch& s) {
    std::vector<int64_t> pos;
    for (int64_t n = 0; n < s.B * s.T; ++n)
        if (s.response_mask[static_cast<size_t>(n)]) pos.push_back(n);
    return pos;
}

std::vector<int64_t> last_response_positions(const ScoringBatch& s) {
    if (!s.reads.empty()) return s.reads;
    std::vector<int64_t> last(static_cast<size_t>(s.B), -1);
    for (int64_t b = 0; b < s.B; ++b) {
        for (int64_t t = s.T - 1; t >= 0; --t)
            if (s.response_mask[static_cast<size_t>(b * s.T + t)]) {
                last[static_cast<size_t>(b)] = b * s.T + t;
                break;
            }
        if (last[static_cast<size_t>(b)] < 0) fail("scoring batch row ", b, ": no response token to score");
    }
    return last;
}

void Scorer::gather(const std::vector<int64_t>& src) {
    const int64_t H = model_.config().hidden_size, M = static_cast<int64_t>(src.size());
    src_ = src;
    sel_.resize(static_cast<size_t>(M * H));
    const float* h = model_.hidden();
    for (int64_t i = 0; i < M; ++i)
        std::memcpy(sel_.data() + i * H, h + src[static_cast<size_t>(i)] * H, static_cast<size_t>(H) * sizeof(float));
}

void Scorer::scatter_backward(const std::vector<int64_t>& src) {
    const int64_t H = model_.config().hidden_size, N = model_.batch() * model_.length();
    dhidden_.assign(static_cast<size_t>(N * H), 0.f);
    for (size_t i = 0; i < src.size(); ++i) {
        float* d = dhidden_.data() + src[i] * H;
        const float* g = dsel_.data() + static_cast<int64_t>(i) * H;
        for (int64_t c = 0; c < H; ++c) d[c] += g[c];
    }
    model_.backward(dhidden_.data());
}

// The batch the model last ran must be this one (a backward after another forward is a bug).
static void check_same(const Qwen2& m, const ScoringBatch& s) { PPOLAB_ASSERT(m.batch() == s.B && m.length() == s.T); }

// Per-token outputs read the hidden state before each token: a packed pair
// batch's second answer does not follow its first.
static void check_not_packed(const ScoringBatch& s, const char* what) {
    if (!s.reads.empty()) fail(what, ": a packed pair batch gives reward scores and response log-probs only");
}

// The hidden row that produces the response token at `pos`: the one before
// it — but a packed pair's rejected answer (mask 3) follows the prompt, not
// the chosen answer (mask 2), so its first token reads the prompt's last row.
static int64_t producing_position(const ScoringBatch& s, int64_t pos) {
    int64_t p = pos - 1;
    if (s.mask[static_cast<size_t>(pos)] == 3)
        while (s.mask[static_cast<size_t>(p)] == 2) --p;
    return p;
}

void Scorer::response_logprobs(const ScoringBatch& s, float* logp, bool for_backward) {
    check_batch(s);
    model_.forward(s.tokens.data(), s.mask.data(), s.B, s.T, for_backward);
    auto pos = response_positions(s);
    std::vector<int64_t> src(pos.size());
    targets_.resize(pos.size());
    for (size_t i = 0; i < pos.size(); ++i) {
        src[i] = producing_position(s, pos[i]);  // the prefix that produces the token
        targets_[i] = s.tokens[static_cast<size_t>(pos[i])];
    }
    gather(src);
    out_.resize(pos.size());
    lm_logprobs_forward(out_.data(), sel_.data(), targets_.data(), model_.weights().output_matrix().view(),
                        static_cast<int64_t>(pos.size()), for_backward ? &keep_ : nullptr);
    std::fill(logp, logp + s.B * s.T, 0.f);
    for (size_t i = 0; i < pos.size(); ++i) logp[pos[i]] = out_[i];
}

void Scorer::response_logprobs_backward(const ScoringBatch& s, const float* dlogp) {
    check_same(model_, s);
    auto pos = response_positions(s);
    PPOLAB_ASSERT(pos.size() == src_.size());
    const int64_t M = static_cast<int64_t>(pos.size()), H = model_.config().hidden_size;
    dout_.resize(pos.size());
    for (size_t i = 0; i < pos.size(); ++i) dout_[i] = dlogp[pos[i]];
    dsel_.resize(static_cast<size_t>(M * H));
    lm_logprobs_backward(dsel_.data(), model_.output_grad(), dout_.data(), sel_.data(), targets_.data(),
                         model_.weights().output_matrix().view(), M, &keep_);
    scatter_backward(src_);
}

void Scorer::reward_scores(const ScoringBatch& s, const ScalarHead& head, float* scores, bool for_backward) {
    check_batch(s);
    if (head.hidden != model_.config().hidden_size)
        fail("reward head: width ", head.hidden, ", model hidden size ", model_.config().hidden_size);
    model_.forward(s.tokens.data(), s.mask.data(), s.B, s.T, for_backward);
    gather(last_response_positions(s));
    head.forward(scores, sel_.data(), static_cast<int64_t>(src_.size()));
}

void Scorer::reward_scores_backward(const ScoringBatch& s, ScalarHead& head, const float* dscores) {
    check_same(model_, s);
    const int64_t H = model_.config().hidden_size, n = static_cast<int64_t>(src_.size());
    dsel_.resize(static_cast<size_t>(n * H));
    head.backward(dsel_.data(), dscores, sel_.data(), n);
    scatter_backward(src_);
}

void Scorer::critic_values(const ScoringBatch& s, const ScalarHead& head, float* values, bool for_backward) {
    check_batch(s);
    check_not_packed(s, "critic values");
    if (head.hidden != model_.config().hidden_size)
        fail("value head: width ", head.hidden, ", model hidden size ", model_.config().hidden_size);
    model_.forward(s.tokens.data(), s.mask.data(), s.B, s.T, for_backward);
    auto pos = response_positions(s);
    std::vector<int64_t> src(pos.size());
    for (size_t i = 0; i < pos.size(); ++i) src[i] = pos[i] - 1;  // V before the token
    gather(src);
    out_.resize(pos.size());
    head.forward(out_.data(), sel_.data(), static_cast<int64_t>(pos.size()));
    std::fill(values, values + s.B * s.T, 0.f);
    for (size_t i = 0; i < pos.size(); ++i) values[pos[i]] = out_[i];
}

void Scorer::critic_values_backward(const ScoringBatch& s, ScalarHead& head, const float* dvalues) {
    check_same(model_, s);
    auto pos = response_positions(s);
    PPOLAB_ASSERT(pos.size() == src_.size());
    const int64_t M = static_cast<int64_t>(pos.size()), H = model_.config().hidden_size;
    dout_.resize(pos.size());
    for (size_t i = 0; i < pos.size(); ++i) dout_[i] = dvalues[pos[i]];
    dsel_.resize(static_cast<size_t>(M * H));
    head.backward(dsel_.data(), dout_.data(), sel_.data(), M);
    scatter_backward(src_);
}

}  // namespace ppolab
