// cmd_run.cpp — `ppolab run`: the whole study, one stage after another.
//
// The study is a fixed list of ppolab commands run in this process, each
// exactly as a user would type it (they are printed). RUN/run-state.json
// records every finished step; `ppolab run --resume RUN` skips those and
// continues after *any* interruption (kill -9 included): a step whose last
// output exists finished before the interruption and is recorded; any other
// step is run again, and the step itself continues from its newest
// checkpoint (training/checkpoints.h) and replaces what the interrupted
// attempt left unfinished. A finished run (RUN/results.json) is never
// overwritten.
#include <chrono>
#include <cstdio>

#include "cli/command.h"
#include "cli/stage_options.h"
#include "evaluation/evaluate.h"
#include "training/checkpoints.h"
#include "training/pretrain.h"
#include "training/run_layout.h"
#include "training/study_config.h"
#include "util/error.h"

namespace ppolab::cli {

namespace {

struct Step {
    std::string name;                   // unique key in run-state.json
    std::vector<std::string> argv;      // command and its own arguments
    fs::path finished;                  // written last by the step: it exists once the step is done
    std::vector<fs::path> checkpoints;  // the step's checkpoints, removed if it finished but was not recorded
    bool optional_command = false;      // skipped when this build has no such command
};

std::vector<Step> study_steps(const RunLayout& run, const json& config, const std::vector<std::string>& common) {
    auto with = [&](std::vector<std::string> argv) {
        argv.insert(argv.end(), common.begin(), common.end());
        return argv;
    };
    const std::string R = run.root.string();
    std::vector<Step> steps;
    steps.push_back({"prepare", with({"prepare", "--run", R}), run.corpus() / "manifest.json", {}});
    if (config_bool(config, "pretrain.enabled"))
        steps.push_back({"pretrain", with({"pretrain", "--run", R}), run.base() / "pretrain.json",
                         {pretrain_checkpoint_path(run.base())}});
    for (const std::string stage : {"sft", "reward", "ppo"}) {
        for (const std::string mode : {"interrupt", "continuous", "resume"}) {
            const fs::path ck = checkpoint_path(run.stage(stage), mode);
            std::vector<fs::path> cks = {ck};
            if (stage == "ppo") cks.push_back(ck.parent_path() / (mode + ".report-extras.json"));
            steps.push_back({stage + "-" + mode, with({stage, "--run", R, "--mode", mode}), run.report(stage, mode), cks});
        }
        steps.push_back({"resume-check-" + stage, {"resume-check", stage, "--run", R}, run.resume_check(stage), {}});
        if (stage == "reward")
            steps.push_back({"reward-test", with({"reward-test", "--run", R}), run.stage("reward") / "reward-test.json", {}});
    }
    steps.push_back({"evaluate", with({"evaluate", "--run", R}), metrics_path(run, EvalSet::held_out), {}, true});
    steps.push_back({"exercise", with({"exercise", "--run", R}), run.root / "exercise.json", {}, true});
    steps.push_back({"report", with({"report", "--run", R}), run.report_html(), {}, true});
    return steps;
}

json read_or_null(const fs::path& p) { return fs::exists(p) ? read_json_file(p) : json(); }

// results.json: what the study found, gathered from the stage outputs.
json gather_results(const RunLayout& run, const json& config, const json& state) {
    json r;
    r["study"] = config_identity(config);
    r["scope"] =
        "Simulated preferences from a finite rubric; no human study. The learned score is a predicted "
        "simulated-preference score, not human utility.";
    json checks = json::object();
    for (const char* s : {"sft", "reward", "ppo"}) {
        json c = read_or_null(run.resume_check(s));
        checks[s] = c.is_null() ? "MISSING" : c["status"];
    }
    r["resume_checks"] = checks;
    json rt = read_or_null(run.stage("reward") / "reward-test.json");
    if (!rt.is_null()) r["reward_test"] = {{"pairs", rt["pairs"]}, {"correct", rt["correct"]}, {"ties", rt["ties"]},
                                           {"accuracy", rt["accuracy"]}};
    json metrics = read_or_null(run.eval() / "metrics.json");
    if (!metrics.is_null()) r["actor"] = metrics;
    json ex = read_or_null(run.root / "exercise.json");
    if (!ex.is_null())
        for (const char* k : {"wrong_polite_outranks_correct_plain", "mean_incorrect_politeness_delta",
                              "mean_correct_politeness_delta", "contexts"})
            if (ex.contains(k)) r["exercise"][k] = ex[k];
    json seconds = json::object();
    for (const auto& [name, s] : state["steps"].items()) seconds[name] = s["seconds"];  // null: finished before a kill
    r["seconds"] = seconds;
    return r;
}

void print_summary(const json& r) {
    std::printf("\n== ppolab study: %s ==\n", r["study"].dump().c_str());
    std::printf("resume checks   sft %s   reward %s   ppo %s\n", r["resume_checks"]["sft"].dump().c_str(),
                r["resume_checks"]["reward"].dump().c_str(), r["resume_checks"]["ppo"].dump().c_str());
    if (r.contains("reward_test"))
        std::printf("judge           %s/%s test pairs correct (accuracy %.4f)\n", r["reward_test"]["correct"].dump().c_str(),
                    r["reward_test"]["pairs"].dump().c_str(), r["reward_test"]["accuracy"].get<double>());
    if (r.contains("actor")) std::printf("actor metrics   %s\n", r["actor"].dump().substr(0, 2000).c_str());
    if (r.contains("exercise")) std::printf("exercise        %s\n", r["exercise"].dump().c_str());
    double total = 0;
    for (const auto& [k, v] : r["seconds"].items())
        if (v.is_number()) total += v.get<double>();
    std::printf("total           %.1f s\n%s\n", total, r["scope"].get<std::string>().c_str());
}

int run_study(const Args& args) {
    args.allow_only({"preset", "config", "set", "model", "out", "resume"});
    if (args.has("resume") && args.has("out")) fail("give --out DIR for a new run or --resume DIR, not both");
    const bool resuming = args.has("resume");
    RunLayout run{args.has("resume") ? args.get("resume") : args.get("out", "runs/default")};
    const fs::path state_path = run.root / "run-state.json";
    if (fs::exists(run.results())) fail("refusing to overwrite the finished run ", run.root.string());
    if (!resuming && fs::exists(run.root))
        fail(run.root.string(), " exists but is not finished; continue it with `ppolab run --resume ",
             run.root.string(), "` or choose another --out");
    if (resuming && !fs::exists(state_path)) fail("--resume: no ", state_path.string(), " (not a ppolab run folder)");

    // The study's options: given once for a new run, recorded, reused on resume.
    json state;
    if (resuming) {
        state = read_json_file(state_path);
        for (const char* o : {"preset", "config", "set", "model"})
            if (args.has(o)) fail("--resume continues with the recorded options; --", o, " cannot change them");
    } else {
        json options{{"preset", args.get("preset", kDefaultPreset)},
                     {"config", args.all("config")},
                     {"set", args.all("set")},
                     {"model", args.has("model") ? json(args.get("model")) : json()}};
        state = {{"format", "ppolab-run-state"}, {"options", options}, {"steps", json::object()}};
        fs::create_directories(run.root);
        write_json_atomic(state_path, state);
    }
    const json& options = state["options"];
    std::vector<std::string> common = {"--preset", options["preset"].get<std::string>()};
    for (const auto& f : options["config"]) common.insert(common.end(), {"--config", f.get<std::string>()});
    for (const auto& s : options["set"]) common.insert(common.end(), {"--set", s.get<std::string>()});
    std::vector<fs::path> files;
    for (const auto& f : options["config"]) files.emplace_back(f.get<std::string>());
    const json config = effective_config(options["preset"].get<std::string>(), files,
                                         options["set"].get<std::vector<std::string>>());
    std::vector<std::string> model_arg;
    if (!options["model"].is_null()) model_arg = {"--model", options["model"].get<std::string>()};

    for (Step& step : study_steps(run, config, common)) {
        if (state["steps"].contains(step.name)) continue;
        const std::string cmd = step.argv.front();
        auto it = registry().find(cmd);
        if (it == registry().end()) {
            if (step.optional_command) {
                std::printf("-- skipping %s: this build has no `ppolab %s`\n", step.name.c_str(), cmd.c_str());
                continue;
            }
            fail("internal: no command ", cmd);
        }
        std::vector<std::string> argv(step.argv.begin() + 1, step.argv.end());
        if (cmd != "prepare" && cmd != "pretrain" && cmd != "resume-check") argv.insert(argv.end(), model_arg.begin(), model_arg.end());
        std::string line = "ppolab " + cmd;
        for (const auto& a : argv) line += " " + a;
        // Interrupted after the step's last output but before it was recorded:
        // the step is done (a checkpoint it had no time to remove goes now).
        if (resuming && fs::exists(step.finished)) {
            std::printf("-- %s finished before the interruption (%s exists); recorded\n", step.name.c_str(),
                        step.finished.c_str());
            for (const fs::path& ck : step.checkpoints) remove_checkpoint(ck);
            state["steps"][step.name] = {{"command", line}, {"seconds", nullptr}};
            write_json_atomic(state_path, state, Overwrite::replace);
            continue;
        }
        std::printf("\n>> %s\n", line.c_str());
        std::fflush(stdout);
        const auto t0 = std::chrono::steady_clock::now();
        const int rc = it->second.run(Args(argv, it->second.flags));
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (rc != 0) fail("step ", step.name, " failed (exit ", rc, "); fix the cause, then `ppolab run --resume ",
                          run.root.string(), "`");
        state["steps"][step.name] = {{"command", line}, {"seconds", secs}};
        write_json_atomic(state_path, state, Overwrite::replace);
    }
    json results = gather_results(run, config, state);
    write_json_atomic(run.results(), results);
    print_summary(results);
    std::printf("wrote %s\n", run.results().c_str());
    return 0;
}

}  // namespace

static Command run_cmd("run",
                       "run [--preset P] [--model DIR] [--out DIR] [--config F] [--set k=v] | run --resume DIR\n"
                       "                            the whole study (default: embedded tiny model, runs/default)",
                       {}, run_study);

}  // namespace ppolab::cli
