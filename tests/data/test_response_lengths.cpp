// Responses and prompts fit the tiny model's limits (SPEC §10: byte-level BPE
// of a few hundred tokens; responses at most 64 tokens, prompts at most 256)
// with a tokenizer trained by ppolab on the base corpus.
#include <gtest/gtest.h>

#include <algorithm>

#include "data/base_corpus.h"
#include "data/rubric.h"
#include "tokenizer/bpe_train.h"
#include "tokenizer/tokenizer.h"

using namespace ppolab;

TEST(ResponseLengths, FitTheTinyLimitsWithASmallBpe) {
    BaseCorpus base = base_corpus_generate();
    std::vector<std::string> texts;
    for (const auto& c : base.conversations) {
        texts.push_back(c.prompt);
        texts.push_back(c.response);
    }
    for (const auto& p : base.prose) texts.push_back(p);
    const int64_t vocab = 400;
    Tokenizer tok = Tokenizer::from_json_text(
        train_bpe_tokenizer_json(texts, vocab, {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}), "trained");
    ASSERT_LE(tok.vocab_size(), vocab);
    size_t longest_response = 0, longest_prompt = 0;
    for (const auto& f : rubric_enumerate())
        longest_response = std::max(longest_response, tok.encode(response_form_text(f)).size());
    const Corpus corpus = corpus_generate();
    for (const auto& p : corpus.pairs) longest_prompt = std::max(longest_prompt, tok.encode(p.prompt).size());
    for (const auto& p : corpus.probes) longest_prompt = std::max(longest_prompt, tok.encode(p.prompt).size());
    std::printf("vocab %lld: longest grammar response %zu tokens, longest corpus prompt %zu tokens\n",
                static_cast<long long>(tok.vocab_size()), longest_response, longest_prompt);
    EXPECT_LE(longest_response, 63u);  // + EOS <= 64
    EXPECT_LE(longest_prompt, 200u);   // + chat markup <= 256
}
