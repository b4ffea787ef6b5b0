#!/usr/bin/env bash
# The main job: set up and build termsight, then train the example MLP (examples/mlp_train.c)
# while termsight records it. On a terminal the training runs under the live monitor
# (`termsight top`: press q when you have seen enough; the training finishes on its own); without
# one (CI, a pipe, TERMSIGHT_HEADLESS=1) it runs headless. Either way the recording is analysed
# and the report summary printed.
#
#   bash scripts/main.sh [mlp_train options, e.g. --steps 2000 --hidden 256]
#
# BUILD_DIR (default build) is the build tree; TERMSIGHT_OUTPUT (default ./termsight-data) the
# folder that receives the run folder.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
OUTPUT=${TERMSIGHT_OUTPUT:-$PWD/termsight-data}
TERMSIGHT="$BUILD_DIR/cli/termsight"

section() { printf '\n==== %s\n' "$*"; }

section "set-up and build (scripts/setup.sh)"
bash scripts/setup.sh

# `termsight demo` (planned) will package this: the trainer under the monitor, with a headless
# form.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [ -t 0 ] && [ -t 1 ] && [ -z "${CI:-}" ] && [ "${TERMSIGHT_HEADLESS:-0}" != 1 ]; then
    section "training the example MLP under the live monitor (q quits the monitor)"
    "$BUILD_DIR/examples/mlp_train" --output "$OUTPUT" --steps 5000 "$@" >"$log" 2>&1 &
    trainer=$!
    "$TERMSIGHT" top "$trainer" || true
    if kill -0 "$trainer" 2>/dev/null; then
        echo "the monitor is closed; waiting for the training to finish (Ctrl-C stops it)"
    fi
    wait "$trainer"
    cat "$log"
else
    section "training the example MLP, recorded by termsight (headless)"
    "$BUILD_DIR/examples/mlp_train" --output "$OUTPUT" "$@" | tee "$log"
fi
run=$(sed -n 's/^run folder: //p' "$log")
if [ -z "$run" ] || [ ! -d "$run/recording" ]; then
    echo "main: the trainer reported no run folder with a recording" >&2
    exit 1
fi

section "what was recorded"
echo "run folder: $run"
ls -l "$run/recording"
grep '^events:' "$log"

section "$TERMSIGHT dump $run/recording | tail"
"$TERMSIGHT" dump "$run/recording" | tail

section "events in the recording, by kind (the third column of termsight dump)"
"$TERMSIGHT" dump "$run/recording" 2>/dev/null |
    awk '{ n[$3]++ } END { for (k in n) printf "%8d  %s\n", n[k], k }' | sort -rn

section "$TERMSIGHT analyse $run"
"$TERMSIGHT" analyse "$run"

section "$TERMSIGHT ls (the trainer has ended, so it is not listed)"
"$TERMSIGHT" ls
