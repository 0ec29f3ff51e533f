#!/usr/bin/env bash
# Data-parallel throughput (SPEC §13): each training stage at W = 1 and at
# W = 2 (`mpirun -np 2`), one OpenMP thread per rank, parallel.chunks = 2,
# on the tiny study's base and corpus, side by side in interleaved rounds
# (W = 1 then W = 2 for every stage, each round), so the machine's drift
# hits both alike. Prints each stage's seconds per round and the median of
# the per-round ratios t(W=1) / t(W=2); the states of both are checked
# equal every round (the speed-up is of the same computation).
#   bench/mpi_throughput.sh [ROUNDS (default 5)] [ppolab binary]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
BIN=$(realpath "${2:-build/bin/ppolab}")
command -v mpirun > /dev/null || { echo "mpirun not found" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PPOLAB_QUIET=1 OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The tiny preset with a cap per stage (about half a minute each at W = 1).
SETS=(--set parallel.chunks=2 --set max_updates=24 --set ppo.iterations=16 --set checkpoint.every_updates=1000
      --set checkpoint.every_iterations=1000)
"$BIN" prepare --run "$WORK/base" "${SETS[@]}" > /dev/null
"$BIN" pretrain --run "$WORK/base" "${SETS[@]}" > /dev/null 2>&1
"$BIN" sft --run "$WORK/base" "${SETS[@]}" > /dev/null
"$BIN" reward --run "$WORK/base" "${SETS[@]}" > /dev/null
seconds() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['seconds'])" "$1"; }
one_stage() {  # W STAGE RUN
  local w=$1 stage=$2 run=$3
  rm -rf "$run"; mkdir -p "$run"; cp -r "$WORK/base/corpus" "$WORK/base/base" "$run/"
  [ "$stage" = ppo ] && cp -r "$WORK/base/sft" "$WORK/base/reward" "$run/"
  if [ "$w" = 1 ]; then "$BIN" "$stage" --run "$run" --mode continuous "${SETS[@]}" > /dev/null
  else mpirun -np "$w" --oversubscribe --bind-to none --mca btl self,vader -x OMP_NUM_THREADS -x PPOLAB_QUIET \
         "$BIN" "$stage" --run "$run" --mode continuous "${SETS[@]}" > /dev/null; fi
  seconds "$run/$stage/continuous.json"
}
echo "data-parallel throughput: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) cores, one thread per rank"
"$BIN" version | grep '^data-parallel'
declare -A RATIOS
for r in $(seq "$ROUNDS"); do
  for stage in sft reward ppo; do
    t1=$(one_stage 1 $stage "$WORK/w1")
    t2=$(one_stage 2 $stage "$WORK/w2")
    cmp -s "$WORK/w1/$stage/continuous.state.gz" "$WORK/w2/$stage/continuous.state.gz" ||
      { echo "round $r $stage: the W=1 and W=2 states differ" >&2; exit 1; }
    ratio=$(python3 -c "print(f'{$t1 / $t2:.2f}')")
    RATIOS[$stage]+="$ratio "
    printf 'round %d %-6s W=1 %6.1f s   W=2 %6.1f s   ratio %s\n' "$r" "$stage" "$t1" "$t2" "$ratio"
  done
done
for stage in sft reward ppo; do
  python3 - "$stage" ${RATIOS[$stage]} <<'PY'
import statistics, sys
stage, ratios = sys.argv[1], [float(x) for x in sys.argv[2:]]
print(f"median {stage:6s} t(W=1)/t(W=2) = {statistics.median(ratios):.2f}  (rounds: {', '.join(map(str, ratios))})")
PY
done
