#!/usr/bin/env bash
# The job report's scaling (bench/RESULTS.md, "Job analysis"): a synthetic job of RANKS ranks of
# EVENTS events each (bench_job_ranks), analysed by `termsight analyse JOB_FOLDER` with one rank
# at a time (serial), with as many at a time as this machine has CPUs (parallel), and by
# termsight.cluster.analyse on a Dask LocalCluster of two worker processes; then the merge alone
# of 1,000 ranks' reports (copies of the first rank's, renumbered).
#
#   bash bench/bench_job.sh [RANKS [EVENTS]]        (default 64 ranks of 1,000,000 events)
#
# BUILD_DIR (default build). Timelines are limited to 1 MiB per rank (--timeline-limit 1), so
# that the figures are the analysis's, not the disk's (a 1 M-event timeline is about 150 MB).
# Needs about 70 MB of disk per million events per rank under $TMPDIR; removed at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
RANKS=${1:-64}
EVENTS=${2:-1000000}
bin=$BUILD_DIR/cli/termsight
gen=$BUILD_DIR/bench/bench_job_ranks
[ -x "$bin" ] && [ -x "$gen" ] || { echo "bench_job: build first (cmake --build $BUILD_DIR)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-job.XXXXXX")
trap 'rm -rf "$work"' EXIT
job=$work/out/bj

secs() { python3 -c 'import sys,time; print("%.2f" % (time.time() - float(sys.argv[1])))' "$1"; }
now() { python3 -c 'import time; print(time.time())'; }

echo "bench_job: recording $RANKS ranks of $EVENTS events ($(nproc) CPUs)"
t=$(now)
"$gen" "$work/out" bj "$RANKS" "$EVENTS" | awk '{r += $3; d += $6} END {print "recorded", r, "dropped", d}'
echo "  recorded in $(secs "$t") s, $(du -sh "$job" | cut -f1) on disk"

python=python3
[ -x /usr/bin/python3 ] && python=/usr/bin/python3
cat >"$work/dask_job.py" <<'PY'
import sys, time
sys.path.insert(0, sys.argv[3])
import termsight.cluster
from distributed import Client, LocalCluster
if __name__ == "__main__":
    t0 = time.time()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        t1 = time.time()
        res = termsight.cluster.analyse(sys.argv[1], client, timeline_limit=1)
        t2 = time.time()
    bad = [r for r in res.ranks if not r.ok]
    print("dask, 2 workers: %.2f s (cluster start %.2f s more); %d ranks, %d failed"
          % (t2 - t1, t1 - t0, len(res.ranks), len(bad)))
PY
# Twice each, the three in turn (the machine is shared: compare within a round).
for round in 1 2; do
    echo "round $round"
    t=$(now)
    "$bin" analyse -j 1 --timeline-limit 1 "$job" >"$work/serial.txt"
    echo "  serial (-j 1): $(secs "$t") s"
    t=$(now)
    "$bin" analyse -j "$(nproc)" --timeline-limit 1 "$job" >"$work/parallel.txt"
    echo "  parallel (-j $(nproc)): $(secs "$t") s"
    echo -n "  "
    TERMSIGHT_BIN=$PWD/$bin "$python" "$work/dask_job.py" "$job" x "$PWD/python"
    t=$(now)
    "$bin" analyse --merge-only --timeline-limit 1 "$job" >/dev/null
    echo "  merge alone ($RANKS ranks, 1 MiB timelines): $(secs "$t") s"
done
grep -E "straggler|job:" "$work/parallel.txt" | sed 's/^/  /'

# 1,000 ranks: the first rank's report copied, its rank renumbered in summary.json.
big=$work/big/bj
mkdir -p "$big"
first=$(ls -d "$job"/rank0-* | head -1)
"$python" - "$first" "$big" <<'PY'
import json, os, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
with open(os.path.join(src, "report", "summary.json")) as f:
    s = json.load(f)
for r in range(1000):
    d = os.path.join(dst, "rank%d-h-%d-20261124-000000-%08x" % (r, 1000 + r, r))
    os.makedirs(os.path.join(d, "recording"))
    os.makedirs(os.path.join(d, "report"))
    s["job"]["rank"] = r
    s["job"]["world_size"] = 1000
    with open(os.path.join(d, "report", "summary.json"), "w") as f:
        json.dump(s, f)
    shutil.copy(os.path.join(src, "report", "step_trace.csv"), os.path.join(d, "report"))
PY
t=$(now)
"$bin" analyse --merge-only --timeline-limit 0 "$big" >/dev/null
echo "merge alone (1000 ranks, no timeline): $(secs "$t") s"
