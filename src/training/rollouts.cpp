#include "training/rollouts.h"

#include <cstdio>

#include "model/generate.h"
#include "training/feedback_stage.h"
#include "util/error.h"

namespace ppolab {

const char* finish_name(Finish f) { return f == Finish::eos ? "eos" : "length"; }

RolloutPrompts RolloutPrompts::load(const Study& s) {
    RolloutPrompts rp;
    const std::optional<FeedbackPrompts> from_votes = feedback_rollout_prompts(s);
    rp.prompts = from_votes ? from_votes->prompts : load_rollout_prompts(s.reader(), s.run.corpus());
    for (const PromptRow& p : rp.prompts) {
        rp.ids.push_back(s.encode_prompt(p.prompt));
        if (static_cast<int64_t>(rp.ids.back().size()) > s.limits.max_prompt)
            fail("rollout prompt ", p.id, ": ", rp.ids.back().size(), " tokens, over limits.max_prompt ",
                 s.limits.max_prompt, " (refused, never truncated)");
    }
    rp.data_identity =
        from_votes ? from_votes->data_identity
                   : json{{"learn/rollout_prompts.jsonl",
                           load_manifest(s.reader(), s.run.corpus()).files.at("learn/rollout_prompts.jsonl").sha256}};
    return rp;
}

int64_t PromptOrder::next(Philox& sampler, int64_t count) {
    if (cursor >= static_cast<int64_t>(order.size())) {
        order = sampler.permutation(count);
        cursor = 0;
    }
    return order[static_cast<size_t>(cursor++)];
}

json OnlinePosition::to_json() const {
    return {{"order", order.order},
            {"cursor", order.cursor},
            {"iteration", iteration},
            {"updates", updates},
            {"history", history},
            {"consumed_rollout_ids", consumed},
            {"pending_rollouts", json::array()}};
}

void OnlinePosition::restore(const json& extra, const std::string& from, const std::string& stage) {
    order.order = json_field(extra, "order", from).get<std::vector<int64_t>>();
    order.cursor = json_int(extra, "cursor", from);
    iteration = json_int(extra, "iteration", from);
    updates = json_int(extra, "updates", from);
    history = json_field(extra, "history", from);
    consumed = json_field(extra, "consumed_rollout_ids", from);
    if (!json_field(extra, "pending_rollouts", from).empty())
        fail(from, ": a ", stage, " checkpoint must hold no pending rollout");
    seen.clear();
    for (const json& id : consumed) seen.insert(id.get<std::string>());
}

std::vector<Rollout> sample_rollouts(Qwen2& model, const Study& s, const RolloutPrompts& prompts,
                                     const std::vector<int64_t>& chosen, int64_t repeats, Philox& generation,
                                     int64_t iteration, std::set<std::string>& seen) {
    std::vector<std::vector<int32_t>> batch_prompts;
    std::vector<const PromptRow*> rows;
    for (int64_t idx : chosen)
        for (int64_t r = 0; r < repeats; ++r) {
            batch_prompts.push_back(prompts.ids[static_cast<size_t>(idx)]);
            rows.push_back(&prompts.prompts[static_cast<size_t>(idx)]);
        }
    GenerationOptions gen;
    gen.max_new_tokens = s.limits.max_response;
    gen.eos_id = s.eos_id;
    gen.pad_id = s.pad_id;
    gen.greedy = false;
    std::vector<Generation> gens = generate(model, batch_prompts, gen, generation);
    std::vector<Rollout> rollouts(batch_prompts.size());
    for (size_t k = 0; k < rollouts.size(); ++k) {
        Rollout& r = rollouts[k];
        char id[64];
        std::snprintf(id, sizeof id, "iteration-%03lld-slot-%zu", static_cast<long long>(iteration), k);
        r.id = id;
        if (!seen.insert(r.id).second) fail("rollout id ", r.id, " was already consumed");
        r.prompt_id = rows[k]->id;
        r.row = ScoringRow{batch_prompts[k], gens[k].tokens};
        r.finish = gens[k].finish_reason == "eos" ? Finish::eos : Finish::length;
        r.old_logp = gens[k].logprobs;  // the sampling forward's: never replaced
    }
    return rollouts;
}

std::vector<float> response_slice(const ScoringBatch& b, const float* per_position, int64_t row) {
    std::vector<float> out;
    for (int64_t t = 0; t < b.T; ++t)
        if (b.response_mask[row * b.T + t]) out.push_back(per_position[row * b.T + t]);
    return out;
}

void scatter_row(const ScoringBatch& b, int64_t row, const std::vector<double>& d, double rows, float* out) {
    size_t i = 0;
    for (int64_t t = 0; t < b.T; ++t)
        if (b.response_mask[row * b.T + t]) out[row * b.T + t] = static_cast<float>(d[i++] / rows);
}

}  // namespace ppolab
