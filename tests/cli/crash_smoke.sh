#!/usr/bin/env bash
# Crash smoke (CI-sized version of scripts/crash_harness.sh) on a micro study:
#  * SFT and PPO are killed (SIGKILL raised by the process itself in the
#    middle of a checkpoint write: PPOLAB_TEST_KILL_IN_CHECKPOINT), restarted
#    until they finish; the final state files equal an uninterrupted run's
#    bit for bit (cmp and `resume-check --states`), PPO's rollouts and
#    metrics too, and no checkpoint or temporary file is left behind;
#  * a non-finite value injected into a run (PPOLAB_TEST_NONFINITE) stops
#    the stage with an error naming the stage, the update or iteration and
#    the quantity, and the next run continues from the last checkpoint to
#    the same final state.
set -euo pipefail
BIN=${PPOLAB_BINARY:?}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PPOLAB_QUIET=1
SETS=(--set pretrain.tokens=12000 --set pretrain.check_prompts=0
      --set sft.epochs=2 --set sft.accumulation=32
      --set ppo.iterations=3 --set ppo.prompts_per_iteration=2
      --set checkpoint.every_updates=2 --set checkpoint.every_iterations=1)
REWARD_SETS=(--set reward.epochs=1 --set reward.pairs_per_update=16 --set max_updates=2)
fail() { echo "crash smoke: $*"; exit 1; }

# The uninterrupted reference.
REF=$WORK/ref
"$BIN" prepare --run "$REF" "${SETS[@]}" > /dev/null
"$BIN" pretrain --run "$REF" "${SETS[@]}" > /dev/null 2>&1
"$BIN" sft --run "$REF" "${SETS[@]}" > /dev/null
"$BIN" reward --run "$REF" "${SETS[@]}" "${REWARD_SETS[@]}" > /dev/null
"$BIN" ppo --run "$REF" "${SETS[@]}" > /dev/null

# expect_kill LOG cmd...: the command must die by SIGKILL inside a checkpoint write.
expect_kill() {
  local log=$1; shift
  set +e; "$@" > "$log" 2>&1; local rc=$?; set -e
  [ $rc -eq 137 ] || { cat "$log"; fail "expected a SIGKILL inside a checkpoint write, got exit $rc: $*"; }
  grep -q "PPOLAB_TEST_KILL_IN_CHECKPOINT: SIGKILL in checkpoint write" "$log" || { cat "$log"; fail "killed elsewhere"; }
}
# expect_error LOG PATTERN cmd...: the command must fail with PATTERN in its error.
expect_error() {
  local log=$1 pattern=$2; shift 2
  set +e; "$@" > "$log" 2>&1; local rc=$?; set -e
  [ $rc -ne 0 ] || { cat "$log"; fail "expected a failure: $*"; }
  grep -q -- "$pattern" "$log" || { cat "$log"; fail "the error does not say '$pattern'"; }
}

# ---- SFT: three kills inside checkpoint writes, then a non-finite gradient.
RUN=$WORK/sft
mkdir -p "$RUN"; cp -r "$REF/corpus" "$REF/base" "$RUN/"
kills=0
for n in 2 2 2; do  # checkpoints at updates 2, 4, 6 (epoch end), 8, 10, 12
  PPOLAB_TEST_KILL_IN_CHECKPOINT=$n expect_kill "$WORK/log" "$BIN" sft --run "$RUN" "${SETS[@]}"
  kills=$((kills + 1))
  ls -A "$RUN/sft/checkpoints" | grep -q '^\.continuous\.state\.gz\.tmp' || fail "the killed write left no temporary (the hook fired elsewhere?)"
done
PPOLAB_TEST_NONFINITE=sft.gradient@9 expect_error "$WORK/log" "sft update 9: parameter '.*' has a non-finite gradient" \
  "$BIN" sft --run "$RUN" "${SETS[@]}"
