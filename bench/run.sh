#!/usr/bin/env bash
# bench/run.sh: the hot-path benchmark end to end (see bench/RESULTS.md).
#
# Builds the project with its CMake in Release, starts an LTTng-UST session daemon when none is
# running (lttng-sessiond --daemonize --no-kernel), and for each run creates, starts, reads and
# destroys an LTTng session around one termsight_bench_lttng process, so that termsight and the
# LTTng-UST tracepoint are measured in the same process. A last run with no LTTng session
# measures the disabled tracepoint. Prints the machine, each run's table and a summary over the
# runs. Everything it started (the daemon, its consumer daemons, temporary folders, LTTng's
# shared-memory wait files when they were not there before) is removed on exit, also on Ctrl-C.
#
# usage: bench/run.sh [--runs N] [--quick] [--build-dir DIR] [--log FILE] [--no-lttng]
#                     [-- termsight_bench options...]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD="$ROOT/build-bench"
RUNS=3
QUICK=0
LOG=""
USE_LTTNG=1
EXTRA=()

while [ $# -gt 0 ]; do
    case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --build-dir) BUILD=$2; shift 2 ;;
    --log) LOG=$2; shift 2 ;;
    --no-lttng) USE_LTTNG=0; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$RUNS" in '' | *[!0-9]*) echo "run.sh: --runs takes a number" >&2; exit 2 ;; esac

# ---- cleanup of everything this script starts ------------------------------------------------
WORK=""         # temporary folder on disk: logs, the benchmark's disk folder
SHM=""          # temporary folder on tmpfs: the benchmark's tmpfs folder, LTTng traces
OUR_SESSIOND="" # pid of the lttng-sessiond we started
LTTNG_SESSION=""
WAIT_SHM_BEFORE=""
RUNDIR_EXISTED=1
STALE_PIDFILE="${TMPDIR:-/tmp}/termsight-bench-sessiond.pid"

stop_sessiond() {
    local pid=$1
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || return 0
        [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" = Z ] && return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
    set +e
    if [ -n "$LTTNG_SESSION" ]; then
        lttng destroy "$LTTNG_SESSION" >/dev/null 2>&1
    fi
    if [ -n "$OUR_SESSIOND" ]; then
        stop_sessiond "$OUR_SESSIOND"
        rm -f "$STALE_PIDFILE"
        if [ "$RUNDIR_EXISTED" = 0 ]; then
            rmdir /var/run/lttng 2>/dev/null
        fi
    fi
    # liblttng-ust creates these in the traced process; remove them when they are new.
    for f in /dev/shm/lttng-ust-wait-*; do
        [ -e "$f" ] || continue
        case " $WAIT_SHM_BEFORE " in *" $f "*) ;; *) rm -f "$f" ;; esac
    done
    [ -n "$SHM" ] && rm -rf "$SHM"
    [ -n "$WORK" ] && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

WORK=$(mktemp -d "${TMPDIR:-/tmp}/termsight-bench.XXXXXX")
SHM=$(mktemp -d /dev/shm/termsight-bench.XXXXXX)
mkdir -p "$WORK/disk" "$SHM/tmpfs"
WAIT_SHM_BEFORE=$(echo /dev/shm/lttng-ust-wait-*)

# ---- build -------------------------------------------------------------------------------------
echo "== build: $BUILD (Release)"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$WORK/cmake.log" 2>&1 ||
    { cat "$WORK/cmake.log"; exit 1; }
TARGETS=(termsight termsight_bench)
if [ "$USE_LTTNG" = 1 ] && grep -q "termsight_bench_lttng built" "$WORK/cmake.log"; then
    TARGETS+=(termsight_bench_lttng)
else
    USE_LTTNG=0
fi
cmake --build "$BUILD" -j"$(nproc)" --target "${TARGETS[@]}" >"$WORK/build.log" 2>&1 ||
    { cat "$WORK/build.log"; exit 1; }
BIN="$BUILD/bench/termsight_bench"
if [ "$USE_LTTNG" = 1 ]; then
    if ! command -v lttng >/dev/null || ! command -v lttng-sessiond >/dev/null; then
        echo "== lttng-tools not installed: running without the LTTng-UST comparison"
        USE_LTTNG=0
    else
        BIN="$BUILD/bench/termsight_bench_lttng"
    fi
fi

ARGS=(--tmpfs "$SHM/tmpfs" --disk "$WORK/disk")
if [ "$QUICK" = 1 ]; then
    ARGS+=(--repeats 2 --hot-events 1048576 --idle-calls 10000000 --clock-calls 1000000
        --rate-seconds 0.5 --rate-repeats 1 --rates "10,20,0")
fi
ARGS+=("${EXTRA[@]}")

# ---- machine -----------------------------------------------------------------------------------
echo "== machine"
echo "date:        $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "nproc:       $(nproc)"
echo "cpu:         $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "kernel:      $(uname -r)"
echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
echo "build:       Release, $("$(grep -m1 CMAKE_C_COMPILER: "$BUILD/CMakeCache.txt" | cut -d= -f2)" --version | head -1)"
echo "tree:        $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "no commit")$(
    [ -n "$(git -C "$ROOT" status --porcelain -- model collectors include 2>/dev/null)" ] &&
        echo " (library sources modified since)")"
echo "tmpfs:       $SHM/tmpfs   disk: $WORK/disk ($(df --output=source,fstype "$WORK" | tail -1))"
echo "command:     $BIN ${ARGS[*]}"

# Other work on the machine skews every figure: say what was running.
machine_load() {
    echo "load ($1): $(cut -d' ' -f1-3 /proc/loadavg); busiest other processes (% CPU, lifetime):"
    ps -eo pid=,pcpu=,comm= --sort=-pcpu | awk -v self=$$ '$1 != self && $2 >= 5 {
        printf "    %s %s%% %s\n", $1, $2, $3; n++ } n >= 5 { exit }'
}
machine_load "before"

