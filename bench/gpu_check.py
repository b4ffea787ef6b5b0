#!/usr/bin/env python3
"""gpu_check.py: the checks of bench/gpu_check.sh that read what termsight wrote.

Each subcommand prints one "RESULT <check> PASS|FAIL|SKIP <what>" line per check and exits 1
when a check failed (0 otherwise), so the shell script only runs programs and counts failures.
Nothing here needs a GPU: the tests feed it constructed dumps and report folders.

  counts DUMP ASKED_LINE   the recording (`termsight dump` output) holds what cuda_train asked
                           of CUDA (its last line): kernels, copies with bytes and direction,
                           memsets, device and pinned allocations and frees; no zero or reversed
                           times, every kernel with its op and after its launch
  window DUMP              device records only inside the collection windows (a --steps run)
  report DIR STEPS         the report folder: kernel_statistics.csv with every kernel under an
                           op, device memory in memory.csv, streams as timeline lanes, flows from
                           launches to kernels (as many as kernels), STEPS steps in step_trace.csv
  top JSON                 `top --once --json` shows kernels live
  slowdown LOG             the "RUN <size> <without|with> <ms/step>" lines: medians and slowdown
  rates LOG                termsight_bench's RESULT lines: the zero-loss rate per thread count
"""
import csv
import json
import os
import re
import statistics
import sys

FAILED = []

# CUPTI's enums (cupti_activity.h, CUDA 13), as the collector keeps them in `aux`.
MEMCPY_HTOD, MEMCPY_DTOH = 1, 2
MEMORY_PINNED, MEMORY_DEVICE = 2, 3

DEVICE_KINDS = ("kernel", "memcpy", "memset", "devmem_alloc", "devmem_free")
# The rows the kernel tables give copies and memsets (analysis/opstats.c).
COPY_ROWS = ("memcpy", "memset")

LINE = re.compile(
    r'^(?P<begin>\d+) (?P<end>\d+) (?P<kind>\S+) tid=(?P<tid>\S+) dev=(?P<dev>\S+) '
    r'name=(?P<name>"(?:[^"\\]|\\.)*"|#\d+) type=(?P<type>"(?:[^"\\]|\\.)*"|#\d+) '
    r'aux=(?P<aux>\d+) corr=(?P<corr>\d+) v0=(?P<v0>\S+) v1=(?P<v1>\S+) flags=(?P<flags>0x[0-9a-f]+)$')


def result(check, ok, what):
    """One RESULT line; ok None is SKIP."""
    word = "SKIP" if ok is None else ("PASS" if ok else "FAIL")
    print(f"RESULT {check} {word} {what}", flush=True)
    if ok is False:
        FAILED.append(check)


def read_dump(path):
    events = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = LINE.match(line.rstrip("\n"))
            if not m:
                raise SystemExit(f"gpu_check.py: {path}:{n}: not a dump line: {line[:120]!r}")
            e = m.groupdict()
            for k in ("begin", "end", "aux", "corr"):
                e[k] = int(e[k])
            e["v0"] = int(e["v0"]) if e["v0"].isdigit() else float(e["v0"])
            e["has_type"] = e["type"] not in ('""',)
            events.append(e)
    return events


def parse_asked(line):
    """cuda_train's last line: 'cuda_train: asked kernels K h2d H ...' -> {name: count}."""
    m = re.search(r"asked ((?:\w+ \d+ ?)+)", line)
    if not m:
        raise SystemExit(f"gpu_check.py: not cuda_train's asked line: {line!r}")
    words = m.group(1).split()
    return {words[i]: int(words[i + 1]) for i in range(0, len(words) - 1, 2)}


