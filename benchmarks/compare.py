#!/usr/bin/env python3
"""Compares two ftl_bench command lines (two builds, or one build with two
settings) interleaved in one session: A, B, B, A, A, B, ... so that the host's
drift hits both alike. Prints, per figure of ftl's column, the median of the
runs' medians for each side, B over A, and the cross-core probe (R2) of each
round, so the host state a figure came from can be told.

  benchmarks/compare.py --a "/tmp/old/ftl_bench" --b "build/bench/benchmarks/ftl_bench" \\
      --rounds 3 -- --systems ftl,reference --filter W1,W2,W3,W4,W5,W6,W7,W8,R2

Everything after "--" is passed to both sides; --a and --b may carry their own
arguments too ("ftl_bench --threads 1"). Exits non-zero if a run fails.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile


def run(command, extra, json_path):
    args = shlex.split(command) + extra + ["--json", json_path]
    result = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stderr[-4000:])
        sys.exit(f"compare.py: {' '.join(args)} failed ({result.returncode})")
    with open(json_path) as f:
        return json.load(f)


def medians(data, system="ftl"):
    figures = {}
    for cell in data["results"]:
        if cell.get("system") == system and cell.get("status") == "ok":
            figures[cell["figure"]] = cell["median"]
    return figures


def probe(data):
    for cell in data["results"]:
        if cell.get("figure") == "R2" and cell.get("status") == "ok":
            return cell["median"]
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", required=True, help="side A's ftl_bench command")
    parser.add_argument("--b", required=True, help="side B's ftl_bench command")
    parser.add_argument("--a-name", default="A")
    parser.add_argument("--b-name", default="B")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side (default 3)")
    parser.add_argument("--system", default="ftl", help="the column compared (default ftl)")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="-- then arguments for both sides")
    options = parser.parse_args()
    extra = options.rest[1:] if options.rest[:1] == ["--"] else options.rest

    runs = {"A": [], "B": []}
    probes = []
    with tempfile.TemporaryDirectory() as scratch:
        for round_index in range(options.rounds):
            order = ["A", "B"] if round_index % 2 == 0 else ["B", "A"]
            for side in order:
                command = options.a if side == "A" else options.b
                path = os.path.join(scratch, f"{side}{round_index}.json")
                data = run(command, extra, path)
                runs[side].append(medians(data, options.system))
                probes.append((round_index + 1, side, probe(data)))
                print(f"round {round_index + 1} {side}: done (R2 {probe(data) or '-'} ns)", file=sys.stderr)

    names = {"A": options.a_name, "B": options.b_name}
    figures = []
    for figure_map in runs["A"] + runs["B"]:
        for figure in figure_map:
            if figure not in figures:
                figures.append(figure)
    print(f"{'figure':<8} {names['A']:>12} {names['B']:>12} {'B/A':>7}   runs (A | B)")
    for figure in figures:
        values = {side: [r[figure] for r in runs[side] if figure in r] for side in "AB"}
        if not values["A"] or not values["B"]:
            continue
        a = statistics.median(values["A"])
        b = statistics.median(values["B"])
        ratio = b / a if a else float("nan")
        detail = " ".join(f"{v:.4g}" for v in values["A"]) + " | " + " ".join(f"{v:.4g}" for v in values["B"])
        print(f"{figure:<8} {a:>12.4g} {b:>12.4g} {ratio:>7.3f}   {detail}")
    print("cross-core probe (R2, ns) per run: " +
          ", ".join(f"{r}{s} {p:.0f}" if p else f"{r}{s} -" for r, s, p in probes))


if __name__ == "__main__":
    main()
