#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <queue>
#include <utility>

#include "tokenizer/tokenizer_json.h"
#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/sha256.h"

namespace ppolab {

namespace {

// Ids beyond this are refused: they would only allocate tables for nothing.
constexpr int64_t kMaxTokenId = 1 << 22;

std::string type_of(const json& obj, std::string_view field, std::string_view where) {
    if (!obj.is_object()) fail(where, ": field '", field, "' must be an object, got ", obj.type_name());
    auto it = obj.find("type");
    if (it == obj.end() || !it->is_string()) fail(where, ": field '", field, ".type' must be a string");
    return it->get<std::string>();
}

// Optional boolean that, when present, must equal `want` (features we do not implement).
void require_bool(const json& obj, std::string_view key, bool want, std::string_view field, std::string_view where) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return;
    if (!it->is_boolean()) fail(where, ": field '", field, ".", key, "' must be true or false, got ", it->type_name());
    if (it->get<bool>() != want)
        fail(where, ": field '", field, ".", key, "' is ", it->get<bool>() ? "true" : "false", "; only ",
             want ? "true" : "false", " is supported");
}

bool parse_normalizer(const json& n, std::string_view where) {
    if (n.is_null()) return false;
    std::string type = type_of(n, "normalizer", where);
    if (type == "NFC") return true;
    if (type == "Sequence") {
        const json& list = json_field(n, "normalizers", where);
        if (!list.is_array()) fail(where, ": field 'normalizer.normalizers' must be an array");
        bool nfc = false;
        for (const json& item : list) {
            if (type_of(item, "normalizer.normalizers[]", where) != "NFC")
                fail(where, ": field 'normalizer.normalizers[].type' must be \"NFC\", got \"",
                     type_of(item, "normalizer.normalizers[]", where), "\"");
            nfc = true;
        }
        return nfc;
    }
    fail(where, ": field 'normalizer.type' must be \"NFC\" (or null), got \"", type, "\"");
}

void check_byte_level(const json& b, std::string_view field, bool want_regex, std::string_view where) {
    require_bool(b, "add_prefix_space", false, field, where);
    require_bool(b, "use_regex", want_regex, field, where);
}

SplitPattern parse_split(const json& s, std::string_view where) {
    const json& pattern = json_field(s, "pattern", where);
    if (!pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string())
        fail(where, ": field 'pre_tokenizer.pretokenizers[0].pattern' must be {\"Regex\": \"...\"}");
    std::string regex = pattern["Regex"].get<std::string>();
    auto known = split_pattern_from_regex(regex);
    if (!known)
        fail(where,
             ": field 'pre_tokenizer.pretokenizers[0].pattern.Regex' is a regex ppolab does not "
             "implement: \"",
             regex, "\"; expected the Qwen2, Llama 3 or GPT-2 split pattern");
    std::string behavior = json_string(s, "behavior", where);
    if (behavior != "Isolated")
        fail(where, ": field 'pre_tokenizer.pretokenizers[0].behavior' must be \"Isolated\", got \"", behavior, "\"");
    require_bool(s, "invert", false, "pre_tokenizer.pretokenizers[0]", where);
    return *known;
}

SplitPattern parse_pre_tokenizer(const json& p, std::string_view where) {
    if (p.is_null()) fail(where, ": field 'pre_tokenizer' is null; expected a byte-level pre-tokenizer");
    std::string type = type_of(p, "pre_tokenizer", where);
    if (type == "ByteLevel") {
        check_byte_level(p, "pre_tokenizer", true, where);
        return SplitPattern::split_gpt2;
    }
    if (type != "Sequence")
        fail(where, ": field 'pre_tokenizer.type' must be \"Sequence\" or \"ByteLevel\", got \"", type, "\"");
    const json& list = json_field(p, "pretokenizers", where);
    if (!list.is_array() || list.size() != 2)
        fail(where, ": field 'pre_tokenizer.pretokenizers' must be [Split, ByteLevel]");
    std::string t0 = type_of(list[0], "pre_tokenizer.pretokenizers[0]", where);
    if (t0 != "Split") fail(where, ": field 'pre_tokenizer.pretokenizers[0].type' must be \"Split\", got \"", t0, "\"");
    std::string t1 = type_of(list[1], "pre_tokenizer.pretokenizers[1]", where);
    if (t1 != "ByteLevel")
        fail(where, ": field 'pre_tokenizer.pretokenizers[1].type' must be \"ByteLevel\", got \"", t1, "\"");
    check_byte_level(list[1], "pre_tokenizer.pretokenizers[1]", false, where);
    return parse_split(list[0], where);
}

}  // namespace

