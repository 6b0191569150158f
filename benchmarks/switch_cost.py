#!/usr/bin/env python3
"""The fiber switch's cost for each backend: runs ftl_switch_cost from each
build, interleaved round by round, and writes the results document.

    python3 benchmarks/switch_cost.py [--rounds 5] [--out docs/switch_cost.adoc]

Builds it looks for (each one missing is reported and left out):
  build/bench, then build/test       Boost.Context on Linux x86-64, native
  build/linux-aarch64 (qemu-aarch64)  Boost.Context on Linux arm64, emulated
  build/windows-mingw (wine)          Win32 fibers on Windows x86-64, under wine

Under wine the switch is Wine's own SwitchToFiber running natively on the
host's x86-64 CPU, so its figure is a real cost, of Wine's implementation
rather than of Windows'. Under qemu every instruction is translated: the
arm64 figure tells that the backend works, not what it costs on an arm64 CPU.
"""
import argparse
import datetime
import os
import platform
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = re.compile(r"backend=(\S+) os=(\S+) arch=(\S+) ns_per_switch=([0-9.]+)")


def builds():
    found = []
    for directory in ("build/bench", "build/test"):
        path = os.path.join(ROOT, directory, "ftl_switch_cost")
        if os.path.exists(path):
            found.append(("native", [path], "native"))
            break
    path = os.path.join(ROOT, "build/linux-aarch64/ftl_switch_cost")
    if os.path.exists(path):
        found.append(("linux-aarch64", ["qemu-aarch64", path], "qemu-aarch64 (emulated)"))
    path = os.path.join(ROOT, "build/windows-mingw/ftl_switch_cost.exe")
    if os.path.exists(path):
        found.append(("windows-mingw", ["wine", path], "wine (native x86-64)"))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "switch_cost.adoc"))
    args = parser.parse_args()
    runs = builds()
    if not runs:
        sys.exit("switch_cost.py: no build has ftl_switch_cost (configure and build a preset first)")
    environment = dict(os.environ, WINEDEBUG="-all")
    figures = {name: [] for name, _, _ in runs}
    labels = {}
    for round_number in range(args.rounds):
        for name, command, how in runs:
            output = subprocess.run(command, capture_output=True, text=True, env=environment, check=True).stdout
            match = LINE.search(output)
            if not match:
                sys.exit(f"switch_cost.py: {name}: unexpected output: {output!r}")
            backend, system, arch, ns = match.groups()
            labels[name] = (backend, system, arch, how)
            figures[name].append(float(ns))
            print(f"round {round_number + 1}: {name}: {ns} ns per switch", flush=True)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [
        "= The fiber switch on each backend",
        "",
        "Written by `python3 benchmarks/switch_cost.py`; never edited by hand.",
        f"Run: {now}, host {platform.machine()} ({os.cpu_count()} CPUs), {args.rounds} rounds interleaved; each",
        "round's figure is `ftl_switch_cost`'s median of 7 repetitions of 1,000,000 round trips between a",
        "thread's fiber and a pool fiber. One thread on one core: the host's state for cross-core hand-offs",
        "does not enter.",
        "",
        '[cols="2,1,1,1,2,1,1",options="header"]',
        "|===",
        "| build | backend | OS | CPU | how it ran | ns per switch (median) | range",
    ]
    for name, _, _ in runs:
        backend, system, arch, how = labels[name]
        values = figures[name]
        lines.append(f"| {name} | {backend} | {system} | {arch} | {how} | {statistics.median(values):.1f} "
                     f"| {min(values):.1f}-{max(values):.1f}")
    lines += [
        "|===",
        "",
        "Under wine the switch is Wine's SwitchToFiber running natively on the host CPU: a real cost, of",
        "Wine's implementation rather than of Windows'. Under qemu every instruction is translated: the",
        "arm64 figure shows the backend works, not what a switch costs on an arm64 CPU.",
        "",
    ]
    with open(args.out, "w") as out:
        out.write("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
