#include "training/reward_model.h"

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

// Bradley–Terry loss of a chunk's pairs over the update's pair count.
class RewardObjective final : public SupervisedObjective {
public:
    RewardObjective(const Study& s, Role r, const FaultHooks& hooks)
        : study_(s), hooks_(hooks), role_(s, std::move(r)) {}

    Role& role() override { return role_.role; }
    const std::string& initial_identity() const { return role_.initial_identity; }

    double denominator(const std::vector<const SupervisedExample*>& group) const override {
        return static_cast<double>(group.size());
    }

    double loss_and_grad(const std::vector<const SupervisedExample*>& group, double denominator, json& trace,
                         const std::string& where, int64_t update) override {
        const std::vector<ScoringRow> rows = pair_rows(group);
        const int64_t n = static_cast<int64_t>(group.size());
        ScoringBatch b = study_.pair_batch(rows);  // each pair's prompt computed once
        std::vector<float> scores(static_cast<size_t>(2 * n)), dscores(scores.size());
        role_.scorer.reward_scores(b, *role_.role.head, scores.data(), true);
        if (hooks_.nonfinite("reward", "score", update)) scores[0] = std::numeric_limits<float>::quiet_NaN();
        check_finite(scores, where, "judge score");
        double loss =
            bradley_terry_loss(scores.data(), scores.data() + n, n, dscores.data(), dscores.data() + n, denominator);
        role_.scorer.reward_scores_backward(b, *role_.role.head, dscores.data());
        for (int64_t i = 0; i < n; ++i)
            trace.push_back({{"id", group[static_cast<size_t>(i)]->id},
                             {"chosen", scores[static_cast<size_t>(i)]},
                             {"rejected", scores[static_cast<size_t>(n + i)]}});
        return loss;
    }

    json validate(const std::vector<SupervisedExample>& rows) override {
        const size_t chunk = 16;
        double loss = 0;
        int64_t correct = 0, ties = 0;
        for (size_t i = 0; i < rows.size(); i += chunk) {
            const size_t end = std::min(rows.size(), i + chunk);
            const std::vector<ScoringRow> part = pair_rows(rows, i, end);
            const int64_t n = static_cast<int64_t>(end - i);
            ScoringBatch b = study_.pair_batch(part);
            std::vector<float> scores(static_cast<size_t>(2 * n));
            role_.scorer.reward_scores(b, *role_.role.head, scores.data(), false);
            loss += bradley_terry_loss(scores.data(), scores.data() + n, n, nullptr, nullptr) * static_cast<double>(n);
            for (int64_t k = 0; k < n; ++k) {
                correct += scores[k] > scores[n + k];
                ties += scores[k] == scores[n + k];
            }
        }
        const double count = static_cast<double>(rows.size());
        return {{"pairs", rows.size()},
                {"loss", loss / count},
                {"correct", correct},
                {"ties", ties},
                {"accuracy", static_cast<double>(correct) / count},
                {"used_for_selection", false}};
    }

private:
    const Study& study_;
    const FaultHooks& hooks_;
    RoleModel role_;
};

std::vector<SupervisedExample> encode_votes(const Study& s, const std::vector<VotePair>& pairs) {
    std::vector<SupervisedExample> out;
    for (const VotePair& p : pairs) {
        const std::vector<int32_t> prompt = s.encode_prompt(p.prompt);
        out.push_back({p.id, ScoringRow{prompt, p.chosen}, ScoringRow{prompt, p.rejected}});
    }
    return out;
}

}  // namespace

json run_reward_model(const Study& s, StageMode mode, const VoteData* votes) {
    if (!votes && fs::exists(s.run.feedback_labels()))
        fail(s.run.stage("reward").string(), " holds a judge learning from votes (", s.run.feedback_labels().string(),
             "); a run's judge learns from one source: use `ppolab reward --votes …` or a new run");
    StageLifecycle life(s.run, "reward", mode);
    const SupervisedSettings settings = SupervisedSettings::read(s.cfg, "reward");

    // 1. data: only learn/ (the guarded reader refuses anything else), or the votes
    const fs::path corpus = s.run.corpus();
    const Manifest manifest = load_manifest(s.reader(), corpus);
    SupervisedData data;
    data.rows =
        votes ? encode_votes(s, votes->train) : encode_pairs(s, load_pairs(s.reader(), corpus, PairSplit::train));
    data.validation = votes ? encode_votes(s, votes->validation)
                            : encode_pairs(s, load_pairs(s.reader(), corpus, PairSplit::validation));
    check_limits(s, data.rows, true);
    check_limits(s, data.validation, true);

    // 2. the role: the judge's adapters and scalar head
    Role role = make_role(s, "reward", RoleKind::reward, s.cfg.seed(s.cfg.reward.adapter_seed),
                          s.cfg.seed(s.cfg.reward.head_seed));
    data.data_identity = votes ? votes->data_identity : pairs_data_identity(s, manifest);
    data.sampler_stream = 2;
    data.denominator_kind = "pairs";
    RewardObjective objective(s, std::move(role), life.hooks());
    data.initial_identity = objective.initial_identity();

    // 3. the epochs, the exact state and the report
    return train_supervised(s, life, settings, objective, data);
}

json reward_test(const Study& s) {
    const fs::path out = s.run.reward_test();
    if (fs::exists(out)) fail("refusing to overwrite ", out.string());
    FrozenJudge judge(s, s.run.final_dir("reward"));
    const std::vector<PreferencePair> pairs = load_pairs(s.reader(), s.run.corpus(), PairSplit::test);
    json rows = json::array();
    int64_t correct = 0, ties = 0;
    for (const PreferencePair& p : pairs) {
        const ScoringRow c = s.encode_row(p.prompt, p.chosen), r = s.encode_row(p.prompt, p.rejected);
        const FrozenJudge::Scores sc = judge.score(c.prompt, c.response, r.response);
        correct += sc.correct();
        ties += sc.tie();
        rows.push_back({{"id", p.id},
                        {"chosen", p.chosen},
                        {"rejected", p.rejected},
                        {"chosen_score", sc.chosen},
                        {"rejected_score", sc.rejected},
                        {"correct", sc.correct()},
                        {"tie", sc.tie()}});
    }
    judge.check_unchanged("reward-test");
    const double n = static_cast<double>(pairs.size());
    json result{{"pairs", pairs.size()},
                {"correct", correct},
                {"ties", ties},
                {"accuracy", n > 0 ? static_cast<double>(correct) / n : 0.0},
                {"judge_learned_identity", judge.identity()},
                {"used_for_selection", false},
                {"score_name", "predicted simulated-preference score (not human utility)"},
                {"rows", rows}};
    write_json_atomic(out, result);
    return result;
}

}  // namespace ppolab
