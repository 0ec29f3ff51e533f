#!/usr/bin/env bash
# One arithmetic on every path (engine.numerics = canonical, src/kernels/numerics.h),
# on a micro study:
#  * `ppolab run --until ppo` (pretraining, SFT, the judge, PPO, each in its
#    interrupt, continuous and resume modes) under the CPU's best instruction
#    set at 2 OpenMP threads, and under PPOLAB_ISA=avx2 at 3 threads, writes
#    the same state files, final tensors, rollouts, snapshots and reports
#    (scripts/compare_runs.py), byte for byte;
#  * without vector units (PPOLAB_ISA=scalar, 1 thread) SFT's interrupt state
#    and PPO's first iteration are those bytes too, and SFT interrupted there
#    resumes under the best set to the continuous state;
#  * PPO checked every rollout token's sampling log-prob against the
#    trainer's re-score (the stage fails otherwise): the report's probe and
#    every iteration's largest difference are exactly 0;
#  * a resume under engine.numerics = fast of a canonical stage is refused
#    naming the field; each stage's report names its mode;
#  * PPOLAB_ISA naming a set this CPU lacks, or no set at all, is refused by name.
set -euo pipefail
BIN=${PPOLAB_BINARY:?}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "numerics smoke: $*"; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PPOLAB_QUIET=1
SETS=(--preset tiny --set pretrain.tokens=12000 --set pretrain.check_prompts=0 --set replicates.count=1
      --set sft.epochs=2 --set sft.accumulation=32 --set limits.max_response=32 --set evaluation.exact_prompts=6 --set limits.max_context=288
      --set max_updates=4 --set reward.epochs=1 --set reward.pairs_per_update=16
      --set ppo.iterations=2 --set ppo.interrupt_iteration=1 --set checkpoint.every_iterations=1
      --set ppo.snapshot_every=1)
BEST=$("$BIN" version | sed -n 's/^instruction sets *native (\(.*\))$/\1/p')
[ -n "$BEST" ] || { "$BIN" version; fail "ppolab version does not name the instruction sets"; }
expect_error() {  # LOG PATTERN cmd...
  local log=$1 pattern=$2; shift 2
  set +e; "$@" > "$log" 2>&1; local rc=$?; set -e
  [ $rc -ne 0 ] && [ $rc -lt 128 ] || { cat "$log"; fail "expected a failure (exit 1..127, got $rc): $*"; }
  grep -q -- "$pattern" "$log" || { cat "$log"; fail "the error does not say '$pattern'"; }
  ! grep -q "unexpected error" "$log" || { cat "$log"; fail "an unexpected error: $*"; }
}
same_files() {  # A B FILE...
  local a=$1 b=$2; shift 2
  for f in "$@"; do
    [ -e "$a/$f" ] || fail "$a/$f is missing"
    cmp -s "$a/$f" "$b/$f" || fail "$f differs between $(basename "$a") and $(basename "$b")"
  done
}

# ---- The reference: the best set, 2 threads.
OMP_NUM_THREADS=2 "$BIN" run --out "$WORK/best" --until ppo "${SETS[@]}" > "$WORK/log" 2>&1 ||
  { cat "$WORK/log"; fail "the run under $BEST failed"; }
grep -q "^numerics *canonical" "$WORK/log" || { cat "$WORK/log"; fail "the run does not say it is canonical"; }
STATES=()
for s in sft reward ppo; do for m in interrupt continuous resume; do STATES+=("$s/$m.state.gz"); done; done

