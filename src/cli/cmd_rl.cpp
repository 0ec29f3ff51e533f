// cmd_rl.cpp — `ppolab rloo` and `ppolab grpo`, the critic-free group
// baselines (SPEC §12; training/rl.h). `grpo` is `rloo --set rl.advantage=grpo`.
#include <cstdio>

#include "cli/command.h"
#include "cli/stage_options.h"
#include "training/metric_names.h"
#include "training/rl.h"

namespace ppolab::cli {

// `advantage`: the one the command name fixes ("grpo": whatever rl.advantage
// says), or "" (rl.advantage as configured).
static int run_rl_stage(const Args& args, const std::string& advantage) {
    args.allow_only(with_stage_options({"mode"}));
    StageOptions o = stage_options(args);
    if (!advantage.empty()) o.config["rl"]["advantage"] = advantage;
    const StageMode mode = parse_stage_mode(args.get("mode", "continuous"));
    const std::string stage = o.config["rl"]["advantage"].get<std::string>();
    Study study = Study::open(o.config, o.run, o.model, stage, StageScope::learn);
    json r = run_rl(study, mode);
    std::printf("%s %s: %lld iterations, %lld updates, %lld responses in %.1f s\n", stage.c_str(),
                stage_mode_name(mode), static_cast<long long>(r["iterations"].get<int64_t>()),
                static_cast<long long>(r["updates"].get<int64_t>()),
                static_cast<long long>(r["responses"].get<int64_t>()), r["seconds"].get<double>());
    if (!r["history"].empty()) {
        const json& last = r["history"].back();
        std::printf("last iteration: score %.4f  kl %.4f  clipfrac %.3f\n", last[metric::kScores].get<double>(),
                    last[metric::kKl].get<double>(), last[metric::kClipFraction].get<double>());
    }
    std::printf("seconds per phase: %s\nwrote %s\n", r["seconds_per_phase"].dump().c_str(),
                study.run.report(stage, stage_mode_name(mode)).c_str());
    return 0;
}

static Command rloo_cmd("rloo",
                        "rloo --run DIR [--mode interrupt|continuous|resume] [--preset P] [--set rl.advantage=grpo]  "
                        "RLOO (or GRPO) against the frozen judge, no critic: RUN/rloo (RUN/grpo)",
                        {}, [](const Args& args) { return run_rl_stage(args, ""); });

static Command grpo_cmd("grpo",
                        "grpo --run DIR [--mode interrupt|continuous|resume] [--preset P] [--set k=v]  GRPO: "
                        "ppolab rloo with rl.advantage=grpo (RUN/grpo)",
                        {}, [](const Args& args) { return run_rl_stage(args, "grpo"); });

}  // namespace ppolab::cli
