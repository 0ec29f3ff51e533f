// exercise.cpp — the frozen judge on the probe squares (SPEC §7).
#include "evaluation/exercise.h"

#include <algorithm>
#include <array>

#include "data/corpus.h"
#include "evaluation/report.h"
#include "model/hf_folder.h"
#include "training/roles.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/sha256.h"
#include "util/stopwatch.h"

namespace ppolab {

namespace {

void hash_tree(const fs::path& root, const fs::path& dir, bool recursive, ArtefactHashes& out,
               const std::string& extension = "") {
    if (!fs::is_directory(dir)) return;
    auto add = [&](const fs::directory_entry& e) {
        if (!e.is_regular_file()) return;
        if (!extension.empty() && e.path().extension() != extension) return;
        out[e.path().lexically_relative(root).generic_string()] = sha256_file(e.path());
    };
    if (recursive)
        for (const auto& e : fs::recursive_directory_iterator(dir)) add(e);
    else
        for (const auto& e : fs::directory_iterator(dir)) add(e);
}

}  // namespace

ArtefactHashes main_artefact_hashes(const RunLayout& run) {
    ArtefactHashes h;
    for (const fs::path& f : {run.config(), run.corpus() / "manifest.json"})
        if (fs::is_regular_file(f)) h[f.lexically_relative(run.root).generic_string()] = sha256_file(f);
    hash_tree(run.root, run.base(), true, h);
    for (const char* stage : {"sft", "reward", "ppo"}) {
        hash_tree(run.root, run.final_dir(stage), true, h);
        hash_tree(run.root, run.stage(stage), false, h, ".json");
    }
    hash_tree(run.root, run.eval(), false, h, ".json");
    return h;
}

std::vector<std::string> artefact_changes(const ArtefactHashes& before, const ArtefactHashes& after) {
    std::vector<std::string> out;
    for (const auto& [path, sha] : before) {
        auto it = after.find(path);
        if (it == after.end()) out.push_back(path + ": removed");
        else if (it->second != sha) out.push_back(path + ": changed (" + sha + " -> " + it->second + ")");
    }
    for (const auto& [path, sha] : after)
        if (!before.count(path)) out.push_back(path + ": added");
    std::sort(out.begin(), out.end());
    return out;
}

void require_unchanged(const ArtefactHashes& before, const ArtefactHashes& after, const std::string& what) {
    const std::vector<std::string> changes = artefact_changes(before, after);
    if (changes.empty()) return;
    std::string list;
    for (const std::string& c : changes) list += "\n  " + c;
    fail(what, ": ", changes.size(), " main artefact(s) changed during the exercise (nothing may be refitted):", list);
}

json probe_exercise_table(const std::vector<ProbeCandidate>& candidates) {
    // family -> the four cells [correct][polite]
    std::map<std::string, std::array<const ProbeCandidate*, 4>> squares;
    for (const ProbeCandidate& c : candidates) {
        auto& cells = squares.try_emplace(c.family, std::array<const ProbeCandidate*, 4>{}).first->second;
        const int k = (c.correct ? 2 : 0) + (c.polite ? 1 : 0);
        if (cells[static_cast<size_t>(k)])
            fail("probe context ", c.family, ": two candidates (", cells[static_cast<size_t>(k)]->id, ", ", c.id,
                 ") for the cell correct=", c.correct, " polite=", c.polite);
        cells[static_cast<size_t>(k)] = &c;
    }
    json contexts = json::array();
    int64_t outranks = 0, correct_positive = 0, incorrect_positive = 0;
    double correct_sum = 0, incorrect_sum = 0;
    for (const auto& [family, cells] : squares) {
        for (size_t k = 0; k < 4; ++k)
            if (!cells[k])
                fail("probe context ", family, ": no candidate for the cell correct=", k >= 2, " polite=", k % 2,
                     " (expected the 2x2 square)");
        for (size_t k = 1; k < 4; ++k)
            if (cells[k]->prompt != cells[0]->prompt)
                fail("probe context ", family, ": candidates ", cells[0]->id, " and ", cells[k]->id,
                     " have different prompts");
        const double wrong_plain = cells[0]->score, wrong_polite = cells[1]->score;
        const double correct_plain = cells[2]->score, correct_polite = cells[3]->score;
        const double dc = correct_polite - correct_plain, dw = wrong_polite - wrong_plain;
        const bool out = wrong_polite > correct_plain;
        outranks += out;
        correct_positive += dc > 0;
        incorrect_positive += dw > 0;
        correct_sum += dc;
        incorrect_sum += dw;
        contexts.push_back({{"context", family},
                            {"scores",
                             {{"correct_plain", correct_plain},
                              {"correct_polite", correct_polite},
                              {"wrong_plain", wrong_plain},
                              {"wrong_polite", wrong_polite}}},
                            {"candidate_ids",
                             {{"correct_plain", cells[2]->id},
                              {"correct_polite", cells[3]->id},
                              {"wrong_plain", cells[0]->id},
                              {"wrong_polite", cells[1]->id}}},
                            {"correct_politeness_delta", dc},
                            {"incorrect_politeness_delta", dw},
                            {"wrong_polite_outranks_correct_plain", out}});
    }
    const double n = static_cast<double>(squares.size());
    return json{{"contexts", squares.size()},
                {"candidates", candidates.size()},
                {"wrong_polite_outranks_correct_plain_contexts", outranks},
                {"correct_politeness_delta_positive_contexts", correct_positive},
                {"incorrect_politeness_delta_positive_contexts", incorrect_positive},
                {"mean_correct_politeness_delta", squares.empty() ? json(nullptr) : json(correct_sum / n)},
                {"mean_incorrect_politeness_delta", squares.empty() ? json(nullptr) : json(incorrect_sum / n)},
                {"per_context", contexts}};
}

// What the judge's score is, by where its preferences came from (SPEC §8).
static std::string exercise_note(const json& feedback) {
    std::string note =
        "A judge score gain is neither human satisfaction nor, alone, proof that PPO exploits the politeness bias: "
        "read the actor's outputs (RUN/eval/*-scored.json) too. ";
    const std::string kind = feedback.is_object() ? feedback.value("feedback_kind", "") : "";
    if (kind == "human")
        return note +
               "The judge learned from votes people gave (RUN/reward/continuous.json names them); the probe "
               "candidates and their labels are the simulated rubric's.";
    if (!feedback.is_null())
        return note +
               "The judge learned from an AI labeller's votes, not from people; the probe candidates and their "
               "labels are the simulated rubric's.";
    return note + "The preferences are simulated by a rubric, not human feedback.";
}

json run_exercise(const Study& s) {
    const auto started = Clock::now();
    const fs::path out = s.run.exercise();
    if (fs::exists(out)) fail("refusing to overwrite ", out.string());
    const fs::path judge_file = s.run.final_dir("reward") / "learned.safetensors";
    const ArtefactHashes before = main_artefact_hashes(s.run);
    const std::string judge_sha_before = sha256_file(s.reader().resolve(judge_file));

    Role judge = load_role(s.run.final_dir("reward"), "reward", RoleKind::reward, s);
    const std::string judge_identity = judge.learned_identity();
    Qwen2 model(s.base, &judge.lora);
    Scorer scorer(model);

    // The fixed candidates (gold/) over their prompts (eval/).
    const GoldLabels gold = load_gold(s.reader(), s.run.corpus());
    std::map<std::string, std::string> prompt_of;
    for (const PromptRow& p : load_eval_prompts(s.reader(), s.run.corpus(), EvalPopulation::probe))
        prompt_of[p.id] = p.prompt;
    std::vector<ProbeCandidate> candidates;
    for (const GoldLabel& g : gold.rows) {
        if (g.population != "probe") continue;
        auto it = prompt_of.find(g.id);
        if (it == prompt_of.end()) fail("gold probe label ", g.id, " has no prompt in eval/probe_prompts.jsonl");
        candidates.push_back(
            {g.id, g.family, it->second, g.candidate_response, g.candidate_correct, g.candidate_polite, 0.0});
    }
    if (candidates.size() != prompt_of.size())
        fail("exercise: ", candidates.size(), " gold probe candidates for ", prompt_of.size(), " probe prompts");
    {
        Progress bar("exercise judge", static_cast<int64_t>(candidates.size()));
        constexpr size_t chunk = 16;  // rows scored together
        for (size_t first = 0; first < candidates.size(); first += chunk) {
            const size_t last = std::min(candidates.size(), first + chunk);
            std::vector<ScoringRow> rows;
            for (size_t i = first; i < last; ++i)
                rows.push_back(s.encode_row(candidates[i].prompt, candidates[i].response));
            ScoringBatch b = s.batch(rows);
            std::vector<float> scores(static_cast<size_t>(b.B));
            scorer.reward_scores(b, *judge.head, scores.data(), false);
            for (size_t i = first; i < last; ++i) candidates[i].score = scores[i - first];
            bar.update(static_cast<int64_t>(last));
        }
        bar.finish();
    }
    json table = probe_exercise_table(candidates);

    // Nothing refitted, nothing rewritten.
    if (judge.learned_identity() != judge_identity) fail("exercise: the judge's parameters changed while scoring");
    if (base_frozen_identity(s.base) != s.base_identity) fail("exercise: the frozen base changed");
    const std::string judge_sha_after = sha256_file(s.reader().resolve(judge_file));
    if (judge_sha_after != judge_sha_before)
        fail("exercise: ", judge_file.string(), " changed (", judge_sha_before, " -> ", judge_sha_after, ")");
    const ArtefactHashes after = main_artefact_hashes(s.run);
    require_unchanged(before, after, "exercise");
    const std::string model_sha_after = checkpoint_sha256(s.model_dir);
    if (model_sha_after != s.model_sha256)
        fail("exercise: the base checkpoint ", s.model_dir.string(), " changed (", s.model_sha256, " -> ",
             model_sha_after, ")");

    json identity = s.identity();
    identity["stage"] = "exercise";
    identity["judge_learned_identity"] = judge_identity;
    const Manifest manifest = load_manifest(s.reader(), s.run.corpus());
    identity["data"] = {{"gold/labels.jsonl", manifest.files.at("gold/labels.jsonl").sha256},
                        {"eval/probe_prompts.jsonl", manifest.files.at("eval/probe_prompts.jsonl").sha256}};
    json rows = json::array();
    for (const ProbeCandidate& c : candidates)
        rows.push_back({{"id", c.id},
                        {"context", c.family},
                        {"correct", c.correct},
                        {"polite", c.polite},
                        {"response", c.response},
                        {"judge_score", c.score}});
    json result{{"identity", identity},
                {"score_name", "predicted simulated-preference score of the frozen judge (not human utility)"},
                {"refitted", false},
                {"judge_learned_sha256", {{"before", judge_sha_before}, {"after", judge_sha_after}}},
                {"artefacts_unchanged", true},
                {"artefact_sha256", after},
                {"base_checkpoint_sha256", {{"before", s.model_sha256}, {"after", model_sha_after}}},
                // the headline numbers (also in the summary)
                {"contexts", table["contexts"]},
                {"wrong_polite_outranks_correct_plain", table["wrong_polite_outranks_correct_plain_contexts"]},
                {"mean_correct_politeness_delta", table["mean_correct_politeness_delta"]},
                {"mean_incorrect_politeness_delta", table["mean_incorrect_politeness_delta"]},
                {"summary", table},
                {"candidates", rows},
                {"note", exercise_note(judge_feedback(s.run.root))},
                {"seconds", since(started)}};
    write_json_atomic(out, result);
    return result;
}

}  // namespace ppolab
