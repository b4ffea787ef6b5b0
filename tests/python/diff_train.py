"""A small training-like program for termsight diff's test (test_diff.py): STEPS steps, each a
data wait and four named operators that sleep for fixed times (an operator defined as a sleep is
as steady as an operator can be, so what differs between two runs is the machine's noise), under
its own termsight session. Arguments: the output folder, then how much slower the MatMul and the
Conv2D operators are (factors, 1 for the base program). Prints the run folder."""

import sys
import time

import termsight

STEPS = 200
# The two operators made slower are most of the step (9 of 12 ms), so that the step's own change
# (12.5 %) stands clear of the 5 % threshold on a busy machine too.
OPS = (  # name, type, milliseconds
    ("Default/fc1/MatMul-op1", "MatMul", 6.0),
    ("Default/conv/Conv2D-op2", "Conv2D", 3.0),
    ("Default/act/ReLU-op3", "ReLU", 1.0),
    ("Default/optimizer/SGD-op4", "SGD", 1.0),
)


def main():
    out, slow_matmul, slow_conv = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    factor = {"MatMul": slow_matmul, "Conv2D": slow_conv}
    with termsight.Profiler(output_path=out) as prof:
        train(prof, factor)
        prof.stop()
        print(prof.run_folder)


def train(prof, factor):
    for _ in range(STEPS):
        with prof.step():
            with prof.range("DataLoader.__next__", "DataLoader"):
                time.sleep(0.001)
            for name, type_, ms in OPS:
                with prof.range(name, type_):
                    time.sleep(ms * factor.get(type_, 1.0) / 1000)


if __name__ == "__main__":
    main()
