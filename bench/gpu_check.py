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

PyTorch on CUDA (bench/torch_gpu_train.py; gpu_check_torch.sh writes a MANIFEST, one run a line,
tab-separated: model, size, mode (plain, termsight or profiler), ms/step, the script's --log, the
run folder or the profiler's JSON (else -), the run's `dump --kind kernel` (else -)):
  torch-steps MANIFEST     every termsight run: as many steps in step_trace.csv as the script
                           made, each step's total_us within 5 % (or 1 ms) of the script's time
  torch-kernels MANIFEST   >= 99 % of kernels under an op; kernels per step as torch.profiler's
  torch-busy MANIFEST      GPU busy per step (step_trace.csv) as torch.profiler's kernel time
  torch-overhead MANIFEST  termsight's slowdown at most half torch.profiler's, <= 3 % when large
  torch-planted RUN LOG    the planted steps' largest GPU idle part and the advisor's advice
  torch-live JSON LOG LOG  `top --once --json` against the script's log before and after it
"""
import csv
import json
import math
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


def result_of(check, ok, what, problems):
    """One RESULT line that fails when not ok or when problems (strings) were found, and names
    them."""
    result(check, ok and not problems, what + (": " + " | ".join(problems) if problems else ""))


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


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


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
    rows = read_csv(os.path.join(folder, "kernel_statistics.csv"))
    kernels = [r for r in rows if r.get("kernel") and r["kernel"] not in COPY_ROWS]
    no_op = [r for r in kernels if not r.get("op")]
    copies = [r for r in rows if r.get("kernel") in COPY_ROWS]
    result("report.kernel_ops", bool(kernels) and not no_op,
           f"kernel_statistics.csv: {len(kernels)} kernel rows, {len(no_op)} without an op; "
           f"{len(copies)} copy and memset rows, {sum(1 for r in copies if not r.get('op'))} "
           "outside any op (the program's set-up)")
    mem = [r for r in read_csv(os.path.join(folder, "memory.csv"))
           if r.get("device") not in ("host", None, "")]
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
    srows = read_csv(os.path.join(folder, "step_trace.csv"))
    result("report.steps", len(srows) == steps,
           f"step_trace.csv: {len(srows)} steps, the program ran {steps}")


# ---- PyTorch on CUDA ---------------------------------------------------------------------------

# step_trace.csv's device split (one column per part of a step's GPU time; empty when the step
# had no device work), and summary.json's advice kinds about it.
GPU_IDLE_PARTS = ("gpu_idle_data_us", "gpu_idle_host_us", "gpu_idle_sync_us",
                  "gpu_idle_other_us")
GPU_COLUMNS = ("gpu_device", "gpu_busy_us", "gpu_idle_us") + GPU_IDLE_PARTS
NO_SPLIT = "no device split in step_trace.csv"
STEP_TOLERANCE, STEP_FLOOR_NS = 0.05, 1_000_000  # a step's total against the script's own time
KERNELS_TOLERANCE = 0.02  # kernels per step against torch.profiler's
BUSY_TOLERANCE = 0.05  # GPU busy per step against torch.profiler's kernel time
LARGE_SLOWDOWN_PCT = 3.0


def read_train_log(path):
    """torch_gpu_train.py's --log: {"steps": {n: (begin_ns, end_ns)}, "arrived": {n: ns},
    "plant": {kind: set of steps}}."""
    log = {"steps": {}, "arrived": {}, "plant": {}}
    with open(path, encoding="utf-8") as f:
        for line in f:
            w = line.split()
            if len(w) == 4 and w[0] == "step":
                log["steps"][int(w[1])] = (int(w[2]), int(w[3]))
            elif len(w) == 3 and w[0] == "batch":
                log["arrived"][int(w[1])] = int(w[2])
            elif len(w) == 3 and w[0] == "plant":
                log["plant"].setdefault(w[1], set()).add(int(w[2]))
    return log


def read_manifest(path):
    """gpu_check_torch.sh's runs: dicts with model, size, mode, ms, log, art, dump."""
    keys = ("model", "size", "mode", "ms", "log", "art", "dump")
    runs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            w = line.rstrip("\n").split("\t")
            if len(w) == len(keys):
                r = dict(zip(keys, w))
                r["ms"] = float(r["ms"])
                runs.append(r)
    return runs


