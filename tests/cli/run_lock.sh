#!/usr/bin/env bash
# One process per run folder (util/run_lock.h, cli/stage_options.h), with the
# real binary on a micro study:
#  * `ppolab run --out RUN` takes RUN/.ppolab.lock; it is then stopped
#    (SIGSTOP: it keeps the lock and writes nothing meanwhile). Every second
#    writer — run --resume, sft, prepare, report, resume-check — fails at
#    once with an exit status in 1..127 and a message naming the holder's pid
#    and command line, and RUN is left exactly as it was (listing, sizes,
#    mtimes, sha256 of every file);
#  * a command that only reads RUN (report --out elsewhere) is not refused;
#  * after kill -9 of the holder the kernel has released the lock: the next
#    `run --resume` gets past it (and stops at its own check);
#  * small errors: run --out/--resume on a regular file say it is a file;
#    lora.rank above the model's smallest targeted dimension is named.
set -euo pipefail
BIN=${PPOLAB_BINARY:?}
WORK=$(mktemp -d)
HOLDER=""
cleanup() {
  if [ -n "$HOLDER" ]; then kill -KILL "$HOLDER" 2> /dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
export PPOLAB_QUIET=1
fail() { echo "run lock: $*"; exit 1; }
R=$WORK/run
SETS=(--set pretrain.tokens=3000 --set pretrain.check_prompts=0 --set max_updates=1 --set ppo.iterations=1)

# ---- the holder
"$BIN" run --out "$R" "${SETS[@]}" > "$WORK/holder.log" 2>&1 &
HOLDER=$!
for _ in $(seq 1 300); do
  grep -qx "pid $HOLDER" "$R/.ppolab.lock" 2> /dev/null && [ -e "$R/run-state.json" ] && break
  sleep 0.05
done
grep -qx "pid $HOLDER" "$R/.ppolab.lock" || { cat "$WORK/holder.log"; fail "the holder never noted itself in RUN/.ppolab.lock"; }
kill -STOP "$HOLDER"
sleep 0.5
grep -qxF "command ppolab run --out $R ${SETS[*]}" "$R/.ppolab.lock" || { cat "$R/.ppolab.lock"; fail "the lock file does not record the holder's command"; }

snapshot() { (cd "$R" && find . -printf '%y %p %s %T@\n' | sort && find . -type f -exec sha256sum {} + | sort -k 2); }
snapshot > "$WORK/before"

# expect_refused NAME cmd...: exit in 1..127 with the holder's pid and command; RUN unchanged.
expect_refused() {
  local name=$1; shift
  local t0 rc; t0=$(date +%s.%N)
  set +e; timeout 60 "$@" > "$WORK/$name.log" 2>&1; rc=$?; set -e
  [ $rc -ge 1 ] && [ $rc -lt 128 ] || { cat "$WORK/$name.log"; fail "$name: expected a refusal (exit 1..127), got exit $rc"; }
  grep -qF "$R is in use by pid $HOLDER (ppolab run --out $R --set" "$WORK/$name.log" \
    || { cat "$WORK/$name.log"; fail "$name: the refusal does not name the holder's pid and command"; }
  grep -qF "; wait for it to finish or stop it" "$WORK/$name.log" || { cat "$WORK/$name.log"; fail "$name: no advice"; }
  python3 -c "import sys; sys.exit(0 if float(sys.argv[2]) - float(sys.argv[1]) < 20 else 1)" "$t0" "$(date +%s.%N)" \
    || fail "$name: the refusal was not immediate"
  snapshot > "$WORK/after"
  diff "$WORK/before" "$WORK/after" > /dev/null || { diff "$WORK/before" "$WORK/after" || true; fail "$name: a refused writer changed RUN"; }
}
expect_refused resume "$BIN" run --resume "$R"
expect_refused sft "$BIN" sft --run "$R" "${SETS[@]}"
expect_refused prepare "$BIN" prepare --run "$R" "${SETS[@]}"
expect_refused report "$BIN" report --run "$R"
expect_refused resume-check "$BIN" resume-check sft --run "$R"

# A reader is not refused (whatever it makes of the unfinished run), and writes only elsewhere.
set +e; "$BIN" report --run "$R" --out "$WORK/elsewhere.html" > "$WORK/reader.log" 2>&1; set -e
! grep -q "is in use" "$WORK/reader.log" || { cat "$WORK/reader.log"; fail "a read-only report was refused"; }
snapshot > "$WORK/after"
diff "$WORK/before" "$WORK/after" > /dev/null || fail "a read-only report changed RUN"

# ---- the holder dies: the kernel releases the lock (its note stays, information only)
kill -KILL "$HOLDER"
wait "$HOLDER" 2> /dev/null || true
HOLDER_WAS=$HOLDER
HOLDER=""
grep -qx "pid $HOLDER_WAS" "$R/.ppolab.lock" || fail "the dead holder's note is gone (expected it left behind)"
set +e; "$BIN" run --resume "$R" --set max_updates=2 > "$WORK/after-kill.log" 2>&1; rc=$?; set -e
[ $rc -eq 1 ] && grep -q "cannot change them" "$WORK/after-kill.log" && ! grep -q "is in use" "$WORK/after-kill.log" \
  || { cat "$WORK/after-kill.log"; fail "after the holder's death the lock should be free (exit $rc)"; }

# ---- small errors
echo "not a run" > "$WORK/afile.txt"
set +e; "$BIN" run --out "$WORK/afile.txt" > "$WORK/out-file.log" 2>&1; rc=$?; set -e
[ $rc -eq 1 ] && grep -qF -- "--out $WORK/afile.txt: is a file, not a run folder" "$WORK/out-file.log" \
  && ! grep -q -- "--resume" "$WORK/out-file.log" || { cat "$WORK/out-file.log"; fail "run --out FILE"; }
set +e; "$BIN" run --resume "$WORK/afile.txt" > "$WORK/resume-file.log" 2>&1; rc=$?; set -e
[ $rc -eq 1 ] && grep -qF -- "--resume $WORK/afile.txt: is a file, not a run folder" "$WORK/resume-file.log" \
  || { cat "$WORK/resume-file.log"; fail "run --resume FILE"; }
[ "$(cat "$WORK/afile.txt")" = "not a run" ] || fail "the file was changed"
set +e; "$BIN" run --out "$WORK/afile.txt/sub" > "$WORK/under-file.log" 2>&1; rc=$?; set -e
[ $rc -eq 1 ] && grep -qF "cannot create the run folder '$WORK/afile.txt/sub'" "$WORK/under-file.log" \
  && ! grep -q "unexpected error" "$WORK/under-file.log" || { cat "$WORK/under-file.log"; fail "run --out FILE/sub"; }

R2=$WORK/rank
"$BIN" prepare --run "$R2" > /dev/null
"$BIN" pretrain --run "$R2" --set pretrain.tokens=3000 --set pretrain.check_prompts=0 > /dev/null 2>&1
set +e; "$BIN" sft --run "$R2" --set lora.rank=60000 > "$WORK/rank.log" 2>&1; rc=$?; set -e
[ $rc -eq 1 ] && grep -q "'lora.rank' must be <= [0-9]* on the model .*(the smallest dimension of the targeted projections: .*), got 60000" "$WORK/rank.log" \
  || { cat "$WORK/rank.log"; fail "lora.rank beyond the model"; }
set +e; "$BIN" config --set lora.rank=1000000000 > "$WORK/rank-config.log" 2>&1; rc=$?; set -e
[ $rc -eq 1 ] && grep -q "'lora.rank' must be <= 65536" "$WORK/rank-config.log" || { cat "$WORK/rank-config.log"; fail "lora.rank in config"; }
echo "run lock: ok"
