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
// That is the seed's PPO, the study's reference. Three design switches of
// other trainers (SPEC §12, all off by default, each a ppo.* key):
//
//   7. whitening             A ← (A − mean) / √(var + 1e-8) over every token of
//                            the iteration, var with Bessel's correction (TRL's
//                            masked_whiten); the returns keep the raw A
//   8. value clipping        V_clip = clamp(V_now, V_old − c, V_old + c),
//                            ℓ_t = coef · max((V_now − R)², (V_clip − R)²)
//   9. k3 in the loss        no −β·log-ratio in the rewards; instead the actor's
//                            loss adds β · mean_t k3_t, k3 = e^x − x − 1 with
//                            x = ref_logp − logp_now (≥ 0, the GRPO form)
//
// The critic-free group baselines (RLOO, GRPO; training/rl.h) reuse 1 and 4
// with one advantage per response:
//
//  10. sequence reward       R_i = terminal reward − β Σ_t (old_logp_t − ref_logp_t)
//  11. group advantage       k responses to one prompt:
//                            rloo  A_i = R_i − (Σ_j R_j − R_i)/(k − 1)
//                            grpo  A_i = (R_i − mean R) / (std R + 1e-4),
//                                  std with Bessel's correction (TRL's GRPO)
//
// No entropy bonus anywhere.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ppolab {

enum class MissingEos { replace, add };  // what a response cut without EOS receives
MissingEos parse_missing_eos(const std::string& text);

// Where PPO's KL penalty goes: k1 (the sampled log-ratio) in the per-token
// rewards, the seed's; or k3 in the actor's loss (switch 9).
enum class KlPenalty { reward_k1, loss_k3 };
KlPenalty parse_kl_penalty(const std::string& text);
const char* kl_penalty_name(KlPenalty penalty);

struct RewardConfig {
    double beta = 0.02;  // KL coefficient on the sampled log-ratio
    MissingEos missing_eos = MissingEos::replace;
    double missing_eos_penalty = -1.0;
    KlPenalty kl_penalty = KlPenalty::reward_k1;  // loss_k3: the rewards carry no KL term
};

// 1a. The judge's part of the last token's reward: the score (ended with
// EOS); for a cut response the penalty instead (replace) or added (add).
double ppo_terminal_reward(double score, bool ended_with_eos, const RewardConfig& config);

// 1b. The sampled log-ratio of one response, Σ_t (old_logp_t − ref_logp_t):
// each difference in float, summed in double, t = 0..n−1 (TRL's objective/kl
// term before the mean over responses).
double ppo_response_kl(const std::vector<float>& old_logp, const std::vector<float>& ref_logp);

// 1. r (n): the per-token rewards of one response, −β times each token's
// log-ratio (none with kl_penalty loss_k3), plus ppo_terminal_reward on the last.
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

// 7. Whitening of every response's advantages together (TRL's
// masked_whiten, shift_mean): one mean and one unbiased variance over all
// tokens. Error with fewer than 2 tokens (the variance is undefined).
void ppo_whiten(std::vector<std::vector<double>>& advantages);

// 8. The clipped value loss: coefficient · mean_t max((V − R)², (V_clip − R)²)
// with V_clip = clamp(V, V_old − c, V_old + c); no gradient through the
// clipped branch when it is the larger and V lies outside the range.
struct ClippedCriticLoss {
    double loss = 0;
    std::vector<double> dvalues;
    double clipfrac = 0;  // fraction of tokens whose clipped branch was strictly larger
};
ClippedCriticLoss ppo_clipped_critic_loss(const std::vector<float>& values_now, const std::vector<float>& values_old,
                                          const std::vector<double>& returns, double coefficient, double cliprange);

// 9. β · mean over one response's tokens of k3 = e^x − x − 1, x = ref − now,
// with its gradient with respect to logp_now.
struct KlLoss {
    double loss = 0;
    std::vector<double> dlogp;
    double mean_k3 = 0;  // without β
};
KlLoss ppo_k3_loss(const std::vector<float>& logp_now, const std::vector<float>& ref_logp, double beta);

// 10. R_i: the response's reward for a critic-free method, the terminal
// reward minus β times the sampled log-ratio sum (SPEC §4's penalty, summed).
double sequence_reward(const std::vector<float>& old_logp, const std::vector<float>& ref_logp, double score,
                       bool ended_with_eos, const RewardConfig& config);

// 11. One advantage per response of a group of k ≥ 2 responses to one prompt
// (Error naming `where` otherwise).
enum class GroupAdvantage { rloo, grpo };
GroupAdvantage parse_group_advantage(const std::string& text);
const char* group_advantage_name(GroupAdvantage kind);
std::vector<double> group_advantages(const std::vector<double>& rewards, GroupAdvantage kind, const std::string& where);

// Explained variance of the old values as predictors of the returns, TRL's
// val/explained_variance: 1 − Var(R − V) / Var(R) over all tokens.
double explained_variance(const std::vector<double>& returns, const std::vector<double>& values);

}  // namespace ppolab
