#include "model/config.h"

#include <cmath>
#include <utility>

#include "util/error.h"

namespace ppolab {

// Upper bounds that no Qwen2 model comes near; a bigger value is a corrupt
// config, and refusing it keeps a bad file from asking for terabytes.
static constexpr int64_t kMaxVocab = int64_t(1) << 24;
static constexpr int64_t kMaxWidth = int64_t(1) << 17;
static constexpr int64_t kMaxLayers = 1024;
static constexpr int64_t kMaxPositions = int64_t(1) << 24;

static int64_t positive_int(const json& j, std::string_view key, const std::string& where, int64_t max) {
    int64_t v = json_int(j, key, where);
    if (v < 1 || v > max) fail(where, ": field '", key, "' must be in [1, ", max, "], got ", v);
    return v;
}

static bool has(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// bos/eos: an integer, null, or a list of integers (the first is used).
static int64_t token_id(const json& j, const char* key, const std::string& where) {
    if (!has(j, key)) return -1;
    const json& v = j[key];
    const json& id = v.is_array() && !v.empty() ? v[0] : v;
    if (!id.is_number_integer() || id.get<int64_t>() < 0)
        fail(where, ": field '", key, "' must be a non-negative token id (or a list of them), got ", v.dump());
    return id.get<int64_t>();
}

Qwen2Config Qwen2Config::from_json(const json& j, const std::string& where) {
    if (!j.is_object()) fail(where, ": expected a JSON object, got ", j.type_name());
    bool named = false;
    if (has(j, "model_type")) {
        std::string type = json_string(j, "model_type", where);
        if (type != "qwen2") fail(where, ": field 'model_type' must be \"qwen2\", got \"", type, "\"");
        named = true;
    }
    if (has(j, "architectures")) {
        const json& a = j["architectures"];
        if (!a.is_array()) fail(where, ": field 'architectures' must be a list, got ", a.type_name());
        bool found = false;
        for (const json& name : a) found = found || (name.is_string() && name.get<std::string>() == "Qwen2ForCausalLM");
        if (!found) fail(where, ": field 'architectures' must include \"Qwen2ForCausalLM\", got ", a.dump());
        named = true;
    }
    if (!named) fail(where, ": neither 'model_type' (\"qwen2\") nor 'architectures' ([\"Qwen2ForCausalLM\"]) is given");
    if (has(j, "hidden_act")) {
        std::string act = json_string(j, "hidden_act", where);
        if (act != "silu") fail(where, ": field 'hidden_act' must be \"silu\", got \"", act, "\"");
    }
    if (has(j, "use_sliding_window") && json_bool(j, "use_sliding_window", where))
        fail(where, ": field 'use_sliding_window' is true; sliding-window attention is not supported");
    if (has(j, "rope_scaling"))
        fail(where, ": field 'rope_scaling' is ", j["rope_scaling"].dump(), "; only plain RoPE (null) is supported");

    Qwen2Config c;
    c.vocab_size = positive_int(j, "vocab_size", where, kMaxVocab);
    c.hidden_size = positive_int(j, "hidden_size", where, kMaxWidth);
    c.intermediate_size = positive_int(j, "intermediate_size", where, kMaxWidth * 8);
    c.num_hidden_layers = positive_int(j, "num_hidden_layers", where, kMaxLayers);
    c.num_attention_heads = positive_int(j, "num_attention_heads", where, kMaxWidth);
    c.num_key_value_heads = has(j, "num_key_value_heads") ? positive_int(j, "num_key_value_heads", where, kMaxWidth)
                                                          : c.num_attention_heads;
    if (c.num_attention_heads % c.num_key_value_heads != 0)
        fail(where, ": field 'num_key_value_heads' (", c.num_key_value_heads, ") must divide 'num_attention_heads' (",
             c.num_attention_heads, ")");
    if (has(j, "head_dim")) {
        c.head_dim = positive_int(j, "head_dim", where, kMaxWidth);
    } else {
        if (c.hidden_size % c.num_attention_heads != 0)
            fail(where, ": field 'num_attention_heads' (", c.num_attention_heads, ") must divide 'hidden_size' (",
                 c.hidden_size, ") when 'head_dim' is not given");
        c.head_dim = c.hidden_size / c.num_attention_heads;
    }
    if (c.head_dim % 2 != 0) fail(where, ": head dimension must be even for RoPE, got ", c.head_dim);
    if (c.q_dim() > kMaxWidth) fail(where, ": num_attention_heads × head_dim = ", c.q_dim(), " exceeds ", kMaxWidth);
    c.max_position_embeddings =
        has(j, "max_position_embeddings") ? positive_int(j, "max_position_embeddings", where, kMaxPositions) : 32768;
    if (has(j, "rms_norm_eps")) c.rms_norm_eps = json_number(j, "rms_norm_eps", where);
    if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1))
        fail(where, ": field 'rms_norm_eps' must be in (0, 1), got ", c.rms_norm_eps);
    if (has(j, "rope_theta")) c.rope_theta = json_number(j, "rope_theta", where);
    if (!(c.rope_theta > 0 && std::isfinite(c.rope_theta)))
        fail(where, ": field 'rope_theta' must be a positive number, got ", c.rope_theta);
    c.tie_word_embeddings = has(j, "tie_word_embeddings") ? json_bool(j, "tie_word_embeddings", where) : false;
    c.bos_token_id = token_id(j, "bos_token_id", where);
    c.eos_token_id = token_id(j, "eos_token_id", where);
    for (const auto& [name, id] :
         {std::pair{"bos_token_id", c.bos_token_id}, std::pair{"eos_token_id", c.eos_token_id}})
        if (id >= c.vocab_size)
            fail(where, ": field '", name, "' (", id, ") must be a token id below vocab_size (", c.vocab_size, ")");
    if (has(j, "torch_dtype")) {
        c.torch_dtype = json_string(j, "torch_dtype", where);
        if (c.torch_dtype != "bfloat16" && c.torch_dtype != "float16" && c.torch_dtype != "float32")
            fail(where, ": field 'torch_dtype' must be bfloat16, float16 or float32, got \"", c.torch_dtype, "\"");
    }
    return c;
}

