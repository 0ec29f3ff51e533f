#!/usr/bin/env bash
# bench_peak measures every CPU's own limits (BENCHMARKS.md reads each
# target against them): natively, a rate for every unit this CPU's flags
# name; under PPOLAB_ISA=avx2, which is what an AVX2-only CPU runs, the
# 256-bit FMA peak and the read bandwidth, and the units above the cap
# reported as capped. Short trials: this checks what is measured, not how fast.
set -euo pipefail
BIN=${1:?usage: peak_units.sh BENCH_PEAK}
export OMP_NUM_THREADS=1
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { [[ " $flags " == *" $1 "* ]]; }
rate() {  # the rate of unit $2 in output $1, or nothing
  grep -F "\"name\": \"$2\", \"threads\"" <<<"$1" | sed -E 's/.*"(gflop_s|gb_s)": ([0-9.]+).*/\2/' | head -1
}
positive() { [ -n "$1" ] && awk -v x="$1" 'BEGIN { exit !(x > 0) }'; }
fail() { echo "peak_units: $*" >&2; exit 1; }

native=$("$BIN" --seconds 0.02 --trials 1)
echo "$native"
positive "$(rate "$native" "fp32 fma avx2")" || fail "no 256-bit FMA rate natively"
positive "$(rate "$native" "stream read")" || fail "no read bandwidth natively"
if has avx512f; then positive "$(rate "$native" "fp32 fma")" || fail "AVX-512 CPU without a 512-bit FMA rate"; fi
if has avx512_bf16; then
  positive "$(rate "$native" "bf16 vdpbf16ps")" || fail "AVX-512 BF16 CPU without a vdpbf16ps rate"
fi

capped=$(PPOLAB_ISA=avx2 "$BIN" --seconds 0.02 --trials 1)
echo "$capped"
positive "$(rate "$capped" "fp32 fma avx2")" || fail "no 256-bit FMA rate under PPOLAB_ISA=avx2"
positive "$(rate "$capped" "stream read")" || fail "no read bandwidth under PPOLAB_ISA=avx2"
[ -z "$(rate "$capped" "fp32 fma")" ] || fail "a 512-bit FMA rate under PPOLAB_ISA=avx2"
[ -z "$(rate "$capped" "bf16 vdpbf16ps")" ] || fail "a vdpbf16ps rate under PPOLAB_ISA=avx2"
if PPOLAB_ISA=nonsense "$BIN" --seconds 0.02 > /dev/null 2>&1; then fail "an unknown PPOLAB_ISA was accepted"; fi
echo "peak_units: ok"
