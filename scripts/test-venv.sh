#!/usr/bin/env bash
# The Python used by oracle tests: Debian's python3 (with Debian's
# python3-torch and numpy) in a venv that also sees system packages, plus
# the reference Hugging Face `tokenizers`, `transformers` and `peft` from PyPI.
# Tests only: the product
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
# The real Hugging Face stack as the oracle of LoRA and of the PEFT export
# (tests/model/test_lora_peft, tests/training/test_learned_io): transformers
# with its own dependencies (none is torch), then PEFT and accelerate without
# theirs — Debian's torch calls itself 1.13.0a0, a pre-release that does not
# satisfy PEFT's "torch>=1.13", so pip would otherwise fetch the PyPI torch and
# several GB of CUDA libraries. PEFT 0.13.2 is the newest that runs on torch
# 1.13 here (checked: a LoRA Qwen2 forward and backward).
if ! "$VENV/bin/python" -c "import transformers" 2>/dev/null; then
  "$VENV/bin/pip" install -q --disable-pip-version-check "transformers==4.46.3" "psutil==5.9.8" >&2
fi
if ! "$VENV/bin/python" -c "import peft" 2>/dev/null; then
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "peft==0.13.2" "accelerate==1.0.1" >&2
fi
# TensorBoard's own reader, the oracle of the event files (tests/training/test_tensorboard).
if ! "$VENV/bin/python" -c "import tensorboard" 2>/dev/null; then
  "$VENV/bin/pip" install -q --disable-pip-version-check "tensorboard==2.21.0" >&2
fi
# jinja2 is Debian's python3-jinja2 (scripts/install.sh --tests): PEFT's
# save_pretrained writes a model card with it.
"$VENV/bin/python" -c "import torch, numpy, jinja2, tokenizers, safetensors, transformers, peft, tensorboard" >&2
echo "$PWD/$VENV/bin/python"
