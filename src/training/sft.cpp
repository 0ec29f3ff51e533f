#include "training/sft.h"

#include <algorithm>
#include <limits>

#include "data/corpus.h"
#include "model/scoring.h"
#include "training/losses.h"
#include "training/roles.h"
#include "training/study_config.h"
#include "training/supervised_stage.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ppolab {

namespace {

// Summed token loss of a chunk / the update's active tokens.
class SftObjective final : public SupervisedObjective {
public:
    SftObjective(const Study& s, Role r, const FaultHooks& hooks) : study_(s), hooks_(hooks), role_(s, std::move(r)) {}

    Role& role() override { return role_.role; }
    const std::string& initial_identity() const { return role_.initial_identity; }

    double denominator(const std::vector<const SupervisedExample*>& group) const override {
        double tokens = 0;
        for (const SupervisedExample* e : group) tokens += static_cast<double>(e->first.response.size());
        return tokens;
    }

    double loss_and_grad(const std::vector<const SupervisedExample*>& group, double denominator, json& trace,
                         const std::string& where, int64_t update) override {
        std::vector<ScoringRow> rows;
        for (const SupervisedExample* e : group) rows.push_back(e->first);
        ScoringBatch b = study_.batch(rows);
        std::vector<float> logp(static_cast<size_t>(b.B * b.T)), dlogp(logp.size());
        role_.scorer.response_logprobs(b, logp.data(), true);
        if (hooks_.nonfinite("sft", "loss", update)) logp[0] = std::numeric_limits<float>::quiet_NaN();
        double loss = sft_token_loss(logp.data(), b.response_mask.data(), b.B * b.T, denominator, dlogp.data());
        check_finite(loss, where, "loss (token cross-entropy)");
        role_.scorer.response_logprobs_backward(b, dlogp.data());
        for (size_t i = 0; i < group.size(); ++i) {
            double sum = 0;
            for (int64_t t = 0; t < b.T; ++t)
                if (b.response_mask[i * b.T + t]) sum += logp[i * b.T + t];
            trace.push_back({{"id", group[i]->id}, {"tokens", group[i]->first.response.size()}, {"sum_logprob", sum}});
        }
        return loss;
    }

    json validate(const std::vector<SupervisedExample>& rows) override {
        const size_t chunk = 16;
        double total = 0;
        int64_t tokens = 0;
        for (size_t i = 0; i < rows.size(); i += chunk) {
            std::vector<ScoringRow> part;
            for (size_t j = i; j < std::min(rows.size(), i + chunk); ++j) part.push_back(rows[j].first);
            ScoringBatch b = study_.batch(part);
            std::vector<float> logp(static_cast<size_t>(b.B * b.T));
            role_.scorer.response_logprobs(b, logp.data(), false);
            for (int64_t k = 0; k < b.B * b.T; ++k)
                if (b.response_mask[k]) {
                    total += logp[k];
                    ++tokens;
                }
        }
        return {{"rows", rows.size()},
                {"tokens", tokens},
                {"sum_logprob", total},
                {"mean_token_logprob", total / static_cast<double>(std::max<int64_t>(tokens, 1))},
                {"used_for_selection", false}};
    }

private:
    const Study& study_;
    const FaultHooks& hooks_;
    RoleModel role_;
};

}  // namespace

json run_sft(const Study& s, StageMode mode) {
    StageLifecycle life(s.run, "sft", mode);
    const SupervisedSettings settings = SupervisedSettings::read(s.cfg, "sft");

    // 1. data: only learn/ (the guarded reader refuses anything else)
    const fs::path corpus = s.run.corpus();
    const Manifest manifest = load_manifest(s.reader(), corpus);
    SupervisedData data;
    for (const Demonstration& d : load_demonstrations(s.reader(), corpus))
        data.rows.push_back({d.id, s.encode_row(d.prompt, d.response), {}});
    for (const PreferencePair& p : load_pairs(s.reader(), corpus, PairSplit::validation))
        data.validation.push_back({p.id, s.encode_row(p.prompt, p.chosen), {}});
    check_limits(s, data.rows, false);
    check_limits(s, data.validation, false);

    // 2. the role: LoRA adapters on the base
    Role role = make_role(s, "sft", RoleKind::policy, s.cfg.seed(s.cfg.sft.adapter_seed));
    data.data_identity =
        corpus_files_identity(s, manifest, {"learn/demonstrations.jsonl", "learn/validation_pairs.jsonl"});
    data.sampler_stream = 1;
    data.denominator_kind = "active_response_tokens";
    SftObjective objective(s, std::move(role), life.hooks());
    data.initial_identity = objective.initial_identity();

    // 3. the epochs, the exact state and the report
    return train_supervised(s, life, settings, objective, data);
}

}  // namespace ppolab
