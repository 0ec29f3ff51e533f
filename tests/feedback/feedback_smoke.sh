#!/usr/bin/env bash
# Learning from votes end to end on a micro run (CI, SPEC §8): prepare, a few
# pretraining and SFT updates, `feedback export`, `feedback label-ai --labeler
# rubric` (a valid AI vote file: one vote per pair), a second declared AI
# labeller (a heuristic written here: "the shorter answer"), the judge from
# both files, its result on the held-out test votes, a short PPO on the
# labelled train prompts and the report; then checks that the provenance
# (vote files' sha256, counts, kind) reached the judge, PPO and the HTML page
# (loaded by headless Chromium), and that nothing is overwritten.
set -euo pipefail
BIN=${PPOLAB_BINARY:?}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RUN=$WORK/run
M=(--set pretrain.conversations=400 --set pretrain.prose=50 --set pretrain.check_prompts=0
   --set sft.accumulation=32 --set reward.pairs_per_update=16 --set reward.epochs=2 --set feedback.pairs=64)
step() { "$@" > "$WORK/log" 2>&1 || { echo "FAILED: $*"; cat "$WORK/log"; exit 1; }; }
step "$BIN" prepare --run "$RUN" "${M[@]}"
step "$BIN" pretrain --run "$RUN" "${M[@]}" --set max_updates=2
step "$BIN" sft --run "$RUN" "${M[@]}" --set max_updates=2
step "$BIN" feedback export --run "$RUN" "${M[@]}" --out "$WORK/candidates.json"
step "$BIN" feedback label-ai --candidates "$WORK/candidates.json" --labeler rubric --run "$RUN" --out "$WORK/rubric.json"
if "$BIN" feedback export --run "$RUN" "${M[@]}" --out "$WORK/candidates.json" > "$WORK/log" 2>&1; then
  echo "feedback export overwrote its --out"; exit 1; fi
grep -q "refusing to overwrite" "$WORK/log" || { cat "$WORK/log"; exit 1; }

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
step "$BIN" reward --run "$RUN" "${M[@]}" "${VOTES[@]}"
if "$BIN" reward --run "$RUN" "${M[@]}" "${VOTES[@]}" > "$WORK/log" 2>&1; then echo "reward --votes overwrote the judge"; exit 1; fi
grep -q "refusing to overwrite" "$WORK/log" || { cat "$WORK/log"; exit 1; }
step "$BIN" reward-test --run "$RUN" "${M[@]}"
step "$BIN" ppo --run "$RUN" "${M[@]}" --set ppo.iterations=2
step "$BIN" exercise --run "$RUN" "${M[@]}"
step "$BIN" report --run "$RUN"

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
note = json.load(open(os.path.join(run, "exercise.json")))["note"]
assert "an AI labeller's votes" in note and "not human feedback" not in note, note
html = open(os.path.join(run, "report.html")).read()
for f in fb["files"]:
    assert f["sha256"] in html, "report.html lacks a vote file's sha256"
print("feedback smoke: provenance ok:", fb["counts"], "ties", fb["ties"], "rejects", fb["rejects"],
      "vote test", vt["correct"], "/", vt["examples"])
PY
chromium --headless --no-sandbox --disable-gpu --dump-dom "file://$RUN/report.html" 2>/dev/null > "$WORK/dom.html"
for id in judge-source vote-files vote-test ppo-prompts; do
  grep -q "id=\"$id\"" "$WORK/dom.html" || { echo "report.html: #$id not found by chromium"; exit 1; }
done
grep -q "Judge trained on AI votes" "$WORK/dom.html" || { echo "report.html: judge source line missing"; exit 1; }
grep -q "an AI labeller's votes" "$WORK/dom.html" || { echo "report.html: scope line not adapted to AI votes"; exit 1; }
echo "feedback smoke: ok"
