#!/usr/bin/env bash
# Install, build, and run the tests — what CI runs (.ci/run, inside a fresh
# Debian root: scripts/fresh-machine-check.sh):
#   1. the test suite (unit, oracle, fuzz-corpus replays, CLI smoke tests)
#   2. the unit tests again under AddressSanitizer + UBSan (scripts/sanitize.sh)
#   3. every libFuzzer target for 10 s (scripts/fuzz.sh)
#   4. format and lint: .clang-format and .clang-tidy (scripts/lint.sh)
# then one line "ppolab-test: N passed, N failed, N skipped" over all four
# (the lint counts as one test).
# `--quick` stops after 1; other arguments go to the first ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
if [[ ${1:-} == --quick ]]; then QUICK=1; shift; fi
# "ppolab-test: <phase> took N s" after each phase, so CI's log shows where
# its time goes.
T0=$SECONDS
took() { echo "ppolab-test: $1 took $((SECONDS - T0)) s"; T0=$SECONDS; }
scripts/install.sh --tests
took "install (Debian packages)"
mkdir -p build
PY=$(scripts/test-venv.sh)
took "test venv (PyPI oracles)"
scripts/build.sh -DPPOLAB_TESTS=ON -DPPOLAB_BENCH=ON -DPPOLAB_PYTHON="$PY"
took "build"
LOGS=$(mktemp -d)
trap 'rm -rf "$LOGS"' EXIT
# "T F S": tests, failed and skipped from ctest's "N% tests passed, F tests
# failed out of T" and its "(Skipped)" lines.
count() {
  local tf
  tf=$(sed -nE 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2 \1/p' "$1" | tail -1)
  [ -n "$tf" ] && echo "$tf $(grep -cE '^[[:space:]]*[0-9]+ - .*\(Skipped\)' "$1" || true)"
}
status=0
(cd build && ctest --output-on-failure -j"$(nproc)" "$@") 2>&1 | tee "$LOGS/suite" || status=1
read -r total failed skipped < <(count "$LOGS/suite") || { total=0; failed=0; skipped=0; status=1; }
took "test suite"
if [[ $QUICK == 0 ]]; then
  echo "== unit tests under ASan + UBSan"
  PPOLAB_PYTHON=$PY scripts/sanitize.sh 2>&1 | tee "$LOGS/asan" || status=1
  read -r t f s < <(count "$LOGS/asan") || { t=0; f=0; s=0; status=1; }
  total=$((total + t)); failed=$((failed + f)); skipped=$((skipped + s))
  took "ASan + UBSan build and tests"
  echo "== fuzzing, 10 s per target"
  fuzz_ok=1
  scripts/fuzz.sh 10 2>&1 | tee "$LOGS/fuzz" || { status=1; fuzz_ok=0; }
  t=$(grep -c '^fuzz .*: ' "$LOGS/fuzz" || true); f=$(grep -c '^fuzz .*: FAILED' "$LOGS/fuzz" || true)
  # A fuzz build that failed ran no target: it counts as one failure.
  if [[ $fuzz_ok == 0 && $f == 0 ]]; then t=$((t + 1)); f=1; fi
  total=$((total + t)); failed=$((failed + f))
  took "fuzz build and targets"
  echo "== format and lint"
  total=$((total + 1))
  scripts/lint.sh 2>&1 | tee "$LOGS/lint" || { status=1; failed=$((failed + 1)); }
  took "format and lint"
fi
[[ $failed == 0 ]] || status=1
echo "ppolab-test: $((total - failed - skipped)) passed, $failed failed, $skipped skipped"
exit $status
