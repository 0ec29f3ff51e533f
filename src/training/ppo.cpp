#include "training/ppo.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <span>

#include "data/corpus.h"
#include "model/generate.h"
#include "model/scoring.h"
#include "training/adamw.h"
#include "training/checkpoints.h"
#include "training/feedback_stage.h"
#include "training/identity.h"
#include "training/ppo_math.h"
#include "training/roles.h"
#include "training/schedule.h"
#include "training/state.h"
#include "training/study_config.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/sha256.h"

namespace ppolab {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One sampled response and every number PPO derives from it.
struct Rollout {
    std::string id;          // iteration-NNN-slot-K, unique, consumed once
    std::string prompt_id;   // the rollout prompt it answers
    ScoringRow row;          // prompt ids, response ids (EOS last when it ended the row)
    std::string finish;      // "eos" | "length"
    std::vector<float> old_logp, ref_logp, values;  // (n) detached, from the sampling/old policies
    double score = 0;        // the judge's predicted simulated-preference score
    std::vector<double> rewards, advantages, returns;
};

// The frozen roles never get gradient buffers in the isolation check.
RoleView view_of(Role& r, bool frozen) {
    ParamList p = r.parameters();
    if (frozen)
        for (ParamRef& q : p) q.grad = nullptr;
    return RoleView{r.name, p, frozen};
}

std::vector<float> response_slice(const ScoringBatch& b, const float* per_position, int64_t row) {
    std::vector<float> out;
    for (int64_t t = 0; t < b.T; ++t)
        if (b.response_mask[row * b.T + t]) out.push_back(per_position[row * b.T + t]);
    return out;
}

}  // namespace

