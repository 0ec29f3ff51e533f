#!/usr/bin/env bash
# Installs everything ppolab needs on Debian 12, as root. The product uses
# Debian packages only; the test oracles use Debian's python3-torch.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
PACKAGES=(
  build-essential cmake pkg-config g++
  libdnnl-dev nlohmann-json3-dev libssl-dev zlib1g-dev libutf8proc-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-venv python3-pip python3-torch python3-numpy
  clang libclang-rt-14-dev
  chromium
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
