// cmd_pretrain.cpp — `ppolab pretrain`: the embedded tiny base model (SPEC §10).
//
//   ppolab pretrain --run RUN [--preset P] [--config FILE] [--set key=value] [--seed N]
//   ppolab pretrain --out DIR [...same options]
//
// With --run the folder is RUN/base and RUN/corpus/manifest.json (read
// through the stage's leak guard) supplies the prompt sha256 set the base
// corpus must avoid; with --out alone the corpus is generated in memory to
// get the same set. Numbers come from the study config's "pretrain" object
// (--set pretrain.lr=…); the fields only pretraining knows (conversations,
// prose, init_stddev, check_prompts, check_max_new_tokens) are set the same
// way (--set pretrain.conversations=…).
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/stage_options.h"
#include "data/base_corpus.h"
#include "data/corpus.h"
#include "data/guarded_fs.h"
#include "training/config_types.h"
#include "training/pretrain.h"
#include "training/run_layout.h"
#include "training/study_config.h"
#include "training/tensorboard.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ppolab::cli {

// The base corpus of a pretrain config, as documents.
static std::vector<PretrainDocument> base_documents(const BaseCorpus& base) {
    std::vector<PretrainDocument> docs;
    for (const auto& c : base.conversations) docs.push_back({c.prompt, c.response, ""});
    for (const auto& p : base.prose) docs.push_back({"", "", p});
    for (const auto& k : base.knowledge) docs.push_back({"", "", k});
    return docs;
}

