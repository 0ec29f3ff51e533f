// Unit tests of the tokenizer layer: UTF-8, the split regex matcher, BPE on
// hand-made vocabularies, tokenizer.json validation, chat rendering.
#include "test_common.h"
#include "tokenizer/bpe_train.h"
#include "tokenizer/chat.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

using namespace ppolab;
using namespace ppolab::test;

namespace {

std::vector<std::string> split(std::string_view text, SplitPattern p = SplitPattern::split_qwen2) {
    std::vector<std::string> out;
    for (auto piece : pretokenize(text, p)) out.emplace_back(piece);
    return out;
}
using Pieces = std::vector<std::string>;

// A tokenizer.json with the 256 byte tokens (ids 0..255 in byte order), the
// given extra tokens and merges, and <|im_end|> as a special token.
json tiny_json(const std::vector<std::string>& extra, const json& merges) {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[bytes_to_byte_level(std::string(1, static_cast<char>(b)))] = b;
    int id = 256;
    for (const auto& e : extra) vocab[e] = id++;
    json byte_level = {
        {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
    return {
        {"version", "1.0"},
        {"truncation", nullptr},
        {"padding", nullptr},
        {"added_tokens", json::array({{{"id", id},
                                       {"content", "<|im_end|>"},
                                       {"special", true},
                                       {"normalized", false},
                                       {"lstrip", false},
                                       {"rstrip", false},
                                       {"single_word", false}}})},
        {"normalizer", {{"type", "NFC"}}},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers", json::array({{{"type", "Split"},
                                          {"pattern", {{"Regex", std::string(kQwen2SplitRegex)}}},
                                          {"behavior", "Isolated"},
                                          {"invert", false}},
                                         byte_level})}}},
        {"post_processor", byte_level},
        {"decoder", byte_level},
        {"model",
         {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"vocab", vocab}, {"merges", merges}}},
    };
}

Tokenizer tiny(const std::vector<std::string>& extra, const json& merges) {
    return Tokenizer::from_json_text(tiny_json(extra, merges).dump(), "tiny.json");
}

std::string load_error(const json& j) {
    return error_of([&] { Tokenizer::from_json_text(j.dump(), "bad.json"); });
}

}  // namespace

