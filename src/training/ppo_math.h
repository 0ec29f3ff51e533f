// ppo_math.h — the whole PPO arithmetic of the study (SPEC §4–§5), as small
// pure functions over one response at a time. Nothing here knows about
// models, batches or files; every number a PPO report prints comes from one
// of these functions.
//
// Per response of n tokens (index t = 0..n−1, the last one is where the
// episode ends: EOS, or the cut at the length limit):
//
//   1. per-token reward      r_t = −β · (old_logp_t − ref_logp_t)
//                            r_{n−1} += judge score            (ended with EOS)
//                            r_{n−1} += −1 instead of the score (cut, missing_eos = replace)
//                            r_{n−1} += score − 1               (cut, missing_eos = add)
//   2. GAE, backwards        δ_t = r_t + γ(1 − done_t) V_{t+1} − V_t
//                            A_t = δ_t + γλ(1 − done_t) A_{t+1},   done only at t = n−1
//                            (no bootstrap after the end)
//   3. returns               R_t = A_t + V_t          (V = old values: detached)
//   4. actor loss            ρ_t = exp(logp_now_t − old_logp_t)
//                            ℓ_t = −min(ρ_t A_t, clip(ρ_t, 1−ε, 1+ε) A_t)
//   5. critic loss           ℓ_t = ½ (V_now_t − R_t)²
//   6. reduction             mean over the response's tokens, then (by the
//                            caller) mean over the responses: long answers
//                            get no extra weight.
//
// No whitening of rewards or advantages, no value clipping, no entropy bonus.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ppolab {

enum class MissingEos { replace, add };  // what a response cut without EOS receives
MissingEos parse_missing_eos(const std::string& text);

struct RewardConfig {
    double beta = 0.02;  // KL coefficient on the sampled log-ratio
    MissingEos missing_eos = MissingEos::replace;
    double missing_eos_penalty = -1.0;
};

// 1a. The judge's part of the last token's reward: the score (ended with
// EOS); for a cut response the penalty instead (replace) or added (add).
double ppo_terminal_reward(double score, bool ended_with_eos, const RewardConfig& config);

// 1b. The sampled log-ratio of one response, Σ_t (old_logp_t − ref_logp_t):
// each difference in float, summed in double, t = 0..n−1 (TRL's objective/kl
// term before the mean over responses).
double ppo_response_kl(const std::vector<float>& old_logp, const std::vector<float>& ref_logp);

// 1. r (n): the per-token rewards of one response, −β times each token's
// log-ratio, plus ppo_terminal_reward on the last.
std::vector<double> ppo_token_rewards(const std::vector<float>& old_logp, const std::vector<float>& ref_logp,
                                      double score, bool ended_with_eos, const RewardConfig& config);

// 2.–3. Advantages and returns (n each) from rewards and old values (n).
struct Advantages {
    std::vector<double> advantages;
    std::vector<double> returns;
};
Advantages ppo_gae(const std::vector<double>& rewards, const std::vector<float>& values, double gamma, double lambda);

// 4. Mean clipped surrogate loss over one response's tokens, with its
// gradient with respect to logp_now (n) and the clipping statistics.
struct ActorLoss {
    double loss = 0;            // mean over tokens
    std::vector<double> dlogp;  // ∂loss/∂logp_now_t
    double clipfrac = 0;        // fraction of tokens whose ratio was clipped (gradient zero)
    double approxkl = 0;        // mean ½ (logp_now − old_logp)²
    double mean_ratio = 0;
};
ActorLoss ppo_actor_loss(const std::vector<float>& logp_now, const std::vector<float>& old_logp,
                         const std::vector<double>& advantages, double clip_epsilon);

// 5. Mean squared value loss over one response's tokens (coefficient ½ in the
// config, no second hidden ½), with its gradient with respect to V_now.
struct CriticLoss {
    double loss = 0;
    std::vector<double> dvalues;
};
CriticLoss ppo_critic_loss(const std::vector<float>& values_now, const std::vector<double>& returns,
                           double coefficient);

// Explained variance of the old values as predictors of the returns, TRL's
// val/explained_variance: 1 − Var(R − V) / Var(R) over all tokens.
double explained_variance(const std::vector<double>& returns, const std::vector<double>& values);

}  // namespace ppolab