static int run_pretrain(const Args& args) {
    args.allow_only(with_stage_options({"out", "seed"}));
    if (!args.positional().empty()) fail("unexpected argument '", args.positional()[0], "' (see --help)");
    if (args.has("out") && args.has("run")) fail("give --out DIR or --run RUN (the base goes to RUN/base), not both");
    if (args.has("model")) fail("pretrain trains its own base; --model is not an option here");

    // Sets of fields only pretraining knows go to PretrainConfig; the rest to the study config.
    const ordered_json known = PretrainConfig{}.to_json();
    std::vector<std::string> study_sets, own_sets;
    const json preset = preset_config(args.get("preset", kDefaultPreset));
    for (const std::string& s : args.all("set")) {
        const size_t eq = s.find('=');
        const std::string key = eq == std::string::npos ? s : s.substr(0, eq);
        const std::string prefix = "pretrain.";
        if (key.rfind(prefix, 0) == 0) {
            const std::string field = key.substr(prefix.size());
            const bool in_study = preset.contains("pretrain") && preset.at("pretrain").contains(field);
            if (!in_study && known.contains(field)) {
                own_sets.push_back(s.substr(prefix.size()));
                continue;
            }
        }
        study_sets.push_back(s);
    }
    std::vector<fs::path> files;
    for (const std::string& f : args.all("config")) files.emplace_back(f);
    json study = effective_config(args.get("preset", kDefaultPreset), files, study_sets);
    // --replicate K: a replicate that pretrains its own base (replicates.repretrain_base).
    const RunLayout run = run_layout(args, study);
    const StudyConfig study_config = StudyConfig::parse(study);
    engine_apply(study_config.engine);
    if (run.is_replicate() && !run.own_base)
        fail("--replicate ", args.get("replicate"), ": the replicates share the study's base ",
             "(replicates.repretrain_base = false); pretrain it once, without --replicate");
    if (!study_config.pretrain.enabled)
        fail("preset '", args.get("preset", kDefaultPreset),
             "' does not pretrain (pretrain.enabled = false): ", "it loads a given model");
    PretrainConfig config = PretrainConfig::from_study(study);
    config.seed = study_config.seed(static_cast<int64_t>(config.seed));  // the study's seed rule (config_types.h)
    for (const std::string& s : own_sets) config.set(s);
    if (args.has("seed")) config.seed = static_cast<uint64_t>(args.get_int("seed", 0));

    // The corpus whose prompts the base must never see, and its validation prompts.
    fs::path out;
    Manifest manifest;
    std::string manifest_where;
    ordered_json provenance = ordered_json::object();
    RunLock lock;  // --run RUN: held while RUN/base is trained
    if (args.has("out")) {
        out = args.get("out");
        const Corpus corpus = corpus_generate();
        manifest.config = corpus.config;
        for (const auto& p : corpus.pairs) manifest.prompt_sha256[p.id] = sha256_hex(p.prompt);
        for (const auto& d : corpus.demonstrations) manifest.prompt_sha256[d.id] = sha256_hex(d.prompt);
        for (const auto& r : corpus.rollouts) manifest.prompt_sha256[r.id] = sha256_hex(r.prompt);
        for (const auto& p : corpus.probes) manifest.prompt_sha256[p.id] = sha256_hex(p.prompt);
        manifest_where = "the corpus generated in memory";
        provenance["corpus"] = "generated in memory (no --run)";
    } else {
        lock = open_run_folder(run.study(), RunAccess::write);
        out = run.base();
        GuardedReader reader("pretrain", corpus_read_roots(run.corpus(), CorpusAccess::learn));
        manifest = load_manifest(reader, run.corpus());
        manifest_where = (run.corpus() / "manifest.json").string();
        provenance["corpus"] = manifest_where;
        provenance["manifest_sha256"] = sha256_file(run.corpus() / "manifest.json");
    }
    if (fs::exists(out)) fail("pretrain: refusing to overwrite existing folder '", out.string(), "'");
    const Corpus corpus = corpus_generate(manifest.config);
    std::vector<CheckPrompt> check;
    for (const auto& p : corpus.pairs) {
        if (p.split != "validation") continue;
        auto it = manifest.prompt_sha256.find(p.id);
        if (it == manifest.prompt_sha256.end() || it->second != sha256_hex(p.prompt))
            fail(manifest_where, ": validation prompt '", p.id, "' is not the one its corpus config generates ",
                 "(prompt_sha256 differs or is missing)");
        if (static_cast<int64_t>(check.size()) < config.check_prompts)
            check.push_back({p.id, p.prompt, p.expected_action});
    }

    // 1. the base corpus, checked against every corpus prompt
    BaseCorpusConfig bc;
    bc.seed = config.seed;
    bc.conversations = static_cast<int>(config.conversations);
    bc.prose_lines = static_cast<int>(config.prose);
    bc.world_knowledge = config.world_knowledge;
    const BaseCorpus base = base_corpus_generate(bc);
    base_corpus_check(base, manifest);
    const std::vector<PretrainDocument> docs = base_documents(base);
    check_base_prompts(docs, manifest.prompt_sha256, manifest_where);
    provenance["base_corpus_config"] = base_corpus_config_to_json(bc);
    provenance["base_corpus_stats"] = base_corpus_stats(base);
    provenance["study_config"] = config_identity(study);

    // 2–7.
    std::fprintf(stderr, "pretrain: %zu documents (%zu conversations), %lld updates of %lld x %lld tokens -> %s\n",
                 docs.size(), base.conversations.size(), static_cast<long long>(config.updates()),
                 static_cast<long long>(config.batch_rows), static_cast<long long>(config.sequence_length),
                 out.string().c_str());
    // Crash safety: checkpoints in <out>.checkpoints/ (training/crash_checkpoints.h).
    const PretrainReport rep = pretrain_run(config, docs, check, out, provenance, nullptr,
                                            {{}, study_config.checkpoint.pretrain_every_updates});
    const json& tr = rep.json.at("training");
    if (!args.has("out")) write_tensorboard_events(run.tensorboard("pretrain", "run"), pretrain_scalars(tr));
    std::printf(
        "pretrained %s: %lld parameters, vocab %lld, %lld updates, %lld tokens in %.1f s (%.0f tok/s), "
        "final loss %.4f, total %.1f s\n",
        out.string().c_str(), static_cast<long long>(rep.json.at("model").at("parameters").get<int64_t>()),
        static_cast<long long>(rep.json.at("tokenizer").at("vocab_size").get<int64_t>()),
        static_cast<long long>(tr.at("updates").get<int64_t>()),
        static_cast<long long>(tr.at("tokens_seen").get<int64_t>()), rep.train_seconds, rep.tokens_per_second,
        rep.final_loss, rep.seconds);
    const json& ck = rep.json.at("check");
    if (!ck.is_null())
        for (const char* mode : {"greedy", "sampled_temperature_1"}) {
            const json& m = ck.at(mode);
            std::printf(
                "  %-22s on %lld validation prompts: recognised %.1f%%, relevant %.1f%% (chance 16.7%%), "
                "success %.1f%%, %lld distinct answers\n",
                mode, static_cast<long long>(m.at("n").get<int64_t>()), 100 * m.at("recognized_rate").get<double>(),
                100 * m.at("relevant_rate").get<double>(), 100 * m.at("success_rate").get<double>(),
                static_cast<long long>(m.at("distinct_responses").get<int64_t>()));
        }
    return 0;
}

static Command pretrain_cmd(
    "pretrain",
    "pretrain (--run RUN | --out DIR) [--preset P] [--config F] [--set pretrain.k=v] [--seed N]\n"
    "                            train the tiny base (tokenizer + full-parameter Qwen2) on the base\n"
    "                            corpus; writes a Hugging Face folder (RUN/base) with pretrain.json",
    {}, run_pretrain);

}  // namespace ppolab::cli
