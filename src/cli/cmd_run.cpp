// cmd_run.cpp — `ppolab run`: the whole study, one stage after another.
//
// The study is a fixed list of ppolab commands run in this process, each
// exactly as a user would type it (they are printed). RUN/run-state.json
// records every finished step; `ppolab run --resume RUN` skips those and
// continues after *any* interruption (kill -9 included): a step whose last
// output exists finished before the interruption and is recorded; any other
// step is run again, and the step itself continues from its newest
// checkpoint (training/crash_checkpoints.h) and replaces what the interrupted
// attempt left unfinished. A finished run (RUN/results.json) is never
// overwritten.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>

#include "cli/command.h"
#include "cli/stage_options.h"
#include "evaluation/evaluate.h"
#include "evaluation/summary.h"
#include "kernels/dispatch.h"
#include "parallel/world.h"
#include "training/config_types.h"
#include "training/crash_checkpoints.h"
#include "training/learned_io.h"
#include "training/pretrain.h"
#include "training/run_layout.h"
#include "training/run_records.h"
#include "training/study_config.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/progress.h"
#include "util/sha256.h"
#include "util/stopwatch.h"

namespace ppolab::cli {

namespace {

struct Step {
    std::string name;                   // unique key in run-state.json
    std::vector<std::string> argv;      // command and its own arguments
    fs::path finished;                  // written last by the step: it exists once the step is done
    std::vector<fs::path> checkpoints;  // the step's checkpoints, removed if it finished but was not recorded
    bool optional_command = false;      // skipped when this build has no such command
};

// The steps of one chain (RUN itself, or replicate k: `--replicate k`).
// Only the first chain proves exact resume (interrupt, continuous, resume
// and the bitwise check of each stage); the others run each stage once,
// continuously (the mode that writes final/).
// The --set that turns on a PPO ablation's switch (PpoSettings::stage names the folder).
std::string ablation_set(const std::string& ablation) {
    if (ablation == "ppo-whiten") return "ppo.whiten_advantages=true";
    if (ablation == "ppo-vclip") return "ppo.value_clipping=true";
    if (ablation == "ppo-k3") return "ppo.kl_penalty=loss_k3";
    fail("internal: no PPO ablation ", ablation);
}

// `compared`: the baselines of `run --compare` (dpo, rloo, grpo) and the
// PPO ablations of `run --ablations` (ppo-whiten, ppo-vclip, ppo-k3), each
// trained once, continuously, from the chain's SFT (and judge) after PPO.
void chain_steps(std::vector<Step>& steps, const RunLayout& run, const std::string& R,
                 const std::vector<std::string>& chain, const std::string& prefix, bool proofs, bool pretrain,
                 const std::vector<std::string>& compared,
                 const std::function<std::vector<std::string>(std::vector<std::string>)>& with) {
    auto in_chain = [&](std::vector<std::string> argv) {
        argv.insert(argv.end(), chain.begin(), chain.end());
        return with(std::move(argv));
    };
    if (pretrain)
        steps.push_back({prefix + "pretrain",
                         in_chain({"pretrain", "--run", R}),
                         run.pretrain_report(),
                         {pretrain_checkpoint_path(run.base())}});
    const std::vector<std::string> modes =
        proofs ? std::vector<std::string>{"interrupt", "continuous", "resume"} : std::vector<std::string>{"continuous"};
    for (const std::string stage : {"sft", "reward", "ppo"}) {
        for (const std::string& mode : modes) {
            const fs::path ck = checkpoint_path(run.stage(stage), mode);
            std::vector<fs::path> cks = {ck};
            if (stage == "ppo") cks.push_back(ck.parent_path() / (mode + ".report-extras.json"));
            steps.push_back({prefix + stage + "-" + mode, in_chain({stage, "--run", R, "--mode", mode}),
                             run.report(stage, mode), cks});
        }
        if (proofs) {
            std::vector<std::string> check = {"resume-check", stage, "--run", R};
            check.insert(check.end(), chain.begin(), chain.end());
            steps.push_back({prefix + "resume-check-" + stage, check, run.resume_check(stage), {}});
        }
        if (stage == "reward")
            steps.push_back({prefix + "reward-test", in_chain({"reward-test", "--run", R}), run.reward_test(), {}});
    }
    for (const std::string& m : compared) {
        // A baseline's command; a PPO ablation is `ppo` with its switch on (RUN/ppo-<switch>/).
        std::vector<std::string> argv = {m, "--run", R, "--mode", "continuous"};
        if (m.rfind("ppo-", 0) == 0) argv = {"ppo", "--run", R, "--mode", "continuous", "--set", ablation_set(m)};
        steps.push_back(
            {prefix + m + "-continuous",
             in_chain(argv),
             run.report(m, "continuous"),
             {checkpoint_path(run.stage(m), "continuous"),
              checkpoint_path(run.stage(m), "continuous").parent_path() / "continuous.report-extras.json"}});
    }
    steps.push_back(
        {prefix + "evaluate", in_chain({"evaluate", "--run", R}), metrics_path(run, EvalSet::held_out), {}, true});
    steps.push_back({prefix + "overoptimisation",
                     in_chain({"overoptimisation", "--run", R}),
                     run.eval() / "overoptimisation.json",
                     {},
                     true});
    steps.push_back({prefix + "exercise", in_chain({"exercise", "--run", R}), run.exercise(), {}, true});
}

std::vector<Step> study_steps(const RunLayout& run, const json& config, const std::vector<std::string>& common,
                              const std::vector<std::string>& compared) {
    auto with = [&](std::vector<std::string> argv) {
        argv.insert(argv.end(), common.begin(), common.end());
        return argv;
    };
    const StudyConfig cfg = StudyConfig::parse(config);
    const int64_t K = cfg.replicates.count;
    const bool own_bases = K > 1 && cfg.replicates.repretrain_base && cfg.pretrain.enabled;
    const std::string R = run.root.string();
    std::vector<Step> steps;
    steps.push_back({"prepare", with({"prepare", "--run", R}), run.corpus() / "manifest.json", {}});
    if (cfg.pretrain.enabled && !own_bases)
        steps.push_back({"pretrain",
                         with({"pretrain", "--run", R}),
                         run.pretrain_report(),
                         {pretrain_checkpoint_path(run.base())}});
    if (K == 1) {
        chain_steps(steps, run, R, {}, "", true, false, compared, with);
        steps.push_back({"findings", with({"findings", "--run", R}), run.findings(), {}, true});
        steps.push_back({"report", with({"report", "--run", R}), run.report_html(), {}, true});
        return steps;
    }
    for (int64_t k = 0; k < K; ++k)
        chain_steps(steps, RunLayout::replicate(run.root, k, own_bases), R, {"--replicate", std::to_string(k)},
                    "replicate-" + std::to_string(k) + "/", k == 0, own_bases, compared, with);
    steps.push_back({"findings", with({"findings", "--run", R}), run.findings(), {}, true});
    // The set's report: replicate 0's stages and the set's findings.
    steps.push_back({"report",
                     with({"report", "--run", R, "--replicate", "0", "--out", run.report_html().string()}),
                     run.report_html(),
                     {},
                     true});
    return steps;
}

// "sft-continuous" → "sft continuous"; "replicate-2/ppo-continuous" →
// "replicate 2 ppo continuous"; "ppo-k3-continuous" → "ppo-k3 continuous".
std::string step_label(const std::string& name) {
    std::string chain, label = name;
    if (const size_t slash = name.find('/'); slash != std::string::npos) {
        chain = name.substr(0, slash) + " ";
        chain[chain.find('-')] = ' ';
        label = name.substr(slash + 1);
    }
    // The mode follows the last dash: "ppo-whiten-continuous" → "ppo-whiten continuous".
    if (const size_t dash = label.rfind('-');
        dash != std::string::npos && label.rfind("resume-check", 0) != 0 && label != "reward-test")
        label[dash] = ' ';
    return chain + label;
}

json read_or_null(const fs::path& p) { return fs::exists(p) ? read_json_file(p) : json(); }

// The stages of the study in their order; a step belongs to one of them
// ("replicate-1/resume-check-sft" and "sft-interrupt" to sft, "reward-test"
// to reward). `run --until STAGE` stops before the first step of a later one.
const std::vector<std::string> kStudyStages = {"prepare",  "pretrain", "sft",   "reward",   "ppo",
                                               "dpo",      "rloo",     "grpo",  "evaluate", "overoptimisation",
                                               "exercise", "findings", "report"};

// `run --compare ppo,dpo,rloo,grpo,bon` (SPEC §12): the methods compared on
// the same SFT, judge and held-out gold in every replicate. PPO and
// best-of-n are always part of the study; the others add one step each per
// chain. Returns the ones that add steps, in this order: dpo, rloo, grpo.
std::vector<std::string> compare_option(const std::string& list) {
    const std::vector<std::string> known = {"ppo", "dpo", "rloo", "grpo", "bon"};
    std::vector<std::string> named;
    size_t start = 0;
    while (start <= list.size()) {
        const size_t comma = std::min(list.find(',', start), list.size());
        const std::string m = list.substr(start, comma - start);
        if (std::find(known.begin(), known.end(), m) == known.end())
            fail("--compare ", list, ": '", m,
                 "' is not a method; expected a comma-separated list of ppo, dpo, rloo, "
                 "grpo, bon");
        if (std::find(named.begin(), named.end(), m) != named.end()) fail("--compare ", list, ": '", m, "' twice");
        named.push_back(m);
        start = comma + 1;
    }
    std::vector<std::string> steps;
    for (const std::string& m : compared_methods())
        if (std::find(named.begin(), named.end(), m) != named.end()) steps.push_back(m);
    return steps;
}

// The PPO runs of `run --ablations`: each design switch of SPEC §12 on alone
// (ppo_math.h 7–9), trained like the baselines.
const std::vector<std::string> kAblations = {"ppo-whiten", "ppo-vclip", "ppo-k3"};

std::string step_stage(const std::string& name) {
    std::string s = name.substr(name.find('/') == std::string::npos ? 0 : name.find('/') + 1);
    if (s.rfind("resume-check-", 0) == 0) return s.substr(13);
    if (s.rfind("ppo-", 0) == 0 && s.find('-', 4) != std::string::npos)
        return "ppo";  // an ablation: "ppo-k3-continuous"
    return s.substr(0, s.find('-'));
}

size_t stage_rank(const std::string& stage) {
    for (size_t i = 0; i < kStudyStages.size(); ++i)
        if (kStudyStages[i] == stage) return i;
    fail("internal: step of no stage: ", stage);
}

std::string until_option(const Args& args) {
    if (!args.has("until")) return "";
    std::string u = args.get("until");
    std::string expected;
    for (size_t i = 0; i + 2 < kStudyStages.size(); ++i) expected += (i ? ", " : "") + kStudyStages[i];
    for (size_t i = 0; i + 2 < kStudyStages.size(); ++i)
        if (kStudyStages[i] == u) return u;
    fail("--until ", u, ": expected one of ", expected);
}

// The judge from votes (SPEC §8): `run --resume RUN --votes FILE...
// --candidates FILE [--feedback-kind human|ai]`, after `run --until sft` made
// the SFT policy the candidates were sampled from. Recorded in
// run-state.json (options.feedback: absolute paths and each file's sha256)
// and given to every `reward` step; a later resume reuses them. Until a
// reward step has finished they may be given again (more votes, other
// files); after that they are the judge's and cannot change. The reward
// steps check every rule of the votes themselves.
json feedback_option(const Args& args, const json& state, const RunLayout& run, int64_t replicates) {
    std::vector<std::string> votes = args.all("votes");
    const std::vector<std::string>& more = args.positional();  // --votes A B C
    votes.insert(votes.end(), more.begin(), more.end());
    if (votes.empty() && (args.has("candidates") || args.has("feedback-kind")))
        fail("--candidates and --feedback-kind go with --votes FILE... (the judge from votes)");
    json recorded = state["options"].value("feedback", json());
    bool judge_done = true;
    std::string started;  // a finished reward step, if any
    for (const auto& [name, s] : state["steps"].items())
        if (step_stage(name) == "reward") started = name;
    for (const char* step : {"reward-interrupt", "reward-continuous", "reward-resume"})
        if (!state["steps"].contains(step)) judge_done = false;
    if (votes.empty()) {
        // While a reward step remains, the recorded files must be as recorded.
        if (!recorded.is_null() && !judge_done)
            for (const json& f : recorded["files"])
                if (const std::string now = sha256_file(f["path"].get<std::string>()); now != f["sha256"])
                    fail(f["path"].get<std::string>(), ": changed since this run recorded it (sha256 ",
                         f["sha256"].get<std::string>().substr(0, 12), "… then, ", now.substr(0, 12), "… now); ",
                         started.empty() ? "give --votes … --candidates … again to train the judge on the files as "
                                           "they are now"
                                         : "the judge has begun to learn from the recorded votes (step " + started +
                                               " finished), so they cannot change");
        return recorded;
    }
    if (!args.has("candidates"))
        fail("--votes needs --candidates FILE (the candidate file the votes are about, from `ppolab feedback export`)");
    if (replicates != 1)
        fail("--votes: ", run.root.string(), " has ", replicates,
             " replicates (replicates.count); a judge from votes learns from the one SFT policy that made the "
             "candidates: start the run with --replicates 1");
    if (args.has("feedback-kind") && args.get("feedback-kind") != "human" && args.get("feedback-kind") != "ai")
        fail("--feedback-kind must be human or ai, got '", args.get("feedback-kind"), "'");
    auto file_entry = [](const std::string& option, const std::string& path) {
        ::close(open_regular_file(path, option == "--votes" ? "vote file" : "candidate file"));  // FIFOs too
        return json{{"path", fs::absolute(path).lexically_normal().string()}, {"sha256", sha256_file(path)}};
    };
    json f = {{"files", json::array()},
              {"candidates", file_entry("--candidates", args.get("candidates"))},
              {"feedback_kind", args.has("feedback-kind") ? json(args.get("feedback-kind")) : json()}};
    for (const std::string& v : votes) f["files"].push_back(file_entry("--votes", v));
    if (!started.empty() && recorded.is_null())
        fail("--votes: the judge of ", run.root.string(), " already learnt from the corpus's pairs (step ", started,
             " finished); a run's judge learns from one source");
    if (!started.empty() && recorded != f)
        fail("--votes/--candidates/--feedback-kind: the judge of ", run.root.string(),
             " has begun to learn from the votes recorded in ", run.run_state().string(), " (step ", started,
             " finished), and these differ (other files, contents or kind); a run's judge learns from one set of "
             "votes: continue with `ppolab run --resume ",
             run.root.string(), "`");
    return f;
}

// The reward steps' options for the judge from votes.
std::vector<std::string> feedback_args(const json& feedback) {
    std::vector<std::string> a;
    if (feedback.is_null()) return a;
    for (const json& f : feedback["files"]) a.insert(a.end(), {"--votes", f["path"].get<std::string>()});
    a.insert(a.end(), {"--candidates", feedback["candidates"]["path"].get<std::string>()});
    if (!feedback["feedback_kind"].is_null())
        a.insert(a.end(), {"--feedback-kind", feedback["feedback_kind"].get<std::string>()});
    return a;
}

// What `run --until STAGE` prints when it stops: how to go on, and after the
// SFT of a single chain, how to train the judge from votes instead.
void print_until_stop(const std::string& until, const std::string& next, const RunLayout& run,
                      const std::vector<std::string>& common, const json& feedback, int64_t replicates) {
    const std::string R = run.root.string();
    std::printf(
        "\n-- stopped before %s: --until %s ran the study up to its %s steps. Continue with\n"
        "     ppolab run --resume %s\n",
        next.c_str(), until.c_str(), until.c_str(), R.c_str());
    if (stage_rank(until) >= stage_rank("reward") || !feedback.is_null()) return;
    if (stage_rank(until) < stage_rank("sft")) return;
    if (replicates != 1) {
        std::printf("   (a judge from votes needs a run with --replicates 1: its candidates come from one SFT)\n");
        return;
    }
    std::string opts;
    for (const std::string& c : common) opts += " " + c;
    std::printf(
        "   or let people (or a declared AI labeller) train the judge on this run's SFT (SPEC §8):\n"
        "     ppolab feedback export --run %s%s --out candidates.json\n"
        "     ppolab feedback serve --candidates candidates.json --out votes.json\n"
        "     ppolab run --resume %s --votes votes.json --candidates candidates.json [--feedback-kind human|ai]\n",
        R.c_str(), opts.c_str(), R.c_str());
}

// The chains of the study: RUN itself, or its K replicates.
std::vector<RunLayout> study_chains(const RunLayout& run, const StudyConfig& cfg) {
    if (cfg.replicates.count == 1) return {run};
    std::vector<RunLayout> chains;
    for (int64_t k = 0; k < cfg.replicates.count; ++k)
        chains.push_back(RunLayout::replicate(run.root, k, cfg.replicates.repretrain_base && cfg.pretrain.enabled));
    return chains;
}

// The records of every chain, checked against the options (run_records.h).
void check_study_records(const RunLayout& run, const json& config) {
    const StudyConfig cfg = StudyConfig::parse(config);
    const std::vector<RunLayout> layouts = study_chains(run, cfg);
    std::vector<ChainExpectation> chains;
    for (size_t k = 0; k < layouts.size(); ++k) {
        json chain_config = config;  // as the stage commands see it (stage_options.cpp: --replicate k)
        const int64_t seed = cfg.study.seed + static_cast<int64_t>(k);
        if (layouts.size() > 1) chain_config["study"]["seed"] = seed;
        chains.push_back({layouts[k], config_identity(chain_config),
                          layouts.size() > 1
                              ? "replicate " + std::to_string(k) + " (study.seed " + std::to_string(seed) + ")"
                              : "the run"});
    }
    check_run_records(run.findings(), chains);
    // The learned tensors on disk are those the records finished with
    // (read_learned recomputes each file's identity from its tensors).
    for (const ChainExpectation& c : chains)
        for (const char* stage : {"sft", "reward"}) {
            const fs::path record = c.layout.report(stage, "continuous");
            const fs::path tensors = c.layout.final_dir(stage) / "learned.safetensors";
            if (!fs::exists(record) || !fs::exists(tensors)) continue;
            const json finished = read_json_file(record).value("final_learned_identity", json());
            const std::string on_disk = read_learned(tensors).identity;
            if (finished != json(on_disk))
                fail(tensors.string(), ": its learned identity is \"", on_disk, "\" but ", record.string(),
                     " finished with ", finished.dump(),
                     "; the tensors were replaced or edited: restore them or start a new run");
        }
}

// What a killed step's atomic writes left in the folders the study steps
// write whole files to (findings.json, exercise.json, eval/): a finished run
// holds no ".name.tmpN" (the stages sweep their own folders).
void remove_leftover_temporaries(const RunLayout& run, const std::vector<RunLayout>& chains) {
    remove_atomic_temporaries(run.root);
    for (const RunLayout& chain : chains) {
        if (chain.root != run.root) remove_atomic_temporaries(chain.root);
        remove_atomic_temporaries(chain.eval());
    }
}

json reward_test_summary(const RunLayout& chain) {
    json rt = read_or_null(chain.reward_test());
    if (rt.is_null()) return rt;
    return {{"pairs", rt["pairs"]}, {"correct", rt["correct"]}, {"ties", rt["ties"]}, {"accuracy", rt["accuracy"]}};
}

// results.json: what the study found, gathered from the stage outputs and,
// when the findings step ran, its intervals and verdict. The per-chain
// numbers (`actor`, `reward_test`, `resume_checks`, `exercise`) are the
// first chain's (the one that proves exact resume); `per_replicate` has
// every chain's seed, judge accuracy and test success.
json gather_results(const RunLayout& run, const json& config, const json& state, const std::vector<Step>& steps) {
    const StudyConfig cfg = StudyConfig::parse(config);
    engine_apply(cfg.engine);
    const std::vector<RunLayout> chains = study_chains(run, cfg);
    const RunLayout& first = chains.front();
    json r;
    r["study"] = config_identity(config);
    r["scope"] =
        "Simulated preferences from a finite rubric; no human study. The learned score is a predicted "
        "simulated-preference score, not human utility.";
    r["replicates"] = cfg.replicates.count;
    json checks = json::object();
    for (const char* s : {"sft", "reward", "ppo"}) {
        json c = read_or_null(first.resume_check(s));
        checks[s] = c.is_null() ? "MISSING" : c["status"];
    }
    r["resume_checks"] = checks;
    if (json rt = reward_test_summary(first); !rt.is_null()) r["reward_test"] = rt;
    json metrics = read_or_null(first.eval() / "metrics.json");
    if (!metrics.is_null()) r["actor"] = metrics;
    json ex = read_or_null(first.exercise());
    if (!ex.is_null())
        for (const char* k : {"wrong_polite_outranks_correct_plain", "mean_incorrect_politeness_delta",
                              "mean_correct_politeness_delta", "contexts"})
            if (ex.contains(k)) r["exercise"][k] = ex[k];
    json per = json::array();
    for (size_t k = 0; k < chains.size(); ++k) {
        json m = read_or_null(chains[k].eval() / "metrics.json");
        json row = {{"replicate", k},
                    {"study_seed", cfg.study.seed + static_cast<int64_t>(k)},
                    {"reward_test", reward_test_summary(chains[k])}};
        for (const char* policy : {"sft", "ppo"})
            if (!m.is_null() && m.contains(policy))
                row[policy] = {{"test_rubric_success", m[policy]["test"]["rubric_success_rate_all_outputs"]},
                               {"test_mean_learned_reward", m[policy]["test"]["mean_learned_reward"]}};
        per.push_back(row);
    }
    r["per_replicate"] = per;
    json findings = read_or_null(run.findings());
    if (!findings.is_null())
        for (const char* k :
             {"confidence", "policies", "ppo_minus_sft", "comparison", "verdict", "overoptimisation", "diagnostics"})
            if (findings.contains(k)) r[k] = findings[k];
    json seconds = json::object();
    for (const auto& [name, s] : state["steps"].items()) seconds[name] = s["seconds"];  // null: finished before a kill
    r["seconds"] = seconds;
    // The same durations in the study's order (the summary's minutes per step).
    json order = json::array();
    for (const Step& s : steps)
        if (state["steps"].contains(s.name))
            order.push_back({{"step", s.name}, {"seconds", state["steps"][s.name]["seconds"]}});
    r["steps"] = order;
    // run --compare: each method's training seconds per replicate (its continuous step; PPO's too).
    if (r.contains("comparison")) {
        json per_method = json::object();
        for (const json& row : r["comparison"]["table"]) {
            const std::string m = row["policy"].get<std::string>();
            if (m == "bon") continue;
            json per = json::array();
            for (size_t k = 0; k < chains.size(); ++k) {
                const std::string name =
                    (chains.size() == 1 ? std::string() : "replicate-" + std::to_string(k) + "/") + m + "-continuous";
                per.push_back(state["steps"].contains(name) ? state["steps"][name]["seconds"] : json());
            }
            per_method[m] = per;
        }
        r["comparison_seconds"] = {{"per_replicate", per_method},
                                   {"note", "seconds of each method's continuous training step, per replicate"}};
    }
    r["engine"] = dispatch_json(dispatch_report());
    return r;
}

// The effective configuration of a run's recorded options, checked whole:
// every key and bound, and the chunk plan against this world size.
json study_config_of(const json& options) {
    std::vector<fs::path> files;
    for (const auto& f : options["config"]) files.emplace_back(f.get<std::string>());
    json config =
        effective_config(options["preset"].get<std::string>(), files, options["set"].get<std::vector<std::string>>());
    parallel::my_chunks(StudyConfig::parse(config).parallel.chunks);  // W must divide parallel.chunks: refused now
    return config;
}

// An existing --out folder a new run may take: empty, or holding only the
// lock a refused or killed `run --out` left (util/run_lock.h).
bool holds_only_a_lock(const fs::path& root) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(root, ec))
        if (e.path().filename() != ".ppolab.lock") return false;
    return !ec;
}