grep -q "continuing from checkpoint .*(update 6, epoch 2 start)" "$WORK/log" || { cat "$WORK/log"; fail "sft did not continue from update 6"; }
[ ! -e "$RUN/sft/continuous.state.gz" ] || fail "a failed SFT run wrote its final state"
"$BIN" sft --run "$RUN" "${SETS[@]}" > "$WORK/log" 2>&1 || { cat "$WORK/log"; fail "sft did not finish"; }
grep -q "continuing from checkpoint .*(update 8, epoch 2, mid-epoch)" "$WORK/log" || { cat "$WORK/log"; fail "sft did not continue mid-epoch from update 8"; }
cmp "$REF/sft/continuous.state.gz" "$RUN/sft/continuous.state.gz" || fail "sft: final state differs from the uninterrupted run"
"$BIN" resume-check --states "$REF/sft/continuous.state.gz" "$RUN/sft/continuous.state.gz" > /dev/null
diff -r "$REF/sft/final" "$RUN/sft/final" > /dev/null || fail "sft: final/ differs"
[ ! -e "$RUN/sft/checkpoints" ] || fail "sft: checkpoints/ left behind"

# The judge: a non-finite score names its update.
PPOLAB_TEST_NONFINITE=reward.score@1 expect_error "$WORK/log" "reward update 1: judge score is not finite" \
  "$BIN" reward --run "$RUN" "${SETS[@]}" "${REWARD_SETS[@]}"

# ---- PPO: two kills inside checkpoint writes, then a non-finite judge score.
RUN=$WORK/ppo
mkdir -p "$RUN"; cp -r "$REF/corpus" "$REF/base" "$REF/sft" "$REF/reward" "$RUN/"
for n in 1 2; do  # checkpoints after iterations 1 and 2
  PPOLAB_TEST_KILL_IN_CHECKPOINT=$n expect_kill "$WORK/log" "$BIN" ppo --run "$RUN" "${SETS[@]}"
  kills=$((kills + 1))
done
PPOLAB_TEST_NONFINITE=ppo.score@3 expect_error "$WORK/log" "ppo iteration 3: judge score is not finite" \
  "$BIN" ppo --run "$RUN" "${SETS[@]}"
grep -q "continuing from checkpoint .*(iteration 1 done)" "$WORK/log" || { cat "$WORK/log"; fail "ppo did not continue from iteration 1"; }
for q in value advantage logprob gradient; do
  case $q in value) msg="critic value is not finite" ;; advantage) msg="advantage is not finite" ;;
             logprob) msg="sampling log-prob (old_logp) is not finite" ;; gradient) msg="update 1 actor: parameter '.*' has a non-finite gradient" ;; esac
  PPOLAB_TEST_NONFINITE=ppo.$q@3 expect_error "$WORK/log" "ppo iteration 3.*$msg" "$BIN" ppo --run "$RUN" "${SETS[@]}"
done
"$BIN" ppo --run "$RUN" "${SETS[@]}" > "$WORK/log" 2>&1 || { cat "$WORK/log"; fail "ppo did not finish"; }
grep -q "continuing from checkpoint .*(iteration 2 done)" "$WORK/log" || { cat "$WORK/log"; fail "ppo did not continue from iteration 2"; }
cmp "$REF/ppo/continuous.state.gz" "$RUN/ppo/continuous.state.gz" || fail "ppo: final state differs from the uninterrupted run"
"$BIN" resume-check --states "$REF/ppo/continuous.state.gz" "$RUN/ppo/continuous.state.gz" > /dev/null
diff -r "$REF/ppo/rollouts" "$RUN/ppo/rollouts" > /dev/null || fail "ppo: rollouts differ"
diff -r "$REF/ppo/final" "$RUN/ppo/final" > /dev/null || fail "ppo: final/ differs"
python3 - "$REF/ppo/continuous.metrics.jsonl" "$RUN/ppo/continuous.metrics.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
assert len(a) == 3, len(a)
for x in a + b: x.pop("seconds")
assert a == b, "metrics differ (seconds aside)"
PY
[ ! -e "$RUN/ppo/checkpoints" ] || fail "ppo: checkpoints/ left behind"
echo "crash smoke: ok ($kills kills survived, SFT and PPO final states bitwise equal to uninterrupted runs)"