def cmd_counts(dump, asked_line):
    ev = read_dump(dump)
    asked = parse_asked(asked_line)
    by = {}
    for e in ev:
        by.setdefault(e["kind"], []).append(e)
    kernels = by.get("kernel", [])
    copies = by.get("memcpy", [])
    memsets = by.get("memset", [])
    allocs = by.get("devmem_alloc", [])
    frees = by.get("devmem_free", [])
    launches = {}
    for e in by.get("cuda_api", []):
        launches.setdefault(e["corr"], e)

    result("kernels.count", len(kernels) == asked["kernels"],
           f"{len(kernels)} kernels recorded, cuda_train launched {asked['kernels']}")
    bad_time = [e for e in kernels + copies + memsets if e["begin"] == 0 or e["end"] <= e["begin"]]
    result("device.times", not bad_time,
           f"{len(bad_time)} of {len(kernels) + len(copies) + len(memsets)} kernels, copies and "
           "memsets with a zero or reversed time")
    no_op = [e for e in kernels if not e["has_type"]]
    result("kernels.op", not no_op and bool(kernels),
           f"{len(no_op)} of {len(kernels)} kernels without their NVTX op")
    early, unmatched = 0, 0
    for e in kernels:
        api = launches.get(e["corr"])
        if api is None:
            unmatched += 1
        elif e["begin"] < api["begin"]:
            early += 1
    result("kernels.after_launch", early == 0 and unmatched == 0 and bool(kernels),
           f"{early} kernels begin before their launch call, {unmatched} without a launch "
           "record of the same correlation id")
    h2d = [e for e in copies if e["aux"] == MEMCPY_HTOD]
    d2h = [e for e in copies if e["aux"] == MEMCPY_DTOH]
    result("copies.count", len(h2d) == asked["h2d"] and len(d2h) == asked["d2h"],
           f"host to device {len(h2d)} (asked {asked['h2d']}), device to host {len(d2h)} "
           f"(asked {asked['d2h']}), other directions {len(copies) - len(h2d) - len(d2h)}")
    result("copies.bytes", bool(copies) and all(e["v0"] > 0 for e in copies),
           f"{sum(1 for e in copies if e['v0'] > 0)} of {len(copies)} copies with their bytes")
    result("memsets.count", len(memsets) == asked["memsets"] and all(e["v0"] > 0 for e in memsets),
           f"{len(memsets)} memsets (asked {asked['memsets']}), "
           f"{sum(1 for e in memsets if e['v0'] > 0)} with their bytes")
    for what, kind_no, a_key, f_key in (("device", MEMORY_DEVICE, "dev_allocs", "dev_frees"),
                                        ("pinned", MEMORY_PINNED, "pinned_allocs",
                                         "pinned_frees")):
        na = sum(1 for e in allocs if e["aux"] == kind_no)
        nf = sum(1 for e in frees if e["aux"] == kind_no)
        result(f"memory.{what}", na == asked[a_key] and nf == asked[f_key],
               f"{what} allocations {na} (asked {asked[a_key]}), frees {nf} "
               f"(asked {asked[f_key]})")
    lost = [e for e in by.get("lost", [])]
    result("lost", not lost, f"{len(lost)} loss notices in the recording")


def cmd_window(dump):
    ev = read_dump(dump)
    windows, open_at = [], None
    for e in ev:
        if e["kind"] == "collect_start":
            open_at = e["begin"]
        elif e["kind"] == "collect_stop" and open_at is not None:
            windows.append((open_at, e["end"]))
            open_at = None
    if open_at is not None:
        windows.append((open_at, max(e["end"] for e in ev)))
    device = [e for e in ev if e["kind"] in DEVICE_KINDS]
    outside = [e for e in device
               if not any(w0 <= e["begin"] and e["end"] <= w1 for w0, w1 in windows)]
    result("window.inside", bool(windows) and bool(device) and not outside,
           f"{len(outside)} of {len(device)} device records outside the {len(windows)} "
           "collection window(s)")


