#include "training/ppo.h"

#include "training/metric_names.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <span>

#include "kernels/numerics.h"
#include "model/generate.h"
#include "parallel/world.h"
#include "training/crash_checkpoints.h"
#include "training/feedback_stage.h"
#include "training/identity.h"
#include "training/study_config.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/progress.h"
#include "util/stopwatch.h"

namespace ppolab {

PpoSettings PpoSettings::read(const StudyConfig& cfg) {
    const PpoConfig& p = cfg.ppo;
    if (p.temperature != 1.0)
        fail("config: ppo.temperature must be 1 (SPEC §4 samples at temperature 1), got ", p.temperature);
    PpoSettings s;
    s.iterations = p.iterations;
    s.prompts_per_iteration = p.prompts_per_iteration;
    s.updates_per_iteration = p.updates_per_iteration;
    s.interrupt_iteration = p.interrupt_iteration;
    s.actor_lr = p.actor_lr;
    s.critic_lr = p.critic_lr;
    s.warmup_ratio = p.warmup_ratio;
    s.min_lr_ratio = p.min_lr_ratio;
    s.adam = AdamWConfig{cfg.adamw.beta1, cfg.adamw.beta2, cfg.adamw.eps, p.weight_decay};
    s.reward =
        RewardConfig{p.beta, parse_missing_eos(p.missing_eos), p.missing_eos_penalty, parse_kl_penalty(p.kl_penalty)};
    s.whiten_advantages = p.whiten_advantages;
    s.value_clipping = p.value_clipping;
    s.cliprange_value = p.cliprange_value;
    s.gamma = p.gamma;
    s.lambda = p.lambda;
    s.clip_epsilon = p.clip_epsilon;
    s.value_loss_coef = p.value_loss_coef;
    s.clip = p.clip;
    s.sampler_seed = cfg.seed(p.sampler_seed);
    s.generation_seed = cfg.seed(p.generation_seed);
    s.checkpoint_every = cfg.checkpoint.every_iterations;
    s.snapshot_every = p.snapshot_every;
    s.chunks = cfg.parallel.chunks;
    return s;
}

json PpoSettings::design_switches() const {
    return {{"whiten_advantages", whiten_advantages},
            {"value_clipping", value_clipping},
            {"cliprange_value", value_clipping ? json(cliprange_value) : json()},
            {"kl_penalty", kl_penalty_name(reward.kl_penalty)},
            {"missing_eos", reward.missing_eos == MissingEos::replace ? "replace" : "add"}};
}

std::string PpoSettings::stage() const {
    std::string name = "ppo";
    if (whiten_advantages) name += "-whiten";
    if (value_clipping) name += "-vclip";
    if (reward.kl_penalty == KlPenalty::loss_k3) name += "-k3";
    return name;
}

namespace {

std::string iteration_where(int64_t iteration) { return "ppo iteration " + std::to_string(iteration); }

Schedule schedule_of(const PpoSettings& c, double lr) {
    return Schedule{c.iterations * c.updates_per_iteration, lr, c.warmup_ratio, c.min_lr_ratio};
}

}  // namespace

PpoRun::PpoRun(const Study& s, const FaultHooks& hooks, fs::path rollout_dir)
    : s_(s),
      hooks_(hooks),
      rollout_dir_(std::move(rollout_dir)),
      cfg_(PpoSettings::read(s.cfg)),
      actor_(s, s.run.final_dir("sft"), "actor", RoleKind::policy),
      reference_(s, s.run.final_dir("sft"), "reference", RoleKind::policy),
      critic_(s, s.run.final_dir("sft"), "critic", RoleKind::critic),
      judge_(s, s.run.final_dir("reward"), "reward", RoleKind::reward),
      actor_schedule_(schedule_of(cfg_, cfg_.actor_lr)),
      critic_schedule_(schedule_of(cfg_, cfg_.critic_lr)),
      actor_params_(actor_.role.parameters()),
      critic_params_(critic_.role.parameters()),
      actor_opt_(actor_params_, cfg_.adam),
      critic_opt_(critic_params_, cfg_.adam),
      sampler_(cfg_.sampler_seed, 3) {
    parallel::my_chunks(cfg_.chunks);  // refuses a world size that does not divide the chunks, before any work
    check_isolation();
    prompts_ = RolloutPrompts::load(s);
    identity_ = s.identity();
    identity_["stage"] = cfg_.stage();
    identity_["sft_learned_identity"] = actor_.initial_identity;
    identity_["reward_learned_identity"] = judge_.initial_identity;
    identity_["critic_initial_identity"] = critic_.initial_identity;
    identity_["data"] = prompts_.data_identity;
    identity_["design_switches"] = cfg_.design_switches();
    identity_["actor_schedule"] = actor_schedule_.to_json();
    identity_["critic_schedule"] = critic_schedule_.to_json();
}

std::vector<Rollout> PpoRun::iterate() {
    const auto t_iter = Clock::now();
    phase_seconds_ = json::object();
    // 1. rollout: the next prompts, sampled by the current actor (old_logp from the sampling forward), and
    // 2. score: reference log-probs, critic values before each token, the judge's score (by chunks of slots)
    std::vector<Rollout> rollouts = rollout();
    // 3. per-token rewards −β(old − ref), the terminal reward on the last token, and
    // 4. advantages and returns (GAE), all detached
    const RolloutStats stats = advantages(rollouts);
    // 5. the updates of actor and critic over the same rollouts (the critic's first backward runs on
    //    step 2's forward: same weights, same batch)
    const UpdateStats updates = update(rollouts);
    ++pos_.iteration;
    for (const Rollout& r : rollouts) pos_.consumed.push_back(r.id);
    // 6. record: metrics, the rollouts' per-token tables, the phase seconds
    record(rollouts, stats, updates);
    phase_seconds_["iteration"] = since(t_iter);
    iteration_seconds.push_back({{"iteration", pos_.iteration}, {"seconds", phase_seconds_}});
    return rollouts;
}

void PpoRun::add_seconds(const char* phase, double seconds) {
    phase_seconds_[phase] = phase_seconds_.value(phase, 0.0) + seconds;
}

std::vector<Rollout> PpoRun::rollout() {
    std::vector<int64_t> chosen;
    for (int64_t k = 0; k < cfg_.prompts_per_iteration; ++k)
        chosen.push_back(pos_.order.next(sampler_, prompts_.size()));
    for (const char* phase : {"generation", "reference", "critic_values", "judge"}) phase_seconds_[phase] = 0.0;
    std::vector<Rollout> rollouts =
        rollouts_by_chunks(cfg_.chunks, cfg_.prompts_per_iteration, pos_.seen, [&](int64_t begin, int64_t end) {
            const auto t = Clock::now();
            std::vector<Rollout> chunk = sample_rollouts(actor_.model, s_, prompts_, chosen, 1, cfg_.generation_seed,
                                                         kSlotStreamTag, pos_.iteration + 1, begin, end);
            add_seconds("generation", since(t));
            score(chunk);
            return chunk;
        });
    check_rollouts(rollouts);
    return rollouts;
}

void PpoRun::score(std::vector<Rollout>& chunk) {
    const ScoringBatch batch = rollout_batch(s_, chunk, 0, static_cast<int64_t>(chunk.size()));
    const int64_t B = batch.B;
    std::vector<float> per_pos(static_cast<size_t>(B * batch.T)), scores(static_cast<size_t>(B));
    auto t = Clock::now();
    reference_.scorer.response_logprobs(batch, per_pos.data(), false);
    for (int64_t b = 0; b < B; ++b) chunk[static_cast<size_t>(b)].ref_logp = response_slice(batch, per_pos.data(), b);
    add_seconds("reference", since(t));
    t = Clock::now();
    const bool whole = cfg_.chunks == 1 && B == cfg_.prompts_per_iteration;  // the first update's very batch
    critic_.scorer.critic_values(batch, *critic_.role.head, per_pos.data(), whole);
    if (whole) fresh_values_ = per_pos;
    else fresh_values_.clear();
    for (int64_t b = 0; b < B; ++b) chunk[static_cast<size_t>(b)].values = response_slice(batch, per_pos.data(), b);
    add_seconds("critic_values", since(t));
    t = Clock::now();
    judge_.scorer.reward_scores(batch, *judge_.role.head, scores.data(), false);
    for (int64_t b = 0; b < B; ++b) chunk[static_cast<size_t>(b)].score = scores[static_cast<size_t>(b)];
    add_seconds("judge", since(t));
}

void PpoRun::check_rollouts(std::vector<Rollout>& rollouts) const {
    const std::string where = iteration_where(pos_.iteration + 1);
    const int64_t it = pos_.iteration + 1;
    for (size_t k = 0; k < rollouts.size(); ++k) {
        Rollout& r = rollouts[k];
        if (k == 0 && !r.old_logp.empty() && hooks_.nonfinite("ppo", "logprob", it))
            r.old_logp[0] = std::numeric_limits<float>::quiet_NaN();
        check_finite(r.old_logp, where + " rollout " + r.id, "sampling log-prob (old_logp)");
    }
    for (const Rollout& r : rollouts) check_finite(r.ref_logp, where + " rollout " + r.id, "reference log-prob");
    for (size_t k = 0; k < rollouts.size(); ++k) {
        Rollout& r = rollouts[k];
        if (k == 0 && !r.values.empty() && hooks_.nonfinite("ppo", "value", it))
            r.values[0] = std::numeric_limits<float>::quiet_NaN();
        check_finite(r.values, where + " rollout " + r.id, "critic value");
    }
    if (hooks_.nonfinite("ppo", "score", it)) rollouts[0].score = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> scores;
    for (const Rollout& r : rollouts) scores.push_back(r.score);
    check_finite(scores, where, "judge score");
}

RolloutStats PpoRun::advantages(std::vector<Rollout>& rollouts) const {
    const std::string where = iteration_where(pos_.iteration + 1);
    RolloutStats st;
    for (size_t b = 0; b < rollouts.size(); ++b) {
        Rollout& r = rollouts[b];
        const bool eos = r.finish == Finish::eos;
        r.rewards = ppo_token_rewards(r.old_logp, r.ref_logp, r.score, eos, cfg_.reward);
        Advantages a = ppo_gae(r.rewards, r.values, cfg_.gamma, cfg_.lambda);
        r.advantages = a.advantages;
        r.returns = a.returns;
        if (b == 0 && !r.advantages.empty() && hooks_.nonfinite("ppo", "advantage", pos_.iteration + 1))
            r.advantages[0] = std::numeric_limits<double>::quiet_NaN();
        check_finite(r.rewards, where + " rollout " + r.id, "per-token reward");
        check_finite(r.advantages, where + " rollout " + r.id, "advantage");
        check_finite(r.returns, where + " rollout " + r.id, "return");
        const double kl = ppo_response_kl(r.old_logp, r.ref_logp);
        st.mean_kl += kl;
        if (cfg_.reward.kl_penalty == KlPenalty::reward_k1) st.mean_non_score += -cfg_.reward.beta * kl;
        st.mean_score += ppo_terminal_reward(r.score, eos, cfg_.reward);
        st.mean_len += static_cast<double>(r.old_logp.size());
        st.num_eos += eos;
        for (size_t i = 0; i < r.returns.size(); ++i) {
            st.all_returns.push_back(r.returns[i]);
            st.all_values.push_back(r.values[i]);
        }
    }
    if (cfg_.whiten_advantages) {  // switch 7: after the returns, which keep the raw advantages
        std::vector<std::vector<double>> all;
        for (Rollout& r : rollouts) all.push_back(std::move(r.advantages));
        ppo_whiten(all);
        for (size_t b = 0; b < rollouts.size(); ++b) rollouts[b].advantages = std::move(all[b]);
    }
    const double dB = static_cast<double>(rollouts.size());
    st.mean_score /= dB;
    st.mean_kl /= dB;
    st.mean_non_score /= dB;
    st.mean_len /= dB;
    return st;
}

ChunkOutput PpoRun::actor_chunk(const std::vector<Rollout>& rollouts, int64_t begin, int64_t end, int64_t u,
                                const std::string& where) {
    const double dB = static_cast<double>(rollouts.size());  // the mean over the whole update's rows
    const ScoringBatch batch = rollout_batch(s_, rollouts, begin, end);
    std::vector<float> logp_now(static_cast<size_t>(batch.B * batch.T)), dlogp(logp_now.size(), 0.f);
    actor_.scorer.response_logprobs(batch, logp_now.data(), true);
    check_finite(logp_now, where, "actor log-prob");
    ChunkOutput out;
    for (int64_t b = 0; b < batch.B; ++b) {
        const Rollout& r = rollouts[static_cast<size_t>(begin + b)];
        const std::vector<float> now = response_slice(batch, logp_now.data(), b);
        const double max_diff = u == 0 ? check_on_policy(now, r, where) : 0.0;
        ActorLoss al = ppo_actor_loss(now, r.old_logp, r.advantages, cfg_.clip_epsilon);
        double kl_loss = 0;
        if (cfg_.reward.kl_penalty == KlPenalty::loss_k3) {  // switch 9
            const KlLoss kl = ppo_k3_loss(now, r.ref_logp, cfg_.reward.beta);
            kl_loss = kl.loss / dB;
            for (size_t i = 0; i < al.dlogp.size(); ++i) al.dlogp[i] += kl.dlogp[i];
        }
        scatter_row(batch, b, al.dlogp, dB, dlogp.data());
        json row = {{"loss", al.loss / dB},
                    {"kl_loss", kl_loss},
                    {"clipfrac", al.clipfrac / dB},
                    {"approxkl", al.approxkl / dB},
                    {"max_rescore_diff", max_diff}};
        if (u == 0 && begin + b == 0 && pos_.iteration == 0 && rescore_probe.is_null())
            row["teacher_forced_logp"] = now;  // the re-score probe's row
        out.loss += al.loss / dB;
        out.trace.push_back(std::move(row));
    }
    actor_.scorer.response_logprobs_backward(batch, dlogp.data());
    return out;
}

ChunkOutput PpoRun::critic_chunk(const std::vector<Rollout>& rollouts, int64_t begin, int64_t end, int64_t u,
                                 const std::string& where) {
    const double dB = static_cast<double>(rollouts.size());
    const ScoringBatch batch = rollout_batch(s_, rollouts, begin, end);
    std::vector<float> v_now(static_cast<size_t>(batch.B * batch.T)), dv(v_now.size(), 0.f);
    const bool fresh = u == 0 && !fresh_values_.empty() && begin == 0 && end == static_cast<int64_t>(rollouts.size());
    if (fresh) {  // step 2's forward, activations kept (fresh_values_)
        PPOLAB_ASSERT(fresh_values_.size() == v_now.size());
        v_now.swap(fresh_values_);
    } else {
        critic_.scorer.critic_values(batch, *critic_.role.head, v_now.data(), true);
    }
    fresh_values_.clear();
    check_finite(v_now, where, "critic value");
    ChunkOutput out;
    for (int64_t b = 0; b < batch.B; ++b) {
        const Rollout& r = rollouts[static_cast<size_t>(begin + b)];
        const std::vector<float> v = response_slice(batch, v_now.data(), b);
        double loss = 0, clipfrac = 0;
        if (cfg_.value_clipping) {  // switch 8
            const ClippedCriticLoss cl =
                ppo_clipped_critic_loss(v, r.values, r.returns, cfg_.value_loss_coef, cfg_.cliprange_value);
            loss = cl.loss / dB;
            clipfrac = cl.clipfrac / dB;
            scatter_row(batch, b, cl.dvalues, dB, dv.data());
        } else {
            const CriticLoss cl = ppo_critic_loss(v, r.returns, cfg_.value_loss_coef);
            loss = cl.loss / dB;
            scatter_row(batch, b, cl.dvalues, dB, dv.data());
        }
        out.loss += loss;
        out.trace.push_back({{"loss", loss}, {"clipfrac", clipfrac}});
    }
    critic_.scorer.critic_values_backward(batch, *critic_.role.head, dv.data());
    return out;
}

UpdateStats PpoRun::update(const std::vector<Rollout>& rollouts) {
    const int64_t B = static_cast<int64_t>(rollouts.size());
    double t_actor = 0, t_critic = 0;
    UpdateStats st;
    for (int64_t u = 0; u < cfg_.updates_per_iteration; ++u) {
        const double lr_actor = actor_schedule_.at(pos_.updates), lr_critic = critic_schedule_.at(pos_.updates);
        const std::string uwhere = iteration_where(pos_.iteration + 1) + " update " + std::to_string(u + 1);
        // The actor: clipped surrogate on the log-probs now, against old_logp. Row sums in row order.
        auto t = Clock::now();
        const ChunkOutput actor = chunked_gradient(
            actor_params_, cfg_.chunks, B, [&] { actor_.role.zero_grad(); },
            [&](int64_t begin, int64_t end) { return actor_chunk(rollouts, begin, end, u, uwhere); });
        double policy_loss = 0, kl_loss = 0, clipfrac = 0, approxkl = 0, max_rescore_diff = 0;
        for (const json& row : actor.trace) {
            policy_loss += row["loss"].get<double>();
            kl_loss += row["kl_loss"].get<double>();
            clipfrac += row["clipfrac"].get<double>();
            approxkl += row["approxkl"].get<double>();
            max_rescore_diff = std::max(max_rescore_diff, row["max_rescore_diff"].get<double>());
        }
        if (u == 0 && pos_.iteration == 0 && rescore_probe.is_null())
            rescore_probe = {{"rollout_id", rollouts[0].id},
                             {"sampling_logp", rollouts[0].old_logp},
                             {"teacher_forced_logp", actor.trace[0]["teacher_forced_logp"]}};
        check_finite(policy_loss, uwhere, "policy loss");
        check_finite(kl_loss, uwhere, "k3 KL loss");
        if (hooks_.nonfinite("ppo", "gradient", pos_.iteration + 1))
            actor_params_.front().grad[0] = std::numeric_limits<float>::quiet_NaN();
        const double actor_norm = clip_grad_norm(actor_params_, cfg_.clip, uwhere + " actor");
        actor_opt_.step(lr_actor);
        t_actor += since(t);

        // The critic: ½(V − R)² on the values now, against the returns.
        t = Clock::now();
        const ChunkOutput critic = chunked_gradient(
            critic_params_, cfg_.chunks, B, [&] { critic_.role.zero_grad(); },
            [&](int64_t begin, int64_t end) { return critic_chunk(rollouts, begin, end, u, uwhere); });
        double value_loss = 0, value_clipfrac = 0;
        for (const json& row : critic.trace) {
            value_loss += row["loss"].get<double>();
            value_clipfrac += row["clipfrac"].get<double>();
        }
        check_finite(value_loss, uwhere, "value loss");
        const double critic_norm = clip_grad_norm(critic_params_, cfg_.clip, uwhere + " critic");
        critic_opt_.step(lr_critic);
        t_critic += since(t);
        ++pos_.updates;
        st.clipfrac += clipfrac;
        st.approxkl += approxkl;
        st.policy_loss += policy_loss;
        st.value_loss += value_loss;
        json ul = {{"update", pos_.updates},     {"lr_actor", lr_actor},          {"lr_critic", lr_critic},
                   {"loss_policy", policy_loss}, {"loss_value", value_loss},      {"clipfrac", clipfrac},
                   {"approxkl", approxkl},       {"grad_norm_actor", actor_norm}, {"grad_norm_critic", critic_norm}};
        if (u == 0) ul["sampling_vs_rescore_max_abs_diff"] = max_rescore_diff;
        if (cfg_.reward.kl_penalty == KlPenalty::loss_k3) ul["loss_kl_k3"] = kl_loss;
        if (cfg_.value_clipping) ul["value_clipfrac"] = value_clipfrac;
        st.log.push_back(ul);
    }
    phase_seconds_["actor_optimisation"] = t_actor;
    phase_seconds_["critic_optimisation"] = t_critic;
    return st;
}

void PpoRun::record(const std::vector<Rollout>& rollouts, const RolloutStats& r, const UpdateStats& u) {
    const double dU = static_cast<double>(cfg_.updates_per_iteration);
    json ids = json::array();
    for (const Rollout& ro : rollouts) ids.push_back(ro.id);
    pos_.history.push_back({{"iteration", pos_.iteration},
                            {metric::kScores, r.mean_score},
                            {metric::kKl, r.mean_kl},
                            {metric::kNonScoreReward, r.mean_non_score},
                            {metric::kRlhfReward, r.mean_score + r.mean_non_score},
                            {metric::kClipFraction, u.clipfrac / dU},
                            {metric::kApproxKl, u.approxkl / dU},
                            {metric::kPolicyLoss, u.policy_loss / dU},
                            {metric::kValueLoss, u.value_loss / dU},
                            {metric::kExplainedVariance, explained_variance(r.all_returns, r.all_values)},
                            {metric::kNumEosTokens, r.num_eos},
                            {metric::kMeanResponseLength, r.mean_len},
                            {"updates", u.log},
                            {"rollout_ids", ids}});
    json saved = json::array();
    for (const Rollout& ro : rollouts) {
        json table = json::array();
        for (size_t i = 0; i < ro.row.response.size(); ++i)
            table.push_back({{"token", ro.row.response[i]},
                             {"text", s_.tokenizer().decode(std::span<const int32_t>(&ro.row.response[i], 1))},
                             {"old_logp", ro.old_logp[i]},
                             {"ref_logp", ro.ref_logp[i]},
                             {"reward", ro.rewards[i]},
                             {"value", ro.values[i]},
                             {"advantage", ro.advantages[i]},
                             {"return", ro.returns[i]}});
        saved.push_back({{"rollout_id", ro.id},
                         {"prompt_id", ro.prompt_id},
                         {"prompt_tokens", ro.row.prompt.size()},
                         {"response_ids", ro.row.response},
                         {"text", s_.tokenizer().decode(ro.row.response, true)},
                         {"finish_reason", finish_name(ro.finish)},
                         {"score", ro.score},
                         {"sampled_logratio_sum", ppo_response_kl(ro.old_logp, ro.ref_logp)},
                         {"tokens", table}});
    }
    if (!parallel::world().writer()) return;  // rank 0 writes; every rank holds the same rollouts
    char name[64];
    std::snprintf(name, sizeof name, "iteration-%03lld.json", static_cast<long long>(pos_.iteration));
    write_json_atomic(rollout_dir_ / name, json{{"iteration", pos_.iteration}, {"rollouts", saved}},
                      Overwrite::replace);
}

ResumeState PpoRun::exact_state() {
    ResumeState st;
    st.identity = identity_;
    st.learned["actor"] = capture_params(actor_params_);
    st.learned["critic"] = capture_params(critic_params_);
    st.learned["reference"] = capture_params(reference_.role.parameters());
    st.learned["reward"] = capture_params(judge_.role.parameters());
    st.optimizers["actor"] = actor_opt_.state();
    st.optimizers["critic"] = critic_opt_.state();
    st.schedulers["actor"] = SchedulerState{actor_schedule_, pos_.updates};
    st.schedulers["critic"] = SchedulerState{critic_schedule_, pos_.updates};
    st.rngs["sampler"] = sampler_;  // generation draws from slot-keyed streams (rollouts.h): no state
    st.extra = pos_.to_json();
    return st;
}

void PpoRun::restore(const ResumeState& st, const fs::path& from_path) {
    const std::string from = from_path.string();
    restore_params(st.learned.at("actor"), actor_params_, from);
    restore_params(st.learned.at("critic"), critic_params_, from);
    actor_opt_.load_state(st.optimizers.at("actor"), from);
    critic_opt_.load_state(st.optimizers.at("critic"), from);
    sampler_ = st.rngs.at("sampler");
    pos_.restore(st.extra, from, "PPO");
    if (st.schedulers.at("actor").next_step != pos_.updates || st.schedulers.at("critic").next_step != pos_.updates)
        fail(from, ": scheduler positions differ from the update count");
}

void PpoRun::check_isolation() {
    ppolab::check_isolation({isolation_view(actor_.role, false), isolation_view(critic_.role, false),
                             isolation_view(reference_.role, true), isolation_view(judge_.role, true)});
}

void PpoRun::check_roles(int64_t done) {
    check_isolation();
    if (reference_.changed()) fail("ppo: the frozen reference changed");
    if (judge_.changed()) fail("ppo: the frozen judge changed");
    if (base_frozen_identity(s_.base) != s_.base_identity) fail("ppo: the frozen base changed");
    if (done > 0 && !actor_.changed()) fail("ppo: the actor did not learn");
    if (done > 0 && !critic_.changed()) fail("ppo: the critic did not learn");
}

namespace {

// The durations and the re-score probe of the iterations before the newest
// checkpoint, in a file beside it (never in the exact state).
struct PpoCheckpointExtras {
    fs::path path;
    int64_t first_iteration = 0;  // this mode's first iteration

