// cmd_feedback.cpp — `ppolab feedback export|serve|label-ai` (SPEC §8):
// candidate pairs from an SFT checkpoint, a local page where people vote on
// them, and a declared AI labeller (the rubric).
#include <cstdio>
#include <map>

#include "cli/command.h"
#include "cli/stage_options.h"
#include "data/corpus.h"
#include "data/guarded_fs.h"
#include "feedback/candidates.h"
#include "feedback/label_ai.h"
#include "feedback/serve.h"
#include "feedback/votes.h"
#include "training/feedback_stage.h"
#include "training/study.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ppolab::cli {

namespace {

int feedback_export(const Args& args) {
    args.allow_only(with_stage_options({"sft", "out"}));
    const fs::path out = args.get("out");
    // It writes only --out: into the run folder (and holding its lock) when --out lies there.
    StageOptions o =
        stage_options(args, path_inside(out, args.get("run", "runs/default")) ? RunAccess::write : RunAccess::read);
    if (fs::exists(out)) fail("refusing to overwrite ", out.string(), " (choose a new --out)");
    Study study = Study::open(o.config, o.run, o.model, "feedback-export", StageScope::learn);
    const fs::path sft = args.get("sft", study.run.final_dir("sft").string());
    CandidateFile file = export_candidates(study, sft, out);
    std::map<std::string, int> splits;
    for (const CandidatePair& p : file.pairs) ++splits[p.split];
    std::printf(
        "feedback export: %zu pairs (train %d, validation %d, test %d), %lld prompts skipped because both "
        "samples were identical\ncheckpoint_sha256 %s (sha256 of %s/learned.safetensors)\nwrote %s\n",
        file.pairs.size(), splits["train"], splits["validation"], splits["test"],
        static_cast<long long>(file.skipped_identical), file.checkpoint_sha256.c_str(), sft.c_str(), out.c_str());
    return 0;
}

int feedback_serve(const Args& args) {
    args.allow_only({"candidates", "out", "port", "guide"});
    ServeOptions o;
    o.candidates = args.get("candidates");
    o.out = args.get("out");
    if (args.has("guide")) o.guide = fs::path(args.get("guide"));
    const int64_t port = args.get_int("port", 8765);
    if (port < 0 || port > 65535) fail("--port must be in [0, 65535], got ", port);
    o.port = static_cast<int>(port);
    serve_votes(o);
    return 0;
}

int feedback_label_ai(const Args& args) {
    args.allow_only({"candidates", "labeler", "out", "run"});
    const std::string labeler = args.get("labeler");
    if (labeler != "rubric") fail("--labeler must be rubric (the one AI labeller ppolab has), got '", labeler, "'");
    const fs::path candidates_path = args.get("candidates"), out = args.get("out");
    if (fs::exists(out)) fail("refusing to overwrite ", out.string(), " (choose a new --out)");
    const std::string bytes = read_input_file(candidates_path, InputKind::candidates);
    const CandidateFile candidates = parse_candidates(bytes, candidates_path.string());
    // The rubric needs each prompt's expected action: the corpus's gold labels.
    RunLayout run{args.get("run", "runs/default")};
    const RunLock lock = open_run_folder(run.root, path_inside(out, run.root) ? RunAccess::write : RunAccess::read);
    GuardedReader reader("feedback-label-ai", corpus_read_roots(run.corpus(), CorpusAccess::all));
    const Manifest manifest = load_manifest(reader, run.corpus());
    const GoldLabels gold = load_gold(reader, run.corpus());
    for (const CandidatePair& p : candidates.pairs) {
        auto it = manifest.prompt_sha256.find(p.prompt_id);
        if (it == manifest.prompt_sha256.end())
            fail(candidates_path.string(), ": pair '", p.id, "': prompt_id '", p.prompt_id, "' is not a prompt of ",
                 run.corpus().string());
        if (it->second != sha256_hex(p.prompt))
            fail(candidates_path.string(), ": pair '", p.id, "': the prompt differs from the corpus's prompt '",
                 p.prompt_id, "'");
    }
    const VoteFile votes = label_with_rubric(
        candidates, sha256_hex(bytes), [&](const CandidatePair& p) { return gold.at(p.prompt_id).expected_action; });
    write_json_atomic(out, votes_to_json(votes));
    std::map<std::string, std::map<std::string, int>> counts;  // split -> choice -> n
    for (const Vote& v : votes.votes) ++counts[candidates.find(v.pair_id)->split][vote_choice_name(v.choice)];
    std::printf("feedback label-ai (%s): %zu votes\n", votes.labeler.c_str(), votes.votes.size());
    for (const char* split : kFeedbackSplits)
        std::printf("  %-10s a %d  b %d  tie %d  reject %d\n", split, counts[split]["a"], counts[split]["b"],
                    counts[split]["tie"], counts[split]["reject"]);
    std::printf("wrote %s (feedback_kind ai, human_attestation false)\n", out.c_str());
    return 0;
}

}  // namespace

static Command feedback_cmd(
    "feedback",
    "feedback export --run DIR [--sft DIR] --out FILE | "
    "serve --candidates FILE --out VOTES.json [--port P] [--guide TEXT_FILE] | "
    "label-ai --candidates FILE --labeler rubric --run DIR --out VOTES.json   votes on sampled pairs (SPEC §8)",
    {}, [](const Args& args) {
        if (args.positional().size() != 1)
            fail("feedback needs one subcommand: export, serve or label-ai (see ppolab feedback --help)");
        const std::string sub = args.positional()[0];
        if (sub == "export") return feedback_export(args);
        if (sub == "serve") return feedback_serve(args);
        if (sub == "label-ai") return feedback_label_ai(args);
        fail("feedback: unknown subcommand '", sub, "'; expected export, serve or label-ai");
    });

}  // namespace ppolab::cli
