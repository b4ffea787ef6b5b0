#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, ASan and UBSan, TERMSIGHT_FUZZ) and runs
# each for a bounded time from a copy of its seed corpus, so that the repository's corpus is
# never written to. Fails (exit 1) on any crash, leak, timeout or out-of-memory, and prints per
# target: seconds, executions, executions per second, crashes, corpus size at the end.
#
#   FUZZ_SECONDS=30 bash scripts/fuzz.sh [TARGET...]
#
# FUZZ_SECONDS (default 30) is each target's time; BUILD_DIR (default build-fuzz) the build tree,
# which also keeps each target's run under fuzz-runs/<target>/ (log, corpus copy, and the input
# of a crash in artifacts/). Replay a crash: build-fuzz/tests/fuzz/<target> <artifact file>.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build-fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
JOBS=${FUZZ_JOBS:-2}

log() { printf 'fuzz: %s\n' "$*"; }

all_targets=(fuzz_recording fuzz_segment fuzz_nvtx fuzz_procfs fuzz_options fuzz_tui_canvas)
for a in "$@"; do
    case " ${all_targets[*]} " in
    *" $a "*) ;;
    *)
        case $a in
        -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        esac
        log "error: unknown target '$a' (the targets: ${all_targets[*]})" >&2
        exit 2
        ;;
    esac
done

if ! command -v clang >/dev/null; then
    log "error: the fuzz targets need clang (bash scripts/setup.sh installs it)" >&2
    exit 1
fi
case $FUZZ_SECONDS in
'' | *[!0-9]*)
    log "error: FUZZ_SECONDS=$FUZZ_SECONDS is not a whole number of seconds" >&2
    exit 1
    ;;
esac

# Only the fuzz targets are built: the rest of the tree has its own builds.
log "configuring ${BUILD_DIR} (clang, address,undefined, TERMSIGHT_FUZZ)"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DTERMSIGHT_SANITIZE=address,undefined -DTERMSIGHT_FUZZ=ON -DTERMSIGHT_WERROR=ON >/dev/null
log "building the fuzz targets with ${JOBS} jobs"
cmake --build "$BUILD_DIR" -j"$JOBS" --target fuzz_targets >/dev/null

targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    targets=("${all_targets[@]}")
fi

# Stats from libFuzzer's -print_final_stats lines.
stat_of() { sed -n "s/^stat::$1: *//p" "$2" | tail -n 1; }

failed=0
printf '%-16s %8s %12s %10s %8s %8s\n' target seconds executions exec/s crashes corpus
for t in "${targets[@]}"; do
    bin=$BUILD_DIR/tests/fuzz/$t
    if [ ! -x "$bin" ]; then
        # fuzz_nvtx needs the NVTX v3 headers, as the NVTX injection does.
        log "$t: not built here (see the CMake configure output), skipped"
        continue
    fi
    run=$BUILD_DIR/fuzz-runs/$t
    rm -rf "$run"
    mkdir -p "$run/corpus" "$run/artifacts"
    if [ -d "tests/fuzz/corpus/$t" ]; then
        cp tests/fuzz/corpus/"$t"/* "$run/corpus/"
    fi
    rc=0
    # -close_fd_mask=3: the targets' own messages (usage errors by the thousand) are not shown;
    # libFuzzer's and the sanitizers' reports still are, in the log.
    "$bin" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -close_fd_mask=3 \
        -print_final_stats=1 -artifact_prefix="$run/artifacts/" "$run/corpus" \
        >"$run/log" 2>&1 || rc=$?
    execs=$(stat_of number_of_executed_units "$run/log")
    rate=$(stat_of average_exec_per_sec "$run/log")
    crashes=$(find "$run/artifacts" -type f | wc -l)
    corpus=$(find "$run/corpus" -type f | wc -l)
    printf '%-16s %8s %12s %10s %8s %8s\n' "$t" "$FUZZ_SECONDS" "${execs:-?}" "${rate:-?}" \
        "$crashes" "$corpus"
    if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
        failed=1
        log "$t FAILED (exit $rc); the end of $run/log:" >&2
        tail -n 40 "$run/log" >&2
        find "$run/artifacts" -type f -exec printf 'fuzz: input: %s\n' {} \; >&2
    fi
done
exit "$failed"
