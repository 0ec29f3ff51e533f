#!/usr/bin/env bash
# Hostile inputs through the real binary (issue "Hostile inputs"): each case
# runs under a 3 GB address-space limit (ulimit -v) and must fail with a
# named error — exit status 1..127, the expected message, never "unexpected
# error" — and leave the run folder byte for byte as it was. The bombs are
# large enough to matter: a gzip of 1 GiB of zeros as a resume state, /dev/zero
# as a config, vote or candidate file, a 40 MiB tokenizer.json.
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
snapshot() { (cd "$RUN" && find . -type f -print0 | sort -z | xargs -0 sha256sum; find . | sort); }
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
  (ulimit -v 3000000; exec "$BIN" "$@") > out.txt 2>&1 || rc=$?
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
echo "hostile inputs: $cases cases refused with named errors, bounded memory, run folder unchanged"
