// fault_hooks.h — the one seam through which the crash tests inject faults
// into a stage. Read once from the environment when a stage starts
// (FaultHooks::from_environment) and owned by its lifecycle
// (stage_lifecycle.h); the trainers ask it at one place per quantity, once per
// update or iteration, never inside a per-token loop. Never set these in real
// runs:
//
//   PPOLAB_TEST_KILL_IN_CHECKPOINT=N  the N-th checkpoint write of the stage
//       raises SIGKILL after its temporary file is complete and flushed, before
//       the rename (the worst moment for a crash).
//   PPOLAB_TEST_NONFINITE=<stage>.<quantity>@<n>  makes that quantity NaN at
//       update (or PPO iteration, or pretraining step) n, to prove the
//       non-finite checks stop the stage and leave the last checkpoint usable.
//       Quantities: sft.loss, sft.gradient, reward.score, reward.gradient,
//       ppo.logprob, ppo.score, ppo.value, ppo.advantage, ppo.gradient,
//       pretrain.loss, pretrain.gradient.
//   PPOLAB_TEST_DRIFT=<stage>@<n>  after update n of a supervised stage the
//       last rank of an MPI job nudges its first learned value, to prove the
//       cross-rank hash (chunked_update.h check_ranks_agree) stops the job.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace ppolab {

class FaultHooks {
public:
    FaultHooks() = default;  // no fault
    // Parses both variables; a malformed value is an Error naming the variable.
    static FaultHooks from_environment();

    // True when PPOLAB_TEST_NONFINITE names `stage`.`quantity` at `count`.
    bool nonfinite(std::string_view stage, std::string_view quantity, int64_t count) const {
        return nonfinite_at_ == count && nonfinite_stage_ == stage && nonfinite_quantity_ == quantity;
    }
    // True when checkpoint write number `write` (1-based, counted by the
    // stage) must die before its rename.
    bool kill_in_checkpoint(int64_t write) const { return kill_in_checkpoint_ > 0 && write == kill_in_checkpoint_; }
    // True when PPOLAB_TEST_DRIFT names `stage` at update `count`.
    bool drift(std::string_view stage, int64_t count) const { return drift_at_ == count && drift_stage_ == stage; }

private:
    std::string nonfinite_stage_, nonfinite_quantity_;
    int64_t nonfinite_at_ = -1;
    int64_t kill_in_checkpoint_ = 0;
    std::string drift_stage_;
    int64_t drift_at_ = -1;
};

}  // namespace ppolab
