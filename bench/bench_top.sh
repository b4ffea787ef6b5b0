#!/usr/bin/env bash
# bench/bench_top.sh: what `termsight top` costs while it watches a process emitting about a
# million events a second (bench_top_emit): the CPU it uses at 1 Hz and 10 Hz refresh (utime +
# stime from /proc/<pid>/stat over a window), and the bytes it writes to its terminal per second
# in steady state at 120x40 (a private tmux server, the pane's output piped to a file with
# pipe-pane). Targets (the live monitor's budget): at most 1 % of a core at 1 Hz, 3 % at 10 Hz, 10 KB/s.
#
# Builds termsight and bench_top_emit in Release with the project's CMake (in build-bench, as
# bench/run.sh does) unless --build-dir names a build that has them. Everything it starts (the
# emitter, tmux, temporary folders) is removed on exit, also on Ctrl-C.
#
# usage: bench/bench_top.sh [--build-dir DIR] [--rate EVENTS_PER_S] [--window S] [--warmup S]
#                           [--refresh MS[,MS...]]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=""
RATE=1000000
WINDOW=30
WARMUP=5
REFRESH="1000,100"

while [ $# -gt 0 ]; do
    case "$1" in
    --build-dir) BUILD=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --window) WINDOW=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --refresh) REFRESH=$2; shift 2 ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "bench_top.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
for n in "$RATE" "$WINDOW" "$WARMUP"; do
    case "$n" in '' | *[!0-9]*) echo "bench_top.sh: numbers only: '$n'" >&2; exit 2 ;; esac
done
command -v tmux >/dev/null || { echo "bench_top.sh: tmux is needed" >&2; exit 1; }

SOCK="termsight-bench-top-$$"
NAME=bench_top
. "$ROOT/bench/emitter.sh"
emitter_extra_cleanup() {
    tmux -L "$SOCK" kill-server 2>/dev/null
    rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$SOCK" # a server that exits leaves it behind
}
emitter_build
TICKS=$(getconf CLK_TCK)
IFS=, read -r -a RATES <<<"$REFRESH"
SECONDS_NEEDED=$(((WARMUP + WINDOW + 5) * ${#RATES[@]} + 10))

echo "emitter: $RATE events/s for ${SECONDS_NEEDED} s; window ${WINDOW} s after ${WARMUP} s warm-up"
emitter_start "$RATE" "$SECONDS_NEEDED"

# utime + stime of a process, in clock ticks (fields 14 and 15 after the command name).
cpu_ticks() {
    local stat
    stat=$(<"/proc/$1/stat")
    stat=${stat##*) }
    read -r -a f <<<"$stat"
    echo $((f[11] + f[12]))
}

rss_kib() {
    sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status"
}

file_bytes() {
    stat -c %s "$1" 2>/dev/null || echo 0
}

printf '\n%-10s %8s %10s %12s %17s  %s\n' "refresh" "CPU %" "bytes/s" "events/s" "RSS KiB (start>end)" \
    "top's header at the end"
for ms in "${RATES[@]}"; do
    out="$WORK/pane-$ms.bytes"
    : >"$out"
    tmux -L "$SOCK" -f /dev/null new-session -d -s "r$ms" -x 120 -y 40 \
        "exec env TERM=xterm-256color '$TOP' top $EMITTER --refresh-ms $ms"
    tmux -L "$SOCK" pipe-pane -t "r$ms" -o "cat >>'$out'"
    pid=$(tmux -L "$SOCK" display -p -t "r$ms" '#{pane_pid}')
    sleep "$WARMUP"
    c0=$(cpu_ticks "$pid")
    r0=$(rss_kib "$pid")
    b0=$(file_bytes "$out")
    t0=$(date +%s.%N)
    sleep "$WINDOW"
    c1=$(cpu_ticks "$pid")
    r1=$(rss_kib "$pid")
    b1=$(file_bytes "$out")
    t1=$(date +%s.%N)
    header=$(tmux -L "$SOCK" capture-pane -p -t "r$ms" | head -n 1 | sed 's/^ *termsight top *//')
    tmux -L "$SOCK" kill-session -t "r$ms"
    json=$("$TOP" top "$EMITTER" --once --json --refresh-ms 500)
    eps=$(sed -n 's/.*"events_per_s":[[:space:]]*\([0-9.]*\).*/\1/p' <<<"$json" | head -n 1)
    awk -v c0="$c0" -v c1="$c1" -v b0="$b0" -v b1="$b1" -v t0="$t0" -v t1="$t1" \
        -v hz="$TICKS" -v ms="$ms" -v eps="$eps" -v header="$header" -v r0="$r0" -v r1="$r1" \
        'BEGIN {
        dt = t1 - t0
        printf "%-10s %8.2f %10.0f %12.0f %8d > %-8d  %s\n", ms " ms", 100 * (c1 - c0) / hz / dt,
               (b1 - b0) / dt, eps, r0, r1, header
    }'
done
echo
tail -n 1 "$WORK/emit.log" 2>/dev/null || true
