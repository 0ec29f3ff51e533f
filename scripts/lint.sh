#!/usr/bin/env bash
# Format and lint: the committed .clang-format and .clang-tidy, checked.
#   scripts/lint.sh [--format-only] [--fix]
#   1. clang-format --dry-run -Werror over every C++ file of src/ tests/
#      bench/ fuzz/: a file that `clang-format -i` would change
#      is an error naming it (--fix rewrites them instead);
#   2. no line over 120 columns in those files (clang-format cannot break
#      a long string literal or comment);
#   3. clang-tidy with .clang-tidy over every src/ translation unit of
#      build/compile_commands.json (configure build/ first: scripts/build.sh),
#      nproc at a time; its WarningsAsErrors set fails the check.
# Prints "lint: PASS" or the failures and "lint: FAIL"; exit status to match.
set -euo pipefail
cd "$(dirname "$0")/.."
FORMAT_ONLY=0 FIX=0
for a in "$@"; do
  case $a in
    --format-only) FORMAT_ONLY=1 ;;
    --fix) FIX=1 ;;
    *) echo "lint: unknown option '$a' (expected --format-only or --fix)" >&2; exit 2 ;;
  esac
done
for tool in clang-format clang-tidy; do
  command -v $tool >/dev/null || { echo "lint: $tool not found (scripts/install.sh --tests installs it)" >&2; exit 2; }
done
# Every C++ file of the tree (a clone or a `git archive`, so no git needed).
mapfile -t FILES < <(find src tests bench fuzz \( -name '*.cpp' -o -name '*.h' \) -type f 2>/dev/null | sort)
status=0
if [[ $FIX == 1 ]]; then
  clang-format -i "${FILES[@]}"
elif ! clang-format --dry-run -Werror "${FILES[@]}" 2>/tmp/lint-format.$$; then
  grep -oE '^[^:]+\.(cpp|h)' /tmp/lint-format.$$ | sort -u | sed 's/^/lint: not formatted (clang-format -i): /'
  status=1
fi
rm -f /tmp/lint-format.$$
if awk 'length($0) > 120 { printf "lint: %s:%d is %d columns, over 120\n", FILENAME, FNR, length($0); bad = 1 } END { exit bad }' \
     "${FILES[@]}"; then :; else status=1; fi
echo "lint: clang-format and line length over ${#FILES[@]} files: $([[ $status == 0 ]] && echo ok || echo FAILED)"
if [[ $FORMAT_ONLY == 0 ]]; then
  [[ -f build/compile_commands.json ]] || { echo "lint: build/compile_commands.json missing (run scripts/build.sh first)" >&2; exit 2; }
  # clang-tidy reads the compile commands; GCC-only options (adamw.cpp's
  # -fvect-cost-model) are left out of its copy, which clang would refuse.
  DB=$(mktemp -d)
  mapfile -t UNITS < <(python3 - "$DB" <<'PY'
import json, os, re, sys
root = os.getcwd() + "/src/"
db = [e for e in json.load(open("build/compile_commands.json")) if e["file"].startswith(root)]
for e in db:
    e["command"] = re.sub(r" -fvect-cost-model=\S+", "", e["command"])
json.dump(db, open(os.path.join(sys.argv[1], "compile_commands.json"), "w"))
print("\n".join(sorted({e["file"] for e in db})))
PY
)
  LOG=$(mktemp)
  if printf '%s\n' "${UNITS[@]}" | xargs -P "$(nproc)" -n 1 clang-tidy -p "$DB" --quiet >"$LOG" 2>&1; then
    echo "lint: clang-tidy over ${#UNITS[@]} src/ translation units: ok"
  else
    grep -E '(warning|error):' "$LOG" | sort -u | head -60
    echo "lint: clang-tidy over ${#UNITS[@]} src/ translation units: FAILED"
    status=1
  fi
  rm -rf "$LOG" "$DB"
fi
[[ $status == 0 ]] && echo "lint: PASS" || echo "lint: FAIL"
exit $status
