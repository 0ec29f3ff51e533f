// Oracle: ids, decodes and chat renderings of the real Qwen2.5 tokenizer
// against fixtures written by the Hugging Face tokenizers library and jinja2
// (scripts/make_tokenizer_fixture.py).
#include <chrono>
#include <ctime>

#include "test_common.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/rng.h"
#include "util/sha256.h"

using namespace ppolab;
using namespace ppolab::test;

namespace {

const Tokenizer& qwen() {
    static const Tokenizer tok = [] {
        auto t0 = std::chrono::steady_clock::now();
        Tokenizer t = Tokenizer::from_file(qwen_dir());
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("[ measure  ] loading the Qwen2.5 tokenizer.json (7 MB): %.3f s\n", s);
        return t;
    }();
    return tok;
}

fs::path fixture(const char* name) { return source_dir() / "tests" / "fixtures" / "tokenizer" / name; }

}  // namespace

TEST(QwenTokenizer, Identity) {
    const Tokenizer& t = qwen();
    EXPECT_EQ(t.vocab_size(), 151665);
    EXPECT_EQ(t.token_to_id("<|im_end|>"), 151645);     // EOS
    EXPECT_EQ(t.token_to_id("<|endoftext|>"), 151643);  // PAD
    EXPECT_EQ(t.token_to_id("<|im_start|>"), 151644);
    EXPECT_TRUE(t.is_special(151645));
    EXPECT_FALSE(t.is_special(151657));  // <tool_call> is added but not special
    EXPECT_EQ(t.token_to_id("<tool_call>"), 151657);
    EXPECT_FALSE(t.is_special(9707));
    EXPECT_EQ(t.token_to_id("Hello"), 9707);
    EXPECT_EQ(t.token_to_id("Ġworld"), 1879);
    EXPECT_EQ(t.token_to_id("no such token"), -1);
    EXPECT_EQ(t.token_bytes(1879), " world");
    EXPECT_EQ(t.token_bytes(151645), "<|im_end|>");
    EXPECT_EQ(t.split_pattern(), SplitPattern::split_qwen2);
    EXPECT_EQ(t.sha256(), sha256_file(qwen_dir() / "tokenizer.json"));
    // The committed copy is the released file (models/qwen2.5-0.5b-instruct/README.md).
    EXPECT_EQ(t.sha256(), "a8506e7111b80c6d8635951a02eab0f4e1a8e4e5772da83846579e97b16f61bf");
}

TEST(QwenTokenizer, LoadsWellUnderASecond) {
    // CPU time of this process: the 2-core machine is shared, wall time is not ours alone.
    std::clock_t c0 = std::clock();
    auto t0 = std::chrono::steady_clock::now();
    Tokenizer t = Tokenizer::from_file(qwen_dir() / "tokenizer.json");
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    std::printf("[ measure  ] load: %.3f s CPU, %.3f s wall\n", cpu, wall);
    EXPECT_EQ(t.vocab_size(), 151665);
    EXPECT_LT(cpu, 0.6);
}

TEST(QwenTokenizer, IdsEqualReferenceOnWholeFixture) {
    const Tokenizer& t = qwen();
    auto rows = read_jsonl(fixture("qwen25_ids.jsonl"));
    ASSERT_GE(rows.size(), 300u);
    int mismatches = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
        std::string text = rows[i]["text"];
        auto want = rows[i]["ids"].get<std::vector<int32_t>>();
        auto got = t.encode(text);
        if (got != want && ++mismatches <= 10)
            ADD_FAILURE() << "line " << i + 1 << " text " << json(text).dump() << "\n  want " << json(want).dump()
                          << "\n  got  " << json(got).dump();
        // Our decode equals the library's, and round-trips modulo NFC.
        std::string decoded = t.decode(want);
        EXPECT_EQ(decoded, rows[i]["decoded"].get<std::string>()) << "line " << i + 1;
        EXPECT_EQ(decoded, nfc_normalize(text)) << "line " << i + 1;
        EXPECT_EQ(t.decode_strict(want), std::optional<std::string>(nfc_normalize(text))) << "line " << i + 1;
    }
    EXPECT_EQ(mismatches, 0) << "of " << rows.size() << " strings";
}

TEST(QwenTokenizer, LossyDecodeEqualsReference) {
    const Tokenizer& t = qwen();
    auto rows = read_jsonl(fixture("qwen25_decode.jsonl"));
    ASSERT_GE(rows.size(), 50u);
    int replaced = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
        auto ids = rows[i]["ids"].get<std::vector<int32_t>>();
        std::string want = rows[i]["decoded"];
        EXPECT_EQ(t.decode(ids), want) << "line " << i + 1 << " ids " << rows[i]["ids"].dump();
        bool lossy = want.find("\xEF\xBF\xBD") != std::string::npos;
        replaced += lossy;
        if (lossy) {
            EXPECT_FALSE(t.decode_strict(ids).has_value()) << "line " << i + 1;
        }
    }
    EXPECT_GT(replaced, 10);  // the fixture does exercise invalid UTF-8
}

