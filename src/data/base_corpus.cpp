#include "data/base_corpus.h"

#include <cstdio>
#include <set>

#include "data/rubric.h"
#include "util/error.h"
#include "util/rng.h"
#include "util/sha256.h"

namespace ppolab {

namespace {

// Philox streams of the three parts, so that each can change size alone.
constexpr uint64_t kStreamChat = 1, kStreamProse = 2, kStreamKnowledge = 3;

// Source kinds the corpus never uses (it uses preference card,
// demonstration, live rollout request).
const char* const kKinds[] = {"practice ticket", "archived chat", "training note"};

// Prose outside the grammar: office small talk that names situations'
// objects but never pairs a situation with its fix.
const char* const kSubjects[] = {"The office printer", "The desk monitor", "The laptop",        "The web portal",
                                 "The editor",         "The meeting room", "The new colleague", "The help desk"};
const char* const kPredicates[] = {"was busy all morning",        "is on the third floor",
                                   "came with a short manual",    "was mentioned in the weekly meeting",
                                   "needs a new label",           "was moved last week",
                                   "is shared by the whole team", "got a new name"};
const char* const kTails[] = {"", " Nobody complained.", " The team took a short break.",
                              " A ticket was opened and closed.", " Lunch was at noon."};

// World knowledge templates (only with config.world_knowledge).
std::string knowledge_line(int action, int form) {
    const std::string context = action_context(action);
    const std::string fix = action_instruction(action);
    switch (form % 3) {
        case 0: return "Known fix. " + context + " " + fix;
        case 1: return "Help desk note: " + context + " The fitting step: " + fix;
        default: return "Remember this case. " + context + " What works: " + fix;
    }
}

std::string base_family(const char* prefix, int index, int width) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%0*d", prefix, width, index);
    return buf;
}

}  // namespace

ordered_json base_corpus_config_to_json(const BaseCorpusConfig& c) {
    ordered_json j;
    j["seed"] = c.seed;
    j["conversations"] = c.conversations;
    j["probe_style_percent"] = c.probe_style_percent;
    j["prose_lines"] = c.prose_lines;
    j["world_knowledge"] = c.world_knowledge;
    j["knowledge_lines"] = c.knowledge_lines;
    return j;
}

BaseCorpus base_corpus_generate(const BaseCorpusConfig& c) {
    if (c.conversations < 0 || c.conversations > 10000)
        fail("base corpus: conversations must be in [0, 10000], got ", c.conversations);
    if (c.probe_style_percent < 0 || c.probe_style_percent > 100)
        fail("base corpus: probe_style_percent must be in [0, 100], got ", c.probe_style_percent);
    if (c.prose_lines < 0 || c.knowledge_lines < 0) fail("base corpus: line counts must be >= 0");
    BaseCorpus base;
    base.config = c;
    const std::vector<ResponseForm> forms = rubric_enumerate();

    Philox chat(c.seed, kStreamChat);
    int probe_index = 0;
    for (int i = 0; i < c.conversations; ++i) {
        BaseConversation conv;
        conv.context_action = static_cast<int>(chat.below(kActionCount));
        if (static_cast<int>(chat.below(100)) < c.probe_style_percent) {
            conv.prompt = corpus_probe_prompt(base_family("BASEP", probe_index++, 4), conv.context_action);
        } else {
            const int variant = static_cast<int>(chat.below(20));
            const char* kind = kKinds[chat.below(3)];
            conv.prompt = corpus_prompt(base_family("BASE", i, 4), conv.context_action, kind, variant);
        }
        // The answer: any sentence of the grammar, drawn without looking at the context.
        const ResponseForm& form = forms[chat.below(forms.size())];
        conv.response = response_form_text(form);
        conv.response_action = form.refusal ? -1 : form.action;
        base.conversations.push_back(std::move(conv));
    }
    Philox prose(c.seed, kStreamProse);
    for (int i = 0; i < c.prose_lines; ++i) {
        std::string line = std::string(kSubjects[prose.below(std::size(kSubjects))]) + " " +
                           kPredicates[prose.below(std::size(kPredicates))] + "." +
                           kTails[prose.below(std::size(kTails))];
        base.prose.push_back(std::move(line));
    }
    if (c.world_knowledge) {
        Philox know(c.seed, kStreamKnowledge);
        for (int i = 0; i < c.knowledge_lines; ++i)
            base.knowledge.push_back(
                knowledge_line(static_cast<int>(know.below(kActionCount)), static_cast<int>(know.below(3))));
    }
    return base;
}

void base_corpus_check(const BaseCorpus& base, const Manifest& manifest) {
    std::set<std::string> reserved;
    for (const auto& [id, sha] : manifest.prompt_sha256) reserved.insert(sha);
    if (reserved.empty()) fail("base corpus check: the manifest lists no prompt sha256");
    auto check = [&](const std::string& text, const char* what, size_t index) {
        if (reserved.count(sha256_hex(text)))
            fail("base corpus: ", what, " ", index, " is a corpus prompt (its sha256 is in the manifest): '", text,
                 "'");
        if (text.find(" OH") != std::string::npos || text.find("PROBE") != std::string::npos)
            fail("base corpus: ", what, " ", index, " names a corpus or probe family: '", text, "'");
    };
    for (size_t i = 0; i < base.conversations.size(); ++i) {
        check(base.conversations[i].prompt, "prompt", i);
        check(base.conversations[i].response, "response", i);
    }
    for (size_t i = 0; i < base.prose.size(); ++i) check(base.prose[i], "prose line", i);
    for (size_t i = 0; i < base.knowledge.size(); ++i) check(base.knowledge[i], "knowledge line", i);
}

ordered_json base_corpus_stats(const BaseCorpus& base) {
    int64_t fits = 0, refusals = 0, probe_style = 0;
    std::set<std::string> prompts;
    for (const auto& c : base.conversations) {
        fits += c.response_action == c.context_action;
        refusals += c.response_action < 0;
        probe_style += c.prompt.rfind("New remote support context", 0) == 0;
        prompts.insert(c.prompt);
    }
    ordered_json j;
    j["config"] = base_corpus_config_to_json(base.config);
    j["conversations"] = int64_t(base.conversations.size());
    j["distinct_prompts"] = int64_t(prompts.size());
    j["probe_style_prompts"] = probe_style;
    j["answer_fits_context"] = fits;
    j["answer_fits_context_fraction"] =
        base.conversations.empty() ? 0.0 : double(fits) / double(base.conversations.size());
    j["refusals"] = refusals;
    j["prose_lines"] = int64_t(base.prose.size());
    j["knowledge_lines"] = int64_t(base.knowledge.size());
    return j;
}

}  // namespace ppolab