# ---- AVX2 at 3 threads (where the CPU has it): the whole run, the same bytes.
if [ "$BEST" != scalar ]; then
  OMP_NUM_THREADS=3 PPOLAB_ISA=avx2 "$BIN" run --out "$WORK/avx2" --until ppo "${SETS[@]}" > "$WORK/log" 2>&1 ||
    { cat "$WORK/log"; fail "the run under PPOLAB_ISA=avx2 failed"; }
  grep -q "^instruction sets *avx2 (PPOLAB_ISA)" "$WORK/log" || { cat "$WORK/log"; fail "avx2 not in force"; }
  same_files "$WORK/best" "$WORK/avx2" "${STATES[@]}" base/model.safetensors sft/final/learned.safetensors \
    reward/final/learned.safetensors ppo/final/actor/learned.safetensors ppo/final/critic/learned.safetensors
  diff -r "$WORK/best/ppo/rollouts" "$WORK/avx2/ppo/rollouts" > /dev/null || fail "the rollouts differ under avx2"
  diff -r "$WORK/best/ppo/snapshots" "$WORK/avx2/ppo/snapshots" > /dev/null || fail "the snapshots differ under avx2"
  python3 "$ROOT/scripts/compare_runs.py" "$WORK/best" "$WORK/avx2" || fail "the reports differ under avx2"
fi

# ---- No vector units, one thread: SFT's interrupt, then resumed under the
# best set to the continuous state; PPO's first iteration.
SC=$WORK/scalar
mkdir -p "$SC"
cp -r "$WORK/best/corpus" "$WORK/best/base" "$SC/"
OMP_NUM_THREADS=1 PPOLAB_ISA=scalar "$BIN" sft --run "$SC" --mode interrupt "${SETS[@]}" > /dev/null
same_files "$WORK/best" "$SC" sft/interrupt.state.gz
OMP_NUM_THREADS=2 "$BIN" sft --run "$SC" --mode resume "${SETS[@]}" > /dev/null
same_files "$WORK/best" "$SC" sft/resume.state.gz
"$BIN" resume-check --states "$SC/sft/resume.state.gz" "$WORK/best/sft/continuous.state.gz" > /dev/null
cp -r "$WORK/best/sft" "$WORK/best/reward" "$SC/"
rm -rf "$SC/ppo"
OMP_NUM_THREADS=1 PPOLAB_ISA=scalar "$BIN" ppo --run "$SC" --mode interrupt "${SETS[@]}" > /dev/null
same_files "$WORK/best" "$SC" ppo/interrupt.state.gz

# ---- Sampling log-probs are the trainer's, every token of every rollout.
python3 - "$WORK/best/ppo/continuous.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
probe = r["sampling_vs_teacher_forced_probe"]
assert probe["sampling_logp"] == probe["teacher_forced_logp"], probe
assert "canonical" in r["numerical_scope"], r["numerical_scope"]
first = [h["updates"][0] for h in r["history"]]  # each iteration's first update
assert first and all(u["sampling_vs_rescore_max_abs_diff"] == 0 for u in first), first
assert all(u["approxkl"] == 0 for u in first), "a first ratio is not exactly 1: " + str(first)
PY

# ---- The mode is part of a stage's identity: no resume across modes.
MODES=$WORK/modes
mkdir -p "$MODES"
cp -r "$WORK/best/corpus" "$WORK/best/base" "$MODES/"
OMP_NUM_THREADS=2 "$BIN" sft --run "$MODES" --mode interrupt "${SETS[@]}" > /dev/null
expect_error "$WORK/log" "at identity.config.numerics: \"canonical\" vs \"fast\"" \
  "$BIN" sft --run "$MODES" --mode resume "${SETS[@]}" --set engine.numerics=fast
FAST=$WORK/fast
mkdir -p "$FAST"
cp -r "$WORK/best/corpus" "$WORK/best/base" "$FAST/"
OMP_NUM_THREADS=2 "$BIN" sft --run "$FAST" --mode interrupt "${SETS[@]}" --set engine.numerics=fast > /dev/null
grep -q '"numerics": "fast"' "$FAST/sft/interrupt.json" || fail "the fast stage's report does not name its mode"
grep -q '"numerics": "canonical"' "$MODES/sft/interrupt.json" || fail "the canonical report does not name its mode"

# ---- PPOLAB_ISA refusals, by name.
expect_error "$WORK/log" "PPOLAB_ISA" env PPOLAB_ISA=sse9 "$BIN" version
if [ "$BEST" != amx ]; then
  expect_error "$WORK/log" "PPOLAB_ISA=amx: this CPU does not have it" env PPOLAB_ISA=amx "$BIN" version
fi
echo "numerics smoke: PASS (best $BEST, avx2 at 3 threads, scalar at 1: the same bytes)"
