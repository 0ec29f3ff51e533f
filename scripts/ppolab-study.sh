#!/usr/bin/env bash
# The main job: install, build, run the whole study on the embedded default model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
scripts/build.sh
exec build/bin/ppolab run "$@"
