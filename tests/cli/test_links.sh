#!/bin/sh
# test_links: every command that takes or writes a folder works when that folder is reached
# through a symbolic link the user owns (runs -> a scratch disk, as clusters set up): run -o,
# a session's own output folder, analyse of a run and of a job (its report.sqlite too), diff,
# snapshot and hang of a flight recorder, export of its session. The folder named may itself be
# the link, or a link may sit above it.
#
# Environment: TERMSIGHT_BIN, MLP_TRAIN, TERMSIGHT_TEST_TMP (scratch folder).
# Exit status: 0 passed, 1 failed.
set -u
NAME=test_links
. "$(dirname "$0")/../lib.sh"
: "${TERMSIGHT_BIN:?TERMSIGHT_BIN is not set}"
: "${MLP_TRAIN:?MLP_TRAIN is not set}"
scratch links
T=$TERMSIGHT_BIN
train() { "$MLP_TRAIN" --batch 16 --hidden 16 "$@"; }

mkdir "$work/scratch" "$work/scratch/runs" && ln -s scratch "$work/home" &&
    ln -s scratch/runs "$work/runs" || fail "cannot make the links"
links=$work/home/runs # a link above the folder
named=$work/runs      # the folder named is the link

# run -o, and a session's own output folder, each way.
"$T" run -o "$links/a" -- "$MLP_TRAIN" --steps 60 --batch 16 --hidden 16 >"$work/run.log" 2>&1 ||
    fail "run -o through a link: $(cat "$work/run.log")"
"$T" run -o "$named" -- "$MLP_TRAIN" --steps 60 --batch 16 --hidden 16 >"$work/run2.log" 2>&1 ||
    fail "run -o naming a link: $(cat "$work/run2.log")"
train --steps 60 --output "$named" >"$work/own.log" 2>&1 || fail "a session under a link: $(cat "$work/own.log")"
[ "$(ls "$work/scratch/runs/a" | wc -l)" = 1 ] || fail "no run folder under $links/a"
[ "$(ls -d "$work"/scratch/runs/mlp_train-* | wc -l)" = 2 ] || fail "no run folders under $named"
ok "run -o and a session's output folder through links"

# analyse of run folders reached through links, then diff.
a=$(ls -d "$links"/a/*/) && b=$(ls -d "$named"/mlp_train-* | head -n 1) || fail "no run folders"
ln -s "$b" "$work/b" || fail "cannot link $b"
"$T" analyse "$a" >"$work/an.log" 2>&1 || fail "analyse $a: $(cat "$work/an.log")"
"$T" analyse "$work/b" >"$work/an2.log" 2>&1 || fail "analyse a linked run: $(cat "$work/an2.log")"
[ -f "${a}report/report.sqlite" ] && [ -f "$b/report/report.sqlite" ] || fail "no report.sqlite"
"$T" diff "$a" "$work/b" >"$work/diff.log" 2>&1 || fail "diff through links: $(cat "$work/diff.log")"
ok "analyse of run folders and diff through links"

# A 2-rank job under a link: its report and report.sqlite, and diff of the job with itself.
for r in 0 1; do
    TERMSIGHT_JOB=lj TERMSIGHT_RANK=$r TERMSIGHT_WORLD_SIZE=2 train --steps 60 --output "$links" \
        >"$work/rank$r.log" 2>&1 &
done
wait
"$T" analyse "$links/lj" >"$work/job.log" 2>&1 || fail "analyse of a job through a link: $(cat "$work/job.log")"
[ -f "$work/scratch/runs/lj/report/report.sqlite" ] || fail "the job report has no report.sqlite"
ln -s home/runs/lj "$work/jl" || fail "cannot link the job"
"$T" analyse --merge-only "$work/jl" >"$work/job2.log" 2>&1 || fail "analyse of a linked job: $(cat "$work/job2.log")"
"$T" diff "$work/jl" "$links/lj" >"$work/jdiff.log" 2>&1 || fail "diff of jobs: $(cat "$work/jdiff.log")"
ok "analyse of a job folder (report.sqlite too) and diff through links"

# A flight recorder whose output folder is behind a link: snapshot, hang and export find it.
"$T" run --flight -o "$links/f" -- "$MLP_TRAIN" --steps 100000000 --batch 16 --hidden 16 \
    >"$work/flight.log" 2>&1 &
runpid=$!
trap 'kill $runpid 2>/dev/null; rm -rf "$work"' EXIT
pid=
for _ in $(seq 100); do # its session up: at most 10 s
    pid=$("$T" ls 2>/dev/null | awk -v d="$work/scratch/runs/f/" 'index($NF, d) == 1 { print $1 }')
    [ -n "$pid" ] && break
    sleep 0.1
done
[ -n "$pid" ] || fail "the flight session under a link never showed in termsight ls"
"$T" snapshot --wait 20 "$pid" >"$work/snap.log" 2>&1 || fail "snapshot: $(cat "$work/snap.log")"
[ -d "$(ls -d "$links"/f/*/snapshots/*-request | head -n 1)" ] || fail "no snapshot folder"
"$T" hang --wait-s 1 "$pid" >"$work/hang.log" 2>&1
grep -q "flight-recorder snapshot: $work/scratch/runs/f/" "$work/hang.log" || fail "hang: $(cat "$work/hang.log")"
"$T" export --prometheus --listen 127.0.0.1:0 >"$work/export.log" 2>&1 &
expid=$!
trap 'kill $runpid $expid 2>/dev/null; rm -rf "$work"' EXIT
url=
for _ in $(seq 100); do
    url=$(grep -o 'http://[^ ]*/metrics' "$work/export.log") && break
    sleep 0.1
done
[ -n "$url" ] || fail "export did not start: $(cat "$work/export.log")"
# curl without a sanitizer build's preloaded runtime (under it, curl hangs past its --max-time).
env -u LD_PRELOAD -u ASAN_OPTIONS curl -sf --max-time 20 "$url" | grep -q "pid=\"$pid\"" ||
    fail "export does not serve the session"
ok "snapshot, hang and export of a flight session whose folder is behind a link"
