# shellcheck shell=bash
# bench/gpu_check_torch.sh: gpu_check.sh's "PyTorch on CUDA" section, sourced by it (it uses its
# T, TS, WORK, OUTDIR, LIVE_PID, say, result, checker, skip_gpu and run_folder).
#
# bench/torch_gpu_train.py (a small Transformer LM and a small CNN, DataLoader workers, bf16
# autocast, AdamW, loss.item() every step) as a PyTorch user runs it: plain, under `termsight
# run` (the zero-code path: the script does not import termsight) and under torch.profiler,
# alternated, twice, at the small size; a run with planted launch-bound and data-stall steps,
# watched live with `top --once --json`; plain and termsight alternated at the large size.
# The checker (gpu_check.py torch-*) holds termsight's report against the script's own clock and
# torch.profiler's figures. About 3 minutes on an H100/H200; the runs stop at TORCH_BUDGET_S.
#
# Without a GPU (--dry-run), the tiny size of each model trains 4 steps on the CPU under termsight
# run and torch.steps is checked there (the plumbing, in CI); the rest says SKIP.

TORCH_DEVICE=cuda
TORCH_SMALL_STEPS=100
TORCH_LARGE_STEPS=60
# The planted run: long enough to be watched mid-way (some 4 ms a step on an H200).
TORCH_LIVE_SIZE=small
TORCH_LIVE_STEPS=1000
TORCH_BUDGET_S=${TORCH_BUDGET_S:-180}
TORCH_CHECKS=(torch.steps torch.kernel_ops torch.gpu_busy torch.planted torch.live torch.overhead)
TORCH_MANIFEST="$WORK/torch.manifest"
TORCH_FAILED=""

# The Python that has PyTorch: --python's (only it, when given), else python3, else Debian's
# /usr/bin/python3 (a user's pyenv python3 may lack it). Empty when none has.
torch_python() {
    local p
    for p in ${TORCH_PY:-python3 /usr/bin/python3}; do
        "$p" -c 'import torch' 2>/dev/null && { echo "$p"; return 0; }
    done
    return 1
}

# One run of torch_gpu_train.py: MODEL SIZE MODE STEPS DEVICE [ARGS...], MODE plain, termsight
# (analysed; with a kernel dump where DUMP=1) or profiler. Appends its manifest line (gpu_check.py
# says the fields); a run that fails is named in TORCH_FAILED instead.
torch_run() {
    local model=$1 size=$2 mode=$3 steps=$4 device=$5 rc art=- dump=-
    shift 5
    TORCH_N=$((TORCH_N + 1))
    local tag="$WORK/torch-$TORCH_N-$model-$size-$mode"
    local cmd=("$TORCH_PYTHON" "$TORCH_TRAIN" --model "$model" --size "$size" --device "$device"
        --steps "$steps" --workers 2 --log "$tag.log" "$@")
    case $mode in
    plain) $T "${cmd[@]}" >"$tag.out" 2>"$tag.err" ;;
    profiler) art="$tag.json" && $T "${cmd[@]}" --profiler "$art" >"$tag.out" 2>"$tag.err" ;;
    termsight) $T "$TS" run -o "$tag.d" -- "${cmd[@]}" >"$tag.out" 2>"$tag.err" ;;
    esac
    rc=$?
    [ "$mode" = termsight ] && art=$(run_folder "$tag.err")
    local ms
    ms=$(ms_per_step "$tag.out")
    if [ $rc -ne 0 ] || [ -z "$ms" ] || [ -z "$art" ]; then
        TORCH_FAILED="$TORCH_FAILED | $model $size $mode: exit $rc, $(grep -v '^step ' "$tag.out" "$tag.err" | tail -2 | tr '\n' ' ')"
        return 1
    fi
    if [ "$mode" = termsight ]; then
        torch_analyse "$art" "$model-$size-$TORCH_N" "$tag.log" || return 1
        if [ "${DUMP:-0}" = 1 ]; then
            dump="$tag.dump"
            "$TS" dump -k kernel "$art" >"$dump" 2>/dev/null
        fi
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$model" "$size" "$mode" "$ms" "$tag.log" "$art" "$dump" \
        >>"$TORCH_MANIFEST"
}

# termsight analyse RUN; its step trace, its summary and the script's LOG kept in
# OUTDIR/torch/NAME (small files, for whoever reads the report later: the run folders go with WORK).
torch_analyse() { # RUN NAME LOG
    local run=$1 keep="$OUTDIR/torch/$2"
    if ! "$TS" analyse "$run" >"$run.analyse" 2>&1; then
        TORCH_FAILED="$TORCH_FAILED | termsight analyse $(basename "$run"): $(tail -2 "$run.analyse" | tr '\n' ' ')"
        return 1
    fi
    mkdir -p "$keep" && cp "$run/report/step_trace.csv" "$run/report/summary.json" "$3" "$keep/" 2>/dev/null
    return 0
}

# Runs still allowed by the section's budget (a GPU machine's call is bounded as a whole).
torch_in_budget() {
    [ $((SECONDS - TORCH_T0)) -lt "$TORCH_BUDGET_S" ] && return 0
    TORCH_FAILED="$TORCH_FAILED | over the section's ${TORCH_BUDGET_S} s: $* not run"
    return 1
}

