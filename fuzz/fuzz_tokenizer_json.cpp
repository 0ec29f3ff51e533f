// fuzz_tokenizer_json.cpp — libFuzzer target: bytes as a tokenizer.json.
// Whatever the input, parsing either fails with ppolab::Error or yields a
// tokenizer that encodes and decodes without crashing: a few fixed strings
// and the input's own first bytes (when valid UTF-8) are encoded, every id
// produced must be a token, and junk ids decode without harm.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        ppolab::Tokenizer tok = ppolab::Tokenizer::from_json_text(text, "fuzz.json");
        std::string sample(text.substr(0, 256));
        for (std::string_view s :
             {std::string_view("Hello world's 123  \n\n\t x"),
              std::string_view("caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x91\x8D"), std::string_view(sample)}) {
            if (!ppolab::utf8_is_valid(s)) continue;
            std::vector<int32_t> ids = tok.encode(s);
            std::string back = tok.decode(ids);
            (void)tok.decode_strict(ids);
            for (int32_t id : ids)
                if (!tok.is_token(id)) __builtin_trap();  // encode only yields real ids
            (void)back;
        }
        std::vector<int32_t> junk{-5, 0, 1, 255, 256, 70000, static_cast<int32_t>(tok.vocab_size())};
        (void)tok.decode(junk);
        (void)tok.decode_strict(junk);
    } catch (const ppolab::Error&) {}
    return 0;
}
