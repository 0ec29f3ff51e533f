#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each one
# for SECONDS (default 10) on a copy of its committed corpus. Any crash,
# leak or sanitizer report fails the script; the crashing input is kept in
# build-fuzz/findings/ and belongs in tests as a regression input.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-10}
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DPPOLAB_FUZZ=ON -DPPOLAB_TESTS=OFF -DPPOLAB_BENCH=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" >/dev/null
mkdir -p build-fuzz/findings
status=0
for bin in build-fuzz/bin/fuzz_*; do
  name=$(basename "$bin")
  target=${name#fuzz_}
  work=build-fuzz/corpus/$target
  rm -rf "$work"; mkdir -p "$work"
  if [ -d "fuzz/corpus/$target" ]; then cp -r "fuzz/corpus/$target/." "$work/"; fi
  if "$bin" -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 -rss_limit_mb=4096 \
       -artifact_prefix=build-fuzz/findings/"$name"- "$work" >build-fuzz/"$name".log 2>&1; then
    echo "fuzz $name: ok ($(grep -c . "$work"/* 2>/dev/null | wc -l) corpus inputs, $(grep -o 'stat::number_of_executed_units: [0-9]*' build-fuzz/"$name".log | awk '{print $2}') runs)"
  else
    echo "fuzz $name: FAILED (see build-fuzz/$name.log)"; tail -30 build-fuzz/"$name".log; status=1
  fi
done
exit $status
