#!/usr/bin/env bash
# Hostile inputs through the real binary (issue "Hostile inputs"): each case
# runs under a 3 GB address-space limit (ulimit -v) and must fail with a
# named error — exit status 1..127, the expected message, never "unexpected
# error", within 60 s (a FIFO must never block) — and leave the run folder
# byte for byte as it was. The bombs are large enough to matter: a gzip of
# 1 GiB of zeros as a resume state, /dev/zero as a config, vote or candidate
# file, a 40 MiB tokenizer.json. The classes of the reliability issue
# (round three) each have cases below: FIFOs, paths the system refuses,
# run-state.json of the wrong structure, runs edited into a wrong answer,
# refused new runs, counts that size memory, an existing --dump-logits,
# unbounded stdin, and the minor ones (MPI disagreements: mpi_smoke.sh).
set -euo pipefail
BIN=${PPOLAB_BINARY:?}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
export PPOLAB_QUIET=1
fail() { echo "hostile inputs: $*"; exit 1; }

RUN=$WORK/run
"$BIN" prepare --run "$RUN" > /dev/null
"$BIN" pretrain --run "$RUN" --set pretrain.tokens=12000 --set pretrain.check_prompts=0 > /dev/null 2>&1
WATCH=$RUN  # the folder a refused command must leave as it was
snapshot() { (cd "$WATCH" && find . -type f -print0 | sort -z | xargs -0 sha256sum; find . | sort); }
snapshot > before.txt

mkdir folder
head -c 1G /dev/zero | gzip -1 > bomb.state.gz
truncate -s 40M big-tokenizer.json
touch afile.txt
echo '{"sft": {"lr": 1}, "sft": {"lr": 2}}' > duplicate.json
printf '{"format": 1, "consent": false, "consent": true}' > duplicate-votes.json

cases=0
# refuse "PATTERN" ppolab-arguments…
refuse() {
  local pattern=$1; shift
  local rc=0
  (ulimit -v 3000000; exec timeout 60 "$BIN" "$@") > out.txt 2>&1 || rc=$?
  [ $rc -ne 124 ] || fail "ppolab $*: still running after 60 s (blocked?)"
  [ $rc -ge 1 ] && [ $rc -lt 128 ] || { cat out.txt; fail "ppolab $*: exit $rc, expected 1..127"; }
  grep -q -- "$pattern" out.txt || { cat out.txt; fail "ppolab $*: the error does not say '$pattern'"; }
  ! grep -q "unexpected error" out.txt || { cat out.txt; fail "ppolab $*: an unexpected error instead of a named one"; }
  snapshot > after.txt
  cmp -s before.txt after.txt || { diff before.txt after.txt; fail "ppolab $*: the run folder changed"; }
  cases=$((cases + 1))
}

refuse "bomb.state.gz: safetensors header length 0 is too small" resume-check --states bomb.state.gz bomb.state.gz
refuse "resume state 'folder' is a directory, expected a regular file" resume-check --states folder folder
refuse "configuration file '/dev/zero' is a character device" config --config /dev/zero
refuse "configuration file 'folder' is a directory" config --config folder
refuse "duplicate.json: key 'sft' appears twice" config --config duplicate.json
refuse "configuration file '/dev/zero' is a character device" sft --run "$RUN" --config /dev/zero
refuse "key 'lr' appears twice" config --set 'sft={"lr": 1, "lr": 2}'
refuse "'lora.rank' must be <= 65536" config --set lora.rank=1000000000
refuse "key 'ppo.iterations' must be an integer in" config --set ppo.iterations=1000000000000000000
refuse "tokenizer file 'big-tokenizer.json' is 41943040 bytes, over the 32 MiB limit" tokenize --tokenizer big-tokenizer.json --text hi
refuse "candidate file '/dev/zero' is a character device" feedback serve --candidates /dev/zero --out votes.json
refuse "candidate file 'folder' is a directory" feedback serve --candidates folder --out votes.json
refuse "is a character device" reward --run "$RUN" --votes /dev/zero --candidates /dev/zero
refuse "is a directory" reward --run "$RUN" --votes folder --candidates folder
refuse "key 'consent' appears twice" reward --run "$RUN" --votes duplicate-votes.json --candidates duplicate-votes.json
refuse "--out afile.txt: is a file, not a run folder" run --out afile.txt
[ ! -e votes.json ] || fail "a refused serve wrote its vote file"

