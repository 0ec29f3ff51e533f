#!/usr/bin/env bash
# crash_harness.sh — kill -9 harness for crash-safe runs (issue #9, run by hand).
#
# For each stage (pretrain, sft, reward, ppo) on the embedded default (tiny
# preset, the real tiny model): one uninterrupted run into a reference run
# folder, then, in another run folder holding copies of the same earlier
# stages, the same command is started, SIGKILLed, restarted, K times, and
# finally run to its end. Kills alternate (seeded) between
#   * an external `kill -9` after a random delay (uniform in
#     [0.5 s, 0.8 · T / K], T the reference run's duration, so the K kills
#     come before the stage could finish), and
#   * PPOLAB_TEST_KILL_IN_CHECKPOINT=n (n in 1..2): the process raises
#     SIGKILL itself in the middle of its n-th checkpoint write, after the
#     temporary file is written and before the rename.
# Then the final outputs are compared with the reference bit for bit:
#   sft/reward/ppo  RUN/<stage>/continuous.state.gz (cmp, and
#                   `ppolab resume-check --states` = states_first_difference);
#                   ppo also rollouts/ (diff -r) and metrics.jsonl (seconds aside)
#   pretrain        base/model.safetensors and tokenizer.json (cmp), the loss
#                   curve and base check of pretrain.json
# With --stages study (by itself, it takes a while), the whole `ppolab run` is
# killed at random moments and continued with `ppolab run --resume` until it
# finishes; all nine state files (3 stages x 3 modes) and the evaluation
# metrics must equal an uninterrupted `ppolab run`'s.
# With --stages concurrent (by itself too), `ppolab run` is killed once it is
# in the judge stage, then two `ppolab run --resume` are started at once on
# the interrupted run: one must be refused at once (exit 1..127, "RUN is in
# use by pid P (ppolab run --resume RUN)", P the other one's pid), the other
# must finish with the same nine state files and evaluation metrics as the
# uninterrupted run (one process per run folder: RUN/.ppolab.lock).
# It builds nothing: it takes the ppolab binary.
#
# Usage: scripts/crash_harness.sh [--bin PATH] [--work DIR] [--kills K] [--seed S]
#            [--stages "pretrain sft reward ppo" | study | concurrent] [--from RUN] [--set key=value]...
#   --from RUN   reuse RUN/corpus and RUN/base (skips preparing and pretraining
#                the prerequisites; pretrain, if asked for, still gets its own
#                reference run)
#   --set        passed to every run of every stage (both sides), e.g.
#                --set checkpoint.every_updates=10 or --set ppo.iterations=50
# Prints one line per kill and a summary table; writes WORK/crash-harness.json.
# Exit status 0 only if every stage's final outputs are bitwise equal.
set -uo pipefail

BIN=${PPOLAB_BINARY:-$(cd "$(dirname "$0")/.." && pwd)/build/bin/ppolab}
WORK=""
KILLS=5
SEED=1
STAGES="pretrain sft reward ppo"
FROM=""
SETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --kills) KILLS=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --stages) STAGES=$2; shift 2 ;;
    --from) FROM=$2; shift 2 ;;
    --set) SETS+=(--set "$2"); shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "crash_harness: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$BIN" ] || { echo "crash_harness: no ppolab binary at '$BIN' (build it, or give --bin)" >&2; exit 2; }
