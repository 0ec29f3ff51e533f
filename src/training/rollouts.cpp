#include "training/rollouts.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "kernels/numerics.h"
#include "model/generate.h"
#include "parallel/world.h"
#include "training/chunked_update.h"
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

Philox slot_generator(uint64_t seed, uint64_t tag, int64_t iteration, int64_t slot) {
    PPOLAB_ASSERT(tag < 256 && iteration >= 0 && iteration < (int64_t{1} << 32) && slot >= 0 &&
                  slot < (int64_t{1} << 24));
    return Philox(seed, tag << 56 | static_cast<uint64_t>(iteration) << 24 | static_cast<uint64_t>(slot));
}

std::vector<Rollout> sample_rollouts(Qwen2& model, const Study& s, const RolloutPrompts& prompts,
                                     const std::vector<int64_t>& chosen, int64_t repeats, uint64_t seed, uint64_t tag,
                                     int64_t iteration, int64_t begin, int64_t end) {
    PPOLAB_ASSERT(repeats >= 1 && 0 <= begin && begin <= end && end <= static_cast<int64_t>(chosen.size()) * repeats);
    std::vector<std::vector<int32_t>> batch_prompts;
    std::vector<const PromptRow*> rows;
    std::vector<Philox> rngs;
    for (int64_t k = begin; k < end; ++k) {
        const size_t idx = static_cast<size_t>(chosen[static_cast<size_t>(k / repeats)]);
        batch_prompts.push_back(prompts.ids[idx]);
        rows.push_back(&prompts.prompts[idx]);
        rngs.push_back(slot_generator(seed, tag, iteration, k));
    }
    GenerationOptions gen;
    gen.max_new_tokens = s.limits.max_response;
    gen.eos_id = s.eos_id;
    gen.pad_id = s.pad_id;
    gen.greedy = false;
    std::vector<Rollout> rollouts(batch_prompts.size());
    if (rollouts.empty()) return rollouts;
    std::vector<Generation> gens = generate(model, batch_prompts, gen, rngs);
    for (size_t k = 0; k < rollouts.size(); ++k) {
        Rollout& r = rollouts[k];
        char id[64];
        std::snprintf(id, sizeof id, "iteration-%03lld-slot-%lld", static_cast<long long>(iteration),
                      static_cast<long long>(begin + static_cast<int64_t>(k)));
        r.id = id;
        r.prompt_id = rows[k]->id;
        r.row = ScoringRow{batch_prompts[k], gens[k].tokens};
        r.finish = gens[k].finish_reason == "eos" ? Finish::eos : Finish::length;
        r.old_logp = gens[k].logprobs;  // the sampling forward's: never replaced
    }
    return rollouts;
}