def step_trace(run):
    return read_csv(os.path.join(run, "report", "step_trace.csv"))


def script_step_ns(log, n):
    """The script's time for step n, as termsight's step n spans it: (shortest, longest). From
    the ask for its batch, except for the first step, which termsight opens inside the loader's
    __next__ once the batch has arrived (no earlier step's end opens its window:
    python/termsight/torch.py, auto()), a moment the script cannot time from outside: somewhere
    between its ask and the batch in its hands."""
    begin, end = log["steps"][n]
    if n == 1 and 1 in log["arrived"]:
        return end - log["arrived"][1], end - begin
    return end - begin, end - begin


def off_by(got, lo, hi):
    """How far got lies outside [lo, hi] (ns; 0 inside), and whether that is within the
    tolerance (STEP_TOLERANCE of the bound, or STEP_FLOOR_NS)."""
    bound = lo if got < lo else hi
    off = lo - got if got < lo else max(got - hi, 0)
    return off, off <= max(STEP_TOLERANCE * bound, STEP_FLOOR_NS), bound


def steps_against_log(run, log):
    """(problem or "", worst relative difference, steps compared) of one termsight run."""
    rows, made = step_trace(run), sorted(log["steps"])
    if len(rows) != len(made) or made != list(range(1, len(made) + 1)):
        return f"{len(rows)} steps in step_trace.csv, the script made {len(made)}", 0.0, 0
    worst, bad = 0.0, []
    for n, row in zip(made, rows):
        lo, hi = script_step_ns(log, n)
        got = float(row["total_us"]) * 1e3
        off, ok, bound = off_by(got, lo, hi)
        worst = max(worst, off / bound if bound else math.inf)
        if not ok:
            bad.append(f"step {n} {got / 1e3:.0f} us against {bound / 1e3:.0f}")
    why = "; ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
    return why, worst, len(made)


def cmd_torch_steps(manifest):
    runs = [r for r in read_manifest(manifest) if r["mode"] == "termsight"]
    problems, compared = [], 0
    for r in runs:
        try:
            why, worst, n = steps_against_log(r["art"], read_train_log(r["log"]))
        except (OSError, KeyError, ValueError) as e:
            why, worst, n = f"unreadable: {e}", 0.0, 0
        compared += n
        print(f"MEASURED torch.steps.{r['model']}.{r['size']} {n} steps, worst "
              f"{100 * worst:.2f} % off the script's time ({r['art']})", flush=True)
        if why:
            problems.append(f"{r['model']} {r['size']} {os.path.basename(r['art'])}: {why}")
    result_of("torch.steps", bool(runs),
              f"{len(runs)} termsight runs, {compared} steps against the script's own times "
              f"(within {100 * STEP_TOLERANCE:.0f} % or {STEP_FLOOR_NS / 1e6:.0f} ms)",
              problems)


def by_group(runs):
    """{(model, size): {mode: [runs]}}."""
    groups = {}
    for r in runs:
        groups.setdefault((r["model"], r["size"]), {}).setdefault(r["mode"], []).append(r)
    return groups


def profiler_figure(runs, key):
    """The median of key over the profiler runs' JSON."""
    values = []
    for r in runs:
        with open(r["art"], encoding="utf-8") as f:
            values.append(float(json.load(f)[key]))
    return statistics.median(values)


def within(got, want, tolerance):
    return want > 0 and abs(got - want) <= tolerance * want


