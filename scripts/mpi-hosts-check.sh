#!/usr/bin/env bash
# Several hosts on one machine (SPEC §13, issue "past one machine" part 5):
# two network namespaces joined by a veth pair are two "hosts" with their own
# network stacks; Open MPI starts one rank on each over TCP (its rsh launcher
# with an agent that runs `ip netns exec <host> …` instead of ssh; btl
# tcp,self and the out-of-band channel restricted to the veth's subnet), and
#   1. a micro study (`ppolab run`, parallel.chunks=2) at W = 2 across the two
#      hosts writes the same state files, byte for byte, and the same
#      generations, metrics, over-optimisation samples and findings, as the
#      same study in one process;
#   2. the same study with host h2 killed mid-PPO (every process in its
#      namespace, SIGKILL) stops with a clear message and nothing half-written;
#      `ppolab run --resume` across the two hosts again finishes it, equal to
#      the one-process study.
# Needs root (namespaces), iproute2 and Open MPI (scripts/install.sh). The
# run folders are on this machine's filesystem, which both namespaces see —
# as a cluster job needs a filesystem every rank sees.
#   scripts/mpi-hosts-check.sh [ppolab binary (default build/bin/ppolab)]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-build/bin/ppolab}")
fail() { echo "mpi-hosts-check: FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (ip netns)"
command -v ip > /dev/null || fail "ip not found (apt-get install iproute2)"
command -v mpirun > /dev/null || fail "mpirun not found (scripts/install.sh installs openmpi-bin)"
"$BIN" version | grep -q "^data-parallel: Open MPI" || fail "$BIN was built without MPI"

H1=ppolab-h1 H2=ppolab-h2 NET=10.231.77  # the project's own namespaces and subnet
WORK=$(mktemp -d /tmp/mpi-hosts.XXXXXX)
cleanup() {
  for h in $H1 $H2; do
    ip netns pids $h 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del $h 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
for h in $H1 $H2; do ip netns del $h 2>/dev/null || true; ip netns add $h; ip -n $h link set lo up; done
ip link add veth-h1 netns $H1 type veth peer name veth-h2 netns $H2
ip -n $H1 addr add $NET.1/24 dev veth-h1 && ip -n $H1 link set veth-h1 up
ip -n $H2 addr add $NET.2/24 dev veth-h2 && ip -n $H2 link set veth-h2 up
ip -n $H1 addr show veth-h1 | grep -q "inet $NET.1/" || fail "veth-h1 has no address"
echo "mpi-hosts-check: hosts $H1 ($NET.1) and $H2 ($NET.2), joined by veth"

# The launch agent: Open MPI calls it as `agent HOST command…` (like ssh).
cat > "$WORK/agent" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in
  $NET.1) ns=$H1 ;;
  $NET.2) ns=$H2 ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec \$ns env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 /bin/sh -c "\$*"
EOF
chmod +x "$WORK/agent"
printf '%s slots=1\n%s slots=1\n' $NET.1 $NET.2 > "$WORK/hosts"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PPOLAB_QUIET=1 OMP_NUM_THREADS=1
# mpirun itself runs on host h1.
across() {
  ip netns exec $H1 mpirun -np 2 --hostfile "$WORK/hosts" --mca plm_rsh_agent "$WORK/agent" \
    --mca btl tcp,self --mca btl_tcp_if_include $NET.0/24 --mca oob_tcp_if_include $NET.0/24 \
    --bind-to none -x OMP_NUM_THREADS -x PPOLAB_QUIET "$BIN" "$@"
}
# The micro study of scripts/fresh-machine-check.sh, with two chunks per update.
MICRO=(--set pretrain.tokens=12000 --set pretrain.check_prompts=0
       --set sft.epochs=2 --set sft.accumulation=32
       --set reward.epochs=2 --set reward.pairs_per_update=64
       --set ppo.iterations=4 --set ppo.interrupt_iteration=1 --set ppo.snapshot_every=2
       --set checkpoint.every_iterations=1
       --set limits.max_response=32 --set limits.max_context=288 --set replicates.count=1
       --set parallel.chunks=2)
