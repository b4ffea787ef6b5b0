#!/bin/sh
# test_top_tmux: the real `termsight top` in a private tmux server (tmux's own regression-test
# style), against a real `mlp_train --no-start` process. The screen is read with capture-pane
# and every wait polls for the expected text, up to 30 s, instead of sleeping a fixed time.
#
# Checks: the header shows the process and "idle"; s turns it to "collecting"; panels show real
# op names; a writes the report folder; W/A/S/D move the timeline window; resizing keeps a valid
# screen (and says when it is too small); q restores the terminal (alternate screen left, the
# shell prompt back); colors step down 256 -> 8 -> none (NO_COLOR), LANG=C draws ASCII only,
# TERM=vt100 works; SIGTERM restores the terminal; SIGKILL of top leaves the trainer running
# with its session intact (a new top still commands it); several sessions of a name give a
# chooser; top waits for a session to appear, and says when its process ends; the ranks of a job
# are shown together and commanded together.
#
# Environment: TERMSIGHT_BIN, MLP_TRAIN (the programs), TERMSIGHT_TEST_TMP (scratch folder).
# Exit status: 0 passed, 1 failed, 77 skipped (no tmux).
set -u

if ! command -v tmux >/dev/null 2>&1; then
    echo "test_top_tmux: SKIP: tmux is not installed (apt-get install tmux); the TUI was not tested"
    exit 77
fi
: "${TERMSIGHT_BIN:?TERMSIGHT_BIN is not set}"
: "${MLP_TRAIN:?MLP_TRAIN is not set}"
base=${TERMSIGHT_TEST_TMP:-/tmp}
mkdir -p "$base" || exit 1
work=$(mktemp -d "$base/top-tmux.XXXXXX") || exit 1
sock="termsight-test-$$-${work##*.}"
socket=""
trainer=""
pids="" # every trainer started, for the cleanup

# The segments of a pid in /dev/shm ("termsight-<pid>-<random>"), one per line.
shm_of() {
    for f in /dev/shm/termsight-"$1"-*; do
        [ -e "$f" ] && echo "$f"
    done
}

t() {
    tmux -L "$sock" -f /dev/null "$@"
}

