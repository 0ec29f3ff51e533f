#!/usr/bin/env bash
# Learning from votes end to end on a micro study (CI, SPEC §8), the way the
# README shows it: `ppolab run --until sft` (corpus, base, SFT), `feedback
# export`, `feedback label-ai --labeler rubric` (a valid AI vote file: one
# vote per pair) and a second declared AI labeller (a heuristic written here:
# "the shorter answer"), then `ppolab run --resume RUN --votes … --candidates
# …`: the judge from both files (interrupt, continuous, resume and the
# bitwise check), its result on the held-out test votes, PPO on the labelled
# train prompts, evaluation, exercise, findings and the report. Checks that
# the provenance (vote files' sha256, counts, kind) reached the judge, PPO and
# the HTML page (loaded by headless Chromium), that the run records the votes
# and refuses other ones, a changed file, a set of replicates and a judge
# that already learnt from the corpus, and that nothing is overwritten.
set -euo pipefail
BIN=${PPOLAB_BINARY:?}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RUN=$WORK/run
M=(--set pretrain.tokens=12000 --set pretrain.check_prompts=0
   --set sft.epochs=2 --set sft.accumulation=32 --set reward.epochs=2 --set reward.pairs_per_update=16
   --set ppo.iterations=2 --set ppo.interrupt_iteration=1
   --set ppo.snapshot_every=1 --set evaluation.snapshot_samples=1 --set evaluation.best_of_n=4
   --set limits.max_response=32 --set evaluation.exact_prompts=6 --set limits.max_context=288 --set feedback.pairs=64)
step() { "$@" > "$WORK/log" 2>&1 || { echo "FAILED: $*"; cat "$WORK/log"; exit 1; }; }
# refused NEEDLE CMD...: CMD fails and says NEEDLE.
refused() {
  local needle=$1; shift
  if "$@" > "$WORK/log" 2>&1; then echo "accepted: $*"; cat "$WORK/log"; exit 1; fi
  grep -qF -- "$needle" "$WORK/log" || { echo "no '$needle' from: $*"; cat "$WORK/log"; exit 1; }
}
# 1. The study up to SFT; it says how to go on, with votes or without.
step "$BIN" run --out "$RUN" --replicates 1 --until sft "${M[@]}"
grep -qF -- "-- stopped before step 7/20 (reward interrupt): --until sft" "$WORK/log" || { cat "$WORK/log"; exit 1; }
grep -qF -- "ppolab feedback export --run $RUN --preset tiny --set pretrain.tokens=12000" "$WORK/log" \
  || { cat "$WORK/log"; exit 1; }
[ -f "$RUN/sft/final/learned.safetensors" ] && [ -f "$RUN/sft/resume-check.json" ] || { echo "no SFT"; exit 1; }
[ ! -e "$RUN/reward" ] && [ ! -e "$RUN/results.json" ] || { echo "--until sft went past SFT"; exit 1; }
refused "--votes: the candidates come from this run's SFT policy" "$BIN" run --out "$WORK/new" --votes x.json
[ ! -e "$WORK/new" ] || { echo "a refused run left a folder"; exit 1; }
refused "--until judge: expected one of prepare, pretrain, sft, reward, ppo, dpo, rloo, grpo, evaluate, overoptimisation, exercise" \
  "$BIN" run --resume "$RUN" --until judge
step "$BIN" feedback export --run "$RUN" "${M[@]}" --out "$WORK/candidates.json"
step "$BIN" feedback label-ai --candidates "$WORK/candidates.json" --labeler rubric --run "$RUN" --out "$WORK/rubric.json"
refused "refusing to overwrite" "$BIN" feedback export --run "$RUN" "${M[@]}" --out "$WORK/candidates.json"

python3 - "$WORK" "$RUN" <<'PY'
import hashlib, json, os, sys
work, run = sys.argv[1], sys.argv[2]
cbytes = open(os.path.join(work, "candidates.json"), "rb").read()
c = json.loads(cbytes)
sft_sha = hashlib.sha256(open(os.path.join(run, "sft", "final", "learned.safetensors"), "rb").read()).hexdigest()
assert c["format"] == 1 and c["checkpoint_sha256"] == sft_sha, "candidate file does not name the SFT checkpoint"
assert len(c["pairs"]) == 64, len(c["pairs"])
splits = [p["split"] for p in c["pairs"]]
assert {s: splits.count(s) for s in set(splits)} == {"train": 38, "validation": 10, "test": 16}, splits
learn = {}  # only learn/ train rollout prompts and validation-pair prompts may be exported
for name in ("rollout_prompts.jsonl", "validation_pairs.jsonl"):
    for line in open(os.path.join(run, "corpus", "learn", name)):
        row = json.loads(line)
        learn[row["id"]] = row["prompt"]
for p in c["pairs"]:
    assert p["a"]["token_ids"] != p["b"]["token_ids"], "identical pair exported"
    assert learn.get(p["prompt_id"]) == p["prompt"], ("not a learn/ train or validation prompt", p["prompt_id"])
