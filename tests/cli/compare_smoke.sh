#!/usr/bin/env bash
# `ppolab run --compare ppo,dpo,rloo,grpo,bon --ablations` on a micro study
# (one replicate, minimal epochs/iterations): every baseline and PPO ablation
# is trained from the chain's SFT (and judge), evaluated on the same held-out
# prompts, and put in findings.json's comparison table with intervals; the
# table's paired differences are recomputed here from the scored files; the
# terminal summary and report.html show the table; unknown methods are refused.
set -euo pipefail
BIN=${PPOLAB_BINARY:?}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RUN=$WORK/run
SETS=(--set pretrain.tokens=12000 --set pretrain.check_prompts=0
      --set sft.epochs=2 --set sft.accumulation=64 --set sft.interrupt_epoch=1
      --set reward.epochs=2 --set reward.pairs_per_update=128
      --set ppo.iterations=2 --set ppo.interrupt_iteration=1
      --set ppo.snapshot_every=1 --set evaluation.snapshot_samples=1 --set evaluation.best_of_n=2
      --set dpo.epochs=1 --set dpo.pairs_per_update=420
      --set rl.iterations=2 --set rl.interrupt_iteration=1
      --set limits.max_response=32 --set evaluation.exact_prompts=6 --set limits.max_context=288)
if "$BIN" run --out "$WORK/bad" --compare ppo,sft "${SETS[@]}" > "$WORK/log" 2>&1; then
  echo "--compare ppo,sft was accepted"; exit 1
fi
grep -q "\-\-compare ppo,sft: 'sft' is not a method; expected a comma-separated list of ppo, dpo, rloo, grpo, bon" "$WORK/log" \
  || { cat "$WORK/log"; exit 1; }
[ ! -e "$WORK/bad" ] || { echo "a refused --compare left $WORK/bad"; exit 1; }
"$BIN" run --out "$RUN" --replicates 1 --compare ppo,dpo,rloo,grpo,bon --ablations "${SETS[@]}" > "$WORK/log" 2>&1 \
  || { tail -50 "$WORK/log"; exit 1; }
python3 - "$RUN" "$WORK/log" <<'PY'
import json, os, sys
run, log = sys.argv[1], open(sys.argv[2], encoding="utf-8").read()
methods = ["dpo", "rloo", "grpo", "ppo-whiten", "ppo-vclip", "ppo-k3"]
state = json.load(open(os.path.join(run, "run-state.json")))
assert state["options"]["compare"] == methods, state["options"]
for m in methods:
    assert m + "-continuous" in state["steps"], (m, list(state["steps"]))
    rep = json.load(open(os.path.join(run, m, "continuous.json")))
    assert rep["stage"] == m, (m, rep["stage"])
    assert os.path.exists(os.path.join(run, "eval", m + "-scored.json")), m
for m, switch in [("ppo-whiten", "whiten_advantages"), ("ppo-vclip", "value_clipping")]:
    ident = json.load(open(os.path.join(run, m, "continuous.json")))["identity"]["design_switches"]
    assert ident[switch] is True, (m, ident)
assert json.load(open(os.path.join(run, "ppo-k3", "continuous.json")))["identity"]["design_switches"]["kl_penalty"] == "loss_k3"
assert json.load(open(os.path.join(run, "ppo", "continuous.json")))["identity"]["design_switches"] == {
    "whiten_advantages": False, "value_clipping": False, "cliprange_value": None, "kl_penalty": "reward_k1",
    "missing_eos": "replace"}
f = json.load(open(os.path.join(run, "findings.json")))
c = f["comparison"]
assert c["policies"] == ["sft", "ppo"] + methods, c["policies"]
assert [row["policy"] for row in c["table"]] == ["ppo"] + methods + ["bon"], [row["policy"] for row in c["table"]]
# The paired differences, recomputed: mean over test contexts (one replicate) of the gold difference.
def test_success(policy):
    rows = json.load(open(os.path.join(run, "eval", policy + "-scored.json")))["rows_detail"]
    by = {}
    for r in rows:
        if r["population"] == "test":
            by.setdefault(r["prompt"], []).append(1.0 if r["rubric"]["rubric_success"] else 0.0)
    return {p: sum(v) / len(v) for p, v in by.items()}
sft, ppo = test_success("sft"), test_success("ppo")
for row in c["table"]:
    g = row["gold_minus_sft"]
    assert g["low"] <= g["mean"] <= g["high"], row
    if row["policy"] in methods:
        mine = test_success(row["policy"])
        want = sum(mine[p] - sft[p] for p in sft) / len(sft)
        assert abs(g["mean"] - want) < 1e-12, (row["policy"], g["mean"], want)
        vs = sum(mine[p] - ppo[p] for p in ppo) / len(ppo)
        assert abs(row["gold_minus_ppo"]["mean"] - vs) < 1e-12, (row["policy"], row["gold_minus_ppo"], vs)
        assert row["kl_exact_to_sft"]["mean"] >= 0, row
assert c["table"][-1]["n"] == 2 and "kl_bound" in c["table"][-1], c["table"][-1]
# The best among the trained policies (best-of-n's baseline is another: SFT's samples).
best = max((row for row in c["table"] if row["policy"] != "bon"), key=lambda row: row["gold_minus_sft"]["mean"])
assert c["best_gold"]["policy"] == best["policy"], (c["best_gold"], best)
assert "one tiny simulated world" in c["best_gold"]["sentence"]
r = json.load(open(os.path.join(run, "results.json")))
assert r["comparison"] == c
seconds = r["comparison_seconds"]["per_replicate"]
for m in ["ppo"] + methods:
    assert len(seconds[m]) == 1 and seconds[m][0] > 0, (m, seconds)
summary = log[log.index("== ppolab study: " + run):].splitlines()
assert any(l.startswith("comparison     test prompts") for l in summary), "\n".join(summary)
for m in ["ppo", "bon-2"] + methods:
    assert any(l.startswith("  %-10s " % m) for l in summary), (m, "\n".join(summary))
for l in summary:
    assert len(l) <= 120, "summary line of %d columns: %r" % (len(l), l)
html = open(os.path.join(run, "report.html"), encoding="utf-8").read()
assert '<table id="comparison">' in html and '<svg id="plot-comparison"' in html
for m in ["ppo", "bon"] + methods:
    assert 'data-method="%s"' % m in html, m
print("compare smoke: ok,", c["best_gold"]["sentence"])
PY
