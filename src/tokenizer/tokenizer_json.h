// tokenizer_json.h — reads tokenizer.json in one streaming pass.
//
// The two big tables (model.vocab: 150k entries, model.merges: 150k pairs)
// go straight into vectors; everything else becomes a small JSON tree
// where those two fields are left as empty placeholders. This keeps the
// load of a 7 MB file at a fraction of what a full DOM would cost.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/json.h"

namespace ppolab {

struct TokenizerJson {
    json root;                                                // model.vocab / model.merges emptied
    bool has_vocab_object = false;                            // model.vocab was an object
    bool has_merges_array = false;                            // model.merges was an array
    std::vector<std::pair<std::string, int64_t>> vocab;       // in file order
    std::vector<std::pair<std::string, std::string>> merges;  // (left, right), in rank order
};

// Error names `where` and the field (e.g. "model.merges[12]") on bad input.
TokenizerJson read_tokenizer_json(std::string_view text, std::string_view where);

}  // namespace ppolab
