// bpe_train.h — trains a byte-level BPE tokenizer and writes it as a Hugging
// Face tokenizer.json (NFC normaliser, Qwen2 split regex + ByteLevel
// pre-tokenizer, ByteLevel decoder), readable by Tokenizer and by the
// tokenizers library with identical ids.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ppolab {

struct BpeTrainStats {
    int64_t words = 0;         // pre-tokens counted (with repetition)
    int64_t unique_words = 0;  // distinct pre-tokens
    int64_t merges = 0;        // merges learned
    int64_t vocab_size = 0;    // ids in the file: 256 bytes + merged tokens + specials
};

// vocab_size counts everything: the 256 byte tokens, the merged tokens and
// the special tokens (ids 0..255 are the bytes in order, then merged tokens
// in the order learned, then the specials in the order given). Training
// stops early when no pair occurs at least twice. Special tokens found in
// the texts are cut out before counting. Deterministic: the most frequent
// pair wins, ties go to the smaller (left, right) byte-level spelling.
std::string train_bpe_tokenizer_json(const std::vector<std::string>& texts, int64_t vocab_size,
                                     const std::vector<std::string>& special_tokens, BpeTrainStats* stats = nullptr);

}  // namespace ppolab
