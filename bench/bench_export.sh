#!/bin/sh
# bench_export: the CPU termsight export --prometheus takes when scraped every second with N
# live sessions (default 8). Each session is slow_step (tests/cli/slow_step.c) under
# `termsight run`: 10 ms steps with OPS tiny operators each (default 20), so its lanes carry
# events the exporter reads. The exporter listens on 127.0.0.1 (a free port); curl scrapes it
# once a second for SECONDS (default 60); its CPU time (user + system, /proc/PID/stat) over that
# window is printed as a share of one core, with the mean scrape time and the page's size.
# Sessions of other programs of this user on the machine are exported too: their count is
# printed.
#
# usage: bench/bench_export.sh BUILD_DIR [SESSIONS [SECONDS [OPS]]]
set -eu
build=${1:?usage: bench_export.sh BUILD_DIR [SESSIONS [SECONDS [OPS]]]}
n=${2:-8}
secs=${3:-60}
ops=${4:-20}
bin=$build/cli/termsight
prog=$build/tests/slow_step
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-export.XXXXXX")
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

: >"$work/export.log"
"$bin" export --prometheus --listen 127.0.0.1:0 >"$work/export.log" 2>&1 &
exporter=$!
pids="$exporter"
i=0
while ! grep -q 'metrics at' "$work/export.log"; do
    i=$((i + 1))
    [ $i -lt 100 ] || { echo "the exporter did not start: $(cat "$work/export.log")"; exit 1; }
    sleep 0.1
done
url=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$work/export.log")

k=0
while [ $k -lt "$n" ]; do
    "$bin" run -o "$work/out" -- "$prog" 1000000 0 1 10 0 "$ops" >/dev/null 2>&1 &
    pids="$pids $!"
    k=$((k + 1))
done
# All sessions in the metrics (at most 30 s).
i=0
while :; do
    got=$(curl -s "$url" | grep -c '^termsight_steps_total{.*process="slow_step"' || true)
    [ "$got" -ge "$n" ] && break
    i=$((i + 1))
    [ $i -lt 300 ] || { echo "only $got of $n sessions appeared"; exit 1; }
    sleep 0.1
done

ticks=$(getconf CLK_TCK)
cpu() { awk '{ sub(/.*\) /, ""); split($0, f, " "); print f[12] + f[13] }' "/proc/$exporter/stat"; }
c0=$(cpu)
t0=$(date +%s.%N)
total_ms=0
s=0
while [ $s -lt "$secs" ]; do
    ms=$(curl -s -o "$work/page" -w '%{time_total}' "$url" | awk '{ printf "%.3f", $1 * 1000 }')
    total_ms=$(echo "$total_ms $ms" | awk '{ print $1 + $2 }')
    s=$((s + 1))
    sleep 1
done
c1=$(cpu)
t1=$(date +%s.%N)
sessions=$(grep '^termsight_sessions ' "$work/page" | awk '{ print $2 }')
size=$(wc -c <"$work/page")
echo "$c0 $c1 $t0 $t1 $ticks $s $total_ms $sessions $size $n" | awk '{
    cpu = ($2 - $1) / $5; wall = $4 - $3
    printf "exporter: %d slow_step sessions (%d exported in all), %d scrapes over %.1f s\n", $10, $8, $6, wall
    printf "  CPU %.3f s = %.3f %% of one core; mean scrape %.2f ms; page %d bytes\n", cpu, 100 * cpu / wall, $7 / $6, $9
}'
