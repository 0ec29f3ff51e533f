#include "training/supervised_stage.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "parallel/world.h"
#include "training/adamw.h"
#include "training/chunked_update.h"
#include "training/schedule.h"
#include "training/study_config.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/sha256.h"
#include "util/stopwatch.h"

namespace ppolab {

void check_limits(const Study& s, const std::vector<SupervisedExample>& rows, bool pairs) {
    for (const SupervisedExample& e : rows) {
        try {
            s.batch({e.first});
            if (pairs) s.batch({e.second});
        } catch (const Error& err) {
            fail("example ", e.id, ": ", err.what());
        }
    }
}

std::vector<SupervisedExample> encode_pairs(const Study& s, const std::vector<PreferencePair>& pairs) {
    std::vector<SupervisedExample> out;
    for (const PreferencePair& p : pairs)
        out.push_back({p.id, s.encode_row(p.prompt, p.chosen), s.encode_row(p.prompt, p.rejected)});
    return out;
}

json corpus_files_identity(const Study& s, const Manifest& m, const std::vector<std::string>& files) {
    json out = json::object();
    for (const std::string& f : files) {
        auto it = m.files.find(f);
        if (it == m.files.end()) fail(s.run.corpus().string(), "/manifest.json: no entry for ", f);
        out[f] = it->second.sha256;
    }
    out["manifest_sha256"] = sha256_hex(s.reader().read(s.run.corpus() / "manifest.json"));
    return out;
}

json pairs_data_identity(const Study& s, const Manifest& m) {
    return corpus_files_identity(s, m, {"learn/train_pairs.jsonl", "learn/validation_pairs.jsonl"});
}

std::vector<ScoringRow> pair_rows(const std::vector<const SupervisedExample*>& pairs) {
    std::vector<ScoringRow> rows;
    for (const SupervisedExample* e : pairs) rows.push_back(e->first);
    for (const SupervisedExample* e : pairs) rows.push_back(e->second);
    return rows;
}

std::vector<ScoringRow> pair_rows(const std::vector<SupervisedExample>& pairs, size_t begin, size_t end) {
    std::vector<const SupervisedExample*> part;
    for (size_t j = begin; j < end; ++j) part.push_back(&pairs[j]);
    return pair_rows(part);
}

SupervisedSettings SupervisedSettings::read(const StudyConfig& cfg, const std::string& stage) {
    SupervisedSettings s;
    auto common = [&](const auto& c) {
        s.epochs = c.epochs;
        s.interrupt_epoch = c.interrupt_epoch;
        s.lr = c.lr;
        s.warmup_ratio = c.warmup_ratio;
        s.min_lr_ratio = c.min_lr_ratio;
        s.weight_decay = c.weight_decay;
        s.clip = c.clip;
        s.sampler_seed = cfg.seed(c.sampler_seed);
    };
    if (stage == "sft") {
        common(cfg.sft);
        s.per_update = cfg.sft.accumulation;
    } else if (stage == "reward") {
        common(cfg.reward);
        s.per_update = cfg.reward.pairs_per_update;
    } else if (stage == "dpo") {
        common(cfg.dpo);
        s.per_update = cfg.dpo.pairs_per_update;
    } else {
        fail("supervised stage must be sft, reward or dpo, got '", stage, "'");
    }
    s.beta1 = cfg.adamw.beta1;
    s.beta2 = cfg.adamw.beta2;
    s.eps = cfg.adamw.eps;
    s.max_updates = cfg.max_updates;
    s.checkpoint_every = cfg.checkpoint.every_updates;
    s.chunks = cfg.parallel.chunks;
    return s;
}

namespace {

// The training state of a supervised stage and its exact-state round trip.
struct SupervisedState {
    const std::string& name;
    const SupervisedSettings& cfg;
    const int64_t n;  // examples
    ParamList params;
    Schedule schedule;
    AdamW optimizer;
    Philox sampler;
    json identity;
    int64_t epoch = 0, updates = 0;
    json history = json::array(), validation_history = json::array();
    // The current epoch's permutation and the next position in it; empty:
    // the next epoch draws its permutation (mid-epoch checkpoints keep it).
    std::vector<int64_t> order;
    int64_t position = 0;

