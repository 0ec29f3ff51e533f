// roles.h — the learned state of one role on the shared frozen base
// (SPEC §2): its own LoRA adapters and, for the reward model and the
// critic, a scalar head. The base is shared read-only (a declared deviation
// from the seed, which copies the backbone per role: it saves memory and
// changes no number); adapters, heads and optimiser state never are.
#pragma once
#include <optional>
#include <string>

#include "model/heads.h"
#include "model/lora.h"
#include "model/qwen2.h"
#include "model/scoring.h"
#include "training/identity.h"
#include "training/study.h"

namespace ppolab {

enum class RoleKind { policy, reward, critic };  // actor/reference/SFT policy, judge, critic

struct Role {
    std::string name;
    RoleKind kind = RoleKind::policy;
    LoraAdapters lora;
    std::optional<ScalarHead> head;

    ParamList parameters();  // LoRA in order, then head.weight, head.bias
    std::string learned_identity();
    void zero_grad();
};

// The LoRA settings of the typed config (Error unless lora.dropout is 0).
LoraConfig lora_config_from(const LoraSection& lora);

// A fresh role: A from Philox(adapter_seed), B zero; the reward head
// ~ N(0, heads.reward_weight_std) from Philox(head_seed), the critic head
// zero. Checks the parameter counts the config promises
// (lora.parameters_per_role, heads.parameters) and fails loudly otherwise.
Role make_role(const Study& study, const std::string& name, RoleKind kind, uint64_t adapter_seed,
               uint64_t head_seed = 0);

// An independent copy (own storage) under another name and kind; a critic
// made from a policy gets a zero head.
Role clone_role(const Role& from, const std::string& name, RoleKind kind, const Study& study);

// final/: learned.safetensors (ppolab names, identity in its metadata), and
// the LoRA part in the PEFT layout under final/peft/. Refuses an existing dir.
// Under MPI only rank 0 writes it (the other ranks return at once).
void save_role(const fs::path& dir, Role& role, const json& identity, const Study& study);
// Reloads final/learned.safetensors through the study's guarded reader,
// checking names, shapes, dtypes and the recorded learned identity.
Role load_role(const fs::path& dir, const std::string& name, RoleKind kind, const Study& study);

// The role as the isolation check sees it (identity.h); a frozen role's
// parameters without gradient buffers.
RoleView isolation_view(Role& role, bool frozen);

// A role with its forward on the shared base: the role, the Qwen2 reading
// its adapters and that model's scorer, in this order (the model points into
// the role, the scorer into the model: never copied or moved). The learned
// identity it started with is kept, so that a frozen role can show it did
// not change and a learner that it did.
struct RoleModel {
    RoleModel(const Study& study, Role r);
    // Loaded from final/ (load_role).
    RoleModel(const Study& study, const fs::path& dir, const std::string& name, RoleKind kind);
    RoleModel(const RoleModel&) = delete;
    RoleModel& operator=(const RoleModel&) = delete;

    // Whether the learned tensors differ from those it started with.
    bool changed() { return role.learned_identity() != initial_identity; }

    Role role;
    const std::string initial_identity;
    Qwen2 model;
    Scorer scorer;
};

// The frozen judge of final/ scoring held-out pairs one at a time
// (reward-test, the vote test): a pair packed in one row (Study::pair_batch),
// and a check that its learned identity did not change while it scored.
class FrozenJudge {
public:
    struct Scores {
        float chosen, rejected;
        bool correct() const { return chosen > rejected; }
        bool tie() const { return chosen == rejected; }
    };
    FrozenJudge(const Study& study, const fs::path& dir);
    FrozenJudge(const FrozenJudge&) = delete;
    FrozenJudge& operator=(const FrozenJudge&) = delete;

    Scores score(const std::vector<int32_t>& prompt, const std::vector<int32_t>& chosen,
                 const std::vector<int32_t>& rejected);
    const std::string& identity() const { return judge_.initial_identity; }
    // Error naming `what` if the judge's learned tensors changed.
    void check_unchanged(const std::string& what);

private:
    const Study& study_;
    RoleModel judge_;
};

}  // namespace ppolab