TEST(Utf8, ValidityLossyAndNfc) {
    EXPECT_TRUE(utf8_is_valid("plain ascii"));
    EXPECT_TRUE(utf8_is_valid("caf\xC3\xA9 \xF0\x9F\x91\x8D"));
    EXPECT_EQ(utf8_invalid_offset("ab\xC3"), 2u);             // truncated
    EXPECT_EQ(utf8_invalid_offset("\xED\xA0\x80"), 0u);       // surrogate
    EXPECT_EQ(utf8_invalid_offset("\xC0\xAF"), 0u);           // overlong
    EXPECT_EQ(utf8_invalid_offset("x\xF4\x90\x80\x80"), 1u);  // above U+10FFFF
    // One U+FFFD per maximal invalid subpart (Rust's from_utf8_lossy).
    EXPECT_EQ(utf8_lossy("a\xF0\x9F\x91"
                         "b"),
              "a\xEF\xBF\xBD"
              "b");
    EXPECT_EQ(utf8_lossy("\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(utf8_lossy("\xE2\x82"), "\xEF\xBF\xBD");
    EXPECT_EQ(nfc_normalize("cafe\xCC\x81"), "caf\xC3\xA9");
    EXPECT_EQ(nfc_normalize(std::string("a\0b", 3)), std::string("a\0b", 3));
    EXPECT_EQ(nfc_normalize("\xE2\x84\xAB"), "\xC3\x85");  // Angstrom sign -> Å
    EXPECT_THROW(utf8_decode("\xFF", "x"), Error);
}

TEST(Pretokenize, Qwen2Pattern) {
    EXPECT_EQ(split(""), Pieces{});
    EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
    EXPECT_EQ(split("IT'S 'Re"), (Pieces{"IT", "'S", " '", "Re"}));
    EXPECT_EQ(split("it'\xC5\xBFx"), (Pieces{"it", "'\xC5\xBF", "x"}));  // 'ſ folds to 's
    EXPECT_EQ(split("a  \n\n  b"), (Pieces{"a", "  \n\n", " ", " b"}));
    EXPECT_EQ(split("  x"), (Pieces{" ", " x"}));
    EXPECT_EQ(split("x   "), (Pieces{"x", "   "}));
    EXPECT_EQ(split("12345"), (Pieces{"1", "2", "3", "4", "5"}));
    EXPECT_EQ(split("12345", SplitPattern::split_llama3), (Pieces{"123", "45"}));
    EXPECT_EQ(split("\x0b\x0b"
                    "1"),
              (Pieces{"\x0b", "\x0b", "1"}));
    EXPECT_EQ(split("\x1c\x1cx"), (Pieces{"\x1c\x1c", "x"}));  // U+001C is not \s
    EXPECT_EQ(split("x!!\n\ny"), (Pieces{"x", "!!\n\n", "y"}));
    EXPECT_EQ(split(" !?"), (Pieces{" !?"}));
    EXPECT_EQ(split(" 1"), (Pieces{" ", "1"}));
    EXPECT_EQ(split("\xE3\x80\x80\xE3\x80\x80"
                    "b"),
              (Pieces{"\xE3\x80\x80",
                      "\xE3\x80\x80"
                      "b"}));                                                            // U+3000
    EXPECT_EQ(split("\xE4\xBD\xA0\xE5\xA5\xBD"), (Pieces{"\xE4\xBD\xA0\xE5\xA5\xBD"}));  // 你好 are letters
    EXPECT_THROW(split("\xFF"), Error);
}

TEST(Pretokenize, Gpt2Pattern) {
    auto g = [](std::string_view s) { return split(s, SplitPattern::split_gpt2); };
    EXPECT_EQ(g("Hello  world's 123 !!"), (Pieces{"Hello", " ", " world", "'s", " 123", " !!"}));
    EXPECT_EQ(g("IT'S"), (Pieces{"IT", "'", "S"}));  // case-sensitive contractions
    EXPECT_EQ(g("a\n\nb  "), (Pieces{"a", "\n", "\n", "b", "  "}));
}

TEST(Pretokenize, SplitPatternsFromRegex) {
    EXPECT_EQ(split_pattern_from_regex(kQwen2SplitRegex), SplitPattern::split_qwen2);
    EXPECT_EQ(split_pattern_from_regex(kLlama3SplitRegex), SplitPattern::split_llama3);
    EXPECT_FALSE(split_pattern_from_regex("\\s+").has_value());
}

TEST(Pretokenize, ByteMapIsABijection) {
    const auto& m = byte_to_unicode();
    EXPECT_EQ(m[' '], U'\u0120');   // Ġ
    EXPECT_EQ(m['\n'], U'\u010A');  // Ċ
    EXPECT_EQ(m['A'], U'A');
    for (int b = 0; b < 256; ++b) EXPECT_EQ(byte_from_unicode(m[b]), b);
    std::string all;
    for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
    EXPECT_EQ(byte_level_to_bytes(bytes_to_byte_level(all)), std::optional<std::string>(all));
    EXPECT_FALSE(byte_level_to_bytes(" ").has_value());  // a plain space is not a byte-level char
}

TEST(Bpe, MergeOrderFollowsRank) {
    // "abc": with (a b) ranked first -> "abc"; with (b c) first -> "a" "bc".
    Tokenizer t1 = tiny({"ab", "bc", "abc"}, {"a b", "ab c", "b c"});
    EXPECT_EQ(t1.encode("abc"), (std::vector<int32_t>{258}));
    Tokenizer t2 = tiny({"ab", "bc", "abc"}, {"b c", "a b", "ab c"});
    EXPECT_EQ(t2.encode("abc"), (std::vector<int32_t>{'a', 257}));
    // Overlapping pairs merge left first: "aaa" -> "aa" "a".
    Tokenizer t3 = tiny({"aa"}, {"a a"});
    EXPECT_EQ(t3.encode("aaa"), (std::vector<int32_t>{256, 'a'}));
    EXPECT_EQ(t3.encode("aaaa"), (std::vector<int32_t>{256, 256}));
    // The pair form of merges reads the same.
    Tokenizer t4 = tiny({"ab", "bc", "abc"}, json::array({{"a", "b"}, {"ab", "c"}, {"b", "c"}}));
    EXPECT_EQ(t4.encode("abc"), (std::vector<int32_t>{258}));
    // Space is spelled Ġ: " ab" is its own word.
    Tokenizer t5 = tiny({"Ġa"}, {"Ġ a"});
    EXPECT_EQ(t5.encode("b ab"), (std::vector<int32_t>{'b', 256, 'b'}));
    EXPECT_EQ(t5.token_bytes(256), " a");
    EXPECT_EQ(t5.encode("x<|im_end|>"), (std::vector<int32_t>{'x', 257}));
    EXPECT_EQ(t5.vocab_size(), 258);
    EXPECT_TRUE(t5.is_special(257));
    // A long word (no merges apply in it) stays linear and exact.
    std::string long_word(20000, 'a');
    EXPECT_EQ(t3.encode(long_word).size(), 10000u);
}

TEST(Bpe, DecodeOfByteTokensAndAddedTokens) {
    Tokenizer t = tiny({}, json::array());
    std::vector<int32_t> bytes{0xE4, 0xBD, 0xA0};  // 你 as three byte tokens
    EXPECT_EQ(t.decode_strict(bytes), std::optional<std::string>("\xE4\xBD\xA0"));
    std::vector<int32_t> cut{0xE4, 0xBD, 'x'};
    EXPECT_FALSE(t.decode_strict(cut).has_value());
    EXPECT_EQ(t.decode(cut), "\xEF\xBF\xBDx");
    EXPECT_EQ(t.encode("\xE4\xBD\xA0"), bytes);
}

TEST(Bpe, DecodeResponseDropsOnlyAFinalEosAndSaysWhetherItDecoded) {
    Tokenizer t = tiny({}, json::array());
    const int32_t eos = 'z';  // any id serves as the end token here
    std::vector<int32_t> ended{'a', 'b', eos};
    ResponseText r = t.decode_response(ended, true, eos);
    EXPECT_EQ(r.text, "ab");
    EXPECT_TRUE(r.decodable);
    // Cut at the length limit: the same last id is text, not an end.
    EXPECT_EQ(t.decode_response(ended, false, eos).text, "abz");
    // Only a final EOS is dropped.
    std::vector<int32_t> inner{'a', eos, 'b'};
    EXPECT_EQ(t.decode_response(inner, true, eos).text, "azb");
    // Invalid UTF-8: the lossy decoding, marked not decodable.
    std::vector<int32_t> cut{0xE4, 0xBD, eos};
    r = t.decode_response(cut, true, eos);
    EXPECT_FALSE(r.decodable);
    EXPECT_EQ(r.text, "\xEF\xBF\xBD");
    EXPECT_TRUE(t.decode_response(std::vector<int32_t>{}, true, eos).decodable);
}

TEST(TokenizerJson, MalformedFilesGiveClearErrors) {
    json good = tiny_json({"ab"}, {"a b"});
    ASSERT_NO_THROW(Tokenizer::from_json_text(good.dump(), "good.json"));

    EXPECT_NE(
        error_of([] { Tokenizer::from_json_text("{not json", "broken.json"); }).find("broken.json: not valid JSON"),
        std::string::npos);
    EXPECT_NE(error_of([] { Tokenizer::from_json_text("[1, 2]", "arr.json"); }).find("arr.json"), std::string::npos);

    auto with = [&](auto&& edit) {
        json j = good;
        edit(j);
        return load_error(j);
    };
    auto has = [](const std::string& msg, const std::string& part) {
        return msg.find(part) != std::string::npos ? ::testing::AssertionSuccess()
                                                   : ::testing::AssertionFailure() << "message: " << msg;
    };
    EXPECT_TRUE(has(with([](json& j) { j.erase("model"); }), "missing field 'model'"));
    EXPECT_TRUE(has(with([](json& j) { j["model"]["type"] = "WordPiece"; }),
                    "field 'model.type' must be \"BPE\", got \"WordPiece\""));
    EXPECT_TRUE(has(with([](json& j) { j["model"]["merges"] = json::array({"ab"}); }), "model.merges[0]"));
    EXPECT_TRUE(has(with([](json& j) { j["model"]["merges"] = json::array({"a  b"}); }), "model.merges[0]"));
    EXPECT_TRUE(has(with([](json& j) { j["model"]["merges"] = json::array({"a z9"}); }),
                    "uses token \"z9\", which is not in model.vocab"));
    EXPECT_TRUE(
        has(with([](json& j) { j["model"]["merges"] = json::array({json::array({"a"})}); }), "model.merges[0]"));
    EXPECT_TRUE(has(with([](json& j) { j["model"]["merges"] = "a b"; }), "'model.merges' must be an array"));
    EXPECT_TRUE(has(with([](json& j) { j["model"]["merges"] = json::array({"a b", 7}); }), "model.merges[1]"));
    EXPECT_TRUE(has(with([](json& j) {
                        j["model"]["merges"] = json::array({json::array({"a", "b", "c"})});
                    }),
                    "model.merges[0]' must be a pair of two strings"));
    EXPECT_TRUE(has(with([](json& j) { j["model"]["merges"] = json::array({json::array({json::array({"a"})})}); }),
                    "model.merges[0]"));
    EXPECT_TRUE(has(with([](json& j) { j["model"]["vocab"] = json::array(); }), "'model.vocab' must be an object"));
    EXPECT_TRUE(has(with([](json& j) {
                        j["model"]["vocab"]["x"] = {{"nested", 1}};
                    }),
                    "entry \"x\" must be an integer"));
    EXPECT_TRUE(has(with([](json& j) { j["model"]["vocab"]["neg"] = -4; }), "entry \"neg\" has id -4"));
    EXPECT_TRUE(has(with([](json& j) { j["model"].erase("merges"); }), "missing field 'merges'"));
    EXPECT_TRUE(has(with([](json& j) { j["model"]["vocab"]["ab"] = "x"; }), "'model.vocab' entry \"ab\""));
    EXPECT_TRUE(has(with([](json& j) {
                        j["model"]["vocab"]["dup"] = 3;
                        j["added_tokens"][0]["id"] = 258;
                    }),
                    "gives id 3 to two tokens"));
    EXPECT_TRUE(has(with([](json& j) { j["model"]["vocab"]["big"] = 1LL << 40; }), "'model.vocab' entry \"big\""));
    EXPECT_TRUE(has(with([](json& j) { j["model"]["dropout"] = 0.1; }), "model.dropout"));
    EXPECT_TRUE(
        has(with([](json& j) { j["model"]["continuing_subword_prefix"] = "##"; }), "continuing_subword_prefix"));
    EXPECT_TRUE(has(with([](json& j) {
                        j["pre_tokenizer"] = {{"type", "Whitespace"}};
                    }),
                    "field 'pre_tokenizer.type' must be \"Sequence\" or \"ByteLevel\", got \"Whitespace\""));
    EXPECT_TRUE(has(with([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+"; }),
                    "regex ppolab does not implement"));
    EXPECT_TRUE(has(with([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; }), "behavior"));
    EXPECT_TRUE(has(with([](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true; }),
                    "add_prefix_space"));
    EXPECT_TRUE(has(with([](json& j) { j["pre_tokenizer"] = nullptr; }), "'pre_tokenizer' is null"));
    EXPECT_TRUE(has(with([](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }), "field 'normalizer.type'"));
    EXPECT_TRUE(has(with([](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }), "field 'decoder.type'"));
    EXPECT_TRUE(has(with([](json& j) { j["post_processor"] = {{"type", "TemplateProcessing"}}; }), "post_processor"));
    EXPECT_TRUE(has(with([](json& j) { j["padding"] = {{"length", 8}}; }), "field 'padding' must be null"));
    EXPECT_TRUE(has(with([](json& j) { j["added_tokens"][0]["lstrip"] = true; }), "added_tokens[0].lstrip"));
    EXPECT_TRUE(has(with([](json& j) { j["added_tokens"][0]["id"] = 5; }),
                    "field 'added_tokens[0].id' is 5 for \"<|im_end|>\"; the tokenizers library gives it id 257"));
    EXPECT_TRUE(has(with([](json& j) { j["added_tokens"][0]["id"] = 300; }), "added_tokens[0].id' is 300"));
    // An added token that is also in the vocab keeps its vocab id.
    EXPECT_TRUE(has(with([](json& j) { j["added_tokens"][0]["content"] = "ab"; }), "gives it id 256"));
    {
        json j = good;
        j["added_tokens"][0]["content"] = "ab";
        j["added_tokens"][0]["id"] = 256;
        j["added_tokens"].push_back({{"id", 257}, {"content", "<s>"}, {"special", true}});
        Tokenizer t = Tokenizer::from_json_text(j.dump(), "shared.json");
        EXPECT_EQ(t.vocab_size(), 258);
        EXPECT_TRUE(t.is_special(256));
        EXPECT_EQ(t.encode("<s>xab"), (std::vector<int32_t>{257, 'x', 256}));
    }
    EXPECT_TRUE(has(with([](json& j) { j["added_tokens"][0].erase("content"); }), "missing field 'content'"));
    EXPECT_TRUE(has(with([](json& j) { j["model"]["unk_token"] = "<unk>"; }), "model.unk_token"));

    {
        std::string text = good.dump();
        size_t at = text.find("\"ab\":256");
        ASSERT_NE(at, std::string::npos);
        text.insert(at, "\"ab\":300,");  // the same key twice in model.vocab
        EXPECT_TRUE(has(error_of([&] { Tokenizer::from_json_text(text, "dupkey.json"); }),
                        "field 'model.vocab' has the token \"ab\" twice"));
    }
    EXPECT_TRUE(has(error_of([] { Tokenizer::from_file("/nonexistent/tok"); }), "/nonexistent/tok"));
}

TEST(TokenizerJson, FileOrFolderAndSha) {
    fs::path dir = temp_dir("folder");
    std::string text = tiny_json({"ab"}, {"a b"}).dump(2);
    write_file_atomic(dir / "tokenizer.json", text);
    Tokenizer a = Tokenizer::from_file(dir);
    Tokenizer b = Tokenizer::from_file(dir / "tokenizer.json");
    EXPECT_EQ(a.sha256(), sha256_hex(text));
    EXPECT_EQ(a.encode("abab"), b.encode("abab"));
    EXPECT_EQ(a.encode("abab"), (std::vector<int32_t>{256, 256}));
    fs::remove_all(dir);
}

TEST(Chat, CustomSystemLineAndErrors) {
    std::vector<ChatMessage> m{{"user", "Hi"}};
    EXPECT_EQ(render_chat(m, true, "Tiny."),
              "<|im_start|>system\nTiny.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(render_chat(m, false, ""), "<|im_start|>user\nHi<|im_end|>\n");
    EXPECT_EQ(render_chat({{"system", "S"}, {"user", "U"}}, false, "ignored"),
              "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
    EXPECT_NE(error_of([] { render_chat({{"robot", "x"}}, false); }).find("\"robot\""), std::string::npos);
    EXPECT_THROW(render_chat({}, true), Error);
}
