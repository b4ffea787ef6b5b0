#!/bin/sh
# test_docs: the man page, the bash completion, the README and docs/ say what the command does.
# Every command and every long option that `termsight COMMAND --help` lists is in termsight(1)
# and is completed by the bash completion for that command; every environment variable the
# sources read (TERMSIGHT_*, PROFILING_*) is in termsight(1). The README starts with the two
# commands CI runs, stays a page (at most 250 lines), and names every command; the README and
# docs/*.md together name every long option and every variable; every link between them
# reaches a file, and a heading where it names one; a page of docs/ over 150 lines has contents.
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
# The README is the page a newcomer reads first; docs/ holds the rest; all: the two as one text.
readme=$SOURCE_DIR/README.md
docs=$SOURCE_DIR/docs
[ -f "$readme" ] || fail "no README.md"
ls "$docs"/*.md >/dev/null 2>&1 || fail "no docs/*.md"
all=$(cat "$readme" "$docs"/*.md)
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
    grep -q "termsight $c\b" "$readme" || fail "the README does not name termsight $c"
    for opt in $("$TERMSIGHT_BIN" "$c" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
        [ "$opt" = "--help" ] && continue
        echo "$page" | grep -q -- "$opt" || fail "termsight(1) lacks $c's $opt"
        echo "$all" | grep -qE -- "$opt([^a-z-]|\$)" || fail "neither the README nor docs/ describe $c's $opt"
        got=$(bash -c '. "$1"; COMP_WORDS=(termsight "$2" --); COMP_CWORD=2; _termsight; printf "%s\n" "${COMPREPLY[@]}"' _ "$completion" "$c" -- 2>/dev/null)
        echo "$got" | grep -qx -- "$opt" || fail "the bash completion lacks $c's $opt"
    done
done
ok "every command's long options are in termsight(1), the bash completion and the README or docs/"
ok "the README names every command"
for v in $(grep -rhoE '"(TERMSIGHT|PROFILING)_[A-Z0-9_]+"' "$SOURCE_DIR/collectors" "$SOURCE_DIR/cli" \
    "$SOURCE_DIR/tui" "$SOURCE_DIR/python/termsight" | tr -d '"' | sort -u); do
    echo "$page" | grep -q "$v" || fail "termsight(1) does not describe $v"
    echo "$all" | grep -qw "$v" || fail "neither the README nor docs/ describe $v"
done
ok "every environment variable the sources read is in termsight(1) and in the README or docs/"
got=$(bash -c '. "$1"; COMP_WORDS=(termsight an); COMP_CWORD=1; _termsight; printf "%s\n" "${COMPREPLY[@]}"' _ "$completion")
[ "$got" = analyse ] || fail "completing 'an' gave '$got'"
ok "the completion completes commands"

# Its first code block is the two commands CI and the graders run, as they are.
first=$(awk '/^```/ { if (on) exit; on = 1; next } on' "$readme")
echo "$first" | grep -q '^bash scripts/main\.sh ' || fail "the README's first code block lacks bash scripts/main.sh"
echo "$first" | grep -q '^bash scripts/test\.sh ' || fail "the README's first code block lacks bash scripts/test.sh"
lines=$(wc -l <"$readme")
[ "$lines" -le 250 ] || fail "the README has $lines lines: what is not a first read belongs in docs/"
ok "the README starts with the two commands and stays a page ($lines lines)"
# A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens.
anchors() {
    awk '/^```/ { code = !code; next } !code && /^#+ / { sub(/^#+ /, ""); print }' "$1" |
        tr '[:upper:]' '[:lower:]' | sed -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'
}
links=0
for page in "$readme" "$docs"/*.md; do
    dir=$(dirname "$page")
    for link in $(grep -oE '\]\([^) ]+\)' "$page" | sed -e 's/^](//' -e 's/)$//'); do
        case $link in http://* | https://* | mailto:*) continue ;; esac
        file=${link%%#*}
        anchor=
        case $link in *#*) anchor=${link#*#} ;; esac
        target=$page
        [ -n "$file" ] && target=$dir/$file
        [ -e "$target" ] || fail "${page#"$SOURCE_DIR"/} links to $link: no such file"
        if [ -n "$anchor" ]; then
            anchors "$target" | grep -qx -- "$anchor" ||
                fail "${page#"$SOURCE_DIR"/} links to $link: no such heading"
        fi
        links=$((links + 1))
    done
done
[ "$links" -gt 0 ] || fail "the README links to nothing"
ok "the $links links of the README and docs/ reach their files and headings"
for page in "$docs"/*.md; do
    n=$(wc -l <"$page")
    [ "$n" -le 150 ] || grep -q '^Contents:' "$page" || fail "${page#"$SOURCE_DIR"/} has $n lines and no contents"
done
ok "every page of docs/ over 150 lines has its contents"
exit 0
