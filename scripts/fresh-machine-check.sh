#!/usr/bin/env bash
# The README's two commands on a brand-new Debian 12, as a newcomer runs them:
#
#   1. a minimal Debian 12 root (debootstrap --variant=minbase; the mirror is
#      read from this machine's apt sources) in a folder outside the checkout;
#   2. `git archive HEAD` of this repository in it, and nothing else of ours;
#   3. inside it (chroot, /proc /sys /dev /dev/shm mounted, as root), the two
#      commands exactly as the README's first code block writes them: the
#      study with --set options that make it a micro run, then the test
#      command in full;
#   4. each command's wall time, and the test runner's summary.
#
# The root inherits only this machine's network settings: its apt sources
# and apt network options, DNS resolver, CA bundle and pip configuration
# (without them apt and pip cannot reach the registries from inside), never a
# package or file installed by hand. Downloaded .deb files (and pip's wheel
# cache) are kept in $PPOLAB_FRESH_CACHE (default /var/cache/ppolab-fresh-root):
# a cache of packages hides no install step.
#
#   scripts/fresh-machine-check.sh                  # what .ci/run runs
#   scripts/fresh-machine-check.sh --omit PKG       # leave PKG out of scripts/install.sh (must fail)
#   scripts/fresh-machine-check.sh --study-only     # only the first command
#   scripts/fresh-machine-check.sh --study-only --full-study   # the real default study (its time in the README)
#   scripts/fresh-machine-check.sh --keep           # keep the root afterwards (printed)
#   scripts/fresh-machine-check.sh --run 'CMD'      # only CMD in the fresh root (one step,
#       e.g. 'scripts/install.sh --tests && cmake -S . -B build >/dev/null && scripts/lint.sh')
set -euo pipefail
# Every mount below lives in a private mount namespace of this script: none
# can reach this machine's own /dev or /proc, and all vanish with the script.
if [ "$(id -u)" = 0 ] && [ -z "${PPOLAB_FRESH_NAMESPACE:-}" ]; then
  PPOLAB_FRESH_NAMESPACE=1 exec unshare --mount --propagation private "$0" "$@"
fi
cd "$(dirname "$0")/.."
REPO=$PWD
OMIT="" STUDY_ONLY=0 KEEP=0 FULL_STUDY=0 RUN_CMD=""
while [ $# -gt 0 ]; do
  case "$1" in
    --omit) OMIT=${2:?--omit needs a package name}; shift 2 ;;
    --study-only) STUDY_ONLY=1; shift ;;
    --full-study) FULL_STUDY=1; shift ;;
    --keep) KEEP=1; shift ;;
    --run) RUN_CMD=${2:?--run needs a command}; shift 2 ;;
    *) echo "usage: scripts/fresh-machine-check.sh [--omit PKG] [--study-only] [--full-study] [--keep] [--run CMD]" >&2
       exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "fresh-machine-check: must run as root (debootstrap, chroot, mount)" >&2; exit 2; }
git rev-parse --verify -q HEAD >/dev/null || { echo "fresh-machine-check: $REPO is not a git checkout with a commit" >&2; exit 2; }

# The micro study (~3 min on 2 cores): a few thousand pretraining tokens,
# minimal epochs and iterations (tests/cli/study_smoke.sh's settings), answers
# of at most 32 tokens. The judge's two epochs over the 840 train pairs, run
# three times for the resume proof, are most of it.
# One replicate (the tiny preset's 5 are study_smoke's business at 2); PPO
# snapshots at iterations 1 and 2 so the over-optimisation step has a point
# between SFT and the final actor.
MICRO=(--set pretrain.tokens=12000 --set pretrain.check_prompts=0
       --set sft.epochs=2 --set sft.accumulation=32
       --set reward.epochs=2 --set reward.pairs_per_update=64
       --set ppo.iterations=2 --set ppo.interrupt_iteration=1 --set ppo.snapshot_every=1
       --set limits.max_response=32 --set limits.max_context=288 --set replicates.count=1)