    void save(const PpoRun& ppo) const {
        if (!parallel::world().writer()) return;
        write_json_atomic(path,
                          json{{"first_iteration", first_iteration},
                               {"iteration_seconds", ppo.iteration_seconds},
                               {"sampling_vs_teacher_forced_probe", ppo.rescore_probe},
                               {"note",
                                "durations and the re-score probe of the iterations before the checkpoint "
                                "(never part of the exact state)"}},
                          Overwrite::replace);
    }
    // After the stage continued from a checkpoint at `iteration`.
    void load(PpoRun& ppo, const RunLayout& run, StageMode mode) {
        if (fs::exists(path)) {
            const json extras = read_json_file(path);
            first_iteration = json_int(extras, "first_iteration", path.string());
            ppo.rescore_probe = json_field(extras, "sampling_vs_teacher_forced_probe", path.string());
            for (const json& t : json_field(extras, "iteration_seconds", path.string()))
                if (json_int(t, "iteration", path.string()) <= ppo.iteration()) ppo.iteration_seconds.push_back(t);
            return;
        }
        // Lost (or never written): the durations before the checkpoint are unknown (null).
        const fs::path interrupt = run.state(ppo.settings().stage(), "interrupt");
        first_iteration = mode == StageMode::resume
                              ? json_int(load_resume_state(interrupt).extra, "iteration", interrupt.string())
                              : 0;
    }
};

// metrics.jsonl: this mode's iterations, each its history entry plus its
// seconds (null for an iteration whose durations were lost with a
// checkpoint's extras). Adds each phase's seconds to `totals`.
std::string metrics_lines(const PpoRun& ppo, int64_t first_iteration, json& totals) {
    std::map<int64_t, json> seconds_of;
    for (const json& t : ppo.iteration_seconds) seconds_of[t["iteration"].get<int64_t>()] = t["seconds"];
    totals = {{"generation", 0.0},         {"reference", 0.0},           {"judge", 0.0},    {"critic_values", 0.0},
              {"actor_optimisation", 0.0}, {"critic_optimisation", 0.0}, {"iteration", 0.0}};
    std::string text;
    for (int64_t i = first_iteration + 1; i <= ppo.iteration(); ++i) {
        json line = ppo.history()[static_cast<size_t>(i - 1)];
        auto it = seconds_of.find(i);
        line["seconds"] = it == seconds_of.end() ? json() : it->second;
        if (it != seconds_of.end())
            for (auto& [k, v] : it->second.items()) totals[k] = totals[k].get<double>() + v.get<double>();
        text += line.dump() + "\n";
    }
    return text;
}

// Byte-identical files under two folders (the same relative names).
bool same_tree(const fs::path& a, const fs::path& b) {
    std::map<std::string, std::string> fa, fb;
    for (const auto& [dir, files] : {std::pair{a, &fa}, std::pair{b, &fb}})
        for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir))
            if (e.is_regular_file()) (*files)[e.path().lexically_relative(dir).generic_string()] = read_file(e.path());
    return fa == fb;
}