int run_study(const Args& args) {
    args.allow_only({"preset", "config", "set", "model", "out", "resume", "replicates", "until", "votes", "candidates",
                     "feedback-kind", "compare", "ablations"});
    const std::string until = until_option(args);
    // The methods compared, checked before the run folder is made.
    std::vector<std::string> compared_now =
        args.has("compare") ? compare_option(args.get("compare")) : std::vector<std::string>{};
    if (args.has("ablations")) compared_now.insert(compared_now.end(), kAblations.begin(), kAblations.end());
    if (!args.has("votes") && !args.positional().empty())
        fail("unexpected argument '", args.positional().front(), "' (`ppolab run --help` lists the options)");
    if (args.has("votes") && !args.has("resume"))
        fail(
            "--votes: the candidates come from this run's SFT policy, which does not exist yet; start with "
            "`ppolab run --out RUN --replicates 1 --until sft`, export and vote, then `ppolab run --resume RUN "
            "--votes FILE... --candidates FILE`");
    if (args.has("resume") && args.has("out")) fail("give --out DIR for a new run or --resume DIR, not both");
    const bool resuming = args.has("resume");
    RunLayout run{args.has("resume") ? args.get("resume") : args.get("out", "runs/default")};
    const fs::path state_path = run.run_state();
    // Under mpirun (SPEC §13) rank 0 checks the folder, creates it and its
    // state; the other ranks then read that state. The run folder must be one
    // every rank sees (a shared filesystem, as for any cluster job).
    const parallel::World& world = parallel::world();
    // A new run's options, checked (every --config read, every --set and
    // count validated, the chunk plan) before its folder exists: a refused
    // command leaves nothing behind.
    json new_options;
    if (!resuming) {
        std::vector<std::string> sets = args.all("set");  // --replicates K is replicates.count = K, after every --set
        if (args.has("replicates")) sets.push_back("replicates.count=" + args.get("replicates"));
        new_options = {{"preset", args.get("preset", kDefaultPreset)},
                       {"config", args.all("config")},
                       {"set", sets},
                       {"model", args.has("model") ? json(args.get("model")) : json()}};
        if (args.has("compare") || args.has("ablations")) new_options["compare"] = compared_now;
        study_config_of(new_options);
    }
    RunLock lock;
    json state;
    if (world.writer()) {
        const std::string option = resuming ? "--resume" : "--out";
        std::error_code ec;
        if (fs::exists(run.root, ec) && !fs::is_directory(run.root, ec))
            fail(option, " ", run.root.string(), ": is a file, not a run folder",
                 resuming ? "" : "; choose another --out (a folder ppolab creates)");
        if (fs::exists(run.results())) fail("refusing to overwrite the finished run ", run.root.string());
        auto refuse_unfinished = [&] {
            fail(run.root.string(), " exists but is not finished; continue it with `ppolab run --resume ",
                 run.root.string(), "` or choose another --out");
        };
        if (!resuming && fs::exists(run.root) && !holds_only_a_lock(run.root)) refuse_unfinished();
        if (resuming && !fs::exists(state_path))
            fail("--resume: no ", state_path.string(), " (not a ppolab run folder)");
        // One process per run folder, for the whole study: the steps below run
        // in this process and take the same lock again (util/run_lock.h).
        lock = open_run_folder(run.root, resuming ? RunAccess::write : RunAccess::create);
        if (!resuming && fs::exists(state_path)) refuse_unfinished();  // another `run --out` got there first
        if (fs::exists(run.results())) fail("refusing to overwrite the finished run ", run.root.string());

        // The study's options: given once for a new run, recorded, reused on resume.
        if (resuming) {
            state = read_json_file(state_path);
            validate_run_state(state, state_path);
            for (const char* o : {"preset", "config", "set", "model", "replicates", "compare", "ablations"})
                if (args.has(o)) fail("--resume continues with the recorded options; --", o, " cannot change them");
        } else {
            state = {{"format", "ppolab-run-state"}, {"options", new_options}, {"steps", json::object()}};
            write_json_atomic(state_path, state);
        }
    }
    parallel::barrier();
    if (!world.writer()) {
        state = read_json_file(state_path);
        validate_run_state(state, state_path);
    }
    const json& options = state["options"];
    std::vector<std::string> common = {"--preset", options["preset"].get<std::string>()};
    for (const auto& f : options["config"]) common.insert(common.end(), {"--config", f.get<std::string>()});
    for (const auto& s : options["set"]) common.insert(common.end(), {"--set", s.get<std::string>()});
    const json config = study_config_of(options);
    std::vector<std::string> model_arg;
    if (!options["model"].is_null()) model_arg = {"--model", options["model"].get<std::string>()};

    const int64_t replicates = StudyConfig::parse(config).replicates.count;
    engine_apply(StudyConfig::parse(config).engine);  // the dispatch report below names the mode
    if (resuming) check_study_records(run, config);   // before any step
    if (resuming && world.writer()) remove_leftover_temporaries(run, study_chains(run, StudyConfig::parse(config)));
    if (world.size > 1 && (args.has("votes") || !state["options"].value("feedback", json()).is_null()))
        fail("a judge from votes (--votes) is trained by one process; under mpirun (", world.size,
             " ranks) `ppolab run` trains the judge from the corpus's pairs only: continue this run without mpirun");
    const json feedback = feedback_option(args, state, run, replicates);
    if (!feedback.is_null() && state["options"].value("feedback", json()) != feedback) {
        state["options"]["feedback"] = feedback;
        write_json_atomic(state_path, state, Overwrite::replace);
    }

    std::printf("%s", dispatch_text(dispatch_report()).c_str());
    const std::vector<std::string> compared =
        options.contains("compare") ? options["compare"].get<std::vector<std::string>>() : std::vector<std::string>{};
    std::vector<Step> steps = study_steps(run, config, common, compared);
    for (Step& s : steps)
        if (s.argv.front() == "reward") {
            const std::vector<std::string> f = feedback_args(feedback);
            s.argv.insert(s.argv.end(), f.begin(), f.end());
        }
    for (size_t index = 0; index < steps.size(); ++index) {
        const Step& step = steps[index];
        if (state["steps"].contains(step.name)) continue;
        if (!until.empty() && stage_rank(step_stage(step.name)) > stage_rank(until)) {
            Progress::set_context("");
            print_until_stop(until,
                             "step " + std::to_string(index + 1) + "/" + std::to_string(steps.size()) + " (" +
                                 step_label(step.name) + ")",
                             run, common, feedback, replicates);
            return 0;
        }
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
        if (cmd != "prepare" && cmd != "pretrain" && cmd != "resume-check")
            argv.insert(argv.end(), model_arg.begin(), model_arg.end());
        std::string line = "ppolab " + cmd;
        for (const auto& a : argv) line += " " + a;
        // Interrupted after the step's last output but before it was recorded:
        // the step is done (a checkpoint it had no time to remove goes now).
        if (resuming && fs::exists(step.finished)) {
            std::printf("-- %s finished before the interruption (%s exists); recorded\n", step.name.c_str(),
                        step.finished.c_str());
            state["steps"][step.name] = {{"command", line}, {"seconds", nullptr}};
            if (world.writer()) {
                for (const fs::path& ck : step.checkpoints) remove_checkpoint(ck);
                write_json_atomic(state_path, state, Overwrite::replace);
            }
            continue;
        }
        std::string label =
            "step " + std::to_string(index + 1) + "/" + std::to_string(steps.size()) + " " + step_label(step.name);
        Progress::set_context(label);
        std::printf("\n== %s\n>> %s\n", label.c_str(), line.c_str());
        std::fflush(stdout);
        const auto t0 = Clock::now();
        // Under mpirun every rank runs the data-parallel steps; the others run on
        // rank 0 while the rest wait (a failing rank ends the job: main.cpp).
        const bool here = world.size == 1 || data_parallel(cmd) || world.writer();
        int rc = 0;
        if (here) {
            std::optional<parallel::SoloScope> alone;  // rank 0 alone: no collective in this step
            if (world.size > 1 && !data_parallel(cmd)) alone.emplace();
            rc = it->second.run(Args(argv, it->second.flags));
        }
        parallel::barrier();
        const double secs = since(t0);
        if (rc != 0)
            fail("step ", step.name, " failed (exit ", rc, "); fix the cause, then `ppolab run --resume ",
                 run.root.string(), "`");
        state["steps"][step.name] = {{"command", line}, {"seconds", secs}};
        if (world.writer()) write_json_atomic(state_path, state, Overwrite::replace);
    }
    Progress::set_context("");
    if (!world.writer()) return 0;  // rank 0 gathers the results
    check_study_records(run, config);
    remove_leftover_temporaries(run, study_chains(run, StudyConfig::parse(config)));
    const json results =
        reading_json("gathering " + run.results().string() + " from the stage records under " + run.root.string(),
                     [&] { return gather_results(run, config, state, steps); });
    write_json_atomic(run.results(), results);
    // The terminal also shows the two parts of PPO − SFT's exact interval (findings.json).
    json shown = results;
    if (const json findings = read_or_null(run.findings()); findings.contains("ppo_minus_sft_parts"))
        shown["ppo_minus_sft_parts"] = findings["ppo_minus_sft_parts"];
    std::printf("\n%s", study_summary(shown, run.root).c_str());
    return 0;
}

}  // namespace

