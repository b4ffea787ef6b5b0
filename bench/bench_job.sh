#!/usr/bin/env bash
# The job report's scaling (bench/RESULTS.md, "Job analysis"): a synthetic job of RANKS ranks of
# EVENTS events each (bench_job_ranks: steps of 1,000 events, the last rank 2 ms late in each
# step), then `termsight analyse JOB_FOLDER` timed by /usr/bin/time (wall, CPU, peak RSS) with
# the extra disk it leaves (du of the job folder after, less before): with the default timeline
# limit (500 MiB for the job), with --timeline-limit 1, the merge alone, and the rank analyses on
# a Dask cluster of one scheduler and two one-thread workers on 127.0.0.1 (--scheduler).
#
#   bash bench/bench_job.sh [RANKS [EVENTS]]        (default 1024 ranks of 20,000 events)
#
# BUILD_DIR (default build). The job lies under $TMPDIR (about 1.3 MB of recording per 20,000
# events and rank; removed at the end). Each analysis starts from rank folders without reports.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
RANKS=${1:-1024}
EVENTS=${2:-20000}
case $BUILD_DIR in /*) ;; *) BUILD_DIR=$PWD/$BUILD_DIR ;; esac
bin=$BUILD_DIR/cli/termsight
gen=$BUILD_DIR/bench/bench_job_ranks
[ -x "$bin" ] && [ -x "$gen" ] || { echo "bench_job: build first (cmake --build $BUILD_DIR)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-job.XXXXXX")
pids=()
# Dask's processes get SIGTERM first, so that they close and their resource tracker removes
# their semaphores from /dev/shm; SIGKILL for any group still there after 10 s.
cleanup() {
    for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
    for _ in $(seq 100); do
        local alive=0
        for p in "${pids[@]}"; do kill -0 -- "-$p" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && break
        sleep 0.1
    done
    for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
job=$work/out/bj

echo "bench_job: recording $RANKS ranks of $EVENTS events ($(nproc) CPUs)"
"$gen" "$work/out" bj "$RANKS" "$EVENTS" | awk '{r += $3; d += $6} END {print "  recorded", r, "dropped", d}'
rec_kb=$(du -sk "$job" | cut -f1)
echo "  recordings: $((rec_kb / 1024)) MB"

# measure NAME ARGS...: one analysis from rank folders without reports (--merge-only keeps them).
measure() {
    local name=$1
    shift
    case " $* " in *" --merge-only "*) ;; *) rm -rf "$job"/rank*/report ;; esac
    rm -rf "$job/report"
    sync
    local before
    before=$(du -sk "$job" | cut -f1)
    /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$bin" analyse "$@" "$job" >"$work/out.txt" 2>"$work/err.txt" ||
        { echo "  $name: failed: $(tail -1 "$work/err.txt")"; return; }
    read -r wall user sys rss <"$work/time"
    local after
    after=$(du -sk "$job" | cut -f1)
    printf "  %-34s wall %6.2f s  CPU %6.2f s  peak RSS %4d MB  extra disk %5d MB\n" "$name" \
        "$wall" "$(echo "$user + $sys" | bc)" $((rss / 1024)) $(((after - before) / 1024))
}

for round in 1 2; do
    echo "round $round"
    measure "default (-j $(nproc))"
    measure "--timeline-limit 1 (-j $(nproc))" --timeline-limit 1
    measure "--merge-only (after the one above)" --merge-only --timeline-limit 1
done
grep -E "straggler|job:" "$work/out.txt" | head -3 | sed 's/^/  /'

# Dask: a scheduler and two workers of one thread each, this machine only, bounded.
if command -v dask-scheduler >/dev/null && [ -x /usr/bin/python3 ]; then
    sfile=$work/scheduler.json
    setsid timeout 600 dask-scheduler --host 127.0.0.1 --port 0 --no-dashboard \
        --scheduler-file "$sfile" >"$work/sched.log" 2>&1 &
    pids+=($!)
    disown $!
    for _ in $(seq 200); do [ -s "$sfile" ] && break; sleep 0.1; done
    for w in 1 2; do
        PATH=$(dirname "$bin"):$PATH setsid timeout 600 dask-worker --scheduler-file "$sfile" \
            --nthreads 1 --no-dashboard --host 127.0.0.1 >"$work/worker$w.log" 2>&1 &
        pids+=($!)
        disown $!
    done
    addr=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["address"])' "$sfile")
    /usr/bin/python3 - "$addr" <<'PY'
import sys, time
from distributed import Client
c = Client(sys.argv[1], timeout=30)
end = time.time() + 60
while len(c.scheduler_info()["workers"]) < 2 and time.time() < end:
    time.sleep(0.1)
c.close()
PY
    export TERMSIGHT_PYTHON=/usr/bin/python3
    measure "Dask, 2 workers (--scheduler)" --scheduler "$addr"
    measure "Dask, 2 workers, --timeline-limit 1" --scheduler "$addr" --timeline-limit 1
fi
