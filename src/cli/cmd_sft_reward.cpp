// cmd_sft_reward.cpp — the supervised stages `ppolab sft`, `ppolab reward`,
// `ppolab dpo`, and `ppolab reward-test`, `ppolab resume-check` (SPEC §3, §6, §12).
#include <algorithm>
#include <cstdio>

#include "cli/command.h"
#include "cli/stage_options.h"
#include "parallel/world.h"
#include "training/config_types.h"
#include "training/dpo.h"
#include "training/feedback_stage.h"
#include "training/resume_check.h"
#include "training/reward_model.h"
#include "training/sft.h"
#include "training/study_config.h"
#include "util/error.h"

namespace ppolab::cli {

// `stage` is "sft", "reward" (the judge from the corpus pairs) or "dpo".
static int run_supervised(const Args& args, const std::string& stage) {
    args.allow_only(with_stage_options({"mode"}));
    StageOptions o = stage_options(args);
    const StageMode mode = parse_stage_mode(args.get("mode", "continuous"));
    Study study = Study::open(o.config, o.run, o.model, stage, StageScope::learn);
    json report = stage == "sft"   ? run_sft(study, mode)
                  : stage == "dpo" ? run_dpo(study, mode)
                                   : run_reward_model(study, mode);
    const json& last = report["validation_history"].empty() ? json() : report["validation_history"].back();
    std::printf("%s %s: %lld updates in %.1f s (%.3f s/update); validation %s\n", stage.c_str(), stage_mode_name(mode),
                static_cast<long long>(report["updates"].get<int64_t>()), report["seconds"].get<double>(),
                report["seconds_per_update"].get<double>(), last.dump().c_str());
    std::printf("wrote %s\n", study.run.report(stage, stage_mode_name(mode)).c_str());
    return 0;
}

static Command dpo_cmd(
    "dpo",
    "dpo --run DIR [--mode interrupt|continuous|resume] [--preset P] [--set k=v]  DPO from SFT on the train pairs "
    "(reference: the frozen SFT)",
    {}, [](const Args& a) { return run_supervised(a, "dpo"); });

static Command sft_cmd(
    "sft", "sft --run DIR [--mode interrupt|continuous|resume] [--preset P] [--set k=v]  supervised fine-tuning (LoRA)",
    {}, [](const Args& a) { return run_supervised(a, "sft"); });

// The judge from votes (SPEC §8): every rule is checked before anything is written.
static int run_reward_votes(const Args& args) {
    args.allow_only(with_stage_options({"mode", "votes", "candidates", "feedback-kind"}));
    if (parallel::world().size > 1)
        fail(
            "reward --votes runs as one process (it writes the labels it learns from); under mpirun only the "
            "judge from the corpus pairs is data-parallel");
    StageOptions o = stage_options(args);
    const StageMode mode = parse_stage_mode(args.get("mode", "continuous"));
    std::vector<fs::path> votes;
    for (const std::string& v : args.all("votes")) votes.emplace_back(v);
    for (const std::string& v : args.positional()) votes.emplace_back(v);  // --votes A B C
    if (!args.has("candidates"))
        fail("reward --votes needs --candidates FILE (the candidate file the votes are about)");
    const std::string kind = args.get("feedback-kind", StudyConfig::parse(o.config).feedback.kind);
    if (kind != "human" && kind != "ai") fail("--feedback-kind must be human or ai, got '", kind, "'");
    Study study = Study::open(o.config, o.run, o.model, "reward", StageScope::learn);
    PreparedVotes prepared = prepare_votes(study, mode, args.get("candidates"), votes, kind);
    const json& counts = prepared.collection.provenance["counts"];
    std::printf(
        "votes (%s): %lld train, %lld validation, %lld test binary labels; %lld ties and %lld rejects counted, "
        "not trained on\n",
        kind.c_str(), static_cast<long long>(counts["train"].get<int64_t>()),
        static_cast<long long>(counts["validation"].get<int64_t>()),
        static_cast<long long>(counts["test"].get<int64_t>()), static_cast<long long>(prepared.collection.ties),
        static_cast<long long>(prepared.collection.rejects));
    json report = run_reward_from_votes(study, mode, prepared);
    const json& last = report["validation_history"].empty() ? json() : report["validation_history"].back();
    std::printf("reward %s (votes): %lld updates in %.1f s; validation votes %s\nwrote %s\n", stage_mode_name(mode),
                static_cast<long long>(report["updates"].get<int64_t>()), report["seconds"].get<double>(),
                last.dump().c_str(), study.run.report("reward", stage_mode_name(mode)).c_str());
    return 0;
}

static Command reward_cmd("reward",
                          "reward --run DIR [--mode interrupt|continuous|resume] [--preset P]  Bradley-Terry judge; "
                          "with --votes FILE... --candidates FILE [--feedback-kind human|ai]: from votes (SPEC §8)",
                          {}, [](const Args& a) {
                              return a.has("votes") ? run_reward_votes(a) : run_supervised(a, "reward");
                          });

static Command reward_test_cmd(
    "reward-test",
    "reward-test --run DIR          judge accuracy on the 180 held-out test pairs (and on the test votes of a judge "
    "from votes)",
    {}, [](const Args& args) {
        args.allow_only(with_stage_options({}));
        StageOptions o = stage_options(args);
        Study study = Study::open(o.config, o.run, o.model, "reward-test", StageScope::all);
        json r = reward_test(study);
        std::printf("judge on %lld test pairs: %lld correct, %lld ties, accuracy %.4f\n",
                    static_cast<long long>(r["pairs"].get<int64_t>()),
                    static_cast<long long>(r["correct"].get<int64_t>()),
                    static_cast<long long>(r["ties"].get<int64_t>()), r["accuracy"].get<double>());
        if (judge_learns_from_votes(study.run)) {
            json v = vote_test(study);
            std::printf(
                "judge on %lld held-out test votes: %lld correct, %lld ties, pair loss %.4f, accuracy %.4f\nwrote %s\n",
                static_cast<long long>(v["examples"].get<int64_t>()),
                static_cast<long long>(v["correct"].get<int64_t>()), static_cast<long long>(v["ties"].get<int64_t>()),
                v["pair_loss"].get<double>(), v["accuracy"].get<double>(), study.run.vote_test().c_str());
        }
        return 0;
    });

static Command resume_check_cmd(
    "resume-check",
    "resume-check sft|reward|ppo|dpo|rloo|grpo|ppo-<switch> --run DIR [--replicate K]   bitwise comparison of "
    "continuous and resumed states\n"
    "                            | resume-check --states A.state.gz B.state.gz   the same for any two state files",
    {"states"}, [](const Args& args) {
        if (args.has("states")) {
            args.allow_only({"states"});
            if (args.positional().size() != 2)
                fail("resume-check --states needs two state files, got ", args.positional().size());
            json r = compare_state_files(args.positional()[0], args.positional()[1]);
            std::printf("resume-check --states: %s\n  %s %s\n  %s %s\n%s", r["status"].get<std::string>().c_str(),
                        r["first_sha256"].get<std::string>().c_str(), r["first_file"].get<std::string>().c_str(),
                        r["second_sha256"].get<std::string>().c_str(), r["second_file"].get<std::string>().c_str(),
                        r["status"] == "PASS"
                            ? ""
                            : ("  first difference: " + r["first_difference"].get<std::string>() + "\n").c_str());
            return r["status"] == "PASS" ? 0 : 1;
        }
        args.allow_only({"run", "replicate"});
        std::vector<std::string> stages = {"sft", "reward", "ppo"};
        stages.insert(stages.end(), baseline_stages().begin(), baseline_stages().end());
        std::string names;
        for (const std::string& n : stages) names += (names.empty() ? "" : ", ") + n;
        if (args.positional().size() != 1) fail("resume-check needs one stage: ", names);
        const std::string stage = args.positional()[0];
        if (std::find(stages.begin(), stages.end(), stage) == stages.end())
            fail("resume-check: stage must be one of ", names, "; got '", stage, "'");
        RunLayout run{args.get("run", "runs/default")};
        if (args.has("replicate")) {
            const int64_t k = args.get_int("replicate", 0);
            if (k < 0) fail("--replicate ", k, ": expected a replicate number >= 0");
            run = RunLayout::replicate(run.root, k, false);
        }
        const RunLock lock = open_run_folder(run.study(), RunAccess::write);  // writes RUN/<stage>/resume-check.json
        json r = resume_check(run, stage);
        std::printf("resume-check %s: %s\n  continuous %s\n  resume     %s\n%s", stage.c_str(),
                    r["status"].get<std::string>().c_str(), r["continuous_sha256"].get<std::string>().c_str(),
                    r["resume_sha256"].get<std::string>().c_str(),
                    r["status"] == "PASS"
                        ? ""
                        : ("  first difference: " + r["first_difference"].get<std::string>() + "\n").c_str());
        return r["status"] == "PASS" ? 0 : 1;
    });

}  // namespace ppolab::cli
