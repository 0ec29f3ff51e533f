// candidates.h — the candidate file of SPEC §8: pairs of responses sampled
// from one SFT checkpoint, which people (or a declared AI labeller) compare.
//
//   {format: 1,
//    checkpoint_sha256,          sha256 of the SFT checkpoint's learned.safetensors
//    source: {...},              free description of how the file was made (optional)
//    skipped_identical: N,       prompts skipped because both samples were equal (optional)
//    pairs: [{id, split, prompt_id, prompt,
//             a: {text, token_ids, finish_reason},
//             b: {text, token_ids, finish_reason}}]}
//
// `split` is train | validation | test (assigned by seed at export; it says
// which labels train the judge, validate it or test it). `prompt_id` is the
// corpus id of the prompt (a learn/ train or validation prompt, never a test
// or probe prompt). `token_ids` are the sampled ids, EOS last when the
// response ended with it (finish_reason "eos"; "length" when cut); `text` is
// their decoding without the EOS. Parsing never trusts the bytes: every
// field is checked, and any input ends in a result or a ppolab::Error.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "util/json.h"

namespace ppolab {

struct CandidateResponse {
    std::string text;
    std::vector<int32_t> token_ids;  // (n) sampled ids, EOS last when finish_reason is "eos"
    std::string finish_reason;       // "eos" | "length"
};

struct CandidatePair {
    std::string id;         // unique in the file
    std::string split;      // train | validation | test
    std::string prompt_id;  // the corpus prompt's id
    std::string prompt;     // the user's text (rendered with the chat template when scored)
    CandidateResponse a, b;
};

struct CandidateFile {
    std::string checkpoint_sha256;
    json source = json::object();
    int64_t skipped_identical = 0;
    std::vector<CandidatePair> pairs;
    std::map<std::string, size_t> index;  // id -> position in pairs

    const CandidatePair* find(std::string_view id) const;  // nullptr when unknown
};

inline constexpr const char* kFeedbackSplits[] = {"train", "validation", "test"};

// Validates and parses candidate-file bytes; `where` names the file in errors.
CandidateFile parse_candidates(std::string_view bytes, std::string_view where);
// The file's JSON (fields in the order above); parse_candidates(dump) gives it back.
ordered_json candidates_to_json(const CandidateFile& file);

// True for 64 lowercase hexadecimal digits.
bool is_sha256_hex(std::string_view text);

// The split of each of n pairs: a Philox(seed) permutation of 0..n-1; the
// first round(n·train_fraction) positions of it are train, the next
// round(n·validation_fraction) validation, the rest test. Fractions must be
// in [0, 1] with a sum ≤ 1.
std::vector<std::string> assign_feedback_splits(int64_t n, uint64_t seed, double train_fraction,
                                                double validation_fraction);

}  // namespace ppolab