// The continuous run's actor every ppo.snapshot_every iterations (ppo.h).
struct PpoSnapshots {
    const Study& s;
    std::string stage;            // the stage's folder (PpoSettings::stage())
    int64_t every = 0, last = 0;  // 0: none; the last iteration is final/actor

    // The report's record of them (what `ppolab overoptimisation` reads).
    json to_json() const {
        json at = json::array();
        for (int64_t i = every; every > 0 && i < last; i += every) at.push_back(i);
        return {{"every_iterations", every}, {"iterations", at}, {"dir", stage + "/snapshots"}};
    }
    void prepare(bool restarted) const {
        if (!parallel::world().writer()) return;
        const fs::path dir = s.run.snapshots(stage);
        if (!restarted) {
            fs::remove_all(dir);
            return;
        }
        if (!fs::exists(dir)) return;
        for (const fs::directory_entry& e : fs::directory_iterator(dir))
            if (e.path().filename().string().starts_with(".")) fs::remove_all(e.path());
    }
    // After iteration `i` (the actor as it is then).
    void save(PpoRun& ppo) const {
        const int64_t i = ppo.iteration();
        if (every <= 0 || i % every != 0 || i >= last || !parallel::world().writer()) return;
        const fs::path dir = s.run.snapshot_dir(i, stage);
        fs::create_directories(dir.parent_path());
        if (!fs::exists(dir)) return save_role(dir, ppo.actor(), ppo.identity(), s);
        // Reached again after a restart: the same actor must give the same files.
        const fs::path fresh = dir.parent_path() / ("." + dir.filename().string() + ".verify");
        fs::remove_all(fresh);
        save_role(fresh, ppo.actor(), ppo.identity(), s);
        const bool same = same_tree(dir, fresh);
        fs::remove_all(fresh);
        if (!same)
            fail("ppo snapshot ", dir.string(), " exists and differs from the actor at iteration ", i,
                 " of this run (remove RUN/ppo/snapshots and rerun PPO)");
    }
};

}  // namespace

