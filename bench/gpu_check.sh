#!/usr/bin/env bash
# bench/gpu_check.sh: termsight's CUDA path and its recorder on a GPU machine, in one prepared run
# of at most 8 minutes (see bench/RESULTS.md, "CUDA collection on a GPU").
#
# It checks the driver first; builds termsight with CUDA in Release (or takes a bundle built
# elsewhere: a GPU machine without network has no -dev packages); runs examples/cuda_train under
# `termsight run` and holds the recording against what cuda_train says it asked of CUDA (kernels,
# copies, memsets, allocations and frees by kind; no zero or reversed times, every kernel with its
# NVTX op and after its launch, no loss); a --steps window (no device record outside it); the
# report (kernel_statistics.csv, device memory in memory.csv, streams as timeline lanes, flows,
# the step trace); `top --once --json` on a live run; where torch is present, which libcupti
# copies the process holds and what termsight records after a torch.profiler block; the slowdown
# copies the process holds and what termsight records after a torch.profiler block; PyTorch on
# CUDA as a user runs it (bench/torch_gpu_train.py, a Transformer LM and a CNN, under termsight
# run's zero-code path, plain and under torch.profiler, alternated: steps against the script's
# own clock, kernels under their ops and per step, GPU busy per step against torch.profiler's,
# planted launch-bound and data-stall steps found, a live view, the slowdown; see
# bench/gpu_check_torch.sh); the slowdown of cuda_train without and with the collector,
# alternated, at the launch-bound default size and a large one (and nsys's, where nsys is there);
# and the recorder's zero-loss rate with 1, 4 and 8 producer threads. One "RESULT <check>
# PASS|FAIL|SKIP <what>" line per check and "MEASURED" lines for figures, all also in
# OUT/gpu_check.txt (with the PyTorch runs' step traces and summaries in OUT/torch/); exit status
# 1 when a check failed.
#
# usage: bench/gpu_check.sh [--dry-run] [--bundle DIR | --build-dir DIR] [--out DIR] [--jobs N]
#        bench/gpu_check.sh --prepare DIR     (build here, and bundle what the device needs)
#   --dry-run       no GPU: every CUDA part says SKIP; the build, the checker, a short recorder
#                   benchmark and torch_gpu_train.py's tiny models on the CPU under termsight
#                   run (torch.steps) still run (CI runs this)
#   --bundle DIR    use the binaries there as they are: a --prepare bundle or a build folder
#   --build-dir DIR build there (default build-gpu; an existing build is reused)
#   --out DIR       where gpu_check.txt goes (default $OUT when set, else the build folder)
#   --python PY     the Python with PyTorch (default: python3, else /usr/bin/python3)
#   --rate-seconds S, --rate-max-events N   the recorder benchmark's length per rate
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DRY=0
BUNDLE=""
PREPARE=""
BUILD="$ROOT/build-gpu"
OUTDIR="${OUT:-}"
JOBS=$(nproc)
RATE_MAX_EVENTS=24000000
RATE_SECONDS=1.0
MIN_DRIVER=580
TORCH_PY=""

while [ $# -gt 0 ]; do
    case "$1" in
    --dry-run) DRY=1; shift ;;
    --bundle) BUNDLE=$(cd "$2" && pwd) || exit 2; shift 2 ;;
    --prepare) PREPARE=$2; shift 2 ;;
    --build-dir) BUILD=$2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --python) TORCH_PY=$2; shift 2 ;;
    --rate-seconds) RATE_SECONDS=$2; shift 2 ;;
    --rate-max-events) RATE_MAX_EVENTS=$2; shift 2 ;;
    -h | --help) sed -n '2,34p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

build() { # build folder: Release, with CUDA where the toolkit is
    cmake -S "$ROOT" -B "$1" -DCMAKE_BUILD_TYPE=Release >"$1.configure.log" 2>&1 &&
        cmake --build "$1" -j "$JOBS" --target termsight termsight_cli termsight_bench \
            termsight_python cuda_train >"$1.build.log" 2>&1
}

