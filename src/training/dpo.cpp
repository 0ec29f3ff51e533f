#include "training/dpo.h"

#include <algorithm>
#include <limits>

#include "data/corpus.h"
#include "model/scoring.h"
#include "training/losses.h"
#include "training/roles.h"
#include "training/study_config.h"
#include "training/supervised_stage.h"
#include "util/error.h"

namespace ppolab {

namespace {

// Each answer's summed response log-probability from a packed pair batch
// (one row per pair: the chosen answer mask 2, the rejected mask 3): the
// chosen answer of pair i at [i], the rejected at [n + i].
std::vector<double> answer_sums(const ScoringBatch& b, const std::vector<float>& logp) {
    std::vector<double> sums(static_cast<size_t>(2 * b.B), 0.0);
    for (int64_t i = 0; i < b.B; ++i)
        for (int64_t t = 0; t < b.T; ++t)
            if (b.response_mask[i * b.T + t])
                sums[static_cast<size_t>((b.mask[i * b.T + t] == 3 ? b.B : 0) + i)] += logp[i * b.T + t];
    return sums;
}

// Mean DPO loss over the pairs of a group; the policy learns, the reference
// (the frozen SFT) only scores.
class DpoObjective final : public SupervisedObjective {
public:
    // Both roles from the SFT's final/: the policy to learn, the reference frozen.
    DpoObjective(const Study& s, const fs::path& sft, double beta, const FaultHooks& hooks)
        : study_(s),
          hooks_(hooks),
          beta_(beta),
          policy_(s, sft, "dpo", RoleKind::policy),
          reference_(s, sft, "reference", RoleKind::policy) {}

    Role& role() override { return policy_.role; }
    const std::string& initial_identity() const { return policy_.initial_identity; }
    const std::string& reference_identity() const { return reference_.initial_identity; }

    // Error if the reference's adapters changed (they never should).
    void check_reference_unchanged() {
        if (reference_.changed()) fail("dpo: the frozen reference changed");
    }

    double denominator(const std::vector<const SupervisedExample*>& group) const override {
        return static_cast<double>(group.size());
    }

    double loss_and_grad(const std::vector<const SupervisedExample*>& group, double denominator, json& trace,
                         const std::string& where, int64_t update) override {
        // One packed row per pair, [prompt | chosen | rejected]: the prompt computed once (scoring.h).
        const std::vector<ScoringRow> rows = pair_rows(group);
        const int64_t n = static_cast<int64_t>(group.size());
        const ScoringBatch b = study_.pair_batch(rows);
        std::vector<float> logp(static_cast<size_t>(b.B * b.T)), ref(logp.size());
        policy_.scorer.response_logprobs(b, logp.data(), true);
        reference_.scorer.response_logprobs(b, ref.data(), false);
        if (hooks_.nonfinite("dpo", "loss", update)) logp[0] = std::numeric_limits<float>::quiet_NaN();
        const std::vector<double> pi = answer_sums(b, logp), rho = answer_sums(b, ref);
        check_finite(pi, where, "policy log-probability");
        std::vector<double> dchosen(static_cast<size_t>(n)), drejected(static_cast<size_t>(n));
        std::vector<DpoPairTerms> terms(static_cast<size_t>(n));
        const double loss = dpo_loss(pi.data(), pi.data() + n, rho.data(), rho.data() + n, n, beta_, dchosen.data(),
                                     drejected.data(), terms.data(), denominator);
        check_finite(loss, where, "loss (DPO)");
        // ∂loss/∂logp of every token of an answer is that answer's ∂loss/∂π.
        std::vector<float> dlogp(logp.size(), 0.f);
        for (int64_t i = 0; i < b.B; ++i)
            for (int64_t t = 0; t < b.T; ++t)
                if (b.response_mask[i * b.T + t])
                    dlogp[i * b.T + t] = static_cast<float>(b.mask[i * b.T + t] == 3 ? drejected[static_cast<size_t>(i)]
                                                                                     : dchosen[static_cast<size_t>(i)]);
        policy_.scorer.response_logprobs_backward(b, dlogp.data());
        for (int64_t i = 0; i < n; ++i) {
            const DpoPairTerms& t = terms[static_cast<size_t>(i)];
            trace.push_back({{"id", group[static_cast<size_t>(i)]->id},
                             {"chosen_reward", t.chosen_reward},
                             {"rejected_reward", t.rejected_reward},
                             {"margin", t.margin}});
        }
        return loss;
    }

