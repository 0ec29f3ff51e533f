#include "training/roles.h"

#include "model/safetensors.h"
#include "training/identity.h"
#include "training/study_config.h"
#include "training/tensors.h"
#include "util/error.h"

namespace ppolab {

ParamList Role::parameters() {
    ParamList params = lora.parameters();
    if (head) {
        ParamList h = head->parameters();
        params.insert(params.end(), h.begin(), h.end());
    }
    return params;
}

std::string Role::learned_identity() { return ppolab::learned_identity(parameters()); }

void Role::zero_grad() {
    lora.zero_grad();
    if (head) head->zero_grad();
}

LoraConfig lora_config_from(const json& config) {
    LoraConfig c;
    c.rank = config_int(config, "lora.rank");
    c.alpha = config_number(config, "lora.alpha");
    c.targets = config_at(config, "lora.targets").get<std::vector<std::string>>();
    if (config_number(config, "lora.dropout") != 0.0)
        fail("config: lora.dropout must be 0 (ppolab implements LoRA without dropout), got ",
             config_number(config, "lora.dropout"));
    return c;
}

static void check_counts(const Study& study, const Role& role) {
    const LoraConfig lc = role.lora.config();
    const int64_t lora_params = LoraAdapters::count_parameters(study.base.config, lc);
    if (auto want = config_optional_int(study.config, "lora.parameters_per_role"); want && *want != lora_params)
        fail("role ", role.name, ": ", lora_params, " LoRA parameters over ", role.lora.num_adapted(),
             " projections; config lora.parameters_per_role expects ", *want);
    if (role.lora.num_parameters() != lora_params)
        fail("role ", role.name, ": LoRA holds ", role.lora.num_parameters(), " parameters, expected ", lora_params);
    if (role.head) {
        const int64_t want = config_int(study.config, "heads.parameters");
        if (role.head->num_parameters() != want)
            fail("role ", role.name, ": head has ", role.head->num_parameters(),
                 " parameters; config heads.parameters expects ", want);
    }
}

Role make_role(const Study& study, const std::string& name, RoleKind kind, uint64_t adapter_seed,
               uint64_t head_seed) {
    Role r;
    r.name = name;
    r.kind = kind;
    r.lora = LoraAdapters(study.base.config, lora_config_from(study.config), adapter_seed);
    const int64_t H = study.base.config.hidden_size;
    if (kind == RoleKind::reward)
        r.head = ScalarHead::reward_init(H, head_seed, config_number(study.config, "heads.reward_weight_std"));
    else if (kind == RoleKind::critic)
        r.head = ScalarHead::zeros(H);
    check_counts(study, r);
    return r;
}

Role clone_role(const Role& from, const std::string& name, RoleKind kind, const Study& study) {
    Role r;
    r.name = name;
    r.kind = kind;
    r.lora = from.lora.clone();
    if (kind == RoleKind::critic) {
        r.head = ScalarHead::zeros(study.base.config.hidden_size);
    } else if (from.head) {
        r.head = ScalarHead::zeros(from.head->hidden);
        r.head->weight = from.head->weight;
        r.head->bias = from.head->bias;
    }
    check_counts(study, r);
    return r;
}

static const char* kind_name(RoleKind k) {
    return k == RoleKind::policy ? "policy" : k == RoleKind::reward ? "reward" : "critic";
}

void save_role(const fs::path& dir, Role& role, const json& identity, const Study& study) {
    if (fs::exists(dir)) fail("refusing to overwrite existing learned state ", dir.string());
    ParamList params = role.parameters();
    std::vector<TensorToWrite> tensors;
    for (const ParamRef& p : params)
        tensors.push_back({p.name, "F32", p.shape,
                           std::string_view(reinterpret_cast<const char*>(p.data), static_cast<size_t>(p.numel()) * 4)});
    const std::string learned = learned_identity(params);
    json meta{{"role", role.name},
              {"kind", kind_name(role.kind)},
              {"learned_identity", learned},
              {"lora", {{"rank", role.lora.config().rank},
                        {"alpha", role.lora.config().alpha},
                        {"targets", role.lora.config().targets}}},
              {"identity", identity}};
    fs::path tmp = dir.parent_path() / ("." + dir.filename().string() + ".partial");
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    write_safetensors(tmp / "learned.safetensors", tensors, {{"ppolab_learned_state", meta.dump()}});
    // PEFT layout of the adapters, for other tools.
    std::vector<TensorToWrite> peft;
    for (const ParamRef& p : role.lora.parameters()) {
        std::string name = "base_model.model." + p.name + ".weight";
        peft.push_back({name, "F32", p.shape,
                        std::string_view(reinterpret_cast<const char*>(p.data), static_cast<size_t>(p.numel()) * 4)});
    }
    json adapter_config{{"peft_type", "LORA"},
                        {"task_type", "CAUSAL_LM"},
                        {"base_model_name_or_path", config_string(study.config, "model.name_or_path")},
                        {"revision", config_at(study.config, "model.revision")},
                        {"r", role.lora.config().rank},
                        {"lora_alpha", role.lora.config().alpha},
                        {"lora_dropout", 0.0},
                        {"target_modules", role.lora.config().targets},
                        {"bias", "none"},
                        {"fan_in_fan_out", false},
                        {"inference_mode", true},
                        {"init_lora_weights", true},
                        {"use_rslora", false},
                        {"use_dora", false},
                        {"modules_to_save", nullptr}};
    write_safetensors(tmp / "peft" / "adapter_model.safetensors", peft, {{"format", "pt"}});
    write_json_atomic(tmp / "peft" / "adapter_config.json", adapter_config);
    fs::rename(tmp, dir);
    // Reload and check: what is on disk is what was learned.
    Role back = load_role(dir, role.name, role.kind, study);
    if (back.learned_identity() != learned)
        fail("reloaded learned state ", dir.string(), " differs from the trained one");
}

Role load_role(const fs::path& dir, const std::string& name, RoleKind kind, const Study& study) {
    const fs::path file = dir / "learned.safetensors";
    SafetensorsFile st = SafetensorsFile::from_bytes(study.reader().read(file), file.string());
    auto it = st.metadata().find("ppolab_learned_state");
    if (it == st.metadata().end()) fail(file.string(), ": no ppolab_learned_state metadata");
    json meta = parse_json(it->second, file.string() + " metadata");
    Role r;
    r.name = name;
    r.kind = kind;
    const std::string stored_kind = json_string(meta, "kind", file.string());
    const RoleKind source = stored_kind == "reward" ? RoleKind::reward
                            : stored_kind == "critic" ? RoleKind::critic
                                                      : RoleKind::policy;
    LoraConfig lc = lora_config_from(study.config);
    const json& l = json_field(meta, "lora", file.string());
    if (json_int(l, "rank", file.string()) != lc.rank || json_number(l, "alpha", file.string()) != lc.alpha ||
        json_field(l, "targets", file.string()).get<std::vector<std::string>>() != lc.targets)
        fail(file.string(), ": LoRA rank/alpha/targets ", l.dump(), " differ from the config's");
    r.lora = LoraAdapters(study.base.config, lc, 0);
    if (source == RoleKind::reward || source == RoleKind::critic) r.head = ScalarHead::zeros(study.base.config.hidden_size);
    ParamList params = r.parameters();
    std::vector<NamedTensor> tensors;
    for (const SafetensorsTensor& t : st.tensors()) {
        if (t.dtype != "F32") fail(file.string(), ": tensor '", t.name, "' has dtype ", t.dtype, "; expected F32");
        NamedTensor n{t.name, t.shape, tensor_to_f32(t, file.string())};
        tensors.push_back(std::move(n));
    }
    // File order is by offset; put the tensors in parameter order.
    std::vector<NamedTensor> ordered;
    for (const ParamRef& p : params) {
        auto f = std::find_if(tensors.begin(), tensors.end(), [&](const NamedTensor& t) { return t.name == p.name; });
        if (f == tensors.end()) fail(file.string(), ": missing learned tensor '", p.name, "'");
        ordered.push_back(*f);
    }
    if (tensors.size() != params.size())
        fail(file.string(), ": holds ", tensors.size(), " tensors; expected ", params.size());
    restore_params(ordered, params, file.string());
    if (r.learned_identity() != json_string(meta, "learned_identity", file.string()))
        fail(file.string(), ": learned identity recomputed from the tensors differs from the recorded one");
    // Roles change kind on purpose (critic from the SFT policy); a head is
    // kept only where the new kind has one.
    if (kind == RoleKind::policy) r.head.reset();
    if (kind == RoleKind::critic && !r.head) r.head = ScalarHead::zeros(study.base.config.hidden_size);
    return r;
}

}  // namespace ppolab
