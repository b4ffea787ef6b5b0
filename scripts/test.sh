#!/usr/bin/env bash
# Sets up and builds termsight (scripts/setup.sh, with the tests' packages: a real PyTorch for
# termsight.torch), then runs every test with ctest.
#
#   bash scripts/test.sh [EXTRA CMAKE ARGS...]
#
# BUILD_DIR (default build) is the build tree. Exits non-zero when a test fails or none is found.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}

# Warnings are errors in the project's own builds (a user's build only warns).
TERMSIGHT_SETUP_TESTS=1 bash scripts/setup.sh -DTERMSIGHT_WERROR=ON "$@"
ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error --timeout 900 -j2
