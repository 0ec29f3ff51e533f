#include "training/rl.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <span>

#include "parallel/world.h"
#include "training/chunked_update.h"
#include "training/crash_checkpoints.h"
#include "training/metric_names.h"
#include "training/study_config.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/progress.h"
#include "util/stopwatch.h"

namespace ppolab {

RlSettings RlSettings::read(const StudyConfig& cfg) {
    const RlConfig& c = cfg.rl;
    RlSettings s;
    s.advantage = parse_group_advantage(c.advantage);
    s.iterations = c.iterations;
    s.prompts_per_iteration = c.prompts_per_iteration;
    s.samples_per_prompt = c.samples_per_prompt;
    s.updates_per_iteration = c.updates_per_iteration;
    s.interrupt_iteration = c.interrupt_iteration;
    s.checkpoint_every = cfg.checkpoint.every_iterations;
    s.lr = c.lr;
    s.warmup_ratio = c.warmup_ratio;
    s.min_lr_ratio = c.min_lr_ratio;
    s.chunks = cfg.parallel.chunks;
    s.clip_epsilon = c.clip_epsilon;
    s.clip = c.clip;
    s.adam = AdamWConfig{cfg.adamw.beta1, cfg.adamw.beta2, cfg.adamw.eps, c.weight_decay};
    s.reward =
        RewardConfig{c.beta, parse_missing_eos(cfg.ppo.missing_eos), cfg.ppo.missing_eos_penalty, KlPenalty::reward_k1};
    s.sampler_seed = cfg.seed(c.sampler_seed);
    s.generation_seed = cfg.seed(c.generation_seed);
    return s;
}

RlRun::RlRun(const Study& s, const FaultHooks& hooks, fs::path rollout_dir)
    : s_(s),
      hooks_(hooks),
      rollout_dir_(std::move(rollout_dir)),
      cfg_(RlSettings::read(s.cfg)),
      policy_(s, s.run.final_dir("sft"), "policy", RoleKind::policy),
      reference_(s, s.run.final_dir("sft"), "reference", RoleKind::policy),
      judge_(s, s.run.final_dir("reward"), "reward", RoleKind::reward),
      prompts_(RolloutPrompts::load(s)),
      schedule_(Schedule{cfg_.iterations * cfg_.updates_per_iteration, cfg_.lr, cfg_.warmup_ratio, cfg_.min_lr_ratio}),
      params_(policy_.role.parameters()),
      opt_(params_, cfg_.adam),
      sampler_(cfg_.sampler_seed, 5) {
    parallel::my_chunks(cfg_.chunks);  // refuses a world size that does not divide the chunks, before any work
    ppolab::check_isolation({isolation_view(policy_.role, false), isolation_view(reference_.role, true),
                             isolation_view(judge_.role, true)});
    identity_ = s.identity();
    identity_["stage"] = cfg_.stage();
    identity_["advantage"] = cfg_.stage();
    identity_["sft_learned_identity"] = policy_.initial_identity;
    identity_["reward_learned_identity"] = judge_.initial_identity;
    identity_["data"] = prompts_.data_identity;
    identity_["schedule"] = schedule_.to_json();
}

void RlRun::iterate() {
    const auto t = Clock::now();
    // 1. rollout: k responses to each of the next prompts, sampled by the current policy, and
    // 2. score: the reference's log-probs, the judge's score (by chunks of slots)
    std::vector<Rollout> rollouts = rollout();
    // 3. each response's reward R_i, and 4. one advantage per response from its group
    const GroupRewards g = advantages(rollouts);
    // 5. the updates: PPO's clipped surrogate on the log-probs now, against old_logp
    const json update_log = update(rollouts);
    ++pos_.iteration;
    for (const Rollout& r : rollouts) pos_.consumed.push_back(r.id);
    // 6. record: metrics, the rollouts with their per-token tables
    record(rollouts, g, update_log);
    add_seconds("iteration", t);
}

std::string RlRun::where() const { return cfg_.stage() + " iteration " + std::to_string(pos_.iteration + 1); }

void RlRun::add_seconds(const char* phase, Clock::time_point t) {
    phase_totals[phase] = phase_totals.value(phase, 0.0) + since(t);
}

std::vector<Rollout> RlRun::rollout() {
    std::vector<int64_t> chosen;
    for (int64_t p = 0; p < cfg_.prompts_per_iteration; ++p)
        chosen.push_back(pos_.order.next(sampler_, prompts_.size()));
    const int64_t slots = cfg_.prompts_per_iteration * cfg_.samples_per_prompt;
    std::vector<Rollout> rollouts = rollouts_by_chunks(cfg_.chunks, slots, pos_.seen, [&](int64_t begin, int64_t end) {
        auto t = Clock::now();
        std::vector<Rollout> chunk =
            sample_rollouts(policy_.model, s_, prompts_, chosen, cfg_.samples_per_prompt, cfg_.generation_seed,
                            kSlotStreamTag, pos_.iteration + 1, begin, end);
        add_seconds("generation", t);
        t = Clock::now();
        score(chunk);
        add_seconds("scoring", t);
        return chunk;
    });
    for (size_t b = 0; b < rollouts.size(); ++b) {
        if (b == 0 && !rollouts[b].old_logp.empty() && hooks_.nonfinite(cfg_.stage(), "logprob", pos_.iteration + 1))
            rollouts[b].old_logp[0] = std::numeric_limits<float>::quiet_NaN();
        check_finite(rollouts[b].old_logp, where() + " rollout " + rollouts[b].id, "sampling log-prob (old_logp)");
    }
    if (hooks_.nonfinite(cfg_.stage(), "score", pos_.iteration + 1))
        rollouts[0].score = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> scores;
    for (const Rollout& r : rollouts) scores.push_back(r.score);
    check_finite(scores, where(), "judge score");
    for (const Rollout& r : rollouts) check_finite(r.ref_logp, where() + " rollout " + r.id, "reference log-prob");
    return rollouts;
}

void RlRun::score(std::vector<Rollout>& chunk) {
    const ScoringBatch batch = rollout_batch(s_, chunk, 0, static_cast<int64_t>(chunk.size()));
    const int64_t B = batch.B;
    std::vector<float> per_pos(static_cast<size_t>(B * batch.T)), scores(static_cast<size_t>(B));
    reference_.scorer.response_logprobs(batch, per_pos.data(), false);
    judge_.scorer.reward_scores(batch, *judge_.role.head, scores.data(), false);
    for (int64_t b = 0; b < B; ++b) {
        Rollout& r = chunk[static_cast<size_t>(b)];
        r.ref_logp = response_slice(batch, per_pos.data(), b);
        r.score = scores[static_cast<size_t>(b)];
    }
}

RlRun::GroupRewards RlRun::advantages(std::vector<Rollout>& rollouts) const {
    const int64_t B = static_cast<int64_t>(rollouts.size()), k = cfg_.samples_per_prompt;
    GroupRewards g;
    for (const Rollout& r : rollouts)
        g.rewards.push_back(sequence_reward(r.old_logp, r.ref_logp, r.score, r.finish == Finish::eos, cfg_.reward));
    for (int64_t p = 0; p < B / k; ++p) {
        const std::vector<double> group(g.rewards.begin() + p * k, g.rewards.begin() + (p + 1) * k);
        const std::vector<double> a = group_advantages(
            group, cfg_.advantage, where() + " prompt " + rollouts[static_cast<size_t>(p * k)].prompt_id);
        g.advantages.insert(g.advantages.end(), a.begin(), a.end());
    }
    for (int64_t b = 0; b < B; ++b) {  // every token of response b gets A_b
        Rollout& r = rollouts[static_cast<size_t>(b)];
        r.advantages.assign(r.old_logp.size(), g.advantages[static_cast<size_t>(b)]);
        if (b == 0 && hooks_.nonfinite(cfg_.stage(), "advantage", pos_.iteration + 1))
            r.advantages[0] = std::numeric_limits<double>::quiet_NaN();
        check_finite(r.advantages, where() + " rollout " + r.id, "advantage");
    }
    return g;
}

ChunkOutput RlRun::policy_chunk(const std::vector<Rollout>& rollouts, int64_t begin, int64_t end,
                                const std::string& where, bool first_update) {
    const double dB = static_cast<double>(rollouts.size());  // the mean over the whole update's rows
    const ScoringBatch batch = rollout_batch(s_, rollouts, begin, end);
    std::vector<float> logp_now(static_cast<size_t>(batch.B * batch.T)), dlogp(logp_now.size(), 0.f);
    policy_.scorer.response_logprobs(batch, logp_now.data(), true);
    check_finite(logp_now, where, "policy log-prob");
    ChunkOutput out;
    for (int64_t b = 0; b < batch.B; ++b) {
        const Rollout& r = rollouts[static_cast<size_t>(begin + b)];
        const std::vector<float> now = response_slice(batch, logp_now.data(), b);
        if (first_update) check_on_policy(now, r, where);
        const ActorLoss al = ppo_actor_loss(now, r.old_logp, r.advantages, cfg_.clip_epsilon);
        scatter_row(batch, b, al.dlogp, dB, dlogp.data());
        out.loss += al.loss / dB;
        out.trace.push_back({{"loss", al.loss / dB}, {"clipfrac", al.clipfrac / dB}, {"approxkl", al.approxkl / dB}});
    }
    policy_.scorer.response_logprobs_backward(batch, dlogp.data());
    return out;
}

json RlRun::update(const std::vector<Rollout>& rollouts) {
    const auto t = Clock::now();
    json log = json::array();
    const int64_t B = static_cast<int64_t>(rollouts.size());
    for (int64_t u = 0; u < cfg_.updates_per_iteration; ++u) {
        const std::string uwhere = where() + " update " + std::to_string(u + 1);
        const double lr = schedule_.at(pos_.updates);
        // PPO's clipped surrogate on the log-probs now, against old_logp; row sums in row order.
        const ChunkOutput out = chunked_gradient(
            params_, cfg_.chunks, B, [&] { policy_.role.zero_grad(); },
            [&](int64_t begin, int64_t end) { return policy_chunk(rollouts, begin, end, uwhere, u == 0); });
        double loss = 0, clipfrac = 0, approxkl = 0;
        for (const json& row : out.trace) {
            loss += row["loss"].get<double>();
            clipfrac += row["clipfrac"].get<double>();
            approxkl += row["approxkl"].get<double>();
        }
        check_finite(loss, uwhere, "policy loss");
        if (hooks_.nonfinite(cfg_.stage(), "gradient", pos_.iteration + 1))
            params_.front().grad[0] = std::numeric_limits<float>::quiet_NaN();
        const double norm = clip_grad_norm(params_, cfg_.clip, uwhere);
        opt_.step(lr);
        ++pos_.updates;
        log.push_back({{"update", pos_.updates},
                       {"lr", lr},
                       {"loss_policy", loss},
                       {"clipfrac", clipfrac},
                       {"approxkl", approxkl},
                       {"grad_norm", norm}});
    }
    add_seconds("optimisation", t);
    return log;
}

void RlRun::record(const std::vector<Rollout>& rollouts, const GroupRewards& g, const json& update_log) {
    const std::vector<double>&R = g.rewards, &A = g.advantages;
    const double dB = static_cast<double>(rollouts.size()), dU = static_cast<double>(cfg_.updates_per_iteration);
    double score = 0, kl = 0, reward = 0, len = 0, abs_adv = 0, clipfrac = 0, approxkl = 0, loss = 0;
    int64_t eos = 0;
    json ids = json::array(), saved = json::array();
    for (size_t b = 0; b < rollouts.size(); ++b) {
        const Rollout& ro = rollouts[b];
        const bool ended = ro.finish == Finish::eos;
        const double response_kl = ppo_response_kl(ro.old_logp, ro.ref_logp);
        score += ppo_terminal_reward(ro.score, ended, cfg_.reward) / dB;
        kl += response_kl / dB;
        reward += R[b] / dB;
        len += static_cast<double>(ro.old_logp.size()) / dB;
        abs_adv += std::fabs(A[b]) / dB;
        eos += ended;
        ids.push_back(ro.id);
        json table = json::array();
        for (size_t i = 0; i < ro.row.response.size(); ++i)
            table.push_back({{"token", ro.row.response[i]},
                             {"text", s_.tokenizer().decode(std::span<const int32_t>(&ro.row.response[i], 1))},
                             {"old_logp", ro.old_logp[i]},
                             {"ref_logp", ro.ref_logp[i]}});
        saved.push_back({{"rollout_id", ro.id},
                         {"prompt_id", ro.prompt_id},
                         {"group", static_cast<int64_t>(b) / cfg_.samples_per_prompt},
                         {"prompt_tokens", ro.row.prompt.size()},
                         {"response_ids", ro.row.response},
                         {"text", s_.tokenizer().decode(ro.row.response, true)},
                         {"finish_reason", finish_name(ro.finish)},
                         {"score", ro.score},
                         {"sampled_logratio_sum", response_kl},
                         {"sequence_reward", R[b]},
                         {"advantage", A[b]},
                         {"tokens", table}});
    }
    for (const json& u : update_log) {
        clipfrac += u["clipfrac"].get<double>() / dU;
        approxkl += u["approxkl"].get<double>() / dU;
        loss += u["loss_policy"].get<double>() / dU;
    }
    pos_.history.push_back({{"iteration", pos_.iteration},
                            {metric::kScores, score},
                            {metric::kKl, kl},
                            {metric::kNonScoreReward, reward - score},
                            {metric::kRlhfReward, reward},
                            {metric::kClipFraction, clipfrac},
                            {metric::kApproxKl, approxkl},
                            {metric::kPolicyLoss, loss},
                            {"rl/mean_abs_advantage", abs_adv},
                            {metric::kNumEosTokens, eos},
                            {metric::kMeanResponseLength, len},
                            {"updates", update_log},
                            {"rollout_ids", ids}});
    if (!parallel::world().writer()) return;  // rank 0 writes; every rank holds the same rollouts
    char name[64];
    std::snprintf(name, sizeof name, "iteration-%03lld.json", static_cast<long long>(pos_.iteration));
    write_json_atomic(rollout_dir_ / name, json{{"iteration", pos_.iteration}, {"rollouts", saved}},
                      Overwrite::replace);
}

ResumeState RlRun::exact_state() {
    ResumeState st;
    st.identity = identity_;
    st.learned["policy"] = capture_params(params_);
    st.learned["reference"] = capture_params(reference_.role.parameters());
    st.learned["reward"] = capture_params(judge_.role.parameters());
    st.optimizers["policy"] = opt_.state();
    st.schedulers["policy"] = SchedulerState{schedule_, pos_.updates};
    st.rngs["sampler"] = sampler_;  // generation draws from slot-keyed streams (rollouts.h): no state
    st.extra = pos_.to_json();
    return st;
}

void RlRun::restore(const ResumeState& st, const fs::path& from_path) {
    const std::string from = from_path.string();
    restore_params(st.learned.at("policy"), params_, from);
    opt_.load_state(st.optimizers.at("policy"), from);
    sampler_ = st.rngs.at("sampler");
    pos_.restore(st.extra, from, cfg_.stage());
    if (st.schedulers.at("policy").next_step != pos_.updates)
        fail(from, ": the scheduler position differs from the update count");
}

void RlRun::check_roles(int64_t done) {
    ppolab::check_isolation({isolation_view(policy_.role, false), isolation_view(reference_.role, true),
                             isolation_view(judge_.role, true)});
    const std::string st = cfg_.stage();
    if (reference_.changed()) fail(st, ": the frozen reference changed");
    if (judge_.changed()) fail(st, ": the frozen judge changed");
    if (base_frozen_identity(s_.base) != s_.base_identity) fail(st, ": the frozen base changed");
    if (done > 0 && !policy_.changed()) fail(st, ": the policy did not learn");
}

json run_rl(const Study& s, StageMode mode) {
    const RlSettings settings = RlSettings::read(s.cfg);
    const std::string stage = settings.stage(), mode_name = stage_mode_name(mode);
    const RunLayout& run = s.run;
    if (!fs::exists(run.final_dir("sft") / "learned.safetensors"))
        fail(stage, ": no SFT policy at ", run.final_dir("sft").string(),
             " (run `ppolab sft --run RUN --mode continuous` first)");
    if (!fs::exists(run.final_dir("reward") / "learned.safetensors"))
        fail(stage, ": no judge at ", run.final_dir("reward").string(),
             " (run `ppolab reward --run RUN --mode continuous` first)");
    const fs::path metrics = run.stage(stage) / (mode_name + ".metrics.jsonl");
    const fs::path rollouts = run.stage(stage) / "rollouts" / mode_name;
    StageLifecycle life(run, stage, mode, {metrics});
    RlRun rl(s, life.hooks(), rollouts);
    const bool restarted =
        life.start(rl.identity(), [&](const ResumeState& st, const fs::path& from) { rl.restore(st, from); });
    const int64_t first_iteration = restarted ? -1 : rl.iteration();  // -1: this mode's start is in a checkpoint
    if (restarted) {
        life.set_restarted({{"file", life.checkpoint().path().string()}, {"iteration", rl.iteration()}});
        const int stale = parallel::world().writer() ? remove_atomic_temporaries(rollouts) : 0;
        std::fprintf(stderr, "%s %s: continuing from checkpoint %s (iteration %lld done%s)\n", stage.c_str(),
                     mode_name.c_str(), life.checkpoint().path().c_str(), static_cast<long long>(rl.iteration()),
                     stale ? ", unfinished rollout writes removed" : "");
    }
    const int64_t stop = mode == StageMode::interrupt ? settings.interrupt_iteration : settings.iterations;
    Progress bar(stage + " " + mode_name, stop - rl.iteration());
    const auto started = Clock::now();
    int64_t done_here = 0;
    while (rl.iteration() < stop) {
        rl.iterate();
        ++done_here;
        if (checkpoint_due(settings.checkpoint_every, rl.iteration()) && rl.iteration() < stop) {
            const std::string at = stage + " iteration " + std::to_string(rl.iteration());
            check_ranks_agree(rl.policy().parameters(), at);
            life.checkpoint().save(rl.exact_state(), at);
        }
        const json& m = rl.history().back();
        bar.update(done_here, "score " + std::to_string(m[metric::kScores].get<double>()) + " kl " +
                                  std::to_string(m[metric::kKl].get<double>()));
    }
    bar.finish();
    const double seconds = since(started);
    rl.check_roles(done_here);
    check_ranks_agree(rl.policy().parameters(), stage + " " + mode_name + " end");

    // metrics.jsonl: this mode's iterations (from the interrupt state's in resume mode).
    const int64_t from = mode == StageMode::resume ? settings.interrupt_iteration : 0;
    std::string text;
    for (int64_t i = std::min(from, rl.iteration()); i < rl.iteration(); ++i)
        text += rl.history()[static_cast<size_t>(i)].dump() + "\n";
    const StateFileInfo info = life.save_state(rl.exact_state());
    if (parallel::world().writer()) write_file_atomic(metrics, text);

    json report{{"stage", stage},
                {"mode", mode_name},
                {"identity", rl.identity()},
                {"iterations", rl.iteration()},
                {"iterations_this_run", done_here},
                {"updates", rl.updates()},
                {"responses", static_cast<int64_t>(rl.consumed().size())},
                {"samples_per_prompt", settings.samples_per_prompt},
                {"final_learned",
                 {{"policy", rl.policy().learned_identity()},
                  {"reference", rl.reference_identity()},
                  {"reward", rl.judge_identity()}}},
                {"frozen_reference_reward_unchanged", true},
                {"history", rl.history()},
                {"seconds_per_phase", rl.phase_totals},
                {"seconds_per_phase_scope",
                 first_iteration < 0 ? "the iterations after the restart" : "every iteration of this mode"}};
    life.add_common_fields(report, seconds, info, {"every_iterations", settings.checkpoint_every});
    if (mode == StageMode::continuous) {
        save_role(run.final_dir(stage) / "actor", rl.policy(), rl.identity(), s);
        report["final_dir"] = run.final_dir(stage).string();
    }
    life.finish(report);
    return report;
}

}  // namespace ppolab
