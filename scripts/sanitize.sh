#!/usr/bin/env bash
# Builds ppolab and its unit tests with AddressSanitizer + UBSan (LeakSanitizer
# included) and runs the tests labelled `unit`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PPOLAB_PYTHON:-$(scripts/test-venv.sh)}
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPPOLAB_SANITIZE=ON -DPPOLAB_BENCH=OFF \
  -DPPOLAB_PYTHON="$PY" >/dev/null
cmake --build build-asan -j"$(nproc)" >/dev/null
cd build-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j"$(nproc)" -L unit "$@"
