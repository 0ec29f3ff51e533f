#!/usr/bin/env bash
# run_benchmarks.sh — ppolab and its peers side by side, in interleaved
# rounds on the same machine in the same minutes, ratios printed
# (BENCHMARKS.md records the results).
#
#   bench/run_benchmarks.sh [--build DIR] [--rounds N] [--min-time S] [--reps N] [--threads T]
#                           [--freeze] [--install-peers] [matmul] [model]
#
# model: every round runs bench_peak (the machine's limits per unit, now),
# bench_model (ppolab), then each peer present, on the SPEC §11 workloads
# (forward 1x128 with full logits, KV-cached decode 64 after 64, LoRA
# fwd+bwd 4x128; llama.cpp: forward and decode). compare.py prints, per
# workload, the medians over rounds of each side's tok/s and of the
# per-round ratios (with their range), the ratio to the better PyTorch, and
# the fraction of the same round's limit (the fastest BF16-capable unit
# present for forward and LoRA, the read bandwidth for decode), and what
# each SPEC §11 target over the better PyTorch needs of that limit. The VM's
# speed moves ~2x within minutes: only ratios inside one round are compared.
# Peers (each where present; --install-peers installs the PyPI ones):
#   debian — Debian's python3-torch (1.13) at its best setting (below);
#   pypi   — the newest PyPI torch, in DIR/pypi-torch (a venv);
#   ipex   — Intel Extension for PyTorch (PyPI intel-extension-for-pytorch,
#            its newest release and the torch it is built for), in
#            DIR/ipex-venv: torch_model.py --ipex, the frozen linears and LM
#            head handed to ipex.optimize (prepacked oneDNN BF16, AMX tiles
#            where the CPU shows them); it counts as a PyTorch for "the better
#            PyTorch";
#   llama  — llama.cpp through PyPI llama-cpp-python (built from source here),
#            in DIR/llama-venv, on a BF16 GGUF of the same shape made by
#            llama.cpp's convert_hf_to_gguf.py from `ppolab init-random`'s folder.
# ppolab also runs bench_model's lora4-products in each round (the LoRA
# step's frozen products alone): compare.py says how fast the step runs
# against them and what the LoRA target needs of them.
# --rounds N (default 5) rounds; matmul: one pass (ppolab vs Debian torch).
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
# DIR holds bin/bench_matmul, bin/bench_model, bin/bench_peak, bin/ppolab
# (default: build). Debian's PyTorch runs at its best setting here (SPEC
# §11): OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset, MALLOC_MMAP_MAX_=0
# MALLOC_TRIM_THRESHOLD_=68719476736, and the OpenMP build of OpenBLAS
# (Debian libopenblas0-openmp, fetched with `apt-get download` + `dpkg -x`
# into DIR/openblas-omp, first on LD_LIBRARY_PATH for that process only)
# when it can be obtained. The machine has 2 cores: the script prints the
# load average before and after; numbers taken while other jobs run are not
# worth keeping.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
MIN_TIME=0.5
MODEL_REPS=2
ROUNDS=5
INSTALL=0
THREADS=2
FREEZE=()
PARTS=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --min-time) MIN_TIME=$2; shift 2 ;;
    --reps) MODEL_REPS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --install-peers) INSTALL=1; shift ;;
    --threads) THREADS=$2; shift 2 ;;
    --freeze) FREEZE=(--freeze); shift ;;
    matmul|model) PARTS+=("$1"); shift ;;
    *) echo "run_benchmarks.sh: unknown argument '$1' (expected --build DIR, --rounds N, --min-time S, --reps N, --threads T, --freeze, --install-peers, matmul, model)" >&2
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
echo "== ppolab $(git -C "$ROOT" rev-parse --short HEAD); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') (cpuid family $(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')), flags: $(grep -o -w 'avx512_bf16\|amx_bf16\|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"