def cmd_torch_kernels(manifest):
    problems, groups = [], 0
    for (model, size), g in sorted(by_group(read_manifest(manifest)).items()):
        runs = [r for r in g.get("termsight", []) if r["dump"] != "-"]
        if not runs or not g.get("profiler"):
            continue
        groups += 1
        kernels = with_op = 0
        per_step = []
        for r in runs:
            ks = [e for e in read_dump(r["dump"]) if e["kind"] == "kernel"]
            kernels += len(ks)
            with_op += sum(1 for e in ks if e["has_type"])
            per_step.append(len(ks) / max(len(read_train_log(r["log"])["steps"]), 1))
        ours, theirs = statistics.median(per_step), profiler_figure(g["profiler"],
                                                                     "kernels_per_step")
        share = with_op / kernels if kernels else 0.0
        print(f"MEASURED torch.kernels.{model}.{size} termsight {ours:.1f} kernels/step "
              f"(runs {[round(k, 1) for k in per_step]}), torch.profiler {theirs:.1f}; "
              f"{with_op} of {kernels} kernels under an op ({100 * share:.2f} %)", flush=True)
        # Not exact: each side sees the program's kernels through its own CUPTI records, and a
        # record lost at either edge (the profiler's start and stop, termsight's flush at exit),
        # or a library choosing another algorithm (a split-K GEMM's extra reduction kernel)
        # moves the count by a few kernels in thousands.
        if share < 0.99:
            problems.append(f"{model} {size}: {100 * share:.2f} % of {kernels} kernels under an op")
        if not within(ours, theirs, KERNELS_TOLERANCE):
            problems.append(f"{model} {size}: {ours:.1f} kernels per step, torch.profiler "
                            f"{theirs:.1f}")
    result_of("torch.kernel_ops", groups > 0,
              f"{groups} model(s): >= 99 % of kernels under an op, kernels per step within "
              f"{100 * KERNELS_TOLERANCE:.0f} % of torch.profiler's",
              problems)


def device_rows(rows):
    """The rows with device work, their device split as floats; None when step_trace.csv has no
    device split."""
    if rows and any(c not in rows[0] for c in GPU_COLUMNS):
        return None
    return [{c: float(r[c]) for c in GPU_COLUMNS[1:]} | {"step": int(r["step"])}
            for r in rows if r.get("gpu_busy_us")]


def cmd_torch_busy(manifest):
    problems, groups = [], 0
    for (model, size), g in sorted(by_group(read_manifest(manifest)).items()):
        if not g.get("termsight") or not g.get("profiler"):
            continue
        groups += 1
        busy = []
        for r in g["termsight"]:
            dev = device_rows(step_trace(r["art"]))
            if dev is None:
                problems.append(f"{model} {size}: {NO_SPLIT}")
                break
            busy.append(sum(d["gpu_busy_us"] for d in dev) / len(dev) if dev else 0.0)
        else:
            ours = statistics.median(busy)
            theirs = profiler_figure(g["profiler"], "kernel_us_per_step")
            copies = profiler_figure(g["profiler"], "copy_us_per_step")
            print(f"MEASURED torch.gpu_busy.{model}.{size} termsight {ours:.1f} us busy per "
                  f"step (runs {[round(b, 1) for b in busy]}), torch.profiler {theirs:.1f} us "
                  f"of kernels and {copies:.1f} us of copies and memsets per step", flush=True)
            if not within(ours, theirs, BUSY_TOLERANCE):
                problems.append(f"{model} {size}: {ours:.1f} us busy per step, torch.profiler "
                                f"{theirs:.1f} us of kernels")
    result_of("torch.gpu_busy", groups > 0,
              f"{groups} model(s): GPU busy per step within {100 * BUSY_TOLERANCE:.0f} % of "
              "torch.profiler's kernel time per step",
              problems)


def slowdown_pct(g, mode):
    return 100 * (statistics.median(r["ms"] for r in g[mode]) /
                  statistics.median(r["ms"] for r in g["plain"]) - 1)


def cmd_torch_overhead(manifest):
    problems, judged = [], 0
    for (model, size), g in sorted(by_group(read_manifest(manifest)).items()):
        if not g.get("plain") or not g.get("termsight"):
            continue
        ours = slowdown_pct(g, "termsight")
        figures = {m: [r["ms"] for r in g[m]] for m in ("plain", "termsight", "profiler") if m in g}
        theirs = slowdown_pct(g, "profiler") if g.get("profiler") else None
        print(f"MEASURED torch.overhead.{model}.{size} termsight {ours:.2f} %"
              + (f", torch.profiler {theirs:.2f} %" if theirs is not None else "")
              + f" (ms/step {figures})", flush=True)
        if theirs is not None:
            judged += 1
            if ours > theirs / 2:
                problems.append(f"{model} {size}: termsight {ours:.2f} %, more than half of "
                                f"torch.profiler's {theirs:.2f} %")
        if size == "large":
            judged += 1
            if ours > LARGE_SLOWDOWN_PCT:
                problems.append(f"{model} {size}: termsight {ours:.2f} % > "
                                f"{LARGE_SLOWDOWN_PCT:.0f} %")
    result_of("torch.overhead", judged > 0,
              f"{judged} comparisons of medians: termsight's slowdown at most half "
              f"torch.profiler's, at most {LARGE_SLOWDOWN_PCT:.0f} % at the large size",
              problems)