# ---- --prepare: build here, copy what a bare machine lacks ---------------------------------
if [ -n "$PREPARE" ]; then
    mkdir -p "$PREPARE" || exit 1
    B="$PREPARE/build"
    build "$B" || { echo "gpu_check.sh: the build failed, see $B.build.log" >&2; exit 1; }
    D="$PREPARE/bundle"
    rm -rf "$D" && mkdir -p "$D/cli" "$D/collectors" "$D/examples" "$D/bench" "$D/python" "$D/lib"
    cp -L "$B/cli/termsight" "$D/cli/" && cp -L "$B/collectors/libtermsight.so" "$D/collectors/" &&
        cp -L "$B/collectors/libtermsight.so" "$D/collectors/libtermsight.so.0" &&
        cp -L "$B/bench/termsight_bench" "$D/bench/" && cp -rL "$B/python/termsight" "$D/python/" ||
        exit 1
    [ -x "$B/examples/cuda_train" ] && cp -L "$B/examples/cuda_train" "$D/examples/"
    cp "$ROOT/bench/torch_gpu_train.py" "$D/bench/" || exit 1
    # Every library the binaries take from outside glibc (cJSON, ISA-L, ncursesw, zlib), and
    # libcupti as a last resort where the GPU machine has none.
    for f in "$D/cli/termsight" "$D/collectors/libtermsight.so" "$D/bench/termsight_bench"; do
        ldd "$f" | awk '$3 ~ /^\// {print $3}'
    done | sort -u | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
        grep -v libtermsight | xargs -r cp -L -t "$D/lib/"
    for c in /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13 /usr/local/cuda/lib64/libcupti.so.13 \
        /usr/local/cuda/lib/libcupti.so.13; do
        [ -f "$c" ] && { cp -L "$c" "$D/lib/cupti-fallback.so.13"; break; }
    done
    du -sh "$D"
    echo "gpu_check.sh: bundle in $D; on the GPU machine: bench/gpu_check.sh --bundle <it>"
    exit 0
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 1
LIVE_PID=""
cleanup() {
    [ -n "$LIVE_PID" ] && kill -KILL "$LIVE_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ -n "$OUTDIR" ] || OUTDIR="${BUNDLE:-$BUILD}"
mkdir -p "$OUTDIR" || exit 1
REPORT="$OUTDIR/gpu_check.txt"
: >"$REPORT"
FAILS=0
say() { echo "$*" | tee -a "$REPORT"; }
result() { # check PASS|FAIL|SKIP text...
    local check=$1 word=$2
    shift 2
    say "RESULT $check $word $*"
    [ "$word" = FAIL ] && FAILS=$((FAILS + 1))
    return 0
}
# The checker's lines into the report; its failures counted.
checker() {
    local out rc
    out=$(python3 "$ROOT/bench/gpu_check.py" "$@" 2>&1)
    rc=$?
    printf '%s\n' "$out" | tee -a "$REPORT"
    FAILS=$((FAILS + $(printf '%s\n' "$out" | grep -c '^RESULT .* FAIL ')))
    [ $rc -le 1 ] || result "checker.$1" FAIL "gpu_check.py $1 exited $rc"
}
skip_gpu() { for c in "$@"; do result "$c" SKIP "dry run: needs a GPU and its driver"; done; }

say "gpu_check: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname), $(nproc) CPUs, $(uname -r)"
say "MEASURED cpu $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"

# ---- 1. The driver ---------------------------------------------------------------------------
GPU=0
if [ "$DRY" = 1 ]; then
    skip_gpu driver
elif ! command -v nvidia-smi >/dev/null; then
    result driver FAIL "no nvidia-smi: no NVIDIA driver on this machine"
else
    info=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)
    drv=$(printf '%s' "$info" | awk -F', ' '{print $2}')
    if [ "${drv%%.*}" -ge "$MIN_DRIVER" ] 2>/dev/null; then
        result driver PASS "$info (CUDA 13 needs r$MIN_DRIVER or newer)"
        GPU=1
    else
        result driver FAIL "'$info': CUDA 13 needs driver r$MIN_DRIVER or newer; cuda_train would" \
            "exit 1 and CUPTI would not start"
    fi