Tokenizer Tokenizer::from_file(const fs::path& path) {
    fs::path file = path;
    std::error_code ec;
    if (fs::is_directory(path, ec)) file = path / "tokenizer.json";
    if (!fs::exists(file, ec)) fail(file.string(), ": no such tokenizer file");
    return from_json_text(read_input_file(file, InputKind::tokenizer), file.string());
}

Tokenizer Tokenizer::from_json_text(std::string_view text, std::string_view where) {
    Tokenizer t;
    t.sha256_ = sha256_hex(text);
    TokenizerJson file = read_tokenizer_json(text, where);
    const json& root = file.root;
    if (!root.is_object()) fail(where, ": expected a JSON object at the top, got ", root.type_name());

    for (const char* unsupported : {"truncation", "padding"}) {
        auto it = root.find(unsupported);
        if (it != root.end() && !it->is_null())
            fail(where, ": field '", unsupported, "' must be null; ppolab pads and truncates itself");
    }
    t.nfc_ = parse_normalizer(root.value("normalizer", json()), where);
    t.pattern_ = parse_pre_tokenizer(root.value("pre_tokenizer", json()), where);
    {
        const json& post = root.value("post_processor", json());
        if (!post.is_null()) {
            std::string type = type_of(post, "post_processor", where);
            if (type != "ByteLevel")
                fail(where, ": field 'post_processor.type' must be \"ByteLevel\" (or null), got \"", type,
                     "\"; ppolab adds no BOS/EOS by template");
        }
        const json& dec = json_field(root, "decoder", where);
        if (dec.is_null()) fail(where, ": field 'decoder' is null; expected {\"type\": \"ByteLevel\"}");
        std::string type = type_of(dec, "decoder", where);
        if (type != "ByteLevel") fail(where, ": field 'decoder.type' must be \"ByteLevel\", got \"", type, "\"");
    }

    // --- model ---
    const json& model = json_field(root, "model", where);
    std::string type = type_of(model, "model", where);
    if (type != "BPE") fail(where, ": field 'model.type' must be \"BPE\", got \"", type, "\"");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        auto it = model.find(key);
        if (it != model.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
            fail(where, ": field 'model.", key, "' must be empty or null; got ", it->dump());
    }
    if (auto it = model.find("dropout"); it != model.end() && !it->is_null())
        fail(where, ": field 'model.dropout' must be null (BPE dropout is not supported), got ", it->dump());
    require_bool(model, "byte_fallback", false, "model", where);
    if (auto it = model.find("ignore_merges"); it != model.end() && it->is_boolean())
        t.ignore_merges_ = it->get<bool>();

    const json& vocab = json_field(model, "vocab", where);
    if (!file.has_vocab_object) fail(where, ": field 'model.vocab' must be an object, got ", vocab.type_name());
    int64_t max_id = -1;
    t.vocab_.reserve(file.vocab.size());
    for (auto& [token, id] : file.vocab) {
        if (id < 0 || id >= kMaxTokenId)
            fail(where, ": field 'model.vocab' entry \"", token, "\" has id ", id, "; expected 0..", kMaxTokenId - 1);
        if (!t.vocab_.try_emplace(std::move(token), static_cast<int32_t>(id)).second)
            fail(where, ": field 'model.vocab' has the token \"", token, "\" twice");
        max_id = std::max(max_id, id);
    }
    file.vocab.clear();

    const json& added = root.value("added_tokens", json::array());
    if (!added.is_array()) fail(where, ": field 'added_tokens' must be an array, got ", added.type_name());
    int64_t max_added = -1;
    for (size_t i = 0; i < added.size(); ++i) {
        std::string field = "added_tokens[" + std::to_string(i) + "]";
        const json& a = added[i];
        if (!a.is_object()) fail(where, ": field '", field, "' must be an object");
        AddedToken tok;
        int64_t id = json_int(a, "id", where);
        if (id < 0 || id >= kMaxTokenId)
            fail(where, ": field '", field, ".id' is ", id, "; expected 0..", kMaxTokenId - 1);
        tok.id = static_cast<int32_t>(id);
        tok.content = json_string(a, "content", where);
        if (tok.content.empty()) fail(where, ": field '", field, ".content' is empty");
        if (!utf8_is_valid(tok.content)) fail(where, ": field '", field, ".content' is not valid UTF-8");
        // The tokenizers library ignores the id written here: a token of
        // model.vocab keeps its id, any other gets the next one after the
        // vocab and the added tokens so far. A file that says otherwise would
        // load with other ids there, so it is refused.
        const int64_t entries = static_cast<int64_t>(t.vocab_.size());
        int64_t expected = max_added < entries ? entries : max_added + 1;
        if (auto v = t.vocab_.find(tok.content); v != t.vocab_.end()) expected = v->second;
        if (id != expected)
            fail(where, ": field '", field, ".id' is ", id, " for \"", tok.content,
                 "\"; the tokenizers library gives it id ", expected,
                 " (its model.vocab id, or the next id after model.vocab and the added tokens before it)");
        max_added = std::max(max_added, id);
        tok.special = a.contains("special") ? json_bool(a, "special", where) : false;
        tok.normalized = a.contains("normalized") ? json_bool(a, "normalized", where) : !tok.special;
        for (const char* key : {"single_word", "lstrip", "rstrip"}) require_bool(a, key, false, field, where);
        if (tok.normalized && t.nfc_) tok.content = nfc_normalize(tok.content);
        if (!t.added_ids_.emplace(tok.content, tok.id).second)
            fail(where, ": field '", field, ".content' \"", tok.content, "\" appears twice in added_tokens");
        max_id = std::max(max_id, id);
        t.added_.push_back(std::move(tok));
    }
    if (max_id < 0) fail(where, ": the tokenizer has no tokens (field 'model.vocab' is empty)");
    for (int32_t k = 0; k < static_cast<int32_t>(t.added_.size()); ++k) {
        AddedTokenSet& set = t.added_[k].normalized ? t.normalized_added_ : t.raw_added_;
        set.tokens.push_back(k);
        set.first_byte[static_cast<unsigned char>(t.added_[k].content[0])] = true;
    }

    // --- id tables ---
    size_t n = static_cast<size_t>(max_id + 1);
    t.pieces_.assign(n, std::string());
    t.has_.assign(n, 0);
    t.special_.assign(n, 0);
    std::vector<const std::string*> spelled(n, nullptr);
    for (const auto& [token, id] : t.vocab_) {
        if (t.has_[id]) fail(where, ": field 'model.vocab' gives id ", id, " to two tokens");
        t.has_[id] = 1;
        spelled[id] = &token;
        // The ByteLevel decoder: mapped chars back to bytes, else the token's own bytes.
        auto bytes = byte_level_to_bytes(token);
        t.pieces_[id] = bytes ? *bytes : token;
    }
    for (const AddedToken& a : t.added_) {
        // Hugging Face runs added tokens through the same decoder.
        auto bytes = byte_level_to_bytes(a.content);
        if (t.has_[a.id] && (!spelled[a.id] || *spelled[a.id] != a.content))
            fail(where, ": added token \"", a.content, "\" has id ", a.id, ", which is already another token");
        t.has_[a.id] = 1;
        t.pieces_[a.id] = bytes ? *bytes : a.content;
        t.special_[a.id] = a.special ? 1 : 0;
    }
    t.byte_ids_.fill(-1);
    const auto& b2u = byte_to_unicode();
    for (int b = 0; b < 256; ++b) {
        std::string ch;
        utf8_append(ch, b2u[b]);
        auto it = t.vocab_.find(ch);
        if (it != t.vocab_.end()) t.byte_ids_[b] = it->second;
    }
    if (auto it = model.find("unk_token"); it != model.end() && !it->is_null()) {
        if (!it->is_string()) fail(where, ": field 'model.unk_token' must be a string or null");
        auto v = t.vocab_.find(it->get<std::string>());
        if (v == t.vocab_.end())
            fail(where, ": field 'model.unk_token' \"", it->get<std::string>(), "\" is not in model.vocab");
        t.unk_id_ = v->second;
    }

    // --- merges: "a b" strings or [a, b] pairs ---
    const json& merges = json_field(model, "merges", where);
    if (!file.has_merges_array) fail(where, ": field 'model.merges' must be an array, got ", merges.type_name());
    t.merges_.reserve(file.merges.size());
    std::string joined;
    for (size_t i = 0; i < file.merges.size(); ++i) {
        const std::string& a = file.merges[i].first;
        const std::string& b = file.merges[i].second;
        joined.assign(a).append(b);
        auto ia = t.vocab_.find(a), ib = t.vocab_.find(b), inew = t.vocab_.find(joined);
        if (ia == t.vocab_.end() || ib == t.vocab_.end() || inew == t.vocab_.end()) {
            const std::string& missing = ia == t.vocab_.end() ? a : ib == t.vocab_.end() ? b : joined;
            fail(where, ": field 'model.merges[", i, "]' uses token \"", missing, "\", which is not in model.vocab");
        }
        // The first occurrence of a pair keeps its rank, as in Hugging Face.
        t.merges_.emplace(pair_key(ia->second, ib->second), Merge{static_cast<int32_t>(i), inew->second});
    }
    return t;
}