# ---- LTTng -------------------------------------------------------------------------------------
if [ "$USE_LTTNG" = 1 ]; then
    # A daemon left by an interrupted earlier run of this script.
    if [ -f "$STALE_PIDFILE" ]; then
        old=$(cat "$STALE_PIDFILE")
        if [ "$(ps -o comm= -p "$old" 2>/dev/null)" = lttng-sessiond ]; then
            echo "== stopping lttng-sessiond $old left by an earlier run"
            stop_sessiond "$old"
        fi
        rm -f "$STALE_PIDFILE"
    fi
    if lttng list >/dev/null 2>&1; then
        echo "== lttng: using the session daemon already running (not stopped afterwards)"
    else
        [ -d /var/run/lttng ] || RUNDIR_EXISTED=0
        lttng-sessiond --daemonize --no-kernel
        if [ "$(id -u)" = 0 ]; then
            pidfile=/var/run/lttng/lttng-sessiond.pid
        else
            pidfile="${LTTNG_HOME:-$HOME}/.lttng/lttng-sessiond.pid"
        fi
        OUR_SESSIOND=$(cat "$pidfile")
        echo "$OUR_SESSIOND" >"$STALE_PIDFILE"
        echo "== lttng: started lttng-sessiond (pid $OUR_SESSIOND, $(lttng --version | head -1))"
    fi
fi

# ---- runs --------------------------------------------------------------------------------------
DISCARDED=()
for run in $(seq "$RUNS"); do
    echo
    echo "==================== run $run of $RUNS ===================="
    if [ "$USE_LTTNG" = 1 ]; then
        LTTNG_SESSION="termsight-bench-$$-$run"
        lttng create "$LTTNG_SESSION" --output="$SHM/trace-$run" >/dev/null
        lttng enable-channel --userspace --session="$LTTNG_SESSION" \
            --subbuf-size=4M --num-subbuf=16 chan >/dev/null
        lttng enable-event --userspace --session="$LTTNG_SESSION" --channel=chan \
            termsight_bench:event >/dev/null
        lttng start "$LTTNG_SESSION" >/dev/null
        echo "lttng session $LTTNG_SESSION: channel chan (per-user buffers, 16 x 4 MiB per CPU," \
            "discard mode), event termsight_bench:event enabled, started before the program"
    fi
    "$BIN" "${ARGS[@]}" | tee "$WORK/run-$run.log"
    if [ "$USE_LTTNG" = 1 ]; then
        lttng stop "$LTTNG_SESSION" >/dev/null
        lttng list "$LTTNG_SESSION" >"$WORK/lttng-$run.txt"
        d=$(awk '/Discarded events:/ {s += $3} END {print s + 0}' "$WORK/lttng-$run.txt")
        l=$(awk '/Lost packets:/ {s += $3} END {print s + 0}' "$WORK/lttng-$run.txt")
        DISCARDED+=("run $run: LTTng discarded events $d, lost packets $l")
        echo "lttng list $LTTNG_SESSION: discarded events $d, lost packets $l," \
            "trace $(du -sh "$SHM/trace-$run" | cut -f1)"
        lttng destroy "$LTTNG_SESSION" >/dev/null
        LTTNG_SESSION=""
        rm -rf "$SHM/trace-$run"
    fi
done

if [ "$USE_LTTNG" = 1 ]; then
    echo
    echo "==================== no LTTng session: the disabled tracepoint ===================="
    "$BIN" "${ARGS[@]}" --sections idle | tee "$WORK/nosession.log"
fi

echo
machine_load "after"

# ---- summary -----------------------------------------------------------------------------------
echo
echo "==================== summary over $RUNS runs ===================="
echo "each cell: the run's median over its repeats; spread = (max - min) / median of the runs"
for f in "$WORK"/run-*.log; do grep '^RESULT ' "$f" | sed "s|^|$(basename "$f" .log) |"; done |
    awk -v runs="$RUNS" '
    {
        run = substr($1, 5) + 0; key = $3; unit[key] = $7; v[key, run] = $4
        if (!(key in seen)) { seen[key] = 1; order[++n] = key }
    }
    END {
        printf "%-36s %-9s", "key", "unit"
        for (r = 1; r <= runs; r++) printf " %11s", "run " r
        printf " %11s %8s\n", "median", "spread"
        for (i = 1; i <= n; i++) {
            k = order[i]; m = 0
            printf "%-36s %-9s", k, unit[k]
            for (r = 1; r <= runs; r++) {
                if ((k, r) in v) { printf " %11.3f", v[k, r]; x[++m] = v[k, r] + 0 }
                else printf " %11s", "-"
            }
            for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++)
                if (x[b] < x[a]) { t = x[a]; x[a] = x[b]; x[b] = t }
            med = m % 2 ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2
            spread = med != 0 ? 100 * (x[m] - x[1]) / med : 0
            printf " %11.3f %7.1f%%\n", med, spread
        }
    }'
if [ "$USE_LTTNG" = 1 ]; then
    printf '%s\n' "${DISCARDED[@]}"
    awk '$1 == "RESULT" && $2 == "lttng.disabled" {
        printf "LTTng-UST tracepoint with no session at all: %.3f ns/call (min %.3f, max %.3f)\n",
            $3, $4, $5 }' "$WORK/nosession.log"
fi
if [ -n "$LOG" ]; then
    cat "$WORK"/run-*.log "$WORK"/lttng-*.txt "$WORK"/nosession.log >"$LOG" 2>/dev/null || true
    echo "raw output kept in $LOG"
fi
