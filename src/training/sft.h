// sft.h — supervised fine-tuning (SPEC §3): LoRA on the frozen base learns
// the demonstrations (learn/demonstrations.jsonl) by token cross-entropy on
// the response tokens (EOS included), `sft.accumulation` examples per update
// normalised by their total active tokens. Validation: the chosen responses
// of the validation pairs, mean token log-prob (never used to select).
// The epochs, modes and checkpoints: supervised_stage.h.
#pragma once
#include "training/stage_lifecycle.h"
#include "training/study.h"
#include "util/json.h"

namespace ppolab {

// Trains; writes RUN/sft/<mode>.state.gz and <mode>.json (and, continuous,
// RUN/sft/final/). Refuses to overwrite a finished report. Returns it.
json run_sft(const Study& study, StageMode mode);

}  // namespace ppolab
