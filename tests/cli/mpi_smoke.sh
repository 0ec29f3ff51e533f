#!/usr/bin/env bash
# Data-parallel over MPI (SPEC §13) on a micro study, ranks on this machine:
#  * `ppolab run --until ppo` at world size 2 (prepare, pretrain, the checks
#    on rank 0; SFT, the judge and PPO in their three modes on both ranks),
#    then DPO, RLOO, GRPO and an evaluation, with parallel.chunks=2, write the same
#    state files, final adapters, snapshots, rollout files, generations and
#    metrics, byte for byte, as each stage at world size 1; the reports say
#    the world size, the states do not;
#  * with parallel.chunks=4, SFT and PPO at W = 4 equal W = 1;
#  * an interrupt state written at W = 2 resumes at W = 1 to the same final
#    state as the continuous W = 1 run, and one written at W = 1 resumes at
#    W = 2 (SFT and PPO);
#  * rank 1 killed with SIGKILL mid-SFT ends the job, leaves no half-written
#    file, and `ppolab sft` (one process) continues from the last checkpoint
#    to the same final state;
#  * a rank whose learned tensors drift is caught by the cross-rank hash;
#  * a chunk count the world size does not divide, and a command that is
#    not data-parallel, are refused with errors naming them.
set -euo pipefail
BIN=${PPOLAB_BINARY:?}
fail() { echo "mpi smoke: $*"; exit 1; }
command -v mpirun > /dev/null || fail "mpirun not found (scripts/install.sh --tests installs openmpi-bin)"
"$BIN" version | grep -q "^data-parallel: Open MPI" || { "$BIN" version; fail "this ppolab was built without MPI"; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PPOLAB_QUIET=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # CI runs as root
# Both ranks on this machine, over shared memory; every rank one OpenMP thread.
mpi() {
  local np=$1; shift
  mpirun -np "$np" --oversubscribe --bind-to none --mca btl self,vader \
    -x OMP_NUM_THREADS -x PPOLAB_QUIET -x OMP_WAIT_POLICY -x PPOLAB_TEST_DRIFT "$BIN" "$@"
}
# The study's micro settings: every stage capped at 4 updates (PPO and RLOO
# by iterations), which also proves that a capped interrupt resumes to the
# capped continuous state. SETS (no cap) for the kill and resume tests.
SETS=(--set pretrain.tokens=12000 --set pretrain.check_prompts=0 --set replicates.count=1
      --set sft.epochs=2 --set sft.accumulation=32 --set parallel.chunks=2 --set checkpoint.every_updates=2
      --set limits.max_response=32 --set evaluation.exact_prompts=6 --set limits.max_context=288)
STUDY=("${SETS[@]}" --set max_updates=4 --set reward.epochs=1 --set reward.pairs_per_update=16
       --set dpo.epochs=1 --set dpo.pairs_per_update=16
       --set ppo.iterations=3 --set ppo.interrupt_iteration=1 --set checkpoint.every_iterations=1
       --set ppo.snapshot_every=2
       --set rl.iterations=2 --set rl.interrupt_iteration=1 --set rl.prompts_per_iteration=2
       --set checkpoint.every_rows=64)
expect_error() {  # LOG PATTERN cmd...
  local log=$1 pattern=$2; shift 2
  set +e; "$@" > "$log" 2>&1; local rc=$?; set -e
  [ $rc -ne 0 ] || { cat "$log"; fail "expected a failure: $*"; }
  grep -q -- "$pattern" "$log" || { cat "$log"; fail "the error does not say '$pattern'"; }
}
same_state() {  # A B: byte for byte, and resume-check's verdict
  cmp -s "$1" "$2" || { "$BIN" resume-check --states "$1" "$2" || true; fail "$1 and $2 differ"; }
  "$BIN" resume-check --states "$1" "$2" > /dev/null
}
fresh() { mkdir -p "$1"; cp -r "$ONE/corpus" "$ONE/base" "$1/"; }

# ---- W = 1: the reference (chunks = 2, one process, no mpirun), each stage once.
ONE=$WORK/one
"$BIN" prepare --run "$ONE" "${STUDY[@]}" > /dev/null
"$BIN" pretrain --run "$ONE" "${STUDY[@]}" > /dev/null 2>&1
for stage in sft reward ppo dpo rloo grpo; do
  "$BIN" $stage --run "$ONE" --mode continuous "${STUDY[@]}" > /dev/null
done
REF=$WORK/ref  # SFT without the cap, for the resume and kill tests
fresh "$REF"
"$BIN" sft --run "$REF" "${SETS[@]}" > /dev/null

# ---- W = 2: `ppolab run` up to PPO (prepare, pretrain, the checks and the
# judge's test on rank 0; SFT, the judge and PPO in all three modes on both
# ranks), then DPO and RLOO: the same bytes as W = 1.
TWO=$WORK/two
mpi 2 run --out "$TWO" --until ppo "${STUDY[@]}" > "$WORK/log" 2>&1 || { cat "$WORK/log"; fail "run at W=2 failed"; }
for stage in sft reward ppo; do
  grep -q "^resume-check $stage: PASS" "$WORK/log" || { cat "$WORK/log"; fail "run at W=2: no PASS for $stage"; }
done
[ "$(grep -c '^sft continuous: ' "$WORK/log")" = 1 ] || fail "not exactly one rank printed sft's summary"
grep -q "^-- stopped before" "$WORK/log" || { cat "$WORK/log"; fail "run --until ppo did not stop after PPO"; }
cmp -s "$ONE/base/model.safetensors" "$TWO/base/model.safetensors" || fail "the base differs"
mpi 2 dpo --run "$TWO" "${STUDY[@]}" > /dev/null
for stage in rloo grpo; do
  mpi 2 $stage --run "$TWO" --mode continuous "${STUDY[@]}" > "$WORK/log" 2>&1 ||
    { cat "$WORK/log"; fail "$stage at W=2 failed"; }
done
# Evaluation: rows and batches of rows shared across the ranks, gathered in
# row order (the base on the validation prompts, scored by the judge; the
# held-out evaluation and over-optimisation share the same code path and are
# run across two hosts by scripts/mpi-hosts-check.sh).
for w in 1 2; do
  fresh "$WORK/ev$w"
  cp -r "$ONE/reward" "$WORK/ev$w/"
done
"$BIN" evaluate --run "$WORK/ev1" --population validation "${STUDY[@]}" > /dev/null
mpi 2 evaluate --run "$WORK/ev2" --population validation "${STUDY[@]}" > "$WORK/log" 2>&1 ||
  { cat "$WORK/log"; fail "evaluate at W=2 failed"; }
for f in validation-base-generations.json validation-metrics.json; do
  [ -e "$WORK/ev1/eval/$f" ] || fail "no eval/$f at W=1"
  cmp -s "$WORK/ev1/eval/$f" "$WORK/ev2/eval/$f" || fail "eval/$f differs between W=1 and W=2"
done
for stage in ppo rloo grpo; do
  diff -r "$ONE/$stage/rollouts/continuous" "$TWO/$stage/rollouts/continuous" > /dev/null ||
    fail "$stage: the rollout files differ between W=1 and W=2"
done
diff -r "$ONE/ppo/snapshots" "$TWO/ppo/snapshots" > /dev/null || fail "ppo: the snapshots differ between W=1 and W=2"
for stage in sft reward ppo dpo rloo grpo; do
  same_state "$ONE/$stage/continuous.state.gz" "$TWO/$stage/continuous.state.gz"
  diff -r "$ONE/$stage/final" "$TWO/$stage/final" > /dev/null || fail "$stage: final/ differs between W=1 and W=2"
  python3 - "$ONE/$stage/continuous.json" "$TWO/$stage/continuous.json" "$stage" <<'PY'
import json, sys
one, two = (json.load(open(p)) for p in sys.argv[1:3])
stage = sys.argv[3]
assert one["world_size"] == 1 and two["world_size"] == 2, (stage, one["world_size"], two["world_size"])
# The logged numbers are the same too: losses and per-row traces, PPO's every metric and probe.
if stage in ("sft", "reward", "dpo"):
    assert one["updates"] == two["updates"] == 4, (stage, one["updates"], two["updates"])
    assert [h["loss"] for h in one["history"]] == [h["loss"] for h in two["history"]], stage
    assert [h["rows"] for h in one["history"]] == [h["rows"] for h in two["history"]], stage
else:
    assert one["iterations"] == two["iterations"] >= 2, (stage, one["iterations"], two["iterations"])
    assert one["history"] == two["history"], stage
if stage == "ppo":
    assert one["sampling_vs_teacher_forced_probe"] == two["sampling_vs_teacher_forced_probe"]
PY
done
ls "$TWO"/sft/checkpoints 2>/dev/null | grep -q . && fail "a checkpoint was left behind"

# ---- Any W dividing the chunks: chunks = 4 at W = 1 and 4 (SFT and PPO; W = 2 is above).
FOUR=(--set parallel.chunks=4)
for w in 1 4; do
  fresh "$WORK/c4-$w"
  cp -r "$ONE/reward" "$WORK/c4-$w/"
  if [ $w = 1 ]; then run_w=("$BIN"); else run_w=(mpi $w); fi
  "${run_w[@]}" sft --run "$WORK/c4-$w" "${STUDY[@]}" "${FOUR[@]}" > /dev/null
  "${run_w[@]}" ppo --run "$WORK/c4-$w" --mode continuous "${STUDY[@]}" "${FOUR[@]}" > /dev/null
done
for stage in sft ppo; do
  same_state "$WORK/c4-1/$stage/continuous.state.gz" "$WORK/c4-4/$stage/continuous.state.gz"
done
cmp -s "$ONE/sft/continuous.state.gz" "$WORK/c4-1/sft/continuous.state.gz" &&
  fail "chunks 4 and chunks 2 gave the same SFT state (the chunk count must be in the identity)"

# ---- Resume at another world size: W=2 → W=1 and W=1 → W=2.
for order in "2 1" "1 2"; do
  set -- $order
  RUN=$WORK/resume-$1-$2
  fresh "$RUN"
  if [ "$1" = 2 ]; then mpi 2 sft --run "$RUN" --mode interrupt "${SETS[@]}" > /dev/null
  else "$BIN" sft --run "$RUN" --mode interrupt "${SETS[@]}" > /dev/null; fi
  if [ "$2" = 2 ]; then mpi 2 sft --run "$RUN" --mode resume "${SETS[@]}" > /dev/null
  else "$BIN" sft --run "$RUN" --mode resume "${SETS[@]}" > /dev/null; fi
  "$BIN" resume-check --states "$REF/sft/continuous.state.gz" "$RUN/sft/resume.state.gz" > /dev/null ||
    fail "sft interrupted at W=$1 and resumed at W=$2 differs from the continuous W=1 run"
done

# PPO interrupted at W = 2, resumed at W = 1, and the reverse.
for order in "2 1" "1 2"; do
  set -- $order
  RUN=$WORK/ppo-resume-$1-$2
  fresh "$RUN"
  cp -r "$ONE/sft" "$ONE/reward" "$RUN/"
  for step in "$1 interrupt" "$2 resume"; do
    set -- $step
    if [ "$1" = 2 ]; then mpi 2 ppo --run "$RUN" --mode "$2" "${STUDY[@]}" > /dev/null
    else "$BIN" ppo --run "$RUN" --mode "$2" "${STUDY[@]}" > /dev/null; fi
  done
  "$BIN" resume-check --states "$ONE/ppo/continuous.state.gz" "$RUN/ppo/resume.state.gz" > /dev/null ||
    fail "ppo interrupted and resumed at another world size differs from the continuous W=1 run ($order)"
done

# ---- Rank 1 killed with SIGKILL after the first checkpoint.
KILL=$WORK/kill
fresh "$KILL"
set +e
mpi 2 sft --run "$KILL" "${SETS[@]}" > "$WORK/kill.log" 2>&1 &
job=$!
for _ in $(seq 600); do [ -e "$KILL/sft/checkpoints/continuous.state.gz" ] && break; sleep 0.1; done
[ -e "$KILL/sft/checkpoints/continuous.state.gz" ] || { kill $job; cat "$WORK/kill.log"; fail "no checkpoint appeared"; }
victim=""
for d in /proc/[0-9]*; do
  tr '\0' ' ' < "$d/cmdline" 2>/dev/null | grep -q -- "sft --run $KILL " || continue
  tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && victim=${d#/proc/}
done
[ -n "$victim" ] || { kill $job; fail "rank 1 of the job was not found"; }
kill -9 "$victim"
wait $job; rc=$?
set -e
[ $rc -ne 0 ] || { cat "$WORK/kill.log"; fail "the job went on after rank 1 was killed"; }
grep -qi "signal 9\|killed" "$WORK/kill.log" || { cat "$WORK/kill.log"; fail "mpirun did not say a rank was killed"; }
[ ! -e "$KILL/sft/continuous.state.gz" ] && [ ! -e "$KILL/sft/continuous.json" ] || fail "the killed job wrote its outputs"
"$BIN" sft --run "$KILL" "${SETS[@]}" > "$WORK/log" 2>&1 || { cat "$WORK/log"; fail "sft after the kill failed"; }
grep -q "continuing from checkpoint" "$WORK/log" || { cat "$WORK/log"; fail "sft did not continue from the checkpoint"; }
same_state "$REF/sft/continuous.state.gz" "$KILL/sft/continuous.state.gz"
ls -A "$KILL/sft/checkpoints" 2>/dev/null | grep -q . && fail "a checkpoint or temporary was left behind"

# ---- A rank that drifts is caught by the cross-rank hash (at the checkpoint after update 2).
DRIFT=$WORK/drift
fresh "$DRIFT"
PPOLAB_TEST_DRIFT=sft@1 expect_error "$WORK/log" "sft update 2: the ranks' learned tensors drifted apart" \
  mpi 2 sft --run "$DRIFT" "${SETS[@]}"
[ ! -e "$DRIFT/sft/checkpoints/continuous.state.gz" ] || fail "a drifted job wrote a checkpoint"

# ---- Refusals.
fresh "$WORK/chunks"
expect_error "$WORK/log" "'parallel.chunks' (3) must be a multiple of the world size (2 ranks)" \
  mpi 2 sft --run "$WORK/chunks" "${SETS[@]}" --set parallel.chunks=3
[ ! -e "$WORK/chunks/sft" ] || [ -z "$(ls -A "$WORK/chunks/sft")" ] || fail "a refused sft wrote into RUN/sft"
expect_error "$WORK/log" \
  "only the data-parallel commands run: sft, reward, dpo, ppo, rloo, grpo, evaluate, overoptimisation, run, version" \
  mpi 2 findings --run "$ONE"
expect_error "$WORK/log" "a judge from votes (--votes) is trained by one process" \
  mpi 2 run --resume "$TWO" --votes "$WORK/log" --candidates "$WORK/log"
# Ranks that disagree stop by name before any collective, writing nothing:
# other arguments, another command, another configuration (each rank reads
# its own c.json), and the default chunk count under mpirun says what to add.
mpmd() {  # an MPMD job: "-np 1 [--wdir D] BIN ARGS… : -np 1 …"
  mpirun --oversubscribe --bind-to none --mca btl self,vader -x OMP_NUM_THREADS -x PPOLAB_QUIET "$@"
}
# Ranks on different instruction sets and thread counts (canonical
# numerics): rank 0 capped at AVX2 with 1 thread, rank 1 native with 2 — SFT
# and PPO give W = 1's bytes, as a job spread over two node types would.
fresh "$WORK/mixed"
cp -r "$ONE/reward" "$WORK/mixed/"
for stage in sft ppo; do
  mode=(); [ $stage = ppo ] && mode=(--mode continuous)
  mpmd -np 1 env PPOLAB_ISA=avx2 OMP_NUM_THREADS=1 "$BIN" $stage --run "$WORK/mixed" "${mode[@]}" "${STUDY[@]}" \
    : -np 1 env OMP_NUM_THREADS=2 "$BIN" $stage --run "$WORK/mixed" "${mode[@]}" "${STUDY[@]}" > "$WORK/log" 2>&1 ||
    { cat "$WORK/log"; fail "$stage on mixed instruction sets failed"; }
  same_state "$ONE/$stage/continuous.state.gz" "$WORK/mixed/$stage/continuous.state.gz"
  diff -r "$ONE/$stage/final" "$WORK/mixed/$stage/final" > /dev/null ||
    fail "$stage: final/ differs between W=1 and W=2 on mixed instruction sets"
done
fresh "$WORK/agree"
expect_error "$WORK/log" "the ranks disagree before sft: rank 1 has arguments" \
  mpmd -np 1 "$BIN" sft --run "$WORK/agree" "${SETS[@]}" : -np 1 "$BIN" sft --run "$WORK/agree" "${SETS[@]}" \
  --set parallel.chunks=4
expect_error "$WORK/log" "the ranks disagree before sft: rank 1 has command 'reward', rank 0 'sft'" \
  mpmd -np 1 "$BIN" sft --run "$WORK/agree" "${SETS[@]}" : -np 1 "$BIN" reward --run "$WORK/agree" "${SETS[@]}"
mkdir -p "$WORK/rank0" "$WORK/rank1"
echo '{"sft": {"lr": 0.001}}' > "$WORK/rank0/c.json"
echo '{"sft": {"lr": 0.002}}' > "$WORK/rank1/c.json"
expect_error "$WORK/log" "rank 1 has configuration 'sft.lr = 0.002', rank 0 'sft.lr = 0.001'" \
  mpmd -np 1 --wdir "$WORK/rank0" "$BIN" sft --run "$WORK/agree" --config c.json "${SETS[@]}" \
  : -np 1 --wdir "$WORK/rank1" "$BIN" sft --run "$WORK/agree" --config c.json "${SETS[@]}"
[ ! -e "$WORK/agree/sft" ] || [ -z "$(ls -A "$WORK/agree/sft")" ] || fail "ranks that disagree wrote into RUN/sft"
expect_error "$WORK/log" "add \`--set parallel.chunks=2\`" mpi 2 run --out "$WORK/default-chunks" --until sft
[ ! -e "$WORK/default-chunks" ] || fail "a refused mpirun run --out left its folder"
echo "mpi smoke: W=2 equals W=1 (sft, reward, ppo, dpo, rloo, grpo, evaluate; sft and ppo with ranks on AVX2 and native), resume across world sizes, kill -9, drift, refusals, disagreeing ranks: ok"
