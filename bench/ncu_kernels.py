#!/usr/bin/env python3
"""Where a GPU step's time goes, kernel by kernel: sums Nsight Compute's per-kernel durations
(`ncu --metrics gpu__time_duration.sum --csv --page raw PROGRAM > FILE.csv`) by kernel name
and prints the kernels that take the most, with their share of the total.

    ncu_kernels.py [--steps N] [--top K] FILE.csv

--steps N divides the totals by the N training steps the program ran (bench_train: warm-up
plus steps times repeats), for the time a step spends in each kernel; the durations are
the kernels' own, one at a time (ncu serialises them), without the gaps between launches.
tools/gpu-bare.sh's `profile` step runs it on bench_train's resnet20 and mnist_mlp."""
import argparse
import collections
import csv
import re
import sys

UNITS = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}


def short_name(name):
    """The kernel's name without its parameter list and return type, templates kept."""
    name = re.sub(r"^void ", "", name.strip())
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    return name[:cut]


def read(path):
    """[(kernel name, microseconds)] from ncu's raw CSV page (its ==PROF== lines skipped)."""
    with open(path, newline="", errors="replace") as f:
        lines = [l for l in f if l.startswith('"')]
    rows = list(csv.reader(lines))
    head = rows[0] if rows else []
    name = next((n for n in ("Kernel Name", "Function Name") if n in head), None)
    if name is None or "gpu__time_duration.sum" not in head:
        raise SystemExit(f"{path}: no ncu CSV with a Kernel Name and gpu__time_duration.sum")
    k, t = head.index(name), head.index("gpu__time_duration.sum")
    body = rows[1:]
    scale = 1e-3  # ncu's default unit for durations: nanoseconds
    if body and body[0][k] == "":  # the units row
        scale = UNITS.get(body[0][t].strip(), None)
        if scale is None:
            raise SystemExit(f"{path}: unknown duration unit '{body[0][t]}'")
        body = body[1:]
    out = []
    for r in body:
        if len(r) <= max(k, t) or not r[t].strip():
            continue
        out.append((short_name(r[k]), float(r[t].replace(",", "")) * scale))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    if a.steps < 1 or a.top < 1:
        ap.error("--steps and --top must be positive")
    kernels = read(a.csv)
    total = sum(us for _, us in kernels)
    by = collections.defaultdict(lambda: [0, 0.0])
    for name, us in kernels:
        by[name][0] += 1
        by[name][1] += us
    print(f"{a.csv}: {len(kernels)} kernels, {total:.1f} us in all; per step "
          f"({a.steps}): {len(kernels) / a.steps:.1f} kernels, {total / a.steps:.1f} us")
    print(f"{'us/step':>9} {'share':>6} {'calls/step':>10} {'us/call':>8}  kernel")
    for name, (n, us) in sorted(by.items(), key=lambda kv: -kv[1][1])[:a.top]:
        print(f"{us / a.steps:9.1f} {100 * us / total if total else 0:5.1f}% "
              f"{n / a.steps:10.1f} {us / n:8.2f}  {name[:100]}")


if __name__ == "__main__":
    sys.exit(main())
