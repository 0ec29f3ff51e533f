// cmd_evaluate.cpp — `ppolab evaluate` and `ppolab exercise` (SPEC §7).
#include <cstdio>

#include "cli/command.h"
#include "cli/stage_options.h"
#include "evaluation/evaluate.h"
#include "evaluation/exercise.h"
#include "parallel/world.h"
#include "util/error.h"
#include "util/stopwatch.h"

namespace ppolab::cli {

namespace {

void print_metrics(const std::string& policy, const json& populations) {
    for (const char* name : {"test", "probe_rows", "probe_unique_contexts", "all_rows", "all_unique_contexts",
                             "validation", "validation_unique_contexts"}) {
        if (!populations.contains(name)) continue;
        const json& m = populations[name];
        auto num = [&](const char* key) {
            return m[key].is_null() ? std::string("n/a") : std::to_string(m[key].get<double>());
        };
        std::printf(
            "%-4s %-26s rows %3lld  success %s  recognized %s  relevant|rec %s  certainty|rec %s  no-EOS %lld  "
            "mean tokens %s  mean learned reward %s  mean log-ratio %s\n",
            policy.c_str(), name, static_cast<long long>(m["rows"].get<int64_t>()),
            num("rubric_success_rate_all_outputs").c_str(), num("recognized_rate").c_str(),
            num("relevant_rate_recognized_denominator").c_str(),
            num("unsupported_certainty_rate_recognized_denominator").c_str(),
            static_cast<long long>(m["without_eos"].get<int64_t>()), num("mean_response_tokens_eos_included").c_str(),
            num("mean_learned_reward").c_str(), num("mean_sampled_actor_reference_logratio").c_str());
    }
}

int run_evaluate(const Args& args) {
    args.allow_only(with_stage_options({"population"}));
    StageOptions o = stage_options(args);
    const EvalSet set = parse_eval_set(args.get("population", "held-out"));
    const RunLayout run{o.run};
    // The metrics are written last: an evaluation without them is unfinished and continues.
    if (fs::exists(metrics_path(run, set)))
        fail("refusing to overwrite ", metrics_path(run, set).string(), " (evaluate writes it once)");
    {
        // Generation: never gold/ (nor learn/ for the held-out set).
        // On validation prompts the scope is learning's, plus this evaluation's own files in eval/.
        const std::vector<fs::path> own =
            set == EvalSet::validation ? evaluation_outputs(run, set) : std::vector<fs::path>{};
        Study study = Study::open(o.config, o.run, o.model, "evaluate-generate", evaluation_generation_scope(set), own);
        for (const std::string& policy : evaluation_policies(run, set)) {
            const auto started = Clock::now();
            json g = evaluate_generate(study, set, policy);
            const double seconds = since(started);
            std::printf("%s: %lld generations over %lld distinct prompts in %.1f s -> %s\n", policy.c_str(),
                        static_cast<long long>(g["rows"].get<int64_t>()),
                        static_cast<long long>(g["distinct_prompts"].get<int64_t>()), seconds,
                        generations_path(run, set, policy).c_str());
        }
    }
    // Scoring: labels from gold/ (under mpirun: rank 0, the generations being whole on every rank).
    if (!parallel::world().writer()) {
        parallel::barrier();
        return 0;
    }
    const parallel::SoloScope alone;  // rank 0 alone while the others wait: no agreement collective
    Study study = Study::open(o.config, o.run, o.model, "evaluate-score", StageScope::all);
    json m = evaluate_score(study, set);
    parallel::barrier();
    for (const std::string& policy : evaluation_policies(run, set)) print_metrics(policy, m[policy]);
    std::printf("wrote %s\n", metrics_path(run, set).c_str());
    return 0;
}

int run_exercise_cmd(const Args& args) {
    args.allow_only(with_stage_options({}));
    StageOptions o = stage_options(args);
    Study study = Study::open(o.config, o.run, o.model, "exercise", StageScope::all);
    json r = run_exercise(study);
    const json& s = r["summary"];
    std::printf(
        "frozen judge on %lld probe candidates (%lld contexts): wrong+polite outranks correct+plain in %lld; "
        "mean politeness delta correct %.4f, wrong %.4f\n",
        static_cast<long long>(s["candidates"].get<int64_t>()), static_cast<long long>(s["contexts"].get<int64_t>()),
        static_cast<long long>(s["wrong_polite_outranks_correct_plain_contexts"].get<int64_t>()),
        s["mean_correct_politeness_delta"].get<double>(), s["mean_incorrect_politeness_delta"].get<double>());
    std::printf("judge and %zu main artefacts unchanged (sha256)\nwrote %s\n", r["artefact_sha256"].size(),
                study.run.exercise().c_str());
    return 0;
}

}  // namespace

static Command evaluate_cmd("evaluate",
                            "evaluate --run DIR [--population validation] [--preset P]  greedy held-out generations "
                            "(SFT, PPO), rubric verdicts, metrics",
                            {}, run_evaluate);

static Command exercise_cmd("exercise",
                            "exercise --run DIR   the frozen judge on the 80 probe candidates (politeness deltas)", {},
                            run_exercise_cmd);

}  // namespace ppolab::cli
