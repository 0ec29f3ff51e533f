// tokenizer.h — Hugging Face byte-level BPE tokenizers (tokenizer.json):
// added/special tokens, NFC normaliser, the Qwen2 (or Llama 3 / GPT-2)
// split regex, byte-level BPE, and the ByteLevel decoder.
//
// encode() follows the tokenizers library step by step: added tokens are
// found first (leftmost-longest; those with normalized=false in the raw
// text, the others after NFC), every other span is NFC-normalised, split by
// the pre-tokenizer regex, spelled with GPT-2's byte-to-unicode map and
// merged by BPE rank. No BOS/EOS is added (Qwen2 adds none).
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenize.h"

namespace ppolab {

namespace fs = std::filesystem;

// A generated response as the study shows it (ResponseText::text).
struct ResponseText {
    std::string text;
    bool decodable = false;  // the ids are tokens and their bytes valid UTF-8
};

struct AddedToken {
    int32_t id = -1;
    std::string content;
    bool special = false;
    bool normalized = false;  // matched after NFC instead of in the raw text
};

// Added tokens matched in one pass, with the first bytes they can start with.
struct AddedTokenSet {
    std::vector<int32_t> tokens;  // indices into Tokenizer::added_tokens()
    std::array<bool, 256> first_byte{};
};

class Tokenizer {
public:
    // `path` is a tokenizer.json file or a folder holding one.
    static Tokenizer from_file(const fs::path& path);
    // Parses tokenizer.json text; `where` names it in errors.
    static Tokenizer from_json_text(std::string_view text, std::string_view where);

    // Error if the text is not valid UTF-8.
    std::vector<int32_t> encode(std::string_view text) const;
    // Bytes of the tokens, invalid UTF-8 replaced by U+FFFD as Hugging Face
    // does; ids that are not tokens are skipped, special tokens are kept
    // unless skip_special.
    std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
    // nullopt when an id is not a token or the bytes are not valid UTF-8.
    std::optional<std::string> decode_strict(std::span<const int32_t> ids) const;
    // A generated response: the final `eos_id` dropped when generation ended
    // on it, then the strict decoding, or the lossy one when that fails.
    ResponseText decode_response(std::span<const int32_t> ids, bool ended_on_eos, int32_t eos_id) const;

    std::string token_bytes(int32_t id) const;          // raw bytes of one token ("" if none)
    int32_t token_to_id(std::string_view token) const;  // byte-level spelling or added content; -1 if absent
    int64_t vocab_size() const { return static_cast<int64_t>(pieces_.size()); }  // max id + 1
    bool is_special(int32_t id) const;
    bool is_token(int32_t id) const { return id >= 0 && id < vocab_size() && has_[id]; }
    const std::vector<AddedToken>& added_tokens() const { return added_; }
    std::string sha256() const { return sha256_; }  // of the tokenizer.json bytes
    SplitPattern split_pattern() const { return pattern_; }

private:
    Tokenizer() = default;
    // Appends the ids of a span that holds no added token.
    void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
    void encode_word(std::string_view bytes, std::vector<int32_t>& out) const;

    struct Merge {
        int32_t rank;
        int32_t new_id;
    };
    static uint64_t pair_key(int32_t a, int32_t b) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
    }

    struct StringHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;
    StringMap vocab_;                             // byte-level spelling -> id (model)
    StringMap added_ids_;                         // content -> id
    std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank, merged id
    std::vector<AddedToken> added_;
    AddedTokenSet raw_added_;              // normalized=false: matched in the raw text
    AddedTokenSet normalized_added_;       // normalized=true: matched after NFC
    std::vector<std::string> pieces_;      // (vocab_size) raw bytes of each id
    std::vector<uint8_t> has_;             // (vocab_size) 1 where the id is a token
    std::vector<uint8_t> special_;         // (vocab_size)
    std::array<int32_t, 256> byte_ids_{};  // id of each single byte, -1 if absent
    int32_t unk_id_ = -1;
    bool nfc_ = false;
    bool ignore_merges_ = false;
    SplitPattern pattern_ = SplitPattern::split_qwen2;
    std::string sha256_;
};

}  // namespace ppolab