    json validate(const std::vector<SupervisedExample>& rows) override {
        const size_t chunk = 16;
        double loss = 0, margin = 0, chosen = 0, rejected = 0;
        int64_t correct = 0, ties = 0;
        for (size_t i = 0; i < rows.size(); i += chunk) {
            const size_t end = std::min(rows.size(), i + chunk);
            const std::vector<ScoringRow> part = pair_rows(rows, i, end);
            const int64_t n = static_cast<int64_t>(end - i);
            const ScoringBatch b = study_.pair_batch(part);
            std::vector<float> logp(static_cast<size_t>(b.B * b.T)), ref(logp.size());
            policy_.scorer.response_logprobs(b, logp.data(), false);
            reference_.scorer.response_logprobs(b, ref.data(), false);
            const std::vector<double> pi = answer_sums(b, logp), rho = answer_sums(b, ref);
            std::vector<DpoPairTerms> terms(static_cast<size_t>(n));
            loss += dpo_loss(pi.data(), pi.data() + n, rho.data(), rho.data() + n, n, beta_, nullptr, nullptr,
                             terms.data()) *
                    static_cast<double>(n);
            for (const DpoPairTerms& t : terms) {
                correct += t.margin > 0;
                ties += t.margin == 0;
                margin += t.margin;
                chosen += t.chosen_reward;
                rejected += t.rejected_reward;
            }
        }
        const double count = static_cast<double>(std::max<size_t>(rows.size(), 1));
        return {{"pairs", rows.size()},
                {"loss", loss / count},
                {"reward_accuracy", static_cast<double>(correct) / count},
                {"reward_ties", ties},
                {"mean_margin", margin / count},
                {"mean_chosen_reward", chosen / count},
                {"mean_rejected_reward", rejected / count},
                {"used_for_selection", false}};
    }

private:
    const Study& study_;
    const FaultHooks& hooks_;
    double beta_;
    RoleModel policy_, reference_;
};

}  // namespace

json run_dpo(const Study& s, StageMode mode) {
    const fs::path sft = s.run.final_dir("sft");
    if (!fs::exists(sft / "learned.safetensors"))
        fail("dpo: no SFT policy at ", sft.string(), " (run `ppolab sft --run RUN --mode continuous` first)");
    StageLifecycle life(s.run, "dpo", mode);
    const SupervisedSettings settings = SupervisedSettings::read(s.cfg, "dpo");

    // 1. data: the corpus's train pairs (validation pairs for the per-epoch
    //    loss), only learn/ (the guarded reader refuses anything else)
    const fs::path corpus = s.run.corpus();
    const Manifest manifest = load_manifest(s.reader(), corpus);
    SupervisedData data;
    data.rows = encode_pairs(s, load_pairs(s.reader(), corpus, PairSplit::train));
    data.validation = encode_pairs(s, load_pairs(s.reader(), corpus, PairSplit::validation));
    check_limits(s, data.rows, true);
    check_limits(s, data.validation, true);

    // 2. the roles: the policy starts as the SFT adapters, the reference is the frozen SFT
    DpoObjective objective(s, sft, s.cfg.dpo.beta, life.hooks());
    data.initial_identity = objective.initial_identity();
    data.data_identity = pairs_data_identity(s, manifest);
    data.data_identity["reference_learned_identity"] = objective.reference_identity();
    data.sampler_stream = 4;
    data.denominator_kind = "pairs";

    // 3. the epochs, the exact state and the report
    json report = train_supervised(s, life, settings, objective, data);
    objective.check_reference_unchanged();
    return report;
}

}  // namespace ppolab
