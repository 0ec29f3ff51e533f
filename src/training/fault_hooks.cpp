#include "training/fault_hooks.h"

#include <cstdlib>

#include "util/error.h"

namespace ppolab {

FaultHooks FaultHooks::from_environment() {
    FaultHooks h;
    if (const char* v = std::getenv("PPOLAB_TEST_KILL_IN_CHECKPOINT"); v != nullptr && *v != '\0') {
        char* end = nullptr;
        const long long x = std::strtoll(v, &end, 10);
        if (*end != '\0' || x < 1)
            fail("PPOLAB_TEST_KILL_IN_CHECKPOINT must be a checkpoint number >= 1, got '", v, "'");
        h.kill_in_checkpoint_ = static_cast<int64_t>(x);
    }
    if (const char* d = std::getenv("PPOLAB_TEST_DRIFT"); d != nullptr && *d != '\0') {
        const std::string s(d);
        const size_t at = s.find('@');
        char* end = nullptr;
        const long long n = at == std::string::npos ? 0 : std::strtoll(s.c_str() + at + 1, &end, 10);
        if (at == std::string::npos || at == 0 || *end != '\0' || n < 1)
            fail("PPOLAB_TEST_DRIFT must be <stage>@<n> (e.g. sft@3), got '", s, "'");
        h.drift_stage_ = s.substr(0, at);
        h.drift_at_ = static_cast<int64_t>(n);
    }
    const char* v = std::getenv("PPOLAB_TEST_NONFINITE");
    if (v == nullptr || *v == '\0') return h;
    const std::string s(v);
    const size_t dot = s.find('.'), at = s.find('@');
    if (dot == std::string::npos || at == std::string::npos || dot > at || at + 1 == s.size())
        fail("PPOLAB_TEST_NONFINITE must be <stage>.<quantity>@<n> (e.g. sft.loss@3), got '", s, "'");
    static const char* kKnown[] = {"sft.loss",     "sft.gradient",  "reward.score",     "reward.gradient",
                                   "ppo.logprob",  "ppo.score",     "ppo.value",        "ppo.advantage",
                                   "ppo.gradient", "pretrain.loss", "pretrain.gradient"};
    bool known = false;
    for (const char* k : kKnown) known = known || s.substr(0, at) == k;
    if (!known) fail("PPOLAB_TEST_NONFINITE: unknown quantity '", s.substr(0, at), "' (see training/fault_hooks.h)");
    h.nonfinite_stage_ = s.substr(0, dot);
    h.nonfinite_quantity_ = s.substr(dot + 1, at - dot - 1);
    char* end = nullptr;
    h.nonfinite_at_ = std::strtoll(s.c_str() + at + 1, &end, 10);
    if (*end != '\0' || h.nonfinite_at_ < 1) fail("PPOLAB_TEST_NONFINITE: '", s, "' must end in @<n> with n >= 1");
    return h;
}

}  // namespace ppolab
