// run_layout.h — where everything of a study lives inside a run folder.
//
//   RUN/config.json            effective config of the study (written once)
//   RUN/corpus/                prepare: learn/ eval/ gold/ manifest.json
//   RUN/base/                  pretrain (tiny preset): a Hugging Face folder
//                              (config.json, model.safetensors, tokenizer.json,
//                              generation_config.json) + pretrain.json
//   RUN/base.checkpoints/      pretrain.state.gz while pretraining runs (crash safety)
//   RUN/sft/ RUN/reward/ RUN/ppo/ RUN/dpo/ RUN/rloo/ RUN/grpo/ (baselines, SPEC §12)
//   RUN/ppo-whiten/ RUN/ppo-vclip/ RUN/ppo-k3/ (PPO with one design switch on: as RUN/ppo/)
//       <mode>.state.gz        resume state after --mode interrupt|continuous|resume
//       <mode>.json            stage report of that mode (identity, history, seconds…)
//       checkpoints/           <mode>.state.gz: periodic resume checkpoints while
//                              the stage runs (PPO also <mode>.report-extras.json);
//                              removed once <mode>.json is written (crash_checkpoints.h)
//       final/                 learned state of the continuous run (safetensors + peft/;
//                              PPO: final/actor, final/critic)
//       resume-check.json      PASS/FAIL with both sha256
//   RUN/reward/reward-test.json   judge accuracy on the test pairs
//   RUN/reward/feedback.json   judge from votes: train/validation labels + provenance
//   RUN/reward/vote-test.json  judge from votes: result on the held-out test votes
//   RUN/feedback/test_votes.json  the held-out test votes (outside learn/ scopes)
//   RUN/ppo/rollouts/<mode>/   iteration-NNN.json: every rollout with its per-token table
//   RUN/ppo/snapshots/         iteration-NNNN/: the continuous run's actor every
//                              ppo.snapshot_every iterations (as final/actor; not the last)
//   RUN/ppo/<mode>.metrics.jsonl  per-iteration metrics (TRL names) of that mode's iterations
//   RUN/tensorboard/<stage>/<mode>/  the same metrics (and SFT's, the judge's) as TensorBoard events
//   RUN/eval/                  evaluate: generations and rubric verdicts, no
//                              durations (timings.json holds them; checkpoints/:
//                              rows generated so far, while it runs);
//                              overoptimisation.json: samples of SFT, the snapshots
//                              and the final actor with exact KL, proxy and gold
//                              (its durations: overoptimisation-timings.json)
//   RUN/exercise.json, RUN/report.html, RUN/results.json
//
// A set of K > 1 replicates (replicates.count, `ppolab run --replicates K`)
// keeps one corpus (and, unless replicates.repretrain_base, one base) in RUN
// and each chain in RUN/replicates/<k>/ with the layout above (sft/, reward/,
// ppo/, eval/, exercise.json, report.html; base/ of its own when it
// pretrains one); RUN/findings.json, RUN/report.html and RUN/results.json
// are the set's. A stage reaches replicate k with `--replicate k`.
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace ppolab {

// The baselines to PPO a run may train (SPEC §12), each in RUN/<name>/:
// DPO, RLOO, GRPO, and PPO with one design switch on. The one list the read
// scopes, evaluation, the comparison and resume-check take them from.
inline const std::vector<std::string>& baseline_stages() {
    static const std::vector<std::string> stages = {"dpo", "rloo", "grpo", "ppo-whiten", "ppo-vclip", "ppo-k3"};
    return stages;
}

struct RunLayout {
    std::filesystem::path root;        // this chain's folder: RUN, or RUN/replicates/<k>
    std::filesystem::path study_root;  // a replicate's RUN (its corpus and shared base); empty: root itself
    bool own_base = false;             // a replicate that pretrains its own base (replicates.repretrain_base)

    RunLayout() = default;
    explicit RunLayout(std::filesystem::path run, std::filesystem::path study = {}, bool own = false)
        : root(std::move(run)), study_root(std::move(study)), own_base(own) {}

    // Replicate k of the study in `study` (RUN/replicates/<k>).
    static RunLayout replicate(const std::filesystem::path& study, int64_t k, bool own_base) {
        return RunLayout{study / "replicates" / std::to_string(k), study, own_base};
    }
    // The study's folder: the one its lock and its corpus belong to.
    std::filesystem::path study() const { return study_root.empty() ? root : study_root; }
    bool is_replicate() const { return !study_root.empty(); }

    std::filesystem::path config() const { return root / "config.json"; }
    std::filesystem::path corpus() const { return study() / "corpus"; }
    std::filesystem::path base() const { return (own_base ? root : study()) / "base"; }
    std::filesystem::path stage(const std::string& name) const { return root / name; }  // sft|reward|ppo|dpo
    std::filesystem::path state(const std::string& stage_name, const std::string& mode) const {
        return stage(stage_name) / (mode + ".state.gz");
    }
    std::filesystem::path report(const std::string& stage_name, const std::string& mode) const {
        return stage(stage_name) / (mode + ".json");
    }
    std::filesystem::path final_dir(const std::string& stage_name) const { return stage(stage_name) / "final"; }
    std::filesystem::path resume_check(const std::string& stage_name) const {
        return stage(stage_name) / "resume-check.json";
    }
    // TensorBoard event files of a stage's mode (training/tensorboard.h).
    std::filesystem::path tensorboard(const std::string& stage_name, const std::string& mode) const {
        return root / "tensorboard" / stage_name / mode;
    }
    // PPO's files; `ppo` is the stage's folder name: "ppo", or a PPO with
    // design switches on ("ppo-whiten", …: PpoSettings::stage()).
    std::filesystem::path ppo_metrics(const std::string& mode, const std::string& ppo = "ppo") const {
        return stage(ppo) / (mode + ".metrics.jsonl");
    }
    std::filesystem::path ppo_rollouts(const std::string& mode, const std::string& ppo = "ppo") const {
        return stage(ppo) / "rollouts" / mode;
    }
    std::filesystem::path snapshots(const std::string& ppo = "ppo") const { return stage(ppo) / "snapshots"; }
    std::filesystem::path snapshot_dir(int64_t iteration, const std::string& ppo = "ppo") const {
        char name[32];
        std::snprintf(name, sizeof name, "iteration-%04lld", static_cast<long long>(iteration));
        return snapshots(ppo) / name;
    }
    std::filesystem::path eval() const { return root / "eval"; }
    std::filesystem::path feedback_labels() const { return stage("reward") / "feedback.json"; }
    std::filesystem::path feedback_test() const { return root / "feedback" / "test_votes.json"; }
    std::filesystem::path vote_test() const { return stage("reward") / "vote-test.json"; }
    std::filesystem::path pretrain_report() const { return base() / "pretrain.json"; }
    std::filesystem::path reward_test() const { return stage("reward") / "reward-test.json"; }
    std::filesystem::path exercise() const { return root / "exercise.json"; }
    std::filesystem::path run_state() const { return root / "run-state.json"; }
    std::filesystem::path results() const { return root / "results.json"; }
    std::filesystem::path report_html() const { return root / "report.html"; }
    std::filesystem::path findings() const { return study() / "findings.json"; }
};

}  // namespace ppolab
