#!/usr/bin/env bash
# Install, build, and run the test suite (unit, oracle and CLI smoke tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
mkdir -p build
PY=$(scripts/test-venv.sh)
scripts/build.sh -DPPOLAB_PYTHON="$PY"
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