json run_ppo(const Study& s, StageMode mode) {
    const std::string mode_name = stage_mode_name(mode);
    const RunLayout& run = s.run;
    // Rollout files are per iteration and rewritten, so kept.
    const std::string stage = PpoSettings::read(s.cfg).stage();  // "ppo", or with switches "ppo-whiten", …
    StageLifecycle life(run, stage, mode, {run.ppo_metrics(mode_name, stage)});
    PpoRun ppo(s, life.hooks(), run.ppo_rollouts(mode_name, stage));
    PpoCheckpointExtras extras{life.checkpoint().path().parent_path() / (mode_name + ".report-extras.json")};
    const bool restarted =
        life.start(ppo.identity(), [&](const ResumeState& st, const fs::path& from) { ppo.restore(st, from); });
    if (restarted) {
        life.set_restarted({{"file", life.checkpoint().path().string()}, {"iteration", ppo.iteration()}});
        extras.load(ppo, run, mode);
        const int stale =
            parallel::world().writer() ? remove_atomic_temporaries(run.ppo_rollouts(mode_name, stage)) : 0;
        std::fprintf(stderr, "ppo %s: continuing from checkpoint %s (iteration %lld done%s)\n", mode_name.c_str(),
                     life.checkpoint().path().c_str(), static_cast<long long>(ppo.iteration()),
                     stale ? ", unfinished rollout writes removed" : "");
    } else {
        extras.first_iteration = ppo.iteration();  // 0, or the interrupt state's
    }
    const PpoSettings& cfg = ppo.settings();
    const int64_t stop = mode == StageMode::interrupt ? cfg.interrupt_iteration : cfg.iterations;
    const PpoSnapshots snapshots{s, stage, mode == StageMode::continuous ? cfg.snapshot_every : 0, cfg.iterations};
    if (mode == StageMode::continuous) snapshots.prepare(restarted);

    Progress bar("ppo " + mode_name, stop - ppo.iteration());
    const auto started = Clock::now();
    int64_t done_here = 0;
    while (ppo.iteration() < stop) {
        ppo.iterate();
        ++done_here;
        snapshots.save(ppo);
        if (checkpoint_due(cfg.checkpoint_every, ppo.iteration()) && ppo.iteration() < stop) {
            const std::string at = "ppo iteration " + std::to_string(ppo.iteration());
            check_ranks_agree(ppo.actor().parameters(), at + " (actor)");
            check_ranks_agree(ppo.critic().parameters(), at + " (critic)");
            extras.save(ppo);
            life.checkpoint().save(ppo.exact_state(), "ppo iteration " + std::to_string(ppo.iteration()));
        }
        const json& m = ppo.history().back();
        bar.update(done_here, "score " + std::to_string(m[metric::kScores].get<double>()) + " kl " +
                                  std::to_string(m[metric::kKl].get<double>()));
    }
    bar.finish();
    const double seconds = since(started);

    // The frozen must be unchanged, the learners must have learned.
    ppo.check_roles(done_here);
    check_ranks_agree(ppo.actor().parameters(), "ppo " + mode_name + " end (actor)");
    check_ranks_agree(ppo.critic().parameters(), "ppo " + mode_name + " end (critic)");
    json phase_totals;
    const std::string metrics_text = metrics_lines(ppo, extras.first_iteration, phase_totals);
    const StateFileInfo info = life.save_state(ppo.exact_state());
    if (parallel::world().writer()) write_file_atomic(run.ppo_metrics(mode_name, stage), metrics_text);

    json report{{"stage", stage},
                {"mode", mode_name},
                {"identity", ppo.identity()},
                {"iterations", ppo.iteration()},
                {"iterations_this_run", done_here},
                {"updates_per_optimizer", ppo.updates()},
                {"responses", static_cast<int64_t>(ppo.consumed().size())},
                {"final_learned",
                 {{"actor", ppo.actor().learned_identity()},
                  {"critic", ppo.critic().learned_identity()},
                  {"reference", ppo.reference_identity()},
                  {"reward", ppo.judge_identity()}}},
                {"frozen_reference_reward_unchanged", true},
                {"history", ppo.history()},
                {"sampling_vs_teacher_forced_probe", ppo.rescore_probe},
                {"numerical_scope",
                 numerics_canonical()
                     ? "old_logp comes from the sampling forward (KV cache, one token at a time); under "
                       "engine.numerics = canonical the teacher-forced re-score of the same tokens is the same bits "
                       "(checked for every token before each iteration's first update: the stage fails otherwise), "
                       "so every iteration's first ratio is exactly 1."
                     : "old_logp comes from the sampling forward (KV cache, one token at a time); under "
                       "engine.numerics = fast the teacher-forced re-score of the same tokens may differ in the "
                       "last bits. The difference before the first update is recorded, never substituted."},
                {"seconds_per_phase", phase_totals}};
    life.add_common_fields(report, seconds, info, {"every_iterations", cfg.checkpoint_every});
    if (mode == StageMode::continuous) {
        save_role(run.final_dir(stage) / "actor", ppo.actor(), ppo.identity(), s);
        save_role(run.final_dir(stage) / "critic", ppo.critic(), ppo.identity(), s);
        report["final_dir"] = run.final_dir(stage).string();
        report["snapshots"] = snapshots.to_json();
    }
    life.finish(report, {extras.path});
    return report;
}

}  // namespace ppolab
