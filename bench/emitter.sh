# bench/emitter.sh: sourced by the scripts that watch bench_top_emit (bench_top.sh,
# bench_live.sh). It sets ROOT's build of the command and the emitter (TOP, EMIT; building them in
# Release in build-bench unless BUILD names a build that has them), a temporary WORK folder, and
# starts and removes the emitter: emitter_start RATE SECONDS, then EMITTER is its pid. Everything
# it started is removed on exit (also on Ctrl-C); a script adds its own removals in
# emitter_extra_cleanup. NAME names the script in messages.

WORK=""
EMITTER=""

emitter_extra_cleanup() { :; }

emitter_cleanup() {
    set +e
    emitter_extra_cleanup
    if [ -n "$EMITTER" ]; then
        kill "$EMITTER" 2>/dev/null
        wait "$EMITTER" 2>/dev/null
        rm -f /dev/shm/termsight-"$EMITTER"-*
    fi
    [ -n "$WORK" ] && rm -rf "$WORK"
}
trap emitter_cleanup EXIT
trap 'exit 130' INT TERM HUP

emitter_build() {
    if [ -z "$BUILD" ]; then
        BUILD="$ROOT/build-bench"
        cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
        cmake --build "$BUILD" --target termsight_cli bench_top_emit -j "$(nproc)" >/dev/null
    fi
    TOP="$BUILD/cli/termsight"
    EMIT="$BUILD/bench/bench_top_emit"
    for f in "$TOP" "$EMIT"; do
        [ -x "$f" ] || { echo "$NAME: $f is missing" >&2; exit 1; }
    done
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/termsight-$NAME.XXXXXX")
    echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
}

emitter_start() {
    "$EMIT" --rate "$1" --seconds "$2" --output "$WORK/out" >"$WORK/emit.log" 2>&1 &
    EMITTER=$!
    for _ in $(seq 100); do
        ls /dev/shm/termsight-"$EMITTER"-* >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "$NAME: the emitter made no session" >&2
    exit 1
}
