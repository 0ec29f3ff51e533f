#!/usr/bin/env bash
# scripts/sweep_validation.sh refuses, before it writes anything, what it
# cannot sweep: a setting the variants share (the judge's LoRA, the base),
# an unknown option, and an output folder that exists.
set -euo pipefail
BIN=${PPOLAB_BINARY:?}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "sweep_args: $*"; exit 1; }
# refuse PATTERN ENV-ASSIGNMENTS… -- ARGS…: exit 2, the message, OUT not created
refuse() {
  local pattern=$1 rc=0
  shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env PPOLAB_BINARY="$BIN" "${envs[@]}" scripts/sweep_validation.sh "$@" > "$WORK/out.txt" 2>&1 || rc=$?
  [ $rc -eq 2 ] || { cat "$WORK/out.txt"; fail "$*: exit $rc, expected 2"; }
  grep -q -- "$pattern" "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "$*: the error does not say '$pattern'"; }
}
for shared in lora.rank=4 reward.lr=0.01 pretrain.tokens=1000; do
  refuse "SFT setting 'sft.lr=0.002,$shared' changes the judge or the base" \
    SFT_SETTINGS="sft.lr=0.003 sft.lr=0.002,$shared" -- "$WORK/out"
  [ ! -e "$WORK/out" ] || fail "$shared: the output folder was created"
done
refuse "unknown option '--replicate'" -- "$WORK/out" --replicate 2
[ ! -e "$WORK/out" ] || fail "unknown option: the output folder was created"
mkdir "$WORK/taken" && touch "$WORK/taken/keep"
refuse "exists; refusing to overwrite it" -- "$WORK/taken"
[ -e "$WORK/taken/keep" ] || fail "an existing output folder lost a file"
echo "sweep_args: 5 refusals, nothing written"
