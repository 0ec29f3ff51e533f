// fuzz_candidates.cpp — libFuzzer target for the candidate file parser of
// SPEC §8 (feedback/candidates.h). Any bytes must end in a CandidateFile or
// a ppolab::Error; an accepted file must round-trip through its JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "feedback/candidates.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace ppolab;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const CandidateFile c = parse_candidates(text, "candidates.json");
        const std::string once = candidates_to_json(c).dump();
        if (candidates_to_json(parse_candidates(once, "again")).dump() != once) std::abort();
        for (const CandidatePair& p : c.pairs)
            if (c.find(p.id) == nullptr || p.a.token_ids.empty() || p.b.token_ids.empty()) std::abort();
    } catch (const Error&) {}
    return 0;
}
