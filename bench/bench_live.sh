#!/usr/bin/env bash
# bench/bench_live.sh: how faithful the live view is at a given event rate. bench_top_emit emits
# steps of 20 operators (each once per step) at RATE events/s; `termsight top --once --json`
# looks at it every second (each look a fresh monitor, attaching and reading the boards). Per
# window between two looks it prints the steps the live view counted finished, the steps the
# program itself began (its own count, which the collector mirrors), and what one operator's
# live count gained; then the largest gaps over the run:
#   - steps behind: the program's own step number less the live view's finished steps;
#   - operator against steps: |operator gained - steps finished| per window, over the steps (each
#     step has exactly one of it, so the live operator count must follow the finished steps);
#   - what each look cost (wall time of `top --once --json`, which attaches, reads, and polls twice
#     --refresh-ms apart).
# The emitter's recording is capped (its --record-mb, 64 MB) so that a fast rate does not fill
# the disk; the live view does not depend on it.
#
# usage: bench/bench_live.sh [--build-dir DIR] [--rate EVENTS_PER_S] [--looks N]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=""
RATE=1000000
LOOKS=10

while [ $# -gt 0 ]; do
    case "$1" in
    --build-dir) BUILD=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --looks) LOOKS=$2; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "bench_live.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
for n in "$RATE" "$LOOKS"; do
    case "$n" in '' | *[!0-9]*) echo "bench_live.sh: numbers only: '$n'" >&2; exit 2 ;; esac
done

NAME=bench_live
. "$ROOT/bench/emitter.sh"
emitter_build
echo "emitter: $RATE events/s, $LOOKS looks a second apart"
emitter_start "$RATE" $((LOOKS + 10))
sleep 2
for i in $(seq "$LOOKS"); do
    t0=$(date +%s.%N)
    "$TOP" top "$EMITTER" --once --json --refresh-ms 200 >"$WORK/look-$i.json"
    t1=$(date +%s.%N)
    echo "$t0 $t1" >"$WORK/look-$i.time"
    sleep 1
done
python3 - "$WORK" "$LOOKS" <<'PY'
import json, sys
work, n = sys.argv[1], int(sys.argv[2])
looks = []
for i in range(1, n + 1):
    d = json.load(open("%s/look-%d.json" % (work, i)))
    t0, t1 = map(float, open("%s/look-%d.time" % (work, i)).read().split())
    op = {o["op"]: o["count"] for o in d["ops"]["top_ops"]}
    looks.append((d["steps"]["count"], d["steps"]["current"], op.get("Default/layer1/MatMul-op1", 0),
                  t1 - t0, d["live"], d["events_per_s"]))
print("%5s %12s %12s %10s %12s %14s %8s  %s" % ("look", "finished", "own step", "behind",
      "op1 gained", "steps gained", "look s", "live"))
worst_behind = worst_rel = 0.0
for i, (c, cur, op, dt, live, eps) in enumerate(looks):
    gained = op - looks[i - 1][2] if i else op
    steps = c - looks[i - 1][0] if i else c
    if i:
        worst_rel = max(worst_rel, abs(gained - steps) / max(steps, 1))
    worst_behind = max(worst_behind, cur - c)
    print("%5d %12d %12d %10d %12d %14d %8.2f  %s" % (i + 1, c, cur, cur - c, gained, steps, dt,
          " ".join("%s=%s" % (k, v) for k, v in live.items() if k != "as_of_ns")))
print("largest: steps behind the program %d; operator against steps per window %.4f %%; "
      "events/s at the last look %.0f" % (worst_behind, 100 * worst_rel, looks[-1][5]))
PY
tail -n 1 "$WORK/emit.log" 2>/dev/null || true
