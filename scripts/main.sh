#!/usr/bin/env bash
# The main job: set up and build termsight, then `termsight demo`: a real CPU training run
# (examples/demo_train.c: an MLP fed by a threaded data pipeline) under the live monitor on a
# terminal (press q to stop it), or headless without one (CI, a pipe, TERMSIGHT_HEADLESS=1):
# recorded, analysed, the report summary printed.
#
#   bash scripts/main.sh [termsight demo options, e.g. --slow-map --workers 4 --seconds 20]
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

live=0
if [ -t 0 ] && [ -t 1 ] && [ -z "${CI:-}" ] && [ "${TERMSIGHT_HEADLESS:-0}" != 1 ]; then
    live=1
    section "termsight demo: a real training run under the live monitor (q stops it)"
    "$TERMSIGHT" demo -o "$OUTPUT" "$@"
else
    section "termsight demo --headless: a real training run, recorded and analysed"
    "$TERMSIGHT" demo --headless -o "$OUTPUT" "$@"
fi
# The newest run folder of the demo trainer.
run=$(find "$OUTPUT" -maxdepth 1 -type d -name 'demo_train-*' -printf '%T@ %p\n' | sort -n |
    tail -n 1 | cut -d' ' -f2-)
if [ -z "$run" ] || [ ! -d "$run/recording" ]; then
    echo "main: termsight demo left no run folder with a recording" >&2
    exit 1
fi
if [ "$live" = 1 ]; then
    section "$TERMSIGHT analyse $run"
    "$TERMSIGHT" analyse "$run"
fi

section "what was recorded"
echo "run folder: $run"
ls -l "$run/recording" "$run/report"

section "events in the recording, by kind (the third column of termsight dump)"
"$TERMSIGHT" dump "$run/recording" 2>/dev/null |
    awk '{ n[$3]++ } END { for (k in n) printf "%8d  %s\n", n[k], k }' | sort -rn

section "$TERMSIGHT ls (the trainer has ended, so it is not listed)"
"$TERMSIGHT" ls