[ -n "$WORK" ] || WORK=$(mktemp -d /tmp/ppolab-crash.XXXXXX)
# compare_study REF RUN: the nine state files (cmp) and the evaluation
# metrics (seconds and identity aside) of two finished studies; 0 if equal.
compare_study() {
  local status=0 s m
  for s in sft reward ppo; do
    for m in interrupt continuous resume; do
      cmp -s "$1/$s/$m.state.gz" "$2/$s/$m.state.gz" || { echo "$s $m: state differs"; status=1; }
    done
  done
  python3 - "$1/eval/metrics.json" "$2/eval/metrics.json" <<'PY' || status=1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for x in (a, b):
    x.pop("identity"); x.pop("seconds", None)  # eval/timings.json holds the durations now
assert a == b, "evaluation metrics differ"
PY
  return $status
}
study_reference() {  # the uninterrupted study in WORK/study-ref; sets T (seconds)
  local t0; t0=$(date +%s)
  "$BIN" run --out "$WORK/study-ref" "${SETS[@]}" > "$WORK/log/study-ref.log" 2>&1 || { tail -20 "$WORK/log/study-ref.log"; exit 1; }
  T=$(( $(date +%s) - t0 ))
  echo "reference study: $T s uninterrupted"
}
if [[ " $STAGES " == *" concurrent "* ]]; then
  [ "$STAGES" = concurrent ] || { echo "crash_harness: --stages concurrent runs alone" >&2; exit 2; }
  export PPOLAB_QUIET=1 OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
  RANDOM=$SEED
  mkdir -p "$WORK/log"
  study_reference
  R=$WORK/study-concurrent
  rm -rf "$R"
  # 1. interrupted in the judge stage: kill -9 a random 1-4 s after `ppolab reward` starts
  "$BIN" run --out "$R" "${SETS[@]}" > "$WORK/log/concurrent-first.log" 2>&1 & pid=$!
  while kill -0 "$pid" 2> /dev/null && ! grep -q '^>> ppolab reward --run' "$WORK/log/concurrent-first.log"; do sleep 0.2; done
  sleep "$(python3 -c "print(1 + $((RANDOM % 3000)) / 1000)")"
  kill -KILL "$pid" 2> /dev/null
  { wait "$pid"; rc=$?; } 2> /dev/null
  [ $rc -eq 137 ] || { tail -20 "$WORK/log/concurrent-first.log"; echo "crash_harness: the first run was not killed in the judge stage (exit $rc)"; exit 1; }
  echo "  first run: killed in step: $(grep -o '^>> ppolab [a-z-]*.*--mode [a-z]*' "$WORK/log/concurrent-first.log" | tail -1 | cut -c4-)"
  # 2. two `run --resume` at once
  t0=$(date +%s.%N)
  "$BIN" run --resume "$R" > "$WORK/log/concurrent-a.log" 2>&1 & pa=$!
  "$BIN" run --resume "$R" > "$WORK/log/concurrent-b.log" 2>&1 & pb=$!
  while kill -0 "$pa" 2> /dev/null && kill -0 "$pb" 2> /dev/null; do sleep 0.05; done
  first_s=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$t0" "$(date +%s.%N)")
  { wait "$pa"; rca=$?; } 2> /dev/null
  { wait "$pb"; rcb=$?; } 2> /dev/null
  if [ $rca -eq 0 ]; then winner=$pa loser=$pb rcl=$rcb log=$WORK/log/concurrent-b.log wlog=$WORK/log/concurrent-a.log
  else winner=$pb loser=$pa rcl=$rca log=$WORK/log/concurrent-a.log wlog=$WORK/log/concurrent-b.log; fi
  status=0
  [ $rca -eq 0 ] || [ $rcb -eq 0 ] || { echo "neither resume finished (exits $rca, $rcb)"; tail -5 "$WORK/log/concurrent-a.log" "$WORK/log/concurrent-b.log"; exit 1; }
  [ $rcl -ge 1 ] && [ $rcl -lt 128 ] || { echo "the second resume was not refused (exit $rcl)"; status=1; }
  grep -qF "$R is in use by pid $winner (ppolab run --resume $R); wait for it to finish or stop it" "$log" \
    || { echo "the refusal does not name the holder:"; tail -3 "$log"; status=1; }
  python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 15 else 1)" "$first_s" || { echo "the refusal took $first_s s"; status=1; }
  echo "  two resumes at once: pid $loser refused after $first_s s (exit $rcl: $(grep -o 'is in use by pid [0-9]*' "$log")); pid $winner finished$(grep -o ' (continuing from checkpoint.*' "$wlog" | head -1)"
  compare_study "$WORK/study-ref" "$R" || status=1
  echo "concurrent resumes: one refused, the other's 9 state files and evaluation metrics $([ $status -eq 0 ] && echo "bitwise equal" || echo DIFFERENT)"
  exit $status
