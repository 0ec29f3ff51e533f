// base_corpus.h — the pretraining text of the tiny base model (SPEC §10).
//
// Chat-style help requests in the corpus's prompt style, answered with
// sentences of the rubric's grammar whose action is drawn independently of
// the context: the base becomes fluent in the grammar without learning
// which action fits which situation. Prompts use fresh family names
// (BASE0000…, BASEP000… for the probe-style template) and source kinds the
// corpus never uses, so no corpus prompt can appear; base_corpus_check
// proves it by sha256 against the corpus manifest. Some prose outside the
// grammar is added, and — only when asked — "world knowledge": declarative
// sentences linking each situation to its fix, outside the chat format
// (SPEC §10: measure both ways).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "util/json.h"

namespace ppolab {

struct BaseCorpusConfig {
    uint64_t seed = 10;            // Philox seed (stream per part)
    int conversations = 4000;      // chat-style (prompt, response) pairs
    int probe_style_percent = 25;  // share of prompts in the probe template
    int prose_lines = 600;         // sentences outside the grammar
    bool world_knowledge = false;  // add situation -> fix sentences
    int knowledge_lines = 600;     // how many, when world_knowledge
};
ordered_json base_corpus_config_to_json(const BaseCorpusConfig& config);

struct BaseConversation {
    std::string prompt;
    std::string response;
    int context_action = 0;    // the situation named in the prompt
    int response_action = -1;  // the action of the answer (-1: refusal); independent of context_action
};

struct BaseCorpus {
    BaseCorpusConfig config;
    std::vector<BaseConversation> conversations;
    std::vector<std::string> prose;      // outside the grammar, no situation -> fix link
    std::vector<std::string> knowledge;  // empty unless config.world_knowledge
};

BaseCorpus base_corpus_generate(const BaseCorpusConfig& config = {});

// Error if any base prompt, prose or knowledge line has the sha256 of a
// corpus prompt (manifest.prompt_sha256), or names a corpus or probe family.
void base_corpus_check(const BaseCorpus& base, const Manifest& manifest);

// Counts for the pretrain report: conversations, how often the answer's
// action happens to fit the context (≈ 1/6 by construction), refusals, lines.
ordered_json base_corpus_stats(const BaseCorpus& base);

}  // namespace ppolab