# the rubric's AI vote file
r = json.load(open(os.path.join(work, "rubric.json")))
assert r["feedback_kind"] == "ai" and r["human_attestation"] is False and "rubric" in r["labeler"], r
assert r["candidate_file_sha256"] == hashlib.sha256(cbytes).hexdigest()
assert [v["pair_id"] for v in r["votes"]] == [p["id"] for p in c["pairs"]]
assert all(v["choice"] in ("a", "b", "tie", "reject") for v in r["votes"])
# a second declared AI labeller: prefers the shorter answer (by tokens, then
# by text order; a tie only when both are equal)
votes = []
for p in c["pairs"]:
    ka = (len(p["a"]["token_ids"]), p["a"]["text"])
    kb = (len(p["b"]["token_ids"]), p["b"]["text"])
    votes.append({"pair_id": p["id"], "choice": "a" if ka < kb else "b" if kb < ka else "tie",
                  "timestamp": "2025-03-01T10:00:00Z"})
json.dump({"format": 1, "feedback_kind": "ai", "checkpoint_sha256": c["checkpoint_sha256"],
           "labeler": "feedback_smoke.sh heuristic: the shorter answer, then text order", "human_attestation": False,
           "candidate_file_sha256": hashlib.sha256(cbytes).hexdigest(), "votes": votes},
          open(os.path.join(work, "shorter.json"), "w"), indent=1)
PY

VOTES=(--votes "$WORK/rubric.json" --votes "$WORK/shorter.json" --candidates "$WORK/candidates.json" --feedback-kind ai)
# 2. What `run --resume --votes` refuses: a set of replicates, a run whose
#    judge already learnt from the corpus, votes without candidates.
step "$BIN" run --out "$WORK/set" --replicates 2 --until prepare "${M[@]}"
refused "--votes: $WORK/set has 2 replicates (replicates.count)" "$BIN" run --resume "$WORK/set" "${VOTES[@]}"
mkdir "$WORK/corpus-judge"
python3 - "$RUN/run-state.json" "$WORK/corpus-judge/run-state.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["steps"]["reward-interrupt"] = {"command": "ppolab reward --mode interrupt", "seconds": 1.0}
json.dump(s, open(sys.argv[2], "w"))
PY
refused "the judge of $WORK/corpus-judge already learnt from the corpus's pairs (step reward-interrupt finished)" \
  "$BIN" run --resume "$WORK/corpus-judge" "${VOTES[@]}"
refused "--votes needs --candidates FILE" "$BIN" run --resume "$RUN" --votes "$WORK/rubric.json"
# 3. The votes are recorded; until a reward step has finished they may be
#    given again, after that they are the judge's. A file changed behind the
#    run's back is refused, and so is a feedback kind that does not exist.
refused "--feedback-kind must be human or ai, got 'humna'" "$BIN" run --resume "$RUN" --votes "$WORK/rubric.json" \
  --candidates "$WORK/candidates.json" --feedback-kind humna
step "$BIN" run --resume "$RUN" "${VOTES[@]}" --until sft
check_recorded() {
  python3 - "$RUN/run-state.json" "$WORK" "$@" <<'PY'
import hashlib, json, os, sys
f = json.load(open(sys.argv[1]))["options"]["feedback"]
sha = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
w, names = sys.argv[2], sys.argv[3:]
assert [x["path"] for x in f["files"]] == [os.path.join(w, n) for n in names], f
assert [x["sha256"] for x in f["files"]] == [sha(os.path.join(w, n)) for n in names]
assert f["candidates"]["sha256"] == sha(os.path.join(w, "candidates.json")) and f["feedback_kind"] == "ai", f
PY
}
check_recorded rubric.json shorter.json
cp "$WORK/shorter.json" "$WORK/shorter.keep"
echo >> "$WORK/shorter.json"
refused "$WORK/shorter.json: changed since this run recorded it" "$BIN" run --resume "$RUN" --until sft
grep -qF "give --votes … --candidates … again" "$WORK/log" || { cat "$WORK/log"; exit 1; }
mv "$WORK/shorter.keep" "$WORK/shorter.json"
ONE=(--votes "$WORK/rubric.json" --candidates "$WORK/candidates.json" --feedback-kind ai)
step "$BIN" run --resume "$RUN" "${ONE[@]}" --until sft
check_recorded rubric.json
step "$BIN" run --resume "$RUN" "${VOTES[@]}" --until reward
grep -qF -- "-- stopped before step 12/20 (ppo interrupt): --until reward" "$WORK/log" || { cat "$WORK/log"; exit 1; }
check_recorded rubric.json shorter.json
refused "has begun to learn from the votes recorded in $RUN/run-state.json (step reward-" \
  "$BIN" run --resume "$RUN" "${ONE[@]}"
