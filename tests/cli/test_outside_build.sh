#!/bin/sh
# test_outside_build: termsight built in a folder outside its source tree (cmake -S SRC -B
# ELSEWHERE, as many users build) profiles a PyTorch script under `termsight run`: the command
# finds its Python part in its own build folder, the script's steps and operators are recorded
# and analysed. Then, with that part gone, `termsight run` says in one line that the Python
# program's PyTorch loops are not profiled, and the program still runs.
#
# Environment: SOURCE_DIR (the source tree), TORCH_PYTHON (a Python that imports torch),
# TERMSIGHT_TEST_TMP (scratch folder, removed at the end).
# Exit status: 0 passed, 1 failed, 77 skipped (no torch, or no compiler).
set -u
NAME=test_outside_build
. "$(dirname "$0")/../lib.sh"

: "${SOURCE_DIR:?SOURCE_DIR is not set}"
py=${TORCH_PYTHON:-python3}
if ! "$py" -c 'import torch' 2>/dev/null; then
    [ -n "${CI:-}" ] && fail "CI must test this, but $py cannot import torch"
    echo "$NAME: SKIP: $py cannot import torch"
    exit 77
fi
scratch outside-build

# Only the command, the library, the PyTorch hook where it can be built (libtorch-dev) and the
# Python part: what `termsight run` needs.
cmake -S "$SOURCE_DIR" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$work/cmake.log" 2>&1 ||
    fail "configure: $(tail -n 5 "$work/cmake.log")"
targets="termsight_cli termsight"
hook=0
if cmake --build "$work/build" --target help | grep -q 'termsight_torch'; then
    targets="$targets termsight_torch"
    hook=1
fi
# shellcheck disable=SC2086 # the targets are words
cmake --build "$work/build" -j "$(nproc)" --target $targets >"$work/build.log" 2>&1 ||
    fail "build: $(tail -n 20 "$work/build.log")"
[ -f "$work/build/python/termsight/_boot/sitecustomize.py" ] ||
    fail "the build folder has no copy of the Python part"
ok "built in a folder outside the source tree"

cat >"$work/train.py" <<'PY'
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(256, 16), torch.randint(0, 4, (256,)))
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
steps = 0
for x, y in DataLoader(data, batch_size=16):
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    steps += 1
print("trained", steps, "steps")
PY

# From another folder, the command by its path in the build folder.
cd "$work" || fail "cd"
"$work/build/cli/termsight" run -o "$work/out" -- "$py" "$work/train.py" >"$work/run.out" 2>&1 ||
    fail "termsight run: $(cat "$work/run.out")"
grep -q "trained 16 steps" "$work/run.out" || fail "the script did not train: $(cat "$work/run.out")"
grep -q "not profiled" "$work/run.out" && fail "the Python part was not found: $(cat "$work/run.out")"
run=$(sed -n 's/^termsight: run folder //p' "$work/run.out" | tail -n 1)
[ -d "$run" ] || fail "no run folder in: $(cat "$work/run.out")"
"$work/build/cli/termsight" analyse "$run" >"$work/analyse.out" 2>&1 ||
    fail "analyse: $(cat "$work/analyse.out")"
"$py" - "$run/report/summary.json" <<'PY' || fail "the recording: $(cat "$work/analyse.out")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["steps"]["count"] == 16, s["steps"]
PY
if [ "$hook" = 1 ]; then
    grep -q "aten::addmm" "$run/report/op_type_statistics.csv" || fail "no aten operators recorded"
    ok "a PyTorch script under termsight run from that build: 16 steps and its operators"
else
    ok "a PyTorch script under termsight run from that build: 16 steps (no PyTorch hook here)"
fi

# Without the Python part: one line says so, and the program runs as before.
rm -rf "$work/build/python"
"$work/build/cli/termsight" run -o "$work/out2" -- "$py" "$work/train.py" >"$work/run2.out" 2>&1 ||
    fail "termsight run without the Python part: $(cat "$work/run2.out")"
grep -q "trained 16 steps" "$work/run2.out" || fail "the script did not run: $(cat "$work/run2.out")"
[ "$(grep -c "PyTorch loops are not profiled" "$work/run2.out")" = 1 ] ||
    fail "no single line about the missing Python part: $(cat "$work/run2.out")"
ok "without its Python part, termsight run says so once and the program runs"
