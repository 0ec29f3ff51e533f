#!/usr/bin/env bash
# scripts/sweep_validation.sh refuses, before it writes anything, what it
# cannot sweep: a setting the variants share (the judge's LoRA, the base),
# an unknown option, and an output folder that exists. Then a micro sweep
# (two SFT settings, one PPO rate, one replicate) runs whole: each variant
# trained with its own options, PPO from the chosen SFT, the table written.
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

MICRO=(--set pretrain.tokens=12000 --set pretrain.check_prompts=0 --set max_updates=2 --set ppo.iterations=1
       --set evaluation.exact_prompts=2 --set limits.max_response=32 --set limits.max_context=288)
# Every variant's scores tie at this size: the first listed, not the tiny preset's SFT, is chosen.
SFT_SETTINGS="sft.lr=0.001 sft.lr=0.002,sft.accumulation=8" ACTOR_LRS="1e-4" PPOLAB_BINARY="$BIN" PPOLAB_QUIET=1 \
  scripts/sweep_validation.sh "$WORK/micro" --replicates 1 -- "${MICRO[@]}" > "$WORK/micro.log" 2>&1 ||
  { cat "$WORK/micro.log"; fail "the micro sweep failed"; }
# PPO's config: the study's options, the chosen SFT setting's, and its rates.
ppo_config=$("$BIN" config --preset tiny --set replicates.count=1 "${MICRO[@]}" --set sft.lr=0.001 \
  --set ppo.actor_lr=1e-4 --set ppo.critic_lr=0.0002 --identity | python3 -c 'import json, sys; print(json.load(sys.stdin)["config_sha256"])')
python3 - "$WORK/micro" "$ppo_config" <<'PY'
import json, sys
out, ppo_config = sys.argv[1], sys.argv[2]
s = json.load(open(out + "/sweep.json"))
assert set(s["variants"]) == {"sft-lr-0.002_accumulation-8", "sft-lr-0.001", "ppo-lr1e-4"}, s["variants"].keys()
assert s["chosen"]["ppo"] == "ppo-lr1e-4", s["chosen"]
for v, policies in s["variants"].items():
    for p, reps in policies.items():
        assert len(reps) == 1 and 0 <= reps[0]["exact"] <= reps[0]["in_grammar"] <= 1, (v, p, reps)
# each variant's SFT ran with its own settings, and PPO from the chosen one
sft = lambda v: open(f"{out}/{v}/replicates/0/sft/continuous.json").read()
config = lambda v: json.loads(sft(v))["identity"]["config"]["config_sha256"]
assert config("sft-lr-0.002_accumulation-8") != config("sft-lr-0.001")
assert s["chosen"]["sft"] == "sft-lr-0.001", s["chosen"]
assert sft("ppo-lr1e-4") == sft("sft-lr-0.001")
ppo = json.load(open(f"{out}/ppo-lr1e-4/replicates/0/ppo/continuous.json"))["identity"]["config"]["config_sha256"]
assert ppo == ppo_config, (ppo, ppo_config)
table = open(out + "/sweep.md").read()
assert "| (the base) | base |" in table and "Chosen: " + s["chosen"]["sft"] in table, table
PY
echo "sweep_args: the micro sweep ran whole"