# 1. FIFOs are refused before they are opened, wherever a file is read.
cp -r "$RUN/base" fifo-model && rm fifo-model/model.safetensors && mkfifo fifo-model/model.safetensors
mkfifo pipe
refuse "safetensors file 'fifo-model/model.safetensors' is a FIFO" generate --model fifo-model --prompt hi
refuse "safetensors file 'fifo-model/model.safetensors' is a FIFO" score --model fifo-model --ids 1,2
refuse "resume state 'pipe' is a FIFO" resume-check --states pipe pipe
refuse "candidate file 'pipe' is a FIFO" reward --run "$RUN" --votes pipe --candidates pipe
# 2. Paths the system refuses: named, with the system's reason.
long=$(printf 'y%.0s' {1..300})
refuse "File name too long" run --out "$WORK/$long" --until prepare
ln -s loop1 loop2 && ln -s loop2 loop1
refuse "'loop1': Too many levels of symbolic links" generate --model loop1 --prompt hi
refuse "Too many levels of symbolic links" run --out loop1 --until prepare
# 5. A refused new run creates nothing; a folder holding only a lock is reused.
refuse "'replicates.count' must be >= 1, got 0" run --out fresh --replicates 0
refuse "unknown config key 'nope'" run --out fresh --set nope.x=1
refuse "unknown preset 'nope'" run --out fresh --preset nope
refuse "cannot open configuration file 'missing.json'" run --out fresh --config missing.json
[ ! -e fresh ] || fail "a refused run --out left the folder 'fresh'"
# 6. Counts that size memory are bounded before they size anything.
refuse "'replicates.count' must be <= 1000" run --out fresh --replicates 1000000000
refuse "'parallel.chunks' must be <= 4096" config --set parallel.chunks=1000000000
refuse "'evaluation.best_of_n' must be <= 4096" config --set evaluation.best_of_n=1000000000
refuse "'limits.max_context' must be <= 1048576" config --set limits.max_context=1000000000
cp -r "$RUN/base" long-model && sed -i 's/"max_position_embeddings": [0-9]*/"max_position_embeddings": 16777216/' \
  long-model/config.json
refuse "--max-new-tokens must be in \\[1, 32768\\], got 16000000" generate --model long-model --prompt hi \
  --max-new-tokens 16000000
# 7. An existing --dump-logits is never replaced.
echo keep > logits.f32
refuse "--dump-logits logits.f32: already exists" score --model "$RUN/base" --ids 1,2 --dump-logits logits.f32
[ "$(cat logits.f32)" = keep ] || fail "score replaced an existing --dump-logits file"
# 8. stdin without a newline is bounded.
rc=0; head -c 3M /dev/zero | tr '\0' a | PPOLAB_MAX_JSON_MIB=1 timeout 60 "$BIN" tokenize --tokenizer "$RUN/base" --jsonl \
  > out.txt 2>&1 || rc=$?
[ $rc -ge 1 ] && [ $rc -lt 124 ] && grep -q "stdin line 1 is longer than the 1 MiB limit" out.txt ||
  { cat out.txt; fail "tokenize --jsonl: an unbounded line was not refused (exit $rc)"; }
cases=$((cases + 1))
# 10. Minor: ids beyond the vocabulary, NUL bytes and underflow in --set, a pair too long to show.
cp -r "$RUN/base" eos-model && sed -i 's/"eos_token_id": [0-9]*/"eos_token_id": 99999999/' eos-model/config.json
refuse "field 'eos_token_id' (99999999) must be a token id below vocab_size" generate --model eos-model --prompt hi
cp -r "$RUN/base" merge-model && python3 - <<'PY'
import json
t = json.load(open("merge-model/tokenizer.json"))
v = t["model"]["vocab"]
a = next(x for x in v if x + x not in v and " " not in x)  # a merge whose result is not a token
t["model"]["merges"].append(a + " " + a if isinstance(t["model"]["merges"][0], str) else [a, a])
json.dump(t, open("merge-model/tokenizer.json", "w"))
PY
refuse "which is not in model.vocab" tokenize --tokenizer merge-model --text hi
refuse "1e-400 is too small for a double" config --set sft.lr=1e-400
refuse "a string holds a NUL byte" config --set 'model.system_prompt="a\u0000b"'
python3 - <<'PY'
import json
pair = {"id": "p1", "split": "train", "prompt_id": "x1", "prompt": "a" * 5_000_000,
        "a": {"text": "hi", "token_ids": [1, 2], "finish_reason": "eos"},
        "b": {"text": "ho", "token_ids": [3, 2], "finish_reason": "eos"}}
