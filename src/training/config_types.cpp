#include "training/config_types.h"

#include <cmath>
#include <sstream>
#include <type_traits>
#include <variant>

#include "kernels/numerics.h"
#include "model/tensor_table.h"
#include "training/study_config.h"
#include "util/error.h"

namespace ppolab {

namespace {

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
    return out;
}

std::string range_text(const FieldCheck& c) {
    std::ostringstream s;
    s << (c.lo_open ? "(" : "[") << c.lo << ", " << c.hi << "]";
    return s.str();
}

}  // namespace

namespace field {

FieldCheck any() { return {}; }

FieldCheck count(int64_t min) { return count(min, kMaxConfigCount); }

FieldCheck count(int64_t min, int64_t max) {
    FieldCheck c;
    c.type = FieldCheck::Type::count;
    c.min = min;
    c.max = max;
    return c;
}

FieldCheck range(double lo, double hi) {
    FieldCheck c;
    c.type = FieldCheck::Type::range;
    c.lo = lo;
    c.hi = hi;
    return c;
}

FieldCheck above(double lo, double hi) {
    FieldCheck c = range(lo, hi);
    c.lo_open = true;
    return c;
}

FieldCheck one_of(std::vector<std::string> names) {
    FieldCheck c;
    c.type = FieldCheck::Type::one_of;
    c.names = std::move(names);
    return c;
}

FieldCheck subset_of(std::vector<std::string> names) {
    FieldCheck c = one_of(std::move(names));
    c.type = FieldCheck::Type::subset_of;
    return c;
}

}  // namespace field

const std::vector<std::string>& lora_target_names() {
    static const std::vector<std::string> names = projection_names();  // the one list (model/tensor_table.h)
    return names;
}

namespace field {

std::string describe(const FieldCheck& c) {
    switch (c.type) {
        case FieldCheck::Type::none: return "";
        case FieldCheck::Type::count:
            return "an integer >= " + std::to_string(c.min) + " and <= " + std::to_string(c.max);
        case FieldCheck::Type::range: return "in " + range_text(c);
        case FieldCheck::Type::one_of: return "one of " + join(c.names);
        case FieldCheck::Type::subset_of: return "a non-empty list of " + join(c.names);
    }
    return "";
}

}  // namespace field

