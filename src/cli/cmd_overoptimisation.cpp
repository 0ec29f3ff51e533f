// cmd_overoptimisation.cpp — `ppolab overoptimisation` (SPEC §12): gold and
// proxy of PPO's snapshots and of best-of-n from SFT against the exact KL.
#include <cmath>
#include <cstdio>

#include "cli/command.h"
#include "cli/stage_options.h"
#include "evaluation/overoptimisation.h"
#include "parallel/world.h"
#include "util/error.h"
#include "util/stopwatch.h"

namespace ppolab::cli {

namespace {

int run_overoptimisation(const Args& args) {
    args.allow_only(with_stage_options({}));
    StageOptions o = stage_options(args);
    const RunLayout run{o.run};
    const auto started = Clock::now();
    if (fs::exists(overoptimisation_path(run)))
        fail("refusing to overwrite ", overoptimisation_path(run).string(),
             " (overoptimisation writes it once; remove it to sample again)");
    OverOptSamples samples;
    {
        // Sampling, judge and KL: never gold/, never learn/.
        Study study = Study::open(o.config, o.run, o.model, "overoptimisation-sample", StageScope::eval);
        samples = overoptimisation_sample(study);
    }
    // The rubric: labels from gold/ (under mpirun: rank 0, which holds every sample).
    if (!parallel::world().writer()) {
        parallel::barrier();
        return 0;
    }
    const parallel::SoloScope alone;  // rank 0 alone while the others wait: no agreement collective
    Study study = Study::open(o.config, o.run, o.model, "overoptimisation-label", StageScope::all);
    const json doc = overoptimisation_label(study, samples);
    parallel::barrier();
    for (const json& p : doc["snapshots"])
        std::printf("iteration %4lld  %-32s  KL %.4f  sqrt(KL) %.4f  k1 %.4f  gold %.4f  proxy %.4f\n",
                    static_cast<long long>(p["iteration"].get<int64_t>()), p["policy"].get<std::string>().c_str(),
                    p["kl_exact"].get<double>(), std::sqrt(std::max(0.0, p["kl_exact"].get<double>())),
                    p["kl_k1"].get<double>(), p["gold"].get<double>(), p["proxy"].get<double>());
    const double seconds = since(started);
    std::printf("best-of-n: %lld SFT samples for each of %zu test prompts; %lld samples per prompt and point\n",
                static_cast<long long>(samples.n), samples.prompts.size(),
                static_cast<long long>(samples.samples_per_prompt));
    std::printf("wrote %s in %.1f s (durations: %s)\n", overoptimisation_path(run).c_str(), seconds,
                overoptimisation_timings_path(run).c_str());
    return 0;
}

}  // namespace

static Command overoptimisation_cmd(
    "overoptimisation",
    "overoptimisation --run DIR [--preset P] [--set K=V]  gold and proxy of SFT, the PPO snapshots and the final "
    "actor against the exact KL to SFT, and best-of-n samples from SFT",
    {}, run_overoptimisation,
    "Needs a finished continuous PPO (RUN/ppo/continuous.json, ppo/final/actor) and every snapshot its\n"
    "report lists (RUN/ppo/snapshots/iteration-NNNN, ppo.snapshot_every). For iteration 0 (sft/final), each\n"
    "snapshot and the last iteration (ppo/final/actor): evaluation.snapshot_samples temperature-1 samples\n"
    "per test prompt, judged (proxy), with the exact and k1 sequence KL to SFT; then evaluation.best_of_n\n"
    "SFT samples per test prompt, judged. Sampling reads corpus/eval, never gold/; the rubric (gold) runs\n"
    "afterwards with gold/ readable. Writes RUN/eval/overoptimisation.json (same run, same bytes) and\n"
    "RUN/eval/overoptimisation-timings.json. The output is written once, at the end: a killed run leaves\n"
    "no overoptimisation.json (at most a temporary, removed by the next write) and a rerun starts over.");

}  // namespace ppolab::cli