fi
if [[ " $STAGES " == *" study "* ]]; then
  [ "$STAGES" = study ] || { echo "crash_harness: --stages study runs alone" >&2; exit 2; }
  export PPOLAB_QUIET=1 OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
  RANDOM=$SEED
  mkdir -p "$WORK/log"
  study_reference
  R=$WORK/study-kill kills=0 attempt=0 continued=0
  while [ ! -e "$R/results.json" ]; do
    attempt=$((attempt + 1))
    if [ $attempt -eq 1 ]; then cmd=(run --out "$R" "${SETS[@]}"); else cmd=(run --resume "$R"); fi
    log=$WORK/log/study-$attempt.log
    if [ $kills -lt "$KILLS" ]; then
      ms=$(( 2000 + ((RANDOM << 15) | RANDOM) % (1000 * T * 8 / 10 / KILLS + 1) ))
      "$BIN" "${cmd[@]}" > "$log" 2>&1 & pid=$!
      sleep "$(python3 -c "print($ms / 1000)")"
      kill -KILL "$pid" 2> /dev/null
      { wait "$pid"; rc=$?; } 2> /dev/null
      [ $rc -eq 137 ] && kills=$((kills + 1))
      [ $rc -eq 137 ] || [ $rc -eq 0 ] || { tail -20 "$log"; exit 1; }
    else
      "$BIN" "${cmd[@]}" > "$log" 2>&1 || { tail -20 "$log"; exit 1; }
      rc=0
    fi
    grep -q "continuing from checkpoint" "$log" && continued=$((continued + 1))
    echo "  attempt $attempt: exit $rc in step: $(grep -o '^>> ppolab [a-z-]*' "$log" | tail -1 | cut -c11-)$(grep -o ' --mode [a-z]*' "$log" | tail -1); $(grep -o 'continuing from checkpoint.*' "$log" | tail -1)"
  done
  status=0
  compare_study "$WORK/study-ref" "$R" || status=1
  echo "study: $kills kills survived, $continued restarts continued a stage from its checkpoint; 9 state files and the evaluation metrics $([ $status -eq 0 ] && echo "bitwise equal" || echo DIFFERENT)"
  exit $status
fi
mkdir -p "$WORK"
export PPOLAB_QUIET=1 OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
RANDOM=$SEED
REF=$WORK/ref
LOG=$WORK/log
mkdir -p "$LOG"
echo "crash harness: binary $BIN, work $WORK, $KILLS kills per stage, seed $SEED, stages: $STAGES"

now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
die() { echo "crash_harness: $*" >&2; exit 1; }
has_stage() { [[ " $STAGES " == *" $1 "* ]]; }

stage_cmd() {  # stage run -> the command line
  case "$1" in
    pretrain) echo pretrain --run "$2" ;;
    *) echo "$1" --run "$2" --mode continuous ;;
  esac
}

# ---------------------------------------------------------------- references
declare -A SECONDS_REF
run_reference() {  # stage run
  local t0; t0=$(now)
  # shellcheck disable=SC2046
  "$BIN" $(stage_cmd "$1" "$2") "${SETS[@]}" > "$LOG/ref-$1.log" 2>&1 || { tail -20 "$LOG/ref-$1.log"; die "reference $1 failed"; }
  SECONDS_REF[$1]=$(elapsed "$t0")
  echo "reference $1: ${SECONDS_REF[$1]} s uninterrupted ($2)"
}

if [ ! -d "$REF" ]; then
  mkdir -p "$REF"
  if [ -n "$FROM" ]; then
    cp -r "$FROM/corpus" "$FROM/base" "$REF/" || die "--from $FROM: no corpus/ and base/ to copy"
  else
    "$BIN" prepare --run "$REF" "${SETS[@]}" > "$LOG/ref-prepare.log" 2>&1 || die "prepare failed"
    run_reference pretrain "$REF"
  fi
