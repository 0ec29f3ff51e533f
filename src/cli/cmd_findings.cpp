// cmd_findings.cpp — `ppolab findings`: the study's answer with intervals
// (evaluation/findings.h), from every chain of RUN into RUN/findings.json.
#include <cstdio>

#include "cli/command.h"
#include "cli/stage_options.h"
#include "evaluation/findings.h"
#include "training/config_types.h"
#include "util/error.h"

namespace ppolab::cli {

namespace {

void print_interval(const char* label, const json& i, double scale, const char* unit) {
    if (i.is_null() || i["mean"].is_null()) return;
    std::printf("  %-34s %+8.3f%s [%+.3f, %+.3f]\n", label, scale * i["mean"].get<double>(), unit,
                scale * i["low"].get<double>(), scale * i["high"].get<double>());
}

int run_findings(const Args& args) {
    args.allow_only(with_stage_options({}));
    if (args.has("replicate")) fail("findings reads every replicate of RUN; --replicate is not an option here");
    StageOptions o = stage_options(args);
    const StudyConfig cfg = StudyConfig::parse(o.config);
    if (fs::exists(o.run.findings()))
        fail("refusing to overwrite ", o.run.findings().string(), " (findings writes it once)");
    std::vector<RunLayout> chains;
    if (cfg.replicates.count == 1) chains.push_back(o.run);
    for (int64_t k = 0; cfg.replicates.count > 1 && k < cfg.replicates.count; ++k)
        chains.push_back(RunLayout::replicate(o.run.root, k, cfg.replicates.repretrain_base && cfg.pretrain.enabled));
    const json f = compute_findings(chains);
    write_json_atomic(o.run.findings(), f);
    const json& units = f["confidence"]["units"];
    std::printf("findings: %lld replicate(s) x %lld test prompts, 95%% hierarchical bootstrap\n",
                static_cast<long long>(units["replicates"].get<int64_t>()),
                static_cast<long long>(units["contexts"]["test"].get<int64_t>()));
    std::printf("%s\n", f["verdict"]["text"].get<std::string>().c_str());
    const json& d = f["ppo_minus_sft"]["test"];
    print_interval("PPO - SFT test rubric success", d["rubric_success"], 100, " pt");
    print_interval("PPO - SFT test judge score", d["learned_score"], 1, "   ");
    print_interval("PPO test exact KL to SFT", f["policies"]["ppo"]["test"]["kl_exact_to_sft"], 1, "   ");
    if (f["overoptimisation"].contains("answer"))
        std::printf("%s\n", f["overoptimisation"]["answer"]["text"].get<std::string>().c_str());
    std::printf("wrote %s\n", o.run.findings().c_str());
    return 0;
}

constexpr const char* kFindingsHelp = R"(
Reads every chain of RUN (RUN itself, or RUN/replicates/<k>/ of a set) after
evaluation and writes RUN/findings.json: each policy's held-out means with 95 %
hierarchical-bootstrap intervals (replicates, then prompts within a replicate),
the paired difference PPO - SFT on the same prompts, the verdict, and - when
`ppolab overoptimisation` ran - gold and proxy against sqrt(exact KL) for PPO's
snapshots and best-of-n, with the fits and their intervals. No durations: the
same chains give the same bytes.
)";

Command findings_cmd("findings", "findings --run DIR   the study's answer with intervals (RUN/findings.json)", {},
                     run_findings, kFindingsHelp);

}  // namespace

}  // namespace ppolab::cli