# The planted run, watched live: `top --once --json` on the python child of termsight run once
# the script has logged 50 steps, the script's log copied just before and after it.
torch_live_planted() {
    local tag="$WORK/torch-live" pid="" n
    "$TS" run -o "$tag.d" -- "$TORCH_PYTHON" "$TORCH_TRAIN" --model lm --size "$TORCH_LIVE_SIZE" \
        --device "$TORCH_DEVICE" --steps "$TORCH_LIVE_STEPS" --workers 2 --log "$tag.log" \
        --plant-launch-bound 5 --plant-data-stall 3 >"$tag.out" 2>"$tag.err" &
    LIVE_PID=$!
    for _ in $(seq 300); do # at most 60 s
        n=$(grep -c '^step ' "$tag.log" 2>/dev/null)
        [ "${n:-0}" -ge 50 ] && break
        kill -0 "$LIVE_PID" 2>/dev/null || break
        sleep 0.2
    done
    pid=$(pgrep -o -P "$LIVE_PID" 2>/dev/null)
    cp "$tag.log" "$tag.before" 2>/dev/null
    if [ -n "$pid" ] && timeout 30 "$TS" top --once --json --refresh-ms 300 "$pid" >"$tag.top" 2>"$tag.toperr"; then
        cp "$tag.log" "$tag.after"
        checker torch-live "$tag.top" "$tag.before" "$tag.after"
    else
        result torch.live FAIL "top --once --json on pid '${pid}' (${n:-0} steps logged): $(tail -2 "$tag.toperr" "$tag.err" 2>/dev/null | tr '\n' ' ')"
    fi
    for _ in $(seq 450); do kill -0 "$LIVE_PID" 2>/dev/null || break; sleep 0.2; done # 90 s
    kill -KILL "$LIVE_PID" 2>/dev/null
    wait "$LIVE_PID"
    local rc=$? run
    LIVE_PID=""
    run=$(run_folder "$tag.err")
    if [ $rc -eq 0 ] && [ -n "$run" ] && torch_analyse "$run" planted "$tag.log"; then
        checker torch-planted "$run" "$tag.log"
        printf 'lm\t%s-planted\ttermsight\t%s\t%s\t%s\t-\n' "$TORCH_LIVE_SIZE" "$(ms_per_step "$tag.out")" \
            "$tag.log" "$run" >>"$TORCH_MANIFEST"
    else
        result torch.planted FAIL "the planted run: exit $rc, run folder '$run': $(tail -2 "$tag.err" | tr '\n' ' ')"
    fi
}

# The runs on the GPU: per model, small A B C A B C; the planted run; per model, large A B A B.
torch_gpu_runs() {
    local model mode
    for model in lm cnn; do
        for _ in 1 2; do
            for mode in plain termsight profiler; do
                torch_in_budget "$model small $mode" || return
                DUMP=1 torch_run "$model" small "$mode" "$TORCH_SMALL_STEPS" "$TORCH_DEVICE"
            done
        done
    done
    if torch_in_budget "the planted run"; then
        torch_live_planted
    else
        result torch.live FAIL "not run: over the section's budget"
        result torch.planted FAIL "not run: over the section's budget"
    fi
    for model in lm cnn; do
        for _ in 1 2; do
            for mode in plain termsight; do
                torch_in_budget "$model large $mode" || return
                torch_run "$model" large "$mode" "$TORCH_LARGE_STEPS" "$TORCH_DEVICE"
            done
        done
    done
}

# One line for the runs themselves: how many, or which failed.
torch_runs_result() {
    if [ -n "$TORCH_FAILED" ]; then
        result torch.runs FAIL "${TORCH_FAILED# | }"
    else
        result torch.runs PASS "$(grep -c . "$TORCH_MANIFEST") runs of $(basename "$TORCH_TRAIN")" \
            "with $TORCH_PYTHON in $((SECONDS - TORCH_T0)) s"
    fi
}

torch_section() {
    TORCH_T0=$SECONDS
    TORCH_N=0
    : >"$TORCH_MANIFEST"
    # The bundle's copy of the script where it has one (made with its binaries), else the tree's.
    TORCH_TRAIN="$ROOT/bench/torch_gpu_train.py"
    [ -f "$B/bench/torch_gpu_train.py" ] && TORCH_TRAIN="$B/bench/torch_gpu_train.py"
    if ! TORCH_PYTHON=$(torch_python); then
        for c in "${TORCH_CHECKS[@]}"; do result "$c" SKIP "no Python with PyTorch here"; done
        return
    fi
    if [ "$DRY" = 1 ]; then
        torch_run lm tiny termsight 4 cpu
        torch_run cnn tiny termsight 4 cpu
        torch_runs_result
        checker torch-steps "$TORCH_MANIFEST"
        skip_gpu torch.kernel_ops torch.gpu_busy torch.planted torch.live torch.overhead
        return
    fi
    if [ "$GPU" != 1 ]; then
        skip_gpu "${TORCH_CHECKS[@]}"
        return
    fi
    if ! "$TORCH_PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
        for c in "${TORCH_CHECKS[@]}"; do result "$c" SKIP "no PyTorch with CUDA here ($TORCH_PYTHON)"; done
        return
    fi
    say "MEASURED torch_gpu_train: $("$TORCH_PYTHON" -c 'import torch; print("torch", torch.__version__, "on", torch.cuda.get_device_name(0))')"
    torch_gpu_runs
    torch_runs_result
    for c in torch-steps torch-kernels torch-busy torch-overhead; do
        checker "$c" "$TORCH_MANIFEST"
    done
}
