#!/usr/bin/env bash
# Installs, from Debian 12's packages, what building and running ppolab needs
# (as root, or through sudo). With --tests, also what the test suite needs:
# the GoogleTest/Google Benchmark libraries, Debian's python3-torch and numpy
# for the oracles (and Jinja2, which PEFT's save_pretrained needs for the
# model card it writes), clang with its sanitizer and OpenMP runtimes for the
# fuzzers, clang-format and clang-tidy for the lint (scripts/lint.sh), and
# chromium for the report and voting-page browser tests. The product never
# needs the second set; `ppolab-study.sh` installs the first only.
#
#   scripts/install.sh            # build + run
#   scripts/install.sh --tests    # build + run + tests
set -euo pipefail
# Building and running ppolab. libdnnl-dev's CMake package (dnnl-config.cmake)
# is built with oneDNN's OpenCL GPU runtime and calls find_package(OpenCL):
# it needs the OpenCL loader and headers although ppolab never uses OpenCL.
# Open MPI (libopenmpi-dev to build, openmpi-bin's mpirun to start ranks)
# makes the same binary data-parallel under `mpirun -np W` (SPEC §13); without
# mpirun it runs as one process and never touches MPI.
PRODUCT=(
  g++ make cmake pkg-config
  libdnnl-dev ocl-icd-opencl-dev opencl-headers
  nlohmann-json3-dev libssl-dev zlib1g-dev libutf8proc-dev
  libopenmpi-dev openmpi-bin
)
# The tests, oracles, sanitizers, fuzzers and browser checks.
TESTS=(
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-venv python3-pip python3-torch python3-numpy python3-jinja2
  clang libclang-rt-14-dev libomp-dev clang-format clang-tidy
  chromium
)
PACKAGES=("${PRODUCT[@]}")
case "${1:-}" in
  "") ;;
  --tests) PACKAGES+=("${TESTS[@]}") ;;
  *) echo "usage: scripts/install.sh [--tests]" >&2; exit 2 ;;
esac
# Leave out one package on purpose (scripts/fresh-machine-check.sh --omit NAME
# proves that the check fails without it).
if [ -n "${PPOLAB_INSTALL_OMIT:-}" ]; then
  kept=()
  for p in "${PACKAGES[@]}"; do [ "$p" = "$PPOLAB_INSTALL_OMIT" ] || kept+=("$p"); done
  PACKAGES=("${kept[@]}")
  echo "install: leaving out $PPOLAB_INSTALL_OMIT (PPOLAB_INSTALL_OMIT)"
fi
SUDO=()
if [ "$(id -u)" != 0 ]; then SUDO=(sudo); fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  "${SUDO[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
