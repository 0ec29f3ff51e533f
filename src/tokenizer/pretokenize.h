// pretokenize.h — the split regexes of byte-level BPE tokenizers, written as
// hand matchers over code points (as llama.cpp does), and GPT-2's
// byte-to-unicode map.
//
// Only the exact patterns below are implemented; split_pattern_from_regex
// refuses any other regex text so that a tokenizer.json we would split
// differently from Hugging Face is an error, not a silent mismatch.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ppolab {

enum class SplitPattern {
    split_qwen2,   // Qwen2 / Qwen2.5: \p{N} one digit at a time
    split_llama3,  // Llama 3: the same with \p{N}{1,3}
    split_gpt2,    // GPT-2 (ByteLevel use_regex=true)
};

// The regex texts as they appear in tokenizer.json.
extern const std::string_view kQwen2SplitRegex;
extern const std::string_view kLlama3SplitRegex;
extern const std::string_view kGpt2SplitRegex;

std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex);
std::string_view split_pattern_regex(SplitPattern pattern);

// Splits valid UTF-8 text into the matches of the pattern (behaviour
// "Isolated": every byte belongs to exactly one piece, in order). Error if
// the text is not valid UTF-8.
std::vector<std::string_view> pretokenize(std::string_view text, SplitPattern pattern);

// GPT-2's reversible map from bytes to printable code points ('Ġ' for ' ').
const std::array<char32_t, 256>& byte_to_unicode();
// Inverse map; -1 for code points that are not the image of a byte.
int byte_from_unicode(char32_t cp);
// The byte-level spelling of raw bytes (each byte as its UTF-8 mapped char).
std::string bytes_to_byte_level(std::string_view bytes);
// The raw bytes of a byte-level spelling; nullopt if a char is not mapped.
std::optional<std::string> byte_level_to_bytes(std::string_view spelled);

}  // namespace ppolab
