#!/bin/sh
# test_report_sqlite: report.sqlite, checked with Debian's sqlite3 command. mlp_train records a
# run and a 2-rank job; termsight analyse writes their reports. Each table holds as many rows as
# its CSV file (counted by sqlite3's own CSV import, not by termsight's reader), the columns
# have their declared types, and the README's example queries (the views slowest_steps,
# top_ops_per_step, step_stragglers) answer what the CSV files say. --sqlite-only writes the
# same database row by row, and no CSV file. A write that fails half-way (a file-size limit) fails the analyse
# and leaves the earlier report, its database whole, in place; no temporary file remains.
#
# Environment: TERMSIGHT_BIN, MLP_TRAIN, TERMSIGHT_TEST_TMP (scratch folder).
# Exit status: 0 passed, 1 failed, 77 skipped (no sqlite3 command).
set -u
NAME=test_report_sqlite
. "$(dirname "$0")/../lib.sh"

if ! command -v sqlite3 >/dev/null 2>&1; then
    echo "$NAME: SKIP: the sqlite3 command is not installed (apt-get install sqlite3)"
    exit 77
fi
: "${TERMSIGHT_BIN:?TERMSIGHT_BIN is not set}"
: "${MLP_TRAIN:?MLP_TRAIN is not set}"
scratch report-sqlite

q() { # q DB SQL: one value
    sqlite3 -batch "$1" "$2" || fail "sqlite3 $1: $2"
}

# Rows of a CSV file (header aside), as sqlite3's CSV import counts them.
csv_rows() {
    rm -f "$work/count.db"
    sqlite3 -batch "$work/count.db" ".import --csv '$1' t" "SELECT count(*) FROM t" ||
        fail "sqlite3 cannot import $1"
}

