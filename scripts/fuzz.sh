#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each one
# for SECONDS (default 10) on a copy of its committed corpus. Any crash,
# leak or sanitizer report fails the script; the crashing input is kept in
# build-fuzz/findings/ and belongs in fuzz/corpus/<target>/ (named
# regression-*) where the replay tests of the ordinary build run it forever.
#
#   scripts/fuzz.sh [SECONDS]      CI runs 10 s per target; by hand, 600+
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-10}
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE= -DCMAKE_CXX_FLAGS="-O1 -g1" -DCMAKE_CXX_COMPILER=clang++ \
  -DPPOLAB_FUZZ=ON -DPPOLAB_TESTS=OFF -DPPOLAB_BENCH=OFF "${LAUNCHER[@]}" >/dev/null
TARGETS=()
for src in fuzz/fuzz_*.cpp; do TARGETS+=("$(basename "$src" .cpp)"); done
cmake --build build-fuzz -j"$(nproc)" --target ppolab_fuzz_targets >build-fuzz/build.log 2>&1 ||
  { tail -40 build-fuzz/build.log; exit 1; }
mkdir -p build-fuzz/findings
status=0
for name in "${TARGETS[@]}"; do
  bin=build-fuzz/bin/$name
  target=${name#fuzz_}
  work=build-fuzz/corpus/$target
  rm -rf "$work"; mkdir -p "$work"
  if [ -d "fuzz/corpus/$target" ]; then cp -r "fuzz/corpus/$target/." "$work/"; fi
  if "$bin" -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 -rss_limit_mb=4096 -timeout=20 -print_final_stats=1 \
       -artifact_prefix=build-fuzz/findings/"$name"- "$work" >build-fuzz/"$name".log 2>&1; then
    echo "fuzz $name: ok, ${SECONDS_PER_TARGET} s, $(ls "$work" | wc -l) corpus inputs," \
         "$(grep -o 'stat::number_of_executed_units: [0-9]*' build-fuzz/"$name".log | awk '{print $2}') runs"
  else
    echo "fuzz $name: FAILED (see build-fuzz/$name.log)"; tail -30 build-fuzz/"$name".log; status=1
  fi
done
exit $status