TEST(QwenTokenizer, SpecialTokensAndStrictDecode) {
    const Tokenizer& t = qwen();
    EXPECT_EQ(t.encode("<|im_end|>"), (std::vector<int32_t>{151645}));
    EXPECT_EQ(t.encode("Hello world"), (std::vector<int32_t>{9707, 1879}));
    std::vector<int32_t> ids = t.encode("<|im_start|>user\nHi<|im_end|>");
    EXPECT_EQ(ids.front(), 151644);
    EXPECT_EQ(ids.back(), 151645);
    EXPECT_EQ(t.decode(ids, /*skip_special=*/true), "user\nHi");
    EXPECT_EQ(t.decode(ids), "<|im_start|>user\nHi<|im_end|>");
    // "é" is one token; its two bytes alone are not valid UTF-8.
    std::vector<int32_t> e = t.encode("é");
    ASSERT_EQ(e.size(), 1u);
    int32_t first_byte = t.token_to_id("Ã");  // byte 0xC3
    ASSERT_GE(first_byte, 0);
    EXPECT_EQ(t.token_bytes(first_byte), "\xC3");
    std::vector<int32_t> half{9707, first_byte};
    EXPECT_FALSE(t.decode_strict(half).has_value());
    EXPECT_EQ(t.decode(half), "Hello\xEF\xBF\xBD");
    std::vector<int32_t> out_of_range{9707, 151665};
    EXPECT_FALSE(t.decode_strict(out_of_range).has_value());
    EXPECT_EQ(t.decode(out_of_range), "Hello");
    std::vector<int32_t> negative{-1};
    EXPECT_FALSE(t.decode_strict(negative).has_value());
    EXPECT_EQ(t.decode_strict(std::vector<int32_t>{}), std::optional<std::string>(""));
    EXPECT_THROW(t.encode("bad \xC3 utf8"), Error);
}

TEST(QwenChat, RenderingEqualsJinjaTemplate) {
    auto rows = read_jsonl(fixture("qwen25_chat.jsonl"));
    ASSERT_GE(rows.size(), 10u);
    for (size_t i = 0; i < rows.size(); ++i) {
        std::vector<ChatMessage> messages;
        for (const json& m : rows[i]["messages"]) messages.push_back({m["role"], m["content"]});
        EXPECT_EQ(render_chat(messages, rows[i]["add_generation_prompt"].get<bool>()),
                  rows[i]["text"].get<std::string>())
            << "line " << i + 1;
    }
    // The template's source names the default system prompt we use.
    EXPECT_NE(read_file(qwen_dir() / "chat_template.jinja").find(std::string(kQwenDefaultSystem)), std::string::npos);
}

TEST(QwenTokenizer, RoundTripOnRandomCodePointsAndThroughput) {
    const Tokenizer& t = qwen();
    // Random strings over blocks that exercise NFC (combining marks, Hangul
    // jamo), whitespace kinds, digits, punctuation, CJK, emoji and specials.
    const std::vector<std::pair<char32_t, char32_t>> blocks{
        {0x20, 0x7E},     {0x09, 0x0D},     {0xA0, 0x17F},      {0x300, 0x36F},   {0x391, 0x3C9},
        {0x410, 0x44F},   {0x1100, 0x1112}, {0x1161, 0x1175},   {0x2000, 0x202F}, {0x3000, 0x3020},
        {0x4E00, 0x4E80}, {0xAC00, 0xAC40}, {0x1F600, 0x1F64F}, {0xFF01, 0xFF5E}};
    Philox rng(7, 0);
    size_t bytes = 0;
    double seconds = 0;
    for (int n = 0; n < 2000; ++n) {
        std::string s;
        for (uint64_t k = 0, len = 1 + rng.below(24); k < len; ++k) {
            if (rng.below(20) == 0) {
                s += "<|im_end|>";
                continue;
            }
            auto [lo, hi] = blocks[rng.below(blocks.size())];
            utf8_append(s, lo + static_cast<char32_t>(rng.below(hi - lo + 1)));
        }
        auto t0 = std::chrono::steady_clock::now();
        std::vector<int32_t> ids = t.encode(s);
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        bytes += s.size();
        ASSERT_EQ(t.decode(ids), nfc_normalize(s)) << json(s).dump();
    }
    std::printf("[ measure  ] encode: %.2f MB/s on random mixed-script text\n",
                static_cast<double>(bytes) / 1e6 / seconds);
}