fi
PRETRAIN_REF=$REF
if has_stage pretrain && [ -n "$FROM" ]; then
  PRETRAIN_REF=$WORK/ref-pretrain
  rm -rf "$PRETRAIN_REF"; mkdir -p "$PRETRAIN_REF"; cp -r "$REF/corpus" "$PRETRAIN_REF/"
  run_reference pretrain "$PRETRAIN_REF"
fi
# sft and reward are PPO's prerequisites: their references run whenever ppo is asked for.
for s in sft reward ppo; do
  if has_stage "$s" || { has_stage ppo && [ "$s" != ppo ]; }; then
    [ -e "$REF/$s/continuous.json" ] && { echo "reference $s: already in $REF"; continue; }
    run_reference "$s" "$REF"
  fi
done

# ---------------------------------------------------------------- kills
declare -A SURVIVED HOOKED TIMED CONTINUED RESULT
kill_stage() {  # stage
  local stage=$1 run=$WORK/kill-$1 dur=${SECONDS_REF[$1]:-60}
  rm -rf "$run"; mkdir -p "$run"
  cp -r "$REF/corpus" "$run/"
  [ "$stage" != pretrain ] && cp -r "$REF/base" "$run/"
  if [ "$stage" = ppo ]; then cp -r "$REF/sft" "$REF/reward" "$run/"; rm -rf "$run/ppo"; fi
  local max_ms; max_ms=$(python3 -c "print(max(1000, int(800 * float('$dur') / $KILLS)))")
  local kills=0 hooked=0 timed=0 continued=0 attempt=0 rc
  while [ "$kills" -lt "$KILLS" ]; do
    attempt=$((attempt + 1))
    local log=$LOG/kill-$stage-$attempt.log
    if [ $((RANDOM % 2)) -eq 0 ]; then
      local n=$((1 + RANDOM % 2))
      # shellcheck disable=SC2046
      { PPOLAB_TEST_KILL_IN_CHECKPOINT=$n "$BIN" $(stage_cmd "$stage" "$run") "${SETS[@]}" > "$log" 2>&1; rc=$?; } 2> /dev/null
      how="inside checkpoint write $n"
    else
      local r=$(( (RANDOM << 15) | RANDOM ))
      local ms=$((500 + r % (max_ms - 500 + 1)))
      # shellcheck disable=SC2046
      "$BIN" $(stage_cmd "$stage" "$run") "${SETS[@]}" > "$log" 2>&1 &
      local pid=$!
      sleep "$(python3 -c "print($ms / 1000)")"
      kill -KILL "$pid" 2>/dev/null
      { wait "$pid"; rc=$?; } 2> /dev/null
      how="kill -9 after $ms ms"
    fi
    grep -q "continuing from checkpoint" "$log" && continued=$((continued + 1))
    if [ "$rc" -eq 137 ]; then
      kills=$((kills + 1))
      [[ "$how" == inside* ]] && hooked=$((hooked + 1)) || timed=$((timed + 1))
      echo "  $stage attempt $attempt: killed ($how); $(grep -o 'continuing from checkpoint.*' "$log" | head -1 || true)"
    elif [ "$rc" -eq 0 ]; then
      echo "  $stage attempt $attempt: finished before its kill ($how)"
      break
    else
      tail -20 "$log"; die "$stage attempt $attempt failed with exit $rc (see $log)"
    fi
  done
  local marker=$run/$stage/continuous.json
  [ "$stage" = pretrain ] && marker=$run/base/pretrain.json
  if [ ! -e "$marker" ]; then
    # shellcheck disable=SC2046
    "$BIN" $(stage_cmd "$stage" "$run") "${SETS[@]}" > "$LOG/kill-$stage-final.log" 2>&1 || { tail -20 "$LOG/kill-$stage-final.log"; die "$stage final run failed"; }
    grep -q "continuing from checkpoint" "$LOG/kill-$stage-final.log" && continued=$((continued + 1))
    echo "  $stage: final run finished$(grep -o ' (continuing from checkpoint.*' "$LOG/kill-$stage-final.log" | head -1)"
  fi
  SURVIVED[$stage]=$kills; HOOKED[$stage]=$hooked; TIMED[$stage]=$timed; CONTINUED[$stage]=$continued

  # ---- compare with the reference, bit for bit
  local ok=1 detail=""
  if [ "$stage" = pretrain ]; then
    for f in model.safetensors tokenizer.json config.json; do
      cmp -s "$PRETRAIN_REF/base/$f" "$run/base/$f" || { ok=0; detail+="$f differs; "; }
    done
    python3 - "$PRETRAIN_REF/base/pretrain.json" "$run/base/pretrain.json" || { ok=0; detail+="pretrain.json numbers differ; "; } <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for k in ("loss_curve", "grad_norm_curve", "tokens_seen", "target_tokens_seen", "final_loss", "updates"):
    assert a["training"][k] == b["training"][k], k
assert a["check"] == b["check"], "check"
assert a["model"] == b["model"] and a["tokenizer"]["sha256"] == b["tokenizer"]["sha256"]
PY
    [ -e "$run/base.checkpoints" ] && { ok=0; detail+="checkpoint folder left behind; "; }
  else
    cmp -s "$REF/$stage/continuous.state.gz" "$run/$stage/continuous.state.gz" || { ok=0; detail+="state file bytes differ; "; }
    "$BIN" resume-check --states "$REF/$stage/continuous.state.gz" "$run/$stage/continuous.state.gz" > "$LOG/compare-$stage.log" 2>&1 \
      || { ok=0; detail+="$(grep 'first difference' "$LOG/compare-$stage.log"); "; }
    [ -e "$run/$stage/checkpoints" ] && { ok=0; detail+="checkpoints/ left behind; "; }
    diff -r "$REF/$stage/final" "$run/$stage/final" > /dev/null || { ok=0; detail+="final/ differs; "; }
    if [ "$stage" = ppo ]; then
      diff -r "$REF/ppo/rollouts" "$run/ppo/rollouts" > /dev/null || { ok=0; detail+="rollouts differ; "; }
      python3 - "$REF/ppo/continuous.metrics.jsonl" "$run/ppo/continuous.metrics.jsonl" || { ok=0; detail+="metrics differ; "; } <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
for x in a + b: x.pop("seconds")
assert a == b
PY
    fi
  fi
  RESULT[$stage]=$([ $ok -eq 1 ] && echo "bitwise equal" || echo "DIFFERENT: $detail")
  echo "$stage: ${SURVIVED[$stage]} kills survived (${HOOKED[$stage]} inside a checkpoint write, ${TIMED[$stage]} kill -9 at a random moment), ${CONTINUED[$stage]} restarts continued from a checkpoint; final: ${RESULT[$stage]}"
}