constexpr const char* kRunHelp = R"(
The whole study, one ppolab command after another, each printed before it runs
and recorded in RUN/run-state.json. With one replicate (--replicates 1):

  1 prepare                  the corpus (learn/, eval/, gold/) and its manifest
  2 pretrain                 the tiny base model and its tokenizer (tiny preset only)
  3-5 sft interrupt|continuous|resume      supervised fine-tuning, three times
  6 resume-check sft         the resumed state equals the continuous one, bit for bit
  7-9 reward interrupt|continuous|resume   the Bradley-Terry judge, three times
  10 resume-check reward
  11 reward-test             the judge on the 180 held-out test pairs
  12-14 ppo interrupt|continuous|resume    PPO against the frozen judge, three times
  15 resume-check ppo
  16 evaluate                greedy generations of SFT and PPO on test and probe prompts
  17 overoptimisation        PPO's snapshots and best-of-n from SFT: gold and proxy
                             against the exact KL to SFT
  18 exercise                the reward-shortcut exercise
  19 findings                intervals, the verdict, the over-optimisation fits
  20 report                  RUN/report.html
Then RUN/results.json and a table on the terminal. (Without pretraining the steps
are numbered from 1 to 19.)

With K replicates (the tiny preset's default is 5; replicates.count): prepare and
pretrain once, then K independent chains sft -> reward -> ppo -> evaluate ->
overoptimisation -> exercise in RUN/replicates/<k>/, chain k with study.seed + k
(every stage seed derives from it: `ppolab config --explain study.seed`). Only
chain 0 proves exact resume (interrupt, continuous, resume and the checks); the
others run each stage once. Then findings (over all chains) and the report.

With --compare ppo,dpo,rloo,grpo,bon every chain also trains DPO (from SFT on the
train pairs), RLOO and GRPO (against the same frozen judge, no critic), once each,
after PPO; evaluate scores them with SFT and PPO on the same held-out prompts, and
findings puts them in one table (gold and proxy gains over SFT, exact KL, gold
against PPO, each with its interval) beside best-of-n from the over-optimisation
samples. PPO and best-of-n are always in the study.

Presets (--preset):
  tiny     the default: a ~3 M-parameter Qwen2-architecture model ppolab pretrains
           itself; 5 replicates (about 15 minutes on 2 cores, see the README;
           --replicates 1 takes about 5)
  seed     SPEC's exact numbers on Qwen2.5-0.5B-Instruct (--model DIR with its
           weights); one replicate, an hour or more on 2 cores (each stage
           once took 63 minutes on a 2-core Zen 4, about 122 on a 2-core
           Emerald Rapids: BENCHMARKS.md, sessions 14 and 16)
  generic  the seed's settings for any Qwen2-family folder (--model DIR)