def planted_verdict(dev, steps, part, advice, kinds):
    """What is wrong with the planted steps' device split ("" when nothing): each has `part`
    as its largest idle part, more of it than the other steps' median, and the advisor says
    `advice`."""
    rows = {d["step"]: d for d in dev}
    missing = sorted(s for s in steps if s not in rows)
    if not steps or missing:
        return f"no device work in planted step(s) {missing or '(none planted)'}"
    wrong = [s for s in sorted(steps)
             if max(GPU_IDLE_PARTS, key=lambda p: rows[s][p]) != part]
    others = [d[part] for d in dev if d["step"] not in steps]
    planted = statistics.median(rows[s][part] for s in steps)
    why = []
    if wrong:
        why.append(f"step(s) {wrong} have another largest idle part "
                   f"({', '.join(f'{p}={rows[wrong[0]][p]:.0f}' for p in GPU_IDLE_PARTS)})")
    if others and planted <= statistics.median(others):
        why.append(f"{part} {planted:.0f} us in the planted steps, no more than the others' "
                   f"{statistics.median(others):.0f}")
    if advice not in kinds:
        why.append(f"no {advice} advice (advice kinds: {sorted(kinds)})")
    return "; ".join(why)


def cmd_torch_planted(run, log_path):
    log, rows = read_train_log(log_path), step_trace(run)
    dev = device_rows(rows)
    if dev is None:
        result("torch.planted", False, NO_SPLIT)
        return
    with open(os.path.join(run, "report", "summary.json"), encoding="utf-8") as f:
        kinds = {a.get("kind") for a in json.load(f).get("advice") or []}
    why = []
    for kind, part, advice in (("launch_bound", "gpu_idle_host_us", "gpu_host_bound"),
                               ("data_stall", "gpu_idle_data_us", "gpu_data")):
        steps = log["plant"].get(kind, set())
        for s in sorted(steps):
            d = next((d for d in dev if d["step"] == s), None)
            if d:
                print(f"MEASURED torch.planted.{kind} step {s}: busy {d['gpu_busy_us']:.0f} us, "
                      + ", ".join(f"{p[4:-3]} {d[p]:.0f}" for p in GPU_IDLE_PARTS), flush=True)
        v = planted_verdict(dev, steps, part, advice, kinds)
        if v:
            why.append(f"{kind}: {v}")
    result_of("torch.planted", True,
              "launch-bound steps mostly idle waiting for the host (gpu_host_bound advice), "
              "data-stall steps for data (gpu_data advice)", why)


def cmd_torch_live(path, log_before, log_after):
    with open(path, encoding="utf-8") as f:
        snap = json.load(f)
    steps = snap.get("steps") or {}
    newest = max([int(steps.get("count") or 0)] +
                 [int(r.get("step", 0)) for r in steps.get("recent") or []])
    lo = max(read_train_log(log_before)["steps"], default=0)
    hi = max(read_train_log(log_after)["steps"], default=0)
    ks = [k for k in snap.get("top_kernels") or [] if k.get("kernel") not in COPY_ROWS]
    result("torch.live", lo - 2 <= newest <= hi + 2 and hi > 0 and bool(ks),
           f"top --once --json: newest step {newest}, the script's log at {lo} before and {hi} "
           f"after it; {len(ks)} kernels listed live, {sum(1 for k in ks if k.get('op'))} "
           "with their op")


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
            "top": (cmd_top, 1), "slowdown": (cmd_slowdown, 1), "rates": (cmd_rates, 1),
            "torch-steps": (cmd_torch_steps, 1), "torch-kernels": (cmd_torch_kernels, 1),
            "torch-busy": (cmd_torch_busy, 1), "torch-overhead": (cmd_torch_overhead, 1),
            "torch-planted": (cmd_torch_planted, 2), "torch-live": (cmd_torch_live, 3)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        print(__doc__, file=sys.stderr)
        return 2
    fn, _ = cmds[argv[1]]
    fn(*argv[2:])
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