fi

# ---- 2. The build, or the bundle -------------------------------------------------------------
if [ -n "$BUNDLE" ]; then
    B="$BUNDLE"
    export LD_LIBRARY_PATH="$B/collectors:$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    result build PASS "binaries in $B, used as they are"
else
    B="$BUILD"
    t0=$(date +%s)
    if build "$B"; then
        result build PASS "Release build in $B, -j$JOBS, $(($(date +%s) - t0)) s"
    else
        result build FAIL "see $B.build.log: $(tail -3 "$B.build.log" 2>/dev/null | tr '\n' ' ')"
        exit 1
    fi
fi
TS="$B/cli/termsight"
TRAIN="$B/examples/cuda_train"
BENCH="$B/bench/termsight_bench"
# libcupti: the collector finds the machine's own (where the toolkit puts it); the bundle's only
# where it would find none.
HOME_CUPTI=""
for c in "${CUDA_HOME:-/usr/local/cuda}"/{extras/CUPTI/lib64,lib64,lib}/libcupti.so.13; do
    [ -f "$c" ] && HOME_CUPTI="$HOME_CUPTI $c"
done
if [ -z "${TERMSIGHT_CUPTI_LIB:-}" ] && [ -z "$HOME_CUPTI" ] && [ -f "$B/lib/cupti-fallback.so.13" ]; then
    export TERMSIGHT_CUPTI_LIB="$B/lib/cupti-fallback.so.13"
fi
say "MEASURED libcupti${HOME_CUPTI:- none in the toolkit}${TERMSIGHT_CUPTI_LIB:+, TERMSIGHT_CUPTI_LIB=$TERMSIGHT_CUPTI_LIB}"

# Every program under test is bounded (a hang at exit is one of the things looked for).
T="timeout -k 5 90"

# The run folder a `termsight run` printed on stderr (never the newest folder by name).
run_folder() { sed -n 's/^termsight: run folder //p' "$1" | tail -1; }
# The "(X ms/step)" a training program printed last.
ms_per_step() { sed -n 's/.*(\([0-9.]*\) ms\/step).*/\1/p' "$1" | tail -1; }

# ---- 3. The checker itself, on constructed input (no GPU needed) -----------------------------
cat >"$WORK/good.dump" <<'EOF'
100 100 collect_start tid=1 dev=host name="" type="" aux=0 corr=0 v0=1 v1=0 flags=0x0
200 210 cuda_api tid=1 dev=host name="cudaLaunchKernel" type="op" aux=1 corr=7 v0=0 v1=2 flags=0x0
220 260 kernel tid=7 dev=0 name="k" type="op" aux=1 corr=7 v0=0 v1=0 flags=0x0
300 300 collect_stop tid=1 dev=host name="" type="" aux=0 corr=0 v0=1 v1=0 flags=0x0
EOF
sed 's/^220 260 kernel/190 260 kernel/' "$WORK/good.dump" >"$WORK/early.dump"
if python3 "$ROOT/bench/gpu_check.py" window "$WORK/good.dump" >/dev/null &&
    ! python3 "$ROOT/bench/gpu_check.py" counts "$WORK/early.dump" \
        "cuda_train: asked kernels 1 h2d 0 d2h 0 memsets 0 dev_allocs 0 dev_frees 0 pinned_allocs 0 pinned_frees 0" >/dev/null; then
    result checker PASS "gpu_check.py accepts a good recording and refuses a kernel before its launch"
