// dpo.h — Direct Preference Optimisation (Rafailov et al. 2023; SPEC §12), a
// baseline to PPO on the same data: a policy starts from the SFT adapters
// and learns the corpus's train pairs directly, with the frozen SFT policy as
// the reference, no judge, no critic and no generation. Per pair the summed
// response log-probabilities (EOS included) of both answers under the policy
// and the reference give the loss −log σ(β[(π_c − ρ_c) − (π_r − ρ_r)])
// (training/losses.h), `dpo.pairs_per_update` pairs per update; each pair is
// one packed row [prompt | chosen | rejected] (scoring.h), the prompt
// computed once, as the judge's. Validation on
// the validation pairs after each epoch (loss, implicit-reward accuracy and
// margin; never used to select anything). The epochs, modes, checkpoints and
// the bitwise resume proof: supervised_stage.h, as SFT and the judge.
#pragma once
#include "training/stage_lifecycle.h"
#include "training/study.h"
#include "util/json.h"

namespace ppolab {

// Trains the DPO policy; writes RUN/dpo/<mode>.state.gz and <mode>.json (and,
// continuous, RUN/dpo/final/: its adapters, ppolab and PEFT layouts).
// Needs RUN/sft/final/. Returns the stage report.
json run_dpo(const Study& study, StageMode mode);

}  // namespace ppolab
