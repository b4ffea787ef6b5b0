"""termsight.torch against a real PyTorch (Debian's python3-torch for /usr/bin/python3).

Runs examples/torch_cnn.py under the profiler and checks its steps, aten operators, queue and
report, then the helpers one by one in fresh interpreters. Skips when torch cannot be imported,
except in CI (CI set), where scripts/test.sh installs it and a skip would hide a failure.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
import unittest

from test_binding import LONG, REPO, Base, cli, dump

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError as e:  # pragma: no cover (depends on the machine)
    HAVE_TORCH = False
    WHY = "PyTorch is not importable by %s (%s): apt-get install python3-torch" % (
        sys.executable, e)

if not HAVE_TORCH and os.environ.get("CI"):
    raise RuntimeError("CI must test termsight.torch, but " + WHY)

EXAMPLE = os.path.join(REPO, "examples", "torch_cnn.py")
# Set by CMake where it built libtermsight-torch.so (libtorch-dev installed, as in CI): the
# native hook must then be the one termsight.torch uses, not silently the Python fallback.
NATIVE_BUILT = os.environ.get("TERMSIGHT_TEST_TORCH_HOOK") == "1"
TRAINED = re.compile(r"trained (\d+) steps in [0-9.]+ s: loss ([0-9.]+) -> ([0-9.]+), "
                     r"held-out accuracy ([0-9.]+)%")


def summary(run_folder):
    with open(os.path.join(run_folder, "report", "summary.json")) as f:
        return json.load(f)


@unittest.skipUnless(HAVE_TORCH, "" if HAVE_TORCH else WHY)
class Example(Base):
    """The example CNN, trained under the profiler and analysed."""

    def train(self, *args):
        out = os.path.join(self.tmp, "data")
        p = subprocess.run([sys.executable, EXAMPLE, "--output", out, "--analyse"] + list(args),
                           cwd=self.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=300)
        text = p.stdout.decode("utf-8", "replace")
        err = p.stderr.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 0, "stdout:\n%s\nstderr:\n%s" % (text, err))
        m = TRAINED.search(text)
        self.assertIsNotNone(m, text)
        run = re.search(r"^run folder: (.+)$", text, re.M).group(1)
        return int(m.group(1)), float(m.group(2)), float(m.group(3)), run

    def test_steps_ops_queue_and_report(self):
        trained, first, last, run = self.train("--steps", "40", "--workers", "2")
        self.assertEqual(trained, 40)
        self.assertLess(last, first, "the CNN learns")
        s = summary(run)
        self.assertEqual(s["steps"]["count"], 40, "one step per batch trained")
        self.assertEqual(s["steps"]["source"], "auto")
        self.assertGreater(s["steps"]["avg_interval_us"], 0, "the DataLoader wait is the interval")
        import csv
        with open(os.path.join(run, "report", "op_type_statistics.csv")) as f:
            types = {row["type"] for row in csv.DictReader(f)}
        for want in ("DataLoader", "aten::convolution", "aten::convolution_backward",
                     "aten::max_pool2d_with_indices", "aten::addmm"):
            self.assertIn(want, types)
        events = dump(run)
        ops = [e for e in events if e["kind"] == "op"]
        names = {e["name"] for e in ops}
        # Forward operators carry the layer they ran in; with the native hook backward ones
        # carry their forward's (the Python fallback runs them outside every module).
        self.assertIn("features.0/aten::convolution", names)
        self.assertIn("features.3/aten::convolution", names)
        self.assertIn("classifier/aten::addmm", names)
        if NATIVE_BUILT:
            self.assertIn("features.0/aten::convolution_backward", names)
            self.assertIn("features.3/ConvolutionBackward0", names)
            self.assertIn("classifier/AddmmBackward0", names)
        else:
            self.assertIn("aten::convolution_backward", names)
        waits = [e for e in ops if e["name"] == "DataLoader.__next__"]
        self.assertEqual(len(waits), 40)
        self.assertTrue(all(e["type"] == "DataLoader" for e in waits))
        q = [x for x in s["queues"] if x["queue"] == "DataLoader prefetch"]
        self.assertEqual(len(q), 1, s["queues"])
        self.assertEqual(q[0]["role"], "host")
        self.assertGreaterEqual(q[0]["samples"], 10)
        self.assertNotEqual(q[0]["verdict"], "data_processing",
                            "two workers outpace this CNN: %s" % q[0])
        for f in ("report.txt", "op_statistics.csv", "step_trace.csv", "data_queues.csv",
                  "timeline.json"):
            self.assertTrue(os.path.getsize(os.path.join(run, "report", f)) > 0, f)

    def test_slow_data_is_the_bottleneck(self):
        # 40 ms a sample: two workers deliver a batch of 8 in about 160 ms, several times a
        # training step even where the step itself is slowed down (the ASan runtime preloaded
        # into Python slows every allocation of PyTorch's; batches of 32 at 12 ms a sample were
        # seen keeping up with it on a loaded 2-core machine). The workers sleep: load does not
        # slow them.
        trained, _, _, run = self.train("--steps", "20", "--workers", "2", "--batch", "8",
                                        "--slow-data", "--slow-data-ms", "40")
        self.assertEqual(trained, 20)
        s = summary(run)
        self.assertEqual(s["steps"]["count"], 20)
        q = [x for x in s["queues"] if x["queue"] == "DataLoader prefetch"]
        self.assertEqual(q[0]["verdict"], "data_processing", q)
        findings = [f for f in s["queue_findings"] if f["verdict"] == "data_processing"]
        self.assertEqual(findings[0]["bottleneck_op"], "DataLoader workers")
        self.assertIn("step_interval", [a["kind"] for a in s["advice"]])


@unittest.skipUnless(HAVE_TORCH, "" if HAVE_TORCH else WHY)
class Helpers(Base):
    """steps() and ops() one at a time, each in a fresh interpreter with its own session, with
    the native hook where it was built (HelpersPython below: the Python fallback)."""

    native = NATIVE_BUILT
    hook_env = {}

    def child(self, code, env=None, expect_rc=0):
        e = dict(self.hook_env)
        e.update(env or {})
        return super().child(code, env=e, expect_rc=expect_rc)

    def events(self, code):
        r = self.child("import termsight.torch\n" + textwrap.dedent(code))
        return r, dump(r["folder"])

    def test_the_native_hook_is_used_where_built(self):
        r = self.child("""
            import torch, termsight.torch
            from termsight import _lib
            emit({"hook": _lib.load_torch_hook() is not None, "why": _lib.torch_hook_missing()})
            """)
        self.assertEqual(r["hook"], self.native, r["why"])

    def test_the_hook_never_brings_a_second_libtorch(self):
        # A process whose libtorch is not the one the hook was built against (here: none yet, as
        # in a process running a pip wheel's) does not get the hook, nor that libtorch.
        if not self.native:
            self.skipTest("the native hook is not built here" if not NATIVE_BUILT else
                          "the Python fallback is asked for")
        r = self.child("""
            from termsight import _lib
            hook = _lib.load_torch_hook()
            maps = open("/proc/self/maps").read()
            emit({"hook": hook is not None, "why": _lib.torch_hook_missing(),
                  "libtorch": "libtorch_cpu" in maps})
            """)
        self.assertFalse(r["hook"])
        self.assertFalse(r["libtorch"], "no libtorch was loaded")
        self.assertIn("was built against", r["why"])

    def test_break_ends_the_step_and_lists_work(self):
        r, ev = self.events("""
            p = termsight.Profiler(output_path=out)
            seen = []
            for b in termsight.torch.steps([1, 2, 3, 4, 5], ops=False):
                seen.append(b)
                if b == 3:
                    break
            for b in termsight.torch.steps(iter([]), ops=False):
                seen.append(b)
            for b in termsight.torch.steps([], ops=False):
                seen.append(b)
            folder = p.run_folder
            p.close()
            emit({"seen": seen, "folder": folder})
            """)
        self.assertEqual(r["seen"], [1, 2, 3])
        kinds = [e["kind"] for e in ev]
        self.assertEqual(kinds.count("step_begin"), 3)
        self.assertEqual(kinds.count("step_end"), 3)
        self.assertEqual(sum(1 for e in ev if e["name"] == "DataLoader.__next__"), 3)
        self.assertNotIn("queue_info", kinds, "a list has no prefetch depth")

    def test_break_at_the_top_counts_only_steps_that_ran(self):
        # for i, batch in enumerate(steps(loader)): if i >= N: break -- the batch fetched for the
        # (N+1)-th iteration trains nothing: N steps, and FP/BP found for them.
        r, ev = self.events("""
            import torch
            p = termsight.Profiler(output_path=out)
            w = torch.ones(4, 4)
            for i, b in enumerate(termsight.torch.steps([torch.ones(4, 4)] * 6)):
                if i >= 3:
                    break
                (b @ w).relu().sum()
            p.stop()
            report = p.analyse()
            folder = p.run_folder
            p.close()
            emit({"folder": folder, "report": report})
            """)
        self.assertEqual(sum(1 for e in ev if e["kind"] == "step_end"), 3)
        s = summary(r["folder"])
        self.assertEqual(s["steps"]["count"], 3)
        self.assertNotEqual(s["steps"]["source"], "none", s["steps"])

    def test_break_at_the_bottom_counts_the_step_it_trained(self):
        r, ev = self.events("""
            import torch
            p = termsight.Profiler(output_path=out)
            w = torch.ones(4, 4)
            for i, b in enumerate(termsight.torch.steps([torch.ones(4, 4)] * 6)):
                (b @ w).relu().sum()
                if i == 2:
                    break
            folder = p.run_folder
            p.close()
            emit({"folder": folder})
            """)
        self.assertEqual(sum(1 for e in ev if e["kind"] == "step_end"), 3)

    def test_workers_forked_while_recording_record_nothing(self):
        # DataLoader workers forked inside a traced block (operators on) record no operators of
        # their own: no session, no run folder of theirs. (The Python fallback's dispatch mode
        # is inherited by a forked worker, whose operators then get a session of its own.)
        if not self.native:
            self.skipTest("the native hook's promise")
        r, ev = self.events("""
            import os, torch
            from torch.utils.data import DataLoader, TensorDataset
            p = termsight.Profiler(output_path=out)
            w = torch.ones(4, 4)
            data = TensorDataset(torch.randn(64, 4))
            with termsight.torch.ops():
                (w @ w).relu().sum()
                got = sum(float(b[0].sum()) for b in DataLoader(data, batch_size=8,
                                                                num_workers=2))
            folder = p.run_folder
            p.close()
            emit({"folder": folder, "all": sorted(os.listdir(out))})
            """)
        self.assertEqual(r["all"], [os.path.basename(r["folder"])])
        self.assertTrue(any(e["type"] == "aten::mm" for e in ev if e["kind"] == "op"))

    def test_dataloader_workers_by_role(self):
        # The CPU report names the DataLoader's worker processes by their role.
        r, ev = self.events("""
            import time, torch
            from torch.utils.data import DataLoader, Dataset
            class Slow(Dataset):
                def __len__(self):
                    return 16
                def __getitem__(self, i):
                    t = time.monotonic() + 0.03
                    while time.monotonic() < t:
                        pass
                    return torch.tensor([float(i)])
            p = termsight.Profiler(output_path=out, sample_ms=10)
            for b in termsight.torch.steps(DataLoader(Slow(), batch_size=2, num_workers=2),
                                           ops=False):
                pass
            p.stop()
            report = p.analyse()
            folder = p.run_folder
            p.close()
            emit({"folder": folder, "report": report})
            """)
        import csv
        with open(os.path.join(r["report"], "cpu_processes.csv")) as f:
            rows = list(csv.DictReader(f))
        names = sorted({row["process"] for row in rows})
        self.assertIn("DataLoader worker 0", names, rows)
        self.assertIn("DataLoader worker 1", names, rows)

    def test_record_function_ranges(self):
        # torch.profiler.record_function blocks are ranges of their name around what they hold;
        # the optimizer's own labels too; profiler:: operators are not operators.
        r, ev = self.events("""
            import torch
            p = termsight.Profiler(output_path=out)
            w = torch.ones(4, 4, requires_grad=True)
            opt = torch.optim.SGD([w], lr=0.1)
            with termsight.torch.ops(cuda=False):
                with torch.profiler.record_function("my_block"):
                    y = (w @ w).sum()
                y.backward()
                opt.step()
            folder = p.run_folder
            p.close()
            emit({"folder": folder})
            """)
        ops = [e for e in ev if e["kind"] == "op"]
        blocks = [e for e in ops if e["name"] == "my_block"]
        self.assertEqual(len(blocks), 1, [e["name"] for e in ops])
        self.assertEqual(blocks[0]["type"], "record_function")
        inside = [e for e in ops if "aten::mm" in e["name"] and
                  blocks[0]["begin"] <= e["begin"] and e["end"] <= blocks[0]["end"]]
        self.assertEqual(len(inside), 1, ops)
        self.assertTrue(any(e["name"].startswith("Optimizer.step#SGD.step") for e in ops),
                        [e["name"] for e in ops])
        self.assertFalse([e for e in ops if "profiler::" in e["name"]])

    def test_one_queue_per_loader_across_epochs(self):
        # 300 epochs of one loader (more than the library's 256 queues): one prefetch queue,
        # registered once and sampled in every epoch; a second loader gets its own.
        r, ev = self.events("""
            import torch
            from torch.utils.data import DataLoader, TensorDataset
            data = TensorDataset(torch.arange(8.0))
            loader = DataLoader(data, batch_size=4, num_workers=1, persistent_workers=True)
            other = DataLoader(data, batch_size=2, num_workers=1, persistent_workers=True)
            p = termsight.Profiler(output_path=out)
            for epoch in range(300):
                for b in termsight.torch.steps(loader, ops=False, queue_ms=1):
                    pass
            for b in termsight.torch.steps(other, ops=False, queue_ms=1):
                pass
            folder = p.run_folder
            p.close()
            emit({"folder": folder})
            """)
        infos = [e for e in ev if e["kind"] == "queue_info" and e["name"] == "DataLoader prefetch"]
        self.assertEqual(len(infos), 2, infos)  # one per loader, one collection window
        self.assertEqual(sum(1 for e in ev if e["kind"] == "step_begin"), 300 * 2 + 4)

    def test_ops_names_scopes_and_backward(self):
        r, ev = self.events("""
            import torch
            p = termsight.Profiler(output_path=out)
            model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
            x = torch.ones(2, 4, requires_grad=True)
            with termsight.torch.ops(model=model):
                with termsight.torch.ops():          # inner: does nothing
                    y = model(x).sum()
                y.backward()
            z = model(x)                              # outside: not recorded
            folder = p.run_folder
            p.close()
            emit({"folder": folder})
            """)
        ops = [e for e in ev if e["kind"] == "op"]
        names = [e["name"] for e in ops]
        self.assertIn("0/aten::addmm", names)
        self.assertIn("1/aten::relu", names)
        self.assertEqual(names.count("0/aten::addmm"), 1, "the second forward ran outside ops()")
        if self.native:
            # Backward nodes and what they run carry the module of the forward that made them.
            self.assertIn("1/aten::threshold_backward", names)
            self.assertIn("1/ReluBackward0", names)
            self.assertIn("0/AddmmBackward0", names)
        else:
            self.assertIn("aten::threshold_backward", names)
        for e in ops:
            want = e["name"].rsplit("/", 1)[-1]
            if want.startswith("autograd::engine::evaluate_function: "):
                want = "autograd::engine::evaluate_function"
            self.assertEqual(e["type"], want, e)

    def test_module_names_off(self):
        # module_names(False): the same operators, no module in their names, no hooks left.
        r, ev = self.events("""
            import torch
            p = termsight.Profiler(output_path=out)
            model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
            x = torch.ones(2, 4)
            was = termsight.torch.module_names(False)
            with termsight.torch.ops(model=model):
                model(x)
            hooks = len(torch.nn.modules.module._global_forward_pre_hooks)
            termsight.torch.module_names(True)
            with termsight.torch.ops(model=model):
                model(x)
            folder = p.run_folder
            p.close()
            emit({"folder": folder, "was": was, "hooks_off": hooks})
            """)
        self.assertTrue(r["was"])
        self.assertEqual(r["hooks_off"], 0)
        names = [e["name"] for e in ev if e["kind"] == "op"]
        self.assertEqual(names.count("aten::addmm"), 1, names)    # off: no module
        self.assertEqual(names.count("0/aten::addmm"), 1, names)  # on again: named

    def test_nested_operators_and_self_time(self):
        # aten::conv2d runs aten::convolution, which runs ... aten::mkldnn_convolution: the inner
        # operators are recorded inside the outer, and the outer's self time is what the inner
        # leave (the Python fallback sees only the outermost).
        r, ev = self.events("""
            import torch
            p = termsight.Profiler(output_path=out)
            conv = torch.nn.Conv2d(3, 16, 3)
            x = torch.randn(8, 3, 64, 64)
            for _ in termsight.torch.steps(range(3), model=conv):
                conv(x).sum().backward()
            p.stop()
            report = p.analyse()
            folder = p.run_folder
            p.close()
            emit({"folder": folder, "report": report})
            """)
        import csv
        with open(os.path.join(r["report"], "op_type_statistics.csv")) as f:
            rows = {row["type"]: row for row in csv.DictReader(f)}
        if not self.native:
            self.assertNotIn("aten::mkldnn_convolution", rows)
            return
        conv, inner = rows["aten::convolution"], rows["aten::mkldnn_convolution"]
        self.assertEqual(int(conv["count"]), 3)
        self.assertEqual(int(inner["count"]), 3)
        self.assertLess(float(conv["self_us"]), 0.5 * float(conv["total_us"]), conv)
        self.assertGreater(float(inner["self_us"]), 0.5 * float(conv["total_us"]), inner)
        ops = [e for e in ev if e["kind"] == "op"]
        outer = [e for e in ops if e["type"] == "aten::convolution"]
        nested = [e for e in ops if e["type"] == "aten::mkldnn_convolution"]
        for o, n in zip(outer, nested):
            self.assertTrue(o["begin"] <= n["begin"] and n["end"] <= o["end"], (o, n))

    def test_counts_agree_with_torch_profiler(self):
        # The same training step under torch.profiler and under termsight: every aten operator
        # is counted as often by both (termsight's own hooks run no operator of the user's).
        r, ev = self.events("""
            import collections, torch
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(),
                                        torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 3))
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            x, y = torch.randn(4, 1, 8, 8), torch.randint(0, 3, (4,))
            def step():
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
            step()  # warm: lazily made state (the optimizer's) is made outside both
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                step()
            theirs = {e.key: e.count for e in prof.key_averages() if e.key.startswith("aten::")}
            p = termsight.Profiler(output_path=out)
            for _ in termsight.torch.steps(range(1), model=model):
                step()
            folder = p.run_folder
            p.close()
            emit({"folder": folder, "theirs": theirs})
            """)
        ours = {}
        for e in ev:
            if e["kind"] == "op" and e["type"].startswith("aten::"):
                ours[e["type"]] = ours.get(e["type"], 0) + 1
        theirs = r["theirs"]
        self.assertIn("aten::convolution_backward", theirs)
        if self.native:
            self.assertEqual(ours, theirs)
        else:
            # The dispatch mode sees only the outermost operators, each no more often, but for
            # the detaches that a Python dispatch mode makes PyTorch run (the reason the native
            # hook is preferred).
            for op, n in ours.items():
                if op != "aten::detach":
                    self.assertLessEqual(n, theirs.get(op, 0), op)

    def test_operators_only_while_collecting(self):
        r = self.child("""
            import termsight.torch
            from termsight import _lib
            from torch.utils._python_dispatch import _get_current_dispatch_mode as current
            hook = _lib.load_torch_hook()
            def on():
                if hook is None:
                    return current() is not None
                was = hook.termsight_torch_enable(0)
                hook.termsight_torch_enable(was)
                return bool(was)
            p = termsight.Profiler(output_path=out, start_profile=False)
            idle = [on() for _ in termsight.torch.steps([1, 2])]
            p.start()
            running = [on() for _ in termsight.torch.steps([1, 2])]
            after = on()
            p.close()
            emit({"idle": idle, "on": running, "after": after})
            """)
        self.assertEqual(r["idle"], [False, False])
        self.assertEqual(r["on"], [True, True])
        self.assertFalse(r["after"], "operator recording ends with the loop")

    def test_without_profiler_and_errors(self):
        r = self.child("""
            import termsight.torch
            got = list(termsight.torch.steps(range(4), ops=False))
            errors = []
            for bad in (-1, "10", True):
                try:
                    list(termsight.torch.steps([1], queue_ms=bad))
                except ValueError as e:
                    errors.append(str(e))
            try:
                with termsight.torch.ops(cuda=True):
                    pass
            except RuntimeError as e:
                errors.append(str(e))
            emit({"got": got, "errors": errors})
            """)
        self.assertEqual(r["got"], [0, 1, 2, 3])
        self.assertEqual(len(r["errors"]), 4, r["errors"])
        self.assertIn("queue_ms", r["errors"][0])
        self.assertIn("cannot use CUDA", r["errors"][3])


if __name__ == "__main__":
    unittest.main()


# An unmodified training script: nothing of termsight in it. Two epochs of a training loop over
# a two-worker DataLoader (7 batches each), each followed by a validation loop under no_grad;
# "break" as argv[1] leaves the second epoch at the top of its fourth batch.
PLAIN_SCRIPT = textwrap.dedent("""\
    import sys
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    x = torch.randn(288, 1, 12, 12)
    y = (x.mean(dim=(1, 2, 3)) > 0).long()
    train = DataLoader(TensorDataset(x[:224], y[:224]), batch_size=32, num_workers=2)
    val = DataLoader(TensorDataset(x[224:], y[224:]), batch_size=32)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(400, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(2):
        for i, (xb, yb) in enumerate(train):
            if epoch == 1 and i == 3 and sys.argv[1:] == ["break"]:
                break
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            correct = sum((model(xb).argmax(1) == yb).sum().item() for xb, yb in val)
    print("trained")
    """)


# Training loops of several shapes (accumulate.py SHAPE [api]): 12 batches per epoch, 2 epochs;
# "acc2"/"acc4" accumulate gradients over 2 or 4 micro-batches, "gan" steps a second optimizer
# every batch, "amp" steps through AMP's GradScaler; an LR scheduler and gradient clipping
# throughout. It counts its optimizer steps.
ACCUMULATE_SCRIPT = textwrap.dedent("""\
    import sys, torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    shape, api = sys.argv[1], sys.argv[2:] == ["api"]
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(96, 8), torch.randint(0, 3, (96,)))
    loader = DataLoader(data, batch_size=8)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    disc = nn.Linear(3, 1)
    opt_d = torch.optim.SGD(disc.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)
    accum = {"acc2": 2, "acc4": 4}.get(shape, 1)
    scaler = torch.cuda.amp.GradScaler(enabled=torch.cuda.is_available())
    if api:
        import termsight.torch as tt
    optimizer_steps = 0
    for epoch in range(2):
        for i, (x, y) in enumerate(tt.steps(loader) if api else loader):
            out = model(x)
            (nn.functional.cross_entropy(out, y) / accum).backward()
            if shape == "gan":
                disc(out.detach()).mean().backward()
                opt_d.step()
                opt_d.zero_grad()
            if (i + 1) % accum == 0:
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if shape == "amp":
                    scaler.step(opt)
                    scaler.update()
                else:
                    opt.step()
                opt.zero_grad(set_to_none=True)
                sched.step()
                optimizer_steps += 1
    print("optimizer_steps", optimizer_steps)
    """)


# Validation every 5 optimizer steps inside the training loop (the script times its steps and
# its validation passes itself and prints them last).
VALIDATE_SCRIPT = textwrap.dedent("""\
    import json, sys, time, torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    torch.manual_seed(0)
    torch.set_num_threads(1)
    train = DataLoader(TensorDataset(torch.randn(160, 64), torch.randint(0, 4, (160,))),
                       batch_size=8)
    val = DataLoader(TensorDataset(torch.randn(640, 64), torch.randint(0, 4, (640,))),
                     batch_size=8)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    steps, step_s, val_s, passes, each = 0, 0.0, 0.0, 0, []
    batches = train
    if "api" in sys.argv:
        import termsight.torch as tt
        batches = tt.steps(train)
    t = time.perf_counter()
    for x, y in batches:
        for _ in range(3):
            nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()
        steps += 1
        step_s += time.perf_counter() - t
        each.append(1e3 * (time.perf_counter() - t))
        if steps % 5 == 0:
            v0 = time.perf_counter()
            model.eval()
            with torch.no_grad():
                correct = sum((model(vx).argmax(1) == vy).sum().item() for vx, vy in val)
            model.train()
            val_s += time.perf_counter() - v0
            passes += 1
        t = time.perf_counter()
    print(json.dumps({"steps": steps, "avg_step_ms": 1e3 * step_s / steps,
                      "val_ms": 1e3 * val_s, "passes": passes, "step_ms": each}))
    """)


INTERRUPT_SCRIPT = textwrap.dedent("""\
    # Ctrl-C in the middle of step 7's forward pass (SIGINT sent to itself from the model).
    import os, signal, sys, torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(160, 16), torch.randint(0, 4, (160,))),
                        batch_size=8)
    done = 0

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(16, 64), nn.Linear(64, 4)

        def forward(self, x):
            h = self.a(x).relu()
            if done == 6:
                os.kill(os.getpid(), signal.SIGINT)  # delivered before the next line runs
            return self.b(h)

    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = loader
    if "api" in sys.argv:
        import termsight.torch as tt
        batches = tt.steps(loader)
    try:
        for x, y in batches:
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad()
            done += 1
    except KeyboardInterrupt:
        print("interrupted after %d steps" % done, flush=True)
        sys.exit(130)
    """)


@unittest.skipUnless(HAVE_TORCH, "" if HAVE_TORCH else WHY)
class ZeroCode(Base):
    """`termsight run -- python3 train.py` with a script that never heard of termsight."""

    def run_plain(self, *args, run_args=()):
        script = os.path.join(self.tmp, "train.py")
        with open(script, "w") as f:
            f.write(PLAIN_SCRIPT)
        out = os.path.join(self.tmp, "data")
        e = dict(os.environ)
        e.pop("PYTHONPATH", None)  # the script imports nothing of ours: run must provide it
        e.pop("TERMSIGHT_LIB", None)
        p = subprocess.run([cli(), "run", "-o", out] + list(run_args) +
                           ["--", sys.executable, script] + list(args),
                           cwd=self.tmp, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=300)
        err = p.stderr.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 0, err)
        self.assertIn(b"trained", p.stdout)
        folders = os.listdir(out)
        # One process profiled: nothing the profiler itself ran (ldconfig, gcc) got a folder.
        self.assertEqual(len(folders), 1, folders)
        folder = os.path.join(out, folders[0])
        rc = subprocess.run([cli(), "analyse", folder], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, timeout=300)
        self.assertEqual(rc.returncode, 0, rc.stderr)
        return folder, summary(folder), dump(folder), err

    def test_steps_waits_queue_workers_and_operators(self):
        folder, s, ev, err = self.run_plain(run_args=["--sample-ms", "10"])
        self.assertEqual(s["steps"]["count"], 14, "7 training batches in each of 2 epochs")
        waits = [e for e in ev if e["kind"] == "op" and e["name"] == "DataLoader.__next__"]
        self.assertEqual(len(waits), 14 + 2 * 2, "validation batches are waits, not steps")
        names = {e["name"] for e in ev if e["kind"] == "op"}
        self.assertIn("0/aten::conv2d", names)
        self.assertIn("3/aten::addmm", names)
        if NATIVE_BUILT:
            self.assertIn("0/aten::convolution_backward", names)
            self.assertIn("0/aten::mkldnn_convolution", names)
            self.assertTrue(any(n.startswith("Optimizer.step#SGD.step") for n in names))
        q = [x for x in s["queues"] if x["queue"] == "DataLoader prefetch"]
        self.assertEqual(len(q), 1, s["queues"])
        import csv
        with open(os.path.join(folder, "report", "cpu_processes.csv")) as f:
            procs = {row["process"] for row in csv.DictReader(f)}
        self.assertIn("DataLoader worker 0", procs)
        self.assertNotIn("Traceback", err)

    def test_a_loop_left_at_its_top(self):
        # The second epoch stops at the top of its fourth batch: 7 + 3 steps trained.
        _, s, ev, _ = self.run_plain("break")
        self.assertEqual(s["steps"]["count"], 10)

    def test_a_script_that_marks_its_own_steps(self):
        # examples/torch_cnn.py uses termsight.torch.steps(): under run, its 12 steps stay 12.
        out = os.path.join(self.tmp, "data")
        e = dict(os.environ)
        e.pop("TERMSIGHT_LIB", None)
        p = subprocess.run([cli(), "run", "-o", out, "--", sys.executable, EXAMPLE, "--steps",
                            "12", "--workers", "2"], cwd=self.tmp, env=e,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        folders = os.listdir(out)
        self.assertEqual(len(folders), 1, folders)
        ev = dump(os.path.join(out, folders[0]))
        self.assertEqual(sum(1 for x in ev if x["kind"] == "step_end"), 12)
        waits = [x for x in ev if x["kind"] == "op" and x["name"] == "DataLoader.__next__"]
        self.assertEqual(len(waits), 12)

    def run_loop(self, name, text, api, rc=0):
        """Writes text as NAME.py, runs it under `termsight run` (with "api": through
        steps(loader)) and analyses its run folder: (the finished process, the run folder)."""
        script = os.path.join(self.tmp, name + ".py")
        with open(script, "w") as f:
            f.write(text)
        out = os.path.join(self.tmp, "data-%s-%d" % (name, api))
        e = dict(os.environ)
        e.pop("TERMSIGHT_LIB", None)
        p = subprocess.run([cli(), "run", "-o", out, "--", sys.executable, script]
                           + (["api"] if api else []), cwd=self.tmp, env=e,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        self.assertEqual(p.returncode, rc, p.stderr.decode("utf-8", "replace"))
        folder = os.path.join(out, os.listdir(out)[0])
        a = subprocess.run([cli(), "analyse", folder], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=300)
        self.assertEqual(a.returncode, 0, a.stderr)
        return p, folder

    def test_validation_is_no_step(self):
        # A validation pass (model.eval(), torch.no_grad(), its own loader) every 5 optimizer
        # steps, inside the training loop: the steps are the optimizer steps, the passes are
        # counted apart with about the time the script measured. Under run no step holds one;
        # through steps(loader), whose step runs until the loop takes its next batch, the pass
        # is the step's evaluation part, never its tail, and makes no step slow.
        for api in (False, True):
            with self.subTest(api=api):
                p, folder = self.run_loop("validate", VALIDATE_SCRIPT, api)
                own = json.loads(p.stdout.decode().strip().splitlines()[-1])
                st = summary(folder)["steps"]
                self.assertEqual(st["count"], own["steps"])
                self.assertEqual(st["eval_passes"], own["passes"])
                self.assertGreater(st["eval_us"] / 1e3, 0.7 * own["val_ms"], (st, own))
                self.assertLess(st["eval_us"] / 1e3, 1.3 * own["val_ms"] + 5, (st, own))
                inside = st["avg_eval_us"] * st["count"]
                if api:
                    self.assertGreater(inside, 0.9 * st["eval_us"], st)
                else:
                    self.assertEqual(inside, 0, st)
                # Had validation been training, the average would hold val_ms / steps more.
                per_step_val = own["val_ms"] / own["steps"]
                train_ms = (st["avg_total_us"] - st["avg_eval_us"]) / 1e3
                self.assertLess(train_ms, own["avg_step_ms"] + 0.5 * per_step_val, (st, own))
                self.assertLess(st["avg_tail_us"] / 1e3, 0.5 * per_step_val, (st, own))
                # The slowest steps hold no validation pass: each is its own time as the script
                # took it (a loaded machine stretches both alike), not that and a pass more.
                for slow in st["slowest"]:  # step 1 warms up: slow, and no validation
                    if slow["step"] > 1:
                        self.assertLess(slow["total_us"] / 1e3,
                                        own["step_ms"][slow["step"] - 1]
                                        + 0.5 * own["val_ms"] / own["passes"], (st, own))
                with open(os.path.join(folder, "report", "report.txt")) as f:
                    self.assertIn("evaluation: %d passes" % own["passes"], f.read())
                with open(os.path.join(folder, "report", "report.html")) as f:
                    self.assertIn("<p>Evaluation: %d passes" % own["passes"], f.read())

    def test_interrupted_step_is_unfinished(self):
        # Ctrl-C in the middle of a forward pass: the steps finished are counted, the
        # interrupted one is marked unfinished and is in no average, under run and through
        # steps(loader).
        for api in (False, True):
            with self.subTest(api=api):
                p, folder = self.run_loop("interrupt", INTERRUPT_SCRIPT, api, rc=130)
                self.assertIn(b"interrupted after 6 steps", p.stdout)
                st = summary(folder)["steps"]
                self.assertEqual((st["count"], st["unfinished_step"]), (6, 7), st)
                with open(os.path.join(folder, "report", "report.txt")) as f:
                    self.assertIn("unfinished: step 7 began and did not end", f.read())

    def test_a_step_is_an_optimizer_step(self):
        # Gradient accumulation of 2 and 4 micro-batches, an LR scheduler, gradient clipping,
        # zero_grad(set_to_none=True), two optimizers stepping every batch (a GAN's), AMP's
        # GradScaler (disabled without CUDA, as on CPU it is): the steps
        # are the script's own count of optimizer steps, under run and through steps(loader);
        # TERMSIGHT_TORCH_STEP=batch counts batches.
        script = os.path.join(self.tmp, "accumulate.py")
        with open(script, "w") as f:
            f.write(ACCUMULATE_SCRIPT)
        cases = [("plain", False, {}, None), ("acc4", False, {}, None),
                 ("gan", False, {}, None), ("amp", False, {}, None), ("acc2", True, {}, None),
                 ("acc2", False, {"TERMSIGHT_TORCH_STEP": "batch"}, 24)]
        if LONG:  # each shape once more, the other way
            cases += [("acc2", False, {}, None), ("acc4", True, {}, None)]
        # The programs run at once, each with its own output folder; then each is checked.
        runs = []
        try:
            for shape, api, env, batches in cases:
                out = os.path.join(self.tmp, "data-%s-%d-%d" % (shape, api, len(env)))
                e = dict(os.environ, **env)
                e.pop("TERMSIGHT_LIB", None)
                p = subprocess.Popen([cli(), "run", "-o", out, "--", sys.executable, script, shape]
                                     + (["api"] if api else []), cwd=self.tmp, env=e,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                runs.append((shape, api, env, batches, out, p))
            results = [p.communicate(timeout=300) for *_, p in runs]
        finally:
            for *_, p in runs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        for (shape, api, env, batches, out, p), (stdout, stderr) in zip(runs, results):
            with self.subTest(shape=shape, api=api, env=env):
                err = stderr.decode("utf-8", "replace")
                self.assertEqual(p.returncode, 0, err)
                self.assertNotIn("Warning", err)  # no LR scheduler warning about step order
                own = int(re.search(rb"optimizer_steps (\d+)", stdout).group(1))
                folders = os.listdir(out)
                self.assertEqual(len(folders), 1, folders)
                ends = [x for x in dump(os.path.join(out, folders[0])) if x["kind"] == "step_end"]
                self.assertEqual(len(ends), batches or own, (shape, api, env, own))

    def test_torch_profiler_blocks_lend_cupti(self):
        # Under run, a torch.profiler block is wrapped: termsight lends CUPTI before the trace
        # is prepared and takes it back after it ends, also when the block raises; the
        # profiler's own results are as without termsight.
        script = os.path.join(self.tmp, "prof.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent("""\
                import torch
                import termsight.torch as tt
                cls = torch.autograd.profiler.profile
                assert cls._prepare_trace.__module__ == "termsight.torch", "not wrapped"
                calls = []
                class Lib:
                    def termsight_cuda_lend(self, lent):
                        calls.append(lent)
                        return 0
                tt._lend_patched.clear()
                cls._prepare_trace, cls.__exit__ = tt._lend_patched_from
                tt._install_profiler_lend(torch, Lib())
                x = torch.randn(16, 16)
                with torch.profiler.profile() as p:
                    x @ x
                assert calls == [1, 0], calls
                try:
                    with torch.autograd.profiler.profile():
                        raise KeyError("inside the block")
                except KeyError:
                    pass
                assert calls == [1, 0, 1, 0], calls
                assert any("mm" in e.name for e in p.events()), [e.name for e in p.events()]
                print("lent", calls)
                """))
        e = dict(os.environ)
        e.pop("TERMSIGHT_LIB", None)
        p = subprocess.run([cli(), "run", "-o", os.path.join(self.tmp, "data"), "--",
                            sys.executable, script], cwd=self.tmp, env=e, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr.decode("utf-8", "replace"))
        self.assertIn(b"lent [1, 0, 1, 0]", p.stdout)

    def test_no_python(self):
        _, s, ev, _ = self.run_plain(run_args=["--no-python"])
        self.assertEqual(s["steps"]["count"], 0)
        self.assertFalse([e for e in ev if e["kind"] == "op"])

    def test_the_programs_own_sitecustomize_still_runs(self):
        site = os.path.join(self.tmp, "site")
        os.makedirs(site)
        with open(os.path.join(site, "sitecustomize.py"), "w") as f:
            f.write("import os\nos.environ['SITE_RAN'] = 'yes'\n")
        script = os.path.join(self.tmp, "check.py")
        with open(script, "w") as f:
            f.write("import os, sys\nsys.exit(0 if os.environ.get('SITE_RAN') == 'yes' else 5)\n")
        e = dict(os.environ)
        e["PYTHONPATH"] = site
        p = subprocess.run([cli(), "run", "-o", os.path.join(self.tmp, "data"), "--",
                            sys.executable, script], env=e, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)


class HelpersPython(Helpers):
    """The same with the Python fallback (a TorchDispatchMode), as where libtorch-dev is absent;
    the tests that record no operators (ops=False throughout) run in Helpers only, as neither the
    hook nor the fallback takes part in them."""

    native = False
    hook_env = {"TERMSIGHT_TORCH_HOOK": "0"}

    def _no_operators(self):
        self.skipTest("ops=False: neither the hook nor the fallback takes part (run in Helpers)")

    test_break_ends_the_step_and_lists_work = _no_operators
    test_one_queue_per_loader_across_epochs = _no_operators
    test_dataloader_workers_by_role = _no_operators