[ $FULL_STUDY = 1 ] && MICRO=()

# The README's two commands: the first two command lines of its first code block.
mapfile -t COMMANDS < <(awk '/^```/{n++; next} n==1' README.md | sed -e 's/[[:space:]]*#.*$//' | grep -v '^[[:space:]]*$' | head -2)
[ ${#COMMANDS[@]} = 2 ] || { echo "fresh-machine-check: README.md's first code block does not hold two commands" >&2; exit 1; }
STUDY_CMD=${COMMANDS[0]} TEST_CMD=${COMMANDS[1]}
COMMIT=$(git rev-parse --short HEAD)
echo "fresh-machine-check: README's commands: '$STUDY_CMD' and '$TEST_CMD' (commit $COMMIT)"

if ! command -v debootstrap >/dev/null; then
  echo "fresh-machine-check: installing debootstrap on this machine (the check's own tool)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

# The mirror this machine's apt uses for Debian 12 (deb822 or one-line sources).
mirror=$(
  { cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/{print $2}' || true
    grep -shE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}' || true
  } | grep -v -- '-security' | head -1 || true)
mirror=${mirror:-http://deb.debian.org/debian}

CACHE=${PPOLAB_FRESH_CACHE:-/var/cache/ppolab-fresh-root}
mkdir -p "$CACHE/debootstrap" "$CACHE/apt-archives/partial" "$CACHE/pip"
ROOT=$(mktemp -d /var/tmp/ppolab-fresh-root.XXXXXX)
MOUNTS=()
cleanup() {
  local i
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount -l "${MOUNTS[i]}" 2>/dev/null || true; done
  if [ $KEEP = 1 ]; then echo "fresh-machine-check: root kept in $ROOT"; return; fi
  # Never delete through a mount that is still there.
  if grep -q " $ROOT/" /proc/mounts; then echo "fresh-machine-check: $ROOT still has mounts; not removed" >&2; return; fi
  rm -rf --one-file-system "$ROOT"
}
trap cleanup EXIT
bind() { mkdir -p "$2"; mount --bind "$1" "$2"; MOUNTS+=("$2"); }

t0=$SECONDS
echo "== debootstrap --variant=minbase bookworm from $mirror into $ROOT"
debootstrap --variant=minbase --cache-dir="$CACHE/debootstrap" bookworm "$ROOT" "$mirror" >"$ROOT.debootstrap.log" 2>&1 ||
  { tail -30 "$ROOT.debootstrap.log"; exit 1; }
rm -f "$ROOT.debootstrap.log"
echo "   $((SECONDS - t0)) s"

# This machine's network settings, and nothing else.
rm -f "$ROOT/etc/apt/sources.list"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] && cp "$f" "$ROOT$f"
done
for f in /etc/apt/apt.conf.d/*; do  # the options that say how to reach the mirrors (proxies, validity)
  [ -f "$f" ] && grep -q '^[[:space:]]*Acquire::' "$f" && cp "$f" "$ROOT/etc/apt/apt.conf.d/"
done
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
[ -f /etc/hosts ] && cp /etc/hosts "$ROOT/etc/hosts"
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  mkdir -p "$ROOT/etc/ssl/certs" "$ROOT/usr/local/share/ca-certificates"
  cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
  # Kept when the root's own ca-certificates package rebuilds the bundle.
  cp /etc/ssl/certs/ca-certificates.crt "$ROOT/usr/local/share/ca-certificates/this-machine.crt"
fi
for f in /etc/pip.conf /etc/xdg/pip/pip.conf; do [ -f "$f" ] && mkdir -p "$ROOT$(dirname "$f")" && cp "$f" "$ROOT$f"; done
# The environment: a clean one, plus this machine's proxy, CA and pip network variables.
ENV=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 TERM=dumb
     DEBIAN_FRONTEND=noninteractive)
[ -n "${CI:-}" ] && ENV+=(CI="$CI")
[ -n "${PPOLAB_QUIET:-}" ] && ENV+=(PPOLAB_QUIET="$PPOLAB_QUIET")
[ -n "$OMIT" ] && ENV+=(PPOLAB_INSTALL_OMIT="$OMIT")
while IFS='=' read -r name value; do
  case "$name" in
    http_proxy|https_proxy|no_proxy|HTTP_PROXY|HTTPS_PROXY|NO_PROXY|SSL_CERT_FILE|SSL_CERT_DIR|REQUESTS_CA_BUNDLE|\
    CURL_CA_BUNDLE|PIP_CERT|PIP_INDEX_URL|PIP_EXTRA_INDEX_URL|PIP_TRUSTED_HOST|PIP_DEFAULT_TIMEOUT|PIP_PROXY)
      ENV+=("$name=$value") ;;
  esac
done < <(env)

# The repository: what is committed, nothing beside it.
mkdir -p "$ROOT/root/ppolab"
git archive "$COMMIT" | tar -x -C "$ROOT/root/ppolab"

# The root is a mount point, as / is on a real machine (tests that make a
# private mount namespace change the propagation of /, which needs one).
bind "$ROOT" "$ROOT"
mount -t proc proc "$ROOT/proc"; MOUNTS+=("$ROOT/proc")
mount -t sysfs sysfs "$ROOT/sys"; MOUNTS+=("$ROOT/sys")
bind /dev "$ROOT/dev"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$ROOT/dev/pts" 2>/dev/null && MOUNTS+=("$ROOT/dev/pts") || true
mount -t tmpfs -o size=2g tmpfs "$ROOT/dev/shm"; MOUNTS+=("$ROOT/dev/shm")
bind "$CACHE/apt-archives" "$ROOT/var/cache/apt/archives"
bind "$CACHE/pip" "$ROOT/root/.cache/pip"

inside() { chroot "$ROOT" /usr/bin/env -i "${ENV[@]}" /bin/bash -c "cd /root/ppolab && $1"; }

status=0
if [ -n "$RUN_CMD" ]; then
  t1=$SECONDS
  echo "== (fresh root) $RUN_CMD"
  set +e
  inside "$RUN_CMD" 2>&1
  status=$?
  set -e
  echo "fresh-machine-check: --run command $([ $status = 0 ] && echo passed || echo FAILED) (exit $status) in" \
       "$((SECONDS - t1)) s, $((SECONDS - t0)) s in all (commit $COMMIT)"
  exit $status
fi
t1=$SECONDS
echo "== 1/2 (fresh root) $STUDY_CMD ${MICRO[*]}"
if inside "$STUDY_CMD ${MICRO[*]}" >"$ROOT.study.log" 2>&1; then
  study_s=$((SECONDS - t1))
  tail -45 "$ROOT.study.log"
  echo "   study command: ${study_s} s"
  [ -f "$ROOT/root/ppolab/runs/default/results.json" ] || { echo "fresh-machine-check: the study wrote no results.json"; status=1; }
else
  status=$?
  tail -60 "$ROOT.study.log"
  echo "fresh-machine-check: the study command FAILED (exit $status) after $((SECONDS - t1)) s"
fi
rm -f "$ROOT.study.log"
if [ $status = 0 ] && [ $STUDY_ONLY = 0 ]; then
  t2=$SECONDS
  echo "== 2/2 (fresh root) $TEST_CMD"
  set +e
  inside "$TEST_CMD" 2>&1
  status=$?
  set -e
  test_s=$((SECONDS - t2))
  echo "   test command: ${test_s} s (exit $status)"
fi
echo "fresh-machine-check: $([ $status = 0 ] && echo passed || echo FAILED) in $((SECONDS - t0)) s" \
     "(study command ${study_s:-—} s, test command ${test_s:-—} s, commit $COMMIT)"
exit $status
