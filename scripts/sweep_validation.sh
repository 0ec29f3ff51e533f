#!/usr/bin/env bash
# The tiny preset's settings chosen on the validation prompts: SFT's settings,
# then PPO's learning rates, each scored on the 180 validation prompts by the
# exact expected rubric success under the policy (the 192 sentences of the
# grammar, docs/numerics.md), with greedy success and the frozen judge's
# score beside it, over K replicates (study.seed 0 … K−1, the seeds of the
# study's own replicates). Test prompts and probes are never generated nor
# scored here.
#
#   scripts/sweep_validation.sh OUT [--replicates K] [-- --set key=value …]
#
#   1. one corpus and base (OUT/study: prepare, pretrain), and per replicate
#      one judge (reward, continuous): the judge does not depend on SFT;
#   2. SFT for each setting of SFT_SETTINGS (whitespace-separated; each a
#      comma-separated list of key=value, e.g. "sft.lr=0.002,sft.accumulation=4";
#      settings of the judge's own, such as lora.rank, are refused), in
#      OUT/sft-<setting>, then `evaluate --population validation` (base and SFT);
#   3. the setting S* with the highest mean exact validation success (ties:
#      the higher judge score, then the first listed);
#   4. PPO from S*'s SFT for each actor learning rate of ACTOR_LRS (the
#      critic's is twice it, the seed's ratio), in OUT/ppo-lrX, then the same
#      evaluation (base, SFT, PPO); ACTOR_LRS="" skips PPO;
#   5. OUT/sweep.json and the table OUT/sweep.md (means over replicates, each
#      replicate's value beside), with each step's wall time.
# Arguments after `--` go to every command (e.g. CI-sized micro settings).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${PPOLAB_BINARY:-$PWD/build/bin/ppolab}
OUT=${1:?usage: scripts/sweep_validation.sh OUT [--replicates K] [-- --set key=value ...]}
shift
K=2
while [ $# -gt 0 ]; do
  case "$1" in
    --replicates) K=${2:?--replicates needs a count}; shift 2 ;;
    --) shift; break ;;
    *) echo "sweep_validation: unknown option '$1'" >&2; exit 2 ;;
  esac
done
SETS=(--set replicates.count="$K" "$@")
SFT_SETTINGS=${SFT_SETTINGS:-"sft.lr=0.001,sft.accumulation=8 sft.lr=0.002,sft.accumulation=4"}
ACTOR_LRS=${ACTOR_LRS-"1.25e-4 2.5e-4 5e-4"}
for setting in $SFT_SETTINGS; do
  case "$setting" in
    *lora.*|*reward.*|*pretrain.*|*corpus.*|*model.*|*replicates.*)
      echo "sweep_validation: SFT setting '$setting' changes the judge or the base, which the variants share" >&2
      exit 2 ;;
  esac
