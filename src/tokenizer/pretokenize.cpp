#include "tokenizer/pretokenize.h"

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace ppolab {

const std::string_view kQwen2SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
    R"(\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string_view kLlama3SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
    R"(\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string_view kGpt2SplitRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex) {
    if (regex == kQwen2SplitRegex) return SplitPattern::split_qwen2;
    if (regex == kLlama3SplitRegex) return SplitPattern::split_llama3;
    if (regex == kGpt2SplitRegex) return SplitPattern::split_gpt2;
    return std::nullopt;
}

std::string_view split_pattern_regex(SplitPattern pattern) {
    switch (pattern) {
        case SplitPattern::split_qwen2: return kQwen2SplitRegex;
        case SplitPattern::split_llama3: return kLlama3SplitRegex;
        case SplitPattern::split_gpt2: return kGpt2SplitRegex;
    }
    PPOLAB_ASSERT(false);
}

namespace {

// The text as code points with their classes; positions past the end read
// as a sentinel that belongs to no class.
struct CodePoints {
    std::vector<char32_t> cps;
    std::vector<size_t> offsets;  // (n + 1) byte offset of each code point
    std::vector<uint8_t> flags;   // (n) kLetter | kNumber | kSpace

    static constexpr uint8_t kLetter = 1, kNumber = 2, kSpace = 4;
    static constexpr char32_t kEnd = 0xFFFFFFFF;