Options:
  --out DIR       a new run folder (default runs/default); an existing one is refused
  --resume DIR    continue an interrupted run from its newest checkpoint (kill -9 too)
  --replicates K  K independent chains (replicates.count = K); 1: one chain in RUN itself
  --config F      a JSON overlay on the preset; --set key=value one key
                  (`ppolab config --preset P` prints every key)
  --model DIR     a Hugging Face Qwen2 folder (seed and generic presets)
  --compare LIST  also train and compare these baselines (ppo,dpo,rloo,grpo,bon; above)
  --ablations     also train PPO with each design switch on alone (advantage whitening,
                  value clipping, k3 KL in the loss: RUN/ppo-whiten, ppo-vclip, ppo-k3)
                  and compare them the same way
  --until STAGE   stop before the first step after STAGE's steps (prepare, pretrain,
                  sft, reward, ppo, evaluate, overoptimisation, exercise; with several
                  replicates, the first chain's); `--resume` goes on, --until again or not
  --votes FILE... --candidates FILE [--feedback-kind human|ai]
                  with --resume: the judge learns from these votes (SPEC §8) instead of
                  the corpus's pairs; recorded in run-state.json, checked by the reward
                  steps, one chain only (--replicates 1)

The study from votes, in two commands and the voting between them:
  ppolab run --out runs/people --replicates 1 --until sft      # corpus, base, SFT
  ppolab feedback export --run runs/people --out candidates.json
  ppolab feedback serve --candidates candidates.json --out votes.json   # people vote
  ppolab run --resume runs/people --votes votes.json --candidates candidates.json

Examples:
  ppolab run                                   # the embedded study into runs/default
  ppolab run --out /tmp/quick --replicates 1 --set ppo.iterations=20
  ppolab run --resume runs/default             # after an interruption
  ppolab run --preset seed --model /models/Qwen2.5-0.5B-Instruct --out runs/seed
)";

static Command run_cmd(
    "run",
    "run [--preset P] [--model DIR] [--out DIR] [--replicates K] [--compare LIST] [--ablations] [--config F]\n"
    "    [--set k=v] [--until STAGE]\n"
    "    | run --resume DIR [--until STAGE] [--votes FILE... --candidates FILE [--feedback-kind human|ai]]\n"
    "                            the whole study (default: embedded tiny model, runs/default)",
    {"ablations"}, run_study, kRunHelp);

}  // namespace ppolab::cli
