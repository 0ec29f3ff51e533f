#!/usr/bin/env bash
# The Python used by oracle tests: Debian's python3 (with Debian's
# python3-torch and numpy) in a venv that also sees system packages, plus
# the reference Hugging Face `tokenizers` from PyPI. Tests only: the product
# never runs Python. Prints the interpreter path.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=build/venv
if [ ! -x "$VENV/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$VENV" >&2
fi
if ! "$VENV/bin/python" -c "import tokenizers" 2>/dev/null; then
  "$VENV/bin/pip" install -q --disable-pip-version-check "tokenizers==0.20.3" >&2
fi
# The reference safetensors reader/writer (oracle of tests/model/test_safetensors).
if ! "$VENV/bin/python" -c "import safetensors" 2>/dev/null; then
  "$VENV/bin/pip" install -q --disable-pip-version-check "safetensors==0.4.5" >&2
fi
"$VENV/bin/python" -c "import torch, numpy, tokenizers, safetensors" >&2
echo "$PWD/$VENV/bin/python"