json Qwen2Config::to_json() const {
    json j = {
        {"architectures", {"Qwen2ForCausalLM"}},
        {"model_type", "qwen2"},
        {"attention_dropout", 0.0},
        {"hidden_act", "silu"},
        {"hidden_size", hidden_size},
        {"initializer_range", 0.02},
        {"intermediate_size", intermediate_size},
        {"max_position_embeddings", max_position_embeddings},
        {"max_window_layers", num_hidden_layers},
        {"num_attention_heads", num_attention_heads},
        {"num_hidden_layers", num_hidden_layers},
        {"num_key_value_heads", num_key_value_heads},
        {"rms_norm_eps", rms_norm_eps},
        {"rope_theta", rope_theta},
        {"sliding_window", max_position_embeddings},
        {"tie_word_embeddings", tie_word_embeddings},
        {"torch_dtype", torch_dtype},
        {"use_cache", true},
        {"use_sliding_window", false},
        {"vocab_size", vocab_size},
    };
    // Older transformers derive head_dim from the width; write it only when it differs.
    if (head_dim * num_attention_heads != hidden_size) j["head_dim"] = head_dim;
    j["bos_token_id"] = bos_token_id >= 0 ? json(bos_token_id) : json(nullptr);
    j["eos_token_id"] = eos_token_id >= 0 ? json(eos_token_id) : json(nullptr);
    return j;
}

Qwen2Config model_shape(const std::string& name) {
    Qwen2Config c;
    if (name == "qwen2.5-0.5b") {  // SPEC §2: Qwen2.5-0.5B-Instruct
        c.vocab_size = 151936;
        c.hidden_size = 896;
        c.intermediate_size = 4864;
        c.num_hidden_layers = 24;
        c.num_attention_heads = 14;
        c.num_key_value_heads = 2;
        c.head_dim = 64;
        c.max_position_embeddings = 32768;
        c.rms_norm_eps = 1e-6;
        c.rope_theta = 1e6;
        c.tie_word_embeddings = true;
        c.bos_token_id = 151643;
        c.eos_token_id = 151645;
    } else if (name == "tiny") {  // SPEC §10: the embedded default
        c.vocab_size = 512;       // placeholder: init-random uses the tokenizer's size
        c.hidden_size = 256;
        c.intermediate_size = 688;
        c.num_hidden_layers = 4;
        c.num_attention_heads = 4;
        c.num_key_value_heads = 2;
        c.head_dim = 64;
        c.max_position_embeddings = 512;
        c.rms_norm_eps = 1e-6;
        c.rope_theta = 1e4;
        c.tie_word_embeddings = true;
    } else {
        fail("unknown model shape '", name, "'; expected qwen2.5-0.5b or tiny");
    }
    return c;
}

}  // namespace ppolab
