#!/usr/bin/env bash
# Builds ppolab and its unit tests with AddressSanitizer + UBSan
# (LeakSanitizer included) in build-asan/ and runs the tests labelled `unit`
# (they include the fuzz corpus replays). Extra arguments go to ctest.
# -O1 -g1: sanitizer-friendly code and line tables for the reports, at about
# the cost of one ordinary build (CI runs this on 2 cores). The build type is
# None (no flags of CMake's own, asserts on): an empty one becomes Release in
# CMakeLists.txt, whose -O3 -DNDEBUG would override -O1, and GCC's -O3 with
# ASan + UBSan compiles about 3x slower than -O1 with them.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PPOLAB_PYTHON:-$(scripts/test-venv.sh)}
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" -DPPOLAB_SANITIZE=ON \
  -DPPOLAB_BENCH=OFF -DPPOLAB_PYTHON="$PY" "${LAUNCHER[@]}" >/dev/null
# Only what the unit tests need (their executables and the ppolab binary
# some of them drive, gathered in the target ppolab_unit_tests), not the
# oracle/smoke tests.
echo "sanitize: building $(cd build-asan && ctest -N -L unit | awk '/Test +#/' | wc -l) unit test targets with ASan + UBSan"
cmake --build build-asan -j"$(nproc)" --target ppolab_unit_tests >build-asan/build.log 2>&1 ||
  { tail -40 build-asan/build.log; exit 1; }
grep -E "warning:" build-asan/build.log && { echo "sanitize: the build printed warnings"; exit 1; }
cd build-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j"$(nproc)" -L unit "$@"