same_study() {  # A B: every state file byte for byte, the evaluation, the findings
  local a=$1 b=$2 n=0
  while IFS= read -r f; do
    cmp -s "$a/$f" "$b/$f" || { "$BIN" resume-check --states "$a/$f" "$b/$f" || true; fail "$f differs"; }
    n=$((n + 1))
  done < <(cd "$a" && find . -name '*.state.gz' | sort)
  [ "$n" -ge 9 ] || fail "only $n state files in $a"
  [ "$(cd "$a" && find . -name '*.state.gz' | sort)" = "$(cd "$b" && find . -name '*.state.gz' | sort)" ] ||
    fail "$a and $b hold different state files"
  for f in metrics.json sft-generations.json ppo-generations.json overoptimisation.json; do
    cmp -s "$a/eval/$f" "$b/eval/$f" || fail "eval/$f differs"
  done
  python3 - "$a/findings.json" "$b/findings.json" <<'PY' || fail "findings.json differs"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for k in ("identity", "seconds"): a.pop(k, None); b.pop(k, None)
sys.exit(0 if a == b else 1)
PY
  echo "mpi-hosts-check:   $n state files, the generations, metrics, over-optimisation samples and findings equal"
}

T0=$SECONDS
echo "mpi-hosts-check: 1. the micro study in one process"
"$BIN" run --out "$WORK/one" "${MICRO[@]}" > "$WORK/one.log" 2>&1 || { tail -30 "$WORK/one.log"; fail "W=1 study"; }
echo "mpi-hosts-check:   done in $((SECONDS - T0)) s"; T0=$SECONDS

echo "mpi-hosts-check: 2. the same study at W = 2 across $H1 and $H2"
across run --out "$WORK/two" "${MICRO[@]}" > "$WORK/two.log" 2>&1 || { tail -30 "$WORK/two.log"; fail "W=2 study"; }
grep -q "world_size" "$WORK/two/ppo/continuous.json" &&
  python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['world_size'] == 2" "$WORK/two/ppo/continuous.json" ||
  fail "the W=2 study's PPO report does not say world_size 2"
echo "mpi-hosts-check:   done in $((SECONDS - T0)) s"; T0=$SECONDS
same_study "$WORK/one" "$WORK/two"

echo "mpi-hosts-check: 3. W = 2 across the hosts, $H2 killed mid-PPO, then resumed"
set +e
across run --out "$WORK/kill" "${MICRO[@]}" > "$WORK/kill.log" 2>&1 &
job=$!
for _ in $(seq 6000); do [ -e "$WORK/kill/ppo/checkpoints/continuous.state.gz" ] && break; sleep 0.05; done
[ -e "$WORK/kill/ppo/checkpoints/continuous.state.gz" ] || { kill $job; tail -30 "$WORK/kill.log"; fail "no PPO checkpoint"; }
pids=$(ip netns pids $H2)
[ -n "$pids" ] || { kill $job; fail "no process on $H2"; }
kill -9 $pids
echo "mpi-hosts-check:   killed every process on $H2 (pids $(echo $pids)) after PPO's first continuous checkpoint"
wait $job; rc=$?
set -e
[ $rc -ne 0 ] || fail "the study went on after $H2 was killed"
[ ! -e "$WORK/kill/ppo/continuous.state.gz" ] || fail "the killed study wrote PPO's continuous state"
[ ! -e "$WORK/kill/results.json" ] || fail "the killed study wrote results.json"
ls -A "$WORK/kill/ppo/checkpoints" | grep -q '^\.' && fail "a half-written checkpoint was left"
echo "mpi-hosts-check:   the job ended (mpirun exit $rc):"
grep -E "ORTE|daemon|lost|killed" "$WORK/kill.log" | head -3 | sed 's/^/    /'
across run --resume "$WORK/kill" > "$WORK/resume.log" 2>&1 || { tail -30 "$WORK/resume.log"; fail "resume"; }
grep -q "^ppo continuous: continuing from checkpoint" "$WORK/resume.log" ||
  { tail -30 "$WORK/resume.log"; fail "PPO did not continue from its checkpoint"; }
echo "mpi-hosts-check:   resumed across the hosts in $((SECONDS - T0)) s"
same_study "$WORK/one" "$WORK/kill"
echo "mpi-hosts-check: PASS"
