#include "feedback/candidates.h"

#include <cmath>
#include <set>

#include "feedback/fields.h"
#include "util/error.h"
#include "util/rng.h"

namespace ppolab {

using feedback_detail::check_fields;
using feedback_detail::check_printable_text;
using feedback_detail::kMaxIdBytes;
using feedback_detail::nonempty_string;
using feedback_detail::shown;

const CandidatePair* CandidateFile::find(std::string_view id) const {
    auto it = index.find(std::string(id));
    return it == index.end() ? nullptr : &pairs[it->second];
}

bool is_sha256_hex(std::string_view text) {
    if (text.size() != 64) return false;
    for (char c : text)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

namespace {

constexpr int64_t kMaxTokenId = 0x7fffffff;

CandidateResponse parse_response(const json& j, const std::string& at) {
    check_fields(j, {"text", "token_ids", "finish_reason"}, {}, at);
    CandidateResponse r;
    r.text = json_string(j, "text", at);
    const json& ids = j["token_ids"];
    if (!ids.is_array()) fail(at, ": field 'token_ids' must be an array of token ids, got ", ids.type_name());
    if (ids.empty()) fail(at, ": field 'token_ids' must not be empty (a response has at least one token)");
    for (size_t i = 0; i < ids.size(); ++i) {
        const json& id = ids[i];
        if (!id.is_number_integer() ||
            (id.is_number_unsigned() ? id.get<uint64_t>() > kMaxTokenId
                                     : id.get<int64_t>() < 0 || id.get<int64_t>() > kMaxTokenId))
            fail(at, ": field 'token_ids[", i, "]' must be an integer in [0, ", kMaxTokenId, "], got ", id.dump());
        r.token_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    r.finish_reason = json_string(j, "finish_reason", at);
    if (r.finish_reason != "eos" && r.finish_reason != "length")
        fail(at, ": field 'finish_reason' must be \"eos\" or \"length\", got ", shown(r.finish_reason));
    return r;
}

}  // namespace

CandidateFile parse_candidates(std::string_view bytes, std::string_view where) {
    const std::string file(where);
    const json j = parse_json(bytes, where);
    check_fields(j, {"format", "checkpoint_sha256", "pairs"}, {"source", "skipped_identical"}, file);
    const json& format = j["format"];
    if (!format.is_number_integer() || format.get<int64_t>() != 1)
        fail(file, ": field 'format' must be 1 (candidate file format 1), got ", format.dump());
    CandidateFile c;
    c.checkpoint_sha256 = json_string(j, "checkpoint_sha256", file);
    if (!is_sha256_hex(c.checkpoint_sha256))
        fail(file, ": field 'checkpoint_sha256' must be 64 lowercase hex digits, got ", shown(c.checkpoint_sha256));
    if (j.contains("source")) {
        if (!j["source"].is_object()) fail(file, ": field 'source' must be an object, got ", j["source"].type_name());
        c.source = j["source"];
    }
    if (j.contains("skipped_identical")) {
        c.skipped_identical = json_int(j, "skipped_identical", file);
        if (c.skipped_identical < 0) fail(file, ": field 'skipped_identical' must be >= 0, got ", c.skipped_identical);
    }
    const json& pairs = j["pairs"];
    if (!pairs.is_array()) fail(file, ": field 'pairs' must be an array, got ", pairs.type_name());
    if (pairs.empty()) fail(file, ": field 'pairs' is empty; a candidate file needs at least one pair");
    for (size_t i = 0; i < pairs.size(); ++i) {
        const std::string at = file + ": pairs[" + std::to_string(i) + "]";
        const json& p = pairs[i];
        check_fields(p, {"id", "split", "prompt_id", "prompt", "a", "b"}, {}, at);
        CandidatePair pair;
        pair.id = nonempty_string(p, "id", at);
        check_printable_text(pair.id, "id", at, kMaxIdBytes);  // shown on the voting page
        pair.split = json_string(p, "split", at);
        if (pair.split != "train" && pair.split != "validation" && pair.split != "test")
            fail(at, ": field 'split' must be train, validation or test, got ", shown(pair.split));
        pair.prompt_id = nonempty_string(p, "prompt_id", at);
        check_printable_text(pair.prompt_id, "prompt_id", at, kMaxIdBytes);
        pair.prompt = nonempty_string(p, "prompt", at);
        pair.a = parse_response(p["a"], at + ".a");
        pair.b = parse_response(p["b"], at + ".b");
        if (!c.index.emplace(pair.id, c.pairs.size()).second)
            fail(at, ": pair id '", pair.id, "' appears twice (ids must be unique)");
        c.pairs.push_back(std::move(pair));
    }
    return c;
}

ordered_json candidates_to_json(const CandidateFile& c) {
    auto response = [](const CandidateResponse& r) {
        ordered_json o;
        o["text"] = r.text;
        o["token_ids"] = r.token_ids;
        o["finish_reason"] = r.finish_reason;
        return o;
    };
    ordered_json out;
    out["format"] = 1;
    out["checkpoint_sha256"] = c.checkpoint_sha256;
    out["source"] = ordered_json(c.source);
    out["skipped_identical"] = c.skipped_identical;
    ordered_json pairs = ordered_json::array();
    for (const CandidatePair& p : c.pairs) {
        ordered_json o;
        o["id"] = p.id;
        o["split"] = p.split;
        o["prompt_id"] = p.prompt_id;
        o["prompt"] = p.prompt;
        o["a"] = response(p.a);
        o["b"] = response(p.b);
        pairs.push_back(std::move(o));
    }
    out["pairs"] = std::move(pairs);
    return out;
}

std::vector<std::string> assign_feedback_splits(int64_t n, uint64_t seed, double train_fraction,
                                                double validation_fraction) {
    if (n < 0) fail("feedback splits: pair count must be >= 0, got ", n);
    if (!(train_fraction >= 0 && validation_fraction >= 0 && train_fraction + validation_fraction <= 1))
        fail("feedback splits: train_fraction ", train_fraction, " and validation_fraction ", validation_fraction,
             " must be in [0, 1] with a sum <= 1");
    const int64_t n_train = static_cast<int64_t>(std::llround(static_cast<double>(n) * train_fraction));
    const int64_t n_validation = std::min<int64_t>(
        n - n_train, static_cast<int64_t>(std::llround(static_cast<double>(n) * validation_fraction)));
    Philox rng(seed, 5);
    const std::vector<int64_t> order = rng.permutation(n);
    std::vector<std::string> split(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k)
        split[static_cast<size_t>(order[static_cast<size_t>(k)])] = k < n_train                  ? "train"
                                                                    : k < n_train + n_validation ? "validation"
                                                                                                 : "test";
    return split;
}

}  // namespace ppolab
