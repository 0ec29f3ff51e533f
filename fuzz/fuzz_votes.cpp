// fuzz_votes.cpp — libFuzzer target for outside input of the feedback layer
// (SPEC §8): vote files (parse_votes, and collect_votes against a fixed
// candidate file) and the voting server's HTTP request parser. The first
// byte picks the parser. Bad input must end in ppolab::Error, never in a
// crash, a hang or another exception.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "feedback/candidates.h"
#include "feedback/serve.h"
#include "feedback/votes.h"
#include "util/error.h"

namespace {

const std::string kCandidates =
    R"({"format":1,"checkpoint_sha256":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","pairs":[)"
    R"({"id":"p0","split":"train","prompt_id":"OH000-RL11","prompt":"q",)"
    R"("a":{"text":"x","token_ids":[1],"finish_reason":"eos"},)"
    R"("b":{"text":"y","token_ids":[2],"finish_reason":"length"}},)"
    R"({"id":"p1","split":"validation","prompt_id":"OH001-RL11","prompt":"q",)"
    R"("a":{"text":"x","token_ids":[1],"finish_reason":"eos"},)"
    R"("b":{"text":"y","token_ids":[2],"finish_reason":"eos"}},)"
    R"({"id":"p2","split":"test","prompt_id":"OH002-RL11","prompt":"q",)"
    R"("a":{"text":"x","token_ids":[1],"finish_reason":"eos"},)"
    R"("b":{"text":"y","token_ids":[2],"finish_reason":"eos"}}]})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace ppolab;
    if (size == 0) return 0;
    const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        switch (data[0] % 3) {
            case 0: {
                const VoteFile v = parse_votes(text, "votes.json");
                const std::string once = votes_to_json(v).dump();
                if (votes_to_json(parse_votes(once, "again")).dump() != once) std::abort();
                if (v.who().empty()) std::abort();
                break;
            }
            case 1: {
                if (auto r = parse_http_request(text)) {
                    if (r->body.size() > kHttpMaxBody || r->method.empty()) std::abort();
                }
                break;
            }
            case 2: {
                static const CandidateFile candidates = parse_candidates(kCandidates, "candidates.json");
                const VoteRules rules{"human", candidates.checkpoint_sha256, 1, 1, 1};
                const VoteCollection c = collect_votes(candidates, {"candidates.json", kCandidates},
                                                       {{"votes.json", std::string(text)}}, rules);
                if (c.train.empty() || c.validation.empty() || c.test.empty()) std::abort();
                break;
            }
        }
    } catch (const Error&) {}
    return 0;
}