cleanup() {
    t kill-server 2>/dev/null
    [ -n "$socket" ] && rm -f "$socket" # tmux leaves it behind
    for p in $pids; do
        kill -9 "$p" 2>/dev/null
        wait "$p" 2>/dev/null
        # Killed, it could not remove its segment: remove those of its pid only (ls --clean
        # would take every stale segment of this user, other tests' included).
        shm_of "$p" | xargs -r rm -f
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

screen() {
    t capture-pane -p -t top
}

fail() {
    echo "test_top_tmux: FAIL: $*"
    echo "--- the screen:"
    screen 2>/dev/null
    echo "--- the trainer's output:"
    tail -5 "$work/train.log" 2>/dev/null
    exit 1
}

ok() {
    echo "ok - $*"
}

# Polls the screen until it shows $1 (a fixed string), up to $2 seconds (default 30: it returns
# as soon as the text shows, and a loaded machine redraws late).
wait_for() {
    i=0
    while [ "$i" -lt $((${2:-30} * 10)) ]; do
        screen | grep -qF -- "$1" && return 0
        sleep 0.1
        i=$((i + 1))
    done
    fail "waited ${2:-30} s for \"$1\""
}

# Polls until the screen no longer shows $1.
wait_gone() {
    i=0
    while [ "$i" -lt 300 ]; do
        screen | grep -qF -- "$1" || return 0
        sleep 0.1
        i=$((i + 1))
    done
    fail "waited 30 s for \"$1\" to go"
}

# The timeline's span as its title says it ("span 5.52 ms, ...").
span() {
    screen | sed -n 's/.*Timeline span \([^,]*\),.*/\1/p' | head -n 1
}

# Polls until the span differs from $1.
wait_span_change() {
    i=0
    while [ "$i" -lt 300 ]; do
        now=$(span)
        [ -n "$now" ] && [ "$now" != "$1" ] && return 0
        sleep 0.1
        i=$((i + 1))
    done
    fail "the timeline span stayed \"$1\""
}

top_pid() {
    pgrep -n -P "$(t display -p -t top '#{pane_pid}')"
}

# ---- A trainer waiting for a start command ---------------------------------------------------

# Run under a name of its own (the process name is the name it was started by), so that
# sessions of other tests running beside this one never match it.
name="tst$$"
ln -s "$MLP_TRAIN" "$work/$name" || exit 1

# Waits until the trainer just started ($started, described as $1) has its session.
wait_session() {
    pids="$pids $started"
    i=0
    while [ -z "$(shm_of "$started")" ]; do
        [ "$i" -lt 300 ] || fail "$1 made no profiler session in 30 s"
        kill -0 "$started" 2>/dev/null || fail "$1 ended"
        sleep 0.1
        i=$((i + 1))
    done
}

# Starts a trainer in the background; sets $started to its pid once its session exists.
start_trainer() {
    "$work/$name" --no-start --steps 100000 --hidden 32 --data-ms 5 --output "$work/out" >>"$work/train.log" 2>&1 &
    started=$!
    wait_session mlp_train
}

start_trainer
trainer=$started

# ---- A private tmux server with a plain shell ------------------------------------------------

t new-session -d -s top -x 120 -y 40 "PS1='ts-prompt\$ ' exec sh" || fail "tmux new-session"
socket=$(t display -p '#{socket_path}')
wait_for 'ts-prompt$'
t send-keys -t top "$TERMSIGHT_BIN top $trainer" Enter
wait_for "pid $trainer"
wait_for "$name"
screen | head -n 1 | grep -qF "idle" || fail "the header does not say idle"
wait_for "1 Overview"
wait_for "press F5 (or c) to start"
[ "$(t display -p -t top '#{alternate_on}')" = 1 ] || fail "top did not use the alternate screen"
ok "the header shows the trainer ($name), its pid and idle"

wait_for "F5Collect"
t send-keys -t top F5
wait_for "collecting"
wait_for "start: ok"
wait_for "F5Stop"
ok "F5 starts collecting; the key bar then offers Stop"

wait_for "MatMul"
wait_for "BiasAdd"
wait_for "batch_queue"
wait_for "Default/"
wait_for "avg step"
ok "panels show the trainer's ops, queue and steps"

t send-keys -t top F6
wait_for "Run the analysis?"
t send-keys -t top n
wait_gone "Run the analysis?"
t send-keys -t top r
wait_for "Run the analysis?"
t send-keys -t top y
wait_for "report written:"
wait_for "Report folder:"
run=""
for d in "$work"/out/*-"$trainer"-*; do
    [ -d "$d" ] && run=$d
done
[ -n "$run" ] || fail "no run folder under $work/out"
[ -f "$run/report/summary.json" ] || fail "no $run/report/summary.json"
[ -f "$run/report/op_statistics.csv" ] || fail "no $run/report/op_statistics.csv"
t send-keys -t top x
wait_gone "Report folder:"
ok "F6 asks, n cancels, r then y writes the report folder ($run/report)"

t send-keys -t top p
wait_for "keeps no flight recorder"
ok "p (a flight-recorder snapshot) on a session that keeps none says so"

t send-keys -t top 6
wait_for "Timeline span"
before=$(span)
t send-keys -t top W
wait_span_change "$before"
zoomed=$(span)
wait_for "following the latest"
t send-keys -t top a
wait_for "before the latest"
t send-keys -t top d d d d d d
wait_for "following the latest"
t send-keys -t top s
wait_span_change "$zoomed"
screen | head -n 1 | grep -qF "collecting" || fail "a navigation key changed the run"
ok "W/s zoom ($before -> $zoomed -> $(span)), a/d move the timeline window; still collecting"

t send-keys -t top 1
wait_for "Data queues"
t resize-window -t top -x 80 -y 24
wait_for "Step trace"
i=0
while [ "$i" -lt 100 ]; do
    lines=$(screen | wc -l)
    [ "$lines" -eq 24 ] && break
    sleep 0.1
    i=$((i + 1))
done
for part in "$name" "1 Overview" "Step trace" "Operators" "Data queues" "CPU and memory" \
    "Timeline" "F1Help" "F10Quit"; do
    wait_for "$part"
done
t resize-window -t top -x 60 -y 20
wait_for "terminal too small: 60x20"
t resize-window -t top -x 120 -y 40
wait_gone "terminal too small"
wait_for "6 Timeline"
wait_for "Data queues"
ok "resizing to 80x24 keeps every panel; 60x20 says too small; back to 120x40"

# Every screen at 80x24, 100x30 and 200x60: its title, the tabs and the key bar, and on the
# Queues screen a head of whole words.
for size in 80x24 100x30 200x60; do
    t resize-window -t top -x "${size%x*}" -y "${size#*x}"
    for screen in "1 Data queues" "2 Step trace" "3 Operators" "4 Data queues" \
        "5 CPU and memory" "6 Timeline" "7 Ranks"; do
        t send-keys -t top "${screen%% *}"
        wait_for "${screen#* }"
        wait_for "F10Quit"
        wait_for "1 Overview"
        screen | grep -qF "terminal too small" && fail "$size: screen ${screen%% *} too small"
        if [ "${screen%% *}" = 4 ]; then
            wait_for " QUEUE "
            head=$(screen | grep -F " QUEUE " | head -n 1)
            for word in $head; do
                case "$word" in
                QUEUE | ROLE | USAGE | OVER | TIME | "(newest" | "right)" | AVG | EMPTY | VERDICT) ;;
                *) fail "$size: the Queues head has \"$word\": $head" ;;
                esac
            done
        fi
    done
done
t resize-window -t top -x 120 -y 40
t send-keys -t top 1
wait_for "Data queues"
ok "every screen at 80x24, 100x30 and 200x60 has its title, the tabs and the key bar"

t send-keys -t top q
wait_gone "1 Overview"
wait_for 'ts-prompt$'
[ "$(t display -p -t top '#{alternate_on}')" = 0 ] || fail "q left the alternate screen on"
kill -0 "$trainer" 2>/dev/null || fail "the trainer ended when top quit"
ok "q restores the terminal; the trainer goes on"

# Colors step down with the terminal: 256 colors for xterm-256color, 8 for screen.
esc=$(printf '\033')
t send-keys -t top "TERM=xterm-256color $TERMSIGHT_BIN top $trainer" Enter
wait_for "MatMul"
t capture-pane -e -p -t top | grep -qF "${esc}[38;5;" || fail "no 256-color codes for xterm-256color"
t send-keys -t top q
wait_for 'ts-prompt$'
t send-keys -t top "TERM=screen $TERMSIGHT_BIN top $trainer" Enter
wait_for "MatMul"
t capture-pane -e -p -t top | grep -qE "$esc\[3[0-7]m" || fail "no 8-color codes for TERM=screen"
if t capture-pane -e -p -t top | grep -qF "${esc}[38;5;"; then
    fail "256-color codes for TERM=screen (8 colors)"
fi
t send-keys -t top q
wait_for 'ts-prompt$'
ok "colors: 256 for xterm-256color, 8 for screen"

t send-keys -t top "LANG=C LC_ALL=C NO_COLOR=1 $TERMSIGHT_BIN top $name" Enter
wait_for "collecting"
wait_for "MatMul"
if screen | LC_ALL=C grep -q '[^ -~]'; then
    fail "LANG=C drew characters outside ASCII"
fi
screen | grep -qF -- "- Step trace" || fail "no ASCII rule in the titles"
# Monochrome: attributes (bold, dim, underline, reverse) and no color at all.
if t capture-pane -e -p -t top | grep -qE "$esc\[([34][0-7]|[34]8;5;[0-9]+)m"; then
    fail "NO_COLOR drew colors"
fi
t capture-pane -e -p -t top | grep -qF "${esc}[7m" || fail "NO_COLOR: no reverse video"
ok "LANG=C and NO_COLOR: ASCII glyphs and attributes only (attached by process name)"

# A termination signal restores the terminal too.
pid=$(top_pid)
[ -n "$pid" ] || fail "cannot find the top process"
kill -TERM "$pid"
wait_for 'ts-prompt$'
wait_gone "1 Overview"
[ "$(t display -p -t top '#{alternate_on}')" = 0 ] || fail "SIGTERM left the alternate screen on"
ok "SIGTERM restores the terminal"

# A terminal without colors or an alternate screen (plain SSH with TERM=vt100).
t send-keys -t top "TERM=vt100 $TERMSIGHT_BIN top $trainer" Enter
wait_for "1 Overview"
wait_for "MatMul"
t send-keys -t top q
wait_for 'ts-prompt$'
t send-keys -t top "clear" Enter
wait_gone "1 Overview"
ok "TERM=vt100 works"

t send-keys -t top "$TERMSIGHT_BIN top $name" Enter
wait_for "collecting"
wait_for "MatMul"

pid=$(top_pid)
[ -n "$pid" ] || fail "cannot find the top process"
kill -9 "$pid"
sleep 0.5
kill -0 "$trainer" 2>/dev/null || fail "the trainer ended when top was killed"
# ls columns: PID PROCESS RANK STATE EVENTS ...
events1=$("$TERMSIGHT_BIN" ls | awk -v p="$trainer" '$1 == p { print $4 " " $5 }')
sleep 1
events2=$("$TERMSIGHT_BIN" ls | awk -v p="$trainer" '$1 == p { print $4 " " $5 }')
case "$events1" in collecting*) ;; *) fail "after SIGKILL of top, ls says \"$events1\"" ;; esac
[ "$events1" != "$events2" ] || fail "the trainer stopped recording after top was killed"
# The terminal was left raw: a new line with C-j, stty sane, then a new top commands it.
t send-keys -t top C-j "stty sane" C-j
t send-keys -t top "clear" C-j
wait_gone "Step trace"
t send-keys -t top "$TERMSIGHT_BIN top $trainer" C-j
wait_for "collecting"
t send-keys -t top c
wait_for "Stop collecting?"
t send-keys -t top y
wait_for "stop: ok"
wait_for "stopped"
t send-keys -t top q
wait_for 'ts-prompt$'
ok "SIGKILL of top: the trainer runs on, recording; a new top stops it"

# Two sessions of the name: a chooser, the newest first; Enter attaches to it.
start_trainer
second=$started
t send-keys -t top "$TERMSIGHT_BIN top $name" C-j
wait_for "several live sessions"
wait_for "$second"
t send-keys -t top Enter
wait_for "pid $second"
wait_for "idle"
t send-keys -t top q
wait_for 'ts-prompt$'
kill -9 "$second"
wait "$second" 2>/dev/null
shm_of "$second" | xargs -r rm -f
ok "several sessions of one name: a chooser"

# top waits for a session that does not exist yet; it appears, trains and ends; the last data
# stays on the screen.
late="tsl$$"
ln -s "$MLP_TRAIN" "$work/$late" || exit 1
t send-keys -t top "$TERMSIGHT_BIN top $late" C-j
wait_for "Waiting for a profiler session of '$late' to appear"
wait_for "termsight run -- python3 train.py"
"$work/$late" --steps 300 --output "$work/out" >>"$work/train.log" 2>&1 &
late_pid=$!
wait_for "pid $late_pid"
wait_for "MatMul"
wait_for "ended" 240 # 300 steps: under a second, a few under sanitizers on a loaded machine
wait_for "its last data stays on the screen"
screen | grep -qF "MatMul" || fail "the last data went when the process ended"
wait "$late_pid" || fail "the late trainer failed"
t send-keys -t top q
wait_for 'ts-prompt$'
ok "waits for a session to appear; says when it ends and keeps its data"

# top PID for a process that has not opened its session yet (a training just launched: here a
# shell that sleeps, then becomes the trainer under the same pid) waits for it; a pid with no
# process is refused.
sh -c 'sleep 1; exec "$0" --steps 2000 --output "$1" >>"$2" 2>&1' "$work/$late" "$work/out" \
    "$work/train.log" &
early_pid=$!
t send-keys -t top "$TERMSIGHT_BIN top $early_pid" C-j
wait_for "Waiting for process $early_pid to start its profiler session"
wait_for "pid $early_pid"
# 2000 steps: 2 s here, 80 s seen under ASan on a loaded 2-core machine (40 ms a step).
wait_for "ended" 240
wait "$early_pid" || fail "the trainer started late failed"
t send-keys -t top q
wait_for 'ts-prompt$'
t send-keys -t top "$TERMSIGHT_BIN top $early_pid; echo status=\$?" C-j
wait_for "process $early_pid is not running"
wait_for "status=1"
ok "top PID waits for that process's session, and refuses a pid that is not running"

# A job: three ranks of one job on this machine. Attached to one, top shows them all (screen 7),
# s starts every rank, Enter on a row shows that rank, a analyses every rank and merges the job
# report, --job ID finds the job (and says when there is none).
job="tj$$"
start_rank() {
    TERMSIGHT_JOB=$job TERMSIGHT_RANK=$1 TERMSIGHT_LOCAL_RANK=$1 TERMSIGHT_WORLD_SIZE=3 \
        "$work/$name" --no-start --steps 100000 --hidden 32 --data-ms 5 --output "$work/jobout" >>"$work/train.log" 2>&1 &
    started=$!
    wait_session "rank $1"
}
# Rank 0 has a worker process: a child started before the shell becomes the trainer (exec), so
# that the trainer is its parent.
TERMSIGHT_JOB=$job TERMSIGHT_RANK=0 TERMSIGHT_LOCAL_RANK=0 TERMSIGHT_WORLD_SIZE=3 \
    sh -c 'sleep 300 & exec "$0" --no-start --steps 100000 --hidden 32 --data-ms 5 --output "$1" >>"$2" 2>&1' \
    "$work/$name" "$work/jobout" "$work/train.log" &
started=$!
wait_session "rank 0"
rank0=$started
worker=$(cat /proc/"$rank0"/task/*/children 2>/dev/null | tr ' ' '\n' | grep . | head -n 1)
[ -n "$worker" ] || fail "rank 0 has no child process"
pids="$pids $worker"
start_rank 1
rank1=$started
start_rank 2
rank2=$started
# ls columns: PID PROCESS RANK STATE ...
state_of() {
    "$TERMSIGHT_BIN" ls | awk -v p="$1" '$1 == p { print $4 }'
}
t send-keys -t top "$TERMSIGHT_BIN top $rank1" C-j
wait_for "pid $rank1"
wait_for "rank 1 of job $job"
t send-keys -t top 7
wait_for "job $job: 3 ranks on this machine of 3"
for p in "$rank0" "$rank1" "$rank2"; do
    wait_for " $p "