else
    result checker FAIL "gpu_check.py misjudged a constructed recording"
fi

# ---- 4. cuda_train under termsight run: the recording against what it asked -----------------
STEPS=200
if [ "$GPU" = 1 ] && [ ! -x "$TRAIN" ]; then
    result cuda_train FAIL "$TRAIN was not built (no nvcc or nvtx3 headers at build time)"
    GPU=0
fi
if [ "$GPU" = 1 ]; then
    if $T "$TRAIN" 50 >"$WORK/plain.out" 2>&1; then
        result cuda_train PASS "$(grep -m1 '^cuda_train:' "$WORK/plain.out")"
    else
        result cuda_train FAIL "exit $?: $(tail -2 "$WORK/plain.out" | tr '\n' ' ')"
        GPU=0
    fi
fi
if [ "$GPU" = 1 ]; then
    $T "$TS" run -o "$WORK/full" -- "$TRAIN" $STEPS >"$WORK/full.out" 2>"$WORK/full.err"
    rc=$?
    [ $rc -eq 124 ] && say "MEASURED termsight run of cuda_train $STEPS did not end in 90 s (killed)"
    RUN=$(run_folder "$WORK/full.err")
    say "MEASURED collector's stderr: $(grep -i 'cuda\|cupti' "$WORK/full.err" | tr '\n' ' ')"
    if [ $rc -ne 0 ] || [ -z "$RUN" ] || [ ! -d "$RUN" ]; then
        result run FAIL "termsight run exited $rc, run folder '$RUN': $(tail -3 "$WORK/full.err" | tr '\n' ' ')"
    else
        result run PASS "cuda_train $STEPS under termsight run, run folder $(basename "$RUN")"
        "$TS" dump "$RUN" >"$WORK/full.dump" 2>"$WORK/dump.err"
        say "MEASURED recording: $(grep -c . "$WORK/full.dump") events; cuda config: $(grep ' config .*name="cuda"' "$WORK/full.dump" | tail -1 | sed 's/.*type=//; s/ aux=.*//')"
        checker counts "$WORK/full.dump" "$(grep 'asked kernels' "$WORK/full.out" | tail -1)"
        if "$TS" analyse "$RUN" >"$WORK/analyse.out" 2>&1; then
            checker report "$RUN/report" "$STEPS"
            grep -m8 '' "$RUN/report/kernel_statistics.csv" | sed 's/^/  kernel_statistics.csv: /' | tee -a "$REPORT"
        else
            result report FAIL "termsight analyse: $(tail -3 "$WORK/analyse.out" | tr '\n' ' ')"
        fi
    fi
else
    skip_gpu run kernels.count device.times kernels.op kernels.after_launch copies.count \
        memsets.count memory.device memory.pinned report.kernel_ops report.device_memory \
        report.stream_lanes report.flows report.steps
fi

# ---- 5. A --steps window: nothing outside it -------------------------------------------------
if [ "$GPU" = 1 ]; then
    $T "$TS" run --steps 50-59 -o "$WORK/win" -- "$TRAIN" 120 >/dev/null 2>"$WORK/win.err"
    RUN=$(run_folder "$WORK/win.err")
    if [ -n "$RUN" ] && "$TS" dump "$RUN" >"$WORK/win.dump" 2>/dev/null; then
        checker window "$WORK/win.dump"
    else
        result window.inside FAIL "no recording of the --steps run: $(tail -2 "$WORK/win.err" | tr '\n' ' ')"
    fi
else
    skip_gpu window.inside
fi

