#!/usr/bin/env bash
# End-to-end smoke of every stage on a micro study (CI): `ppolab run
# --replicates 2` with a few thousand pretraining tokens and minimal
# epochs/iterations, then checks the replicate layout (chain 0 proves exact
# resume, chain 1 runs each stage once with its own seeds), the findings
# (intervals, verdict, over-optimisation points), that results.json holds
# three PASSing resume checks and a judge result,
# that a finished run is refused, and that --resume of a finished run is too;
# the HTML report is loaded by headless Chromium, which must find its plots.
set -euo pipefail
BIN=${PPOLAB_BINARY:?}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RUN=$WORK/run
SETS=(--set pretrain.tokens=12000 --set pretrain.check_prompts=0
      --set sft.epochs=2 --set sft.accumulation=32
      --set reward.epochs=2 --set reward.pairs_per_update=64
      --set ppo.iterations=2 --set ppo.interrupt_iteration=1
      --set ppo.snapshot_every=1 --set evaluation.snapshot_samples=1 --set evaluation.best_of_n=4
      --set limits.max_response=32 --set evaluation.exact_prompts=6 --set limits.max_context=288)
# Progress lines on (PPOLAB_QUIET=0): they must name their step of the study.
PPOLAB_QUIET=0 "$BIN" run --out "$RUN" --replicates 2 "${SETS[@]}" > "$WORK/log" 2>&1 || { tail -50 "$WORK/log"; exit 1; }
python3 - "$RUN" <<'PY'
import json, sys, os, filecmp
run = sys.argv[1]
r = json.load(open(os.path.join(run, "results.json")))
R0, R1 = os.path.join(run, "replicates", "0"), os.path.join(run, "replicates", "1")
assert r["replicates"] == 2, r["replicates"]
assert r["resume_checks"] == {"sft": "PASS", "reward": "PASS", "ppo": "PASS"}, r["resume_checks"]
assert r["reward_test"]["pairs"] == 180, r["reward_test"]
for stage in ["sft", "reward", "ppo"]:
    for mode in ["interrupt", "continuous", "resume"]:
        assert os.path.exists(os.path.join(R0, stage, mode + ".state.gz")), (stage, mode)
        # chain 1 runs each stage once, continuously
        assert os.path.exists(os.path.join(R1, stage, mode + ".state.gz")) == (mode == "continuous"), (stage, mode)
    assert not os.path.exists(os.path.join(run, stage)), "a set keeps no stage in RUN itself: " + stage
for chain in [R0, R1]:
    assert os.path.exists(os.path.join(chain, "sft", "final", "peft", "adapter_config.json")), chain
    assert os.path.exists(os.path.join(chain, "eval", "metrics.json")), chain
# One corpus and one base; each chain its own seeds (study.seed 0 and 1): different adapters.
assert os.path.exists(os.path.join(run, "corpus", "manifest.json")) and os.path.exists(os.path.join(run, "base"))
assert not filecmp.cmp(os.path.join(R0, "sft", "final", "learned.safetensors"),
                       os.path.join(R1, "sft", "final", "learned.safetensors"), shallow=False), "replicates share adapters"
assert [p["study_seed"] for p in r["per_replicate"]] == [0, 1], r["per_replicate"]
ppo = json.load(open(os.path.join(R0, "ppo", "continuous.json")))
assert ppo["iterations"] == 2 and ppo["updates_per_optimizer"] == 4, ppo["iterations"]
assert len(ppo["history"]) == 2 and "objective/kl" in ppo["history"][0]
assert set(r["actor"]["sft"]) >= {"test", "probe_rows", "probe_unique_contexts", "all_rows", "all_unique_contexts"}
assert r["actor"]["ppo"]["all_rows"]["rows"] == 260 and r["actor"]["ppo"]["all_unique_contexts"]["rows"] == 200
assert r["exercise"]["contexts"] == 20, r.get("exercise")
# The findings: intervals with their units, the paired difference, the verdict, the over-optimisation points.
assert r["confidence"]["units"] == {"replicates": 2, "contexts": {"test": 180, "probe": 20}}, r["confidence"]
for pop in ["test", "probe"]:
    for metric in ["rubric_success", "relevant", "learned_score", "kl_exact_to_sft", "response_tokens"]:
        i = r["ppo_minus_sft"][pop][metric]
        assert i["low"] <= i["mean"] <= i["high"] and i["replicates"] == 2, (pop, metric, i)
