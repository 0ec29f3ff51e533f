#include "tokenizer/bpe_train.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "tokenizer/pretokenize.h"
#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/json.h"

namespace ppolab {

namespace {

uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}
int32_t pair_left(uint64_t k) { return static_cast<int32_t>(k >> 32); }
int32_t pair_right(uint64_t k) { return static_cast<int32_t>(k & 0xFFFFFFFFu); }

// Counts the pre-tokens of every text (special tokens cut out first).
std::map<std::string, int64_t> count_words(const std::vector<std::string>& texts,
                                           const std::vector<std::string>& specials) {
    std::unordered_map<std::string, int64_t> counts;
    auto count_span = [&](std::string_view span) {
        std::string norm = nfc_normalize(span);
        for (std::string_view w : pretokenize(norm, SplitPattern::split_qwen2)) ++counts[std::string(w)];
    };
    for (size_t t = 0; t < texts.size(); ++t) {
        std::string_view text = texts[t];
        if (size_t bad = utf8_invalid_offset(text); bad != std::string_view::npos)
            fail("BPE training text ", t, ": not valid UTF-8 (invalid byte sequence at byte ", bad, ")");
        size_t start = 0, pos = 0;
        while (pos < text.size()) {
            size_t len = 0;
            for (const std::string& s : specials)
                if (text.compare(pos, s.size(), s) == 0) len = std::max(len, s.size());
            if (len == 0) {
                ++pos;
                continue;
            }
            if (pos > start) count_span(text.substr(start, pos - start));
            pos += len;
            start = pos;
        }
        if (start < text.size()) count_span(text.substr(start));
    }
    return std::map<std::string, int64_t>(counts.begin(), counts.end());
}

std::string json_quote(std::string_view s) { return json(std::string(s)).dump(); }

}  // namespace