done
[ -x "$BIN" ] || { echo "sweep_validation: no ppolab binary at $BIN (scripts/build.sh)" >&2; exit 2; }
[ -e "$OUT" ] && { echo "sweep_validation: $OUT exists; refusing to overwrite it" >&2; exit 2; }
mkdir -p "$OUT"
LOG=$OUT/steps.tsv
: >"$LOG"
step() {  # step NAME CMD…: runs CMD, its output in OUT/logs/NAME.log, its wall time in steps.tsv
  local name=$1 t0=$SECONDS
  shift
  mkdir -p "$OUT/logs"
  echo "== $name"
  "$@" >"$OUT/logs/${name//\//_}.log" 2>&1 || { tail -30 "$OUT/logs/${name//\//_}.log"; echo "sweep_validation: $name failed" >&2; exit 1; }
  printf '%s\t%s\n' "$name" $((SECONDS - t0)) >>"$LOG"
}
# A variant's run folder: the study's corpus and base, and the given stages of each replicate.
variant() {  # variant DIR FROM STAGE…
  local dir=$1 from=$2 k stage
  shift 2
  mkdir -p "$dir"
  for f in "$OUT/study"/*; do
    [ "$(basename "$f")" = replicates ] || cp -r "$f" "$dir/"
  done
  for ((k = 0; k < K; k++)); do
    mkdir -p "$dir/replicates/$k"
    for stage in "$@"; do cp -r "$from/replicates/$k/$stage" "$dir/replicates/$k/"; done
  done
}

S=$OUT/study
step prepare "$BIN" prepare --run "$S" "${SETS[@]}"
step pretrain "$BIN" pretrain --run "$S" "${SETS[@]}"
for ((k = 0; k < K; k++)); do
  step "judge-$k" "$BIN" reward --run "$S" --replicate "$k" --mode continuous "${SETS[@]}"
done

# A setting's --set options and folder name.
setting_sets() { local kv; for kv in ${1//,/ }; do printf -- '--set\n%s\n' "$kv"; done; }
setting_name() { local n=${1//sft./}; n=${n//,/_}; echo "sft-${n//=/-}"; }
SFT_VARIANTS=()
declare -A SETTING_OF  # folder name → its setting
for setting in $SFT_SETTINGS; do
  name=$(setting_name "$setting")
  SETTING_OF[$name]=$setting
  mapfile -t SS < <(setting_sets "$setting")
  V=$OUT/$name
  variant "$V" "$S" reward
  for ((k = 0; k < K; k++)); do
    step "$name-$k" "$BIN" sft --run "$V" --replicate "$k" --mode continuous "${SETS[@]}" "${SS[@]}"
    step "$name-$k-validation" "$BIN" evaluate --run "$V" --replicate "$k" --population validation "${SETS[@]}" "${SS[@]}"
  done
  SFT_VARIANTS+=("$name")
done

# metrics OUT VARIANT… : {variant: {policy: [per-replicate {success, judge, tokens}]}} as JSON on stdout
metrics() {
  python3 - "$OUT" "$K" "$@" <<'PY'
import json, os, sys
out, K, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
table = {}
for v in variants:
    per = {}
    for k in range(K):
        m = json.load(open(os.path.join(out, v, "replicates", str(k), "eval", "validation-metrics.json")))
        for policy in ("base", "sft", "ppo"):
            if policy not in m:
                continue
            p = m[policy]["validation"]
            per.setdefault(policy, []).append({"exact": p["exact"]["success"],
                                               "in_grammar": p["exact"]["in_grammar"],
                                               "success": p["rubric_success_rate_all_outputs"],
                                               "judge": p["mean_learned_reward"],
                                               "tokens": p["mean_response_tokens_eos_included"]})
    table[v] = per
print(json.dumps(table))
PY
}
# choose POLICY VARIANT…: the variant with the highest mean exact success (ties: judge, then the first listed)
choose() {
  local policy=$1
  shift
  metrics "$@" | python3 -c '
import json, sys
t, policy = json.load(sys.stdin), sys.argv[1]
mean = lambda v, key: sum(r[key] for r in t[v][policy]) / len(t[v][policy])
best = max(t, key=lambda v: (round(mean(v, "exact"), 9), round(mean(v, "judge"), 9), -list(t).index(v)))
print(best)' "$policy"
}
BEST_SFT=$(choose sft "${SFT_VARIANTS[@]}")
echo "== chosen on validation: $BEST_SFT"
mapfile -t BS < <(setting_sets "${SETTING_OF[$BEST_SFT]}")

PPO_VARIANTS=()
for lr in $ACTOR_LRS; do
  V=$OUT/ppo-lr$lr
  critic=$(python3 -c "print(repr(2 * float('$lr')))")
  variant "$V" "$OUT/$BEST_SFT" reward sft
  for ((k = 0; k < K; k++)); do
    step "ppo-lr$lr-$k" "$BIN" ppo --run "$V" --replicate "$k" --mode continuous "${SETS[@]}" "${BS[@]}" \
      --set ppo.actor_lr="$lr" --set ppo.critic_lr="$critic"
    step "ppo-lr$lr-$k-validation" "$BIN" evaluate --run "$V" --replicate "$k" --population validation "${SETS[@]}" \
      "${BS[@]}" --set ppo.actor_lr="$lr" --set ppo.critic_lr="$critic"
  done
  PPO_VARIANTS+=("ppo-lr$lr")
done
BEST_PPO=none
if [ ${#PPO_VARIANTS[@]} -gt 0 ]; then
  BEST_PPO=$(choose ppo "${PPO_VARIANTS[@]}")
  echo "== chosen on validation: ppo.actor_lr=${BEST_PPO#ppo-lr}"
fi

metrics "${SFT_VARIANTS[@]}" "${PPO_VARIANTS[@]}" >"$OUT/metrics.json"
python3 - "$OUT" "$BEST_SFT" "$BEST_PPO" "$K" "${SETS[*]}" <<'PY'
import json, os, sys
out, best_sft, best_ppo, K, sets = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
t = json.load(open(os.path.join(out, "metrics.json")))
steps = dict(line.rstrip("\n").split("\t") for line in open(os.path.join(out, "steps.tsv")))
def row(v, policy, label=None):
    rs = t[v][policy]
    n = len(rs)
    x = [r["exact"] * 100 for r in rs]
    g = [r["in_grammar"] * 100 for r in rs]
    s = [r["success"] * 100 for r in rs]
    j = [r["judge"] for r in rs]
    tok = [r["tokens"] for r in rs]
    secs = sum(int(steps[f"{v}-{k}"]) for k in range(K)) if label is None else "-"
    each = lambda xs, f: f"({', '.join(format(x, f) for x in xs)})"
    return (f"| {label or v} | {policy} | {sum(x) / n:.1f} {each(x, '.1f')} | {sum(g) / n:.1f} | "
            f"{sum(s) / n:.1f} {each(s, '.1f')} | {sum(j) / n:+.3f} {each(j, '+.3f')} | {sum(tok) / n:.1f} | {secs} |")
lines = [f"Validation prompts only (180), {K} replicates (study.seed 0…{K - 1}); command options: `{sets}`.", "",
         "| setting | policy | exact expected success % (per replicate) | in grammar % | greedy success % "
         "(per replicate) | judge score (per replicate) | tokens | train s |",
         "|---|---|---|---|---|---|---|---|"]
lines.append(row(next(iter(t)), "base", "(the base)"))
for v in t:
    lines.append(row(v, "sft" if v.startswith("sft-") else "ppo"))
lines += ["", f"Chosen: {best_sft} (SFT), {best_ppo} (PPO, critic lr = 2 × actor lr)."]
open(os.path.join(out, "sweep.md"), "w").write("\n".join(lines) + "\n")
json.dump({"replicates": K, "sets": sets, "variants": t, "chosen": {"sft": best_sft, "ppo": best_ppo},
           "step_seconds": {k: int(v) for k, v in steps.items()}}, open(os.path.join(out, "sweep.json"), "w"), indent=1)
print("\n".join(lines))
PY
