#!/usr/bin/env python3
"""Writes the smallest run folder termsight diff reads: RUN/report/step_trace.csv and
RUN/report/step_ops.csv, of STEPS steps, each step MatMul (mm us) plus ReLU (relu us) with up to
3 % of jitter drawn from SEED, a 100 us interval and a 50 us tail.

usage: diff_gen.py RUN STEPS MM RELU SEED"""
import os
import random
import sys


def main():
    run, steps, mm, relu, seed = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), \
        float(sys.argv[4]), int(sys.argv[5])
    rep = os.path.join(run, "report")
    os.makedirs(rep)
    rnd = random.Random(seed)
    with open(os.path.join(rep, "step_trace.csv"), "w") as t, \
            open(os.path.join(rep, "step_ops.csv"), "w") as o:
        t.write("step,total_us,interval_us,compute_us,comm_wait_us,tail_us,eval_us\n")
        o.write("step,op,type,count,total_us\n")
        for i in range(1, steps + 1):
            a = mm * (1 + 0.03 * rnd.random())
            b = relu * (1 + 0.03 * rnd.random())
            c = a + b
            t.write("%d,%.3f,100.000,%.3f,0.000,50.000,0.000\n" % (i, 150 + c, c))
            o.write("%d,Default/a/MatMul-op1,MatMul,1,%.3f\n" % (i, a))
            o.write("%d,Default/b/ReLU-op2,ReLU,1,%.3f\n" % (i, b))


if __name__ == "__main__":
    main()
