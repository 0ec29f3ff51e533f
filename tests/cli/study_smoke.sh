#!/usr/bin/env bash
# End-to-end smoke of every stage on a micro study (CI): `ppolab run` with a
# few thousand pretraining tokens and minimal epochs/iterations, then checks
# that results.json holds three PASSing resume checks and a judge result,
# that a finished run is refused, and that --resume of a finished run is too.
set -euo pipefail
BIN=${PPOLAB_BINARY:?}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RUN=$WORK/run
SETS=(--set pretrain.tokens=12000 --set pretrain.check_prompts=0
      --set sft.epochs=2 --set sft.accumulation=32
      --set reward.epochs=2 --set reward.pairs_per_update=64
      --set ppo.iterations=2 --set ppo.interrupt_iteration=1)
"$BIN" run --out "$RUN" "${SETS[@]}" > "$WORK/log" 2>&1 || { tail -50 "$WORK/log"; exit 1; }
python3 - "$RUN" <<'PY'
import json, sys, os
run = sys.argv[1]
r = json.load(open(os.path.join(run, "results.json")))
assert r["resume_checks"] == {"sft": "PASS", "reward": "PASS", "ppo": "PASS"}, r["resume_checks"]
assert r["reward_test"]["pairs"] == 180, r["reward_test"]
for stage in ["sft", "reward", "ppo"]:
    for mode in ["interrupt", "continuous", "resume"]:
        assert os.path.exists(os.path.join(run, stage, mode + ".state.gz")), (stage, mode)
assert os.path.exists(os.path.join(run, "sft", "final", "peft", "adapter_config.json"))
ppo = json.load(open(os.path.join(run, "ppo", "continuous.json")))
assert ppo["iterations"] == 2 and ppo["updates_per_optimizer"] == 4, ppo["iterations"]
assert len(ppo["history"]) == 2 and "objective/kl" in ppo["history"][0]
print("study smoke: results.json ok:", r["resume_checks"], r["reward_test"])
PY
if "$BIN" run --out "$RUN" > "$WORK/again" 2>&1; then echo "a finished run was overwritten"; exit 1; fi
grep -q "refusing to overwrite the finished run" "$WORK/again" || { cat "$WORK/again"; exit 1; }
if "$BIN" run --resume "$RUN" > "$WORK/again" 2>&1; then echo "--resume of a finished run was accepted"; exit 1; fi
echo "study smoke: ok"
