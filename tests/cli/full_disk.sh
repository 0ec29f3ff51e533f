#!/usr/bin/env bash
# Full disk (CI): SFT on a micro study writes its checkpoints onto a small
# tmpfs (mounted in a private mount namespace with `unshare`, so nothing
# leaks if the test dies) that holds one checkpoint but not a second beside
# it. The stage must fail with an error naming the checkpoint file and
# "No space left on device", leave no temporary file, and leave the previous
# checkpoint intact: it loads, and a run given room continues from it to the
# same final state as an uninterrupted run (bit for bit).
# Without permission to mount a tmpfs (neither as root nor in a user
# namespace) the test reports SKIPPED (exit 77), never a silent pass.
set -euo pipefail
BIN=${PPOLAB_BINARY:?}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PPOLAB_QUIET=1
SETS=(--set pretrain.tokens=12000 --set pretrain.check_prompts=0
      --set sft.epochs=2 --set sft.accumulation=32 --set checkpoint.every_updates=2)
fail() { echo "full disk: $*"; exit 1; }

# How a tmpfs can be mounted here.
if unshare --mount --propagation private true 2> /dev/null; then
  NS=(unshare --mount --propagation private)
elif unshare --user --map-root-user --mount true 2> /dev/null; then
  NS=(unshare --user --map-root-user --mount)
else
  echo "full disk: SKIPPED (cannot create a mount namespace to mount a tmpfs here)"; exit 77
fi
"${NS[@]}" sh -c "mount -t tmpfs -o size=64k tmpfs '$WORK'" 2> /dev/null \
  || { echo "full disk: SKIPPED (mounting a tmpfs is not permitted here)"; exit 77; }

REF=$WORK/ref
"$BIN" prepare --run "$REF" "${SETS[@]}" > /dev/null
"$BIN" pretrain --run "$REF" "${SETS[@]}" > /dev/null 2>&1
"$BIN" sft --run "$REF" "${SETS[@]}" > /dev/null
SIZE=$(stat -c %s "$REF/sft/continuous.state.gz")
# Room for one checkpoint (a little smaller than the final state) but not
# for the next one's temporary file beside it.
TMPFS_KIB=$(( SIZE * 3 / 2 / 1024 ))

RUN=$WORK/run
mkdir -p "$RUN/sft/checkpoints"
cp -r "$REF/corpus" "$REF/base" "$RUN/"
CK=$RUN/sft/checkpoints/continuous.state.gz
export BIN RUN CK WORK TMPFS_KIB
"${NS[@]}" bash -c '
  set -uo pipefail
  mount -t tmpfs -o size=${TMPFS_KIB}k tmpfs "$RUN/sft/checkpoints" || exit 3
  "$BIN" sft --run "$RUN" '"${SETS[*]}"' > "$WORK/log" 2>&1
  echo $? > "$WORK/rc"
  ls -A "$RUN/sft/checkpoints" > "$WORK/listing"
  df -k "$RUN/sft/checkpoints" | tail -1 > "$WORK/df"
  [ -e "$CK" ] && cp "$CK" "$WORK/saved.state.gz"
  exit 0
' || fail "could not mount the small tmpfs"
[ "$(cat "$WORK/rc")" != 0 ] || { cat "$WORK/log"; fail "SFT succeeded on a full disk (tmpfs ${TMPFS_KIB} KiB, state $SIZE bytes)"; }
grep -q "cannot write '$CK' (temporary '.continuous.state.gz.tmp[0-9]*', removed): No space left on device" "$WORK/log" \
  || { cat "$WORK/log"; fail "the error does not name the checkpoint file and 'No space left on device'"; }
[ "$(cat "$WORK/listing")" = "continuous.state.gz" ] || { cat "$WORK/listing"; fail "the checkpoint folder holds more (or less) than the previous checkpoint"; }
[ ! -e "$RUN/sft/continuous.state.gz" ] && [ ! -e "$RUN/sft/continuous.json" ] || fail "the failed stage wrote final outputs"
# The previous checkpoint is intact: it loads (integrity, identities) …
"$BIN" resume-check --states "$WORK/saved.state.gz" "$WORK/saved.state.gz" > /dev/null || fail "the previous checkpoint does not load"
# … and, with room again, the stage continues from it to the uninterrupted final state.
cp "$WORK/saved.state.gz" "$CK"
"$BIN" sft --run "$RUN" "${SETS[@]}" > "$WORK/log2" 2>&1 || { cat "$WORK/log2"; fail "the stage did not finish with room again"; }
grep -q "continuing from checkpoint .*(update 2, epoch 1, mid-epoch)" "$WORK/log2" || { cat "$WORK/log2"; fail "it did not continue from the first checkpoint (update 2)"; }
cmp "$REF/sft/continuous.state.gz" "$RUN/sft/continuous.state.gz" || fail "final state differs from the uninterrupted run"
echo "full disk: ok (tmpfs of ${TMPFS_KIB} KiB via ${NS[*]}; $(grep -o "No space left on device" "$WORK/log" | head -1); previous checkpoint intact and resumed)"