done
ok "attached to rank 1 of a job, the Ranks screen lists its three ranks"

t send-keys -t top F5
wait_for "start: 3 of 3 ranks acknowledged"
for p in "$rank0" "$rank1" "$rank2"; do
    i=0
    while [ "$(state_of "$p")" != collecting ]; do
        [ "$i" -lt 100 ] || fail "after F5, ls says pid $p is \"$(state_of "$p")\""
        sleep 0.1
        i=$((i + 1))
    done
done
wait_for "straggler" # "no verdict until ...", "none", or the straggler
ok "F5 starts collecting on every rank (ls says so of each)"

t send-keys -t top Down Enter
wait_for "pid $rank2"
wait_for "showing rank 2, pid $rank2"
wait_for "MatMul"
ok "Enter on a rank's row shows that rank"

# Rank 0's CPU screen lists its worker process (sampled from the rank, loading nothing).
t send-keys -t top 7 Home Enter
wait_for "showing rank 0, pid $rank0"
t send-keys -t top 5
wait_for "sleep" 30
wait_for "$worker" 30
ok "rank 0's CPU screen lists its worker process (pid $worker)"

t send-keys -t top F6
wait_for "Run the analysis?"
t send-keys -t top y
wait_for "Job report:" 120
[ -f "$work/jobout/$job/report/summary.json" ] || fail "no job report under $work/jobout/$job"
for p in "$rank0" "$rank1" "$rank2"; do
    ls -d "$work/jobout/$job"/rank*-"$p"-*/report >/dev/null 2>&1 || fail "no report of pid $p"
