// BPE training: determinism, the file read by our loader, and ids identical
// to the Hugging Face tokenizers library (run through $PPOLAB_PYTHON).
#include <chrono>

#include "test_common.h"
#include "tokenizer/bpe_train.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/rng.h"

using namespace ppolab;
using namespace ppolab::test;

namespace {

const std::vector<std::string> kSpecials{"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

// Sentences in the style of the generated corpus: office problems and fixes.
std::vector<std::string> sentences(int count, uint64_t seed) {
    const std::vector<std::string> subj{"The printer",      "My laptop",   "The Wi-Fi",
                                        "Our shared drive", "The audio",   "La stampante",
                                        "Il documento",     "The session", "Email"};
    const std::vector<std::string> verb{" stopped working",        " is stuck",     " won't connect",
                                        " keeps freezing",         " non risponde", " lost 3 pages",
                                        " shows error 0x80070005", " is slow"};
    const std::vector<std::string> tail{".",
                                        "!",
                                        " again.",
                                        " since 9:30am.",
                                        " — perché?",
                                        " 😕",
                                        "...",
                                        " after the update.",
                                        "\n\nThanks,\nAnna",
                                        " (again) :("};
    const std::vector<std::string> fix{
        "Resume the print queue.",  "Check the cable is plugged in.",      "Re-enable Wi-Fi from the menu.",
        "Save the document first.", "Renew the session and log in again.", "Riattiva l'audio."};
    Philox rng(seed, 7);
    auto pick = [&](const std::vector<std::string>& v) { return v[rng.below(v.size())]; };
    std::vector<std::string> out;
    for (int i = 0; i < count; ++i) {
        std::string s = pick(subj) + pick(verb) + pick(tail);
        // A pseudo-word or two (names, hosts, file names) so that words are many.
        const std::vector<std::string> syl{"ka", "ro", "mi", "te", "lu", "san", "ver", "do", "qu", "zz", "ph", "ell"};
        std::string word;
        for (uint64_t k = 0, n = 1 + rng.below(4); k < n; ++k) word += pick(syl);
        s += " Ticket " + word + "-" + std::to_string(rng.below(100)) + " from " + word + "@office.example.";
        if (i % 3 == 0) {
            s = render_chat({{"user", s}, {"assistant", pick(fix)}}, false, "You help with office problems.");
            s += "<|endoftext|>";
        } else if (i % 3 == 1) {
            s += " " + pick(fix) + " It's item #" + std::to_string(rng.below(1000)) + ".";
        }
        out.push_back(std::move(s));
    }
    return out;
}

// Strings to encode: held-out sentences plus edge cases the corpus never shows.
std::vector<std::string> probe_strings() {
    std::vector<std::string> p = sentences(60, 99);
    for (const char* s : {"",
                          " ",
                          "   ",
                          "\n\n",
                          "a\t\tb",
                          "x  \n  y",
                          "12345",
                          "I'M",
                          "we'll",
                          "café",
                          "cafe\xCC\x81",
                          "\xE4\xBD\xA0\xE5\xA5\xBD",
                          "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
                          "<|im_start|>user\nhi<|im_end|>",
                          "text<|endoftext|>more",
                          "<|im_sta",
                          "\x01\x7f",
                          "Zürich",
                          "=====",
                          "The printer stopped working."})
        p.emplace_back(s);
    return p;
}

// ids from the Hugging Face library for each string, or a failure.
std::vector<std::vector<int32_t>> reference_ids(const fs::path& tokenizer_json, const std::vector<std::string>& texts,
                                                const fs::path& dir) {
    std::string lines;
    for (const auto& t : texts) lines += json(t).dump() + "\n";
    write_file_atomic(dir / "texts.jsonl", lines, Overwrite::replace);
    fs::remove(dir / "ids.jsonl");
    fs::path script = source_dir() / "tests" / "tokenizer" / "hf_encode.py";
    std::string cmd = "'" + python() + "' '" + script.string() + "' '" + tokenizer_json.string() + "' '" +
                      (dir / "texts.jsonl").string() + "' '" + (dir / "ids.jsonl").string() + "'";
    int rc = std::system(cmd.c_str());
    EXPECT_EQ(rc, 0) << cmd;
    std::vector<std::vector<int32_t>> out;
    for (const json& row : read_jsonl(dir / "ids.jsonl")) out.push_back(row.get<std::vector<int32_t>>());
    return out;
}

void expect_same_as_reference(const std::string& tokenizer_text, const std::string& name, bool round_trip = true) {
    fs::path dir = temp_dir(name);
    write_file_atomic(dir / "tokenizer.json", tokenizer_text);
    Tokenizer ours = Tokenizer::from_file(dir);
    std::vector<std::string> probes = probe_strings();
    auto want = reference_ids(dir / "tokenizer.json", probes, dir);
    ASSERT_EQ(want.size(), probes.size());
    int mismatches = 0;
    for (size_t i = 0; i < probes.size(); ++i) {
        auto got = ours.encode(probes[i]);
        if (got != want[i] && ++mismatches <= 5)
            ADD_FAILURE() << name << ": " << json(probes[i]).dump() << "\n  want " << json(want[i]).dump()
                          << "\n  got  " << json(got).dump();
        if (round_trip) {
            EXPECT_EQ(ours.decode(got), nfc_normalize(probes[i])) << json(probes[i]).dump();
        }
    }
    EXPECT_EQ(mismatches, 0);
    fs::remove_all(dir);
}

}  // namespace

TEST(BpeTrain, DeterministicAndLoadable) {
    auto texts = sentences(400, 1);
    BpeTrainStats stats;
    std::string a = train_bpe_tokenizer_json(texts, 600, kSpecials, &stats);
    std::string b = train_bpe_tokenizer_json(texts, 600, kSpecials);
    EXPECT_EQ(a, b);
    EXPECT_EQ(stats.vocab_size, 600);
    EXPECT_EQ(stats.merges, 600 - 256 - 3);
    EXPECT_GT(stats.unique_words, 50);
    Tokenizer t = Tokenizer::from_json_text(a, "trained.json");
    EXPECT_EQ(t.vocab_size(), 600);
    EXPECT_EQ(t.token_to_id("<|endoftext|>"), 597);
    EXPECT_EQ(t.token_to_id("<|im_start|>"), 598);
    EXPECT_EQ(t.token_to_id("<|im_end|>"), 599);
    for (int32_t id : {597, 598, 599}) EXPECT_TRUE(t.is_special(id));
    EXPECT_FALSE(t.is_special(300));
    EXPECT_EQ(t.token_bytes(' '), " ");  // the bytes come first, in order
    // The merges compress the training text well below one token per byte.
    size_t bytes = 0, tokens = 0;
    for (const auto& s : texts) {
        bytes += s.size();
        tokens += t.encode(s).size();
    }
    EXPECT_LT(static_cast<double>(tokens) / static_cast<double>(bytes), 0.35);
    // A different text gives a different file (the test can fail).
    EXPECT_NE(train_bpe_tokenizer_json(sentences(400, 2), 600, kSpecials), a);
}

TEST(BpeTrain, StopsWhenNothingRepeatsAndChecksArguments) {
    BpeTrainStats stats;
    std::string j = train_bpe_tokenizer_json({"abab"}, 1000, {"<|im_end|>"}, &stats);
    EXPECT_EQ(stats.merges, 1);  // "ab" occurs twice; then "abab" has one pair (ab, ab), once
    Tokenizer t = Tokenizer::from_json_text(j, "small.json");
    EXPECT_EQ(t.vocab_size(), 258);
    EXPECT_EQ(t.encode("abab"), (std::vector<int32_t>{256, 256}));
    EXPECT_THROW(train_bpe_tokenizer_json({"x"}, 100, {}), Error);
    EXPECT_THROW(train_bpe_tokenizer_json({"x"}, 300, {"<a>", "<a>"}), Error);
    EXPECT_THROW(train_bpe_tokenizer_json({"bad \xFF"}, 300, {}), Error);
    // Special tokens in the texts are never merged into words.
    std::string s = train_bpe_tokenizer_json({"<|im_end|><|im_end|><|im_end|>"}, 300, {"<|im_end|>"}, &stats);
    EXPECT_EQ(stats.merges, 0);
}

TEST(BpeTrain, IdsEqualHuggingFaceTokenizers) {
    std::string text = train_bpe_tokenizer_json(sentences(400, 1), 600, kSpecials);
    expect_same_as_reference(text, "trained");
}

TEST(BpeTrain, OtherSplitPatternsEqualHuggingFaceTokenizers) {
    // The same vocabulary with the Llama 3 regex, and with GPT-2's ByteLevel(use_regex=true).
    json j = parse_json(train_bpe_tokenizer_json(sentences(400, 1), 600, kSpecials), "trained");
    json llama = j;
    llama["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = std::string(kLlama3SplitRegex);
    expect_same_as_reference(llama.dump(), "llama3");
    json gpt2 = j;
    gpt2["pre_tokenizer"] = {
        {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
    expect_same_as_reference(gpt2.dump(), "gpt2");
    // A non-special added token matched after NFC (normalized=true).
    json added = j;
    added["added_tokens"].push_back({{"id", 600},
                                     {"content", "caf\xC3\xA9"},
                                     {"single_word", false},
                                     {"lstrip", false},
                                     {"rstrip", false},
                                     {"normalized", true},
                                     {"special", false}});
    Tokenizer with_added = Tokenizer::from_json_text(added.dump(), "added");
    ASSERT_EQ(with_added.encode("cafe\xCC\x81!"), (std::vector<int32_t>{600, '!'}));
    // The library runs added tokens through the ByteLevel decoder too, so a
    // non-ASCII added token does not decode to itself ("caf\uFFFD" from
    // tokenizers 0.20.3 as well); ids are what must agree.
    EXPECT_EQ(with_added.decode(std::vector<int32_t>{600}), "caf\xEF\xBF\xBD");
    expect_same_as_reference(added.dump(), "normalized_added", /*round_trip=*/false);
}

TEST(BpeTrain, FastOnAMegabyte) {
    std::vector<std::string> texts = sentences(20000, 3);
    size_t bytes = 0;
    for (const auto& s : texts) bytes += s.size();
    auto t0 = std::chrono::steady_clock::now();
    BpeTrainStats stats;
    std::string j = train_bpe_tokenizer_json(texts, 2048, kSpecials, &stats);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ measure  ] BPE training: %.2f MB, %lld words (%lld distinct), %lld merges in %.2f s\n",
                static_cast<double>(bytes) / 1e6, static_cast<long long>(stats.words),
                static_cast<long long>(stats.unique_words), static_cast<long long>(stats.merges), s);
    EXPECT_GT(bytes, 1'000'000u);
    EXPECT_LT(s, 10.0);
}