# 4. The rest of the study from the recorded votes.
step "$BIN" run --resume "$RUN"
refused "refusing to overwrite" "$BIN" reward --run "$RUN" "${M[@]}" "${VOTES[@]}"
python3 - "$WORK" "$RUN" <<'PY'
import hashlib, json, os, sys
work, run = sys.argv[1], sys.argv[2]
sha = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
judge = json.load(open(os.path.join(run, "reward", "continuous.json")))
fb = judge["identity"]["data"]["feedback"]
assert fb["feedback_kind"] == "ai"
assert [f["sha256"] for f in fb["files"]] == [sha(os.path.join(work, "rubric.json")), sha(os.path.join(work, "shorter.json"))]
assert all(f["votes"] == 64 and f["votes"] == f["binary"] + f["ties"] + f["rejects"] for f in fb["files"]), fb["files"]
labels = json.load(open(os.path.join(run, "reward", "feedback.json")))
assert judge["identity"]["data"]["labels_sha256"] == sha(os.path.join(run, "reward", "feedback.json"))
assert len(labels["train"]) == fb["counts"]["train"] and len(labels["validation"]) == fb["counts"]["validation"]
assert fb["ties"] + fb["rejects"] == sum(f["ties"] + f["rejects"] for f in fb["files"])
vt = json.load(open(os.path.join(run, "reward", "vote-test.json")))
assert vt["examples"] == fb["counts"]["test"] and vt["used_for_selection"] is False, vt
assert vt["correct"] + vt["ties"] <= vt["examples"] and vt["feedback"] == fb
ppo = json.load(open(os.path.join(run, "ppo", "continuous.json")))
assert ppo["identity"]["data"]["feedback"] == fb, "PPO lost the provenance"
train_prompts = {l["prompt_id"] for l in labels["train"]}
assert ppo["identity"]["data"]["rollout_prompts"]["count"] == len(train_prompts)
rolled = set()
for name in os.listdir(os.path.join(run, "ppo", "rollouts", "continuous")):
    for r in json.load(open(os.path.join(run, "ppo", "rollouts", "continuous", name)))["rollouts"]:
        rolled.add(r["prompt_id"])
assert rolled and rolled <= train_prompts, (rolled, train_prompts)
# The two labellers voted the same 64 pairs: their agreement, recomputed here.
def choices(name):
    return {v["pair_id"]: v["choice"] for v in json.load(open(os.path.join(work, name)))["votes"]}
x, y = choices("rubric.json"), choices("shorter.json")
shared = sorted(set(x) & set(y))
p_o = sum(x[p] == y[p] for p in shared) / len(shared)
cats = ("a", "b", "tie", "reject")
p_e = sum((sum(x[p] == c for p in shared) / len(shared)) * (sum(y[p] == c for p in shared) / len(shared)) for c in cats)
(agreement,) = fb["agreement"]
assert agreement["pairs"] == len(shared) == 64 and abs(agreement["raw"] - p_o) < 1e-12, (agreement, p_o)
assert abs(agreement["cohen_kappa"] - (p_o - p_e) / (1 - p_e)) < 1e-12, (agreement, p_o, p_e)
assert agreement["between"] == [json.load(open(os.path.join(work, n)))["labeler"] for n in ("rubric.json", "shorter.json")]
res = json.load(open(os.path.join(run, "results.json")))  # the whole study ran, the judge's resume proven too
assert res["resume_checks"] == {"sft": "PASS", "reward": "PASS", "ppo": "PASS"}, res["resume_checks"]
assert res["replicates"] == 1 and "verdict" in res and os.path.exists(os.path.join(run, "eval", "metrics.json"))
for mode in ("interrupt", "continuous", "resume"):
    j = json.load(open(os.path.join(run, "reward", mode + ".json")))
    assert j["identity"]["data"]["feedback"] == fb, mode + ": the judge's provenance differs between modes"
note = json.load(open(os.path.join(run, "exercise.json")))["note"]
assert "an AI labeller's votes" in note and "not human feedback" not in note, note
html = open(os.path.join(run, "report.html")).read()
for f in fb["files"]:
    assert f["sha256"] in html, "report.html lacks a vote file's sha256"
print("feedback smoke: provenance ok:", fb["counts"], "ties", fb["ties"], "rejects", fb["rejects"],
      "vote test", vt["correct"], "/", vt["examples"])
PY
chromium --headless --no-sandbox --disable-gpu --dump-dom "file://$RUN/report.html" 2>/dev/null > "$WORK/dom.html"
for id in judge-source vote-files vote-agreement vote-test ppo-prompts; do
  grep -q "id=\"$id\"" "$WORK/dom.html" || { echo "report.html: #$id not found by chromium"; exit 1; }
done
grep -q "Judge trained on AI votes" "$WORK/dom.html" || { echo "report.html: judge source line missing"; exit 1; }
grep -q "an AI labeller's votes" "$WORK/dom.html" || { echo "report.html: scope line not adapted to AI votes"; exit 1; }
echo "feedback smoke: ok"