done
t send-keys -t top x
wait_gone "Job report:"
ok "F6 then y analyses every rank and merges the job report"

t send-keys -t top F5
wait_for "Stop collecting?"
t send-keys -t top F5
wait_for "stop: 3 of 3 ranks acknowledged"
t send-keys -t top q
wait_for 'ts-prompt$'
"$TERMSIGHT_BIN" top --job "$job" --once >"$work/once.txt" 2>&1 || fail "top --job --once failed"
grep -qF "job $job: 3 ranks on this machine of 3" "$work/once.txt" ||
    fail "top --job --once: no ranks table: $(cat "$work/once.txt")"
"$TERMSIGHT_BIN" top --job "$job" --once --json >"$work/once.json" 2>&1 ||
    fail "top --job --once --json failed"
grep -qF '"ranks"' "$work/once.json" || fail "top --job --once --json: no ranks"
if "$TERMSIGHT_BIN" top --job "none$$" --once >"$work/none.txt" 2>&1; then
    fail "top --job for no such job succeeded"
fi
grep -qF "no sessions of job none$$ on this machine" "$work/none.txt" ||
    fail "top --job for no such job: $(cat "$work/none.txt")"
ok "top --job ID --once prints the ranks; a job with no session here is an error"

# ---- The flight recorder: p writes a snapshot --------------------------------------------------

