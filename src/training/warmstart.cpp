#include "training/warmstart.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include "data/corpus.h"
#include "model/scoring.h"
#include "training/adamw.h"
#include "training/checkpoints.h"
#include "training/losses.h"
#include "training/roles.h"
#include "training/schedule.h"
#include "training/state.h"
#include "training/study_config.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/sha256.h"

namespace ppolab {

const char* branch_name(WarmstartBranch b) { return b == WarmstartBranch::sft ? "sft" : "reward"; }

const char* stage_mode_name(StageMode m) {
    return m == StageMode::interrupt ? "interrupt" : m == StageMode::continuous ? "continuous" : "resume";
}

StageMode parse_stage_mode(std::string_view text) {
    if (text == "interrupt") return StageMode::interrupt;
    if (text == "continuous") return StageMode::continuous;
    if (text == "resume") return StageMode::resume;
    fail("--mode must be interrupt, continuous or resume; got '", text, "'");
}

namespace {

// One example of a supervised stage: SFT rows are (prompt, response); judge
// rows are pairs, encoded as two scoring rows.
struct Example {
    std::string id;
    ScoringRow first;   // SFT: the demonstration; reward: chosen
    ScoringRow second;  // reward: rejected
};

std::vector<Example> encode_sft(const Study& s, const std::vector<Demonstration>& demos) {
    std::vector<Example> out;
    for (const Demonstration& d : demos) out.push_back({d.id, s.encode_row(d.prompt, d.response), {}});
    return out;
}

std::vector<Example> encode_pairs(const Study& s, const std::vector<PreferencePair>& pairs) {
    std::vector<Example> out;
    for (const PreferencePair& p : pairs)
        out.push_back({p.id, s.encode_row(p.prompt, p.chosen), s.encode_row(p.prompt, p.rejected)});
    return out;
}

// Every row must fit the limits before the first update: refused, never truncated.
void check_limits(const Study& s, const std::vector<Example>& rows, bool pairs) {
    for (const Example& e : rows) {
        try {
            s.batch({e.first});
            if (pairs) s.batch({e.second});
        } catch (const Error& err) {
            fail("example ", e.id, ": ", err.what());
        }
    }
}

struct Trainer {
    const Study& study;
    WarmstartBranch branch;
    Role role;
    Qwen2 model;
    Scorer scorer;

    Trainer(const Study& s, WarmstartBranch b, Role r)
        : study(s), branch(b), role(std::move(r)), model(s.base, &role.lora), scorer(model) {}

    // SFT: summed token loss of a group / its active tokens; reward: mean
    // Bradley–Terry loss over the pairs. Gradients accumulate into the role.
    // `where` names the stage and update in non-finite errors.
    double loss_and_grad(const std::vector<const Example*>& group, double& denominator, json& trace,
                         const std::string& where, int64_t update) {
        if (branch == WarmstartBranch::sft) {
            std::vector<ScoringRow> rows;
            denominator = 0;
            for (const Example* e : group) {
                rows.push_back(e->first);
                denominator += static_cast<double>(e->first.response.size());
            }
            ScoringBatch b = study.batch(rows);
            std::vector<float> logp(static_cast<size_t>(b.B * b.T)), dlogp(logp.size());
            scorer.response_logprobs(b, logp.data(), true);
            if (test_nonfinite_here("sft", "loss", update)) logp[0] = std::numeric_limits<float>::quiet_NaN();
            double loss = sft_token_loss(logp.data(), b.response_mask.data(), b.B * b.T, denominator, dlogp.data());
            check_finite(loss, where, "loss (token cross-entropy)");
            scorer.response_logprobs_backward(b, dlogp.data());
            for (size_t i = 0; i < group.size(); ++i) {
                double sum = 0;
                for (int64_t t = 0; t < b.T; ++t)
                    if (b.response_mask[i * b.T + t]) sum += logp[i * b.T + t];
                trace.push_back({{"id", group[i]->id},
                                 {"tokens", group[i]->first.response.size()},
                                 {"sum_logprob", sum}});
            }
            return loss;
        }
        std::vector<ScoringRow> rows;
        for (const Example* e : group) rows.push_back(e->first);
        for (const Example* e : group) rows.push_back(e->second);
        const int64_t n = static_cast<int64_t>(group.size());
        denominator = static_cast<double>(n);
        ScoringBatch b = study.pair_batch(rows);  // each pair's prompt computed once
        std::vector<float> scores(static_cast<size_t>(2 * n)), dscores(scores.size());
        scorer.reward_scores(b, *role.head, scores.data(), true);
        if (test_nonfinite_here("reward", "score", update)) scores[0] = std::numeric_limits<float>::quiet_NaN();
        check_finite(scores, where, "judge score");
        double loss = bradley_terry_loss(scores.data(), scores.data() + n, n, dscores.data(), dscores.data() + n);
        scorer.reward_scores_backward(b, *role.head, dscores.data());
        for (int64_t i = 0; i < n; ++i)
            trace.push_back({{"id", group[static_cast<size_t>(i)]->id},
                             {"chosen", scores[static_cast<size_t>(i)]},
                             {"rejected", scores[static_cast<size_t>(n + i)]}});
        return loss;
    }

