// cmd_prepare.cpp — `ppolab prepare`: write OfficeHelpPrefs-v1 (SPEC §1) in
// the learn/ eval/ gold/ layout of SPEC §7, with its audit and manifest;
// `--verify DIR` re-checks a written corpus against its manifest.
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/stage_options.h"
#include "data/corpus.h"
#include "data/guarded_fs.h"
#include "training/config_types.h"
#include "training/run_layout.h"
#include "training/study_config.h"
#include "util/error.h"
#include "util/json.h"

namespace ppolab::cli {

static void print_audit(const json& a, const std::string& dir) {
    const json& p = a.at("pairs_by_split");
    const json& f = a.at("families_by_split");
    std::printf("corpus %s (%s, seed %lld) in %s\n", a.at("dataset").get<std::string>().c_str(),
                a.at("study_revision").get<std::string>().c_str(), static_cast<long long>(a.at("seed").get<int64_t>()),
                dir.c_str());
    std::printf("  signal: %s\n", a.at("signal").get<std::string>().c_str());
    std::printf("  pairs %lld: train %lld / validation %lld / test %lld (families %lld / %lld / %lld, disjoint)\n",
                (long long)a.at("pairs").get<int64_t>(), (long long)p.at("train").get<int64_t>(),
                (long long)p.at("validation").get<int64_t>(), (long long)p.at("test").get<int64_t>(),
                (long long)f.at("train").get<int64_t>(), (long long)f.at("validation").get<int64_t>(),
                (long long)f.at("test").get<int64_t>());
    std::printf("  demonstrations %lld, rollout prompts %lld, distinct pair/demonstration/rollout prompts %lld\n",
                (long long)a.at("warmstart_demonstrations").get<int64_t>(),
                (long long)a.at("rollout_prompts").get<int64_t>(),
                (long long)a.at("distinct_pair_demo_rollout_prompts").get<int64_t>());
    std::printf("  probes: %lld rows over %lld contexts (%s)\n", (long long)a.at("probe_rows").get<int64_t>(),
                (long long)a.at("unique_probe_contexts").get<int64_t>(),
                a.at("probe_factorial").get<std::string>().c_str());
    std::printf("  rubric: %lld chosen pass, %lld rejected fail, %lld probe labels agree; scope: %s\n",
                (long long)a.at("chosen_pass_rubric").get<int64_t>(),
                (long long)a.at("rejected_fail_rubric").get<int64_t>(),
                (long long)a.at("probe_labels_agree_with_rubric").get<int64_t>(),
                a.at("rubric_scope").get<std::string>().c_str());
}

static int run_prepare(const Args& args) {
    args.allow_only({"out", "seed", "verify", "run", "preset", "config", "set"});
    if (!args.positional().empty()) fail("unexpected argument '", args.positional()[0], "' (see --help)");
    if (args.has("verify")) {
        for (const char* other : {"out", "run", "seed", "preset", "config", "set"})
            if (args.has(other)) fail("--verify DIR takes no other option (got --", other, ")");
        const fs::path dir = args.get("verify");
        if (!fs::is_directory(dir)) fail("--verify: '", dir.string(), "' is not a corpus folder");
        GuardedReader reader("prepare --verify", corpus_read_roots(dir, CorpusAccess::all));
        Manifest m = verify_corpus(reader, dir);
        print_audit(m.audit, dir.string());
        std::printf("verified: %zu files match manifest.json, the audit re-runs identically\n", m.files.size());
        return 0;
    }
    if (args.has("out") && args.has("run"))
        fail("give either --out DIR or --run RUN (the corpus goes to RUN/corpus), not both");
    // The corpus identity comes from the study config (corpus.revision,
    // corpus.study_revision, corpus.seed); --seed N overrides corpus.seed.
    // --run RUN: the corpus goes into RUN (created if needed), which this
    // command then holds; --out DIR writes no run folder.
    const StageOptions options = stage_options(args, args.has("out") ? RunAccess::read : RunAccess::create);
    const fs::path dir = args.has("out") ? fs::path(args.get("out")) : RunLayout{options.run}.corpus();
    const CorpusSection study_corpus = StudyConfig::parse(options.config).corpus;
    CorpusConfig config;
    config.dataset = study_corpus.revision;
    config.study_revision = study_corpus.study_revision;
    config.seed = args.get_int("seed", study_corpus.seed);
    ordered_json manifest = corpus_write(corpus_generate(config), dir);
    print_audit(json::parse(manifest["audit"].dump()), dir.string());
    std::printf("wrote %zu files + manifest.json (sha256 of every file and of %zu prompts)\n",
                corpus_file_names().size(), manifest["prompt_sha256"].size());
    return 0;
}

static Command prepare_cmd("prepare",
                           "prepare [--out DIR | --run RUN] [--preset P] [--config F] [--set k=v] [--seed N]\n"
                           "                            | prepare --verify DIR\n"
                           "                            write OfficeHelpPrefs-v1 to DIR (default RUN/corpus, RUN\n"
                           "                            runs/default): learn/ eval/ gold/ + manifest.json\n"
                           "                            with the SPEC audit; refuses an existing folder. --verify\n"
                           "                            re-hashes a corpus against its manifest and re-runs the audit",
                           {}, run_prepare);

}  // namespace ppolab::cli
