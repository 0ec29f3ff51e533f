#!/usr/bin/env bash
# Install, build, and run the tests — what CI runs (.ci/run):
#   1. the test suite (unit, oracle, fuzz-corpus replays, CLI smoke tests)
#   2. the unit tests again under AddressSanitizer + UBSan (scripts/sanitize.sh)
#   3. every libFuzzer target for 10 s (scripts/fuzz.sh)
# `--quick` stops after 1; other arguments go to the first ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
if [[ ${1:-} == --quick ]]; then QUICK=1; shift; fi
scripts/install.sh
mkdir -p build
PY=$(scripts/test-venv.sh)
scripts/build.sh -DPPOLAB_PYTHON="$PY"
(cd build && ctest --output-on-failure -j"$(nproc)" "$@")
[[ $QUICK == 1 ]] && exit 0
echo "== unit tests under ASan + UBSan"
PPOLAB_PYTHON=$PY scripts/sanitize.sh
echo "== fuzzing, 10 s per target"
scripts/fuzz.sh 10
