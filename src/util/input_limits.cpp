#include "util/input_limits.h"

#include <cstdlib>
#include <string_view>

#include "util/error.h"

namespace ppolab {

static constexpr uint64_t kMiB = uint64_t(1) << 20;
static constexpr uint64_t kMaxMiB = uint64_t(1) << 20;  // 1 TiB: beyond any input, and no overflow in bytes

const InputLimitInfo& input_limit_info(InputKind kind) {
    static const InputLimitInfo kConfig{"configuration file", "configuration files", "PPOLAB_MAX_CONFIG_MIB", 4};
    static const InputLimitInfo kVotes{"vote file", "vote files", "PPOLAB_MAX_VOTES_MIB", 64};
    static const InputLimitInfo kCandidates{"candidate file", "candidate files", "PPOLAB_MAX_CANDIDATES_MIB", 64};
    static const InputLimitInfo kJson{"JSON file", "JSON files", "PPOLAB_MAX_JSON_MIB", 64};
    static const InputLimitInfo kTokenizer{"tokenizer file", "tokenizer files", "PPOLAB_MAX_TOKENIZER_MIB", 32};
    static const InputLimitInfo kState{"resume state", "resume state files (compressed)", "PPOLAB_MAX_STATE_MIB", 2048};
    static const InputLimitInfo kStateInflated{"resume state", "resume states (decompressed)",
                                               "PPOLAB_MAX_STATE_INFLATED_MIB", 2048};
    switch (kind) {
        case InputKind::config: return kConfig;
        case InputKind::votes: return kVotes;
        case InputKind::candidates: return kCandidates;
        case InputKind::json: return kJson;
        case InputKind::tokenizer: return kTokenizer;
        case InputKind::state: return kState;
        case InputKind::state_inflated: return kStateInflated;
    }
    PPOLAB_ASSERT(false);
    return kJson;
}

static uint64_t limit_mib(const InputLimitInfo& info) {
    const char* value = std::getenv(info.env);
    if (value == nullptr) return info.default_mib;
    const std::string_view text(value);
    uint64_t mib = 0;
    bool ok = !text.empty() && text.size() <= 7;
    for (char c : text) {
        if (c < '0' || c > '9') ok = false;
        if (ok) mib = mib * 10 + static_cast<uint64_t>(c - '0');
    }
    if (!ok || mib < 1 || mib > kMaxMiB)
        fail("environment variable ", info.env, " must be a whole number of MiB from 1 to ", kMaxMiB,
             " (the limit for ", info.many, "), got '", text, "'");
    return mib;
}

uint64_t input_limit_bytes(InputKind kind) { return limit_mib(input_limit_info(kind)) * kMiB; }

std::string input_limit_text(InputKind kind) {
    const InputLimitInfo& info = input_limit_info(kind);
    return "the " + std::to_string(limit_mib(info)) + " MiB limit for " + info.many + " (raise it with " + info.env +
           "=<MiB>)";
}

}  // namespace ppolab
