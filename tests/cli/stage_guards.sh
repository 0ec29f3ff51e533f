#!/usr/bin/env bash
# Leak guards and limits of the learning stages (SPEC §3, §7), on a micro run:
#  * SFT refuses to start when learn/ leads into gold/ (a symlink);
#  * a model folder inside the corpus is refused;
#  * an over-long example is refused (never truncated), naming the example;
#  * nothing is written by a refused stage;
#  * replicates: --replicate K outside the set is refused; a replicate pretrains
#    its own base only with replicates.repretrain_base (seed 7 + 1000 x 1), and
#    its SFT then learns on that base, in RUN/replicates/1/.
set -euo pipefail
BIN=${PPOLAB_BINARY:?}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
R=$WORK/run
"$BIN" prepare --run "$R" > /dev/null
"$BIN" pretrain --run "$R" --set pretrain.tokens=3000 --set pretrain.check_prompts=0 > /dev/null 2>&1

expect_fail() {  # expect_fail "pattern" command...
  local pattern=$1; shift
  if "$@" > "$WORK/out" 2>&1; then echo "expected failure: $*"; cat "$WORK/out"; exit 1; fi
  grep -q -- "$pattern" "$WORK/out" || { echo "missing '$pattern' in:"; cat "$WORK/out"; exit 1; }
}

# 1. over-long rows are refused by name, nothing written
expect_fail "over limits.max_prompt\|max_prompt" "$BIN" sft --run "$R" --set limits.max_prompt=20
[ ! -e "$R/sft/continuous.json" ] || { echo "refused stage wrote a report"; exit 1; }

# 2. a model folder inside the corpus is refused
cp -r "$R/base" "$R/corpus/gold/base"
expect_fail "inside the corpus\|outside" "$BIN" sft --run "$R" --preset generic --model "$R/corpus/gold/base" \
  --set model.pin_architecture=false
rm -rf "$R/corpus/gold/base"

# 3. learn/ leading into gold/ through a symlink is refused by the guarded reader
mv "$R/corpus/learn/demonstrations.jsonl" "$WORK/demonstrations.jsonl"
ln -s ../gold/labels.jsonl "$R/corpus/learn/demonstrations.jsonl"
expect_fail "gold\|outside" "$BIN" sft --run "$R"
[ ! -e "$R/sft" ] || [ -z "$(ls -A "$R/sft")" ] || { echo "refused stage wrote outputs"; ls -R "$R/sft"; exit 1; }
rm "$R/corpus/learn/demonstrations.jsonl"
mv "$WORK/demonstrations.jsonl" "$R/corpus/learn/demonstrations.jsonl"

# 4. with the corpus restored, the same stage starts (the guard is not a blanket refusal)
"$BIN" sft --run "$R" --set max_updates=1 > /dev/null 2>&1

# 5. replicates
expect_fail "expected a replicate of the set, 0 to 4" "$BIN" sft --run "$R" --replicate 5
expect_fail "share the study's base" "$BIN" pretrain --run "$R" --replicate 1 --set pretrain.tokens=3000
[ ! -e "$R/replicates/1/base" ] || { echo "a refused pretrain wrote a base"; exit 1; }
OWN=(--set replicates.repretrain_base=true)
"$BIN" pretrain --run "$R" --replicate 1 "${OWN[@]}" --set pretrain.tokens=3000 --set pretrain.check_prompts=0 > /dev/null 2>&1
"$BIN" sft --run "$R" --replicate 1 "${OWN[@]}" --set max_updates=1 > /dev/null 2>&1
python3 - "$R" <<'PY'
import json, sys
r = sys.argv[1]
p = json.load(open(r + "/replicates/1/base/pretrain.json"))
assert p["seed"] == 1007, "replicate 1's base is not pretrained with seed 7 + 1000: %r" % p["seed"]
a = json.load(open(r + "/sft/continuous.json"))["identity"]
b = json.load(open(r + "/replicates/1/sft/continuous.json"))["identity"]
assert a["base_frozen_identity"] != b["base_frozen_identity"], "replicate 1's SFT did not learn on its own base"
assert a["config"]["config_sha256"] != b["config"]["config_sha256"], "replicate 1 has replicate 0's study.seed"
PY
echo "stage guards: ok"
