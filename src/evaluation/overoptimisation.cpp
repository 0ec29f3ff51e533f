// overoptimisation.cpp — sampled responses of SFT, the PPO snapshots and the
// final actor with exact KL to SFT, proxy and gold (see overoptimisation.h).
#include "evaluation/overoptimisation.h"

#include <algorithm>
#include <cstdio>

#include "model/generate.h"
#include "model/sequence_kl.h"
#include "parallel/world.h"
#include "training/crash_checkpoints.h"
#include "training/roles.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/stopwatch.h"

namespace ppolab {

namespace {

std::string relative_to_run(const RunLayout& run, const fs::path& p) {
    return fs::weakly_canonical(fs::absolute(p))
        .lexically_relative(fs::weakly_canonical(fs::absolute(run.root)))
        .generic_string();
}

// The reader's roots relative to RUN when inside it (as evaluate records them).
json readable_roots(const Study& s) {
    json out = json::array();
    for (const fs::path& r : s.reader().roots()) {
        const std::string rel = relative_to_run(s.run, r);
        out.push_back(rel.empty() || rel.starts_with("..") ? r.string() : rel);
    }
    return out;
}

GenerationOptions sampling_options(const Study& s) {
    GenerationOptions gen;
    gen.max_new_tokens = s.limits.max_response;
    gen.eos_id = s.eos_id;
    gen.pad_id = s.pad_id;
    gen.greedy = false;  // temperature 1, the full vocabulary
    return gen;
}

// `count` samples per prompt from `policy`, rows prompt-major, batched
// kOverOptRowsPerBatch at a time, each row on its own keyed stream.
std::vector<OverOptSample> sample_rows(const Study& s, Qwen2& policy, const std::vector<std::vector<int32_t>>& prompts,
                                       int64_t count, int kind, int64_t iteration, const std::string& label) {
    const GenerationOptions gen = sampling_options(s);
    const uint64_t seed = static_cast<uint64_t>(s.cfg.evaluation.sample_seed);
    std::vector<OverOptSample> out;
    for (int64_t p = 0; p < static_cast<int64_t>(prompts.size()); ++p)
        for (int64_t k = 0; k < count; ++k) {
            out.emplace_back();
            out.back().prompt = p;
            out.back().sample = k;
        }
    // Batches of kOverOptRowsPerBatch rows (the same at any world size), shared across the ranks under mpirun.
    Progress bar(label + " sample", static_cast<int64_t>(out.size()));
    const size_t batches = (out.size() + kOverOptRowsPerBatch - 1) / kOverOptRowsPerBatch;
    auto rows_of = [&](size_t j) {
        return std::pair{j * kOverOptRowsPerBatch, std::min(out.size(), (j + 1) * kOverOptRowsPerBatch)};
    };
    int64_t done = 0;
    auto sample_batch = [&](size_t j) {
        const auto [first, last] = rows_of(j);
        std::vector<std::vector<int32_t>> batch;
        std::vector<Philox> rngs;
        int64_t longest = 0;
        for (size_t i = first; i < last; ++i) {
            batch.push_back(prompts[static_cast<size_t>(out[i].prompt)]);
            longest = std::max(longest, static_cast<int64_t>(batch.back().size()));
            rngs.emplace_back(seed, overoptimisation_stream(kind, iteration, out[i].prompt, out[i].sample));
        }
        KvCache cache(policy.config(), static_cast<int64_t>(batch.size()),
                      longest + std::max<int64_t>(gen.max_new_tokens - 1, 1));
        std::vector<Generation> gens = generate(policy, cache, batch, gen, rngs);
        for (size_t i = first; i < last; ++i) {
            OverOptSample& r = out[i];
            Generation& g = gens[i - first];
            r.response = g.tokens;
            r.finish_reason = g.finish_reason;
            ResponseText shown = s.tokenizer().decode_response(g.tokens, g.finish_reason == "eos", s.eos_id);
            r.decodable = shown.decodable;
            r.text = std::move(shown.text);
        }
        done += static_cast<int64_t>(last - first);
        bar.update(done);
    };
    parallel::share_range(
        0, batches, sample_batch,
        [&](size_t j) {
            json all = json::array();
            for (size_t i = rows_of(j).first; i < rows_of(j).second; ++i)
                all.push_back({{"response", out[i].response},
                               {"finish_reason", out[i].finish_reason},
                               {"decodable", out[i].decodable},
                               {"text", out[i].text}});
            return all;
        },
        [&](size_t j, const json& all) {
            size_t i = rows_of(j).first;
            for (const json& f : all) {
                OverOptSample& r = out[i++];
                r.response = f.at("response").get<std::vector<int32_t>>();
                r.finish_reason = f.at("finish_reason").get<std::string>();
                r.decodable = f.at("decodable").get<bool>();
                r.text = f.at("text").get<std::string>();
            }
        });
    bar.finish();
    return out;
}

// The judge's score of every row and, with a policy and a reference, the
// sequence KL between them; kOverOptScoringRows rows per forward.
void judge_rows(const Study& s, std::vector<OverOptSample>& rows, const std::vector<std::vector<int32_t>>& prompts,
                RoleModel& judge, Qwen2* policy, Qwen2* reference, const std::string& label) {
    Progress bar(label + " judge", static_cast<int64_t>(rows.size()));
    const size_t batches = (rows.size() + kOverOptScoringRows - 1) / kOverOptScoringRows;
    auto rows_of = [&](size_t j) {
        return std::pair{j * kOverOptScoringRows, std::min(rows.size(), (j + 1) * kOverOptScoringRows)};
    };
    int64_t done = 0;
    auto judge_batch = [&](size_t j) {
        const auto [first, last] = rows_of(j);
        std::vector<ScoringRow> chunk;
        for (size_t i = first; i < last; ++i)
            chunk.push_back(ScoringRow{prompts[static_cast<size_t>(rows[i].prompt)], rows[i].response});
        const ScoringBatch b = s.batch(chunk);
        std::vector<float> scores(static_cast<size_t>(b.B));
        judge.scorer.reward_scores(b, *judge.role.head, scores.data(), false);
        check_finite(scores, "overoptimisation " + label, "judge score");
        for (int64_t k = 0; k < b.B; ++k) rows[first + static_cast<size_t>(k)].proxy = scores[static_cast<size_t>(k)];
        if (policy) {
            const std::vector<SequenceKl> kl = sequence_kl(*policy, *reference, b);
            for (int64_t k = 0; k < b.B; ++k) {
                rows[first + static_cast<size_t>(k)].kl_exact = kl[static_cast<size_t>(k)].kl_exact;
                rows[first + static_cast<size_t>(k)].kl_k1 = kl[static_cast<size_t>(k)].kl_k1;
            }
        }
        done += static_cast<int64_t>(last - first);
        bar.update(done);
    };
    parallel::share_range(
        0, batches, judge_batch,
        [&](size_t j) {
            json all = json::array();
            for (size_t i = rows_of(j).first; i < rows_of(j).second; ++i)
                all.push_back({{"proxy", rows[i].proxy},
                               {"kl_exact", rows[i].kl_exact ? json(*rows[i].kl_exact) : json()},
                               {"kl_k1", rows[i].kl_k1 ? json(*rows[i].kl_k1) : json()}});
            return all;
        },
        [&](size_t j, const json& all) {
            size_t i = rows_of(j).first;
            for (const json& f : all) {
                OverOptSample& r = rows[i++];
                r.proxy = f.at("proxy").get<double>();
                if (!f.at("kl_exact").is_null()) r.kl_exact = f.at("kl_exact").get<double>();
                if (!f.at("kl_k1").is_null()) r.kl_k1 = f.at("kl_k1").get<double>();
            }
        });
    bar.finish();
}

}  // namespace

fs::path overoptimisation_path(const RunLayout& run) { return run.eval() / "overoptimisation.json"; }
fs::path overoptimisation_timings_path(const RunLayout& run) { return run.eval() / "overoptimisation-timings.json"; }

std::vector<OverOptPoint> overoptimisation_points(const Study& s) {
    const RunLayout& run = s.run;
    const fs::path report = run.report("ppo", "continuous"), actor = run.final_dir("ppo") / "actor";
    if (!s.reader().exists(report) || !s.reader().exists(actor / "learned.safetensors"))
        fail("overoptimisation: PPO has not finished in ", run.root.string(), " (", report.string(), " or ",
             (actor / "learned.safetensors").string(), " is missing); run `ppolab ppo --mode continuous` first");
    const json r = parse_json(s.reader().read(report), report.string());
    const int64_t last = json_int(r, "iterations", report.string());
    // The snapshots the PPO run says it saved (a report without the block: none).
    std::vector<int64_t> saved;
    if (r.contains("snapshots"))
        saved = json_field(r["snapshots"], "iterations", report.string() + " snapshots").get<std::vector<int64_t>>();
    std::vector<OverOptPoint> points{{0, "sft/final", run.final_dir("sft")}};
    for (int64_t i : saved) {
        const fs::path dir = run.snapshot_dir(i);
        if (i <= points.back().iteration || i >= last)
            fail(report.string(), ": snapshot iterations must increase within (0, ", last, "); got ", i);
        if (!s.reader().exists(dir / "learned.safetensors"))
            fail("overoptimisation: the PPO snapshot of iteration ", i, " is missing: no ", dir.string(),
                 "/learned.safetensors (", report.string(), " lists it)");
        points.push_back({i, relative_to_run(run, dir), dir});
    }
    points.push_back({last, "ppo/final/actor", actor});
    return points;
}

uint64_t overoptimisation_stream(int kind, int64_t iteration, int64_t prompt, int64_t sample) {
    if (kind < 0 || kind > 1 || iteration < 0 || iteration >= (int64_t{1} << 22) || prompt < 0 ||
        prompt >= (int64_t{1} << 20) || sample < 0 || sample >= (int64_t{1} << 20))
        fail("overoptimisation: sample key (kind ", kind, ", iteration ", iteration, ", prompt ", prompt, ", sample ",
             sample, ") out of range (iteration < 2^22, prompt and sample < 2^20)");
    return (static_cast<uint64_t>(kind) << 62) | (static_cast<uint64_t>(iteration) << 40) |
           (static_cast<uint64_t>(prompt) << 20) | static_cast<uint64_t>(sample);
}

OverOptSamples overoptimisation_sample(const Study& s) {
    const auto started = Clock::now();
    OverOptSamples out;
    out.points = overoptimisation_points(s);
    out.samples_per_prompt = s.cfg.evaluation.snapshot_samples;
    out.n = s.cfg.evaluation.best_of_n;
    out.prompts = load_eval_prompts(s.reader(), s.run.corpus(), EvalPopulation::test);
    std::vector<std::vector<int32_t>> ids;
    for (const PromptRow& p : out.prompts) {
        ids.push_back(s.encode_prompt(p.prompt));
        if (static_cast<int64_t>(ids.back().size()) > s.limits.max_prompt)
            fail("prompt ", p.id, ": ", ids.back().size(), " tokens, over limits.max_prompt ", s.limits.max_prompt,
                 " (refused, never truncated)");
    }
    RoleModel sft(s, s.run.final_dir("sft"), "reference", RoleKind::policy);
    RoleModel judge(s, s.run.final_dir("reward"), "reward", RoleKind::reward);

    json points = json::array();
    for (const OverOptPoint& pt : out.points) {
        const auto t = Clock::now();
        RoleModel policy(s, pt.dir, "actor", RoleKind::policy);
        const std::string label = "overoptimisation iteration " + std::to_string(pt.iteration);
        std::vector<OverOptSample> rows =
            sample_rows(s, policy.model, ids, out.samples_per_prompt, 0, pt.iteration, label);
        judge_rows(s, rows, ids, judge, &policy.model, &sft.model, label);
        if (policy.changed()) fail("overoptimisation: ", pt.policy, " changed");
        out.at_point.push_back(std::move(rows));
        points.push_back(
            {{"iteration", pt.iteration}, {"policy", pt.policy}, {"learned_identity", policy.initial_identity}});
        out.seconds["iteration-" + std::to_string(pt.iteration)] = since(t);
    }
    const auto t_bon = Clock::now();
    out.best_of_n = sample_rows(s, sft.model, ids, out.n, 1, 0, "overoptimisation best-of-n");
    judge_rows(s, out.best_of_n, ids, judge, nullptr, nullptr, "overoptimisation best-of-n");
    out.seconds["best_of_n"] = since(t_bon);
    if (sft.changed()) fail("overoptimisation: the SFT reference changed");
    if (judge.changed()) fail("overoptimisation: the judge changed while scoring");
    if (base_frozen_identity(s.base) != s.base_identity) fail("overoptimisation: the frozen base changed");

    const GenerationOptions gen = sampling_options(s);
    out.identity = s.identity();
    out.identity["stage"] = "overoptimisation";
    out.identity["population"] = "test";
    out.identity["data"] = {{"eval/test_prompts.jsonl",
                             load_manifest(s.reader(), s.run.corpus()).files.at("eval/test_prompts.jsonl").sha256}};
    out.identity["sft_learned_identity"] = sft.initial_identity;
    out.identity["judge_learned_identity"] = judge.initial_identity;
    out.identity["points"] = points;
    out.identity["sampling"] = {
        {"temperature", 1.0},
        {"max_new_tokens", gen.max_new_tokens},
        {"eos_id", gen.eos_id},
        {"pad_id", gen.pad_id},
        {"sample_seed", s.cfg.evaluation.sample_seed},
        {"stream", "Philox(sample_seed, kind << 62 | iteration << 40 | prompt << 20 | sample); kind 1 = best-of-n"},
        {"rows_per_batch", kOverOptRowsPerBatch},
        {"scoring_rows", kOverOptScoringRows}};
    out.identity["readable_roots"] = readable_roots(s);
    out.seconds["sampling"] = since(started);
    return out;
}

namespace {

ordered_json sequence_json(const OverOptSample& r) {
    ordered_json j;
    j["prompt"] = r.prompt;
    j["sample"] = r.sample;
    j["response_ids"] = r.response;
    j["text"] = r.text;
    j["tokens"] = r.response.size();
    j["finish_reason"] = r.finish_reason;
    j["kl_exact"] = *r.kl_exact;
    j["kl_k1"] = *r.kl_k1;
    j["proxy"] = r.proxy;
    j["gold"] = r.verdict->rubric_success;
    j["status"] = r.verdict->status;
    j["relevant"] = r.verdict->relevant;
    j["polite"] = r.verdict->polite;
    return j;
}

ordered_json point_json(const OverOptPoint& pt, const std::string& identity, const std::vector<OverOptSample>& rows) {
    double kl = 0, k1 = 0, gold = 0, proxy = 0;
    ordered_json seqs = ordered_json::array();
    for (const OverOptSample& r : rows) {
        kl += *r.kl_exact;
        k1 += *r.kl_k1;
        gold += r.verdict->rubric_success;
        proxy += r.proxy;
        seqs.push_back(sequence_json(r));
    }
    const double n = static_cast<double>(rows.size());
    ordered_json j;
    j["iteration"] = pt.iteration;
    j["policy"] = pt.policy;
    j["learned_identity"] = identity;
    j["kl_exact"] = kl / n;
    j["kl_k1"] = k1 / n;
    j["gold"] = gold / n;
    j["proxy"] = proxy / n;
    j["sequences"] = seqs;
    return j;
}

// Best-of-n: one entry per prompt, its n samples as parallel arrays.
ordered_json best_of_n_json(const std::vector<OverOptSample>& rows, size_t prompts) {
    ordered_json out = ordered_json::array();
    for (size_t p = 0; p < prompts; ++p) {
        ordered_json proxy = ordered_json::array(), gold = proxy, tokens = proxy, text = proxy, status = proxy,
                     relevant = proxy, polite = proxy, finish = proxy;
        for (const OverOptSample& r : rows) {
            if (r.prompt != static_cast<int64_t>(p)) continue;
            proxy.push_back(r.proxy);
            gold.push_back(r.verdict->rubric_success);
            tokens.push_back(r.response.size());
            text.push_back(r.text);
            finish.push_back(r.finish_reason);
            status.push_back(r.verdict->status);
            relevant.push_back(r.verdict->relevant);
            polite.push_back(r.verdict->polite);
        }
        out.push_back({{"prompt", p},
                       {"proxy", proxy},
                       {"gold", gold},
                       {"tokens", tokens},
                       {"text", text},
                       {"finish_reason", finish},
                       {"status", status},
                       {"relevant", relevant},
                       {"polite", polite}});
    }
    return out;
}

}  // namespace

json overoptimisation_label(const Study& s, OverOptSamples& in) {
    const auto started = Clock::now();
    // The samples answer exactly the corpus's test prompts, in order.
    const std::vector<PromptRow> expected = load_eval_prompts(s.reader(), s.run.corpus(), EvalPopulation::test);
    if (expected.size() != in.prompts.size())
        fail("overoptimisation: ", in.prompts.size(), " sampled prompts; the corpus has ", expected.size());
    for (size_t i = 0; i < expected.size(); ++i)
        if (expected[i].id != in.prompts[i].id || expected[i].prompt != in.prompts[i].prompt)
            fail("overoptimisation: prompt ", i, " is ", in.prompts[i].id, "; the corpus has ", expected[i].id);
    const GoldLabels gold = load_gold(s.reader(), s.run.corpus());
    auto label = [&](OverOptSample& r) {
        const PromptRow& p = in.prompts[static_cast<size_t>(r.prompt)];
        const GoldLabel& g = gold.at(p.id);
        if (g.family != p.family) fail("gold label ", p.id, ": family ", g.family, " but the prompt says ", p.family);
        r.verdict = evaluate_response(r.text, finish_reason_parse(r.finish_reason), g.expected_action, r.decodable);
    };
    for (auto& rows : in.at_point)
        for (OverOptSample& r : rows) label(r);
    for (OverOptSample& r : in.best_of_n) label(r);

    ordered_json doc;
    doc["format"] = "ppolab-overoptimisation";
    doc["identity"] = ordered_json::parse(in.identity.dump());
    doc["samples_per_prompt"] = in.samples_per_prompt;
    doc["best_of_n"] = in.n;
    ordered_json ids = ordered_json::array();
    for (const PromptRow& p : in.prompts) ids.push_back(p.id);
    doc["prompts"] = ids;
    ordered_json points = ordered_json::array();
    for (size_t i = 0; i < in.points.size(); ++i)
        points.push_back(
            point_json(in.points[i], in.identity["points"][i]["learned_identity"].get<std::string>(), in.at_point[i]));
    doc["snapshots"] = points;
    doc["best_of_n_samples"] = best_of_n_json(in.best_of_n, in.prompts.size());
    doc["note"] =
        "proxy: the frozen judge's learned score; gold: rubric_success of the reserved rubric (a simulated signal, "
        "OfficeHelpPrefs-v1). kl_exact: the exact sequence KL(policy || SFT) over the full vocabulary, EOS included; "
        "kl_k1: the sampled log-ratio sum. Best-of-n samples come from SFT (their KL to SFT is 0, not computed).";
    fs::create_directories(overoptimisation_path(s.run).parent_path());
    write_json_atomic(overoptimisation_path(s.run), doc);
    json seconds = in.seconds;
    seconds["labels"] = since(started);
    write_json_atomic(overoptimisation_timings_path(s.run), seconds, Overwrite::replace);
    return json::parse(doc.dump());
}

}  // namespace ppolab