def load_trace(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def cmd_report(folder, steps):
    steps = int(steps)
    with open(os.path.join(folder, "kernel_statistics.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    kernels = [r for r in rows if r.get("kernel") and r["kernel"] not in COPY_ROWS]
    no_op = [r for r in kernels if not r.get("op")]
    copies = [r for r in rows if r.get("kernel") in COPY_ROWS]
    result("report.kernel_ops", bool(kernels) and not no_op,
           f"kernel_statistics.csv: {len(kernels)} kernel rows, {len(no_op)} without an op; "
           f"{len(copies)} copy and memset rows, {sum(1 for r in copies if not r.get('op'))} "
           "outside any op (the program's set-up)")
    with open(os.path.join(folder, "memory.csv"), newline="") as f:
        mem = [r for r in csv.DictReader(f) if r.get("device") not in ("host", None, "")]
    result("report.device_memory", bool(mem) and any(int(r["bytes"]) > 0 for r in mem),
           f"memory.csv: {len(mem)} device memory rows, peak "
           f"{max((int(r['peak_bytes']) for r in mem), default=0)} bytes")
    trace = load_trace(os.path.join(folder, "timeline.json"))
    streams = [e for e in trace if e.get("ph") == "M" and e.get("name") == "thread_name"
               and str(e.get("args", {}).get("name", "")).startswith("stream")]
    result("report.stream_lanes", bool(streams), f"timeline.json: {len(streams)} stream lanes")
    nk = sum(1 for e in trace if e.get("ph") == "X" and e.get("cat") == "kernel")
    flows = sum(1 for e in trace if e.get("ph") == "s")
    result("report.flows", nk > 0 and flows == nk,
           f"timeline.json: {flows} flows from launches for {nk} kernels")
    with open(os.path.join(folder, "step_trace.csv"), newline="") as f:
        srows = list(csv.DictReader(f))
    result("report.steps", len(srows) == steps,
           f"step_trace.csv: {len(srows)} steps, the program ran {steps}")


def cmd_top(path):
    with open(path, encoding="utf-8") as f:
        snap = json.load(f)
    ks = [k for k in snap.get("top_kernels") or [] if k.get("kernel") not in COPY_ROWS]
    with_op = [k for k in ks if k.get("op")]
    result("top.kernels", bool(ks) and len(with_op) == len(ks),
           f"top --once --json: {len(ks)} kernels listed live, {len(with_op)} with their op")


def cmd_slowdown(path):
    runs = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) == 4 and w[0] == "RUN":
                runs.setdefault(w[1], {}).setdefault(w[2], []).append(float(w[3]))
    for size, r in sorted(runs.items()):
        if not r.get("without") or not r.get("with"):
            result(f"slowdown.{size}", False, "a run without or with the collector is missing")
            continue
        a, b = statistics.median(r["without"]), statistics.median(r["with"])
        print(f"MEASURED slowdown.{size} {100 * (b / a - 1):.2f} % (ms/step median without "
              f"{a:.4f} over {len(r['without'])} runs, with {b:.4f} over {len(r['with'])}; "
              f"without {r['without']}, with {r['with']})", flush=True)


def cmd_rates(path):
    best = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"THREADS (\d+) RESULT rate\.(\w+)\.max_zero_drop ([\d.]+)", line)
            if m:
                key = (int(m.group(1)), m.group(2))
                best.setdefault(key, []).append(float(m.group(3)))
    if not best:
        result("rates", False, "no zero-loss rate in the benchmark's output")
    for (threads, cfg), v in sorted(best.items()):
        print(f"MEASURED rate.{cfg}.threads{threads}.max_zero_drop {max(v):.1f} M events/s "
              f"(runs {v})", flush=True)


def main(argv):
    cmds = {"counts": (cmd_counts, 2), "window": (cmd_window, 1), "report": (cmd_report, 2),
            "top": (cmd_top, 1), "slowdown": (cmd_slowdown, 1), "rates": (cmd_rates, 1)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        print(__doc__, file=sys.stderr)
        return 2
    fn, _ = cmds[argv[1]]
    fn(*argv[2:])
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