# ---- 6. top --once --json on a live run ------------------------------------------------------
if [ "$GPU" = 1 ]; then
    "$TS" run -o "$WORK/live" -- "$TRAIN" 200000 >"$WORK/live.out" 2>"$WORK/live.err" &
    LIVE_PID=$!
    for _ in $(seq 100); do # until its session is listed (at most 20 s)
        "$TS" ls 2>/dev/null | grep -q cuda_train && break
        sleep 0.2
    done
    sleep 2
    if timeout 30 "$TS" top --once --json cuda_train >"$WORK/top.json" 2>"$WORK/top.err"; then
        checker top "$WORK/top.json"
    else
        result top.kernels FAIL "top --once --json: $(tail -2 "$WORK/top.err" | tr '\n' ' ')"
    fi
    kill -INT "$LIVE_PID" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$LIVE_PID" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$LIVE_PID" 2>/dev/null
    wait "$LIVE_PID" 2>/dev/null
    LIVE_PID=""
else
    skip_gpu top.kernels
fi

# ---- 7. Next to PyTorch's profiler -----------------------------------------------------------
if [ "$GPU" = 1 ] && python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    cat >"$WORK/torch_kineto.py" <<'EOF'
import torch
def cupti_copies():
    with open("/proc/self/maps") as f:
        return sorted({l.split()[-1] for l in f if "libcupti" in l})
print("libcupti after import torch:", " ".join(cupti_copies()) or "none")
x = torch.randn(512, 512, device="cuda")
def phase(name, n):
    torch.cuda.nvtx.range_push(name)
    for _ in range(n):
        y = x @ x
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
phase("before_profiler", 50)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                        torch.profiler.ProfilerActivity.CUDA]) as p:
    phase("inside_profiler", 50)
print("kineto kernels:", sum(1 for e in p.events() if e.device_type.name == "CUDA"))
phase("after_profiler", 50)
print("libcupti loaded:", " ".join(cupti_copies()) or "none")
EOF
    $T "$TS" run -o "$WORK/torch" -- python3 "$WORK/torch_kineto.py" >"$WORK/torch.out" 2>"$WORK/torch.err"
    rc=$?
    RUN=$(run_folder "$WORK/torch.err")
    say "MEASURED torch: $(python3 -c 'import torch; print(torch.__version__)') $(tr '\n' ';' <"$WORK/torch.out")"
    if [ $rc -ne 0 ] || [ -z "$RUN" ]; then
        result torch.profiler FAIL "exit $rc: $(tail -3 "$WORK/torch.err" | tr '\n' ' ')"
    else
        "$TS" dump -k kernel "$RUN" >"$WORK/torch.dump" 2>/dev/null
        for ph in before_profiler inside_profiler after_profiler; do
            say "MEASURED torch.kernels.$ph $(grep -c "type=\"$ph\"" "$WORK/torch.dump")"
        done
        nb=$(grep -c 'type="before_profiler"' "$WORK/torch.dump")
        na=$(grep -c 'type="after_profiler"' "$WORK/torch.dump")
        nk=$(sed -n 's/^kineto kernels: //p' "$WORK/torch.out")
        copies=$(sed -n 's/^libcupti loaded: //p' "$WORK/torch.out" | wc -w)
        say "MEASURED torch.cuda_config $("$TS" dump -k config "$RUN" 2>/dev/null | grep 'name="cuda"' | sed 's/.*type=//; s/ aux=.*//' | tr '\n' ' ')"
        if [ "$nb" -gt 0 ] && [ "$na" -eq "$nb" ] && [ "${nk:-0}" -gt 0 ] && [ "$copies" -le 1 ]; then
            result torch.profiler PASS "termsight: $nb kernels before a torch.profiler block, $na after; torch.profiler: $nk kernels; $copies libcupti loaded"
        else
            result torch.profiler FAIL "termsight: $nb kernels before a torch.profiler block, $na after; torch.profiler: ${nk:-?} kernels; $copies libcupti copies loaded: $(grep -v '^INFO' "$WORK/torch.err" | tail -2 | tr '\n' ' ')"
        fi
    fi
elif [ "$GPU" = 1 ]; then
    result torch.profiler SKIP "no torch with CUDA here"
else
    skip_gpu torch.profiler
fi