    SupervisedState(const std::string& stage, const SupervisedSettings& c, int64_t examples, ParamList p,
                    uint64_t stream)
        : name(stage),
          cfg(c),
          n(examples),
          params(std::move(p)),
          schedule{((n + c.per_update - 1) / c.per_update) * c.epochs, c.lr, c.warmup_ratio, c.min_lr_ratio},
          optimizer(params, AdamWConfig{c.beta1, c.beta2, c.eps, c.weight_decay}),
          sampler(c.sampler_seed, stream) {}
    SupervisedState(const SupervisedState&) = delete;  // holds references to its stage and settings
    SupervisedState& operator=(const SupervisedState&) = delete;

    void restore(const ResumeState& st, const fs::path& from_path) {
        const std::string from = from_path.string();
        restore_params(st.learned.at(name), params, from);
        optimizer.load_state(st.optimizers.at("adamw"), from);
        sampler = st.rngs.at("sampler");
        epoch = json_int(st.extra, "epoch", from);
        updates = json_int(st.extra, "updates", from);
        history = json_field(st.extra, "history", from);
        validation_history = json_field(st.extra, "validation_history", from);
        if (st.schedulers.at("lr").next_step != updates || !(st.schedulers.at("lr").schedule == schedule))
            fail(from, ": scheduler position differs from the update count");
        if (st.extra.contains("epoch_order")) {
            order = json_field(st.extra, "epoch_order", from).get<std::vector<int64_t>>();
            position = json_int(st.extra, "epoch_position", from);
            if (static_cast<int64_t>(order.size()) != n || position < 0 || position > n)
                fail(from, ": epoch_order/epoch_position do not fit the ", n, " examples of this stage");
        }
    }
    // The exact state (no durations in it): at the end, at an epoch boundary
    // (`at_epoch` = epochs finished) or mid-epoch (with the permutation).
    ResumeState exact_state(int64_t at_epoch, bool mid_epoch) {
        ResumeState st;
        st.identity = identity;
        st.learned[name] = capture_params(params);
        st.optimizers["adamw"] = optimizer.state();
        st.schedulers["lr"] = SchedulerState{schedule, updates};
        st.rngs["sampler"] = sampler;
        st.extra = {{"epoch", at_epoch},
                    {"updates", updates},
                    {"history", history},
                    {"validation_history", validation_history}};
        if (mid_epoch) {
            st.extra["epoch_order"] = order;
            st.extra["epoch_position"] = position;
        }
        return st;
    }
};

}  // namespace

json train_supervised(const Study& s, StageLifecycle& life, const SupervisedSettings& cfg,
                      SupervisedObjective& objective, const SupervisedData& data) {
    const std::string& name = life.stage();
    parallel::my_chunks(cfg.chunks);  // refuses a world size that does not divide the chunks, before any work
    const std::vector<SupervisedExample>& rows = data.rows;
    SupervisedState st(name, cfg, static_cast<int64_t>(rows.size()), objective.role().parameters(),
                       data.sampler_stream);
    const int64_t n = st.n, per_update = cfg.per_update;
    const int64_t updates_per_epoch = (n + per_update - 1) / per_update;
    st.identity = s.identity();
    st.identity["stage"] = name;
    st.identity["data"] = data.data_identity;
    st.identity["initial_learned_identity"] = data.initial_identity;
    st.identity["schedule"] = st.schedule.to_json();

    if (life.start(st.identity, [&](const ResumeState& r, const fs::path& from) { st.restore(r, from); })) {
        life.set_restarted({{"file", life.checkpoint().path().string()},
                            {"updates", st.updates},
                            {"epoch", st.epoch},
                            {"mid_epoch", !st.order.empty()}});
        std::fprintf(stderr, "%s %s: continuing from checkpoint %s (update %lld, epoch %lld%s)\n", name.c_str(),
                     life.mode_name().c_str(), life.checkpoint().path().c_str(), static_cast<long long>(st.updates),
                     static_cast<long long>(st.epoch + 1), st.order.empty() ? " start" : ", mid-epoch");
    }
    const int64_t stop_epoch = life.mode() == StageMode::interrupt ? cfg.interrupt_epoch : cfg.epochs;
    const int64_t every = cfg.checkpoint_every;
    auto save_checkpoint = [&](int64_t at_epoch, bool mid_epoch) {
        const std::string what = name + " update " + std::to_string(st.updates);
        check_ranks_agree(st.params, what);
        life.checkpoint().save(st.exact_state(at_epoch, mid_epoch), what);
    };
    const FaultHooks& hooks = life.hooks();

    // The updates: per epoch a permutation, groups of per_update examples.
    Progress bar(life.what(), std::max<int64_t>(0, stop_epoch * updates_per_epoch - st.updates));
    const auto started = Clock::now();
    bool capped = false;
    int64_t done_here = 0;
    for (; st.epoch < stop_epoch && !capped; ++st.epoch) {
        // A cap reached before this epoch (a resume of a capped interrupt) draws no permutation.
        if (cfg.max_updates && st.updates >= *cfg.max_updates) {
            capped = true;
            break;
        }
        if (st.order.empty()) {
            st.order = st.sampler.permutation(n);
            st.position = 0;
        }
        for (int64_t start = st.position; start < n; start += per_update) {
            if (cfg.max_updates && st.updates >= *cfg.max_updates) {
                capped = true;
                break;
            }
            std::vector<const SupervisedExample*> group;
            for (int64_t i = start; i < std::min(n, start + per_update); ++i)
                group.push_back(&rows[static_cast<size_t>(st.order[static_cast<size_t>(i)])]);
            const double lr = st.schedule.at(st.updates);
            const double denominator = objective.denominator(group);
            const std::string where = name + " update " + std::to_string(st.updates + 1);
            ChunkOutput out = chunked_gradient(
                st.params, cfg.chunks, static_cast<int64_t>(group.size()), [&] { objective.role().zero_grad(); },
                [&](int64_t begin, int64_t end) {
                    const std::vector<const SupervisedExample*> chunk(group.begin() + begin, group.begin() + end);
                    ChunkOutput o;
                    o.loss = objective.loss_and_grad(chunk, denominator, o.trace, where, st.updates + 1);
                    return o;
                });
            const double loss = out.loss;
            check_finite(loss, where, "loss");
            if (hooks.nonfinite(name, "gradient", st.updates + 1))
                st.params.front().grad[0] = std::numeric_limits<float>::quiet_NaN();
            const double norm = clip_grad_norm(st.params, cfg.clip, where);
            st.optimizer.step(lr);
            ++st.updates;
            if (hooks.drift(name, st.updates) && parallel::world().rank == parallel::world().size - 1)
                st.params.front().data[0] += 1e-3f;
            ++done_here;
            st.history.push_back({{"epoch", st.epoch + 1},
                                  {"update", st.updates},
                                  {"lr", lr},
                                  {"loss", loss},
                                  {"denominator", denominator},
                                  {"denominator_kind", data.denominator_kind},
                                  {"unclipped_gradient_norm", norm},
                                  {"rows", std::move(out.trace)}});
            bar.update(done_here, "loss " + std::to_string(loss));
            st.position = start + per_update;
            // Mid-epoch checkpoint (the epoch's last update waits for its validation).
            if (checkpoint_due(every, st.updates) && st.position < n) save_checkpoint(st.epoch, true);
        }
        json v = objective.validate(data.validation);
        v["epoch"] = st.epoch + 1;
        v["complete_epoch"] = !capped;
        st.validation_history.push_back(v);
        if (capped) break;
        st.order.clear();
        st.position = 0;
        if (every > 0) save_checkpoint(st.epoch + 1, false);
    }
    bar.finish();
    const double seconds = since(started);
    check_ranks_agree(st.params, name + " end");
    const std::string final_identity = objective.role().learned_identity();
    if (base_frozen_identity(s.base) != s.base_identity) fail(name, ": the frozen base changed during training");
    if (st.updates > 0 && final_identity == data.initial_identity)
        fail(name, ": the learned parameters did not change");

    // The exact state (no durations in it) and the report.
    const StateFileInfo info = life.save_state(st.exact_state(st.epoch, false));
    int64_t trainable = 0;
    for (const ParamRef& p : st.params) trainable += p.numel();
    json report{{"stage", name},
                {"mode", life.mode_name()},
                {"identity", st.identity},
                {"epochs_completed", st.epoch},
                {"updates", st.updates},
                {"updates_this_run", done_here},
                {"total_updates", st.schedule.total},
                {"stopped_by_max_updates", capped},
                {"trainable_parameters", trainable},
                {"initial_learned_identity", data.initial_identity},
                {"final_learned_identity", final_identity},
                {"frozen_base_identity", s.base_identity},
                {"frozen_base_unchanged", true},
                {"history", st.history},
                {"validation_history", st.validation_history},
                {"seconds_per_update", done_here ? seconds / static_cast<double>(done_here) : 0.0}};
    life.add_common_fields(report, seconds, info, {"every_updates", every});
    if (life.mode() == StageMode::continuous) {
        save_role(s.run.final_dir(name), objective.role(), st.identity, s);
        report["final_dir"] = s.run.final_dir(name).string();
    }
    life.finish(report);
    return report;
}

}  // namespace ppolab
