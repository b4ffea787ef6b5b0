#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for termsight and builds it. Safe to run again: packages
# already installed are left alone, and the build is incremental.
#
#   bash scripts/setup.sh [EXTRA CMAKE ARGS...]
#
# BUILD_DIR (default build) is the build tree; extra arguments go to the CMake configure step,
# e.g. BUILD_DIR=build-asan bash scripts/setup.sh -DTERMSIGHT_SANITIZE=address,undefined
# CUDA is not needed: CMake looks for it and builds the CUDA collection only where it is found.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}

# What the build needs, and what only some tests and tools need (the TUI tests drive tmux, the
# CPU checks compare with pidstat, the fuzz targets need clang, formatting needs clang-format).
required=(build-essential cmake pkg-config libncurses-dev libcjson-dev libisal-dev libsqlite3-dev libmicrohttpd-dev check zlib1g-dev python3)
optional=(tmux sysstat clang clang-format)
# TERMSIGHT_SETUP_TESTS=1 (scripts/test.sh sets it): what the tests need beyond the build, a
# real PyTorch for termsight.torch's integration test (Debian's CPU build, about 640 MB), Dask
# distributed for termsight.cluster's, chromium to load report.html headless, the sqlite3
# command to query report.sqlite, and prometheus (with promtool) to scrape termsight export.
if [ "${TERMSIGHT_SETUP_TESTS:-0}" = 1 ]; then
    required+=(python3-torch libtorch-dev python3-distributed chromium sqlite3 prometheus)
fi

log() { printf 'setup: %s\n' "$*"; }

installed() {
    [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

missing_of() {
    local p
    for p in "$@"; do
        installed "$p" || printf '%s\n' "$p"
    done
}

install_packages() {
    if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
        log "not a Debian system: install the equivalents of ${required[*]} yourself"
        return 0
    fi
    local missing_required missing_optional
    mapfile -t missing_required < <(missing_of "${required[@]}")
    mapfile -t missing_optional < <(missing_of "${optional[@]}")
    if [ "${#missing_required[@]}" -eq 0 ] && [ "${#missing_optional[@]}" -eq 0 ]; then
        log "packages present"
        return 0
    fi
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
            sudo=(sudo -n)
        else
            log "not root and no password-less sudo: cannot install packages"
        fi
    fi
    if [ "$(id -u)" -eq 0 ] || [ "${#sudo[@]}" -gt 0 ]; then
        # No tty and no stdin in CI: nothing may prompt. Required and optional packages are
        # installed apart, so that one optional package the mirror lacks blocks nothing else.
        export DEBIAN_FRONTEND=noninteractive
        local apt=("${sudo[@]}" apt-get -y -q -o Dpkg::Use-Pty=0)
        "${apt[@]}" update </dev/null || log "apt-get update failed"
        local set
        for set in "${missing_required[*]}" "${missing_optional[*]}"; do
            [ -n "$set" ] || continue
            log "installing: $set"
            # shellcheck disable=SC2086 # $set is a list of package names
            "${apt[@]}" install --no-install-recommends $set </dev/null ||
                log "apt-get install failed"
        done
    fi
    mapfile -t missing_required < <(missing_of "${required[@]}")
    if [ "${#missing_required[@]}" -gt 0 ]; then
        log "error: the build needs ${missing_required[*]}, which could not be installed" >&2
        exit 1
    fi
    mapfile -t missing_optional < <(missing_of "${optional[@]}")
    if [ "${#missing_optional[@]}" -gt 0 ]; then
        log "warning: ${missing_optional[*]} missing; what uses them (TUI tests, fuzz targets," \
            "formatting) cannot run" >&2
    fi
}

install_packages

log "configuring ${BUILD_DIR}${*:+ with $*}"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
log "building ${BUILD_DIR} with $(nproc) jobs"
cmake --build "$BUILD_DIR" -j"$(nproc)"
