#include "training/peft.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>

#include "model/safetensors.h"
#include "training/learned_io.h"
#include "util/error.h"

namespace ppolab {

namespace {

const std::string kPrefix = "base_model.model.";
const std::string kSuffix = ".weight";

struct LoraName {
    int64_t layer;
    std::string module, proj;
    char which;  // 'A' or 'B'
    std::string pair_key() const { return std::to_string(layer) + "." + proj; }
};

std::optional<LoraName> parse_lora_name(const std::string& name) {
    static const std::regex re(R"(^model\.layers\.(\d{1,6})\.(self_attn|mlp)\.([a-z_]+)\.lora_([AB])$)");
    std::smatch m;
    if (!std::regex_match(name, m, re)) return std::nullopt;
    const std::optional<Proj> proj = find_projection(m[3].str());
    if (!proj || proj_module(*proj) != m[2].str()) return std::nullopt;
    return LoraName{std::stoll(m[1].str()), m[2].str(), m[3].str(), m[4].str()[0]};
}

// Checks a set of LoRA tensors: names, targets, 2-D shapes with rank r, A/B pairs.
void check_lora_tensors(const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors, const PeftInfo& info,
                        const std::string& where) {
    const std::set<std::string> targets(info.targets.begin(), info.targets.end());
    std::map<std::string, std::vector<char>> pairs;
    std::set<std::string> seen;
    for (const auto& [name, shape] : tensors) {
        auto parsed = parse_lora_name(name);
        if (!parsed)
            fail(where, ": tensor '", name,
                 "' is not a LoRA tensor (expected model.layers.{i}.{self_attn|mlp}.{proj}.lora_{A|B}; heads are saved "
                 "with save_learned, not in the PEFT layout)");
        if (!seen.insert(name).second) fail(where, ": tensor '", name, "' appears twice");
        if (!targets.count(parsed->proj))
            fail(where, ": tensor '", name, "' adapts '", parsed->proj, "', which is not in target_modules");
        if (shape.size() != 2)
            fail(where, ": tensor '", name, "' has shape ", shape_string(shape), "; expected 2 dimensions");
        const int64_t r = parsed->which == 'A' ? shape[0] : shape[1];
        if (r != info.rank)
            fail(where, ": tensor '", name, "' has shape ", shape_string(shape),
                 "; its rank dimension should be r = ", info.rank);
        pairs[parsed->pair_key()].push_back(parsed->which);
    }
    for (const auto& [key, which] : pairs)
        if (which.size() != 2)
            fail(where, ": layer.projection ", key, " has lora_", which[0], " without lora_",
                 which[0] == 'A' ? 'B' : 'A');
}

}  // namespace

std::string peft_tensor_name(const std::string& ppolab_name) {
    if (!parse_lora_name(ppolab_name)) fail("'", ppolab_name, "' is not a LoRA tensor name");
    return kPrefix + ppolab_name + kSuffix;
}

std::string ppolab_tensor_name(const std::string& peft_name) {
    const bool framed = peft_name.size() > kPrefix.size() + kSuffix.size() && peft_name.rfind(kPrefix, 0) == 0 &&
                        peft_name.compare(peft_name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
    std::string inner =
        framed ? peft_name.substr(kPrefix.size(), peft_name.size() - kPrefix.size() - kSuffix.size()) : "";
    if (!framed || !parse_lora_name(inner))
        fail("'", peft_name,
             "' is not a PEFT LoRA tensor name (base_model.model.model.layers.{i}.….lora_{A|B}.weight)");
    return inner;
}

json peft_adapter_config(const PeftInfo& info) {
    json alpha = info.alpha == std::floor(info.alpha) && std::fabs(info.alpha) < 1e15
                     ? json(static_cast<int64_t>(info.alpha))
                     : json(info.alpha);
    return json{{"alpha_pattern", json::object()},
                {"auto_mapping", nullptr},
                {"base_model_name_or_path", info.base_model},
                {"bias", "none"},
                {"fan_in_fan_out", false},
                {"inference_mode", true},
                {"init_lora_weights", true},
                {"layers_pattern", nullptr},
                {"layers_to_transform", nullptr},
                {"lora_alpha", alpha},
                {"lora_dropout", info.dropout},
                {"modules_to_save", nullptr},
                {"peft_type", "LORA"},
                {"r", info.rank},
                {"rank_pattern", json::object()},
                {"revision", info.revision.empty() ? json(nullptr) : json(info.revision)},
                {"target_modules", info.targets},
                {"task_type", "CAUSAL_LM"},
                {"use_dora", false},
                {"use_rslora", false}};
}

void export_peft(const fs::path& dir, const ParamList& lora, const PeftInfo& info) {
    const std::string where = "PEFT export '" + dir.string() + "'";
    if (info.rank < 1) fail(where, ": rank must be >= 1, got ", info.rank);
    if (!(info.alpha > 0)) fail(where, ": lora_alpha must be > 0, got ", info.alpha);
    if (fs::exists(dir)) fail(where, ": refusing to overwrite existing folder");
    std::vector<std::pair<std::string, std::vector<int64_t>>> layout;
    for (const ParamRef& p : lora) layout.emplace_back(p.name, p.shape);
    check_lora_tensors(layout, info, where);

    std::vector<TensorToWrite> tensors;
    for (const ParamRef& p : lora)
        tensors.push_back(
            {peft_tensor_name(p.name), "F32", p.shape,
             std::string_view(reinterpret_cast<const char*>(p.data), static_cast<size_t>(p.numel()) * 4)});
    // Build in a hidden sibling, then rename: never a half-written folder.
    std::random_device rd;
    const fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
    const fs::path tmp = parent / ("." + dir.filename().string() + ".tmp" + std::to_string(rd()));
    create_new_directory(tmp);
    try {
        write_json_atomic(tmp / "adapter_config.json", peft_adapter_config(info));
        write_safetensors(tmp / "adapter_model.safetensors", tensors, {{"format", "pt"}});
        if (fs::exists(dir)) fail(where, ": refusing to overwrite existing folder");
        fs::rename(tmp, dir);
    } catch (...) {
        std::error_code ec;
        fs::remove_all(tmp, ec);
        throw;
    }
}

PeftAdapter read_peft(const fs::path& dir) {
    const fs::path config_path = dir / "adapter_config.json";
    const std::string cwhere = config_path.string();
    PeftAdapter out;
    out.config = read_json_file(config_path, InputKind::config);
    const json& c = out.config;
    if (json_string(c, "peft_type", cwhere) != "LORA")
        fail(cwhere, ": peft_type is '", c["peft_type"].get<std::string>(), "'; only LORA adapters are supported");
    out.info.rank = json_int(c, "r", cwhere);
    out.info.alpha = json_number(c, "lora_alpha", cwhere);
    if (c.contains("lora_dropout")) out.info.dropout = json_number(c, "lora_dropout", cwhere);
    if (out.info.rank < 1) fail(cwhere, ": field 'r' must be >= 1, got ", out.info.rank);
    const json& targets = json_field(c, "target_modules", cwhere);
    if (!targets.is_array())
        fail(cwhere, ": field 'target_modules' must be a list of module names (a regex string is not supported), got ",
             targets.type_name());
    out.info.targets.clear();
    for (const json& t : targets) {
        if (!t.is_string()) fail(cwhere, ": field 'target_modules' must hold strings, got ", t.dump());
        if (!find_projection(t.get<std::string>()))
            fail(cwhere, ": target module '", t.get<std::string>(),
                 "' is not a Qwen2 projection (q/k/v/o/gate/up/down_proj)");
        out.info.targets.push_back(t.get<std::string>());
    }
    // Variants whose arithmetic differs from y = Wx + (alpha/r)·B(Ax) are refused, not misread.
    if (c.contains("bias") && c["bias"] != "none")
        fail(cwhere, ": bias is ", c["bias"].dump(), "; only \"none\" is supported");
    for (const char* flag : {"fan_in_fan_out", "use_rslora", "use_dora"})
        if (c.contains(flag) && c[flag] != false)
            fail(cwhere, ": ", flag, " is ", c[flag].dump(), "; only false is supported");
    for (const char* pattern : {"rank_pattern", "alpha_pattern"})
        if (c.contains(pattern) && !c[pattern].is_null() && !c[pattern].empty())
            fail(cwhere, ": ", pattern, " is not empty; per-module ranks are not supported");
    if (c.contains("lora_bias") && c["lora_bias"] != false)
        fail(cwhere, ": lora_bias is ", c["lora_bias"].dump(), "; only false is supported");
    for (const char* field : {"modules_to_save", "layer_replication"})
        if (c.contains(field) && !c[field].is_null() && !c[field].empty())
            fail(cwhere, ": ", field, " is ", c[field].dump(), "; only null is supported (LoRA tensors only)");
    if (c.contains("base_model_name_or_path") && c["base_model_name_or_path"].is_string())
        out.info.base_model = c["base_model_name_or_path"].get<std::string>();
    if (c.contains("revision") && c["revision"].is_string()) out.info.revision = c["revision"].get<std::string>();

    const fs::path model_path = dir / "adapter_model.safetensors";
    SafetensorsFile file = SafetensorsFile::open(model_path);
    std::vector<std::pair<std::string, std::vector<int64_t>>> layout;
    for (const SafetensorsTensor& t : file.tensors()) {
        std::string name;
        try {
            name = ppolab_tensor_name(t.name);
        } catch (const Error& e) {
            fail(model_path.string(), ": ", e.what());
        }
        layout.emplace_back(name, t.shape);
        out.tensors.push_back(NamedTensor{name, t.shape, tensor_to_f32(t, model_path.string())});
    }
    check_lora_tensors(layout, out.info, model_path.string());
    return out;
}

LoraAdapters lora_from_peft(const PeftAdapter& adapter, const Qwen2Config& model, const std::string& where) {
    LoraConfig lc;
    lc.rank = adapter.info.rank;
    lc.alpha = adapter.info.alpha;
    lc.targets = adapter.info.targets;
    LoraAdapters lora(model, lc, 0);
    ParamList params = lora.parameters();
    std::map<std::string, ParamRef*> slot;
    for (ParamRef& p : params) {
        slot[p.name] = &p;
        if (p.name.ends_with("lora_B")) std::fill_n(p.data, p.numel(), 0.f);  // not in the file: no change
    }
    for (const NamedTensor& t : adapter.tensors) {
        auto it = slot.find(t.name);
        if (it == slot.end())
            fail(where, ": tensor '", t.name, "' has no place in this model (", model.num_hidden_layers,
                 " layers; targets from target_modules)");
        ParamRef& p = *it->second;
        if (t.shape != p.shape)
            fail(where, ": tensor '", t.name, "' has shape ", shape_string(t.shape), "; this model expects ",
                 shape_string(p.shape));
        std::copy(t.values.begin(), t.values.end(), p.data);
    }
    return lora;
}

LoraAdapters load_adapters(const fs::path& path, const Qwen2Config& model) {
    if (fs::is_directory(path) && fs::exists(path / "adapter_config.json"))
        return lora_from_peft(read_peft(path), model, path.string());
    const fs::path file = fs::is_directory(path) ? path / "learned.safetensors" : path;
    LearnedFile stored = read_learned(file);
    const json& l = json_field(stored.info, "lora", file.string());
    LoraConfig lc;
    lc.rank = json_int(l, "rank", file.string());
    lc.alpha = json_number(l, "alpha", file.string());
    lc.targets = json_field(l, "targets", file.string()).get<std::vector<std::string>>();
    LoraAdapters adapters(model, lc, 0);
    ParamList params = adapters.parameters();
    std::vector<NamedTensor> lora;
    for (const NamedTensor& t : stored.tensors)
        if (t.name.rfind("head.", 0) != 0) lora.push_back(t);
    restore_params(lora, params, file.string());
    return adapters;
}

}  // namespace ppolab
