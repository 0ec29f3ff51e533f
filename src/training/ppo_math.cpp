#include "training/ppo_math.h"

#include <algorithm>
#include <cmath>

#include "util/canon_math.h"
#include "util/error.h"

namespace ppolab {

MissingEos parse_missing_eos(const std::string& text) {
    if (text == "replace") return MissingEos::replace;
    if (text == "add") return MissingEos::add;
    fail("config: ppo.missing_eos must be 'replace' or 'add', got '", text, "'");
}

KlPenalty parse_kl_penalty(const std::string& text) {
    if (text == "reward_k1") return KlPenalty::reward_k1;
    if (text == "loss_k3") return KlPenalty::loss_k3;
    fail("config: ppo.kl_penalty must be 'reward_k1' or 'loss_k3', got '", text, "'");
}

const char* kl_penalty_name(KlPenalty p) { return p == KlPenalty::reward_k1 ? "reward_k1" : "loss_k3"; }

double ppo_terminal_reward(double score, bool ended_with_eos, const RewardConfig& c) {
    if (ended_with_eos) return score;
    return c.missing_eos == MissingEos::replace ? c.missing_eos_penalty : score + c.missing_eos_penalty;
}

double ppo_response_kl(const std::vector<float>& old_logp, const std::vector<float>& ref_logp) {
    if (ref_logp.size() != old_logp.size())
        fail("ppo_response_kl: ", old_logp.size(), " sampling log-probs and ", ref_logp.size(), " reference log-probs");
    double kl = 0;
    for (size_t i = 0; i < old_logp.size(); ++i) kl += old_logp[i] - ref_logp[i];
    return kl;
}

std::vector<double> ppo_token_rewards(const std::vector<float>& old_logp, const std::vector<float>& ref_logp,
                                      double score, bool ended_with_eos, const RewardConfig& c) {
    const size_t n = old_logp.size();
    if (n == 0 || ref_logp.size() != n)
        fail("ppo_token_rewards: ", n, " sampling log-probs and ", ref_logp.size(), " reference log-probs");
    std::vector<double> r(n);
    if (c.kl_penalty == KlPenalty::reward_k1)
        for (size_t t = 0; t < n; ++t)
            r[t] = -c.beta * (static_cast<double>(old_logp[t]) - static_cast<double>(ref_logp[t]));
    r[n - 1] += ppo_terminal_reward(score, ended_with_eos, c);
    return r;
}

Advantages ppo_gae(const std::vector<double>& rewards, const std::vector<float>& values, double gamma, double lambda) {
    const size_t n = rewards.size();
    if (values.size() != n) fail("ppo_gae: ", n, " rewards and ", values.size(), " values");
    Advantages out;
    out.advantages.assign(n, 0.0);
    out.returns.assign(n, 0.0);
    double next_advantage = 0.0, next_value = 0.0;
    for (size_t i = n; i-- > 0;) {
        const double not_done = i + 1 == n ? 0.0 : 1.0;  // the episode ends at the last token
        const double delta = rewards[i] + gamma * not_done * next_value - static_cast<double>(values[i]);
        const double a = delta + gamma * lambda * not_done * next_advantage;
        out.advantages[i] = a;
        out.returns[i] = a + static_cast<double>(values[i]);
        next_advantage = a;
        next_value = static_cast<double>(values[i]);
    }
    return out;
}

ActorLoss ppo_actor_loss(const std::vector<float>& logp_now, const std::vector<float>& old_logp,
                         const std::vector<double>& advantages, double eps) {
    const size_t n = logp_now.size();
    if (n == 0 || old_logp.size() != n || advantages.size() != n)
        fail("ppo_actor_loss: sizes ", n, ", ", old_logp.size(), ", ", advantages.size());
    ActorLoss out;
    out.dlogp.assign(n, 0.0);
    double clipped = 0;
    for (size_t t = 0; t < n; ++t) {
        const double diff = static_cast<double>(logp_now[t]) - static_cast<double>(old_logp[t]);
        const double ratio = canon_exp(diff);
        const double A = advantages[t];
        const double unclipped = ratio * A;
        const double bounded = std::clamp(ratio, 1.0 - eps, 1.0 + eps) * A;
        // −min(ρA, clip(ρ)A): the clipped branch wins (and has no gradient)
        // only when it is strictly smaller — A > 0 clips at 1+ε, A < 0 at 1−ε.
        if (bounded < unclipped) {
            out.loss -= bounded;
            clipped += 1;
        } else {
            out.loss -= unclipped;
            out.dlogp[t] = -unclipped / static_cast<double>(n);  // ∂(−ρA)/∂logp = −ρA
        }
        out.approxkl += 0.5 * diff * diff;
        out.mean_ratio += ratio;
    }
    const double dn = static_cast<double>(n);
    out.loss /= dn;
    out.clipfrac = clipped / dn;
    out.approxkl /= dn;
    out.mean_ratio /= dn;
    return out;
}

CriticLoss ppo_critic_loss(const std::vector<float>& values_now, const std::vector<double>& returns,
                           double coefficient) {
    const size_t n = values_now.size();
    if (n == 0 || returns.size() != n) fail("ppo_critic_loss: ", n, " values and ", returns.size(), " returns");
    CriticLoss out;
    out.dvalues.assign(n, 0.0);
    const double dn = static_cast<double>(n);
    for (size_t t = 0; t < n; ++t) {
        const double e = static_cast<double>(values_now[t]) - returns[t];
        out.loss += coefficient * e * e;
        out.dvalues[t] = 2.0 * coefficient * e / dn;
    }
    out.loss /= dn;
    return out;
}

void ppo_whiten(std::vector<std::vector<double>>& advantages) {
    double n = 0, sum = 0;
    for (const std::vector<double>& a : advantages)
        for (double x : a) {
            sum += x;
            n += 1;
        }
    if (n < 2) fail("ppo_whiten: ", n, " advantage(s) in the iteration; whitening needs at least 2 tokens");
    const double mean = sum / n;
    double sq = 0;
    for (const std::vector<double>& a : advantages)
        for (double x : a) sq += (x - mean) * (x - mean);
    const double var = sq / n * (n / (n - 1));  // TRL: masked_mean of the squares, times the Bessel factor
    const double scale = 1.0 / std::sqrt(var + 1e-8);
    for (std::vector<double>& a : advantages)
        for (double& x : a) x = (x - mean) * scale;
}

ClippedCriticLoss ppo_clipped_critic_loss(const std::vector<float>& values_now, const std::vector<float>& values_old,
                                          const std::vector<double>& returns, double coefficient, double c) {
    const size_t n = values_now.size();
    if (n == 0 || returns.size() != n || values_old.size() != n)
        fail("ppo_clipped_critic_loss: ", n, " values, ", values_old.size(), " old values and ", returns.size(),
             " returns");
    ClippedCriticLoss out;
    out.dvalues.assign(n, 0.0);
    const double dn = static_cast<double>(n);
    for (size_t t = 0; t < n; ++t) {
        const double v = values_now[t], old = values_old[t];
        const double clipped = std::clamp(v, old - c, old + c);
        const double e1 = v - returns[t], e2 = clipped - returns[t];
        if (e2 * e2 > e1 * e1) {
            // The clipped branch: V outside the range (inside, clipped == V); clamp passes no gradient.
            out.loss += coefficient * e2 * e2;
            out.clipfrac += 1;
        } else {
            out.loss += coefficient * e1 * e1;
            out.dvalues[t] = 2.0 * coefficient * e1 / dn;
        }
    }
    out.loss /= dn;
    out.clipfrac /= dn;
    return out;
}

KlLoss ppo_k3_loss(const std::vector<float>& logp_now, const std::vector<float>& ref_logp, double beta) {
    const size_t n = logp_now.size();
    if (n == 0 || ref_logp.size() != n) fail("ppo_k3_loss: ", n, " log-probs and ", ref_logp.size(), " reference");
    KlLoss out;
    out.dlogp.assign(n, 0.0);
    const double dn = static_cast<double>(n);
    for (size_t t = 0; t < n; ++t) {
        const double x = static_cast<double>(ref_logp[t]) - static_cast<double>(logp_now[t]);
        const double ex = canon_exp(x);
        out.mean_k3 += ex - x - 1.0;
        out.dlogp[t] = beta * (1.0 - ex) / dn;  // ∂k3/∂now = −(e^x − 1)
    }
    out.mean_k3 /= dn;
    out.loss = beta * out.mean_k3;
    return out;
}

double sequence_reward(const std::vector<float>& old_logp, const std::vector<float>& ref_logp, double score,
                       bool ended_with_eos, const RewardConfig& c) {
    return ppo_terminal_reward(score, ended_with_eos, c) - c.beta * ppo_response_kl(old_logp, ref_logp);
}

GroupAdvantage parse_group_advantage(const std::string& text) {
    if (text == "rloo") return GroupAdvantage::rloo;
    if (text == "grpo") return GroupAdvantage::grpo;
    fail("config: rl.advantage must be 'rloo' or 'grpo', got '", text, "'");
}

const char* group_advantage_name(GroupAdvantage kind) { return kind == GroupAdvantage::rloo ? "rloo" : "grpo"; }

std::vector<double> group_advantages(const std::vector<double>& R, GroupAdvantage kind, const std::string& where) {
    const size_t k = R.size();
    if (k < 2)
        fail(where, ": a group of ", k, " response(s); ", group_advantage_name(kind),
             " needs at least 2 responses per prompt (rl.samples_per_prompt)");
    double sum = 0;
    for (double r : R) sum += r;
    const double dk = static_cast<double>(k);
    std::vector<double> A(k);
    if (kind == GroupAdvantage::rloo) {
        for (size_t i = 0; i < k; ++i) A[i] = R[i] - (sum - R[i]) / (dk - 1.0);
        return A;
    }
    const double mean = sum / dk;
    double sq = 0;
    for (double r : R) sq += (r - mean) * (r - mean);
    const double std_dev = std::sqrt(sq / (dk - 1.0));
    for (size_t i = 0; i < k; ++i) A[i] = (R[i] - mean) / (std_dev + 1e-4);
    return A;
}

double explained_variance(const std::vector<double>& returns, const std::vector<double>& values) {
    const size_t n = returns.size();
    if (n == 0 || values.size() != n) return 0.0;
    auto var = [&](auto f) {
        double mean = 0, sq = 0;
        for (size_t i = 0; i < n; ++i) mean += f(i);
        mean /= static_cast<double>(n);
        for (size_t i = 0; i < n; ++i) sq += (f(i) - mean) * (f(i) - mean);
        return sq / static_cast<double>(n);
    };
    const double vr = var([&](size_t i) { return returns[i]; });
    if (vr == 0.0) return 0.0;
    return 1.0 - var([&](size_t i) { return returns[i] - values[i]; }) / vr;
}

}  // namespace ppolab
