// fuzz_config.cpp — libFuzzer target for config.json parsing and validation.
//
// Any input must either be refused with ppolab::Error or give a config that
// round-trips through to_json and whose tensor table has positive shapes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "model/config.h"
#include "model/hf_folder.h"
#include "util/error.h"
#include "util/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace ppolab;
    try {
        json j = parse_json(std::string_view(reinterpret_cast<const char*>(data), size), "config.json");
        Qwen2Config c = Qwen2Config::from_json(j, "config.json");
        if (!(Qwen2Config::from_json(c.to_json(), "again") == c)) std::abort();
        if (c.num_hidden_layers <= 64) {
            for (const TensorSpec& s : qwen2_tensor_table(c))
                for (int64_t d : s.shape)
                    if (d <= 0) std::abort();
        }
        try {
            check_seed_architecture(c, "config.json");
        } catch (const Error&) {}
    } catch (const Error&) {}
    return 0;
}
