#!/usr/bin/env bash
# run_benchmarks.sh — ppolab and PyTorch eager BF16 side by side in one run,
# 2 threads each, ratios printed (BENCHMARKS.md records the results).
#
#   bench/run_benchmarks.sh [--build DIR] [--min-time S] [--reps N] [--threads T] [--freeze] [matmul] [model]
#
# Both sides run with GOMP_SPINCOUNT=10000 and OMP_WAIT_POLICY unset (what
# the ppolab CLI sets for itself: a short spin at barriers, then sleep; see
# BENCHMARKS.md); WAIT_POLICY=ACTIVE|PASSIVE in the environment runs both
# sides with that OMP_WAIT_POLICY instead.
# --threads 1 compares one core against one core and adds CPU-time ratios,
# which stay meaningful while other jobs load the machine (2 threads are
# the reference setting; they need a quiet machine). --freeze runs
# bench_model with the base matrices frozen (prepacked: freeze_base_matrices).
#
# DIR holds bin/bench_matmul and bin/bench_model (default: build). PyTorch
# runs at its best setting here (SPEC §11): OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE unset, MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736,
# and the OpenMP build of OpenBLAS (Debian libopenblas0-openmp, fetched with
# `apt-get download` + `dpkg -x` into DIR/openblas-omp, first on
# LD_LIBRARY_PATH for the PyTorch process only) when it can be obtained.
# The machine has 2 cores: the script prints the load average before and
# after; numbers taken while other jobs run are not worth keeping. It also
# runs DIR/bin/bench_peak (the machine's BF16 peak and read bandwidth, 1 and
# T threads) before and after, and prints each model workload against the
# limits those imply, since a virtual machine of this kind is not always as
# fast as SPEC §11's anchors.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
MIN_TIME=0.5
MODEL_REPS=3
THREADS=2
FREEZE=()
PARTS=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --min-time) MIN_TIME=$2; shift 2 ;;
    --reps) MODEL_REPS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --freeze) FREEZE=(--freeze); shift ;;
    matmul|model) PARTS+=("$1"); shift ;;
    *) echo "run_benchmarks.sh: unknown argument '$1' (expected --build DIR, --min-time S, --reps N, --threads T, --freeze, matmul, model)" >&2
       exit 2 ;;
  esac
done
[[ ${#PARTS[@]} -eq 0 ]] && PARTS=(matmul model)
TORCH_PY=${TORCH_PYTHON:-/usr/bin/python3}
if [[ -n ${WAIT_POLICY:-} ]]; then
  export OMP_WAIT_POLICY=$WAIT_POLICY; unset GOMP_SPINCOUNT; OMP_NOTE="OMP_WAIT_POLICY=$WAIT_POLICY"
else
  unset OMP_WAIT_POLICY; export GOMP_SPINCOUNT=10000; OMP_NOTE="GOMP_SPINCOUNT=10000"
fi
OUT=$BUILD/bench-results
mkdir -p "$OUT"

# The OpenMP OpenBLAS for the PyTorch process (best setting), if obtainable.
BLAS_DIR=$BUILD/openblas-omp/x/usr/lib/x86_64-linux-gnu/openblas-openmp
if [[ ! -d $BLAS_DIR ]]; then
  (mkdir -p "$BUILD/openblas-omp" && cd "$BUILD/openblas-omp" &&
   apt-get download libopenblas0-openmp >/dev/null 2>&1 && dpkg -x libopenblas0-openmp_*.deb x) || true
fi
TORCH_ENV=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736
           OMP_NUM_THREADS=$THREADS)
if [[ -d $BLAS_DIR ]]; then
  TORCH_ENV+=(LD_LIBRARY_PATH=$BLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH})
  BLAS_NOTE="OpenMP OpenBLAS from $BLAS_DIR"
else
  BLAS_NOTE="OpenMP OpenBLAS not available: PyTorch as installed"
fi

echo "== $(date -u +%FT%TZ) $(uname -n); $THREADS thread(s), $OMP_NOTE; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== ppolab $(git -C "$ROOT" rev-parse --short HEAD); PyTorch $("$TORCH_PY" -c 'import torch; print(torch.__version__)') ($BLAS_NOTE)"

PEAK=$OUT/peak.jsonl
: >"$PEAK"
measure_peak() {
  [[ -x $BUILD/bin/bench_peak ]] || { echo "== peak: $BUILD/bin/bench_peak not built"; return 0; }
  OMP_NUM_THREADS=$THREADS "$BUILD/bin/bench_peak" | tee -a "$PEAK" | sed "s/^/== peak ($1): /"
}
measure_peak before

for part in "${PARTS[@]}"; do
  if [[ $part == matmul ]]; then
    OMP_NUM_THREADS=$THREADS "$BUILD/bin/bench_matmul" --benchmark_min_time="$MIN_TIME" \
      --benchmark_out="$OUT/matmul_ppolab.json" --benchmark_out_format=json >/dev/null
    "${TORCH_ENV[@]}" "$TORCH_PY" "$ROOT/bench/torch_matmul.py" --threads "$THREADS" --min-time "$MIN_TIME" \
      >"$OUT/matmul_torch.jsonl"
    "$TORCH_PY" "$ROOT/bench/compare.py" matmul "$OUT/matmul_ppolab.json" "$OUT/matmul_torch.jsonl"
  else
    if [[ ! -x $BUILD/bin/bench_model ]]; then
      echo "== model: $BUILD/bin/bench_model not built (needs the Qwen2 model library)"
      continue
    fi
    : >"$OUT/model_torch.jsonl"
    # bench_model forks one child per workload after making the weights once.
    OMP_NUM_THREADS=$THREADS "$BUILD/bin/bench_model" --reps "$MODEL_REPS" "${FREEZE[@]}" >"$OUT/model_ppolab.jsonl"
    for w in forward decode lora1 lora4; do
      "${TORCH_ENV[@]}" "$TORCH_PY" "$ROOT/bench/torch_model.py" --workload $w --reps "$MODEL_REPS" \
        --threads "$THREADS" >>"$OUT/model_torch.jsonl"
    done
    measure_peak after
    "$TORCH_PY" "$ROOT/bench/compare.py" model "$OUT/model_ppolab.jsonl" "$OUT/model_torch.jsonl" "$PEAK"
  fi
done
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg); raw results in $OUT"