TERMSIGHT_FLIGHT=1 "$work/$name" --steps 100000 --hidden 32 --data-ms 5 --output "$work/flight" >>"$work/train.log" 2>&1 &
started=$!
wait_session "mlp_train in flight mode"
flyer=$started
t send-keys -t top "$TERMSIGHT_BIN top $flyer" Enter
wait_for "pid $flyer"
wait_for "avg step"
wait_for "flight"
t send-keys -t top F6
wait_for "Run the analysis?"
t send-keys -t top y
wait_for "p takes a snapshot"
t send-keys -t top p
wait_for "snapshot: /"
# (A slow step of the trainer's may have taken a snapshot of its own first: NN is not always 01.)
snap=$(ls -d "$work"/flight/*-"$flyer"-*/snapshots/*-request 2>/dev/null | head -n 1)
[ -n "$snap" ] && [ -f "$snap/recording/events.tsr" ] ||
    fail "p in flight mode: no snapshot folder under $work/flight"
"$TERMSIGHT_BIN" analyse "$snap" >/dev/null 2>&1 || fail "the snapshot does not analyse"
t send-keys -t top q
wait_for 'ts-prompt$'
ok "p in flight mode writes a snapshot under the run folder's snapshots/, which analyses"

echo "test_top_tmux: all passed"