bool Tokenizer::is_special(int32_t id) const { return id >= 0 && id < vocab_size() && special_[id]; }

std::string Tokenizer::token_bytes(int32_t id) const { return is_token(id) ? pieces_[id] : std::string(); }

int32_t Tokenizer::token_to_id(std::string_view token) const {
    if (auto it = added_ids_.find(token); it != added_ids_.end()) return it->second;
    if (auto it = vocab_.find(token); it != vocab_.end()) return it->second;
    return -1;
}

namespace {

// Leftmost-longest search of added tokens in text; calls plain(span) for the
// text between matches and token(id) for each match.
template <typename Plain, typename Token>
void split_on_added(std::string_view text, const AddedTokenSet& set, const std::vector<AddedToken>& added,
                    Plain&& plain, Token&& token) {
    size_t start = 0, pos = 0;
    while (pos < text.size()) {
        const AddedToken* best = nullptr;
        if (set.first_byte[static_cast<unsigned char>(text[pos])])
            for (int32_t k : set.tokens) {
                const AddedToken& a = added[k];
                if (text.compare(pos, a.content.size(), a.content) == 0 &&
                    (!best || a.content.size() > best->content.size()))
                    best = &a;
            }
        if (!best) {
            ++pos;
            continue;
        }
        if (pos > start) plain(text.substr(start, pos - start));
        token(best->id);
        pos += best->content.size();
        start = pos;
    }
    if (start < text.size()) plain(text.substr(start));
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
    if (size_t bad = utf8_invalid_offset(text); bad != std::string_view::npos)
        fail("tokenizer input: text is not valid UTF-8 (invalid byte sequence at byte ", bad, ")");
    std::vector<int32_t> out;
    auto emit = [&](int32_t id) { out.push_back(id); };
    split_on_added(
        text, raw_added_, added_,
        [&](std::string_view span) {
            std::string norm = nfc_ ? nfc_normalize(span) : std::string(span);
            split_on_added(
                norm, normalized_added_, added_, [&](std::string_view rest) { encode_plain(rest, out); }, emit);
        },
        emit);
    return out;
}

void Tokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
    for (std::string_view word : pretokenize(text, pattern_)) encode_word(word, out);
}

