#!/usr/bin/env bash
# The main job: install what ppolab needs (Debian packages only), build the
# ppolab binary alone (no tests, no benchmarks), run the whole study on the
# embedded default model. Arguments go to `ppolab run` (see `ppolab run --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
scripts/build.sh -DPPOLAB_TESTS=OFF -DPPOLAB_BENCH=OFF
exec build/bin/ppolab run "$@"
