#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each one
# for SECONDS (default 10) on a copy of its committed corpus. Any crash,
# leak or sanitizer report fails the script; the crashing input is kept in
# build-fuzz/findings/ and belongs in fuzz/corpus/<target>/ (named
# regression-*) where the replay tests of the ordinary build run it forever.
# The build type is None (no flags of CMake's own): an empty one becomes
# Release in CMakeLists.txt, whose -O3 would override -O1. The targets run
# nproc at a time, each on a core of its own for its SECONDS (libFuzzer is
# one process on one core); their reports are printed in order afterwards.
#
#   scripts/fuzz.sh [SECONDS]      CI runs 10 s per target; by hand, 600+
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-10}
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" -DCMAKE_CXX_COMPILER=clang++ \
  -DPPOLAB_FUZZ=ON -DPPOLAB_TESTS=OFF -DPPOLAB_BENCH=OFF "${LAUNCHER[@]}" >/dev/null
TARGETS=()
for src in fuzz/fuzz_*.cpp; do TARGETS+=("$(basename "$src" .cpp)"); done
cmake --build build-fuzz -j"$(nproc)" --target ppolab_fuzz_targets >build-fuzz/build.log 2>&1 ||
  { tail -40 build-fuzz/build.log; exit 1; }
mkdir -p build-fuzz/findings
# A UBSan report ends the run as a finding (UB is recoverable in this build).
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_target() {
  local name=$1 bin=build-fuzz/bin/$1 target=${1#fuzz_}
  local work=build-fuzz/corpus/$target log=build-fuzz/$1.log
  rm -rf "$work"; mkdir -p "$work"
  if [ -d "fuzz/corpus/$target" ]; then cp -r "fuzz/corpus/$target/." "$work/"; fi
  if "$bin" -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 -rss_limit_mb=4096 -timeout=20 -print_final_stats=1 \
       -artifact_prefix=build-fuzz/findings/"$name"- "$work" >"$log" 2>&1; then
    echo "fuzz $name: ok, ${SECONDS_PER_TARGET} s, $(ls "$work" | wc -l) corpus inputs," \
         "$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}') runs"
  else
    echo "fuzz $name: FAILED (see $log)"; tail -30 "$log"
  fi
}
JOBS=$(nproc) running=0
for name in "${TARGETS[@]}"; do
  rm -f build-fuzz/"$name".result
  if ((running >= JOBS)); then wait -n || true; running=$((running - 1)); fi
  run_target "$name" >build-fuzz/"$name".result 2>&1 &
  running=$((running + 1))
done
wait
status=0
for name in "${TARGETS[@]}"; do
  if [ -s build-fuzz/"$name".result ]; then cat build-fuzz/"$name".result
  else echo "fuzz $name: FAILED (no report: its runner died)"; fi
  grep -q "^fuzz $name: ok" build-fuzz/"$name".result 2>/dev/null || status=1
done
exit $status