    size_t size() const { return cps.size(); }
    char32_t at(size_t i) const { return i < cps.size() ? cps[i] : kEnd; }
    bool letter(size_t i) const { return i < cps.size() && (flags[i] & kLetter); }
    bool number(size_t i) const { return i < cps.size() && (flags[i] & kNumber); }
    bool space(size_t i) const { return i < cps.size() && (flags[i] & kSpace); }
    // [^\s\p{L}\p{N}]
    bool other(size_t i) const { return i < cps.size() && flags[i] == 0; }
};

CodePoints classify(std::string_view text) {
    CodePoints c;
    c.cps = utf8_decode(text, "pre-tokenizer input");
    c.offsets.reserve(c.cps.size() + 1);
    c.flags.reserve(c.cps.size());
    size_t off = 0;
    for (char32_t cp : c.cps) {
        c.offsets.push_back(off);
        off += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        c.flags.push_back(static_cast<uint8_t>((cp_is_letter(cp) ? CodePoints::kLetter : 0) |
                                               (cp_is_number(cp) ? CodePoints::kNumber : 0) |
                                               (cp_is_whitespace(cp) ? CodePoints::kSpace : 0)));
    }
    c.offsets.push_back(off);
    return c;
}

// ASCII lower case; U+017F (long s) folds to 's' as Oniguruma's (?i) does.
char32_t fold(char32_t cp) {
    if (cp >= 'A' && cp <= 'Z') return cp + 32;
    if (cp == 0x17F) return 's';
    return cp;
}

// Length of a contraction ('s 't 're 've 'm 'll 'd) at pos, or 0.
size_t match_contraction(const CodePoints& c, size_t pos, bool ignore_case) {
    if (c.at(pos) != '\'') return 0;
    auto f = [&](size_t i) { return ignore_case ? fold(c.at(i)) : c.at(i); };
    char32_t a = f(pos + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    char32_t b = f(pos + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

// Whitespace alternatives shared by both families, at a whitespace pos:
// \s*[\r\n]+ (Qwen2/Llama3 only) | \s+(?!\S) | \s+
size_t match_whitespace(const CodePoints& c, size_t pos, bool newline_rule) {
    size_t end = pos;
    size_t last_newline = SIZE_MAX;
    while (c.space(end)) {
        if (c.at(end) == '\r' || c.at(end) == '\n') last_newline = end;
        ++end;
    }
    if (newline_rule && last_newline != SIZE_MAX) return last_newline + 1 - pos;
    size_t run = end - pos;
    if (end == c.size()) return run;  // (?!\S) holds at the end of text
    if (run >= 2) return run - 1;     // leave one space before the \S
    return run;                       // \s+
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t match_qwen2(const CodePoints& c, size_t pos, size_t max_digits) {
    if (size_t n = match_contraction(c, pos, true)) return n;
    char32_t cp = c.at(pos);
    bool newline = cp == '\r' || cp == '\n';
    if (c.letter(pos) || (!newline && !c.number(pos) && c.letter(pos + 1))) {
        size_t end = pos + 1;
        while (c.letter(end)) ++end;
        return end - pos;
    }
    if (c.number(pos)) {
        size_t end = pos + 1;
        while (end - pos < max_digits && c.number(end)) ++end;
        return end - pos;
    }
    size_t start = (cp == ' ' && c.other(pos + 1)) ? pos + 1 : pos;
    if (c.other(start)) {
        size_t end = start + 1;
        while (c.other(end)) ++end;
        while (c.at(end) == '\r' || c.at(end) == '\n') ++end;
        return end - pos;
    }
    PPOLAB_ASSERT(c.space(pos));
    return match_whitespace(c, pos, true);
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t match_gpt2(const CodePoints& c, size_t pos) {
    if (size_t n = match_contraction(c, pos, false)) return n;
    size_t start = (c.at(pos) == ' ' && !c.space(pos + 1) && pos + 1 < c.size()) ? pos + 1 : pos;
    auto run = [&](bool (CodePoints::*cls)(size_t) const) -> size_t {
        if (!(c.*cls)(start)) return 0;
        size_t end = start + 1;
        while ((c.*cls)(end)) ++end;
        return end - pos;
    };
    if (size_t n = run(&CodePoints::letter)) return n;
    if (size_t n = run(&CodePoints::number)) return n;
    if (size_t n = run(&CodePoints::other)) return n;
    PPOLAB_ASSERT(c.space(pos));
    return match_whitespace(c, pos, false);
}

}  // namespace

std::vector<std::string_view> pretokenize(std::string_view text, SplitPattern pattern) {
    CodePoints c = classify(text);
    std::vector<std::string_view> pieces;
    size_t pos = 0;
    while (pos < c.size()) {
        size_t n = 0;
        switch (pattern) {
            case SplitPattern::split_qwen2: n = match_qwen2(c, pos, 1); break;
            case SplitPattern::split_llama3: n = match_qwen2(c, pos, 3); break;
            case SplitPattern::split_gpt2: n = match_gpt2(c, pos); break;
        }
        PPOLAB_ASSERT(n >= 1 && pos + n <= c.size());
        pieces.push_back(text.substr(c.offsets[pos], c.offsets[pos + n] - c.offsets[pos]));
        pos += n;
    }
    return pieces;
}

const std::array<char32_t, 256>& byte_to_unicode() {
    static const std::array<char32_t, 256> table = [] {
        std::array<char32_t, 256> t{};
        char32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            t[b] = printable ? static_cast<char32_t>(b) : next++;
        }
        return t;
    }();
    return table;
}

int byte_from_unicode(char32_t cp) {
    static const std::array<int16_t, 324> inverse = [] {
        std::array<int16_t, 324> inv;
        inv.fill(-1);
        const auto& fwd = byte_to_unicode();
        for (int b = 0; b < 256; ++b) inv[fwd[b]] = static_cast<int16_t>(b);
        return inv;
    }();
    return cp < inverse.size() ? inverse[cp] : -1;
}

std::string bytes_to_byte_level(std::string_view bytes) {
    const auto& table = byte_to_unicode();
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char ch : bytes) utf8_append(out, table[static_cast<unsigned char>(ch)]);
    return out;
}

std::optional<std::string> byte_level_to_bytes(std::string_view spelled) {
    // Every mapped char is U+0021..U+0143: one or two UTF-8 bytes.
    std::string out;
    out.reserve(spelled.size());
    for (size_t i = 0; i < spelled.size();) {
        unsigned char c = static_cast<unsigned char>(spelled[i]);
        char32_t cp;
        if (c < 0x80) {
            cp = c;
            i += 1;
        } else if ((c & 0xE0) == 0xC0 && i + 1 < spelled.size() &&
                   (static_cast<unsigned char>(spelled[i + 1]) & 0xC0) == 0x80) {
            cp = (static_cast<char32_t>(c & 0x1F) << 6) | (static_cast<unsigned char>(spelled[i + 1]) & 0x3F);
            i += 2;
        } else {
            return std::nullopt;
        }
        int b = byte_from_unicode(cp);
        if (b < 0) return std::nullopt;
        out.push_back(static_cast<char>(b));
    }
    return out;
}

}  // namespace ppolab
