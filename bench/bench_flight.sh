#!/usr/bin/env bash
# bench/bench_flight.sh: the flight recorder's memory over a long run. bench_top_emit (steps of 20
# operators) emits RATE events/s for SECONDS in flight mode (TERMSIGHT_FLIGHT_MB=MB): its ring
# fills within seconds and then overwrites itself for the rest of the run. Every 5 s the script
# reads the emitter's resident memory (VmRSS) and the shared memory its segment holds (the blocks
# of /dev/shm/termsight-PID-*); at the middle and at the end it asks for a snapshot
# (`termsight snapshot PID`) and times it. It prints the samples, then: the resident memory once
# the ring was full and at the end (the ring must not grow past MB), the largest segment, each
# snapshot's time and size, and the events the collector dropped (termsight ls).
#
# usage: bench/bench_flight.sh [--build-dir DIR] [--rate EVENTS_PER_S] [--seconds S] [--mb MB]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=""
RATE=1000000
SECONDS_RUN=600
MB=64

while [ $# -gt 0 ]; do
    case "$1" in
    --build-dir) BUILD=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --seconds) SECONDS_RUN=$2; shift 2 ;;
    --mb) MB=$2; shift 2 ;;
    -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "bench_flight.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
for n in "$RATE" "$SECONDS_RUN" "$MB"; do
    case "$n" in '' | *[!0-9]*) echo "bench_flight.sh: numbers only: '$n'" >&2; exit 2 ;; esac
done
[ "$SECONDS_RUN" -ge 20 ] || { echo "bench_flight.sh: --seconds 20 at least" >&2; exit 2; }

NAME=bench_flight
. "$ROOT/bench/emitter.sh"
emitter_build
echo "emitter: $RATE events/s for $SECONDS_RUN s, flight recorder of $MB MiB"
# The emitter outlasts the watch by a minute: the last snapshot and its figures come from it alive.
TERMSIGHT_FLIGHT=1 TERMSIGHT_FLIGHT_MB=$MB emitter_start "$RATE" "$((SECONDS_RUN + 60))"

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$EMITTER/status" 2>/dev/null || echo 0; }
shm_kib() { du -sk /dev/shm/termsight-"$EMITTER"-* 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }

snap() {
    local t0 t1 out
    t0=$(date +%s.%N)
    out=$("$TOP" snapshot --wait 120 "$EMITTER") || { echo "$NAME: snapshot failed" >&2; exit 1; }
    t1=$(date +%s.%N)
    local folder=${out#*: }
    printf 'snapshot %s: %.2f s, %s\n' "$1" "$(echo "$t1 - $t0" | bc)" \
        "$(du -sh "$folder/recording" | cut -f1)"
}

full_rss=0 max_rss=0 max_shm=0 half=$((SECONDS_RUN / 2)) t=0 snapped=0
echo "   s   rss_MiB  shm_MiB"
while kill -0 "$EMITTER" 2>/dev/null && [ "$t" -lt "$SECONDS_RUN" ]; do
    sleep 5
    t=$((t + 5))
    r=$(rss_kib) m=$(shm_kib)
    [ "$r" -gt "$max_rss" ] && max_rss=$r
    [ "$m" -gt "$max_shm" ] && max_shm=$m
    [ "$t" -eq 20 ] && full_rss=$r
    printf '%5d %8.1f %8.1f\n' "$t" "$(echo "$r / 1024" | bc -l)" "$(echo "$m / 1024" | bc -l)"
    if [ "$snapped" -eq 0 ] && [ "$t" -ge "$half" ]; then
        snap "at ${t} s"
        snapped=1
    fi
done
end_rss=$(rss_kib)
snap "at the end"
drops=$("$TOP" ls | awk -v p="$EMITTER" '$1 == p { print $6 }')
echo "events dropped by the emitter's collector: ${drops:-?}"
printf 'resident: %.1f MiB at 20 s (ring full), %.1f MiB at the end, %.1f MiB at most\n' \
    "$(echo "$full_rss / 1024" | bc -l)" "$(echo "$end_rss / 1024" | bc -l)" \
    "$(echo "$max_rss / 1024" | bc -l)"
printf 'shared memory (the segment): %.1f MiB at most\n' "$(echo "$max_shm / 1024" | bc -l)"
