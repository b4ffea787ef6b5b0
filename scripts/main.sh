#!/usr/bin/env bash
# The main job: set up and build termsight, train the example MLP (examples/mlp_train.c) while
# termsight records it, and show what was recorded.
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

# The trainer records on its own here, and the recording is dumped afterwards. When
# `termsight demo` exists (the trainer under the live monitor, with a headless form for CI), it
# replaces the two sections below.
section "training the example MLP, recorded by termsight"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$BUILD_DIR/examples/mlp_train" --output "$OUTPUT" "$@" | tee "$log"
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