    // Validation, never used to select anything (SPEC §3).
    json validate(const std::vector<Example>& rows) {
        const size_t chunk = 16;
        if (branch == WarmstartBranch::sft) {
            double total = 0;
            int64_t tokens = 0;
            for (size_t i = 0; i < rows.size(); i += chunk) {
                std::vector<ScoringRow> part;
                for (size_t j = i; j < std::min(rows.size(), i + chunk); ++j) part.push_back(rows[j].first);
                ScoringBatch b = study.batch(part);
                std::vector<float> logp(static_cast<size_t>(b.B * b.T));
                scorer.response_logprobs(b, logp.data(), false);
                for (int64_t k = 0; k < b.B * b.T; ++k)
                    if (b.response_mask[k]) {
                        total += logp[k];
                        ++tokens;
                    }
            }
            return {{"rows", rows.size()},
                    {"tokens", tokens},
                    {"sum_logprob", total},
                    {"mean_token_logprob", total / static_cast<double>(std::max<int64_t>(tokens, 1))},
                    {"used_for_selection", false}};
        }
        double loss = 0;
        int64_t correct = 0, ties = 0;
        for (size_t i = 0; i < rows.size(); i += chunk) {
            std::vector<ScoringRow> part;
            const size_t end = std::min(rows.size(), i + chunk);
            for (size_t j = i; j < end; ++j) part.push_back(rows[j].first);
            for (size_t j = i; j < end; ++j) part.push_back(rows[j].second);
            const int64_t n = static_cast<int64_t>(end - i);
            ScoringBatch b = study.pair_batch(part);
            std::vector<float> scores(static_cast<size_t>(2 * n));
            scorer.reward_scores(b, *role.head, scores.data(), false);
            loss += bradley_terry_loss(scores.data(), scores.data() + n, n, nullptr, nullptr) * static_cast<double>(n);
            for (int64_t k = 0; k < n; ++k) {
                correct += scores[k] > scores[n + k];
                ties += scores[k] == scores[n + k];
            }
        }
        const double count = static_cast<double>(rows.size());
        return {{"pairs", rows.size()},
                {"loss", loss / count},
                {"correct", correct},
                {"ties", ties},
                {"accuracy", static_cast<double>(correct) / count},
                {"used_for_selection", false}};
    }
};

json data_identity(const Study& s, const Manifest& m, WarmstartBranch b) {
    std::vector<std::string> files = b == WarmstartBranch::sft
                                         ? std::vector<std::string>{"learn/demonstrations.jsonl", "learn/validation_pairs.jsonl"}
                                         : std::vector<std::string>{"learn/train_pairs.jsonl", "learn/validation_pairs.jsonl"};
    json out = json::object();
    for (const std::string& f : files) {
        auto it = m.files.find(f);
        if (it == m.files.end()) fail(s.run.corpus().string(), "/manifest.json: no entry for ", f);
        out[f] = it->second.sha256;
    }
    out["manifest_sha256"] = sha256_hex(s.reader().read(s.run.corpus() / "manifest.json"));
    return out;
}

std::vector<Example> encode_votes(const Study& s, const std::vector<VotePair>& pairs) {
    std::vector<Example> out;
    for (const VotePair& p : pairs) {
        const std::vector<int32_t> prompt = s.encode_prompt(p.prompt);
        out.push_back({p.id, ScoringRow{prompt, p.chosen}, ScoringRow{prompt, p.rejected}});
    }
    return out;
}

}  // namespace

json run_warmstart(const Study& s, WarmstartBranch branch, StageMode mode, const VoteData* votes) {
    if (votes && branch != WarmstartBranch::reward) fail("votes train the judge only (ppolab reward --votes)");
    if (branch == WarmstartBranch::reward && !votes && fs::exists(s.run.feedback_labels()))
        fail(s.run.stage("reward").string(), " holds a judge learning from votes (", s.run.feedback_labels().string(),
             "); a run's judge learns from one source: use `ppolab reward --votes …` or a new run");
    const std::string name = branch_name(branch);
    const std::string cfg = name + ".";
    const json& c = s.config;
    const std::string mode_name = stage_mode_name(mode);
    const fs::path state_path = s.run.state(name, mode_name);
    const fs::path report_path = s.run.report(name, mode_name);
    const fs::path checkpoint = checkpoint_path(s.run.stage(name), mode_name);
    // The report is written last: without it, what an earlier attempt wrote is unfinished.
    if (fs::exists(report_path)) fail("refusing to overwrite ", report_path.string(), " (a finished stage output)");
    std::vector<fs::path> unfinished = {state_path};
    if (mode == StageMode::continuous) unfinished.push_back(s.run.final_dir(name));
    remove_unfinished_outputs(unfinished, report_path, name + " " + mode_name);

    // 1. data: only learn/ (the guarded reader refuses anything else)
    const fs::path corpus = s.run.corpus();
    const Manifest manifest = load_manifest(s.reader(), corpus);
    std::vector<Example> rows = votes                          ? encode_votes(s, votes->train)
                                : branch == WarmstartBranch::sft ? encode_sft(s, load_demonstrations(s.reader(), corpus))
                                                                 : encode_pairs(s, load_pairs(s.reader(), corpus, PairSplit::train));
    std::vector<Example> validation = votes ? encode_votes(s, votes->validation)
                                      : branch == WarmstartBranch::sft
                                          ? [&] {
                                                std::vector<Example> v;
                                                for (const PreferencePair& p :
                                                     load_pairs(s.reader(), corpus, PairSplit::validation))
                                                    v.push_back({p.id, s.encode_row(p.prompt, p.chosen), {}});
                                                return v;
                                            }()
                                          : encode_pairs(s, load_pairs(s.reader(), corpus, PairSplit::validation));
    check_limits(s, rows, branch == WarmstartBranch::reward);
    check_limits(s, validation, branch == WarmstartBranch::reward);

    // 2. the role: SFT adapters on the base, or the judge's adapters + head
    Role role = branch == WarmstartBranch::sft
                    ? make_role(s, "sft", RoleKind::policy, static_cast<uint64_t>(config_int(c, "sft.adapter_seed")))
                    : make_role(s, "reward", RoleKind::reward, static_cast<uint64_t>(config_int(c, "reward.adapter_seed")),
                                static_cast<uint64_t>(config_int(c, "reward.head_seed")));
    const std::string initial_identity = role.learned_identity();
    Trainer trainer(s, branch, std::move(role));
    ParamList params = trainer.role.parameters();

    const int64_t per_update = config_int(c, branch == WarmstartBranch::sft ? "sft.accumulation" : "reward.pairs_per_update");
    const int64_t epochs = config_int(c, cfg + "epochs");
    const int64_t n = static_cast<int64_t>(rows.size());
    const int64_t updates_per_epoch = (n + per_update - 1) / per_update;
    Schedule schedule{updates_per_epoch * epochs, config_number(c, cfg + "lr"), config_number(c, cfg + "warmup_ratio"),
                      config_number(c, cfg + "min_lr_ratio")};
    AdamWConfig adam{config_number(c, "adamw.beta1"), config_number(c, "adamw.beta2"), config_number(c, "adamw.eps"),
                     config_number(c, cfg + "weight_decay")};
    AdamW optimizer(params, adam);
    Philox sampler(static_cast<uint64_t>(config_int(c, cfg + "sampler_seed")), branch == WarmstartBranch::sft ? 1 : 2);

    json identity = s.identity();
    identity["stage"] = name;
    identity["data"] = votes ? votes->data_identity : data_identity(s, manifest, branch);
    identity["initial_learned_identity"] = initial_identity;
    identity["schedule"] = schedule.to_json();

    int64_t epoch = 0, updates = 0;
    json history = json::array(), validation_history = json::array();
    // The current epoch's permutation and the next position in it; empty:
    // the next epoch draws its permutation (mid-epoch checkpoints keep it).
    std::vector<int64_t> order;
    int64_t position = 0;
    auto restore = [&](const ResumeState& st, const fs::path& from_path) {
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
    };
    // The exact state (no durations in it): at the end, at an epoch boundary
    // (`at_epoch` = epochs finished) or mid-epoch (with the permutation).
    auto exact_state = [&](int64_t at_epoch, bool mid_epoch) {
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
    };
    json restarted = nullptr;
    if (std::optional<ResumeState> st = load_checkpoint(checkpoint, identity, name + " " + mode_name)) {
        restore(*st, checkpoint);
        restarted = {{"file", checkpoint.string()}, {"updates", updates}, {"epoch", epoch}, {"mid_epoch", !order.empty()}};
        std::fprintf(stderr, "%s %s: continuing from checkpoint %s (update %lld, epoch %lld%s)\n", name.c_str(),
                     mode_name.c_str(), checkpoint.c_str(), static_cast<long long>(updates),
                     static_cast<long long>(epoch + 1), order.empty() ? " start" : ", mid-epoch");
    } else if (mode == StageMode::resume) {
        const fs::path from = s.run.state(name, "interrupt");
        restore(load_resume_state(from, &identity), from);
    }
    const int64_t stop_epoch = mode == StageMode::interrupt ? config_int(c, cfg + "interrupt_epoch") : epochs;
    const std::optional<int64_t> max_updates = config_optional_int(c, "max_updates");
    const int64_t every = config_int(c, "checkpoint.every_updates");
    int64_t checkpoints_written = 0;
    double checkpoint_seconds = 0;
    auto save_checkpoint = [&](int64_t at_epoch, bool mid_epoch) {
        const auto t0 = std::chrono::steady_clock::now();
        write_checkpoint(checkpoint, exact_state(at_epoch, mid_epoch), name + " update " + std::to_string(updates));
        checkpoint_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++checkpoints_written;
    };

    // 3. the updates
    Progress bar(name + " " + mode_name, std::max<int64_t>(0, stop_epoch * updates_per_epoch - updates));
    const auto started = std::chrono::steady_clock::now();
    bool capped = false;
    int64_t done_here = 0;
    for (; epoch < stop_epoch && !capped; ++epoch) {
        if (order.empty()) {
            order = sampler.permutation(n);
            position = 0;
        }
        for (int64_t start = position; start < n; start += per_update) {
            if (max_updates && updates >= *max_updates) {
                capped = true;
                break;
            }
            std::vector<const Example*> group;
            for (int64_t i = start; i < std::min(n, start + per_update); ++i)
                group.push_back(&rows[static_cast<size_t>(order[static_cast<size_t>(i)])]);
            trainer.role.zero_grad();
            const double lr = schedule.at(updates);
            double denominator = 0;
            json trace = json::array();
            const std::string where = name + " update " + std::to_string(updates + 1);
            const double loss = trainer.loss_and_grad(group, denominator, trace, where, updates + 1);
            check_finite(loss, where, "loss");
            if (test_nonfinite_here(name, "gradient", updates + 1))
                params.front().grad[0] = std::numeric_limits<float>::quiet_NaN();
            const double norm = clip_grad_norm(params, config_number(c, cfg + "clip"), where);
            optimizer.step(lr);
            ++updates;
            ++done_here;
            history.push_back({{"epoch", epoch + 1},
                               {"update", updates},
                               {"lr", lr},
                               {"loss", loss},
                               {"denominator", denominator},
                               {"denominator_kind", branch == WarmstartBranch::sft ? "active_response_tokens" : "pairs"},
                               {"unclipped_gradient_norm", norm},
                               {"rows", trace}});
            bar.update(done_here, "loss " + std::to_string(loss));
            position = start + per_update;
            // Mid-epoch checkpoint (the epoch's last update waits for its validation).
            if (checkpoint_due(every, updates) && position < n) save_checkpoint(epoch, true);
        }
        json v = trainer.validate(validation);
        v["epoch"] = epoch + 1;
        v["complete_epoch"] = !capped;
        validation_history.push_back(v);
        if (capped) break;
        order.clear();
        position = 0;
        if (every > 0) save_checkpoint(epoch + 1, false);
    }
    bar.finish();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const std::string final_identity = trainer.role.learned_identity();
    if (base_frozen_identity(s.base) != s.base_identity) fail(name, ": the frozen base changed during training");
    if (updates > 0 && final_identity == initial_identity) fail(name, ": the learned parameters did not change");

    // 4. the exact state (no durations in it) and the report
    StateFileInfo info = save_resume_state(state_path, exact_state(epoch, false));

    json report{{"stage", name},
                {"mode", stage_mode_name(mode)},
                {"identity", identity},
                {"epochs_completed", epoch},
                {"updates", updates},
                {"updates_this_run", done_here},
                {"total_updates", schedule.total},
                {"stopped_by_max_updates", capped},
                {"trainable_parameters", [&] {
                     int64_t k = 0;
                     for (const ParamRef& p : params) k += p.numel();
                     return k;
                 }()},
                {"initial_learned_identity", initial_identity},
                {"final_learned_identity", final_identity},
                {"frozen_base_identity", s.base_identity},
                {"frozen_base_unchanged", true},
                {"history", history},
                {"validation_history", validation_history},
                {"seconds", seconds},
                {"seconds_per_update", done_here ? seconds / static_cast<double>(done_here) : 0.0},
                {"peak_rss_bytes", peak_rss_bytes()},
                {"state_file", info.to_json()},
                {"checkpoints", {{"every_updates", every},
                                 {"written_this_run", checkpoints_written},
                                 {"seconds_this_run", checkpoint_seconds},
                                 {"restarted_from", restarted}}}};
    if (mode == StageMode::continuous) {
        save_role(s.run.final_dir(name), trainer.role, identity, s);
        report["final_dir"] = s.run.final_dir(name).string();
    }
    write_json_atomic(report_path, report);
    remove_checkpoint(checkpoint);
    return report;
}

json compare_state_files(const fs::path& a, const fs::path& b) {
    ResumeState first = load_resume_state(a);
    ResumeState second = load_resume_state(b);
    const std::string diff = states_first_difference(first, second);
    return json{{"status", diff.empty() ? "PASS" : "FAIL"},
                {"all_state_exact", diff.empty()},
                {"first_difference", diff},
                {"first_file", a.string()},
                {"second_file", b.string()},
                {"first_sha256", sha256_file(a)},
                {"second_sha256", sha256_file(b)},
                {"first_content_sha256", state_content_sha256(first)},
                {"second_content_sha256", state_content_sha256(second)}};
}

json resume_check(const RunLayout& run, const std::string& stage) {
    const json c = compare_state_files(run.state(stage, "continuous"), run.state(stage, "resume"));
    json result{{"stage", stage},
                {"status", c["status"]},
                {"all_state_exact", c["all_state_exact"]},
                {"first_difference", c["first_difference"]},
                {"continuous_sha256", c["first_sha256"]},
                {"resume_sha256", c["second_sha256"]},
                {"continuous_content_sha256", c["first_content_sha256"]},
                {"resume_content_sha256", c["second_content_sha256"]}};
    write_json_atomic(run.resume_check(stage), result, Overwrite::replace);
    return result;
}

json reward_test(const Study& s) {
    const fs::path out = s.run.stage("reward") / "reward-test.json";
    if (fs::exists(out)) fail("refusing to overwrite ", out.string());
    FrozenJudge judge(s, s.run.final_dir("reward"));
    const std::vector<PreferencePair> pairs = load_pairs(s.reader(), s.run.corpus(), PairSplit::test);
    json rows = json::array();
    int64_t correct = 0, ties = 0;
    for (const PreferencePair& p : pairs) {
        const ScoringRow c = s.encode_row(p.prompt, p.chosen), r = s.encode_row(p.prompt, p.rejected);
        const FrozenJudge::Scores sc = judge.score(c.prompt, c.response, r.response);
        correct += sc.correct();
        ties += sc.tie();
        rows.push_back({{"id", p.id},
                        {"chosen", p.chosen},
                        {"rejected", p.rejected},
                        {"chosen_score", sc.chosen},
                        {"rejected_score", sc.rejected},
                        {"correct", sc.correct()},
                        {"tie", sc.tie()}});
    }
    judge.check_unchanged("reward-test");
    const double n = static_cast<double>(pairs.size());
    json result{{"pairs", pairs.size()},
                {"correct", correct},
                {"ties", ties},
                {"accuracy", n > 0 ? static_cast<double>(correct) / n : 0.0},
                {"judge_learned_identity", judge.identity()},
                {"used_for_selection", false},
                {"score_name", "predicted simulated-preference score (not human utility)"},
                {"rows", rows}};
    write_json_atomic(out, result);
    return result;
}

}  // namespace ppolab