json.dump({"format": 1, "checkpoint_sha256": "0" * 64, "pairs": [pair]}, open("long-prompt.json", "w"))
PY
refuse "pair 'p1' would make a voting page of about" feedback serve --candidates long-prompt.json --out votes.json
[ ! -e votes.json ] || fail "a refused serve wrote its vote file"

# 3 and 4. A study's own records read back: run-state.json of the wrong
# structure, and runs edited into a wrong answer, are refused by name and
# leave the run as it was. R: a study stopped after SFT (one update) on RUN's base.
R=$WORK/study
"$BIN" run --out "$R" --model "$RUN/base" --replicates 1 --until sft --set max_updates=1 --set limits.max_response=32 \
  --set limits.max_context=288 > study.log 2>&1 || { tail -20 study.log; fail "the study for cases 3 and 4 failed"; }
cp "$R/run-state.json" state.good
WATCH=$R
snapshot > before.txt
refuse "vote file 'pipe' is a FIFO" run --resume "$R" --votes pipe --candidates afile.txt
edit() { python3 -c "import json,sys; s=json.load(open('state.good')); $1; json.dump(s, open('$R/run-state.json', 'w'))"; }
edit "s['steps'] = []"; snapshot > before.txt
refuse "run-state.json: field 'steps' must be an object, got array" run --resume "$R"
edit "del s['options']"; snapshot > before.txt
refuse "run-state.json: field 'options' must be an object, got null" run --resume "$R"
edit "s['options']['preset'] = 3"; snapshot > before.txt
refuse "run-state.json: field 'options.preset' must be a string, got number" run --resume "$R"
edit "s['options']['set'] = 'x'"; snapshot > before.txt
refuse "run-state.json: field 'options.set' must be an array of strings, got string" run --resume "$R"
edit "s['format'] = 'other'"; snapshot > before.txt
refuse "run-state.json: field 'format' must be 'ppolab-run-state'" run --resume "$R"
edit "s['options']['set'].append('sft.lr=0.5')"; snapshot > before.txt
refuse "sft/continuous.json: made under another configuration than the run's recorded options" run --resume "$R"
cp state.good "$R/run-state.json"
echo '[]' > "$R/findings.json"; snapshot > before.txt
refuse "findings.json: not a findings record" run --resume "$R"
rm "$R/findings.json"
cp "$R/sft/continuous.json" record.good && echo '{}' > "$R/sft/continuous.json"; snapshot > before.txt
refuse "sft/continuous.json: not a stage record" run --resume "$R"
cp record.good "$R/sft/continuous.json"
python3 -c "import json; s=json.load(open('record.good')); s['final_learned_identity'] = 'f' * 64; json.dump(s, open('$R/sft/continuous.json', 'w'))"
snapshot > before.txt
refuse "sft/final/learned.safetensors: its learned identity is" run --resume "$R"
cp record.good "$R/sft/continuous.json"
# 10. A killed write's leftover temporary is swept when the run continues.
touch "$R/.findings.json.tmp123"
"$BIN" run --resume "$R" --until sft > study.log 2>&1 || { tail -20 study.log; fail "run --resume after the checks failed"; }
[ ! -e "$R/.findings.json.tmp123" ] || fail "run --resume left a killed write's temporary file"
# 5. A folder holding only a lock takes a new run.
mkdir lock-only && touch lock-only/.ppolab.lock
"$BIN" run --out lock-only --until prepare > study.log 2>&1 || { tail -5 study.log; fail "a lock-only folder was refused"; }
echo "hostile inputs: $cases cases refused with named errors, bounded memory, run folder unchanged"