for s in pretrain sft reward ppo; do has_stage "$s" && kill_stage "$s"; done

# ---------------------------------------------------------------- summary
echo
echo "| stage | reference s | kills survived | inside checkpoint write | kill -9 at random | restarts from a checkpoint | final outputs |"
echo "|---|---|---|---|---|---|---|"
status=0
json="{"
for s in pretrain sft reward ppo; do
  has_stage "$s" || continue
  echo "| $s | ${SECONDS_REF[$s]:-?} | ${SURVIVED[$s]} | ${HOOKED[$s]} | ${TIMED[$s]} | ${CONTINUED[$s]} | ${RESULT[$s]} |"
  [ "${RESULT[$s]}" = "bitwise equal" ] || status=1
  json+="\"$s\": {\"reference_seconds\": \"${SECONDS_REF[$s]:-}\", \"kills_survived\": ${SURVIVED[$s]}, \"killed_inside_checkpoint_write\": ${HOOKED[$s]}, \"killed_at_random\": ${TIMED[$s]}, \"restarts_from_checkpoint\": ${CONTINUED[$s]}, \"result\": \"${RESULT[$s]}\"},"
done
json="${json%,}, \"seed\": $SEED, \"kills_per_stage\": $KILLS, \"binary\": \"$BIN\"}"
echo "$json" | python3 -m json.tool > "$WORK/crash-harness.json"
echo "wrote $WORK/crash-harness.json"
exit $status