namespace {

// A rollout's sampled and scored fields as bytes (floats and doubles bit for bit).
struct Bytes {
    std::string out;
    template <class T>
    void put(const T& v) {
        out.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
    template <class T>
    void put_vector(const std::vector<T>& v) {
        put(static_cast<uint64_t>(v.size()));
        out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
    }
    void put_string(const std::string& v) {
        put(static_cast<uint64_t>(v.size()));
        out += v;
    }
};

struct Reader {
    const std::string& in;
    size_t at = 0;
    template <class T>
    T get() {
        PPOLAB_ASSERT(at + sizeof(T) <= in.size());
        T v;
        std::memcpy(&v, in.data() + at, sizeof v);
        at += sizeof v;
        return v;
    }
    template <class T>
    std::vector<T> get_vector() {
        const uint64_t n = get<uint64_t>();
        PPOLAB_ASSERT(at + n * sizeof(T) <= in.size());
        std::vector<T> v(n);
        std::memcpy(v.data(), in.data() + at, n * sizeof(T));
        at += n * sizeof(T);
        return v;
    }
    std::string get_string() {
        const uint64_t n = get<uint64_t>();
        PPOLAB_ASSERT(at + n <= in.size());
        std::string v = in.substr(at, n);
        at += n;
        return v;
    }
};

void put_rollout(Bytes& b, const Rollout& r) {
    b.put_string(r.id);
    b.put_string(r.prompt_id);
    b.put_vector(r.row.prompt);
    b.put_vector(r.row.response);
    b.put(static_cast<uint8_t>(r.finish));
    b.put_vector(r.old_logp);
    b.put_vector(r.ref_logp);
    b.put_vector(r.values);
    b.put(r.score);
}

Rollout get_rollout(Reader& in) {
    Rollout r;
    r.id = in.get_string();
    r.prompt_id = in.get_string();
    r.row.prompt = in.get_vector<int32_t>();
    r.row.response = in.get_vector<int32_t>();
    r.finish = static_cast<Finish>(in.get<uint8_t>());
    r.old_logp = in.get_vector<float>();
    r.ref_logp = in.get_vector<float>();
    r.values = in.get_vector<float>();
    r.score = in.get<double>();
    return r;
}

}  // namespace

std::vector<Rollout> rollouts_by_chunks(
    int64_t chunks, int64_t slots, std::set<std::string>& seen,
    const std::function<std::vector<Rollout>(int64_t begin, int64_t end)>& produce) {
    const parallel::ChunkRange mine = parallel::my_chunks(chunks);
    std::vector<Rollout> all;
    for (int64_t c = mine.begin; c < mine.end; ++c) {
        const auto [begin, end] = chunk_items(slots, chunks, c);
        if (begin == end) continue;
        std::vector<Rollout> part = produce(begin, end);
        PPOLAB_ASSERT(static_cast<int64_t>(part.size()) == end - begin);
        for (Rollout& r : part) all.push_back(std::move(r));
    }
    if (parallel::world().size > 1) {  // rank r holds chunks [rC/W, (r+1)C/W): rank order is slot order
        Bytes mine_bytes;
        mine_bytes.put(static_cast<uint64_t>(all.size()));
        for (const Rollout& r : all) put_rollout(mine_bytes, r);
        all.clear();
        for (const std::string& bytes : parallel::all_gather(mine_bytes.out)) {
            Reader in{bytes};
            for (uint64_t n = in.get<uint64_t>(); n > 0; --n) all.push_back(get_rollout(in));
        }
    }
    PPOLAB_ASSERT(static_cast<int64_t>(all.size()) == slots);
    for (const Rollout& r : all)
        if (!seen.insert(r.id).second) fail("rollout id ", r.id, " was already consumed");
    return all;
}

ScoringBatch rollout_batch(const Study& s, const std::vector<Rollout>& rollouts, int64_t begin, int64_t end) {
    std::vector<ScoringRow> rows;
    for (int64_t b = begin; b < end; ++b) rows.push_back(rollouts[static_cast<size_t>(b)].row);
    return s.batch(rows);
}

std::vector<float> response_slice(const ScoringBatch& b, const float* per_position, int64_t row) {
    std::vector<float> out;
    for (int64_t t = 0; t < b.T; ++t)
        if (b.response_mask[row * b.T + t]) out.push_back(per_position[row * b.T + t]);
    return out;
}

double check_on_policy(const std::vector<float>& now, const Rollout& r, const std::string& where) {
    auto fmt_float = [](float v) {  // every bit visible
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
        return std::string(buf);
    };
    if (now.size() != r.old_logp.size())
        fail(where, ": rollout ", r.id, " has ", r.old_logp.size(), " sampled tokens but ", now.size(), " re-scored");
    double max_diff = 0;
    for (size_t i = 0; i < now.size(); ++i) {
        max_diff = std::max(max_diff, std::fabs(static_cast<double>(now[i]) - r.old_logp[i]));
        if (numerics_canonical() && std::bit_cast<uint32_t>(now[i]) != std::bit_cast<uint32_t>(r.old_logp[i]))
            fail(where, ": rollout ", r.id, " token ", i, ": the trainer's re-score gives log-prob ", fmt_float(now[i]),
                 " where sampling gave ", fmt_float(r.old_logp[i]),
                 "; under engine.numerics = canonical the two must be the same bits (decode = prefill)");
    }
    return max_diff;
}

void scatter_row(const ScoringBatch& b, int64_t row, const std::vector<double>& d, double rows, float* out) {
    size_t i = 0;
    for (int64_t t = 0; t < b.T; ++t)
        if (b.response_mask[row * b.T + t]) out[row * b.T + t] = static_cast<float>(d[i++] / rows);
}

}  // namespace ppolab