json run_ppo(const Study& s, StageMode mode) {
    const json& c = s.config;
    const std::string mode_name = stage_mode_name(mode);
    const RunLayout& run = s.run;
    const fs::path state_path = run.state("ppo", mode_name), report_path = run.report("ppo", mode_name);
    const fs::path metrics_path = run.stage("ppo") / (mode_name + ".metrics.jsonl");
    const fs::path rollout_dir = run.stage("ppo") / "rollouts" / mode_name;
    const fs::path checkpoint = checkpoint_path(run.stage("ppo"), mode_name);
    // Durations of the iterations before the newest checkpoint (never in the state).
    const fs::path checkpoint_extras = checkpoint.parent_path() / (mode_name + ".report-extras.json");
    // The report is written last: without it, what an earlier attempt wrote is
    // unfinished. Rollout files are per iteration and rewritten, so kept.
    if (fs::exists(report_path)) fail("refusing to overwrite ", report_path.string(), " (a finished stage output)");
    std::vector<fs::path> unfinished = {state_path, metrics_path};
    if (mode == StageMode::continuous) unfinished.push_back(run.final_dir("ppo"));
    remove_unfinished_outputs(unfinished, report_path, "ppo " + mode_name);

    // Four roles (SPEC §2): actor and critic from SFT, reference an independent
    // frozen SFT copy, the judge frozen. The BF16 base is shared read-only.
    Role actor = load_role(run.final_dir("sft"), "actor", RoleKind::policy, s);
    Role reference = load_role(run.final_dir("sft"), "reference", RoleKind::policy, s);
    Role critic = load_role(run.final_dir("sft"), "critic", RoleKind::critic, s);
    Role judge = load_role(run.final_dir("reward"), "reward", RoleKind::reward, s);
    auto isolation = [&] {
        check_isolation({view_of(actor, false), view_of(critic, false), view_of(reference, true), view_of(judge, true)});
    };
    isolation();
    const std::string reference_identity = reference.learned_identity(), judge_identity = judge.learned_identity();

    Qwen2 actor_model(s.base, &actor.lora), reference_model(s.base, &reference.lora);
    Qwen2 critic_model(s.base, &critic.lora), judge_model(s.base, &judge.lora);
    Scorer actor_scorer(actor_model), reference_scorer(reference_model), critic_scorer(critic_model),
        judge_scorer(judge_model);

    // Prompts: learn/ only — or, for a judge that learned from votes, the
    // prompts of its train-split labels (SPEC §8).
    const std::optional<FeedbackPrompts> from_votes = feedback_rollout_prompts(s);
    const std::vector<PromptRow> prompts =
        from_votes ? from_votes->prompts : load_rollout_prompts(s.reader(), run.corpus());
    std::vector<std::vector<int32_t>> prompt_ids;
    for (const PromptRow& p : prompts) {
        prompt_ids.push_back(s.encode_prompt(p.prompt));
        if (static_cast<int64_t>(prompt_ids.back().size()) > s.limits.max_prompt)
            fail("rollout prompt ", p.id, ": ", prompt_ids.back().size(), " tokens, over limits.max_prompt ",
                 s.limits.max_prompt, " (refused, never truncated)");
    }

    const int64_t iterations = config_int(c, "ppo.iterations");
    const int64_t per_iteration = config_int(c, "ppo.prompts_per_iteration");
    const int64_t updates_per_iteration = config_int(c, "ppo.updates_per_iteration");
    const int64_t total_updates = iterations * updates_per_iteration;
    auto schedule_of = [&](const std::string& lr_key) {
        return Schedule{total_updates, config_number(c, "ppo." + lr_key), config_number(c, "ppo.warmup_ratio"),
                        config_number(c, "ppo.min_lr_ratio")};
    };
    const Schedule actor_schedule = schedule_of("actor_lr"), critic_schedule = schedule_of("critic_lr");
    AdamWConfig adam{config_number(c, "adamw.beta1"), config_number(c, "adamw.beta2"), config_number(c, "adamw.eps"),
                     config_number(c, "ppo.weight_decay")};
    ParamList actor_params = actor.parameters(), critic_params = critic.parameters();
    AdamW actor_opt(actor_params, adam), critic_opt(critic_params, adam);
    RewardConfig reward_config{config_number(c, "ppo.beta"), parse_missing_eos(config_string(c, "ppo.missing_eos")),
                               config_number(c, "ppo.missing_eos_penalty")};
    const double gamma = config_number(c, "ppo.gamma"), lambda = config_number(c, "ppo.lambda");
    const double clip_eps = config_number(c, "ppo.clip_epsilon"), value_coef = config_number(c, "ppo.value_loss_coef");
    const double clip_norm = config_number(c, "ppo.clip");
    if (config_number(c, "ppo.temperature") != 1.0)
        fail("config: ppo.temperature must be 1 (SPEC §4 samples at temperature 1), got ",
             config_number(c, "ppo.temperature"));
    GenerationOptions gen;
    gen.max_new_tokens = s.limits.max_response;
    gen.eos_id = s.eos_id;
    gen.pad_id = s.pad_id;
    gen.greedy = false;

    Philox sampler(static_cast<uint64_t>(config_int(c, "ppo.sampler_seed")), 3);
    Philox generation(static_cast<uint64_t>(config_int(c, "ppo.generation_seed")), 4);

    json identity = s.identity();
    identity["stage"] = "ppo";
    identity["sft_learned_identity"] = actor.learned_identity();
    identity["reward_learned_identity"] = judge_identity;
    identity["critic_initial_identity"] = critic.learned_identity();
    identity["data"] = from_votes ? from_votes->data_identity
                                  : json{{"learn/rollout_prompts.jsonl",
                                          load_manifest(s.reader(), run.corpus()).files.at("learn/rollout_prompts.jsonl").sha256}};
    identity["actor_schedule"] = actor_schedule.to_json();
    identity["critic_schedule"] = critic_schedule.to_json();

    std::vector<int64_t> order;
    int64_t cursor = 0, iteration = 0, updates = 0;
    json history = json::array(), consumed = json::array();
    auto restore = [&](const ResumeState& st, const fs::path& from) {
        restore_params(st.learned.at("actor"), actor_params, from.string());
        restore_params(st.learned.at("critic"), critic_params, from.string());
        actor_opt.load_state(st.optimizers.at("actor"), from.string());
        critic_opt.load_state(st.optimizers.at("critic"), from.string());
        sampler = st.rngs.at("sampler");
        generation = st.rngs.at("generation");
        order = json_field(st.extra, "order", from.string()).get<std::vector<int64_t>>();
        cursor = json_int(st.extra, "cursor", from.string());
        iteration = json_int(st.extra, "iteration", from.string());
        updates = json_int(st.extra, "updates", from.string());
        history = json_field(st.extra, "history", from.string());
        consumed = json_field(st.extra, "consumed_rollout_ids", from.string());
        if (!json_field(st.extra, "pending_rollouts", from.string()).empty())
            fail(from.string(), ": a PPO checkpoint must hold no pending rollout");
        if (st.schedulers.at("actor").next_step != updates || st.schedulers.at("critic").next_step != updates)
            fail(from.string(), ": scheduler positions differ from the update count");
    };
    // The state at an iteration boundary (SPEC §6): the same at the end and in checkpoints.
    auto exact_state = [&] {
        ResumeState st;
        st.identity = identity;
        st.learned["actor"] = capture_params(actor_params);
        st.learned["critic"] = capture_params(critic_params);
        st.learned["reference"] = capture_params(reference.parameters());
        st.learned["reward"] = capture_params(judge.parameters());
        st.optimizers["actor"] = actor_opt.state();
        st.optimizers["critic"] = critic_opt.state();
        st.schedulers["actor"] = SchedulerState{actor_schedule, updates};
        st.schedulers["critic"] = SchedulerState{critic_schedule, updates};
        st.rngs["sampler"] = sampler;
        st.rngs["generation"] = generation;
        st.extra = {{"order", order},         {"cursor", cursor},   {"iteration", iteration},
                    {"updates", updates},     {"history", history}, {"consumed_rollout_ids", consumed},
                    {"pending_rollouts", json::array()}};
        return st;
    };
    // Beside the exact state: this mode's first iteration, per-iteration
    // seconds (metrics.jsonl) and the re-score probe of the report.
    int64_t first_iteration = 0;
    json iteration_seconds = json::array();  // {"iteration", "seconds": {phase: s}} of this mode's iterations
    json rescore_probe = json();  // per-token sampling vs teacher-forced log-probs before the first update
    json restarted = nullptr;
    if (std::optional<ResumeState> st = load_checkpoint(checkpoint, identity, "ppo " + mode_name)) {
        restore(*st, checkpoint);
        restarted = {{"file", checkpoint.string()}, {"iteration", iteration}};
        if (fs::exists(checkpoint_extras)) {
            const json extras = read_json_file(checkpoint_extras);
            first_iteration = json_int(extras, "first_iteration", checkpoint_extras.string());
            rescore_probe = json_field(extras, "sampling_vs_teacher_forced_probe", checkpoint_extras.string());
            for (const json& t : json_field(extras, "iteration_seconds", checkpoint_extras.string()))
                if (json_int(t, "iteration", checkpoint_extras.string()) <= iteration) iteration_seconds.push_back(t);
        } else {
            // Lost (or never written): the durations before the checkpoint are unknown (null).
            first_iteration = mode == StageMode::resume
                                  ? json_int(load_resume_state(run.state("ppo", "interrupt")).extra, "iteration",
                                             run.state("ppo", "interrupt").string())
                                  : 0;
        }
        const int stale = remove_atomic_temporaries(rollout_dir);
        std::fprintf(stderr, "ppo %s: continuing from checkpoint %s (iteration %lld done%s)\n", mode_name.c_str(),
                     checkpoint.c_str(), static_cast<long long>(iteration),
                     stale ? ", unfinished rollout writes removed" : "");
    } else if (mode == StageMode::resume) {
        const fs::path from = run.state("ppo", "interrupt");
        restore(load_resume_state(from, &identity), from);
        first_iteration = iteration;
    }
    const int64_t stop = mode == StageMode::interrupt ? config_int(c, "ppo.interrupt_iteration") : iterations;
    const int64_t every = config_int(c, "checkpoint.every_iterations");
    int64_t checkpoints_written = 0;
    double checkpoint_seconds = 0;
    auto save_checkpoint = [&] {
        const auto t0 = Clock::now();
        write_json_atomic(checkpoint_extras,
                          json{{"first_iteration", first_iteration},
                               {"iteration_seconds", iteration_seconds},
                               {"sampling_vs_teacher_forced_probe", rescore_probe},
                               {"note", "durations and the re-score probe of the iterations before the checkpoint "
                                        "(never part of the exact state)"}},
                          Overwrite::replace);
        write_checkpoint(checkpoint, exact_state(), "ppo iteration " + std::to_string(iteration));
        checkpoint_seconds += since(t0);
        ++checkpoints_written;
    };
    std::set<std::string> seen;
    for (const json& id : consumed) seen.insert(id.get<std::string>());

    Progress bar("ppo " + mode_name, stop - iteration);
    const auto started = Clock::now();
    int64_t done_here = 0;
    while (iteration < stop) {
        const auto t_iter = Clock::now();
        const std::string where = "ppo iteration " + std::to_string(iteration + 1);
        // 1. rollout: the next prompts, sampled by the current actor
        std::vector<const PromptRow*> chosen;
        std::vector<std::vector<int32_t>> batch_prompts;
        for (int64_t k = 0; k < per_iteration; ++k) {
            if (cursor >= static_cast<int64_t>(order.size())) {
                order = sampler.permutation(static_cast<int64_t>(prompts.size()));
                cursor = 0;
            }
            const int64_t idx = order[static_cast<size_t>(cursor++)];
            chosen.push_back(&prompts[static_cast<size_t>(idx)]);
            batch_prompts.push_back(prompt_ids[static_cast<size_t>(idx)]);
        }
        auto t = Clock::now();
        std::vector<Generation> gens = generate(actor_model, batch_prompts, gen, generation);
        const double t_generation = since(t);
        std::vector<Rollout> rollouts(static_cast<size_t>(per_iteration));
        std::vector<ScoringRow> rows;
        for (size_t k = 0; k < rollouts.size(); ++k) {
            Rollout& r = rollouts[k];
            char id[64];
            std::snprintf(id, sizeof id, "iteration-%03lld-slot-%zu", static_cast<long long>(iteration + 1), k);
            r.id = id;
            if (!seen.insert(r.id).second) fail("rollout id ", r.id, " was already consumed");
            r.prompt_id = chosen[k]->id;
            r.row = ScoringRow{batch_prompts[k], gens[k].tokens};
            r.finish = gens[k].finish_reason;
            r.old_logp = gens[k].logprobs;  // the sampling forward's: never replaced
            if (k == 0 && !r.old_logp.empty() && test_nonfinite_here("ppo", "logprob", iteration + 1))
                r.old_logp[0] = std::numeric_limits<float>::quiet_NaN();
            check_finite(r.old_logp, where + " rollout " + r.id, "sampling log-prob (old_logp)");
            rows.push_back(r.row);
        }
        ScoringBatch batch = s.batch(rows);
        const int64_t B = batch.B;
        std::vector<float> per_pos(static_cast<size_t>(B * batch.T)), scores(static_cast<size_t>(B));

        // 2. score: reference log-probs, critic values, the judge
        t = Clock::now();
        reference_scorer.response_logprobs(batch, per_pos.data(), false);
        for (int64_t b = 0; b < B; ++b) {
            Rollout& r = rollouts[static_cast<size_t>(b)];
            r.ref_logp = response_slice(batch, per_pos.data(), b);
            check_finite(r.ref_logp, where + " rollout " + r.id, "reference log-prob");
        }
        const double t_reference = since(t);
        t = Clock::now();
        critic_scorer.critic_values(batch, *critic.head, per_pos.data(), false);
        for (int64_t b = 0; b < B; ++b) {
            Rollout& r = rollouts[static_cast<size_t>(b)];
            r.values = response_slice(batch, per_pos.data(), b);
            if (b == 0 && !r.values.empty() && test_nonfinite_here("ppo", "value", iteration + 1))
                r.values[0] = std::numeric_limits<float>::quiet_NaN();
            check_finite(r.values, where + " rollout " + r.id, "critic value");
        }
        const double t_critic_values = since(t);
        t = Clock::now();
        judge_scorer.reward_scores(batch, *judge.head, scores.data(), false);
        if (test_nonfinite_here("ppo", "score", iteration + 1)) scores[0] = std::numeric_limits<float>::quiet_NaN();
        check_finite(scores, where, "judge score");
        const double t_judge = since(t);

        // 3.–4. per-token rewards, advantages and returns (detached)
        double mean_score = 0, mean_kl = 0, mean_non_score = 0, mean_len = 0;
        int64_t num_eos = 0;
        std::vector<double> all_returns, all_values;
        for (int64_t b = 0; b < B; ++b) {
            Rollout& r = rollouts[static_cast<size_t>(b)];
            r.score = scores[static_cast<size_t>(b)];
            const bool eos = r.finish == "eos";
            r.rewards = ppo_token_rewards(r.old_logp, r.ref_logp, r.score, eos, reward_config);
            Advantages a = ppo_gae(r.rewards, r.values, gamma, lambda);
            r.advantages = a.advantages;
            r.returns = a.returns;
            if (b == 0 && !r.advantages.empty() && test_nonfinite_here("ppo", "advantage", iteration + 1))
                r.advantages[0] = std::numeric_limits<double>::quiet_NaN();
            check_finite(r.rewards, where + " rollout " + r.id, "per-token reward");
            check_finite(r.advantages, where + " rollout " + r.id, "advantage");
            check_finite(r.returns, where + " rollout " + r.id, "return");
            double kl = 0;
            for (size_t i = 0; i < r.old_logp.size(); ++i) kl += r.old_logp[i] - r.ref_logp[i];
            mean_kl += kl;
            mean_non_score += -reward_config.beta * kl;
            mean_score += eos ? r.score
                              : (reward_config.missing_eos == MissingEos::replace ? reward_config.missing_eos_penalty
                                                                                   : r.score + reward_config.missing_eos_penalty);
            mean_len += static_cast<double>(r.old_logp.size());
            num_eos += eos;
            for (size_t i = 0; i < r.returns.size(); ++i) {
                all_returns.push_back(r.returns[i]);
                all_values.push_back(r.values[i]);
            }
        }
        const double dB = static_cast<double>(B);
        mean_score /= dB;
        mean_kl /= dB;
        mean_non_score /= dB;
        mean_len /= dB;

        // 5. two updates of actor and critic over the same rollouts
        double t_actor = 0, t_critic = 0;
        json update_log = json::array();
        double sum_clipfrac = 0, sum_approxkl = 0, sum_policy_loss = 0, sum_value_loss = 0;
        for (int64_t u = 0; u < updates_per_iteration; ++u) {
            const double lr_actor = actor_schedule.at(updates), lr_critic = critic_schedule.at(updates);
            const std::string uwhere = where + " update " + std::to_string(u + 1);
            t = Clock::now();
            actor.zero_grad();
            std::vector<float> logp_now(static_cast<size_t>(B * batch.T)), dlogp(logp_now.size(), 0.f);
            actor_scorer.response_logprobs(batch, logp_now.data(), true);
            check_finite(logp_now, uwhere, "actor log-prob");
            double policy_loss = 0, clipfrac = 0, approxkl = 0, max_rescore_diff = 0;
            for (int64_t b = 0; b < B; ++b) {
                Rollout& r = rollouts[static_cast<size_t>(b)];
                std::vector<float> now = response_slice(batch, logp_now.data(), b);
                if (u == 0)
                    for (size_t i = 0; i < now.size(); ++i)
                        max_rescore_diff = std::max(max_rescore_diff, std::fabs(static_cast<double>(now[i]) - r.old_logp[i]));
                if (u == 0 && iteration == 0 && b == 0 && rescore_probe.is_null())
                    rescore_probe = {{"rollout_id", r.id}, {"sampling_logp", r.old_logp}, {"teacher_forced_logp", now}};
                ActorLoss al = ppo_actor_loss(now, r.old_logp, r.advantages, clip_eps);
                policy_loss += al.loss / dB;
                clipfrac += al.clipfrac / dB;
                approxkl += al.approxkl / dB;
                size_t i = 0;
                for (int64_t tt = 0; tt < batch.T; ++tt)
                    if (batch.response_mask[b * batch.T + tt]) dlogp[b * batch.T + tt] = static_cast<float>(al.dlogp[i++] / dB);
            }
            check_finite(policy_loss, uwhere, "policy loss");
            actor_scorer.response_logprobs_backward(batch, dlogp.data());
            if (test_nonfinite_here("ppo", "gradient", iteration + 1))
                actor_params.front().grad[0] = std::numeric_limits<float>::quiet_NaN();
            const double actor_norm = clip_grad_norm(actor_params, clip_norm, uwhere + " actor");
            actor_opt.step(lr_actor);
            t_actor += since(t);

            t = Clock::now();
            critic.zero_grad();
            std::vector<float> v_now(static_cast<size_t>(B * batch.T)), dv(v_now.size(), 0.f);
            critic_scorer.critic_values(batch, *critic.head, v_now.data(), true);
            check_finite(v_now, uwhere, "critic value");
            double value_loss = 0;
            for (int64_t b = 0; b < B; ++b) {
                Rollout& r = rollouts[static_cast<size_t>(b)];
                CriticLoss cl = ppo_critic_loss(response_slice(batch, v_now.data(), b), r.returns, value_coef);
                value_loss += cl.loss / dB;
                size_t i = 0;
                for (int64_t tt = 0; tt < batch.T; ++tt)
                    if (batch.response_mask[b * batch.T + tt]) dv[b * batch.T + tt] = static_cast<float>(cl.dvalues[i++] / dB);
            }
            check_finite(value_loss, uwhere, "value loss");
            critic_scorer.critic_values_backward(batch, *critic.head, dv.data());
            const double critic_norm = clip_grad_norm(critic_params, clip_norm, uwhere + " critic");
            critic_opt.step(lr_critic);
            t_critic += since(t);
            ++updates;
            sum_clipfrac += clipfrac;
            sum_approxkl += approxkl;
            sum_policy_loss += policy_loss;
            sum_value_loss += value_loss;
            json ul = {{"update", updates},
                       {"lr_actor", lr_actor},
                       {"lr_critic", lr_critic},
                       {"loss_policy", policy_loss},
                       {"loss_value", value_loss},
                       {"clipfrac", clipfrac},
                       {"approxkl", approxkl},
                       {"grad_norm_actor", actor_norm},
                       {"grad_norm_critic", critic_norm}};
            if (u == 0) ul["sampling_vs_rescore_max_abs_diff"] = max_rescore_diff;
            update_log.push_back(ul);
        }
        ++iteration;
        ++done_here;
        for (const Rollout& r : rollouts) consumed.push_back(r.id);

        // 6. record: metrics (numbers only in the state; seconds apart)
        const double dU = static_cast<double>(updates_per_iteration);
        json m = {{"iteration", iteration},
                  {"objective/scores", mean_score},
                  {"objective/kl", mean_kl},
                  {"objective/non_score_reward", mean_non_score},
                  {"objective/rlhf_reward", mean_score + mean_non_score},
                  {"policy/clipfrac", sum_clipfrac / dU},
                  {"policy/approxkl", sum_approxkl / dU},
                  {"loss/policy", sum_policy_loss / dU},
                  {"loss/value", sum_value_loss / dU},
                  {"val/explained_variance", explained_variance(all_returns, all_values)},
                  {"val/num_eos_tokens", num_eos},
                  {"mean_response_length", mean_len},
                  {"updates", update_log},
                  {"rollout_ids", [&] {
                       json ids = json::array();
                       for (const Rollout& r : rollouts) ids.push_back(r.id);
                       return ids;
                   }()}};
        history.push_back(m);
        json phase_seconds = {{"generation", t_generation}, {"reference", t_reference}, {"judge", t_judge},
                              {"critic_values", t_critic_values}, {"actor_optimisation", t_actor},
                              {"critic_optimisation", t_critic}};
        json saved = json::array();
        for (const Rollout& r : rollouts) {
            json table = json::array();
            for (size_t i = 0; i < r.row.response.size(); ++i)
                table.push_back({{"token", r.row.response[i]},
                                 {"text", s.tokenizer().decode(std::span<const int32_t>(&r.row.response[i], 1))},
                                 {"old_logp", r.old_logp[i]},
                                 {"ref_logp", r.ref_logp[i]},
                                 {"reward", r.rewards[i]},
                                 {"value", r.values[i]},
                                 {"advantage", r.advantages[i]},
                                 {"return", r.returns[i]}});
            saved.push_back({{"rollout_id", r.id},
                             {"prompt_id", r.prompt_id},
                             {"prompt_tokens", r.row.prompt.size()},
                             {"response_ids", r.row.response},
                             {"text", s.tokenizer().decode(r.row.response, true)},
                             {"finish_reason", r.finish},
                             {"score", r.score},
                             {"sampled_logratio_sum", [&] {
                                  double k = 0;
                                  for (size_t i = 0; i < r.old_logp.size(); ++i) k += r.old_logp[i] - r.ref_logp[i];
                                  return k;
                              }()},
                             {"tokens", table}});
        }
        char name[64];
        std::snprintf(name, sizeof name, "iteration-%03lld.json", static_cast<long long>(iteration));
        write_json_atomic(rollout_dir / name, json{{"iteration", iteration}, {"rollouts", saved}}, Overwrite::replace);
        phase_seconds["iteration"] = since(t_iter);
        iteration_seconds.push_back({{"iteration", iteration}, {"seconds", phase_seconds}});
        if (checkpoint_due(every, iteration) && iteration < stop) save_checkpoint();
        bar.update(done_here, "score " + std::to_string(mean_score) + " kl " + std::to_string(mean_kl));
    }
    bar.finish();
    const double seconds = since(started);

    // The frozen must be unchanged, the learners must have learned.
    isolation();
    if (reference.learned_identity() != reference_identity) fail("ppo: the frozen reference changed");
    if (judge.learned_identity() != judge_identity) fail("ppo: the frozen judge changed");
    if (base_frozen_identity(s.base) != s.base_identity) fail("ppo: the frozen base changed");
    if (done_here > 0 && actor.learned_identity() == identity["sft_learned_identity"])
        fail("ppo: the actor did not learn");
    if (done_here > 0 && critic.learned_identity() == identity["critic_initial_identity"])
        fail("ppo: the critic did not learn");

    // metrics.jsonl: this mode's iterations, each its history entry plus its
    // seconds (null for an iteration whose durations were lost with a checkpoint's extras).
    std::map<int64_t, json> seconds_of;
    for (const json& t : iteration_seconds) seconds_of[t["iteration"].get<int64_t>()] = t["seconds"];
    json phase_totals = {{"generation", 0.0}, {"reference", 0.0}, {"judge", 0.0}, {"critic_values", 0.0},
                         {"actor_optimisation", 0.0}, {"critic_optimisation", 0.0}, {"iteration", 0.0}};
    std::string metrics_text;
    for (int64_t i = first_iteration + 1; i <= iteration; ++i) {
        json line = history[static_cast<size_t>(i - 1)];
        auto it = seconds_of.find(i);
        line["seconds"] = it == seconds_of.end() ? json() : it->second;
        if (it != seconds_of.end())
            for (auto& [k, v] : it->second.items()) phase_totals[k] = phase_totals[k].get<double>() + v.get<double>();
        metrics_text += line.dump() + "\n";
    }
    StateFileInfo info = save_resume_state(state_path, exact_state());
    write_file_atomic(metrics_path, metrics_text);

    json report{{"stage", "ppo"},
                {"mode", mode_name},
                {"identity", identity},
                {"iterations", iteration},
                {"iterations_this_run", done_here},
                {"updates_per_optimizer", updates},
                {"responses", static_cast<int64_t>(consumed.size())},
                {"final_learned", {{"actor", actor.learned_identity()},
                                   {"critic", critic.learned_identity()},
                                   {"reference", reference_identity},
                                   {"reward", judge_identity}}},
                {"frozen_reference_reward_unchanged", true},
                {"history", history},
                {"sampling_vs_teacher_forced_probe", rescore_probe},
                {"numerical_scope",
                 "old_logp comes from the sampling forward (KV cache, one token at a time); the teacher-forced "
                 "re-score of the same tokens may differ in BF16. The difference before the first update is "
                 "recorded, never substituted."},
                {"seconds", seconds},
                {"seconds_per_phase", phase_totals},
                {"peak_rss_bytes", peak_rss_bytes()},
                {"state_file", info.to_json()},
                {"checkpoints", {{"every_iterations", every},
                                 {"written_this_run", checkpoints_written},
                                 {"seconds_this_run", checkpoint_seconds},
                                 {"restarted_from", restarted}}}};
    if (mode == StageMode::continuous) {
        save_role(run.final_dir("ppo") / "actor", actor, identity, s);
        save_role(run.final_dir("ppo") / "critic", critic, identity, s);
        report["final_dir"] = run.final_dir("ppo").string();
    }
    write_json_atomic(report_path, report);
    remove_checkpoint(checkpoint_extras);
    remove_checkpoint(checkpoint);
    return report;
}

}  // namespace ppolab
