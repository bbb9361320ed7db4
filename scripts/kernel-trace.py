#!/usr/bin/env python3
"""Reads a CUPTI kernel timeline (kernels/cuda/trace) and prints where a decode step's time goes.

    scripts/kernel-trace.py trace.csv [--steps N] [--first-kernel embedding]

Steps are cut at each launch of the first kernel (embedding). The last N steps whose kernel count equals
the most common count are kept (the decode steps of one batch size). Per kernel name, medians per step:
    n      launches per step
    busy   sum of (end - start): time the kernel was resident, its PDL wait included
    adds   sum of (end_i - max(start_i, max end before i)): what the kernel adds to the critical path
Time in which no kernel ran (a kernel starting after everything before it ended: the host between
steps, whose first kernels may precede the cut) is "idle", per step. span = sum of adds + idle.
"""
import argparse
import collections
import csv
import re
import statistics


def short(name):
    name = name.replace("(anonymous namespace)::", "").removeprefix("void ")
    name = name.split("(")[0]  # drop the parameter list
    base = re.sub(r"<.*>", "", name).split("::")[-1]
    targs = re.search(r"<(.*)>", name)
    return base + ("<" + targs.group(1) + ">" if targs and len(targs.group(1)) < 40 else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--first-kernel", default="embedding")
    a = ap.parse_args()
    rows = []
    with open(a.trace) as f:
        for r in csv.DictReader(f):
            rows.append((int(r["start_ns"]), int(r["end_ns"]), int(r["grid_blocks"]), short(r["name"])))
    rows.sort()
    if not rows:
        raise SystemExit(f"{a.trace}: no kernels recorded (was the library preloaded and CUDA used?)")
    steps, cur = [], []
    for r in rows:
        if a.first_kernel in r[3] and cur:
            steps.append(cur)
            cur = []
        cur.append(r)
    steps.append(cur)
    count = collections.Counter(len(s) for s in steps).most_common(1)[0][0]
    idx = [i for i, s in enumerate(steps) if len(s) == count][-a.steps:]
    spans, idles = [], []
    per = collections.defaultdict(lambda: ([], [], []))  # name -> (n, busy, adds) per step
    for i in idx:
        s = steps[i]
        n, busy, adds = collections.Counter(), collections.Counter(), collections.Counter()
        end_max, idle = s[0][0], 0
        for st, en, _, name in s:
            n[name] += 1
            busy[name] += (en - st) / 1e3
            adds[name] += max(0, en - max(st, end_max)) / 1e3
            idle += max(0, st - end_max)
            end_max = max(end_max, en)
        spans.append((end_max - s[0][0]) / 1e3)
        idles.append(idle / 1e3)
        for name in n:
            per[name][0].append(n[name])
            per[name][1].append(busy[name])
            per[name][2].append(adds[name])
    med = statistics.median
    print(f"{len(idx)} steps of {count} kernels; span median {med(spans):.1f} us "
          f"(min {min(spans):.1f}, max {max(spans):.1f}); idle (no kernel running) median {med(idles):.1f} us")
    total = 0.0
    print(f"{'kernel':60s} {'n':>4s} {'busy us':>9s} {'adds us':>9s} {'adds/launch':>11s}")
    for name, (n, busy, adds) in sorted(per.items(), key=lambda kv: -med(kv[1][2])):
        total += med(adds)
        print(f"{name[:60]:60s} {med(n):4.0f} {med(busy):9.1f} {med(adds):9.1f} {med(adds) / med(n):11.2f}")
    print(f"{'sum of adds':60s} {'':4s} {'':9s} {total:9.1f}")


if __name__ == "__main__":
    main()