std::string train_bpe_tokenizer_json(const std::vector<std::string>& texts, int64_t vocab_size,
                                     const std::vector<std::string>& special_tokens, BpeTrainStats* stats) {
    const int64_t n_special = static_cast<int64_t>(special_tokens.size());
    if (vocab_size < 256 + n_special)
        fail("BPE training: vocab_size ", vocab_size, " is too small; expected at least 256 byte tokens + ", n_special,
             " special tokens = ", 256 + n_special);
    std::unordered_set<std::string> seen_special;
    for (const std::string& s : special_tokens) {
        if (s.empty() || !utf8_is_valid(s)) fail("BPE training: special token \"", s, "\" is empty or not UTF-8");
        if (!seen_special.insert(s).second) fail("BPE training: special token \"", s, "\" is given twice");
    }

    // Token table: id -> byte-level spelling. Ids 0..255 are the bytes.
    std::vector<std::string> spelled;
    std::unordered_map<std::string, int32_t> ids;
    for (int b = 0; b < 256; ++b) {
        std::string s = bytes_to_byte_level(std::string(1, static_cast<char>(b)));
        ids.emplace(s, b);
        spelled.push_back(std::move(s));
    }

    // Words as symbol sequences with their frequencies, in sorted order.
    std::map<std::string, int64_t> counted = count_words(texts, special_tokens);
    std::vector<std::vector<int32_t>> words;  // (W) symbols
    std::vector<int64_t> freq;                // (W)
    int64_t total = 0;
    for (const auto& [word, n] : counted) {
        std::vector<int32_t> sym;
        for (char ch : word) sym.push_back(static_cast<unsigned char>(ch));
        words.push_back(std::move(sym));
        freq.push_back(n);
        total += n;
    }

    // Pair counts and, per pair, the words it may occur in.
    std::unordered_map<uint64_t, int64_t> pair_count;
    std::unordered_map<uint64_t, std::vector<int32_t>> pair_words;
    auto add_word_pairs = [&](int32_t w, int64_t sign) {
        const auto& s = words[w];
        for (size_t i = 0; i + 1 < s.size(); ++i) {
            uint64_t k = pair_key(s[i], s[i + 1]);
            int64_t& c = pair_count[k];
            c += sign * freq[w];
            if (c == 0) pair_count.erase(k);
            if (sign > 0) pair_words[k].push_back(w);
        }
    };
    for (int32_t w = 0; w < static_cast<int32_t>(words.size()); ++w) add_word_pairs(w, +1);

    std::vector<std::pair<int32_t, int32_t>> merges;
    const int64_t target_tokens = vocab_size - n_special;
    std::vector<int32_t> stamp(words.size(), -1);  // last merge that rewrote each word
    while (static_cast<int64_t>(spelled.size()) < target_tokens) {
        // 1. the most frequent pair; ties to the smaller spelling
        uint64_t best = 0;
        int64_t best_count = 0;
        for (const auto& [k, c] : pair_count) {
            if (c < best_count) continue;
            if (c == best_count) {
                const std::string &la = spelled[pair_left(k)], &lb = spelled[pair_left(best)];
                if (la != lb ? la > lb : spelled[pair_right(k)] >= spelled[pair_right(best)]) continue;
            }
            best = k;
            best_count = c;
        }
        if (best_count < 2) break;
        int32_t a = pair_left(best), b = pair_right(best);
        // 2. the merged token (its spelling may already exist by another path)
        std::string merged = spelled[a] + spelled[b];
        int32_t new_id;
        if (auto it = ids.find(merged); it != ids.end()) {
            new_id = it->second;
        } else {
            new_id = static_cast<int32_t>(spelled.size());
            ids.emplace(merged, new_id);
            spelled.push_back(merged);
        }
        int32_t merge_index = static_cast<int32_t>(merges.size());
        merges.emplace_back(a, b);
        // 3. rewrite the words that hold the pair, left to right
        std::vector<int32_t> holders = std::move(pair_words[best]);
        pair_words.erase(best);
        for (int32_t w : holders) {
            if (stamp[w] == merge_index) continue;
            stamp[w] = merge_index;
            auto& s = words[w];
            bool found = false;
            for (size_t i = 0; i + 1 < s.size() && !found; ++i) found = s[i] == a && s[i + 1] == b;
            if (!found) continue;
            add_word_pairs(w, -1);
            std::vector<int32_t> next;
            next.reserve(s.size());
            for (size_t i = 0; i < s.size(); ++i) {
                if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
                    next.push_back(new_id);
                    ++i;
                } else {
                    next.push_back(s[i]);
                }
            }
            s = std::move(next);
            add_word_pairs(w, +1);
        }
    }

    if (stats) {
        stats->words = total;
        stats->unique_words = static_cast<int64_t>(words.size());
        stats->merges = static_cast<int64_t>(merges.size());
        stats->vocab_size = static_cast<int64_t>(spelled.size()) + n_special;
    }

    // The file, written by hand so that its bytes depend on nothing but the inputs.
    const int32_t first_special = static_cast<int32_t>(spelled.size());
    std::string out;
    out += "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [";
    for (int64_t i = 0; i < n_special; ++i) {
        out += i ? ",\n" : "\n";
        out += "    {\"id\": " + std::to_string(first_special + i) + ", \"content\": " + json_quote(special_tokens[i]) +
               ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, "
               "\"special\": true}";
    }
    out += n_special ? "\n  ],\n" : "],\n";
    const std::string byte_level =
        "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false}";
    out += "  \"normalizer\": {\"type\": \"NFC\"},\n";
    out +=
        "  \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
        "{\"Regex\": " +
        json_quote(kQwen2SplitRegex) + "}, \"behavior\": \"Isolated\", \"invert\": false}, " + byte_level + "]},\n";
    out += "  \"post_processor\": " + byte_level + ",\n";
    out += "  \"decoder\": " + byte_level + ",\n";
    out +=
        "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
        "    \"continuing_subword_prefix\": \"\",\n    \"end_of_word_suffix\": \"\",\n"
        "    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n"
        "    \"vocab\": {";
    for (size_t id = 0; id < spelled.size(); ++id)
        out += (id ? ",\n      " : "\n      ") + json_quote(spelled[id]) + ": " + std::to_string(id);
    out += "\n    },\n    \"merges\": [";
    for (size_t i = 0; i < merges.size(); ++i)
        out += (i ? ",\n      " : "\n      ") + json_quote(spelled[merges[i].first] + " " + spelled[merges[i].second]);
    out += merges.empty() ? "]\n  }\n}\n" : "\n    ]\n  }\n}\n";
    return out;
}

}  // namespace ppolab
