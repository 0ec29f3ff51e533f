#include "training/feedback_stage.h"

#include <cmath>
#include <map>
#include <set>

#include "model/generate.h"
#include "model/scoring.h"
#include "training/learned_io.h"
#include "training/losses.h"
#include "training/roles.h"
#include "training/study_config.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/rng.h"
#include "util/sha256.h"

namespace ppolab {

std::string sft_checkpoint_sha256(const Study& s, const fs::path& sft_dir) {
    const fs::path file = sft_dir / "learned.safetensors";
    if (!s.reader().exists(file))
        fail("no SFT checkpoint at ", sft_dir.string(), " (", file.string(), " is missing; run `ppolab sft --run ",
             s.run.root.string(), "` first)");
    return sha256_hex(s.reader().read(file));
}

namespace {

// The text of sampled ids as evaluation shows it: EOS dropped, strict UTF-8
// decoding when possible.
std::string response_text(const Study& s, const std::vector<int32_t>& ids, const std::string& finish) {
    return s.tokenizer().decode_response(ids, finish == "eos", s.eos_id).text;
}

struct PromptChoice {
    std::string id, prompt, source;
};

}  // namespace

CandidateFile export_candidates(const Study& s, const fs::path& sft_dir, const fs::path& out) {
    if (fs::exists(out)) fail("refusing to overwrite ", out.string(), " (choose a new --out)");
    const FeedbackConfig& c = s.cfg.feedback;
    const int64_t wanted = c.pairs;
    const uint64_t candidate_seed = static_cast<uint64_t>(c.candidate_seed);
    const uint64_t split_seed = static_cast<uint64_t>(c.split_seed);
    const double train_fraction = c.train_fraction;
    const double validation_fraction = c.validation_fraction;

    const std::string checkpoint = sft_checkpoint_sha256(s, sft_dir);
    Role policy = load_role(sft_dir, "sft", RoleKind::policy, s);
    Qwen2 model(s.base, &policy.lora);

    // The pool: learn/ train rollout prompts and validation-pair prompts.
    std::vector<PromptChoice> pool;
    for (const PromptRow& p : load_rollout_prompts(s.reader(), s.run.corpus()))
        pool.push_back({p.id, p.prompt, "learn/rollout_prompts.jsonl"});
    for (const PreferencePair& p : load_pairs(s.reader(), s.run.corpus(), PairSplit::validation))
        pool.push_back({p.id, p.prompt, "learn/validation_pairs.jsonl"});
    Philox pick(candidate_seed, 6), sampling(candidate_seed, 7);
    const std::vector<int64_t> order = pick.permutation(static_cast<int64_t>(pool.size()));

    GenerationOptions gen;
    gen.max_new_tokens = s.limits.max_response;
    gen.eos_id = s.eos_id;
    gen.pad_id = s.pad_id;
    gen.greedy = false;  // temperature 1, full vocabulary (SPEC §4)

    CandidateFile file;
    file.checkpoint_sha256 = checkpoint;
    std::map<std::string, int64_t> by_source;
    const size_t batch_prompts = 8;
    size_t next = 0;
    Progress bar("feedback export", wanted);
    while (static_cast<int64_t>(file.pairs.size()) < wanted && next < order.size()) {
        std::vector<const PromptChoice*> batch;
        std::vector<std::vector<int32_t>> rows;
        while (batch.size() < batch_prompts && next < order.size()) {
            const PromptChoice& p = pool[static_cast<size_t>(order[next++])];
            std::vector<int32_t> ids = s.encode_prompt(p.prompt);
            if (static_cast<int64_t>(ids.size()) > s.limits.max_prompt)
                fail("prompt ", p.id, ": ", ids.size(), " tokens, over limits.max_prompt ", s.limits.max_prompt,
                     " (refused, never truncated)");
            batch.push_back(&p);
            rows.push_back(ids);  // answer a
            rows.push_back(ids);  // answer b
        }
        const std::vector<Generation> gens = generate(model, rows, gen, sampling);
        for (size_t k = 0; k < batch.size() && static_cast<int64_t>(file.pairs.size()) < wanted; ++k) {
            const Generation& a = gens[2 * k];
            const Generation& b = gens[2 * k + 1];
            if (a.tokens == b.tokens) {
                ++file.skipped_identical;
                continue;
            }
            CandidatePair pair;
            pair.prompt_id = batch[k]->id;
            pair.prompt = batch[k]->prompt;
            pair.a = {response_text(s, a.tokens, a.finish_reason), a.tokens, a.finish_reason};
            pair.b = {response_text(s, b.tokens, b.finish_reason), b.tokens, b.finish_reason};
            ++by_source[batch[k]->source];
            file.pairs.push_back(std::move(pair));
            bar.update(static_cast<int64_t>(file.pairs.size()));
        }
    }
    bar.finish();
    if (file.pairs.empty()) fail("feedback export: no pair with two different responses (every sample was identical)");
    const std::vector<std::string> splits = assign_feedback_splits(static_cast<int64_t>(file.pairs.size()), split_seed,
                                                                   train_fraction, validation_fraction);
    std::map<std::string, int64_t> per_split;
    for (size_t i = 0; i < file.pairs.size(); ++i) {
        char id[32];
        std::snprintf(id, sizeof id, "pair-%04zu", i);
        file.pairs[i].id = id;
        file.pairs[i].split = splits[i];
        file.index[id] = i;
        ++per_split[splits[i]];
    }
    file.source = {
        {"created_by", "ppolab feedback export"},
        {"sft_dir", sft_dir.string()},
        {"checkpoint_sha256_of", "learned.safetensors"},
        {"sft_learned_identity", policy.learned_identity()},
        {"study", s.identity()},
        {"prompt_pool", by_source.empty() ? json::object() : json(by_source)},
        {"prompt_sources", {"learn/rollout_prompts.jsonl (train)", "learn/validation_pairs.jsonl (validation)"}},
        {"sampling",
         {{"temperature", 1.0}, {"max_new_tokens", s.limits.max_response}, {"candidate_seed", candidate_seed}}},
        {"splits",
         {{"split_seed", split_seed},
          {"train_fraction", train_fraction},
          {"validation_fraction", validation_fraction},
          {"pairs", per_split}}},
        {"pairs_requested", wanted}};
    write_json_atomic(out, candidates_to_json(file));
    return file;
}

bool judge_learns_from_votes(const RunLayout& run) { return fs::exists(run.feedback_labels()); }

PreparedVotes prepare_votes(const Study& s, StageMode mode, const fs::path& candidates_path,
                            const std::vector<fs::path>& vote_paths, const std::string& kind) {
    const FeedbackConfig& c = s.cfg.feedback;
    // 1. the files and every SPEC §8 rule (outside input: read directly)
    VoteSource candidate_source{candidates_path.string(), read_input_file(candidates_path, InputKind::candidates)};
    const CandidateFile candidates = parse_candidates(candidate_source.bytes, candidate_source.path);
    std::vector<VoteSource> sources;
    for (const fs::path& p : vote_paths) sources.push_back({p.string(), read_input_file(p, InputKind::votes)});
    VoteRules rules{kind, sft_checkpoint_sha256(s, s.run.final_dir("sft")), c.min_train_labels, c.min_validation_labels,
                    c.min_test_labels};
    PreparedVotes out;
    out.collection = collect_votes(candidates, candidate_source, sources, rules);

    // 2. every labelled response against this model
    auto check_response = [&](const CandidatePair& p, const char* side, const CandidateResponse& r) {
        const std::string at = candidate_source.path + ": pair '" + p.id + "' answer " + side;
        for (int32_t id : r.token_ids)
            if (id < 0 || id >= s.base.config.vocab_size)  // sampling may pick any embedding row
                fail(at, ": token id ", id, " is outside the model's vocabulary [0, ", s.base.config.vocab_size, ")");
        const bool ends_eos = r.token_ids.back() == s.eos_id;
        if ((r.finish_reason == "eos") != ends_eos)
            fail(at, ": finish_reason \"", r.finish_reason, "\" but the last token id is ", r.token_ids.back(),
                 " (EOS is ", s.eos_id, ")");
        const std::string text = response_text(s, r.token_ids, r.finish_reason);
        if (text != r.text)
            fail(at, ": field 'text' differs from the decoding of its token_ids (\"", text,
                 "\"); the text people saw must be what the judge learns");
        try {
            (void)s.batch({ScoringRow{s.encode_prompt(p.prompt), r.token_ids}});
        } catch (const Error& e) {
            fail(at, ": ", e.what());
        }
    };
    auto label_json = [&](const BinaryLabel& l, VotePair* pair) {
        const CandidatePair& p = *candidates.find(l.pair_id);
        check_response(p, "a", p.a);
        check_response(p, "b", p.b);
        const CandidateResponse& chosen = l.choice == VoteChoice::a ? p.a : p.b;
        const CandidateResponse& rejected = l.choice == VoteChoice::a ? p.b : p.a;
        if (pair) *pair = VotePair{l.pair_id + "/" + l.participant, p.prompt, chosen.token_ids, rejected.token_ids};
        return json{{"pair_id", l.pair_id},
                    {"participant", l.participant},
                    {"split", l.split},
                    {"choice", vote_choice_name(l.choice)},
                    {"timestamp", l.timestamp},
                    {"prompt_id", p.prompt_id},
                    {"prompt", p.prompt},
                    {"chosen", {{"text", chosen.text}, {"token_ids", chosen.token_ids}}},
                    {"rejected", {{"text", rejected.text}, {"token_ids", rejected.token_ids}}}};
    };
    json train = json::array(), validation = json::array(), test = json::array();
    for (const BinaryLabel& l : out.collection.train) train.push_back(label_json(l, &out.data.train.emplace_back()));
    for (const BinaryLabel& l : out.collection.validation)
        validation.push_back(label_json(l, &out.data.validation.emplace_back()));
    for (const BinaryLabel& l : out.collection.test) test.push_back(label_json(l, nullptr));
    const json& prov = out.collection.provenance;
    out.labels = {{"format", 1},        {"feedback_kind", kind}, {"checkpoint_sha256", candidates.checkpoint_sha256},
                  {"provenance", prov}, {"train", train},        {"validation", validation}};
    out.test_labels = {{"format", 1},
                       {"feedback_kind", kind},
                       {"checkpoint_sha256", candidates.checkpoint_sha256},
                       {"provenance", prov},
                       {"test", test}};
    const std::string labels_bytes = out.labels.dump(2) + "\n", test_bytes = out.test_labels.dump(2) + "\n";
    out.data.data_identity = {{"feedback", prov},
                              {"labels_file", "reward/feedback.json"},
                              {"labels_sha256", sha256_hex(labels_bytes)},
                              {"test_labels_file", "feedback/test_votes.json"},
                              {"test_labels_sha256", sha256_hex(test_bytes)}};

    // 3. the run folder: one source of judge per run, nothing overwritten
    const RunLayout& run = s.run;
    const std::string mode_name = stage_mode_name(mode);
    for (const fs::path& p : {run.state("reward", mode_name), run.report("reward", mode_name)})
        if (fs::exists(p)) fail("refusing to overwrite ", p.string(), " (a finished stage output)");
    if (mode == StageMode::continuous && fs::exists(run.final_dir("reward")))
        fail("refusing to overwrite ", run.final_dir("reward").string());
    if (!fs::exists(run.feedback_labels())) {
        for (const char* m : {"interrupt", "continuous", "resume"})
            if (fs::exists(run.report("reward", m)) || fs::exists(run.state("reward", m)))
                fail(run.stage("reward").string(), " holds a judge trained on the corpus pairs (", m,
                     "); a run's judge learns from one source: use a new run folder for votes");
    } else if (read_file(run.feedback_labels()) != labels_bytes) {
        fail(run.feedback_labels().string(), " holds other votes than these (sha256 ",
             sha256_file(run.feedback_labels()), ", these give ", sha256_hex(labels_bytes),
             "); every mode of one run learns from the same votes");
    }
    if (fs::exists(run.feedback_test()) && read_file(run.feedback_test()) != test_bytes)
        fail(run.feedback_test().string(),
             " holds other test votes than these; every mode of one run uses the same votes");
    return out;
}

json run_reward_from_votes(const Study& s, StageMode mode, const PreparedVotes& v) {
    const RunLayout& run = s.run;
    if (!fs::exists(run.feedback_labels())) {
        fs::create_directories(run.stage("reward"));
        write_file_atomic(run.feedback_labels(), v.labels.dump(2) + "\n");
    }
    if (!fs::exists(run.feedback_test())) {
        fs::create_directories(run.feedback_test().parent_path());
        write_file_atomic(run.feedback_test(), v.test_labels.dump(2) + "\n");
    }
    json report = run_reward_model(s, mode, &v.data);
    report["feedback"] = v.collection.provenance;
    return report;
}

namespace {

// The judge's identity block, recorded in its final/learned.safetensors.
json judge_identity(const Study& s) {
    const fs::path file = s.reader().resolve(s.run.final_dir("reward") / "learned.safetensors");
    const LearnedFile stored = read_learned(file);
    if (!stored.info.contains("identity")) fail(file.string(), ": no identity block in its metadata");
    return stored.info["identity"];
}

const json& feedback_data_identity(const json& identity, const std::string& where) {
    if (!identity.contains("data") || !identity["data"].contains("feedback"))
        fail(where, ": the judge did not learn from votes (no data.feedback in its identity)");
    return identity["data"];
}

}  // namespace

json vote_test(const Study& s) {
    const fs::path out = s.run.vote_test();
    if (fs::exists(out)) fail("refusing to overwrite ", out.string());
    const fs::path judge_dir = s.run.final_dir("reward");
    const json data = feedback_data_identity(judge_identity(s), judge_dir.string());
    const std::string bytes = s.reader().read(s.run.feedback_test());
    const std::string where = s.run.feedback_test().string();
    if (sha256_hex(bytes) != json_string(data, "test_labels_sha256", judge_dir.string()))
        fail(where, ": sha256 ", sha256_hex(bytes), " differs from the one the judge recorded (",
             json_string(data, "test_labels_sha256", judge_dir.string()), ")");
    const json labels = parse_json(bytes, where);
    FrozenJudge judge(s, judge_dir);
    json rows = json::array();
    int64_t correct = 0, ties = 0;
    double loss = 0;
    for (const json& l : json_field(labels, "test", where)) {
        const auto ids = [&](const char* side) {
            return json_field(json_field(l, side, where), "token_ids", where).get<std::vector<int32_t>>();
        };
        const FrozenJudge::Scores sc =
            judge.score(s.encode_prompt(json_string(l, "prompt", where)), ids("chosen"), ids("rejected"));
        correct += sc.correct();
        ties += sc.tie();
        loss += bradley_terry_loss(&sc.chosen, &sc.rejected, 1, nullptr, nullptr);
        rows.push_back({{"pair_id", l.value("pair_id", "")},
                        {"participant", l.value("participant", "")},
                        {"preferred_score", sc.chosen},
                        {"other_score", sc.rejected},
                        {"correct", sc.correct()},
                        {"tie", sc.tie()}});
    }
    judge.check_unchanged("vote test");
    const double n = static_cast<double>(rows.size());
    json result{{"examples", rows.size()},
                {"correct", correct},
                {"ties", ties},
                {"pair_loss", n > 0 ? loss / n : 0.0},
                {"accuracy", n > 0 ? static_cast<double>(correct) / n : 0.0},
                {"feedback", data["feedback"]},
                {"judge_learned_identity", judge.identity()},
                {"used_for_selection", false},
                {"score_name", "predicted preference score learned from votes (not human utility)"},
                {"rows", rows}};
    write_json_atomic(out, result);
    return result;
}

std::optional<FeedbackPrompts> feedback_rollout_prompts(const Study& s) {
    const fs::path labels_path = s.run.feedback_labels();
    if (!s.reader().exists(labels_path)) return std::nullopt;
    const fs::path judge_dir = s.run.final_dir("reward");
    const json data = feedback_data_identity(judge_identity(s), judge_dir.string());
    const std::string bytes = s.reader().read(labels_path);
    const std::string where = labels_path.string();
    if (sha256_hex(bytes) != json_string(data, "labels_sha256", judge_dir.string()))
        fail(where, ": sha256 ", sha256_hex(bytes), " differs from the labels the judge learned (",
             json_string(data, "labels_sha256", judge_dir.string()), ")");
    const json labels = parse_json(bytes, where);
    const std::string sft = sft_checkpoint_sha256(s, s.run.final_dir("sft"));
    if (json_string(labels, "checkpoint_sha256", where) != sft)
        fail(where, ": candidates belong to a different supervised policy (checkpoint_sha256 ",
             json_string(labels, "checkpoint_sha256", where), "; RUN/sft/final is ", sft, ")");
    FeedbackPrompts out;
    std::set<std::string> seen;
    for (const json& l : json_field(labels, "train", where)) {
        const std::string id = json_string(l, "prompt_id", where);
        if (seen.insert(id).second) out.prompts.push_back({id, "", json_string(l, "prompt", where)});
    }
    if (out.prompts.empty()) fail(where, ": no train label, so no prompt to roll out on");
    out.data_identity = data;
    out.data_identity["rollout_prompts"] = {{"source", "train-split vote labels"}, {"count", out.prompts.size()}};
    return out;
}

}  // namespace ppolab
