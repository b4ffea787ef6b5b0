# lib.sh: what the shell tests share. Source it after setting NAME (the test's name, for its
# messages): fail and ok print a test's verdict lines, scratch TAG makes $work, a fresh folder
# under $TERMSIGHT_TEST_TMP (else /tmp) that is removed whatever way the test ends.

fail() {
    echo "$NAME: FAIL: $*"
    exit 1
}

ok() {
    echo "ok - $*"
}

scratch() {
    base=${TERMSIGHT_TEST_TMP:-/tmp}
    mkdir -p "$base" || exit 1
    work=$(mktemp -d "$base/$1.XXXXXX") || exit 1
    trap 'rm -rf "$work"' EXIT
    trap 'exit 1' INT TERM HUP
}
