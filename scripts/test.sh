#!/usr/bin/env bash
# Sets up and builds termsight (scripts/setup.sh, with the tests' packages: a real PyTorch for
# termsight.torch), then runs the default set of tests with ctest: every feature, with the soaks
# and sweeps at their short length (a few minutes on 2 cores). The long variants (ctest label
# "long": the same tests at full length, and the build outside the source tree) run with
# TERMSIGHT_TESTS=long, or both sets with TERMSIGHT_TESTS=all; CI runs both.
#
#   bash scripts/test.sh [EXTRA CMAKE ARGS...]
#
# BUILD_DIR (default build) is the build tree. Exits non-zero when a test fails or none is found.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}

# Warnings are errors in the project's own builds (a user's build only warns).
TERMSIGHT_SETUP_TESTS=1 bash scripts/setup.sh -DTERMSIGHT_WERROR=ON "$@"
case "${TERMSIGHT_TESTS:-default}" in
default) select=(-LE long) ;;
long) select=(-L long) ;;
all) select=() ;;
*)
    echo "TERMSIGHT_TESTS must be default, long or all (not '$TERMSIGHT_TESTS')" >&2
    exit 2
    ;;
esac
# Three at a time on two cores: many tests spend their time waiting (on timers, child programs,
# a scrape), and every test passes beside other work.
ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error --timeout 900 -j3 "${select[@]}"