# ---- 8. PyTorch on CUDA: a Transformer LM and a CNN as a user trains them -------------------
# shellcheck source=bench/gpu_check_torch.sh
. "$ROOT/bench/gpu_check_torch.sh"
torch_section

# ---- 9. Slowdown: without and with the collector, alternated ---------------------------------
if [ "$GPU" = 1 ]; then
    : >"$WORK/slow.log"
    NSYS=$(command -v nsys || true)
    for spec in "default 3000" "large 2000 256 1024"; do
        set -- $spec
        size=$1
        shift
        reps=5
        [ "$size" = large ] && reps=3
        for _ in $(seq $reps); do
            $T "$TRAIN" "$@" >"$WORK/a.out" 2>&1 && echo "RUN $size without $(ms_per_step "$WORK/a.out")" >>"$WORK/slow.log"
            $T "$TS" run -o "$WORK/slow" -- "$TRAIN" "$@" >"$WORK/b.out" 2>/dev/null &&
                echo "RUN $size with $(ms_per_step "$WORK/b.out")" >>"$WORK/slow.log"
            rm -rf "$WORK/slow"
            if [ -n "$NSYS" ]; then
                "$NSYS" profile -o "$WORK/nsys-$size" --force-overwrite true "$TRAIN" "$@" >"$WORK/c.out" 2>&1 &&
                    echo "RUN $size-nsys with $(ms_per_step "$WORK/c.out")" >>"$WORK/slow.log"
                [ -n "$(ms_per_step "$WORK/c.out")" ] && echo "RUN $size-nsys without $(ms_per_step "$WORK/a.out")" >>"$WORK/slow.log"
                rm -f "$WORK"/nsys-*
            fi
        done
    done
    checker slowdown "$WORK/slow.log"
    [ -n "$NSYS" ] || say "MEASURED nsys not on this machine's PATH: not measured"
else
    skip_gpu slowdown
fi

# ---- 10. The recorder's zero-loss rate with 1, 4 and 8 producers ------------------------------
if [ -x "$BENCH" ]; then
    : >"$WORK/rates.log"
    if [ "$DRY" = 1 ]; then # a check that the benchmark runs, bounded (about 16 MB on disk)
        threads="1 2" rates="1" max=250000 configs=disk_default RATE_SECONDS=0.25
    else
        threads="1 4 8" rates="10,15,20,25,30,40,50,0" max=$RATE_MAX_EVENTS configs=tmpfs_default,disk_default
    fi
    # Memory the VM has never touched costs a fault on the host per page (bench/RESULTS.md): one
    # unmeasured run first, so that the first measured one does not pay it alone.
    [ "$DRY" = 1 ] || "$BENCH" --sections rate --rates 0 --rate-repeats 1 --rate-max-events "$max" \
        --rate-small-lane 0 --rate-configs "$configs" --disk "$WORK" >/dev/null 2>&1
    for n in $threads; do
        "$BENCH" --sections rate --rate-threads "$n" --rates "$rates" --rate-repeats 1 \
            --rate-seconds "$RATE_SECONDS" --rate-max-events "$max" --rate-small-lane 0 \
            --rate-configs "$configs" --disk "$WORK" >"$WORK/bench.out" 2>&1
        rc=$?
        grep -E '^  (tmpfs|disk)' "$WORK/bench.out" | sed "s/^/  threads $n: /" | tee -a "$REPORT"
        sed "s/^/THREADS $n /" "$WORK/bench.out" >>"$WORK/rates.log"
        [ $rc -eq 0 ] || result "rates.threads$n" FAIL "termsight_bench exited $rc: $(tail -2 "$WORK/bench.out" | tr '\n' ' ')"
    done
    checker rates "$WORK/rates.log"
else
    result rates FAIL "$BENCH was not built"
fi

say "gpu_check: $FAILS failed check(s); report in $REPORT"
[ "$FAILS" -eq 0 ]