# check_tables REPORT_FOLDER FILE:TABLE...: each CSV's rows equal its table's.
check_tables() {
    total=0
    dir=$1
    shift
    for pair in "$@"; do
        file=${pair%%:*}
        table=${pair#*:}
        [ -f "$dir/$file" ] || fail "no $dir/$file"
        want=$(csv_rows "$dir/$file")
        got=$(q "$dir/report.sqlite" "SELECT count(*) FROM $table")
        [ "$want" = "$got" ] || fail "$table has $got rows, $file $want"
        total=$((total + got))
    done
}

"$MLP_TRAIN" --steps 1500 --batch 64 --hidden 64 --output "$work/out" >"$work/train.log" 2>&1 ||
    fail "mlp_train failed: $(cat "$work/train.log")"
run=$(ls -d "$work"/out/*/ | head -n 1)
[ -n "$run" ] || fail "no run folder under $work/out"
"$TERMSIGHT_BIN" analyse "$run" >"$work/analyse.log" 2>&1 ||
    fail "analyse failed: $(cat "$work/analyse.log")"
rep=${run}report
db=$rep/report.sqlite
[ -f "$db" ] || fail "no $db"
[ "$(q "$db" "PRAGMA integrity_check")" = ok ] || fail "$db fails its integrity check"

check_tables "$rep" step_trace.csv:steps overlap.csv:overlap step_ops.csv:step_ops \
    op_statistics.csv:operators op_type_statistics.csv:operator_types \
    data_queues.csv:queues data_queue_usage.csv:queue_usage cpu_utilization.csv:cpu \
    cpu_threads.csv:cpu_threads cpu_processes.csv:cpu_processes memory.csv:memory \
    memory_allocations.csv:memory_allocations flops.csv:flops
[ "$(q "$db" "SELECT count(*) FROM steps")" -ge 1000 ] || fail "steps holds fewer than 1000 rows"
[ "$(q "$db" "SELECT count(*) FROM kernels")" = "$(csv_rows "$rep/kernel_statistics.csv")" ] ||
    fail "kernels' rows differ from kernel_statistics.csv's"
ok "every table of a run's report.sqlite has its CSV's rows"

types=$(q "$db" "SELECT typeof(step) || typeof(total_us) || typeof(source) FROM steps LIMIT 1")
[ "$types" = integerrealtext ] || fail "steps' step, total_us, source are $types"
idx=$(q "$db" "SELECT count(*) FROM sqlite_master WHERE type='index' AND tbl_name='step_ops'")
[ "$idx" -ge 2 ] || fail "step_ops has $idx indexes"
ok "columns typed, tables indexed"

# The README's queries against the CSV files, imported independently.
sqlite3 -batch "$work/csv.db" ".import --csv '$rep/step_trace.csv' st" \
    ".import --csv '$rep/step_ops.csv' so" || fail "cannot import the CSV files"
want=$(q "$work/csv.db" "SELECT step FROM st ORDER BY CAST(total_us AS REAL) DESC, CAST(step AS INTEGER) LIMIT 1")
got=$(q "$db" "SELECT step FROM slowest_steps LIMIT 1")
[ "$want" = "$got" ] || fail "slowest_steps' first is step $got, step_trace.csv's slowest $want"
split=$(q "$db" "SELECT interval_us + compute_us + comm_wait_us + tail_us + eval_us >= 0.99 * total_us FROM slowest_steps LIMIT 1")
[ "$split" = 1 ] || fail "slowest_steps' split does not add up to its total"
step=$(q "$db" "SELECT step FROM steps ORDER BY step LIMIT 1 OFFSET 10")
want=$(q "$work/csv.db" "SELECT op FROM so WHERE step = '$step' ORDER BY CAST(total_us AS REAL) DESC, op LIMIT 1")
got=$(q "$db" "SELECT op FROM top_ops_per_step WHERE step = $step AND place = 1")
[ -n "$want" ] && [ "$want" = "$got" ] ||
    fail "top_ops_per_step names '$got' first in step $step, step_ops.csv '$want'"
n=$(q "$db" "SELECT count(*) FROM top_ops_per_step WHERE step = $step")
m=$(q "$work/csv.db" "SELECT count(*) FROM so WHERE step = '$step'")
[ "$n" = "$m" ] || fail "top_ops_per_step has $n rows for step $step, step_ops.csv $m"
top=$(q "$db" "SELECT op, avg(total_us), max(total_us) - min(total_us) AS spread FROM step_ops GROUP BY op ORDER BY spread DESC LIMIT 5" | wc -l)
[ "$top" = 5 ] || fail "the README's spread query gave $top rows"
ok "slowest_steps and top_ops_per_step answer as the CSV files do"

# --sqlite-only: the database, no CSV file; the same rows.
steps=$(q "$db" "SELECT count(*) FROM steps")
"$TERMSIGHT_BIN" analyse --sqlite-only -o "$work/only" "$run" >"$work/only.log" 2>&1 ||
    fail "analyse --sqlite-only failed: $(cat "$work/only.log")"
[ -f "$work/only/report.sqlite" ] || fail "--sqlite-only wrote no report.sqlite"
ls "$work/only" | grep -q '\.csv$' && fail "--sqlite-only left CSV files: $(ls "$work/only")"
grep -q '\.csv' "$work/only/summary.json" && fail "summary.json lists CSV files it lacks"
[ "$(q "$work/only/report.sqlite" "SELECT count(*) FROM steps")" = "$steps" ] ||
    fail "--sqlite-only's steps differ"
# Written row by row instead of from CSV files, the database holds the same rows and values.
sqlite3 -batch "$db" .dump | sort >"$work/csv.dump"
sqlite3 -batch "$work/only/report.sqlite" .dump | sort >"$work/only.dump"
cmp -s "$work/csv.dump" "$work/only.dump" ||
    fail "--sqlite-only's database differs: $(diff "$work/csv.dump" "$work/only.dump" | head -n 4)"
ok "--sqlite-only writes report.sqlite, the same database, and no CSV file"

# A write cut short: a file-size limit below the database's size (the timeline kept small, so
# the database is the largest file). analyse fails; the earlier report stays whole.
"$TERMSIGHT_BIN" analyse --timeline-limit 1 -o "$work/cut" "$run" >/dev/null 2>&1 ||
    fail "analyse -o $work/cut failed"
before=$(cksum <"$work/cut/report.sqlite")
size=$(wc -c <"$work/cut/report.sqlite")
other=$(for f in "$work"/cut/*; do [ "$f" = "$work/cut/report.sqlite" ] || wc -c <"$f"; done | sort -n | tail -n 1)
[ "$size" -gt $((other + 65536)) ] || fail "report.sqlite ($size bytes) is not the largest file ($other)"
kb=$(((size + other) / 2 / 1024))
(
    trap '' XFSZ
    ulimit -f "$kb"
    exec "$TERMSIGHT_BIN" analyse --timeline-limit 1 -o "$work/cut" "$run"
) >"$work/cut.log" 2>&1 && fail "analyse succeeded under a ${kb} KiB file-size limit"
grep -q 'report.sqlite' "$work/cut.log" || fail "the failure does not name report.sqlite: $(cat "$work/cut.log")"
[ "$(cksum <"$work/cut/report.sqlite")" = "$before" ] || fail "the earlier report.sqlite was changed"
[ "$(q "$work/cut/report.sqlite" "PRAGMA integrity_check")" = ok ] || fail "the earlier database is damaged"
left=$(ls -a "$work" | grep -c 'tmp')
[ "$left" = 0 ] || fail "temporary files left: $(ls -a "$work")"
# The same with --sqlite-only, where the rows go to the database as the analysis goes.
(
    trap '' XFSZ
    ulimit -f "$kb"
    exec "$TERMSIGHT_BIN" analyse --sqlite-only --timeline-limit 1 -o "$work/cut" "$run"
) >"$work/cut2.log" 2>&1 && fail "analyse --sqlite-only succeeded under a ${kb} KiB limit"
grep -q 'report.sqlite' "$work/cut2.log" || fail "the failure does not name report.sqlite: $(cat "$work/cut2.log")"
[ "$(cksum <"$work/cut/report.sqlite")" = "$before" ] || fail "the earlier report.sqlite was changed"
[ -f "$work/cut/step_trace.csv" ] || fail "the earlier report lost its CSV files"
left=$(ls -a "$work" | grep -c 'tmp')
[ "$left" = 0 ] || fail "temporary files left: $(ls -a "$work")"
ok "a database write cut short fails the analyse and leaves the earlier report whole"

# A 2-rank job: its tables, and the straggler of each step.
for r in 0 1; do
    TERMSIGHT_JOB=sq TERMSIGHT_RANK=$r TERMSIGHT_WORLD_SIZE=2 \
        "$MLP_TRAIN" --steps 200 --batch 32 --hidden 32 --output "$work/jobs" \
        >"$work/rank$r.log" 2>&1 &
done
wait
"$TERMSIGHT_BIN" analyse "$work/jobs/sq" >"$work/job.log" 2>&1 ||
    fail "the job analyse failed: $(cat "$work/job.log")"
jrep=$work/jobs/sq/report
check_tables "$jrep" ranks.csv:ranks job_steps.csv:job_steps job_step_trace.csv:job_step_trace
sqlite3 -batch "$work/job.db" ".import --csv '$jrep/job_steps.csv' js" || fail "cannot import job_steps.csv"
want=$(q "$work/job.db" "SELECT group_concat(step || ':' || slowest_rank) FROM (SELECT * FROM js ORDER BY CAST(step AS INTEGER))")
got=$(q "$jrep/report.sqlite" "SELECT group_concat(step || ':' || straggler_rank) FROM step_stragglers")
[ -n "$want" ] && [ "$want" = "$got" ] || fail "step_stragglers differ from job_steps.csv"
host=$(q "$jrep/report.sqlite" "SELECT count(*) FROM step_stragglers WHERE host IS NULL")
[ "$host" = 0 ] || fail "$host straggler rows without their rank's host"
"$TERMSIGHT_BIN" analyse --sqlite-only "$work/jobs/sq" >/dev/null 2>&1 &&
    fail "--sqlite-only was taken for a job folder"
ranks=$(q "$jrep/report.sqlite" "SELECT straggler_rank, host, count(*), max(skew_us) FROM step_stragglers GROUP BY straggler_rank ORDER BY 3 DESC" | wc -l)
[ "$ranks" -ge 1 ] && [ "$ranks" -le 2 ] || fail "the README's straggler count gave $ranks rows"
ok "the job report's tables and step_stragglers"
