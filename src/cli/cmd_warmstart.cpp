// cmd_warmstart.cpp — `ppolab sft`, `ppolab reward`, `ppolab reward-test`,
// `ppolab resume-check` (SPEC §3, §6).
#include <cstdio>

#include "cli/command.h"
#include "cli/stage_options.h"
#include "training/warmstart.h"
#include "util/error.h"

namespace ppolab::cli {

static int run_branch(const Args& args, WarmstartBranch branch) {
    args.allow_only(with_stage_options({"mode"}));
    StageOptions o = stage_options(args);
    const StageMode mode = parse_stage_mode(args.get("mode", "continuous"));
    Study study = Study::open(o.config, o.run, o.model, branch_name(branch), StageScope::learn);
    json report = run_warmstart(study, branch, mode);
    const json& last = report["validation_history"].empty() ? json() : report["validation_history"].back();
    std::printf("%s %s: %lld updates in %.1f s (%.3f s/update); validation %s\n", branch_name(branch),
                stage_mode_name(mode), static_cast<long long>(report["updates"].get<int64_t>()),
                report["seconds"].get<double>(), report["seconds_per_update"].get<double>(), last.dump().c_str());
    std::printf("wrote %s\n", study.run.report(branch_name(branch), stage_mode_name(mode)).c_str());
    return 0;
}

static Command sft_cmd("sft", "sft --run DIR [--mode interrupt|continuous|resume] [--preset P] [--set k=v]  supervised fine-tuning (LoRA)",
                       {}, [](const Args& a) { return run_branch(a, WarmstartBranch::sft); });

static Command reward_cmd("reward", "reward --run DIR [--mode interrupt|continuous|resume] [--preset P]  Bradley-Terry judge",
                          {}, [](const Args& a) { return run_branch(a, WarmstartBranch::reward); });

static Command reward_test_cmd(
    "reward-test", "reward-test --run DIR          judge accuracy on the 180 held-out test pairs", {}, [](const Args& args) {
        args.allow_only(with_stage_options({}));
        StageOptions o = stage_options(args);
        Study study = Study::open(o.config, o.run, o.model, "reward-test", StageScope::all);
        json r = reward_test(study);
        std::printf("judge on %lld test pairs: %lld correct, %lld ties, accuracy %.4f\n",
                    static_cast<long long>(r["pairs"].get<int64_t>()), static_cast<long long>(r["correct"].get<int64_t>()),
                    static_cast<long long>(r["ties"].get<int64_t>()), r["accuracy"].get<double>());
        return 0;
    });

static Command resume_check_cmd(
    "resume-check",
    "resume-check sft|reward|ppo --run DIR   bitwise comparison of continuous and resumed states\n"
    "                            | resume-check --states A.state.gz B.state.gz   the same for any two state files",
    {"states"},
    [](const Args& args) {
        if (args.has("states")) {
            args.allow_only({"states"});
            if (args.positional().size() != 2) fail("resume-check --states needs two state files, got ", args.positional().size());
            json r = compare_state_files(args.positional()[0], args.positional()[1]);
            std::printf("resume-check --states: %s\n  %s %s\n  %s %s\n%s", r["status"].get<std::string>().c_str(),
                        r["first_sha256"].get<std::string>().c_str(), r["first_file"].get<std::string>().c_str(),
                        r["second_sha256"].get<std::string>().c_str(), r["second_file"].get<std::string>().c_str(),
                        r["status"] == "PASS" ? "" : ("  first difference: " + r["first_difference"].get<std::string>() + "\n").c_str());
            return r["status"] == "PASS" ? 0 : 1;
        }
        args.allow_only({"run"});
        if (args.positional().size() != 1) fail("resume-check needs one stage: sft, reward or ppo");
        const std::string stage = args.positional()[0];
        if (stage != "sft" && stage != "reward" && stage != "ppo")
            fail("resume-check: stage must be sft, reward or ppo; got '", stage, "'");
        RunLayout run{args.get("run", "runs/default")};
        json r = resume_check(run, stage);
        std::printf("resume-check %s: %s\n  continuous %s\n  resume     %s\n%s", stage.c_str(),
                    r["status"].get<std::string>().c_str(), r["continuous_sha256"].get<std::string>().c_str(),
                    r["resume_sha256"].get<std::string>().c_str(),
                    r["status"] == "PASS" ? "" : ("  first difference: " + r["first_difference"].get<std::string>() + "\n").c_str());
        return r["status"] == "PASS" ? 0 : 1;
    });

}  // namespace ppolab::cli
