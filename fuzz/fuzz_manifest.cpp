// fuzz_manifest.cpp — libFuzzer target for the corpus readers of src/data:
// manifest.json, the JSONL files of learn/ eval/ gold/, and the rubric's
// recogniser (model output is outside input too). Bad input must end in
// ppolab::Error, never in a crash, a hang or another exception.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "data/corpus.h"
#include "data/rubric.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    // The first byte picks the parser; the rest is the file's text.
    const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        switch (data[0] % 6) {
            case 0: (void)ppolab::manifest_parse(text, "manifest.json"); break;
            case 1: (void)ppolab::parse_pairs(text, "pairs.jsonl"); break;
            case 2: (void)ppolab::parse_prompts(text, "prompts.jsonl"); break;
            case 3: (void)ppolab::parse_demonstrations(text, "demonstrations.jsonl"); break;
            case 4: (void)ppolab::parse_gold(text, "labels.jsonl"); break;
            case 5: {
                auto v = ppolab::evaluate_response(text, ppolab::FinishReason::eos, data[0] / 6 % 6);
                if (v.rubric_success && (!v.recognized || !v.relevant || v.unsupported_certainty)) __builtin_trap();
                (void)ppolab::rubric_verdict_to_json(v).dump();
                break;
            }
        }
    } catch (const ppolab::Error&) {}
    return 0;
}