assert r["policies"]["sft"]["test"]["kl_exact_to_sft"]["mean"] == 0, "SFT's exact KL to itself is not 0"
assert r["verdict"]["code"] in {"improved", "improved_judge_flat", "improved_judge_down", "judge_gain_only",
                                "no_change", "judge_down_only", "exploited", "degraded_judge_flat", "degraded"}
o = r["overoptimisation"]
assert [s["iteration"] for s in o["snapshots"]] == [0, 1, 2], o.get("snapshots")
assert o["snapshots"][0]["kl_exact"]["mean"] == 0 and all(s["kl_exact"]["low"] >= 0 for s in o["snapshots"])
assert [b["n"] for b in o["best_of_n"]] == [1, 2, 4], o["best_of_n"]
assert "text" in o["answer"], o["answer"]
assert os.path.exists(os.path.join(run, "findings.json"))
print("study smoke: results.json ok:", r["resume_checks"], r["reward_test"], r["verdict"]["code"])
PY
# The terminal summary: a table under 100 columns with the rows named, no JSON;
# progress lines name their step of the study.
python3 - "$WORK/log" "$RUN" <<'PY'
import sys
log, run = open(sys.argv[1], encoding="utf-8").read(), sys.argv[2]
start = log.index("== ppolab study: " + run)
summary = log[start:].splitlines()
for line in summary:
    assert len(line) < 100, "summary line of %d columns: %r" % (len(line), line)
    assert "{" not in line and '"' not in line, "JSON in the summary: %r" % line
for head in ["answer         2 replicate(s) x 180 test prompts", "  PPO - SFT, test: rubric success ", "SFT    test ", "SFT    probe contexts ", "SFT    all contexts ",
             "PPO    test ", "PPO    probe contexts ", "PPO    all contexts ",
             "judge          ", "resume checks  sft PASS, reward PASS, ppo PASS", "minutes ",
             "results        " + run + "/results.json", "report         " + run + "/report.html"]:
    assert any(l.startswith(head) for l in summary), "summary has no line %r:\n%s" % (head, "\n".join(summary))
assert "== step 4/27 replicate 0 sft continuous" in log, "no step header for sft continuous"
assert "[step 8/27 replicate 0 reward continuous] reward continuous " in log, "progress lines do not name their step"
assert "== step 19/27 replicate 1 sft continuous" in log, "no step header for replicate 1"
print("study smoke: summary ok,", len(summary), "lines")
PY
# (through a file: grep -q would stop reading early, and pipefail count the help's SIGPIPE)
"$BIN" run --help > "$WORK/help"
grep -q "reward-test" "$WORK/help" || { echo "run --help does not list the steps"; exit 1; }
grep -q -- "--until STAGE" "$WORK/help" || { echo "run --help does not list --until"; exit 1; }
# The report, loaded by a real headless browser: the plots are in its DOM.
chromium --headless --no-sandbox --disable-gpu --dump-dom "file://$RUN/report.html" 2>/dev/null > "$WORK/dom.html"
for plot in plot-overoptimisation plot-sft-loss plot-judge-loss plot-ppo-score plot-ppo-rlhf-reward \
            plot-ppo-kl-penalty plot-ppo-kl plot-ppo-approxkl plot-ppo-value-loss plot-ppo-clipfrac \
            plot-ppo-explained-variance plot-ppo-length plot-ppo-entropy plot-gold-iterations \
            plot-proxy-iterations plot-gold-vs-kl plot-rollouts-score-kl plot-probe-deltas; do
  grep -q "<svg id=\"$plot\"" "$WORK/dom.html" || { echo "report.html: plot $plot not found by chromium"; exit 1; }
done
grep -q "no human study" "$WORK/dom.html" || { echo "report.html: scope sentence missing"; exit 1; }
if "$BIN" run --out "$RUN" > "$WORK/again" 2>&1; then echo "a finished run was overwritten"; exit 1; fi
grep -q "refusing to overwrite the finished run" "$WORK/again" || { cat "$WORK/again"; exit 1; }
if "$BIN" run --resume "$RUN" > "$WORK/again" 2>&1; then echo "--resume of a finished run was accepted"; exit 1; fi
echo "study smoke: ok"
