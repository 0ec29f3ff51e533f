// evaluate.cpp — held-out generation and rubric scoring (SPEC §7).
#include "evaluation/evaluate.h"

#include <cstdio>
#include <functional>
#include <map>

#include "evaluation/diagnostics.h"
#include "evaluation/exact_gold.h"
#include "kernels/matmul.h"
#include "model/generate.h"
#include "model/sequence_kl.h"
#include "parallel/world.h"
#include "training/crash_checkpoints.h"
#include "training/roles.h"
#include "training/study_config.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/sha256.h"
#include "util/stopwatch.h"

namespace ppolab {

namespace {

// Rows teacher-forced together when computing scores and log-probs.
constexpr size_t kScoringChunk = 16;
// Rows decoded together when generating, each bitwise what it is alone.
constexpr int64_t kEvalRowsPerDecode = kRowInvariantRows;

std::string prefix(EvalSet set) { return set == EvalSet::validation ? "validation-" : ""; }

// The response positions of row b of a scoring batch, in order.
std::vector<float> response_slice(const ScoringBatch& b, const std::vector<float>& per_position, int64_t row) {
    std::vector<float> out;
    for (int64_t t = 0; t < b.T; ++t)
        if (b.response_mask[static_cast<size_t>(row * b.T + t)])
            out.push_back(per_position[static_cast<size_t>(row * b.T + t)]);
    return out;
}

// The reader's roots as recorded in a generations identity: relative to the
// run folder when inside it ("corpus/eval", "sft"), absolute otherwise (a
// --model outside the run), so the record does not depend on where the run is.
json run_relative_roots(const GuardedReader& reader, const RunLayout& run) {
    const fs::path root = fs::weakly_canonical(fs::absolute(run.root));
    json out = json::array();
    for (const fs::path& r : reader.roots()) {
        const fs::path rel = fs::weakly_canonical(fs::absolute(r)).lexically_relative(root);
        const bool inside = !rel.empty() && *rel.begin() != "..";
        out.push_back(inside ? rel.generic_string() : r.string());
    }
    return out;
}

// Records one step's durations in the timings file (read, updated, replaced).
void record_timings(const RunLayout& run, EvalSet set, const std::string& step, const json& seconds) {
    const fs::path path = timings_path(run, set);
    json timings = fs::exists(path) ? read_json_file(path) : json::object();
    if (!timings.is_object()) fail(path.string(), ": expected a JSON object of durations, got ", timings.type_name());
    timings[step] = seconds;
    fs::create_directories(path.parent_path());
    write_json_atomic(path, timings, Overwrite::replace);
}

}  // namespace

EvalSet parse_eval_set(std::string_view text) {
    if (text == "held-out" || text == "test+probes") return EvalSet::held_out;
    if (text == "validation") return EvalSet::validation;
    fail("--population: expected 'validation' or 'held-out' (test + probes, the default); got '", text, "'");
}

const char* eval_set_name(EvalSet set) { return set == EvalSet::validation ? "validation" : "held-out"; }

StageScope evaluation_generation_scope(EvalSet set) {
    return set == EvalSet::validation ? StageScope::learn : StageScope::eval;
}

const std::vector<std::string>& compared_methods() { return baseline_stages(); }

std::vector<std::string> evaluation_policies(const RunLayout& run, EvalSet set) {
    // Held out: SFT and PPO always (SPEC §7); development checks on the
    // validation prompts (SPEC §7: base, SFT; and PPO, whose settings are
    // chosen on them, scripts/sweep_validation.sh): the base, then each
    // trained policy the run has. Then, in both, every baseline the run trained.
    std::vector<std::string> policies;
    if (set == EvalSet::held_out) {
        policies = {"sft", "ppo"};
    } else {
        policies = {"base"};
        if (fs::exists(run.final_dir("sft") / "learned.safetensors")) policies.push_back("sft");
        if (fs::exists(run.final_dir("ppo") / "actor" / "learned.safetensors")) policies.push_back("ppo");
    }
    for (const std::string& m : compared_methods())
        if (fs::exists(*policy_dir(run, m) / "learned.safetensors")) policies.push_back(m);
    return policies;
}

std::optional<fs::path> policy_dir(const RunLayout& run, const std::string& policy) {
    if (policy == "base") return std::nullopt;
    if (policy == "sft" || policy == "dpo") return run.final_dir(policy);
    for (const char* online : {"ppo", "rloo", "grpo", "ppo-whiten", "ppo-vclip", "ppo-k3"})
        if (policy == online) return run.final_dir(policy) / "actor";
    fail("evaluate: unknown policy '", policy,
         "' (expected base, sft, ppo, dpo, rloo, grpo, ppo-whiten, ppo-vclip or ppo-k3)");
}

fs::path generations_path(const RunLayout& run, EvalSet set, const std::string& policy) {
    return run.eval() / (prefix(set) + policy + "-generations.json");
}
fs::path scored_path(const RunLayout& run, EvalSet set, const std::string& policy) {
    return run.eval() / (prefix(set) + policy + "-scored.json");
}
fs::path metrics_path(const RunLayout& run, EvalSet set) { return run.eval() / (prefix(set) + "metrics.json"); }
fs::path timings_path(const RunLayout& run, EvalSet set) { return run.eval() / (prefix(set) + "timings.json"); }

std::vector<fs::path> evaluation_outputs(const RunLayout& run, EvalSet set) {
    std::vector<fs::path> out;
    for (const std::string& p : evaluation_policies(run, set)) {
        out.push_back(generations_path(run, set, p));
        out.push_back(scored_path(run, set, p));
    }
    out.push_back(judge_grammar_path(run, set));
    out.push_back(timings_path(run, set));
    out.push_back(metrics_path(run, set));
    return out;
}

std::vector<EvalRow> evaluation_prompts(const GuardedReader& reader, const fs::path& corpus_dir, EvalSet set) {
    std::vector<EvalRow> rows;
    auto add = [&](const std::string& id, const std::string& family, const char* population,
                   const std::string& prompt) {
        EvalRow r;
        r.id = id;
        r.family = family;
        r.population = population;
        r.prompt = prompt;
        rows.push_back(std::move(r));
    };
    if (set == EvalSet::validation) {
        for (const PreferencePair& p : load_pairs(reader, corpus_dir, PairSplit::validation))
            add(p.id, p.family, "validation", p.prompt);
        return rows;
    }
    for (const PromptRow& p : load_eval_prompts(reader, corpus_dir, EvalPopulation::test))
        add(p.id, p.family, "test", p.prompt);
    for (const PromptRow& p : load_eval_prompts(reader, corpus_dir, EvalPopulation::probe))
        add(p.id, p.family, "probe", p.prompt);
    return rows;
}

fs::path generations_checkpoint_path(const RunLayout& run, EvalSet set, const std::string& policy) {
    return run.eval() / "checkpoints" / (prefix(set) + policy + "-generations.json");
}

namespace {

// What a policy's generations depend on: the study, the population and its
// corpus files, the policy, reference and judge, the decoding, the reader's roots.
json generation_identity(const Study& s, EvalSet set, const std::string& policy, const std::string& actor_identity,
                         bool have_reference, const std::string& reference_identity, const std::string& judge_identity,
                         const GenerationOptions& gen) {
    json identity = s.identity();
    identity["stage"] = "evaluate-generate";
    identity["population"] = eval_set_name(set);
    identity["policy"] = policy;
    identity["policy_learned_identity"] = actor_identity;
    identity["reference"] = have_reference ? json("sft") : json(nullptr);
    identity["reference_learned_identity"] = reference_identity;
    identity["judge_learned_identity"] = judge_identity;
    const Manifest manifest = load_manifest(s.reader(), s.run.corpus());
    json data = json::object();
    for (const char* f : set == EvalSet::validation
                             ? std::vector<const char*>{"learn/validation_pairs.jsonl"}
                             : std::vector<const char*>{"eval/test_prompts.jsonl", "eval/probe_prompts.jsonl"})
        data[f] = manifest.files.at(f).sha256;
    identity["data"] = data;
    identity["generation"] = {
        {"greedy", true},       {"max_new_tokens", gen.max_new_tokens},  {"eos_id", gen.eos_id},
        {"pad_id", gen.pad_id}, {"rows_per_decode", kEvalRowsPerDecode}, {"prefill", "each row alone"}};
    identity["exact"] = {{"grammar_sentences", grammar_forms().size()},
                         {"spellings", kGrammarSpellings},
                         {"prompts_per_population",
                          s.cfg.evaluation.exact_prompts ? json(*s.cfg.evaluation.exact_prompts) : json("all")}};
    identity["readable_roots"] = run_relative_roots(s.reader(), s.run);
    return identity;
}

// The rows a killed evaluation of this policy had generated (its checkpoint,
// which must have the same identity) copied into `rows`; returns how many.
size_t resume_rows(const fs::path& checkpoint, const json& identity, std::vector<EvalRow>& rows,
                   const std::string& policy) {
    if (parallel::world().writer()) remove_atomic_temporaries(checkpoint.parent_path());
    if (!fs::exists(checkpoint)) return 0;
    const json ck = read_json_file(checkpoint);
    const std::string where = checkpoint.string();
    const std::string d = json_first_difference(json_field(ck, "identity", where), identity, "identity");
    if (!d.empty())
        fail(where, ": this checkpoint belongs to a different evaluation (", d,
             "); remove it to start this policy over");
    const json& done = json_field(ck, "rows_detail", where);
    if (!done.is_array() || done.size() > rows.size())
        fail(where, ": field 'rows_detail' does not fit the ", rows.size(), " prompts");
    for (size_t i = 0; i < done.size(); ++i) {
        EvalRow r = eval_row_from_json(done[i], where);
        if (r.id != rows[i].id || r.prompt != rows[i].prompt)
            fail(where, ": row ", i, " is ", r.id, "; the corpus has ", rows[i].id);
        rows[i] = std::move(r);
    }
    std::fprintf(stderr, "evaluate %s: continuing from checkpoint %s (%zu of %zu rows generated)\n", policy.c_str(),
                 where.c_str(), done.size(), rows.size());
    return done.size();
}

json generated_fields(const EvalRow& r) {
    return {{"response", r.response},
            {"finish_reason", r.finish_reason},
            {"sampling_logp", r.sampling_logp},
            {"decodable", r.decodable},
            {"text", r.text}};
}
void restore_generated(EvalRow& r, const json& j) {
    r.response = j.at("response").get<std::vector<int32_t>>();
    r.finish_reason = j.at("finish_reason").get<std::string>();
    r.sampling_logp = j.at("sampling_logp").get<std::vector<float>>();
    r.decodable = j.at("decodable").get<bool>();
    r.text = j.at("text").get<std::string>();
}
json scored_fields(const EvalRow& r) {
    return {{"actor_logp", r.actor_logp},
            {"reference_logp", r.reference_logp},
            {"kl", r.kl_exact_to_sft ? json(*r.kl_exact_to_sft) : json()},
            {"score", r.learned_score ? json(*r.learned_score) : json()}};
}
void restore_scored(EvalRow& r, const json& j) {
    r.actor_logp = j.at("actor_logp").get<std::vector<float>>();
    r.reference_logp = j.at("reference_logp").get<std::vector<float>>();
    if (!j.at("kl").is_null()) r.kl_exact_to_sft = j.at("kl").get<double>();
    if (!j.at("score").is_null()) r.learned_score = j.at("score").get<double>();
}

}  // namespace

fs::path judge_grammar_path(const RunLayout& run, EvalSet set) {
    return run.eval() / (prefix(set) + "judge-grammar.json");
}

std::map<std::string, std::vector<float>> judge_grammar_scores(const Study& s, EvalSet set, RoleModel& judge,
                                                               const std::vector<EvalRow>& rows,
                                                               const GrammarTree& grammar) {
    std::vector<std::string> prompts;  // distinct, in row order
    for (const EvalRow* r : unique_contexts([&] {
             std::vector<const EvalRow*> all;
             for (const EvalRow& row : rows) all.push_back(&row);
             return all;
         }()))
        prompts.push_back(r->prompt);
    std::string joined;
    for (const std::string& p : prompts) joined += p + '\n';
    json identity = s.identity();
    identity["stage"] = "evaluate-judge-grammar";
    identity["population"] = eval_set_name(set);
    identity["judge_learned_identity"] = judge.role.learned_identity();
    identity["prompts_sha256"] = sha256_hex(joined);
    identity["spellings"] = grammar.tree.last_node.size();
    identity["tree_nodes"] = grammar.tree.nodes();
    const fs::path path = judge_grammar_path(s.run, set);
    std::map<std::string, std::vector<float>> out;
    if (fs::exists(path)) {  // written by an earlier policy of this evaluation
        const json done = parse_json(s.reader().read(path), path.string());
        const std::string d = json_first_difference(json_field(done, "identity", path.string()), identity, "identity");
        if (d.empty()) {
            for (const json& e : json_field(done, "prompts", path.string()))
                out[json_string(e, "prompt", path.string())] =
                    json_field(e, "scores", path.string()).get<std::vector<float>>();
            if (out.size() == prompts.size()) return out;
        }
        out.clear();  // another judge or other prompts: computed again and replaced
    }
    std::vector<std::vector<float>> scores(prompts.size());
    Progress bar("evaluate judge grammar", static_cast<int64_t>(prompts.size()));
    int64_t done = 0;
    parallel::share_range(
        0, prompts.size(),
        [&](size_t j) {
            scores[j] = grammar_judge_scores(judge.model, *judge.role.head, s.encode_prompt(prompts[j]), grammar);
            bar.update(++done);
        },
        [&](size_t j) { return json(scores[j]); },
        [&](size_t j, const json& f) { scores[j] = f.get<std::vector<float>>(); });
    bar.finish();
    json entries = json::array();
    for (size_t j = 0; j < prompts.size(); ++j) {
        entries.push_back({{"prompt", prompts[j]}, {"scores", scores[j]}});
        out[prompts[j]] = scores[j];
    }
    if (parallel::world().writer()) {
        fs::create_directories(path.parent_path());
        write_json_atomic(path, json{{"identity", identity}, {"prompts", entries}}, Overwrite::replace);
    }
    parallel::barrier();
    return out;
}

json evaluate_generate(const Study& s, EvalSet set, const std::string& policy) {
    const fs::path out = generations_path(s.run, set, policy);
    const fs::path checkpoint = generations_checkpoint_path(s.run, set, policy);
    const auto started = Clock::now();
    std::vector<EvalRow> rows = evaluation_prompts(s.reader(), s.run.corpus(), set);

    // The policy (no adapters for the base), the reference (SFT) and the judge.
    std::optional<Role> actor;
    if (auto dir = policy_dir(s.run, policy)) actor.emplace(load_role(*dir, policy, RoleKind::policy, s));
    std::optional<RoleModel> reference, judge;
    const bool have_sft = s.reader().exists(s.run.final_dir("sft") / "learned.safetensors");
    const bool have_judge = s.reader().exists(s.run.final_dir("reward") / "learned.safetensors");
    if (set == EvalSet::held_out && !have_judge)
        fail("evaluate: no judge at ", s.run.final_dir("reward").string(), " (run `ppolab reward` first)");
    if (have_sft) reference.emplace(s, s.run.final_dir("sft"), "reference", RoleKind::policy);
    if (have_judge) judge.emplace(s, s.run.final_dir("reward"), "reward", RoleKind::reward);
    const std::string actor_identity = actor ? actor->learned_identity() : std::string("base (no adapters)");
    const std::string reference_identity = reference ? reference->initial_identity : std::string();
    const std::string judge_identity = judge ? judge->initial_identity : std::string();
    Qwen2 actor_model(s.base, actor ? &actor->lora : nullptr);

    GenerationOptions gen;
    gen.max_new_tokens = s.limits.max_response;
    gen.eos_id = s.eos_id;
    gen.pad_id = s.pad_id;
    gen.greedy = true;

    const json identity = generation_identity(s, set, policy, actor_identity, reference.has_value(), reference_identity,
                                              judge_identity, gen);

    // A policy whose generations a killed evaluation already finished is kept
    // (same identity), never regenerated; a different one is refused.
    if (fs::exists(out)) {
        json done = parse_json(s.reader().read(out), out.string());
        const std::string d = json_first_difference(json_field(done, "identity", out.string()), identity, "identity");
        if (!d.empty())
            fail("refusing to overwrite ", out.string(), ": it was written by a different evaluation (", d,
                 "); remove it to regenerate");
        std::fprintf(stderr, "evaluate %s: %s is complete (same identity), kept\n", policy.c_str(), out.c_str());
        if (parallel::world().writer()) remove_checkpoint(checkpoint);
        parallel::barrier();  // no rank reads the checkpoint rank 0 removes
        return done;
    }

    // Crash safety: the rows generated so far, every `checkpoint.every_rows`
    // rows. Greedy, each row bitwise what it is alone (independent_rows), so
    // a restarted evaluation gives the same rows.
    const int64_t every = s.cfg.checkpoint.every_rows;
    const size_t first_row = resume_rows(checkpoint, identity, rows, policy);
    auto save_rows = [&](size_t n) {
        if (!parallel::world().writer()) return;
        json done = json::array();
        for (size_t i = 0; i < n; ++i) done.push_back(json::parse(eval_row_to_json(rows[i]).dump()));
        write_json_atomic(checkpoint, json{{"identity", identity}, {"rows_detail", done}}, Overwrite::replace);
    };

    // 1. generation, kEvalRowsPerDecode rows decoded together, each prefilled
    //    alone (generate.h independent_rows): every row is bitwise what it
    //    is generated alone, so the repeated probe rows are independent
    //    computations that must agree bit for bit. In rounds that end where
    //    a checkpoint is due, in batches from the round's first row; under
    //    mpirun each round's batches are shared across the ranks.
    const auto t_gen = Clock::now();
    {
        Progress bar("evaluate " + policy + " generate", static_cast<int64_t>(rows.size() - first_row));
        int64_t generated = 0;
        gen.independent_rows = true;
        const size_t per = static_cast<size_t>(kEvalRowsPerDecode);
        size_t a = first_row, b = first_row;  // the round [a, b)
        auto batch_rows = [&](size_t j) { return std::pair(a + j * per, std::min(b, a + (j + 1) * per)); };
        auto generate_batch = [&](size_t j) {
            const auto [first, last] = batch_rows(j);
            std::vector<std::vector<int32_t>> prompts;
            for (size_t i = first; i < last; ++i) {
                prompts.push_back(s.encode_prompt(rows[i].prompt));
                if (static_cast<int64_t>(prompts.back().size()) > s.limits.max_prompt)
                    fail("prompt ", rows[i].id, ": ", prompts.back().size(), " tokens, over limits.max_prompt ",
                         s.limits.max_prompt, " (refused, never truncated)");
            }
            std::vector<Philox> unused(prompts.size(), Philox(0, 0));  // greedy decoding draws nothing
            const std::vector<Generation> gens = generate(actor_model, prompts, gen, unused);
            for (size_t i = first; i < last; ++i) {
                EvalRow& r = rows[i];
                const Generation& g = gens[i - first];
                r.response = g.tokens;
                r.finish_reason = g.finish_reason;
                r.sampling_logp = g.logprobs;
                ResponseText shown = s.tokenizer().decode_response(g.tokens, g.finish_reason == "eos", s.eos_id);
                r.decodable = shown.decodable;
                r.text = std::move(shown.text);
            }
            generated += static_cast<int64_t>(last - first);
            bar.update(generated);
        };
        // A batch's rows travel together: the JSON array of its rows' fields.
        auto batch_fields = [&](size_t j) {
            const auto [first, last] = batch_rows(j);
            json all = json::array();
            for (size_t i = first; i < last; ++i) all.push_back(generated_fields(rows[i]));
            return all;
        };
        auto restore_batch = [&](size_t j, const json& all) {
            size_t i = batch_rows(j).first;
            for (const json& f : all) restore_generated(rows[i++], f);
        };
        for (; a < rows.size(); a = b) {
            b = every > 0 ? std::min(rows.size(), (a / static_cast<size_t>(every) + 1) * every) : rows.size();
            parallel::share_range(0, (b - a + per - 1) / per, generate_batch, batch_fields, restore_batch);
            if (checkpoint_due(every, static_cast<int64_t>(b)) && b < rows.size()) save_rows(b);
        }
        bar.finish();
    }
    const double generation_seconds = since(t_gen);
    check_repeated_generations(rows);

    // 2. teacher-forced: the judge's score, actor and reference log-probs.
    const auto t_score = Clock::now();
    Scorer actor_scorer(actor_model);
    // The SFT policy is its own reference: the same adapters (same learned
    // identity, same config) give the same forward bit for bit, so the
    // actor's forward serves as the reference's.
    const bool reference_is_actor = actor && reference && actor_identity == reference_identity;
    {
        // Batches of kScoringChunk rows (each batch the same at any world size), shared across the ranks.
        Progress bar("evaluate " + policy + " score", static_cast<int64_t>(rows.size()));
        const size_t batches = (rows.size() + kScoringChunk - 1) / kScoringChunk;
        int64_t scored = 0;
        auto score_batch = [&](size_t j) {
            const size_t first = j * kScoringChunk, last = std::min(rows.size(), first + kScoringChunk);
            std::vector<ScoringRow> chunk;
            for (size_t i = first; i < last; ++i)
                chunk.push_back(ScoringRow{s.encode_prompt(rows[i].prompt), rows[i].response});
            ScoringBatch b = s.batch(chunk);
            std::vector<float> per_pos(static_cast<size_t>(b.B * b.T)), scores(static_cast<size_t>(b.B));
            actor_scorer.response_logprobs(b, per_pos.data(), false);
            for (int64_t k = 0; k < b.B; ++k)
                rows[first + static_cast<size_t>(k)].actor_logp = response_slice(b, per_pos, k);
            if (reference) {
                if (!reference_is_actor) reference->scorer.response_logprobs(b, per_pos.data(), false);
                for (int64_t k = 0; k < b.B; ++k)
                    rows[first + static_cast<size_t>(k)].reference_logp = response_slice(b, per_pos, k);
                // From both forwards just run (bit for bit sequence_kl(actor_model, reference->model, b)).
                // The SFT policy against itself: the same logits, so exactly 0 for every row
                // (sequence_kl.h): its two output products and 3 × vocabulary exponentials per
                // response position are not computed.
                std::vector<SequenceKl> kl(static_cast<size_t>(b.B));
                if (!reference_is_actor)
                    kl = sequence_kl(actor_scorer.selected_hidden(), reference->scorer.selected_hidden(),
                                     actor_model.weights().output_matrix().view(),
                                     reference->model.weights().output_matrix().view(), b);
                for (int64_t k = 0; k < b.B; ++k)
                    rows[first + static_cast<size_t>(k)].kl_exact_to_sft = kl[static_cast<size_t>(k)].kl_exact;
            }
            if (judge) {
                judge->scorer.reward_scores(b, *judge->role.head, scores.data(), false);
                for (int64_t k = 0; k < b.B; ++k)
                    rows[first + static_cast<size_t>(k)].learned_score = scores[static_cast<size_t>(k)];
            }
            scored += static_cast<int64_t>(last - first);
            bar.update(scored);
        };
        // A batch's rows travel together: the JSON array of its rows' fields.
        auto batch_fields = [&](size_t j) {
            json all = json::array();
            for (size_t i = j * kScoringChunk; i < std::min(rows.size(), (j + 1) * kScoringChunk); ++i)
                all.push_back(scored_fields(rows[i]));
            return all;
        };
        auto restore_batch = [&](size_t j, const json& all) {
            size_t i = j * kScoringChunk;
            for (const json& f : all) restore_scored(rows[i++], f);
        };
        parallel::share_range(0, batches, score_batch, batch_fields, restore_batch);
        bar.finish();
    }
    const double scoring_seconds = since(t_score);

    // 3. exact: the grammar's sentences under the policy (exact_gold.h) and
    //    the judge's expectation over them, once per distinct prompt, each
    //    prompt its own computation (shared across the ranks).
    const auto t_exact = Clock::now();
    {
        const GrammarTree grammar = grammar_tree(s.tokenizer(), s.eos_id);
        // The first evaluation.exact_prompts distinct prompts of each population (null: all).
        std::map<std::string, size_t> first_of;  // prompt → its first row
        std::map<std::string, int64_t> taken;    // population → distinct prompts taken
        std::vector<size_t> firsts;
        const std::optional<int64_t> limit = s.cfg.evaluation.exact_prompts;
        for (size_t i = 0; i < rows.size(); ++i) {
            if (first_of.count(rows[i].prompt) || (limit && taken[rows[i].population] >= *limit)) continue;
            first_of.emplace(rows[i].prompt, i);
            ++taken[rows[i].population];
            firsts.push_back(i);
        }
        std::map<std::string, std::vector<float>> judged;
        if (judge) judged = judge_grammar_scores(s, set, *judge, rows, grammar);
        Progress bar("evaluate " + policy + " exact", static_cast<int64_t>(firsts.size()));
        int64_t measured = 0;
        auto measure = [&](size_t j) {
            EvalRow& r = rows[firsts[j]];
            const auto it = judged.find(r.prompt);
            r.grammar = grammar_mass(actor_model, s.encode_prompt(r.prompt), grammar,
                                     it == judged.end() ? nullptr : &it->second);
            bar.update(++measured);
        };
        auto fields = [&](size_t j) { return json::parse(grammar_mass_to_json(*rows[firsts[j]].grammar).dump()); };
        auto restore = [&](size_t j, const json& f) {
            rows[firsts[j]].grammar = grammar_mass_from_json(f, "evaluate " + policy);
        };
        parallel::share_range(0, firsts.size(), measure, fields, restore);
        for (EvalRow& r : rows)
            if (auto it = first_of.find(r.prompt); it != first_of.end()) r.grammar = rows[it->second].grammar;
        bar.finish();
    }
    const double exact_seconds = since(t_exact);
    if (actor && actor->learned_identity() != actor_identity) fail("evaluate: the policy changed while generating");
    if (reference && reference->changed()) fail("evaluate: the reference changed");
    if (judge && judge->changed()) fail("evaluate: the judge changed while scoring");
    if (base_frozen_identity(s.base) != s.base_identity) fail("evaluate: the frozen base changed");

    json jrows = json::array();
    for (size_t i = 0; i < rows.size(); ++i) {
        jrows.push_back(json::parse(eval_row_to_json(rows[i]).dump()));
        jrows.back()["kl_exact_to_sft"] = rows[i].kl_exact_to_sft ? json(*rows[i].kl_exact_to_sft) : json(nullptr);
    }
    json result{{"identity", identity},
                {"rows", rows.size()},
                {"distinct_prompts",
                 [&] {
                     std::vector<const EvalRow*> all;
                     for (const EvalRow& r : rows) all.push_back(&r);
                     return unique_contexts(all).size();
                 }()},
                {"repeated_generations_identical", true},
                {"labels_read", false},
                {"rows_detail", jrows}};
    if (parallel::world().writer()) {
        fs::create_directories(out.parent_path());
        write_json_atomic(out, result);
        record_timings(s.run, set, policy,
                       {{"generation_seconds", generation_seconds},
                        {"scoring_seconds", scoring_seconds},
                        {"exact_seconds", exact_seconds},
                        {"seconds", since(started)}});
        remove_checkpoint(checkpoint);
    }
    parallel::barrier();  // the generations are whole before any rank goes on
    return result;
}

void score_rows(std::vector<EvalRow>& rows, const GoldLabels& gold) {
    for (EvalRow& r : rows) {
        const GoldLabel& label = gold.at(r.id);
        if (label.family != r.family)
            fail("gold label ", r.id, ": family ", label.family, " but the generated row says ", r.family);
        r.expected_action = label.expected_action;
        r.verdict = evaluate_response(r.text, finish_reason_parse(r.finish_reason), label.expected_action, r.decodable);
    }
}

json evaluate_score(const Study& s, EvalSet set) {
    const auto started = Clock::now();
    const GoldLabels gold = load_gold(s.reader(), s.run.corpus());
    json metrics_out = json::object();
    json identity = s.identity();
    identity["stage"] = "evaluate-score";
    identity["population"] = eval_set_name(set);
    json generations_sha = json::object();
    for (const std::string& policy : evaluation_policies(s.run, set)) {
        const fs::path in = generations_path(s.run, set, policy);
        const std::string text = s.reader().read(in);
        generations_sha[in.filename().string()] = sha256_hex(text);
        const json g = parse_json(text, in.string());
        std::vector<EvalRow> rows;
        for (const json& j : json_field(g, "rows_detail", in.string()))
            rows.push_back(eval_row_from_json(j, in.string()));
        if (static_cast<int64_t>(rows.size()) != json_int(g, "rows", in.string()))
            fail(in.string(), ": row count differs from field 'rows'");
        // The generations answer exactly the corpus's prompts, in order.
        const std::vector<EvalRow> expected = evaluation_prompts(s.reader(), s.run.corpus(), set);
        if (rows.size() != expected.size())
            fail(in.string(), ": ", rows.size(), " rows; the corpus has ", expected.size(), " ", eval_set_name(set),
                 " prompts");
        for (size_t i = 0; i < rows.size(); ++i)
            if (rows[i].id != expected[i].id || rows[i].prompt != expected[i].prompt ||
                rows[i].population != expected[i].population || rows[i].family != expected[i].family)
                fail(in.string(), ": row ", i, " is ", rows[i].id, " (", rows[i].population, "); the corpus has ",
                     expected[i].id, " (", expected[i].population, ") with ",
                     rows[i].prompt == expected[i].prompt ? "the same prompt" : "a different prompt");
        check_repeated_generations(rows);
        score_rows(rows, gold);
        json jrows = json::array();
        for (const EvalRow& r : rows) jrows.push_back(json::parse(eval_row_to_json(r).dump()));
        const ordered_json m = policy_metrics(rows, set == EvalSet::validation);
        json scored{{"identity", identity},
                    {"policy", policy},
                    {"generation_identity", json_field(g, "identity", in.string())},
                    {"generations_sha256", sha256_hex(text)},
                    {"metrics", json::parse(m.dump())},
                    {"rows", rows.size()},
                    {"rows_detail", jrows}};
        // Rewritten by a rerun of an evaluation killed before its metrics (derived data).
        write_json_atomic(scored_path(s.run, set, policy), scored, Overwrite::replace);
        metrics_out[policy] = json::parse(m.dump());
    }
    identity["generations_sha256"] = generations_sha;
    metrics_out["identity"] = identity;
    metrics_out["note"] =
        "Rubric verdicts come from the reserved rubric of a simulated signal (OfficeHelpPrefs-v1), not from human "
        "feedback; the learned reward is the frozen judge's score, not human satisfaction. Rows and unique contexts "
        "are kept apart: the 4 probe rows of a context are one independent case.";
    if (set == EvalSet::held_out) write_shortcut_diagnostics(s.reader(), s.run);  // RUN/eval/diagnostics.json
    record_timings(s.run, set, "score", {{"seconds", since(started)}});
    write_json_atomic(metrics_path(s.run, set), metrics_out);
    return metrics_out;
}

}  // namespace ppolab
