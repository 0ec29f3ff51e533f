#include "training/roles.h"

#include <algorithm>

#include "parallel/world.h"
#include "training/identity.h"
#include "training/learned_io.h"
#include "training/peft.h"
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

RoleView isolation_view(Role& r, bool frozen) {
    ParamList p = r.parameters();
    if (frozen)
        for (ParamRef& q : p) q.grad = nullptr;
    return RoleView{r.name, p, frozen};
}

void Role::zero_grad() {
    lora.zero_grad();
    if (head) head->zero_grad();
}

LoraConfig lora_config_from(const LoraSection& lora) {
    LoraConfig c;
    c.rank = lora.rank;
    c.alpha = static_cast<double>(lora.alpha);
    c.targets = lora.targets;
    if (lora.dropout != 0.0)
        fail("config: lora.dropout must be 0 (ppolab implements LoRA without dropout), got ", lora.dropout);
    return c;
}

// The config's LoRA settings checked against the model: the rank r of an
// adapter (r, in) x (out, r) is at most min(in, out) of every targeted
// projection (a larger r adds no expressive power and, unchecked, could ask
// for more memory than exists).
static LoraConfig study_lora_config(const Study& study) {
    LoraConfig c = lora_config_from(study.cfg.lora);
    int64_t bound = 0;
    std::string which;
    for (const std::string& t : c.targets) {
        const Proj p = proj_from_name(t);
        const int64_t in = proj_in_features(study.base.config, p), out = proj_out_features(study.base.config, p);
        if (which.empty() || std::min(in, out) < bound) {
            bound = std::min(in, out);
            which = t + " (" + std::to_string(in) + " -> " + std::to_string(out) + ")";
        }
    }
    if (c.rank > bound)
        fail("config: 'lora.rank' must be <= ", bound, " on the model ", study.model_dir.string(),
             " (the smallest dimension of the targeted projections: ", which, "), got ", c.rank);
    return c;
}

static void check_counts(const Study& study, const Role& role) {
    const LoraConfig lc = role.lora.config();
    const int64_t lora_params = LoraAdapters::count_parameters(study.base.config, lc);
    if (const OptionalInt want = study.cfg.lora.parameters_per_role; want && *want != lora_params)
        fail("role ", role.name, ": ", lora_params, " LoRA parameters over ", role.lora.num_adapted(),
             " projections; config lora.parameters_per_role expects ", *want);
    if (role.lora.num_parameters() != lora_params)
        fail("role ", role.name, ": LoRA holds ", role.lora.num_parameters(), " parameters, expected ", lora_params);
    if (const OptionalInt want = study.cfg.heads.parameters; role.head && want && role.head->num_parameters() != *want)
        fail("role ", role.name, ": head has ", role.head->num_parameters(),
             " parameters; config heads.parameters expects ", *want);
}

Role make_role(const Study& study, const std::string& name, RoleKind kind, uint64_t adapter_seed, uint64_t head_seed) {
    Role r;
    r.name = name;
    r.kind = kind;
    r.lora = LoraAdapters(study.base.config, study_lora_config(study), adapter_seed);
    const int64_t H = study.base.config.hidden_size;
    if (kind == RoleKind::reward) r.head = ScalarHead::reward_init(H, head_seed, study.cfg.heads.reward_weight_std);
    else if (kind == RoleKind::critic) r.head = ScalarHead::zeros(H);
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
    if (!parallel::world().writer()) return;  // rank 0 writes; every rank holds the same role
    if (fs::exists(dir)) fail("refusing to overwrite existing learned state ", dir.string());
    fs::path tmp = dir.parent_path() / ("." + dir.filename().string() + ".partial");
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    const LoraConfig& lc = role.lora.config();
    json info{{"role", role.name},
              {"kind", kind_name(role.kind)},
              {"lora", {{"rank", lc.rank}, {"alpha", lc.alpha}, {"targets", lc.targets}}},
              {"identity", identity}};
    const std::string learned = save_learned(tmp / "learned.safetensors", role.parameters(), info);
    PeftInfo peft;
    peft.rank = lc.rank;
    peft.alpha = lc.alpha;
    peft.targets = lc.targets;
    // The base's name as the config gives it (generic preset: null, so the folder).
    peft.base_model = study.cfg.model.name_or_path.value_or(study.model_dir.string());
    peft.revision = study.cfg.model.revision.value_or("");
    export_peft(tmp / "peft", role.lora.parameters(), peft);
    fs::rename(tmp, dir);
    // Reload and check: what is on disk is what was learned.
    Role back = load_role(dir, role.name, role.kind, study);
    if (back.learned_identity() != learned)
        fail("reloaded learned state ", dir.string(), " differs from the trained one");
}

Role load_role(const fs::path& dir, const std::string& name, RoleKind kind, const Study& study) {
    // Through the stage's guard: a learned state outside its roots is refused.
    const fs::path file = study.reader().resolve(dir / "learned.safetensors");
    LearnedFile stored = read_learned(file);
    const std::string where = file.string();
    const std::string stored_kind = json_string(stored.info, "kind", where);
    const LoraConfig lc = study_lora_config(study);
    const json& l = json_field(stored.info, "lora", where);
    if (json_int(l, "rank", where) != lc.rank || json_number(l, "alpha", where) != lc.alpha ||
        json_field(l, "targets", where).get<std::vector<std::string>>() != lc.targets)
        fail(where, ": LoRA rank/alpha/targets ", l.dump(), " differ from the config's");
    Role r;
    r.name = name;
    r.kind = kind;
    r.lora = LoraAdapters(study.base.config, lc, 0);
    if (stored_kind != "policy") r.head = ScalarHead::zeros(study.base.config.hidden_size);
    load_learned(file, r.parameters(), &stored.identity);
    // Roles change kind on purpose (a critic from the SFT policy gets a zero
    // value head; a policy copy of a judge would drop its head).
    if (kind == RoleKind::policy) r.head.reset();
    if (kind == RoleKind::critic && stored_kind != "critic") r.head = ScalarHead::zeros(study.base.config.hidden_size);
    check_counts(study, r);
    return r;
}

RoleModel::RoleModel(const Study& study, Role r)
    : role(std::move(r)), initial_identity(role.learned_identity()), model(study.base, &role.lora), scorer(model) {}

RoleModel::RoleModel(const Study& study, const fs::path& dir, const std::string& name, RoleKind kind)
    : RoleModel(study, load_role(dir, name, kind, study)) {}

FrozenJudge::FrozenJudge(const Study& study, const fs::path& dir)
    : study_(study), judge_(study, dir, "reward", RoleKind::reward) {}

FrozenJudge::Scores FrozenJudge::score(const std::vector<int32_t>& prompt, const std::vector<int32_t>& chosen,
                                       const std::vector<int32_t>& rejected) {
    const ScoringBatch b = study_.pair_batch({ScoringRow{prompt, chosen}, ScoringRow{prompt, rejected}});
    float s[2];
    judge_.scorer.reward_scores(b, *judge_.role.head, s, false);
    return {s[0], s[1]};
}

void FrozenJudge::check_unchanged(const std::string& what) {
    if (judge_.changed()) fail(what, ": the judge changed while scoring");
}

}  // namespace ppolab
