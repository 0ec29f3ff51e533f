// metric_names.h — the names of PPO's per-iteration metrics, as ppo.cpp
// writes them into RUN/ppo/<mode>.metrics.jsonl and the history of its stage
// report (TRL's names), and as the report and the CLI read them back. One
// spelling per metric: a reader uses these constants, never the literal.
#pragma once

namespace ppolab::metric {

inline constexpr const char* kScores = "objective/scores";                    // mean judge score of the rollouts
inline constexpr const char* kKl = "objective/kl";                            // mean per-sequence sampled log-ratio sum
inline constexpr const char* kNonScoreReward = "objective/non_score_reward";  // the KL penalty
inline constexpr const char* kRlhfReward = "objective/rlhf_reward";           // score + non-score reward
inline constexpr const char* kClipFraction = "policy/clipfrac";               // tokens whose ratio was clipped
inline constexpr const char* kApproxKl = "policy/approxkl";                   // rollout policy vs the updated one
inline constexpr const char* kPolicyLoss = "loss/policy";                     // clipped surrogate loss
inline constexpr const char* kValueLoss = "loss/value";                       // critic loss
inline constexpr const char* kExplainedVariance = "val/explained_variance";   // of the returns by the values
inline constexpr const char* kNumEosTokens = "val/num_eos_tokens";            // rollouts that ended with EOS
inline constexpr const char* kMeanResponseLength = "mean_response_length";    // tokens per rollout

}  // namespace ppolab::metric
