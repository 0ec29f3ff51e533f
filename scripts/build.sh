#!/usr/bin/env bash
# Configures and builds ppolab (Release) into build/; the binary is build/bin/ppolab.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
