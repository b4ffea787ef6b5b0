#!/bin/sh
# test_docs: the man page and the bash completion say what the command does. Every command and
# every long option that `termsight COMMAND --help` lists is in termsight(1) and is completed by
# the bash completion for that command; every environment variable the sources read
# (TERMSIGHT_*, PROFILING_*) is in termsight(1).
#
# Environment: TERMSIGHT_BIN, SOURCE_DIR. Exit status: 0 passed, 1 failed, 77 skipped (no bash).
set -u
NAME=test_docs
. "$(dirname "$0")/../lib.sh"
: "${TERMSIGHT_BIN:?TERMSIGHT_BIN is not set}"
: "${SOURCE_DIR:?SOURCE_DIR is not set}"
command -v bash >/dev/null 2>&1 || {
    echo "test_docs: SKIP: no bash"
    exit 77
}
man_in=$SOURCE_DIR/packaging/termsight.1.in
completion=$SOURCE_DIR/packaging/termsight.bash-completion
# The page as text: roff's escaped minus signs and font changes undone.
page=$(sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$man_in")
# The commands as `termsight --help` lists them: each one in the page and the completion's list.
commands=$("$TERMSIGHT_BIN" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }')
[ -n "$commands" ] || fail "termsight --help lists no commands"
listed=$(bash -c '. "$1"; COMP_WORDS=(termsight ""); COMP_CWORD=1; _termsight; printf "%s\n" "${COMPREPLY[@]}"' _ "$completion")
helped=$(bash -c '. "$1"; COMP_WORDS=(termsight help ""); COMP_CWORD=2; _termsight; printf "%s\n" "${COMPREPLY[@]}"' _ "$completion")
for c in $commands; do
    echo "$listed" | grep -qx "$c" || fail "the bash completion does not complete the command $c"
    echo "$helped" | grep -qx "$c" || fail "the bash completion does not complete 'help $c'"
done
for c in $commands; do
    echo "$page" | grep -q "^\.B $c\b\|^\.B $c " || fail "termsight(1) has no entry for $c"
    for opt in $("$TERMSIGHT_BIN" "$c" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
        [ "$opt" = "--help" ] && continue
        echo "$page" | grep -q -- "$opt" || fail "termsight(1) lacks $c's $opt"
        got=$(bash -c '. "$1"; COMP_WORDS=(termsight "$2" --); COMP_CWORD=2; _termsight; printf "%s\n" "${COMPREPLY[@]}"' _ "$completion" "$c" -- 2>/dev/null)
        echo "$got" | grep -qx -- "$opt" || fail "the bash completion lacks $c's $opt"
    done
done
ok "every command's long options are in termsight(1) and in the bash completion"
for v in $(grep -rhoE '"(TERMSIGHT|PROFILING)_[A-Z0-9_]+"' "$SOURCE_DIR/collectors" "$SOURCE_DIR/cli" \
    "$SOURCE_DIR/tui" "$SOURCE_DIR/python/termsight" | tr -d '"' | sort -u); do
    echo "$page" | grep -q "$v" || fail "termsight(1) does not describe $v"
done
ok "every environment variable the sources read is in termsight(1)"
got=$(bash -c '. "$1"; COMP_WORDS=(termsight an); COMP_CWORD=1; _termsight; printf "%s\n" "${COMPREPLY[@]}"' _ "$completion")
[ "$got" = analyse ] || fail "completing 'an' gave '$got'"
ok "the completion completes commands"
exit 0
