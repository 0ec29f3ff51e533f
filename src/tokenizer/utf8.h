// utf8.h — code points, UTF-8 validity, NFC and the character classes the
// pre-tokenizer regexes use (\p{L}, \p{N}, \s as Oniguruma defines them).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ppolab {

// Decodes valid UTF-8 into code points; Error names `where` and the byte
// offset of the first invalid sequence.
std::vector<char32_t> utf8_decode(std::string_view text, std::string_view where);
void utf8_append(std::string& out, char32_t cp);
std::string utf8_encode(const std::vector<char32_t>& cps);
// Byte offset of the first invalid UTF-8 sequence, or npos when valid.
size_t utf8_invalid_offset(std::string_view bytes);
inline bool utf8_is_valid(std::string_view bytes) { return utf8_invalid_offset(bytes) == std::string_view::npos; }
// Invalid sequences replaced by U+FFFD, one per maximal invalid subpart
// (the rule of Rust's String::from_utf8_lossy, which Hugging Face uses).
std::string utf8_lossy(std::string_view bytes);

// Unicode NFC of valid UTF-8 (utf8proc); ASCII passes through untouched.
std::string nfc_normalize(std::string_view text);

// Character classes of one code point.
bool cp_is_letter(char32_t cp);      // \p{L}: Lu Ll Lt Lm Lo
bool cp_is_number(char32_t cp);      // \p{N}: Nd Nl No
bool cp_is_whitespace(char32_t cp);  // \s: the Unicode White_Space property

}  // namespace ppolab
