// cmd_ppo.cpp — `ppolab ppo` (SPEC §4–§6).
#include <cstdio>

#include "cli/command.h"
#include "cli/stage_options.h"
#include "training/config_types.h"
#include "training/metric_names.h"
#include "training/ppo.h"

namespace ppolab::cli {

static Command ppo_cmd("ppo",
                       "ppo --run DIR [--mode interrupt|continuous|resume] [--preset P] [--set ppo.iterations=N]  PPO "
                       "against the frozen judge (with a design switch on, e.g. --set ppo.whiten_advantages=true: "
                       "RUN/ppo-whiten)",
                       {}, [](const Args& args) {
                           args.allow_only(with_stage_options({"mode"}));
                           StageOptions o = stage_options(args);
                           const StageMode mode = parse_stage_mode(args.get("mode", "continuous"));
                           const std::string stage = PpoSettings::read(StudyConfig::parse(o.config)).stage();
                           Study study = Study::open(o.config, o.run, o.model, stage, StageScope::learn);
                           json r = run_ppo(study, mode);
                           const json& last = r["history"].empty() ? json() : r["history"].back();
                           std::printf("ppo %s: %lld iterations, %lld updates per optimiser in %.1f s\n",
                                       stage_mode_name(mode), static_cast<long long>(r["iterations"].get<int64_t>()),
                                       static_cast<long long>(r["updates_per_optimizer"].get<int64_t>()),
                                       r["seconds"].get<double>());
                           if (!last.is_null())
                               std::printf("last iteration: score %.4f  kl %.4f  value loss %.4f  clipfrac %.3f\n",
                                           last[metric::kScores].get<double>(), last[metric::kKl].get<double>(),
                                           last[metric::kValueLoss].get<double>(),
                                           last[metric::kClipFraction].get<double>());
                           std::printf("seconds per phase: %s\nwrote %s\n", r["seconds_per_phase"].dump().c_str(),
                                       study.run.report(r["stage"].get<std::string>(), stage_mode_name(mode)).c_str());
                           return 0;
                       });

}  // namespace ppolab::cli