// Byte-level BPE of one pre-token: start from single bytes and apply the
// lowest-ranked merge first (leftmost on ties) until none applies; a
// linked list of symbols and a heap of candidate merges, as Hugging Face does.
void Tokenizer::encode_word(std::string_view bytes, std::vector<int32_t>& out) const {
    if (ignore_merges_) {
        if (auto it = vocab_.find(std::string_view(bytes_to_byte_level(bytes))); it != vocab_.end()) {
            out.push_back(it->second);
            return;
        }
    }
    struct Symbol {
        int32_t id;
        int32_t prev, next;  // -1 at the ends
        bool alive;
    };
    std::vector<Symbol> sym;  // (n)
    sym.reserve(bytes.size());
    for (char ch : bytes) {
        int32_t id = byte_ids_[static_cast<unsigned char>(ch)];
        if (id < 0) id = unk_id_;
        if (id < 0) continue;  // no token for this byte and no unk: dropped, as Hugging Face does
        int32_t k = static_cast<int32_t>(sym.size());
        sym.push_back({id, k - 1, -1, true});
        if (k > 0) sym[k - 1].next = k;
    }
    struct Candidate {
        int32_t rank, pos, new_id;
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
    auto consider = [&](int32_t left) {
        if (left < 0 || sym[left].next < 0) return;
        auto it = merges_.find(pair_key(sym[left].id, sym[sym[left].next].id));
        if (it != merges_.end()) heap.push({it->second.rank, left, it->second.new_id});
    };
    for (int32_t k = 0; k + 1 < static_cast<int32_t>(sym.size()); ++k) consider(k);
    while (!heap.empty()) {
        Candidate c = heap.top();
        heap.pop();
        Symbol& left = sym[c.pos];
        if (!left.alive || left.next < 0) continue;
        auto it = merges_.find(pair_key(left.id, sym[left.next].id));
        if (it == merges_.end() || it->second.rank != c.rank) continue;  // stale candidate
        Symbol& right = sym[left.next];
        left.id = c.new_id;
        right.alive = false;
        left.next = right.next;
        if (right.next >= 0) sym[right.next].prev = c.pos;
        consider(left.prev);
        consider(c.pos);
    }
    for (const Symbol& s : sym)
        if (s.alive) out.push_back(s.id);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
    std::string bytes;
    for (int32_t id : ids)
        if (is_token(id) && !(skip_special && special_[id])) bytes += pieces_[id];
    return utf8_lossy(bytes);
}

std::optional<std::string> Tokenizer::decode_strict(std::span<const int32_t> ids) const {
    std::string bytes;
    for (int32_t id : ids) {
        if (!is_token(id)) return std::nullopt;
        bytes += pieces_[id];
    }
    if (!utf8_is_valid(bytes)) return std::nullopt;
    return bytes;
}

ResponseText Tokenizer::decode_response(std::span<const int32_t> ids, bool ended_on_eos, int32_t eos_id) const {
    if (ended_on_eos && !ids.empty() && ids.back() == eos_id) ids = ids.first(ids.size() - 1);
    std::optional<std::string> strict = decode_strict(ids);
    if (strict) return {std::move(*strict), true};
    return {decode(ids), false};
}

}  // namespace ppolab
