#!/usr/bin/env bash
# seed_run.sh — the seed minimum run (SPEC §11), measured end to end: SFT,
# the judge, 100 PPO iterations and the held-out evaluation, each stage once
# (continuous mode: no interrupt/resume proofs), on a random-weight folder of
# the exact Qwen2.5-0.5B shape. Prints wall seconds and peak RSS per stage
# (GNU time) and the total; BENCHMARKS.md records the results.
#
#   bench/seed_run.sh [--build DIR] [--work DIR] [--model DIR] [--set k=v]...
#
# --model DIR  a Qwen2 folder to train (default: WORK/qwen-random, made once
#              with `ppolab init-random --preset qwen2.5-0.5b`, timed apart)
# --work DIR   where the model and the run folder go (default: /tmp/ppolab-seed-run);
#              WORK/run must not exist yet (ppolab refuses to overwrite a run)
# --set k=v    passed to every stage (e.g. ppo.iterations=2 for a smoke)
# The machine has 2 cores: nothing else should run meanwhile. The load
# average is printed before and after.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
WORK=/tmp/ppolab-seed-run
MODEL=
SETS=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --set) SETS+=(--set "$2"); shift 2 ;;
    *) echo "seed_run.sh: unknown argument '$1' (expected --build DIR, --work DIR, --model DIR, --set k=v)" >&2
       exit 2 ;;
  esac
done
PPOLAB=$BUILD/bin/ppolab
[[ -x $PPOLAB ]] || { echo "seed_run.sh: $PPOLAB not found (build first)" >&2; exit 2; }
RUN=$WORK/run
[[ -e $RUN ]] && { echo "seed_run.sh: $RUN exists; remove it or pass another --work" >&2; exit 2; }
mkdir -p "$WORK"
LOG=$WORK/seed_run.log
: > "$LOG"

echo "seed_run.sh: $(date -u '+%F %T') UTC, commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc --all) CPUs;" \
     "flags: $(grep -o -w 'avx512_bf16\|amx_bf16\|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

ROWS=()
TOTAL=0
# stage NAME COMMAND...: runs it under GNU time, appends "NAME wall rss".
stage() {
  local name=$1; shift
  local tf=$WORK/.time.$name
  echo "== $name: $*" | tee -a "$LOG"
  if ! /usr/bin/time -o "$tf" -f '%e %M' "$@" >>"$LOG" 2>&1; then
    echo "seed_run.sh: stage $name failed; its output is in $LOG:" >&2
    tail -20 "$LOG" >&2
    exit 1
  fi
  read -r wall rss < "$tf"
  rm -f "$tf"
  ROWS+=("$(printf '| %s | %.1f | %.0f |' "$name" "$wall" "$((rss / 1024))")")
  TOTAL=$(awk -v a="$TOTAL" -v b="$wall" 'BEGIN { printf "%.1f", a + b }')
  echo "   $name: ${wall} s, peak RSS $((rss / 1024)) MiB" | tee -a "$LOG"
}

if [[ -z $MODEL ]]; then
  MODEL=$WORK/qwen-random
  if [[ ! -f $MODEL/config.json ]]; then
    echo "== init-random (not counted in the run's total)"
    /usr/bin/time -f '   init-random: %e s, peak RSS %M KiB' \
      "$PPOLAB" init-random --preset qwen2.5-0.5b --out "$MODEL" --tokenizer "$ROOT/models/qwen2.5-0.5b-instruct" >>"$LOG"
  fi
fi
COMMON=(--run "$RUN" --preset seed --model "$MODEL" "${SETS[@]}")
stage prepare "$PPOLAB" prepare --run "$RUN" --preset seed
stage sft "$PPOLAB" sft "${COMMON[@]}" --mode continuous
stage reward "$PPOLAB" reward "${COMMON[@]}" --mode continuous
stage ppo "$PPOLAB" ppo "${COMMON[@]}" --mode continuous
stage evaluate "$PPOLAB" evaluate "${COMMON[@]}"

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| stage | wall s | peak RSS MiB |"
echo "|---|---|---|"
printf '%s\n' "${ROWS[@]}"
echo "| **total** | **$TOTAL** (= $(awk -v t="$TOTAL" 'BEGIN { printf "%.1f", t / 60 }') min) | |"
echo "(stage output: $LOG; the run folder: $RUN)"