# The PyPI peers, installed on request (tests and CI never need them).
PYPI_PY=$BUILD/pypi-torch/bin/python
IPEX_PY=$BUILD/ipex-venv/bin/python
LLAMA_PY=$BUILD/llama-venv/bin/python
GGUF=$BUILD/bench-model/qwen2.5-0.5b-random-bf16.gguf
if [[ $INSTALL == 1 ]]; then
  if ! "$PYPI_PY" -c 'import torch' 2>/dev/null; then
    echo "== installing the newest PyPI torch into $BUILD/pypi-torch (several GB with its CUDA libraries)"
    python3 -m venv "$BUILD/pypi-torch" && "$BUILD/pypi-torch/bin/pip" install -q --disable-pip-version-check torch numpy
  fi
  if ! "$IPEX_PY" -c 'import intel_extension_for_pytorch' 2>/dev/null; then
    # IPEX pins the torch release it was built for: ask pip for that pair.
    python3 -m venv "$BUILD/ipex-venv"
    V=$("$BUILD/ipex-venv/bin/pip" index versions intel-extension-for-pytorch 2>/dev/null |
      sed -n 's/^intel-extension-for-pytorch (\(.*\))$/\1/p')
    echo "== installing Intel Extension for PyTorch ${V:-?} and its torch into $BUILD/ipex-venv"
    "$BUILD/ipex-venv/bin/pip" install -q --disable-pip-version-check \
      "intel-extension-for-pytorch==$V" "torch==${V%%+*}.*" numpy psutil ||
      echo "== Intel Extension for PyTorch did not install: its column stays empty"
  fi
  # llama.cpp's converter needs a new torch (float8 types), transformers and sentencepiece: that venv has the first.
  "$PYPI_PY" -c 'import transformers, sentencepiece' 2>/dev/null ||
    "$BUILD/pypi-torch/bin/pip" install -q --disable-pip-version-check transformers sentencepiece
  if ! "$LLAMA_PY" -c 'import llama_cpp' 2>/dev/null; then
    echo "== building llama-cpp-python from source into $BUILD/llama-venv (about 10 minutes on 2 cores)"
    python3 -m venv "$BUILD/llama-venv" &&
      CMAKE_BUILD_PARALLEL_LEVEL=$(nproc --all) "$BUILD/llama-venv/bin/pip" install -q --disable-pip-version-check \
        --no-binary llama-cpp-python llama-cpp-python
  fi
  if [[ ! -f $GGUF ]]; then
    # llama.cpp's converter from the same release's source, run by the PyPI torch venv.
    SRC=$BUILD/llama-src
    if ! compgen -G "$SRC/*/vendor/llama.cpp/convert_hf_to_gguf.py" >/dev/null; then
      V=$("$LLAMA_PY" -c 'import llama_cpp; print(llama_cpp.__version__)')
      mkdir -p "$SRC" && "$LLAMA_PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
        -d "$SRC" "llama-cpp-python==$V" && tar xzf "$SRC"/llama_cpp_python-*.tar.gz -C "$SRC"
    fi
    LL=$(ls -d "$SRC"/*/vendor/llama.cpp | head -1)
    mkdir -p "$BUILD/bench-model"
    [[ -f $BUILD/bench-model/qwen-random/config.json ]] ||
      "$BUILD/bin/ppolab" init-random --preset qwen2.5-0.5b --out "$BUILD/bench-model/qwen-random" \
        --tokenizer "$ROOT/models/qwen2.5-0.5b-instruct" >/dev/null
    PYTHONPATH=$LL/gguf-py "$PYPI_PY" "$LL/convert_hf_to_gguf.py" "$BUILD/bench-model/qwen-random" \
      --outtype bf16 --outfile "$GGUF.tmp" >/dev/null && mv "$GGUF.tmp" "$GGUF"
  fi
fi
PEERS=(debian)
PEER_NOTE="debian: PyTorch $("$TORCH_PY" -c 'import torch; print(torch.__version__)') ($BLAS_NOTE)"
if "$PYPI_PY" -c 'import torch' 2>/dev/null; then
  PEERS+=(pypi); PEER_NOTE+="; pypi: PyTorch $("$PYPI_PY" -c 'import torch; print(torch.__version__)')"
else
  PEER_NOTE+="; pypi: not installed (--install-peers)"
fi
if "$IPEX_PY" -c 'import intel_extension_for_pytorch' 2>/dev/null; then
  PEERS+=(ipex); PEER_NOTE+="; ipex: $("$IPEX_PY" -c 'import intel_extension_for_pytorch as i, torch; print("IPEX", i.__version__, "on PyTorch", torch.__version__)' 2>/dev/null)"
else
  PEER_NOTE+="; ipex: not installed (--install-peers)"
fi
if "$LLAMA_PY" -c 'import llama_cpp' 2>/dev/null && [[ -f $GGUF ]]; then
  PEERS+=(llama); PEER_NOTE+="; llama: llama-cpp-python $("$LLAMA_PY" -c 'import llama_cpp; print(llama_cpp.__version__)') on $(basename "$GGUF")"
else
  PEER_NOTE+="; llama: not installed (--install-peers)"
fi
echo "== peers: $PEER_NOTE"
echo "== ppolab: $("$BUILD/bin/ppolab" version | grep -A1 '^BF16 products' | tr -s ' ' | tr '\n' ' ')"

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
    R=$OUT/rounds
    rm -rf "$R" && mkdir -p "$R"
    tag() { sed "s/^{/{\"round\": $1, \"side\": \"$2\", /" >>"$R/all.jsonl"; }
    for ((r = 1; r <= ROUNDS; r++)); do
      echo "== round $r/$ROUNDS $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"
      OMP_NUM_THREADS=$THREADS "$BUILD/bin/bench_peak" --seconds 0.3 --trials 2 | tag "$r" peak
      # bench_model forks one child per workload after making the weights once.
      for w in forward decode lora4 lora4-products; do
        OMP_NUM_THREADS=$THREADS "$BUILD/bin/bench_model" --workload $w --reps "$MODEL_REPS" "${FREEZE[@]}" |
          tag "$r" ppolab
      done
      for peer in "${PEERS[@]}"; do
        case $peer in
          debian) for w in forward decode lora4; do
              "${TORCH_ENV[@]}" "$TORCH_PY" "$ROOT/bench/torch_model.py" --workload $w --reps "$MODEL_REPS" \
                --threads "$THREADS" | tag "$r" debian
            done ;;
          pypi) for w in forward decode lora4; do
              env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS="$THREADS" "$PYPI_PY" \
                "$ROOT/bench/torch_model.py" --workload $w --reps "$MODEL_REPS" --threads "$THREADS" | tag "$r" pypi
            done ;;
          ipex) for w in forward decode lora4; do
              env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS="$THREADS" "$IPEX_PY" \
                "$ROOT/bench/torch_model.py" --workload $w --reps "$MODEL_REPS" --threads "$THREADS" --ipex \
                2>>"$OUT/ipex.stderr" | tag "$r" ipex
            done ;;
          llama) for w in forward decode; do
              OMP_NUM_THREADS=$THREADS "$LLAMA_PY" "$ROOT/bench/llama_model.py" --gguf "$GGUF" --workload $w \
                --reps "$MODEL_REPS" --threads "$THREADS" | tag "$r" llama
            done ;;
        esac
      done
    done
    python3 "$ROOT/bench/compare.py" rounds "$R/all.jsonl"
  fi
done
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg); raw results in $OUT"
