#!/usr/bin/env bash
# Configures and builds ppolab (Release) into build/; the binary is
# build/bin/ppolab. Arguments are CMake options, e.g. -DPPOLAB_TESTS=OFF
# -DPPOLAB_BENCH=OFF (the binary alone) or -DPPOLAB_NATIVE=ON (compiled for
# this machine's CPU); CMake remembers them in build/ until given again.
set -euo pipefail
cd "$(dirname "$0")/.."
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${LAUNCHER[@]}" "$@" >/dev/null
cmake --build build -j"$(nproc)"
