#!/usr/bin/env bash
# bench/bench_diff.sh: how long `termsight diff` takes on two run reports of many steps, and its
# peak memory (GNU time's maximum resident size). The reports are the smallest termsight diff
# reads (report/step_trace.csv and report/step_ops.csv, MatMul and ReLU per step, B's MatMul 10 %
# slower), written by bench/diff_gen.py into a temporary folder removed on exit (about 145 MB per
# side at 10^6 steps). To time another build (an older commit's, for a before/after), give its
# termsight with --bin.
#
# usage: bench/bench_diff.sh [--bin TERMSIGHT] [--steps N[,N...]]   (default 100000,1000000)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN="$ROOT/build/cli/termsight"
STEPS="100000,1000000"
while [ $# -gt 0 ]; do
    case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    -h | --help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "bench_diff.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -x "$BIN" ] || { echo "bench_diff.sh: no termsight at $BIN" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench_diff.sh: needs GNU time (/usr/bin/time)" >&2; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/bench-diff-XXXXXX")
trap 'rm -rf "$TMP"' EXIT

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)"
for n in ${STEPS//,/ }; do
    python3 "$ROOT/bench/diff_gen.py" "$TMP/a$n" "$n" 1000 500 1
    python3 "$ROOT/bench/diff_gen.py" "$TMP/b$n" "$n" 1100 500 2
    /usr/bin/time -f "%e %M" -o "$TMP/time" "$BIN" diff "$TMP/a$n" "$TMP/b$n" >"$TMP/out"
    read -r secs kb <"$TMP/time"
    mm=$(grep -m1 '^op .*MatMul' "$TMP/out" | tr -s ' ' | cut -d' ' -f4-9)
    echo "steps $n: $secs s, peak $((kb / 1024)) MiB; MatMul row: $mm"
    rm -rf "$TMP/a$n" "$TMP/b$n"
done