namespace {

// ---- one field: member pointer, read, check, write --------------------------------------------

template <class S>
using MemberPtr = std::variant<int64_t S::*, double S::*, bool S::*, std::string S::*, ConfigNames S::*,
                               OptionalInt S::*, OptionalString S::*>;

template <class S>
struct Field {
    const char* name;  // the key inside its section
    MemberPtr<S> member;
    const char* unit;
    FieldCheck check;
    const char* meaning;
};

#define PPOLAB_CONFIG_FIELD(type, member, unit, check, meaning) \
    Field<Section>{#member, &Section::member, unit, check, meaning},

template <class S>
const std::vector<Field<S>>& fields_of();

// Struct is a type (a template argument), so it cannot be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define PPOLAB_FIELD_TABLE(Struct, LIST)                                             \
    template <>                                                                      \
    const std::vector<Field<Struct>>& fields_of<Struct>() {                          \
        using Section = Struct;                                                      \
        static const std::vector<Field<Struct>> table = {LIST(PPOLAB_CONFIG_FIELD)}; \
        return table;                                                                \
    }
// NOLINTEND(bugprone-macro-parentheses)

PPOLAB_FIELD_TABLE(CorpusSection, PPOLAB_CORPUS_FIELDS)
PPOLAB_FIELD_TABLE(ModelSection, PPOLAB_MODEL_FIELDS)
PPOLAB_FIELD_TABLE(PretrainSection, PPOLAB_PRETRAIN_FIELDS)
PPOLAB_FIELD_TABLE(LoraSection, PPOLAB_LORA_FIELDS)
PPOLAB_FIELD_TABLE(HeadsConfig, PPOLAB_HEADS_FIELDS)
PPOLAB_FIELD_TABLE(LimitsConfig, PPOLAB_LIMITS_FIELDS)
PPOLAB_FIELD_TABLE(AdamWSection, PPOLAB_ADAMW_FIELDS)
PPOLAB_FIELD_TABLE(SftConfig, PPOLAB_SFT_FIELDS)
PPOLAB_FIELD_TABLE(JudgeConfig, PPOLAB_JUDGE_FIELDS)
PPOLAB_FIELD_TABLE(PpoConfig, PPOLAB_PPO_FIELDS)
PPOLAB_FIELD_TABLE(DpoConfig, PPOLAB_DPO_FIELDS)
PPOLAB_FIELD_TABLE(RlConfig, PPOLAB_RL_FIELDS)
PPOLAB_FIELD_TABLE(EvaluationConfig, PPOLAB_EVALUATION_FIELDS)
PPOLAB_FIELD_TABLE(FeedbackConfig, PPOLAB_FEEDBACK_FIELDS)
PPOLAB_FIELD_TABLE(CheckpointConfig, PPOLAB_CHECKPOINT_FIELDS)
PPOLAB_FIELD_TABLE(ParallelSection, PPOLAB_PARALLEL_FIELDS)
PPOLAB_FIELD_TABLE(EngineSection, PPOLAB_ENGINE_FIELDS)
PPOLAB_FIELD_TABLE(StudySection, PPOLAB_STUDY_FIELDS)
PPOLAB_FIELD_TABLE(ReplicatesSection, PPOLAB_REPLICATES_FIELDS)
PPOLAB_FIELD_TABLE(StudyConfig, PPOLAB_TOP_FIELDS)

template <class T>
const char* type_name() {
    if constexpr (std::is_same_v<T, int64_t>) return "integer";
    else if constexpr (std::is_same_v<T, double>) return "number";
    else if constexpr (std::is_same_v<T, bool>) return "boolean";
    else if constexpr (std::is_same_v<T, std::string>) return "string";
    else if constexpr (std::is_same_v<T, ConfigNames>) return "list of strings";
    else if constexpr (std::is_same_v<T, OptionalInt>) return "integer or null";
    else return "string or null";
}

// Reads `key` with the kind of T; errors are config_int & co.'s.
template <class T>
T read_value(const json& c, const std::string& key) {
    if constexpr (std::is_same_v<T, int64_t>) return config_int(c, key);
    else if constexpr (std::is_same_v<T, double>) return config_number(c, key);
    else if constexpr (std::is_same_v<T, bool>) return config_bool(c, key);
    else if constexpr (std::is_same_v<T, std::string>) return config_string(c, key);
    else if constexpr (std::is_same_v<T, OptionalInt>) return config_optional_int(c, key);
    else if constexpr (std::is_same_v<T, OptionalString>) {
        if (config_at(c, key).is_null()) return std::nullopt;
        return config_string(c, key);
    } else {
        const json& v = config_at(c, key);
        if (!v.is_array()) fail("config: '", key, "' must be a list of strings, got ", v.type_name(), " ", v.dump());
        ConfigNames names;
        for (const json& x : v) {
            if (!x.is_string()) fail("config: '", key, "' must be a list of strings, got ", v.dump());
            names.push_back(x.get<std::string>());
        }
        return names;
    }
}

template <class T>
json write_value(const T& v) {
    if constexpr (std::is_same_v<T, OptionalInt> || std::is_same_v<T, OptionalString>) {
        return v ? json(*v) : json(nullptr);
    } else {
        return json(v);
    }
}

void check_count(const std::string& key, int64_t x, const FieldCheck& c, const char* null_or) {
    if (x < c.min) fail("config: '", key, "' must be ", null_or, ">= ", c.min, ", got ", x);
    if (x > c.max)
        fail("config: '", key, "' must be ", null_or, "<= ", c.max,
             c.max == kMaxConfigCount ? " (the bound of every count)" : " (the bound of this count: it sizes memory)",
             ", got ", x);
}

void check_range(const std::string& key, double x, const FieldCheck& c) {
    if (!std::isfinite(x) || (c.lo_open ? !(x > c.lo) : !(x >= c.lo)) || !(x <= c.hi))
        fail("config: '", key, "' must be in ", c.lo_open ? "(" : "[", c.lo, ", ", c.hi, "], got ", x);
}

template <class T>
void check_value(const std::string& key, const T& v, const FieldCheck& c) {
    using Type = FieldCheck::Type;
    if (c.type == Type::none) return;
    if constexpr (std::is_same_v<T, int64_t>) {
        if (c.type == Type::count) check_count(key, v, c, "");
        if (c.type == Type::range) check_range(key, double(v), c);
    } else if constexpr (std::is_same_v<T, OptionalInt>) {
        if (v && c.type == Type::count) check_count(key, *v, c, "null or ");
    } else if constexpr (std::is_same_v<T, double>) {
        if (c.type == Type::range) check_range(key, v, c);
    } else if constexpr (std::is_same_v<T, std::string>) {
        if (c.type == Type::one_of) {
            for (const std::string& a : c.names)
                if (v == a) return;
            fail("config: '", key, "' must be one of ", join(c.names), "; got '", v, "'");
        }
    } else if constexpr (std::is_same_v<T, ConfigNames>) {
        if (c.type != Type::subset_of) return;
        if (v.empty()) fail("config: '", key, "' must be a non-empty list");
        for (const std::string& x : v) {
            bool known = false;
            for (const std::string& a : c.names) known = known || x == a;
            if (!known) fail("config: '", key, "' holds ", json(x).dump(), "; expected names among ", join(c.names));
        }
    }
}

std::string key_of(const std::string& section, const char* name) {
    return section.empty() ? std::string(name) : section + "." + name;
}

// Reads and checks every field of one section (`section` "" for the top level).
template <class S>
void read_section(const json& c, const std::string& section, S& out) {
    for (const Field<S>& f : fields_of<S>())
        std::visit(
            [&](auto ptr) {
                auto& member = out.*ptr;
                const std::string key = key_of(section, f.name);
                member = read_value<std::remove_reference_t<decltype(member)>>(c, key);
                check_value(key, member, f.check);
            },
            f.member);
}

template <class S>
void write_section(const S& in, json& out) {
    for (const Field<S>& f : fields_of<S>())
        std::visit([&](auto ptr) { out[f.name] = write_value(in.*ptr); }, f.member);
}

template <class S>
void document_section(const std::string& section, std::vector<ConfigFieldDoc>& out) {
    for (const Field<S>& f : fields_of<S>())
        std::visit(
            [&](auto ptr) {
                using T = std::remove_reference_t<decltype(std::declval<S&>().*ptr)>;
                out.push_back({key_of(section, f.name), type_name<T>(), f.unit, f.meaning, field::describe(f.check)});
            },
            f.member);
}

template <class S>
std::vector<std::string> names_of() {
    std::vector<std::string> names;
    for (const Field<S>& f : fields_of<S>()) names.push_back(f.name);
    return names;
}

// Every section, in StudyConfig's (and the presets') order: calls
// f(name, meaning, member pointer).
template <class F>
void for_each_section(F&& f) {
    f("study", "the chain's seed, from which every stage seed derives", &StudyConfig::study);
    f("replicates", "independent chains of one study (outside the config hash)", &StudyConfig::replicates);
    f("corpus", "the synthetic OfficeHelpPrefs corpus (SPEC §1)", &StudyConfig::corpus);
    f("model", "the frozen base model every role adapts (SPEC §2)", &StudyConfig::model);
    f("pretrain", "pretraining the tiny base model from scratch (SPEC §10)", &StudyConfig::pretrain);
    f("lora", "the adapters every role trains (SPEC §2)", &StudyConfig::lora);
    f("heads", "the scalar heads of the judge and the critic (SPEC §2)", &StudyConfig::heads);
    f("limits", "token budgets; a row over them is refused, never truncated (SPEC §3)", &StudyConfig::limits);
    f("adamw", "the optimiser's moments, shared by every stage (SPEC §3)", &StudyConfig::adamw);
    f("sft", "supervised fine-tuning of the policy adapter (SPEC §3)", &StudyConfig::sft);
    f("reward", "the Bradley-Terry judge (SPEC §3)", &StudyConfig::reward);
    f("ppo", "PPO of the actor and critic against the judge (SPEC §4-§5)", &StudyConfig::ppo);
    f("dpo", "DPO of a policy from SFT on the train pairs, the frozen SFT as reference (SPEC §12)", &StudyConfig::dpo);
    f("rl", "the critic-free group baselines RLOO and GRPO against the frozen judge (SPEC §12)", &StudyConfig::rl);
    f("evaluation", "generations of every policy on held-out prompts (SPEC §6)", &StudyConfig::evaluation);
    f("feedback", "the preference labels the judge learns from (SPEC §8)", &StudyConfig::feedback);
    f("checkpoint", "how often resume states are written (0: never; outside the config hash)",
      &StudyConfig::checkpoint);
    f("parallel", "how an update's work is cut for data-parallel ranks (SPEC §13)", &StudyConfig::parallel);
    f("engine", "how the numbers are computed: the canonical arithmetic or the CPU's fastest", &StudyConfig::engine);
}

// An object whose keys are exactly `known`: unknown keys are refused with
// merge_config's message, missing ones with config_at's.
void check_keys(const json& obj, const std::string& path, const std::vector<std::string>& known) {
    const std::string at = path.empty() ? "(top level)" : "'" + path + "'";
    if (!obj.is_object()) fail("config: key ", at, " must be an object, got ", obj.type_name());
    for (auto& [key, value] : obj.items()) {
        bool found = false;
        for (const std::string& k : known) found = found || k == key;
        if (!found)
            fail("config: unknown config key '", path.empty() ? key : path + "." + key, "' (keys",
                 path.empty() ? "" : " under '" + path + "'", ": ", join(known), ")");
    }
    for (const std::string& k : known)
        if (!obj.contains(k)) fail("config: missing key '", path.empty() ? k : path + "." + k, "'");
}

// The checks that involve two fields.
void check_across_fields(const StudyConfig& s) {
    // The model's own bound (the smallest dimension of a targeted
    // projection) is checked where the adapters are built (make_role).
    if (s.lora.rank > kMaxLoraRank)
        fail("config: 'lora.rank' must be <= ", kMaxLoraRank,
             " (and at most the smallest dimension of the "
             "targeted projections), got ",
             s.lora.rank);
    if (s.limits.max_context < s.limits.max_response + 1)
        fail("config: 'limits.max_context' (", s.limits.max_context,
             ") must leave room for a prompt token and 'limits.max_response' (", s.limits.max_response, ")");
    if (s.feedback.train_fraction + s.feedback.validation_fraction > 1.0)
        fail("config: 'feedback.train_fraction' + 'feedback.validation_fraction' must be <= 1 (the rest is test), got ",
             s.feedback.train_fraction + s.feedback.validation_fraction);
}

}  // namespace

void engine_apply(const EngineSection& engine) {
    numerics_set_mode(numerics_parse(engine.numerics, "config engine.numerics"));
}

StudyConfig StudyConfig::parse(const json& c) {
    std::vector<std::string> top = names_of<StudyConfig>();
    for_each_section([&](const char* name, const char*, auto) { top.push_back(name); });
    check_keys(c, "", top);
    StudyConfig s;
    read_section(c, "", s);
    for_each_section([&](const char* name, const char*, auto ptr) {
        using S = std::remove_reference_t<decltype(s.*ptr)>;
        check_keys(c[name], name, names_of<S>());
        read_section(c, name, s.*ptr);
    });
    check_across_fields(s);
    return s;
}

json StudyConfig::to_json() const {
    json out = json::object();
    write_section(*this, out);
    for_each_section([&](const char* name, const char*, auto ptr) {
        json section = json::object();
        write_section(this->*ptr, section);
        out[name] = std::move(section);
    });
    return out;
}

std::vector<ConfigFieldDoc> config_field_docs() {
    std::vector<ConfigFieldDoc> docs;
    document_section<StudyConfig>("", docs);
    for_each_section([&](const char* name, const char*, auto ptr) {
        using S = std::remove_reference_t<decltype(std::declval<StudyConfig&>().*ptr)>;
        document_section<S>(name, docs);
    });
    return docs;
}

std::vector<ConfigSectionDoc> config_section_docs() {
    std::vector<ConfigSectionDoc> docs;
    for_each_section([&](const char* name, const char* meaning, auto) { docs.push_back({name, meaning}); });
    return docs;
}

}  // namespace ppolab
