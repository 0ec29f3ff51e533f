#!/usr/bin/env bash
# The golden test (docs/numerics.md): a micro study, run whole (prepare,
# pretraining, SFT, the judge and PPO in their interrupt, continuous and
# resume modes, the evaluation, the findings and the report), must give the
# outputs whose hashes tests/golden/micro_study.json holds — learned tensors,
# resume states, rollouts, snapshots, generations, metrics and results.json,
# durations and code hashes aside (scripts/golden_hashes.py). Under
# engine.numerics = canonical those bytes are the same on every x86-64 CPU
# and at any thread count, so the test fails on any difference wherever CI
# runs. A change that means to change the numbers rewrites the file:
#   tests/golden/golden_check.sh --write
set -euo pipefail
BIN=${PPOLAB_BINARY:?}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PPOLAB_QUIET=1
SETS=(--preset tiny --replicates 2 --set pretrain.tokens=12000 --set pretrain.check_prompts=0
      --set sft.epochs=2 --set sft.accumulation=32 --set max_updates=4
      --set reward.epochs=1 --set reward.pairs_per_update=16
      --set ppo.iterations=2 --set ppo.interrupt_iteration=1 --set ppo.snapshot_every=1
      --set evaluation.snapshot_samples=1 --set evaluation.best_of_n=2
      --set limits.max_response=32 --set evaluation.exact_prompts=6 --set limits.max_context=288)
# The hashes leave out code hashes; a copy of the binary with one byte more
# (another sha256, the same program) proves it wherever the test runs.
cp "$BIN" "$WORK/ppolab" && printf '\n' >> "$WORK/ppolab"
"$WORK/ppolab" run --out "$WORK/run" "${SETS[@]}" > "$WORK/log" 2>&1 || { tail -40 "$WORK/log"; exit 1; }
if [ "${1:-}" = --write ]; then
  python3 "$ROOT/scripts/golden_hashes.py" "$WORK/run" --write "$HERE/micro_study.json"
  exit 0
fi
python3 "$ROOT/scripts/golden_hashes.py" "$WORK/run" --check "$HERE/micro_study.json"
